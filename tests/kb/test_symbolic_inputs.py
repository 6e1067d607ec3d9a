"""Reliability of the symbolic commands' inputs, caches and output files (issue 39).

- sizes of generate, mdus, recall, probes and restor have documented upper bounds, checked at parse time (one
  line, exit 2, within seconds; the bounds are in --help), and degenerate generator probabilities (--p-parents,
  --p-spouse, --p-children at 0 or 1, --observed 0) and --context 0 are refused;
- a targets file shares the KB files' limits (line length, size) and has at most MAX_TARGETS_LINES lines; a fact_id
  listed twice is refused at its line, and a target given twice on the command line is refused;
- a --target name must be a KB name exactly after one normalisation (ASCII spaces around a field dropped):
  quotes, a tab, U+2028 or a no-break space inside a name are refused, with the closest names suggested;
- every -o of the symbolic commands is written all or nothing (dukb.kb.io.atomic_output): a failed write
  (``ulimit -f``) leaves neither a truncated file nor a temporary one, and the file that was there stays as it was;
  an empty -o is refused;
- the cached built-in KB records its SHA-256 digests and is rebuilt (one note) when a file changed; a cached model
  file with another SHA-256 is fetched again or refused; --wheel must be a regular file, bounded, and its member's
  hash is checked while it is inflated under a size cap, before anything reaches the cache.

Every refusal: exit code 2, one stderr line ``dukb: error: ...``, no traceback. The hang cases run as subprocesses
under a timeout (a hang fails the test instead of blocking the suite).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from input_checks import assert_one_line_error, error_lines, run_main
from test_special_and_strict_inputs import deadline, make_special

from dukb import InputError
from dukb.cli.probes import MAX_CONTEXT, MAX_DOCS_PER_ENTITY
from dukb.cli.symbolic import MAX_TARGETS_LINES, read_targets_file
from dukb.kb import load_kb, resolve_kb_path
from dukb.kb.csvfile import MAX_FIELD_CHARS
from dukb.kb.generate import CACHE_MANIFEST, MAX_GENERATIONS, MAX_PEOPLE, default_generated_kb_dir, generate
from dukb.kb.io import atomic_output
from dukb.solver.closure import compute_closure
from dukb.solver.mdus import MAX_SEED, MAX_SEEDS, MIN_SEED, minimum_set, random_sets
from dukb.solver.targets import parse_target, resolve_target

DEMO = resolve_kb_path("demo")
HUGE = "999999999999999999"  # 18 digits: a strict integer, far above every bound
#: A KB fact of the demo KB ("George Hale is Martha Hale's husband") and its fact_id.
TARGET, TARGET_ID = "Martha Hale,husband,George Hale", 0


def run_cli_subprocess(
    *args, timeout: int = 90, shell_prefix: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    """``dukb ARGS`` as a console process (``python -m dukb.cli.main``) under a timeout; with ``shell_prefix`` the
    command runs under ``bash -c 'PREFIX; exec python -m dukb.cli.main ARGS'`` (e.g. ``ulimit -f 1``)."""
    cmd = [sys.executable, "-m", "dukb.cli.main", *map(str, args)]
    if shell_prefix is not None:
        import shlex

        cmd = ["bash", "-c", f"{shell_prefix}; exec {' '.join(map(shlex.quote, cmd))}"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd)


def one_error(proc: subprocess.CompletedProcess, *fragments: str) -> str:
    """Assert the error contract on a finished process; return its line."""
    return assert_one_line_error(proc.returncode, proc.stderr, *fragments)


def cli_error(capsys, *args, fragments=()) -> str:
    """``dukb ARGS`` in-process within a deadline; assert the one-line error; return the line."""
    with deadline(60):
        rc, _, err = run_main(capsys, *args)
    return assert_one_line_error(rc, err, *fragments)


# ------------------------------------------------------------------------------------------------ bounds -------
@pytest.mark.parametrize(
    "args, says",
    [
        (["generate", "--people", HUGE], f"less than or equal to {MAX_PEOPLE}"),
        (["generate", "--generations", HUGE], f"less than or equal to {MAX_GENERATIONS}"),
        (
            ["mdus", "--kb", "demo", "--target-id", "0", "--method", "random", "--seeds", HUGE],
            f"less than or equal to {MAX_SEEDS}",
        ),
        (
            ["probes", "--kb", "demo", "--corrupt", "0.2", "--docs-per-entity", HUGE],
            f"less than or equal to {MAX_DOCS_PER_ENTITY}",
        ),
    ],
)
def test_huge_sizes_refused_at_once_in_a_process(tmp_path, args, says):
    """The four sizes that used to hang: the console script refuses each in one line, well within the timeout."""
    if args[0] in ("generate", "probes"):
        args = [*args, "-o", tmp_path / "out"]
    proc = run_cli_subprocess(*args)
    one_error(proc, says, "see 'dukb ")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "args, says",
    [
        (["generate", "--people", "0"], "greater than or equal to 1"),
        (["generate", "--people", str(MAX_PEOPLE + 1)], f"less than or equal to {MAX_PEOPLE}"),
        (["generate", "--generations", "0"], "greater than or equal to 1"),
        (["generate", "--generations", str(MAX_GENERATIONS + 1)], f"less than or equal to {MAX_GENERATIONS}"),
        (["generate", "--p-children", "0"], "--p-children must lie strictly between 0 and 1"),
        (["generate", "--p-children", "1"], "--p-children must lie strictly between 0 and 1"),
        (["generate", "--p-parents", "1"], "--p-parents must lie strictly between 0 and 1"),
        (["generate", "--p-spouse", "0"], "--p-spouse must lie strictly between 0 and 1"),
        (["generate", "--p-children", "nan"], "--p-children"),
        (["generate", "--observed", "0"], "--observed must be in (0, 1]"),
        (["generate", "--observed", "nan"], "--observed"),
        (["mdus", "--kb", "demo", "--target-id", "0", "--method", "random", "--seeds", "0"], "--seeds"),
        (["mdus", "--kb", "demo", "--target-id", "0", "--method", "random", "--seeds", str(MAX_SEEDS + 1)], "--seeds"),
        (
            ["mdus", "--kb", "demo", "--target-id", "0", "--method", "minimum", "--seed", HUGE],
            "--seed must be a 32-bit",
        ),
        (["mdus", "--kb", "demo", "--target-id", "0", "--seed", str(MIN_SEED - 1)], "--seed must be a 32-bit"),
        (["recall", "--kb", "demo", "--target-id", "0", "--retained", "r.csv", "--seeds", HUGE], "--seeds"),
        (["probes", "--kb", "demo", "--corrupt", "0.2", "--context", "0"], "--context"),
        (["probes", "--kb", "demo", "--corrupt", "0.2", "--context", str(MAX_CONTEXT + 1)], "--context"),
        (["probes", "--kb", "demo", "--corrupt", "0.2", "--docs-per-entity", "0"], "--docs-per-entity"),
        (["restor", "--kb", "demo", "--docs-per-entity", HUGE], "--docs-per-entity"),
        (["restor", "--kb", "demo", "--docs-per-entity", "0"], "--docs-per-entity"),
    ],
)
def test_out_of_range_and_degenerate_values_refused(tmp_path, capsys, monkeypatch, args, says):
    monkeypatch.chdir(tmp_path)
    cli_error(capsys, *args, "-o", tmp_path / "out", fragments=(says,))
    assert not (tmp_path / "out").exists()


def test_bounds_are_in_the_help(capsys):
    import re

    for command, flag, bound in (
        ("generate", "--people", MAX_PEOPLE),
        ("generate", "--generations", MAX_GENERATIONS),
        ("mdus", "--seeds", MAX_SEEDS),
        ("recall", "--seeds", MAX_SEEDS),
        ("probes", "--context", MAX_CONTEXT),
        ("probes", "--docs-per-entity", MAX_DOCS_PER_ENTITY),
        ("restor", "--docs-per-entity", MAX_DOCS_PER_ENTITY),
    ):
        rc, out, _ = run_main(capsys, command, "--help")
        text = re.sub(r"[\s│]+", " ", out)
        assert rc == 0 and f"1 to {bound:,}" in text, (command, flag)
    rc, out, _ = run_main(capsys, "generate", "--help")
    text = re.sub(r"[\s│]+", " ", out)
    assert "(0, 1)" in text and "(0, 1]" in text  # the open intervals of the probabilities and of --observed


def test_the_bounds_themselves_are_accepted(tmp_path, capsys):
    rc, _, err = run_main(
        capsys,
        "generate",
        "--people",
        "12",
        "--generations",
        str(MAX_GENERATIONS),
        "--p-children",
        "0.999",
        "--observed",
        "1",
        "-o",
        tmp_path / "g",
    )
    assert rc == 0, err
    assert len(load_kb(tmp_path / "g").people) == 12
    rc, out, err = run_main(capsys, "mdus", "--kb", "demo", "--target-id", "0", "--method", "random", "--seeds", "1")
    assert rc == 0 and json.loads(out)["seeds"] == 1, err


def test_library_bounds_match_the_cli():
    with pytest.raises(InputError, match="people"):
        generate(MAX_PEOPLE + 1)
    with pytest.raises(InputError, match="generations"):
        generate(10, generations=MAX_GENERATIONS + 1)
    c = compute_closure(load_kb(DEMO))
    with pytest.raises(InputError, match="--seeds"):
        random_sets(c, [c.atom_of_fact(0)], n_seeds=MAX_SEEDS + 1)
    with pytest.raises(InputError, match="--seed must be in"):
        minimum_set(c, [c.atom_of_fact(0)], seed=MAX_SEED + 1)
    assert minimum_set(c, [c.atom_of_fact(0)], seed=MIN_SEED).sets  # the bounds themselves are CP-SAT seeds


INT_TEXT = st.sampled_from(["0", "-1", HUGE, "-" + HUGE, "1_0", "+1", "1.0", "nan", ""])
FLOAT_TEXT = st.sampled_from(["0", "1", "-0.1", "1.5", "nan", "inf", "-inf", "1e999", "1e-300", "0.5", "1_0", ""])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    people=st.one_of(st.integers(1, 25).map(str), INT_TEXT),
    generations=st.one_of(st.integers(1, 8).map(str), INT_TEXT),
    probs=st.dictionaries(
        st.sampled_from(
            [
                "--observed",
                "--p-parents",
                "--p-spouse",
                "--p-children",
                "--children-p",
                "--p-wife-surname",
                "--p-parent-birthplace",
            ]
        ),
        FLOAT_TEXT,
        max_size=3,
    ),
)
def test_generate_options_fuzzed(tmp_path, capsys, people, generations, probs):
    """Any value of generate's numeric options: exit 0 with a KB, or exit 2 with one line, within seconds."""
    args = ["generate", "--people", people, "--generations", generations, "-o", tmp_path / "g", "--force"]
    for flag, value in probs.items():
        args += [flag, value]
    with deadline(30):
        rc, _, err = run_main(capsys, *args)
    if rc == 0:
        assert len(load_kb(tmp_path / "g").people) == int(people)
    else:
        error_lines(rc, err)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    method=st.sampled_from(["exact", "minimum", "random"]),
    options=st.dictionaries(
        st.sampled_from(["--seeds", "--seed", "--max-sets", "--seconds"]),
        st.one_of(st.integers(1, 3).map(str), INT_TEXT, FLOAT_TEXT),
        max_size=3,
    ),
)
def test_mdus_options_fuzzed(capsys, method, options):
    """Any value of mdus's numeric options: exit 0 with sets, or exit 2 with one line, within seconds."""
    args = ["mdus", "--kb", "demo", "--target-id", "0", "--method", method]
    for flag, value in options.items():
        args += [flag, value]
    with deadline(30):
        rc, out, err = run_main(capsys, *args)
    if rc == 0:
        assert json.loads(out)["targets"][0]["sets"]
    else:
        error_lines(rc, err)


