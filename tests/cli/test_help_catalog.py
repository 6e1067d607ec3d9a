"""The light CLI catalog (issue: one protocol skeleton, item 5): command help comes from names, summaries and grids
that need no torch (:mod:`dukb.neural.catalog`), so the modules that use torch import it at the top and the CLI
imports none of them at start-up."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT

ROOT = REPO_ROOT
#: modules that torch-free paths (``dukb report``, the CLI's start, config checks) import and that use torch in one
#: or two functions only: they keep ``import torch`` inside those functions
LAZY_TORCH = {"dukb/neural/runs.py": "run records: device and thread info",
              "dukb/neural/distributed.py": "process-group helpers the CLI calls before any model",
              "dukb/neural/data.py": "QA items for reports and metrics; only encode_qa/pad_rows make tensors",
              "dukb/neural/bounds.py": "option ranges the CLI checks at parse time; only --device asks torch what it sees"}


def _torch_imports(path: Path) -> tuple[bool, list[int]]:
    """(imports torch at module level, lines of function-level torch imports)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = any(isinstance(n, ast.Import) and any(a.name == "torch" or a.name.startswith("torch.") for a in n.names)
              for n in tree.body)
    inner = []
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for n in ast.walk(fn):
                if isinstance(n, ast.Import) and any(a.name == "torch" or a.name.startswith("torch.")
                                                     for a in n.names):
                    inner.append(n.lineno)
                if isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "torch":
                    inner.append(n.lineno)
    return top, sorted(set(inner))


def test_the_catalog_is_the_registries():
    """The committed catalog equals what the live registries give; `python -m dukb.neural.catalog_build` regenerates it
    after a registry change (this test names the command)."""
    pytest.importorskip("torch")
    from dukb.neural import catalog, catalog_build
    from dukb.neural._catalog import CATALOG

    live = catalog_build.build()
    assert CATALOG == live, "the catalog is stale: run `python -m dukb.neural.catalog_build`"
    assert (ROOT / "dukb" / "neural" / "_catalog.py").read_text(encoding="utf-8") == catalog_build.source_text(live)
    from dukb.neural.methods import DOCUMENT_METHODS, METHODS, PRESETS, methods_help
    from dukb.neural.restor import RESTOR_METHODS

    assert catalog.method_names() == list(METHODS) and catalog.preset_names() == list(PRESETS)
    assert catalog.document_methods() == list(DOCUMENT_METHODS) == list(RESTOR_METHODS)
    assert methods_help() == catalog.methods_help() and all(n in methods_help() for n in METHODS)


def test_the_cli_starts_without_torch_or_any_torch_module():
    """A fresh `import dukb.cli.main` (what every command, `--help` included, does first) loads neither torch nor
    any dukb module that imports torch at the top, nor a registry of methods, metrics or attacks."""
    code = ("import sys, json, dukb.cli.main\n"
            "print(json.dumps({'torch': 'torch' in sys.modules, 'transformers': 'transformers' in sys.modules,\n"
            "    'mods': sorted((n, getattr(m, '__file__', None)) for n, m in sys.modules.items()\n"
            "                   if n.startswith('dukb.') and getattr(m, '__file__', None))}))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert not out["torch"] and not out["transformers"]
    loaded = {n: Path(f) for n, f in out["mods"]}
    heavy = [n for n, f in loaded.items() if f.suffix == ".py" and _torch_imports(f)[0]]
    assert not heavy, f"the CLI imports modules that import torch at start-up: {heavy}"
    assert not {"dukb.neural.methods", "dukb.neural.metrics", "dukb.neural.attacks"} & set(loaded)
    assert "dukb.neural.catalog" in loaded


def test_modules_that_use_torch_import_it_at_the_top():
    """In dukb/neural every module that uses torch imports it at module level, except the named light modules
    (:data:`LAZY_TORCH`); and those three stay torch-free at import."""
    lazy_found, top_found = {}, []
    for path in sorted((ROOT / "dukb" / "neural").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        top, inner = _torch_imports(path)
        if inner:
            lazy_found[rel] = inner
        if top:
            top_found.append(rel)
    assert set(lazy_found) == set(LAZY_TORCH), {k: v for k, v in lazy_found.items() if k not in LAZY_TORCH}
    assert not set(LAZY_TORCH) & set(top_found)
    assert {"dukb/neural/scoring.py", "dukb/neural/train.py", "dukb/neural/probe.py", "dukb/neural/methods/base.py",
            "dukb/neural/methods/npo.py"} <= set(top_found)


def test_help_texts_come_from_the_catalog(capsys):
    """`dukb evaluate --help`-style texts: methods, presets, options, metrics and attacks named as the registries
    name them (from the catalog)."""
    from dukb.neural import catalog

    text = catalog.methods_help()
    for name in ("ga", "npo", "npo_seq", "du_cl", "cl_du_multiform", "beta", "gamma", "minimum"):
        assert name in text
    assert catalog.default_metrics()[0] == "recall" and "recall_heldout: " in catalog.metrics_help()
    assert catalog.attack_names() == sorted(catalog.attack_names()) and "relearn" in catalog.attack_names()
    assert "relearn (" in catalog.attack_settings_help()
    assert "first_below_retrain" in catalog.selection_rules()


def test_a_model_family_is_still_one_registry_entry():
    """The finetuning presets of the CLI's help come from the family registry itself (torch-free through
    dukb.neural.trainconfig), not from the generated catalog: adding a family needs no catalog rebuild."""
    from dukb.neural import _catalog
    from dukb.neural.families import FAMILIES, finetune_presets

    assert "finetune_presets" not in _catalog.CATALOG and list(finetune_presets()) == list(FAMILIES)
    code = "import sys, dukb.neural.families; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr
