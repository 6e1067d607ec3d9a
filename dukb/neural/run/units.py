"""Work units: claims in RUN_DIR/.dukb/units (so any number of processes share one run), the plan of units that
``dukb report`` checks them against, and the merge of a multi-process run's shard files.

Source: dukb (work units any launcher can run).
"""

from __future__ import annotations

import json
import os
import secrets
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path

from dukb import InputError
from dukb.neural.run.files import (
    _NOFOLLOW,
    SHARD_GLOB,
    UNITS_DIR,
    UNITS_PLAN,
    WORKERS_DIR,
    RunDir,
    _open_regular_fd,
    _safe_name,
    bookkeeping_dir,
    bookkeeping_path,
    json_problem,
    link_refusal,
    read_json,
    write_bytes_atomic,
    write_json_atomic,
)
from dukb.neural.run.journal import ResultsFile, move_aside, read_journal
from dukb.neural.run.lock import LOCK_BYTES, file_lock
from dukb.neural.run.rows import RowProblem

try:  # POSIX; elsewhere a run directory is not locked
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None


#: seconds between two renewals of a worker's claims by its background heartbeat (:class:`UnitClaims`)
HEARTBEAT = 60.0
#: a claim not renewed for this long (seconds: a few heartbeats) is taken over even when its worker's lock cannot be
#: checked (a worker on another host whose file system does not share ``flock``): its worker is gone
CLAIM_TIMEOUT = 10 * HEARTBEAT
#: seconds a worker waits for a model cache another worker is finetuning (muse's retrain models) before it gives up
CACHE_WAIT = 6 * 3600.0


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
    if (
        problem
        or not isinstance(info, dict)
        or not isinstance(info.get("worker"), str)
        or not isinstance(info.get("worker_lock", ""), str)
        or not isinstance(info.get("done"), bool)
    ):
        return None, fst
    return info, fst


class UnitClaims:
    """Work units claimed atomically in the run directory, so that any number of processes (several shells, a SLURM
    array, torchrun) share one run without a process group.

    A unit (e.g. a (target, method) pair) is claimed by creating ``RUN_DIR/.dukb/units/<unit>.claim`` with
    ``O_CREAT | O_EXCL``; it names its worker and that worker's lock file ``RUN_DIR/.dukb/workers/<worker>.lock``, which
    the worker holds (``flock``) for its whole life. A claim whose worker is gone (its lock free: killed, even by
    SIGKILL) or silent for :data:`CLAIM_TIMEOUT` seconds is taken over by exactly one other worker (an ``O_EXCL``
    marker per stale claim). A claim is a lease: a background thread renews (``utime``) every unfinished claim of
    this worker each ``heartbeat`` seconds while the worker lives, so a live worker's claim is never silent that long
    however long its unit runs, and a dead one's is free after a few missed heartbeats. A finished unit's claim says ``done``. A unit's rows depend only on the unit and the
    seed, never on which worker ran it.

    Args:
        run: the run directory; worker: this worker's id (:func:`worker_id`); timeout: see :data:`CLAIM_TIMEOUT`;
        heartbeat: seconds between renewals (:data:`HEARTBEAT`; None: no background thread).

    Raises:
        InputError: the directories or the worker's lock file cannot be created, or RUN_DIR/.dukb (or a folder in
            it) is not a directory.

    Source: dukb; the claim file follows the O_EXCL lock-file idiom (open(2)).
    """

    def __init__(self, run: str | Path, worker: str, timeout: float | None = None, heartbeat: float | None = HEARTBEAT):
        try:
            Path(run).mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise InputError(f"cannot create the run directory ({e.strerror})", run) from None
        self.dir = bookkeeping_dir(run, UNITS_DIR)
        self.workers = bookkeeping_dir(run, WORKERS_DIR)
        self.worker = worker
        self.timeout = CLAIM_TIMEOUT if timeout is None else timeout  # read when called: a test may patch it
        self._held: set[tuple] = set()  # this worker's unfinished claims, renewed by the heartbeat
        self._stop = threading.Event()
        self.lock_name = _safe_name(worker) + ".lock"
        self._fd = _open_regular_fd(
            self.workers / self.lock_name,
            os.O_RDWR | _NOFOLLOW,
            0o644,
            "a worker's lock file is not a regular file ({}); remove it",
            "cannot create the work-unit files: {}",
        )
        if fcntl is not None:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        self._beat = None
        if heartbeat is not None:
            self._beat = threading.Thread(
                target=self._renew, args=(heartbeat,), daemon=True, name=f"dukb-heartbeat-{worker}"
            )
            self._beat.start()

    def _renew(self, every: float) -> None:
        """The heartbeat thread: renew every unfinished claim of this worker each ``every`` seconds until
        :meth:`close`."""
        while not self._stop.wait(every):
            for unit in list(self._held):
                self.heartbeat(unit)

    def path(self, unit: tuple) -> Path:
        """The claim file of ``unit`` (a tuple of ints and strings)."""
        return self.dir / (_safe_name("-".join(map(str, unit))) + ".claim")

    def _body(self, done: bool = False, claimed: float | None = None) -> bytes:
        """The claim's content: worker, its lock file, done, ``since`` (when last written, local time) and
        ``claimed`` (when this worker claimed the unit, seconds since the epoch; kept when it is marked done)."""
        return json.dumps(
            {
                "worker": self.worker,
                "worker_lock": self.lock_name,
                "done": done,
                "since": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "claimed": round(time.time() if claimed is None else claimed, 3),
            }
        ).encode()

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
        mine = self._claim(unit, reopen)
        if mine:
            self._held.add(tuple(unit))
        return mine

    def _claim(self, unit: tuple, reopen: bool) -> bool:
        """:meth:`claim` without recording the unit as held."""
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
            os.close(
                os.open(
                    path.with_name(f"{path.name}.takeover-{st.st_ino}-{st.st_mtime_ns}"),
                    os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                    0o644,
                )
            )
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
        self._held.discard(tuple(unit))
        claimed = (self.state(unit) or {}).get("claimed")
        write_bytes_atomic(
            self.path(unit), self._body(done=True, claimed=claimed if isinstance(claimed, (int, float)) else None)
        )

    def close(self) -> None:
        """Stop the heartbeat, release this worker's lock (its unfinished claims become free to take over) and remove
        its lock file."""
        self._stop.set()
        if self._beat is not None and self._beat is not threading.current_thread():
            self._beat.join()
        if self._fd >= 0:
            try:
                (self.workers / self.lock_name).unlink()
            except OSError:
                pass
            os.close(self._fd)
            self._fd = -1


