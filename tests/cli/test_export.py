"""`dukb export`: a KB's facts, probe forms and targets' forget/retain splits as Hugging Face datasets or Parquet
files (issue 42, item 4).

Every export is loaded back with `datasets` (``load_from_disk``, ``load_dataset("parquet", ...)`` and through the
card's configs), offline, and its row counts are compared with figures computed here without dukb's export: the KB
files read with the csv module, the closure from tests/independent_logic.py (the benchmark's raw rules), the probe
forms' coverage from which fact kinds each form asks about, and the minimum forget sets by brute force.
"""

from __future__ import annotations

import csv
import itertools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import independent_logic as ind
import pytest
import yaml

from conftest import REPO_ROOT
from dukb.kb import load_kb
from dukb.kb.io import resolve_kb_path
from dukb.kb.probes import KINDS, make_probes
from tests.cli.test_symbolic_commands import cli  # noqa: F401  (the fixture: dukb ARGS in-process)

DEMO = resolve_kb_path("demo")
#: the forms that ask only about relationship facts (``dukb probes --help``: "rel" alone); the others ask about both
REL_ONLY = {"yes", "no", "reverse"}
TARGETS = (0, 5)


def _csv_rows(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def demo_files():
    people = _csv_rows(DEMO / "people.csv")
    rels = _csv_rows(DEMO / "relationships.csv")
    bios = _csv_rows(DEMO / "biographies.csv")
    genders = {p["name"]: p["gender"] for p in people}
    facts = {int(r["fact_id"]): (r["subject"], r["relation"], r["object"]) for r in rels}
    return people, rels, bios, genders, facts


def _derives(facts: dict, genders: dict, kept: set[int], target: int) -> bool:
    rules = ind.parse_raw_rules()
    return facts[target] in ind.closure([facts[i] for i in kept], genders, rules)


def _minimum_forget_size(facts: dict, genders: dict, target: int) -> int:
    """The size of a minimum deep unlearning set of ``target`` by brute force (Wu et al. 2025, Definition 2)."""
    for k in range(1, len(facts) + 1):
        for gone in itertools.combinations(sorted(facts), k):
            if not _derives(facts, genders, set(facts) - set(gone), target):
                return k
    raise AssertionError("no deep unlearning set")


@pytest.fixture
def hf(monkeypatch, tmp_path):
    """The `datasets` package, offline, its caches under tmp_path."""
    datasets = pytest.importorskip("datasets", reason="datasets is not installed (pip install -e '.[test]')")
    for var in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE"):
        monkeypatch.setenv(var, "1")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True, raising=False)
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    return datasets


def _load_back(datasets, out: Path, fmt: str, cache: Path) -> dict:
    """config -> split -> list of rows, read with load_from_disk (hf) or load_dataset("parquet", ...) (parquet)."""
    loaded = {}
    for folder in sorted(p for p in out.iterdir() if p.is_dir()):
        if fmt == "hf":
            dd = datasets.load_from_disk(str(folder))
        else:
            files = {p.stem: str(p) for p in folder.glob("*.parquet")}
            dd = datasets.load_dataset("parquet", data_files=files, cache_dir=str(cache))
        loaded[folder.name] = {split: dd[split].to_list() for split in dd}
    return loaded


