"""README, the docs and `--help` agree (issue: integrity; issue 38, item 8): every flag README or a docs page shows
for a command is one of that command's options and appears in its `--help`; every other flag README mentions belongs
to some command; README stays short (at most 15 KB, two set-up commands that CI runs, no commit hashes); the
commands synopsis (docs/guide/commands.md) covers every command; the generated reference pages list every
registered method, preset, forget scope, model family, metric, attack and protocol."""

from __future__ import annotations

import re

import pytest
import typer

from conftest import REPO_ROOT
from dukb.cli.main import app, main

README_PATH = REPO_ROOT / "README.md"
README = README_PATH.read_text(encoding="utf-8")
#: the docs site's pages (mkdocs.yml), tutorials included; the generated reference pages are not files
DOCS = {
    p.relative_to(REPO_ROOT).as_posix(): p.read_text(encoding="utf-8")
    for p in sorted((REPO_ROOT / "docs").rglob("*.md"))
}
#: the commands synopsis: a table of usages, one row per command
SYNOPSIS = REPO_ROOT / "docs" / "guide" / "commands.md"
COMMAND = re.compile(r"(?:^|[\s`(])dukb(?:\.cli\.main)?\s+([a-z][a-z-]*)")
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9_-]*)")


def _segments(text: str) -> list[str]:
    """Code blocks (continuation lines joined, one segment per command line) and inline code spans."""
    out = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S):
        out += [ln for ln in block.replace("\\\n", " ").splitlines() if ln.strip()]
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    out += re.findall(r"`([^`\n]+)`", prose)
    return out


def _shown(text: str = README) -> list[tuple[str, str]]:
    """(command, flag) pairs: flags that follow `dukb COMMAND` in one segment of ``text``."""
    pairs = []
    for seg in _segments(text):
        for cmd_part in re.split(r"&&|\|\||;", seg):
            m = COMMAND.search(cmd_part)
            if m:
                pairs += [(m.group(1), f) for f in FLAG.findall(cmd_part[m.end() :])]
    return sorted(set(pairs))


def _options() -> dict[str, set[str]]:
    cli = typer.main.get_command(app)
    return {
        name: {"--help", *(o for p in cmd.params for o in (*p.opts, *p.secondary_opts))}
        for name, cmd in cli.commands.items()
    }


def test_readme_shows_flags_for_commands():
    pairs = _shown()
    commands = {c for c, _ in pairs}
    assert {"evaluate", "closure", "mdus", "finetune"} <= commands  # the parser finds what README shows


def _shown_anywhere() -> list[tuple[str, str, str]]:
    """(command, flag, where) for README and every docs page."""
    found: dict[tuple[str, str], str] = {}
    for where, text in [("README.md", README), *DOCS.items()]:
        for pair in _shown(text):
            found.setdefault(pair, where)
    return sorted((c, f, w) for (c, f), w in found.items())


@pytest.mark.parametrize("command,flag,where", _shown_anywhere())
def test_every_flag_readme_and_the_docs_show_is_in_the_commands_help(command, flag, where, capsys, monkeypatch):
    options = _options()
    assert command in options, f"{where} shows `dukb {command}`, which is not a command"
    assert flag in options[command], f"{where} shows `dukb {command} {flag}`, which `dukb {command}` lacks"
    monkeypatch.setenv("COLUMNS", "250")
    capsys.readouterr()
    assert main([command, "--help"]) == 0
    assert flag in capsys.readouterr().out


def test_every_flag_readme_mentions_belongs_to_a_command():
    every = set().union(*_options().values()) | {"--version", "--help"}
    launcher = {
        "--multi_gpu",
        "--num_processes",
        "--nproc_per_node",  # accelerate launch / torchrun
        "--use_fsdp",
        "--fsdp_version",
        "--config_file",
        "--cpu",
    }
    mentioned = {f for seg in _segments(README) for f in FLAG.findall(seg)} - launcher
    mentioned -= {"--heuristic", "--enum-mode"}  # clingo's options, named where README explains the exact sets
    mentioned -= {"--no-deps", "--index-url"}  # pip's: how fetch-model downloads the GGUF; the CPU build of torch
    assert sorted(mentioned - every) == []


def test_readme_is_short_and_names_no_commit():
    """At most 15 KB (15,000 bytes); no commit hashes (README describes the current code, not its history)."""
    size = README_PATH.stat().st_size
    assert size <= 15_000, f"README.md is {size} bytes; move details to docs/"
    hashes = [
        h
        for h in re.findall(r"(?<![\w/.-])[0-9a-f]{7,40}(?![\w/.-])", README)
        if re.search(r"[0-9]", h) and re.search(r"[a-f]", h)
    ]
    assert hashes == []


def _setup_commands() -> list[str]:
    """The commands of README's Set-up section: one per numbered step, each the one line of its code block."""
    section = README[README.index("## Set-up") :]
    section = section[: section.index("\n## ", 1)]
    steps: list[list[str]] = []
    in_step = False
    for line in section.splitlines():
        if re.match(r"\d+\. ", line):
            steps.append([line])
            in_step = True
        elif in_step and (not line.strip() or line.startswith("   ")):  # the step's own (indented) lines
            steps[-1].append(line)
        else:
            in_step = False  # text outside the numbered list
    out = []
    for step in ("\n".join(lines) for lines in steps):
        blocks = re.findall(r"```[a-z]*\n(.*?)```", step, flags=re.S)
        assert len(blocks) == 1, f"a set-up step shows {len(blocks)} code blocks: {step[:80]!r}"
        lines = [ln.strip() for ln in blocks[0].splitlines() if ln.strip()]
        assert len(lines) == 1, f"a set-up step's block has {len(lines)} lines"
        out.append(lines[0])
    return out


