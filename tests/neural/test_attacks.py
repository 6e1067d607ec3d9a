"""Attacks on unlearned models (dukb.neural.attacks): registry and parsing, and on the tiny model end to end:
16-bit quantization changes nothing, relearning the target brings it back, a prompt holding the fact is answered,
every entry's recall and Success-DU recompute from its forgotten facts, attack settings are part of the run
identity, and `dukb attack` runs on a saved checkpoint."""

from __future__ import annotations

import json

import pytest

from conftest import DEVICE, patch_everywhere
from dukb import InputError
from dukb.neural.attacks import ATTACKS, parse_attacks


def test_registry_and_parsing():
    assert {"relearn", "quant8", "quant4", "quant16", "incontext", "logitlens"} <= set(ATTACKS)
    (a, s), (b, t) = parse_attacks(["relearn:steps=4:mode=target", "quant4:group=16"])
    assert a.name == "relearn" and s == {"mode": "target", "facts": 8, "steps": 4, "lr": 0.0}
    assert b.name == "quant4" and t == {"group": 16}
    assert [x.name for x, _ in parse_attacks("quant8,logitlens")] == ["quant8", "logitlens"]
    for bad in (
        "nope",
        "relearn:steps=x",
        "relearn:zz=1",
        "relearn:mode=all",
        "relearn,relearn",
        "logitlens:k=0",
        "relearn:steps=1_0",
        "incontext:premises=none",
    ):
        with pytest.raises(InputError):
            parse_attacks(bad)
    for a in ATTACKS.values():  # every attack names its source
        assert a.source and a.summary


torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from dukb.kb import load_kb, save_kb
    from dukb.kb.generate import generate
    from dukb.neural.pipeline import finetune_kb, load_finetuned
    from dukb.neural.spec import ModelSpec
    from dukb.solver.closure import compute_closure

    kb, _ = generate(24, seed=3)
    kb = load_kb(save_kb(kb, tmp_path_factory.mktemp("kb") / "kb"))
    out = tmp_path_factory.mktemp("ft") / "model"
    finetune_kb(kb, ModelSpec("tiny", prompt="tiny", device=DEVICE), out, seed=0)
    closure = compute_closure(kb)
    # a target with a rule instance deriving it (so the minimal sets hold more than the target)
    target = next(f.fact_id for f in kb.relationships if len(closure.by_head[closure.atom_of_fact(f.fact_id)]) > 0)
    return kb, closure, out, load_finetuned(out, device=DEVICE), target


def _rows(setup, attacks, grid=(16,), reference=None):
    from dukb.neural.unlearn import UnitPlan, sweep_target

    kb, closure, _out, lm, target = setup
    return list(
        sweep_target(
            UnitPlan(
                lm,
                kb,
                closure,
                target,
                "ga",
                list(grid),
                seed=0,
                lr=2e-3,
                attacks=parse_attacks(attacks),
                reference=reference,
            )
        )
    )


def _check_recomputes(setup, row):
    """Every entry's recall and Success-DU follow from its own forgotten facts (Eq. 1, Definition 2)."""
    from dukb.neural.metrics.recall import success_du
    from dukb.solver.mdus import minimal_sets
    from dukb.solver.metrics import recall_accuracy

    kb, closure, _o, _lm, target = setup
    sets = minimal_sets(closure, [closure.atom_of_fact(target)], "exact").sets
    for name, e in row["attacks"].items():
        r = recall_accuracy(kb, sets, e["forgotten_relationships"], e["forgotten_biographies"], "exact", [target])
        assert e["recall"] == pytest.approx(r.recall), name
        assert e["accuracy_all"] == pytest.approx(r.accuracy_all), name
        assert e["success_du"] == success_du(closure, target, e["forgotten_relationships"]), name
        assert e["target_known"] == int(target not in e["forgotten_relationships"]), name
    # the worst case over forms and attacks is at most the row's recall and every attack's
    assert row["recall_under_attack"] <= min([row["recall"]] + [e["recall"] for e in row["attacks"].values()]) + 1e-12


