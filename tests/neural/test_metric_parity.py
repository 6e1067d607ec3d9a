"""Parity tests: each number dukb reports, recomputed by an independent implementation written from the paper or the
reference code's description, on the same inputs.

- The trade-off rule (Acc@Recall≥0.8, Recall@Acc≥0.8, AR-AUC) as the Eval-DU figure notebook computes it
  (wrh14/deep_unlearning, "Unlearning Evaluation -- Final Paper Figure Generation.ipynb", cells 10, 17, 18, 20):
  numpy arrays, ``np.argsort``, anchors by ``np.concatenate``, ``y[rec >= thr].max()``, ``rec[y >= thr].max()``,
  the trapezoid rule, then mean and ``std`` over targets. Includes a two-target toy where the per-target rule and
  the mean-envelope reading differ, and a tie in recall.
- Success-DU (Definition 2 of Wu et al. 2025) against :func:`independent_logic.closure`, naive forward chaining.
- Min-K% and Min-K%++ at n = 7 and 12 tokens by hand, with ⌊k·n⌋ tokens (at least 1) as RWKU's ``eval_mia.py``
  and open-unlearning's ``mia/min_k.py`` take them.
- Recall and accuracy on EDU-RELAT's example_for_evaluation against the benchmark's own rec_acc.pt
  (0.75, 0.25, 0.023333, 0.152299); skipped when EDU-RELAT is absent.
- RWKU's neighbours (must not involve the target) against a plain-python cone: backward search over the rule
  instances of :func:`independent_logic.ground_instances` on the naive closure; no neighbour lies in the cone or in
  any of the solver's minimal deep unlearning sets (on generated KBs, and on EDU-RELAT's 55 targets, where the old
  neighbours put 691 of 981 facts in a minimal set).
"""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pandas as pd
import pytest
from independent_logic import closure as ref_closure
from independent_logic import family_tree_facts, ground_instances, parse_raw_rules, reference_recall


# -- the trade-off rule ------------------------------------------------------------------------------------------
def notebook_rule(rec, acc, thr: float = 0.8) -> tuple[float, float, float]:
    """One target's (Acc@Recall≥thr, Recall@Acc≥thr, AR-AUC), written after the figure notebook's numpy code."""
    rec, y = np.asarray(rec, dtype=float), np.asarray(acc, dtype=float)
    order = np.argsort(rec, kind="stable")  # the notebook's np.argsort; stable so ties keep the sweep order
    rec, y = rec[order], y[order]
    y = np.concatenate([np.ones(1), y, np.zeros(1)])
    rec = np.concatenate([np.zeros(1), rec, np.ones(1)])
    area = float(np.sum(np.diff(rec) * (y[1:] + y[:-1]) / 2))  # sklearn.metrics.auc = np.trapz on monotone x
    return float(y[rec >= thr].max()), float(rec[y >= thr].max()), area


def rows_of(curves: dict, method: str = "ga") -> pd.DataFrame:
    """Result rows from {target: [(recall, accuracy), ...] in sweep order (steps 1, 2, 4, ...)}."""
    rows = []
    for t, pts in curves.items():
        for i, (r, a) in enumerate(pts):
            rows.append(
                {
                    "method": method,
                    "target": t,
                    "param": "steps",
                    "setting": {"steps": 2**i},
                    "recall": r,
                    "accuracy_all": a,
                    "target_forgotten": r > 0,
                }
            )
    return pd.DataFrame(rows)


CURVES = [
    [(0.2, 0.99), (0.5, 0.9), (0.85, 0.6), (1.0, 0.3)],
    [(0.0, 1.0), (0.1, 0.97)],  # never reaches recall 0.8: Acc@Recall comes from the anchor (1, 0)
    [(0.9, 0.95)],  # one setting beyond both thresholds
    [(0.5, 0.9), (0.5, 0.4), (0.9, 0.2)],  # a tie in recall: sweep order decides the trapezoids
    [(0.3, 0.5), (0.1, 0.9), (0.8, 0.8)],  # recall not monotone in the sweep: sorted first
]


