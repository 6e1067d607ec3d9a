"""The JSON text templates of ``dukb.data/templates`` (probes.json, cross_lingual.json, documents.json, values.json),
read once and shared by probes, corruption documents and the answer judge."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

from dukb import InputError


@lru_cache(maxsize=None)
def load_template(name: str) -> dict:
    """Load a JSON template file of ``dukb.data/templates``.

    Args:
        name: file name, e.g. "probes.json".

    Returns:
        The parsed JSON object (cached; do not modify).

    Raises:
        InputError: the file is missing or is not valid JSON (file and line named).
    """
    res = resources.files("dukb.data").joinpath("templates", name)
    try:
        text = res.read_text(encoding="utf-8")
    except (FileNotFoundError, OSError):
        raise InputError("missing template file", str(res)) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"template file is not valid JSON: {e.msg}", str(res), e.lineno) from None