def test_quant16_changes_nothing_and_quantization_names_its_scheme(setup):
    row = _rows(setup, "quant16,quant8,quant4")[0]
    q16 = row["attacks"]["quant16"]
    assert q16["forgotten_relationships"] == row["forgotten_relationships"]
    assert q16["forgotten_biographies"] == row["forgotten_biographies"]
    from dukb.neural.metrics.recall import success_du

    kb, closure, _o, _lm, target = setup
    assert q16["recall"] == row["recall"]
    assert q16["success_du"] == success_du(closure, target, row["forgotten_relationships"])
    assert "torchao" in row["attacks"]["quant8"]["scheme"] and "int8" in row["attacks"]["quant8"]["scheme"]
    assert "int4" in row["attacks"]["quant4"]["scheme"] and row["attacks"]["quant4"]["bits"] == 4
    _check_recomputes(setup, row)


def test_quantization_changes_the_weights_it_reads():
    """quant4 really rounds: a Linear's weights take at most 16 values per group after quantization."""
    import torch.nn as nn

    from dukb.neural.attacks.quant import conv1d_to_linear, quantized_copy
    from dukb.neural.probe import Predictor

    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(64, 32), nn.Linear(32, 8))
    pred = Predictor(m, None, None, device=DEVICE)
    q, scheme = quantized_copy(pred, 4, 32)
    x = torch.randn(5, 64)
    diff = (q.model(x) - m(x)).abs().max().item()
    assert 0 < diff < 1, scheme
    q16, _ = quantized_copy(pred, 16)
    assert (q16.model(x) - m(x)).abs().max().item() < 1e-2
    from transformers.pytorch_utils import Conv1D

    c = nn.Sequential(Conv1D(6, 4))
    y = c(x[:, :4])
    assert conv1d_to_linear(c) == 1 and isinstance(c[0], nn.Linear)
    assert torch.allclose(c(x[:, :4]), y, atol=1e-6)


def test_relearning_the_target_brings_it_back(setup):
    row = _rows(setup, "relearn:mode=target:steps=16")[0]
    kb, closure, _o, _lm, target = setup
    assert row["target_forgotten"], "GA at this setting must forget the target for the test to mean anything"
    e = row["attacks"]["relearn"]
    assert e["relearned"] == {"relationships": [target], "biographies": []}
    assert e["target_known"] == 1 and target not in e["forgotten_relationships"]
    _check_recomputes(setup, row)


def test_relearn_neighbours_are_outside_the_forget_set_and_share_a_person(setup):
    from dukb.neural.attacks import AttackContext
    from dukb.neural.attacks.relearn import relearn_facts

    kb, closure, _o, _lm, target = setup
    forget = [target]
    ctx = AttackContext(None, kb, closure, target, [[target]], "exact", forget, [], None)
    chosen = relearn_facts(ctx, "neighbours", 1000, 0)
    f = next(x for x in kb.relationships if x.fact_id == target)
    people = {f.subject, f.object}
    rel = {x.fact_id: x for x in kb.relationships}
    bio = {x.fact_id: x for x in kb.biographies}
    assert chosen and all(i != target for k, i in chosen if k == "relationship")
    for k, i in chosen:
        who = {rel[i].subject, rel[i].object} if k == "relationship" else {bio[i].subject}
        assert who & people
    assert len(relearn_facts(ctx, "neighbours", 3, 0)) == 3
    # the control: facts about people the forget set does not mention
    far = relearn_facts(ctx, "random", 1000, 0)
    assert far and not set(far) & set(chosen) and len(far) + len(chosen) == len(rel) - 1 + len(bio)
    for k, i in far:
        who = {rel[i].subject, rel[i].object} if k == "relationship" else {bio[i].subject}
        assert not who & people


