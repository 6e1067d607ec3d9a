"""Rendering `dukb control` results (pandas, matplotlib; no torch): the calibration and selection from the rows
alone, summary.csv, report.md in the paper's table layout (Tables 2, 3 and 6: PS-exact, PS-perturb and PS-similar,
each on retain-eval and on the forget set), the deep-unlearning recall of each selected model, and two figures
(PS against the control value, and the per-step risk curves of the uncontrolled runs).

Source: Wang et al. 2024 ("Unlearning with Control"), Sec. 5, Tables 2-3 and 6, Fig. 1; Wu et al. 2025, Eq. 1-2.
"""

from __future__ import annotations

import json
from pathlib import Path

from dukb import InputError
from dukb.kb import load_kb
from dukb.neural.calibration import CONTROL_KINDS, calibrate, du_recall
from dukb.neural.metrics.summary import short_number, wrap_prose
from dukb.neural.plots import Panel, Series, lines_figure, run_order
from dukb.neural.protocols.control.config import CONTROL_ROWS
from dukb.neural.run.files import CONFIG_NAME, RunDir, output_file, read_json
from dukb.neural.run.journal import journal_note, report_journal
from dukb.neural.run.units import unfinished_note, unfinished_units

#: the paper's column order: PS-exact retain/unlearn, PS-perturb retain/unlearn, PS-similar retain/unlearn
PS_COLUMNS = (
    "ps_exact_retain",
    "ps_exact_forget",
    "ps_perturb_retain",
    "ps_perturb_forget",
    "ps_similar_retain",
    "ps_similar_forget",
)


def summarize_control(rows: list[dict], kb, sets: dict, splits: dict, selection: str = "full") -> list[dict]:
    """One summary line per ratio × (θ_o, method uncontrolled, method × control selected): the 6-number PS vector,
    the confidences, the selected value, and the DU recall (:func:`dukb.neural.calibration.du_recall`).

    Args:
        rows: result rows; kb: the KB; sets: forget fact -> {"sets", "sets_used"}; splits: splits.json;
        selection: "full" or "cheap".

    Returns:
        list of dicts (ratio, method, control, value, passes, PS columns, confidence_*, du_*).
    """
    out = []
    ratios = list(dict.fromkeys(r["ratio"] for r in rows))
    for rk in ratios:
        mine = [r for r in rows if r["ratio"] == rk]
        orig = next((r for r in mine if r["control"] == "original"), None)
        if orig is None:
            continue
        forget = splits["forget"][rk]

        def line(r, method, control, selected, rk=rk, forget=forget):
            d = {
                "ratio": rk,
                "method": method,
                "control": control,
                "param": r.get("param") if r else None,
                "value": r.get("value") if r else None,
                "selected": selected,
            }
            for k in PS_COLUMNS + (
                "confidence_retain",
                "confidence_forget",
                "accuracy_all_facts",
                "accuracy_all_facts_heldout",
                "success_du",
                "success_du_heldout",
            ):
                d[k] = r.get(k) if r else None
            if r is not None:
                rt = r.get("retain_train_fact_ids") or {"relationships": [], "biographies": []}
                d.update(du_recall(kb, sets, r, forget, rt))
                d.update(du_recall(kb, sets, r, forget, rt, heldout=True))
            return d

        out.append(line(orig, "θ_o (before unlearning)", "original", True))
        for method in dict.fromkeys(r["method"] for r in mine if r.get("method")):
            unc = next((r for r in mine if r.get("method") == method and r["control"] == "none"), None)
            if unc is not None:
                out.append(line(unc, method, "none", True))
            for control in CONTROL_KINDS:
                cand = [r for r in mine if r.get("method") == method and r["control"] == control]
                if not cand:
                    continue
                sel = calibrate(cand, orig, selection)
                out.append(line(sel, method, control, sel is not None))
    return out


def _f(v) -> str:
    return "–" if v is None or v != v else f"{v:.3f}"  # None or NaN: nothing to score


