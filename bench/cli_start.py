"""Start-up cost of the CLI: wall time of `dukb evaluate --help` and the dukb.neural modules its import loads, for
one or more checkouts, run alternately so that both see the same machine load.

    python bench/cli_start.py CHECKOUT [CHECKOUT ...] [--runs N]

Each checkout is a dukb source tree (its own code is imported: the command runs with the checkout as the working
directory, ``python -m dukb.cli.main``). Prints one line per checkout: median and min wall seconds over the runs,
the number of dukb.neural modules loaded at start-up and whether torch was loaded.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time


def measure(tree: str) -> float:
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "dukb.cli.main", "evaluate", "--help"], cwd=tree, check=True, capture_output=True
    )
    return time.perf_counter() - t0


def loaded(tree: str) -> dict:
    code = (
        "import sys, json, dukb.cli.main; print(json.dumps({'neural': len([n for n in sys.modules "
        "if n.startswith('dukb.neural')]), 'torch': 'torch' in sys.modules}))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=tree, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trees", nargs="+")
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    times: dict[str, list[float]] = {t: [] for t in args.trees}
    for _ in range(args.runs):
        for t in args.trees:  # alternating: the same load for every checkout
            times[t].append(measure(t))
    for t in args.trees:
        info = loaded(t)
        print(
            f"{t}: median {statistics.median(times[t]):.2f} s, min {min(times[t]):.2f} s over {args.runs} runs; "
            f"{info['neural']} dukb.neural modules at start; torch loaded: {info['torch']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
