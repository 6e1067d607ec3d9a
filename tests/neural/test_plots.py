"""dukb's figure style (dukb.neural.plots): the accuracy-recall figure's panels, bands, labels, region and colours,
and every protocol's figures written as PNG and PDF. Synthetic rows only (no model)."""

from __future__ import annotations

import math

import matplotlib
import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_hex

from dukb import InputError
from dukb.neural import plots
from dukb.neural.curves import mean_curves, setting_label

GRIDS = {"ga": ("steps", [1, 4, 16]), "npo": ("steps", [1, 4, 16]), "tv": ("alpha", [0.5, 10])}


def rows(n_targets: int = 3, grids=GRIDS, heldout: bool = True) -> pd.DataFrame:
    """Evaluate-shaped rows: per target and setting a recall rising and an accuracy falling with strength, spread
    over targets; each method's curve in its own part of the square so the labels have room."""
    out = []
    for t in range(n_targets):
        for k, (m, (p, grid)) in enumerate(grids.items()):
            for i, v in enumerate(grid):
                f = (i + 1) / len(grid)
                r = {
                    "method": m,
                    "target": 100 + t,
                    "param": p,
                    "setting": {p: v, "lr": 0.001},
                    "recall": round(0.8 * f - 0.2 * k + 0.1 + 0.02 * t, 4),
                    "accuracy_all": round(1 - 0.7 * f + 0.12 * k - 0.03 * t, 4),
                    "probe_forms_seen": ["qa"],
                }
                if heldout:
                    r.update(recall_heldout=r["recall"] / 2, accuracy_all_heldout=r["accuracy_all"])
                out.append(r)
    return pd.DataFrame(out)


def by_gid(fig, prefix: str) -> dict[str, list]:
    """Artists of ``fig`` whose gid starts with ``prefix``, by the gid's suffix (the method)."""
    out: dict[str, list] = {}
    for a in fig.findobj(lambda a: isinstance(a.get_gid(), str) and a.get_gid().startswith(prefix)):
        out.setdefault(a.get_gid()[len(prefix) :], []).append(a)
    return out


@pytest.fixture
def fig():
    import matplotlib.pyplot as plt

    made = []
    yield made.append
    for f in made:
        plt.close(f)


def test_two_panels_share_axes_with_titles_region_and_bands(fig):
    df = rows()
    f = plots.tradeoff_plot([("qa form", df), ("held-out forms", plots_heldout(df))], order=list(GRIDS))
    fig(f)
    axes = [a for a in f.axes if a.get_title()]
    assert [a.get_title() for a in axes] == ["qa form", "held-out forms"]
    assert axes[0].get_shared_x_axes().joined(axes[0], axes[1]) and axes[0].get_shared_y_axes().joined(*axes)
    for ax in axes:
        region = [p for p in ax.patches if p.get_gid() == "region"]
        assert len(region) == 1
        (x0, y0), (x1, y1) = region[0].get_bbox().get_points()
        assert (x0, y0) == (0.8, 0.8) and x1 >= 1.0 and y1 >= 1.0
        assert any(t.get_gid() == "region-label" and "0.8" in t.get_text() for t in ax.texts)
        bands = {p.get_gid()[5:] for p in ax.patches if str(p.get_gid()).startswith("band:")}
        assert bands == set(GRIDS)
    legend = [t.get_text() for lg in f.legends for t in lg.get_texts()]
    assert legend == ["GA (n=3)", "NPO (n=3)", "TV (n=3)"]


def plots_heldout(df):
    from dukb.neural.metrics.summary import heldout_points

    return heldout_points(df)


