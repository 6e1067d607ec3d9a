"""The run configuration every protocol shares: KB, rules, model, finetuning, LoRA, partial layers, dtype, device,
prompt, gradient checkpointing, remote code, batch size, seed, learning rate, trackers and the unlearned models kept
(``--save-models``).

:class:`RunConfig` is the base of ``EvaluateConfig``, ``MuseConfig``, ``RwkuConfig``, ``ControlConfig`` and
``RestorConfig``: each protocol inherits the same fields with the same meaning and checks, and builds its model, its
loading options and the model part of its run identity from the config object it runs (never from copies of the
defaults). Each field
declares its option in its metadata (:func:`dukb.neural.declare.option`: flag, help, range, group "shared"), from
which every protocol command's options, the ``--config`` keys and the docs' table of shared options are generated.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar

from dukb import InputError
from dukb.kb.csvfile import strict_int
from dukb.neural.bounds import (
    BATCH_SIZE,
    DTYPES,
    EPOCHS,
    LAYER,
    LORA_ALPHA,
    LORA_DROPOUT,
    LORA_R,
    LR,
    SEED,
    check_device,
    check_dtype,
    check_ranges,
    field_range,
)
from dukb.neural.declare import SHARED, Frozen, apply_compat, default_of, flag_of, freeze, group_fields, help_of, option
from dukb.neural.modelrecord import model_kb, spec_for_path
from dukb.neural.probe_backends import PROBE_BACKEND_HELP, PROBE_BACKENDS, check_probe_backend
from dukb.neural.savedmodels import SAVE_MODELS_HELP, SAVE_MODES
from dukb.neural.spec import PROMPT_PRESETS, LoraSpec, ModelSpec, check_chat_model
from dukb.neural.tables import Table
from dukb.neural.tracking import check_log_with
from dukb.neural.zoo import check_model_value
from dukb.solver.rules import RULES_HELP, default_rules

#: the help of ``--heldout-rule`` (every command that scores rows on held-out forms: evaluate, unlearn, control)
HELDOUT_RULE_HELP = (
    "What still counts as known on the held-out forms: 'pairs' (after unlearning, probe the form-fact "
    "pairs that elicited their fact before; a fact is known while one still does; cheap) or 'any' "
    "(probe every held-out form; known while any does, also one that did not before; the stricter "
    "worst case). Facts no held-out form elicited before are left unscored under both."
)


def heldout_forms_help(scored: str, seen: str) -> str:
    """The help of a ``--heldout-forms`` option.

    Args:
        scored: what the forms score, e.g. "every row is also scored on (recall_heldout)"; seen: the forms they
            must avoid, e.g. "the forms a method trains on or queries (qa for every built-in method)".
    """
    return (
        f"Probe forms {scored}: comma-separated kinds or groups of `dukb probes --kinds`, disjoint from {seen}. "
        "Default: every form that asks for a fact except those."
    )


def parse_layers(text: str | None) -> tuple[int, int] | None:
    """Parse a block range "FIRST-LAST" (inclusive, e.g. "0-3") or a single block "5" for partial-layer finetuning;
    None or "" gives None (every layer). Block numbers are read strictly (:func:`dukb.kb.csvfile.strict_int`:
    ASCII digits, no ``_`` or ``+``).

    Returns:
        (first, last) transformer block indices, or None.

    Raises:
        InputError: not of that form, negative, LAST < FIRST, or LAST past :data:`dukb.neural.bounds.LAYER`.

    Source: Jin et al. 2024 (RWKU), App. H (partial-layer finetuning).
    """

    if text is None or not str(text).strip():
        return None
    lo, _, hi = str(text).strip().partition("-")
    a, b = strict_int(lo.strip()), strict_int((hi or lo).strip())
    if a is None or b is None:
        raise InputError(f"--layers must be FIRST-LAST (e.g. 0-3), got {text!r}")
    if a < 0 or b < a:
        raise InputError(f"--layers {text!r}: need 0 <= FIRST <= LAST")
    LAYER.check("--layers LAST", b)
    return a, b


@dataclass
class RunConfig(Frozen):
    """The options every protocol shares (inherited by each protocol's config dataclass).

    A protocol with compat presets (``--compat``: the settings of a paper's released code) declares them in its
    class's ``COMPAT`` table (preset -> {field: value}) and a ``compat`` field
    (:func:`dukb.neural.declare.compat_option`); :meth:`check` resolves them first
    (:func:`dukb.neural.declare.apply_compat`).

    Attributes:
        kb: KB directory or built-in name (None: with ``finetuned``, the KB the model records, else the built-in
            generated default, 100 people, seed 0); :meth:`check_run` sets it to the model's KB.
        rules: rule set name ("family") or a .lp file (None: the KB's own, resolved by :meth:`check_run` with
            :func:`dukb.solver.rules.default_rules`: its rules.lp when its directory has a schema.yaml, else
            "family").
        model: "tiny", a short name (``smollm2-135m``), a .gguf file or a folder holding one, hub id or directory
            to finetune; ignored when ``finetuned`` is set.
        finetuned: an already finetuned model directory (refused when it records another KB than ``kb``).
        allow_kb_mismatch: accept a ``finetuned`` model that records another KB (a warning instead of the refusal).
        seed: the run's seed.
        lr: learning-rate override of gradient methods (None: the family preset's).
        device: "auto", "cpu", "cuda" or "cuda:N"; dtype: "auto", "float32", "bfloat16" or "float16".
        prompt: prompt preset (None: chosen from the model).
        finetune_epochs: override of the finetuning preset's epoch budget (>= 1).
        batch_size: finetuning batch size (>= 1; None: the preset's).
        lora_r: LoRA rank for finetuning and every gradient method (0: full-parameter training); lora_alpha,
            lora_dropout (in [0, 1)), lora_targets (module names; None: peft's default for the architecture).
        layers: partial-layer finetuning for every gradient method, "FIRST-LAST" blocks (None: every layer).
        gradient_checkpointing: trade compute for memory (does not change results).
        trust_remote_code: let transformers run model code from the hub (off by default).
        log_with: experiment trackers for the training losses and the rows, ``NAME[,NAME]``
            (:func:`dukb.neural.tracking.trackers`; None: none).
        save_models: "none", "best" or "all": which unlearned models are kept under RUN_DIR/models
            (:mod:`dukb.neural.savedmodels`; what ``best`` selects is each protocol's
            :meth:`dukb.neural.protocols.base.Protocol.save_layout`); not part of the run identity.
        probe_backend: what generates the probe's answers: "hf" (transformers) or "vllm"
            (:mod:`dukb.neural.probe_backends`); in the run identity only when not "hf".

    Source: Hu et al. 2022 (LoRA); Jin et al. 2024 (RWKU), App. H (partial layers).
    """

    kb: str | None = option(
        None,
        group=SHARED,
        help="KB directory or built-in name; default: with --finetuned, the KB "
        "the model was finetuned on (its dukb_model.json), else the built-in generated KB (100 "
        "people, seed 0).",
    )
    rules: str | None = option(None, group=SHARED, identity="rules", help=RULES_HELP)
    model: str = option(
        "tiny",
        group=SHARED,
        help="Model to finetune on the KB: 'tiny' (built-in default), a known "
        "short name (smollm2-135m), a .gguf file or a folder holding one, hub id or directory.",
    )
    finetuned: str | None = option(
        None,
        group=SHARED,
        help="Use this already finetuned model directory instead of "
        "finetuning --model. A model finetuned on another KB than --kb is refused (exit 2).",
    )
    allow_kb_mismatch: bool = option(
        False,
        group=SHARED,
        identity=False,
        help="Accept a model finetuned on another "
        "KB than --kb (the kb_sha256 its dukb_model.json records): a warning instead of "
        "the refusal (exit 2); recorded in a run's config.",
    )
    seed: int = option(
        0,
        group=SHARED,
        range=SEED,
        help="Run seed: targets, splits, retain sampling, tiny initialisation, finetuning order.",
    )
    lr: float | None = option(
        None, group=SHARED, range=LR, help="Learning rate of gradient methods (default: the model family's preset)."
    )
    device: str = option(
        "auto",
        group=SHARED,
        parse="device",
        help="auto (cuda if available), cpu, cuda, cuda:N or "
        "mps, checked against what torch reports (cuda:N below the number of CUDA devices; mps where "
        "torch has it).",
    )
    dtype: str = option(
        "auto",
        group=SHARED,
        parse="dtype",
        choices=DTYPES,
        help="auto (bf16 on CUDA, else fp32), float32, bfloat16, float16.",
    )
    prompt: str | None = option(
        None,
        group=SHARED,
        help="Prompt preset: gpt2-xl, phi, llama, generic, tiny, or chat: the "
        "tokenizer's chat template, for instruct models (default: chosen from the model).",
    )
    finetune_epochs: int | None = option(
        None,
        group=SHARED,
        range=EPOCHS,
        help="Maximum finetuning epochs (default: "
        "the model family's preset; finetuning stops once the model answers every "
        "fact).",
    )
    batch_size: int | None = option(
        None,
        group=SHARED,
        range=BATCH_SIZE,
        help="Finetuning batch size (default: the preset's; the paper's 16 for real models).",
    )
    lora_r: int = option(
        0,
        group=SHARED,
        identity="model",
        range=LORA_R,
        help="LoRA rank for finetuning and every gradient method (0: full-parameter training).",
    )
    lora_alpha: int = option(16, group=SHARED, identity="model", range=LORA_ALPHA, help="LoRA alpha.")
    lora_dropout: float = option(0.0, group=SHARED, identity="model", range=LORA_DROPOUT, help="LoRA dropout.")
    lora_targets: list[str] | None = option(
        None,
        group=SHARED,
        identity="model",
        parse="lora_targets",
        help="Comma-separated LoRA module names (default: peft's for the architecture).",
    )
    layers: str | None = option(
        None,
        group=SHARED,
        identity="model",
        parse="layers",
        help="Partial-layer finetuning "
        "for every gradient method: FIRST-LAST transformer blocks, e.g. 0-3 (RWKU's App. H; "
        "default: every layer).",
    )
    gradient_checkpointing: bool = option(
        False, group=SHARED, identity=False, help="Trade compute for memory on large models (does not change results)."
    )
    trust_remote_code: bool = option(
        False, group=SHARED, identity=False, help="Allow model code from the hub (off by default)."
    )
    probe_backend: str = option("hf", group=SHARED, identity="set", choices=PROBE_BACKENDS, help=PROBE_BACKEND_HELP)
    COMPAT: ClassVar[dict[str, dict[str, Any]]] = {}

    log_with: str | None = option(
        None,
        group=SHARED,
        identity=False,
        help="Log every training's losses per epoch "
        "and every result row to experiment trackers through accelerate, NAME[,NAME]: aim, "
        "clearml, comet_ml, dvclive, mlflow, swanlab, tensorboard (RUN_DIR/tensorboard), "
        "trackio, wandb; each needs its package. Changes no result.",
    )

    save_models: str = option("none", group=SHARED, identity=False, choices=SAVE_MODES, help=SAVE_MODELS_HELP)

    def check(self):
        """Validate and resolve this config once: the resolved plan every stage consumes.

        Returns:
            a frozen copy (:func:`dukb.neural.declare.freeze`) with the shared fields checked and resolved
            (:meth:`check_run`) and the protocol's own (:meth:`resolve`); a config already checked is returned as
            it is (never checked twice). The config given is left as it was.

        Raises:
            InputError: see :meth:`check_run` and the protocol's :meth:`resolve`.
        """
        if self.checked:
            return self
        plan = dataclasses.replace(self)
        apply_compat(plan, type(plan).COMPAT)
        plan.check_run()
        plan.resolve()
        return freeze(plan)

    def resolve(self) -> None:
        """Check and resolve the protocol's own fields in place (each protocol's config overrides it; called once,
        by :meth:`check`, after :meth:`check_run`)."""

    def check_run(self) -> None:
        """Validate the shared fields (:meth:`check` calls this first); with ``finetuned``, check ``kb`` against the
        KB the model was finetuned on, or set ``kb`` to it when None (:func:`dukb.neural.modelrecord.model_kb`).

        Raises:
            InputError: an unknown prompt preset; ``--prompt chat`` for the tiny model (no chat template,
                :func:`dukb.neural.spec.check_chat_model`); a field outside its range (:mod:`dukb.neural.bounds`: seed,
                lr, finetune_epochs, batch_size, LoRA, and the protocol's own bounded fields); a device torch does
                not report (:func:`dukb.neural.bounds.check_device`) or an unknown dtype; a bad ``layers`` range; an
                unknown or uninstalled tracker; a probe backend that cannot run here
                (:func:`dukb.neural.probe_backends.check_probe_backend`); a ``model`` (without ``finetuned``) that is
                neither ``tiny``, a known name, an existing path nor a well-formed, cached or reachable hub id
                (:func:`dukb.neural.zoo.check_model_value`); a ``finetuned`` model finetuned on another KB than ``kb`` (unless
                ``allow_kb_mismatch``), or whose recorded KB no longer exists.
        """

        if self.prompt is not None and self.prompt not in PROMPT_PRESETS:
            raise InputError(f"unknown --prompt {self.prompt!r} (choose from {', '.join(PROMPT_PRESETS)})")
        if self.finetuned is None:
            check_chat_model(self.prompt, self.model)
        check_ranges(self)  # every bounded field, the protocol's own included (dukb.neural.bounds)
        check_device(self.device)
        check_dtype(self.dtype)
        check_probe_backend(self.probe_backend, self.device, self.lora_r)
        self._layers = parse_layers(self.layers)  # read by layer_range: the stages never parse it again
        check_log_with(self.log_with)
        if self.save_models not in SAVE_MODES:
            raise InputError(f"--save-models must be one of {', '.join(SAVE_MODES)}, got {self.save_models!r}")
        self.lora()
        if self.finetuned is None:  # (with --finetuned, --model is not read; the directory is checked below)
            check_model_value(self.model)
        if self.finetuned:
            self.kb = model_kb(self.finetuned, self.kb, allow_mismatch=self.allow_kb_mismatch)
        if self.rules is None:  # after the KB is known (a finetuned model's): its own rules.lp, else family
            self.rules = default_rules(self.kb)

    def lora(self):
        """The :class:`dukb.neural.spec.LoraSpec` of this run (None without LoRA).

        Raises:
            InputError: rank, alpha or dropout outside its range (:data:`dukb.neural.bounds.LORA_R`, ...).
        """

        for name in ("lora_r", "lora_alpha", "lora_dropout"):
            rng = field_range(RunConfig, name)
            rng.check("--" + name.replace("_", "-"), getattr(self, name))
        if not self.lora_r:
            return None
        return LoraSpec(
            self.lora_r, self.lora_alpha, self.lora_dropout, tuple(self.lora_targets) if self.lora_targets else None
        )

    def layer_range(self) -> tuple[int, int] | None:
        """``layers`` as (first, last) transformer blocks, or None (every layer): as :meth:`check` parsed it
        (:func:`parse_layers`); a config not checked (e.g. one a protocol builds for another's identity) parses it
        here."""
        return self.__dict__["_layers"] if self.checked else parse_layers(self.layers)

    def model_spec(self, path: str | None = None):
        """The :class:`dukb.neural.spec.ModelSpec` to finetune (``model``), to load (``finetuned``) or of ``path``,
        with this run's dtype, device, prompt, LoRA, gradient checkpointing and remote-code setting."""
        kw = self.load_kwargs()
        prompt = kw.pop("prompt")
        src = path or self.finetuned or self.model
        if src == "tiny":
            return ModelSpec("tiny", prompt=prompt or "tiny", **kw)
        return spec_for_path(src, prompt=prompt, **kw)

    def load_kwargs(self) -> dict:
        """Keyword arguments of :func:`dukb.neural.pipeline.load_finetuned` for this run's model options."""
        return dict(
            dtype=self.dtype,
            device=self.device,
            prompt=self.prompt,
            lora=self.lora(),
            trust_remote_code=self.trust_remote_code,
            gradient_checkpointing=self.gradient_checkpointing,
        )

    def unlearn_kwargs(self) -> dict:
        """Keyword arguments of :class:`dukb.neural.methods.UnlearnContext` for LoRA and partial layers."""
        return {"lora": self.lora(), "layers": self.layer_range()}

    def model_identity(self) -> dict:
        """The row-changing model options beyond the model's own fingerprint (part of every run identity): the
        LoRA adapter and the trained layers. Keys are absent at their defaults, so an identity written before
        these options existed compares equal."""
        lora = self.lora()
        out = {}
        if lora is not None:
            out["lora"] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(lora).items()}
        if self.layers:
            out["layers"] = list(self.layer_range())
        return out

    def backend_identity(self) -> dict:
        """The probe backend's part of a run identity: ``{"probe_backend": "vllm"}``, empty for "hf" (so that runs
        made before the option existed compare equal). Not part of :meth:`model_identity`: the finetuned model does
        not depend on it (finetuning's early-stopping probe stays on hf)."""
        return {"probe_backend": self.probe_backend} if self.probe_backend != "hf" else {}

    def identity_settings(self, exclude=()) -> dict:
        """This config's fields for a run identity's ``settings``: every field but ``exclude`` and the shared
        fields that are recorded elsewhere or change no row (:func:`not_settings`: their field metadata's
        ``identity``; LoRA and layers go to :meth:`model_identity`), so an identity written before the shared options
        existed compares equal."""
        skip = set(exclude) | set(not_settings(type(self)))
        return {k: v for k, v in asdict(self).items() if k not in skip}

    @classmethod
    def shared_fields(cls) -> list[str]:
        """Names of the fields :class:`RunConfig` defines (every protocol's config has them)."""
        return [f.name for f in fields(RunConfig)]


def not_settings(cls=None) -> list[str]:
    """The fields a run identity's ``settings`` leave out, from their metadata
    (:func:`dukb.neural.declare.option`'s ``identity``): those recorded under another identity key (the rule set's
    fingerprint is ``rules``; LoRA and layers are :meth:`RunConfig.model_identity`) and those that change no row
    (``identity=False``: the KB's fingerprint is the identity's ``kb``, so ``allow_kb_mismatch`` need not be)."""
    return [f.name for f in fields(cls or RunConfig) if f.metadata.get("identity", True) is not True]


def options_table() -> Table:
    """The shared options' reference table (flag, default, meaning), generated from :class:`RunConfig`'s field
    metadata (`dukb methods`, the docs' reference/protocols page)."""
    rows = []
    for f in group_fields(RunConfig, SHARED):
        d = default_of(f)
        rows.append((flag_of(f), "" if d is None else ("off" if d is False else str(d)), help_of(f)))
    return Table(
        "Shared options",
        ("option", "default", "meaning"),
        tuple(rows),
        "Options every protocol command (`evaluate`, `muse`, `rwku`, `control`, `restor`) and `unlearn` take.",
    )


def run_kwargs(**values) -> dict:
    """The shared options of a command's parameters, ready for a protocol config: comma-separated
    ``lora_targets`` split into a list, ``layers`` checked (:func:`parse_layers`); names not in
    :class:`RunConfig` are left out.

    Raises:
        InputError: a bad ``layers`` range; an empty item in ``lora_targets``.
    """
    names = set(RunConfig.shared_fields())
    out = {k: v for k, v in values.items() if k in names}
    t = out.get("lora_targets")
    if isinstance(t, str):
        out["lora_targets"] = split_lora_targets(t)
    parse_layers(out.get("layers"))
    return out


def split_lora_targets(text: str | None) -> list[str] | None:
    """``--lora-targets``' comma-separated module names as a list (None: none given).

    Raises:
        InputError: an empty item (``q_proj,,v_proj``).
    """
    if text is None:
        return None
    if text.strip() and any(not x.strip() for x in text.split(",")):
        raise InputError(f"--lora-targets {text!r} has an empty item; separate the module names by single commas")
    return [x.strip() for x in text.split(",") if x.strip()] or None


__all__ = [
    "HELDOUT_RULE_HELP",
    "RunConfig",
    "heldout_forms_help",
    "not_settings",
    "options_table",
    "parse_layers",
    "run_kwargs",
    "split_lora_targets",
]
