"""In-context unlearning (ICU; RWKU, Jin et al. 2024, App. H): no weight changes; an instruction to behave as if the
target were unknown is prepended to every evaluation prompt.

RWKU's prompt: "You are an AI Assistant who is supposed to unlearn about {target} and provide answers without its
knowledge as if you never knew about it. Don't tell anyone that you unlearned anything." {target} is, in dukb, the
people of the forget facts (their names joined by ", "). The instruction is put before the question tags of every QA
prompt the predictor builds (probing, answer scoring, PS metrics, MIA on QA); plain-text items (MUSE's VerbMem
texts) are scored without it. The grid is ``icu`` ∈ {0, 1}: 0 is the finetuned model without the instruction, 1 with
it (default: 1 alone). On the built-in tiny model the instruction's words are out of vocabulary ([UNK]) except the
names.
"""

from __future__ import annotations

from dataclasses import replace

from dukb.neural.methods.base import Method, UnlearnContext
from dukb.neural.probe import Predictor

#: RWKU's ICU instruction (Jin et al. 2024, App. H, from its code)
ICU_PROMPT = (
    "You are an AI Assistant who is supposed to unlearn about {target} and provide answers without its "
    "knowledge as if you never knew about it. Don't tell anyone that you unlearned anything."
)


def forget_target_names(ctx: UnlearnContext) -> str:
    """The forget set's "target" as text: the names of the people in the forget facts (KB order of first mention),
    joined by ", "; without a KB, the forget questions joined by " ".

    Returns:
        str.
    """
    if ctx.kb is None:
        return " ".join(it.question for it in ctx.forget)
    rel = {f.fact_id: f for f in ctx.kb.relationships}
    bio = {b.fact_id: b for b in ctx.kb.biographies}
    names: list[str] = []
    for it in ctx.forget:
        f = rel.get(int(it.fact_id)) if it.fact_kind == "relationship" else bio.get(int(it.fact_id))
        if f is None:
            continue
        for n in (f.subject, f.object) if it.fact_kind == "relationship" else (f.subject,):
            if n not in names:
                names.append(n)
    return ", ".join(names) or " ".join(it.question for it in ctx.forget)


def icu_tags(tags, target: str, template: str = ICU_PROMPT):
    """Prompt tags with the ICU instruction (``template`` filled with ``target``) and a line break before the
    question.

    Args:
        tags: :class:`dukb.neural.spec.PromptTags`; target: the target text; template: with a ``{target}`` slot.

    Returns:
        PromptTags whose ``prompt(q)`` starts with the instruction.
    """
    return replace(tags, question_start=template.format(target=target) + "\n" + tags.question_start)


class InContextUnlearning(Method):
    """ICU: the instruction in the prompt, weights unchanged."""

    name = "icu"
    param = "icu"
    default_grid = (1,)
    summary = "in-context unlearning: RWKU's 'unlearn about {target}' instruction before every prompt, no weight change"
    source = "Jin et al. 2024 (RWKU), App. H"

    def sweep(self, ctx: UnlearnContext, grid=None):

        target = forget_target_names(ctx)
        ctx.lm.model.eval()
        for v in grid or self.default_grid:
            on = float(v) > 0
            tags = icu_tags(ctx.lm.tags, target) if on else ctx.lm.tags
            yield ({"icu": 1.0 if on else 0.0}, Predictor(ctx.lm.model, ctx.lm.tokenizer, tags, device=ctx.lm.device))


__all__ = ["ICU_PROMPT", "InContextUnlearning", "forget_target_names", "icu_tags"]
