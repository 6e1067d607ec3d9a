"""Parity of recall and accuracy over the paper's sets with the reference, and the tie-break.

The reference (github.com/wrh14/deep_unlearning, calculate_recall_and_acc.py with utils_metric.py's
get_valid_unlearn_general and get_prec_rec_acc) does, for one target:

- ``minimal_unlearn_set = list(torch.load("synthetic_data/unlearn_minimal_set/<id>.pt"))``;
- ``unlearn_ind = 1 - relationships_correct`` (float32); for each set, an indicator ``minimal_set_ind`` over the
  400 relationship facts; ``rec = (minimal_set_ind * unlearn_ind).sum() / minimal_set_ind.sum()`` and
  ``acc = 1 - (unlearn_ind * (1 - minimal_set_ind)).sum() / (len(unlearn_ind) - len(minimal_set))``;
- ``rec = max(recall_list)``, ``argmax = np.asarray(recall_list).argmax()`` (the first maximum),
  ``acc_rel = accuracy_list[argmax]``, ``acc_bio = mean(biographies_correct)``, ``size_mul = len(set[argmax])``,
  ``acc_all = (acc_bio * num_bio + acc_rel * (num_rel - size_mul)) / (num_bio + num_rel - size_mul)``.

:func:`reference_rec_acc` below is written from that description, in numpy, on sets read with Python's own
unpickler; dukb's :func:`dukb.solver.metrics.recall_accuracy` with ``tie_break="first"`` must give the same four
numbers and the same set on 1,000 random outcomes; ``tie_break="accuracy"`` (the default) the same recall and the
best relationship accuracy among the tied sets.

Source: Wu et al. 2025, Eq. 1-2.
"""

from __future__ import annotations

import numpy as np
import pytest
from independent_logic import reference_paper_sets

from dukb import InputError
from dukb.kb import load_kb
from dukb.kb.paper_sets import find_paper_sets
from dukb.solver.metrics import recall_accuracy


def reference_rec_acc(minimal_unlearn_list, rel_correct, bio_correct):
    """(rec, acc_rel, acc_bio, acc_all, chosen set, accuracy list, recall list) as calculate_recall_and_acc.py."""
    rel_ind = np.asarray(rel_correct).astype(np.float32)
    unlearn_ind = 1 - rel_ind
    recall_list, acc_list = [], []
    for minimal_set in minimal_unlearn_list:
        minimal_set_ind = np.zeros(len(unlearn_ind))
        minimal_set_ind[list(minimal_set)] = 1
        recall_list.append((minimal_set_ind * unlearn_ind).sum() / minimal_set_ind.sum())
        acc_list.append(1 - (unlearn_ind * (1 - minimal_set_ind)).sum() / (len(unlearn_ind) - len(minimal_set)))
    rec = max(recall_list)
    argmax = np.asarray(recall_list).argmax()
    acc_bio = np.asarray(bio_correct).mean()
    num_rel, num_bio = len(rel_ind), len(bio_correct)
    size_mul = len(list(minimal_unlearn_list)[argmax])
    acc_all = ((acc_bio * num_bio) + acc_list[argmax] * (num_rel - size_mul)) / (num_bio + num_rel - size_mul)
    return rec, acc_list[argmax], acc_bio, acc_all, sorted(minimal_unlearn_list[argmax]), acc_list, recall_list


@pytest.fixture(scope="module")
def bench(edu_relat_dir):
    folder = edu_relat_dir / "original" / "unlearn_minimal_set"
    if not folder.is_dir():
        pytest.skip(f"{folder} not found")
    kb = load_kb(edu_relat_dir)
    ours, _ = find_paper_sets(edu_relat_dir, set(kb.rel_ids))
    ref = {int(p.stem): reference_paper_sets(p) for p in folder.glob("*.pt")}
    return kb, ours, ref


def random_outcomes(kb, targets, n=1000, seed=0):
    """(target, relationships_correct, biographies_correct): a forgetting rate p ~ U(0, 1) per outcome, each fact
    forgotten with probability p (every rate from nothing to everything forgotten, ties included)."""
    rng = np.random.default_rng(seed)
    for _ in range(n):
        t = int(rng.choice(targets))
        p = rng.random()
        yield t, rng.random(len(kb.relationships)) >= p, rng.random(len(kb.biographies)) >= p


def test_paper_set_recall_equals_the_reference_on_1000_random_outcomes(bench):
    kb, ours, ref = bench
    assert kb.rel_ids == list(range(400)) and kb.bio_ids == list(range(300))  # indicator index = fact_id
    differ = ties = 0
    for t, rel, bio in random_outcomes(kb, sorted(ref)):
        rec, acc_rel, acc_bio, acc_all, chosen, acc_list, recall_list = reference_rec_acc(ref[t], rel, bio)
        gone_rel = [f for f in kb.rel_ids if not rel[f]]
        gone_bio = [f for f in kb.bio_ids if not bio[f]]
        first = recall_accuracy(kb, ours[t], gone_rel, gone_bio, "paper", [t], tie_break="first")
        assert first.recall == pytest.approx(rec, abs=1e-12)
        assert first.accuracy_relationships == pytest.approx(acc_rel, abs=1e-12)
        assert first.accuracy_biographies == pytest.approx(acc_bio, abs=1e-12)
        assert first.accuracy_all == pytest.approx(acc_all, abs=1e-12)
        assert first.best_set == chosen
        assert first.n_sets == len(ref[t]) and first.sets_used == "paper"
        # the default tie-break: same recall, the best relationship accuracy among the sets tied on recall
        best = recall_accuracy(kb, ours[t], gone_rel, gone_bio, "paper", [t])
        tied = [a for a, r in zip(acc_list, recall_list) if r == rec]
        assert best.recall == first.recall and best.ties == first.ties == len(tied)
        assert best.accuracy_relationships == pytest.approx(max(tied), abs=1e-12)
        ties += len(tied) > 1
        differ += best.best_set != first.best_set
    assert ties > 50 and differ > 10  # the outcomes exercise the tie-break (else this test could not fail)


def test_paper_order_is_the_reference_order(bench):
    kb, ours, ref = bench
    for t, sets in ref.items():
        assert ours[t] == sets


def test_tie_break_first_keeps_the_first_set_accuracy_the_more_accurate(tmp_path):
    kb = load_kb("demo")
    sets = [(5, 6), (5, 7, 9, 10)]  # forgotten {5, 7}: both recall 1/2
    first = recall_accuracy(kb, sets, [5, 7], tie_break="first")
    acc = recall_accuracy(kb, sets, [5, 7], tie_break="accuracy")
    assert first.recall == acc.recall == 0.5 and first.ties == acc.ties == 2
    assert first.best_set == [5, 6] and first.accuracy_relationships == 15 / 16  # fact 7 lost collaterally
    assert acc.best_set == [5, 7, 9, 10] and acc.accuracy_relationships == 1.0
    # "first" follows the order given
    assert recall_accuracy(kb, sets[::-1], [5, 7], tie_break="first").best_set == [5, 7, 9, 10]
    # the default is the accuracy rule, as before the option existed
    assert recall_accuracy(kb, sets, [5, 7]).best_set == [5, 7, 9, 10]
    with pytest.raises(InputError, match="unknown tie-break 'last'"):
        recall_accuracy(kb, sets, [5, 7], tie_break="last")
