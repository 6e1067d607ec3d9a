"""The summary metrics of an evaluate run, as the metric registry holds them (:data:`dukb.neural.catalog.METRICS`):
``tradeoff`` (the accuracy-recall trade-off per method, with Success-DU and the held-out forms' reading) and
``acc_at_superficial`` (Wu et al. 2025, Tables 1 and 2, Definition 2).

The rules they apply (the paper's per-target rule, the mean envelope, the best setting) are those of
:mod:`dukb.neural.metrics.summary`, which documents them.
"""

from __future__ import annotations

import math
from collections import Counter

from dukb.neural.metrics.base import Metric, Needs
from dukb.neural.metrics.summary import (
    ACCURACY,
    THRESHOLD,
    best_setting,
    curve_points,
    heldout_points,
    per_target_tradeoff,
    population_mean_std,
    setting_label,
    superficial,
    targets_by_method,
    tradeoff,
)


def tradeoff_metric(df, accuracy: str = ACCURACY) -> dict:
    """Per method: the paper's per-target trade-off (:func:`per_target_tradeoff`: mean and std over targets), the
    mean-envelope variant (:func:`tradeoff` of the mean curve points, as ``*_envelope`` and ``observed_*``),
    Success-DU (:func:`success_summary`) and the number of settings.

    Args:
        df: result rows (pandas DataFrame).
        accuracy: the accuracy column, str.

    Returns:
        method -> {n_settings, acc_at_recall, acc_at_recall_std, recall_at_acc, recall_at_acc_std, ar_auc,
        ar_auc_std, n, n_skipped_targets, n_skipped_rows, acc_at_recall_envelope, recall_at_acc_envelope,
        ar_auc_envelope, observed_acc_at_recall, observed_recall_at_acc, the :data:`SUCCESS_FIELDS` and the
        :data:`HELDOUT_FIELDS`} (a metric over no scored target is None).

    Source: Wu et al. 2025, Table 1/6, Definition 2; figure notebook of wrh14/deep_unlearning (module docstring).
    """
    pts = curve_points(df, accuracy)
    target = per_target_tradeoff(df, accuracy)
    success = success_summary(df, accuracy)
    held = heldout_tradeoff(df)
    out = {}
    for method, p in pts.groupby("method", sort=False):
        p = p[p["accuracy"].notna()]  # a setting no row of which was scored has no mean point
        env = (
            tradeoff(list(zip(p["recall"], p["accuracy"])))
            if len(p)
            else dict.fromkeys(
                ("acc_at_recall", "recall_at_acc", "ar_auc", "observed_acc_at_recall", "observed_recall_at_acc")
            )
        )
        out[method] = {
            "n_settings": int(pts[pts["method"] == method]["setting"].nunique()),
            **target.get(method, {}),
            **{f"{k}_envelope": env[k] for k in ("acc_at_recall", "recall_at_acc", "ar_auc")},
            "observed_acc_at_recall": env["observed_acc_at_recall"],
            "observed_recall_at_acc": env["observed_recall_at_acc"],
            **success.get(method, dict.fromkeys(SUCCESS_FIELDS)),
            **held.get(method, {}),
        }
    return out


#: Summary fields of :func:`heldout_tradeoff`.
HELDOUT_FIELDS = (
    "acc_at_recall_heldout",
    "acc_at_recall_heldout_std",
    "recall_at_acc_heldout",
    "recall_at_acc_heldout_std",
    "ar_auc_heldout",
    "ar_auc_heldout_std",
    "n_heldout",
    "n_skipped_targets_heldout",
    "n_skipped_rows_heldout",
    "success_du_heldout",
    "success_du_heldout_std",
    "success_du_heldout_n",
    "success_du_heldout_setting",
    "region_setting_heldout",
)


#: Summary fields of :func:`success_summary`.
SUCCESS_FIELDS = ("success_du", "success_du_std", "success_du_n", "success_du_setting", "success_du_any")


def heldout_tradeoff(df) -> dict:
    """Per method: the paper's trade-off rule and Success-DU on the held-out probe forms, and the first setting
    whose mean held-out point lies in the region (recall ≥ 0.8 and accuracy ≥ 0.8).

    Args:
        df: result rows (pandas DataFrame) with ``recall_heldout`` and ``accuracy_all_heldout``.

    Returns:
        method -> {f: value for f in :data:`HELDOUT_FIELDS`} (``region_setting_heldout``: the setting's label or
        None; the others as :func:`per_target_tradeoff` and :func:`success_summary` name them, with ``_heldout``);
        {} when no row has held-out scores.

    Source: Wu et al. 2025, Table 1 rule (:func:`per_target_tradeoff`) over
    :mod:`dukb.neural.metrics.heldout`'s scores.
    """
    d = heldout_points(df)
    if not len(d):
        return {}
    target = per_target_tradeoff(d)
    success = success_summary(d) if "success_du" in d.columns else {}
    out = {}
    for method, p in curve_points(d).groupby("method", sort=False):
        inside = [r["label"] for r in p.to_dict("records") if r["recall"] >= THRESHOLD and r["accuracy"] >= THRESHOLD]
        sd = success.get(method, {})
        out[method] = {
            **{
                f"{k}_heldout" if not k.endswith("_std") else f"{k[:-4]}_heldout_std": v
                for k, v in target.get(method, {}).items()
            },
            **{f"success_du_heldout{k[10:]}": sd.get(k) for k in SUCCESS_FIELDS if k != "success_du_any"},
            "region_setting_heldout": inside[0] if inside else None,
        }
    return out


