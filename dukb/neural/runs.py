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

**One writer.** :func:`claim_run` takes RUN_DIR/.dukb/run.lock (``flock``, released by the kernel when its process
ends, even by SIGKILL) before config.json is read, and the protocol holds it until it returns
(:func:`holds_run_lock`). A second invocation with other settings is refused at once, naming the directory and the
holder (pid, host); one with the same settings waits for the holder, then resumes.

**Layout.** The top level of a run directory holds what a user reads: config.yaml (the options, written once by the
run's owner), config.json (identity and provenance), commands.log (one line per invocation, :func:`log_invocation`),
results.jsonl, report.md, summary.csv, figures, run.log and the caches. Every lock and claim lives in the hidden
folder RUN_DIR/.dukb/ (:data:`BOOKKEEPING_DIR`): run.lock, render.lock, units/ (a claim per work unit, planned.json
and its lock) and workers/ (each live worker's lock). A run made by a dukb that kept them at the top level is moved
over by its next owner (:func:`_migrate_bookkeeping`).

**Results.** :class:`ResultsFile`: one JSON line per row, flushed and fsynced. Reading keeps every valid row: each
damaged line is reported as FILE:LINE on stderr, and on resume moved to results.damaged.jsonl with its line number;
a torn last line (a kill mid-write) is dropped with a note. A line that is JSON but not a row of its protocol (a
field the report reads missing or of another type, a NaN, a bool for an integer; :func:`row_check`) is damaged too.

**Log.** While a protocol holds its run, library warnings (transformers, peft, torch, ``warnings.warn``) go to
RUN_DIR/run.log (:func:`attach_run_log`), not the terminal.

**Bounded.** Every file of a run directory that dukb did not just write (config.json, results*.jsonl, run.lock,
the caches) is read through :func:`dukb.kb.csvfile.read_bytes`: only a regular file of bounded size, so a FIFO,
a device (a link to ``/dev/zero``) or a directory planted in its place is an error naming it, not a hang. Files are
written through a fresh temporary file and an atomic rename (:func:`write_bytes_atomic`), appended to only when
they are regular files (:func:`open_append`), and a report's outputs are cleared of anything but a regular file
first (:func:`output_file`).

**Inside.** Nothing is written through a symbolic link: :func:`claim_run` refuses a link anywhere below RUN_DIR
(:func:`refuse_links_in`) before the run is touched, and every write below a run directory this process holds checks
again that no part of the path below RUN_DIR is a link (:func:`refuse_links`; files opened with ``O_NOFOLLOW``,
folders ``lstat``-checked): one line ``dukb: error: PATH: a symbolic link (to TARGET) is in the place of a file or
folder dukb writes; ...``, exit 2. RUN_DIR itself may be a link (the user chose it); an empty ``-o`` is refused.

**Checked, not trusted.** config.json's shape (:func:`config_problem`), sets.json and forget_sets.json
(:mod:`dukb.neural.plan`: every cached set verified against the KB) and the claims (:func:`read_claim`: one that is
not a claim dukb wrote is stale, never "taken") are checked when read back. No lock waits without limit:
:func:`file_lock` (render.lock, the plan's lock) names its holder (pid, host: written in the lock file) and gives up
after :data:`LOCK_WAIT` seconds (60) or at once when the holder is stopped; a run lock held by a process stopped for
longer than that is refused too.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import math
import os
import platform
import secrets
import socket
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Collection, Iterable

from dukb import InputError, one_line
from dukb.kb.csvfile import file_kind

try:  # POSIX; elsewhere a run directory is not locked
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None

#: version of the identity layout; a run written with another layout cannot be resumed (2: probing judges the answer
#: line, CL-DU's trace left the setting, the preset family is recorded; 3: ``npo`` is the Eval-DU/MUSE code's logit
#: form, the NPO paper's sequence form is ``npo_seq`` (muse's and control's identities name methods only), and
#: evaluate's step grids run on the reference schedule by default)
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
    from dukb.kb.csvfile import open_regular

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
        InputError: config.json is not a regular file (a FIFO, a device, a folder) or larger than
            :data:`RUN_JSON_BYTES`.
        RunIdentityError: config.json is not JSON, belongs to another protocol, has no identity (an older dukb),
            or its identity differs on a non-extendable key or a shared entry (every differing key is named with
            both values, on one line).
    """
    from dukb.kb.csvfile import read_bytes

    path = Path(run) / "config.json"
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
        raise RunIdentityError(f"holds a `dukb {old.get('protocol')}` run, not `dukb {kind}`; choose another -o",
                               path)
    rec = old.get("identity")
    if not isinstance(rec, dict) or rec.get("identity_version") != IDENTITY_VERSION:
        raise RunIdentityError("this run was written by an older dukb without a comparable run identity; it cannot "
                               "be resumed safely (choose another -o)", path)
    shape = config_problem(old)
    if shape:
        raise RunIdentityError(f"a damaged run config ({shape}); restore it or choose another -o", path)
    try:
        diffs = identity_differences(rec, identity, extendable if resume else ())
        if not diffs:
            merged, added = merge_identity(rec, identity, extendable)
    except (TypeError, KeyError, AttributeError, ValueError, IndexError) as e:  # a value of another type
        raise RunIdentityError(f"a damaged run config (its identity has a value of another type: "
                               f"{type(e).__name__}: {e}); restore it or choose another -o", path) from None
    if diffs:
        raise RunIdentityError(f"the run here has other settings ({len(diffs)} differing key"
                               f"{'s' if len(diffs) > 1 else ''}): " + "; ".join(map(str, diffs))
                               + ". Resume with the run's settings or choose another -o", path, diffs)
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
    if not isinstance(history, list) or not all(isinstance(h, dict) and isinstance(h.get("added", {}), dict)
                                                for h in history):
        return "history is not a list of objects"
    return None


# ------------------------------------------------------------------------------------------- bookkeeping --------
#: the hidden folder of a run directory that holds its bookkeeping (locks, work-unit claims, worker locks, the plan
#: of work units), so the top level holds only what a user reads (config.yaml, config.json, commands.log,
#: results.jsonl, report.md, summary.csv, figures, caches): RUN_DIR/.dukb/
BOOKKEEPING_DIR = ".dukb"
#: the lock file of a run directory, in :data:`BOOKKEEPING_DIR` (its content: the holder's pid, host, protocol, start
#: time and identity)
LOCK_NAME = "run.lock"
#: the lock the processes sharing a run take in turn to render its report, in :data:`BOOKKEEPING_DIR`
RENDER_LOCK_NAME = "render.lock"
#: where the work units of a run are claimed (one file per unit, and the plan of units) and where each live worker
#: holds its lock: folders of :data:`BOOKKEEPING_DIR`
UNITS_DIR = "units"
WORKERS_DIR = "workers"
#: the bookkeeping names that dukb before RUN_DIR/.dukb/ kept at a run's top level (moved or removed by
#: :func:`claim_run`'s owner, :func:`_migrate_bookkeeping`)
LEGACY_BOOKKEEPING = (LOCK_NAME, RENDER_LOCK_NAME, UNITS_DIR, WORKERS_DIR)
#: the log of a run's invocations, one line each (:func:`log_invocation`), beside config.yaml
COMMANDS_LOG = "commands.log"


# ------------------------------------------------------------------------------------- writes stay inside --------
#: O_NOFOLLOW where the platform has it: a file dukb opens for writing in a run directory is never a symbolic link
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
#: the run directories this process writes into (absolute, as given; :func:`guard_run`): below them no part of a path
#: written to may be a symbolic link
_GUARDED: set[str] = set()


def check_output_dir(run: str | Path | None, option: str = "-o") -> Path:
    """The output directory of a run command, refused when it is missing or empty (``-o ''`` would write into the
    working directory).

    Raises:
        InputError: ``no output directory: OPTION is empty``.
    """
    if run is None or not str(run).strip():
        raise InputError(f"no output directory: {option} is empty (give the run directory to write into)")
    return Path(run)


def guard_run(run: str | Path) -> None:
    """Record ``run`` as a directory this process writes into: from now on every write of this module below it
    (:func:`refuse_links`) refuses a symbolic link at any level below ``run`` (``run`` itself may be one: the user
    chose it)."""
    _GUARDED.add(os.path.abspath(run))


def refuse_links(path: str | Path) -> Path:
    """Check that writing ``path`` goes nowhere else: ``path`` itself is not a symbolic link, and, when it lies in a
    run directory of :func:`guard_run`, no existing part of it below that directory is one (a planted
    ``.dukb/units``, ``finetuned`` or ``probes`` link would carry the write out of the run).

    Returns:
        ``Path(path)``.

    Raises:
        InputError: one line naming the link and where it points: ``a symbolic link (to TARGET) is in the place of a
            file or folder dukb writes; dukb writes nothing through a link: remove it``.
    """
    full = os.path.abspath(path)
    parts = [full]
    for root in _GUARDED:
        if full.startswith(root.rstrip(os.sep) + os.sep):
            cur = root
            for name in Path(full[len(root.rstrip(os.sep)) + 1:]).parts:
                cur = os.path.join(cur, name)
                parts.append(cur)
    for p in parts:
        if os.path.islink(p):
            raise link_refusal(p)
    return Path(path)


def link_refusal(path: str | Path) -> InputError:
    """The one-line error for a symbolic link found where dukb writes (named, with its target)."""
    try:
        target = f" (to {os.readlink(path)})"
    except OSError:
        target = ""
    return InputError(f"a symbolic link{target} is in the place of a file or folder dukb writes; dukb writes nothing "
                      "through a link: remove it", path)


def refuse_links_in(folder: str | Path, depth: int = 4) -> Path:
    """Check a folder that a library fills (transformers' ``save_pretrained``, a model cache in a run directory)
    before it writes: the folder and its parts below a guarded run (:func:`refuse_links`) and every entry in it, down
    to ``depth`` levels, are not symbolic links, so no file written there lands elsewhere.

    Returns:
        ``Path(folder)``.

    Raises:
        InputError: a link (named, :func:`link_refusal`).
    """
    if os.path.abspath(folder) not in _GUARDED:  # a run directory itself may be a link: the user chose it
        refuse_links(folder)

    def walk(d: str, left: int) -> None:
        try:
            entries = list(os.scandir(d))
        except OSError:
            return
        for e in entries:
            if e.is_symlink():
                raise link_refusal(e.path)
            if left > 1 and e.is_dir(follow_symlinks=False):
                walk(e.path, left - 1)

    if os.path.isdir(folder) and not os.path.islink(folder):
        walk(str(folder), depth)
    return Path(folder)


def bookkeeping_path(run: str | Path, *names: str) -> Path:
    """The path of a bookkeeping file or folder of ``run``: RUN_DIR/.dukb/NAME/... (nothing is created).

    Args:
        run: the run directory; names: the path parts inside :data:`BOOKKEEPING_DIR` (e.g. ``"run.lock"`` or
            ``"units", "planned.json"``).
    """
    return Path(run, BOOKKEEPING_DIR, *names)


def bookkeeping_dir(run: str | Path, *names: str) -> Path:
    """Create (when missing) and return RUN_DIR/.dukb (or a folder inside it, ``names``), a real directory only.

    Raises:
        InputError: something other than a directory is in its place (a symbolic link, a file, a FIFO; named), or
            it cannot be created.
    """
    path = Path(run, BOOKKEEPING_DIR)
    for part in ("", *names):
        path = path / part if part else path
        try:
            os.mkdir(path, 0o755)
        except FileExistsError:
            pass
        except OSError as e:
            raise InputError(f"cannot create the run's bookkeeping folder: {e.strerror or e}", path) from None
        try:
            mode = os.lstat(path).st_mode
        except OSError as e:
            raise InputError(f"cannot read the run's bookkeeping folder: {e.strerror or e}", path) from None
        if stat.S_ISLNK(mode):
            raise link_refusal(path)
        if not stat.S_ISDIR(mode):
            raise InputError(f"the run's bookkeeping folder is not a directory ({file_kind(mode)}); remove it", path)
    return path


# ----------------------------------------------------------------------------------- one writer per run --------
#: largest lock file read (the holder's description, a few KiB)
LOCK_BYTES = 1 << 20
#: seconds a second invocation waits for a holder that has the lock but has not yet recorded its identity
HOLDER_INFO_TIMEOUT = 30.0

_HELD: dict[tuple[str, int], "RunLock"] = {}
_HELD_GUARD = threading.Lock()


@dataclass
class RunLock:
    """This process's exclusive lock on a run directory (``flock`` on RUN_DIR/.dukb/run.lock).

    The kernel releases it when the process ends, however it ends. Attributes: ``run`` (the directory), ``fd`` (the
    locked file descriptor, not inherited by child programs), ``created`` (directories this claim created, removed
    again on release, with RUN_DIR/.dukb, when the lock file is all they hold, so a refused invocation leaves nothing
    behind),
    ``log_handler`` (the RUN_DIR/run.log handler on the root logger while the claim holds, :func:`attach_run_log`).
    """

    run: Path
    fd: int
    created: list[Path] = field(default_factory=list)
    log_handler: "logging.Handler | None" = None
    #: True for a worker that joined a live run (a shared lock; the owner wrote config.json and the caches)
    shared: bool = False
    #: what the owner recorded in the lock file (pid, host, protocol, identity, ...)
    info: dict = field(default_factory=dict)
    #: (role, merged identity, additions) of the claim until :func:`confirm_run` hands them to the front end's hook
    claimed: tuple | None = None

    def record(self, info: dict) -> None:
        """Write the holder's description into the lock file (read by a second invocation)."""
        data = json.dumps(info, sort_keys=True, default=str).encode()
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, data, 0)

    def release(self) -> None:
        """Unlock (and remove the directories this claim created when nothing but the lock file and this
        invocation's commands.log line are in them: a claim that fails leaves nothing)."""
        if self.fd < 0:
            return
        detach_run_log(self.log_handler)
        self.log_handler = None
        try:
            folder = self.run / BOOKKEEPING_DIR
            top = {p.name for p in self.run.iterdir()}
            if self.created and BOOKKEEPING_DIR in top and top <= {BOOKKEEPING_DIR, COMMANDS_LOG} \
                    and [p.name for p in folder.iterdir()] == [LOCK_NAME]:
                if COMMANDS_LOG in top:  # the line of the invocation that created the run and failed
                    (self.run / COMMANDS_LOG).unlink()
                (folder / LOCK_NAME).unlink()  # still locked: a waiter re-checks the file it locked (_same_file)
                folder.rmdir()
                for d in reversed(self.created):
                    d.rmdir()
        except OSError:
            pass
        finally:
            os.close(self.fd)  # releases the flock
            self.fd = -1


def _describe(holder: dict) -> str:
    who = f"pid {holder.get('pid', '?')} on {holder.get('host', '?')}"
    if holder.get("since"):
        who += f", since {holder['since']}"
    return f"a running `dukb {holder.get('protocol', '?')}` ({who})"


def _read_holder(path: Path) -> dict | None:
    """The holder's description in the lock file, or None when it is unreadable (not yet written, not JSON, not
    a regular file, larger than :data:`LOCK_BYTES`)."""
    from dukb.kb.csvfile import read_bytes

    try:
        info = json.loads(read_bytes(path, "run lock file", limit=LOCK_BYTES) or b"null")
    except (InputError, ValueError, RecursionError):  # RecursionError: nested too deeply
        return None
    return info if isinstance(info, dict) else None


def _same_file(fd: int, path: Path) -> bool:
    """The locked descriptor is still the file at ``path`` (a releasing holder may have removed it)."""
    try:
        a, b = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _open_lock(path: Path) -> int:
    """Open (or create) the lock file for reading and writing: a regular file only, not through a symbolic link
    (the holder's description is written into it), without blocking on a FIFO.

    Raises:
        InputError: it cannot be opened, or something other than a regular file is in its place (named).
    """
    return _open_regular_fd(path, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0), 0o644,
                            "the run's lock file is not a regular file ({}); remove it",
                            "cannot open the run's lock file: {}")


def _open_regular_fd(path: Path, flags: int, mode: int, not_regular: str, failed: str) -> int:
    """``os.open(path, flags | O_CREAT | O_NONBLOCK)`` of a regular file only (checked on the descriptor), then
    made blocking: a FIFO in its place cannot block the open, a device is refused.

    Raises:
        InputError: ``not_regular`` (formatted with what is there) or ``failed`` (with the OS error), naming
            ``path``.
    """
    try:
        fd = os.open(path, flags | os.O_CREAT | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0), mode)
    except OSError as e:
        kind = _kind_at(path, follow=not flags & _NOFOLLOW)
        if kind == "a symbolic link":
            raise link_refusal(path) from None
        if kind:
            raise InputError(not_regular.format(kind), path) from None
        raise InputError(failed.format(e.strerror or e), path) from None
    try:
        st_mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(st_mode):
            raise InputError(not_regular.format(file_kind(st_mode)), path)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _kind_at(path: Path, follow: bool = False) -> str | None:
    """What is at ``path`` when it is not a regular file (a symbolic link itself unless ``follow``), else None."""
    try:
        mode = (os.stat if follow else os.lstat)(path).st_mode
    except OSError:
        return None
    return None if stat.S_ISREG(mode) else file_kind(mode)


def _make_dir(run: Path) -> list[Path]:
    """Create ``run`` (and missing parents); return the directories created, outermost first."""
    missing = []
    p = run
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    try:
        run.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"cannot create the run directory: {e.strerror or e}", run) from None
    return list(reversed(missing))


