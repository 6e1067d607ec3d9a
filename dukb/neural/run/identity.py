"""The identity of a run: every setting that changes a result row, compared on resume.

A run's ``config.json`` holds ``identity``: every setting that changes a result row (KB and rule fingerprints,
model weights' hash, seed, learning rate, prompt, dtype, sets, grids, scopes, retain and probe settings). A rerun
into the same directory computes its own identity and compares:

- any differing key is refused (:class:`RunIdentityError`, exit 2) with the key and both values, so rows made with
  different settings are never mixed in one file;
- keys listed as *extendable* (e.g. ``targets``, ``methods`` and each method's grid) may gain entries: a resume that
  adds entries to a run whose other settings are equal goes ahead, and the additions are recorded in ``history``.

config.json's shape is checked when read back (:func:`config_problem`).

Source: dukb (the run directory of every protocol).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

from dukb import InputError
from dukb.kb.csvfile import open_regular, read_bytes
from dukb.neural.run.files import RUN_JSON_BYTES, RunDir, json_problem

#: version of the identity layout; a run written with another layout cannot be resumed (2: probing judges the answer
#: line, CL-DU's trace left the setting, the preset family is recorded; 3: ``npo`` is the Eval-DU code's logit
#: form, the NPO paper's sequence form is ``npo_seq``, and step grids run on the reference schedule by default)
IDENTITY_VERSION = 3


# ----------------------------------------------------------------------------------------------- hashing --------
#: Largest file :func:`sha256_file` hashes (model weights): 1 TiB, a bound on the time a planted file can take.
MAX_HASHED_BYTES = 1 << 40


def sha256_file(path: str | Path, chunk: int = 1 << 22) -> str:
    """Hex SHA-256 of a file's bytes, read in chunks from a regular file only
    (:func:`dukb.kb.csvfile.open_regular`: a FIFO or a device such as ``/dev/zero`` is refused before a byte is
    read, so hashing ends).

    Raises:
        InputError: the file cannot be read, is not a regular file or is larger than :data:`MAX_HASHED_BYTES`
            (names it).
    """

    h = hashlib.sha256()
    with open_regular(path, "file", limit=MAX_HASHED_BYTES) as fh:
        try:
            while block := fh.read(chunk):
                h.update(block)
        except OSError as e:
            raise InputError(f"cannot read: {e.strerror or e}", path) from None
    return h.hexdigest()


def sha256_json(obj) -> str:
    """Hex SHA-256 of an object's canonical JSON (sorted keys, no spaces)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


# ---------------------------------------------------------------------------------------------- identity --------
@dataclass(frozen=True)
class Difference:
    """One identity key whose value differs between the run on disk and the new invocation.

    Attributes:
        key: dotted key path (e.g. ``lr``, ``methods.ga.grid``).
        old: the value recorded in the run.
        new: the value the new invocation would use.
    """

    key: str
    old: object
    new: object

    def __str__(self) -> str:
        def show(v) -> str:
            s = json.dumps(v, sort_keys=True, default=str)
            return s if len(s) <= 80 else s[:77] + "..."

        return f"{self.key}: {show(self.old)} in the run, {show(self.new)} now"


def _diff(old, new, key: str, out: list[Difference]) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        for k in sorted(set(old) | set(new), key=str):
            sub = f"{key}.{k}" if key else str(k)
            if k not in old or k not in new:
                out.append(Difference(sub, old.get(k, "<absent>"), new.get(k, "<absent>")))
            else:
                _diff(old[k], new[k], sub, out)
    elif json.dumps(old, sort_keys=True, default=str) != json.dumps(new, sort_keys=True, default=str):
        out.append(Difference(key, old, new))


def _extendable_keys(extendable: Collection[str]) -> tuple[set[str], dict[str, set[str]]]:
    """Split ``extendable`` into top-level keys and nested list keys (``"methods.*.grid"`` -> {"methods": {"grid"}})."""
    top: set[str] = set()
    nested: dict[str, set[str]] = {}
    for k in extendable:
        parts = k.split(".")
        if len(parts) == 3 and parts[1] == "*":
            top.add(parts[0])
            nested.setdefault(parts[0], set()).add(parts[2])
        elif len(parts) == 1:
            top.add(k)
        else:
            raise ValueError(f"an extendable key is 'key' or 'key.*.sub', got {k!r}")
    return top, nested


def _without_lists(entry, lists: set[str]):
    """A dict entry without its extendable nested lists (compared as sets of additions, not as values)."""
    if not lists or not isinstance(entry, dict):
        return entry
    return {k: v for k, v in entry.items() if not (k in lists and isinstance(v, list))}


def identity_differences(old: dict, new: dict, extendable: Collection[str] = ()) -> list[Difference]:
    """The keys on which two run identities disagree.

    Keys in ``extendable`` hold a list (e.g. targets) or a dict (e.g. method label -> settings): entries present in
    only one of the two are not differences (a resume may add or leave out targets/methods), but a dict entry present
    in both must agree in every sub-key. A list inside a dict entry is extendable too when named as ``"key.*.sub"``
    (e.g. ``methods.*.grid``, so that a resume may add grid values to a method; a row is a function of its own
    grid value, never of the others').

    Args:
        old: identity recorded in the run (JSON-like dict).
        new: identity of the new invocation.
        extendable: top-level keys that may gain entries, and ``"key.*.sub"`` nested lists.

    Returns:
        The differences, in sorted key order (empty when the run may be resumed).

    Raises:
        ValueError: an ``extendable`` name of another form.
    """
    top, nested = _extendable_keys(extendable)
    out: list[Difference] = []
    for k in sorted(set(old) | set(new)):
        if k in top:
            a, b = old.get(k), new.get(k)
            if isinstance(a, dict) and isinstance(b, dict):
                lists = nested.get(k, set())
                for sub in sorted(set(a) & set(b), key=str):
                    _diff(_without_lists(a[sub], lists), _without_lists(b[sub], lists), f"{k}.{sub}", out)
                continue
            if isinstance(a, list) and isinstance(b, list):
                continue
        if k not in old or k not in new:
            out.append(Difference(k, old.get(k, "<absent>"), new.get(k, "<absent>")))
        else:
            _diff(old[k], new[k], k, out)
    return out


def merge_identity(old: dict, new: dict, extendable: Collection[str] = ()) -> tuple[dict, dict]:
    """Union of two compatible identities (see :func:`identity_differences`).

    Returns:
        (merged identity: ``old`` with the new entries of the extendable keys appended in order, the additions as
        ``{key: [new entries]}`` with only non-empty keys; a nested list's additions under its dotted path, e.g.
        ``{"methods.ga.grid": [32, 64]}``).

    Raises:
        ValueError: an ``extendable`` name of another form.
    """
    top, nested = _extendable_keys(extendable)
    merged = dict(old)
    added: dict[str, list] = {}
    for k in [k for k in extendable if "." not in k] + sorted(top - set(extendable)):
        a, b = old.get(k), new.get(k)
        if isinstance(a, dict) and isinstance(b, dict):
            extra = [x for x in b if x not in a]
            entries = {**a, **{x: b[x] for x in extra}}
            for sub in (x for x in b if x in a):
                for lk in sorted(nested.get(k, ())):
                    la = a[sub].get(lk) if isinstance(a[sub], dict) else None
                    lb = b[sub].get(lk) if isinstance(b[sub], dict) else None
                    more = [v for v in lb if v not in la] if isinstance(la, list) and isinstance(lb, list) else []
                    if more:
                        entries[sub] = {**entries[sub], lk: la + more}
                        added[f"{k}.{sub}.{lk}"] = more
            merged[k] = entries
        elif isinstance(a, list) and isinstance(b, list):
            extra = [x for x in b if x not in a]
            merged[k] = a + extra
        else:
            continue
        if extra:
            added[k] = extra
    return merged, added


class RunIdentityError(InputError):
    """A run directory holds a run with other settings, or one whose identity cannot be checked.

    Attributes:
        differences: the :class:`Difference` list (empty when the identity is missing or unreadable).
    """

    def __init__(self, message: str, path, differences: Iterable[Difference] = ()):
        self.differences = list(differences)
        super().__init__(message, path)


