"""``dukb evaluate --save-models none|best|all``: which unlearned models are kept under RUN_DIR/models, their
records, a resume with another value, and `dukb probe` / load_model reading them back (peft adapters included)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import DEVICE
from dukb.cli.main import main

pytestmark = pytest.mark.slow

BASE = ["evaluate", "--kb", "demo", "--n-targets", "1", "--methods", "ga", "--metrics", "recall", "--device", DEVICE]
RUN = [*BASE, "--grid", "ga=1,2"]


def _rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines() if line.strip()]


def _kept(run: Path) -> list[Path]:
    """Every saved model directory (the ones holding a record), the temporary sweep folder left out."""
    return sorted(p.parent for p in (run / "models").rglob("dukb_model.json") if ".sweep" not in p.parts)


@pytest.fixture(scope="module")
def all_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("save") / "all"
    assert main([*RUN, "--save-models", "all", "-o", str(run)]) == 0
    return run


def test_all_saves_one_directory_per_row_with_its_record(all_run):
    from dukb.kb import load_kb, resolve_kb_path

    rows = _rows(all_run)
    kept = _kept(all_run)
    assert len(rows) == 2 and len(kept) == 2
    sha = load_kb(resolve_kb_path("demo")).fingerprint()
    for row in rows:
        d = all_run / "models" / str(row["target"]) / "ga" / f"steps={row['setting']['steps']}"
        assert d in kept and (d / "model.safetensors").is_file() and (d / "config.json").is_file()
        rec = json.loads((d / "dukb_model.json").read_text())
        assert (rec["target"], rec["method"], rec["setting"]) == (row["target"], "ga", row["setting"])
        assert rec["row_key"] == [row["target"], "ga", float(row["setting"]["steps"])]
        assert rec["kb_sha256"] == sha and rec["kb"] == "demo" and rec["prompt"] == "tiny"


def test_probe_of_a_saved_model_equals_its_rows_retained_vector(all_run, tmp_path, capsys):
    import pandas as pd

    for row in _rows(all_run):
        d = all_run / "models" / str(row["target"]) / "ga" / f"steps={row['setting']['steps']}"
        out = tmp_path / f"probe{row['setting']['steps']}.csv"
        assert main(["probe", "--model", str(d), "--device", DEVICE, "-o", str(out)]) == 0
        q = pd.read_csv(out)
        q = q[q["kind"] == "qa"]
        lost = q[~q["known"].astype(bool)]
        assert sorted(lost[lost["fact_kind"] == "relationship"]["fact_id"]) == row["forgotten_relationships"]
        assert sorted(lost[lost["fact_kind"] == "biography"]["fact_id"]) == row["forgotten_biographies"]
    assert any(r["forgotten_relationships"] for r in _rows(all_run))  # the check above compared something


def test_resume_with_another_save_models_is_accepted_and_keeps_what_was_saved(all_run):
    before = {p: (p / "model.safetensors").stat().st_mtime_ns for p in _kept(all_run)}
    for mode in ("none", "best"):
        assert main([*RUN, "--save-models", mode, "-o", str(all_run), "--resume"]) == 0
    assert {p: (p / "model.safetensors").stat().st_mtime_ns for p in _kept(all_run)} == before
    identity = json.loads((all_run / "config.json").read_text())["identity"]
    assert identity["methods"] and "save_models" not in json.dumps(identity)


def test_an_unknown_value_is_refused_in_one_line_before_anything_runs(tmp_path, capsys):
    assert main([*RUN, "--save-models", "some", "-o", str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err.strip() == ("dukb: error: --save-models must be one of none, best, all, got 'some'")
    assert not (tmp_path / "run").exists()


def test_none_saves_nothing(tmp_path):
    run = tmp_path / "none"
    assert main([*RUN, "-o", str(run)]) == 0  # none is the default
    assert len(_rows(run)) == 2 and not (run / "models").exists()


def test_best_keeps_the_setting_the_headline_rule_selects(tmp_path):
    from dukb.neural.metrics.summary import ACCURACY, best_setting, strength

    run = tmp_path / "best"
    assert main([*BASE, "--grid", "ga=1,2,8", "--save-models", "best", "-o", str(run)]) == 0
    rows = sorted(_rows(run), key=strength)
    i = best_setting([(r["recall"], r[ACCURACY]) for r in rows])
    kept = _kept(run)
    assert not (run / "models" / ".sweep").exists()
    if i is None:  # no setting keeps accuracy >= 0.8: nothing is selected, nothing kept
        assert kept == []
    else:
        assert kept == [run / "models" / str(rows[i]["target"]) / "ga" / f"steps={rows[i]['setting']['steps']}"]
        assert json.loads((kept[0] / "dukb_model.json").read_text())["setting"] == rows[i]["setting"]
    assert i is not None  # the demo KB's tiny model keeps accuracy at its weakest setting


def _lora_model(finetuned: Path):
    """The finetuned model with a LoRA adapter that changes its outputs (B starts at zero): (lm, WeightState, a
    question's token ids, the adapted model's logits on them)."""
    import torch

    from dukb.neural.methods.base import WeightState
    from dukb.neural.modelrecord import spec_for_path
    from dukb.neural.models import load_model
    from dukb.neural.spec import LoraSpec

    lm = load_model(spec_for_path(finetuned, device=DEVICE))
    state = WeightState(lm, LoraSpec(r=4), seed=0)
    with torch.no_grad():
        for p in state.model.parameters():
            if p.requires_grad:
                p.add_(0.05 * torch.randn_like(p))
    ids = lm.tokenizer(["Question: who is the father of"], return_tensors="pt")["input_ids"].to(lm.device)
    with torch.no_grad():
        return lm, state, ids, state.model(ids).logits


def test_a_saved_peft_adapter_loads_as_its_base_with_the_adapter_merged(all_run, tmp_path):
    import torch

    from dukb.kb import load_kb, resolve_kb_path
    from dukb.neural.modelrecord import read_model_record, spec_for_path
    from dukb.neural.models import load_model
    from dukb.neural.savedmodels import save_unlearned

    lm, state, ids, want = _lora_model(all_run / "finetuned")
    row = {"target": 15, "method": "ga", "setting": {"steps": 2}, "param": "steps"}
    out = save_unlearned(lm, state.model, tmp_path / "adapter", load_kb(resolve_kb_path("demo")), row, (15, "ga", 2.0))
    assert (out / "adapter_config.json").is_file() and not (out / "model.safetensors").exists()
    assert read_model_record(out)["adapter"] is True
    state.close()
    with torch.no_grad():
        base = lm.model(ids).logits
        got = load_model(spec_for_path(out, device=DEVICE)).model(ids).logits
    assert not torch.allclose(base, want, atol=1e-4)  # the adapter mattered
    assert torch.allclose(got, want, atol=1e-4)


def test_dukb_attack_reads_a_saved_model_on_its_recorded_kb(all_run, tmp_path):
    """`dukb attack --model RUN/models/...` (no --kb: the record's) scores the saved model as its row did; quant16
    (rounding to float16 and back) changes no answer."""
    row = max(_rows(all_run), key=lambda r: r["setting"]["steps"])
    d = all_run / "models" / str(row["target"]) / "ga" / f"steps={row['setting']['steps']}"
    out = tmp_path / "attack.json"
    assert (
        main(
            [
                "attack",
                "--model",
                str(d),
                "--target-id",
                str(row["target"]),
                "--attacks",
                "quant16",
                "--device",
                DEVICE,
                "-o",
                str(out),
            ]
        )
        == 0
    )
    got = json.loads(out.read_text())
    assert got["forgotten_relationships"] == row["forgotten_relationships"]
    assert got["recall"] == pytest.approx(row["recall"]) and got["attacks"]["quant16"]["recall"] == pytest.approx(
        row["recall"]
    )


def test_a_peft_model_saved_merged_is_a_full_model_with_the_same_outputs(all_run, tmp_path):
    """``merge`` (muse's C6 requests continue from a model on no disk): a merged copy, the peft model left as it
    was."""
    import torch

    from dukb.kb import load_kb, resolve_kb_path
    from dukb.neural.modelrecord import read_model_record, spec_for_path
    from dukb.neural.models import load_model
    from dukb.neural.savedmodels import save_unlearned

    lm, state, ids, want = _lora_model(all_run / "finetuned")
    fields = {"request": "sustain-2", "method": "ga", "setting": {"steps": 2}}
    out = save_unlearned(
        lm,
        state.model,
        tmp_path / "merged",
        load_kb(resolve_kb_path("demo")),
        fields,
        ("sustain-2", "unlearned", "ga", 2.0),
        merge=True,
    )
    assert (out / "model.safetensors").is_file() and not (out / "adapter_config.json").exists()
    rec = read_model_record(out)
    assert (
        "adapter" not in rec
        and rec["request"] == "sustain-2"
        and rec["row_key"] == ["sustain-2", "unlearned", "ga", 2.0]
    )
    assert hasattr(state.model, "peft_config")  # the model saved from is still the peft model
    with torch.no_grad():
        assert torch.allclose(state.model(ids).logits, want, atol=1e-5)
        got = load_model(spec_for_path(out, device=DEVICE)).model(ids).logits
    state.close()
    assert torch.allclose(got, want, atol=1e-4)
