"""`dukb muse`: MUSE's six-way evaluation (Shi et al. 2024b) on a KB, resumable.

Stages (each consumes the previous one's output):

1. **plan** (symbolic): KB, closure, the run's targets; the base split (holdout and retain pools,
   :func:`dukb.solver.splits.base_split`, the holdout kept outside every target's cone); one forget set per request
   (a minimum joint deep unlearning set of the request's targets, :func:`dukb.solver.splits.forget_set`). Requests:
   ``main`` (the first ``n_targets`` targets), ``scale-c`` (the first c targets, c ∈ ``scale_sizes``: C5) and
   ``sustain-k`` (sequential requests whose cumulative forget sets are the scalability sets: C6). splits.json
   records every fact id of every split.
2. **models**: f_target finetuned on the QA pairs and statement texts of every trained fact (the KB minus the
   holdout: the knowledge KnowMem asks about is installed here, the only stage that trains a QA pair); f_retrain
   finetuned the same way, same preset and seed, on the trained facts minus a request's forget set, cached per
   forget set under ``RUN_DIR/models/``.
3. **sweep**: every method over its grid from f_target, unlearning the forget facts' statement texts alone (MUSE
   unlearns on the forget corpus D_forget; its QA sets are evaluation-only), with the retain_train facts' statement
   texts (MUSE's D_retain^(reg)) as the regulariser's data. No KnowMem QA pair is trained by unlearning; rows record
   what was trained (``trained_forms``, ``trained_fact_ids``) and what was scored (``scored_forms``).
4. **metrics** per model: VerbMem on the forget texts, KnowMem on forget and retain_eval QA, MIA AUCs (LOSS, Zlib,
   Min-K%, Min-K%++; forget vs holdout and retain_eval vs holdout) and PrivLeak against f_retrain
   (:mod:`dukb.neural.metrics.muse`). One row per model, written at once.
5. **report**: :mod:`dukb.neural.muse_report` (Table 3 layout, ratios to f_retrain, bootstrap CIs, the selection
   rule, C5/C6 curves, ROC).

Source: Shi et al. 2024b (MUSE), Sec. 2-4; Wu et al. 2025, Definition 2 (joint deep unlearning sets).
"""

from __future__ import annotations

import copy
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from dukb import InputError
from dukb.neural.runconfig import RunConfig
from dukb.neural.runs import holds_run_lock

#: MUSE's eight methods (Shi et al. 2024b, Sec. 4)
MUSE_METHODS = ("ga", "ga_gdr", "ga_klr", "npo", "npo_gdr", "npo_klr", "tv", "whp")
#: MUSE runs C5/C6 for GA, NPO and their regularised variants
CURVE_METHODS = ("ga", "ga_gdr", "npo", "npo_gdr")
#: version of what `dukb muse` unlearns on, in its run identity (1: the forget QA pairs and texts, retain QA and
#: texts; 2: the statement texts alone): a run of another version is not resumed
MUSE_TRAINING_VERSION = 2
#: what each MUSE metric scores: KnowMem the QA pairs (evaluation-only), VerbMem and the MIA the statement texts
SCORED_FORMS = {"knowmem": ["qa"], "verbmem": ["statement"], "mia": ["statement"]}


