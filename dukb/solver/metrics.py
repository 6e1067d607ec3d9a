"""Recall and accuracy of deep unlearning (Wu et al. 2025, Eq. 1 and 2; the benchmark's calculate_recall_and_acc.py).

Notation: K_rel, K_bio = the KB's relationship and biography facts; U_A = relationship facts of K the unlearned
model no longer knows; M = the minimal deep unlearning sets of the target.

- Eq. 1: Recall = max_{U* ∈ M} |U_A ∩ U*| / |U*|; U_A,* is the maximising U*. The paper leaves ties open; dukb
  breaks them by default (``tie_break="accuracy"``) by the higher relationship accuracy, then the smaller set, then
  the smaller sorted fact_ids, and says so in the result (``ties``). ``tie_break="first"`` keeps the first
  maximising set in the order M is given, as the reference does (``np.asarray(recall_list).argmax()``,
  calculate_recall_and_acc.py:43 of github.com/wrh14/deep_unlearning).
- Eq. 2: Accuracy (relationships) = |(K_rel \\ U_A,*) \\ U_A| / |K_rel \\ U_A,*|.
- Accuracy (biographies) = share of K_bio still known.
- Accuracy (all) = (acc_bio · N_bio + acc_rel · (N_rel − |U_A,*|)) / (N_bio + N_rel − |U_A,*|).
- Honest accuracy: facts a method trained on as retain data are left out of every accuracy (numerator and
  denominator); see :func:`recall_accuracy`.
- Nothing to score: an accuracy whose denominator is 0 (every fact outside U_A,* is excluded, e.g. a retain set that
  covers every fact outside the forget set) is NaN (null in JSON, :func:`json_safe`), never 1.0; the result's
  ``n_scored`` says how many facts accuracy_all scored.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from dukb import InputError
from dukb.kb.model import KB
from dukb.solver.mdus import minimal_sets

NAN = float("nan")

#: How :func:`recall_accuracy` picks U_A,* among sets tied on recall: "accuracy" (dukb's default: the higher
#: relationship accuracy, then the smaller set, then the smaller sorted fact_ids) or "first" (the first in M's order,
#: the reference's argmax).
TIE_BREAKS = ("accuracy", "first")


def ratio(num: float, den: float) -> float:
    """``num / den``, or NaN when ``den`` is 0 (a metric with nothing to score is undefined, never 1.0).

    Args:
        num, den: counts or sums (floats or ints).

    Returns:
        float (NaN when ``den == 0``).

    Source: Wu et al. 2025, Eq. 2 (an accuracy over no fact, 0/0, is undefined).

    Example:
        >>> ratio(1, 4), ratio(0, 0)
        (0.25, nan)
    """
    return NAN if den == 0 else num / den


def json_safe(obj):
    """``obj`` with every float NaN replaced by None, recursively through dicts, lists and tuples (tuples become
    lists), so that ``json.dumps`` writes ``null`` where a metric had nothing to score (a bare NaN is not JSON).

    Args:
        obj: a JSON-like value.

    Returns:
        the same structure without NaN.

    Source: RFC 8259, Sec. 6 (NaN is not a JSON number).

    Example:
        >>> json_safe({"recall": float("nan"), "counts": (1, float("nan"))})
        {'recall': None, 'counts': [1, None]}
    """
    if isinstance(obj, float):
        return None if math.isnan(obj) else obj
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


@dataclass
class RecallResult:
    """Recall/accuracy of one unlearning outcome. All values are fractions in [0, 1].

    Attributes:
        recall: Eq. 1.
        accuracy_relationships: Eq. 2 (NaN when no relationship fact is left to score).
        accuracy_biographies: share of biography facts still known (None when the KB has none or they were not
            probed; NaN when every biography is excluded).
        accuracy_all: the weighted accuracy over K \\ U_A,* (NaN when no fact is left to score).
        best_set: U_A,* as sorted relationship fact_ids.
        sets_used: "exact", "random" or "paper" (or "minimum").
        n_sets: |M| used.
        ties: number of sets that reached the best recall (ties broken as in the module docstring).
        target_forgotten: whether every target KB fact is in U_A (superficial unlearning; None for derived targets).
        n_scored: facts accuracy_all scored (its denominator; 0 when it is NaN).
        n_scored_relationships: relationship facts accuracy_relationships scored.

    Example:
        >>> from dukb.kb.io import load_kb
        >>> result = recall_accuracy(load_kb("demo"), [(5, 6), (5, 7)], forgotten_rel=[5])
        >>> result.recall, result.best_set, result.to_json()["accuracy_biographies"]
        (0.5, [5, 6], None)
    """

    recall: float
    accuracy_relationships: float
    accuracy_biographies: float | None
    accuracy_all: float
    best_set: list[int]
    sets_used: str
    n_sets: int
    ties: int = 1
    target_forgotten: bool | None = None
    n_scored: int | None = None
    n_scored_relationships: int | None = None

    def to_json(self) -> dict:
        """The result as the JSON object of ``dukb recall`` (keys recall, accuracy_relationships,
        accuracy_biographies, accuracy_all, best_set, sets_used, n_sets, plus ties, target_forgotten, n_scored,
        n_scored_relationships); an accuracy with nothing to score is None (JSON null)."""
        return json_safe(asdict(self))


def recall_accuracy(
    kb: KB,
    sets,
    forgotten_rel,
    forgotten_bio=None,
    sets_used: str = "exact",
    target_fact_ids=(),
    exclude_rel=(),
    exclude_bio=(),
    tie_break: str = "accuracy",
) -> RecallResult:
    r"""Recall and accuracies of an unlearning outcome against the minimal deep unlearning sets M.

    Honest accuracy: facts a method trained on as retain data (``exclude_rel``, ``exclude_bio``) are left out of the
    accuracies' numerators and denominators, so data a method trains on is never scored as retained knowledge (the
    retain-train / retain-eval split of MUSE, Shi et al. 2024 Sec. 3, and Unlearning with Control). With E the
    excluded facts, for a set U* ∈ M:

        acc_rel(U*) = |(K_rel \ U* \ E_rel) \ U_A| / |K_rel \ U* \ E_rel|,
        acc_bio     = |(K_bio \ E_bio) \ F_bio| / |K_bio \ E_bio|,

    and accuracy_all weighs them by their denominators. With no exclusions these are Eq. 2 and the benchmark's
    accuracies. Recall (Eq. 1) does not change: excluded facts in U* still count when forgotten. An accuracy whose
    denominator is 0 is NaN (nothing to score), never 1.0; ``n_scored`` is accuracy_all's denominator. Among sets
    tied in recall, with ``tie_break="accuracy"`` one whose relationship accuracy can be scored is preferred to one
    whose cannot, then the higher accuracy, the smaller set, the smaller sorted fact_ids; with ``"first"`` the
    first of them in the order of ``sets`` (the reference: ``argmax = np.asarray(recall_list).argmax()``,
    calculate_recall_and_acc.py:43, over ``list(minimal_unlearn_set)``, utils_metric.py:114). Recall is the same
    under both; only U_A,* and so the accuracies can differ.

    Args:
        kb: the KB (N_rel, N_bio).
        sets: M, an iterable of collections of relationship fact_ids (non-empty).
        forgotten_rel: U_A, relationship fact_ids the model no longer knows.
        forgotten_bio: biography fact_ids the model no longer knows; None when biographies were not probed (then
            accuracy_biographies is None and accuracy_all covers relationships only).
        sets_used: label recorded in the result ("exact" | "random" | "minimum" | "paper").
        target_fact_ids: the targets that are KB facts, to report ``target_forgotten``.
        exclude_rel: relationship fact_ids not scored for accuracy (retain-train facts).
        exclude_bio: biography fact_ids not scored for accuracy (retain-train facts).
        tie_break: "accuracy" (default) or "first" (:data:`TIE_BREAKS`).

    Returns:
        :class:`RecallResult`.

    Raises:
        InputError: M is empty or contains an empty set; U_A or an exclusion names unknown fact_ids; an unknown
            tie_break.

    Source: Wu et al. 2025, Eq. 1 and 2; calculate_recall_and_acc.py of the benchmark.

    Example:
        >>> from dukb.kb.io import load_kb
        >>> kb = load_kb("demo")
        >>> r = recall_accuracy(kb, [(5, 6), (5, 7)], forgotten_rel=[5, 7, 9])
        >>> r.recall, r.best_set, r.accuracy_relationships, r.n_scored_relationships  # fact 9 lost collaterally
        (1.0, [5, 7], 0.9375, 16)
        >>> recall_accuracy(kb, [(5, 6)], forgotten_rel=[], exclude_rel=range(18)).accuracy_relationships
        nan
    """
    if tie_break not in TIE_BREAKS:
        raise InputError(f"unknown tie-break {tie_break!r} (choose {' or '.join(TIE_BREAKS)})")
    sets = [tuple(sorted(s)) for s in sets]
    if not sets or any(len(s) == 0 for s in sets):
        raise InputError("recall needs a non-empty collection of non-empty minimal deep unlearning sets")
    u_a = set(forgotten_rel)
    rel_ids = set(kb.rel_ids)
    unknown = u_a - rel_ids
    if unknown:
        raise InputError(f"forgotten relationship fact_ids not in the KB: {sorted(unknown)[:5]}")
    ex_rel, ex_bio = set(exclude_rel), set(exclude_bio)
    bad = (ex_rel - rel_ids) or (ex_bio - set(kb.bio_ids))
    if bad:
        raise InputError(f"excluded (retain) fact_ids not in the KB: {sorted(bad)[:5]}")
    scored_rel = rel_ids - ex_rel  # the relationship facts accuracy may score
    forgot_scored = u_a & scored_rel
    scored = []
    for s in sets:
        hit = len(u_a.intersection(s))
        in_set = scored_rel.intersection(s)
        keep = len(scored_rel) - len(in_set)
        acc = ratio(keep - (len(forgot_scored) - len(forgot_scored & in_set)), keep)
        rank = -1.0 if math.isnan(acc) else acc  # a set that leaves something to score ranks first among ties
        scored.append(((hit / len(s), rank, -len(s), tuple(-x for x in s)), s, hit / len(s), acc, keep))
    if tie_break == "first":  # max() keeps the first of equal keys: the first set of best recall in M's order
        best = max(scored, key=lambda x: x[2])
    else:
        best = max(scored, key=lambda x: x[0])
    ties = sum(1 for x in scored if x[2] == best[2])
    _, best_set, rec, acc_rel, kept_rel = best
    acc_bio = None
    n_bio = 0
    if kb.biographies and forgotten_bio is not None:
        scored_bio = set(kb.bio_ids) - ex_bio
        n_bio = len(scored_bio)
        acc_bio = ratio(n_bio - len(set(forgotten_bio) & scored_bio), n_bio)
    # the known facts, weighted as Eq. 2's accuracies (the same float arithmetic as before dukb had NaN)
    known = (acc_bio * n_bio if n_bio else 0.0) + (acc_rel * kept_rel if kept_rel else 0.0)
    acc_all = ratio(known, n_bio + kept_rel)
    tf = None
    if target_fact_ids:
        tf = all(t in u_a for t in target_fact_ids)
    return RecallResult(
        rec, acc_rel, acc_bio, acc_all, list(best_set), sets_used, len(sets), ties, tf, n_bio + kept_rel, kept_rel
    )


def target_recall(
    closure,
    targets,
    retained,
    method: str = "exact",
    *,
    max_sets: int | None = 100_000,
    seconds: float | None = 60.0,
    n_seeds: int = 100,
    seed: int = 0,
    tie_break: str = "accuracy",
    paper_sets=None,
) -> RecallResult:
    """Recall/accuracy of a model's retained facts for one target (or a group), computing M on the way.

    Args:
        closure: :class:`dukb.solver.closure.Closure` of the KB.
        targets: a global atom id or a list of them.
        retained: :class:`dukb.kb.retained.Retained`.
        method: "exact" (default; falls back to random sets, plus any exact sets found, when enumeration hits
            ``max_sets`` or ``seconds``), "random" (Algorithm 1 with ``n_seeds`` seeds) or "paper" (the paper's
            cached sets, ``paper_sets``, in their order).
        tie_break: "accuracy" or "first" (:func:`recall_accuracy`); "first" follows the sets' order: the
            enumeration order of :func:`dukb.solver.mdus.minimal_sets` for exact and random sets (ascending size,
            then ascending sorted fact_ids), the reference's order for paper sets.
        paper_sets: with method "paper", the target's sets (:func:`dukb.kb.paper_sets.paper_sets_of`).

    Returns:
        :class:`RecallResult`; ``sets_used`` says which sets were used.

    Raises:
        InputError: unknown method; "paper" without ``paper_sets`` or for more than one target.

    Source: Wu et al. 2025, Eq. 1-2 and Algorithm 1.

    Example:
        >>> from dukb.kb.io import load_kb
        >>> from dukb.kb.retained import retained_from_lists
        >>> from dukb.solver.closure import compute_closure
        >>> kb = load_kb("demo")
        >>> closure = compute_closure(kb)
        >>> retained = retained_from_lists(kb, [f.fact_id not in (5, 7) for f in kb.relationships])
        >>> r = target_recall(closure, closure.atom_of_fact(5), retained)
        >>> r.recall, r.best_set, r.target_forgotten, r.n_sets
        (1.0, [5, 7], True, 2)
    """

    if method not in ("exact", "random", "paper"):
        raise InputError(f"unknown method {method!r} for recall (choose exact, random or paper)")
    targets = [targets] if isinstance(targets, int) else list(targets)
    if method == "paper":
        if paper_sets is None or len(targets) != 1:
            raise InputError("recall with the paper's sets needs the sets of exactly one target")
        sets, used = [tuple(s) for s in paper_sets], "paper"
    else:
        res = minimal_sets(closure, targets, method, max_sets=max_sets, seconds=seconds, n_seeds=n_seeds, seed=seed)
        sets, used = res.sets, method
    if method == "exact" and not res.complete:
        rnd = minimal_sets(closure, targets, "random", n_seeds=n_seeds, seed=seed)
        sets, used = sorted(set(res.sets) | set(rnd.sets), key=lambda s: (len(s), s)), "random"
    kb_targets = [closure.fact_ids[t] for t in targets if closure.is_kb(t)]
    bio = None if retained.biographies is None else retained.forgotten_biographies
    return recall_accuracy(
        closure.kb, sets, retained.forgotten_relationships, bio, used, kb_targets, tie_break=tie_break
    )
