"""Reference tables of the registries: one source for `dukb methods` (terminal tables, or markdown with
``--format markdown``) and for the docs site's generated reference pages (docs/hooks.py).

Each registry builds its own :class:`Table` from its entries (:func:`dukb.neural.methods.methods_table`,
:func:`dukb.neural.metrics.metrics_table`, ...); :func:`dukb.cli.reference.reference_tables` gathers them by
reference page. A table holds plain cell texts; :meth:`Table.markdown` formats them for the docs and ``--format markdown``, and the CLI
draws the same cells as rich tables wrapped to the terminal's width (:func:`dukb.cli.render.print_tables`).
This module imports no registry and no torch (the registries import it).

Source: dukb (issue 38, item 8: reference pages generated from the registries, not pasted).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Table:
    """One reference table.

    Attributes:
        title: the table's heading (a docs section heading, the terminal table's title).
        columns: column headers.
        rows: one tuple of cell texts per entry, ``len(columns)`` each; cells may hold inline markdown code spans
            (`` `--schedule` ``).
        intro: one or two sentences said before the table (may be empty).
        code: indices of the columns whose cells are names (written as code spans in markdown).

    Raises:
        ValueError: a row whose length differs from the number of columns.
    """

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    intro: str = ""
    code: tuple[int, ...] = (0,)

    def __post_init__(self):
        for r in self.rows:
            if len(r) != len(self.columns):
                raise ValueError(f"table {self.title!r}: a row has {len(r)} cells for {len(self.columns)} columns")

    def markdown(self, level: int = 3) -> str:
        """The table as markdown: a heading of ``level`` (0: none), the intro, then a pipe table (``|`` in cells
        escaped, empty cells as "–")."""

        def cell(i: int, text: str) -> str:
            text = str(text).replace("|", "\\|").replace("\n", " ") or "–"
            return f"`{text}`" if i in self.code and text != "–" else text

        lines = [f"{'#' * level} {self.title}", ""] if level else []
        if self.intro:
            lines += [self.intro, ""]
        lines += ["| " + " | ".join(self.columns) + " |", "|" + "---|" * len(self.columns)]
        lines += ["| " + " | ".join(cell(i, c) for i, c in enumerate(r)) + " |" for r in self.rows]
        return "\n".join(lines)


__all__ = ["Table"]
