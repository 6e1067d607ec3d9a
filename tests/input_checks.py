"""Helpers for the bad-input tests (kb/test_strict_readers.py, kb/test_input_fuzzing.py): run ``dukb`` in-process and check
the error contract of issue 11.

The contract: bad input ends in exit code 2 and ONE line ``dukb: error: FILE[:LINE]: problem`` on stderr, no
traceback; ``dukb validate`` prints one such line per problem, and after several problems a count line
(``dukb: error: N problems in DIR``). Exit code 1 (an uncaught exception) never happens.
"""

from __future__ import annotations

import re
from pathlib import Path

from dukb.cli.main import main

#: ``FILE:LINE: `` at the start of a message (FILE may hold colons; LINE is the last ``:<digits>:`` before a space).
WHERE = re.compile(r"^(?P<path>.+?):(?P<line>\d+): ")


def run_main(capsys, *args) -> tuple[int, str, str]:
    """Run ``dukb ARGS`` in-process through :func:`dukb.cli.main.main`; return (exit code, stdout, stderr).

    An exception escaping ``main`` (which the console script would print as a traceback, exit 1) propagates and
    fails the calling test.
    """
    capsys.readouterr()
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def error_lines(rc: int, err: str, validate: bool = False) -> list[str]:
    """Check the error contract and return stderr's lines.

    Asserts exit code 2, no traceback, every line starting ``dukb: error: ``; and exactly one line, or, for
    ``validate`` with several problems, one line per problem and a last line counting them.
    """
    assert rc == 2, (rc, err)
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert lines and all(ln.startswith("dukb: error: ") for ln in lines), err
    if validate and len(lines) > 1:
        m = re.fullmatch(r"dukb: error: (\d+) problems in .+", lines[-1])
        assert m and int(m[1]) == len(lines) - 1 > 1, err
    else:
        assert len(lines) == 1, err
    return lines


def assert_one_line_error(rc: int, err: str, *fragments: str) -> str:
    """:func:`error_lines` for a single error line that contains every fragment; returns the line."""
    (line,) = error_lines(rc, err)
    for f in fragments:
        assert f in line, (f, line)
    return line


def where(message: str) -> tuple[str, int] | None:
    """(file, line) named at the start of a problem message (``dukb: error: `` removed), or None."""
    m = WHERE.match(message.removeprefix("dukb: error: "))
    return (m["path"], int(m["line"])) if m else None


def physical_lines(path: Path) -> int:
    """Number of lines of a file, counting CRLF, LF and CR each as one line end (the last line may lack one)."""
    data = path.read_bytes()
    return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").count(b"\n") + 1