# ----------------------------------------------------------------------------------------------- targets -------
def test_a_repeated_id_is_refused_at_its_line(tmp_path, capsys):
    f = tmp_path / "t.txt"
    f.write_text("# targets\n0\n1\n\n0\n", encoding="utf-8")
    line = cli_error(
        capsys, "mdus", "--kb", "demo", "--targets-file", f, fragments=(f"{f}:5:", "fact_id 0", "first on line 2")
    )
    assert "once" in line
    with pytest.raises(InputError, match="listed again"):
        read_targets_file(f)


def test_two_million_repeats_refused_within_seconds(tmp_path):
    f = tmp_path / "t.txt"
    f.write_text("1\n" * 2_000_000, encoding="utf-8")
    proc = run_cli_subprocess("mdus", "--kb", "demo", "--targets-file", f, timeout=60)
    one_error(proc, str(f), "2,000,000 lines", f"{MAX_TARGETS_LINES:,}")


@pytest.mark.parametrize(
    "content, line",
    [
        ("1\n" + "2" * (MAX_FIELD_CHARS + 1) + "\n", 2),
        ("0\n# " + "x" * MAX_FIELD_CHARS + "\n", 2),  # a comment counts too
        (" " * 50_000_000 + "1\n", 1),
    ],
)
def test_huge_lines_refused_at_their_line(tmp_path, content, line):
    f = tmp_path / "t.txt"
    f.write_text(content, encoding="utf-8")
    proc = run_cli_subprocess("mdus", "--kb", "demo", "--targets-file", f, timeout=60)
    one_error(proc, f"{f}:{line}:", f"longer than the {MAX_FIELD_CHARS:,} allowed")


