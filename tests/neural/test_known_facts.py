"""`dukb evaluate --no-finetune`'s scoring rule on hand-made probe tables: facts the model did not know before
unlearning are unscorable (never forgotten, out of recall's and accuracy's denominators), the known part of the KB
and its targets (a derivation from other known facts), the report line, and the option's config checks. Fast: no
model is loaded."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from dukb import InputError
from dukb.kb import load_kb
from dukb.neural.declare import apply_compat
from dukb.neural.known import (
    Known,
    check_known_targets,
    known_from_probe,
    known_line,
    known_of_record,
    known_part,
    rederivable,
    require_candidates,
)
from dukb.neural.metrics import RowContext
from dukb.neural.metrics.recall import recall_metric, scorable_sets
from dukb.neural.plan import choose_targets
from dukb.neural.protocols.evaluate import config as cfgmod
from dukb.neural.protocols.evaluate.config import EvaluateConfig
from dukb.neural.protocols.evaluate.identity import component_identity
from dukb.solver.closure import compute_closure
from dukb.solver.mdus import is_deep_unlearning_set, minimal_sets


@pytest.fixture(scope="module")
def kb():
    return load_kb("demo")


def _table(kb, known_rel, known_bio=None) -> pd.DataFrame:
    """A qa probe table: the relationships of ``known_rel`` and the biographies of ``known_bio`` (default all)
    known, the others not."""
    rows = [("qa", "relationship", f.fact_id, f.fact_id in known_rel) for f in kb.relationships]
    rows += [("qa", "biography", b.fact_id, known_bio is None or b.fact_id in known_bio) for b in kb.biographies]
    return pd.DataFrame(rows, columns=["kind", "fact_kind", "fact_id", "known"])


def _plain(kb, sets, known_rel, known_bio, after_rel, after_bio):
    """Eq. 1-2 over the known facts only, written out: U = known before and not after; recall = max over M of
    |U ∩ M| / |M| (M ⊆ known); accuracy over the known facts outside the best M. Returns (recall, accuracy_all)
    of the best set (ties broken by the higher accuracy)."""
    forgot_rel = known_rel - after_rel
    forgot_bio = known_bio - after_bio
    best = None
    for m in sets:
        m = set(m)
        assert m <= known_rel
        rec = len(m & forgot_rel) / len(m)
        rel = [f for f in known_rel if f not in m]
        kept = sum(f not in forgot_rel for f in rel) + sum(b not in forgot_bio for b in known_bio)
        n = len(rel) + len(known_bio)
        acc = kept / n if n else float("nan")
        if best is None or (rec, acc) > best:
            best = (rec, acc)
    return best


def test_known_facts_come_from_the_qa_probe(kb):
    rel = {f.fact_id for f in kb.relationships[::2]}
    bio = {b.fact_id for b in kb.biographies[:3]}
    known = known_from_probe(kb, _table(kb, rel, bio))
    assert known.relationships == rel and known.biographies == bio
    assert known.n_relationships == len(kb.relationships) and known.n_biographies == len(kb.biographies)
    assert known.unknown_relationships == {f.fact_id for f in kb.relationships} - rel
    rec = known.record()
    assert rec["relationships"] == len(rel) and rec["share_relationships"] == len(rel) / len(kb.relationships)
    assert known_of_record(rec) == known and known_of_record(None) is None and known_of_record({"x": 1}) is None
    with pytest.raises(ValueError, match="lacks the qa row"):
        known_from_probe(kb, _table(kb, rel).iloc[1:])


def test_the_report_line_states_how_much_the_model_knew(kb):
    known = Known(frozenset({1, 2, 3}), frozenset(), frozenset({4}), frozenset())
    assert known_line(known).startswith(
        "the model knew 3 of 4 relationship facts (75.0%) before unlearning; unknown facts are unscorable"
    )


def _known_setup(kb, drop):
    """The model knew every fact but ``drop``: its known part, that part's closure, and a target with a set
    larger than itself."""
    rel = {f.fact_id for f in kb.relationships} - set(drop)
    known = known_from_probe(kb, _table(kb, rel))
    part = known_part(kb, known)
    closure = compute_closure(part)
    cands = rederivable(closure, sorted(known.relationships))
    return known, part, closure, cands


def test_targets_are_known_and_derivable_from_other_known_facts(kb):
    full = compute_closure(kb)
    derivable_full = rederivable(full, [f.fact_id for f in kb.relationships])
    drop = derivable_full[:1] + [f.fact_id for f in kb.relationships[5:8]]
    known, part, closure, cands = _known_setup(kb, drop)
    assert [f.fact_id for f in part.relationships] == sorted(
        known.relationships, key=[f.fact_id for f in kb.relationships].index
    )  # ids kept
    assert cands and set(cands) <= known.relationships
    for t in cands:  # derivable from other known facts: {t} alone is not a deep unlearning set of the known part
        assert not is_deep_unlearning_set(closure, [closure.atom_of_fact(t)], [t])
    for t in set(known.relationships) - set(cands):
        assert is_deep_unlearning_set(closure, [closure.atom_of_fact(t)], [t])
    # a target that needs an unknown fact for its derivation is not a candidate on the known part
    lost = [t for t in derivable_full if t in known.relationships and t not in cands]
    assert set(cands) < set(derivable_full) or not lost
    drawn = choose_targets(kb, len(cands), 0, among=cands)
    assert sorted(drawn) == sorted(cands)
    with pytest.raises(InputError, match="between 1 and"):
        choose_targets(kb, len(cands) + 1, 0, among=cands)
    # the default draw is unchanged by the new argument
    assert choose_targets(kb, 5, 3) == choose_targets(kb, 5, 3, among=None)
    with pytest.raises(InputError, match="did not know"):
        check_known_targets([drop[0]], known, cands)
    not_derivable = sorted(set(known.relationships) - set(cands))
    if not_derivable:
        with pytest.raises(InputError, match="no derivation"):
            check_known_targets([not_derivable[0]], known, cands)
    check_known_targets(cands[:2], known, cands)


def test_no_derivable_known_fact_is_refused_with_the_chat_hint(kb):
    """A model that knew facts but none derivable from other known facts has no target: one line saying how much it
    knew, with the --prompt chat hint unless the probe already used the chat template."""
    lone = kb.relationships[0].fact_id  # the one fact the model knew: nothing else to derive it from
    known, _, _, cands = _known_setup(kb, [f.fact_id for f in kb.relationships if f.fact_id != lone])
    assert known.relationships == {lone} and cands == []
    n = len(kb.relationships)
    with pytest.raises(
        InputError, match=rf"knew 1 of {n} .*no target to unlearn deeply \(an instruct .*--prompt chat\)$"
    ):
        require_candidates(known, cands, chat=False)
    with pytest.raises(InputError, match=r"no target to unlearn deeply$"):
        require_candidates(known, cands, chat=True)
    require_candidates(known, [lone], chat=False)  # a candidate: nothing to refuse


def test_unknown_facts_are_unscorable_in_recall_and_accuracy(kb):
    drop = [f.fact_id for f in kb.relationships[-4:]]
    known, part, closure, cands = _known_setup(kb, drop)
    t = cands[0]
    sets = [list(s) for s in minimal_sets(closure, [closure.atom_of_fact(t)], "exact").sets]
    known_bio = {b.fact_id for b in kb.biographies}
    # after unlearning: the target and one more known fact forgotten, and the unknown facts still not known
    other = next(f for f in sorted(known.relationships) if f not in {x for s in sets for x in s})
    after_rel = set(known.relationships) - {t, other}
    after_bio = known_bio - {kb.biographies[0].fact_id}
    df = _table(kb, after_rel, after_bio)
    ctx = RowContext(kb, t, sets, "exact", df, [t], known_before=known.pairs())
    row = recall_metric(ctx)
    # never known: never forgotten
    assert set(row["forgotten_relationships"]) == {t, other}
    assert not set(row["forgotten_relationships"]) & set(drop)
    assert row["unscorable"] == {"relationships": len(drop), "biographies": 0}
    rec, acc = _plain(kb, sets, set(known.relationships), known_bio, after_rel, after_bio)
    assert row["recall"] == pytest.approx(rec)
    assert row["accuracy_all"] == pytest.approx(acc)
    # the denominators leave the unknown facts out: n_scored counts known facts only
    assert row["n_scored"] == len(known.relationships) - len(row["best_set"]) + len(known_bio)
    # the same table scored as today (every fact scored): unknown facts count as forgotten, accuracy is lower
    plain = recall_metric(RowContext(kb, t, sets, "exact", df, [t]))
    assert set(plain["forgotten_relationships"]) == {t, other} | set(drop) and "unscorable" not in plain
    assert plain["accuracy_all"] < row["accuracy_all"]


def test_unknown_facts_need_not_be_probed_after_unlearning(kb):
    """Under --no-finetune the run does not probe an unknown fact after unlearning: the row is the same as when the
    table holds it; a known fact missing from the table is still an error."""
    drop = [f.fact_id for f in kb.relationships[-4:]]
    known, part, closure, cands = _known_setup(kb, drop)
    t = cands[0]
    sets = [list(s) for s in minimal_sets(closure, [closure.atom_of_fact(t)], "exact").sets]
    known_bio = {b.fact_id for b in kb.biographies}
    full = _table(kb, set(known.relationships) - {t}, known_bio)
    probed = full[~((full["fact_kind"] == "relationship") & full["fact_id"].isin(drop))]
    assert len(probed) == len(full) - len(drop)
    rows = [
        recall_metric(RowContext(kb, t, sets, "exact", df, [t], known_before=known.pairs())) for df in (full, probed)
    ]
    assert rows[0] == rows[1] and rows[0]["forgotten_relationships"] == [t]
    lacking = full[~((full["fact_kind"] == "relationship") & (full["fact_id"] == t))]
    with pytest.raises(ValueError, match=f"relationship fact {t}"):
        recall_metric(RowContext(kb, t, sets, "exact", lacking, [t], known_before=known.pairs()))


def test_a_metric_with_nothing_to_score_is_null_with_its_count(kb):
    """The model knew only the target's set: no fact outside it is scorable, so accuracy is null with n_scored 0,
    never 1.0."""
    full = compute_closure(kb)
    t = rederivable(full, [f.fact_id for f in kb.relationships])[0]
    sets = [list(s) for s in minimal_sets(full, [full.atom_of_fact(t)], "exact").sets]
    m = sets[0]
    known = known_from_probe(kb, _table(kb, set(m), set()))
    df = _table(kb, set(), set())  # everything forgotten
    row = recall_metric(RowContext(kb, t, [m], "exact", df, [t], known_before=known.pairs()))
    assert row["recall"] == 1.0 and row["n_scored"] == 0
    assert row["accuracy_all"] is None or math.isnan(row["accuracy_all"])
    assert row["unscorable"] == {"relationships": len(kb.relationships) - len(m), "biographies": len(kb.biographies)}


def test_scorable_sets_drop_unscorable_facts():
    assert scorable_sets([[1, 2], [3], [2, 1, 4]], {3, 4}) == [[1, 2]]
    assert scorable_sets([[3]], {3}) == []


@pytest.mark.parametrize(
    "extra, msg",
    [
        ({"model": "tiny"}, "--model tiny"),
        ({"finetuned": "x"}, "--finetuned"),
        ({"finetune_forms": ["qa", "cloze"]}, "--finetune-forms"),
        ({"sets": "paper"}, "--sets paper"),
        ({"attacks": ["quant8"]}, "--attacks"),
    ],
)
def test_no_finetune_refuses_what_finetunes_or_scores_unknown_facts(extra, msg, monkeypatch):
    monkeypatch.setattr(cfgmod, "check_model_prompt", lambda *a, **k: None)
    cfg = cfgmod.EvaluateConfig(**{"model": "some/folder", "no_finetune": True, **extra})
    apply_compat(cfg, cfg.COMPAT)  # as check() does first (check() also looks the model up: not here)
    with pytest.raises(
        InputError, match="--no-finetune evaluates --model as it is: not with " + msg.replace("-", r"\-")
    ):
        cfg.resolve()


def test_no_finetune_enters_the_identity_only_when_set():
    assert "no_finetune" not in component_identity(EvaluateConfig())
    assert component_identity(EvaluateConfig(no_finetune=True))["no_finetune"] is True
