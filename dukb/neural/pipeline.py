"""High-level neural steps shared by the CLI and the evaluate pipeline: make a model know a KB."""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from pathlib import Path

from dukb import InputError
from dukb.neural.data import TEXT_KIND, kb_qa, vocabulary_texts
from dukb.neural.distributed import barrier, full_state_dict, is_main_process
from dukb.neural.finetune import FINETUNE_PRESETS, finetune, save_record
from dukb.neural.methods.base import WeightState
from dukb.neural.modelbuild import build_tiny_model, save_model
from dukb.neural.modelrecord import spec_for_path
from dukb.neural.models import load_model
from dukb.neural.run.files import read_json
from dukb.neural.spec import ModelSpec, check_chat_model

TINY = "tiny"


def finetune_config(
    spec: ModelSpec,
    preset: str | None = None,
    epochs: int | None = None,
    lr: float | None = None,
    batch_size: int | None = None,
    seed: int = 0,
):
    """The finetuning preset a spec gets and its resolved hyper-parameters.

    Args:
        spec: model spec ("tiny" gets the tiny preset; otherwise the preset of its family,
            :attr:`dukb.neural.spec.ModelSpec.preset_family`, e.g. smollm2 for SmolLM2, or generic).
        preset: explicit preset name; epochs, lr, batch_size: overrides (None: the preset's). Given ``epochs`` are
            the most epochs in all: the preset's extra epochs (``TrainConfig.extra_epochs``) are then not run.
        seed: the run seed.

    Returns:
        (preset name, :class:`dukb.neural.train.TrainConfig`): a copy of the
        :data:`dukb.neural.finetune.FINETUNE_PRESETS` entry with ``seed`` and the given overrides.

    Raises:
        InputError: unknown preset.
    """

    family = spec.preset_family
    default = TINY if spec.name_or_path == TINY else (family if family in FINETUNE_PRESETS else "generic")
    name = preset or default
    if name not in FINETUNE_PRESETS:
        raise InputError(f"unknown finetuning preset {name!r} (choose from {', '.join(FINETUNE_PRESETS)})")
    over = {k: v for k, v in dict(epochs=epochs, lr=lr, batch_size=batch_size).items() if v is not None}
    if epochs is not None:  # the user's epoch count is the cap
        over["extra_epochs"] = 0
    return name, dataclasses.replace(FINETUNE_PRESETS[name], seed=seed, **over)


def _tiny_spec(kb, spec: ModelSpec, items, tmp: str, seed: int) -> tuple[ModelSpec, dict | None]:
    """For ``spec.name_or_path == "tiny"``: build the built-in model for this KB in ``tmp`` (its vocabulary: the
    KB's texts in the run's prompt format, with the statements when ``items`` hold text items and the texts of
    their other probe forms) and return its spec and its ``dukb_tiny.json``; else ``(spec, None)``."""
    if spec.name_or_path != TINY:
        return spec, None
    check_chat_model(spec.prompt, TINY)
    tags = dataclasses.replace(spec, prompt=TINY).tags  # the run's prompt format: its texts in the vocabulary
    texts = items is not None and any(it.kind == TEXT_KIND for it in items)
    extra = () if items is None else tuple(dict.fromkeys(it.kind for it in items if it.kind not in (TEXT_KIND, "qa")))
    build_tiny_model(vocabulary_texts(kb, tags, extra_kinds=extra, statements=texts), tmp, seed=seed)
    tiny_info = json.loads((Path(tmp) / "dukb_tiny.json").read_text())
    return dataclasses.replace(spec, name_or_path=tmp, prompt=TINY), tiny_info


def _record_saved_model(model: dict, out: Path, tiny_info: dict | None) -> None:
    """Complete the finetuning record's ``model`` entry: where the model was saved, and for the built-in tiny model
    its name (not the temporary directory it was built in) and its ``dukb_tiny.json``."""
    model["saved_to"] = str(out)
    if tiny_info is not None:
        model.update(name_or_path=TINY, tiny=tiny_info)


