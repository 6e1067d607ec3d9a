"""Probe datasets (dukb.kb.probes), RESTOR-style corruption (dukb.kb.corrupt) and `dukb probes`.

- EDU-RELAT's QA files are rebuilt from its KB, byte for byte, including the wrong relation of every "no" question
  (skipped when ../shared/edu-relat is absent).
- Every probe's gold answer is checked against the KB and its deductive closure (clingo): answers are the fact's
  relation, object or value; "no" relations and multiple-choice distractors are false in the closure; reverse-style
  questions name every other right answer; hints and demonstrations do not state the probed fact.
- Probes and corruptions are deterministic for a seed; the corrupted KB is valid and differs from the clean one on
  exactly the corrupted facts; each document holds 5 incorrect facts about its entity and k correct facts about
  other people.

Sources: Wu et al. 2025 (EDU-RELAT, Table 3; App. C substring rule); Jin et al. 2024 (RWKU, Sec. 3.3); Rezaei et
al. (RESTOR, Sec. 3.2, App. B).
"""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from pathlib import Path

import pytest
import typer

from conftest import build_kb, require_edu_relat
from dukb import InputError
from dukb.kb import KB, Person, check_kb, load_kb
from dukb.kb.corrupt import AGE_GAPS, CORRUPTION_COLUMNS, YEAR_SHIFT, corrupt, save_corruption
from dukb.kb.edu_qa import edu_qa_rows, write_edu_qa
from dukb.kb.judge import choice_options, judge
from dukb.kb.probe_files import probes_text, read_probes
from dukb.kb.probes import (
    EDU_RELAT_NO_SEED,
    KINDS,
    PROBE_COLUMNS,
    FactIndex,
    Probe,
    edu_wrong_relations,
    make_probes,
    parse_kinds,
)
from dukb.kb.schema import OBJECT_GENDER, RELATIONS
from dukb.solver.closure import compute_closure

WRAPPED = ("prefix_injection", "affirmative_suffix", "role_play", "context_hint", "in_context")


# -- fixtures -------------------------------------------------------------------------------------------------------
def sibling_kb() -> KB:
    """A family with three children (two sons, one daughter), spouses, a grandchild, and biographies; the closure
    adds the sibling, parent and aunt/uncle facts, so reverse questions need exclusions."""
    genders = {
        "Al Fox": "male",
        "Bea Fox": "female",
        "Cy Fox": "male",
        "Dan Fox": "male",
        "Eve Fox": "female",
        "Flo Fox": "female",
        "Gus Fox": "male",
        "Hal Ray": "male",
        "Ivy Ray": "female",
    }
    facts = [
        ("Bea Fox", "husband", "Al Fox"),
        ("Al Fox", "child", "Cy Fox"),
        ("Al Fox", "child", "Dan Fox"),
        ("Al Fox", "child", "Eve Fox"),
        ("Cy Fox", "mother", "Bea Fox"),
        ("Dan Fox", "mother", "Bea Fox"),
        ("Eve Fox", "mother", "Bea Fox"),
        ("Cy Fox", "wife", "Flo Fox"),
        ("Gus Fox", "father", "Cy Fox"),
        ("Gus Fox", "mother", "Flo Fox"),
        ("Ivy Ray", "husband", "Hal Ray"),
    ]
    years = {
        "Al Fox": 1900,
        "Bea Fox": 1903,
        "Cy Fox": 1925,
        "Dan Fox": 1927,
        "Eve Fox": 1930,
        "Flo Fox": 1926,
        "Gus Fox": 1950,
        "Hal Ray": 1924,
        "Ivy Ray": 1929,
    }
    jobs = {
        "Al Fox": "Baker",
        "Bea Fox": "Teacher",
        "Cy Fox": "Pilot",
        "Dan Fox": "Clerk",
        "Eve Fox": "Nurse",
        "Flo Fox": "Lawyer",
        "Gus Fox": "Doctor",
        "Hal Ray": "Plumber",
        "Ivy Ray": "Librarian",
    }
    bios = []
    for n in genders:
        bios += [
            (n, "birthyear", str(years[n])),
            (n, "birthplace", "Ohio state" if n < "E" else "Iowa state"),
            (n, "job", jobs[n]),
        ]
    kb = build_kb(genders, facts, bios)
    people = {n: Person(n, g, years[n]) for n, g in genders.items()}
    return KB(people, kb.relationships, kb.biographies)


