"""The run directory, shared by every protocol (`dukb evaluate`, `dukb restor`, ...): its identity, its provenance
and its append-only results.

**Identity.** A run's ``config.json`` holds ``identity``: every setting that changes a result row (KB and rule
fingerprints, model weights' hash, seed, learning rate, prompt, dtype, sets, grids, scopes, retain and probe
settings). A rerun into the same directory computes its own identity and compares:

- any differing key is refused (:class:`RunIdentityError`, exit 2) with the key and both values, so rows made
  with different settings are never mixed in one file;
- keys listed as *extendable* (evaluate: ``targets``, ``methods`` and each method's grid) may gain entries: a resume
  that adds targets, methods or grid values to a run whose other settings are equal goes ahead, and the additions
  are recorded in ``history``.

**Provenance.** What does not change a row but explains it (versions, device, world size, dukb's git revision,
command line, time) is recorded beside the identity, never compared.

**Results.** :class:`ResultsFile`: one JSON line per row, flushed and fsynced; a torn last line (a kill mid-write)
is cut off on open.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Collection, Iterable

from dukb import InputError

#: version of the identity layout; a run written with another layout cannot be resumed (2: probing judges the answer
#: line, CL-DU's trace left the setting, the preset family is recorded)
IDENTITY_VERSION = 2


# ----------------------------------------------------------------------------------------------- hashing --------
def sha256_file(path: str | Path, chunk: int = 1 << 22) -> str:
    """Hex SHA-256 of a file's bytes.

    Raises:
        InputError: the file cannot be read (names it).
    """
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
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
    (evaluate: ``methods.*.grid``, so that a resume may add grid values to a method; a row is a function of its own
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


def open_run(run: str | Path, kind: str, identity: dict, *, extendable: Collection[str] = (),
             resume: bool = True) -> tuple[dict, dict, dict]:
    """Check a new invocation against the run already in ``run`` (if any).

    Args:
        run: the run directory (need not exist).
        kind: the protocol ("evaluate", "restor", ...): a directory of another protocol is refused.
        identity: the new invocation's identity (JSON-like).
        extendable: identity keys that may gain entries (see :func:`identity_differences`).
        resume: the user asked to continue the run; without it a directory that already has a config.json is
            accepted only when the identity is equal (e.g. a rerun after a kill during the first stage).

    Returns:
        (merged identity to record, additions ``{key: [entries]}``, the previous config.json or {}).

    Raises:
        RunIdentityError: config.json is unreadable, belongs to another protocol, has no identity (an older dukb),
            or its identity differs on a non-extendable key or a shared entry (every differing key is named with
            both values, on one line).
    """
    path = Path(run) / "config.json"
    if not path.exists():
        return dict(identity), {}, {}
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise RunIdentityError(f"not a readable run config ({type(e).__name__}: {e}); choose another -o", path) \
            from None
    if not isinstance(old, dict):
        raise RunIdentityError("not a run config (expected a JSON object); choose another -o", path)
    if old.get("protocol", kind) != kind:
        raise RunIdentityError(f"holds a `dukb {old.get('protocol')}` run, not `dukb {kind}`; choose another -o",
                               path)
    rec = old.get("identity")
    if not isinstance(rec, dict) or rec.get("identity_version") != IDENTITY_VERSION:
        raise RunIdentityError("this run was written by an older dukb without a comparable run identity; it cannot "
                               "be resumed safely (choose another -o)", path)
    diffs = identity_differences(rec, identity, extendable if resume else ())
    if diffs:
        raise RunIdentityError(f"the run here has other settings ({len(diffs)} differing key"
                               f"{'s' if len(diffs) > 1 else ''}): " + "; ".join(map(str, diffs))
                               + ". Resume with the run's settings or choose another -o", path, diffs)
    merged, added = merge_identity(rec, identity, extendable)
    return merged, added, old


def history_entry(added: dict, **extra) -> dict:
    """One ``history`` record of a run: when it was (re)started, with what command, and what it added."""
    return {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "argv": list(sys.argv), "added": added, **extra}


def write_json_atomic(path: str | Path, obj) -> None:
    """Write JSON through a temporary file and an atomic rename, so a kill never leaves half a file."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, default=str), encoding="utf-8")
    os.replace(tmp, path)


