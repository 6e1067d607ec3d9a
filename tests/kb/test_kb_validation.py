"""Bad input: a table of malformed KB directories, each with its expected file, line and message.

Every case starts from a small valid KB written by hand (so the line numbers in the table are literal) and applies
one edit. For each case:

- :func:`dukb.kb.load_kb` raises :class:`dukb.kb.KBError` whose first problem has the expected file, line and
  message fragment, and ``str(error)`` reads ``file:line: message``;
- ``dukb closure --kb DIR`` (a real subprocess) exits 2 with exactly one line on stderr, starting
  ``dukb: error:`` and naming the same file and line, and no traceback.

Source of the rules checked: issue 2, "Validation with a clear error naming file, line and problem".
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dukb import InputError
from dukb.kb import KBError, load_kb

PEOPLE = (
    "name,gender,birthyear,birthplace,job,generation\n"  # 1
    "Anna Berg,female,1930,Ohio,Teacher,0\n"  # 2
    "Carl Berg,male,1928,Ohio,Baker,0\n"  # 3
    "Dora Berg,female,1955,Texas,Nurse,1\n"  # 4
    "Emil Berg,male,1957,Texas,Pilot,1\n"  # 5
    "Fiona Lund,female,1958,Iowa,Chemist,1\n"  # 6
)
RELATIONSHIPS = (
    "fact_id,subject,relation,object\n"  # 1
    "0,Anna Berg,husband,Carl Berg\n"  # 2
    "1,Dora Berg,mother,Anna Berg\n"  # 3
    "2,Dora Berg,father,Carl Berg\n"  # 4
    "3,Emil Berg,sister,Dora Berg\n"  # 5
    "4,Fiona Lund,husband,Emil Berg\n"  # 6
)
BIOGRAPHIES = (
    "fact_id,subject,attribute,value\n"  # 1
    "0,Anna Berg,birthyear,1930\n"  # 2
    "1,Carl Berg,job,Baker\n"  # 3
    "2,Dora Berg,birthplace,Texas state\n"  # 4
)
BASE = {"people.csv": PEOPLE, "relationships.csv": RELATIONSHIPS, "biographies.csv": BIOGRAPHIES}

P, R, B = "people.csv", "relationships.csv", "biographies.csv"


def write_kb(root: Path, files: dict[str, str | bytes | None]) -> Path:
    """Write a KB directory: file name -> text (str), raw bytes, or None (file absent)."""
    root.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        if content is None:
            continue
        if isinstance(content, bytes):
            (root / name).write_bytes(content)
        else:
            (root / name).write_text(content, encoding="utf-8", newline="")
    return root


def replace_line(text: str, line: int, new: str) -> str:
    lines = text.splitlines(keepends=True)
    lines[line - 1] = new + "\n"
    return "".join(lines)


def append(text: str, new: str) -> str:
    return text + new + "\n"


# Each case: id, {file: new content}, expected file, expected line (None: not tied to a line), message fragment.
CASES = [
    ("missing people.csv", {P: None}, P, None, "missing file"),
    ("missing relationships.csv", {R: None}, R, None, "missing file"),
    (
        "missing column gender",
        {P: replace_line(PEOPLE, 1, "name,sex,birthyear,birthplace,job,generation")},
        P,
        1,
        "missing column gender",
    ),
    (
        "missing column relation",
        {R: replace_line(RELATIONSHIPS, 1, "fact_id,subject,rel,object")},
        R,
        1,
        "missing column relation",
    ),
    (
        "missing column value",
        {B: replace_line(BIOGRAPHIES, 1, "fact_id,subject,attribute")},
        B,
        1,
        "missing column value",
    ),
    (
        "duplicate column",
        {R: replace_line(RELATIONSHIPS, 1, "fact_id,subject,relation,object,subject")},
        R,
        1,
        "duplicate column subject",
    ),
    ("empty file", {R: ""}, R, 1, "empty file"),
    (
        "not utf-8",
        {P: PEOPLE.encode() + "Gr\xe9ta Lund,female,1960,Iowa,Cook,1\n".encode("latin-1")},
        P,
        7,
        "not UTF-8",
    ),
    (
        "unknown relation",
        {R: replace_line(RELATIONSHIPS, 4, "2,Dora Berg,papa,Carl Berg")},
        R,
        4,
        "unknown relation 'papa'",
    ),
    (
        "unknown attribute",
        {B: replace_line(BIOGRAPHIES, 3, "1,Carl Berg,hobby,Chess")},
        B,
        3,
        "unknown attribute 'hobby'",
    ),
    (
        "object not in people.csv",
        {R: replace_line(RELATIONSHIPS, 6, "4,Fiona Lund,husband,Gustav Lund")},
        R,
        6,
        "person 'Gustav Lund' is not in people.csv",
    ),
    (
        "subject not in people.csv",
        {R: replace_line(RELATIONSHIPS, 5, "3,Hugo Berg,sister,Dora Berg")},
        R,
        5,
        "person 'Hugo Berg' is not in people.csv",
    ),
    (
        "biography subject not in people.csv",
        {B: replace_line(BIOGRAPHIES, 4, "2,Hilda Moe,birthplace,Iowa state")},
        B,
        4,
        "person 'Hilda Moe' is not in people.csv",
    ),
    (
        "gender not male/female",
        {P: replace_line(PEOPLE, 6, "Fiona Lund,f,1958,Iowa,Chemist,1")},
        P,
        6,
        "gender of 'Fiona Lund' is 'f', not male/female",
    ),
    ("empty gender", {P: replace_line(PEOPLE, 5, "Emil Berg,,1957,Texas,Pilot,1")}, P, 5, "not male/female"),
    (
        "duplicate fact",
        {R: append(RELATIONSHIPS, "5,Dora Berg,father,Carl Berg")},
        R,
        7,
        "duplicate fact (Dora Berg, father, Carl Berg), first on line 4",
    ),
    (
        "duplicate biography fact",
        {B: append(BIOGRAPHIES, "3,Carl Berg,job,Baker")},
        B,
        5,
        "duplicate fact (Carl Berg, job, Baker), first on line 3",
    ),
    ("reflexive fact", {R: append(RELATIONSHIPS, "5,Carl Berg,brother,Carl Berg")}, R, 7, "reflexive fact"),
    (
        "object gender",
        {R: append(RELATIONSHIPS, "5,Emil Berg,brother,Dora Berg")},
        R,
        7,
        "the object of 'brother' must be male, but is female",
    ),
    (
        "object gender (mother)",
        {R: replace_line(RELATIONSHIPS, 3, "1,Dora Berg,mother,Carl Berg")},
        R,
        3,
        "the object of 'mother' must be female, but is male",
    ),
    (
        "subject gender (husband)",
        {R: append(RELATIONSHIPS, "5,Carl Berg,husband,Emil Berg")},
        R,
        7,
        "the subject of 'husband' must be female, but is male",
    ),
    (
        "subject gender (wife)",
        {R: append(RELATIONSHIPS, "5,Dora Berg,wife,Fiona Lund")},
        R,
        7,
        "the subject of 'wife' must be male, but is female",
    ),
    (
        "non-integer fact_id",
        {R: replace_line(RELATIONSHIPS, 3, "one,Dora Berg,mother,Anna Berg")},
        R,
        3,
        "fact_id 'one' is not an integer",
    ),
    (
        "non-integer biography fact_id",
        {B: replace_line(BIOGRAPHIES, 2, "0.5,Anna Berg,birthyear,1930")},
        B,
        2,
        "fact_id '0.5' is not an integer",
    ),
    (
        "negative fact_id",
        {R: replace_line(RELATIONSHIPS, 6, "-4,Fiona Lund,husband,Emil Berg")},
        R,
        6,
        "fact_id -4 is negative",
    ),
    ("duplicate fact_id", {R: append(RELATIONSHIPS, "2,Emil Berg,mother,Anna Berg")}, R, 7, "duplicate fact_id 2"),
    (
        "duplicate biography fact_id",
        {B: append(BIOGRAPHIES, "0,Carl Berg,birthyear,1928")},
        B,
        5,
        "duplicate fact_id 0",
    ),
    ("too few fields", {R: append(RELATIONSHIPS, "5,Emil Berg,mother")}, R, 7, "expected 4 fields, found 3"),
    (
        "too many fields",
        {R: replace_line(RELATIONSHIPS, 2, "0,Anna Berg,husband,Carl Berg,extra")},
        R,
        2,
        "expected 4 fields, found 5",
    ),
    ("people field count", {P: replace_line(PEOPLE, 4, "Dora Berg,female")}, P, 4, "expected 6 fields, found 2"),
    (
        "non-integer birthyear",
        {P: replace_line(PEOPLE, 3, "Carl Berg,male,19x8,Ohio,Baker,0")},
        P,
        3,
        "birthyear '19x8' of 'Carl Berg' is not an integer",
    ),
    (
        "non-integer generation",
        {P: replace_line(PEOPLE, 2, "Anna Berg,female,1930,Ohio,Teacher,first")},
        P,
        2,
        "generation 'first' of 'Anna Berg' is not an integer",
    ),
    (
        "non-integer biography birthyear",
        {B: replace_line(BIOGRAPHIES, 2, "0,Anna Berg,birthyear,early")},
        B,
        2,
        "birthyear 'early' is not an integer",
    ),
    ("empty biography value", {B: replace_line(BIOGRAPHIES, 3, "1,Carl Berg,job,")}, B, 3, "empty value"),
    ("empty name", {P: append(PEOPLE, ",male,1990,Ohio,Cook,2")}, P, 7, "empty name"),
    ("blank name", {P: append(PEOPLE, "   ,male,1990,Ohio,Cook,2")}, P, 7, "empty name"),
    (
        "control character in name",
        {P: append(PEOPLE, "Ivo\x07Lund,male,1990,Ohio,Cook,2")},
        P,
        7,
        "contains a control character",
    ),
    ("tab in name", {P: append(PEOPLE, "Ivo\tLund,male,1990,Ohio,Cook,2")}, P, 7, "contains a control character"),
    ("duplicate person", {P: append(PEOPLE, "Carl Berg,male,1928,Ohio,Baker,0")}, P, 7, "duplicate person 'Carl Berg'"),
]


@pytest.fixture
def make_kb(tmp_path):
    """Write BASE with some files replaced; return the KB directory."""

    def make(changes: dict, name: str = "kb") -> Path:
        return write_kb(tmp_path / name, {**BASE, **changes})

    return make


def test_base_kb_is_valid(make_kb):
    kb = load_kb(make_kb({}))
    assert len(kb.people) == 5
    assert [f.fact_id for f in kb.relationships] == [0, 1, 2, 3, 4]
    assert kb.relationship(3).triple == ("Emil Berg", "sister", "Dora Berg")
    assert [b.attribute for b in kb.biographies] == ["birthyear", "job", "birthplace"]
    assert kb.people["Carl Berg"].birthyear == 1928 and kb.people["Fiona Lund"].generation == 1


@pytest.mark.parametrize(
    "changes",
    [
        {B: None},  # biographies.csv is optional
        {P: PEOPLE.replace("\n", "\r\n"), R: RELATIONSHIPS.replace("\n", "\r\n")},  # CRLF line endings
        {P: "\ufeff" + PEOPLE},  # UTF-8 byte order mark
        {R: RELATIONSHIPS + "\n\n"},  # trailing blank lines
        {
            P: "gender,name\n" + "".join(f"{ln.split(',')[1]},{ln.split(',')[0]}\n" for ln in PEOPLE.splitlines()[1:])
        },  # only required columns, other order
        {
            R: "relation,object,subject,fact_id\n"
            + "".join("{2},{3},{1},{0}\n".format(*ln.split(",")) for ln in RELATIONSHIPS.splitlines()[1:])
        },
        {R: RELATIONSHIPS.replace(",", " , ")},  # spaces around fields are stripped
    ],
    ids=["no biographies", "crlf", "bom", "blank lines", "people minimal columns", "columns reordered", "spaces"],
)
def test_valid_variants_load(make_kb, changes):
    kb = load_kb(make_kb(changes))
    assert sorted(f.triple for f in kb.relationships) == sorted(
        tuple(x.strip() for x in ln.split(",")[1:]) for ln in RELATIONSHIPS.splitlines()[1:]
    )
    assert set(kb.people) == {"Anna Berg", "Carl Berg", "Dora Berg", "Emil Berg", "Fiona Lund"}
    assert kb.gender("Fiona Lund") == "female" and kb.gender("Emil Berg") == "male"


def _expected_where(root: Path, fname: str, line: int | None) -> str:
    return f"{root / fname}" + ("" if line is None else f":{line}") + ": "


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_malformed_kb(make_kb, case):
    _id, changes, fname, line, fragment = case
    root = make_kb(changes)

    # library: KBError with file, line and message; str(error) = "file:line: message ..."
    with pytest.raises(KBError) as info:
        load_kb(root)
    err = info.value
    assert isinstance(err, InputError)
    first = err.problems[0]
    assert Path(first.path) == root / fname
    assert first.line == line
    assert fragment in first.message
    assert str(first) == _expected_where(root, fname, line) + first.message
    assert str(err).startswith(_expected_where(root, fname, line) + first.message)
    assert "\n" not in str(err)

    # CLI: exit 2, one line on stderr, no traceback
    proc = subprocess.run(
        [sys.executable, "-m", "dukb.cli.main", "closure", "--kb", str(root)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("dukb: error: " + _expected_where(root, fname, line))
    assert fragment in lines[0]


def test_message_counts_further_problems(make_kb):
    root = make_kb({R: append(append(RELATIONSHIPS, "5,Carl Berg,brother,Carl Berg"), "6,Emil Berg,papa,Anna Berg")})
    with pytest.raises(KBError) as info:
        load_kb(root)
    assert [(p.line, p.path) for p in info.value.problems] == [(7, str(root / R)), (8, str(root / R))]
    assert "(and 1 more problem;" in str(info.value)


def test_validate_lists_every_problem(make_kb):
    root = make_kb(
        {
            P: append(replace_line(PEOPLE, 3, "Carl Berg,male,19x8,Ohio,Baker,0"), "Carl Berg,male,1928,Ohio,Baker,0"),
            R: append(replace_line(RELATIONSHIPS, 4, "2,Dora Berg,papa,Carl Berg"), "5,Emil Berg,brother,Dora Berg"),
            B: replace_line(BIOGRAPHIES, 3, "1,Carl Berg,hobby,Chess"),
        }
    )
    expected = [
        (P, 3, "birthyear '19x8' of 'Carl Berg' is not an integer"),
        (P, 7, "duplicate person 'Carl Berg'"),
        (R, 4, "unknown relation 'papa'"),
        (R, 7, "the object of 'brother' must be male"),
        (B, 3, "unknown attribute 'hobby'"),
    ]
    with pytest.raises(KBError) as info:
        load_kb(root)
    got = [(Path(p.path).name, p.line, p.message) for p in info.value.problems]
    assert len(got) == len(expected)
    for (f, ln, msg), (ef, eln, frag) in zip(got, expected):
        assert (f, ln) == (ef, eln) and frag in msg

    proc = subprocess.run(
        [sys.executable, "-m", "dukb.cli.main", "validate", "--kb", str(root)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == len(expected) + 1
    for text, (ef, eln, frag) in zip(lines, expected):
        assert text.startswith("dukb: error: " + _expected_where(root, ef, eln)) and frag in text
    assert lines[-1].startswith("dukb: error: 5 problems")


def test_validate_ok(make_kb):
    proc = subprocess.run(
        [sys.executable, "-m", "dukb.cli.main", "validate", "--kb", str(make_kb({}))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "5 people, 5 relationship facts, 3 biography facts" in proc.stdout


def test_missing_directory(tmp_path):
    with pytest.raises(InputError) as info:
        load_kb(tmp_path / "nowhere")
    assert str(tmp_path / "nowhere") in str(info.value)
    (tmp_path / "afile").write_text("x")
    with pytest.raises(InputError, match="must be a directory"):
        load_kb(tmp_path / "afile")


def test_bad_gender_is_one_problem(make_kb):
    root = make_kb({P: replace_line(PEOPLE, 4, "Dora Berg,woman,1955,Texas,Nurse,1")})  # Dora is in 3 facts
    with pytest.raises(KBError) as info:
        load_kb(root)
    assert [(Path(p.path).name, p.line) for p in info.value.problems] == [(P, 4)]