@pytest.fixture(scope="module")
def demo():
    kb = load_kb("demo")
    return kb, compute_closure(kb).atoms


@pytest.fixture(scope="module")
def family():
    kb = sibling_kb()
    return kb, compute_closure(kb).atoms


@pytest.fixture(scope="module")
def edu():
    kb = load_kb(require_edu_relat())
    return kb, compute_closure(kb).atoms


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# -- EDU-RELAT reproduced -------------------------------------------------------------------------------------------
def test_edu_relat_qa_files_reproduced_exactly(edu, tmp_path):
    kb, closure = edu
    root = require_edu_relat()
    rel_rows, bio_rows = edu_qa_rows(kb, closure)
    want_rel = _read_jsonl(root / "qa_relationships.jsonl")
    want_bio = _read_jsonl(root / "qa_biographies.jsonl")
    assert len(rel_rows) == len(want_rel) == 400 and len(bio_rows) == len(want_bio) == 300
    mismatched = [(got, want) for got, want in zip(rel_rows, want_rel) if got != want or list(got) != list(want)]
    assert not mismatched, f"{len(mismatched)} relationship rows differ, first: {mismatched[0]}"
    assert [r for r, w in zip(bio_rows, want_bio) if r != w or list(r) != list(w)] == []
    # the files themselves, byte for byte
    paths = write_edu_qa(kb, tmp_path, closure)
    for p in paths:
        assert p.read_bytes() == (root / p.name).read_bytes()


def test_edu_relat_wrong_relations_follow_the_seeded_stream(edu):
    kb, closure = edu
    rows = _read_jsonl(require_edu_relat() / "qa_relationships.jsonl")
    want = {r["fact_id"]: re.fullmatch(r"Is .* (\w+)\?", r["question3"]).group(1) for r in rows}
    assert edu_wrong_relations(kb, closure) == want
    # the closure never rejects a draw on EDU-RELAT, so the KB-only rule gives the same relations
    assert edu_wrong_relations(kb, None) == want
    # another seed gives another stream (so the match above is not an artefact of the data)
    other = edu_wrong_relations(kb, closure, seed=EDU_RELAT_NO_SEED + 1)
    assert sum(other[i] != want[i] for i in want) > 100


def test_make_probes_edu_kinds_equal_the_benchmark_questions(edu):
    kb, closure = edu
    rows = {r["fact_id"]: r for r in _read_jsonl(require_edu_relat() / "qa_relationships.jsonl")}
    bios = {r["fact_id"]: r for r in _read_jsonl(require_edu_relat() / "qa_biographies.jsonl")}
    probes = make_probes(kb, "edu", seed=123, closure=closure)
    field = {
        "cloze": ("question", "answer"),
        "yes": ("question2", "answer2"),
        "no": ("question3", "answer3"),
        "qa": ("question4", "answer4"),
    }
    n = Counter()
    for p in probes:
        q, a = field[p.kind]
        row = rows[p.fact_id] if p.fact_kind == "relationship" else bios[p.fact_id]
        assert (p.question, p.answer) == (row[q], row[a])
        n[p.fact_kind] += 1
    assert n == {"relationship": 1600, "biography": 600}


