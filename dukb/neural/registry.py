"""One lazy registry type for every kind of registered thing: methods, presets, metrics, attacks, protocols, model
families, learning-rate kinds and control strategies.

A :class:`Registry` maps a name to an *entry*: a frozen dataclass that holds the item's metadata as plain data
(summary, source paper, options with their defaults and ranges, level, kind, ...) and, for items whose object lives
in a module that imports torch, its import path ``target = "module:attr"``. Reading names and metadata
(:meth:`Registry.entry`, iteration, ``in``) imports nothing, so ``--help``, `dukb methods`, the docs build and the
CLI's parse-time checks never import torch; the object is imported on first use (``registry[name]``) and kept. An
entry without a ``target`` is its own object (plain data such as a preset or a model family).

The declared metadata cannot drift from the object it describes: tests/cli/test_help_catalog.py loads every entry and
compares (:meth:`Registry.drift`).

Source: dukb; the lazy ``name -> "module:attr"`` registry follows lm-eval-harness's registry (EleutherAI,
lm_eval/api/registry.py).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any


def import_target(target: str) -> Any:
    """The object at ``"module:attr"`` (``attr`` may be dotted).

    Raises:
        ValueError: ``target`` has no ``:``.
        ImportError, AttributeError: the module or attribute does not exist.
    """
    module, sep, attr = target.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"registry target {target!r} is not 'module:attr'")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


class Registry(Mapping):
    """name -> object, declared as entries of metadata and imported lazily (a read-only :class:`Mapping`).

    Each entry is a dataclass with a ``name``; optional fields: ``target`` ("module:attr" of the object, or of a
    factory), ``args`` and ``kwargs`` (with them, the object is ``factory(*args, **kwargs)``). Entries keep their
    declaration order, which is the order of every table and help text.

    Args:
        kind: what the registry holds ("method", "metric", ...), for error messages.
        entries: the entries, in order.
        check: called with each object when it is first loaded (e.g. an attack's settings must all have ranges);
            raises on a bad object. A ``"module:attr"`` string is imported when the first object loads.
    """

    def __init__(self, kind: str, entries=(), check: Callable[[Any], None] | str | None = None):
        self.kind = kind
        self._entries: dict[str, Any] = {}
        self._loaded: dict[str, Any] = {}
        self._check = check
        for e in entries:
            self.add(e)

    def add(self, entry):
        """Register ``entry`` (returned unchanged).

        Raises:
            ValueError: its name is taken.
        """
        if entry.name in self._entries:
            raise ValueError(f"{self.kind} {entry.name!r} is registered twice")
        self._entries[entry.name] = entry
        return entry

    def entry(self, name: str):
        """The metadata entry of ``name`` (imports nothing).

        Raises:
            KeyError: an unknown name (the message lists the registered ones).
        """
        try:
            return self._entries[name]
        except KeyError:
            raise KeyError(f"unknown {self.kind} {name!r} (registered: {', '.join(self._entries)})") from None

    def entries(self) -> list:
        """Every entry, in declaration order (imports nothing)."""
        return list(self._entries.values())

    def is_loaded(self, name: str) -> bool:
        """Whether ``name``'s object has been imported."""
        return name in self._loaded

    def __getitem__(self, name: str):
        """The object registered as ``name``, imported (and checked) on first use.

        Raises:
            KeyError: an unknown name.
        """
        if name in self._loaded:
            return self._loaded[name]
        e = self.entry(name)
        target = getattr(e, "target", "")
        if not target:
            obj = e
        else:
            obj = import_target(target)
            args, kwargs = tuple(getattr(e, "args", ()) or ()), dict(getattr(e, "kwargs", None) or {})
            if args or kwargs or getattr(e, "call", False):
                obj = obj(*args, **kwargs)
        if isinstance(self._check, str):
            self._check = import_target(self._check)
        if self._check is not None:
            self._check(obj)
        self._loaded[name] = obj
        return obj

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {list(self._entries)})"

    def drift(self, compare: Callable[[Any, Any], dict]) -> dict[str, dict]:
        """Load every entry and report where its declared metadata differs from its object.

        Args:
            compare: ``compare(entry, obj)`` -> {field: (declared, actual)} for each differing field.

        Returns:
            name -> its differences (only names with some).
        """
        out = {}
        for name, e in self._entries.items():
            diff = compare(e, self[name])
            if diff:
                out[name] = diff
        return out


def _as_tuple(value):
    """Lists and tuples as tuples (so that a declared tuple equals an object's list); anything else as it is."""
    return tuple(value) if isinstance(value, (list, tuple)) else value


def compare_fields(entry, obj, fields: dict[str, Callable[[Any], Any] | str]) -> dict:
    """The differences between an entry's declared fields and an object's attributes.

    Args:
        entry: a registry entry.
        obj: the loaded object.
        fields: entry field -> the object's attribute name, or a function of the object giving the actual value.

    Returns:
        {field: (declared, actual)} for each field whose values differ (tuples and lists compare as tuples).
    """
    out = {}
    for name, how in fields.items():
        actual = how(obj) if callable(how) else getattr(obj, how)
        declared = getattr(entry, name)
        if _as_tuple(declared) != _as_tuple(actual):
            out[name] = (declared, actual)
    return out


__all__ = ["Registry", "compare_fields", "import_target"]
