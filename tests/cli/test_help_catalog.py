"""The registries without a shadow (issue 40, item 4): every method, preset, metric, attack, control strategy,
protocol and model family is one entry of a lazy :class:`dukb.neural.registry.Registry` whose metadata is plain data,
so command help and the docs tables need no torch; the entry's metadata equals its loaded object (no drift); and the
modules that use torch import it at the top while the CLI imports none of them at start-up."""

from __future__ import annotations

import ast
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT

ROOT = REPO_ROOT
#: modules that torch-free paths (``dukb report``, the CLI's start, config checks) import and that use torch in one
#: or two functions only: they keep ``import torch`` inside those functions
LAZY_TORCH = {
    "dukb/neural/run/provenance.py": "run records: device and thread info",
    "dukb/neural/distributed.py": "process-group helpers the CLI calls before any model",
    "dukb/neural/data.py": "QA items for reports and metrics; only encode_qa/pad_rows make tensors",
    "dukb/neural/bounds.py": "option ranges the CLI checks at parse time; only --device asks torch what it sees",
    "dukb/neural/modelbuild.py": "saving a model directory (--save-models); only the tiny model's build seeds torch",
}


def _torch_imports(path: Path) -> tuple[bool, list[int]]:
    """(imports torch at module level, lines of function-level torch imports)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = any(
        isinstance(n, ast.Import) and any(a.name == "torch" or a.name.startswith("torch.") for a in n.names)
        for n in tree.body
    )
    inner = []
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for n in ast.walk(fn):
                if isinstance(n, ast.Import) and any(a.name == "torch" or a.name.startswith("torch.") for a in n.names):
                    inner.append(n.lineno)
                if isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "torch":
                    inner.append(n.lineno)
    return top, sorted(set(inner))


def _json_of(code: str) -> dict:
    """Run ``code`` in a fresh interpreter and read the JSON object its last output line prints."""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def _method_actual(m) -> dict:
    """A loaded method's attributes in the shape of its :class:`MethodEntry`."""
    return {
        "name": m.name,
        "param": m.param,
        "grid": tuple(m.default_grid),
        "lr_kind": m.lr_kind,
        "summary": m.summary,
        "source": m.source,
        "document_level": bool(m.document_level),
        "options": tuple(m.options),
        "nonnegative": tuple(m.nonnegative_options),
        "defaults": tuple(getattr(m, o) for o in m.options),
    }


def _method_declared(e) -> dict:
    return {
        "name": e.name,
        "param": e.param,
        "grid": tuple(e.grid),
        "lr_kind": e.lr_kind,
        "summary": e.summary,
        "source": e.source,
        "document_level": e.document_level,
        "options": tuple(o.name for o in e.options),
        "nonnegative": tuple(o.name for o in e.options if o.nonnegative),
        "defaults": tuple(o.default for o in e.options),
    }


def test_every_entry_s_metadata_equals_its_loaded_object():
    """Methods (name, parameter, grid, learning-rate kind, summary, source, options with their defaults and ranges,
    document level), metrics (name, level, summary, source), attacks (name, summary, source, setting defaults) and
    control strategies (kind, parameter): what the registry declares as data is what the object says, so the help
    texts and tables read from the data cannot drift from the code."""
    pytest.importorskip("torch")
    from dukb.neural.catalog import ATTACKS, CONTROL_STRATEGIES, METHODS, METRICS, PRESETS
    from dukb.neural.metrics import metric_call
    from dukb.neural.registry import compare_fields

    for name, e in zip(METHODS, METHODS.entries()):
        declared, actual = _method_declared(e), _method_actual(METHODS[name])
        for k in declared:
            if k == "defaults":
                assert all(
                    (a is None and d is None) or (a is not None and d is not None and math.isclose(a, d))
                    for d, a in zip(declared[k], actual[k])
                ), (name, k, declared[k], actual[k])
            else:
                assert declared[k] == actual[k], (name, k, declared[k], actual[k])
    assert not METRICS.drift(
        lambda e, m: compare_fields(e, m, {"name": "name", "level": "level", "summary": "summary", "source": "source"})
    )
    assert not ATTACKS.drift(
        lambda e, a: compare_fields(
            e, a, {"name": "name", "summary": "summary", "source": "source", "defaults": "defaults"}
        )
    )
    calls = {(e.name, c): metric_call(e.name, c) for e in METRICS.entries() for c in e.calls}
    assert {c: f.__name__ for c, f in calls.items()} == {
        ("recall", "success_du"): "success_du_all",
        ("recall_heldout", "forgotten"): "heldout_forgotten",
        ("knowmem", "score"): "knowmem",
        ("verbmem", "score"): "verbmem",
        ("rwku_rouge", "fields"): "rwku_fields",
        ("mia_fm_rm", "scores"): "qa_mia_scores",
        ("ps_exact", "vector"): "ps_vector",
    }
    with pytest.raises(KeyError, match="has no call"):
        metric_call("recall", "vector")
    assert not CONTROL_STRATEGIES.drift(lambda e, s: compare_fields(e, s, {"name": "kind", "param": "param"}))
    for p in PRESETS.values():
        assert p.method in METHODS and PRESETS[p.name] is p  # a preset is its own object


