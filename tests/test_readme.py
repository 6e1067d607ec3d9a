"""README and `--help` agree (issue: integrity): every flag README shows for a command is one of that command's
options and appears in its `--help`; every other flag README mentions belongs to some command."""

from __future__ import annotations

import re

import pytest
import typer

from conftest import REPO_ROOT
from dukb.cli.main import app, main

README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
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


def _shown() -> list[tuple[str, str]]:
    """(command, flag) pairs: flags that follow `dukb COMMAND` in one segment."""
    pairs = []
    for seg in _segments(README):
        for cmd_part in re.split(r"&&|\|\||;", seg):
            m = COMMAND.search(cmd_part)
            if m:
                pairs += [(m.group(1), f) for f in FLAG.findall(cmd_part[m.end():])]
    return sorted(set(pairs))


def _options() -> dict[str, set[str]]:
    cli = typer.main.get_command(app)
    return {name: {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)} for name, cmd in cli.commands.items()}


def test_readme_shows_flags_for_commands():
    pairs = _shown()
    commands = {c for c, _ in pairs}
    assert {"evaluate", "closure", "mdus", "finetune"} <= commands  # the parser finds what README shows


@pytest.mark.parametrize("command,flag", _shown())
def test_every_flag_readme_shows_is_in_the_commands_help(command, flag, capsys, monkeypatch):
    options = _options()
    assert command in options, f"README shows `dukb {command}`, which is not a command"
    assert flag in options[command], f"README shows `dukb {command} {flag}`, which `dukb {command}` lacks"
    monkeypatch.setenv("COLUMNS", "250")
    capsys.readouterr()
    assert main([command, "--help"]) == 0
    assert flag in capsys.readouterr().out


def test_every_flag_readme_mentions_belongs_to_a_command():
    every = set().union(*_options().values()) | {"--version", "--help"}
    launcher = {"--multi_gpu", "--num_processes", "--nproc_per_node",  # accelerate launch / torchrun
                "--use_fsdp", "--fsdp_version", "--config_file", "--cpu"}
    mentioned = {f for seg in _segments(README) for f in FLAG.findall(seg)} - launcher
    mentioned -= {"--heuristic", "--enum-mode"}  # clingo's options, named where README explains the exact sets
    mentioned -= {"--no-deps"}  # pip's, named where README explains how fetch-model downloads the GGUF
    assert sorted(mentioned - every) == []


def test_readme_tables_are_the_registries(capsys):
    """README's method/preset/scope/metric tables are `dukb methods`' output, generated from the registries."""
    capsys.readouterr()
    assert main(["methods"]) == 0
    out = capsys.readouterr().out.strip()
    start, end = "<!-- dukb methods -->\n", "\n<!-- /dukb methods -->"
    assert start in README and end in README
    assert README[README.index(start) + len(start):README.index(end)] == out


def _table_usages() -> list[tuple[str, str]]:
    """(command, usage) of each row of README's Commands table."""
    section = README[README.index("## Commands"):]
    section = section[:section.index("\n## ", 1)]
    return [(m.group(1), m.group(2)) for m in re.finditer(r"^\| `dukb ([a-z][a-z-]*)((?:[^`]|\\\|)*)` \|", section,
                                                           flags=re.M)]


def _shown_required() -> list[tuple[str, str, bool]]:
    """(command, flag, shown as required) for each flag of README's Commands table: outside brackets is required,
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
    shown = {c for c, _ in _table_usages()}
    assert shown == set(_options())  # every command has a row
    assert len(_shown_required()) > 40


@pytest.mark.parametrize("command,flag,required", _shown_required())
def test_commands_table_shows_required_options_as_required(command, flag, required):
    """README's Commands table writes a required option bare and an optional one in brackets (`--kb` of finetune,
    probe and unlearn defaults to the built-in demo KB; evaluate, rwku, muse and control to the generated one)."""
    cli = typer.main.get_command(app)
    param = next((p for p in cli.commands[command].params if flag in (*p.opts, *p.secondary_opts)), None)
    assert param is not None, f"README's table shows `dukb {command} {flag}`, which `dukb {command}` lacks"
    assert param.required == required, (f"README's table shows `dukb {command} {flag}` as "
                                        f"{'required' if required else 'optional'}")
