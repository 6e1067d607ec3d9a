"""`dukb evaluate`: the paper's deep-unlearning protocol end to end, resumable (Wu et al. 2025, Sec. 4, App. C/H).

1. KB: load and validate; deductive closure; minimal deep unlearning sets of every target (exact by default),
   cached in RUN_DIR/sets.json.
2. Model: finetune until it knows 100% of the KB (or load ``finetuned``), saved in RUN_DIR/finetuned; its accuracy
   before unlearning is recorded.
3. For each (target, method, setting): unlearn from the finetuned model, probe every KB fact, compute recall and
   accuracy with the solver; append one JSON line at once (retained vector, best set, setting, timings).
4. A rerun into the same RUN_DIR (or ``resume``) skips rows already written; a killed run leaves a valid file (each
   row is one flushed line; a torn last line is dropped on resume).
5. Report: summary.csv, report.md, accuracy_recall.png (:mod:`dukb.neural.report`).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from dukb import InputError
from dukb.neural.report import read_results

DEFAULT_METHODS = ("ga", "npo", "tv", "whp")

#: Deep-unlearning-aware presets: (method, forget scope, grid or None for the method's default). Forgetting a
#: deep unlearning set chosen by the solver instead of the target alone.
#: The grids are finer at the weak end than the paper's {1,2,4,8,16}: forgetting a whole deep unlearning set
#: needs fewer steps per fact than the target alone, and the useful region is there.
PRESETS: dict[str, tuple[str, str, tuple | None]] = {
    "du_ga": ("ga", "minimum", (1, 2, 3, 4, 6, 8)),
    "du_npo": ("npo", "minimum", (1, 2, 3, 4, 6, 8)),
    "du_ga_gdr": ("ga_gdr", "minimum", (2, 4, 6, 8, 12, 16)),
    "du_npo_gdr": ("npo_gdr", "minimum", (1, 2, 3, 4, 6, 8)),
    "du_npo_gdr_best": ("npo_gdr", "best", (1, 2, 3, 4, 6, 8)),
}
#: The preset dukb recommends (see README, "Deep-unlearning-aware unlearning").
RECOMMENDED = "du_ga_gdr"


def parse_method(spec: str, default_scope: str = "target"):
    """Resolve a --methods entry: a method name (``ga``), ``METHOD@SCOPE`` (``npo_gdr@minimum``) or a preset
    (:data:`PRESETS`).

    Returns:
        (label used in results, Method, scope, preset grid or None).

    Raises:
        InputError: unknown method, preset or scope.
    """
    from dukb.neural.methods import get_method
    from dukb.neural.unlearn import SCOPES

    spec = spec.strip().lower()
    if spec in PRESETS:
        name, scope, grid = PRESETS[spec]
        return spec, get_method(name), scope, grid
    name, _, scope = spec.partition("@")
    scope = scope or default_scope
    if scope not in SCOPES:
        raise InputError(f"unknown forget scope {scope!r} in {spec!r} (choose from {', '.join(SCOPES)})")
    m = get_method(name)
    return (m.name if scope == "target" else f"{m.name}@{scope}"), m, scope, None


@dataclass
class EvaluateConfig:
    """Everything that defines an evaluate run (written to RUN_DIR/config.json).

    Attributes:
        kb: KB directory or built-in name; None = the built-in generated default (100 people, seed 0).
        model: "tiny", hub id or directory to finetune; ignored when ``finetuned`` is set.
        finetuned: an already finetuned model directory.
        targets: explicit relationship fact_ids (None: ``n_targets`` drawn with the seed, one per relation kind
            first, as evenly as possible).
        n_targets: number of targets to draw when ``targets`` is None (default 11 = one per relation).
        methods: method names (see :data:`dukb.neural.methods.METHODS`).
        grids: method -> list of values overriding the default grid.
        rules: rule set name or file.
        sets: "exact" or "random" minimal deep unlearning sets for recall.
        seeds: N_seed of random sets.
        seed: the run's seed (targets, retain sampling, tiny initialisation).
        lr: learning-rate override for gradient methods.
        device, dtype, prompt: model options.
        finetune_epochs: override of the finetuning preset's epoch budget.
        forget_scope: default forget scope of methods given without ``@SCOPE`` (target, minimum, best).
    """

    kb: str | None = None
    model: str = "tiny"
    finetuned: str | None = None
    targets: list[int] | None = None
    n_targets: int = 11
    methods: list[str] = field(default_factory=lambda: list(DEFAULT_METHODS))
    grids: dict[str, list] = field(default_factory=dict)
    rules: str = "family"
    sets: str = "exact"
    seeds: int = 100
    seed: int = 0
    lr: float | None = None
    device: str = "auto"
    dtype: str = "auto"
    prompt: str | None = None
    finetune_epochs: int | None = None
    forget_scope: str = "target"


def kb_fingerprint(kb) -> str:
    """SHA-256 (first 16 hex) of the KB's facts, to refuse resuming a run on a different KB."""
    h = hashlib.sha256()
    for f in kb.relationships:
        h.update(f"{f.fact_id}|{f.subject}|{f.relation}|{f.object}\n".encode())
    for f in kb.biographies:
        h.update(f"{f.fact_id}|{f.subject}|{f.attribute}|{f.value}\n".encode())
    return h.hexdigest()[:16]


