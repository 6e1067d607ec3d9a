"""Every option of every command is checked at parse time (issue 39, item 4): each numeric option of the neural and
protocol commands has a declared range (:mod:`dukb.neural.bounds`, shown in ``--help``), numbers are read strictly,
devices are checked against torch, lists refuse empty items and wrongly-cased names, attack settings are bounded
and given once. An invalid value exits 2 with one line, within seconds, before any model is loaded."""

from __future__ import annotations

import math
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import patch_everywhere
from dukb import InputError
from dukb.cli.main import _command, _is_float_option, _is_integer_option, app, main
from dukb.cli.run_options import option_range
from dukb.neural import bounds as B

#: the commands whose every numeric option must declare a range (the symbolic ones are bounded in their modules)
NEURAL = ("evaluate", "finetune", "probe", "unlearn", "attack", "muse", "rwku", "control", "restor")
#: numeric options left without a range on purpose: fact ids are any strict integer (an unknown one is refused
#: by the KB in one line before a model loads)
UNRANGED = {("unlearn", "target_id"), ("attack", "target_id")}


def _root():
    return _command(len(app.registered_commands), len(app.registered_groups))


def _numeric():
    """(command, click parameter) of every int or float option of every command."""
    out = []
    for name, cmd in sorted(_root().commands.items()):
        for p in cmd.params:
            if getattr(p, "opts", None) and (_is_integer_option(p) or _is_float_option(p)):
                out.append((name, p))
    return out


NUMERIC = _numeric()
#: seconds a refusal may take: a guard against a hang (a huge value allocating or looping), not a speed goal
#: (speed is measured in bench/; a loaded CI machine may take several seconds for the first import)
HANG = 60


def _required(cmd, skip: str) -> list[str]:
    """Placeholder values of a command's required parameters (other than ``skip``), so that parsing reaches the
    option under test."""
    args, positional = [], []
    for p in cmd.params:
        if not p.required or p.name == skip:
            continue
        value = "1" if (_is_integer_option(p) or _is_float_option(p)) else "x"
        if getattr(p, "param_type_name", "") == "argument":
            positional.append(value)
        else:
            args += [max(p.opts, key=len), value]
    return args + positional


def _parse(name: str, argv: list[str]):
    """Parse ``dukb NAME ARGV`` with every callback and type check, without running the command: None when
    accepted, else the refusal's text."""
    ex = pytest.importorskip("typer._click.exceptions")
    cmd = _root().commands[name]
    try:
        with cmd.make_context(name, list(argv)):
            return None
    except (ex.UsageError, ex.BadParameter, InputError) as e:
        return str(e.format_message() if hasattr(e, "format_message") else e)


def test_every_numeric_option_of_the_neural_commands_has_a_range():
    missing = [
        (n, p.name)
        for n, p in NUMERIC
        if n in NEURAL
        and option_range(p) is None
        and getattr(p.type_descriptor.parameter_info, "max", None) is None
        and (n, p.name) not in UNRANGED
    ]
    assert not missing, missing
    # a closed range is shown in --help by typer (min/max); a half-open one in the help text
    for n, p in NUMERIC:
        r = option_range(p)
        if r is not None and not r.closed:
            assert r.text().removeprefix("in ") in p.help, (n, p.name)


def _valid(rng: B.Range, integer: bool):
    if integer:
        return st.integers(int(rng.lo) + rng.lo_open, int(rng.hi) - rng.hi_open).map(str)
    return st.floats(
        rng.lo, rng.hi, exclude_min=rng.lo_open, exclude_max=rng.hi_open, allow_nan=False, allow_infinity=False
    ).map(repr)


def _invalid(rng: B.Range | None, integer: bool) -> list[str]:
    bad = ["nan", "inf", "-inf", "1e999", "1_0", "", " 1", "+1", "\uff11", "0x10", "one"]
    bad += ["1.5"] if integer else []
    if rng is not None:
        lo, hi = rng.lo, rng.hi
        bad += [str(int(hi) + 1) if integer else repr(hi * 2 + 1), "999999999999999999"]
        bad += [str(int(lo) - 1) if integer else repr(lo - 1.0)]
        if rng.lo_open:
            bad.append(str(int(lo)) if integer else repr(float(lo)))
        if rng.hi_open:
            bad.append(str(int(hi)) if integer else repr(float(hi)))
    return bad


