"""Negative preference optimisation (NPO; Zhang et al. 2024) in the two forms the papers' tables used, and their
GDR / KLR variants. β = 0.1, f_ref the finetuned model θ₀, swept over steps T like GA with twice GA's learning rate
(4e-5 for GPT2-XL/Phi-1.5, 2e-5 for Llama; Wu et al. 2025, App. H).

- ``npo`` (``form="logit"``, the reference code's): what Eval-DU's and MUSE's code compute,

      L = −(2/β) · mean over b, t, v of log σ(β (z_ref[b, t, v] − z_θ[b, t, v])),

  with z the raw next-token **logits** (not log-probabilities), averaged flatly over every batch row b, every
  position t of the padded sequence (prompt, answer and padding alike; labels are not used) and every vocabulary
  entry v. Source: wrh14/deep_unlearning unlearn_trainer.py, ``CustomFamilyTrainerForgetting.compute_loss``
  (``neg_log_ratio = outputs_f_ref_logits - outputs.logits``; ``loss = -F.logsigmoid(self.beta *
  neg_log_ratio).mean() * 2 / self.beta``, β = 0.1), the reference logits computed once in forget.py; the same
  two lines in swj0419/muse_bench baselines/baselines/iterative.py (``IterativeUnlearner.compute_loss``). Eval-DU's
  data_module.py pads every QA to 500 tokens with EOS (attention mask 0) and those positions enter the mean: under
  ``dukb evaluate --schedule reference`` dukb builds that layout (:func:`eval_du_layout`); otherwise the mean runs
  over the batch's attended positions (MUSE's forget chunks are full windows, with no padding).
- ``npo_seq`` (``form="sequence"``, the NPO paper's): per answer, with p(y|x) the probability of the whole answer,

      L = −(2/β) · mean over answers of log σ(−β log(p_θ(y|x) / p_ref(y|x))),

  Zhang et al. 2024, Eq. 3 (their code: licong-lin/negative-preference-optimization TOFU/dataloader.py, the summed
  answer NLL per sequence); Eval-DU's paper text (Wu et al. 2025, App. H) writes this form; RWKU's code
  (jinzhuoran/RWKU LLaMA-Factory/src/llmtuner/train/npo/trainer.py) computes it too.
- RESTOR's token-level form (Rezaei et al., Sec. 3.3), for document unlearning, is :func:`npo_token_loss`, reached
  through :meth:`NPO.loss` with ``level="token"`` (what :func:`dukb.neural.docs.unlearn_documents` runs); RESTOR's
  code computes one term on the batch-mean NLL difference instead, :func:`npo_batch_loss` (``level="batch"``,
  ``dukb restor --npo-form batch``).

At θ = f_ref every form equals (2/β) log 2.
"""

from __future__ import annotations

import torch  # noqa: TID253 (a model module: reached only through a command's lazy import)
import torch.nn.functional as F  # noqa: TID253 (a model module: reached only through a command's lazy import)

from dukb import InputError
from dukb.neural.families import family_lrs
from dukb.neural.methods.base import UnlearnContext
from dukb.neural.methods.gradient import LossMethod, sequence_risk
from dukb.neural.methods.retain import REG_SUMMARY
from dukb.neural.scoring import sequence_logprob, token_logprobs

#: learning rates by model family (:data:`dukb.neural.families.FAMILIES`).
NPO_LR = family_lrs("npo")
BETA = 0.1
#: NPO's forms: "logit" (Eval-DU's and MUSE's code, ``npo``), "sequence" (the NPO paper, ``npo_seq``)
NPO_FORMS = ("logit", "sequence")
#: Eval-DU's forget sequences are padded to this many tokens (data_module.py, ``max_length=500`` in forget.py)
EVAL_DU_LENGTH = 500


