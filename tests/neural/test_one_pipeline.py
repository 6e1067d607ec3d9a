"""One pipeline per job (issue 40, item 3) and issue 39's leftovers: the unit plan that `sweep_target` consumes, the
one place a row's Success-DU is computed, the relearning attack on the one training loop, hub ids and quant4 groups
checked before any model is read, and RESTOR's degenerate sizes refused."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from conftest import patch_everywhere
from dukb import InputError
from dukb.cli.main import main
from dukb.kb import load_kb
from dukb.solver.closure import compute_closure


@pytest.fixture(scope="module")
def demo():
    kb = load_kb("demo")
    return kb, compute_closure(kb)


# ------------------------------------------------------------------------------------------------- unit plan -----
def test_sweep_target_takes_one_frozen_unit_plan(demo):
    """The plan is resolved once, without a model: sets, forget set, retain data, seen and held-out forms; it is
    frozen, and sweep_target takes it alone."""
    from dukb.neural.metrics import get_metric
    from dukb.neural.unlearn import UnitPlan, sweep_target
    from dukb.solver.mdus import minimal_sets

    kb, c = demo
    assert list(inspect.signature(sweep_target).parameters) == ["plan"]
    plan = UnitPlan(None, kb, c, 6, "ga_gdr", [1, 4], metrics=[get_metric("recall"), get_metric("recall_heldout")])
    exact = minimal_sets(c, [c.atom_of_fact(6)], "exact").sets
    assert plan.sets == tuple(tuple(s) for s in exact) and plan.sets_used == "exact"
    assert plan.forget_ids == (6,) and [it.fact_id for it in plan.forget] == [6]
    assert plan.label == "ga_gdr" and plan.method.name == "ga_gdr" and plan.grid == (1, 4)
    assert plan.retain and not {("relationship", 6)} & {(it.fact_kind, it.fact_id) for it in plan.retain}
    assert plan.retain_ids["relationships"] == sorted(
        {it.fact_id for it in plan.retain if it.fact_kind == "relationship"}
    )
    assert plan.seen == ("qa",) and "qa" not in plan.heldout and plan.heldout
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.seed = 1
    # a scope other than the target's names the row's method; an explicit label wins
    assert UnitPlan(None, kb, c, 6, "ga", scope="minimum").label == "ga@minimum"
    assert UnitPlan(None, kb, c, 6, "ga", label="du_ga", scope="minimum").label == "du_ga"
    with pytest.raises(InputError):  # a held-out form the method trains on
        UnitPlan(None, kb, c, 6, "ga", metrics=[get_metric("recall_heldout")], heldout_forms=["qa"])


def test_success_du_of_a_row_and_of_a_probe_follow_definition_2(demo):
    """success_du_fields and score_probe give Success-DU from the forgotten facts (Wu et al. 2025, Definition 2),
    on the probed and the held-out forms."""
    import pandas as pd

    from dukb.neural.metrics.base import RowContext
    from dukb.neural.metrics.recall import score_probe, success_du, success_du_fields
    from dukb.solver.mdus import is_deep_unlearning_set, minimal_sets

    kb, c = demo
    best = list(minimal_sets(c, [c.atom_of_fact(6)], "exact").sets[0])
    assert success_du_fields(c, 6, {"forgotten_relationships": [6]}) == {
        "success_du": int(is_deep_unlearning_set(c, [c.atom_of_fact(6)], [6]))
    }
    both = success_du_fields(c, 6, {"forgotten_relationships": best, "forgotten_relationships_heldout": []})
    assert both == {"success_du": 1, "success_du_heldout": 0}
    assert success_du_fields(c, 6, {"forgotten_relationships_heldout": None}) == {}
    rows = [("qa", "relationship", f.fact_id, f.fact_id not in best) for f in kb.relationships]
    rows += [("qa", "biography", b.fact_id, True) for b in kb.biographies]
    df = pd.DataFrame(rows, columns=["kind", "fact_kind", "fact_id", "known"])
    out = score_probe(RowContext(kb, 6, [best], "exact", df, [6], closure=c))
    assert out["recall"] == 1.0 and out["success_du"] == success_du(c, 6, best) == 1
    assert list(out)[-1] == "success_du" and out["forgotten_relationships"] == sorted(best)


# --------------------------------------------------------------------------------------------- issue 39 (a) -----
@pytest.mark.parametrize(
    "value", ["foo/ba r", "a" * 97, "org/" + "n" * 97, "-x/y", "x./y", "o/n--m", "o/n..m", "o/n\u00e9"]
)
def test_malformed_hub_ids_are_refused_in_one_line(value, capsys):
    from dukb.neural.zoo import check_hub_id, check_model_value

    with pytest.raises(InputError, match="hub id"):
        check_hub_id(value)
    with pytest.raises(InputError):
        check_model_value(value)
    assert main(["probe", "--kb", "demo", "--model", value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dukb: error:") and "Traceback" not in err[0]


def test_a_hub_id_not_cached_is_refused_before_the_kb_or_a_model_is_read(monkeypatch, capsys):
    import dukb.neural.modelrecord as modelrecord
    import dukb.neural.models as models
    import dukb.neural.zoo as zoo

    def refuse(*_a, **_k):  # pragma: no cover - a failure when reached
        raise AssertionError("a model or KB was read")

    patch_everywhere(monkeypatch, models, "load_model", refuse)
    patch_everywhere(monkeypatch, modelrecord, "model_kb", refuse)
    monkeypatch.setattr(zoo, "hub_cached", lambda repo: False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for argv in (
        ["probe", "--kb", "demo", "--model", "org/name"],
        ["unlearn", "--model", "org/name", "--method", "ga", "--target-id", "6", "-o", "x"],
        ["attack", "--model", "org/name", "--target-id", "6"],
        ["finetune", "--kb", "demo", "--model", "org/name", "-o", "x"],
    ):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "org/name" in err[0] and "not in the Hugging Face cache" in err[0], err
    # a hub that cannot be reached: one line, no traceback
    monkeypatch.delenv("HF_HUB_OFFLINE")

    def unreachable(repo, option):
        raise InputError(f"{option} {repo}: not in the local Hugging Face cache, and the hub cannot be reached")

    monkeypatch.setattr(zoo, "_hub_answers", unreachable)
    assert main(["probe", "--kb", "demo", "--model", "org/name"]) == 2
    assert "cannot be reached" in capsys.readouterr().err
    monkeypatch.setattr(zoo, "hub_cached", lambda repo: True)  # cached: the check passes
    zoo.check_model_value("org/name")


# --------------------------------------------------------------------------------------------- issue 39 (b) -----
def test_quant4_group_must_divide_the_layer_widths():
    torch = pytest.importorskip("torch")
    from dukb.neural.attacks import parse_attacks
    from dukb.neural.attacks.base import check_attacks_on_model
    from dukb.neural.attacks.quant import check_group, layer_widths

    model = torch.nn.Sequential(torch.nn.Linear(96, 8), torch.nn.Linear(8, 96))
    assert layer_widths(model) == [8, 96]
    assert check_group(model, 8) == 8
    with pytest.raises(InputError, match=r"group=16 does not divide the model's layer widths \(8\).*dividing 8"):
        check_group(model, 16)
    with pytest.raises(InputError, match="group=32"):
        check_attacks_on_model(parse_attacks("quant4:group=32"), model)
    check_attacks_on_model(parse_attacks("quant4:group=8,quant8,relearn"), model)  # others have no model check
    for bad in ("quant4:group=7", "quant4:group=0", "quant4:group=2048"):  # parse time: a power of two in range
        with pytest.raises(InputError):
            parse_attacks(bad)


# --------------------------------------------------------------------------------------------- issue 39 (c) -----
@pytest.mark.parametrize(
    "spec",
    ["relearn:steps=2:steps=3", "quant4:group=16:group=16", "relearn:mode=half:mode=target", "relearn,relearn:steps=2"],
)
def test_an_attack_setting_given_twice_is_refused_like_a_method_option(spec, capsys):
    from dukb.neural.attacks import parse_attacks
    from dukb.neural.methods import resolve

    with pytest.raises(InputError, match="twice"):
        parse_attacks(spec)
    with pytest.raises(InputError, match="twice"):
        resolve("npo:beta=0.05:beta=0.1")
    assert main(["attack", "--model", "m", "--target-id", "1", "--attacks", spec]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "twice" in err[0]


# --------------------------------------------------------------------------------------------- issue 39 (d) -----
@pytest.mark.parametrize(
    "args",
    [
        ["--context", "0"],
        ["--n-retain", "0"],
        ["--n-random", "0"],
        ["--unlearn-epochs", "all=0"],
        ["--context", "1001"],
    ],
)
def test_degenerate_restor_sizes_are_refused(args, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["restor", "--kb", "demo", "-o", str(out), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and args[0] in err[0]
    assert not out.exists()


def test_restor_config_refuses_a_context_of_zero():
    from dukb.neural.restor.config import RestorConfig

    with pytest.raises(InputError, match="--context"):
        RestorConfig(kb="demo", context=0).check()


# ---------------------------------------------------------------------------------------------------- relearn -----
@pytest.mark.slow
def test_relearn_on_the_training_loop_equals_the_hand_written_adamw_loop(tmp_path, monkeypatch):
    """relearned_copy (the one training loop) takes the same steps as the attack's former own AdamW loop: same
    seed, same losses, the same weights bit for bit."""
    torch = pytest.importorskip("torch")
    import dukb.neural.attacks.relearn as rl
    from dukb.neural.attacks.base import plain_copy
    from dukb.neural.data import encode_qa, kb_qa, vocabulary_texts
    from dukb.neural.finetune import answer_token_loss
    from dukb.neural.modelbuild import build_tiny_model
    from dukb.neural.pipeline import load_finetuned
    from dukb.neural.probe import Predictor
    from dukb.neural.spec import PROMPT_PRESETS

    kb = load_kb("demo")
    texts = vocabulary_texts(kb, PROMPT_PRESETS["tiny"])
    lm = load_finetuned(build_tiny_model(texts, tmp_path / "tiny", seed=0), device="cpu")
    pred = Predictor(lm.model, lm.tokenizer, lm.tags, device=lm.device)
    items = kb_qa(kb)[:6]
    steps, lr, seed = 5, 1e-3, 3

    model = plain_copy(pred.model)  # the attack's loop before it used train_loop
    params = [p for p in model.parameters() if p.requires_grad]
    torch.manual_seed(seed)
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    batch = encode_qa(pred.tokenizer, pred.tags, items, device=pred.device)
    n_tok = max(int((batch["labels"] != -100).sum()), 1)
    model.train()
    before = []
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = answer_token_loss(model, batch, n_tok)
        before.append(loss.item())
        loss.backward()
        opt.step()
    model.eval()

    after = []
    monkeypatch.setattr(
        rl, "answer_token_loss", lambda m, b, n: (lambda x: after.append(x.item()) or x)(answer_token_loss(m, b, n))
    )
    got, n_params = rl.relearned_copy(pred, items, steps, lr, seed)
    assert after == before and len(after) == steps
    assert n_params == sum(p.numel() for p in params)
    ref = model.state_dict()
    assert all(torch.equal(v, ref[k]) for k, v in got.model.state_dict().items())
    assert any(not torch.equal(v, lm.model.state_dict()[k]) for k, v in ref.items())  # it trained
