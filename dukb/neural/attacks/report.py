"""The attacks' part of an evaluate report: recall and Success-DU before and after each attack, as a table and as a
plot (attacks.png)."""

from __future__ import annotations

import json
from pathlib import Path

from dukb.neural.metrics.summary import setting_label
from dukb.neural.plots import bars_figure, figure_markdown


def attack_points(df):
    """Mean over targets of recall, Success-DU and target known, per (method, setting) and attack ("none": the
    row's own probe).

    Args:
        df: evaluate rows (pandas DataFrame) with an ``attacks`` column (dicts).

    Returns:
        pandas DataFrame: method, setting, attack, n, recall, success_du, target_known; empty when no row was
        attacked.
    """

    import pandas as pd

    if "attacks" not in df.columns:
        return pd.DataFrame()
    recs = []
    for r in df.to_dict("records"):
        att = r.get("attacks")
        if not isinstance(att, dict) or not att:
            continue
        st, param = r.get("setting") or {}, r.get("param")
        # the swept value names the setting (the rest of it is fixed per method); the whole setting otherwise
        setting = (
            f"{param}={st[param]:g}"
            if param in st and isinstance(st[param], (int, float))
            else json.dumps(st, sort_keys=True)
        )
        sdu = r.get("success_du")
        recs.append(
            {
                "method": r["method"],
                "setting": setting,
                "attack": "none",
                "recall": r["recall"],
                "success_du": sdu,
                "target_known": 1 - int(bool(r.get("target_forgotten"))),
            }
        )
        for name, e in att.items():
            recs.append(
                {
                    "method": r["method"],
                    "setting": setting,
                    "attack": name,
                    "recall": e["recall"],
                    "success_du": e["success_du"],
                    "target_known": e["target_known"],
                }
            )
        if "recall_under_attack" in r:
            recs.append(
                {
                    "method": r["method"],
                    "setting": setting,
                    "attack": "worst case",
                    "recall": r["recall_under_attack"],
                    "success_du": None,
                    "target_known": None,
                }
            )
    if not recs:
        return pd.DataFrame()
    d = pd.DataFrame(recs)
    g = d.groupby(["method", "setting", "attack"], sort=False)
    out = g[["recall", "success_du", "target_known"]].mean()
    out["n"] = g.size()
    return out.reset_index()


def attacks_section(df) -> list[str]:
    """report.md lines: per method and setting, mean recall (and Success-DU) before and after every attack; [] when
    the run applied none.

    Source: Hu et al. 2025 (relearning), Zhang et al. 2025 (quantization), Wu et al. 2025 (Eq. 1, Definition 2).
    """

    pts = attack_points(df)
    if pts.empty:
        return []
    attacks = [a for a in dict.fromkeys(pts["attack"]) if a != "none"]
    head = "| method | setting | recall | " + " | ".join(f"{a}" for a in attacks) + " |"
    lines = [
        "## Attacks: does the fact come back?",
        "",
        "Mean recall over targets with no attack (the row's own probe) and under each attack (a fact known "
        "under the attack is not forgotten); `worst case` counts a fact forgotten only when every probe form and "
        "every attack finds it forgotten (`recall_under_attack`). Success-DU (share of targets not derivable "
        "from what the model knows) follows in the second table.",
        "",
        head,
        "|---|---|---|" + "---|" * len(attacks),
    ]
    by = {(r["method"], r["setting"], r["attack"]): r for r in pts.to_dict("records")}
    keys = list(dict.fromkeys(zip(pts["method"], pts["setting"])))
    for m, s in keys:
        cells = [f"{by[(m, s, a)]['recall']:.3f}" if (m, s, a) in by else "–" for a in attacks]
        lines.append(f"| {m} | {setting_label(s)} | {by[(m, s, 'none')]['recall']:.3f} | " + " | ".join(cells) + " |")
    sd = [a for a in attacks if a != "worst case"]
    lines += ["", "| method | setting | Success-DU | " + " | ".join(sd) + " |", "|---|---|---|" + "---|" * len(sd)]
    for m, s in keys:
        base = by[(m, s, "none")]["success_du"]
        cells = [f"{by[(m, s, a)]['success_du']:.2f}" if (m, s, a) in by else "–" for a in sd]
        lines.append(
            f"| {m} | {setting_label(s)} | {'–' if base != base or base is None else f'{base:.2f}'} | "
            + " | ".join(cells)
            + " |"
        )
    return lines + ["", figure_markdown(Path("attacks.png"), "recall before and after each attack"), ""]


def plot_attacks(df, path) -> bool:
    """attacks.png and attacks.pdf: mean recall per method and setting, one bar per attack ("none" first), in
    dukb's figure style (:func:`dukb.neural.plots.bars_figure`). Returns False (nothing written) when the run applied
    no attack."""
    pts = attack_points(df)
    if pts.empty:
        return False

    keys = list(dict.fromkeys(zip(pts["method"], pts["setting"])))
    by = {(r["method"], r["setting"], r["attack"]): r["recall"] for r in pts.to_dict("records")}
    series = {a: [by.get((m, s, a), float("nan")) for m, s in keys] for a in dict.fromkeys(pts["attack"])}
    bars_figure(
        [f"{m}\n{s}" for m, s in keys],
        series,
        path,
        ylabel="Recall (deep unlearning)",
        ylim=(0, 1.02),
        title="Recall before and after each attack",
    )
    return True
