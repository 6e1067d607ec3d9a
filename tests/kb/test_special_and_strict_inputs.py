"""Hardening of every user input: bounded reads, strict integers, bare quotes, `dukb validate` listing every problem,
targets reported at their line, `mdus --seeds` refused where it does nothing, a linear `import-edu-relat`.

- a FIFO, a symbolic link to ``/dev/zero`` or ``/dev/urandom``, or a folder in place of each kind of input (KB CSVs,
  ``--targets-file``, ``--retained``, the ``.pt`` files of ``--retained-dir``, a probe file) gives one error line
  within seconds (never a hang, never a MemoryError), and a file over the size limit is refused before it is read;
- every integer of an input (people.csv birthyear and generation, fact_ids, a biography birthyear, targets and
  retained ids, probe ids) is ``-?[0-9]+`` in ASCII of at most 18 digits: each spelling Python's ``int()`` also
  accepts (``19_21``, ``+10``, full-width or other non-ASCII digits, 19 digits) is an error at its file and line;
- a quote inside a field that is not quoted (``ab"c``) is an error at the record's line (RFC 4180);
- ``dukb validate`` lists the problems of every file, one line each, then a count;
- ``dukb import-edu-relat`` checks 200,001 names in linear time and refuses absurd integers with the file named.

Every CLI case: exit code 2, exactly one stderr line starting ``dukb: error: `` (validate: one per problem and a
count), no traceback. The generators here (special files, lenient spellings, quoted and unquoted cells, pickled
benchmark graphs) are independent of those in kb/test_input_fuzzing.py.
"""

from __future__ import annotations

import csv
import io
import os
import pickle
import shutil
import signal
import sys
import tempfile
import time
import zipfile
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from input_checks import assert_one_line_error, error_lines, run_main

import dukb.kb.csvfile as csvfile
import dukb.kb.ptfile as ptfile
from conftest import patch_everywhere
from dukb import InputError
from dukb.kb import KBError, load_kb, resolve_kb_path
from dukb.kb.csvfile import MAX_INT_DIGITS, parse_csv, strict_int
from dukb.kb.probe_files import read_probes

#: seconds a refusal may take: a guard against a hang, not a speed goal (a quadratic import of 200,001 names would
#: take hours; a loaded CI machine may take several seconds for what takes one here)
HANG = 120

DEMO = resolve_kb_path("demo")
KB_FILES = ("people.csv", "relationships.csv", "biographies.csv")
SPECIAL = ("fifo", "/dev/zero", "/dev/urandom", "folder")
#: What the error says for each special file.
SPECIAL_SAYS = {
    "fifo": "not a regular file (a FIFO)",
    "/dev/zero": "not a regular file (a character device)",
    "/dev/urandom": "not a regular file (a character device)",
    "folder": "not a regular file (a directory)",
}
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


