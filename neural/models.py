"""Loading HF causal LMs, and the built-in default "tiny" model.

The tiny default is a GPT-2-architecture causal LM created from a config (no download), with a word-level tokenizer
built from the KB's own text (tokenizers library: WordLevel model, Metaspace + punctuation pre-tokenizers so that
decoding restores the exact text). It is saved with ``save_pretrained`` (safetensors) and then loaded like any other
model directory, so every later code path is the one a real model takes.
"""

from __future__ import annotations

import json
import logging
import struct
from dataclasses import dataclass
from pathlib import Path

from dukb import InputError
from dukb.neural.spec import ModelSpec, PromptTags

log = logging.getLogger(__name__)

TINY_CONFIG = dict(n_layer=2, n_head=4, n_embd=128, n_positions=96)
SPECIALS = {"unk": "[UNK]", "pad": "[PAD]", "eos": "[EOS]"}


def resolve_device(device: str = "auto") -> str:
    """"auto" -> "cuda" when available, else "cpu"; other values pass through. Under a multi-process launch
    "cuda" becomes ``cuda:LOCAL_RANK`` (:func:`dukb.neural.distributed.process_device`).

    Args:
        device: "auto", "cpu", "cuda", "cuda:N" or any other torch device string (e.g. "mps", passed through
            unchecked).

    Returns:
        The torch device string this process uses, e.g. "cpu", "cuda", "cuda:1".

    Raises:
        InputError: cuda requested but not available; "cuda:N" under a multi-process launch.
    """
    import torch

    from dukb.neural.distributed import process_device

    if device == "auto":
        return process_device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise InputError(f"device {device!r} requested but CUDA is not available")
    return process_device(device)


def resolve_dtype(dtype: str, device: str):
    """torch dtype for a spec: "auto" = bf16 on CUDA devices that support it, else fp32.

    Args:
        dtype: "auto", "float32"/"fp32", "bfloat16"/"bf16" or "float16"/"fp16" (:attr:`ModelSpec.dtype`).
        device: the resolved device string (:func:`resolve_device`); only read for "auto".

    Returns:
        ``torch.float32``, ``torch.bfloat16`` or ``torch.float16``.

    Raises:
        InputError: unknown dtype name.
    """
    import torch

    if dtype == "auto":
        if device.startswith("cuda") and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    table = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
             "float16": torch.float16, "fp16": torch.float16}
    if dtype not in table:
        raise InputError(f"unknown dtype {dtype!r} (choose auto, float32, bfloat16, float16)")
    return table[dtype]