@dataclass
class MuseConfig(RunConfig):
    """Everything that defines a `dukb muse` run (the row-changing part is its identity).

    Attributes:
        kb, rules, model, seed, lr, device, dtype, prompt, finetune_epochs, batch_size, LoRA, layers,
            gradient_checkpointing, trust_remote_code: the shared options
            (:class:`dukb.neural.runconfig.RunConfig`); ``model`` is the base model finetuned into f_target and
            every f_retrain.
        finetuned: use this directory as f_target instead of finetuning it (MUSE's released target models); its
            training data must leave out the holdout facts (the MIA non-members, splits.json), which dukb cannot
            check: the run identity records its fingerprint as ``f_target``. f_retrain is still finetuned from ``model``.
        targets: explicit target fact_ids (None: drawn with the seed, relation kinds in turn).
        n_targets: targets of the main request.
        methods: methods of the main table (:data:`dukb.neural.methods.METHODS` names or presets).
        curve_methods: methods of the scalability and sustainability experiments (gradient methods).
        grids: method -> grid override.
        scale_sizes: forget-set sizes in targets for C5 (empty: no C5/C6); cumulative request sizes for C6.
        sustain: run the sequential requests (C6).
        forget_scope: "joint" (minimum joint deep unlearning set of the request's targets) or "target".
        holdout_frac, retain_train_frac: split shares (:func:`dukb.solver.splits.base_split`).
        mia_k: Min-K% share (0.4: MUSE's code reads PrivLeak off ``forget_holdout_Min-40%``, swj0419/muse_bench
            eval.py; the paper gives no K); verbmem_prefix: VerbMem prefix share; verbmem_tokens, knowmem_tokens: decoding budgets;
            verbmem_temperature: VerbMem decoding (0 = greedy, > 0 = sampling with the run seed); verbmem_stemming:
            stem words before VerbMem's ROUGE-L. Defaults as MUSE's code (swj0419/muse_bench eval.py): 128 tokens,
            no stemming.
        select: selection rule (:data:`dukb.neural.metrics.muse.SELECTION_RULES`), used by the report and by C6.
        bootstrap: bootstrap resamples for the confidence intervals (MUSE: 9,999).
    """

    targets: list[int] | None = None
    n_targets: int = 1
    methods: list[str] = field(default_factory=lambda: list(MUSE_METHODS))
    curve_methods: list[str] = field(default_factory=lambda: list(CURVE_METHODS))
    grids: dict[str, list] = field(default_factory=dict)
    scale_sizes: list[int] = field(default_factory=lambda: [1, 2, 4, 8, 16])
    sustain: bool = True
    forget_scope: str = "joint"
    holdout_frac: float = 0.1
    retain_train_frac: float = 0.5
    mia_k: float = 0.4
    verbmem_prefix: float = 0.5
    verbmem_tokens: int = 128
    verbmem_temperature: float = 0.0
    verbmem_stemming: bool = False
    knowmem_tokens: int = 10
    select: str = "first_below_retrain"
    bootstrap: int = 9999

    def check(self) -> None:
        """Raises InputError on settings outside their ranges."""
        from dukb.neural.metrics.muse import SELECTION_RULES

        self.check_run()
        if self.n_targets < 1:
            raise InputError("--n-targets must be at least 1")
        if any(c < 1 for c in self.scale_sizes) or list(self.scale_sizes) != sorted(set(self.scale_sizes)):
            raise InputError("--scale-sizes must be increasing positive integers")
        if not 0 < self.verbmem_prefix < 1:
            raise InputError(f"--verbmem-prefix must be in (0, 1), got {self.verbmem_prefix}")
        if not 0 < self.mia_k <= 1:
            raise InputError(f"--mia-k must be in (0, 1], got {self.mia_k}")
        if self.select not in SELECTION_RULES:
            raise InputError(f"unknown --select {self.select!r} (choose from {', '.join(SELECTION_RULES)})")
        if self.forget_scope not in ("joint", "target"):
            raise InputError(f"unknown --forget-scope {self.forget_scope!r} (choose joint or target)")
        if not 0 < self.retain_train_frac < 1:
            raise InputError(f"--retain-train must be in (0, 1): retain_train feeds the regularisers, retain_eval "
                             f"the utility; got {self.retain_train_frac}")
        if self.verbmem_tokens < 1 or self.knowmem_tokens < 1:
            raise InputError("the decoding budgets must be at least 1 token")
        if self.verbmem_temperature < 0:
            raise InputError("--verbmem-temperature must be >= 0")
        if self.bootstrap < 1:
            raise InputError("--bootstrap must be at least 1")


