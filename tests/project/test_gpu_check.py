"""bench/gpu_check.py, the GPU checks of issue 42 (item 9), on the CPU: its help, the driver's dry run (every part
in its own process, the JSON and markdown written), Llama-3-8B's shape built on torch's meta device (no memory) with
its parameter count, and the summary of a full record (so that the GPU session's last step cannot fail on it)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "gpu_check.py"


@pytest.fixture(scope="module")
def gc():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_help_and_a_dry_run_of_the_driver(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "--parts" in proc.stdout and "--quick" in proc.stdout
    assert "vllm, llama8b, evaluate" in proc.stdout
    bad = subprocess.run([sys.executable, str(SCRIPT), "--parts", "tpu"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "unknown part(s) tpu" in bad.stderr
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--parts", "vllm,evaluate", "--dry-run", "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rec = json.loads((out / "gpu_check.json").read_text())
    assert list(rec["parts"]) == ["vllm", "evaluate"] and rec["parts"]["vllm"]["dry_run"]
    assert rec["parts"]["evaluate"]["command"].startswith("dukb evaluate --device cuda -o ")
    assert rec["parts"]["evaluate"]["command"].endswith("--n-targets 2")
    assert "## evaluate" in (out / "gpu_check.md").read_text()


def test_llama8b_shape_builds_on_the_meta_device(gc):
    """The config builds and the model instantiates without memory: Llama-3-8B's 8,030,261,248 parameters."""
    model = gc.build_llama8b("meta")
    assert {p.device.type for p in model.parameters()} == {"meta"}
    assert {str(p.dtype) for p in model.parameters()} == {"torch.bfloat16"}
    rec = gc.part_llama8b_dry(Namespace(quick=True, dry_run=True))
    assert rec["params"] == gc.LLAMA3_8B_PARAMS == 8_030_261_248
    assert rec["least_gib"]["adamw8bit"] < rec["least_gib"]["adamw (bf16 states)"]
    assert len(rec["plan"]["variants"]) == 8  # {ga, npo} x {adamw, adamw8bit} x {checkpointing off, on}


def test_bf16_ulp(gc):
    assert gc.bf16_ulp(1.0) == 2**-7 and gc.bf16_ulp(-3.0) == 2**-6 and gc.bf16_ulp(200.0) == 1.0


def test_summary_of_a_full_record(gc):
    compared = {
        "items": 100,
        "known_hf": 60,
        "known_vllm": 61,
        "decision_agreement": 0.99,
        "disagreements": 1,
        "disagreements_within_bf16_tolerance": 1,
        "outputs_differing": 3,
        "seconds_hf": 1.0,
        "seconds_vllm": 0.5,
        "engines_built": 1,
        "lora_requests": 0,
        "examples": [],
    }
    lora = {
        "items": 100,
        "engines_built": 1,
        "lora_requests": 2,
        "settings": [
            {"known_hf": 50, "known_vllm": 50, "decision_agreement": 1.0, "disagreements": 0, "outputs_differing": 0}
        ]
        * 2,
    }
    record = {
        "when": "now",
        "command": "python bench/gpu_check.py",
        "environment": {"torch": "2.13"},
        "parts": {
            "vllm": {
                "vllm": "0.11",
                "tiny": compared,
                "tiny+lora": {"error": "ValueError: no LoRA for gpt2"},
                "smollm2-135m": compared,
                "smollm2-135m+lora": lora,
            },
            "llama8b": {
                "params": 8,
                "weights_gib": 15.0,
                "plan": {},
                "variants": [
                    {
                        "method": "ga",
                        "optimizer": "adamw",
                        "gradient_checkpointing": False,
                        "peak_gib": 70.1,
                        "step_s_median": 0.5,
                    },
                    {
                        "method": "ga",
                        "optimizer": "adamw8bit",
                        "gradient_checkpointing": False,
                        "skipped": "bitsandbytes is not installed",
                    },
                    {
                        "method": "npo",
                        "optimizer": "adamw",
                        "gradient_checkpointing": True,
                        "error": "OutOfMemoryError: x",
                    },
                ],
            },
            "evaluate": {"command": "dukb evaluate --device cuda", "rc": 0, "wall_s": 100.0},
        },
    }
    md = gc.summary_md(record)
    assert "| tiny | 100 | 0.9900 | 1 | 1 | 3 | 1 | 0 | 1.0 | 0.5 |" in md
    assert "| tiny+lora | error: ValueError: no LoRA for gpt2 |" in md
    assert md.count("| smollm2-135m+lora setting") == 2
    assert "| ga | adamw | False | 70.1 | 0.5 |" in md and "bitsandbytes is not installed" in md
    assert "OutOfMemoryError" in md and "## evaluate" in md and "## vllm" not in md


@pytest.mark.slow
def test_the_vllm_comparison_records_against_a_stand_in(gc, tmp_path, monkeypatch):
    """Part (a)'s comparison code end to end on the CPU, the engine replaced by the stand-in of
    tests/neural/test_vllm_backend.py answering with the HF path's own generations: full agreement, one engine;
    under LoRA one engine and one request per setting."""
    from dukb.kb import load_kb
    from dukb.neural.data import kb_qa, vocabulary_texts
    from dukb.neural.modelbuild import build_tiny_model
    from dukb.neural.pipeline import load_finetuned
    from dukb.neural.probe import Predictor
    from dukb.neural.spec import PROMPT_PRESETS
    from tests.neural.test_vllm_backend import _hf_generations, fake_vllm

    kb = load_kb("demo")
    lm = load_finetuned(
        build_tiny_model(vocabulary_texts(kb, PROMPT_PRESETS["tiny"]), tmp_path / "tiny", seed=0), device="cpu"
    )
    items = kb_qa(kb)[:24]
    fake_vllm(monkeypatch, _hf_generations(Predictor(lm.model, lm.tokenizer, lm.tags, device="cpu"), items))
    rec = gc.compare_backends(lm, items, tmp_path / "v")
    assert rec["items"] == 24 and rec["decision_agreement"] == 1.0 and rec["disagreements"] == 0
    assert rec["outputs_differing"] == 0 and rec["engines_built"] == 1 and rec["lora_requests"] == 0
    gap = gc.min_gap_ulps(lm, [1, 2, 3], [4, 5])
    assert gap is not None and gap >= 0 and gc.min_gap_ulps(lm, [1], []) is None
    lora = gc.compare_under_lora(lm, items, tmp_path / "l", settings=2, steps=1)
    assert lora["engines_built"] == 1 and lora["lora_requests"] == 2 and len(lora["settings"]) == 2
    assert "peft_config" not in vars(lm.model) and not hasattr(lm.model, "peft_config")  # LoRA removed after
    md = gc.summary_md(
        {"when": "now", "command": "x", "environment": {}, "parts": {"vllm": {"tiny": rec, "tiny+lora": lora}}}
    )
    assert "| tiny | 24 | 1.0000 | 0 | 0 | 0 | 1 | 0 |" in md and md.count("| tiny+lora setting") == 2
