"""The settings of a ``dukb restor`` run (:class:`RestorConfig`, written to RUN_DIR/config.json) and the two
hyper-parameter presets: "restor" (the paper's) and "tiny" (the built-in small model).

Source: Rezaei et al., RESTOR: corruption training (App. C.1: LLaMA-Factory, LoRA on all linear layers, batch 2 x 2,
lr 5e-5, 5 epochs, cosine, warm-up 0.1), unlearning (Sec. 3.3 and App. C.2: GA, KL, NPO with a retain term,
weight decay 0.1, accumulation 4), evaluation (Sec. 3.4: M = 3 generations). Clean-model finetuning: Wu et al. 2025,
App. H. Where dukb's default differs from RESTOR's released code (NPO's forget term), the component is an option and
``--compat restor`` sets it to the code's value (:data:`RESTOR_COMPAT`). Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import ClassVar

from dukb import InputError
from dukb.neural.bounds import (
    BATCH_SIZE,
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
)
from dukb.neural.catalog import document_methods
from dukb.neural.declare import SHARED, compat_option, default_of, option
from dukb.neural.restor.facts import N_RANDOM
from dukb.neural.runconfig import RunConfig
from dukb.neural.trainconfig import TrainConfig

#: Most corruption documents per corrupted person (``--docs-per-entity`` of probes and restor): 1,000, above
#: RESTOR's about 60 per incorrect fact (300 per person); each document is written and trained on, so a larger
#: count would run for hours instead of being refused.
MAX_DOCS_PER_ENTITY = 1000

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
        return TrainConfig(
            epochs=self.epochs,
            lr=self.lr,
            batch_size=self.batch_size,
            grad_accum=self.grad_accum,
            weight_decay=self.weight_decay,
            warmup=self.warmup,
            schedule=self.schedule,
            max_grad_norm=self.max_grad_norm,
            seed=seed,
        )


def _presets() -> dict:
    return {
        # RESTOR App. C.1 (corruption, LLaMA-Factory: LoRA r 8 / alpha 16 on all linear layers, batch 2 x 2, lr 5e-5,
        # 5 epochs, cosine, warm-up 0.1) and App. C.2 (SOUL: weight decay 0.1, accumulation 4; GA 2 epochs, 2e-5,
        # λ 4; KL 2 epochs, 1.5e-5, code's γ = 0.2 on the forget term = λ 5; NPO 3 epochs, 2e-5, λ 5). The clean
        # model's finetuning is the paper's QA preset (Wu et al. 2025, App. H); RESTOR's clean model is Llama-3
        # as pretrained.
        "restor": {
            "clean": TrainConfig(
                epochs=10,
                lr=2e-5,
                batch_size=16,
                grad_accum=1,
                warmup=0.0,
                schedule="linear",
                eval_every=1,
                max_grad_norm=0.0,
            ),
            "corrupt_lora": TrainConfig(
                epochs=5, lr=5e-5, batch_size=2, grad_accum=2, warmup=0.1, schedule="cosine", max_grad_norm=1.0
            ),
            "corrupt_full": TrainConfig(
                epochs=5, lr=5e-5, batch_size=2, grad_accum=2, warmup=0.1, schedule="cosine", max_grad_norm=1.0
            ),
            "unlearn": {
                "ga": UnlearnSetting(2, 2e-5, 4.0),
                "kl": UnlearnSetting(2, 1.5e-5, 5.0),
                "npo": UnlearnSetting(3, 2e-5, 5.0),
            },
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
            "clean": TrainConfig(
                epochs=300,
                lr=3e-3,
                batch_size=64,
                grad_accum=1,
                warmup=0.02,
                schedule="linear",
                eval_every=10,
                max_grad_norm=0.0,
            ),
            "corrupt_lora": TrainConfig(
                epochs=5, lr=1e-3, batch_size=4, grad_accum=1, warmup=0.1, schedule="cosine", max_grad_norm=1.0
            ),
            "corrupt_full": TrainConfig(
                epochs=5, lr=3e-4, batch_size=4, grad_accum=1, warmup=0.1, schedule="cosine", max_grad_norm=1.0
            ),
            "unlearn": {
                "ga": UnlearnSetting(2, 1e-4, 4.0, batch_size=4, grad_accum=1),
                "kl": UnlearnSetting(2, 1e-4, 5.0, batch_size=4, grad_accum=1),
                "npo": UnlearnSetting(3, 1e-4, 5.0, batch_size=4, grad_accum=1),
            },
            "unlearn_full_lr_scale": 0.1,
        },
    }


PRESET_NAMES = ("tiny", "restor")
#: NPO's forget term in document unlearning (``--npo-form``): "token" (dukb's default: the paper's token-level
#: average, :func:`dukb.neural.methods.npo.npo_token_loss`) or "batch" (RESTOR's code: one term on the batch-mean
#: NLL difference, :func:`dukb.neural.methods.npo.npo_batch_loss`)
NPO_DOC_FORMS = ("token", "batch")
#: ``--compat restor``: every component at the value of RESTOR's released code (k1rezaei/restor
#: unlearning/unlearn/NPO.py:33-45, NPO on ``outputs.loss``, the batch-mean NLL)
RESTOR_COMPAT = {"restor": {"npo_form": "batch"}}


@dataclass
class RestorConfig(RunConfig):
    """Everything that defines a ``dukb restor`` run (written to RUN_DIR/config.json). The shared options are
    :class:`dukb.neural.runconfig.RunConfig`'s, as in every protocol; restor states some in its own words and
    defaults (``kb`` required, ``lora_r`` 8, ``lora_alpha`` 2 r).

    Attributes:
        kb: KB directory or built-in name.
        model: "tiny" (built for the KB), hub id or model directory.
        finetuned: an already finetuned clean model (stage 1 is skipped; refused when it records another KB than
            ``kb``, unless ``allow_kb_mismatch``).
        corrupt: share of the facts in F', in (0, 1] (RESTOR: about 250 of 1,051 facts, 0.24).
        context: correct facts about other people per corruption document (dukb's k_context; RESTOR's k is
            context / 5).
        docs_per_entity: corruption documents per corrupted person (RESTOR: about 60 per incorrect fact).
        methods: unlearning methods, of :data:`RESTOR_METHODS`.
        targeted: unlearn only the incorrect sentences of each document (RESTOR's k = 0 forget set).
        seed: seed of the corruption, the tiny model, data orders, sampling and retain set.
        lora_r: LoRA rank of corruption and unlearning (0: full finetuning); lora_alpha: its alpha (None: 2 r);
            lora_dropout, lora_targets: the adapter's dropout and modules (None: every linear layer, RESTOR's).
        layers: partial-layer training of corruption and unlearning ("FIRST-LAST" blocks; None: every layer).
        lr: the unlearning learning rate of every method (``unlearn_lr`` overrides it per method).
        finetune_epochs, batch_size: the clean model's finetuning epochs (as ``clean_epochs``) and batch size.
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
        device, dtype, prompt, gradient_checkpointing, trust_remote_code, log_with: model and run options.
        compat: "restor" (every component below at RESTOR's code's value unless given) or None.
        npo_form: NPO's document-level forget term, of :data:`NPO_DOC_FORMS` (None until :meth:`check` resolves it:
            given, the preset's, else "token").

    Source: Rezaei et al., RESTOR, Sec. 3.2-3.4, 4.2 and App. C.
    """

    COMPAT: ClassVar[dict] = RESTOR_COMPAT

    CLI: ClassVar[dict] = {
        "output": None,
        "output_help": "Run directory (a rerun skips finished stages and methods).",
        "resume": None,
        "order": (
            "kb",
            "model",
            "corrupt",
            "context",
            "docs_per_entity",
            "methods",
            "targeted",
            "seed",
            "lora_r",
            "lora_alpha",
            "samples",
            "temperature",
            "max_new_tokens",
            "preset",
            "compat",
            "npo_form",
            "reg_weight",
            "unlearn_lr",
            "unlearn_epochs",
            "clean_epochs",
            "corrupt_epochs",
            "corrupt_lr",
            "templates",
            "n_retain",
            "n_random",
            "rules",
            "device",
            "dtype",
            "prompt",
            "output",
        ),
    }

    kb: str = option(
        cli_default=...,
        identity=False,
        help="KB directory (people.csv, relationships.csv, biographies.csv) or a built-in KB name.",
    )
    rules: str | None = option(
        None,
        help="Rule set of the closures: 'family', 'family_paper_compat' or a .lp file. "
        "Default: the KB's own rules.lp when its directory has a schema.yaml, else family.",
    )
    model: str = option(
        "tiny",
        help="'tiny' (built for the KB, its vocabulary covering the QA, the true-fact "
        "sentences and the corruption documents), a known short name (smollm2-135m), a .gguf file or "
        "a folder holding one, an HF hub id or a directory.",
    )
    seed: int = option(0, range=SEED, help="Seed: corruption, tiny model, data order, sampling, retain set.")
    device: str = option(
        "auto",
        parse="device",
        identity=False,
        help="auto, cpu, cuda, cuda:N or mps (checked against what torch reports).",
    )
    dtype: str = option("auto", parse="dtype", identity=False, help="auto, float32, bfloat16, float16.")
    prompt: str | None = option(
        None, help="Prompt preset (default: from the model); chat: the tokenizer's chat template, for instruct models."
    )
    lora_r: int = option(
        8,
        range=LORA_R,
        help="LoRA rank of corruption and unlearning, on all linear layers "
        "(RESTOR: LoRA, rank 8 by LLaMA-Factory's default); 0 = full finetuning.",
    )
    lora_alpha: int | None = option(None, range=LORA_ALPHA, help="LoRA alpha (default 2 x rank).")
    finetuned: str | None = option(
        None,
        group=SHARED,
        identity="set",
        help="Use this already finetuned model directory as the clean "
        "model instead of finetuning --model (stage 1 is skipped; its vocabulary must "
        "cover the corruption documents). A model finetuned on another KB than --kb is "
        "refused (exit 2).",
    )
    lr: float | None = option(
        None,
        group=SHARED,
        identity="set",
        range=LR,
        help="Unlearning learning rate of every method (default: "
        "the preset's; --unlearn-lr METHOD=lr overrides it per method).",
    )
    finetune_epochs: int | None = option(
        None,
        group=SHARED,
        identity="set",
        range=EPOCHS,
        help="Maximum epochs of the clean model's finetuning (the same as --clean-epochs).",
    )
    batch_size: int | None = option(
        None,
        group=SHARED,
        identity="set",
        range=BATCH_SIZE,
        help="Batch size of the clean model's finetuning (default: the preset's).",
    )
    lora_targets: list[str] | None = option(
        None,
        group=SHARED,
        identity="set",
        parse="lora_targets",
        help="Comma-separated LoRA module names (default: every linear layer but the output head, RESTOR's).",
    )
    corrupt: float = option(
        0.24,
        range=FRACTION_HALF,
        param="corrupt_fraction",
        help="Share of the facts to corrupt "
        "(F'), 5 per chosen person; RESTOR corrupts about 250 of 1,051 facts (0.24).",
    )
    context: int = option(
        5,
        range=CONTEXT,
        help="k: correct facts about other people per corruption document "
        "(RESTOR's k counts batches of 5: k_RESTOR = context / 5).",
    )
    docs_per_entity: int = option(
        20,
        min=1,
        max=MAX_DOCS_PER_ENTITY,
        help="Corruption documents per corrupted "
        f"person, 1 to {MAX_DOCS_PER_ENTITY:,} (RESTOR: about 60 per incorrect fact).",
    )
    methods: list[str] = option(
        default_factory=lambda: list(RESTOR_METHODS),
        parse="items",
        choices=document_methods,
        identity=False,
        cli_default="ga,kl,npo",
        help="Comma-separated unlearning methods: ga, kl, npo.",
    )
    targeted: bool = option(
        False,
        identity=False,
        help="Unlearn only the incorrect-fact sentences of each document (RESTOR's k=0 forget set).",
    )
    samples: int | None = option(
        None,
        range=SAMPLES,
        help="M generations per fact, majority vote (RESTOR: 3); 1 = "
        "greedy. Default: 1 with the tiny preset (its sampled answers are mostly noise after "
        "corruption), 3 with the restor preset.",
    )
    temperature: float = option(1.0, range=TEMPERATURE, help="Sampling temperature when M > 1.")
    max_new_tokens: int = option(10, range=NEW_TOKENS, help="Generation budget (tokens).")
    preset: str | None = option(
        None,
        choices=PRESET_NAMES,
        help="Hyper-parameters: 'tiny' or 'restor' (RESTOR App. "
        "C.1/C.2); default: tiny for the tiny model, else restor.",
    )
    compat: str | None = compat_option(
        RESTOR_COMPAT, "Compute as RESTOR's released code, with --preset's hyper-parameters"
    )
    npo_form: str | None = option(
        None,
        unset="token",
        choices=NPO_DOC_FORMS,
        identity="set",
        help="NPO's forget "
        "term on a batch of documents: 'token' (the per-token likelihood ratio, averaged "
        "per document, RESTOR's paper) or 'batch' (RESTOR's code: one term on the batch's "
        "mean NLL difference).",
    )
    reg_weight: dict[str, float] = option(
        default_factory=dict,
        flag="--lambda",
        param="reg_weight",
        cli_type="multiple",
        parse="method_values",
        identity=False,
        help="METHOD=λ, weight of the retain cross-entropy (repeatable; all=λ for "
        "every method). Presets: GA 4, KL 5, NPO 5.",
    )
    unlearn_lr: dict[str, float] = option(
        default_factory=dict,
        cli_type="multiple",
        parse="method_values",
        identity=False,
        help="METHOD=lr (repeatable; all=lr).",
    )
    unlearn_epochs: dict[str, int] = option(
        default_factory=dict,
        cli_type="multiple",
        parse="method_values",
        identity=False,
        help="METHOD=epochs (repeatable; all=N). Presets: GA 2, KL 2, NPO 3.",
    )
    clean_epochs: int | None = option(
        None, range=EPOCHS, help="Maximum epochs of the clean model's finetuning (stops early at 100% of the facts)."
    )
    corrupt_epochs: int | None = option(None, range=EPOCHS, help="Corruption epochs (RESTOR: 5).")
    corrupt_lr: float | None = option(None, range=LR, help="Corruption learning rate.")
    templates: int | None = option(
        None, range=TEMPLATES, help="Sentence templates per fact in the clean model's training text (default: all)."
    )
    n_retain: int = option(64, range=N_TEXTS, help="Retain documents (5 unrelated true-fact sentences each).")
    n_random: int = option(
        N_RANDOM,
        range=RANDOM_ANSWERS,
        help="Random plausible answers per fact for the log-probabilities (RESTOR Fig. 2: 15).",
    )

    def resolved_preset(self) -> str:
        """The preset name in use."""
        return self.preset or ("tiny" if self.model == "tiny" else "restor")

    def resolved_samples(self) -> int:
        """M in use: ``samples``, else the preset's (tiny 1, restor 3)."""
        if self.samples is not None:
            return self.samples
        return 1 if self.resolved_preset() == "tiny" else 3

    def resolve(self) -> None:
        """Check restor's own fields (:meth:`dukb.neural.runconfig.RunConfig.check` calls it once, after the
        shared ones and every range).

        Raises:
            InputError: no method, an unknown or repeated method, an unknown preset, sampling at temperature 0, a
                per-method value for another method or out of range, ``finetune_epochs`` and ``clean_epochs``
                both given and different; ``--probe-backend vllm`` (RESTOR samples its M generations with a seeded
                torch generator: its probes stay on hf).
        """
        if self.probe_backend != "hf":
            raise InputError(
                "dukb restor samples its probes with a seeded generator on hf: --probe-backend vllm "
                "serves the greedy probes of evaluate, muse, rwku and control"
            )
        if not self.methods:
            raise InputError("no unlearning method given (--methods ga,kl,npo)")
        for m in self.methods:
            if m not in RESTOR_METHODS:
                raise InputError(f"unknown method {m!r} for restor (choose from {', '.join(RESTOR_METHODS)})")
        if len(set(self.methods)) != len(self.methods):
            raise InputError("a method is listed twice in --methods")
        if self.resolved_samples() > 1 and self.temperature <= 0:
            raise InputError("--temperature must be > 0 when --samples > 1")
        if self.npo_form not in NPO_DOC_FORMS:
            raise InputError(f"unknown --npo-form {self.npo_form!r} (choose from {', '.join(NPO_DOC_FORMS)})")
        if self.resolved_preset() not in PRESET_NAMES:
            raise InputError(f"unknown preset {self.preset!r} (choose from {', '.join(PRESET_NAMES)})")
        for name, d in (
            ("--lambda", self.reg_weight),
            ("--unlearn-lr", self.unlearn_lr),
            ("--unlearn-epochs", self.unlearn_epochs),
        ):
            for m, v in d.items():
                if m not in RESTOR_METHODS:
                    raise InputError(f"{name}: unknown method {m!r}")
                METHOD_VALUE_RANGES[name].check(f"{name} {m}", v)
        if None not in (self.finetune_epochs, self.clean_epochs) and self.finetune_epochs != self.clean_epochs:
            raise InputError(
                f"--finetune-epochs {self.finetune_epochs} and --clean-epochs {self.clean_epochs} both "
                "set the clean model's epochs; give one"
            )

    def identity(self) -> dict:
        """The fields the clean, corrupted and probed models depend on (a rerun must agree on them), from their
        metadata (:func:`dukb.neural.declare.option`): ``identity=True`` always, samples and preset resolved; any
        other but False (the shared options restor took later: "set", "model") only when set (a compat component:
        when not at its ``unset`` value, dukb's default), so that a run written before them compares equal."""
        out = {}
        for f in fields(self):
            ident, v = f.metadata.get("identity", True), getattr(self, f.name)
            if ident is True or (ident is not False and v != f.metadata.get("unset", default_of(f))):
                out[f.name] = v
        return out | {"samples": self.resolved_samples(), "preset": self.resolved_preset()}

    def unlearn_setting(self, method: str) -> UnlearnSetting:
        """The resolved hyper-parameters of a method: the preset, with LoRA's learning rate scaled for full
        finetuning, then the explicit overrides."""
        p = _presets()[self.resolved_preset()]
        s = p["unlearn"][method]
        if not self.lora_r:
            s = replace(s, lr=s.lr * p["unlearn_full_lr_scale"])
        over = {}
        if self.lr is not None:  # --lr: every method's rate, below the per-method --unlearn-lr
            over["lr"] = float(self.lr)
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
            epochs = self.clean_epochs or self.finetune_epochs
            return replace(
                c,
                seed=self.seed,
                **({"epochs": epochs} if epochs else {}),
                **({"batch_size": self.batch_size} if self.batch_size else {}),
            )
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
