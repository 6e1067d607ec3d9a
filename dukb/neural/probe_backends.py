"""The probe backends of ``--probe-backend`` (a shared model option of every protocol) and the refusals a run gets
before any model is loaded: an unknown backend, ``vllm`` without the ``vllm`` package, without a CUDA device, or with
a LoRA rank a vLLM engine cannot serve. Torch-free (the CLI checks it at start-up); the engine itself is
:mod:`dukb.neural.vllm_backend`.

Source: Wu et al. 2025, App. C (the paper probes with vLLM; Eval-DU's evaluate_util.py:8).
"""

from __future__ import annotations

import importlib.util
import sys

from dukb import InputError
from dukb.neural.bounds import check_device

#: the values of ``--probe-backend``
PROBE_BACKENDS = ("hf", "vllm")
#: the LoRA ranks a vLLM engine can be built for (``max_lora_rank``); an adapter of rank r needs one >= r
VLLM_LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)

PROBE_BACKEND_HELP = (
    "Generate the probe's answers with hf (transformers, dukb's default) or vllm (a vLLM engine, "
    "as the paper's code; greedy, same prompts, same 10 tokens, same answer-line rule; needs a CUDA "
    "device and `pip install 'dukb[vllm]'`). Under --lora-r one engine serves every setting through "
    "LoRA requests; without LoRA each setting's model is saved and loaded into a new engine (slow). "
    "WHP's combined logits and RESTOR's sampling stay on hf. Part of the run identity when vllm."
)


def vllm_installed() -> bool:
    """Whether the ``vllm`` package can be imported (found on the path, or already in ``sys.modules``); nothing is
    imported."""
    if sys.modules.get("vllm") is not None:
        return True
    try:
        return importlib.util.find_spec("vllm") is not None
    except (ImportError, ValueError):  # a broken or half-removed package
        return False


def check_probe_backend(backend: str, device: str, lora_r: int = 0) -> None:
    """Refuse a probe backend that cannot run here, before any model is loaded or trained.

    Args:
        backend: a ``--probe-backend`` value; device: the run's ``--device`` (checked already:
            :func:`dukb.neural.bounds.check_device`); lora_r: the run's ``--lora-r``.

    Raises:
        InputError: an unknown backend; ``vllm`` without the ``vllm`` package, or with ``--device cpu``/``mps``,
            or where torch reports no CUDA device, or with a LoRA rank vLLM cannot serve (:func:`lora_rank_bucket`).
    """
    if backend not in PROBE_BACKENDS:
        raise InputError(f"unknown --probe-backend {backend!r} (choose from {', '.join(PROBE_BACKENDS)})")
    if backend == "hf":
        return
    if not vllm_installed():
        raise InputError(
            "--probe-backend vllm needs the vllm package: install dukb[vllm] "
            "(pip install 'dukb[vllm]'), or use --probe-backend hf"
        )
    if device in ("cpu", "mps"):
        raise InputError(
            f"--probe-backend vllm needs a CUDA device, not --device {device} (use --device cuda or --probe-backend hf)"
        )
    try:
        check_device("cuda")  # asks torch what it sees (dukb.neural.bounds)
    except InputError:
        raise InputError(
            "--probe-backend vllm needs a CUDA device and torch reports none on this machine (use --probe-backend hf)"
        ) from None
    if lora_r:
        lora_rank_bucket(lora_r)


def lora_rank_bucket(r: int) -> int:
    """The smallest vLLM ``max_lora_rank`` (:data:`VLLM_LORA_RANKS`) that serves an adapter of rank ``r``.

    Raises:
        InputError: ``r`` above the largest.
    """
    for b in VLLM_LORA_RANKS:
        if r <= b:
            return b
    raise InputError(f"--probe-backend vllm serves LoRA ranks up to {VLLM_LORA_RANKS[-1]}, not {r}")


__all__ = [
    "PROBE_BACKENDS",
    "PROBE_BACKEND_HELP",
    "VLLM_LORA_RANKS",
    "check_probe_backend",
    "lora_rank_bucket",
    "vllm_installed",
]
