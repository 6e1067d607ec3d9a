"""Reading, validating and writing KB directories (the EDU-RELAT layout).

A KB directory holds three CSV files (the layout of the Eval-DU release, Wu et al. 2025, App. B and F):

- ``people.csv``: name, gender, and optional birthyear, birthplace, job, generation;
- ``relationships.csv``: fact_id, subject, relation, object ("object is subject's relation");
- ``biographies.csv``: fact_id, subject, attribute, value (optional file: a KB may have no biographies).

The files are read strictly by :func:`dukb.kb.csvfile.read_csv` (RFC 4180, UTF-8; unterminated quotes, wrong
field counts, duplicate or unknown columns, control characters and unreadable files are problems). Every problem is
reported with its file and 1-based line (the header is line 1; a record is reported at the line where it starts).
Nothing is dropped silently: a KB with any problem is refused as a whole.
"""

from __future__ import annotations

import csv
import gc
import os
import secrets
from array import array
from collections.abc import Container, Iterable, Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import IO, Any, cast

from dukb import InputError
from dukb.kb.csvfile import (
    MAX_INT_DIGITS,
    Problem,
    control_problem,
    int_problem,
    read_csv,
    strict_int,
)
from dukb.kb.fastread import load_kb_fast
from dukb.kb.kbschema import SCHEMA_FILE, Schema, family_schema, schema_of
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
from dukb.kb.schema import ATTRIBUTES, GENDERS, RELATIONS, gender_violation

#: Built-in KBs shipped in dukb.data, usable wherever a KB directory is expected.
BUILTIN_KBS = ("demo",)


class KBError(InputError):
    """A KB directory (or in-memory KB) is malformed.

    Attributes:
        problems: every problem found, in file order; ``str(error)`` shows the first and counts the rest.

    Example:
        >>> err = KBError([Problem("people.csv", 3, "gender 'x' is not male or female"),
        ...                Problem("people.csv", 5, "duplicate person 'Ann Lee'")])
        >>> print(err)
        people.csv:3: gender 'x' is not male or female (and 1 more problem; `dukb validate` lists them all)
        >>> len(err.problems), err.line
        (2, 3)
    """

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        first = problems[0]
        more = (
            f" (and {len(problems) - 1} more problem{'s' if len(problems) > 2 else ''}; `dukb validate` lists them all)"
            if len(problems) > 1
            else ""
        )
        super().__init__(first.message + more, first.path, first.line)


def resolve_kb_path(kb: str | Path) -> Path:
    """Map a KB argument to a directory: a built-in name (``demo``) or a path.

    Returns:
        The directory path (not yet validated).

    Raises:
        InputError: the path does not exist or is not a directory.

    Example:
        >>> resolve_kb_path("demo").name
        'demo'
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     resolve_kb_path(tmp) == Path(tmp)
        True
        >>> resolve_kb_path("no/such/kb")
        Traceback (most recent call last):
            ...
        dukb.InputError: no/such/kb: ...
    """
    if str(kb) in BUILTIN_KBS and not Path(kb).exists():
        return Path(str(resources.files("dukb.data").joinpath(str(kb))))
    path = Path(kb)
    try:
        exists, is_dir = path.exists(), path.is_dir()
    except OSError as e:  # e.g. a parent folder that may not be searched
        raise InputError(f"cannot read: {e.strerror or e}", path) from None
    if not exists:
        raise InputError(f"KB directory does not exist (built-in KBs: {', '.join(BUILTIN_KBS)})", path)
    if not is_dir:
        raise InputError("a KB must be a directory holding people.csv and relationships.csv", path)
    return path


