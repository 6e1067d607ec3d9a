"""Architecture: the layers kb -> solver -> neural -> cli have no back-edges, module-level imports form no cycle,
and kb/ and solver/ never import torch.

The import graph is read from the source with ``ast`` (every ``import`` and ``from ... import``, those inside
functions included), so a lazy import inside a function counts for the layering; for the cycles only the imports
that run when a module is imported count (not those inside functions or under ``if TYPE_CHECKING:``). The torch
check imports every module of dukb.kb and dukb.solver in a fresh interpreter.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import networkx as nx

from conftest import REPO_ROOT

#: Layers, lowest first: a module may import its own layer and lower ones only. The root package ``dukb`` (version,
#: error types) and ``dukb.data`` (rule files and templates) sit below them all.
LAYERS = ("dukb.kb", "dukb.solver", "dukb.neural", "dukb.cli")

#: Heavy model libraries that kb/ and solver/ must never load.
MODEL_LIBS = ("torch", "transformers")


@dataclass(frozen=True)
class Edge:
    """One import of a dukb module by another: where it is (file:line) and whether it runs at module import."""

    source: str
    target: str
    where: str
    module_level: bool


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.submodule_search_locations, f"{name} is not an importable package"
    return Path(list(spec.submodule_search_locations)[0])


def find_modules(roots: dict[str, Path]) -> dict[str, Path]:
    """Every module below some package folders: dotted name -> source file.

    Args:
        roots: package name -> its folder (subpackages are found below it).
    """
    out = {}
    for pkg, root in roots.items():
        for f in sorted(root.rglob("*.py")):
            rel = f.relative_to(root).with_suffix("").parts
            if "__pycache__" in rel:
                continue
            if rel[-1] == "__init__":
                rel = rel[:-1]
            out[".".join((pkg,) + rel)] = f
    return out


@cache
def modules() -> dict[str, Path]:
    """Every module of the installed dukb package (the root package's __init__ alone: its layers are found from
    their own folders, wherever the layout puts them)."""
    out = {"dukb": _package_dir("dukb") / "__init__.py"}
    out.update(find_modules({pkg: _package_dir(pkg) for pkg in LAYERS + ("dukb.data",)}))
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module):
    """(node, module_level) for every import statement of a module."""

    def visit(node, module_level: bool):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, module_level
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                yield from visit(child, False)
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    yield from visit(ast.Module(body=[stmt], type_ignores=[]), False)
                for stmt in child.orelse:
                    yield from visit(ast.Module(body=[stmt], type_ignores=[]), module_level)
            else:
                yield from visit(child, module_level)

    yield from visit(tree, True)


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest prefix of a dotted name that is a dukb module (None outside dukb)."""
    parts = name.split(".")
    while parts:
        cand = ".".join(parts)
        if cand in known:
            return cand
        parts.pop()
    return None


