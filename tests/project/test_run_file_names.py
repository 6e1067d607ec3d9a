"""A typed ``RunDir`` owns every file name of a run directory (issue 40, item 2): no module builds the path of the
run's ``config.json`` or ``results.jsonl`` (or a shard) from the name; they use :class:`dukb.neural.run.files.RunDir`
or its constants. Messages, help texts and docstrings may name the files for the user.

The model modules read a Hugging Face model folder's own ``config.json`` (another file of the same name): they are
the exceptions below.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "dukb"
#: the module that spells the names (the constants), and the modules that read a model folder's config.json
OWNER = "neural/run/files.py"
MODEL_FOLDER_MODULES = {"neural/zoo.py", "neural/modelcheck.py", "neural/models.py"}
RUN_FILES = ("config.json", "results.jsonl")


def _is_name(value: object) -> bool:
    """Whether a constant is a run file's name (the whole string, or a path ending in one)."""
    return isinstance(value, str) and any(
        value == n or value.endswith("/" + n) or value.startswith("results.rank") for n in RUN_FILES
    )


def _spelled(root: Path = PACKAGE) -> list[str]:
    """``path:line: text`` for every string constant that is a run file's name (not text that mentions one): a
    path built as ``run / "results.jsonl"``, a name passed or compared as a value."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel == OWNER:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and _is_name(node.value):
                if node.value == "config.json" and rel in MODEL_FOLDER_MODULES:
                    continue
                found.append(f"{rel}:{node.lineno}: {node.value!r}")
    return found


def test_only_the_run_files_module_spells_the_run_files():
    """Every other module reaches RUN_DIR/config.json, results.jsonl and the shards through RunDir."""
    assert not _spelled(), "spelled outside dukb/neural/run/files.py:\n" + "\n".join(_spelled())


def test_the_check_sees_a_spelled_name(tmp_path):
    """The check itself: a path built from results.jsonl is reported, a message that mentions it is not."""
    (tmp_path / "neural").mkdir()
    (tmp_path / "neural" / "x.py").write_text(
        '"""Reads results.jsonl."""\nP = RUN / "results.jsonl"\nM = "no results.jsonl"\n'
    )
    assert _spelled(tmp_path) == ["neural/x.py:2: 'results.jsonl'"]
