"""Probe roles: recall on held-out forms (the forms a method never trained on or queried), checked against an
independent plain-Python computation of Eq. 1-2 on hand-made probe tables."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import patch_everywhere
from dukb import InputError
from dukb.kb.generate import generate
from dukb.neural.metrics import DEFAULT_METRICS, RowContext, get_metric
from dukb.neural.metrics.attack import ATTACK_KINDS
from dukb.neural.metrics.heldout import (
    check_heldout,
    default_heldout_forms,
    elicited_by_form,
    heldout_known,
    recall_heldout,
)
from dukb.neural.metrics.run_summary import heldout_tradeoff
from dukb.neural.metrics.summary import target_tradeoff


@pytest.fixture(scope="module")
def kb():
    return generate(12, seed=5)[0]


def _table(kb, known: dict, forms=("qa", "paraphrase", "cloze")) -> pd.DataFrame:
    """A probe table: known[(form, fact kind, fact_id)] (default False) for every fact and form."""
    rows = []
    for form in forms:
        for f in kb.relationships:
            rows.append((form, "relationship", f.fact_id, known.get((form, "relationship", f.fact_id), False)))
        for b in kb.biographies:
            rows.append((form, "biography", b.fact_id, known.get((form, "biography", b.fact_id), False)))
    return pd.DataFrame(rows, columns=["kind", "fact_kind", "fact_id", "known"])


def _plain(kb, sets, forgot_rel, forgot_bio, unscored_rel=(), unscored_bio=()):
    """Eq. 1-2 written out: recall = max_M |U ∩ M| / |M|; accuracy at each M over the facts outside M that are
    scored. Returns {best set (sorted tuple): (recall, accuracy_all)} for every M reaching the best recall."""
    out = {}
    for m in sets:
        m = set(m)
        rec = len(m & forgot_rel) / len(m)
        rel = [f.fact_id for f in kb.relationships if f.fact_id not in m and f.fact_id not in unscored_rel]
        bio = [b.fact_id for b in kb.biographies if b.fact_id not in unscored_bio]
        kept = sum(f not in forgot_rel for f in rel) + sum(b not in forgot_bio for b in bio)
        out[tuple(sorted(m))] = (rec, kept / (len(rel) + len(bio)))
    best = max(r for r, _ in out.values())
    return {k: v for k, v in out.items() if v[0] == best}


def test_defaults_are_every_asking_form_the_method_did_not_see():
    assert default_heldout_forms(["qa"]) == tuple(k for k in ATTACK_KINDS if k != "qa")
    assert "qa" not in check_heldout(None, ("qa",)) and "yes" not in check_heldout(None, ("qa",))
    assert check_heldout(["cloze", "paraphrase"], ("qa",)) == ("cloze", "paraphrase")
    assert "recall_heldout" in DEFAULT_METRICS


@pytest.mark.parametrize("forms, msg", [(["qa", "cloze"], "saw qa"), (["no_such_form"], "unknown probe kind")])
def test_heldout_forms_the_method_saw_or_unknown_are_refused(forms, msg):
    with pytest.raises(InputError, match=msg):
        check_heldout(forms, ("qa",))


def test_no_form_left_is_refused():
    with pytest.raises(InputError, match="no held-out probe form"):
        check_heldout(None, ATTACK_KINDS)


def test_recall_heldout_matches_a_plain_computation(kb):
    rel = [f.fact_id for f in kb.relationships]
    bio = [b.fact_id for b in kb.biographies]
    target = rel[0]
    sets = [[rel[0], rel[1]], [rel[0], rel[2], rel[3]]]
    # qa forgets rel0..rel3; the held-out forms still elicit rel1 (paraphrase) and bio0 (cloze) but nothing else
    # of the first half of the KB; everything in the second half is known under cloze
    known = {("paraphrase", "relationship", rel[1]): True, ("cloze", "biography", bio[0]): True}
    half = len(rel) // 2
    for f in rel[half:]:
        known[("cloze", "relationship", f)] = True
    for b in bio[1:]:
        known[("paraphrase", "biography", b)] = b % 2 == 0
    df = _table(kb, known)
    ctx = RowContext(kb, target, sets, "exact", df, [target], seen_forms=("qa",), heldout_forms=("paraphrase", "cloze"))
    got = recall_heldout(ctx)
    hit_rel = {
        f for f in rel if known.get(("paraphrase", "relationship", f)) or known.get(("cloze", "relationship", f))
    }
    hit_bio = {b for b in bio if known.get(("paraphrase", "biography", b)) or known.get(("cloze", "biography", b))}
    forgot_rel, forgot_bio = set(rel) - hit_rel, set(bio) - hit_bio
    assert got["forgotten_relationships_heldout"] == sorted(forgot_rel)
    assert got["forgotten_biographies_heldout"] == sorted(forgot_bio)
    want = _plain(kb, sets, forgot_rel, forgot_bio)
    assert tuple(sorted(got["best_set_heldout"])) in want
    rec, acc = want[tuple(sorted(got["best_set_heldout"]))]
    assert got["recall_heldout"] == pytest.approx(rec) and got["accuracy_all_heldout"] == pytest.approx(acc)
    assert got["target_forgotten_heldout"] is (target in forgot_rel)
    assert got["heldout_unscorable"] == {"relationships": 0, "biographies": 0}
    # qa rows are ignored: knowing every fact under qa changes nothing
    df2 = pd.concat([df, _table(kb, {("qa", "relationship", f): True for f in rel}, forms=("qa",))])
    assert (
        recall_heldout(RowContext(kb, target, sets, "exact", df2, [target], heldout_forms=("paraphrase", "cloze")))
        == got
    )


def test_baseline_makes_facts_never_elicited_unscorable(kb):
    """A fact the held-out forms never elicited before unlearning is never counted as forgotten and is left out of
    accuracy, like a retain-train fact."""
    rel = [f.fact_id for f in kb.relationships]
    bio = [b.fact_id for b in kb.biographies]
    sets = [[rel[0], rel[1]]]
    before_tab = _table(
        kb,
        {("cloze", "relationship", f): f != rel[1] for f in rel}
        | {("cloze", "biography", b): b != bio[0] for b in bio},
        forms=("cloze",),
    )
    before = elicited_by_form(before_tab, ("cloze",))
    assert ("cloze", "relationship", rel[1]) not in before and ("cloze", "relationship", rel[0]) in before
    after = _table(
        kb, {("cloze", "relationship", f): f not in (rel[0], rel[1], rel[2]) for f in rel}, forms=("cloze",)
    )  # rel0, rel1, rel2 and every biography are not elicited now
    ctx = RowContext(kb, rel[0], sets, "exact", after, [rel[0]], heldout_forms=("cloze",), heldout_before=before)
    got = recall_heldout(ctx)
    assert got["forgotten_relationships_heldout"] == sorted({rel[0], rel[2]})  # rel1 unscorable
    assert got["forgotten_biographies_heldout"] == sorted(set(bio) - {bio[0]})
    assert got["heldout_unscorable"] == {"relationships": 1, "biographies": 1}
    want = _plain(kb, sets, {rel[0], rel[2]}, set(bio) - {bio[0]}, {rel[1]}, {bio[0]})
    rec, acc = want[tuple(sorted(sets[0]))]
    assert got["recall_heldout"] == pytest.approx(rec) == 0.5
    assert got["accuracy_all_heldout"] == pytest.approx(acc)
    # without a baseline every fact is scored
    plain = recall_heldout(RowContext(kb, rel[0], sets, "exact", after, [rel[0]], heldout_forms=("cloze",)))
    assert plain["recall_heldout"] == 1.0 and plain["heldout_unscorable"]["relationships"] == 0
    cov = heldout_known(kb, before_tab, ("cloze",))
    assert cov["relationships"] == pytest.approx((len(rel) - 1) / len(rel))
    assert cov["all"] == pytest.approx((len(rel) + len(bio) - 2) / (len(rel) + len(bio)))
    assert cov["unelicited"] == {"relationships": [rel[1]], "biographies": [bio[0]]}


def test_a_relationship_without_a_heldout_probe_is_an_error(kb):
    rel = [f.fact_id for f in kb.relationships]
    df = _table(kb, {}, forms=("cloze",))
    df = df[df["fact_id"] != rel[3]]
    with pytest.raises(ValueError, match="relationship fact"):
        recall_heldout(RowContext(kb, rel[0], [[rel[0]]], "exact", df, [rel[0]], heldout_forms=("cloze",)))
    with pytest.raises(ValueError, match="held-out forms"):
        recall_heldout(RowContext(kb, rel[0], [[rel[0]]], "exact", df, [rel[0]]))


def test_registered_metric_needs_every_heldout_form():
    m = get_metric("recall_heldout")
    assert m.level == "row" and set(ATTACK_KINDS) <= set(m.needs.kinds) and m.needs.generate


def test_heldout_summary_uses_the_papers_rule_on_heldout_points():
    rows = []
    pts = {1: [(0.2, 0.9, 0.5, 0.95), (0.4, 0.9, 0.3, 0.85)], 2: [(0.9, 0.8, 0.85, 0.82), (1.0, 0.7, 0.9, 0.81)]}
    for steps, per_target in pts.items():
        for t, (r, a, rh, ah) in enumerate(per_target):
            rows.append(
                {
                    "method": "ga",
                    "target": t,
                    "param": "steps",
                    "setting": {"steps": steps},
                    "recall": r,
                    "accuracy_all": a,
                    "recall_heldout": rh,
                    "accuracy_all_heldout": ah,
                    "target_forgotten": True,
                    "target_forgotten_heldout": True,
                    "success_du": 1,
                    "success_du_heldout": int(rh == 0.9),
                }
            )
    got = heldout_tradeoff(pd.DataFrame(rows))["ga"]
    per = [target_tradeoff([(pts[1][t][2], pts[1][t][3]), (pts[2][t][2], pts[2][t][3])]) for t in (0, 1)]
    for key in ("acc_at_recall", "recall_at_acc", "ar_auc"):
        assert got[f"{key}_heldout"] == pytest.approx((per[0][key] + per[1][key]) / 2)
    # the mean held-out point of steps 2 is (0.875, 0.815): in the region
    assert got["region_setting_heldout"] == "steps=2"  # a label, never JSON
    # Success-DU at the best setting (per target the largest held-out recall with accuracy >= 0.8: steps 2 for both)
    assert got["success_du_heldout"] == pytest.approx(0.5) and got["success_du_heldout_setting"] == "steps=2 ×2"


def test_pairs_and_any_rules_differ_only_on_forms_that_did_not_elicit_before(kb):
    """A fact elicited before only by cloze and now only by paraphrase: forgotten under "pairs" (the form that knew it
    no longer does), known under "any" (some held-out form elicits it now). The "pairs" rule needs only the baseline
    pairs' rows; a missing one is an error."""
    rel = [f.fact_id for f in kb.relationships]
    forms = ("paraphrase", "cloze")
    before_tab = _table(kb, {("cloze", "relationship", f): True for f in rel}, forms=forms)
    before = elicited_by_form(before_tab, forms)
    now = {("cloze", "relationship", f): True for f in rel[1:]} | {("paraphrase", "relationship", rel[0]): True}
    after = _table(kb, now, forms=forms)
    sets = [[rel[0]]]

    def run(rule, table=after):
        return recall_heldout(
            RowContext(
                kb,
                rel[0],
                sets,
                "exact",
                table,
                [rel[0]],
                heldout_forms=forms,
                heldout_before=before,
                heldout_rule=rule,
            )
        )

    assert run("pairs")["forgotten_relationships_heldout"] == [rel[0]] and run("pairs")["recall_heldout"] == 1.0
    assert run("any")["forgotten_relationships_heldout"] == [] and run("any")["recall_heldout"] == 0.0
    only_pairs = after[(after["kind"] == "cloze") & (after["fact_kind"] == "relationship")]
    assert run("pairs", only_pairs) == run("pairs")
    with pytest.raises(ValueError, match="lacks the held-out probe"):
        run("pairs", only_pairs[only_pairs["fact_id"] != rel[2]])
    with pytest.raises(ValueError, match="unknown held-out rule"):
        run("all")


