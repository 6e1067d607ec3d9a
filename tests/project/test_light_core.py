"""The light core (issue 42): `pip install dukb` without extras runs every command that needs no model; a neural
command without the `neural` extra says in one line what to install (exit 2), with no traceback.

The missing extra is simulated in a child interpreter whose import system refuses the extra's packages (a
sys.meta_path finder), so the test runs in the full test environment. The packages a bare install lacks are read
from pyproject.toml, independently of dukb.cli.main.EXTRA_MODULES (which the test also checks against it)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib

import pytest

from conftest import REPO_ROOT

PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
#: import names of distributions whose import name differs from the distribution's
IMPORT_NAME = {"rouge-score": "rouge_score"}


def _import_names(requirements: list[str]) -> set[str]:
    names = {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].strip() for r in requirements}
    return {IMPORT_NAME.get(n, n.replace("-", "_")) for n in names if not n.startswith("dukb")}


def _requirement_closure(requirements: list[str]) -> set[str]:
    """Distribution names a bare install of ``requirements`` brings (their own requirements, transitively; extras
    and environment markers of the requirements' requirements left out), read from the installed metadata."""
    from importlib import metadata

    seen: set[str] = set()
    todo = [re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].strip().lower() for r in requirements]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            reqs = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        todo += [re.split(r"[<>=!~\[; (]", r, maxsplit=1)[0].strip().lower() for r in reqs if ";" not in r]
    return seen


#: what a bare `pip install dukb` lacks: the neural extra's packages (and the test-only ones), less what the core's
#: own requirements bring (ortools requires pandas, for one)
NEURAL = sorted(
    (_import_names(PYPROJECT["project"]["optional-dependencies"]["neural"]) | {"networkx", "tensorboard"})
    - _import_names(sorted(_requirement_closure(PYPROJECT["project"]["dependencies"])))
)

BLOCKER = """
import sys, importlib.abc
BLOCKED = set(sys.argv[1].split(","))
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Refuse())
from dukb.cli.main import main
sys.exit(main(sys.argv[2:]))
"""


def dukb_without_extras(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", BLOCKER, ",".join(NEURAL), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
    )


def test_extra_modules_match_pyproject():
    from dukb.cli.main import EXTRA_MODULES

    assert set(EXTRA_MODULES["neural"]) == _import_names(PYPROJECT["project"]["optional-dependencies"]["neural"])
    core = _import_names(PYPROJECT["project"]["dependencies"])
    assert core == {"clingo", "ortools", "numpy", "typer", "rich", "pyyaml", "pyarrow"}
    assert not core & set(NEURAL) and {"torch", "transformers", "peft", "accelerate"} <= set(NEURAL)


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["validate", "--kb", "demo"],
        ["closure", "--kb", "demo"],
        ["mdus", "--kb", "demo", "--target-id", "6"],
        ["mdus", "--kb", "demo", "--target-id", "6", "--method", "minimum"],
        ["probes", "--kb", "demo"],
        ["evaluate", "--help"],
    ],
    ids=lambda a: " ".join(a),
)
def test_core_commands_run_without_the_neural_extra(args, tmp_path):
    res = dukb_without_extras(*args, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() and "Traceback" not in res.stderr


def test_generate_runs_without_the_neural_extra(tmp_path):
    res = dukb_without_extras("generate", "--people", "20", "-o", str(tmp_path / "kb"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "kb" / "relationships.csv").is_file()


@pytest.mark.parametrize(
    "args",
    [
        ["evaluate", "--kb", "demo", "-o", "run"],
        ["finetune", "--kb", "demo", "-o", "model"],
        ["muse", "--kb", "demo", "-o", "run"],
    ],
    ids=lambda a: a[0],
)
def test_a_neural_command_says_which_extra_to_install(args, tmp_path):
    res = dukb_without_extras(*args, cwd=tmp_path)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1, res.stderr
    assert lines[0].startswith(f"dukb: error: `dukb {args[0]}` needs the neural extra")
    assert "pip install 'dukb[neural]'" in lines[0]


#: what a light path must not load (issue 40, item 5: the lazy boundary is the CLI's command modules)
HEAVY = ("torch", "transformers", "matplotlib", "pandas")

LIGHT_PATHS = """
import contextlib, io, json, sys
from dukb.cli.main import app, main
import typer
after = {"import dukb.cli.main": sorted(m for m in HEAVY if m in sys.modules)}
group = typer.main.get_command(app)
runs = [["--help"]] + [[name, "--help"] for name in sorted(group.commands)] + [
    ["closure", "--kb", "demo"], ["mdus", "--kb", "demo", "--target-id", "6"], ["probes", "--kb", "demo"],
    ["validate", "--kb", "demo"]]
for args in runs:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = main(args)
    after[" ".join(args)] = [code] + sorted(m for m in HEAVY if m in sys.modules)
print(json.dumps(after))
"""


def test_help_and_symbolic_commands_load_no_model_library(tmp_path):
    """`import dukb.cli.main`, `dukb --help`, every `dukb CMD --help` and the symbolic commands (closure, mdus, probes,
    validate), run one after the other in one fresh interpreter, exit 0 and load none of torch, transformers,
    matplotlib and pandas: function-local imports of them sit behind the CLI's command modules and in the modules
    only those commands reach (pyproject.toml, [tool.ruff.lint.flake8-tidy-imports])."""
    code = f"HEAVY = {HEAVY!r}\n" + LIGHT_PATHS
    res = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
    )
    assert res.returncode == 0, res.stderr
    after = json.loads(res.stdout.strip().splitlines()[-1])
    assert after.pop("import dukb.cli.main") == []
    assert len(after) > 20 and "evaluate --help" in after and "closure --kb demo" in after
    loaded = {run: got for run, got in after.items() if got != [0]}
    assert not loaded, f"exit code and model libraries loaded, by run: {loaded}"
