"""Summary metrics of an evaluate run: the accuracy-recall trade-off, Success-DU and Acc@Superficial per method.

Trade-off summaries (Wu et al. 2025, Table 1/6, Figs. 4-5; the benchmark's figure notebook "Unlearning Evaluation --
Final Paper Figure Generation.ipynb", wrh14/deep_unlearning commit 20c927b, cells 10, 17, 18 and 20):

**The paper's rule (default: ``acc_at_recall``, ``recall_at_acc``, ``ar_auc``), per target.** For one target and
one method, the observed (recall, accuracy_all) points of the sweep are sorted by recall and anchored with
(recall 0, accuracy 1) in front and (recall 1, accuracy 0) at the end; then

- Acc@Recall≥τ = the largest accuracy among those points with recall ≥ τ,
- Recall@Acc≥τ = the largest recall among those points with accuracy ≥ τ,
- AR-AUC = the trapezoid area of those points in that order,

and the summary is the mean over targets, with the population standard deviation (numpy's default ``std``,
ddof 0) in ``*_std``. The notebook's code, verbatim::

    sorted_rank = np.argsort(rec_list)                                       # cell 10
    ...
    y = all_acc_list
    y = np.concatenate([np.ones(1), y, np.zeros(1)])                         # cells 17, 18, 20
    rec_list = np.concatenate([np.zeros(1), rec_list, np.ones(1)])
    if thr is None:
        all_data_acc_at_rec_list.append(auc(rec_list, y))                    # sklearn.metrics.auc
    else:
        all_data_acc_at_rec_list.append(y[rec_list >= thr].max())            # Acc@Recall>=thr
    ...
    all_data_acc_at_rec_list.append(rec_list[y >= thr].max())                # Recall@Acc>=thr (cell 18)
    avg_acc_at_rec_list = (np.asarray(all_data_acc_at_rec_list).mean(), np.asarray(all_data_acc_at_rec_list).std())

Where dukb differs from that code, and why: (1) ties in recall keep the sweep's order (weaker setting first; a
stable sort), where ``np.argsort``'s default quicksort leaves the order of equal recalls unspecified; the order of
tied points changes AR-AUC, so dukb fixes it. (2) The notebook skips a target with fewer than 5 sweep points
(``required_len``); dukb uses every target with at least one point of the method (``n_settings`` says how many
settings the method has). (3) The y axis is ``accuracy_all`` (the notebook's "Accuracy" = ``all_acc_list``).

**The mean-envelope variant (``*_envelope``; dukb's earlier default).** Per method and setting, recall and accuracy
are averaged over targets (the paper's average curves, Fig. 3a); the curve is the upper envelope (best accuracy
reachable at recall ≥ r) through these mean points anchored at (0, 1) and (1, 0), linearly interpolated;
Acc@Recall≥0.8 is its accuracy at recall 0.8, Recall@Acc≥0.8 the largest recall where it is ≥ 0.8, AR-AUC its area.
The ``observed_*`` values use the measured mean points only (None if no setting reaches the threshold).

**Success-DU** (Definition 2 of the paper: the target is not in Ω(K \\ U_A, R); row field ``success_du``, 1 or 0,
:func:`dukb.neural.metrics.recall.success_du`). Per method: ``success_du`` = the mean over targets at the best
setting (the setting with the highest mean; ties: higher mean accuracy, then the weaker setting),
``success_du_setting`` = that setting, ``success_du_any`` = the share of targets some setting deeply unlearns.

**Acc@Superficial** = mean over targets of the accuracy at the weakest setting that makes the target itself unknown
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
    """The mean-envelope variant: Acc@Recall≥t, Recall@Acc≥t and AR-AUC read off the interpolated upper envelope of
    mean (recall, accuracy) points (module docstring; dukb's rule, not the paper's: see :func:`target_tradeoff`).

    Args:
        points: (recall, accuracy) pairs, floats in [0, 1] (one per setting, each a mean over targets).
        threshold: τ, float.

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


def anchored(points) -> list[tuple[float, float]]:
    """The points of one target's curve as the benchmark's figure code orders them: (0, 1), the observed points
    sorted by recall (ties keep the given order: a stable sort), (1, 0).

    Args:
        points: (recall, accuracy) pairs of one target and method, in sweep order (weaker setting first).

    Returns:
        list of (recall, accuracy) float pairs, len(points) + 2 long.

    Source: figure notebook of wrh14/deep_unlearning, cells 10 and 17 (``np.argsort(rec_list)``, then
    ``np.concatenate([np.zeros(1), rec_list, np.ones(1)])`` and ``np.concatenate([np.ones(1), y, np.zeros(1)])``).
    """
    pts = sorted(((float(r), float(a)) for r, a in points), key=lambda p: p[0])
    return [(0.0, 1.0), *pts, (1.0, 0.0)]


