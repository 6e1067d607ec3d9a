"""The numpy closure (dukb/solver/horn.py, the default) against clingo's full grounding (``method="clingo"``, the
reference path): same facts in the same order, same sources and fact_ids, same ground instances in the same order,
and the same minimal deep unlearning sets, on generated KBs, on hypothesis families (weird names included) and on
user rule files (every rule file load_rules accepts compiles for the numpy evaluator; an ordering comparison is
refused when the file is loaded)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_solver_properties import FAST, RULE_SETS, families  # this folder is on sys.path (prepend import mode)

from dukb.kb import KB
from dukb.kb.generate import generate
from dukb.solver.closure import compute_closure
from dukb.solver.mdus import closure_loss, minimal_sets
from dukb.solver.rules import RulesError, load_rules


def assert_same(fast, full) -> None:
    """Two closures of one KB are identical: facts, order, sources, fact_ids, instances (order too)."""
    assert fast.method == "numpy" and full.method == "clingo"
    assert fast.atoms == full.atoms
    assert fast.n_kb == full.n_kb and fast.fact_ids == full.fact_ids
    assert [fast.source(i) for i in range(len(fast))] == [full.source(i) for i in range(len(full))]
    assert fast.n_instances == full.n_instances
    assert np.array_equal(fast.inst_rule, full.inst_rule)
    assert np.array_equal(fast.inst_head, full.inst_head)
    assert list(fast.inst_body) == list(full.inst_body)
    assert [list(fast.by_head[a]) for a in range(len(fast))] == [list(full.by_head[a]) for a in range(len(full))]
    assert [fast.by_body[a] for a in range(len(fast))] == [full.by_body[a] for a in range(len(full))]
    assert all(fast.index[t] == i == full.index[t] for i, t in enumerate(full.atoms))


def same_sets(fast, full, targets) -> None:
    for t in targets:
        for method, kw in (("exact", {}), ("random", {"n_seeds": 10}), ("minimum", {})):
            a = minimal_sets(fast, [t], method, **kw)
            b = minimal_sets(full, [t], method, **kw)
            assert (a.sets, a.complete, a.cone_atoms, a.cone_instances) == (
                b.sets,
                b.complete,
                b.cone_atoms,
                b.cone_instances,
            ), (t, method)


@pytest.mark.parametrize("n_people,seed", [(60, 0), (150, 1), (400, 2), (1000, 3)])
@pytest.mark.parametrize("rule_set", RULE_SETS)
def test_fast_closure_equals_clingo_on_generated_kbs(n_people, seed, rule_set):
    kb, _ = generate(n_people, seed=seed)
    fast = compute_closure(kb, rule_set)
    full = compute_closure(kb, rule_set, method="clingo")
    assert_same(fast, full)
    rng = random.Random(seed)
    targets = rng.sample(range(len(full)), min(8, len(full)))  # KB and derived facts
    same_sets(fast, full, targets)
    for t in targets[:4]:  # the forward-cone closure_loss against recomputing Omega(K \ U) from scratch
        u = set(minimal_sets(fast, [t], "exact").sets[0]) | ({fast.fact_ids[t]} if fast.is_kb(t) else set())
        rest = KB(kb.people, [f for f in kb.relationships if f.fact_id not in u])
        assert closure_loss(fast, u) == closure_loss(full, u) == len(full) - len(compute_closure(rest, rule_set))
    for _ in range(10):  # random sets too, not only minimal ones: removed facts may stay derivable another way
        u = set(rng.sample(kb.rel_ids, 3))
        rest = KB(kb.people, [f for f in kb.relationships if f.fact_id not in u])
        assert closure_loss(fast, u) == len(full) - len(compute_closure(rest, rule_set)), sorted(u)


def test_closure_loss_counts_an_atom_rederived_from_outside_the_forward_cone(tmp_path, kb_builder):
    """sister :- wife; sister :- mother; niece :- wife, sister. Removing (a,wife,b) loses the wife fact and the
    niece fact, but (a,sister,b) stays derivable from (a,mother,b) through an instance wholly outside U's forward
    cone: the loss is 2, not 3."""
    rules = tmp_path / "r.lp"
    rules.write_text(
        "holds(X,sister,Y) :- holds(X,wife,Y).\n"
        "holds(X,sister,Y) :- holds(X,mother,Y).\n"
        "holds(X,niece,Y) :- holds(X,wife,Y), holds(X,sister,Y).\n"
    )
    kb = kb_builder({"a": "male", "b": "female"}, [("a", "wife", "b"), ("a", "mother", "b")], validate=False)
    for method in ("auto", "clingo"):
        c = compute_closure(kb, str(rules), method=method)
        assert closure_loss(c, [0]) == 2


@FAST
@given(fam=families(weird=True), rule_set=st.sampled_from(RULE_SETS))
def test_fast_closure_equals_clingo_on_families(kb_builder, fam, rule_set):
    kb = kb_builder(fam.genders, fam.facts)
    fast, full = compute_closure(kb, rule_set), compute_closure(kb, rule_set, method="clingo")
    assert_same(fast, full)
    same_sets(fast, full, range(min(len(full), 4)))


USER_RULES = {
    # a variable relation, = and != guards, person/1, a repeated body atom shape
    "general": """
