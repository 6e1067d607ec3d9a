"""Plain-text documents for language-model training: encoding with the loss on every token, a training loop over a
mix of QA items and documents, and the document-level unlearning losses of RESTOR.

RESTOR (Rezaei et al., Sec. 3.2-3.3) corrupts a model by continued pretraining on documents (next-token prediction
on every token) and unlearns those documents with GA, KL or NPO plus a cross-entropy retain term on unrelated text.
:mod:`dukb.neural.data` encodes QA items with the loss on the answer only; this module adds:

- :func:`encode_sequences`: QA items (loss on the answer and EOS) and texts (loss on every token after the first,
  and the closing EOS) in one left-padded batch, the layout of :func:`dukb.neural.data.encode_qa`, so the shared
  scoring functions (:func:`dukb.neural.scoring.forward_logits`, :func:`~dukb.neural.scoring.sequence_logprob`)
  apply unchanged;
- :func:`train_sequences`: AdamW over such a batch (linear or cosine schedule with warm-up, weight decay, gradient
  accumulation), with an optional early-stop check, used for the clean model (QA + true-fact sentences) and for
  corruption (the corruption documents);
- :func:`npo_token_loss`: RESTOR's token-level NPO;
- :func:`unlearn_documents`: GA, KL or NPO on forget documents plus λ times the retain cross-entropy.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import asdict, dataclass
from typing import Callable, Sequence

from dukb import InputError
from dukb.neural.data import QAItem, pad_rows


def _text_ids(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def sequence_rows(tokenizer, tags, qa_items: Sequence[QAItem] = (), texts: Sequence[str] = ()
                  ) -> list[tuple[list[int], list[int]]]:
    """Token ids and labels of QA items and texts, one ``(ids, labels)`` pair per row (QA items first).

    QA rows: ``prompt(question) + target(answer) + EOS``, labels -100 on the prompt (as
    :func:`dukb.neural.data.encode_qa`). Text rows: ``text + EOS``, labels equal to the ids (every token is
    predicted; the first has no context, so shifting drops it).

    Args:
        tokenizer: HF tokenizer.
        tags: :class:`dukb.neural.spec.PromptTags` (only used for QA items).
        qa_items: QA items.
        texts: plain texts (documents or sentences).

    Returns:
        list of ``(ids, labels)`` lists of ints.
    """
    eos = tokenizer.eos_token_id
    tail = [eos] if eos is not None else []
    rows = []
    for it in qa_items:
        p = _text_ids(tokenizer, tags.prompt(it.question))
        a = _text_ids(tokenizer, tags.target(it.answer)) + tail
        rows.append((p + a, [-100] * len(p) + a))
    for t in texts:
        ids = _text_ids(tokenizer, t) + tail
        rows.append((ids, list(ids)))
    return rows


def encode_sequences(tokenizer, tags, qa_items: Sequence[QAItem] = (), texts: Sequence[str] = (),
                     device: str = "cpu", max_length: int | None = None) -> dict:
    """Encode QA items (loss on the answer) and texts (loss on every token) into one left-padded batch.

    Returns:
        The batch of :func:`pad_rows` (QA rows first, then texts, in the given order).

    Raises:
        InputError: no items and no texts.
    """
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    return pad_rows(sequence_rows(tokenizer, tags, qa_items, texts), pad, device, max_length)


def encode_texts(tokenizer, texts: Sequence[str], device: str = "cpu", max_length: int | None = None) -> dict:
    """Encode plain texts with the loss on every token (see :func:`encode_sequences`)."""
    return encode_sequences(tokenizer, None, (), texts, device, max_length)


def longest_tokens(tokenizer, texts: Sequence[str]) -> int:
    """The largest token count (EOS included) over ``texts``; 0 for none."""
    return max((len(_text_ids(tokenizer, t)) + 1 for t in texts), default=0)


def trim(batch: dict) -> dict:
    """Drop the left columns that are padding in every row of a batch."""
    nz = batch["attention_mask"].sum(0).nonzero()
    keep = int(nz[0]) if len(nz) else 0
    return {k: v[:, keep:] for k, v in batch.items()}


def rows_of(batch: dict, idx) -> dict:
    """Rows ``idx`` (a list of ints) of a batch, trimmed."""
    import torch

    ix = torch.tensor(list(idx), device=batch["input_ids"].device)
    return trim({k: v[ix] for k, v in batch.items()})


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters of :func:`train_sequences` and :func:`unlearn_documents`.

    Attributes:
        epochs: passes over the data (maximum, when an early-stop check is given).
        lr: peak learning rate (AdamW).
        batch_size: rows per micro-batch.
        grad_accum: micro-batches per optimiser step.
        weight_decay: AdamW weight decay.
        warmup: warm-up as a fraction of all optimiser steps (0 <= warmup < 1).
        schedule: "linear" or "cosine" decay to 0 after warm-up, or "constant".
        eval_every: run the early-stop check every this many epochs (0: never).
        seed: seed of the data order and of torch.
        max_grad_norm: clip the gradient's global norm to this before each step (0: no clipping); 1.0 is the
            default of HF's Trainer, which RESTOR's corruption (LLaMA-Factory) and unlearning (SOUL) code use.
    """

    epochs: int = 5
    lr: float = 5e-5
    batch_size: int = 2
    grad_accum: int = 2
    weight_decay: float = 0.0
    warmup: float = 0.1
    schedule: str = "cosine"
    eval_every: int = 0
    seed: int = 0
    max_grad_norm: float = 1.0

    def to_json(self) -> dict:
        """The config as a dict."""
        return asdict(self)


