"""Rule files read by clingo's parser (``clingo.ast``): the accepted fragment, each refused class, and the numpy and
clingo closures of every accepted file.

Source: the hardening issue, "Rules": a rule's text was cut at its first ``:-``, which may sit in a string of the
head, so a file that passed validation could smuggle in ``not`` or ``#external``; a function term in a head gave a
KeyError or never ended; ``#include`` of an empty file was accepted, of a FIFO hung, of another file leaked its first
token; strings with quotes and newlines were read as people. Wu et al. 2025, Sec. 2 (positive Horn rules) and
Definition 1 (the closure).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_numpy_closure import assert_same  # this folder is on sys.path (prepend import mode)
from test_solver_properties import families

from dukb import InputError
from dukb.kb import load_kb
from dukb.solver.closure import compute_closure
from dukb.solver.rules import MAX_RULES_BYTES, RulesError, load_rules, parse_rules
from tests.cli.test_symbolic_commands import assert_one_line_error, cli  # noqa: F401 (cli: the in-process CLI fixture)

HEADER = "% a user rule file\nholds(A,wife,B) :- holds(B,husband,A), female(B), male(A), A != B.\n"  # lines 1-2


def refused(tmp_path, text: str, line: int | None, *fragments: str, name: str = "bad.lp") -> RulesError:
    """Write ``text`` to a rule file, load it, and check the one-line ``FILE:LINE: problem`` refusal."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    t0 = time.perf_counter()
    with pytest.raises(RulesError) as info:
        load_rules(path)
    assert time.perf_counter() - t0 < 5
    err = info.value
    assert isinstance(err, InputError) and err.path == str(path) and err.line == line
    assert str(err).startswith(f"{path}:{line}: " if line else f"{path}: ")
    assert "\n" not in str(err)
    for f in fragments:
        assert f in err.message, (f, err.message)
    return err


def assert_cli_refuses(cli, path, line: int, fragment: str) -> None:
    """``dukb closure --kb demo --rules PATH`` (in-process) exits 2 with one line ``dukb: error: PATH:LINE: ...``."""
    rc, out, err = cli("closure", "--kb", "demo", "--rules", path)
    assert out == "" and "Traceback" not in err
    assert_one_line_error(rc, err, f"dukb: error: {path}:{line}: ", fragment)


# ------------------------------------------------------------------------------------- the measured defects ------
SMUGGLE = 'holds(A,child,"x :- not holds(A,child,B), #external foo(A)") :- holds(A,child,B), A < B.\n'


def test_string_head_cannot_smuggle_negation_or_external(tmp_path, cli):
    refused(tmp_path, HEADER + SMUGGLE, 3, "string constant")
    assert_cli_refuses(cli, tmp_path / "bad.lp", 3, "string constant")


@pytest.mark.parametrize(
    "rule",
    [
        'holds(A,child,"x") :- holds(A,child,B).',
        'holds("x :- not",child,B) :- holds(A,child,B).',
        'holds(A,child,B) :- holds(A,child,B), holds(B,child,"O\'Neil \\"Jr\\"\\n").',
        'holds(A,child,B) :- holds(A,child,B), A != "Ann".',
        'holds(A,child,B) :- holds(A,child,B), male("Ann").',
    ],
    ids=["head", "head with :-", "quotes and newline", "comparison", "guard"],
)
def test_strings_are_refused(tmp_path, rule):
    refused(tmp_path, HEADER + rule + "\n", 3, "a string constant", "is not allowed")