def choose_targets(kb, n: int, seed: int) -> list[int]:
    """Draw ``n`` relationship fact_ids with ``seed``: relation kinds in turn (as the paper's 5 per kind), each
    kind's facts drawn without replacement.

    Raises:
        InputError: n < 1 or more targets than relationship facts.
    """
    if n < 1 or n > len(kb.relationships):
        raise InputError(f"--n-targets must be between 1 and {len(kb.relationships)}, got {n}")
    rng = random.Random(seed)
    by_rel: dict[str, list[int]] = {}
    for f in kb.relationships:
        by_rel.setdefault(f.relation, []).append(f.fact_id)
    for ids in by_rel.values():
        rng.shuffle(ids)
    order = sorted(by_rel)
    out: list[int] = []
    while len(out) < n:
        for r in order:
            if by_rel[r] and len(out) < n:
                out.append(by_rel[r].pop())
    return out


class ResultsFile:
    """Append-only JSONL of result rows with resume support.

    Each row is written as one line, flushed and fsynced; on open, a torn last line of the file this process owns
    is cut off so the file stays valid JSONL. :meth:`absorb` adds the rows of other files (the shard files of a
    multi-process run, see :mod:`dukb.neural.distributed`) as done; those files are read, never changed.

    Args:
        path: the file this process appends to.
    """

    def __init__(self, path: Path):
        self.path = path
        self.rows: list[dict] = []
        if path.exists():
            good, keep = [], 0
            data = path.read_bytes()
            pos = 0
            for raw in data.splitlines(keepends=True):
                try:
                    good.append(json.loads(raw))
                    keep = pos + len(raw)
                except json.JSONDecodeError:
                    break
                pos += len(raw)
            if keep < len(data):
                with open(path, "r+b") as fh:
                    fh.truncate(keep)
            if good and not data[:keep].endswith(b"\n"):
                with open(path, "ab") as fh:
                    fh.write(b"\n")
            self.rows = good
        self.done = {self.key(r) for r in self.rows}

    def absorb(self, paths) -> None:
        """Count the rows of the complete lines of ``paths`` (other than this file; missing ones skipped) as done.

        Call it once every process has repaired its own file (after a barrier), so no file is read mid-repair.

        Raises:
            ValueError: a line other than the last of a file is not JSON (names file and line).
        """
        for other in paths:
            other = Path(other)
            if other.exists() and other.resolve() != self.path.resolve():
                for row in read_results(other):
                    if self.key(row) not in self.done:
                        self.rows.append(row)
                        self.done.add(self.key(row))

    @staticmethod
    def key(row: dict) -> tuple:
        """(target, method, setting value) identifying a row."""
        return (int(row["target"]), row["method"], float(row["setting"][row["param"]]))

    def append(self, row: dict) -> None:
        """Write one row durably."""
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self.rows.append(row)
        self.done.add(self.key(row))


SHARD_GLOB = "results.rank*.jsonl"


def merge_shards(run: Path, order=None) -> int:
    """Append the rows of RUN_DIR/results.rank*.jsonl (a multi-process run) that results.jsonl lacks, then delete
    the shard files. Call on one process, after every process finished writing.

    Args:
        run: run directory.
        order: optional key function on rows for the order of the appended rows.

    Returns:
        number of rows appended.
    """
    shards = sorted(run.glob(SHARD_GLOB))
    if not shards:
        return 0
    main = ResultsFile(run / "results.jsonl")
    new: dict[tuple, dict] = {}
    for sh in shards:
        for row in read_results(sh):
            k = ResultsFile.key(row)
            if k not in main.done:
                new.setdefault(k, row)
    for row in sorted(new.values(), key=order) if order else new.values():
        main.append(row)
    for sh in shards:
        sh.unlink()
    return len(new)


