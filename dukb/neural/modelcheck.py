"""Checks of a model folder (or GGUF file) before transformers reads it, so that a broken or hostile folder fails in
one line naming the file at fault (:class:`dukb.InputError`, exit 2), never a traceback, a hang or a silent guess.

What transformers opens in a local model folder is read here first, bounded:

- **Every file it will open is a regular file.** A FIFO, a device (a link to /dev/zero), a socket, a directory, a
  dangling link or a link loop at the name of such a file is refused. Symbolic links are followed and allowed when
  their final target is a regular file, wherever it lies: the files are only read, and the hub cache's snapshot
  folders are made of links into ``../../blobs/``. The files checked are :data:`JSON_FILES`, :data:`TEXT_FILES`,
  :data:`WEIGHT_FILES`, the shards a weights index names, the chat templates in ``additional_chat_templates/``, and
  every top-level entry whose name ends in one of :data:`MODEL_SUFFIXES`.
- **Bounded sizes.** JSON configs (:data:`JSON_FILES`) hold at most :data:`CONFIG_BYTES` (16 MiB) and
  must be JSON objects (nested at most as deep as Python's JSON parser allows); tokenizer data (:data:`TEXT_FILES`)
  at most :data:`dukb.kb.csvfile.MAX_INPUT_BYTES`, the limit of KB files. Weights are not size-bounded (their
  headers are checked by :func:`dukb.neural.models.load_model`).
- **Index entries stay inside the folder.** Each ``weight_map`` value of ``model.safetensors.index.json`` or
  ``pytorch_model.bin.index.json`` is a plain file name (no absolute path, no directory, no ``..``) of a regular
  file of the folder.
- **Config values in sane ranges** (:data:`CONFIG_RANGES`): layers 1..1024, attention heads 1..1024, hidden size
  1..131072, head dimension 1..16384, intermediate size 1..1048576, vocabulary 1..10,000,000, positions
  1..16,777,216, experts 0..4096; integers only (JSON ``null`` is left to transformers' default). Checked in
  config.json and in every sub-config it nests (``text_config``, ...), so a config of 100,000 layers is refused at
  once instead of hanging while the model is built. Weights far smaller than the config describes are refused by
  :func:`dukb.neural.models.load_model` from :func:`least_parameters`, without building the model.
- **Code is asked for only with ``--trust-remote-code``.** Without it, an ``auto_map`` or ``"trust_remote_code":
  true`` in any JSON config, a ``tokenizer_class`` (tokenizer_config.json or config.json) transformers does not
  have, or a model class in config.json's ``architectures`` transformers does not have, is refused in one line
  naming the file that asks for code. (transformers itself would ignore most of these silently and load something
  else.)
- **The tokenizer config is there and says something.** A folder without ``tokenizer_config.json`` is refused:
  transformers would guess the tokenizer's class and special tokens. One that names neither a tokenizer class nor a
  special token (``{}``), with no ``special_tokens_map.json`` beside it, is loaded with one warning line on stderr
  (the hub's own gpt2 folders are like this: transformers' defaults for the model type are right for them), and
  refused when the special tokens it then gets are not tokens of the model (:func:`check_loaded`).

A GGUF file is checked to be a regular file whose header has the GGUF magic, version 2 or 3, and at most
:data:`GGUF_MAX_COUNT` tensors and metadata entries, each of which lies inside the file (:func:`check_gguf`: a walk
over the metadata and the tensor index, no tensor read; a forged array length would make the ``gguf`` reader loop
for hours).

Only what exists on disk is checked: a hub id is downloaded and read by transformers as the hub serves it. The
checks and the loading are not atomic: a file swapped between them is read as transformers finds it.

Source: the formats as transformers and the GGUF specification define them (transformers: ``PretrainedConfig``,
``AutoTokenizer.from_pretrained``, sharded checkpoints' ``weight_map``; ggml docs/gguf.md: the file header).
"""

from __future__ import annotations

import json
import logging
import mmap
import os
import struct
import sys
from pathlib import Path

from dukb import InputError, one_line
from dukb.kb.csvfile import MAX_INPUT_BYTES, open_regular
from dukb.neural.run.files import read_json

