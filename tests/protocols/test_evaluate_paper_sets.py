"""`dukb evaluate --sets paper --tie-break first`: the plan stage only (no model): the run's sets are the paper's,
in the reference's order, recorded in sets.json; the run identity records them (a digest) and the tie-break, and
an identity at the defaults has no tie_break key (runs made before the option compare equal); a KB without paper
sets, or a target without them, is refused in one line before anything is written.

Source: Wu et al. 2025 (Eval-DU), Eq. 1-2; calculate_recall_and_acc.py (first-set argmax).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from independent_logic import reference_paper_sets

from dukb.cli.main import main
from dukb.neural.protocols.evaluate.config import EvaluateConfig


@pytest.fixture()
def plan_only(monkeypatch):
    """`dukb evaluate` runs its plan stage only: config.json is written, no model is loaded, no unit runs."""
    from dukb.neural.protocols.evaluate.run import EvaluateProtocol
    from dukb.neural.run.files import write_json_atomic

    def model(self):
        write_json_atomic(self.run / "config.json", self.record)

    monkeypatch.setattr(EvaluateProtocol, "model", model)
    monkeypatch.setattr(EvaluateProtocol, "work", lambda self: None)
    monkeypatch.setattr(EvaluateProtocol, "report", lambda self: {"report": self.run / "report.md"})


@pytest.fixture(scope="module")
def edu(edu_relat_dir) -> Path:
    if not (edu_relat_dir / "original" / "unlearn_minimal_set").is_dir():
        pytest.skip("the benchmark's unlearn_minimal_set/ is not in ../shared/edu-relat/original")
    return edu_relat_dir


def _run(edu, tmp_path, name, *extra) -> int:
    targets = tmp_path / "targets.txt"
    targets.write_text("214\n267\n")
    return main(
        [
            "evaluate",
            "--kb",
            str(edu),
            "--targets-file",
            str(targets),
            "--methods",
            "ga@best",
            "--metrics",
            "recall",
            "-o",
            str(tmp_path / name),
            *extra,
        ]
    )


def test_sets_paper_plan_records_the_papers_sets_and_the_tie_break(edu, tmp_path, plan_only):
    assert _run(edu, tmp_path, "run", "--sets", "paper", "--tie-break", "first") == 0
    doc = json.loads((tmp_path / "run" / "config.json").read_text())
    ident = doc["identity"]
    assert ident["sets"]["method"] == "paper" and len(ident["sets"]["paper"]) == 64
    assert ident["tie_break"] == "first"
    sets = json.loads((tmp_path / "run" / "sets.json").read_text())
    for t in (214, 267):
        entry = sets["targets"][str(t)]
        assert entry["sets_used"] == "paper"
        assert entry["sets"] == reference_paper_sets(edu / "original" / "unlearn_minimal_set" / f"{t}.pt")
    # best scope picks one of the paper's sets even where (214, rules family) they are not minimal
    forget = json.loads((tmp_path / "run" / "forget_sets.json").read_text())["entries"]
    assert forget["214@best"] in sets["targets"]["214"]["sets"]

    # the defaults: exact sets, the accuracy tie-break, no tie_break key in the identity
    assert _run(edu, tmp_path, "run2") == 0
    ident2 = json.loads((tmp_path / "run2" / "config.json").read_text())["identity"]
    assert "tie_break" not in ident2 and ident2["sets"]["method"] == "exact" and "paper" not in ident2["sets"]
    # --tie-break accuracy given explicitly is the same identity as not given
    assert _run(edu, tmp_path, "run2", "--tie-break", "accuracy", "--resume") == 0


def test_a_changed_tie_break_is_refused_on_resume(edu, tmp_path, plan_only, capsys):
    assert _run(edu, tmp_path, "run", "--sets", "paper") == 0
    capsys.readouterr()
    assert _run(edu, tmp_path, "run", "--sets", "paper", "--tie-break", "first", "--resume") == 2
    assert "tie_break" in capsys.readouterr().err


def test_sets_paper_refused_for_a_kb_or_target_without_them(edu, tmp_path, plan_only, capsys):
    assert (
        main(
            [
                "evaluate",
                "--kb",
                "demo",
                "--n-targets",
                "1",
                "--methods",
                "ga",
                "--sets",
                "paper",
                "-o",
                str(tmp_path / "r1"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--sets paper: the KB" in err[0] and "has no paper sets" in err[0]
    assert not (tmp_path / "r1").exists()
    (tmp_path / "t.txt").write_text("214\n0\n")
    assert (
        main(
            [
                "evaluate",
                "--kb",
                str(edu),
                "--targets-file",
                str(tmp_path / "t.txt"),
                "--methods",
                "ga",
                "--sets",
                "paper",
                "-o",
                str(tmp_path / "r2"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "has no sets for target 0" in err[0]
    assert not (tmp_path / "r2").exists()


def test_config_resolves_tie_break_and_refuses_unknown_values():
    assert EvaluateConfig().check().tie_break == "accuracy"
    assert EvaluateConfig(tie_break="first", sets="paper").check().tie_break == "first"
    from dukb import InputError

    with pytest.raises(InputError, match="--tie-break must be accuracy or first"):
        EvaluateConfig(tie_break="last").check()
    with pytest.raises(InputError, match="--sets must be exact, random or paper"):
        EvaluateConfig(sets="papers").check()


def test_a_tampered_sets_json_of_a_paper_run_is_rewritten_from_the_kb(edu, tmp_path, plan_only):
    assert _run(edu, tmp_path, "run", "--sets", "paper") == 0
    path = tmp_path / "run" / "sets.json"
    original = json.loads(path.read_text())
    doc = json.loads(path.read_text())
    doc["targets"]["214"]["sets"] = [[214]]
    path.write_text(json.dumps(doc))
    assert _run(edu, tmp_path, "run", "--sets", "paper", "--resume") == 0
    assert json.loads(path.read_text()) == original