#: protocols whose live runs a second invocation with the same identity may join as another worker
JOINABLE_PROTOCOLS = ("evaluate", "rwku", "muse", "control", "restor")
#: seconds between a waiter's attempts to lock a run held by another process
LOCK_POLL = 0.5


def _acquire(run: Path, kind: str, identity: dict, extendable: Collection[str], resume: bool,
             log: Callable[[str], None]) -> RunLock:
    """Lock ``run`` for this process, refusing or waiting for a holder (see :func:`claim_run`)."""
    started = time.monotonic()
    announced = rechecked = False
    stopped_since = None
    while True:
        created = _make_dir(run) if not run.is_dir() else []
        path = bookkeeping_path(run, LOCK_NAME)
        try:
            bookkeeping_dir(run)
            fd = _open_lock(path)
        except InputError:
            if not run.is_dir() or not os.path.lexists(path.parent):  # removed by a holder that created the run
                continue
            raise
        lock = RunLock(run, fd, created)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pass
        else:
            if _same_file(fd, path):
                return lock
            os.close(fd)  # the file was removed by the holder that just released it: lock the new one
            continue
        holder = _read_holder(path)
        if holder is None or "identity" not in holder:  # the holder is between taking the lock and opening the run
            os.close(fd)
            if time.monotonic() - started > HOLDER_INFO_TIMEOUT:
                raise RunIdentityError("in use by another process that has not recorded its settings; wait for it "
                                       "to finish or choose another -o", run)
            time.sleep(0.1)
            continue
        try:
            if holder.get("protocol") != kind:
                raise RunIdentityError(f"in use by {_describe(holder)}, not `dukb {kind}`; choose another -o", run)
            diffs = identity_differences(holder["identity"], identity, extendable if resume else ())
            if diffs:
                raise RunIdentityError(f"in use by {_describe(holder)} with other settings ({len(diffs)} differing "
                                       f"key{'s' if len(diffs) > 1 else ''}): " + "; ".join(map(str, diffs))
                                       + ". Wait for it to finish or choose another -o", run, diffs)
            if not resume:
                raise RunIdentityError(f"in use by {_describe(holder)} with the same settings; pass --resume to "
                                       "wait for it and continue the run, or choose another -o", run)
            # a holder stopped (kill -STOP, Ctrl-Z) would be waited for without end: refused once it has stayed
            # stopped for LOCK_WAIT seconds
            stopped_since = (stopped_since or time.monotonic()) if _holder_stopped(holder) else None
            if stopped_since is not None and time.monotonic() - stopped_since > LOCK_WAIT:
                raise RunIdentityError(f"in use by {_describe(holder)}, which has been stopped (kill -STOP or Ctrl-Z) "
                                       f"for more than {LOCK_WAIT:g} s; continue it (kill -CONT) or end it, then "
                                       "resume", run)
        except BaseException:
            os.close(fd)
            raise
        from dukb.neural import distributed as dist

        same = holder.get("identity") == json.loads(json.dumps(identity, default=str))  # as the lock file holds it
        if same and holder.get("protocol") in JOINABLE_PROTOCOLS and not dist.is_distributed():
            # the same run exactly: join it as another worker once its owner has finished the setup (shared lock)
            if not announced:
                log(one_line(f"{run}: in use by {_describe(holder)} with the same settings; joining it as another "
                             "worker" + ("" if holder.get("joinable") else " once its setup is done")))
                announced = True
            try:  # polled, not blocking: a stopped owner is noticed above
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                time.sleep(LOCK_POLL)
                continue
            except BaseException:
                os.close(fd)
                raise
            holder = _read_holder(path) if _same_file(fd, path) else None
            if holder is not None and holder.get("joinable") and rechecked and \
                    holder.get("identity") == json.loads(json.dumps(identity, default=str)):
                lock.shared = True
                return lock
            # once more from the top: the owner may have finished (or failed) while this waited, and then this
            # process takes the run over as its owner; if it still runs, this joins it
            if rechecked:
                time.sleep(LOCK_POLL)
            rechecked = True
            os.close(fd)
            continue
        if not announced:
            log(one_line(f"{run}: in use by {_describe(holder)} with the same settings; waiting for it to finish"))
            announced = True
        os.close(fd)  # polled, so that an owner's switch to a shared lock is never overtaken by this waiter
        time.sleep(LOCK_POLL)


def claim_run(run: str | Path, kind: str, identity: dict, *, extendable: Collection[str] = (),
              resume: bool = True, log: Callable[[str], None] | None = None) -> tuple[dict, dict, dict]:
    """Take the run directory's lock, then check the invocation against the run there (:func:`open_run`).

    The lock (``flock`` on RUN_DIR/.dukb/run.lock, which this creates along with the directory) is taken before
    config.json is read and held until the protocol function decorated with :func:`holds_run_lock` returns (or
    until the process ends, however it ends: the kernel releases it). The lock file records the holder's pid, host,
    protocol, start time and identity. When another process holds the lock:

    - other settings (its identity differs, compared as :func:`open_run` would), another protocol, or ``resume``
      off: refused at once, naming the directory and the holder;
    - exactly the same identity with ``resume`` (evaluate): one line through ``log`` saying it joins, then a shared
      lock once the owner has called :func:`open_to_workers`; the caller is a worker (:func:`run_role`) that claims
      units (:class:`UnitClaims`) and leaves config.json and the caches to the owner. If the owner ended meanwhile,
      this process owns the run (a resume);
    - the same settings with ``resume`` and additions (targets, methods, grid values): one line through ``log``
      saying it waits for the holder, then, once the lock is free, the run is opened as a resume of what the holder
      wrote.

    Nothing is written through a symbolic link: a link anywhere below RUN_DIR (down to 4 levels: a file, ``.dukb``,
    ``.dukb/units``, ``finetuned``, a claim) is refused in one line naming it before the run is touched
    (:func:`refuse_links_in`), and every later write below RUN_DIR checks again (:func:`refuse_links`).
    An empty ``run`` is refused (:func:`check_output_dir`).

    Once the run is claimed, the invocation is logged (:func:`log_invocation`: one line in RUN_DIR/commands.log with
    its role, "owner" for the invocation that creates the run, "resume" for one that continues it, "worker" for one
    that joins a live run) and the owner moves an older dukb's bookkeeping into RUN_DIR/.dukb
    (:func:`_migrate_bookkeeping`). When the protocol has accepted the run (its plan stage passed), it calls
    :func:`confirm_run`, which runs the front end's hook under the lock (:func:`set_claim_hook`: the command line
    writes RUN_DIR/config.yaml there).

    Under a multi-process launch only the main process locks (the others read what it checked). While the claim
    holds, library warnings (WARNING and worse of every logger, ``warnings.warn``) are written to RUN_DIR/run.log
    (:func:`attach_run_log`), not to the terminal.

    Args:
        run: the run directory (created when missing; removed again when the claim fails and left it empty).
        kind: the protocol ("evaluate", "rwku", "muse", "control", "restor").
        identity: the new invocation's identity (JSON-like).
        extendable: identity keys that may gain entries (see :func:`identity_differences`).
        resume: the user asked to continue the run (see :func:`open_run`).
        log: callable(str) for the waiting line (default: stderr).

    Returns:
        As :func:`open_run`: (merged identity to record, additions, previous config.json or {}).

    Raises:
        RunIdentityError: another process holds the directory with other settings, another protocol, or without
            ``resume``; or the run's config.json refuses the invocation (:func:`open_run`). One line naming the
            directory (and the holder's pid and host).
        InputError: the directory or its lock file cannot be created; RUN_DIR/.dukb is not a directory; an older
            dukb still holds the run (its RUN_DIR/run.lock).
    """
    from dukb.neural import distributed as dist

    run = check_output_dir(run)
    guard_run(run)  # no write below RUN_DIR follows a symbolic link (refuse_links)
    refuse_links_in(run)  # a link planted anywhere in the run is refused before anything is read or written
    key = (os.path.realpath(run), threading.get_ident())
    if fcntl is None or (dist.is_distributed() and not dist.is_main_process()) or key in _HELD:
        return open_run(run, kind, identity, extendable=extendable, resume=resume)
    lock = _acquire(run, kind, identity, extendable, resume, log or _stderr)
    info = {"pid": os.getpid(), "host": socket.gethostname(), "protocol": kind,
            "since": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "argv": list(sys.argv)}
    try:
        if not lock.shared:  # a joining worker leaves the owner's record in place
            lock.record(info)
        merged, added, old = open_run(run, kind, identity, extendable=extendable, resume=resume)
        if not lock.shared:
            lock.info = info | {"identity": merged}
            lock.record(lock.info)
            _migrate_bookkeeping(run)
        role = "worker" if lock.shared else ("resume" if old else "owner")
        log_invocation(run, role)
        lock.claimed = (role, merged, added)  # for the front end's hook, once the protocol accepts the run
        lock.log_handler = attach_run_log(run)
    except BaseException:
        lock.release()
        raise
    with _HELD_GUARD:
        _HELD[key] = lock
    return merged, added, old


#: what the front end does for each invocation that claims a run (:func:`set_claim_hook`), or None
_CLAIM_HOOK: "Callable[[Path, str, dict, dict], None] | None" = None


def set_claim_hook(hook: "Callable[[Path, str, dict, dict], None] | None"):
    """Set what :func:`confirm_run` calls once a protocol has claimed a run and accepted it (its plan stage passed),
    under the run lock: ``hook(run, role, identity, added)`` with the role ("owner", "resume" or "worker"), the
    run's merged identity and what this invocation added to it.
    The command line sets one per command (it writes RUN_DIR/config.yaml, :mod:`dukb.cli.config_file`) and clears
    it when the command ends; library calls run without one.

    Args:
        hook: the callable, or None for none.

    Returns:
        The hook set before (to restore).
    """
    global _CLAIM_HOOK
    before, _CLAIM_HOOK = _CLAIM_HOOK, hook
    return before


def confirm_run(run: str | Path) -> None:
    """Hand this thread's claim of ``run`` to the front end's hook (:func:`set_claim_hook`), once: called by a protocol
    when its plan stage has accepted the run (no later refusal can leave a config.yaml describing an addition the
    run never recorded). Nothing without a hook, a claim of this thread, or after the first call.

    Raises:
        whatever the hook raises (e.g. InputError: config.yaml cannot be written).
    """
    with _HELD_GUARD:
        lock = _HELD.get((os.path.realpath(Path(run)), threading.get_ident()))
    if lock is None or lock.claimed is None:
        return
    claimed, lock.claimed = lock.claimed, None
    if _CLAIM_HOOK is not None:
        _CLAIM_HOOK(Path(run), *claimed)


def log_invocation(run: str | Path, role: str, argv: list[str] | None = None) -> None:
    """Append one line for this invocation to RUN_DIR/commands.log (:data:`COMMANDS_LOG`): five tab-separated
    fields, the UTC time (ISO 8601, ``Z``), the role ("owner": it created the run; "resume": it continued it;
    "worker": it joined a live run), ``dukb VERSION``, the working directory and the command line, both
    shell-quoted (``cd DIR && COMMAND`` repeats the invocation); control characters are escaped, so a line is one
    line. The file is appended to with one write (processes sharing a run append alike), as a regular file only.

    Args:
        run: the run directory; role: as above; argv: the command line (default: ``sys.argv``).

    Raises:
        InputError: something other than a regular file is in its place, or it cannot be written (named).
    """
    import shlex

    from dukb import __version__

    words = list(sys.argv if argv is None else argv)
    fields = [time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), role, f"dukb {__version__}",
              shlex.quote(os.getcwd()), shlex.join(words)]
    line = "\t".join(one_line(f) for f in fields) + "\n"
    with open_append(Path(run) / COMMANDS_LOG) as fh:
        fh.write(line)


#: the entries an older dukb's RUN_DIR/units folder holds: claims, takeover markers, the plan and its lock
_LEGACY_UNIT_FILES = (".claim", "planned.json", "planned.json.lock")


