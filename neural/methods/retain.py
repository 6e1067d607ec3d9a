"""Retain regularisers GDR and KLR (MUSE, Shi et al. 2024, Sec. 3; notes/muse.md "Methods").

- GDR: gradient descent on retain data, L_GDR = NLL of the retain answers.
- KLR: keep the model close to the finetuned model f_ref on retain inputs,
  L_KLR = mean over retain answer tokens of KL(p_ref(·|x_<t) || p_θ(·|x_<t)) (the direction MUSE leaves open;
  dukb uses the forward KL from the reference, as NPO's authors do).
Combined with a forget loss as L = L_forget + λ L_reg (λ = ``reg_weight``, default 1).
"""

from __future__ import annotations

from dukb.neural.data import encode_qa
from dukb.neural.methods.base import StepTerms
from dukb.neural.scoring import forward_logits, shifted

#: what a retain regulariser adds to a method's one-line summary
REG_SUMMARY = {"gdr": " + gradient descent on retain QA (GDR)", "klr": " + KL to f_ref on retain QA (KLR)"}


def gdr_loss(logits, labels):
    """L_GDR: mean negative log-likelihood of the labelled (answer) tokens.

    Args:
        logits: [B, L, V]; labels: [B, L] with -100 outside answers.

    Returns:
        Scalar tensor (nats per token).
    """
    import torch.nn.functional as F

    lg, lb, _ = shifted(logits, labels)
    return F.cross_entropy(lg.reshape(-1, lg.shape[-1]).float(), lb.reshape(-1), ignore_index=-100)


def klr_loss(logits, ref_logits, labels):
    """L_KLR: mean over labelled positions of KL(p_ref || p_θ) = Σ_v p_ref(v) (log p_ref(v) − log p_θ(v)).

    Args:
        logits: [B, L, V] of the model being unlearned; ref_logits: [B, L, V] of f_ref; labels: [B, L].

    Returns:
        Scalar tensor (nats per token), ≥ 0.
    """
    import torch

    lg, lb, mask = shifted(logits, labels)
    rg = ref_logits[:, :-1, :]
    logp = torch.log_softmax(lg.float(), -1)
    logq = torch.log_softmax(rg.float(), -1)
    kl = (logq.exp() * (logq - logp)).sum(-1)
    return (kl * mask).sum() / mask.sum().clamp(min=1)


def regulariser(kind: str | None):
    """A function ``(state, retain_items) -> loss`` for kind "gdr", "klr" or None (no regulariser: returns None)."""
    if kind is None:
        return None

    def reg(state, retain_items):
        if not retain_items:
            return None
        batch = encode_qa(state.lm.tokenizer, state.lm.tags, retain_items, state.lm.device)
        logits = forward_logits(state.model, batch)
        if kind == "gdr":
            return gdr_loss(logits, batch["labels"])
        return klr_loss(logits, state.ref_logits(batch), batch["labels"])

    return reg


def step_terms(forget, risk, reg, state, retain_items, weight: float):
    """A gradient step's :class:`dukb.neural.methods.base.StepTerms`: the forget term, the unlearning risk L_u
    (detached) and λ · L_reg when a regulariser and retain items are present.

    Args:
        forget: the forget term to minimise (scalar tensor); risk: L_u, the forget answers' mean NLL (scalar tensor
            or None); reg: a function from :func:`regulariser` or None; state: the
            :class:`dukb.neural.methods.base.WeightState`; retain_items: this step's retain QA; weight: λ.

    Returns:
        StepTerms.

    Source: Wang et al. 2024 (Unlearning with Control), Eqs. 6-7 (unlearning and retaining risks); Shi et al. 2024b
    (MUSE), Sec. 3 (GDR/KLR).
    """
    r = reg(state, retain_items) if reg is not None else None
    return StepTerms(forget, None if risk is None else risk.detach(), None if r is None else weight * r)
