"""The results journal of a run (results.jsonl): one JSON line per row, flushed and fsynced.

Reading keeps every valid row: each damaged line is reported as FILE:LINE on stderr, and on resume moved to
results.damaged.jsonl with its line number; a torn last line (a kill mid-write) is dropped with a note. A line that is
JSON but not a row of its protocol (the protocol's row check, given as an argument) or not a row its run can have
written (the protocol's plan check) is damaged too. This module knows no protocol: the row key and the checks are
arguments.

Source: dukb (the run directory of every protocol).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dukb import InputError
from dukb.kb.csvfile import open_regular, read_bytes
from dukb.neural.run.files import (
    _NOFOLLOW,
    DAMAGED_NAME,
    RunDir,
    _open_regular_fd,
    _stderr,
    json_problem,
    open_append,
    refuse_links,
    write_bytes_atomic,
)
from dukb.neural.run.rows import RowProblem, RowSchema
from dukb.solver.metrics import json_safe

try:  # POSIX; elsewhere a run directory is not locked
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None

# ----------------------------------------------------------------------------------------------- results --------


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
        the run's other files: a row that judges another number of facts than the run's probes hold).

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


def _row_problem(
    raw: bytes, key: Callable[[dict], object] | None, check: Callable[[dict], str | None] | None = None
) -> tuple[dict | None, str]:
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


def is_bookkeeping(field: str) -> bool:
    """Whether a row's field says how and where the row was computed, not what: the worker and the timings
    (``seconds`` and every ``seconds_<stage>``, whichever stages a protocol times). Two rows of one key that differ
    only in such fields are one result written twice (a unit recomputed after a kill). Source: dukb."""
    return field == "worker" or field == "seconds" or field.startswith("seconds_")


def _repeat_problem(first: dict, k, row: dict, line: int) -> str:
    """ "" for the first row of key ``k`` (recorded in ``first``), else why a later one is a damaged line: the same
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
    values = {f: v for f, v in row.items() if not is_bookkeeping(f)}
    earlier = {f: v for f, v in earlier.items() if not is_bookkeeping(f)}
    if earlier == values:
        return f"a repeat of line {was} (the same row; kept once)"
    diff = sorted(f for f in set(values) | set(earlier) if values.get(f, ...) != earlier.get(f, ...))
    shown = ", ".join(diff[:3]) + (", ..." if len(diff) > 3 else "")
    return f"another row for the key of line {was} (one row per key; differs in {shown})"


def read_journal(
    path: str | Path, key: Callable[[dict], object] | None = None, check: Callable[[dict], str | None] | None = None
) -> Journal:
    """Read a results journal, keeping every valid row and listing each line that holds none.

    Blank lines are skipped. A line is damaged when it is not UTF-8, not JSON (an integer of more than 4300 digits
    and an object giving a key twice included), not a JSON object, not a row of its protocol (``check``: a field a
    report reads is missing, of another type, not a finite number or out of its range), or (given ``key``) a row the
    key cannot be computed for, or a later row of a key an earlier line has (one row per key: another result, or the
    same one again, kept once; :func:`is_bookkeeping` fields aside). The last line
    is *torn* instead when it is damaged and the file does not end with a line break (a kill mid-write).

    Args:
        path: the JSONL file (missing: an empty journal).
        key: the journal's row key (a protocol's :attr:`~dukb.neural.run.rows.RowSchema.key`); None checks only
            that a row is an object.
        check: callable(row) -> the problem of a row, or None for a valid row
            (:meth:`dukb.neural.run.rows.RowSchema.check`); None: no check.

    Returns:
        The :class:`Journal`.

    Raises:
        InputError: the file exists but cannot be read, is not a regular file (a FIFO, a device, a folder) or is
            larger than :data:`RESULTS_BYTES` (named).
    """

    path = Path(path)
    out = Journal(path)
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


def read_results(
    path,
    key: Callable[[dict], object] | None = None,
    *,
    log: Callable[[str], None] | None = None,
    check: RowProblem | None = None,
) -> list[dict]:
    """Every valid row of a results.jsonl; each damaged line is reported on one line (``FILE:LINE``) and skipped,
    a torn last line (from a kill) is dropped with a note (see :func:`read_journal`). The file is not changed.

    Args:
        path: the JSONL file.
        key: the journal's row key (rows it cannot key count as damaged); None: any JSON object is a row.
        log: callable(str) for the warnings (default: stderr).
        check: callable(row) -> the problem of a row or None (rows it finds fault with are damaged); None: none.

    Returns:
        The rows, in file order.

    Raises:
        InputError: the file cannot be read.
        FileNotFoundError: the file does not exist.
    """
    if not Path(path).exists():
        raise FileNotFoundError(f"{path}: no such file")
    journal = read_journal(path, key, check)
    journal.warn(log)
    return journal.rows


