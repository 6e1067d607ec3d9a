"""The one-page evaluate report (issue 38, items 2 and 4), rendered from result rows without a model:

- report.md has at most 150 lines, none over 200 characters, no JSON; settings are labels (``steps=4``); "±" only
  when n ≥ 2; the paper's per-target rule is the only reading in it and it says what to cite; per-fact ids go to
  facts.csv, every other reading to summary.csv and appendix.md, each labelled as not comparable to the paper.
- Success-DU at the best setting is read at the setting the per-target rule selects (the largest recall with
  accuracy ≥ 0.8), never at the setting that maximises Success-DU whatever its accuracy.
- An accuracy with nothing to score is NaN/null with ``n_scored`` 0, never 1.0; the summary skips such rows and
  says how many; the report warns in one line; results rows stay valid JSON.
"""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from dukb.neural.metrics.summary import PAGE_LINES, PAGE_WIDTH, page_problems

RELATIONS = ("aunt", "brother", "father", "mother", "son", "uncle", "wife")


def _rows(methods=("ga", "npo", "tv", "whp", "du_npo_gdr"), n_targets=11, null_method="du_npo_gdr"):
    """Rows of a run shaped like the main job's: 11 targets, a 5-setting sweep per method, held-out scores; the
    ``null_method``'s retain set leaves nothing to score (accuracy null, n_scored 0)."""
    rows = []
    for mi, m in enumerate(methods):
        param = "alpha" if m in ("tv", "whp") else "steps"
        grid = (0.2, 0.5, 1.0, 5.0, 10.0) if param == "alpha" else (1, 2, 4, 8, 16)
        for t in range(n_targets):
            for i, v in enumerate(grid):
                rec = min(1.0, 0.15 * (i + 1) + 0.02 * t + 0.03 * mi)
                acc = max(0.0, 1.0 - 0.12 * (i + 1) - 0.01 * t)
                null = m == null_method
                rows.append(
                    {
                        "method": m,
                        "target": 100 + t,
                        "param": param,
                        "setting": {param: v, "lr": 1e-3, "schedule": "reference"} if param == "steps" else {param: v},
                        "recall": rec,
                        "accuracy_all": None if null else acc,
                        "n_scored": 0 if null else 500,
                        "target_forgotten": rec > 0.3,
                        "success_du": int(rec >= 0.9),
                        "target_relation": RELATIONS[t % len(RELATIONS)],
                        "retain_fact_ids": {"relationships": [1, 2, 3] if null else [], "biographies": []},
                        "probe_forms_seen": ["qa"],
                        "heldout_forms": ["paraphrase", "cloze"],
                        "recall_heldout": rec * 0.8,
                        "accuracy_all_heldout": None if null else min(1.0, acc + 0.05),
                        "n_scored_heldout": 0 if null else 300,
                        "target_forgotten_heldout": rec > 0.5,
                        "success_du_heldout": int(rec * 0.8 >= 0.9),
                        "forgotten_relationships": list(range(40)),
                        "forgotten_biographies": [],
                    }
                )
    return rows


def _config(rows) -> dict:
    return {
        "kb": "/kb/generated",
        "model": "tiny",
        "rules": "family",
        "sets": "exact",
        "seed": 0,
        "n_targets": len({r["target"] for r in rows}),
        "metrics": ["recall", "recall_heldout", "tradeoff", "acc_at_superficial"],
        "heldout_rule": "pairs",
        "finetune_forms": ["qa"],
        "forget_scope": "target",
        "heldout_known_before": {
            "forms": ["paraphrase", "cloze"],
            "all": 0.7264,
            "unelicited": {"relationships": list(range(1000, 1611)), "biographies": [7]},
        },
        "versions": {"python": "3.11.7", "torch": "2.13.0+cpu", "dukb": "0.1.0"},
    }


def _render(tmp_path, rows, config=None):
    from dukb.neural.protocols.evaluate.report import render

    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "config.json").write_text(json.dumps(config if config is not None else _config(rows)))
    render(tmp_path)
    return (tmp_path / "report.md").read_text()