def test_points_are_means_per_setting_and_the_band_is_the_std_across_the_curve():
    df = rows()
    curves = {c.method: c for c in mean_curves(df)}
    ga = curves["ga"]
    assert [q.label for q in ga.points] == ["steps=1", "steps=4", "steps=16"]
    sel = df[(df["method"] == "ga") & (df["setting"].map(lambda s: s.get("steps")) == 4)]
    q = ga.points[1]
    assert (
        q.n == 3
        and math.isclose(q.recall, sel["recall"].mean())
        and math.isclose(q.accuracy, sel["accuracy_all"].mean())
    )
    proj = (sel[["recall", "accuracy_all"]].to_numpy() - [q.recall, q.accuracy]) @ np.array(q.normal)
    assert math.isclose(q.hi, proj.std()) and math.isclose(q.lo, -proj.std()) and q.hi > 0
    assert math.isclose(np.hypot(*q.normal), 1.0)
    boot = {c.method: c for c in mean_curves(df, band="bootstrap", n_boot=400)}["ga"].points[1]
    assert boot.lo < 0 < boot.hi and boot.hi - boot.lo < 2 * q.hi * 1.5  # an interval of the mean, not the spread
    with pytest.raises(InputError):
        mean_curves(df, band="sem")


def test_setting_labels_are_small_text_artists_in_the_methods_colour_darkened(fig):
    f = plots.tradeoff_plot([("qa", rows()), ("held-out", None)], order=list(GRIDS))
    fig(f)
    labels = by_gid(f, "label:")
    lk = plots.looks(list(GRIDS), list(GRIDS))
    for m, (p, _grid) in GRIDS.items():
        texts = [a.get_text() for a in labels[m]]
        assert any(t.startswith(f"{p}=") for t in texts), texts
        assert all(to_hex(a.get_color()) == lk[m].ink != lk[m].color for a in labels[m])
        assert all(a.get_fontsize() < 7 for a in labels[m])
    assert {t for a in labels.values() for t in (x.get_text() for x in a)} >= {"steps=1", "steps=16", "alpha=10"}


def test_the_held_out_panel_says_so_when_there_are_no_held_out_rows(fig):
    df = rows(heldout=False)
    f = plots.tradeoff_plot([("qa", df), ("held-out", None)])
    fig(f)
    right = f.axes[1]
    assert right.get_title() == "held-out" and right.get_visible()
    assert [t.get_text() for t in right.texts if t.get_gid() == "empty"] == ["no held-out rows"]
    assert not [ln for ln in right.lines if str(ln.get_gid()).startswith("curve:")]
    assert not [t for t in f.axes[0].texts if t.get_gid() == "empty"]


def test_colours_are_okabe_ito_and_a_method_keeps_its_look():
    okabe = {c.lower() for c in plots.OKABE_ITO.values()}
    a = plots.looks(["ga", "npo", "tv", "whp"], ["ga", "npo", "tv", "whp"])
    b = plots.looks(["whp", "GA"], ["ga", "npo", "tv", "whp"])  # another figure of the run: fewer methods, upper case
    assert b["GA"] == a["ga"] and b["whp"] == a["whp"]
    assert all(v.color.lower() in okabe for v in a.values())
    assert len({v.color for v in a.values()}) == 4 and len({v.marker for v in a.values()}) == 4
    assert len({str(v.linestyle) for v in a.values()}) == 4
    assert [v.zorder for v in a.values()] == sorted(v.zorder for v in a.values())  # thinner lines drawn later
    assert [v.linewidth for v in a.values()] == sorted((v.linewidth for v in a.values()), reverse=True)
    ref = plots.looks(["target", "retrain", "ga"])
    assert ref["target"].color == "#000000" and ref["retrain"].color != ref["target"].color
    assert ref["ga"].color == plots.PALETTE[0]
    assert ref["target"].linewidth < ref["ga"].linewidth and ref["target"].zorder > ref["ga"].zorder  # thin on top


def test_curves_use_the_methods_look(fig):
    f = plots.tradeoff_plot([("qa", rows()), ("held-out", None)], order=["tv", "ga", "npo"])
    fig(f)
    lk = plots.looks(["tv", "ga", "npo"], ["tv", "ga", "npo"])
    curves = by_gid(f, "curve:")
    for m, (line,) in curves.items():
        assert to_hex(line.get_color()) == to_hex(lk[m].color) and line.get_marker() == lk[m].marker
        assert 0 < line.get_alpha() < 1
    bands = by_gid(f, "band:")
    assert all(to_hex(b.get_facecolor()) == to_hex(lk[m].color) for m, bs in bands.items() for b in bs)
    assert to_hex(curves["tv"][0].get_color()) == plots.OKABE_ITO["blue"].lower()


