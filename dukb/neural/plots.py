"""dukb's one figure style. Every protocol's figures (evaluate, muse, rwku, control, restor and the attacks plot) are
drawn here, inside :func:`style` (matplotlib, Agg backend):

- the Okabe-Ito colour-blind-safe palette (:data:`OKABE_ITO`); a reference model (the target model, f_retrain, the
  model before unlearning) is black or grey;
- one look per method (colour, marker, line style, line width) assigned by the method's place in the run's list
  (:func:`looks`), so a method keeps its look in every figure of a run; later methods get thinner lines drawn on top,
  with slight transparency, so no curve hides another;
- each figure written twice by :func:`save`: ``NAME.png`` (200 dpi) and ``NAME.pdf`` (vector, fonts embedded as
  TrueType, no creation date, so the same rows give the same bytes).

The accuracy-recall figure of an evaluate run (:func:`tradeoff_figure`) follows Wu et al. 2025, Fig. 3a and Fig. 9:
x = recall (Eq. 1), y = accuracy on the facts outside the forget set, one point per setting of a method, averaged
over targets. dukb adds a band (spread over targets), setting labels, the accuracy >= 0.8 / recall >= 0.8 region of
Table 1's rule, and a second panel for the held-out probe forms.

Source: Okabe & Ito 2008, "Color Universal Design" (the palette); Wu et al. 2025, Fig. 3a, Fig. 9 and Table 1.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dukb.neural.curves import Curve, CurvePoint, mean_curves, method_order
from dukb.neural.metrics.summary import heldout_points
from dukb.neural.run.files import output_file

#: The Okabe-Ito palette (Okabe & Ito 2008), name -> hex colour.
OKABE_ITO = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky blue": "#56B4E9",
    "bluish green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish purple": "#CC79A7",
}
#: Series colours in the order methods get them (black is kept for references; yellow, faint on white, comes last).
PALETTE = tuple(
    OKABE_ITO[c] for c in ("blue", "vermillion", "bluish green", "reddish purple", "orange", "sky blue", "yellow")
)
#: Markers and line styles in the order methods get them (cycled independently of the colours).
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINESTYLES = ("-", (0, (5, 1.5)), (0, (3, 1, 1, 1)), (0, (1, 1)), (0, (6, 2, 1, 2, 1, 2)))
#: Names drawn as references (black or grey), compared in lower case.
REFERENCES = ("target", "retrain", "before", "original")
#: Raster resolution of the PNG (dots per inch).
DPI = 200

_RC = {
    "font.size": 8,
    "axes.titlesize": 9,
    "axes.labelsize": 8,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": 7,
    "legend.frameon": False,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.linewidth": 0.4,
    "grid.alpha": 0.35,
    "axes.axisbelow": True,
    "lines.markersize": 4.5,
    "pdf.fonttype": 42,
    "ps.fonttype": 42,
    "svg.hashsalt": "dukb",
    "savefig.bbox": "tight",
    "savefig.pad_inches": 0.04,
    "figure.dpi": 100,
    "hatch.linewidth": 0.5,
}


@contextmanager
def style() -> Iterator:
    """The context every dukb figure is drawn in: the Agg backend, dukb's rcParams and the Okabe-Ito colour cycle.

    Yields:
        matplotlib.pyplot (so callers need no import of their own).

    Source: Okabe & Ito 2008 (palette).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from cycler import cycler

    with plt.rc_context({**_RC, "axes.prop_cycle": cycler(color=PALETTE)}):
        yield plt


@dataclass(frozen=True)
class Look:
    """How one method (or reference) is drawn in every figure of a run.

    Attributes:
        color: hex colour (Okabe-Ito). marker: matplotlib marker. linestyle: matplotlib line style.
        linewidth: points. zorder: drawing order (later methods, with thinner lines, on top).
    """

    color: str
    marker: str
    linestyle: object
    linewidth: float
    zorder: float

    @property
    def ink(self) -> str:
        """The colour darkened by a third (hex), for text in the method's colour (a yellow label stays readable)."""
        from matplotlib.colors import to_hex, to_rgb

        return to_hex(tuple(0.67 * c for c in to_rgb(self.color)))

    def line(self, **kw) -> dict:
        """Keyword arguments of ``Axes.plot`` for this look (``kw`` overrides)."""
        return {
            "color": self.color,
            "marker": self.marker,
            "linestyle": self.linestyle,
            "linewidth": self.linewidth,
            "zorder": self.zorder,
            "alpha": 0.9,
            "markeredgecolor": "white",
            "markeredgewidth": 0.5,
            **kw,
        }


