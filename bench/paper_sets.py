"""The paper's cached minimal deep unlearning sets beside dukb's exact sets, on the Eval-DU benchmark.

Usage: python bench/paper_sets.py [--kb ../shared/edu-relat] [--outcomes 20000] [--seed 0]

Prints, for each rule set (``family``, dukb's default, and ``family_paper_compat``):

1. which of the paper's sets (``unlearn_minimal_set/<id>.pt``, :mod:`dukb.kb.paper_sets`) are not deep unlearning
   sets or not minimal under the rules (Wu et al. 2025, Definitions 2-3), and how many of the paper's sets are
   among the exact ones;
2. on random unlearning outcomes, how often recall (Eq. 1) over dukb's exact sets differs from recall over the
   paper's sets, and by how much. An outcome: a target drawn uniformly from the 55, a rate p ~ U(0, 1), and every
   relationship fact of the KB forgotten independently with probability p (recall depends only on the facts of
   the sets; the draw covers outcomes from nearly nothing to nearly everything forgotten);
3. over the same outcomes, with the paper's sets, what the tie-break changes: accuracy_all under ``accuracy``
   (dukb's default: the higher relationship accuracy among the sets tied on recall) minus under ``first`` (the
   reference's argmax, calculate_recall_and_acc.py:43). Biographies are left out (only U_A,* differs).

Figures of one run are in docs/compat.md ("Eval-DU: minimal deep unlearning sets").
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dukb.kb import load_kb  # noqa: E402
from dukb.kb.paper_sets import find_paper_sets  # noqa: E402
from dukb.solver.closure import compute_closure  # noqa: E402
from dukb.solver.mdus import is_deep_unlearning_set, is_minimal, minimal_sets  # noqa: E402
from dukb.solver.metrics import recall_accuracy  # noqa: E402


def sets_report(kb, rules: str, paper: dict) -> dict:
    """Per target: the exact sets under ``rules`` and which paper sets are not (minimal) deep unlearning sets."""
    closure = compute_closure(kb, rules)
    out = {}
    for t, psets in paper.items():
        atom = [closure.atom_of_fact(t)]
        res = minimal_sets(closure, atom, "exact", max_sets=100_000, seconds=120)
        exact = {frozenset(s) for s in res.sets}
        bad = []
        for rank, s in enumerate(psets, 1):
            if not is_deep_unlearning_set(closure, atom, s):
                bad.append((rank, s, "not a deep unlearning set"))
            elif not is_minimal(closure, atom, s):
                bad.append((rank, s, "not minimal"))
        out[t] = {
            "exact": res.sets,
            "complete": res.complete,
            "bad": bad,
            "paper_in_exact": sum(frozenset(s) in exact for s in psets),
        }
    return out


def recall_diffs(kb, exact: dict, paper: dict, n: int, seed: int) -> dict:
    """Recall over exact vs paper sets on ``n`` random outcomes (module docstring), and the tie-break's effect."""
    rng = random.Random(seed)
    targets = sorted(paper)
    rel_ids = list(kb.rel_ids)
    diffs, tie = [], []
    for _ in range(n):
        t = rng.choice(targets)
        p = rng.random()
        gone = [f for f in rel_ids if rng.random() < p]
        r_exact = recall_accuracy(kb, exact[t], gone).recall
        by_acc = recall_accuracy(kb, paper[t], gone, tie_break="accuracy")
        by_first = recall_accuracy(kb, paper[t], gone, tie_break="first")
        diffs.append(r_exact - by_acc.recall)
        tie.append(by_acc.accuracy_all - by_first.accuracy_all)
    return {"diffs": diffs, "tie": tie}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kb", default=str(ROOT.parent / "shared" / "edu-relat"))
    ap.add_argument("--outcomes", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    kb = load_kb(args.kb)
    found = find_paper_sets(args.kb, set(kb.rel_ids))
    if found is None:
        print(f"{args.kb} has no paper sets", file=sys.stderr)
        return 2
    paper, where = found
    print(
        f"paper sets: {where}: {len(paper)} targets, {sum(map(len, paper.values()))} sets "
        f"(sizes {min(len(s) for v in paper.values() for s in v)}-{max(len(s) for v in paper.values() for s in v)})"
    )
    for rules in ("family", "family_paper_compat"):
        t0 = time.perf_counter()
        rep = sets_report(kb, rules, paper)
        n_exact = sum(len(r["exact"]) for r in rep.values())
        print(
            f"\n[rules {rules}] exact sets: {n_exact} over {len(rep)} targets "
            f"(all complete: {all(r['complete'] for r in rep.values())}; {time.perf_counter() - t0:.1f} s)"
        )
        print(
            f"  paper sets that are exact sets: {sum(r['paper_in_exact'] for r in rep.values())} of "
            f"{sum(map(len, paper.values()))}; targets whose paper sets are all exact sets: "
            f"{sum(r['paper_in_exact'] == len(paper[t]) for t, r in rep.items())} of {len(rep)}"
        )
        bad = [(t, b) for t, r in rep.items() for b in r["bad"]]
        print(f"  paper sets that are not minimal deep unlearning sets: {len(bad)}" + ("" if bad else " (none)"))
        for t, (rank, s, why) in bad:
            print(f"    target {t}, set {rank} of {len(paper[t])} ({len(s)} facts: {' '.join(map(str, s))}): {why}")
        res = recall_diffs(kb, {t: r["exact"] for t, r in rep.items()}, paper, args.outcomes, args.seed)
        d = res["diffs"]
        n = len(d)
        up, down = sum(x > 1e-12 for x in d), sum(x < -1e-12 for x in d)
        print(
            f"  {n:,} random outcomes (seed {args.seed}): recall(exact) - recall(paper) > 0 in {up:,} "
            f"({100 * up / n:.1f}%), < 0 in {down:,} ({100 * down / n:.1f}%); largest {max(d):+.4f}, "
            f"smallest {min(d):+.4f}, mean {sum(d) / n:+.5f}"
        )
    tie = res["tie"]  # the paper's sets and the outcomes do not depend on the rules
    moved = [x for x in tie if abs(x) > 1e-12]
    print(
        f"\ntie-break on the paper's sets (any rules), accuracy_all(accuracy) - accuracy_all(first): differs in "
        f"{len(moved):,} of {n:,} outcomes ({100 * len(moved) / n:.1f}%); mean {sum(tie) / n:+.5f}, largest "
        f"{max(tie):+.4f}, smallest {min(tie):+.4f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
