"""Rules over any relation (issue 43 item 2): random schemas, rule files and KBs; a hand-written non-family KB.

Properties, on random schemas (tests/schema_logic.py; 2-5 entity types, 2-6 relations, type and != guards):

- the numpy closure (dukb.solver.horn) equals clingo's, facts, order and ground instances, and both equal an
  independent naive forward chaining (Wu et al. 2025, Definition 1);
- the exact minimal deep unlearning sets (clingo) equal a brute-force enumeration of every subset of K
  (Definitions 2-3).

Sources: Wu et al. 2025, Sec. 2 (K, R, Omega(K, R)), Definitions 1-3.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
import schema_logic as sl  # tests/ is on sys.path (pyproject's pythonpath)
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from input_checks import assert_one_line_error, run_main

from dukb.kb import load_kb
from dukb.kb.kbschema import load_schema
from dukb.solver.closure import compute_closure
from dukb.solver.mdus import exact_sets, is_deep_unlearning_set
from dukb.solver.rules import RulesError, kb_rules, load_rules, parse_rules
from dukb.solver.targets import resolve_target

PROPS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _load(kb: sl.RandomKB):
    tmp = Path(tempfile.mkdtemp(prefix="dukb-schema-"))
    return load_kb(kb.write(tmp / "kb"))


@PROPS
@given(kb=sl.schemas())
def test_numpy_closure_equals_clingo_and_the_reference(kb):
    k = _load(kb)
    assert k.schema.relation_names == tuple(r[0] for r in kb.relations)
    a = compute_closure(k, method="numpy")
    b = compute_closure(k, method="clingo")
    event(f"derived facts: {min(a.n_derived, 5)}{'+' if a.n_derived >= 5 else ''}")
    assert a.atoms == b.atoms
    assert set(a.atoms) == sl.closure(kb.facts.values(), kb.entities, kb.rules)
    assert a.n_instances == b.n_instances
    assert np.array_equal(a.inst_rule, b.inst_rule) and np.array_equal(a.inst_head, b.inst_head)
    assert [tuple(x) for x in a.inst_body] == [tuple(x) for x in b.inst_body]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), kb=sl.schemas(max_facts=8))
def test_exact_sets_equal_brute_force(data, kb):
    k = _load(kb)
    c = compute_closure(k)
    assume(len(c) > 0)
    derived = c.n_derived > 0 and data.draw(st.booleans(), label="derived?")  # a derived target when there is one
    t = data.draw(st.sampled_from(range(c.n_kb, len(c)) if derived else range(len(c))), label="target")
    event(f"target is {c.source(t)}")
    res = exact_sets(c, [t])
    assert res.complete
    assert {frozenset(s) for s in res.sets} == sl.brute_force_mdus(kb.facts, kb.entities, kb.rules, [c.atoms[t]])
    for s in res.sets:
        assert is_deep_unlearning_set(c, [t], s)


# --------------------------------------------------------------------------------------------- the tiny KB ------
@pytest.fixture
def tiny(tmp_path) -> Path:
    return sl.write_tiny_kb(tmp_path / "tiny")


def test_tiny_kb_closure(tiny):
    k = load_kb(tiny)
    assert k.schema.name == "kids_places" and k.entity_type("Lyon") == "city"
    c = compute_closure(k)
    assert c.rules.path == tiny / "rules.lp" and kb_rules(k).path == tiny / "rules.lp"
    assert set(c.atoms[c.n_kb :]) == sl.TINY_DERIVED
    assert compute_closure(k, method="clingo").atoms == c.atoms
    assert c.atom_of_triple(("Bo", "citizen_of", "France")) == resolve_target(c, "Bo, citizen_of, France")


def test_tiny_kb_through_the_cli(capsys, tiny):
    rc, out, err = run_main(capsys, "validate", "--kb", tiny)
    assert rc == 0 and "8 entities (schema 'kids_places'), 7 relationship facts" in out, err
    rc, out, err = run_main(capsys, "closure", "--kb", tiny)
    assert rc == 0, err
    rows = [ln.split(",") for ln in out.splitlines()[1:]]
    assert len(rows) == 7 + len(sl.TINY_DERIVED)
    assert {tuple(r[:3]) for r in rows if r[3] == "derived"} == sl.TINY_DERIVED
    rc, out, err = run_main(capsys, "mdus", "--kb", tiny, "--target", "Bo,citizen_of,France", "--target-id", "6")
    assert rc == 0, err
    doc = json.loads(out)
    by = {(e["subject"], e["relation"], e["object"]): e["sets"] for e in doc["targets"]}
    # Bo lives in Lyon only through Ann (kid 0, lives_in 2); Lyon is in France (3)
    assert sorted(by[("Bo", "citizen_of", "France")]) == [[0], [2], [3]]
    # Bo and Cy are siblings by fact 6 and by the kid rule (facts 0 and 1)
    assert sorted(by[("Bo", "sibling", "Cy")]) == [[0, 6], [1, 6]]
    assert doc["rules"] == str(tiny / "rules.lp")


def test_tiny_kb_refusals(capsys, tiny):
    rc, _, err = run_main(capsys, "mdus", "--kb", tiny, "--target", "Bo,citizen,France")
    assert_one_line_error(rc, err, "unknown relation 'citizen'", "closest: citizen_of", "kid, sibling, lives_in")
    rc, _, err = run_main(capsys, "mdus", "--kb", tiny, "--target", "Bo,kid,Ann")
    assert_one_line_error(rc, err, "not in the deductive closure")
    rc, _, err = run_main(capsys, "closure", "--kb", tiny, "--rules", "family")
    assert_one_line_error(rc, err, "built-in rule set 'family' is for family KBs", "kids_places")
    rc, _, err = run_main(capsys, "probes", "--kb", tiny, "--format", "edu", "-o", tiny.parent / "edu")
    assert_one_line_error(rc, err, "has schema 'kids_places': --format edu", "needs the family schema")
    (tiny / "rules.lp").unlink()
    rc, _, err = run_main(capsys, "closure", "--kb", tiny)
    assert_one_line_error(rc, err, "has schema 'kids_places' and no rules.lp")


def test_neural_plan_refuses_a_non_family_kb(tiny):
    from dukb.neural.plan import load_kb_closure

    with pytest.raises(Exception, match="relation 'sibling' has no 'qa' template .*this protocol needs it"):
        load_kb_closure(str(tiny))


# ---------------------------------------------------------------------------------------- rule-file checks ------
def test_rules_checked_against_the_schema(tmp_path, tiny):
    schema = load_schema(tiny / "schema.yaml")
    assert len(parse_rules(sl.TINY_RULES, "r.lp", schema)) == 4
    with pytest.raises(RulesError, match=r"^r\.lp:1: unknown relation 'husband' .*known: kid, sibling, lives_in"):
        parse_rules("holds(A,husband,B) :- holds(B,kid,A).", "r.lp", schema)
    with pytest.raises(
        RulesError,
        match=r"^r\.lp:2: unknown predicate male/1 .*rules may use holds/3, person/1, "
        r"city/1, country/1, entity/1 and the comparisons",
    ):
        parse_rules("\nholds(A,kid,B) :- holds(B,kid,A), male(A).", "r.lp", schema)
    # the family schema's words are unchanged (the family rule files keep their messages)
    with pytest.raises(RulesError, match="unknown relation 'kid' .*known: child, father"):
        parse_rules("holds(A,kid,B) :- holds(B,child,A).", "r.lp")
    with pytest.raises(RulesError, match="holds/3, male/1, female/1, person/1 and the comparisons"):
        parse_rules("holds(A,child,B) :- holds(B,child,A), city(A).", "r.lp")
    # a relation variable and type guards compile for the numpy path as for clingo
    p = tmp_path / "sym.lp"
    p.write_text("holds(B,R,A) :- holds(A,R,B), person(A), person(B), A != B.\n")
    rs = load_rules(p, schema)
    k = load_kb(tiny)
    assert compute_closure(k, rs, "numpy").atoms == compute_closure(k, rs, "clingo").atoms
    with pytest.raises(RulesError, match="checked against schema 'family'"):
        compute_closure(k, load_rules("family"))
