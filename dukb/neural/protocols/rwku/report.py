"""Rendering `dukb rwku` results (pandas, matplotlib; no torch): summary.csv, report.md in RWKU's Table 1 layout,
aa_kinds.png (leak per adversarial kind) and batch_targets.png (forget and neighbour ROUGE against the number of
targets unlearned at once), each also as PDF.

Values are ×100 ROUGE-L recall (RWKU's convention); FM and RM are the mean log-likelihood per answer token ×100
(RWKU reports LOSS; here the sign is that of the likelihood, so FM falling below RM means the forget facts look
like non-members); AUC FM/RM is the LOSS score's AUC with FM positive.

Source: Jin et al. 2024 (RWKU), Table 1 layout; Wu et al. 2025 (recall).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dukb.kb.schema_probes import unscorable_summary
from dukb.neural.declare import compat_note
from dukb.neural.metrics.summary import config_lines, setting_label, versions_line, wrap_prose
from dukb.neural.plots import Panel, Series, bars_figure, lines_figure, run_order
from dukb.neural.protocols.rwku.config import RWKU_ROWS, RwkuConfig, rwku_row_key
from dukb.neural.run.files import RunDir, output_file, read_run_config
from dukb.neural.run.journal import journal_note, report_journal

COLS = (
    "rouge_forget_fb",
    "rouge_forget_qa",
    "rouge_forget_aa",
    "rouge_forget_all",
    "rouge_neighbour_fb",
    "rouge_neighbour_qa",
    "rouge_neighbour_all",
    "rouge_distant_all",
    "mia_fm_loss",
    "mia_rm_loss",
    "mia_auc_loss",
    "recall",
    "recall_under_attack",
    "accuracy_all",
)


def _flat(r: dict) -> dict:
    out = {c: r.get(c) for c in COLS if c in r}
    out["mia_fm_loss"] = (r.get("mia_fm") or {}).get("loss")
    out["mia_rm_loss"] = (r.get("mia_rm") or {}).get("loss")
    out["mia_auc_loss"] = (r.get("mia_auc_fm_rm") or {}).get("loss")
    return out


def summarize_rwku(rows: list[dict]):
    """summary.csv: per request kind ("single": mean over single-target requests; "batch-N": that request), method
    and setting, the mean of every column of :data:`COLS`.

    Returns:
        pandas DataFrame (group, method, setting, n_requests, the columns).
    """
    import pandas as pd

    recs = []
    for r in rows:
        group = "single" if r["request_kind"] == "single" else r["request"]
        setting = "" if not r.get("param") else setting_label(r["setting"], r["param"])
        recs.append(
            {
                "group": group,
                "method": r.get("method") or "before",
                "setting": setting,
                "request": r["request"],
                **_flat(r),
            }
        )
    if not recs:
        return pd.DataFrame(columns=["group", "method", "setting", "n_requests", *COLS])
    df = pd.DataFrame(recs)
    order = {m: i for i, m in enumerate(dict.fromkeys(df["method"]))}
    agg = df.groupby(["group", "method", "setting"], sort=False)
    out = agg[[c for c in COLS if c in df]].mean(numeric_only=True).reset_index()
    out["n_requests"] = agg["request"].nunique().values
    out["_o"] = out["method"].map(order)
    out["_g"] = out["group"].map(lambda g: -1 if g == "single" else int(g.split("-")[1]))
    return out.sort_values(["_g", "_o"], kind="stable").drop(columns=["_o", "_g"]).reset_index(drop=True)


def _v(x, scale: float = 100.0) -> str:
    return "–" if x is None or x != x else f"{scale * x:.1f}"


def _training_note(config: dict) -> str:
    """One line on what unlearning trained on and what the neighbours are, from the run identity."""
    ident = config.get("identity")
    rw = ident.get("rwku") if isinstance(ident, dict) else None
    tr = rw.get("training") if isinstance(rw, dict) else None
    if not isinstance(tr, dict):
        return (
            "Unlearning trained on the forget facts' QA pairs, which F-QA and FM score, and neighbours may lie "
            "in a target's cone (a run before training version 2)."
        )
    return (
        "Unlearning trains on a synthetic description corpus of the forget facts (RWKU's C_f^s; GDR/KLR: "
        "descriptions of distant facts, then scored in no group); every FB/QA/AA probe and MIA member is "
        "evaluation-only. Neighbours exclude the targets' cones. Rows record `trained_forms`, "
        "`trained_fact_ids`, `scored_forms` and `neighbours_dropped`."
    )


def compat_line(config: dict) -> str:
    """The components of the run whose value differs from RWKU's released code's, or that none does
    (:func:`dukb.neural.declare.compat_note` over :data:`dukb.neural.protocols.rwku.config.RWKU_COMPAT`)."""

    return "**Against RWKU's code**: " + compat_note(config, RwkuConfig, "rwku", "RWKU")


def _aa_kind_lines(rows: list[dict]) -> list[str]:
    """report.md's table of forget ROUGE-L per adversarial kind over the single-target rows (none without kinds)."""
    single = [r for r in rows if r["request_kind"] == "single"]
    kinds = list(dict.fromkeys(k for r in single for k in (r.get("rouge_forget_aa_by_kind") or {})))
    lines: list[str] = []
    if kinds:
        lines += [
            "## Forget ROUGE-L per adversarial kind (single targets, mean over targets)",
            "",
            "| method | setting | QA | " + " | ".join(kinds) + " |",
            "|" + "---|" * (3 + len(kinds)),
        ]
        groups: dict = {}
        for r in single:
            s = "" if not r.get("param") else setting_label(r["setting"], r["param"])
            groups.setdefault((r.get("method") or "before", s), []).append(r)
        for (m, s), rs in groups.items():
            cells = []
            for k in ["qa"] + kinds:
                vals = [
                    r["rouge_forget_qa"] if k == "qa" else (r.get("rouge_forget_aa_by_kind") or {}).get(k) for r in rs
                ]
                vals = [v for v in vals if v is not None]
                cells.append(_v(sum(vals) / len(vals)) if vals else "–")
            lines.append(f"| {m.upper()} | {s or '–'} | " + " | ".join(cells) + " |")

    return lines


