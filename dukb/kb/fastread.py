"""The fast path of :func:`dukb.kb.io.load_kb`: a KB's CSV files read as columns by pyarrow's CSV reader and every check
of the strict reader made on whole columns with numpy.

Nothing here reports a problem: each function gives None the moment anything looks unusual, and the strict reader
(:func:`dukb.kb.csvfile.read_csv`, :func:`dukb.kb.io.load_kb`) then reads the file and reports each problem at its
line. What the fast path accepts, it reads exactly as the strict reader would.
"""

from __future__ import annotations

import codecs
import csv
import os
import re
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from dukb import InputError
from dukb.kb.csvfile import MAX_FIELD_CHARS, MAX_INT_DIGITS, parse_csv, read_bytes
from dukb.kb.layout import (
    BIO_COLUMNS,
    BIOGRAPHIES,
    PEOPLE,
    PEOPLE_COLUMNS,
    PEOPLE_OPTIONAL,
    REL_COLUMNS,
    RELATIONSHIPS,
)
from dukb.kb.model import KB, BioFact, Fact, Person
from dukb.kb.parallel import thread_map, threads
from dukb.kb.schema import ATTRIBUTES, GENDERS, RELATIONS, gender_violation

#: Bytes after which :func:`fast_columns` leaves a file to :func:`read_csv`: a quote, a C0 control other than LF and
#: CR, DEL (``bytes.translate`` deletes every other byte: what is left is the bad ones).
_FAST_OK_BYTES = bytes(c for c in range(256) if not (c < 0x20 and c not in (10, 13) or c in (0x7F, ord('"'))))
#: Multi-byte sequences after which :func:`fast_columns` leaves a file to :func:`read_csv`: a C1 control or U+00A0,
#: U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000 (white space :meth:`str.strip` removes), U+FEFF,
#: or an encoded surrogate.
_FAST_BAD_SEQ = re.compile(
    rb"\xc2[\x80-\xa0]|\xe1\x9a\x80|\xe2\x80[\x80-\x8a\xa8\xa9\xaf]|\xe2\x81\x9f|\xe3\x80\x80"
    rb"|\xef\xbb\xbf|\xed[\xa0-\xbf]"
)


def _plain_bytes(b: bytes) -> bool:
    """True when the bytes ``b`` of a CSV file (its leading byte order mark dropped) need none of
    :func:`dukb.kb.csvfile.read_csv`'s quoting, stripping or control-character rules: no byte of
    :data:`_FAST_OK_BYTES`'s complement, no sequence of :data:`_FAST_BAD_SEQ`, and no CR other than in CRLF (C-speed
    scans; a space at either end of a field is checked on the columns)."""
    if b.translate(None, _FAST_OK_BYTES):
        return False
    if not b.isascii() and _FAST_BAD_SEQ.search(b):
        return False
    if b.count(b"\r") != b.count(b"\r\n"):
        return False
    return True


def arrow_numpy(values: Any) -> Any:
    """The numpy view (no copy) of a pyarrow array of fixed-width numbers without nulls (``Array.to_numpy``
    would import pandas, a second of start-up, through pyarrow's pandas shim).

    Example:
        >>> import pyarrow.compute as pc
        >>> import pyarrow.csv as pacsv, pyarrow as pa
        >>> t = pacsv.read_csv(pa.py_buffer(b"a\\nxy\\nz\\n"))
        >>> arrow_numpy(pc.binary_length(t.column("a").combine_chunks())).tolist()
        [2, 1]
    """
    if values.null_count:
        raise ValueError("nulls have no numpy view here")
    dtype = np.dtype(values.type.to_pandas_dtype())
    return np.frombuffer(values.buffers()[1], dtype=dtype)[values.offset : values.offset + len(values)]


