"""Rendering evaluate results into the paper's tables and figures (pandas, matplotlib; no torch): summary.csv,
report.md (Table 1/2 layout) and accuracy_recall.png. The figures themselves are the summary metrics of
:mod:`dukb.neural.metrics.summary` (trade-off, Acc@Superficial), computed for the metrics a run asked for.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from dukb import InputError
from dukb.neural.metrics.summary import (ACCURACY, THRESHOLD, TRADEOFF_RULE, curve_points, envelope,  # noqa: F401
                                         setting_key, strength, superficial, target_tradeoff, tradeoff)
from dukb.neural.runs import journal_note, missing_units, output_file, read_json, report_journal  # noqa: F401

def summarize(df, accuracy: str = ACCURACY, by_relation: dict | None = None, metrics=None):
    """The summary table: one row per method (and per relation kind of the target when ``by_relation`` maps
    target -> relation), with the fields of every summary metric.

    Args:
        df: result rows (pandas DataFrame).
        accuracy: the accuracy column the curves use.
        by_relation: optional target -> relation kind, for the per-relation groups.
        metrics: summary :class:`dukb.neural.metrics.Metric` objects (default: every registered summary metric).

    Returns:
        DataFrame with group, method, n_targets and each metric's fields (trade-off: n_settings, acc_at_recall,
        recall_at_acc, ar_auc, observed_*; Acc@Superficial: acc_at_superficial, share_superficial).
    """
    import pandas as pd

    from dukb.neural.metrics import summary_metrics

    metrics = summary_metrics() if metrics is None else metrics
    groups = [("all", df)]
    if by_relation:
        rel = df["target"].map(by_relation)
        groups += [(r, df[rel == r]) for r in sorted(set(rel.dropna()))]
    rows = []
    for name, d in groups:
        per = [m.fn(d, accuracy) for m in metrics]
        for method in d["method"].unique():
            row = {"group": name, "method": method, "n_targets": int(d[d["method"] == method]["target"].nunique())}
            for values in per:
                row.update(values.get(method, {}))
            rows.append(row)
    return pd.DataFrame(rows)


def _fmt(v) -> str:
    return "–" if v is None or v != v else f"{v:.2f}"


def _pm(row: dict, key: str) -> str:
    """A per-target summary field as mean ± std (the std in ``key + "_std"``); "–" when empty."""
    m, sd = row.get(key), row.get(f"{key}_std")
    return _fmt(m) if sd is None or sd != sd or m is None or m != m else f"{m:.2f} ± {sd:.2f}"


def _heldout_section(df, allrows, head: list[str], config: dict) -> list[str]:
    """report.md's held-out section: Table 1's figures and the mean curve points judged on the probe forms the
    methods never trained on or queried (:mod:`dukb.neural.metrics.heldout`); [] when the rows have none."""
    if "acc_at_recall_heldout" not in allrows or allrows["acc_at_recall_heldout"].isna().all():
        return []
    from dukb.neural.metrics.summary import heldout_points

    recs = allrows.to_dict("records")
    per = {}
    for m, g in df.groupby("method", sort=False):
        seen, held = (g.iloc[0].get(k) for k in ("probe_forms_seen", "heldout_forms"))
        per[m] = (", ".join(seen) if isinstance(seen, list) and seen else "–",
                  ", ".join(held) if isinstance(held, list) else "–")
    lines = ["## Held-out probe forms", "", "Each method judged only on forms it never trained on or queried (a fact is "
             "known when a held-out form elicits it; the rule is config.json's `heldout_rule`):", "",
             "| method | forms it saw | held-out forms |", "|---|---|---|"]
    lines += [f"| {m} | {seen} | {held} |" for m, (seen, held) in per.items()]
    lines.append("")
    before = config.get("heldout_known_before")
    if isinstance(before, dict) and before.get("all") is not None:
        lines += [f"Before unlearning the held-out forms elicit {before['all']:.4f} of the KB's facts. The facts they "
                  "never elicited are unscorable: never counted as forgotten and left out of accuracy (each row's "
                  "`heldout_unscorable` counts them; --finetune-forms teaches more forms).", ""]
    lines += head
    for key, label in (("acc_at_recall_heldout", "Acc@Recall≥0.8, held-out (↑)"),
                       ("recall_at_acc_heldout", "Recall@Acc≥0.8, held-out (↑)"),
                       ("ar_auc_heldout", "AR-AUC, held-out (↑)")):
        lines.append(f"| {label} | " + " | ".join(_pm(r, key) for r in recs) + " |")
    lines.append("| Success-DU at the best setting, held-out | "
                 + " | ".join(_fmt(r.get("success_du_heldout")) for r in recs) + " |")
    lines.append("| first setting in the region, held-out | "
                 + " | ".join(f"`{r['region_setting_heldout']}`" if isinstance(r.get("region_setting_heldout"), str)
                              else "–" for r in recs) + " |")
    pts = curve_points(heldout_points(df))
    lines += ["", "| method | setting | recall (held-out) | accuracy (held-out) | target forgotten |",
              "|---|---|---|---|---|"]
    for p in pts.to_dict("records"):
        lines.append(f"| {p['method']} | `{p['setting']}` | {p['recall']:.3f} | {p['accuracy']:.3f} | "
                     f"{p['target_forgotten']:.2f} |")
    return lines + [""]


def markdown_report(df, summary, config: dict, finetune: dict | None = None, notes=()) -> str:
    """report.md: Table 1 layout (Acc@Recall≥0.8, Recall@Acc≥0.8, AR-AUC per method), Table 2 layout
    (Acc@Superficial), per-relation table, curve points, and the run's config, seed, versions and device.

    Table 1 shows the paper's per-target rule as mean ± std over targets, then the mean-envelope variant, the
    observed values and Success-DU, with :data:`dukb.neural.metrics.summary.TRADEOFF_RULE` under it; ``notes``
    (strings) are appended to the sentence under the curve points.

    Source: Wu et al. 2025, Tables 1/6 and 2/8; the Eval-DU figure notebook (trade-off rule)."""
    allrows = summary[summary["group"] == "all"]
    methods = list(allrows["method"])
    lines = ["# dukb evaluate report (Eval-DU protocol)", ""]
    model = config.get("model", "?")
    lines += [f"KB: `{config.get('kb')}` · model: `{model}` · rules: `{config.get('rules')}` · sets: "
              f"{config.get('sets')} · targets: {config.get('n_targets')} · seed: {config.get('seed')}", ""]
    if finetune:
        lines += [f"Finetuned model accuracy before unlearning: {finetune.get('accuracy', float('nan')):.4f} "
                  f"({finetune.get('epochs_run')} epochs, {finetune.get('seconds', 0):.1f} s)", ""]
    head = ["| metric | " + " | ".join(m.upper() for m in methods) + " |", "|---|" + "---|" * len(methods)]
    if "acc_at_recall" in allrows:
        lines += ["## Table 1: trade-off between recall and accuracy", "", *head]
        recs = allrows.to_dict("records")
        for key, label in (("acc_at_recall", "Acc@Recall≥0.8 (↑)"), ("recall_at_acc", "Recall@Acc≥0.8 (↑)"),
                           ("ar_auc", "AR-AUC (↑)")):
            lines.append(f"| {label} | " + " | ".join(_pm(r, key) for r in recs) + " |")
        for key, label in (("acc_at_recall_envelope", "Acc@Recall≥0.8, mean envelope"),
                           ("recall_at_acc_envelope", "Recall@Acc≥0.8, mean envelope"),
                           ("ar_auc_envelope", "AR-AUC, mean envelope"),
                           ("observed_acc_at_recall", "observed Acc@Recall≥0.8"),
                           ("observed_recall_at_acc", "observed Recall@Acc≥0.8"),
                           ("success_du", "Success-DU at the best setting (↑)"),
                           ("success_du_any", "Success-DU at any setting")):
            if key in allrows:
                lines.append(f"| {label} | " + " | ".join(_fmt(v) for v in allrows[key]) + " |")
        lines += ["", TRADEOFF_RULE + " Success-DU: share of targets not in the deductive closure of the KB minus "
                  "the facts the model forgot (Definition 2).", ""]
    lines += _heldout_section(df, allrows, head, config)
    from dukb.neural.attacks.report import attacks_section

    lines += attacks_section(df)
    if "acc_at_superficial" in allrows:
        lines += ["## Table 2: accuracy at superficial unlearning", "", *head,
                  "| Acc@Superficial (↑) | " + " | ".join(_pm(r, "acc_at_superficial")
                                                       for r in allrows.to_dict("records")) + " |",
                  "| accuracy at the weakest forgetting setting | "
                  + " | ".join(_fmt(v) for v in allrows.get("acc_at_superficial_weakest", [None] * len(allrows)))
                  + " |",
                  "| share of targets forgotten | " + " | ".join(_fmt(v) for v in allrows["share_superficial"])
                  + " |", "", "Acc@Superficial as the Eval-DU figure code computes it: per target the largest accuracy "
                  "among the settings that make the target itself unknown (0 when none does), mean ± std over "
                  "targets; the row under it is dukb's earlier reading (the weakest such setting, over the targets "
                  "some setting forgets).", ""]
    from pandas.api.types import is_numeric_dtype

    extra = [c for c in df.columns if c.startswith(("rouge_l_", "logprob_")) and is_numeric_dtype(df[c])]
    if extra:  # row metrics beyond recall: mean over targets and settings (a non-numeric field is not a metric)
        means = df.groupby("method", sort=False)[extra].mean()
        lines += ["## Other metrics (mean over targets and settings)", "", *head]
        for c in extra:
            lines.append(f"| {c} | " + " | ".join(_fmt(means.loc[m, c]) for m in methods) + " |")
        lines.append("")
    rel = summary[summary["group"] != "all"]
    if len(rel) and "acc_at_recall" in rel:
        lines += ["## By relation of the target", "", "| relation | method | targets | Acc@Recall≥0.8 | Recall@Acc≥0.8 "
                  "| AR-AUC |", "|---|---|---|---|---|---|"]
        for r in rel.to_dict("records"):
            lines.append(f"| {r['group']} | {r['method']} | {r['n_targets']} | {_pm(r, 'acc_at_recall')} | "
                         f"{_pm(r, 'recall_at_acc')} | {_pm(r, 'ar_auc')} |")
        lines += ["", "Per-target rule, mean ± std over the relation's targets (as Table 1).", ""]
    if "recall" in df.columns:
        pts = curve_points(df)
        sdu = "success_du" in pts
        lines += ["## Accuracy-recall points (mean over targets)", "", "| method | setting | recall | accuracy | "
                  "target forgotten |" + (" Success-DU |" if sdu else ""),
                  "|---|---|---|---|---|" + ("---|" if sdu else "")]
        for p in pts.to_dict("records"):
            lines.append(f"| {p['method']} | `{p['setting']}` | {p['recall']:.3f} | {p['accuracy']:.3f} | "
                         f"{p['target_forgotten']:.2f} |" + (f" {_fmt(p['success_du'])} |" if sdu else ""))
    lines += ["", "Mean envelope: upper envelope through the mean points, anchored at (0, 1) and (1, 0), linear "
              "interpolation; observed values use measured points only (– when none reaches 0.8)."
              + "".join(f" {n}" for n in notes), "",
              "## Config", "", "```json", json.dumps(config, indent=2, default=str), "```", ""]
    return "\n".join(lines)


def plot_curves(df, path, accuracy: str = ACCURACY, *, band: str = "std", order=None) -> list[Path]:
    """accuracy_recall.png and accuracy_recall.pdf: the qa and held-out panels of mean curves over targets with
    bands and setting labels (:func:`dukb.neural.plots.tradeoff_figure`).

    Returns:
        [png path, pdf path].
    """
    from dukb.neural.plots import tradeoff_figure

    return tradeoff_figure(df, path, accuracy=accuracy, band=band, order=order)


def render(run_dir) -> dict:
    """(Re)write summary.csv, report.md and accuracy_recall.png of a run directory from results.jsonl alone.

    Returns:
        dict of written paths (summary, report, plot) and ``missing_units``: the (target, method, value) units of
        the run's identity without a row (:func:`dukb.neural.runs.missing_units`), also named in report.md.

    Raises:
        FileNotFoundError: no results.jsonl; ValueError: it holds no rows; InputError: a file read is not a
            regular file (a FIFO, a device, a folder), too large or not JSON, or a directory is in an output's place
            (named).
    """
    import pandas as pd

    run = Path(run_dir)
    if not (run / "results.jsonl").exists():
        raise FileNotFoundError(f"{run / 'results.jsonl'}: no such file")
    # each damaged line (not JSON, not a row: a missing field, a NaN) on stderr as FILE:LINE and in report.md; the
    # valid rows are all rendered
    journal = report_journal(run / "results.jsonl", "evaluate")
    rows = journal.rows
    if not rows:
        raise ValueError(f"{run / 'results.jsonl'}: no result rows yet")
    config = read_json(run / "config.json", "run config") if os.path.lexists(run / "config.json") else {}
    if not isinstance(config, dict):
        raise InputError("not a run config (expected a JSON object)", run / "config.json")
    from dukb.neural.metrics.recall import fill_success_du

    rows, sdu_note = fill_success_du(rows, config)  # rows of an older dukb lack success_du
    missing = missing_units(config["identity"], rows) if isinstance(config.get("identity"), dict) else []
    if missing:
        shown = ", ".join(f"({t}, {m}, {v:g})" for t, m, v in missing[:8])
        sdu_note = ((sdu_note + " ") if sdu_note else "") + (
            f"{len(missing)} (target, method, setting) units of the run have no row yet: {shown}"
            f"{', ...' if len(missing) > 8 else ''}; the figures cover the rows present (resume the run to add "
            "them).")
    df = pd.DataFrame(rows)
    finetune = read_json(run / "finetune.json", "finetune record") if os.path.lexists(run / "finetune.json") \
        else None
    from dukb.neural.metrics import DEFAULT_METRICS, parse_metrics, summary_metrics

    by_rel = {r["target"]: r.get("target_relation") for r in rows if r.get("target_relation")}
    wanted = summary_metrics(parse_metrics(config.get("metrics") or DEFAULT_METRICS))
    if "recall" not in df.columns:  # the summary metrics read recall and accuracy
        wanted = []
    summary = summarize(df, by_relation=by_rel or None, metrics=wanted)
    summary.to_csv(output_file(run / "summary.csv"), index=False)
    output_file(run / "report.md").write_text(markdown_report(df, summary, config, finetune, [sdu_note] if sdu_note else [])
                                   + journal_note(journal),
                                   encoding="utf-8")
    paths = {"summary": run / "summary.csv", "report": run / "report.md", "missing_units": missing}
    if "recall" in df.columns:
        from dukb.neural.plots import run_order

        paths["plot"], paths["plot_pdf"] = plot_curves(df, run / "accuracy_recall.png", order=run_order(config))
    from dukb.neural.attacks.report import plot_attacks

    if plot_attacks(df, output_file(run / "attacks.png")):
        paths["attacks_plot"] = run / "attacks.png"
    return paths