# -- gold answers are right -----------------------------------------------------------------------------------------
def check_probe(p: Probe, kb: KB, ix: FactIndex) -> None:
    """Assert that a probe's gold answer is right for its fact, per the KB and its closure."""
    assert p.kind in KINDS and p.question and p.answer
    if p.fact_kind == "relationship":
        f = kb.relationship(p.fact_id)
        s, r, o = f.triple
        assert ix.holds(s, r, o)
        if p.kind == "yes":
            assert (p.answer, p.match) == ("yes", "yesno") and p.question == f"Is {o} {s}'s {r}?"
        elif p.kind == "no":
            wrong = re.fullmatch(re.escape(f"Is {o} {s}'s ") + r"(\w+)\?", p.question).group(1)
            assert (p.answer, p.match) == ("no", "yesno")
            assert wrong in RELATIONS and wrong != r and not ix.holds(s, wrong, o)
        elif p.kind in ("reverse", "synonym") or p.kind.startswith("cross_lingual_"):
            assert p.answer == o and o not in p.question and s in p.question
            # every other right answer (same relation, same gender as o) is named, so o is the only one left
            others = [x for x in ix.objects.get((s, r), ()) if x != o and kb.gender(x) == kb.gender(o)]
            assert all(x in p.question for x in others), (p.question, others)
        elif p.kind == "multiple_choice":
            assert p.match == "choice" and p.answer == o
            opts = list(choice_options(p.question).values())
            assert 2 <= len(opts) <= 4 and len(set(opts)) == len(opts) and opts.count(o) == 1
            for d in opts:
                if d != o:
                    assert d != s and not ix.holds(s, r, d), f"distractor {d} is {s}'s {r}"
                    need = OBJECT_GENDER.get(r)
                    assert need is None or kb.gender(d) == need
        else:
            assert p.answer == r, (p.kind, p.question)
            assert s in p.question and o in p.question
            assert f"{o} is {s}'s {r}" not in p.question  # the fact itself is never stated
        if p.kind in WRAPPED:
            assert f"Who is {o} to {s}?" in p.question
        if p.kind == "in_context":
            demo_q = re.match(r"Question: Who is (.*) to (.*)\?\nAnswer: (\w+)\n", p.question)
            x, y, ans = demo_q.groups()
            assert {x, y} != {s, o} and (y, ans, x) in ix.triples
    else:
        b = next(x for x in kb.biographies if x.fact_id == p.fact_id)
        assert p.kind not in ("yes", "no", "reverse")
        assert p.answer == b.value
        if p.kind == "multiple_choice":
            opts = list(choice_options(p.question).values())
            assert len(opts) == len(set(opts)) >= 2 and opts.count(b.value) == 1
            assert not (set(opts) - {b.value}) & ix.values(b.subject, b.attribute)
        elif p.kind in WRAPPED:
            qa = f"What is the {b.attribute} of {b.subject}?"
            assert qa in p.question
            assert f"The {b.attribute} of {b.subject} is" not in p.question
        if p.kind == "in_context":
            m = re.match(r"Question: What is the (\w+) of (.*)\?\nAnswer: (.*)\n", p.question)
            a, who, v = m.groups()
            assert (who, a) != (b.subject, b.attribute) and v in ix.values(who, a)


@pytest.mark.parametrize("name", ["demo", "family", "edu"])
def test_every_gold_answer_is_right(name, request):
    kb, closure = request.getfixturevalue(name)
    ix = FactIndex(kb, closure)
    probes = make_probes(kb, seed=7, closure=closure)
    for p in probes:
        check_probe(p, kb, ix)
    per_kind = Counter((p.kind, p.fact_kind) for p in probes)
    if name == "edu":  # a KB of 100 people always has 3 distractors
        assert all(len(choice_options(p.question)) == 4 for p in probes if p.kind == "multiple_choice")
    # every kind covers every relationship fact; every kind but yes/no/reverse every biography fact
    for kind in KINDS:
        assert per_kind[(kind, "relationship")] == len(kb.relationships), kind
        want_bio = 0 if kind in ("yes", "no", "reverse") else len(kb.biographies)
        assert per_kind[(kind, "biography")] == want_bio, kind


