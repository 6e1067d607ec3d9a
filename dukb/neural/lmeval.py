"""Running lm-evaluation-harness on a model in memory (``dukb evaluate --utility``): the finetuned model's utility
and every row's (Wu et al. 2025, Tables 5 and 7). The tasks, the checks and the report's Recall@U≥0.95FT are
:mod:`dukb.neural.utility`'s (torch-free); this module runs :func:`lm_eval.simple_evaluate` with lm-eval's Hugging Face
wrapper on the model as it is, and restores what lm-eval changes.
"""

from __future__ import annotations

import contextlib
import copy
import random

import numpy as np
import torch  # noqa: TID253 (a model module: reached only through a command's lazy import)

from dukb.neural.utility import UTILITY_BATCH_SIZE, quiet, require_lm_eval, resolve_tasks, task_scores


@contextlib.contextmanager
def _kept_state(model):
    """Restore what lm-eval changes and a sweep reads on: every module's train/eval mode and the random states of
    Python, numpy and torch (lm-eval seeds all three; the unlearning after this setting must not see it)."""
    modes = [(m, m.training) for m in model.modules()]
    py, npy = random.getstate(), np.random.get_state()
    devices = [torch.cuda.current_device()] if torch.cuda.is_available() and torch.cuda.is_initialized() else []
    with torch.random.fork_rng(devices=devices):
        try:
            yield
        finally:
            random.setstate(py)
            np.random.set_state(npy)
            for m, training in modes:
                m.training = training


def measure_utility(
    model,
    tokenizer,
    tasks,
    *,
    include: str | None = None,
    batch_size: int = UTILITY_BATCH_SIZE,
    device: str | None = None,
) -> dict:
    """Utility of ``model`` on lm-eval tasks, run in-process by :func:`lm_eval.simple_evaluate` on
    ``lm_eval.models.huggingface.HFLM(pretrained=model, tokenizer=<a copy of tokenizer>)`` (the model is not read
    from disk; its modules' modes and the random states are restored afterwards, and lm-eval's changes to a
    tokenizer, e.g. a pad token, stay on its copy).

    Args:
        model: a transformers causal LM or a peft model, on its device.
        tokenizer: its tokenizer.
        tasks: task, group or tag names (:func:`resolve_tasks`).
        include: a folder of the user's task YAML files (lm-eval's ``include_path``) or None.
        batch_size: requests per batch.
        device: recorded in lm-eval's config (the model stays where it is).

    Returns:
        ``{"lm_eval": version, "tasks": {name: {metric: value, ..., "version", "n_shot", "n_samples"}},
        "higher_is_better": {name: {metric: bool}}}`` (:func:`task_scores`; each value in [0, 1] for share metrics
        such as acc and exact_match; ``higher_is_better`` as lm-eval reports it, None for a name it gives none).

    Raises:
        InputError: lm-eval is not installed, or a task cannot be loaded (:func:`resolve_tasks`).

    Source: Wu et al. 2025, Table 5 (utility of the finetuned models on MMLU, PIQA, RACE) and Table 7; Eval-DU's
    scripts_unlearning_methods/ga.sh:19-22 (``lm_eval --tasks piqa,race,mmlu``); lm-eval 0.4.13
    lm_eval/evaluator.py ``simple_evaluate``.
    """
    lm_eval = require_lm_eval()
    with _kept_state(model), quiet():
        manager, reported = resolve_tasks(tuple(tasks), include)
        from lm_eval.models.huggingface import HFLM

        hflm = HFLM(pretrained=model, tokenizer=_tokenizer_copy(tokenizer), batch_size=batch_size)
        results = lm_eval.simple_evaluate(
            hflm, tasks=list(tasks), task_manager=manager, batch_size=batch_size, device=device, log_samples=False
        )
    keys = [key for name in tasks for key in reported[name]]
    higher = results.get("higher_is_better", {})
    return {
        "lm_eval": lm_eval.__version__,
        "tasks": {key: task_scores(results, key) for key in keys},
        "higher_is_better": {key: higher.get(key) for key in keys},
    }


_TOKENIZERS: dict = {}


def _tokenizer_copy(tokenizer):
    """A copy of ``tokenizer`` made once per tokenizer (HFLM may set its pad token or padding side)."""
    key = id(tokenizer)
    if key not in _TOKENIZERS or _TOKENIZERS[key][0] is not tokenizer:
        _TOKENIZERS[key] = (tokenizer, copy.deepcopy(tokenizer))
    return _TOKENIZERS[key][1]


def row_utility(lm, tasks, include: str | None, batch_size: int = UTILITY_BATCH_SIZE):
    """The ``utility`` hook of a sweep (:class:`dukb.neural.unlearn.UnitPlan`): ``hook(pred)`` -> the row's
    ``utility`` field, task -> scores (:func:`measure_utility`), or None for a predictor lm-eval cannot run as one
    model: a combination of two models' logits (WHP) or a prompt other than the finetuned model's (ICU's
    in-context instruction).

    Args:
        lm: the finetuned :class:`dukb.neural.spec.LoadedModel` (its tokenizer and prompt tags).
        tasks, include, batch_size: as :func:`measure_utility`.
    """

    def hook(pred):
        if pred.aux_model is not None or pred.tags != lm.tags:
            return None
        return measure_utility(
            pred.model, lm.tokenizer, tasks, include=include, batch_size=batch_size, device=str(lm.device)
        )["tasks"]

    return hook


__all__ = ["measure_utility", "row_utility"]
