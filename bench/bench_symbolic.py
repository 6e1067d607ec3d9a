"""Speed of the symbolic core on EDU-RELAT, in one process after loading the KB, against the paper code's approach.

Measures (issue 2, "Speed"):

- closure Omega(K, R) of EDU-RELAT with clingo, both built-in rule sets (median of ``--repeats`` runs, ms);
- exact enumeration of every minimal deep unlearning set of the 55 targets of targets.txt (total s);
- one minimum-cardinality set (CP-SAT) for each of the 55 targets (total s);
- random MDUS (Algorithm 1), ``--seeds`` seeds x 55 targets (total s);
- the same process running :mod:`baseline_paper` (the paper code's approach in plain Python): its closure, and one
  seed-run of Algorithm 1 over the targets (on ``--baseline-targets`` of them, extrapolated to 55 when fewer).

Every result is checked before it is reported: the baseline closure equals clingo's; every random and baseline set
is one of the exact sets; every minimum set has the smallest exact size.

Usage (from the repository root)::

    python bench/bench_symbolic.py [--kb ../shared/edu-relat] [--baseline-targets 11]

Prints a Markdown table (with the command line and the machine) for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from baseline_paper import PaperMDUS, paper_closure, rules_from_ruleset  # noqa: E402

from dukb.kb import load_kb  # noqa: E402
from dukb.solver.closure import compute_closure  # noqa: E402
from dukb.solver.mdus import exact_sets, minimum_set, random_sets  # noqa: E402
from dukb.solver.rules import load_rules  # noqa: E402

DEFAULT_KB = HERE.parent.parent / "shared" / "edu-relat"


def read_targets(path: Path) -> list[int]:
    """fact_ids of a targets file (one per line, '#' comments)."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        text = line.split("#", 1)[0].strip()
        if text:
            out.append(int(text))
    return out


class Timing:
    """Median wall and CPU (process) time of repeated calls, in seconds.

    On a shared machine the CPU time of this single-threaded process is the better estimate of the time on an idle
    machine; both are reported.
    """

    def __init__(self, wall: list[float], cpu: list[float]):
        self.wall = statistics.median(wall)
        self.cpu = statistics.median(cpu)

    def fmt(self, unit: str = "s", scale: float = 1.0, digits: int = 3) -> str:
        """``"wall unit (cpu unit CPU)"``."""
        return f"{self.wall * scale:.{digits}f} {unit} (CPU {self.cpu * scale:.{digits}f} {unit})"


