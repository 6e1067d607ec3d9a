"""The common interface of unlearning methods and the shared gradient-update loop.

A sweep starts every setting from the finetuned weights θ₀: full-parameter methods restore a snapshot of θ₀; LoRA
methods re-initialise their adapters (θ₀ itself is frozen). The reference model f_ref (NPO, KLR) is θ₀: with LoRA it
is the same network with adapters disabled, otherwise a frozen copy.
"""

from __future__ import annotations

import abc
import copy
import random
from dataclasses import dataclass, field
from typing import Callable, Iterator

from dukb import InputError
from dukb.neural.data import QAItem, encode_qa
from dukb.neural.probe import Predictor


@dataclass
class UnlearnContext:
    """What an unlearning sweep works on.

    Attributes:
        lm: the finetuned :class:`dukb.neural.models.LoadedModel` (θ₀); left unchanged after a sweep.
        forget: QA items to forget (the target's QA, or a deep unlearning set's QA).
        retain: QA items for the retain regularisers (GDR/KLR), chosen by the caller.
        seed: seed for retain-batch sampling and torch.
        lr: learning rate of gradient methods (None: the method's preset for the model family).
        retain_batch_size: retain items per step.
        reg_weight: λ of the retain regulariser.
        lora: optional :class:`dukb.neural.spec.LoraSpec`: train adapters only.
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

    @property
    def family(self) -> str:
        """Preset family of the model (tiny, smollm2, gpt2-xl, phi, llama, generic): selects presets
        (:attr:`dukb.neural.spec.ModelSpec.preset_family`)."""
        return self.lm.spec.preset_family


class Method(abc.ABC):
    """An unlearning method (abstract: subclasses implement :meth:`sweep`).

    Attributes:
        name: registry name (e.g. "ga", "npo_gdr").
        param: name of the swept hyper-parameter ("steps" or "alpha").
        default_grid: the paper's grid.
    """

    name: str = ""
    param: str = ""
    default_grid: tuple = ()
    #: one line for help texts and README's method table
    summary: str = ""
    #: the paper or papers that define the method
    source: str = ""
    #: the forget term can also unlearn plain documents (RESTOR's document-level unlearning, :meth:`forget_loss`)
    document_level: bool = False
    #: the method trains on retain data (``ctx.retain``): those facts are retain-train, never scored for accuracy
    uses_retain: bool = False
    #: the retain-train data excludes every fact of the target's cone (the method may unlearn any of them)
    retain_outside_cone: bool = False

    @abc.abstractmethod
    def sweep(self, ctx: UnlearnContext, grid=None) -> Iterator[tuple[dict, Predictor]]:
        """Yield ``({param: value, ...}, predictor)`` for each grid value, each from θ₀.

        The predictor is valid until the next item is requested; after the generator is exhausted or closed, θ₀
        is restored.
        """

    def forget_loss(self, logits, ref_logits, labels, level: str = "sequence", **options):
        """The forget term to *minimise* on a batch (gradient methods with ``document_level``).

        Args:
            logits: [B, L, V] of the model being unlearned; ref_logits: [B, L, V] of the reference (None when the
                method needs none); labels: [B, L], -100 where no loss.
            level: "sequence" (a QA answer or document is one unit) or "token" (RESTOR's token-level averaging).
            options: method-specific settings (NPO: ``beta``).

        Returns:
            Scalar tensor.

        Raises:
            NotImplementedError: the method has no differentiable forget term (TV, WHP).
        """
        raise NotImplementedError(f"{self.name} has no forget loss")

    @property
    def needs_reference(self) -> bool:
        """The forget term compares with the reference model f_ref (NPO, KL)."""
        return False

    def describe(self) -> dict:
        """JSON-able description (name, param, default grid, summary, source)."""
        return {"method": self.name, "param": self.param, "default_grid": list(self.default_grid),
                "summary": self.summary, "source": self.source}


def parse_grid(text: str, integer: bool = False) -> list:
    """Parse "1,2,4" into [1, 2, 4] (ints when ``integer``), for --grid METHOD=v1,v2.

    Raises:
        InputError: a value is not a number, or is negative.
    """
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            v = int(part) if integer else float(part)
        except ValueError:
            raise InputError(f"grid value {part!r} is not {'an integer' if integer else 'a number'}") from None
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

            cfg = LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                             target_modules=list(lora.target_modules) if lora.target_modules else None,
                             task_type="CAUSAL_LM",
                             fan_in_fan_out=getattr(self.base.config, "model_type", "") == "gpt2")
            import torch

            torch.manual_seed(seed)  # adapter initialisation must not depend on what ran before
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
        import torch

        with torch.no_grad():
            if self.peft is not None:
                params = dict(self.peft.named_parameters())
                for k, v in self._adapter0.items():
                    params[k].copy_(v)
            else:
                self.base.load_state_dict(self._snapshot)

    def ref_logits(self, batch):
        """Logits of θ₀ (f_ref) on a batch, without gradients."""
        import torch

        from dukb.neural.scoring import forward_logits

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


def gradient_sweep(ctx: UnlearnContext, steps_grid, lr: float,
                   step_loss: Callable, schedule: str = "linear") -> Iterator[tuple[dict, Predictor]]:
    """Shared loop of the gradient methods: for each T in ``steps_grid``, from θ₀, T AdamW steps (one
    :func:`dukb.neural.train.train_loop` epoch of T steps) on ``step_loss(state, forget_batch, retain_items) ->
    scalar loss``; the learning rate decays linearly to 0 over the T steps (HF's linear schedule, as in the paper)
    or stays constant (``schedule="constant"``).

    Yields:
        ({"steps": T, "lr": lr}, predictor).

    Source: Wu et al. 2025, App. H (unlearning steps T ∈ {1, 2, 4, 8, 16}, AdamW, linear schedule).
    """
    from dukb.neural.train import TrainConfig, train_loop

    state = WeightState(ctx.lm, ctx.lora, ctx.seed)
    forget_batch = encode_qa(ctx.lm.tokenizer, ctx.lm.tags, ctx.forget, ctx.lm.device)
    cfg = TrainConfig(epochs=1, lr=lr, batch_size=len(ctx.forget), schedule=schedule, seed=ctx.seed)
    try:
        for T in steps_grid:
            T = int(T)
            state.reset()
            batches = retain_batches(ctx, T)
            train_loop(state.model, state.trainable(), cfg, lambda _e, b=batches: [[r] for r in b],
                       lambda _m, retain_items: step_loss(state, forget_batch, retain_items), total_steps=T)
            yield {"steps": T, "lr": lr}, state.predictor()
    finally:
        state.close()


def lr_for(ctx: UnlearnContext, presets: dict[str, float]) -> float:
    """The learning rate: ``ctx.lr`` if set, else the preset for the model family (generic as fallback)."""
    if ctx.lr is not None:
        return ctx.lr
    return presets.get(ctx.family, presets["generic"])
