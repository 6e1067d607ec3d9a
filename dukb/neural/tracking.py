"""Training losses and result rows to experiment trackers through accelerate's trackers (``--log-with NAME[,NAME]``).

A protocol run with ``log_with`` set opens the run's trackers (:func:`tracking`; every tracker of accelerate's
``LOGGER_TYPE_TO_CLASS``: aim, clearml, comet_ml, dvclive, mlflow, swanlab, tensorboard, trackio, wandb) and names
what is being trained with :func:`scope` ("finetune", or the work unit, e.g. "267/ga");
:func:`dukb.neural.train.train_loop`, the one loop every training runs, logs each epoch's mean loss and its logged
parts (loss_forget, unlearning_risk, loss_retain, ...) under ``<scope>/<name>`` (:func:`log_epoch`). Each result row
the run writes is logged too (:func:`log_row`): its numbers as scalars ``results/<row key>/<field>`` (the row key is
the protocol's, e.g. ``<target>/<method>/<setting>``), and, when the trackers close, the rows as the run's table
``results_table`` (a wandb.Table or a ClearML table through the tracker's ``log_table``; a Markdown table as TensorBoard
text; the scalars only elsewhere). Nothing is logged without a tracker, and tracking changes no result (it is not
part of a run's identity).

Steps: TensorBoard gets each scope's epoch as its step (and the row's number for the rows); every other tracker gets
one step counter for the whole run (wandb and others refuse a step that goes back), with the epoch logged beside the
losses as ``<scope>/epoch`` (``results/row`` beside the rows). Trackers that need a directory (tensorboard, aim)
write under RUN_DIR/<tracker>; the others follow their own configuration (``WANDB_MODE``, ``WANDB_DIR``,
``MLFLOW_TRACKING_URI``, ...). Only the main process of a multi-process launch logs.

Source: dukb; accelerate's experiment trackers (huggingface/accelerate ``tracking.py``, ``LOGGER_TYPE_TO_CLASS``).
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib.util
import math
from pathlib import Path

from dukb import InputError
from dukb.neural.distributed import is_main_process

#: tracker -> (the modules any of which makes it installed, what to install); a tracker accelerate knows that is
#: not listed here is taken as installed
PACKAGES: dict[str, tuple[tuple[str, ...], str]] = {
    "tensorboard": (("tensorboard", "tensorboardX"), 'pip install "dukb[tensorboard]"'),
    "wandb": (("wandb",), "pip install wandb"),
    "mlflow": (("mlflow",), "pip install mlflow"),
    "aim": (("aim",), 'pip install "aim<4"'),
    "comet_ml": (("comet_ml",), "pip install comet_ml"),
    "clearml": (("clearml",), "pip install clearml"),
    "dvclive": (("dvclive",), "pip install dvclive"),
    "swanlab": (("swanlab",), "pip install swanlab"),
    "trackio": (("trackio",), "pip install trackio"),
}
#: trackers that take a step per scope (one that goes back to 1 at each scope); the others get a run-wide counter
#: the name of the run's table of rows
TABLE = "results_table"
_OWN_STEPS = frozenset({"tensorboard"})
#: numeric row fields that name the row rather than measure it (not logged as scalars)
_NAMING = frozenset({"target", "ratio", "value", "seed", "worker"})

_SCOPE: contextvars.ContextVar[str] = contextvars.ContextVar("dukb_tracking_scope", default="train")
_ACTIVE: dict = {}  # "trackers", "steps": scope -> epochs logged, "step": run-wide counter, "rows": rows logged


def trackers() -> tuple[str, ...]:
    """The names ``--log-with`` accepts: accelerate's trackers (``accelerate.tracking.LOGGER_TYPE_TO_CLASS``),
    sorted."""
    from accelerate.tracking import LOGGER_TYPE_TO_CLASS

    return tuple(sorted(LOGGER_TYPE_TO_CLASS))


def check_log_with(value: str | None) -> list[str]:
    """The trackers of a ``--log-with`` value: comma-separated names, each known to accelerate and installed.

    Args:
        value: e.g. "wandb" or "wandb,tensorboard"; None: no tracker.

    Returns:
        list[str]: the names, in order, without repeats ([] for None).

    Raises:
        InputError: an empty name, a name not in :func:`trackers`, or a tracker whose package is not installed
            (the message names what to install, :data:`PACKAGES`).
    """
    if value is None:
        return []
    names = [n.strip() for n in str(value).split(",")]
    known = trackers()
    for name in names:
        if name not in known:
            raise InputError(f"unknown --log-with {name!r} (choose from {', '.join(known)}; several: NAME,NAME)")
        modules, install = PACKAGES.get(name, ((), ""))
        if modules and all(importlib.util.find_spec(m) is None for m in modules):
            raise InputError(f"--log-with {name} needs the {modules[0]} package: {install}")
    return list(dict.fromkeys(names))


def _open(name: str, run_dir: Path, run_name: str):
    """accelerate's tracker ``name``, started (a directory under ``run_dir`` for those that need one)."""
    from accelerate.tracking import LOGGER_TYPE_TO_CLASS

    cls = LOGGER_TYPE_TO_CLASS[name]
    tracker = cls(run_name, run_dir / name) if cls.requires_logging_directory else cls(run_name)
    tracker.start()
    return tracker


