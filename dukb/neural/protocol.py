"""`dukb evaluate`'s import path of earlier dukb versions: the protocol now lives in
:mod:`dukb.neural.protocols.evaluate` (``config.py``: :class:`EvaluateConfig` and the run identity; ``run.py``:
:class:`dukb.neural.protocols.evaluate.run.EvaluateProtocol`; ``report.py``). This module re-exports them, and
:func:`evaluate` stays patchable here (the CLI calls it through this module).

Source: Wu et al. 2025, Sec. 4 and App. C/H (the protocol).
"""

from __future__ import annotations

from dukb.neural.protocols.evaluate.config import (  # noqa: F401  (re-exported)
    DEFAULT_METHODS, EXTENDABLE, PROBE_BATCH_SIZE, RECOMMENDED, EvaluateConfig, _attack_identity, _attacks_of,
    _model_spec, _probe_defaults, _retain_defaults, finetune_cache_key, method_identity, run_identity)


def __getattr__(name: str):
    """``PROBE`` and ``RETAIN``: the config module's, read on first use (they come from modules that import
    torch)."""
    if name in ("PROBE", "RETAIN"):
        from dukb.neural.protocols.evaluate import config

        return getattr(config, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def evaluate(run_dir, config: EvaluateConfig | None = None, *, resume: bool = True, progress: bool = False,
             log=print):
    """Run (or resume) the evaluate protocol into ``run_dir``: :func:`dukb.neural.protocols.evaluate.run.evaluate`
    (same arguments, return value and errors; imported when called, so that importing this module loads no model
    code).

    Returns:
        pandas DataFrame of all result rows (one per target, method, setting).

    Raises:
        InputError: bad configuration, another run in ``run_dir``, or results present without ``resume``.
    """
    from dukb.neural.protocols.evaluate.run import evaluate as run

    return run(run_dir, config, resume=resume, progress=progress, log=log)


__all__ = ["DEFAULT_METHODS", "EXTENDABLE", "EvaluateConfig", "PROBE", "PROBE_BATCH_SIZE", "RECOMMENDED", "RETAIN",
           "evaluate", "finetune_cache_key", "method_identity", "run_identity"]
