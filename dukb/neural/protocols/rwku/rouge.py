"""ROUGE-L recall as RWKU's released code computes it: the ``rouge`` package (pltrdy/rouge 1.0.1), whose ROUGE-L is
Lin's summary-level union LCS over sentences split on ".", with words split on single spaces, case and punctuation
kept, no stemming, and every count taken over *distinct* words. Torch-free.

RWKU's ``eval_forget.py`` and ``eval_neighbor.py`` (jinzhuoran/RWKU, LLaMA-Factory/src/llmtuner/eval/
eval_forget.py:98-133) generate at most 30 new tokens greedily, stop at a line break or EOS, strip the text, score
``'NOANSWER'`` in place of an empty one, and report ``Rouge().get_scores(hyps, refs, avg=True)["rouge-l"]["r"]``: the mean over the probes of
each probe's recall. :func:`rwku_rouge_l_recall` is that per-probe recall; dukb's default is rouge-score's
ROUGE-L recall with Porter stemming (:func:`dukb.neural.probe.rouge_l_recall`).

Source: Lin 2004, Sec. 3.2 (summary-level LCS, R_lcs = Σ_i |LCS_∪(r_i, C)| / m); Jin et al. 2024 (RWKU), Sec. 3.3
(ROUGE-L recall) and its released code as above; pltrdy/rouge 1.0.1 ``rouge/rouge.py`` (``Rouge._get_scores``:
``[" ".join(_.split()) for _ in hyp.split(".") if len(_) > 0]``) and ``rouge/rouge_score.py``
(``rouge_l_summary_level``, ``_union_lcs``, ``_recon_lcs``).
"""

from __future__ import annotations

from dukb import InputError
from dukb.neural.probe import rouge_l_recall
from dukb.neural.protocols.rwku.config import ROUGE_CHOICES

#: what RWKU's code scores in place of an empty (or all-blank) generation (eval_forget.py:116-117)
NO_ANSWER = "NOANSWER"


def _sentences(text: str) -> list[str]:
    """The ``rouge`` package's sentences of a text: the pieces between "."s that are not empty, each with its runs of
    whitespace collapsed to one space (a piece of blanks only becomes "", which is kept, as the package keeps it)."""
    return [" ".join(piece.split()) for piece in text.split(".") if len(piece) > 0]


def _lcs_words(ref: list[str], hyp: list[str]) -> set[str]:
    """The distinct words of the LCS of ``ref`` and ``hyp`` that the ``rouge`` package reconstructs: the DP table of
    ``_lcs``, walked back from the end, a match taken, else a step in ``ref`` when that keeps a strictly longer LCS,
    else a step in ``hyp`` (``_recon_lcs``'s tie rule, which decides which words a tied LCS holds)."""
    n, m = len(ref), len(hyp)
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            table[i][j] = table[i - 1][j - 1] + 1 if ref[i - 1] == hyp[j - 1] else max(table[i - 1][j], table[i][j - 1])
    out, i, j = set(), n, m
    while i and j:
        if ref[i - 1] == hyp[j - 1]:
            out.add(ref[i - 1])
            i, j = i - 1, j - 1
        elif table[i - 1][j] > table[i][j - 1]:
            i -= 1
        else:
            j -= 1
    return out


def rwku_rouge_l_recall(answer: str, output: str) -> float:
    """ROUGE-L recall of a generation against the gold answer, as RWKU's code computes it.

    The generation is stripped and ``'NOANSWER'`` is scored in place of an empty one; both texts are split into
    sentences on "." and into words on single spaces (case and punctuation kept, no stemming). With C the output's
    sentences and r_1..r_u the answer's:

        R = |∪_i ∪_{c ∈ C} LCS(r_i, c)| / |distinct words of the answer|,

    the union taken over the *distinct* words of each reconstructed LCS (the package's ``exclusive=True``).

    Args:
        answer: the gold answer (the reference), str.
        output: the model's generation (the answer line), str.

    Returns:
        The recall in [0, 1]; 0.0 when either text has no sentence (e.g. "..."; the package raises ValueError there).

    Source: Lin 2004, Sec. 3.2; Jin et al. 2024 (RWKU), Sec. 3.3; jinzhuoran/RWKU
    LLaMA-Factory/src/llmtuner/eval/eval_forget.py:115-133 (strip, 'NOANSWER', ``Rouge().get_scores(...)
    ["rouge-l"]["r"]``); pltrdy/rouge 1.0.1 rouge/rouge_score.py ``rouge_l_summary_level``.
    """
    hyp = _sentences(output.strip() or NO_ANSWER)
    ref = _sentences(answer)
    if not hyp or not ref:
        return 0.0
    ref_words = {w for s in ref for w in s.split(" ")}
    union: set[str] = set()
    for r in ref:
        for c in hyp:
            union |= _lcs_words(r.split(" "), c.split(" "))
    return len(union) / len(ref_words)


def rouge_scorer(name: str):
    """The per-probe ROUGE-L recall function ``(answer, output) -> float`` of a ``--rouge`` choice: "rouge-score"
    (:func:`dukb.neural.probe.rouge_l_recall`, rouge-score with stemming; dukb's default) or "rouge"
    (:func:`rwku_rouge_l_recall`, RWKU's code).

    Raises:
        InputError: another name.
    """

    if name == "rouge":
        return rwku_rouge_l_recall
    if name == "rouge-score":
        return rouge_l_recall
    raise InputError(f"unknown --rouge {name!r} (choose from {', '.join(ROUGE_CHOICES)})")


__all__ = ["NO_ANSWER", "ROUGE_CHOICES", "rouge_scorer", "rwku_rouge_l_recall"]