@st.composite
def _case(draw):
    name, p = draw(st.sampled_from([(n, p) for n, p in NUMERIC if option_range(p) is not None]))
    rng, integer = option_range(p), _is_integer_option(p)
    ok = draw(st.booleans())
    value = draw(_valid(rng, integer)) if ok else draw(st.sampled_from(_invalid(rng, integer)))
    return name, p, value, ok


@settings(max_examples=150, deadline=3000, suppress_health_check=[HealthCheck.too_slow])
@given(_case())
def test_parse_accepts_exactly_the_declared_range(case):
    name, p, value, ok = case
    flag = max(p.opts, key=len)
    refusal = _parse(name, _required(_root().commands[name], p.name) + [flag, value])
    assert (refusal is None) == ok, (name, flag, value, refusal)
    if not ok:
        assert "\n" not in refusal.strip()


@pytest.fixture()
def no_work(monkeypatch):
    """Every command's body replaced by a recorder, and model loading by a failure: what reaches either passed
    parsing."""
    import dukb.neural.models as models

    ran = []

    def load(*a, **k):  # pragma: no cover - a failure when reached
        raise AssertionError("a model was loaded")

    patch_everywhere(monkeypatch, models, "load_model", load)
    for name, cmd in _root().commands.items():
        monkeypatch.setattr(cmd, "callback", lambda *a, _n=name, **k: ran.append(_n))
    return ran