def claimed_units(claims: UnitClaims | None, results: ResultsFile, units, pending: Callable):
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


def _planned_units(run: Path) -> list[list] | None:
    path = RunDir(run).units_plan
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
        claim = bookkeeping_path(run, UNITS_DIR, _safe_name("-".join(map(str, unit))) + ".claim")
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
            called (e.g. "reference" for a request's reference rows).
    """
    left = unfinished_units(run)
    if not left:
        return ""
    shown = ", ".join("(" + ", ".join(str(x) if x != "" else empty for x in u) + ")" for u in left[:8])
    return (
        f"\n\n**Incomplete run.** {len(left)} {what} work unit(s) are not finished: {shown}"
        f"{', ...' if len(left) > 8 else ''}; the tables and figures cover the rows present (resume the run, or "
        "start another worker with `--resume`, to finish them).\n"
    )


def merge_shards(run: Path, key: Callable[[dict], tuple], order=None, check: RowProblem | None = None) -> int:
    """Append the rows of RUN_DIR/results.rank*.jsonl (a multi-process run) that results.jsonl lacks, then delete
    the shard files. Call on one process, after every process finished writing. Damaged shard lines are moved to
    results.damaged.jsonl (with the shard's name and line) before the shard is deleted.

    Args:
        run: run directory.
        key: the protocol's row key (see :class:`dukb.neural.run.journal.ResultsFile`).
        order: optional key function on rows for the order of the appended rows.
        check: the protocol's row check (:meth:`dukb.neural.run.rows.RowSchema.check`); None: none.

    Returns:
        number of rows appended.

    Raises:
        InputError: a shard cannot be read. OSError: a file cannot be written.
    """
    shards = RunDir(run).shards()
    if not shards:
        return 0
    main = ResultsFile(RunDir(run).results, key, check=check)
    new: dict[tuple, dict] = {}
    for sh in shards:
        journal = read_journal(sh, key, check)
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


__all__ = [
    "CACHE_WAIT",
    "CLAIM_TIMEOUT",
    "HEARTBEAT",
    "SHARD_GLOB",
    "UNITS_PLAN",
    "UnitClaims",
    "claimed_units",
    "merge_shards",
    "read_claim",
    "record_units",
    "unfinished_note",
    "unfinished_units",
]