log = logging.getLogger(__name__)

#: JSON configs transformers (or dukb) may read from a model folder: regular files of at most CONFIG_BYTES, objects
JSON_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "model.safetensors.index.json",
    "pytorch_model.bin.index.json",
    "adapter_config.json",
    "preprocessor_config.json",
    "processor_config.json",
    "video_preprocessor_config.json",
    "audio_tokenizer_config.json",
    "chat_template.json",
    "dukb_model.json",
    "dukb_tiny.json",
)
#: tokenizer data files: regular files of at most MAX_INPUT_BYTES (the KB files' limit); their content is the
#: tokenizer library's to judge
TEXT_FILES = (
    "tokenizer.json",
    "vocab.json",
    "merges.txt",
    "vocab.txt",
    "tokenizer.model",
    "spiece.model",
    "sentencepiece.bpe.model",
    "chat_template.jinja",
)
#: weights files: regular files (their headers are read by load_model)
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "adapter_model.safetensors", "adapter_model.bin")
#: any top-level entry whose name ends so must be a regular file (transformers may open it)
MODEL_SUFFIXES = (".json", ".safetensors", ".bin", ".model", ".tiktoken", ".jinja", ".gguf", ".py", ".txt")
#: how messages call the JSON files dukb itself reads (as dukb.neural.models does)
_WHAT = {"config.json": "model config", "dukb_model.json": "model record"}
#: largest JSON config read (bytes), as :data:`dukb.neural.modelrecord.JSON_LIMIT` for config.json
CONFIG_BYTES = 16 * 1024 * 1024
#: the weights indexes whose ``weight_map`` names the shards
INDEX_FILES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
#: the folder of extra chat templates transformers lists (``*.jinja``)
CHAT_TEMPLATE_DIR = "additional_chat_templates"
#: (config keys, smallest, largest, what) for the sizes a config.json may give (integers; null = the default)
CONFIG_RANGES = (
    (("n_layer", "num_hidden_layers", "num_layers", "n_layers"), 1, 1024, "number of layers"),
    (
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
        1,
        1024,
        "number of attention heads",
    ),
    (("n_embd", "hidden_size", "d_model", "n_embed", "embed_dim"), 1, 131072, "hidden size"),
    (("head_dim", "kv_channels"), 1, 16384, "head dimension"),
    (
        (
            "intermediate_size",
            "n_inner",
            "ffn_dim",
            "d_ff",
            "ffn_hidden_size",
            "moe_intermediate_size",
            "shared_expert_intermediate_size",
        ),
        1,
        1048576,
        "intermediate size",
    ),
    (("vocab_size", "padded_vocab_size"), 1, 10_000_000, "vocabulary size"),
    (
        ("max_position_embeddings", "n_positions", "n_ctx", "max_seq_len", "seq_length", "max_sequence_length"),
        1,
        16_777_216,
        "number of positions",
    ),
    (
        ("num_experts", "num_local_experts", "n_routed_experts", "num_experts_per_tok", "n_shared_experts"),
        0,
        4096,
        "number of experts",
    ),
)
_RANGE_OF = {key: (lo, hi, what) for keys, lo, hi, what in CONFIG_RANGES for key in keys}
#: nested objects of a config that are not sub-configs (their keys mean other things)
_NOT_SUBCONFIGS = frozenset(
    {
        "quantization_config",
        "rope_scaling",
        "rope_parameters",
        "auto_map",
        "id2label",
        "label2id",
        "task_specific_params",
    }
)
#: deepest nesting of sub-configs searched (transformers' composite configs nest two or three levels)
_MAX_NESTING = 16
#: keys of tokenizer_config.json that name its special tokens or class
_TOKENIZER_KEYS = (
    "tokenizer_class",
    "bos_token",
    "eos_token",
    "unk_token",
    "pad_token",
    "added_tokens_decoder",
    "additional_special_tokens",
    "extra_special_tokens",
)
#: largest tensor count and metadata-entry count a GGUF header may give
GGUF_MAX_COUNT = 1 << 20
_TRUST = "pass --trust-remote-code to allow it (only for a folder whose code you trust)"
#: warnings already printed, so that a model loaded several times by one run warns once
_WARNED: set[str] = set()


