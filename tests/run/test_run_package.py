"""The run package (dukb/neural/run/) knows no protocol: no identifier or string of its modules names one, its
modules stay under the size limit, and each protocol hands its rows (row key, row model, plan check) to it through
its ProtocolInfo (issue 40, item 2)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import dukb.neural.run as run_pkg
from dukb import InputError
from dukb.neural.protocols import PROTOCOLS
from dukb.neural.run.journal import ResultsFile
from dukb.neural.run.rows import RowSchema

#: every registered protocol, and `dukb unlearn` (the evaluate protocol with one target and one method)
PROTOCOL_NAMES = (*PROTOCOLS, "unlearn")
#: the run layer's modules (issue 40, item 2): identity, lock, log, journal, units, provenance, probe cache, RunDir
RUN_MODULES = {"identity", "lock", "log", "journal", "units", "provenance", "probecache", "files"}
_WORD = re.compile(r"(?<![A-Za-z])(" + "|".join(PROTOCOL_NAMES) + r")(?![A-Za-z])", re.I)


def protocol_mentions(source: str) -> list[str]:
    """Each identifier (a name, an attribute, a definition, an argument, an import) whose ``_``-separated parts
    include a protocol name, and each string (docstrings too) that holds one as a word: ``"line: text"``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        names = []
        if isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, ast.Attribute):
            names = [node.attr]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, ast.arg):
            names = [node.arg]
        elif isinstance(node, ast.keyword) and node.arg:
            names = [node.arg]
        elif isinstance(node, ast.alias):
            names = [node.name, node.asname or ""]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _WORD.search(node.value):
            out.append(f"{node.lineno}: string {_WORD.search(node.value).group(0)!r}")
        for n in names:
            if any(part.lower() in PROTOCOL_NAMES for part in re.split(r"[_.]", n)):
                out.append(f"{node.lineno}: identifier {n}")
    return out


def run_modules() -> list[Path]:
    """Every module of the run package, its subfolders included."""
    return sorted(Path(run_pkg.__file__).parent.rglob("*.py"))


def test_the_checks_read_the_whole_run_layer_and_every_protocol():
    """The parametrized checks below cannot pass on nothing: they read every module of the run layer, and the names
    they look for are the registry's protocols (a new one is looked for at once) and the unlearn command."""
    assert RUN_MODULES <= {p.stem for p in run_modules()}
    assert {"evaluate", "muse", "rwku", "control", "restor", "unlearn"} <= set(PROTOCOL_NAMES)


def test_the_check_finds_a_protocol_named_anywhere():
    """The check itself: an identifier, an import, an argument and a docstring naming a protocol are each found; the
    English words around them (restore, controls) are not."""
    assert protocol_mentions("from dukb.neural.protocols.muse import x\n") != []
    assert protocol_mentions("def f(evaluate_key): pass\n") != []
    assert protocol_mentions("KEYS = {'a': rwku_row_key}\n") != []
    assert protocol_mentions('def f():\n    """Reads a restor row."""\n') != []
    assert protocol_mentions("x = 'Control'\n") != []
    assert protocol_mentions("FIELDS = ('worker', 'seconds_unlearn')\n") != []  # a protocol's row field
    assert protocol_mentions('"""restore it; the controls of a lock"""\nrestored = 1\n') == []


@pytest.mark.parametrize("path", run_modules(), ids=lambda p: p.name)
def test_no_module_of_the_run_layer_names_a_protocol(path):
    assert protocol_mentions(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("path", run_modules(), ids=lambda p: p.name)
def test_each_module_of_the_run_layer_stays_under_800_lines(path):
    assert len(path.read_text(encoding="utf-8").splitlines()) < 800


def test_every_protocol_declares_its_rows_and_the_journal_has_no_default_key(tmp_path):
    """ProtocolInfo carries each protocol's rows; the journal takes the key as an argument (no protocol's key is
    its silent default)."""
    for info in PROTOCOLS.values():
        schema = info.load("rows")
        assert isinstance(schema, RowSchema) and callable(schema.key) and schema.plan is not None, info.name
        assert schema.check()({}) is not None  # an empty object is no row of any protocol
    with pytest.raises(TypeError):
        ResultsFile(tmp_path / "results.jsonl")  # noqa - the key is required


def test_one_atomic_writer_kept_in_kb_io(tmp_path, monkeypatch):
    """write_bytes_atomic is kb.io.atomic_output behind the run's link check (issue 39: one all-or-nothing writer,
    in the lowest layer): a failure inside the write leaves the old file whole and no temporary file."""
    from dukb.kb import io as kb_io
    from dukb.neural.run import files as run_files

    assert not any("os.replace(" in p.read_text(encoding="utf-8") for p in run_modules())
    used = []
    real = kb_io.atomic_output
    monkeypatch.setattr(run_files, "atomic_output", lambda *a, **k: used.append(a) or real(*a, **k))
    target = tmp_path / "x.json"
    run_files.write_json_atomic(target, {"a": 1})
    assert used and target.read_text() == '{\n  "a": 1\n}'

    monkeypatch.setattr(run_files, "atomic_output", real)
    with pytest.raises(InputError, match="No space left"):  # a full disk mid-write
        with real(target, binary=True) as fh:
            fh.write(b"partial")
            raise OSError(28, "No space left on device")
    assert target.read_text() == '{\n  "a": 1\n}' and [p.name for p in tmp_path.iterdir()] == ["x.json"]
