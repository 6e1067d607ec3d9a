"""The attacks (relearn, quant16/8/4, incontext, logitlens) on a KB with its own schema (issue 43, item 6), the small
geography KB of tests/small_geo_kb.py: the in-context attack writes each premise with its relation's ``fact``
template (Wu et al. 2025, Definition 1: a rule instance's premises), a KB whose relation lacks one is refused in one
line before anything is unlearned, and every attack runs end to end with the tiny model, after unlearning and on a
checkpoint (`dukb attack`)."""

from __future__ import annotations

import copy
import json

import pytest
import schema_logic as sl
from small_geo_kb import write_small_geo_kb

from dukb import InputError
from dukb.kb import load_kb
from dukb.neural.attacks import AttackContext, parse_attacks
from dukb.neural.attacks.base import check_attacks_on_model
from dukb.neural.attacks.incontext import premise_prompts
from dukb.neural.data import kb_qa
from dukb.solver.closure import compute_closure

ALL = "relearn:steps=4,quant16,quant8,quant4,incontext,logitlens"
#: Paris is a city in France: derivable from "The capital of France is Paris." (fact 0) by the capital rule.
TARGET = 3


@pytest.fixture(scope="module")
def geo(tmp_path_factory):
    return write_small_geo_kb(tmp_path_factory.mktemp("geo") / "kb")


def test_incontext_premises_are_the_relations_fact_templates(geo):
    kb = load_kb(geo)
    closure = compute_closure(kb, geo / "rules.lp")
    ctx = AttackContext(None, kb, closure, TARGET, [[TARGET]], "exact", [TARGET], kb_qa(kb), None)
    known = {("relationship", f.fact_id): f.fact_id != TARGET for f in kb.relationships}
    prompts, skipped = premise_prompts(ctx, known, 0, "rules")
    assert skipped == 0
    assert [(fid, it.question, it.answer) for fid, it in prompts] == [
        (TARGET, "The capital of France is Paris. In which country is Paris?", "France")
    ]
    prompts, _ = premise_prompts(ctx, known, 0, "self")
    assert [it.question for _, it in prompts] == ["Paris is a city in France. In which country is Paris?"]


def test_incontext_refuses_a_relation_without_a_fact_template_before_anything_runs(tmp_path):
    kb = load_kb(sl.write_tiny_kb(tmp_path / "tiny"))  # sibling and located_in have no fact template
    with pytest.raises(
        InputError,
        match=r"schema\.yaml:\d+: relation 'sibling' has no 'fact' template \(nor has "
        r"'located_in'\): --attacks incontext writes every premise",
    ):
        check_attacks_on_model(parse_attacks("quant8,incontext"), None, kb)
    check_attacks_on_model(parse_attacks("quant8,logitlens,relearn"), None, kb)  # the others need no template


torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def model(geo, tmp_path_factory):
    from dukb.neural.pipeline import finetune_kb, load_finetuned
    from dukb.neural.spec import ModelSpec

    kb = load_kb(geo)
    out = tmp_path_factory.mktemp("ft") / "model"
    finetune_kb(kb, ModelSpec("tiny", prompt="tiny", device="cpu"), out, seed=0)
    return out, load_finetuned(out, device="cpu")


@pytest.mark.slow
def test_every_attack_after_unlearning_on_a_geography_schema(geo, model):
    from dukb.neural.probe import Predictor
    from dukb.neural.unlearn import UnitPlan, sweep_target
    from dukb.solver.mdus import minimal_sets
    from dukb.solver.metrics import recall_accuracy

    kb = load_kb(geo)
    closure = compute_closure(kb, geo / "rules.lp")
    _out, lm = model
    ref = Predictor(copy.deepcopy(lm.model), lm.tokenizer, lm.tags, device=lm.device)
    (row,) = sweep_target(
        UnitPlan(lm, kb, closure, TARGET, "ga", [16], seed=0, lr=2e-3, attacks=parse_attacks(ALL), reference=ref)
    )
    assert set(row["attacks"]) == {"relearn", "quant16", "quant8", "quant4", "incontext", "logitlens"}
    sets = minimal_sets(closure, [closure.atom_of_fact(TARGET)], "exact").sets
    for name, e in row["attacks"].items():  # each entry's recall follows from its own forgotten facts (Eq. 1)
        r = recall_accuracy(kb, sets, e["forgotten_relationships"], e["forgotten_biographies"], "exact", [TARGET])
        assert e["recall"] == pytest.approx(r.recall), name
    ic = row["attacks"]["incontext"]
    assert set(ic["facts_tried"]) <= set(row["forgotten_relationships"])
    assert row["recall_under_attack"] <= row["recall"] + 1e-12


@pytest.mark.slow
def test_attack_command_on_a_checkpoint_of_a_geography_schema(geo, model, tmp_path, capsys):
    from dukb.cli.main import main

    out, _lm = model
    res = tmp_path / "row.json"
    assert (
        main(
            [
                "attack",
                "--kb",
                str(geo),
                "--rules",
                str(geo / "rules.lp"),
                "--model",
                str(out),
                "--reference",
                str(out),
                "--target-id",
                str(TARGET),
                "--attacks",
                ALL,
                "--device",
                "cpu",
                "-o",
                str(res),
            ]
        )
        == 0
    )
    row = json.loads(res.read_text())
    assert row["target"] == TARGET and set(row["attacks"]) == {
        "relearn",
        "quant16",
        "quant8",
        "quant4",
        "incontext",
        "logitlens",
    }
    assert row["attacks"]["quant16"]["recall"] == row["recall"]
    assert "recall under attack" in capsys.readouterr().out
    tiny = sl.write_tiny_kb(tmp_path / "tiny")  # relations without a qa template: refused before the model loads
    rc = main(
        [
            "attack",
            "--kb",
            str(tiny),
            "--rules",
            str(tiny / "rules.lp"),
            "--model",
            str(out),
            "--allow-kb-mismatch",
            "--target-id",
            "0",
            "--attacks",
            "quant8",
            "--device",
            "cpu",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert rc == 2 and err.startswith("dukb: error: ") and "relation 'sibling' has no 'qa' template" in err
    assert "needs it for every relation with facts" in err
