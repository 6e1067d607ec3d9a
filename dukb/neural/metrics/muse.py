"""MUSE's metrics on a KB (Shi et al. 2024b, Sec. 3): VerbMem (C1), KnowMem (C2, C4), the membership inference
behind PrivLeak (C3), ratios to f_retrain, bootstrap confidence intervals and the utility-based selection rule.

On a KB, a fact's *verbatim text* is its statement sentence ("Richard Perry is Reid Perry's father.",
:func:`dukb.kb.probes.fact_statements`), which the MUSE protocol finetunes on beside the QA pairs, and its
*knowledge probe* is its QA pair.

- VerbMem(f, D) = 1/|D| Σ_{x∈D} ROUGE-L-F1(f(x[:l]), x[l+1:])  (C1): greedy continuation of the first l tokens of
  each forget text against the rest of it; ``prefix`` is l as a share of the text's tokens (the paper gives no
  value; 0.5 by default), the continuation budget is configurable.
- KnowMem(f, D) = 1/|D| Σ_{(q,a)∈D} ROUGE-L-F1(f(q), a)  (C2 on the forget set, C4 "utility" on retain_eval): the
  answer line of greedy decoding after the QA prompt.
- MIA: the scores of :mod:`dukb.neural.metrics.mia` on the statement texts, AUC with members (forget texts, or
  retain_eval texts) as the positive class against the holdout texts; PrivLeak from Min-K% Prob
  (:func:`dukb.neural.metrics.mia.privleak`).

ROUGE-L F1 is rouge-score's ``rougeL`` F-measure without stemming, as MUSE's code computes it
(swj0419/muse_bench, metrics/logger.py: ``RougeScorer(..., use_stemmer=False)``, ``mean_rougeL``); VerbMem decodes
128 tokens and scores against the first 128 tokens of the true continuation (metrics/verbmem.py,
eval.py: ``verbmem_max_new_tokens=128``). Stemming and the budget are options (``stem``, ``max_new_tokens``).
dukb's continuation ends at the end of its line (a KB statement is one line); MUSE's runs to EOS or the budget
(``stop_at_newline=False``).

KnowMem by default decodes 10 tokens after the model's QA prompt and judges the answer line. MUSE's
metrics/knowmem.py (eval.py: ``knowmem_max_new_tokens=32``) puts in-context QA examples before each question,
``"Question: {q}\\nAnswer: {a}\\n\\n"`` each, then ``"Question: {q}\\nAnswer: "``, decodes 32 tokens greedily and cuts
the output before the first ``"\\n\\n"``, ``"\\nQuestion"`` or ``"Question:"``; :func:`knowmem` computes either
(``prompt="muse"``, ``examples``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from dukb.neural.catalog import SELECTION_RULES  # the rules of select_setting, declared as data there
from dukb.neural.data import kb_texts
from dukb.neural.metrics.base import Metric, Needs
from dukb.neural.metrics.mia import item_mia_scores
from dukb.neural.probe import greedy_generate, probe

_ROUGE: dict[bool, object] = {}


def rouge_l_f1(reference: str, prediction: str, stem: bool = False) -> float:
    """ROUGE-L F1 of ``prediction`` against ``reference``, in [0, 1] (rouge-score's ``rougeL`` F-measure).

    Args:
        reference, prediction: texts (str).
        stem: Porter stemming (rouge-score's ``use_stemmer``); MUSE's code uses none, the default.

    Raises:
        nothing for str inputs (an empty string scores 0).

    Source: Lin 2004; Shi et al. 2024b (MUSE), App. C.1; swj0419/muse_bench metrics/logger.py.
    """
    if stem not in _ROUGE:
        from rouge_score import rouge_scorer

        _ROUGE[stem] = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=stem)
    return float(_ROUGE[stem].score(reference, prediction)["rougeL"].fmeasure)


def split_prefix(tokenizer, text: str, prefix: float, limit: int | None = None) -> tuple[str, str]:
    """Cut a text after its first l = round(prefix · n) tokens (1 ≤ l ≤ n − 1 for n ≥ 2 tokens).

    Args:
        limit: keep at most this many tokens of the continuation (MUSE scores against ``gt_ids[:, :max_new_tokens]``);
            None: all of it.

    Returns:
        (prefix text, true continuation text), both decoded from the token ids; a text of one token gives ("", text).

    Raises:
        ValueError: ``prefix`` outside (0, 1).

    Source: Shi et al. 2024b (MUSE), Sec. 3, C1 (prompt x[:l], score against x[l+1:]).
    """
    if not 0 < prefix < 1:
        raise ValueError(f"the VerbMem prefix share must be in (0, 1), got {prefix}")
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    if len(ids) < 2:
        return "", text
    cut = min(len(ids) - 1, max(1, round(prefix * len(ids))))
    rest = ids[cut:] if limit is None else ids[cut : cut + limit]
    return (tokenizer.decode(ids[:cut], skip_special_tokens=True), tokenizer.decode(rest, skip_special_tokens=True))


def verbmem(
    pred,
    texts: Sequence[str],
    prefix: float = 0.5,
    max_new_tokens: int = 128,
    batch_size: int = 64,
    temperature: float = 0.0,
    seed: int = 0,
    stem: bool = False,
    stop_at_newline: bool = True,
) -> list[float]:
    """VerbMem per text: ROUGE-L F1 of the greedy continuation of each text's prefix against its true continuation.

    Args:
        pred: :class:`dukb.neural.probe.Predictor` (WHP's logit transform included).
        texts: the forget texts (str).
        prefix: l as a share of each text's tokens, in (0, 1).
        max_new_tokens: continuation budget (tokens; MUSE: 128); the continuation is scored against the first
            ``max_new_tokens`` tokens of the true continuation.
        batch_size: prompts per batch.
        temperature, seed: decoding (0 = greedy; > 0 samples from softmax(logits / temperature) with ``seed``; the
            paper gives no decoding settings).
        stem: stem words before ROUGE-L (MUSE's code does not: default False).
        stop_at_newline: the continuation stops at EOS or the end of its line (dukb's default); False: at EOS or
            the budget, as MUSE's metrics/verbmem.py:25-29 (``model.generate(..., max_new_tokens)``).

    Returns:
        one ROUGE-L F1 in [0, 1] per text (mean them for VerbMem(f, D_forget)).

    Raises:
        ValueError: ``prefix`` outside (0, 1).

    Source: Shi et al. 2024b (MUSE), Sec. 3, C1.
    """

    cuts = [split_prefix(pred.tokenizer, t, prefix, max_new_tokens) for t in texts]
    out: list[float] = []
    for i in range(0, len(cuts), batch_size):
        chunk = cuts[i : i + batch_size]
        budget = _budget(pred, [p for p, _ in chunk], max_new_tokens)
        gens = greedy_generate(
            pred, [p for p, _ in chunk], budget, stop_at_newline=stop_at_newline, temperature=temperature, seed=seed + i
        )
        out += [rouge_l_f1(rest, g, stem) for (_, rest), g in zip(chunk, gens)]
    return out


def _budget(pred, prompts: Sequence[str], max_new_tokens: int) -> int:
    """``max_new_tokens``, cut so that the longest prompt plus its continuation fits the model's positions
    (``max_position_embeddings`` / ``n_positions`` of its config; the tiny model has 96), at least 1."""
    config = getattr(getattr(pred, "model", None), "config", None)
    positions = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    if not positions:
        return max_new_tokens
    longest = max((len(pred.tokenizer(p, add_special_tokens=False)["input_ids"]) for p in prompts), default=0)
    return max(1, min(max_new_tokens, int(positions) - longest - 8))  # room for the prompt template's tags


#: where MUSE's metrics/knowmem.py:50 cuts a KnowMem decode (``get_prefix_before_words_occur``), in its order
MUSE_STOP_WORDS = ("\n\n", "\nQuestion", "Question:")
#: KnowMem's prompt formats: the model's QA prompt (answer line judged) or MUSE's knowmem.py
KNOWMEM_PROMPTS = ("qa", "muse")


def muse_answer(text: str) -> str:
    """A KnowMem decode cut as MUSE's knowmem.py:7-9 and :50 cuts it: before each of :data:`MUSE_STOP_WORDS` in turn
    (``"a\\n\\nQuestion: b"`` -> ``"a"``).

    Source: swj0419/muse_bench metrics/knowmem.py (``get_prefix_before_words_occur``).
    """
    for word in MUSE_STOP_WORDS:
        text = text.split(word)[0]
    return text


def knowmem_prompt(tags, question: str, examples=(), prompt: str = "qa") -> str:
    """The KnowMem prompt of one question after its in-context examples.

    Args:
        tags: the model's :class:`dukb.neural.spec.PromptTags` (used by ``prompt="qa"``).
        question: the probed question (str); examples: QA items (``question``, ``answer``) put before it.
        prompt: "qa": each example ``tags.prompt(q) + tags.target(a) + "\\n\\n"``, then ``tags.prompt(question)``;
            "muse": MUSE's knowmem.py:25-29, each example ``"Question: {q}\\nAnswer: {a}\\n\\n"``, then
            ``"Question: {question}\\nAnswer: "``.

    Raises:
        ValueError: an unknown ``prompt``.

    Source: Shi et al. 2024b (MUSE), Sec. 3, C2; swj0419/muse_bench metrics/knowmem.py:22-29.
    """
    if prompt == "muse":
        head = "".join(f"Question: {e.question}\nAnswer: {e.answer}\n\n" for e in examples)
        return head + f"Question: {question}\nAnswer: "
    if prompt != "qa":
        raise ValueError(f"unknown KnowMem prompt {prompt!r} (choose from {', '.join(KNOWMEM_PROMPTS)})")
    return "".join(tags.prompt(e.question) + tags.target(e.answer) + "\n\n" for e in examples) + tags.prompt(question)


def knowmem_examples(pred, items, examples, prompt: str = "qa", max_new_tokens: int = 10) -> list:
    """The in-context examples KnowMem uses before ``items``: ``examples`` minus any of a probed fact, then, while
    the longest prompt and ``max_new_tokens`` overflow the model's positions (:func:`_budget`'s room), minus the
    earliest one (MUSE's 7B models never need this; the tiny model's 96 positions do).

    Args:
        pred: :class:`dukb.neural.probe.Predictor`; items: the probed QA items; examples: candidate QA items.
        prompt, max_new_tokens: as :func:`knowmem`.

    Returns:
        list of QA items, a suffix of the filtered ``examples`` (possibly empty).
    """
    probed = {(it.fact_kind, it.fact_id) for it in items}
    ex = [e for e in examples if (e.fact_kind, e.fact_id) not in probed]
    if not ex or not items:
        return ex

    def n_tokens(question, shots):
        return len(
            pred.tokenizer(knowmem_prompt(pred.tags, question, shots, prompt), add_special_tokens=False)["input_ids"]
        )

    longest = max((it.question for it in items), key=lambda q: n_tokens(q, ()))
    room = _budget(pred, [], 10**9)  # the positions beside the template's margin (10**9: the model names none)
    while ex and n_tokens(longest, ex) + max_new_tokens > room:
        ex = ex[1:]
    return ex


def knowmem(
    pred, items, max_new_tokens: int = 10, batch_size: int = 256, *, examples=(), prompt: str = "qa"
) -> list[float]:
    """KnowMem per QA item: ROUGE-L F1 of the model's answer against the gold answer (greedy decoding).

    Args:
        pred: :class:`dukb.neural.probe.Predictor`.
        items: QA items (:class:`dukb.neural.data.QAItem`).
        max_new_tokens, batch_size: decoding budget and batch size.
        examples: in-context QA items put before every question (:func:`knowmem_examples` drops those of a probed
            fact and those that do not fit); () = none (dukb's default).
        prompt: "qa" (default): the model's QA prompt, the answer line judged (:func:`dukb.neural.probe.probe`);
            "muse": MUSE's knowmem.py prompt (:func:`knowmem_prompt`) tokenised with the tokenizer's special
            tokens, the whole decode (EOS or the budget) cut by :func:`muse_answer`.

    Returns:
        one ROUGE-L F1 in [0, 1] per item, in the items' order.

    Raises:
        ValueError: an unknown ``prompt``.

    Source: Shi et al. 2024b (MUSE), Sec. 3, C2 (forget) and C4 (retain: utility); swj0419/muse_bench
    metrics/knowmem.py:12-53 and eval.py:22 (``knowmem_max_new_tokens=32``).
    """

    if not items:
        return []
    if prompt == "qa" and not examples:
        df = probe(pred, list(items), batch_size=batch_size, max_new_tokens=max_new_tokens, rouge=False, logprob=False)
        return [rouge_l_f1(a, o or "") for a, o in zip(df["answer"], df["output"])]
    ex = knowmem_examples(pred, items, examples, prompt, max_new_tokens)
    prompts = [knowmem_prompt(pred.tags, it.question, ex, prompt) for it in items]
    out: list[float] = []
    for i in range(0, len(prompts), batch_size):
        chunk = prompts[i : i + batch_size]
        budget = _budget(pred, chunk, max_new_tokens)
        if prompt == "muse":  # tokenised as knowmem.py:32-35 does, with the tokenizer's special tokens (Llama's BOS)
            ids = [pred.tokenizer(p, add_special_tokens=True)["input_ids"] for p in chunk]
            gens = greedy_generate(pred, None, budget, token_ids=ids)
        else:
            gens = greedy_generate(pred, chunk, budget, stop_at_newline=True)
        out += [
            rouge_l_f1(it.answer, muse_answer(g) if prompt == "muse" else g)
            for it, g in zip(items[i : i + batch_size], gens)
        ]
    return out


def text_mia_scores(pred, items, k: float = 0.2, batch_size: int = 32) -> dict[str, list[float]]:
    """The MIA scores of plain-text items (:func:`dukb.neural.metrics.mia.item_mia_scores`).

    Source: Shi et al. 2024a (Min-K%); Zhang et al. 2024 (Min-K%++); RWKU's released code (LOSS, Zlib).
    """

    return item_mia_scores(pred, items, k, batch_size)


def relative(value: float, reference: float) -> float | None:
    """MUSE's change relative to f_retrain, (m − m_retrain) / m_retrain, as a fraction; None when m_retrain is 0
    or either value is missing.

    Raises:
        nothing (floats in, float or None out).

    Source: Shi et al. 2024b (MUSE), Table 3.
    """
    if reference == 0 or value is None or reference is None:
        return None
    return (value - reference) / reference


def bootstrap_ci(
    values: Sequence[float], n_resamples: int = 9999, level: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of a mean (two-tailed).

    Args:
        values: the per-item values (at least one).
        n_resamples: bootstrap resamples (MUSE: 9,999).
        level: confidence level in (0, 1) (MUSE: 0.95).
        seed: seed of the resampling.

    Returns:
        (low, high) bounds of the mean.

    Raises:
        ValueError: no values, or ``level`` outside (0, 1).

    Source: Shi et al. 2024b (MUSE), App. C (scipy.stats.bootstrap, "percentile" method, 9,999 resamples, 95%).
    """

    x = np.asarray(list(values), dtype=float)
    if x.size == 0:
        raise ValueError("a bootstrap interval needs at least one value")
    if not 0 < level < 1:
        raise ValueError(f"the confidence level must be in (0, 1), got {level}")
    rng = np.random.default_rng(seed)
    means = np.empty(n_resamples)
    for lo in range(0, n_resamples, 1000):  # bounded memory
        hi = min(n_resamples, lo + 1000)
        means[lo:hi] = x[rng.integers(0, x.size, size=(hi - lo, x.size))].mean(axis=1)
    a = (1 - level) / 2
    return float(np.quantile(means, a)), float(np.quantile(means, 1 - a))


def select_setting(rows: Sequence[dict], retrain_utility: float, rule: str = "first_below_retrain") -> dict:
    """The setting of one method that MUSE reports.

    Args:
        rows: the method's rows in grid order (each with ``knowmem_retain``).
        retrain_utility: f_retrain's KnowMem on retain_eval.
        rule: "first_below_retrain" (the paper: the first setting whose utility drops below f_retrain's, else the
            last; read literally it does not reproduce the paper's Table 4, hence the alternatives), "last" (the
            strongest setting) or "closest_utility" (the utility closest to f_retrain's).

    Returns:
        the chosen row.

    Raises:
        ValueError: no rows or an unknown rule.

    Source: Shi et al. 2024b (MUSE), Sec. 4 / Table 4 (utility-based epoch and α selection).
    """
    if not rows:
        raise ValueError("no rows to select from")
    if rule == "first_below_retrain":
        for r in rows:
            if r["knowmem_retain"] < retrain_utility:
                return r
        return rows[-1]
    if rule == "last":
        return rows[-1]
    if rule == "closest_utility":
        return min(rows, key=lambda r: abs(r["knowmem_retain"] - retrain_utility))
    raise ValueError(f"unknown selection rule {rule!r} (choose from {', '.join(SELECTION_RULES)})")


def privleak_label(value: float | None, tolerance: float = 0.05) -> str:
    """MUSE's reading of a PrivLeak value (a fraction): "ok" within ±tolerance, "over" (over-unlearning) above,
    "under" below, "n/a" for None or NaN.

    Raises:
        nothing.

    Source: Shi et al. 2024b (MUSE), Sec. 3, C3 ("negligible" = within [−5%, 5%]).
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if abs(value) <= tolerance:
        return "ok"
    return "over" if value > 0 else "under"


def knowmem_metric(ctx) -> dict:
    """KnowMem inside `dukb evaluate`: mean ROUGE-L F1 of the QA answer lines on the row's forget set
    (``knowmem_forget``) and on the facts that are scored as retained knowledge (``knowmem_retain``: every
    relationship and biography outside the forget set and the row's retain-train facts).

    Raises:
        KeyError: the probe table has no ``output`` column (probing without generation).

    Source: Shi et al. 2024b (MUSE), Sec. 3, C2 and C4.
    """
    df = ctx.probe[ctx.probe["kind"] == "qa"]
    forget = {("relationship", int(i)) for i in ctx.forget_ids}
    held = {("relationship", int(i)) for i in ctx.retain_ids.get("relationships", ())} | {
        ("biography", int(i)) for i in ctx.retain_ids.get("biographies", ())
    }
    f, r = [], []
    for k, i, a, o in zip(df["fact_kind"], df["fact_id"], df["answer"], df["output"]):
        key = (k, int(i))
        if key in forget:
            f.append(rouge_l_f1(a, o or ""))
        elif key not in held:
            r.append(rouge_l_f1(a, o or ""))

    def mean(xs):
        return sum(xs) / len(xs) if xs else None

    return {"knowmem_forget": mean(f), "knowmem_retain": mean(r)}


def verbmem_metric(ctx) -> dict:
    """VerbMem inside `dukb evaluate`: ROUGE-L F1 of the continuation of the first half of each forget fact's
    statement sentence (:func:`verbmem` with its defaults). The evaluate protocol finetunes on QA only, so this
    measures how much of a forget fact's statement the model still completes, not verbatim memorisation; `dukb
    muse` trains on the statements.

    Raises:
        ValueError: the row context carries no predictor.

    Source: Shi et al. 2024b (MUSE), Sec. 3, C1.
    """

    if ctx.predictor is None:
        raise ValueError("verbmem needs the unlearned model (RowContext.predictor)")
    texts = [it.answer for it in kb_texts(ctx.kb, [("relationship", int(i)) for i in ctx.forget_ids])]
    vals = verbmem(ctx.predictor, texts)
    return {"verbmem_forget": sum(vals) / len(vals) if vals else None}


def _metrics():

    return (
        Metric(
            "knowmem",
            knowmem_metric,
            Needs(kinds=("qa",), generate=True),
            "row",
            ("knowmem_forget", "knowmem_retain"),
            "MUSE KnowMem: ROUGE-L F1 of QA answers on the forget set and on the scored retained facts",
            "Shi et al. 2024b (MUSE), Sec. 3, C2/C4",
        ),
        Metric(
            "verbmem",
            verbmem_metric,
            Needs(kinds=("qa",), model=True),
            "row",
            ("verbmem_forget",),
            "MUSE VerbMem: ROUGE-L F1 of the continuation of each forget fact's statement prefix",
            "Shi et al. 2024b (MUSE), Sec. 3, C1",
        ),
    )


KNOWMEM, VERBMEM = _metrics()

__all__ = [
    "KNOWMEM",
    "KNOWMEM_PROMPTS",
    "MUSE_STOP_WORDS",
    "SELECTION_RULES",
    "knowmem_examples",
    "knowmem_prompt",
    "muse_answer",
    "VERBMEM",
    "knowmem_metric",
    "verbmem_metric",
    "bootstrap_ci",
    "knowmem",
    "privleak_label",
    "relative",
    "rouge_l_f1",
    "select_setting",
    "split_prefix",
    "text_mia_scores",
    "verbmem",
]
