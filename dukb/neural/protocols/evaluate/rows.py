"""`dukb evaluate`'s rows as the run layer sees them (issue 40: the run layer knows no protocol; its ProtocolInfo
carries them): the row key, the row model and the plan check (:data:`EVALUATE_ROWS`), and the units of a run's
identity that have no row yet (:func:`missing_units`). The config and identity are in
:mod:`dukb.neural.protocols.evaluate.config`.
"""

from __future__ import annotations

from dukb.neural.run.rows import (
    RowProblem,
    RowSchema,
    expect,
    finite,
    identity_of,
    may,
    method_problem,
    need,
    share,
    show,
    swept,
)


def evaluate_row_key(row: dict) -> tuple:
    """(target, method label, swept value) identifying a `dukb evaluate` row."""
    return (int(row["target"]), row["method"], float(row["setting"][row["param"]]))


#: evaluate row fields that are shares (Wu et al. 2025, Eq. 1-2: recall and accuracy; Definition 2: Success-DU), with
#: their held-out and under-attack variants
_EVALUATE_SHARES = tuple(
    f"{base}{suffix}"
    for base in ("recall", "accuracy_all", "accuracy_relationships", "accuracy_biographies", "success_du")
    for suffix in ("", "_heldout", "_under_attack")
) + ("recall_heldout_scorable",)


def evaluate_row(row: dict) -> None:
    """The row model of `dukb evaluate`: what `dukb report` reads of a row (dukb.neural.protocols.evaluate.report,
    dukb.neural.metrics.summary): fields, their types, shares in [0, 1] (Wu et al. 2025, Eq. 1-2 and Definition 2),
    finite numbers.

    Raises:
        RowFault: the first problem, in words.
    """
    may(row, "recall", "num")
    may(row, "accuracy_all", "num?")  # null: nothing left to score (n_scored 0)
    may(row, "target_forgotten", "bool")
    need(row, "target", "int")
    need(row, "method", "str")
    need(row, "param", "str")
    swept(row)
    if "recall" in row:  # the trade-off and Acc@Superficial read them beside recall
        need(row, "accuracy_all", "num?")
        need(row, "target_forgotten", "bool")
    if "success_du" in row and row["success_du"] is not None and not isinstance(row["success_du"], bool):
        expect(row["success_du"], "num", "success_du")
    may(row, "target_relation", "str?")
    may(row, "forgotten_relationships", "[int]?")
    may(row, "utility", "dict?")  # --utility: task -> lm-eval's scores; null where lm-eval cannot run the model
    for name in _EVALUATE_SHARES:
        share(row, name)
    finite(row)


def missing_units(identity: dict, rows: list[dict]) -> list[tuple[int, str, float]]:
    """The (target, method, grid value) units of an evaluate run that have no row yet.

    Args:
        identity: the run's identity (config.json's ``identity``: targets, methods with their grids).
        rows: the run's result rows.

    Returns:
        Sorted list of (target, method label, value), in the identity's order of targets and methods.
    """
    done = {
        (int(r["target"]), r["method"], float(r["setting"][r["param"]]))
        for r in rows
        if isinstance(r.get("setting"), dict) and r.get("param") in r["setting"]
    }
    out = []
    for t in identity.get("targets") or []:
        for label, entry in (identity.get("methods") or {}).items():
            for v in entry.get("grid") or []:
                if (int(t), label, float(v)) not in done:
                    out.append((int(t), label, float(v)))
    return out


#: row metrics of an evaluate run whose field of the same name every row holds (the summary metrics tradeoff and
#: acc_at_superficial read recall)
_METRIC_FIELDS = {
    "recall": "recall",
    "recall_heldout": "recall_heldout",
    "recall_under_attack": "recall_under_attack",
    "tradeoff": "recall",
    "acc_at_superficial": "recall",
}


def evaluate_plan_check(config: dict) -> RowProblem | None:
    """The check of an evaluate row against its run's plan (config.json's ``identity``): its target is one of the
    run's targets, its method one of its methods with that method's swept parameter, its swept value in that
    method's grid, and it holds the field of every row metric the run computes (``recall`` when the run's metrics
    include recall, tradeoff or acc_at_superficial). A row that fails cannot come from the run.

    Args:
        config: the run's config.json (a dict); its ``identity`` holds ``targets`` (ints), ``methods`` (label ->
            ``param`` and ``grid``) and ``metrics`` (names).

    Returns:
        callable(row) -> the problem in words or None, for rows that passed :func:`evaluate_row`; None when the
        config has no identity to check against (a run of an older dukb, a hand-made directory).
    """
    identity = identity_of(config)
    if identity is None:
        return None
    targets = identity.get("targets")
    targets = {t for t in targets if isinstance(t, int)} if isinstance(targets, list) else None
    methods = identity.get("methods") if isinstance(identity.get("methods"), dict) else None
    metrics = identity.get("metrics")
    need = (
        sorted({_METRIC_FIELDS[m] for m in metrics if isinstance(m, str) and m in _METRIC_FIELDS})
        if isinstance(metrics, list)
        else []
    )

    def check(row: dict) -> str | None:
        if targets is not None and row["target"] not in targets:
            return f"field target: {show(row['target'])} is not a target of the run (config.json)"
        if methods is not None:
            problem = method_problem(row, methods)
            if problem:
                return problem
        for name in need:
            if name not in row:
                return f"field {name}: missing (the run computes it for every row)"
        return None

    return check


#: the rows of `dukb evaluate` (its row key, row model and plan check), carried to the run layer by its ProtocolInfo
EVALUATE_ROWS = RowSchema(key=evaluate_row_key, model=evaluate_row, plan=evaluate_plan_check)
