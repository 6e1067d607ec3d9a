"""Print the attack tables of bench/RESULTS.md from evaluate runs made with --attacks.

    python bench/attack_table.py RUN_DIR [RUN_DIR ...]

For every (method, setting) of each run: the mean over targets of recall, accuracy_all and Success-DU with no
attack (the row's own probe), then recall / Success-DU under each attack of the run, and the worst case
(recall_under_attack). Runs given together are joined on (method, setting) (e.g. one run per relearning mode).
Then, for runs with the incontext attack, the share of in-context prompts answered per (method, setting).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def rows_of(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines() if x.strip()]


def main(runs: list[str]) -> None:
    table: dict[tuple, dict] = {}
    attacks: list[str] = []
    for run in map(Path, runs):
        for r in rows_of(run):
            setting = r.get("setting") or {}
            key = (r["method"], setting.get(r.get("param")))
            t = table.setdefault(key, {"n": set(), "recall": [], "acc": [], "sdu": [], "att": {}})
            if r["target"] not in t["n"]:
                t["n"].add(r["target"])
                t["recall"].append(r["recall"])
                t["acc"].append(r["accuracy_all"])
                t["sdu"].append(r.get("success_du", 0))
            for name, e in (r.get("attacks") or {}).items():
                label = name if name != "relearn" else f"relearn:{e['settings'].get('mode')}"
                if label not in attacks:
                    attacks.append(label)
                t["att"].setdefault(label, {}).setdefault(r["target"], (e["recall"], e["success_du"]))
    mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")  # noqa: E731
    print(
        "| method | setting | targets | recall | accuracy | Success-DU | "
        + " | ".join(f"{a} recall / S-DU" for a in attacks)
        + " |"
    )
    print("|---|---|---|---|---|---|" + "---|" * len(attacks))
    for (m, v), t in table.items():
        cells = []
        for a in attacks:
            vals = list(t["att"].get(a, {}).values())
            cells.append(f"{mean([x[0] for x in vals]):.2f} / {mean([x[1] for x in vals]):.2f}" if vals else "–")
        print(
            f"| {m} | {v:g} | {len(t['n'])} | {mean(t['recall']):.2f} | {mean(t['acc']):.2f} | "
            f"{mean(t['sdu']):.2f} | " + " | ".join(cells) + " |"
        )
    incontext_table(runs)


def incontext_table(runs: list[str]) -> None:
    """The in-context premises attack per (method, setting): prompts over all targets, the share the unlearned
    model answers, the share the model before unlearning answers (the same prompts), and the share whose gold
    answer appears in the premises (pooled over prompts)."""
    pooled: dict[tuple, list[float]] = {}
    for run in map(Path, runs):
        for r in rows_of(run):
            e = (r.get("attacks") or {}).get("incontext")
            if not e or not e.get("n_prompts"):
                continue
            setting = r.get("setting") or {}
            acc = pooled.setdefault((r["method"], setting.get(r.get("param"))), [0, 0.0, 0.0, 0.0])
            n = e["n_prompts"]
            acc[0] += n
            acc[1] += n * e["deduction_rate"]
            acc[2] += n * (e.get("deduction_rate_reference") or 0.0)
            acc[3] += n * e.get("answer_in_premises", 0.0)
    if not pooled:
        return
    print("\n| method | setting | prompts | answered (unlearned) | answered (before unlearning) | gold in premises |")
    print("|---|---|---|---|---|---|")
    for (m, v), (n, d, ref, echo) in pooled.items():
        print(f"| {m} | {v:g} | {n} | {d / n:.1%} | {ref / n:.1%} | {echo / n:.1%} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