def test_a_line_at_the_limit_is_read(tmp_path):
    f = tmp_path / "t.txt"
    f.write_text("3" + " " * (MAX_FIELD_CHARS - 1) + "\n", encoding="utf-8")
    assert read_targets_file(f) == [3]


def test_targets_file_of_many_blank_lines_returns(tmp_path):
    f = tmp_path / "t.txt"
    f.write_text("\r\n" * (MAX_TARGETS_LINES + 1), encoding="utf-8")
    proc = run_cli_subprocess("mdus", "--kb", "demo", "--targets-file", f, timeout=60)
    one_error(proc, f"{MAX_TARGETS_LINES + 1:,} lines")


def test_a_target_given_twice_is_refused(capsys):
    cli_error(
        capsys,
        "mdus",
        "--kb",
        "demo",
        "--target-id",
        TARGET_ID,
        "--target",
        TARGET,
        fragments=("given twice", "Martha Hale, husband, George Hale"),
    )


@pytest.mark.parametrize(
    "target, fragments",
    [
        ('Martha "Hale,husband,George Hale', ["not of the form", "closest names: 'Martha Hale'"]),  # a bare quote
        ('Martha Hale,husband,George Hale"', ["not of the form", "'George Hale'"]),
        ('"Martha ""Hale",husband,George Hale', ["no person named 'Martha \"Hale'", "'Martha Hale'"]),
        ("Martha\tHale,husband,George Hale", ["no person named 'Martha\\tHale'", "'Martha Hale'", "U+0009"]),
        ("Martha\u2028Hale,husband,George Hale", ["'Martha\\u2028Hale'", "'Martha Hale'", "U+2028"]),
        ("Martha\u00a0Hale,husband,George Hale", ["no person named 'Martha\\xa0Hale'", "closest: 'Martha Hale'"]),
        ("\u00a0Martha Hale,husband,George Hale", ["no person named '\\xa0Martha Hale'", "'Martha Hale'"]),
        ("Martha Hale,husband,George Hale\u00a0", ["target object", "'George Hale'"]),
        ('"Martha Hale ",husband,George Hale', ["no person named 'Martha Hale '", "'Martha Hale'"]),
        ("martha hale,husband,George Hale", ["no person named 'martha hale'", "'Martha Hale'"]),
        ("Martha Hale,Husband,George Hale", ["unknown relation 'Husband'", "closest: husband"]),
        ("Martha Hale,husband\t,George Hale", ["unknown relation 'husband\\t'"]),
        ("Martha Hale,husband,George Hail", ["target object", "closest: 'George Hale'"]),
    ],
)
def test_target_names_must_match_exactly(capsys, target, fragments):
    cli_error(capsys, "mdus", "--kb", "demo", "--target", target, fragments=fragments)