def report_journal(
    path: str | Path, schema: RowSchema, *, drop: RowProblem | None = None, config: dict | None = None
) -> Journal:
    """A run's results journal as a report reads it: every row the protocol's report can render (its row model)
    and its run can have written (its plan check against ``config``; one row per key), each damaged line warned on
    stderr (``FILE:LINE``, with the reason).

    Args:
        path: results.jsonl (missing: an empty journal).
        schema: the protocol's rows (:class:`dukb.neural.run.rows.RowSchema`: key, row model, plan check).
        config: the run's config.json: rows are checked against its plan (None: not checked).
        drop: callable(row) -> a problem, or None: rows it finds fault with are damaged lines too (a check against
            the run's other files, applied after the row model and the plan).

    Returns:
        The :class:`Journal` (its damaged lines go into report.md through :func:`journal_note`).

    Raises:
        InputError: the file cannot be read (not a regular file, too large), or it holds lines but every one is
            damaged: one line naming the first (``FILE:LINE``) and its reason, nothing else printed.
    """
    check = schema.check(config)  # a row's own problem is named before a repeat of its key
    if drop is not None:
        check = _both(check, drop)
    journal = read_journal(path, schema.key, check=check)
    if not journal.rows and journal.damaged:
        first = journal.damaged[0]
        n = len(journal.damaged)
        raise InputError(
            f"no result row to render: {'the only line' if n == 1 else f'all {n} lines'} "
            f"damaged ({first.reason}{'' if n == 1 else ', and more'})",
            journal.path,
            first.line,
        )
    journal.warn()
    return journal


def _both(first: Callable[[dict], str | None], then: Callable[[dict], str | None]) -> Callable[[dict], str | None]:
    """A row check: ``first``'s problem, else ``then``'s (which may rely on what ``first`` checked)."""
    return lambda row: first(row) or then(row)


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
        out.append(
            f"**Damaged journal lines.** {len(journal.damaged)} line(s) of {journal.path.name} hold no row "
            f"(line{'s' if len(journal.damaged) > 1 else ''} {lines}); they are left out of this report. "
            f"A `--resume` moves them to {DAMAGED_NAME} and recomputes their rows."
        )
        out.append(
            "\n".join(f"- line {d.line}: {d.reason}" for d in journal.damaged[:20])
            + (f"\n- ... and {len(journal.damaged) - 20} more" if len(journal.damaged) > 20 else "")
        )
    aside = RunDir(journal.path.parent).damaged
    if os.path.lexists(aside):  # read bounded: a regular file only
        n = sum(1 for ln in read_bytes(aside, "damaged-lines file", limit=RESULTS_BYTES).splitlines() if ln.strip())
        out.append(f"{n} damaged line(s) were moved from the journal to {DAMAGED_NAME} by a resume.")
    if journal.torn is not None:
        out.append(
            f"The last line of {journal.path.name} (line {journal.torn.line}) was cut short by a kill and is left out."
        )
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
        aside = RunDir(journal.path.parent).damaged
        moved = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        with open_append(aside) as fh:
            for d in journal.damaged:
                fh.write(
                    json.dumps(
                        {"file": journal.path.name, "line": d.line, "reason": d.reason, "text": d.text, "moved": moved}
                    )
                    + "\n"
                )
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


class ResultsFile:
    """Append-only JSONL of result rows with resume support.

    Each row is written as one line, flushed and fsynced. On open, the file this process owns is made a clean
    journal: every valid row is kept, each damaged line is moved to RUN_DIR/results.damaged.jsonl with its line
    number and reported (``FILE:LINE``), a torn last line is dropped with a note (:func:`move_aside`).
    :meth:`absorb` adds the rows of other files (the shard files of a multi-process run, see
    :mod:`dukb.neural.distributed`) as done; those files are read, never changed.

    Args:
        path: the file this process appends to.
        key: function row -> hashable key identifying a row (a protocol's
            :attr:`~dukb.neural.run.rows.RowSchema.key`).
        log: callable(str) for the reports of damaged and torn lines (default: stderr).
        repair: move damaged lines aside on open (the run's owner; a worker that joined a live run does not).
        check: callable(row) -> the problem of a row or None (:meth:`dukb.neural.run.rows.RowSchema.check`, with
            the run's config for a resume: a row the run cannot have written is a damaged line); None: no check.

    Raises:
        InputError: the file cannot be read. OSError: it cannot be repaired.
    """

    def __init__(
        self,
        path: Path,
        key: Callable[[dict], tuple],
        log: Callable[[str], None] | None = None,
        repair: bool = True,
        check: RowProblem | None = None,
    ):
        self.path = refuse_links(path)  # the journal is appended to: never through a link
        self.key = key
        self.log = log
        self.check = check
        try:  # where :meth:`refresh` reads on (taken before reading: a row appended meanwhile is read twice, kept once)
            self._offset = os.stat(self.path).st_size
        except OSError:
            self._offset = 0
        journal = read_journal(self.path, key, check)
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
                for row in read_results(other, self.key, log=self.log, check=self.check):
                    if self.key(row) not in self.done:
                        self.rows.append(row)
                        self.done.add(self.key(row))

    def append(self, row: dict) -> None:
        """Write one row durably, as one line even when several processes append (an ``flock`` around the write); a
        float NaN (a metric with nothing to score) is written as JSON null (:func:`dukb.solver.metrics.json_safe`)."""

        with open_append(self.path) as fh:
            if fcntl is not None:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX)  # released when the file closes
            size = os.fstat(fh.fileno()).st_size
            if size:  # a line a killed writer left unfinished stays one damaged line, never joined to this row
                rd = _open_regular_fd(
                    self.path, os.O_RDONLY | _NOFOLLOW, 0o666, "not a regular file ({})", "cannot read: {}"
                )
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


__all__ = [
    "DAMAGED_NAME",
    "DamagedLine",
    "Journal",
    "RESULTS_BYTES",
    "ResultsFile",
    "is_bookkeeping",
    "journal_note",
    "move_aside",
    "read_journal",
    "read_results",
    "report_journal",
]
