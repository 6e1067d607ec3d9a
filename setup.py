"""Package discovery for dukb's layout: the subpackages live at the top of the repository (kb/, solver/, neural/,
cli/, data/) and install as ``dukb.kb``, ``dukb.solver``, ... (the project's required layout).

Everything is found from the tree, so a new subpackage or data file cannot be left out of the wheel; the metadata
stays in pyproject.toml. tests/test_packaging.py builds the wheel and checks that every module and data file is in it.
"""

import os

from setuptools import find_packages, setup

#: installed package -> folder in the repository
ROOTS = {"dukb": "dukb", "dukb.kb": "kb", "dukb.solver": "solver", "dukb.neural": "neural", "dukb.cli": "cli",
         "dukb.data": "data"}


def _packages() -> list[str]:
    out = []
    for pkg, folder in ROOTS.items():
        out.append(pkg)
        out += [f"{pkg}.{sub}" for sub in find_packages(where=folder)]
    return sorted(out)


def _data_files(folder: str) -> list[str]:
    """Every non-Python file below ``folder`` (relative paths), caches excluded."""
    out = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d != "__pycache__" and not d.startswith(".")]
        for f in files:
            if not f.endswith((".py", ".pyc")) and not f.startswith("."):
                out.append(os.path.relpath(os.path.join(root, f), folder).replace(os.sep, "/"))
    return sorted(out)


setup(
    package_dir=ROOTS,
    packages=_packages(),
    package_data={pkg: _data_files(folder) for pkg, folder in ROOTS.items() if _data_files(folder)},
    include_package_data=False,
)
