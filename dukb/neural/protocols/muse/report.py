"""Rendering `dukb muse` results (pandas, matplotlib; no torch): summary.csv, report.md in MUSE's Table 3 layout,
scalability.png and sustainability.png (Fig. 6) and mia_roc.png (Fig. 4), each also as PDF.

Table 3 rows: f_target, f_retrain, then every method at the setting the selection rule picks
(:func:`dukb.neural.metrics.muse.select_setting`). Columns: VerbMem (C1), KnowMem on the forget set (C2), PrivLeak
(C3, with MUSE's over/under reading) and KnowMem on retain_eval (C4, utility), each with its change relative to
f_retrain and a 95% percentile bootstrap interval of the mean (Shi et al. 2024b, Table 3 and App. C).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dukb.neural.declare import compat_note
from dukb.neural.metrics.muse import bootstrap_ci, privleak_label, relative, select_setting
from dukb.neural.metrics.summary import config_lines, setting_label, versions_line, wrap_prose
from dukb.neural.plots import Panel, Series, lines_figure, run_order
from dukb.neural.protocols.muse.config import MUSE_ROWS, MuseConfig
from dukb.neural.run.files import RunDir, output_file, read_run_config
from dukb.neural.run.journal import journal_note, report_journal
from dukb.neural.run.units import unfinished_note, unfinished_units

COLUMNS = (
    ("verbmem_forget", "VerbMem ↓"),
    ("knowmem_forget", "KnowMem forget ↓"),
    ("knowmem_retain", "KnowMem retain ↑"),
)


def _key(r: dict) -> float:
    return float(r["setting"][r["param"]]) if r.get("param") else 0.0


def table_rows(rows: list[dict], request: str = "main", select: str = "first_below_retrain") -> list[dict]:
    """Table 3's rows of one request: target, retrain, then each method's selected setting.

    Returns:
        dicts with name, model_kind, setting, and the row's metric fields; [] when the references are missing.
    """
    mine = [r for r in rows if r["request"] == request]
    ref = {r["model_kind"]: r for r in mine if r["model_kind"] in ("target", "retrain")}
    if "retrain" not in ref or "target" not in ref:
        return []
    out = [{"name": "Target", **ref["target"]}, {"name": "Retrain", **ref["retrain"]}]
    methods = list(dict.fromkeys(r["method"] for r in mine if r["model_kind"] == "unlearned"))
    for m in methods:
        grid = sorted((r for r in mine if r["method"] == m and r["model_kind"] == "unlearned"), key=_key)
        out.append({"name": m.upper(), **select_setting(grid, ref["retrain"]["knowmem_retain"], select)})
    return out


def _setting(row: dict) -> str:
    """A row's setting as a label (``steps=4``, with the other hyper-parameters but lr), "" for a reference model."""
    setting = row.get("setting")
    if not isinstance(setting, dict) or not setting:
        return ""
    param = row.get("param")
    rest = {k: v for k, v in setting.items() if k not in ("lr", param)}
    return ", ".join(
        x for x in (setting_label(setting, param) if param in setting else "", setting_label(rest) if rest else "") if x
    )


def summarize_muse(rows: list[dict], select: str = "first_below_retrain", bootstrap: int = 9999, seed: int = 0):
    """summary.csv: one line per (request, reported model) with the four criteria, ratios to f_retrain and CIs.

    Returns:
        pandas DataFrame (request, experiment, name, model_kind, setting (a label, ``steps=4``), verbmem_forget, knowmem_forget,
        knowmem_retain, privleak, privleak_label, mia_auc, their ``*_vs_retrain`` ratios and ``*_ci_low/high``).
    """
    import pandas as pd

    out = []
    for request in dict.fromkeys(r["request"] for r in rows):
        trows = table_rows(rows, request, select)
        if not trows:
            continue
        retrain = trows[1]
        for t in trows:
            line = {
                "request": request,
                "experiment": t["experiment"],
                "name": t["name"],
                "model_kind": t["model_kind"],
                "setting": _setting(t),
                "privleak": t.get("privleak"),
                "privleak_label": privleak_label(t.get("privleak")),
                "mia_auc": t.get("mia_auc"),
            }
            for col, _ in COLUMNS:
                line[col] = t.get(col)
                line[f"{col}_vs_retrain"] = relative(t.get(col), retrain.get(col))
                vals = (t.get("items") or {}).get(col) or []
                lo, hi = bootstrap_ci(vals, bootstrap, seed=seed) if vals else (None, None)
                line[f"{col}_ci_low"], line[f"{col}_ci_high"] = lo, hi
            out.append(line)
    return pd.DataFrame(out)


