"""Finetuning a causal LM on the KB as question answering (Wu et al. 2025, App. H).

QA format (question4/answer4), loss on the answer tokens only, AdamW with a linear schedule. Presets: the paper's
(batch 16, lr 2e-5 for GPT2-XL/Phi-1.5 or 1e-5 for Llama, 10 epochs, 15 for GPT2-XL) and ``tiny`` for the built-in
default model. Training stops early once probing finds 100% of the facts known (checked every ``eval_every``
epochs).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from dataclasses import replace
from pathlib import Path

import torch  # noqa: TID253 (a model module: reached only through a command's lazy import)

from dukb import InputError
from dukb.neural import distributed as dist
from dukb.neural.data import TEXT_KIND, QAItem, encode_qa
from dukb.neural.families import finetune_presets
from dukb.neural.probe import Predictor, probe
from dukb.neural.run.files import read_json, refuse_links, write_json_atomic
from dukb.neural.run.provenance import device_info, thread_info, versions
from dukb.neural.scoring import forward_logits, sequence_logprob
from dukb.neural.train import TrainConfig, train_loop

_log = logging.getLogger(__name__)


#: QA finetuning presets by model family (:class:`dukb.neural.train.TrainConfig`; early stop at 100% checked every
#: ``eval_every`` epochs), a view of :data:`dukb.neural.families.FAMILIES`, which notes each preset's source (the
#: paper's, Wu et al. 2025, App. H; ``tiny`` and ``smollm2`` measured by dukb, bench/RESULTS.md).
FINETUNE_PRESETS: dict[str, TrainConfig] = finetune_presets()


def _trim(batch: dict) -> dict:
    """Drop left-padding columns that are padding in every row of a batch."""
    keep = int(batch["attention_mask"].sum(0).nonzero()[0])
    return {k: v[:, keep:] for k, v in batch.items()}


def _local_slice(idx: list[int], r: int, n: int) -> list[int]:
    """Rank ``r``'s contiguous part of a global batch ``idx`` split into ``n`` near-equal parts (may be empty)."""
    size, extra = divmod(len(idx), n)
    lo = r * size + min(r, extra)
    return idx[lo : lo + size + (1 if r < extra else 0)]


def answer_token_loss(model, batch, n_tokens: int, scale: float = 1.0):
    """Summed answer-token NLL of ``batch`` divided by ``n_tokens``, times ``scale``.

    With ``n_tokens`` = the batch's own answer-token count and ``scale`` = 1 this is HF's causal-LM loss (mean NLL
    over answer tokens). Data parallel: ``n_tokens`` = the *global* batch's count and ``scale`` = world size, so the
    gradients DDP averages over processes sum to the single-process gradient of the global batch.

    Args:
        model: causal LM.
        batch: :func:`dukb.neural.data.encode_qa` batch ([B, L] tensors).
        n_tokens: normaliser (tokens, > 0).
        scale: multiplier.

    Returns:
        scalar tensor (nats per token).

    Auxiliary losses a model adds to ``out.loss`` (mixture-of-experts router losses) are not included.

    Source: Wu et al. 2025, App. H (finetuning loss on the answer tokens).
    """

    logp, _ = sequence_logprob(forward_logits(model, batch), batch["labels"])
    return -logp.sum() * (scale / n_tokens)