def _scheduler(opt, cfg: TrainConfig, total_steps: int):
    from transformers import (get_constant_schedule_with_warmup, get_cosine_schedule_with_warmup,
                              get_linear_schedule_with_warmup)

    warm = int(round(cfg.warmup * total_steps))
    if cfg.schedule == "cosine":
        return get_cosine_schedule_with_warmup(opt, warm, max(total_steps, 1))
    if cfg.schedule == "linear":
        return get_linear_schedule_with_warmup(opt, warm, max(total_steps, 1))
    if cfg.schedule == "constant":
        return get_constant_schedule_with_warmup(opt, warm)
    raise InputError(f"unknown schedule {cfg.schedule!r} (linear, cosine or constant)")


def _check(cfg: TrainConfig) -> None:
    if cfg.epochs < 0 or cfg.batch_size < 1 or cfg.grad_accum < 1 or not (0 <= cfg.warmup < 1) or cfg.lr < 0 \
            or cfg.max_grad_norm < 0:
        raise InputError(f"bad training settings: {cfg}")


def train_sequences(model, batch: dict, cfg: TrainConfig, *, stop: Callable[[int], bool] | None = None,
                    log=None) -> dict:
    """Minimise the mean next-token cross-entropy of the labelled tokens of ``batch`` (in place).

    Each optimiser step averages ``grad_accum`` micro-batches of ``batch_size`` rows drawn in a seeded random order;
    the learning rate follows ``cfg.schedule`` with ``cfg.warmup`` warm-up. This is both RESTOR's continued
    pretraining (``stage: pt``, next-token prediction; batch 2, accumulation 2, lr 5e-5, 5 epochs, cosine, warm-up
    0.1, App. B) and the QA finetuning of the clean model.

    Args:
        model: a causal LM (or peft model) whose trainable parameters are updated.
        batch: from :func:`encode_sequences` (any mix of QA and text rows).
        cfg: :class:`TrainConfig`.
        stop: optional ``stop(epoch) -> bool`` called every ``cfg.eval_every`` epochs (and after the last); True
            ends training (e.g. once every fact is known).
        log: optional callable(str) for one line per checked epoch.

    Returns:
        Record: config, epochs_run, loss_per_epoch (mean nats per labelled token), seconds.

    Raises:
        InputError: bad settings.

    Source: Rezaei et al., RESTOR, App. B (corruption training).
    """
    import torch

    from dukb.neural.methods.retain import gdr_loss
    from dukb.neural.scoring import forward_logits

    _check(cfg)
    torch.manual_seed(cfg.seed)
    n = int(batch["input_ids"].shape[0])
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    micro = math.ceil(n / cfg.batch_size)
    steps = math.ceil(micro / cfg.grad_accum) * cfg.epochs
    sched = _scheduler(opt, cfg, steps)
    rng = random.Random(cfg.seed)
    t0 = time.perf_counter()
    losses, epoch = [], 0
    for epoch in range(1, cfg.epochs + 1):
        model.train()
        order = list(range(n))
        rng.shuffle(order)
        total, count = 0.0, 0
        chunks = [order[i:i + cfg.batch_size] for i in range(0, n, cfg.batch_size)]
        for c, chunk in enumerate(chunks):
            b = rows_of(batch, chunk)
            loss = gdr_loss(forward_logits(model, b), b["labels"])
            (loss / cfg.grad_accum).backward()
            total += float(loss.detach())
            count += 1
            if (c + 1) % cfg.grad_accum == 0 or c == len(chunks) - 1:
                if cfg.max_grad_norm:
                    torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
                opt.step()
                sched.step()
                opt.zero_grad(set_to_none=True)
        losses.append(total / max(count, 1))
        model.eval()
        if stop is not None and cfg.eval_every and (epoch % cfg.eval_every == 0 or epoch == cfg.epochs):
            done = stop(epoch)
            if log:
                log(f"epoch {epoch}: loss {losses[-1]:.4f}")
            if done:
                break
    model.eval()
    return {"config": cfg.to_json(), "epochs_run": epoch, "loss_per_epoch": losses,
            "seconds": time.perf_counter() - t0}


