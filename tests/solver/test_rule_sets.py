"""Rule sets: the built-in ones and user .lp files (accepted positive Horn rules; everything else refused with the
file and line).

Source: issue 2, "Rules and closure": ``--rules`` takes a built-in name or a user .lp file of positive Horn rules
over holds/3; negation, choice, disjunction, aggregates are refused with a clear message; clingo syntax errors are
reported with the file and line (``FILE:LINE: problem``). Wu et al. 2025, Sec. 2 (rules as Horn clauses
B_1 ∧ ... ∧ B_n → A).
"""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import resources

import pytest

from conftest import EDU_RELAT_DIR
from dukb import InputError
from dukb.kb import load_kb
from dukb.solver.closure import compute_closure
from dukb.solver.rules import RulesError, load_rules

EDU = EDU_RELAT_DIR

TWO_RULES = """\
% spouses: a user rule file with two rules
holds(A,wife,B) :- holds(B,husband,A), female(B), male(A), A != B.     % the husband's wife
holds(A,husband,B) :- holds(B,wife,A), male(B), female(A), A != B.     % the wife's husband
"""

HEADER = "% a user rule file\nholds(A,wife,B) :- holds(B,husband,A), female(B), male(A), A != B.\n"  # lines 1-2


def spouse_closure(kb) -> set[tuple[str, str, str]]:
    """Independent plain-Python closure of K under the two spouse rules of TWO_RULES."""
    facts = {f.triple for f in kb.relationships}
    while True:
        new = set()
        for s, r, o in facts:
            if s == o:
                continue
            if r == "husband" and kb.gender(s) == "female" and kb.gender(o) == "male":
                new.add((o, "wife", s))
            if r == "wife" and kb.gender(s) == "male" and kb.gender(o) == "female":
                new.add((o, "husband", s))
        if new <= facts:
            return facts
        facts |= new


def test_user_rule_file_closure(tmp_path):
    path = tmp_path / "spouses.lp"
    path.write_text(TWO_RULES, encoding="utf-8")
    rs = load_rules(path)
    assert len(rs) == 2
    assert [r.line for r in rs.rules] == [2, 3]
    kb = load_kb("demo")
    c = compute_closure(kb, rs)
    expected = spouse_closure(kb)
    assert set(c.atoms) == expected
    assert c.n_derived == len(expected) - len(kb.relationships) > 0
    # the same through the path (not a RuleSet)
    assert set(compute_closure(kb, str(path)).atoms) == expected
    # every ground instance is an instance of one of the two rules, head derived from a single body atom
    assert set(c.inst_rule) <= {0, 1}
    for h, body in zip(c.inst_head, c.inst_body):
        assert len(body) == 1
        (s, r, o), (bs, br, bo) = c.atoms[h], c.atoms[body[0]]
        assert (s, o) == (bo, bs) and {r, br} == {"wife", "husband"}


