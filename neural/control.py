"""`dukb control`: the evaluation framework of "Unlearning with Control" (Wang et al. 2024, Sec. 5, App. C) on a KB,
resumable, with the deep-unlearning recall of every calibrated model (which the paper cannot measure).

Stages:

1. **plan** (symbolic): the KB and its closure; one seeded permutation of the relationship facts gives nested
   forget sets D_u at each forget ratio (a ratio of *all* KB facts, at least one fact; relationships only, so that
   each forget fact is a deep-unlearning target); retain-eval D_t,eval (``retain_eval`` facts of both kinds, drawn
   outside the largest D_u, the same for every ratio); retain-train D_t,train = the rest (the regulariser's data,
   never scored). The minimal deep unlearning sets of every forget fact (cached in sets.json). splits.json records
   every fact id.
2. **model**: θ_o finetuned on every fact's QA (cached in RUN_DIR/finetuned under its identity), or ``finetuned``.
3. **rows** per ratio: θ_o ("original": the floors' reference); per method the uncontrolled run ("none", T =
   ``steps``: the paper's Table 2); per method and control a coarse grid, then a fine grid around the best passing
   coarse value (:func:`coarse_grid`, :func:`fine_grid`). Every row holds the 6-number PS vector
   (:func:`dukb.neural.metrics.ps.ps_vector`), the response confidences, the per-step risk curve, the facts the
   model no longer knows, and the fact ids it used.
4. **report** (:mod:`dukb.neural.control_report`): calibration (:func:`calibrate`) from the rows alone, the paper's
   table layout, DU recall, PNGs.

Source: Wang et al. 2024 ("Unlearning with Control"), Sec. 4-5, App. C and G; Wu et al. 2025, Eq. 1-2 (recall).
"""

from __future__ import annotations

import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from dukb import InputError
from dukb.neural.runconfig import RunConfig
from dukb.neural.runs import holds_run_lock
from dukb.neural.calibration import CONTROL_KINDS, FLOORS, SELECTIONS, calibrate, du_recall, passes

#: GA, GD (= GA + GDR), KL (= GA + KL to θ_o on retain data) and PO: the paper's four methods
CONTROL_METHODS = ("ga", "ga_gdr", "ga_klr", "po")
#: the paper's forget ratios (1:99, 5:95, 10:90)
RATIOS = (0.01, 0.05, 0.10)


@dataclass
class ControlConfig(RunConfig):
    """Everything that defines a `dukb control` run.

    Attributes:
        methods: gradient methods (:data:`dukb.neural.methods.METHODS` names).
        controls: subset of :data:`CONTROL_KINDS`.
        ratios: forget ratios in (0, 1).
        steps: T of the uncontrolled run, the length of OC and MM runs, the largest ES step.
        tau_max: the top of OC's coarse grid (nats per token); None: the largest unlearning risk the method's
            uncontrolled run reached.
        coarse, fine: intervals of the coarse grid over the control's range and of the fine grid over ±1 coarse
            step around the best coarse value (10 and 10: the paper's 0..1 step 0.1, then step 0.02).
        retain_eval: facts in D_t,eval (the paper: 400).
        selection: "full" or "cheap" (:data:`SELECTIONS`).
        search: PS search over k ("bisection" or "linear").
        sets, seeds: "exact" or "random" minimal deep unlearning sets for the recall (N_seed for random).
        kb, rules, model, finetuned, seed, lr, device, dtype, prompt, finetune_epochs, batch_size, LoRA, layers,
            gradient_checkpointing, trust_remote_code: the shared options
            (:class:`dukb.neural.runconfig.RunConfig`).

    Optimisation follows the deep-unlearning protocol, not TOFU's: each step uses the whole forget set as one batch
    and ``retain_batch_size`` (8) retain-train items, with no warm-up (the paper's warm-up over the first epoch and
    equal forget/retain batch sizes are TOFU defaults whose values its text lost).

    Source: Wang et al. 2024 (Unlearning with Control), Sec. 5 and App. C.
    """

    methods: list[str] = field(default_factory=lambda: list(CONTROL_METHODS))
    controls: list[str] = field(default_factory=lambda: list(CONTROL_KINDS))
    ratios: list[float] = field(default_factory=lambda: list(RATIOS))
    steps: int = 16
    tau_max: float | None = None
    coarse: int = 10
    fine: int = 10
    retain_eval: int = 400
    selection: str = "full"
    search: str = "bisection"
    sets: str = "exact"
    seeds: int = 100

    def check(self) -> None:
        """Raises InputError on settings outside their ranges."""
        from dukb.neural.metrics.ps import SEARCHES

        self.check_run()
        if not self.methods:
            raise InputError("no method given")
        bad = [c for c in self.controls if c not in CONTROL_KINDS]
        if bad:
            raise InputError(f"unknown control {bad[0]!r} (choose from {', '.join(CONTROL_KINDS)})")
        if not self.ratios or any(not 0 < r < 1 for r in self.ratios):
            raise InputError(f"--ratios must be in (0, 1), got {self.ratios}")
        if self.steps < 1 or self.coarse < 1 or self.fine < 1:
            raise InputError("--steps, --coarse and --fine must be at least 1")
        if self.tau_max is not None and self.tau_max <= 0:
            raise InputError(f"--tau-max must be > 0, got {self.tau_max}")
        if self.retain_eval < 1:
            raise InputError("--retain-eval must be at least 1")
        if self.selection not in SELECTIONS:
            raise InputError(f"unknown --selection {self.selection!r} (choose from {', '.join(SELECTIONS)})")
        if self.search not in SEARCHES:
            raise InputError(f"unknown --search {self.search!r} (choose from {', '.join(SEARCHES)})")
        if self.sets not in ("exact", "random"):
            raise InputError(f"unknown --sets {self.sets!r} (choose exact or random)")


