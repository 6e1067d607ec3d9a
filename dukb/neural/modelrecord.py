"""What dukb records about a model and reads back without torch: the record of a model directory dukb saved
(:data:`MODEL_RECORD`, :func:`read_model_record`), the KB a model was finetuned on (:func:`model_kb`), the fingerprint
a run identity records (:func:`model_fingerprint`) and the presets of a model path (:func:`spec_for_path`). Loading
a model is :mod:`dukb.neural.models`; building and saving one :mod:`dukb.neural.modelbuild`.

Source: dukb (model records and run identities); the prompt presets follow Wu et al. 2025, App. C.
"""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path

from dukb import InputError
from dukb.kb import BUILTIN_KBS, load_kb, resolve_kb_path
from dukb.kb.csvfile import read_bytes
from dukb.kb.generate import default_generated_kb_dir
from dukb.neural.distributed import is_main_process
from dukb.neural.modelcheck import check_model
from dukb.neural.run.identity import sha256_file, sha256_json
from dukb.neural.spec import (
    BOS_RULES,
    PROMPT_FORMATS,
    PROMPT_PRESETS,
    ModelSpec,
    preset_for,
)
from dukb.neural.zoo import KNOWN_MODELS, resolve_model

#: largest config.json / dukb_model.json / generation_config.json read (bytes)
JSON_LIMIT = 16 * 1024 * 1024


def read_json_object(path: str | Path, what: str) -> dict:
    """A small JSON file of a model directory (config.json, dukb_model.json), which must hold a JSON object.

    Read through :func:`dukb.kb.csvfile.read_bytes` (regular files only, at most :data:`JSON_LIMIT` bytes).

    Args:
        path: the file.
        what: what it is, for messages (e.g. "model config").

    Returns:
        The object as a dict.

    Raises:
        InputError: missing, not a regular file, too large, unreadable, not UTF-8, not JSON (its line named), or
            not a JSON object; the file is named.
    """

    data = read_bytes(path, what, limit=JSON_LIMIT)
    try:
        obj = json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError as e:
        raise InputError(f"{what} is not UTF-8 text ({e.reason} at byte {e.start})", path) from None
    except json.JSONDecodeError as e:
        raise InputError(f"{what} is not valid JSON: {e.msg} (column {e.colno})", path, e.lineno) from None
    except ValueError as e:  # e.g. a number too large to convert
        raise InputError(f"{what} is not valid JSON: {e}", path) from None
    if not isinstance(obj, dict):
        raise InputError(f"{what} must be a JSON object, not a JSON {_json_kind(obj)}", path)
    return obj


def _json_kind(obj) -> str:
    return {list: "array", str: "string", bool: "boolean", int: "number", float: "number"}.get(type(obj), "null")


