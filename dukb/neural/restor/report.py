"""The report of a restor run, rendered from its files alone (no model, no solver): states.csv (one row per fact),
summary.csv (per model and group), report.md and one stacked-bar figure (PNG and PDF) of the fact states per
unlearning result.

report.md follows RESTOR's layout: Table 1 (accuracy of the clean, corrupted and unlearned models), Table 2
(Recovery / Forget / Unchanged over A), Table 3 (Degraded / Unaffected over B), Fig. 2 as a table (mean
length-normalised log-probabilities of the true, injected and random answers over A), accuracy per relation
(Fig. 3's per-relation view), then dukb's rule-aware analysis, timings and settings.

Source: Rezaei et al., RESTOR, Sec. 4.3 (Tables 1-3, Figs. 2-3). pandas is imported by :func:`render` only;
the figures are drawn by :mod:`dukb.neural.plots`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from dukb.neural.declare import compat_note
from dukb.neural.metrics.summary import config_value, setting_label, wrap_prose
from dukb.neural.plots import OKABE_ITO, stacked_bars_figure
from dukb.neural.restor.config import RestorConfig
from dukb.neural.restor.facts import FactProbe
from dukb.neural.restor.files import load_run
from dukb.neural.restor.states import (
    DEGRADED,
    FORGET,
    RECOVERY,
    STATES,
    STATES_A,
    STATES_B,
    UNAFFECTED,
    UNCHANGED,
    fact_state,
    fact_states,
    logprob_means,
    partition,
    summarize_model,
)
from dukb.neural.run.journal import journal_note


def method_label(row: dict, rows: Sequence[dict] = ()) -> str:
    """Display name of a result row: "GA", "KL (t)" for targeted, with "#n" appended when several rows share the
    method and mode (different settings)."""
    name = row["method"].upper() + (" (t)" if row["targeted"] else "")
    same = [r for r in rows if r["method"] == row["method"] and bool(r["targeted"]) == bool(row["targeted"])]
    if len(same) > 1:
        name += f" #{same.index(row) + 1}"
    return name


def states_table(
    facts: Sequence[FactProbe],
    clean: Sequence[dict],
    corrupted: Sequence[dict],
    results: Sequence[dict],
    retain_facts: Iterable = (),
) -> list[dict]:
    """One row per fact: the fact, the clean and corrupted models' answers, and per unlearning result its answer,
    label, correctness and state (:func:`fact_state`).

    Returns:
        list of dicts (the columns of states.csv).

    Source: Rezaei et al., RESTOR, Sec. 4.3 (fact states).
    """
    retain = {tuple(k) for k in retain_facts}
    out = []
    for i, f in enumerate(facts):
        d = {
            "fact_kind": f.fact_kind,
            "fact_id": f.fact_id,
            "subject": f.subject,
            "predicate": f.predicate,
            "true_value": f.true_value,
            "injected_value": f.injected or "",
            "in_F_prime": f.injected is not None,
            "in_retain": (f.fact_kind, f.fact_id) in retain,
        }
        for name, rows in (("clean", clean), ("corrupted", corrupted)):
            r = rows[i]
            d |= {f"{name}_answer": r["answer"], f"{name}_label": r["label"], f"{name}_correct": r["correct"]}
        for res in results:
            lab = method_label(res, results).replace(" ", "")
            r = res["rows"][i]
            d |= {
                f"{lab}_answer": r["answer"],
                f"{lab}_label": r["label"],
                f"{lab}_correct": r["correct"],
                f"{lab}_state": fact_state(clean[i], corrupted[i], r, d["in_retain"]),
            }
        out.append(d)
    return out


def summary_rows(data: dict) -> list[dict]:
    """summary.csv: per model (clean, corrupted, each unlearning result) and group (all, F', other, fact kinds,
    relations): n, accuracy %, injected %, and for unlearned models the partitions of A and B over that group's
    facts; the log-probability means over A; the belief analysis counts (group "all" only).

    Source: Rezaei et al., RESTOR, Tables 1-3 and Fig. 2; belief counts: dukb.solver.beliefs.
    """
    facts = data["facts"]
    clean, corr = data["clean"]["rows"], data["corrupted"]["rows"]
    models = [("clean", clean, data["clean"]), ("corrupted", corr, data["corrupted"])]
    models += [(method_label(r, data["results"]), r["rows"], r) for r in data["results"]]
    out = []
    for name, rows, doc in models:
        acc = summarize_model(facts, rows)
        states = (
            fact_states(facts, clean, corr, rows, data["config"].get("retain_facts", []))
            if name not in ("clean", "corrupted")
            else None
        )
        for g, v in acc.items():
            row = {
                "model": name,
                "group": g,
                "n": v["n"],
                "accuracy": round(v["accuracy"], 4),
                "injected": round(v["injected"], 4),
            }
            if states is not None:
                sel = [s for f, s in zip(facts, states) if _in_group(f, g)]
                part = partition(sel)
                row |= {
                    k: (None if part[k] is None else round(part[k], 4)) if k in STATES else part[k]
                    for k in ("n_A", *STATES_A, "n_B", *STATES_B, "n_retain_train")
                }
            if g == "all":
                lp = logprob_means(doc.get("logprobs_A", []))
                row |= {
                    "logprob_true_A": lp["true"],
                    "logprob_injected_A": lp["injected"],
                    "logprob_random_A": lp["random"],
                }
                b = doc.get("beliefs", {})
                row |= {
                    k: b.get(k)
                    for k in (
                        "n_beliefs",
                        "n_beliefs_false",
                        "n_derived",
                        "n_derived_false",
                        "n_derived_contradicting_answers",
                        "n_corrupted_rel",
                        "n_injected_stated",
                        "n_injected_derivable",
                        "n_injected_retained",
                    )
                }
            out.append(row)
    return out


def _in_group(f: FactProbe, g: str) -> bool:
    if g == "all":
        return True
    if g == "F'":
        return f.injected is not None
    if g == "other":
        return f.injected is None
    if g.startswith("rel:"):
        return f.predicate == g[4:]
    return f.fact_kind == g


def _f(v, nd: int = 2) -> str:
    return "–" if v is None or v != v else f"{v:.{nd}f}"  # None or NaN: nothing to score


def _delta(v, ref) -> str:
    if v is None or ref is None:
        return _f(v)
    d = v - ref
    arrow = "↑" if d > 0 else ("↓" if d < 0 else "=")
    return f"{v:.2f} ({arrow}{abs(d):.2f})"


def markdown(data: dict) -> str:
    """report.md: RESTOR's Table 1 (accuracy of clean, corrupted and unlearned models; arrows: corrupted vs clean,
    unlearned vs corrupted), Table 2 (Recovery/Forget/Unchanged over A), Table 3 (Degraded/Unaffected over B), the
    same restricted to F', Fig. 2 as a table (mean length-normalised log-probabilities over A), accuracy per
    relation, the rule-aware analysis, timings and the configuration.

    Args:
        data: the run's documents (:func:`render`): "config", "facts", "clean", "corrupted", "results" and the
            training records "clean_train", "corrupt_train".

    Returns:
        The Markdown text, prose wrapped (:func:`dukb.neural.metrics.summary.wrap_prose`).

    Source: Rezaei et al., RESTOR, Sec. 4.3 (Tables 1-3, Figs. 2-3).
    """

    facts, res = data["facts"], data["results"]
    labels = [method_label(r, res) for r in res]
    acc = {
        "clean": summarize_model(facts, data["clean"]["rows"]),
        "corrupted": summarize_model(facts, data["corrupted"]["rows"]),
    }
    for lab, r in zip(labels, res):
        acc[lab] = summarize_model(facts, r["rows"])
    models = [("Clean", data["clean"]), ("Corrupted", data["corrupted"])] + list(zip(labels, res))
    lines = (
        _header_lines(data["config"])
        + _accuracy_lines(acc, labels)
        + _outcome_lines(data, labels)
        + _logprob_lines(models)
        + _relation_lines(acc, labels)
        + _belief_lines(models, data["config"])
        + _timing_lines(data, labels)
        + _settings_lines(data["config"], labels, res)
    )
    return wrap_prose("\n".join(lines))


def _header_lines(cfgd: dict) -> list[str]:
    """The title, the run's setting in one line, and what to cite and how facts are judged (:func:`markdown`)."""
    c = cfgd.get("config", {})
    who, one = ("entities", "entity") if cfgd.get("schema") else ("people", "person")  # another schema: entities
    return [
        "# dukb restor report",
        "",
        f"KB: `{cfgd.get('kb')}` · model: `{c.get('model')}` (preset {cfgd.get('preset')}) · facts: "
        f"{cfgd.get('n_facts')} · F': {cfgd.get('n_corrupted')} facts of {cfgd.get('n_corrupted_people')} "
        f"{who} (fraction {c.get('corrupt')}) · documents: {cfgd.get('n_documents')} ({c.get('docs_per_entity')}"
        f" per {one}, k_context {c.get('context')}) · LoRA r: {c.get('lora_r') or 'full finetuning'} · "
        f"M: {cfgd.get('identity', {}).get('samples')} · seed: {c.get('seed')}",
        "",
        "**What to cite**: Table 1 (accuracy), Tables 2 and 3 (outcomes over A and B) and Fig. 2 as a table "
        "(RESTOR, Sec. 4.3).",
        "",
        "Judging is exact against the KB (normalised case, accents, trailing words and punctuation; "
        "'X state' = 'X'); a fact is known when a majority of the M generations give the true value.",
        "",
        compat_line(c),
        "",
    ]


