"""The protocol skeleton: one base class whose stages every protocol fills (plan → model → work units → score →
report), and the work loop they share.

A protocol subclass implements

- :meth:`Protocol.plan`: the symbolic part (KB, closure, targets, methods and grids, the run identity), ending with
  :meth:`Protocol.claim`, which locks RUN_DIR, refuses a run with other settings and opens results.jsonl;
- :meth:`Protocol.model`: finetune (cached under its identity) or load the model, and anything measured on it
  before unlearning;
- :meth:`Protocol.units` and :meth:`Protocol.pending`: the work units (tuples of ints and strings, e.g.
  ``(target, method)``) and what of a unit is still to compute;
- :meth:`Protocol.run_unit`: compute what is left of one unit, yielding its result rows;
- :meth:`Protocol.score`: fields a row derives from its own fields (Success-DU from the forgotten facts), the same
  whichever process computed it;
- :meth:`Protocol.report`: render summary.csv, report.md and figures from the run directory's files alone.

:meth:`Protocol.execute` runs the stages; :meth:`Protocol.work` runs the units. Units are claimed atomically in
RUN_DIR/.dukb/units (:class:`dukb.neural.run.units.UnitClaims`), so a second invocation of the same command with
``--resume`` on a live run joins it as another worker, under any launcher (several shells, a SLURM array, torchrun
without a process group); a killed worker's units are taken over once its claims go stale. A unit's rows depend on
the unit and the seed only, never on which process computed them or in what order.

Source: dukb (the protocol skeleton of the one-skeleton issue); each protocol names its paper.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

from rich.progress import Progress

from dukb import InputError
from dukb.neural import tracking
from dukb.neural.protocols import PROTOCOLS
from dukb.neural.run.files import RunDir
from dukb.neural.run.journal import ResultsFile, read_results
from dukb.neural.run.lock import claim_run, confirm_run, open_to_workers, render_lock, run_role
from dukb.neural.run.provenance import worker_id
from dukb.neural.run.rows import RowSchema
from dukb.neural.run.units import UnitClaims, claimed_units, record_units
from dukb.neural.runconfig import RunConfig
from dukb.neural.savedmodels import ModelSaver
from dukb.neural.vllm_backend import probe_backend


class RowMissing(Exception):
    """A dry replay of a unit's decisions (control's calibrated grids, muse's C6 sequence) met a row that is not in
    results.jsonl yet: the unit is still to compute."""


class Protocol(abc.ABC):
    """One run of a protocol into a run directory, in stages (see the module docstring).

    Class attributes:
        name: the protocol's registry name and the ``protocol`` of its config.json ("evaluate", "rwku", ...).
        config_class: its config dataclass (a :class:`dukb.neural.runconfig.RunConfig`).
        units_name: what a unit is, for the log line of a joining worker (e.g. "(target, method)").
        bar_label: the progress bar's label (default: the name).

    Attributes (set by the stages):
        run: the run directory (Path); cfg: the checked config; resume, progress, log: as given.
        worker: this process's id (:func:`dukb.neural.run.provenance.worker_id`), recorded in every row it writes.
        identity: the run identity after :meth:`claim` (dict); added: what this invocation adds to it;
        old_record: the config.json found in RUN_DIR ({} for a new run).
        joined: this invocation joined a live run as another worker (it writes no config.json or caches).
        results: the run's :class:`dukb.neural.run.journal.ResultsFile`.
        row_schema: the protocol's :class:`dukb.neural.run.rows.RowSchema` after :meth:`claim` (None for a
            protocol that is not registered).
        claims: this worker's :class:`dukb.neural.run.units.UnitClaims` (None: the units are this process's alone).
    """

    name: ClassVar[str] = ""
    config_class: ClassVar[type] = RunConfig
    units_name: ClassVar[str] = "(target, method)"
    bar_label: ClassVar[str] = ""

    def __init__(self, run_dir, config=None, *, resume: bool = True, progress: bool = False, log=print):
        """Args:
            run_dir: the run directory (created by :meth:`claim`).
            config: a :attr:`config_class` instance (default: the built-in default run); checked here: the stages
                read what its ``check()`` returns (:meth:`dukb.neural.runconfig.RunConfig.check`).
            resume: continue a run in ``run_dir`` (refused when a row-changing setting differs); with False an
                existing results.jsonl is an error.
            progress: show a rich progress bar over the rows.
            log: callable(str) for one-line progress reports.

        Raises:
            InputError: the config's check fails.
            TypeError: its ``check()`` returns something else than the checked config (a check in place).
        """
        cfg = config if config is not None else self.config_class()
        self.cfg = cfg.check()  # the resolved plan every stage reads (RunConfig.check: checked once, frozen)
        if not isinstance(self.cfg, type(cfg)):
            raise TypeError(f"{type(cfg).__name__}.check() must return the checked config, got {self.cfg!r}")
        self.run = Path(run_dir)
        self.resume = resume
        self.progress = progress
        self.log = log
        self.t_start = time.perf_counter()
        self.worker = worker_id()
        self.identity: dict = {}
        self.added: dict = {}
        self.old_record: dict = {}
        self.joined = False
        self.results: ResultsFile | None = None
        self.row_schema: RowSchema | None = None
        self.claims: UnitClaims | None = None
        self.saver = None  # the run's ModelSaver (--save-models), made by claim()

    # ---- the stages ------------------------------------------------------------------------------------------------
    @abc.abstractmethod
    def plan(self) -> None:
        """The symbolic stage: KB, closure, targets, methods and grids, the run identity; ends with :meth:`claim`.

        Raises:
            InputError: bad settings, or a run directory holding another run.
        """

    @abc.abstractmethod
    def model(self) -> None:
        """The model stage: finetune (cached under its identity) or load, and measure the model before unlearning."""

    @abc.abstractmethod
    def units(self) -> list[tuple]:
        """The work units of this invocation, in the order to run them (tuples of ints and strings)."""

    @abc.abstractmethod
    def pending(self, unit: tuple) -> list:
        """What of ``unit`` is still to compute (e.g. its grid values without a row); empty: the unit is done."""

    @abc.abstractmethod
    def run_unit(self, unit: tuple, todo: list) -> Iterator[dict]:
        """Compute ``todo`` of ``unit``, yielding one result row per computed value (each from the unit and the seed
        alone)."""

    def score(self, unit: tuple, row: dict) -> dict:
        """Fields ``row`` derives from its own fields, added before it is written (default: none)."""
        return row

    def unit_done(self, unit: tuple) -> None:  # noqa: B027  (an optional hook)
        """Called after this worker finished ``unit`` (default: nothing; e.g. a log line)."""

    def save_layout(self):
        """How ``--save-models`` names, records and selects this protocol's unlearned models
        (:class:`dukb.neural.savedmodels.SaveLayout`); None (the default): the protocol keeps no model, and a
        ``--save-models`` other than none is refused at :meth:`claim`."""
        return None

    def keep_model(self, row: dict, pred, lm=None, merge: bool = False) -> None:
        """Save the model of a row just written (``--save-models``; nothing under none): call it after the row is
        yielded, while ``pred`` (its :class:`dukb.neural.probe.Predictor`) still holds the row's weights. ``lm``:
        the model unlearning started from (default ``self.lm``); ``merge``: save a peft model merged (its base is
        on no disk)."""
        if self.saver is not None:
            self.saver.keep(row, pred, lm if lm is not None else self.lm, merge=merge)

    def total_rows(self) -> int:
        """Rows of this invocation's units when complete, for the progress bar."""
        return 0

    def counts(self, row: dict) -> bool:
        """Whether ``row`` advances the progress bar (default: every row; :meth:`total_rows` counts the same)."""
        return True

    def rows_done(self) -> int:
        """Rows already on disk of this invocation's units, for the progress bar."""
        return len(self.results.done) if self.results is not None else 0

    @abc.abstractmethod
    def report(self) -> dict:
        """Render the run's report from its files (under :meth:`render`); returns the paths (dict; "report")."""

    def output(self):
        """The run's rows as a pandas DataFrame (results.jsonl; empty when absent)."""
        import pandas as pd

        path = RunDir(self.run).results
        return pd.DataFrame(read_results(path) if path.exists() else [])

    # ---- the machinery they share ---------------------------------------------------------------------------------
    def execute(self):
        """Run every stage: plan, model, the work units (:meth:`work`), report; the probes of the model and work
        stages through the run's ``--probe-backend`` (:func:`dukb.neural.vllm_backend.probe_backend`). Returns
        :meth:`output`.

        Raises:
            InputError: from any stage (bad settings, another run in RUN_DIR, unreadable inputs).
        """

        with tracking.tracking(self.run, getattr(self.cfg, "log_with", None), self.name):
            self.plan()
            confirm_run(self.run)  # the run is accepted: the command line writes RUN_DIR/config.yaml
            # --probe-backend: the probes of the model stage (before unlearning) and of the rows
            with probe_backend(getattr(self.cfg, "probe_backend", "hf"), self.run, getattr(self.cfg, "lora_r", 0)):
                with tracking.scope("finetune"):
                    self.model()
                self.work()
        self.report()
        return self.output()

    def claim(
        self, identity: dict, *, extendable=(), results_path: Path | None = None, row_key=None, other_results=()
    ) -> None:
        """Lock RUN_DIR for this run (:func:`dukb.neural.run.lock.claim_run`: a run with other settings is refused
        before anything in it is touched; the invocation is logged in RUN_DIR/commands.log; once :meth:`plan`
        returns, :meth:`execute` confirms the claim and the command line writes RUN_DIR/config.yaml,
        :func:`dukb.neural.run.lock.confirm_run`), note whether this invocation joins a live run as a
        worker, and open results.jsonl (a torn last line is repaired by the run's owner, never by a worker).

        Args:
            identity: the run identity (row-changing settings).
            extendable: identity keys a resume may add entries to.
            results_path: this process's results file (default RUN_DIR/results.jsonl).
            row_key: the :class:`ResultsFile` key of a row, for a protocol that is not registered (its rows are then
                not checked); default: the registered protocol's rows (:attr:`ProtocolInfo.rows
                <dukb.neural.protocols.ProtocolInfo>`: its row key, and its row model and plan check, against
                which a resume checks every row already in results.jsonl).
            other_results: further files whose presence means the run holds results (e.g. per-rank shards).

        Raises:
            InputError: another run in RUN_DIR, or results present without ``resume``.
            ValueError: no ``row_key`` for a protocol that is not registered with its rows.
        """
        info = PROTOCOLS.get(self.name)
        self.identity, self.added, self.old_record = claim_run(
            self.run,
            self.name,
            identity,
            extendable=extendable,
            resume=self.resume,
            log=self.log,
            joinable=info is None or info.joinable,
        )
        self.run.mkdir(parents=True, exist_ok=True)
        path = results_path or RunDir(self.run).results
        held = [path, RunDir(self.run).results, *other_results]
        if not self.resume and any(p.exists() for p in held):
            raise InputError(f"{self.run} already holds results; pass --resume to continue it or choose another -o")
        # a second invocation with the same settings joins a live run as another worker (runs.open_to_workers): it
        # neither repairs results.jsonl nor rewrites config.json and the caches, which the run's owner did
        self.joined = run_role(self.run) == "worker"
        if self.joined:
            self.log(f"joined the run as another worker: units {self.units_name} are claimed in RUN_DIR/.dukb/units")
        if row_key is None:  # a row the run's plan cannot hold is a damaged line (moved aside by the owner)
            if info is None or not info.rows:
                raise ValueError(f"protocol {self.name!r} declares no rows (ProtocolInfo.rows): pass row_key")
            self.row_schema = info.load("rows")
            key, check = self.row_schema.key, self.row_schema.check({"identity": self.identity})
        else:
            key, check = row_key, None
        self.results = ResultsFile(path, key, repair=not self.joined, check=check)
        self.make_saver(key)

    def make_saver(self, key) -> None:
        """The run's :class:`dukb.neural.savedmodels.ModelSaver` (``--save-models``) from :meth:`save_layout`, over
        the results file's row key ``key``; None under none.

        Raises:
            InputError: ``--save-models`` other than none for a protocol without unlearned models to keep."""

        mode = getattr(self.cfg, "save_models", "none")
        layout = self.save_layout() if mode != "none" else None
        if mode != "none" and layout is None:
            raise InputError(f"--save-models {mode}: dukb {self.name} keeps no unlearned model; use none")
        self.saver = ModelSaver(self.run, mode, self.kb, key, layout, log=self.log) if layout is not None else None

    def make_claims(self) -> UnitClaims | None:
        """This worker's unit claims (override: None where the units are sharded otherwise)."""
        return UnitClaims(self.run, self.worker)

    def show_bar(self) -> bool:
        """Whether this process draws the progress bar (override: e.g. the main process only)."""
        return self.progress

    def work(self) -> None:
        """Run this worker's units: each unit no other live worker holds is claimed, computed by :meth:`run_unit`,
        scored by :meth:`score` and appended row by row to results.jsonl (flushed; a heartbeat keeps the claim
        fresh), then marked done; a second pass takes over the units of workers that ended meanwhile. Trainings
        inside a unit log to the run's trackers under the unit's name, and so does each row
        (:mod:`dukb.neural.tracking`)."""

        self.claims = self.make_claims()
        units = self._units = self.units()
        if self.claims is not None:
            record_units(self.run, units)  # what `dukb report` checks the claims against
            open_to_workers(self.run)  # config.json, the caches and the model are on disk: others may join
        bar = task = None
        if self.show_bar():
            bar = Progress()
            bar.start()
            task = bar.add_task(self.bar_label or self.name, total=self.total_rows(), completed=self.rows_done())
        try:
            for unit, todo in claimed_units(self.claims, self.results, units, self.pending):
                rows = self.run_unit(unit, todo)
                try:
                    while True:
                        with tracking.scope("/".join(str(x) for x in unit if x != "") or self.name):
                            row = next(rows, None)  # the unit's trainings run inside next(): their losses go here
                        if row is None:
                            break
                        row = self.score(unit, row)
                        row.setdefault("worker", self.worker)
                        self.results.append(row)
                        tracking.log_row(row, self.results.key(row))  # and to the run's trackers (--log-with)
                        if self.claims is not None:
                            self.claims.heartbeat(unit)
                        if bar is not None and self.counts(row):
                            bar.advance(task)
                finally:
                    rows.close()  # a method restores θ₀ when its sweep is closed, also after an error
                self.unit_done(unit)
                if self.saver is not None:  # --save-models best: keep each of the unit's selected settings
                    self.saver.finish(self.results.rows)
        finally:
            if bar is not None:
                bar.stop()
            if self.claims is not None:
                self.claims.close()

    def units_left(self) -> list[tuple]:
        """This invocation's units that still lack rows once :meth:`work` ended (other workers' rows read first):
        units another live worker is still on, or that no worker could take. Empty before :meth:`work`."""
        if self.results is not None:
            self.results.refresh()
        return [u for u in getattr(self, "_units", []) if self.pending(u)]

    def done_line(self, extra: str = "") -> str:
        """The run's last line: ``done in S s`` only when every unit of this invocation has its rows
        (:meth:`units_left`); otherwise ``not done after S s: N of M work units ... have no rows yet (...)``, naming
        them, so a run never says done with units missing.

        Args:
            extra: appended to the line (e.g. ``": report RUN/report.md"``).
        """
        seconds = time.perf_counter() - self.t_start
        left = self.units_left()
        if not left:
            return f"done in {seconds:.1f} s{extra}"
        shown = ", ".join("(" + ", ".join(str(x) for x in u) + ")" for u in left[:5]) + (
            ", ..." if len(left) > 5 else ""
        )
        return (
            f"not done after {seconds:.1f} s: {len(left)} of {len(self._units)} work units {self.units_name} "
            f"have no rows yet ({shown}); another worker holds them, or resume the run to compute them{extra}"
        )

    def render(self, fn) -> dict:
        """``fn(run_dir)`` under RUN_DIR/.dukb/render.lock: workers sharing the run render one after the other, so the
        last to finish leaves the complete report. A worker that ends before any row of the run is written (its
        units all held by live workers) renders nothing and returns ``{}``: the worker that writes the rows renders
        the report."""
        journal = RunDir(self.run).results  # every process's rows end up here (shards merged before a render)
        if not journal.exists() or journal.stat().st_size == 0:
            return {}
        with render_lock(self.run):
            return fn(self.run)


__all__ = ["Protocol", "RowMissing"]
