"""`incontext`: put a rule instance's premises in the prompt and ask the fact; does the model deduce it?

Deep unlearning (Wu et al. 2025) counts a fact as re-derivable when the facts the model still knows derive it under
the rules; it *assumes* that a model which knows the premises can make the deduction. This attack measures it. For
each forgotten fact of the target's cone (the target included) and each ground rule instance that derives it from
KB facts the unlearned model still knows (every one by default; ``instances=N`` keeps the first N per fact in the
closure's order), the premises' statement sentences are put before the fact's question. Instances with a derived
premise are not asked (``skipped_instances`` counts them). The fact counts as known under the attack when one such
prompt is answered correctly (the paper's substring rule). The same prompts are asked of the model before unlearning
when it is given (``deduction_rate_reference``): how often the premises alone lead either model to the answer.

``premises=self`` puts the fact's own statement in the prompt instead (a control: the model must then answer).
The substring judge credits a model that copies a name it was shown: ``answer_in_premises`` is the share of prompts
whose premises contain the gold answer, to read ``deduction_rate`` against.

A premise is written as the KB writes a fact: EDU-RELAT's statement for the family KB, the relation's ``fact``
template for a KB with another schema ("The capital of France is Paris."); a relation with facts and no ``fact``
template is refused in one line before anything is unlearned (:func:`check_kb`).
"""

from __future__ import annotations

import dataclasses

from dukb import InputError
from dukb.kb.probes import fact_statements
from dukb.kb.schema_probes import SchemaForms
from dukb.neural.attacks.base import Attack, AttackContext, AttackOutcome, known_table, row_known
from dukb.neural.bounds import Range
from dukb.neural.probe import probe
from dukb.solver.cone import cone_of

PREMISES = ("rules", "self")


def premise_prompts(ctx: AttackContext, known: dict, instances: int, premises: str):
    """The prompts: for each forgotten relationship fact of the target's cone, the rule instances whose body atoms
    are all KB facts still known (the first ``instances`` per fact; 0: all), the premises' sentences before the
    question.

    Returns:
        ([(fact_id, QAItem)], number of instances skipped for a derived premise).

    Raises:
        KeyError: a cone fact without a "qa" item in ``ctx.items``.

    Source: Wu et al. 2025, Definition 1 (rule instances of the deductive closure).
    """

    cl = ctx.closure
    sentences = premise_statements(ctx.kb)
    qa_of = {int(it.fact_id): it for it in ctx.items if it.fact_kind == "relationship"}
    cone = cone_of(cl, [cl.atom_of_fact(ctx.target)])
    out, skipped = [], 0
    for local in sorted(cone.kb):
        atom = cone.atoms[local]
        fid = cl.fact_ids[atom]
        if known.get(("relationship", fid), True):
            continue  # still known without help
        q = qa_of[fid]
        if premises == "self":
            bodies = [(atom,)]
        else:
            bodies = []
            for i in cl.by_head[atom]:
                body = tuple(int(b) for b in cl.inst_body[i])
                if any(b >= cl.n_kb for b in body):
                    skipped += 1
                elif all(known.get(("relationship", cl.fact_ids[b]), False) for b in body):
                    bodies.append(body)
                if instances and len(bodies) >= instances:
                    break
        for body in bodies:
            text = " ".join(sentences[("relationship", cl.fact_ids[b])] for b in body)
            out.append((fid, dataclasses.replace(q, kind="incontext", question=f"{text} {q.question}")))
    return out, skipped


def check_kb(s: dict, kb) -> None:
    """Refuse, in one line, a KB with another schema whose relation with facts has no ``fact`` template: its facts
    cannot be written as premises. The family KB always passes.

    Raises:
        InputError: ``SCHEMA.YAML:LINE: relation 'R' has no 'fact' template (nor has ...): --attacks incontext
            writes every premise with its relation's fact template``.

    Source: Wu et al. 2025, Definition 1 (the premises of a rule instance are KB facts).
    """
    if kb.schema.is_family:
        return
    used = {f.relation for f in kb.relationships}
    lacking = [r for r in kb.schema.relations if r.name in used and r.template("fact") is None]
    if lacking:
        also = f" (nor has {', '.join(repr(r.name) for r in lacking[1:])})" if len(lacking) > 1 else ""
        raise InputError(
            f"relation '{lacking[0].name}' has no 'fact' template{also}: --attacks incontext writes "
            "every premise with its relation's fact template",
            kb.schema.path,
            lacking[0].line or None,
        )


