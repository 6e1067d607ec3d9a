"""Property-based tests of the symbolic core: closure, ground instances, minimal deep unlearning sets, recall.

Every property is checked against the independent plain-Python reference in ``independent_logic.py`` (written
from the benchmark's raw rule text, sharing no code with dukb.solver) on random, gender-consistent family KBs:

- random KBs: a few people with random genders and random facts whose relation fits the genders;
- family-tree KBs: a random subset of the true relations of a small random family tree, so that rules fire.

Sources: Wu et al. 2025, Definitions 1-3 (closure, deep unlearning set, minimal set), Algorithms 1-3, Eq. 1-2;
notes/deep-unlearning.md (guards, the "newphe" rules, the exact characterisation).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import clingo
import independent_logic as il  # tests/ is on sys.path (pyproject's pythonpath)
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from conftest import EDU_RELAT_DIR
from dukb import InputError
from dukb.kb import RELATIONS, Fact
from dukb.kb.csvfile import control_char
from dukb.solver.closure import asp_string, compute_closure
from dukb.solver.mdus import exact_sets, is_deep_unlearning_set, is_minimal, minimal_sets, minimum_set, random_sets
from dukb.solver.metrics import recall_accuracy
from dukb.solver.rules import load_rules
from dukb.solver.targets import resolve_target

RULE_SETS = ("family", "family_paper_compat")
#: The independent reference rules: parsed from the benchmark's raw file when ../shared is there, else from the
#: copy embedded in independent_logic (test_embedded_rules_are_the_benchmark_file checks they are the same).
INDEPENDENT = {rs: il.parse_raw_rules(il.load_raw_rules(EDU_RELAT_DIR), rs) for rs in RULE_SETS}

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BRUTE = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ------------------------------------------------------------------------------------------------ strategies ------
@dataclass(frozen=True)
class Family:
    """A generated KB: genders (person -> gender, in order) and facts (fact_id -> triple, in file order)."""

    genders: dict
    facts: dict

    def __repr__(self) -> str:  # short, readable falsifying examples
        return f"Family(genders={self.genders!r}, facts={self.facts!r})"


GENDER = st.sampled_from(("male", "female"))

#: Names that would change an ASP program if pasted into it unescaped, and other awkward strings.
TRICKY_NAMES = (
    'x"). holds("a",child,"b',
    'a"',
    '"',
    "\\",
    '\\"',
    "x\\",
    "O'Brien",
    "%",
    "% c",
    ":-",
    ".",
    "a.b",
    "p :- q.",
    '")',
    "#show",
    "😀",
    "Zoë Ångström",
    "李雷",
    "a,b",
    " spaced ",
    "\u0085",
    "\u00a0",
    '"). person("z',
    'x") :- holds("a",child,"b',
    "holds",
    "child",
    "A",
    "_",
    "1",
    "-1",
    "#inf",
)

#: Any name the KB validation accepts: non-empty, no control character (dukb.kb.csvfile.control_char: categories
#: Cc, Zl, Zp, Cs and U+FEFF).
NAME_TEXT = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cc", "Zl", "Zp", "Cs"), exclude_characters="\ufeff"),
    min_size=1,
    max_size=12,
)
WEIRD_NAME = st.one_of(st.sampled_from([n for n in TRICKY_NAMES if control_char(n) is None]), NAME_TEXT)


def _names(draw, n: int, weird: bool) -> list[str]:
    if not weird:
        return [f"P{i}" for i in range(n)]
    return draw(st.lists(WEIRD_NAME, min_size=n, max_size=n, unique=True))


def _ids(draw, n: int) -> list[int]:
    """Distinct fact_ids in an arbitrary order (not 0..n-1), so atom order and fact ids stay apart."""
    return list(draw(st.permutations(range(2 * n)), label="fact ids")[:n])


@st.composite
def random_families(draw, max_people: int = 6, max_facts: int = 12, weird: bool = False) -> Family:
    """A few people with random genders and random non-reflexive, gender-consistent facts."""
    n = draw(st.integers(2, max_people))
    names = _names(draw, n, weird)
    genders = {p: draw(GENDER) for p in names}
    cands = [(s, r, o) for s in names for o in names for r in RELATIONS if il.allowed((s, r, o), genders)]
    k = min(draw(st.integers(1, max_facts), label="number of facts"), len(cands))
    triples = draw(st.lists(st.sampled_from(cands), min_size=k, max_size=k, unique=True))
    return Family(genders, dict(zip(_ids(draw, len(triples)), triples)))


@st.composite
def tree_families(draw, max_facts: int = 12, weird: bool = False) -> Family:
    """A random subset of the true relations of a small family tree (two or three generations)."""
    genders: dict[str, str] = {}
    parents: dict[str, tuple[str, ...]] = {}
    couples: list[tuple[str, str]] = []

    def new(g):
        name = f"P{len(genders)}"
        genders[name] = g
        return name

    h, w = new("male"), new("female")
    couples.append((h, w))
    kids = [new(draw(GENDER)) for _ in range(draw(st.integers(1, 3)))]
    for k in kids:
        parents[k] = (h, w) if draw(st.integers(0, 5)) else (draw(st.sampled_from((h, w))),)
    for k in kids:
        if draw(st.booleans()):
            sp = new("female" if genders[k] == "male" else "male")
            couples.append((k, sp) if genders[k] == "male" else (sp, k))
            for _ in range(draw(st.integers(0, 2))):
                parents[new(draw(GENDER))] = (k, sp)
    true = sorted(il.family_tree_facts(genders, parents, couples))
    k = min(draw(st.integers(1, max_facts), label="number of facts"), len(true))
    triples = draw(st.lists(st.sampled_from(true), min_size=k, max_size=k, unique=True))
    if weird:  # rename everybody
        new_names = dict(zip(genders, _names(draw, len(genders), True)))
        genders = {new_names[p]: g for p, g in genders.items()}
        triples = [(new_names[s], r, new_names[o]) for s, r, o in triples]
    return Family(genders, dict(zip(_ids(draw, len(triples)), triples)))


def families(max_facts: int = 12, weird: bool = False):
    """Random KBs and family-tree KBs, half and half."""
    return st.one_of(random_families(max_facts=max_facts, weird=weird), tree_families(max_facts=max_facts, weird=weird))


def reference_closure(fam: Family, rule_set: str) -> set:
    """Omega(K, R) of a generated KB by the independent forward chaining (set of triples)."""
    return il.closure(fam.facts.values(), fam.genders, INDEPENDENT[rule_set])


def instance_set(closure) -> set:
    """The closure's ground instances as {(head triple, frozenset of body triples)}."""
    a = closure.atoms
    return {(a[h], frozenset(a[b] for b in body)) for h, body in zip(closure.inst_head, closure.inst_body)}