def test_a_registry_imports_an_entry_only_when_it_is_used():
    """Reading names and metadata imports nothing; ``registry[name]`` imports the target once (and runs the check);
    a name twice is refused; an unknown name is a KeyError naming the registered ones."""
    from dataclasses import dataclass

    from dukb.neural.registry import Registry

    @dataclass(frozen=True)
    class E:
        name: str
        target: str
        args: tuple = ()

    checked = []
    reg = Registry("thing", (E("frac", "fractions:Fraction", (1, 3)), E("pi", "math:pi")), check=checked.append)
    assert list(reg) == ["frac", "pi"] and "pi" in reg and "tau" not in reg and len(reg) == 2
    assert not reg.is_loaded("frac") and reg.entry("frac").args == (1, 3)
    assert str(reg["frac"]) == "1/3" and reg["frac"] is reg["frac"] and reg.is_loaded("frac")
    assert checked == [reg["frac"]]
    with pytest.raises(ValueError, match="registered twice"):
        reg.add(E("pi", "math:e"))
    with pytest.raises(KeyError, match="unknown thing 'tau' \\(registered: frac, pi\\)"):
        reg["tau"]
    differs = reg.drift(lambda e, obj: {"value": (e.name, obj)} if e.name == "pi" else {})
    assert differs == {"pi": {"value": ("pi", math.pi)}}


def test_help_and_tables_read_the_registries_without_torch():
    """`dukb --help` and `dukb evaluate --help` import no torch, no method, metric or attack module; the methods,
    metrics, attacks, protocols and families tables are drawn from the entries alone (no entry loaded)."""
    code = (
        "import sys, json, contextlib, io\n"
        "from dukb.cli.main import main\n"
        "codes = []\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    codes = [main(['--help']), main(['evaluate', '--help'])]\n"
        "from dukb.neural.catalog import ATTACKS, METHODS, METRICS\n"
        "from dukb.neural.catalog import attacks_table, methods_table, presets_table\n"
        "from dukb.neural.families import families_table\n"
        "from dukb.neural.protocols import protocols_table\n"
        "rows = [len(t().rows) for t in (methods_table, presets_table, attacks_table, families_table,\n"
        "                                protocols_table)]\n"
        "print(json.dumps({'codes': codes, 'torch': 'torch' in sys.modules, 'rows': rows,\n"
        "    'loaded': [n for r in (METHODS, ATTACKS) for n in r if r.is_loaded(n)],\n"
        "    'mods': sorted(n for n in sys.modules if n.startswith(('dukb.neural.methods.',\n"
        "                   'dukb.neural.attacks.')))}))"
    )
    out = _json_of(code)
    assert out["codes"] == [0, 0] and not out["torch"], out
    assert not out["loaded"] and not out["mods"], out
    assert out["rows"][0] >= 30 and out["rows"][2] == 6 and all(out["rows"])


def test_the_cli_starts_without_torch_or_any_torch_module():
    """A fresh `import dukb.cli.main` (what every command, `--help` included, does first) loads neither torch nor
    any dukb module that imports torch at the top, nor the registry of methods or attacks (the metrics package and
    its torch-free modules may load: the configs check held-out rules with :mod:`dukb.neural.metrics.heldout`)."""
    code = (
        "import sys, json, dukb.cli.main\n"
        "print(json.dumps({'torch': 'torch' in sys.modules, 'transformers': 'transformers' in sys.modules,\n"
        "    'mods': sorted((n, getattr(m, '__file__', None)) for n, m in sys.modules.items()\n"
        "                   if n.startswith('dukb.') and getattr(m, '__file__', None))}))"
    )
    out = _json_of(code)
    assert not out["torch"] and not out["transformers"]
    loaded = {n: Path(f) for n, f in out["mods"]}
    heavy = [n for n, f in loaded.items() if f.suffix == ".py" and _torch_imports(f)[0]]
    assert not heavy, f"the CLI imports modules that import torch at start-up: {heavy}"
    assert not {"dukb.neural.methods", "dukb.neural.attacks"} & set(loaded)
    assert "dukb.neural.catalog" in loaded


def test_modules_that_use_torch_import_it_at_the_top():
    """In dukb/neural every module that uses torch imports it at module level, except the named light modules
    (:data:`LAZY_TORCH`); and those stay torch-free at import."""
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
    assert {
        "dukb/neural/scoring.py",
        "dukb/neural/train.py",
        "dukb/neural/probe.py",
        "dukb/neural/methods/base.py",
        "dukb/neural/methods/npo.py",
    } <= set(top_found)


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


def test_a_model_family_and_a_learning_rate_kind_are_one_registry_entry_each():
    """The finetuning presets and rates come from the family registry itself (torch-free through
    dukb.neural.trainconfig); every family has a rate of every kind, declared once per kind (a new kind is one
    :class:`LrKind` entry), and no committed catalog shadows them."""
    from dukb.neural.families import FAMILIES, LR_KINDS, family_lrs, finetune_presets

    assert list(finetune_presets()) == list(FAMILIES)
    assert not (ROOT / "dukb" / "neural" / "_catalog.py").exists()
    assert not (ROOT / "dukb" / "neural" / "catalog_build.py").exists()
    assert all(set(f.lr) == set(LR_KINDS) for f in FAMILIES.values())
    assert family_lrs("npo")["gpt2-xl"] == 2 * family_lrs("ga")["gpt2-xl"] and family_lrs("cl")["tiny"] == 1e-4
    code = "import sys, dukb.neural.families; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr
