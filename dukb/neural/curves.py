"""The mean accuracy-recall curves of an evaluate run, with their bands: per method, one point per setting averaged over
the targets (Wu et al. 2025, Fig. 3a: each point one setting, averaged over targets; Table 1: mean ± std), the band
measured across the curve. :func:`dukb.neural.plots.tradeoff_figure` draws them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from dukb import InputError
from dukb.neural.metrics import summary

#: Band kinds of :func:`mean_curves` (and :func:`dukb.neural.plots.tradeoff_figure`).
BANDS = ("std", "bootstrap")


def method_order(order) -> list[str]:
    """A method order as a list of names: a list or tuple as given, a dict's keys; [] for anything else."""
    return [str(m) for m in order] if isinstance(order, (list, tuple, dict)) else []


def setting_label(setting: dict, param: str | None, keys: Sequence[str] = ()) -> str:
    """A setting's short label: the swept parameter first (``steps=4``, ``alpha=10``, as the report's tables write it,
    :func:`dukb.neural.metrics.summary.setting_label`), then each of ``keys`` (the fixed parameters that differ
    between a method's settings), ``k=v`` joined by ", ".

    Args:
        setting: the row's setting (parameter -> value).
        param: the swept parameter (None: every key of ``setting``).
        keys: further parameters to show.

    Returns:
        str; numbers as :func:`dukb.neural.metrics.summary.short_number` writes them (``4``, ``0.5``, ``1e-3``).
    """
    if param is None:
        return summary.setting_label(setting) if setting else ""
    parts = [summary.setting_label(setting, param)] if param in setting else []
    parts += [f"{k}={summary.short_number(setting[k])}" for k in keys if k in setting and k != param]
    return ", ".join(parts)


@dataclass
class CurvePoint:
    """One setting of one method, averaged over the targets that have a scored row for it.

    Attributes:
        label: the setting's short label. strength: the swept value. recall, accuracy: means over targets (floats in
        [0, 1]). n: the number of targets averaged. targets: (n, 2) array of the targets' (recall, accuracy).
        lo, hi: the band's extent along the curve's normal (signed, in axis units; 0 without a band). normal: the
        curve's unit normal at the point (recall, accuracy components).
    """

    label: str
    strength: float
    recall: float
    accuracy: float
    n: int
    targets: object
    lo: float = 0.0
    hi: float = 0.0
    normal: tuple[float, float] = (0.0, 1.0)


@dataclass
class Curve:
    """A method's mean accuracy-recall curve: its points in order of strength and the number of targets it covers."""

    method: str
    n_targets: int
    points: list[CurvePoint] = field(default_factory=list)


def _normals(xy) -> list[tuple[float, float]]:
    """Unit normals of a polyline (central differences), oriented consistently (the first towards larger accuracy
    and recall)."""

    k = len(xy)
    out = []
    prev = None
    for i in range(k):
        t = xy[min(i + 1, k - 1)] - xy[max(i - 1, 0)]
        norm = float(np.hypot(*t))
        n = np.array([0.0, 1.0]) if norm < 1e-9 else np.array([-t[1], t[0]]) / norm
        if prev is None and n[0] + n[1] < 0 or prev is not None and float(n @ prev) < 0:
            n = -n
        prev = n
        out.append((float(n[0]), float(n[1])))
    return out