def check_model(value: str | os.PathLike, trust_remote_code: bool = False) -> list[str]:
    """Check what a ``--model`` value names before transformers reads it (see the module's rules).

    Args:
        value: the ``--model`` value: a model folder, a .gguf file, a folder holding .gguf files; anything that
            does not exist on disk (a short name, a hub id) is left to :func:`dukb.neural.zoo.resolve_model`.
        trust_remote_code: whether the user passed ``--trust-remote-code``.

    Returns:
        Warnings to show once the model has loaded (:func:`check_loaded`): one line each, the file named.

    Raises:
        InputError: (the file named, one line) a file transformers will open that is not a regular file (FIFO,
            device, socket, directory, dangling link, link loop) or is too large; a JSON config that is not UTF-8,
            not JSON, nested too deeply or not an object; an index entry that is not a plain file name of a
            regular file of the folder; an added_tokens.json id that is not an integer from 0; a config size out
            of its :data:`CONFIG_RANGES` range or not an integer;
            without ``trust_remote_code``, a config that asks for code; a missing tokenizer_config.json; a GGUF
            file that fails :func:`check_gguf`.
    """
    p = Path(os.path.expanduser(os.fspath(value)))
    if not os.path.lexists(p):
        return []
    if not p.is_dir():
        _regular(p, "model file")
        if p.suffix.lower() == ".gguf":
            check_gguf(p)
        return []
    if not os.path.lexists(p / "config.json"):  # a folder of GGUF files (or not a model: resolve_model says so)
        for f in _entries(p):
            if f.suffix.lower() == ".gguf":
                _regular(f, "GGUF file")
        return []
    return check_folder(p, trust_remote_code)


def check_folder(folder: Path, trust_remote_code: bool = False) -> list[str]:
    """Check an HF model folder (one with config.json) before transformers reads it (see the module's rules).

    Args:
        folder: the model folder.
        trust_remote_code: whether the user passed ``--trust-remote-code``.

    Returns:
        Warnings to show once the model has loaded (:func:`check_loaded`).

    Raises:
        InputError: as :func:`check_model`, naming the file.
    """

    configs: dict[str, dict] = {}
    for name in JSON_FILES:
        if os.path.lexists(folder / name):
            configs[name] = _json_object(folder / name)
    for name in INDEX_FILES:  # first, so that a bad shard is reported with the index entry that names it
        if name in configs:
            check_index(folder, name, configs[name])
    for name in TEXT_FILES:
        if os.path.lexists(folder / name):
            _regular(folder / name, "tokenizer file", MAX_INPUT_BYTES)
    for name in WEIGHT_FILES:
        if os.path.lexists(folder / name):
            _regular(folder / name, "weights file")
    for f in _entries(folder):
        if f.name.lower().endswith(MODEL_SUFFIXES):
            _regular(f, "model file")
    templates = folder / CHAT_TEMPLATE_DIR
    if os.path.lexists(templates):
        if not templates.is_dir():
            raise InputError("not a directory (transformers reads chat templates from it)", templates)
        for f in _entries(templates):
            _regular(f, "chat template", MAX_INPUT_BYTES)
    added = configs.get("added_tokens.json", {})
    bad = next((k for k, v in added.items() if isinstance(v, bool) or not isinstance(v, int) or v < 0), None)
    if bad is not None:
        raise InputError(
            f"added token {bad!r} has the id {json_text(added[bad])}: ids are integers from 0",
            folder / "added_tokens.json",
        )
    check_config(configs["config.json"], folder / "config.json")
    if not trust_remote_code:
        for name, obj in configs.items():
            check_no_code(obj, folder / name)
        check_classes(configs, folder)
    return _tokenizer_notes(folder, configs)


def _entries(folder: Path) -> list[Path]:
    try:
        return sorted(folder.iterdir())
    except OSError as e:
        raise InputError(f"cannot list the folder: {e.strerror or e}", folder) from None


