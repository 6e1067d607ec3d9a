"""Retain regularisers GDR and KLR (MUSE, Shi et al. 2024, Sec. 4, "Unlearning methods").

- GDR: gradient descent on retain data, L_GDR = NLL of the retain answers.
- KLR: keep the model close to the finetuned model f_ref on retain inputs,
  L_KLR = mean over retain answer tokens of KL(p_ref(·|x_<t) || p_θ(·|x_<t)) (the direction MUSE leaves open;
  dukb uses the forward KL from the reference, as NPO's authors do). MUSE's released code computes another
  quantity, ``F.kl_div`` on the raw logits (:func:`klr_loss_raw_logits`, ``klr_form="raw_logits"``).
Combined with a forget loss as L = L_forget + λ L_reg (λ = ``reg_weight``, default 1).
"""

from __future__ import annotations

import torch  # noqa: TID253 (a model module: reached only through a command's lazy import)
import torch.nn.functional as F  # noqa: TID253 (a model module: reached only through a command's lazy import)

from dukb import InputError
from dukb.neural.data import encode_qa
from dukb.neural.scoring import forward_logits, shifted

#: KLR's forms: the per-token KL (:func:`klr_loss`) or MUSE's code's (:func:`klr_loss_raw_logits`)
KLR_FORMS = ("token", "raw_logits")
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


def klr_loss_raw_logits(logits, ref_logits, attention_mask=None):
    """KLR as MUSE's released code computes it: ``F.kl_div(logits, ref_logits, reduction="batchmean",
    log_target=True)``, both raw logits taken for log-probabilities,

        L = (1/B) Σ_{b, t, v} exp(z_ref[b, t, v]) · (z_ref[b, t, v] − z[b, t, v]),

    over every position t of the input (MUSE's retain batches are unpadded chunks, no shift, no label mask); here
    over the positions whose ``attention_mask`` is 1 (all of them when None), which is the same sum on an unpadded
    batch. It is not a KL divergence (it can be negative and grows with exp of the reference's logits).

    Args:
        logits: [B, L, V] of the model being unlearned; ref_logits: [B, L, V] of f_ref (no gradient flows into it);
        attention_mask: [B, L] (1: a real token) or None.

    Returns:
        Scalar tensor (float32).

    Source: Shi et al. 2024b (MUSE), Sec. 4 (KLR); swj0419/muse_bench baselines/baselines/iterative.py:151-158.
    """
    ref = ref_logits.detach().float()
    per_pos = (ref.exp() * (ref - logits.float())).sum(-1)
    if attention_mask is not None:
        per_pos = per_pos * attention_mask.to(per_pos.dtype)
    return per_pos.sum() / logits.shape[0]


def retain_loss(kind: str | None, state, retain, model=None, klr_form: str = "token"):
    """The retain term L_reg of one step, on QA items or on encoded texts alike.

    Args:
        kind: "gdr" (:func:`gdr_loss`), "klr" (:func:`klr_loss` against ``state.ref_logits``) or None.
        state: the :class:`dukb.neural.methods.base.WeightState`.
        retain: a list of QA items (encoded here with the model's prompt tags) or an encoded batch (dict with
            input_ids, attention_mask, position_ids, labels); None or empty: no term.
        model: the module to run (default ``state.model``).
        klr_form: "token" (:func:`klr_loss`, default) or "raw_logits" (:func:`klr_loss_raw_logits`, MUSE's code).

    Returns:
        Scalar tensor (nats per token), or None when ``kind`` or ``retain`` is empty.

    Raises:
        InputError: an unknown kind or KLR form.

    Source: Shi et al. 2024b (MUSE), Sec. 3 (GDR, KLR); Rezaei et al. (RESTOR), Sec. 3.3 (λ · CE on retain texts).
    """

    if kind not in REG_SUMMARY and kind is not None:
        raise InputError(f"unknown retain term {kind!r} (gdr, klr)")
    if klr_form not in KLR_FORMS:
        raise InputError(f"unknown KLR form {klr_form!r} ({', '.join(KLR_FORMS)})")
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
    if klr_form == "raw_logits":
        return klr_loss_raw_logits(logits, state.ref_logits(batch), batch.get("attention_mask"))
    return klr_loss(logits, state.ref_logits(batch), batch["labels"])