@pytest.mark.parametrize("pts", CURVES)
def test_target_rule_matches_the_notebook(pts):
    from dukb.neural.metrics.summary import target_tradeoff

    got = target_tradeoff(pts)
    want = notebook_rule([r for r, _ in pts], [a for _, a in pts])
    assert (got["acc_at_recall"], got["recall_at_acc"], got["ar_auc"]) == pytest.approx(want)


def test_target_rule_by_hand():
    from dukb.neural.metrics.summary import target_tradeoff

    # anchored: (0, 1) (0.2, 0.99) (0.5, 0.9) (0.85, 0.6) (1, 0.3) (1, 0)
    got = target_tradeoff(CURVES[0])
    assert got["acc_at_recall"] == pytest.approx(0.6)
    assert got["recall_at_acc"] == pytest.approx(0.5)
    area = 0.2 * 1.99 / 2 + 0.3 * 1.89 / 2 + 0.35 * 1.5 / 2 + 0.15 * 0.9 / 2 + 0.0
    assert got["ar_auc"] == pytest.approx(area)
    # the tie: (0.5, 0.9) then (0.5, 0.4) in sweep order
    got = target_tradeoff(CURVES[3])
    assert got["ar_auc"] == pytest.approx(0.5 * 1.9 / 2 + 0.4 * 0.6 / 2 + 0.1 * 0.2 / 2)
    assert got["acc_at_recall"] == pytest.approx(0.2) and got["recall_at_acc"] == pytest.approx(0.5)


def test_two_targets_per_target_differs_from_the_mean_envelope():
    """Target A keeps accuracy at high recall, target B collapses: the paper's per-target mean and dukb's former
    envelope of the mean points give different numbers, and the default is the paper's."""
    from dukb.neural.metrics.run_summary import tradeoff_metric

    curves = {1: [(0.5, 0.95), (0.9, 0.85)], 2: [(0.5, 0.95), (0.6, 0.3)]}
    got = tradeoff_metric(rows_of(curves))["ga"]
    per = [notebook_rule([r for r, _ in p], [a for _, a in p]) for p in curves.values()]
    for i, key in enumerate(("acc_at_recall", "recall_at_acc", "ar_auc")):
        vals = np.array([v[i] for v in per])
        assert got[key] == pytest.approx(vals.mean())
        assert got[f"{key}_std"] == pytest.approx(vals.std())  # numpy's population std, as the notebook
    # by hand: A (0.85, 0.9, 0.89), B (0, 0.5, 0.61)
    assert (got["acc_at_recall"], got["recall_at_acc"], got["ar_auc"]) == pytest.approx((0.425, 0.7, 0.75))
    # the mean points (0.5, 0.95) and (0.75, 0.575): envelope accuracy at recall 0.8 interpolates (0.75, 0.575)
    # -> (1, 0); the envelope crosses accuracy 0.8 at recall 0.5 + 0.25 * 0.15 / 0.375
    assert got["acc_at_recall_envelope"] == pytest.approx(0.575 * 0.8)
    assert got["recall_at_acc_envelope"] == pytest.approx(0.6)
    assert got["acc_at_recall"] != pytest.approx(got["acc_at_recall_envelope"])
    assert got["recall_at_acc"] != pytest.approx(got["recall_at_acc_envelope"])


