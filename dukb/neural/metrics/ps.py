"""Parameterization-strength (PS) metrics and response confidence (Wang et al. 2024, "Unlearning with Control",
Sec. 4, Eqs. 2-5; App. D).

Definition 1 (Eq. 2): with h(·; θ) greedy decoding and y the answer's tokens,

    PS(x, y; θ) = 1 − min_k { k / |y| : mtc(h(x ⊕ y_<k; θ), y_≥k) within ε },   k = 0 .. |y|,

the shortest share of the answer that must be given before greedy decoding recovers the rest (k = |y| always
matches, so PS ∈ [0, 1] and PS = 0 when no proper prefix works). Three matchers:

- **PS-exact** (Eq. 3, memorisation): the greedy continuation's first |y| − k tokens equal y_≥k;
- **PS-perturb** (Eq. 4, extrapolation): PS-exact with the question x replaced by a paraphrase x̃ (dukb's
  ``paraphrase`` probe of the same fact);
- **PS-similar** (Eq. 5, coherency): ROUGE-L *recall* with stemming of the continuation's answer line against the
  text of y_≥k is at least ε = 0.5 (the threshold rebuilt from App. B.2, Table 5 "Case 3"). The continuation may
  run ``slack`` tokens past |y| − k (recall rewards a longer correct answer, as the paper's examples do). When
  y_≥k has no word ROUGE can score (e.g. only punctuation), the decoded texts must be equal after stripping.

The search over k is a bisection (App. G suggests it; it assumes that a longer given prefix never hurts) or a linear
scan (exact minimum, |y| + 1 generations per item). Every item's queries of one round are batched.

**Response confidence** (App. D, Fig. 3; Cho et al. 2014's length normalisation): p(h(x) | x)^(1/|h(x)|) =
exp(mean log-probability of the greedy answer's tokens), EOS excluded.

On dukb's KBs most answers are one or two tokens ("father", a year), so PS-exact is close to greedy exact-match
accuracy there; longer answers (birthplaces, multi-token years) give intermediate values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from dukb import InputError
from dukb.neural.catalog import SEARCHES
from dukb.neural.data import kb_qa, qa_ids
from dukb.neural.metrics.base import Metric, Needs
from dukb.neural.probe import greedy_generate, rouge_l_recall

#: ε of PS-similar (ROUGE-L recall threshold; Wang et al. 2024, App. B.2)
SIMILAR_EPSILON = 0.5


def exact_match(reference_ids: Sequence[int], output_ids: Sequence[int], *_texts) -> bool:
    """mtc of PS-exact (Eq. 3): the first ``len(reference_ids)`` generated tokens equal the reference tokens
    (Hamming distance 0).

    Args:
        reference_ids: y_≥k (token ids); output_ids: the greedy continuation (token ids, possibly longer).

    Returns:
        bool.

    Source: Wang et al. 2024, Eq. 3 (PS-exact).
    """
    n = len(reference_ids)
    return len(output_ids) >= n and list(output_ids[:n]) == list(reference_ids)


def similar_match(epsilon: float = SIMILAR_EPSILON):
    """mtc of PS-similar (Eq. 5): ROUGE-L recall (rouge-score, stemming) of the output text against the reference
    text is at least ``epsilon``; texts without a ROUGE token must match exactly after stripping.

    Returns:
        ``match(reference_ids, output_ids, reference_text, output_text) -> bool``.
    """

    def match(_ref_ids, _out_ids, ref_text: str, out_text: str) -> bool:
        if not any(ch.isalnum() for ch in ref_text):
            return ref_text.strip() == out_text.strip()
        return rouge_l_recall(ref_text, out_text) >= epsilon

    return match


@dataclass(frozen=True)
class PSQuery:
    """One PS item: the prompt's token ids and the answer's token ids (y, EOS excluded)."""

    prompt: tuple[int, ...]
    answer: tuple[int, ...]


def ps_queries(pred, items, questions: Sequence[str] | None = None) -> list[PSQuery]:
    """Tokenise items as in training (:func:`dukb.neural.data.encode_qa`): the prompt and the answer separately
    (x and y of Wang et al. 2024, Eq. 2).

    Args:
        pred: :class:`dukb.neural.probe.Predictor`; items: QA items; questions: optional replacement questions
            (PS-perturb's x̃), one per item.

    Returns:
        list of :class:`PSQuery`.
    """
    tok, tags = pred.tokenizer, pred.tags
    out = []
    for i, it in enumerate(items):
        q = it.question if questions is None else questions[i]
        p, a = qa_ids(tok, tags, q, it.answer)  # as in training (BOS and Eval-DU's joint text where the tags ask)
        out.append(PSQuery(tuple(p), tuple(a)))
    return out


def ps_scores(
    pred,
    queries: Sequence[PSQuery],
    match=exact_match,
    *,
    search: str = "bisection",
    slack: int = 0,
    batch_size: int = 128,
) -> list[float]:
    """PS(x, y) = 1 − min_k k/|y| (Wang et al. 2024, Eq. 2) for each query.

    Args:
        pred: the :class:`dukb.neural.probe.Predictor` (any transform: WHP, ICU's prompt, RepE's steering).
        queries: :class:`PSQuery` items (an empty answer scores NaN).
        match: ``mtc(reference_ids, output_ids, reference_text, output_text) -> bool`` (:func:`exact_match`,
            :func:`similar_match`).
        search: "bisection" (assumes a longer prefix never hurts; ⌈log2(|y|+1)⌉ rounds) or "linear" (the exact
            minimum).
        slack: extra tokens generated beyond |y| − k (PS-similar); with slack the continuation is cut at its
            answer line.
        batch_size: prompts per generation batch.

    Returns:
        list of floats in [0, 1] (NaN for an empty answer), one per query.

    Raises:
        InputError: unknown search.
    """
    if search not in SEARCHES:
        raise InputError(f"unknown PS search {search!r} (choose from {', '.join(SEARCHES)})")

    tok = pred.tokenizer
    cache: dict[tuple[int, int], bool] = {}

    def run(pairs: list[tuple[int, int]]) -> None:
        """Evaluate match(k) for (query index, k) pairs not yet cached, batched by continuation length."""
        todo = sorted(
            {p for p in pairs if p not in cache},
            key=lambda p: (len(queries[p[0]].answer) - p[1], len(queries[p[0]].prompt) + p[1]),
        )
        for lo in range(0, len(todo), batch_size):
            chunk = todo[lo : lo + batch_size]
            rows = [list(queries[i].prompt) + list(queries[i].answer[:k]) for i, k in chunk]
            n_new = max(len(queries[i].answer) - k for i, k in chunk) + slack
            outs = greedy_generate(pred, None, n_new, token_ids=rows, details=True, stop_at_newline=slack > 0)
            for (i, k), o in zip(chunk, outs):
                ref = list(queries[i].answer[k:])
                # given a prefix of the answer, a line break ends the answer: the text after it is not the answer
                text = o["text"] if k == 0 else tok.decode(o["ids"], skip_special_tokens=True).split("\n", 1)[0]
                cache[(i, k)] = bool(match(ref, o["ids"], tok.decode(ref, skip_special_tokens=True), text))

    n = [len(q.answer) for q in queries]
    if search == "linear":
        run([(i, k) for i in range(len(queries)) for k in range(n[i])])
        best = [next((k for k in range(n[i]) if cache[(i, k)]), n[i]) for i in range(len(queries))]
    else:
        lo = [0] * len(queries)
        hi = list(n)  # match(|y|) holds: nothing is left to recover
        while True:
            active = [i for i in range(len(queries)) if lo[i] < hi[i]]
            if not active:
                break
            mids = {i: (lo[i] + hi[i]) // 2 for i in active}
            run([(i, m) for i, m in mids.items()])
            for i, m in mids.items():
                if cache[(i, m)]:
                    hi[i] = m
                else:
                    lo[i] = m + 1
        best = lo
    return [float("nan") if n[i] == 0 else 1.0 - best[i] / n[i] for i in range(len(queries))]


def response_confidence(pred, items, max_new_tokens: int = 10, batch_size: int = 128) -> list[float]:
    """Length-normalised likelihood of each greedy answer: exp(mean log p of its tokens) (Wang et al. 2024,
    App. D; Cho et al. 2014), the answer line of at most ``max_new_tokens`` tokens, EOS excluded.

    Args:
        pred: :class:`dukb.neural.probe.Predictor`; items: QA items.

    Returns:
        list of floats in [0, 1] (NaN when the model answers with EOS at once).
    """

    qs = ps_queries(pred, items)
    tok = pred.tokenizer
    out: list[float] = []
    for lo in range(0, len(qs), batch_size):
        rows = [list(q.prompt) for q in qs[lo : lo + batch_size]]
        for o in greedy_generate(pred, None, max_new_tokens, token_ids=rows, details=True, stop_at_newline=True):
            lps = answer_line_logprobs(tok, o["ids"], o["logprobs"])
            out.append(math.exp(sum(lps) / len(lps)) if lps else float("nan"))
    return out


def answer_line_logprobs(tokenizer, ids: Sequence[int], logprobs: Sequence[float]) -> list[float]:
    """The log-probabilities of the tokens of the answer line: leading whitespace-only tokens and everything from
    the first token holding a line break after the answer's text are dropped.

    Args:
        tokenizer: HF tokenizer; ids: generated token ids; logprobs: their log-probabilities (same length).

    Returns:
        list of floats (empty when the continuation holds no text).
    """
    out: list[float] = []
    for t, lp in zip(ids, logprobs):
        piece = tokenizer.decode([t], skip_special_tokens=True)
        if not out and not piece.strip():
            continue  # blank lead-in
        if out and "\n" in piece:
            if piece.split("\n", 1)[0].strip():
                out.append(lp)  # text then the line break, in one token
            break
        out.append(lp)
        if "\n" in piece:
            break
    return out


def _mean(xs: Sequence[float]) -> float | None:
    xs = [x for x in xs if x == x]
    return sum(xs) / len(xs) if xs else None


def ps_vector(
    pred,
    forget_items,
    retain_items,
    paraphrases: dict | None = None,
    *,
    search: str = "bisection",
    epsilon: float = SIMILAR_EPSILON,
    slack: int = 4,
    confidence: bool = True,
) -> dict:
    """The paper's 6-number PS vector (PS-exact, PS-perturb, PS-similar on the forget set D_u and on retain-eval
    D_t,eval) and the response confidence of both sets.

    Args:
        pred: the model's :class:`dukb.neural.probe.Predictor`.
        forget_items, retain_items: QA items (question4/answer4 form).
        paraphrases: (fact_kind, fact_id) -> paraphrased question x̃ (:func:`paraphrase_questions`); items without
            one are left out of PS-perturb (None: no PS-perturb).
        search, epsilon, slack: as in :func:`ps_scores` / :func:`similar_match`.
        confidence: also compute the response confidence.

    Returns:
        dict with ps_exact_forget, ps_exact_retain, ps_perturb_forget, ps_perturb_retain, ps_similar_forget,
        ps_similar_retain, confidence_forget, confidence_retain (means in [0, 1], None for an empty set) and
        n_forget, n_retain, n_perturb_forget, n_perturb_retain (item counts).

    Source: Wang et al. 2024 (Unlearning with Control), Eqs. 2-5, Sec. 5 (the 6-number vector), App. D.
    """
    out: dict = {}
    sim = similar_match(epsilon)
    for split, items in (("forget", list(forget_items)), ("retain", list(retain_items))):
        q = ps_queries(pred, items)
        out[f"ps_exact_{split}"] = _mean(ps_scores(pred, q, exact_match, search=search))
        out[f"ps_similar_{split}"] = _mean(ps_scores(pred, q, sim, search=search, slack=slack))
        if paraphrases is not None:
            para = [it for it in items if (it.fact_kind, it.fact_id) in paraphrases]
            qp = ps_queries(pred, para, [paraphrases[(it.fact_kind, it.fact_id)] for it in para])
            out[f"ps_perturb_{split}"] = _mean(ps_scores(pred, qp, exact_match, search=search))
            out[f"n_perturb_{split}"] = len(para)
        else:
            out[f"ps_perturb_{split}"] = None
        if confidence:
            out[f"confidence_{split}"] = _mean(response_confidence(pred, items))
        out[f"n_{split}"] = len(items)
    return out


def paraphrase_questions(kb) -> dict:
    """(fact_kind, fact_id) -> the paraphrased question x̃ of dukb's ``paraphrase`` probe kind (the first one per
    fact), the x̃ of PS-perturb (Wang et al. 2024, Eq. 4; TOFU paraphrases with GPT-4, dukb with templates)."""

    out: dict = {}
    for it in kb_qa(kb, ("paraphrase",)):
        out.setdefault((it.fact_kind, int(it.fact_id)), it.question)
    return out


# ------------------------------------------------------------------------------------------ registered metrics ----
def _row_items(ctx):
    """The row's forget QA items and the QA items scored as retained knowledge (neither forget nor retain-train)."""

    forget = {("relationship", int(i)) for i in ctx.forget_ids}
    held = {("relationship", int(i)) for i in ctx.retain_ids.get("relationships", ())} | {
        ("biography", int(i)) for i in ctx.retain_ids.get("biographies", ())
    }
    f, r = [], []
    for it in kb_qa(ctx.kb):
        key = (it.fact_kind, int(it.fact_id))
        if key in forget:
            f.append(it)
        elif key not in held:
            r.append(it)
    return f, r


