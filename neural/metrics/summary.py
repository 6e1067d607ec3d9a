"""Summary metrics of an evaluate run: the accuracy-recall trade-off and Acc@Superficial per method.

Per method and setting, recall and accuracy are averaged over targets; these mean points form the method's
accuracy-recall curve (Wu et al. 2025, Sec. 4, Fig. 3a: "each point is the average ... of an unlearning method with one
hyperparameter across the evaluation of 55 target facts"). Trade-off summaries (Table 1/6, Table 2/8):

- the curve is the upper envelope (best accuracy reachable at recall ≥ r) through the mean points, anchored at the
  finetuned model (recall 0, accuracy 1) and at forgetting everything (recall 1, accuracy 0), linearly
  interpolated; the paper does not spell out its interpolation, dukb documents this one;
- Acc@Recall≥0.8 = the curve's accuracy at recall 0.8; Recall@Acc≥0.8 = the largest recall whose curve accuracy is
  ≥ 0.8; AR-AUC = the area under the curve on [0, 1]. The ``observed_*`` variants use measured points only (None if
  no setting reaches the threshold);
- Acc@Superficial = mean over targets of the accuracy at the weakest setting that makes the target itself unknown
  (superficial unlearning), with the share of targets where some setting does.
"""

from __future__ import annotations

import json

from dukb.neural.metrics.base import Metric, Needs

THRESHOLD = 0.8
ACCURACY = "accuracy_all"


def setting_key(setting: dict) -> str:
    """Canonical string of a setting dict (the grid parameter and fixed hyper-parameters)."""
    return json.dumps(setting, sort_keys=True)


def strength(row: dict) -> float:
    """The swept value of a row (steps or alpha): larger means stronger unlearning."""
    return float(row["setting"][row["param"]])


