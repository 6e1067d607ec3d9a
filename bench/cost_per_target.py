"""Cost per target of each method in an evaluate run, from its results.jsonl alone.

Usage: python bench/cost_per_target.py RUN_DIR [RUN_DIR ...]

For each method: targets, settings per target, mean seconds per target spent unlearning (the whole grid; for CL-DU
one trajectory, which includes its cone probes) and probing every KB fact after each setting, and, for CL-DU and its
ablations, the mean rounds run at the largest grid value, the share of targets the solver stopped (target no longer
derivable from what the model still knows) and the mean number of facts unlearned. Prints a markdown table.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path


def main() -> int:
    for run in sys.argv[1:] or ["."]:
        rows = [json.loads(x) for x in (Path(run) / "results.jsonl").read_text().splitlines() if x.strip()]
        by = defaultdict(lambda: defaultdict(list))
        for r in rows:
            by[r["method"]][r["target"]].append(r)
        print(f"Command: python {' '.join(sys.argv)} ({run})\n")
        print(
            "| method | targets | settings | unlearn s / target | probe s / target | rounds run | stopped | "
            "facts unlearned |\n|---|---:|---:|---:|---:|---:|---:|---:|"
        )
        for method, targets in by.items():
            n = len(targets)
            un = sum(sum(r["seconds_unlearn"] for r in rs) for rs in targets.values()) / n
            pr = sum(sum(r["seconds_probe"] for r in rs) for rs in targets.values()) / n
            settings = sum(len(rs) for rs in targets.values()) / n
            last = [max(rs, key=lambda r: r["setting"][r["param"]]) for rs in targets.values()]
            traces = [r["trace"] for r in last if "trace" in r]
            extra = ["", "", ""]
            if traces:
                extra = [
                    f"{sum(t['rounds_run'] for t in traces) / len(traces):.1f}",
                    f"{sum(bool(t['stopped']) for t in traces) / len(traces):.2f}",
                    f"{sum(len(t['trained_on']) for t in traces) / len(traces):.1f}",
                ]
            print(f"| {method} | {n} | {settings:.0f} | {un:.2f} | {pr:.2f} | " + " | ".join(extra) + " |")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
