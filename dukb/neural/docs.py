"""Plain-text documents for language-model training: encoding with the loss on every token, a training loop over a
mix of QA items and documents, and the document-level unlearning losses of RESTOR.

RESTOR (Rezaei et al., Sec. 3.2-3.3) corrupts a model by continued pretraining on documents (next-token prediction
on every token) and unlearns those documents with GA, KL or NPO plus a cross-entropy retain term on unrelated text.
:mod:`dukb.neural.data` encodes QA items with the loss on the answer only; this module adds:

- :func:`encode_sequences`: QA items (loss on the answer and EOS) and texts (loss on every token after the first,
  and the closing EOS) in one left-padded batch, the layout of :func:`dukb.neural.data.encode_qa`, so the shared
  scoring functions (:func:`dukb.neural.scoring.forward_logits`, :func:`~dukb.neural.scoring.sequence_logprob`)
  apply unchanged;
- :func:`train_sequences`: the shared training loop (:func:`dukb.neural.train.train_loop`) over such a batch (linear or cosine schedule with warm-up, weight decay, gradient
  accumulation), with an optional early-stop check, used for the clean model (QA + true-fact sentences) and for
  corruption (the corruption documents);
- :func:`unlearn_documents`: GA, KL or NPO on forget documents plus λ times the retain cross-entropy.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import torch  # noqa: TID253 (a model module: reached only through a command's lazy import)

from dukb import InputError
from dukb.neural.data import QAItem, model_device, pad_rows
from dukb.neural.methods import DOCUMENT_METHODS, METHODS
from dukb.neural.methods.retain import gdr_loss
from dukb.neural.scoring import forward_logits
from dukb.neural.train import TrainConfig, chunked, steps_per_epoch, train_loop


def _shuffled_steps(n: int, rng: random.Random, cfg):
    """``steps(epoch)`` for the training loop: each epoch, the ``n`` rows in an order drawn from ``rng`` (one
    ``shuffle`` per epoch), cut into micro-batches by ``chunked``."""

    def steps(_epoch):
        order = list(range(n))
        rng.shuffle(order)
        return chunked(order, cfg)

    return steps


def _text_ids(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def sequence_rows(
    tokenizer, tags, qa_items: Sequence[QAItem] = (), texts: Sequence[str] = ()
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


def encode_sequences(
    tokenizer,
    tags,
    qa_items: Sequence[QAItem] = (),
    texts: Sequence[str] = (),
    device: str = "cpu",
    max_length: int | None = None,
) -> dict:
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

    ix = torch.tensor(list(idx), device=batch["input_ids"].device)
    return trim({k: v[ix] for k, v in batch.items()})


def train_sequences(
    model, batch: dict, cfg: TrainConfig, *, stop: Callable[[int], bool] | None = None, log=None
) -> dict:
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

    n = int(batch["input_ids"].shape[0])
    rng = random.Random(cfg.seed)

    steps = _shuffled_steps(n, rng, cfg)

    def loss_fn(model_, chunk):
        b = rows_of(batch, chunk)
        return gdr_loss(forward_logits(model_, b), b["labels"])

    def after_epoch(epoch: int, logs: dict) -> bool:
        if stop is None or not cfg.eval_every or not (epoch % cfg.eval_every == 0 or epoch == cfg.epochs):
            return False
        done = stop(epoch)
        if log:
            log(f"epoch {epoch}: loss {logs['loss']:.4f}")
        return done

    params = [p for p in model.parameters() if p.requires_grad]
    rec = train_loop(
        model, params, cfg, steps, loss_fn, total_steps=steps_per_epoch(n, cfg) * cfg.epochs, after_epoch=after_epoch
    )
    return {
        "config": rec["config"],
        "epochs_run": rec["epochs_run"],
        "loss_per_epoch": rec["loss_per_epoch"],
        "seconds": rec["seconds"],
    }


def forget_loss(method: str, logits, ref_logits, labels, beta: float = 0.1):
    """The forget term to *minimise* for one method on a batch of forget documents: the registered method's
    :meth:`~dukb.neural.methods.gradient.LossMethod.loss` at the token level (RESTOR's NPO averages per token; GA and
    KL are token means at either level).

    Args:
        method: a document-level method of :data:`dukb.neural.methods.DOCUMENT_METHODS` (ga, kl, npo).
        logits, ref_logits: [B, L, V] (ref_logits may be None for "ga").
        labels: [B, L].
        beta: NPO's β.

    Returns:
        Scalar tensor.

    Raises:
        InputError: unknown or not document-level method.

    Source: Rezaei et al., RESTOR, Sec. 3.3.
    """
    m = _document_method(method)
    m = m.with_options({"beta": beta}) if "beta" in m.options else m
    return m.loss(logits, ref_logits, {"labels": labels}, level="token")


def _document_method(name: str):

    if name not in DOCUMENT_METHODS:
        raise InputError(f"unknown document unlearning method {name!r} (choose from {', '.join(DOCUMENT_METHODS)})")
    return METHODS[name]


def _to_device(batch: dict, dev) -> dict:
    """``batch`` with its tensors on the device ``dev`` (batches are encoded on the CPU by default)."""
    return {k: v.to(dev) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


def _document_loss(state, m, forget: dict, retain: dict | None, reg_weight: float, level: str, rng, batch_size: int):
    """The loss of :func:`unlearn_documents` for :func:`dukb.neural.train.train_loop`: (model, micro-batch of forget
    rows) -> (forget term + λ · retain term, the two terms to log). The retain micro-batch (as many rows as
    ``batch_size``, at most the retain set) is one draw of the seeded ``rng`` per micro-batch; no retain term when
    ``retain`` is None or λ is 0."""
    n_ret = 0 if retain is None else int(retain["input_ids"].shape[0])

    def loss_fn(model_, chunk):
        rb = None
        if n_ret and reg_weight > 0:  # one draw of the seeded generator per micro-batch
            rb = rows_of(retain, rng.sample(range(n_ret), min(batch_size, n_ret)))
        # the method's step with λ = 1 gives the unweighted retain term (logged); λ weights it here
        t = m.step(state, rows_of(forget, chunk), rb, level=level, reg_kind="gdr", reg_weight=1.0, model=model_)
        if t.retain is None:
            return t.forget, {"forget": t.forget.detach(), "retain": 0.0}
        return t.forget + reg_weight * t.retain, {"forget": t.forget.detach(), "retain": t.retain.detach()}

    return loss_fn


def unlearn_documents(
    state,
    method: str,
    forget: dict,
    retain: dict | None,
    cfg: TrainConfig,
    *,
    reg_weight: float = 1.0,
    beta: float = 0.1,
    level: str = "token",
    log=None,
) -> dict:
    """Unlearn forget documents in place: minimise ``forget_loss + λ · CE(retain)`` with AdamW.

    θ* = argmin_θ L_f(θ) + λ E_{x ∈ D_r}[CE(x, θ)], where L_f is the method's forget term, declared once and run
    here as by the QA unlearner (:meth:`dukb.neural.methods.gradient.GradientMethod.step` at the token level, with
    the GDR retain term), on a micro-batch of forget documents, and the retain cross-entropy is taken on a micro-batch of retain texts of the
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
        level: the forget term's level: "token" (RESTOR's paper) or "batch" (RESTOR's code's NPO,
            :func:`dukb.neural.methods.npo.npo_batch_loss`; GA and KL are token means at either level).
        log: optional callable(str), one line per epoch.

    Returns:
        Record: method, config, reg_weight, beta, level, epochs_run, forget_loss and retain_loss per epoch, seconds.

    Raises:
        InputError: unknown method, bad settings, negative λ.

    Source: Rezaei et al., RESTOR, Sec. 3.3 and App. C.2.
    """
    cfg.check()
    m = _document_method(method)
    m = m.with_options({"beta": beta}) if "beta" in m.options else m
    if reg_weight < 0:
        raise InputError(f"the retain weight lambda must be >= 0, got {reg_weight}")
    dev = model_device(state.lm.model)  # batches encoded elsewhere (encode_texts defaults to the CPU) follow the model
    forget = _to_device(forget, dev)
    retain = None if retain is None else _to_device(retain, dev)
    n = int(forget["input_ids"].shape[0])
    rng = random.Random(cfg.seed)
    steps = _shuffled_steps(n, rng, cfg)
    loss_fn = _document_loss(state, m, forget, retain, reg_weight, level, rng, cfg.batch_size)

    def after_epoch(epoch: int, logs: dict) -> bool:
        if log:
            log(f"{method} epoch {epoch}: forget {logs['forget']:.4f}, retain {logs['retain']:.4f}")
        return False

    rec = train_loop(
        state.model,
        state.trainable(),
        cfg,
        steps,
        loss_fn,
        total_steps=steps_per_epoch(n, cfg) * cfg.epochs,
        after_epoch=after_epoch,
    )
    return {
        "method": method,
        "config": rec["config"],
        "reg_weight": reg_weight,
        "beta": beta,
        "level": level,
        "epochs_run": cfg.epochs,
        "forget_loss": rec["parts_per_epoch"].get("forget", []),
        "retain_loss": rec["parts_per_epoch"].get("retain", []),
        "seconds": rec["seconds"],
    }
