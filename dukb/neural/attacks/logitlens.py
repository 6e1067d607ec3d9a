"""`logitlens`: read the gold answer's first token off every layer; is the fact still there, hidden from decoding?

The logit lens (nostalgebraist 2020; used against unlearning by Patil et al. 2024, "Can sensitive information be
deleted from LLMs?", ICLR 2024, and Lynch et al. 2024) applies the model's final norm and unembedding to the hidden
state of every layer. For each fact's "qa" prompt this attack ranks the first token of the gold answer (its first
token that is not whitespace) at the last prompt position of every layer: a fact counts as recoverable when that
token ranks in the top ``k`` at some *intermediate* layer, blocks 1 .. L-1 (the embeddings only echo the input, and
the last layer is the model's own output, which the probe already judged). Known under the attack = known by the
probe, or recoverable.

The entry records the target's rank and probability at every layer, embeddings first and the model's output last.
For a predictor that combines two models (WHP: the finetuned model and the reinforced one, logits combined), each
layer's lens logits of the two are combined the same way.
"""

from __future__ import annotations

import numpy as np
import torch  # noqa: TID253 (a model module: reached only through a command's lazy import)

from dukb import InputError
from dukb.neural.attacks.base import Attack, AttackContext, AttackOutcome, known_table, row_known
from dukb.neural.bounds import Range
from dukb.neural.data import encode_qa


def _final_norm(model):
    """The module applied to the last hidden state before the unembedding (Llama/Mistral/Qwen ``model.norm``,
    GPT-2 ``transformer.ln_f``, GPT-NeoX ``gpt_neox.final_layer_norm``, Phi ``model.final_layernorm``); None when
    none is found (the lens then reads raw hidden states)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    for path in (
        "model.norm",
        "transformer.ln_f",
        "gpt_neox.final_layer_norm",
        "model.final_layernorm",
        "model.decoder.final_layer_norm",
    ):
        obj = base
        for part in path.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if obj is not None:
            return obj
    return None


def _gold_positions(tokenizer, labels, input_ids):
    """Per row, the position of the first answer token that is not whitespace (SentencePiece tokenizers may start
    the answer with a bare "▁"), falling back to the first answer token."""

    pos = []
    for row_l, row_i in zip(labels, input_ids):
        idx = (row_l != -100).nonzero().flatten().tolist()
        p = idx[0] if idx else 0
        for j in idx:
            if tokenizer.decode([int(row_i[j])]).strip():
                p = j
                break
        pos.append(p)
    return torch.tensor(pos, device=labels.device)


def _layer_logits(model, norm, head, hs, rows, at, li, final_logits):
    """Lens logits at layer ``li`` (the model's own logits at the last layer)."""
    if li == len(hs) - 1:
        return final_logits[rows, at]
    v = hs[li][rows, at]
    return head(norm(v) if norm is not None else v)


def lens_ranks(pred, items, batch_size: int = 64):
    """Rank (0 = top) and probability of each item's first gold answer token at every layer.

    Args:
        pred: :class:`dukb.neural.probe.Predictor`.
        items: QA items (N).

    Returns:
        (ranks, probs): numpy arrays of shape [N, L+1] (column 0 the embeddings, column i block i, the last column
        the model's own output distribution).

    Raises:
        InputError: no items (:func:`dukb.neural.data.encode_qa`).

    Source: nostalgebraist 2020 (logit lens); Patil et al. 2024 (ICLR), Sec. 4 (logit-lens attack on unlearning).
    """

    models = [pred.model] + ([pred.aux_model] if getattr(pred, "aux_model", None) is not None else [])
    parts = [(m, _final_norm(m), m.get_output_embeddings()) for m in models]
    ranks, probs = [], []
    for s in range(0, len(items), batch_size):
        chunk = items[s : s + batch_size]
        batch = encode_qa(pred.tokenizer, pred.tags, chunk, device=pred.device)
        labels = batch["labels"]
        first = _gold_positions(pred.tokenizer, labels, batch["input_ids"])
        rows = torch.arange(len(chunk), device=labels.device)
        gold = batch["input_ids"][rows, first]
        with torch.no_grad():
            outs = [
                m(
                    input_ids=batch["input_ids"],
                    attention_mask=batch["attention_mask"],
                    position_ids=batch.get("position_ids"),
                    output_hidden_states=True,
                )
                for m in models
            ]
            n_layers = len(outs[0].hidden_states)
            cols_r, cols_p = [], []
            for li in range(n_layers):
                per = [
                    _layer_logits(m, norm, head, o.hidden_states, rows, first - 1, li, o.logits)
                    for (m, norm, head), o in zip(parts, outs)
                ]
                logits = per[0] if len(per) == 1 else pred.combine(per[0], per[1])
                logits = logits.float()
                g = logits[rows, gold] if logits.dim() == 2 else logits.gather(-1, gold[:, None])[:, 0]
                cols_r.append((logits > g[:, None]).sum(dim=1).cpu().numpy())
                cols_p.append(torch.softmax(logits, dim=-1)[rows, gold].cpu().numpy())
        ranks.append(np.stack(cols_r, axis=1))
        probs.append(np.stack(cols_p, axis=1))
    if not ranks:
        return np.zeros((0, 0), dtype=int), np.zeros((0, 0))
    return np.concatenate(ranks), np.concatenate(probs)


def logitlens(ctx: AttackContext, s: dict) -> AttackOutcome:
    """Facts whose gold first token ranks in the top ``k`` at some layer count as known.

    Returns:
        :class:`AttackOutcome`; extra: k, recovered (fact_ids forgotten by the probe but recoverable),
        target_ranks and target_probs (per layer, embeddings first), best_layer_target.

    Source: nostalgebraist 2020 (logit lens); Patil et al. 2024 (ICLR), Sec. 4.
    """
    known = row_known(ctx)
    k = int(s["k"])
    ranks, probs = lens_ranks(ctx.pred, ctx.items)
    after = dict(known)
    recovered = []
    tgt = None
    for i, it in enumerate(ctx.items):
        key = (it.fact_kind, int(it.fact_id))
        hit = bool((ranks[i, 1:-1] < k).any())  # intermediate blocks only
        if hit and not known[key]:
            after[key] = True
            if it.fact_kind == "relationship":
                recovered.append(int(it.fact_id))
        if key == ("relationship", int(ctx.target)):
            tgt = i
    extra = {"k": k, "recovered": sorted(recovered)}
    if tgt is not None:
        extra.update(
            target_ranks=[int(r) for r in ranks[tgt]],
            target_probs=[round(float(p), 6) for p in probs[tgt]],
            best_layer_target=int(ranks[tgt].argmin()),
        )
    return AttackOutcome(known_table(ctx.items, after), extra)


def _check(s: dict) -> None:
    if s["k"] < 1:
        raise InputError("--attacks logitlens: k must be at least 1")


logitlens.check = _check
LOGITLENS = Attack(
    "logitlens",
    "rank of the gold answer's first token at every layer (final norm + unembedding); "
    "a fact is recoverable when it ranks in the top `k` at some intermediate layer",
    "nostalgebraist 2020; Patil et al. 2024 (ICLR)",
    {"k": 1},
    logitlens,
    ranges={"k": Range(1, 1_000_000)},
)