def finetune(
    lm,
    items: list[QAItem],
    config: TrainConfig,
    progress: bool = False,
    log=None,
    checkpoint_dir=None,
    say_shortfall: bool = True,
) -> dict:
    """Finetune ``lm.model`` in place on QA items (through :func:`dukb.neural.train.train_loop`).

    Runs data parallel when launched with several processes (accelerate launch / torchrun, see
    :mod:`dukb.neural.distributed`): each global batch of ``config.batch_size`` items is split over the processes
    and the gradient equals the single-process one (exactly for models without dropout, up to the all-reduce's
    rounding in the parameter dtype); the early-stopping probe is split too. Under an FSDP2 launch
    (:func:`dukb.neural.distributed.is_sharded`) accelerate shards the model and optimiser, the batches are split
    the same way, every process probes every item in lockstep, and checkpoints hold full state dicts. Without a
    launcher it is a plain single-device loop. Models with parameters unused in a forward pass (mixture of experts)
    are not supported under DDP.

    Args:
        lm: :class:`dukb.neural.spec.LoadedModel` (with LoRA adapters if its spec asks for them).
        items: the QA items to learn (the paper: every KB fact's question4/answer4 pair); :data:`TEXT_KIND` items
            are trained on every token and left out of the accuracy.
        config: :class:`dukb.neural.train.TrainConfig` (a :data:`FINETUNE_PRESETS` entry); gradient accumulation
            is not used here (one global batch is one step).
        progress, log: show a rich progress bar; optional callable(str) for one-line reports (main process only).
        checkpoint_dir: where to keep :data:`CHECKPOINT` (None: no checkpoint). After every probed epoch
            (``config.eval_every``) the model, optimiser, schedule, data order and RNG states are written there
            (atomically); a later call with the same items, settings, model and world size continues from it
            exactly (the result equals an uninterrupted run's), and the file is removed when training ends.
        say_shortfall: say :func:`shortfall_line` (on ``log``, else the logger) when training ends short.

    Returns:
        A JSON-able record: config, seed, epochs run, final accuracy (fraction of items known, in [0, 1]),
        target_accuracy, reached_target (accuracy >= target), mean loss per epoch (nats per answer token), seconds,
        versions, device, world size, parallelism ("none", "ddp" or "fsdp2").

    Raises:
        ValueError: ``items`` is empty.
        InputError: bad settings; a checkpoint in ``checkpoint_dir`` made with other settings, or unreadable; LoRA
            adapters under an FSDP launch.

    Source: Wu et al. 2025, App. H (QA format, loss on the answer, batch 16, linear schedule).
    """
    config = _finetune_config(items, config)
    world, me, main = dist.world_size(), dist.rank(), dist.is_main_process()
    log = log if main else None  # one process reports
    acc_ = dist.accelerator(lm.device)
    sharded = _sharded(lm)
    model = lm.model
    # the data order has its own generator, shared by all processes
    gen = torch.Generator().manual_seed(config.seed)
    # accuracy is judged on the QA items; plain texts (TEXT_KIND, MUSE's verbatim corpus) are trained only
    probed = [it for it in items if it.kind != TEXT_KIND]
    accuracy = _accuracy_probe(lm, probed, sharded)
    loss_fn = _batch_loss(lm, items, me, world)
    state = {"acc": None}

    steps = _epoch_order(len(items), config.batch_size, gen)
    losses: list[float] = []
    ckpt = _open_checkpoint(lm, items, config, checkpoint_dir, world, sharded, main)
    if ckpt.data is not None:
        ckpt.restore(model, gen, losses, state, log)

    run = _runner(
        lm, len(items), config, steps, loss_fn, ckpt, (gen, losses, state), accuracy, log, acc_, progress and main
    )
    try:
        rec, extra = _phases(run, config, state, ckpt, log)
    finally:
        acc_.free_memory()  # drop accelerate's references to the DDP wrapper and optimizer
    ckpt.clear()
    acc = state["acc"] if state["acc"] is not None else accuracy()
    epochs_run = rec["epochs_run"] + (extra["epochs_run"] if extra else 0)
    if acc < config.target_accuracy and main and say_shortfall:
        (log or _log.warning)(shortfall_line(acc, len(probed), epochs_run, config.target_accuracy))
    return _finetune_record(lm, len(items), config, (rec, extra), acc, losses, world, sharded, ckpt.resumed_after)