def premise_statements(kb) -> dict[tuple[str, int], str]:
    """The sentence of every relationship fact as a premise: :func:`dukb.kb.probes.fact_statements` for the family
    KB; for a KB with another schema each relation's ``fact`` template filled (:func:`check_kb` first).

    Returns:
        ("relationship", fact_id) -> sentence (the family KB's also has its biographies).

    Raises:
        InputError: as :func:`check_kb`.

    Source: Wu et al. 2025 (EDU-RELAT's fact template; another schema's own).
    """
    if kb.schema.is_family:
        return fact_statements(kb)
    check_kb({}, kb)
    forms = SchemaForms(kb, None, 0, {})
    return {("relationship", f.fact_id): forms.sentence(f) or "" for f in kb.relationships}


def incontext(ctx: AttackContext, s: dict) -> AttackOutcome:
    """Ask every forgotten cone fact with a rule instance's known premises in the prompt.

    Returns:
        :class:`AttackOutcome`; extra: n_prompts, facts_tried, facts_deduced (fact_ids answered under a prompt),
        deduction_rate (share of prompts answered; None without prompts), deduction_rate_reference (the model
        before unlearning on the same prompts; None without it), target_deduced (1/0; None when no prompt asks
        the target).

    Source: Wu et al. 2025, Definition 1-2 (what deep unlearning assumes the model deduces); this attack tests it.
    """

    known = row_known(ctx)
    prompts, skipped = premise_prompts(ctx, known, int(s["instances"]), s["premises"])
    extra = {
        "n_prompts": len(prompts),
        "skipped_instances": skipped,
        "facts_tried": sorted({f for f, _ in prompts}),
        "facts_deduced": [],
        "deduction_rate": None,
        "deduction_rate_reference": None,
        "target_deduced": None,
        "answer_in_premises": None,
    }
    after = dict(known)
    if prompts:
        items = [it for _, it in prompts]
        df = probe(ctx.pred, items, batch_size=ctx.batch_size, generate=True, rouge=False, logprob=False)
        hits = [bool(v) for v in df["known"]]
        deduced = sorted({f for (f, _), h in zip(prompts, hits) if h})
        for f in deduced:
            after[("relationship", f)] = True
        echo = [it.answer.lower() in it.question.lower() for it in items]
        extra.update(
            facts_deduced=deduced,
            deduction_rate=round(sum(hits) / len(hits), 6),
            answer_in_premises=round(sum(echo) / len(echo), 6),
        )
        if any(f == ctx.target for f, _ in prompts):
            extra["target_deduced"] = int(ctx.target in deduced)
        if ctx.reference is not None:
            ref = probe(ctx.reference, items, batch_size=ctx.batch_size, generate=True, rouge=False, logprob=False)
            extra["deduction_rate_reference"] = round(float(ref["known"].astype(bool).mean()), 6)
    return AttackOutcome(known_table(ctx.items, after), extra)


def _check(s: dict) -> None:
    if s["instances"] < 0 or s["premises"] not in PREMISES:
        raise InputError(
            f"--attacks incontext: instances must be >= 0 (0: all) and premises one of {', '.join(PREMISES)}"
        )


incontext.check = _check
incontext.check_kb = check_kb
INCONTEXT = Attack(
    "incontext",
    "for each forgotten fact of the target's cone, the premises of every rule instance "
    "(`instances`=N: the first N) the model still knows go before its question (premises=self: the "
    "fact's own sentence); compared with the model before unlearning",
    "Wu et al. 2025, Definitions 1-2",
    {"instances": 0, "premises": "rules"},
    incontext,
    needs_reference=True,
    ranges={"instances": Range(0, 1_000_000, why="0 = all")},
)
