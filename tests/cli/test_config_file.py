"""`--config FILE` (YAML or TOML) for the protocol commands: the file sets options, command-line flags win, errors
name FILE:LINE, and a run's saved RUN/config.yaml repeats it."""

from __future__ import annotations

import pytest
import typer

from dukb import InputError
from dukb.cli.config_file import RESOLVED_NAME, default_map, read_config_file
from dukb.cli.main import app, main


def _cmd(name):
    return typer.main.get_command(app).commands[name]


@pytest.fixture()
def captured(monkeypatch):
    """Replace the evaluate protocol by a recorder of the config it is given (no model is run)."""
    import dukb.neural.protocols.evaluate.run as protocol

    got = []

    def fake(run_dir, cfg, **kw):
        got.append((run_dir, cfg))

    monkeypatch.setattr(protocol, "evaluate", fake)
    return got


def test_yaml_sets_options_and_flags_win(tmp_path, captured):
    f = tmp_path / "e.yaml"
    f.write_text(
        "n-targets: 3\nmethods: [ga, du_cl]\ngrid: ['ga=1,2']\nseed: 7\nheldout_forms: [cloze, reverse]\n"
        f"output: {tmp_path / 'run'}\n"
    )
    assert main(["evaluate", "--config", str(f), "--seed", "9"]) == 0
    run_dir, cfg = captured[-1]
    assert cfg.n_targets == 3 and cfg.methods == ["ga", "du_cl"] and cfg.grids == {"ga": [1, 2]}
    assert cfg.seed == 9  # the flag wins over the file
    assert cfg.heldout_forms == ["reverse", "cloze"] or cfg.heldout_forms == ["cloze", "reverse"]
    assert str(run_dir) == str(tmp_path / "run")
    # the run saved its resolved options; --config RUN/config.yaml repeats it
    saved = tmp_path / "run" / RESOLVED_NAME
    assert saved.read_text().startswith("# the options of this `dukb evaluate` run")
    assert main(["evaluate", "--config", str(saved)]) == 0
    run2, cfg2 = captured[-1]
    assert cfg2 == cfg and str(run2) == str(run_dir)


def test_yaml_scalars_are_read_as_written(tmp_path, captured):
    """No YAML 1.1 surprises: 010 is ten (as --seed 010), not octal eight."""
    f = tmp_path / "o.yaml"
    f.write_text(f"seed: 010\noutput: {tmp_path / 'r'}\n")
    assert main(["evaluate", "--config", str(f)]) == 0
    assert captured[-1][1].seed == 10


def test_toml_works_alike(tmp_path, captured):
    f = tmp_path / "e.toml"
    f.write_text(f'n_targets = 2\nmethods = "ga,npo"\noutput = "{tmp_path / "r"}"\nschedule = "separate"\n')
    assert main(["evaluate", "--config", str(f)]) == 0
    _, cfg = captured[-1]
    assert cfg.n_targets == 2 and cfg.methods == ["ga", "npo"] and cfg.schedule == "separate"


