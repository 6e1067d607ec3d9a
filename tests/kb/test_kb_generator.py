"""Tests of the synthetic family-KB generator (dukb.kb.generate, `dukb generate`; issue 3, generator half).

Invariants are checked with hypothesis over seeds, sizes, generation counts and observed shares: a valid KB, genders
consistent with every relation, nobody their own ancestor, parents born before their children, surnames by the
rules, K a subset of the true relations, and the closure of K under the 48 family rules never holding a false fact.
"""

from __future__ import annotations

import collections
import csv

import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import EDU_RELAT_DIR
from dukb import InputError
from dukb.cli.main import main
from dukb.kb import check_kb, gender_violation, load_kb, save_kb
from dukb.kb.generate import (
    EDU_RELAT_OBSERVED,
    GeneratorConfig,
    birthplace_value,
    default_generated_kb,
    default_generated_kb_dir,
    first_names,
    generate,
    job_decade,
    jobs_by_decade,
    surnames,
    us_states,
)
from dukb.kb.schema import RELATIONS
from dukb.solver.closure import compute_closure

EDU = EDU_RELAT_DIR
CFG = GeneratorConfig()

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def surname(name: str) -> str:
    return name.rsplit(" ", 1)[1]


def expected_relations(truth) -> set:
    """The 11 relations recomputed from the parent and spouse arrays alone (EDU-RELAT's semantics)."""
    nm, g = truth.names, truth.gender
    out = set()
    kids = collections.defaultdict(list)
    for c in range(len(nm)):
        if truth.father[c] >= 0:
            kids[(int(truth.father[c]), int(truth.mother[c]))].append(c)
    sib = {c: [b for b in ks if b != c] for ks in kids.values() for c in ks}
    for (f, m), ks in kids.items():
        for c in ks:
            out |= {
                (nm[f], "child", nm[c]),
                (nm[m], "child", nm[c]),
                (nm[c], "father", nm[f]),
                (nm[c], "mother", nm[m]),
            }
            out |= {(nm[c], "brother" if g[b] == 0 else "sister", nm[b]) for b in sib[c]}
            for p in (f, m):
                for s in sib.get(p, []):
                    out.add((nm[c], "uncle" if g[s] == 0 else "aunt", nm[s]))
                    out.add((nm[s], "nephew" if g[c] == 0 else "niece", nm[c]))
    for a in range(len(nm)):
        if truth.spouse[a] >= 0:
            out.add((nm[a], "husband" if g[truth.spouse[a]] == 0 else "wife", nm[truth.spouse[a]]))
    return out


