"""Strict reading of the text and CSV files a user gives dukb: one reader for every CSV file dukb reads.

Format (RFC 4180, with the header row it allows): UTF-8 text (one leading byte order mark is dropped), records
separated by CRLF, LF or CR, fields separated by commas, a field that holds a comma, quote or line break enclosed in
double quotes with inner quotes doubled. The first record is the header and names the columns.

Strict means nothing is guessed and nothing is dropped:

- the file must be readable (:func:`read_bytes`: ``FILE: cannot read: <strerror>``), UTF-8 and free of NUL bytes;
- a quote that is never closed, or text after a closing quote, is a syntax error reported at the line where the
  record starts (Python's :mod:`csv` with ``strict=True`` finds it; its non-strict mode would silently merge the
  following rows into one field);
- a quote inside a field that does not start with a quote (``ab"c``, a "bare quote") is an error, as RFC 4180
  allows quotes only in quoted fields (Python's :mod:`csv` keeps it as a literal character);
- a field longer than :data:`MAX_FIELD_CHARS` characters is an error;
- the header may not repeat a column or have an empty column name, must hold the required columns and, where the
  caller lists the optional ones, no other column;
- every record must have exactly as many fields as the header;
- no cell may hold a control character (:func:`control_char`: C0/C1 controls including TAB, CR, LF and NUL, the
  line and paragraph separators U+2028/U+2029, and a stray byte order mark U+FEFF). A line break inside a quoted
  field is therefore refused too: KB and retained files never need one, and it is how a lost quote shows (files of
  free text, such as probe questions, pass ``multiline=True``).

Only records with no text at all (an empty line, or fields of nothing but spaces) are skipped.

Errors are :class:`dukb.InputError` naming the file and the 1-based line (the header is line 1; a record that spans
several lines is reported at its first line). :func:`read_csv` can also collect the per-record problems (wrong
field count, control character, over-long field) in a list and go on, which is how ``dukb validate`` lists every
problem of a KB.
"""

from __future__ import annotations

import codecs
import csv
import io
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import IO, Any, cast

from dukb import InputError, one_line

#: Longest field accepted, in characters: the default of :func:`csv.field_size_limit`, enforced here whatever the
#: process-wide setting is.
MAX_FIELD_CHARS = 131072

#: Largest user file dukb reads whole (KB CSVs, targets and retained files, rule files, JSON records), in bytes:
#: 256 MiB, far above EDU-RELAT's largest file (under 1 MiB) and below what would exhaust memory. Readers with a
#: tighter bound pass their own ``limit``.
MAX_INPUT_BYTES = 256 * 1024 * 1024

#: Most digits of an integer in a user's file (fact_id, birthyear, generation, target and retained ids): every
#: accepted integer fits a signed 64-bit integer, and no huge number is converted (Python refuses to convert more
#: than 4,300 digits, and converting fewer is quadratic).
MAX_INT_DIGITS = 18

#: Unicode categories refused in a cell: controls (Cc), line/paragraph separators (Zl, Zp), surrogates (Cs).
CONTROL_CATEGORIES = frozenset({"Cc", "Zl", "Zp", "Cs"})


@dataclass(frozen=True)
class Problem:
    """One problem of an input file: file, 1-based line (None if not tied to a line) and message.

    ``str(problem)`` is ``FILE[:LINE]: message`` on one line (control characters escaped by
    :func:`dukb.one_line`).

    Example:
        >>> str(Problem("people.csv", 4, "gender 'x' is not male or female"))
        "people.csv:4: gender 'x' is not male or female"
        >>> str(Problem("kb", None, "missing people.csv"))
        'kb: missing people.csv'
    """

    path: str
    line: int | None
    message: str

    def __str__(self) -> str:
        return one_line(f"{self.path}{'' if self.line is None else ':' + str(self.line)}: {self.message}")