def markdown_report(summary, rows: list[dict], config: dict) -> str:
    """report.md: Table 1 layout for single targets and for each batch request, AA leaks per kind, the run."""
    members = "description sentence" if config.get("mia_members") == "descriptions" else "answer"
    rouge = "`rouge` package (RWKU's code)" if config.get("rouge") == "rouge" else "rouge-score, stemmed"
    lines = [
        "# dukb rwku report",
        "",
        f"KB: `{config.get('kb')}` · model: `{config.get('model')}` · forget scope "
        f"`{config.get('forget_scope')}` · seed {config.get('seed')}",
        "",
        f"ROUGE-L recall ×100 ({rouge}; forget ↓, neighbour ↑) of the answer line of at most "
        f"{config.get('max_new_tokens') or 10} tokens; FM/RM: mean {members} log-likelihood ×100 (FM below RM "
        "= forget facts look like non-members); AUC: LOSS score, FM against RM; recall and recall under attack "
        "(Wu et al. 2025, Eq. 1) ×100. Each number is the mean over the n requests (RWKU, Table 1); – where "
        "nothing was scored.",
        "",
        compat_line(config),
        "",
        _training_note(config),
        "",
        "**What to cite**: the single-target table (RWKU, Table 1: the mean over the n targets per method and "
        "setting) and the batch tables for batch-target unlearning.",
        "",
    ]
    head = (
        "| method | setting | n | F-FB | F-QA | F-AA | F-All | N-FB | N-QA | N-All | distant | FM | RM | AUC FM/RM | "
        "recall | recall under attack |"
    )
    sep = "|" + "---|" * 16
    for group in dict.fromkeys(summary["group"]):
        part = summary[summary["group"] == group]
        title = "Single-target (mean over targets)" if group == "single" else f"Batch-target: {group}"
        lines += [f"## {title}", "", head, sep]
        for _, r in part.iterrows():
            lines.append(
                f"| {r['method'].upper()} | {r['setting'] or '–'} | {int(r['n_requests'])} | "
                + " | ".join(_v(r.get(c)) for c in COLS[:-1])
                + " |"
            )
        lines.append("")
    lines += _aa_kind_lines(rows)
    lines += [
        "",
        "## Run",
        "",
        *config_lines(
            config,
            (
                "kb",
                "model",
                "finetuned",
                "n_targets",
                "targets",
                "methods",
                "batch_sizes",
                "forget_scope",
                "seed",
                "mia_k",
                "compat",
                "rouge",
                "max_new_tokens",
                "npo_beta",
                "mia_members",
            ),
        ),
        *[v for v in [versions_line(config)] if v],
        "- everything else: config.json",
        "",
    ]
    return wrap_prose("\n".join(lines))