def check_invariants(kb, truth, n, generations, observed):
    """Every invariant of a generated (kb, truth); raises AssertionError on the first broken one."""
    check_kb(kb)  # valid: no duplicate, reflexive or gender-violating fact, known people, integer years
    names = list(kb.people)
    assert names == truth.names and len(names) == n == len(set(names))
    people = kb.people

    # the true relations are exactly the network's relations, and respect every relation's genders
    assert len(truth.relations) == len(set(truth.relations))
    assert set(truth.relations) == expected_relations(truth)
    for s, r, o in truth.relations:
        assert gender_violation(r, people[s].gender, people[o].gender) is None, (s, r, o)
    for i, p in enumerate(names):
        assert people[p].gender == ("male", "female")[truth.gender[i]]
        assert 0 <= people[p].generation == truth.generation[i] < generations

    # family structure: both parents or none, parents married to each other, one spouse, same generation
    for i in range(n):
        f, m, s = truth.father[i], truth.mother[i], truth.spouse[i]
        assert (f < 0) == (m < 0)
        if f >= 0:
            assert truth.gender[f] == 0 and truth.gender[m] == 1 and truth.spouse[f] == m and truth.spouse[m] == f
            assert truth.generation[f] == truth.generation[i] - 1
        if s >= 0:
            assert truth.spouse[s] == i and truth.gender[s] != truth.gender[i]
            assert truth.generation[s] == truth.generation[i]
    per_couple = collections.Counter(int(m) for m in truth.mother if m >= 0)
    assert max(per_couple.values(), default=0) <= CFG.max_children

    # nobody is their own ancestor (parent edges from the true facts, not from the arrays)
    dag = nx.DiGraph()
    dag.add_nodes_from(names)
    dag.add_edges_from((o, s) for s, r, o in truth.relations if r in ("father", "mother"))
    assert nx.is_directed_acyclic_graph(dag)

    # birth years: parents before children, within the configured ages; spouse gaps within range
    for s, r, o in truth.relations:
        if r == "mother":
            assert CFG.mother_age_min <= people[s].birthyear - people[o].birthyear <= CFG.mother_age_max
        if r == "father":
            assert people[s].birthyear - people[o].birthyear >= CFG.father_min_age
        if r == "husband":  # o is s's husband
            assert CFG.spouse_gap_min <= people[s].birthyear - people[o].birthyear <= CFG.spouse_gap_max

    # surnames: the father's; a married woman keeps hers or took her husband's
    for i, p in enumerate(names):
        sn = surname(p)
        born = truth.birth_surname[i]
        if truth.father[i] >= 0:  # a man's surname never changes, so this is the father's surname
            assert born == surname(names[truth.father[i]])
        if truth.gender[i] == 0 or truth.spouse[i] < 0:
            assert sn == born
        else:
            assert sn in (born, surname(names[truth.spouse[i]]))

    # biographies: 3 per person in people order, matching people.csv
    assert [b.fact_id for b in kb.biographies] == list(range(3 * n))
    states = set(us_states()[0])
    for i, p in enumerate(names):
        by, bp, job = kb.biographies[3 * i : 3 * i + 3]
        assert (by.subject, by.attribute, by.value) == (p, "birthyear", str(people[p].birthyear))
        assert (bp.subject, bp.attribute, bp.value) == (p, "birthplace", birthplace_value(people[p].birthplace))
        assert (job.subject, job.attribute, job.value) == (p, "job", people[p].job)
        assert people[p].birthplace in states
        assert people[p].job in jobs_by_decade()[job_decade(people[p].birthyear)]

    # K: fact_ids 0.. in order, a subset of the truth of the chosen size
    assert [f.fact_id for f in kb.relationships] == list(range(len(kb.relationships)))
    k = [f.triple for f in kb.relationships]
    assert k == truth.observed and set(k) <= truth.triples
    assert len(k) == round(observed * len(truth.relations))

    # soundness: the closure of K under the 48 family rules holds no false fact ...
    c = compute_closure(kb)
    assert set(c.atoms) <= truth.triples, sorted(set(c.atoms) - truth.triples)[:5]
    return c


@SETTINGS
@given(
    n=st.integers(1, 150),
    seed=st.integers(0, 2**32 - 1),
    generations=st.integers(1, 5),
    observed=st.sampled_from([0.0, 0.3, EDU_RELAT_OBSERVED, 0.9, 1.0]),
)
def test_invariants(n, seed, generations, observed):
    kb, truth = generate(n, seed, generations, observed)
    check_invariants(kb, truth, n, generations, observed)
    if generations == 1:
        assert not any(r in ("child", "father", "mother") for _, r, _ in truth.relations)


@settings(max_examples=10, deadline=None)
@given(n=st.integers(2, 150), seed=st.integers(0, 2**32 - 1))
def test_rules_sound_on_the_whole_network(n, seed):
    """... and the rules derive nothing new from the full truth: it is closed under them."""
    kb, truth = generate(n, seed, observed=1.0)
    assert {f.triple for f in kb.relationships} == truth.triples
    c = compute_closure(kb)
    assert c.n_derived == 0


@settings(max_examples=10, deadline=None)
@given(n=st.integers(1, 120), seed=st.integers(0, 2**32 - 1), observed=st.floats(0, 1))
def test_deterministic_for_a_seed(n, seed, observed, tmp_path_factory):
    a_kb, a_truth = generate(n, seed, observed=observed)
    b_kb, b_truth = generate(n, seed, observed=observed)
    assert a_kb.people == b_kb.people
    assert a_kb.relationships == b_kb.relationships and a_kb.biographies == b_kb.biographies
    assert a_truth.relations == b_truth.relations
    d1, d2 = tmp_path_factory.mktemp("a"), tmp_path_factory.mktemp("b")
    save_kb(a_kb, d1)
    save_kb(b_kb, d2)
    for f in ("people.csv", "relationships.csv", "biographies.csv"):
        assert (d1 / f).read_bytes() == (d2 / f).read_bytes()


def test_seeds_differ():
    kbs = [generate(60, s)[0] for s in range(3)]
    assert len({tuple(k.people) for k in kbs}) == 3


