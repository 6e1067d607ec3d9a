"""`dukb evaluate`: the paper's deep-unlearning protocol end to end, resumable (Wu et al. 2025, Sec. 4, App. C/H).

1. KB: load and validate; deductive closure; minimal deep unlearning sets of every target (exact by default),
   cached in RUN_DIR/sets.json.
2. Model: finetune until it knows 100% of the KB (or load ``finetuned``), saved in RUN_DIR/finetuned; its accuracy
   before unlearning is recorded.
3. For each (target, method, setting): unlearn from the finetuned model, probe every KB fact, compute recall and
   accuracy with the solver; append one JSON line at once (retained vector, best set, setting, timings).
4. ``resume`` continues a run in the same RUN_DIR, skipping rows already written; a killed run leaves a valid file
   (each row is one flushed line; a torn last line is dropped on resume). The run's identity (config.json) must
   match: a resume with any other row-changing setting is refused with the differing keys; targets and methods
   may be added (:mod:`dukb.neural.runs`).
5. Report: summary.csv, report.md, accuracy_recall.png (:mod:`dukb.neural.report`).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from dukb import InputError
from dukb.neural.metrics import DEFAULT_METRICS
from dukb.neural.runconfig import RunConfig, parse_layers
from dukb.neural.runs import SHARD_GLOB, ResultsFile, holds_run_lock, merge_shards, read_results, run_role

DEFAULT_METHODS = ("ga", "npo", "tv", "whp")


#: The preset dukb recommends: closed-loop deep unlearning (:mod:`dukb.neural.methods.closed_loop`), the one method
#: that reaches mean Recall ≥ 0.8 and Accuracy ≥ 0.8 on EDU-RELAT's targets on the qa form; judged on held-out
#: probe forms it falls short, like every method (README, "Closed-loop deep unlearning"; bench/RESULTS.md,
#: "Citable numbers"). Presets live in :data:`dukb.neural.methods.PRESETS`.
RECOMMENDED = "du_cl"


@dataclass
class EvaluateConfig(RunConfig):
    """Everything that defines an evaluate run (written to RUN_DIR/config.json; the settings that change rows form
    its identity, see :func:`run_identity`). The model options (kb, rules, model, finetuned, seed, lr, device,
    dtype, prompt, finetune_epochs, batch_size, LoRA, layers, gradient checkpointing, remote code) are
    :class:`dukb.neural.runconfig.RunConfig`'s, shared by every protocol.

    Attributes:
        targets: explicit relationship fact_ids (None: ``n_targets`` drawn with the seed, one per relation kind
            first, as evenly as possible).
        n_targets: number of targets to draw when ``targets`` is None (default 11 = one per relation).
        methods: method names, ``METHOD@SCOPE`` or presets (see :func:`dukb.neural.methods.resolve`).
        grids: method -> list of values overriding the default grid.
        sets: "exact" or "random" minimal deep unlearning sets for recall.
        seeds: N_seed of random sets (also used when exact enumeration hits its limit).
        forget_scope: default forget scope of methods given without ``@SCOPE`` (target, minimum, best).
        metrics: names of :data:`dukb.neural.metrics.METRICS` to compute (required ones are added); probing
            computes only what they need.
        heldout_forms: probe forms every row is also scored on by ``recall_heldout`` (kinds of
            :data:`dukb.kb.probes.KINDS`; None: every asking form the method did not see,
            :func:`dukb.neural.metrics.heldout.default_heldout_forms`).
        heldout_rule: "pairs" (default: after unlearning, probe the (form, fact) pairs that elicited their fact
            before; known while one still does) or "any" (probe every held-out form; known while any does);
            :mod:`dukb.neural.metrics.heldout`.
        finetune_forms: probe forms the model is finetuned on (default ["qa"], the paper's; ignored with
            ``finetuned``).
        schedule: how the step grid of gradient methods (param "steps") is run
            (:class:`dukb.neural.methods.base.SweepSchedule`): "reference" (default), as Eval-DU's code: one run of
            the grid's largest T with 1 warm-up step, linear decay over that run and weight decay 0.01, read at
            every T (and ``npo`` on Eval-DU's 500-token padded layout); "separate": each T its own run from θ₀
            (dukb's earlier default). Presets keep their own (:attr:`dukb.neural.methods.Preset.schedule`).
        attacks: attacks applied to every unlearned model after its probe, ``NAME`` or ``NAME:key=value:...``
            (:data:`dukb.neural.attacks.ATTACKS`; each row gets an ``attacks`` dict and ``recall_under_attack``
            becomes the worst case over forms and attacks). Their settings are part of the run identity.
    """

    targets: list[int] | None = None
    n_targets: int = 11
    methods: list[str] = field(default_factory=lambda: list(DEFAULT_METHODS))
    grids: dict[str, list] = field(default_factory=dict)
    sets: str = "exact"
    seeds: int = 100
    forget_scope: str = "target"
    metrics: list[str] = field(default_factory=lambda: list(DEFAULT_METRICS))
    heldout_forms: list[str] | None = None
    heldout_rule: str = "pairs"
    finetune_forms: list[str] = field(default_factory=lambda: ["qa"])
    schedule: str = "reference"
    attacks: list[str] = field(default_factory=list)

    def check(self) -> "EvaluateConfig":
        """Validate every field that the protocol would otherwise read later or silently reinterpret (the Python
        API gets the same checks as the command line).

        Returns:
            self, with ``finetune_forms`` and ``heldout_forms`` resolved to probe kinds (:func:`dukb.kb.probes.parse_kinds`).

        Raises:
            InputError: ``sets`` not exact/random; ``seeds``, ``n_targets``, ``batch_size`` or ``finetune_epochs``
                below 1; an unknown ``prompt``, ``forget_scope`` or ``schedule``; a bad ``layers`` range; LoRA
                values out of range; unknown probe forms, or ``finetune_forms`` without qa; no method.
        """
        from dukb.kb.probes import parse_kinds
        from dukb.neural.methods.base import SWEEP_SCHEDULES
        from dukb.solver.scopes import FORGET_SCOPES

        self.check_run()
        if self.sets not in ("exact", "random"):
            raise InputError(f"--sets must be exact or random, got {self.sets!r}")
        for name, v in (("--seeds", self.seeds), ("--n-targets", self.n_targets)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise InputError(f"{name} must be at least 1, got {v}")
        if self.forget_scope not in FORGET_SCOPES:
            raise InputError(f"unknown forget scope {self.forget_scope!r} (choose from {', '.join(FORGET_SCOPES)})")
        if self.schedule not in SWEEP_SCHEDULES:
            raise InputError(f"--schedule must be one of {', '.join(SWEEP_SCHEDULES)}, got {self.schedule!r}")
        if not self.methods:
            raise InputError("no unlearning method given")
        if self.attacks:
            from dukb.neural.attacks import parse_attacks

            parse_attacks(self.attacks)
        if not list(self.finetune_forms) or (self.heldout_forms is not None and not list(self.heldout_forms)):
            raise InputError("--finetune-forms and --heldout-forms need at least one probe form")
        self.finetune_forms = list(parse_kinds(list(self.finetune_forms)))
        if "qa" not in self.finetune_forms:
            raise InputError("--finetune-forms must include qa: recall and accuracy are the paper's, on the qa form")
        if self.finetuned and self.finetune_forms != ["qa"]:
            raise InputError("--finetune-forms applies to finetuning, which --finetuned skips (the model given was "
                             "finetuned already)")
        from dukb.neural.metrics.heldout import HELDOUT_RULES

        if self.heldout_rule not in HELDOUT_RULES:
            raise InputError(f"--heldout-rule must be one of {', '.join(HELDOUT_RULES)}, got {self.heldout_rule!r}")
        if self.heldout_forms is not None:  # every built-in method trains on qa
            from dukb.neural.metrics.heldout import check_heldout

            self.heldout_forms = list(check_heldout(self.heldout_forms, ("qa",)))
        return self


def _retain_defaults() -> dict:
    """The retain-data settings of GDR/KLR, read from where they are defined (:func:`dukb.neural.unlearn.default_retain`'s
    ``n``, :class:`dukb.neural.methods.base.UnlearnContext`'s ``retain_batch_size`` and ``reg_weight``), so the run
    identity records what runs, never a copy."""
    import dataclasses
    import inspect

    from dukb.neural.methods.base import UnlearnContext
    from dukb.neural.unlearn import default_retain

    ctx = {f.name: f.default for f in dataclasses.fields(UnlearnContext)}
    return {"n": inspect.signature(default_retain).parameters["n"].default, "batch_size": ctx["retain_batch_size"],
            "reg_weight": ctx["reg_weight"]}


def _probe_defaults() -> dict:
    """The probing settings, read from :mod:`dukb.neural.probe` (the generation budget) and :func:`evaluate`'s own
    probe batch size, so the run identity records what runs."""
    from dukb.neural.probe import DEFAULT_MAX_NEW_TOKENS

    return {"kinds": ["qa"], "max_new_tokens": DEFAULT_MAX_NEW_TOKENS, "judge": "substring", "answer": "line",
            "batch_size": PROBE_BATCH_SIZE}


#: Prompts per probing batch in evaluate.
PROBE_BATCH_SIZE = 256
#: Settings of the protocol that are fixed in code but change rows: part of every run identity.
#: Retain data of GDR/KLR (:func:`dukb.neural.unlearn.default_retain`, :class:`UnlearnContext` defaults).
RETAIN = _retain_defaults()
#: Identity keys a resume may add entries to: targets, methods, and values to a method's grid (a row depends on its
#: own grid value only: each T of a gradient method is its own run from θ₀, each α its own weights; under the
#: reference schedule also on the run's length N, ``schedule_steps`` in the method's entry, which must not change).
EXTENDABLE = ("targets", "methods", "methods.*.grid")
#: Probing: the paper's question form, greedy decoding of 10 tokens, substring rule.
PROBE = _probe_defaults()


def _model_spec(cfg: RunConfig):
    """The :class:`ModelSpec` to finetune (``cfg.model``) or to load (``cfg.finetuned``):
    :meth:`dukb.neural.runconfig.RunConfig.model_spec`."""
    return cfg.model_spec()


def method_identity(m, scope: str, grid, schedule: str = "separate", family: str | None = None,
                    lr: float | None = None) -> dict:
    """A ``methods`` entry of a run identity: method, parameter, scope, grid; NPO's form (``npo`` and
    ``npo_seq`` compute different losses); for a step grid under the reference schedule, ``schedule`` and
    ``schedule_steps`` (the one run's length N = the grid's largest T, on which every row depends). The schedule
    keys are absent under "separate" (such an entry reads as it did before the option existed). ``lr``: the
    family's default rate where it differs from the rates runs used before identities recorded them
    (:func:`dukb.neural.families.identity_lr`; ``family`` and the run's ``lr`` override decide)."""
    from dukb.neural.families import identity_lr

    entry = {"method": m.name, "param": m.param, "scope": scope,
             "grid": [int(v) if m.param == "steps" else float(v) for v in grid]}
    rate = identity_lr(m, family, lr)
    if rate is not None:
        entry["lr"] = rate
    if getattr(m, "form", None):
        entry["form"] = m.form
    if schedule == "reference" and m.param == "steps":
        entry["schedule"] = "reference"
        entry["schedule_steps"] = max([int(v) for v in grid], default=0)
    return entry


def run_identity(cfg: EvaluateConfig, kb, closure, methods, grids: dict, targets: list[int], spec, dtype: str,
                 metrics=(), schedules: dict | None = None) -> dict:
    """The identity of an evaluate run: every setting that changes a result row (see :mod:`dukb.neural.runs`).

    Keys: kb and rules fingerprints; model (the finetuned weights' hash, or the base model's fingerprint and the
    resolved finetuning config); dtype; the preset family (it chooses learning rates and grids); prompt tags;
    lora; seed; lr; sets (method, N_seed, exact limits); retain
    and probe settings; the metrics; targets and methods (label -> :func:`method_identity`): targets, methods
    and each method's grid are extendable (:data:`EXTENDABLE`). ``schedules`` (label -> "separate" or
    "reference") are the sweep schedules the caller runs; None (callers running their own sweeps, e.g. rwku): every
    method "separate".

    Raises:
        InputError: a model file cannot be read.
    """
    from dataclasses import asdict as _asdict

    from dukb.neural.models import TINY_CONFIG, model_fingerprint
    from dukb.neural.pipeline import finetune_config
    from dukb.neural.plan import EXACT_LIMITS
    from dukb.neural.runs import IDENTITY_VERSION

    if cfg.finetuned:
        model = {"finetuned": model_fingerprint(cfg.finetuned)}
    else:
        base = {"tiny": TINY_CONFIG} if cfg.model == "tiny" else model_fingerprint(cfg.model)
        preset, fcfg = finetune_config(spec, None, cfg.finetune_epochs, None, cfg.batch_size, cfg.seed)
        model = {"base": base, "finetune": {"preset": preset, **_asdict(fcfg)}}
        if list(cfg.finetune_forms) != ["qa"]:  # only when set, so that earlier identities stay equal
            model["finetune"]["forms"] = list(cfg.finetune_forms)
    lora = spec.lora
    return {
        "identity_version": IDENTITY_VERSION,
        "kb": kb.fingerprint(), "rules": closure.rules.fingerprint, "model": model, "dtype": dtype,
        "family": spec.preset_family, "prompt": _asdict(spec.tags), "lora": None if lora is None else _asdict(lora), "seed": cfg.seed,
        "lr": cfg.lr, "sets": {"method": cfg.sets, "seeds": cfg.seeds, "exact_limits": EXACT_LIMITS},
        "retain": RETAIN, "probe": PROBE, "metrics": [m.name for m in metrics], "targets": list(targets),
        "methods": {label: method_identity(m, scope, grids[label], (schedules or {}).get(label, "separate"),
                                           spec.preset_family, cfg.lr)
                    for label, m, scope, _g in methods},
        # only when set, so that the identities of runs made before the option existed stay equal
        **({"layers": list(parse_layers(cfg.layers))} if cfg.layers else {}),
        **({"heldout_forms": None if cfg.heldout_forms is None else list(cfg.heldout_forms),
            "heldout_rule": cfg.heldout_rule} if any(m.name == "recall_heldout" for m in metrics) else {}),
        **({"attacks": _attack_identity(cfg.attacks)} if getattr(cfg, "attacks", None) else {}),
    }


def _attacks_of(cfg: EvaluateConfig, lm):
    """The run's parsed attacks and, when one compares with the model before unlearning, a Predictor over a copy
    of θ₀ (the sweep changes ``lm``'s weights in place and restores them; the copy costs one model's memory)."""
    if not cfg.attacks:
        return None, None
    from dukb.neural.attacks import parse_attacks

    attacks = parse_attacks(cfg.attacks)
    if not any(a.needs_reference for a, _s in attacks):
        return attacks, None
    import copy

    from dukb.neural.probe import Predictor

    return attacks, Predictor(copy.deepcopy(lm.model), lm.tokenizer, lm.tags, device=lm.device)


def _attack_identity(specs) -> dict:
    """The attacks' part of a run identity: name -> settings (:func:`dukb.neural.attacks.attack_identity`)."""
    from dukb.neural.attacks import attack_identity, parse_attacks

    return attack_identity(parse_attacks(specs))


def finetune_cache_key(identity: dict) -> dict:
    """What a run's finetuned model depends on, stored in its finetune.json and compared before reuse: the base
    model and finetuning config, the KB's fingerprint, LoRA, dtype and prompt tags (a cache made with any other
    value is finetuned again, even when the run's config.json was never written)."""
    return {"model": identity["model"], "kb": identity["kb"], "lora": identity["lora"], "dtype": identity["dtype"],
            "prompt": identity["prompt"]}


@holds_run_lock  # RUN_DIR/run.lock, taken by claim_run, is held until evaluate returns
def evaluate(run_dir, config: EvaluateConfig | None = None, *, resume: bool = True, progress: bool = False,
             log=print):
    """Run (or resume) the evaluate protocol into ``run_dir`` and render the report.

    Args:
        run_dir: output directory (created).
        config: :class:`EvaluateConfig` (default: the built-in default run).
        resume: reuse rows, sets and the finetuned model already in ``run_dir``; with False an existing
            results.jsonl is an error.
        progress: rich progress bars.
        log: callable(str) for one-line progress summaries.

    Returns:
        pandas DataFrame of all result rows (one per target, method, setting).

    Raises:
        InputError: bad configuration, a run_dir holding a different run, or results present without ``resume``;
            run_dir in use by another process with other settings (or without ``resume``; with the same settings
            and ``resume`` this waits for it, :func:`dukb.neural.runs.claim_run`).

    Source: Wu et al. 2025, Sec. 4 and App. C/H (protocol), Eq. 1-2 (metrics).
    """
    import pandas as pd

    from dukb.kb import load_kb
    from dukb.neural import distributed as dist
    from dukb.neural.data import kb_qa
    from dukb.neural.models import load_model, resolve_device, resolve_dtype
    from dukb.neural.pipeline import finetune_kb, finetune_record, load_finetuned
    from dukb.neural.report import render
    from dukb.neural.runs import claim_run, history_entry, provenance, write_json_atomic
    from dukb.neural.unlearn import sweep_target
    from dukb.solver.closure import compute_closure

    cfg = (config or EvaluateConfig()).check()
    run = Path(run_dir)
    t_start = time.perf_counter()
    device = resolve_device(cfg.device)  # cuda:LOCAL_RANK under a multi-process launch
    main = dist.is_main_process()
    if dist.is_distributed():
        rank_log = log

        def log(msg: str) -> None:
            rank_log(f"[rank {dist.rank()}/{dist.world_size()}] {msg}")

    # 1. plan (symbolic): KB, closure, targets, run identity, minimal sets and forget sets
    if cfg.kb is None:
        from dukb.kb.generate import default_generated_kb_dir

        kb_dir = default_generated_kb_dir()
    else:
        kb_dir = cfg.kb
    kb = load_kb(kb_dir)
    fp = kb.fingerprint()
    closure = compute_closure(kb, cfg.rules)
    from dukb.neural.methods import method_grids, resolve
    from dukb.neural.metrics import combined_needs, parse_metrics, row_metrics
    from dukb.neural.metrics.heldout import check_heldout, elicited_by_form, heldout_known
    from dukb.neural.metrics.recall import success_du
    from dukb.neural.plan import build_plan, choose_targets

    methods = [tuple(resolve(m, cfg.forget_scope)) for m in cfg.methods]
    metrics = parse_metrics(cfg.metrics)
    if not methods:
        raise InputError("no unlearning method given")
    if len({label for label, *_ in methods}) != len(methods):
        raise InputError("a method is listed twice in --methods")
    grids = method_grids(methods, cfg.grids)
    seen_any = tuple(dict.fromkeys(("qa",) + tuple(k for _l, m, _s, _g in methods for k in m.seen_forms)))
    if any(m.name == "recall_heldout" for m in metrics):  # refused before anything runs: a form some method sees
        check_heldout(cfg.heldout_forms, seen_any)
    targets = list(dict.fromkeys(cfg.targets)) if cfg.targets else choose_targets(kb, cfg.n_targets, cfg.seed)
    for t in targets:
        closure.atom_of_fact(t)
    spec = _model_spec(cfg)
    dtype = str(resolve_dtype(cfg.dtype, device)).removeprefix("torch.")
    from dukb.neural.methods import schedule_for
    from dukb.neural.methods.base import SWEEP_SCHEDULES, SweepSchedule

    if cfg.schedule not in SWEEP_SCHEDULES:
        raise InputError(f"unknown schedule {cfg.schedule!r} (choose from {', '.join(SWEEP_SCHEDULES)})")
    schedules = {label: schedule_for(label, cfg.schedule) for label, *_r in methods}
    identity = run_identity(cfg, kb, closure, methods, grids, targets, spec, dtype, metrics, schedules)
    # one writer: locks the directory, refuses a run with other settings before anything in it is touched
    identity, added, old_record = claim_run(run, "evaluate", identity, extendable=EXTENDABLE, resume=resume, log=log)
    grown = [k.split(".")[1] for k in added if k.startswith("methods.") and k.endswith(".grid")]
    left_out = [t for t in identity["targets"] if t not in targets]
    if grown and left_out:  # a setting must cover the same targets as the others on its method's curve
        raise InputError(f"adding grid values to {', '.join(grown)} needs every target of the run, but "
                         f"{len(left_out)} of its {len(identity['targets'])} targets are not in this invocation "
                         f"({', '.join(map(str, left_out[:5]))}{', ...' if len(left_out) > 5 else ''}); resume with "
                         "the run's targets (the same --n-targets, --targets or --targets-file)", run / "config.json")
    run.mkdir(parents=True, exist_ok=True)
    cfg_path = run / "config.json"
    # one process writes results.jsonl; under a multi-process launch each writes its shard, merged at the end
    mine_path = run / (f"results.rank{dist.rank()}.jsonl" if dist.is_distributed() else "results.jsonl")
    if not resume and (mine_path.exists() or (run / "results.jsonl").exists() or any(run.glob(SHARD_GLOB))):
        raise InputError(f"{run} already holds results; pass --resume to continue it or choose another -o")
    # a second invocation with the same settings joins a live run as another worker (runs.open_to_workers): it
    # neither repairs results.jsonl nor rewrites config.json and the caches, which the run's owner did
    joined = run_role(run) == "worker"
    if joined:
        log("joined the run as another worker: units (target, method) are claimed in RUN_DIR/units")
    results = ResultsFile(mine_path, repair=not joined)  # repairs a torn last line of this process's own file
    dist.barrier(device)  # every process has repaired its file before any reads the others
    results.absorb([run / "results.jsonl", *sorted(run.glob(SHARD_GLOB))])
    all_labels = list(identity["methods"])
    record = {"protocol": "evaluate", **asdict(cfg), "kb": str(kb.source), "kb_fingerprint": fp,
              "rules_fingerprint": closure.rules.fingerprint, "targets": identity["targets"],
              "n_targets": len(identity["targets"]), "methods": all_labels,
              "scopes": {label: identity["methods"][label]["scope"] for label in all_labels},
              "grids": {label: identity["methods"][label]["grid"] for label in all_labels},
              "identity": identity,
              "history": old_record.get("history", []) + [history_entry(added, targets=targets,
                                                                        methods=[lb for lb, *_ in methods])]}
    if added:
        log("adding to the run: " + "; ".join(f"{k} {', '.join(map(str, v))}" for k, v in added.items()))
    dist.barrier(device)  # every process has read the old state before anyone writes
    scopes = [scope for _label, _m, scope, _g in methods]
    if main:
        plan = build_plan(run, kb, closure, targets, scopes, sets_method=cfg.sets, seeds=cfg.seeds, seed=cfg.seed,
                          write=not joined)
    dist.barrier(device)
    if not main:  # the caches process 0 just wrote
        plan = build_plan(run, kb, closure, targets, scopes, sets_method=cfg.sets, seeds=cfg.seeds, seed=cfg.seed,
                          write=False)
    sets = plan.sets
    log(f"KB {kb.source}: {len(kb.relationships)} relationship + {len(kb.biographies)} biography facts; "
        f"closure {len(closure)}; {len(targets)} targets; sets {cfg.sets}")

    # 2. model: finetune (cached under its identity) or load
    model_key = finetune_cache_key(identity)
    if cfg.finetuned:
        lm = load_model(spec)
        from dukb.neural.pipeline import finetune_record

        ft = finetune_record(cfg.finetuned) or {}
        record["model"] = cfg.finetuned
    else:
        ft_dir = run / "finetuned"
        ft = finetune_record(ft_dir)
        if ft is None or ft.get("identity") != model_key:  # a cache made with other settings is redone
            # data parallel under a multi-process launch; process 0 saves
            finetune_kb(kb, spec, ft_dir, epochs=cfg.finetune_epochs, batch_size=cfg.batch_size, seed=cfg.seed,
                        progress=progress, log=log, identity=model_key,
                        items=None if list(cfg.finetune_forms) == ["qa"] else kb_qa(kb, tuple(cfg.finetune_forms)))
        lm = load_finetuned(ft_dir, dtype=cfg.dtype, device=cfg.device, trust_remote_code=cfg.trust_remote_code,
                            gradient_checkpointing=cfg.gradient_checkpointing, lora=spec.lora)
        ft = finetune_record(ft_dir)
        record["model"] = cfg.model
    record["provenance"] = provenance(lm.device, gradient_checkpointing=cfg.gradient_checkpointing,
                                      probe_batch_size=PROBE["batch_size"])
    # kept at the top level for readers of earlier runs
    record["versions"] = record["provenance"]["versions"]
    record["device_used"] = record["provenance"]["device"]  # "device" keeps the configured value
    record["world_size"] = dist.world_size()
    if main and not joined:
        write_json_atomic(cfg_path, record)
        write_json_atomic(run / "finetune.json", ft)
    row_metrics_ = row_metrics(metrics)
    heldout = any(m.name == "recall_heldout" for m in row_metrics_)
    kinds = combined_needs(row_metrics_).kinds  # the probe kinds the metrics need ("qa" first)
    if heldout and cfg.heldout_forms:
        kinds = tuple(dict.fromkeys(kinds + tuple(cfg.heldout_forms)))
    items = kb_qa(kb, kinds)
    from dukb.neural.probe import Predictor, probe

    # the baseline covers every form some row may be scored on (each row then keeps its own held-out forms)
    base_forms = set(check_heldout(cfg.heldout_forms, ("qa",))) if heldout else set()
    base = probe(Predictor(lm.model, lm.tokenizer, lm.tags, device=lm.device),
                 [it for it in items if it.kind == "qa" or it.kind in base_forms], rouge=False, logprob=False)
    acc0 = float(base[base["kind"] == "qa"]["known"].mean())
    attacks, reference = _attacks_of(cfg, lm)
    log(f"model {record['model']}: knows {acc0:.4f} of the KB before unlearning")
    heldout_before = elicited_by_form(base, base_forms) if heldout else None
    if heldout:  # how much of the KB the held-out forms elicit before unlearning: recall_heldout's baseline
        record["heldout_known_before"] = heldout_known(kb, base, sorted(base_forms, key=list(kinds).index))
        log(f"held-out forms elicit {record['heldout_known_before']['all']:.4f} of the KB before unlearning")
        if main and not joined:
            write_json_atomic(cfg_path, record)
    if heldout and cfg.heldout_rule == "pairs":  # after unlearning only the pairs that elicited before are evidence
        others = set(combined_needs([m for m in row_metrics_ if m.name != "recall_heldout"]).kinds) | {"qa"}
        items = [it for it in items if it.kind in others or (it.kind, it.fact_kind, it.fact_id) in heldout_before]
    if acc0 < 1.0:
        log("warning: the model does not know the whole KB; recall counts facts it never knew as forgotten")

    # 3. sweep -> probe -> metrics, streamed per setting (this process's share of the targets under a
    # multi-process launch); 4. report
    from dukb.neural.runs import UnitClaims, claimed_units, open_to_workers, worker_id

    worker = worker_id()
    # work units: (target, method), claimed atomically so that any number of processes share the run (one process:
    # every claim is its own); under a multi-process launch the targets are sharded instead
    claims = None if dist.is_distributed() else UnitClaims(run, worker)
    if claims is not None:
        open_to_workers(run)  # config.json, the caches and the model are on disk: others may join
    my_targets = dist.shard(targets)
    total = len(my_targets) * sum(len(g) for g in grids.values())
    bar = None
    if progress and main:
        from rich.progress import Progress

        bar = Progress()
        bar.start()
        done_mine = sum((t, label, float(v)) in results.done for t in my_targets for label, *_ in methods
                        for v in grids[label])
        task = bar.add_task("unlearning", total=total, completed=done_mine)
    try:
        # with claims, a second pass takes over the units of workers that ended (killed) while this one ran
        by_label = {label: (m, scope) for label, m, scope, _g in methods}
        units = [(t, label) for t in my_targets for label, *_r in methods]

        def pending(unit) -> list:
            t, label = unit
            return [v for v in grids[label] if (t, label, float(v)) not in results.done]

        for (t, label), todo in claimed_units(claims, results, units, pending):
            fact = kb.relationship(t)
            m, scope = by_label[label]
            entry = identity["methods"][label]  # the reference run's length: the grid's largest T, never todo's
            schedule = SweepSchedule("reference", entry["schedule_steps"] or None) \
                if entry.get("schedule") == "reference" else None
            for row in sweep_target(lm, kb, closure, t, m.name, todo,
                                    sets=(sets[t]["sets"], sets[t]["sets_used"]), seed=cfg.seed, lr=cfg.lr,
                                    lora=spec.lora, layers=parse_layers(cfg.layers),
                                    probe_items=items, scope=scope,
                                    forget_ids=plan.forget[(t, scope)], batch_size=PROBE["batch_size"],
                                    metrics=row_metrics_, heldout_forms=cfg.heldout_forms,
                                    heldout_before=heldout_before, heldout_rule=cfg.heldout_rule,
                                    schedule=schedule, attacks=attacks, reference=reference):
                row["method"] = label
                row["worker"] = worker
                row["target_relation"] = fact.relation
                row["n_kb_rel"] = len(kb.relationships)
                row["n_kb_bio"] = len(kb.biographies)
                if "forgotten_relationships" in row:  # Success-DU (Definition 2): t not in Ω(K \ U_A, R)
                    row["success_du"] = success_du(closure, t, row["forgotten_relationships"])
                if "forgotten_relationships_heldout" in row:  # the same, judged on held-out forms
                    row["success_du_heldout"] = success_du(closure, t, row["forgotten_relationships_heldout"])
                results.append(row)
                if claims is not None:
                    claims.heartbeat((t, label))
                if bar is not None:
                    bar.advance(task)
            mine = [r for r in results.rows if r["target"] == t and r["method"] == label]
            if "recall" not in mine[0]:
                continue
            best = max(mine, key=lambda r: (r["recall"], r["accuracy_all"]))
            log(f"target {t} ({fact.subject}, {fact.relation}, {fact.object}) {label}: best recall "
                f"{best['recall']:.2f} at accuracy {best['accuracy_all']:.2f}; target forgotten in "
                f"{sum(r['target_forgotten'] for r in mine)}/{len(mine)} settings")
    finally:
        if bar is not None:
            bar.stop()
        if claims is not None:
            claims.close()
    dist.barrier(device)
    if main:
        pos = {t: i for i, t in enumerate(targets)}
        labels = {label: i for i, (label, *_r) in enumerate(methods)}
        merge_shards(run, order=lambda r: (pos.get(int(r["target"]), len(pos)), labels.get(r["method"], len(labels)),
                                           float(r["setting"][r["param"]])))
        from dukb.neural.runs import render_lock

        with render_lock(run):  # workers sharing the run render one after the other
            paths = render(run)
        log(f"done in {time.perf_counter() - t_start:.1f} s: report {paths['report']}")
    dist.barrier(device)
    final = run / "results.jsonl"
    return pd.DataFrame(read_results(final) if final.exists() else [])
