"""The common interface of unlearning methods and the shared gradient-update loop.

A sweep starts every setting from the finetuned weights θ₀: full-parameter methods restore a snapshot of θ₀; LoRA
methods re-initialise their adapters (θ₀ itself is frozen). The reference model f_ref (NPO, KLR) is θ₀: with LoRA it
is the same network with adapters disabled, otherwise a frozen copy.
"""

from __future__ import annotations

import abc
import contextlib
import copy
import math
import random
import re
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

import torch  # noqa: TID253 (a model module: reached only through a command's lazy import)

from dukb import InputError
from dukb.kb.csvfile import int_problem, strict_int
from dukb.neural.bounds import GRID_VALUE, LR
from dukb.neural.catalog import CONTROL_STRATEGIES  # control kind -> its strategy (lazy registry; keys: CONTROLS)
from dukb.neural.data import QAItem, encode_qa
from dukb.neural.probe import Predictor
from dukb.neural.scoring import forward_logits
from dukb.neural.train import TrainConfig, train_loop
from dukb.neural.trainconfig import SWEEP_SCHEDULES


@dataclass
class UnlearnContext:
    """What an unlearning sweep works on.

    Attributes:
        lm: the finetuned :class:`dukb.neural.spec.LoadedModel` (θ₀); left unchanged after a sweep.
        forget: QA items to forget (the target's QA, or a deep unlearning set's QA).
        retain: QA items for the retain regularisers (GDR/KLR), chosen by the caller.
        seed: seed for retain-batch sampling and torch.
        lr: learning rate of gradient methods (None: the method's preset for the model family).
        retain_batch_size: retain items per step.
        reg_weight: λ of the retain regulariser.
        lora: optional :class:`dukb.neural.spec.LoraSpec`: train adapters only.
        control: optional :class:`Control` (OC, ES or MM) applied to every gradient method by
            :func:`gradient_sweep` (None: uncontrolled, the grid is the number of steps).
        layers: optional inclusive range (first, last) of transformer blocks: partial-layer finetuning (RWKU,
            Jin et al. 2024, App. H: e.g. layers 0-3), every other parameter frozen (gradient methods).
        schedule: optional :class:`SweepSchedule`: how :func:`gradient_sweep` runs a grid of step counts (None:
            "separate", each T its own run from θ₀; "reference": Eval-DU's one checkpointed run).
        reinforce: how TV and WHP train their reinforced model (:data:`dukb.neural.trainconfig.REINFORCE_SCHEDULES`):
            "constant" (dukb's default) or "reference" (Eval-DU's finetune_reinforced_model.py).
        kb, closure, target, sets, items: the symbolic plan, for methods that consult the solver while they
            unlearn (closed-loop deep unlearning): the KB, its closure, the target's fact_id, its minimal deep
            unlearning sets (lists of fact_ids) and the KB's QA items. None for the other methods' callers.
    """

    lm: object
    forget: list[QAItem]
    retain: list[QAItem] = field(default_factory=list)
    seed: int = 0
    lr: float | None = None
    retain_batch_size: int = 8
    reg_weight: float = 1.0
    lora: object | None = None
    kb: object | None = None
    closure: object | None = None
    target: int | None = None
    sets: list | None = None
    items: list[QAItem] | None = None
    control: Control | None = None
    layers: tuple[int, int] | None = None
    schedule: SweepSchedule | None = None
    reinforce: str = "constant"

    @property
    def family(self) -> str:
        """Preset family of the model (tiny, smollm2, gpt2-xl, phi, llama, generic): selects presets
        (:attr:`dukb.neural.spec.ModelSpec.preset_family`)."""
        return self.lm.spec.preset_family


#: every kind :class:`SweepSchedule` runs: ``dukb evaluate``'s and MUSE's constant-rate run (``dukb muse``)
SCHEDULE_KINDS = (*SWEEP_SCHEDULES, "constant")
#: Eval-DU's unlearning run (wrh14/deep_unlearning forget.py, TrainingArguments): ``warmup_steps=max(1,
#: steps_per_epoch)`` = 1 (one step per epoch: the one target fact, batch 1 on each of 2 GPUs),
#: ``lr_scheduler_type="linear"`` over ``max_steps`` = the largest T, ``weight_decay`` 0.01
#: (config/forget_family.yaml), AdamW (``optim="paged_adamw_32bit"``).
REFERENCE_WARMUP_STEPS = 1
REFERENCE_WEIGHT_DECAY = 0.01