@dataclass(frozen=True)
class CsvTable:
    """A CSV file read by :func:`read_csv`.

    Attributes:
        path: the file.
        header: the column names, stripped of surrounding spaces, in file order.
        rows: one ``(line, {column: value})`` per data record, in file order; ``line`` is the 1-based line where the
            record starts. Values are stripped of surrounding spaces unless ``strip=False`` was given. With
            ``fields_only=True`` each row holds the list of values in header order instead of a dict.

    Example:
        >>> t = parse_csv("name, gender\\r\\nAnn Lee ,female\\r\\n", "people.csv", ("name", "gender"))
        >>> t.header, t.rows
        (('name', 'gender'), [(2, {'name': 'Ann Lee', 'gender': 'female'})])
    """

    path: Path
    header: tuple[str, ...]
    rows: list[tuple[int, Any]]  # (line, dict[str, str]), or (line, list[str]) with fields_only


#: The message for a bare quote (RFC 4180 allows a quote only inside a quoted field, doubled).
BARE_QUOTE = (
    'bare quote (") inside a field that is not quoted: enclose the field in double quotes and double the quote ("")'
)

#: The characters of :data:`CONTROL_CATEGORIES` (the categories are fixed sets: Cc is U+0000-001F and U+007F-009F,
#: Zl is U+2028, Zp U+2029, Cs U+D800-DFFF) and U+FEFF, as a regular expression (a per-character loop is 20x slower).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufeff]")
#: :data:`_CONTROL` without CR and LF (the line breaks that end CSV records).
_CONTROL_NOT_EOL = re.compile("[\x00-\x09\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufeff]")


def control_char(text: str, allow: str = "") -> str | None:
    """The first control character of ``text`` (see :data:`CONTROL_CATEGORIES`, plus U+FEFF) not in ``allow``, or
    None.

    Example:
        >>> control_char("Ivo" + chr(7) + "Lund") == chr(7)
        True
        >>> print(control_char("Ivo Lund"))
        None
        >>> print(control_char("two" + chr(10) + "lines", allow=chr(10)))
        None
    """
    for m in _CONTROL.finditer(text):
        if m.group() not in allow:
            return m.group()
    return None


def control_problem(what: str, value: str, allow: str = "") -> str | None:
    """The message for a control character (other than those in ``allow``) in ``value`` (``what`` names it, e.g.
    "name"), or None if there is none.

    Example: ``name 'Ivo\\x07Lund' contains a control character (U+0007)``.

    Example:
        >>> print(control_problem("name", "Ivo" + chr(7) + "Lund"))
        name 'Ivo\\x07Lund' contains a control character (U+0007)
        >>> print(control_problem("name", "Ivo Lund"))
        None
    """
    c = control_char(value, allow)
    if c is None:
        return None
    return f"{what} {_clip(value)} contains a control character (U+{ord(c):04X})"


def _clip(value: str, limit: int = 60) -> str:
    """``repr(value)``, cut to about ``limit`` characters."""
    return repr(value) if len(value) <= limit else repr(value[:limit]) + f"... ({len(value)} characters)"


