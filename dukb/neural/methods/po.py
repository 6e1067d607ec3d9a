"""Preference optimisation towards a refusal (PO; Maini et al. 2024, TOFU's non-GA baseline), as used by
Wang et al. 2024 ("Unlearning with Control", App. E/F.3):

    L_PO(θ) = E_{x ∈ D_u} ℓ(r | x; θ) + L_r(θ),   r ~ REFUSALS,

gradient *descent* on an "I don't know"-style answer r to every forget question (one refusal drawn per question
with the run seed) plus the retaining risk L_r (the NLL of retain-train answers, GDR). Swept over steps T like GA,
at GA's learning rates. On the built-in tiny model, whose word-level vocabulary is the KB's own text, a refusal is
out of vocabulary and encodes as [UNK] tokens: PO then teaches an [UNK] answer, the tiny model's abstention.
"""

from __future__ import annotations

import abc
import random
from dataclasses import replace

import torch  # noqa: TID253 (a model module: reached only through a command's lazy import)

from dukb.neural.data import encode_qa
from dukb.neural.methods.base import UnlearnContext
from dukb.neural.methods.gradient import GradientMethod
from dukb.neural.methods.retain import gdr_loss
from dukb.neural.scoring import forward_logits

#: Refusal answers (TOFU's idk list starts with "I don't know."; Maini et al. 2024).
REFUSALS = (
    "I don't know.",
    "I'm not sure.",
    "I have no information about that.",
    "I cannot answer that.",
    "That is not something I know.",
    "I'm afraid I can't help with that.",
    "I have no idea.",
    "Sorry, I don't have that information.",
)


def refusal_items(items, seed: int = 0, refusals=REFUSALS):
    """The items with their answers replaced by a refusal drawn with ``seed`` (one draw per item, in order).

    Args:
        items: QA items; seed: the draw's seed; refusals: the strings to draw from (non-empty).

    Returns:
        list of QA items (same questions, refusal answers).
    """
    rng = random.Random(seed)
    return [replace(it, answer=rng.choice(refusals)) for it in items]


def refusal_loss(logits, labels):
    """ℓ(r | x): the mean NLL of the refusal tokens (scalar, nats per token), to be *minimised*.

    Args:
        logits: [B, L, V]; labels: [B, L] with -100 outside the refusal answers.

    Source: Wang et al. 2024, App. E (PO's target "I don't know."); Maini et al. 2024 (TOFU).
    """
    return gdr_loss(logits, labels)


def true_answer_risk(state, forget_batch):
    """L_u: the NLL of the true forget answers under the current weights, without gradients (logged, and read by
    objective capping)."""

    with torch.no_grad():
        return gdr_loss(forward_logits(state.model, forget_batch), forget_batch["labels"])


class RefusalMethod(GradientMethod):
    """A gradient method that trains refusals (abstract: :meth:`questions`): its forget term is
    :func:`refusal_loss` on the questions' refusal batch, built once per sweep with the run seed; L_u is
    :func:`true_answer_risk` on the true forget answers. PO and RT."""

    @abc.abstractmethod
    def questions(self, ctx: UnlearnContext) -> list:
        """The QA items whose answers become refusals."""

    def prepare(self, ctx: UnlearnContext) -> dict:
        """The refusal batch: :meth:`questions` answered with refusals drawn with the run seed."""

        return {
            "refusals": encode_qa(
                ctx.lm.tokenizer, ctx.lm.tags, refusal_items(self.questions(ctx), ctx.seed), ctx.lm.device
            )
        }

    def terms(self, state, batch, cache=None, level="sequence", model=None):
        """:func:`refusal_loss` on the refusal batch; L_u: :func:`true_answer_risk` on the true forget answers.

        Raises:
            ValueError: ``cache`` lacks :meth:`prepare`'s refusal batch.
        """
        b = (cache or {}).get("refusals")
        if b is None:
            raise ValueError(f"{self.name}'s terms need the refusal batch of prepare(ctx)")
        loss = refusal_loss(forward_logits(state.model if model is None else model, b), b["labels"])
        return loss, true_answer_risk(state, batch)


class PreferenceOptimisation(RefusalMethod):
    """PO: refusals on the forget questions + GDR on retain-train."""

    name = "po"
    lr_kind = "ga"  # its default rate: :func:`dukb.neural.families.family_lrs`
    summary = "gradient descent on refusals ('I don't know.') to the forget questions + GDR on retain QA (PO)"
    source = "Maini et al. 2024 (TOFU); Wang et al. 2024, App. E"
    uses_retain = True
    reg_kind = "gdr"  # PO's retaining risk L_r

    def questions(self, ctx: UnlearnContext) -> list:
        """The forget QA items."""
        return list(ctx.forget)


__all__ = ["PreferenceOptimisation", "REFUSALS", "RefusalMethod", "refusal_items", "refusal_loss", "true_answer_risk"]
