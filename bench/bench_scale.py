"""Closure + exact minimal deep unlearning sets on larger generated KBs (time and peak memory).

Usage: python bench/bench_scale.py [N_PEOPLE ...]   (default 1000 10000); 20 targets drawn with seed 0 per size.
"""

from __future__ import annotations

import random
import resource
import sys
import time


def main() -> int:
    from dukb.kb.generate import generate
    from dukb.solver.closure import compute_closure
    from dukb.solver.mdus import minimal_sets

    sizes = [int(a) for a in sys.argv[1:]] or [1000, 10000]
    print(f"Command: python {' '.join(sys.argv)}\n")
    print("| people | KB facts | closure | instances | closure s | exact sets, 20 targets s | sets found | complete |"
          " peak RSS MiB |\n|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    for n in sizes:
        kb, _ = generate(n, seed=0)
        t = time.perf_counter()
        c = compute_closure(kb)
        tc = time.perf_counter() - t
        targets = random.Random(0).sample(kb.rel_ids, 20)
        t = time.perf_counter()
        res = [minimal_sets(c, [c.atom_of_fact(f)], "exact", seconds=30) for f in targets]
        te = time.perf_counter() - t
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"| {n} | {len(kb.relationships)} | {len(c)} | {c.n_instances} | {tc:.2f} | {te:.2f} | "
              f"{sum(len(r.sets) for r in res)} | {all(r.complete for r in res)} | {rss:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
