"""Loading HF causal LMs, and reading what identifies a model directory.

:func:`load_model` loads any model (a directory, a GGUF file, a hub id, a known short name) from a
:class:`dukb.neural.spec.ModelSpec`; :func:`spec_for_path` picks its presets; :func:`read_model_record`,
:func:`model_kb` and :func:`model_fingerprint` read the record and the files dukb identifies it by. Building the
default "tiny" model and saving a model directory are in :mod:`dukb.neural.modelbuild`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
from pathlib import Path

import torch  # noqa: TID253 (a model module: reached only through a command's lazy import)

from dukb import InputError
from dukb.neural.adapter import load_adapter
from dukb.neural.distributed import process_device
from dukb.neural.modelcheck import check_loaded, check_model, least_parameters
from dukb.neural.modelrecord import MODEL_RECORD, read_json_object, read_model_record
from dukb.neural.spec import LoadedModel, ModelSpec, chat_tags
from dukb.neural.zoo import gguf_architecture, resolve_model

log = logging.getLogger(__name__)

#: the loggers of the libraries dukb drives: their records go to Python logging (the run log), never the terminal
LIBRARY_LOGGERS = (
    "transformers",
    "huggingface_hub",
    "accelerate",
    "peft",
    "torch",
    "safetensors",
    "tokenizers",
    "py.warnings",
)
_QUIETED = False


def quiet_libraries() -> None:
    """Route the warnings and logs of transformers, huggingface_hub, accelerate, peft and torch into Python
    logging, and turn their progress bars off, so that they neither reach the terminal nor interleave with dukb's
    own progress and one-line errors. Idempotent; called by :func:`load_model` (and safe to call earlier).

    - ``warnings.warn`` calls go to the ``py.warnings`` logger (``logging.captureWarnings``); warning filters
      still apply first, so ``-W error::FutureWarning`` or ``warnings.simplefilter("error")`` still raise.
    - transformers' own stderr handler is removed and its records propagate to the root logger (verbosity
      WARNING: warnings are kept for the log, info/debug dropped); its and huggingface_hub's progress bars are
      disabled.
    - each library logger gets a ``logging.NullHandler``: with no handler configured on the root logger (the
      plain CLI), nothing is printed (Python's last-resort stderr handler is not used); a handler on the root
      logger, such as a run's log file, receives every record.

    Raises:
        nothing: a library that is not installed is skipped.
    """
    global _QUIETED
    if _QUIETED:
        return
    _QUIETED = True
    logging.captureWarnings(True)
    for name in LIBRARY_LOGGERS:
        lg = logging.getLogger(name)
        if not any(isinstance(h, logging.NullHandler) for h in lg.handlers):
            lg.addHandler(logging.NullHandler())
    try:
        from transformers.utils import logging as tlog

        tlog.set_verbosity_warning()
        tlog.disable_default_handler()
        tlog.enable_propagation()
        tlog.disable_progress_bar()
    except ImportError:  # pragma: no cover - transformers is a dependency
        pass
    try:
        from huggingface_hub import utils as hub_utils

        hub_utils.disable_progress_bars()
        hub_utils.logging.set_verbosity_warning()
    except (ImportError, AttributeError):  # pragma: no cover - an older huggingface_hub
        pass


@contextlib.contextmanager
def _native_stderr_to_log(what: str):
    """While the block runs, what native code writes to file descriptor 2 (a Rust panic message of the tokenizers
    library, a C++ warning of torch) goes to a temporary file, then to the log at INFO, not to the terminal."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no file descriptor 2: nothing to redirect
        yield
        return
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            try:
                sys.stderr.flush()
            except (OSError, ValueError):  # pragma: no cover
                pass
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            text = tmp.read(1 << 16).decode("utf-8", "replace").strip()
            if text:
                log.info("native output while loading %s:\n%s", what, text)


def resolve_device(device: str = "auto") -> str:
    """ "auto" -> "cuda" when available, else "cpu"; other values pass through. Under a multi-process launch
    "cuda" becomes ``cuda:LOCAL_RANK`` (:func:`dukb.neural.distributed.process_device`).

    Args:
        device: "auto", "cpu", "cuda", "cuda:N" or any other torch device string (e.g. "mps", passed through
            unchecked).

    Returns:
        The torch device string this process uses, e.g. "cpu", "cuda", "cuda:1".

    Raises:
        InputError: cuda requested but not available; "cuda:N" under a multi-process launch.
    """

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

    if dtype == "auto":
        if device.startswith("cuda") and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    table = {
        "float32": torch.float32,
        "fp32": torch.float32,
        "bfloat16": torch.bfloat16,
        "bf16": torch.bfloat16,
        "float16": torch.float16,
        "fp16": torch.float16,
    }
    if dtype not in table:
        raise InputError(f"unknown dtype {dtype!r} (choose auto, float32, bfloat16, float16)")
    return table[dtype]


def _gguf_supported() -> str:
    """ " (llama, mistral, ...)": the architectures transformers dequantizes from GGUF, for error messages ("" when
    this transformers does not expose the list). transformers also accepts a few renamed forms (e.g. qwen3moe for
    qwen3_moe), so the list is shown, never used to refuse a file."""
    archs = _gguf_architectures()
    if archs is None:
        return ""
    return " (" + ", ".join(a for a in archs if a not in ("general", "tokenizer")) + ")"


def _auto_config(path: str, trust: bool, extra: dict):
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(path, trust_remote_code=trust, **extra)


def _auto_tokenizer(path: str, config, trust: bool, extra: dict):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path, config=config, trust_remote_code=trust, **extra)


