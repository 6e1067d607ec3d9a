"""Aggregating evaluate results into the paper's tables and figures (pandas, matplotlib; no torch).

Per method and setting, recall and accuracy are averaged over targets; these mean points form the method's
accuracy-recall curve (Wu et al. 2025, Sec. 4, Fig. 3a: "each point is the average ... of an unlearning method with one
hyperparameter across the evaluation of 55 target facts"). Trade-off summaries (Table 1/6, Table 2/8):

- the curve is the upper envelope (best accuracy reachable at recall ≥ r) through the mean points, anchored at the
  finetuned model (recall 0, accuracy 1) and at forgetting everything (recall 1, accuracy 0), linearly
  interpolated; the paper does not spell out its interpolation, dukb documents this one;
- Acc@Recall≥0.8 = the curve's accuracy at recall 0.8; Recall@Acc≥0.8 = the largest recall whose curve accuracy is
  ≥ 0.8; AR-AUC = the area under the curve on [0, 1]. The ``observed_*`` variants use measured points only (None if
  no setting reaches the threshold);
- Acc@Superficial = mean over targets of the accuracy at the weakest setting that makes the target itself unknown
  (superficial unlearning), with the share of targets where some setting does.
"""

from __future__ import annotations

import json
from pathlib import Path

from dukb.neural.runs import read_results

THRESHOLD = 0.8
ACCURACY = "accuracy_all"


def setting_key(setting: dict) -> str:
    """Canonical string of a setting dict (the grid parameter and fixed hyper-parameters)."""
    return json.dumps(setting, sort_keys=True)


def strength(row: dict) -> float:
    """The swept value of a row (steps or alpha): larger means stronger unlearning."""
    return float(row["setting"][row["param"]])