@contextmanager
def atomic_output(path: str | Path, binary: bool = False) -> Iterator[IO[Any]]:
    """Write an output file all or nothing: the block writes to a fresh temporary file beside ``path``
    (``.NAME.RANDOM.tmp``, NAME cut to 48 characters, created with ``O_EXCL`` and ``O_NOFOLLOW``), which is
    flushed, synced and renamed over ``path`` (:func:`os.replace`) only when the block ends without error. A failed
    write (a full disk, a file size limit, an error or Ctrl-C in the block) removes the temporary file and leaves
    ``path`` as it was: never a truncated file. A symbolic link, FIFO or other file in ``path``'s place is
    replaced, never written through. Parent folders are created.

    Args:
        path: the output file.
        binary: yield a binary file object instead of a text one (UTF-8, ``newline=""``: the text is written as
            given, CSV writers choose their own line ends).

    Yields:
        The open temporary file (the caller writes to it and does not close it).

    Raises:
        InputError: ``cannot write: <strerror>`` naming ``path`` when any step fails with an OS error, or ``cannot
            write this file: a directory is in its place``. Other exceptions of the block propagate unchanged.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     out = Path(tmp) / "sub" / "a.txt"
        ...     with atomic_output(out) as fh:
        ...         _ = fh.write("first")
        ...     try:
        ...         with atomic_output(out) as fh:
        ...             _ = fh.write("half")
        ...             raise RuntimeError("interrupted")
        ...     except RuntimeError:
        ...         pass
        ...     print(out.read_text(), sorted(p.name for p in out.parent.iterdir()))
        first ['a.txt']
    """
    path = Path(path)
    if path.is_dir() and not path.is_symlink():
        raise InputError("cannot write this file: a directory is in its place", path)
    tmp = path.with_name(f".{path.name[:48]}.{secrets.token_hex(6)}.tmp")  # short: a long name stays writable
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(
            tmp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0),
            0o666,
        )
    except OSError as e:
        raise InputError(f"cannot write: {e.strerror or e}", path) from None
    try:
        with os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise InputError(f"cannot write: {e.strerror or e}", path) from None
        raise


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector inside the block (restored after, also on error).

    Loading a large KB creates millions of acyclic objects (rows, facts); each generation-0 overflow would
    otherwise make the collector walk them again (measured: a third of ``load_kb``'s time at 100,000 people).

    Example:
        >>> was = gc.isenabled()
        >>> gc.enable()
        >>> with gc_paused():
        ...     print(gc.isenabled())
        False
        >>> gc.isenabled()
        True
        >>> if not was: gc.disable()
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _read_csv(
    path: Path, required: tuple[str, ...], problems: list[Problem], optional: tuple[str, ...] = ()
) -> list[tuple[int, dict]] | None:
    """Rows of a KB file as (line number, row dict), read by :func:`dukb.kb.csvfile.read_csv`.

    A problem of the whole file (missing, unreadable, not UTF-8, bad header, CSV syntax error) is appended to
    ``problems`` and gives None; per-row problems (field count, control character) are appended and the row left out.
    """
    try:
        return read_csv(path, required, optional=optional, problems=problems).rows
    except InputError as e:
        problems.append(Problem(str(path), e.line, e.message))
        return None


def _read_fact_rows(path: Path, columns: tuple[str, ...], problems: list[Problem]) -> list[tuple[int, list]] | None:
    """Rows of a fact file as (line number, [values in ``columns`` order]), as :func:`_read_csv` otherwise."""
    try:
        table = read_csv(path, columns, optional=(), problems=problems, fields_only=True)
    except InputError as e:
        problems.append(Problem(str(path), e.line, e.message))
        return None
    where = [table.header.index(c) for c in columns]
    if where == list(range(len(columns))):
        return table.rows
    return [(line, [vals[k] for k in where]) for line, vals in table.rows]


def _name_problem(name: str) -> str | None:
    if not name:
        return "empty name"
    return control_problem("name", name)


def load_kb(directory: str | Path) -> KB:
    """Load and validate a KB directory.

    The directory's ``schema.yaml`` (:func:`dukb.kb.kbschema.schema_of`; absent: the family schema) names the
    entities file and its columns, the relations with their subject/object types and the attributes; the KB carries
    it (``kb.schema``). For the family schema the checks and messages are those of EDU-RELAT's people.csv (genders);
    for another schema, the same checks with entity types in place of genders, plus: each functional relation has
    at most one object per subject.

    Args:
        directory: a KB directory, or the name of a built-in KB (``demo``).

    Returns:
        The validated :class:`KB`.

    Raises:
        InputError: the directory does not exist; a malformed schema.yaml (``FILE:LINE: problem``).
        KBError: any problem: missing or unreadable file (``cannot read: <strerror>``), not UTF-8, CSV syntax error
            (e.g. an unterminated quote), wrong number of fields, duplicate, missing or unknown column, control
            character in a cell, unknown relation or attribute, person not in people.csv,
            gender not male/female, duplicate fact, reflexive fact, fact violating its relation's gender,
            non-integer or duplicate fact_id, an integer (fact_id, birthyear, generation) not written
            ``-?[0-9]+`` in ASCII with at most 18 digits (:func:`dukb.kb.csvfile.strict_int`), a bare quote. Each
            problem names the file and line; a file that cannot be read as a whole (missing, bad header, CSV syntax
            error) does not stop the checks of the others, so the error lists every problem found, in file order.

    A directory of at least :data:`dukb.kb.fastread.FAST_MIN_BYTES` is first read by a fast path
    (:func:`dukb.kb.fastread.load_kb_fast`: pyarrow's CSV reader, each check above made on whole columns with numpy;
    its KB builds its fact lists on first use, :meth:`KB.from_columns`),
    which gives way to the strict reader the moment anything looks unusual (a quote, a control character or
    Unicode space, a space around a field, an integer, name, relation or gender the checks would refuse, any
    duplicate): the KB is the strict reader's, and every error is its FILE:LINE error.

    Example:
        >>> kb = load_kb("demo")
        >>> len(kb.people), len(kb.relationships), len(kb.biographies)
        (11, 18, 14)
        >>> str(kb.relationship(1))
        "Henry Hale is George Hale's child"
    """
    root = resolve_kb_path(directory)
    schema = schema_of(root)
    with gc_paused():
        return (load_kb_fast(root) if schema.is_family else None) or _load_kb(root, schema)


def _load_kb(root: Path, schema: Schema | None = None) -> KB:
    """The strict reader of :func:`load_kb` (``schema``: None reads the directory's own)."""
    if schema is None:
        schema = schema_of(root)
    problems: list[Problem] = []
    family = schema.is_family
    people_path = root / schema.entities_file
    name_col, type_col = schema.name_column, schema.type_column
    p_rows = _read_csv(people_path, (name_col, type_col), problems, PEOPLE_OPTIONAL if family else ())
    # when people.csv has a problem of its own, a fact naming someone not in it is not reported again
    people_complete = not problems
    r_rows = _read_fact_rows(root / RELATIONSHIPS, REL_COLUMNS, problems)
    bio_path = root / BIOGRAPHIES
    # biographies.csv is optional; anything of that name (a folder, a dangling link) is read and reported
    b_rows = _read_fact_rows(bio_path, BIO_COLUMNS, problems) if os.path.lexists(bio_path) else []
    # a file that cannot be read as a whole (None) does not stop the checks of the others: every problem is listed

    people: dict[str, Person] = {}
    excused: set[str] | _Everyone = set()  # people with a reported problem: their facts are not reported again
    ppath = str(people_path)
    types = GENDERS if family else schema.entity_types
    for line, row in p_rows or ():
        name, gender = row[name_col], row[type_col].lower()
        bad = _name_problem(name)
        if bad:
            problems.append(Problem(ppath, line, bad))
            continue
        if name in people:
            problems.append(Problem(ppath, line, f"duplicate {'person' if family else 'entity'} {name!r}"))
            continue
        if gender not in types:
            problems.append(Problem(ppath, line, _type_problem(schema, name, row[type_col])))
            excused.add(name)
            continue
        extra = {}
        for col in ("birthyear", "generation"):
            v = row.get(col, "")
            if v:
                n = strict_int(v)
                if n is None:
                    problems.append(Problem(ppath, line, cast(str, int_problem(col, v, name))))
                extra[col] = n
        people[name] = Person(
            name,
            gender,
            extra.get("birthyear"),
            row.get("birthplace") or None,
            row.get("job") or None,
            extra.get("generation"),
        )

    del p_rows
    if not people_complete:
        excused = _Everyone()
    ids = (array("q"), array("q"))
    relationships = _check_relationships(
        people, r_rows or (), str(root / RELATIONSHIPS), problems, excused, ids, schema
    )
    del r_rows  # rows are freed as soon as their facts exist (peak memory on large KBs)
    biographies = _check_biographies(people, b_rows or (), str(bio_path), problems, excused, schema)
    del b_rows
    if problems:
        rank = {ppath: 0, str(root / RELATIONSHIPS): 1, str(bio_path): 2}
        problems.sort(key=lambda p: (rank.get(p.path, 3), p.line or 0))  # stable: file order, then line order
        raise KBError(problems)
    kb = KB(people, relationships, biographies, source=root, schema=schema)
    kb.set_name_index(*ids)
    return kb


class _Everyone:
    """A set holding every name: the people excused when people.csv itself has a problem."""

    def __contains__(self, name: object) -> bool:
        return True

    def add(self, name: str) -> None:
        pass


def _parse_id(value: str, path: str, line: int | None, seen: set[int], problems: list[Problem]) -> int | None:
    fid = strict_int(value)
    if fid is None:
        problems.append(Problem(path, line, cast(str, int_problem("fact_id", value))))
        return None
    if fid < 0:
        problems.append(Problem(path, line, f"fact_id {fid} is negative"))
        return None
    if fid in seen:
        problems.append(Problem(path, line, f"duplicate fact_id {fid}"))
        return None
    seen.add(fid)
    return fid


#: (relation, subject gender, object gender) combinations that respect the relation's gender constraint.
_INTERN = {x: x for x in RELATIONS + ATTRIBUTES}
_GENDER_OK = frozenset(
    (r, sg, og) for r in RELATIONS for sg in GENDERS for og in GENDERS if gender_violation(r, sg, og) is None
)


def _type_problem(schema: Schema, name: str, value: str) -> str:
    """The message for an entity whose type (family: gender) is not one of the schema's."""
    if schema.is_family:
        return f"gender of {name!r} is {value!r}, not male/female"
    return f"type of {name!r} is {value!r}, not one of {', '.join(schema.entity_types)}"


def _vocabulary(schema: Schema | None) -> tuple[Schema, tuple[str, ...], frozenset, dict[str, str], str]:
    """(schema, relations, the (relation, subject type, object type) triples its types allow, interned names, the
    word for an entity) of a schema (None: the family schema)."""
    if schema is None or schema.is_family:
        return family_schema(), RELATIONS, _GENDER_OK, _INTERN, "person"
    rels, types = schema.relation_names, schema.entity_types
    ok = frozenset((r, a, b) for r in rels for a in types for b in types if schema.type_violation(r, a, b) is None)
    return schema, rels, ok, {x: x for x in rels + schema.attribute_names}, "entity"


def _check_relationships(
    people: dict[str, Person],
    rows: Iterable[tuple[int, Sequence[str]]],
    path: str,
    problems: list[Problem],
    excused: Container[str] = frozenset(),
    ids: tuple[array, array] | None = None,
    schema: Schema | None = None,
) -> list[Fact]:
    """The valid relationship facts of ``rows`` ((line, [fact_id, subject, relation, object])); problems appended.
    With ``ids`` (two array('q')), the people-order position of each kept fact's subject and object is appended.
    ``schema`` (None: the family schema) gives the relations, their types and which are functional."""
    schema, relations, type_ok, intern, who_word = _vocabulary(schema)
    family = who_word == "person"
    functional = {r.name for r in schema.relations if r.functional}
    first_object: dict[tuple[str, str], tuple[str, int | None]] = {}
    seen_ids: set[int] = set()
    seen: dict[tuple, int | None] = {}
    out = []
    info = {name: (p, i) for i, (name, p) in enumerate(people.items())}
    get = info.get
    s_ids, o_ids = ids if ids is not None else (array("q"), array("q"))
    for line, (v, s, r, o) in rows:
        # fast path: a row with no problem at all (the checks below, in one expression); the fact shares the
        # person's name and the relation's string objects (memory, and identity-fast dict look-ups later)
        a, b = get(s), get(o)
        fid = v.isdigit() and v.isascii() and len(v) <= MAX_INT_DIGITS and int(v)  # strict_int, inlined: False when not
        if (
            fid is not False
            and a is not None
            and b is not None
            and s != o
            and fid not in seen_ids
            and (r, a[0].gender, b[0].gender) in type_ok
            and (s, r, o) not in seen
        ):
            seen_ids.add(fid)
            s, r, o = a[0].name, intern[r], b[0].name
            seen[(s, r, o)] = line
            out.append(Fact(fid, s, r, o))
            s_ids.append(a[1])
            o_ids.append(b[1])
            if functional and r in functional:
                _check_functional(first_object, s, r, o, path, line, problems)
            continue
        checked = _parse_id(v, path, line, seen_ids, problems)
        ok = checked is not None
        if r not in relations:
            problems.append(Problem(path, line, f"unknown relation {r!r} (known: {', '.join(relations)})"))
            ok = False
        for who in (s, o):
            if who not in people:
                if who not in excused:
                    problems.append(Problem(path, line, f"{who_word} {who!r} is not in {schema.entities_file}"))
                ok = False
        if not ok:
            continue
        if s == o:
            problems.append(
                Problem(
                    path,
                    line,
                    f"reflexive fact: {s!r} cannot be their own {r}"
                    if family
                    else f"reflexive fact ({s}, {r}, {o}): subject and object are the same entity",
                )
            )
            continue
        why = schema.type_violation(r, people[s].gender, people[o].gender)
        if why:
            problems.append(
                Problem(
                    path, line, f"fact ({s}, {r}, {o}) violates its relation's {'gender' if family else 'types'}: {why}"
                )
            )
            continue
        if (s, r, o) in seen:
            where = seen[(s, r, o)]
            problems.append(
                Problem(path, line, f"duplicate fact ({s}, {r}, {o})" + (f", first on line {where}" if where else ""))
            )
            continue
        seen[(s, r, o)] = line
        out.append(Fact(cast(int, checked), s, r, o))  # ok: a valid fact_id
        s_ids.append(info[s][1])
        o_ids.append(info[o][1])
        if r in functional:
            _check_functional(first_object, s, r, o, path, line, problems)
    return out


def _check_functional(
    first: dict[tuple[str, str], tuple[str, int | None]],
    s: str,
    r: str,
    o: str,
    path: str,
    line: int | None,
    problems: list[Problem],
) -> None:
    """Report a second object of a functional relation for the same subject (``first``: (s, r) -> first object)."""
    had = first.setdefault((s, r), (o, line))
    if had[0] != o:
        where = f" (line {had[1]})" if had[1] else ""
        problems.append(
            Problem(
                path,
                line,
                f"functional relation '{r}': {s!r} already has the object {had[0]!r}"
                f"{where}; at most one object per subject",
            )
        )


def _check_biographies(
    people: dict[str, Person],
    rows: Iterable[tuple[int, Sequence[str]]],
    path: str,
    problems: list[Problem],
    excused: Container[str] = frozenset(),
    schema: Schema | None = None,
) -> list[BioFact]:
    schema, _, _, intern, who_word = _vocabulary(schema)
    attributes = ATTRIBUTES if who_word == "person" else schema.attribute_names
    seen_ids: set[int] = set()
    seen: dict[tuple, int | None] = {}
    out = []
    values: dict[str, str] = {}  # one string object per distinct value (years, states, jobs repeat)
    get = people.get
    for line, (fv, s, a, v) in rows:
        p = get(s)
        # fast path: a row with no problem at all (the checks below, in one expression)
        fid = (
            fv.isdigit() and fv.isascii() and len(fv) <= MAX_INT_DIGITS and int(fv)
        )  # strict_int, inlined: False when not
        if a == "birthyear" and strict_int(v) is None:
            fid = False
        if (
            fid is not False
            and v
            and a in attributes
            and p is not None
            and fid not in seen_ids
            and (s, a, v) not in seen
        ):
            seen_ids.add(fid)
            s, a, v = p.name, intern[a], values.setdefault(v, v)
            seen[(s, a, v)] = line
            out.append(BioFact(fid, s, a, v))
            continue
        checked = _parse_id(fv, path, line, seen_ids, problems)
        ok = checked is not None
        if a not in attributes:
            problems.append(Problem(path, line, f"unknown attribute {a!r} (known: {', '.join(attributes) or 'none'})"))
            ok = False
        if s not in people:
            if s not in excused:
                problems.append(Problem(path, line, f"{who_word} {s!r} is not in {schema.entities_file}"))
            ok = False
        if not v:
            problems.append(Problem(path, line, "empty value"))
            ok = False
        elif a == "birthyear" and strict_int(v) is None:
            problems.append(Problem(path, line, cast(str, int_problem("birthyear", v))))
            ok = False
        if not ok:
            continue
        if (s, a, v) in seen:
            problems.append(Problem(path, line, f"duplicate fact ({s}, {a}, {v}), first on line {seen[(s, a, v)]}"))
            continue
        seen[(s, a, v)] = line
        out.append(BioFact(cast(int, checked), s, a, v))  # ok: a valid fact_id
    return out


def check_kb(kb: KB) -> None:
    """Validate a KB built in memory (e.g. by the generator) with the same rules as :func:`load_kb`.

    Raises:
        KBError: listing every problem; "line" is the 2-based row position the fact would have in its CSV file.

    Example:
        >>> kb = KB({"Ann Lee": Person("Ann Lee", "female"), "Bo Lee": Person("Bo Lee", "male")},
        ...         [Fact(0, "Bo Lee", "wife", "Ann Lee")])
        >>> check_kb(kb)  # valid: returns None
        >>> kb.relationships.append(Fact(1, "Ann Lee", "father", "Ann Lee"))
        >>> try:
        ...     check_kb(kb)
        ... except KBError as e:
        ...     print(e)
        relationships.csv:3: reflexive fact: 'Ann Lee' cannot be their own father
    """
    problems: list[Problem] = []
    pseen: set[str] = set()
    schema = kb.schema
    types = GENDERS if schema.is_family else schema.entity_types
    for i, p in enumerate(kb.people.values()):
        bad = (
            _name_problem(p.name)
            or (f"duplicate {'person' if schema.is_family else 'entity'} {p.name!r}" if p.name in pseen else None)
            or (None if p.gender in types else _type_problem(schema, p.name, p.gender))
        )
        if bad:
            problems.append(Problem(schema.entities_file, i + 2, bad))
        pseen.add(p.name)
    rel_rows = [(i + 2, (str(f.fact_id), f.subject, f.relation, f.object)) for i, f in enumerate(kb.relationships)]
    bio_rows = [(i + 2, (str(f.fact_id), f.subject, f.attribute, str(f.value))) for i, f in enumerate(kb.biographies)]
    _check_relationships(kb.people, rel_rows, RELATIONSHIPS, problems, schema=schema)
    _check_biographies(kb.people, bio_rows, BIOGRAPHIES, problems, schema=schema)
    if problems:
        raise KBError(problems)


def save_kb(kb: KB, directory: str | Path) -> Path:
    """Write a KB as a KB directory (people.csv, relationships.csv, biographies.csv), creating it if needed; each
    file is written all or nothing (:func:`atomic_output`).

    Returns:
        The directory path.

    Raises:
        InputError: the directory or a file cannot be written (named).

    Example:
        >>> import tempfile
        >>> kb = load_kb("demo")
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     out = save_kb(kb, Path(tmp) / "copy")
        ...     print(sorted(p.name for p in out.iterdir()))
        ...     print(load_kb(out).fingerprint() == kb.fingerprint())
        ['biographies.csv', 'people.csv', 'relationships.csv']
        True
    """
    root = Path(directory)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"cannot write: {e.strerror or e}", root) from None
    with gc_paused():
        _save_kb(kb, root)
    return root