def mean_curves(
    df,
    accuracy: str = "accuracy_all",
    band: str = "std",
    *,
    n_boot: int = 1000,
    seed: int = 0,
    order: Sequence[str] | None = None,
) -> list[Curve]:
    """Per method, the mean (recall, accuracy) per setting over the targets that have a scored row for that setting,
    and the band around it.

    Targets may have different grids: nothing is interpolated; each setting is averaged over the targets that have it
    (its ``n``). Rows whose recall or accuracy is null (NaN: nothing was scored) are left out.

    The band is measured across the curve: at each setting the targets' points (or, for ``bootstrap``, the
    bootstrap means) are projected on the curve's unit normal there. ``std``: ± the population standard deviation of
    the projections (the spread over targets, ddof 0 as Table 1's ± ); ``bootstrap``: the 2.5 and 97.5 percentiles of
    the projected means of ``n_boot`` resamples of the setting's targets (a 95% interval of the mean).

    Args:
        df: result rows (pandas DataFrame with method, target, setting (dict), param, recall and ``accuracy``).
        accuracy: the accuracy column (y axis).
        band: "std" or "bootstrap".
        n_boot: bootstrap resamples (bootstrap only).
        seed: the bootstrap's random seed.
        order: the run's method order (methods not in it follow, in the rows' order).

    Returns:
        list of :class:`Curve` (methods without a scored row are absent).

    Raises:
        InputError: ``band`` is not one of :data:`BANDS`.

    Source: Wu et al. 2025, Fig. 3a (each point: one setting, averaged over targets) and Table 1 (mean ± std).
    """
    import pandas as pd

    if band not in BANDS:
        raise InputError(f"band {band!r}: expected one of {', '.join(BANDS)}")
    if not len(df) or "recall" not in df.columns or accuracy not in df.columns:
        return []
    d = df.assign(_r=pd.to_numeric(df["recall"], errors="coerce"), _a=pd.to_numeric(df[accuracy], errors="coerce"))
    d = d[np.isfinite(d["_r"]) & np.isfinite(d["_a"])]
    methods = [m for m in method_order(order) if m in set(d["method"])]
    methods += [m for m in dict.fromkeys(d["method"]) if m not in methods]
    rng = np.random.default_rng(seed)
    curves = []
    for method in methods:
        g = d[d["method"] == method]
        pts = _method_points(g.to_dict("records"))
        _add_bands(pts, band, n_boot, rng)
        curves.append(Curve(method, int(g["target"].nunique()), pts))
    return curves


def _method_points(recs: list[dict]) -> list[CurvePoint]:
    """One method's points: per setting, the mean (recall, accuracy) over the targets that have it (a target's
    repeated rows of one setting count once, their mean), labelled with the swept parameter and the fixed ones that
    vary between the settings; in order of strength (stable: equal strengths keep the rows' order). ``recs``: the
    method's rows with ``_r`` (recall) and ``_a`` (accuracy) finite."""
    key = [json.dumps(r["setting"], sort_keys=True) for r in recs]
    settings = {k: (r["setting"], r.get("param")) for k, r in zip(key, recs)}
    varying = sorted(
        k
        for k in {k for s, _ in settings.values() for k in s}
        if k not in {p for _, p in settings.values()} and len({json.dumps(s.get(k)) for s, _ in settings.values()}) > 1
    )
    by: dict[str, dict] = {}
    for k, r in zip(key, recs):
        by.setdefault(k, {}).setdefault(r["target"], []).append((r["_r"], r["_a"]))
    pts = []
    for k, per in by.items():
        s, p = settings[k]
        arr = np.array([np.mean(v, axis=0) for v in per.values()], dtype=float)
        label = setting_label(s, p, varying)
        strength = float(s[p]) if p in s else 0.0
        pts.append(CurvePoint(label, strength, float(arr[:, 0].mean()), float(arr[:, 1].mean()), len(arr), arr))
    pts.sort(key=lambda q: q.strength)
    return pts


def _add_bands(pts: list[CurvePoint], band: str, n_boot: int, rng) -> None:
    """Set each point's normal and, over at least 2 targets, its band (``lo``, ``hi``) along that normal: ± the
    population std of the targets' projections (``std``) or the 2.5 and 97.5 percentiles of ``n_boot`` bootstrap
    means' projections (``bootstrap``; ``rng``: numpy Generator)."""
    xy = np.array([[q.recall, q.accuracy] for q in pts])
    for q, nrm in zip(pts, _normals(xy)):
        q.normal = nrm
        if q.n < 2:
            continue
        nv, centre = np.array(nrm), np.array([q.recall, q.accuracy])
        if band == "std":
            w = float(((q.targets - centre) @ nv).std())
            q.lo, q.hi = -w, w
        else:
            idx = rng.integers(0, q.n, size=(n_boot, q.n))
            proj = (q.targets[idx].mean(axis=1) - centre) @ nv
            q.lo, q.hi = (float(v) for v in np.percentile(proj, [2.5, 97.5]))


__all__ = ["BANDS", "Curve", "CurvePoint", "mean_curves", "method_order", "setting_label"]