def envelope(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Upper envelope of (recall, accuracy) points with anchors (0, 1) and (1, 0): sorted by recall, accuracy made
    non-increasing (best accuracy reachable at recall ≥ r)."""
    pts = sorted(set(points) | {(0.0, 1.0), (1.0, 0.0)})
    out: list[tuple[float, float]] = []
    best = -1.0
    for r, a in reversed(pts):
        best = max(best, a)
        out.append((r, best))
    out.reverse()
    # drop points dominated at equal recall
    dedup: dict[float, float] = {}
    for r, a in out:
        dedup[r] = max(a, dedup.get(r, -1.0))
    return sorted(dedup.items())


def _interp(curve, x: float) -> float:
    for (r0, a0), (r1, a1) in zip(curve, curve[1:]):
        if r0 <= x <= r1:
            return a0 if r1 == r0 else a0 + (a1 - a0) * (x - r0) / (r1 - r0)
    return curve[-1][1]


def tradeoff(points: list[tuple[float, float]], threshold: float = THRESHOLD) -> dict:
    """Acc@Recall≥t, Recall@Acc≥t and AR-AUC of mean (recall, accuracy) points (see module docstring).

    Returns:
        dict with acc_at_recall, recall_at_acc, ar_auc (curve-based, in [0, 1]) and observed_acc_at_recall,
        observed_recall_at_acc (measured points only, None when none reaches the threshold).
    """
    curve = envelope(points)
    auc = sum((r1 - r0) * (a0 + a1) / 2 for (r0, a0), (r1, a1) in zip(curve, curve[1:]))
    acc_at = _interp(curve, threshold)
    rec_at = 0.0
    for (r0, a0), (r1, a1) in zip(curve, curve[1:]):
        if a0 >= threshold:
            rec_at = r0
            if a1 >= threshold:
                rec_at = r1
            elif a0 != a1:
                rec_at = r0 + (r1 - r0) * (a0 - threshold) / (a0 - a1)
    obs_acc = [a for r, a in points if r >= threshold]
    obs_rec = [r for r, a in points if a >= threshold]
    return {"acc_at_recall": acc_at, "recall_at_acc": rec_at, "ar_auc": auc,
            "observed_acc_at_recall": max(obs_acc) if obs_acc else None,
            "observed_recall_at_acc": max(obs_rec) if obs_rec else None}


def curve_points(df, accuracy: str = ACCURACY):
    """Mean recall and accuracy per (method, setting) over targets.

    Args:
        df: results DataFrame (one row per target, method, setting).

    Returns:
        DataFrame with method, setting (JSON), strength, recall, accuracy, n_targets, target_forgotten (share).
    """
    import pandas as pd

    d = df.copy()
    d["setting_json"] = d["setting"].map(setting_key)
    d["strength"] = [strength(r) for r in d.to_dict("records")]
    g = d.groupby(["method", "setting_json"], sort=False).agg(
        strength=("strength", "first"), recall=("recall", "mean"), accuracy=(accuracy, "mean"),
        n_targets=("target", "nunique"), target_forgotten=("target_forgotten", "mean")).reset_index()
    order = {m: i for i, m in enumerate(d["method"].unique())}  # methods in the order the run lists them
    g = g.rename(columns={"setting_json": "setting"})
    g = g.assign(_o=g["method"].map(order)).sort_values(["_o", "strength"]).drop(columns="_o")
    return pd.DataFrame(g)


def superficial(df, accuracy: str = ACCURACY) -> dict:
    """Acc@Superficial per method: mean accuracy at the weakest setting that forgets the target itself.

    Returns:
        method -> {"acc_at_superficial": float | None, "share_forgotten": float in [0, 1]}.
    """
    out = {}
    for method, g in df.groupby("method", sort=False):
        accs, n = [], g["target"].nunique()
        for _, t in g.groupby("target"):
            t = t.assign(s=[strength(r) for r in t.to_dict("records")]).sort_values("s")
            hit = t[t["target_forgotten"] == True]  # noqa: E712
            if len(hit):
                accs.append(float(hit.iloc[0][accuracy]))
        out[method] = {"acc_at_superficial": sum(accs) / len(accs) if accs else None,
                       "share_forgotten": len(accs) / n if n else 0.0}
    return out


def summarize(df, accuracy: str = ACCURACY, by_relation: dict | None = None):
    """The summary table: one row per method (and per relation kind of the target when ``by_relation`` maps
    target -> relation).

    Returns:
        DataFrame with group, method, n_targets, n_settings, acc_at_recall, recall_at_acc, ar_auc,
        observed_acc_at_recall, observed_recall_at_acc, acc_at_superficial, share_superficial.
    """
    import pandas as pd

    groups = [("all", df)]
    if by_relation:
        rel = df["target"].map(by_relation)
        groups += [(r, df[rel == r]) for r in sorted(set(rel.dropna()))]
    rows = []
    for name, d in groups:
        pts = curve_points(d, accuracy)
        sup = superficial(d, accuracy)
        for method, p in pts.groupby("method", sort=False):
            t = tradeoff(list(zip(p["recall"], p["accuracy"])))
            rows.append({"group": name, "method": method, "n_targets": int(d[d["method"] == method]["target"].nunique()),
                         "n_settings": len(p), **t,
                         "acc_at_superficial": sup[method]["acc_at_superficial"],
                         "share_superficial": sup[method]["share_forgotten"]})
    return pd.DataFrame(rows)


def _fmt(v) -> str:
    return "–" if v is None or v != v else f"{v:.2f}"


def markdown_report(df, summary, config: dict, finetune: dict | None = None) -> str:
    """report.md: Table 1 layout (Acc@Recall≥0.8, Recall@Acc≥0.8, AR-AUC per method), Table 2 layout
    (Acc@Superficial), per-relation table, curve points, and the run's config, seed, versions and device."""
    allrows = summary[summary["group"] == "all"]
    methods = list(allrows["method"])
    lines = ["# dukb evaluate report", ""]
    model = config.get("model", "?")
    lines += [f"KB: `{config.get('kb')}` · model: `{model}` · rules: `{config.get('rules')}` · sets: "
              f"{config.get('sets')} · targets: {config.get('n_targets')} · seed: {config.get('seed')}", ""]
    if finetune:
        lines += [f"Finetuned model accuracy before unlearning: {finetune.get('accuracy', float('nan')):.4f} "
                  f"({finetune.get('epochs_run')} epochs, {finetune.get('seconds', 0):.1f} s)", ""]
    lines += ["## Table 1: trade-off between recall and accuracy", "",
              "| metric | " + " | ".join(m.upper() for m in methods) + " |",
              "|---|" + "---|" * len(methods)]
    for key, label in (("acc_at_recall", "Acc@Recall≥0.8 (↑)"), ("recall_at_acc", "Recall@Acc≥0.8 (↑)"),
                       ("ar_auc", "AR-AUC (↑)"), ("observed_acc_at_recall", "observed Acc@Recall≥0.8"),
                       ("observed_recall_at_acc", "observed Recall@Acc≥0.8")):
        lines.append(f"| {label} | " + " | ".join(_fmt(v) for v in allrows[key]) + " |")
    lines += ["", "## Table 2: accuracy at superficial unlearning", "",
              "| metric | " + " | ".join(m.upper() for m in methods) + " |", "|---|" + "---|" * len(methods),
              "| Acc@Superficial (↑) | " + " | ".join(_fmt(v) for v in allrows["acc_at_superficial"]) + " |",
              "| share of targets forgotten | " + " | ".join(_fmt(v) for v in allrows["share_superficial"]) + " |",
              ""]
    rel = summary[summary["group"] != "all"]
    if len(rel):
        lines += ["## By relation of the target", "", "| relation | method | targets | Acc@Recall≥0.8 | Recall@Acc≥0.8 "
                  "| AR-AUC |", "|---|---|---|---|---|---|"]
        for r in rel.to_dict("records"):
            lines.append(f"| {r['group']} | {r['method']} | {r['n_targets']} | {_fmt(r['acc_at_recall'])} | "
                         f"{_fmt(r['recall_at_acc'])} | {_fmt(r['ar_auc'])} |")
        lines.append("")
    pts = curve_points(df)
    lines += ["## Accuracy-recall points (mean over targets)", "", "| method | setting | recall | accuracy | target "
              "forgotten |", "|---|---|---|---|---|"]
    for p in pts.to_dict("records"):
        lines.append(f"| {p['method']} | `{p['setting']}` | {p['recall']:.3f} | {p['accuracy']:.3f} | "
                     f"{p['target_forgotten']:.2f} |")
    lines += ["", "Curve: upper envelope through the mean points, anchored at (0, 1) and (1, 0), linear "
              "interpolation; observed values use measured points only (– when none reaches 0.8).", "",
              "## Config", "", "```json", json.dumps(config, indent=2, default=str), "```", ""]
    return "\n".join(lines)


def plot_curves(df, path, accuracy: str = ACCURACY) -> None:
    """accuracy_recall.png: one curve per method (mean points per setting, in order of strength)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = curve_points(df, accuracy)
    fig, ax = plt.subplots(figsize=(5.5, 4.2), dpi=120)
    for method, p in pts.groupby("method", sort=False):
        ax.plot(p["recall"], p["accuracy"], marker="o", label=method.upper())
    ax.axvline(THRESHOLD, color="grey", lw=0.6, ls="--")
    ax.axhline(THRESHOLD, color="grey", lw=0.6, ls="--")
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("Recall (deep unlearning)")
    ax.set_ylabel("Accuracy (other facts kept)")
    ax.set_title("Accuracy-recall trade-off")
    ax.legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def render(run_dir) -> dict:
    """(Re)write summary.csv, report.md and accuracy_recall.png of a run directory from results.jsonl alone.

    Returns:
        dict of written paths.

    Raises:
        FileNotFoundError: no results.jsonl; ValueError: it holds no rows.
    """
    import pandas as pd

    run = Path(run_dir)
    rows = read_results(run / "results.jsonl")
    if not rows:
        raise ValueError(f"{run / 'results.jsonl'}: no result rows yet")
    df = pd.DataFrame(rows)
    config = json.loads((run / "config.json").read_text()) if (run / "config.json").exists() else {}
    finetune = json.loads((run / "finetune.json").read_text()) if (run / "finetune.json").exists() else None
    by_rel = {r["target"]: r.get("target_relation") for r in rows if r.get("target_relation")}
    summary = summarize(df, by_relation=by_rel or None)
    summary.to_csv(run / "summary.csv", index=False)
    (run / "report.md").write_text(markdown_report(df, summary, config, finetune), encoding="utf-8")
    plot_curves(df, run / "accuracy_recall.png")
    return {"summary": run / "summary.csv", "report": run / "report.md", "plot": run / "accuracy_recall.png"}
