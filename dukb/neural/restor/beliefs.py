"""A model's beliefs from its probe rows, and their rule-aware analysis.

The neural side only reads the believed triples off the relationship answers; the symbolic work (closure of the
beliefs, contradictions, corrupted facts still derivable) is :mod:`dukb.solver.beliefs`.

Source: dukb's rule-aware addition to RESTOR (Rezaei et al.); deductive closure: Wu et al. 2025, Def. 1.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from dukb.kb.judge import normalize
from dukb.kb.model import KB, Triple
from dukb.kb.probes import RELATIONSHIP
from dukb.neural.restor.facts import FactProbe
from dukb.solver.beliefs import analyse_beliefs


def belief_triples(kb: KB, facts: Sequence[FactProbe], rows: Sequence[dict]) -> list[tuple[Triple, int]]:
    """The relationship beliefs of a model: ``(s, r, person)`` for each relationship probe whose answer is a KB
    person (by normalised name), with the fact_id of the probe it answered.

    Args:
        kb: the KB (its people).
        facts, rows: the probes and the model's probe rows, in the same order.

    Returns:
        list of ``((s, r, o), fact_id)``, self-references (o == s) dropped, first occurrence of each triple kept.

    Source: dukb's rule-aware addition to RESTOR (Rezaei et al.); the answers are judged by dukb.kb.judge.
    """
    names = {normalize(n): n for n in kb.people}
    seen: dict[Triple, int] = {}
    for f, r in zip(facts, rows):
        if f.fact_kind != RELATIONSHIP:
            continue
        who = names.get(tuple(r["answer"].split()))
        if who is None or who == f.subject:
            continue
        seen.setdefault((f.subject, f.predicate, who), f.fact_id)
    return list(seen.items())


def belief_analysis(
    kb: KB,
    beliefs: Sequence[tuple[Triple, int]],
    true_closure: set[Triple],
    corrupted: Iterable = (),
    rules="family",
    examples: int = 5,
) -> dict:
    """Rule-aware analysis of a model's beliefs: :func:`dukb.solver.beliefs.analyse_beliefs` of the triples of
    :func:`belief_triples` (derived contradictions; corrupted relationship facts of F' stated or still derivable).

    Args:
        kb: the true KB (people and genders).
        beliefs: ``((s, r, o), fact_id)`` pairs (:func:`belief_triples`).
        true_closure: the true closure's triples.
        corrupted: F' (:class:`dukb.kb.corrupt.CorruptedFact` list); only relationship facts count.
        rules: rule set (name, path or RuleSet).
        examples: how many contradicting facts to list per kind.

    Returns:
        The dict of :func:`dukb.solver.beliefs.analyse_beliefs` (n_beliefs, n_derived_false,
        n_injected_retained, ...).

    Raises:
        RulesError, InputError: as :func:`dukb.solver.closure.compute_closure`.

    Source: Wu et al. 2025 (deductive closure, Def. 1); Rezaei et al., RESTOR (corruption, F', Sec. 3.2).
    """
    return analyse_beliefs(kb, [t for t, _ in beliefs], true_closure, corrupted, rules, examples)