def _pct(v) -> str:
    return "–" if v is None or v != v else f"{100 * v:.1f}"


def _arrow(v) -> str:
    if v is None or v != v:
        return ""
    return f" ({'↑' if v >= 0 else '↓'}{abs(100 * v):.1f}%)"


def _training_note(config: dict) -> str:
    """One line on what unlearning trained on, from the run identity's ``training`` entry."""
    ident = config.get("identity")
    tr = ident.get("training") if isinstance(ident, dict) else None
    if not isinstance(tr, dict):
        return (
            "Unlearning trained on the forget facts' QA pairs and statement texts (a run before training "
            "version 2): KnowMem forget scores QA pairs that were trained on."
        )
    return (
        "Unlearning trains on the statement texts alone: the forget facts' (D_forget) and, for GDR/KLR, the "
        "retain_train facts' (D_retain^(reg)); the KnowMem QA pairs are evaluation-only (MUSE, Sec. 2). Rows "
        "record `trained_forms`, `trained_fact_ids` and `scored_forms`."
    )


def compat_line(config: dict) -> str:
    """One line beside Table 3: the components where the run differs from MUSE's released code, or that it computes
    as MUSE's code (:func:`dukb.neural.declare.compat_note`). A run written before the components has dukb's
    values."""

    return compat_note(config, MuseConfig, "muse", "MUSE")


def markdown_report(summary, config: dict) -> str:
    """report.md: Table 3 of the main request (×100, change vs f_retrain), the CIs, then the C5/C6 tables."""
    lines = [
        "# dukb muse report",
        "",
        f"KB: `{config.get('kb')}` · model: `{config.get('model')}` · seed {config.get('seed')} · selection "
        f"rule `{config.get('select')}` · MIA: Min-K% (k = {config.get('mia_k')}) · VerbMem prefix "
        f"{config.get('verbmem_prefix')} of each text's tokens",
        "",
        "Values ×100; in brackets the change relative to f_retrain, (m − m_retrain) / m_retrain (MUSE, "
        "Table 3). PrivLeak = (AUC_unlearn − AUC_retrain) / AUC_retrain in MUSE's orientation: ≈ −100 for a "
        "model that remembers the forget set (under-unlearning), > 0 for over-unlearning, |PrivLeak| ≤ 5 "
        "passes.",
        "",
        _training_note(config),
        "",
        "**What to cite**: the Table 3 rows, each method at the setting the selection rule picks (MUSE, Sec. 4), "
        "with the bootstrap intervals under them; the C5/C6 tables are MUSE's scalability and sustainability "
        "curves.",
        "",
    ]
    main = summary[summary["request"] == "main"] if len(summary) else summary
    if len(main):
        lines += _table3_lines(main, config)
    for exp, title in (
        ("scalability", "C5 scalability: forget-set size (targets) → metrics"),
        ("sustainability", "C6 sustainability: sequential requests → metrics"),
    ):
        part = summary[summary["experiment"] == exp] if len(summary) else summary
        if len(part):
            lines += _curve_lines(part, title)

    lines += [
        "",
        "## Run",
        "",
        *config_lines(
            config,
            (
                "kb",
                "model",
                "targets",
                "n_targets",
                "methods",
                "curve_methods",
                "scale_sizes",
                "sustain",
                "holdout_frac",
                "retain_train_frac",
                "seed",
                "select",
                "forget_scope",
            ),
        ),
        *[v for v in [versions_line(config)] if v],
        "- everything else: config.json",
        "",
    ]
    return wrap_prose("\n".join(lines))


