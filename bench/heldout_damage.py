"""Where held-out accuracy goes: the facts an unlearned model lost on held-out forms, near or far from what it
unlearned.

Usage: python bench/heldout_damage.py KB_DIR RUN_DIR METHOD ROUNDS [RUN_DIR METHOD ROUNDS ...]

For each (run, method, setting with ``rounds`` = ROUNDS) and every row of it: the facts scored for held-out accuracy
(scorable, not retain-train, not in the row's best held-out set) that the held-out forms no longer elicit, split by
whether they name a person of the facts the method unlearned (the row's ``trace.trained_on``: subject or object of
a relationship, subject of a biography), and how many of them the qa form also lost. Prints one markdown row per
setting (sums over targets). Reads the rows of RUN_DIR/results.jsonl only (no model; a multi-process run's shards
once `dukb report` has merged them); refuses a run made on another KB.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> int:
    from dukb.kb import load_kb

    args = sys.argv[1:]
    if len(args) < 4 or (len(args) - 1) % 3:
        print(__doc__.splitlines()[3], file=sys.stderr)
        return 2
    kb = load_kb(args[0])
    rel = {f.fact_id: f for f in kb.relationships}
    bio = {b.fact_id: b for b in kb.biographies}
    print(f"Command: python {' '.join(sys.argv)}\n")
    print(
        "| run | method | rounds | targets | lost, near (rel + bio) | lost, far (rel + bio) | far share | "
        "of the lost, also lost on qa |\n|---|---|---:|---:|---:|---:|---:|---:|"
    )
    for i in range(1, len(args), 3):
        run, method, rounds = args[i], args[i + 1], int(args[i + 2])
        fp = json.loads((Path(run) / "config.json").read_text()).get("kb_fingerprint")
        if fp is not None and fp != kb.fingerprint():
            print(f"{run} was made on another KB than {args[0]}", file=sys.stderr)
            return 2
        rows = [json.loads(x) for x in (Path(run) / "results.jsonl").read_text().splitlines() if x.strip()]
        rows = [r for r in rows if r["method"] == method and r["setting"].get("rounds") == rounds]
        near = far = both = 0
        for r in rows:
            people = set()
            for f in r["trace"]["trained_on"]:
                people |= {rel[f].subject, rel[f].object}
            best = set(r.get("best_set_heldout") or ())
            ret_r = set(r["retain_fact_ids"]["relationships"]) | best
            ret_b = set(r["retain_fact_ids"]["biographies"])
            qa_r, qa_b = set(r["forgotten_relationships"]), set(r["forgotten_biographies"])
            for f in set(r["forgotten_relationships_heldout"]) - ret_r:
                n = bool({rel[f].subject, rel[f].object} & people)
                near, far, both = near + n, far + (not n), both + (f in qa_r)
            for f in set(r["forgotten_biographies_heldout"]) - ret_b:
                n = bio[f].subject in people
                near, far, both = near + n, far + (not n), both + (f in qa_b)
        lost = near + far
        share = f"{far / lost:.2f}" if lost else "–"
        also = f"{both / lost:.2f}" if lost else "–"
        print(f"| {run} | {method} | {rounds} | {len(rows)} | {near} | {far} | {share} | {also} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
