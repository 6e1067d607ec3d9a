"""Every registered protocol has its command, and a protocol without a command module of its own gets one generated
from its registration and its config's declaration (issue 40: a protocol costs 3 new files and 1 registration)."""

from __future__ import annotations

import dataclasses

import typer
from typer.testing import CliRunner

from dukb.cli import declared
from dukb.cli import main as cli_main
from dukb.cli.declared import protocol_command
from dukb.neural.protocols import PROTOCOLS, ProtocolInfo, get_protocol


def _callbacks() -> dict:
    return {c.name or c.callback.__name__: c.callback for c in cli_main.app.registered_commands}


def test_every_registered_protocol_has_its_command():
    callbacks = _callbacks()
    for name in PROTOCOLS:
        assert name in callbacks, f"dukb {name} is not a command"
        assert callbacks[name].config_class is get_protocol(name).load("config")


def test_protocols_without_a_module_have_no_cli_file_and_carry_their_help():
    generated = [n for n in PROTOCOLS if f"{n}_cmd" not in cli_main.COMMAND_MODULES]
    assert {"muse", "rwku", "control"} <= set(generated)
    callbacks = _callbacks()
    for name in generated:
        assert callbacks[name].__doc__ == get_protocol(name).help
        assert get_protocol(name).help.startswith("Run ")


def test_a_generated_command_runs_the_registered_entry(monkeypatch, tmp_path):
    """A new registration (here muse's declaration under another name and a stub entry) becomes a command that
    parses its declared options, checks them, and calls the entry the registration names, at call time."""
    calls = []

    def entry(output, cfg, *, resume, progress, log):
        calls.append((output, cfg, resume))
        (output / "report.md").parent.mkdir(parents=True, exist_ok=True)

    monkeypatch.setattr(declared, "save_resolved_config", lambda out: None)
    monkeypatch.setitem(globals(), "_stub_entry", entry)
    muse = get_protocol("muse")
    info = dataclasses.replace(muse, name="muse_copy", run=f"{__name__}:_stub_entry", help="Run a copy.")
    assert isinstance(info, ProtocolInfo)
    app = typer.Typer()
    app.command("muse_copy")(protocol_command(info))
    app.command("other")(lambda: None)  # (two commands: typer keeps the sub-command name)
    out = tmp_path / "run"
    r = CliRunner().invoke(app, ["muse_copy", "--kb", "demo", "--seed", "3", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert len(calls) == 1 and calls[0][0] == out and calls[0][1].seed == 3 and calls[0][2] is False
    assert "report:" in r.output
    r = CliRunner().invoke(app, ["muse_copy", "--kb", "demo", "--seed", "-1", "-o", str(out)])
    assert r.exit_code != 0 and len(calls) == 1  # a value outside the declared range never reaches the entry
