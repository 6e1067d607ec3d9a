"""The paper's cached minimal sets (Eval-DU ``unlearn_minimal_set/<edge id>.pt``): the restricted reader, their
conversion by ``dukb import-eval-du`` into paper_sets.csv, its strict reader, and how a KB finds them.

The expected sets and their order come from an independent reading: Python's own unpickler on the benchmark's
files (trusted data), ``list(...)`` of the set it returns, which is what the reference does
(``minimal_unlearn_set = list(torch.load(...))``, utils_metric.py:106 and :114 of the Eval-DU repository).

Source: Wu et al. 2025 (Eval-DU), synthetic_data/unlearn_minimal_set/*.pt.
"""

from __future__ import annotations

import pickle
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest
from independent_logic import reference_paper_sets

from dukb import InputError
from dukb.cli.main import main
from dukb.kb import load_kb
from dukb.kb.edu_relat import import_edu_relat
from dukb.kb.paper_sets import (
    PAPER_SETS_FILE,
    find_paper_sets,
    paper_sets_of,
    read_paper_sets,
    read_pt_folder,
    write_paper_sets,
)
from dukb.kb.ptfile import load_id_sets

ORIGINAL_FILES = (
    "family-200-graph.pt",
    "family_relationships.pt",
    "family_biographies.pt",
    "family_rule.pt",
    "subsample.pt",
    "us_population_distribution",
)


@pytest.fixture(scope="module")
def pt_folder(edu_relat_dir) -> Path:
    path = edu_relat_dir / "original" / "unlearn_minimal_set"
    if not path.is_dir() or not all((edu_relat_dir / "original" / f).is_file() for f in ORIGINAL_FILES):
        pytest.skip(f"the benchmark's original files or unlearn_minimal_set/ not found in {edu_relat_dir}")
    return path


