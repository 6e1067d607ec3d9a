"""The generic helpers of a protocol's row check: each protocol's row model (its ``config.py``) raises
:class:`RowFault` through :func:`need`, :func:`may`, :func:`share`, :func:`finite`, ... and :func:`row_check` turns it
into ``callable(row) -> problem or None`` for the journal reader.

Source: dukb (the checked results journal of every protocol).
"""

from __future__ import annotations

import json
import math
from typing import Callable


def missing_units(identity: dict, rows: list[dict]) -> list[tuple[int, str, float]]:
    """The (target, method, grid value) units of an evaluate run that have no row yet.

    Args:
        identity: the run's identity (config.json's ``identity``: targets, methods with their grids).
        rows: the run's result rows.

    Returns:
        Sorted list of (target, method label, value), in the identity's order of targets and methods.
    """
    done = {(int(r["target"]), r["method"], float(r["setting"][r["param"]])) for r in rows
            if isinstance(r.get("setting"), dict) and r.get("param") in r["setting"]}
    out = []
    for t in identity.get("targets") or []:
        for label, entry in (identity.get("methods") or {}).items():
            for v in entry.get("grid") or []:
                if (int(t), label, float(v)) not in done:
                    out.append((int(t), label, float(v)))
    return out


def evaluate_row_key(row: dict) -> tuple:
    """(target, method label, swept value) identifying a `dukb evaluate` row."""
    return (int(row["target"]), row["method"], float(row["setting"][row["param"]]))


# --------------------------------------------------------------------------------------------- row checks --------
#: Largest magnitude of an integer id in a row (a fact id, a target): :data:`dukb.kb.csvfile.MAX_INT_DIGITS` digits.
ROW_ID_LIMIT = 10 ** 18


class _RowFault(Exception):
    """What is wrong with a row (:func:`row_check`)."""


def _show(v) -> str:
    """A value as a row check's message shows it: JSON spelling, clipped."""
    if isinstance(v, bool) or v is None:
        return json.dumps(v)
    if isinstance(v, int):
        return str(v) if abs(v) < ROW_ID_LIMIT else f"an integer of {len(str(abs(v)))} digits"
    if isinstance(v, float):
        return "NaN" if v != v else ("Infinity" if v > 0 else "-Infinity") if v in (float("inf"), float("-inf")) \
            else repr(v)
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, list):
        return "a list"
    s = json.dumps(v, ensure_ascii=False)
    return s if len(s) <= 40 else s[:37] + '..."'


