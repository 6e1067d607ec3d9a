"""Output helpers shared by the commands: JSON, CSV and rich tables, to stdout or a file."""

from __future__ import annotations

import csv
import io
import json
import re
import sys
from pathlib import Path

from dukb import InputError


def emit(text: str, output: Path | None) -> None:
    """Write ``text`` to ``output`` (creating parent folders) or to stdout."""
    if output is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    except OSError as e:
        raise InputError(f"cannot write output: {e.strerror}", output) from None


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