def test_a_method_with_a_single_target_gets_no_band(fig):
    df = rows(3)
    df = df[(df["method"] != "tv") | (df["target"] == 100)]
    f = plots.tradeoff_plot([("qa", df), ("held-out", None)])
    fig(f)
    assert set(by_gid(f, "band:")) == {"ga", "npo"}
    assert "curve:tv" in {ln.get_gid() for ln in f.axes[0].lines}
    assert "TV (n=1)" in [t.get_text() for lg in f.legends for t in lg.get_texts()]


def test_nan_accuracy_rows_are_skipped_not_plotted(fig):
    df = rows(3)
    strongest = (df["method"] == "ga") & (df["setting"].map(lambda s: s.get("steps")) == 16)
    df.loc[strongest & (df["target"] == 100), "accuracy_all"] = np.nan  # one target: nothing scored
    df.loc[(df["method"] == "npo") & (df["setting"].map(lambda s: s.get("steps")) == 1), "accuracy_all"] = None
    curves = {c.method: c for c in mean_curves(df)}
    assert [q.label for q in curves["npo"].points] == ["steps=4", "steps=16"]  # no target scored steps=1
    last = curves["ga"].points[-1]
    kept = df[strongest & (df["target"] != 100)]
    assert last.n == 2 and math.isclose(last.accuracy, kept["accuracy_all"].mean())
    f = plots.tradeoff_plot([("qa", df), ("held-out", None)])
    fig(f)
    (npo,) = by_gid(f, "curve:")["npo"]
    ys = np.asarray(npo.get_ydata(), dtype=float)
    assert len(ys) == 2 and np.isfinite(ys).all()
    assert any(a.get_text() == "steps=16 (n=2)" for a in by_gid(f, "label:")["ga"])


def test_grids_differ_between_targets_no_interpolation():
    df = rows(2)
    extra = df[(df["method"] == "ga") & (df["target"] == 100)].iloc[:1].copy()
    extra["setting"] = [{"steps": 2, "lr": 0.001}]
    df = pd.concat([df, extra], ignore_index=True)
    ga = {c.method: c for c in mean_curves(df)}["ga"]
    two = [q for q in ga.points if q.label == "steps=2"]
    assert len(two) == 1 and two[0].n == 1 and (two[0].lo, two[0].hi) == (0.0, 0.0)
    assert [q.n for q in ga.points] == [2, 1, 2, 2]


def test_settings_differing_in_a_fixed_parameter_name_it():
    assert setting_label({"steps": 4, "lr": 0.001}, "steps") == "steps=4"
    assert setting_label({"alpha": 10.0}, "alpha") == "alpha=10"
    df = rows(2, {"ga": ("steps", [1, 4])})
    df.at[1, "setting"] = {"steps": 1, "lr": 0.01}  # target 100's second row: another lr
    labels = sorted(q.label for q in mean_curves(df)[0].points)
    assert labels == ["steps=1, lr=0.01", "steps=1, lr=1e-3", "steps=4, lr=1e-3"]  # the report tables' number form


def test_both_files_are_written_and_the_pdf_is_deterministic(tmp_path):
    df = rows()
    out = plots.tradeoff_figure(df, tmp_path / "accuracy_recall.png")
    assert out == [tmp_path / "accuracy_recall.png", tmp_path / "accuracy_recall.pdf"]
    png, pdf = (p.read_bytes() for p in out)
    assert png.startswith(b"\x89PNG") and pdf.startswith(b"%PDF")
    assert b"CreationDate" not in pdf
    width = int.from_bytes(png[16:20], "big")
    assert width > 1200  # 200 dpi: a ~7-inch figure is over 1200 pixels wide
    again = plots.tradeoff_figure(df, tmp_path / "again.png")
    assert again[1].read_bytes() == pdf and again[0].read_bytes() == png
    assert matplotlib.get_backend().lower() == "agg"