def npo_loss(logp, ref_logp, beta: float = BETA, mask=None):
    """NPO's loss, the one definition for both levels (Zhang et al. 2024, Eq. 3):

        L_NPO = (2/β) · mean over units of −log σ(−β (log p_θ − log p_ref)) = (2/β) · mean log(1 + (p_θ/p_ref)^β).

    - sequence level (``mask`` None): a unit is an answer, ``logp`` [B] its summed log-probability (``npo_seq``;
      Zhang et al. 2024 and their code; Wu et al. 2025, App. H, text; RWKU's code);
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


def npo_batch_loss(logits, ref_logits, labels, beta: float = BETA):
    """NPO as RESTOR's code computes it on a batch of documents: one term on the difference of the batch-mean NLLs,

        L = −(2/β) · log σ(β (NLL_θ − NLL_ref)),  NLL = −(1/N) Σ_{b, t labelled} log p(x_{b,t} | x_{b,<t}),

    with N the batch's labelled tokens (Hugging Face's ``outputs.loss``: one mean over every labelled token of the
    batch, not per document). :func:`npo_loss` at the sequence level with the batch as its one unit.

    Args:
        logits: [B, L, V] of θ; ref_logits: [B, L, V] of f_ref (detached here); labels: [B, L], -100 where no loss.
        beta: β > 0.

    Returns:
        Scalar tensor; (2/β) log 2 at θ = f_ref.

    Raises:
        InputError: beta <= 0.

    Source: k1rezaei/restor unlearning/unlearn/NPO.py:33-45 (``neg_log_ratios = current_forget_loss -
    ref_forget_loss``; ``forget_loss = -torch.nn.functional.logsigmoid(0.1*neg_log_ratios).mean()*2/0.1``);
    Zhang et al. 2024, Eq. 3.
    """
    lp, mask = token_logprobs(logits, labels)
    ref, _ = token_logprobs(ref_logits.detach(), labels)
    n = mask.sum().clamp(min=1)
    return npo_loss((lp.sum() / n).reshape(1), (ref.sum() / n).reshape(1), beta)


def npo_logit_loss(logits, ref_logits, beta: float = BETA, mask=None):
    """NPO as Eval-DU's and MUSE's code compute it, on raw logits:

        L = −(2/β) · mean over (b, t, v) of log σ(β (z_ref[b, t, v] − z_θ[b, t, v])).

    Source: wrh14/deep_unlearning unlearn_trainer.py (``neg_log_ratio = outputs_f_ref_logits - outputs.logits``;
    ``loss = -F.logsigmoid(self.beta * neg_log_ratio).mean() * 2 / self.beta``); swj0419/muse_bench
    baselines/baselines/iterative.py (the same two lines). The mean is flat over every element of the [B, L, V]
    tensor: rows, positions (prompt, answer, padding) and vocabulary entries; labels play no part.

    Args:
        logits: [B, L, V] of θ; ref_logits: [B, L, V] of f_ref (detached here).
        beta: β > 0.
        mask: optional [B, L] of the positions to average over (1/True: kept); None: every position, as the
            reference code does.

    Returns:
        Scalar tensor; (2/β) log 2 at θ = f_ref.

    Raises:
        InputError: beta <= 0.
    """

    if beta <= 0:
        raise InputError(f"NPO's beta must be > 0, got {beta}")
    dt = torch.promote_types(logits.dtype, torch.float32)  # bf16/fp16 logits in fp32, fp64 kept
    per = -F.logsigmoid(beta * (ref_logits.detach().to(dt) - logits.to(dt)))
    if mask is None:
        return (2.0 / beta) * per.mean()
    m = mask.to(per.dtype).unsqueeze(-1)
    return (2.0 / beta) * (per * m).sum() / (m.sum() * per.shape[-1]).clamp(min=1)


def eval_du_layout(batch, eos_id: int, length: int = EVAL_DU_LENGTH) -> dict:
    """An :func:`dukb.neural.data.encode_qa` batch (left-padded) laid out as Eval-DU's data_module.py lays out a
    forget QA: the row's tokens from position 0, then EOS up to ``length`` positions with attention mask 0 (the
    answer's closing EOS is the first of them: Eval-DU puts it in the labels, not in the attended input), position
    ids 0..length−1. A row longer than ``length`` keeps all its tokens (Eval-DU would truncate it).

    Source: wrh14/deep_unlearning data_module.py, ``convert_raw_data_to_model_format`` (``pad_input_ids =
    encoded['input_ids'] + [tokenizer.eos_token_id] * pad_length``, ``pad_attention_mask = encoded['attention_mask']
    + [0] * pad_length``, ``label = encoded['input_ids'] + [tokenizer.eos_token_id] + [-100] * (pad_length-1)``).

    Args:
        batch: dict with input_ids, attention_mask, labels [B, L].
        eos_id: the EOS token id (the padding token); length: the padded length.

    Returns:
        dict with input_ids, attention_mask, labels, position_ids [B, max(length, longest row)].
    """

    ids, att, lab = batch["input_ids"], batch["attention_mask"], batch["labels"]
    n_real = att.sum(-1)
    width = max(int(length), int(n_real.max()) if len(n_real) else 0)
    b = ids.shape[0]
    out_ids = torch.full((b, width), int(eos_id), dtype=ids.dtype, device=ids.device)
    out_att = torch.zeros((b, width), dtype=att.dtype, device=att.device)
    out_lab = torch.full((b, width), -100, dtype=lab.dtype, device=lab.device)
    for r in range(b):
        keep = att[r].bool()
        t, lb = ids[r][keep], lab[r][keep]
        n = int(t.shape[0])
        out_ids[r, :n], out_lab[r, :n], out_att[r, :n] = t, lb, 1
        if n and int(t[-1]) == int(eos_id) and int(lb[-1]) == int(eos_id):
            out_att[r, n - 1] = 0  # the closing EOS: a label, and the first padding token of the input
    pos = torch.arange(width, device=ids.device).unsqueeze(0).expand(b, width).contiguous()
    return {"input_ids": out_ids, "attention_mask": out_att, "labels": out_lab, "position_ids": pos}


class NPO(LossMethod):
    """NPO in one of :data:`NPO_FORMS`, optionally with a retain regulariser ("gdr" or "klr").

    ``form="logit"`` registers as ``npo``/``npo_gdr``/``npo_klr`` (Eval-DU's and MUSE's code), ``form="sequence"``
    as ``npo_seq``/``npo_seq_gdr``/``npo_seq_klr`` (the NPO paper); see the module docstring for both equations.
    """

    lr_kind = "npo"  # its default rate: :func:`dukb.neural.families.family_lrs`
    options = ("beta",)

    def __init__(self, reg: str | None = None, beta: float = BETA, form: str = "logit"):
        if form not in NPO_FORMS:
            raise ValueError(f"unknown NPO form {form!r} ({', '.join(NPO_FORMS)})")
        self.reg_kind = reg
        self.beta = beta
        self.form = form
        base = "npo" if form == "logit" else "npo_seq"
        self.name = base if reg is None else f"{base}_{reg}"
        if form == "logit":
            self.summary = (
                "negative preference optimisation on the forget QA, Eval-DU's and MUSE's code form: raw "
                "logits vs f_ref, mean over every position and vocabulary entry"
            )
            self.source = (
                "Zhang et al. 2024; Eval-DU code (wrh14/deep_unlearning unlearn_trainer.py); MUSE code "
                "(swj0419/muse_bench iterative.py)"
            )
        else:
            self.summary = (
                "negative preference optimisation on the forget QA, the NPO paper's sequence form: "
                "whole-answer likelihood ratio to f_ref"
            )
            self.source = "Zhang et al. 2024, Eq. 3; Wu et al. 2025, App. H (text); RWKU code"
        self.summary += REG_SUMMARY.get(reg, "")
        # RESTOR's document unlearning runs ``npo`` (its loss at the token level); npo_seq is not listed twice
        self.document_level = reg is None and form == "logit"
        self.uses_retain = reg is not None

    @property
    def needs_reference(self) -> bool:
        """NPO compares with f_ref."""
        return True

    def prepare(self, ctx: UnlearnContext) -> dict:
        """The logit form under Eval-DU's reference schedule lays the forget batch out as Eval-DU does: 500
        EOS-padded positions in the mean (:func:`eval_du_layout`), cut to the model's context (the built-in tiny
        model has 96 positions); else the batch as encoded."""
        cache = {"eos": None, "pad": None}
        if self.form == "logit" and ctx.schedule is not None and ctx.schedule.kind == "reference":
            mcfg = getattr(ctx.lm.model, "config", None)
            limit = getattr(mcfg, "n_positions", None) or getattr(mcfg, "max_position_embeddings", None)
            cache["pad"] = min(EVAL_DU_LENGTH, int(limit)) if isinstance(limit, int) and limit > 0 else EVAL_DU_LENGTH
            tok = ctx.lm.tokenizer
            cache["eos"] = tok.eos_token_id if tok.eos_token_id is not None else (tok.pad_token_id or 0)
        return cache

    def layout(self, batch: dict, cache: dict) -> dict:
        """Eval-DU's EOS-padded layout when :meth:`prepare` chose it (every position then enters the logit form's
        mean: ``loss_positions`` None), else the batch (the mean over its attended positions)."""
        if cache.get("pad"):
            return dict(eval_du_layout(batch, cache["eos"], cache["pad"]), loss_positions=None)
        return batch

    def loss(self, logits, ref_logits, batch, level="sequence"):
        """The method's form on a QA or text batch (:func:`npo_logit_loss` for ``npo``: over the batch's
        ``loss_positions``, default its attended positions; :func:`npo_loss` on whole answers for ``npo_seq``); at
        RESTOR's "token" level :func:`npo_forget_loss` per token, at its code's "batch" level :func:`npo_batch_loss`,
        whatever the form. β: this method's."""
        if level == "token":
            return npo_forget_loss(logits, ref_logits, batch["labels"], self.beta, "token")
        if level == "batch":
            return npo_batch_loss(logits, ref_logits, batch["labels"], self.beta)
        if self.form == "sequence":
            s, _ = sequence_logprob(logits, batch["labels"])
            r, _ = sequence_logprob(ref_logits, batch["labels"])
            return npo_loss(s, r, self.beta)
        return npo_logit_loss(logits, ref_logits, self.beta, batch.get("loss_positions", batch["attention_mask"]))

    def risk(self, logits, batch):
        """L_u: :func:`~dukb.neural.methods.gradient.sequence_risk`."""
        return sequence_risk(logits, batch)

    def _summed(self, level: str) -> bool:
        """The sequence form on whole answers: loss and risk read only the answers' summed log-probabilities."""
        return self.form == "sequence" and level != "token"

    def reference(self, ref_logits, batch, level):
        """f_ref's summed answer log-probabilities r [B] for the sequence form (what :func:`npo_loss` reads; the
        sweep then keeps [B] numbers, not [B, L, V] logits), else its logits."""
        return sequence_logprob(ref_logits, batch["labels"])[0] if self._summed(level) else ref_logits

    def loss_and_risk(self, logits, ref, batch, level):
        """The sequence form computes the answers' sums s once for :func:`npo_loss` and the risk −Σs / Σ|y|
        (:func:`~dukb.neural.methods.gradient.sequence_risk`'s value); the logit form as :meth:`loss` and
        :meth:`risk`."""
        if not self._summed(level):
            return super().loss_and_risk(logits, ref, batch, level)
        s, n = sequence_logprob(logits, batch["labels"])
        return npo_loss(s, ref, self.beta), -s.sum() / n.sum().clamp(min=1)

    def setting_fields(self, cache: dict) -> dict:
        """β, the form and, with Eval-DU's layout, the padded length."""
        return {"beta": self.beta, "form": self.form, **({"pad_to": cache["pad"]} if cache.get("pad") else {})}


__all__ = [
    "BETA",
    "EVAL_DU_LENGTH",
    "NPO",
    "NPO_FORMS",
    "NPO_LR",
    "eval_du_layout",
    "npo_batch_loss",
    "npo_forget_loss",
    "npo_logit_loss",
    "npo_loss",
    "npo_token_loss",
]
