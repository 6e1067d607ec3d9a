"""Direct preference optimisation for unlearning (DPO; Rafailov et al. 2023, as RWKU uses it, Jin et al. 2024 App. H):

    L_DPO(θ) = −E log σ( β log π_θ(y_w|x)/π_ref(y_w|x) − β log π_θ(y_l|x)/π_ref(y_l|x) ),

with y_l the true answer (rejected), y_w the preferred answer and π_ref the finetuned model θ₀. ``dpo``
prefers a counterfactual answer (RWKU's choice: another answer of the same kind from the KB, e.g. "mother" for
"father", a different year; drawn with the run seed); ``dpo_refusal`` prefers a refusal (:data:`REFUSALS`).
β = 0.1 (RWKU does not give β; 0.1 is DPO's and NPO's common value). No retain term (RWKU's dpo_ftx = 0). Swept
over steps T like NPO, at NPO's learning rates.
"""

from __future__ import annotations

import random
from dataclasses import replace

import torch.nn.functional as F  # noqa: TID253 (a model module: reached only through a command's lazy import)

from dukb import InputError
from dukb.neural.data import encode_qa
from dukb.neural.methods.base import UnlearnContext
from dukb.neural.methods.gradient import GradientMethod
from dukb.neural.methods.po import REFUSALS, refusal_items
from dukb.neural.methods.retain import gdr_loss
from dukb.neural.scoring import forward_logits, sequence_logprob

BETA = 0.1


def dpo_loss(logp_w, logp_l, ref_w, ref_l, beta: float = BETA):
    """DPO's loss (Rafailov et al. 2023, Eq. 7; RWKU, Jin et al. 2024, App. H):

        mean over pairs of −log σ(β[(log π_θ(y_w|x) − log π_ref(y_w|x)) − (log π_θ(y_l|x) − log π_ref(y_l|x))]).

    Args:
        logp_w, logp_l: [B] summed log-probabilities of the preferred and rejected answers under θ (nats);
        ref_w, ref_l: the same under π_ref (no gradient needed).
        beta: β > 0.

    Returns:
        Scalar tensor (nats). At θ = π_ref it equals log 2.

    Raises:
        InputError: beta <= 0.
    """

    if beta <= 0:
        raise InputError(f"DPO's beta must be > 0, got {beta}")
    return (-F.logsigmoid(beta * ((logp_w - ref_w) - (logp_l - ref_l)))).mean()


def _answer_kind(item) -> tuple:
    """Which answers can stand in for each other: a relationship's relation; a biography attribute's values (the
    question up to " of <person>")."""
    if item.fact_kind == "relationship":
        return ("relationship",)
    return (item.fact_kind, item.question.split(" of ")[0])


def counterfactual_items(items, pool, seed: int = 0):
    """The items with their answers replaced by another answer of the same kind from ``pool`` (drawn with
    ``seed``, never the true answer); an item with no alternative gets a refusal.

    Args:
        items: QA items; pool: QA items whose answers are the candidates (e.g. the KB's QA).

    Returns:
        list of QA items.
    """
    rng = random.Random(seed)
    answers: dict[tuple, set] = {}
    for it in pool:
        answers.setdefault(_answer_kind(it), set()).add(it.answer)
    out = []
    for it in items:
        cands = sorted(a for a in answers.get(_answer_kind(it), ()) if a != it.answer)
        out.append(replace(it, answer=rng.choice(cands) if cands else rng.choice(REFUSALS)))
    return out


class DPO(GradientMethod):
    """DPO with a counterfactual (default) or refusal as the preferred answer."""

    lr_kind = "npo"  # its default rate: :func:`dukb.neural.families.family_lrs`
    options = ("beta",)
    source = "Rafailov et al. 2023; Jin et al. 2024 (RWKU), App. H"

    def __init__(self, preferred: str = "counterfactual", beta: float = BETA):
        self.preferred = preferred
        self.beta = beta
        self.name = "dpo" if preferred == "counterfactual" else "dpo_refusal"
        self.summary = (
            f"DPO preferring a {'counterfactual answer' if preferred == 'counterfactual' else 'refusal'}"
            " over the true forget answer, against f_ref"
        )

    @property
    def needs_reference(self) -> bool:
        """DPO compares with π_ref = θ₀."""
        return True

    def prepare(self, ctx: UnlearnContext) -> dict:
        """The preferred answers' batch: counterfactuals drawn from the KB's answers (or refusals), with the seed."""

        if self.preferred == "counterfactual":
            won = counterfactual_items(ctx.forget, ctx.items or (list(ctx.forget) + list(ctx.retain)), ctx.seed)
        else:
            won = refusal_items(ctx.forget, ctx.seed)
        return {"won": encode_qa(ctx.lm.tokenizer, ctx.lm.tags, won, ctx.lm.device)}

    def terms(self, state, batch, cache=None, level="sequence", model=None):
        """:func:`dpo_loss` of the preferred answers (``cache["won"]``) over the true forget answers (``batch``),
        π_ref's log-probabilities computed once; L_u: the forget answers' mean NLL."""
        memo = {} if cache is None else cache
        w_batch = memo.get("won")
        if w_batch is None:
            raise ValueError("DPO's terms need the preferred answers of prepare(ctx)")
        if "ref" not in memo:  # π_ref's answer log-probs, computed once from θ₀
            memo["ref"] = (
                sequence_logprob(state.ref_logits(w_batch), w_batch["labels"])[0].detach(),
                sequence_logprob(state.ref_logits(batch), batch["labels"])[0].detach(),
            )
        run = state.model if model is None else model
        lw, _ = sequence_logprob(forward_logits(run, w_batch), w_batch["labels"])
        logits_l = forward_logits(run, batch)
        ll, _ = sequence_logprob(logits_l, batch["labels"])
        return dpo_loss(lw, ll, memo["ref"][0], memo["ref"][1], self.beta), gdr_loss(logits_l, batch["labels"])

    def setting_fields(self, cache: dict) -> dict:
        """β and the preferred answer."""
        return {"beta": self.beta, "preferred": self.preferred}


__all__ = ["BETA", "DPO", "counterfactual_items", "dpo_loss"]
