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
:func:`dukb.neural.metrics.recall.success_du`). Per method, ``success_du`` is read at **the best setting**, the setting
the paper's per-target rule selects: per target, the setting Recall@Acc≥0.8 reads, i.e. the largest recall among the
settings with accuracy ≥ 0.8 (ties: higher accuracy, then the weaker setting; :func:`best_setting`); a target where
no setting keeps accuracy ≥ 0.8 has no best setting and counts 0 (the rule's anchor (0, 1) is the model before
unlearning). Mean ± std over targets; ``success_du_setting`` names the settings chosen (``steps=4 ×6, none ×2``).
``success_du_any`` (not comparable to the paper) is the share of targets some setting deeply unlearns, whatever its
accuracy.

**Nothing to score.** A row whose accuracy is null/NaN (``n_scored`` 0: e.g. a retain set that covers every fact
outside the forget set) has no point on the curve: the trade-off, Acc@Superficial and the best setting skip it, a
target left without rows is skipped, and the summary counts both (``n_skipped_rows``, ``n_skipped_targets``; ``n``
= the targets scored). A metric over no target is None, never 1.0.

**Acc@Superficial** = mean over targets of the accuracy at the weakest setting that makes the target itself unknown
(superficial unlearning), with the share of targets where some setting does.
"""

from __future__ import annotations

import json
import math
import textwrap

THRESHOLD = 0.8
ACCURACY = "accuracy_all"


def setting_key(setting: dict) -> str:
    """Canonical string of a setting dict (the grid parameter and fixed hyper-parameters)."""
    return json.dumps(setting, sort_keys=True)


def short_number(v) -> str:
    """A hyper-parameter value as a short label: ``4``, ``0.5``, ``1e-3``, ``2.5e-5``; other values as ``str``.

    Args:
        v: a number (int or float; a bool is not one) or any other value.

    Returns:
        str.

    Source: dukb's report layout (no paper defines it; the papers print hyper-parameters this way, e.g. Wu et al.
    2025, App. H).
    """
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e6:
        return str(int(v))
    if v and abs(v) < 0.01:
        mant, exp = f"{v:.6e}".split("e")
        return f"{mant.rstrip('0').rstrip('.')}e{int(exp)}"
    return f"{v:g}"


def setting_label(setting, param: str | None = None) -> str:
    """A setting as a short label, never JSON: the swept value ``steps=4`` when ``param`` is given, else every
    ``key=value`` of the setting joined with ", " (``lr=1e-3, schedule=reference, steps=4``).

    Args:
        setting: the row's setting (dict, or its JSON string as :func:`setting_key` writes it); param: the swept
            parameter (str) or None.

    Returns:
        str ("–" for an empty or missing setting).

    Source: dukb's report layout; the swept values are those of Wu et al. 2025, App. H (T for GA/NPO, α for TV/WHP).
    """
    if isinstance(setting, str):
        try:
            setting = json.loads(setting)
        except ValueError:
            return setting
    if not isinstance(setting, dict) or not setting:
        return "–"
    if param is not None and param in setting:
        return f"{param}={short_number(setting[param])}"
    return ", ".join(f"{k}={short_number(v)}" for k, v in setting.items())


def fixed_label(setting, param: str) -> str:
    """The hyper-parameters a method holds fixed over its sweep (every key of the setting but ``param``) as a label
    (``lr=1e-3, schedule=reference``); "–" when there is none.

    Args:
        setting: dict or its JSON string; param: the swept parameter, str.

    Returns:
        str.

    Raises:
        ValueError: ``setting`` is a string that is not JSON.

    Source: dukb's report layout (Wu et al. 2025, App. H lists the fixed learning rates beside the swept T).
    """
    if isinstance(setting, str):
        setting = json.loads(setting)
    rest = {k: v for k, v in (setting or {}).items() if k != param}
    return setting_label(rest) if rest else "–"


def scored(df, accuracy: str = ACCURACY):
    """The rows whose accuracy was scored, and how many were skipped.

    Args:
        df: result rows (pandas DataFrame); accuracy: the accuracy column.

    Returns:
        (DataFrame of the rows with a finite ``accuracy``, number of rows skipped: null/NaN accuracy, nothing left to
        score).

    Source: Wu et al. 2025, Eq. 2 (an accuracy over no fact, 0/0, is undefined; dukb skips it, never reads 1.0).
    """
    import pandas as pd

    acc = (
        pd.to_numeric(df[accuracy], errors="coerce")
        if accuracy in df.columns
        else pd.Series(float("nan"), index=df.index)
    )
    keep = acc.notna()
    return df[keep].assign(**{accuracy: acc[keep].astype(float)}), int((~keep).sum())


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
    return {
        "acc_at_recall": acc_at,
        "recall_at_acc": rec_at,
        "ar_auc": auc,
        "observed_acc_at_recall": max(obs_acc) if obs_acc else None,
        "observed_recall_at_acc": max(obs_rec) if obs_rec else None,
    }


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
    return {
        "acc_at_recall": max(a for r, a in pts if r >= threshold),
        "recall_at_acc": max(r for r, a in pts if a >= threshold),
        "ar_auc": auc,
    }


def population_mean_std(xs: list[float]) -> tuple[float | None, float | None]:
    """(mean, population standard deviation) of ``xs``, as numpy's ``mean()`` and ``std()`` (ddof 0); (None, None)
    for no value (Wu et al. 2025, Table 1: mean ± std over targets)."""
    if not xs:
        return None, None
    m = sum(xs) / len(xs)
    return m, (sum((x - m) ** 2 for x in xs) / len(xs)) ** 0.5  # population std, as numpy's .std()


def best_setting(points):
    """The index of the best setting of one target's sweep: the point Recall@Acc≥τ reads, the largest recall among
    the points with accuracy ≥ τ (ties: higher accuracy, then the earlier, weaker setting); None when no point keeps
    accuracy ≥ τ (the rule then reads its anchor (0, 1), the model before unlearning).

    Args:
        points: (recall, accuracy) pairs of one target and method in sweep order (weaker setting first).

    Returns:
        int index into ``points``, or None.

    Source: Wu et al. 2025, Table 1 (Recall@Acc≥0.8); figure notebook of wrh14/deep_unlearning, cell 18
    (``rec_list[y >= thr].max()``).
    """
    ok = [(float(r), float(a), -i) for i, (r, a) in enumerate(points) if float(a) >= THRESHOLD]
    return -max(ok)[2] if ok else None


def best_row(rows: list[dict], accuracy: str = ACCURACY) -> dict | None:
    """The row of one target and method's sweep that Recall@Acc≥τ reads (:func:`best_setting` over its rows with a
    recall and a scored accuracy, weaker setting first by :func:`strength`); None when none keeps accuracy ≥ τ.

    Args:
        rows: result rows of one (target, method) (``recall``, ``accuracy``, ``param``, ``setting``).
        accuracy: the accuracy field.

    Source: Wu et al. 2025, Table 1 (Recall@Acc≥0.8).
    """
    ok = sorted((r for r in rows if not missing(r.get("recall")) and not missing(r.get(accuracy))), key=strength)
    i = best_setting([(r["recall"], r[accuracy]) for r in ok]) if ok else None
    return None if i is None else ok[i]


def targets_by_method(df, accuracy: str, threshold: float):
    """method -> (per target, its rows with a scored accuracy sorted from the weakest setting
    (:func:`strength`); the number of rows skipped; the number of targets left without a row) of the rows ``df``
    (pandas DataFrame)."""
    out = {}
    for method, g in df.groupby("method", sort=False):
        kept, skipped_rows = scored(g, accuracy)
        targets = []
        for _, t in kept.groupby("target", sort=False):
            t = t.assign(_s=[strength(r) for r in t.to_dict("records")]).sort_values("_s", kind="stable")
            targets.append(t)
        out[method] = (targets, skipped_rows, int(g["target"].nunique()) - len(targets))
    return out


def per_target_tradeoff(df, accuracy: str = ACCURACY, threshold: float = THRESHOLD) -> dict:
    """Per method: the mean and standard deviation over targets of :func:`target_tradeoff`.

    Rows whose accuracy is null/NaN (nothing to score) are skipped; a target left without rows is skipped.

    Args:
        df: result rows (pandas DataFrame with method, target, setting, param, recall and ``accuracy``).
        accuracy: the accuracy column (the y axis), str.
        threshold: τ, float.

    Returns:
        method -> {acc_at_recall, acc_at_recall_std, recall_at_acc, recall_at_acc_std, ar_auc, ar_auc_std (floats;
        None when no target is scored), n (targets scored), n_skipped_targets, n_skipped_rows (ints)}.

    Source: Wu et al. 2025, Table 1/6; figure notebook of wrh14/deep_unlearning, cell 17
    (``(np.asarray(all_data_acc_at_rec_list).mean(), np.asarray(all_data_acc_at_rec_list).std())``).
    """
    out = {}
    for method, (targets, skipped_rows, skipped_targets) in targets_by_method(df, accuracy, threshold).items():
        per: dict[str, list[float]] = {"acc_at_recall": [], "recall_at_acc": [], "ar_auc": []}
        for t in targets:
            v = target_tradeoff(list(zip(t["recall"], t[accuracy])), threshold)
            for k in per:
                per[k].append(v[k])
        row = {}
        for k, xs in per.items():
            row[k], row[f"{k}_std"] = population_mean_std(xs)
        out[method] = {**row, "n": len(targets), "n_skipped_targets": skipped_targets, "n_skipped_rows": skipped_rows}
    return out


def curve_points(df, accuracy: str = ACCURACY):
    """Mean recall and accuracy per (method, setting) over targets.

    Args:
        df: results DataFrame (one row per target, method, setting).

    Returns:
        DataFrame with method, setting (JSON), label (the swept value, ``steps=4``), strength, recall, accuracy (the
        mean over the rows whose accuracy was scored; NaN when none was), n_targets, n_accuracy (rows with a scored
        accuracy), target_forgotten (share) and, when the rows carry it, success_du (share of targets deeply
        unlearned, Definition 2 of the paper).
    """
    import pandas as pd

    d = df.copy()
    d["setting_json"] = d["setting"].map(setting_key)
    d["label"] = [setting_label(r["setting"], r.get("param")) for r in d.to_dict("records")]
    d["strength"] = [strength(r) for r in d.to_dict("records")]
    d[accuracy] = pd.to_numeric(d[accuracy], errors="coerce").astype(float)
    agg = dict(
        label=("label", "first"),
        strength=("strength", "first"),
        recall=("recall", "mean"),
        accuracy=(accuracy, "mean"),
        n_targets=("target", "nunique"),
        n_accuracy=(accuracy, "count"),
        target_forgotten=("target_forgotten", "mean"),
    )
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
        method -> {"acc_at_superficial": float, "acc_at_superficial_std": float, "n": targets scored,
        "n_skipped_targets": targets without a row whose accuracy was scored (left out), "acc_at_superficial_weakest":
        float | None, "share_forgotten": float in [0, 1]} (the floats None when no target is scored).

    Source: Wu et al. 2025, Table 2; wrh14/deep_unlearning commit 20c927b, notebooks/"Unlearning Evaluation -- Final
    Paper Figure Generation.ipynb", cell 19.
    """
    out = {}
    for method, (targets, _rows, skipped) in targets_by_method(df, accuracy, THRESHOLD).items():
        paper, weakest = [], []
        for t in targets:
            hit = t[t["target_forgotten"] == True]  # noqa: E712
            paper.append(max([float(a) for a in hit[accuracy]] + [0.0]))
            if len(hit):
                weakest.append(float(hit.iloc[0][accuracy]))
        mean, std = population_mean_std(paper)
        out[method] = {
            "acc_at_superficial": mean,
            "acc_at_superficial_std": std,
            "n": len(paper),
            "n_skipped_targets": skipped,
            "acc_at_superficial_weakest": sum(weakest) / len(weakest) if weakest else None,
            "share_forgotten": len(weakest) / len(paper) if paper else None,
        }
    return out


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
    cols = {
        "recall": "recall_heldout",
        "accuracy_all": "accuracy_all_heldout",
        "target_forgotten": "target_forgotten_heldout",
        "success_du": "success_du_heldout",
    }
    d = d.drop(columns=[c for c in cols if c in d.columns])
    return d.rename(columns={v: k for k, v in cols.items() if v in d.columns})


