"""EvaluateConfig.check(): the Python API refuses what the command line refuses, before anything runs."""

from __future__ import annotations

import pytest

from conftest import patch_everywhere
from dukb import InputError
from dukb.neural.protocols.evaluate.config import EvaluateConfig
from dukb.neural.protocols.evaluate.run import evaluate


@pytest.mark.parametrize(
    "kw, msg",
    [
        ({"sets": "exat"}, "--sets must be exact, random or paper"),
        ({"tie_break": "last"}, "--tie-break must be accuracy or first"),
        ({"seeds": 0}, "--seeds must be from 1 to 10,000, got 0"),
        ({"n_targets": 0}, "--n-targets must be from 1 to 1,000,000, got 0"),
        ({"batch_size": 0}, "--batch-size must be from 1 to 4,096, got 0"),
        ({"finetune_epochs": -1}, "--finetune-epochs must be from 1 to 10,000, got -1"),
        ({"prompt": "nope"}, "unknown --prompt"),
        ({"forget_scope": "everything"}, "unknown forget scope"),
        ({"schedule": "fast"}, "--schedule must be one of"),
        ({"methods": []}, "no unlearning method"),
        ({"layers": "3-1"}, "layers"),
        ({"lora_r": -1}, "--lora-r"),
        ({"finetune_forms": ["paraphrase"]}, "must include qa"),
        ({"heldout_forms": ["no_such_form"]}, "unknown probe kind"),
        ({"heldout_forms": ["yes", "cloze"]}, "must ask for the fact"),
        ({"heldout_forms": []}, "at least one probe form"),
        ({"finetune_forms": []}, "at least one probe form"),
        ({"finetuned": "somewhere", "finetune_forms": ["qa", "cloze"]}, "--finetuned skips"),
    ],
)
def test_bad_config_is_refused_before_anything_runs(tmp_path, kw, msg):
    with pytest.raises(InputError, match=msg):
        EvaluateConfig(**kw).check()
    with pytest.raises(InputError, match=msg):
        evaluate(tmp_path / "run", EvaluateConfig(**kw))
    assert not (tmp_path / "run").exists()


def test_check_resolves_forms():
    cfg = EvaluateConfig(finetune_forms=["paraphrase", "qa", "edu"], heldout_forms=["rwku"]).check()
    assert cfg.finetune_forms == ["cloze", "yes", "no", "qa", "paraphrase"]
    assert "reverse" in cfg.heldout_forms and "qa" not in cfg.heldout_forms


def test_bad_heldout_rule_is_refused():
    with pytest.raises(InputError, match="--heldout-rule must be one of pairs, any"):
        EvaluateConfig(heldout_rule="some").check()


def test_check_returns_one_frozen_plan_checked_once(monkeypatch):
    """check() returns a resolved copy that refuses changes; checking it again returns it as it is (the stages
    consume it and never re-check), and the config given is left as it was."""
    import dataclasses

    import dukb.neural.metrics.heldout as heldout

    cfg = EvaluateConfig(heldout_forms=["rwku"])
    plan = cfg.check()
    assert plan is not cfg and cfg.heldout_forms == ["rwku"] and "reverse" in plan.heldout_forms
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.seed = 3
    calls = []
    patch_everywhere(monkeypatch, heldout, "check_heldout", lambda *a: calls.append(a))
    assert plan.check() is plan and not calls
    # a new config made from the plan is a new, unchecked one
    assert not dataclasses.replace(plan, seed=3).checked


def test_restor_takes_the_shared_options_and_its_identity_is_unchanged_at_their_defaults():
    """`dukb restor` has every shared option (issue 40): --batch-size and --finetune-epochs reach the clean model's
    finetuning, --lr every method's unlearning rate (below --unlearn-lr), and an option left at its default is not
    in the run identity, so a run written before restor took them compares equal."""
    from dukb.neural.restor.config import RestorConfig
    from dukb.neural.runconfig import RunConfig

    base = RestorConfig(kb="demo").check()
    assert {f.name for f in dataclasses_fields(RunConfig)} <= {f.name for f in dataclasses_fields(RestorConfig)}
    old = {
        "model",
        "corrupt",
        "context",
        "docs_per_entity",
        "seed",
        "lora_r",
        "lora_alpha",
        "samples",
        "temperature",
        "max_new_tokens",
        "preset",
        "clean_epochs",
        "corrupt_epochs",
        "corrupt_lr",
        "templates",
        "n_random",
        "n_retain",
        "rules",
        "prompt",
    }
    assert set(base.identity()) == old
    cfg = RestorConfig(
        kb="demo",
        batch_size=8,
        finetune_epochs=3,
        lr=3e-4,
        unlearn_lr={"kl": 1e-5},
        gradient_checkpointing=True,
        lora_dropout=0.1,
    ).check()
    assert cfg.train_config("clean").batch_size == 8 and cfg.train_config("clean").epochs == 3
    assert cfg.unlearn_setting("ga").lr == 3e-4 and cfg.unlearn_setting("kl").lr == 1e-5
    ident = cfg.identity()
    assert ident["batch_size"] == 8 and ident["lr"] == 3e-4 and ident["lora_dropout"] == 0.1
    assert "gradient_checkpointing" not in ident  # changes no row
    with pytest.raises(InputError, match="--clean-epochs"):
        RestorConfig(kb="demo", finetune_epochs=3, clean_epochs=4).check()


def dataclasses_fields(cls):
    import dataclasses

    return dataclasses.fields(cls)