def token_logprobs(logits, labels):
    """Log-probabilities of the labelled tokens and their mask.

    Args:
        logits: [B, L, V]; labels: [B, L] with -100 where no loss.

    Returns:
        (logp [B, L-1] float, with 0 where unlabelled; mask [B, L-1] bool).
    """
    import torch

    from dukb.neural.scoring import shifted

    lg, lb, mask = shifted(logits, labels)
    logp = torch.log_softmax(lg.float(), -1).gather(-1, lb.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return logp * mask, mask


def npo_token_loss(logits, ref_logits, labels, beta: float = 0.1):
    """RESTOR's token-level NPO loss, averaged over tokens within a document and then over documents:

        L_NPO(x, θ) = (2 / (β T)) Σ_i log(1 + (P_θ(x_i | x_<i) / P_c(x_i | x_<i))^β),

    with P_c the frozen corrupted (reference) model and T the number of labelled tokens of x. At θ = c every term is
    log 2, so L = (2/β) log 2; L decreases as P_θ(x_i | x_<i) falls below P_c.

    Args:
        logits: [B, L, V] of the model being unlearned; ref_logits: [B, L, V] of the reference (no grad).
        labels: [B, L], -100 where no loss.
        beta: inverse temperature β > 0 (RESTOR leaves it unspecified; NPO's authors and dukb use 0.1).

    Returns:
        Scalar tensor.

    Raises:
        InputError: beta <= 0.

    Source: Rezaei et al., RESTOR, Sec. 3.3 (NPO, token level); Zhang et al. 2024 (NPO).
    """
    import torch.nn.functional as F

    if beta <= 0:
        raise InputError(f"NPO's beta must be > 0, got {beta}")
    lp, mask = token_logprobs(logits, labels)
    ref, _ = token_logprobs(ref_logits.detach(), labels)
    per_tok = -F.logsigmoid(-beta * (lp - ref)) * mask  # log(1 + (p/p_c)^β)
    per_doc = per_tok.sum(-1) / mask.sum(-1).clamp(min=1)
    return (2.0 / beta) * per_doc[mask.any(-1)].mean()


#: The document unlearning objectives (forget term only; the retain term is added by :func:`unlearn_documents`).
DOC_METHODS = ("ga", "kl", "npo")


def forget_loss(method: str, logits, ref_logits, labels, beta: float = 0.1):
    """The forget term to *minimise* for one method on a batch of forget documents.

    - "ga": ``ga_loss`` = mean log P_θ(x_i | x_<i) over labelled tokens (minimising it ascends the NLL);
    - "kl": ``-kl_loss`` = minus the mean KL(P_θ ‖ P_c) (:func:`dukb.neural.methods.kl.kl_loss`), so that the KL to
      the corrupted model is maximised;
    - "npo": :func:`npo_token_loss`.

    Args:
        method: one of :data:`DOC_METHODS`.
        logits, ref_logits: [B, L, V] (ref_logits may be None for "ga").
        labels: [B, L].
        beta: NPO's β.

    Returns:
        Scalar tensor.

    Raises:
        InputError: unknown method.

    Source: Rezaei et al., RESTOR, Sec. 3.3.
    """
    from dukb.neural.methods.ga import ga_loss
    from dukb.neural.methods.kl import kl_loss

    if method == "ga":
        return ga_loss(logits, labels)
    if method == "kl":
        return -kl_loss(logits, ref_logits, labels)
    if method == "npo":
        return npo_token_loss(logits, ref_logits, labels, beta)
    raise InputError(f"unknown document unlearning method {method!r} (choose from {', '.join(DOC_METHODS)})")


def unlearn_documents(state, method: str, forget: dict, retain: dict | None, cfg: TrainConfig, *,
                      reg_weight: float = 1.0, beta: float = 0.1, log=None) -> dict:
    """Unlearn forget documents in place: minimise ``forget_loss + λ · CE(retain)`` with AdamW.

    θ* = argmin_θ L_f(θ) + λ E_{x ∈ D_r}[CE(x, θ)], where L_f is the method's forget term (:func:`forget_loss`) on a
    micro-batch of forget documents and the retain cross-entropy is taken on a micro-batch of retain texts of the
    same size, drawn with the seed. The reference P_c is ``state.ref_logits`` (the model the state started from:
    with LoRA the network with adapters disabled, else a frozen copy), i.e. the corrupted model.

    Args:
        state: :class:`dukb.neural.methods.base.WeightState` over the corrupted model.
        method: "ga", "kl" or "npo".
        forget: batch of forget documents (:func:`encode_texts`).
        retain: batch of retain texts, or None for no retain term.
        cfg: :class:`TrainConfig` (RESTOR, App. C.2: weight decay 0.1, accumulation 4; epochs and lr per method).
        reg_weight: λ >= 0.
        beta: NPO's β.
        log: optional callable(str), one line per epoch.

    Returns:
        Record: method, config, reg_weight, beta, epochs_run, forget_loss and retain_loss per epoch, seconds.

    Raises:
        InputError: unknown method, bad settings, negative λ.

    Source: Rezaei et al., RESTOR, Sec. 3.3 and App. C.2.
    """
    import torch

    from dukb.neural.methods.retain import gdr_loss
    from dukb.neural.scoring import forward_logits

    _check(cfg)
    if method not in DOC_METHODS:
        raise InputError(f"unknown document unlearning method {method!r} (choose from {', '.join(DOC_METHODS)})")
    if reg_weight < 0:
        raise InputError(f"the retain weight lambda must be >= 0, got {reg_weight}")
    torch.manual_seed(cfg.seed)
    model = state.model
    n = int(forget["input_ids"].shape[0])
    n_ret = 0 if retain is None else int(retain["input_ids"].shape[0])
    params = state.trainable()
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    micro = math.ceil(n / cfg.batch_size)
    sched = _scheduler(opt, cfg, math.ceil(micro / cfg.grad_accum) * cfg.epochs)
    rng = random.Random(cfg.seed)
    t0 = time.perf_counter()
    f_hist, r_hist = [], []
    for epoch in range(1, cfg.epochs + 1):
        model.train()
        order = list(range(n))
        rng.shuffle(order)
        chunks = [order[i:i + cfg.batch_size] for i in range(0, n, cfg.batch_size)]
        ft, rt = 0.0, 0.0
        for c, chunk in enumerate(chunks):
            b = rows_of(forget, chunk)
            ref = state.ref_logits(b) if method != "ga" else None
            loss = forget_loss(method, forward_logits(model, b), ref, b["labels"], beta)
            ft += float(loss.detach())
            if n_ret and reg_weight > 0:
                rb = rows_of(retain, rng.sample(range(n_ret), min(cfg.batch_size, n_ret)))
                r = gdr_loss(forward_logits(model, rb), rb["labels"])
                rt += float(r.detach())
                loss = loss + reg_weight * r
            (loss / cfg.grad_accum).backward()
            if (c + 1) % cfg.grad_accum == 0 or c == len(chunks) - 1:
                if cfg.max_grad_norm:
                    torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
                opt.step()
                sched.step()
                opt.zero_grad(set_to_none=True)
        f_hist.append(ft / max(len(chunks), 1))
        r_hist.append(rt / max(len(chunks), 1))
        if log:
            log(f"{method} epoch {epoch}: forget {f_hist[-1]:.4f}, retain {r_hist[-1]:.4f}")
    model.eval()
    return {"method": method, "config": cfg.to_json(), "reg_weight": reg_weight, "beta": beta,
            "epochs_run": cfg.epochs, "forget_loss": f_hist, "retain_loss": r_hist,
            "seconds": time.perf_counter() - t0}
