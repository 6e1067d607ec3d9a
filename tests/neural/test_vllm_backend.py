"""--probe-backend vllm on the CPU: the refusals (no vllm package, no CUDA device), the run identity, and the vLLM
backend's request shaping against a stand-in ``vllm`` module injected into sys.modules (the real engine needs a GPU:
bench/gpu_check.py compares its decisions with the HF path's there).

The stand-in records every call and answers each prompt with the HF path's own generated ids for that prompt, so
the backend's outputs and decisions must equal the HF path's: same prompts (token ids), same budget, the same
post-processing and answer-line rule, and each output mapped back to its item.
"""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

from dukb.cli.main import main


# ------------------------------------------------------------------------------------------ the stand-in ----------
class _Calls:
    """What the stand-in saw: engines (their folder's files and keyword arguments) and generate calls."""

    def __init__(self):
        self.engines: list[dict] = []
        self.generates: list[dict] = []


def fake_vllm(monkeypatch, canned: dict) -> _Calls:
    """Inject a stand-in ``vllm`` (LLM, SamplingParams, LoRARequest) answering each prompt's token ids with
    ``canned[tuple(ids)]`` (a list of generated ids). For this test only."""
    calls = _Calls()

    class SamplingParams:
        def __init__(self, **kw):
            self.kw = kw

    class LoRARequest:
        def __init__(self, name, int_id, path):
            self.name, self.int_id, self.path = name, int_id, path

    class LLM:
        def __init__(self, model, **kw):
            folder = Path(model)
            weights = {}
            for f in folder.glob("*.safetensors"):
                from safetensors import safe_open

                with safe_open(str(f), "pt") as fh:
                    weights.update({k: None for k in fh.keys()})  # noqa: SIM118 (safe_open has no __iter__)
            calls.engines.append(
                {
                    "model": model,
                    "files": sorted(p.name for p in folder.iterdir()),
                    "keys": sorted(weights),
                    "kw": kw,
                    "config": json.loads((folder / "config.json").read_text()),
                }
            )

        def generate(self, prompts, params, lora_request=None, use_tqdm=True):
            adapter = None
            if lora_request is not None:  # the adapter's files must be there when the engine reads them
                adapter = sorted(p.name for p in Path(lora_request.path).iterdir())
            calls.generates.append(
                {
                    "prompts": [list(p["prompt_token_ids"]) for p in prompts],
                    "params": params.kw,
                    "lora": None if lora_request is None else (lora_request.name, lora_request.int_id),
                    "adapter_files": adapter,
                    "engine": len(calls.engines) - 1,
                }
            )
            return [
                types.SimpleNamespace(
                    outputs=[types.SimpleNamespace(token_ids=canned[tuple(p["prompt_token_ids"])], text="")]
                )
                for p in prompts
            ]

    vllm = types.ModuleType("vllm")
    vllm.LLM, vllm.SamplingParams = LLM, SamplingParams
    lora = types.ModuleType("vllm.lora")
    request = types.ModuleType("vllm.lora.request")
    request.LoRARequest = LoRARequest
    vllm.lora, lora.request = lora, request
    for name, mod in (("vllm", vllm), ("vllm.lora", lora), ("vllm.lora.request", request)):
        monkeypatch.setitem(sys.modules, name, mod)
    return calls