def build_tokenizer(texts: list[str]):
    """A word-level fast tokenizer whose vocabulary is every word and punctuation mark of ``texts``.

    Args:
        texts: the KB's QA texts (questions, answers, prompt tags).

    Returns:
        A ``transformers.PreTrainedTokenizerFast`` with [UNK], [PAD] and [EOS]; decoding restores spacing exactly.

    Raises:
        nothing for a list of str.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token=SPECIALS["unk"]))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never"),
        pre_tokenizers.Split("\n", behavior="isolated"),
        pre_tokenizers.Punctuation(behavior="isolated"),
        pre_tokenizers.Digits(individual_digits=False),
    ])
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="never")
    trainer = trainers.WordLevelTrainer(special_tokens=list(SPECIALS.values()), min_frequency=1)
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token=SPECIALS["unk"], pad_token=SPECIALS["pad"],
                                   eos_token=SPECIALS["eos"], bos_token=SPECIALS["eos"], padding_side="left")


def build_tiny_model(texts: list[str], out_dir: str | Path, seed: int = 0, config: dict | None = None) -> Path:
    """Create the tiny default model for a KB and save it as an HF model directory.

    Args:
        texts: every text the model will see (from :func:`dukb.neural.data.vocabulary_texts`).
        out_dir: where to save (config.json, model.safetensors, tokenizer files, dukb_tiny.json).
        seed: torch seed for the random initialisation.
        config: overrides of :data:`TINY_CONFIG` (n_layer, n_head, n_embd, n_positions).

    Returns:
        The directory (``Path(out_dir)``).

    Raises:
        OSError: ``out_dir`` cannot be created or written.
    """
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(texts)
    cfg = dict(TINY_CONFIG, **(config or {}))
    torch.manual_seed(seed)
    gcfg = GPT2Config(vocab_size=len(tokenizer), bos_token_id=tokenizer.eos_token_id,
                      eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
                      resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, **cfg)
    model = GPT2LMHeadModel(gcfg)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    # written by every process, not through model.save_pretrained: under a multi-process launch transformers saves
    # on rank 0 only, and each process builds the (identical, seeded) tiny model in its own temporary directory
    from safetensors.torch import save_model

    gcfg.save_pretrained(out)
    model.generation_config.save_pretrained(out)
    save_model(model, str(out / "model.safetensors"))
    tokenizer.save_pretrained(out)
    (out / "dukb_tiny.json").write_text(json.dumps({"seed": seed, "config": cfg, "vocab": len(tokenizer),
                                                    "prompt": "tiny"}, indent=2))
    return out


@dataclass
class LoadedModel:
    """A model, its tokenizer and how to prompt it.

    Attributes:
        model: a ``transformers`` causal LM (possibly a peft model), in eval mode on ``device``.
        tokenizer: its tokenizer, left padding, with a pad token.
        tags: the :class:`PromptTags`.
        spec: the :class:`ModelSpec` it came from.
        device: resolved device string.
    """

    model: object
    tokenizer: object
    tags: PromptTags
    spec: ModelSpec
    device: str


def _gguf_supported() -> str:
    """" (llama, mistral, ...)": the architectures transformers dequantizes from GGUF, for error messages ("" when
    this transformers does not expose the list). transformers also accepts a few renamed forms (e.g. qwen3moe for
    qwen3_moe), so the list is shown, never used to refuse a file."""
    try:
        from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES
    except ImportError:
        return ""
    return " (" + ", ".join(a for a in GGUF_SUPPORTED_ARCHITECTURES if a not in ("general", "tokenizer")) + ")"


def load_model(spec: ModelSpec) -> LoadedModel:
    """Load a causal LM and tokenizer from a hub id, a local directory, a GGUF file or a known short name.

    ``spec.name_or_path`` is resolved by :func:`dukb.neural.zoo.resolve_model`. A GGUF file (or a folder holding
    one, or a short name such as ``smollm2-135m``) is dequantized by transformers to ``spec.dtype`` (auto: fp32 on
    CPU, bf16 on CUDA) and its own tokenizer is used; the loaded model is an ordinary float model (no quantization
    config), so :func:`save_model` writes an ordinary HF directory. The tokenizer gets left padding (for batched
    generation) and a pad token (eos if it has none). Nothing is downloaded when the path is local;
    ``trust_remote_code`` stays as the spec says.

    Args:
        spec: the :class:`ModelSpec`: ``name_or_path`` (hub id, model directory, .gguf file, folder with one .gguf
            file, or a :data:`dukb.neural.zoo.KNOWN_MODELS` short name; not "tiny", which the caller builds first),
            ``dtype``, ``device``, ``prompt``, ``trust_remote_code``, ``gradient_checkpointing``. ``spec.lora`` only
            enables input gradients under gradient checkpointing: the adapters are attached by the caller
            (:class:`dukb.neural.methods.base.WeightState`).

    Returns:
        :class:`LoadedModel`: the model in eval mode on the resolved device in the resolved dtype, its tokenizer
        (left padding, a pad token), ``spec.tags``, the spec and the device string.

    Raises:
        InputError: the model cannot be found or loaded (message from transformers); a GGUF file of an architecture
            transformers cannot load (its architecture named), or one that is truncated or not a GGUF file, or the
            ``gguf`` package is missing (:func:`dukb.neural.zoo.gguf_architecture`); a short name that is not cached, a folder with several GGUF files, a
            non-GGUF model file, a value that can only be a path naming nothing that exists
            (:func:`dukb.neural.zoo.resolve_model`); CUDA requested
            but unavailable, or "cuda:N" under a multi-process launch (:func:`resolve_device`); an unknown dtype
            (:func:`resolve_dtype`); an unknown prompt preset name (:attr:`ModelSpec.tags`, checked after loading).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from dukb.neural.zoo import resolve_model

    device = resolve_device(spec.device)
    dtype = resolve_dtype(spec.dtype, device)
    where = resolve_model(spec.name_or_path)
    path, extra = where.path, ({"gguf_file": where.gguf_file} if where.gguf_file else {})
    if not Path(path).exists():
        log.info("loading %s from the hub (or the local HF cache)", path)
    arch = None
    if where.gguf_file:  # a truncated or foreign file is refused here, naming the file
        from dukb.neural.zoo import gguf_architecture

        arch = gguf_architecture(where.file)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=spec.trust_remote_code, **extra)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, trust_remote_code=spec.trust_remote_code,
                                                     **extra)
    except (OSError, ValueError, ImportError, KeyError, RuntimeError, IndexError, struct.error) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if where.gguf_file:
            raise InputError(f"transformers cannot load this GGUF file of architecture {arch!r} ({first}); "
                             "transformers dequantizes GGUF files of the architectures it lists in "
                             f"GGUF_SUPPORTED_ARCHITECTURES{_gguf_supported()}; convert other models to an HF "
                             "directory", where.file) from None
        raise InputError(f"cannot load model: {first}", path) from None
    if where.gguf_file:  # dequantized: a plain float model from here on (saved without a quantization config)
        for obj in (model.config, getattr(model, "generation_config", None)):
            if obj is not None and hasattr(obj, "quantization_config"):
                delattr(obj, "quantization_config")
        model.hf_quantizer = None
        model.is_quantized = False
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if getattr(model.generation_config, "pad_token_id", None) is None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.to(device)
    model.eval()
    if spec.gradient_checkpointing:
        # non-reentrant checkpointing: safe under DDP (multi-process finetuning) and with frozen inputs (LoRA)
        kwargs = {"use_reentrant": False}
        if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5
            model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
        if spec.lora is not None:
            model.enable_input_require_grads()
    return LoadedModel(model, tokenizer, spec.tags, spec, device)


