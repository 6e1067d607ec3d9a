"""Run directories know their identity (issue: integrity): identity comparison and merging, refusal of a resume
with other settings, fingerprints and results files. The end-to-end refusals of `dukb evaluate --resume` are in
tests/neural/test_neural_e2e.py."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dukb import InputError
from dukb.kb import load_kb
from dukb.neural.protocols.evaluate.rows import EVALUATE_ROWS
from dukb.neural.run.identity import (
    IDENTITY_VERSION,
    Difference,
    RunIdentityError,
    identity_differences,
    merge_identity,
    open_run,
)
from dukb.neural.run.journal import ResultsFile, read_results
from dukb.solver.rules import load_rules

BASE = {
    "identity_version": IDENTITY_VERSION,
    "kb": "abc",
    "seed": 0,
    "lr": None,
    "model": {"base": {"tiny": {"n_layer": 2}}, "finetune": {"lr": 0.003, "epochs": 400}},
    "targets": [1, 2],
    "methods": {"ga": {"grid": [1, 2], "scope": "target"}},
}


def _with(**kw):
    return json.loads(json.dumps(BASE)) | kw


def test_equal_identities_have_no_difference():
    assert identity_differences(BASE, _with()) == []


def test_each_differing_key_is_named_with_both_values():
    new = _with(seed=1, lr=0.01)
    new["model"] = {"base": {"tiny": {"n_layer": 2}}, "finetune": {"lr": 0.001, "epochs": 400}}
    diffs = identity_differences(BASE, new, ("targets", "methods"))
    assert diffs == [
        Difference("lr", None, 0.01),
        Difference("model.finetune.lr", 0.003, 0.001),
        Difference("seed", 0, 1),
    ]
    assert str(diffs[0]) == "lr: null in the run, 0.01 now"


def test_extendable_keys_may_gain_entries_but_shared_entries_must_agree():
    new = _with(targets=[2, 3], methods={"ga": {"grid": [1, 2], "scope": "target"}, "npo": {"grid": [1]}})
    assert identity_differences(BASE, new, ("targets", "methods")) == []
    merged, added = merge_identity(BASE, new, ("targets", "methods"))
    assert merged["targets"] == [1, 2, 3] and list(merged["methods"]) == ["ga", "npo"]
    assert added == {"targets": [3], "methods": ["npo"]}
    changed = _with(methods={"ga": {"grid": [1, 4], "scope": "target"}})
    assert [d.key for d in identity_differences(BASE, changed, ("targets", "methods"))] == ["methods.ga.grid"]
    # without extension (a fresh run into an existing directory) a new target is a difference
    assert [d.key for d in identity_differences(BASE, new, ())] == ["methods.npo", "targets"]


def test_a_nested_list_named_key_star_sub_may_gain_entries():
    ext = ("targets", "methods", "methods.*.grid")
    new = _with(methods={"ga": {"grid": [4, 2], "scope": "target"}, "npo": {"grid": [3]}})
    assert identity_differences(BASE, new, ext) == []
    merged, added = merge_identity(BASE, new, ext)
    assert merged["methods"] == {"ga": {"grid": [1, 2, 4], "scope": "target"}, "npo": {"grid": [3]}}
    assert added == {"methods.ga.grid": [4], "methods": ["npo"]}
    assert BASE["methods"]["ga"]["grid"] == [1, 2]  # the recorded identity is not changed in place
    # the entry's other keys must still agree, and only lists are extendable
    other = _with(methods={"ga": {"grid": [1, 2], "scope": "minimum"}})
    assert [d.key for d in identity_differences(BASE, other, ext)] == ["methods.ga.scope"]
    scalar = _with(methods={"ga": {"grid": 7, "scope": "target"}})
    assert [d.key for d in identity_differences(BASE, scalar, ext)] == ["methods.ga.grid"]
    with pytest.raises(ValueError):
        identity_differences(BASE, new, ("methods.grid",))


def test_a_key_present_on_one_side_only_is_a_difference():
    new = {k: v for k, v in BASE.items() if k != "lr"} | {"dtype": "float32"}
    assert {d.key for d in identity_differences(BASE, new)} == {"dtype", "lr"}


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.text(max_size=3),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=2), c, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    a=st.dictionaries(st.sampled_from("abcde"), _json, max_size=5),
    b=st.dictionaries(st.sampled_from("abcde"), _json, max_size=5),
)
def test_differences_are_empty_exactly_for_equal_identities(a, b):
    """Against the plain definition: without extendable keys, no difference iff the canonical JSON is equal."""
    same = json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert (identity_differences(a, b) == []) == same
    assert (identity_differences(b, a) == []) == same


def test_open_run_refuses_other_settings_and_records_nothing(tmp_path):
    assert open_run(tmp_path, "evaluate", BASE) == (BASE, {}, {})
    (tmp_path / "config.json").write_text(json.dumps({"protocol": "evaluate", "identity": BASE}))
    merged, added, old = open_run(tmp_path, "evaluate", _with(targets=[1, 2, 5]), extendable=("targets",))
    assert merged["targets"] == [1, 2, 5] and added == {"targets": [5]} and old["identity"] == BASE
    before = (tmp_path / "config.json").read_text()
    with pytest.raises(RunIdentityError) as e:
        open_run(tmp_path, "evaluate", _with(seed=1, lr=0.5), extendable=("targets",))
    msg = str(e.value)
    assert "\n" not in msg and "seed: 0 in the run, 1 now" in msg and "lr: null in the run, 0.5 now" in msg
    assert str(tmp_path / "config.json") in msg and [d.key for d in e.value.differences] == ["lr", "seed"]
    assert (tmp_path / "config.json").read_text() == before
    with pytest.raises(RunIdentityError, match="dukb evaluate"):
        open_run(tmp_path, "restor", BASE)


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        "[1, 2]",
        json.dumps({"protocol": "evaluate", "seed": 0}),
        json.dumps({"identity": {"identity_version": 0}}),
    ],
)
def test_open_run_refuses_unreadable_or_old_configs(tmp_path, content):
    (tmp_path / "config.json").write_text(content)
    with pytest.raises(RunIdentityError):
        open_run(tmp_path, "evaluate", BASE)


def test_results_file_cuts_a_torn_line_and_keys_rows(tmp_path):
    p = tmp_path / "results.jsonl"
    row = {"target": 3, "method": "ga", "param": "steps", "setting": {"steps": 2}}
    p.write_text(json.dumps(row) + "\n" + '{"target": 4, "meth')
    f = ResultsFile(p, EVALUATE_ROWS.key, check=EVALUATE_ROWS.check())
    assert f.rows == [row] and (3, "ga", 2.0) in f.done
    assert p.read_text() == json.dumps(row) + "\n"
    f.append(row | {"target": 5})
    assert [r["target"] for r in read_results(p)] == [3, 5]
    g = ResultsFile(p, lambda r: r["target"])
    assert g.done == {3, 5}


def test_kb_fingerprint_covers_genders_and_facts(kb_builder):
    a = kb_builder({"A": "male", "B": "female"}, [("A", "wife", "B")])
    b = kb_builder({"A": "male", "B": "female"}, [("B", "husband", "A")])
    c = kb_builder({"A": "male", "B": "female", "C": "male"}, [("A", "wife", "B")])
    assert len({a.fingerprint(), b.fingerprint(), c.fingerprint()}) == 3
    assert a.fingerprint() == kb_builder({"A": "male", "B": "female"}, [("A", "wife", "B")]).fingerprint()
    assert load_kb("demo").fingerprint() == load_kb("demo").fingerprint()


def test_rules_fingerprint_ignores_comments_but_not_rules(tmp_path):
    fam = load_rules("family")
    text = fam.path.read_text(encoding="utf-8")
    commented = tmp_path / "commented.lp"
    commented.write_text("% a comment\n" + text, encoding="utf-8")
    assert load_rules(str(commented)).fingerprint == fam.fingerprint
    assert load_rules("family_paper_compat").fingerprint != fam.fingerprint


def test_finetune_cache_key_covers_everything_the_model_depends_on():
    """The finetuned model in RUN_DIR/finetuned is reused only under an equal key: base model and finetuning
    config, KB fingerprint, LoRA, dtype and prompt each change it (a run killed before config.json was written
    cannot reuse a model made for another KB); the run's other settings (lr, grids, targets) do not."""
    from dukb.neural.protocols.evaluate.identity import finetune_cache_key

    ident = {
        "model": {"base": "tiny", "finetune": {"lr": 0.003}},
        "kb": "kb-a",
        "lora": None,
        "dtype": "float32",
        "prompt": {"question_start": "Question: "},
        "seed": 0,
        "lr": None,
        "targets": [1],
        "methods": {},
    }
    key = finetune_cache_key(ident)
    for k, v in (
        ("model", {"base": "tiny", "finetune": {"lr": 0.001}}),
        ("kb", "kb-b"),
        ("lora", {"r": 8}),
        ("dtype", "bfloat16"),
        ("prompt", {"question_start": "Q: "}),
    ):
        assert finetune_cache_key({**ident, k: v}) != key, k
    for k, v in (("lr", 0.5), ("targets", [1, 2]), ("methods", {"ga": {}})):
        assert finetune_cache_key({**ident, k: v}) == key, k


