"""Fact states after unlearning and the summaries built on them: the state of one fact from the clean, corrupted and
unlearned models' probe rows, the two partitions A and B, accuracy per group, and the mean log-probabilities.

Source: Rezaei et al., RESTOR: A = {clean right, corrupted wrong} with Recovery / Forget / Unchanged, B = {clean
right, corrupted right} with Degraded / Unaffected (Sec. 4.3, Tables 2 and 3); accuracy (Sec. 3.4, Table 1); mean
log-probabilities over A (Fig. 2). Torch-free.

Retain-train facts (facts stated in the retain documents the unlearning trained on, the run's ``retain_facts``) get
the state "retain-train" and stay out of A and B: a method trained to keep them is not scored on keeping them (the
retain-train / retain-eval split of MUSE, Shi et al. 2024, Sec. 3); :func:`partition` counts them in
``n_retain_train``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from dukb.kb.judge import INJECTED
from dukb.neural.restor.facts import FactProbe

#: Fact states (RESTOR Tables 2 and 3) and the state of facts outside A and B (the clean model gets them wrong).
RECOVERY, FORGET, UNCHANGED = "Recovery", "Forget", "Unchanged"
DEGRADED, UNAFFECTED = "Degraded", "Unaffected"
EXCLUDED = "excluded"
#: The state of a retain-train fact: left out of A and B (module docstring).
RETAIN_TRAIN = "retain-train"
STATES_A = (RECOVERY, FORGET, UNCHANGED)
STATES_B = (DEGRADED, UNAFFECTED)
STATES = STATES_A + STATES_B + (EXCLUDED, RETAIN_TRAIN)


def fact_state(clean: dict, corrupted: dict, unlearned: dict, in_retain: bool = False) -> str:
    """The state of one fact after unlearning (RESTOR Tables 2, 3; Sec. 4.3).

    Args:
        clean, corrupted, unlearned: probe rows (:func:`dukb.neural.restor.probing.probe_facts`) of the same
            fact: ``correct`` (majority judged true) and ``answer`` (most frequent normalised answer).
        in_retain: the fact is a retain-train fact (stated in the retain documents), bool.

    Returns:
        "retain-train" for a retain-train fact. Otherwise, over A (clean right, corrupted wrong): "Recovery"
        (unlearned right), "Unchanged" (unlearned wrong with the corrupted model's answer), "Forget" (unlearned
        wrong with another answer). Over B (both right): "Degraded" (unlearned wrong) or "Unaffected". Otherwise
        (clean wrong) "excluded".

    Source: Rezaei et al., RESTOR, Sec. 4.3 ("How do different unlearning algorithms affect model's predictions?");
    retain-train facts left out as in MUSE's retain-train / retain-eval split (Shi et al. 2024, Sec. 3).
    """
    if in_retain:
        return RETAIN_TRAIN
    if not clean["correct"]:
        return EXCLUDED
    if corrupted["correct"]:
        return UNAFFECTED if unlearned["correct"] else DEGRADED
    if unlearned["correct"]:
        return RECOVERY
    return UNCHANGED if unlearned["answer"] == corrupted["answer"] else FORGET


def retain_keys(retain_facts: Iterable) -> set[tuple[str, int]]:
    """The (fact_kind, fact_id) keys of the run's retain-train facts (config ``retain_facts``: [kind, id] pairs)."""
    return {(str(k[0]), int(k[1])) for k in retain_facts}


def fact_states(
    facts: Sequence[FactProbe],
    clean: Sequence[dict],
    corrupted: Sequence[dict],
    unlearned: Sequence[dict],
    retain_facts: Iterable = (),
) -> list[str]:
    """:func:`fact_state` of every fact, retain-train facts (``retain_facts``) marked "retain-train".

    Args:
        facts: the probed facts, in the order of the probe rows.
        clean, corrupted, unlearned: probe rows of the three models, one per fact.
        retain_facts: [fact_kind, fact_id] pairs of the retain-train facts.

    Returns:
        list of states (:data:`STATES`), one per fact.

    Raises:
        ValueError: the four sequences differ in length.

    Source: Rezaei et al., RESTOR, Sec. 4.3.
    """
    if not (len(facts) == len(clean) == len(corrupted) == len(unlearned)):
        raise ValueError("facts and the clean, corrupted and unlearned probe rows must be equally long")
    keep = retain_keys(retain_facts)
    return [
        fact_state(c, k, u, (f.fact_kind, f.fact_id) in keep) for f, c, k, u in zip(facts, clean, corrupted, unlearned)
    ]


def partition(states: Iterable[str]) -> dict:
    """Counts and percentages of the two partitions.

    Args:
        states: fact states (:data:`STATES`).

    Returns:
        dict: n_A, n_B, n_excluded, n_retain_train (retain-train facts left out of A and B) and, for each state of A
        (resp. B), its percentage of |A| (resp. |B|) under its name, None when the set is empty. Each partition sums
        to 100 when non-empty.

    Source: Rezaei et al., RESTOR, Sec. 4.3, Tables 2 and 3 (each partition's rates sum to 100).
    """
    c = Counter(states)
    n_a = sum(c[s] for s in STATES_A)
    n_b = sum(c[s] for s in STATES_B)
    out = {"n_A": n_a, "n_B": n_b, "n_excluded": c[EXCLUDED], "n_retain_train": c[RETAIN_TRAIN]}
    for s in STATES_A:
        out[s] = 100.0 * c[s] / n_a if n_a else None
    for s in STATES_B:
        out[s] = 100.0 * c[s] / n_b if n_b else None
    return out


def summarize_model(facts: Sequence[FactProbe], rows: Sequence[dict]) -> dict:
    """Accuracy of one model: over all facts, F' and the others, per fact kind and per relation/attribute, and
    the share of facts answered with the injected value.

    Returns:
        dict group -> {"n", "accuracy" (%), "injected" (% answered with the injected value)}; groups "all", "F'",
        "other", "relationship", "biography" and "rel:<predicate>".

    Source: Rezaei et al., RESTOR, Sec. 3.4 (accuracy) and Table 1; per relation: Fig. 3.
    """
    groups: dict[str, list[tuple[bool, bool]]] = {}
    for f, r in zip(facts, rows):
        v = (bool(r["correct"]), r["label"] == INJECTED)
        for g in ("all", "F'" if f.injected is not None else "other", f.fact_kind, f"rel:{f.predicate}"):
            groups.setdefault(g, []).append(v)
    return {
        g: {
            "n": len(v),
            "accuracy": 100.0 * sum(a for a, _ in v) / len(v),
            "injected": 100.0 * sum(b for _, b in v) / len(v),
        }
        for g, v in groups.items()
    }


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def logprob_means(lps: Sequence[dict]) -> dict:
    """Means over facts of the true, injected and random log-probabilities (None where a set is empty), with the
    number of facts behind each.

    Source: Rezaei et al., RESTOR, Sec. 4.3, Fig. 2 (means over the facts of A).
    """
    return {k: _mean([d[k] for d in lps]) for k in ("true", "injected", "random")} | {
        "n": len(lps),
        "n_injected": sum(d["injected"] is not None for d in lps),
    }