def _metric_fn(kind: str):
    def fn(ctx) -> dict:
        if ctx.predictor is None:
            raise ValueError(f"ps_{kind} needs the unlearned model (RowContext.predictor)")
        f, r = _row_items(ctx)
        pred = ctx.predictor
        para = paraphrase_questions(ctx.kb) if kind == "perturb" else {}
        out = {}
        for split, items in (("forget", f), ("retain", r)):
            if kind == "perturb":
                items = [it for it in items if (it.fact_kind, int(it.fact_id)) in para]
                q = ps_queries(pred, items, [para[(it.fact_kind, int(it.fact_id))] for it in items])
                out[f"ps_perturb_{split}"] = _mean(ps_scores(pred, q, exact_match))
            elif kind == "similar":
                out[f"ps_similar_{split}"] = _mean(ps_scores(pred, ps_queries(pred, items), similar_match(), slack=4))
            else:
                out[f"ps_exact_{split}"] = _mean(ps_scores(pred, ps_queries(pred, items), exact_match))
                out[f"confidence_{split}"] = _mean(response_confidence(pred, items))
        return out

    fn.__name__ = f"ps_{kind}_metric"
    fn.__doc__ = (
        f"PS-{kind} of the row's unlearned model on its forget set and on the facts scored as retained "
        "knowledge (every fact outside the forget set and the row's retain-train facts); see the module "
        "docstring.\n\n    Raises:\n        ValueError: the row context carries no predictor.\n\n"
        "    Source: Wang et al. 2024 (Unlearning with Control), Eqs. 2-5."
    )
    return fn


