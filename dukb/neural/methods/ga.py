"""Gradient ascent (GA; Jang et al. 2023), and GA_GDR / GA_KLR with a retain regulariser.

L_GA(θ) = −(1/|A|) Σ_{t ∈ answer} −log p_θ(x_t | x_<t) = the negated answer NLL of the forget QA: minimising it
ascends the forget loss. Swept over the number of optimisation steps T ∈ {1, 2, 4, 8, 16} (Wu et al. 2025, App. H;
lr 2e-5 for GPT2-XL/Phi-1.5, 1e-5 for Llama, linear schedule).
"""

from __future__ import annotations

from dukb.neural.families import family_lrs
from dukb.neural.methods.gradient import STEPS_GRID, LossMethod
from dukb.neural.methods.retain import REG_SUMMARY, gdr_loss

#: learning rates by model family (:data:`dukb.neural.families.FAMILIES`, where each rate's source is noted).
GA_LR = family_lrs("ga")


def ga_loss(logits, labels):
    """L_GA = −NLL of the labelled answer tokens (scalar; minimising it is gradient ascent on the NLL).

    Args:
        logits: [B, L, V]; labels: [B, L] with -100 outside answers.
    """
    return -gdr_loss(logits, labels)


class GradientAscent(LossMethod):
    """GA, optionally with a retain regulariser ("gdr" or "klr")."""

    lr_kind = "ga"  # its default rate: :func:`dukb.neural.families.family_lrs`
    source = "Jang et al. 2023; Wu et al. 2025, App. H"

    def __init__(self, reg: str | None = None):
        self.reg_kind = reg
        self.name = "ga" if reg is None else f"ga_{reg}"
        self.summary = "gradient ascent on the forget QA" + REG_SUMMARY.get(reg, "")
        self.document_level = reg is None
        self.uses_retain = reg is not None

    def loss(self, logits, ref_logits, batch, level="sequence"):
        """:func:`ga_loss` (the mean over labelled tokens, at either level)."""
        return ga_loss(logits, batch["labels"])


__all__ = ["GA_LR", "STEPS_GRID", "GradientAscent", "ga_loss"]
