"""SimNPO (Fan et al. 2024): negative preference optimisation without a reference model, length-normalised.

    L_SimNPO(θ) = E_{(x,y) ∈ forget} [ −(2/β) log σ( −(β/|y|) log π_θ(y|x) − γ ) ]

|y| is the number of answer tokens and γ ≥ 0 a reward margin. Unlike NPO (:mod:`dukb.neural.methods.npo`), no
f_ref enters the loss, and dividing by |y| keeps long answers from dominating. β = 2.5 and γ = 0 are the paper's
settings for TOFU (configurable). Swept over steps T like GA and NPO, at NPO's learning rates.
"""

from __future__ import annotations

import torch.nn.functional as F  # noqa: TID253 (a model module: reached only through a command's lazy import)

from dukb import InputError
from dukb.neural.methods.gradient import LossMethod, sequence_risk
from dukb.neural.methods.retain import REG_SUMMARY
from dukb.neural.scoring import sequence_logprob

BETA = 2.5
GAMMA = 0.0


def simnpo_loss(logp_sum, n_tokens, beta: float = BETA, gamma: float = GAMMA):
    """SimNPO's forget loss (Fan et al. 2024, Eq. 4):

        L = (2/β) · mean over answers of −log σ(−(β/|y|) · log π_θ(y|x) − γ).

    Args:
        logp_sum: [B] float, the summed log-probability log π_θ(y|x) of each answer (nats).
        n_tokens: [B] number of answer tokens |y| (≥ 1; 0 is treated as 1).
        beta: β > 0; gamma: margin γ ≥ 0.

    Returns:
        Scalar tensor (nats). At log π_θ(y|x) = 0 and γ = 0 it equals (2/β) log 2.

    Raises:
        InputError: beta <= 0 or gamma < 0.

    Source: Fan et al. 2024, "Simplicity Prevails: Rethinking Negative Preference Optimization for LLM
    Unlearning", Eq. 4 (SimNPO).
    """

    if beta <= 0 or gamma < 0:
        raise InputError(f"SimNPO needs beta > 0 and gamma >= 0, got beta={beta}, gamma={gamma}")
    avg = logp_sum / n_tokens.clamp(min=1)
    return (2.0 / beta) * (-F.logsigmoid(-beta * avg - gamma)).mean()


class SimNPO(LossMethod):
    """SimNPO, optionally with a retain regulariser ("gdr" or "klr")."""

    lr_kind = "npo"  # its default rate: :func:`dukb.neural.families.family_lrs`
    options = ("beta", "gamma")
    nonnegative_options = ("gamma",)
    source = "Fan et al. 2024 (SimNPO), Eq. 4"

    def __init__(self, reg: str | None = None, beta: float = BETA, gamma: float = GAMMA):
        self.reg_kind = reg
        self.beta, self.gamma = beta, gamma
        self.name = "simnpo" if reg is None else f"simnpo_{reg}"
        self.summary = "reference-free, length-normalised NPO on the forget QA (SimNPO)" + REG_SUMMARY.get(reg, "")
        self.uses_retain = reg is not None

    def loss(self, logits, ref_logits, batch, level="sequence"):
        """:func:`simnpo_loss` over the answers' summed log-probabilities (an answer is the unit)."""
        s, n = sequence_logprob(logits, batch["labels"])
        return simnpo_loss(s, n, self.beta, self.gamma)

    def risk(self, logits, batch):
        """L_u: :func:`~dukb.neural.methods.gradient.sequence_risk`."""
        return sequence_risk(logits, batch)

    def loss_and_risk(self, logits, ref, batch, level):
        """The answers' sums s and lengths n computed once for :func:`simnpo_loss` and the risk −Σs / Σ|y|
        (:func:`~dukb.neural.methods.gradient.sequence_risk`'s value)."""
        s, n = sequence_logprob(logits, batch["labels"])
        return simnpo_loss(s, n, self.beta, self.gamma), -s.sum() / n.sum().clamp(min=1)

    def setting_fields(self, cache: dict) -> dict:
        """β and γ."""
        return {"beta": self.beta, "gamma": self.gamma}


__all__ = ["BETA", "GAMMA", "SimNPO", "simnpo_loss"]
