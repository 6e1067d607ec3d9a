"""Task vector negation (TV; Ilharco et al. 2023), as in Wu et al. 2025 Sec. 4.

The reinforced model f_overfit is the finetuned model θ₀ trained 10 more steps on the forget QA (AdamW at
:data:`REINFORCE_LR` of the model family: the paper's finetuning rates for its families; 1e-3 for the tiny
model; 1e-5 for SmolLM2, the unlearning rate measured for it, since its finetuning rate 2e-4 over-shoots), at a
constant rate by default or on Eval-DU's schedule (:func:`reinforce`, ``dukb evaluate --reinforce``); the task vector
is Δ = θ_overfit − θ₀ and the unlearned model is θ(α) = θ₀ − α · Δ, swept over α ∈ {0.2, 0.5, 1, 5, 10}
({0.2, 1, 5, 10, 30, 60, 80} for GPT2-XL). With LoRA the reinforcement trains adapters and Δ is their merged weight
delta.
"""

from __future__ import annotations

import torch  # noqa: TID253 (a model module: reached only through a command's lazy import)

from dukb import InputError
from dukb.neural.data import encode_qa
from dukb.neural.families import family_lrs
from dukb.neural.methods.base import (
    Method,
    UnlearnContext,
    WeightState,
    decay_groups,
    hf_decay_names,
    lr_for,
    reference_train_config,
    trainable_layers,
)
from dukb.neural.methods.retain import gdr_loss
from dukb.neural.probe import Predictor
from dukb.neural.scoring import forward_logits
from dukb.neural.train import TrainConfig, train_loop
from dukb.neural.trainconfig import REINFORCE_SCHEDULES

REINFORCE_STEPS = 10
#: learning rates of the reinforcement by model family (:data:`dukb.neural.families.FAMILIES`).
REINFORCE_LR = family_lrs("reinforce")
ALPHA_GRID = (0.2, 0.5, 1.0, 5.0, 10.0)
ALPHA_GRID_GPT2XL = (0.2, 1.0, 5.0, 10.0, 30.0, 60.0, 80.0)


def reinforce(
    ctx: UnlearnContext, steps: int = REINFORCE_STEPS, lr: float | None = None, schedule: str | None = None
) -> dict:
    """Train θ₀ ``steps`` AdamW steps on the forget QA (one batch of all of it per step) and return the reinforced
    full state dict (merged, for LoRA). θ₀ is restored afterwards.

    Schedules (``schedule``, default ``ctx.reinforce``; :data:`REINFORCE_SCHEDULES`):

    - ``constant`` (dukb's default): the rate ``lr`` at every step, no warm-up, no weight decay.
    - ``reference``: as wrh14/deep_unlearning finetune_reinforced_model.py:63-87 with
      config/finetune_reinforced_model_per_fact.yaml (``num_epochs: 10``, ``lr_scheduler_type: linear``,
      ``weight_decay: 0.01``, the family's ``reinforce_lr``): ``max_steps`` = 10 × 1 fact = 10 and
      ``warmup_steps=max(1, max_steps // num_epochs)`` = 1, so HF's linear schedule with 1 warm-up step over the 10
      steps: the rate of step k (1-based) is 0 at k = 1 and ``lr · (10 − k + 1)/9`` at k ≥ 2, summing to 5 · lr
      against the constant schedule's 10 · lr; AdamW with weight decay 0.01 on HF's decay parameters
      (:func:`dukb.neural.methods.base.hf_decay_names`), no gradient clipping (the same optimiser settings as the
      reference unlearning schedule, :func:`dukb.neural.methods.base.reference_train_config`). The reference
      reinforces the target fact alone (its ``unlearn_data_id``); dukb trains on ``ctx.forget``.

    Args:
        ctx: the unlearning context (θ₀, the forget QA, seed, LoRA, layers).
        steps: optimiser steps; lr: the peak rate (None: :func:`lr_for` over :data:`REINFORCE_LR`).
        schedule: "constant", "reference" or None (``ctx.reinforce``).

    Returns:
        dict name -> tensor of f_overfit's weights (same keys as ``ctx.lm.model.state_dict()``).

    Raises:
        InputError: an unknown schedule.

    Source: Wu et al. 2025, Sec. 4 and App. H ("10 more iterations on the target data point"); Ilharco et al. 2023.
    """

    schedule = schedule or ctx.reinforce
    if schedule not in REINFORCE_SCHEDULES:
        raise InputError(f"unknown reinforcement schedule {schedule!r} (choose from {', '.join(REINFORCE_SCHEDULES)})")
    lr = lr if lr is not None else lr_for(ctx, REINFORCE_LR)
    state = WeightState(ctx.lm, ctx.lora, ctx.seed)
    batch = encode_qa(ctx.lm.tokenizer, ctx.lm.tags, ctx.forget, ctx.lm.device)
    try:
        cfg = TrainConfig(epochs=1, lr=lr, batch_size=len(ctx.forget), schedule="constant", seed=ctx.seed)
        with trainable_layers(state.model, ctx.layers) as params:  # partial-layer finetuning, when asked for
            if schedule == "reference":
                cfg = reference_train_config(cfg)
                named = [(n, p) for n, p in state.model.named_parameters() if p.requires_grad]
                params = decay_groups(named, hf_decay_names(state.model))
            train_loop(
                state.model,
                params,
                cfg,
                lambda _e: [[None]] * steps,
                lambda m, _: gdr_loss(forward_logits(m, batch), batch["labels"]),
                total_steps=steps,
            )
        state.model.eval()
        if state.peft is not None:
            # merged weights of base + adapter, without touching the base
            with torch.no_grad():
                merged = {}
                state.peft.merge_adapter()
                for k, v in state.peft.get_base_model().state_dict().items():
                    if "lora_" not in k:
                        merged[k.replace(".base_layer", "")] = v.detach().clone()
                state.peft.unmerge_adapter()
            return merged
        return {k: v.detach().clone() for k, v in state.base.state_dict().items()}
    finally:
        state.close()