#: The sentence each report puts under its trade-off table (the rule behind the numbers).
TRADEOFF_RULE = (
    "Acc@Recall≥0.8, Recall@Acc≥0.8 and AR-AUC follow the paper's rule (Eval-DU figure code): per "
    "target, the observed (recall, accuracy) points anchored with (0, 1) and (1, 0), the largest accuracy "
    "at recall ≥ 0.8, the largest recall at accuracy ≥ 0.8 and the trapezoid area in recall order; "
    "mean ± std over targets. The envelope rows read the same off the interpolated upper envelope of "
    "the mean points."
)


# ------------------------------------------------------------------------------------------ how reports print --------
#: The readings of a summary number, as summary.csv's ``reading`` column names them: the paper's rule first; every
#: other reading says it is not comparable to the paper.
PAPER = "paper (per target)"
PAPER_HELDOUT = "paper (per target), held-out forms"
ENVELOPE = "envelope (not comparable to the paper)"
OBSERVED = "observed mean points (not comparable to the paper)"
ANY_SETTING = "any setting (not comparable to the paper)"
WEAKEST = "weakest forgetting setting (not comparable to the paper)"
REGION = "first mean held-out point in the region (not comparable to the paper)"
COUNT = "count"

#: Report limits (dukb's one-page report): at most this many lines, none longer than :data:`PAGE_WIDTH` characters.
PAGE_LINES = 150
PAGE_WIDTH = 200


