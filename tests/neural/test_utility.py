"""``dukb evaluate --utility TASKS --utility-include DIR``: utility through lm-eval (dukb.neural.utility) on the tiny
model, with local task files (tests/data/lmeval: a multiple-choice, a generation and a rolling log-likelihood task
over JSON-lines files): the scores of one model, the rows' `utility` field, the report's Recall@U≥0.95FT (Wu et al.
2025, Table 7), and the refusals (an unknown task, a task without its data, lm-eval not installed, a resume without
--utility), each before any training."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DEVICE, REPO_ROOT

pytest.importorskip("lm_eval")
from dukb.cli.main import main  # noqa: E402

pytestmark = pytest.mark.slow

#: relative to the repository root, the working directory of these tests (the task files' data_files are relative)
INCLUDE = "tests/data/lmeval"
BASE = [
    "evaluate",
    "--kb",
    "demo",
    "--n-targets",
    "1",
    "--methods",
    "ga",
    "--metrics",
    "recall",
    "--device",
    DEVICE,
    "--grid",
    "ga=1,4",
]
UTILITY = ["--utility", "dukb_mc,dukb_gen,dukb_ppl", "--utility-include", INCLUDE]
#: row fields that differ between two runs of the same rows (timings, the worker's id)
VOLATILE = {"seconds_unlearn", "seconds_probe", "worker", "utility"}


def _lines(name: str) -> int:
    return len((REPO_ROOT / INCLUDE / name).read_text().splitlines())


def _rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module", autouse=True)
def at_repo_root():
    """The task files name their data relative to the repository root."""
    before = os.getcwd()
    os.chdir(REPO_ROOT)
    yield
    os.chdir(before)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("utility") / "run"
    assert main([*BASE, *UTILITY, "-o", str(out)]) == 0
    return out


def test_measure_utility_scores_the_model_and_leaves_its_state(tmp_path):
    import lm_eval
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from dukb.neural.lmeval import measure_utility
    from dukb.neural.modelbuild import build_tiny_model

    path = build_tiny_model(["Question: Who is the father of Anna? Answer: Bob Carol Dave Eve Frank"], tmp_path / "m")
    model, tok = AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    model.train()
    random.seed(7), torch.manual_seed(7)
    res = measure_utility(model, tok, ["dukb_mc", "dukb_gen"], include=INCLUDE)
    after = (random.random(), torch.rand(1).item())
    random.seed(7), torch.manual_seed(7)
    assert after == (random.random(), torch.rand(1).item())  # lm-eval's seeding did not leak into the caller's
    assert model.training and all(m.training for m in model.modules())  # HFLM's eval() undone
    assert res["lm_eval"] == lm_eval.__version__ and set(res["tasks"]) == {"dukb_mc", "dukb_gen"}
    mc, gen = res["tasks"]["dukb_mc"], res["tasks"]["dukb_gen"]
    assert (mc["version"], mc["n_shot"], mc["n_samples"]) == (1.0, 0, _lines("dukb_mc.jsonl"))
    assert (gen["version"], gen["n_shot"], gen["n_samples"]) == (2.0, 0, _lines("dukb_gen.jsonl"))
    for value in (mc["acc"], mc["acc_norm"], gen["exact_match"]):
        assert 0.0 <= value <= 1.0
    assert mc["acc_stderr"] > 0 and list(mc)[:2] == ["acc", "acc_stderr"]
    assert res["higher_is_better"]["dukb_mc"] == {"acc": True, "acc_norm": True}


def test_every_row_holds_the_utility_of_its_own_unlearned_model(run):
    rec = json.loads((run / "utility.json").read_text())
    assert rec["tasks"] == ["dukb_mc", "dukb_gen", "dukb_ppl"] and rec["include"] == INCLUDE
    ft = rec["finetuned"]["tasks"]
    rows = {r["setting"]["steps"]: r for r in _rows(run)}
    assert set(rows) == {1, 4}
    for r in rows.values():
        assert set(r["utility"]) == set(ft)
        assert r["utility"]["dukb_mc"]["n_samples"] == _lines("dukb_mc.jsonl")
        assert 0 <= r["utility"]["dukb_mc"]["acc"] <= 1 and 0 <= r["utility"]["dukb_gen"]["exact_match"] <= 1
    # the reference schedule's first step has learning rate 0 (its warm-up): the weights are the finetuned ones
    assert rows[1]["utility"]["dukb_ppl"]["bits_per_byte"] == ft["dukb_ppl"]["bits_per_byte"]
    assert rows[4]["utility"]["dukb_ppl"]["bits_per_byte"] != ft["dukb_ppl"]["bits_per_byte"]
    identity = json.loads((run / "config.json").read_text())["identity"]
    assert identity["utility"] == ["dukb_mc", "dukb_gen", "dukb_ppl"] and identity["utility_include"] == INCLUDE


def test_rows_other_fields_equal_a_run_without_utility(run, tmp_path):
    out = tmp_path / "plain"
    assert main([*BASE, "--finetuned", str(run / "finetuned"), "-o", str(out)]) == 0
    plain = _rows(out)
    assert all("utility" not in r for r in plain)
    assert "utility" not in json.loads((out / "config.json").read_text())["identity"]
    strip = [{k: v for k, v in r.items() if k not in VOLATILE} for r in _rows(run)]
    assert strip == [{k: v for k, v in r.items() if k not in VOLATILE} for r in plain]


def test_report_gives_recall_at_utility_per_task(run):
    rec = json.loads((run / "utility.json").read_text())
    rows = _rows(run)
    report = (run / "report.md").read_text()
    assert "## Utility (lm-eval): recall at utility ≥ 0.95 × the finetuned model's" in report
    head = next(line for line in report.splitlines() if line.startswith("| method | Recall@U"))
    assert "dukb_mc" in head and "dukb_gen" in head and "dukb_ppl" not in head  # perplexity: lower is better
    bar = 0.95 * rec["finetuned"]["tasks"]["dukb_mc"]["acc"]
    ok = [r["recall"] for r in rows if r["utility"]["dukb_mc"]["acc"] >= bar]
    expect = f"{max(ok, default=0.0):.2f} (n=1, none {0 if ok else 1})"  # one target: no std
    cells = next(line for line in report.splitlines() if line.startswith("| GA |")).split(" | ")
    assert cells[1] == expect


def test_a_resume_without_utility_is_refused(run, capsys):
    assert main([*BASE, "-o", str(run), "--resume"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("dukb: error:") and "utility" in err


@pytest.mark.parametrize(
    ("task", "says"),
    [
        ("nosuch", "dukb: error: utility task 'nosuch' is not a task, group or tag of lm-eval"),
        ("dukb_no_data", "dukb: error: utility task 'dukb_no_data' cannot be loaded by lm-eval: "),
    ],
)
def test_a_task_that_cannot_load_is_refused_before_training(task, says, tmp_path, capsys):
    out = tmp_path / "run"
    assert main([*BASE, "--utility", task, "--utility-include", INCLUDE, "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(says), err
    assert not out.exists()  # nothing ran: no run directory, no rows


def test_include_without_tasks_is_refused(tmp_path, capsys):
    assert main([*BASE, "--utility-include", INCLUDE, "-o", str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err.strip() == "dukb: error: --utility-include needs --utility TASKS (the tasks to run)"


BLOCKER = """
import sys, importlib.abc
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "lm_eval":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Refuse())
from dukb.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def test_without_lm_eval_utility_is_refused_in_one_line(tmp_path):
    res = subprocess.run(
        [sys.executable, "-c", BLOCKER, *BASE, *UTILITY, "-o", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "OMP_NUM_THREADS": "1"},
    )
    assert res.returncode == 2 and res.stderr.strip() == (
        "dukb: error: --utility needs the utility extra, which is not installed (no module 'lm_eval'): "
        "pip install 'dukb[utility]'"
    ), res.stderr
    assert not (tmp_path / "run").exists()
