"""Building the default "tiny" model, and saving a model directory with dukb's record.

The tiny default is a GPT-2-architecture causal LM created from a config (no download), with a word-level tokenizer
built from the KB's own text (tokenizers library: WordLevel model, Metaspace + punctuation pre-tokenizers so that
decoding restores the exact text). It is saved with ``save_pretrained`` (safetensors) and then loaded like any other
model directory (:func:`dukb.neural.models.load_model`), so every later code path is the one a real model takes.
"""

from __future__ import annotations

import json
from pathlib import Path

from dukb.neural.modelrecord import MODEL_RECORD, TINY_CONFIG, kb_label
from dukb.neural.run.files import refuse_links_in
from dukb.neural.spec import LoadedModel

#: the special tokens of the tiny model's tokenizer
SPECIALS = {"unk": "[UNK]", "pad": "[PAD]", "eos": "[EOS]"}


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
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never"),
            pre_tokenizers.Split("\n", behavior="isolated"),
            pre_tokenizers.Punctuation(behavior="isolated"),
            pre_tokenizers.Digits(individual_digits=False),
        ]
    )
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="never")
    trainer = trainers.WordLevelTrainer(special_tokens=list(SPECIALS.values()), min_frequency=1)
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token=SPECIALS["unk"],
        pad_token=SPECIALS["pad"],
        eos_token=SPECIALS["eos"],
        bos_token=SPECIALS["eos"],
        padding_side="left",
    )


def build_tiny_model(texts: list[str], out_dir: str | Path, seed: int = 0, config: dict | None = None) -> Path:
    """Create the tiny default model for a KB and save it as an HF model directory.

    Args:
        texts: every text the model will see (from :func:`dukb.neural.data.vocabulary_texts`).
        out_dir: where to save (config.json, model.safetensors, tokenizer files, dukb_tiny.json).
        seed: torch seed for the random initialisation.
        config: overrides of :data:`dukb.neural.modelrecord.TINY_CONFIG` (n_layer, n_head, n_embd, n_positions).

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
    gcfg = GPT2Config(
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        **cfg,
    )
    model = GPT2LMHeadModel(gcfg)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    # written by every process, not through model.save_pretrained: under a multi-process launch transformers saves
    # on rank 0 only, and each process builds the (identical, seeded) tiny model in its own temporary directory
    from safetensors.torch import save_model

    gcfg.save_pretrained(out)
    model.generation_config.save_pretrained(out)
    save_model(model, str(out / "model.safetensors"))
    tokenizer.save_pretrained(out)
    (out / "dukb_tiny.json").write_text(
        json.dumps({"seed": seed, "config": cfg, "vocab": len(tokenizer), "prompt": "tiny"}, indent=2)
    )
    return out


def save_model(
    lm: LoadedModel, out_dir: str | Path, state_dict: dict | None = None, kb=None, weights: bool = True
) -> Path:
    """Save model (merged, if it carries LoRA adapters) and tokenizer as an HF directory (safetensors), with
    :data:`dukb.neural.modelrecord.MODEL_RECORD` (prompt preset, preset family, base model, the prompt format and BOS rule where
    not dukb's, and, given ``kb``, the KB it was finetuned on) so
    a later load picks the same presets and a command given another KB refuses it (:func:`dukb.neural.modelrecord.model_kb`).

    A tiny model's ``dukb_tiny.json`` is copied along. The LoRA merge is peft's ``merge_and_unload``, which
    replaces the adapter layers of the wrapped model in place: afterwards ``lm.model`` holds the merged weights and
    no adapters.

    Args:
        lm: the :class:`dukb.neural.spec.LoadedModel` (a plain or a peft model); ``lm.spec`` gives the recorded prompt preset (custom
            :class:`dukb.neural.spec.PromptTags` are recorded as "generic"), :attr:`ModelSpec.preset_family` and the base model.
        out_dir: the output directory (created with its parents; existing files of the same names are overwritten).
        state_dict: the weights to write instead of the model's own (the full state dict of an FSDP-sharded model,
            :func:`dukb.neural.distributed.full_state_dict`).
        kb: the :class:`dukb.kb.KB` the model was finetuned on (None: none recorded): recorded as ``"kb"``
            (:func:`dukb.neural.modelrecord.kb_label`) and ``"kb_sha256"`` (its :meth:`dukb.kb.KB.fingerprint`).
        weights: False: the tokenizer and the record only (``lm.model`` is not read; a peft adapter saved beside
            them, :func:`dukb.neural.savedmodels.save_unlearned`).

    Returns:
        The directory (``Path(out_dir)``).

    Raises:
        OSError: ``out_dir`` cannot be created or written (from ``mkdir``, transformers' ``save_pretrained`` or the
            record's write).
        InputError: a symbolic link is in ``out_dir`` or in its place (:func:`dukb.neural.run.files.refuse_links_in`).
    """

    out = refuse_links_in(out_dir)  # transformers opens its files by name: no link may carry them elsewhere
    out.mkdir(parents=True, exist_ok=True)
    model = lm.model
    if hasattr(model, "merge_and_unload") and weights:
        model = model.merge_and_unload()
    if weights and state_dict is None:
        model.save_pretrained(out, safe_serialization=True)
    elif weights:  # a tied parameter is written once, under the name the model's own save keeps
        tied = {n for n, _ in model.named_parameters(remove_duplicate=False)} - {n for n, _ in model.named_parameters()}
        model.save_pretrained(
            out, safe_serialization=True, state_dict={k: v for k, v in state_dict.items() if k not in tied}
        )
    lm.tokenizer.save_pretrained(out)
    spec = lm.spec
    record = {
        "prompt": spec.prompt if isinstance(spec.prompt, str) else "generic",
        "family": spec.preset_family,
        "base": "tiny" if (Path(spec.name_or_path) / "dukb_tiny.json").exists() else str(spec.name_or_path),
    }
    for key, default in (("prompt_format", "dukb"), ("bos", "never")):  # how it was trained, where not dukb's
        if getattr(spec, key, default) != default:
            record[key] = getattr(spec, key)
    if kb is not None:
        record.update(kb=kb_label(kb), kb_sha256=kb.fingerprint())
    (out / MODEL_RECORD).write_text(json.dumps(record, indent=2))
    src = Path(lm.spec.name_or_path) / "dukb_tiny.json"
    if src.exists() and not (out / "dukb_tiny.json").exists():
        (out / "dukb_tiny.json").write_text(src.read_text())
    return out
