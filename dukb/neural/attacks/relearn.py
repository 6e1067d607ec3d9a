"""`relearn`: a few finetuning steps on facts outside the forget set; does the target come back?

Hu et al. (ICLR 2025, "Jogging the memory of unlearned LLMs through targeted relearning attacks", arXiv 2406.13356)
show that finetuning an unlearned model on a small set of *related* data (public text about the forgotten topic)
restores the unlearned knowledge. Here the relearning set is chosen by rule, never from the forget set:

- ``mode=neighbours`` (default): facts that share a person with the forget set (relationships and biographies), not in
  it;
- ``mode=half``: a random half of the forgotten premises: the relationship facts of the target's minimal deep
  unlearning sets that the unlearned model no longer knows, the target left out (does the target come back, or can
  it again be derived, once part of what was forgotten is relearned?);
- ``mode=target``: the target itself (a sanity check: relearning the fact must bring it back);
- ``mode=random``: facts about people the forget set does not mention (the control: does *any* finetuning bring the
  forgotten facts back, or only related data, as Hu et al. find?).

``facts`` caps the relearning set (a seeded random choice), ``steps`` is the number of full-batch AdamW steps on their
"qa" items (answer-token loss, the finetuning loss of Wu et al. 2025, App. H) at ``lr`` (0: the model family's
finetuning rate), seeded by the run seed. The attacker holds the weights: relearning trains every parameter of a copy
with any LoRA adapter merged in (:func:`dukb.neural.attacks.base.plain_copy`), whatever the unlearning method
trained; the unlearned weights are unchanged afterwards. Only ``half`` and ``target`` relearn facts of the
forget set; ``neighbours`` and ``random`` never do.
"""

from __future__ import annotations

import dataclasses
import random

from dukb import InputError
from dukb.neural.attacks.base import (
    Attack,
    AttackContext,
    AttackOutcome,
    known_table,
    plain_copy,
    probe_known,
    row_known,
)
from dukb.neural.bounds import STEPS, Range
from dukb.neural.data import encode_qa
from dukb.neural.finetune import answer_token_loss
from dukb.neural.pipeline import finetune_config
from dukb.neural.spec import ModelSpec
from dukb.neural.train import TrainConfig, train_loop

MODES = ("neighbours", "half", "target", "random")