holds(A,R,B) :- holds(B,R,A), holds(A,child,C), holds(B,child,C), person(A), A != B.
holds(A,sister,D) :- holds(A,brother,B), holds(B,sister,D), female(D), A != D.
holds(A,child,B) :- holds(A,child,B), holds(A,child,C), B = C.
holds(B,nephew,A) :- holds(A,uncle,B), male(A), B != A.
""",
    # an ordering comparison: outside the accepted fragment, load_rules refuses it (tests/solver/test_rule_parser.py)
    "ordering": """
holds(B,brother,A) :- holds(A,brother,B), male(A), A < B.
holds(A,husband,B) :- holds(B,wife,A), male(B), female(A), A != B.
""",
}


@pytest.mark.parametrize("name", sorted(USER_RULES))
def test_user_rules_fast_or_fallback(tmp_path, name):
    path = tmp_path / f"{name}.lp"
    path.write_text(USER_RULES[name], encoding="utf-8")
    if name == "ordering":
        with pytest.raises(RulesError, match=r"ordering\.lp:2: ordering comparison"):
            load_rules(path)
        return
    rules = load_rules(path)
    kb, _ = generate(200, seed=5)
    full = compute_closure(kb, rules, method="clingo")
    fast = compute_closure(kb, rules)
    assert_same(fast, full)
    assert fast.n_derived > 0


def test_unknown_closure_method():
    from dukb import InputError

    kb, _ = generate(20, seed=0)
    with pytest.raises(InputError, match="unknown closure method"):
        compute_closure(kb, method="magic")


def test_lazy_instances_are_not_grounded_for_facts_only():
    kb, _ = generate(300, seed=0)
    c = compute_closure(kb)
    assert c._inst is None and len(c.atoms) == len(c)  # listing facts grounds no instance
    assert c.n_instances > 0 and c._inst is not None


def test_loaded_kb_name_index_gives_the_same_closure(tmp_path):
    """load_kb records each fact's name positions; the closure read through them equals the in-memory one."""
    from dukb.kb import load_kb, save_kb

    kb, _ = generate(500, seed=4)
    loaded = load_kb(save_kb(kb, tmp_path / "kb"))
    assert loaded.name_index() is not None and kb.name_index() is None
    assert_same(compute_closure(loaded), compute_closure(loaded, method="clingo"))
    assert compute_closure(loaded).atoms == compute_closure(kb).atoms
    loaded.relationships = loaded.relationships[::-1]  # a changed KB: the recorded positions no longer apply
    assert loaded.name_index() is None
    assert set(compute_closure(loaded).atoms) == set(compute_closure(kb).atoms)
