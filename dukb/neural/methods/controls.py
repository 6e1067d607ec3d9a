"""The control strategies of excessive unlearning (Wang et al. 2024, "Unlearning with Control", Sec. 5): how a
gradient sweep (:func:`dukb.neural.methods.base.gradient_sweep`) reads its grid under each
:class:`dukb.neural.methods.base.Control`.

One :class:`ControlStrategy` subclass per kind, registered by ``module:Class`` in
:data:`dukb.neural.catalog.CONTROL_STRATEGIES`: none (the grid is the number of steps T), objective capping (tau),
early stopping (T, one run) and model mixing (alpha).
"""

from __future__ import annotations

import abc
from collections.abc import Iterator
from dataclasses import replace

from dukb import InputError
from dukb.neural.methods.base import (
    Control,
    SweepRun,
    SweepSchedule,
    hf_decay_names,
    mix_weights,
    reference_train_config,
    select_layers,
)
from dukb.neural.probe import Predictor


class ControlStrategy(abc.ABC):
    """How a gradient sweep reads its grid under one control of excessive unlearning (Wang et al. 2024, Sec. 5):
    one strategy object per :data:`dukb.neural.methods.base.CONTROLS` kind, in
    :data:`dukb.neural.catalog.CONTROL_STRATEGIES`.

    Attributes:
        kind: the control's name; param: what the grid sweeps (steps, tau, alpha).
    """

    kind: str = ""
    param: str = "steps"

    @abc.abstractmethod
    def sweep(self, r: SweepRun, control: Control, sched: SweepSchedule) -> Iterator[tuple[dict, Predictor]]:
        """Yield (setting, predictor) for each grid value of ``r``."""


class Uncontrolled(ControlStrategy):
    """The grid is T: each T its own run from θ₀ (``separate``), or one run of N steps read at each T under the
    reference schedule (Wu et al. 2025, App. H; wrh14/deep_unlearning forget.py)."""

    kind, param = "none", "steps"

    def sweep(self, r, control, sched):
        if sched.kind == "reference":  # one run of N steps, read at each T
            n = sched.steps or max((int(T) for T in r.grid), default=0)
            yield from r.read_at(
                n,
                "the reference schedule",
                {"schedule": "reference", "schedule_steps": n},
                tcfg=reference_train_config(r.cfg),
                decay=hf_decay_names(r.state.model),
            )
            return
        if sched.kind == "constant":  # MUSE's: one constant-rate run of N steps, read at each T
            n = sched.steps or max((int(T) for T in r.grid), default=0)
            yield from r.read_at(
                n,
                "the constant schedule",
                {"schedule": "constant", "schedule_steps": n},
                tcfg=replace(r.cfg, schedule="constant", max_grad_norm=1.0),
            )
            return
        for T in r.grid:
            curve, _ = r.run(int(T))
            yield r.out({"steps": int(T), "lr": r.lr}, curve)


class ObjectiveCapping(ControlStrategy):
    """OC: the grid is τ; each τ runs ``control.steps`` steps from θ₀, the forget term dropped once the batch's
    unlearning risk reaches τ (Wang et al. 2024, Sec. 5, Eq. 7)."""

    kind, param = "oc", "tau"

    def sweep(self, r, control, sched):
        for tau in r.grid:
            curve, _ = r.run(control.steps, tau=float(tau))
            yield r.out({"steps": control.steps, "lr": r.lr, "control": "oc", "tau": float(tau)}, curve)


class EarlyStopping(ControlStrategy):
    """ES: one run of ``control.steps`` steps read at each T of the grid (Wang et al. 2024, Sec. 5)."""

    kind, param = "es", "steps"

    def sweep(self, r, control, sched):
        yield from r.read_at(control.steps, "early stopping", {"control": "es", "es_steps": control.steps})


class ModelMixing(ControlStrategy):
    """MM: θ_α = (1−α)·θ₀ + α·θ_u with θ_u after ``control.steps`` steps; the grid is α ∈ [0, 1] (Wang et al.
    2024, Sec. 5)."""

    kind, param = "mm", "alpha"

    def sweep(self, r, control, sched):
        curve, snaps = r.run(control.steps, checkpoints={control.steps})
        end = snaps[control.steps]
        r.state.reset()
        named = select_layers(r.state.model, r.ctx.layers)
        start = {n: p.detach().to("cpu", copy=True) for n, p in named}
        for alpha in r.grid:
            a = float(alpha)
            if not 0.0 <= a <= 1.0:
                raise InputError(f"model mixing needs alpha in [0, 1], got {a}")
            mix_weights(named, start, end, a)
            yield r.out({"steps": control.steps, "lr": r.lr, "control": "mm", "alpha": a}, curve)