def _regular(path: Path, what: str, limit: int | None = None) -> None:
    """Refuse ``path`` unless it is (or links to) a regular file of at most ``limit`` bytes (None: no bound): it
    is opened without blocking and checked (:func:`dukb.kb.csvfile.open_regular`), then closed unread."""

    try:
        open_regular(path, what, (1 << 62) if limit is None else limit).close()
    except InputError as e:
        if os.path.islink(path):
            target = os.path.realpath(path) if os.path.exists(path) else os.readlink(path)
            raise InputError(f"{e.message} (a link to {target})", path) from None
        raise


def _json_object(path: Path) -> dict:
    """A JSON config of the folder, read bounded (:func:`dukb.neural.run.files.read_json`, at most
    :data:`CONFIG_BYTES`), which must be a JSON object."""

    what = _WHAT.get(path.name, path.name)
    if os.path.islink(path) and not os.path.exists(path):
        raise InputError(f"a link to a missing file ({os.readlink(path)})", path)
    try:
        obj = read_json(path, what, limit=CONFIG_BYTES)
    except InputError as e:
        if os.path.islink(path) and "regular file" in e.message:
            raise InputError(f"{e.message} (a link to {os.path.realpath(path)})", path, e.line) from None
        if e.message.startswith("not JSON: "):
            raise InputError(f"{what} is not valid JSON: {e.message[10:]}", path, e.line) from None
        raise
    if not isinstance(obj, dict):
        raise InputError(f"{what} must be a JSON object, not {json_text(obj, 20)}", path)
    return obj


def check_index(folder: Path, name: str, index: dict) -> None:
    """Check a sharded checkpoint's index: its ``weight_map`` maps tensor names to plain file names of regular
    files in ``folder``.

    Args:
        folder: the model folder.
        name: the index's file name (``model.safetensors.index.json`` or ``pytorch_model.bin.index.json``).
        index: its JSON object.

    Raises:
        InputError: (the index named, with the entry) no ``weight_map`` object of strings; an entry that is empty,
            absolute, holds a directory part or ``..``, or names a missing file or one that is not a regular file.
    """
    path = folder / name
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise InputError("the index has no weight_map object of file names", path)
    for tensor, shard in weight_map.items():
        entry = f"entry {tensor!r}: {shard!r}"
        if not shard or os.path.isabs(shard) or "/" in shard or "\\" in shard or shard in (".", ".."):
            raise InputError(
                f"weight_map {entry} is not a plain file name in the model folder (no absolute path, "
                "directory or '..')",
                path,
            )
        f = folder / shard
        if not os.path.lexists(f):
            raise InputError(f"weight_map {entry} names a file that does not exist in the model folder", path)
        try:
            _regular(f, "weights shard")
        except InputError as e:
            raise InputError(f"weight_map {entry}: {e.message}", path) from None


def check_config(config: dict, path: Path) -> None:
    """Check the sizes a model config gives against :data:`CONFIG_RANGES`, in the config and every sub-config it
    nests (a JSON object under any key but :data:`_NOT_SUBCONFIGS`, to depth :data:`_MAX_NESTING`).

    Args:
        config: the JSON object of config.json.
        path: config.json, for messages.

    Raises:
        InputError: (config.json named) a size that is not an integer (a bool, float or string) or a list of
            integers, or is out of its range; the key (with its sub-config) and the range are named.
    """

    def walk(obj: dict, where: str, depth: int) -> None:
        for key, value in obj.items():
            if key in _RANGE_OF and value is not None:
                lo, hi, what = _RANGE_OF[key]
                values = value if isinstance(value, list) and value else [value]
                for v in values:
                    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi or len(values) > 4096:
                        shown = json_text(value)
                        raise InputError(
                            f"{where}{key} = {shown} is not a valid {what}: an integer from {lo:,} "
                            f"to {hi:,}{' (or a list of them)' if isinstance(value, list) else ''}",
                            path,
                        )
            elif isinstance(value, dict) and key not in _NOT_SUBCONFIGS and depth < _MAX_NESTING:
                walk(value, f"{where}{key}.", depth + 1)

    walk(config, "", 0)