def _is_number(v, finite: bool = True) -> bool:
    """A JSON number (a bool is not one) that converts to a float (a finite one when ``finite``)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        f = float(v)
    except OverflowError:  # an integer of hundreds of digits
        return False
    return math.isfinite(f) or not finite


#: what each kind of a row check accepts: kind -> (test, the expectation in words)
_KINDS: dict[str, tuple[Callable[[object], bool], str]] = {
    "str": (lambda v: isinstance(v, str), "a string"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "int": (lambda v: isinstance(v, int) and not isinstance(v, bool) and abs(v) < ROW_ID_LIMIT,
            f"an integer of at most {len(str(ROW_ID_LIMIT)) - 1} digits"),
    "num": (_is_number, "a number"),
    # NaN or null allowed (a score of an empty text: the writer spells NaN as null, :meth:`ResultsFile.append`)
    "score": (lambda v: v is None or _is_number(v, finite=False), "a number"),
    "dict": (lambda v: isinstance(v, dict), "an object"),
    "list": (lambda v: isinstance(v, list), "a list"),
    "any": (lambda v: True, "a value"),
}


def _expect(value, kind: str, name: str) -> None:
    """Raise :class:`_RowFault` unless ``value`` is of ``kind`` (a trailing ``?`` also allows null; ``[kind]`` is a
    list of such values)."""
    nullable = kind.endswith("?")
    if nullable:
        if value is None:
            return
        kind = kind[:-1]
    if kind.startswith("["):
        if not isinstance(value, list):
            raise _RowFault(f"field {name}: expected a list{' or null' if nullable else ''}, got {_show(value)}")
        for i, v in enumerate(value):
            _expect(v, kind[1:-1], f"{name}[{i}]")
        return
    test, words = _KINDS[kind]
    if kind == "int" and not (isinstance(value, int) and not isinstance(value, bool)):
        words = "an integer"
    if not test(value):
        raise _RowFault(f"field {name}: expected {words}{' or null' if nullable else ''}, got {_show(value)}")


def _need(row: dict, name: str, kind: str) -> None:
    if name not in row:
        raise _RowFault(f"field {name}: missing")
    _expect(row[name], kind, name)


def _may(row: dict, name: str, kind: str) -> None:
    if name in row:
        _expect(row[name], kind, name)


def _swept(row: dict, setting_kind: str = "dict") -> None:
    """``param`` (a string or null) names a finite number in ``setting`` (the swept value a report orders by)."""
    _need(row, "param", "str?")
    _need(row, "setting", setting_kind)
    if row["param"] is not None:
        setting = row["setting"]
        if not isinstance(setting, dict) or row["param"] not in setting:
            raise _RowFault(f"field setting: no value of its param {_show(row['param'])}")
        _expect(setting[row["param"]], "num", f"setting.{row['param']}")


def _dict_of(row: dict, name: str, kinds: dict[str, str]) -> None:
    """``row[name]``, when present and not null, is an object whose keys in ``kinds`` (when present) are of their
    kinds."""
    sub = row.get(name)
    if sub is None:
        return
    _expect(sub, "dict", name)
    for k, kind in kinds.items():
        if k in sub:
            _expect(sub[k], kind, f"{name}.{k}")


def _share(row: dict, name: str) -> None:
    """``row[name]``, when present, is null or a share: a number in [0, 1] (true and false count as 1 and 0)."""
    if name not in row or row[name] is None:
        return
    v = row[name]
    if not (isinstance(v, bool) or (_is_number(v) and 0 <= float(v) <= 1)):
        raise _RowFault(f"field {name}: expected a share in [0, 1] or null, got {_show(v)}")


def _finite(row: dict) -> None:
    """Every number anywhere in ``row`` is finite (the writer spells a NaN as null, :meth:`ResultsFile.append`)."""
    todo: list[tuple[str, object]] = [(k, v) for k, v in row.items()]
    while todo:
        name, v = todo.pop()
        if isinstance(v, float) and not math.isfinite(v):
            raise _RowFault(f"field {name}: expected a finite number, got {_show(v)}")
        if isinstance(v, dict):
            todo += [(f"{name}.{k}", x) for k, x in v.items()]
        elif isinstance(v, list):
            todo += [(f"{name}[{i}]", x) for i, x in enumerate(v)]


#: evaluate row fields that are shares (Wu et al. 2025, Eq. 1-2: recall and accuracy; Definition 2: Success-DU), with
#: their held-out and under-attack variants
_EVALUATE_SHARES = tuple(f"{base}{suffix}" for base in ("recall", "accuracy_all", "accuracy_relationships",
                                                        "accuracy_biographies", "success_du")
                         for suffix in ("", "_heldout", "_under_attack")) + ("recall_heldout_scorable",)


def _evaluate_row(row: dict) -> None:
    """What `dukb report` reads of an evaluate row (dukb.neural.protocols.evaluate.report, dukb.neural.metrics.summary)."""
    _may(row, "recall", "num")
    _may(row, "accuracy_all", "num?")  # null: nothing left to score (n_scored 0)
    _may(row, "target_forgotten", "bool")
    _need(row, "target", "int")
    _need(row, "method", "str")
    _need(row, "param", "str")
    _swept(row)
    if "recall" in row:  # the trade-off and Acc@Superficial read them beside recall
        _need(row, "accuracy_all", "num?")
        _need(row, "target_forgotten", "bool")
    if "success_du" in row and row["success_du"] is not None and not isinstance(row["success_du"], bool):
        _expect(row["success_du"], "num", "success_du")
    _may(row, "target_relation", "str?")
    _may(row, "forgotten_relationships", "[int]?")
    for name in _EVALUATE_SHARES:
        _share(row, name)
    _finite(row)


def _muse_row(row: dict) -> None:
    """What `dukb report` reads of a muse row (dukb.neural.protocols.muse.report)."""
    for name in ("request", "experiment", "model_kind"):
        _need(row, name, "str")
    _need(row, "method", "str" if row["model_kind"] == "unlearned" else "str?")
    if row.get("param") is not None or row.get("setting") is not None:
        _swept(row, "dict?")
    for name in ("verbmem_forget", "knowmem_forget", "knowmem_retain"):
        _need(row, name, "num?")
    _may(row, "privleak", "num?")
    _may(row, "mia_auc", "num?")
    _dict_of(row, "items", {c: "[num]?" for c in ("verbmem_forget", "knowmem_forget", "knowmem_retain")})
    for name in ("verbmem_forget", "knowmem_forget", "knowmem_retain", "mia_auc"):  # ROUGE-L and AUC: shares
        _share(row, name)
    if "mia" in row:
        _expect(row["mia"], "dict", "mia")
        _dict_of(row, "mia", {"forget": "[score]", "retain": "[score]?", "holdout": "[score]?"})
        if row["mia"].get("holdout"):
            _need(row["mia"], "forget", "[score]")


#: the rwku columns a report averages (dukb.neural.protocols.rwku.report.COLS without the MIA ones)
_RWKU_SCORES = ("rouge_forget_fb", "rouge_forget_qa", "rouge_forget_aa", "rouge_neighbour_fb", "rouge_neighbour_qa",
                "rouge_neighbour_all", "rouge_distant_all", "recall", "recall_under_attack", "accuracy_all")


def _rwku_row(row: dict) -> None:
    """What `dukb report` reads of an rwku row (dukb.neural.protocols.rwku.report)."""
    _need(row, "request", "str")
    _need(row, "request_kind", "str")
    if row["request_kind"] not in ("single", "batch"):
        raise _RowFault(f"field request_kind: expected \"single\" or \"batch\", got {_show(row['request_kind'])}")
    if row["request_kind"] == "batch":
        from dukb.kb.csvfile import strict_int

        parts = row["request"].split("-")
        if len(parts) < 2 or strict_int(parts[1]) is None:
            raise _RowFault(f"field request: a batch request is named batch-N, got {_show(row['request'])}")
    _need(row, "method", "str?")
    _swept(row)
    _need(row, "targets", "list")
    _need(row, "rouge_forget_all", "num")
    for name in ("rouge_forget_fb", "rouge_forget_qa"):
        _need(row, name, "num?")
    for name in _RWKU_SCORES:
        _may(row, name, "num?")
    if row.get("rouge_forget_aa_by_kind") is not None:
        _expect(row["rouge_forget_aa_by_kind"], "dict", "rouge_forget_aa_by_kind")
        for k, v in row["rouge_forget_aa_by_kind"].items():
            _expect(v, "num?", f"rouge_forget_aa_by_kind.{k}")
    for name in ("mia_fm", "mia_rm", "mia_auc_fm_rm"):
        _dict_of(row, name, {"loss": "score?"})
    for name in _RWKU_SCORES + ("rouge_forget_all", "rouge_distant_fb", "rouge_distant_qa"):  # ROUGE-L, recall
        _share(row, name)
    for k, v in (row.get("mia_auc_fm_rm") or {}).items():  # an AUC per attack (a NaN: nothing to score)
        if _is_number(v) and not 0 <= float(v) <= 1:
            raise _RowFault(f"field mia_auc_fm_rm.{k}: expected a share in [0, 1] or null, got {_show(v)}")


def _control_row(row: dict) -> None:
    """What `dukb report` reads of a control row (dukb.neural.protocols.control.report, dukb.neural.calibration)."""
    _need(row, "ratio", "str")
    _need(row, "control", "str")
    original = row["control"] == "original"
    _need(row, "method", "str?" if original else "str")
    _need(row, "value", "num?" if original else "num")
    _may(row, "param", "str?")
    for name in ("ps_exact_retain", "ps_exact_forget", "ps_perturb_retain", "ps_perturb_forget", "ps_similar_retain",
                 "ps_similar_forget", "confidence_retain", "confidence_forget", "accuracy_all_facts"):
        _may(row, name, "num?")
        _share(row, name)  # means of probabilities and of 0/1 scores
    _need(row, "forgotten_relationships", "[int]")
    _need(row, "forgotten_biographies", "[int]")
    if row.get("retain_train_fact_ids"):
        _dict_of(row, "retain_train_fact_ids", {})
        for k in ("relationships", "biographies"):
            _need(row["retain_train_fact_ids"], k, "[int]")
    _dict_of(row, "risk_curve", {"unlearning_risk": "[score]?", "loss_retain": "[score]?"})


def _restor_row(row: dict) -> None:
    """What `dukb report` reads of a restor row (dukb.neural.restor.report, dukb.neural.restor.states)."""
    _need(row, "method", "str")
    _need(row, "targeted", "bool")
    _need(row, "setting", "any")
    _need(row, "rows", "list")
    for i, r in enumerate(row["rows"]):
        _expect(r, "dict", f"rows[{i}]")
        _need(r, "correct", "bool")
        _need(r, "label", "str")
        _need(r, "answer", "str?")
    for name in ("seconds_unlearn", "seconds_probe", "seconds_logprobs"):
        _may(row, name, "num?")
    if row.get("logprobs_A") is not None:
        _expect(row["logprobs_A"], "list", "logprobs_A")
        for i, d in enumerate(row["logprobs_A"]):
            _expect(d, "dict", f"logprobs_A[{i}]")
            for k in ("true", "injected", "random"):
                _need(d, k, "score?")
    _dict_of(row, "beliefs", {"examples_contradicting": "[str]?", "examples_false": "[str]?"})


#: protocol -> the check of its result rows: the fields its report reads, their types (a bool is not a number or an
#: integer), finite numbers
ROW_CHECKS: dict[str, Callable[[dict], None]] = {"evaluate": _evaluate_row, "muse": _muse_row, "rwku": _rwku_row,
                                                 "control": _control_row, "restor": _restor_row}

#: each protocol's row key (``module.name``) -> the protocol: a journal read with that key gets its row check
KEY_PROTOCOLS = {"dukb.neural.run.rows.evaluate_row_key": "evaluate", "dukb.neural.protocols.muse.config.muse_row_key": "muse",
                 "dukb.neural.protocols.rwku.config.rwku_row_key": "rwku", "dukb.neural.protocols.control.config.control_row_key": "control",
                 "dukb.neural.restor.files._rows_key": "restor"}


def row_check(protocol: str) -> Callable[[dict], str | None]:
    """The row check of a protocol: callable(row) -> None for a row its report can render, else the problem in words
    (``field recall: expected a number, got NaN``, ``field target: missing``).

    Raises:
        KeyError: an unknown protocol.
    """
    fn = ROW_CHECKS[protocol]

    def check(row: dict) -> str | None:
        try:
            fn(row)
        except _RowFault as e:
            return str(e)
        return None

    check.__name__ = f"{protocol}_row_check"
    return check


#: row metrics of an evaluate run whose field of the same name every row holds (the summary metrics tradeoff and
#: acc_at_superficial read recall)
_METRIC_FIELDS = {"recall": "recall", "recall_heldout": "recall_heldout", "recall_under_attack": "recall_under_attack",
                  "tradeoff": "recall", "acc_at_superficial": "recall"}


def evaluate_plan_check(config: dict) -> Callable[[dict], str | None] | None:
    """The check of an evaluate row against its run's plan (config.json's ``identity``): its target is one of the
    run's targets, its method one of its methods with that method's swept parameter, its swept value in that
    method's grid, and it holds the field of every row metric the run computes (``recall`` when the run's metrics
    include recall, tradeoff or acc_at_superficial). A row that fails cannot come from the run.

    Args:
        config: the run's config.json (a dict); its ``identity`` holds ``targets`` (ints), ``methods`` (label ->
            ``param`` and ``grid``) and ``metrics`` (names).

    Returns:
        callable(row) -> the problem in words or None, for rows that passed :func:`row_check`; None when the
        config has no identity to check against (a run of an older dukb, a hand-made directory).
    """
    identity = config.get("identity") if isinstance(config, dict) else None
    if not isinstance(identity, dict):
        return None
    targets = identity.get("targets")
    targets = {t for t in targets if isinstance(t, int)} if isinstance(targets, list) else None
    methods = identity.get("methods") if isinstance(identity.get("methods"), dict) else None
    metrics = identity.get("metrics")
    need = sorted({_METRIC_FIELDS[m] for m in metrics if isinstance(m, str) and m in _METRIC_FIELDS}) \
        if isinstance(metrics, list) else []

    def check(row: dict) -> str | None:
        if targets is not None and row["target"] not in targets:
            return f"field target: {_show(row['target'])} is not a target of the run (config.json)"
        if methods is not None:
            entry = methods.get(row["method"])
            if not isinstance(entry, dict):
                return f"field method: {_show(row['method'])} is not a method of the run (config.json)"
            param, grid = entry.get("param"), entry.get("grid")
            if isinstance(param, str) and row["param"] != param:
                return f"field param: {_show(row['param'])} is not the swept parameter of {row['method']} ({param})"
            if isinstance(grid, list) and row["param"] is not None:
                value = float(row["setting"][row["param"]])
                if not any(_is_number(g) and float(g) == value for g in grid):
                    return (f"field setting.{row['param']}: {_show(row['setting'][row['param']])} is not in the grid "
                            f"of {row['method']} (config.json)")
        for name in need:
            if name not in row:
                return f"field {name}: missing (the run computes it for every row)"
        return None

    return check


#: protocol -> the check of its rows against the run's config (:func:`evaluate_plan_check`); the other protocols'
#: identities are not checked yet
PLAN_CHECKS: dict[str, Callable[[dict], Callable[[dict], str | None] | None]] = {"evaluate": evaluate_plan_check}


def check_for_key(key: Callable | None) -> Callable[[dict], str | None] | None:
    """The row check of the protocol whose row key ``key`` is (:data:`KEY_PROTOCOLS`), None for another key."""
    name = f"{getattr(key, '__module__', '')}.{getattr(key, '__qualname__', '')}"
    protocol = KEY_PROTOCOLS.get(name)
    return None if protocol is None else row_check(protocol)


__all__ = ["KEY_PROTOCOLS", "PLAN_CHECKS", "ROW_CHECKS", "ROW_ID_LIMIT", "check_for_key", "evaluate_plan_check", "evaluate_row_key", "missing_units", "row_check"]