@dataclass(frozen=True)
class SweepSchedule:
    """How :func:`gradient_sweep` runs an uncontrolled grid of step counts T.

    - ``separate`` (dukb's earlier default; still that of ``dukb unlearn``, muse, rwku and control): each T is its
      own run from θ₀, its learning rate decaying linearly from ``lr`` to 0 over those T steps, no warm-up, no
      weight decay. A row depends on its own T alone.
    - ``reference`` (Eval-DU's code; ``dukb evaluate``'s default): **one** run of N = ``steps`` steps (None: the
      grid's largest T) from θ₀, read at every T of the grid (T = 0 is θ₀), as forget.py + unlearn_trainer.py of
      wrh14/deep_unlearning do: HF's linear schedule with 1 warm-up step over N steps, so the learning rate of step
      k (1-based) is **0 at step 1** (the warm-up step) and ``lr · (N − k + 1)/(N − 1)`` at k ≥ 2
      (transformers' ``get_linear_schedule_with_warmup(opt, 1, N)``, stepped after each optimiser step);
      AdamW (β = 0.9, 0.999, ε = 1e-8) with weight decay 0.01; checkpoints saved at global steps {1, 2, 4, 8, 16,
      32} (unlearn_trainer.py ``evaluate``). Step 1 therefore leaves the weights at θ₀ (only Adam's moments take
      the first gradient), and a row depends on N (recorded in its setting and in the run identity). As HF's
      Trainer, biases and LayerNorm/RMSNorm weights get no weight decay (:func:`hf_decay_names`); as under
      DeepSpeed (whose ds_config.json sets no ``gradient_clipping``), gradients are not clipped. The reference
      trains in bf16 with DeepSpeed ZeRO-3 on 2 GPUs, each on the same fact (the same gradient as one process).

    - ``constant`` (MUSE's code; ``dukb muse --unlearn-schedule constant``): one run of N steps from θ₀ read at each
      T, at a constant rate with no warm-up and no weight decay, gradients clipped at global norm 1: the defaults of
      the transformers Trainer that swj0419/muse_bench baselines/baselines/iterative.py:48-58 runs
      (``lr_scheduler_type='constant'``, ``save_strategy='epoch'``; ``max_grad_norm`` 1.0, ``weight_decay`` 0).

    Attributes:
        kind: one of :data:`SCHEDULE_KINDS`.
        steps: the reference or constant run's length N (None: the grid's largest T).

    Raises:
        InputError: unknown kind, steps < 1 (``check``).
    """

    kind: str = "separate"
    steps: int | None = None

    def check(self) -> SweepSchedule:
        """Validate (returns self)."""
        if self.kind not in SCHEDULE_KINDS:
            raise InputError(f"unknown schedule {self.kind!r} (choose from {', '.join(SCHEDULE_KINDS)})")
        if self.steps is not None and self.steps < 1:
            raise InputError(f"the reference schedule's run length must be at least 1 step, got {self.steps}")
        return self


def hf_decay_names(model) -> set[str]:
    """The parameters HF's Trainer applies weight decay to, by the rule of transformers 4.44 (Eval-DU's
    environment.yml; ``Trainer.get_decay_parameter_names``): every parameter except those of LayerNorm modules
    (``ALL_LAYERNORM_LAYERS``: ``nn.LayerNorm`` and the RMSNorm classes models register, e.g. Llama's) and those
    whose name contains "bias"."""

    exempt = {
        f"{mn}.{pn}" if mn else pn
        for mn, m in model.named_modules()
        if isinstance(m, torch.nn.LayerNorm) or type(m).__name__.endswith("RMSNorm")
        for pn, _ in m.named_parameters(recurse=False)
    }
    return {n for n, _ in model.named_parameters() if n not in exempt and "bias" not in n}