def run_order(config: dict) -> list[str]:
    """A run's method order from its config.json: the method labels of its identity (the rows' ``method``), else its
    ``methods`` list; [] when neither is there.

    Args:
        config: the run's config.json (dict).

    Returns:
        list of method labels, in the order the run lists them.
    """
    ident = config.get("identity") if isinstance(config, dict) else None
    methods = ident.get("methods") if isinstance(ident, dict) else None
    return method_order(methods) or method_order(config.get("methods") if isinstance(config, dict) else None)


def looks(names: Sequence[str], order: Sequence[str] | None = None) -> dict[str, Look]:
    """One :class:`Look` per name, stable across a run's figures.

    Args:
        names: the series drawn (method names; case is ignored, so "GA" and "ga" share a look).
        order: the run's method list (config.json's ``methods``); a name's look is set by its place in ``order``
            followed by the names not in it, so the same run gives every figure the same colours.

    Returns:
        name -> Look (keys as given in ``names``). References (:data:`REFERENCES`) are black (solid) and grey
        (dashed), 1.1 points wide; the others take :data:`PALETTE`, :data:`MARKERS` and :data:`LINESTYLES` in turn,
        with line widths from 1.8 down to 0.9 points. The thinner a line, the later it is drawn (on top).

    Source: Okabe & Ito 2008 (palette).
    """
    keys = [str(n).lower() for n in method_order(order)]
    keys += [k for k in dict.fromkeys(str(n).lower() for n in names) if k not in keys]
    methods = [k for k in dict.fromkeys(keys) if k not in REFERENCES]
    out = {}
    for n in names:
        k = str(n).lower()
        if k in REFERENCES:
            grey = REFERENCES.index(k) % 2
            out[n] = Look(
                "#000000" if not grey else "#7f7f7f",
                "o" if not grey else "s",
                "-" if not grey else "--",
                1.1,
                3.9 + 0.01 * REFERENCES.index(k),
            )
            continue
        i = methods.index(k)
        width = max(0.9, 1.8 - 0.25 * i)
        out[n] = Look(
            PALETTE[i % len(PALETTE)],
            MARKERS[i % len(MARKERS)],
            LINESTYLES[i % len(LINESTYLES)],
            width,
            5.0 - width + 0.01 * i,
        )
    return out


def save(fig, path) -> list[Path]:
    """Write ``fig`` as ``path`` with suffix .png (:data:`DPI`) and .pdf (same base name), then close it.

    A FIFO, device or link in either place is replaced (:func:`dukb.neural.run.files.output_file`). The PDF carries no
    creation date, so its bytes depend on the figure alone.

    Returns:
        [png path, pdf path].

    Raises:
        InputError: a directory stands in either place (named).
    """
    import matplotlib.pyplot as plt

    png = Path(path).with_suffix(".png")
    pdf = png.with_suffix(".pdf")
    try:
        with style():  # rcParams read at save time (bbox, font embedding) are dukb's too
            fig.savefig(output_file(png), dpi=DPI)
            fig.savefig(output_file(pdf), metadata={"CreationDate": None, "ModDate": None})
    finally:
        plt.close(fig)
    return [png, pdf]


def figure_files(path) -> list[Path]:
    """The files :func:`save` writes for ``path``: [NAME.png, NAME.pdf]."""
    png = Path(path).with_suffix(".png")
    return [png, png.with_suffix(".pdf")]


def figure_markdown(path, caption: str) -> str:
    """report.md's line for a figure: the PNG shown, the PDF linked (names relative to the run directory).

    Returns:
        e.g. ``![Accuracy-recall curves](accuracy_recall.png) (vector: [accuracy_recall.pdf](accuracy_recall.pdf))``.
    """
    png, pdf = figure_files(path)
    return f"![{caption}]({png.name}) (vector: [{pdf.name}]({pdf.name}))"