def reinforce_setting(ctx: UnlearnContext) -> dict:
    """The reinforcement's part of a TV or WHP row's setting: ``reinforce_steps``, and ``reinforce`` = "reference"
    under Eval-DU's schedule (absent under the constant one, so that earlier rows read as before)."""
    return {"reinforce_steps": REINFORCE_STEPS, **({"reinforce": ctx.reinforce} if ctx.reinforce != "constant" else {})}


def task_vector_weights(theta0: dict, theta_overfit: dict, alpha: float) -> dict:
    """θ(α) = θ₀ − α (θ_overfit − θ₀) for every floating-point tensor (others copied from θ₀).

    Args:
        theta0, theta_overfit: state dicts with the same keys; alpha: α ≥ 0.

    Returns:
        A new state dict. α = 0 gives θ₀ exactly.
    """
    out = {}
    for k, v in theta0.items():
        if v.is_floating_point() and k in theta_overfit:
            out[k] = v - alpha * (theta_overfit[k].to(v.dtype) - v)
        else:
            out[k] = v
    return out


class TaskVector(Method):
    """TV over α."""

    name = "tv"
    param = "alpha"
    lr_kind = "reinforce"  # its default rate: :func:`dukb.neural.families.family_lrs`
    default_grid = ALPHA_GRID
    summary = "task vector negation: θ₀ − α (θ_reinforced − θ₀)"
    source = "Ilharco et al. 2023; Wu et al. 2025, Sec. 4"

    def sweep(self, ctx: UnlearnContext, grid=None):

        if grid is None:
            grid = ALPHA_GRID_GPT2XL if ctx.family == "gpt2-xl" else ALPHA_GRID
        overfit = reinforce(ctx, lr=self.lr)
        model = ctx.lm.model
        theta0 = {k: v.detach().clone() for k, v in model.state_dict().items()}
        try:
            for alpha in grid:
                with torch.no_grad():
                    model.load_state_dict(task_vector_weights(theta0, overfit, float(alpha)))
                model.eval()

                yield (
                    {"alpha": float(alpha), **reinforce_setting(ctx)},
                    Predictor(model, ctx.lm.tokenizer, ctx.lm.tags, device=ctx.lm.device),
                )
        finally:
            with torch.no_grad():
                model.load_state_dict(theta0)