def _sets_cache(run: Path, closure, targets: list[int], cfg: EvaluateConfig, fingerprint: str,
                write: bool = True) -> dict:
    """Minimal deep unlearning sets per target, cached in RUN_DIR/sets.json (depends on KB, rules, method); the
    cache is rewritten when ``write`` and a target was missing from it."""
    from dukb.solver.mdus import minimal_sets

    path = run / "sets.json"
    cache = {}
    missing = True
    if path.exists():
        doc = json.loads(path.read_text())
        if doc.get("kb") == fingerprint and doc.get("rules") == cfg.rules and doc.get("method") == cfg.sets:
            cache = {int(k): v for k, v in doc["targets"].items()}
            missing = any(t not in cache for t in targets)
    for t in targets:
        if t in cache:
            continue
        atom = closure.atom_of_fact(t)
        if cfg.sets == "exact":
            r = minimal_sets(closure, [atom], "exact", max_sets=100_000, seconds=120)
            used = "exact"
            if not r.complete:  # enumeration limit: fall back to Algorithm 1 (plus the sets found)
                rnd = minimal_sets(closure, [atom], "random", n_seeds=cfg.seeds, seed=cfg.seed)
                r.sets = sorted(set(r.sets) | set(rnd.sets), key=lambda s: (len(s), s))
                used = "random"
        else:
            r = minimal_sets(closure, [atom], "random", n_seeds=cfg.seeds, seed=cfg.seed)
            used = "random"
        cache[t] = {"sets": [list(s) for s in r.sets], "sets_used": used, "complete": r.complete}
    if write and missing:
        path.write_text(json.dumps({"kb": fingerprint, "rules": cfg.rules, "method": cfg.sets,
                                    "targets": {str(k): v for k, v in cache.items()}}))
    return cache


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
        InputError: bad configuration, a run_dir holding a different run, or results present without ``resume``.

    Source: Wu et al. 2025, Sec. 4 and App. C/H (protocol), Eq. 1-2 (metrics).
    """
    import pandas as pd

    from dukb.kb import load_kb
    from dukb.neural import distributed as dist
    from dukb.neural.data import kb_qa
    from dukb.neural.models import resolve_device
    from dukb.neural.pipeline import finetune_kb, load_finetuned
    from dukb.neural.report import render
    from dukb.neural.spec import ModelSpec
    from dukb.neural.unlearn import sweep_target
    from dukb.solver.closure import compute_closure

    cfg = config or EvaluateConfig()
    run = Path(run_dir)
    run.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    device = resolve_device(cfg.device)  # cuda:LOCAL_RANK under a multi-process launch
    main = dist.is_main_process()
    if dist.is_distributed():
        rank_log = log

        def log(msg: str) -> None:
            rank_log(f"[rank {dist.rank()}/{dist.world_size()}] {msg}")

    # 1. KB, closure, targets, sets
    if cfg.kb is None:
        from dukb.kb.generate import default_generated_kb_dir

        kb_dir = default_generated_kb_dir()
    else:
        kb_dir = cfg.kb
    kb = load_kb(kb_dir)
    fp = kb_fingerprint(kb)
    closure = compute_closure(kb, cfg.rules)
    methods = [parse_method(m, cfg.forget_scope) for m in cfg.methods]
    if not methods:
        raise InputError("no unlearning method given")
    grids = {label: list(cfg.grids.get(label) or cfg.grids.get(m.name) or pgrid or m.default_grid)
             for label, m, _scope, pgrid in methods}
    targets = list(cfg.targets) if cfg.targets else choose_targets(kb, cfg.n_targets, cfg.seed)
    for t in targets:
        closure.atom_of_fact(t)
    record = {**asdict(cfg), "kb": str(kb.source), "kb_fingerprint": fp, "targets": targets,
              "n_targets": len(targets), "methods": [label for label, *_ in methods],
              "scopes": {label: scope for label, _m, scope, _g in methods}, "grids": grids}
    cfg_path = run / "config.json"
    # one process writes results.jsonl; under a multi-process launch each writes its shard, merged at the end
    mine_path = run / (f"results.rank{dist.rank()}.jsonl" if dist.is_distributed() else "results.jsonl")
    results = ResultsFile(mine_path)  # repairs a torn last line of this process's own file
    dist.barrier(device)  # every process has repaired its file before any reads the others
    results.absorb([run / "results.jsonl", *sorted(run.glob(SHARD_GLOB))])
    if results.rows and not resume:
        raise InputError(f"{run} already holds results; pass --resume to continue it or choose another -o")
    if cfg_path.exists():
        old = json.loads(cfg_path.read_text())
        if old.get("kb_fingerprint") != fp or old.get("rules") != cfg.rules:
            raise InputError(f"{run} holds a run on a different KB or rule set; choose another -o")
    dist.barrier(device)  # every process has read the old state before anyone writes
    if main:
        sets = _sets_cache(run, closure, targets, cfg, fp)
    dist.barrier(device)
    if not main:  # the cache process 0 just wrote
        sets = _sets_cache(run, closure, targets, cfg, fp, write=False)
    log(f"KB {kb.source}: {len(kb.relationships)} relationship + {len(kb.biographies)} biography facts; "
        f"closure {len(closure)}; {len(targets)} targets; sets {cfg.sets}")

    # 2. model
    if cfg.finetuned:
        lm = load_finetuned(cfg.finetuned, prompt=cfg.prompt, dtype=cfg.dtype, device=cfg.device)
        from dukb.neural.pipeline import finetune_record

        ft = finetune_record(cfg.finetuned) or {}
        record["model"] = cfg.finetuned
    else:
        ft_dir = run / "finetuned"
        if not (ft_dir / "finetune.json").exists():
            spec = ModelSpec(cfg.model, prompt=cfg.prompt or ("tiny" if cfg.model == "tiny" else "generic"),
                             dtype=cfg.dtype, device=cfg.device)
            # data parallel under a multi-process launch; process 0 saves
            finetune_kb(kb, spec, ft_dir, epochs=cfg.finetune_epochs, seed=cfg.seed, progress=progress, log=log)
        lm = load_finetuned(ft_dir, dtype=cfg.dtype, device=cfg.device)
        ft = json.loads((ft_dir / "finetune.json").read_text())
        record["model"] = cfg.model
    from dukb.neural.finetune import device_info, versions

    record["versions"] = versions()
    record["device_used"] = device_info(lm.device)  # "device" keeps the configured value
    record["world_size"] = dist.world_size()
    if main:
        cfg_path.write_text(json.dumps(record, indent=2))
        (run / "finetune.json").write_text(json.dumps(ft, indent=2))
    items = kb_qa(kb)
    from dukb.neural.probe import Predictor, probe

    base = probe(Predictor(lm.model, lm.tokenizer, lm.tags, device=lm.device), items)
    acc0 = float(base["known"].mean())
    log(f"model {record['model']}: knows {acc0:.4f} of the KB before unlearning")
    if acc0 < 1.0:
        log("warning: the model does not know the whole KB; recall counts facts it never knew as forgotten")

    # 3. sweeps (this process's share of the targets under a multi-process launch)
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
        for t in my_targets:
            fact = kb.relationship(t)
            for label, m, scope, _g in methods:
                todo = [v for v in grids[label] if (t, label, float(v)) not in results.done]
                if not todo:
                    continue
                for row in sweep_target(lm, kb, closure, t, m.name, todo,
                                        sets=(sets[t]["sets"], sets[t]["sets_used"]), seed=cfg.seed, lr=cfg.lr,
                                        probe_items=items, scope=scope):
                    row["method"] = label
                    row["target_relation"] = fact.relation
                    row["n_kb_rel"] = len(kb.relationships)
                    row["n_kb_bio"] = len(kb.biographies)
                    results.append(row)
                    if bar is not None:
                        bar.advance(task)
                mine = [r for r in results.rows if r["target"] == t and r["method"] == label]
                best = max(mine, key=lambda r: (r["recall"], r["accuracy_all"]))
                log(f"target {t} ({fact.subject}, {fact.relation}, {fact.object}) {label}: best recall "
                    f"{best['recall']:.2f} at accuracy {best['accuracy_all']:.2f}; target forgotten in "
                    f"{sum(r['target_forgotten'] for r in mine)}/{len(mine)} settings")
    finally:
        if bar is not None:
            bar.stop()
    dist.barrier(device)
    if main:
        pos = {t: i for i, t in enumerate(targets)}
        labels = {label: i for i, (label, *_r) in enumerate(methods)}
        merge_shards(run, order=lambda r: (pos.get(int(r["target"]), len(pos)), labels.get(r["method"], len(labels)),
                                           float(r["setting"][r["param"]])))
        paths = render(run)
        log(f"done in {time.perf_counter() - t_start:.1f} s: report {paths['report']}")
    dist.barrier(device)
    final = run / "results.jsonl"
    return pd.DataFrame(read_results(final) if final.exists() else [])
