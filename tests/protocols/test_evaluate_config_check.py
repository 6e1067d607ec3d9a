"""EvaluateConfig.check(): the Python API refuses what the command line refuses, before anything runs."""

from __future__ import annotations

import json

import pytest

from conftest import DEVICE, patch_everywhere
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


def test_the_stages_read_the_held_out_forms_the_check_resolved(tmp_path, monkeypatch):
    """One `dukb evaluate` checks and resolves its held-out forms in check() alone (issue 40: the stages consume the
    plan and never re-check or re-resolve): each method's own forms (rt trains on reverse, GA does not), read by the
    targets, model and unit stages, and every row holds its method's."""
    import dukb.neural.metrics.heldout as heldout

    cfg = EvaluateConfig(
        kb="demo", methods=["ga", "rt"], grids={"ga": [1], "rt": [1]}, n_targets=1, finetune_epochs=1, device=DEVICE
    ).check()
    ga, rt = cfg.heldout_of("ga"), cfg.heldout_of("rt")
    assert "reverse" in ga and rt == tuple(k for k in ga if k != "reverse") and "qa" not in ga
    assert set(cfg.heldout_baseline) == set(ga)

    def again(*_a, **_k):
        raise AssertionError("held-out forms checked or resolved after check()")

    for name in ("check_heldout", "default_heldout_forms", "resolve_heldout"):
        patch_everywhere(monkeypatch, heldout, name, again)
    evaluate(tmp_path / "run", cfg, log=lambda _msg: None)
    rows = [json.loads(x) for x in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert {r["method"]: r["heldout_forms"] for r in rows} == {"ga": list(ga), "rt": list(rt)}


def test_the_stages_read_the_methods_metrics_attacks_and_layers_the_check_resolved(tmp_path, monkeypatch):
    """check() resolves the methods, the metrics, the attacks and the layer range once (issue 40); the stages read
    them from the plan: a run with every parser and resolver made to fail after the check writes its rows, each
    attacked, and its identity records the attack and the layers. (The report re-renders from the run's files, as
    `dukb report` does, so it reads config.json's metrics.)"""
    import dukb.neural.attacks as attacks_mod
    import dukb.neural.attacks.base as attacks_base
    import dukb.neural.methods as methods_mod
    import dukb.neural.metrics as metrics_mod
    import dukb.neural.protocols.evaluate.report as report_mod
    import dukb.neural.runconfig as runconfig_mod

    cfg = EvaluateConfig(
        kb="demo",
        methods=["ga"],
        grids={"ga": [1, 2]},
        n_targets=1,
        finetune_epochs=1,
        device=DEVICE,
        attacks=["quant16"],
        layers="0-0",
    ).check()
    assert [label for label, *_ in cfg.resolved_methods] == ["ga"] and cfg.layer_range() == (0, 0)
    assert [a.name for a, _s in cfg.resolved_attacks] == ["quant16"]
    assert "recall" in {m.name for m in cfg.resolved_metrics}

    def again(*_a, **_k):
        raise AssertionError("parsed or resolved again after check()")

    real_parse_metrics = metrics_mod.parse_metrics
    for module, name in (
        (attacks_base, "parse_attacks"),
        (attacks_mod, "parse_attacks"),
        (methods_mod, "resolve"),
        (metrics_mod, "parse_metrics"),
        (runconfig_mod, "parse_layers"),
    ):
        patch_everywhere(monkeypatch, module, name, again)
    monkeypatch.setattr(report_mod, "parse_metrics", real_parse_metrics)
    evaluate(tmp_path / "run", cfg, log=lambda _msg: None)
    rows = [json.loads(x) for x in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all("quant16" in r["attacks"] for r in rows)
    identity = json.loads((tmp_path / "run" / "config.json").read_text())["identity"]
    assert identity["layers"] == [0, 0] and "quant16" in identity["attacks"]


def test_targets_read_after_the_check_keep_the_resolved_plan(tmp_path):
    """`dukb evaluate --targets-file` reads its targets after the check (against the resolved KB): the plan it gets
    keeps what the check resolved (held-out forms, methods, layers) and stays frozen, and the plan checked is left
    as it was (a copy made with dataclasses.replace lost the resolved forms: the run failed at its first unit)."""
    import dataclasses

    from dukb.cli.declared import build_config, signature
    from dukb.neural.declare import with_values

    targets = tmp_path / "targets.txt"
    targets.write_text("1\n")
    values = {p.name: getattr(p.default, "default", p.default) for p in signature(EvaluateConfig).parameters.values()}
    plan = build_config(EvaluateConfig, {**values, "kb": "demo", "targets_file": targets, "layers": "0-0"})
    assert plan.checked and plan.targets == [1] and plan.layer_range() == (0, 0)
    assert "paraphrase" in plan.heldout_of("ga") and [m[0] for m in plan.resolved_methods] == list(plan.methods)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.seed = 1
    checked = EvaluateConfig(kb="demo").check()
    again = with_values(checked, targets=[2])
    assert checked.targets is None and again.targets == [2] and again.heldout_of("ga") == checked.heldout_of("ga")
    with pytest.raises(TypeError):
        with_values(checked, no_such_field=1)


def test_unlearn_checks_its_held_out_forms_once_in_the_config(tmp_path, monkeypatch):
    """`dukb unlearn` builds the evaluate config and leaves every held-out check to its check(): one call, and the
    forms it reports are the plan's (the method's own default, recorded in the config)."""
    import dukb.neural.metrics.heldout as heldout
    from dukb.cli.neural_cmds import _unlearn_config

    model = tmp_path / "model"
    model.mkdir()
    (model / "dukb_model.json").write_text(json.dumps({"prompt": "tiny", "family": "tiny", "base": "tiny"}))
    calls = []
    original = heldout.check_heldout
    patch_everywhere(monkeypatch, heldout, "check_heldout", lambda *a: calls.append(a) or original(*a))

    def opts():
        return {"kb": "demo", "allow_kb_mismatch": False, "model": str(model), "rules": None, "device": DEVICE}

    args = ("rt", 15, None, None)
    plan, label, forms = _unlearn_config(opts(), *args, None, "pairs")
    assert label == "rt" and len(calls) == 1 and set(forms) == set(plan.heldout_of("rt")) == set(plan.heldout_forms)
    assert "reverse" not in forms and "paraphrase" in forms
    calls.clear()
    with pytest.raises(InputError, match="it saw reverse"):
        _unlearn_config(opts(), *args, "paraphrase,reverse", "pairs")
    assert len(calls) == 1


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
