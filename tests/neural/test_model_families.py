"""The model-family registry (dukb.neural.families): one entry per family holds detection, prompt, finetuning preset
and the methods' learning rates; the method modules and finetuning read it."""

from __future__ import annotations

import pytest

from dukb.neural.families import FAMILIES, LR_KINDS, detect_family, families_table, family_lrs, finetune_presets
from dukb.neural.spec import PROMPT_PRESETS, preset_for


def test_the_rates_are_the_ones_the_runs_used():
    """The values every earlier run's identity recorded (hand-written here, not read from the registry)."""
    assert family_lrs("ga") == {
        "gpt2-xl": 2e-5,
        "phi": 2e-5,
        "llama": 1e-5,
        "generic": 2e-5,
        "tiny": 1e-3,
        "smollm2": 1e-5,
    }
    assert family_lrs("npo") == {
        "gpt2-xl": 4e-5,
        "phi": 4e-5,
        "llama": 2e-5,
        "generic": 4e-5,
        "tiny": 2e-3,
        "smollm2": 2e-5,
    }
    assert family_lrs("kl") == family_lrs("ga") == family_lrs("reinforce")
    assert family_lrs("cl") == {**family_lrs("ga"), "tiny": 1e-4}
    ft = finetune_presets()
    assert (
        ft["tiny"].lr,
        ft["tiny"].epochs,
        ft["smollm2"].lr,
        ft["smollm2"].epochs,
        ft["gpt2-xl"].epochs,
        ft["llama"].lr,
    ) == (1e-3, 400, 2e-4, 16, 15, 1e-5)
    with pytest.raises(KeyError):
        family_lrs("zz")


def test_method_modules_and_finetuning_read_the_registry():
    from dukb.neural.finetune import FINETUNE_PRESETS
    from dukb.neural.methods.closed_loop import CL_LR
    from dukb.neural.methods.ga import GA_LR
    from dukb.neural.methods.kl import KL_LR
    from dukb.neural.methods.npo import NPO_LR
    from dukb.neural.methods.tv import REINFORCE_LR

    assert (GA_LR, NPO_LR, KL_LR, REINFORCE_LR, CL_LR) == tuple(family_lrs(k) for k in LR_KINDS)
    assert FINETUNE_PRESETS == finetune_presets()


@pytest.mark.parametrize(
    "name,family",
    [
        ("HuggingFaceTB/SmolLM2-135M-Instruct", "smollm2"),
        ("SmolLM2-135M-Instruct.Q4_1.gguf", "smollm2"),
        ("gpt2-medium", "gpt2-xl"),
        ("microsoft/phi-1_5", "phi"),
        ("TinyLlama/TinyLlama-1.1B", "llama"),
        ("meta-llama/Llama-3.1-8B/", "llama"),
        ("mistralai/Mistral-7B", "generic"),
        ("llama-runs/gpt2", "gpt2-xl"),
        ("C:\\models\\phi-2", "phi"),
    ],
)
def test_detection_reads_the_last_name_component(name, family):
    from dukb.neural.zoo import model_family

    assert detect_family(name) == model_family(name) == family
    assert preset_for(name) == FAMILIES[family].prompt


def test_every_family_is_complete():
    for f in FAMILIES.values():
        assert f.prompt in PROMPT_PRESETS and set(f.lr) == set(LR_KINDS) and all(v > 0 for v in f.lr.values())
        assert f.finetune.lr > 0 and f.note
    assert list(FAMILIES)[-1] == "generic"
    table = families_table().markdown()
    assert all(f"`{n}`" in table for n in FAMILIES)


def test_a_grid_for_a_method_the_run_lacks_is_refused():
    """Nothing is dropped silently: `--grid npo=...` on a run whose methods are npo_seq is an error, not ignored."""
    from dukb import InputError
    from dukb.neural.methods import method_grids, resolve

    resolved = [tuple(resolve(m, "target")) for m in ("ga", "npo_seq")]
    assert method_grids(resolved, {"ga": [1, 2]})["ga"] == [1, 2]
    with pytest.raises(InputError, match="npo"):
        method_grids(resolved, {"npo": [1]})


def test_a_changed_preset_rate_enters_the_run_identity(monkeypatch):
    """A run identity records a method's resolved rate once the registry's differs from the rates earlier runs used,
    so a changed preset is never mixed into a resumed run; at today's rates identities are unchanged."""
    from dukb.neural import families as F
    from dukb.neural.methods import get_method
    from dukb.neural.protocols.evaluate.identity import method_identity
    from dukb.neural.run.identity import identity_differences

    ga, tv, icu = get_method("ga"), get_method("tv"), get_method("icu")
    assert all(F.identity_lr(m, fam, None) is None for m in (ga, tv, icu) for fam in F.FAMILIES)
    before = method_identity(ga, "target", [1, 2], "reference", "tiny", None)
    assert "lr" not in before
    monkeypatch.setitem(F.LR_KINDS["ga"].overrides, "tiny", 5e-4)  # the kind's one declaration, changed for tiny
    after = method_identity(ga, "target", [1, 2], "reference", "tiny", None)
    assert after["lr"] == 5e-4
    assert identity_differences({"methods": {"ga": before}}, {"methods": {"ga": after}}, ("methods",))
    assert "lr" not in method_identity(ga, "target", [1, 2], "reference", "tiny", 1e-3)  # --lr is recorded apart
    assert "lr" not in method_identity(icu, "target", [1], "separate", "tiny", None)  # nothing trained