@pytest.mark.parametrize(
    "target",
    [
        TARGET,
        f" {TARGET} ",
        "Martha Hale , husband ,George Hale",
        '"Martha Hale",husband,"George Hale"',
        ' "Martha Hale" ,  husband,George Hale',
    ],
)
def test_the_one_normalisation_ascii_spaces_around_a_field(capsys, target):
    rc, out, err = run_main(capsys, "mdus", "--kb", "demo", "--target", target)
    assert rc == 0, err
    (e,) = json.loads(out)["targets"]
    assert (e["subject"], e["relation"], e["object"], e["fact_id"]) == (
        "Martha Hale",
        "husband",
        "George Hale",
        TARGET_ID,
    )


NAME = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cc", "Zl", "Zp", "Cs"), exclude_characters="\ufeff"),
    min_size=1,
    max_size=10,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(a=NAME, b=NAME, spaces=st.booleans())
def test_any_name_quoted_resolves_to_itself(kb_builder, a, b, spaces):
    """Every name the KB accepts, written as an RFC 4180 quoted field, names exactly that person; the same text
    with a character added or removed names no one."""
    if a == b:
        return
    kb = kb_builder({a: "male", b: "female"}, [(b, "husband", a)])
    c = compute_closure(kb)
    pad = " " if spaces else ""

    def q(x: str) -> str:
        return f'{pad}"{x.replace(chr(34), 2 * chr(34))}"{pad}'

    assert parse_target(f"{q(b)},husband,{q(a)}") == (b, "husband", a)
    assert resolve_target(c, f"{q(b)},husband,{q(a)}") == c.atom_of_fact(0)
    for other in (a + "x", a[:-1] + "\u00a0" if len(a) > 1 else a + " "):
        if other in (a, b):
            continue
        with pytest.raises(InputError, match="no person named|not in the deductive closure"):
            resolve_target(c, f"{q(b)},husband,{q(other)}")