@contextlib.contextmanager
def tracking(run_dir: str | Path, log_with: str | None, run_name: str):
    """Open the run's trackers for the ``with`` block (nothing when ``log_with`` is None, when an enclosing run
    already tracks, or on a process other than the main one); on leaving, log the rows' table and close them.

    Args:
        run_dir: the run directory; TensorBoard logs go to RUN_DIR/tensorboard/<run_name>, aim's to RUN_DIR/aim.
        log_with: ``NAME[,NAME]`` (:func:`check_log_with`) or None.
        run_name: the trackers' run (or project) name: the protocol's.

    Raises:
        InputError: see :func:`check_log_with`.
    """

    names = check_log_with(log_with)
    if not names or _ACTIVE or not is_main_process():
        yield
        return
    opened = []
    try:
        for name in names:
            opened.append(_open(name, Path(run_dir), run_name))
        _ACTIVE.update(trackers=opened, steps={}, step=0, rows=[])
        yield
        _log_table(opened, _ACTIVE["rows"])
    finally:
        _ACTIVE.clear()
        for tracker in opened:
            tracker.finish()


@contextlib.contextmanager
def scope(name: str):
    """Name what the ``with`` block trains (tags are ``<name>/<loss>``)."""
    token = _SCOPE.set(str(name))
    try:
        yield
    finally:
        _SCOPE.reset(token)


def _numbers(values: dict, prefix: str) -> dict[str, float]:
    """The finite numbers (a bool as 0 or 1) of ``values``, keyed ``<prefix>/<name>``."""
    out = {}
    for k, v in values.items():
        if isinstance(v, (int, float)) and math.isfinite(v):
            out[f"{prefix}/{k}"] = float(v)
    return out


def _emit(values: dict, own_step: int, counter: str) -> None:
    """Log ``values`` to every open tracker: at ``own_step`` where it takes per-scope steps, else at the run-wide
    step with ``own_step`` beside them as ``counter``."""
    if not values:
        return
    _ACTIVE["step"] += 1
    for tracker in _ACTIVE["trackers"]:
        if tracker.name in _OWN_STEPS:
            tracker.log(values, step=own_step)
        else:
            tracker.log({**values, counter: own_step}, step=_ACTIVE["step"])


def log_epoch(logs: dict) -> None:
    """Log one epoch's finite numeric values under the current scope (no-op without an open tracker)."""
    if not _ACTIVE:
        return
    tag = _SCOPE.get()
    step = _ACTIVE["steps"].get(tag, 0) + 1
    _ACTIVE["steps"][tag] = step
    _emit(_numbers({k: v for k, v in logs.items() if not isinstance(v, bool)}, tag), step, f"{tag}/epoch")


def _part(x) -> str:
    """One part of a row key as a tag: a float without a trailing .0, a JSON setting without braces and quotes."""
    if isinstance(x, float):
        return f"{x:g}"
    return "".join(c for c in str(x) if c not in '{}" ').replace("/", "_")


def log_row(row: dict, key: tuple = ()) -> None:
    """Log one result row (no-op without an open tracker): its finite numbers (bools as 0/1; not the fields that
    name it: target, ratio, value, seed) as ``results/<key parts>/<field>``, and keep it for the run's table.

    Args:
        row: the row as written to results.jsonl.
        key: the protocol's row key (e.g. (target, method, swept value)); its non-empty parts make the tag.
    """
    if not _ACTIVE:
        return
    tag = "/".join(["results", *(_part(x) for x in key if x not in ("", None))])
    _ACTIVE["rows"].append(row)
    _emit(_numbers({k: v for k, v in row.items() if k not in _NAMING}, tag), len(_ACTIVE["rows"]), "results/row")


def table(rows: list[dict]) -> tuple[list[str], list[list]]:
    """The rows as a table: their scalar fields and, flattened as ``name.key``, their objects' scalar fields (lists
    and deeper values are left out); a column whose values mix types holds their text.

    Returns:
        (columns, data): column names in first-seen order, and one list per row (None where a row lacks a field).
    """
    flat = []
    for row in rows:
        out = {}
        for k, v in row.items():
            if isinstance(v, dict):
                out.update({f"{k}.{k2}": v2 for k2, v2 in v.items() if isinstance(v2, (str, int, float, bool))})
            elif v is None or isinstance(v, (str, int, float, bool)):
                out[k] = v
        flat.append(out)
    columns = list(dict.fromkeys(k for r in flat for k in r))
    data = [[r.get(c) for c in columns] for r in flat]
    for j in range(len(columns)):
        kinds = {
            bool if isinstance(r[j], bool) else float if isinstance(r[j], (int, float)) else str
            for r in data
            if r[j] is not None
        }
        if len(kinds) > 1:
            for r in data:
                r[j] = None if r[j] is None else str(r[j])
    return columns, data


def _markdown(columns: list[str], data: list[list]) -> str:
    """A Markdown table (TensorBoard renders its text as Markdown)."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join("" if v is None else str(v).replace("|", "\\|") for v in r) + " |" for r in data]
    return "\n".join(lines)


def _log_table(opened: list, rows: list[dict]) -> None:
    """Log the rows as the run's table :data:`TABLE` to each tracker that takes one."""
    if not rows:
        return
    columns, data = table(rows)
    for tracker in opened:
        if hasattr(tracker, "log_table"):
            tracker.log_table(TABLE, columns=columns, data=data)
        elif tracker.name == "tensorboard":
            tracker.log({TABLE: _markdown(columns, data)}, step=len(rows))


__all__ = ["PACKAGES", "TABLE", "check_log_with", "log_epoch", "log_row", "scope", "table", "tracking", "trackers"]