# ----------------------------------------------------------------------------------------------- the plan ----
def ratio_key(ratio: float) -> str:
    """The split name of a forget ratio: 0.01 -> "1%", 0.055 -> "5.5%"."""
    return f"{ratio * 100:g}%"


def split_facts(kb, ratios, n_retain_eval: int, seed: int = 0) -> dict:
    """D_u per ratio, D_t,eval and D_t,train per ratio (Wang et al. 2024, Sec. 5 and App. C).

    D_t,eval is drawn first (``n_retain_eval`` facts of both kinds, seeded), so it does not depend on the ratios;
    D_u(r) is the first round(r · N) (at least 1) of a seeded permutation of the other relationship facts, so the
    forget sets are nested and each depends on its own ratio only; D_t,train(r) is every other fact.

    Args:
        kb: the KB; ratios: forget ratios of all KB facts (N = relationships + biographies); n_retain_eval: size of
            D_t,eval; seed: the draws' seed.

    Returns:
        {"forget": {ratio_key: [relationship ids]}, "retain_eval": {"relationships", "biographies"},
        "retain_train": {ratio_key: {"relationships", "biographies"}}}.

    Raises:
        InputError: ``n_retain_eval`` < 1, or the KB has too few relationships for a ratio once D_t,eval is drawn.
    """
    if n_retain_eval < 1:
        raise InputError("--retain-eval must be at least 1")
    rel = [f.fact_id for f in kb.relationships]
    bio = [b.fact_id for b in kb.biographies]
    n_all = len(rel) + len(bio)
    everything = [("relationship", i) for i in rel] + [("biography", i) for i in bio]
    pick = random.Random(seed + 1).sample(everything, min(n_retain_eval, max(0, n_all - 2)))
    if not pick:
        raise InputError(f"the KB has {n_all} facts: too few for a retain-eval set and a forget set")
    ev_keys = set(pick)
    ev = {"relationships": sorted(i for k, i in pick if k == "relationship"),
          "biographies": sorted(i for k, i in pick if k == "biography")}
    perm = [i for i in rel if ("relationship", i) not in ev_keys]
    random.Random(seed).shuffle(perm)
    forget, train = {}, {}
    for r in ratios:
        k = ratio_key(r)
        n = max(1, round(r * n_all))
        if n >= len(perm):
            raise InputError(f"a forget ratio of {r:g} needs {n} relationship facts outside retain-eval; the KB "
                             f"has {len(perm)}")
        forget[k] = sorted(perm[:n])
        fs = set(forget[k])
        train[k] = {"relationships": sorted(i for i in rel if i not in fs and ("relationship", i) not in ev_keys),
                    "biographies": sorted(i for i in bio if ("biography", i) not in ev_keys)}
    return {"forget": forget, "retain_eval": ev, "retain_train": train}


