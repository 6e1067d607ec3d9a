"""`logitlens`: read the gold answer's first token off every layer; is the fact still there, hidden from decoding?

The logit lens (nostalgebraist 2020; used against unlearning by Patil et al. 2024, "Can sensitive information be
deleted from LLMs?", ICLR 2024, and Lynch et al. 2024) applies the model's final norm and unembedding to the hidden
state of every layer. For each fact's "qa" prompt this attack ranks the first token of the gold answer at the last
prompt position of every layer: a fact counts as recoverable when that token ranks in the top ``k`` at some layer
(the final layer's logits are the model's own). Known under the attack = known by the probe, or recoverable.

The entry records the target's rank and probability at every layer. WHP's auxiliary model is not read (the lens
looks at the base model's layers).
"""

from __future__ import annotations

from dukb import InputError
from dukb.neural.attacks.base import Attack, AttackContext, AttackOutcome, known_table, register, row_known


def _final_norm(model):
    """The module applied to the last hidden state before the unembedding (Llama/Mistral/Qwen ``model.norm``,
    GPT-2 ``transformer.ln_f``, GPT-NeoX ``gpt_neox.final_layer_norm``, Phi ``model.final_layernorm``); None when
    none is found (the lens then reads raw hidden states)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    for path in ("model.norm", "transformer.ln_f", "gpt_neox.final_layer_norm", "model.final_layernorm",
                 "model.decoder.final_layer_norm"):
        obj = base
        for part in path.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if obj is not None:
            return obj
    return None


def lens_ranks(pred, items, batch_size: int = 64):
    """Rank (0 = top) and probability of each item's first gold answer token at every layer.

    Args:
        pred: :class:`dukb.neural.probe.Predictor`.
        items: QA items (N).

    Returns:
        (ranks, probs): numpy arrays of shape [N, L+1] (L transformer blocks + the embeddings; the last column is
        the model's own output distribution).

    Source: nostalgebraist 2020 (logit lens); Patil et al. 2024 (ICLR), Sec. 4 (logit-lens attack on unlearning).
    """
    import numpy as np
    import torch

    from dukb.neural.data import encode_qa

    model = pred.model
    norm = _final_norm(model)
    head = model.get_output_embeddings()
    ranks, probs = [], []
    for s in range(0, len(items), batch_size):
        chunk = items[s:s + batch_size]
        batch = encode_qa(pred.tokenizer, pred.tags, chunk, device=pred.device)
        labels = batch["labels"]
        first = (labels != -100).int().argmax(dim=1)  # the first answer token's position
        rows = torch.arange(len(chunk), device=labels.device)
        gold = batch["input_ids"][rows, first]
        with torch.no_grad():
            out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                        position_ids=batch.get("position_ids"), output_hidden_states=True)
            hs = out.hidden_states
            cols_r, cols_p = [], []
            for li, h in enumerate(hs):
                v = h[rows, first - 1]
                if li == len(hs) - 1:
                    logits = out.logits[rows, first - 1]  # the model's own distribution (norm already applied)
                else:
                    logits = head(norm(v) if norm is not None else v)
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
    """
    known = row_known(ctx)
    k = int(s["k"])
    ranks, probs = lens_ranks(ctx.pred, ctx.items)
    after = dict(known)
    recovered = []
    tgt = None
    for i, it in enumerate(ctx.items):
        key = (it.fact_kind, int(it.fact_id))
        hit = bool((ranks[i] < k).any())
        if hit and not known[key]:
            after[key] = True
            if it.fact_kind == "relationship":
                recovered.append(int(it.fact_id))
        if key == ("relationship", int(ctx.target)):
            tgt = i
    extra = {"k": k, "recovered": sorted(recovered)}
    if tgt is not None:
        extra.update(target_ranks=[int(r) for r in ranks[tgt]], target_probs=[round(float(p), 6) for p in probs[tgt]],
                     best_layer_target=int(ranks[tgt].argmin()))
    return AttackOutcome(known_table(ctx.items, after), extra)


def _check(s: dict) -> None:
    if s["k"] < 1:
        raise InputError("--attacks logitlens: k must be at least 1")


logitlens.check = _check
register(Attack("logitlens", "rank of the gold answer's first token at every layer (final norm + unembedding); "
                "a fact is recoverable when it ranks in the top `k` at some layer",
                "nostalgebraist 2020; Patil et al. 2024 (ICLR)", {"k": 1}, logitlens))
