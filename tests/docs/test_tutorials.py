"""The tutorials (docs/tutorials/*.md) are tested recipes (issue 38, item 8): each page runs here, in a scratch
folder of its own.

A page's fenced code blocks are taken in order:

- a block whose info string names a file (```` ```python title="my_method.py" ````) is written to that path;
- any other ``bash`` block runs with ``bash -euo pipefail``, and any other ``python`` block as a script, both in the
  scratch folder, with this interpreter's ``dukb`` and ``python`` first on PATH and the folder and dukb on
  PYTHONPATH; a non-zero exit fails the test;
- a block right after the comment ``<!-- not run: REASON -->`` is shown only (e.g. a command for a model this
  machine does not have); README-style checks (tests/docs/test_readme.py) still hold its flags to ``--help``.

A page with the comment ``<!-- test: slow -->`` trains a model and is marked slow. Every page must run at least one
block.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT

TUTORIALS = sorted((REPO_ROOT / "docs" / "tutorials").glob("*.md"))
#: the pages mkdocs.yml's nav lists under Tutorials (each must exist and run)
EXPECTED = ("own-model", "own-kb", "add-method", "add-metric", "add-attack", "add-protocol")

FENCE = re.compile(
    r"^(?P<indent>[ ]{0,4})```(?P<lang>[\w+-]*)(?P<info>[^\n]*)\n(?P<body>.*?)^(?P=indent)```[ ]*$", re.S | re.M
)
NOT_RUN = re.compile(r"<!--\s*not run:[^>]*-->\s*$")


def blocks(text: str) -> list[dict]:
    """The fenced blocks of a page: lang, title (the file it names, or None), body (indent removed), run (False
    after a ``<!-- not run: ... -->`` comment)."""
    out = []
    for m in FENCE.finditer(text):
        title = re.search(r'title="([^"]+)"', m.group("info"))
        indent = len(m.group("indent"))
        body = "".join(
            line[indent:] if line[:indent].isspace() else line for line in m.group("body").splitlines(keepends=True)
        )
        out.append(
            {
                "lang": m.group("lang"),
                "title": title.group(1) if title else None,
                "body": body,
                "run": not NOT_RUN.search(text[: m.start()].rstrip()),
            }
        )
    return out


def _env(folder: Path) -> dict:
    import dukb

    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    roots = [str(folder), str(Path(dukb.__file__).resolve().parent.parent)]
    env["PYTHONPATH"] = os.pathsep.join(roots + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.setdefault("OMP_NUM_THREADS", "1")
    env["COLUMNS"] = "120"
    return env


def run_page(page: Path, folder: Path) -> int:
    """Run one tutorial in ``folder``; returns the number of blocks run.

    Raises:
        AssertionError: a block failed (its output is in the message).
    """
    env = _env(folder)
    ran = 0
    for i, b in enumerate(blocks(page.read_text(encoding="utf-8"))):
        if b["title"]:
            path = folder / b["title"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(b["body"], encoding="utf-8")
            continue
        if not b["run"] or b["lang"] not in ("bash", "python"):
            continue
        if b["lang"] == "bash":
            cmd = ["bash", "-euo", "pipefail", "-c", b["body"]]
        else:
            script = folder / f"_block_{i}.py"
            script.write_text(b["body"], encoding="utf-8")
            cmd = [sys.executable, script.name]
        proc = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, (
            f"{page.name}, block {i + 1} ({b['lang']}) exited with {proc.returncode}:\n"
            f"{b['body']}\n--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n"
            f"{proc.stderr[-3000:]}"
        )
        ran += 1
    return ran


def _params():
    out = []
    for page in TUTORIALS:
        slow = "<!-- test: slow -->" in page.read_text(encoding="utf-8")
        out.append(pytest.param(page, id=page.stem, marks=[pytest.mark.slow] if slow else []))
    return out


def test_every_tutorial_of_the_nav_is_here():
    assert {p.stem for p in TUTORIALS} >= set(EXPECTED)
    nav = (REPO_ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for name in EXPECTED:
        assert f"tutorials/{name}.md" in nav


def test_the_block_parser():
    """Titled blocks are files, a not-run comment skips the next block only, indented blocks (in a list) count."""
    text = (
        '```text title="a/b.csv"\nx,y\n```\n\n<!-- not run: needs a GPU -->\n```bash\nexit 1\n```\n\n'
        "1. step\n\n    ```python\n    print(1)\n    ```\n"
    )
    got = blocks(text)
    assert [(b["lang"], b["title"], b["run"]) for b in got] == [
        ("text", "a/b.csv", True),
        ("bash", None, False),
        ("python", None, True),
    ]
    assert got[0]["body"] == "x,y\n" and got[2]["body"] == "print(1)\n"


def test_a_failing_block_fails(tmp_path):
    page = tmp_path / "t.md"
    page.write_text("```bash\necho hi\n```\n\n```bash\nfalse\n```\n", encoding="utf-8")
    with pytest.raises(AssertionError, match="block 2"):
        run_page(page, tmp_path)


@pytest.mark.parametrize("page", _params())
def test_tutorial_runs(page, tmp_path):
    assert run_page(page, tmp_path) >= 1, f"{page.name} runs no block"