def decay_groups(named, decay: set[str]) -> list[dict]:
    """AdamW parameter groups as HF's Trainer builds them: the parameters of ``named`` ((name, parameter) pairs)
    whose name is in ``decay`` (:func:`hf_decay_names`) with the optimiser's weight decay, the others with none;
    empty groups left out."""
    groups = [
        {"params": [p for n, p in named if n in decay]},
        {"params": [p for n, p in named if n not in decay], "weight_decay": 0.0},
    ]
    return [g for g in groups if g["params"]]


def reference_train_config(cfg):
    """``cfg`` (a :class:`dukb.neural.train.TrainConfig`) with Eval-DU's optimiser settings: HF's linear schedule
    with :data:`REFERENCE_WARMUP_STEPS` warm-up step and weight decay :data:`REFERENCE_WEIGHT_DECAY` (see
    :class:`SweepSchedule`)."""
    return replace(
        cfg, schedule="linear", warmup=0.0, warmup_steps=REFERENCE_WARMUP_STEPS, weight_decay=REFERENCE_WEIGHT_DECAY
    )


#: controls of excessive unlearning (Wang et al. 2024, Sec. 5): the names of the registry's entries
CONTROLS = tuple(CONTROL_STRATEGIES)


@dataclass(frozen=True)
class Control:
    """A control of excessive unlearning, applied by :func:`gradient_sweep` to any gradient method
    (Wang et al. 2024, "Unlearning with Control", Sec. 5).

    - ``none``: the grid is the number of steps T; each T is its own run from θ₀ (the schedule spans T), or under
      the reference :class:`SweepSchedule` one run read at each T.
    - ``oc`` (objective capping, before unlearning): min −min(L_u, τ) + L_r. For any forget term, the step's
      forget term is dropped once the batch's unlearning risk L_u (the forget answers' NLL, nats per token) reaches
      τ; the grid is τ; each τ runs ``steps`` steps from θ₀. The cap is per batch (the paper does not say).
    - ``es`` (early stopping, during unlearning): one run of ``steps`` steps (the schedule spans it), evaluated at
      each T ≤ ``steps`` of the grid (checkpoints of the same run, whichever T are asked for); the grid is T.
    - ``mm`` (model mixing, after unlearning): θ_α = (1−α)·θ₀ + α·θ_u with θ_u after ``steps`` steps; no
      retraining per α; the grid is α ∈ [0, 1]. With LoRA only lora_B is mixed (lora_B₀ = 0), so that the weight
      delta is exactly α·ΔW.

    Attributes:
        kind: one of :data:`CONTROLS`.
        steps: the unlearning length T of OC, ES and MM runs (uncontrolled runs take T from the grid).

    Raises:
        InputError: unknown kind or steps < 1 (``check``).
    """

    kind: str = "none"
    steps: int = 16

    def check(self) -> Control:
        """Validate (returns self)."""
        if self.kind not in CONTROLS:
            raise InputError(f"unknown control {self.kind!r} (choose from {', '.join(CONTROLS)})")
        if self.steps < 1:
            raise InputError(f"control steps must be at least 1, got {self.steps}")
        return self

    @property
    def param(self) -> str:
        """The swept parameter of its strategy (:data:`CONTROL_STRATEGIES`): steps (none, es), tau (oc) or alpha
        (mm)."""
        return CONTROL_STRATEGIES[self.kind].param


@dataclass
class StepTerms:
    """One unlearning step's loss terms (what a gradient method's ``step_loss`` returns).

    Attributes:
        forget: the forget term to minimise (scalar tensor; GA: −L_u).
        risk: the unlearning risk L_u: mean NLL of the forget answers (scalar, nats per token; Wang et al. 2024,
            Eq. 6), used by OC and logged; None when the method does not compute it.
        retain: the weighted retain term λ·L_reg (scalar tensor) or None.
    """

    forget: object
    risk: object | None = None
    retain: object | None = None

    def total(self, tau: float | None = None):
        """forget (dropped when ``tau`` is set and risk ≥ τ: objective capping) + retain."""
        f = self.forget
        if tau is not None:
            if self.risk is None:
                raise InputError("objective capping needs the method's unlearning risk; this method reports none")
            if float(self.risk) >= tau:
                f = f * 0.0
        return f if self.retain is None else f + self.retain

    def parts(self) -> dict:
        """Floats to log: loss_forget, unlearning_risk, loss_retain (those present)."""

        def num(x):
            return float(x.detach()) if hasattr(x, "detach") else float(x)

        out = {"loss_forget": num(self.forget)}
        if self.risk is not None:
            out["unlearning_risk"] = num(self.risk)
        if self.retain is not None:
            out["loss_retain"] = num(self.retain)
        return out