def target_tradeoff(points, threshold: float = THRESHOLD) -> dict:
    """The paper's trade-off numbers of one target: Acc@Recall≥τ, Recall@Acc≥τ and AR-AUC of its anchored points.

    Args:
        points: (recall, accuracy) pairs of one target and method (floats in [0, 1]), in sweep order.
        threshold: τ, float.

    Returns:
        dict: acc_at_recall = max accuracy over the anchored points with recall ≥ τ; recall_at_acc = max recall over
        those with accuracy ≥ τ; ar_auc = trapezoid area of the anchored points in recall order (all in [0, 1];
        the anchors make each defined).

    Source: figure notebook of wrh14/deep_unlearning, cells 17, 18, 20: ``y[rec_list >= thr].max()``,
    ``rec_list[y >= thr].max()``, ``auc(rec_list, y)`` (sklearn.metrics.auc, the trapezoid rule).
    """
    pts = anchored(points)
    auc = sum((r1 - r0) * (a0 + a1) / 2 for (r0, a0), (r1, a1) in zip(pts, pts[1:]))
    return {"acc_at_recall": max(a for r, a in pts if r >= threshold),
            "recall_at_acc": max(r for r, a in pts if a >= threshold), "ar_auc": auc}


def _mean_std(xs: list[float]) -> tuple[float | None, float | None]:
    if not xs:
        return None, None
    m = sum(xs) / len(xs)
    return m, (sum((x - m) ** 2 for x in xs) / len(xs)) ** 0.5  # population std, as numpy's .std()


def per_target_tradeoff(df, accuracy: str = ACCURACY, threshold: float = THRESHOLD) -> dict:
    """Per method: the mean and standard deviation over targets of :func:`target_tradeoff`.

    Args:
        df: result rows (pandas DataFrame with method, target, setting, param, recall and ``accuracy``).
        accuracy: the accuracy column (the y axis), str.
        threshold: τ, float.

    Returns:
        method -> {acc_at_recall, acc_at_recall_std, recall_at_acc, recall_at_acc_std, ar_auc, ar_auc_std}
        (floats; None without rows).

    Source: Wu et al. 2025, Table 1/6; figure notebook of wrh14/deep_unlearning, cell 17
    (``(np.asarray(all_data_acc_at_rec_list).mean(), np.asarray(all_data_acc_at_rec_list).std())``).
    """
    out = {}
    for method, g in df.groupby("method", sort=False):
        per: dict[str, list[float]] = {"acc_at_recall": [], "recall_at_acc": [], "ar_auc": []}
        for _, t in g.groupby("target", sort=False):
            t = t.assign(_s=[strength(r) for r in t.to_dict("records")]).sort_values("_s", kind="stable")
            v = target_tradeoff(list(zip(t["recall"], t[accuracy])), threshold)
            for k in per:
                per[k].append(v[k])
        row = {}
        for k, xs in per.items():
            row[k], row[f"{k}_std"] = _mean_std(xs)
        out[method] = row
    return out


def curve_points(df, accuracy: str = ACCURACY):
    """Mean recall and accuracy per (method, setting) over targets.

    Args:
        df: results DataFrame (one row per target, method, setting).

    Returns:
        DataFrame with method, setting (JSON), strength, recall, accuracy, n_targets, target_forgotten (share) and,
        when the rows carry it, success_du (share of targets deeply unlearned, Definition 2 of the paper).
    """
    import pandas as pd

    d = df.copy()
    d["setting_json"] = d["setting"].map(setting_key)
    d["strength"] = [strength(r) for r in d.to_dict("records")]
    agg = dict(strength=("strength", "first"), recall=("recall", "mean"), accuracy=(accuracy, "mean"),
               n_targets=("target", "nunique"), target_forgotten=("target_forgotten", "mean"))
    if "success_du" in d.columns:
        d["success_du"] = d["success_du"].astype(float)
        agg["success_du"] = ("success_du", "mean")
    g = d.groupby(["method", "setting_json"], sort=False).agg(**agg).reset_index()
    order = {m: i for i, m in enumerate(d["method"].unique())}  # methods in the order the run lists them
    g = g.rename(columns={"setting_json": "setting"})
    g = g.assign(_o=g["method"].map(order)).sort_values(["_o", "strength"]).drop(columns="_o")
    return pd.DataFrame(g)