def _merge_labels(points: list[CurvePoint], eps: float = 0.02) -> list[tuple[CurvePoint, str]]:
    """Consecutive settings drawn at (almost) the same place, over as many targets, share one label ("steps=1, 2" or
    "steps=1…8")."""
    groups: list[list[CurvePoint]] = []
    for q in points:
        last = groups[-1][-1] if groups else None
        if last and q.n == last.n and abs(q.recall - last.recall) < eps and abs(q.accuracy - last.accuracy) < eps:
            groups[-1].append(q)
        else:
            groups.append([q])
    out = []
    for grp in groups:
        if len(grp) == 1:
            out.append((grp[0], grp[0].label))
            continue
        first, last = grp[0].label, grp[-1].label
        name, sep, _ = first.partition("=")
        tail = last.partition("=")[2] if last.startswith(name + "=") else last
        out.append((grp[0], f"{first}{', ' if len(grp) == 2 else '…'}{tail}" if sep else f"{first}…{last}"))
    return out


def _place_labels(fig, ax, items, markers, lines=(), taken=()) -> None:
    """Annotate each (x, y, normal, text, colour, gid) at the first small offset (along the curve's normal first,
    then the eight compass directions, near then farther) that stays inside the axes and overlaps no marker, no label
    placed before and no other method's line; a label with no such place is left out (clutter). ``markers``: the
    (x, y) data points; ``lines``: (x, y, gid) points along each method's line (a label may touch its own);
    ``taken``: display boxes already used (the region's label)."""

    from matplotlib.transforms import Bbox

    renderer = fig.canvas.get_renderer()
    box = ax.get_window_extent(renderer)

    def square(xy, half):  # half: in points
        (px, py), r = ax.transData.transform(xy), half * fig.dpi / 72
        return Bbox.from_extents(px - r, py - r, px + r, py + r)

    placed = [(b, None) for b in taken] + [(square(xy, 2.2), None) for xy in markers]
    placed += [(square((x, y), 0.8), gid) for x, y, gid in lines]
    compass = [(math.cos(math.radians(d)), math.sin(math.radians(d))) for d in (0, 180, 90, 270, 45, 225, 135, 315)]
    for x, y, (nx, ny), text, colour, gid in items:
        cands = [(d * ux, d * uy) for d in (6, 11) for ux, uy in [(nx, ny), (-nx, -ny)] + compass]
        for dx, dy in cands:
            a = ax.annotate(
                text,
                (x, y),
                xytext=(dx, dy),
                textcoords="offset points",
                fontsize=5.5,
                color=colour,
                ha="left" if dx > 1 else "right" if dx < -1 else "center",
                va="bottom" if dy > 1 else "top" if dy < -1 else "center",
                zorder=6,
                gid=gid,
                annotation_clip=False,
            )
            bb = a.get_window_extent(renderer).expanded(1.05, 1.1)
            inside = box.x0 <= bb.x0 and bb.x1 <= box.x1 and box.y0 <= bb.y0 and bb.y1 <= box.y1
            if inside and not any(owner != gid and bb.overlaps(o) for o, owner in placed):
                placed.append((bb, None))
                break
            a.remove()


def _draw_region(ax, threshold: float):
    """Shade and label the region accuracy ≥ ``threshold`` and recall ≥ ``threshold`` (Table 1's rule) with its
    dashed edges; returns the label (its box is kept free of setting labels)."""
    from matplotlib.patches import Rectangle

    ax.add_patch(
        Rectangle(
            (threshold, threshold),
            1.02 - threshold,
            1.02 - threshold,
            facecolor=OKABE_ITO["bluish green"],
            alpha=0.12,
            edgecolor="none",
            zorder=0.5,
            gid="region",
        )
    )
    ax.axvline(threshold, color="0.45", lw=0.6, ls="--", zorder=0.6)
    ax.axhline(threshold, color="0.45", lw=0.6, ls="--", zorder=0.6)
    return ax.text(
        1.0,
        0.995,
        f"accuracy ≥ {threshold:g}\nand recall ≥ {threshold:g}",
        ha="right",
        va="top",
        fontsize=6,
        color="#00573f",
        zorder=0.7,
        gid="region-label",
    )


