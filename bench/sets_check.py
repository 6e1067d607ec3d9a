"""Time the check a resumed run makes of its cached minimal deep unlearning sets (RUN_DIR/sets.json): every set a
minimal deep unlearning set of its target, against the KB's closure. Two ways in one process: the target's cone cut
once for the whole entry (what dukb does) and a cone cut for every derivability check (the check before
2026-11-28, kept here as the baseline).

    python bench/sets_check.py RUN_DIR --kb KB [--rules RULES] --target FACT_ID [--n 2000]

Prints, for the first N sets of the target: milliseconds per set each way, and the minutes each would take over
all of the target's sets.

Source: Wu et al. 2025, Definitions 2-3 (a deep unlearning set; its minimality, checked one fact at a time).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from dukb.kb import load_kb
from dukb.neural.plan import sets_entry_problem
from dukb.solver.closure import compute_closure
from dukb.solver.mdus import is_deep_unlearning_set
from dukb.solver.rules import default_rules


def check_per_call(closure, target: int, sets: list[list[int]]) -> None:
    """The baseline: each of a set's |U| + 1 derivability checks cuts the target's cone again."""
    atom = [closure.atom_of_fact(target)]
    for u in sets:
        assert is_deep_unlearning_set(closure, atom, u)
        assert all(not is_deep_unlearning_set(closure, atom, u[:i] + u[i + 1 :]) for i in range(len(u)))


def main() -> None:
    """Parse the arguments, time both checks, print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--kb", required=True)
    ap.add_argument("--rules", default=None)
    ap.add_argument("--target", type=int, required=True)
    ap.add_argument("--n", type=int, default=2000)
    a = ap.parse_args()
    kb = load_kb(a.kb)
    closure = compute_closure(kb, a.rules or default_rules(a.kb))
    entry = json.loads((a.run / "sets.json").read_text())["targets"][str(a.target)]
    total = len(entry["sets"])
    sample = dict(entry, sets=entry["sets"][: a.n])
    n = len(sample["sets"])
    size = sum(map(len, sample["sets"])) / n
    t0 = time.perf_counter()
    assert sets_entry_problem(closure, a.target, sample) is None
    once = (time.perf_counter() - t0) / n
    t0 = time.perf_counter()
    check_per_call(closure, a.target, sample["sets"])
    per_call = (time.perf_counter() - t0) / n
    print(f"target {a.target}: {total} sets, the first {n} timed (mean size {size:.1f})")
    print(f"cone once per entry:  {once * 1e3:.2f} ms/set, {once * total / 60:.1f} min for all")
    print(f"cone per check:       {per_call * 1e3:.2f} ms/set, {per_call * total / 60:.1f} min for all")
    print(f"speed-up: {per_call / once:.1f}x")


if __name__ == "__main__":
    main()