def _pip_specs(text: str) -> list[str]:
    """What each `pip install` in ``text`` installs (its non-option arguments, quotes removed)."""
    out = []
    for m in re.finditer(r"pip install ([^&;\n]+)", text):
        out += [a.strip("\"'") for a in m.group(1).split() if not a.startswith("-")]
    return out


def test_readme_has_two_setup_commands_and_ci_runs_them():
    """Two numbered set-up steps, one command each: install (torch first), and the tests; .ci/run installs the
    same packages (its extras may add docs) and runs the same test command."""
    install, tests = _setup_commands()
    ci = (REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8")
    runs = [line for line in ci.splitlines() if not line.lstrip().startswith("#")]
    # the command itself, alone on its line or as the head of a pipeline (.ci/run tees its output to name failures)
    assert any(re.search(rf"(^|[\s!]){re.escape(tests)}(\s*$|\s+2>&1\s*\|)", line) for line in runs), tests
    readme_pkgs, ci_pkgs = _pip_specs(install), _pip_specs(ci)
    assert readme_pkgs and readme_pkgs[0].startswith("torch") and ci_pkgs[0] == readme_pkgs[0]

    def split(spec):
        m = re.fullmatch(r"([^\[]+)(?:\[(.*)\])?", spec)
        return m.group(1), set(filter(None, (m.group(2) or "").split(",")))

    for spec in readme_pkgs:
        base, extras = split(spec)
        assert any(b == base and extras <= e for b, e in map(split, ci_pkgs)), f"CI does not install {spec}"


def test_the_reference_pages_list_every_registered_entry():
    """The methods reference is generated from the registries when the site is built (no copy to keep in step):
    each registered method, preset, forget scope and model family is a row of reference/methods.md, each metric,
    attack and protocol of its page, and every command has its section in reference/cli.md."""
    from dukb.cli.reference import command_names, reference_pages
    from dukb.neural.attacks import ATTACKS
    from dukb.neural.families import FAMILIES
    from dukb.neural.methods import METHODS, PRESETS
    from dukb.neural.metrics import METRICS
    from dukb.neural.protocols import PROTOCOLS
    from dukb.solver.scopes import FORGET_SCOPES

    pages = reference_pages()

    def rows(page):
        return {m.group(1) for m in re.finditer(r"^\| `([^`]+)` \|", pages[f"reference/{page}.md"], flags=re.M)}

    assert set(METHODS) | set(PRESETS) | set(FORGET_SCOPES) | set(FAMILIES) <= rows("methods")
    assert set(METRICS) <= rows("metrics")
    assert set(ATTACKS) <= rows("attacks")
    assert {f"dukb {n}" for n in PROTOCOLS} <= rows("protocols")
    names = command_names()
    assert len(names) > 15
    for n in names:
        assert f"\n## dukb {n}\n" in pages["reference/cli.md"]
        assert f"Usage: dukb {n} " in pages["reference/cli.md"]


def _table_usages() -> list[tuple[str, str]]:
    """(command, usage) of each row of the commands synopsis (docs/guide/commands.md's "## Synopsis" table)."""
    if not SYNOPSIS.is_file():
        return []
    text = SYNOPSIS.read_text(encoding="utf-8")
    assert "## Synopsis" in text, f"{SYNOPSIS.name} has no Synopsis section"
    section = text[text.index("## Synopsis") :]
    section = section[: section.index("\n## ", 1)] if "\n## " in section[1:] else section
    return [
        (m.group(1), m.group(2))
        for m in re.finditer(r"^\| `dukb ([a-z][a-z-]*)((?:[^`]|\\\|)*)` \|", section, flags=re.M)
    ]


def _shown_required() -> list[tuple[str, str, bool]]:
    """(command, flag, shown as required) for each flag of the commands synopsis: outside brackets is required,
    inside [...] optional; flags inside (... | ...) alternatives are left out."""
    out = []
    for cmd, usage in _table_usages():
        square = paren = 0
        for m in re.finditer(r"\[|\]|\(|\)|(?<![\w-])(--[a-z][a-z0-9-]*|-o)(?![\w-])", usage):
            tok = m.group(0)
            square += (tok == "[") - (tok == "]")
            paren += (tok == "(") - (tok == ")")
            if m.group(1) and not paren:
                out.append((cmd, m.group(1), square == 0))
    return out


def test_commands_table_covers_the_commands():
    assert SYNOPSIS.is_file(), "docs/guide/commands.md (the commands synopsis) is missing"
    shown = {c for c, _ in _table_usages()}
    assert shown == set(_options())  # every command has a row
    assert len(_shown_required()) > 40


@pytest.mark.parametrize("command,flag,required", _shown_required())
def test_commands_table_shows_required_options_as_required(command, flag, required):
    """The commands synopsis writes a required option bare and an optional one in brackets (`--kb` of finetune
    defaults to the built-in demo KB; evaluate, rwku, muse and control to the generated one)."""
    cli = typer.main.get_command(app)
    param = next((p for p in cli.commands[command].params if flag in (*p.opts, *p.secondary_opts)), None)
    assert param is not None, f"the synopsis shows `dukb {command} {flag}`, which `dukb {command}` lacks"
    assert param.required == required, (
        f"the synopsis shows `dukb {command} {flag}` as {'required' if required else 'optional'}"
    )