def test_summary_and_report_use_the_per_target_rule(tmp_path):
    import json

    from dukb.neural.protocols.evaluate.report import render

    curves = {1: [(0.5, 0.95), (0.9, 0.85)], 2: [(0.5, 0.95), (0.6, 0.3)]}
    df = rows_of(curves)
    rows = df.to_dict("records")
    for r in rows:
        r.update(
            accuracy_relationships=r["accuracy_all"],
            accuracy_biographies=None,
            success_du=int(r["recall"] > 0.8),
            target_relation="father",
        )
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    render(tmp_path)
    s = pd.read_csv(tmp_path / "summary.csv")
    a = s[s["group"] == "all"].set_index(["metric", "reading"])
    paper = "paper (per target)"
    assert [a.loc[(k, paper), "value"] for k in ("acc_at_recall", "recall_at_acc", "ar_auc")] == pytest.approx(
        [0.425, 0.7, 0.75]
    )
    assert a.loc[("acc_at_recall", paper), "std"] == pytest.approx(0.425) and a.loc[("acc_at_recall", paper), "n"] == 2
    assert a.loc[("acc_at_recall", "envelope (not comparable to the paper)"), "value"] == pytest.approx(0.46)
    # Success-DU at the best setting (per target, the largest recall with accuracy >= 0.8): target 1 at steps 2
    # (0.9, 0.85) deeply unlearns, target 2's best is steps 1 (0.5, 0.95), which does not: 0.5 over 2 targets
    assert a.loc[("success_du", paper), "value"] == pytest.approx(0.5)
    assert a.loc[("success_du", paper), "setting"] == "steps=1 ×1, steps=2 ×1"
    assert a.loc[("success_du", "any setting (not comparable to the paper)"), "value"] == pytest.approx(0.5)
    text = (tmp_path / "report.md").read_text()
    assert "0.42 ± 0.42" in text and "per target" in text and "Eval-DU" in text and "Success-DU" in text


# -- Success-DU --------------------------------------------------------------------------------------------------
GENDERS = {"Gus": "male", "Al": "male", "Ed": "male", "Bea": "female", "Cy": "male", "Di": "female"}
PARENTS = {"Al": ("Gus",), "Ed": ("Gus",), "Cy": ("Al", "Bea"), "Di": ("Al", "Bea")}
COUPLES = [("Al", "Bea")]


def test_success_du_matches_plain_closure(kb_builder):
    from dukb.neural.metrics.recall import success_du
    from dukb.solver.closure import compute_closure

    facts = sorted(family_tree_facts(GENDERS, PARENTS, COUPLES))
    kb = kb_builder(GENDERS, facts)
    c = compute_closure(kb, "family")
    rules = parse_raw_rules(rule_set="family")
    rng = random.Random(0)
    ids = list(range(len(facts)))
    checked = {0: 0, 1: 0}
    for target in rng.sample(ids, 6):
        removed_sets = [set(), set(ids), {target}]
        removed_sets += [set(rng.sample(ids, rng.randint(1, len(ids)))) | {target} for _ in range(40)]
        for u in removed_sets:
            kept = [facts[i] for i in ids if i not in u]
            want = int(facts[target] not in ref_closure(kept, GENDERS, rules))
            assert success_du(c, target, sorted(u)) == want, (target, sorted(u))
            checked[want] += 1
    assert checked[0] and checked[1]  # both outcomes occur


# -- Min-K% and Min-K%++ -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [7, 12])
@pytest.mark.parametrize("k", [0.2, 0.5, 1.0])
def test_min_k_by_hand(n, k):
    torch = pytest.importorskip("torch")
    from dukb.neural.metrics.mia import mia_scores, min_k_count

    want_count = {(7, 0.2): 1, (7, 0.5): 3, (7, 1.0): 7, (12, 0.2): 2, (12, 0.5): 6, (12, 1.0): 12}[(n, k)]
    assert min_k_count(k, n) == want_count == max(1, int(n * k))
    rng = random.Random(n)
    vocab = 3
    logits = [[rng.uniform(-3, 3) for _ in range(vocab)] for _ in range(n)]
    labels = [rng.randrange(vocab) for _ in range(n)]
    lp, norm = [], []
    for row, tok in zip(logits, labels):
        z = math.log(sum(math.exp(v) for v in row))
        logp = [v - z for v in row]
        mu = sum(math.exp(v) * v for v in logp)
        sd = math.sqrt(sum(math.exp(v) * v * v for v in logp) - mu * mu)
        lp.append(logp[tok])
        norm.append((logp[tok] - mu) / sd)
    got = mia_scores(torch.tensor([logits], dtype=torch.float64), torch.tensor([labels]), ["x" * n], k=k)
    assert got["mink"][0] == pytest.approx(sum(sorted(lp)[:want_count]) / want_count, rel=1e-5)
    assert got["minkpp"][0] == pytest.approx(sum(sorted(norm)[:want_count]) / want_count, rel=1e-5)