def _migrate_bookkeeping(run: Path) -> None:
    """Move the bookkeeping a dukb before RUN_DIR/.dukb kept at the run's top level (:data:`LEGACY_BOOKKEEPING`)
    into RUN_DIR/.dukb, so an older run resumes with its work-unit claims and its top level holds user files only.
    Called by :func:`claim_run` for the run's owner (an exclusive lock), after its identity was accepted.

    - run.lock: refused when an older dukb still holds it (``flock``), else removed;
    - render.lock: removed;
    - units/: moved to RUN_DIR/.dukb/units when it holds claims and the plan only and RUN_DIR/.dukb/units does not
      exist yet (its claims keep their done state; a claim's worker, gone, is taken over as usual);
    - workers/: its lock files removed (their workers are gone: the older owner's lock is free), then the folder
      when empty.

    Only regular files and real directories are touched (a symbolic link in their place is left alone).

    Raises:
        RunIdentityError: an older dukb still holds RUN_DIR/run.lock (one line).
    """
    def kind(path: Path) -> int | None:
        try:
            return os.lstat(path).st_mode
        except OSError:
            return None

    old_lock = run / LOCK_NAME
    mode = kind(old_lock)
    if mode is not None and stat.S_ISREG(mode):
        if fcntl is not None:
            try:
                fd = os.open(old_lock, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
            except OSError:
                fd = -1
            if fd >= 0:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise RunIdentityError("in use by an older dukb (it holds RUN_DIR/run.lock); wait for it to "
                                           "finish, then resume", run) from None
                finally:
                    os.close(fd)
        old_lock.unlink(missing_ok=True)
    mode = kind(run / RENDER_LOCK_NAME)
    if mode is not None and stat.S_ISREG(mode):
        (run / RENDER_LOCK_NAME).unlink(missing_ok=True)
    units = run / UNITS_DIR
    mode = kind(units)
    if mode is not None and stat.S_ISDIR(mode) and not os.path.lexists(bookkeeping_path(run, UNITS_DIR)):
        names = [p.name for p in units.iterdir()]
        if all(n.endswith(_LEGACY_UNIT_FILES) or ".claim.takeover-" in n for n in names):
            bookkeeping_dir(run)
            os.rename(units, bookkeeping_path(run, UNITS_DIR))
    workers = run / WORKERS_DIR
    mode = kind(workers)
    if mode is not None and stat.S_ISDIR(mode):
        for p in workers.iterdir():
            m = kind(p)
            if p.name.endswith(".lock") and m is not None and stat.S_ISREG(m):
                p.unlink(missing_ok=True)
        try:
            workers.rmdir()
        except OSError:
            pass  # something else is in it: left alone


def run_role(run: str | Path) -> str | None:
    """This thread's role in ``run``: "owner" (it holds the exclusive lock, or shares it after
    :func:`open_to_workers`), "worker" (it joined a live run) or None (it holds no lock there)."""
    with _HELD_GUARD:
        lock = _HELD.get((os.path.realpath(Path(run)), threading.get_ident()))
    if lock is None:
        return None
    return "worker" if lock.shared else "owner"


def open_to_workers(run: str | Path) -> None:
    """Let other invocations with the same settings join ``run`` as workers: the owner, once config.json, the caches
    and the model are on disk, records ``joinable`` in the lock file and turns its exclusive lock into a shared one.
    Nothing when this thread is not the run's owner.

    Source: dukb (work units any launcher can run: several shells, a SLURM array, torchrun without a process group).
    """
    with _HELD_GUARD:
        lock = _HELD.get((os.path.realpath(Path(run)), threading.get_ident()))
    if lock is None or lock.shared or fcntl is None:
        return
    lock.record({**lock.info, "joinable": True})
    fcntl.flock(lock.fd, fcntl.LOCK_SH)


def release_run(run: str | Path) -> None:
    """Release this thread's lock on ``run`` (taken by :func:`claim_run`); nothing when it holds none."""
    with _HELD_GUARD:
        lock = _HELD.pop((os.path.realpath(Path(run)), threading.get_ident()), None)
    if lock is not None:
        lock.release()


def holds_run_lock(fn: Callable) -> Callable:
    """Decorator of a protocol function: every run lock :func:`claim_run` takes during the call is released when
    the call returns or raises.

    Args:
        fn: the protocol function.

    Returns:
        The wrapped function (same signature and docstring).
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        me = threading.get_ident()
        with _HELD_GUARD:
            before = {k for k in _HELD if k[1] == me}
        try:
            return fn(*args, **kwargs)
        finally:
            with _HELD_GUARD:
                mine = [k for k in _HELD if k[1] == me and k not in before]
                locks = [_HELD.pop(k) for k in mine]
            for lock in locks:
                lock.release()

    return wrapper


#: the log file of a run directory: library warnings (transformers, peft, torch, ``warnings.warn``) while a protocol
#: holds the run
RUN_LOG_NAME = "run.log"
#: its line format: time, level, logger name, message
RUN_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _RunLogHandler(logging.FileHandler):
    """A :class:`logging.FileHandler` appending to RUN_DIR/run.log, opened at its first record (a run that logs
    nothing gets no file) as a regular file only (:func:`open_append`: a FIFO or a device in its place neither
    blocks nor swallows the log). A log that cannot be written is said once on stderr, in one line."""

    def __init__(self, path: str):
        super().__init__(path, encoding="utf-8", delay=True)
        self.failed = False

    def _open(self):
        return open_append(self.baseFilename)

    def emit(self, record) -> None:
        if self.failed:
            return
        if self.stream is None:
            try:
                self.stream = self._open()
            except (InputError, OSError):
                self.handleError(record)
                return
        logging.StreamHandler.emit(self, record)

    def handleError(self, record) -> None:  # noqa: N802 - logging's name
        if not self.failed:
            self.failed = True
            e = sys.exc_info()[1]
            _stderr(f"dukb: warning: {e if isinstance(e, InputError) else f'{self.baseFilename}: {e}'}; the "
                    "run's log (library warnings) is not kept")


def attach_run_log(run: str | Path) -> logging.Handler:
    """Send WARNING and worse records of every logger to RUN_DIR/run.log (appended; time, level, logger name) by a
    handler on the root logger, and route the libraries' warnings into logging, so that transformers, peft and
    torch warnings and ``warnings.warn`` calls (the ``py.warnings`` logger) land in the run's log instead of the
    terminal. :func:`claim_run` attaches it once the run is claimed; releasing the claim removes it
    (:func:`detach_run_log`).

    ``warnings.warn`` calls go to logging from now on (``logging.captureWarnings``); transformers' and the other
    libraries' loggers are routed to logging when a model is loaded (:func:`dukb.neural.models.quiet_libraries`,
    called by ``load_model``; this module does not import the models module).

    Returns:
        The handler (for :func:`detach_run_log`).

    The file is opened at the first record, as a regular file only: one that cannot be written (a FIFO or a
    directory in its place) is said once on stderr in one line, and the run goes on.
    """
    logging.captureWarnings(True)
    handler = _RunLogHandler(str(Path(run) / RUN_LOG_NAME))
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter(RUN_LOG_FORMAT))
    logging.getLogger().addHandler(handler)
    return handler


def detach_run_log(handler: logging.Handler | None) -> None:
    """Remove a handler of :func:`attach_run_log` from the root logger and close its file (nothing for None)."""
    if handler is None:
        return
    logging.getLogger().removeHandler(handler)
    handler.close()


def _stderr(msg: str) -> None:
    print(one_line(msg), file=sys.stderr, flush=True)


def history_entry(added: dict, **extra) -> dict:
    """One ``history`` record of a run: when it was (re)started, with what command, and what it added."""
    return {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "argv": list(sys.argv), "added": added, **extra}


#: Largest JSON file of a run directory read back (config.json, sets.json, splits.json, the caches): as
#: :data:`dukb.kb.csvfile.MAX_INPUT_BYTES`.
RUN_JSON_BYTES = 256 * 1024 * 1024


def read_json(path: str | Path, what: str = "file", limit: int | None = None):
    """The JSON document in a file of a run or model directory, read bounded
    (:func:`dukb.kb.csvfile.read_bytes`: a regular file of at most ``limit`` bytes, default
    :data:`RUN_JSON_BYTES`).

    Args:
        path: the file.
        what: what it is, for the message when it is missing (``missing <what>``).
        limit: largest size accepted, in bytes.

    Raises:
        InputError: missing, not a regular file (a FIFO, a device, a folder), too large, not UTF-8 or not JSON
            (:func:`loads_json`: bad syntax, an over-long integer, nested too deeply; file and, for bad syntax,
            line named).
    """
    from dukb.kb.csvfile import decode_text, read_bytes

    text = decode_text(read_bytes(path, what, limit=RUN_JSON_BYTES if limit is None else limit), path)
    return loads_json(text, path)


class _DuplicateKey(ValueError):
    """A JSON object that gives one key twice (:func:`json_problem`)."""


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    """``json.loads``' object_pairs_hook: the object as a dict, refusing a key given twice (the standard library
    would keep the last one silently).

    Raises:
        _DuplicateKey: naming the key.
    """
    out = dict(pairs)
    if len(out) != len(pairs):
        seen = set()
        for k, _ in pairs:
            if k in seen:
                raise _DuplicateKey(f"the key {json.dumps(k)[:60]} is given twice in one object")
            seen.add(k)
    return out


def json_problem(text: str | bytes) -> tuple[object, str, int | None]:
    """Parse one JSON document, turning every way it can fail into a reason instead of an exception: bad syntax,
    an object that gives a key twice (``{"recall": 0.1, "recall": 0.9}``; RFC 8259 Sec. 4 leaves it undefined), an
    integer of more than ``sys.get_int_max_str_digits()`` digits (a ValueError) and a document nested deeper
    than Python's recursion limit (``[[[...]]]``: a RecursionError, which ``json.loads`` raises).

    Args:
        text: the document (str, or UTF-8 bytes).

    Returns:
        ``(value, "", None)`` for a JSON document, else ``(None, reason, line)``: the reason starts with ``"not
        JSON: "``; line is the 1-based line of a syntax error within ``text`` (None for the other reasons).

    Raises:
        Nothing (UnicodeDecodeError aside, for bytes that are not UTF-8: callers decode first).
    """
    try:
        return json.loads(text, object_pairs_hook=_unique_keys), "", None
    except _DuplicateKey as e:
        return None, f"not JSON: {e}", None
    except json.JSONDecodeError as e:
        return None, f"not JSON: {e.msg} at column {e.colno}", e.lineno
    except ValueError as e:  # an integer of more than sys.get_int_max_str_digits() digits
        limit = getattr(sys, "get_int_max_str_digits", lambda: 4300)()
        return None, f"not JSON: an integer of more than {limit} digits" if "digits" in str(e) \
            else f"not JSON: {e}", None
    except RecursionError:
        return None, "not JSON: nested too deeply", None


def loads_json(text: str | bytes, path: str | Path | None = None, line: int | None = None):
    """One JSON document of a run file, or one :class:`InputError` line naming the file (:func:`json_problem`: bad
    syntax, an over-long integer and a document nested too deeply are all refused, never a traceback).

    Args:
        text: the document (str, or UTF-8 bytes).
        path: the file it was read from, for the message.
        line: the 1-based line of ``text`` in that file (a line of a JSONL file); None when ``text`` is the whole
            file (a syntax error then names its own line).

    Returns:
        The parsed value.

    Raises:
        InputError: ``FILE[:LINE]: not JSON: ...``.
    """
    value, problem, at = json_problem(text)
    if problem:
        if at is not None and line is not None:
            at = line + at - 1
        raise InputError(problem, path, at if at is not None else line)
    return value


def output_file(path: str | Path) -> Path:
    """Make room for an output that dukb rewrites whole (summary.csv, report.md, a figure): a FIFO, device or socket
    in its place is removed first, so writing neither blocks nor swallows it; a symbolic link there (or at any level
    below a guarded run directory, :func:`refuse_links`) is refused, so nothing is written elsewhere.

    Returns:
        ``path``.

    Raises:
        InputError: a directory or a symbolic link is in its place (named).
    """
    path = refuse_links(path)
    kind = _kind_at(path)
    if kind == "a directory":
        raise InputError("cannot write this file: a directory is in its place", path)
    if kind is not None:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError as e:
            raise InputError(f"cannot replace {kind}: {e.strerror or e}", path) from None
    return path


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Write a file through a fresh temporary file beside it and an atomic rename, so a kill never leaves half a
    file and whatever is in its place (a FIFO, a link) is replaced, never written through.

    Raises:
        InputError: a directory or a symbolic link is in its place, or a link at a level below a guarded run
            directory (:func:`refuse_links`). OSError: the file cannot be written.
    """
    path = refuse_links(path)
    if _kind_at(path) == "a directory":
        raise InputError("cannot write this file: a directory is in its place", path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW
                 | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_json_atomic(path: str | Path, obj) -> None:
    """Write JSON through a temporary file and an atomic rename, so a kill never leaves half a file
    (:func:`write_bytes_atomic`)."""
    write_bytes_atomic(path, json.dumps(obj, indent=2, default=str).encode("utf-8"))


def open_append(path: str | Path):
    """Open a journal for appending (created when missing): a regular file only, so a FIFO or a device in its place
    neither blocks nor swallows rows, and never through a symbolic link (``O_NOFOLLOW``; nor one at a level below a
    guarded run directory, :func:`refuse_links`), so rows land in the run and nowhere else.

    Returns:
        A text file object (UTF-8) positioned at the end.

    Raises:
        InputError: something other than a regular file is in its place (a symbolic link: :func:`link_refusal`), or
            it cannot be opened (named).
    """
    fd = _open_regular_fd(refuse_links(path), os.O_WRONLY | os.O_APPEND | _NOFOLLOW, 0o666, "not a regular file ({})",
                          "cannot write: {}")
    return os.fdopen(fd, "a", encoding="utf-8")


# -------------------------------------------------------------------------------------------- provenance --------
#: the libraries whose versions every run records (None when one is not installed)
RECORDED_LIBRARIES = ("torch", "transformers", "tokenizers", "peft", "accelerate", "clingo", "ortools", "numpy",
                      "gguf")


def versions() -> dict:
    """Versions of python and of every library a result depends on, and dukb's version and git revision.

    Returns:
        dict: ``python``, ``dukb``, each of :data:`RECORDED_LIBRARIES` (None when not installed; torch's as
        ``torch.__version__``, with its build, once torch is loaded), ``torch_cuda`` (the CUDA version torch was
        built for, None for a CPU build) once torch is loaded, and ``dukb_revision`` when dukb runs from a git
        checkout.
    """
    from importlib import metadata

    from dukb import __version__

    out = {"python": platform.python_version(), "dukb": __version__}
    for dist in RECORDED_LIBRARIES:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    torch = sys.modules.get("torch")  # never imported here (dukb closure/mdus load no torch)
    if torch is not None:
        out["torch"] = torch.__version__  # with its build (2.11.0+cu130, 2.13.0+cpu), which metadata may omit
        out["torch_cuda"] = torch.version.cuda
    rev = git_revision()
    if rev:
        out["dukb_revision"] = rev
    return out


def git_revision() -> str | None:
    """``<commit>`` (with ``+dirty`` for uncommitted changes) of the checkout dukb runs from, or None when dukb is
    installed from a wheel or git is unavailable."""
    root = Path(__file__).resolve().parents[2]
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


def thread_info() -> dict:
    """The CPU threads a result was computed with: torch's intra- and inter-op thread counts, the thread variables
    of the environment (None when unset) and the machine's CPU count."""
    import torch

    return {"torch": torch.get_num_threads(), "torch_interop": torch.get_num_interop_threads(),
            **{v: os.environ.get(v) for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}, "cpu_count": os.cpu_count()}


def provenance(device: str | None = None, **extra) -> dict:
    """Provenance of a run: versions (with dukb's revision), threads (:func:`thread_info`), device, world size,
    host, pid, command line and time.

    Args:
        device: the resolved device string (None: not recorded).
        extra: more JSON-able fields (e.g. settings that do not change rows, like gradient checkpointing).
    """
    from dukb.neural import distributed as dist

    out = {"versions": versions(), "threads": thread_info(), "world_size": dist.world_size(), "argv": list(sys.argv),
           "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": socket.gethostname(), "pid": os.getpid()}
    if device is not None:
        out["device"] = device_info(device)
    return out | extra


# ------------------------------------------------------------------------------------------ probe cache --------
#: the baseline probe of a run's model (before unlearning), kept in RUN_DIR so that a resume or a joining worker
#: reads it instead of probing again (:func:`read_probe_cache`)
PROBE_CACHE_NAME = "baseline_probe.json"
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
    root = Path(__file__).resolve().parents[1]
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
        model: what identifies the weights probed (:func:`dukb.neural.models.model_fingerprint` of the files, with
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
    import dataclasses

    rows = [dataclasses.asdict(it) for it in items]
    return sha256_json({"model": model, "items": rows, "settings": settings, "source": source_fingerprint(),
                        "versions": {k: v for k, v in versions().items() if k in ("torch", "torch_cuda", "transformers")}})


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
            isinstance(r, list) and len(r) == 4 and isinstance(r[0], str) and isinstance(r[1], str)
            and isinstance(r[2], int) and not isinstance(r[2], bool) and isinstance(r[3], bool) for r in rows):
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
    rows = [[str(k), str(fk), int(f), bool(v)] for k, fk, f, v in
            zip(table["kind"], table["fact_kind"], table["fact_id"], table["known"])]
    data = json.dumps({"key": key, "columns": list(PROBE_CACHE_COLUMNS), "rows": rows},
                      separators=(",", ":")).encode()
    if len(data) > PROBE_CACHE_BYTES:
        return False
    write_bytes_atomic(path, data)
    return True


# ----------------------------------------------------------------------------------------------- results --------
#: where a resume moves the damaged lines of RUN_DIR/results*.jsonl (one JSON object per line: file, line, reason,
#: text, moved)
DAMAGED_NAME = "results.damaged.jsonl"


#: Largest results journal read (results.jsonl, a shard): as :data:`dukb.kb.csvfile.MAX_INPUT_BYTES`, far above
#: the rows of any run (a row is about 1 KiB).
RESULTS_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class DamagedLine:
    """A line of a results journal that holds no row.

    Attributes:
        line: its 1-based line number.
        reason: what is wrong (not UTF-8, not JSON, not a JSON object, not a row of this journal).
        text: its content (undecodable bytes as ``\\xNN``).
    """

    line: int
    reason: str
    text: str


@dataclass
class Journal:
    """A results journal as read: the valid rows and what was not.

    Attributes:
        path: the file.
        rows: every valid row, in file order.
        lines: the raw bytes of each valid row's line (without its line break), parallel to ``rows``.
        numbers: the 1-based line number of each valid row, parallel to ``rows``.
        damaged: lines that hold no row (a torn last line is not among them).
        torn: the last line when it is cut short by a kill mid-write (no line break and no row), else None.
        newline: the file ends with a line break (or is empty).
    """

    path: Path
    rows: list[dict] = field(default_factory=list)
    lines: list[bytes] = field(default_factory=list)
    numbers: list[int] = field(default_factory=list)
    damaged: list[DamagedLine] = field(default_factory=list)
    torn: DamagedLine | None = None
    newline: bool = True

    def warn(self, log: Callable[[str], None] | None = None, moved_to: Path | None = None) -> None:
        """One line per damaged line (``FILE:LINE``) and one for a torn last line, through ``log`` (default: stderr)."""
        log = log or _stderr
        for d in self.damaged:
            where = f"moved to {moved_to}" if moved_to else "skipped; a resume moves it to " + DAMAGED_NAME
            log(f"dukb: warning: {self.path}:{d.line}: damaged journal line ({d.reason}); {where}")
        if self.torn is not None:
            log(f"dukb: note: {self.path}:{self.torn.line}: torn last line (a kill mid-write) dropped")

    def drop(self, problem: Callable[[dict], str | None]) -> None:
        """Count the rows that ``problem`` finds fault with as damaged lines (e.g. a report's check of a row against
        the run's other files: a restor row with another number of facts than probes/facts.jsonl).

        Args:
            problem: callable(row) -> what is wrong with it, or None for a row that stays.
        """
        keep = []
        for row, raw, n in zip(self.rows, self.lines, self.numbers):
            why = problem(row)
            if why:
                self.damaged.append(DamagedLine(n, why, raw.decode("utf-8", "backslashreplace")))
            else:
                keep.append((row, raw, n))
        self.damaged.sort(key=lambda d: d.line)
        self.rows, self.lines, self.numbers = [k[0] for k in keep], [k[1] for k in keep], [k[2] for k in keep]


def _row_problem(raw: bytes, key: Callable[[dict], object] | None,
                 check: Callable[[dict], str | None] | None = None) -> tuple[dict | None, str]:
    """(row, "") for a line holding a valid row, else (None, what is wrong with it)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None, "not UTF-8"
    row, problem, _ = json_problem(text)
    if problem:
        return None, problem
    if not isinstance(row, dict):
        return None, "not a JSON object"
    if check is not None:
        problem = check(row)
        if problem:
            return None, problem
    if key is not None:
        try:
            key(row)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError) as e:
            return None, f"not a row of this journal ({type(e).__name__}: {e})"
    return row, ""


#: fields of a row that say how and where it was computed, not what: two rows of one key that differ only in them
#: are one result written twice (a unit recomputed after a kill)
BOOKKEEPING_FIELDS = ("worker", "seconds_unlearn", "seconds_probe", "seconds_logprobs", "seconds_attack")


def _repeat_problem(first: dict, k, row: dict, line: int) -> str:
    """"" for the first row of key ``k`` (recorded in ``first``), else why a later one is a damaged line: the same
    result again (kept once, noted) or another result for the same key (one row per key: the later one is not a
    row of the run)."""
    try:
        hash(k)
    except TypeError:
        return ""
    if k not in first:
        first[k] = (line, row)
        return ""
    was, earlier = first[k]
    values = {f: v for f, v in row.items() if f not in BOOKKEEPING_FIELDS}
    earlier = {f: v for f, v in earlier.items() if f not in BOOKKEEPING_FIELDS}
    if earlier == values:
        return f"a repeat of line {was} (the same row; kept once)"
    diff = sorted(f for f in set(values) | set(earlier) if values.get(f, ...) != earlier.get(f, ...))
    shown = ", ".join(diff[:3]) + (", ..." if len(diff) > 3 else "")
    return f"another row for the key of line {was} (one row per key; differs in {shown})"


def read_journal(path: str | Path, key: Callable[[dict], object] | None = None,
                 check: Callable[[dict], str | None] | None = None) -> Journal:
    """Read a results journal, keeping every valid row and listing each line that holds none.

    Blank lines are skipped. A line is damaged when it is not UTF-8, not JSON (an integer of more than 4300 digits
    and an object giving a key twice included), not a JSON object, not a row of its protocol (``check``: a field a
    report reads is missing, of another type, not a finite number or out of its range), or (given ``key``) a row the
    key cannot be computed for, or a later row of a key an earlier line has (one row per key: another result, or the
    same one again, kept once; :data:`BOOKKEEPING_FIELDS` aside). The last line
    is *torn* instead when it is damaged and the file does not end with a line break (a kill mid-write).

    Args:
        path: the JSONL file (missing: an empty journal).
        key: the journal's row key (e.g. :func:`evaluate_row_key`); None checks only that a row is an object.
        check: callable(row) -> the problem of a row, or None for a valid row (:func:`row_check`); default: the
            check of the protocol whose key ``key`` is (:func:`check_for_key`), none for another key.

    Returns:
        The :class:`Journal`.

    Raises:
        InputError: the file exists but cannot be read, is not a regular file (a FIFO, a device, a folder) or is
            larger than :data:`RESULTS_BYTES` (named).
    """
    from dukb.kb.csvfile import read_bytes

    path = Path(path)
    out = Journal(path)
    check = check_for_key(key) if check is None else check
    if not os.path.lexists(path):
        return out
    data = read_bytes(path, "results journal", limit=RESULTS_BYTES)
    parts = data.split(b"\n")
    out.newline = parts[-1] == b""
    if out.newline:
        parts.pop()
    first: dict = {}  # row key -> (line number, its first row)
    for i, raw in enumerate(parts, 1):
        if not raw.strip():
            continue
        row, problem = _row_problem(raw, key, check)
        if row is not None and key is not None:
            problem = _repeat_problem(first, key(row), row, i)
            row = None if problem else row
        if row is not None:
            out.rows.append(row)
            out.lines.append(raw)
            out.numbers.append(i)
            continue
        bad = DamagedLine(i, problem, raw.decode("utf-8", "backslashreplace"))
        if i == len(parts) and not out.newline:
            out.torn = bad
        else:
            out.damaged.append(bad)
    return out


def read_results(path, key: Callable[[dict], object] | None = None, *,
                 log: Callable[[str], None] | None = None) -> list[dict]:
    """Every valid row of a results.jsonl; each damaged line is reported on one line (``FILE:LINE``) and skipped,
    a torn last line (from a kill) is dropped with a note (see :func:`read_journal`). The file is not changed.

    Args:
        path: the JSONL file.
        key: the journal's row key (rows it cannot key count as damaged); None: any JSON object is a row.
        log: callable(str) for the warnings (default: stderr).

    Returns:
        The rows, in file order.

    Raises:
        InputError: the file cannot be read.
        FileNotFoundError: the file does not exist.
    """
    if not Path(path).exists():
        raise FileNotFoundError(f"{path}: no such file")
    journal = read_journal(path, key)
    journal.warn(log)
    return journal.rows


def report_journal(path: str | Path, protocol: str, *, drop: Callable[[dict], str | None] | None = None,
                   key: Callable[[dict], object] | None = None, config: dict | None = None) -> Journal:
    """A run's results journal as a report reads it: every row the protocol's report can render
    (:func:`row_check`) and its run can have written (:data:`PLAN_CHECKS`, one row per key), each damaged line
    warned on stderr (``FILE:LINE``, with the reason).

    Args:
        path: results.jsonl (missing: an empty journal).
        protocol: the run's protocol (a key of :data:`ROW_CHECKS`).
        key: the protocol's row key: a later row of a key an earlier line has is a damaged line (None: not checked).
        config: the run's config.json: rows are checked against its plan (:data:`PLAN_CHECKS`; None: not checked).
        drop: callable(row) -> a problem, or None: rows it finds fault with are damaged lines too (a check against
            the run's other files, applied after :func:`row_check`).

    Returns:
        The :class:`Journal` (its damaged lines go into report.md through :func:`journal_note`).

    Raises:
        InputError: the file cannot be read (not a regular file, too large), or it holds lines but every one is
            damaged: one line naming the first (``FILE:LINE``) and its reason, nothing else printed.
    """
    check = row_check(protocol)
    plan = PLAN_CHECKS[protocol](config) if config is not None and protocol in PLAN_CHECKS else None
    for more in (plan, drop):  # a row's own problem is named before a repeat of its key
        if more is not None:
            check = _both(check, more)
    journal = read_journal(path, key, check=check)
    if not journal.rows and journal.damaged:
        first = journal.damaged[0]
        n = len(journal.damaged)
        raise InputError(f"no result row to render: {'the only line' if n == 1 else f'all {n} lines'} "
                         f"damaged ({first.reason}{'' if n == 1 else ', and more'})", journal.path, first.line)
    journal.warn()
    return journal


def _both(first: Callable[[dict], str | None], then: Callable[[dict], str | None]) -> Callable[[dict], str | None]:
    """A row check: ``first``'s problem, else ``then``'s (which may rely on what ``first`` checked)."""
    return lambda row: first(row) or then(row)


def worker_id() -> str:
    """Who computed a row: ``HOST:PID`` (and ``/rRANK`` under a multi-process launch), recorded as each row's
    ``worker``. A row's values never depend on it."""
    from dukb.neural import distributed as dist

    rank = f"/r{dist.rank()}" if dist.is_distributed() else ""
    return f"{socket.gethostname()}:{os.getpid()}{rank}"


def missing_units(identity: dict, rows: list[dict]) -> list[tuple[int, str, float]]:
    """The (target, method, grid value) units of an evaluate run that have no row yet.

    Args:
        identity: the run's identity (config.json's ``identity``: targets, methods with their grids).
        rows: the run's result rows.

    Returns:
        Sorted list of (target, method label, value), in the identity's order of targets and methods.
    """
    done = {(int(r["target"]), r["method"], float(r["setting"][r["param"]])) for r in rows
            if isinstance(r.get("setting"), dict) and r.get("param") in r["setting"]}
    out = []
    for t in identity.get("targets") or []:
        for label, entry in (identity.get("methods") or {}).items():
            for v in entry.get("grid") or []:
                if (int(t), label, float(v)) not in done:
                    out.append((int(t), label, float(v)))
    return out


def journal_note(journal: Journal) -> str:
    """A report.md paragraph on the journal's damaged lines (skipped, FILE:LINE each) and on those an earlier resume
    moved to results.damaged.jsonl; empty when there are none.

    Args:
        journal: results.jsonl as read by :func:`read_journal`.

    Returns:
        Markdown text (starting with a blank line) or "".

    Raises:
        InputError: results.damaged.jsonl is not a regular file or too large (named).
    """
    out = []
    if journal.damaged:
        lines = ", ".join(str(d.line) for d in journal.damaged)
        out.append(f"**Damaged journal lines.** {len(journal.damaged)} line(s) of {journal.path.name} hold no row "
                   f"(line{'s' if len(journal.damaged) > 1 else ''} {lines}); they are left out of this report. "
                   f"A `--resume` moves them to {DAMAGED_NAME} and recomputes their rows.")
        out.append("\n".join(f"- line {d.line}: {d.reason}" for d in journal.damaged[:20])
                   + (f"\n- ... and {len(journal.damaged) - 20} more" if len(journal.damaged) > 20 else ""))
    aside = journal.path.parent / DAMAGED_NAME
    if os.path.lexists(aside):  # read bounded: a regular file only
        from dukb.kb.csvfile import read_bytes

        n = sum(1 for ln in read_bytes(aside, "damaged-lines file", limit=RESULTS_BYTES).splitlines() if ln.strip())
        out.append(f"{n} damaged line(s) were moved from the journal to {DAMAGED_NAME} by a resume.")
    if journal.torn is not None:
        out.append(f"The last line of {journal.path.name} (line {journal.torn.line}) was cut short by a kill and is "
                   "left out.")
    return "".join("\n\n" + p for p in out) + ("\n" if out else "")


def move_aside(journal: Journal, log: Callable[[str], None] | None = None) -> Path | None:
    """Move the damaged lines of ``journal`` to RUN_DIR/results.damaged.jsonl and rewrite the file with its valid
    rows only (atomically; a torn last line is dropped), so it is a clean journal again. Each move is reported.

    Args:
        journal: a journal read by :func:`read_journal` (its file is rewritten).
        log: callable(str) for the report (default: stderr).

    Returns:
        The path of results.damaged.jsonl when lines were moved, else None.

    Raises:
        InputError: results.damaged.jsonl is not a regular file. OSError: the files cannot be written.
    """
    aside = None
    if journal.damaged:
        aside = journal.path.parent / DAMAGED_NAME
        moved = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        with open_append(aside) as fh:
            for d in journal.damaged:
                fh.write(json.dumps({"file": journal.path.name, "line": d.line, "reason": d.reason, "text": d.text,
                                     "moved": moved}) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
    journal.warn(log, moved_to=aside)
    if journal.damaged or journal.torn is not None:
        write_bytes_atomic(journal.path, b"".join(raw + b"\n" for raw in journal.lines))
        journal.damaged, journal.torn, journal.newline = [], None, True
        journal.numbers = list(range(1, len(journal.lines) + 1))
    elif not journal.newline:  # a complete last row whose line break was lost
        with open_append(journal.path) as fh:
            fh.write("\n")
        journal.newline = True
    return aside


def evaluate_row_key(row: dict) -> tuple:
    """(target, method label, swept value) identifying a `dukb evaluate` row."""
    return (int(row["target"]), row["method"], float(row["setting"][row["param"]]))


# --------------------------------------------------------------------------------------------- row checks --------
#: Largest magnitude of an integer id in a row (a fact id, a target): :data:`dukb.kb.csvfile.MAX_INT_DIGITS` digits.
ROW_ID_LIMIT = 10 ** 18


class _RowFault(Exception):
    """What is wrong with a row (:func:`row_check`)."""


def _show(v) -> str:
    """A value as a row check's message shows it: JSON spelling, clipped."""
    if isinstance(v, bool) or v is None:
        return json.dumps(v)
    if isinstance(v, int):
        return str(v) if abs(v) < ROW_ID_LIMIT else f"an integer of {len(str(abs(v)))} digits"
    if isinstance(v, float):
        return "NaN" if v != v else ("Infinity" if v > 0 else "-Infinity") if v in (float("inf"), float("-inf")) \
            else repr(v)
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, list):
        return "a list"
    s = json.dumps(v, ensure_ascii=False)
    return s if len(s) <= 40 else s[:37] + '..."'


def _is_number(v, finite: bool = True) -> bool:
    """A JSON number (a bool is not one) that converts to a float (a finite one when ``finite``)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        f = float(v)
    except OverflowError:  # an integer of hundreds of digits
        return False
    return math.isfinite(f) or not finite


#: what each kind of a row check accepts: kind -> (test, the expectation in words)
_KINDS: dict[str, tuple[Callable[[object], bool], str]] = {
    "str": (lambda v: isinstance(v, str), "a string"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "int": (lambda v: isinstance(v, int) and not isinstance(v, bool) and abs(v) < ROW_ID_LIMIT,
            f"an integer of at most {len(str(ROW_ID_LIMIT)) - 1} digits"),
    "num": (_is_number, "a number"),
    # NaN or null allowed (a score of an empty text: the writer spells NaN as null, :meth:`ResultsFile.append`)
    "score": (lambda v: v is None or _is_number(v, finite=False), "a number"),
    "dict": (lambda v: isinstance(v, dict), "an object"),
    "list": (lambda v: isinstance(v, list), "a list"),
    "any": (lambda v: True, "a value"),
}


def _expect(value, kind: str, name: str) -> None:
    """Raise :class:`_RowFault` unless ``value`` is of ``kind`` (a trailing ``?`` also allows null; ``[kind]`` is a
    list of such values)."""
    nullable = kind.endswith("?")
    if nullable:
        if value is None:
            return
        kind = kind[:-1]
    if kind.startswith("["):
        if not isinstance(value, list):
            raise _RowFault(f"field {name}: expected a list{' or null' if nullable else ''}, got {_show(value)}")
        for i, v in enumerate(value):
            _expect(v, kind[1:-1], f"{name}[{i}]")
        return
    test, words = _KINDS[kind]
    if kind == "int" and not (isinstance(value, int) and not isinstance(value, bool)):
        words = "an integer"
    if not test(value):
        raise _RowFault(f"field {name}: expected {words}{' or null' if nullable else ''}, got {_show(value)}")


def _need(row: dict, name: str, kind: str) -> None:
    if name not in row:
        raise _RowFault(f"field {name}: missing")
    _expect(row[name], kind, name)


def _may(row: dict, name: str, kind: str) -> None:
    if name in row:
        _expect(row[name], kind, name)


def _swept(row: dict, setting_kind: str = "dict") -> None:
    """``param`` (a string or null) names a finite number in ``setting`` (the swept value a report orders by)."""
    _need(row, "param", "str?")
    _need(row, "setting", setting_kind)
    if row["param"] is not None:
        setting = row["setting"]
        if not isinstance(setting, dict) or row["param"] not in setting:
            raise _RowFault(f"field setting: no value of its param {_show(row['param'])}")
        _expect(setting[row["param"]], "num", f"setting.{row['param']}")


def _dict_of(row: dict, name: str, kinds: dict[str, str]) -> None:
    """``row[name]``, when present and not null, is an object whose keys in ``kinds`` (when present) are of their
    kinds."""
    sub = row.get(name)
    if sub is None:
        return
    _expect(sub, "dict", name)
    for k, kind in kinds.items():
        if k in sub:
            _expect(sub[k], kind, f"{name}.{k}")


def _share(row: dict, name: str) -> None:
    """``row[name]``, when present, is null or a share: a number in [0, 1] (true and false count as 1 and 0)."""
    if name not in row or row[name] is None:
        return
    v = row[name]
    if not (isinstance(v, bool) or (_is_number(v) and 0 <= float(v) <= 1)):
        raise _RowFault(f"field {name}: expected a share in [0, 1] or null, got {_show(v)}")


def _finite(row: dict) -> None:
    """Every number anywhere in ``row`` is finite (the writer spells a NaN as null, :meth:`ResultsFile.append`)."""
    todo: list[tuple[str, object]] = [(k, v) for k, v in row.items()]
    while todo:
        name, v = todo.pop()
        if isinstance(v, float) and not math.isfinite(v):
            raise _RowFault(f"field {name}: expected a finite number, got {_show(v)}")
        if isinstance(v, dict):
            todo += [(f"{name}.{k}", x) for k, x in v.items()]
        elif isinstance(v, list):
            todo += [(f"{name}[{i}]", x) for i, x in enumerate(v)]


#: evaluate row fields that are shares (Wu et al. 2025, Eq. 1-2: recall and accuracy; Definition 2: Success-DU), with
#: their held-out and under-attack variants
_EVALUATE_SHARES = tuple(f"{base}{suffix}" for base in ("recall", "accuracy_all", "accuracy_relationships",
                                                        "accuracy_biographies", "success_du")
                         for suffix in ("", "_heldout", "_under_attack")) + ("recall_heldout_scorable",)


def _evaluate_row(row: dict) -> None:
    """What `dukb report` reads of an evaluate row (dukb.neural.protocols.evaluate.report, dukb.neural.metrics.summary)."""
    _may(row, "recall", "num")
    _may(row, "accuracy_all", "num?")  # null: nothing left to score (n_scored 0)
    _may(row, "target_forgotten", "bool")
    _need(row, "target", "int")
    _need(row, "method", "str")
    _need(row, "param", "str")
    _swept(row)
    if "recall" in row:  # the trade-off and Acc@Superficial read them beside recall
        _need(row, "accuracy_all", "num?")
        _need(row, "target_forgotten", "bool")
    if "success_du" in row and row["success_du"] is not None and not isinstance(row["success_du"], bool):
        _expect(row["success_du"], "num", "success_du")
    _may(row, "target_relation", "str?")
    _may(row, "forgotten_relationships", "[int]?")
    for name in _EVALUATE_SHARES:
        _share(row, name)
    _finite(row)


def _muse_row(row: dict) -> None:
    """What `dukb report` reads of a muse row (dukb.neural.protocols.muse.report)."""
    for name in ("request", "experiment", "model_kind"):
        _need(row, name, "str")
    _need(row, "method", "str" if row["model_kind"] == "unlearned" else "str?")
    if row.get("param") is not None or row.get("setting") is not None:
        _swept(row, "dict?")
    for name in ("verbmem_forget", "knowmem_forget", "knowmem_retain"):
        _need(row, name, "num?")
    _may(row, "privleak", "num?")
    _may(row, "mia_auc", "num?")
    _dict_of(row, "items", {c: "[num]?" for c in ("verbmem_forget", "knowmem_forget", "knowmem_retain")})
    for name in ("verbmem_forget", "knowmem_forget", "knowmem_retain", "mia_auc"):  # ROUGE-L and AUC: shares
        _share(row, name)
    if "mia" in row:
        _expect(row["mia"], "dict", "mia")
        _dict_of(row, "mia", {"forget": "[score]", "retain": "[score]?", "holdout": "[score]?"})
        if row["mia"].get("holdout"):
            _need(row["mia"], "forget", "[score]")


#: the rwku columns a report averages (dukb.neural.protocols.rwku.report.COLS without the MIA ones)
_RWKU_SCORES = ("rouge_forget_fb", "rouge_forget_qa", "rouge_forget_aa", "rouge_neighbour_fb", "rouge_neighbour_qa",
                "rouge_neighbour_all", "rouge_distant_all", "recall", "recall_under_attack", "accuracy_all")


def _rwku_row(row: dict) -> None:
    """What `dukb report` reads of an rwku row (dukb.neural.protocols.rwku.report)."""
    _need(row, "request", "str")
    _need(row, "request_kind", "str")
    if row["request_kind"] not in ("single", "batch"):
        raise _RowFault(f"field request_kind: expected \"single\" or \"batch\", got {_show(row['request_kind'])}")
    if row["request_kind"] == "batch":
        from dukb.kb.csvfile import strict_int

        parts = row["request"].split("-")
        if len(parts) < 2 or strict_int(parts[1]) is None:
            raise _RowFault(f"field request: a batch request is named batch-N, got {_show(row['request'])}")
    _need(row, "method", "str?")
    _swept(row)
    _need(row, "targets", "list")
    _need(row, "rouge_forget_all", "num")
    for name in ("rouge_forget_fb", "rouge_forget_qa"):
        _need(row, name, "num?")
    for name in _RWKU_SCORES:
        _may(row, name, "num?")
    if row.get("rouge_forget_aa_by_kind") is not None:
        _expect(row["rouge_forget_aa_by_kind"], "dict", "rouge_forget_aa_by_kind")
        for k, v in row["rouge_forget_aa_by_kind"].items():
            _expect(v, "num?", f"rouge_forget_aa_by_kind.{k}")
    for name in ("mia_fm", "mia_rm", "mia_auc_fm_rm"):
        _dict_of(row, name, {"loss": "score?"})
    for name in _RWKU_SCORES + ("rouge_forget_all", "rouge_distant_fb", "rouge_distant_qa"):  # ROUGE-L, recall
        _share(row, name)
    for k, v in (row.get("mia_auc_fm_rm") or {}).items():  # an AUC per attack (a NaN: nothing to score)
        if _is_number(v) and not 0 <= float(v) <= 1:
            raise _RowFault(f"field mia_auc_fm_rm.{k}: expected a share in [0, 1] or null, got {_show(v)}")


def _control_row(row: dict) -> None:
    """What `dukb report` reads of a control row (dukb.neural.protocols.control.report, dukb.neural.calibration)."""
    _need(row, "ratio", "str")
    _need(row, "control", "str")
    original = row["control"] == "original"
    _need(row, "method", "str?" if original else "str")
    _need(row, "value", "num?" if original else "num")
    _may(row, "param", "str?")
    for name in ("ps_exact_retain", "ps_exact_forget", "ps_perturb_retain", "ps_perturb_forget", "ps_similar_retain",
                 "ps_similar_forget", "confidence_retain", "confidence_forget", "accuracy_all_facts"):
        _may(row, name, "num?")
        _share(row, name)  # means of probabilities and of 0/1 scores
    _need(row, "forgotten_relationships", "[int]")
    _need(row, "forgotten_biographies", "[int]")
    if row.get("retain_train_fact_ids"):
        _dict_of(row, "retain_train_fact_ids", {})
        for k in ("relationships", "biographies"):
            _need(row["retain_train_fact_ids"], k, "[int]")
    _dict_of(row, "risk_curve", {"unlearning_risk": "[score]?", "loss_retain": "[score]?"})


def _restor_row(row: dict) -> None:
    """What `dukb report` reads of a restor row (dukb.neural.restor.report, dukb.neural.restor.states)."""
    _need(row, "method", "str")
    _need(row, "targeted", "bool")
    _need(row, "setting", "any")
    _need(row, "rows", "list")
    for i, r in enumerate(row["rows"]):
        _expect(r, "dict", f"rows[{i}]")
        _need(r, "correct", "bool")
        _need(r, "label", "str")
        _need(r, "answer", "str?")
    for name in ("seconds_unlearn", "seconds_probe", "seconds_logprobs"):
        _may(row, name, "num?")
    if row.get("logprobs_A") is not None:
        _expect(row["logprobs_A"], "list", "logprobs_A")
        for i, d in enumerate(row["logprobs_A"]):
            _expect(d, "dict", f"logprobs_A[{i}]")
            for k in ("true", "injected", "random"):
                _need(d, k, "score?")
    _dict_of(row, "beliefs", {"examples_contradicting": "[str]?", "examples_false": "[str]?"})


#: protocol -> the check of its result rows: the fields its report reads, their types (a bool is not a number or an
#: integer), finite numbers
ROW_CHECKS: dict[str, Callable[[dict], None]] = {"evaluate": _evaluate_row, "muse": _muse_row, "rwku": _rwku_row,
                                                 "control": _control_row, "restor": _restor_row}

#: each protocol's row key (``module.name``) -> the protocol: a journal read with that key gets its row check
KEY_PROTOCOLS = {"dukb.neural.runs.evaluate_row_key": "evaluate", "dukb.neural.protocols.muse.config.muse_row_key": "muse",
                 "dukb.neural.protocols.rwku.config.rwku_row_key": "rwku", "dukb.neural.protocols.control.config.control_row_key": "control",
                 "dukb.neural.restor.files._rows_key": "restor"}


def row_check(protocol: str) -> Callable[[dict], str | None]:
    """The row check of a protocol: callable(row) -> None for a row its report can render, else the problem in words
    (``field recall: expected a number, got NaN``, ``field target: missing``).

    Raises:
        KeyError: an unknown protocol.
    """
    fn = ROW_CHECKS[protocol]

    def check(row: dict) -> str | None:
        try:
            fn(row)
        except _RowFault as e:
            return str(e)
        return None

    check.__name__ = f"{protocol}_row_check"
    return check


#: row metrics of an evaluate run whose field of the same name every row holds (the summary metrics tradeoff and
#: acc_at_superficial read recall)
_METRIC_FIELDS = {"recall": "recall", "recall_heldout": "recall_heldout", "recall_under_attack": "recall_under_attack",
                  "tradeoff": "recall", "acc_at_superficial": "recall"}


def evaluate_plan_check(config: dict) -> Callable[[dict], str | None] | None:
    """The check of an evaluate row against its run's plan (config.json's ``identity``): its target is one of the
    run's targets, its method one of its methods with that method's swept parameter, its swept value in that
    method's grid, and it holds the field of every row metric the run computes (``recall`` when the run's metrics
    include recall, tradeoff or acc_at_superficial). A row that fails cannot come from the run.

    Args:
        config: the run's config.json (a dict); its ``identity`` holds ``targets`` (ints), ``methods`` (label ->
            ``param`` and ``grid``) and ``metrics`` (names).

    Returns:
        callable(row) -> the problem in words or None, for rows that passed :func:`row_check`; None when the
        config has no identity to check against (a run of an older dukb, a hand-made directory).
    """
    identity = config.get("identity") if isinstance(config, dict) else None
    if not isinstance(identity, dict):
        return None
    targets = identity.get("targets")
    targets = {t for t in targets if isinstance(t, int)} if isinstance(targets, list) else None
    methods = identity.get("methods") if isinstance(identity.get("methods"), dict) else None
    metrics = identity.get("metrics")
    need = sorted({_METRIC_FIELDS[m] for m in metrics if isinstance(m, str) and m in _METRIC_FIELDS}) \
        if isinstance(metrics, list) else []

    def check(row: dict) -> str | None:
        if targets is not None and row["target"] not in targets:
            return f"field target: {_show(row['target'])} is not a target of the run (config.json)"
        if methods is not None:
            entry = methods.get(row["method"])
            if not isinstance(entry, dict):
                return f"field method: {_show(row['method'])} is not a method of the run (config.json)"
            param, grid = entry.get("param"), entry.get("grid")
            if isinstance(param, str) and row["param"] != param:
                return f"field param: {_show(row['param'])} is not the swept parameter of {row['method']} ({param})"
            if isinstance(grid, list) and row["param"] is not None:
                value = float(row["setting"][row["param"]])
                if not any(_is_number(g) and float(g) == value for g in grid):
                    return (f"field setting.{row['param']}: {_show(row['setting'][row['param']])} is not in the grid "
                            f"of {row['method']} (config.json)")
        for name in need:
            if name not in row:
                return f"field {name}: missing (the run computes it for every row)"
        return None

    return check


#: protocol -> the check of its rows against the run's config (:func:`evaluate_plan_check`); the other protocols'
#: identities are not checked yet
PLAN_CHECKS: dict[str, Callable[[dict], Callable[[dict], str | None] | None]] = {"evaluate": evaluate_plan_check}


def check_for_key(key: Callable | None) -> Callable[[dict], str | None] | None:
    """The row check of the protocol whose row key ``key`` is (:data:`KEY_PROTOCOLS`), None for another key."""
    name = f"{getattr(key, '__module__', '')}.{getattr(key, '__qualname__', '')}"
    protocol = KEY_PROTOCOLS.get(name)
    return None if protocol is None else row_check(protocol)


class ResultsFile:
    """Append-only JSONL of result rows with resume support.

    Each row is written as one line, flushed and fsynced. On open, the file this process owns is made a clean
    journal: every valid row is kept, each damaged line is moved to RUN_DIR/results.damaged.jsonl with its line
    number and reported (``FILE:LINE``), a torn last line is dropped with a note (:func:`move_aside`).
    :meth:`absorb` adds the rows of other files (the shard files of a multi-process run, see
    :mod:`dukb.neural.distributed`) as done; those files are read, never changed.

    Args:
        path: the file this process appends to.
        key: function row -> hashable key identifying a row (default: :func:`evaluate_row_key`).
        log: callable(str) for the reports of damaged and torn lines (default: stderr).

    Raises:
        InputError: the file cannot be read. OSError: it cannot be repaired.
    """

    def __init__(self, path: Path, key: Callable[[dict], tuple] = evaluate_row_key,
                 log: Callable[[str], None] | None = None, repair: bool = True):
        self.path = refuse_links(path)  # the journal is appended to: never through a link
        self.key = key
        self.log = log
        try:  # where :meth:`refresh` reads on (taken before reading: a row appended meanwhile is read twice, kept once)
            self._offset = os.stat(self.path).st_size
        except OSError:
            self._offset = 0
        journal = read_journal(self.path, key)
        if repair:  # a worker that joined a live run never repairs: the owner did, and others append meanwhile
            move_aside(journal, log)
            try:  # the repair may have shortened the file: read on from its end (nobody else writes yet)
                self._offset = os.stat(self.path).st_size
            except OSError:
                self._offset = 0
        self.rows: list[dict] = journal.rows
        self.done = {self.key(r) for r in self.rows}

    def refresh(self) -> None:
        """Count the rows other processes appended since the last read (a run several workers share) as done.
        Reads only the complete lines after the last position read; a line that is not a row is left to the
        owner's repair. Read only."""
        from dukb.kb.csvfile import open_regular

        try:
            with open_regular(self.path, "results journal", limit=RESULTS_BYTES) as fh:
                fh.seek(self._offset)
                data = fh.read()
        except (InputError, OSError):
            return
        end = data.rfind(b"\n") + 1  # complete lines only: a line being written is read next time
        self._offset += end
        for line in data[:end].splitlines():
            try:
                row = json.loads(line)
                k = self.key(row)
            except (ValueError, KeyError, TypeError, RecursionError):  # RecursionError: nested too deeply
                continue
            if k not in self.done:
                self.rows.append(row)
                self.done.add(k)

    def absorb(self, paths) -> None:
        """Count the rows of the complete lines of ``paths`` (other than this file; missing ones skipped) as done.

        Call it once every process has repaired its own file (after a barrier), so no file is read mid-repair.
        Damaged lines of those files are reported and skipped.
        """
        for other in paths:
            other = Path(other)
            if other.exists() and other.resolve() != self.path.resolve():
                for row in read_results(other, self.key, log=self.log):
                    if self.key(row) not in self.done:
                        self.rows.append(row)
                        self.done.add(self.key(row))

    def append(self, row: dict) -> None:
        """Write one row durably, as one line even when several processes append (an ``flock`` around the write); a
        float NaN (a metric with nothing to score) is written as JSON null (:func:`dukb.solver.metrics.json_safe`)."""
        from dukb.solver.metrics import json_safe

        with open_append(self.path) as fh:
            if fcntl is not None:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX)  # released when the file closes
            size = os.fstat(fh.fileno()).st_size
            if size:  # a line a killed writer left unfinished stays one damaged line, never joined to this row
                rd = _open_regular_fd(self.path, os.O_RDONLY | _NOFOLLOW, 0o666, "not a regular file ({})",
                                      "cannot read: {}")
                try:
                    last = os.pread(rd, 1, size - 1)
                finally:
                    os.close(rd)
                if last != b"\n":
                    fh.write("\n")
            fh.write(json.dumps(json_safe(row)) + "\n")  # a NaN (nothing to score) is written as null
            fh.flush()
            os.fsync(fh.fileno())
        self.rows.append(row)
        self.done.add(self.key(row))


