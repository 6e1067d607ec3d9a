"""Gradient ascent (GA; Jang et al. 2023), and GA_GDR / GA_KLR with a retain regulariser.

L_GA(θ) = −(1/|A|) Σ_{t ∈ answer} −log p_θ(x_t | x_<t) = the negated answer NLL of the forget QA: minimising it
ascends the forget loss. Swept over the number of optimisation steps T ∈ {1, 2, 4, 8, 16} (Wu et al. 2025, App. H;
lr 2e-5 for GPT2-XL/Phi-1.5, 1e-5 for Llama, linear schedule).
"""

from __future__ import annotations

from dukb.neural.families import family_lrs
from dukb.neural.methods.base import Method, UnlearnContext, gradient_sweep, lr_for
from dukb.neural.methods.retain import REG_SUMMARY, gdr_loss, regulariser, step_terms
from dukb.neural.scoring import forward_logits

#: learning rates by model family (:data:`dukb.neural.families.FAMILIES`, where each rate's source is noted).
GA_LR = family_lrs("ga")
STEPS_GRID = (1, 2, 4, 8, 16)


def ga_loss(logits, labels):
    """L_GA = −NLL of the labelled answer tokens (scalar; minimising it is gradient ascent on the NLL).

    Args:
        logits: [B, L, V]; labels: [B, L] with -100 outside answers.
    """
    return -gdr_loss(logits, labels)


class GradientAscent(Method):
    """GA, optionally with a retain regulariser ("gdr" or "klr")."""

    param = "steps"
    lr_kind = "ga"  # its default rate: :func:`dukb.neural.families.family_lrs`
    default_grid = STEPS_GRID
    source = "Jang et al. 2023; Wu et al. 2025, App. H"

    def __init__(self, reg: str | None = None):
        self.reg_kind = reg
        self.name = "ga" if reg is None else f"ga_{reg}"
        self.summary = "gradient ascent on the forget QA" + REG_SUMMARY.get(reg, "")
        self.document_level = reg is None
        self.uses_retain = reg is not None

    def forget_loss(self, logits, ref_logits, labels, level: str = "sequence", **options):
        """:func:`ga_loss` (the mean over labelled tokens, at either level)."""
        return ga_loss(logits, labels)

    def sweep(self, ctx: UnlearnContext, grid=None):
        reg = regulariser(self.reg_kind)

        def step_loss(state, forget_batch, retain_items):
            loss = ga_loss(forward_logits(state.model, forget_batch), forget_batch["labels"])
            return step_terms(loss, -loss, reg, state, retain_items, ctx.reg_weight)

        yield from gradient_sweep(ctx, grid or self.default_grid, lr_for(ctx, GA_LR, self), step_loss)
