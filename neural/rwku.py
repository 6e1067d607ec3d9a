"""`dukb rwku`: RWKU's evaluation (Jin et al. 2024) on a KB, resumable.

RWKU asks a model to forget what it knows about a target and probes the result at three levels: fill-in-the-blank
(FB, "cloze"), simple questions (QA) and nine kinds of adversarial attack (AA), each scored by ROUGE-L recall of the
answer; it checks locality on *neighbour* knowledge, and membership inference on forget members (FM) against
retain members (RM). On a KB:

- a request is one target fact (single-target) or several at once (``batch-N``: the first N targets, RWKU's
  batch-target setting); its forget set is the targets themselves (``--forget-scope target``, RWKU's setting) or a
  minimum joint deep unlearning set of them (``joint``, :func:`dukb.solver.splits.forget_set`);
- forget probes: the FB, QA and AA probes of the forget facts (:mod:`dukb.kb.probes`; AA = prefix injection,
  affirmative suffix, role play, multiple choice, reverse query, synonym manipulation, context hint, in-context
  learning, cross-lingual fr/de/es);
- unlearning data: RWKU gives a method no forget corpus and unlearns from a *synthetic* one, text about the target
  (App. G.1), never the probes. dukb's is the description corpus of the forget facts
  (:func:`dukb.neural.data.kb_descriptions`: three sentence frames per fact, worded apart from every probe); the
  GDR/KLR retain data are descriptions of distant facts, which are then scored in no group. Every FB/QA/AA probe
  and every MIA member is evaluation-only; rows record what was trained (``trained_forms``, ``trained_fact_ids``)
  and what was scored (``scored_forms``). Methods that train on questions about the forget facts (RT, DPO, PO,
  closed-loop) are refused;
- neighbour facts: the other facts about the forget facts' people (relationships where one of them is subject or
  object, and their biographies) outside the targets' cone (:func:`dukb.solver.cone.cone_of`: RWKU's neighbours
  "must not involve the target"; the facts dropped for it are recorded); distant facts: every fact outside the
  forget set, the neighbours and the cone. Both are scored on FB and QA;
- FM: the QA texts of the forget facts; RM: the QA texts of the distant facts. Scores (:mod:`dukb.neural.metrics.mia`)
  on the answer tokens; the mean score per set (RWKU's LOSS columns use the loss, here the log-likelihood, so FM
  *falling* below RM means forgotten) and the AUC of FM (positive) against RM;
- deep unlearning on top: recall and accuracy (Wu et al. 2025, Eq. 1-2) and recall under attack
  (:mod:`dukb.neural.metrics.attack`: a fact counts as known if any probe kind elicits it).

The model is finetuned on every fact's QA pair and description sentences (as RWKU's model knows the target before
its own text about it is unlearned; cached in RUN_DIR/finetuned), or ``--finetuned`` (its tokenizer must cover the
description corpus); a ``before`` row scores it without unlearning (RWKU's "Before").

Source: Jin et al. 2024 (RWKU), Sec. 3-4 and App. H; Wu et al. 2025, Eq. 1-2.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from dukb import InputError
from dukb.neural.runconfig import RunConfig
from dukb.neural.runs import holds_run_lock
from dukb.neural.metrics.rwku import AA_KINDS, FB, neighbour_facts, qa_mia_scores, rwku_fields  # noqa: F401

#: RWKU's methods that dukb has (ICU, RepE, DPO, RT come with the Unlearning-with-Control issue)
#: RWKU's methods; NPO in the sequence form RWKU's code uses (jinzhuoran/RWKU, LLaMA-Factory npo/trainer.py: the
#: summed answer log-likelihood ratio), not the Eval-DU/MUSE code's logit form that ``npo`` names
RWKU_METHODS = ("ga", "npo_seq", "ga_gdr", "npo_seq_gdr")
#: version of what `dukb rwku` trains on, in its run identity (1: the forget facts' QA; 2: the description corpus,
#: neighbours outside the cone): a run of another version is not resumed
RWKU_TRAINING_VERSION = 2


def check_corpus_methods(methods, protocol: str) -> None:
    """Refuse methods that cannot unlearn from a text corpus alone: those that train on questions about the forget
    facts (RT, DPO, PO, closed-loop deep unlearning), which the protocol keeps for evaluation. The others train on
    exactly the items they are given (GA, KL, NPO, SimNPO and their GDR/KLR variants, TV, WHP) or train nothing
    (ICU, RepE: the people's names).

    Args:
        methods: resolved ``(label, method, scope, grid)`` tuples.
        protocol: "rwku" or "muse", for the message.

    Raises:
        InputError: a method of the other kind (named).
    """
    from dukb.neural.methods.ga import GradientAscent
    from dukb.neural.methods.icu import InContextUnlearning
    from dukb.neural.methods.kl import KLDivergence
    from dukb.neural.methods.npo import NPO
    from dukb.neural.methods.repe import RepE
    from dukb.neural.methods.simnpo import SimNPO
    from dukb.neural.methods.tv import TaskVector
    from dukb.neural.methods.whp import WHP

    ok = (GradientAscent, KLDivergence, NPO, SimNPO, TaskVector, WHP, InContextUnlearning, RepE)
    for label, m, *_ in methods:
        if not isinstance(m, ok):
            raise InputError(f"{label}: `dukb {protocol}` unlearns from a text corpus and keeps every question about "
                             f"the forget facts for evaluation; {m.name} trains on such questions (choose ga, kl, "
                             "npo, simnpo, their _gdr/_klr variants, tv, whp, icu or repe)")


@dataclass
class RwkuConfig(RunConfig):
    """Everything that defines a `dukb rwku` run (the row-changing part is its identity).

    Attributes:
        kb, rules, model, finetuned, seed, lr, device, dtype, prompt, finetune_epochs, batch_size, LoRA, layers,
            gradient_checkpointing, trust_remote_code: the shared options
            (:class:`dukb.neural.runconfig.RunConfig`).
        targets / n_targets: target fact_ids (single-target requests, one per target).
        methods: method names or presets; grids: method -> grid override.
        batch_sizes: batch-target requests (the first N targets at once); empty: none.
        forget_scope: "target" (RWKU) or "joint" (a minimum joint deep unlearning set).
        mia_k: Min-K% share.
    """

    targets: list[int] | None = None
    n_targets: int = 11
    methods: list[str] = field(default_factory=lambda: list(RWKU_METHODS))
    grids: dict[str, list] = field(default_factory=dict)
    batch_sizes: list[int] = field(default_factory=lambda: [2, 4, 8])
    forget_scope: str = "target"
    mia_k: float = 0.2

    def check(self) -> None:
        """Validate the run's settings (the shared ones by :meth:`RunConfig.check_run`).

        Raises:
            InputError: an unknown forget scope, batch sizes not increasing integers >= 2, ``mia_k`` outside
                (0, 1], ``n_targets`` below 1, or a bad shared option.
        """
        self.check_run()
        if self.forget_scope not in ("target", "joint"):
            raise InputError(f"unknown --forget-scope {self.forget_scope!r} (choose target or joint)")
        if any(n < 2 for n in self.batch_sizes) or list(self.batch_sizes) != sorted(set(self.batch_sizes)):
            raise InputError("--batch-sizes must be increasing integers of at least 2")
        if not 0 < self.mia_k <= 1:
            raise InputError(f"--mia-k must be in (0, 1], got {self.mia_k}")
        if self.n_targets < 1:
            raise InputError("--n-targets must be at least 1")


def _near_keys(req: dict) -> set:
    """(fact kind, fact_id) of a request's forget facts, its targets' cone and its neighbours: never retain data."""
    nb = req["neighbours"]
    rel = [*req["forget"], *req["cone"], *nb["relationships"], *nb["dropped"]]
    return {("relationship", int(i)) for i in rel} | {("biography", int(i)) for i in nb["biographies"]}


def _check_covers(tokenizer, items, where) -> None:
    """Raise InputError when ``tokenizer`` maps words of the description corpus to its unknown token (a tiny model
    finetuned without them, e.g. by `dukb evaluate`)."""
    unk = getattr(tokenizer, "unk_token_id", None)
    if unk is None or not items:
        return
    ids = tokenizer([it.answer for it in items], add_special_tokens=False)["input_ids"]
    bad = [it.answer for it, row in zip(items, ids) if unk in row]
    if bad:
        raise InputError(f"the model's tokenizer does not know words of RWKU's description corpus ({len(bad)} of "
                         f"{len(items)} sentences, e.g. {bad[0]!r}); leave out --finetuned so that `dukb rwku` "
                         "finetunes a model on the QA pairs and descriptions", where)


def rwku_row_key(row: dict) -> tuple:
    """(request, method label, swept value) identifying a `dukb rwku` row ("" and None for the before rows)."""
    v = row["setting"].get(row["param"]) if row.get("param") else None
    return (row["request"], row.get("method") or "", None if v is None else float(v))


@holds_run_lock  # RUN_DIR/run.lock, taken by claim_run, is held until run_rwku returns
def run_rwku(run_dir, config: RwkuConfig | None = None, *, resume: bool = True, progress: bool = False, log=print):
    """Run (or resume) the RWKU protocol into ``run_dir`` and render its report.

    Args:
        run_dir: output directory.
        config: :class:`RwkuConfig` (default: the built-in KB, the tiny model, 11 targets).
        resume: continue a run in ``run_dir`` (refused when a row-changing setting differs).
        progress: rich progress bar over the rows.
        log: callable(str) for one-line progress reports.

    Returns:
        pandas DataFrame of the result rows.

    Raises:
        InputError: bad settings, a directory holding another run or in use by another process
            (:func:`dukb.neural.runs.claim_run`), results present without ``resume``, several processes.

    Source: Jin et al. 2024 (RWKU), Sec. 3-4.
    """
    import pandas as pd

    from dukb.neural import distributed as dist
    from dukb.neural.data import DESCRIPTION_FORM, QA_KIND, kb_descriptions, kb_qa
    from dukb.neural.methods import UnlearnContext, method_grids, resolve
    from dukb.neural.metrics.attack import ATTACK_KINDS, recall_under_attack
    from dukb.neural.metrics.base import RowContext
    from dukb.neural.metrics.recall import RECALL, success_du_all
    from dukb.neural.metrics.rwku import cone_ids
    from dukb.neural.plan import choose_targets, load_kb_closure
    from dukb.neural.probe import Predictor, probe
    from dukb.neural.protocol import EvaluateConfig, _model_spec, finetune_cache_key, run_identity
    from dukb.neural.runs import (ResultsFile, UnitClaims, claim_run, claimed_units, history_entry, open_to_workers,
                                  provenance, read_results, run_role, worker_id, write_json_atomic)
    from dukb.neural.rwku_report import render_rwku
    from dukb.neural.unlearn import default_retain, retain_fact_ids
    from dukb.solver.mdus import minimal_sets
    from dukb.solver.splits import forget_set

    cfg = config or RwkuConfig()
    cfg.check()
    if dist.is_distributed():
        raise InputError("dukb rwku runs in one process; launch it without accelerate/torchrun")
    run = Path(run_dir)
    t_start = time.perf_counter()
    # the model stage and most of the identity are evaluate's (same finetuning, same settings)
    ecfg = EvaluateConfig(**{k: getattr(cfg, k) for k in RunConfig.shared_fields()}, targets=cfg.targets,
                          n_targets=cfg.n_targets, methods=list(cfg.methods), grids=cfg.grids)
    kb, closure = load_kb_closure(cfg.kb, cfg.rules)
    n_need = max([cfg.n_targets] + list(cfg.batch_sizes))
    targets = list(dict.fromkeys(cfg.targets)) if cfg.targets else choose_targets(kb, n_need, cfg.seed)
    if len(targets) < max(cfg.batch_sizes or [1]):
        raise InputError(f"--batch-sizes needs {max(cfg.batch_sizes)} targets, {len(targets)} given")
    methods = [tuple(resolve(m, "target")) for m in cfg.methods]
    for label, m, scope, _g in methods:
        if scope != "target":
            raise InputError(f"{label}: a forget scope does not apply here; use --forget-scope")
    check_corpus_methods(methods, "rwku")
    grids = method_grids(methods, cfg.grids)
    from dukb.neural.models import resolve_device, resolve_dtype

    device = resolve_device(cfg.device)
    spec = _model_spec(ecfg)
    dtype = str(resolve_dtype(cfg.dtype, device)).removeprefix("torch.")
    singles = targets if cfg.targets else targets[:cfg.n_targets]  # a targets file: every target is a request
    identity = run_identity(ecfg, kb, closure, methods, grids, singles, spec, dtype)
    for k in ("sets", "metrics"):
        identity.pop(k, None)
    identity["probe"] = {"kinds": [QA_KIND, FB, *AA_KINDS], "max_new_tokens": 10, "rouge": "rougeL recall"}
    identity["rwku"] = {"forget_scope": cfg.forget_scope, "mia_k": cfg.mia_k, "batch_sizes": list(cfg.batch_sizes),
                        "batch_targets": targets[:max(cfg.batch_sizes or [0])],
                        # what is trained (finetuning, unlearning's forget and retain data) and what neighbours are
                        "training": {"version": RWKU_TRAINING_VERSION, "finetune": [QA_KIND, DESCRIPTION_FORM],
                                     "forget": [DESCRIPTION_FORM], "retain": [DESCRIPTION_FORM],
                                     "neighbours": "outside the targets' cone"}}
    identity, added, old = claim_run(run, "rwku", identity, extendable=("targets", "methods"), resume=resume, log=log)
    run.mkdir(parents=True, exist_ok=True)
    res_path = run / "results.jsonl"
    if not resume and res_path.exists():
        raise InputError(f"{run} already holds results; pass --resume to continue it or choose another -o")
    # a second invocation with the same settings joins a live run as another worker (runs.open_to_workers): it
    # neither repairs results.jsonl nor rewrites config.json and requests.json, which the run's owner did
    joined = run_role(run) == "worker"
    if joined:
        log("joined the run as another worker: units (request, method) are claimed in RUN_DIR/units")
    worker = worker_id()
    results = ResultsFile(res_path, key=rwku_row_key, repair=not joined)
    requests = [{"name": f"target-{t}", "kind": "single", "targets": [t]} for t in identity["targets"]]
    requests += [{"name": f"batch-{n}", "kind": "batch", "targets": targets[:n]} for n in cfg.batch_sizes]
    for r in requests:
        r["forget"] = forget_set(closure, r["targets"], cfg.forget_scope)
        r["cone"] = cone_ids(closure, r["targets"])
        r["neighbours"] = neighbour_facts(kb, r["forget"], r["cone"])
    if not joined:
        write_json_atomic(run / "requests.json", {"requests": requests})
    record = {"protocol": "rwku", **asdict(cfg), "kb": str(kb.source), "identity": identity,
              "history": old.get("history", []) + [history_entry(added)], "provenance": provenance(device)}

    # model stage: evaluate's finetuning settings on the QA pairs and descriptions, cached in RUN_DIR/finetuned
    from dukb.neural.pipeline import finetune_kb, finetune_record, load_finetuned

    descriptions = kb_descriptions(kb)  # RWKU's synthetic corpus: text about the facts, never a probe
    if cfg.finetuned:
        lm = load_finetuned(cfg.finetuned, **cfg.load_kwargs())
        _check_covers(lm.tokenizer, descriptions, cfg.finetuned)
    else:
        ft_dir = run / "finetuned"
        ft = finetune_record(ft_dir)
        ft_key = {**finetune_cache_key(identity), "items": identity["rwku"]["training"]["finetune"]}
        if ft is None or ft.get("identity") != ft_key:
            # the model knows every fact in the QA form and in its descriptions (RWKU's model knows the target
            # before its own text about it is unlearned); the tiny tokenizer then covers the description words
            finetune_kb(kb, spec, ft_dir, epochs=cfg.finetune_epochs, batch_size=cfg.batch_size, seed=cfg.seed,
                        log=log, identity=ft_key, items=kb_qa(kb) + descriptions)
        lm = load_finetuned(ft_dir, **{**cfg.load_kwargs(), "prompt": None})
        acc = (finetune_record(ft_dir) or {}).get("accuracy")
        if acc is not None and acc < 1.0:
            log(f"warning: the finetuned model knows {acc:.4f} of the KB; facts it never knew count as forgotten")
    if not joined:
        write_json_atomic(run / "config.json", record)
    kinds = tuple(dict.fromkeys((QA_KIND, FB) + AA_KINDS + ATTACK_KINDS))
    items = kb_qa(kb, kinds, seed=cfg.seed)  # every probe: evaluation only
    qa_items = [it for it in items if it.kind == QA_KIND]
    qa_of = {(it.fact_kind, it.fact_id): it for it in qa_items}
    scored_forms = {"probes": list(kinds), "mia": [QA_KIND]}

    sets_cache: dict[str, tuple[list, str]] = {}

    def sets_of(req) -> tuple[list, str]:
        """A request's minimal deep unlearning sets, computed once: exact for one target, sampled (Algorithm 1,
        N_seed = 100) for a batch, whose exact joint enumeration grows fast."""
        if req["name"] not in sets_cache:
            atoms = [closure.atom_of_fact(t) for t in req["targets"]]
            if len(atoms) == 1:
                res, used = minimal_sets(closure, atoms, "exact"), "exact"
            else:
                res, used = minimal_sets(closure, atoms, "random", n_seeds=100, seed=cfg.seed), "random"
            sets_cache[req["name"]] = ([list(x) for x in res.sets], used)
        return sets_cache[req["name"]]

    def score(pred, req, extra: dict) -> dict:
        df = probe(pred, items, rouge=True, logprob=False)
        forget_keys = {("relationship", i) for i in req["forget"]}
        neigh = {("relationship", i) for i in req["neighbours"]["relationships"]} | \
            {("biography", i) for i in req["neighbours"]["biographies"]}
        coned = {("relationship", i) for i in req["cone"]}
        rids = extra.get("retain_fact_ids") or {"relationships": [], "biographies": []}
        held = {("relationship", int(i)) for i in rids["relationships"]} | \
            {("biography", int(i)) for i in rids["biographies"]}
        fm = [qa_of[k] for k in sorted(forget_keys) if k in qa_of]
        rm = [it for k, it in qa_of.items() if k not in forget_keys and k not in neigh and k not in held
              and k not in coned]
        mia = {"fm": qa_mia_scores(pred, fm, cfg.mia_k), "rm": qa_mia_scores(pred, rm, cfg.mia_k)}
        fields = rwku_fields(df, kb, req["forget"], req["neighbours"], mia, exclude=rids, cone=req["cone"])
        sets, used = sets_of(req)
        rctx = RowContext(kb, req["targets"][0], sets, used, df, list(req["forget"]),
                          extra.get("retain_fact_ids") or {"relationships": [], "biographies": []})
        fields.update(RECALL.fn(rctx))
        fields.update(recall_under_attack(rctx))
        fields["success_du"] = success_du_all(closure, req["targets"], fields["forgotten_relationships"])
        fields.pop("forgotten_biographies", None)
        return fields

    def emit(req, fields: dict, **extra) -> None:
        results.append({"request": req["name"], "request_kind": req["kind"], "targets": req["targets"],
                        "forget_set": req["forget"], "neighbour_fact_ids": req["neighbours"],
                        "neighbours_dropped": len(req["neighbours"]["dropped"]), "scored_forms": scored_forms,
                        **extra, **fields})

    bar = task = None
    if progress:
        from rich.progress import Progress

        bar = Progress()
        bar.start()
        task = bar.add_task("rwku", total=len(requests) * (1 + sum(len(g) for g in grids.values())),
                            completed=len(results.done))
    pred0 = Predictor(lm.model, lm.tokenizer, lm.tags, device=lm.device)
    by_name = {r["name"]: r for r in requests}
    meth = {label: m for label, m, _s, _g in methods}

    def pending(unit) -> list:
        name, label = unit
        if not label:  # the request's row before unlearning
            return [] if (name, "", None) in results.done else [None]
        return [v for v in grids[label] if (name, label, float(v)) not in results.done]

    # work units: (request, "") for the model before unlearning, (request, method) after; claimed atomically so
    # that any number of invocations with the same settings share the run (runs.claimed_units)
    units = [(r["name"], label) for r in requests for label in [""] + [lb for lb, *_ in methods]]
    claims = UnitClaims(run, worker)
    open_to_workers(run)  # config.json, requests.json and the model are on disk: others may join
    try:
        for (name, label), todo in claimed_units(claims, results, units, pending):
            req = by_name[name]
            if not label:
                emit(req, score(pred0, req, {}), model_kind="before", method=None, param=None, setting={},
                     trained_forms={"forget": [], "retain": []}, trained_fact_ids=None, worker=worker)
                if bar is not None:
                    bar.advance(task)
                continue
            m = meth[label]
            # the forget corpus: the descriptions of the forget facts; the retain pool: descriptions of distant
            # facts (neither forget, neighbour nor cone facts), which are then scored in no group
            forget_ids = set(req["forget"])
            forget = [it for it in descriptions if it.fact_kind == "relationship" and it.fact_id in forget_ids]
            near = _near_keys(req)
            pool = [it for it in descriptions if (it.fact_kind, it.fact_id) not in near]
            retain = default_retain(pool, forget, seed=cfg.seed) if m.uses_retain else []
            rids = retain_fact_ids(retain)
            trained = {"trained_forms": {"forget": [DESCRIPTION_FORM], "retain": [DESCRIPTION_FORM] if retain
                                         else []},
                       "trained_fact_ids": {"forget": retain_fact_ids(forget), "retain": rids},
                       "n_trained_texts": {"forget": len(forget), "retain": len(retain)}}
            ctx = UnlearnContext(lm, forget, retain, seed=cfg.seed, lr=cfg.lr, kb=kb, **cfg.unlearn_kwargs())
            t0 = time.perf_counter()
            for setting, pred in m.sweep(ctx, todo):
                t1 = time.perf_counter()
                setting = {k: v for k, v in dict(setting).items() if k != "trace"}
                emit(req, score(pred, req, {"retain_fact_ids": rids}), model_kind="unlearned", method=label,
                     base_method=m.name, param=m.param, setting=setting, retain_fact_ids=rids, **trained,
                     seconds_unlearn=round(t1 - t0, 4), seconds_eval=round(time.perf_counter() - t1, 4),
                     worker=worker)
                claims.heartbeat((name, label))
                if bar is not None:
                    bar.advance(task)
                t0 = time.perf_counter()
            log(f"{name} {label}: done")
    finally:
        if bar is not None:
            bar.stop()
        claims.close()
    log(f"done in {time.perf_counter() - t_start:.1f} s")
    from dukb.neural.runs import render_lock

    with render_lock(run):  # workers sharing the run render one after the other
        paths = render_rwku(run)
    log(f"report {paths['report']}")
    return pd.DataFrame(read_results(res_path))


__all__ = ["AA_KINDS", "RWKU_METHODS", "RWKU_TRAINING_VERSION", "RwkuConfig", "check_corpus_methods",
           "neighbour_facts", "qa_mia_scores", "run_rwku", "rwku_fields", "rwku_row_key"]