# -------------------------------------------------------------------------------------------- provenance --------
def versions() -> dict:
    """Versions of python and of every library a result depends on, and dukb's version and git revision."""
    from importlib import metadata

    from dukb import __version__

    out = {"python": platform.python_version(), "dukb": __version__}
    for dist in ("torch", "transformers", "tokenizers", "peft", "accelerate", "clingo", "ortools", "numpy", "gguf"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    rev = git_revision()
    if rev:
        out["dukb_revision"] = rev
    return out


def git_revision() -> str | None:
    """``<commit>`` (with ``+dirty`` for uncommitted changes) of the checkout dukb runs from, or None when dukb is
    installed from a wheel or git is unavailable."""
    root = Path(__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def device_info(device: str) -> dict:
    """The device a result was computed on, in words: device string, CPU threads, GPU name on CUDA."""
    import torch

    info = {"device": device, "threads": torch.get_num_threads(), "platform": platform.platform()}
    if device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name(torch.device(device))
    return info


def provenance(device: str | None = None, **extra) -> dict:
    """Provenance of a run: versions (with dukb's revision), device, world size, command line and time.

    Args:
        device: the resolved device string (None: not recorded).
        extra: more JSON-able fields (e.g. settings that do not change rows, like gradient checkpointing).
    """
    from dukb.neural import distributed as dist

    out = {"versions": versions(), "world_size": dist.world_size(), "argv": list(sys.argv),
           "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    if device is not None:
        out["device"] = device_info(device)
    return out | extra


# ----------------------------------------------------------------------------------------------- results --------
def read_results(path) -> list[dict]:
    """Rows of a results.jsonl; a truncated last line (from a kill) is skipped.

    Raises:
        ValueError: a line other than the last is not valid JSON (names file and line).
    """
    rows = []
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if i == len(lines):
                break
            raise ValueError(f"{path}:{i}: not a JSON line") from None
    return rows


def evaluate_row_key(row: dict) -> tuple:
    """(target, method label, swept value) identifying a `dukb evaluate` row."""
    return (int(row["target"]), row["method"], float(row["setting"][row["param"]]))


class ResultsFile:
    """Append-only JSONL of result rows with resume support.

    Each row is written as one line, flushed and fsynced; on open, a torn last line of the file this process owns
    is cut off so the file stays valid JSONL. :meth:`absorb` adds the rows of other files (the shard files of a
    multi-process run, see :mod:`dukb.neural.distributed`) as done; those files are read, never changed.

    Args:
        path: the file this process appends to.
        key: function row -> hashable key identifying a row (default: :func:`evaluate_row_key`).
    """

    def __init__(self, path: Path, key: Callable[[dict], tuple] = evaluate_row_key):
        self.path = Path(path)
        self.key = key
        self.rows: list[dict] = []
        if self.path.exists():
            good, keep = [], 0
            data = self.path.read_bytes()
            pos = 0
            for raw in data.splitlines(keepends=True):
                try:
                    good.append(json.loads(raw))
                    keep = pos + len(raw)
                except json.JSONDecodeError:
                    break
                pos += len(raw)
            if keep < len(data):
                with open(self.path, "r+b") as fh:
                    fh.truncate(keep)
            if good and not data[:keep].endswith(b"\n"):
                with open(self.path, "ab") as fh:
                    fh.write(b"\n")
            self.rows = good
        self.done = {self.key(r) for r in self.rows}

    def absorb(self, paths) -> None:
        """Count the rows of the complete lines of ``paths`` (other than this file; missing ones skipped) as done.

        Call it once every process has repaired its own file (after a barrier), so no file is read mid-repair.

        Raises:
            ValueError: a line other than the last of a file is not JSON (names file and line).
        """
        for other in paths:
            other = Path(other)
            if other.exists() and other.resolve() != self.path.resolve():
                for row in read_results(other):
                    if self.key(row) not in self.done:
                        self.rows.append(row)
                        self.done.add(self.key(row))

    def append(self, row: dict) -> None:
        """Write one row durably."""
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self.rows.append(row)
        self.done.add(self.key(row))


SHARD_GLOB = "results.rank*.jsonl"


def merge_shards(run: Path, order=None, key: Callable[[dict], tuple] = evaluate_row_key) -> int:
    """Append the rows of RUN_DIR/results.rank*.jsonl (a multi-process run) that results.jsonl lacks, then delete
    the shard files. Call on one process, after every process finished writing.

    Args:
        run: run directory.
        order: optional key function on rows for the order of the appended rows.
        key: the row key (see :class:`ResultsFile`).

    Returns:
        number of rows appended.

    Raises:
        ValueError: a shard line other than the last is not JSON (names file and line).
    """
    shards = sorted(Path(run).glob(SHARD_GLOB))
    if not shards:
        return 0
    main = ResultsFile(Path(run) / "results.jsonl", key)
    new: dict[tuple, dict] = {}
    for sh in shards:
        for row in read_results(sh):
            k = key(row)
            if k not in main.done:
                new.setdefault(k, row)
    for row in sorted(new.values(), key=order) if order else new.values():
        main.append(row)
    for sh in shards:
        sh.unlink()
    return len(new)


__all__ = ["SHARD_GLOB", "merge_shards", "Difference", "IDENTITY_VERSION", "ResultsFile", "RunIdentityError", "device_info",
           "evaluate_row_key", "history_entry", "identity_differences", "merge_identity", "open_run", "provenance",
           "read_results", "sha256_file", "sha256_json", "versions", "write_json_atomic"]