def _metrics():

    src = "Wang et al. 2024 (Unlearning with Control), Eq. {}"
    return (
        Metric(
            "ps_exact",
            _metric_fn("exact"),
            Needs(kinds=("qa",), model=True),
            "row",
            ("ps_exact_forget", "ps_exact_retain", "confidence_forget", "confidence_retain"),
            "PS-exact (memorisation: shortest answer prefix after which greedy decoding reproduces the rest) "
            "and the response confidence, forget vs retained facts",
            src.format("2-3; App. D"),
        ),
        Metric(
            "ps_perturb",
            _metric_fn("perturb"),
            Needs(kinds=("qa",), model=True),
            "row",
            ("ps_perturb_forget", "ps_perturb_retain"),
            "PS-perturb (extrapolation: PS-exact on the paraphrased question), forget vs retained facts",
            src.format(4),
        ),
        Metric(
            "ps_similar",
            _metric_fn("similar"),
            Needs(kinds=("qa",), model=True),
            "row",
            ("ps_similar_forget", "ps_similar_retain"),
            "PS-similar (coherency: ROUGE-L recall >= 0.5 instead of exact match), forget vs retained facts",
            src.format(5),
        ),
    )


PS_EXACT, PS_PERTURB, PS_SIMILAR = _metrics()

__all__ = [
    "PSQuery",
    "PS_EXACT",
    "PS_PERTURB",
    "PS_SIMILAR",
    "SEARCHES",
    "SIMILAR_EPSILON",
    "answer_line_logprobs",
    "exact_match",
    "paraphrase_questions",
    "ps_queries",
    "ps_scores",
    "ps_vector",
    "response_confidence",
    "similar_match",
]
