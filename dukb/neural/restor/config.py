"""The settings of a ``dukb restor`` run (:class:`RestorConfig`, written to RUN_DIR/config.json) and the two
hyper-parameter presets: "restor" (the paper's) and "tiny" (the built-in small model).

Source: Rezaei et al., RESTOR: corruption training (App. C.1: LLaMA-Factory, LoRA on all linear layers, batch 2 x 2,
lr 5e-5, 5 epochs, cosine, warm-up 0.1), unlearning (Sec. 3.3 and App. C.2: GA, KL, NPO with a retain term,
weight decay 0.1, accumulation 4), evaluation (Sec. 3.4: M = 3 generations). Clean-model finetuning: Wu et al. 2025,
App. H. Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from dukb import InputError
from dukb.neural.bounds import (
    CONTEXT,
    EPOCHS,
    FRACTION_HALF,
    LORA_ALPHA,
    LORA_R,
    LR,
    N_TEXTS,
    NEW_TOKENS,
    RANDOM_ANSWERS,
    REG_WEIGHT,
    SAMPLES,
    SEED,
    TEMPERATURE,
    TEMPLATES,
    UNLEARN_EPOCHS,
    bounded,
    check_device,
    check_dtype,
    check_ranges,
)
from dukb.neural.catalog import document_methods
from dukb.neural.restor.facts import N_RANDOM

#: The range of each per-method option of ``dukb restor`` (``--lambda kl=5``: :mod:`dukb.neural.bounds`)
METHOD_VALUE_RANGES = {"--lambda": REG_WEIGHT, "--unlearn-lr": LR, "--unlearn-epochs": UNLEARN_EPOCHS}

#: Unlearning methods of ``dukb restor`` (RESTOR Sec. 3.3): the registry's document-level methods
#: (:data:`dukb.neural.methods.DOCUMENT_METHODS`, read from the light catalog), in RESTOR's order GA, KL, NPO.
RESTOR_METHODS = tuple(document_methods())


@dataclass(frozen=True)
class UnlearnSetting:
    """Hyper-parameters of one document unlearning run (:func:`dukb.neural.docs.unlearn_documents`).

    Attributes:
        epochs: passes over the forget documents.
        lr: peak learning rate.
        reg_weight: λ of the retain cross-entropy (dukb's convention: loss = forget + λ retain).
        beta: NPO's inverse temperature.
        batch_size, grad_accum, weight_decay, schedule, warmup, max_grad_norm: as
            :class:`dukb.neural.train.TrainConfig` (gradient clipping at 1.0: HF Trainer's default, which SOUL uses).

    Source: Rezaei et al., RESTOR, Sec. 3.3 (λ) and App. C.2 (epochs, learning rates, λ per method).
    """

    epochs: int
    lr: float
    reg_weight: float
    beta: float = 0.1
    batch_size: int = 2
    grad_accum: int = 4
    weight_decay: float = 0.1
    schedule: str = "linear"
    warmup: float = 0.0
    max_grad_norm: float = 1.0

    def train_config(self, seed: int):
        """The :class:`dukb.neural.train.TrainConfig` of this setting."""
        from dukb.neural.train import TrainConfig

        return TrainConfig(epochs=self.epochs, lr=self.lr, batch_size=self.batch_size, grad_accum=self.grad_accum,
                           weight_decay=self.weight_decay, warmup=self.warmup, schedule=self.schedule,
                           max_grad_norm=self.max_grad_norm, seed=seed)


def _presets() -> dict:
    from dukb.neural.train import TrainConfig

    return {
        # RESTOR App. C.1 (corruption, LLaMA-Factory: LoRA r 8 / alpha 16 on all linear layers, batch 2 x 2, lr 5e-5,
        # 5 epochs, cosine, warm-up 0.1) and App. C.2 (SOUL: weight decay 0.1, accumulation 4; GA 2 epochs, 2e-5,
        # λ 4; KL 2 epochs, 1.5e-5, code's γ = 0.2 on the forget term = λ 5; NPO 3 epochs, 2e-5, λ 5). The clean
        # model's finetuning is the paper's QA preset (Wu et al. 2025, App. H); RESTOR's clean model is Llama-3
        # as pretrained.
        "restor": {
            "clean": TrainConfig(epochs=10, lr=2e-5, batch_size=16, grad_accum=1, warmup=0.0, schedule="linear",
                                 eval_every=1, max_grad_norm=0.0),
            "corrupt_lora": TrainConfig(epochs=5, lr=5e-5, batch_size=2, grad_accum=2, warmup=0.1,
                                        schedule="cosine", max_grad_norm=1.0),
            "corrupt_full": TrainConfig(epochs=5, lr=5e-5, batch_size=2, grad_accum=2, warmup=0.1,
                                        schedule="cosine", max_grad_norm=1.0),
            "unlearn": {"ga": UnlearnSetting(2, 2e-5, 4.0), "kl": UnlearnSetting(2, 1.5e-5, 5.0),
                        "npo": UnlearnSetting(3, 2e-5, 5.0)},
            "unlearn_full_lr_scale": 1.0,
        },
        # The built-in tiny model (2 layers, 128 wide, trained from scratch on the KB): RESTOR's epochs, λ,
        # schedules, LoRA rank, weight decay and gradient clipping (HF Trainer's 1.0); batch 4 without
        # accumulation; learning rates raised for a small model trained from scratch. The clean model's
        # finetuning follows dukb's QA finetuning (linear schedule, no clipping). Chosen by hand on EDU-RELAT
        # (greedy probing, LoRA seeds 0-2): corruption at lr 1e-3 leaves 72-82% of the facts known, while 2e-3
        # gives 30-71% and 3e-3 27-63% depending on the LoRA initialisation alone. Unlearning from that corrupted
        # model (81.7%): lr 3e-5 changes it by under 2 points, 1e-4 moves it (Recovery 17-20% of A, Degraded
        # 13-26% of B), 3e-4 destroys it (5%, 14% and 0% of the facts known after GA, KL, NPO).
        "tiny": {
            "clean": TrainConfig(epochs=300, lr=3e-3, batch_size=64, grad_accum=1, warmup=0.02, schedule="linear",
                                 eval_every=10, max_grad_norm=0.0),
            "corrupt_lora": TrainConfig(epochs=5, lr=1e-3, batch_size=4, grad_accum=1, warmup=0.1,
                                        schedule="cosine", max_grad_norm=1.0),
            "corrupt_full": TrainConfig(epochs=5, lr=3e-4, batch_size=4, grad_accum=1, warmup=0.1,
                                        schedule="cosine", max_grad_norm=1.0),
            "unlearn": {"ga": UnlearnSetting(2, 1e-4, 4.0, batch_size=4, grad_accum=1),
                        "kl": UnlearnSetting(2, 1e-4, 5.0, batch_size=4, grad_accum=1),
                        "npo": UnlearnSetting(3, 1e-4, 5.0, batch_size=4, grad_accum=1)},
            "unlearn_full_lr_scale": 0.1,
        },
    }


PRESET_NAMES = ("tiny", "restor")


@dataclass
class RestorConfig:
    """Everything that defines a ``dukb restor`` run (written to RUN_DIR/config.json).

    Attributes:
        kb: KB directory or built-in name.
        model: "tiny" (built for the KB), hub id or model directory.
        corrupt: share of the facts in F', in (0, 1] (RESTOR: about 250 of 1,051 facts, 0.24).
        context: correct facts about other people per corruption document (dukb's k_context; RESTOR's k is
            context / 5).
        docs_per_entity: corruption documents per corrupted person (RESTOR: about 60 per incorrect fact).
        methods: unlearning methods, of :data:`RESTOR_METHODS`.
        targeted: unlearn only the incorrect sentences of each document (RESTOR's k = 0 forget set).
        seed: seed of the corruption, the tiny model, data orders, sampling and retain set.
        lora_r: LoRA rank of corruption and unlearning (0: full finetuning); lora_alpha: its alpha (None: 2 r).
        samples: M generations per fact (RESTOR: 3); 1 = greedy; None: the preset's (tiny: 1, restor: 3). With
            temperature-1 sampling the tiny model's answers after corruption are mostly sampling noise (EDU-RELAT:
            10% of the facts right by a majority of 3 samples, 61% greedy), so its preset decodes greedily.
        temperature: sampling temperature when M > 1.
        max_new_tokens: generation budget (tokens).
        preset: "tiny" or "restor" hyper-parameters (None: "tiny" for the tiny model, else "restor").
        reg_weight: method -> λ overriding the preset; unlearn_lr: method -> learning rate; unlearn_epochs: method
            -> epochs.
        clean_epochs, corrupt_epochs, corrupt_lr: overrides of the preset.
        templates: sentence templates per fact in the clean model's training text (None: all).
        n_retain: retain documents (5 unrelated true-fact sentences each).
        n_random: random plausible answers per fact (RESTOR: 15).
        rules: rule set of the closures.
        device, dtype, prompt: model options.

    Source: Rezaei et al., RESTOR, Sec. 3.2-3.4, 4.2 and App. C.
    """

    kb: str
    model: str = "tiny"
    corrupt: float = bounded(0.24, FRACTION_HALF, "--corrupt")
    context: int = bounded(5, CONTEXT, "--context")
    docs_per_entity: int = 20
    methods: list[str] = field(default_factory=lambda: list(RESTOR_METHODS))
    targeted: bool = False
    seed: int = bounded(0, SEED, "--seed")
    lora_r: int = bounded(8, LORA_R, "--lora-r")
    lora_alpha: int | None = bounded(None, LORA_ALPHA, "--lora-alpha")
    samples: int | None = bounded(None, SAMPLES, "--samples")
    temperature: float = bounded(1.0, TEMPERATURE, "--temperature")
    max_new_tokens: int = bounded(10, NEW_TOKENS, "--max-new-tokens")
    preset: str | None = None
    reg_weight: dict[str, float] = field(default_factory=dict)
    unlearn_lr: dict[str, float] = field(default_factory=dict)
    unlearn_epochs: dict[str, int] = field(default_factory=dict)
    clean_epochs: int | None = bounded(None, EPOCHS, "--clean-epochs")
    corrupt_epochs: int | None = bounded(None, EPOCHS, "--corrupt-epochs")
    corrupt_lr: float | None = bounded(None, LR, "--corrupt-lr")
    templates: int | None = bounded(None, TEMPLATES, "--templates")
    n_retain: int = bounded(64, N_TEXTS, "--n-retain")
    n_random: int = bounded(N_RANDOM, RANDOM_ANSWERS, "--n-random")
    rules: str = "family"
    device: str = "auto"
    dtype: str = "auto"
    prompt: str | None = None

    #: Fields that the clean, corrupted and probed models depend on: a rerun must agree on them.
    IDENTITY = ("model", "corrupt", "context", "docs_per_entity", "seed", "lora_r", "lora_alpha", "samples",
                "temperature", "max_new_tokens", "preset", "clean_epochs", "corrupt_epochs", "corrupt_lr",
                "templates", "n_random", "n_retain", "rules", "prompt")

    def resolved_preset(self) -> str:
        """The preset name in use."""
        return self.preset or ("tiny" if self.model == "tiny" else "restor")

    def resolved_samples(self) -> int:
        """M in use: ``samples``, else the preset's (tiny 1, restor 3)."""
        if self.samples is not None:
            return self.samples
        return 1 if self.resolved_preset() == "tiny" else 3

    def check(self) -> None:
        """Validate the settings.

        Raises:
            InputError: a value out of range or an unknown method/preset.
        """
        check_ranges(self)  # every bounded field (dukb.neural.bounds)
        check_device(self.device)
        check_dtype(self.dtype)
        if self.docs_per_entity < 1:
            raise InputError(f"--docs-per-entity must be >= 1, got {self.docs_per_entity}")
        if not self.methods:
            raise InputError("no unlearning method given (--methods ga,kl,npo)")
        for m in self.methods:
            if m not in RESTOR_METHODS:
                raise InputError(f"unknown method {m!r} for restor (choose from {', '.join(RESTOR_METHODS)})")
        if len(set(self.methods)) != len(self.methods):
            raise InputError("a method is listed twice in --methods")
        if self.lora_r < 0:
            raise InputError(f"--lora-r must be >= 0 (0 = full finetuning), got {self.lora_r}")
        if self.samples is not None and self.samples < 1:
            raise InputError(f"--samples must be >= 1, got {self.samples}")
        if self.resolved_samples() > 1 and self.temperature <= 0:
            raise InputError("--temperature must be > 0 when --samples > 1")
        if self.resolved_preset() not in PRESET_NAMES:
            raise InputError(f"unknown preset {self.preset!r} (choose from {', '.join(PRESET_NAMES)})")
        for name, d in (("--lambda", self.reg_weight), ("--unlearn-lr", self.unlearn_lr),
                        ("--unlearn-epochs", self.unlearn_epochs)):
            for m, v in d.items():
                if m not in RESTOR_METHODS:
                    raise InputError(f"{name}: unknown method {m!r}")
                METHOD_VALUE_RANGES[name].check(f"{name} {m}", v)
        if self.n_retain < 0 or self.n_random < 0 or self.max_new_tokens < 1:
            raise InputError("--n-retain and --n-random must be >= 0 and --max-new-tokens >= 1")
        if self.templates is not None and self.templates < 1:
            raise InputError(f"--templates must be >= 1, got {self.templates}")

    def identity(self) -> dict:
        """The fields of :data:`IDENTITY` with their values (samples and preset resolved)."""
        return {k: getattr(self, k) for k in self.IDENTITY} | {"samples": self.resolved_samples(),
                                                                "preset": self.resolved_preset()}

    def unlearn_setting(self, method: str) -> UnlearnSetting:
        """The resolved hyper-parameters of a method: the preset, with LoRA's learning rate scaled for full
        finetuning, then the explicit overrides."""
        p = _presets()[self.resolved_preset()]
        s = p["unlearn"][method]
        if not self.lora_r:
            s = replace(s, lr=s.lr * p["unlearn_full_lr_scale"])
        over = {}
        if method in self.reg_weight:
            over["reg_weight"] = float(self.reg_weight[method])
        if method in self.unlearn_lr:
            over["lr"] = float(self.unlearn_lr[method])
        if method in self.unlearn_epochs:
            over["epochs"] = int(self.unlearn_epochs[method])
        return replace(s, **over)

    def train_config(self, stage: str):
        """The resolved :class:`dukb.neural.train.TrainConfig` of "clean" or "corrupt"."""
        p = _presets()[self.resolved_preset()]
        if stage == "clean":
            c = p["clean"]
            return replace(c, seed=self.seed, **({"epochs": self.clean_epochs} if self.clean_epochs else {}))
        c = p["corrupt_lora" if self.lora_r else "corrupt_full"]
        over = {"seed": self.seed}
        if self.corrupt_epochs is not None:
            over["epochs"] = self.corrupt_epochs
        if self.corrupt_lr is not None:
            over["lr"] = self.corrupt_lr
        return replace(c, **over)


# ------------------------------------------------------------------------------------------------ rows --------
# The protocol's rows as the run layer sees them (issue 40: the run layer knows no protocol; ProtocolInfo carries
# them): the row model, the row key and the plan check. Kept at the end of the file, below the config.
import json  # noqa: E402

from dukb.neural.run.rows import RowProblem, RowSchema, dict_of, expect, identity_of, may, need, show  # noqa: E402


def restor_row_key(row: dict) -> tuple:
    """(method, targeted, setting as canonical JSON) identifying a `dukb restor` row."""
    return (row["method"], bool(row["targeted"]), json.dumps(row["setting"], sort_keys=True))


def restor_row(row: dict) -> None:
    """The row model of `dukb restor`: what `dukb report` reads of a row (dukb.neural.restor.report,
    dukb.neural.restor.states; Rezaei et al., Sec. 3-4).

    Raises:
        RowFault: the first problem, in words.
    """
    need(row, "method", "str")
    need(row, "targeted", "bool")
    need(row, "setting", "any")
    need(row, "rows", "list")
    for i, r in enumerate(row["rows"]):
        expect(r, "dict", f"rows[{i}]")
        need(r, "correct", "bool")
        need(r, "label", "str")
        need(r, "answer", "str?")
    for name in ("seconds_unlearn", "seconds_probe", "seconds_logprobs"):
        may(row, name, "num?")
    if row.get("logprobs_A") is not None:
        expect(row["logprobs_A"], "list", "logprobs_A")
        for i, d in enumerate(row["logprobs_A"]):
            expect(d, "dict", f"logprobs_A[{i}]")
            for k in ("true", "injected", "random"):
                need(d, k, "score?")
    dict_of(row, "beliefs", {"examples_contradicting": "[str]?", "examples_false": "[str]?"})


def restor_plan_check(config: dict) -> RowProblem | None:
    """The check of a restor row against its run's config.json: its method is one the run's invocations ran (the
    ``methods`` of its ``history`` entries, or of its ``config``). A row that fails cannot come from the run.

    Args:
        config: the run's config.json (a dict).

    Returns:
        callable(row) -> the problem in words or None, for rows that passed :func:`restor_row`; None when the config
        records no methods to check against.
    """
    if identity_of(config) is None:
        return None
    lists = [h.get("methods") for h in config.get("history") or [] if isinstance(h, dict)]
    if isinstance(config.get("config"), dict):
        lists.append(config["config"].get("methods"))
    methods = {m for ms in lists if isinstance(ms, list) for m in ms if isinstance(m, str)}
    if not methods:
        return None

    def check(row: dict) -> str | None:
        if row["method"] not in methods:
            return f"field method: {show(row['method'])} is not a method of the run (config.json)"
        return None

    return check


#: the rows of `dukb restor` (its row key, row model and plan check), carried to the run layer by its ProtocolInfo
RESTOR_ROWS = RowSchema(key=restor_row_key, model=restor_row, plan=restor_plan_check)
