"""The docs site and the basics (issue 38, item 8): `dukb methods` draws terminal tables wrapped to the terminal's
width and prints markdown only with ``--format markdown``, from the same tables as the generated reference pages;
mkdocs.yml lists every page and builds the reference pages (never committed copies); CI builds the site strictly; a
LICENSE, a valid CITATION.cff with the five papers, and a changelog exist."""

from __future__ import annotations

import re
import tomllib

import pytest
import yaml

from conftest import REPO_ROOT
from dukb.cli.main import main
from dukb.cli.reference import reference_tables
from dukb.neural.tables import Table

PAPERS = REPO_ROOT.parent / "shared" / "papers"


def _methods(capsys, monkeypatch, columns: int, *args: str) -> str:
    monkeypatch.setenv("COLUMNS", str(columns))
    capsys.readouterr()
    assert main(["methods", *args]) == 0
    return capsys.readouterr().out


def _names() -> list[str]:
    return [row[0] for tables in reference_tables().values() for t in tables for row in t.rows]


@pytest.mark.parametrize("columns", [60, 80, 160])
def test_methods_draws_tables_as_wide_as_the_terminal(columns, capsys, monkeypatch):
    out = _methods(capsys, monkeypatch, columns)
    lines = out.splitlines()
    assert max(len(ln) for ln in lines) <= columns
    assert "|---" not in out and "`" not in out  # not markdown
    words = set(re.findall(r"[\w@.-]+", out))
    for name in _names():  # no entry is cut: every name is there whole
        assert set(re.findall(r"[\w@.-]+", name)) <= words, name
    for tables in reference_tables().values():
        for t in tables:
            assert t.title in out


def test_methods_markdown_is_the_reference_tables(capsys, monkeypatch):
    out = _methods(capsys, monkeypatch, 80, "--format", "markdown")
    tables = [t for page in reference_tables().values() for t in page]
    assert out.strip() == "\n\n".join(t.markdown() for t in tables)
    from dukb.cli.reference import table_pages

    pages = "\n".join(table_pages().values())
    rows = [ln for ln in out.splitlines() if ln.startswith("| `")]
    assert len(rows) > 60 and all(ln in pages for ln in rows)  # the docs' reference pages hold the same rows


def test_a_wide_table_on_a_narrow_terminal_keeps_every_cell(capsys):
    from dukb.cli.render import print_tables

    long = "a long description that must wrap over several lines and never be cut at the edge of the screen"
    t = Table("T", ("name", "one", "two", "three"), (("x", long, long, long),))
    capsys.readouterr()
    print_tables([t], width=50)
    out = capsys.readouterr().out
    assert max(len(ln) for ln in out.splitlines()) <= 50
    assert " ".join(out.split()).count(long) == 3  # one block per entry, each value wrapped, nothing cut


def test_table_markdown_escapes_and_checks_its_rows():
    t = Table("Title", ("a", "b"), (("x|y", ""),), intro="Intro.")
    assert t.markdown() == "### Title\n\nIntro.\n\n| a | b |\n|---|---|\n| `x\\|y` | – |"
    with pytest.raises(ValueError, match="2 columns"):
        Table("T", ("a", "b"), (("only one",),))


def test_mkdocs_nav_lists_every_page_and_generates_the_reference():
    cfg = yaml.safe_load((REPO_ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert cfg["theme"]["name"] == "material" and cfg["hooks"] == ["docs/hooks.py"]
    assert all(v == "warn" for section in cfg["validation"].values() for v in section.values())  # errors with --strict

    def pages(node):
        if isinstance(node, str):
            yield node
        elif isinstance(node, list):
            for x in node:
                yield from pages(x)
        elif isinstance(node, dict):
            for x in node.values():
                yield from pages(x)

    nav = set(pages(cfg["nav"]))
    from dukb.cli.reference import reference_pages

    generated = set(reference_pages())
    assert generated <= nav
    on_disk = {p.relative_to(REPO_ROOT / "docs").as_posix() for p in (REPO_ROOT / "docs").rglob("*.md")}
    assert not generated & on_disk, "a generated reference page is committed as a file"
    for page in (nav - generated) & {"architecture.md"} | {p for p in nav if p.startswith("tutorials/")}:
        assert page in on_disk, page


def test_ci_builds_the_docs_strictly_with_the_docs_extra():
    ci = (REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r'pip install .*"\.\[test,docs\]"', ci)
    assert re.search(r"^[^#\n]*mkdocs build --strict", ci, flags=re.M)
    extras = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    assert {re.split(r"[<>=]", d)[0] for d in extras["docs"]} == {"mkdocs", "mkdocs-material"}


def test_license_citation_and_changelog():
    lic = (REPO_ROOT / "LICENSE").read_text(encoding="utf-8")
    assert lic.startswith("MIT License") and "Copyright (c) 2026 the dukb authors" in lic
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == {"text": "MIT"}
    cff = yaml.safe_load((REPO_ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0" and cff["license"] == "MIT" and cff["version"] == project["version"]
    assert cff["message"] and cff["title"] and cff["authors"]
    refs = cff["references"]
    assert len(refs) == 5 and all(r["authors"] and r["year"] and r["title"] for r in refs)
    assert [r["authors"][0]["family-names"] for r in refs] == ["Wu", "Shi", "Jin", "Rezaei", "Wang"]
    if PAPERS.is_dir():  # each title is the paper's own (the first lines of its text in shared/papers)
        heads = [" ".join(p.read_text(encoding="utf-8")[:400].split()).lower() for p in PAPERS.glob("*.txt")]
        for r in refs:
            assert any(r["title"].lower().replace(" :", ":") in h.replace(" :", ":") for h in heads), r["title"]
    log = (REPO_ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert log.startswith("# Changelog") and "keepachangelog.com" in log and "## [Unreleased]" in log


def test_guide_pages_draw_the_registry_tables_at_build_time():
    """No page pastes a registry's rows (forget scopes, presets, attacks): a guide page marks where the table goes and
    the docs build draws it from the registry (docs/hooks.py, issue 40: tables generated, not pasted)."""
    from dukb.cli.reference import GUIDE_TABLES, guide_markdown
    from dukb.neural.catalog import ATTACKS, PRESETS
    from dukb.solver.scopes import FORGET_SCOPES

    names = set(ATTACKS) | set(PRESETS) | set(FORGET_SCOPES)
    pasted, marks = [], set()
    for page in sorted((REPO_ROOT / "docs").rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        marks |= set(re.findall(r"^<!-- dukb-table: ([a-z-]+) -->$", text, flags=re.M))
        for n, line in enumerate(text.splitlines(), 1):
            first = re.match(r"^\| `([^`]+)`", line)
            if first and first.group(1) in names:
                pasted.append(f"{page.relative_to(REPO_ROOT)}:{n}")
    assert not pasted, "registry rows pasted into the docs: " + ", ".join(pasted)
    assert marks == set(GUIDE_TABLES)
    out = guide_markdown("Presets:\n\n<!-- dukb-table: presets -->\n\nmore")
    assert "| `du_cl` | `cl_du` | target |" in out and "dukb-table" not in out and out.endswith("\n\nmore")
    with pytest.raises(ValueError, match="unknown dukb-table 'nope'"):
        guide_markdown("<!-- dukb-table: nope -->")
