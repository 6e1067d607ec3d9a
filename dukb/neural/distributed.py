"""Multi-process (multi-GPU) runs through accelerate, and the single-process default.

dukb is launched as usual (``dukb finetune ...``); a user with several GPUs launches the same command under a
launcher, which starts one process per GPU and sets ``WORLD_SIZE``/``RANK``/``LOCAL_RANK``::

    accelerate launch --multi_gpu --num_processes 4 -m dukb.cli.main finetune --kb DIR --model M -o OUT
    torchrun --nproc_per_node 4 -m dukb.cli.main evaluate --kb DIR --finetuned OUT -o RUN

What runs in parallel:

* ``finetune``: data parallel (DDP through :class:`accelerate.Accelerator`). Every process draws the same seeded
  permutation; each global batch (``batch_size`` items, the paper's 16) is split across the processes, and each
  process scales its summed token loss by ``world_size / n_answer_tokens(global batch)``, so the averaged gradient is
  exactly the single-process gradient of the global batch. Early-stopping probes are split across processes too.
  A launch with an FSDP2 configuration (``accelerate launch --use_fsdp --fsdp_version 2`` or an accelerate config
  file) passes straight through: accelerate shards the model and the optimiser (torch's ``fully_shard``), the
  batches are split as under DDP, every process probes the same items in lockstep (a sharded forward is a
  collective), and checkpoints and the saved model are gathered into full state dicts (:func:`full_state_dict`).
* ``evaluate``: targets are split across processes (target ``i`` goes to process ``i mod world_size``); each process
  unlearns and probes its targets on its own device and writes its own ``results.rank{r}.jsonl``; process 0 merges
  them into ``results.jsonl`` at the end. Unlearning one target is a tiny-batch job, so this is where extra GPUs pay.
* Every other command runs in one process and refuses a multi-process launch (see :func:`check_single_process`).
* Refused: FSDP for ``evaluate`` (each process unlearns its own targets with a whole model; a sharded model would
  make every process work on one target); FSDP version 1, DeepSpeed, Megatron-LM and XLA for every command
  (:data:`UNSUPPORTED`).

Without a launcher everything here is a no-op: world size 1, rank 0, no process group.
"""

from __future__ import annotations

import os
from datetime import timedelta

from dukb import InputError

#: Commands that support a multi-process launch (the rest refuse it).
DISTRIBUTED_COMMANDS = ("finetune", "evaluate")

_ACCELERATOR = None


def _env_int(names: tuple[str, ...], default: int) -> int:
    """The first of ``names`` set in the environment, as an int (``default`` if none is set or parses)."""
    for name in names:
        value = os.environ.get(name)
        if value is not None:
            try:
                return int(value)
            except ValueError:
                return default
    return default


def world_size() -> int:
    """Number of processes of this launch: ``WORLD_SIZE`` (torchrun, accelerate launch), else the MPI variables
    (``OMPI_COMM_WORLD_SIZE``, ``PMI_SIZE``); 1 without a launcher."""
    return max(1, _env_int(("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"), 1))


def rank() -> int:
    """Global rank of this process (``RANK``, ``OMPI_COMM_WORLD_RANK``, ``PMI_RANK``; 0 without a launcher)."""
    return _env_int(("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"), 0)


def local_rank() -> int:
    """Rank of this process on its machine (``LOCAL_RANK``, ``OMPI_COMM_WORLD_LOCAL_RANK``,
    ``MPI_LOCALRANKID``; 0 without a launcher): selects its GPU."""
    return _env_int(("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"), 0)


def timeout_seconds() -> int:
    """Timeout of collectives and barriers in seconds: ``$DUKB_DIST_TIMEOUT`` or 24 hours.

    Processes that finish their share of an evaluate run early wait at a barrier for the others, possibly for
    hours with large models; torch's default (10 minutes for NCCL) would abort them.
    """
    return max(60, _env_int(("DUKB_DIST_TIMEOUT",), 24 * 3600))


def is_distributed() -> bool:
    """True when launched with more than one process (accelerate launch, torchrun)."""
    return world_size() > 1


def is_main_process() -> bool:
    """True on rank 0 (and always without a launcher): the process that writes shared files."""
    return rank() == 0


def check_single_process(command: str) -> None:
    """Refuse a multi-process launch of a command that runs in one process.

    Raises:
        InputError: ``WORLD_SIZE > 1`` and ``command`` is not in :data:`DISTRIBUTED_COMMANDS`.
    """
    if is_distributed() and command not in DISTRIBUTED_COMMANDS:
        raise InputError(
            f"`dukb {command}` runs in a single process, but it was launched with WORLD_SIZE="
            f"{world_size()}; run it without accelerate launch/torchrun (multi-process launches are "
            f"supported by: {', '.join('dukb ' + c for c in DISTRIBUTED_COMMANDS)})"
        )