# ------------------------------------------------------------------------------------------------ refusals --------
def _one_line(err: str, *fragments: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dukb: error:"), err
    for f in fragments:
        assert f in lines[0], err


@pytest.mark.parametrize("protocol", ["evaluate", "control"])
def test_vllm_without_the_package_is_refused_before_any_training(protocol, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # not importable, whatever this environment holds
    run = tmp_path / "run"
    assert main([protocol, "--probe-backend", "vllm", "-o", str(run)]) == 2
    _one_line(capsys.readouterr().err, "--probe-backend vllm", "install dukb[vllm]")
    assert not (run / "finetuned").exists() and not (run / "config.json").exists()


def test_vllm_without_a_cuda_device_is_refused(tmp_path, capsys, monkeypatch):
    fake_vllm(monkeypatch, {})
    assert main(["evaluate", "--probe-backend", "vllm", "--device", "cpu", "-o", str(tmp_path / "a")]) == 2
    _one_line(capsys.readouterr().err, "needs a CUDA device", "--device cpu")
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["muse", "--probe-backend", "vllm", "-o", str(tmp_path / "b")]) == 2
    _one_line(capsys.readouterr().err, "needs a CUDA device", "torch reports none")
    assert main(["evaluate", "--probe-backend", "sglang", "-o", str(tmp_path / "c")]) == 2
    _one_line(capsys.readouterr().err, "unknown --probe-backend 'sglang'")
    assert not any((tmp_path / d).exists() for d in "abc")


def test_vllm_refusal_in_a_child_process(tmp_path):
    """The installed command (no vllm in this environment, or no GPU): exit 2, one line, no traceback."""
    code = "import sys; sys.modules['vllm'] = None; from dukb.cli.main import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.run(
        [sys.executable, "-c", code, "evaluate", "--probe-backend", "vllm", "-o", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    _one_line(proc.stderr, "install dukb[vllm]")


def test_restor_keeps_its_sampled_probes_on_hf(monkeypatch):
    from dukb import InputError
    from dukb.neural.probe_backends import check_probe_backend
    from dukb.neural.restor.config import RestorConfig

    fake_vllm(monkeypatch, {})
    monkeypatch.setattr("dukb.neural.runconfig.RunConfig.check_run", lambda self: None)
    with pytest.raises(InputError, match="restor samples"):
        RestorConfig(kb="demo", probe_backend="vllm", methods=["ga"]).check()
    check_probe_backend("hf", "cpu")  # hf: never refused


def test_the_backend_enters_the_identity_only_when_not_hf():
    from dukb.neural.protocols.evaluate.config import EvaluateConfig
    from dukb.neural.protocols.evaluate.identity import component_identity
    from dukb.neural.runconfig import RunConfig

    assert RunConfig().backend_identity() == {} and "probe_backend" not in component_identity(EvaluateConfig())
    assert RunConfig(probe_backend="vllm").backend_identity() == {"probe_backend": "vllm"}
    assert component_identity(EvaluateConfig(probe_backend="vllm"))["probe_backend"] == "vllm"
    # the finetuned model does not depend on it (finetuning's stopping probe stays on hf)
    assert RunConfig(probe_backend="vllm").model_identity() == {}


def test_lora_rank_buckets():
    from dukb import InputError
    from dukb.neural.probe_backends import lora_rank_bucket

    assert [lora_rank_bucket(r) for r in (1, 8, 9, 64, 65, 512)] == [8, 8, 16, 64, 128, 512]
    with pytest.raises(InputError, match="up to 512"):
        lora_rank_bucket(513)


# ------------------------------------------------------------------------------------ the backend's requests --------
@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory):
    """A tiny model finetuned on a small generated KB, and that KB's qa and cloze probe items."""
    from dukb.kb import load_kb, save_kb
    from dukb.kb.generate import generate
    from dukb.neural.data import kb_qa
    from dukb.neural.pipeline import finetune_kb, load_finetuned
    from dukb.neural.spec import ModelSpec

    kb, _ = generate(24, seed=3)
    kb = load_kb(save_kb(kb, tmp_path_factory.mktemp("kb") / "kb"))
    out = tmp_path_factory.mktemp("ft") / "model"
    finetune_kb(kb, ModelSpec("tiny", prompt="tiny", device="cpu"), out, seed=0)
    return load_finetuned(out, device="cpu"), kb_qa(kb, ("qa", "cloze"))


def _hf_generations(pred, items, n=10, *, run_on=False) -> dict:
    """The HF path's generated ids for each item's prompt (EOS appended where it stopped early), keyed by the
    prompt's token ids: what a vLLM engine with the same weights returns. ``run_on``: instead of stopping, a
    non-blank continuation runs on into a second line holding the item's answer (``"\n husband"``), which only the answer-line
    rule keeps from being credited."""
    from dukb.neural.probe import greedy_generate, prompt_token_ids

    tok = pred.tokenizer
    prompts = [pred.tags.prompt(it.question) for it in items]
    outs = greedy_generate(pred, prompts, n, details=True)
    tails = [
        tok("\n " + it.answer, add_special_tokens=False)["input_ids"]
        if run_on and tok.decode(o["ids"], skip_special_tokens=True).strip()
        else [tok.eos_token_id]
        for it, o in zip(items, outs)
    ]
    return {tuple(ids): o["ids"] + tail for ids, o, tail in zip(prompt_token_ids(pred, prompts), outs, tails)}


@pytest.mark.slow
@pytest.mark.parametrize("judge_line", [True, False])
def test_decisions_equal_the_hf_path_and_requests_are_shaped(tiny_lm, tmp_path, monkeypatch, judge_line):
    from dukb.neural.probe import Predictor, probe, use_backend
    from dukb.neural.vllm_backend import VllmBackend

    lm, items = tiny_lm
    pred = Predictor(lm.model, lm.tokenizer, lm.tags, device=lm.device)
    calls = fake_vllm(monkeypatch, _hf_generations(pred, items, run_on=judge_line))
    hf = probe(pred, items, rouge=False, logprob=False, stop_at_newline=judge_line)
    backend = VllmBackend(tmp_path / "work")
    with use_backend(backend):
        got = probe(pred, items, rouge=False, logprob=False, stop_at_newline=judge_line, batch_size=7)
    assert list(got["output"]) == list(hf["output"]) and list(got["known"]) == list(hf["known"])
    assert 0 < int(hf["known"].sum()) < len(items)  # both decisions occur (the comparison can fail)
    if judge_line:  # without the answer-line cut the second line would credit every item
        assert not hf["known"].all() and all("\n" not in o for o in got["output"])
    # one engine, one generate call for every prompt (not the HF path's batches), greedy with the HF budget
    assert len(calls.engines) == 1 and len(calls.generates) == 1
    g = calls.generates[0]
    assert g["params"] == {"temperature": 0, "max_tokens": 10} and g["lora"] is None
    want = [lm.tokenizer(lm.tags.prompt(it.question), add_special_tokens=False)["input_ids"] for it in items]
    assert sorted(g["prompts"]) == sorted(want)  # the HF path's prompt strings, tokenised as it does
    e = calls.engines[0]
    assert e["kw"]["dtype"] == "float32" and e["kw"]["enforce_eager"] and "enable_lora" not in e["kw"]
    assert "config.json" in e["files"] and e["keys"] and not any("lora_" in k for k in e["keys"])
    # the same weights again: the engine is reused; changed weights: a new engine from the saved new weights
    with use_backend(backend):
        probe(pred, items[:3], rouge=False, logprob=False)
        assert len(calls.engines) == 1
        import torch

        with torch.no_grad():
            p = next(lm.model.parameters())
            p.add_(1e-3)
            try:
                probe(pred, items[:3], rouge=False, logprob=False)
            finally:
                p.sub_(1e-3)
        assert len(calls.engines) == 2 and calls.generates[-1]["engine"] == 1
    backend.close()
    assert not (tmp_path / "work").exists()


@pytest.mark.slow
def test_lora_settings_share_one_engine_with_distinct_request_ids(tiny_lm, tmp_path, monkeypatch):
    """Under --lora-r the engine holds the frozen base (no LoRA tensors) and each probe passes the current adapter
    as its own LoRARequest: a new id per setting, never reused; the adapter's files exist when the engine reads
    them and are removed after."""
    import torch

    from dukb.neural.methods.base import WeightState
    from dukb.neural.probe import Predictor, probe, use_backend
    from dukb.neural.spec import LoraSpec
    from dukb.neural.vllm_backend import VllmBackend

    lm, items = tiny_lm
    base_pred = Predictor(lm.model, lm.tokenizer, lm.tags, device=lm.device)
    calls = fake_vllm(monkeypatch, _hf_generations(base_pred, items))
    backend = VllmBackend(tmp_path / "work", lora_rank=4)
    with use_backend(backend):
        # the model before unlearning (plain weights): the engine is built with LoRA for the run's rank, and serves
        # it without a request
        probe(base_pred, items[:4], rouge=False, logprob=False)
    state = WeightState(lm, LoraSpec(4, 8, 0.0, None), seed=0)
    try:
        with use_backend(backend):
            for step in range(3):  # three "settings": the adapter changes between probes
                with torch.no_grad():
                    for name, p in state.peft.named_parameters():
                        if "lora_B" in name:
                            p.add_(0.01 * (step + 1))
                pred = Predictor(state.model, lm.tokenizer, lm.tags, device=lm.device)
                df = probe(pred, items[:5], rouge=False, logprob=False)
                assert len(df) == 5
        assert calls.generates[0]["lora"] is None and calls.generates[0]["adapter_files"] is None
        ids = [g["lora"][1] for g in calls.generates[1:]]
        names = [g["lora"][0] for g in calls.generates[1:]]
        assert len(calls.engines) == 1 and len(set(ids)) == 3 and len(set(names)) == 3 and min(ids) > 0
        e = calls.engines[0]
        assert e["kw"]["enable_lora"] and e["kw"]["max_lora_rank"] == 8 and e["kw"]["max_loras"] == 1
        assert e["kw"]["enforce_eager"] and e["kw"]["gpu_memory_utilization"] == 0.3
        assert e["keys"] and not any("lora_" in k or "base_layer" in k for k in e["keys"])
        assert all("adapter_config.json" in g["adapter_files"] for g in calls.generates[1:])
        assert not list((tmp_path / "work").glob("*"))  # adapters removed after their request, the base after loading
        assert e["config"]["model_type"] == lm.model.config.model_type
        backend.close()
    finally:
        state.close()


@pytest.mark.slow
def test_hf_only_and_two_model_predictors_stay_on_hf(tiny_lm, tmp_path, monkeypatch):
    from dukb.neural.probe import Predictor, probe, use_backend
    from dukb.neural.vllm_backend import VllmBackend, probe_backend

    lm, items = tiny_lm
    calls = fake_vllm(monkeypatch, {})
    with use_backend(VllmBackend(tmp_path / "w")):
        probe(
            Predictor(lm.model, lm.tokenizer, lm.tags, device=lm.device, hf_only=True),
            items[:2],
            rouge=False,
            logprob=False,
        )
        probe(
            Predictor(lm.model, lm.tokenizer, lm.tags, device=lm.device, aux_model=lm.model, combine=lambda a, b: a),
            items[:2],
            rouge=False,
            logprob=False,
        )
    assert calls.engines == [] and calls.generates == []
    # the run's context: a work folder under RUN_DIR/.dukb while it lasts, none after; hf sets nothing
    with probe_backend("vllm", tmp_path / "run") as b:
        assert b.work.parent == tmp_path / "run" / ".dukb" and b.work.is_dir()
    assert not b.work.exists()
    with probe_backend("hf", tmp_path / "run2") as none:
        assert none is None and not (tmp_path / "run2").exists()