def test_planned_units_and_the_unfinished_ones(tmp_path):
    """record_units merges every worker's units into RUN_DIR/.dukb/units/planned.json (in order, once each);
    unfinished_units names those whose claim is missing or not done; a run without a plan gives None."""
    import json

    from dukb.neural.run.units import UnitClaims, record_units, unfinished_note, unfinished_units

    run = tmp_path / "run"
    assert unfinished_units(run) is None and unfinished_note(run, "(ratio, method)") == ""
    record_units(run, [("1%", ""), ("1%", "ga")])
    record_units(run, [("1%", "ga"), ("1%", "npo")])  # a second worker's invocation adds a method
    assert json.loads((run / ".dukb" / "units" / "planned.json").read_text()) == [
        ["1%", ""],
        ["1%", "ga"],
        ["1%", "npo"],
    ]
    claims = UnitClaims(run, "w1")
    try:
        assert claims.claim(("1%", ""))
        claims.done(("1%", ""))
        assert claims.claim(("1%", "ga"))  # claimed, not finished
    finally:
        claims.close()
    assert unfinished_units(run) == [("1%", "ga"), ("1%", "npo")]
    note = unfinished_note(run, "(ratio, method)")
    assert "2 (ratio, method) work unit(s) are not finished: (1%, ga), (1%, npo)" in note
    (run / ".dukb" / "units" / "planned.json").write_text('{"not": "a list"}')
    with pytest.raises(InputError, match="not a list of work units"):
        unfinished_units(run)


