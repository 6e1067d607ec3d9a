"""Per-fact text metrics of an unlearned model, split into the forget set and the other facts: ROUGE-L recall of
the QA answers (MUSE's KnowMem uses ROUGE-L; Shi et al. 2024, Sec. 3) and the length-normalised log-probability of
the gold answers (mean natural-log probability per answer token)."""

from __future__ import annotations

from dukb.neural.metrics.base import Metric, Needs, RowContext


def _split_means(ctx: RowContext, column: str) -> tuple[float | None, float | None]:
    qa = ctx.probe[ctx.probe["kind"] == "qa"]
    forget = set(ctx.forget_ids)
    retain = {("relationship", i) for i in ctx.retain_ids.get("relationships", [])} | {
        ("biography", i) for i in ctx.retain_ids.get("biographies", [])
    }
    keys = list(zip(qa["fact_kind"], qa["fact_id"].astype(int)))
    in_forget = [k[0] == "relationship" and k[1] in forget for k in keys]
    other = [not f and k not in retain for f, k in zip(in_forget, keys)]
    vals = qa[column].astype(float).tolist()
    f = [v for v, m in zip(vals, in_forget) if m]
    o = [v for v, m in zip(vals, other) if m]
    return (sum(f) / len(f) if f else None), (sum(o) / len(o) if o else None)


def rouge_l(ctx: RowContext) -> dict:
    """Mean ROUGE-L recall (rouge-score, stemming) of the QA outputs on the forget facts and on the other facts
    (retain-train facts excluded), each in [0, 1] (None when the split is empty).

    Source: Lin 2004 (ROUGE-L); Shi et al. 2024 (MUSE), Sec. 3, KnowMem.
    """
    f, o = _split_means(ctx, "rouge_l")
    return {"rouge_l_forget": f, "rouge_l_other": o}


def answer_logprob(ctx: RowContext) -> dict:
    """Mean length-normalised log-probability (nats per answer token, ≤ 0) of the gold answers of the forget facts
    and of the other facts (retain-train facts excluded; None when a split is empty).

    Source: Wu et al. 2025, App. C (answer likelihood); Maini et al. 2024 (TOFU's probability).
    """
    f, o = _split_means(ctx, "logprob")
    return {"logprob_forget": f, "logprob_other": o}


ROUGE_L = Metric(
    "rouge_l",
    rouge_l,
    Needs(kinds=("qa",), generate=True, rouge=True),
    "row",
    ("rouge_l_forget", "rouge_l_other"),
    "mean ROUGE-L recall of QA answers, forget vs other facts",
    "Shi et al. 2024 (MUSE), Sec. 3",
)
ANSWER_LOGPROB = Metric(
    "logprob",
    answer_logprob,
    Needs(kinds=("qa",), logprob=True),
    "row",
    ("logprob_forget", "logprob_other"),
    "mean answer log-probability per token, forget vs other facts",
    "Wu et al. 2025, App. C",
)
