"""Recall and accuracy of deep unlearning (Wu et al. 2025, Eq. 1-2) as a row metric.

Recall = max over minimal deep unlearning sets M of |U_A ∩ M| / |M| (Eq. 1), accuracy = the share of the facts
outside that M the model still knows (Eq. 2), over relationships, biographies and all facts; computed by
:func:`dukb.solver.metrics.recall_accuracy` from the facts the probe finds forgotten. Honest protocol: the facts the
method trained on as retain data (the row's ``retain_fact_ids``) are not scored for accuracy.

Success-DU (:func:`success_du`): 1 when the target is not in the deductive closure of K minus the facts the model
forgot (Definition 2 of the paper, deep unlearning), else 0.
"""

from __future__ import annotations

from dukb.kb.retained import Retained
from dukb.neural.data import QA_KIND
from dukb.neural.metrics.base import Metric, Needs, RowContext
from dukb.solver.mdus import is_deep_unlearning_set
from dukb.solver.metrics import recall_accuracy

FIELDS = (
    "recall",
    "accuracy_relationships",
    "accuracy_biographies",
    "accuracy_all",
    "best_set",
    "sets_used",
    "n_sets",
    "target_forgotten",
    "forgotten_relationships",
    "forgotten_biographies",
    "n_scored",
    "n_scored_relationships",
)


def retained_from_probe(kb, df, known_before=None):
    """Turn a probe table (kind "qa" rows) into :class:`dukb.kb.retained.Retained` (known per fact).

    Args:
        kb: the :class:`dukb.kb.model.KB`; df: the probe table (pandas, columns kind, fact_kind, fact_id, known).
        known_before: under ``--no-finetune`` the (fact kind, fact_id) pairs the model knew before unlearning; a fact
            outside them is unscorable and need not be in the table (the run does not probe it after unlearning): it
            is read as retained, so it is never forgotten. None: every fact must be in the table.

    Raises:
        ValueError: the table lacks a (scorable) fact of the KB.

    Source: Wu et al. 2025, Eq. 1 (a fact counts as forgotten only if the model knew it).
    """

    qa = df[df["kind"] == QA_KIND]
    known = {(k, int(f)): bool(v) for k, f, v in zip(qa["fact_kind"], qa["fact_id"], qa["known"])}

    def read(kind: str, fact_id: int) -> bool:
        key = (kind, fact_id)
        if key in known:
            return known[key]
        if known_before is not None and key not in known_before:
            return True  # unscorable: not probed after unlearning, never forgotten
        raise ValueError(f"the probe table lacks the qa row of {kind} fact {fact_id}")

    rel = {f.fact_id: read("relationship", f.fact_id) for f in kb.relationships}
    bio = {f.fact_id: read("biography", f.fact_id) for f in kb.biographies} if kb.biographies else None
    return Retained(rel, bio)


def recall_metric(ctx: RowContext) -> dict:
    """Recall, accuracies, the best set and the forgotten facts of one unlearned model.

    Args:
        ctx: :class:`RowContext`; its probe table must hold the "qa" rows of every KB fact with ``known``.

    Returns:
        The fields of :data:`FIELDS` (forgotten_* as sorted fact_id lists); the accuracies leave out
        ``ctx.retain_ids``; an accuracy with nothing left to score is None (JSON null) and ``n_scored`` (facts
        accuracy_all scored) is 0. With ``ctx.known_before`` (``--no-finetune``) the facts the model did not know
        are unscorable: never in forgotten_*, left out of the accuracies and of recall's sets
        (:func:`scorable_sets`), and the row also gets ``unscorable`` ({"relationships": n, "biographies": n}).

    Raises:
        ValueError: the probe table lacks a fact of the KB; with ``known_before``, every set wholly unscorable.

    Source: Wu et al. 2025, Eq. 1-2; the benchmark's calculate_recall_and_acc.py.
    """

    ret = retained_from_probe(ctx.kb, ctx.probe, ctx.known_before)
    forgot_rel, forgot_bio = set(ret.forgotten_relationships), set(ret.forgotten_biographies)
    un_rel, un_bio = unknown_before(ctx.kb, ctx.known_before)
    forgot_rel, forgot_bio = forgot_rel - un_rel, forgot_bio - un_bio  # never known: never forgotten
    sets = ctx.sets if ctx.known_before is None else scorable_sets(ctx.sets, un_rel)
    if ctx.known_before is not None and not sets:
        raise ValueError(
            f"target {ctx.target}: every minimal set is wholly unscorable (facts the model did not "
            "know before unlearning)"
        )
    r = recall_accuracy(
        ctx.kb,
        sets,
        forgot_rel,
        None if ret.biographies is None else forgot_bio,
        ctx.sets_used,
        [ctx.target],
        exclude_rel=set(ctx.retain_ids.get("relationships", ())) | un_rel,
        exclude_bio=set(ctx.retain_ids.get("biographies", ())) | un_bio,
        tie_break=ctx.tie_break,
    )
    out = {**r.to_json(), "forgotten_relationships": sorted(forgot_rel), "forgotten_biographies": sorted(forgot_bio)}
    if ctx.known_before is not None:  # only then, so that rows scored on every fact stay as they were
        out["unscorable"] = {"relationships": len(un_rel), "biographies": len(un_bio)}
    return out