class Method(abc.ABC):
    """An unlearning method (abstract: subclasses implement :meth:`sweep`; gradient methods declare their loss once
    in :class:`dukb.neural.methods.gradient.GradientMethod`, which implements it).

    Attributes:
        name: registry name (e.g. "ga", "npo_gdr").
        param: name of the swept hyper-parameter ("steps" or "alpha").
        default_grid: the paper's grid.
    """

    name: str = ""
    param: str = ""
    default_grid: tuple = ()
    #: the learning-rate kind of :data:`dukb.neural.families.LR_KINDS` the method's default rate comes from (None:
    #: no trained weights); the run identity records the resolved rate when it differs from the recorded one
    lr_kind: str | None = None
    #: one line for help texts and the methods reference table (`dukb methods`)
    summary: str = ""
    #: the paper or papers that define the method
    source: str = ""
    #: the forget term can also unlearn plain documents (RESTOR's document-level unlearning:
    #: :meth:`dukb.neural.methods.gradient.GradientMethod.step` at the token level)
    document_level: bool = False
    #: the method trains on retain data (``ctx.retain``): those facts are retain-train, never scored for accuracy
    uses_retain: bool = False
    #: the retain-train data excludes every fact of the target's cone (the method may unlearn any of them)
    retain_outside_cone: bool = False
    #: probe forms the method asks the model while it unlearns (closed-loop deep unlearning: "qa"); with the forms of
    #: the items it trains on they are the row's ``probe_forms_seen``, never its held-out forms
    queried_forms: tuple = ()
    #: probe forms of items the method builds and trains on itself, beyond its forget and retain data (RT's refusals
    #: of the forget facts' qa and reverse questions); also part of ``probe_forms_seen``
    trained_forms: tuple = ()

    #: hyper-parameters a run may set for this method alone (``--methods npo:beta=0.05``), besides ``lr``: names of
    #: attributes the method's loss reads; each value must be a finite number > 0 (≥ 0 for those in
    #: :attr:`nonnegative_options`)
    options: tuple = ()
    nonnegative_options: tuple = ()
    #: this method's own learning rate (``METHOD:lr=...``): it wins over the run's ``--lr`` and the family's rate
    #: (:func:`lr_for`); None: not set
    lr: float | None = None

    @property
    def option_values(self) -> dict:
        """The options this instance was given (name -> value, sorted; {} for the registry's own instance)."""
        return dict(getattr(self, "_option_values", {}))

    def with_options(self, values: dict) -> Method:
        """A copy of this method with per-method options set (``lr`` and the names in :attr:`options`).

        Args:
            values: option name -> value (floats).

        Returns:
            A shallow copy whose attributes are set and whose :attr:`option_values` records them; ``self`` when
            ``values`` is empty.

        Raises:
            InputError: an option the method does not have (the message lists its options), or a value that is not
                a finite number in range (above 0, or 0 where allowed; at most :data:`dukb.neural.bounds.LR`'s bound
                for ``lr``, :data:`~dukb.neural.bounds.GRID_VALUE`'s for the others).
        """
        if not values:
            return self
        allowed = (("lr",) if self.lr_kind else ()) + tuple(self.options)
        out = copy.copy(self)
        for key, value in values.items():
            if key not in allowed:
                raise InputError(f"{self.name} has no option {key!r} (its options: {', '.join(allowed) or 'none'})")
            low_ok = key in self.nonnegative_options
            if (
                not isinstance(value, (int, float))
                or isinstance(value, bool)
                or not math.isfinite(value)
                or value < 0
                or (value == 0 and not low_ok)
            ):
                raise InputError(
                    f"{self.name}: option {key} must be a finite number {'≥' if low_ok else '>'} 0, got {value!r}"
                )
            top = (LR if key == "lr" else GRID_VALUE).hi  # the bounds of --lr and of a grid value
            if value > top:
                raise InputError(f"{self.name}: option {key} must be at most {top:g}, got {value!r}")
            setattr(out, key, float(value))
        out._option_values = dict(sorted({**self.option_values, **values}.items()))
        return out

    @property
    def seen_forms(self) -> tuple:
        """The probe forms this method sees whatever its data: :attr:`queried_forms` and :attr:`trained_forms`
        (tuple of :data:`dukb.kb.probes.KINDS`)."""
        return tuple(dict.fromkeys((*self.queried_forms, *self.trained_forms)))

    @abc.abstractmethod
    def sweep(self, ctx: UnlearnContext, grid=None) -> Iterator[tuple[dict, Predictor]]:
        """Yield ``({param: value, ...}, predictor)`` for each grid value, each from θ₀.

        The predictor is valid until the next item is requested; after the generator is exhausted or closed, θ₀
        is restored.
        """

    @property
    def needs_reference(self) -> bool:
        """The forget term compares with the reference model f_ref (NPO, KL)."""
        return False

    def describe(self) -> dict:
        """JSON-able description (name, param, default grid, summary, source)."""
        return {
            "method": self.name,
            "param": self.param,
            "default_grid": list(self.default_grid),
            "summary": self.summary,
            "source": self.source,
        }


