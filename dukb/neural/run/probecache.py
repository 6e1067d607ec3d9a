"""The baseline probe cache of a run: the model's probe table before unlearning, keyed by everything its rows depend
on, so a resume or a joining worker reads it instead of probing again; a cache that is not one dukb wrote is probed
again, never trusted.

Source: dukb (the run directory of every protocol).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from dukb import InputError, one_line
from dukb.neural.run.files import PROBE_CACHE_NAME, read_json, write_bytes_atomic
from dukb.neural.run.identity import sha256_json
from dukb.neural.run.provenance import versions

# ------------------------------------------------------------------------------------------ probe cache --------
#: the largest probe cache written or read (a row takes about 40 bytes of compact JSON: 64 MiB holds 1.5 million
#: rows, far more than a KB's items in every form)
PROBE_CACHE_BYTES = 64 * 1024 * 1024
PROBE_CACHE_COLUMNS = ("kind", "fact_kind", "fact_id", "known")


def source_fingerprint() -> str:
    """Hex SHA-256 over dukb's own files (the package folder with its kb, solver, neural, cli and data subpackages:
    every file's path relative to the package and its bytes, ``__pycache__`` left out), so a cache keyed with it is
    never read by other code, committed or not (a git revision says ``+dirty`` whatever the edit).

    Raises:
        InputError: a source file cannot be read.
    """
    root = Path(__file__).resolve().parents[2]
    entries = []
    for f in sorted(root.rglob("*")):
        if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc":
            try:
                digest = hashlib.sha256(f.read_bytes()).hexdigest()
            except OSError as e:
                raise InputError(f"cannot read dukb's source file: {e.strerror or e}", f) from None
            entries.append([str(f.relative_to(root)), digest])
    return sha256_json(entries)


def probe_cache_key(model: dict, items, settings: dict) -> str:
    """The key of a cached probe table: everything its rows depend on.

    Args:
        model: what identifies the weights probed (:func:`dukb.neural.modelrecord.model_fingerprint` of the files, with
            dtype, prompt tags and LoRA), JSON-able.
        items: the probed items in order, :class:`dukb.kb.probes.Probe` (every field enters the key: kind, fact
            kind and id, question, answer and the judge's match rule).
        settings: the probe's keyword arguments and where it ran (device type, GPU name, CPU threads), JSON-able.
            The key adds :func:`source_fingerprint` and the versions of torch (and its CUDA) and transformers, so a table is
            never reused across code that may probe or judge otherwise.

    Returns:
        Hex SHA-256 (:func:`sha256_json`).

    Raises:
        InputError: as :func:`source_fingerprint`.
    """

    rows = [dataclasses.asdict(it) for it in items]
    return sha256_json(
        {
            "model": model,
            "items": rows,
            "settings": settings,
            "source": source_fingerprint(),
            "versions": {k: v for k, v in versions().items() if k in ("torch", "torch_cuda", "transformers")},
        }
    )


def read_probe_cache(path: str | Path, key: str, log: Callable[[str], None] | None = None):
    """The probe table cached at ``path`` under ``key``, or None when there is none to use (no file; another key;
    a file that is not a cache dukb wrote, too large or damaged: it is probed again and overwritten, never
    trusted).

    Args:
        path: the cache file; key: :func:`probe_cache_key` of the probe about to run.
        log: called with one line saying why a file present was not used (None: silent).

    Returns:
        pandas DataFrame with :data:`PROBE_CACHE_COLUMNS` (kind, fact_kind: str; fact_id: int; known: bool), or
        None.
    """
    import pandas as pd

    p = Path(path)
    if not p.exists():
        return None
    say = log or (lambda _m: None)
    try:
        doc = read_json(p, "probe cache", limit=PROBE_CACHE_BYTES)
    except InputError as e:
        say(f"probe cache {p} not used ({one_line(str(e))}): probing again")
        return None
    if not isinstance(doc, dict) or doc.get("columns") != list(PROBE_CACHE_COLUMNS):
        say(f"probe cache {p} not used (not a probe table): probing again")
        return None
    if doc.get("key") != key:
        say(f"probe cache {p} not used (made with other weights, items, settings or code): probing again")
        return None
    rows = doc.get("rows")
    if not isinstance(rows, list) or not all(
        isinstance(r, list)
        and len(r) == 4
        and isinstance(r[0], str)
        and isinstance(r[1], str)
        and isinstance(r[2], int)
        and not isinstance(r[2], bool)
        and isinstance(r[3], bool)
        for r in rows
    ):
        say(f"probe cache {p} not used (damaged rows): probing again")
        return None
    return pd.DataFrame(rows, columns=list(PROBE_CACHE_COLUMNS))


def write_probe_cache(path: str | Path, key: str, table) -> bool:
    """Write a probe table's :data:`PROBE_CACHE_COLUMNS` under ``key``, as compact JSON, atomically
    (:func:`write_bytes_atomic`); a table over :data:`PROBE_CACHE_BYTES` is not written.

    Args:
        path: the cache file; key: :func:`probe_cache_key`; table: a :func:`dukb.neural.probe.probe` DataFrame.

    Returns:
        True when written, False when too large to cache.

    Raises:
        InputError: as :func:`write_bytes_atomic` (a folder or link in the file's place).
        OSError: the file cannot be written.
    """
    rows = [
        [str(k), str(fk), int(f), bool(v)]
        for k, fk, f, v in zip(table["kind"], table["fact_kind"], table["fact_id"], table["known"])
    ]
    data = json.dumps({"key": key, "columns": list(PROBE_CACHE_COLUMNS), "rows": rows}, separators=(",", ":")).encode()
    if len(data) > PROBE_CACHE_BYTES:
        return False
    write_bytes_atomic(path, data)
    return True


__all__ = [
    "PROBE_CACHE_BYTES",
    "PROBE_CACHE_COLUMNS",
    "PROBE_CACHE_NAME",
    "probe_cache_key",
    "read_probe_cache",
    "source_fingerprint",
    "write_probe_cache",
]
