"""Shared test fixtures: where the EDU-RELAT benchmark lies (with a clean skip when it is absent) and a builder of
small validated KBs.

EDU-RELAT (Wu et al. 2025) is read in place from ``../shared/edu-relat`` relative to the repository root; it is
never copied into the repository. Tests that need it ask for the ``edu_relat_dir`` fixture (or call
:func:`require_edu_relat`) and are skipped when it is missing.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

import dukb
from dukb.kb import KB, BioFact, Fact, Person, check_kb

#: The device the neural tests run on: ``cpu`` unless ``python -m pytest --device cuda`` (or ``mps``) asks for
#: another. Test modules read it at collection (``from conftest import DEVICE``), after :func:`pytest_configure`
#: set it (tests that start subprocesses pass ``--device DEVICE`` on their command lines).
DEVICE = "cpu"

#: The repository root (the folder holding pyproject.toml).
REPO_ROOT = Path(__file__).resolve().parent.parent
#: Where the EDU-RELAT benchmark is expected: ../shared/edu-relat relative to the repository root.
EDU_RELAT_DIR = REPO_ROOT.parent / "shared" / "edu-relat"


#: The longest string or bytes parameter pytest writes into a test's id as it is; a longer one is named by its
#: length and a digest (see :func:`pytest_make_parametrize_id`).
MAX_ID_CHARS = 40


def pytest_make_parametrize_id(config, val, argname):
    """Short ids for long string parameters, whatever pytest's version.

    Some pytest versions write a string parameter into the test id as it is; a parameter of 131,073 characters
    then becomes part of ``PYTEST_CURRENT_TEST``, which every child process inherits, and Linux refuses to start
    a process with an environment string over 128 KiB (``E2BIG``), so tests that run ``dukb`` in a subprocess
    failed on CI only. A string or bytes value over :data:`MAX_ID_CHARS` characters is named
    ``ARGNAME-<length>-<sha1 prefix>``; anything else keeps pytest's own id (None).
    """
    import hashlib

    if isinstance(val, (str, bytes)) and len(val) > MAX_ID_CHARS:
        data = val.encode("utf-8", "surrogatepass") if isinstance(val, str) else val
        return f"{argname}-{len(val)}-{hashlib.sha1(data).hexdigest()[:8]}"
    return None


def patch_everywhere(monkeypatch, module, name: str, value) -> None:
    """``monkeypatch.setattr(module, name, value)``, and the same in every dukb module that imports ``name`` from
    ``module`` (``from module import name`` binds the object when the importer is imported, so patching ``module``
    alone would not reach it). The importers are found in the source and imported first, so that each binding is
    patched and restored after the test (none binds the patched value for good); a module that imports the object
    from elsewhere (where it is defined, for one) keeps it."""
    root = Path(dukb.__file__).parent
    statement = re.compile(rf"^\s*from {re.escape(module.__name__)} import (\([^)]*\)|[^\n]*)", re.M)
    importers = []
    for f in sorted(root.rglob("*.py")):
        if any(re.search(rf"\b{re.escape(name)}\b", m) for m in statement.findall(f.read_text(encoding="utf-8"))):
            rel = f.relative_to(root.parent).with_suffix("").parts
            importers.append(importlib.import_module(".".join(rel[:-1] if rel[-1] == "__init__" else rel)))
    original = getattr(module, name)
    monkeypatch.setattr(module, name, value)
    for mod in importers:
        if mod.__dict__.get(name) is original:
            monkeypatch.setattr(mod, name, value)


def edu_relat_available(path: Path = EDU_RELAT_DIR) -> bool:
    """True when ``path`` holds an EDU-RELAT KB directory (people.csv and relationships.csv)."""
    return (path / "people.csv").is_file() and (path / "relationships.csv").is_file()


def require_edu_relat(path: Path = EDU_RELAT_DIR) -> Path:
    """Return the EDU-RELAT directory, or skip the calling test (pytest.skip) when it is absent."""
    if not edu_relat_available(path):
        pytest.skip(f"EDU-RELAT benchmark not found at {path}")
    return path


def edu_relat_targets(path: Path = EDU_RELAT_DIR) -> list[int]:
    """The 55 target fact_ids of targets.txt (comments and blank lines skipped); skips the test if absent."""
    file = require_edu_relat(path) / "targets.txt"
    if not file.is_file():
        pytest.skip(f"{file} not found")
    return [
        int(ln) for ln in file.read_text(encoding="utf-8").split("\n") if ln.strip() and not ln.lstrip().startswith("#")
    ]


def build_kb(genders: dict[str, str], facts, biographies=(), validate: bool = True) -> KB:
    """Build a small in-memory KB (for tests).

    Args:
        genders: person name -> "male" | "female", in the order people should have.
        facts: either a list of ``(subject, relation, object)`` triples (fact_ids 0, 1, ... in order) or a dict
            fact_id -> triple (file order = the dict's order).
        biographies: ``(subject, attribute, value)`` triples, fact_ids 0, 1, ...
        validate: run :func:`dukb.kb.check_kb` (raises KBError on a malformed KB).

    Returns:
        The :class:`dukb.kb.KB`.
    """
    items = facts.items() if isinstance(facts, dict) else enumerate(facts)
    kb = KB(
        {n: Person(n, g) for n, g in genders.items()},
        [Fact(i, s, r, o) for i, (s, r, o) in items],
        [BioFact(i, s, a, v) for i, (s, a, v) in enumerate(biographies)],
    )
    if validate:
        check_kb(kb)
    return kb


@pytest.fixture(scope="session")
def edu_relat_dir() -> Path:
    """The EDU-RELAT directory; the test is skipped when it is absent."""
    return require_edu_relat()


@pytest.fixture(scope="session")
def kb_builder():
    """:func:`build_kb`, as a fixture (session scope, so it is usable inside hypothesis tests)."""
    return build_kb


@pytest.fixture(scope="session")
def edu_relat_target_ids(edu_relat_dir) -> list[int]:
    """The 55 target fact_ids of EDU-RELAT's targets.txt, in order; skipped when absent."""
    return edu_relat_targets(edu_relat_dir)


#: Test modules that finetune, unlearn or load a model (the neural path end to end, minutes on CPU): every test in
#: them is marked ``slow``, so ``python -m pytest -q -m "not slow"`` runs the rest (logic, KB, inputs, CLI, reports).
#: Module basenames (unique across tests/'s folders; tests/project/test_suite_layout.py checks that each exists).
MODEL_MODULES = frozenset(
    {
        "test_attacks",
        "test_distributed",
        "test_finetuning",
        "test_heldout_recall_e2e",
        "test_losses",
        "test_model_files",
        "test_neural_e2e",
        "test_real_model",
        "test_registry_and_training",  # tests/neural
        "test_run_lock_and_journal",
        "test_work_units",  # tests/run
        "test_control",
        "test_muse",
        "test_no_finetune",
        "test_restor",
        "test_rwku",
        "test_shared_run_options",  # tests/protocols
        "test_packaging",  # tests/project
    }
)


def pytest_collection_modifyitems(config, items):
    """Mark every test of :data:`MODEL_MODULES` ``slow`` (see pyproject's markers)."""
    for item in items:
        module = getattr(item, "module", None)  # a doctest item (dukb/kb, dukb/solver) has none
        if module is not None and module.__name__.rsplit(".", 1)[-1] in MODEL_MODULES:
            item.add_marker(pytest.mark.slow)


def pytest_addoption(parser):
    """``--device``: run the neural tests (finetuning, unlearning, probing) on this torch device."""
    parser.addoption(
        "--device",
        default="cpu",
        choices=("cpu", "cuda", "mps"),
        help="torch device of the neural tests (default cpu; cuda runs the CUDA path on a GPU machine)",
    )


def pytest_configure(config):
    """Set :data:`DEVICE` from ``--device`` before the test modules are collected."""
    global DEVICE
    DEVICE = config.getoption("--device")