def envelope(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Upper envelope of (recall, accuracy) points with anchors (0, 1) and (1, 0): sorted by recall, accuracy made
    non-increasing (best accuracy reachable at recall ≥ r)."""
    pts = sorted(set(points) | {(0.0, 1.0), (1.0, 0.0)})
    out: list[tuple[float, float]] = []
    best = -1.0
    for r, a in reversed(pts):
        best = max(best, a)
        out.append((r, best))
    out.reverse()
    # drop points dominated at equal recall
    dedup: dict[float, float] = {}
    for r, a in out:
        dedup[r] = max(a, dedup.get(r, -1.0))
    return sorted(dedup.items())


def _interp(curve, x: float) -> float:
    for (r0, a0), (r1, a1) in zip(curve, curve[1:]):
        if r0 <= x <= r1:
            return a0 if r1 == r0 else a0 + (a1 - a0) * (x - r0) / (r1 - r0)
    return curve[-1][1]


def tradeoff(points: list[tuple[float, float]], threshold: float = THRESHOLD) -> dict:
    """Acc@Recall≥t, Recall@Acc≥t and AR-AUC of mean (recall, accuracy) points (see module docstring).

    Returns:
        dict with acc_at_recall, recall_at_acc, ar_auc (curve-based, in [0, 1]) and observed_acc_at_recall,
        observed_recall_at_acc (measured points only, None when none reaches the threshold).
    """
    curve = envelope(points)
    auc = sum((r1 - r0) * (a0 + a1) / 2 for (r0, a0), (r1, a1) in zip(curve, curve[1:]))
    acc_at = _interp(curve, threshold)
    rec_at = 0.0
    for (r0, a0), (r1, a1) in zip(curve, curve[1:]):
        if a0 >= threshold:
            rec_at = r0
            if a1 >= threshold:
                rec_at = r1
            elif a0 != a1:
                rec_at = r0 + (r1 - r0) * (a0 - threshold) / (a0 - a1)
    obs_acc = [a for r, a in points if r >= threshold]
    obs_rec = [r for r, a in points if a >= threshold]
    return {"acc_at_recall": acc_at, "recall_at_acc": rec_at, "ar_auc": auc,
            "observed_acc_at_recall": max(obs_acc) if obs_acc else None,
            "observed_recall_at_acc": max(obs_rec) if obs_rec else None}


def curve_points(df, accuracy: str = ACCURACY):
    """Mean recall and accuracy per (method, setting) over targets.

    Args:
        df: results DataFrame (one row per target, method, setting).

    Returns:
        DataFrame with method, setting (JSON), strength, recall, accuracy, n_targets, target_forgotten (share).
    """
    import pandas as pd

    d = df.copy()
    d["setting_json"] = d["setting"].map(setting_key)
    d["strength"] = [strength(r) for r in d.to_dict("records")]
    g = d.groupby(["method", "setting_json"], sort=False).agg(
        strength=("strength", "first"), recall=("recall", "mean"), accuracy=(accuracy, "mean"),
        n_targets=("target", "nunique"), target_forgotten=("target_forgotten", "mean")).reset_index()
    order = {m: i for i, m in enumerate(d["method"].unique())}  # methods in the order the run lists them
    g = g.rename(columns={"setting_json": "setting"})
    g = g.assign(_o=g["method"].map(order)).sort_values(["_o", "strength"]).drop(columns="_o")
    return pd.DataFrame(g)


def superficial(df, accuracy: str = ACCURACY) -> dict:
    """Acc@Superficial per method: mean accuracy at the weakest setting that forgets the target itself.

    Returns:
        method -> {"acc_at_superficial": float | None, "share_forgotten": float in [0, 1]}.
    """
    out = {}
    for method, g in df.groupby("method", sort=False):
        accs, n = [], g["target"].nunique()
        for _, t in g.groupby("target"):
            t = t.assign(s=[strength(r) for r in t.to_dict("records")]).sort_values("s")
            hit = t[t["target_forgotten"] == True]  # noqa: E712
            if len(hit):
                accs.append(float(hit.iloc[0][accuracy]))
        out[method] = {"acc_at_superficial": sum(accs) / len(accs) if accs else None,
                       "share_forgotten": len(accs) / n if n else 0.0}
    return out


def tradeoff_metric(df, accuracy: str = ACCURACY) -> dict:
    """Per method: :func:`tradeoff` of its mean (recall, accuracy) curve points and the number of settings.

    Returns:
        method -> {acc_at_recall, recall_at_acc, ar_auc, observed_acc_at_recall, observed_recall_at_acc,
        n_settings}.

    Source: Wu et al. 2025, Table 1 and Fig. 3.
    """
    pts = curve_points(df, accuracy)
    return {method: {"n_settings": len(p), **tradeoff(list(zip(p["recall"], p["accuracy"])))}
            for method, p in pts.groupby("method", sort=False)}


def superficial_metric(df, accuracy: str = ACCURACY) -> dict:
    """Per method: Acc@Superficial and the share of targets some setting forgets (:func:`superficial`).

    Source: Wu et al. 2025, Table 2.
    """
    return {m: {"acc_at_superficial": v["acc_at_superficial"], "share_superficial": v["share_forgotten"]}
            for m, v in superficial(df, accuracy).items()}


TRADEOFF = Metric("tradeoff", tradeoff_metric, Needs(requires=("recall",)), "summary",
                  ("n_settings", "acc_at_recall", "recall_at_acc", "ar_auc", "observed_acc_at_recall",
                   "observed_recall_at_acc"),
                  "Acc@Recall≥0.8, Recall@Acc≥0.8 and AR-AUC of each method's accuracy-recall curve",
                  "Wu et al. 2025, Table 1")
ACC_AT_SUPERFICIAL = Metric("acc_at_superficial", superficial_metric, Needs(requires=("recall",)), "summary",
                            ("acc_at_superficial", "share_superficial"),
                            "accuracy at the weakest setting that forgets the target itself",
                            "Wu et al. 2025, Table 2")