# ------------------------------------------------------------------------------------- the reference itself ------
def test_embedded_rules_are_the_benchmark_file(edu_relat_dir):
    path = il.raw_rules_file(edu_relat_dir)
    if not path.is_file():
        pytest.skip(f"{path} not found")
    assert path.read_text(encoding="utf-8").strip("\n") == il.RAW_RULES.strip("\n")


def test_reference_rule_sets_differ_only_in_the_newphe_rules():
    fam, compat = INDEPENDENT["family"], INDEPENDENT["family_paper_compat"]
    assert len(fam) == len(compat) == 48 == len(load_rules("family")) == len(load_rules("family_paper_compat")) + 2
    differ = [(a.number, b.number) for a, b in zip(fam, compat) if a != b]
    dead = [r.number for r in compat if any(rel == "newphe" for _, rel, _ in r.body)]
    assert [d[0] for d in differ] == dead == [16, 19]
    assert all(rel in RELATIONS for r in fam for _, rel, _ in r.body + (r.head,))
    assert set(il.FAMILY_RELATIONS) == set(RELATIONS)


@FAST
@given(fam=st.one_of(random_families(max_facts=7), tree_families(max_facts=7)), rule_set=st.sampled_from(RULE_SETS))
def test_reference_oracle_matches_plain_closure(fam, rule_set):
    """The bitmask oracle the brute force uses agrees with recomputing the closure from scratch."""
    oracle = il.SubsetOracle(fam.facts, fam.genders, INDEPENDENT[rule_set])
    ids = sorted(fam.facts)
    rng = random.Random(len(ids))
    for atom in oracle.atoms[:6]:
        for _ in range(6):
            removed = frozenset(i for i in ids if rng.random() < 0.4)
            assert oracle.derivable([atom], removed) == oracle.derivable_slow([atom], removed)


