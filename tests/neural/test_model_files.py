"""Broken model files fail in one line naming the file (exit 2, no traceback, no library warnings on stderr), a
Rust panic of the tokenizers library included; library warnings go to Python logging; probing uses transformers'
Cache API (no FutureWarning or DeprecationWarning)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from conftest import DEVICE, REPO_ROOT  # noqa: E402
from dukb import InputError  # noqa: E402
from dukb.cli.main import main  # noqa: E402
from dukb.neural import modelbuild, modelrecord, models  # noqa: E402

REPO = REPO_ROOT


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    """The tiny model of the demo KB (random weights), saved as an HF directory."""
    from dukb.kb import load_kb
    from dukb.neural.data import vocabulary_texts
    from dukb.neural.spec import PROMPT_PRESETS

    out = tmp_path_factory.mktemp("tiny") / "model"
    return modelbuild.build_tiny_model(vocabulary_texts(load_kb("demo"), PROMPT_PRESETS["tiny"]), out)


def _truncate(d):
    p = d / "model.safetensors"
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


def _random_weights(d):
    (d / "model.safetensors").write_bytes(os.urandom(4096))


def _pickle_with_objects(d):
    import argparse

    (d / "model.safetensors").unlink()
    torch.save({"weights": argparse.Namespace(x=1)}, d / "pytorch_model.bin")


def _pickle_without_tensors(d):
    (d / "model.safetensors").unlink()
    torch.save({"a": torch.zeros(2)}, d / "pytorch_model.bin")


def _edit_config(**changes):
    def edit(d):
        cfg = json.loads((d / "config.json").read_text())
        cfg.update(changes)
        (d / "config.json").write_text(json.dumps(cfg))

    return edit


def _write(name, text):
    def write(d):
        (d / name).write_text(text)

    return write


def _fifo(name):
    def make(d):
        (d / name).unlink(missing_ok=True)
        os.mkfifo(d / name)

    return make


# (case, how to break the directory, the file the error names, text of the message)
BROKEN = [
    ("truncated safetensors", _truncate, "model.safetensors", "not a readable safetensors file"),
    ("random safetensors", _random_weights, "model.safetensors", "not a readable safetensors file"),
    ("pickle refused by weights_only", _pickle_with_objects, "pytorch_model.bin", "weights_only"),
    ("pickle lacking the tensors", _pickle_without_tensors, "pytorch_model.bin", "lacks"),
    ("config is a list", _write("config.json", "[1, 2]"), "config.json", "must be a JSON object"),
    ("config is not JSON", _write("config.json", "{nope"), "config.json:1", "not valid JSON"),
    ("config field of the wrong type", _edit_config(vocab_size="abc"), "config.json", "vocab_size"),
    (
        "config of another model",
        _edit_config(
            model_type="llama",
            hidden_size=256,
            intermediate_size=512,
            num_hidden_layers=4,
            num_attention_heads=4,
            vocab_size=32000,
        ),
        "model.safetensors",
        "do not belong together",
    ),
    ("config of other sizes", _edit_config(n_embd=64), "model.safetensors", "wrong shape"),
    ("record is not JSON", _write("dukb_model.json", "{nope"), "dukb_model.json:1", "model record"),
    ("record is a list", _write("dukb_model.json", "[]"), "dukb_model.json", "must be a JSON object"),
    ("record field of the wrong type", _write("dukb_model.json", '{"prompt": 3}'), "dukb_model.json", "'prompt'"),
    ("record is a FIFO", _fifo("dukb_model.json"), "dukb_model.json", ""),
    ("config is a FIFO", _fifo("config.json"), "config.json", ""),
    ("tokenizer is junk", _write("tokenizer.json", '{"model": 1}'), "tokenizer.json", "cannot load the tokenizer"),
]


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("dukb: error: "), err
    for word in ("Traceback", "Warning", "warn", "[transformers]", "Loading weights"):
        assert word not in lines[0], err
    return lines[0]


@pytest.mark.parametrize("case,breaks,names,says", BROKEN, ids=[b[0] for b in BROKEN])
def test_a_broken_model_file_is_one_line_naming_it(tiny_dir, tmp_path, capsys, case, breaks, names, says):
    d = tmp_path / "m"
    shutil.copytree(tiny_dir, d)
    breaks(d)
    rc = main(["probe", "--kb", "demo", "--model", str(d), "--device", DEVICE, "--scores", "none"])
    out, err = capsys.readouterr()
    assert rc == 2, (out, err)
    line = _one_error_line(err)
    assert line.startswith(f"dukb: error: {d / names}"), line
    assert says in line, line
    assert out == ""


def test_the_intact_model_probes_without_any_library_output(tiny_dir, tmp_path, capsys):
    d = tmp_path / "m"
    shutil.copytree(tiny_dir, d)
    (d / "dukb_model.json").write_text(json.dumps({"prompt": "tiny", "family": "tiny", "base": "tiny"}))
    assert main(["probe", "--kb", "demo", "--model", str(d), "--device", DEVICE, "-o", str(tmp_path / "p.csv")]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("known: qa "), err
    assert modelrecord.read_model_record(d)["prompt"] == "tiny"
    assert modelrecord.read_model_record(tmp_path / "no-such-dir") is None


def _panicking_gguf(path: Path) -> Path:
    """A llama GGUF whose BPE tokenizer section lists a token twice and merges it: the tokenizers library
    panics (Rust ``range end index ... out of range``) while building it."""
    gguf = pytest.importorskip("gguf")
    import numpy as np

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("crafted")
    w.add_tokenizer_model("gpt2")
    w.add_token_list(["a", "b", "a"])
    w.add_token_types([1, 1, 1])
    w.add_token_merges(["a b"])
    w.add_tensor("token_embd.weight", np.zeros((3, 4), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_a_crafted_gguf_tokenizer_panic_is_one_line(tmp_path):
    """In a fresh process: the Rust panic (a BaseException) becomes one line naming the file, exit 2; the panic
    message the Rust runtime writes to stderr goes to the log, not the terminal."""
    path = _panicking_gguf(tmp_path / "crafted.gguf")
    env = dict(os.environ, OMP_NUM_THREADS="1", RUST_BACKTRACE="1")
    res = subprocess.run(
        [sys.executable, "-m", "dukb.cli.main", "probe", "--kb", "demo", "--model", str(path), "--device", DEVICE],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert res.returncode == 2, res.stderr
    line = _one_error_line(res.stderr)
    assert line.startswith(f"dukb: error: {path}: cannot load the tokenizer of this GGUF file"), line
    assert "panicked" not in res.stderr and res.stdout == ""


class PanicException(BaseException):
    """Stands in for pyo3_runtime.PanicException (a BaseException subclass)."""


def test_a_panic_in_any_loading_step_is_an_input_error(tiny_dir, monkeypatch):
    spec = modelrecord.spec_for_path(str(tiny_dir), device=DEVICE)

    def panic(*a, **k):
        raise PanicException("called `Option::unwrap()` on a `None` value\nmore")

    for step, names in (
        ("_auto_config", "config.json"),
        ("_auto_tokenizer", "tokenizer.json"),
        ("_auto_model", "model.safetensors"),
    ):
        with monkeypatch.context() as m:
            m.setattr(models, step, panic)
            with pytest.raises(InputError) as e:
                models.load_model(spec)
        assert str(e.value).startswith(f"{tiny_dir / names}: ") and "PanicException: called" in str(e.value)
        assert "\n" not in str(e.value)
    for stop in (KeyboardInterrupt, SystemExit):  # never swallowed

        def interrupt(*a, stop=stop, **k):
            raise stop()

        with monkeypatch.context() as m:
            m.setattr(models, "_auto_model", interrupt)
            with pytest.raises(stop):
                models.load_model(spec)


def test_probe_emits_no_future_or_deprecation_warning(tiny_dir):
    from dukb.kb import load_kb
    from dukb.neural.data import kb_qa
    from dukb.neural.probe import Predictor, cache_argument, probe

    lm = models.load_model(modelrecord.spec_for_path(str(tiny_dir), device=DEVICE))
    items = kb_qa(load_kb("demo"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        df = probe(Predictor(lm.model, lm.tokenizer, lm.tags, device=DEVICE), items, batch_size=8)
    assert len(df) == len(items)
    import inspect

    if "cache" in inspect.signature(type(lm.model).forward).parameters:
        assert cache_argument(lm.model) == "cache"


def test_batched_generation_with_the_cache_equals_hf_generate(tiny_dir):
    """The random tiny model runs on for all 10 tokens: batched, left-padded decoding with DynamicCache gives
    exactly what one-prompt HF generate gives."""
    from dukb.kb import load_kb
    from dukb.neural.data import kb_qa
    from dukb.neural.probe import Predictor, greedy_generate

    lm = models.load_model(modelrecord.spec_for_path(str(tiny_dir), device=DEVICE))
    prompts = [lm.tags.prompt(it.question) for it in kb_qa(load_kb("demo"))[:6]]
    tok = lm.tokenizer
    got = greedy_generate(Predictor(lm.model, tok, lm.tags, device=DEVICE), prompts, 10, details=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for p, g in zip(prompts, got):
            enc = tok(p, return_tensors="pt", add_special_tokens=False)
            ref = lm.model.generate(
                **enc, max_new_tokens=10, do_sample=False, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id
            )[0, enc["input_ids"].shape[1] :].tolist()
            ref = ref[: ref.index(tok.eos_token_id)] if tok.eos_token_id in ref else ref
            assert g["ids"] == [t for t in ref if t != tok.pad_token_id]


def test_library_warnings_go_to_logging_not_stderr(tiny_dir, capsys, caplog):
    import logging

    models.load_model(modelrecord.spec_for_path(str(tiny_dir), device=DEVICE))  # quiets the libraries
    from transformers.utils import logging as tlog

    capsys.readouterr()
    with caplog.at_level(logging.WARNING):
        tlog.get_logger("transformers.dukb_test").warning("a transformers warning")
    assert capsys.readouterr().err == ""
    assert any("a transformers warning" in r.getMessage() for r in caplog.records)
    # warnings.warn goes to the py.warnings logger (pytest records warnings itself, so this is checked directly)
    assert logging._warnings_showwarning is not None
    assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger("py.warnings").handlers)


def test_tiny_without_weights_is_refused_at_once_not_sent_to_a_hub(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # no folder named tiny here
    from dukb.neural.zoo import resolve_model

    with pytest.raises(InputError, match="exists only finetuned on a KB"):
        resolve_model("tiny")
    assert main(["probe", "--kb", "demo", "--model", "tiny", "--device", DEVICE]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "dukb finetune" in err[0]
    (tmp_path / "tiny").mkdir()  # an existing folder of that name is a path like any other
    assert resolve_model("tiny").path == "tiny"