def _save_kb(kb: KB, root: Path) -> None:
    schema = kb.schema
    if not schema.is_family:  # the entities file (name and type columns) and the schema it follows
        with atomic_output(root / schema.entities_file) as fh:
            w = csv.writer(fh)
            w.writerow([schema.name_column, schema.type_column])
            w.writerows([p.name, p.gender] for p in kb.people.values())
        if schema.path is not None:
            with atomic_output(root / SCHEMA_FILE, binary=True) as fh:
                fh.write(Path(schema.path).read_bytes())
    else:
        with atomic_output(root / PEOPLE) as fh:
            w = csv.writer(fh)  # RFC 4180 line ends, as EDU-RELAT
            w.writerow(PEOPLE_COLUMNS + PEOPLE_OPTIONAL)
            w.writerows(
                [
                    p.name,
                    p.gender,
                    "" if p.birthyear is None else p.birthyear,
                    p.birthplace or "",
                    p.job or "",
                    "" if p.generation is None else p.generation,
                ]
                for p in kb.people.values()
            )
    with atomic_output(root / RELATIONSHIPS) as fh:
        w = csv.writer(fh)  # RFC 4180 line ends, as EDU-RELAT
        w.writerow(REL_COLUMNS)
        w.writerows([f.fact_id, f.subject, f.relation, f.object] for f in kb.relationships)
    with atomic_output(root / BIOGRAPHIES) as fh:
        w = csv.writer(fh)  # RFC 4180 line ends, as EDU-RELAT
        w.writerow(BIO_COLUMNS)
        w.writerows([f.fact_id, f.subject, f.attribute, f.value] for f in kb.biographies)
