"""The symbolic core on generated KBs of growing size: time and peak memory (issue: the symbolic core at scale).

Usage: python bench/bench_scale.py [--baseline-max N] [--targets T] [N_PEOPLE ...]   (default 1000 10000 100000
1000000; baseline up to 100000; 20 targets)

Per size, each in its own process (so that peak RSS is per size and per path):

- ``dukb generate --people N --seed 0`` and ``dukb closure`` on its output, end to end as subprocesses (wall
  seconds; peak RSS of that process, from ``os.wait4``);
- in process, on the generated KB: the closure (numpy semi-naive joins, the default), the ground instances (built
  on first use), exact minimal deep unlearning sets of T targets (relationship facts drawn with seed 0; mean and
  max milliseconds per target, after one warm-up call on another target, whose time is reported apart) and the
  symbolic plan stage of ``dukb evaluate`` (:func:`dukb.neural.plan.build_plan`
  with 11 targets, scopes target/minimum/best, exact sets; torch is not imported);
- the baseline, the old path (clingo grounds every rule instance, ``compute_closure(kb, method="clingo")``), in
  its own process for N <= --baseline-max: closure seconds, instances, peak RSS, and whether its facts, instances
  and exact sets equal the fast path's.

Peak RSS is the process's maximum resident set so far (``ru_maxrss``) after each stage, in MiB.
"""

from __future__ import annotations

import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _rss() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _run(cmd: list[str]) -> tuple[float, float]:
    """Run a command; (wall seconds, peak RSS MiB of that child)."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    if status != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {p.stderr.read().decode()[-2000:]}")
    return wall, ru.ru_maxrss / 1024


def one(n: int, kbdir: str, method: str, n_targets: int) -> dict:
    """Measure one size with one closure method in this process (prints a JSON line)."""
    from dukb.kb import load_kb
    from dukb.solver.closure import compute_closure
    from dukb.solver.mdus import minimal_sets

    kb = load_kb(kbdir)
    out = {"n": n, "method": method, "kb_facts": len(kb.relationships), "rss_kb": _rss()}
    t = time.perf_counter()
    c = compute_closure(kb, method=method)
    out.update(closure_s=time.perf_counter() - t, closure=len(c), derived=c.n_derived, rss_closure=_rss())
    t = time.perf_counter()
    out.update(instances=c.n_instances, instances_s=time.perf_counter() - t, rss_instances=_rss())
    targets = random.Random(0).sample(kb.rel_ids, n_targets)
    warm = next(f for f in kb.rel_ids if f not in targets)
    t = time.perf_counter()
    minimal_sets(c, [c.atom_of_fact(warm)], "exact", seconds=30)  # the first call reads the program, starts clingo
    out["exact_first_ms"] = 1000 * (time.perf_counter() - t)
    times, sets = [], []
    for f in targets:
        t = time.perf_counter()
        r = minimal_sets(c, [c.atom_of_fact(f)], "exact", seconds=30)
        times.append(time.perf_counter() - t)
        sets.append((r.sets, r.complete))
    out.update(
        exact_ms_mean=1000 * sum(times) / len(times),
        exact_ms_max=1000 * max(times),
        sets_found=sum(len(s) for s, _ in sets),
        complete=all(ok for _, ok in sets),
        rss_exact=_rss(),
    )
    out["digest"] = _digest(c, sets)
    if method != "clingo":
        from dukb.neural.plan import build_plan, choose_targets

        with tempfile.TemporaryDirectory() as run:
            t = time.perf_counter()
            build_plan(Path(run), kb, c, choose_targets(kb, 11, 0), ["target", "minimum", "best"])
            out["plan_s"] = time.perf_counter() - t
        out["rss_plan"] = _rss()
        out["torch_imported"] = "torch" in sys.modules
    return out


def _digest(c, sets) -> str:
    import hashlib

    h = hashlib.sha256()
    h.update(repr(c.atoms).encode())
    h.update(
        c.inst_rule.astype("int64").tobytes()
        + c.inst_head.astype("int64").tobytes()
        + c.inst_body_array.astype("int64").tobytes()
    )
    h.update(repr(sets).encode())
    return h.hexdigest()[:16]


def main() -> int:
    args = sys.argv[1:]
    if args and args[0] == "--one":
        print(json.dumps(one(int(args[1]), args[2], args[3], int(args[4]))))
        return 0
    baseline_max, n_targets = 100_000, 20
    while args and args[0].startswith("--"):
        if args[0] == "--baseline-max":
            baseline_max = int(args[1])
        elif args[0] == "--targets":
            n_targets = int(args[1])
        else:
            raise SystemExit(f"unknown option {args[0]}")
        args = args[2:]
    sizes = [int(a) for a in args] or [1000, 10_000, 100_000, 1_000_000]
    exe = [sys.executable]
    dukb = [sys.executable, "-m", "dukb.cli.main"]
    print(f"Command: python {' '.join(sys.argv)}\n", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            kbdir = os.path.join(tmp, f"p{n}")
            gen_s, gen_rss = _run(dukb + ["generate", "--people", str(n), "--seed", "0", "-o", kbdir])
            cl_s, cl_rss = _run(dukb + ["closure", "--kb", kbdir, "-o", os.path.join(tmp, f"c{n}.csv")])
            fast = json.loads(
                subprocess.run(
                    exe + [__file__, "--one", str(n), kbdir, "auto", str(n_targets)],
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
            )
            base = None
            if n <= baseline_max:
                base = json.loads(
                    subprocess.run(
                        exe + [__file__, "--one", str(n), kbdir, "clingo", str(n_targets)],
                        check=True,
                        capture_output=True,
                        text=True,
                    ).stdout
                )
            rows.append((n, gen_s, gen_rss, cl_s, cl_rss, fast, base))
            _print(rows[-1:], header=len(rows) == 1)
            os.remove(os.path.join(tmp, f"c{n}.csv"))
    return 0


def _print(rows, header: bool) -> None:
    if header:
        print(
            "| people | KB facts | closure facts | instances | `dukb generate` s / MiB | `dukb closure` s / MiB "
            "| closure s | instances s | peak MiB (closure / +instances) | exact sets ms per target (mean / max)"
            " (first call) | sets (complete) | plan stage s / MiB | old path: closure + instances s, peak MiB "
            "| same results |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
        )
    for n, gen_s, gen_rss, cl_s, cl_rss, f, b in rows:
        old = f"{b['closure_s'] + b['instances_s']:.2f} s, {b['rss_exact']:.0f}" if b else "not run"
        same = ("yes" if b["digest"] == f["digest"] else "NO") if b else "–"
        print(
            f"| {n:,} | {f['kb_facts']:,} | {f['closure']:,} | {f['instances']:,} | {gen_s:.2f} / {gen_rss:.0f} "
            f"| {cl_s:.2f} / {cl_rss:.0f} | {f['closure_s']:.2f} | {f['instances_s']:.2f} "
            f"| {f['rss_closure']:.0f} / {f['rss_instances']:.0f} | {f['exact_ms_mean']:.1f} / "
            f"{f['exact_ms_max']:.1f} ({f['exact_first_ms']:.0f}) | {f['sets_found']} ({f['complete']}) | {f['plan_s']:.2f} / "
            f"{f['rss_plan']:.0f} | {old} | {same} |",
            flush=True,
        )
        if f.get("torch_imported"):
            print("WARNING: torch was imported by the plan stage", flush=True)


if __name__ == "__main__":
    sys.exit(main())
