"""One writer per run directory, and bounded waits for every lock.

:func:`claim_run` takes RUN_DIR/.dukb/run.lock (``flock``, released by the kernel when its process ends, even by
SIGKILL) before config.json is read, and the protocol holds it until it returns (:func:`holds_run_lock`). A second
invocation with other settings is refused at once, naming the directory and the holder (pid, host); one with the same
settings joins the run as another worker or waits for the holder, at most :data:`LOCK_WAIT` seconds, then refuses in
one line naming it. :func:`file_lock` (render.lock, the plan's lock) waits alike.

Source: dukb (the run directory of every protocol).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import shlex
import socket
import sys
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

from dukb import InputError, __version__, one_line
from dukb.kb.csvfile import read_bytes
from dukb.neural import distributed as dist
from dukb.neural.run.files import (
    _NOFOLLOW,
    BOOKKEEPING_DIR,
    COMMANDS_LOG,
    LOCK_NAME,
    RENDER_LOCK_NAME,
    RunDir,
    _make_dir,
    _open_regular_fd,
    _stderr,
    bookkeeping_dir,
    bookkeeping_path,
    check_output_dir,
    guard_run,
    open_append,
    refuse_links,
    refuse_links_in,
)
from dukb.neural.run.identity import RunIdentityError, identity_differences, open_run
from dukb.neural.run.log import attach_run_log, detach_run_log
from dukb.neural.run.migrate import migrate

try:  # POSIX; elsewhere a run directory is not locked
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None


# ----------------------------------------------------------------------------------- one writer per run --------
#: largest lock file read (the holder's description, a few KiB)
LOCK_BYTES = 1 << 20
#: seconds a second invocation waits for a holder that has the lock but has not yet recorded its identity
HOLDER_INFO_TIMEOUT = 30.0

_HELD: dict[tuple[str, int], RunLock] = {}
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
    log_handler: logging.Handler | None = None
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
            if (
                self.created
                and BOOKKEEPING_DIR in top
                and top <= {BOOKKEEPING_DIR, COMMANDS_LOG}
                and [p.name for p in folder.iterdir()] == [LOCK_NAME]
            ):
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
    return _open_regular_fd(
        path,
        os.O_RDWR | getattr(os, "O_NOFOLLOW", 0),
        0o644,
        "the run's lock file is not a regular file ({}); remove it",
        "cannot open the run's lock file: {}",
    )


#: seconds between a waiter's attempts to lock a run held by another process
LOCK_POLL = 0.5
#: seconds a second invocation with the same settings waits to join a live run while its owner sets it up (finetunes
#: the model) before it refuses, naming the owner
JOIN_WAIT = 6 * 3600.0


def _open_run_lock(run: Path, path: Path) -> RunLock | None:
    """Create ``run`` (when missing) and RUN_DIR/.dukb, and open the lock file ``path`` there, not yet locked.

    Returns:
        The (unlocked) :class:`RunLock`, or None when the directory vanished meanwhile (removed by a holder that
        created the run and released it): try again.

    Raises:
        InputError: as :func:`_open_lock` and :func:`bookkeeping_dir`.
    """
    created = _make_dir(run) if not run.is_dir() else []
    try:
        bookkeeping_dir(run)
        fd = _open_lock(path)
    except InputError:
        if not run.is_dir() or not os.path.lexists(path.parent):
            return None
        raise
    return RunLock(run, fd, created)


def _check_holder(
    holder: dict,
    run: Path,
    kind: str,
    identity: dict,
    extendable: Collection[str],
    resume: bool,
    stopped_since: float | None,
) -> float | None:
    """Refuse to wait for or join the lock's ``holder`` (its recorded description) when it runs another protocol,
    with other settings, without ``resume``, or has stayed stopped (kill -STOP, Ctrl-Z) for :data:`LOCK_WAIT` s.

    Args:
        stopped_since: ``time.monotonic()`` when the holder was first seen stopped, or None.

    Returns:
        The new ``stopped_since`` (None while the holder is not stopped).

    Raises:
        RunIdentityError: one line naming the directory and the holder.
    """
    if holder.get("protocol") != kind:
        raise RunIdentityError(f"in use by {_describe(holder)}, not `dukb {kind}`; choose another -o", run)
    diffs = identity_differences(holder["identity"], identity, extendable if resume else ())
    if diffs:
        raise RunIdentityError(
            f"in use by {_describe(holder)} with other settings ({len(diffs)} differing "
            f"key{'s' if len(diffs) > 1 else ''}): "
            + "; ".join(map(str, diffs))
            + ". Wait for it to finish or choose another -o",
            run,
            diffs,
        )
    if not resume:
        raise RunIdentityError(
            f"in use by {_describe(holder)} with the same settings; pass --resume to "
            "wait for it and continue the run, or choose another -o",
            run,
        )
    # a holder stopped (kill -STOP, Ctrl-Z) would be waited for without end: refused once it has stayed
    # stopped for LOCK_WAIT seconds
    stopped_since = (stopped_since or time.monotonic()) if _holder_stopped(holder) else None
    if stopped_since is not None and time.monotonic() - stopped_since > LOCK_WAIT:
        raise RunIdentityError(
            f"in use by {_describe(holder)}, which has been stopped (kill -STOP or Ctrl-Z) "
            f"for more than {LOCK_WAIT:g} s; continue it (kill -CONT) or end it, then "
            "resume",
            run,
        )
    return stopped_since


def _acquire(
    run: Path,
    kind: str,
    identity: dict,
    extendable: Collection[str],
    resume: bool,
    log: Callable[[str], None],
    joinable: bool = True,
) -> RunLock:
    """Lock ``run`` for this process, refusing or waiting for a holder (see :func:`claim_run`)."""
    started = time.monotonic()
    announced = rechecked = False
    stopped_since = None
    while True:
        path = bookkeeping_path(run, LOCK_NAME)
        lock = _open_run_lock(run, path)
        if lock is None:  # removed by a holder that created the run
            continue
        fd = lock.fd
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
                raise RunIdentityError(
                    "in use by another process that has not recorded its settings; wait for it "
                    "to finish or choose another -o",
                    run,
                )
            time.sleep(0.1)
            continue
        try:
            stopped_since = _check_holder(holder, run, kind, identity, extendable, resume, stopped_since)
        except BaseException:
            os.close(fd)
            raise

        same = holder.get("identity") == json.loads(json.dumps(identity, default=str))  # as the lock file holds it
        if same and joinable and not dist.is_distributed():
            # the same run exactly: join it as another worker once its owner has finished the setup (shared lock)
            if not announced:
                log(
                    one_line(
                        f"{run}: in use by {_describe(holder)} with the same settings; joining it as another "
                        "worker" + ("" if holder.get("joinable") else " once its setup is done")
                    )
                )
                announced = True
            joined = _join(lock, path, holder, identity, run, started, rechecked)
            if isinstance(joined, RunLock):
                return joined
            rechecked = joined
            continue
        if time.monotonic() - started > LOCK_WAIT:  # bounded: a resume never waits without end
            os.close(fd)
            raise RunIdentityError(
                f"in use by {_describe(holder)} with the same settings for more than {LOCK_WAIT:g} "
                "s; wait for it to finish, then resume (or choose another -o)",
                run,
            )
        if not announced:
            log(
                one_line(
                    f"{run}: in use by {_describe(holder)} with the same settings; waiting up to {LOCK_WAIT:g} s "
                    "for it to finish"
                )
            )
            announced = True
        os.close(fd)  # polled, so that an owner's switch to a shared lock is never overtaken by this waiter
        time.sleep(LOCK_POLL)


def _join(
    lock: RunLock, path: Path, holder: dict, identity: dict, run: Path, started: float, rechecked: bool
) -> RunLock | bool:
    """Join the run whose owner ``holder`` runs the same identity as another worker: take a shared lock on
    ``lock``'s file, polled (not blocking: a stopped owner is noticed by the caller), once the owner has finished
    its setup (``joinable`` in the lock file) and this process has seen the run twice (``rechecked``).

    Returns:
        ``lock`` (shared) when joined; otherwise, its file closed, the new value of ``rechecked`` (the caller
        starts over: the owner may have finished or failed meanwhile, and then this process takes the run over).

    Raises:
        RunIdentityError: the owner's setup has not ended within :data:`JOIN_WAIT` seconds of ``started``.
    """
    fd = lock.fd
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        if time.monotonic() - started > JOIN_WAIT:  # an owner whose setup never ends
            raise RunIdentityError(
                f"in use by {_describe(holder)} with the same settings, whose setup has "
                f"not ended in {JOIN_WAIT:g} s; end it, then resume",
                run,
            ) from None
        time.sleep(LOCK_POLL)
        return rechecked
    except BaseException:
        os.close(fd)
        raise
    now = _read_holder(path) if _same_file(fd, path) else None
    if (
        now is not None
        and now.get("joinable")
        and rechecked
        and now.get("identity") == json.loads(json.dumps(identity, default=str))
    ):
        lock.shared = True
        return lock
    # once more from the top: the owner may have finished (or failed) while this waited, and then this process
    # takes the run over as its owner; if it still runs, this joins it
    if rechecked:
        time.sleep(LOCK_POLL)
    os.close(fd)
    return True


def _open_locked_run(
    lock: RunLock, run: Path, kind: str, identity: dict, extendable: Collection[str], resume: bool
) -> tuple[dict, dict, dict]:
    """Open the run under the lock just taken (:func:`claim_run`): the owner records itself in the lock file, then
    :func:`open_run`, the owner records the merged identity and migrates the run, the invocation is logged, the
    claim kept for :func:`confirm_run` and warnings sent to RUN_DIR/run.log. On any failure the lock is released.

    Returns:
        As :func:`open_run`: (merged identity, additions, previous config.json or {}).

    Raises:
        RunIdentityError, InputError: as :func:`open_run`, :func:`migrate`, :func:`log_invocation`.
    """
    info = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "protocol": kind,
        "since": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "argv": list(sys.argv),
    }
    try:
        if not lock.shared:  # a joining worker leaves the owner's record in place
            lock.record(info)
        merged, added, old = open_run(run, kind, identity, extendable=extendable, resume=resume)
        if not lock.shared:
            lock.info = info | {"identity": merged}
            lock.record(lock.info)
            migrate(run)  # a run of an earlier layout (config.json's run_layout) is moved over
        role = "worker" if lock.shared else ("resume" if old else "owner")
        log_invocation(run, role)
        lock.claimed = (role, merged, added)  # for the front end's hook, once the protocol accepts the run
        lock.log_handler = attach_run_log(run)
    except BaseException:
        lock.release()
        raise
    return merged, added, old


def claim_run(
    run: str | Path,
    kind: str,
    identity: dict,
    *,
    extendable: Collection[str] = (),
    resume: bool = True,
    log: Callable[[str], None] | None = None,
    joinable: bool = True,
) -> tuple[dict, dict, dict]:
    """Take the run directory's lock, then check the invocation against the run there (:func:`open_run`).

    The lock (``flock`` on RUN_DIR/.dukb/run.lock, which this creates along with the directory) is taken before
    config.json is read and held until the protocol function decorated with :func:`holds_run_lock` returns (or
    until the process ends, however it ends: the kernel releases it). The lock file records the holder's pid, host,
    protocol, start time and identity. When another process holds the lock:

    - other settings (its identity differs, compared as :func:`open_run` would), another protocol, or ``resume``
      off: refused at once, naming the directory and the holder;
    - exactly the same identity with ``resume`` (a ``joinable`` protocol): one line through ``log`` saying it joins,
      then a shared lock once the owner has called :func:`open_to_workers` (at most :data:`JOIN_WAIT` seconds); the
      caller is a worker (:func:`run_role`) that claims units (:class:`dukb.neural.run.units.UnitClaims`) and leaves
      config.json and the caches to the owner. If the owner ended meanwhile, this process owns the run (a resume);
    - the same settings with ``resume`` and additions (targets, methods, grid values): one line through ``log``
      saying it waits for the holder (at most :data:`LOCK_WAIT` seconds, then refused in one line naming the
      holder), then, once the lock is free, the run is opened as a resume of what the holder wrote.

    Nothing is written through a symbolic link: a link anywhere below RUN_DIR (down to 4 levels: a file, ``.dukb``,
    ``.dukb/units``, ``finetuned``, a claim) is refused in one line naming it before the run is touched
    (:func:`refuse_links_in`), and every later write below RUN_DIR checks again (:func:`refuse_links`).
    An empty ``run`` is refused (:func:`check_output_dir`).

    Once the run is claimed, the invocation is logged (:func:`log_invocation`: one line in RUN_DIR/commands.log with
    its role, "owner" for the invocation that creates the run, "resume" for one that continues it, "worker" for one
    that joins a live run) and the owner brings a run of an earlier layout to the current one
    (:func:`dukb.neural.run.migrate.migrate`). When the protocol has accepted the run (its plan stage passed), it calls
    :func:`confirm_run`, which runs the front end's hook under the lock (:func:`set_claim_hook`: the command line
    writes RUN_DIR/config.yaml there).

    Under a multi-process launch only the main process locks (the others read what it checked). While the claim
    holds, library warnings (WARNING and worse of every logger, ``warnings.warn``) are written to RUN_DIR/run.log
    (:func:`attach_run_log`), not to the terminal.

    Args:
        run: the run directory (created when missing; removed again when the claim fails and left it empty).
        kind: the protocol (its registry name, recorded in the lock file and config.json).
        identity: the new invocation's identity (JSON-like).
        extendable: identity keys that may gain entries (see :func:`identity_differences`).
        resume: the user asked to continue the run (see :func:`open_run`).
        log: callable(str) for the waiting line (default: stderr).
        joinable: a second invocation with the same identity may join the live run as another worker (the
            protocol's :attr:`dukb.neural.protocols.ProtocolInfo.joinable`); else it waits for the holder.

    Returns:
        As :func:`open_run`: (merged identity to record, additions, previous config.json or {}).

    Raises:
        RunIdentityError: another process holds the directory with other settings, another protocol, or without
            ``resume``; or it held the directory past :data:`LOCK_WAIT` (:data:`JOIN_WAIT` for a joining worker);
            or the run's config.json refuses the invocation (:func:`open_run`). One line naming the directory (and
            the holder's pid and host).
        InputError: the directory or its lock file cannot be created; RUN_DIR/.dukb is not a directory; an older
            dukb still holds the run (its RUN_DIR/run.lock).
    """

    run = check_output_dir(run)
    guard_run(run)  # no write below RUN_DIR follows a symbolic link (refuse_links)
    refuse_links_in(run)  # a link planted anywhere in the run is refused before anything is read or written
    key = (os.path.realpath(run), threading.get_ident())
    if fcntl is None or (dist.is_distributed() and not dist.is_main_process()) or key in _HELD:
        return open_run(run, kind, identity, extendable=extendable, resume=resume)
    lock = _acquire(run, kind, identity, extendable, resume, log or _stderr, joinable)
    merged, added, old = _open_locked_run(lock, run, kind, identity, extendable, resume)
    with _HELD_GUARD:
        _HELD[key] = lock
    return merged, added, old


#: what the front end does for each invocation that claims a run (:func:`set_claim_hook`), or None
_CLAIM_HOOK: Callable[[Path, str, dict, dict], None] | None = None


def set_claim_hook(hook: Callable[[Path, str, dict, dict], None] | None):
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
    shell-quoted (``cd DIR && COMMAND`` repeats the invocation); non-printing characters are escaped, so a line is one
    line. The file is appended to with one write (processes sharing a run append alike), as a regular file only.

    Args:
        run: the run directory; role: as above; argv: the command line (default: ``sys.argv``).

    Raises:
        InputError: something other than a regular file is in its place, or it cannot be written (named).
    """

    words = list(sys.argv if argv is None else argv)
    fields = [
        time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        role,
        f"dukb {__version__}",
        shlex.quote(os.getcwd()),
        shlex.join(words),
    ]
    line = "\t".join(one_line(f) for f in fields) + "\n"
    with open_append(RunDir(run).commands_log) as fh:
        fh.write(line)


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


#: seconds a process waits for a lock another process holds (the run lock of a resume with additions, render.lock,
#: planned.json's lock) before it gives up with one line naming the holder; a model cache's lock (one worker
#: finetunes, the others then load) passes a longer wait (:data:`dukb.neural.run.units.CACHE_WAIT`)
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
    fd = _open_regular_fd(
        path,
        os.O_RDWR | _NOFOLLOW,
        0o644,
        "a lock file is not a regular file ({}); remove it",
        "cannot open a lock file: {}",
    )
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
                raise InputError(
                    f"held by {who}, which is stopped (kill -STOP or Ctrl-Z): continue it (kill -CONT) "
                    "or end it, then resume",
                    path,
                )
            if time.monotonic() - started > limit:
                raise InputError(
                    f"held by {who} for more than {limit:g} s; wait for it to finish (or end it), then resume", path
                )
            if not said:
                (log or _stderr)(f"{path}: held by {who}; waiting up to {limit:g} s")
                said = True
            time.sleep(0.2)
        os.ftruncate(fd, 0)
        os.pwrite(
            fd,
            json.dumps(
                {"pid": os.getpid(), "host": socket.gethostname(), "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
            ).encode(),
            0,
        )
        yield
    finally:
        os.close(fd)


__all__ = [
    "HOLDER_INFO_TIMEOUT",
    "JOIN_WAIT",
    "LOCK_BYTES",
    "LOCK_POLL",
    "LOCK_WAIT",
    "RunLock",
    "claim_run",
    "confirm_run",
    "file_lock",
    "holds_run_lock",
    "log_invocation",
    "open_to_workers",
    "release_run",
    "render_lock",
    "run_role",
    "set_claim_hook",
]