def missing(v) -> bool:
    """True for None or a float NaN (a number that is not there: nothing to score, no row).

    Source: Wu et al. 2025, Eq. 2 (a metric over no fact is undefined).
    """
    return v is None or (isinstance(v, float) and math.isnan(v))


def num(v, digits: int = 2) -> str:
    """A summary number with ``digits`` decimals; "–" when it is missing (:func:`missing`).

    Source: dukb's report layout (Wu et al. 2025, Table 1 prints two decimals).
    """
    return "–" if missing(v) else f"{float(v):.{digits}f}"


def mean_std(mean, std, n, digits: int = 2) -> str:
    """A mean over n targets as reports print it: ``0.49 ± 0.20`` when n ≥ 2, the number alone when n = 1 (a
    single target has no spread), "–" when n = 0 or the mean is missing.

    Args:
        mean, std: floats or None; n: the number of targets (int or None: then "±" is shown when std is given).

    Returns:
        str.

    Source: Wu et al. 2025, Table 1 (mean ± std over targets); the Eval-DU figure code's population std.
    """
    if missing(mean) or n == 0:
        return "–"
    if (n is not None and n < 2) or missing(std):
        return num(mean, digits)
    return f"{num(mean, digits)} ± {num(std, digits)}"


def wrap_prose(text: str, width: int = 118, limit: int = PAGE_WIDTH) -> str:
    """``text`` with every prose line longer than ``limit`` characters wrapped at ``width`` (markdown joins the lines
    again); table rows (``|``), headings, code and image lines are left as they are.

    Args:
        text: markdown.

    Returns:
        markdown text.

    Source: dukb's report layout (one page: issue 38).
    """

    out = []
    for line in text.split("\n"):
        if len(line) <= limit or line.startswith(("|", "#", "```", "![", "    ")):
            out.append(line)
            continue
        lead = "  " if line.startswith(("- ", "* ")) else ""
        out += textwrap.wrap(line, width, subsequent_indent=lead, break_on_hyphens=False, break_long_words=False)
    return "\n".join(out)