def _table3_lines(main, config: dict) -> list[str]:
    """report.md's Table 3 of the main request (rows ``main``, a DataFrame): per method its setting and metrics ×100
    with the change vs f_retrain (MUSE, Table 3), then the bootstrap intervals of the means."""
    lines = [
        "## Table 3 layout (main request)",
        "",
        compat_line(config),
        "",
        "| method | setting | VerbMem ↓ | KnowMem forget ↓ | PrivLeak | KnowMem retain ↑ |",
        "|---|---|---|---|---|---|",
    ]
    for _, r in main.iterrows():
        s = r["setting"] if isinstance(r["setting"], str) and r["setting"] else "–"

        def rel(c, r=r):
            return "" if r["model_kind"] == "retrain" else _arrow(r[f"{c}_vs_retrain"])

        pl = (
            "–"
            if r["privleak"] is None or r["privleak"] != r["privleak"]
            else f"{100 * r['privleak']:.1f} {r['privleak_label']}"
        )
        lines.append(
            f"| {r['name']} | {s} | {_pct(r['verbmem_forget'])}{rel('verbmem_forget')} | "
            f"{_pct(r['knowmem_forget'])}{rel('knowmem_forget')} | {pl} | "
            f"{_pct(r['knowmem_retain'])}{rel('knowmem_retain')} |"
        )
    lines += [
        "",
        "95% percentile bootstrap intervals of the means (×100):",
        "",
        "| method | VerbMem | KnowMem forget | KnowMem retain |",
        "|---|---|---|---|",
    ]
    for _, r in main.iterrows():
        cis = [f"[{_pct(r[f'{c}_ci_low'])}, {_pct(r[f'{c}_ci_high'])}]" for c, _ in COLUMNS]
        lines.append(f"| {r['name']} | " + " | ".join(cis) + " |")
    return lines


def _curve_lines(part, title: str) -> list[str]:
    """report.md's table of a C5 (scalability) or C6 (sustainability) experiment: per request and model (the target
    model left out), the metrics ×100 (MUSE, Sec. 4)."""
    lines = [
        "",
        f"## {title}",
        "",
        "| request | method | VerbMem | KnowMem forget | PrivLeak | KnowMem retain |",
        "|---|---|---|---|---|---|",
    ]
    for _, r in part.iterrows():
        if r["model_kind"] == "target":
            continue
        pl = "–" if r["privleak"] is None or r["privleak"] != r["privleak"] else f"{100 * r['privleak']:.1f}"
        lines.append(
            f"| {r['request']} | {r['name']} | {_pct(r['verbmem_forget'])} | "
            f"{_pct(r['knowmem_forget'])} | {pl} | {_pct(r['knowmem_retain'])} |"
        )
    return lines


def plot_curves(summary, experiment: str, path: Path, order=None) -> Path | None:
    """Utility (KnowMem on retain_eval) and KnowMem on the forget set per request, one line per method (MUSE
    Fig. 6), as PNG and PDF (:func:`dukb.neural.plots.lines_figure`); returns the PNG's path, None when the run has no
    such experiment."""

    part = (
        summary[(summary["experiment"] == experiment) & (summary["model_kind"] != "target")]
        if len(summary)
        else summary
    )
    if not len(part):
        return None
    order_r = list(dict.fromkeys(part["request"]))
    panels = [
        Panel(title=title, ylabel="%", xticks=order_r) for title in ("KnowMem retain (utility) ↑", "KnowMem forget ↓")
    ]
    for name in dict.fromkeys(part["name"]):
        d = part[part["name"] == name].set_index("request").reindex(order_r)
        for p, col in zip(panels, ("knowmem_retain", "knowmem_forget")):
            p.series.append(Series(name, range(len(order_r)), list(100 * d[col].astype(float))))
    return lines_figure(panels, path, order=order, suptitle=f"MUSE {experiment}")[0]