def test_generators_make_rules_fire():
    """A good share of generated KBs has derived facts (otherwise the properties below test little)."""
    counts = {"tree": [0, 0], "random": [0, 0]}

    for kind, strat in (("tree", tree_families()), ("random", random_families())):

        @settings(max_examples=60, deadline=None, database=None)
        @given(fam=strat)
        def sample(fam):
            counts[kind][0] += 1  # noqa: B023  (called in this iteration)
            counts[kind][1] += len(reference_closure(fam, "family")) > len(fam.facts)  # noqa: B023

        sample()
    assert counts["tree"][1] >= 0.6 * counts["tree"][0], counts
    assert counts["random"][1] >= 0.4 * counts["random"][0], counts


# ------------------------------------------------------------------------------------------------- closure ------
@FAST
@given(fam=families(), rule_set=st.sampled_from(RULE_SETS))
def test_closure_matches_independent_forward_chaining(kb_builder, fam, rule_set):
    kb = kb_builder(fam.genders, fam.facts)
    c = compute_closure(kb, rule_set)
    ref = reference_closure(fam, rule_set)
    event(f"derived facts: {'yes' if c.n_derived else 'no'}")
    assert set(c.atoms) == ref
    assert len(c.atoms) == len(ref)
    # KB facts first in file order, then the derived facts sorted; ids and index agree
    assert c.n_kb == len(fam.facts) and c.atoms[: c.n_kb] == list(fam.facts.values())
    assert c.fact_ids == list(fam.facts)
    assert c.atoms[c.n_kb :] == sorted(ref - set(fam.facts.values()))
    assert all(c.index[t] == i for i, t in enumerate(c.atoms))
    # the hypergraph: exactly the independent ground instances over the closure
    assert instance_set(c) == {
        (h, frozenset(b)) for h, b in il.ground_instances(ref, fam.genders, INDEPENDENT[rule_set])
    }
    assert all(
        c.inst_head[i] in set(range(len(c.atoms))) and i in c.by_head[c.inst_head[i]] for i in range(c.n_instances)
    )


@FAST
@given(fam=families(), rule_set=st.sampled_from(RULE_SETS))
def test_closure_is_closed_and_idempotent(kb_builder, fam, rule_set):
    kb = kb_builder(fam.genders, fam.facts)
    c = compute_closure(kb, rule_set)
    atoms = set(c.atoms)
    assert set(fam.facts.values()) <= atoms  # contains K
    assert il.apply_rules(atoms, fam.genders, INDEPENDENT[rule_set]) <= atoms  # closed under R
    again = compute_closure(kb_builder(fam.genders, list(c.atoms)), rule_set)  # Omega(Omega(K)) = Omega(K)
    assert set(again.atoms) == atoms and again.n_derived == 0


@FAST
@given(data=st.data(), fam=families(), rule_set=st.sampled_from(RULE_SETS))
def test_closure_is_monotone(kb_builder, data, fam, rule_set):
    sub_ids = data.draw(st.lists(st.sampled_from(sorted(fam.facts)), unique=True), label="K1 fact ids")
    small = {i: fam.facts[i] for i in fam.facts if i in sub_ids}
    c_big = compute_closure(kb_builder(fam.genders, fam.facts), rule_set)
    c_small = compute_closure(kb_builder(fam.genders, small), rule_set)
    assert set(c_small.atoms) <= set(c_big.atoms)


