"""`dukb closure | mdus | recall | validate`: the CLI contract of issue 2 (columns, JSON keys, errors, no torch).

Most commands run in-process through :func:`dukb.cli.main.main` (the console script's entry point) for speed; the
checks that need a fresh interpreter (no torch import, one-line errors without traceback) run a subprocess. Every
output is compared with the library computed directly (dukb.solver), not with hard-coded figures; the EDU-RELAT
sizes (400 KB + 162 derived facts, 55 targets) are those of the specification (notes/deep-unlearning.md).
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import EDU_RELAT_DIR
from dukb.cli.main import main
from dukb.kb import load_kb
from dukb.solver.closure import compute_closure
from dukb.solver.mdus import is_deep_unlearning_set, is_minimal, minimal_sets
from dukb.solver.metrics import recall_accuracy
from dukb.solver.targets import resolve_target

EDU = EDU_RELAT_DIR
TARGET_KEYS = {"fact_id", "subject", "relation", "object", "method", "complete", "sets"}
RECALL_KEYS = {
    "recall",
    "accuracy_relationships",
    "accuracy_biographies",
    "accuracy_all",
    "best_set",
    "sets_used",
    "n_sets",
}


@pytest.fixture(scope="module")
def demo():
    kb = load_kb("demo")
    return kb, compute_closure(kb)


@pytest.fixture(scope="module")
def edu():
    if not (EDU / "relationships.csv").is_file():
        pytest.skip("../shared/edu-relat is absent")
    kb = load_kb(EDU)
    return kb, compute_closure(kb)


@pytest.fixture
def cli(capsys, monkeypatch):
    """Run ``dukb ARGS`` in-process; return (exit code, stdout, stderr)."""
    monkeypatch.setenv("COLUMNS", "200")

    def run(*args):
        capsys.readouterr()
        rc = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return rc, out, err

    return run


def run_subprocess(*args, code: str | None = None):
    cmd = [sys.executable, "-c", code] if code else [sys.executable, "-m", "dukb.cli.main", *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def assert_one_line_error(rc, err, *fragments):
    assert rc == 2
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("dukb: error: ")
    for f in fragments:
        assert f in lines[0], (f, lines[0])


def best_target(closure, derived: bool = False) -> int:
    """The atom (KB or derived) with the most exact minimal sets, ties by atom id: a non-trivial target."""
    atoms = range(closure.n_kb, len(closure)) if derived else range(closure.n_kb)
    return max(atoms, key=lambda a: (len(minimal_sets(closure, [a]).sets), -a))


# ------------------------------------------------------------------------------------------------ closure ------
def read_closure_csv(text: str) -> list[list[str]]:
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["subject", "relation", "object", "source"]
    return rows[1:]


def check_closure_rows(rows, closure):
    assert len(rows) == len(closure)
    assert {tuple(r[:3]) for r in rows} == set(closure.atoms)
    assert len({tuple(r[:3]) for r in rows}) == len(rows)  # one row per fact
    for s, r, o, src in rows:
        assert src == closure.source(closure.index[(s, r, o)])


def test_closure_csv_demo(cli, demo):
    kb, c = demo
    rc, out, err = cli("closure", "--kb", "demo")
    assert rc == 0 and err == ""
    rows = read_closure_csv(out)
    check_closure_rows(rows, c)
    assert sum(r[3] == "kb" for r in rows) == len(kb.relationships)
    assert {tuple(r[:3]) for r in rows if r[3] == "kb"} == {f.triple for f in kb.relationships}


def test_closure_csv_edu_relat(cli, edu):
    kb, c = edu
    rc, out, _ = cli("closure", "--kb", EDU)
    assert rc == 0
    rows = read_closure_csv(out)
    check_closure_rows(rows, c)
    assert len(rows) == 562
    assert sum(r[3] == "kb" for r in rows) == 400 and sum(r[3] == "derived" for r in rows) == 162
    assert {tuple(r[:3]) for r in rows if r[3] == "kb"} == {f.triple for f in kb.relationships}


def test_closure_paper_compat_rules(cli, demo):
    _, c = demo
    rc, out, _ = cli("closure", "--kb", "demo", "--rules", "family_paper_compat")
    assert rc == 0
    rows = read_closure_csv(out)
    assert {tuple(r[:3]) for r in rows} == set(compute_closure(c.kb, "family_paper_compat").atoms)


def test_closure_json_and_table(cli, demo):
    _, c = demo
    rc, out, _ = cli("closure", "--kb", "demo", "--format", "json")
    assert rc == 0
    doc = json.loads(out)
    assert doc["n_kb"] == c.n_kb and doc["n_derived"] == c.n_derived and doc["n_instances"] == c.n_instances
    assert len(doc["facts"]) == len(c)
    for f in doc["facts"]:
        a = c.index[(f["subject"], f["relation"], f["object"])]
        assert f["source"] == c.source(a)
        assert f["fact_id"] == (c.fact_ids[a] if c.is_kb(a) else None)

    rc, out, _ = cli("closure", "--kb", "demo", "--format", "table")
    assert rc == 0
    assert f"{c.n_kb} KB + {c.n_derived} derived" in out
    for s, r, o in c.atoms:
        assert any(s in ln and o in ln and r in ln for ln in out.splitlines()), (s, r, o)


def test_closure_output_file(cli, tmp_path):
    rc, out, _ = cli("closure", "--kb", "demo")
    target = tmp_path / "sub" / "closure.csv"
    rc2, out2, err2 = cli("closure", "--kb", "demo", "-o", target)
    assert rc == rc2 == 0 and out2 == "" and err2 == ""
    assert target.read_text(encoding="utf-8") == out


def test_closure_csv_quotes_odd_names(cli, tmp_path):
    d = tmp_path / "kb"
    d.mkdir()
    odd = 'Smith, "Jr" O\'Neil \\ Æsa'
    (d / "people.csv").write_text(
        f'name,gender\n"{odd.replace(chr(34), chr(34) * 2)}",female\nBo Lund,male\n', encoding="utf-8"
    )
    (d / "relationships.csv").write_text(
        f'fact_id,subject,relation,object\n0,Bo Lund,wife,"{odd.replace(chr(34), chr(34) * 2)}"\n', encoding="utf-8"
    )
    rc, out, _ = cli("closure", "--kb", d)
    assert rc == 0
    rows = read_closure_csv(out)
    assert sorted(tuple(r) for r in rows) == sorted(
        [("Bo Lund", "wife", odd, "kb"), (odd, "husband", "Bo Lund", "derived")]
    )


@pytest.mark.parametrize(
    "args, fragments",
    [
        (["closure", "--kb", "no/such/dir"], ["no/such/dir", "does not exist"]),
        (["closure", "--kb", "demo", "--rules", "nosuch"], ["nosuch", "no such rule file"]),
    ],
    ids=["no kb", "no rules"],
)
def test_closure_errors(cli, args, fragments):
    rc, out, err = cli(*args)
    assert rc == 2 and out == ""
    assert "Traceback" not in err
    for f in fragments:
        assert f in err


USAGE_BUG = (
    "dukb/cli/main.py main(): catches click.ClickException, but typer>=0.2x raises its vendored "
    "typer._click.exceptions (BadParameter, NoSuchOption, MissingParameter), so a usage error ends in a "
    "traceback with exit 1 instead of 'dukb: error: ...' and exit 2"
)


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["closure", "--kb", "demo", "--format", "xml"], "xml"),
        (["closure", "--kb", "demo", "--bogus"], "--bogus"),
        (["closure"], "kb"),
        (["mdus", "--kb", "demo", "--target-id", "x"], "integer"),
    ],
    ids=["bad choice", "unknown option", "missing --kb", "non-integer option"],
)
def test_usage_errors(args, fragment):
    p = run_subprocess(*args)
    assert "Traceback" not in p.stderr
    assert_one_line_error(p.returncode, p.stderr, fragment)


# --------------------------------------------------------------------------------------------------- mdus ------
def mdus_json(cli, *args) -> dict:
    rc, out, err = cli("mdus", *args)
    assert rc == 0, err
    doc = json.loads(out)
    assert set(doc) >= {"targets"}
    for e in doc["targets"]:
        assert set(e) >= TARGET_KEYS
        assert isinstance(e["complete"], bool)
        assert all(isinstance(s, list) and all(isinstance(x, int) for x in s) for s in e["sets"])
    return doc


def test_mdus_exact_by_id(cli, demo):
    kb, c = demo
    a = best_target(c)
    fid = c.fact_ids[a]
    doc = mdus_json(cli, "--kb", "demo", "--target-id", fid)
    (e,) = doc["targets"]
    assert (e["fact_id"], e["subject"], e["relation"], e["object"]) == (fid, *kb.relationship(fid).triple)
    assert e["method"] == "exact" and e["complete"] is True
    lib = minimal_sets(c, [a], "exact")
    assert [tuple(s) for s in e["sets"]] == lib.sets and len(e["sets"]) > 1
    for s in e["sets"]:
        assert is_deep_unlearning_set(c, [a], s)
        assert is_minimal(c, [a], s)


def test_mdus_methods(cli, demo):
    _, c = demo
    a = best_target(c)
    fid = c.fact_ids[a]
    exact = {tuple(s) for s in minimal_sets(c, [a], "exact").sets}

    (m,) = mdus_json(cli, "--kb", "demo", "--target-id", fid, "--method", "minimum")["targets"]
    assert m["method"] == "minimum" and m["complete"] is True and len(m["sets"]) == 1
    assert tuple(m["sets"][0]) in exact
    assert len(m["sets"][0]) == min(len(s) for s in exact)

    doc = mdus_json(cli, "--kb", "demo", "--target-id", fid, "--method", "random", "--seeds", 30, "--seed", 3)
    (r,) = doc["targets"]
    assert r["method"] == "random" and r["complete"] is False
    assert r["sets"] and {tuple(s) for s in r["sets"]} <= exact
    assert doc["seeds"] == 30 and doc["seed"] == 3
    again = mdus_json(cli, "--kb", "demo", "--target-id", fid, "--method", "random", "--seeds", 30, "--seed", 3)
    assert again["targets"][0]["sets"] == r["sets"]  # deterministic per seed


def test_mdus_targets_file(cli, demo, tmp_path):
    _, c = demo
    ids = [c.fact_ids[best_target(c)], c.fact_ids[0], c.fact_ids[c.n_kb - 1]]
    f = tmp_path / "targets.txt"
    f.write_text(f"# targets\n{ids[0]}   # the best one\n\n  {ids[1]}\n#{ids[2] + 100}\n{ids[2]}\n", encoding="utf-8")
    doc = mdus_json(cli, "--kb", "demo", "--targets-file", f)
    assert [e["fact_id"] for e in doc["targets"]] == ids
    for e in doc["targets"]:
        a = c.atom_of_fact(e["fact_id"])
        assert [tuple(s) for s in e["sets"]] == minimal_sets(c, [a]).sets


def test_mdus_targets_file_bad_line(demo, tmp_path):
    f = tmp_path / "targets.txt"
    f.write_text("# targets\n0\nzero  # not a number\n", encoding="utf-8")
    p = run_subprocess("mdus", "--kb", "demo", "--targets-file", f)
    assert "Traceback" not in p.stderr and p.stdout == ""
    assert_one_line_error(p.returncode, p.stderr, f"{f}:3:", "'zero'")


@pytest.mark.parametrize(
    "content, fragment",
    [
        (None, "missing targets file"),
        ("# only comments\n\n", "lists no fact_id"),
        ("0\n9999\n", "9999"),
    ],
    ids=["missing", "empty", "unknown id"],
)
def test_mdus_targets_file_errors(cli, tmp_path, content, fragment):
    f = tmp_path / "targets.txt"
    if content is not None:
        f.write_text(content, encoding="utf-8")
    rc, out, err = cli("mdus", "--kb", "demo", "--targets-file", f)
    assert out == ""
    assert_one_line_error(rc, err, fragment)


def test_mdus_derived_target(cli, demo):
    _, c = demo
    a = best_target(c, derived=True)
    s, r, o = c.atoms[a]
    doc = mdus_json(cli, "--kb", "demo", "--target", f"{s},{r},{o}")
    (e,) = doc["targets"]
    assert e["fact_id"] is None and (e["subject"], e["relation"], e["object"]) == (s, r, o)
    assert [tuple(x) for x in e["sets"]] == minimal_sets(c, [a]).sets
    for x in e["sets"]:
        assert is_minimal(c, [a], x)


def test_mdus_joint(cli, demo):
    _, c = demo
    a = best_target(c)
    b = best_target(c, derived=True)
    s, r, o = c.atoms[b]
    doc = mdus_json(cli, "--kb", "demo", "--target-id", c.fact_ids[a], "--target", f"{s},{r},{o}", "--joint")
    assert [e["fact_id"] for e in doc["targets"]] == [c.fact_ids[a], None]
    joint = doc["joint"]
    assert joint["sets"] and joint["complete"] is True
    assert [tuple(x) for x in joint["sets"]] == minimal_sets(c, [a, b]).sets
    for x in joint["sets"]:
        assert is_minimal(c, [a, b], x)
        assert not is_deep_unlearning_set(c, [a, b], x[1:])


def test_mdus_table_and_output_file(cli, demo, tmp_path):
    _, c = demo
    a = best_target(c)
    fid = c.fact_ids[a]
    rc, out, _ = cli("mdus", "--kb", "demo", "--target-id", fid, "--format", "table")
    assert rc == 0
    s, r, o = c.atoms[a]
    assert f"({s}, {r}, {o})" in out
    assert str(len(minimal_sets(c, [a]).sets)) in out
    path = tmp_path / "m.json"
    rc, out, _ = cli("mdus", "--kb", "demo", "--target-id", fid, "-o", path)
    assert rc == 0 and out == ""
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert [tuple(x) for x in doc["targets"][0]["sets"]] == minimal_sets(c, [a]).sets


@pytest.mark.parametrize(
    "args, fragments",
    [
        (["--target-id", 9999], ["fact_id 9999"]),
        (["--target", "George Hale,wife,Leo Hale"], ["not in the deductive closure"]),
        (["--target", "George Hale,father"], ["Subject,relation,Object"]),
        ([], ["at least one target"]),
        (["--target-id", 0, "--seeds", 0, "--method", "random"], ["--seeds"]),
        # CP-SAT: status UNKNOWN (an AssertionError) for a limit too short to find a set, MODEL_INVALID for -1 or nan
        (["--target-id", 1, "--method", "minimum", "--seconds", "1e-6"], ["time limit", "larger --seconds"]),
        (["--target-id", 1, "--method", "minimum", "--seconds", "0"], ["--seconds must be a positive"]),
        (["--target-id", 1, "--method", "minimum", "--seconds", "-1"], ["--seconds must be a positive"]),
        (["--target-id", 1, "--method", "minimum", "--seconds", "nan"], ["--seconds", "not a decimal number"]),
        (["--target-id", 1, "--method", "exact", "--seconds", "0"], ["--seconds must be a positive"]),
        (["--target-id", 1, "--method", "random", "--seconds", "-1"], ["--seconds must be a positive"]),
        (["--target-id", 1, "--method", "exact", "--max-sets", "0"], ["--max-sets must be"]),
        (["--target-id", 1, "--method", "random", "--max-sets", "-2"], ["--max-sets must be"]),
        (["--target-id", 1, "--method", "random", "--seconds", "5"], ["--seconds applies only to --method exact"]),
        (["--target-id", 1, "--method", "minimum", "--max-sets", "3"], ["--max-sets applies only to --method exact"]),
        (["--target-id", 1, "--method", "random", "--max-sets", "3"], ["--max-sets applies only to --method exact"]),
        (["--target", '"George Hale,wife,Leo Hale'], ["Subject,relation,Object"]),
    ],
    ids=[
        "unknown id",
        "outside closure",
        "malformed target",
        "no target",
        "zero seeds",
        "minimum timeout",
        "zero seconds",
        "negative seconds",
        "nan seconds",
        "exact zero seconds",
        "random negative seconds",
        "zero max-sets",
        "negative max-sets",
        "seconds with random",
        "max-sets with minimum",
        "max-sets with random",
        "unclosed quote",
    ],
)
def test_mdus_errors(cli, demo, args, fragments):
    rc, out, err = cli("mdus", "--kb", "demo", *args)
    assert out == ""
    assert_one_line_error(rc, err, *fragments)


def test_mdus_target_with_a_comma_in_a_quoted_name(cli, tmp_path):
    """A KB person named ``Hale, George`` validates and `closure` writes CSV-quoted rows, but --target split on
    every comma and refused '"Hale, George",wife,Martha Hale'; it is read as one CSV record now."""
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "people.csv").write_text(
        'name,gender,birthyear,birthplace,job,generation\n"Hale, George",male,1921,Ohio,'
        "Carpenter,0\nMartha Hale,female,1924,Ohio,Teacher,0\nHenry Hale,male,1948,Ohio,"
        "Engineer,1\n",
        encoding="utf-8",
    )
    (kb / "relationships.csv").write_text(
        'fact_id,subject,relation,object\n0,Martha Hale,husband,"Hale, George"\n'
        '1,"Hale, George",child,Henry Hale\n2,Henry Hale,father,"Hale, George"\n',
        encoding="utf-8",
    )
    (kb / "biographies.csv").write_text("fact_id,subject,attribute,value\n", encoding="utf-8")
    rc, out, err = cli("validate", "--kb", kb)
    assert rc == 0, err
    doc = mdus_json(cli, "--kb", kb, "--target", ' "Hale, George", wife , Martha Hale')
    (e,) = doc["targets"]
    assert (e["subject"], e["relation"], e["object"]) == ("Hale, George", "wife", "Martha Hale")
    assert e["fact_id"] is None and e["sets"] == [[0]]
    rc, out, err = cli("mdus", "--kb", kb, "--target", "Hale, George,wife,Martha Hale")
    assert out == "" and "Traceback" not in err
    assert_one_line_error(rc, err, "Subject,relation,Object", "quote a field")


def test_mdus_error_subprocess_has_no_traceback():
    p = run_subprocess("mdus", "--kb", "demo", "--target", "George Hale,wife,Leo Hale")
    assert "Traceback" not in p.stderr
    assert_one_line_error(p.returncode, p.stderr, "not in the deductive closure")


def test_mdus_quiet_stderr(demo):
    # clingo's "domRec ignored: No domain atoms found." must not leak to stderr (fact 16 of the demo KB did)
    _, c = demo
    for fid in (16, 0):
        p = run_subprocess("mdus", "--kb", "demo", "--target-id", fid)
        assert p.returncode == 0 and p.stderr == ""


def test_mdus_edu_relat_targets(cli, edu):
    _, c = edu
    ids = [int(x.split("#")[0]) for x in (EDU / "targets.txt").read_text().splitlines() if x.split("#")[0].strip()]
    assert len(ids) == 55
    doc = mdus_json(cli, "--kb", EDU, "--targets-file", EDU / "targets.txt")
    assert [e["fact_id"] for e in doc["targets"]] == ids
    assert all(e["complete"] and e["sets"] for e in doc["targets"])
    for e in doc["targets"][:5]:
        assert [tuple(s) for s in e["sets"]] == minimal_sets(c, [c.atom_of_fact(e["fact_id"])]).sets


# ------------------------------------------------------------------------------------------------- recall ------
def write_retained(path: Path, kb, forgot_rel=(), forgot_bio=(), bios: bool = True, drop=None, extra=()):
    rows = [("relationship", f.fact_id, int(f.fact_id not in forgot_rel)) for f in kb.relationships]
    if bios:
        rows += [("biography", f.fact_id, int(f.fact_id not in forgot_bio)) for f in kb.biographies]
    if drop is not None:
        rows.pop(drop)
    rows += list(extra)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["kind", "fact_id", "retained"])
        w.writerows(rows)
    return path


def recall_json(cli, *args) -> dict:
    rc, out, err = cli("recall", *args)
    assert rc == 0, err
    doc = json.loads(out)
    assert set(doc) >= RECALL_KEYS
    return doc


def test_recall_matches_metrics(cli, demo, tmp_path):
    kb, c = demo
    a = best_target(c)
    fid = c.fact_ids[a]
    sets = minimal_sets(c, [a]).sets
    # forget the target, part of one minimal set and one unrelated fact, plus two biography facts
    other = next(f for f in kb.rel_ids if all(f not in s for s in sets))
    partial = [x for x in sets[-1] if x != fid][:1]
    forgot_rel = {fid, other, *partial}
    forgot_bio = set(kb.bio_ids[:2])
    path = write_retained(tmp_path / "r.csv", kb, forgot_rel, forgot_bio)
    doc = recall_json(cli, "--kb", "demo", "--target-id", fid, "--retained", path)
    want = recall_accuracy(kb, sets, forgot_rel, forgot_bio, "exact", [fid])
    for k in ("recall", "accuracy_relationships", "accuracy_biographies", "accuracy_all"):
        assert doc[k] == pytest.approx(getattr(want, k)), k
    assert doc["best_set"] == want.best_set and doc["n_sets"] == len(sets) and doc["sets_used"] == "exact"
    assert 0 < doc["recall"] < 1
    assert doc["accuracy_biographies"] == pytest.approx(1 - 2 / len(kb.biographies))


def test_recall_of_an_exact_set_is_one(cli, demo, tmp_path):
    kb, c = demo
    a = best_target(c)
    fid = c.fact_ids[a]
    s = minimal_sets(c, [a]).sets[-1]
    path = write_retained(tmp_path / "r.csv", kb, set(s), bios=False)
    doc = recall_json(cli, "--kb", "demo", "--target-id", fid, "--retained", path)
    assert doc["recall"] == 1.0 and doc["accuracy_relationships"] == 1.0 and doc["accuracy_all"] == 1.0
    assert doc["best_set"] == list(s)
    # no biography rows: biographies were not probed, so their accuracy is unknown, not 1.0
    assert doc["accuracy_biographies"] is None


def test_recall_random_and_table(cli, demo, tmp_path):
    kb, c = demo
    fid = c.fact_ids[best_target(c)]
    path = write_retained(tmp_path / "r.csv", kb, {fid})
    doc = recall_json(cli, "--kb", "demo", "--target-id", fid, "--retained", path, "--method", "random", "--seeds", 20)
    assert doc["sets_used"] == "random"
    rnd = minimal_sets(c, [c.atom_of_fact(fid)], "random", n_seeds=20)
    assert doc["n_sets"] == len(rnd.sets)
    want = recall_accuracy(kb, rnd.sets, {fid}, (), "random", [fid])
    assert doc["recall"] == pytest.approx(want.recall) and doc["best_set"] == want.best_set
    rc, out, _ = cli("recall", "--kb", "demo", "--target-id", fid, "--retained", path, "--format", "table")
    assert rc == 0 and "recall" in out and "accuracy_relationships" in out


@pytest.mark.parametrize(
    "edit, fragments",
    [
        (dict(drop=0), ["relationship facts are missing"]),
        (dict(drop=-1), ["biography facts are missing"]),
        (dict(extra=[("relation", 0, 1)]), [":LINE:", "kind 'relation'"]),
        (dict(extra=[("relationship", "x", 1)]), [":LINE:", "fact_id 'x'"]),
        (dict(extra=[("relationship", 9999, 1)]), [":LINE:", "9999"]),
        (dict(drop=0, extra=[("relationship", 0, 2)]), [":LINE:", "retained '2' is not 0 or 1"]),
        (dict(drop=0, extra=[("relationship", 0, "yes")]), [":LINE:", "not 0 or 1"]),
        (dict(extra=[("relationship", 0, 1)]), [":LINE:", "listed twice"]),
    ],
    ids=[
        "missing relationship",
        "missing biography",
        "bad kind",
        "bad id",
        "unknown id",
        "retained 2",
        "retained yes",
        "listed twice",
    ],
)
def test_recall_retained_errors(cli, demo, tmp_path, edit, fragments):
    kb, c = demo
    path = write_retained(tmp_path / "r.csv", kb, **edit)
    n_lines = len(path.read_text().splitlines())
    rc, out, err = cli("recall", "--kb", "demo", "--target-id", c.fact_ids[0], "--retained", path)
    assert out == ""
    assert_one_line_error(rc, err, str(path), *[f.replace("LINE", str(n_lines)) for f in fragments])


@pytest.mark.parametrize(
    "args, fragment",
    [
        ([], "exactly one of --retained"),
        (["--retained", "R", "--retained-dir", "."], "exactly one of --retained"),
        (["--retained", "nowhere.csv"], "missing file"),
        (["--retained", "R", "--target-id", 9999], "fact_id 9999"),
    ],
    ids=["neither", "both", "missing file", "unknown target"],
)
def test_recall_argument_errors(cli, demo, tmp_path, args, fragment):
    kb, _ = demo
    path = write_retained(tmp_path / "r.csv", kb)
    args = [str(path) if a == "R" else a for a in args]
    if "--target-id" not in args:
        args += ["--target-id", kb.rel_ids[0]]
    rc, out, err = cli("recall", "--kb", "demo", *args)
    assert out == ""
    assert_one_line_error(rc, err, fragment)


def test_recall_missing_column(cli, demo, tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("kind,fact_id,known\nrelationship,0,1\n", encoding="utf-8")
    rc, out, err = cli("recall", "--kb", "demo", "--target-id", 0, "--retained", path)
    assert_one_line_error(rc, err, f"{path}:1:", "missing column retained")


# ---------------------------------------------------------------------------------------- start-up, help ------
@pytest.mark.parametrize("command", ["closure", "mdus"])
def test_no_torch_import(tmp_path, command):
    out = tmp_path / "out.txt"
    extra = ["--target-id", "0", "--method", "random", "--seeds", "3"] if command == "mdus" else []
    code = (
        "import sys\nfrom dukb.cli.main import main\n"
        f"rc = main({[command, '--kb', 'demo', '-o', str(out), *extra]!r})\n"
        "print(rc, 'torch' in sys.modules, 'transformers' in sys.modules)\n"
    )
    p = run_subprocess(code=code)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["0", "False", "False"]
    assert out.stat().st_size > 0


@pytest.mark.parametrize(
    "command, options",
    [
        (None, ["validate", "closure", "mdus", "recall"]),
        ("validate", ["--kb"]),
        ("closure", ["--kb", "--rules", "--format", "--output", "subject,relation,object,source"]),
        (
            "mdus",
            [
                "--kb",
                "--target-id",
                "--targets-file",
                "--target",
                "--method",
                "--seeds",
                "--joint",
                "--rules",
                "--format",
                "--output",
                "exact",
                "minimum",
                "random",
            ],
        ),
        ("recall", ["--kb", "--target-id", "--retained", "--retained-dir", "--method", "--format", "--output"]),
    ],
)
def test_help(cli, command, options):
    rc, out, err = cli(*([command] if command else []), "--help")
    assert rc == 0, err
    for opt in options:
        assert opt in out, opt


def test_help_of_every_registered_command(cli):
    import typer

    from dukb.cli.main import app

    names = sorted(typer.main.get_command(app).commands)
    assert {"validate", "closure", "mdus", "recall"} <= set(names)
    for name in names:
        rc, out, err = cli(name, "--help")
        assert rc == 0, (name, err)
        assert "Usage" in out and "--help" in out, name


def test_version(cli):
    import dukb

    rc, out, _ = cli("--version")
    assert rc == 0 and dukb.__version__ in out


def test_resolve_target_forms(demo):
    kb, c = demo
    f = kb.relationships[3]
    assert (
        resolve_target(c, f.fact_id)
        == resolve_target(c, f.triple)
        == resolve_target(c, f)
        == resolve_target(c, " , ".join(f.triple))
        == c.atom_of_fact(f.fact_id)
    )
