"""Benchmark of the synthetic KB generator (`dukb generate`): time and peak memory by size.

Run from the repository root:

    python bench/bench_generate.py                      # sizes 100, 1000, 10000, 100000
    python bench/bench_generate.py --sizes 100 100000 --closure-max 1000

Each size runs in a fresh Python process (so the peak resident memory, ru_maxrss, is that size's alone) and
measures: generate() (network, biographies, names, facts), save_kb() (CSV writing), load_kb() (reading back and
validating), and for sizes up to --closure-max the clingo closure under the 48 family rules (its size and time).
Prints one table row per size and the command that produced it. Target (issue 3): 100,000 people in under a
minute and a few GB.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time


def one(n: int, seed: int, closure: bool) -> dict:
    """Measure one size in this process; returns a dict of figures (seconds, MiB, counts)."""
    from dukb.kb.generate import generate
    from dukb.kb.io import load_kb, save_kb

    t0 = time.perf_counter()
    kb, truth = generate(n, seed)
    t_gen = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        save_kb(kb, d)
        t_save = time.perf_counter() - t0
        size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
        t0 = time.perf_counter()
        load_kb(d)
        t_load = time.perf_counter() - t0
    out = {
        "people": n,
        "seed": seed,
        "true_facts": len(truth),
        "kb_facts": len(kb.relationships),
        "bio_facts": len(kb.biographies),
        "generate_s": round(t_gen, 3),
        "save_s": round(t_save, 3),
        "load_s": round(t_load, 3),
        "csv_mib": round(size / 2**20, 2),
    }
    if closure:
        from dukb.solver.closure import compute_closure

        t0 = time.perf_counter()
        c = compute_closure(kb)
        out["closure_s"] = round(time.perf_counter() - t0, 3)
        out["closure_facts"] = len(c.atoms)
        out["derived_facts"] = c.n_derived
    out["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # Linux: KiB
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000, 100000])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--closure-max", type=int, default=10000, help="compute the closure up to this many people")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one is not None:
        print(json.dumps(one(a.one, a.seed, a.one <= a.closure_max)))
        return
    print("command:", "python bench/bench_generate.py " + " ".join(sys.argv[1:]))
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}"
    )
    cols = [
        "people",
        "true_facts",
        "kb_facts",
        "closure_facts",
        "generate_s",
        "save_s",
        "load_s",
        "closure_s",
        "csv_mib",
        "peak_rss_mib",
    ]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for n in a.sizes:
        r = subprocess.run(
            [sys.executable, __file__, "--one", str(n), "--seed", str(a.seed), "--closure-max", str(a.closure_max)],
            capture_output=True,
            text=True,
            check=True,
        )
        row = json.loads(r.stdout.strip().splitlines()[-1])
        print("| " + " | ".join(str(row.get(c, "-")) for c in cols) + " |", flush=True)


if __name__ == "__main__":
    main()