def accelerator(device: str = "cpu"):
    """The process's :class:`accelerate.Accelerator` (created once; accelerate keeps its state per process).

    Under a launcher it joins the process group (NCCL on CUDA, gloo when ``device`` is "cpu"); without one it is a
    pass-through (``DistributedType.NO``). Device placement stays with dukb (``device_placement=False``): models
    are already on the device :func:`dukb.neural.models.resolve_device` chose (``cuda:LOCAL_RANK`` under a
    launcher). Mixed precision, gradient accumulation and dynamo are fixed off whatever the launcher's
    configuration says (``accelerate launch`` exports its defaults as ``ACCELERATE_*`` variables): a bf16 model
    trains in bf16, as it was loaded, and one global batch is one optimiser step. Collectives time out after
    :func:`timeout_seconds`.

    Args:
        device: the resolved torch device string of this process.

    Returns:
        ``accelerate.Accelerator``.

    Raises:
        InputError: the launch asks for FSDP version 1, DeepSpeed, Megatron-LM or XLA: dukb trains data parallel
            (DDP) or with FSDP2 (:func:`check_unsharded` refuses FSDP2 where a command needs a whole model per
            process).
    """
    global _ACCELERATOR
    if _ACCELERATOR is None:
        from accelerate import Accelerator
        from accelerate.utils import InitProcessGroupKwargs

        acc = Accelerator(
            device_placement=False,
            cpu=device == "cpu" and is_distributed(),
            mixed_precision="no",
            gradient_accumulation_steps=1,
            dynamo_backend="no",
            kwargs_handlers=[InitProcessGroupKwargs(timeout=timedelta(seconds=timeout_seconds()))],
        )
        kind = acc.distributed_type.name
        if kind == "FSDP" and getattr(acc.state.fsdp_plugin, "fsdp_version", 1) != 2:
            kind = "FSDP version 1"
        if kind in UNSUPPORTED or kind == "FSDP version 1":
            raise InputError(
                f"this launch uses {kind}; dukb trains data parallel (DDP) or, for `dukb finetune`, "
                f"with FSDP2 (`accelerate launch --use_fsdp --fsdp_version 2`): use one of those, and "
                f"--lora-r/--gradient-checkpointing for models that do not fit one device"
            )
        _ACCELERATOR = acc
    return _ACCELERATOR


#: accelerate distributed types dukb refuses (FSDP version 1 is refused too; FSDP2 runs ``dukb finetune``). DeepSpeed
#: would need its engine's own backward, step and ZeRO-3 gathering for generation, none of which runs without GPUs.
UNSUPPORTED = ("DEEPSPEED", "MEGATRON_LM", "XLA")


def is_sharded(device: str = "cpu") -> bool:
    """True under a multi-process launch whose accelerate state is FSDP (version 2: the model is sharded).

    Args:
        device: the resolved torch device string of this process (creates the accelerator when needed).

    Returns:
        bool; False without a launcher.

    Raises:
        InputError: an unsupported launch (:func:`accelerator`).

    Source: accelerate's ``DistributedType.FSDP`` with ``FullyShardedDataParallelPlugin(fsdp_version=2)``.
    """
    return is_distributed() and accelerator(device).distributed_type.name == "FSDP"


def check_unsharded(command: str, device: str = "cpu") -> None:
    """Refuse an FSDP launch of a command that holds a whole model per process (``evaluate``).

    Args:
        command: the command's name, for the message.
        device: the resolved torch device string of this process.

    Raises:
        InputError: the launch is FSDP (:func:`is_sharded`), or unsupported (:func:`accelerator`).
    """
    if is_sharded(device):
        raise InputError(
            f"`dukb {command}` unlearns each target with a whole model per process (its processes "
            f"split the targets), so it cannot run under FSDP; launch it with `accelerate launch "
            f"--multi_gpu` or torchrun, or as several workers on one run directory (`dukb evaluate --resume` "
            f"from several shells or SLURM array tasks joins a live run), and use --lora-r/--gradient-checkpointing for large models"
        )


def is_fsdp_module(model) -> bool:
    """Whether ``model`` was sharded in place by torch's ``fully_shard`` (FSDP2, what accelerate applies).

    Args:
        model: any object (a ``torch.nn.Module`` normally).

    Returns:
        bool: ``isinstance(model, torch.distributed.fsdp.FSDPModule)``; False where torch has no FSDP2.

    Source: torch's FSDP2 (``torch.distributed.fsdp.fully_shard``).
    """
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:  # pragma: no cover - torch without FSDP2
        return False
    return isinstance(model, FSDPModule)