@pytest.mark.parametrize("fmt", ["hf", "parquet"])
def test_demo_exports_and_loads_back_with_the_kb_s_counts(fmt, tmp_path, cli, hf, demo_files):
    people, rels, bios, genders, facts = demo_files
    out = tmp_path / "out"
    rc, stdout, err = cli(
        "export",
        "--kb",
        "demo",
        "--format",
        fmt,
        "-o",
        out,
        *itertools.chain.from_iterable(("--target-id", t) for t in TARGETS),
    )
    assert rc == 0, err
    assert stdout.startswith(f"wrote {out} ({fmt}): ") and err == ""
    data = _load_back(hf, out, fmt, tmp_path / "cache")
    assert set(data) == {
        "people",
        "relationships",
        "biographies",
        "closure",
        "probes",
        "targets",
        *(f"target_{t}" for t in TARGETS),
    }
    # the KB's files
    assert [r["name"] for r in data["people"]["train"]] == [p["name"] for p in people]
    assert [(r["fact_id"], r["subject"], r["relation"], r["object"]) for r in data["relationships"]["train"]] == [
        (int(r["fact_id"]), r["subject"], r["relation"], r["object"]) for r in rels
    ]
    assert [(r["fact_id"], r["attribute"], r["value"]) for r in data["biographies"]["train"]] == [
        (int(b["fact_id"]), b["attribute"], b["value"]) for b in bios
    ]
    # the closure: the benchmark's raw rules, forward-chained independently
    omega = ind.closure(facts.values(), genders, ind.parse_raw_rules())
    got = data["closure"]["train"]
    assert {(r["subject"], r["relation"], r["object"]) for r in got} == omega and len(got) == len(omega)
    assert sum(r["source"] == "kb" for r in got) == len(rels)
    # the probe forms: one split per form, a row per fact the form asks about
    assert set(data["probes"]) == set(KINDS)
    for kind, rows in data["probes"].items():
        assert len(rows) == len(rels) + (0 if kind in REL_ONLY else len(bios)), kind
        assert {r["kind"] for r in rows} == {kind}
    assert data["probes"]["qa"] == [p.to_dict() for p in make_probes(load_kb("demo"), "qa")]
    # each target's splits: a minimum deep unlearning set and every other fact
    by_target = {r["fact_id"]: r for r in data["targets"]["train"]}
    assert list(by_target) == list(TARGETS)
    for t in TARGETS:
        forget, retain = data[f"target_{t}"]["forget"], data[f"target_{t}"]["retain"]
        gone = {r["fact_id"] for r in forget}
        assert all(r["fact_kind"] == "relationship" for r in forget)
        assert len(forget) == _minimum_forget_size(facts, genders, t)
        assert len(retain) == len(rels) + len(bios) - len(forget)
        assert {(r["fact_kind"], r["fact_id"]) for r in retain} | {("relationship", i) for i in gone} == {
            ("relationship", int(r["fact_id"])) for r in rels
        } | {("biography", int(b["fact_id"])) for b in bios}
        kept = {r["fact_id"] for r in retain if r["fact_kind"] == "relationship"}
        assert not _derives(facts, genders, kept, t)
        row = by_target[t]
        assert (row["n_forget"], row["n_retain"], row["derivable_from_retain"], row["forget_scope"]) == (
            len(forget),
            len(retain),
            False,
            "minimum",
        )
        assert sorted(row["forget_fact_ids"]) == sorted(gone)
        assert all(r["question"] and r["answer"] and r["text"] for r in forget + retain)


@pytest.mark.parametrize("fmt", ["hf", "parquet"])
def test_the_card_s_yaml_parses_and_its_configs_load(fmt, tmp_path, cli, hf):
    from dukb import __version__

    out = tmp_path / "out"
    assert cli("export", "--kb", "demo", "--format", fmt, "-o", out, "--target-id", "5", "--kinds", "edu")[0] == 0
    text = (out / "README.md").read_text(encoding="utf-8")
    assert text.startswith("---\n")
    meta = yaml.safe_load(text.split("---\n")[1])
    assert meta["license"] == "mit" and meta["pretty_name"]
    configs = {c["config_name"]: c["data_files"] for c in meta["configs"]}
    assert set(configs) == {p.name for p in out.iterdir() if p.is_dir()}
    assert [f["split"] for f in configs["probes"]] == ["cloze", "yes", "no", "qa"]
    for files in configs.values():
        for f in files:
            assert list(out.glob(f["path"])), f["path"]
    assert f"| KB fingerprint | `{load_kb('demo').fingerprint()}`" in text
    assert f"| dukb version | {__version__} |" in text
    assert f"`dukb export --kb demo --format {fmt} -o {out} --target-id 5 --forget-scope minimum --kinds edu" in text
    dd = hf.load_dataset(str(out), "target_5", cache_dir=str(tmp_path / "cache"))  # through the card's configs
    assert {s: dd[s].num_rows for s in dd} == {"forget": 2, "retain": 30}