def coarse_grid(control: str, cfg: ControlConfig, tau_max: float | None = None) -> list:
    """The coarse grid of a control: MM α ∈ {0, 1/c, ..., 1}; ES T ∈ {round(i·T/c)}; OC τ ∈ {i·τ_max/c}
    (c = ``cfg.coarse``). α = 0 and T = 0 are θ_o itself; τ = 0 drops every forget step, so it is θ_o for a method
    without a retain term and θ_o trained on the retain term alone otherwise.

    Source: Wang et al. 2024, App. C (coarse grid of about 10 equally spaced values).
    """
    c = cfg.coarse
    if control == "mm":
        return [round(i / c, 6) for i in range(c + 1)]
    if control == "es":
        return sorted({round(i * cfg.steps / c) for i in range(c + 1)})
    top = cfg.tau_max if cfg.tau_max is not None else tau_max
    if not top or top <= 0:
        top = 1.0
    return [round(i * top / c, 6) for i in range(c + 1)]


def fine_grid(control: str, best: float, coarse: list, cfg: ControlConfig) -> list:
    """The fine grid: ``cfg.fine`` intervals over [best − Δ, best + Δ] ∩ the coarse range (Δ = one coarse step),
    integers for ES, without the coarse values already run.

    Source: Wang et al. 2024, App. C (a fine grid of 10 inside the best region, e.g. α 0.10-0.30 step 0.02).
    """
    lo_all, hi_all = min(coarse), max(coarse)
    step = (hi_all - lo_all) / max(1, len(coarse) - 1)
    lo, hi = max(lo_all, best - step), min(hi_all, best + step)
    vals = [lo + i * (hi - lo) / cfg.fine for i in range(cfg.fine + 1)]
    if control == "es":
        vals = sorted({int(round(v)) for v in vals})
    else:
        vals = sorted({round(v, 6) for v in vals})
    done = {float(v) for v in coarse}
    return [v for v in vals if float(v) not in done]


def control_row_key(row: dict) -> tuple:
    """(ratio, method, control, value) identifying a `dukb control` row."""
    v = row.get("value")
    return (row["ratio"], row.get("method") or "", row["control"], None if v is None else float(v))