@pytest.mark.parametrize(
    "name, text, line, msg",
    [
        ("a.yaml", "seed: 1\nn-targest: 3\n", 2, "unknown option 'n-targest'"),
        ("b.yaml", "seed: 1\nmethods: [ga\n", None, "not valid YAML"),
        ("c.toml", "seed = 1\nnope = 2\n", 2, "unknown option 'nope'"),
        ("d.toml", "seed = 1\nseed = = 2\n", 2, "not valid TOML"),
        ("e.yaml", "- a\n- b\n", 1, "must map option names"),
        ("f.json", "{}", None, "must be .yaml, .yml or .toml"),
        ("g.yaml", "kb:\n  x: 1\n", 1, "not a table"),
        ("h.yaml", "n-targets: 1\nseed:\n", 2, "has no value"),
        ("j.yaml", "seed: 1\nseeds: 1_0\n", 2, "'seeds'"),  # strict integers, as the flags read them
        ("k.toml", "n_targets = 2.0\n", 1, "'n_targets'"),
        ("l.toml", "seeds = true\n", 1, "'seeds'"),
        ("m.yaml", "seed: 0x10\n", 1, "'seed'"),
        # nested past Python's recursion limit: PyYAML and tomllib raised RecursionError (a traceback)
        ("deep.yaml", "methods: " + "[" * 100000 + "]" * 100000 + "\n", None, "nested too deeply"),
        ("deep.toml", "methods = " + "[" * 100000 + "]" * 100000 + "\n", None, "nested too deeply"),
        ("deepi.toml", "methods = " + "{a=" * 100000 + "1" + "}" * 100000 + "\n", None, "nested too deeply"),
        # issue 39: limits checked before parsing (tomllib is quadratic in dotted keys; PyYAML slow on huge lists)
        ("dotted.toml", "a" + ".a" * 20000 + " = 1\n", 1, "nested too deeply"),
        ("table.toml", "[" + "a." * 50 + "a]\nx = 1\n", 1, "nested too deeply"),
        ("many.yaml", "methods:\n" + "- ga\n" * 20000, None, "more than the 10,000"),
        ("flow.yaml", "methods: [" + "ga," * 20000 + "ga]\n", None, "more than the 10,000"),
        ("big.yaml", "# " + "x" * (2 << 20) + "\n", None, "too large"),
        # a YAML key given twice (TOML refuses the same file), and aliases
        ("dup.yaml", "seed: 1\nn-targets: 2\nseed: 2\n", 3, "given twice (first at line 1)"),
        ("alias.yaml", "methods: &m [ga]\ncurve: *m\n", None, "aliases"),
        # TOML numbers follow the strict rule of every other input
        ("hex.toml", "seed = 0x10\n", 1, "'0x10'"),
        ("sep.toml", "seed = 1_0\n", 1, "'1_0'"),
        ("oct.toml", "seed = 0o17\n", 1, "'0o17'"),
        ("plus.toml", "n_targets = 2\nseed = +3\n", 2, "'+3'"),
        ("inf.toml", "lr = inf\n", 1, "'inf'"),
        ("fsep.toml", "lr = 1_0.5\n", 1, "'1_0.5'"),
        ("nan.yaml", "lr: nan\n", 1, "option 'lr'"),
        ("lr.yaml", "seed: 1\nlr: 1e999\n", 2, "option 'lr'"),
        ("range.yaml", "seed: 1\nlora-alpha: 0\n", 2, "--lora-alpha must be from 1 to 65,536"),
        ("range.toml", "seed = 1\nlr = 20\n", 2, "--lr must be in (0, 10]"),
    ],
)
def test_bad_config_files_are_one_line_errors(tmp_path, capsys, captured, name, text, line, msg):
    f = tmp_path / name
    f.write_text(text)
    assert main(["evaluate", "--config", str(f)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"dukb: error: {f}") and msg in err[0]
    assert "Traceback" not in "".join(err)
    if line is not None:
        assert err[0].startswith(f"dukb: error: {f}:{line}: ")
    assert not captured


def test_every_protocol_command_takes_config():
    for name in ("evaluate", "muse", "rwku", "control", "restor"):
        assert "--config" in {o for p in _cmd(name).params for o in p.opts}, name


def test_default_map_resolves_names(tmp_path):
    f = tmp_path / "m.yaml"
    f.write_text("n-targets: 4\nmethods: [ga, npo]\n")
    m = default_map(_cmd("muse"), f)
    assert m["methods"] == "ga,npo" and m["n_targets"] == "4"
    with pytest.raises(InputError):
        read_config_file(tmp_path / "missing.yaml")


def test_strings_and_plain_numbers_pass_the_limits(tmp_path, captured):
    """Dots, brackets, '+' and '_' inside quoted strings and comments are text, not keys or numbers."""
    f = tmp_path / "ok.toml"
    f.write_text(
        "# a comment with 0x10, 1_0 and [[[[[[[[[[ brackets\nn_targets = 2\nlr = 1e-4\nseed = 7\n"
        f'methods = ["ga", "npo:beta=0.05"]\noutput = "{tmp_path / "a.b.c.d.e.f.g.h.i.j" / "r_1+2"}"\n'
    )
    assert main(["evaluate", "--config", str(f)]) == 0
    cfg = captured[-1][1]
    assert cfg.n_targets == 2 and cfg.lr == 1e-4 and cfg.seed == 7 and cfg.methods == ["ga", "npo:beta=0.05"]


def test_the_options_a_resume_may_grow_are_declared_in_the_configs():
    """config.yaml's union of a grown run's lists covers the options each protocol's config declares extendable."""
    from dukb.cli.config_file import extendable_options

    assert extendable_options("evaluate") == ("methods",)
    assert extendable_options("muse") == ("methods", "curve-methods", "scale-sizes")
    assert extendable_options("rwku") == ("methods", "batch-sizes")
    assert extendable_options("control") == ("methods", "controls", "ratios")
    assert extendable_options("restor") == () and extendable_options("unlearn") == ()