# ------------------------------------------------------------------------------------------------ helpers ------
@contextmanager
def deadline(seconds: int = 20):
    """Fail (TimeoutError) instead of hanging when the block runs longer than ``seconds`` (a blocking open of a
    FIFO is interrupted: the handler's exception ends the retried system call)."""

    def alarm(signum, frame):
        raise TimeoutError(f"still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def make_special(path: Path, kind: str) -> Path:
    """Put a special file of ``kind`` (see :data:`SPECIAL`) at ``path`` (replacing what is there)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    else:
        os.symlink(kind, path)
    return path


def copy_demo(dst: Path) -> Path:
    shutil.copytree(DEMO, dst)
    return dst


def demo_rel_ids() -> list[int]:
    return [f.fact_id for f in load_kb(DEMO).relationships]


def write_retained(path: Path, ids=None, first_id: str | None = None) -> Path:
    """A valid ``kind,fact_id,retained`` file for the demo KB; ``first_id`` replaces the first row's fact_id."""
    ids = demo_rel_ids() if ids is None else ids
    rows = [f"relationship,{i},{i % 2}" for i in ids]
    if first_id is not None:
        rows[0] = f"relationship,{first_id},{ids[0] % 2}"
    path.write_text("kind,fact_id,retained\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


def replace_cell(path: Path, line: int, column: str, value: str) -> None:
    """Set ``column`` of the record on (1-based) ``line`` of a simple CSV file (no quoted line breaks)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    header = lines[0].split(",")
    cells = list(csv.reader([lines[line - 1]]))[0]
    cells[header.index(column)] = value
    lines[line - 1] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def only_error(capsys, *args, fragments=()) -> str:
    """Run dukb in-process (within a deadline); assert the one-line error contract; return the line."""
    with deadline():
        rc, _, err = run_main(capsys, *args)
    return assert_one_line_error(rc, err, *fragments)


# ------------------------------------------------------------------------------------------ special files ------
@pytest.mark.parametrize("kind", SPECIAL)
@pytest.mark.parametrize("name", KB_FILES)
@pytest.mark.parametrize("command", ["validate", "closure", "mdus"])
def test_special_file_as_kb_csv(tmp_path, capsys, kind, name, command):
    kb = copy_demo(tmp_path / "kb")
    make_special(kb / name, kind)
    args = {"validate": ["validate"], "closure": ["closure"], "mdus": ["mdus", "--target-id", 1]}[command]
    t0 = time.monotonic()
    line = only_error(capsys, *args, "--kb", kb, fragments=(f"{kb / name}: ", SPECIAL_SAYS[kind]))
    assert time.monotonic() - t0 < HANG, line


@pytest.mark.parametrize("kind", SPECIAL)
def test_special_file_as_targets_file(tmp_path, capsys, kind):
    targets = make_special(tmp_path / "targets.txt", kind)
    only_error(
        capsys, "mdus", "--kb", "demo", "--targets-file", targets, fragments=(f"{targets}: ", SPECIAL_SAYS[kind])
    )


@pytest.mark.parametrize("kind", SPECIAL)
def test_special_file_as_retained_file(tmp_path, capsys, kind):
    retained = make_special(tmp_path / "retained.csv", kind)
    only_error(
        capsys,
        "recall",
        "--kb",
        "demo",
        "--target-id",
        1,
        "--retained",
        retained,
        fragments=(f"{retained}: ", SPECIAL_SAYS[kind]),
    )


@pytest.mark.parametrize("kind", SPECIAL)
@pytest.mark.parametrize("name", ["relationships_correct.pt", "biographies_correct.pt"])
def test_special_file_as_retained_pt(tmp_path, capsys, kind, name):
    rd = tmp_path / "rd"
    rd.mkdir()
    n = len(demo_rel_ids())
    write_pt(rd / "relationships_correct.pt", pickle.dumps([True] * n, protocol=2))
    make_special(rd / name, kind)
    only_error(
        capsys,
        "recall",
        "--kb",
        "demo",
        "--target-id",
        1,
        "--retained-dir",
        rd,
        fragments=(f"{rd / name}: ", SPECIAL_SAYS[kind]),
    )


@pytest.mark.parametrize("kind", SPECIAL)
def test_special_file_as_probe_file_and_benchmark_pickle(tmp_path, kind):
    path = make_special(tmp_path / "probes.csv", kind)
    with deadline(), pytest.raises(InputError, match="not a regular file") as info:
        read_probes(path)
    assert info.value.path == str(path)
    src = tmp_path / "src"
    src.mkdir()
    make_special(src / "family-200-graph.pt", kind)
    with deadline():
        from dukb.cli.main import main

        assert main(["import-edu-relat", str(src), str(tmp_path / "out")]) == 2


def test_fifo_in_a_subprocess_returns(tmp_path):
    """The console script itself (not only the in-process call) returns at once on a FIFO."""
    import subprocess

    kb = copy_demo(tmp_path / "kb")
    make_special(kb / "relationships.csv", "fifo")
    proc = subprocess.run(
        [sys.executable, "-m", "dukb.cli.main", "validate", "--kb", str(kb)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.splitlines() == [f"dukb: error: {kb / 'relationships.csv'}: not a regular file (a FIFO)"]


# ------------------------------------------------------------------------------------------------ oversize ------
def test_oversize_inputs_refused(tmp_path, capsys, monkeypatch):
    """With the limit just above the demo KB's largest file, each larger input is refused before it is read."""
    limit = max((DEMO / f).stat().st_size for f in KB_FILES) + 1
    pad = "x" * limit
    targets = tmp_path / "targets.txt"
    targets.write_text(f"# {pad}\n1\n", encoding="utf-8")
    retained = tmp_path / "retained.csv"
    retained.write_text(
        "kind,fact_id,retained,note\n" + "".join(f"relationship,{i},1,{pad}\n" for i in demo_rel_ids()),
        encoding="utf-8",
    )
    rd = tmp_path / "rd"
    rd.mkdir()
    pt = write_pt(rd / "relationships_correct.pt", pickle.dumps([True] * len(demo_rel_ids()), protocol=2))
    with zipfile.ZipFile(pt, "a", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr("archive/padding", os.urandom(limit))
    for path, args in [
        (targets, ["mdus", "--kb", "demo", "--targets-file", targets]),
        (retained, ["recall", "--kb", "demo", "--target-id", 1, "--retained", retained]),
        (pt, ["recall", "--kb", "demo", "--target-id", 1, "--retained-dir", rd]),
    ]:
        patch_everywhere(monkeypatch, csvfile, "MAX_INPUT_BYTES", 10**8)
        assert run_main(capsys, *args)[0] == 0  # within the default limit the input is good
        patch_everywhere(monkeypatch, csvfile, "MAX_INPUT_BYTES", limit)
        only_error(
            capsys, *args, fragments=(f"{path}: too large: {path.stat().st_size:,} bytes", f"is {limit:,} bytes)")
        )
    kb = copy_demo(tmp_path / "kb")
    with open(kb / "people.csv", "a", encoding="utf-8") as fh:
        fh.write("\n" * limit)  # blank lines: a valid KB, but larger than the limit
    only_error(capsys, "validate", "--kb", kb, fragments=(f"{kb / 'people.csv'}: too large",))
    patch_everywhere(monkeypatch, csvfile, "MAX_INPUT_BYTES", 10**8)
    monkeypatch.setattr(ptfile, "MAX_PICKLE_BYTES", 10)
    only_error(
        capsys,
        "recall",
        "--kb",
        "demo",
        "--target-id",
        1,
        "--retained-dir",
        rd,
        fragments=(str(pt), "more than the limit of 10"),
    )


def test_oversize_pt_archive_refused(tmp_path, monkeypatch):
    pt = write_pt(tmp_path / "x.pt", pickle.dumps([True] * 100, protocol=2))
    patch_everywhere(monkeypatch, csvfile, "MAX_INPUT_BYTES", 50)
    with pytest.raises(InputError, match=r"too large: .* bytes \(the limit for a file is 50 bytes\)") as info:
        ptfile.load_bool_list(pt)
    assert info.value.path == str(pt)


# ------------------------------------------------------------------------------------------ strict integers ------
def _digits(n: int, zero: str) -> str:
    return "".join(chr(ord(zero) + int(d)) for d in str(n))


#: Spellings of an integer that Python's int() accepts but a file must not use: (name, function of n >= 10).
LENIENT = {
    "underscore": lambda n: str(n)[:1] + "_" + str(n)[1:],
    "plus sign": lambda n: "+" + str(n),
    "full-width digits": lambda n: _digits(n, "\uff10"),
    "Arabic-Indic digits": lambda n: _digits(n, "\u0660"),
    "Devanagari digits": lambda n: _digits(n, "\u0966"),
    "19 digits": lambda n: str(n).rjust(MAX_INT_DIGITS + 1, "1"),
    "minus underscore": lambda n: "-" + str(n)[:1] + "_" + str(n)[1:],
}


@st.composite
def lenient_ints(draw) -> str:
    n = draw(st.integers(10, 10**6))
    text = LENIENT[draw(st.sampled_from(sorted(LENIENT)))](n)
    int(text)  # the lenient reading accepts it (that is the defect this refuses)
    return text


#: Integer cells of the KB files: (file, line, column) on the demo KB. Line 2 of biographies.csv is a birthyear.
KB_INT_CELLS = [
    ("people.csv", 2, "birthyear"),
    ("people.csv", 3, "generation"),
    ("relationships.csv", 2, "fact_id"),
    ("biographies.csv", 4, "fact_id"),
    ("biographies.csv", 2, "value"),
]


def test_demo_cells_are_what_the_tests_assume():
    assert (DEMO / "biographies.csv").read_text(encoding="utf-8").splitlines()[1].split(",")[2] == "birthyear"


@SETTINGS
@given(cell=st.sampled_from(KB_INT_CELLS), text=lenient_ints())
def test_lenient_integer_in_kb_is_refused(cell, text):
    name, line, column = cell
    with tempfile.TemporaryDirectory() as tmp:
        kb = copy_demo(Path(tmp) / "kb")
        replace_cell(kb / name, line, column, text)
        with pytest.raises(KBError) as info:
            load_kb(kb)
    (p,) = info.value.problems
    assert (Path(p.path).name, p.line) == (name, line)
    assert "is not an integer" in p.message or f"more than the {MAX_INT_DIGITS} allowed" in p.message


@SETTINGS
@given(n=st.integers(-(10**18) + 1, 10**18 - 1), zeros=st.integers(0, 2))
def test_strict_int_reads_what_the_file_shows(n, zeros):
    text = ("-" if n < 0 else "") + "0" * zeros + str(abs(n))
    digits = len(text.lstrip("-"))
    assert strict_int(text) == (n if digits <= MAX_INT_DIGITS else None)


@pytest.mark.parametrize("spelling", sorted(LENIENT))
@pytest.mark.parametrize("cell", KB_INT_CELLS, ids=lambda c: f"{c[0]}:{c[2]}")
def test_lenient_integer_in_kb_cli(tmp_path, capsys, cell, spelling):
    name, line, column = cell
    kb = copy_demo(tmp_path / "kb")
    replace_cell(kb / name, line, column, LENIENT[spelling](1921))
    only_error(capsys, "validate", "--kb", kb, fragments=(f"{kb / name}:{line}: ",))


@pytest.mark.parametrize("spelling", sorted(LENIENT))
def test_lenient_integer_in_targets_file(tmp_path, capsys, spelling):
    targets = tmp_path / "targets.txt"
    targets.write_text(f"# targets\n1\n{LENIENT[spelling](12)}\n", encoding="utf-8")
    only_error(
        capsys, "mdus", "--kb", "demo", "--targets-file", targets, fragments=(f"{targets}:3: ", "is not a fact_id")
    )


@pytest.mark.parametrize("spelling", sorted(LENIENT))
def test_lenient_integer_in_retained_file(tmp_path, capsys, spelling):
    first = demo_rel_ids()[0]
    retained = write_retained(tmp_path / "retained.csv", first_id=LENIENT[spelling](10 + first))
    only_error(
        capsys,
        "recall",
        "--kb",
        "demo",
        "--target-id",
        1,
        "--retained",
        retained,
        fragments=(f"{retained}:2: ", "fact_id"),
    )


@pytest.mark.parametrize("spelling", sorted(LENIENT))
def test_lenient_integer_in_probe_files(tmp_path, spelling):
    text = LENIENT[spelling](12)
    probes = tmp_path / "p.csv"
    probes.write_text(
        "kind,fact_kind,fact_id,question,answer,match\n"
        f"qa,relationship,3,Who?,Ann,substring\nqa,relationship,{text},Who?,Ann,substring\n",
        encoding="utf-8",
    )
    with pytest.raises(InputError, match="fact_id") as info:
        read_probes(probes)
    assert (info.value.path, info.value.line) == (str(probes), 3)
    jsonl = tmp_path / "p.jsonl"
    for bad in ['"12"', "12.0", "true", "1" * 19]:
        jsonl.write_text(
            '{"kind": "qa", "fact_kind": "relationship", "fact_id": 3, "question": "Who?", "answer": "Ann"}\n'
            f'{{"kind": "qa", "fact_kind": "relationship", "fact_id": {bad}, "question": "Who?", '
            '"answer": "Ann"}\n',
            encoding="utf-8",
        )
        with pytest.raises(InputError, match="fact_id") as info:
            read_probes(jsonl)
        assert (info.value.path, info.value.line) == (str(jsonl), 2)


def test_strict_integers_still_accept_plain_numerals(tmp_path, capsys):
    kb = copy_demo(tmp_path / "kb")
    replace_cell(kb / "people.csv", 2, "birthyear", "01921")  # leading zeros are digits
    replace_cell(kb / "relationships.csv", 2, "fact_id", "0000")
    assert load_kb(kb).people["George Hale"].birthyear == 1921
    targets = tmp_path / "t.txt"
    targets.write_text("1  # a comment\n\t2\n", encoding="utf-8")
    rc, out, _ = run_main(capsys, "mdus", "--kb", "demo", "--targets-file", targets, "--max-sets", 2)
    assert rc == 0 and '"fact_id": 2' in out


# ------------------------------------------------------------------------------------------------ targets ------
def test_unknown_target_id_named_at_its_line(tmp_path, capsys):
    targets = tmp_path / "targets.txt"
    targets.write_text("# ids\n1\n\n999  # not in the KB\n2\n", encoding="utf-8")
    only_error(
        capsys,
        "mdus",
        "--kb",
        "demo",
        "--targets-file",
        targets,
        fragments=(f"{targets}:4: ", "no relationship fact has fact_id 999"),
    )


def test_mdus_refuses_seeds_without_random(capsys):
    for method in ("exact", "minimum"):
        only_error(
            capsys,
            "mdus",
            "--kb",
            "demo",
            "--target-id",
            1,
            "--method",
            method,
            "--seeds",
            5,
            fragments=("--seeds applies only to --method random",),
        )
    rc, out, _ = run_main(capsys, "mdus", "--kb", "demo", "--target-id", 1, "--seeds", 100)  # the default
    assert rc == 0 and '"targets"' in out
    rc, out, _ = run_main(capsys, "mdus", "--kb", "demo", "--target-id", 1, "--method", "random", "--seeds", 5)
    assert rc == 0 and '"seeds": 5' in out


# ------------------------------------------------------------------------------------------------ bare quote ------
CELL = st.text(st.sampled_from('ab ,"\u00e9x'), max_size=8)


@SETTINGS
@given(rows=st.lists(st.lists(CELL, min_size=2, max_size=2), min_size=1, max_size=6))
def test_quoted_cells_round_trip(rows):
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([["a", "b"], *rows])
    table = parse_csv(buf.getvalue(), "f.csv", ("a", "b"), strip=False)
    kept = [r for r in rows if "".join(r).strip(" ")]
    assert [[d["a"], d["b"]] for _, d in table.rows] == kept


@SETTINGS
@given(
    rows=st.lists(st.lists(st.text("abc xyz", min_size=1, max_size=6), min_size=2, max_size=2), min_size=1, max_size=6),
    data=st.data(),
)
def test_bare_quote_refused_at_its_line(rows, data):
    k = data.draw(st.integers(0, len(rows) - 1))
    col = data.draw(st.integers(0, 1))
    cell = rows[k][col]
    at = data.draw(st.integers(1, len(cell)))  # after at least one character: the field does not start with a quote
    lines = ["a,b"] + [",".join(r) for r in rows]
    bad = list(rows[k])
    bad[col] = cell[:at] + '"' + cell[at:]
    lines[k + 1] = ",".join(bad)
    text = "\n".join(lines) + "\n"
    with pytest.raises(InputError, match="bare quote") as info:
        parse_csv(text, "f.csv", ("a", "b"))
    assert info.value.line == k + 2
    problems = []
    table = parse_csv(text, "f.csv", ("a", "b"), problems=problems)
    # the other rows are kept, except those of nothing but spaces and commas (blank lines, skipped by design)
    kept = [r for i, r in enumerate(rows) if i != k and "".join(r).strip(" ")]
    assert [p.line for p in problems] == [k + 2] and len(table.rows) == len(kept)


@pytest.mark.parametrize("name,line", [("people.csv", 4), ("relationships.csv", 3), ("biographies.csv", 5)])
def test_bare_quote_in_kb_file(tmp_path, capsys, name, line):
    kb = copy_demo(tmp_path / "kb")
    column = {"people.csv": "job", "relationships.csv": "subject", "biographies.csv": "subject"}[name]
    lines = (kb / name).read_text(encoding="utf-8").splitlines()
    cells = lines[line - 1].split(",")
    header = lines[0].split(",")
    cell = cells[header.index(column)]
    cells[header.index(column)] = cell[:1] + '"' + cell[1:]
    lines[line - 1] = ",".join(cells)
    (kb / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    only_error(capsys, "validate", "--kb", kb, fragments=(f"{kb / name}:{line}: bare quote",))
    only_error(capsys, "closure", "--kb", kb, fragments=(f"{kb / name}:{line}: bare quote",))


def test_bare_quote_in_header_and_retained(tmp_path, capsys):
    kb = copy_demo(tmp_path / "kb")
    text = (kb / "relationships.csv").read_text(encoding="utf-8")
    (kb / "relationships.csv").write_text(text.replace("subject", 'sub"ject', 1), encoding="utf-8")
    only_error(capsys, "validate", "--kb", kb, fragments=(f"{kb / 'relationships.csv'}:1: bare quote",))
    retained = write_retained(tmp_path / "retained.csv")
    lines = retained.read_text(encoding="utf-8").splitlines()
    lines[3] = lines[3].replace("relationship", 'relation"ship')
    retained.write_text("\n".join(lines) + "\n", encoding="utf-8")
    only_error(
        capsys,
        "recall",
        "--kb",
        "demo",
        "--target-id",
        1,
        "--retained",
        retained,
        fragments=(f"{retained}:4: bare quote",),
    )


# ------------------------------------------------------------------------------------- validate lists all ------
def _validate_lines(capsys, kb: Path) -> list[str]:
    with deadline():
        rc, _, err = run_main(capsys, "validate", "--kb", kb)
    return error_lines(rc, err, validate=True)


def test_validate_lists_problems_of_every_file(tmp_path, capsys):
    kb = copy_demo(tmp_path / "kb")
    replace_cell(kb / "people.csv", 3, "birthyear", "19_24")
    rel = (kb / "relationships.csv").read_text(encoding="utf-8").splitlines()
    rel[4] = rel[4].replace(",", ',"', 1)  # an unterminated quote: relationships.csv cannot be read as a whole
    (kb / "relationships.csv").write_text("\n".join(rel) + "\n", encoding="utf-8")
    replace_cell(kb / "biographies.csv", 6, "fact_id", "+5")
    bio = (kb / "biographies.csv").read_text(encoding="utf-8").splitlines()
    bio[3] = bio[3].replace(" ", ' "', 1)  # a bare quote
    bio.append("99,Nobody Here,job,Cook")
    bio.append("100,George Hale,job")
    (kb / "biographies.csv").write_text("\n".join(bio) + "\n", encoding="utf-8")
    lines = _validate_lines(capsys, kb)
    got = [ln.removeprefix("dukb: error: ") for ln in lines[:-1]]
    expected = [
        (kb / "people.csv", 3, "birthyear '19_24' of "),
        (kb / "relationships.csv", 5, "unterminated quote"),
        (kb / "biographies.csv", 4, "bare quote"),
        (kb / "biographies.csv", 6, "fact_id '+5' is not"),
        (kb / "biographies.csv", 16, "person 'Nobody Here' is not in people.csv"),
        (kb / "biographies.csv", 17, "expected 4 fields, found 3"),
    ]
    assert len(got) == len(expected), lines
    for g, (path, line, fragment) in zip(got, expected):
        assert g.startswith(f"{path}:{line}: ") and fragment in g, (g, path, line, fragment)
    assert lines[-1] == f"dukb: error: {len(expected)} problems in {kb}"
    rc, _, err = run_main(capsys, "closure", "--kb", kb)
    assert rc == 2 and err.startswith(lines[0])  # closure names validate's first problem


def test_validate_without_people_does_not_blame_every_fact(tmp_path, capsys):
    kb = copy_demo(tmp_path / "kb")
    make_special(kb / "people.csv", "fifo")
    replace_cell(kb / "relationships.csv", 3, "fact_id", "２")
    replace_cell(kb / "biographies.csv", 5, "attribute", "hobby")
    lines = _validate_lines(capsys, kb)
    assert len(lines) == 4, lines
    assert lines[0] == f"dukb: error: {kb / 'people.csv'}: not a regular file (a FIFO)"
    assert lines[1].startswith(f"dukb: error: {kb / 'relationships.csv'}:3: fact_id '２' is not an integer")
    assert lines[2].startswith(f"dukb: error: {kb / 'biographies.csv'}:5: unknown attribute 'hobby'")
    assert not any("is not in people.csv" in ln for ln in lines)


# ----------------------------------------------------------------------------------------- import-edu-relat ------
class Person:
    """Stands for the benchmark generator's ``__main__.Person`` while a graph is pickled (see :func:`main_person`)."""


Person.__module__, Person.__qualname__ = "__main__", "Person"


@pytest.fixture
def main_person(monkeypatch):
    """Make :class:`Person` picklable as ``__main__.Person``, the name the benchmark's pickles use."""
    monkeypatch.setattr(sys.modules["__main__"], "Person", Person, raising=False)
    return Person


def write_pt(path: Path, payload: bytes, folder: str = "archive") -> Path:
    """A torch.save-like zip archive holding ``payload`` as <folder>/data.pkl."""
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{folder}/data.pkl", payload)
        zf.writestr(f"{folder}/version", "3\n")
    return path


def person(**attrs) -> Person:
    p = Person()
    p.__dict__.update(
        {"name": 0, "gender": "male", "age": 1950, "birthplace": 0, "job": "Cook", "generation": 0, **attrs}
    )
    return p


def write_benchmark(src: Path, names, persons, edges=(), types=(), states=("Ohio", "Iowa")) -> Path:
    """The graph and states files of a benchmark folder (the import checks them before any other file)."""
    src.mkdir(parents=True, exist_ok=True)
    write_pt(
        src / "family-200-graph.pt",
        pickle.dumps((list(edges), list(types), list(names), list(persons)), protocol=2),
        "family-200-graph",
    )
    write_pt(src / "us_population_distribution", pickle.dumps({s: 1000 for s in states}, protocol=2), "states")
    return src


@pytest.mark.parametrize("duplicate", [True, False])
def test_import_many_names_is_linear(tmp_path, capsys, main_person, duplicate):
    n = 200_001
    names = [f"Person {i}" for i in range(n)]
    if duplicate:
        names[-1] = names[-2]  # found only at the end: list.count per name would take hours
    src = write_benchmark(tmp_path / "src", names, [person()] * n)  # one object, memoized: a small pickle
    t0 = time.monotonic()
    with deadline(HANG):
        line = only_error(
            capsys, "import-edu-relat", src, tmp_path / "out", fragments=(str(src / "family-200-graph.pt"),)
        )
    took = time.monotonic() - t0
    if duplicate:
        assert f"'Person {n - 2}' is used by more than one person (names {n - 2} and {n - 1})" in line
    else:
        assert "person 1 has name index 0, expected 1" in line
    assert took < HANG, took


HUGE = 10**5000


@pytest.mark.parametrize(
    "field,says",
    [
        ("age", "birth year of person 1 (B)"),
        ("generation", "generation of person 1 (B)"),
        ("birthplace", "birthplace of person 1 (B)"),
        ("name", "person 1's name index"),
        ("edge", "edge 0"),
        ("age-19", "birth year of person 1 (B)"),
    ],
)
def test_import_refuses_absurd_integers(tmp_path, capsys, main_person, field, says):
    value = 10**MAX_INT_DIGITS if field == "age-19" else HUGE
    people = [person(name=0), person(name=1, gender="female")]
    edges = [(0, 1)]
    if field == "edge":
        edges = [(0, value)]
    else:
        people[1].__dict__[field.split("-")[0]] = value
    src = write_benchmark(tmp_path / "src", ["A", "B"], people, edges, ["wife"])
    line = only_error(
        capsys,
        "import-edu-relat",
        src,
        tmp_path / "out",
        fragments=(str(src / "family-200-graph.pt"), says, f"more than {MAX_INT_DIGITS} digits"),
    )
    assert "Traceback" not in line and not (tmp_path / "out" / "people.csv").exists()


def test_import_refuses_absurd_age_in_the_benchmark(edu_relat_dir, tmp_path, capsys, main_person):
    """The benchmark's own graph with one age of 5,000 digits: one line naming the file and the person."""
    original = edu_relat_dir / "original"
    if not (original / "family-200-graph.pt").is_file():
        pytest.skip("EDU-RELAT original files not found")
    src = tmp_path / "src"
    shutil.copytree(original, src)
    edges, types, names, persons = ptfile.load_benchmark_pickle(src / "family-200-graph.pt", {"Person"})
    persons[7].__dict__["age"] = HUGE

    mine = {id(q): Person() for q in persons}  # the stand-ins as picklable __main__.Person objects

    def conv(x):
        if isinstance(x, ptfile.PickledPerson):
            return mine[id(x)]
        return [conv(v) for v in x] if isinstance(x, list) else x

    for q in persons:
        mine[id(q)].__dict__.update({k: conv(v) for k, v in q.__dict__.items()})
    buf = io.BytesIO()
    pickle.dump((edges, types, names, [mine[id(q)] for q in persons]), buf, protocol=2)
    write_pt(src / "family-200-graph.pt", buf.getvalue(), "family-200-graph")
    only_error(
        capsys,
        "import-edu-relat",
        src,
        tmp_path / "out",
        fragments=(str(src / "family-200-graph.pt"), f"birth year of person 7 ({names[7]})", "digits"),
    )
