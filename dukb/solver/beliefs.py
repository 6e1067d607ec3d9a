"""What a model's beliefs entail: the deductive closure of the relationship facts a model states, the
contradictions it derives, and which corrupted facts stay derivable (dukb's rule-aware addition to RESTOR).

A model's beliefs are triples ``(s, r, o)`` (its answers to relationship questions; the neural side reads them off
probe outputs). They form a belief KB B over the true KB's people; its closure Ω(B, R) is computed with clingo
(:func:`dukb.solver.closure.compute_closure`). Reported:

(a) derived facts (in Ω(B, R) but not in B) that contradict the model's own answers (for a functional relation --
    father, mother, husband, wife -- the model answered another object for the same subject) or the true KB (not in
    the true closure Ω(K, R), which in a family KB is the set of true facts);
(b) for each corrupted relationship fact (s, r, o') of F': whether the model states it (it is in B) and whether the
    rules derive it from the model's other beliefs (it is in Ω(B \\ {(s, r, o')}, R)). A corruption is deeply
    unlearned only when it is neither stated nor derivable.

Sources: Wu et al. 2025 (deductive closure, Def. 1; deep unlearning: a fact must not be derivable from what is
left); Rezaei et al., RESTOR (corruption F', Sec. 3.2). Pure Python and clingo: no torch.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from dukb.kb.kbschema import Schema
from dukb.kb.model import KB, Fact, Triple
from dukb.solver.closure import Closure, compute_closure
from dukb.solver.cone import cone_of
from dukb.solver.rules import RuleSet

if TYPE_CHECKING:  # for annotations only
    from dukb.kb.corrupt import CorruptedFact

#: Relations with one object per subject in a family KB (one father, one mother, one spouse): two different objects
#: for the same subject and relation contradict each other.
FUNCTIONAL = ("father", "mother", "husband", "wife")


def functional_relations(schema: Schema) -> tuple[str, ...]:
    """The relations whose two different objects for one subject contradict each other: :data:`FUNCTIONAL` for the
    family schema (its schema.yaml declares no relation functional, as EDU-RELAT's KB may hold remarriages), else
    the relations the schema declares ``functional: true``.

    Example:
        >>> from dukb.kb.kbschema import family_schema
        >>> functional_relations(family_schema())
        ('father', 'mother', 'husband', 'wife')
    """
    if schema.is_family:
        return FUNCTIONAL
    return tuple(r.name for r in schema.relations if r.functional)


def belief_closure(kb: KB, beliefs: Sequence[Triple], rules: RuleSet | str = "family") -> Closure:
    """The closure Ω(B, R) of a belief KB.

    Args:
        kb: the true KB (its people and genders are the belief KB's).
        beliefs: the believed triples, without duplicates; belief i becomes relationship fact i (atom i).
        rules: rule set (name, path or :class:`dukb.solver.rules.RuleSet`).

    Returns:
        The :class:`dukb.solver.closure.Closure` of B (its first ``len(beliefs)`` atoms are the beliefs).

    Raises:
        RulesError, InputError: as :func:`dukb.solver.closure.compute_closure`.

    Source: Wu et al. 2025, Definition 1.

    Example:
        >>> from dukb.kb.io import load_kb
        >>> beliefs = [("Martha Hale", "husband", "George Hale"), ("Leo Hale", "father", "Owen Stone")]
        >>> closure = belief_closure(load_kb("demo"), beliefs)
        >>> closure.atoms[:2] == beliefs, closure.n_derived
        (True, 2)
        >>> closure.atoms[2:]
        [('George Hale', 'wife', 'Martha Hale'), ('Owen Stone', 'child', 'Leo Hale')]
    """
    facts = [Fact(i, s, r, o) for i, (s, r, o) in enumerate(beliefs)]
    return compute_closure(KB(dict(kb.people), facts, [], schema=kb.schema), rules)


def contradictions(closure: Closure, true_closure: set[Triple]) -> tuple[list[Triple], list[Triple]]:
    """Derived facts of a belief closure that contradict the truth or the beliefs themselves.

    Args:
        closure: Ω(B, R) (:func:`belief_closure`).
        true_closure: the triples of the true closure Ω(K, R).

    Returns:
        ``(false, contradicting)``: derived facts (Ω(B, R) \\ B, in atom order) not in ``true_closure``; derived
        facts of a functional relation (:func:`functional_relations` of the KB's schema) whose subject has another
        object in B.

    Source: dukb's rule-aware addition to RESTOR (Rezaei et al.); closure: Wu et al. 2025, Def. 1.

    Example:
        >>> from dukb.kb.io import load_kb
        >>> kb = load_kb("demo")
        >>> true_closure = set(compute_closure(kb).atoms)
        >>> beliefs = [("Martha Hale", "husband", "George Hale"), ("George Hale", "wife", "Ruth Hale")]
        >>> false, contradicting = contradictions(belief_closure(kb, beliefs), true_closure)
        >>> false  # derived from the false belief
        [('Ruth Hale', 'husband', 'George Hale')]
        >>> contradicting  # George's wife is Martha by the rules, Ruth by the second belief
        [('George Hale', 'wife', 'Martha Hale')]
    """
    stated: dict[tuple[str, str], set[str]] = {}
    for s, r, o in closure.atoms[: closure.n_kb]:
        stated.setdefault((s, r), set()).add(o)
    derived = closure.atoms[closure.n_kb :]
    false = [t for t in derived if t not in true_closure]
    functional = functional_relations(closure.kb.schema)
    contra = [t for t in derived if t[1] in functional and stated.get((t[0], t[1]), set()) - {t[2]}]
    return false, contra


def stated_or_derivable(closure: Closure, triple: Triple) -> tuple[bool, bool]:
    """Whether a belief closure states a triple, and whether the rules derive it from the *other* beliefs.

    Args:
        closure: Ω(B, R).
        triple: ``(s, r, o)``.

    Returns:
        ``(stated, derivable)``: stated when the triple is in B; derivable when it is in Ω(B \\ {triple}, R)
        (forward chaining in its cone with the triple itself removed; for a triple not in B, membership of Ω(B, R)).

    Source: Wu et al. 2025 (a fact is deeply unlearned when it is not derivable from the remaining facts).

    Example:
        >>> from dukb.kb.io import load_kb
        >>> closure = belief_closure(load_kb("demo"), [("Martha Hale", "husband", "George Hale")])
        >>> stated_or_derivable(closure, ("Martha Hale", "husband", "George Hale"))
        (True, False)
        >>> stated_or_derivable(closure, ("George Hale", "wife", "Martha Hale"))
        (False, True)
    """
    atom = closure.index.get(tuple(triple))
    if atom is None:
        return False, False
    if not closure.is_kb(atom):
        return False, True
    cone = cone_of(closure, [atom])
    return True, cone.any_target_derivable({cone.local[atom]})


def analyse_beliefs(
    kb: KB,
    beliefs: Sequence[Triple],
    true_closure: set[Triple],
    corrupted: Iterable[CorruptedFact] = (),
    rules: RuleSet | str = "family",
    examples: int = 5,
) -> dict:
    """Rule-aware analysis of a model's beliefs (the module docstring's (a) and (b)).

    Args:
        kb: the true KB (people and genders).
        beliefs: the believed triples ``(s, r, o)``, without duplicates or self-references.
        true_closure: the triples of the true closure Ω(K, R).
        corrupted: F' (:class:`dukb.kb.corrupt.CorruptedFact` list); only relationship facts count here, as
            ``(subject, predicate, injected_value)``.
        rules: rule set (name, path or RuleSet).
        examples: how many contradicting facts to list per kind.

    Returns:
        dict: n_beliefs, n_beliefs_false (beliefs not in the true closure), n_derived, n_derived_false,
        n_derived_contradicting_answers, examples_false, examples_contradicting (lists of "s|r|o" strings),
        n_corrupted_rel, n_injected_stated, n_injected_derivable, n_injected_retained (stated or derivable),
        injected_retained (list of fact_ids).

    Raises:
        RulesError, InputError: as :func:`dukb.solver.closure.compute_closure`.

    Source: Wu et al. 2025 (deductive closure, Def. 1); Rezaei et al., RESTOR (corruption, F', Sec. 3.2).

    Example:
        >>> from dukb.kb.io import load_kb
        >>> kb = load_kb("demo")
        >>> true_closure = set(compute_closure(kb).atoms)
        >>> beliefs = [("Martha Hale", "husband", "George Hale"), ("Leo Hale", "father", "Owen Stone")]
        >>> report = analyse_beliefs(kb, beliefs, true_closure)
        >>> report["n_beliefs_false"], report["n_derived"], report["examples_false"]
        (1, 2, ['Owen Stone|child|Leo Hale'])
    """
    cl = belief_closure(kb, beliefs, rules)
    bset = set(cl.atoms[: cl.n_kb])
    false_d, contra = contradictions(cl, true_closure)
    out = {
        "n_beliefs": len(bset),
        "n_beliefs_false": sum(t not in true_closure for t in bset),
        "n_derived": cl.n_derived,
        "n_derived_false": len(false_d),
        "n_derived_contradicting_answers": len(contra),
        "examples_false": ["|".join(t) for t in false_d[:examples]],
        "examples_contradicting": ["|".join(t) for t in contra[:examples]],
    }
    rel = [c for c in corrupted if c.fact_kind == "relationship"]
    n_stated = n_deriv = 0
    retained = []
    for c in rel:
        is_stated, derivable = stated_or_derivable(cl, (c.subject, c.predicate, c.injected_value))
        n_stated += is_stated
        n_deriv += derivable
        if is_stated or derivable:
            retained.append(c.fact_id)
    out.update(
        n_corrupted_rel=len(rel),
        n_injected_stated=n_stated,
        n_injected_derivable=n_deriv,
        n_injected_retained=len(retained),
        injected_retained=retained,
    )
    return out