def test_report_is_one_page(tmp_path):
    rows = _rows()
    text = _render(tmp_path, rows)
    assert page_problems(text) == [], page_problems(text)
    lines = text.rstrip("\n").split("\n")
    assert len(lines) <= PAGE_LINES and max(map(len, lines)) <= PAGE_WIDTH
    assert "{" not in text and "```" not in text  # no JSON, not even a setting
    assert "steps=" in text and "lr=1e-3" in text and "alpha=" in text
    # 611 unelicited fact ids go to facts.csv, never to report.md
    assert "1610" not in text and "1000, 1001" not in text
    facts = pd.read_csv(tmp_path / "facts.csv")
    assert len(facts[facts["list"] == "heldout_unelicited"]) == 612 and set(
        facts[facts["list"] == "target"]["fact_id"]
    ) == set(range(100, 111))
    # what to cite, and the best setting defined once
    assert "what to cite" in text and text.count("**Best setting**") == 1
    assert "not comparable to the paper" in text
    # the held-out forms keep their table, one number per metric
    assert "## Table 1 on held-out probe forms" in text
    # other readings live in the appendix, each labelled
    appendix = (tmp_path / "appendix.md").read_text()
    assert (
        "not comparable to the paper" in appendix
        and "envelope" in appendix
        and "envelope" not in text.split("## Table 1")[1].split("## Run")[0]
    )


def test_plus_minus_only_from_two_targets(tmp_path):
    text = _render(tmp_path, _rows(n_targets=1, methods=("ga",), null_method=None))
    table = [ln for ln in text.splitlines() if ln.startswith("| GA |")]
    assert table and all("±" not in ln for ln in table)  # one target: the number alone
    assert "| GA | 1 |" in text  # n = 1 stated
    text = _render(tmp_path, _rows(n_targets=3, methods=("ga",), null_method=None))
    assert "| GA | 3 | " in text and "±" in [ln for ln in text.splitlines() if ln.startswith("| GA | 3 |")][0]
    # by relation: each relation has one target, so no "±" there
    rel = text.split("## Acc@Recall≥0.8 by relation")[1].split("##")[0]
    assert "±" not in rel.split("Per target")[0]


def test_success_du_at_the_best_setting_is_the_per_target_rules_setting(tmp_path):
    """NPO deeply unlearns at steps=16 with accuracy 0.075, and keeps accuracy ≥ 0.8 only at steps=1, where it does
    not: Success-DU at the best setting is 0 (steps=1), not 1 (the issue's "1.00 at accuracy 0.075")."""
    from dukb.neural.metrics.run_summary import success_summary

    rows = []
    for t in (1, 2):
        for steps, rec, acc, sdu in ((1, 0.5, 0.9, 0), (16, 1.0, 0.075, 1)):
            rows.append(
                {
                    "method": "npo",
                    "target": t,
                    "param": "steps",
                    "setting": {"steps": steps},
                    "recall": rec,
                    "accuracy_all": acc,
                    "target_forgotten": True,
                    "success_du": sdu,
                }
            )
    got = success_summary(pd.DataFrame(rows))["npo"]
    assert got["success_du"] == 0.0 and got["success_du_setting"] == "steps=1 ×2" and got["success_du_n"] == 2
    assert got["success_du_any"] == 1.0  # the other reading, in summary.csv only
    # a target no setting keeps at accuracy >= 0.8 has no best setting: Success-DU 0 there, named "none"
    rows[0]["accuracy_all"] = 0.5
    got = success_summary(pd.DataFrame(rows))["npo"]
    assert got["success_du"] == 0.0 and got["success_du_setting"] == "steps=1 ×1, none ×1"
    # ties in recall: higher accuracy, then the weaker setting
    from dukb.neural.metrics.summary import best_setting

    assert best_setting([(0.9, 0.85), (0.9, 0.95), (0.9, 0.95), (1.0, 0.5)]) == 1
    assert best_setting([(0.9, 0.5)]) is None