def finetune_kb(
    kb,
    spec: ModelSpec,
    out_dir,
    *,
    preset: str | None = None,
    epochs: int | None = None,
    lr: float | None = None,
    batch_size: int | None = None,
    seed: int = 0,
    progress: bool = False,
    log=None,
    identity: dict | None = None,
    items=None,
    say_shortfall: bool = True,
) -> dict:
    """Finetune a model on every KB fact's QA and save it, with ``finetune.json``, to ``out_dir``.

    Under a multi-process launch (accelerate launch / torchrun) finetuning is data parallel and process 0 saves;
    every process returns the same record after the model is on disk.

    ``spec.name_or_path == "tiny"`` creates the built-in default for this KB first (GPT-2 architecture from a
    config, word-level tokenizer from the KB's text), saved and reloaded as an ordinary HF directory.

    Args:
        kb: the KB.
        spec: model spec ("tiny", hub id or directory).
        out_dir: output model directory.
        preset: finetuning preset, a :data:`dukb.neural.finetune.FINETUNE_PRESETS` name (default, as in
            :func:`finetune_config`: ``tiny`` for ``spec.name_or_path == "tiny"``, else the preset named by the model
            family :attr:`dukb.neural.spec.ModelSpec.preset_family` (``spec.family``, else the prompt preset's name)
            when there is one, else ``generic``); epochs, lr, batch_size override it.
        seed: seed of the tiny initialisation and the data order.
        identity: what the finetuned model depends on (a run's cache key), stored as ``identity`` in the record.
        items: the items to learn (default: every KB fact's QA). With :data:`dukb.neural.data.TEXT_KIND` items the
            tiny model's vocabulary covers every fact's statement sentence, and with items of other probe forms
            (``dukb evaluate --finetune-forms``) those forms' texts.
        say_shortfall: log the one line of a finetuning that ends below its target
            (:func:`dukb.neural.finetune.finetune`; False: the caller says it).

    Returns:
        The finetuning record (also written to out_dir/finetune.json), with ``kb`` (the KB's directory) and
        ``kb_sha256`` (its :meth:`dukb.kb.KB.fingerprint`, also in the model's ``dukb_model.json``,
        :func:`dukb.neural.modelbuild.save_model`). A finetuning that ends below its target accuracy (the record's
        ``accuracy`` < ``target_accuracy``) still saves the model; the caller decides what that means.

    An interrupted finetuning resumes from its checkpoint in ``out_dir`` (:data:`dukb.neural.finetune.CHECKPOINT`,
    written after every probed epoch) when called again with the same KB, model and settings.

    Raises:
        InputError: unknown preset, model cannot be loaded, ``--prompt chat`` for the tiny model, a checkpoint in ``out_dir`` made with other settings.
    """
    out = Path(out_dir)
    name, cfg = finetune_config(spec, preset, epochs, lr, batch_size, seed)
    with tempfile.TemporaryDirectory(prefix="dukb-tiny-") as tmp:
        spec, tiny_info = _tiny_spec(kb, spec, items, tmp, seed)
        lm = load_model(spec)
        if spec.lora is not None:  # the model trained is the one with LoRA adapters
            lm.model = WeightState(lm, spec.lora, seed).model
        record = finetune(
            lm,
            kb_qa(kb) if items is None else list(items),
            cfg,
            progress=progress,
            log=log,
            checkpoint_dir=out,
            say_shortfall=say_shortfall,
        )
        record.update(kb=str(kb.source), kb_sha256=kb.fingerprint(), preset=name)
        if identity is not None:
            record["identity"] = identity
        lm.spec = dataclasses.replace(spec, name_or_path=str(spec.name_or_path))
        weights = full_state_dict(lm.model)  # FSDP: gathered by every process (a collective); else None
        if is_main_process():  # multi-process launch: process 0 writes, the others wait for it
            save_model(lm, out, state_dict=weights, kb=kb)
    _record_saved_model(record["model"], out, tiny_info)
    if is_main_process():
        save_record(record, out / "finetune.json")
    barrier(lm.device)
    return record


def finetune_record(model_dir) -> dict | None:
    """The finetune.json record of a model directory made by :func:`finetune_kb`, or None when there is none.

    Read bounded (:func:`dukb.neural.run.files.read_json`: a regular file of bounded size).

    Raises:
        InputError: the record is not a regular file (a FIFO, a device, a folder), too large, not UTF-8, not JSON or
            not a JSON object (named).
    """

    p = Path(model_dir) / "finetune.json"
    if not os.path.lexists(p):
        return None
    rec = read_json(p, "finetune record")
    if not isinstance(rec, dict):
        raise InputError("not a finetune record (expected a JSON object)", p)
    return rec


def load_finetuned(model_dir, **spec_kw):
    """Load a finetuned model directory with the right prompt preset.

    Returns:
        :class:`dukb.neural.spec.LoadedModel`.
    """

    return load_model(spec_for_path(model_dir, **spec_kw))