def unknown_before(kb, known_before) -> tuple[set, set]:
    """The unscorable facts of a model evaluated on its own knowledge: the relationship and biography fact_ids of
    ``kb`` outside ``known_before`` ((fact kind, fact_id) pairs; None: none is unscorable).

    Returns:
        (relationship fact_ids, biography fact_ids), two sets.

    Source: Wu et al. 2025, Eq. 1 (a fact counts as forgotten only if the model knew it); :mod:`dukb.neural.known`.
    """
    if known_before is None:
        return set(), set()
    return (
        {f.fact_id for f in kb.relationships if ("relationship", f.fact_id) not in known_before},
        {b.fact_id for b in kb.biographies if ("biography", b.fact_id) not in known_before},
    )


def scorable_sets(sets, unscorable) -> list[list[int]]:
    """The minimal sets restricted to the scorable facts, M \\ X for each M (X: the unscorable relationship
    fact_ids), those left empty dropped and duplicates kept once, in the sets' order: recall (Eq. 1) over them
    never counts an unscorable fact, in its numerator or its denominator. Under ``--no-finetune`` the sets are
    the known part's (:mod:`dukb.neural.known`), so each is already wholly scorable and this changes nothing.

    Source: Wu et al. 2025, Eq. 1, restricted to the scorable facts (dukb).
    """
    x = set(unscorable)
    out: list[list[int]] = []
    seen: set[frozenset] = set()
    for m in sets:
        kept = [f for f in m if f not in x]
        if kept and frozenset(kept) not in seen:
            seen.add(frozenset(kept))
            out.append(kept)
    return out


def success_du(closure, target: int, forgotten_relationships) -> int:
    """Success-DU of one unlearned model: 1 when the target is not in Ω(K \\ U_A, R), else 0.

    Args:
        closure: the :class:`dukb.solver.closure.Closure` of K under the run's rules.
        target: the target's relationship fact_id, int.
        forgotten_relationships: U_A, the relationship fact_ids the model no longer knows (iterable of int).

    Returns:
        1 or 0 (int).

    Raises:
        InputError: a fact_id is not a fact of K.

    Source: Wu et al. 2025, Definition 2 (deep unlearning); Success-DU of the paper's v4.
    """

    return int(
        is_deep_unlearning_set(closure, [closure.atom_of_fact(int(target))], [int(f) for f in forgotten_relationships])
    )


def success_du_fields(closure, target: int, fields: dict) -> dict:
    """``success_du`` (and ``success_du_heldout``) of a row from its forgotten relationships on the probed forms
    (``forgotten_relationships``) and on the held-out forms (``forgotten_relationships_heldout``): the one place a
    row's Success-DU is computed (:func:`success_du`).

    Args:
        closure: the run's :class:`dukb.solver.closure.Closure`; target: the target's relationship fact_id;
        fields: the row's metric fields (dict; a source field that is absent or None gives no output field).

    Returns:
        dict with ``success_du`` and/or ``success_du_heldout`` (1 or 0 each).

    Raises:
        InputError: a fact_id is not a fact of K.

    Source: Wu et al. 2025, Definition 2 (Success-DU of the paper's v4).
    """
    out = {}
    for src, dst in (
        ("forgotten_relationships", "success_du"),
        ("forgotten_relationships_heldout", "success_du_heldout"),
    ):
        if fields.get(src) is not None:
            out[dst] = success_du(closure, target, fields[src])
    return out


def score_probe(ctx: RowContext) -> dict:
    """Recall, accuracies, the forgotten facts and Success-DU of one probe table: :func:`recall_metric`'s fields
    followed by ``success_du`` (:func:`success_du_fields`); what ``dukb attack`` scores a checkpoint and each
    attacked copy with.

    Args:
        ctx: :class:`RowContext` with ``closure`` set and the "qa" rows of every KB fact in its probe table.

    Returns:
        dict: :data:`FIELDS`, forgotten_relationships, forgotten_biographies, success_du.

    Raises:
        ValueError: the probe table lacks a fact of the KB.

    Source: Wu et al. 2025, Eq. 1-2 and Definition 2.
    """
    out = recall_metric(ctx)
    out.update(success_du_fields(ctx.closure, ctx.target, out))
    return out


def success_du_all(closure, targets, forgotten_relationships) -> int:
    """Success-DU of an unlearning request with several targets: 1 when *every* target is outside
    Ω(K \\ U_A, R) (each is deeply unlearned, Definition 2), else 0.

    Args:
        closure: the run's :class:`dukb.solver.closure.Closure`; targets: relationship fact_ids (iterable of int,
            non-empty); forgotten_relationships: U_A (iterable of int).

    Returns:
        1 or 0 (int).

    Raises:
        InputError: a fact_id is not a fact of K; ValueError: no target.

    Source: Wu et al. 2025, Definition 2, applied to each target of a batch (RWKU's batch-target setting, Unlearning
    with Control's forget ratios).
    """
    targets = [int(t) for t in targets]
    if not targets:
        raise ValueError("Success-DU needs at least one target")
    forgotten = [int(f) for f in forgotten_relationships]
    return int(all(success_du(closure, t, forgotten) for t in targets))


RECALL = Metric(
    "recall",
    recall_metric,
    Needs(kinds=("qa",), generate=True),
    "row",
    FIELDS,
    "recall and accuracy of deep unlearning against the minimal deep unlearning sets",
    "Wu et al. 2025, Eq. 1-2",
)
