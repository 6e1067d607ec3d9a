"""dukb.neural: models, QA finetuning, unlearning methods, probing and the evaluate protocol (uses torch).

Importing this package does not import torch; the submodules do.
"""

from __future__ import annotations

import logging as _logging

# torchao (the quantization attacks' library) is imported by peft and transformers whenever it is installed; on a
# machine without its CUDA kernels it logs one warning per missing kernel library, and torch logs a deprecation for
# each of its enums. Neither concerns dukb's output: keep them out of every command's stderr.
for _name in ("torchao", "torchao.kernel.intmm", "torch.utils._pytree"):
    _logging.getLogger(_name).setLevel(_logging.ERROR)


def evaluate(run_dir="runs/evaluate", *, resume: bool = True, progress: bool = False, log=None, **config):
    """Python API of ``dukb evaluate``: run (or resume) the deep-unlearning protocol and return its rows.

    Args:
        run_dir: run directory (config.json, results.jsonl, report.md, ...).
        resume: continue a run already in ``run_dir``.
        progress: rich progress bars.
        log: callable(str) for progress lines (default: silent).
        **config: fields of :class:`dukb.neural.protocols.evaluate.config.EvaluateConfig` (kb, model, finetuned, targets,
            n_targets, methods, grids, rules, sets, seeds, seed, lr, device, dtype, prompt, finetune_epochs).

    Returns:
        pandas DataFrame, one row per (target, method, setting) with recall, accuracy_relationships,
        accuracy_biographies, accuracy_all, best_set, target_forgotten, forgotten fact ids and timings.

    Raises:
        InputError: bad configuration (see :func:`dukb.neural.protocols.evaluate.run.evaluate`).

    Source: Wu et al. 2025, Sec. 4 (protocol), Eq. 1-2 (metrics).
    """
    from dukb.neural.protocols.evaluate.config import EvaluateConfig  # noqa: PLC0415 (dukb.neural: no torch)
    from dukb.neural.protocols.evaluate.run import evaluate as _evaluate  # noqa: PLC0415 (dukb.neural: no torch)

    return _evaluate(run_dir, EvaluateConfig(**config), resume=resume, progress=progress, log=log or (lambda _m: None))


__all__ = ["evaluate"]