def test_reverse_questions_exclude_the_other_right_answers(family):
    kb, closure = family
    probes = {
        (p.kind, p.fact_id): p
        for p in make_probes(kb, ["reverse", "cross_lingual_fr"], closure=closure)
        if p.fact_kind == "relationship"
    }
    fid = next(f.fact_id for f in kb.relationships if f.triple == ("Al Fox", "child", "Dan Fox"))
    q = probes[("reverse", fid)].question
    assert q == "Who is Al Fox's child, other than Cy Fox and Eve Fox?"
    # French asks for "le fils" (a son) and so excludes only the other son
    assert probes[("cross_lingual_fr", fid)].question == "Qui est le fils de Al Fox, à part Cy Fox ?"
    fid = next(f.fact_id for f in kb.relationships if f.triple == ("Bea Fox", "husband", "Al Fox"))
    assert probes[("reverse", fid)].question == "Who is Bea Fox's husband?"


def test_synonyms_use_the_objects_gender(family):
    kb, closure = family
    by_id = {f.fact_id: f for f in kb.relationships}
    for p in make_probes(kb, "synonym", seed=3, closure=closure):
        if p.fact_kind != "relationship":
            continue
        f = by_id[p.fact_id]
        if f.relation == "child":
            word = re.match(rf"Who is {re.escape(f.subject)}'s (\w+)", p.question).group(1)
            assert word in ("offspring", {"male": "son", "female": "daughter"}[kb.gender(f.object)])


def test_no_question_avoids_relations_true_in_the_closure():
    # A pair with a second, derived relation (Bob is Ann's husband, and her brother through their common father):
    # the KB-only rule can draw "brother" for the husband fact's "no" question; the closure rejects it, any seed.
    kb = build_kb(
        {"Ann": "female", "Bob": "male", "Dad": "male"},
        [("Ann", "husband", "Bob"), ("Ann", "father", "Dad"), ("Bob", "father", "Dad")],
    )
    closure = compute_closure(kb).atoms
    ix = FactIndex(kb, closure)
    for seed in range(40):
        for fid, wrong in edu_wrong_relations(kb, closure, seed).items():
            f = kb.relationship(fid)
            assert not ix.holds(f.subject, wrong, f.object)
    # and the KB-only rule does pick a closure-true relation for some seed (so the closure matters)
    hits = [
        seed
        for seed in range(200)
        for fid, w in edu_wrong_relations(kb, None, seed).items()
        if ix.holds(kb.relationship(fid).subject, w, kb.relationship(fid).object)
    ]
    assert hits


# -- judging --------------------------------------------------------------------------------------------------------
def test_judge_rules(family):
    kb, closure = family
    p = Probe("qa", "relationship", 0, "Who is Al Fox to Bea Fox?", "husband")
    assert judge(p, " He is her HUSBAND.") and not judge(p, "her brother")
    y = Probe("yes", "relationship", 0, "Is Al Fox Bea Fox's husband?", "yes", "yesno")
    assert judge(y, "Yes, he is.") and not judge(y, "No. Yes would be wrong") and not judge(y, "")
    n = Probe("no", "relationship", 0, "Is Al Fox Bea Fox's uncle?", "no", "yesno")
    assert judge(n, "no") and not judge(n, "I do not know")  # the paper's substring rule would accept "not"
    mc = next(p for p in make_probes(kb, "multiple_choice", seed=1, closure=closure) if p.fact_kind == "relationship")
    opts = choice_options(mc.question)
    gold = next(lab for lab, t in opts.items() if t == mc.answer)
    wrong_lab, wrong_text = next((lab, t) for lab, t in opts.items() if t != mc.answer)
    assert judge(mc, gold) and judge(mc, f"({gold}) {mc.answer}") and judge(mc, f"{gold}. because")
    assert not judge(mc, wrong_lab) and not judge(mc, f"{wrong_lab}. {wrong_text}")
    assert judge(mc, f"It is {mc.answer}.") and not judge(mc, f"{mc.answer} or {wrong_text}")
    with pytest.raises(ValueError):
        judge(Probe("qa", "relationship", 0, "q", "a", "regex"), "a")