#: a decimal number as --grid takes it: ASCII digits, an optional point and exponent (no ``_``, ``+``, ``nan``, ``inf``)
_DECIMAL = re.compile(r"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")


def parse_grid(text: str, integer: bool = False) -> list:
    """Parse "1,2,4" into [1, 2, 4] (ints when ``integer``), for --grid METHOD=v1,v2.

    Integers are read strictly (:func:`dukb.kb.csvfile.strict_int`: ``-?[0-9]+`` in ASCII, at most 18 digits, so
    ``1_0`` and ``+1`` are refused); other values are decimal numbers in ASCII (``1e-3``, ``0.5``; not ``nan``,
    ``inf`` or ``1_0``).

    Raises:
        InputError: a value is not a number (an integer when ``integer``), or is negative.
    """

    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if integer:
            v = strict_int(part)
            if v is None:
                raise InputError(int_problem("grid value", part))
        else:
            v = float(part) if _DECIMAL.fullmatch(part) else None
            if v is None or not math.isfinite(v):
                raise InputError(f"grid value {part!r} is not a number (digits 0-9, a point, an exponent)")
        if v < 0:
            raise InputError(f"grid value {part!r} is negative")
        out.append(v)
    if not out:
        raise InputError(f"empty grid {text!r}")
    return out


