"""Negative preference optimisation (NPO; Zhang et al. 2024), and NPO_GDR / NPO_KLR.

L_NPO(θ) = −(2/β) E_{(x,y) ∈ forget} log σ(−β log(p_θ(y|x) / p_ref(y|x))), β = 0.1, with p(y|x) the probability of
the whole answer and f_ref the finetuned model (Wu et al. 2025, Sec. 4 / App. H; MUSE). Swept over steps T like GA,
with twice GA's learning rate (4e-5 for GPT2-XL/Phi-1.5, 2e-5 for Llama).
"""

from __future__ import annotations

from dukb.neural.methods.base import Method, UnlearnContext, gradient_sweep, lr_for, register
from dukb.neural.methods.retain import regulariser, with_retain
from dukb.neural.scoring import forward_logits, sequence_logprob

NPO_LR = {"gpt2-xl": 4e-5, "phi": 4e-5, "llama": 2e-5, "generic": 4e-5, "tiny": 2e-3}
BETA = 0.1


def npo_loss(logp, ref_logp, beta: float = BETA):
    """L_NPO = −(2/β) mean_i log σ(−β (log p_θ(y_i|x_i) − log p_ref(y_i|x_i))).

    Args:
        logp: [B] summed answer log-probabilities under θ; ref_logp: [B] under f_ref; beta: β > 0.

    Returns:
        Scalar tensor. At θ = f_ref it equals (2/β) log 2.
    """
    import torch.nn.functional as F

    return -(2.0 / beta) * F.logsigmoid(-beta * (logp - ref_logp)).mean()


class NPO(Method):
    """NPO, optionally with a retain regulariser ("gdr" or "klr")."""

    param = "steps"
    default_grid = (1, 2, 4, 8, 16)

    def __init__(self, reg: str | None = None, beta: float = BETA):
        self.reg_kind = reg
        self.beta = beta
        self.name = "npo" if reg is None else f"npo_{reg}"

    def sweep(self, ctx: UnlearnContext, grid=None):
        reg = regulariser(self.reg_kind)
        cache = {}

        def step_loss(state, forget_batch, retain_items):
            if "ref" not in cache:  # f_ref's answer log-probs, computed once from θ₀
                ref_s, _ = sequence_logprob(state.ref_logits(forget_batch), forget_batch["labels"])
                cache["ref"] = ref_s.detach()
            s, _ = sequence_logprob(forward_logits(state.model, forget_batch), forget_batch["labels"])
            loss = npo_loss(s, cache["ref"], self.beta)
            return with_retain(loss, reg, state, retain_items, ctx.reg_weight)

        for setting, pred in gradient_sweep(ctx, grid or self.default_grid, lr_for(ctx, NPO_LR), step_loss):
            yield dict(setting, beta=self.beta), pred


register(NPO())
register(NPO("gdr"))
register(NPO("klr"))
