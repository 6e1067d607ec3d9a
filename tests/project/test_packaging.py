"""The wheel (what `pip install .` installs) holds every module and data file of the tree, and the installed package
runs outside the checkout: `dukb unlearn` from a non-editable install (issue: integrity)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import REPO_ROOT


def _tracked_files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "dukb"], cwd=REPO_ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip("not a git checkout")
    return [f for f in out.stdout.splitlines() if (REPO_ROOT / f).is_file()]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    pytest.importorskip("setuptools")
    out = tmp_path_factory.mktemp("wheel")
    # a copy of the tracked tree, so the build leaves nothing in the checkout
    src = out / "src"
    for f in _tracked_files() + ["pyproject.toml", "README.md"]:
        (src / f).parent.mkdir(parents=True, exist_ok=True)
        (src / f).write_bytes((REPO_ROOT / f).read_bytes())
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", str(src), "-w", str(out)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    (whl,) = out.glob("dukb-*.whl")
    return whl


def test_wheel_holds_every_module_and_data_file(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    tracked = _tracked_files()
    assert any(f.startswith("dukb/neural/methods/") for f in tracked)
    missing = []
    for f in tracked:
        if f not in names:
            missing.append(f)
    assert not missing, f"not in the wheel: {missing}"
    assert "dukb/neural/methods/ga.py" in names and "dukb/data/rules/family.lp" in names


def test_non_editable_install_runs_unlearn(wheel, tmp_path):
    """Install the wheel into a bare folder and run `dukb unlearn` from there, away from the checkout."""
    target = tmp_path / "site"
    r = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", str(target), str(wheel)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(target), "OMP_NUM_THREADS": "1"}
    code = (
        "import sys, dukb, dukb.neural.methods as m; from dukb.cli.main import main; "
        "assert dukb.__file__.startswith(sys.argv[1]), dukb.__file__; "
        "assert m.__file__.startswith(sys.argv[1]); "
        "sys.exit(main(sys.argv[2:]))"
    )

    def dukb(*args):
        return subprocess.run(
            [sys.executable, "-c", code, str(target), *args],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )

    r = dukb("unlearn", "--help")
    assert r.returncode == 0, r.stderr
    assert "--method" in r.stdout
    r = dukb("finetune", "--kb", "demo", "-o", str(work / "model"), "--device", "cpu")
    assert r.returncode == 0, r.stderr
    r = dukb(
        "unlearn",
        "--kb",
        "demo",
        "--model",
        str(work / "model"),
        "--method",
        "ga",
        "--target-id",
        "6",
        "--grid",
        "1",
        "-o",
        str(work / "u"),
        "--device",
        "cpu",
    )
    assert r.returncode == 0, r.stderr
    assert (work / "u" / "results.jsonl").read_text().count("\n") == 1