def least_parameters(config: dict) -> int | None:
    """A lower bound on the number of parameters of the causal LM a config describes, computed from three sizes
    instead of building the model: ``layers * hidden_size**2 + vocab_size * hidden_size`` (every layer of a
    causal LM has a projection of at least hidden_size x hidden_size: attention's output, or a recurrent block's
    input projection; the input embeddings add vocab_size x hidden_size). Instant, where transformers' exact count
    on the meta device takes tens of seconds for a thousand layers.

    Args:
        config: a config as a dict (config.json's object, or ``PretrainedConfig.to_dict()``), with the sizes at its
            top level under any of their usual names (``n_layer``/``num_hidden_layers``/..., ``n_embd``/
            ``hidden_size``/``d_model``, ``vocab_size``).

    Returns:
        The bound, or None when one of the three sizes is missing or not an integer, or the config is quantized
        (``quantization_config``: its weights are packed).

    Raises:
        nothing.
    """
    if config.get("quantization_config") is not None:
        return None

    def first(*keys):
        return next(
            (config[k] for k in keys if isinstance(config.get(k), int) and not isinstance(config.get(k), bool)), None
        )

    layers = first("n_layer", "num_hidden_layers", "n_layers", "num_layers")
    hidden = first("n_embd", "hidden_size", "d_model")
    vocab = first("vocab_size")
    if None in (layers, hidden, vocab):
        return None
    return layers * hidden * hidden + vocab * hidden


def json_text(value, limit: int = 40) -> str:
    """``value`` as compact JSON, cut to ``limit`` characters, for a message."""

    try:
        text = json.dumps(value)
    except (ValueError, TypeError, RecursionError):  # pragma: no cover - JSON-parsed values always dump
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_no_code(config: dict, path: Path) -> None:
    """Refuse a JSON config that asks transformers to run the folder's own code: an ``auto_map`` (non-empty) or
    ``"trust_remote_code": true``, at its top level or in a nested object (to depth :data:`_MAX_NESTING`).

    Args:
        config: the JSON object.
        path: its file, for messages.

    Raises:
        InputError: (the file named) it asks for code; the message says to pass ``--trust-remote-code``.
    """

    def walk(obj: dict, where: str, depth: int) -> None:
        for key, value in obj.items():
            if key == "auto_map" and value:
                raise InputError(
                    f"the folder asks to run its own code ({where}auto_map = {json_text(value)}); " + _TRUST, path
                )
            if key == "trust_remote_code" and value is True:
                raise InputError(
                    f"the folder asks to run its own code ({where}trust_remote_code = true); " + _TRUST, path
                )
            if isinstance(value, dict) and depth < _MAX_NESTING:
                walk(value, f"{where}{key}.", depth + 1)

    walk(config, "", 0)


def check_classes(configs: dict[str, dict], folder: Path) -> None:
    """Refuse a tokenizer class or model class that transformers does not have (a custom class, which only the
    folder's own code could provide; transformers would silently load another class instead).

    Args:
        configs: the folder's JSON configs by file name (config.json at least).
        folder: the model folder.

    Raises:
        InputError: (the file named) ``tokenizer_class`` of tokenizer_config.json or config.json (or a sub-config)
            that transformers cannot find, with or without its "Fast" suffix; a class of config.json's
            ``architectures`` that transformers does not export; ``architectures`` that is not a list of strings.
    """
    tok = configs.get("tokenizer_config.json", {})
    cfg = configs["config.json"]
    for name, obj, where in (
        ("tokenizer_config.json", tok, ""),
        ("config.json", cfg, ""),
        ("config.json", cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}, "text_config."),
    ):
        cls = obj.get("tokenizer_class")
        if cls is None:
            continue
        if not isinstance(cls, str) or not _tokenizer_class_exists(cls):
            raise InputError(
                f"{where}tokenizer_class = {json_text(cls)} is not a tokenizer class of transformers "
                "(the folder's own code would provide it); " + _TRUST,
                folder / name,
            )
    archs = cfg.get("architectures")
    if archs is None:
        return
    if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
        raise InputError(f"architectures = {json_text(archs)} must be a list of class names", folder / "config.json")
    import transformers

    for a in archs:
        if not a.isidentifier() or not hasattr(transformers, a):
            raise InputError(
                f"architectures names the model class {a!r}, which transformers does not have (the "
                "folder's own code would provide it); " + _TRUST,
                folder / "config.json",
            )


