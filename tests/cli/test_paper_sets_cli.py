"""`dukb mdus --method paper` and `dukb recall --method paper --tie-break first` on the benchmark (symbolic side, no
model): the paper's cached sets printed in the reference's order, and the reference's numbers on its example.

The reference's example (github.com/wrh14/deep_unlearning, example_for_evaluation/, target 272 = subsample index
per calculate_recall_and_acc.py) prints recall 0.75, relationship accuracy 0.25, biography accuracy 0.023333 and
overall accuracy 0.152299 (rec_acc.pt of the repository).

Source: Wu et al. 2025 (Eval-DU), Eq. 1-2; calculate_recall_and_acc.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from independent_logic import reference_paper_sets

from dukb.cli.main import main
from dukb.kb import load_kb
from dukb.kb.paper_sets import PAPER_SETS_FILE


@pytest.fixture(scope="module")
def edu(edu_relat_dir) -> Path:
    if not (edu_relat_dir / "original" / "unlearn_minimal_set").is_dir():
        pytest.skip("the benchmark's unlearn_minimal_set/ is not in ../shared/edu-relat/original")
    return edu_relat_dir


def one_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dukb: error: ") and "Traceback" not in err[0], err
    return err[0]


def test_mdus_method_paper_prints_the_cached_sets_in_the_reference_paper_sets(edu, capsys):
    assert main(["mdus", "--kb", str(edu), "--target-id", "214", "--target-id", "267", "--method", "paper"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [e["fact_id"] for e in doc["targets"]] == [214, 267]
    for e in doc["targets"]:
        assert e["method"] == "paper" and e["complete"] is False
        assert e["sets"] == reference_paper_sets(edu / "original" / "unlearn_minimal_set" / f"{e['fact_id']}.pt")
        assert {"subject", "relation", "object"} <= set(e)
    assert doc["targets"][1]["sets"] == [[58, 210, 267, 313], [166, 267, 313, 361]]


def test_mdus_method_paper_table_has_the_other_methods_columns(edu, capsys):
    assert main(["mdus", "--kb", str(edu), "--target-id", "214", "--method", "paper", "--format", "table"]) == 0
    out = capsys.readouterr().out
    assert "minimal deep unlearning sets (paper)" in out and "10,7,5,5,7,10" in out


@pytest.mark.parametrize(
    "args, message",
    [
        (["--kb", "demo", "--target-id", "5"], "--method paper: the KB"),
        (["--kb", "demo", "--target-id", "5", "--joint"], "--joint does not apply to --method paper"),
        (["--kb", "demo", "--target-id", "5", "--seconds", "3"], "--seconds applies only"),
    ],
)
def test_mdus_method_paper_refusals(capsys, args, message):
    assert main(["mdus", *args, "--method", "paper"]) == 2
    assert message in one_error(capsys)


def test_mdus_method_paper_for_a_target_without_sets(edu, capsys):
    assert main(["mdus", "--kb", str(edu), "--target-id", "0", "--method", "paper"]) == 2
    assert "has no sets for target 0" in one_error(capsys)


def test_recall_method_paper_first_reproduces_the_reference_example(edu, capsys):
    ex = edu / "original" / "example_for_evaluation"
    base = ["recall", "--kb", str(edu), "--target-id", "272", "--retained-dir", str(ex), "--method", "paper"]
    assert main(base + ["--tie-break", "first"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["sets_used"] == "paper" and doc["n_sets"] == 2 and doc["ties"] == 2
    assert doc["recall"] == pytest.approx(0.75)
    assert doc["accuracy_relationships"] == pytest.approx(0.25)
    assert doc["accuracy_biographies"] == pytest.approx(0.023333, abs=5e-7)
    assert doc["accuracy_all"] == pytest.approx(0.152299, abs=5e-7)
    assert doc["best_set"] == reference_paper_sets(edu / "original" / "unlearn_minimal_set" / "272.pt")[0]
    assert main(base) == 0  # the default tie-break: same recall
    assert json.loads(capsys.readouterr().out)["recall"] == pytest.approx(0.75)


def test_recall_method_paper_on_an_imported_kb_reads_paper_sets_csv(edu, tmp_path, capsys):
    kb = tmp_path / "kb"
    assert main(["import-eval-du", str(edu / "original"), str(kb)]) == 0
    capsys.readouterr()
    ex = edu / "original" / "example_for_evaluation"
    args = [
        "recall",
        "--kb",
        str(kb),
        "--target-id",
        "272",
        "--retained-dir",
        str(ex),
        "--method",
        "paper",
        "--tie-break",
        "first",
    ]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["accuracy_all"] == pytest.approx(0.152299, abs=5e-7)
    # a tampered converted file: FILE:LINE, exit 2
    text = (kb / PAPER_SETS_FILE).read_text().replace("272,2,", "272,3,")
    (kb / PAPER_SETS_FILE).write_text(text)
    assert main(args) == 2
    line = one_error(capsys)
    assert f"{kb / PAPER_SETS_FILE}:" in line and "rank 3 of target 272 is out of sequence" in line


def test_recall_method_paper_refused_without_paper_sets(tmp_path, capsys):
    kb = tmp_path / "kb"
    shutil.copytree(load_kb("demo").source, kb)
    retained = tmp_path / "r.csv"
    retained.write_text("kind,fact_id,retained\n" + "".join(f"relationship,{i},1\n" for i in range(18)))
    assert main(["recall", "--kb", str(kb), "--target-id", "5", "--retained", str(retained), "--method", "paper"]) == 2
    assert "has no paper sets" in one_error(capsys)