def timed(fn, repeats: int) -> tuple[Timing, object]:
    """Time ``repeats`` calls of fn(); return the :class:`Timing` and the last result."""
    wall, cpu, result = [], [], None
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        result = fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return Timing(wall, cpu), result


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the Markdown table. Returns the exit code (1 if a check fails)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kb", type=Path, default=DEFAULT_KB, help="KB directory (default ../shared/edu-relat)")
    ap.add_argument("--targets", type=Path, default=None, help="targets file (default KB/targets.txt)")
    ap.add_argument("--repeats", type=int, default=20, help="closure runs per rule set (median)")
    ap.add_argument("--passes", type=int, default=3, help="passes over the targets for exact/minimum/random (median)")
    ap.add_argument("--seeds", type=int, default=100, help="seeds per target for random MDUS")
    ap.add_argument(
        "--baseline-targets",
        type=int,
        default=11,
        help="targets for the baseline seed-run (every k-th of the list; 0 skips it; 55 = all)",
    )
    ap.add_argument(
        "--baseline-lookup",
        choices=("scan", "dict"),
        default="scan",
        help="edge-id look-up of the baseline: linear scan as the paper's code, or a dict",
    )
    args = ap.parse_args(argv)
    if not (args.kb / "relationships.csv").is_file():
        print(f"no KB at {args.kb}", file=sys.stderr)
        return 2
    targets_path = args.targets or args.kb / "targets.txt"
    target_ids = read_targets(targets_path)
    n_t = len(target_ids)

    t0 = time.perf_counter()
    rules = {name: load_rules(name) for name in ("family", "family_paper_compat")}
    t_rules = time.perf_counter() - t0
    t0 = time.perf_counter()
    kb = load_kb(args.kb)
    t_kb = time.perf_counter() - t0

    compute_closure(kb, rules["family"])  # warm-up (imports, first grounding)
    load_before = os.getloadavg()[0]
    closure_t = {}
    closures = {}
    for name, rs in rules.items():
        closure_t[name], closures[name] = timed(lambda rs=rs: compute_closure(kb, rs), args.repeats)
    c = closures["family"]
    atoms = [c.atom_of_fact(f) for f in target_ids]

    exact_sets(c, [atoms[0]])  # warm-up
    t_exact, exact = timed(lambda: [exact_sets(c, [a]) for a in atoms], args.passes)
    t_min, minimum = timed(lambda: [minimum_set(c, [a]) for a in atoms], args.passes)
    t_rand, rand = timed(lambda: [random_sets(c, [a], n_seeds=args.seeds) for a in atoms], args.passes)

    failures = []
    exact_by_atom = {a: set(r.sets) for a, r in zip(atoms, exact)}
    if not all(r.complete for r in exact):
        failures.append("an exact enumeration did not complete")
    for a, m, r in zip(atoms, minimum, rand):
        if len(m.sets[0]) != min(len(s) for s in exact_by_atom[a]) or not m.complete:
            failures.append(f"minimum set of atom {a} is not of minimum size")
        if not set(r.sets) <= exact_by_atom[a]:
            failures.append(f"a random set of atom {a} is not an exact minimal set")
    n_exact = sum(len(r.sets) for r in exact)
    n_rand = sum(len(r.sets) for r in rand)

    # ---- baseline: the paper code's approach
    prules = rules_from_ruleset(rules["family"])
    t_bclos, bedges = timed(lambda: paper_closure(kb, prules), 3)
    if set(bedges) != set(c.atoms) or len(bedges) != len(c.atoms) or bedges[: c.n_kb] != c.atoms[: c.n_kb]:
        failures.append("baseline closure differs from clingo's")
    b_row = None
    if args.baseline_targets > 0:
        k = max(1, n_t // args.baseline_targets) if args.baseline_targets < n_t else 1
        subset = atoms[::k][: args.baseline_targets]
        pm = PaperMDUS(kb, prules, bedges, args.baseline_lookup)
        t_bseed, bsets = timed(lambda: [pm.run(a, seed=0) for a in subset], 1)  # edge ids = dukb atom ids
        for a, s in zip(subset, bsets):
            if tuple(sorted(c.fact_ids[i] for i in s)) not in exact_by_atom[a]:
                failures.append(f"baseline set for atom {a} is not an exact minimal set")
        b_row = (len(subset), t_bseed)

    import clingo
    import ortools

    cmd = "python " + " ".join(shlex.quote(a) for a in [os.path.relpath(__file__), *(argv or sys.argv[1:])])
    print(f"Command: `{cmd}`  ")
    print(
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}, Python "
        f"{platform.python_version()}, clingo {clingo.__version__}, OR-tools {ortools.__version__}  "
    )
    print(
        f"Load average (1 min) before/after: {load_before:.2f} / {os.getloadavg()[0]:.2f}; times are wall "
        "(CPU time of this single-threaded process in brackets).  "
    )
    print(
        f"KB: {args.kb.name}: {len(kb.people)} people, {c.n_kb} relationship facts, closure {len(c)} "
        f"({c.n_derived} derived, {c.n_instances} rule instances); {n_t} targets. "
        f"Load: KB {1000 * t_kb:.0f} ms, both rule sets {1000 * t_rules:.0f} ms (first load)."
    )
    print()
    print("| measurement | dukb | paper code's approach (bench/baseline_paper.py) | target |")
    print("|---|---:|---:|---:|")
    print(
        f"| closure, `family` (48 rules), median of {args.repeats} | {closure_t['family'].fmt('ms', 1e3, 1)} "
        f"| {t_bclos.fmt('ms', 1e3, 0)}, median of 3 (paper's code: 1.6 s) | <= 50 ms |"
    )
    print(
        f"| closure, `family_paper_compat` (46 rules), median of {args.repeats} "
        f"| {closure_t['family_paper_compat'].fmt('ms', 1e3, 1)} | | <= 50 ms |"
    )
    print(
        f"| exact: all minimal sets of the {n_t} targets ({n_exact} sets, all complete), median of "
        f"{args.passes} passes | {t_exact.fmt()} | not available (samples only) | <= 1 s |"
    )
    print(f"| minimum: one minimum set per target (CP-SAT), {n_t} targets | {t_min.fmt()} | | |")
    print(
        f"| random MDUS (Algorithm 1): {args.seeds} seeds x {n_t} targets ({n_rand} distinct sets) "
        f"| {t_rand.fmt()} | | <= 10 s |"
    )
    if b_row is not None:
        nb, tb = b_row
        scale = n_t / nb
        ours = Timing([t_rand.wall / args.seeds], [t_rand.cpu / args.seeds])
        extra = "" if nb == n_t else f"; measured on {nb} of {n_t} targets ({tb.fmt(digits=1)}), extrapolated"
        est = Timing([tb.wall * scale], [tb.cpu * scale])
        print(
            f"| one seed-run of Algorithm 1 over the {n_t} targets | {ours.fmt(digits=4)} "
            f"| {est.fmt(digits=0)}{extra} | |"
        )
        per_t = Timing([tb.wall / nb], [tb.cpu / nb])
        ours_t = Timing([t_rand.wall / args.seeds / n_t], [t_rand.cpu / args.seeds / n_t])
        print(
            f"| one seed-run, one target (mean) | {ours_t.fmt('ms', 1e3, 3)} | {per_t.fmt(digits=2)} "
            f"(paper's code: ~8.5 s) | |"
        )
        print(
            f"| {args.seeds} seeds x {n_t} targets | {t_rand.fmt()} "
            f"| {est.wall * args.seeds / 3600:.1f} h (CPU {est.cpu * args.seeds / 3600:.1f} h), extrapolated | |"
        )
    print()
    print(
        f"Baseline edge-id look-up: {args.baseline_lookup}. Checks: "
        + (
            "all passed (baseline closure = clingo closure; random, baseline and minimum sets agree with the "
            "exact sets)."
            if not failures
            else "FAILED: " + "; ".join(failures[:5])
        )
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