# ----------------------------------------------------------------------------------------- weight handling ----
class WeightState:
    """Snapshot/restore of θ₀, and LoRA adapters, around a sweep.

    Args:
        lm: the loaded model.
        lora: :class:`dukb.neural.spec.LoraSpec` or None.
    """

    def __init__(self, lm, lora=None, seed: int = 0):
        self.lm = lm
        self.lora = lora
        self.base = lm.model
        self.peft = None
        self._snapshot = None
        self._adapter0 = None
        self._ref = None
        if lora is not None:
            from peft import LoraConfig, get_peft_model

            cfg = LoraConfig(
                r=lora.r,
                lora_alpha=lora.alpha,
                lora_dropout=lora.dropout,
                target_modules=list(lora.target_modules) if lora.target_modules else None,
                task_type="CAUSAL_LM",
                fan_in_fan_out=getattr(self.base.config, "model_type", "") == "gpt2",
            )

            torch.manual_seed(seed)  # adapter initialisation must not depend on what ran before
            with warnings.catch_warnings():  # peft 0.21 calls transformers' deprecated is_gradient_checkpointing
                warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
                self.peft = get_peft_model(self.base, cfg)
            self._adapter0 = {k: v.detach().clone() for k, v in self.peft.named_parameters() if v.requires_grad}
        else:
            self._snapshot = {k: v.detach().clone() for k, v in self.base.state_dict().items()}

    @property
    def model(self):
        """The trainable model (peft model with LoRA, else the base model)."""
        return self.peft if self.peft is not None else self.base

    def trainable(self) -> list:
        """Parameters the optimiser updates."""
        return [p for p in self.model.parameters() if p.requires_grad]

    def reset(self) -> None:
        """Back to θ₀ (LoRA: adapters back to their initialisation)."""

        with torch.no_grad():
            if self.peft is not None:
                params = dict(self.peft.named_parameters())
                for k, v in self._adapter0.items():
                    params[k].copy_(v)
            else:
                self.base.load_state_dict(self._snapshot)

    def ref_logits(self, batch):
        """Logits of θ₀ (f_ref) on a batch, without gradients."""

        with torch.no_grad():
            if self.peft is not None:
                with self.peft.disable_adapter():
                    return forward_logits(self.peft, batch)
            if self._ref is None:
                self._ref = copy.deepcopy(self.base).eval()
                for p in self._ref.parameters():
                    p.requires_grad_(False)
            return forward_logits(self._ref, batch)

    def close(self) -> None:
        """Restore θ₀ and remove LoRA layers, leaving ``lm.model`` as it was."""
        self.reset()
        if self.peft is not None:
            self.lm.model = self.peft.unload()
            self.peft = None
        self._ref = None
        self.lm.model.eval()

    def predictor(self) -> Predictor:
        """A :class:`Predictor` over the current weights."""
        self.model.eval()
        return Predictor(self.model, self.lm.tokenizer, self.lm.tags, device=self.lm.device)


def retain_batches(ctx: UnlearnContext, n: int) -> list[list[QAItem]]:
    """``n`` retain batches of ``ctx.retain_batch_size`` items sampled with ``ctx.seed`` (empty if no retain set)."""
    if not ctx.retain:
        return [[] for _ in range(n)]
    rng = random.Random(ctx.seed)
    k = min(ctx.retain_batch_size, len(ctx.retain))
    return [rng.sample(ctx.retain, k) for _ in range(n)]


_LAYER = re.compile(r"(?:^|\.)(?:h|layers|layer|blocks)\.(\d+)\.")


def layer_index(name: str) -> int | None:
    """The transformer-block index in a parameter name (``transformer.h.3.attn...`` -> 3,
    ``model.layers.12.mlp...`` -> 12), or None outside the blocks (embeddings, final norm, head)."""
    m = _LAYER.search(name)
    return int(m.group(1)) if m else None


def select_layers(model, layers: tuple[int, int] | None) -> list:
    """Partial-layer finetuning: freeze every trainable parameter outside blocks ``layers`` = (first, last),
    inclusive, and return the (name, parameter) pairs left trainable (RWKU, Jin et al. 2024, App. H).

    Args:
        model: the module; layers: (first, last) or None (every trainable parameter).

    Returns:
        list of (name, parameter).

    Raises:
        InputError: an empty range, a range past the model's last block, or no trainable parameter in it.
    """
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if layers is None:
        return named
    lo, hi = layers
    if lo < 0 or hi < lo:
        raise InputError(f"layer range {lo}-{hi} is empty (first <= last, both >= 0)")
    keep = [(n, p) for n, p in named if (i := layer_index(n)) is not None and lo <= i <= hi]
    blocks = sorted({i for n, _ in named if (i := layer_index(n)) is not None})
    if not keep or hi > blocks[-1]:
        raise InputError(
            f"no trainable parameter in layers {lo}-{hi} (the model's blocks: "
            f"{blocks[0] if blocks else '-'}..{blocks[-1] if blocks else '-'})"
        )
    kept = {id(p) for _, p in keep}
    for _n, p in named:
        if id(p) not in kept:
            p.requires_grad_(False)
    return keep


@contextlib.contextmanager
def trainable_layers(model, layers: tuple[int, int] | None):
    """Context manager: the parameters to train under partial-layer finetuning (:func:`select_layers`), with
    every parameter it froze made trainable again on exit.

    Yields:
        list of parameters.

    Raises:
        InputError: as :func:`select_layers`.
    """
    frozen = {id(p) for p in model.parameters() if not p.requires_grad}
    try:
        yield [p for _, p in select_layers(model, layers)]
    finally:
        for p in model.parameters():
            if id(p) not in frozen:
                p.requires_grad_(True)