SHARD_GLOB = "results.rank*.jsonl"

#: a claim whose worker has not written for this long (seconds) is taken over even when its worker's lock cannot be
#: checked (a worker on another host whose file system does not share ``flock``)
CLAIM_TIMEOUT = 6 * 3600


def read_claim(path: str | Path) -> tuple[dict | None, os.stat_result | None]:
    """A work-unit claim as recorded, read without following a link or blocking on a FIFO (``O_NOFOLLOW |
    O_NONBLOCK``, then ``fstat``), and checked: a JSON object whose ``worker`` is a string, ``done`` a bool and
    ``worker_lock`` (absent for a worker whose lock cannot be checked from here) a string. Anything else is *unreadable*, i.e. stale (a claim no live worker wrote, taken over), never a
    unit taken.

    Returns:
        (the claim or None when unreadable, its ``lstat``), or (None, None) when no file is there.

    Raises:
        InputError: a symbolic link (:func:`link_refusal`) or a directory is in its place (named).
    """
    try:
        st = os.lstat(path)
    except OSError:
        return None, None
    if stat.S_ISLNK(st.st_mode):
        raise link_refusal(path)
    if stat.S_ISDIR(st.st_mode):
        raise InputError("a directory is in the place of a work-unit claim; remove it", path)
    if not stat.S_ISREG(st.st_mode):
        return None, st
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None, st
    try:
        fst = os.fstat(fd)
        if not stat.S_ISREG(fst.st_mode):
            return None, st
        data = os.read(fd, LOCK_BYTES)
    except OSError:
        return None, st
    finally:
        os.close(fd)
    info, problem, _ = json_problem(data.decode("utf-8", "replace") or "null")
    if problem or not isinstance(info, dict) or not isinstance(info.get("worker"), str) \
            or not isinstance(info.get("worker_lock", ""), str) or not isinstance(info.get("done"), bool):
        return None, fst
    return info, fst