def compat_line(config: dict) -> str:
    """The components of the run (``config``: config.json's ``config``) whose value differs from RESTOR's released
    code's, or that none does (:func:`dukb.neural.declare.compat_note` over
    :data:`dukb.neural.restor.config.RESTOR_COMPAT`)."""

    return "**Against RESTOR's code**: " + compat_note(config, RestorConfig, "restor", "RESTOR")


def _accuracy_lines(acc: dict, labels: list[str]) -> list[str]:
    """Table 1: accuracy (%) over all facts, F' and the other facts, with the share of injected answers.

    Args:
        acc: model name ("clean", "corrupted", each method label) -> :func:`summarize_model`'s groups.
        labels: the unlearned models' labels (:func:`method_label`), in column order.

    Source: Rezaei et al., RESTOR, Sec. 4.3, Table 1.
    """
    groups = [("all", "all facts"), ("F'", "F' (corrupted facts)"), ("other", "other facts")]
    head = ["Clean", "Corrupted"] + labels
    lines = [
        "## Table 1: accuracy (%)",
        "",
        "| facts | n | " + " | ".join(head) + " |",
        "|---|---|" + "---|" * len(head),
    ]
    for g, title in groups:
        if g not in acc["clean"]:
            continue
        cl, co = acc["clean"][g]["accuracy"], acc["corrupted"][g]["accuracy"]
        cells = [_f(cl), _delta(co, cl)] + [_delta(acc[lab][g]["accuracy"], co) for lab in labels]
        lines.append(f"| {title} | {acc['clean'][g]['n']} | " + " | ".join(cells) + " |")
    fprime = "F'"
    inj_all = ", ".join(f"{k} {_f(v['all']['injected'])}" for k, v in acc.items())
    inj_f = ", ".join(f"{k} {_f(v[fprime]['injected'])}" for k, v in acc.items()) if fprime in acc["clean"] else "–"
    return lines + [
        "",
        "Arrows: corrupted vs clean; unlearned vs corrupted (as RESTOR Table 1). Share of facts "
        f"answered with the injected value (%): {inj_all}; on F': {inj_f}.",
        "",
    ]