def _auto_model(path: str, config, dtype, trust: bool, extra: dict):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(
        path, config=config, dtype=dtype, trust_remote_code=trust, output_loading_info=True, **extra
    )


#: weights files transformers looks for in a model directory, in its order of preference
WEIGHTS_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)


def _weights_file(path: str) -> str:
    """The weights file transformers loads from a local directory (the directory when none is found, or a hub
    id as given)."""
    p = Path(path)
    return str(next((p / f for f in WEIGHTS_FILES if (p / f).is_file()), p))


def _tokenizer_file(path: str) -> str:
    p = Path(path)
    names = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")
    return str(next((p / f for f in names if (p / f).is_file()), p))


def _first_line(e: BaseException) -> str:
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    first = lines[0] if lines else ""
    if first.endswith(":") and len(lines) > 1:  # "Validation error for field 'x':" + the reason
        first = f"{first} {lines[1]}"
    return f"{type(e).__name__}: {first}" if first else type(e).__name__


def _loading(step: str, where, arch: str | None, fn):
    """Run one loading step (``"config"``, ``"tokenizer"`` or ``"weights"``) and turn whatever it raises into one
    :class:`InputError` naming the file at fault: any ``Exception``, and the ``BaseException`` subclasses that
    extension modules raise (pyo3's ``PanicException`` for a Rust panic in the tokenizers or safetensors
    library). ``KeyboardInterrupt``, ``SystemExit`` and ``GeneratorExit`` pass through."""
    try:
        return fn()
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except InputError:
        raise
    except BaseException as e:  # noqa: BLE001 - a Rust panic derives from BaseException, not Exception
        first = _first_line(e)
        if where.gguf_file:
            supported = _gguf_architectures()
            if supported is None or arch not in supported:
                raise InputError(
                    f"transformers cannot load this GGUF file of architecture {arch!r} ({first}); "
                    "transformers dequantizes GGUF files of the architectures it lists in "
                    f"GGUF_SUPPORTED_ARCHITECTURES{_gguf_supported()}; convert other models to an "
                    "HF directory",
                    where.file,
                ) from None
            raise InputError(
                f"cannot load the {step} of this GGUF file of architecture {arch!r}: {first}", where.file
            ) from None
        path = where.path
        if step == "config":
            where_ = Path(path) / "config.json" if Path(path).is_dir() else path
            raise InputError(f"cannot load the model config: {first}", where_) from None
        if step == "tokenizer":
            raise InputError(f"cannot load the tokenizer: {first}", _tokenizer_file(path)) from None
        if "weights only load failed" in str(e).lower() or "weights_only" in str(e):
            raise InputError(
                "torch refuses to load this pickle checkpoint safely (torch.load weights_only: it "
                "holds objects other than tensors); convert the model to safetensors",
                _weights_file(path),
            ) from None
        if "ignore_mismatched_sizes" in str(e):
            raise InputError(
                "tensors of the weights file have the wrong shape for config.json (the weights and "
                "config.json do not belong together)",
                _weights_file(path),
            ) from None
        raise InputError(f"cannot load the model weights: {first}", _weights_file(path)) from None


def _gguf_architectures() -> tuple[str, ...] | None:
    try:
        from transformers.modeling_gguf_pytorch_utils import (
            GGUF_SUPPORTED_ARCHITECTURES,
        )
    except ImportError:
        return None
    return tuple(GGUF_SUPPORTED_ARCHITECTURES)


def _safetensors_shards(model_dir: Path) -> list[Path]:
    """The safetensors files transformers loads from ``model_dir``: the shards its index names, else
    model.safetensors; [] when it has neither."""
    index = model_dir / "model.safetensors.index.json"
    if index.is_file():
        weight_map = read_json_object(index, "safetensors index").get("weight_map")
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            raise InputError("safetensors index has no weight_map object of file names", index)
        shards = [model_dir / name for name in sorted(set(weight_map.values()))]
        for f in shards:
            if Path(f.name) != Path(str(f.relative_to(model_dir))) or not f.is_file():
                raise InputError(
                    f"safetensors index names {f.relative_to(model_dir)}, which is not a file of the model directory",
                    index,
                )
        return shards
    single = model_dir / "model.safetensors"
    return [single] if single.is_file() else []