def markdown_report(summary: list[dict], config: dict, splits: dict) -> str:
    """report.md: per ratio, the paper's 6-number PS vector of θ_o, of each method uncontrolled (Table 2) and of
    each method's calibrated model per control (Table 3 / 6), with the selected value and DU recall."""
    lines = [
        "# Unlearning with Control on a KB",
        "",
        f"KB `{config.get('kb')}`, model `{config.get('finetuned') or config.get('model')}`; methods "
        f"{', '.join(config.get('methods', []))}; controls {', '.join(config.get('controls', []))}; "
        f"T = {config.get('steps')} steps; selection `{config.get('selection')}`; seed {config.get('seed')}.",
        "",
        "**What to cite**: per forget ratio, the PS vector of each method's calibrated model per control "
        "(Wang et al. 2024, Tables 3/6) beside the uncontrolled one (Table 2), and its DU recall.",
        "",
        "Calibration (Wang et al. 2024, App. C): a model passes when PS-exact(retain-eval) ≥ 0.9·θ_o, "
        "PS-perturb(retain-eval) ≥ 0.9·θ_o and PS-similar(forget) ≥ 0.5·θ_o; among passing models of a "
        "control's coarse and fine grids the one with the lowest PS-exact(forget) is reported. "
        "`none` is the uncontrolled run (Table 2). DU recall: Wu et al. 2025 Eq. 1, the mean over the forget "
        "facts (each a target) of the share of its best minimal deep unlearning set the model no longer knows; "
        "`derivable`: forget facts still derivable from what the model knows. DU accuracy leaves out the "
        "forget set and retain-train. The held-out columns judge the same models on probe forms no method "
        "trains on or queries (`heldout_forms` of the rows, the `heldout_rule` of config.json): a fact counts as "
        "forgotten when none of them elicits it any more; facts none of them elicited from θ_o count as known "
        "and are left out of the accuracy.",
        "",
    ]
    ev = splits.get("retain_eval", {})
    n_ev = sum(len(v) for v in ev.values())
    for rk in dict.fromkeys(s["ratio"] for s in summary):
        n_f = len(splits["forget"][rk])
        lines += [
            f"## Forget ratio {rk} (|D_u| = {n_f}, |D_t,eval| = {n_ev})",
            "",
            "| method | control | value | PS-exact r | PS-exact u | PS-perturb r | PS-perturb u | PS-similar r "
            "| PS-similar u | conf r | conf u |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        du = [
            "",
            "| method | control | DU recall | derivable | DU accuracy | DU recall (held-out) | "
            "derivable (held-out) | DU accuracy (held-out) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for s in summary:
            if s["ratio"] != rk:
                continue
            if not s["selected"]:
                lines.append(f"| {s['method']} | {s['control']} | none passes |" + " |" * 8)
                du.append(f"| {s['method']} | {s['control']} | none passes |" + " |" * 5)
                continue
            val = "" if s["value"] is None else f"{s['param']}={short_number(s['value'])}"
            der, der_h = s.get("du_targets_derivable"), s.get("du_targets_derivable_heldout")
            lines.append(
                f"| {s['method']} | {s['control']} | {val} | "
                + " | ".join(_f(s[k]) for k in PS_COLUMNS)
                + f" | {_f(s['confidence_retain'])} | "
                f"{_f(s['confidence_forget'])} |"
            )
            du.append(
                f"| {s['method']} | {s['control']} | {_f(s.get('du_recall'))} | "
                f"{'–' if der is None else f'{der}/{n_f}'} | {_f(s.get('du_accuracy'))} | "
                f"{_f(s.get('du_recall_heldout'))} | {'–' if der_h is None else f'{der_h}/{n_f}'} | "
                f"{_f(s.get('du_accuracy_heldout'))} |"
            )
        lines += du + [""]
    lines += [
        "Figures (each also as PDF): `ps_curves.png` (PS-exact on forget and retain-eval against each control's value), "
        "`risk_curves.png` (per-step unlearning risk and retain loss of the uncontrolled runs, Fig. 1).",
        "",
    ]
    return wrap_prose("\n".join(lines))


def plot_ps_curves(rows: list[dict], path: Path, order=None) -> Path | None:
    """PS-exact(forget) (solid) and PS-exact(retain-eval) (dashed) against the control value, one panel per ratio
    and control, one look per method, as PNG and PDF (:func:`dukb.neural.plots.lines_figure`); returns the PNG's
    path, None without rows."""

    ratios = list(dict.fromkeys(r["ratio"] for r in rows))
    controls = [c for c in CONTROL_KINDS if any(r["control"] == c for r in rows)]
    if not ratios or not controls:
        return None
    methods = list(dict.fromkeys(r["method"] for r in rows if r.get("method")))
    panels = []
    for rk in ratios:
        for j, c in enumerate(controls):
            p = Panel(
                title=f"{rk} · {c.upper()}",
                xlabel={"oc": "τ", "es": "T (steps)", "mm": "α"}[c],
                ylabel="PS-exact" if j == 0 else "",
                ylim=(-0.05, 1.05),
            )
            for m in methods:
                pts = sorted(
                    (
                        (float(r["value"]), r)
                        for r in rows
                        if r["ratio"] == rk and r.get("method") == m and r["control"] == c
                    ),
                    key=lambda x: x[0],
                )
                if not pts:
                    continue
                xs = [x for x, _ in pts]
                p.series.append(Series(m, xs, [r.get("ps_exact_forget") for _, r in pts], linestyle="-"))
                p.series.append(Series(m, xs, [r.get("ps_exact_retain") for _, r in pts], label=None, linestyle="--"))
            panels.append(p)
    return lines_figure(
        panels, path, ncols=len(controls), order=order, extra_legend=(("forget", "-"), ("retain-eval", "--"))
    )[0]


def plot_risk_curves(rows: list[dict], path: Path, order=None) -> Path | None:
    """The per-step unlearning risk L_u (solid) and retain loss (dashed) of each method's uncontrolled run, one
    panel per ratio (Wang et al. 2024, Fig. 1), as PNG and PDF (:func:`dukb.neural.plots.lines_figure`); returns
    the PNG's path, None without uncontrolled runs."""

    unc = [r for r in rows if r["control"] == "none" and r.get("risk_curve")]
    if not unc:
        return None
    panels = []
    for rk in dict.fromkeys(r["ratio"] for r in unc):
        p = Panel(
            title=f"{rk}: uncontrolled runs",
            xlabel="step",
            ylabel="nats/token",
            yscale="symlog",
            yscale_kw={"linthresh": 0.1},
        )
        for r in (x for x in unc if x["ratio"] == rk):
            curve = r["risk_curve"]
            risk = curve.get("unlearning_risk") or []
            p.series.append(Series(r["method"], range(1, len(risk) + 1), risk, linestyle="-", marker=""))
            if curve.get("loss_retain"):
                p.series.append(
                    Series(
                        r["method"],
                        range(1, len(curve["loss_retain"]) + 1),
                        curve["loss_retain"],
                        label=None,
                        linestyle="--",
                        marker="",
                    )
                )
        panels.append(p)
    return lines_figure(
        panels, path, order=order, extra_legend=(("L_u (unlearning risk)", "-"), ("retain loss", "--"))
    )[0]


def render_control(run_dir, *, selection: str | None = None) -> dict:
    """Write summary.csv, report.md, ps_curves.png and risk_curves.png (each with its PDF) of a `dukb control` run
    from its files (config.json, splits.json, sets.json, results.jsonl).

    Returns:
        {"report", "summary", "ps_curves", "risk_curves"} paths (a figure is None when there is nothing to plot; its
        PDF lies beside its PNG),
        and ``unfinished_units``: the (ratio, method) work units no worker finished
        (:func:`dukb.neural.run.units.unfinished_units`; "" is θ_o's unit), also named in report.md.

    A results line that holds no row the report can render (not JSON, a field missing or of another type, a NaN,
    a ratio splits.json does not hold) is warned on stderr as FILE:LINE, left out and listed in report.md.

    Raises:
        InputError: the directory holds no control run; a file read is missing, not a regular file (a FIFO, a
            device, a folder), too large or not JSON (named); every line of results.jsonl is damaged (file and line
            named).
    """
    import pandas as pd

    run = Path(run_dir)
    # read bounded: a FIFO, a device or a folder in a file's place is an error naming it
    config = read_json(RunDir(run).config, "run config (config.json)")
    splits = read_json(run / "splits.json", "splits file (splits.json)")
    sets_doc = read_json(run / "sets.json", "sets file (sets.json)")
    for name, doc in ((CONFIG_NAME, config), ("splits.json", splits), ("sets.json", sets_doc)):
        if not isinstance(doc, dict):
            raise InputError("not a `dukb control` run file (expected a JSON object)", run / name)
    if config.get("protocol") != "control":
        raise InputError(f"{run}: not a `dukb control` run (protocol {config.get('protocol')!r})")
    forget = splits.get("forget") if isinstance(splits.get("forget"), dict) else {}

    # damaged lines (a second row of a key, rows of a ratio splits.json does not hold): FILE:LINE on stderr and in
    # report.md
    journal = report_journal(
        RunDir(run).results,
        CONTROL_ROWS,
        config=config,
        drop=lambda r: (
            None
            if isinstance(forget.get(r["ratio"]), list)
            else f"field ratio: {json.dumps(r['ratio'])} is not a ratio of splits.json"
        ),
    )
    rows = journal.rows
    kb = load_kb(config["kb"])
    sets = {int(k): v for k, v in sets_doc["targets"].items()}
    summary = summarize_control(rows, kb, sets, splits, selection or config.get("selection", "full"))
    pd.DataFrame(summary).to_csv(output_file(run / "summary.csv"), index=False)
    output_file(run / "report.md").write_text(
        markdown_report(summary, config, splits)
        + unfinished_note(run, "(ratio, method)", "θ_o")
        + journal_note(journal),
        encoding="utf-8",
    )

    return {
        "report": run / "report.md",
        "summary": run / "summary.csv",
        "unfinished_units": unfinished_units(run) or [],
        "ps_curves": plot_ps_curves(rows, run / "ps_curves.png", order=run_order(config)),
        "risk_curves": plot_risk_curves(rows, run / "risk_curves.png", order=run_order(config)),
    }


__all__ = ["PS_COLUMNS", "markdown_report", "plot_ps_curves", "plot_risk_curves", "render_control", "summarize_control"]