def _tokenizer_class_exists(name: str) -> bool:
    """Whether transformers knows the tokenizer class ``name`` (as AutoTokenizer looks it up)."""
    if not name.isidentifier():
        return False
    try:
        from transformers.models.auto.tokenization_auto import tokenizer_class_from_name
    except ImportError:  # pragma: no cover - another transformers layout: its exported names
        import transformers

        return any(hasattr(transformers, n) for n in (name, name.removesuffix("Fast"), name + "Fast"))
    try:
        return any(tokenizer_class_from_name(n) is not None for n in (name, name.removesuffix("Fast")))
    except (ImportError, AttributeError, ValueError):  # a class whose module cannot be imported here
        return False


def _tokenizer_notes(folder: Path, configs: dict[str, dict]) -> list[str]:
    """Refuse a folder without tokenizer_config.json; a warning when it names no class and no special token."""
    path = folder / "tokenizer_config.json"
    if "tokenizer_config.json" not in configs:
        raise InputError(
            "missing: without tokenizer_config.json transformers guesses the tokenizer's class and "
            "special tokens (copy the model's tokenizer_config.json into the folder)",
            path,
        )
    tok = configs["tokenizer_config.json"]
    if any(tok.get(k) for k in _TOKENIZER_KEYS) or "special_tokens_map.json" in configs:
        return []
    return [
        f"{path}: names no tokenizer class and no special token, and there is no special_tokens_map.json; "
        f"transformers' defaults for model type {json_text(configs['config.json'].get('model_type'))} are used"
    ]


def check_loaded(tokenizer, model, folder: str | os.PathLike, notes: list[str]) -> None:
    """After loading: refuse special tokens that are not tokens of the model, then print ``notes`` (from
    :func:`check_model`) once each on stderr as ``dukb: warning: ...`` lines (and to the log).

    Args:
        tokenizer: the loaded tokenizer (``bos/eos/unk/pad_token_id`` attributes).
        model: the loaded model (``get_input_embeddings()``; skipped when it has none).
        folder: the model folder or GGUF file, for messages (tokenizer_config.json of a folder is named).
        notes: the warnings of :func:`check_model`.

    Raises:
        InputError: a special token whose id is negative or at least the number of rows of the model's input
            embeddings (the tokenizer does not belong to the model; the notes are part of the message, which names
            tokenizer_config.json).
    """
    try:
        rows = int(model.get_input_embeddings().weight.shape[0])
    except (AttributeError, TypeError, IndexError, NotImplementedError):
        rows = None
    if rows is not None:
        for kind in ("bos", "eos", "unk", "pad"):
            tid = getattr(tokenizer, f"{kind}_token_id", None)
            if isinstance(tid, int) and not 0 <= tid < rows:
                p = Path(folder)
                where = p / "tokenizer_config.json" if p.is_dir() else p
                why = f" ({notes[0].split(': ', 1)[1]})" if notes else ""  # the note without its path
                raise InputError(
                    f"the tokenizer's {kind} token {getattr(tokenizer, f'{kind}_token')!r} has id "
                    f"{tid}, which is not one of the model's {rows:,} token embeddings: the tokenizer "
                    f"does not belong to the model{why}",
                    where,
                )
    for note in notes:
        if note not in _WARNED:
            _WARNED.add(note)
            log.warning("%s", note)
            print("dukb: warning: " + one_line(note), file=sys.stderr, flush=True)


