"""MIA scores, the rank AUC and PrivLeak (dukb/neural/metrics/mia.py) against brute force and hand-computed values."""

from __future__ import annotations

import math
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dukb.neural.metrics.mia import auc, privleak

scores = st.lists(st.integers(-5, 5).map(float), min_size=1, max_size=12)


def test_auc_extremes():
    assert auc([3.0, 4.0], [1.0, 2.0]) == 1.0  # perfect separation
    assert auc([1.0, 2.0], [3.0, 4.0]) == 0.0
    assert auc([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]) == 0.5  # identical score lists
    with pytest.raises(ValueError):
        auc([], [1.0])
    with pytest.raises(ValueError):
        auc([float("nan")], [1.0])


@settings(max_examples=300, deadline=None)
@given(members=scores, nonmembers=scores)
def test_rank_auc_equals_brute_force_over_all_pairs(members, nonmembers):
    pairs = [(1.0 if a > b else 0.5 if a == b else 0.0) for a in members for b in nonmembers]
    assert auc(members, nonmembers) == pytest.approx(sum(pairs) / len(pairs))


def test_privleak_signs_follow_muse():
    assert privleak(0.5, 0.5) == 0.0  # f_retrain itself
    assert privleak(1.0, 0.5) == pytest.approx(-1.0)  # remembers everything: MUSE's -100% (under)
    assert privleak(0.3, 0.5) == pytest.approx(0.4)  # loss pushed above the retrain model's: over
    with pytest.raises(ValueError):
        privleak(0.7, 1.0)


def test_mia_scores_by_hand():
    torch = pytest.importorskip("torch")
    from dukb.neural.metrics.mia import mia_scores

    # one text, 3 positions, vocabulary of 2; positions 0..2 score tokens 0, 1, 0; position 3 is padding
    logits = torch.tensor([[[0.0, 0.0], [2.0, 0.0], [0.0, 1.0], [5.0, 5.0]]])
    labels = torch.tensor([[0, 1, 0, -100]])
    text = "Who is A to B? father"

    def logsm(row):
        z = math.log(sum(math.exp(v) for v in row))
        return [v - z for v in row]

    rows = [logsm(r) for r in ([0.0, 0.0], [2.0, 0.0], [0.0, 1.0])]
    lp = [rows[0][0], rows[1][1], rows[2][0]]
    norm = []
    for r, tok in zip(rows, lp):
        mu = sum(math.exp(v) * v for v in r)
        sd = math.sqrt(sum(math.exp(v) * v * v for v in r) - mu * mu)
        norm.append((tok - mu) / sd if sd > 0 else (tok - mu) / 1e-6)
    got = mia_scores(logits, labels, [text], k=0.5)  # max(1, floor(0.5 * 3)) = 1 lowest token
    ll = sum(lp) / 3
    assert got["loss"][0] == pytest.approx(ll)
    assert got["zlib"][0] == pytest.approx(ll / len(zlib.compress(text.encode())))
    assert got["mink"][0] == pytest.approx(min(lp))
    # position 0 has a uniform distribution (sigma 0): the clamp makes its normalised value very negative
    assert got["minkpp"][0] == pytest.approx(min(norm), rel=1e-3)
    with pytest.raises(ValueError):
        mia_scores(logits, labels, [text], k=0)
