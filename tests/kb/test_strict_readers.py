"""Issue 11 ("Integrity"): bad input never ends in a traceback, and nothing is silently dropped.

Each failure the issue measured on a fresh clone has a case here, run through the CLI entry point
(:func:`dukb.cli.main.main`, in-process) and checked against the contract of :mod:`input_checks`: exit code 2, one
line ``dukb: error: FILE[:LINE]: problem`` (``dukb validate``: problem lines, then one summary error line), no
traceback. The strict reader itself (:mod:`dukb.kb.csvfile`) is tested on its own below.

Permission cases run for real only when not root (root ignores ``chmod 000``); as root they are covered by a folder
in place of the file (which fails for root too) and by an ``open`` that raises PermissionError.
"""

from __future__ import annotations

import builtins
import io
import os
import pathlib
import pickle
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from input_checks import assert_one_line_error, error_lines, run_main

from dukb import InputError, one_line
from dukb.kb import KBError, load_kb, resolve_kb_path
from dukb.kb.csvfile import CONTROL_CATEGORIES, MAX_FIELD_CHARS, Problem, control_char, parse_csv, read_csv
from dukb.kb.ptfile import MAX_TUPLE_DEPTH, load_bool_list, short_repr
from dukb.kb.retained import Retained, write_retained_csv


def _chmod_000_denies() -> bool:
    """Whether chmod 000 stops this process reading a file: not as root (os.geteuid() == 0), which ignores it,
    unless root runs without CAP_DAC_OVERRIDE (e.g. ``setpriv --inh-caps=-all --bounding-set=-all``); probed."""
    import tempfile

    if hasattr(os, "geteuid") and os.geteuid() != 0:
        return True
    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / "probe"
        probe.write_text("x")
        probe.chmod(0)
        try:
            probe.read_text()
        except PermissionError:
            return True
        finally:
            probe.chmod(0o600)
    return False


CHMOD_DENIES = _chmod_000_denies()
DEMO = resolve_kb_path("demo")
NINA = '11,Nina Stone,birthplace,"Iowa state'  # the line: an unterminated quote


@pytest.fixture
def kb(tmp_path) -> Path:
    """A copy of the demo KB (11 people, 18 relationship and 14 biography facts)."""
    return Path(shutil.copytree(DEMO, tmp_path / "kb", ignore=shutil.ignore_patterns("__*")))


