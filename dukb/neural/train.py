"""The one training loop of dukb, and the one place its optimisers are built.

Every optimisation dukb runs goes through :func:`train_loop` with a :class:`TrainConfig`:

- QA finetuning on the KB (:func:`dukb.neural.finetune.finetune`, data parallel under a launcher);
- the unlearning sweeps of the gradient methods (:func:`dukb.neural.methods.base.gradient_sweep`): T steps on the
  forget set (+ retain term) from θ₀;
- TV/WHP reinforcement (:func:`dukb.neural.methods.tv.reinforce`): 10 steps of gradient descent on the forget set;
- RESTOR's clean finetuning, corruption and document unlearning (:mod:`dukb.neural.docs`).

The defaults of :class:`TrainConfig` are documented there and nowhere else; each use names the settings it
changes (its preset).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch  # noqa: TID253 (a model module: reached only through a command's lazy import)
from rich.progress import Progress

from dukb.neural import distributed, tracking
from dukb.neural.trainconfig import TrainConfig


def build_optimizer(params, cfg: TrainConfig, total_steps: int):
    """AdamW over ``params`` and its learning-rate schedule: the only place dukb builds an optimiser.

    Args:
        params: the trainable parameters (list of tensors).
        cfg: :class:`TrainConfig` (lr, weight decay, schedule, warm-up).
        total_steps: optimiser steps the schedule spans (>= 1 is enforced).

    Returns:
        (torch.optim.AdamW, a ``torch.optim.lr_scheduler.LambdaLR`` from transformers' schedules).

    Raises:
        InputError: unknown schedule.
    """
    from transformers import (
        get_constant_schedule_with_warmup,
        get_cosine_schedule_with_warmup,
        get_linear_schedule_with_warmup,
    )

    cfg.check()
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    total = max(int(total_steps), 1)
    warm = cfg.warmup_steps or int(round(cfg.warmup * total))
    if cfg.schedule == "cosine":
        return opt, get_cosine_schedule_with_warmup(opt, warm, total)
    if cfg.schedule == "linear":
        return opt, get_linear_schedule_with_warmup(opt, warm, total)
    return opt, get_constant_schedule_with_warmup(opt, warm)


def steps_per_epoch(n_items: int, cfg: TrainConfig) -> int:
    """Optimiser steps of one pass over ``n_items`` in micro-batches of ``cfg.batch_size`` with accumulation."""
    micro = math.ceil(n_items / max(cfg.batch_size, 1))
    return math.ceil(micro / cfg.grad_accum)


def chunked(order: Sequence, cfg: TrainConfig) -> list[list[list]]:
    """Split an epoch's item order into optimiser steps of ``grad_accum`` micro-batches of ``batch_size`` items."""
    size = max(cfg.batch_size, 1)
    micro = [list(order[i : i + size]) for i in range(0, len(order), size)]
    return [micro[i : i + cfg.grad_accum] for i in range(0, len(micro), cfg.grad_accum)]


def train_loop(
    model,
    params,
    cfg: TrainConfig,
    steps: Callable[[int], Sequence[Sequence[Any]]],
    loss_fn: Callable[[Any, Any], Any],
    *,
    total_steps: int,
    prepare: Callable | None = None,
    backward: Callable | None = None,
    after_epoch: Callable[[int, dict], bool] | None = None,
    torch_seed: int | None = None,
    progress: str | None = None,
    start_epoch: int = 0,
    restore: dict | None = None,
    checkpoint: Callable[[int, dict], None] | None = None,
    checkpoint_every: int = 1,
    sharded: bool = False,
) -> dict:
    """Minimise ``loss_fn`` with AdamW: the loop every training in dukb runs.

    For epoch e = 1..``cfg.epochs``: ``steps(e)`` gives the epoch's optimiser steps, each a list of micro-batches
    (any objects ``loss_fn`` understands). For each micro-batch, ``loss_fn(fmodel, micro)`` returns a scalar loss
    tensor, or ``(loss, {name: scalar})`` with parts to log; ``loss / cfg.grad_accum`` is back-propagated. After
    the micro-batches of a step: gradient clipping (``cfg.max_grad_norm``), optimiser step, scheduler step, zeroed
    gradients. After each epoch the model is put in eval mode, the epoch's logs go to the run's tracker when one is
    open (:mod:`dukb.neural.tracking`, ``--log-with``), and ``after_epoch(e, logs)`` may stop training.

    Args:
        model: the module trained (put in train mode for each epoch, eval mode after).
        params: the parameters the optimiser updates.
        cfg: :class:`TrainConfig`.
        steps: epoch (1-based) -> list of optimiser steps, each a list of micro-batches. Called at the start of
            each epoch (so data order and sampling stay in the caller's seeded generators' order).
        loss_fn: (forward model, micro-batch) -> loss or (loss, parts).
        total_steps: optimiser steps the learning-rate schedule spans.
        prepare: optional ``(model, optimizer) -> (forward model, optimizer)`` (accelerate's ``prepare`` for
            data-parallel training); the scheduler stays on the unwrapped optimiser.
        backward: optional ``backward(loss)`` (accelerate's); default ``loss.backward()``.
        after_epoch: optional ``(epoch, logs) -> stop``; logs holds "loss" (mean micro-batch loss of the epoch) and
            the mean of each logged part.
        torch_seed: seed torch with this before training (default ``cfg.seed``).
        progress: description of a rich progress bar over the epochs (None: no bar).
        start_epoch: epochs already done (a resumed run): the loop runs epochs ``start_epoch + 1 .. cfg.epochs``.
        restore: with ``start_epoch``: ``{"optimizer": state_dict, "scheduler": state_dict, "rng": torch RNG state
            (ByteTensor)}`` saved by ``checkpoint``; torch's RNG is restored instead of seeded, so a resumed run
            continues exactly where the interrupted one was.
        checkpoint: optional ``(epoch, state)`` called after each epoch that did not stop training, with ``state``
            holding the optimizer's and scheduler's state dicts and torch's RNG state (what ``restore`` takes).
        checkpoint_every: call ``checkpoint`` after epochs divisible by this only (>= 1).
        sharded: ``prepare`` shards the model and optimiser (an FSDP2 launch): the optimiser state is restored
            after ``prepare`` and handed to ``checkpoint`` as full state dicts (``state["model"]`` too), gathered
            by torch's ``get_state_dict(full_state_dict=True, cpu_offload=True)``, a collective: under a sharded
            launch every process must pass a ``checkpoint`` (only process 0's state holds the tensors).

    Returns:
        Record: config, epochs_run, loss_per_epoch (mean micro-batch loss, the loss's unit), parts_per_epoch
        ({name: [mean per epoch]}), steps (optimiser steps taken), seconds.

    Raises:
        InputError: bad settings.
    """
    fmodel, opt, opt_, sched = _start_optimizer(model, params, cfg, total_steps, prepare, restore, torch_seed, sharded)
    clipped = _updated_params(opt)
    back = backward or (lambda loss: loss.backward())
    t0 = time.perf_counter()
    losses: list[float] = []
    parts: dict[str, list[float]] = {}
    n_steps = 0
    epoch = start_epoch
    with _epoch_bar(progress, cfg.epochs, start_epoch) as advance:
        for epoch in range(start_epoch + 1, cfg.epochs + 1):
            n_steps += _run_epoch(model, fmodel, steps, epoch, loss_fn, back, cfg, clipped, opt_, sched, losses, parts)
            advance()
            if _end_epoch(epoch, losses, parts, after_epoch):
                break
            if checkpoint is not None and epoch % max(1, checkpoint_every) == 0:
                checkpoint(epoch, _checkpoint_state(fmodel, opt, sched, sharded))
    model.eval()
    return _train_record(cfg, epoch, losses, parts, n_steps, time.perf_counter() - t0)


def _start_optimizer(
    model,
    params,
    cfg: TrainConfig,
    total_steps: int,
    prepare: Callable | None,
    restore: dict | None,
    torch_seed: int | None,
    sharded: bool,
):
    """Check ``cfg``, build the optimiser and scheduler (:func:`build_optimizer`), restore their states and torch's
    RNG from ``restore`` (else seed torch with ``torch_seed``, default ``cfg.seed``), then ``prepare`` (see
    :func:`train_loop`).

    Returns:
        (forward model, optimiser, prepared optimiser, scheduler): the optimiser unwrapped, whose parameters are
        clipped and whose state is checkpointed; the prepared one (the same without ``prepare``) steps.

    Raises:
        InputError: bad settings (:meth:`TrainConfig.check`).
    """
    cfg.check()
    opt, sched = build_optimizer(params, cfg, total_steps)
    if restore is not None:
        if not sharded:
            opt.load_state_dict(restore["optimizer"])
        sched.load_state_dict(restore["scheduler"])
        torch.set_rng_state(restore["rng"])
    else:
        torch.manual_seed(cfg.seed if torch_seed is None else torch_seed)
    fmodel, opt_ = prepare(model, opt) if prepare is not None else (model, opt)
    if restore is not None and sharded:  # the optimiser holds the sharded parameters only after prepare
        distributed.load_full_optimizer_state(fmodel, opt, restore["optimizer"])
    return fmodel, opt, opt_, sched


def _updated_params(opt) -> list:
    """The parameters the optimiser ``opt`` updates, whose gradients are clipped (FSDP2 replaces a module's
    parameters with sharded ones in ``prepare``: these are the optimiser's own)."""
    return [p for group in opt.param_groups for p in group["params"]]


def _end_epoch(epoch: int, losses: list[float], parts: dict, after_epoch: Callable[[int, dict], bool] | None) -> bool:
    """After an epoch: its logs (the mean loss and each part's mean) to the run's tracker when one is open
    (``--log-with``, :mod:`dukb.neural.tracking`), then ``after_epoch(epoch, logs)``; True when it stops training."""
    logs = {"loss": losses[-1], **{k: v[-1] for k, v in parts.items()}}
    tracking.log_epoch(logs)
    return after_epoch is not None and bool(after_epoch(epoch, logs))


@contextmanager
def _epoch_bar(progress: str | None, epochs: int, completed: int) -> Iterator[Callable[[], None]]:
    """A rich progress bar over the epochs described by ``progress`` (none when it is empty), shown while the
    ``with`` block runs; yields what advances it by one epoch."""
    if not progress:
        yield lambda: None
        return
    bar = Progress(transient=True)
    bar.start()
    task = bar.add_task(progress, total=epochs, completed=completed)
    try:
        yield lambda: bar.advance(task)
    finally:
        bar.stop()


def _checkpoint_state(fmodel, opt, sched, sharded: bool) -> dict:
    """What :func:`train_loop` hands its ``checkpoint`` after an epoch (and takes back as ``restore``): the
    optimiser's state (:func:`_state_dicts`), the scheduler's and torch's RNG state."""
    return {**_state_dicts(fmodel, opt, sharded), "scheduler": sched.state_dict(), "rng": torch.get_rng_state()}


def _train_record(cfg: TrainConfig, epochs_run: int, losses: list, parts: dict, n_steps: int, seconds: float) -> dict:
    """The record :func:`train_loop` returns (see there)."""
    return {
        "config": cfg.to_json(),
        "epochs_run": epochs_run,
        "loss_per_epoch": losses,
        "parts_per_epoch": parts,
        "steps": n_steps,
        "seconds": seconds,
    }


def _run_epoch(
    model,
    fmodel,
    steps: Callable[[int], Sequence[Sequence[Any]]],
    epoch: int,
    loss_fn: Callable[[Any, Any], Any],
    back: Callable,
    cfg: TrainConfig,
    clipped: list,
    opt_,
    sched,
    losses: list[float],
    parts: dict[str, list[float]],
) -> int:
    """Train one epoch of :func:`train_loop` (model in train mode, eval mode after): for each optimiser step of
    ``steps(epoch)``, back-propagate each micro-batch's loss (divided by ``cfg.grad_accum``), clip the gradients,
    step the optimiser and the scheduler, zero the gradients.

    Appends the epoch's mean micro-batch loss to ``losses`` and each logged part's mean to ``parts[name]``.

    Returns:
        The number of optimiser steps taken.
    """
    model.train()
    total, count, sums = 0.0, 0, {}
    n_steps = 0
    for step in steps(epoch):
        for micro in step:
            out = loss_fn(fmodel, micro)
            loss, logged = out if isinstance(out, tuple) else (out, {})
            back(loss / cfg.grad_accum if cfg.grad_accum != 1 else loss)
            total = total + loss.detach()  # stays on the device: one host sync per epoch
            count += 1
            for k, v in logged.items():
                sums[k] = sums.get(k, 0.0) + (v.detach() if hasattr(v, "detach") else v)
        if cfg.max_grad_norm:
            torch.nn.utils.clip_grad_norm_(clipped, cfg.max_grad_norm)
        opt_.step()
        sched.step()
        opt_.zero_grad(set_to_none=True)
        n_steps += 1
    losses.append(float(total) / max(count, 1))
    for k, v in sums.items():
        parts.setdefault(k, []).append(float(v) / max(count, 1))
    model.eval()
    return n_steps


def _state_dicts(fmodel, opt, sharded: bool) -> dict:
    """``{"optimizer": state dict}``, or under sharding ``{"model": ..., "optimizer": ...}`` as full state dicts
    on the CPU of process 0 (a collective; the other processes get empty dicts)."""
    if not sharded:
        return {"optimizer": opt.state_dict()}
    msd, osd = distributed.full_state_dicts(fmodel, opt)
    return {"model": msd, "optimizer": osd}


__all__ = ["build_optimizer", "chunked", "steps_per_epoch", "train_loop"]