def relearn_facts(ctx: AttackContext, mode: str, n: int, seed: int) -> list[tuple[str, int]]:
    """The (fact_kind, fact_id) pairs relearned under ``mode`` (at most ``n``, a seeded choice, sorted).

    Raises:
        InputError: an unknown mode.
    """
    forget = set(int(i) for i in ctx.forget_ids)
    if mode == "target":
        pool = [("relationship", int(ctx.target))]
    elif mode == "half":
        known = row_known(ctx)
        premises = {int(i) for s in ctx.sets for i in s} - {int(ctx.target)}
        gone = sorted(i for i in premises if not known.get(("relationship", i), True))
        pool = [("relationship", i) for i in random.Random(seed).sample(gone, len(gone) // 2)]
    elif mode in ("neighbours", "random"):
        people = {p for f in ctx.kb.relationships if f.fact_id in forget for p in (f.subject, f.object)}
        near = mode == "neighbours"
        pool = [
            ("relationship", f.fact_id)
            for f in ctx.kb.relationships
            if f.fact_id not in forget and ((f.subject in people or f.object in people) == near)
        ]
        pool += [("biography", b.fact_id) for b in ctx.kb.biographies if (b.subject in people) == near]
    else:
        raise InputError(f"relearn: mode must be one of {', '.join(MODES)}, got {mode!r}")
    if len(pool) > n:
        pool = random.Random(seed).sample(pool, n)
    return sorted(pool)


def relearned_copy(pred, items, steps: int, lr: float, seed: int = 0):
    """A copy of ``pred`` whose model (every parameter, adapters merged) took ``steps`` full-batch AdamW steps on
    ``items`` (answer-token NLL) at the constant rate ``lr``, without weight decay or clipping, seeded with ``seed``:
    one epoch of ``steps`` optimiser steps of the one training loop (:func:`dukb.neural.train.train_loop`).

    Returns:
        (:class:`dukb.neural.probe.Predictor` over the copy, number of parameters trained); the original model is
        unchanged.

    Raises:
        InputError: the model has no parameter to train.

    Source: Hu et al. 2025 (ICLR), arXiv 2406.13356, Sec. 3 (targeted relearning); the loss of Wu et al. 2025,
    App. H.
    """
    model = plain_copy(pred.model)
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise InputError("relearn: the model has no parameter to train")
    n_params = sum(p.numel() for p in params)
    if items and steps > 0:
        batch = encode_qa(pred.tokenizer, pred.tags, items, device=pred.device)
        n_tok = max(int((batch["labels"] != -100).sum()), 1)
        for p in params:  # the loop zeroes gradients after each step: none may be left over from the copied model
            p.grad = None
        cfg = TrainConfig(epochs=1, lr=lr, batch_size=len(items), schedule="constant", seed=seed)
        train_loop(
            model,
            params,
            cfg,
            lambda _epoch: [[batch]] * steps,
            lambda fmodel, b: answer_token_loss(fmodel, b, n_tok),
            total_steps=steps,
        )
    return dataclasses.replace(pred, model=model), (n_params if items and steps > 0 else 0)


def relearn(ctx: AttackContext, s: dict) -> AttackOutcome:
    """Relearn ``s["facts"]`` facts chosen by ``s["mode"]`` for ``s["steps"]`` steps, then probe every fact.

    Returns:
        :class:`AttackOutcome` with extra ``relearned`` ({"relationships": [...], "biographies": [...]}; empty when
        the mode finds no fact, and then nothing is trained), ``lr`` and ``trained_params``.

    Raises:
        InputError: an unknown mode, or a model with no parameter to train.

    Source: Hu et al. 2025 (ICLR), arXiv 2406.13356, Sec. 3 (targeted relearning).
    """
    chosen = relearn_facts(ctx, s["mode"], int(s["facts"]), ctx.seed)
    want = set(chosen)
    items = [it for it in ctx.items if (it.fact_kind, int(it.fact_id)) in want]
    lr = float(s["lr"]) or _family_lr(ctx.spec, ctx.seed)
    pred, n_params = relearned_copy(ctx.pred, items, int(s["steps"]), lr, ctx.seed)
    known = probe_known(pred, ctx.items, ctx.batch_size)
    del pred
    return AttackOutcome(
        known_table(ctx.items, known),
        {
            "relearned": {
                "relationships": [i for k, i in chosen if k == "relationship"],
                "biographies": [i for k, i in chosen if k == "biography"],
            },
            "lr": lr,
            "trained_params": n_params,
        },
    )


def _family_lr(spec, seed: int) -> float:
    """The finetuning learning rate of the model family's preset (:func:`dukb.neural.pipeline.finetune_config`)."""

    _preset, cfg = finetune_config(spec or ModelSpec("tiny", prompt="tiny"), seed=seed)
    return float(cfg.lr)


def _check(s: dict) -> None:
    if s["mode"] not in MODES:
        raise InputError(f"--attacks relearn: mode must be one of {', '.join(MODES)}, got {s['mode']!r}")
    if s["steps"] < 1 or s["facts"] < 1 or s["lr"] < 0:
        raise InputError("--attacks relearn: steps and facts must be at least 1 and lr >= 0")


relearn.check = _check
RELEARN = Attack(
    "relearn",
    "finetune a copy for `steps` steps on `facts` facts outside the forget set (mode "
    "neighbours: sharing a person with it; half: a random half of the target's forgotten premises; target: "
    "the target itself; random: about people it does not mention, the control), then probe",
    "Hu et al. 2025, arXiv 2406.13356",
    {"mode": "neighbours", "facts": 8, "steps": 8, "lr": 0.0},
    relearn,
    ranges={
        "facts": Range(1, 1_000_000),
        "steps": STEPS,
        "lr": Range(0, 10, integer=False, why="0 = the model family's finetuning rate"),
    },
)