@pytest.fixture
def cli(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    return lambda *args: run_main(capsys, *args)


def insert_line(path: Path, line: int, text: str) -> None:
    """Insert ``text`` as line ``line`` (1-based) of a file, keeping its line ends (LF)."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines.insert(line - 1, text + "\n")
    path.write_text("".join(lines), encoding="utf-8", newline="")


def retained_csv(path: Path, kb_dir) -> Path:
    k = load_kb(kb_dir)
    write_retained_csv(
        Retained({f.fact_id: f.fact_id % 3 != 0 for f in k.relationships}, {f.fact_id: True for f in k.biographies}),
        path,
    )
    return path


@pytest.fixture
def deny(monkeypatch):
    """``deny(path)``: make ``open`` (builtins and io) and ``os.open`` (what :func:`dukb.kb.csvfile.open_regular`
    uses) raise PermissionError for that path, as chmod 000 does for a user who is not root."""
    denied: set[str] = set()
    real_open, real_os_open = builtins.open, os.open

    def check(file):
        if isinstance(file, (str, os.PathLike)) and os.path.abspath(os.fspath(file)) in denied:
            raise PermissionError(13, "Permission denied", os.fspath(file))

    def fake_open(file, *args, **kwargs):
        check(file)
        return real_open(file, *args, **kwargs)

    def fake_os_open(file, *args, **kwargs):
        check(file)
        return real_os_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", fake_open)
    monkeypatch.setattr(io, "open", fake_open)
    monkeypatch.setattr(os, "open", fake_os_open)
    return lambda path: denied.add(os.path.abspath(path))


# ------------------------------------------------------------------------------------------- KB CSV files ------
def test_demo_is_valid(cli):
    rc, out, _ = cli("validate", "--kb", DEMO)
    assert rc == 0 and "11 people, 18 relationship facts, 14 biography facts" in out


def test_unterminated_quote_is_not_swallowing_rows(cli, kb):
    """The issue's case: the quote opened on line 8 used to swallow the following rows (validate said ok)."""
    bio = kb / "biographies.csv"
    insert_line(bio, 8, NINA)
    rc, _, err = cli("validate", "--kb", kb)
    lines = error_lines(rc, err, validate=True)
    assert lines == [
        f"dukb: error: {bio}:8: unterminated quote: the record starting on this line runs to the end "
        f"of the file (line 16)"
    ]
    for command in (["closure"], ["mdus", "--target-id", "2"]):
        rc, out, err = cli(*command, "--kb", kb)
        assert out == ""
        assert_one_line_error(rc, err, f"dukb: error: {bio}:8: unterminated quote")


def test_quote_closed_later_is_a_syntax_error(cli, kb):
    bio = kb / "biographies.csv"
    insert_line(bio, 8, NINA)
    insert_line(bio, 12, '99,Owen Stone,job,"Architect"')  # its quote closes the one of line 8, then text follows
    rc, _, err = cli("closure", "--kb", kb)
    assert_one_line_error(rc, err, f"{bio}:8: malformed CSV record", "the record runs to line 12")


@pytest.mark.parametrize(
    "cell, code",
    [
        ('"Iowa\nstate"', "U+000A"),  # a quoted line break: how a lost quote shows
        ("Iowa\x0bstate", "U+000B"),
        ("Iowa\u2028state", "U+2028"),
        ("\ufeffIowa state", "U+FEFF"),
        ("Iowa\x7fstate", "U+007F"),
        ("Iowa\x85state", "U+0085"),
    ],
)
def test_control_character_in_a_cell(cli, kb, cell, code):
    bio = kb / "biographies.csv"
    insert_line(bio, 8, f"11,Nina Stone,birthplace,{cell}")
    rc, _, err = cli("validate", "--kb", kb)
    lines = error_lines(rc, err, validate=True)
    assert (
        len(lines) == 1
        and lines[0].startswith(f"dukb: error: {bio}:8: value ")
        and f"control character ({code})" in lines[0]
    )
    rc, _, err = cli("closure", "--kb", kb)
    assert_one_line_error(rc, err, f"{bio}:8: value", code)


def test_header_cell_with_a_newline_gives_one_line(cli, kb):
    rel = kb / "relationships.csv"
    text = rel.read_text(encoding="utf-8").split("\n", 1)[1]
    rel.write_text('fact_id,"sub\nject",relation,object\n' + text, encoding="utf-8", newline="")
    rc, _, err = cli("closure", "--kb", kb)
    assert_one_line_error(rc, err, f"{rel}:1: column name 'sub\\nject' contains a control character (U+000A)")


@pytest.mark.parametrize(
    "data, line, fragment",
    [
        (b"\x00", 5, "NUL byte"),
        ("Zo\u00eb".encode("latin-1"), 5, "not UTF-8 text: byte 0xeb"),
    ],
)
def test_binary_bytes_in_a_kb_file(cli, kb, data, line, fragment):
    people = kb / "people.csv"
    raw = people.read_bytes().split(b"\n")
    raw[line - 1] = raw[line - 1][:3] + data + raw[line - 1][3:]
    people.write_bytes(b"\n".join(raw))
    rc, _, err = cli("mdus", "--kb", kb, "--target-id", "2")
    assert_one_line_error(rc, err, f"{people}:{line}: {fragment}")


@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"])
def test_non_utf8_byte_offset_and_line(tmp_path, bom):
    path = tmp_path / "f.csv"
    path.write_bytes(bom + b"a,b\r\n1,2\r3,\xe94\n")
    with pytest.raises(InputError) as e:
        read_csv(path)
    assert e.value.line == 3
    assert e.value.message == f"not UTF-8 text: byte 0xe9 at offset {len(bom) + 11} (invalid continuation byte)"


def test_utf16_file_is_named_as_such(cli, kb):
    rel = kb / "relationships.csv"
    rel.write_bytes(rel.read_text(encoding="utf-8").encode("utf-16"))
    rc, _, err = cli("closure", "--kb", kb)
    assert_one_line_error(rc, err, f"{rel}:1: not UTF-8 text", "looks like UTF-16")


def test_over_long_field(cli, kb):
    bio = kb / "biographies.csv"
    insert_line(bio, 9, "11,Nina Stone,job," + "x" * (MAX_FIELD_CHARS + 1))
    rc, _, err = cli("closure", "--kb", kb)
    line = assert_one_line_error(rc, err, f"{bio}:9: ", f"longer than {MAX_FIELD_CHARS} characters")
    assert len(line) < 300


def test_duplicate_and_unnamed_columns(cli, kb):
    people = kb / "people.csv"
    text = people.read_text(encoding="utf-8")
    people.write_text(text.replace("name,gender,", "name,gender,gender,", 1), encoding="utf-8")
    rc, _, err = cli("closure", "--kb", kb)
    assert_one_line_error(rc, err, f"{people}:1: duplicate column gender")
    people.write_text(text.replace("name,gender,", "name,gender,,", 1), encoding="utf-8")
    rc, _, err = cli("closure", "--kb", kb)
    assert_one_line_error(rc, err, f"{people}:1: column 3 has no name")


def test_misspelt_optional_column_is_not_ignored(cli, kb):
    people = kb / "people.csv"
    people.write_text(people.read_text(encoding="utf-8").replace(",birthyear,", ",birthyaer,", 1), encoding="utf-8")
    rc, _, err = cli("closure", "--kb", kb)
    assert_one_line_error(rc, err, f"{people}:1: unknown column birthyaer (known: name, gender, birthyear, ")


@pytest.mark.parametrize("ending", ["\r\n", "\r"])
def test_crlf_and_cr_line_ends_load(kb, ending):
    for name in ("people.csv", "relationships.csv", "biographies.csv"):
        path = kb / name
        path.write_bytes(path.read_bytes().replace(b"\n", ending.encode()))
    k = load_kb(kb)
    assert (len(k.people), len(k.relationships), len(k.biographies)) == (11, 18, 14)


# ------------------------------------------------------------------------------------------------ OS errors ------
@pytest.mark.parametrize("name", ["people.csv", "relationships.csv", "biographies.csv"])
def test_folder_in_place_of_a_kb_file(cli, kb, name):
    """Fails for root too. biographies.csv is optional, but a folder of that name is not silently ignored."""
    (kb / name).unlink()
    (kb / name).mkdir()
    rc, _, err = cli("validate", "--kb", kb)
    lines = error_lines(rc, err, validate=True)
    assert lines[0] == f"dukb: error: {kb / name}: not a regular file (a directory)"
    for command in (["closure"], ["mdus", "--target-id", "2"]):
        rc, _, err = cli(*command, "--kb", kb)
        assert_one_line_error(rc, err, f"dukb: error: {kb / name}: not a regular file (a directory)")


@pytest.mark.parametrize("name", ["people.csv", "relationships.csv", "biographies.csv"])
def test_unreadable_kb_file_mocked(cli, kb, deny, name):
    deny(kb / name)
    rc, _, err = cli("validate", "--kb", kb)
    assert error_lines(rc, err, validate=True) == [f"dukb: error: {kb / name}: cannot read: Permission denied"]
    for command in (["closure"], ["mdus", "--target-id", "2"]):
        rc, _, err = cli(*command, "--kb", kb)
        assert_one_line_error(rc, err, f"dukb: error: {kb / name}: cannot read: Permission denied")


def test_kb_folder_that_cannot_be_searched_mocked(cli, kb, monkeypatch):
    """Path.exists raises PermissionError (Python 3.11) when a parent folder may not be searched."""
    real_stat = pathlib.Path.stat

    def stat(self, *args, **kwargs):
        if self == kb:
            raise PermissionError(13, "Permission denied", str(self))
        return real_stat(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "stat", stat)
    rc, _, err = cli("validate", "--kb", kb)
    assert_one_line_error(rc, err, f"dukb: error: {kb}: cannot read: Permission denied")


@pytest.mark.skipif(not CHMOD_DENIES, reason="running as root, which ignores chmod 000")
@pytest.mark.parametrize("what", ["people.csv", "relationships.csv", "folder"])
def test_unreadable_kb_chmod(cli, kb, what):
    target = kb if what == "folder" else kb / what
    target.chmod(0)
    try:
        for command in (["validate"], ["closure"], ["mdus", "--target-id", "2"]):
            rc, _, err = cli(*command, "--kb", kb)
            lines = error_lines(rc, err, validate=command == ["validate"])
            assert "cannot read: Permission denied" in lines[0]
    finally:
        target.chmod(0o755)


def test_last_resort_os_error(cli, monkeypatch):
    """An OSError that no reader caught still gives one line naming the file (cli.main's last resort)."""
    import dukb.cli.symbolic as symbolic

    def boom(*_args):
        raise PermissionError(13, "Permission denied", "/data/some\nfile.csv")

    monkeypatch.setattr(symbolic, "_load", boom)
    rc, _, err = cli("closure", "--kb", "demo")
    assert_one_line_error(rc, err, "dukb: error: /data/some\\nfile.csv: Permission denied")

    def no_name(*_args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(symbolic, "_load", no_name)
    rc, _, err = cli("closure", "--kb", "demo")
    assert_one_line_error(rc, err, "dukb: error: OSError: [Errno 28] No space left on device")


def test_targets_and_rules_files(cli, tmp_path):
    folder = tmp_path / "targets"
    folder.mkdir()
    rc, _, err = cli("mdus", "--kb", "demo", "--targets-file", folder)
    assert_one_line_error(rc, err, f"dukb: error: {folder}: not a regular file (a directory)")
    targets = tmp_path / "t.txt"
    targets.write_bytes(b"2\n3\n\xff\n")
    rc, _, err = cli("mdus", "--kb", "demo", "--targets-file", targets)
    assert_one_line_error(rc, err, f"{targets}:3: not UTF-8")
    rules = tmp_path / "r.lp"
    rules.write_bytes(b"holds(A,child,B) :- holds(B,father,A).\n\x00holds(A,x,B) :- holds(A,y,B).\n")
    rc, _, err = cli("closure", "--kb", "demo", "--rules", rules)
    assert_one_line_error(rc, err, f"{rules}:2: NUL byte")


def test_option_value_with_a_newline(cli):
    rc, _, err = cli("validate", "--kb", "no\nwhere")
    assert_one_line_error(rc, err, "no\\nwhere", "does not exist")


# -------------------------------------------------------------------------------------------- --retained ------
def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(ln + "\n" for ln in lines), encoding="utf-8", newline="")
    return path


@pytest.fixture
def retained(tmp_path) -> tuple[Path, list[str]]:
    path = retained_csv(tmp_path / "r.csv", DEMO)
    return path, path.read_text(encoding="utf-8").splitlines()


def recall(cli, path):
    return cli("recall", "--kb", "demo", "--target-id", "2", "--retained", path)


def test_retained_valid(cli, retained):
    rc, out, err = recall(cli, retained[0])
    assert rc == 0, err and '"recall"' in out


@pytest.mark.parametrize(
    "edit, line, fragment",
    [
        (lambda ls: [ls[0], ls[1] + ",0", *ls[2:]], 2, "expected 3 fields, found 4"),
        (lambda ls: [ls[0], *ls[1:5], ls[5].rsplit(",", 1)[0], *ls[6:]], 6, "expected 3 fields, found 2"),
        (lambda ls: [ls[0] + ",retained", *(x + ",0" for x in ls[1:])], 1, "duplicate column retained"),
        (lambda ls: [ls[0], *ls[1:4], 'relationship,"3,1', *ls[5:]], 5, "unterminated quote"),
        (lambda ls: [ls[0], *ls[1:4], "relationship,3," + "1" * (MAX_FIELD_CHARS + 5), *ls[5:]], 5, "longer than"),
        (lambda ls: [ls[0], *ls[1:4], "relationship,3,\x001", *ls[5:]], 5, "NUL byte"),
        (lambda ls: ['kind,"fact\nid",retained', *ls[1:]], 1, "column name 'fact\\nid' contains a control character"),
    ],
    ids=["extra field", "missing field", "duplicate column", "unterminated quote", "long field", "NUL", "header \\n"],
)
def test_retained_csv_strict(cli, retained, edit, line, fragment):
    path, lines = retained
    write_lines(path, edit(lines))
    rc, out, err = recall(cli, path)
    assert out == ""
    assert_one_line_error(rc, err, f"dukb: error: {path}:{line}: ", fragment)


def test_retained_non_utf8(cli, retained):
    path, lines = retained
    path.write_bytes("\n".join(lines[:7]).encode() + b"\nrelationship,\xff,1\n")
    rc, _, err = recall(cli, path)
    assert_one_line_error(rc, err, f"dukb: error: {path}:8: not UTF-8 text: byte 0xff")


def test_retained_folder_and_permission(cli, retained, deny, tmp_path):
    folder = tmp_path / "folder.csv"
    folder.mkdir()
    rc, _, err = recall(cli, folder)
    assert_one_line_error(rc, err, f"dukb: error: {folder}: not a regular file (a directory)")
    deny(retained[0])
    rc, _, err = recall(cli, retained[0])
    assert_one_line_error(rc, err, f"dukb: error: {retained[0]}: cannot read: Permission denied")


# -------------------------------------------------------------------------------------------- pickles ------
def write_pt(path: Path, payload: bytes) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("archive/data.pkl", payload)
        zf.writestr("archive/version", "3\n")
    return path


DEPTH = 100_000
DEEP_LIST = b"]" * DEPTH + b"a" * (DEPTH - 1)  # pickle opcodes: a list nested DEPTH deep, on the stack


def test_deeply_nested_pickle_nests_fine_in_python():
    """The payload really is DEPTH lists deep: plain repr() of it overflows the stack (what the messages did)."""
    obj = pickle.loads(b"\x80\x02" + DEEP_LIST + b".")
    with pytest.raises(RecursionError):
        repr(obj)
    assert short_repr(obj) == "[[[[[[[...]]]]]]]"
    assert short_repr(10**5000) == "<int of 16610 bits>"


@pytest.mark.parametrize(
    "payload, fragment",
    [
        (b"\x80\x02]" + DEEP_LIST + b"a.", "entry 0 is list [[[[[["),
        (b"\x80\x02]" + pickle.dumps(10**5000, protocol=2)[2:-1] + b"a.", "entry 0 is int <int of 16610 bits>"),
        (b"\x80\x02]" + b"N" + b"\x85" * (MAX_TUPLE_DEPTH + 1) + b"a.", "tuples nested more than 100 deep"),
    ],
    ids=["deep list", "huge int", "deep tuple"],
)
def test_retained_dir_hostile_pickles(cli, tmp_path, payload, fragment):
    rd = tmp_path / "rd"
    rd.mkdir()
    pt = write_pt(rd / "relationships_correct.pt", payload)
    rc, out, err = cli("recall", "--kb", "demo", "--target-id", "2", "--retained-dir", rd)
    assert out == ""
    assert_one_line_error(rc, err, f"dukb: error: {pt}: ", fragment)


def test_tuple_nested_a_million_deep_does_not_crash(tmp_path):
    """Hashing a tuple recurses in C without a guard: a dict key nested 10**6 deep used to kill the interpreter
    (segmentation fault, exit -11). Run in a subprocess so that a regression fails this test, not the session."""
    rd = tmp_path / "rd"
    rd.mkdir()
    pt = write_pt(rd / "relationships_correct.pt", b"\x80\x02}" + b"N" + b"\x85" * 10**6 + b"K\x01s.")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dukb.cli.main",
            "recall",
            "--kb",
            "demo",
            "--target-id",
            "2",
            "--retained-dir",
            str(rd),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert_one_line_error(proc.returncode, proc.stderr, f"dukb: error: {pt}: malformed pickle: tuples nested")


def test_import_edu_relat_deeply_nested_edge(cli, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    # (edges=[<DEPTH-deep list>], types=["father"], names=[], persons=[])
    graph = b"\x80\x02(]" + DEEP_LIST + b"a]X\x06\x00\x00\x00fathera]]t."
    pt = write_pt(src / "family-200-graph.pt", graph)
    rc, _, err = cli("import-edu-relat", src, tmp_path / "out")
    assert_one_line_error(rc, err, f"dukb: error: {pt}: edge 0 is [[[[", "expected a pair of person indices")


def test_retained_dir_os_errors(cli, tmp_path, deny):
    rd = tmp_path / "rd"
    (rd / "relationships_correct.pt").mkdir(parents=True)
    rc, _, err = cli("recall", "--kb", "demo", "--target-id", "2", "--retained-dir", rd)
    assert_one_line_error(rc, err, f"{rd / 'relationships_correct.pt'}: not a regular file (a directory)")
    pt = write_pt(tmp_path / "ok.pt", pickle.dumps([True]))
    deny(pt)
    with pytest.raises(InputError, match="cannot read: Permission denied"):
        load_bool_list(pt)


# ------------------------------------------------------------------------------------- the strict reader ------
def test_read_csv_reports_record_start_lines(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes(b'\xef\xbb\xbfa,b\r\n1,2\r\n\r\n  ,  \r\n3,4\r\n5,6,7\r\n8,"x\ny"\r\n9,10')
    problems: list[Problem] = []
    table = read_csv(path, ("a",), problems=problems)
    assert table.header == ("a", "b")
    assert table.rows == [(2, {"a": "1", "b": "2"}), (5, {"a": "3", "b": "4"}), (9, {"a": "9", "b": "10"})]
    assert [(p.line, p.message) for p in problems] == [
        (6, "expected 2 fields, found 3"),
        (7, "b 'x\\ny' contains a control character (U+000A)"),
    ]
    assert str(problems[1]) == f"{path}:7: b 'x\\ny' contains a control character (U+000A)"
    with pytest.raises(InputError, match="expected 2 fields") as e:
        read_csv(path)  # without a problems list the first record problem is raised
    assert e.value.line == 6


def test_parse_csv_multiline_only_when_asked():
    text = 'q,a\n"Who?\nA. x",x\n'
    assert parse_csv(text, "p.csv", multiline=True).rows == [(2, {"q": "Who?\nA. x", "a": "x"})]
    with pytest.raises(InputError, match="control character"):
        parse_csv(text, "p.csv")
    with pytest.raises(InputError, match="control character"):
        parse_csv('q,a\n"Who?\x07",x\n', "p.csv", multiline=True)


@pytest.mark.parametrize(
    "text, line, fragment",
    [
        ("", 1, "empty file"),
        ("\n1,2\n", 1, "line 1 is blank"),
        ('a,b\n1,2\n"', 3, "unterminated quote"),
        ('a,b\n1,"2"x\n', 2, "malformed CSV record"),
    ],
)
def test_parse_csv_file_errors(text, line, fragment):
    with pytest.raises(InputError, match=fragment) as e:
        parse_csv(text, "f.csv", problems=[])
    assert e.value.line == line


def test_control_char_is_exactly_the_control_categories():
    import sys
    import unicodedata

    want = [
        c for c in map(chr, range(sys.maxunicode + 1)) if c == "\ufeff" or unicodedata.category(c) in CONTROL_CATEGORIES
    ]
    assert [c for c in map(chr, range(sys.maxunicode + 1)) if control_char(c)] == want
    assert len(want) == 65 + 2 + 2048 + 1


def test_control_char_and_one_line():
    assert control_char("Zoë O'Brien-Hale, Jr.") is None
    assert [control_char(c) for c in "\t\r\n\x00\x1f\x7f\x85\u2028\u2029\ufeff"] == list(
        "\t\r\n\x00\x1f\x7f\x85\u2028\u2029\ufeff"
    )
    assert control_char("a\nb", allow="\n") is None
    text = one_line("a\nb\r\x00\u2028\udcff é 'q' \\")
    assert text == "a\\nb\\r\\x00\\u2028\\udcff é 'q' \\" and len(text.splitlines()) == 1
    assert str(InputError("bad\nvalue", "dir\n/f.csv", 3)) == "dir\\n/f.csv:3: bad\\nvalue"


def test_kb_error_lists_every_row_problem(kb):
    rel = kb / "relationships.csv"
    insert_line(rel, 3, "90,Leo Hale,father")
    insert_line(rel, 5, "91,Leo Hale,father,Henry Hale,x")
    with pytest.raises(KBError) as e:
        load_kb(kb)
    assert [(p.line, p.message) for p in e.value.problems] == [
        (3, "expected 4 fields, found 3"),
        (5, "expected 4 fields, found 5"),
    ]