def _finetune_record(
    lm,
    n_items: int,
    config: TrainConfig,
    phases: tuple,
    acc: float,
    losses: list[float],
    world: int,
    sharded: bool,
    resumed_after,
) -> dict:
    """The record :func:`finetune` returns (its Returns section describes the keys).

    Args:
        lm: the finetuned :class:`dukb.neural.spec.LoadedModel`.
        n_items: the number of items finetuned on.
        config: the settings finetuned with (batch size resolved).
        phases: ``(rec, extra)``: the main phase's :func:`train_loop` record and the extra phase's (or None).
        acc: the final accuracy, in [0, 1].
        losses: the mean loss per epoch (nats per answer token).
        world, sharded: the number of processes and whether the model was sharded (FSDP2).
        resumed_after: the epoch a checkpoint was resumed after (None: not resumed).
    """
    rec, extra = phases
    epochs_run = rec["epochs_run"] + (extra["epochs_run"] if extra else 0)
    return {
        "config": rec["config"],
        "seed": config.seed,
        "epochs_run": epochs_run,
        "accuracy": acc,
        "target_accuracy": config.target_accuracy,
        "reached_target": acc >= config.target_accuracy,
        "extra_epochs_run": extra["epochs_run"] if extra else 0,
        "n_items": n_items,
        "loss_per_epoch": losses,
        "seconds": rec["seconds"] + (extra["seconds"] if extra else 0.0),
        "versions": versions(),
        "threads": thread_info(),
        "device": device_info(lm.device),
        "world_size": world,
        "parallelism": "fsdp2" if sharded else ("ddp" if world > 1 else "none"),
        "model": lm.spec.to_json(),
        "resumed_after_epoch": resumed_after,
    }