def open_run(
    run: str | Path, kind: str, identity: dict, *, extendable: Collection[str] = (), resume: bool = True
) -> tuple[dict, dict, dict]:
    """Check a new invocation against the run already in ``run`` (if any).

    Args:
        run: the run directory (need not exist).
        kind: the protocol (its registry name): a directory of another protocol is refused.
        identity: the new invocation's identity (JSON-like).
        extendable: identity keys that may gain entries (see :func:`identity_differences`).
        resume: the user asked to continue the run; without it a directory that already has a config.json is
            accepted only when the identity is equal (e.g. a rerun after a kill during the first stage).

    Returns:
        (merged identity to record, additions ``{key: [entries]}``, the previous config.json or {}).

    Raises:
        InputError: config.json is not a regular file (a FIFO, a device, a folder) or larger than
            :data:`RUN_JSON_BYTES`.
        RunIdentityError: config.json is not JSON, belongs to another protocol, has no identity (an older dukb),
            or its identity differs on a non-extendable key or a shared entry (every differing key is named with
            both values, on one line).
    """

    path = RunDir(run).config
    if not os.path.lexists(path):
        return dict(identity), {}, {}
    data = read_bytes(path, "run config", limit=RUN_JSON_BYTES)  # a FIFO, device or folder: an error naming it
    try:
        old, problem, _ = json_problem(data.decode("utf-8"))
    except ValueError as e:  # not UTF-8
        old, problem = None, f"{type(e).__name__}: {e}"
    if problem:
        raise RunIdentityError(f"not a readable run config ({problem}); choose another -o", path)
    if not isinstance(old, dict):
        raise RunIdentityError("not a run config (expected a JSON object); choose another -o", path)
    if old.get("protocol", kind) != kind:
        raise RunIdentityError(f"holds a `dukb {old.get('protocol')}` run, not `dukb {kind}`; choose another -o", path)
    rec = old.get("identity")
    if not isinstance(rec, dict) or rec.get("identity_version") != IDENTITY_VERSION:
        raise RunIdentityError(
            "this run was written by an older dukb without a comparable run identity; it cannot "
            "be resumed safely (choose another -o)",
            path,
        )
    shape = config_problem(old)
    if shape:
        raise RunIdentityError(f"a damaged run config ({shape}); restore it or choose another -o", path)
    try:
        diffs = identity_differences(rec, identity, extendable if resume else ())
        if not diffs:
            merged, added = merge_identity(rec, identity, extendable)
    except (TypeError, KeyError, AttributeError, ValueError, IndexError) as e:  # a value of another type
        raise RunIdentityError(
            f"a damaged run config (its identity has a value of another type: "
            f"{type(e).__name__}: {e}); restore it or choose another -o",
            path,
        ) from None
    if diffs:
        raise RunIdentityError(
            f"the run here has other settings ({len(diffs)} differing key"
            f"{'s' if len(diffs) > 1 else ''}): "
            + "; ".join(map(str, diffs))
            + ". Resume with the run's settings or choose another -o",
            path,
            diffs,
        )
    return merged, added, old


def config_problem(record: dict) -> str | None:
    """What is wrong with the shape of a run's config.json (a JSON object), or None: ``protocol`` a string,
    ``identity`` an object, ``history`` (when present) a list of objects whose ``added`` is an object. The values a
    resume reads back are checked before they are used, so a damaged file is one line naming it, not a traceback.
    """
    if "protocol" in record and not isinstance(record["protocol"], str):
        return "protocol is not a string"
    if not isinstance(record.get("identity"), dict):
        return "identity is not an object"
    history = record.get("history", [])
    if not isinstance(history, list) or not all(
        isinstance(h, dict) and isinstance(h.get("added", {}), dict) for h in history
    ):
        return "history is not a list of objects"
    return None


def history_entry(added: dict, **extra) -> dict:
    """One ``history`` record of a run: when it was (re)started, with what command, and what it added."""
    return {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "argv": list(sys.argv), "added": added, **extra}


__all__ = [
    "Difference",
    "IDENTITY_VERSION",
    "MAX_HASHED_BYTES",
    "RunIdentityError",
    "config_problem",
    "history_entry",
    "identity_differences",
    "merge_identity",
    "open_run",
    "sha256_file",
    "sha256_json",
]
