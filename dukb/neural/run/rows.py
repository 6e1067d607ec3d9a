"""The generic helpers of a protocol's row model: each protocol declares, in its ``config.py``, a validator
``row(dict) -> None`` that raises :class:`RowFault` through :func:`need`, :func:`may`, :func:`share`, :func:`finite`,
..., its row key and its plan check, and hands them to this layer as a :class:`RowSchema`; :meth:`RowSchema.check`
turns them into ``callable(row) -> problem or None`` for the journal reader (:mod:`dukb.neural.run.journal`).
This module knows no protocol.

Source: dukb (the checked results journal of every protocol).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass

#: Largest magnitude of an integer id in a row (a fact id, a target): :data:`dukb.kb.csvfile.MAX_INT_DIGITS` digits.
ROW_ID_LIMIT = 10**18


class RowFault(Exception):
    """What is wrong with a row (:func:`row_check`)."""


def show(v) -> str:
    """A value as a row check's message shows it: JSON spelling, clipped."""
    if isinstance(v, bool) or v is None:
        return json.dumps(v)
    if isinstance(v, int):
        return str(v) if abs(v) < ROW_ID_LIMIT else f"an integer of {len(str(abs(v)))} digits"
    if isinstance(v, float):
        return (
            "NaN"
            if v != v
            else ("Infinity" if v > 0 else "-Infinity")
            if v in (float("inf"), float("-inf"))
            else repr(v)
        )
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, list):
        return "a list"
    s = json.dumps(v, ensure_ascii=False)
    return s if len(s) <= 40 else s[:37] + '..."'


def is_number(v, finite: bool = True) -> bool:
    """A JSON number (a bool is not one) that converts to a float (a finite one when ``finite``)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        f = float(v)
    except OverflowError:  # an integer of hundreds of digits
        return False
    return math.isfinite(f) or not finite


#: what each kind of a row check accepts: kind -> (test, the expectation in words)
KINDS: dict[str, tuple[Callable[[object], bool], str]] = {
    "str": (lambda v: isinstance(v, str), "a string"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "int": (
        lambda v: isinstance(v, int) and not isinstance(v, bool) and abs(v) < ROW_ID_LIMIT,
        f"an integer of at most {len(str(ROW_ID_LIMIT)) - 1} digits",
    ),
    "num": (is_number, "a number"),
    # NaN or null allowed (a score of an empty text: the writer spells NaN as null, :meth:`ResultsFile.append`)
    "score": (lambda v: v is None or is_number(v, finite=False), "a number"),
    "dict": (lambda v: isinstance(v, dict), "an object"),
    "list": (lambda v: isinstance(v, list), "a list"),
    "any": (lambda v: True, "a value"),
}


def expect(value, kind: str, name: str) -> None:
    """Raise :class:`RowFault` unless ``value`` is of ``kind`` (a trailing ``?`` also allows null; ``[kind]`` is a
    list of such values)."""
    nullable = kind.endswith("?")
    if nullable:
        if value is None:
            return
        kind = kind[:-1]
    if kind.startswith("["):
        if not isinstance(value, list):
            raise RowFault(f"field {name}: expected a list{' or null' if nullable else ''}, got {show(value)}")
        for i, v in enumerate(value):
            expect(v, kind[1:-1], f"{name}[{i}]")
        return
    test, words = KINDS[kind]
    if kind == "int" and not (isinstance(value, int) and not isinstance(value, bool)):
        words = "an integer"
    if not test(value):
        raise RowFault(f"field {name}: expected {words}{' or null' if nullable else ''}, got {show(value)}")


def need(row: dict, name: str, kind: str) -> None:
    """``row[name]`` is present and of ``kind`` (:func:`expect`).

    Raises:
        RowFault: ``field NAME: missing``, or the value is of another kind.
    """
    if name not in row:
        raise RowFault(f"field {name}: missing")
    expect(row[name], kind, name)


def may(row: dict, name: str, kind: str) -> None:
    """``row[name]``, when present, is of ``kind`` (:func:`expect`).

    Raises:
        RowFault: the value is of another kind.
    """
    if name in row:
        expect(row[name], kind, name)


def swept(row: dict, setting_kind: str = "dict") -> None:
    """``param`` (a string or null) names a finite number in ``setting`` (the swept value a report orders by)."""
    need(row, "param", "str?")
    need(row, "setting", setting_kind)
    if row["param"] is not None:
        setting = row["setting"]
        if not isinstance(setting, dict) or row["param"] not in setting:
            raise RowFault(f"field setting: no value of its param {show(row['param'])}")
        expect(setting[row["param"]], "num", f"setting.{row['param']}")


def dict_of(row: dict, name: str, kinds: dict[str, str]) -> None:
    """``row[name]``, when present and not null, is an object whose keys in ``kinds`` (when present) are of their
    kinds."""
    sub = row.get(name)
    if sub is None:
        return
    expect(sub, "dict", name)
    for k, kind in kinds.items():
        if k in sub:
            expect(sub[k], kind, f"{name}.{k}")


def share(row: dict, name: str) -> None:
    """``row[name]``, when present, is null or a share: a number in [0, 1] (true and false count as 1 and 0)."""
    if name not in row or row[name] is None:
        return
    v = row[name]
    if not (isinstance(v, bool) or (is_number(v) and 0 <= float(v) <= 1)):
        raise RowFault(f"field {name}: expected a share in [0, 1] or null, got {show(v)}")


def finite(row: dict) -> None:
    """Every number anywhere in ``row`` is finite (the writer spells a NaN as null, :meth:`ResultsFile.append`)."""
    todo: list[tuple[str, object]] = [(k, v) for k, v in row.items()]
    while todo:
        name, v = todo.pop()
        if isinstance(v, float) and not math.isfinite(v):
            raise RowFault(f"field {name}: expected a finite number, got {show(v)}")
        if isinstance(v, dict):
            todo += [(f"{name}.{k}", x) for k, x in v.items()]
        elif isinstance(v, list):
            todo += [(f"{name}[{i}]", x) for i, x in enumerate(v)]


def in_grid(value, grid) -> bool:
    """``value`` (a finite number) equals one of ``grid``'s numbers."""
    return is_number(value) and any(is_number(g) and float(g) == float(value) for g in grid)


