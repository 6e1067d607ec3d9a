"""The docs site's reference pages, generated at build time (docs/hooks.py; never committed as copies):
reference/cli.md from every command's ``--help``, and reference/{methods,metrics,attacks,protocols}.md from the
registries' tables (:func:`reference_tables`, the tables `dukb methods` draws).

Source: dukb (issue 38, item 8: reference pages generated from the registries, not pasted).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import re

from dukb.neural.tables import Table

#: The width, in characters, of the ``--help`` texts on the CLI reference page.
HELP_WIDTH = 100

_GENERATED = "*Generated when the site is built{how}; do not edit: change the {what} and the page follows.*"


def command_help(args: list[str], width: int = HELP_WIDTH) -> str:
    """The text ``dukb ARGS --help`` prints, at ``width`` characters, without colour.

    Args:
        args: the command path after ``dukb`` (``[]`` for the top level, ``["finetune"]``).
        width: terminal width the help is wrapped to.

    Returns:
        The help text, trailing spaces removed.

    Raises:
        RuntimeError: the help exits with a status other than 0.
    """
    from dukb.cli.main import main

    out = io.StringIO()
    old = {k: os.environ.get(k) for k in ("COLUMNS", "NO_COLOR", "TERM")}
    os.environ.update(COLUMNS=str(width), NO_COLOR="1", TERM="dumb")
    try:
        with contextlib.redirect_stdout(out):
            code = main([*args, "--help"])
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    if code != 0:
        raise RuntimeError(f"dukb {' '.join(args)} --help exited with {code}")
    return "\n".join(line.rstrip() for line in out.getvalue().strip("\n").splitlines())


def command_names() -> list[str]:
    """The names of the visible ``dukb`` commands, in the order ``dukb --help`` lists them."""
    import typer

    from dukb.cli.main import app

    group = typer.main.get_command(app)
    return [name for name, cmd in group.commands.items() if not getattr(cmd, "hidden", False)]


def cli_page() -> str:
    """reference/cli.md: the top-level ``--help``, then one section per command (``## dukb NAME``, anchor
    ``#dukb-NAME``) holding its ``--help``."""
    names = command_names()
    lines = [
        "# Command-line reference",
        "",
        _GENERATED.format(how=" from each command's `--help`", what="command's options or docstring"),
        "",
        "Every command prints the same text with `dukb COMMAND --help`. Exit codes: 0 success; 1 the command "
        "finished short of its goal (e.g. `dukb finetune` below its target accuracy); 2 bad input or a "
        "refusal (one line `dukb: error: ...`); 130 interrupted.",
        "",
        "Commands: " + ", ".join(f"[`{n}`](#dukb-{n})" for n in names) + ".",
        "",
        "```text",
        command_help([]),
        "```",
    ]
    for n in names:
        lines += ["", f"## dukb {n}", "", "```text", command_help([n]), "```"]
    return "\n".join(lines) + "\n"


#: reference page -> its title (the docs site's reference/<page>.md, in this order).
PAGES = {
    "methods": "Methods, presets, forget scopes and model families",
    "metrics": "Metrics",
    "attacks": "Attacks",
    "protocols": "Protocols and shared options",
}


def reference_tables() -> dict[str, list[Table]]:
    """Every registry's table, by reference page (:data:`PAGES`): methods (methods, presets, forget scopes, model
    families), metrics, attacks, protocols (protocols, shared options, option ranges). The registries' tables are
    drawn from their entries' metadata (:mod:`dukb.neural.catalog`), with no method or attack imported.

    Returns:
        page name -> its tables, in display order.
    """
    from dukb.cli.run_options import ranges_table
    from dukb.neural.catalog import attacks_table, methods_table, metrics_table, presets_table, scopes_table
    from dukb.neural.families import families_table
    from dukb.neural.protocols import protocols_table
    from dukb.neural.runconfig import options_table

    return {
        "methods": [methods_table(), presets_table(), scopes_table(), families_table()],
        "metrics": [metrics_table()],
        "attacks": [attacks_table()],
        "protocols": [protocols_table(), options_table(), ranges_table()],
    }


def table_pages() -> dict[str, str]:
    """reference/{methods,metrics,attacks,protocols}.md from the registries' tables (imports them, and so torch).

    Returns:
        page path relative to docs/ -> markdown.
    """
    out = {}
    for page, tables in reference_tables().items():
        head = [
            f"# {PAGES[page]}",
            "",
            _GENERATED.format(
                how=" from the registries (`dukb methods --format markdown` prints the same tables)", what="registry"
            ),
            "",
        ]
        out[f"reference/{page}.md"] = "\n".join(head) + "\n" + "\n\n".join(t.markdown(level=2) for t in tables) + "\n"
    return out


#: the registry tables a guide page shows where it says ``<!-- dukb-table: NAME -->`` (:func:`guide_markdown`)
GUIDE_TABLES = {"forget-scopes": "scopes_table", "presets": "presets_table", "attacks": "attacks_table"}
_GUIDE_MARK = re.compile(r"^<!-- dukb-table: ([a-z-]+) -->$", re.M)


def guide_markdown(markdown: str) -> str:
    """A guide page with each ``<!-- dukb-table: NAME -->`` line replaced by the registry's table (heading and intro
    left to the page; :data:`GUIDE_TABLES`), so that no guide pastes a registry's rows (docs/hooks.py, at build time).

    Raises:
        ValueError: a NAME not in :data:`GUIDE_TABLES`.
    """
    from dukb.neural import catalog

    def table(m: re.Match) -> str:
        if m.group(1) not in GUIDE_TABLES:
            raise ValueError(f"unknown dukb-table {m.group(1)!r} (choose from {', '.join(GUIDE_TABLES)})")
        return dataclasses.replace(getattr(catalog, GUIDE_TABLES[m.group(1)])(), intro="").markdown(level=0)

    return _GUIDE_MARK.sub(table, markdown)


def reference_pages() -> dict[str, str]:
    """Every generated reference page: page path relative to docs/ -> markdown."""
    return {"reference/cli.md": cli_page(), **table_pages()}


__all__ = [
    "GUIDE_TABLES",
    "HELP_WIDTH",
    "PAGES",
    "cli_page",
    "command_help",
    "command_names",
    "guide_markdown",
    "reference_pages",
    "reference_tables",
    "table_pages",
]