def test_targets_default_to_the_kb_s_targets_txt_and_its_licence_is_copied(tmp_path, cli):
    pq = pytest.importorskip("pyarrow.parquet")
    kb = tmp_path / "kb"
    shutil.copytree(DEMO, kb)
    (kb / "targets.txt").write_text("# two targets\n5\n0\n", encoding="utf-8")
    (kb / "LICENSE").write_text("MIT License\n\nCopyright (c) 2024 The Authors\n", encoding="utf-8")
    out = tmp_path / "out"
    rc, _, err = cli("export", "--kb", kb, "--format", "parquet", "-o", out, "--forget-scope", "target")
    assert rc == 0, err
    assert pq.read_table(out / "targets" / "train.parquet").column("fact_id").to_pylist() == [5, 0]
    assert pq.read_table(out / "target_5" / "forget.parquet").column("fact_id").to_pylist() == [5]
    derivable = pq.read_table(out / "targets" / "train.parquet").column("derivable_from_retain").to_pylist()
    assert derivable == [True, True]  # the target alone: the rules derive it again from the rest
    assert (out / "LICENSE").read_bytes() == (kb / "LICENSE").read_bytes()
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "license: mit" in card and "pretty_name: dukb export of the KB kb\n" in card
    # no targets.txt and none given: none, and one line says so; a KB without a licence file: unknown
    (kb / "targets.txt").unlink()
    (kb / "LICENSE").unlink()
    rc, _, err = cli("export", "--kb", kb, "--format", "parquet", "-o", tmp_path / "out2")
    assert rc == 0 and err.count("\n") == 1 and err.startswith("dukb: note: no targets (the KB has no targets.txt")
    assert not (tmp_path / "out2" / "targets").exists() and not (tmp_path / "out2" / "LICENSE").exists()
    assert "license: unknown" in (tmp_path / "out2" / "README.md").read_text(encoding="utf-8")


def _one_error(err: str) -> str:
    assert err.count("\n") == 1 and err.startswith("dukb: error: "), err
    return err


def test_refusals_are_one_line_and_leave_the_output_as_it_was(tmp_path, cli):
    pytest.importorskip("pyarrow")
    out = tmp_path / "out"
    base = ("export", "--kb", "demo", "--format", "parquet", "-o", out)
    for bad, says in (
        (["--target-id", "999"], "no relationship fact has fact_id 999"),
        (["--target-id", "5", "--target-id", "5"], "given twice"),
        (["--forget-scope", "widest"], "unknown forget scope"),
        (["--kinds", "qa,bogus"], "bogus"),
        (["--format", "csv"], "--format"),
    ):
        rc, _, err = cli(*base, *bad)
        assert rc == 2 and says in _one_error(err), (bad, err)
        assert not out.exists(), bad
    targets = tmp_path / "targets.txt"
    targets.write_text("5\nfive\n", encoding="utf-8")
    rc, _, err = cli(*base, "--targets-file", targets)
    assert rc == 2 and f"{targets}:2:" in _one_error(err)
    # a file in the way; a non-empty folder without --force; --force replaces an earlier export only
    (tmp_path / "file").write_text("x")
    assert cli("export", "--kb", "demo", "--format", "parquet", "-o", tmp_path / "file")[0] == 2
    assert cli(*base, "--target-id", "5")[0] == 0
    rc, _, err = cli(*base, "--target-id", "0")
    assert rc == 2 and "--force" in _one_error(err) and (out / "target_5").is_dir()
    assert cli(*base, "--target-id", "0", "--force")[0] == 0
    assert sorted(p.name for p in out.iterdir() if p.name.startswith("target")) == ["target_0", "targets"]
    (out / "notes.txt").write_text("mine")
    rc, _, err = cli(*base, "--force")
    assert rc == 2 and "notes.txt" in _one_error(err) and (out / "notes.txt").read_text() == "mine"
    assert (out / "target_0").is_dir()


def test_a_failed_write_leaves_no_output(tmp_path, cli, monkeypatch):
    pytest.importorskip("pyarrow")
    import dukb.solver.export as export

    def broken(splits, folder):
        folder.mkdir()
        raise OSError(28, "No space left on device", str(folder / "train.parquet"))

    monkeypatch.setattr(export, "_write_parquet", broken)
    rc, _, err = cli("export", "--kb", "demo", "--format", "parquet", "-o", tmp_path / "new" / "out")
    assert rc == 2 and "No space left on device" in _one_error(err)
    assert not (tmp_path / "new").exists()  # nor the folder above it that the export created


def test_without_the_package_one_line_says_what_to_install(tmp_path, cli, monkeypatch):
    for fmt, package in (("hf", "datasets"), ("parquet", "pyarrow")):
        monkeypatch.setitem(sys.modules, package, None)  # importlib.util.find_spec then finds nothing
        rc, _, err = cli("export", "--kb", "demo", "--format", fmt, "-o", tmp_path / fmt)
        assert rc == 2 and f"needs the {package} package" in _one_error(err) and "dukb[export]" in err
        assert not (tmp_path / fmt).exists()