def test_min_k_count_edges():
    from dukb.neural.metrics.mia import min_k_count

    assert min_k_count(0.2, 1) == 1 and min_k_count(0.2, 4) == 1 and min_k_count(0.2, 5) == 1
    assert min_k_count(0.2, 10) == 2 and min_k_count(1.0, 3) == 3
    for bad in ((0.0, 5), (1.5, 5), (0.2, 0)):
        with pytest.raises(ValueError):
            min_k_count(*bad)


# -- recall and accuracy on the benchmark's example --------------------------------------------------------------
def test_recall_accuracy_on_the_benchmark_example(edu_relat_dir):
    """calculate_recall_and_acc.py's output for example_for_evaluation, rec_acc.pt in wrh14/deep_unlearning, is
    (recall, acc_rel, acc_bio, acc_all) = (0.75, 0.25, 0.0233333, 0.1522989) for target fact 272."""
    from dukb.kb import load_kb
    from dukb.kb.ptfile import load_bool_list
    from dukb.solver.closure import compute_closure
    from dukb.solver.mdus import minimal_sets
    from dukb.solver.metrics import recall_accuracy

    ex = edu_relat_dir / "original" / "example_for_evaluation"
    if not ex.is_dir():
        pytest.skip(f"{ex} not found")
    kb = load_kb(edu_relat_dir)
    rel, bio = load_bool_list(ex / "relationships_correct.pt"), load_bool_list(ex / "biographies_correct.pt")
    forgot_rel = {f.fact_id for f, k in zip(kb.relationships, rel) if not k}
    forgot_bio = {f.fact_id for f, k in zip(kb.biographies, bio) if not k}
    c = compute_closure(kb, "family")
    res = minimal_sets(c, [c.atom_of_fact(272)], "exact")
    assert res.complete
    published = (0.75, 0.25, 0.023333333333333334, 0.15229885057471265)
    got = recall_accuracy(kb, res.sets, forgot_rel, forgot_bio, "exact", [272])
    assert (got.recall, got.accuracy_relationships, got.accuracy_biographies, got.accuracy_all) == pytest.approx(
        published, abs=1e-9
    )
    ref = reference_recall(len(kb.relationships), len(kb.biographies), res.sets, forgot_rel, forgot_bio)
    assert (
        float(ref["recall"]),
        float(ref["accuracy_relationships"]),
        float(ref["accuracy_biographies"]),
    ) == pytest.approx(published[:3], abs=1e-9)
    assert all(float(a) == pytest.approx(published[3], abs=1e-9) for a in ref["accuracy_all"])
    # and the minimal sets themselves: every one is a deep unlearning set none of whose one-smaller subsets is
    from dukb.solver.mdus import is_minimal

    assert all(is_minimal(c, [c.atom_of_fact(272)], s) for s in res.sets)
    assert not any(set(a) < set(b) for a, b in itertools.permutations(res.sets, 2))