def fast_columns(
    path: str | Path,
    required: tuple[str, ...],
    optional: tuple[str, ...] | None = None,
    non_empty: tuple[str, ...] = (),
) -> tuple[tuple[str, ...], dict[str, Any]] | None:
    """The columns of a CSV file, read with pyarrow's CSV reader, when the file is plain enough that
    :func:`read_csv` would read the same values without a problem; None otherwise (then :func:`read_csv` reads it
    and reports its problems with their lines).

    Plain: a regular UTF-8 file under :data:`MAX_INPUT_BYTES` whose header :func:`parse_csv` accepts, with no quote
    (so no quoted field, bare quote or line break in a field), no control character, byte order mark (but one
    leading) or surrogate, no line ending in a lone CR, no white space :meth:`str.strip` would remove, no field over
    :data:`MAX_FIELD_CHARS` characters (or :func:`csv.field_size_limit`), the header's number of fields on every
    record, and no record of empty fields only (:func:`read_csv` skips those; here they give None). Empty lines
    are skipped by both. Values are strings, never null.

    Args:
        path: the file.
        required, optional: as :func:`read_csv`.
        non_empty: columns whose every value must be non-empty (else None): a cheap way for a caller to rule out
            records :func:`read_csv` would skip or refuse.

    Returns:
        (header, {column: pyarrow.StringArray}) in file order, or None (pyarrow not installed, or the file not plain).

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     f = Path(tmp) / "people.csv"
        ...     _ = f.write_text("name,gender\\nAnn Lee,female\\n\\nBo Kay,male\\n")
        ...     header, cols = fast_columns(f, ("name", "gender"))
        ...     print(header, cols["name"].to_pylist())
        ...     _ = f.write_text('name,gender\\n"Lee, Ann",female\\n')
        ...     print(fast_columns(f, ("name", "gender")))
        ('name', 'gender') ['Ann Lee', 'Bo Kay']
        None
    """
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.csv as pacsv
    except ImportError:  # pragma: no cover - pyarrow is a dependency
        return None
    try:
        data = read_bytes(path)
    except InputError:
        return None
    body = data[len(codecs.BOM_UTF8) :] if data.startswith(codecs.BOM_UTF8) else data
    del data
    if not _plain_bytes(body):
        return None
    end = body.find(b"\n")
    first = body[: len(body) if end < 0 else end]
    try:
        header = parse_csv(first.decode("utf-8"), path, required, optional=optional).header
    except (InputError, UnicodeDecodeError):
        return None
    try:
        table = pacsv.read_csv(
            pa.py_buffer(body),
            read_options=pacsv.ReadOptions(column_names=list(header), skip_rows=1, use_threads=threads() > 1),
            parse_options=pacsv.ParseOptions(quote_char=False, newlines_in_values=False),
            convert_options=pacsv.ConvertOptions(
                column_types={h: pa.string() for h in header}, strings_can_be_null=False
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError, OSError):
        return None
    limit = min(MAX_FIELD_CHARS, csv.field_size_limit())
    cols = {h: table.column(h).combine_chunks() for h in header}
    del table
    empty = None
    for h, col in cols.items():
        size = arrow_numpy(pc.binary_length(col))
        if len(size) and size.max() > limit:
            return None  # bytes >= characters: a field within the limit in bytes is within it in characters
        if pc.starts_with(col, pattern=" ").true_count or pc.ends_with(col, pattern=" ").true_count:
            return None  # read_csv strips it
        blank = size == 0
        if h in non_empty and blank.any():
            return None
        empty = blank if empty is None else empty & blank
    if empty is not None and empty.any():
        return None
    return tuple(header), cols


#: Total size of the KB files (bytes) from which :func:`load_kb` tries its fast path first (below it, importing
#: pyarrow costs more than it saves).
FAST_MIN_BYTES = 1 << 20


def load_kb_fast(root: Path, min_bytes: int | None = None) -> KB | None:
    """The KB of ``root`` read by the vectorised fast path (:func:`fast_columns`, pyarrow, and every check of
    :func:`dukb.kb.io.load_kb`'s strict reader on whole columns with numpy), or None the moment anything looks wrong
    (then the strict reader reads it and reports each problem at its line). Equal to what the strict reader returns
    on every KB it accepts. Directories under ``min_bytes`` (default :data:`FAST_MIN_BYTES`) in all give None at
    once.

    Example:
        >>> from dukb.kb.io import load_kb, resolve_kb_path
        >>> root = resolve_kb_path("demo")
        >>> load_kb_fast(root) is None  # the demo KB is under FAST_MIN_BYTES
        True
        >>> load_kb_fast(root, min_bytes=0).relationships == load_kb(root).relationships
        True
    """
    paths = (root / PEOPLE, root / RELATIONSHIPS, root / BIOGRAPHIES)
    try:
        size = sum(os.stat(p).st_size for p in paths if os.path.lexists(p))
    except OSError:
        return None
    if size < (FAST_MIN_BYTES if min_bytes is None else min_bytes):
        return None
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
    except ImportError:  # pragma: no cover - pyarrow is a dependency
        return None
    has_bio = os.path.lexists(paths[2])
    # the three files are read side by side (pyarrow's reader releases the GIL; dukb.kb.parallel)
    reads = [(paths[0], PEOPLE_COLUMNS, PEOPLE_OPTIONAL, PEOPLE_COLUMNS), (paths[1], REL_COLUMNS, (), REL_COLUMNS)]
    reads += [(paths[2], BIO_COLUMNS, (), BIO_COLUMNS)] if has_bio else []
    pt, rt, *bts = thread_map(lambda a: fast_columns(a[0], a[1], a[2], non_empty=a[3]), reads)
    bt = bts[0] if has_bio else None
    if pt is None or rt is None or (has_bio and bt is None):
        return None
    got = _fast_people(pt[1], pc)
    if got is None:
        return None
    people, gender = got
    names = pt[1]["name"]
    del pt
    name_obj = np.array(list(people), dtype=object)
    jobs: list[Callable[[], Any]] = [partial(_fast_relationships, rt[1], names, gender, pc)]
    if bt is not None:
        jobs.append(partial(_fast_biographies, bt[1], names, name_obj, pc))
    done = thread_map(lambda job: job(), jobs)
    columns, bios = done[0], (done[1] if len(done) > 1 else list)
    del rt, bt, jobs, done
    if columns is None or bios is None:
        return None

    def relationships() -> list[Fact]:
        fid, subj, rel, obj = columns
        return list(map(Fact, fid.tolist(), name_obj[subj].tolist(), _REL_OBJ[rel].tolist(), name_obj[obj].tolist()))

    kb = KB.from_columns(people, columns, relationships, bios, source=root)
    pa.default_memory_pool().release_unused()  # the tables' memory, which the pool would otherwise keep
    return kb


_INT = f"^-?[0-9]{{1,{MAX_INT_DIGITS}}}$"  # strict_int, as a regular expression (RE2)
_FACT_ID = f"^[0-9]{{1,{MAX_INT_DIGITS}}}$"  # a non-negative strict_int
_REL_OBJ = np.array(RELATIONS, dtype=object)  # the same string objects as the strict reader's facts
_ATTR_OBJ = np.array(ATTRIBUTES, dtype=object)
#: [relation, subject gender, object gender] -> the fact respects its relation's gender constraint (GENDERS order).
_GENDER_TABLE = np.array(
    [[[gender_violation(r, sg, og) is None for og in GENDERS] for sg in GENDERS] for r in RELATIONS], dtype=bool
)


def _codes(column: Any, vocabulary: Sequence[str], pc: Any) -> np.ndarray | None:
    """Per value of ``column``, its index in ``vocabulary`` (int64), or None when a value is not in it."""
    enc = pc.dictionary_encode(column)
    lut = [vocabulary.index(v) if v in vocabulary else -1 for v in enc.dictionary.to_pylist()]
    if -1 in lut:
        return None
    return np.array(lut, dtype=np.int64)[arrow_numpy(enc.indices)] if len(lut) else np.zeros(0, dtype=np.int64)


def _ids(column: Any, pc: Any) -> np.ndarray | None:
    """The fact_ids of ``column`` (int64), or None when one is not a non-negative strict integer or repeats."""
    if pc.match_substring_regex(column, pattern=_FACT_ID).true_count != len(column):
        return None
    fid = arrow_numpy(pc.cast(column, "int64"))
    return None if _repeats(fid) else fid


def _repeats(values: np.ndarray) -> bool:
    ordered = np.sort(values)
    return bool((ordered[1:] == ordered[:-1]).any())


def _people_index(column: Any, names: Any, pc: Any) -> np.ndarray | None:
    """Per value of ``column``, the position of that name in people.csv (int64), or None when one is unknown."""
    at = pc.index_in(column, value_set=names)
    return None if at.null_count else arrow_numpy(at).astype(np.int64)


def _fast_people(cols: dict[str, Any], pc: Any) -> tuple[dict[str, Person], np.ndarray] | None:
    """people.csv's people and each one's gender (index in GENDERS, int64), or None (see :func:`load_kb_fast`)."""
    names = cols["name"]
    if pc.count_distinct(names).as_py() != len(names):
        return None
    enc = pc.dictionary_encode(cols["gender"])
    lut = [GENDERS.index(v.lower()) if v.lower() in GENDERS else -1 for v in enc.dictionary.to_pylist()]
    if -1 in lut:
        return None
    gender = np.array(lut, dtype=np.int64)[arrow_numpy(enc.indices)] if lut else np.zeros(0, dtype=np.int64)
    n = len(names)
    extra: dict[str, list] = {}
    for col in PEOPLE_OPTIONAL:
        if col not in cols:
            extra[col] = [None] * n
        elif col in ("birthyear", "generation"):
            blank_or_int = pc.match_substring_regex(cols[col], pattern=f"^$|{_INT}")
            if blank_or_int.true_count != n:
                return None
            extra[col] = _distinct_values(cols[col], lambda v: int(v) if v else None, pc)
        else:
            extra[col] = _distinct_values(cols[col], lambda v: v or None, pc)
    name_list = names.to_pylist()
    persons = map(
        Person,
        name_list,
        np.array(GENDERS, dtype=object)[gender].tolist(),
        extra["birthyear"],
        extra["birthplace"],
        extra["job"],
        extra["generation"],
    )
    return dict(zip(name_list, persons)), gender


def _distinct_values(column: Any, convert: Any, pc: Any) -> list:
    """``convert`` of each value of ``column``, one object per distinct value (years, states and jobs repeat)."""
    enc = pc.dictionary_encode(column)
    if not len(column):
        return []
    return np.array([convert(v) for v in enc.dictionary.to_pylist()], dtype=object)[arrow_numpy(enc.indices)].tolist()


def _fast_relationships(
    cols: dict[str, Any], names: Any, gender: np.ndarray, pc: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """relationships.csv's facts as int64 columns (fact_id, subject position, relation index, object position),
    or None (see :func:`load_kb_fast`)."""
    fid = _ids(cols["fact_id"], pc)
    r = _codes(cols["relation"], RELATIONS, pc) if fid is not None else None
    s = _people_index(cols["subject"], names, pc) if r is not None else None
    o = _people_index(cols["object"], names, pc) if s is not None else None
    if fid is None or r is None or s is None or o is None:
        return None
    if (
        bool((s == o).any())
        or not _GENDER_TABLE[r, gender[s], gender[o]].all()
        or _repeats((s * len(RELATIONS) + r) * max(len(names), 1) + o)
    ):
        return None
    return fid, s, r, o


def _fast_biographies(
    cols: dict[str, Any], names: Any, name_obj: np.ndarray, pc: Any
) -> Callable[[], list[BioFact]] | None:
    """What builds biographies.csv's facts, or None (see :func:`load_kb_fast`)."""
    fid = _ids(cols["fact_id"], pc)
    a = _codes(cols["attribute"], ATTRIBUTES, pc) if fid is not None else None
    s = _people_index(cols["subject"], names, pc) if a is not None else None
    if fid is None or a is None or s is None:
        return None
    value = cols["value"]
    year = pc.match_substring_regex(cols["attribute"], pattern="^birthyear$")
    if pc.and_(year, pc.invert(pc.match_substring_regex(value, pattern=_INT))).true_count:
        return None
    enc = pc.dictionary_encode(value)
    v = arrow_numpy(enc.indices).astype(np.int64)
    if _repeats((s * len(ATTRIBUTES) + a) * max(len(enc.dictionary), 1) + v):
        return None
    distinct = np.array(enc.dictionary.to_pylist(), dtype=object)

    def build() -> list[BioFact]:
        return list(map(BioFact, fid.tolist(), name_obj[s].tolist(), _ATTR_OBJ[a].tolist(), distinct[v].tolist()))

    return build


__all__ = ["FAST_MIN_BYTES", "arrow_numpy", "fast_columns", "load_kb_fast"]