def _draw_band(ax, c: Curve, look: Look, fill: float) -> None:
    """A curve's band over targets (a method with at least 2 targets): a polygon along the curve (alpha ``fill``),
    or, for a single setting, error bars of the spread in both directions."""
    from matplotlib.patches import Polygon

    if c.n_targets >= 2 and len(c.points) >= 2:
        upper = [(q.recall + q.hi * q.normal[0], q.accuracy + q.hi * q.normal[1]) for q in c.points]
        lower = [(q.recall + q.lo * q.normal[0], q.accuracy + q.lo * q.normal[1]) for q in c.points]
        ax.add_patch(
            Polygon(
                upper + lower[::-1],
                closed=True,
                facecolor=look.color,
                alpha=fill,
                edgecolor="none",
                zorder=1 + 0.01 * look.zorder,
                gid=f"band:{c.method}",
            )
        )
    elif c.n_targets >= 2:  # one setting: the spread as error bars in both directions
        q = c.points[0]
        sd = q.targets.std(axis=0)
        ax.errorbar(
            [q.recall],
            [q.accuracy],
            xerr=[sd[0]],
            yerr=[sd[1]],
            color=look.color,
            alpha=0.5,
            lw=0.8,
            capsize=0,
            zorder=look.zorder - 0.05,
            gid=f"band:{c.method}",
        )


def _draw_panel(fig, ax, curves: list[Curve], lk: dict[str, Look], title: str, empty: str, threshold: float) -> None:
    """One panel of :func:`tradeoff_plot`: the region, then per method its band, mean curve and setting labels."""
    ax.set_title(title)
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_aspect("equal")
    region = _draw_region(ax, threshold)
    if not any(c.points for c in curves):
        ax.text(0.5, 0.5, empty, ha="center", va="center", transform=ax.transAxes, fontsize=8, color="0.4", gid="empty")
        return
    labels, inner = [], []
    fill = min(0.14, max(0.06, 0.5 / len(curves)))  # fainter bands when many overlap
    for c in curves:
        look = lk[c.method]
        xs = [q.recall for q in c.points]
        ys = [q.accuracy for q in c.points]
        _draw_band(ax, c, look, fill)
        ax.plot(xs, ys, gid=f"curve:{c.method}", **look.line())
        base = c.n_targets
        merged = _merge_labels(c.points)
        for j, (q, text) in enumerate(merged):  # a curve's two ends are placed first, then its inner settings
            text += f" (n={q.n})" if q.n != base else ""
            (labels if j in (0, len(merged) - 1) else inner).append(
                (q.recall, q.accuracy, q.normal, text, look.ink, f"label:{c.method}")
            )
    fig.canvas.draw()
    along = [
        (a.recall + f * (b.recall - a.recall), a.accuracy + f * (b.accuracy - a.accuracy), f"label:{c.method}")
        for c in curves
        for a, b in zip(c.points, c.points[1:])
        for f in (0.1, 0.25, 0.4, 0.5, 0.6, 0.75, 0.9)
    ]
    _place_labels(
        fig,
        ax,
        labels + inner,
        [(q.recall, q.accuracy) for c in curves for q in c.points],
        along,
        [region.get_window_extent(fig.canvas.get_renderer())],
    )


