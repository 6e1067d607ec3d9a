"""EvaluateConfig.check(): the Python API refuses what the command line refuses, before anything runs."""

from __future__ import annotations

import pytest

from dukb import InputError
from dukb.neural.protocols.evaluate.config import EvaluateConfig
from dukb.neural.protocols.evaluate.run import evaluate


@pytest.mark.parametrize("kw, msg", [
    ({"sets": "exat"}, "--sets must be exact or random"),
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
])
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
