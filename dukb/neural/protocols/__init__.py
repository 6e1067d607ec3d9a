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
        help: the long help of its command (``dukb <name> --help``): a protocol without a command module of its
            own gets a command generated from its config's declaration (:func:`dukb.cli.declared.protocol_command`).
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
    help: str = ""

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
register(
    ProtocolInfo(
        "evaluate",
        "deep unlearning: recall, accuracy, Success-DU over minimal deep unlearning sets, trade-off curves",
        "Wu et al. 2025 (Eval-DU), Sec. 4, Eq. 1-2",
        f"{_P}.evaluate.config:EvaluateConfig",
        f"{_P}.evaluate.run:evaluate",
        f"{_P}.evaluate.report:render",
        f"{_P}.evaluate.run:EvaluateProtocol",
        joinable=True,
        rows=f"{_P}.evaluate.rows:EVALUATE_ROWS",
    )
)
register(
    ProtocolInfo(
        "rwku",
        "FB/QA/AA probes, neighbours, MIA, batch targets; unlearning from a description corpus",
        "Jin et al. 2024 (RWKU), Sec. 3-4",
        f"{_P}.rwku.config:RwkuConfig",
        f"{_P}.rwku.run:run_rwku",
        f"{_P}.rwku.report:render_rwku",
        f"{_P}.rwku.run:RwkuProtocol",
        joinable=True,
        rows=f"{_P}.rwku.config:RWKU_ROWS",
        help="""Run RWKU's evaluation (Jin et al. 2024) on a KB: forget probes FB (cloze), QA and the nine adversarial kinds
    (AA), scored by ROUGE-L recall; neighbour facts (about the forget facts' people, outside the targets' cone)
    apart from distant ones; MIA on forget members (FM) against retain members (RM) with LOSS, Zlib, Min-K% and
    Min-K%++; single-target and batch-target requests; and deep unlearning's recall and recall under attack for every
    unlearned model. Methods unlearn from a synthetic description corpus of the forget facts (RWKU's setting); every
    probe and MIA member is evaluation-only.

    RUN_DIR gets config.json, requests.json (each request's targets, forget set, cone and neighbour fact ids),
    finetuned/, results.jsonl (a "before" row and one row per method and setting for each request), summary.csv,
    report.md (RWKU's Table 1 layout, leaks per adversarial kind) and aa_kinds.png, batch_targets.png.""",
    )
)
register(
    ProtocolInfo(
        "muse",
        "VerbMem, KnowMem, PrivLeak against a retrained model; scalability, sustainability",
        "Shi et al. 2024b (MUSE), Sec. 2-4",
        f"{_P}.muse.config:MuseConfig",
        f"{_P}.muse.run:run_muse",
        f"{_P}.muse.report:render_muse",
        f"{_P}.muse.run:MuseProtocol",
        joinable=True,
        rows=f"{_P}.muse.config:MUSE_ROWS",
        help="""Run MUSE's six-way evaluation (Shi et al. 2024b) on a KB: f_target (finetuned on the QA pairs and statement
    sentences of every fact but a holdout), f_retrain (the same without the forget set, cached per forget set),
    every method from f_target unlearning the statement texts alone (the QA pairs are evaluation-only), and per
    model VerbMem (C1), KnowMem on forget (C2), PrivLeak with Min-K% against f_retrain (C3) and KnowMem on
    retain_eval (C4); scalability over forget-set sizes (C5) and sequential requests (C6).

    RUN_DIR gets config.json, splits.json (every split's fact ids), models/, results.jsonl (one row per model:
    model_kind target, retrain or unlearned), summary.csv, report.md (Table 3 layout, ratios to f_retrain, 95%
    bootstrap intervals) and scalability.png, sustainability.png, mia_roc.png.""",
    )
)
register(
    ProtocolInfo(
        "control",
        "PS-exact/PS-perturb with OC/ES/MM controls, unlearning risk, calibrated stopping",
        "Wang et al. 2024 (Unlearning with Control), Sec. 4-5",
        f"{_P}.control.config:ControlConfig",
        f"{_P}.control.run:run_control",
        f"{_P}.control.report:render_control",
        f"{_P}.control.run:ControlProtocol",
        joinable=True,
        rows=f"{_P}.control.config:CONTROL_ROWS",
        help="""Run the evaluation framework of "Unlearning with Control" (Wang et al. 2024) on a KB: θ_o finetuned on every
    fact; per forget ratio and method, the uncontrolled run and each control (OC, ES, MM) calibrated on a coarse
    then a fine grid so that PS-exact and PS-perturb on retain-eval stay ≥ 90% and PS-similar on the forget set ≥
    50% of θ_o's, selecting the lowest PS-exact on the forget set; plus the deep-unlearning recall of every
    selected model.

    RUN_DIR gets config.json, splits.json (forget, retain-train and retain-eval fact ids), sets.json,
    results.jsonl (one row per model, written at once), summary.csv, report.md (the paper's 6-number PS vector per
    method and control) and ps_curves.png, risk_curves.png.""",
    )
)
register(
    ProtocolInfo(
        "restor",
        "fact states after corruption and unlearning (clean, corrupted, unlearned)",
        "Rezaei et al. (RESTOR), Sec. 3-4",
        "dukb.neural.restor.config:RestorConfig",
        "dukb.neural.restor.pipeline:run_restor",
        "dukb.neural.restor.report:render",
        "dukb.neural.restor.pipeline:RestorProtocol",
        joinable=True,
        rows="dukb.neural.restor.config:RESTOR_ROWS",
    )
)


def protocols_table() -> Table:
    """The protocols' reference table: command, what it measures, source, its :class:`Protocol` class (the stages),
    whether several workers can share a run (`dukb methods`, the docs' reference/protocols page)."""
    return Table(
        "Protocols",
        ("protocol", "measures", "source", "stages (Protocol class)", "several workers per run"),
        tuple(
            (
                f"dukb {p.name}",
                p.summary,
                p.source,
                f"`{p.protocol.replace(':', '.')}`" if p.skeleton else "not yet on the skeleton",
                "yes" if p.joinable else "no",
            )
            for p in PROTOCOLS.values()
        ),
    )


__all__ = ["PROTOCOLS", "ProtocolInfo", "get_protocol", "protocols_table", "register"]