def test_the_generated_default_is_exported_without_writing_outside_out(tmp_path):
    """No --kb: the built-in generated KB, built in memory; nothing is written outside OUT (caches, home, temp), and
    torch is never imported."""
    pytest.importorskip("datasets")
    from dukb.kb.generate import generate

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {
        **os.environ,
        "HOME": str(elsewhere),
        "XDG_CACHE_HOME": str(elsewhere / "cache"),
        "DUKB_CACHE_DIR": str(elsewhere / "dukb"),
        "HF_HOME": str(elsewhere / "hf"),
        "TMPDIR": str(elsewhere),
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": str(REPO_ROOT),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    code = (
        "import sys; from dukb.cli.main import main; "
        "rc = main(['export', '--format', 'hf', '-o', 'out', '--kinds', 'qa']); "
        "print('torch' in sys.modules); sys.exit(rc)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "False"  # the export never imports torch
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "out"]
    assert list(elsewhere.rglob("*")) == []
    card = (tmp_path / "out" / "README.md").read_text(encoding="utf-8")
    assert f"`{generate()[0].fingerprint()}`" in card and "the built-in generated KB" in card
    assert "pretty_name: dukb export of the KB generated-p100-s0" in card


def test_a_schema_kb_exports_its_entities_not_people(tmp_path, cli):
    """A KB with its own schema.yaml: an `entities` configuration (name, type), no family wording in the card."""
    import schema_logic as sl

    pq = pytest.importorskip("pyarrow.parquet")
    kb = sl.write_tiny_kb(tmp_path / "kb")
    (kb / "schema.yaml").write_text(  # export states every fact: a fact template for each relation with facts
        sl.TINY_SCHEMA.replace("  sibling: {", '  sibling: {templates: {fact: "{s} and {o} are siblings."}, ').replace(
            "  located_in: {", '  located_in: {templates: {fact: "{s} is in {o}."}, '
        )
    )
    out = tmp_path / "out"
    rc, _, err = cli("export", "--kb", kb, "--format", "parquet", "-o", out, "--target-id", "6")
    assert rc == 0, err
    assert not (out / "people").exists()
    entities = pq.read_table(out / "entities" / "train.parquet")
    assert entities.column_names == ["name", "type"]
    assert list(zip(*entities.to_pydict().values()))[:5] == [
        ("Ann", "person"),
        ("Bo", "person"),
        ("Cy", "person"),
        ("Di", "person"),
        ("Lyon", "city"),
    ]
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "config_name: entities" in card and "| `entities` | train | 8 | name, type" in card
    assert "family" not in card and "people" not in card and "gender" not in card


#: A KB whose relations have qa templates and no fact template (the black-box test's "mini" KB, issue 43).
MINI_KB = {
    "schema.yaml": "schema_version: 1\nname: mini\nentity_types: [node]\nrelations:\n"
    '  edge:\n    templates: {qa: "Where does {s} lead?"}\n  path:\n    templates: {qa: "What can {s} reach?"}\n',
    "entities.csv": "name,type\na,node\nb,node\nc,node\nd,node\n",
    "relationships.csv": "fact_id,subject,relation,object\n0,a,edge,b\n1,b,edge,c\n2,c,edge,d\n3,a,path,c\n4,a,path,d\n",
    "rules.lp": "holds(X,path,Y) :- holds(X,edge,Y).\nholds(X,path,Z) :- holds(X,path,Y), holds(Y,path,Z).\n",
}


def test_a_kb_without_fact_templates_is_exported_with_null_text(tmp_path, cli):
    """No `fact` template: the text column is null, one note says how many facts lack text and why; the probes
    come from the templates the schema has."""
    pq = pytest.importorskip("pyarrow.parquet")
    kb = tmp_path / "mini"
    kb.mkdir()
    for name, text in MINI_KB.items():
        (kb / name).write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    rc, _, err = cli("export", "--kb", kb, "--format", "parquet", "-o", out, "--target-id", "4")
    assert rc == 0, err
    rels = pq.read_table(out / "relationships" / "train.parquet").to_pydict()
    assert rels["fact_id"] == [0, 1, 2, 3, 4] and rels["text"] == [None] * 5
    notes = [line for line in err.splitlines() if "no text" in line]
    assert notes == [
        f"dukb: note: 5 fact(s) have no text (the text column is null): 'edge', 'path' have no 'fact' template in "
        f"{kb / 'schema.yaml'}"
    ]
    qa = pq.read_table(out / "probes" / "qa.parquet").to_pydict()
    assert qa["question"][:2] == ["Where does a lead?", "Where does b lead?"]
    forget = pq.read_table(out / "target_4" / "forget.parquet").to_pydict()
    assert 4 in forget["fact_id"] and set(forget["text"]) == {None}
    assert forget["question"][forget["fact_id"].index(4)] == "What can a reach, other than b and c?"