@FAST
@given(fam=families())
def test_family_rules_derive_at_least_the_compat_rules(kb_builder, fam):
    """family = compat plus the two nephew rules, so its closure is a superset (Horn rules are monotone)."""
    kb = kb_builder(fam.genders, fam.facts)
    assert set(compute_closure(kb, "family_paper_compat").atoms) <= set(compute_closure(kb, "family").atoms)


@FAST
@given(fam=families(weird=True), rule_set=st.sampled_from(RULE_SETS))
def test_names_survive_the_asp_round_trip(kb_builder, fam, rule_set):
    """Any name the validation accepts comes back exactly, and no name changes the program."""
    kb = kb_builder(fam.genders, fam.facts)
    c = compute_closure(kb, rule_set)
    assert set(c.atoms) == reference_closure(fam, rule_set)
    assert {x for s, _, o in c.atoms for x in (s, o)} <= set(fam.genders)
    for i, t in enumerate(c.atoms):
        assert resolve_target(c, t) == i


def test_injection_names_add_no_facts(kb_builder):
    """A name that closes the string and writes a fact, a rule or a comment is data, nothing else."""
    payload = 'x"). holds("a",child,"b'
    genders = {
        "a": "female",
        "b": "male",
        payload: "male",
        'y"). male("a': "female",
        "%": "male",
        'z" :- holds(X,child,Y). holds("a",husband,"b': "male",
    }
    facts = [
        (payload, "sister", 'y"). male("a'),
        ("%", "brother", payload),
        ('z" :- holds(X,child,Y). holds("a",husband,"b', "child", payload),
    ]
    for rule_set in RULE_SETS:
        c = compute_closure(kb_builder(genders, facts), rule_set)
        fam = Family(genders, dict(enumerate(facts)))
        assert set(c.atoms) == reference_closure(fam, rule_set)
        assert not any("a" in (s, o) or "b" in (s, o) for s, _, o in c.atoms)
        assert (payload, "brother", "%") in c.atoms  # the rules did fire on the odd names


@settings(max_examples=200, deadline=None)
@given(
    text=st.one_of(
        NAME_TEXT,
        st.sampled_from(TRICKY_NAMES),
        st.text(st.characters(codec="utf-8", min_codepoint=1), min_size=1, max_size=12),
    )
)
def test_asp_string_is_a_single_exact_string_term(text):
    ctl = clingo.Control(["--warn=none"])
    ctl.add("base", [], f"p({asp_string(text)}). q :- p({asp_string(text)}).")
    ctl.ground([("base", [])])
    syms = [sa.symbol for sa in ctl.symbolic_atoms]
    assert sorted(s.name for s in syms) == ["p", "q"]
    p = next(s for s in syms if s.name == "p")
    assert len(p.arguments) == 1 and p.arguments[0].type == clingo.SymbolType.String
    assert p.arguments[0].string == text


@FAST
@given(fam=families(), rule_set=st.sampled_from(RULE_SETS))
def test_resolve_target_forms_agree(kb_builder, fam, rule_set):
    c = compute_closure(kb_builder(fam.genders, fam.facts), rule_set)
    for i, (s, r, o) in enumerate(c.atoms):
        assert resolve_target(c, (s, r, o)) == resolve_target(c, f"{s}, {r} ,{o}") == i
        assert resolve_target(c, Fact(-1, s, r, o)) == i
    for pos, fid in enumerate(fam.facts):
        assert resolve_target(c, fid) == pos
    with pytest.raises(InputError):
        resolve_target(c, max(fam.facts) + 1)
    outside = next(
        ((s, r, o) for s in fam.genders for o in fam.genders for r in RELATIONS if (s, r, o) not in c.index), None
    )
    if outside is not None:
        with pytest.raises(InputError):
            resolve_target(c, outside)