# -- RWKU's neighbours and the target's cone ---------------------------------------------------------------------
def plain_cone(facts: dict, genders: dict, rules, target) -> set[int]:
    """fact_ids of the KB facts with a path of rule instances to ``target`` (a triple), the target included: a
    backward search over every instance of the naive closure (no dukb.solver code)."""
    full = ref_closure(facts.values(), genders, rules)
    by_head: dict = {}
    for head, body in ground_instances(full, genders, rules):
        by_head.setdefault(head, []).append(body)
    seen, todo = {target}, [target]
    while todo:
        for body in by_head.get(todo.pop(), ()):
            for b in body:
                if b not in seen:
                    seen.add(b)
                    todo.append(b)
    return {fid for fid, t in facts.items() if t in seen}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rwku_neighbours_avoid_a_plain_python_cone(seed):
    from dukb.kb.generate import generate
    from dukb.neural.metrics.rwku import cone_ids, neighbour_facts
    from dukb.solver.closure import compute_closure
    from dukb.solver.mdus import minimal_sets

    kb, _ = generate(16, seed=seed)
    closure = compute_closure(kb, "family")
    facts = {f.fact_id: (f.subject, f.relation, f.object) for f in kb.relationships}
    genders = {p.name: p.gender for p in kb.people.values()}
    rules = parse_raw_rules(rule_set="family")
    dropped_any = False
    for t in random.Random(seed).sample(sorted(facts), 8):
        cone = plain_cone(facts, genders, rules, facts[t])
        assert cone_ids(closure, [t]) == sorted(cone)
        nb = neighbour_facts(kb, [t], cone)
        people = {facts[t][0], facts[t][2]}
        near = {i for i, (s, _r, o) in facts.items() if i != t and (s in people or o in people)}
        assert set(nb["relationships"]) == near - cone and set(nb["dropped"]) == near & cone
        for u in minimal_sets(closure, [closure.atom_of_fact(t)], "exact").sets:
            assert set(u) <= cone and not set(u) & set(nb["relationships"])
        dropped_any |= bool(nb["dropped"])
    assert dropped_any  # the cone does take neighbours away


def test_rwku_neighbours_on_edu_relat_lie_in_no_minimal_set(edu_relat_dir, edu_relat_target_ids):
    """On EDU-RELAT's 55 targets the neighbours of the forget fact's people put 691 of 981 facts in a minimal deep
    unlearning set of their target; outside the cone, none."""
    from dukb.kb import load_kb
    from dukb.neural.metrics.rwku import cone_ids, neighbour_facts
    from dukb.solver.closure import compute_closure
    from dukb.solver.mdus import minimal_sets

    kb = load_kb(edu_relat_dir)
    closure = compute_closure(kb, "family")
    before = inside = after = 0
    for t in edu_relat_target_ids:
        union = set().union(*map(set, minimal_sets(closure, [closure.atom_of_fact(t)], "exact").sets))
        old = neighbour_facts(kb, [t])["relationships"]
        new = neighbour_facts(kb, [t], cone_ids(closure, [t]))
        before += len(old)
        inside += len(union & set(old))
        after += len(union & set(new["relationships"]))
        assert set(new["relationships"]) | set(new["dropped"]) == set(old)
    assert (before, inside, after) == (981, 691, 0)


# -- PrivLeak on fixed scores ------------------------------------------------------------------------------------
def _roc_auc_sklearn_style(scores, y):
    """sklearn's roc_curve + auc, written out: thresholds at every distinct score (descending), the ROC points
    (FPR, TPR) from (0, 0) to (1, 1), and the trapezoid area. Ties share one threshold, so they count one half."""
    pos, neg = sum(y), len(y) - sum(y)
    pts = [(0.0, 0.0)]
    for thr in sorted(set(scores), reverse=True):
        tp = sum(1 for s, t in zip(scores, y) if s >= thr and t == 1)
        fp = sum(1 for s, t in zip(scores, y) if s >= thr and t == 0)
        pts.append((fp / neg, tp / pos))
    return sum((x1 - x0) * (y0 + y1) / 2 for (x0, y0), (x1, y1) in zip(pts, pts[1:]))


def _muse_min_k(logprobs, ratio=0.4):
    """swj0419/muse_bench metrics/privleak.py: ``k_length = int(len(all_prob)*ratio)``; the score is
    ``-np.mean(np.sort(all_prob)[:k_length])`` (a perplexity-like value: higher = less member-like)."""
    k = int(len(logprobs) * ratio)
    low = sorted(logprobs)[:k]
    return -sum(low) / len(low)


