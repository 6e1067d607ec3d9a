"""Asking a model about the facts: M generations per fact (seeded sampling, greedy when M = 1), each judged exactly
against the KB (:class:`dukb.kb.judge.Judge`, rule "exact") and reduced by majority vote, and the length-normalised
log-probabilities of each fact's true, injected and random answers.

Source: Rezaei et al., RESTOR, Sec. 3.4 (M = 3 generations, a fact is correct when a majority is accepted;
log-normalised probability (1/T) Σ log P(y_i | x, y_<i) from TOFU; Fig. 2's candidate sets). torch is imported by
:mod:`dukb.neural.probe` only when a model is run.
"""

from __future__ import annotations

from collections.abc import Sequence

from dukb import InputError
from dukb.kb.judge import Judge, majority
from dukb.neural.probe import answer_logprob, greedy_generate
from dukb.neural.restor.facts import FactProbe


def sample_generate(pred, prompts: list[str], max_new_tokens: int, temperature: float, seed: int) -> list[str]:
    """Sampled decoding of a batch of prompts (left padding, KV cache), one draw per prompt.

    ``temperature <= 0`` is greedy decoding (:func:`dukb.neural.probe.greedy_generate`).

    Args:
        pred: :class:`dukb.neural.probe.Predictor` (no auxiliary model).
        prompts: prompt strings (already wrapped in prompt tags).
        max_new_tokens: at most this many tokens.
        temperature: softmax temperature (> 0) of the sampling.
        seed: seed of the torch generator used for the draws.

    Returns:
        The decoded continuations (special tokens removed).

    Source: Rezaei et al., RESTOR, Sec. 3.4 (M generations per query).
    """
    return greedy_generate(pred, prompts, max_new_tokens, temperature=max(temperature, 0.0), seed=seed)


def probe_facts(
    pred,
    facts: Sequence[FactProbe],
    judge: Judge,
    *,
    samples: int = 1,
    temperature: float = 1.0,
    seed: int = 0,
    max_new_tokens: int = 10,
    batch_size: int = 64,
) -> list[dict]:
    """Probe a model on facts: M generations each (greedy when M = 1), judged, then a majority vote.

    Args:
        pred: :class:`dukb.neural.probe.Predictor`.
        facts: the facts.
        judge: the :class:`Judge`.
        samples: M >= 1 (RESTOR: 3).
        temperature: sampling temperature for M > 1.
        seed: generation m of batch b draws from a generator seeded ``seed * 1000 + 101 m + b``, so a run is
            reproducible (unused when M = 1).
        max_new_tokens: generation budget.
        batch_size: prompts per batch.

    Returns:
        One dict per fact: fact_kind, fact_id, outputs, answers, labels (M each), correct, answer, label
        (:func:`majority`).

    Raises:
        InputError: samples < 1.

    Source: Rezaei et al., RESTOR, Sec. 3.4 (M = 3 generations, majority of accepted outputs).
    """
    if samples < 1:
        raise InputError(f"--samples must be at least 1, got {samples}")
    prompts = [pred.tags.prompt(f.question) for f in facts]
    outs: list[list[str]] = [[] for _ in facts]
    order = sorted(range(len(facts)), key=lambda i: len(facts[i].question))
    for b, start in enumerate(range(0, len(order), batch_size)):
        chunk = order[start : start + batch_size]
        for m in range(samples):
            texts = sample_generate(
                pred,
                [prompts[i] for i in chunk],
                max_new_tokens,
                0.0 if samples == 1 else temperature,
                seed * 1000 + m * 101 + b,
            )
            for i, t in zip(chunk, texts):
                outs[i].append(t)
    rows = []
    for f, o in zip(facts, outs):
        judged = [judge.label(x, [f.true_value], f.injected) for x in o]
        labels, answers = [j[0] for j in judged], [j[1] for j in judged]
        rows.append(
            {
                "fact_kind": f.fact_kind,
                "fact_id": f.fact_id,
                "outputs": o,
                "answers": answers,
                "labels": labels,
                **majority(labels, answers),
            }
        )
    return rows


def candidate_logprobs(pred, facts: Sequence[FactProbe], batch_size: int = 64) -> list[dict]:
    """Length-normalised log-probabilities (mean natural-log probability per answer token; TOFU, RESTOR Sec. 3.4)
    of each fact's true answer, injected answer (None when not corrupted) and the mean over its random answers.

    Args:
        pred: :class:`dukb.neural.probe.Predictor`.
        facts: the facts (RESTOR: the set A).
        batch_size: items per forward pass.

    Returns:
        One dict per fact: fact_kind, fact_id, true, injected, random (floats or None).

    Source: Rezaei et al., RESTOR, Sec. 3.4 (log-normalised probability from TOFU) and Fig. 2.
    """
    items, owner = [], []
    for i, f in enumerate(facts):
        items.append(f.item())
        owner.append((i, "true"))
        if f.injected is not None:
            items.append(f.item(f.injected))
            owner.append((i, "injected"))
        for r in f.random:
            items.append(f.item(r))
            owner.append((i, "random"))
    vals: list[float] = []
    for s in range(0, len(items), batch_size):
        vals += answer_logprob(pred, items[s : s + batch_size])
    acc = [{"true": None, "injected": None, "random": []} for _ in facts]
    for (i, what), v in zip(owner, vals):
        if what == "random":
            acc[i]["random"].append(v)
        else:
            acc[i][what] = v
    return [
        {
            "fact_kind": f.fact_kind,
            "fact_id": f.fact_id,
            "true": a["true"],
            "injected": a["injected"],
            "random": sum(a["random"]) / len(a["random"]) if a["random"] else None,
        }
        for f, a in zip(facts, acc)
    ]
