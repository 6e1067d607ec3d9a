"""Training losses to an experiment tracker through accelerate's trackers (``--log-with tensorboard``).

A protocol run with ``log_with`` set opens one tracker for the run (:func:`tracking`, logging to
RUN_DIR/tensorboard/<protocol>) and names what is being trained with :func:`scope` ("finetune", or the work unit,
e.g. "267/ga"); :func:`dukb.neural.train.train_loop`, the one loop every training runs, logs each epoch's mean loss
and its logged parts (loss_forget, unlearning_risk, loss_retain, ...) under ``<scope>/<name>``, the step counting the
epochs trained in that scope (the runs of a unit's grid follow one another). Nothing is logged without a tracker,
and tracking changes no result (it is not part of a run's identity).

The tracker is accelerate's :class:`accelerate.tracking.TensorBoardTracker`; it needs the ``tensorboard`` package
(``pip install "dukb[tensorboard]"``).

Source: dukb; accelerate's experiment trackers (huggingface/accelerate ``tracking.py``).
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib.util
import math
from pathlib import Path

from dukb import InputError

#: the trackers ``--log-with`` accepts
TRACKERS = ("tensorboard",)

_SCOPE: contextvars.ContextVar[str] = contextvars.ContextVar("dukb_tracking_scope", default="train")
_ACTIVE: dict = {}  # "tracker": the open tracker, "steps": scope -> epochs logged


def check_log_with(name: str | None) -> None:
    """Refuse an unknown tracker, or one whose package is missing.

    Raises:
        InputError: ``name`` is not in :data:`TRACKERS`, or TensorBoard is not installed.
    """
    if name is None:
        return
    if name not in TRACKERS:
        raise InputError(f"unknown --log-with {name!r} (choose from {', '.join(TRACKERS)})")
    if importlib.util.find_spec("tensorboard") is None and importlib.util.find_spec("tensorboardX") is None:
        raise InputError("--log-with tensorboard needs the tensorboard package: pip install \"dukb[tensorboard]\"")


@contextlib.contextmanager
def tracking(run_dir: str | Path, log_with: str | None, run_name: str):
    """Open the run's tracker for the ``with`` block (nothing when ``log_with`` is None).

    Args:
        run_dir: the run directory; TensorBoard logs go to RUN_DIR/tensorboard/<run_name>.
        log_with: a name of :data:`TRACKERS` or None.
        run_name: the tracker's run name (the protocol's).

    Raises:
        InputError: see :func:`check_log_with`.
    """
    if log_with is None or _ACTIVE:  # none asked for, or an enclosing run already tracks
        yield
        return
    check_log_with(log_with)
    from accelerate.tracking import TensorBoardTracker

    tracker = TensorBoardTracker(run_name, Path(run_dir) / "tensorboard")
    tracker.start()
    _ACTIVE.update(tracker=tracker, steps={})
    try:
        yield
    finally:
        _ACTIVE.clear()
        tracker.finish()


@contextlib.contextmanager
def scope(name: str):
    """Name what the ``with`` block trains (tags are ``<name>/<loss>``)."""
    token = _SCOPE.set(str(name))
    try:
        yield
    finally:
        _SCOPE.reset(token)


def log_epoch(logs: dict) -> None:
    """Log one epoch's finite numeric values under the current scope (no-op without an open tracker)."""
    tracker = _ACTIVE.get("tracker")
    if tracker is None:
        return
    tag = _SCOPE.get()
    step = _ACTIVE["steps"].get(tag, 0) + 1
    _ACTIVE["steps"][tag] = step
    values = {f"{tag}/{k}": float(v) for k, v in logs.items()
              if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}
    if values:
        tracker.log(values, step=step)


__all__ = ["TRACKERS", "check_log_with", "log_epoch", "scope", "tracking"]