def page_problems(text: str, lines: int = PAGE_LINES, width: int = PAGE_WIDTH) -> list[str]:
    """What keeps a report from being one page: more than ``lines`` lines, a line over ``width`` characters, or
    JSON (a line opening a JSON object or a fenced json block).

    Args:
        text: the report's markdown.

    Returns:
        list of problems in words ([] for a one-page report).

    Source: dukb's report layout (one page: at most 150 lines of at most 200 characters, no JSON).
    """
    out = []
    rows = text.rstrip("\n").split("\n")
    if len(rows) > lines:
        out.append(f"{len(rows)} lines (at most {lines})")
    out += [f"line {i}: {len(r)} characters (at most {width})" for i, r in enumerate(rows, 1) if len(r) > width]
    out += [
        f"line {i}: JSON"
        for i, r in enumerate(rows, 1)
        if r.startswith("```json") or r.lstrip().startswith('{"') or '`{"' in r
    ]
    return out


def config_value(v, max_items: int = 8) -> str:
    """One config value as report text, never JSON: a list joined with ", " (longer than ``max_items``: its length
    and "config.json"), a dict as ``key=value`` labels, numbers as :func:`short_number`, None as "–".

    Source: dukb's report layout.
    """
    if v is None:
        return "–"
    if isinstance(v, dict):
        return setting_label(v) if all(not isinstance(x, (dict, list)) for x in v.values()) else "see config.json"
    if isinstance(v, (list, tuple)):
        if len(v) > max_items:
            return f"{len(v)} values (config.json)"
        return ", ".join(config_value(x) for x in v) or "–"
    return short_number(v)


def config_lines(config: dict, keys) -> list[str]:
    """The run's settings as markdown list items ``- key: value`` (:func:`config_value`), for the keys present.

    Args:
        config: the run's config.json (dict); keys: the keys to show, in order.

    Returns:
        list of str.

    Source: dukb's report layout.
    """
    return [f"- {k}: {config_value(config.get(k))}" for k in keys if k in config]


def versions_line(config: dict) -> str | None:
    """``- versions: python 3.11.7 · torch 2.13.0 · ...`` from the run's provenance, or None when it has none.

    Source: dukb's run provenance (:func:`dukb.neural.run.provenance.provenance`).
    """
    prov = config.get("provenance") if isinstance(config.get("provenance"), dict) else {}
    ver = config.get("versions") if isinstance(config.get("versions"), dict) else prov.get("versions")
    if not isinstance(ver, dict) or not ver:
        return None
    return "- versions: " + " · ".join(
        f"{k} {str(v)[:12] if k == 'dukb_revision' else v}"
        for k, v in ver.items()
        if v is not None and not isinstance(v, (dict, list))
    )
