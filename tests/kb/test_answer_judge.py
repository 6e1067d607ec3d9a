"""One answer judge (dukb.kb.judge) behind probes, probing and RESTOR: every match rule through one interface, the
exact rule on probe files, the three-way label under each rule, and the rule-aware belief analysis in solver/
(torch-free)."""

from __future__ import annotations

import pytest

from dukb.kb.corrupt import CorruptedFact
from dukb.kb.judge import INJECTED, MATCHES, OTHER, PLAIN, TRUE, Judge, judge
from dukb.kb.probe_files import read_probes, write_probes
from dukb.kb.probes import Probe

MC = "Who is Bo Roe's father?\nA. Gus Poe\nB. Fred Roe\nC. Al Roe\nD. Cy Doe"

# (output, answer, rule, question, expected): one row per rule and case, labelled by hand
CASES = [
    ("He is her HUSBAND.", "husband", "substring", "", True),
    ("West Virginia state", "Virginia state", "substring", "", True),  # the paper's rule accepts a substring
    ("West Virginia state", "Virginia state", "exact", "", False),  # the exact rule does not
    ("Virginia state, near the coast", "Virginia state", "exact", "", True),
    ("Virginia", "Virginia state", "exact", "", True),  # "X" = "X state"
    ("Yes, he is.", "yes", "yesno", "", True),
    ("I do not know", "no", "yesno", "", False),  # substring would accept "not"
    ("B. because", "Fred Roe", "choice", MC, True),
    ("(A) Gus Poe", "Fred Roe", "choice", MC, False),
    ("It is Fred Roe.", "Fred Roe", "choice", MC, True),
]


@pytest.mark.parametrize("output,answer,rule,question,expected", CASES)
def test_every_rule_through_one_interface(output, answer, rule, question, expected):
    assert PLAIN.accepts(output, answer, rule, question) is expected
    # the probe-level entry point dispatches on the probe's own rule
    assert judge(Probe("qa", "biography", 0, question or "q", answer, rule), output) is expected


def test_rules_are_exactly_the_documented_four():
    assert MATCHES == ("substring", "yesno", "choice", "exact")
    with pytest.raises(ValueError, match="regex"):
        PLAIN.accepts("a", "a", "regex")
    with pytest.raises(ValueError, match="regex"):
        PLAIN.label("a", [], None, match="regex")


def test_exact_probes_survive_a_probe_file_and_use_known_phrases(tmp_path):
    p = Probe("reverse", "relationship", 3, "Who is Bo Roe's father?", "Fred Roe", "exact")
    for fmt in ("jsonl", "csv"):
        assert read_probes(write_probes([p], tmp_path / f"p.{fmt}", fmt)) == [p]
    # without known phrases the answer is the first segment; a KB-aware judge finds the name in a longer sentence
    assert judge(p, "Fred Roe, of course") and not judge(p, "Fred Roe is his father")
    kb_judge = Judge(["Fred Roe", "Fred Roemer"])
    assert judge(p, "Fred Roe is his father", kb_judge) and not judge(p, "Fred Roemer is his father", kb_judge)


def test_label_under_each_rule():
    j = Judge(["Virginia state", "West Virginia state", "Ohio state"])
    # exact (RESTOR): the longest known phrase decides
    assert j.label("West Virginia state.", ["Virginia state"], "West Virginia state") == (
        INJECTED,
        "west virginia state",
    )
    # substring: the true value is a substring of the injected one, and true wins
    assert j.label("West Virginia state.", ["Virginia state"], "West Virginia state", match="substring")[0] == TRUE
    assert j.label("Ohio", ["Virginia state"], None, match="substring")[0] == OTHER
    assert j.label("Ohio", ["Ohio state"], None)[0] == TRUE


def test_probing_uses_the_kb_judge():
    pytest.importorskip("torch")
    import dukb.kb.judge
    import dukb.neural.probe

    assert dukb.neural.probe.judge is dukb.kb.judge.judge
    assert not hasattr(dukb.neural.probe, "is_known")


# ------------------------------------------------------------------------------------------ dukb/solver/beliefs ----
def test_belief_closure_in_solver(kb_builder):
    from dukb.solver.beliefs import analyse_beliefs, belief_closure, contradictions, stated_or_derivable
    from dukb.solver.closure import compute_closure

    kb = kb_builder(
        {"Al Roe": "male", "Bo Roe": "male", "Fred Roe": "male", "Gus Poe": "male"},
        [("Al Roe", "father", "Fred Roe"), ("Bo Roe", "father", "Fred Roe"), ("Al Roe", "brother", "Bo Roe")],
    )
    truth = set(compute_closure(kb).atoms)
    beliefs = [("Al Roe", "father", "Fred Roe"), ("Bo Roe", "father", "Gus Poe"), ("Al Roe", "brother", "Bo Roe")]
    cl = belief_closure(kb, beliefs)
    assert cl.atoms[:3] == beliefs
    false, contra = contradictions(cl, truth)
    # R37 both ways: Al's brother Bo has Al's father Fred, and Al has Bo's father Gus; each against an answer
    assert sorted(contra) == [("Al Roe", "father", "Gus Poe"), ("Bo Roe", "father", "Fred Roe")]
    assert false == [("Al Roe", "father", "Gus Poe"), ("Gus Poe", "child", "Al Roe"), ("Gus Poe", "child", "Bo Roe")]
    # stated only; derived only; absent
    assert stated_or_derivable(cl, ("Bo Roe", "father", "Gus Poe")) == (True, False)
    assert stated_or_derivable(cl, ("Gus Poe", "child", "Bo Roe")) == (False, True)
    assert stated_or_derivable(cl, ("Gus Poe", "father", "Al Roe")) == (False, False)
    # stated and derivable from the other beliefs: Bo's brother Al follows from Al's brother Bo (both male)
    redundant = ("Bo Roe", "brother", "Al Roe")
    assert stated_or_derivable(belief_closure(kb, beliefs + [redundant]), redundant) == (True, True)
    out = analyse_beliefs(
        kb,
        beliefs,
        truth,
        [
            CorruptedFact("relationship", 1, "Bo Roe", "father", "Fred Roe", "Gus Poe"),
            CorruptedFact("biography", 0, "Al Roe", "job", "Banker", "Teller"),
        ],
    )  # biographies do not count
    assert (out["n_corrupted_rel"], out["n_injected_stated"], out["injected_retained"]) == (1, 1, [1])
    assert out["n_beliefs"] == 3 and out["n_beliefs_false"] == 1 and out["n_derived"] == cl.n_derived