def full_state_dict(model) -> dict | None:
    """The full (unsharded) state dict of an FSDP2-sharded model, on the CPU of process 0.

    A collective: every process must call it (the others get an empty dict). Source: torch's
    ``torch.distributed.checkpoint.state_dict.get_model_state_dict`` with ``full_state_dict=True, cpu_offload=True``.

    Args:
        model: a module, sharded or not.

    Returns:
        {name: CPU tensor} on process 0 and {} elsewhere for a sharded model; None for a model that is not sharded
        (its own ``state_dict()`` is already whole).

    Raises:
        RuntimeError: from torch's collectives (a process that does not take part times out).
    """
    if not is_fsdp_module(model):
        return None
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def full_state_dicts(model, optimizer) -> tuple[dict, dict]:
    """The full (unsharded) state dicts of an FSDP2-sharded model and its optimiser, on the CPU of process 0.

    A collective: every process must call it (the others get empty dicts). The optimiser state is keyed by
    parameter name, as torch's distributed checkpoint API writes it. Source: torch's
    ``torch.distributed.checkpoint.state_dict.get_state_dict`` (``full_state_dict=True, cpu_offload=True``).

    Args:
        model: the sharded module (after accelerate's ``prepare``).
        optimizer: the optimiser ``prepare`` switched to the sharded parameters (the unwrapped one).

    Returns:
        (model state dict {name: CPU tensor}, optimiser state dict), both empty outside process 0.

    Raises:
        RuntimeError: from torch's collectives.
    """
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

    return get_state_dict(model, optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def load_full_optimizer_state(model, optimizer, state: dict) -> None:
    """Load a full optimiser state dict (:func:`full_state_dicts`) into the optimiser of a sharded model: each
    process keeps its shards.

    Source: torch's ``torch.distributed.checkpoint.state_dict.set_optimizer_state_dict`` (``full_state_dict=True``;
    every process passes the whole dict).

    Args:
        model: the sharded module.
        optimizer: its optimiser, after ``prepare``.
        state: the full optimiser state dict, the same on every process.

    Raises:
        RuntimeError: from torch (a state of another model or optimiser), or its collectives.
    """
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    set_optimizer_state_dict(model, optimizer, state, options=StateDictOptions(full_state_dict=True))


def all_true(flag: bool, device: str = "cpu") -> bool:
    """Whether ``flag`` holds on every process (a collective; ``flag`` itself without a launcher).

    Sharded models decode in lockstep: a process stops generating only when every process has finished its batch,
    since each forward of a sharded model gathers parameters from all processes.

    Args:
        flag: this process's value.
        device: the device of the collective (the model's: NCCL needs CUDA tensors).

    Returns:
        bool, the same on every process.
    """
    if not is_distributed():
        return bool(flag)
    return all_sum([0.0 if flag else 1.0], device)[0] == 0.0


def shard(items: list, r: int | None = None, n: int | None = None) -> list:
    """This process's share of ``items``: every ``n``-th item from position ``r`` (round robin).

    Args:
        items: any list.
        r: rank (default: this process's).
        n: world size (default: this launch's).

    Returns:
        ``items[r::n]``; the shares of ranks 0..n-1 partition ``items``.
    """
    r = rank() if r is None else r
    n = world_size() if n is None else n
    return items[r::n]


def all_sum(values, device: str = "cpu") -> list[float]:
    """Sum a list of numbers over all processes (identity without a launcher).

    Args:
        values: numbers of this process.
        device: device of the collective (the process's model device: NCCL needs CUDA tensors).

    Returns:
        list of floats, the element-wise sums over processes, identical on every process.
    """
    if not is_distributed():
        return [float(v) for v in values]
    import torch

    t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=device)
    return [float(v) for v in accelerator(device).reduce(t, "sum").tolist()]


def barrier(device: str = "cpu") -> None:
    """Wait until every process gets here (no-op without a launcher)."""
    if is_distributed():
        accelerator(device).wait_for_everyone()


def process_device(device: str) -> str:
    """The per-process device under a launcher: "cuda" -> ``cuda:LOCAL_RANK``, or ``cuda:0`` when the process sees
    a single GPU (a launcher that sets ``CUDA_VISIBLE_DEVICES`` per process).

    Args:
        device: a device string already resolved for a single process ("cpu", "cuda", "cuda:N", "mps", ...).

    Returns:
        the device string this process must use (unchanged without a launcher, and for non-CUDA devices).

    Raises:
        InputError: a fixed "cuda:N" under a multi-process launch (every process would share one GPU).
    """
    if not is_distributed() or not device.startswith("cuda"):
        return device
    if device == "cuda":
        import torch

        return "cuda:0" if torch.cuda.device_count() == 1 else f"cuda:{local_rank()}"
    raise InputError(
        f"--device {device} pins every process of a multi-process launch to one GPU; use "
        f"--device auto or cuda (each process takes cuda:LOCAL_RANK)"
    )
