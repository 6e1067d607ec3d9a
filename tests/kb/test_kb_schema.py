"""KB schemas (issue 43 item 1): schema.yaml read at FILE:LINE, the shipped family schema, KBs of any schema.

The family schema must reproduce every current result: the fingerprints and closures below were computed with
dukb before schemas existed (commit 01810cc) and are recorded here.

Sources: Wu et al. 2025, Sec. 2 (the KB K, the rules R, the deductive closure); EDU-RELAT's family relations.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
from importlib import resources
from pathlib import Path

import pytest
import schema_logic as sl  # tests/ is on sys.path (pyproject's pythonpath)
from input_checks import assert_one_line_error, error_lines, run_main

from dukb import InputError
from dukb.kb import ATTRIBUTES, OBJECT_GENDER, RELATIONS, SUBJECT_GENDER, KBError, check_kb, load_kb
from dukb.kb.generate import default_generated_kb_dir
from dukb.kb.io import save_kb
from dukb.kb.kbschema import SCHEMA_FILE, family_schema, load_schema, schema_of
from dukb.solver.closure import compute_closure

#: (KB fingerprint, sha256[:16] of the closure CSV, closure size, ground instances) before schemas (commit 01810cc).
BEFORE = {
    "demo": ("cd5f5963b05fcbdf", "58a0634d6dce2e24", 50, 162),
    "generated": ("ebbf95597dbfe2c7", "03db4152727abf19", 606, 2270),
}


def _closure_digest(kb) -> tuple[str, str, int, int]:
    c = compute_closure(kb)
    fh = io.StringIO()
    c.write_csv(fh)
    return kb.fingerprint(), hashlib.sha256(fh.getvalue().encode()).hexdigest()[:16], len(c), c.n_instances


# ------------------------------------------------------------------------------------------- family schema ------
def test_family_schema_is_the_family_constants():
    s = family_schema()
    assert s.name == "family" and s.relation_names == RELATIONS and s.attribute_names == ATTRIBUTES
    assert s.entity_types == ("male", "female") and s.entity_predicate == "person"
    assert (s.entities_file, s.name_column, s.type_column) == ("people.csv", "name", "gender")
    for r in s.relations:
        assert r.object == OBJECT_GENDER.get(r.name, "any") and r.subject == SUBJECT_GENDER.get(r.name, "any")
        assert not r.functional and r.qa_answer == "relation"
    templates = json.loads(resources.files("dukb.data").joinpath("templates", "probes.json").read_text())["edu"]
    father = family_schema().relation("father")
    assert father.template("qa") == templates["relationship"]["qa"]
    assert father.template("fact") == templates["relationship"]["fact"].replace("{r}", "father")
    assert father.template("yes") == "Is {o} {s}'s father?" and father.template("no") == templates["relationship"]["no"]


@pytest.mark.parametrize("which", sorted(BEFORE))
def test_family_results_unchanged(which):
    kb = load_kb("demo" if which == "demo" else default_generated_kb_dir())
    assert kb.schema is family_schema() and kb.schema.is_family
    assert _closure_digest(kb) == BEFORE[which]


def test_family_schema_yaml_in_a_kb_changes_nothing(tmp_path):
    demo = Path(str(resources.files("dukb.data").joinpath("demo")))
    kb_dir = tmp_path / "demo"
    shutil.copytree(demo, kb_dir)
    shutil.copy(Path(str(resources.files("dukb.data").joinpath("schemas", "family.yaml"))), kb_dir / SCHEMA_FILE)
    assert schema_of(kb_dir).is_family
    assert _closure_digest(load_kb(kb_dir)) == BEFORE["demo"]


# ---------------------------------------------------------------------------------------- schema.yaml errors ------
BASE = """\
schema_version: 1
name: tiny
entity_types: [city, country]
relations:
  located_in:
    subject: city
    object: country
    templates: {cloze: "{s} is in", yes: "Is {s} in {o}?", no: "Is {s} in {wrong}?"}