# ------------------------------------------------------------------------------------------------ the run ----
@holds_run_lock  # RUN_DIR/run.lock, taken by claim_run, is held until run_control returns
def run_control(run_dir, config: ControlConfig | None = None, *, resume: bool = True, progress: bool = False,
                log=print):
    """Run (or resume) the Unlearning-with-Control protocol into ``run_dir`` and render its report.

    Args:
        run_dir: output directory.
        config: :class:`ControlConfig` (default: the built-in KB, the tiny model, GA/GD/KL/PO, OC/ES/MM, 1/5/10%).
        resume: continue a run in ``run_dir`` (refused when a row-changing setting differs; methods, controls and
            ratios may be added).
        progress: rich progress bar over the rows.
        log: callable(str) for one-line progress reports.

    Returns:
        pandas DataFrame of the result rows.

    Raises:
        InputError: bad settings, a directory holding another run or in use by another process
            (:func:`dukb.neural.runs.claim_run`), results present without ``resume``, a method that is not a
            gradient method.

    Source: Wang et al. 2024, Sec. 5, App. C.
    """
    import pandas as pd

    from dukb.neural import distributed as dist
    from dukb.neural.control_report import render_control
    from dukb.neural.data import kb_qa
    from dukb.neural.methods import UnlearnContext, get_method
    from dukb.neural.methods.base import Control
    from dukb.neural.metrics.ps import paraphrase_questions, ps_vector
    from dukb.neural.models import TINY_CONFIG, model_fingerprint, resolve_device, resolve_dtype
    from dukb.neural.pipeline import finetune_config, finetune_kb, finetune_record, load_finetuned
    from dukb.neural.metrics.recall import success_du_all
    from dukb.neural.plan import load_kb_closure, sets_cache, sets_key
    from dukb.neural.muse import _lr_entry
    from dukb.neural.probe import Predictor, probe
    from dukb.neural.runs import (IDENTITY_VERSION, ResultsFile, UnitClaims, claim_run, claimed_units, history_entry,
                                  open_to_workers, provenance, read_results, run_role, worker_id, write_json_atomic)

    cfg = config or ControlConfig()
    cfg.check()
    if dist.is_distributed():
        raise InputError("dukb control runs in one process; launch it without accelerate/torchrun")
    methods = [get_method(m) for m in cfg.methods]
    for m in methods:
        if m.param != "steps":
            raise InputError(f"{m.name}: controls apply to gradient methods (swept over steps), not to {m.param}")
    run = Path(run_dir)
    t_start = time.perf_counter()
    kb, closure = load_kb_closure(cfg.kb, cfg.rules)
    splits = split_facts(kb, cfg.ratios, cfg.retain_eval, cfg.seed)
    device = resolve_device(cfg.device)
    if cfg.finetuned:
        spec = None
        model_id = {"finetuned": model_fingerprint(cfg.finetuned)}
    else:
        spec = cfg.model_spec()
        preset, fcfg = finetune_config(spec, None, cfg.finetune_epochs, None, cfg.batch_size, cfg.seed)
        model_id = {"base": {"tiny": TINY_CONFIG} if cfg.model == "tiny" else model_fingerprint(cfg.model),
                    "finetune": {"preset": preset, **asdict(fcfg)}}
    dtype = str(resolve_dtype(cfg.dtype, device)).removeprefix("torch.")
    family = (spec or cfg.model_spec()).preset_family
    model_id.update(cfg.model_identity())  # LoRA and partial layers (absent at their defaults)
    settings = cfg.identity_settings(("kb", "model", "finetuned", "methods", "controls", "ratios", "device",
                                      "finetune_epochs", "batch_size"))
    identity = {"identity_version": IDENTITY_VERSION, "kb": kb.fingerprint(), "rules": closure.rules.fingerprint,
                "model": model_id, "dtype": dtype, "prompt": cfg.prompt, "settings": settings,
                "methods": {m.name: {"method": m.name, **_lr_entry(m, family, cfg.lr)} for m in methods},
                "controls": {c: {"control": c} for c in cfg.controls},
                "retain_eval": splits["retain_eval"],
                "ratios": {ratio_key(r): {"ratio": r, "forget": splits["forget"][ratio_key(r)]} for r in cfg.ratios}}
    identity, added, old = claim_run(run, "control", identity, extendable=("methods", "controls", "ratios"),
                                     resume=resume, log=log)
    # the splits of every ratio of the run, also those of earlier invocations (splits.json is rewritten whole)
    splits = split_facts(kb, [v["ratio"] for v in identity["ratios"].values()], cfg.retain_eval, cfg.seed)
    run.mkdir(parents=True, exist_ok=True)
    res_path = run / "results.jsonl"
    if not resume and res_path.exists():
        raise InputError(f"{run} already holds results; pass --resume to continue it or choose another -o")
    # a second invocation with the same settings joins a live run as another worker (runs.open_to_workers): it
    # neither repairs results.jsonl nor rewrites config.json, splits.json and the caches, which the owner did
    joined = run_role(run) == "worker"
    if joined:
        log("joined the run as another worker: units (ratio, method) are claimed in RUN_DIR/units")
    worker = worker_id()
    results = ResultsFile(res_path, key=control_row_key, repair=not joined)
    if not joined:
        write_json_atomic(run / "splits.json", splits)
    record = {"protocol": "control", **asdict(cfg), "kb": str(kb.source), "identity": identity,
              "history": old.get("history", []) + [history_entry(added)], "provenance": provenance(device)}
    if not joined:
        write_json_atomic(run / "config.json", record)
    all_forget = sorted({t for f in splits["forget"].values() for t in f})
    # the forget facts' minimal deep unlearning sets, cached in sets.json for the report's DU recall
    sets_cache(run, closure, all_forget, sets_key(identity["kb"], identity["rules"], cfg.sets, cfg.seeds, cfg.seed),
               write=not joined)
    log(f"KB {kb.source}: {len(kb.relationships)} + {len(kb.biographies)} facts; D_u sizes "
        + ", ".join(f"{k}: {len(v)}" for k, v in splits["forget"].items())
        + f"; D_t,eval {sum(map(len, splits['retain_eval'].values()))}")

    # 2. the model
    if cfg.finetuned:
        lm = load_finetuned(cfg.finetuned, **cfg.load_kwargs())
    else:
        ft_dir = run / "finetuned"
        key = {"model": model_id, "kb": identity["kb"], "dtype": dtype, "prompt": cfg.prompt}
        rec = finetune_record(ft_dir)
        if rec is None or rec.get("identity") != key:
            finetune_kb(kb, spec, ft_dir, epochs=cfg.finetune_epochs, batch_size=cfg.batch_size, seed=cfg.seed,
                        progress=progress, log=log, identity=key)
        lm = load_finetuned(ft_dir, **cfg.load_kwargs())
    qa = kb_qa(kb)
    by_key = {(it.fact_kind, int(it.fact_id)): it for it in qa}
    para = paraphrase_questions(kb)
    ev_items = [by_key[("relationship", i)] for i in splits["retain_eval"]["relationships"]] + \
        [by_key[("biography", i)] for i in splits["retain_eval"]["biographies"]]

    def evaluate_model(pred, forget_items) -> dict:
        fields = ps_vector(pred, forget_items, ev_items, para, search=cfg.search)
        df = probe(pred, qa, generate=True, rouge=False, logprob=False)
        gone = df[~df["known"].astype(bool)]
        fields["forgotten_relationships"] = sorted(int(i) for k, i in zip(gone["fact_kind"], gone["fact_id"])
                                                   if k == "relationship")
        fields["forgotten_biographies"] = sorted(int(i) for k, i in zip(gone["fact_kind"], gone["fact_id"])
                                                 if k == "biography")
        fields["accuracy_all_facts"] = float(df["known"].mean())
        # Success-DU (Wu et al. 2025, Definition 2): every forget fact underivable from what the model still knows
        fields["success_du"] = success_du_all(closure, [it.fact_id for it in forget_items],
                                              fields["forgotten_relationships"])
        return fields

    bar = task = None
    if progress:
        from rich.progress import Progress

        bar = Progress(transient=True)
        bar.start()
        task = bar.add_task("control rows", total=None)

    def emit(row: dict) -> dict:
        results.append(row)
        if bar is not None:
            bar.advance(task)
        return row

    class _Missing(Exception):
        """A dry run met a row that is not in results.jsonl yet."""

    pred0 = Predictor(lm.model, lm.tokenizer, lm.tags, device=lm.device)

    def ratio_data(rk: str):
        forget_ids = splits["forget"][rk]
        f_items = [by_key[("relationship", i)] for i in forget_ids]
        train = splits["retain_train"][rk]
        train_items = [by_key[("relationship", i)] for i in train["relationships"]] + \
            [by_key[("biography", i)] for i in train["biographies"]]
        return {"ratio": rk, "forget_fact_ids": forget_ids}, f_items, train, train_items

    def original(rk: str, emit_it: bool, dry: bool = False) -> dict:
        """θ_o's row of a ratio: read from the results, else computed (and written when ``emit_it``)."""
        orig = next((r for r in results.rows if control_row_key(r) == (rk, "", "original", None)), None)
        if orig is not None:
            return orig
        if dry:
            raise _Missing
        base, f_items, _t, _ti = ratio_data(rk)
        t0 = time.perf_counter()
        row = {**base, "method": None, "control": "original", "stage": "original", "value": None,
               **evaluate_model(pred0, f_items), "seconds": round(time.perf_counter() - t0, 3), "worker": worker}
        return emit(row) if emit_it else row

    def method_unit(rk: str, m, dry: bool = False) -> None:
        """The rows of one (ratio, method) unit: the uncontrolled run, then every control's coarse and fine grids
        (each fine grid centred on the coarse calibration). ``dry``: only check that every row is present (raise
        _Missing otherwise); the grids depend on rows already computed, so this replays the unit's decisions."""
        base, f_items, train, train_items = ratio_data(rk)
        orig = original(rk, emit_it=False, dry=dry)  # another worker may still be writing it: the same values
        retain = train_items if m.uses_retain else []
        used = {"retain_train_fact_ids": ({"relationships": train["relationships"],
                                           "biographies": train["biographies"]} if m.uses_retain else
                                          {"relationships": [], "biographies": []})}

        def sweep(control: str, grid: list, stage: str) -> list[dict]:
            """Rows of ``m`` under ``control`` over ``grid`` (rows already present are reused)."""
            ckind = "none" if control == "none" else control
            out, todo = [], []
            for v in grid:
                hit = next((r for r in results.rows
                            if control_row_key(r) == (rk, m.name, control, float(v))), None)
                (out.append(hit) if hit is not None else todo.append(v))
            if not todo:
                return out
            if dry:
                raise _Missing
            ctx = UnlearnContext(lm, f_items, retain, seed=cfg.seed, lr=cfg.lr, **cfg.unlearn_kwargs(),
                                 control=Control(ckind, cfg.steps), kb=kb, closure=closure, items=qa)
            t0 = time.perf_counter()
            for setting, pred in m.sweep(ctx, todo):
                t1 = time.perf_counter()
                value = setting.get(Control(ckind, cfg.steps).param)
                row = {**base, "method": m.name, "control": control, "stage": stage,
                       "param": Control(ckind, cfg.steps).param, "value": float(value),
                       "setting": setting, **used, **evaluate_model(pred, f_items),
                       "risk_curve": pred.meta.get("risk_curve"),
                       "seconds_unlearn": round(t1 - t0, 3),
                       "seconds_eval": round(time.perf_counter() - t1, 3), "worker": worker}
                out.append(emit(row))
                claims.heartbeat((rk, m.name))
                t0 = time.perf_counter()
            return out

        unc = sweep("none", [cfg.steps], "uncontrolled")[0]
        risks = (unc.get("risk_curve") or {}).get("unlearning_risk") or []
        tau_top = max(risks) if risks else None
        if not dry:
            log(f"{rk} {m.name}: uncontrolled T={cfg.steps}: PS-exact forget {unc['ps_exact_forget']:.3f} "
                f"retain {unc['ps_exact_retain']:.3f}")
        for control in cfg.controls:
            grid = coarse_grid(control, cfg, tau_top)
            rows = sweep(control, grid, "coarse")
            best = calibrate(rows, orig, cfg.selection)
            centre = float(best["value"]) if best is not None else float(grid[0])
            rows += sweep(control, fine_grid(control, centre, grid, cfg), "fine")
            sel = calibrate(rows, orig, cfg.selection)
            if dry:
                continue
            if sel is None:
                log(f"{rk} {m.name} {control}: no setting passes the floors")
            else:
                log(f"{rk} {m.name} {control}: selected {sel['param']}={sel['value']:g}: PS-exact forget "
                    f"{sel['ps_exact_forget']:.3f}, retain {sel['ps_exact_retain']:.3f}")

    by_name = {m.name: m for m in methods}

    def pending(unit) -> list:
        rk, name = unit
        try:
            original(rk, emit_it=False, dry=True) if not name else method_unit(rk, by_name[name], dry=True)
        except _Missing:
            return [unit]
        return []

    # work units: (ratio, "") for θ_o's row, (ratio, method) for a method's uncontrolled run and every control's
    # grids; claimed atomically so that any number of invocations with the same settings share the run
    units = [(ratio_key(r), name) for r in cfg.ratios for name in [""] + [m.name for m in methods]]
    claims = UnitClaims(run, worker)
    open_to_workers(run)  # config.json, splits.json, sets.json and the model are on disk: others may join
    try:
        for (rk, name), _todo in claimed_units(claims, results, units, pending):
            if not name:
                orig = original(rk, emit_it=True)
                log(f"{rk}: θ_o PS-exact forget {orig['ps_exact_forget']:.3f} retain {orig['ps_exact_retain']:.3f}")
            else:
                method_unit(rk, by_name[name])
    finally:
        if bar is not None:
            bar.stop()
        claims.close()
    from dukb.neural.runs import render_lock

    with render_lock(run):  # workers sharing the run render one after the other
        paths = render_control(run)
    log(f"done in {time.perf_counter() - t_start:.1f} s: report {paths['report']}")
    return pd.DataFrame(read_results(res_path))


__all__ = ["CONTROL_KINDS", "CONTROL_METHODS", "ControlConfig", "FLOORS", "RATIOS", "SELECTIONS", "calibrate",
           "coarse_grid", "control_row_key", "du_recall", "fine_grid", "passes", "ratio_key", "run_control",
           "split_facts"]