# ----------------------------------------------------------------------------------------------- outputs -------
def _assert_nothing_partial(folder: Path, name: str, before: bytes | None) -> None:
    path = folder / name
    if before is None:
        assert not path.exists()
    else:
        assert path.read_bytes() == before  # untouched
    assert not [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize(
    "command, kib",
    [
        (["closure", "--kb", "demo"], 1),
        (["closure", "--kb", "demo", "--format", "json"], 1),
        (["mdus", "--kb", "demo", "--targets-file", "targets.txt"], 1),
        (["probes", "--kb", "demo"], 1),
        (["recall", "--kb", "demo", "--target-id", "0", "--retained", "retained.csv"], 0),  # its output is < 1 KiB
    ],
)
@pytest.mark.parametrize("existing", [False, True])
def test_a_failed_write_leaves_no_partial_file(tmp_path, command, kib, existing):
    """``ulimit -f`` (1 KiB) stands in for a full disk: the command fails in one line, and the output is either
    absent or exactly what was there before; no temporary file stays."""
    (tmp_path / "targets.txt").write_text("".join(f"{i}\n" for i in range(6)), encoding="utf-8")
    ids = [f.fact_id for f in load_kb(DEMO).relationships]
    (tmp_path / "retained.csv").write_text(
        "kind,fact_id,retained\n" + "".join(f"relationship,{i},1\n" for i in ids), encoding="utf-8"
    )
    before = b"old content\n" if existing else None
    if existing:
        (tmp_path / "out.txt").write_bytes(before)
    args = command
    proc = run_cli_subprocess(*args, "-o", "out.txt", shell_prefix=f"ulimit -f {kib}", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    one_error(proc, "out.txt", "cannot write")
    _assert_nothing_partial(tmp_path, "out.txt", before)
    if existing:  # without the limit the same command replaces the file whole
        proc = run_cli_subprocess(*args, "-o", "out.txt", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert (tmp_path / "out.txt").stat().st_size > 1024 * kib and (tmp_path / "out.txt").read_bytes() != before


def test_generate_failed_write_leaves_no_partial_kb_file(tmp_path):
    """people.csv of 200 people is over 4 KiB, so the first file fails: none is left, whole or partial."""
    proc = run_cli_subprocess("generate", "--people", "200", "-o", "g", shell_prefix="ulimit -f 4", cwd=tmp_path)
    one_error(proc, "people.csv", "cannot write")
    assert list((tmp_path / "g").iterdir()) == []


@pytest.mark.parametrize(
    "args",
    [
        ["closure", "--kb", "demo"],
        ["mdus", "--kb", "demo", "--target-id", "0"],
        ["recall", "--kb", "demo", "--target-id", "0", "--retained", "x.csv"],
        ["probes", "--kb", "demo"],
        ["generate"],
    ],
)
@pytest.mark.parametrize("empty", ["", "  "])
def test_empty_output_refused(tmp_path, capsys, monkeypatch, args, empty):
    monkeypatch.chdir(tmp_path)
    cli_error(capsys, *args, "-o", empty, fragments=("-o", "an empty path"))
    assert list(tmp_path.iterdir()) == []


def test_empty_output_argument_of_import_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cli_error(capsys, "import-edu-relat", tmp_path, "", fragments=("OUT", "an empty path"))
    assert list(tmp_path.iterdir()) == []


def test_atomic_output_all_or_nothing(tmp_path):
    out = tmp_path / "sub" / "f.csv"
    with atomic_output(out) as fh:
        fh.write("a,b\r\n")
    assert out.read_bytes() == b"a,b\r\n"  # text as given (newline="")
    with pytest.raises(RuntimeError):
        with atomic_output(out) as fh:
            fh.write("half")
            raise RuntimeError("stop")
    assert out.read_bytes() == b"a,b\r\n" and sorted(p.name for p in out.parent.iterdir()) == ["f.csv"]
    # a link in the file's place is replaced, never written through
    victim = tmp_path / "victim.txt"
    victim.write_text("keep", encoding="utf-8")
    link = tmp_path / "link.csv"
    link.symlink_to(victim)
    with atomic_output(link, binary=True) as fh:
        fh.write(b"new")
    assert victim.read_text(encoding="utf-8") == "keep" and not link.is_symlink() and link.read_bytes() == b"new"
    # a FIFO in its place does not block
    fifo = make_special(tmp_path / "fifo.csv", "fifo")
    with deadline(10):
        with atomic_output(fifo) as fh:
            fh.write("x")
    assert fifo.read_text(encoding="utf-8") == "x"
    (tmp_path / "d").mkdir()
    with pytest.raises(InputError, match="a directory is in its place"):
        with atomic_output(tmp_path / "d") as fh:
            fh.write("x")


# ------------------------------------------------------------------------------------------------ caches -------
def test_damaged_builtin_kb_cache_is_rebuilt(tmp_path, capsys):
    d = default_generated_kb_dir(tmp_path)
    assert (d / CACHE_MANIFEST).is_file()
    fresh = {name: (d / name).read_bytes() for name in ("people.csv", "relationships.csv", "biographies.csv")}
    capsys.readouterr()
    assert default_generated_kb_dir(tmp_path) == d and capsys.readouterr().err == ""  # a good cache: silent
    rel = d / "relationships.csv"
    lines = rel.read_text(encoding="utf-8").splitlines(keepends=True)
    rel.write_text("".join(lines[: len(lines) // 2]), encoding="utf-8")  # half its facts removed, still valid
    load_kb(d)  # the damage is not something the KB validation sees
    assert default_generated_kb_dir(tmp_path) == d
    err = capsys.readouterr().err.splitlines()
    assert (
        len(err) == 1
        and err[0].startswith("dukb: note: the cached built-in KB")
        and "relationships.csv changed" in err[0]
        and "rebuilt" in err[0]
    )
    assert {n: (d / n).read_bytes() for n in fresh} == fresh
    assert [p.name for p in tmp_path.iterdir()] == [d.name]  # the damaged copy is gone, no temporary left


@pytest.mark.parametrize(
    "damage, says",
    [
        ("fifo", "people.csv: not a regular file (a FIFO)"),
        ("manifest", f"{CACHE_MANIFEST} is damaged"),
        ("truncate", "biographies.csv changed"),
        ("folder", f"no {CACHE_MANIFEST}"),
        ("record", f"no {CACHE_MANIFEST}"),
    ],
)
def test_other_damage_is_rebuilt_within_seconds(tmp_path, capsys, damage, says):
    d = default_generated_kb_dir(tmp_path)
    if damage == "fifo":
        make_special(d / "people.csv", "fifo")
    elif damage == "manifest":
        (d / CACHE_MANIFEST).write_text('{"people.csv": 1}', encoding="utf-8")
    elif damage == "truncate":
        with open(d / "biographies.csv", "r+b") as fh:
            fh.truncate(100)
    elif damage == "record":  # the files as the generator makes them, without the record of their digests
        (d / CACHE_MANIFEST).unlink()
    else:
        shutil.rmtree(d)
        d.mkdir()
    capsys.readouterr()
    with deadline(60):
        assert default_generated_kb_dir(tmp_path) == d
    err = capsys.readouterr().err
    assert says in err and len(err.splitlines()) == 1
    assert len(load_kb(d).people) == 100


@pytest.fixture
def fake_model(tmp_path, monkeypatch):
    """A known model ``fake-1m`` whose wheel is ``tmp_path/fake.whl`` (cache in ``tmp_path/cache``)."""
    from dukb.neural import zoo

    monkeypatch.setenv("DUKB_CACHE_DIR", str(tmp_path / "cache"))
    data = b"GGUF fake model bytes" * 10
    entry = zoo.KnownModel(
        "fake-1m",
        "fake-pkg",
        "0.1",
        "fake/Fake.gguf",
        hashlib.sha256(data).hexdigest(),
        "org/Fake",
        "generic",
        "generic",
        1,
        "MIT",
    )
    monkeypatch.setitem(zoo.KNOWN_MODELS, "fake-1m", entry)
    wheel = tmp_path / "fake.whl"
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(entry.member, data)
    return zoo, entry, wheel, data


def test_fetch_model_refetches_a_corrupt_cached_file(fake_model, capsys):
    zoo, entry, wheel, data = fake_model
    rc, out, err = run_main(capsys, "fetch-model", "fake-1m", "--wheel", wheel)
    dest = zoo.cached_file("fake-1m")
    assert rc == 0 and out.strip() == str(dest) and dest.read_bytes() == data, err
    dest.write_bytes(data[:-3])  # corrupt (truncated) in the cache
    with pytest.raises(InputError, match="fake-1m is damaged .*fetch-model fake-1m"):
        zoo.resolve_model("fake-1m")  # a run refuses it
    rc, out, err = run_main(capsys, "fetch-model", "fake-1m", "--wheel", wheel)
    assert rc == 0 and dest.read_bytes() == data
    assert err.startswith("dukb: note: the cached") and "fetched again" in err and len(err.splitlines()) == 1
    assert zoo.resolve_model("fake-1m").gguf_file == "Fake.gguf"
    # corrupt again, and no good source: refused in one line saying both
    dest.write_bytes(b"junk")
    bad = wheel.with_name("bad.whl")
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr(entry.member, b"other")
    cli_error(
        capsys,
        "fetch-model",
        "fake-1m",
        "--wheel",
        bad,
        fragments=("is damaged", "fetching it again failed", "SHA-256"),
    )
    # a link to /dev/zero in the cache is damage too, found without reading it
    dest.unlink()
    dest.symlink_to("/dev/zero")
    with deadline(20):
        with pytest.raises(InputError, match="not a regular file"):
            zoo.resolve_model("fake-1m")


@pytest.mark.parametrize("kind", ["/dev/zero", "fifo", "folder"])
def test_wheel_must_be_a_regular_file(fake_model, tmp_path, capsys, kind):
    zoo, *_ = fake_model
    special = make_special(tmp_path / "special.whl", kind)
    cli_error(capsys, "fetch-model", "fake-1m", "--wheel", special, fragments=("not a regular file",))
    assert not zoo.cached_file("fake-1m").exists()


def test_wheel_fifo_in_a_subprocess_returns(tmp_path):
    fifo = make_special(tmp_path / "w.whl", "fifo")
    code = (
        "import sys, hashlib; from dukb.neural import zoo; from dukb.cli.main import main; "
        "zoo.KNOWN_MODELS['fake-1m'] = zoo.KnownModel('fake-1m', 'p', '0.1', 'f/F.gguf', '0' * 64, 'o/F', "
        "'generic', 'generic', 1, 'MIT'); "
        f"sys.exit(main(['fetch-model', 'fake-1m', '--wheel', {str(fifo)!r}]))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "DUKB_CACHE_DIR": str(tmp_path / "cache")},
    )
    one_error(proc, "not a regular file (a FIFO)")


def test_oversize_wheel_and_zip_bomb_never_reach_the_cache(fake_model, tmp_path, capsys, monkeypatch):
    zoo, entry, wheel, data = fake_model
    monkeypatch.setattr(zoo, "MAX_FETCH_BYTES", 1 << 16)
    bomb = tmp_path / "bomb.whl"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(entry.member, b"\0" * (1 << 20))  # 1 MiB of zeros: about 1 KiB compressed
    assert bomb.stat().st_size < (1 << 16)
    cli_error(capsys, "fetch-model", "fake-1m", "--wheel", bomb, fragments=("inflates to more than 65,536 bytes",))
    folder = zoo.cached_file("fake-1m").parent
    assert not folder.exists() or list(folder.iterdir()) == []
    big = tmp_path / "big.whl"
    big.write_bytes(wheel.read_bytes() + b"\0" * (1 << 16))
    cli_error(capsys, "fetch-model", "fake-1m", "--wheel", big, fragments=("too large",))


def test_a_hash_mismatch_writes_nothing_into_the_cache(fake_model, tmp_path, monkeypatch):
    zoo, entry, wheel, data = fake_model
    opened = []
    real_open = open

    def spy(file, mode="r", *a, **k):
        if "w" in mode and "cache" in str(file):
            opened.append(str(file))
        return real_open(file, mode, *a, **k)

    bad = tmp_path / "bad.whl"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr(entry.member, b"x" * 5000)
    monkeypatch.setattr("builtins.open", spy)
    with pytest.raises(InputError, match="SHA-256"):
        zoo.fetch("fake-1m", bad)
    assert opened == []  # the member was checked before any file was opened for writing