def _outcome_lines(data: dict, labels: list[str]) -> list[str]:
    """Tables 2 and 3: outcomes (%) over A = {clean right, corrupted wrong} and B = {clean right, corrupted
    right}, also on F' only, one row per unlearned model; nothing when there is no result.

    Source: Rezaei et al., RESTOR, Sec. 4.3, Tables 2-3.
    """
    cfgd, facts, res = data["config"], data["facts"], data["results"]
    clean, corr = data["clean"]["rows"], data["corrupted"]["rows"]
    lines: list[str] = []
    if not res:
        return lines
    for title, keys, sub in (
        ("Table 2: outcomes over A = {clean right, corrupted wrong} (%)", STATES_A, "n_A"),
        ("Table 3: outcomes over B = {clean right, corrupted right} (%)", STATES_B, "n_B"),
    ):
        arrows = {RECOVERY: "↑", FORGET: "↓", UNCHANGED: "↓", DEGRADED: "↓", UNAFFECTED: "↑"}
        lines += [
            f"## {title}",
            "",
            "| method | "
            + " | ".join(f"{k} {arrows[k]}" for k in keys)
            + f" | \\|{sub[2]}\\| | on F' only: "
            + " / ".join(keys)
            + f" (\\|{sub[2]}∩F'\\|) |",
            "|---|" + "---|" * (len(keys) + 2),
        ]
        for lab, r in zip(labels, res):
            st = fact_states(facts, clean, corr, r["rows"], cfgd.get("retain_facts", []))
            p = partition(st)
            pf = partition([s for f, s in zip(facts, st) if f.injected is not None])
            lines.append(
                f"| {lab} | "
                + " | ".join(_f(p[k]) for k in keys)
                + f" | {p[sub]} | "
                + " / ".join(_f(pf[k]) for k in keys)
                + f" ({pf[sub]}) |"
            )
        lines.append("")
    n_rt = p["n_retain_train"]  # the same facts for every result
    return lines + [
        f"{n_rt} retain-train fact(s) (stated in the retain documents the unlearning trained on) are "
        "left out of A and B.",
        "",
    ]