def roc_label(name: str, auc) -> str:
    """The ROC legend entry ``NAME (AUC 0.73)``: an AUC of 0.0 is shown as 0.00, a missing or non-numeric one as
    "AUC –"."""
    try:
        value = float(auc)
    except (TypeError, ValueError):
        value = float("nan")
    return f"{name} (AUC {'–' if value != value else f'{value:.2f}'})"


def plot_roc(rows: list[dict], path: Path, request: str = "main", order=None) -> Path | None:
    """ROC curves of the Min-K% MIA (forget members vs holdout) for f_target, f_retrain and each method's last
    setting (MUSE Fig. 4), as PNG and PDF (:func:`dukb.neural.plots.lines_figure`); returns the PNG's path, None
    without MIA scores."""

    mine = [r for r in rows if r["request"] == request and r.get("mia", {}).get("holdout")]
    if not mine:
        return None
    pick = {}
    for r in mine:
        name = r["model_kind"] if r["model_kind"] != "unlearned" else r["method"]
        pick[name] = r  # the last row of each method (its strongest setting)
    panel = Panel(
        title="Min-K% MIA, forget vs holdout",
        xlabel="false positive rate (holdout)",
        ylabel="true positive rate (forget)",
        diagonal=True,
    )
    for name, r in pick.items():
        pos, neg = np.asarray(r["mia"]["forget"], dtype=float), np.asarray(r["mia"]["holdout"], dtype=float)
        th = np.unique(np.concatenate([pos, neg, [np.inf]]))[::-1]
        panel.series.append(
            Series(
                name,
                [float((neg >= t).mean()) for t in th],
                [float((pos >= t).mean()) for t in th],
                label=roc_label(name, r.get("mia_auc")),
                marker="",
            )
        )
    return lines_figure([panel], path, order=order, panel_size=(3.6, 3.4))[0]


def render_muse(run_dir, *, bootstrap: int = 9999, select: str | None = None) -> dict:
    """Write summary.csv, report.md and the PNGs of a muse run from its results.jsonl and config.json alone.

    Returns:
        {"summary", "report", "scalability", "sustainability", "roc"} -> paths (None for an absent figure; a figure's
        PDF lies beside its PNG), and
        ``unfinished_units``: the (request, method) work units no worker finished
        (:func:`dukb.neural.run.units.unfinished_units`; method "" is a request's reference rows), also named in report.md.

    A results line that holds no row the report can render (not JSON, a field missing or of another type, a NaN)
    is warned on stderr as FILE:LINE, left out and listed in report.md.

    Raises:
        InputError: a file read is not a regular file, too large or not JSON, or every line of results.jsonl is
            damaged (file and line named).
    """
    run = Path(run_dir)
    config = read_run_config(run)

    # damaged lines (a second row of a key too): FILE:LINE on stderr and in report.md
    journal = report_journal(RunDir(run).results, MUSE_ROWS, config=config)
    rows = journal.rows
    select = select or config.get("select", "first_below_retrain")
    summary = summarize_muse(rows, select, bootstrap, seed=int(config.get("seed", 0)))
    summary.to_csv(output_file(run / "summary.csv"), index=False)
    output_file(run / "report.md").write_text(
        markdown_report(summary, config) + unfinished_note(run, "(request, method)") + journal_note(journal),
        encoding="utf-8",
    )

    return {
        "summary": run / "summary.csv",
        "report": run / "report.md",
        "unfinished_units": unfinished_units(run) or [],
        "scalability": plot_curves(summary, "scalability", run / "scalability.png", run_order(config)),
        "sustainability": plot_curves(summary, "sustainability", run / "sustainability.png", run_order(config)),
        "roc": plot_roc(rows, run / "mia_roc.png", order=run_order(config)),
    }


__all__ = [
    "compat_line",
    "markdown_report",
    "plot_curves",
    "plot_roc",
    "render_muse",
    "roc_label",
    "summarize_muse",
    "table_rows",
]
