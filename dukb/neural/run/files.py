"""The files of a run directory: where each lives, and how dukb writes and reads them.

**Layout.** The top level of a run directory holds what a user reads: config.yaml (the options, written once by the
run's owner), config.json (identity and provenance), commands.log (one line per invocation), results.jsonl, report.md,
summary.csv, figures, run.log and the caches. Every lock and claim lives in the hidden folder RUN_DIR/.dukb/
(:data:`BOOKKEEPING_DIR`): run.lock, render.lock, units/ (a claim per work unit, planned.json and its lock) and
workers/ (each live worker's lock). :class:`RunDir` names them all.

**Inside.** Nothing is written through a symbolic link: every write below a run directory this process holds checks
that no part of the path below RUN_DIR is a link (:func:`refuse_links`; files opened with ``O_NOFOLLOW``, folders
``lstat``-checked): one line ``dukb: error: PATH: a symbolic link (to TARGET) is in the place of a file or folder dukb
writes; ...``, exit 2. RUN_DIR itself may be a link (the user chose it); an empty ``-o`` is refused.

**Bounded.** Every file of a run directory that dukb did not just write is read through
:func:`dukb.kb.csvfile.read_bytes`: only a regular file of bounded size, so a FIFO, a device or a directory planted in
its place is an error naming it, not a hang. Files are written through a fresh temporary file and an atomic rename
(:func:`dukb.kb.io.atomic_output`), appended to only when they are regular files (:func:`open_append`), and a
report's outputs are cleared of anything but a regular file first (:func:`output_file`).

Source: dukb (the run directory of every protocol).
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

from dukb import InputError, one_line
from dukb.kb.csvfile import decode_text, file_kind, read_bytes
from dukb.kb.io import atomic_output

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
#: the log of a run's invocations, one line each (:func:`dukb.neural.run.lock.log_invocation`), beside config.yaml
COMMANDS_LOG = "commands.log"
#: the run's identity, provenance and history (:mod:`dukb.neural.run.identity`), and the options it ran with
CONFIG_NAME = "config.json"
CONFIG_YAML_NAME = "config.yaml"
#: the results journal (:mod:`dukb.neural.run.journal`), the shards of a multi-process run, and where a resume moves
#: the damaged lines of RUN_DIR/results*.jsonl (one JSON object per line: file, line, reason, text, moved)
RESULTS_NAME = "results.jsonl"
SHARD_GLOB = "results.rank*.jsonl"
DAMAGED_NAME = "results.damaged.jsonl"
#: the log file of a run directory: library warnings (transformers, peft, torch, ``warnings.warn``) while a protocol
#: holds the run (:mod:`dukb.neural.run.log`)
RUN_LOG_NAME = "run.log"
#: the cached minimal deep unlearning sets of the run's targets, and the baseline probe of its model (before
#: unlearning), kept so that a resume or a joining worker reads them instead of computing them again
SETS_NAME = "sets.json"
PROBE_CACHE_NAME = "baseline_probe.json"
#: what a report writes at the top level
REPORT_NAME = "report.md"
SUMMARY_NAME = "summary.csv"
#: the work units a run's workers planned, in RUN_DIR/.dukb/units (:func:`dukb.neural.run.units.record_units`)
UNITS_PLAN = "planned.json"


@dataclass(frozen=True)
class RunDir:
    """A run directory and the path of every file dukb keeps in it: the one place their names are spelled (the
    constants above).

    Attributes:
        path: the run directory (RUN_DIR; need not exist).

    Source: dukb (the run directory of every protocol).
    """

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    config = property(lambda self: self.path / CONFIG_NAME, doc="RUN_DIR/config.json: identity, provenance, history.")
    config_yaml = property(lambda self: self.path / CONFIG_YAML_NAME, doc="RUN_DIR/config.yaml: the options.")
    results = property(lambda self: self.path / RESULTS_NAME, doc="RUN_DIR/results.jsonl: the rows.")
    damaged = property(lambda self: self.path / DAMAGED_NAME, doc="RUN_DIR/results.damaged.jsonl: lines set aside.")
    commands_log = property(lambda self: self.path / COMMANDS_LOG, doc="RUN_DIR/commands.log: one line per invocation.")
    run_log = property(lambda self: self.path / RUN_LOG_NAME, doc="RUN_DIR/run.log: library warnings.")
    sets = property(lambda self: self.path / SETS_NAME, doc="RUN_DIR/sets.json: the cached deep unlearning sets.")
    probe_cache = property(lambda self: self.path / PROBE_CACHE_NAME, doc="RUN_DIR/baseline_probe.json.")
    report = property(lambda self: self.path / REPORT_NAME, doc="RUN_DIR/report.md.")
    summary = property(lambda self: self.path / SUMMARY_NAME, doc="RUN_DIR/summary.csv.")
    bookkeeping = property(lambda self: self.path / BOOKKEEPING_DIR, doc="RUN_DIR/.dukb: locks and claims.")
    lock = property(lambda self: self.bookkeeping / LOCK_NAME, doc="RUN_DIR/.dukb/run.lock: the run's lock.")
    render_lock = property(lambda self: self.bookkeeping / RENDER_LOCK_NAME, doc="RUN_DIR/.dukb/render.lock.")
    units = property(lambda self: self.bookkeeping / UNITS_DIR, doc="RUN_DIR/.dukb/units: the work-unit claims.")
    units_plan = property(lambda self: self.units / UNITS_PLAN, doc="RUN_DIR/.dukb/units/planned.json.")
    workers = property(lambda self: self.bookkeeping / WORKERS_DIR, doc="RUN_DIR/.dukb/workers: workers' locks.")

    def shard(self, rank: int) -> Path:
        """RUN_DIR/results.rank{rank}.jsonl: the rows of process ``rank`` of a multi-process run (int >= 0)."""
        return self.path / SHARD_GLOB.replace("*", str(rank))

    def shards(self) -> list[Path]:
        """The shard files of a multi-process run (RUN_DIR/results.rank*.jsonl), sorted."""
        return sorted(self.path.glob(SHARD_GLOB))


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
            for name in Path(full[len(root.rstrip(os.sep)) + 1 :]).parts:
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
    return InputError(
        f"a symbolic link{target} is in the place of a file or folder dukb writes; dukb writes nothing "
        "through a link: remove it",
        path,
    )


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


def _stderr(msg: str) -> None:
    print(one_line(msg), file=sys.stderr, flush=True)


#: Largest JSON file of a run directory read back (config.json, sets.json, splits.json, the caches): as
#: :data:`dukb.kb.csvfile.MAX_INPUT_BYTES`.
RUN_JSON_BYTES = 256 * 1024 * 1024


def read_run_config(run: str | Path) -> dict:
    """RUN_DIR/config.json, read bounded (:func:`read_json`).

    Raises:
        InputError: not a regular file, too large, not JSON, or not a JSON object.
    """
    path = Path(run) / "config.json"
    config = read_json(path, "run config")  # bounded: a FIFO, device or folder is an error
    if not isinstance(config, dict):
        raise InputError("not a run config (expected a JSON object)", path)
    return config


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
        return (
            None,
            f"not JSON: an integer of more than {limit} digits" if "digits" in str(e) else f"not JSON: {e}",
            None,
        )
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
    """Write a file of a run all or nothing, through :func:`dukb.kb.io.atomic_output` (a fresh temporary file beside
    it, synced, then an atomic rename: a kill or a full disk never leaves half a file, and a FIFO in its place is
    replaced, never written through), after checking that no part of the path below a guarded run directory is a
    symbolic link (:func:`refuse_links`).

    Raises:
        InputError: a directory or a symbolic link is in its place, a link at a level below a guarded run directory,
            or the file cannot be written (``cannot write: ...``, named).
    """
    with atomic_output(refuse_links(path), binary=True) as fh:
        fh.write(data)


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
    fd = _open_regular_fd(
        refuse_links(path), os.O_WRONLY | os.O_APPEND | _NOFOLLOW, 0o666, "not a regular file ({})", "cannot write: {}"
    )
    return os.fdopen(fd, "a", encoding="utf-8")


def _safe_name(text: str) -> str:
    """A file name for ``text``: characters other than letters, digits, ``.``, ``_`` and ``-`` become ``_``."""

    return re.sub(r"[^A-Za-z0-9._-]", "_", text)[:200]


__all__ = [
    "BOOKKEEPING_DIR",
    "COMMANDS_LOG",
    "LOCK_NAME",
    "RENDER_LOCK_NAME",
    "RUN_JSON_BYTES",
    "UNITS_DIR",
    "WORKERS_DIR",
    "bookkeeping_dir",
    "bookkeeping_path",
    "check_output_dir",
    "guard_run",
    "json_problem",
    "link_refusal",
    "loads_json",
    "open_append",
    "output_file",
    "read_json",
    "refuse_links",
    "refuse_links_in",
    "write_bytes_atomic",
    "write_json_atomic",
]