"""


@pytest.mark.parametrize(
    "text, line, fragment",
    [
        (
            BASE.replace("    object: country", "    objekt: country"),
            7,
            "unknown key 'objekt' in relation 'located_in' (did you mean 'object'?)",
        ),
        (
            BASE.replace("entity_types:", "entity_typs:"),
            3,
            "unknown key 'entity_typs' in the schema (did you mean 'entity_types'?)",
        ),
        (
            BASE.replace("object: country", "object: contry"),
            7,
            "unknown entity type 'contry' as relation 'located_in''s object (did you mean 'country'?",
        ),
        (
            BASE + "  located_in: {subject: city, object: city}\n",
            9,
            "duplicate key 'located_in' in relations (first on line 5)",
        ),
        (BASE + "  city: {subject: city, object: country}\n", 9, "relation 'city' has the name of an entity type"),
        (BASE + "  Near: {subject: city, object: city}\n", 9, "relation name 'Near' is not a name"),
        (BASE + "  not: {subject: city, object: city}\n", 9, "relation name 'not' is a reserved word"),
        (BASE.replace("[city, country]", "[city, country, city]"), 3, "duplicate entity type 'city'"),
        (BASE.replace('{s} is in"', '{s} is in {x}"'), 8, "unknown placeholder {x}"),
        (
            BASE.replace("cloze:", "clozed:"),
            8,
            "unknown key 'clozed' in the templates of relation 'located_in' (did you mean 'cloze'?)",
        ),
        (
            BASE.replace('"{s} is in"', '"It is in"'),
            8,
            "template 'cloze' of relation 'located_in' 'It is in' must use {s}",
        ),
        (BASE.replace("cloze:", 'fact: "{s} is somewhere.", cloze:'), 8, "template 'fact' of relation 'located_in'"),
        (BASE.replace("cloze:", 'reverse: "Name a city.", cloze:'), 8, "must use exactly one of {s} and {o}"),
        (
            BASE.replace("cloze:", 'description: ["{o} is big.", "It is nice."], cloze:'),
            8,
            "'It is nice.' must use {s} or {o}",
        ),
        (BASE.replace("cloze:", 'reverse: "Is {s} in {o}?", cloze:'), 8, "must use exactly one of {s} and {o}"),
        (
            BASE + "attributes:\n  population: {templates: {fact: 'The population of {s} is large.'}}\n",
            10,
            "template 'fact' of attribute 'population' 'The population of {s} is large.' must use {v}",
        ),
        (BASE.replace("schema_version: 1", "schema_version: 2"), 1, "schema_version must be 1"),
        (BASE.replace("name: tiny\n", ""), 1, "missing key 'name'"),
        (BASE.replace("    subject: city\n", "    subject: city\n   bad: [\n"), 7, "bad YAML"),
        (
            BASE.replace("    functional", "    functional").replace(
                "    object: country", "    object: country\n    functional: maybe"
            ),
            8,
            "relation 'located_in''s functional must be true or false",
        ),
    ],
)
def test_schema_errors_at_file_line(tmp_path, text, line, fragment):
    p = tmp_path / SCHEMA_FILE
    p.write_text(text)
    with pytest.raises(InputError) as e:
        load_schema(p)
    assert (e.value.path, e.value.line) == (str(p), line), str(e.value)
    assert fragment in e.value.message, str(e.value)


def test_schema_reads_yes_and_no_as_template_forms(tmp_path):
    p = tmp_path / SCHEMA_FILE
    p.write_text(BASE)
    r = load_schema(p).relation("located_in")
    assert r.template("yes") == "Is {s} in {o}?" and r.template("no") == "Is {s} in {wrong}?"
    assert (r.subject, r.object, r.functional, r.symmetric) == ("city", "country", False, False)


def test_bad_schema_is_one_cli_line(capsys, tmp_path):
    kb_dir = sl.write_tiny_kb(tmp_path / "kb")
    (kb_dir / SCHEMA_FILE).write_text(
        sl.TINY_SCHEMA.replace(
            "  sibling: {subject: person, object: person, symmetric: true}", "  sibling: [person, person]"
        )
    )
    rc, _, err = run_main(capsys, "closure", "--kb", kb_dir)
    line = assert_one_line_error(rc, err, "schema.yaml:12: relation 'sibling' must be a mapping")
    assert str(kb_dir) in line


def test_fingerprint_follows_the_schema(tmp_path):
    kb_dir = sl.write_tiny_kb(tmp_path / "kb")
    before = load_kb(kb_dir).fingerprint()
    (kb_dir / SCHEMA_FILE).write_text(sl.TINY_SCHEMA.replace("{s} lives in {o}.", "{s} resides in {o}."))
    assert load_kb(kb_dir).fingerprint() != before
    (kb_dir / SCHEMA_FILE).write_text("# a comment\n" + sl.TINY_SCHEMA)
    assert load_kb(kb_dir).fingerprint() == before


# ------------------------------------------------------------------------------------------- KBs of a schema ------
def test_non_family_kb_loads_with_its_types(tmp_path):
    kb = load_kb(sl.write_tiny_kb(tmp_path / "kb"))
    assert kb.schema.name == "kids_places" and not kb.schema.is_family
    assert [kb.entity_type(n) for n in ("Ann", "Lyon", "Spain")] == ["person", "city", "country"]
    assert len(kb.people) == 8 and len(kb.relationships) == 7
    check_kb(kb)
    copy = load_kb(save_kb(kb, tmp_path / "copy"))
    assert copy.fingerprint() == kb.fingerprint() and copy.schema == kb.schema


@pytest.mark.parametrize(
    "row, fragment",
    [
        (
            "7,Ann,lives_in,Paris",
            "functional relation 'lives_in': 'Ann' already has the object 'Lyon' (line 4); at most "
            "one object per subject",
        ),
        (
            "7,Lyon,kid,Ann",
            "fact (Lyon, kid, Ann) violates its relation's types: the subject of 'kid' must be person, but is city",
        ),
        ("7,Ann,lives_in,France", "the object of 'lives_in' must be city, but is country"),
        ("7,Ann,child,Bo", "unknown relation 'child' (known: kid, sibling, lives_in, located_in, citizen_of)"),
        ("7,Ann,kid,Eve", "entity 'Eve' is not in entities.csv"),
        ("7,Ann,kid,Ann", "reflexive fact (Ann, kid, Ann)"),
    ],
)
def test_non_family_fact_problems_at_file_line(capsys, tmp_path, row, fragment):
    kb_dir = sl.write_tiny_kb(tmp_path / "kb")
    with open(kb_dir / "relationships.csv", "a") as fh:
        fh.write(row + "\n")
    with pytest.raises(KBError) as e:
        load_kb(kb_dir)
    assert e.value.line == 9 and fragment in e.value.message, str(e.value)
    rc, _, err = run_main(capsys, "validate", "--kb", kb_dir)
    (line,) = error_lines(rc, err, validate=True)
    assert "relationships.csv:9: " in line and fragment in line


def test_non_family_entity_type_problem(tmp_path):
    kb_dir = sl.write_tiny_kb(tmp_path / "kb")
    (kb_dir / "entities.csv").write_text(sl.TINY_ENTITIES.replace("Spain,country", "Spain,nation"))
    with pytest.raises(
        KBError,
        match=r"entities\.csv:9: type of 'Spain' is 'nation', not one of person, city, "
        r"country",
    ):
        load_kb(kb_dir)


def test_non_family_duplicate_entity_is_not_a_person(tmp_path):
    kb_dir = sl.write_tiny_kb(tmp_path / "kb")
    (kb_dir / "entities.csv").write_text(sl.TINY_ENTITIES + "Lyon,city\n")
    with pytest.raises(KBError) as e:
        load_kb(kb_dir)
    assert e.value.line == 10 and e.value.message == "duplicate entity 'Lyon'", str(e.value)


def test_validate_checks_the_rules_of_a_schema_kb(capsys, tmp_path):
    kb_dir = sl.write_tiny_kb(tmp_path / "kb")
    rc, out, _ = run_main(capsys, "validate", "--kb", kb_dir)
    assert rc == 0 and out.startswith("ok: 8 entities")
    with open(kb_dir / "rules.lp", "a") as fh:
        fh.write("holds(A,boss,B) :- holds(B,kid,A).\n")
    rc, _, err = run_main(capsys, "validate", "--kb", kb_dir)
    line = assert_one_line_error(rc, err, "rules.lp:8: unknown relation 'boss'")
    assert str(kb_dir) in line
    (kb_dir / "rules.lp").unlink()
    rc, out, err = run_main(capsys, "validate", "--kb", kb_dir)
    assert rc == 0 and out.startswith("ok: 8 entities") and "has no rules.lp" in err


def test_validate_notes_rules_that_derive_facts_breaking_the_types(capsys, tmp_path):
    from dukb.solver.closure import type_violations

    kb_dir = sl.write_tiny_kb(tmp_path / "kb")
    assert type_violations(compute_closure(load_kb(kb_dir))) == (0, [])
    with open(kb_dir / "rules.lp", "a") as fh:  # no city(B) guard: a country becomes a city one lives in
        fh.write("holds(A,lives_in,B) :- holds(A,citizen_of,B).\n")
    n, examples = type_violations(compute_closure(load_kb(kb_dir)))
    assert n == 4 and examples[0] == (
        ("Ann", "lives_in", "France"),
        "the object of 'lives_in' must be city, but is country",
        8,
    )
    rc, out, err = run_main(capsys, "validate", "--kb", kb_dir)
    assert rc == 0 and out.startswith("ok: 8 entities")
    assert f"dukb: note: {kb_dir}/rules.lp:8: the rules derive 4 fact(s) that break their relation's types" in err


def test_validate_notes_a_symmetric_relation_the_rules_leave_unmirrored(capsys, tmp_path):
    from dukb.solver.closure import unmirrored

    kb_dir = sl.write_tiny_kb(tmp_path / "kb")
    assert unmirrored(compute_closure(load_kb(kb_dir))) == (0, [])  # sibling: symmetric by its rule
    rules = sl.TINY_RULES.replace("holds(B,sibling,A) :- holds(A,sibling,B).\n", "")
    (kb_dir / "rules.lp").write_text(
        rules.replace("holds(B,sibling,C) :- holds(A,kid,B), holds(A,kid,C), B != C.\n", "")
    )
    assert unmirrored(compute_closure(load_kb(kb_dir))) == (1, [("Bo", "sibling", "Cy")])
    rc, out, err = run_main(capsys, "validate", "--kb", kb_dir)
    assert rc == 0 and out.startswith("ok: 8 entities")
    assert "1 fact(s) of a relation declared symmetric in schema.yaml lack their mirror, e.g. (Bo, sibling, Cy)" in err


def test_validate_notes_rules_that_give_a_functional_relation_two_objects(capsys, tmp_path):
    from dukb.solver.closure import functional_conflicts

    kb_dir = sl.write_tiny_kb(tmp_path / "kb")
    assert functional_conflicts(compute_closure(load_kb(kb_dir))) == (0, [])
    rc, _, err = run_main(capsys, "validate", "--kb", kb_dir)
    assert rc == 0 and "functional" not in err
    # Bo lives in Paris (a KB fact) and, by line 2's rule (a kid lives where its parent lives), in Lyon
    (kb_dir / "relationships.csv").write_text(sl.TINY_FACTS + "7,Bo,lives_in,Paris\n")
    assert functional_conflicts(compute_closure(load_kb(kb_dir))) == (1, [("Bo", "lives_in", "Paris", "Lyon", [2])])
    rc, out, err = run_main(capsys, "validate", "--kb", kb_dir)
    assert rc == 0 and out.startswith("ok: 8 entities")
    assert (
        f"dukb: note: {kb_dir}/rules.lp:2: the closure gives 1 subject(s) two objects of the functional relation "
        "'lives_in', e.g. (Bo, lives_in, Paris) and (Bo, lives_in, Lyon) (derived by the rule(s) on line(s) 2)"
    ) in err
