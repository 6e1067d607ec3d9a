"""Calibration of controlled unlearning (Wang et al. 2024, "Unlearning with Control", Sec. 5, App. C and G) and the
deep-unlearning recall of a calibrated model (Wu et al. 2025): pure functions over result rows, shared by the
`dukb control` run (:mod:`dukb.neural.protocols.control`) and its report (:mod:`dukb.neural.protocols.control.report`); no torch.
"""

from __future__ import annotations

from dukb.solver.metrics import recall_accuracy

#: the paper's controls
CONTROL_KINDS = ("oc", "es", "mm")
#: floors relative to θ_o (App. C): PS-exact(D_t,eval), PS-perturb(D_t,eval), PS-similar(D_u)
FLOORS = {"ps_exact_retain": 0.9, "ps_perturb_retain": 0.9, "ps_similar_forget": 0.5}
#: selection modes: "full" (all three floors) or "cheap" (App. G: the PS-exact(D_t,eval) floor alone)
SELECTIONS = ("full", "cheap")


def passes(row: dict, original: dict, selection: str = "full") -> bool:
    """The calibration criterion: every floor of :data:`FLOORS` (App. G's cheap mode: PS-exact(D_t,eval) alone)
    holds relative to θ_o's scores on the same split (a floor whose score is missing is not checked).

    Source: Wang et al. 2024, App. C (PS-exact and PS-perturb on D_t,eval ≥ 0.9·orig; PS-similar on D_u
    ≥ 0.5·orig) and App. G.
    """
    keys = ["ps_exact_retain"] if selection == "cheap" else list(FLOORS)
    for k in keys:
        o, v = original.get(k), row.get(k)
        if o is None or v is None:
            continue
        if v < FLOORS[k] * o - 1e-12:
            return False
    return True


def calibrate(rows: list[dict], original: dict, selection: str = "full") -> dict | None:
    """The selected model: among rows passing :func:`passes`, the lowest PS-exact on D_u; ties go to the weaker
    setting (smaller control value). None when no row passes.

    Source: Wang et al. 2024, Sec. 5 (calibrate, then assess) and App. C.
    """
    ok = [r for r in rows if passes(r, original, selection) and r.get("ps_exact_forget") is not None]
    if not ok:
        return None
    return min(ok, key=lambda r: (r["ps_exact_forget"], float(r["value"])))


def du_recall(kb, sets: dict, row: dict, forget: list[int], retain_train: dict, heldout: bool = False) -> dict:
    """Deep-unlearning recall of a row's model: for each forget fact t, Eq. 1's recall against t's minimal deep
    unlearning sets given the facts the model no longer knows; the accuracy leaves out D_u and D_t,train (data the
    method trained on). Means over the forget facts.

    Args:
        kb: the KB; sets: forget fact -> {"sets", "sets_used"} (sets.json); row: a result row;
        forget: D_u's relationship fact_ids; retain_train: {"relationships", "biographies"} fact_ids.
        heldout: judge on the held-out forms: the row's ``forgotten_*_heldout`` facts, with the facts no held-out
            form elicited from θ_o (``heldout_unscorable_fact_ids``: counted as known) left out of the accuracy.

    Returns:
        {"du_recall", "du_accuracy", "du_targets_derivable"} (the last: forget facts whose best minimal set is not
        wholly forgotten, i.e. still derivable from what the model knows), with the suffix ``_heldout`` when
        ``heldout``; values None when the row has no such forgotten facts (no held-out forms probed); du_accuracy None when
        no forget fact leaves a fact to score (never 1.0).

    Source: Wu et al. 2025, Eq. 1-2 (recall, accuracy); Definition 1 (minimal deep unlearning sets).
    """

    sfx = "_heldout" if heldout else ""
    keys = ("du_recall" + sfx, "du_accuracy" + sfx, "du_targets_derivable" + sfx)
    if row.get("forgotten_relationships" + sfx) is None:
        return dict.fromkeys(keys)
    un = (row.get("heldout_unscorable_fact_ids") or {}) if heldout else {}
    rec, acc, derivable = [], [], 0
    for t in forget:
        entry = sets.get(t) or sets.get(str(t))
        if not entry:
            continue
        r = recall_accuracy(
            kb,
            entry["sets"],
            row["forgotten_relationships" + sfx],
            row["forgotten_biographies" + sfx],
            entry["sets_used"],
            target_fact_ids=[t],
            exclude_rel=sorted(set(forget) | set(retain_train["relationships"]) | set(un.get("relationships", ()))),
            exclude_bio=sorted(set(retain_train["biographies"]) | set(un.get("biographies", ()))),
        )
        rec.append(r.recall)
        if r.accuracy_all == r.accuracy_all:  # NaN: nothing left to score for this target, left out
            acc.append(r.accuracy_all)
        derivable += r.recall < 1.0

    def mean(xs):
        return sum(xs) / len(xs) if xs else None

    return dict(zip(keys, (mean(rec), mean(acc), derivable)))


__all__ = ["CONTROL_KINDS", "FLOORS", "SELECTIONS", "calibrate", "du_recall", "passes"]
