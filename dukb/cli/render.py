"""Output helpers shared by the commands: JSON, CSV and rich tables, to stdout or a file."""

from __future__ import annotations

import csv
import io
import json
import re
import sys
from pathlib import Path

from dukb import InputError
from dukb.neural.run.files import RunDir


def emit(text: str, output: Path | None) -> None:
    """Write ``text`` to ``output`` (creating parent folders; all or nothing, :func:`dukb.kb.io.atomic_output`) or
    to stdout.

    Raises:
        InputError: the file cannot be written (a failed write leaves no partial file).
    """
    if output is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    from dukb.kb.io import atomic_output

    with atomic_output(output) as fh:
        fh.write(text if text.endswith("\n") else text + "\n")


def output_path(value: str | Path) -> Path:
    """Typer parser of an ``-o/--output`` value: the path as given; an empty value (``-o ''``, which would
    otherwise become the working directory) is a usage error (one line, exit 2).

    Raises:
        typer.BadParameter: the value is empty or only spaces.
    """
    if isinstance(value, Path):  # a default, already a path
        return value
    if not value.strip():
        import typer

        raise typer.BadParameter("an empty path; give a file or folder name")
    return Path(value)


_FLAT_LIST = re.compile(r"\[\s+([-0-9.,\s]+?)\s+\]")


def to_json(obj) -> str:
    """Pretty JSON with stable key order as given; lists of numbers stay on one line."""
    text = json.dumps(obj, indent=2, ensure_ascii=False)
    return _FLAT_LIST.sub(lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]", text)


def to_csv(rows: list[dict], columns: list[str]) -> str:
    """CSV text with a header row."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def to_table(rows: list[dict], columns: list[str], title: str | None = None) -> str:
    """A rich table rendered to plain text (no colour codes when written to a file or pipe)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for c in columns:
        table.add_column(c)
    for r in rows:
        table.add_row(*("" if r.get(c) is None else str(r.get(c)) for c in columns))
    console = Console(file=io.StringIO(), width=160, force_terminal=False, color_system=None)
    console.print(table)
    return console.file.getvalue()


def print_tables(tables, width: int | None = None) -> None:
    """Draw reference tables (:class:`dukb.neural.tables.Table`) on stdout for a terminal, wrapped to its width
    (``width`` characters when given; rich reads ``$COLUMNS`` and takes 80 when stdout is not a terminal).

    A table whose columns fit the width (each at most 30 characters wide) is drawn as a rich table whose long cells
    wrap inside their column; a wider one as one block per entry (its name, then one ``column  value`` line per
    cell, the value wrapped), so that no cell is cut on a narrow terminal. Code spans lose their backticks and
    nothing is read as rich markup.

    Args:
        tables: iterable of :class:`dukb.neural.tables.Table`.
        width: the width in characters (None: the terminal's).
    """
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(width=width, highlight=False, emoji=False)

    def plain(text) -> Text:
        return Text(str(text).replace("`", ""))

    for t in tables:
        console.print(Text(t.title, style="bold underline"))
        if t.intro:
            console.print(plain(t.intro))
        wanted = sum(min(30, max([len(c)] + [len(str(r[i])) for r in t.rows])) + 3 for i, c in enumerate(t.columns))
        if wanted <= console.width:
            table = Table(box=box.SIMPLE_HEAD, show_lines=False)
            for i, c in enumerate(t.columns):
                table.add_column(c, overflow="fold", style="cyan" if i in t.code else None)
            for r in t.rows:
                table.add_row(*(plain(c) for c in r))
            console.print(table)
            continue
        console.print()
        label = max(len(c) for c in t.columns[1:]) + 2
        for r in t.rows:
            entry = Table.grid(padding=(0, 1))
            entry.add_column(width=label, style="dim", no_wrap=True, overflow="ellipsis")
            entry.add_column(overflow="fold")
            for c, v in zip(t.columns[1:], r[1:]):
                if str(v):
                    entry.add_row(plain(c), plain(v))
            console.print(Text(str(r[0]), style="bold cyan"))
            console.print(entry)
        console.print()


# ------------------------------------------------------------------------------ progress and interrupts --------
def progress_to_stderr() -> None:
    """Put rich's global console on stderr. Every dukb progress bar (``rich.progress.Progress()`` in the protocol
    functions) draws on that console, so bars go to stderr beside the log lines and leave stdout to results."""
    import rich

    rich.reconfigure(stderr=True)


def log_line(message: str) -> None:
    """Print one log line (e.g. a per-target result) on stderr through the console the progress bars draw on, so
    that it appears above a live bar instead of being glued onto it; plain text (no markup, highlighting, emoji or
    wrapping)."""
    from rich import get_console

    get_console().print(str(message), markup=False, highlight=False, emoji=False, soft_wrap=True)


#: What the running command keeps when Ctrl-C stops it: a function returning the text after "dukb: interrupted; ".
_interrupt_note = None


def on_interrupt(note) -> None:
    """Set (or clear, with None) the function that says what an interrupted command kept; `dukb` prints
    ``dukb: interrupted; NOTE`` and exits with 130 (:func:`dukb.cli.main.main`)."""
    global _interrupt_note
    _interrupt_note = note


def interrupt_message() -> str:
    """``dukb: interrupted`` with the running command's note (a failing note is left out)."""
    try:
        note = _interrupt_note() if _interrupt_note is not None else None
    except Exception:  # noqa: BLE001 - the note must never hide the interrupt
        note = None
    return "dukb: interrupted" + (f"; {note}" if note else "")


def count_rows(path: Path) -> int:
    """Complete JSON lines of a results file (0 when it is missing, unreadable, not a regular file or larger than
    :data:`dukb.neural.run.journal.RESULTS_BYTES`; a torn last line is not counted). Read bounded
    (:func:`dukb.kb.csvfile.read_bytes`): a FIFO in its place cannot block the interrupt that asks."""
    from dukb.kb.csvfile import read_bytes
    from dukb.neural.run.journal import RESULTS_BYTES

    try:
        data = read_bytes(path, "results journal", limit=RESULTS_BYTES)
    except (InputError, OSError):
        return 0
    n = 0
    for raw in data.splitlines(keepends=True):
        if not raw.endswith(b"\n") or not raw.strip():
            continue
        try:
            json.loads(raw)
        except (ValueError, RecursionError):
            continue
        n += 1
    return n


def keep_rows_note(run_dir: Path, advice: str = "run the same command with --resume to continue"):
    """An :func:`on_interrupt` note for a command writing RUN_DIR/results.jsonl (and, under a multi-process launch,
    results.rank*.jsonl): ``N rows are kept in RUN_DIR/results.jsonl; ADVICE``, or, when no results file exists yet
    (the run directory may not even have been created), ``nothing was written to RUN_DIR yet``."""

    def note() -> str:
        import os

        run = Path(run_dir)
        results = RunDir(run).results
        shards = RunDir(run).shards() if run.is_dir() else []
        if not os.path.lexists(results) and not shards:
            return f"no result row was written to {run} yet"
        n = count_rows(results) + sum(count_rows(p) for p in shards)
        return f"{n} row{'' if n == 1 else 's'} {'is' if n == 1 else 'are'} kept in {results}; {advice}"

    return note