@pytest.mark.parametrize(
    "rule, fragment",
    [
        ("holds(f(A),child,B) :- holds(A,child,B).", "function term 'f(A)'"),
        ("holds(A,child,f(B)) :- holds(A,child,B).", "function term 'f(B)'"),  # recursive: no end
        ("holds(A,child,f(f(B))) :- holds(A,child,f(B)).", "function term 'f(f(B))'"),
        ("holds(A,child,(B,B)) :- holds(A,child,B).", "function term '(B,B)'"),
        ("holds(A,child,B) :- holds(A,child,B), holds(g(A),child,B).", "function term 'g(A)'"),
        ("holds(A,child(x),B) :- holds(A,child,B).", "function term 'child(x)'"),
        ("holds(A,child,1) :- holds(A,child,B).", "the number 1"),
        ("holds(A,child,B+1) :- holds(A,child,B).", "the term '(B+1)'"),
        ("holds(A,child,(B;C)) :- holds(A,child,B), holds(A,child,C).", "the term '(B;C)'"),
        ("holds(A,child,1..2) :- holds(A,child,B).", "the term '(1..2)'"),
        ("holds(A,child,#sup) :- holds(A,child,B).", "the term '#sup'"),
        ("holds(ann,child,B) :- holds(A,child,B).", "the constant 'ann'"),
        ("holds(child,child,B) :- holds(A,child,B).", "the relation 'child'"),
        ("holds(A,-child,B) :- holds(A,child,B).", "the term '-child'"),
        ("holds(A,child,B) :- holds(A,child,B), holds(B,child,_).", "anonymous variable '_'"),
    ],
    ids=lambda x: x if len(x) < 20 else None,
)
def test_terms_other_than_variables_and_relations_are_refused(tmp_path, rule, fragment):
    refused(tmp_path, HEADER + rule + "\n", 3, fragment)


def test_recursive_function_head_is_one_quick_cli_error(tmp_path, cli):
    path = tmp_path / "bad.lp"
    path.write_text(HEADER + "holds(A,child,f(B)) :- holds(A,child,B).\n", encoding="utf-8")
    t0 = time.perf_counter()
    assert_cli_refuses(cli, path, 3, "function term")
    assert time.perf_counter() - t0 < 10


def test_deeply_nested_term_is_one_line_error(tmp_path, cli):
    """``male(f(f(...1200 levels...(A)...)))`` made the validator's recursive walk raise RecursionError (a
    traceback): it is refused at FILE:LINE, and a valid rule's depth is far below the limit."""
    from dukb.solver.rules import MAX_TERM_DEPTH

    rule = "holds(A,child,B) :- holds(B,father,A), male(" + "f(" * 1200 + "A" + ")" * 1200 + ").\n"
    refused(tmp_path, HEADER + rule, 3, f"nested more than {MAX_TERM_DEPTH} levels deep")
    path = tmp_path / "bad.lp"
    assert_cli_refuses(cli, path, 3, "nested more than")


@pytest.mark.parametrize(
    "body",
    [
        "male(" + "f(" * 300000 + "A" + ")" * 300000 + ")",
        "A = B" + "+B" * 300000,
        "A = " + "-" * 300000 + "B",
    ],
    ids=["function", "sum", "minus"],
)
def test_statement_clingo_cannot_hold_is_refused_on_its_text(tmp_path, body):
    """clingo's parser builds (and frees) a syntax tree as deep as these terms recursively in C++ and crashed the
    process with a segmentation fault; the statement is refused before clingo sees it. In a subprocess, so that a
    regression cannot take the test run down."""
    from tests.cli.test_symbolic_commands import run_subprocess

    path = tmp_path / "deep.lp"
    path.write_text(
        HEADER + "%* a (((( comment *%\nholds(A,child,B) :- holds(B,father,A),\n  " + body + ".\n", encoding="utf-8"
    )
    p = run_subprocess("closure", "--kb", "demo", "--rules", path)
    assert "Traceback" not in p.stderr
    assert_one_line_error(p.returncode, p.stderr, f"dukb: error: {path}:4: ", "brackets and operators")