def test_default_looks_like_edu_relat():
    """`dukb generate --people 100 --seed 0`: 100 people, 300 biography facts, a K of about EDU-RELAT's size whose
    closure adds facts, every relation in K; over 20 seeds the mean K and closure sizes are near 400 and 562."""
    kb, truth = generate()
    c = compute_closure(kb)
    assert len(kb.people) == 100 and len(kb.biographies) == 300
    assert 300 <= c.n_kb <= 500 and 100 <= c.n_derived <= 250
    assert {f.relation for f in kb.relationships} == set(RELATIONS)
    sizes = [(len(k.relationships), len(t)) for k, t in (generate(100, s) for s in range(20))]
    mean_k = sum(k for k, _ in sizes) / 20
    mean_t = sum(t for _, t in sizes) / 20
    assert 350 <= mean_k <= 450 and 500 <= mean_t <= 630


def test_parent_and_spouse_facts_are_observed_first():
    """With the EDU-RELAT weights, parent and spouse facts are (almost) all observed, aunt/uncle facts rarely."""
    kb, truth = generate(400, 7)
    tc, oc = truth.counts(), truth.observed_counts()
    for r in ("father", "mother", "husband", "wife"):
        assert oc[r] >= 0.95 * tc[r]
    for r in ("aunt", "uncle", "nephew", "niece"):
        assert oc[r] <= 0.4 * tc[r]


def test_config_extremes():
    kb, truth = generate(200, 5, config=GeneratorConfig(p_wife_takes_surname=1.0, p_parent_birthplace=1.0))
    names, p = truth.names, kb.people
    wives = [i for i in range(200) if truth.gender[i] == 1 and truth.spouse[i] >= 0]
    assert wives and all(surname(names[i]) == surname(names[truth.spouse[i]]) for i in wives)
    kids = [i for i in range(200) if truth.father[i] >= 0]
    assert kids and all(
        p[names[i]].birthplace in (p[names[truth.father[i]]].birthplace, p[names[truth.mother[i]]].birthplace)
        for i in kids
    )
    kb, truth = generate(200, 5, config=GeneratorConfig(p_wife_takes_surname=0.0))
    assert all(surname(truth.names[i]) == truth.birth_surname[i] for i in range(200))
    # without new spouses, the only couples are parents created for someone: every couple has children
    kb, truth = generate(100, 1, config=GeneratorConfig(p_spouse=0.0))
    mothers = {int(m) for m in truth.mother if m >= 0}
    assert mothers and mothers == {i for i in range(100) if truth.gender[i] == 1 and truth.spouse[i] >= 0}
    kb, truth = generate(50, 1, config=GeneratorConfig(p_spouse=0.0, p_parents=0.0))
    assert len(truth.relations) == 0 and len(kb.relationships) == 0  # founders only


def test_observed_zero_weight_relation_never_in_k():
    w = dict(GeneratorConfig().observe_weights, child=0.0)
    kb, truth = generate(150, 2, observed=0.5, config=GeneratorConfig(observe_weights=w))
    assert truth.counts()["child"] > 0 and not any(f.relation == "child" for f in kb.relationships)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(n_people=0),
        dict(n_people=-3),
        dict(n_people=2.5),
        dict(generations=0),
        dict(seed=-1),
        dict(observed=1.5),
        dict(observed=-0.1),
    ],
)
def test_bad_arguments(kwargs):
    with pytest.raises(InputError):
        generate(**kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(p_parents=1.2),
        dict(p_spouse=-0.1),
        dict(children_geometric_p=0.0),
        dict(max_children=0),
        dict(mother_age_min=30, mother_age_max=20),
        dict(observe_weights={"cousin": 1.0}),
        dict(observe_weights={"child": -1}),
        dict(father_min_age=60),
        dict(cohort_pull=2.0),
    ],
)
def test_bad_config(kwargs):
    with pytest.raises(InputError):
        GeneratorConfig(**kwargs)