def spec_for_path(path: str | Path, **kw) -> ModelSpec:
    """A :class:`ModelSpec` for a model directory, GGUF file, short name or hub id, choosing the prompt preset and
    the preset family.

    Prompt: "tiny" for a dukb tiny model directory (it has dukb_tiny.json); the one recorded in a directory dukb
    saved (dukb_model.json); the known model's or GGUF family's; else by name (:func:`dukb.neural.spec.preset_for`).
    Family: recorded, else :func:`dukb.neural.zoo.model_family` of the name, else the prompt preset's name.

    Args:
        path: a model directory (a dukb tiny one, one dukb saved with :data:`MODEL_RECORD`, or any HF directory), a
            .gguf file, a folder with one .gguf file, a :data:`dukb.neural.zoo.KNOWN_MODELS` short name or a hub id.
        **kw: further :class:`ModelSpec` fields (``dtype``, ``device``, ``lora``, ``trust_remote_code``,
            ``gradient_checkpointing``, ``extra``); ``prompt`` and ``family``, when given (not None or empty),
            override the choices above.

    Returns:
        A :class:`ModelSpec` with ``name_or_path=str(path)``, the chosen ``prompt`` ("generic" when none is found)
        and ``family`` (None: :attr:`ModelSpec.preset_family` then falls back to the prompt preset's name). The
        prompt name is not validated here (:attr:`ModelSpec.tags` does that).

    Raises:
        InputError: (only when ``path`` is neither a tiny nor a recorded directory,
            :func:`dukb.neural.zoo.resolve_model`) a short name that is not cached, a folder with several GGUF
            files, a model file that is not a .gguf file, a value that can only be a path naming nothing that
            exists.
        TypeError: a keyword that is not a :class:`ModelSpec` field.
    """
    from dukb.neural.spec import preset_for
    from dukb.neural.zoo import resolve_model

    p = Path(path)
    rec = read_model_record(p)
    prompt = kw.pop("prompt", None)
    family = kw.pop("family", None)
    if (p / "dukb_tiny.json").exists():
        prompt, family = prompt or "tiny", family or "tiny"
    elif rec:
        prompt, family = prompt or rec.get("prompt"), family or rec.get("family")
    else:
        where = resolve_model(str(path))
        prompt = prompt or where.prompt or preset_for(str(path))
        family = family or (where.family if where.family != "generic" else None)
    return ModelSpec(str(path), prompt=prompt or "generic", family=family, **kw)