def method_problem(row: dict, methods: dict) -> str | None:
    """What makes ``row``'s method and swept value impossible for a run whose identity records ``methods`` (label ->
    an object with ``param`` and ``grid``, either optional), or None: the label is one of the run's, ``param`` is
    that method's swept parameter, and the swept value (``setting[param]``) lies in its grid. For a row that passed
    its row model (``method`` a string, ``param`` a string or null, ``setting`` an object).
    """
    entry = methods.get(row["method"])
    if not isinstance(entry, dict):
        return f"field method: {show(row['method'])} is not a method of the run (config.json)"
    param, grid = entry.get("param"), entry.get("grid")
    if isinstance(param, str) and row.get("param") is not None and row["param"] != param:
        return f"field param: {show(row.get('param'))} is not the swept parameter of {row['method']} ({param})"
    if isinstance(grid, list) and row.get("param") is not None and isinstance(row.get("setting"), dict):
        value = row["setting"].get(row["param"])
        if not in_grid(value, grid):
            return f"field setting.{row['param']}: {show(value)} is not in the grid of {row['method']} (config.json)"
    return None


def identity_of(config) -> dict | None:
    """The ``identity`` object of a run's config.json (a dict), or None when there is none to check rows against."""
    identity = config.get("identity") if isinstance(config, dict) else None
    return identity if isinstance(identity, dict) else None


#: a row problem: callable(row) -> the problem in words, or None for a row that stays
RowProblem = Callable[[dict], "str | None"]


@dataclass(frozen=True)
class RowSchema:
    """A protocol's result rows as the run layer sees them, declared by the protocol (its ``config.py``) and carried
    by :class:`dukb.neural.protocols.ProtocolInfo`.

    Attributes:
        key: ``key(row) -> tuple``: one row per key in a journal (raises KeyError, TypeError, ... for a row it cannot
            key).
        model: the row model, ``model(row) -> None``, raising :class:`RowFault` for a row its report cannot render
            (a field missing or of another type, a number not finite or out of its range).
        plan: ``plan(config) -> RowProblem | None``: the check of a row against its run's config.json (target,
            method, setting in the run's plan), None when the config has nothing to check against; None: no plan
            check.
    """

    key: Callable[[dict], tuple]
    model: Callable[[dict], None]
    plan: Callable[[dict], RowProblem | None] | None = None

    def check(self, config: dict | None = None) -> RowProblem:
        """The check of one row: its model's problem (:func:`row_check`), else, given the run's ``config``, its
        plan's problem (which may rely on what the model checked).

        Args:
            config: the run's config.json (a dict), or None to check the rows alone.

        Returns:
            callable(row) -> the problem in words or None.
        """
        check = row_check(self.model)
        plan = self.plan(config) if config is not None and self.plan is not None else None
        if plan is None:
            return check
        return lambda row: check(row) or plan(row)


def row_check(model: Callable[[dict], None]) -> RowProblem:
    """A row model as a row check: callable(row) -> None for a row its report can render, else the problem in words
    (``field recall: expected a number, got NaN``, ``field target: missing``).

    Args:
        model: ``model(row) -> None``, raising :class:`RowFault`.
    """

    def check(row: dict) -> str | None:
        try:
            model(row)
        except RowFault as e:
            return str(e)
        return None

    check.__name__ = f"{getattr(model, '__name__', 'row')}_check"
    return check


__all__ = [
    "KINDS",
    "ROW_ID_LIMIT",
    "RowFault",
    "RowProblem",
    "RowSchema",
    "dict_of",
    "expect",
    "finite",
    "identity_of",
    "in_grid",
    "is_number",
    "may",
    "method_problem",
    "need",
    "row_check",
    "share",
    "show",
    "swept",
]