# -------------------------------------------------------------------------------------- deep unlearning sets ------
def _draw_targets(data, closure, k: int = 1) -> list[int]:
    n = len(closure.atoms)
    # a derived target half of the time when there is one
    pool = (
        list(range(closure.n_kb, n))
        if closure.n_derived and data.draw(st.booleans(), label="derived?")
        else list(range(n))
    )
    ts = data.draw(
        st.lists(st.sampled_from(pool), min_size=min(k, len(pool)), max_size=min(k, len(pool)), unique=True),
        label="targets",
    )
    return ts


@BRUTE
@given(data=st.data(), fam=families(), rule_set=st.sampled_from(RULE_SETS))
def test_exact_sets_equal_brute_force(kb_builder, data, fam, rule_set):
    c = compute_closure(kb_builder(fam.genders, fam.facts), rule_set)
    (t,) = _draw_targets(data, c)
    event(f"target is {c.source(t)}")
    res = exact_sets(c, [t])
    assert res.complete
    got = [frozenset(s) for s in res.sets]
    assert len(set(got)) == len(got) and res.sets == sorted(res.sets, key=lambda s: (len(s), s))
    assert set(got) == il.brute_force_mdus(fam.facts, fam.genders, INDEPENDENT[rule_set], [c.atoms[t]])
    for s in res.sets:
        assert is_deep_unlearning_set(c, [t], s)
        assert is_minimal(c, [t], s)
    assert minimal_sets(c, t, "exact").sets == res.sets


@BRUTE
@given(data=st.data(), fam=families(), rule_set=st.sampled_from(RULE_SETS))
def test_joint_exact_sets_equal_brute_force(kb_builder, data, fam, rule_set):
    c = compute_closure(kb_builder(fam.genders, fam.facts), rule_set)
    ts = _draw_targets(data, c, k=data.draw(st.integers(2, 3), label="number of targets"))
    res = exact_sets(c, ts)
    assert res.complete
    brute = il.brute_force_mdus(fam.facts, fam.genders, INDEPENDENT[rule_set], [c.atoms[t] for t in ts])
    assert {frozenset(s) for s in res.sets} == brute
    for s in res.sets:
        assert is_minimal(c, ts, s)


@FAST
@given(data=st.data(), fam=families(), rule_set=st.sampled_from(RULE_SETS))
def test_is_deep_unlearning_set_matches_reference(kb_builder, data, fam, rule_set):
    c = compute_closure(kb_builder(fam.genders, fam.facts), rule_set)
    ts = _draw_targets(data, c, k=data.draw(st.integers(1, 2)))
    oracle = il.SubsetOracle(fam.facts, fam.genders, INDEPENDENT[rule_set])
    for _ in range(8):
        removed = data.draw(st.lists(st.sampled_from(sorted(fam.facts)), unique=True), label="U")
        expect = not oracle.derivable([c.atoms[t] for t in ts], frozenset(removed))
        assert is_deep_unlearning_set(c, ts, removed) == expect


@FAST
@given(
    data=st.data(),
    fam=families(),
    rule_set=st.sampled_from(RULE_SETS),
    seed=st.integers(0, 10**6),
    n_seeds=st.integers(1, 25),
)
def test_random_sets_are_exact_sets_and_deterministic(kb_builder, data, fam, rule_set, seed, n_seeds):
    c = compute_closure(kb_builder(fam.genders, fam.facts), rule_set)
    ts = _draw_targets(data, c, k=data.draw(st.integers(1, 2)))
    exact = set(exact_sets(c, ts).sets)
    first = random_sets(c, ts, n_seeds=n_seeds, seed=seed)
    again = random_sets(c, ts, n_seeds=n_seeds, seed=seed)
    assert first.sets == again.sets and first.n_seeds == n_seeds and not first.complete
    assert 1 <= len(first.sets) <= n_seeds
    assert set(first.sets) <= exact
    assert minimal_sets(c, ts, "random", n_seeds=n_seeds, seed=seed).sets == first.sets


