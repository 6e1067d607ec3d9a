"""EDU-RELAT import, the restricted .pt reader and `dukb recall --retained-dir` on the benchmark's example.

- :func:`dukb.kb.edu_relat.import_edu_relat` on ../shared/edu-relat/original reproduces the converted copy in
  ../shared/edu-relat (every file byte for byte);
- ``dukb import-edu-relat`` returns 0 and prints one summary line; bad input exits 2 with one line, no traceback;
- :mod:`dukb.kb.ptfile` refuses crafted malicious pickles (os.system, builtins.eval, an object-flagged dtype, a
  persistent id, an EXT opcode) without running them, and reads the benchmark's files;
- ``dukb recall --retained-dir`` gives the numbers of :func:`dukb.solver.metrics.recall_accuracy` on the exact sets.

Source: Wu et al. 2025 (EDU-RELAT, Eq. 1-2); ../shared/edu-relat/README.md.
"""

from __future__ import annotations

import csv
import io
import json
import os
import pickle
import pickletools
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from dukb import InputError
from dukb.cli.main import main
from dukb.kb import RELATIONS, load_kb
from dukb.kb.edu_relat import import_edu_relat
from dukb.kb.ptfile import PickledPerson, PickledRule, load_benchmark_pickle, load_bool_list

ORIGINAL_FILES = (
    "family-200-graph.pt",
    "family_relationships.pt",
    "family_biographies.pt",
    "family_rule.pt",
    "subsample.pt",
    "us_population_distribution",
)


@pytest.fixture(scope="session")
def original_dir(edu_relat_dir) -> Path:
    path = edu_relat_dir / "original"
    if not all((path / f).is_file() for f in ORIGINAL_FILES):
        pytest.skip(f"EDU-RELAT original files not found in {path}")
    return path


