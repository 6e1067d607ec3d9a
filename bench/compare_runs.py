"""Compare the result rows of two `dukb evaluate` run directories: a regression check for refactors.

Rows are matched by (target, method, setting); for each pair the outcome fields (recall, accuracies, best set,
forgotten facts, forget set) must be equal. Prints the counts and every difference; exit code 1 when any differ.

Usage: python bench/compare_runs.py RUN_A RUN_B
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

FIELDS = (
    "recall",
    "accuracy_relationships",
    "accuracy_biographies",
    "accuracy_all",
    "best_set",
    "forgotten_relationships",
    "forgotten_biographies",
    "forget_set",
    "target_forgotten",
)


def rows(run: Path) -> dict:
    out = {}
    for line in (run / "results.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            r = json.loads(line)
            out[(r["target"], r["method"], json.dumps(r["setting"], sort_keys=True))] = r
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_a", type=Path)
    ap.add_argument("run_b", type=Path)
    args = ap.parse_args(argv)
    a, b = rows(args.run_a), rows(args.run_b)
    common = sorted(set(a) & set(b))
    diff = [k for k in common if any(a[k].get(f) != b[k].get(f) for f in FIELDS)]
    print(
        f"rows: {len(a)} in A, {len(b)} in B, {len(common)} matched, {len(diff)} differ in outcome fields; "
        f"only in A: {len(set(a) - set(b))}, only in B: {len(set(b) - set(a))}"
    )
    for k in diff:
        print(k, {f: (a[k].get(f), b[k].get(f)) for f in FIELDS if a[k].get(f) != b[k].get(f)})
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