def plot_aa(rows: list[dict], path: Path, order=None) -> Path | None:
    """Bars of the forget ROUGE-L per probe kind for the unlearned model at each method's strongest setting,
    beside the model before unlearning (single targets), as PNG and PDF (:func:`dukb.neural.plots.bars_figure`);
    returns the PNG's path, None without single-target rows."""

    single = [r for r in rows if r["request_kind"] == "single"]
    if not single:
        return None
    strongest: dict = {}
    for r in single:
        m = r.get("method") or "before"
        v = float(r["setting"][r["param"]]) if r.get("param") else 0.0
        strongest.setdefault(m, {})
        strongest[m][r["request"]] = max(strongest[m].get(r["request"], (v, r)), (v, r), key=lambda x: x[0])
    kinds = ["qa", "cloze"] + list(dict.fromkeys(k for r in single for k in (r.get("rouge_forget_aa_by_kind") or {})))
    series = {}
    for m, per in strongest.items():
        vals = []
        for k in kinds:
            xs = [
                (
                    r["rouge_forget_qa"]
                    if k == "qa"
                    else r["rouge_forget_fb"]
                    if k == "cloze"
                    else (r.get("rouge_forget_aa_by_kind") or {}).get(k)
                )
                for _v_, r in per.values()
            ]
            xs = [x for x in xs if x is not None]
            vals.append(100 * sum(xs) / len(xs) if xs else np.nan)
        series[m if m == "before" else m.upper()] = vals
    return bars_figure(
        kinds,
        series,
        path,
        ylabel="forget ROUGE-L recall ×100",
        order=order,
        title="Leak per probe kind (strongest setting)",
    )[0]


def plot_batches(rows: list[dict], path: Path, order=None) -> Path | None:
    """Forget All and neighbour All ROUGE against the number of targets (1 = mean of single targets), each method
    at its strongest setting (RWKU's batch-target figure), as PNG and PDF (:func:`dukb.neural.plots.lines_figure`);
    returns the PNG's path, None without batch rows."""

    batch = [r for r in rows if r["request_kind"] == "batch" and r.get("method")]
    if not batch:
        return None
    single = [r for r in rows if r["request_kind"] == "single" and r.get("method")]
    panels = [
        Panel(title="forget All ↓", xlabel="targets unlearned at once", ylabel="ROUGE-L recall ×100"),
        Panel(title="neighbour All ↑", xlabel="targets unlearned at once"),
    ]
    for m in dict.fromkeys(r["method"] for r in batch):
        pts = []
        sized = sorted(((len(r["targets"]), [r]) for r in batch if r["method"] == m), key=lambda x: x[0])
        for n, rs in [(1, single)] + sized:
            rs = [r for r in rs if r["method"] == m]
            if not rs:
                continue
            top = max(float(r["setting"][r["param"]]) for r in rs)
            sel = [r for r in rs if float(r["setting"][r["param"]]) == top]
            pts.append(
                (
                    n,
                    sum(r["rouge_forget_all"] for r in sel) / len(sel),
                    sum((r["rouge_neighbour_all"] or 0) for r in sel) / len(sel),
                )
            )
        pts = sorted(dict((p[0], p) for p in pts).values())
        panels[0].series.append(Series(m, [p[0] for p in pts], [100 * p[1] for p in pts]))
        panels[1].series.append(Series(m, [p[0] for p in pts], [100 * p[2] for p in pts]))
    return lines_figure(panels, path, order=order)[0]