def test_a_complete_unit_whose_worker_died_before_done_is_marked_done(tmp_path):
    """A worker killed after a unit's last row but before its claim said done: the next worker finds nothing
    pending, marks the claim done and runs nothing, so `dukb report` does not name the unit."""
    from dukb.neural.run.units import UnitClaims, claimed_units, record_units, unfinished_units

    run = tmp_path / "run"
    record_units(run, [("t", "ga"), ("t", "npo")])
    dead = UnitClaims(run, "dead")
    assert dead.claim(("t", "ga"))  # claimed; its rows were written; no done
    dead.close()
    results = ResultsFile(tmp_path / "r.jsonl", EVALUATE_ROWS.key, check=EVALUATE_ROWS.check())
    live = UnitClaims(run, "live")
    finished = {("t", "ga")}  # its rows are on disk
    got = []
    try:
        for unit, todo in claimed_units(
            live, results, [("t", "ga"), ("t", "npo")], lambda u: [] if u in finished else [1]
        ):
            got.append((unit, todo))
            finished.add(unit)
    finally:
        live.close()
    assert got == [(("t", "npo"), [1])] and unfinished_units(run) == []


def test_a_claim_keeps_when_it_was_claimed_once_done(tmp_path):
    """A claim records when its worker claimed the unit (``claimed``, epoch seconds) and keeps it when the unit is
    marked done, while ``since`` moves to the last write: the time a unit was taken survives its finish."""
    import time

    from dukb.neural.run.units import UnitClaims

    claims = UnitClaims(tmp_path, "w1")
    try:
        t0 = time.time()
        assert claims.claim(("1", "ga"))
        first = claims.state(("1", "ga"))
        assert t0 - 0.01 <= first["claimed"] <= time.time() + 0.01 and first["done"] is False
        time.sleep(1.1)
        claims.done(("1", "ga"))
        after = claims.state(("1", "ga"))
        assert after["done"] is True and after["claimed"] == first["claimed"] and after["since"] != first["since"]
    finally:
        claims.close()


def test_the_probe_cache_key_covers_items_judge_settings_and_code(tmp_path, monkeypatch):
    """probe_cache_key changes with any item field (the judge's match rule included), the settings, the weights and
    dukb's own source; the cache round-trips under its key, refuses another, and is not written past its size
    bound."""
    import dataclasses

    import pandas as pd

    from dukb.kb.generate import generate
    from dukb.kb.probes import make_probes
    from dukb.neural.run import probecache

    kb, _ = generate(8, seed=1)
    items = make_probes(kb, ("qa", "yes"))[:6]
    k0 = probecache.probe_cache_key({"w": 1}, items, {"batch_size": 8})
    assert k0 == probecache.probe_cache_key({"w": 1}, list(items), {"batch_size": 8})
    other = [dataclasses.replace(items[0], match="exact")] + items[1:]
    keys = {
        probecache.probe_cache_key({"w": 1}, other, {"batch_size": 8}),
        probecache.probe_cache_key({"w": 1}, items[::-1], {"batch_size": 8}),
        probecache.probe_cache_key({"w": 2}, items, {"batch_size": 8}),
        probecache.probe_cache_key({"w": 1}, items, {"batch_size": 16}),
    }
    monkeypatch.setattr(probecache, "source_fingerprint", lambda: "edited")
    keys.add(probecache.probe_cache_key({"w": 1}, items, {"batch_size": 8}))
    assert len(keys) == 5 and k0 not in keys
    table = pd.DataFrame(
        {
            "kind": [it.kind for it in items],
            "fact_kind": [it.fact_kind for it in items],
            "fact_id": [it.fact_id for it in items],
            "known": [i % 2 == 0 for i in range(6)],
        }
    )
    path = tmp_path / probecache.PROBE_CACHE_NAME
    assert probecache.write_probe_cache(path, k0, table)
    back = probecache.read_probe_cache(path, k0)
    assert back.to_dict("list") == table.to_dict("list")
    said = []
    assert probecache.read_probe_cache(path, "other", log=said.append) is None and "other weights" in said[0]
    monkeypatch.setattr(probecache, "PROBE_CACHE_BYTES", 100)
    assert not probecache.write_probe_cache(tmp_path / "big.json", k0, table) and not (tmp_path / "big.json").exists()