def test_a_prompt_holding_the_fact_is_answered(setup):
    """incontext with premises=self on a model that knows the facts: a fact marked forgotten is asked once with its
    own sentence before its question (which holds the answer), and the attack counts it deduced exactly when the
    model answers that prompt, the reference rate being the same model's. Whether a model trained on bare questions
    copies from its prompt is the checkpoint's behaviour, not the attack's (the GPU-trained tiny model of one run
    did not), so the outcome is checked against an independent probe of the same prompt."""
    import dataclasses

    from dukb.kb.probes import fact_statements
    from dukb.neural.attacks import AttackContext, run_attacks
    from dukb.neural.data import kb_qa
    from dukb.neural.probe import Predictor, probe

    kb, closure, _o, lm, target = setup
    pred = Predictor(lm.model, lm.tokenizer, lm.tags, device=lm.device)
    items = kb_qa(kb)
    df = probe(pred, items, rouge=False, logprob=False)
    assert bool(df[(df.fact_kind == "relationship") & (df.fact_id == target)]["known"].iloc[0])
    df.loc[(df.fact_kind == "relationship") & (df.fact_id == target), "known"] = False  # pretend it is forgotten
    ctx = AttackContext(pred, kb, closure, target, [[target]], "exact", [target], items, df, reference=pred)
    e = run_attacks(ctx, parse_attacks("incontext:premises=self"))["incontext"]
    assert e["facts_tried"] == [target] and e["n_prompts"] == 1 and e["answer_in_premises"] == 1.0
    q = next(it for it in items if it.fact_kind == "relationship" and it.fact_id == target)
    sentence = fact_statements(kb)[("relationship", target)]
    asked = dataclasses.replace(q, kind="incontext", question=f"{sentence} {q.question}")
    answered = int(bool(probe(pred, [asked], rouge=False, logprob=False)["known"].iloc[0]))
    assert e["target_deduced"] == answered and e["target_known"] == answered
    assert e["deduction_rate"] == e["deduction_rate_reference"] == float(answered)


def test_incontext_counts_a_fact_deduced_when_the_prompt_is_answered(setup, monkeypatch):
    """With a model that answers exactly when the fact's sentence is in its prompt (decoding stubbed), the attack
    counts the forgotten target deduced and known, and the same prompts without the sentence are not answered."""
    import dukb.neural.probe as probe_mod
    from dukb.kb.probes import fact_statements
    from dukb.neural.attacks import AttackContext, run_attacks
    from dukb.neural.data import kb_qa
    from dukb.neural.probe import Predictor, probe

    kb, closure, _o, lm, target = setup
    sentence = fact_statements(kb)[("relationship", target)]
    gold = kb.relationship(target).relation

    def answers_with_the_sentence(pred, prompts, max_new_tokens=10, **_kw):
        return [f" {gold}" if sentence in p else " nobody" for p in prompts]

    patch_everywhere(monkeypatch, probe_mod, "greedy_generate", answers_with_the_sentence)
    pred = Predictor(lm.model, lm.tokenizer, lm.tags, device=lm.device)
    items = kb_qa(kb)
    df = probe(pred, items, rouge=False, logprob=False)
    assert not df["known"].any()  # no prompt holds a sentence: nothing is answered
    ctx = AttackContext(pred, kb, closure, target, [[target]], "exact", [target], items, df, reference=pred)
    e = run_attacks(ctx, parse_attacks("incontext:premises=self"))["incontext"]
    assert e["n_prompts"] >= 1 and target in e["facts_tried"]
    assert e["target_deduced"] == 1 and e["target_known"] == 1 and target in e["facts_deduced"]
    assert e["deduction_rate_reference"] == e["deduction_rate"]


def test_incontext_and_logitlens_on_an_unlearned_model(setup):
    from dukb.neural.probe import Predictor

    kb, closure, _o, lm, target = setup
    import copy

    ref = Predictor(copy.deepcopy(lm.model), lm.tokenizer, lm.tags, device=lm.device)
    row = _rows(setup, "incontext,logitlens", reference=ref)[0]
    ic = row["attacks"]["incontext"]
    assert ic["n_prompts"] >= 0 and set(ic["facts_deduced"]) <= set(ic["facts_tried"])
    assert set(ic["facts_tried"]) <= set(row["forgotten_relationships"])
    if ic["n_prompts"]:
        assert ic["deduction_rate_reference"] is not None
    ll = row["attacks"]["logitlens"]
    n_layers = lm.model.config.n_layer
    assert len(ll["target_ranks"]) == n_layers + 1 and all(0 <= p <= 1 for p in ll["target_probs"])
    # the lens only adds known facts: what it recovers was forgotten by the probe
    assert set(ll["recovered"]) <= set(row["forgotten_relationships"])
    assert set(ll["forgotten_relationships"]) == set(row["forgotten_relationships"]) - set(ll["recovered"])
    _check_recomputes(setup, row)


