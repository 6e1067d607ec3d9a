"""Log-probabilities of answers under a model: the shared building block of the losses and of probing."""

from __future__ import annotations

import torch  # noqa: TID253 (a model module: reached only through a command's lazy import)


def shifted(logits, labels):
    """Align next-token logits with their labels.

    Args:
        logits: [B, L, V] float.
        labels: [B, L] long, -100 where no loss.

    Returns:
        (logits[:, :-1] [B, L-1, V], labels[:, 1:] [B, L-1], mask [B, L-1] bool where labels != -100).
    """
    lg = logits[:, :-1, :]
    lb = labels[:, 1:]
    return lg, lb, lb != -100


def sequence_logprob(logits, labels):
    """Sum and count of the log-probabilities of the labelled tokens of each sequence.

    Args:
        logits: [B, L, V] raw next-token logits (position t predicts token t+1).
        labels: [B, L] long, -100 outside the answer.

    Returns:
        (sum_logp [B] float, n_tokens [B] long). The mean log-probability per token is sum_logp / n_tokens.
    """

    lg, lb, mask = shifted(logits, labels)
    logp = torch.log_softmax(lg.float(), dim=-1)
    tok = logp.gather(-1, lb.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    tok = tok * mask
    return tok.sum(-1), mask.sum(-1)


def forward_logits(model, batch):
    """Run a causal LM on an :func:`dukb.neural.data.encode_qa` batch, without a KV cache (``use_cache=False``).

    No cache is wanted for a whole-sequence pass, and one must not be built in training: activation checkpointing
    that is not transformers' own (an FSDP config's ``activation_checkpointing``) re-runs each layer in the
    backward pass and would find the cache already filled.

    Args:
        model: a Hugging Face causal LM (or anything taking its keyword arguments and returning ``.logits``).
        batch: {"input_ids", "attention_mask", "position_ids"}: [B, L] long tensors, moved to the model's device
            when they are elsewhere (a batch encoded on the CPU for a model on a GPU).

    Returns:
        logits [B, L, V], on the model's device.
    """
    ids, mask, pos = (batch[k] for k in ("input_ids", "attention_mask", "position_ids"))
    try:  # a stand-in without parameters takes the batch as it is
        dev = next(model.parameters()).device
        ids, mask, pos = ids.to(dev), mask.to(dev), pos.to(dev)
    except (AttributeError, StopIteration):
        pass
    return model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=False).logits


def token_logprobs(logits, labels):
    """Log-probabilities of the labelled tokens and their mask.

    Args:
        logits: [B, L, V]; labels: [B, L] with -100 where no loss.

    Returns:
        (logp [B, L-1] float, with 0 where unlabelled; mask [B, L-1] bool).
    """

    lg, lb, mask = shifted(logits, labels)
    logp = torch.log_softmax(lg.float(), -1).gather(-1, lb.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return logp * mask, mask