def test_data_lists():
    male, female = set(first_names("male")), set(first_names("female"))
    assert len(male) >= 500 and len(female) >= 500 and not male & female
    assert len(surnames()) >= 1000 and all(" " not in s for s in surnames())
    states, w = us_states()
    assert len(states) == 50 and abs(w.sum() - 1) < 1e-9 and states[int(w.argmax())] == "California"
    table = jobs_by_decade()
    assert sorted(table) == list(range(1900, 2030, 10))
    assert len({j for v in table.values() for j in v}) == 55  # the paper's 55 jobs (Appendix F)
    assert job_decade(1895) == 1900 and job_decade(1987) == 1980 and job_decade(2031) == 2020


def test_vocabulary_covers_edu_relat():
    """EDU-RELAT's jobs are exactly the 55 of our decade lists, and its birth states are US states of our list."""
    if not (EDU / "people.csv").is_file():
        pytest.skip("../shared/edu-relat is not present")
    with open(EDU / "people.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["job"] for r in rows} == {j for v in jobs_by_decade().values() for j in v}
    assert {r["birthplace"] for r in rows} <= set(us_states()[0])
    with open(EDU / "biographies.csv", newline="", encoding="utf-8") as fh:
        places = [r["value"] for r in csv.DictReader(fh) if r["attribute"] == "birthplace"]
    assert places and all(v == birthplace_value(v[: -len(" state")]) for v in places)


def test_cli_writes_a_loadable_kb(tmp_path, capsys):
    out = tmp_path / "kb"
    assert main(["generate", "--people", "40", "--seed", "3", "-o", str(out), "--truth"]) == 0
    kb = load_kb(out)
    ref, truth = generate(40, 3)
    assert list(kb.people.values()) == list(ref.people.values())
    assert kb.relationships == ref.relationships and kb.biographies == ref.biographies
    with open(out / "truth.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["subject"], r["relation"], r["object"]) for r in rows] == truth.relations
    assert sum(r["observed"] == "1" for r in rows) == len(kb.relationships)
    assert "40 people" in capsys.readouterr().out
    # no silent overwrite; --force overwrites and drops the stale truth.csv
    assert main(["generate", "--people", "40", "--seed", "4", "-o", str(out)]) == 2
    assert "--force" in capsys.readouterr().err
    assert main(["generate", "--people", "25", "--seed", "4", "-o", str(out), "--force", "--observed", "1"]) == 0
    kb = load_kb(out)
    assert len(kb.people) == 25 and not (out / "truth.csv").exists()
    assert {f.triple for f in kb.relationships} == generate(25, 4, observed=1.0)[1].triples


@pytest.mark.parametrize(
    "args", [["--people", "0"], ["--observed", "2"], ["--p-spouse", "1.5"], ["--generations", "0"]]
)
def test_cli_bad_input(tmp_path, capsys, args):
    assert main(["generate", *args, "-o", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dukb: error:") and len(err.strip().splitlines()) == 1
    if args[0] == "--p-spouse":
        assert "--p-spouse" in err


def test_default_generated_kb(tmp_path):
    d = default_generated_kb_dir(tmp_path)
    assert d.parent == tmp_path and (d / "truth.csv").is_file()
    stamp = (d / "people.csv").stat().st_mtime_ns
    assert default_generated_kb_dir(tmp_path) == d and (d / "people.csv").stat().st_mtime_ns == stamp  # reused
    kb = default_generated_kb(tmp_path)
    ref, _ = generate()
    assert list(kb.people.values()) == list(ref.people.values()) and kb.relationships == ref.relationships
    assert [p.name for p in tmp_path.iterdir()] == [d.name]  # no temporary folder left behind


def test_cli_help_defaults_match_the_config():
    """The defaults the CLI help states are GeneratorConfig's (the CLI passes None to keep them)."""
    import re

    import typer

    from dukb.cli.main import app

    cmd = typer.main.get_command(app).commands["generate"]
    field = {
        "--p-parents": "p_parents",
        "--p-spouse": "p_spouse",
        "--p-children": "p_children",
        "--children-p": "children_geometric_p",
        "--p-wife-surname": "p_wife_takes_surname",
        "--p-parent-birthplace": "p_parent_birthplace",
    }
    seen = set()
    for p in cmd.params:
        flag = next((o for o in p.opts if o in field), None)
        if flag:
            stated = float(re.search(r"\(default ([0-9.]+)\)", p.help).group(1))
            assert stated == getattr(CFG, field[flag]), flag
            seen.add(flag)
        if "--observed" in p.opts:
            assert f"{EDU_RELAT_OBSERVED:.3f}" in p.help
    assert seen == set(field)