def missing_rwku_units(identity: dict, rows: list[dict]) -> list[tuple]:
    """The (request, method, value) rows of an rwku run's identity that are not written yet: each request's
    "before" row (method "", value None) and one row per grid value of every method.

    Args:
        identity: config.json's ``identity`` (targets, methods with their grids, rwku.batch_sizes).
        rows: the run's rows.

    Returns:
        list of (request, method label, value or None), in the identity's order.
    """

    done = {rwku_row_key(r) for r in rows}
    names = [f"target-{t}" for t in identity.get("targets") or []]
    names += [f"batch-{n}" for n in (identity.get("rwku") or {}).get("batch_sizes") or []]
    out = []
    for name in names:
        want = [(name, "", None)] + [
            (name, label, float(v))
            for label, entry in (identity.get("methods") or {}).items()
            for v in entry.get("grid") or []
        ]
        out += [k for k in want if k not in done]
    return out


def unscorable_note(config: dict) -> str:
    """report.md's paragraph on the probe kinds some facts have no probe of (a KB with another schema whose
    relations lack a kind's template; config.json's ``unscorable_probes``): one line per such kind with its counts,
    "" when there is none. Source: Jin et al. 2024 (RWKU), Sec. 3.3 (the probe kinds)."""
    report = config.get("unscorable_probes")
    lines = unscorable_summary(report) if isinstance(report, dict) else []
    if not lines:
        return ""
    return (
        "\n\n**Unscorable probes.** Facts whose relation has no template of a kind have no probe of it; the "
        "kind's scores are over the others (rows: `unscorable_forget_by_kind`):\n\n"
        + "".join(f"- {x}\n" for x in lines)
    )


def render_rwku(run_dir) -> dict:
    """Write summary.csv, report.md, aa_kinds.png and batch_targets.png (each with its PDF) from results.jsonl and
    config.json alone.

    Returns:
        {"summary", "report", "aa", "batches"} -> paths (None for an absent figure; a figure's PDF lies beside its
        PNG), and ``missing_units``: the
        (request, method, value) rows of the run's identity not written yet (:func:`missing_rwku_units`), also
        named in report.md.

    A results line that holds no row the report can render (not JSON, a field missing or of another type, a NaN)
    is warned on stderr as FILE:LINE, left out and listed in report.md.

    Raises:
        InputError: a file read is not a regular file, too large or not JSON, or every line of results.jsonl is
            damaged (file and line named).
    """
    run = Path(run_dir)
    config = read_run_config(run)

    # damaged lines (a second row of a key too): FILE:LINE on stderr and in report.md
    journal = report_journal(RunDir(run).results, RWKU_ROWS, config=config)
    rows = journal.rows
    summary = summarize_rwku(rows)
    summary.to_csv(output_file(run / "summary.csv"), index=False)
    missing = missing_rwku_units(config["identity"], rows) if isinstance(config.get("identity"), dict) else []
    note = ""
    if missing:
        shown = ", ".join(f"({n}, {m or 'before'}{'' if v is None else f', {v:g}'})" for n, m, v in missing[:8])
        note = (
            f"\n\n**Incomplete run.** {len(missing)} (request, method, setting) rows of the run are not written "
            f"yet: {shown}{', ...' if len(missing) > 8 else ''}; the figures cover the rows present (resume the "
            "run to add them).\n"
        )
    note += unscorable_note(config)
    output_file(run / "report.md").write_text(
        markdown_report(summary, rows, config) + note + journal_note(journal), encoding="utf-8"
    )

    return {
        "summary": run / "summary.csv",
        "report": run / "report.md",
        "aa": plot_aa(rows, run / "aa_kinds.png", order=run_order(config)),
        "batches": plot_batches(rows, run / "batch_targets.png", order=run_order(config)),
        "missing_units": missing,
    }


__all__ = [
    "COLS",
    "compat_line",
    "markdown_report",
    "missing_rwku_units",
    "plot_aa",
    "plot_batches",
    "render_rwku",
    "summarize_rwku",
]