def find_edges(known: dict[str, Path]) -> tuple[Edge, ...]:
    """Every import of a module of ``known`` by a module of ``known`` (one edge per statement and target)."""
    out = set()
    for mod, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        is_pkg = path.name == "__init__.py"
        for node, module_level in _imports(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                if node.level:
                    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    base = base[: len(base) - node.level + 1]
                    origin = ".".join(base + ([node.module] if node.module else []))
                else:
                    origin = node.module or ""
                # "from pkg import sub" imports the submodule pkg.sub; "from pkg import name" the package
                targets = [f"{origin}.{a.name}" if f"{origin}.{a.name}" in known else origin for a in node.names]
            for t in targets:
                target = _resolve(t, known)
                if target is not None and target != mod:
                    out.add(Edge(mod, target, f"{path.name}:{node.lineno}", module_level))
    return tuple(sorted(out, key=lambda e: (e.source, e.where, e.target)))


@cache
def edges() -> tuple[Edge, ...]:
    """Every import of a dukb module by a dukb module."""
    return find_edges(modules())


def back_edges(found: Iterable[Edge]) -> list[str]:
    """Imports of a higher layer by a lower one, as "source (file:line) imports target"."""
    return sorted(f"{e.source} ({e.where}) imports {e.target}" for e in found if _layer(e.target) > _layer(e.source))


def module_level_cycles(found: Iterable[Edge], nodes: Iterable[str] = ()) -> list[list[str]]:
    """The strongly connected components (more than one module) of the module-level import graph, sorted."""
    g = nx.DiGraph()
    g.add_nodes_from(nodes)
    g.add_edges_from((e.source, e.target) for e in found if e.module_level)
    return sorted(sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1)


def _layer(mod: str) -> int:
    """Rank of a module's layer: 0 for the root package and dukb.data, 1.. for LAYERS."""
    for i, pkg in enumerate(LAYERS, 1):
        if mod == pkg or mod.startswith(pkg + "."):
            return i
    return 0


# ------------------------------------------------------------------------------------------------------ tests ----
def test_graph_sees_every_layer_and_known_edges():
    """The parser itself: it finds the modules of every layer and imports of each kind (module-level, inside a
    function, relative-free ``from pkg import submodule``)."""
    mods = modules()
    for pkg in LAYERS:
        assert pkg in mods and any(m.startswith(pkg + ".") for m in mods), pkg
    assert {"dukb.kb.judge", "dukb.solver.beliefs", "dukb.neural.restor.pipeline"} <= set(mods)
    got = {(e.source, e.target, e.module_level) for e in edges()}
    assert ("dukb.kb.probes", "dukb.kb.judge", True) in got  # module level
    assert ("dukb.neural.restor.pipeline", "dukb.neural.models", True) in got  # hoisted: module level
    assert ("dukb.solver.beliefs", "dukb.solver.closure", True) in got
    assert ("dukb.neural.restor", "dukb.neural.restor.report", True) in got  # package -> its submodule
    assert ("dukb.cli.restor_cmd", "dukb.neural.restor", False) in got


def test_checker_finds_planted_back_edges_and_cycles(tmp_path):
    """The checker on a planted tree: a lazy kb -> neural import is a back-edge, a module-level a <-> b cycle is
    found, a cycle through a function-level import or a TYPE_CHECKING block is not a module-level cycle."""
    files = {
        "kb/__init__.py": "",
        "kb/a.py": "from dukb.kb import b\n\ndef f():\n    import dukb.neural.x\n",
        "kb/b.py": "from .a import f\n",
        "kb/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from dukb.kb.d import D\n",
        "kb/d.py": "def g():\n    from dukb.kb import c\nimport dukb.kb.c\n",
        "neural/__init__.py": "",
        "neural/x.py": "from dukb.kb.a import f\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    known = find_modules({"dukb.kb": tmp_path / "kb", "dukb.neural": tmp_path / "neural"})
    found = find_edges(known)
    assert back_edges(found) == ["dukb.kb.a (a.py:4) imports dukb.neural.x"]
    assert module_level_cycles(found) == [["dukb.kb.a", "dukb.kb.b"]]
    assert ("dukb.kb.c", "dukb.kb.d", False) in {(e.source, e.target, e.module_level) for e in found}


def test_no_back_edges_between_layers():
    """kb imports none of solver/neural/cli; solver none of neural/cli; neural none of cli (lazy imports inside
    functions included)."""
    bad = back_edges(edges())
    assert not bad, "back-edges against kb -> solver -> neural -> cli:\n" + "\n".join(bad)


def test_no_module_level_import_cycles():
    """No cycle among the imports that run when a module is imported."""
    cycles = module_level_cycles(edges(), modules())
    assert not cycles, f"module-level import cycles: {cycles}"


def test_no_import_cycles_even_through_lazy_imports():
    """No cycle either when the imports inside functions count: each module's dependencies form a DAG (e.g. the
    method registry imports the method modules, never the reverse)."""
    lazy = [Edge(e.source, e.target, e.where, True) for e in edges() if e.source != e.target]
    cycles = module_level_cycles(lazy, modules())
    assert not cycles, f"import cycles through lazy imports: {cycles}"


def test_kb_and_solver_never_import_torch():
    """Every module of dukb.kb and dukb.solver, imported one after the other in a fresh interpreter, loads neither
    torch nor transformers."""
    names = [m for m in modules() if _layer(m) in (1, 2)]
    code = (
        "import importlib, json, sys\n"
        f"libs = {list(MODEL_LIBS)!r}\n"
        "first = {}\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
        "    for lib in libs:\n"
        "        if lib in sys.modules and lib not in first:\n"
        "            first[lib] = name\n"
        "print(json.dumps(first))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    first = json.loads(res.stdout.strip().splitlines()[-1])
    assert not first, "model libraries loaded by kb/solver (library: first module after which it was loaded): " + str(
        first
    )
    assert len(names) >= 15  # every module was imported, not an empty list


def test_no_function_in_neural_or_cli_is_longer_than_120_lines():
    """The skeleton's constraint: protocols are stages and helpers, not one long function each."""
    root = REPO_ROOT
    long, read = [], 0
    for layer in ("neural", "cli"):
        for path in sorted((root / "dukb" / layer).rglob("*.py")):
            read += 1
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    n = node.end_lineno - node.lineno + 1
                    if n > 120:
                        long.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({n} lines)")
    assert read >= 50, f"read {read} modules of dukb/neural and dukb/cli: the layers are not where the check looks"
    assert not long, long


#: at most this many imports of dukb modules inside functions outside dukb/cli/ (issue 40, "Done when")
LOCAL_IMPORT_LIMIT = 20
_REASON = re.compile(r"#\s*noqa:\s*PLC0415\s*\(\s*\S[^)]*\)")


def local_dukb_imports(source: str, name: str = "<src>") -> list[tuple[str, bool]]:
    """Each import of a dukb module inside a function of ``source`` (a relative import counts: it is dukb's): its
    ``name:line`` and whether its line says why it is there (``# noqa: PLC0415 (reason)``)."""
    lines = source.splitlines()
    out = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mods = ["dukb" if node.level else node.module or ""]
            else:
                continue
            if any(m == "dukb" or m.startswith("dukb.") for m in mods):
                out.append((f"{name}:{node.lineno}", bool(_REASON.search(lines[node.lineno - 1]))))
    return sorted(set(out))


def test_the_local_import_check_sees_marked_and_unmarked_imports():
    src = (
        "import dukb.kb\n"
        "def f():\n"
        "    from dukb.neural import x  # noqa: PLC0415 (torch; a --help path)\n"
        "    import dukb.solver\n"
        "    from . import y\n"
        "    import json\n"
        "    def g():\n"
        "        from dukb.kb import z  # noqa: PLC0415\n"
    )
    assert local_dukb_imports(src) == [("<src>:3", True), ("<src>:4", False), ("<src>:5", False), ("<src>:8", False)]


def test_local_imports_of_dukb_sit_in_the_cli_or_say_why():
    """Imports sit at module top (ruff PLC0415, in CI); outside the CLI's command modules (the one lazy boundary) at
    most 20 imports of dukb modules sit inside a function, each with its reason on its line."""
    found, read = [], 0
    for mod, path in modules().items():
        if _layer(mod) != len(LAYERS):  # dukb.cli: the lazy boundary
            read += 1
            found += local_dukb_imports(path.read_text(encoding="utf-8"), str(path.relative_to(REPO_ROOT)))
    assert read >= 100  # every module of kb, solver and neural was read
    unmarked = [where for where, marked in found if not marked]
    assert not unmarked, "imports of dukb modules inside functions without `# noqa: PLC0415 (reason)`: " + str(unmarked)
    assert len(found) <= LOCAL_IMPORT_LIMIT, found