def _lr_entry(m, family, lr) -> dict:
    """``{"lr": rate}`` when the run identity must record the method's resolved rate
    (:func:`dukb.neural.families.identity_lr`), else {}."""
    from dukb.neural.families import identity_lr

    rate = identity_lr(m, family, lr)
    return {} if rate is None else {"lr": rate}


def muse_row_key(row: dict) -> tuple:
    """(request, model kind, method label, swept value) identifying a `dukb muse` row."""
    setting = row.get("setting") or {}
    v = setting.get(row.get("param")) if row.get("param") else None
    return (row["request"], row["model_kind"], row.get("method") or "", None if v is None else float(v))


def plan_requests(cfg: MuseConfig, targets: list[int]) -> list[dict]:
    """The run's requests: name, experiment, targets, and (sustainability) the request it continues from.

    ``main``: the first n_targets targets. ``scale-c``: the first c targets. ``sustain-k``: the k-th fold, the targets
    between consecutive scalability sizes, continuing from the model unlearned on ``sustain-(k-1)``; its cumulative
    forget set equals ``scale-c``'s (the sets are built fold by fold, see :func:`run_muse`), so the two experiments
    share f_retrain models.

    Returns:
        list of dicts: name, experiment ("main", "scalability", "sustainability"), targets (fact_ids),
        cumulative (the request whose forget set it is scored against), after (sustainability: the previous one).

    Raises:
        nothing (the targets are checked by the caller).

    Source: Shi et al. 2024b (MUSE), Sec. 3, C5 and C6.
    """
    reqs = [{"name": "main", "experiment": "main", "targets": targets[:cfg.n_targets], "cumulative": "main"}]
    for c in cfg.scale_sizes:
        reqs.append({"name": f"scale-{c}", "experiment": "scalability", "targets": targets[:c],
                     "cumulative": f"scale-{c}"})
    if cfg.sustain and cfg.scale_sizes:
        lo = 0
        for k, c in enumerate(cfg.scale_sizes, 1):
            reqs.append({"name": f"sustain-{k}", "experiment": "sustainability", "targets": targets[lo:c],
                         "cumulative": f"scale-{c}", "after": f"sustain-{k - 1}" if k > 1 else None})
            lo = c
    return reqs


def _items_for(kb, keys):
    """QA items and statement texts of the facts ``keys`` ({"relationships", "biographies"} dict)."""
    from dukb.neural.data import QA_KIND, kb_qa, kb_texts

    want = {("relationship", i) for i in keys.get("relationships", ())} | \
           {("biography", i) for i in keys.get("biographies", ())}
    qa = [it for it in kb_qa(kb) if (it.fact_kind, it.fact_id) in want and it.kind == QA_KIND]
    return qa, kb_texts(kb, want)


def _auc(members, nonmembers) -> float | None:
    """Member-positive AUC over the scores that are numbers (an item with no scored token has NaN); None when a
    side is empty."""
    from dukb.neural.metrics.mia import auc

    m = [x for x in members if x == x]
    n = [x for x in nonmembers if x == x]
    return auc(m, n) if m and n else None