def test_rule_whose_body_shares_no_variables_is_refused_before_its_join(tmp_path, cli):
    """Eight body atoms sharing no variable: the numpy closure built ever larger cross products and died with
    numpy's _ArrayMemoryError (a traceback). The join's size is computed before anything is allocated and the rule
    is named at FILE:LINE."""
    from dukb.solver.horn import MAX_JOIN_ROWS

    body = ", ".join(f"holds(C{i},R{i},D{i})" for i in range(8))
    path = tmp_path / "cross.lp"
    path.write_text(HEADER + f"holds(A,child,B) :- holds(B,father,A), {body}.\n", encoding="utf-8")
    t0 = time.perf_counter()
    assert_cli_refuses(cli, path, 3, f"more than the limit of {MAX_JOIN_ROWS:,}")
    assert time.perf_counter() - t0 < 20
    with pytest.raises(InputError) as info:
        compute_closure(load_kb("demo"), load_rules(path))
    assert (info.value.path, info.value.line) == (str(path), 3) and "rows" in info.value.message


@pytest.mark.parametrize(
    "rule, line, fragment",
    [
        ("holds(A,child,B) :- holds(A,child,B), A < B.", 3, "ordering comparison 'A < B'"),
        ("holds(A,child,B) :- holds(A,child,B), A >= B.", 3, "ordering comparison"),
        ("holds(A,child,B) :- holds(A,child,B), holds(A,child,C), A != B != C.", 3, "chained comparison"),
        (
            "holds(A,R,B) :- holds(A,R,B), holds(R,child,B).",
            3,
            "variable R stands both for a relation and for a person",
        ),
        ("holds(A,R,B) :- holds(A,R,B), male(R).", 3, "variable R stands both"),
        ("holds(A,R,B) :- holds(A,R,B), R != A.", 3, "variable R stands both"),
        ("holds(A,child,B) :- holds(A,child,B), male(C).", 3, "unsafe variable C"),
        ("holds(A,child,B) :- holds(A,child,C), B = C.", 3, "unsafe variable B"),
        ("holds(A,R,B) :- holds(A,child,B).", 3, "unsafe variable R"),
        ("holds(A,child,B) :-\n  holds(A,child,C),\n  not holds(C,child,B).", 5, "negation"),
        ("holds(A,child,B) :- holds(A,child,B), @f(A) = B.", 3, "external function calls"),
    ],
    ids=[
        "<",
        ">=",
        "chain",
        "sort holds",
        "sort guard",
        "sort comparison",
        "unsafe guard",
        "unsafe assignment",
        "unsafe relation",
        "negation on its own line",
        "external call",
    ],
)
def test_what_the_two_paths_could_read_differently_is_refused(tmp_path, rule, line, fragment):
    refused(tmp_path, HEADER + rule + "\n", line, fragment)


DIRECTIVES = [
    "#external holds(a,wife,b).",
    "#program base.",
    "#const n = 2.",
    "#show holds/3.",
    "#defined holds/3.",
    "#project holds/3.",
    "#edge (A,B) : holds(A,child,B).",
    "#script (python)\nimport os\nos.system('touch /tmp/dukb-pwned')\n#end.",
]


@pytest.mark.parametrize("text", DIRECTIVES, ids=[d.split()[0] for d in DIRECTIVES])
def test_directives_are_refused(tmp_path, text):
    refused(tmp_path, HEADER + text + "\n", 3, "only rules are allowed", f"a {text.split()[0]} directive")


# ------------------------------------------------------------------------------------------------ #include ------
def _include_refused(tmp_path, target: str, secret: str | None = None) -> None:
    err = refused(tmp_path, HEADER + f'#include "{target}".\n', 3, "#include is not allowed", name="inc.lp")
    if secret is not None:
        assert secret not in str(err)


def test_include_of_an_empty_file_is_refused(tmp_path):
    (tmp_path / "empty.lp").write_bytes(b"")
    _include_refused(tmp_path, str(tmp_path / "empty.lp"))