def _muse_privleak(forget, holdout, forget_r, holdout_r):
    """MUSE's eval.py: AUC key forget_holdout_Min-40% (forget labelled 0, holdout 1, ROC of -ppl), then
    (auc - AUC_retrain) / AUC_retrain * 100."""

    def key_auc(f, h):
        ppl = [_muse_min_k(x) for x in f] + [_muse_min_k(x) for x in h]
        return _roc_auc_sklearn_style([-p for p in ppl], [0] * len(f) + [1] * len(h))

    a, r = key_auc(forget, holdout), key_auc(forget_r, holdout_r)
    return (a - r) / r * 100


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_privleak_matches_muse_code_on_fixed_scores(seed):
    """dukb's PrivLeak (member-positive AUC of Min-40% scores, :func:`privleak`) × 100 equals MUSE's code on the
    same per-token log-probabilities, ties included (texts of 5 and 10 tokens: ⌊0.4·n⌋ = 2 and 4)."""
    from dukb.neural.metrics.mia import auc, min_k_count, privleak

    rng = random.Random(seed)

    def texts(n, shift):
        # rounded log-probs, so that some texts tie
        return [[round(rng.uniform(-4, 0) + shift, 1) for _ in range(rng.choice((5, 10)))] for _ in range(n)]

    forget_u, holdout_u = texts(12, 0.3), texts(12, 0.0)  # the unlearned model still favours the forget texts
    forget_r, holdout_r = texts(12, 0.0), texts(12, 0.0)  # f_retrain: no separation on average

    def dukb_score(lp):  # dukb's Min-K% score: mean of the ⌊k·n⌋ lowest token log-probs (higher = member-like)
        c = min_k_count(0.4, len(lp))
        return sum(sorted(lp)[:c]) / c

    def dukb_auc(f, h):
        return auc([dukb_score(x) for x in f], [dukb_score(x) for x in h])

    got = 100 * privleak(dukb_auc(forget_u, holdout_u), dukb_auc(forget_r, holdout_r))
    assert got == pytest.approx(_muse_privleak(forget_u, holdout_u, forget_r, holdout_r), abs=1e-9)
    # f_retrain against itself: 0
    assert privleak(dukb_auc(forget_r, holdout_r), dukb_auc(forget_r, holdout_r)) == 0.0


# -- Acc@Superficial ---------------------------------------------------------------------------------------------
def test_acc_at_superficial_is_the_notebooks_rule():
    """Cell 19 of the Eval-DU figure notebook: per target, max accuracy over the settings where the target itself is
    unlearned, with an appended (accuracy 0, unlearned) point, so a target never unlearned scores 0; mean and
    population std over targets. dukb's earlier reading (weakest forgetting setting, over forgotten targets only)
    stays as acc_at_superficial_weakest."""
    import numpy as np
    import pandas as pd

    from dukb.neural.metrics.run_summary import superficial_metric

    curves = {  # target -> [(steps, accuracy, target forgotten)]
        1: [(1, 0.99, False), (2, 0.90, True), (4, 0.93, True), (8, 0.50, True)],
        2: [(1, 1.00, False), (2, 0.97, False), (4, 0.80, False), (8, 0.70, False)],
        3: [(1, 0.95, True), (2, 0.96, True), (4, 0.60, True), (8, 0.40, True)],
    }
    rows = [
        {
            "method": "ga",
            "target": t,
            "param": "steps",
            "setting": {"steps": s},
            "recall": 0.5,
            "accuracy_all": a,
            "target_forgotten": f,
        }
        for t, pts in curves.items()
        for s, a, f in pts
    ]
    per = []
    for pts in curves.values():  # the notebook, written out with numpy
        y = np.concatenate([np.asarray([a for _, a, _ in pts]), np.zeros(1)])
        unl = np.concatenate([np.asarray([float(f) for _, _, f in pts]), np.ones(1)])
        per.append(y[unl == 1].max())
    got = superficial_metric(pd.DataFrame(rows))["ga"]
    assert got["acc_at_superficial"] == pytest.approx(np.mean(per)) == pytest.approx((0.93 + 0 + 0.96) / 3)
    assert got["acc_at_superficial_std"] == pytest.approx(np.std(per))
    assert got["acc_at_superficial_weakest"] == pytest.approx((0.90 + 0.95) / 2)
    assert got["share_superficial"] == pytest.approx(2 / 3)
