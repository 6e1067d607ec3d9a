"""A damaged or hostile model folder (or GGUF file) fails in one line naming the file, exit 2, within seconds and
before transformers reads it (dukb.neural.modelcheck): files that are FIFOs, devices, directories or too large;
configs of impossible sizes; index entries outside the folder; a folder that asks for code without
--trust-remote-code; a missing or empty tokenizer config. An intact folder and a hub-style folder of links still
load."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("torch")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st
from test_model_files import _edit_config, _fifo, _one_error_line, _write, tiny_dir  # noqa: E402,F401

from conftest import DEVICE  # noqa: E402
from dukb import InputError  # noqa: E402
from dukb.cli.main import main  # noqa: E402
from dukb.neural import modelcheck  # noqa: E402

#: seconds a refusal may take (the checks run before any model is built; generous for a loaded test machine)
QUICK = 90.0


def _zero(name):
    def make(d):
        (d / name).unlink(missing_ok=True)
        os.symlink("/dev/zero", d / name)

    return make


def _directory(name):
    def make(d):
        (d / name).unlink(missing_ok=True)
        (d / name).mkdir()

    return make


def _oversized(name):
    def make(d):
        with open(d / name, "w") as fh:
            fh.write("{}" + " " * modelcheck.CONFIG_BYTES)

    return make


def _edit_tokenizer_config(**changes):
    f = "tokenizer_config.json"
    return lambda d: (d / f).write_text(json.dumps({**json.loads((d / f).read_text()), **changes}))


def _sharded(target):
    """The weights moved to a shard; the index's entry for one tensor names ``target`` (a str, or a callable of the
    folder giving it)."""

    def make(d):
        shard = "model-00001-of-00001.safetensors"
        (d / "model.safetensors").rename(d / shard)
        name = target(d) if callable(target) else target
        (d / "model.safetensors.index.json").write_text(
            json.dumps(
                {"metadata": {}, "weight_map": {"transformer.wte.weight": name, "transformer.h.0.ln_1.weight": shard}}
            )
        )

    return make


def _shard_is(make_shard):
    def make(d):
        _sharded("shard.safetensors")(d)
        make_shard(d / "shard.safetensors")

    return make


def _remove(name):
    def make(d):
        (d / name).unlink()

    return make


_SPECIAL = ("tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "generation_config.json")
_ASKS = "asks to run its own code"
# (case, how to damage the folder, the file the error names, text of the message)
DAMAGED = (
    [(f"{n} is a FIFO", _fifo(n), n, "not a regular file (a FIFO)") for n in _SPECIAL + ("tokenizer.json",)]
    + [(f"{n} links to /dev/zero", _zero(n), n, "(a link to /dev/zero)") for n in _SPECIAL + ("tokenizer.json",)]
    + [(f"{n} is a directory", _directory(n), n, "not a regular file (a directory)") for n in _SPECIAL]
    + [(f"{n} is oversized", _oversized(n), n, "too large") for n in _SPECIAL]
    + [
        ("negative layers", _edit_config(n_layer=-1), "config.json", "n_layer = -1"),
        ("100,000 layers", _edit_config(n_layer=100_000), "config.json", "n_layer = 100000"),
        ("layers as a float", _edit_config(n_layer=2.0), "config.json", "n_layer = 2.0"),
        ("layers as a bool", _edit_config(n_layer=True), "config.json", "n_layer = true"),
        ("no heads", _edit_config(n_head=0), "config.json", "n_head = 0"),
        ("negative hidden size", _edit_config(n_embd=-128), "config.json", "n_embd = -128"),
        ("huge vocabulary", _edit_config(vocab_size=10**12), "config.json", "vocab_size = 1000000000000"),
        ("huge intermediate size", _edit_config(n_inner=2**40), "config.json", "n_inner = 1099511627776"),
        ("huge positions", _edit_config(n_positions=2**40), "config.json", "n_positions"),
        (
            "nested sub-config",
            _edit_config(text_config={"num_hidden_layers": 10**6}),
            "config.json",
            "text_config.num_hidden_layers",
        ),
        (
            "1,024 layers for tiny weights",
            _edit_config(n_layer=1024),
            "model.safetensors",
            "describes a model of at least 16,786,176 parameters",
        ),
        ("index names /etc/passwd", _sharded("/etc/passwd"), "model.safetensors.index.json", "'/etc/passwd'"),
        ("index names /dev/zero", _sharded("/dev/zero"), "model.safetensors.index.json", "'/dev/zero'"),
        (
            "index names an absolute path",
            _sharded(lambda d: str(d / "model-00001-of-00001.safetensors")),
            "model.safetensors.index.json",
            "not a plain file name",
        ),
        ("index names ..", _sharded("../model.safetensors"), "model.safetensors.index.json", "'..'"),
        (
            "index names a subfolder",
            _sharded("sub/model.safetensors"),
            "model.safetensors.index.json",
            "not a plain file name",
        ),
        (
            "index names a missing file",
            _sharded("nope.safetensors"),
            "model.safetensors.index.json",
            "'nope.safetensors' names a file that does not exist",
        ),
        ("index shard is a FIFO", _shard_is(os.mkfifo), "model.safetensors.index.json", "a FIFO"),
        (
            "index shard links to /dev/zero",
            _shard_is(lambda p: os.symlink("/dev/zero", p)),
            "model.safetensors.index.json",
            "a link to /dev/zero",
        ),
        ("auto_map in config.json", _edit_config(auto_map={"AutoConfig": "mine.Config"}), "config.json", _ASKS),
        ("trust_remote_code in config.json", _edit_config(trust_remote_code=True), "config.json", _ASKS),
        (
            "auto_map in tokenizer_config.json",
            _edit_tokenizer_config(auto_map={"AutoTokenizer": ["mine.T", None]}),
            "tokenizer_config.json",
            "auto_map",
        ),
        (
            "auto_map in generation_config.json",
            _write("generation_config.json", '{"auto_map": {"x": "m.X"}}'),
            "generation_config.json",
            _ASKS,
        ),
        (
            "custom tokenizer_class",
            _edit_tokenizer_config(tokenizer_class="MineTokenizer"),
            "tokenizer_config.json",
            'tokenizer_class = "MineTokenizer"',
        ),
        (
            "custom tokenizer_class in config.json",
            _edit_config(tokenizer_class="MineTokenizerFast"),
            "config.json",
            "--trust-remote-code",
        ),
        ("custom model class", _edit_config(architectures=["MineForCausalLM"]), "config.json", "'MineForCausalLM'"),
        ("no tokenizer_config.json", _remove("tokenizer_config.json"), "tokenizer_config.json", "missing"),
        (
            "empty tokenizer_config.json",
            _write("tokenizer_config.json", "{}"),
            "tokenizer_config.json",
            "does not belong to the model (names no tokenizer class and no special token",
        ),
        (
            "tokenizer_config.json nested deeply",
            _write("tokenizer_config.json", "[" * 100_000),
            "tokenizer_config.json",
            "nested too deeply",
        ),
        (
            "special_tokens_map.json a list",
            _write("special_tokens_map.json", "[1]"),
            "special_tokens_map.json",
            "must be a JSON object",
        ),
        (
            "added_tokens.json id a string",
            _write("added_tokens.json", '{"x": "y"}'),
            "added_tokens.json",
            "added token 'x'",
        ),
        (
            "chat templates not a folder",
            _write("additional_chat_templates", "x"),
            "additional_chat_templates",
            "not a directory",
        ),
        ("a .safetensors FIFO", _fifo("extra.safetensors"), "extra.safetensors", "a FIFO"),
    ]
)


def _probe(d: Path, *extra: str) -> list[str]:
    return ["probe", "--kb", "demo", "--model", str(d), "--device", DEVICE, "--scores", "none", *extra]


def _refusal(model: Path, capsys) -> str:
    """The one error line of `dukb probe --model MODEL`, checked to come with exit 2, nothing on stdout and within
    :data:`QUICK` seconds."""
    start = time.monotonic()
    rc = main(_probe(model))
    took = time.monotonic() - start
    out, err = capsys.readouterr()
    assert (rc, out) == (2, ""), err
    assert took < QUICK, took
    return _one_error_line(err)


@pytest.mark.parametrize("case,damage,names,says", DAMAGED, ids=[c[0] for c in DAMAGED])
def test_a_damaged_folder_is_refused_in_one_line_naming_the_file(tiny_dir, tmp_path, capsys, case, damage, names, says):
    d = tmp_path / "m"
    shutil.copytree(tiny_dir, d)
    damage(d)
    line = _refusal(d, capsys)
    assert line.startswith(f"dukb: error: {d / names}: ") and says in line, line


def test_a_folder_asking_for_code_passes_the_check_with_the_flag(tiny_dir, tmp_path, capsys):
    """--trust-remote-code lifts the refusal: a model class transformers lacks is then only a name (transformers
    loads the model of config.json's model_type) and the probe runs."""
    d = tmp_path / "m"
    shutil.copytree(tiny_dir, d)
    _edit_config(architectures=["MineForCausalLM"])(d)
    assert main(_probe(d)) == 2
    assert "--trust-remote-code" in _one_error_line(capsys.readouterr().err)
    assert main(_probe(d, "--trust-remote-code")) == 0, capsys.readouterr().err
    assert modelcheck.check_model(d, trust_remote_code=True) == []
    _edit_config(auto_map={"AutoConfig": "mine.Config"})(d)
    with pytest.raises(InputError, match=_ASKS):
        modelcheck.check_model(d)
    assert modelcheck.check_model(d, trust_remote_code=True) == []


def test_the_intact_folder_loads(tiny_dir, tmp_path, capsys):
    d = tmp_path / "m"
    shutil.copytree(tiny_dir, d)
    assert modelcheck.check_model(d) == []
    assert main(_probe(d)) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("known: qa "), err


def _hub_style(src: Path, root: Path) -> Path:
    """``src`` laid out as the hub cache lays out a model: snapshots/REV/FILE are relative links to blobs/SHA."""
    blobs, snap = root / "blobs", root / "snapshots" / "0123abc"
    blobs.mkdir(parents=True)
    snap.mkdir(parents=True)
    for f in sorted(src.iterdir()):
        sha = hashlib.sha256(f.read_bytes()).hexdigest()
        shutil.copyfile(f, blobs / sha)
        os.symlink(Path("..", "..", "blobs", sha), snap / f.name)
    return snap


def test_a_hub_style_folder_of_links_loads(tiny_dir, tmp_path, capsys):
    """Links whose targets are regular files (here outside the snapshot folder) are allowed: the hub cache is made
    of them. A dangling link is refused, naming it."""
    snap = _hub_style(tiny_dir, tmp_path / "models--org--tiny")
    assert all(p.is_symlink() for p in snap.iterdir())
    assert main(_probe(snap)) == 0, capsys.readouterr().err
    capsys.readouterr()
    blob = (snap / "generation_config.json").resolve()
    blob.unlink()
    line = _refusal(snap, capsys)
    assert line.startswith(f"dukb: error: {snap / 'generation_config.json'}: a link to a missing file (../../"), line


def test_an_empty_tokenizer_config_that_fits_the_model_loads_with_one_warning(tmp_path, capsys):
    """check_loaded: special tokens inside the model's embeddings -> the notes are printed once each as one
    ``dukb: warning:`` line; a special token outside them -> one InputError naming tokenizer_config.json."""
    (tmp_path / "tokenizer_config.json").write_text("{}")
    note = f"{tmp_path / 'tokenizer_config.json'}: names no tokenizer class and no special token"
    emb = SimpleNamespace(weight=SimpleNamespace(shape=(50,)))
    model = SimpleNamespace(get_input_embeddings=lambda: emb)
    fits = SimpleNamespace(bos_token_id=0, eos_token_id=49, unk_token_id=None, pad_token_id=None, eos_token="e")
    for _ in range(2):
        modelcheck.check_loaded(fits, model, tmp_path, [note])
    assert capsys.readouterr().err == f"dukb: warning: {note}\n"
    outside = SimpleNamespace(bos_token_id=0, eos_token_id=50, eos_token="<|endoftext|>")
    with pytest.raises(InputError) as e:
        modelcheck.check_loaded(outside, model, tmp_path, [note])
    msg = str(e.value)
    assert msg.startswith(f"{tmp_path / 'tokenizer_config.json'}: the tokenizer's eos token '<|endoftext|>' has id 50")
    assert "names no tokenizer class" in msg and "\n" not in msg
    assert capsys.readouterr().err == ""


def _gguf_header(magic=b"GGUF", version=3, tensors=1, entries=1) -> bytes:
    import struct

    return magic + struct.pack("<IQQ", version, tensors, entries)


GGUF_DAMAGED = [
    ("FIFO", lambda p: os.mkfifo(p), "not a regular file (a FIFO)"),
    ("link to /dev/zero", lambda p: os.symlink("/dev/zero", p), "a link to /dev/zero"),
    ("empty", lambda p: p.write_bytes(b""), "not a readable GGUF file (0 bytes, shorter than its 24-byte header)"),
    ("not GGUF", lambda p: p.write_bytes(b"PK\x03\x04" + bytes(40)), "not a readable GGUF file (it starts with"),
    ("version 7", lambda p: p.write_bytes(_gguf_header(version=7)), "(GGUF version 7;"),
    ("2**60 tensors", lambda p: p.write_bytes(_gguf_header(tensors=2**60)), "claims 1,152,921,504,606,846,976 tensors"),
    (
        "2**40 metadata entries",
        lambda p: p.write_bytes(_gguf_header(entries=2**40)),
        "and 1,099,511,627,776 metadata entries",
    ),
]


@pytest.mark.parametrize("case,make,says", GGUF_DAMAGED, ids=[c[0] for c in GGUF_DAMAGED])
def test_a_damaged_gguf_file_is_one_line(tmp_path, capsys, case, make, says):
    p = tmp_path / "model.gguf"
    make(p)
    line = _refusal(p, capsys)
    assert line.startswith(f"dukb: error: {p}: ") and says in line, line


# ---- property test: every config size against its documented range ----

#: the documented ranges (the module's docstring), written out independently of modelcheck.CONFIG_RANGES
DOCUMENTED = {
    **dict.fromkeys(("n_layer", "num_hidden_layers", "num_layers", "n_layers"), (1, 1024)),
    **dict.fromkeys(
        (
            "n_head",
            "num_attention_heads",
            "num_key_value_heads",
            "n_heads",
            "num_heads",
            "num_kv_heads",
            "multi_query_group_num",
            "n_head_kv",
        ),
        (1, 1024),
    ),
    **dict.fromkeys(("n_embd", "hidden_size", "d_model", "n_embed", "embed_dim"), (1, 131072)),
    **dict.fromkeys(("head_dim", "kv_channels"), (1, 16384)),
    **dict.fromkeys(
        (
            "intermediate_size",
            "n_inner",
            "ffn_dim",
            "d_ff",
            "ffn_hidden_size",
            "moe_intermediate_size",
            "shared_expert_intermediate_size",
        ),
        (1, 1048576),
    ),
    **dict.fromkeys(("vocab_size", "padded_vocab_size"), (1, 10_000_000)),
    **dict.fromkeys(
        ("max_position_embeddings", "n_positions", "n_ctx", "max_seq_len", "seq_length", "max_sequence_length"),
        (1, 16_777_216),
    ),
    **dict.fromkeys(
        ("num_experts", "num_local_experts", "n_routed_experts", "num_experts_per_tok", "n_shared_experts"), (0, 4096)
    ),
}
_SIZE_KEYS = sorted(DOCUMENTED)


def test_the_checked_keys_are_the_documented_ones_with_their_bounds():
    assert sorted(k for keys, *_ in modelcheck.CONFIG_RANGES for k in keys) == _SIZE_KEYS
    for key, (lo, hi) in DOCUMENTED.items():
        for v in (lo, hi, [lo, hi]):
            modelcheck.check_config({key: v}, Path("config.json"))
        for v in (lo - 1, hi + 1, [lo, hi + 1]):
            with pytest.raises(InputError, match=f"^config.json: {key} = .* an integer from {lo:,} to {hi:,}"):
                modelcheck.check_config({key: v}, Path("config.json"))


_BOUNDS = sorted({b + e for lo, hi in DOCUMENTED.values() for b in (lo, hi) for e in (-1, 0, 1)})
_VALUES = st.one_of(
    st.integers(-(2**70), 2**70),
    st.integers(-2, 1100),
    st.sampled_from(_BOUNDS),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
    st.lists(st.integers(-3, 2000), max_size=4),
)


def _valid(key, value) -> bool:
    lo, hi = DOCUMENTED[key]

    def ok(v):
        return isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi

    if value is None:
        return True
    if isinstance(value, list):
        return bool(value) and all(ok(v) for v in value)
    return ok(value)


@settings(max_examples=300, deadline=None)
@given(key=st.sampled_from(_SIZE_KEYS), value=_VALUES, nested=st.booleans())
def test_config_sizes_are_refused_exactly_outside_their_range(key, value, nested):
    config = {"model_type": "gpt2", key: value}
    if nested:
        config = {"model_type": "x", "text_config": config}
    path = Path("m/config.json")
    if _valid(key, value):
        modelcheck.check_config(config, path)
        return
    with pytest.raises(InputError) as e:
        modelcheck.check_config(config, path)
    msg = str(e.value)
    assert msg.startswith(f"{path}: {'text_config.' if nested else ''}{key} = ") and "\n" not in msg
    assert "an integer from" in msg


_SMALL_TOKENIZER_CONFIG = json.dumps({"tokenizer_class": "TokenizersBackend", "eos_token": "[EOS]"})


@settings(max_examples=60, deadline=None)
@given(key=st.sampled_from(_SIZE_KEYS), value=_VALUES)
def test_a_folder_is_refused_exactly_when_its_config_json_holds_a_size_out_of_range(key, value):
    """The same rule through the files: a folder whose config.json holds the drawn value (and no weights, so that
    nothing but the sizes is judged) passes check_model or is refused in one line naming config.json."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "config.json").write_text(json.dumps({"model_type": "gpt2", key: value}))
        (d / "tokenizer_config.json").write_text(_SMALL_TOKENIZER_CONFIG)
        if _valid(key, value):
            assert modelcheck.check_model(d) == []
            return
        with pytest.raises(InputError) as e:
            modelcheck.check_model(d)
        assert str(e.value).startswith(f"{d / 'config.json'}: {key} = ") and "\n" not in str(e.value)


def test_evaluate_refuses_a_damaged_folder_before_it_creates_the_run(tiny_dir, tmp_path, capsys):
    d = tmp_path / "m"
    shutil.copytree(tiny_dir, d)
    _edit_config(n_layer=100_000)(d)
    run = tmp_path / "run"
    assert main(["evaluate", "--kb", "demo", "--model", str(d), "--device", DEVICE, "-o", str(run)]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith(f"dukb: error: {d / 'config.json'}: n_layer = 100000 is not a valid number of layers")
    assert not run.exists()


def _written_gguf(path: Path, tokens: int = 50_000) -> Path:
    """A GGUF file written by the ``gguf`` package: metadata of every kind (strings, ints, floats, a bool, arrays
    of strings, ints and floats) and two tensors."""
    gguf = pytest.importorskip("gguf")
    import numpy as np

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("written")
    w.add_context_length(64)
    w.add_float32("x.scale", 0.5)
    w.add_bool("x.flag", True)
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"t{i}" for i in range(tokens)])
    w.add_token_types([1] * tokens)
    w.add_token_scores([0.0] * tokens)
    w.add_tensor("token_embd.weight", np.zeros((8, 4), dtype=np.float32))
    w.add_tensor("output_norm.weight", np.ones(4, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _forged_array(path: Path, item_type: int, count: int) -> Path:
    """A GGUF header with one metadata array that claims ``count`` items of ``item_type`` but holds none (the
    ``gguf`` reader loops over such a count for hours)."""
    import struct

    def text(s: str) -> bytes:
        return struct.pack("<Q", len(s)) + s.encode()

    path.write_bytes(
        _gguf_header(tensors=0, entries=2)
        + text("general.architecture")
        + struct.pack("<I", 8)
        + text("llama")
        + text("x.big")
        + struct.pack("<IIQ", 9, item_type, count)
    )
    return path


def test_a_gguf_file_written_by_the_gguf_package_passes_and_forged_counts_do_not(tmp_path, capsys):
    good = _written_gguf(tmp_path / "good.gguf")
    start = time.monotonic()
    modelcheck.check_gguf(good)
    assert time.monotonic() - start < QUICK
    for item_type, name in ((0, "bytes"), (8, "strings"), (9, "arrays")):
        forged = _forged_array(tmp_path / f"forged-{name}.gguf", item_type, 2**40)
        line = _refusal(forged, capsys)
        assert line.startswith(
            f"dukb: error: {forged}: not a readable GGUF file (a metadata value or tensor entry "
            "reaches past the end of the file"
        ), line
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(good.read_bytes()[:5000])  # the token list cut short
    assert "reaches past the end of the file" in _refusal(cut, capsys)