def test_nothing_to_score_is_null_never_one(kb_builder):
    from dukb.solver.metrics import recall_accuracy

    people = {f"P{i}": "female" for i in range(6)}
    kb = kb_builder(people, [(f"P{i}", "child", f"P{i + 1}") for i in range(5)], [])
    # the retain set covers every fact outside the minimal set {0, 1}: accuracy has nothing to score
    r = recall_accuracy(kb, [[0, 1]], {0, 1}, None, exclude_rel=[2, 3, 4])
    assert r.recall == 1.0 and math.isnan(r.accuracy_all) and math.isnan(r.accuracy_relationships)
    assert r.n_scored == 0 and r.n_scored_relationships == 0
    j = r.to_json()
    assert j["accuracy_all"] is None and j["accuracy_relationships"] is None and j["n_scored"] == 0
    json.loads(json.dumps(j), parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    # one fact left: scored, with its count
    r = recall_accuracy(kb, [[0, 1]], {0, 1, 4}, None, exclude_rel=[2, 3])
    assert r.accuracy_all == 0.0 and r.n_scored == 1


def test_summary_skips_null_rows_and_says_how_many(tmp_path):
    from dukb.neural.protocols.evaluate.report import summarize

    rows = _rows(methods=("ga",), n_targets=3, null_method=None)
    for r in rows:
        if r["target"] == 100:
            r["accuracy_all"], r["n_scored"] = None, 0  # one target with nothing to score
    df = pd.DataFrame(rows)
    s = summarize(df).iloc[0]
    assert s["n"] == 2 and s["n_skipped_targets"] == 1 and s["n_skipped_rows"] == 5
    assert s["acc_at_superficial_n"] == 2
    text = _render(tmp_path, rows)
    assert "| GA | 2 (1 skipped) |" in text
    csv = pd.read_csv(tmp_path / "summary.csv")
    paper = csv[
        (csv["metric"] == "acc_at_recall") & (csv["reading"] == "paper (per target)") & (csv["group"] == "all")
    ].iloc[0]
    assert paper["n"] == 2 and paper["targets"] == 3 and paper["targets_skipped"] == 1 and paper["rows_skipped"] == 5
    # every target's accuracy null: the metric is null (–), never 1.0
    for r in rows:
        r["accuracy_all"] = None
    s = summarize(pd.DataFrame(rows)).iloc[0]
    assert s["acc_at_recall"] is None and s["n"] == 0 and s["n_skipped_targets"] == 3


def test_report_warns_when_the_retain_set_leaves_nothing_to_score(tmp_path):
    text = _render(tmp_path, _rows())
    warn = [ln for ln in text.splitlines() if "DU_NPO_GDR" in ln and "nothing to score" in ln]
    assert len([ln for ln in text.splitlines() if "nothing to score" in ln]) == 1
    assert len(warn) == 1 and "retain set" in warn[0] and "55 of 55 rows" in warn[0] and warn[0].endswith("skipped.")
    row = [ln for ln in text.split("## Table 1 on held-out")[0].splitlines() if ln.startswith("| DU_NPO_GDR |")][0]
    assert "1.00" not in row and "| 0 (11 skipped) | – | – | – |" in row
    assert not [ln for ln in text.splitlines() if ln.startswith("- **GA") and "nothing to score" in ln]


def test_report_warns_when_the_finetuning_ended_short_of_its_target(tmp_path):
    rows = _rows(methods=("ga",), null_method=None)
    (tmp_path / "finetune.json").write_text(
        json.dumps({"accuracy": 0.4542, "target_accuracy": 1.0, "reached_target": False, "epochs_run": 20})
    )
    text = _render(tmp_path, rows)
    section = " ".join(text.split("## Warnings")[1].split("##")[0].split())  # a long line is wrapped
    assert section.count("does not know the whole KB") == 1
    assert "ended at accuracy 0.4542, below the target 1" in section
    (tmp_path / "finetune.json").write_text(
        json.dumps({"accuracy": 1.0, "target_accuracy": 1.0, "reached_target": True})
    )
    assert "does not know" not in _render(tmp_path, rows)


def test_summary_csv_labels_every_reading(tmp_path):
    _render(tmp_path, _rows(null_method=None))
    csv = pd.read_csv(tmp_path / "summary.csv")
    assert list(csv.columns) == [
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
    ]
    readings = set(csv["reading"])
    assert {
        "paper (per target)",
        "paper (per target), held-out forms",
        "envelope (not comparable to the paper)",
        "observed mean points (not comparable to the paper)",
    } <= readings
    assert all(r.startswith("paper") or r == "count" or "not comparable to the paper" in r for r in readings)
    sdu = csv[(csv["metric"] == "success_du") & (csv["reading"] == "paper (per target)") & (csv["group"] == "all")]
    assert sdu["setting"].str.contains("steps=|alpha=").all() and not sdu["setting"].str.contains("{").any()


def test_summary_csv_does_not_depend_on_the_order_rows_were_written(tmp_path):
    """Two workers write a run's rows in any order: summary.csv lists every group's methods in the run's order
    (config.json's identity) and sums over targets in the run's order, so the same rows in another order give the same
    file byte for byte."""
    rows = _rows(null_method=None)
    config = _config(rows) | {
        "identity": {"methods": {m: {} for m in ("ga", "npo", "tv", "whp", "du_npo_gdr")}},
        "targets": [100 + t for t in range(11)],
    }
    shuffled = list(reversed(rows))
    shuffled.sort(key=lambda r: r["target"] % 3)  # another target and method first, per relation too
    texts = []
    for name, order in (("a", rows), ("b", shuffled)):
        (tmp_path / name).mkdir()
        _render(tmp_path / name, order, config)
        texts.append((tmp_path / name / "summary.csv").read_text())
    assert texts[0] == texts[1]
    groups = pd.read_csv(tmp_path / "b" / "summary.csv").drop_duplicates(["group", "method"])
    for _, g in groups.groupby("group"):
        assert list(g["method"]) == ["ga", "npo", "tv", "whp", "du_npo_gdr"]


def test_results_writer_writes_nan_as_null(tmp_path):
    from dukb.neural.protocols.evaluate.rows import EVALUATE_ROWS
    from dukb.neural.run.journal import ResultsFile, read_results

    f = ResultsFile(tmp_path / "results.jsonl", EVALUATE_ROWS.key)
    row = {
        "method": "du_npo_gdr",
        "target": 3,
        "param": "steps",
        "setting": {"steps": 1},
        "recall": 1.0,
        "accuracy_all": float("nan"),
        "n_scored": 0,
        "target_forgotten": True,
    }
    f.append(row)
    line = (tmp_path / "results.jsonl").read_text().strip()
    back = json.loads(line, parse_constant=lambda c: pytest.fail(f"{c} written"))
    assert back["accuracy_all"] is None and back["n_scored"] == 0
    assert EVALUATE_ROWS.check()(back) is None  # a null accuracy is a valid row
    assert read_results(tmp_path / "results.jsonl")[0]["accuracy_all"] is None
    # an older row (a number, no n_scored) is read as before
    old = {**row, "accuracy_all": 1.0}
    del old["n_scored"]
    assert EVALUATE_ROWS.check()(old) is None


def _protocol_runs(tmp_path):
    """A small run of every other protocol, written by hand (as tests/run/test_row_schema.py does)."""
    from tests.cli.test_cli_ux import _write_run, muse_rows, rwku_rows
    from tests.run.test_row_schema import _restor_run

    base = {
        "ratio": "1%",
        "forget_fact_ids": [1],
        "forgotten_relationships": [],
        "forgotten_biographies": [],
        "ps_exact_retain": 0.9,
        "ps_exact_forget": 0.8,
        "ps_perturb_retain": 0.9,
        "ps_perturb_forget": 0.8,
        "ps_similar_retain": 0.9,
        "ps_similar_forget": None,
        "confidence_retain": 0.5,
        "confidence_forget": 0.5,
    }
    control = [
        {**base, "method": None, "control": "original", "value": None},
        {**base, "method": "ga", "control": "none", "param": "steps", "value": 8.0, "ps_exact_forget": 0.1},
    ]
    restor = {
        "method": "ga",
        "targeted": False,
        "setting": {"steps": 1, "lr": 1e-3},
        "rows": [
            {"correct": False, "label": "other", "answer": "x"},
            {"correct": True, "label": "true", "answer": "banker"},
        ],
    }
    return {
        "muse": _write_run(
            tmp_path / "muse", "muse", muse_rows(), config={"select": "first_below_retrain", "targets": list(range(40))}
        ),
        "rwku": _write_run(tmp_path / "rwku", "rwku", rwku_rows(), config={"targets": list(range(40))}),
        "control": _write_run(
            tmp_path / "control",
            "control",
            control,
            config={"kb": "demo", "methods": ["ga"], "controls": []},
            **{
                "splits.json": {"forget": {"1%": [1]}, "retain_eval": {"relationships": [], "biographies": []}},
                "sets.json": {"targets": {}},
            },
        ),
        "restor": _restor_run(tmp_path / "restor", [restor]),
    }


@pytest.mark.parametrize("protocol", ["muse", "rwku", "control", "restor"])
def test_every_protocols_report_has_labels_not_json(protocol, tmp_path):
    """Each protocol's report.md: no JSON (settings and the run as labels), no line over 200 characters, no "nan"
    printed for a metric with nothing to score."""
    from dukb.cli.main import main

    run = _protocol_runs(tmp_path)[protocol]
    assert main(["report", str(run)]) == 0
    text = (run / "report.md").read_text()
    assert [p for p in page_problems(text, lines=10**6)] == []
    assert "```" not in text and '{"' not in text and "nan" not in text.replace("finetuned", "")
    assert "**What to cite**" in text
    if protocol == "muse":
        assert "40 values (config.json)" in text  # a long id list is not pasted
    if protocol == "restor":
        assert "steps=1, lr=1e-3" in text
    if protocol == "control":
        assert "| ga | none | steps=8 |" in text