def test_scorable_recall_by_hand():
    from dukb.neural.metrics.heldout import scorable_recall

    sets = [[1, 2, 3, 4], [1, 5]]
    # 4 unscorable: the first set is judged on {1, 2, 3}; 5 unscorable: the second on {1}
    assert scorable_recall(sets, {1, 2}, {4, 5}) == 1.0
    assert scorable_recall(sets, {2, 3}, {4, 5}) == pytest.approx(2 / 3)
    assert scorable_recall(sets, {2, 3}, set()) == pytest.approx(0.5)
    assert scorable_recall([[7]], {7}, {7}) is None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_probing_until_elicited_gives_the_rows_of_probing_every_pair(kb, data, monkeypatch):
    """The pairs rule's shortcut (dukb.neural.unlearn.probe_until_elicited: a fact's baseline pairs are asked form
    by form until one elicits it) gives recall_heldout's fields of probing every pair, on random baselines and
    random answers after unlearning; it asks each fact's pairs in order and stops at its first eliciting one."""
    import dukb.neural.probe as probe_mod
    from dukb.neural.data import kb_qa
    from dukb.neural.unlearn import probe_until_elicited

    forms = ("paraphrase", "cloze", "reverse")
    facts = [("relationship", f.fact_id) for f in kb.relationships] + [("biography", b.fact_id) for b in kb.biographies]
    flags = st.lists(st.booleans(), min_size=len(facts) * len(forms), max_size=len(facts) * len(forms))
    keys = [(k, fk, f) for k in forms for fk, f in facts]
    items = kb_qa(kb, forms)
    exists = {(it.kind, it.fact_kind, it.fact_id) for it in items}  # (reverse asks no biography)
    before = elicited_by_form(_table(kb, dict(zip(keys, data.draw(flags))), forms=forms), forms) & exists
    now = dict(zip(keys, data.draw(flags)))
    asked = []

    def fake_probe(pred, items, **kw):
        asked.extend((it.kind, it.fact_kind, it.fact_id) for it in items)
        return pd.DataFrame(
            [(it.kind, it.fact_kind, it.fact_id, now.get((it.kind, it.fact_kind, it.fact_id), False)) for it in items],
            columns=["kind", "fact_kind", "fact_id", "known"],
        )

    patch_everywhere(monkeypatch, probe_mod, "probe", fake_probe)
    pair_items = [it for it in items if (it.kind, it.fact_kind, it.fact_id) in before]
    short = probe_until_elicited(None, pair_items)
    full = fake_probe(None, pair_items)
    rel = [f.fact_id for f in kb.relationships]
    sets = [rel[:2], rel[2:3]]

    def run(table):
        return recall_heldout(
            RowContext(
                kb,
                rel[0],
                sets,
                "exact",
                table,
                [rel[0]],
                heldout_forms=forms,
                heldout_before=before,
                heldout_rule="pairs",
            )
        )

    assert run(short) == run(full)
    by_fact = {}
    for k, fk, f in asked[: len(short)]:  # the rounds' asks (the full table's come after)
        by_fact.setdefault((fk, f), []).append(k)
    for (fk, f), ks in by_fact.items():  # asked in form order, up to and including the first eliciting pair
        order = [it.kind for it in pair_items if (it.fact_kind, it.fact_id) == (fk, f)]
        assert ks == order[: len(ks)]
        assert all(not now.get((k, fk, f), False) for k in ks[:-1])
        assert now.get((ks[-1], fk, f), False) or len(ks) == len(order)