def mix_weights(named, start: dict, end: dict, alpha: float) -> None:
    """Model mixing in place: p = start + α (end − start) for each (name, p) of ``named`` (Wang et al. 2024,
    Sec. 5, MM: θ_α = (1−α)θ_o + αθ_u); LoRA's lora_A is set to its end value (with lora_B₀ = 0, mixing lora_B
    alone scales the weight delta B·A by exactly α)."""

    with torch.no_grad():
        for n, p in named:
            if "lora_A" in n:
                p.copy_(end[n])
            else:
                p.copy_((start[n] + alpha * (end[n] - start[n])).to(p.device))


class SweepRun:
    """The machinery one gradient sweep shares between its control strategies: θ₀'s weight state, the forget batch,
    the optimiser settings, and three operations (:meth:`run`, :meth:`out`, :meth:`read_at`).

    Args:
        ctx: the unlearning context (model, forget and retain data, LoRA, layers, seed).
        grid: the sweep's grid values.
        lr: the learning rate (per step, AdamW).
        step_loss: ``step_loss(state, forget_batch, retain_items)`` -> :class:`StepTerms` or a scalar loss.
        schedule: the rate's schedule over a run ("linear" or "constant").
    """

    def __init__(self, ctx: UnlearnContext, grid, lr: float, step_loss: Callable, schedule: str = "linear"):

        self.ctx, self.grid, self.lr, self.step_loss = ctx, grid, lr, step_loss
        self.state = WeightState(ctx.lm, ctx.lora, ctx.seed)
        self.frozen_before = {id(p) for p in self.state.model.parameters() if not p.requires_grad}
        self.forget_batch = encode_qa(ctx.lm.tokenizer, ctx.lm.tags, ctx.forget, ctx.lm.device)
        self.cfg = TrainConfig(epochs=1, lr=lr, batch_size=len(ctx.forget), schedule=schedule, seed=ctx.seed)

    def run(self, T: int, tau: float | None = None, checkpoints=(), tcfg=None, decay=None) -> tuple[dict, dict]:
        """T steps from θ₀ (optimiser settings ``tcfg``, default the sweep's; with ``decay``, a set of parameter
        names, weight decay on those alone; with ``tau``, objective capping); returns (risk curve, {step: trainable
        snapshot} at ``checkpoints``)."""

        state, ctx = self.state, self.ctx
        state.reset()
        if T == 0:  # θ₀ itself
            return {}, {}
        named = select_layers(state.model, ctx.layers)
        batches = retain_batches(ctx, T)
        snaps: dict = {}

        def loss_fn(_m, retain_items):
            out = self.step_loss(state, self.forget_batch, retain_items)
            terms = out if isinstance(out, StepTerms) else StepTerms(out)
            return terms.total(tau), terms.parts()

        def after(e, _logs):
            if e in checkpoints:  # kept on the CPU: one snapshot per checkpoint
                snaps[e] = {n: p.detach().to("cpu", copy=True) for n, p in named}
            return False

        # AdamW parameter groups with ``decay``: HF's, the exempt ones without weight decay
        params = [p for _, p in named] if decay is None else decay_groups(named, decay)
        rec = train_loop(
            state.model,
            params,
            replace(tcfg or self.cfg, epochs=T),
            lambda e: [[batches[e - 1]]],
            loss_fn,
            total_steps=T,
            after_epoch=after,
        )
        self.unfreeze()
        curve = {k: [round(v, 6) for v in vals] for k, vals in rec.get("parts_per_epoch", {}).items()}
        return curve, snaps

    def out(self, setting: dict, curve: dict) -> tuple[dict, Predictor]:
        """(setting, a predictor over the current weights with the run's risk curve in its meta)."""
        pred = self.state.predictor()
        pred.meta["risk_curve"] = curve
        return setting, pred

    def read_at(self, n: int, what: str, extra: dict, **run_kw):
        """One run of ``n`` steps, its model read at each T of the grid (checkpoints).

        Raises:
            InputError: a T of the grid beyond ``n``.
        """
        steps = sorted({int(T) for T in self.grid})
        if steps and steps[-1] > n:
            raise InputError(f"{what} at step {steps[-1]} of a {n}-step run")
        curve, snaps = self.run(n, checkpoints=set(steps), **run_kw)
        named = select_layers(self.state.model, self.ctx.layers)
        for T in steps:
            if T == 0:
                self.state.reset()
            else:
                mix_weights(named, snaps[T], snaps[T], 1.0)
            yield self.out({"steps": T, "lr": self.lr, **extra}, {k: v[:T] for k, v in curve.items()})

    def unfreeze(self) -> None:
        """Undo the partial-layer freeze."""
        for p in self.state.model.parameters():
            if id(p) not in self.frozen_before:
                p.requires_grad_(True)

    def close(self) -> None:
        """Undo the freeze and restore θ₀."""
        self.unfreeze()
        self.state.close()


