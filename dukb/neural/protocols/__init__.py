"""The registry of protocols: one folder per protocol (``config.py``, ``run.py``, ``report.py``), each named here by
import paths so that the catalog (`dukb methods`, `dukb report`, help texts) needs no torch.

Every protocol implements :class:`dukb.neural.protocols.base.Protocol`'s stages (plan → model → work units → score →
report). Its units are claimed in RUN_DIR/.dukb/units, so several invocations of the same command with
``--resume`` share one run under any launcher (``joinable``). RESTOR's folder is ``dukb/neural/restor/``, which
predates this package.

Adding a protocol: a folder ``dukb/neural/protocols/<name>/`` with ``config.py`` (a
:class:`dukb.neural.runconfig.RunConfig` subclass with ``check()``, and its rows, a
:class:`dukb.neural.run.rows.RowSchema`), ``run.py`` (a :class:`Protocol` subclass and its entry function, decorated
with :func:`dukb.neural.run.lock.holds_run_lock`) and ``report.py`` (its renderer), then one :func:`register` call
below.

Source: dukb (the protocol skeleton); each entry names its paper.
"""

from __future__ import annotations

from dataclasses import dataclass

from dukb.neural.registry import Registry, import_target
from dukb.neural.tables import Table


@dataclass(frozen=True)
class ProtocolInfo:
    """One registered protocol: what the catalog shows and where its parts live (``module:attribute`` strings,
    imported on use).

    Attributes:
        name: registry name, the ``protocol`` of its config.json and its command (``dukb <name>``).
        summary: one line for tables.
        source: the paper (and section) it follows.
        config: its config class.
        run: its public entry point (``run(run_dir, config, *, resume, progress, log)`` -> DataFrame or dict), in
            its ``run.py`` (``dukb.neural.protocols.rwku.run:run_rwku``, ...), which the commands call.
        render: its report renderer (``render(run_dir)`` -> dict of paths with "report"), from files alone.
        protocol: its :class:`Protocol` subclass ("" when not yet on the skeleton).
        joinable: a second invocation with ``--resume`` joins a live run as another worker (work units).
        rows: its rows as the run layer sees them, a :class:`dukb.neural.run.rows.RowSchema` (row key, row model,
            plan check) declared at the end of its ``config.py``; the run layer gets them only from here.
    """

    name: str
    summary: str
    source: str
    config: str
    run: str
    render: str
    protocol: str = ""
    joinable: bool = False
    rows: str = ""

    @property
    def skeleton(self) -> bool:
        """Whether the protocol runs on the :class:`Protocol` stages."""
        return bool(self.protocol)

    def load(self, part: str):
        """Import one part ("config", "run", "render", "protocol" or "rows") and return it.

        Raises:
            ValueError: an unknown part, or "protocol" of a protocol not on the skeleton.
        """
        if part not in ("config", "run", "render", "protocol", "rows"):
            raise ValueError(f"unknown part {part!r} of protocol {self.name}")
        target = getattr(self, part)
        if not target:
            raise ValueError(f"protocol {self.name} has no {part}")
        return import_target(target)


#: name -> :class:`ProtocolInfo`, in the order `dukb methods` lists them (a :class:`dukb.neural.registry.Registry`
#: whose entries are their own objects: each part is imported by :meth:`ProtocolInfo.load`).
PROTOCOLS: Registry = Registry("protocol")


def register(info: ProtocolInfo) -> ProtocolInfo:
    """Add a protocol to :data:`PROTOCOLS`.

    Raises:
        ValueError: the name is taken.
    """
    return PROTOCOLS.add(info)


def get_protocol(name: str) -> ProtocolInfo:
    """The registered protocol ``name``.

    Raises:
        KeyError: an unknown name (the message lists the registered ones).
    """
    if name not in PROTOCOLS:
        raise KeyError(f"unknown protocol {name!r} (registered: {', '.join(PROTOCOLS)})")
    return PROTOCOLS[name]


_P = "dukb.neural.protocols"
register(ProtocolInfo(
    "evaluate", "deep unlearning: recall, accuracy, Success-DU over minimal deep unlearning sets, trade-off curves",
    "Wu et al. 2025 (Eval-DU), Sec. 4, Eq. 1-2", f"{_P}.evaluate.config:EvaluateConfig", f"{_P}.evaluate.run:evaluate",
    f"{_P}.evaluate.report:render", f"{_P}.evaluate.run:EvaluateProtocol", joinable=True,
    rows=f"{_P}.evaluate.config:EVALUATE_ROWS"))
register(ProtocolInfo(
    "rwku", "FB/QA/AA probes, neighbours, MIA, batch targets; unlearning from a description corpus",
    "Jin et al. 2024 (RWKU), Sec. 3-4", f"{_P}.rwku.config:RwkuConfig", f"{_P}.rwku.run:run_rwku",
    f"{_P}.rwku.report:render_rwku", f"{_P}.rwku.run:RwkuProtocol", joinable=True,
    rows=f"{_P}.rwku.config:RWKU_ROWS"))
register(ProtocolInfo(
    "muse", "VerbMem, KnowMem, PrivLeak against a retrained model; scalability, sustainability",
    "Shi et al. 2024b (MUSE), Sec. 2-4", f"{_P}.muse.config:MuseConfig", f"{_P}.muse.run:run_muse",
    f"{_P}.muse.report:render_muse", f"{_P}.muse.run:MuseProtocol", joinable=True,
    rows=f"{_P}.muse.config:MUSE_ROWS"))
register(ProtocolInfo(
    "control", "PS-exact/PS-perturb with OC/ES/MM controls, unlearning risk, calibrated stopping",
    "Wang et al. 2024 (Unlearning with Control), Sec. 4-5", f"{_P}.control.config:ControlConfig",
    f"{_P}.control.run:run_control", f"{_P}.control.report:render_control", f"{_P}.control.run:ControlProtocol",
    joinable=True, rows=f"{_P}.control.config:CONTROL_ROWS"))
register(ProtocolInfo(
    "restor", "fact states after corruption and unlearning (clean, corrupted, unlearned)",
    "Rezaei et al. (RESTOR), Sec. 3-4", "dukb.neural.restor.config:RestorConfig",
    "dukb.neural.restor.pipeline:run_restor", "dukb.neural.restor.report:render",
    "dukb.neural.restor.pipeline:RestorProtocol", joinable=True, rows="dukb.neural.restor.config:RESTOR_ROWS"))


def protocols_table() -> Table:
    """The protocols' reference table: command, what it measures, source, its :class:`Protocol` class (the stages),
    whether several workers can share a run (`dukb methods`, the docs' reference/protocols page)."""
    return Table("Protocols", ("protocol", "measures", "source", "stages (Protocol class)", "several workers per run"),
                 tuple((f"dukb {p.name}", p.summary, p.source,
                        f"`{p.protocol.replace(':', '.')}`" if p.skeleton else "not yet on the skeleton",
                        "yes" if p.joinable else "no") for p in PROTOCOLS.values()))


__all__ = ["PROTOCOLS", "ProtocolInfo", "get_protocol", "protocols_table", "register"]