def superficial(df, accuracy: str = ACCURACY) -> dict:
    """Acc@Superficial per method, as the Eval-DU figure code computes it, and dukb's earlier reading.

    The paper's rule (figure notebook, cell 19): per target, the largest accuracy among the settings that make the
    target itself unknown, with an anchor point (accuracy 0, target unknown) appended, so a target no setting forgets
    scores 0; then the mean and the population std over targets::

        y = np.concatenate([all_acc_list, np.zeros(1)])
        target_unlearn_list = np.concatenate([target_unlearn_list, np.ones(1)])
        all_data_acc_at_rec_list.append(y[target_unlearn_list == 1].max())

    The earlier reading (``acc_at_superficial_weakest``): the accuracy at the weakest setting that forgets the
    target, averaged over the targets some setting forgets.

    Args:
        df: result rows (pandas DataFrame with method, target, setting, param, target_forgotten and ``accuracy``).
        accuracy: the accuracy column, str.

    Returns:
        method -> {"acc_at_superficial": float, "acc_at_superficial_std": float, "acc_at_superficial_weakest":
        float | None, "share_forgotten": float in [0, 1]}.

    Source: Wu et al. 2025, Table 2; wrh14/deep_unlearning commit 20c927b, notebooks/"Unlearning Evaluation -- Final
    Paper Figure Generation.ipynb", cell 19.
    """
    out = {}
    for method, g in df.groupby("method", sort=False):
        paper, weakest, n = [], [], g["target"].nunique()
        for _, t in g.groupby("target"):
            t = t.assign(s=[strength(r) for r in t.to_dict("records")]).sort_values("s")
            hit = t[t["target_forgotten"] == True]  # noqa: E712
            paper.append(max([float(a) for a in hit[accuracy]] + [0.0]))
            if len(hit):
                weakest.append(float(hit.iloc[0][accuracy]))
        mean, std = _mean_std(paper)
        out[method] = {"acc_at_superficial": mean, "acc_at_superficial_std": std,
                       "acc_at_superficial_weakest": sum(weakest) / len(weakest) if weakest else None,
                       "share_forgotten": len(weakest) / n if n else 0.0}
    return out


def tradeoff_metric(df, accuracy: str = ACCURACY) -> dict:
    """Per method: the paper's per-target trade-off (:func:`per_target_tradeoff`: mean and std over targets), the
    mean-envelope variant (:func:`tradeoff` of the mean curve points, as ``*_envelope`` and ``observed_*``),
    Success-DU (:func:`success_summary`) and the number of settings.

    Args:
        df: result rows (pandas DataFrame).
        accuracy: the accuracy column, str.

    Returns:
        method -> {n_settings, acc_at_recall, acc_at_recall_std, recall_at_acc, recall_at_acc_std, ar_auc,
        ar_auc_std, acc_at_recall_envelope, recall_at_acc_envelope, ar_auc_envelope, observed_acc_at_recall,
        observed_recall_at_acc, success_du, success_du_setting, success_du_any}.

    Source: Wu et al. 2025, Table 1/6, Definition 2; figure notebook of wrh14/deep_unlearning (module docstring).
    """
    pts = curve_points(df, accuracy)
    target = per_target_tradeoff(df, accuracy)
    success = success_summary(df, accuracy)
    held = heldout_tradeoff(df)
    out = {}
    for method, p in pts.groupby("method", sort=False):
        env = tradeoff(list(zip(p["recall"], p["accuracy"])))
        out[method] = {"n_settings": len(p), **target.get(method, {}),
                       **{f"{k}_envelope": env[k] for k in ("acc_at_recall", "recall_at_acc", "ar_auc")},
                       "observed_acc_at_recall": env["observed_acc_at_recall"],
                       "observed_recall_at_acc": env["observed_recall_at_acc"],
                       **success.get(method, {"success_du": None, "success_du_setting": None,
                                              "success_du_any": None}),
                       **held.get(method, {})}
    return out


#: Summary fields of :func:`heldout_tradeoff`.
HELDOUT_FIELDS = ("acc_at_recall_heldout", "acc_at_recall_heldout_std", "recall_at_acc_heldout",
                  "recall_at_acc_heldout_std", "ar_auc_heldout", "ar_auc_heldout_std", "success_du_heldout",
                  "region_setting_heldout")


def heldout_points(df):
    """The rows' held-out scores as an ordinary curve: ``recall`` := ``recall_heldout``, ``accuracy_all`` :=
    ``accuracy_all_heldout``, ``success_du`` := ``success_du_heldout``, ``target_forgotten`` :=
    ``target_forgotten_heldout``; rows without held-out scores are left out.

    Args:
        df: result rows (pandas DataFrame).

    Returns:
        DataFrame (empty when no row has ``recall_heldout``).
    """
    if "recall_heldout" not in df.columns:
        return df.iloc[0:0]
    d = df[df["recall_heldout"].notna()]
    cols = {"recall": "recall_heldout", "accuracy_all": "accuracy_all_heldout",
            "target_forgotten": "target_forgotten_heldout", "success_du": "success_du_heldout"}
    d = d.drop(columns=[c for c in cols if c in d.columns])
    return d.rename(columns={v: k for k, v in cols.items() if v in d.columns})


