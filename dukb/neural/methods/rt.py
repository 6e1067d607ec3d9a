"""Rejection tuning (RT; Jin et al. 2024, RWKU App. H): minimise −E log π_θ(r | q) over questions q about the forget
facts paired with refusals r, with no retain term.

RWKU generates questions about the target with an LLM; dukb asks about each forget fact in the paper's QA form and, for
relationships, the reverse question ("Who is Reid Perry's father?"), each answered with a refusal drawn with the run seed. Without a KB in the context it uses the
forget QA questions alone. Swept over steps T like GA, at GA's learning rates.
"""

from __future__ import annotations

from dukb.neural.data import kb_qa
from dukb.neural.methods.base import UnlearnContext
from dukb.neural.methods.po import RefusalMethod

#: the question forms RT refuses (dukb.kb.probes kinds); not the paraphrase, which PS-perturb and the probes ask
RT_KINDS = ("qa", "reverse")


def rejection_questions(ctx: UnlearnContext) -> list:
    """The forget facts' questions in every :data:`RT_KINDS` form (the forget QA items when ``ctx.kb`` is None).

    Returns:
        list of QA items (their answers are replaced by refusals later).
    """
    if ctx.kb is None:
        return list(ctx.forget)

    keys = {(it.fact_kind, int(it.fact_id)) for it in ctx.forget}
    out = [it for it in kb_qa(ctx.kb, RT_KINDS) if (it.fact_kind, int(it.fact_id)) in keys]
    return out or list(ctx.forget)


class RejectionTuning(RefusalMethod):
    """RT: refusals to questions about the forget facts."""

    trained_forms = RT_KINDS  # refusals of the forget facts' questions in these forms

    name = "rt"
    lr_kind = "ga"  # its default rate: :func:`dukb.neural.families.family_lrs`
    summary = "rejection tuning: refusals to the forget facts' questions (QA and reverse forms)"
    source = "Jin et al. 2024 (RWKU), App. H"

    def questions(self, ctx: UnlearnContext) -> list:
        """:func:`rejection_questions`: the forget facts' questions in every :data:`RT_KINDS` form."""
        return rejection_questions(ctx)


__all__ = ["RT_KINDS", "RejectionTuning", "rejection_questions"]
