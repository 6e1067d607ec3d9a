"""Print one markdown line per row of a `dukb evaluate` run: its setting, recall, accuracy, whether the target was
forgotten and Success-DU on the qa form, and the same on the held-out forms.

    python bench/rows_table.py RUN_DIR

Source: Wu et al. 2025, Eq. 1-2 (recall, accuracy) and Definition 2 (Success-DU), as the rows record them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

#: setting keys that qualify a setting rather than name its swept value
QUALIFIERS = ("lr", "schedule", "schedule_steps", "beta")


def number(x: object) -> str:
    """A value for the table: two decimals for a float, "–" for None."""
    return "–" if x is None else f"{x:.2f}" if isinstance(x, float) else str(x)


def main() -> None:
    """Read RUN_DIR/results.jsonl and print the table."""
    rows = [json.loads(line) for line in (Path(sys.argv[1]) / "results.jsonl").open() if line.strip()]
    print(
        "| target | method | setting | recall (qa) | accuracy (qa) | target forgotten | Success-DU "
        "| recall (held-out) | accuracy (held-out) | Success-DU (held-out) |"
    )
    print("|---|---|---|---:|---:|---|---:|---:|---:|---:|")
    for r in rows:
        key = next(k for k in r["setting"] if k not in QUALIFIERS)
        print(
            f"| {r['target']} | {r['method']} | {key} {r['setting'][key]} | {number(r['recall'])} "
            f"| {number(r['accuracy_all'])} | {'yes' if r['target_forgotten'] else 'no'} | {r['success_du']} "
            f"| {number(r.get('recall_heldout'))} | {number(r.get('accuracy_all_heldout'))} "
            f"| {r.get('success_du_heldout', '–')} |"
        )


if __name__ == "__main__":
    main()
