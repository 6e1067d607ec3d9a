"""Mean curve points per setting on the seen form (qa) and on the held-out forms, from evaluate runs' rows alone.

Usage: python bench/heldout_points.py RUN_DIR [RUN_DIR ...]

For each run and method: the targets with complete rows, then per setting the mean recall and accuracy_all (the qa
form, which every built-in method trains on and CL-DU also queries), the mean recall_heldout and
accuracy_all_heldout (only forms the method never saw; dukb.neural.metrics.heldout), the held-out recall over the
facts those forms can judge (recall_heldout_scorable, recomputed from the rows), Success-DU on both, and the
paper's per-target trade-off rule on both (dukb.neural.metrics.summary). Prints markdown; the command line is
printed above each table so the figures can be regenerated.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> int:
    import pandas as pd

    from dukb.neural.metrics.run_summary import heldout_tradeoff
    from dukb.neural.metrics.summary import curve_points, heldout_points, per_target_tradeoff

    for run in sys.argv[1:]:
        rows = [json.loads(x) for x in (Path(run) / "results.jsonl").read_text().splitlines() if x.strip()]
        df = pd.DataFrame(rows)
        cfg = json.loads((Path(run) / "config.json").read_text())
        # only targets whose every setting of the method is written (a run still going has partial targets)
        full = []
        for (_m, _t), g in df.groupby(["method", "target"]):
            if len(g) == len(cfg["grids"][g["method"].iloc[0]]):
                full.append(g)
        df = pd.concat(full)
        # the recall over the facts the held-out forms can judge (rows written before the field: recomputed)
        from dukb.neural.metrics.heldout import scorable_recall

        sets = json.loads((Path(run) / "sets.json").read_text())["targets"]
        un = (cfg.get("heldout_known_before") or {}).get("unelicited", {}).get("relationships", [])
        df["recall_heldout_scorable"] = [
            scorable_recall(sets[str(t)]["sets"], f, un)
            for t, f in zip(df["target"], df["forgotten_relationships_heldout"])
        ]
        before = cfg.get("heldout_known_before", {}).get("all")
        print(
            f"Command: python {' '.join(sys.argv)} ({run}); held-out forms elicit "
            f"{before:.4f} of the KB before unlearning\n"
            if before is not None
            else "\n"
        )
        seen = curve_points(df)
        held = curve_points(heldout_points(df))
        df["setting_json"] = df["setting"].map(lambda x: json.dumps(x, sort_keys=True))
        scor = df.groupby(["method", "setting_json"])["recall_heldout_scorable"].mean()
        print(
            "| method | targets | setting | recall (qa) | accuracy (qa) | Success-DU (qa) | recall (held-out) | "
            "recall (held-out, judged facts) | accuracy (held-out) | Success-DU (held-out) |\n"
            "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"
        )
        for s, h in zip(seen.to_dict("records"), held.to_dict("records")):
            sc = scor.get((s["method"], s["setting"]), float("nan"))
            print(
                f"| {s['method']} | {s['n_targets']} | `{s['setting']}` | {s['recall']:.3f} | {s['accuracy']:.3f} | "
                f"{s['success_du']:.2f} | {h['recall']:.3f} | {sc:.3f} | {h['accuracy']:.3f} | "
                f"{h['success_du']:.2f} |"
            )
        tq, th = per_target_tradeoff(df), heldout_tradeoff(df)
        print(
            "\n| method | Acc@Recall≥0.8 (qa) | Recall@Acc≥0.8 (qa) | AR-AUC (qa) | Acc@Recall≥0.8 (held-out) | "
            "Recall@Acc≥0.8 (held-out) | AR-AUC (held-out) | first setting in the region (held-out) |\n"
            "|---|---:|---:|---:|---:|---:|---:|---|"
        )
        for m in tq:
            a, b = tq[m], th.get(m, {})
            print(
                f"| {m} | {a['acc_at_recall']:.2f} ± {a['acc_at_recall_std']:.2f} | {a['recall_at_acc']:.2f} ± "
                f"{a['recall_at_acc_std']:.2f} | {a['ar_auc']:.2f} ± {a['ar_auc_std']:.2f} | "
                f"{b.get('acc_at_recall_heldout', float('nan')):.2f} | {b.get('recall_at_acc_heldout', float('nan')):.2f} "
                f"| {b.get('ar_auc_heldout', float('nan')):.2f} | {b.get('region_setting_heldout') or '–'} |"
            )
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