def _cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, with "..." when cut."""
    return text if len(text) <= limit else text[:limit] + "..."


def _line_of(text: str) -> int:
    """1-based line number after ``text`` (CRLF, LF and CR each end a line, as in :func:`read_csv`)."""
    return text.replace("\r\n", "\n").replace("\r", "\n").count("\n") + 1


def strict_int(value: str) -> int | None:
    """The integer ``value`` spells as ``-?[0-9]+`` in ASCII with at most :data:`MAX_INT_DIGITS` digits, else None.

    Python's ``int()`` also accepts ``19_21``, ``+10``, surrounding spaces and non-ASCII digits (``\uff11\uff10``),
    so a number could mean something other than what the file shows; this does not. Leading zeros are allowed
    (``007`` is 7).

    Args:
        value: the text (a cell, a line of a targets file).

    Returns:
        The integer, or None when ``value`` is not such a numeral.

    Example:
        >>> strict_int("1921"), strict_int("-7"), strict_int("007")
        (1921, -7, 7)
        >>> strict_int("19_21"), strict_int("+10"), strict_int(" 5"), strict_int("1" * 19)
        (None, None, None, None)
    """
    digits = value[1:] if value[:1] == "-" else value
    if 0 < len(digits) <= MAX_INT_DIGITS and digits.isascii() and digits.isdigit():  # ASCII isdigit: 0-9 only
        return int(value)
    return None


def int_problem(what: str, value: str, of: str | None = None) -> str | None:
    """The message for ``value`` (``what`` names it, e.g. "fact_id"; ``of`` whose it is, e.g. a person's name) when
    it is not an integer as :func:`strict_int` reads them, or None when it is one.

    Example: ``birthyear '19_21' of 'Anna Berg' is not an integer (only the digits 0-9 and a leading '-')``.

    Example:
        >>> int_problem("birthyear", "19_21", of="Anna Berg")
        "birthyear '19_21' of 'Anna Berg' is not an integer (only the digits 0-9 and a leading '-')"
        >>> int_problem("fact_id", "1" * 20)
        "fact_id '11111111111111111111' has 20 digits, more than the 18 allowed"
        >>> print(int_problem("fact_id", "12"))
        None
    """
    if strict_int(value) is not None:
        return None
    subject = f"{what} {_clip(value)}" + ("" if of is None else f" of {of!r}")
    digits = value[1:] if value[:1] == "-" else value
    if len(digits) > MAX_INT_DIGITS and digits.isascii() and digits.isdigit():
        return f"{subject} has {len(digits):,} digits, more than the {MAX_INT_DIGITS} allowed"
    return f"{subject} is not an integer (only the digits 0-9 and a leading '-')"


def parse_int(value: str, what: str, path: str | Path | None = None, line: int | None = None) -> int:
    """Read an integer of a user's file strictly (:func:`strict_int`: ``-?[0-9]+`` in ASCII, at most
    :data:`MAX_INT_DIGITS` digits).

    Args:
        value: the text.
        what: what it is, for the message (e.g. "fact_id").
        path: the file, for the message.
        line: the 1-based line, for the message.

    Returns:
        The integer.

    Raises:
        InputError: ``<what> '<value>' is not an integer (...)`` or ``... has N digits, more than the 18 allowed``,
            naming ``path`` and ``line``.

    Example:
        >>> parse_int("42", "fact_id")
        42
        >>> parse_int("4 2", "fact_id", "targets.txt", 3)
        Traceback (most recent call last):
            ...
        dukb.InputError: targets.txt:3: fact_id '4 2' is not an integer (only the digits 0-9 and a leading '-')
    """
    n = strict_int(value)
    if n is None:
        raise InputError(cast(str, int_problem(what, value)), path, line)  # a message: value is no integer
    return n


def open_regular(path: str | Path, what: str = "file", limit: int | None = None) -> IO[bytes]:
    """Open a user's file for binary reading, refusing anything that is not a regular file of at most ``limit``
    bytes, before a byte is read.

    A FIFO, a character or block device (``/dev/zero``, ``/dev/urandom``), a socket or a directory is refused, also
    behind a symbolic link: a read from one of them could block for ever or never end. The file is opened with
    ``O_NONBLOCK`` (so that a FIFO put in place after the check cannot block the open) and checked again on the open
    descriptor, so a swap between the check and the open is caught too.

    Args:
        path: the file.
        what: what the file is, for the message when it is missing (``missing <what>``).
        limit: largest size accepted, in bytes (None: :data:`MAX_INPUT_BYTES`).

    Returns:
        An open binary file object (the caller closes it).

    Raises:
        InputError: ``missing <what>``; ``not a regular file (a FIFO|a character device|...)``; ``too large: N bytes
            (the limit is L bytes)``; ``cannot read: <strerror>`` for any other OS error. The path is named.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     f = Path(tmp) / "a.txt"
        ...     _ = f.write_bytes(b"abc")
        ...     with open_regular(f) as fh:
        ...         print(fh.read())
        ...     for bad in (Path(tmp), f.with_name("none.txt"), f):
        ...         try:
        ...             open_regular(bad, "KB file", limit=2)
        ...         except InputError as e:
        ...             print(e.message)
        b'abc'
        not a regular file (a directory)
        missing KB file
        too large: 3 bytes (the limit for a KB file is 2 bytes)
    """
    limit = MAX_INPUT_BYTES if limit is None else limit
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError(f"missing {what}", path) from None
    except OSError as e:
        if stat.S_ISDIR(_mode(path)):
            raise InputError("not a regular file (a directory)", path) from None
        raise InputError(f"cannot read: {e.strerror or e}", path) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"not a regular file ({file_kind(st.st_mode)})", path)
        if st.st_size > limit:
            raise InputError(f"too large: {st.st_size:,} bytes (the limit for a {what} is {limit:,} bytes)", path)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        fh = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    return fh


def _mode(path: str | Path) -> int:
    try:
        return os.stat(path).st_mode
    except OSError:
        return 0


def file_kind(mode: int) -> str:
    """What a file that is not a regular file is, in words ("a FIFO", "a symbolic link", ...), from its
    ``st_mode`` (int, from ``os.stat``/``os.lstat``).

    Example:
        >>> file_kind(stat.S_IFIFO), file_kind(stat.S_IFDIR), file_kind(stat.S_IFLNK)
        ('a FIFO', 'a directory', 'a symbolic link')
    """
    for test, name in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a plain file"


def read_bytes(path: str | Path, what: str = "file", limit: int | None = None) -> bytes:
    """The bytes of a user's file, bounded: only a regular file of at most ``limit`` bytes is read
    (:func:`open_regular`). A file that grows past the limit while it is read is refused too.

    Args:
        path: the file.
        what: what the file is, for the message when it is missing (``missing <what>``).
        limit: largest size accepted, in bytes (None: :data:`MAX_INPUT_BYTES`).

    Raises:
        InputError: ``missing <what>`` when it does not exist; not a regular file (FIFO, device, socket,
            directory); larger than ``limit``; ``cannot read: <strerror>`` for any other OS error. The path is named.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     f = Path(tmp) / "a.bin"
        ...     _ = f.write_bytes(b"12345")
        ...     print(read_bytes(f))
        ...     try:
        ...         read_bytes(f, "rule file", limit=4)
        ...     except InputError as e:
        ...         print(e.message)
        b'12345'
        too large: 5 bytes (the limit for a rule file is 4 bytes)
    """
    limit = MAX_INPUT_BYTES if limit is None else limit
    with open_regular(path, what, limit) as fh:
        try:
            data = fh.read(limit + 1)
        except OSError as e:
            raise InputError(f"cannot read: {e.strerror or e}", path) from None
    if len(data) > limit:
        raise InputError(f"too large: more than {limit:,} bytes (the limit for a {what} is {limit:,} bytes)", path)
    return data


def decode_text(data: bytes, path: str | Path) -> str:
    """Decode a user's file as UTF-8 text, dropping one leading byte order mark.

    Raises:
        InputError: the bytes are not UTF-8, or hold a NUL byte (file and line named).

    Example:
        >>> decode_text(codecs.BOM_UTF8 + "Zoë".encode(), "a.txt")
        'Zoë'
        >>> decode_text(b"ok" + bytes([10]) + b"caf" + bytes([0xe9]), "a.txt")
        Traceback (most recent call last):
            ...
        dukb.InputError: a.txt:2: not UTF-8 text: byte 0xe9 at offset 6 (unexpected end of data)
    """
    skip = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        text = data[skip:].decode("utf-8")
    except UnicodeDecodeError as e:
        at = skip + e.start  # offset in the file
        line = _line_of(data[skip:at].decode("utf-8"))
        hint = (
            " (the file looks like UTF-16; save it as UTF-8)"
            if data[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
            else ""
        )
        raise InputError(
            f"not UTF-8 text: byte 0x{data[at]:02x} at offset {at} ({e.reason}){hint}", path, line
        ) from None
    nul = text.find("\x00")
    if nul >= 0:
        raise InputError("NUL byte in the file (binary data?)", path, _line_of(text[:nul]))
    return text


def read_text(path: str | Path, what: str = "file") -> str:
    """Read a user's text file strictly: :func:`read_bytes`, then :func:`decode_text`.

    Args:
        path: the file.
        what: what the file is, for the message when it is missing (``missing <what>``).

    Raises:
        InputError: missing or unreadable file, not UTF-8, NUL byte (file and, where it applies, line named).

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     f = Path(tmp) / "rules.lp"
        ...     _ = f.write_bytes("caf\\u00e9".encode("utf-16"))
        ...     read_text(f)
        Traceback (most recent call last):
            ...
        dukb.InputError: ...rules.lp:1: not UTF-8 text: byte 0xff at offset 0 (invalid start byte) (the file looks
        like UTF-16; save it as UTF-8)
    """
    return decode_text(read_bytes(path, what), path)


def read_package_text(*parts: str) -> tuple[str, str]:
    """Read a text file shipped in the ``dukb.data`` package (templates, name lists), bounded as a user's file when
    it lies on the file system (:func:`read_text`: an installed package can be edited or replaced).

    Args:
        parts: the path inside ``dukb.data``, e.g. ``("templates", "probes.json")``.

    Returns:
        (text, the file's name for messages).

    Raises:
        InputError: missing or unreadable file, not a regular file, too large, not UTF-8 (file named).

    Example:
        >>> text, where = read_package_text("templates", "probes.json")
        >>> text.lstrip().startswith("{"), where.endswith("probes.json")
        (True, True)
    """

    res = resources.files("dukb.data").joinpath(*parts)
    if isinstance(res, Path):
        return read_text(res, "package data file"), str(res)
    try:  # a package inside a zip archive: its reader is bounded by the archive
        return res.read_text(encoding="utf-8"), str(res)
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read package data: {e}", str(res)) from None


def read_csv(
    path: str | Path,
    required: tuple[str, ...] = (),
    *,
    optional: tuple[str, ...] | None = None,
    strip: bool = True,
    multiline: bool = False,
    problems: list[Problem] | None = None,
    fields_only: bool = False,
) -> CsvTable:
    """Read a CSV file with a header row strictly (see the module docstring; RFC 4180).

    Args:
        path: the file.
        required: columns the header must hold, in any order.
        optional: the other columns the header may hold; None allows any. A misspelt optional column would
            otherwise lose its data silently.
        strip: strip surrounding spaces from the values (column names are always stripped).
        multiline: allow line breaks (LF, CR) inside quoted values, for files of free text such as probe questions;
            every other control character is still refused.
        problems: where to collect per-record problems (wrong number of fields, control character, over-long
            field); such records are left out of the table. When None, the first one is raised.
        fields_only: rows hold the list of values in header order instead of a dict (less memory on large files).

    Returns:
        The :class:`CsvTable`.

    Raises:
        InputError: (file and line named) missing or unreadable file, not UTF-8, NUL byte, empty file, a header
            that is blank, misses a required column, has a column not in ``optional``, repeats a column or has an
            empty or control-character column name, a CSV syntax error (unterminated quote, text after a closing
            quote), a field over :data:`MAX_FIELD_CHARS` characters, and, when ``problems`` is None, the first
            per-record problem.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     f = Path(tmp) / "people.csv"
        ...     _ = f.write_text('name,gender\\n"Lee, Ann",female\\n\\nBo,male,extra\\n')
        ...     problems = []
        ...     t = read_csv(f, ("name", "gender"), problems=problems)
        ...     print(t.rows)
        ...     print(problems[0].line, problems[0].message)
        [(2, {'name': 'Lee, Ann', 'gender': 'female'})]
        4 expected 2 fields, found 3
    """
    return parse_csv(
        read_text(path),
        path,
        required,
        optional=optional,
        strip=strip,
        multiline=multiline,
        problems=problems,
        fields_only=fields_only,
    )


def parse_csv(
    text: str,
    path: str | Path,
    required: tuple[str, ...] = (),
    *,
    optional: tuple[str, ...] | None = None,
    strip: bool = True,
    multiline: bool = False,
    problems: list[Problem] | None = None,
    fields_only: bool = False,
) -> CsvTable:
    """:func:`read_csv` on text already read (e.g. by :func:`read_text`); ``path`` is only used in messages.

    Example:
        >>> parse_csv("fact_id,subject\\n0,Ann\\n", "rel.csv", ("fact_id",), fields_only=True).rows
        [(2, ['0', 'Ann'])]
        >>> parse_csv('fact_id\\n"12\\n', "rel.csv", ("fact_id",))
        Traceback (most recent call last):
            ...
        dukb.InputError: rel.csv:2: ...
    """

    def problem(line: int, message: str) -> None:
        if problems is None:
            raise InputError(message, path, line)
        problems.append(Problem(str(path), line, message))

    records = _records_span(text, path)
    try:
        _, header_end, header = next(records)
    except StopIteration:
        raise InputError("empty file: expected a header row " + ",".join(required), path, 1) from None
    bare = _bare_quote_lines(text)
    if bare and bare[0] <= header_end:
        raise InputError(BARE_QUOTE, path, 1)
    for h in header:
        bad = control_problem("column name", h)
        if bad:
            raise InputError(bad, path, 1)
    if not any(h.strip() for h in header):
        raise InputError("line 1 is blank: expected a header row " + ",".join(required), path, 1)
    header = [h.strip() for h in header]
    shown = _cut(",".join(header), 200)
    if "" in header:
        raise InputError(f"column {header.index('') + 1} has no name (header is: {shown})", path, 1)
    dup = sorted({h for h in header if header.count(h) > 1})
    if dup:
        raise InputError(f"duplicate column {_cut(', '.join(dup), 200)}", path, 1)
    missing = [c for c in required if c not in header]
    if missing:
        raise InputError(
            f"missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)} (header is: {shown})", path, 1
        )
    unknown = [] if optional is None else [h for h in header if h not in required and h not in optional]
    if unknown:
        raise InputError(
            f"unknown column{'s' if len(unknown) > 1 else ''} {_cut(', '.join(unknown), 200)} "
            f"(known: {', '.join(required + (optional or ()))})",
            path,
            1,
        )
    rows: list[tuple[int, Any]] = []
    allow = "\r\n" if multiline else ""
    # one scan of the whole text for control characters other than line breaks: when there is none, only a record
    # spanning several lines can hold a forbidden character (a line break inside a quoted field)
    clean = _CONTROL_NOT_EOL.search(text) is None
    check_long = len(text) > MAX_FIELD_CHARS
    nh = len(header)
    b = 0  # next bare quote
    for line, end, fields in records:
        if b < len(bare) and bare[b] <= end:
            while b < len(bare) and bare[b] <= end:
                b += 1
            problem(line, BARE_QUOTE)
            continue
        if not "".join(fields).strip(" "):
            continue  # an empty line, or nothing but commas and spaces
        if len(fields) != nh:
            problem(line, f"expected {nh} fields, found {len(fields)}")
            continue
        if not clean or (end > line and not multiline):
            bad = next((m for m in (control_problem(h, f, allow) for h, f in zip(header, fields)) if m), None)
            if bad:
                problem(line, bad)
                continue
        if check_long and max(map(len, fields)) > MAX_FIELD_CHARS:
            long = next((h for h, f in zip(header, fields) if len(f) > MAX_FIELD_CHARS), None)
            if long is not None:
                problem(line, f"field {long} is longer than {MAX_FIELD_CHARS} characters")
                continue
        if fields_only:
            rows.append((line, list(map(str.strip, fields)) if strip else fields))
        else:
            rows.append((line, dict(zip(header, map(str.strip, fields))) if strip else dict(zip(header, fields))))
    return CsvTable(Path(path), tuple(header), rows)


_FIELD = r'(?:"(?:[^"]|"")*+"|[^,\r\n"]*+)'
#: The longest prefix of a text made of well-formed fields (quoted, or without any quote) and separators; it stops
#: at a bare quote, at an unterminated quote and at text after a closing quote (possessive: linear time).
_WELL_FORMED = re.compile(f"{_FIELD}(?:[,\r\n]{_FIELD})*+")
_SEPARATOR = re.compile("[,\r\n]")


def _bare_quote_lines(text: str) -> list[int]:
    """The 1-based lines of the bare quotes of ``text`` (a quote inside a field that does not start with one), in
    order. Unterminated quotes and text after a closing quote are left to the csv module, which reports them."""
    if '"' not in text:
        return []
    out: list[int] = []
    pos, last, line, n = 0, 0, 1, len(text)
    while pos < n:
        at = cast(re.Match, _WELL_FORMED.match(text, pos)).end()  # it matches everywhere (maybe empty)
        if at >= n or text[at] != '"' or at == 0 or text[at - 1] in ',\r\n"':
            break  # the end, or a syntax error the csv module reports
        chunk = text[last:at]  # never splits a CRLF: ``at`` is at a quote
        line += chunk.count("\n") + chunk.count("\r") - chunk.count("\r\n")
        last = at
        out.append(line)
        sep = _SEPARATOR.search(text, at)
        if sep is None:
            break
        pos = sep.end()
    return out


def _records(text: str, path: str | Path) -> Iterator[tuple[int, list[str]]]:
    """Yield (line where the record starts, fields) for each CSV record of ``text``.

    Raises:
        InputError: a CSV syntax error or a field over the csv module's size limit, at the record's first line.
    """
    for start, _end, fields in _records_span(text, path):
        yield start, fields


def _records_span(text: str, path: str | Path) -> Iterator[tuple[int, int, list[str]]]:
    """Yield (first line, last line, fields) for each CSV record of ``text`` (1-based lines).

    Raises:
        InputError: as :func:`_records`.
    """
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    prev = 0
    try:
        for fields in reader:
            start, prev = prev + 1, reader.line_num
            yield start, prev, fields
    except csv.Error as e:
        start, end = prev + 1, reader.line_num
        msg = str(e)
        if msg == "unexpected end of data":
            msg = f"unterminated quote: the record starting on this line runs to the end of the file (line {end})"
        elif msg.startswith("field larger than field limit"):
            msg = f"a field of the record starting on this line is longer than {csv.field_size_limit()} characters"
        else:
            msg = f"malformed CSV record ({msg})" + (f"; the record runs to line {end}" if end > start else "")
        raise InputError(msg, path, start) from None


__all__ = [
    "BARE_QUOTE",
    "CONTROL_CATEGORIES",
    "CsvTable",
    "MAX_FIELD_CHARS",
    "MAX_INPUT_BYTES",
    "MAX_INT_DIGITS",
    "Problem",
    "control_char",
    "control_problem",
    "decode_text",
    "file_kind",
    "int_problem",
    "open_regular",
    "parse_csv",
    "parse_int",
    "read_bytes",
    "read_csv",
    "read_package_text",
    "read_text",
    "strict_int",
]
