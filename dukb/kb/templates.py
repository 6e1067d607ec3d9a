"""The JSON text templates of ``dukb.data/templates`` (probes.json, cross_lingual.json, documents.json, values.json),
read once and shared by probes, corruption documents and the answer judge."""

from __future__ import annotations

import json
from functools import cache

from dukb import InputError
from dukb.kb.csvfile import read_package_text


@cache
def load_template(name: str) -> dict:
    """Load a JSON template file of ``dukb.data/templates``.

    Args:
        name: file name, e.g. "probes.json".

    Returns:
        The parsed JSON object (cached; do not modify).

    Raises:
        InputError: the file is missing, unreadable, not a regular file, too large, not UTF-8 or not valid JSON
            (file and, where it applies, line named).

    Example:
        >>> probes = load_template("probes.json")
        >>> isinstance(probes, dict) and load_template("probes.json") is probes  # cached
        True
    """
    text, where = read_package_text("templates", name)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"template file is not valid JSON: {e.msg}", where, e.lineno) from None
