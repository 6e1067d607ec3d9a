"""Doctests: every public function and class of dukb.kb and dukb.solver carries a runnable example (``>>>``) in its
docstring, and ``python -m pytest`` runs those examples (pyproject's ``--doctest-modules`` over dukb/kb and
dukb/solver, never over neural/ or cli/).

A public name is one defined at the top of a module of those packages whose name does not start with ``_``.
"""

from __future__ import annotations

import doctest
import importlib
import inspect
import pkgutil
import tomllib
import types

from conftest import REPO_ROOT

#: The packages whose public API is documented by doctests.
DOCTESTED = ("dukb.kb", "dukb.solver")


def package_modules(package: str) -> list[types.ModuleType]:
    """Every module of ``package`` (the package's __init__ included), imported."""
    pkg = importlib.import_module(package)
    return [pkg] + [importlib.import_module(info.name) for info in pkgutil.walk_packages(pkg.__path__, package + ".")]


def public_objects(module: types.ModuleType) -> dict[str, object]:
    """The functions and classes ``module`` defines at its top level under a name without a leading ``_``
    (decorated functions, e.g. ``lru_cache`` or ``contextmanager`` ones, are unwrapped)."""
    out = {}
    for name, obj in vars(module).items():
        if name.startswith("_"):
            continue
        inner = inspect.unwrap(obj) if callable(obj) else obj
        if not (inspect.isfunction(inner) or inspect.isclass(inner)):
            continue
        if getattr(inner, "__module__", None) == module.__name__:
            out[name] = obj
    return out


def missing_examples(module: types.ModuleType) -> list[str]:
    """Qualified names of the public functions and classes of ``module`` whose own docstring holds no doctest
    example that :class:`doctest.DocTestFinder` collects (what ``--doctest-modules`` runs)."""
    found = {t.name for t in doctest.DocTestFinder(recurse=True).find(module) if t.examples}
    missing = []
    for name, obj in public_objects(module).items():
        doc = obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__  # a class's own docstring
        qualified = f"{module.__name__}.{name}"
        if not doc or ">>>" not in doc or qualified not in found:
            missing.append(qualified)
    return missing


def all_modules() -> list[types.ModuleType]:
    return [m for package in DOCTESTED for m in package_modules(package)]


def test_every_public_function_and_class_has_an_example():
    modules = all_modules()
    assert len(modules) >= 20, [m.__name__ for m in modules]
    n_public = sum(len(public_objects(m)) for m in modules)
    assert n_public >= 100, n_public  # the finder sees the API (load_kb, compute_closure, exact_sets, ...)
    missing = [name for m in modules for name in missing_examples(m)]
    assert not missing, "public functions/classes without a >>> example in their docstring: " + ", ".join(missing)


def test_checker_finds_a_function_and_a_class_without_example():
    module = types.ModuleType("dukb_planted")
    exec(
        "def documented():\n"
        "    '''Has one.\n\n    Example:\n        >>> 1 + 1\n        2\n    '''\n"
        "def undocumented():\n"
        "    '''Says what it does, but shows no example.'''\n"
        "class Plain:\n"
        "    '''A class without an example.'''\n"
        "    def method(self):\n"
        "        '''>>> 1\n        1\n        '''\n"
        "def _private():\n"
        "    '''Private: not checked.'''\n",
        module.__dict__,
    )
    assert sorted(missing_examples(module)) == ["dukb_planted.Plain", "dukb_planted.undocumented"]


def test_pytest_collects_the_doctests_of_kb_and_solver_only():
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    options = config["tool"]["pytest"]["ini_options"]
    assert "--doctest-modules" in options["addopts"].split()
    paths = options["testpaths"]
    assert {"dukb/kb", "dukb/solver"} <= set(paths)
    assert not [p for p in paths if p.startswith("dukb/") and p not in ("dukb/kb", "dukb/solver")], paths
    assert "dukb" not in paths  # never the whole package: neural/ and cli/ are not doctested
