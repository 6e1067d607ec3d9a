"""Rendering evaluate results into the paper's tables and figures (pandas, matplotlib; no torch): report.md (one
page: the paper's Table 1/2 numbers, what to cite), appendix.md (every other reading, labelled as not comparable to
the paper), summary.csv (every reading, one labelled row each), facts.csv (per-fact ids) and accuracy_recall.png. The
numbers themselves are the summary metrics of :mod:`dukb.neural.metrics.summary` (trade-off, Success-DU,
Acc@Superficial), computed for the metrics a run asked for.
"""

from __future__ import annotations

import os
from pathlib import Path

from dukb import InputError
from dukb.kb.schema_probes import unscorable_summary
from dukb.neural.attacks.report import attacks_section, plot_attacks
from dukb.neural.known import known_line, known_of_record
from dukb.neural.metrics import DEFAULT_METRICS, parse_metrics, summary_metrics
from dukb.neural.metrics.summary import (
    ACCURACY,
    ANY_SETTING,
    COUNT,
    ENVELOPE,
    OBSERVED,
    PAPER,
    PAPER_HELDOUT,
    REGION,
    WEAKEST,
    curve_points,
    fixed_label,
    heldout_points,
    mean_std,
    num,
    short_number,
    wrap_prose,
)
from dukb.neural.metrics.summary import missing as absent
from dukb.neural.plots import figure_markdown, run_order, tradeoff_figure
from dukb.neural.protocols.evaluate.rows import EVALUATE_ROWS, missing_units
from dukb.neural.run.files import RunDir, output_file, read_json
from dukb.neural.run.journal import journal_note, report_journal
from dukb.neural.utility import UTILITY_FILE, utility_section