def test_logitlens_final_layer_is_the_models_own_distribution(setup):
    """The lens's last column is the model's output: rank 0 there exactly when greedy decoding's first token is the
    gold first token."""
    from dukb.neural.attacks.logitlens import lens_ranks
    from dukb.neural.data import encode_qa, kb_qa
    from dukb.neural.probe import Predictor

    kb, _c, _o, lm, _t = setup
    pred = Predictor(lm.model, lm.tokenizer, lm.tags, device=lm.device)
    items = kb_qa(kb)[:20]
    ranks, probs = lens_ranks(pred, items)
    batch = encode_qa(lm.tokenizer, lm.tags, items)
    first = (batch["labels"] != -100).int().argmax(dim=1)
    with torch.no_grad():
        logits = lm.model(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], position_ids=batch["position_ids"]
        ).logits
    for i in range(len(items)):
        top = int(logits[i, first[i] - 1].argmax())
        assert (ranks[i, -1] == 0) == (top == int(batch["input_ids"][i, first[i]]))


def test_evaluate_records_attacks_and_their_settings_in_the_identity(setup, tmp_path, capsys):
    from dukb.cli.main import main

    kb, _c, out, _lm, target = setup
    tf = tmp_path / "t.txt"
    tf.write_text(f"{target}\n")
    run = tmp_path / "run"
    args = [
        "evaluate",
        "--kb",
        str(kb.source),
        "--finetuned",
        str(out),
        "--targets-file",
        str(tf),
        "--methods",
        "ga",
        "--grid",
        "ga=4",
        "--device",
        DEVICE,
        "-o",
        str(run),
        "--attacks",
        "quant16,relearn:steps=2",
    ]
    assert main(args) == 0
    rows = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    assert rows and all(set(r["attacks"]) == {"quant16", "relearn"} for r in rows)
    assert all(r["attacks"]["relearn"]["settings"]["steps"] == 2 for r in rows)
    ident = json.loads((run / "config.json").read_text())["identity"]
    assert ident["attacks"]["relearn"]["steps"] == 2 and ident["attacks"]["quant16"] == {}
    # report.md: recall before and after each attack, as a table and as a plot
    report = (run / "report.md").read_text()
    assert "## Attacks: does the fact come back?" in report and "| quant16 | relearn | worst case |" in report
    mean = sum(r["attacks"]["relearn"]["recall"] for r in rows) / len(rows)
    assert f"{mean:.3f}" in report.split("## Attacks")[1]
    assert (run / "attacks.png").stat().st_size > 0
    capsys.readouterr()
    assert main(args[:-1] + ["quant16,relearn:steps=3", "--resume"]) == 2
    assert "attacks" in capsys.readouterr().err
    assert main(args + ["--resume"]) == 0


def test_attack_command_on_a_checkpoint(setup, tmp_path, capsys):
    from dukb.cli.main import main

    kb, _c, out, _lm, target = setup
    res = tmp_path / "row.json"
    assert (
        main(
            [
                "attack",
                "--kb",
                str(kb.source),
                "--model",
                str(out),
                "--reference",
                str(out),
                "--target-id",
                str(target),
                "--attacks",
                "quant16,incontext,logitlens",
                "--device",
                DEVICE,
                "-o",
                str(res),
            ]
        )
        == 0
    )
    row = json.loads(res.read_text())
    assert row["target"] == target and set(row["attacks"]) == {"quant16", "incontext", "logitlens"}
    assert row["attacks"]["quant16"]["recall"] == row["recall"]
    assert row["known_share_before"] == 1.0  # the finetuned model knows every fact
    assert "recall under attack" in capsys.readouterr().out
    assert main(["attack", "--kb", str(kb.source), "--model", str(out), "--target-id", "999999"]) == 2


def test_settings_refuse_non_finite_numbers():
    for bad in ("relearn:lr=nan", "relearn:lr=inf", "relearn:lr=-1", "relearn:lr=1e400", "relearn:lr=0x1"):
        with pytest.raises(InputError):
            parse_attacks(bad)
    assert parse_attacks("relearn:lr=2e-4")[0][1]["lr"] == 2e-4


def test_attacks_run_without_the_recall_metric(setup):
    """The worst case needs the QA probe's forgotten facts: taken from the probe when the recall metric is off."""
    from dukb.neural.metrics import get_metric
    from dukb.neural.unlearn import UnitPlan, sweep_target

    kb, closure, _out, lm, target = setup
    row = next(
        sweep_target(
            UnitPlan(
                lm,
                kb,
                closure,
                target,
                "ga",
                [16],
                seed=0,
                lr=2e-3,
                metrics=[get_metric("recall_under_attack")],
                attacks=parse_attacks("quant16"),
            )
        )
    )
    assert "recall_under_attack" in row and "quant16" in row["attacks"]