# -- determinism and kinds ------------------------------------------------------------------------------------------
def test_probes_are_deterministic_for_a_seed(family):
    kb, closure = family
    a = make_probes(kb, seed=5, closure=closure)
    assert a == make_probes(kb, seed=5, closure=closure)
    b = make_probes(kb, seed=6, closure=closure)
    differ = {x.kind for x, y in zip(a, b) if x != y}
    assert {"paraphrase", "multiple_choice"} <= differ
    assert not differ & {"cloze", "yes", "no", "qa", "reverse"}
    # a kind's probes do not depend on the other kinds asked for
    only = make_probes(kb, "multiple_choice,in_context", seed=5, closure=closure)
    assert only == [p for p in a if p.kind in ("multiple_choice", "in_context")]


def test_parse_kinds():
    assert parse_kinds(None) == KINDS and parse_kinds("") == KINDS
    assert parse_kinds("qa, reverse") == ("qa", "reverse")
    assert parse_kinds(["reverse", "edu"]) == ("cloze", "yes", "no", "qa", "reverse")
    assert parse_kinds("cross_lingual") == ("cross_lingual_fr", "cross_lingual_de", "cross_lingual_es")
    with pytest.raises(InputError, match="unknown probe kind 'qq'.*kinds: cloze"):
        parse_kinds("qa,qq")


def test_probe_files_round_trip(family, tmp_path):
    kb, closure = family
    probes = make_probes(kb, seed=2, closure=closure)
    for fmt in ("jsonl", "csv"):
        path = tmp_path / f"p.{fmt}"
        path.write_text(probes_text(probes, fmt), encoding="utf-8")
        assert read_probes(path) == probes
    rows = list(csv.DictReader((tmp_path / "p.csv").open(encoding="utf-8", newline="")))
    assert tuple(rows[0]) == PROBE_COLUMNS and len(rows) == len(probes)


# -- corruption -----------------------------------------------------------------------------------------------------
def _check_corruption(kb: KB, closure, res, k: int, per_entity: int = 5) -> None:
    bad, facts, docs = res
    check_kb(bad)
    ix = FactIndex(kb, closure)
    years = {n: p.birthyear for n, p in kb.people.items()}
    changed_rel = {f.fact_id for f, g in zip(kb.relationships, bad.relationships) if f != g}
    changed_bio = {f.fact_id for f, g in zip(kb.biographies, bad.biographies) if f != g}
    assert [f.fact_id for f in bad.relationships] == kb.rel_ids and [b.fact_id for b in bad.biographies] == kb.bio_ids
    assert changed_rel == {c.fact_id for c in facts if c.fact_kind == "relationship"}
    assert changed_bio == {c.fact_id for c in facts if c.fact_kind == "biography"}
    assert bad.people == kb.people
    for c in facts:
        assert c.true_value != c.injected_value
        if c.fact_kind == "relationship":
            f, g = kb.relationship(c.fact_id), bad.relationship(c.fact_id)
            assert (f.subject, f.relation, f.object) == (c.subject, c.predicate, c.true_value)
            assert (g.subject, g.relation, g.object) == (c.subject, c.predicate, c.injected_value)
            assert not ix.holds(c.subject, c.predicate, c.injected_value)  # really wrong
            need = OBJECT_GENDER.get(c.predicate)
            assert need is None or kb.gender(c.injected_value) == need
            lo, hi = AGE_GAPS[c.predicate]
            if years[c.subject] is not None and years[c.injected_value] is not None:
                assert lo <= years[c.injected_value] - years[c.subject] <= hi
        else:
            b = next(x for x in bad.biographies if x.fact_id == c.fact_id)
            assert (b.subject, b.attribute, b.value) == (c.subject, c.predicate, c.injected_value)
            if c.predicate == "birthyear":
                assert 1 <= abs(int(c.injected_value) - int(c.true_value)) <= YEAR_SHIFT
            else:
                assert c.injected_value in ix.attribute_values(c.predicate)
    per = Counter(c.subject for c in facts)
    assert set(per.values()) == {per_entity}
    corrupted_ids = {(c.fact_kind, c.fact_id) for c in facts}
    for d in docs:
        inc = [s for s in d.sentences if s.role == "incorrect"]
        cor = [s for s in d.sentences if s.role == "correct"]
        assert len(inc) == per_entity and len(cor) == k == d.k_context
        mine = {(c.fact_kind, c.fact_id): c for c in facts if c.subject == d.entity}
        assert {(s.fact_kind, s.fact_id) for s in inc} == set(mine)
        for s in inc:
            c = mine[(s.fact_kind, s.fact_id)]
            assert d.entity in s.sentence and c.injected_value in s.sentence
        assert len({(s.fact_kind, s.fact_id) for s in cor}) == k
        for s in cor:
            assert (s.fact_kind, s.fact_id) not in corrupted_ids
            if s.fact_kind == "relationship":
                f = kb.relationship(s.fact_id)
                assert d.entity not in (f.subject, f.object) and f.subject in s.sentence and f.object in s.sentence
            else:
                b = next(x for x in kb.biographies if x.fact_id == s.fact_id)
                assert b.subject != d.entity and b.value in s.sentence
        assert d.text == " ".join(s.sentence for s in d.sentences)
    assert Counter(d.entity for d in docs).keys() == per.keys()