def run_rows_in_order(rows: list[dict], config: dict) -> list[dict]:
    """A run's rows in the order one worker writes them: by the run's targets (config.json's ``targets``), then its
    methods (:func:`dukb.neural.plots.run_order`), each unit's settings as written; rows of a target or method the
    config does not list come after, in file order. Workers that shared the run wrote its units in any order; the
    report, summary.csv and the curves read this order, so they do not depend on which worker wrote first (the means
    over targets are summed in one order).

    Args:
        rows: the result rows (dicts with ``target`` and ``method``); config: the run's config.json (dict).

    Returns:
        A new list of the same rows.
    """
    targets = {t: i for i, t in enumerate(config.get("targets") or [])} if isinstance(config, dict) else {}
    methods = {m: i for i, m in enumerate(run_order(config))}
    far = len(targets) + len(methods) + 1

    def key(item: tuple[int, dict]) -> tuple:
        i, r = item
        return targets.get(r.get("target"), far), methods.get(r.get("method"), far), i

    return [r for _, r in sorted(enumerate(rows), key=key)]


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
        recall_at_acc, ar_auc, n, n_skipped_targets, observed_*, success_du*; Acc@Superficial: acc_at_superficial,
        share_superficial); :func:`summary_table` turns it into summary.csv's labelled rows.
    """
    import pandas as pd

    metrics = summary_metrics() if metrics is None else metrics
    groups = [("all", df)]
    if by_relation:
        rel = df["target"].map(by_relation)
        groups += [(r, df[rel == r]) for r in sorted(set(rel.dropna()))]
    rows = []
    for name, d in groups:
        per = [m.fn(d, accuracy) for m in metrics]
        for method in d["method"].unique():  # the rows come in the run's order (run_rows_in_order)
            row = {"group": name, "method": method, "n_targets": int(d[d["method"] == method]["target"].nunique())}
            for values in per:
                row.update(values.get(method, {}))
            rows.append(row)
    return pd.DataFrame(rows)


#: summary.csv's rows per (group, method): (metric, reading, value field, std field, n field, setting field)
SUMMARY_ROWS = (
    ("acc_at_recall", PAPER, "acc_at_recall", "acc_at_recall_std", "n", None),
    ("recall_at_acc", PAPER, "recall_at_acc", "recall_at_acc_std", "n", None),
    ("ar_auc", PAPER, "ar_auc", "ar_auc_std", "n", None),
    ("success_du", PAPER, "success_du", "success_du_std", "success_du_n", "success_du_setting"),
    ("acc_at_superficial", PAPER, "acc_at_superficial", "acc_at_superficial_std", "acc_at_superficial_n", None),
    ("acc_at_recall", PAPER_HELDOUT, "acc_at_recall_heldout", "acc_at_recall_heldout_std", "n_heldout", None),
    ("recall_at_acc", PAPER_HELDOUT, "recall_at_acc_heldout", "recall_at_acc_heldout_std", "n_heldout", None),
    ("ar_auc", PAPER_HELDOUT, "ar_auc_heldout", "ar_auc_heldout_std", "n_heldout", None),
    (
        "success_du",
        PAPER_HELDOUT,
        "success_du_heldout",
        "success_du_heldout_std",
        "success_du_heldout_n",
        "success_du_heldout_setting",
    ),
    ("acc_at_recall", ENVELOPE, "acc_at_recall_envelope", None, None, None),
    ("recall_at_acc", ENVELOPE, "recall_at_acc_envelope", None, None, None),
    ("ar_auc", ENVELOPE, "ar_auc_envelope", None, None, None),
    ("acc_at_recall", OBSERVED, "observed_acc_at_recall", None, None, None),
    ("recall_at_acc", OBSERVED, "observed_recall_at_acc", None, None, None),
    ("success_du", ANY_SETTING, "success_du_any", None, None, None),
    ("acc_at_superficial", WEAKEST, "acc_at_superficial_weakest", None, None, None),
    ("share_targets_forgotten", ANY_SETTING, "share_superficial", None, None, None),
    ("region_setting", REGION, None, None, None, "region_setting_heldout"),
    ("settings", COUNT, "n_settings", None, None, None),
    ("targets", COUNT, "n_targets", None, None, None),  # every method present has a row, whatever --metrics names
)
#: summary.csv's columns
SUMMARY_COLUMNS = (
    "group",
    "method",
    "metric",
    "reading",
    "value",
    "std",
    "n",
    "targets",
    "targets_skipped",
    "rows_skipped",
    "setting",
)


def summary_table(summary):
    """summary.csv: one labelled row per (group, method, metric, reading), the paper's rule first; every other
    reading says in its ``reading`` that it is not comparable to the paper.

    Args:
        summary: :func:`summarize`'s DataFrame.

    Returns:
        DataFrame with :data:`SUMMARY_COLUMNS`: value (float or empty), std (population std over targets, empty when
        n < 2), n (targets the number is over), targets (the method's targets), targets_skipped and rows_skipped
        (left out: accuracy with nothing to score), setting (labels: the best settings chosen, ``steps=4 ×6``).
    """
    import pandas as pd

    out = []
    for r in summary.to_dict("records"):
        held = r.get("n_heldout")
        for metric, reading, value, std, n, setting in SUMMARY_ROWS:
            if (value is None or value not in r) and (setting is None or setting not in r):
                continue
            nn = r.get(n) if n else None
            skipped = (
                (r.get("n_skipped_targets_heldout"), r.get("n_skipped_rows_heldout"))
                if reading == PAPER_HELDOUT
                else (r.get("n_skipped_targets"), r.get("n_skipped_rows"))
            )
            if reading == PAPER_HELDOUT and absent(held):
                continue
            out.append(
                {
                    "group": r["group"],
                    "method": r["method"],
                    "metric": metric,
                    "reading": reading,
                    "value": None if value is None or absent(r.get(value)) else r.get(value),
                    "std": None if std is None or absent(r.get(std)) or (nn is not None and nn < 2) else r.get(std),
                    "n": None if absent(nn) else int(nn),
                    "targets": r.get("n_targets"),
                    "targets_skipped": None if absent(skipped[0]) else int(skipped[0]),
                    "rows_skipped": None if absent(skipped[1]) else int(skipped[1]),
                    "setting": r.get(setting) if setting else None,
                }
            )
    table = pd.DataFrame(out, columns=list(SUMMARY_COLUMNS))
    for c in ("n", "targets", "targets_skipped", "rows_skipped"):
        table[c] = table[c].astype("Int64")  # counts stay integers beside an empty cell
    return table


def _n_cell(r: dict, suffix: str = "") -> str:
    n, skipped = r.get("n" + suffix), r.get("n_skipped_targets" + suffix)
    if absent(n):
        return "–"
    return f"{int(n)}" + (f" ({int(skipped)} skipped)" if not absent(skipped) and skipped else "")


def _chosen(text) -> str:
    """At most three of the chosen settings, the rest counted with their targets (``alpha=0.5 ×3, alpha=5 ×3,
    alpha=100 ×3, 1 other setting ×2``)."""
    if not isinstance(text, str):
        return "–"
    parts = text.split(", ")
    rest = sum(int(p.rsplit("×", 1)[1]) for p in parts[3:] if p.rsplit("×", 1)[-1].isdigit())
    return ", ".join(parts[:3]) + (
        f", {len(parts) - 3} other setting{'s' if len(parts) > 4 else ''} ×{rest}" if len(parts) > 3 else ""
    )


def _table1(recs: list[dict], suffix: str = "") -> list[str]:
    """Table 1's rows, methods as rows: n, the three trade-off numbers, Success-DU and the best settings."""
    sd = "success_du" + suffix
    lines = [
        "| method | n | Acc@Recall≥0.8 ↑ | Recall@Acc≥0.8 ↑ | AR-AUC ↑ | Success-DU ↑ | best setting (targets) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in recs:
        n = r.get("n" + suffix)
        cells = [
            mean_std(r.get(f"{k}{suffix}"), r.get(f"{k}{suffix}_std"), n)
            for k in ("acc_at_recall", "recall_at_acc", "ar_auc")
        ]
        cells.append(mean_std(r.get(sd), r.get(sd + "_std"), r.get(sd + "_n")))
        lines.append(
            f"| {r['method'].upper()} | {_n_cell(r, suffix)} | "
            + " | ".join(cells)
            + f" | {_chosen(r.get(sd + '_setting'))} |"
        )
    return lines


def _forms(df) -> dict:
    """method -> (forms it saw, held-out forms), as comma-separated text."""
    out = {}
    for m, g in df.groupby("method", sort=False):
        seen, held = (g.iloc[0].get(k) for k in ("probe_forms_seen", "heldout_forms"))
        out[m] = (
            ", ".join(seen) if isinstance(seen, list) and seen else "–",
            ", ".join(held) if isinstance(held, list) else "–",
        )
    return out


def _heldout_section(df, recs: list[dict], config: dict) -> list[str]:
    """report.md's held-out table: Table 1 judged on the probe forms the methods never trained on or queried
    (:mod:`dukb.neural.metrics.heldout`); [] when the rows have none."""
    if not any(not absent(r.get("n_heldout")) for r in recs):
        return []
    forms = _forms(df)
    lines = ["## Table 1 on held-out probe forms", ""]
    if len(set(forms.values())) == 1:
        seen, held = next(iter(forms.values()))
        lines += [
            f"Every method saw `{seen}`; judged only on forms it never trained on or queried: {held}. "
            f"A fact is known when a held-out form elicits it (rule `{config.get('heldout_rule', 'pairs')}`).",
            "",
        ]
    else:
        lines += [
            "Each method judged only on forms it never trained on or queried (forms per method: appendix.md; "
            f"rule `{config.get('heldout_rule', 'pairs')}`).",
            "",
        ]
    before = config.get("heldout_known_before")
    if isinstance(before, dict) and not absent(before.get("all")):
        lines += [
            f"Before unlearning the held-out forms elicit {before['all']:.4f} of the KB's facts; the others are "
            "unscorable (never counted as forgotten, left out of accuracy; ids in facts.csv).",
            "",
        ]
    return lines + _unscorable_lines(config) + _table1(recs, "_heldout") + [""]


def _unscorable_lines(config: dict) -> list[str]:
    """The facts of a schema KB with no probe of a held-out form, per form (config.json's ``unscorable_probes``)."""
    gaps = [f"- {x}" for x in unscorable_summary(config.get("unscorable_probes") or {})]
    return ["Facts with no probe of a held-out form (unscorable on it):", "", *gaps, ""] if gaps else []


def _short_finetuning(finetune: dict | None) -> list[str]:
    """One warning line when the finetuning before unlearning ended below its target accuracy (finetune.json's
    ``reached_target`` false): recall then counts facts the model never knew as forgotten (Wu et al. 2025, Sec. 4
    finetunes to 100% of the KB first)."""
    if not isinstance(finetune, dict) or finetune.get("reached_target") is not False:
        return []
    acc, goal = finetune.get("accuracy"), finetune.get("target_accuracy")
    return [
        f"- **The finetuned model does not know the whole KB**: its finetuning ended at accuracy {num(acc, 4)}, "
        f"below the target {num(goal, 4)}; recall counts facts it never knew as forgotten (finetune longer, or "
        "pass a model that knows the KB with --finetuned)."
    ]


def _nothing_scored(df) -> list[str]:
    """One warning line per method with rows whose accuracy had nothing left to score (null)."""
    import pandas as pd

    out = []
    for m, g in df.groupby("method", sort=False):
        parts = []
        for col, what in (("accuracy_all", ""), ("accuracy_all_heldout", "held-out ")):
            if col not in g or (col == "accuracy_all_heldout" and "recall_heldout" not in g):
                continue
            rows = g[g["recall_heldout"].notna()] if col == "accuracy_all_heldout" else g
            bad = rows[pd.to_numeric(rows[col], errors="coerce").isna()]
            if len(bad):
                parts.append(
                    f"{len(bad)} of {len(rows)} {what}rows"
                    + ("" if what else f" ({bad['target'].nunique()} of {rows['target'].nunique()} targets)")
                )
        if parts:
            retain = g.iloc[0].get("retain_fact_ids")
            has_retain = isinstance(retain, dict) and any(retain.get(k) for k in ("relationships", "biographies"))
            cause = "its retain set leaves no fact for accuracy" if has_retain else "no fact is left for accuracy"
            out.append(
                f"- **{m.upper()}: nothing to score.** {cause[0].upper() + cause[1:]} in {', '.join(parts)}: "
                "accuracy null (n_scored 0), not 1.0; skipped."
            )
    return out


def _run_lines(df, config: dict, finetune: dict | None) -> list[str]:
    """The run in a few lines: methods with their settings as labels, metrics, device and versions."""
    lines = ["## Run", ""]
    scopes = config.get("scopes") if isinstance(config.get("scopes"), dict) else {}
    for m, g in df.groupby("method", sort=False):
        first = g.iloc[0]
        param = first.get("param")
        values = sorted({float(s[param]) for s in g["setting"] if isinstance(s, dict) and param in s})
        fixed = fixed_label(first["setting"], param) if isinstance(first.get("setting"), dict) else "–"
        scope = scopes.get(m) or first.get("scope")
        lines.append(
            f"- {m.upper()}: {param}={', '.join(short_number(v) for v in values)}"
            + (f" · fixed: {fixed}" if fixed != "–" else "")
            + (f" · forget scope: {scope}" if scope else "")
        )
    if finetune:
        lines.append(
            f"- finetuned model: accuracy {finetune.get('accuracy', float('nan')):.4f} before unlearning "
            f"({finetune.get('epochs_run')} epochs, {finetune.get('seconds', 0):.1f} s)"
        )
    known = known_of_record(config.get("known_before"))
    if known is not None:  # --no-finetune: the model as given, scored on what it knew
        lines.append(f"- not finetuned (--no-finetune): {known_line(known)}")
    metrics = config.get("metrics")
    lines.append(
        "- metrics: "
        + (", ".join(metrics) if isinstance(metrics, list) else "default")
        + ("" if known is not None else " · finetune forms: " + ", ".join(config.get("finetune_forms") or ["qa"]))
    )
    dev = config.get("device_used") if isinstance(config.get("device_used"), dict) else {}
    ver = (
        config.get("versions")
        if isinstance(config.get("versions"), dict)
        else (config.get("provenance") or {}).get("versions")
        if isinstance(config.get("provenance"), dict)
        else {}
    )
    ver = ver if isinstance(ver, dict) else {}
    rev = str(ver.get("dukb_revision") or "")[:12]
    shown = " · ".join(f"{k} {ver[k]}" for k in ("python", "torch", "transformers") if ver.get(k))
    lines.append(
        f"- device: {dev.get('device', config.get('device', '–'))}"
        + (f" ({dev['threads']} thread{'s' if dev['threads'] != 1 else ''})" if dev.get("threads") else "")
        + (f" · {shown}" if shown else "")
        + (f" · dukb {ver.get('dukb')}" if ver.get("dukb") else "")
        + (f" ({rev})" if rev else "")
    )
    lines.append("- everything else (the run's identity, every option): config.json")
    return lines + [""]


#: report.md's paragraph on how to read it and what to cite (README quotes it), one item per line.
HOW_TO_READ = (
    "**How to read this report, and what to cite.**",
    "- Cite the numbers of the tables, with their n: they follow the paper's rule (Wu et al. 2025, Table 1; the "
    "Eval-DU figure code). Per target, the (recall, accuracy) points of the method's sweep are anchored with (0, 1) "
    "and (1, 0); Acc@Recall≥0.8 is the largest accuracy at recall ≥ 0.8, Recall@Acc≥0.8 the largest recall at "
    "accuracy ≥ 0.8, AR-AUC the area under them; then mean ± std (population) over the n targets. A number without "
    "± is over one target.",
    "- **Best setting**: per target, the setting Recall@Acc≥0.8 selects, the largest recall among the settings that "
    "keep accuracy ≥ 0.8 (none when no setting does: Success-DU counts 0 there). Success-DU (the target is no "
    "longer derivable from what the model knows, Definition 2) is read at the best setting.",
    "- Other readings (mean envelope, observed mean points, Success-DU at any setting, per-setting means) are in "
    "summary.csv and appendix.md, labelled as not comparable to the paper. Per-fact ids are in facts.csv.",
)


def markdown_report(
    df, summary, config: dict, finetune: dict | None = None, notes=(), utility: dict | None = None
) -> str:
    """report.md, one page (at most :data:`PAGE_LINES` lines of at most :data:`PAGE_WIDTH` characters, no JSON):
    what to cite, Table 1 (Acc@Recall≥0.8, Recall@Acc≥0.8, AR-AUC, Success-DU at the best setting; per target,
    mean ± std over n targets) on the qa form and on the held-out forms, Table 2 (Acc@Superficial), Acc@Recall≥0.8
    by relation of the target, warnings (accuracy with nothing to score), the figure and the run in a few lines.
    Every other reading goes to summary.csv and appendix.md (:func:`appendix_report`); per-fact ids to facts.csv.

    Args:
        df: result rows (pandas DataFrame); summary: :func:`summarize`'s DataFrame; config: the run's config.json;
        finetune: finetune.json or None; notes: sentences for the report's end (missing units, Success-DU filled);
        utility: RUN_DIR/utility.json (``--utility``), adding Recall@U≥0.95FT per method and task (Wu et al. 2025,
        Table 7; :func:`dukb.neural.utility.utility_section`), or None.

    Returns:
        markdown text.

    Source: Wu et al. 2025, Tables 1/6 and 2/8, Definition 2; the Eval-DU figure notebook (trade-off rule).
    """
    allrows = summary[summary["group"] == "all"]
    recs = allrows.to_dict("records")
    methods = [r["method"] for r in recs]
    lines = ["# dukb evaluate report (Eval-DU protocol)", ""]
    lines += [
        f"KB `{config.get('kb')}` · model `{config.get('model', '?')}` · rules `{config.get('rules')}` · minimal "
        f"sets `{config.get('sets')}` · {config.get('n_targets', df['target'].nunique())} targets · "
        f"{len(methods)} methods · seed {config.get('seed')}",
        "",
    ]
    if "acc_at_recall" in allrows:
        lines += [*HOW_TO_READ, ""]
        lines += ["## Table 1: trade-off between recall and accuracy (qa form)", ""] + _table1(recs) + [""]
        lines += _heldout_section(df, recs, config)
    else:  # dukb unlearn (recall alone, no Table 1): still the held-out forms a schema KB's relations lack
        lines += ["## Held-out probe forms", "", *gaps] if (gaps := _unscorable_lines(config)) else []

    lines += attacks_section(df)

    lines += utility_section(df, utility)
    if "acc_at_superficial" in allrows:
        lines += _table2(recs)
    lines += _other_metrics(df, methods)
    rel = summary[summary["group"] != "all"]
    if len(rel) and "acc_at_recall" in rel:
        lines += _by_relation(rel, methods)
    warn = _short_finetuning(finetune) + _nothing_scored(df)
    if warn:
        lines += ["## Warnings", ""] + warn + [""]
    if "recall" in df.columns:
        lines += [
            "## Figure",
            "",
            figure_markdown(Path("accuracy_recall.png"), "accuracy-recall trade-off"),
            "",
            "Mean (recall, accuracy) over targets per setting (points labelled by setting where the labels do "
            "not overlap; the table of all these points is in appendix.md).",
            "",
        ]
    lines += _run_lines(df, config, finetune)
    lines += [n for n in notes if n]
    return wrap_prose("\n".join(lines).rstrip("\n")) + "\n"


def _table2(recs: list[dict]) -> list[str]:
    """report.md's Table 2, Acc@Superficial per method (Wu et al. 2025, Table 2/8), mean ± std over targets."""
    lines = [
        "## Table 2: accuracy at superficial unlearning",
        "",
        "| method | n | Acc@Superficial ↑ |",
        "|---|---|---|",
    ]
    for r in recs:  # the rows Table 1 skips (nothing to score) are skipped here too
        n = r.get("acc_at_superficial_n")
        cell = _n_cell({"n": n, "n_skipped_targets": r.get("n_skipped_targets")})
        lines.append(
            f"| {r['method'].upper()} | {cell} | "
            f"{mean_std(r.get('acc_at_superficial'), r.get('acc_at_superficial_std'), n)} |"
        )
    return lines + [
        "",
        "Per target the largest accuracy among the settings that make the target itself unknown (0 "
        "when none does), mean ± std over targets (the Eval-DU figure code).",
        "",
    ]


def _other_metrics(df, methods: list[str]) -> list[str]:
    """report.md's row metrics beyond recall (rouge_l_*, logprob_*): mean over targets and settings per method; no
    lines when there is none (a non-numeric field is not a metric)."""
    from pandas.api.types import is_numeric_dtype

    extra = [c for c in df.columns if c.startswith(("rouge_l_", "logprob_")) and is_numeric_dtype(df[c])]
    if not extra:
        return []
    means = df.groupby("method", sort=False)[extra].mean()
    lines = [
        "## Other metrics (mean over targets and settings)",
        "",
        "| metric | " + " | ".join(m.upper() for m in methods) + " |",
        "|---|" + "---|" * len(methods),
    ]
    lines += [f"| {c} | " + " | ".join(num(means.loc[m, c]) for m in methods) + " |" for c in extra]
    return lines + [""]


def _by_relation(rel, methods: list[str]) -> list[str]:
    """Acc@Recall≥0.8 per relation kind of the target (paper's rule), methods as columns; the other numbers per
    relation are in summary.csv and appendix.md."""
    lines = [
        "## Acc@Recall≥0.8 by relation of the target",
        "",
        "| relation | targets | " + " | ".join(m.upper() for m in methods) + " |",
        "|---|---|" + "---|" * len(methods),
    ]
    for group, g in rel.groupby("group", sort=True):
        by = {r["method"]: r for r in g.to_dict("records")}
        targets = int(max(r.get("n_targets") or 0 for r in by.values()))
        cells = []
        for m in methods:
            r = by.get(m)
            if r is None:
                cells.append("–")
                continue
            n = r.get("n")
            cell = mean_std(r.get("acc_at_recall"), r.get("acc_at_recall_std"), n)
            cells.append(cell + (f" (n={int(n)})" if not absent(n) and int(n) != targets and cell != "–" else ""))
        lines.append(f"| {group} | {targets} | " + " | ".join(cells) + " |")
    return lines + ["", "Per target, mean ± std over the relation's targets (a number alone: one target).", ""]


def appendix_report(df, summary, config: dict) -> str:
    """appendix.md: every reading report.md leaves out, each labelled as not comparable to the paper: the
    mean-envelope and observed-point readings, Success-DU at any setting, Acc@Superficial at the weakest forgetting
    setting, the mean (recall, accuracy) points per setting (qa and held-out forms), the forms each method saw, and
    the per-relation numbers.

    Args:
        df: result rows; summary: :func:`summarize`'s DataFrame; config: the run's config.json.

    Returns:
        markdown text.

    Source: Wu et al. 2025, Fig. 3a (mean curves); dukb's earlier readings (:mod:`dukb.neural.metrics.summary`).
    """

    allrows = summary[summary["group"] == "all"]
    recs = allrows.to_dict("records")
    lines = [
        "# dukb evaluate report: appendix",
        "",
        "Readings **not comparable to the paper** (report.md holds the paper's per-target rule, the one to cite). "
        "They read the mean points over targets, or a setting chosen otherwise.",
        "",
    ]
    if "acc_at_recall_envelope" in allrows:
        lines += _envelope_readings(recs)
    if "acc_at_superficial_weakest" in allrows:
        lines += _superficial_readings(recs)
    if "recall" in df.columns:
        lines += _mean_points(df)
    if "heldout_forms" in df.columns:
        lines += ["## Probe forms per method", "", "| method | forms it saw | held-out forms |", "|---|---|---|"]
        lines += [f"| {m.upper()} | {seen} | {held} |" for m, (seen, held) in _forms(df).items()]
        lines.append("")
    rel = summary[summary["group"] != "all"]
    if len(rel) and "acc_at_recall" in rel:
        lines += _relation_rows(rel)
    return "\n".join(lines).rstrip("\n") + "\n"


def _envelope_readings(recs: list[dict]) -> list[str]:
    """appendix.md: the envelope and observed readings of the trade-off and Success-DU at any setting, per method."""
    lines: list[str] = []
    lines += [
        "## Other readings of the trade-off",
        "",
        "| method | Acc@Recall≥0.8, envelope | Recall@Acc≥0.8, envelope | AR-AUC, envelope | Acc@Recall≥0.8, "
        "observed | Recall@Acc≥0.8, observed | Success-DU, any setting | first held-out mean point in the "
        "region |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in recs:
        region = r.get("region_setting_heldout")
        lines.append(
            f"| {r['method'].upper()} | "
            + " | ".join(
                num(r.get(k))
                for k in (
                    "acc_at_recall_envelope",
                    "recall_at_acc_envelope",
                    "ar_auc_envelope",
                    "observed_acc_at_recall",
                    "observed_recall_at_acc",
                    "success_du_any",
                )
            )
            + f" | {region if isinstance(region, str) else '–'} |"
        )
    lines += [
        "",
        "Envelope: the upper envelope through the mean points anchored at (0, 1) and (1, 0), linearly "
        "interpolated; observed: the measured mean points only (– when none reaches 0.8); Success-DU at "
        "any setting: the share of targets some setting deeply unlearns, whatever its accuracy.",
        "",
    ]
    return lines


def _superficial_readings(recs: list[dict]) -> list[str]:
    """appendix.md: Acc@Superficial at the weakest forgetting setting and the share of targets some setting forgets."""
    lines: list[str] = []
    lines += [
        "## Acc@Superficial, other readings",
        "",
        "| method | accuracy at the weakest forgetting setting | share of targets some setting forgets |",
        "|---|---|---|",
    ]
    lines += [
        f"| {r['method'].upper()} | {num(r.get('acc_at_superficial_weakest'))} | {num(r.get('share_superficial'))} |"
        for r in recs
    ]
    lines.append("")
    return lines


def _mean_points(df) -> list[str]:
    """appendix.md: the mean (recall, accuracy) point of each setting, on the qa form and on the held-out forms."""
    lines: list[str] = []
    for title, d in (("qa form", df), ("held-out forms", heldout_points(df))):
        if not len(d):
            continue
        pts = curve_points(d)
        sdu = "success_du" in pts
        lines += [
            f"## Mean points per setting ({title})",
            "",
            "| method | setting | recall | accuracy | rows scored | target forgotten |"
            + (" Success-DU |" if sdu else ""),
            "|---|---|---|---|---|---|" + ("---|" if sdu else ""),
        ]
        for p in pts.to_dict("records"):
            lines.append(
                f"| {p['method'].upper()} | {p['label']} | {num(p['recall'], 3)} | "
                f"{num(p['accuracy'], 3)} | {int(p['n_accuracy'])} of {int(p['n_targets'])} | "
                f"{num(p['target_forgotten'])} |" + (f" {num(p['success_du'])} |" if sdu else "")
            )
        lines.append("")
    return lines


def _relation_rows(rel) -> list[str]:
    """appendix.md: the per-relation numbers under the paper's rule, one row per relation and method."""
    lines: list[str] = []
    lines += [
        "## By relation of the target (paper's rule)",
        "",
        "| relation | method | n | Acc@Recall≥0.8 | Recall@Acc≥0.8 | AR-AUC | Success-DU |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rel.to_dict("records"):
        lines.append(
            f"| {r['group']} | {r['method'].upper()} | {_n_cell(r)} | "
            + " | ".join(
                mean_std(r.get(k), r.get(f"{k}_std"), r.get("n")) for k in ("acc_at_recall", "recall_at_acc", "ar_auc")
            )
            + f" | {mean_std(r.get('success_du'), r.get('success_du_std'), r.get('success_du_n'))} |"
        )
    lines.append("")
    return lines


def fact_rows(df, config: dict) -> list[dict]:
    """facts.csv: the per-fact ids a report refers to, one row each (never in report.md): the run's targets, under
    ``--no-finetune`` the facts the model did not know before unlearning (``unknown_before``: unscorable), and the
    facts no held-out form elicited before unlearning (unscorable on the held-out forms).

    Args:
        df: result rows; config: the run's config.json.

    Returns:
        list of {"list", "fact_kind", "fact_id", "note"} dicts.
    """
    out = []
    rel = {int(t): r for t, r in zip(df["target"], df.get("target_relation", [None] * len(df)))}
    targets = config.get("targets") if isinstance(config.get("targets"), list) else []
    for t in sorted(set(rel) | {int(t) for t in targets if isinstance(t, int) and not isinstance(t, bool)}):
        out.append({"list": "target", "fact_kind": "relationship", "fact_id": t, "note": rel.get(t) or ""})
    known = known_of_record(config.get("known_before"))
    if known is not None:  # --no-finetune: the facts the model did not know before unlearning (unscorable)
        out += [
            {
                "list": "unknown_before",
                "fact_kind": kind,
                "fact_id": f,
                "note": "the model did not know it before unlearning (qa probe): unscorable",
            }
            for kind, ids in (("relationship", known.unknown_relationships), ("biography", known.unknown_biographies))
            for f in sorted(ids)
        ]
    before = config.get("heldout_known_before")
    un = before.get("unelicited") if isinstance(before, dict) else None
    if isinstance(un, dict):
        for kind, key in (("relationship", "relationships"), ("biography", "biographies")):
            out += [
                {
                    "list": "heldout_unelicited",
                    "fact_kind": kind,
                    "fact_id": int(f),
                    "note": "no held-out form elicited it before unlearning",
                }
                for f in un.get(key) or ()
            ]
    return out


def plot_curves(df, path, accuracy: str = ACCURACY, *, band: str = "std", order=None) -> list[Path]:
    """accuracy_recall.png and accuracy_recall.pdf: the qa and held-out panels of mean curves over targets with
    bands and setting labels (:func:`dukb.neural.plots.tradeoff_figure`).

    Returns:
        [png path, pdf path].
    """

    return tradeoff_figure(df, path, accuracy=accuracy, band=band, order=order)


def render(run_dir) -> dict:
    """(Re)write summary.csv, report.md, appendix.md, facts.csv and accuracy_recall.png of a run directory from
    results.jsonl (and config.json, finetune.json when present) alone.

    Returns:
        dict of written paths (summary, report, appendix, facts, plot) and ``missing_units``: the (target, method,
        value) units of the run's identity without a row (:func:`dukb.neural.protocols.evaluate.rows.missing_units`), also named in report.md.

    Raises:
        FileNotFoundError: no results.jsonl; ValueError: it holds no rows; InputError: a file read is not a
            regular file (a FIFO, a device, a folder), too large or not JSON, or a directory is in an output's place
            (named).
    """
    import pandas as pd

    run = Path(run_dir)
    if not RunDir(run).results.exists():
        raise FileNotFoundError(f"{RunDir(run).results}: no such file")
    # each damaged line (not JSON, not a row: a missing field, a NaN) on stderr as FILE:LINE and in report.md; the
    # valid rows are all rendered
    config = read_json(RunDir(run).config, "run config") if os.path.lexists(RunDir(run).config) else {}
    if not isinstance(config, dict):
        raise InputError("not a run config (expected a JSON object)", RunDir(run).config)
    # a row out of range, outside the run's plan (config.json's identity) or a second one of a key: damaged too
    journal = report_journal(RunDir(run).results, EVALUATE_ROWS, config=config)
    rows = journal.rows
    if not rows:
        raise ValueError(f"{RunDir(run).results}: no result rows yet")
    missing_note = None
    missing = missing_units(config["identity"], rows) if isinstance(config.get("identity"), dict) else []
    if missing:
        shown = ", ".join(f"({t}, {m}, {v:g})" for t, m, v in missing[:8])
        missing_note = (
            f"{len(missing)} (target, method, setting) units of the run have no row yet: {shown}"
            f"{', ...' if len(missing) > 8 else ''}; the figures cover the rows present (resume the run to add "
            "them)."
        )
    df = pd.DataFrame(run_rows_in_order(rows, config))
    finetune = read_json(run / "finetune.json", "finetune record") if os.path.lexists(run / "finetune.json") else None

    by_rel = {r["target"]: r.get("target_relation") for r in rows if r.get("target_relation")}
    wanted = summary_metrics(parse_metrics(config.get("metrics") or DEFAULT_METRICS))
    if "recall" not in df.columns:  # the summary metrics read recall and accuracy
        wanted = []
    summary = summarize(df, by_relation=by_rel or None, metrics=wanted)
    summary_table(summary).to_csv(output_file(run / "summary.csv"), index=False)

    utility = read_json(run / UTILITY_FILE, "utility record") if os.path.lexists(run / UTILITY_FILE) else None
    output_file(run / "report.md").write_text(
        markdown_report(df, summary, config, finetune, [missing_note] if missing_note else [], utility=utility)
        + wrap_prose(journal_note(journal)),
        encoding="utf-8",
    )
    output_file(run / "appendix.md").write_text(appendix_report(df, summary, config), encoding="utf-8")
    pd.DataFrame(fact_rows(df, config), columns=["list", "fact_kind", "fact_id", "note"]).to_csv(
        output_file(run / "facts.csv"), index=False
    )
    paths = {
        "summary": run / "summary.csv",
        "report": run / "report.md",
        "appendix": run / "appendix.md",
        "facts": run / "facts.csv",
        "missing_units": missing,
    }
    if "recall" in df.columns:
        paths["plot"], paths["plot_pdf"] = plot_curves(df, run / "accuracy_recall.png", order=run_order(config))

    if plot_attacks(df, output_file(run / "attacks.png")):
        paths["attacks_plot"] = run / "attacks.png"
    return paths