TINY_CONFIG = dict(n_layer=2, n_head=4, n_embd=128, n_positions=96)


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
            ``gradient_checkpointing``, ``extra``, ``judge``); ``prompt`` and ``family``, when given (not None or
            empty), override the choices above; ``prompt_format`` and ``bos``, when given, override the ones the
            directory's record holds (:func:`dukb.neural.protocols.evaluate.config.check_model_prompt`), else dukb's.

    Returns:
        A :class:`ModelSpec` with ``name_or_path=str(path)``, the chosen ``prompt`` ("generic" when none is found)
        and ``family`` (None: :attr:`ModelSpec.preset_family` then falls back to the prompt preset's name). The
        prompt name is not validated here (:attr:`ModelSpec.tags` does that).

    Raises:
        InputError: a local folder or file that fails :func:`dukb.neural.modelcheck.check_model`; a malformed
            :data:`MODEL_RECORD` in ``path`` (:func:`read_model_record`); (only when ``path``
            is neither a tiny nor a recorded directory,
            :func:`dukb.neural.zoo.resolve_model`) a short name that is not cached, a folder with several GGUF
            files, a model file that is not a .gguf file, a value that can only be a path naming nothing that
            exists.
        TypeError: a keyword that is not a :class:`ModelSpec` field.
    """

    p = Path(path)
    check_model(p, kw.get("trust_remote_code", False))
    rec = read_model_record(p)
    prompt = kw.pop("prompt", None)
    family = kw.pop("family", None)
    for key in ("prompt_format", "bos"):  # given, else as the model was finetuned (its record), else dukb's
        if not kw.get(key) and rec and rec.get(key):
            kw[key] = rec[key]
        elif not kw.get(key):
            kw.pop(key, None)
    if (p / "dukb_tiny.json").exists() or (str(path) == "tiny" and not p.exists()):  # built in: finetune makes it
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
    """The ``dukb_model.json`` record (prompt, family, base, KB) of a directory dukb saved, or None.

    Args:
        model_dir: a model directory (any path; a file, a missing path or a hub id has no record).

    Returns:
        The record as written by :func:`dukb.neural.modelbuild.save_model`: ``{"prompt": PRESET, "family": FAMILY, "base": "tiny" or
        NAME_OR_PATH}``, ``"prompt_format"`` and ``"bos"`` where they are not dukb's, and for a model finetuned on a KB ``"kb"`` (its built-in name or absolute path) and
        ``"kb_sha256"`` (:meth:`dukb.kb.KB.fingerprint`); a record written by dukb before the KB was recorded lacks
        both. None when there is no :data:`MODEL_RECORD` file.

    Raises:
        InputError: the record exists but is not a regular file, is too large, cannot be read, is not JSON, is not
            a JSON object, holds a "prompt", "family", "base", "kb", "kb_sha256", "prompt_format" or "bos" that is
            neither a string nor null, an unknown "prompt_format" or "bos", or a "prompt"
            that is not a preset of :data:`dukb.neural.spec.PROMPT_PRESETS`; the file is named
            (:func:`read_json_object`).
    """
    p = Path(model_dir)
    f = p / MODEL_RECORD
    try:
        present = p.is_dir() and (f.exists() or f.is_symlink())
    except OSError:
        present = False
    if not present:
        return None
    rec = read_json_object(f, "model record")
    for key in ("prompt", "family", "base", "kb", "kb_sha256", "prompt_format", "bos"):
        if rec.get(key) is not None and not isinstance(rec[key], str):
            raise InputError(f"model record: {key!r} must be a string, not {json.dumps(rec[key])[:40]}", f)

    for key, allowed in (("prompt_format", PROMPT_FORMATS), ("bos", BOS_RULES)):
        if rec.get(key) and rec[key] not in allowed:
            raise InputError(
                f"model record: unknown {key} {json.dumps(rec[key])[:40]} (choose from {', '.join(allowed)})", f
            )

    if rec.get("prompt") and rec["prompt"] not in PROMPT_PRESETS:  # named here: the spec would not say which file
        raise InputError(
            f"model record: unknown prompt preset {json.dumps(rec['prompt'])[:40]} (choose from "
            f"{', '.join(PROMPT_PRESETS)})",
            f,
        )
    return rec


def kb_label(kb) -> str | None:
    """How a model record names the KB a model was finetuned on: a built-in KB's name (``demo``), else the absolute
    path of its directory, so that the name resolves from any working directory.

    Args:
        kb: a :class:`dukb.kb.KB`.

    Returns:
        The name or path (str); None for a KB not loaded from a directory (``kb.source`` None).
    """

    if kb.source is None:
        return None
    src = Path(kb.source).resolve()
    for name in BUILTIN_KBS:
        if Path(str(resources.files("dukb.data").joinpath(name))).resolve() == src:
            return name
    return str(src)


#: fingerprints of KB directories already loaded, by (directory, size and mtime of its three files)
_KB_FINGERPRINTS: dict[tuple, str] = {}
#: the warnings :func:`model_kb` printed on stderr in this process (each is printed once)
_WARNED: set[str] = set()


def kb_fingerprint(kb: str | Path | None) -> str:
    """The :meth:`dukb.kb.KB.fingerprint` (SHA-256 of the people and facts, first 16 hex digits) of a KB argument,
    computed once per directory and content (its files' sizes and modification times).

    Args:
        kb: a KB directory or built-in name; None: the built-in generated default
            (:func:`dukb.kb.generate.default_generated_kb_dir`).

    Returns:
        16 hex digits.

    Raises:
        InputError: no such KB directory; KBError: a malformed KB.
    """

    if kb is None:
        root = default_generated_kb_dir()
    else:
        root = resolve_kb_path(kb)
    stamp = []
    for name in ("people.csv", "relationships.csv", "biographies.csv"):
        try:
            st = (root / name).stat()
            stamp.append((st.st_mtime_ns, st.st_size))
        except OSError:
            stamp.append(None)
    key = (str(root.resolve()), tuple(stamp))
    if key not in _KB_FINGERPRINTS:
        _KB_FINGERPRINTS[key] = load_kb(root).fingerprint()
    return _KB_FINGERPRINTS[key]


def _warn_once(line: str) -> None:
    """Print ``dukb: warning: LINE`` on stderr, once per process (the main process of a launch only)."""

    if line not in _WARNED and is_main_process():
        _WARNED.add(line)
        print(f"dukb: warning: {line}", file=sys.stderr, flush=True)


def model_kb(model, kb: str | Path | None, *, allow_mismatch: bool = False, warn=None) -> str | None:
    """The KB to use with a finetuned model: a given KB is checked against the one the model's :data:`MODEL_RECORD`
    names (its ``kb_sha256``); without one, the model's own KB is used.

    - ``kb`` given, the model records a KB: their fingerprints must agree, else InputError naming both
      (``allow_mismatch``: a warning instead).
    - ``kb`` None, the model records a KB: that KB (its built-in name or path), which must still exist and still
      have the recorded fingerprint (``allow_mismatch``: a changed one is used with a warning).
    - the model's record names no KB (a model dukb saved before records named it): ``kb`` is trusted; without
      ``kb`` a warning says the KB is not checked and None is returned (the command's default KB).
    - no record (a hub id, a GGUF file, a directory dukb did not save): ``kb``, unchecked.

    Args:
        model: the model argument (directory, file, short name or hub id); None: no model, ``kb`` is returned.
        kb: the KB argument (directory or built-in name), None when not given.
        allow_mismatch: accept a KB other than the model's (``--allow-kb-mismatch``).
        warn: callable(str) for the one-line warnings (default: ``dukb: warning: ...`` on stderr, once per
            process).

    Returns:
        The KB argument to load (str or Path), or None (not given and not recorded: the command's default).

    Raises:
        InputError: the KB's fingerprint differs from the model's (not allowed); the model's recorded KB no
            longer exists or has changed (not allowed), or the record names no directory; a malformed record
            (:func:`read_model_record`); KBError: a malformed KB.

    Source: dukb (a model is evaluated on the facts it was finetuned on, Wu et al. 2025, Sec. 4).
    """
    warn = warn or _warn_once
    rec = read_model_record(model) if model is not None else None
    if rec is None:
        return kb
    sha, where = rec.get("kb_sha256"), rec.get("kb")
    if not sha:
        if kb is None:
            warn(
                f"the model {model} records no KB (saved by an older dukb): the KB it was finetuned on is not "
                "checked; pass --kb to name it"
            )
        return kb
    was = f"the model {model} was finetuned on KB {where} (sha256 {sha})"
    if kb is not None:
        differs, advice = f"{was} but --kb {kb} has sha256", "pass the model's KB or --allow-kb-mismatch"
    else:
        if not where:
            raise InputError(
                f"the model {model} records the sha256 {sha} of the KB it was finetuned on, but not "
                "where that KB is: pass --kb"
            )
        if where not in BUILTIN_KBS and not Path(where).is_dir():
            raise InputError(
                f"{was}, which no longer exists: pass --kb with that KB (or another and --allow-kb-mismatch)"
            )
        kb, differs, advice = (
            where,
            f"{was}, which now has sha256",
            ("pass --kb with the model's KB, or --allow-kb-mismatch"),
        )
    got = kb_fingerprint(kb)
    if got != sha:
        if not allow_mismatch:
            raise InputError(f"{differs} {got}: {advice}")
        warn(f"{differs} {got}: used anyway (--allow-kb-mismatch)")
    return kb


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

    p = Path(name_or_path)
    if str(name_or_path).lower() in KNOWN_MODELS and not p.exists():  # its pinned bytes, cached or not
        return {"sha256": KNOWN_MODELS[str(name_or_path).lower()].sha256}
    if p.is_file():
        return {"sha256": sha256_file(p)}
    if p.is_dir():
        files = sorted(
            f for f in p.iterdir() if f.is_file() and f.name not in RECORD_FILES and not f.name.startswith(".")
        )
        return {"sha256": sha256_json([[f.name, sha256_file(f)] for f in files])}
    return {"hub_id": str(name_or_path)}