def _check_weights(model_dir: Path, config, trust: bool) -> None:
    """Refuse, before anything is allocated, safetensors files that cannot be read (their headers only) and
    weights that cover less than half of the parameters ``config`` describes (a config.json that does not belong
    to the weights: transformers would initialise the rest at random, and a large default config would fill the
    memory). Quantized configs (``quantization_config``) are not counted."""
    shards = _safetensors_shards(model_dir)
    if not shards:
        return
    from safetensors import safe_open

    values = 0
    for f in shards:
        try:
            with safe_open(str(f), framework="pt") as fh:
                for key in fh.keys():
                    n = 1
                    for d in fh.get_slice(key).get_shape():
                        n *= int(d)
                    values += n
        except (KeyboardInterrupt, SystemExit, GeneratorExit):
            raise
        except BaseException as e:  # noqa: BLE001 - SafetensorError, OSError, a Rust panic
            raise InputError(
                f"not a readable safetensors file ({_first_line(e)}); the file may be truncated or corrupt", f
            ) from None
    if getattr(config, "quantization_config", None) is not None:
        return
    least = least_parameters(config.to_dict()) or 0  # instant, where building a config of 1,024 layers is not
    params = least if values < least // 2 else _config_parameters(config, trust)
    if params and values < params // 2:
        raise InputError(
            f"the weights hold {values:,} values, but config.json describes a model of "
            f"{'at least ' if params == least else ''}{params:,} "
            "parameters: the weights and config.json do not belong together",
            shards[0],
        )


def _config_parameters(config, trust: bool) -> int | None:
    """Number of parameters of the causal LM ``config`` describes, counted on the meta device (nothing is
    allocated); None when the model cannot be built from the config alone."""
    from transformers import AutoModelForCausalLM

    try:
        with torch.device("meta"):
            m = AutoModelForCausalLM.from_config(config, trust_remote_code=trust)
        return sum(p.numel() for p in m.parameters())
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except BaseException:  # noqa: BLE001 - the real load reports the problem, naming the file
        return None


def _check_loading_info(info: dict, weights: str) -> None:
    """Refuse a load that left weights missing (transformers would initialise them at random) or of the wrong
    shape; ``info`` is transformers' ``output_loading_info``."""
    missing = sorted(info.get("missing_keys") or [])
    mismatched = sorted(
        str(k[0]) if isinstance(k, (tuple, list)) else str(k) for k in info.get("mismatched_keys") or []
    )
    if missing:
        raise InputError(
            f"the weights file lacks {len(missing)} of the model's tensors (e.g. {missing[0]}); "
            "the file is incomplete or belongs to another model",
            weights,
        )
    if mismatched:
        raise InputError(
            f"{len(mismatched)} tensors of the weights file have the wrong shape for config.json "
            f"(e.g. {mismatched[0]})",
            weights,
        )


