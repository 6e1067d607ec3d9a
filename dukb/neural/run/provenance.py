"""Provenance: what does not change a row but explains it (versions, device, threads, world size, dukb's git
revision, command line, time, the worker), recorded beside the identity, never compared.

Source: dukb (the run directory of every protocol).
"""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

from dukb import __version__
from dukb.neural import distributed as dist
from dukb.neural.run.migrate import RUN_LAYOUT

# -------------------------------------------------------------------------------------------- provenance --------
#: the libraries whose versions every run records (None when one is not installed)
RECORDED_LIBRARIES = ("torch", "transformers", "tokenizers", "peft", "accelerate", "clingo", "ortools", "numpy", "gguf")


def versions() -> dict:
    """Versions of python and of every library a result depends on, and dukb's version and git revision.

    Returns:
        dict: ``python``, ``dukb``, each of :data:`RECORDED_LIBRARIES` (None when not installed; torch's as
        ``torch.__version__``, with its build, once torch is loaded), ``torch_cuda`` (the CUDA version torch was
        built for, None for a CPU build) once torch is loaded, and ``dukb_revision`` when dukb runs from a git
        checkout.
    """

    out = {"python": platform.python_version(), "dukb": __version__}
    for name in RECORDED_LIBRARIES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    torch = sys.modules.get("torch")  # never imported here (dukb closure/mdus load no torch)
    if torch is not None:
        out["torch"] = torch.__version__  # with its build (2.11.0+cu130, 2.13.0+cpu), which metadata may omit
        out["torch_cuda"] = torch.version.cuda
    rev = git_revision()
    if rev:
        out["dukb_revision"] = rev
    return out


def git_revision() -> str | None:
    """``<commit>`` (with ``+dirty`` for uncommitted changes) of the checkout dukb runs from, or None when dukb is
    installed from a wheel or git is unavailable."""
    root = Path(__file__).resolve().parents[3]
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def device_info(device: str) -> dict:
    """The device a result was computed on, in words: device string, CPU threads, GPU name on CUDA."""
    import torch

    info = {"device": device, "threads": torch.get_num_threads(), "platform": platform.platform()}
    if device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name(torch.device(device))
    return info


def thread_info() -> dict:
    """The CPU threads a result was computed with: torch's intra- and inter-op thread counts, the thread variables
    of the environment (None when unset) and the machine's CPU count."""
    import torch

    return {
        "torch": torch.get_num_threads(),
        "torch_interop": torch.get_num_interop_threads(),
        **{v: os.environ.get(v) for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")},
        "cpu_count": os.cpu_count(),
    }


def provenance(device: str | None = None, **extra) -> dict:
    """Provenance of a run: versions (with dukb's revision), threads (:func:`thread_info`), device, world size,
    host, pid, command line, time and the run directory's layout (:data:`dukb.neural.run.migrate.RUN_LAYOUT`, read
    back by :func:`dukb.neural.run.migrate.migrate`).

    Args:
        device: the resolved device string (None: not recorded).
        extra: more JSON-able fields (e.g. settings that do not change rows, like gradient checkpointing).
    """
    out = {
        "versions": versions(),
        "threads": thread_info(),
        "world_size": dist.world_size(),
        "argv": list(sys.argv),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "run_layout": RUN_LAYOUT,
    }
    if device is not None:
        out["device"] = device_info(device)
    return out | extra


def worker_id() -> str:
    """Who computed a row: ``HOST:PID`` (and ``/rRANK`` under a multi-process launch), recorded as each row's
    ``worker``. A row's values never depend on it."""
    rank = f"/r{dist.rank()}" if dist.is_distributed() else ""
    return f"{socket.gethostname()}:{os.getpid()}{rank}"


__all__ = ["RECORDED_LIBRARIES", "device_info", "git_revision", "provenance", "thread_info", "versions", "worker_id"]
