"""`dukb restor` on a KB with its own schema (issue 43, item 6): RESTOR's corruption (Rezaei et al., Sec. 3.2)
draws each wrong object among the entities of the relation's object type whose fact is false in the closure, its
documents and the clean model's text state facts with the relations' ``fact``/``description`` templates, and every
fact is asked with its ``qa`` template; what a schema lacks is refused in one line. End to end with the tiny model on
the small geography KB (tests/small_geo_kb.py)."""

from __future__ import annotations

import csv
import json

import pytest
from input_checks import assert_one_line_error, run_main
from small_geo_kb import write_small_geo_kb

from dukb import InputError
from dukb.kb import load_kb
from dukb.kb.corrupt import corrupt, statement_templates
from dukb.kb.io import check_kb
from dukb.neural.restor.facts import fact_probes, fact_sentences
from dukb.solver.closure import compute_closure


@pytest.fixture(scope="module")
def geo(tmp_path_factory):
    return write_small_geo_kb(tmp_path_factory.mktemp("geo") / "kb")


def test_wrong_objects_have_the_relations_object_type_and_are_false_in_the_closure(geo):
    kb = load_kb(geo)
    closure = set(compute_closure(kb, geo / "rules.lp").atoms)
    for seed in range(4):
        result = corrupt(kb, 0.2, seed=seed, k_context=3, closure=closure)
        assert len(result.facts) == 15 and len({c.subject for c in result.facts}) == 3
        for c in result.facts:
            if c.fact_kind == "relationship":
                assert kb.entity_type(c.injected_value) == kb.schema.relation(c.predicate).object
                assert (c.subject, c.predicate, c.injected_value) not in closure
            else:  # population: another value of the attribute
                assert c.injected_value != c.true_value and c.injected_value.isdigit()
        check_kb(result.kb)  # types and functional relations hold in the corrupted KB
        assert result.kb.schema == kb.schema


def test_documents_and_clean_text_come_from_the_templates(geo):
    kb = load_kb(geo)
    result = corrupt(kb, 0.2, seed=0, k_context=3, closure=compute_closure(kb, geo / "rules.lp").atoms)
    templates = statement_templates(kb)
    assert templates[("relationship", "capital")] == (
        "The capital of {s} is {o}.",
        "{o} is the capital city of {s}.",
        "The government of {s} sits in {o}.",
    )
    for doc in result.documents:
        for s in doc.sentences:
            if s.role == "incorrect":
                c = next(c for c in result.facts if (c.fact_kind, c.fact_id) == (s.fact_kind, s.fact_id))
                assert c.injected_value in s.sentence and c.subject in s.sentence
    sentences = fact_sentences(kb)
    assert sentences[:3] == [
        "The capital of France is Paris.",
        "Paris is the capital city of France.",
        "The government of France sits in Paris.",
    ]
    assert fact_sentences(kb, 1)[:2] == ["The capital of France is Paris.", "France lies in Europe."]
    probes = fact_probes(kb, compute_closure(kb, geo / "rules.lp").atoms, result.facts, 5, 0)
    assert probes[0].question == "What is the capital of France?" and probes[0].true_value == "Paris"
    assert probes[0].item().kind == "qa" and probes[0].form == "qa"
    for p in probes:
        if p.fact_kind == "relationship":
            typ = kb.schema.relation(p.predicate).object
            assert all(kb.entity_type(x) == typ for x in p.random)


def test_belief_contradictions_use_the_schemas_functional_relations(tmp_path):
    """A derived belief of a relation the schema declares functional contradicts the model's own other answer (the
    family's father/mother/husband/wife apply to the family schema only)."""
    import schema_logic as sl

    from dukb.solver.beliefs import belief_closure, contradictions, functional_relations

    kb = load_kb(sl.write_tiny_kb(tmp_path / "kb"))
    assert functional_relations(kb.schema) == ("lives_in", "located_in")
    beliefs = [("Ann", "kid", "Bo"), ("Ann", "lives_in", "Lyon"), ("Bo", "lives_in", "Paris")]
    cl = belief_closure(kb, beliefs, compute_closure(kb).rules)
    false, contra = contradictions(cl, set(compute_closure(kb).atoms))
    assert contra == [("Bo", "lives_in", "Lyon")] and false == []


def test_what_restor_cannot_ask_is_refused_in_one_line(capsys, tmp_path):
    """A relation whose qa form asks for the relation word, or without a fact template (a relation without a qa
    template: tests/protocols/test_rwku_any_schema.py)."""
    geo = write_small_geo_kb(tmp_path / "geo")
    text = (geo / "schema.yaml").read_text()
    (geo / "schema.yaml").write_text(
        text.replace('    templates: {fact: "{s} borders {o}.", ', "    qa_answer: relation\n    templates: {")
    )
    rc, _, err = run_main(capsys, "restor", "--kb", geo, "--rules", geo / "rules.lp", "-o", tmp_path / "r2")
    assert_one_line_error(
        rc, err, "relation 'neighbour' has qa_answer: relation: restor asks every fact for its object"
    )
    with pytest.raises(InputError, match="relation 'neighbour' has no 'fact' template: restor"):
        corrupt(load_kb(geo), 0.2)


@pytest.mark.slow
def test_restor_end_to_end_on_a_geography_schema(geo, tmp_path):
    from dukb.cli.main import main

    run = tmp_path / "run"
    assert (
        main(
            [
                "restor",
                "--kb",
                str(geo),
                "--rules",
                str(geo / "rules.lp"),
                "-o",
                str(run),
                "--samples",
                "1",
                "--docs-per-entity",
                "4",
                "--n-retain",
                "8",
                "--n-random",
                "5",
                "--templates",
                "1",
                "--clean-epochs",
                "60",
                "--corrupt-lr",
                "5e-3",
                "--methods",
                "ga",
                "--device",
                "cpu",
            ]
        )
        == 0
    )
    kb = load_kb(geo)
    with open(run / "corruption" / "corruptions.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 15
    for r in rows:
        if r["fact_kind"] == "relationship":
            assert kb.entity_type(r["injected_value"]) == kb.schema.relation(r["predicate"]).object
    facts = [json.loads(x) for x in (run / "probes" / "facts.jsonl").read_text().splitlines()]
    assert len(facts) == 68 and all(f["form"] == "qa" for f in facts)
    (row,) = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    assert row["method"] == "ga" and 0 <= row["beliefs"]["n_beliefs_false"] <= row["beliefs"]["n_beliefs"]
    report = (run / "report.md").read_text()
    assert "Table 1: accuracy" in report and "facts of 3 entities" in report and "4 per entity" in report
    assert json.loads((run / "config.json").read_text())["schema"] == "small_geo"
    assert "(s, r, entity) answers" in report and "father" not in report and "person" not in report
    functional = ", ".join(r.name for r in kb.schema.relations if r.functional)
    assert f"derived facts of a functional relation ({functional}) whose" in " ".join(report.split())