def test_quant16_leaves_a_16_bit_model_exactly_as_it_is():
    import torch.nn as nn

    from dukb.neural.attacks.quant import quantized_copy
    from dukb.neural.probe import Predictor

    m = nn.Sequential(nn.Linear(8, 8)).to(torch.bfloat16)
    q, scheme = quantized_copy(Predictor(m, None, None, device=DEVICE), 16)
    assert "none" in scheme
    assert all(torch.equal(a, b) for a, b in zip(m.parameters(), q.model.parameters()))


def test_relearning_and_quantization_act_on_merged_lora_weights(setup):
    """An attacker holds the weights: a LoRA model is merged, every parameter is relearned (also when the method left
    none trainable, as WHP after LoRA), and 4-bit groups tile the base layers, not the adapter's rank."""
    import copy
    import dataclasses

    from dukb.neural.attacks.quant import quantized_copy
    from dukb.neural.attacks.relearn import relearned_copy
    from dukb.neural.data import kb_qa
    from dukb.neural.methods.base import WeightState
    from dukb.neural.spec import LoraSpec

    kb, _c, _o, lm, _t = setup
    lm2 = dataclasses.replace(lm, model=copy.deepcopy(lm.model))
    n_base = sum(p.numel() for p in lm2.model.parameters())
    state = WeightState(lm2, LoraSpec(r=2))
    pred = state.predictor()
    for p in pred.model.parameters():
        p.requires_grad_(False)
    relearned, n = relearned_copy(pred, kb_qa(kb)[:2], 1, 1e-3)
    assert n == n_base and not hasattr(relearned.model, "peft_config")
    assert any(p.requires_grad is False for p in pred.model.parameters())  # the unlearned model is untouched
    _q, scheme = quantized_copy(pred, 4, 32)
    assert "groups of 32" in scheme, scheme
    state.close()


def test_logitlens_combines_the_two_models_of_a_whp_predictor(setup):
    """With an auxiliary model the lens combines both models' logits at every layer, so its last column is the
    predictor's own output."""
    import copy

    from dukb.neural.attacks.logitlens import lens_ranks
    from dukb.neural.data import encode_qa, kb_qa
    from dukb.neural.probe import Predictor

    kb, _c, _o, lm, _t = setup
    aux = copy.deepcopy(lm.model)
    with torch.no_grad():
        for p in aux.parameters():
            p.add_(0.05 * torch.randn_like(p))
    pred = Predictor(lm.model, lm.tokenizer, lm.tags, aux_model=aux, combine=lambda b, a: b - 3.0 * a, device=lm.device)
    items = kb_qa(kb)[:12]
    ranks, _p = lens_ranks(pred, items)
    batch = encode_qa(lm.tokenizer, lm.tags, items)
    first = (batch["labels"] != -100).int().argmax(dim=1)
    with torch.no_grad():
        logits = pred.logits(batch)
    rows = torch.arange(len(items))
    own = logits[rows, first - 1]
    gold = batch["input_ids"][rows, first]
    expect = (own > own[rows, gold][:, None]).sum(dim=1)
    assert ranks[:, -1].tolist() == expect.tolist()


def test_relearn_half_takes_half_of_the_forgotten_premises(setup):
    import pandas as pd

    from dukb.neural.attacks import AttackContext
    from dukb.neural.attacks.relearn import relearn_facts
    from dukb.neural.data import kb_qa
    from dukb.solver.mdus import minimal_sets

    kb, closure, _o, _lm, target = setup
    sets = [list(s) for s in minimal_sets(closure, [closure.atom_of_fact(target)], "exact").sets]
    premises = sorted({i for s in sets for i in s} - {target})
    items = kb_qa(kb)
    gone = set(premises[: max(2, len(premises))])
    df = pd.DataFrame(
        {
            "kind": "qa",
            "fact_kind": [it.fact_kind for it in items],
            "fact_id": [it.fact_id for it in items],
            "known": [not (it.fact_kind == "relationship" and it.fact_id in gone) for it in items],
        }
    )
    ctx = AttackContext(None, kb, closure, target, sets, "exact", [target], items, df)
    half = relearn_facts(ctx, "half", 1000, 0)
    assert len(half) == len(gone & set(premises)) // 2
    assert all(k == "relationship" and i in gone and i != target for k, i in half)