def test_include_of_another_file_leaks_nothing(tmp_path):
    secret = tmp_path / "secret.lp"
    secret.write_text("SECRETTOKEN_e9f1 hunter2 :- .\n", encoding="utf-8")
    _include_refused(tmp_path, str(secret), "SECRETTOKEN")
    _include_refused(tmp_path, str(secret), "hunter2")
    _include_refused(tmp_path, "/root/.bashrc")
    _include_refused(tmp_path, "/etc/passwd", "root:")
    _include_refused(tmp_path, "no/such/file.lp")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_include_of_a_fifo_is_refused_without_opening_it(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    result: list = []

    def load():
        try:
            load_rules(tmp_path / "inc.lp")
        except RulesError as e:
            result.append(e)

    (tmp_path / "inc.lp").write_text(HEADER + f'#include "{fifo}".\n', encoding="utf-8")
    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    worker.join(20)
    assert not worker.is_alive(), "load_rules opened the FIFO named by #include"
    assert result and result[0].line == 3 and "#include is not allowed" in result[0].message


@pytest.mark.parametrize(
    "text, line",
    [
        ("#include <incmode>.\n", 3),
        ('#include\n  "x.lp".\n', 3),
        ('holds(A,child,B) :- holds(A,child,B). #include "x.lp".\n', 3),
        ('%* a block comment *% #include "x.lp".\n', 3),
    ],
    ids=["built-in", "split over lines", "after a rule", "after a block comment"],
)
def test_include_in_every_spelling_is_refused(tmp_path, text, line):
    refused(tmp_path, HEADER + text, line, "#include is not allowed")


def test_include_in_a_comment_is_only_a_comment(tmp_path):
    path = tmp_path / "ok.lp"
    path.write_text(
        HEADER + '% no #include "/etc/passwd" here\n%* nor #include "x". %* nested *% *%\n', encoding="utf-8"
    )
    assert len(load_rules(path)) == 1


def test_include_through_the_cli(tmp_path, cli):
    secret = tmp_path / "secret.lp"
    secret.write_text("SECRETTOKEN_e9f1\n", encoding="utf-8")
    path = tmp_path / "inc.lp"
    path.write_text(HEADER + f'#include "{secret}".\n', encoding="utf-8")
    assert_cli_refuses(cli, path, 3, "#include is not allowed")
    _rc, _out, err = cli("closure", "--kb", "demo", "--rules", path)
    assert "SECRETTOKEN" not in err


# ------------------------------------------------------------------------------------------ the file itself ------
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_rule_file_that_is_a_fifo_or_a_directory(tmp_path, cli):
    fifo = tmp_path / "rules.lp"
    os.mkfifo(fifo)
    with pytest.raises(RulesError, match="not a regular file"):
        load_rules(fifo)
    with pytest.raises(RulesError, match="not a regular file"):
        load_rules(tmp_path)
    rc, _out, err = cli("closure", "--kb", "demo", "--rules", fifo)
    assert rc == 2 and len(err.splitlines()) == 1 and "not a regular file" in err


def test_rule_file_too_large(tmp_path):
    path = tmp_path / "big.lp"
    path.write_bytes(b"%" * (MAX_RULES_BYTES + 1))
    with pytest.raises(RulesError, match="too large"):
        load_rules(path)


def test_syntax_error_cites_file_and_line(tmp_path, cli):
    refused(tmp_path, HEADER + "holds(A,wife B) :- holds(B,husband,A).\n", 3, "syntax error")
    assert_cli_refuses(cli, tmp_path / "bad.lp", 3, "syntax error")


def test_parse_rules_from_text():
    rules = parse_rules(HEADER + "\n% more\nholds(A,R,B) :-\n   holds(B,R,A), A != B.\n", "mine.lp")
    assert [r.line for r in rules] == [2, 5]
    assert rules[1].head == "A,R,B" and rules[1].body_holds == ("B,R,A",)
    with pytest.raises(RulesError, match=r"^mine\.lp:3: "):
        parse_rules(HEADER + 'holds(A,child,"B") :- holds(A,child,B).', "mine.lp")


def test_builtin_rule_sets_are_accepted_with_their_fingerprints():
    # the compiled program of the built-in sets is the one of earlier versions (caches keyed by it stay valid)
    assert load_rules("family").fingerprint == "20f4d35a7d3d1cd9"
    assert load_rules("family_paper_compat").fingerprint == "aef43835b4da518a"
    assert len(load_rules("family")) == 48


def test_demo_closure_through_the_cli_is_unchanged(cli):
    rc, out, _err = cli("closure", "--kb", "demo")
    kb = load_kb("demo")
    assert rc == 0 and len(out.splitlines()) - 1 == len(compute_closure(kb, "family", method="clingo"))


# --------------------------------------------------------------------- property: random rule files ------
NAMES = ("A", "B", "C", "D")
RELS = ("child", "father", "mother", "brother", "sister", "wife", "husband", "niece")
REL_VARS = ("R", "Q")


@dataclass(frozen=True)
class GenRule:
    """A generated rule: head and body ``holds`` atoms as (s, r, o) strings, guards (pred, var), comparisons
    (op, x, y), and ``extra``: refused body elements rendered as they are (empty for a rule in the fragment)."""

    head: tuple[str, str, str]
    body: tuple[tuple[str, str, str], ...]
    guards: tuple[tuple[str, str], ...]
    comparisons: tuple[tuple[str, str, str], ...]
    extra: tuple[str, ...] = ()

    def text(self) -> str:
        parts = [f"holds({s},{r},{o})" for s, r, o in self.body]
        parts += [f"{p}({v})" for p, v in self.guards] + [f"{x} {op} {y}" for op, x, y in self.comparisons]
        parts += list(self.extra)
        s, r, o = self.head
        return f"holds({s},{r},{o}) :- {', '.join(parts)}."


WEIRD_TERMS = ['"Ann"', '"a\\"b\\nc"', "1", "f(A)", "_", "ann", "newphe", "(A,B)", "A+1", "#inf"]
WEIRD_BODY = [
    "not holds(A,child,B)",
    "A < B",
    "spouse(A,B)",
    "-holds(A,child,B)",
    "#count{ X : male(X) } > 1",
    "holds(A,child,B) : male(A)",
    "@f(A) = 1",
    "male(_)",
]


@st.composite
def gen_rule(draw, weird: bool) -> GenRule:
    """A rule whose head, guards and comparisons use only variables of its body's holds atoms (so it is in the
    accepted fragment), or, with ``weird``, possibly with refused terms or body elements mixed in."""

    def name():
        if weird and draw(st.integers(0, 14)) == 0:
            return draw(st.sampled_from(WEIRD_TERMS))
        return draw(st.sampled_from(NAMES))

    def rel():
        if weird and draw(st.integers(0, 14)) == 0:
            return draw(st.sampled_from(WEIRD_TERMS + ["A"]))
        return draw(st.sampled_from(REL_VARS if draw(st.booleans()) else RELS))

    body = tuple((name(), rel(), name()) for _ in range(draw(st.sampled_from((1, 1, 2, 2, 3)))))
    people = sorted({t for s, _, o in body for t in (s, o) if t in NAMES}) or ["A"]
    rvars = sorted({r for _, r, _ in body if r in REL_VARS})
    head = (draw(st.sampled_from(people)), draw(st.sampled_from(RELS + tuple(rvars))), draw(st.sampled_from(people)))
    guards = tuple(
        (draw(st.sampled_from(("male", "female", "person"))), draw(st.sampled_from(people)))
        for _ in range(draw(st.sampled_from((0, 0, 1, 2))))
    )
    comparisons = tuple(
        (draw(st.sampled_from(("=", "!=", "!=", "!="))), draw(st.sampled_from(people)), draw(st.sampled_from(people)))
        for _ in range(draw(st.sampled_from((0, 0, 1, 2))))
    )
    extra = ()
    if weird and draw(st.integers(0, 5)) == 0:
        extra = (draw(st.sampled_from(WEIRD_BODY)),)
    return GenRule(head, body, guards, comparisons, extra)


@st.composite
def rule_files(draw, weird: bool = False) -> tuple[str, list[GenRule]]:
    """The text of a rule file (rules one per line, comment lines between) and its rules in order."""
    rules = draw(st.lists(gen_rule(weird), min_size=1, max_size=4))
    lines = []
    for r in rules:
        if draw(st.booleans()):
            lines.append('% a comment with holds(x) :- and "quotes"')
        lines.append(r.text())
    return "\n".join(lines) + "\n", rules


def independent_closure(facts, genders: dict[str, str], rules: list[GenRule]) -> set:
    """Naive least fixpoint of generated rules (plain Python, no dukb.solver): every binding of the body holds atoms
    by backtracking, then the guards and comparisons, until nothing new is derived (Wu et al. 2025, Def. 1)."""
    known = set(facts)

    def matches(atoms, env):
        if not atoms:
            yield env
            return
        (s, r, o), rest = atoms[0], atoms[1:]
        for fs, fr, fo in known:
            e = dict(env)
            ok = True
            for term, value in ((s, fs), (r, fr), (o, fo)):
                if term in NAMES or term in REL_VARS:
                    if e.setdefault(term, value) != value:
                        ok = False
                elif term != value:
                    ok = False
            if ok:
                yield from matches(rest, e)

    def test(rule, env):
        for pred, v in rule.guards:
            if (pred == "person" and env[v] not in genders) or (pred != "person" and genders.get(env[v]) != pred):
                return False
        return all((env[x] == env[y]) == (op == "=") for op, x, y in rule.comparisons)

    while True:
        new = set()
        for rule in rules:
            for env in list(matches(rule.body, {})):
                if test(rule, env):
                    new.add(tuple(env.get(t, t) for t in rule.head))
        if new <= known:
            return known
        known |= new


RULES_PROPERTY = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)