@pytest.mark.parametrize("k", [0, 3, 30])
def test_corruption_of_edu_relat(edu, k):
    kb, closure = edu
    res = corrupt(kb, 0.1, seed=1, k_context=k, closure=closure, docs_per_entity=2)
    assert len(res.facts) == 70 and len(res.documents) == 28
    _check_corruption(kb, closure, res, k)
    # the incorrect facts are the same for every k (RESTOR: "the incorrect facts are the same for every k")
    assert res.facts == corrupt(kb, 0.1, seed=1, k_context=5, closure=closure).facts


def test_corruption_of_a_small_family(family):
    kb, closure = family
    res = corrupt(kb, 0.1, seed=0, k_context=4, closure=closure)
    _check_corruption(kb, closure, res, 4)
    assert len(res.facts) == 5 and len(res.documents) == 1


def test_corruption_is_deterministic(family):
    kb, closure = family
    runs = [corrupt(kb, 0.2, seed=s, k_context=2, closure=closure) for s in (4, 4, 9)]
    assert runs[0].facts == runs[1].facts and runs[0].documents == runs[1].documents
    assert runs[0].kb.relationships == runs[1].kb.relationships
    assert any(corrupt(kb, 0.2, seed=s, k_context=2, closure=closure).facts != runs[0].facts for s in range(9, 14))


def test_corruption_bad_input(family):
    kb, closure = family
    for fraction in (0, -0.1, 1.5):
        with pytest.raises(InputError, match="fraction"):
            corrupt(kb, fraction, closure=closure)
    with pytest.raises(InputError, match="only .* people have 5 facts"):
        corrupt(kb, 1.0, closure=closure)
    with pytest.raises(InputError, match="k_context=500"):
        corrupt(kb, 0.1, k_context=500, closure=closure)
    with pytest.raises(InputError, match=">= 0"):
        corrupt(kb, 0.1, k_context=-1, closure=closure)


def test_save_corruption(family, tmp_path):
    kb, closure = family
    res = corrupt(kb, 0.2, seed=2, k_context=3, closure=closure)
    paths = save_corruption(res, tmp_path / "out")
    back = load_kb(paths["kb"])
    assert back.relationships == res.kb.relationships and back.biographies == res.kb.biographies
    rows = list(csv.DictReader(paths["corruptions"].open(encoding="utf-8", newline="")))
    assert tuple(rows[0]) == CORRUPTION_COLUMNS
    assert [(r["fact_kind"], int(r["fact_id"]), r["injected_value"]) for r in rows] == [
        (c.fact_kind, c.fact_id, c.injected_value) for c in res.facts
    ]
    docs = _read_jsonl(paths["documents"])
    assert [d["text"] for d in docs] == [d.text for d in res.documents]
    assert all(Counter(f["role"] for f in d["facts"]) == {"incorrect": 5, "correct": 3} for d in docs)


