"""`dukb evaluate --compat eval-du` (issue 41, item 1): the preset resolves every component, an explicit option wins,
the components enter the run identity only when not dukb's, the benchmark's targets come from the imported
EDU-RELAT, and the preset is refused in one line on another KB without targets."""

from __future__ import annotations

import dataclasses

import pytest

from dukb import InputError
from dukb.neural.protocols.evaluate.config import EvaluateConfig, eval_du_targets_problem
from dukb.neural.protocols.evaluate.identity import component_identity

#: what the Eval-DU code computes, component by component: schedules, reinforcement, grids and rules
MINE = {
    "schedule": "reference",
    "reinforce": "reference",
    "family_grids": "paper",
    "whp_grid": "config",
    "rules": "family_paper_compat",
}
#: dukb's defaults of the same components
DUKB = {
    "schedule": "reference",
    "reinforce": "constant",
    "family_grids": "dukb",
    "whp_grid": "config",
    "rules": "family",
}
FIELDS = {f.name: f for f in dataclasses.fields(EvaluateConfig)}
#: the preset's other components: the paper's sets and tie-break (calculate_recall_and_acc.py), prompts, BOS and
#: judging (model_config.yaml, evaluate_util.py), written out independently of the config's table
ELSEWHERE = {"sets": "paper", "tie_break": "first", "prompt_format": "eval-du", "bos": "family", "judge": "generation"}


def test_without_a_preset_every_component_is_dukbs_and_the_identity_has_none():
    plan = EvaluateConfig().check()
    assert {k: getattr(plan, k) for k in DUKB} == DUKB and plan.compat is None and plan.targets is None
    assert component_identity(plan) == {}


def test_the_preset_resolves_every_component_and_the_benchmarks_targets(edu_relat_dir, edu_relat_target_ids):
    plan = EvaluateConfig(compat="eval-du", kb=str(edu_relat_dir)).check()
    assert {k: getattr(plan, k) for k in MINE} == MINE
    assert {k: getattr(plan, k) for k in ELSEWHERE} == ELSEWHERE
    assert plan.targets == edu_relat_target_ids and len(plan.targets) == 55
    assert EvaluateConfig.COMPAT["eval-du"] == {**MINE, **ELSEWHERE}
    record = dataclasses.asdict(plan)  # what config.json's record starts from (EvaluateProtocol._run_record)
    assert record["compat"] == "eval-du" and all(record[k] == v for k, v in {**MINE, **ELSEWHERE}.items())
    assert component_identity(plan) == {
        "compat": "eval-du",
        "reinforce": "reference",
        "family_grids": "paper",
        "tie_break": "first",
        "prompt_format": "eval-du",
        "bos": "family",
        "judge": "generation",
    }
    assert eval_du_targets_problem(plan) is None


def test_an_explicit_option_wins_over_the_preset(edu_relat_dir):
    plan = EvaluateConfig(
        compat="eval-du",
        kb=str(edu_relat_dir),
        reinforce="constant",
        rules="family",
        schedule="separate",
        whp_grid="notebook",
        targets=[267, 272],
    ).check()
    assert (plan.reinforce, plan.rules, plan.schedule, plan.whp_grid, plan.targets) == (
        "constant",
        "family",
        "separate",
        "notebook",
        [267, 272],
    )
    assert plan.family_grids == "paper"  # not given: the preset's
    assert component_identity(plan) == {
        "compat": "eval-du",
        "family_grids": "paper",
        "whp_grid": "notebook",
        "tie_break": "first",
        "prompt_format": "eval-du",
        "bos": "family",
        "judge": "generation",
    }


def test_each_component_alone_without_the_preset():
    plan = EvaluateConfig(reinforce="reference", family_grids="paper", whp_grid="notebook").check()
    assert (plan.reinforce, plan.family_grids, plan.whp_grid, plan.compat) == ("reference", "paper", "notebook", None)
    assert component_identity(plan) == {"reinforce": "reference", "family_grids": "paper", "whp_grid": "notebook"}


@pytest.mark.parametrize(
    "kw, msg",
    [
        ({"reinforce": "linear"}, "--reinforce must be one of constant, reference"),
        ({"family_grids": "papers"}, "--family-grids must be one of dukb, paper"),
        ({"whp_grid": "text"}, "--whp-grid must be one of config, notebook"),
        ({"compat": "evaldu"}, "unknown --compat 'evaldu'"),
    ],
)
def test_bad_component_values_are_refused(kw, msg):
    with pytest.raises(InputError, match=msg):
        EvaluateConfig(**kw).check()


def test_the_preset_needs_targets_on_another_kb(tmp_path):
    plan = EvaluateConfig(compat="eval-du", kb="demo").check()
    assert plan.targets is None and "--compat eval-du runs the benchmark's 55 targets" in eval_du_targets_problem(plan)
    assert eval_du_targets_problem(EvaluateConfig(compat="eval-du", kb="demo", targets=[0]).check()) is None
    assert eval_du_targets_problem(EvaluateConfig(kb="demo").check()) is None


def test_the_preset_is_refused_in_one_line_on_another_kb_without_targets(tmp_path, capsys):
    from dukb.cli.main import main

    capsys.readouterr()
    assert main(["evaluate", "--compat", "eval-du", "--kb", "demo", "-o", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert err.startswith(
        "dukb: error: --compat eval-du runs the benchmark's 55 targets: give --kb the imported EDU-RELAT"
    )
    assert not (tmp_path / "run" / "finetuned").exists()


def test_help_shows_the_preset_and_its_components(capsys, monkeypatch):
    from dukb.cli.main import main

    monkeypatch.setenv("COLUMNS", "200")
    capsys.readouterr()
    assert main(["evaluate", "--help"]) == 0
    lines = {ln.split()[1]: ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("│ --")}
    for flag in ("--compat", "--reinforce", "--family-grids", "--whp-grid", "--schedule", "--rules"):
        assert flag in lines, flag
    assert "eval-du" in lines["--compat"]