def load_model(spec: ModelSpec) -> LoadedModel:
    """Load a causal LM and tokenizer from a hub id, a local directory, a GGUF file or a known short name.

    ``spec.name_or_path`` is resolved by :func:`dukb.neural.zoo.resolve_model`. A GGUF file (or a folder holding
    one, or a short name such as ``smollm2-135m``) is dequantized by transformers to ``spec.dtype`` (auto: fp32 on
    CPU, bf16 on CUDA) and its own tokenizer is used; the loaded model is an ordinary float model (no quantization
    config), so :func:`dukb.neural.modelbuild.save_model` writes an ordinary HF directory. The tokenizer gets left
    padding (for batched generation) and a pad token (eos if it has none). Nothing is downloaded when the path is local;
    ``trust_remote_code`` stays as the spec says.

    Library warnings and progress bars are routed into Python logging first (:func:`quiet_libraries`), and what
    native code writes to stderr while loading goes to the log.

    Args:
        spec: the :class:`ModelSpec`: ``name_or_path`` (hub id, model directory, .gguf file, folder with one .gguf
            file, or a :data:`dukb.neural.zoo.KNOWN_MODELS` short name; not "tiny", which the caller builds first;
            a peft adapter directory saved by ``--save-models`` loads its base with the adapter merged,
            :func:`dukb.neural.adapter.load_adapter`),
            ``dtype``, ``device``, ``prompt``, ``trust_remote_code``, ``gradient_checkpointing``. ``spec.lora`` only
            enables input gradients under gradient checkpointing: the adapters are attached by the caller
            (:class:`dukb.neural.methods.base.WeightState`).

    Returns:
        :class:`LoadedModel`: the model in eval mode on the resolved device in the resolved dtype, its tokenizer
        (left padding, a pad token), ``spec.tags`` (the chat preset resolved with the tokenizer's chat template,
        :func:`dukb.neural.spec.chat_tags`), the spec and the device string.

    Raises:
        InputError: the model cannot be found or loaded, always naming the file at fault (one line; never a
            traceback, whatever transformers, torch, safetensors or the tokenizers library raise, a Rust panic
            included): a folder or GGUF file that fails :func:`dukb.neural.modelcheck.check_model` (checked before
            transformers reads it) or whose special tokens are not tokens of the model
            (:func:`dukb.neural.modelcheck.check_loaded`); a config.json that is not a JSON object, or that
            transformers rejects; a malformed :data:`MODEL_RECORD` (:func:`read_model_record`); a truncated or foreign safetensors file; weights that
            cover less than half of the parameters config.json describes, or that leave some of the model's
            weights missing or of the wrong shape; a pickle checkpoint that torch's weights-only loader refuses; a
            tokenizer that cannot be built; a GGUF file of an architecture transformers cannot load (its architecture named), or one that is truncated or not a GGUF file, or the
            ``gguf`` package is missing (:func:`dukb.neural.zoo.gguf_architecture`); a short name that is not cached, a folder with several GGUF files, a
            non-GGUF model file, a value that can only be a path naming nothing that exists
            (:func:`dukb.neural.zoo.resolve_model`); CUDA requested
            but unavailable, or "cuda:N" under a multi-process launch (:func:`resolve_device`); an unknown dtype
            (:func:`resolve_dtype`); an unknown prompt preset name (:attr:`ModelSpec.tags`, checked after loading); ``--prompt chat`` for a tokenizer
            without a chat template or with one that cannot be split around the question
            (:func:`dukb.neural.spec.chat_tags`).
    """

    quiet_libraries()
    rec = read_model_record(spec.name_or_path)
    if rec is not None and rec.get("adapter"):  # a peft adapter dukb saved (--save-models under --lora-r)
        return load_adapter(spec, rec, load_model, MODEL_RECORD)
    device = resolve_device(spec.device)
    dtype = resolve_dtype(spec.dtype, device)
    where = resolve_model(spec.name_or_path)
    notes = check_model(where.file if where.gguf_file else where.path, spec.trust_remote_code)
    path, extra = where.path, ({"gguf_file": where.gguf_file} if where.gguf_file else {})
    local = Path(path).is_dir()
    if not Path(path).exists():
        log.info("loading %s from the hub (or the local HF cache)", path)
    arch = None
    if where.gguf_file:  # a truncated or foreign file is refused here, naming the file
        arch = gguf_architecture(where.file)
    elif local:
        read_json_object(Path(path) / "config.json", "model config")
        read_model_record(path)
    trust = spec.trust_remote_code
    with _native_stderr_to_log(path):
        config = _loading("config", where, arch, lambda: _auto_config(path, trust, extra))
        if local and not where.gguf_file:
            _check_weights(Path(path), config, trust)
        tokenizer = _loading("tokenizer", where, arch, lambda: _auto_tokenizer(path, config, trust, extra))
        model, info = _loading("weights", where, arch, lambda: _auto_model(path, config, dtype, trust, extra))
    if not where.gguf_file:
        _check_loading_info(info, _weights_file(path))
    check_loaded(tokenizer, model, where.file if where.gguf_file else path, notes)
    if where.gguf_file:
        _drop_quantization(model)
    _prepare_loaded(model, tokenizer, spec, device)
    return LoadedModel(model, tokenizer, chat_tags(spec.tags, tokenizer, spec.name_or_path), spec, device)


def _drop_quantization(model) -> None:
    """Mark a model transformers dequantized from a GGUF file as a plain float model from here on, so that it is
    saved without a quantization config (:func:`load_model`).

    Args:
        model: the loaded ``transformers.PreTrainedModel``; its config, generation config and quantizer attributes
            are changed in place.
    """
    for obj in (model.config, getattr(model, "generation_config", None)):
        if obj is not None and hasattr(obj, "quantization_config"):
            delattr(obj, "quantization_config")
    model.hf_quantizer = None
    model.is_quantized = False


def _prepare_loaded(model, tokenizer, spec: ModelSpec, device: str) -> None:
    """Make a freshly loaded model and tokenizer ready for dukb, in place (:func:`load_model`): left padding and a
    pad token (eos if the tokenizer has none, also set as the generation pad id), the model on ``device`` in eval
    mode, and gradient checkpointing when ``spec.gradient_checkpointing`` asks for it.

    Args:
        model: the loaded ``transformers.PreTrainedModel``.
        tokenizer: its tokenizer.
        spec: the :class:`ModelSpec` (``gradient_checkpointing``; ``lora`` enables input gradients under it).
        device: the resolved device string (:func:`resolve_device`).
    """
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