def _logprob_lines(models: list[tuple[str, dict]]) -> list[str]:
    """Fig. 2 as a table: mean length-normalised log-probabilities over A of the true, injected and random
    answers, one row per (name, document) of ``models``.

    Source: Rezaei et al., RESTOR, Sec. 4.3, Fig. 2.
    """
    lines = [
        "## Fig. 2: mean length-normalised log-probability over A",
        "",
        "Mean over the facts of A of (1/T) Σ log P(answer token) for the true answer, the injected answer "
        "(facts of A in F' only) and the mean over up to 15 random plausible answers.",
        "",
        "| model | true | injected | random | \\|A\\| | with injected |",
        "|---|---|---|---|---|---|",
    ]
    for name, doc in models:
        lp = logprob_means(doc.get("logprobs_A", []))
        lines.append(
            f"| {name} | {_f(lp['true'], 3)} | {_f(lp['injected'], 3)} | {_f(lp['random'], 3)} | "
            f"{lp['n']} | {lp['n_injected']} |"
        )
    return lines


def _relation_lines(acc: dict, labels: list[str]) -> list[str]:
    """Accuracy (%) per relation, one column per model (``acc`` and ``labels`` as :func:`_accuracy_lines`)."""
    head = ["Clean", "Corrupted"] + labels
    rels = sorted(g for g in acc["clean"] if g.startswith("rel:"))
    lines = [
        "",
        "## Accuracy per relation (%)",
        "",
        "| relation | n | " + " | ".join(head) + " |",
        "|---|---|" + "---|" * len(head),
    ]
    for g in rels:
        lines.append(
            f"| {g[4:]} | {acc['clean'][g]['n']} | "
            + " | ".join(_f(acc[k][g]["accuracy"]) for k in ["clean", "corrupted"] + labels)
            + " |"
        )
    return lines