class UnitClaims:
    """Work units claimed atomically in the run directory, so that any number of processes (several shells, a SLURM
    array, torchrun) share one run without a process group.

    A unit (e.g. evaluate's (target, method)) is claimed by creating ``RUN_DIR/.dukb/units/<unit>.claim`` with
    ``O_CREAT | O_EXCL``; it names its worker and that worker's lock file ``RUN_DIR/.dukb/workers/<worker>.lock``, which
    the worker holds (``flock``) for its whole life. A claim whose worker is gone (its lock free: killed, even by
    SIGKILL) or silent for :data:`CLAIM_TIMEOUT` seconds is taken over by exactly one other worker (an ``O_EXCL``
    marker per stale claim). A finished unit's claim says ``done``. A unit's rows depend only on the unit and the
    seed, never on which worker ran it.

    Args:
        run: the run directory; worker: this worker's id (:func:`worker_id`); timeout: see :data:`CLAIM_TIMEOUT`.

    Raises:
        InputError: the directories or the worker's lock file cannot be created, or RUN_DIR/.dukb (or a folder in
            it) is not a directory.

    Source: dukb; the claim file follows the O_EXCL lock-file idiom (open(2)).
    """

    def __init__(self, run: str | Path, worker: str, timeout: float = CLAIM_TIMEOUT):
        try:
            Path(run).mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise InputError(f"cannot create the run directory ({e.strerror})", run) from None
        self.dir = bookkeeping_dir(run, UNITS_DIR)
        self.workers = bookkeeping_dir(run, WORKERS_DIR)
        self.worker = worker
        self.timeout = timeout
        self.lock_name = _safe_name(worker) + ".lock"
        self._fd = _open_regular_fd(self.workers / self.lock_name, os.O_RDWR | _NOFOLLOW, 0o644,
                                    "a worker's lock file is not a regular file ({}); remove it",
                                    "cannot create the work-unit files: {}")
        if fcntl is not None:
            fcntl.flock(self._fd, fcntl.LOCK_EX)

    def path(self, unit: tuple) -> Path:
        """The claim file of ``unit`` (a tuple of ints and strings)."""
        return self.dir / (_safe_name("-".join(map(str, unit))) + ".claim")

    def _body(self, done: bool = False, claimed: float | None = None) -> bytes:
        """The claim's content: worker, its lock file, done, ``since`` (when last written, local time) and
        ``claimed`` (when this worker claimed the unit, seconds since the epoch; kept when it is marked done)."""
        return json.dumps({"worker": self.worker, "worker_lock": self.lock_name, "done": done,
                           "since": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                           "claimed": round(time.time() if claimed is None else claimed, 3)}).encode()

    def _alive(self, info: dict, mtime: float) -> bool:
        """The claim's worker is alive: its lock file is locked; where that cannot be checked (no lock named, no
        ``flock``), it wrote within :attr:`timeout` seconds."""
        name = info.get("worker_lock")
        if isinstance(name, str) and fcntl is not None:
            try:
                fd = os.open(self.workers / _safe_name(name), os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
            except FileNotFoundError:
                return False  # removed by its worker's close(): gone
            except OSError:
                pass  # cannot be checked from here: the timeout decides
            else:
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                except BlockingIOError:
                    return True
                except OSError:
                    pass
                else:
                    return False
                finally:
                    os.close(fd)
        return time.time() - mtime <= self.timeout

    def state(self, unit: tuple) -> dict | None:
        """The claim of ``unit`` as recorded ({"worker", "done", ...}), or None when unclaimed or unreadable
        (:func:`read_claim`).

        Raises:
            InputError: a symbolic link or a directory is in its place (named).
        """
        return read_claim(self.path(unit))[0]

    def claim(self, unit: tuple, reopen: bool = False) -> bool:
        """Claim ``unit`` for this worker. True when it is this worker's to run: newly claimed, already this
        worker's, or taken over from a worker that is gone; False when another live worker has it, or when it is
        done and ``reopen`` is False. ``reopen``: the caller still finds rows of the unit missing (values added to a
        grid since it was done), so a done claim is taken over like a stale one (by exactly one worker)."""
        path = self.path(unit)
        if self._create(path):
            return True
        info, st = read_claim(path)  # its content and identity (inode, mtime) from one open descriptor
        if st is None:  # removed meanwhile (finished and cleared, or taken over): try once more
            return self._create(path)
        if info is None:
            pass  # unreadable (not a claim dukb wrote, a FIFO, a device): stale, taken over below
        elif info.get("done"):
            if not reopen:
                return False
        elif info.get("worker") == self.worker or info.get("worker_lock") == self.lock_name:
            return True  # this worker's (a claim naming this worker's lock is this worker's: only it holds it)
        elif self._alive(info, st.st_mtime):
            return False
        try:  # one taker per stale claim: the marker names the claim file this worker read (inode, mtime)
            os.close(os.open(path.with_name(f"{path.name}.takeover-{st.st_ino}-{st.st_mtime_ns}"),
                             os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        except OSError:
            return False
        try:
            now = os.lstat(path)
        except OSError:
            return False
        if (now.st_ino, now.st_mtime_ns) != (st.st_ino, st.st_mtime_ns):
            return False  # taken over (or finished) by another worker since this one read it
        write_bytes_atomic(path, self._body())  # replaces whatever was there (a FIFO too), never writes through it
        return True

    def _create(self, path: Path) -> bool:
        """Create the claim file with its content at once (a temporary file hard-linked into place: never seen
        empty); False when it exists."""
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as e:
            raise InputError(f"cannot create a work-unit claim: {e.strerror or e}", tmp) from None
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(self._body())
            os.link(tmp, path)
        except FileExistsError:
            return False
        finally:
            tmp.unlink(missing_ok=True)
        return True

    def heartbeat(self, unit: tuple) -> None:
        """Say this worker is still on ``unit`` (the claim's time)."""
        try:
            os.utime(self.path(unit))
        except OSError:
            pass

    def done(self, unit: tuple) -> None:
        """Mark ``unit`` finished: no worker runs it again (the claim keeps the time it was ``claimed``)."""
        claimed = (self.state(unit) or {}).get("claimed")
        write_bytes_atomic(self.path(unit), self._body(done=True, claimed=claimed if isinstance(
            claimed, (int, float)) else None))

    def close(self) -> None:
        """Release this worker's lock (its unfinished claims become free to take over) and remove its lock file."""
        if self._fd >= 0:
            try:
                (self.workers / self.lock_name).unlink()
            except OSError:
                pass
            os.close(self._fd)
            self._fd = -1


def claimed_units(claims: "UnitClaims | None", results: "ResultsFile", units, pending: Callable):
    """The work units this worker runs, in order: each unit whose rows are not all in ``results`` and that no other
    live worker holds is claimed, handed to the caller with what is left of it, and marked done once the caller's
    loop body for it returns. With claims, a second pass takes over the units of workers that ended (killed) while
    this one ran, and a unit found complete whose claim does not say so (its worker was killed after the last row)
    is marked done, so that :func:`unfinished_units` does not name it. Without claims (one process, or a sharded multi-process launch) every unit is this worker's.

    Args:
        claims: this worker's :class:`UnitClaims`, or None.
        results: the run's :class:`ResultsFile` (refreshed with other workers' rows before each decision).
        units: the unit keys (tuples of ints and strings), in the order to run them.
        pending: ``pending(unit)`` -> what of the unit is still to compute (a list; empty: done).

    Yields:
        (unit, pending(unit)) for each unit this worker computes.

    Source: dukb (work units any launcher can run).
    """
    for _pass in range(2 if claims is not None else 1):
        for unit in units:
            if claims is not None:
                results.refresh()  # the rows other workers appended meanwhile
            todo = pending(unit)
            if not todo:
                if claims is not None and not (claims.state(unit) or {}).get("done"):
                    claims.done(unit)  # every row is on disk (its worker stopped before saying so): finished
                continue
            if claims is not None:
                if not claims.claim(unit, reopen=True):  # another live worker has it
                    continue
                results.refresh()  # rows its previous worker wrote before it stopped
                todo = pending(unit)
                if not todo:
                    claims.done(unit)
                    continue
            yield unit, todo
            if claims is not None:
                claims.done(unit)


@contextlib.contextmanager
def render_lock(run: str | Path):
    """Serialise the report renders of the processes sharing a run (``flock`` on RUN_DIR/.dukb/render.lock): each
    renders every row on disk when its turn comes, so the last one to finish leaves the complete report, never a
    mix. Waiting is bounded (:data:`LOCK_WAIT`, :func:`file_lock`).

    Raises:
        InputError: RUN_DIR/.dukb is not a directory, or render.lock is a link or not a regular file, or its holder
            kept it past :data:`LOCK_WAIT` or is stopped (named).
    """
    with file_lock(bookkeeping_dir(run) / RENDER_LOCK_NAME):
        yield


#: seconds a process waits for a lock file another process holds (render.lock, planned.json's lock) before it gives
#: up with one line naming the holder; a model cache's lock (one worker finetunes, the others then load) passes a
#: longer wait (:data:`CLAIM_TIMEOUT`)
LOCK_WAIT = 60.0


def _holder_stopped(info: dict | None) -> bool:
    """The holder recorded in a lock file is a process of this host that is stopped (``kill -STOP``, Ctrl-Z):
    it will not release the lock until continued (read from /proc; False where that cannot be told)."""
    if not isinstance(info, dict) or info.get("host") != socket.gethostname() or not isinstance(info.get("pid"), int):
        return False
    try:
        with open(f"/proc/{info['pid']}/stat", "rb") as fh:
            state = fh.read(4096).rpartition(b")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state in (b"T", b"t")


@contextlib.contextmanager
def file_lock(path: str | Path, wait: float | None = None, log: Callable[[str], None] | None = None):
    """Hold an exclusive ``flock`` on ``path`` (created) for the ``with`` block: the processes sharing a run take turns
    for one thing, e.g. a model cache that the first finetunes and the others then load (no lock where the platform
    has no ``flock``). The file is opened without following a link or blocking on a FIFO (a regular file only), and
    the holder writes its pid, host and start time into it.

    No wait is without limit: when another process holds the lock, one line through ``log`` (default: stderr) names
    it and says how long this one waits; a holder still there after ``wait`` seconds (default :data:`LOCK_WAIT`), or
    found stopped (``kill -STOP``; same host), is refused in one line naming it.

    Raises:
        InputError: a link or something other than a regular file is in the lock's place; the holder kept it past
            the wait or is stopped (pid and host named).
    """
    if fcntl is None:
        yield
        return
    path = refuse_links(path)
    fd = _open_regular_fd(path, os.O_RDWR | _NOFOLLOW, 0o644, "a lock file is not a regular file ({}); remove it",
                          "cannot open a lock file: {}")
    try:
        limit = LOCK_WAIT if wait is None else wait
        started, said = time.monotonic(), False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                pass
            holder = _read_holder(path)
            who = f"pid {holder.get('pid', '?')} on {holder.get('host', '?')}" if holder else "another process"
            if _holder_stopped(holder):
                raise InputError(f"held by {who}, which is stopped (kill -STOP or Ctrl-Z): continue it (kill -CONT) "
                                 "or end it, then resume", path)
            if time.monotonic() - started > limit:
                raise InputError(f"held by {who} for more than {limit:g} s; wait for it to finish (or end it), "
                                 "then resume", path)
            if not said:
                (log or _stderr)(f"{path}: held by {who}; waiting up to {limit:g} s")
                said = True
            time.sleep(0.2)
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                  "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}).encode(), 0)
        yield
    finally:
        os.close(fd)


#: the work units a run's workers planned, in RUN_DIR/.dukb/units (:func:`record_units`)
UNITS_PLAN = "planned.json"


def record_units(run: str | Path, units) -> None:
    """Add ``units`` to RUN_DIR/.dukb/units/planned.json (under a lock: every worker adds the units of its
    invocation), so that ``dukb report`` can name the units no worker finished (:func:`unfinished_units`).

    Args:
        run: the run directory; units: tuples of ints and strings (a protocol's :meth:`units`).

    Raises:
        InputError: the file cannot be written, or an existing planned.json is damaged (named; delete it and resume:
            it lists units only, and every worker writes its own again).
    """
    folder = bookkeeping_path(run, UNITS_DIR)
    try:
        Path(run).mkdir(parents=True, exist_ok=True)
        bookkeeping_dir(run, UNITS_DIR)
        with file_lock(folder / (UNITS_PLAN + ".lock")):
            old = _planned_units(Path(run)) or []
            new, seen = list(old), {tuple(u) for u in old}
            for u in units:
                if tuple(u) not in seen:
                    seen.add(tuple(u))
                    new.append(list(u))
            if new != old or not (folder / UNITS_PLAN).exists():
                write_json_atomic(folder / UNITS_PLAN, new)
    except OSError as e:
        raise InputError(f"cannot write the planned work units ({e.strerror or e})", folder / UNITS_PLAN) from None


def _units_folder(run: Path) -> Path:
    """Where the run's work units are: RUN_DIR/.dukb/units, or, for a run an older dukb made and no owner has
    resumed since (:func:`_migrate_bookkeeping`), its top-level units folder (read only, a real directory only)."""
    here = bookkeeping_path(run, UNITS_DIR)
    legacy = run / UNITS_DIR
    if not os.path.lexists(here) and not os.path.islink(legacy) and legacy.is_dir():
        return legacy
    return here


def _planned_units(run: Path) -> list[list] | None:
    path = _units_folder(run) / UNITS_PLAN
    if not path.exists():
        return None
    data = read_json(path, "planned work units")
    if not isinstance(data, list) or not all(isinstance(u, list) for u in data):
        raise InputError("not a list of work units", path)
    return data


def unfinished_units(run: str | Path) -> list[tuple] | None:
    """The planned work units of a run whose claim does not say ``done`` (never claimed, or a worker still on it or
    killed on it), in plan order.

    Args:
        run: the run directory.

    Returns:
        list of unit tuples; None for a run without a plan (written before work units, or not started).

    Raises:
        InputError: planned.json is damaged (named).
    """
    run = Path(run)
    planned = _planned_units(run)
    if planned is None:
        return None
    out = []
    for unit in planned:
        claim = _units_folder(run) / (_safe_name("-".join(map(str, unit))) + ".claim")
        try:
            info = read_claim(claim)[0]
        except InputError:  # a link or a folder in its place: not a finished claim
            info = None
        if not (isinstance(info, dict) and info.get("done") is True):
            out.append(tuple(unit))
    return out


def unfinished_note(run: str | Path, what: str, empty: str = "reference") -> str:
    """A report.md paragraph naming the run's unfinished work units (:func:`unfinished_units`); "" when none (or no
    plan).

    Args:
        run: the run directory; what: how the units read, e.g. "(ratio, method)"; empty: what a unit's "" part is
            called (muse: "reference", a request's reference rows; control: "θ_o").
    """
    left = unfinished_units(run)
    if not left:
        return ""
    shown = ", ".join("(" + ", ".join(str(x) if x != "" else empty for x in u) + ")" for u in left[:8])
    return (f"\n\n**Incomplete run.** {len(left)} {what} work unit(s) are not finished: {shown}"
            f"{', ...' if len(left) > 8 else ''}; the tables and figures cover the rows present (resume the run, or "
            "start another worker with `--resume`, to finish them).\n")


def _safe_name(text: str) -> str:
    """A file name for ``text``: characters other than letters, digits, ``.``, ``_`` and ``-`` become ``_``."""
    import re

    return re.sub(r"[^A-Za-z0-9._-]", "_", text)[:200]


def merge_shards(run: Path, order=None, key: Callable[[dict], tuple] = evaluate_row_key) -> int:
    """Append the rows of RUN_DIR/results.rank*.jsonl (a multi-process run) that results.jsonl lacks, then delete
    the shard files. Call on one process, after every process finished writing. Damaged shard lines are moved to
    results.damaged.jsonl (with the shard's name and line) before the shard is deleted.

    Args:
        run: run directory.
        order: optional key function on rows for the order of the appended rows.
        key: the row key (see :class:`ResultsFile`).

    Returns:
        number of rows appended.

    Raises:
        InputError: a shard cannot be read. OSError: a file cannot be written.
    """
    shards = sorted(Path(run).glob(SHARD_GLOB))
    if not shards:
        return 0
    main = ResultsFile(Path(run) / "results.jsonl", key)
    new: dict[tuple, dict] = {}
    for sh in shards:
        journal = read_journal(sh, key)
        move_aside(journal)
        for row in journal.rows:
            k = key(row)
            if k not in main.done:
                new.setdefault(k, row)
    for row in sorted(new.values(), key=order) if order else new.values():
        main.append(row)
    for sh in shards:
        sh.unlink()
    return len(new)


__all__ = ["LOCK_WAIT", "check_output_dir", "config_problem", "guard_run", "link_refusal", "read_claim",
           "refuse_links", "refuse_links_in",
           "BOOKKEEPING_DIR", "COMMANDS_LOG", "LEGACY_BOOKKEEPING", "RENDER_LOCK_NAME", "bookkeeping_dir",
           "bookkeeping_path", "confirm_run", "log_invocation", "set_claim_hook",
           "DAMAGED_NAME", "DamagedLine", "Difference", "IDENTITY_VERSION", "Journal", "KEY_PROTOCOLS", "LOCK_BYTES",
           "LOCK_NAME", "MAX_HASHED_BYTES", "RECORDED_LIBRARIES", "RESULTS_BYTES", "ROW_CHECKS", "RUN_JSON_BYTES",
           "BOOKKEEPING_FIELDS", "PLAN_CHECKS", "evaluate_plan_check",
           "RUN_LOG_NAME", "ResultsFile", "RunIdentityError", "RunLock", "SHARD_GLOB", "UNITS_DIR", "UnitClaims",
           "WORKERS_DIR", "attach_run_log", "missing_units", "open_to_workers", "run_role", "worker_id",
           "check_for_key", "claim_run", "detach_run_log", "device_info", "evaluate_row_key", "file_lock",
           "history_entry",
           "holds_run_lock", "identity_differences", "journal_note", "merge_identity", "merge_shards", "move_aside",
           "open_append", "open_run", "output_file", "provenance", "read_journal", "read_json", "read_results",
           "json_problem", "loads_json",
           "release_run", "report_journal", "row_check", "sha256_file", "sha256_json", "thread_info", "versions",
           "write_bytes_atomic", "write_json_atomic"]