# -- CLI ------------------------------------------------------------------------------------------------------------
def run_cli(monkeypatch, *args: str) -> int:
    """Run `dukb probes ...` through dukb.cli.main.main (error handling, exit codes) on an app that has the
    command registered, whether or not dukb/cli/main.py lists the module yet."""
    from dukb.cli import main as m
    from dukb.cli import probes as probes_cli

    if "probes" not in m.COMMAND_MODULES:
        app = typer.Typer(name="dukb", add_completion=False, pretty_exceptions_enable=False)

        @app.callback()
        def _root() -> None:
            """dukb."""

        probes_cli.register(app)
        monkeypatch.setattr(m, "app", app)
    return m.main(list(args))


def test_cli_writes_parseable_probes(monkeypatch, tmp_path, capsys):
    kb = sibling_kb()
    from dukb.kb import save_kb

    kdir = save_kb(kb, tmp_path / "kb")
    closure = compute_closure(load_kb(kdir)).atoms
    for fmt in ("jsonl", "csv"):
        out = tmp_path / f"probes.{fmt}"
        assert (
            run_cli(
                monkeypatch,
                "probes",
                "--kb",
                str(kdir),
                "--kinds",
                "qa,multiple_choice",
                "--kinds",
                "reverse",
                "--format",
                fmt,
                "--seed",
                "3",
                "-o",
                str(out),
            )
            == 0
        )
        got = read_probes(out)
        assert got == make_probes(load_kb(kdir), "qa,multiple_choice,reverse", seed=3, closure=closure)
        assert {p.kind for p in got} == {"qa", "multiple_choice", "reverse"}
    assert run_cli(monkeypatch, "probes", "--kb", "demo", "--kinds", "no") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines and all(json.loads(x)["answer"] == "no" for x in lines)


def test_cli_bad_kinds_exit_2(monkeypatch, capsys):
    assert run_cli(monkeypatch, "probes", "--kb", "demo", "--kinds", "qa,bogus") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dukb: error: unknown probe kind 'bogus'") and "reverse" in err[0]
    assert run_cli(monkeypatch, "probes", "--kb", "demo", "--context", "3") == 2
    assert "only with --corrupt" in capsys.readouterr().err


def test_cli_help_lists_kinds_and_columns(monkeypatch, capsys):
    assert run_cli(monkeypatch, "probes", "--help") == 0
    text = " ".join(capsys.readouterr().out.split())
    for word in KINDS + PROBE_COLUMNS:
        assert word in text


def test_cli_corrupt_writes_kb_and_documents(monkeypatch, tmp_path):
    kdir = tmp_path / "kb"
    from dukb.kb import save_kb

    save_kb(sibling_kb(), kdir)
    out = tmp_path / "restor"
    assert (
        run_cli(
            monkeypatch,
            "probes",
            "--kb",
            str(kdir),
            "--corrupt",
            "0.2",
            "--context",
            "2",
            "--seed",
            "1",
            "--format",
            "csv",
            "-o",
            str(out),
        )
        == 0
    )
    assert len(read_probes(out / "probes.csv")) == len(make_probes(load_kb(kdir)))
    bad = load_kb(out / "kb")
    rows = list(csv.DictReader((out / "corruptions.csv").open(encoding="utf-8", newline="")))
    assert rows and all(
        bad.relationship(int(r["fact_id"])).object == r["injected_value"]
        for r in rows
        if r["fact_kind"] == "relationship"
    )
    docs = _read_jsonl(out / "documents.jsonl")
    assert docs and all(d["k_context"] == 2 and len(d["facts"]) == 7 for d in docs)


def test_cli_edu_format_reproduces_edu_relat(monkeypatch, tmp_path):
    root = require_edu_relat()
    assert run_cli(monkeypatch, "probes", "--kb", str(root), "--format", "edu", "-o", str(tmp_path)) == 0
    for name in ("qa_relationships.jsonl", "qa_biographies.jsonl"):
        assert (tmp_path / name).read_bytes() == (root / name).read_bytes()