def test_a_directory_in_the_pdf_place_is_one_named_error(tmp_path):
    (tmp_path / "accuracy_recall.pdf").mkdir()
    with pytest.raises(InputError, match="accuracy_recall.pdf"):
        plots.tradeoff_figure(rows(), tmp_path / "accuracy_recall.png")


def test_every_protocols_figures_are_png_and_pdf_in_the_style(tmp_path):
    from dukb.neural.protocols.control.report import plot_ps_curves, plot_risk_curves
    from dukb.neural.protocols.muse.report import plot_curves as muse_curves
    from dukb.neural.protocols.rwku.report import plot_aa

    ctl = [
        {
            "ratio": "1%",
            "method": m,
            "control": c,
            "value": v,
            "ps_exact_forget": 1 - v / 4,
            "ps_exact_retain": 0.9 - v / 10,
            "risk_curve": {"unlearning_risk": [1.0, 0.5, 0.1], "loss_retain": [0.3, 0.4, 0.5]},
        }
        for m in ("ga", "npo")
        for c in ("oc", "none")
        for v in (1.0, 2.0, 3.0)
    ]
    summary = pd.DataFrame(
        [
            {
                "experiment": "scalability",
                "model_kind": k,
                "request": q,
                "name": n,
                "knowmem_retain": 0.5,
                "knowmem_forget": 0.3,
            }
            for q in ("s1", "s2")
            for n, k in (("Retrain", "retrain"), ("GA", "unlearned"))
        ]
    )
    rw = [
        {
            "request_kind": "single",
            "request": "target-1",
            "method": m,
            "param": "steps" if m else None,
            "setting": {"steps": 2} if m else None,
            "rouge_forget_qa": 0.4,
            "rouge_forget_fb": 0.5,
            "rouge_forget_aa_by_kind": {"prefix": 0.3},
        }
        for m in ("", "ga")
    ]
    made = [
        plot_ps_curves(ctl, tmp_path / "ps_curves.png", order=["npo", "ga"]),
        plot_risk_curves(ctl, tmp_path / "risk_curves.png"),
        muse_curves(summary, "scalability", tmp_path / "scalability.png"),
        plot_aa(rw, tmp_path / "aa_kinds.png"),
    ]
    for png in made:
        assert png is not None and png.read_bytes().startswith(b"\x89PNG")
        assert png.with_suffix(".pdf").read_bytes().startswith(b"%PDF")


def test_lines_figure_draws_each_series_in_its_methods_look(tmp_path, monkeypatch):
    import matplotlib.figure

    seen = {}
    save = matplotlib.figure.Figure.savefig

    def spy(f, *a, **k):
        seen.update(
            {
                ln.get_gid(): (to_hex(ln.get_color()), ln.get_linestyle())
                for ax in f.axes
                for ln in ax.lines
                if ln.get_gid()
            }
        )
        return save(f, *a, **k)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", spy)
    panel = plots.Panel(
        title="t",
        series=[
            plots.Series("npo", [0, 1], [1, 0]),
            plots.Series("Retrain", [0, 1], [0, 1]),
            plots.Series("npo", [0, 1], [0.5, 0.5], label=None, linestyle="--"),
        ],
    )
    plots.lines_figure([panel], tmp_path / "x.png", order=["ga", "npo"])
    assert seen["curve:npo"] == (plots.PALETTE[1].lower(), "--")  # the last npo series: the retain line, dashed
    assert seen["curve:Retrain"][0] == "#7f7f7f"


def test_the_runs_method_order_comes_from_its_identity_then_its_methods_list():
    assert plots.run_order({"identity": {"methods": {"ga": {}, "npo_gdr": {}}}, "methods": ["npo_gdr"]}) == [
        "ga",
        "npo_gdr",
    ]
    assert plots.run_order({"methods": ["tv", "ga"]}) == ["tv", "ga"]
    assert plots.run_order({"methods": "ga"}) == [] and plots.run_order({}) == []
    assert plots.looks(["ga"], plots.run_order({"methods": ["tv", "ga"]}))["ga"].color == plots.PALETTE[1]
