"""Retain regularisers GDR and KLR (MUSE, Shi et al. 2024, Sec. 4, "Unlearning methods").

- GDR: gradient descent on retain data, L_GDR = NLL of the retain answers.
- KLR: keep the model close to the finetuned model f_ref on retain inputs,
  L_KLR = mean over retain answer tokens of KL(p_ref(·|x_<t) || p_θ(·|x_<t)) (the direction MUSE leaves open;
  dukb uses the forward KL from the reference, as NPO's authors do).
Combined with a forget loss as L = L_forget + λ L_reg (λ = ``reg_weight``, default 1).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from dukb.neural.data import encode_qa
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

    lg, lb, _ = shifted(logits, labels)
    return F.cross_entropy(lg.reshape(-1, lg.shape[-1]).float(), lb.reshape(-1), ignore_index=-100)


def klr_loss(logits, ref_logits, labels):
    """L_KLR: mean over labelled positions of KL(p_ref || p_θ) = Σ_v p_ref(v) (log p_ref(v) − log p_θ(v)).

    Args:
        logits: [B, L, V] of the model being unlearned; ref_logits: [B, L, V] of f_ref; labels: [B, L].

    Returns:
        Scalar tensor (nats per token), ≥ 0.
    """

    lg, lb, mask = shifted(logits, labels)
    rg = ref_logits[:, :-1, :]
    logp = torch.log_softmax(lg.float(), -1)
    logq = torch.log_softmax(rg.float(), -1)
    kl = (logq.exp() * (logq - logp)).sum(-1)
    return (kl * mask).sum() / mask.sum().clamp(min=1)


def retain_loss(kind: str | None, state, retain, model=None):
    """The retain term L_reg of one step, on QA items or on encoded texts alike.

    Args:
        kind: "gdr" (:func:`gdr_loss`), "klr" (:func:`klr_loss` against ``state.ref_logits``) or None.
        state: the :class:`dukb.neural.methods.base.WeightState`.
        retain: a list of QA items (encoded here with the model's prompt tags) or an encoded batch (dict with
            input_ids, attention_mask, position_ids, labels); None or empty: no term.
        model: the module to run (default ``state.model``).

    Returns:
        Scalar tensor (nats per token), or None when ``kind`` or ``retain`` is empty.

    Raises:
        InputError: an unknown kind.

    Source: Shi et al. 2024b (MUSE), Sec. 3 (GDR, KLR); Rezaei et al. (RESTOR), Sec. 3.3 (λ · CE on retain texts).
    """
    from dukb import InputError

    if kind not in REG_SUMMARY and kind is not None:
        raise InputError(f"unknown retain term {kind!r} (gdr, klr)")
    if kind is None or retain is None or (not isinstance(retain, dict) and not retain):
        return None
    if isinstance(retain, dict):
        if int(retain["input_ids"].shape[0]) == 0:
            return None
        batch = retain
    else:
        batch = encode_qa(state.lm.tokenizer, state.lm.tags, retain, state.lm.device)
    logits = forward_logits(state.model if model is None else model, batch)
    if kind == "gdr":
        return gdr_loss(logits, batch["labels"])
    return klr_loss(logits, state.ref_logits(batch), batch["labels"])