def heldout_tradeoff(df) -> dict:
    """Per method: the paper's trade-off rule and Success-DU on the held-out probe forms, and the first setting
    whose mean held-out point lies in the region (recall ≥ 0.8 and accuracy ≥ 0.8).

    Args:
        df: result rows (pandas DataFrame) with ``recall_heldout`` and ``accuracy_all_heldout``.

    Returns:
        method -> {f: value for f in :data:`HELDOUT_FIELDS`} (``region_setting_heldout``: the setting as JSON or
        None); {} when no row has held-out scores.

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
        inside = [r["setting"] for r in p.to_dict("records") if r["recall"] >= THRESHOLD and r["accuracy"] >= THRESHOLD]
        out[method] = {**{f"{k}_heldout" if not k.endswith("_std") else f"{k[:-4]}_heldout_std": v
                          for k, v in target.get(method, {}).items()},
                       "success_du_heldout": success.get(method, {}).get("success_du"),
                       "region_setting_heldout": inside[0] if inside else None}
    return out


def success_summary(df, accuracy: str = ACCURACY) -> dict:
    """Per method: Success-DU at the best setting and over any setting.

    Args:
        df: result rows (pandas DataFrame); rows without a ``success_du`` value (None/NaN) are left out.
        accuracy: the accuracy column that breaks ties between settings, str.

    Returns:
        method -> {success_du: mean over targets at the setting with the highest mean (ties: higher mean accuracy,
        then the weaker setting), success_du_setting: that setting (JSON), success_du_any: share of targets some
        setting deeply unlearns}; methods without any value are absent.

    Source: Wu et al. 2025, Definition 2 (deep unlearning); Success-DU of the paper's v4.
    """
    if "success_du" not in df.columns:
        return {}
    d = df[df["success_du"].notna()]
    if not len(d):
        return {}
    d = d.assign(success_du=d["success_du"].astype(float))
    out = {}
    pts = curve_points(d, accuracy)
    for method, p in pts.groupby("method", sort=False):
        best = max(p.to_dict("records"), key=lambda r: (r["success_du"], r["accuracy"], -r["strength"]))
        any_ = d[d["method"] == method].groupby("target")["success_du"].max()
        out[method] = {"success_du": float(best["success_du"]), "success_du_setting": best["setting"],
                       "success_du_any": float(any_.mean())}
    return out


def superficial_metric(df, accuracy: str = ACCURACY) -> dict:
    """Per method: Acc@Superficial and the share of targets some setting forgets (:func:`superficial`).

    Source: Wu et al. 2025, Table 2.
    """
    return {m: {"acc_at_superficial": v["acc_at_superficial"], "acc_at_superficial_std": v["acc_at_superficial_std"],
                "acc_at_superficial_weakest": v["acc_at_superficial_weakest"], "share_superficial": v["share_forgotten"]}
            for m, v in superficial(df, accuracy).items()}


#: The sentence each report puts under its trade-off table (the rule behind the numbers).
TRADEOFF_RULE = ("Acc@Recall≥0.8, Recall@Acc≥0.8 and AR-AUC follow the paper's rule (Eval-DU figure code): per "
                 "target, the observed (recall, accuracy) points anchored with (0, 1) and (1, 0), the largest accuracy "
                 "at recall ≥ 0.8, the largest recall at accuracy ≥ 0.8 and the trapezoid area in recall order; "
                 "mean ± std over targets. The envelope rows read the same off the interpolated upper envelope of "
                 "the mean points.")

TRADEOFF = Metric("tradeoff", tradeoff_metric, Needs(requires=("recall",)), "summary",
                  ("n_settings", "acc_at_recall", "acc_at_recall_std", "recall_at_acc", "recall_at_acc_std", "ar_auc",
                   "ar_auc_std", "acc_at_recall_envelope", "recall_at_acc_envelope", "ar_auc_envelope",
                   "observed_acc_at_recall", "observed_recall_at_acc", "success_du", "success_du_setting",
                   "success_du_any") + HELDOUT_FIELDS,
                  "Acc@Recall≥0.8, Recall@Acc≥0.8 and AR-AUC (per target, mean ± std; and off the mean envelope), "
                  "Success-DU",
                  "Wu et al. 2025, Table 1, Def. 2")
ACC_AT_SUPERFICIAL = Metric("acc_at_superficial", superficial_metric, Needs(requires=("recall",)), "summary",
                            ("acc_at_superficial", "acc_at_superficial_std", "acc_at_superficial_weakest",
                             "share_superficial"),
                            "per target the best accuracy among settings that forget the target itself (0 if none), "
                            "mean ± std",
                            "Wu et al. 2025, Table 2")