@pytest.fixture(scope="module")
def imported(pt_folder, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("edu") / "kb"
    import_edu_relat(pt_folder.parent, out)
    return out


def write_pt(path: Path, payload: bytes) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{path.stem}/data.pkl", payload)
        zf.writestr(f"{path.stem}/version", "3\n")
    return path


# -- the 55 files ---------------------------------------------------------------------------------------------
def test_import_converts_the_55_files_in_the_reference_order(imported, pt_folder):
    files = sorted(pt_folder.glob("*.pt"))
    assert len(files) == 55
    kb = load_kb(imported)
    got = read_paper_sets(imported / PAPER_SETS_FILE, set(kb.rel_ids))
    assert sorted(got) == sorted(int(f.stem) for f in files)
    for f in files:
        assert got[int(f.stem)] == reference_paper_sets(f), f.name  # same sets, same order
    # targets in targets.txt's order, then nothing else
    targets = [int(x) for x in (imported / "targets.txt").read_text().split("\n")[1:] if x]
    assert list(got) == targets
    # the reference's order is not always the order stored in the pickle: the file keeps the reference's
    assert got[214][0] == [38, 109, 131, 152, 156, 214, 222, 224, 268, 394]


def test_every_set_holds_its_target_and_edge_ids_are_fact_ids(imported):
    kb = load_kb(imported)
    got = read_paper_sets(imported / PAPER_SETS_FILE, set(kb.rel_ids))
    assert sum(map(len, got.values())) == 593
    for t, sets in got.items():
        assert all(t in s for s in sets)
    # edge e of family-200-graph.pt is relationship fact e (dukb.kb.edu_relat): a set's facts are those edges
    fact = {f.fact_id: f for f in kb.relationships}
    assert fact[267].relation == "husband" and fact[267].subject == "Payton Gray"


def test_cli_import_line_counts_the_paper_sets(pt_folder, tmp_path, capsys):
    out = tmp_path / "kb"
    assert main(["import-eval-du", str(pt_folder.parent), str(out)]) == 0
    assert capsys.readouterr().out.strip() == (
        f"imported 100 people, 400 relationship facts, 300 biography facts, 55 targets, the paper's sets of 55 "
        f"targets into {out}"
    )


def test_import_without_the_folder_writes_none_and_removes_a_stale_file(pt_folder, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for f in ORIGINAL_FILES:
        shutil.copyfile(pt_folder.parent / f, src / f)
    out = tmp_path / "kb"
    out.mkdir()
    (out / PAPER_SETS_FILE).write_text("target,rank,fact_ids\n0,1,0\n")
    import_edu_relat(src, out)
    assert not (out / PAPER_SETS_FILE).exists()
    assert find_paper_sets(out, set(load_kb(out).rel_ids)) is None


def test_the_benchmark_folder_itself_finds_its_sets_in_original(edu_relat_dir, pt_folder, imported):
    kb = load_kb(edu_relat_dir)
    assert not (edu_relat_dir / PAPER_SETS_FILE).exists()  # the shared folder is read as it is
    sets, where = find_paper_sets(edu_relat_dir, set(kb.rel_ids))
    assert where == pt_folder
    assert sets == read_paper_sets(imported / PAPER_SETS_FILE, set(kb.rel_ids))
    chosen, _ = paper_sets_of(kb, [214, 267])
    assert list(chosen) == [214, 267] and len(chosen[214]) == 6


# -- refusals -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "obj, message",
    [
        ([frozenset({1, 2})], "expected a set of frozensets"),
        ({frozenset({1.5, 2})}, "frozenset of a float is not allowed"),
        ({frozenset({True})}, "frozenset of a bool is not allowed"),
        ({frozenset()}, "non-empty frozensets"),
        ({frozenset({np.float64(3)})}, "refused global|not allowed"),
    ],
)
def test_load_id_sets_refuses_other_content(tmp_path, obj, message):
    path = write_pt(tmp_path / "5.pt", pickle.dumps(obj, protocol=2))
    with pytest.raises(InputError, match=message) as e:
        load_id_sets(path)
    assert str(path) in str(e.value)


def test_protocol4_set_opcodes_cannot_smuggle_other_items(tmp_path):
    # protocol 4 builds sets and frozensets with opcodes, without a global: the content check still holds
    path = write_pt(tmp_path / "5.pt", pickle.dumps({frozenset({"5", 7})}, protocol=4))
    with pytest.raises(InputError, match="expected a set of non-empty frozensets of edge ids"):
        load_id_sets(path)
    assert load_id_sets(write_pt(tmp_path / "6.pt", pickle.dumps({frozenset({6, 7})}, protocol=4))) == [[6, 7]]


class Planted:
    """A pickled object whose reconstruction would create a marker file."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def test_a_pickled_callable_is_refused_and_never_run(pt_folder, tmp_path, capsys):
    marker = tmp_path / "ran"
    src = tmp_path / "src"
    src.mkdir()
    for f in ORIGINAL_FILES:
        shutil.copyfile(pt_folder.parent / f, src / f)
    shutil.copytree(pt_folder, src / "unlearn_minimal_set")
    bad = write_pt(
        src / "unlearn_minimal_set" / "214.pt", pickle.dumps({frozenset({214}), Planted(marker)}, protocol=2)
    )
    assert main(["import-eval-du", str(src), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"dukb: error: {bad}: refused global ")
    assert "only set, frozenset and numpy integer scalars are allowed" in err[0]
    assert not marker.exists()
    assert not (tmp_path / "out" / PAPER_SETS_FILE).exists()


def test_a_file_not_named_by_an_edge_id_or_a_set_without_its_target(tmp_path):
    folder = tmp_path / "unlearn_minimal_set"
    folder.mkdir()
    write_pt(folder / "7.pt", pickle.dumps({frozenset({7, 3})}, protocol=2))
    assert read_pt_folder(folder, range(10)) == {7: [[3, 7]]}
    write_pt(folder / "8.pt", pickle.dumps({frozenset({7, 3})}, protocol=2))
    with pytest.raises(InputError, match=r"8\.pt: set: the set 3 7 does not hold its target 8"):
        read_pt_folder(folder, range(10))
    (folder / "8.pt").unlink()
    write_pt(folder / "9.pt", pickle.dumps({frozenset({9, 30})}, protocol=2))
    with pytest.raises(InputError, match="fact_id 30 is not a relationship fact"):
        read_pt_folder(folder, range(10))
    (folder / "9.pt").unlink()
    write_pt(folder / "x7.pt", pickle.dumps({frozenset({7})}, protocol=2))
    with pytest.raises(InputError, match=r"x7\.pt: expected a file named <edge id>\.pt"):
        read_pt_folder(folder, range(10))


# -- the converted file, tampered -----------------------------------------------------------------------------
GOOD = "target,rank,fact_ids\r\n5,1,5 7\r\n5,2,5 6\r\n0,1,0 3\r\n"


@pytest.mark.parametrize(
    "text, line, message",
    [
        ("target,rank,fact_ids\n5,1,5 7\n5,3,5 6\n", 3, "rank 3 of target 5 is out of sequence"),
        ("target,rank,fact_ids\n5,1,5 7\n0,1,0 3\n5,2,5 6\n", 4, "target 5 appears again after other targets"),
        ("target,rank,fact_ids\n5,1,5 99\n", 2, "fact_id 99 is not a relationship fact of the KB"),
        ("target,rank,fact_ids\n5,1,6 7\n", 2, "does not hold its target 5"),
        ("target,rank,fact_ids\n5,1,5 7\n5,2,5 7\n", 3, "listed twice for target 5"),
        ("target,rank,fact_ids\n5,1,7 5\n", 2, "ascending"),
        ("target,rank,fact_ids\n5,1,5  7\n", 2, "separated by single spaces"),
        ("target,rank,fact_ids\n5,1,5;7\n", 2, "separated by single spaces"),
        ("target,rank,fact_ids\nfive,1,5 7\n", 2, "target 'five' is not an integer"),
        ("target,rank,fact_ids\n99,1,99\n", 2, "target 99 is not a relationship fact of the KB"),
        ("target,rank,fact_ids,note\n5,1,5 7,x\n", 1, "note"),
        ("target,rank,fact_ids\n5,1,5 7,8\n", 2, "expected 3 fields"),
    ],
)
def test_tampered_converted_file_is_refused_at_its_line(tmp_path, capsys, text, line, message):
    kb = tmp_path / "kb"
    shutil.copytree(load_kb("demo").source, kb)
    (kb / PAPER_SETS_FILE).write_text(GOOD)
    assert read_paper_sets(kb / PAPER_SETS_FILE, set(load_kb(kb).rel_ids)) == {5: [[5, 7], [5, 6]], 0: [[0, 3]]}
    (kb / PAPER_SETS_FILE).write_text(text)
    assert main(["mdus", "--kb", str(kb), "--target-id", "5", "--method", "paper"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"dukb: error: {kb / PAPER_SETS_FILE}:{line}: "), err
    assert message in err[0]


def test_an_empty_converted_file_is_refused(tmp_path):
    path = tmp_path / PAPER_SETS_FILE
    path.write_text("target,rank,fact_ids\n")
    with pytest.raises(InputError, match="lists no set"):
        read_paper_sets(path, range(10))


def test_write_then_read_round_trip_keeps_the_order(tmp_path):
    sets = {5: [[5, 7], [5, 6]], 0: [[3, 0]]}
    write_paper_sets(tmp_path / PAPER_SETS_FILE, sets, order=[5])
    assert (tmp_path / PAPER_SETS_FILE).read_bytes() == b"target,rank,fact_ids\r\n5,1,5 7\r\n5,2,5 6\r\n0,1,0 3\r\n"
    assert read_paper_sets(tmp_path / PAPER_SETS_FILE, range(10)) == {5: [[5, 7], [5, 6]], 0: [[0, 3]]}