@FAST
@given(data=st.data(), fam=families(), rule_set=st.sampled_from(RULE_SETS))
def test_minimum_set_is_a_smallest_minimal_set(kb_builder, data, fam, rule_set):
    c = compute_closure(kb_builder(fam.genders, fam.facts), rule_set)
    ts = _draw_targets(data, c, k=data.draw(st.integers(1, 2)))
    exact = exact_sets(c, ts).sets
    res = minimum_set(c, ts)
    assert res.complete and len(res.sets) == 1
    (m,) = res.sets
    assert m in exact  # a minimum-cardinality set is subset-minimal
    assert all(len(m) <= len(s) for s in exact)
    assert len(m) == min(len(s) for s in exact)


def test_bad_method_and_empty_targets_are_input_errors(kb_builder):
    c = compute_closure(kb_builder({"a": "male", "b": "female"}, [("a", "child", "b")]))
    with pytest.raises(InputError):
        minimal_sets(c, [], "exact")
    with pytest.raises(InputError):
        minimal_sets(c, [0], "fastest")
    with pytest.raises(InputError):
        random_sets(c, [0], n_seeds=0)


# -------------------------------------------------------------------------------------------- recall/accuracy ------
@st.composite
def recall_cases(draw):
    n_rel = draw(st.integers(1, 14))
    ids = draw(st.lists(st.integers(0, 99), min_size=n_rel, max_size=n_rel, unique=True))
    n_bio = draw(st.integers(0, 6))
    sets = draw(st.lists(st.frozensets(st.sampled_from(ids), min_size=1), min_size=1, max_size=8, unique=True))
    forgotten = draw(st.frozensets(st.sampled_from(ids)))
    forgotten_bio = draw(st.frozensets(st.integers(0, n_bio - 1))) if n_bio else frozenset()
    return n_rel, ids, n_bio, sets, forgotten, forgotten_bio


@settings(max_examples=300, deadline=None)
@given(case=recall_cases())
def test_recall_accuracy_matches_equations_1_and_2(kb_builder, case):
    n_rel, ids, n_bio, sets, forgotten, forgotten_bio = case
    people = {f"P{i}": "male" for i in range(5)}
    pairs = [(f"P{i}", "child", f"P{j}") for i in range(5) for j in range(5) if i != j]
    kb = kb_builder(people, dict(zip(ids, pairs)), [("P0", "job", f"job {i}") for i in range(n_bio)])
    targets = sorted(sets[0])[:1]
    res = recall_accuracy(kb, sets, forgotten, forgotten_bio, "exact", targets)
    ref = il.reference_recall(n_rel, n_bio, sets, forgotten, forgotten_bio)
    assert math.isclose(res.recall, ref["recall"], rel_tol=1e-12, abs_tol=1e-12)

    def same(got, want):  # the reference's None (nothing to score) is dukb's NaN, never 1.0
        return math.isnan(got) if want is None else math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-12)

    # tie rule: the best accuracy among the sets with maximal recall (a set leaving facts to score first)
    assert same(res.accuracy_relationships, ref["accuracy_relationships"])
    assert frozenset(res.best_set) in ref["best_sets"]
    k = ref["best_sets"].index(frozenset(res.best_set))
    assert same(res.accuracy_all, ref["accuracy_all"][k])
    if n_bio:
        assert math.isclose(res.accuracy_biographies, ref["accuracy_biographies"], rel_tol=1e-12)
    else:
        assert res.accuracy_biographies is None
    assert res.ties == len(ref["candidates"]) and res.n_sets == len(sets)
    assert res.target_forgotten == (targets[0] in forgotten)
    assert 0.0 <= res.recall <= 1.0
    assert math.isnan(res.accuracy_relationships) or 0.0 <= res.accuracy_relationships <= 1.0
    assert math.isnan(res.accuracy_all) or 0.0 <= res.accuracy_all <= 1.0


