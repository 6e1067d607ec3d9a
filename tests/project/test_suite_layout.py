"""The test suite's layout: every test file lies in the folder of the layer it covers, no two share a basename, and
the slow list of tests/conftest.py names existing files.

pytest imports each test file under its basename (the default ``prepend`` import mode, no ``__init__.py``), so two
files of one name in two folders would clash, and tests/conftest.py's ``MODEL_MODULES`` keys on basenames.
"""

from __future__ import annotations

from collections import Counter

from conftest import MODEL_MODULES, REPO_ROOT

TESTS = REPO_ROOT / "tests"
#: kb, solver, neural, cli: the package's layers; run: the run directory (identity, lock, journal, units);
#: protocols: each protocol and the protocol skeleton; docs: README, docs pages, tutorials, doctests;
#: project: the repository as a whole (architecture, packaging, typing, this layout)
FOLDERS = {"kb", "solver", "neural", "run", "protocols", "cli", "docs", "project"}


def all_test_files():
    return sorted(TESTS.rglob("test_*.py"))


def test_every_test_file_lies_in_a_layer_folder():
    files = all_test_files()
    assert len(files) >= 60, files
    misplaced = [str(f.relative_to(TESTS)) for f in files if f.parent.parent != TESTS or f.parent.name not in FOLDERS]
    assert not misplaced, f"test files outside tests/{{{','.join(sorted(FOLDERS))}}}/: {misplaced}"
    assert not list(TESTS.rglob("__init__.py")), "tests/ is no package: its files are imported by basename"


def test_basenames_are_unique():
    counts = Counter(f.name for f in all_test_files())
    assert not [name for name, n in counts.items() if n > 1], counts.most_common(3)


def test_every_slow_module_is_a_test_file():
    names = {f.stem for f in all_test_files()}
    assert len(MODEL_MODULES) >= 10
    assert not sorted(MODEL_MODULES - names), "MODEL_MODULES names files that do not exist"