def tradeoff_plot(
    panels: Sequence[tuple[str, object]],
    *,
    accuracy: str = "accuracy_all",
    band: str = "std",
    order: Sequence[str] | None = None,
    threshold: float = 0.8,
    n_boot: int = 1000,
    seed: int = 0,
    empty: str = "no held-out rows",
):
    """Build the accuracy-recall figure: one panel per (title, rows) side by side, sharing both axes.

    Each panel draws, per method, the mean curve over targets (:func:`mean_curves`; markers and line styles of
    :func:`looks`), its band (none for a method with a single target; error bars for a single setting), a short
    label per setting (offset text; settings at the same place share one; ``(n=k)`` when fewer targets have it), and
    the region accuracy ≥ ``threshold`` and recall ≥ ``threshold`` shaded and labelled. A panel whose rows are None
    or hold no scored row says ``empty`` instead of curves. The legend (below) names each method with its number of
    targets, e.g. "GA (n=11)".

    Args:
        panels: (title, rows DataFrame or None) per panel, e.g. [("qa form", rows), ("held-out forms", held)].
        accuracy, band, n_boot, seed, order: as :func:`mean_curves`.
        threshold: τ of Table 1 (the region's corner).
        empty: the text of a panel with nothing to draw.

    Returns:
        matplotlib Figure (call :func:`save`). Artists carry gids: ``region``, ``band:M``, ``curve:M``, ``label:M``
        and ``empty``.

    Raises:
        InputError: ``band`` is not one of :data:`dukb.neural.curves.BANDS`.

    Source: Wu et al. 2025, Fig. 3a and Fig. 9 (x = recall, y = accuracy, one point per setting), Table 1 (τ = 0.8).
    """

    with style() as plt:
        per = [
            (t, mean_curves(d, accuracy, band, n_boot=n_boot, seed=seed, order=order) if d is not None else [])
            for t, d in panels
        ]
        names = method_order(order) + [c.method for _, cs in per for c in cs]
        names = list(dict.fromkeys(n for n in names if any(c.method == n for _, cs in per for c in cs)))
        lk = looks(names, order)
        fig, axes = plt.subplots(
            1, len(panels), figsize=(3.5 * len(panels) + 0.4, 4.0), sharex=True, sharey=True, squeeze=False
        )
        fig.subplots_adjust(bottom=0.16, wspace=0.08)  # before the labels are placed: they are fitted to this layout
        for ax, (title, curves) in zip(axes[0], per):
            _draw_panel(fig, ax, curves, lk, title, empty, threshold)
            ax.set_xlabel("Recall (deep unlearning)")
        axes[0][0].set_ylabel("Accuracy (other facts kept)")
        axes[0][0].yaxis.set_tick_params(labelleft=True)
        _legend(fig, per, names, lk, band, threshold)
    return fig