def _finetune_config(items: list[QAItem], config: TrainConfig) -> TrainConfig:
    """The configuration :func:`finetune` trains with: ``config`` with a batch size of 8 to 64 (a tenth of the
    items) when it gives none, and no gradient accumulation (one global batch is one step).

    Raises:
        ValueError: ``items`` is empty.
    """
    if not items:
        raise ValueError("no QA items to finetune on")
    if config.batch_size <= 0:
        config = replace(config, batch_size=min(64, max(8, len(items) // 10)))
    return replace(config, grad_accum=1)


def _open_checkpoint(lm, items, config: TrainConfig, directory, world: int, sharded: bool, main: bool) -> _Checkpoint:
    """The finetuning's checkpoint in ``directory`` (None: none), keyed by its items, settings, model and world
    size (:func:`_checkpoint_key`), written after every probed epoch. Under sharding every process gathers the
    checkpoint's state (a collective); process 0 writes it."""
    return _Checkpoint(
        directory,
        _checkpoint_key(lm, items, config, world, sharded),
        config.eval_every if main or sharded else 0,
        write=main,
    )


def _epoch_order(n_items: int, batch_size: int, gen: torch.Generator):
    """The data order of :func:`finetune`: ``steps(epoch)`` draws a permutation of the items from ``gen`` (the
    generator shared by all processes) and cuts it into global batches of ``batch_size`` item indices, one
    micro-batch per step (a list of one list)."""

    def steps(_epoch):
        perm = torch.randperm(n_items, generator=gen).tolist()
        return [[perm[i : i + batch_size]] for i in range(0, len(perm), batch_size)]

    return steps


def _runner(
    lm, n_items: int, config: TrainConfig, steps, loss_fn, ckpt, progress_state: tuple, accuracy, log, acc_, show
):
    """:func:`finetune`'s phase runner (:func:`_phase_runner`) over ``n_items`` items, with its early-stopping hook
    (:func:`_epoch_stopper`: ``accuracy`` probed every ``config.eval_every`` epochs, reported on ``log``);
    ``progress_state``: (data-order generator, losses per epoch, state); ``show``: a progress bar."""
    _gen, losses, state = progress_state
    stopper = _epoch_stopper(lm.device, dist.world_size(), losses, state, accuracy, log)
    return _phase_runner(
        lm.model,
        steps,
        loss_fn,
        stopper,
        ckpt,
        progress_state,
        accelerator=acc_,
        rank=dist.rank(),
        show=show,
        steps_per_epoch=(n_items + config.batch_size - 1) // config.batch_size,
        checkpoint_every=max(1, config.eval_every),
        sharded=_sharded(lm),
    )


def _phase_runner(
    model,
    steps,
    loss_fn,
    stopper,
    ckpt,
    progress_state: tuple,
    *,
    accelerator,
    rank: int,
    show: bool,
    steps_per_epoch: int,
    checkpoint_every: int,
    sharded: bool,
):
    """How :func:`finetune` trains one phase (:func:`_phases`): ``run(cfg, phase, offset, what) -> dict`` calls
    :func:`train_loop` with this finetuning's data order, loss, early-stopping hook and checkpoint.

    Args:
        model: the model trained (its trainable parameters are collected anew per phase).
        steps, loss_fn, stopper: from :func:`_epoch_order`, :func:`_batch_loss` and :func:`_epoch_stopper`.
        ckpt: the :class:`_Checkpoint` (restored from, and written after probed epochs).
        progress_state: ``(gen, losses, state)``: the data-order generator, the loss per epoch and the accuracy
            state, saved in a checkpoint.
        accelerator: accelerate's Accelerator (``prepare``, ``backward``).
        rank: this process's rank (added to the torch seed).
        show: show a progress bar (main process with ``progress``).
        steps_per_epoch: global batches per epoch.
        checkpoint_every: epochs between checkpoints.
        sharded: an FSDP2 launch.
    """

    def run(cfg: TrainConfig, phase: int, offset: int, what: str) -> dict:
        here = ckpt.at(phase)
        # dropout: independent masks per process (rank 0 draws what one process would)
        # FSDP2 replaces the module's parameters with sharded ones in the first phase's prepare: collect them anew
        params = [p for p in model.parameters() if p.requires_grad]
        return train_loop(
            model,
            params,
            cfg,
            steps,
            loss_fn,
            total_steps=steps_per_epoch * cfg.epochs,
            prepare=accelerator.prepare,
            backward=accelerator.backward,
            after_epoch=stopper(cfg, offset),
            torch_seed=cfg.seed + rank + offset,
            progress=what if show else None,
            start_epoch=here["epoch"] if here else 0,
            restore=here,
            checkpoint=ckpt.saver(phase, offset, model, *progress_state),
            checkpoint_every=checkpoint_every,
            sharded=sharded,
        )

    return run


def _batch_loss(lm, items: list[QAItem], me: int, world: int):
    """The loss of one global batch for :func:`finetune`: the items are tokenised once and a batch is a slice of
    their rows; each process takes its share of the batch's item indices.

    Args:
        lm: the :class:`dukb.neural.spec.LoadedModel`.
        items: the QA items finetuned on (indices into them make up a batch).
        me, world: this process's rank and the number of processes.

    Returns:
        ``loss_fn(fmodel, glob) -> Tensor``: the answer-token loss (:func:`answer_token_loss`) of this process's
        slice of the global batch ``glob`` (a list of item indices), normalised by the answer tokens of the whole
        batch and scaled by ``world``, so that the all-reduced gradient equals the single-process one.
    """
    encoded = encode_qa(lm.tokenizer, lm.tags, items, lm.device)  # tokenise once; batches are row slices
    n_answer = (encoded["labels"][:, 1:] != -100).sum(-1).tolist()  # answer tokens per item

    def loss_fn(fmodel, glob):
        n_tok = sum(n_answer[j] for j in glob)
        mine = _local_slice(glob, me, world)
        # a process whose slice is empty (last batch smaller than the world) still joins the gradient all-reduce,
        # with a zero-weighted item
        idx = torch.tensor(mine or glob[:1], device=lm.device)
        batch = _trim({k: v[idx] for k, v in encoded.items()})
        return answer_token_loss(fmodel, batch, n_tok, scale=world if mine else 0.0)

    return loss_fn


def _epoch_stopper(device: str, world: int, losses: list[float], state: dict, accuracy, log):
    """The end-of-epoch hook of :func:`finetune`'s phases: it records the epoch's global mean loss and, on probed
    epochs, the accuracy, and says whether the target accuracy is reached (early stopping).

    Args:
        device: the model's device string (for the loss all-reduce).
        world: the number of processes.
        losses: the mean loss per epoch (nats per answer token), appended to in place.
        state: ``{"acc": float | None}``, the last probed accuracy, updated in place.
        accuracy: ``() -> float``, the fraction of QA items the model knows, in [0, 1].
        log: optional callable(str) for one line per probed epoch.

    Returns:
        ``stopper(cfg, offset)``: the ``after_epoch(epoch, logs) -> bool`` hook for a phase trained with ``cfg``
        whose epochs are numbered from ``offset`` in the reports.
    """

    def stopper(cfg: TrainConfig, offset: int):
        def after_epoch(epoch: int, logs: dict) -> bool:
            # the loop's mean is over this process's micro-batches of loss × world; the global mean sums processes
            losses.append(dist.all_sum([logs["loss"] / world], device)[0])
            if cfg.eval_every and (epoch % cfg.eval_every == 0 or epoch == cfg.epochs):
                state["acc"] = accuracy()
                if log:
                    log(f"epoch {offset + epoch}: loss {losses[-1]:.4f}, accuracy {state['acc']:.4f}")
                return state["acc"] >= cfg.target_accuracy
            return False

        return after_epoch

    return stopper


def _sharded(lm) -> bool:
    """Whether this finetuning is sharded (an FSDP2 launch, :func:`dukb.neural.distributed.is_sharded`).

    Raises:
        InputError: LoRA adapters under FSDP (LoRA keeps a whole model per process).
    """

    sharded = dist.is_sharded(lm.device)
    if sharded and hasattr(lm.model, "peft_config"):
        raise InputError(
            "LoRA finetuning keeps a whole model per process: launch it without FSDP (accelerate "
            "launch --multi_gpu or torchrun)"
        )
    return sharded


def _accuracy_probe(lm, probed: list[QAItem], sharded: bool):
    """The early-stopping probe of :func:`finetune`: a function () -> fraction of ``probed`` the model knows.

    Data parallel, each process probes its share and the counts are summed. Sharded (FSDP), a forward is a
    collective: every process probes every item in the same batches, and decoding stops when every process has
    finished (:func:`dukb.neural.distributed.all_true`). Only known/unknown is computed: no ROUGE, no log-prob pass.
    """

    # hf_only: a --probe-backend engine would be rebuilt every epoch for a model that changes every epoch
    pred = Predictor(lm.model, lm.tokenizer, lm.tags, device=lm.device, hf_only=True)
    mine = probed if sharded else dist.shard(probed)
    if sharded:
        pred.all_done = lambda flag: dist.all_true(flag, lm.device)

    def accuracy() -> float:
        known = float(probe(pred, mine, rouge=False, logprob=False)["known"].sum()) if mine else 0.0
        # sharded: every process probed every item; the mean of their counts is one number on every process, so
        # the early-stopping decision (and with it the collectives that follow) is the same everywhere
        total = dist.all_sum([known], lm.device)[0]
        return (total / dist.world_size() if sharded else total) / max(1, len(probed))

    return accuracy


#: File name of a finetuning checkpoint (see :func:`finetune`).
CHECKPOINT = "finetune-checkpoint.pt"


def _checkpoint_key(lm, items, config: TrainConfig, world: int, sharded: bool = False) -> str:
    """What a finetuning checkpoint depends on, as one string: settings, items (hashed), model spec, world size,
    and FSDP sharding (its optimiser state is keyed by parameter name; recorded only when set, so the keys of
    unsharded checkpoints are unchanged).

    Raises:
        InputError: the model directory's ``dukb_tiny.json`` is not a readable JSON file (read bounded).
    """
    digest = hashlib.sha256()
    for it in items:
        digest.update(json.dumps([it.kind, it.question, it.answer], ensure_ascii=False).encode() + b"\n")
    model = lm.spec.to_json()
    tiny = Path(str(lm.spec.name_or_path)) / "dukb_tiny.json"
    if tiny.exists():  # the built-in tiny model is built in a temporary folder: its recipe identifies it
        model["name_or_path"] = read_json(tiny, "tiny-model record", limit=1 << 20)
    return json.dumps(
        {
            "config": config.to_json(),
            "items": digest.hexdigest(),
            "n_items": len(items),
            "model": model,
            "world": world,
            **({"sharded": True} if sharded else {}),
        },
        sort_keys=True,
        default=str,
    )


def _load_checkpoint(path: Path, key: str) -> dict | None:
    """The checkpoint at ``path`` when it exists (None otherwise), read with ``torch.load(weights_only=True)``
    (memory-mapped on POSIX).

    Raises:
        InputError: unreadable, or made with other settings (both named).
    """

    if not path.is_file():
        return None
    try:
        # memory-mapped on POSIX: the processes of a launch that all read it share the page cache instead of each
        # holding a copy of the weights and optimiser state (the file is replaced by a rename, which leaves a
        # mapping valid there; Windows refuses to replace a mapped file)
        data = torch.load(path, map_location="cpu", weights_only=True, mmap=os.name == "posix")
    except Exception as e:  # noqa: BLE001 - torch raises many kinds for a damaged file
        raise InputError(
            f"unreadable finetuning checkpoint ({type(e).__name__}); remove it to start again", path
        ) from None
    if not isinstance(data, dict) or data.get("key") != key:
        raise InputError(
            "a finetuning checkpoint made with other settings (KB, model, preset, lr, epochs, batch "
            "size, seed or number of processes); remove it or choose another output directory",
            path,
        )
    return data


def shortfall_line(acc: float, n: int, epochs: int, target: float) -> str:
    """The one line a finetuning that ends below its target accuracy prints.

    Args:
        acc: the final accuracy, in [0, 1]; n: the facts probed; epochs: the epochs run; target: the target
            accuracy, in [0, 1].

    Returns:
        ``finetuning ended at accuracy A (K of N facts known) after E epochs, below the target T; ...``.
    """
    return (
        f"finetuning ended at accuracy {acc:.4f} ({round(acc * n)} of {n} facts known) after {epochs} "
        f"epoch{'' if epochs == 1 else 's'}, "
        f"below the target {target:g}; facts the finetuned model does not know cannot be unlearned (raise the "
        "epochs or the learning rate)"
    )


def _phases(run, config: TrainConfig, state: dict, ckpt: _Checkpoint, log) -> tuple[dict, dict | None]:
    """The scheduled epochs (phase 0), then, when they end below the target accuracy, up to ``config.extra_epochs``
    more at the constant rate ``config.extra_lr`` with the same early stop (phase 1); a run resumed in phase 1
    skips phase 0.

    Args:
        run: ``(config, phase, epoch offset, progress label) -> train_loop record``.
        config: the finetuning :class:`dukb.neural.train.TrainConfig`.
        state: holds "acc", the last probed accuracy (None before the first probe).
        ckpt: the call's :class:`_Checkpoint`.
        log: optional callable(str) for the one line announcing the extra epochs.

    Returns:
        (phase 0's record, or a stand-in with its epochs when resumed in phase 1; phase 1's record or None).
    """
    if ckpt.at(1) is not None:  # interrupted in the extra epochs
        rec = {"epochs_run": ckpt.data["offset"], "seconds": 0.0, "config": config.to_json()}
    else:
        rec = run(config, 0, 0, "finetuning")
    if not (
        config.extra_epochs and config.eval_every and state["acc"] is not None and state["acc"] < config.target_accuracy
    ):
        return rec, None
    if log:
        log(
            f"accuracy {state['acc']:.4f} after {rec['epochs_run']} epochs is below {config.target_accuracy:g}: up "
            f"to {config.extra_epochs} more epochs at lr {config.extra_lr:g}"
        )
    extra = replace(
        config, epochs=config.extra_epochs, lr=config.extra_lr, warmup=0.0, warmup_steps=0, schedule="constant"
    )
    return rec, run(extra, 1, rec["epochs_run"], "finetuning (extra epochs)")


class _Checkpoint:
    """The checkpoint file of one :func:`finetune` call: read back when it exists (and matches ``key``), written
    after every probed epoch by the main process, removed when training ends.

    Args:
        directory: where :data:`CHECKPOINT` lies (None: no checkpoint).
        key: :func:`_checkpoint_key` of the call.
        every: save after epochs divisible by this (0: never; the main process passes ``eval_every``, the others 0,
            except under FSDP, where every process gathers the state).
        write: this process writes and removes the file (the main process).

    Raises:
        InputError: a checkpoint of other settings, or unreadable (:func:`_load_checkpoint`).
    """

    def __init__(self, directory, key: str, every: int, write: bool = True):
        self.path = None if directory is None else Path(directory) / CHECKPOINT
        self.key, self.every, self.write = key, every, write
        self.data = _load_checkpoint(self.path, key) if self.path is not None else None

    @property
    def resumed_after(self) -> int | None:
        """The epoch the run resumed after (counted over both phases), or None."""
        return None if self.data is None else self.data["offset"] + self.data["epoch"]

    def at(self, phase: int) -> dict | None:
        """The checkpoint when it was written in ``phase`` (0: scheduled epochs, 1: extra epochs), else None."""
        return self.data if self.data is not None and self.data["phase"] == phase else None

    def restore(self, model, gen, losses: list, state: dict, log=None) -> None:
        """Put the model weights, the data-order generator, the losses and the last accuracy back; say so on
        ``log`` (optional callable(str))."""
        if log:
            log(f"resuming finetuning from its checkpoint after epoch {self.resumed_after} ({self.path})")
        model.load_state_dict(self.data["model"])
        gen.set_state(self.data["gen"])
        losses.extend(float(x) for x in self.data["losses"])
        state["acc"] = self.data["acc"] if self.data["acc"] >= 0 else None

    def saver(self, phase: int, offset: int, model, gen, losses: list, state: dict):
        """The ``checkpoint`` callback of :func:`dukb.neural.train.train_loop` for one phase (None: no file)."""
        if self.path is None or not self.every:
            return None

        def save(epoch: int, opt_state: dict) -> None:
            # opt_state holds the full model state too when training is sharded (gathered by every process)
            if epoch % self.every == 0 and self.write:
                weights = opt_state["model"] if "model" in opt_state else model.state_dict()
                _save_checkpoint(
                    self.path,
                    {
                        "key": self.key,
                        "phase": phase,
                        "epoch": epoch,
                        "offset": offset,
                        **opt_state,
                        "model": weights,
                        "gen": gen.get_state(),
                        "losses": list(losses),
                        "acc": -1.0 if state["acc"] is None else float(state["acc"]),
                    },
                )

        return save

    def clear(self) -> None:
        """Remove the file (training ended; only the process that writes it)."""
        if self.path is not None and self.every and self.write:
            self.path.unlink(missing_ok=True)


def _save_checkpoint(path: Path, data: dict) -> None:
    """Write ``data`` to ``path`` atomically (a fresh temporary file in the same folder, then a rename), never
    through a symbolic link (:func:`dukb.neural.run.files.refuse_links`)."""

    refuse_links(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)  # a fresh file, never planted
    try:
        with os.fdopen(fd, "wb") as fh:
            torch.save(data, fh)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_record(record: dict, path) -> None:
    """Write a finetuning record as JSON, atomically and never through a symbolic link
    (:func:`dukb.neural.run.files.write_json_atomic`)."""

    write_json_atomic(path, record)
