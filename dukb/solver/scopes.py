"""Forget scopes: which KB facts an unlearning method is asked to forget for a target (torch-free).

A scope is a registered function ``(closure, target fact_id, minimal sets or None) -> relationship fact_ids``:

- ``target``: the target alone (the paper's setting, Wu et al. 2025, Sec. 4);
- ``minimum``: a minimum-cardinality deep unlearning set of the target (CP-SAT, :func:`dukb.solver.mdus.minimum_set`);
- ``best``: among the target's minimal deep unlearning sets, the one whose removal loses the fewest facts of the
  deductive closure (:func:`dukb.solver.mdus.least_damaging_set`).

Every scope but ``target`` returns a deep unlearning set (Wu et al. 2025, Definition 2): forgetting all of it makes
the target non-derivable. A new scope is one function plus a :func:`register_scope` line here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dukb import InputError
from dukb.solver.closure import Closure
from dukb.solver.mdus import least_damaging_set, minimal_sets


@dataclass(frozen=True)
class ForgetScope:
    """A registered forget scope.

    Attributes:
        name: registry name (used as ``METHOD@NAME`` and ``--forget-scope NAME``).
        select: ``(closure, target_fact_id, sets) -> list of relationship fact_ids``; ``sets`` are the target's
            minimal deep unlearning sets when the caller has them (else None).
        summary: one line for help texts.
        deep: the selected set is always a deep unlearning set of the target.

    Example:
        >>> scope = FORGET_SCOPES["minimum"]
        >>> scope.name, scope.deep
        ('minimum', True)
        >>> from dukb.kb.io import load_kb
        >>> from dukb.solver.closure import compute_closure
        >>> scope.select(compute_closure(load_kb("demo")), 0, None)
        [0, 3]
    """

    name: str
    select: Callable[[Closure, int, Sequence | None], list[int]]
    summary: str
    deep: bool


FORGET_SCOPES: dict[str, ForgetScope] = {}


def register_scope(scope: ForgetScope) -> ForgetScope:
    """Add a scope to :data:`FORGET_SCOPES` (called at import of this module only).

    Example:
        >>> everything = lambda closure, target, sets: list(closure.fact_ids)
        >>> scope = ForgetScope("everything_test", everything, "all facts", True)
        >>> register_scope(scope) is scope, get_scope("everything_test") is scope
        (True, True)
        >>> del FORGET_SCOPES["everything_test"]  # keep the registry as shipped
    """
    FORGET_SCOPES[scope.name] = scope
    return scope


def _target(closure: Closure, target: int, sets: Sequence | None = None) -> list[int]:
    closure.atom_of_fact(target)
    return [target]


def _minimum(closure: Closure, target: int, sets: Sequence | None = None) -> list[int]:

    return list(minimal_sets(closure, [closure.atom_of_fact(target)], "minimum").sets[0])


def _best(closure: Closure, target: int, sets: Sequence | None = None) -> list[int]:

    cands = (
        sets
        if sets is not None
        else minimal_sets(closure, [closure.atom_of_fact(target)], "exact", max_sets=10_000).sets
    )
    return list(least_damaging_set(closure, cands))


register_scope(ForgetScope("target", _target, "the target's QA alone (the paper)", False))
register_scope(ForgetScope("minimum", _minimum, "a minimum deep unlearning set of the target", True))
register_scope(ForgetScope("best", _best, "the minimal deep unlearning set losing the fewest closure facts", True))


def get_scope(name: str) -> ForgetScope:
    """The registered scope called ``name``.

    Raises:
        InputError: unknown scope (lists the registered ones).

    Example:
        >>> get_scope("best").summary
        'the minimal deep unlearning set losing the fewest closure facts'
        >>> get_scope("widest")
        Traceback (most recent call last):
            ...
        dukb.InputError: ...
    """
    try:
        return FORGET_SCOPES[name]
    except KeyError:
        raise InputError(f"unknown forget scope {name!r} (choose from {', '.join(FORGET_SCOPES)})") from None


def forget_fact_ids(
    closure: Closure, target_fact_id: int, scope: str = "target", sets: Sequence | None = None
) -> list[int]:
    """Relationship fact_ids to forget for a target under a forget scope.

    Args:
        closure: the KB's :class:`dukb.solver.closure.Closure`.
        target_fact_id: the target (a relationship fact_id of the KB).
        scope: a name of :data:`FORGET_SCOPES`.
        sets: the target's minimal deep unlearning sets (used by ``best``; computed when None).

    Returns:
        Sorted or solver-ordered list of relationship fact_ids.

    Raises:
        InputError: unknown scope or target.

    Example:
        >>> from dukb.kb.io import load_kb
        >>> from dukb.solver.closure import compute_closure
        >>> closure = compute_closure(load_kb("demo"))
        >>> forget_fact_ids(closure, 0), forget_fact_ids(closure, 0, "minimum"), forget_fact_ids(closure, 5, "best")
        ([0], [0, 3], [5, 7])
    """
    return get_scope(scope).select(closure, target_fact_id, sets)


__all__ = ["FORGET_SCOPES", "ForgetScope", "forget_fact_ids", "get_scope", "register_scope"]
