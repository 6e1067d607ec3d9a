"""Type checking: mypy passes on dukb.kb and dukb.solver with the strict settings of pyproject's [tool.mypy]
(every function annotated, bodies checked). Skipped when mypy is not installed (it is in the ``test`` extra)."""

from __future__ import annotations

import subprocess
import sys
import tomllib

import pytest

from conftest import REPO_ROOT


def mypy_config() -> dict:
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]


def test_mypy_checks_kb_and_solver_strictly():
    config = mypy_config()
    assert {"dukb/kb", "dukb/solver"} <= set(config["files"])
    strict = [o for o in config["overrides"] if {"dukb.kb.*", "dukb.solver.*"} <= set(o["module"])]
    assert strict and strict[0]["disallow_untyped_defs"] and strict[0]["check_untyped_defs"], strict


def test_mypy_passes_on_kb_and_solver():
    pytest.importorskip("mypy", reason="mypy is not installed (pip install -e '.[test]')")
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "pyproject.toml"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "Success" in proc.stdout