def chosen_settings(labels) -> str:
    """The best settings chosen over targets as one label: each setting with its number of targets, most chosen
    first (``steps=4 ×6, steps=2 ×3, none ×2``; "none": no setting keeps accuracy ≥ 0.8).

    Args:
        labels: one label per target (str, or None for a target without a best setting).

    Returns:
        str ("–" for no target).

    Source: the best setting of Wu et al. 2025, Table 1's rule (:func:`best_setting`).
    """

    def value(label: str) -> float:  # the swept value of "steps=4", for ties in count (weaker setting first)
        try:
            return float(label.rsplit("=", 1)[1])
        except (IndexError, ValueError):
            return math.inf

    counts = Counter("none" if x is None else x for x in labels)
    return (
        ", ".join(
            f"{k} ×{n}"
            for k, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0] == "none", value(kv[0]), kv[0]))
        )
        or "–"
    )


def success_summary(df, accuracy: str = ACCURACY) -> dict:
    """Per method: Success-DU at the best setting (the setting the paper's per-target rule selects,
    :func:`best_setting`) and over any setting.

    Rows whose accuracy is null/NaN cannot be a best setting (their accuracy is unknown); a target without a
    scored row, or whose best setting lacks a ``success_du`` value, is left out.

    Args:
        df: result rows (pandas DataFrame with method, target, setting, param, recall, ``accuracy``, success_du).
        accuracy: the accuracy column, str.

    Returns:
        method -> {success_du: mean over targets of the row at the target's best setting (0 for a target without
        one), success_du_std: population std, success_du_n: targets counted, success_du_setting: the settings chosen
        (:func:`chosen_settings`), success_du_any: share of targets some setting deeply unlearns, whatever its
        accuracy (not comparable to the paper)}; methods without any ``success_du`` value are absent.

    Source: Wu et al. 2025, Definition 2 (deep unlearning) and Table 1 (Recall@Acc≥0.8 selects the setting);
    Success-DU of the paper's v4.
    """
    if "success_du" not in df.columns:
        return {}
    import pandas as pd

    d = df.assign(success_du=pd.to_numeric(df["success_du"], errors="coerce").astype(float))
    out = {}
    for method, (targets, _rows, _skipped) in targets_by_method(d, accuracy, THRESHOLD).items():
        vals, labels = [], []
        for t in targets:
            recs = t.to_dict("records")
            i = best_setting([(r["recall"], r[accuracy]) for r in recs])
            v = 0.0 if i is None else recs[i]["success_du"]
            if v != v:  # the chosen row has no Success-DU
                continue
            vals.append(float(v))
            labels.append(None if i is None else setting_label(recs[i]["setting"], recs[i].get("param")))
        any_ = d[(d["method"] == method) & d["success_du"].notna()].groupby("target")["success_du"].max()
        if not vals and not len(any_):
            continue
        mean, std = population_mean_std(vals)
        out[method] = {
            "success_du": mean,
            "success_du_std": std,
            "success_du_n": len(vals),
            "success_du_setting": chosen_settings(labels) if vals else None,
            "success_du_any": float(any_.mean()) if len(any_) else None,
        }
    return out


def superficial_metric(df, accuracy: str = ACCURACY) -> dict:
    """Per method: Acc@Superficial and the share of targets some setting forgets (:func:`superficial`).

    Source: Wu et al. 2025, Table 2.
    """
    return {
        m: {
            "acc_at_superficial": v["acc_at_superficial"],
            "acc_at_superficial_std": v["acc_at_superficial_std"],
            "acc_at_superficial_n": v["n"],
            "acc_at_superficial_weakest": v["acc_at_superficial_weakest"],
            "share_superficial": v["share_forgotten"],
        }
        for m, v in superficial(df, accuracy).items()
    }


TRADEOFF = Metric(
    "tradeoff",
    tradeoff_metric,
    Needs(requires=("recall",)),
    "summary",
    (
        "n_settings",
        "acc_at_recall",
        "acc_at_recall_std",
        "recall_at_acc",
        "recall_at_acc_std",
        "ar_auc",
        "ar_auc_std",
        "acc_at_recall_envelope",
        "recall_at_acc_envelope",
        "ar_auc_envelope",
        "n",
        "n_skipped_targets",
        "n_skipped_rows",
        "observed_acc_at_recall",
        "observed_recall_at_acc",
    )
    + SUCCESS_FIELDS
    + HELDOUT_FIELDS,
    "Acc@Recall≥0.8, Recall@Acc≥0.8 and AR-AUC (per target, mean ± std; and off the mean envelope), Success-DU",
    "Wu et al. 2025, Table 1, Def. 2",
)


ACC_AT_SUPERFICIAL = Metric(
    "acc_at_superficial",
    superficial_metric,
    Needs(requires=("recall",)),
    "summary",
    (
        "acc_at_superficial",
        "acc_at_superficial_std",
        "acc_at_superficial_n",
        "acc_at_superficial_weakest",
        "share_superficial",
    ),
    "per target the best accuracy among settings that forget the target itself (0 if none), mean ± std",
    "Wu et al. 2025, Table 2",
)
