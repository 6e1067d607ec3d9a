"""Negative preference optimisation (NPO; Zhang et al. 2024), and NPO_GDR / NPO_KLR.

L_NPO(θ) = −(2/β) E_{(x,y) ∈ forget} log σ(−β log(p_θ(y|x) / p_ref(y|x))), β = 0.1, with p(y|x) the probability of
the whole answer and f_ref the finetuned model (Wu et al. 2025, Sec. 4 / App. H; MUSE). Swept over steps T like GA,
with twice GA's learning rate (4e-5 for GPT2-XL/Phi-1.5, 2e-5 for Llama).
"""

from __future__ import annotations

from dukb.neural.methods.base import Method, UnlearnContext, gradient_sweep, lr_for
from dukb.neural.methods.retain import REG_SUMMARY, regulariser, step_terms
from dukb.neural.scoring import forward_logits, sequence_logprob, token_logprobs

NPO_LR = {"gpt2-xl": 4e-5, "phi": 4e-5, "llama": 2e-5, "generic": 4e-5, "tiny": 2e-3, "smollm2": 2e-5}
BETA = 0.1


def npo_loss(logp, ref_logp, beta: float = BETA, mask=None):
    """NPO's loss, the one definition for both levels (Zhang et al. 2024, Eq. 3):

        L_NPO = (2/β) · mean over units of −log σ(−β (log p_θ − log p_ref)) = (2/β) · mean log(1 + (p_θ/p_ref)^β).

    - sequence level (``mask`` None): a unit is an answer, ``logp`` [B] its summed log-probability (Wu et al. 2025,
      App. H; MUSE);
    - token level (``mask`` [B, T]): a unit is a token, ``logp`` [B, T]; averaged over the tokens of each sequence,
      then over sequences with at least one token (RESTOR, Rezaei et al., Sec. 3.3).

    Args:
        logp: log-probabilities under θ ([B] or [B, T]); ref_logp: the same under f_ref (no gradient needed).
        beta: inverse temperature β > 0.
        mask: [B, T] bool for the token level, None for the sequence level.

    Returns:
        Scalar tensor. At θ = f_ref it equals (2/β) log 2.

    Raises:
        InputError: beta <= 0.
    """
    import torch.nn.functional as F

    from dukb import InputError

    if beta <= 0:
        raise InputError(f"NPO's beta must be > 0, got {beta}")
    per = -F.logsigmoid(-beta * (logp - ref_logp))
    if mask is None:
        return (2.0 / beta) * per.mean()
    per = per * mask
    per_seq = per.sum(-1) / mask.sum(-1).clamp(min=1)
    return (2.0 / beta) * per_seq[mask.any(-1)].mean()


def npo_forget_loss(logits, ref_logits, labels, beta: float = BETA, level: str = "sequence"):
    """:func:`npo_loss` from logits: "sequence" level over summed answer log-probabilities, "token" level over
    per-token log-probabilities.

    Args:
        logits: [B, L, V] of θ; ref_logits: [B, L, V] of f_ref (detached here); labels: [B, L], -100 where no loss.
        beta: β > 0; level: "sequence" or "token".

    Raises:
        InputError: unknown level or beta <= 0.
    """
    from dukb import InputError

    if level == "sequence":
        s, _ = sequence_logprob(logits, labels)
        r, _ = sequence_logprob(ref_logits.detach(), labels)
        return npo_loss(s, r, beta)
    if level == "token":
        lp, mask = token_logprobs(logits, labels)
        ref, _ = token_logprobs(ref_logits.detach(), labels)
        return npo_loss(lp, ref, beta, mask)
    raise InputError(f"unknown NPO level {level!r} (sequence or token)")


def npo_token_loss(logits, ref_logits, labels, beta: float = BETA):
    """RESTOR's token-level NPO: :func:`npo_forget_loss` with ``level="token"``,

        L_NPO(x, θ) = (2 / (β T)) Σ_i log(1 + (P_θ(x_i | x_<i) / P_c(x_i | x_<i))^β), averaged over documents.

    Source: Rezaei et al., RESTOR, Sec. 3.3 (NPO, token level); Zhang et al. 2024 (NPO).
    """
    return npo_forget_loss(logits, ref_logits, labels, beta, "token")


class NPO(Method):
    """NPO, optionally with a retain regulariser ("gdr" or "klr")."""

    param = "steps"
    default_grid = (1, 2, 4, 8, 16)
    source = "Zhang et al. 2024; Wu et al. 2025, App. H"

    def __init__(self, reg: str | None = None, beta: float = BETA):
        self.reg_kind = reg
        self.beta = beta
        self.name = "npo" if reg is None else f"npo_{reg}"
        self.summary = "negative preference optimisation on the forget QA" + REG_SUMMARY.get(reg, "")
        self.document_level = reg is None
        self.uses_retain = reg is not None

    @property
    def needs_reference(self) -> bool:
        """NPO compares with f_ref."""
        return True

    def forget_loss(self, logits, ref_logits, labels, level: str = "sequence", **options):
        """:func:`npo_forget_loss` with this method's β (or ``options["beta"]``)."""
        return npo_forget_loss(logits, ref_logits, labels, options.get("beta", self.beta), level)

    def sweep(self, ctx: UnlearnContext, grid=None):
        reg = regulariser(self.reg_kind)
        cache = {}

        def step_loss(state, forget_batch, retain_items):
            if "ref" not in cache:  # f_ref's answer log-probs, computed once from θ₀
                ref_s, _ = sequence_logprob(state.ref_logits(forget_batch), forget_batch["labels"])
                cache["ref"] = ref_s.detach()
            s, n = sequence_logprob(forward_logits(state.model, forget_batch), forget_batch["labels"])
            loss = npo_loss(s, cache["ref"], self.beta)
            return step_terms(loss, -s.sum() / n.sum().clamp(min=1), reg, state, retain_items, ctx.reg_weight)

        for setting, pred in gradient_sweep(ctx, grid or self.default_grid, lr_for(ctx, NPO_LR), step_loss):
            yield dict(setting, beta=self.beta), pred
