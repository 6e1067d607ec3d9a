"""The layout of a run directory and its one migration.

A run directory's layout (which files live where) has a version, :data:`RUN_LAYOUT`, recorded in its config.json
(``provenance.run_layout``, written by every protocol through :func:`dukb.neural.run.provenance.provenance`). A
config.json without it was written in the previous layout. :func:`migrate` brings a run of the previous layout to the
current one; :func:`dukb.neural.run.lock.claim_run` calls it for the run's owner (an exclusive lock), once the run's
identity was accepted, so no other module keeps a branch for an earlier layout.

Layouts:

1. the bookkeeping at the run's top level: run.lock, render.lock, units/ (claims, planned.json and its lock) and
   workers/ (each worker's lock);
2. the bookkeeping in the hidden folder RUN_DIR/.dukb/ (:data:`dukb.neural.run.files.BOOKKEEPING_DIR`), the top
   level holding what a user reads only.

Source: dukb (the run directory of every protocol).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from dukb import InputError
from dukb.kb.csvfile import read_bytes
from dukb.neural.run.files import (
    LOCK_NAME,
    RENDER_LOCK_NAME,
    RUN_JSON_BYTES,
    UNITS_DIR,
    WORKERS_DIR,
    RunDir,
    bookkeeping_dir,
    bookkeeping_path,
    json_problem,
)
from dukb.neural.run.identity import RunIdentityError

try:  # POSIX; elsewhere a run directory is not locked
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None

#: the layout of a run directory this dukb writes (see the module docstring), recorded in config.json's provenance
RUN_LAYOUT = 2

#: the bookkeeping names layout 1 kept at a run's top level, and the entries of its units/ folder (claims, takeover
#: markers, the plan and its lock)
_TOP_LEVEL = (LOCK_NAME, RENDER_LOCK_NAME, UNITS_DIR, WORKERS_DIR)
_UNIT_FILES = (".claim", "planned.json", "planned.json.lock")


def run_layout(run: str | Path) -> int:
    """The layout of the run in ``run``: config.json's ``provenance.run_layout``; 1 for a config.json without it (or
    one that cannot be read: the identity check names what is wrong with it); :data:`RUN_LAYOUT` for a directory
    without config.json that holds none of layout 1's names (a new run)."""
    path = RunDir(run).config
    if not os.path.lexists(path):
        return 1 if any(os.path.lexists(Path(run) / n) for n in _TOP_LEVEL) else RUN_LAYOUT
    try:
        config, problem, _ = json_problem(read_bytes(path, "run config", limit=RUN_JSON_BYTES).decode("utf-8"))
    except (InputError, ValueError):  # unreadable (not UTF-8 too): the identity check (open_run) names it
        return 1
    prov = config.get("provenance") if isinstance(config, dict) and not problem else None
    version = prov.get("run_layout") if isinstance(prov, dict) else None
    return version if isinstance(version, int) and not isinstance(version, bool) else 1


def migrate(run: str | Path) -> int:
    """Bring the run in ``run`` from the previous layout (1) to the current one (:data:`RUN_LAYOUT`); nothing for a
    run of the current layout. Call it holding the run's exclusive lock. Only regular files and real directories are
    touched (a symbolic link in their place is left alone, and refused where dukb writes):

    - run.lock: refused when a dukb of layout 1 still holds it (``flock``), else removed;
    - render.lock: removed;
    - units/: moved to RUN_DIR/.dukb/units when it holds claims and the plan only and RUN_DIR/.dukb/units does not
      exist yet (its claims keep their done state; a claim's worker, gone, is taken over as usual);
    - workers/: its lock files removed (their workers are gone: the old owner's lock is free), then the folder when
      empty.

    Args:
        run: the run directory.

    Returns:
        The layout the run had (:func:`run_layout`).

    Raises:
        RunIdentityError: a dukb of layout 1 still holds RUN_DIR/run.lock (one line).
    """
    run = Path(run)
    found = run_layout(run)
    if found >= RUN_LAYOUT:
        return found
    _free_old_lock(run / LOCK_NAME, run)
    if _mode(run / RENDER_LOCK_NAME, stat.S_ISREG):
        (run / RENDER_LOCK_NAME).unlink(missing_ok=True)
    units = run / UNITS_DIR
    if _mode(units, stat.S_ISDIR) and not os.path.lexists(bookkeeping_path(run, UNITS_DIR)):
        names = [p.name for p in units.iterdir()]
        if all(n.endswith(_UNIT_FILES) or ".claim.takeover-" in n for n in names):
            bookkeeping_dir(run)
            os.rename(units, bookkeeping_path(run, UNITS_DIR))
    workers = run / WORKERS_DIR
    if _mode(workers, stat.S_ISDIR):
        for p in workers.iterdir():
            if p.name.endswith(".lock") and _mode(p, stat.S_ISREG):
                p.unlink(missing_ok=True)
        try:
            workers.rmdir()
        except OSError:
            pass  # something else is in it: left alone
    return found


def _mode(path: Path, test) -> bool:
    """``test(lstat(path).st_mode)``; False when nothing is there."""
    try:
        return bool(test(os.lstat(path).st_mode))
    except OSError:
        return False


def _free_old_lock(old_lock: Path, run: Path) -> None:
    """Remove layout 1's RUN_DIR/run.lock, refusing while a process still holds it.

    Raises:
        RunIdentityError: it is locked (one line).
    """
    if not _mode(old_lock, stat.S_ISREG):
        return
    if fcntl is not None:
        try:
            fd = os.open(old_lock, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        except OSError:
            fd = -1
        if fd >= 0:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise RunIdentityError(
                    "in use by an older dukb (it holds RUN_DIR/run.lock); wait for it to finish, then resume", run
                ) from None
            finally:
                os.close(fd)
    old_lock.unlink(missing_ok=True)


__all__ = ["RUN_LAYOUT", "migrate", "run_layout"]