@RULES_PROPERTY
@given(file=rule_files(), fam=families(max_facts=12))
def test_accepted_rule_files_give_one_closure(tmp_path_factory, kb_builder, file, fam):
    """Every generated file in the fragment is accepted; numpy and clingo give the same closure (facts, order,
    instances), equal to the independent fixpoint."""
    text, rules = file
    path = tmp_path_factory.getbasetemp() / "gen.lp"
    path.write_text(text, encoding="utf-8")
    rs = load_rules(path)
    assert len(rs) == len(rules)
    kb = kb_builder(fam.genders, fam.facts)
    fast = compute_closure(kb, rs, method="numpy")
    full = compute_closure(kb, rs, method="clingo")
    assert_same(fast, full)
    event(f"derived facts: {'yes' if full.n_derived else 'no'}")
    assert set(full.atoms) == independent_closure(fam.facts.values(), fam.genders, rules)


@RULES_PROPERTY
@given(file=rule_files(weird=True), fam=families(max_facts=8))
def test_any_rule_file_is_refused_on_a_line_or_reads_the_same_both_ways(tmp_path_factory, kb_builder, file, fam):
    """With refused constructs mixed in: either a RulesError on one of the file's lines, or the numpy evaluator
    compiles the file (no fallback) and gives clingo's closure."""
    text, rules = file
    path = tmp_path_factory.getbasetemp() / "weird.lp"
    path.write_text(text, encoding="utf-8")
    try:
        rs = load_rules(path)
    except RulesError as e:
        event("refused")
        assert e.path == str(path) and e.line is not None and 1 <= e.line <= text.count("\n")
        assert "\n" not in str(e)
        return
    event("accepted")
    assert not any(r.extra for r in rules)
    kb = kb_builder(fam.genders, fam.facts)
    assert_same(compute_closure(kb, rs, method="numpy"), compute_closure(kb, rs, method="clingo"))