def _belief_lines(models: list[tuple[str, dict]], cfgd: dict) -> list[str]:
    """The rule-aware analysis of the models' beliefs, one row per (name, document) of ``models``, with examples
    of derived contradicting or false facts of every model but the clean one. ``cfgd`` (config.json) names the
    schema and its functional relations when it is not the family one.

    Source: Rezaei et al., RESTOR, Sec. 4.3 (rule-aware analysis, Fig. 3).
    """
    one, functional = "person", "father, mother, husband, wife"
    if cfgd.get("schema"):  # another schema: its entities and its functional relations (older runs: unnamed)
        one, names = "entity", cfgd.get("functional")
        functional = "of the schema" if names is None else ", ".join(names) or "none in the schema"
    lines = [
        "",
        "## Rule-aware analysis of the models' beliefs",
        "",
        f"Belief KB = the (s, r, {one}) answers to the relationship questions; its deductive closure under "
        "the rules. Contradictions: derived facts outside the true closure, and derived facts of a functional "
        f"relation ({functional}) whose subject the model gave another object. Corrupted "
        "relationship facts of F': stated by the model, or derivable from its other beliefs.",
        "",
        "| model | beliefs | false beliefs | derived | derived false (vs true KB) | derived contradicting "
        "own answers | F' rel. facts | injected stated | injected derivable | injected retained |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, doc in models:
        b = doc.get("beliefs") or {}
        lines.append(
            f"| {name} | "
            + " | ".join(
                str(b.get(k, "–"))
                for k in (
                    "n_beliefs",
                    "n_beliefs_false",
                    "n_derived",
                    "n_derived_false",
                    "n_derived_contradicting_answers",
                    "n_corrupted_rel",
                    "n_injected_stated",
                    "n_injected_derivable",
                    "n_injected_retained",
                )
            )
            + " |"
        )
    ex = [(name, doc.get("beliefs") or {}) for name, doc in models[1:]]
    exl = [
        f"- {n}: " + "; ".join(b.get("examples_contradicting", []) or b.get("examples_false", [])[:3])
        for n, b in ex
        if b.get("examples_contradicting") or b.get("examples_false")
    ]
    if exl:
        lines += ["", "Examples (subject|relation|object of derived contradicting/false facts):", ""] + exl
    return lines


def _timing_lines(data: dict, labels: list[str]) -> list[str]:
    """The timings table (seconds): training the clean and corrupted models, probing, and per unlearned model."""
    ct, kt = data.get("clean_train", {}), data.get("corrupt_train", {})
    lines = [
        "",
        "## Timings (seconds)",
        "",
        "| stage | seconds |",
        "|---|---|",
        f"| clean model ({ct.get('epochs_run', '?')} epochs, accuracy {_f(ct.get('accuracy'), 4)}) | "
        f"{_f(ct.get('seconds_total'), 1)} |",
        f"| corruption ({kt.get('n_documents', '?')} documents) | {_f(kt.get('seconds_total'), 1)} |",
        f"| probing clean / corrupted | {_f(data['clean'].get('seconds_probe'), 1)} / "
        f"{_f(data['corrupted'].get('seconds_probe'), 1)} |",
    ]
    for lab, r in zip(labels, data["results"]):
        lines.append(
            f"| {lab}: unlearning / probing / log-probs | {_f(r.get('seconds_unlearn'), 1)} / "
            f"{_f(r.get('seconds_probe'), 1)} / {_f(r.get('seconds_logprobs'), 1)} |"
        )
    return lines


def _settings_lines(cfgd: dict, labels: list[str], res: list[dict]) -> list[str]:
    """Each unlearned model's setting and the run's configuration, one bullet each."""

    c = cfgd.get("config", {})
    lines = ["", "## Settings", ""] + [f"- {lab}: {setting_label(r['setting'])}" for lab, r in zip(labels, res)]
    lines += ["- config: " + "; ".join(f"{k}={config_value(v)}" for k, v in c.items())] if c else []
    return lines + ["- everything else: config.json", ""]


def plot_states(data: dict, row: dict, path: Path) -> list[Path]:
    """A stacked-bar figure of one unlearning result, as PNG and PDF (:func:`dukb.neural.plots.stacked_bars_figure`):
    bar A (Recovery, Forget, Unchanged) and bar B (Degraded, Unaffected), each summing to 100%.

    Returns:
        [png path, pdf path].

    Source: Rezaei et al., RESTOR, Sec. 4.3, Tables 2 and 3.
    """

    clean, corr = data["clean"]["rows"], data["corrupted"]["rows"]
    p = partition(fact_states(data["facts"], clean, corr, row["rows"], data["config"].get("retain_facts", [])))
    colours = {
        RECOVERY: OKABE_ITO["bluish green"],
        FORGET: OKABE_ITO["sky blue"],
        UNCHANGED: OKABE_ITO["vermillion"],
        DEGRADED: OKABE_ITO["orange"],
        UNAFFECTED: OKABE_ITO["blue"],
    }
    bars = [(f"A (n={p['n_A']})", [(k, p[k]) for k in STATES_A]), (f"B (n={p['n_B']})", [(k, p[k]) for k in STATES_B])]
    return stacked_bars_figure(
        bars, colours, path, ylabel="% of facts", title=f"Fact states after {method_label(row, data['results'])}"
    )


def render(run_dir) -> dict:
    """(Re)write states.csv, summary.csv, report.md and one states_<METHOD>.png and .pdf per unlearning result from
    the files of a run directory alone (no model, no solver).

    Returns:
        dict of written paths (report, states, summary, plots: the PNGs, plots_pdf: the PDFs).

    Raises:
        InputError: the directory does not hold a restor run whose clean and corrupted models were probed.
    """
    import pandas as pd

    run = Path(run_dir)
    data = load_run(run)
    table = states_table(
        data["facts"],
        data["clean"]["rows"],
        data["corrupted"]["rows"],
        data["results"],
        data["config"].get("retain_facts", []),
    )
    pd.DataFrame(table).to_csv(run / "states.csv", index=False, lineterminator="\n")
    summary = pd.DataFrame(summary_rows(data))
    counts = [c for c in summary.columns if c == "n" or c.startswith("n_")]
    summary[counts] = summary[counts].astype("Int64")  # counts stay integers next to empty cells
    summary.to_csv(run / "summary.csv", index=False, lineterminator="\n")
    (run / "report.md").write_text(
        markdown(data) + (journal_note(data["journal"]) if "journal" in data else ""), encoding="utf-8"
    )
    plots = []
    for r in data["results"]:
        name = re.sub(r"[^A-Za-z0-9]+", "_", method_label(r, data["results"])).strip("_")
        plots.append(plot_states(data, r, run / f"states_{name}.png"))
    return {
        "report": run / "report.md",
        "states": run / "states.csv",
        "summary": run / "summary.csv",
        "plots": [png for png, _ in plots],
        "plots_pdf": [pdf for _, pdf in plots],
    }
