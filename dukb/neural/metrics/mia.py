"""Membership inference (MIA) scores, the rank AUC and MUSE's PrivLeak: the building blocks of the MUSE and RWKU
protocols (their registration as row metrics needs the holdout split and is the next step).

Scores of one text x = x_1..x_T under a model, from its token log-probabilities log p(x_t | x_<t) (RWKU's released
code, which the RWKU paper does not give formulas for; Shi et al. 2024a for Min-K%, Zhang et al. 2024 for Min-K%++):

- LOSS (Yeom et al. 2018):  ll(x) = (1/T) Σ_t log p(x_t | x_<t)
- Zlib (Carlini et al. 2021): ll(x) / |zlib(x)|, the zlib-compressed length of x's UTF-8 bytes
- Min-K% Prob:             mean of the max(1, ⌊k·T⌋) lowest log p(x_t | x_<t)  (k = 0.2 by default)
- Min-K%++:                mean of the max(1, ⌊k·T⌋) lowest (log p(x_t | x_<t) − μ_t) / σ_t, with
                           μ_t = Σ_v p(v | x_<t) log p(v | x_<t) and σ_t² = Σ_v p(v | x_<t) (log p(v | x_<t))² − μ_t²

The number of tokens, :func:`min_k_count`, is ⌊k·T⌋ with a floor of 1, as the reference code takes it: RWKU's
``eval_mia.py`` (``k_length = int(len(token_log_probs) * ratio)``, for Min-K% and Min-K%++) and open-unlearning's
``src/evals/metrics/mia/min_k.py`` (``num_k = max(1, int(len(lp) * self.k))``); RWKU has no floor (an empty
selection gives NaN), dukb keeps open-unlearning's floor of 1 so every text with a scored token gets a score.
Shi et al. 2024a and Zhang et al. 2024 define the score over "the k% of tokens with the lowest probability"
without fixing the rounding.

Every score rises with membership (a member text is more likely under the model). :func:`auc` takes members as the
positive class, so a model that remembers its training texts has AUC > 0.5 on members vs holdout, and a model
that never saw them ≈ 0.5.

MUSE (Shi et al. 2024b, Sec. 3, C3) reports PrivLeak with the opposite orientation (the score rises with the loss,
so f_target's AUC ≈ 0 and PrivLeak(f_target) ≈ −100%): :func:`privleak` converts, so its signs match MUSE's tables
(negative = under-unlearning, positive = over-unlearning).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence

import torch  # noqa: TID253 (a model module: reached only through a command's lazy import)

from dukb.neural.data import TEXT_KIND, encode_qa

#: the MIA scores dukb computes (name -> one-line description)
MIA_SCORES = {
    "loss": "mean token log-likelihood (LOSS)",
    "zlib": "log-likelihood / zlib-compressed length",
    "mink": "Min-K% Prob: mean of the lowest k% token log-probabilities",
    "minkpp": "Min-K%++: mean of the lowest k% normalised token log-probabilities",
}


def min_k_count(k: float, n: int) -> int:
    """How many of a text's n scored tokens Min-K% and Min-K%++ average: max(1, ⌊k·n⌋).

    Args:
        k: the fraction, float in (0, 1].
        n: number of scored tokens, int ≥ 1.

    Returns:
        int in [1, n].

    Raises:
        ValueError: k outside (0, 1] or n < 1.

    Source: Shi et al. 2024a (Min-K% Prob), Zhang et al. 2024 (Min-K%++); the rounding of RWKU's released
    ``eval_mia.py`` (``int(len(token_log_probs) * ratio)``) and open-unlearning's ``mia/min_k.py``
    (``max(1, int(len(lp) * self.k))``), computed as ``int(n * k)`` like both.
    """
    if not 0 < k <= 1:
        raise ValueError(f"k must be in (0, 1], got {k}")
    if n < 1:
        raise ValueError(f"need at least one scored token, got {n}")
    return max(1, int(n * k))


def mia_scores(logits, labels, texts: Sequence[str], k: float = 0.2) -> dict[str, list[float]]:
    """The four MIA scores of each text.

    Args:
        logits: [B, L, V] next-token logits aligned with ``labels`` (position t predicts labels[:, t]), float.
        labels: [B, L] token ids scored, -100 where not scored (prompt, padding).
        texts: the B texts (for Zlib's compressed length), str.
        k: the fraction of lowest tokens for Min-K% and Min-K%++, in (0, 1].

    Returns:
        ``{"loss", "zlib", "mink", "minkpp"}`` -> B floats each (nats; higher = more member-like). A row with no
        scored token gets NaN.

    Raises:
        ValueError: k outside (0, 1]; B differs between logits, labels and texts.

    Source: RWKU (Jin et al. 2024), released code's MIA; Shi et al. 2024a (Min-K%); Zhang et al. 2024 (Min-K%++);
    Carlini et al. 2021 (Zlib); Yeom et al. 2018 (LOSS).
    """

    if not 0 < k <= 1:
        raise ValueError(f"k must be in (0, 1], got {k}")
    if not (logits.shape[0] == labels.shape[0] == len(texts)):
        raise ValueError("logits, labels and texts must have the same batch size")
    logp_all = torch.log_softmax(logits.float(), dim=-1)  # [B, L, V]
    mask = labels != -100
    safe = torch.where(mask, labels, torch.zeros_like(labels))
    tok = logp_all.gather(-1, safe[..., None]).squeeze(-1)  # [B, L]
    p = logp_all.exp()
    mu = (p * logp_all).sum(-1)
    sigma = ((p * logp_all.square()).sum(-1) - mu.square()).clamp(min=1e-12).sqrt()
    norm = (tok - mu) / sigma
    out = {name: [] for name in MIA_SCORES}
    for b in range(len(texts)):
        m = mask[b]
        n = int(m.sum())
        if n == 0:
            for name in out:
                out[name].append(float("nan"))
            continue
        lp, nz = tok[b][m], norm[b][m]
        ll = float(lp.mean())
        take = min_k_count(k, n)
        out["loss"].append(ll)
        out["zlib"].append(ll / len(zlib.compress(texts[b].encode("utf-8"))))
        out["mink"].append(float(torch.topk(lp, take, largest=False).values.mean()))
        out["minkpp"].append(float(torch.topk(nz, take, largest=False).values.mean()))
    return out


def item_mia_scores(pred, items, k: float = 0.2, batch_size: int = 32) -> dict[str, list[float]]:
    """The four MIA scores of QA or plain-text items under a predictor.

    A QA item is scored on its answer tokens (the prompt is context), a :data:`dukb.neural.data.TEXT_KIND` item on
    every token but the first; the closing EOS never counts. Zlib compresses the text the model reads (prompt +
    answer, or the sentence).

    Args:
        pred: :class:`dukb.neural.probe.Predictor` (its ``logits`` include WHP's transform).
        items: :class:`dukb.neural.data.QAItem` list.
        k: Min-K% share in (0, 1].
        batch_size: items per forward pass.

    Returns:
        score name -> one float per item (higher = more member-like).

    Raises:
        ValueError: ``k`` outside (0, 1].

    Source: RWKU's released code (LOSS, Zlib); Shi et al. 2024a (Min-K%); Zhang et al. 2024 (Min-K%++).
    """

    out: dict[str, list[float]] = {name: [] for name in MIA_SCORES}
    items = list(items)
    eos = pred.tokenizer.eos_token_id
    for i in range(0, len(items), batch_size):
        chunk = items[i : i + batch_size]
        batch = encode_qa(pred.tokenizer, pred.tags, chunk, pred.device)
        labels = batch["labels"]
        if eos is not None:
            labels = torch.where(labels == eos, torch.full_like(labels, -100), labels)
        with torch.no_grad():
            logits = pred.logits(batch)
        texts = [
            it.answer if it.kind == TEXT_KIND else pred.tags.prompt(it.question) + pred.tags.target(it.answer)
            for it in chunk
        ]
        s = mia_scores(logits[:, :-1], labels[:, 1:], texts, k=k)
        for name in out:
            out[name] += s[name]
    return out


def auc(members: Sequence[float], nonmembers: Sequence[float]) -> float:
    """Area under the ROC curve with members as the positive class: the probability that a random member scores
    above a random non-member, ties counting one half (the Mann–Whitney U statistic / (m·n)), from the ranks in
    O((m + n) log(m + n)).

    Args:
        members, nonmembers: scores (floats; higher = more member-like); NaN is not allowed.

    Returns:
        AUC in [0, 1]: 1 = perfect separation, 0.5 = no separation (e.g. identical score lists).

    Raises:
        ValueError: an empty list, or a NaN score.

    Source: Mann & Whitney 1947; the AUC-ROC of MUSE (Shi et al. 2024b, C3) and RWKU's MIA.
    """
    m, n = len(members), len(nonmembers)
    if m == 0 or n == 0:
        raise ValueError("AUC needs at least one member and one non-member score")
    pooled = [(float(s), 1) for s in members] + [(float(s), 0) for s in nonmembers]
    if any(math.isnan(s) for s, _ in pooled):
        raise ValueError("AUC scores must not be NaN")
    pooled.sort(key=lambda x: x[0])
    rank_sum, i = 0.0, 0
    while i < len(pooled):  # average ranks over ties
        j = i
        while j < len(pooled) and pooled[j][0] == pooled[i][0]:
            j += 1
        mean_rank = (i + 1 + j) / 2
        rank_sum += mean_rank * sum(lab for _, lab in pooled[i:j])
        i = j
    u = rank_sum - m * (m + 1) / 2
    return u / (m * n)


def privleak(auc_unlearn: float, auc_retrain: float) -> float:
    """MUSE's PrivLeak from member-positive AUCs (this module's orientation), as a fraction (×100 for %):

        PrivLeak = (AUC'(f_unlearn) − AUC'(f_retrain)) / AUC'(f_retrain),  AUC' = 1 − AUC,

    where AUC' is MUSE's orientation (the score rises with the loss; Min-K% Prob in the paper). 0 for f_retrain
    itself; ≈ −1 for a model that still remembers the forget set (under-unlearning); > 0 for over-unlearning.

    Args:
        auc_unlearn, auc_retrain: member-positive AUCs in [0, 1] (forget vs holdout).

    Returns:
        PrivLeak as a fraction.

    Raises:
        ValueError: f_retrain's AUC is 1 (AUC' = 0: PrivLeak undefined).

    Source: Shi et al. 2024b (MUSE), Sec. 3, C3.
    """
    ref = 1.0 - auc_retrain
    if ref <= 0:
        raise ValueError("PrivLeak is undefined when f_retrain separates the forget set perfectly (AUC 1)")
    return ((1.0 - auc_unlearn) - ref) / ref


__all__ = ["MIA_SCORES", "auc", "item_mia_scores", "mia_scores", "privleak"]
