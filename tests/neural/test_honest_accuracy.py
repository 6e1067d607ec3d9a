"""Honest accuracy (issue: honest protocol): facts a method trains on as retain data are never scored as retained
knowledge. Checked against an independent plain-Python reading of the definition, and by hand."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dukb import InputError
from dukb.solver.metrics import recall_accuracy

NAN = float("nan")
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def reference(n_rel, n_bio, sets, forgot_rel, forgot_bio, ex_rel, ex_bio):
    """The definition read literally: for each minimal set, recall and the accuracy over the scored facts (KB minus
    the set minus the retain-train facts; NaN when none is left: nothing to score); the best set by recall, then
    accuracy (a set with nothing to score last), then size, then ids."""
    rel = set(range(n_rel))
    best = None
    for s in sets:
        rec = len(set(s) & forgot_rel) / len(s)
        scored = [f for f in rel if f not in s and f not in ex_rel]
        acc = NAN if not scored else sum(f not in forgot_rel for f in scored) / len(scored)
        key = (rec, -1.0 if acc != acc else acc, -len(s), tuple(-x for x in sorted(s)))
        if best is None or key > best[0]:
            best = (key, rec, acc, len(scored), sorted(s))
    _, rec, acc_rel, n_scored_rel, best_set = best
    scored_bio = [b for b in range(n_bio) if b not in ex_bio]
    acc_bio = None
    if n_bio:
        acc_bio = NAN if not scored_bio else sum(b not in forgot_bio for b in scored_bio) / len(scored_bio)
    n_b = len(scored_bio) if n_bio else 0
    denom = n_scored_rel + n_b
    known = (acc_rel * n_scored_rel if n_scored_rel else 0.0) + (acc_bio * n_b if n_b else 0.0)
    acc_all = NAN if denom == 0 else known / denom
    return rec, acc_rel, acc_bio, acc_all, best_set


@st.composite
def outcomes(draw):
    n_rel = draw(st.integers(2, 12))
    n_bio = draw(st.integers(0, 6))
    ids = st.integers(0, n_rel - 1)
    sets = draw(st.lists(st.frozensets(ids, min_size=1, max_size=4), min_size=1, max_size=4))
    forgot_rel = draw(st.frozensets(ids))
    forgot_bio = draw(st.frozensets(st.integers(0, max(n_bio - 1, 0)))) if n_bio else frozenset()
    ex_rel = draw(st.frozensets(ids))
    ex_bio = draw(st.frozensets(st.integers(0, max(n_bio - 1, 0)))) if n_bio else frozenset()
    return n_rel, n_bio, [sorted(s) for s in sets], set(forgot_rel), set(forgot_bio), set(ex_rel), set(ex_bio)


def _kb(kb_builder, n_rel, n_bio):
    people = {f"P{i}": ("male" if i % 2 else "female") for i in range(max(n_rel + 1, n_bio))}
    facts = [(f"P{i}", "child", f"P{i + 1}") for i in range(n_rel)]
    bios = [(f"P{i}", "birthyear", str(1900 + i)) for i in range(n_bio)]
    return kb_builder(people, facts, bios)


@SETTINGS
@given(case=outcomes())
def test_honest_accuracy_matches_the_definition(case, kb_builder):
    n_rel, n_bio, sets, forgot_rel, forgot_bio, ex_rel, ex_bio = case
    kb = _kb(kb_builder, n_rel, n_bio)
    got = recall_accuracy(kb, sets, forgot_rel, forgot_bio, "exact", exclude_rel=ex_rel, exclude_bio=ex_bio)
    rec, acc_rel, acc_bio, acc_all, best_set = reference(n_rel, n_bio, sets, forgot_rel, forgot_bio, ex_rel, ex_bio)
    assert got.recall == pytest.approx(rec)
    assert got.accuracy_relationships == pytest.approx(acc_rel, nan_ok=True)
    assert got.accuracy_all == pytest.approx(acc_all, nan_ok=True) and got.best_set == best_set
    assert (got.accuracy_biographies is None) == (acc_bio is None)
    if acc_bio is not None:
        assert got.accuracy_biographies == pytest.approx(acc_bio, nan_ok=True)
    # forgetting a retain-train fact never changes accuracy at a given set: it is not scored (the set is fixed,
    # since forgetting a retain fact that lies in a set may change which set is best)
    if got.best_set is not None:
        fixed = [list(got.best_set)]

        def fb(op):
            return None if forgot_bio is None else op(set(forgot_bio), set(ex_bio))

        base = recall_accuracy(
            kb, fixed, set(forgot_rel) - set(ex_rel), fb(set.__sub__), "exact", exclude_rel=ex_rel, exclude_bio=ex_bio
        )
        more = recall_accuracy(
            kb, fixed, set(forgot_rel) | set(ex_rel), fb(set.__or__), "exact", exclude_rel=ex_rel, exclude_bio=ex_bio
        )
        assert more.accuracy_all == pytest.approx(base.accuracy_all, nan_ok=True)
        assert more.accuracy_relationships == pytest.approx(base.accuracy_relationships, nan_ok=True)


@SETTINGS
@given(case=outcomes())
def test_without_exclusions_it_is_the_papers_accuracy(case, kb_builder):
    n_rel, n_bio, sets, forgot_rel, forgot_bio, _e, _b = case
    kb = _kb(kb_builder, n_rel, n_bio)
    got = recall_accuracy(kb, sets, forgot_rel, forgot_bio, "exact")
    best = got.best_set
    keep = n_rel - len(best)
    eq2 = NAN if keep == 0 else (keep - len(forgot_rel - set(best))) / keep  # Wu et al. 2025, Eq. 2; 0/0 is NaN
    assert got.accuracy_relationships == pytest.approx(eq2, nan_ok=True)


def test_by_hand(kb_builder):
    kb = _kb(kb_builder, 6, 2)
    # M = {{0, 1}}; U_A = {0, 1, 4}; retain-train facts {4, 5} and biography 0 (forgotten too)
    plain = recall_accuracy(kb, [[0, 1]], {0, 1, 4}, {0})
    honest = recall_accuracy(kb, [[0, 1]], {0, 1, 4}, {0}, exclude_rel=[4, 5], exclude_bio=[0])
    assert plain.recall == honest.recall == 1.0
    assert plain.accuracy_relationships == pytest.approx(3 / 4)  # 2, 3, 5 of 2, 3, 4, 5
    assert honest.accuracy_relationships == pytest.approx(2 / 2)  # 2, 3 of 2, 3
    assert plain.accuracy_biographies == pytest.approx(1 / 2) and honest.accuracy_biographies == 1.0
    assert honest.accuracy_all == pytest.approx((2 + 1) / (2 + 1))
    with pytest.raises(InputError, match="excluded"):
        recall_accuracy(kb, [[0, 1]], {0}, None, exclude_rel=[99])


# ------------------------------------------------------------------------------ closed-loop deep unlearning -----
def test_closed_loop_loss_by_hand():
    torch = pytest.importorskip("torch")
    from dukb.neural.methods.closed_loop import closed_loop_loss

    # one forget answer token with p = 0.5 and one retain answer token with p = 0.25 (two-word vocabulary logits)
    f_logits = torch.tensor([[[0.0, 0.0], [0.0, 0.0]]])
    f_labels = torch.tensor([[-100, 1]])
    r_logits = torch.tensor([[[0.0, float(torch.log(torch.tensor(3.0)))], [0.0, 0.0]]])
    r_labels = torch.tensor([[-100, 0]])
    import math

    ga = -math.log(2)  # L_GA = −NLL = log p = −log 2
    gdr = -math.log(0.25)  # NLL of p = 1/4
    assert closed_loop_loss(f_logits, f_labels).item() == pytest.approx(ga)
    assert closed_loop_loss(f_logits, f_labels, r_logits, r_labels, 2.0).item() == pytest.approx(ga + 2 * gdr)


def test_choose_set_prefers_the_fewest_still_known_facts():
    from dukb.neural.methods.closed_loop import choose_set

    sets = [[1, 2], [3], [4, 5, 6]]
    assert choose_set(sets, known={1, 2, 3, 4}) == [3]  # one known fact each for [3] and [4,5,6]: smaller set
    assert choose_set(sets, known={3, 4}) == [1, 2]  # already forgotten facts cost nothing
    assert choose_set(sets, known=set(), fixed=[4, 5, 6]) == [4, 5, 6]


def test_recall_under_attack_by_hand(kb_builder):
    """A fact the QA probe finds forgotten but a paraphrase elicits counts as known: recall drops from 1 to 1/2."""
    import pandas as pd

    from dukb.neural.metrics.attack import recall_under_attack
    from dukb.neural.metrics.base import RowContext

    kb = kb_builder(
        {"A": "male", "B": "female", "C": "male"}, [("A", "wife", "B"), ("B", "husband", "A"), ("C", "father", "A")]
    )
    rows = [
        ("qa", "relationship", 0, False),
        ("qa", "relationship", 1, False),
        ("qa", "relationship", 2, True),
        ("paraphrase", "relationship", 1, True),
        ("yes", "relationship", 0, True),  # yes/no is no elicitation
        ("reverse", "relationship", 2, True),
    ]
    df = pd.DataFrame(rows, columns=["kind", "fact_kind", "fact_id", "known"])
    out = recall_under_attack(RowContext(kb, 0, [[0, 1]], "exact", df, [0]))
    assert out["recall_under_attack"] == 0.5
    assert out["leaked_relationships"] == [1] and out["leaks_by_kind"] == {"paraphrase": 1}
    assert out["accuracy_all_under_attack"] == 1.0  # the one fact outside the set (2) is still known