def _legend(fig, per: list, names: list[str], lk: dict[str, Look], band: str, threshold: float) -> None:
    """The figure's legend below the panels (each method with its number of targets, per panel where they differ)
    and the caption saying what the points, the band and the shaded region are."""
    from matplotlib.lines import Line2D

    handles = []
    for m in names:
        ns = [c.n_targets for _, cs in per for c in cs if c.method == m]
        label = (
            f"{m.upper()} (n={ns[0]})"
            if len(set(ns)) == 1
            else f"{m.upper()} (n={', '.join(str(n) for n in ns)} by panel)"
        )
        handles.append(Line2D([], [], label=label, **lk[m].line()))
    what = "±1 std over targets" if band == "std" else "95% bootstrap interval of the mean"
    if handles:
        fig.legend(
            handles=handles,
            loc="upper center",
            bbox_to_anchor=(0.5, 0.07),
            ncol=min(len(handles), 5),
            handlelength=3.0,
        )
    fig.text(
        0.5,
        0.07 - 0.045 * (1 + (len(handles) - 1) // 5),
        f"Points: mean over targets per setting. "
        f"Band: {what}, across the curve. Shaded: accuracy ≥ {threshold:g} and recall ≥ {threshold:g}.",
        ha="center",
        va="top",
        fontsize=6,
        color="0.3",
    )


def tradeoff_figure(
    df, path, *, accuracy: str = "accuracy_all", band: str = "std", order: Sequence[str] | None = None
) -> list[Path]:
    """An evaluate run's accuracy_recall.png and .pdf: the qa form (the rows' own probe) beside the held-out forms
    (:func:`dukb.neural.metrics.summary.heldout_points`), drawn by :func:`tradeoff_plot`.

    Args:
        df: evaluate rows (pandas DataFrame).
        path: the figure's path (its suffix is replaced by .png and .pdf).
        accuracy, band, order: as :func:`mean_curves`.

    Returns:
        [png path, pdf path].

    Source: Wu et al. 2025, Fig. 3a and Fig. 9.
    """

    held = heldout_points(df)
    fig = tradeoff_plot(
        [("qa probe form", df), ("held-out probe forms (never seen)", held if len(held) else None)],
        accuracy=accuracy,
        band=band,
        order=order,
    )
    return save(fig, path)


# ------------------------------------------------------------------------------ the other protocols' figures ---
@dataclass
class Series:
    """One line of a panel.

    Attributes:
        name: the method or reference (picks the :class:`Look`). x, y: values (NaN: a gap). label: legend text
        ("": ``name``, in upper case for a method; None: not in the legend). linestyle, marker: overrides of the
        look (e.g. dashed for a second quantity of the same method).
    """

    name: str
    x: Sequence
    y: Sequence
    label: str | None = ""
    linestyle: object = None
    marker: object = None


@dataclass
class Panel:
    """One axes of :func:`lines_figure`.

    Attributes:
        title, xlabel, ylabel: texts. series: the lines. xticks: category names at x = 0, 1, ... (None: numeric x).
        ylim: (low, high) or None. yscale: matplotlib scale name (with ``yscale_kw``). diagonal: draw y = x (an ROC's
        chance line).
    """

    title: str = ""
    xlabel: str = ""
    ylabel: str = ""
    series: list[Series] = field(default_factory=list)
    xticks: Sequence[str] | None = None
    ylim: tuple | None = None
    yscale: str | None = None
    yscale_kw: dict = field(default_factory=dict)
    diagonal: bool = False


def lines_figure(
    panels: Sequence[Panel],
    path,
    *,
    ncols: int | None = None,
    order: Sequence[str] | None = None,
    suptitle: str | None = None,
    extra_legend: Sequence[tuple[str, object]] = (),
    panel_size: tuple[float, float] = (3.4, 2.8),
) -> list[Path]:
    """A grid of line panels in dukb's style, each series drawn in its method's :class:`Look`; one legend (inside
    the panel for a single panel, below the grid otherwise). Used by muse (Fig. 4 and 6 of MUSE), rwku, control.

    Args:
        panels: the panels, row by row.
        path: the figure's path (written as .png and .pdf).
        ncols: panels per row (default: all in one row).
        order: the run's method order (:func:`looks`).
        suptitle: a title over the grid.
        extra_legend: (text, linestyle) entries in black explaining a line style (e.g. ("forget", "-")).
        panel_size: inches per panel (width, height).

    Returns:
        [png path, pdf path].
    """
    from matplotlib.lines import Line2D

    with style() as plt:
        ncols = ncols or len(panels)
        nrows = -(-len(panels) // ncols)
        fig, axes = plt.subplots(
            nrows, ncols, figsize=(panel_size[0] * ncols, panel_size[1] * nrows + 0.3), squeeze=False
        )
        names = list(dict.fromkeys(s.name for p in panels for s in p.series))
        lk = looks(names, order)
        legend: dict[str, Line2D] = {}
        for ax, p in zip(axes.flat, panels):
            for s in p.series:
                kw = lk[s.name].line()
                if s.linestyle is not None:
                    kw["linestyle"] = s.linestyle
                if s.marker is not None:
                    kw["marker"] = s.marker
                x = range(len(s.y)) if p.xticks is not None and s.x is None else s.x
                ax.plot(list(x), list(s.y), gid=f"curve:{s.name}", **kw)
                label = (s.name if s.name.lower() in REFERENCES else s.name.upper()) if s.label == "" else s.label
                if label is not None and label not in legend:
                    legend[label] = Line2D([], [], label=label, **kw)
            if p.xticks is not None:
                ax.set_xticks(range(len(p.xticks)), p.xticks, rotation=30, ha="right")
            if p.diagonal:
                ax.plot([0, 1], [0, 1], color="0.5", lw=0.7, ls=":", zorder=1)
            if p.ylim:
                ax.set_ylim(*p.ylim)
            if p.yscale:
                ax.set_yscale(p.yscale, **p.yscale_kw)
            ax.set_title(p.title)
            ax.set_xlabel(p.xlabel)
            ax.set_ylabel(p.ylabel)
        for ax in list(axes.flat)[len(panels) :]:
            ax.set_visible(False)
        handles = list(legend.values()) + [
            Line2D([], [], color="black", lw=1.0, linestyle=ls, label=t) for t, ls in extra_legend
        ]
        if suptitle:
            fig.suptitle(suptitle)
        fig.tight_layout()
        if handles and len(panels) == 1:
            axes[0][0].legend(handles=handles, loc="best")
        elif handles:
            fig.legend(
                handles=handles,
                loc="upper center",
                bbox_to_anchor=(0.5, 0.0),
                ncol=min(len(handles), 6),
                handlelength=3.0,
            )
    return save(fig, path)


def bars_figure(
    categories: Sequence[str],
    series: dict[str, Sequence[float]],
    path,
    *,
    ylabel: str = "",
    title: str = "",
    order: Sequence[str] | None = None,
    ylim: tuple | None = None,
) -> list[Path]:
    """Grouped bars in dukb's style: one group per category, one bar per series in its method's colour (each series
    also hatched differently, so the bars read without colour). Used by rwku (leak per probe kind) and the attacks
    plot.

    Args:
        categories: the groups' names (x axis).
        series: name -> one value per category (NaN: no bar).
        path: the figure's path (written as .png and .pdf).
        ylabel, title: texts. order: the run's method order (:func:`looks`). ylim: (low, high) or None.

    Returns:
        [png path, pdf path].
    """

    hatches = ("", "////", "....", "\\\\\\\\", "xxxx", "----", "oo", "++++")
    with style() as plt:
        fig, ax = plt.subplots(figsize=(max(4.5, 0.55 * len(categories) * max(1, len(series)) ** 0.5 + 2.0), 3.2))
        lk = looks(list(series), order)
        width = 0.8 / max(1, len(series))
        x = np.arange(len(categories))
        for j, (name, vals) in enumerate(series.items()):
            ax.bar(
                x - 0.4 + width * (j + 0.5),
                np.asarray(vals, dtype=float),
                width,
                label=name,
                color=lk[name].color,
                edgecolor="white",
                linewidth=0.4,
                hatch=hatches[j % len(hatches)],
                alpha=0.9,
                gid=f"bars:{name}",
            )
        ax.set_xticks(
            x,
            list(categories),
            rotation=35 if len(categories) > 4 else 0,
            ha="right" if len(categories) > 4 else "center",
        )
        ax.grid(axis="x", visible=False)
        if ylim:
            ax.set_ylim(*ylim)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend(ncol=min(len(series), 4), loc="upper left", bbox_to_anchor=(1.0, 1.0))
        fig.tight_layout()
    return save(fig, path)


def stacked_bars_figure(
    bars: Sequence[tuple[str, Sequence[tuple[str, float]]]],
    colours: dict[str, str],
    path,
    *,
    ylabel: str = "",
    title: str = "",
) -> list[Path]:
    """Stacked bars in dukb's style (restor's fact states): each bar a list of (part, value), parts coloured by
    ``colours`` (Okabe-Ito), a part of at least 6 units labelled with its value.

    Args:
        bars: (bar name, [(part, value), ...]) per bar; values in percent.
        colours: part -> colour.
        path: the figure's path (written as .png and .pdf).
        ylabel, title: texts.

    Returns:
        [png path, pdf path].
    """
    with style() as plt:
        fig, ax = plt.subplots(figsize=(4.2, 3.4))
        seen = set()
        for x, (_, parts) in enumerate(bars):
            bottom = 0.0
            for part, v in parts:
                v = v or 0.0
                ax.bar(
                    x,
                    v,
                    bottom=bottom,
                    color=colours[part],
                    width=0.6,
                    edgecolor="white",
                    linewidth=0.5,
                    label=None if part in seen else part,
                    gid=f"part:{part}",
                )
                seen.add(part)
                if v >= 6:
                    ax.text(
                        x,
                        bottom + v / 2,
                        f"{v:.0f}%",
                        ha="center",
                        va="center",
                        fontsize=7,
                        color="white"
                        if colours[part]
                        in (OKABE_ITO["blue"], OKABE_ITO["vermillion"], OKABE_ITO["bluish green"], "#000000")
                        else "black",
                    )
                bottom += v
        ax.set_xticks(range(len(bars)), [b for b, _ in bars])
        ax.grid(axis="x", visible=False)
        ax.set_ylim(0, 100)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
        fig.tight_layout()
    return save(fig, path)


__all__ = [
    "DPI",
    "LINESTYLES",
    "Look",
    "MARKERS",
    "OKABE_ITO",
    "PALETTE",
    "Panel",
    "REFERENCES",
    "Series",
    "bars_figure",
    "figure_files",
    "figure_markdown",
    "lines_figure",
    "looks",
    "run_order",
    "save",
    "stacked_bars_figure",
    "style",
    "tradeoff_figure",
    "tradeoff_plot",
]