@pytest.fixture(scope="session")
def imported(original_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("edu") / "kb"
    import_edu_relat(original_dir, out)
    return out


def write_pt(path: Path, payload: bytes, folder: str = "archive") -> Path:
    """A torch.save-like zip archive holding ``payload`` as <folder>/data.pkl."""
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{folder}/data.pkl", payload)
        zf.writestr(f"{folder}/byteorder", "little")
        zf.writestr(f"{folder}/version", "3\n")
    return path


def plain_pickle_load(path: Path):
    """Independent reader for pickles that use no global at all (checked with pickletools first)."""
    with zipfile.ZipFile(path) as zf:
        data = zf.read(next(n for n in zf.namelist() if n.endswith("/data.pkl")))
    ops = {op.name for op, _, _ in pickletools.genops(data)}
    assert not ops & {"GLOBAL", "STACK_GLOBAL", "INST", "OBJ", "REDUCE", "BUILD", "BINPERSID", "PERSID"}, ops
    return pickle.loads(data)


# -- import ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["people.csv", "relationships.csv", "biographies.csv"])
def test_import_reproduces_converted_csv(imported, edu_relat_dir, name):
    ours = (imported / name).read_bytes()
    theirs = (edu_relat_dir / name).read_bytes()
    assert ours == theirs  # byte for byte, RFC 4180 line ends included
    with (
        open(imported / name, newline="", encoding="utf-8") as a,
        open(edu_relat_dir / name, newline="", encoding="utf-8") as b,
    ):
        assert list(csv.reader(a)) == list(csv.reader(b))


@pytest.mark.parametrize("name", ["qa_relationships.jsonl", "qa_biographies.jsonl", "targets.txt"])
def test_import_reproduces_qa_and_targets_bytes(imported, edu_relat_dir, name):
    assert (imported / name).read_bytes() == (edu_relat_dir / name).read_bytes()


def test_imported_kb_content(imported, original_dir):
    kb = load_kb(imported)
    assert (len(kb.people), len(kb.relationships), len(kb.biographies)) == (100, 400, 300)
    f0 = kb.relationship(0)
    assert (f0.subject, f0.relation, f0.object) == ("Reid Perry", "father", "Richard Perry")
    assert kb.rel_ids == list(range(400)) and kb.bio_ids == list(range(300))
    # Biography ids: 3 per person in order birthyear, birthplace, job; birthplace "<state> state".
    people = list(kb.people.values())
    for k, p in enumerate(people):
        b = kb.biographies[3 * k : 3 * k + 3]
        assert [x.attribute for x in b] == ["birthyear", "birthplace", "job"]
        assert {x.subject for x in b} == {p.name}
        assert b[0].value == str(p.birthyear) and b[1].value == f"{p.birthplace} state" and b[2].value == p.job
    # Targets equal subsample.pt.
    targets = [int(x) for x in (imported / "targets.txt").read_text().split("\n") if x and not x.startswith("#")]
    assert targets == load_benchmark_pickle(original_dir / "subsample.pt").tolist()
    assert len(targets) == 55 and all(kb.has_relationship(t) for t in targets)


def test_import_maps_edges_and_birthplaces(imported, original_dir):
    edges, types, names, persons = load_benchmark_pickle(original_dir / "family-200-graph.pt")
    states = list(load_benchmark_pickle(original_dir / "us_population_distribution"))
    kb = load_kb(imported)
    for e, ((i, j), r) in enumerate(zip(edges, types)):
        assert kb.relationship(e).triple == (names[i], r, names[j])
    for k, p in enumerate(persons):
        assert kb.people[names[k]].birthplace == states[int(p.birthplace[0])]


# -- CLI --------------------------------------------------------------------------------------------------------
def test_cli_import(original_dir, tmp_path, capsys):
    out = tmp_path / "kb"
    assert main(["import-edu-relat", str(original_dir), str(out)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines == [
        f"imported 100 people, 400 relationship facts, 300 biography facts, 55 targets, the paper's "
        f"sets of 55 targets into {out}"
    ]
    assert len(load_kb(out).relationships) == 400


def test_cli_import_help(capsys):
    assert main(["import-edu-relat", "--help"]) == 0
    text = capsys.readouterr().out
    assert "family-200-graph.pt" in text and "qa_relationships.jsonl" in text


def _copy_original(original_dir: Path, dst: Path, skip: str | None = None) -> Path:
    dst.mkdir()
    for f in ORIGINAL_FILES:
        if f != skip:
            shutil.copyfile(original_dir / f, dst / f)
    return dst


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dukb.cli.main", *args], capture_output=True, text=True, timeout=120)


def assert_one_line_error(proc: subprocess.CompletedProcess, *fragments: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dukb: error:"), proc.stderr
    assert "Traceback" not in proc.stderr
    for f in fragments:
        assert f in lines[0]


def test_cli_bad_inputs_subprocess(tmp_path):
    assert_one_line_error(
        run_cli("import-edu-relat", str(tmp_path / "nope"), str(tmp_path / "out")),
        str(tmp_path / "nope"),
        "does not exist",
    )
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a zip at all")
    assert_one_line_error(run_cli("import-edu-relat", str(junk), str(tmp_path / "out")), "junk.pt")
    assert not (tmp_path / "out").exists()


def test_cli_non_zip_and_missing_file(original_dir, tmp_path, capsys):
    src = _copy_original(original_dir, tmp_path / "src", skip="family-200-graph.pt")
    (src / "family-200-graph.pt").write_bytes(b"\x80\x02]q\x00.")  # a bare pickle, not a zip archive
    assert main(["import-edu-relat", str(src), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dukb: error:") and "family-200-graph.pt" in err[0]
    assert "not a zip archive" in err[0]
    src2 = _copy_original(original_dir, tmp_path / "src2", skip="us_population_distribution")
    assert main(["import-edu-relat", str(src2), str(tmp_path / "out2")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "us_population_distribution" in err[0] and "missing file" in err[0]
    assert not (tmp_path / "out2" / "people.csv").exists()


def test_import_refuses_inconsistent_qa(original_dir, tmp_path):
    src = _copy_original(original_dir, tmp_path / "src", skip="family_relationships.pt")
    qa = load_benchmark_pickle(original_dir / "family_relationships.pt")
    qa["fact"][7] = "Someone Else is Nobody's father."
    write_pt(src / "family_relationships.pt", pickle.dumps(qa, protocol=2), "family-200")
    with pytest.raises(InputError, match=r"family_relationships\.pt: fact 7"):
        import_edu_relat(src, tmp_path / "out")


# -- restricted unpickler ---------------------------------------------------------------------------------------
def _marker_payloads(marker: Path) -> dict[str, bytes]:
    return {
        "os.system": b"cos\nsystem\n(S'touch " + str(marker).encode() + b"'\ntR.",
        "posix.system": b"cposix\nsystem\n(S'touch " + str(marker).encode() + b"'\ntR.",
        "builtins.eval": b"cbuiltins\neval\n(S'open(" + repr(str(marker)).encode() + b', "w").close()\'\ntR.',
        "stack_global": b"\x80\x04\x8c\x08builtins\x8c\x04eval\x93"
        b"\x8c"
        + bytes([len(f"open({str(marker)!r}, 'w').close()")])
        + f"open({str(marker)!r}, 'w').close()".encode()
        + b"\x85R.",
    }


@pytest.mark.parametrize("kind", ["os.system", "posix.system", "builtins.eval", "stack_global"])
def test_malicious_pickle_refused_and_not_run(tmp_path, kind):
    marker = tmp_path / "pwned"
    payload = _marker_payloads(marker)[kind]
    if kind != "posix.system" or os.name == "posix":
        # The payload is live: an ordinary unpickler runs it.
        pickle.loads(payload)
        assert marker.exists()
        marker.unlink()
    pt = write_pt(tmp_path / "evil.pt", payload)
    for loader in (load_bool_list, load_benchmark_pickle):
        with pytest.raises(InputError, match="refused global") as e:
            loader(pt)
        assert str(pt) in str(e.value)
        assert not marker.exists()


def test_malicious_pickle_via_cli(tmp_path):
    marker = tmp_path / "pwned"
    src = tmp_path / "src"
    src.mkdir()
    write_pt(src / "family-200-graph.pt", _marker_payloads(marker)["os.system"])
    proc = run_cli("import-edu-relat", str(src), str(tmp_path / "out"))
    assert_one_line_error(proc, "family-200-graph.pt", "refused global os.system")
    assert not marker.exists()


class _Reduce:
    def __init__(self, func, args, state=None):
        self.func, self.args, self.state = func, args, state

    def __reduce__(self):
        return (self.func, self.args) if self.state is None else (self.func, self.args, self.state)


@pytest.mark.parametrize(
    "obj, message",
    [
        # dtype state with the object flag set: numpy would read array bytes as object pointers.
        (_Reduce(np.dtype, ("i8", False, True), (3, "<", None, None, None, -1, -1, 1)), "plain dtype"),
        (_Reduce(np.dtype, ("V8", False, True), (3, "|", None, None, None, 8, 1, 1)), "not allowed"),
        (_Reduce(np.dtype, ("O", False, True)), "not allowed"),
        (np.array([1, None], dtype=object), "not allowed"),
        ([_Reduce(PickledPerson, ())], "refused global dukb.kb.ptfile.PickledPerson"),
    ],
)
def test_unsafe_numpy_and_foreign_classes_refused(tmp_path, obj, message):
    pt = write_pt(tmp_path / "x.pt", pickle.dumps(obj, protocol=2))
    with pytest.raises(InputError, match=re.escape(message)):
        load_benchmark_pickle(pt)


def test_classes_only_from_main_and_only_allowed(tmp_path):
    person = b"\x80\x02c__main__\nPerson\n)\x81}X\x04\x00\x00\x00nameK\x03sb."
    pt = write_pt(tmp_path / "p.pt", person)
    assert load_benchmark_pickle(pt).name == 3
    with pytest.raises(InputError, match=r"refused global __main__\.Person"):
        load_benchmark_pickle(pt, {"Rule"})
    with pytest.raises(InputError, match=r"refused global __main__\.Person"):
        load_bool_list(pt)
    other = write_pt(tmp_path / "q.pt", person.replace(b"c__main__\n", b"cfamily\n"))
    with pytest.raises(InputError, match=r"refused global family\.Person"):
        load_benchmark_pickle(other)
    bad_state = write_pt(tmp_path / "r.pt", person.replace(b"X\x04\x00\x00\x00name", b"X\x04\x00\x00\x00__ab"))
    with pytest.raises(InputError, match="invalid attribute name"):
        load_benchmark_pickle(bad_state)
    with pytest.raises(ValueError):
        load_benchmark_pickle(pt, {"Person", "os"})


def test_persistent_id_and_ext_refused(tmp_path):
    class StoragePickler(pickle.Pickler):
        def persistent_id(self, obj):
            return ("storage", "0") if obj == "tensor" else None

    buf = io.BytesIO()
    StoragePickler(buf, protocol=2).dump(["tensor"])
    with pytest.raises(InputError, match="persistent id"):
        load_benchmark_pickle(write_pt(tmp_path / "t.pt", buf.getvalue()))
    with pytest.raises(InputError, match="EXT opcode"):
        load_benchmark_pickle(write_pt(tmp_path / "e.pt", b"\x80\x02\x82\x01."))


@pytest.mark.parametrize(
    "payload, message",
    [
        (pickle.dumps({"a": True}), "found dict"),
        (pickle.dumps([True, 1]), "entry 1 is int"),
        (pickle.dumps(np.array([1, 0]), protocol=2), "numpy array of int64"),
        (pickle.dumps([True, False])[:-3], "malformed pickle"),
        (b"\xff\xfe", "malformed pickle"),
    ],
)
def test_load_bool_list_bad_content(tmp_path, payload, message):
    pt = write_pt(tmp_path / "b.pt", payload)
    with pytest.raises(InputError, match=re.escape(message)) as e:
        load_bool_list(pt)
    assert str(e.value).startswith(str(pt))


def test_load_bool_list_bad_files(tmp_path):
    with pytest.raises(InputError, match="missing file"):
        load_bool_list(tmp_path / "none.pt")
    (tmp_path / "plain.pt").write_bytes(pickle.dumps([True]))
    with pytest.raises(InputError, match="not a zip archive"):
        load_bool_list(tmp_path / "plain.pt")
    with zipfile.ZipFile(tmp_path / "empty.pt", "w") as zf:
        zf.writestr("archive/version", "3\n")
    with pytest.raises(InputError, match="expected one <name>/data.pkl"):
        load_bool_list(tmp_path / "empty.pt")
    # corrupt members: a damaged deflate/lzma stream and a stored member whose bytes fail the CRC
    import random

    payload = pickle.dumps([random.Random(0).random() for _ in range(500)], protocol=2)  # compresses poorly
    for method in (zipfile.ZIP_DEFLATED, zipfile.ZIP_LZMA, zipfile.ZIP_STORED):
        path = tmp_path / f"corrupt{method}.pt"
        with zipfile.ZipFile(path, "w", compression=method) as zf:
            zf.writestr("archive/data.pkl", payload)
        raw = bytearray(path.read_bytes())
        start = raw.index(b"archive/data.pkl") + len("archive/data.pkl")  # member data follows its local header
        for i in range(start + 4, start + 24):
            raw[i] ^= 0xFF
        path.write_bytes(bytes(raw))
        with pytest.raises(InputError, match="cannot read the zip archive") as e:
            load_bool_list(path)
        assert str(e.value).startswith(str(path))


def test_load_bool_list_numpy_bools(tmp_path):
    vals = [True, False, False, True]
    for obj in ([np.bool_(v) for v in vals], np.array(vals)):
        got = load_bool_list(write_pt(tmp_path / "n.pt", pickle.dumps(obj, protocol=2)))
        assert got == vals and all(type(x) is bool for x in got)


def test_load_bool_list_benchmark_example(original_dir):
    ex = original_dir / "example_for_evaluation"
    rel = load_bool_list(ex / "relationships_correct.pt")
    bio = load_bool_list(ex / "biographies_correct.pt")
    assert (len(rel), len(bio)) == (400, 300)
    assert all(type(x) is bool for x in rel + bio)
    assert rel == plain_pickle_load(ex / "relationships_correct.pt")
    assert bio == plain_pickle_load(ex / "biographies_correct.pt")
    assert 0 < sum(rel) < 400  # a real mix, not a constant vector


def test_load_benchmark_files(original_dir):
    edges, types, names, persons = load_benchmark_pickle(original_dir / "family-200-graph.pt")
    assert len(edges) == len(types) == 400 and len(names) == len(persons) == 100
    assert all(isinstance(p, PickledPerson) for p in persons)
    # Persons reference each other: repr must stay short and finite.
    text = repr(persons[5])
    assert "<Person" in text and len(text) < 400
    p = persons[5]
    assert all(c.father is p or c.mother is p for c in p.children)
    rules = load_benchmark_pickle(original_dir / "family_rule.pt")
    raw = (original_dir / "family_rule_raw.txt").read_text().strip().splitlines()
    assert len(rules) == len(raw) == 48 and all(isinstance(r, PickledRule) for r in rules)
    for rule, line in zip(rules, raw):
        body, head = line.split(" > ")
        head = re.fullmatch(r"\(\w+, is (\w+) of, \w+\)", head).group(1)
        assert rule.right_tuple[1] == head and head in RELATIONS
        # Body relations in order (gender atoms are not pickled; two rules keep the benchmark's "newphe").
        assert [t[1] for t in rule.left_tuples] == re.findall(r"\(\w+, is (\w+) of, \w+\)", body)
        assert {t[1] for t in rule.left_tuples} <= set(RELATIONS) | {"newphe"}


# -- recall on the benchmark's example --------------------------------------------------------------------------
def test_recall_retained_dir_end_to_end(edu_relat_dir, original_dir, capsys):
    from dukb.solver.closure import compute_closure
    from dukb.solver.mdus import minimal_sets
    from dukb.solver.metrics import recall_accuracy

    ex = original_dir / "example_for_evaluation"
    assert main(["recall", "--kb", str(edu_relat_dir), "--target-id", "272", "--retained-dir", str(ex)]) == 0
    doc = json.loads(capsys.readouterr().out)
    for key in (
        "recall",
        "accuracy_relationships",
        "accuracy_biographies",
        "accuracy_all",
        "best_set",
        "sets_used",
        "n_sets",
    ):
        assert key in doc
    assert doc["sets_used"] == "exact"

    kb = load_kb(edu_relat_dir)
    c = compute_closure(kb, "family")
    res = minimal_sets(c, [c.atom_of_fact(272)], "exact")
    assert res.complete
    rel, bio = plain_pickle_load(ex / "relationships_correct.pt"), plain_pickle_load(ex / "biographies_correct.pt")
    forgot_rel = {f.fact_id for f, k in zip(kb.relationships, rel) if not k}
    forgot_bio = {f.fact_id for f, k in zip(kb.biographies, bio) if not k}
    ref = recall_accuracy(kb, res.sets, forgot_rel, forgot_bio, "exact", [272])
    assert doc["n_sets"] == len(res.sets)
    for key in ("recall", "accuracy_relationships", "accuracy_biographies", "accuracy_all", "best_set"):
        assert doc[key] == pytest.approx(getattr(ref, key)), key
    # Eq. 1 by hand: the reported recall is the best share of a minimal set the model forgot.
    assert doc["recall"] == pytest.approx(max(len(forgot_rel & set(s)) / len(s) for s in res.sets))
    assert doc["accuracy_biographies"] == pytest.approx(sum(bio) / len(bio))
    assert 272 in doc["best_set"]


def test_real_torch_save_files(tmp_path):
    torch = pytest.importorskip("torch")
    torch.save([True, False, True], tmp_path / "ok.pt")
    assert load_bool_list(tmp_path / "ok.pt") == [True, False, True]
    torch.save({"ids": np.arange(4)}, tmp_path / "np.pt")
    assert load_benchmark_pickle(tmp_path / "np.pt")["ids"].tolist() == [0, 1, 2, 3]
    torch.save(torch.tensor([True, False]), tmp_path / "tensor.pt")
    with pytest.raises(InputError, match=r"refused global torch\..*tolist"):
        load_bool_list(tmp_path / "tensor.pt")
    torch.save([True], tmp_path / "legacy.pt", _use_new_zipfile_serialization=False)
    with pytest.raises(InputError, match="not a zip archive"):
        load_bool_list(tmp_path / "legacy.pt")