def gradient_sweep(
    ctx: UnlearnContext, grid, lr: float, step_loss: Callable, schedule: str = "linear"
) -> Iterator[tuple[dict, Predictor]]:
    """Shared loop of the gradient methods, and the one place where controls and partial-layer finetuning apply.

    Each step is ``step_loss(state, forget_batch, retain_items)`` -> :class:`StepTerms` (or a scalar loss tensor),
    minimised with AdamW (:func:`dukb.neural.train.train_loop`, one optimiser step per epoch so that the per-step
    terms are logged); the learning rate decays linearly to 0 over the run (HF's linear schedule, as in the paper)
    or stays constant (``schedule="constant"``). ``ctx.control`` (:class:`Control`) picks the strategy
    (:data:`CONTROL_STRATEGIES`) that decides what the grid means: uncontrolled (and ES) the number of steps T, OC
    the cap τ, MM the mixing weight α. ``ctx.layers`` restricts training to a block range. Uncontrolled,
    ``ctx.schedule`` (:class:`SweepSchedule`) decides how the steps are run: "separate" (default) runs each T from
    θ₀ with the rate decaying over those T steps; "reference" runs once for N steps with Eval-DU's warm-up, decay
    over N and weight decay (:func:`reference_train_config`) and reads the weights at each T.

    Yields:
        (setting, predictor); setting holds steps and lr, and for a control: control, tau / alpha, es_steps; under
        the reference schedule: schedule ("reference") and schedule_steps (N).
        ``predictor.meta["risk_curve"]`` holds the run's per-step loss_forget, unlearning_risk and loss_retain
        lists (Wang et al. 2024, Fig. 1).

    Raises:
        InputError: a control needs what the method does not report (OC: the unlearning risk), a bad layer range,
            an MM α outside [0, 1], an ES step beyond ``control.steps``, a reference-schedule T beyond its N, the
            reference schedule with a control.

    Source: Wu et al. 2025, App. H (unlearning steps T ∈ {1, 2, 4, 8, 16}, AdamW, linear schedule); Wang et al.
    2024, Sec. 5 (OC, ES, MM); Jin et al. 2024 (RWKU), App. H (partial-layer finetuning); wrh14/deep_unlearning
    forget.py and unlearn_trainer.py (the reference schedule, :class:`SweepSchedule`).
    """
    control = (ctx.control or Control()).check()
    sched = (ctx.schedule or SweepSchedule()).check()
    if sched.kind == "reference" and control.kind != "none":
        raise InputError(f"the reference schedule is for uncontrolled sweeps; the {control.kind} control runs its own")
    r = SweepRun(ctx, grid, lr, step_loss, schedule)
    try:
        yield from CONTROL_STRATEGIES[control.kind].sweep(r, control, sched)
    finally:
        r.close()


def lr_for(ctx: UnlearnContext, presets: dict[str, float], method: Method | None = None) -> float:
    """The learning rate: the method's own (``METHOD:lr=...``, :meth:`Method.with_options`) if set, else ``ctx.lr``
    (the run's ``--lr``) if set, else the preset for the model family (generic as fallback)."""
    if method is not None and method.lr is not None:
        return method.lr
    if ctx.lr is not None:
        return ctx.lr
    return presets.get(ctx.family, presets["generic"])
