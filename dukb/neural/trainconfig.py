"""The optimisation settings of every training loop (:class:`TrainConfig`), in a module without torch, so that the
model-family registry (:mod:`dukb.neural.families`) and the CLI's help can read the presets without loading it.
:mod:`dukb.neural.train` (the one training loop) re-exports both names.

Source: Wu et al. 2025, App. H (the paper's defaults, noted per field).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from dukb import InputError

SCHEDULES = ("linear", "cosine", "constant")
#: how :func:`dukb.neural.methods.base.gradient_sweep` runs a grid of step counts T (``dukb evaluate --schedule``)
SWEEP_SCHEDULES = ("separate", "reference")
#: how the reinforced model is trained (``dukb evaluate --reinforce``; :func:`dukb.neural.methods.tv.reinforce`)
REINFORCE_SCHEDULES = ("constant", "reference")


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation hyper-parameters (AdamW), shared by every training loop.

    Attributes:
        epochs: passes over the data (the maximum when an early stop is given); for step-count loops (unlearning
            sweeps, reinforcement) the loop runs one epoch of ``steps`` optimiser steps.
        lr: peak learning rate. Default 2e-5 (Wu et al. 2025, App. H, GPT2-XL/Phi-1.5).
        batch_size: items (QA pairs or text rows) per micro-batch. Default 16 (Wu et al. 2025, App. H); 0 lets the
            caller choose (QA finetuning: ``n_items // 10`` clipped to [8, 64]).
        grad_accum: micro-batches per optimiser step; each micro-batch loss is divided by it. Default 1.
        weight_decay: AdamW's decoupled weight decay. Default 0.
        warmup: linear warm-up as a fraction of all optimiser steps, in [0, 1). Default 0.
        warmup_steps: linear warm-up in optimiser steps; when > 0 it replaces ``warmup``. Default 0.
        schedule: after warm-up, "linear" decay to 0 over all steps (HF's linear schedule, as the paper's code),
            "cosine" decay to 0, or "constant". Default linear.
        max_grad_norm: clip the gradient's global L2 norm to this before each step; 0 = no clipping. Default 0.
        eval_every: the caller's early-stop check runs every this many epochs (and after the last); 0 = never.
        target_accuracy: QA finetuning stops once probing finds this fraction of the facts known, in [0, 1].
        extra_epochs: QA finetuning only: when the scheduled ``epochs`` end below ``target_accuracy`` (a decayed
            rate can leave a few facts just short of greedy recall, and where it ends moves with the thread count
            and library versions), up to this many more epochs at the constant rate ``extra_lr``, with the same
            early stop. 0 = none (the paper's presets: a fixed number of epochs). Default 0.
        extra_lr: the constant learning rate of the extra epochs (> 0 when ``extra_epochs`` > 0).
        seed: seed of torch (dropout, LoRA) and of the data order.
    """

    epochs: int = 1
    lr: float = 2e-5
    batch_size: int = 16
    grad_accum: int = 1
    weight_decay: float = 0.0
    warmup: float = 0.0
    warmup_steps: int = 0
    schedule: str = "linear"
    max_grad_norm: float = 0.0
    eval_every: int = 0
    target_accuracy: float = 1.0
    extra_epochs: int = 0
    extra_lr: float = 0.0
    seed: int = 0

    def check(self) -> None:
        """Validate the settings.

        Raises:
            InputError: a negative count or rate, warm-up outside [0, 1), an unknown schedule.
        """
        if (
            self.epochs < 0
            or self.batch_size < 0
            or self.grad_accum < 1
            or not 0 <= self.warmup < 1
            or self.warmup_steps < 0
            or self.lr < 0
            or self.max_grad_norm < 0
            or self.weight_decay < 0
            or self.eval_every < 0
            or not 0 <= self.target_accuracy <= 1
            or self.extra_epochs < 0
            or self.extra_lr < 0
            or (self.extra_epochs and not self.extra_lr)
        ):
            raise InputError(f"bad training settings: {self}")
        if self.schedule not in SCHEDULES:
            raise InputError(f"unknown schedule {self.schedule!r} ({', '.join(SCHEDULES)})")

    def to_json(self) -> dict:
        """The config as a dict."""
        return asdict(self)


__all__ = ["SCHEDULES", "TrainConfig"]