def test_recall_accuracy_refuses_bad_input(kb_builder):
    kb = kb_builder({"a": "male", "b": "female"}, {3: ("a", "child", "b"), 7: ("b", "child", "a")})
    with pytest.raises(InputError):
        recall_accuracy(kb, [], {3})
    with pytest.raises(InputError):
        recall_accuracy(kb, [()], {3})
    with pytest.raises(InputError):
        recall_accuracy(kb, [(3,)], {4})


# ---------------------------------------------------------------------------------------------------- EDU-RELAT ------
@pytest.fixture(scope="module")
def edu(edu_relat_dir, edu_relat_target_ids):
    """EDU-RELAT's KB, its closures under both rule sets, and the exact sets of the 55 targets."""
    from dukb.kb import load_kb

    kb = load_kb(edu_relat_dir)
    targets = edu_relat_target_ids
    out = {"kb": kb, "targets": targets, "closure": {}, "exact": {}}
    for rs in RULE_SETS:
        c = compute_closure(kb, rs)
        out["closure"][rs] = c
        out["exact"][rs] = {t: exact_sets(c, [resolve_target(c, t)]) for t in targets}
    return out


def test_edu_relat_closure_has_562_facts(edu):
    kb = edu["kb"]
    genders = {p.name: p.gender for p in kb.people.values()}
    for rs in RULE_SETS:
        c = edu["closure"][rs]
        assert (len(c), c.n_kb, c.n_derived) == (562, 400, 162)
        assert set(c.atoms) == il.closure([f.triple for f in kb.relationships], genders, INDEPENDENT[rs])
    assert set(edu["closure"]["family"].atoms) == set(edu["closure"]["family_paper_compat"].atoms)


def test_edu_relat_rule_sets_give_different_minimal_sets(edu):
    """Same closure, but the nephew rules change the minimal sets of some targets (notes/deep-unlearning.md).

    The targets where they differ are printed (run with -s to see them).
    """
    kb, targets = edu["kb"], edu["targets"]
    genders = {p.name: p.gender for p in kb.people.values()}
    facts = {f.fact_id: f.triple for f in kb.relationships}
    differ = [
        t for t in targets if set(edu["exact"]["family"][t].sets) != set(edu["exact"]["family_paper_compat"][t].sets)
    ]
    print(
        "EDU-RELAT targets whose minimal sets differ between family and family_paper_compat:",
        [(t, str(kb.relationship(t))) for t in differ],
    )
    assert differ

    def derivable(triple, removed, rs):  # the independent reference
        kept = [tr for i, tr in facts.items() if i not in set(removed)]
        return triple in il.closure(kept, genders, INDEPENDENT[rs])

    for t in differ:
        triple = kb.relationship(t).triple
        for rs in RULE_SETS:
            for s in edu["exact"][rs][t].sets:  # each set deeply unlearns under its own rules
                assert not derivable(triple, s, rs)
        # and the difference is real: a compat set leaves the target derivable under family, or a family set is
        # not minimal under compat
        compat_sets, family_sets = edu["exact"]["family_paper_compat"][t].sets, edu["exact"]["family"][t].sets
        assert any(derivable(triple, s, "family") for s in compat_sets) or any(
            not derivable(triple, set(s) - {x}, "family_paper_compat") for s in family_sets for x in s
        )
    # more rules derive more, so a deep unlearning set under family is one under compat too
    compat = edu["closure"]["family_paper_compat"]
    for t in targets:
        for s in edu["exact"]["family"][t].sets:
            assert is_deep_unlearning_set(compat, [resolve_target(compat, t)], s)


def test_edu_relat_exact_sets_are_minimal_deep_unlearning_sets(edu):
    assert len(edu["targets"]) == 55
    for rs in RULE_SETS:
        c = edu["closure"][rs]
        for t in edu["targets"]:
            res = edu["exact"][rs][t]
            atom = resolve_target(c, t)
            assert res.complete and res.sets
            assert all(is_minimal(c, [atom], s) for s in res.sets)
            assert all(t in s for s in res.sets)  # a KB target stays in K minus U unless U holds it
