"""Recall@U≥0.95FT (Wu et al. 2025, Table 7; dukb.neural.utility.recall_at_utility) on hand-made rows: per target
the largest recall among the settings whose utility is at least 0.95 × the finetuned model's, 0 when none is, mean
and population std over targets; rows without utility skipped; a lower-is-better metric left out. No lm-eval needed."""

from __future__ import annotations

import pandas as pd
import pytest

from dukb.neural.utility import headline, recall_at_utility, utility_section

FT = {
    "mc": {"acc": 0.60, "acc_stderr": 0.1, "acc_norm": 0.5, "version": 1.0, "n_shot": 0, "n_samples": 8},
    "ppl": {"bits_per_byte": 3.0, "version": 1.0, "n_shot": 0, "n_samples": 8},
}


def _row(target, steps, recall, acc):
    util = None if acc is None else {"mc": {"acc": acc, "acc_norm": 0.1}, "ppl": {"bits_per_byte": 2.0}}
    return {
        "method": "ga",
        "target": target,
        "param": "steps",
        "setting": {"steps": steps},
        "recall": recall,
        "utility": util,
    }


ROWS = pd.DataFrame(
    [
        _row(1, 1, 0.2, 0.60),
        _row(1, 2, 0.5, 0.58),
        _row(1, 4, 0.9, 0.40),  # 0.58 >= 0.57: recall 0.5
        _row(2, 1, 0.3, 0.50),
        _row(2, 2, 0.7, 0.30),  # no setting at 0.57 or more: 0
        _row(3, 1, 1.0, None),
        _row(3, 2, 0.6, 0.61),  # WHP-like row without utility skipped: 0.6
    ]
)


def test_headline_is_the_first_metric():
    assert headline(FT["mc"]) == "acc" and headline(FT["ppl"]) == "bits_per_byte"
    assert (
        headline({"exact_match_stderr,strict-match": 0.1, "exact_match,strict-match": 0.5})
        == "exact_match,strict-match"
    )
    assert headline({"version": 1.0, "n_shot": 0}) is None


def test_recall_at_utility_per_target_rule():
    out = recall_at_utility(ROWS, FT, higher={"ppl": {"bits_per_byte": False}})
    mc = out["ga"]["mc"]
    per_target = [0.5, 0.0, 0.6]
    mean = sum(per_target) / 3
    assert mc["recall_at_utility"] == pytest.approx(mean)
    assert mc["std"] == pytest.approx((sum((x - mean) ** 2 for x in per_target) / 3) ** 0.5)
    assert (mc["n"], mc["n_none"], mc["metric"]) == (3, 1, "acc") and mc["threshold"] == pytest.approx(0.57)
    assert "ppl" not in out["ga"]  # lower is better: no "≥ 0.95 × FT" bar


def test_nothing_to_score_is_null_never_one():
    rows = pd.DataFrame([_row(1, 1, 0.4, None)])
    mc = recall_at_utility(rows, FT)["ga"]["mc"]
    assert mc["recall_at_utility"] is None and mc["n"] == 0


def test_report_section_only_when_utility_was_measured():
    assert utility_section(ROWS.drop(columns="utility"), {"finetuned": {"tasks": FT}}) == []
    assert utility_section(ROWS, None) == []
    lines = utility_section(
        ROWS, {"finetuned": {"tasks": FT}, "lm_eval": "0.4.13", "higher_is_better": {"ppl": {"bits_per_byte": False}}}
    )
    row = next(line for line in lines if line.startswith("| GA |"))
    assert row == "| GA | 0.37 ± 0.26 (n=3, none 1) |"
