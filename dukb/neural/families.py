"""One registry of model families: how a family is detected, prompted, finetuned and unlearned.

Each :class:`Family` holds everything dukb chooses per model family: the name substrings that detect it, its prompt
preset (:data:`dukb.neural.spec.PROMPT_PRESETS`), its QA finetuning preset (:class:`dukb.neural.train.TrainConfig`)
and the base learning rate of the gradient methods, from which each learning-rate kind (:data:`LR_KINDS`, declared
once per kind) derives its rate. A new model family is one entry here, and a new kind one :class:`LrKind`. The method
modules read their rates from :func:`family_lrs` (``GA_LR`` etc. are views of this table) and the run identity
records the family's name (``family``) and the resolved rates of every row (``setting["lr"]``), so a change here shows
in the identity.

Sources: Wu et al. 2025, App. H (the paper's finetuning presets for GPT2-XL, Phi-1.5 and Llama: batch 16, lr 2e-5 /
2e-5 / 1e-5, 15 / 10 / 10 epochs); the tiny and SmolLM2 presets were measured by dukb (bench/RESULTS.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dukb.neural.registry import Registry
from dukb.neural.tables import Table
from dukb.neural.trainconfig import TrainConfig


@dataclass(frozen=True)
class LrKind:
    """A learning-rate kind: which methods share a default rate, and that rate per family, declared once.

    A family's rate of this kind is its base unlearning rate (:attr:`Family.unlearn_lr`) times ``factor``, or the
    value in ``overrides`` for that family.

    Attributes:
        name: the kind (a method's ``lr_kind``, :class:`dukb.neural.catalog.MethodEntry`).
        label: its column in the families table.
        factor: multiple of the family's base rate.
        overrides: family name -> rate, where the rule does not hold.
    """

    name: str
    label: str
    factor: float = 1.0
    overrides: dict = field(default_factory=dict)

    def rate(self, family: Family) -> float:
        """This kind's rate (per step, AdamW) for ``family``."""
        return self.overrides.get(family.name, self.factor * family.unlearn_lr)


#: The learning-rate kinds, one entry each: GA (and GA_GDR/GA_KLR, PO, RT), NPO (all forms, SimNPO, DPO: twice the
#: base rate, Wu et al. 2025, App. H), KL, TV/WHP's reinforcement of f_overfit, and CL-DU's rounds (the tiny
#: model's 1e-4: see its family's note). A new kind is one entry here.
LR_KINDS: Registry = Registry(
    "learning-rate kind",
    (
        LrKind("ga", "GA"),
        LrKind("npo", "NPO", 2.0),
        LrKind("kl", "KL"),
        LrKind("reinforce", "TV/WHP reinforce"),
        LrKind("cl", "CL-DU", overrides={"tiny": 1e-4}),
    ),
)


@dataclass(frozen=True)
class Family:
    """A model family.

    Attributes:
        name: the family's name (``ModelSpec.family``; recorded as ``family`` in run identities).
        detect: lower-case substrings of a model's last name component that select this family (checked in
            :data:`FAMILIES` order); empty: never detected by name (``tiny``, ``generic``).
        prompt: its prompt preset name (:data:`dukb.neural.spec.PROMPT_PRESETS`).
        finetune: its QA finetuning preset (early stop at 100% checked every ``eval_every`` epochs).
        unlearn_lr: its base unlearning rate (per step, AdamW), from which every kind's rate follows (:attr:`lr`).
        note: where the numbers come from.
    """

    name: str
    detect: tuple[str, ...]
    prompt: str
    finetune: TrainConfig
    unlearn_lr: float
    note: str = ""

    @property
    def lr(self) -> dict[str, float]:
        """Learning rate per kind of :data:`LR_KINDS` (kind name -> rate)."""
        return {k.name: k.rate(self) for k in LR_KINDS.entries()}


#: name -> Family, in detection order (the first whose substring matches wins; ``generic`` is the fallback). The
#: paper's families unlearn at their finetuning rate (Wu et al. 2025, App. H).
FAMILIES: Registry = Registry(
    "model family",
    (
        Family(
            "smollm2",
            ("smollm",),
            "llama",
            TrainConfig(
                epochs=16,
                lr=2e-4,
                batch_size=16,
                warmup_steps=10,
                schedule="linear",
                eval_every=1,
                extra_epochs=8,
                extra_lr=2e-5,
            ),
            1e-5,
            "Measured on 2 CPU cores (bench/RESULTS.md): the paper's 1e-5..2e-5 leaves a 135 M model at 0.19 of the "
            "demo KB after 8 epochs; 2e-4 held constant climbs to 0.9986 of EDU-RELAT and then oscillates, so the rate "
            "decays linearly to 0 over 16 epochs (100% of EDU-RELAT after 10). Unlearning at 1e-5 (2e-5 NPO): T = "
            "1..16 spans no forgetting to heavy damage; the finetuning rate 2e-4 halves accuracy in one GA step.",
        ),
        Family(
            "gpt2-xl",
            ("gpt2",),
            "gpt2-xl",
            TrainConfig(epochs=15, lr=2e-5, batch_size=16, eval_every=1),
            2e-5,
            "Wu et al. 2025, App. H (every GPT-2 size gets GPT2-XL's preset).",
        ),
        Family(
            "phi",
            ("phi",),
            "phi",
            TrainConfig(epochs=10, lr=2e-5, batch_size=16, eval_every=1),
            2e-5,
            "Wu et al. 2025, App. H (Phi-1.5).",
        ),
        Family(
            "llama",
            ("llama",),
            "llama",
            TrainConfig(epochs=10, lr=1e-5, batch_size=16, eval_every=1),
            1e-5,
            "Wu et al. 2025, App. H (Llama; TinyLlama too).",
        ),
        Family(
            "tiny",
            (),
            "tiny",
            TrainConfig(
                epochs=400, lr=1e-3, batch_size=0, warmup_steps=50, eval_every=20, extra_epochs=200, extra_lr=1e-4
            ),
            1e-3,
            "The built-in default model. Finetuning: batch_size 0 = auto (n_items // 10 clipped to [8, 64]); lr 1e-3 "
            "reaches 100% in 40-80 epochs on KBs of 8 to 100 people and on EDU-RELAT (3e-3 stalled below 100% on "
            "some small KBs). CL-DU's 1e-4 was chosen on a development KB (dukb generate --people 100 --seed 1, 22 "
            "targets) before any EDU-RELAT run: GA's 1e-3 costs accuracy 0.46 at recall 1 where 1e-4 keeps 0.93.",
        ),
        Family(
            "generic",
            (),
            "generic",
            TrainConfig(epochs=10, lr=2e-5, batch_size=16, eval_every=1),
            2e-5,
            "Any other model: the paper's GPT2-XL/Phi rates.",
        ),
    ),
)


#: The rates runs used while their identities did not record them (dukb up to this registry): a run identity records
#: a method's resolved rate only where the registry now differs from these (:func:`identity_lr`), so those runs stay
#: resumable and a changed preset can never be mixed into one of them. A frozen record of history, not a table to
#: keep in step: never edit it, and a new kind needs no entry (its rates are always recorded). Change
#: :data:`FAMILIES` or :data:`LR_KINDS`.
RECORDED_LRS: dict[str, dict[str, float]] = {
    "ga": {"smollm2": 1e-5, "gpt2-xl": 2e-5, "phi": 2e-5, "llama": 1e-5, "tiny": 1e-3, "generic": 2e-5},
    "npo": {"smollm2": 2e-5, "gpt2-xl": 4e-5, "phi": 4e-5, "llama": 2e-5, "tiny": 2e-3, "generic": 4e-5},
    "kl": {"smollm2": 1e-5, "gpt2-xl": 2e-5, "phi": 2e-5, "llama": 1e-5, "tiny": 1e-3, "generic": 2e-5},
    "reinforce": {"smollm2": 1e-5, "gpt2-xl": 2e-5, "phi": 2e-5, "llama": 1e-5, "tiny": 1e-3, "generic": 2e-5},
    "cl": {"smollm2": 1e-5, "gpt2-xl": 2e-5, "phi": 2e-5, "llama": 1e-5, "tiny": 1e-4, "generic": 2e-5},
}


#: The paper's grids per model family (``dukb evaluate --family-grids paper``): GA's and NPO's step counts T and TV's
#: α. wrh14/deep_unlearning config/model_config.yaml: ``ga_num_epochs`` / ``npo_num_epochs`` = 32 for gpt2-xl and 16
#: for phi, llama2-7b and llama3-8b, one run read at the checkpoints ``[1, 2, 4, 8, 16, 32]`` it reaches
#: (unlearn_trainer.py:82, ``save_step_pattern: "log"``); ``tv_alpha_list``; Wu et al. 2025, App. H. Families the
#: paper did not run (tiny, smollm2, generic) have no entry: they keep the methods' default grids.
PAPER_GRIDS: dict[str, dict[str, tuple]] = {
    "gpt2-xl": {"ga": (1, 2, 4, 8, 16, 32), "npo": (1, 2, 4, 8, 16, 32), "tv": (0.2, 1.0, 5.0, 10.0, 30.0, 60.0, 80.0)},
    **{
        fam: {"ga": (1, 2, 4, 8, 16), "npo": (1, 2, 4, 8, 16), "tv": (0.2, 0.5, 1.0, 5.0, 10.0)}
        for fam in ("phi", "llama")
    },
}
#: ``--family-grids``: "dukb" (each method's default grid for every family: GA/NPO T ∈ {1, 2, 4, 8, 16}, TV α ∈ {0.2,
#: 0.5, 1, 5, 10}, dukb's earlier runs) or "paper" (:data:`PAPER_GRIDS`)
FAMILY_GRIDS = ("dukb", "paper")
#: WHP's α grids (``dukb evaluate --whp-grid``): "config", the ``whp_alpha_list`` of every family in
#: wrh14/deep_unlearning config/model_config.yaml, read by whp_run.py and looped over by
#: scripts_unlearning_methods/whp.sh, and the grid of Wu et al. 2025, App. H ({0.5, 1, 5, 10, 100, 100.0}, a typo for
#: 1000; Sec. 4.2: "even with α = 10^3"); "notebook", the ``alpha_list`` of the figure notebook (notebooks/Unlearning
#: Evaluation -- Final Paper Figure Generation.ipynb, commit 20c927b, cell 10), which computed the figures and tables
WHP_GRIDS: dict[str, tuple] = {"config": (0.5, 1.0, 5.0, 10.0, 100.0, 1000.0), "notebook": (10.0, 1e3, 1e5, 1e7, 1e8)}


def component_grid(
    method: str, family: str | None, family_grids: str = "dukb", whp_grid: str = "config"
) -> tuple | None:
    """The grid that ``--family-grids`` and ``--whp-grid`` give a method, or None where they leave its default grid.

    Args:
        method: a method's registry name (only ga, npo, tv and whp have paper grids).
        family: the model family's name (:data:`FAMILIES`; None or a family without :data:`PAPER_GRIDS`: none).
        family_grids: one of :data:`FAMILY_GRIDS`; whp_grid: a key of :data:`WHP_GRIDS`.

    Returns:
        a tuple of grid values, or None.

    Raises:
        KeyError: an unknown ``family_grids`` or ``whp_grid`` (a programming error: the config checks its choices).

    Source: Wu et al. 2025, App. H; wrh14/deep_unlearning config/model_config.yaml and the figure notebook.
    """
    if family_grids not in FAMILY_GRIDS:
        raise KeyError(f"unknown family grids {family_grids!r}")
    if method == "whp":
        return WHP_GRIDS[whp_grid]
    if family_grids == "paper":
        return PAPER_GRIDS.get(family or "", {}).get(method)
    return None


def identity_lr(method, family: str | None, override: float | None) -> float | None:
    """The rate a run identity records for ``method``: its family's default rate when ``override`` (``--lr``) is
    None and that rate differs from :data:`RECORDED_LRS` (None otherwise: the override is recorded by the identity's
    ``lr``, an unchanged rate by the family's name, and a method's own rate, ``METHOD:lr=...``, by its options).

    Args:
        method: a :class:`dukb.neural.methods.base.Method` (its ``lr_kind``; None for methods without training).
        family: the model family's name (:data:`FAMILIES`); None or unknown: ``generic``.
        override: the run's ``--lr``.

    Returns:
        float or None.
    """
    kind = getattr(method, "lr_kind", None)
    if override is not None or kind is None or getattr(method, "lr", None) is not None:
        return None
    fam = family if family in FAMILIES else "generic"
    rate = FAMILIES[fam].lr[kind]
    return None if RECORDED_LRS.get(kind, {}).get(fam) == rate else rate


def detect_family(name_or_path: str) -> str:
    """The family of a model from the last component of its name or path (a hub id's model name, a GGUF file's
    name): the first family of :data:`FAMILIES` one of whose ``detect`` substrings is in it, else ``generic``.

    Raises:
        nothing (any value is turned into a string).
    """
    low = str(name_or_path).replace("\\", "/").rstrip("/").rsplit("/", 1)[-1].lower()
    for fam in FAMILIES.values():
        if any(d in low for d in fam.detect):
            return fam.name
    return "generic"


def family_lrs(kind: str) -> dict[str, float]:
    """family name -> learning rate of one kind (:data:`LR_KINDS`), e.g. ``family_lrs("ga")["tiny"]`` = 1e-3.

    Raises:
        KeyError: an unknown kind.
    """
    if kind not in LR_KINDS:
        raise KeyError(f"unknown learning-rate kind {kind!r} (one of {', '.join(LR_KINDS)})")
    return {name: LR_KINDS[kind].rate(f) for name, f in FAMILIES.items()}


def finetune_presets() -> dict[str, TrainConfig]:
    """family name -> QA finetuning preset (:data:`dukb.neural.finetune.FINETUNE_PRESETS`)."""
    return {name: f.finetune for name, f in FAMILIES.items()}


def families_table() -> Table:
    """The model families' reference table (detection, prompt, finetuning rate, epochs and batch, unlearning rate
    per kind), in registry order (`dukb methods`, the docs' reference/methods page)."""
    rows = []
    for f in FAMILIES.values():
        det = ", ".join(f"`{d}`" for d in f.detect) or ("the built-in model" if f.name == "tiny" else "fallback")
        ft = f.finetune
        rows.append(
            (
                f.name,
                det,
                f.prompt,
                f"{ft.lr:g} / {ft.epochs} / {ft.batch_size or 'auto'}",
                *(f"{k.rate(f):g}" for k in LR_KINDS.entries()),
            )
        )
    return Table(
        "Model families",
        ("family", "detected by", "prompt", "finetuning lr / epochs / batch", *(k.label for k in LR_KINDS.entries())),
        tuple(rows),
        "Detection, prompt, finetuning preset and learning rate per method kind (`dukb.neural.families`); "
        "`--lr` or `METHOD:lr=...` overrides a method's rate.",
    )
