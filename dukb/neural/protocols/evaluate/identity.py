"""The run identity of `dukb evaluate` (and the model part of `dukb rwku`'s): every setting that changes a result
row, compared before a run directory is reused or resumed (:mod:`dukb.neural.run.identity`); the stages in
:mod:`dukb.neural.protocols.evaluate.run` build it from the plan :meth:`EvaluateConfig.check
<dukb.neural.protocols.evaluate.config.EvaluateConfig.check>` returned.

Source: Wu et al. 2025, Sec. 4 and App. C/H (the settings a row of the deep-unlearning protocol depends on).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from dataclasses import asdict as _asdict

from dukb.kb.paper_sets import paper_sets_of
from dukb.neural.attacks import attack_identity
from dukb.neural.declare import default_of
from dukb.neural.families import identity_lr
from dukb.neural.methods.base import UnlearnContext
from dukb.neural.modelrecord import TINY_CONFIG, model_fingerprint
from dukb.neural.pipeline import finetune_config
from dukb.neural.plan import EXACT_LIMITS, paper_sets_digest
from dukb.neural.probe import DEFAULT_MAX_NEW_TOKENS
from dukb.neural.protocols.evaluate.config import EvaluateConfig
from dukb.neural.run.identity import IDENTITY_VERSION
from dukb.neural.unlearn import default_retain

#: Prompts per probing batch in evaluate.
PROBE_BATCH_SIZE = 256


@functools.cache
def _retain_defaults() -> dict:
    """The retain-data settings of GDR/KLR, read from where they are defined (:func:`dukb.neural.unlearn.default_retain`'s
    ``n``, :class:`dukb.neural.methods.base.UnlearnContext`'s ``retain_batch_size`` and ``reg_weight``), so the run
    identity records what runs, never a copy."""

    ctx = {f.name: f.default for f in dataclasses.fields(UnlearnContext)}
    return {
        "n": inspect.signature(default_retain).parameters["n"].default,
        "batch_size": ctx["retain_batch_size"],
        "reg_weight": ctx["reg_weight"],
    }


@functools.cache
def _probe_defaults() -> dict:
    """The probing settings, read from :mod:`dukb.neural.probe` (the generation budget) and :func:`evaluate`'s own
    probe batch size, so the run identity records what runs."""

    return {
        "kinds": ["qa"],
        "max_new_tokens": DEFAULT_MAX_NEW_TOKENS,
        "judge": "substring",
        "answer": "line",
        "batch_size": PROBE_BATCH_SIZE,
    }


def _chat_budget(tags) -> dict:
    """The probe budget of tags that set their own (the chat preset's), for the run identity; empty otherwise, so
    that the identities of other runs stay as they were."""
    return {"max_new_tokens": tags.max_new_tokens} if tags.max_new_tokens else {}


#: Identity keys a resume may add entries to: targets, methods, and values to a method's grid (a row depends on its
#: own grid value only: each T of a gradient method is its own run from θ₀, each α its own weights; under the
#: reference schedule also on the run's length N, ``schedule_steps`` in the method's entry, which must not change).
EXTENDABLE = ("targets", "methods", "methods.*.grid")
#: Settings of the protocol that are fixed in code but change rows, part of every run identity: ``RETAIN``, the
#: retain data of GDR/KLR (:func:`dukb.neural.unlearn.default_retain`, :class:`UnlearnContext` defaults), and
#: ``PROBE``, the probing (the paper's question form, greedy decoding of 10 tokens, substring rule).
RETAIN = _retain_defaults()
PROBE = _probe_defaults()


def method_identity(
    m, scope: str, grid, schedule: str = "separate", family: str | None = None, lr: float | None = None
) -> dict:
    """A ``methods`` entry of a run identity: method, parameter, scope, grid; NPO's form (``npo`` and
    ``npo_seq`` compute different losses); for a step grid under the reference schedule, ``schedule`` and
    ``schedule_steps`` (the one run's length N = the grid's largest T, on which every row depends). The schedule
    keys are absent under "separate" (such an entry reads as it did before the option existed). ``lr``: the
    family's default rate where it differs from the rates runs used before identities recorded them
    (:func:`dukb.neural.families.identity_lr`; ``family`` and the run's ``lr`` override decide). ``options``: the
    method's per-method options (``npo:beta=0.05:lr=1e-3``), when given."""

    entry = {
        "method": m.name,
        "param": m.param,
        "scope": scope,
        "grid": [int(v) if m.param == "steps" else float(v) for v in grid],
    }
    rate = identity_lr(m, family, lr)
    if rate is not None:
        entry["lr"] = rate
    if getattr(m, "form", None):
        entry["form"] = m.form
    if m.option_values:  # per-method options (``npo:beta=0.05``): absent without, so earlier identities stay equal
        entry["options"] = m.option_values
    if schedule == "reference" and m.param == "steps":
        entry["schedule"] = "reference"
        entry["schedule_steps"] = max([int(v) for v in grid], default=0)
    return entry


def run_identity(
    cfg: EvaluateConfig,
    kb,
    closure,
    methods,
    grids: dict,
    targets: list[int],
    spec,
    dtype: str,
    metrics=(),
    schedules: dict | None = None,
) -> dict:
    """The identity of an evaluate run: every setting that changes a result row (see :mod:`dukb.neural.run`).

    Keys: kb and rules fingerprints; model (the finetuned weights' hash, or the base model's fingerprint and the
    resolved finetuning config; under ``no_finetune`` the base model's fingerprint alone, and ``no_finetune``:
    True among the components); dtype; the preset family (it chooses learning rates and grids); prompt tags;
    lora; seed; lr; sets (method, N_seed, exact limits, and with ``paper`` the digest of the paper's sets); retain
    and probe settings (``probe.answer``: the judge); the prompt options where not dukb's (:func:`prompt_identity`);
    the metrics; targets and methods (label -> :func:`method_identity`): targets, methods and each method's grid are
    extendable (:data:`EXTENDABLE`); ``tie_break`` only when it is not "accuracy"; the compat preset and each
    component not at dukb's value (:func:`component_identity`). ``schedules`` (label -> "separate" or
    "reference") are the sweep schedules the caller runs; None (callers running their own sweeps, e.g. rwku): every
    method "separate".

    Raises:
        InputError: a model file cannot be read.
    """

    if cfg.finetuned:
        model = {"finetuned": model_fingerprint(cfg.finetuned)}
    elif getattr(cfg, "no_finetune", False):  # evaluated as given: its weights, no finetuning config
        model = {"base": model_fingerprint(cfg.model)}
    else:
        base = {"tiny": TINY_CONFIG} if cfg.model == "tiny" else model_fingerprint(cfg.model)
        preset, fcfg = finetune_config(spec, None, cfg.finetune_epochs, None, cfg.batch_size, cfg.seed)
        model = {"base": base, "finetune": {"preset": preset, **_asdict(fcfg)}}
        if list(cfg.finetune_forms) != ["qa"]:  # only when set, so that earlier identities stay equal
            model["finetune"]["forms"] = list(cfg.finetune_forms)
    lora = spec.lora
    return {
        "identity_version": IDENTITY_VERSION,
        "kb": kb.fingerprint(),
        "rules": closure.rules.fingerprint,
        "model": model,
        "dtype": dtype,
        "family": spec.preset_family,
        "prompt": spec.tags.record(),
        "lora": None if lora is None else _asdict(lora),
        "seed": cfg.seed,
        "lr": cfg.lr,
        "sets": _sets_identity(cfg, kb, targets),
        "retain": _retain_defaults(),
        "probe": {**_probe_defaults(), "answer": spec.tags.judge, **_chat_budget(spec.tags)},
        "metrics": [m.name for m in metrics],
        "targets": list(targets),
        "methods": {
            label: method_identity(
                m, scope, grids[label], (schedules or {}).get(label, "separate"), spec.preset_family, cfg.lr
            )
            for label, m, scope, _g in methods
        },
        # only when set, so that the identities of runs made before the option existed stay equal
        **({"layers": list(cfg.layer_range())} if cfg.layers else {}),
        **(
            {
                "heldout_forms": None if cfg.heldout_forms is None else list(cfg.heldout_forms),
                "heldout_rule": cfg.heldout_rule,
            }
            if any(m.name == "recall_heldout" for m in metrics)
            else {}
        ),
        **({"attacks": attack_identity(cfg.resolved_attacks)} if getattr(cfg, "attacks", None) else {}),
        # only when not dukb's default, so that the identities of runs made before the option existed stay equal
        **({"tie_break": cfg.tie_break} if getattr(cfg, "tie_break", None) not in (None, "accuracy") else {}),
        **prompt_identity(cfg),
        **component_identity(cfg),
    }


def _sets_identity(cfg, kb, targets) -> dict:
    """The sets' part of a run identity: method, N_seed, exact limits; with ``--sets paper`` also the digest of the
    paper's sets of the targets (:func:`dukb.neural.plan.paper_sets_digest`).

    Raises:
        InputError: ``--sets paper`` for a KB without paper sets or a target without them."""

    out = {"method": cfg.sets, "seeds": cfg.seeds, "exact_limits": EXACT_LIMITS}
    if cfg.sets == "paper":
        out["paper"] = paper_sets_digest(paper_sets_of(kb, list(targets))[0])
    return out


def prompt_identity(cfg) -> dict:
    """The prompt options' part of a run identity: ``prompt_format``, ``bos`` and ``judge``, each only where it is not
    dukb's (so that identities written before the options existed compare equal). Their effect is also in the
    identity's ``prompt`` (the resolved tags) and ``probe.answer`` (the judge)."""
    kw = cfg.prompt_kwargs() if hasattr(cfg, "prompt_kwargs") else {}
    return {k: v for k, v in kw.items() if v != {"prompt_format": "dukb", "bos": "never", "judge": "line"}[k]}


def component_identity(cfg: EvaluateConfig) -> dict:
    """The run identity's part of the options declared ``identity="set"`` (the compat preset and its components
    added later: reinforce, family_grids, whp_grid, ...): each one whose value is not dukb's (its ``unset`` value,
    else its default), so that the identities of runs made before them stay equal."""

    out = {}
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if f.metadata.get("identity") == "set" and value != f.metadata.get("unset", default_of(f)):
            out[f.name] = value
    return out


def finetune_cache_key(identity: dict) -> dict:
    """What a run's finetuned model depends on, stored in its finetune.json and compared before reuse: the base
    model and finetuning config, the KB's fingerprint, LoRA, dtype and prompt tags (a cache made with any other
    value is finetuned again, even when the run's config.json was never written)."""
    return {
        "model": identity["model"],
        "kb": identity["kb"],
        "lora": identity["lora"],
        "dtype": identity["dtype"],
        "prompt": identity["prompt"],
    }