def check_gguf(path: Path) -> None:
    """Check a GGUF file's header and the layout of its metadata and tensor index, without reading a tensor: the
    magic ``GGUF``, version 2 or 3, tensor and metadata counts of at most :data:`GGUF_MAX_COUNT`, and every
    metadata value and tensor entry inside the file (a string, array or dimension count that reaches past the end
    of the file, which would make the ``gguf`` reader loop for hours or allocate without bound, is refused).

    Args:
        path: the .gguf file (a regular file; see :func:`check_model`).

    Raises:
        InputError: (the file named, one line "not a readable GGUF file (...)") not a regular file, shorter than
            its header, not a GGUF file, an unknown version, a count out of range, a value type that GGUF does
            not define, a string, array or tensor entry past the end of the file, more than
            :data:`GGUF_MAX_DIMS` dimensions, or unreadable.

    Source: ggml docs/gguf.md (header: uint32 magic, uint32 version, uint64 tensor_count, uint64
    metadata_kv_count; metadata: string key, uint32 value type, value; tensor info: string name, uint32 n_dims,
    uint64 dims, uint32 type, uint64 offset; little-endian).
    """

    with open_regular(path, "GGUF file", 1 << 62) as fh:
        try:
            size = os.fstat(fh.fileno()).st_size
            buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        except (OSError, ValueError) as e:
            raise InputError(f"cannot read the GGUF file: {getattr(e, 'strerror', None) or e}", path) from None
    try:
        problem = _gguf_problem(buf)
    finally:
        if isinstance(buf, mmap.mmap):
            buf.close()
    if problem:
        raise InputError(
            f"not a readable GGUF file ({problem}); the file may be truncated or corrupt: fetch it again", path
        )


#: most dimensions a GGUF tensor may have (ggml's GGML_MAX_DIMS is 4)
GGUF_MAX_DIMS = 8
#: byte size of each fixed-size GGUF metadata value type (8 is a string, 9 an array)
_GGUF_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


class _Past(Exception):
    """A GGUF field reaches past the end of the file."""


def _gguf_problem(buf) -> str | None:
    """What is wrong with the GGUF bytes ``buf`` (see :func:`check_gguf`), or None."""
    if len(buf) < 24:
        return f"{len(buf)} bytes, shorter than its 24-byte header"
    if buf[:4] != b"GGUF":
        return f"it starts with {bytes(buf[:4])!r}, not b'GGUF'"
    version, tensors, entries = struct.unpack_from("<IQQ", buf, 4)
    if version not in (2, 3):
        return f"GGUF version {version}; versions 2 and 3 are read"
    if max(tensors, entries) > GGUF_MAX_COUNT:
        return (
            f"its header claims {tensors:,} tensors and {entries:,} metadata entries, more than the "
            f"{GGUF_MAX_COUNT:,} allowed"
        )
    end = len(buf)

    def take(at: int, n: int) -> int:
        if n < 0 or at + n > end:
            raise _Past
        return at + n

    def string(at: int) -> int:
        (n,) = struct.unpack_from("<Q", buf, take(at, 8) - 8)
        return take(at + 8, n)

    def value(at: int, kind: int, depth: int = 0) -> int:
        if kind in _GGUF_SIZES:
            return take(at, _GGUF_SIZES[kind])
        if kind == 8:
            return string(at)
        if kind != 9 or depth > 2:
            raise ValueError(f"metadata value type {kind} is not a GGUF type")
        item, count = struct.unpack_from("<IQ", buf, take(at, 12) - 12)
        at += 12
        if item in _GGUF_SIZES:  # fixed-size items: skipped at once, their total bounded by the file
            return take(at, count * _GGUF_SIZES[item])
        take(at, count * 8)  # every string or array item takes at least 8 bytes: the loop below is bounded
        for _ in range(count):
            at = value(at, item, depth + 1)
        return at

    at = 24
    try:
        for _ in range(entries):
            at = string(at)
            (kind,) = struct.unpack_from("<I", buf, take(at, 4) - 4)
            at = value(at + 4, kind)
        for _ in range(tensors):
            at = string(at)
            (dims,) = struct.unpack_from("<I", buf, take(at, 4) - 4)
            if dims > GGUF_MAX_DIMS:
                return f"a tensor with {dims:,} dimensions, more than {GGUF_MAX_DIMS}"
            at = take(at + 4, dims * 8 + 12)
    except _Past:
        return f"a metadata value or tensor entry reaches past the end of the file at byte {at:,}"
    except ValueError as e:
        return str(e)
    return None


__all__ = [
    "CONFIG_RANGES",
    "GGUF_MAX_COUNT",
    "GGUF_MAX_DIMS",
    "JSON_FILES",
    "MODEL_SUFFIXES",
    "TEXT_FILES",
    "WEIGHT_FILES",
    "check_classes",
    "check_config",
    "check_folder",
    "check_gguf",
    "check_index",
    "check_loaded",
    "check_model",
    "check_no_code",
    "json_text",
    "least_parameters",
]