def model_metrics(pred, kb, splits, cfg: MuseConfig, *, retrain_auc: float | None = None) -> dict:
    """Every MUSE metric of one model on one request's splits.

    Returns:
        verbmem_forget, knowmem_forget, knowmem_retain (means in [0, 1]); mia_auc_forget / mia_auc_retain
        (score name -> member-positive AUC against the holdout: the holdout's relationship statements for the
        forget set, all its statements for retain_eval); mia_auc (the Min-K% forget AUC); privleak
        (fraction, vs ``retrain_auc``; None without it); ``items`` (the per-item values, for bootstrap CIs) and
        ``mia`` (per-text Min-K% scores of forget, retain_eval and holdout, for ROC plots); per-item values are
        rounded to 4 decimals.

    Source: Shi et al. 2024b (MUSE), Sec. 3 (C1-C4).
    """
    from dukb.neural.metrics.mia import privleak
    from dukb.neural.metrics.muse import knowmem, text_mia_scores, verbmem

    f_qa, f_txt = _items_for(kb, splits.forget)
    r_qa, r_txt = _items_for(kb, splits.retain_eval)
    _h_qa, h_txt = _items_for(kb, splits.holdout)
    vm = verbmem(pred, [t.answer for t in f_txt], cfg.verbmem_prefix, cfg.verbmem_tokens,
                 temperature=cfg.verbmem_temperature, seed=cfg.seed, stem=cfg.verbmem_stemming)
    km_f = knowmem(pred, f_qa, cfg.knowmem_tokens)
    km_r = knowmem(pred, r_qa, cfg.knowmem_tokens)
    s_f = text_mia_scores(pred, f_txt, cfg.mia_k)
    s_r = text_mia_scores(pred, r_txt, cfg.mia_k)
    s_h = text_mia_scores(pred, h_txt, cfg.mia_k)
    mean = (lambda xs: sum(xs) / len(xs) if xs else None)
    # the forget members are relationship statements: their non-members are the holdout's relationship statements
    # (biographies use another template, a distribution shift MUSE's footnote 3 warns of); all of the holdout when it
    # holds no relationship
    rel = [i for i, t in enumerate(h_txt) if t.fact_kind == "relationship"] or list(range(len(h_txt)))
    s_h_rel = {k: [v[i] for i in rel] for k, v in s_h.items()}
    auc_f = {k: _auc(s_f[k], s_h_rel[k]) for k in s_f} if h_txt and f_txt else {}
    auc_r = {k: _auc(s_r[k], s_h[k]) for k in s_r} if h_txt and r_txt else {}
    head = auc_f.get("mink")
    pl = privleak(head, retrain_auc) if head is not None and retrain_auc is not None and retrain_auc < 1 else None
    r4 = (lambda xs: [round(float(x), 4) for x in xs])
    return {"verbmem_forget": mean(vm), "knowmem_forget": mean(km_f), "knowmem_retain": mean(km_r),
            "mia_auc_forget": auc_f, "mia_auc_retain": auc_r, "mia_auc": head, "privleak": pl,
            "items": {"verbmem_forget": r4(vm), "knowmem_forget": r4(km_f), "knowmem_retain": r4(km_r)},
            "mia": {"forget": r4(s_f["mink"]), "retain": r4(s_r["mink"]), "holdout": r4(s_h["mink"])}}


def _finetune_cached(kb, spec, out: Path, items, cfg: MuseConfig, key: dict, log):
    """Finetune ``items`` into ``out`` unless a model with the same key is there; returns the loaded model."""
    from dukb.neural.pipeline import finetune_kb, finetune_record, load_finetuned

    rec = finetune_record(out)
    if rec is None or rec.get("identity") != key:
        log(f"finetuning {out.name} on {len(items)} items")
        finetune_kb(kb, spec, out, epochs=cfg.finetune_epochs, batch_size=cfg.batch_size, seed=cfg.seed,
                    log=log, identity=key, items=items)
    return load_finetuned(out, **cfg.load_kwargs())


