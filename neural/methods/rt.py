"""Rejection tuning (RT; Jin et al. 2024, RWKU App. H): minimise −E log π_θ(r | q) over questions q about the forget
facts paired with refusals r, with no retain term.

RWKU generates questions about the target with an LLM; dukb asks about each forget fact in the paper's QA form and, for
relationships, the reverse question ("Who is Reid Perry's father?"), each answered with a refusal drawn with the run seed. Without a KB in the context it uses the
forget QA questions alone. Swept over steps T like GA, at GA's learning rates.
"""

from __future__ import annotations

from dukb.neural.methods.base import Method, UnlearnContext, gradient_sweep, lr_for
from dukb.neural.methods.ga import GA_LR, STEPS_GRID
from dukb.neural.methods.po import refusal_items, refusal_loss, true_answer_risk
from dukb.neural.methods.retain import step_terms
from dukb.neural.scoring import forward_logits

#: the question forms RT refuses (dukb.kb.probes kinds); not the paraphrase, which PS-perturb and the probes ask
RT_KINDS = ("qa", "reverse")


def rejection_questions(ctx: UnlearnContext) -> list:
    """The forget facts' questions in every :data:`RT_KINDS` form (the forget QA items when ``ctx.kb`` is None).

    Returns:
        list of QA items (their answers are replaced by refusals later).
    """
    if ctx.kb is None:
        return list(ctx.forget)
    from dukb.neural.data import kb_qa

    keys = {(it.fact_kind, int(it.fact_id)) for it in ctx.forget}
    out = [it for it in kb_qa(ctx.kb, RT_KINDS) if (it.fact_kind, int(it.fact_id)) in keys]
    return out or list(ctx.forget)


class RejectionTuning(Method):
    """RT: refusals to questions about the forget facts."""

    trained_forms = RT_KINDS  # refusals of the forget facts' questions in these forms

    name = "rt"
    param = "steps"
    lr_kind = "ga"  # its default rate: :func:`dukb.neural.families.family_lrs`
    default_grid = STEPS_GRID
    summary = "rejection tuning: refusals to the forget facts' questions (QA and reverse forms)"
    source = "Jin et al. 2024 (RWKU), App. H"

    def sweep(self, ctx: UnlearnContext, grid=None):
        from dukb.neural.data import encode_qa

        batch = encode_qa(ctx.lm.tokenizer, ctx.lm.tags, refusal_items(rejection_questions(ctx), ctx.seed),
                          ctx.lm.device)

        def step_loss(state, forget_batch, retain_items):
            loss = refusal_loss(forward_logits(state.model, batch), batch["labels"])
            return step_terms(loss, true_answer_risk(state, forget_batch), None, state, retain_items, 0.0)

        yield from gradient_sweep(ctx, grid or self.default_grid, lr_for(ctx, GA_LR, self), step_loss)


__all__ = ["RT_KINDS", "RejectionTuning", "rejection_questions"]