#: the record dukb writes into every model directory it saves: prompt preset and preset family
MODEL_RECORD = "dukb_model.json"


def read_model_record(model_dir: str | Path) -> dict | None:
    """The ``dukb_model.json`` record (prompt, family, base) of a directory dukb saved, or None.

    Args:
        model_dir: a model directory (any path; a file or a missing path has no record).

    Returns:
        The record as written by :func:`save_model`: ``{"prompt": PRESET, "family": FAMILY, "base": "tiny" or
        NAME_OR_PATH}``; None when there is no :data:`MODEL_RECORD` file, or it cannot be read, is not JSON, or is not
        a JSON object.

    Raises:
        nothing: an unreadable or malformed record reads as None.
    """
    f = Path(model_dir) / MODEL_RECORD
    try:
        rec = json.loads(f.read_text()) if f.is_file() else None
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) else None


#: dukb's own records in a model directory: not part of the model, left out of its fingerprint
RECORD_FILES = frozenset({"finetune.json", "train.json", MODEL_RECORD})


def model_fingerprint(name_or_path: str | Path) -> dict:
    """What identifies a model's weights and tokenizer, for run identities and cache keys.

    Args:
        name_or_path: a local model directory, a model file (GGUF), a known short name (its cached file), or a hub
            id.

    Returns:
        ``{"sha256": HEX}`` for a local directory (over the names and SHA-256 of every file at its top level except
        dukb's records :data:`RECORD_FILES`) or file (its bytes); ``{"hub_id": ID}`` for a name that is not a local
        path (its revision is whatever the hub or HF cache serves). The path itself is not part of it: a moved
        model keeps its fingerprint.

    Raises:
        InputError: a file of the model cannot be read.
    """
    from dukb.neural.runs import sha256_file, sha256_json
    from dukb.neural.zoo import KNOWN_MODELS

    p = Path(name_or_path)
    if str(name_or_path).lower() in KNOWN_MODELS and not p.exists():  # its pinned bytes, cached or not
        return {"sha256": KNOWN_MODELS[str(name_or_path).lower()].sha256}
    if p.is_file():
        return {"sha256": sha256_file(p)}
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.is_file() and f.name not in RECORD_FILES
                       and not f.name.startswith("."))
        return {"sha256": sha256_json([[f.name, sha256_file(f)] for f in files])}
    return {"hub_id": str(name_or_path)}


def save_model(lm: LoadedModel, out_dir: str | Path) -> Path:
    """Save model (merged, if it carries LoRA adapters) and tokenizer as an HF directory (safetensors), with
    :data:`MODEL_RECORD` (prompt preset, preset family, base model) so a later load picks the same presets.

    A tiny model's ``dukb_tiny.json`` is copied along. The LoRA merge is peft's ``merge_and_unload``, which
    replaces the adapter layers of the wrapped model in place: afterwards ``lm.model`` holds the merged weights and
    no adapters.

    Args:
        lm: the :class:`LoadedModel` (a plain or a peft model); ``lm.spec`` gives the recorded prompt preset (custom
            :class:`PromptTags` are recorded as "generic"), :attr:`ModelSpec.preset_family` and the base model.
        out_dir: the output directory (created with its parents; existing files of the same names are overwritten).

    Returns:
        The directory (``Path(out_dir)``).

    Raises:
        OSError: ``out_dir`` cannot be created or written (from ``mkdir``, transformers' ``save_pretrained`` or the
            record's write).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model = lm.model
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()
    model.save_pretrained(out, safe_serialization=True)
    lm.tokenizer.save_pretrained(out)
    spec = lm.spec
    (out / MODEL_RECORD).write_text(json.dumps({
        "prompt": spec.prompt if isinstance(spec.prompt, str) else "generic", "family": spec.preset_family,
        "base": "tiny" if (Path(spec.name_or_path) / "dukb_tiny.json").exists() else str(spec.name_or_path)},
        indent=2))
    src = Path(lm.spec.name_or_path) / "dukb_tiny.json"
    if src.exists() and not (out / "dukb_tiny.json").exists():
        (out / "dukb_tiny.json").write_text(src.read_text())
    return out