@pytest.mark.parametrize("name, flag", sorted({(n, max(p.opts, key=len)) for n, p in NUMERIC}))
def test_bad_numbers_exit_2_with_one_line(name, flag, no_work, capsys):
    """Every numeric option of every command: huge, non-finite, '_', '' and out-of-range values exit 2 with one
    line, quickly, before the command's body runs."""
    cmd = _root().commands[name]
    p = next(q for q in cmd.params if flag in q.opts)
    rng = option_range(p)
    for value in _invalid(rng, _is_integer_option(p))[: 11 if rng is None else None]:
        start = time.monotonic()
        code = main([name, *_required(cmd, p.name), flag, value])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and err[0].startswith("dukb: error:"), (name, flag, value, err)
        assert "Traceback" not in err[0] and time.monotonic() - start < HANG
    assert not no_work


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--device", "mps"], "mps"),
        (["--device", "tpu"], "not a device"),
        (["--device", ""], "not a device"),
        (["--device", "CUDA"], "not a device"),
        (["--device", "cuda:99"], "cuda:99"),
        (["--lr", "inf"], "--lr"),
        (["--lr", "nan"], "--lr"),
        (["--lr", "1_0"], "--lr"),
        (["--lr", "0"], "--lr"),
        (["--lora-alpha", "0"], "--lora-alpha"),
        (["--lora-r", "999999999999"], "--lora-r"),
        (["--lora-dropout", "1"], "--lora-dropout"),
        (["--seeds", "999999999999999999"], "--seeds"),
        (["--dtype", "FP16"], "not a dtype"),
        (["--dtype", ""], "not a dtype"),
    ],
)
def test_shared_options_refused_at_parse_time(argv, says, no_work, capsys):
    import torch

    if argv[1] == "mps" and torch.backends.mps.is_available():  # pragma: no cover - Apple machines
        pytest.skip("this machine has an MPS device")
    if argv[1] == "cuda:99" and torch.cuda.device_count() > 99:  # pragma: no cover
        pytest.skip("this machine has 100 GPUs")
    for name in ("evaluate", "muse", "rwku", "control"):
        if argv[0] == "--seeds" and name not in ("evaluate",):
            continue
        assert main([name, *argv]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and says in err[0], (name, err)
    assert not no_work


@pytest.fixture()
def captured(monkeypatch):
    """The evaluate protocol replaced by a recorder of its config (the command's own checks still run)."""
    import dukb.neural.protocols.evaluate.run as protocol

    got = []
    monkeypatch.setattr(protocol, "evaluate", lambda run_dir, cfg, **kw: got.append(cfg))
    return got


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--grid", "ga =1"], "no spaces around"),
        (["--grid", "ga=1,,2"], "empty value"),
        (["--grid", "GA=1"], "did you mean 'ga'"),
        (["--grid", "ga=1", "--grid", "ga=2"], "given twice"),
        (["--grid", "ga=999999999"], "--grid ga value"),
        (["--grid", "tv=nan"], "not a number"),
        (["--methods", "ga,"], "empty item"),
        (["--methods", "ga,,npo"], "empty item"),
        (["--methods", "GA"], "did you mean 'ga'"),
        (["--methods", "gaa"], "did you mean ga"),
        (["--metrics", "recall,"], "empty item"),
        (["--attacks", "relearn:steps=999999999999"], "relearn:steps"),
        (["--attacks", "relearn:steps=2:steps=3"], "given twice"),
        (["--attacks", "quant4:group=7"], "power of two"),
        (["--attacks", "relearn,"], "empty item"),
        (["--attacks", "Relearn"], "did you mean 'relearn'"),
        (["--methods", "ga:lr=1e300"], "at most 10"),
        (["--methods", "npo:beta=1e9"], "at most"),
        (["--heldout-forms", "cloze,"], "empty item"),
        (["--finetune-forms", "qa,,cloze"], "empty item"),
        (["--lora-targets", "q_proj,,v_proj"], "empty item"),
        (["--layers", "0-99999999"], "--layers LAST"),
    ],
)
def test_sloppy_lists_and_attack_settings_are_refused(argv, says, captured, capsys, tmp_path):
    assert main(["evaluate", *argv, "-o", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err
    assert not captured


def test_valid_lists_still_run(captured, tmp_path):
    assert (
        main(
            [
                "evaluate",
                "--methods",
                "ga, npo:beta=0.05",
                "--grid",
                "ga=1,2",
                "--attacks",
                "relearn:steps=2",
                "--lr",
                "1e-4",
                "-o",
                str(tmp_path / "run"),
            ]
        )
        == 0
    )
    cfg = captured[-1]
    assert cfg.methods == ["ga", "npo:beta=0.05"] and cfg.grids == {"ga": [1, 2]} and cfg.lr == 1e-4


def test_python_api_checks_the_same_ranges():
    """The config dataclasses check the ranges the flags declare (declared once, as field metadata)."""
    from dukb.neural.protocols.evaluate.config import EvaluateConfig
    from dukb.neural.restor.config import RestorConfig

    for bad in (
        {"lr": math.inf},
        {"lr": math.nan},
        {"lora_alpha": 0},
        {"lora_r": 10**12},
        {"seeds": 10**18},
        {"finetune_epochs": 10**18},
        {"device": "tpu"},
        {"seed": -1},
    ):
        with pytest.raises(InputError):
            EvaluateConfig(**bad).check()
    for bad in (
        {"temperature": math.nan},
        {"context": 10**9},
        {"corrupt_lr": math.inf},
        {"unlearn_epochs": {"ga": 10**9}},
    ):
        with pytest.raises(InputError):
            RestorConfig(kb="demo", **bad).check()
    assert B.N_SEEDS.hi == __import__("dukb.solver.mdus", fromlist=["MAX_SEEDS"]).MAX_SEEDS


@pytest.mark.parametrize(
    "values, says",
    [
        (["ga=1", "ga=2"], "given twice"),
        (["all=1", "kl=2"], "given twice"),
        (["GA=1"], "did you mean 'ga'"),
        (["ga =1"], "no spaces"),
        (["ga=nan"], "is not a number"),
        (["ga=1_0"], "is not a number"),
        (["ga=1e999"], "is not a number"),
    ],
)
def test_restor_per_method_values(values, says):
    from dukb.cli.restor_cmd import parse_method_values

    with pytest.raises(InputError, match=says):
        parse_method_values("--lambda", values)


def test_restor_per_method_ranges():
    from dukb.cli.restor_cmd import parse_method_values

    with pytest.raises(InputError, match="--unlearn-lr ga"):
        parse_method_values("--unlearn-lr", ["ga=0"])
    with pytest.raises(InputError, match="--unlearn-epochs"):
        parse_method_values("--unlearn-epochs", ["all=999999999"], integer=True)
    assert parse_method_values(
        "--lambda",
        [
            "all=2",
        ],
    ) == {"ga": 2.0, "kl": 2.0, "npo": 2.0}
    # a value for a method the run does not use would be ignored: refused; all= covers the chosen ones
    with pytest.raises(InputError, match="npo is not in --methods"):
        parse_method_values("--lambda", ["npo=5"], chosen=["ga"])
    assert parse_method_values("--lambda", ["all=2"], chosen=["ga", "kl"]) == {"ga": 2.0, "kl": 2.0}


def test_ranges_table_lists_every_bounded_option():
    """The docs' table of ranges is generated from the declarations: every ranged option of a neural command is
    in it with its range."""
    from dukb.cli.run_options import ranges_table

    table = ranges_table()
    listed = {(row[0], row[1]) for row in table.rows}
    for name, p in NUMERIC:
        rng = option_range(p)
        if rng is not None:
            assert (max(p.opts, key=len), rng.text()) in listed, (name, p.name)
    assert ("--attacks relearn:steps", B.STEPS.text()) in listed


@pytest.mark.parametrize(
    "argv, says",
    [
        (["attack", "--model", "m", "--target-id", "1", "--attacks", "relearn,"], "empty item"),
        (["attack", "--model", "m", "--target-id", "1", "--attacks", "quant4:group=7"], "power of two"),
        (["attack", "--model", "m", "--target-id", "1", "--sets", "Exact"], "--sets"),
        (["attack", "--model", "m", "--target-id", "1", "--forget-scope", "tgt"], "--forget-scope"),
        (["unlearn", "--model", "m", "--target-id", "1", "-o", "x", "--method", "GA"], "did you mean 'ga'"),
        (["unlearn", "--model", "m", "--target-id", "1", "-o", "x", "--method", "ga,npo"], "one method"),
        (["unlearn", "--model", "m", "--target-id", "1", "-o", "x", "--method", "ga", "--grid", "1,,2"], "empty value"),
    ],
)
def test_attack_and_unlearn_check_before_loading(argv, says, capsys, monkeypatch):
    """`dukb attack` and `dukb unlearn` refuse their options before the KB or any model is read."""
    import dukb.neural.modelrecord as modelrecord
    import dukb.neural.models as models

    def refuse(*a, **k):  # pragma: no cover - a failure when reached
        raise AssertionError("a model or KB was read")

    patch_everywhere(monkeypatch, modelrecord, "model_kb", refuse)
    patch_everywhere(monkeypatch, models, "load_model", refuse)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err


def test_check_device_follows_what_torch_reports(monkeypatch):
    """cuda:N below the device count is accepted, at or above it refused; mps only where torch has it (torch's
    answers simulated: this machine may have no GPU)."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert B.check_device("cuda") == "cuda" and B.check_device("cuda:1") == "cuda:1"
    with pytest.raises(InputError, match="2 CUDA devices"):
        B.check_device("cuda:2")
    for bad in ("cuda:01", "cuda:-1", "cuda: 0", "Cuda", "cpu ", "gpu"):
        with pytest.raises(InputError, match="not a device"):
            B.check_device(bad)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(InputError, match="no CUDA device"):
        B.check_device("cuda")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert B.check_device("mps") == "mps"
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(InputError, match="no MPS device"):
        B.check_device("mps")


#: text options that name files or models (read only by later stages; fuzzed elsewhere)
_PATHS = {"kb", "rules", "model", "finetuned", "config", "output", "targets_file"}
_TEXT = st.one_of(
    st.text(max_size=24),
    st.sampled_from(
        ["", ",", "ga,", "GA", " ga", "a,,b", "1_0", "nan", "inf", "x" * 300, "ga:lr=1e999", "qa,QA", "\u2028", "auto "]
    ),
)
#: each protocol command's entry point (replaced by a recorder: the command's own checks still run)
_ENTRY = {
    "evaluate": ("dukb.neural.protocols.evaluate.run", "evaluate"),
    "muse": ("dukb.neural.protocols.muse.run", "run_muse"),
    "rwku": ("dukb.neural.protocols.rwku.run", "run_rwku"),
    "control": ("dukb.neural.protocols.control.run", "run_control"),
    "restor": ("dukb.neural.restor.pipeline", "run_restor"),
}


@pytest.mark.parametrize("name", sorted(_ENTRY))
def test_any_text_option_exits_0_or_2_with_one_line(name, monkeypatch, tmp_path):
    """Whatever text a non-path option of a protocol command gets: exit 0 (the protocol, stubbed, receives a
    checked config) or exit 2 with one line, never a traceback, within seconds."""
    import importlib
    import io
    from contextlib import redirect_stderr, redirect_stdout

    import dukb.neural.attacks  # noqa: F401  (imported before the clock starts: torch and the registries)
    import dukb.neural.methods  # noqa: F401

    module, attr = _ENTRY[name]
    monkeypatch.setattr(importlib.import_module(module), attr, lambda *a, **k: {"report": "r"})
    cmd = _root().commands[name]
    params = [
        p
        for p in cmd.params
        if getattr(p, "opts", None)
        and p.name not in _PATHS
        and not getattr(p, "is_flag", False)
        and not (_is_integer_option(p) or _is_float_option(p))
    ]
    base = ["--kb", "demo"] if name == "restor" else []

    @settings(max_examples=25, deadline=None, database=None)
    @given(p=st.sampled_from(params), value=_TEXT)
    def check(p, value):
        out, err = io.StringIO(), io.StringIO()
        start = time.monotonic()
        try:
            with redirect_stdout(out), redirect_stderr(err):
                code = main([name, *base, max(p.opts, key=len), value, "-o", str(tmp_path / "run")])
        except Exception as e:  # pragma: no cover - the failure this test looks for
            pytest.fail(f"{p.name}={value!r}: {type(e).__name__}: {e}")
        lines = err.getvalue().strip().splitlines()
        assert time.monotonic() - start < HANG, (p.name, value)
        assert code in (0, 2), (p.name, value, code, lines)
        if code == 2:
            assert len(lines) == 1 and lines[0].startswith("dukb: error:"), (p.name, value, lines)

    check()


def _declared_commands():
    """(command, config class) of every protocol command generated from its config dataclass."""
    from dukb.neural.protocols.control.config import ControlConfig
    from dukb.neural.protocols.evaluate.config import EvaluateConfig
    from dukb.neural.protocols.muse.config import MuseConfig
    from dukb.neural.protocols.rwku.config import RwkuConfig
    from dukb.neural.restor.config import RestorConfig

    return [
        ("evaluate", EvaluateConfig),
        ("muse", MuseConfig),
        ("rwku", RwkuConfig),
        ("control", ControlConfig),
        ("restor", RestorConfig),
    ]


@pytest.mark.parametrize("name, cls", _declared_commands())
def test_each_option_help_range_and_default_come_from_the_field_metadata(name, cls):
    """One declaration per option: every declared field of a protocol's config is an option of its command whose
    flag, help, range (the same :class:`dukb.neural.bounds.Range` object), default and panel are read from the
    field's metadata; and the command has no option besides them and its run options."""
    import dataclasses

    from dukb.cli.declared import param_name
    from dukb.cli.run_options import cli_default
    from dukb.neural.declare import declared, flag_of, help_of

    params = {p.name: p for p in _root().commands[name].params}
    fields = declared(cls)
    assert fields and {param_name(f) for f in fields} | {"config", "output", "resume"} >= set(params)
    for f in fields:
        p = params[param_name(f)]
        assert flag_of(f) in p.opts
        rng = f.metadata["range"]
        assert option_range(p) is rng
        text = help_of(f)
        assert p.help == (text if rng is None or rng.closed else f"{text} Range: {rng.text().removeprefix('in ')}.")
        if rng is not None and rng.closed:
            assert (p.type_descriptor.parameter_info.min, p.type_descriptor.parameter_info.max) == (rng.lo, rng.hi)
        assert p.default == (None if cli_default(f) is ... else cli_default(f)) or p.required
        assert getattr(p, "rich_help_panel", None) == f.metadata["panel"]
    # a changed declaration changes the command: the help is read from the metadata, not copied
    f = next(f for f in fields if f.metadata["range"] is not None)
    meta = dict(f.metadata, help="Changed help.")
    changed = dataclasses.field(default=f.default, metadata=meta)
    changed.name = f.name
    from dukb.cli.run_options import option_info

    assert option_info(changed).help.startswith("Changed help.")


@pytest.mark.parametrize("name, cls", _declared_commands())
def test_a_value_outside_a_declared_range_is_refused_by_check_too(name, cls):
    """The Python API refuses what the command line refuses: every ranged field's check names its flag."""
    from dukb.neural.declare import declared, flag_of

    base = {"kb": "demo"} if name == "restor" else {}
    for f in declared(cls):
        rng = f.metadata["range"]
        if rng is None:
            continue
        bad = rng.hi + 1 if rng.integer else rng.hi * 2 + 1
        with pytest.raises(InputError, match=flag_of(f)):
            cls(**base, **{f.name: int(bad) if rng.integer else bad}).check()