def test_user_rule_file_cli(tmp_path):
    path = tmp_path / "spouses.lp"
    path.write_text(TWO_RULES, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "dukb.cli.main", "closure", "--kb", "demo", "--rules", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    rows = [ln.split(",") for ln in proc.stdout.splitlines()[1:]]
    expected = spouse_closure(load_kb("demo"))
    assert {tuple(r[:3]) for r in rows} == expected
    assert len(rows) == len(expected)


# Each case: id, rule text placed on line 3 (after HEADER), expected fragment of the message.
BAD = [
    ("negation", "holds(A,wife,B) :- holds(B,husband,A), not holds(A,child,B).", "negation"),
    ("double negation", "holds(A,wife,B) :- holds(B,husband,A), not not holds(A,child,B).", "negation"),
    ("negated head", "not holds(A,wife,B) :- holds(B,husband,A).", "negated rule head"),
    ("classical negation", "holds(A,wife,B) :- holds(B,husband,A), -holds(A,child,B).", "not a predicate"),
    ("choice rule", "{ holds(A,wife,B) } :- holds(B,husband,A).", "choice rule"),
    ("disjunction", "holds(A,wife,B) ; holds(A,child,B) :- holds(B,husband,A).", "disjunction"),
    ("body aggregate", "holds(A,wife,B) :- holds(B,husband,A), #count{ C : holds(A,child,C) } > 1.", "aggregate"),
    ("head aggregate", "#count{ A : holds(A,wife,B) } = 1 :- holds(B,husband,A).", "aggregate"),
    ("conditional literal", "holds(A,wife,B) :- holds(B,husband,A) : male(B).", "conditional literal"),
    ("integrity constraint", ":- holds(A,wife,B), holds(A,husband,B).", "integrity constraint"),
    ("fact", 'holds("Ann",wife,"Bob").', "is a fact"),
    ("unknown body predicate", "holds(A,wife,B) :- holds(B,husband,A), spouse(A,B).", "unknown predicate spouse/2"),
    ("wrong arity", "holds(A,wife,B) :- holds(B,husband).", "unknown predicate holds/2"),
    ("head not holds", "married(A,B) :- holds(B,husband,A).", "is not holds(S,R,O)"),
    ("no holds in body", "holds(A,wife,B) :- male(A), female(B).", "no holds(S,R,O) atom"),
    ("unknown relation newphe", "holds(A,uncle,B) :- holds(B,newphe,A), male(B), A != B.", "unknown relation 'newphe'"),
    ("unknown head relation", "holds(A,spouse,B) :- holds(B,husband,A).", "unknown relation 'spouse'"),
    ("#show", "#show holds/3.", "only rules are allowed"),
    ("#const", "#const n = 2.", "only rules are allowed"),
    ("#program", "#program other.", "only rules are allowed"),
    ("#minimize", "#minimize { 1,A : holds(A,wife,B) }.", "only rules are allowed"),
    ("#external", "#external holds(a,wife,b).", "only rules are allowed"),
    ("#heuristic", "#heuristic holds(A,wife,B) : holds(B,husband,A). [1,true]", "only rules are allowed"),
    ("#script", "#script (python)\nimport os\n#end.", "only rules are allowed"),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_refused_rule(tmp_path, case):
    _id, text, fragment = case
    path = tmp_path / "bad.lp"
    path.write_text(HEADER + text + "\n", encoding="utf-8")
    with pytest.raises(RulesError) as info:
        load_rules(path)
    err = info.value
    assert isinstance(err, InputError)
    assert err.path == str(path) and err.line == 3
    assert str(err).startswith(f"{path}:3: ")
    assert fragment in err.message


@pytest.mark.parametrize(
    "text, line, fragment",
    [
        ("holds(A,wife,B) :- holds(B,husband,A)", 4, "syntax error"),  # missing '.', clingo sees EOF
        ("holds(A,wife B) :- holds(B,husband,A).", 3, "syntax error"),
        ("holds(A,wife,C) :- holds(B,husband,A), male(B).", 3, "unsafe"),  # C is unsafe
    ],
    ids=["missing period", "missing comma", "unsafe variable"],
)
def test_clingo_errors_name_file_and_line(tmp_path, text, line, fragment):
    path = tmp_path / "bad.lp"
    path.write_text(HEADER + text + "\n", encoding="utf-8")
    with pytest.raises(RulesError) as info:
        load_rules(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}:{line}: ") and info.value.line == line
    assert fragment in msg
    assert "\n" not in msg


def test_unsafe_variable_in_a_later_rule_cites_its_line(tmp_path):
    path = tmp_path / "bad.lp"
    path.write_text(TWO_RULES + "\n\n% comment\nholds(A,wife,C) :- holds(B,husband,A), male(B).\n", encoding="utf-8")
    with pytest.raises(RulesError, match=r"bad\.lp:7: unsafe variable C"):
        load_rules(path)


@pytest.mark.parametrize(
    "content, fragment",
    [
        ("% only a comment\n", "no rules"),
        ("", "no rules"),
        (b"holds(A,wife,B) :- holds(B,husband,A), male(A), female(B). % caf\xe9\n", "not UTF-8"),
    ],
    ids=["comment only", "empty", "latin-1"],
)
def test_refused_whole_file(tmp_path, content, fragment):
    path = tmp_path / "bad.lp"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(RulesError, match=fragment) as info:
        load_rules(path)
    assert str(info.value).startswith(str(path))


def test_missing_rule_file(tmp_path):
    with pytest.raises(RulesError, match="no such rule file"):
        load_rules(tmp_path / "nope.lp")


def test_include_is_refused(tmp_path):
    (tmp_path / "other.lp").write_text(TWO_RULES, encoding="utf-8")
    path = tmp_path / "inc.lp"
    path.write_text(HEADER + f'#include "{tmp_path / "other.lp"}".\n', encoding="utf-8")
    with pytest.raises(RulesError, match=r"inc\.lp:3: #include is not allowed"):
        load_rules(path)


def test_external_function_is_refused(tmp_path):
    path = tmp_path / "ext.lp"
    path.write_text(HEADER + "holds(A,husband,B) :- holds(B,wife,A), @f(A) = 1.\n", encoding="utf-8")
    with pytest.raises(RulesError):
        load_rules(path)


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("holds(A,wife,B) :- holds(B,husband,A), not holds(A,child,B).", "bad.lp:3: negation"),
        ("holds(A,wife,B) :- holds(B,husband,A)", "bad.lp:4: syntax error"),
    ],
    ids=["negation", "syntax"],
)
def test_cli_refuses_bad_rule_file(tmp_path, text, fragment):
    path = tmp_path / "bad.lp"
    path.write_text(HEADER + text + "\n", encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "dukb.cli.main", "closure", "--kb", "demo", "--rules", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dukb: error: ") and fragment in lines[0]


# ------------------------------------------------------------------------------------------- built-in sets ------
def _rule_lines(name: str) -> list[tuple[int, str]]:
    text = resources.files("dukb.data").joinpath("rules", name + ".lp").read_text(encoding="utf-8")
    return [(n, ln) for n, ln in enumerate(text.splitlines(), 1) if ln.strip() and not ln.lstrip().startswith("%")]


def test_builtin_rule_counts():
    family = load_rules("family")
    compat = load_rules("family_paper_compat")
    assert len(family) == 48
    assert len(compat) == 46
    # the compat set is the family set without the two rules that read "newphe" in the raw file (R16, R19)
    assert {r.text for r in family.rules} - {r.text for r in compat.rules} == {
        family.rules[15].text,
        family.rules[18].text,
    }
    assert {r.text for r in compat.rules} < {r.text for r in family.rules}
    assert family.rules[15].head == "A,uncle,B" and family.rules[15].body_holds == ("B,nephew,A",)
    assert family.rules[18].head == "A,aunt,B" and family.rules[18].body_holds == ("B,nephew,A",)


def test_every_family_rule_line_has_an_english_comment():
    lines = _rule_lines("family")
    rs = load_rules("family")
    assert [n for n, _ in lines] == [r.line for r in rs.rules]  # one rule per line
    for i, (_n, ln) in enumerate(lines, 1):
        rule, sep, comment = ln.partition("%")
        assert sep and rule.rstrip().endswith("."), ln
        m = re.fullmatch(r"\s*R(\d+): (.+)", comment)
        assert m and int(m.group(1)) == i, ln
        assert re.search(r"\bis\b", m.group(2)) and " > " in m.group(2), ln


def test_family_comments_are_the_raw_rules():
    raw_path = EDU / "original" / "family_rule_raw.txt"
    if not raw_path.is_file():
        pytest.skip("../shared/edu-relat is absent")
    raw = [ln.strip() for ln in raw_path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    comments = [ln.partition("%")[2].split(": ", 1)[1].strip() for _n, ln in _rule_lines("family")]
    assert comments == raw


def test_paper_compat_closure_of_edu_relat_equals_family():
    if not (EDU / "relationships.csv").is_file():
        pytest.skip("../shared/edu-relat is absent")
    kb = load_kb(EDU)
    a, b = compute_closure(kb, "family"), compute_closure(kb, "family_paper_compat")
    assert set(a.atoms) == set(b.atoms)
    assert (a.n_kb, a.n_derived) == (400, 162)
    assert b.n_instances < a.n_instances  # the two live 'nephew' rules add instances
