"""`dukb validate`'s check of a KB directory: its files (:func:`dukb.kb.io.load_kb`) and then the optional files
that only some commands read (``aliases.csv``, :func:`dukb.kb.aliases.alias_problems`), every problem with its file
and line."""

from __future__ import annotations

from pathlib import Path

from dukb.kb.aliases import alias_problems
from dukb.kb.io import KBError, load_kb
from dukb.kb.model import KB


def validate_kb(directory: str | Path) -> KB:
    """Load and check a KB directory with everything in it that dukb reads: the KB's files, then its
    ``aliases.csv`` (the judge's surface forms; read by probes and the judge only, so a KB that loads may still
    have a bad one).

    Args:
        directory: a KB directory or built-in name.

    Returns:
        The :class:`dukb.kb.KB`.

    Raises:
        KBError: every problem, ``FILE:LINE: problem`` each (the KB's files first; the aliases' only once the KB
            loads, as they name its entities).
        InputError: the directory cannot be found or read.

    Source: Wu et al. 2025, App. B (the KB files) and App. C (the judge's surface forms).

    Example:
        >>> validate_kb("demo").fingerprint() == load_kb("demo").fingerprint()
        True
    """
    kb = load_kb(directory)
    problems = alias_problems(kb)
    if problems:
        raise KBError(problems)
    return kb


__all__ = ["validate_kb"]