@holds_run_lock  # RUN_DIR/run.lock, taken by claim_run, is held until run_muse returns
def run_muse(run_dir, config: MuseConfig | None = None, *, resume: bool = True, progress: bool = False, log=print):
    """Run (or resume) the MUSE protocol into ``run_dir`` and render its report.

    Args:
        run_dir: output directory.
        config: :class:`MuseConfig` (default: the built-in KB and the tiny model).
        resume: continue a run in ``run_dir`` (refused when a row-changing setting differs).
        progress: rich progress bar over the rows.
        log: callable(str) for one-line progress reports.

    Returns:
        pandas DataFrame of the result rows.

    Raises:
        InputError: bad settings, a directory holding another run or in use by another process
            (:func:`dukb.neural.runs.claim_run`), results present without ``resume``, or several processes (not
            supported here).

    Source: Shi et al. 2024b (MUSE), Sec. 2-4.
    """
    import pandas as pd

    from dukb.neural import distributed as dist
    from dukb.neural.methods import UnlearnContext, method_grids, resolve
    from dukb.neural.models import TINY_CONFIG, model_fingerprint, resolve_device, resolve_dtype
    from dukb.neural.muse_report import render_muse
    from dukb.neural.pipeline import finetune_config
    from dukb.neural.plan import choose_targets, load_kb_closure
    from dukb.neural.runs import (IDENTITY_VERSION, ResultsFile, claim_run, history_entry, provenance, read_results,
                                  sha256_json, write_json_atomic)
    from dukb.solver.splits import base_split, forget_set

    cfg = config or MuseConfig()
    cfg.check()
    if dist.is_distributed():
        raise InputError("dukb muse runs in one process; launch it without accelerate/torchrun")
    run = Path(run_dir)
    t_start = time.perf_counter()
    kb, closure = load_kb_closure(cfg.kb, cfg.rules)
    n_all = max([cfg.n_targets] + list(cfg.scale_sizes))
    targets = list(dict.fromkeys(cfg.targets)) if cfg.targets else choose_targets(kb, n_all, cfg.seed)
    if len(targets) < n_all:
        raise InputError(f"the run needs {n_all} targets (--n-targets / --scale-sizes), {len(targets)} given")
    targets = targets[:n_all]
    main_methods = [tuple(resolve(m, "target")) for m in cfg.methods]
    curve_methods = [tuple(resolve(m, "target")) for m in (cfg.curve_methods if cfg.scale_sizes else [])]
    for label, m, scope, _g in main_methods + curve_methods:
        if scope != "target":
            raise InputError(f"{label}: MUSE forgets the request's forget set; a forget scope does not apply")
    from dukb.neural.rwku import check_corpus_methods

    check_corpus_methods(main_methods + curve_methods, "muse")
    for label, m, _s, _g in curve_methods:
        if m.param != "steps":
            raise InputError(f"{label}: scalability and sustainability need a gradient method (MUSE runs them for "
                             "GA, NPO and their regularised variants)")
    grids = method_grids(main_methods + curve_methods, cfg.grids)

    # 1. plan
    base = base_split(kb, closure, targets, holdout_frac=cfg.holdout_frac, retain_train_frac=cfg.retain_train_frac,
                      seed=cfg.seed)
    requests = plan_requests(cfg, targets)
    # forget sets: main = a minimum joint deep unlearning set of its targets; the scalability sets are built fold by
    # fold (each fold's minimum joint set added to the earlier ones), so they are nested, each is a joint deep
    # unlearning set of its targets, and sustain-k (fold k's new facts) ends at exactly scale-c's set
    forget_of: dict[str, list[int]] = {"main": forget_set(closure, targets[:cfg.n_targets], cfg.forget_scope)}
    cum: set[int] = set()
    lo = 0
    for k, c in enumerate(cfg.scale_sizes, 1):
        fold = set(forget_set(closure, targets[lo:c], cfg.forget_scope)) - cum
        forget_of[f"sustain-{k}"] = sorted(fold)
        cum |= fold
        forget_of[f"scale-{c}"] = sorted(cum)
        lo = c
    splits = {r["name"]: base.request(forget_of[r["name"]], r["targets"]) for r in requests}
    device = resolve_device(cfg.device)
    spec = cfg.model_spec(cfg.model)  # f_retrain's base (and f_target's, unless --finetuned gives it)
    dtype = str(resolve_dtype(cfg.dtype, device)).removeprefix("torch.")
    preset, fcfg = finetune_config(spec, None, cfg.finetune_epochs, None, cfg.batch_size, cfg.seed)
    base_model = {"tiny": TINY_CONFIG} if cfg.model == "tiny" else model_fingerprint(cfg.model)
    ft_key = {"base": base_model, "finetune": {"preset": preset, **asdict(fcfg)}, "texts": True,
              **cfg.model_identity()}  # LoRA and partial layers (absent at their defaults)
    settings = cfg.identity_settings(("kb", "model", "finetuned", "targets", "methods", "curve_methods", "grids",
                                      "device", "finetune_epochs", "batch_size", "n_targets", "scale_sizes",
                                      "sustain", "select", "bootstrap"))
    identity = {
        "identity_version": IDENTITY_VERSION, "kb": kb.fingerprint(), "rules": closure.rules.fingerprint,
        "model": ft_key, **({"f_target": model_fingerprint(cfg.finetuned)} if cfg.finetuned else {}),
        "dtype": dtype, "family": spec.preset_family, "settings": settings,
        "requests": {r["name"]: {"targets": r["targets"], "after": r.get("after")} for r in requests},
        "select": cfg.select,
        # what unlearning trains on: the statement texts of the forget and retain_train facts, never a QA pair
        "training": {"version": MUSE_TRAINING_VERSION, "forget": ["statement"], "retain": ["statement"]},
        "methods": {label: {"method": m.name, "param": m.param,
                            "grid": [int(v) if m.param == "steps" else float(v) for v in grids[label]],
                            **_lr_entry(m, spec.preset_family, cfg.lr)}
                    for label, m, _s, _g in main_methods + curve_methods},
    }
    identity, added, old = claim_run(run, "muse", identity, extendable=("methods", "requests"), resume=resume,
                                     log=log)
    run.mkdir(parents=True, exist_ok=True)
    res_path = run / "results.jsonl"
    if not resume and res_path.exists():
        raise InputError(f"{run} already holds results; pass --resume to continue it or choose another -o")
    results = ResultsFile(res_path, key=muse_row_key)
    write_json_atomic(run / "splits.json", {"base": base.to_json(),
                                           "requests": {k: v.to_json() for k, v in splits.items()}})
    record = {"protocol": "muse", **asdict(cfg), "kb": str(kb.source), "targets": targets, "identity": identity,
              "history": old.get("history", []) + [history_entry(added)],
              "provenance": provenance(device)}
    write_json_atomic(run / "config.json", record)
    log(f"KB {kb.source}: {len(kb.relationships)} + {len(kb.biographies)} facts; holdout "
        f"{sum(map(len, base.holdout.values()))}; {len(requests)} requests")

    # 2. models
    from dukb.neural.probe import Predictor

    trained_qa, trained_txt = _items_for(kb, base.trained())
    # model caches are keyed by everything they depend on: base model, finetuning config, KB, dtype, the facts
    cache_key = {**ft_key, "kb": identity["kb"], "dtype": dtype, "prompt": cfg.prompt,
                 "trained": sha256_json(base.trained())}
    if cfg.finetuned:  # a given f_target (its training must leave the holdout out: recorded, not checkable)
        from dukb.neural.pipeline import load_finetuned

        n_hold = sum(map(len, base.holdout.values()))
        log(f"f_target: {cfg.finetuned} (given; its training data must leave out the {n_hold} holdout facts of "
            "splits.json, or PrivLeak is not MUSE's)")
        f_target = load_finetuned(cfg.finetuned, **cfg.load_kwargs())
    else:
        f_target = _finetune_cached(kb, spec, run / "models" / "target", trained_qa + trained_txt, cfg, cache_key,
                                    log)

    def retrain_for(cum: str):
        sp = splits[cum]
        qa, txt = _items_for(kb, sp.trained_without_forget())
        key = {**cache_key, "forget": sp.forget}
        return _finetune_cached(kb, spec, run / "models" / f"retrain-{sha256_json(sp.forget)[:12]}", qa + txt, cfg,
                                key, log)

    def pred_of(lm):
        return Predictor(lm.model, lm.tokenizer, lm.tags, device=lm.device)

    def emit(req: dict, kind: str, fields: dict, **extra) -> dict:
        sp = splits[req["name"]]
        row = {"request": req["name"], "experiment": req["experiment"], "model_kind": kind,
               "targets": req["targets"], "forget_fact_ids": sp.forget,
               "scored_forget_fact_ids": splits[req["cumulative"]].forget, "scored_forms": SCORED_FORMS,
               **extra, **fields}
        results.append(row)
        return row

    def done(req, kind, label=None, value=None):
        return (req["name"], kind, label or "", None if value is None else float(value)) in results.done

    ref_cache: dict[str, dict] = {}

    def reference_rows(req: dict) -> dict:
        """f_target and f_retrain rows of a request (f_retrain of its cumulative forget set)."""
        if req["name"] in ref_cache:
            return ref_cache[req["name"]]
        sp = splits[req["name"]]
        if req["experiment"] == "sustainability":  # judged against the retrain of everything forgotten so far
            sp = splits[req["cumulative"]]
        pick = (lambda kind: next((r for r in results.rows if r["request"] == req["name"] and
                                   r["model_kind"] == kind), None))
        rr = pick("retrain")
        if rr is None:
            lm_r = retrain_for(req["cumulative"])
            fields = model_metrics(pred_of(lm_r), kb, sp, cfg)
            fields["privleak"] = 0.0 if fields["mia_auc"] is not None and fields["mia_auc"] < 1 else None
            rr = emit(req, "retrain", fields, method=None, param=None, setting=None)
            del lm_r
        tr = pick("target")
        if tr is None:
            tr = emit(req, "target", model_metrics(pred_of(f_target), kb, sp, cfg, retrain_auc=rr["mia_auc"]),
                      method=None, param=None, setting=None)
        ref_cache[req["name"]] = {"retrain": rr, "target": tr}
        return ref_cache[req["name"]]

    def sweep(req: dict, lm, label, m, grid, on_row=None):
        """Unlearn ``req``'s forget set from ``lm`` over ``grid``; one row per setting. ``on_row(row, pred)`` may
        return True to stop the sweep (the selected setting of a sequential request). A sequential request trains
        on its own fold's forget facts; its regulariser data and its scores use the cumulative split (nothing
        forgotten in an earlier request is trained on again or scored as retained)."""
        from dukb.neural.unlearn import retain_fact_ids

        sp = splits[req["name"]]
        sp_eval = splits[req["cumulative"]] if req["experiment"] == "sustainability" else sp
        refs = reference_rows(req)
        # MUSE unlearns on the text corpus alone: the forget facts' statements (D_forget) and, for GDR/KLR, the
        # retain_train facts' statements (D_retain^(reg)); the QA pairs KnowMem scores are never trained here
        _f_qa, f_txt = _items_for(kb, sp.forget)
        _r_qa, r_txt = _items_for(kb, sp_eval.retain_train)
        retain = r_txt if m.uses_retain else []
        todo = [v for v in grid if not done(req, "unlearned", label, v)] if on_row is None else list(grid)
        if not todo or not f_txt:
            return
        trained = {"trained_forms": {"forget": ["statement"], "retain": ["statement"] if retain else []},
                   "trained_fact_ids": {"forget": retain_fact_ids(f_txt), "retain": retain_fact_ids(retain)},
                   "n_trained_texts": {"forget": len(f_txt), "retain": len(retain)}}
        ctx = UnlearnContext(lm, f_txt, retain, seed=cfg.seed, lr=cfg.lr, kb=kb, **cfg.unlearn_kwargs())
        t0 = time.perf_counter()
        gen = m.sweep(ctx, todo)
        try:
            for setting, pred in gen:
                t1 = time.perf_counter()
                setting = {k: v for k, v in dict(setting).items() if k != "trace"}
                key = (req["name"], "unlearned", label, float(setting[m.param]))
                if key in results.done:
                    row = next(r for r in results.rows if muse_row_key(r) == key)
                else:
                    fields = model_metrics(pred, kb, sp_eval, cfg, retrain_auc=refs["retrain"]["mia_auc"])
                    row = emit(req, "unlearned", fields, method=label, base_method=m.name, param=m.param,
                               setting=setting, retain_fact_ids=retain_fact_ids(retain), **trained,
                               seconds_unlearn=round(t1 - t0, 4), seconds_eval=round(time.perf_counter() - t1, 4))
                if bar is not None:
                    bar.advance(task)
                if on_row is not None and on_row(row, pred):
                    break
                t0 = time.perf_counter()
        finally:
            gen.close()  # the method restores f_target's weights

    # 3-4. sweep and metrics, request by request
    n_rows = sum(len(grids[lb]) for lb, *_ in main_methods) + \
        sum(len(grids[lb]) for lb, *_ in curve_methods) * (len(cfg.scale_sizes) * (2 if cfg.sustain else 1))
    bar = task = None
    if progress:
        from rich.progress import Progress

        bar = Progress()
        bar.start()
        task = bar.add_task("muse", total=n_rows)
    for req in requests:
        if req["experiment"] == "sustainability":
            continue
        methods = main_methods if req["experiment"] == "main" else curve_methods
        refs = reference_rows(req)
        log(f"{req['name']}: forget {len(splits[req['name']].forget['relationships'])} facts; f_target KnowMem "
            f"forget {refs['target']['knowmem_forget']:.3f}, f_retrain {refs['retrain']['knowmem_forget']:.3f}")
        for label, m, _s, _g in methods:
            sweep(req, f_target, label, m, grids[label])
    if cfg.sustain and cfg.scale_sizes:
        for label, m, _s, _g in curve_methods:
            lm = f_target
            for req in [r for r in requests if r["experiment"] == "sustainability"]:
                util = reference_rows(req)["retrain"]["knowmem_retain"]
                grid = [float(v) for v in grids[label]]
                state: dict = {"model": None, "row": None}

                def on_row(row, pred, grid=grid, util=util, state=state):
                    # the selection rule applied online: the chosen setting's model goes on to the next request
                    v = float(row["setting"][row["param"]])
                    better = state["row"] is None or cfg.select in ("first_below_retrain", "last") or \
                        abs(row["knowmem_retain"] - util) < abs(state["row"]["knowmem_retain"] - util)
                    if better:
                        state["model"], state["row"] = copy.deepcopy(pred.model), row
                    hit = cfg.select == "first_below_retrain" and row["knowmem_retain"] < util
                    return hit or v == grid[-1]

                if not splits[req["name"]].forget["relationships"]:  # earlier requests already forgot this fold
                    log(f"{label} {req['name']}: nothing new to forget; the model goes on unchanged")
                    continue
                sweep(req, lm, label, m, grids[label], on_row=on_row)
                if state["model"] is None:
                    break
                lm = copy.copy(lm)
                lm.model = state["model"].eval()
                log(f"{label} {req['name']}: continues from {state['row']['setting']}")
    if bar is not None:
        bar.stop()
    log(f"done in {time.perf_counter() - t_start:.1f} s")
    paths = render_muse(run, bootstrap=cfg.bootstrap, select=cfg.select)
    log(f"report {paths['report']}")
    return pd.DataFrame(read_results(res_path))


__all__ = ["CURVE_METHODS", "MUSE_METHODS", "MUSE_TRAINING_VERSION", "MuseConfig", "SCORED_FORMS", "model_metrics",
           "muse_row_key", "plan_requests", "run_muse"]
