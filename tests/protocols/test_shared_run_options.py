"""The shared run options: every protocol command takes every option of RunConfig under the same name and help, every
protocol config inherits the fields and their checks, and the options reach the model and the run identity."""

from __future__ import annotations

import dataclasses
import json

import pytest

from conftest import DEVICE, patch_everywhere
from dukb import InputError
from dukb.cli.run_options import cli_default
from dukb.neural.declare import SHARED, flag_of, group_fields, help_of
from dukb.neural.protocols import PROTOCOLS as REGISTERED
from dukb.neural.runconfig import RunConfig, parse_layers, run_kwargs

PROTOCOLS = ("evaluate", "muse", "rwku", "control")
#: every protocol command: each registered protocol's (a new one is checked at once), restor included, and `dukb
#: unlearn` (the evaluate protocol with one target and one method)
COMMANDS = (*REGISTERED, "unlearn")
#: the commands whose shared options sit in typer's default ``--help`` panel (a command written by hand whose
#: options were listed there before it took every shared option)
DEFAULT_PANEL = ("unlearn",)
#: the shared options a protocol states in its own words or with its own default (same name, same field)
OWN_WORDS = {
    "muse": ("model", "finetuned"),
    "rwku": ("finetuned",),
    "restor": (
        "kb",
        "rules",
        "model",
        "seed",
        "device",
        "dtype",
        "prompt",
        "lora_r",
        "lora_alpha",
        "finetuned",
        "lr",
        "finetune_epochs",
        "batch_size",
        "lora_targets",
    ),
    # --model is the finetuned model (required); --kb defaults to the model's; lr, seed and layers in its words
    "unlearn": ("kb", "model", "lr", "seed", "layers"),
}


def _configs():
    from dukb.neural.protocols.control.config import ControlConfig
    from dukb.neural.protocols.evaluate.config import EvaluateConfig
    from dukb.neural.protocols.muse.config import MuseConfig
    from dukb.neural.protocols.rwku.config import RwkuConfig

    return {"evaluate": EvaluateConfig, "muse": MuseConfig, "rwku": RwkuConfig, "control": ControlConfig}


def _command(name):
    import typer.main

    from dukb.cli.main import app

    group = typer.main.get_command(app)
    return group.commands[name]


def _shared():
    """The shared options, from the mixin's field metadata (the one declaration)."""
    return group_fields(RunConfig, SHARED)


def test_the_mixin_declares_every_shared_field():
    names = [f.name for f in _shared()]
    assert names == RunConfig.shared_fields() and len(names) == 22
    for f in _shared():
        assert f.metadata["help"] and f.metadata["panel"] == "Model and run options"


def test_the_commands_checked_are_every_registered_protocol():
    assert set(COMMANDS) >= set(PROTOCOLS) | {"restor", "unlearn"} and len(_shared()) == 22


@pytest.mark.parametrize("protocol", COMMANDS)
def test_every_protocol_command_takes_every_shared_option(protocol):
    """Generated from the mixin: each shared field is an option of every protocol command, restor included, with
    its flag, default and help (unless the protocol says what it means there)."""
    cmd = _command(protocol)
    opts = {p.name: p for p in cmd.params}
    own = OWN_WORDS.get(protocol, ())
    for f in _shared():
        flag, text = flag_of(f), help_of(f)
        assert f.name in opts, f"dukb {protocol} lacks {flag}"
        p = opts[f.name]
        assert flag in p.opts
        if f.name not in own:
            cls = REGISTERED["evaluate" if protocol == "unlearn" else protocol].load("config")
            mine = next(g for g in dataclasses.fields(cls) if g.name == f.name)
            # a compat component (dukb.neural.declare.apply_compat): not given = None, resolved to the shared
            # default, and its help says so
            component = p.default is None and mine.metadata.get("unset") == f.default
            assert p.default == cli_default(f) or component
            # a half-open range is stated after the help (dukb.cli.run_options.ranged; typer shows closed ones)
            assert p.help == text or p.help.startswith(text + " Range: ") or (component and p.help == help_of(mine))
            panel = None if protocol in DEFAULT_PANEL else "Model and run options"
            assert getattr(p, "rich_help_panel", None) == panel


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_protocol_config_inherits_the_shared_fields_and_checks(protocol):
    cls = _configs()[protocol]
    assert issubclass(cls, RunConfig)
    base = {f.name: f for f in dataclasses.fields(RunConfig)}
    mine = {f.name: f for f in dataclasses.fields(cls)}
    for name, f in base.items():  # a compat component keeps the shared default as its `unset` value
        assert mine[name].default == f.default or mine[name].metadata.get("unset") == f.default
    for bad in (
        dict(lora_r=-1),
        dict(lora_dropout=1.0),
        dict(layers="3-1"),
        dict(layers="1_0"),
        dict(prompt="nope"),
        dict(batch_size=0),
        dict(finetune_epochs=True),
    ):
        with pytest.raises(InputError):
            cls(**bad).check()
    cls(lora_r=4, layers="0-1", prompt="tiny", batch_size=2).check()


def test_parse_layers_and_run_kwargs():
    assert parse_layers(None) is None and parse_layers("") is None
    assert parse_layers("0-3") == (0, 3) and parse_layers("5") == (5, 5)
    for bad in ("3-1", "a-b", "-1", "1_0", "+1-2", "１-2"):
        with pytest.raises(InputError):
            parse_layers(bad)
    with pytest.raises(InputError, match="empty item"):  # issue 39: sloppy lists are refused
        run_kwargs(lora_targets="q_proj,,v_proj")
    kw = run_kwargs(kb="x", lora_targets=" q_proj, v_proj ", layers="0-1", other=1)
    assert kw == {"kb": "x", "lora_targets": ["q_proj", "v_proj"], "layers": "0-1"}
    with pytest.raises(InputError):
        run_kwargs(layers="2-1")


def test_model_identity_is_empty_at_the_defaults_and_records_lora_and_layers():
    assert RunConfig().model_identity() == {}
    ident = RunConfig(lora_r=4, lora_alpha=8, lora_targets=["q_proj"], layers="1-2").model_identity()
    assert ident["lora"]["r"] == 4 and ident["lora"]["alpha"] == 8 and ident["lora"]["target_modules"] == ["q_proj"]
    assert ident["layers"] == [1, 2]
    # settings leave out what is recorded elsewhere or changes no row, so old identities compare equal
    s = RunConfig(lora_r=4, gradient_checkpointing=True).identity_settings(("kb",))
    assert "lora_r" not in s and "gradient_checkpointing" not in s and "kb" not in s and s["seed"] == 0


def test_config_file_sets_shared_options_of_every_protocol(tmp_path, capsys):
    """`--config FILE` reads the shared options like the command line (names without dashes), and the value reaches
    the protocol's checks: a bad one is refused in one line with exit 2 before any model is loaded."""
    from dukb.cli.config_file import default_map
    from dukb.cli.main import main

    f = tmp_path / "c.yaml"
    f.write_text("lora-r: 4\nlayers: 0-1\ngradient-checkpointing: true\ntrust_remote_code: false\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text("lora-dropout: 1.5\n")
    for protocol in PROTOCOLS:
        dm = default_map(_command(protocol), f)
        assert (dm["lora_r"], dm["layers"], dm["gradient_checkpointing"]) == ("4", "0-1", "true")
        capsys.readouterr()
        assert main([protocol, "--config", str(bad), "-o", str(tmp_path / protocol)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("dukb: error:") and "--lora-dropout" in err and len(err.strip().splitlines()) == 1


torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    from dukb.kb import load_kb, save_kb
    from dukb.kb.generate import generate
    from dukb.neural.pipeline import finetune_kb
    from dukb.neural.spec import ModelSpec

    kb, _ = generate(24, seed=3)
    kb = load_kb(save_kb(kb, tmp_path_factory.mktemp("kb") / "kb"))
    out = tmp_path_factory.mktemp("ft") / "model"
    finetune_kb(kb, ModelSpec("tiny", prompt="tiny", device=DEVICE), out, seed=0)
    return kb, out


class _Stop(Exception):
    pass


def _record_contexts(monkeypatch, seen, stop=False):
    """Record the LoRA and layer options every UnlearnContext of a protocol gets (and stop the run at the first)."""
    import dukb.neural.methods as M

    real = M.UnlearnContext

    def make(*a, **kw):
        seen.append({"lora": kw.get("lora"), "layers": kw.get("layers")})
        if stop:
            raise _Stop()
        return real(*a, **kw)

    patch_everywhere(monkeypatch, M, "UnlearnContext", make)


def test_control_runs_with_lora_and_partial_layers(small, tmp_path, monkeypatch):
    """`dukb control --lora-r --layers`: every unlearning run gets the adapter and the block range, the identity
    records both, and a resume with another rank is refused."""
    from dukb.cli.main import main

    kb, ft = small
    run = tmp_path / "ctl"
    args = [
        "control",
        "--kb",
        str(kb.source),
        "--finetuned",
        str(ft),
        "-o",
        str(run),
        "--methods",
        "ga",
        "--controls",
        "es",
        "--ratios",
        "0.05",
        "--steps",
        "2",
        "--coarse",
        "1",
        "--fine",
        "1",
        "--retain-eval",
        "8",
        "--device",
        DEVICE,
        "--lora-r",
        "2",
        "--layers",
        "0-0",
    ]
    seen = []
    _record_contexts(monkeypatch, seen)
    assert main(args) == 0
    assert seen and all(s["lora"] is not None and s["lora"].r == 2 and s["layers"] == (0, 0) for s in seen)
    ident = json.loads((run / "config.json").read_text())["identity"]
    assert ident["model"]["lora"]["r"] == 2 and ident["model"]["layers"] == [0, 0]
    rows = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    assert any(r.get("method") == "ga" for r in rows)
    assert main(args[:-4] + ["--lora-r", "4", "--layers", "0-0", "--resume"]) == 2


@pytest.mark.parametrize("protocol", ["muse", "rwku"])
def test_muse_and_rwku_pass_lora_and_layers_to_unlearning(protocol, small, tmp_path, monkeypatch):
    """The shared options reach every unlearning run of `dukb muse` and `dukb rwku` (the run stops at the first)."""
    from dukb.neural.protocols.muse.config import MuseConfig
    from dukb.neural.protocols.muse.run import run_muse
    from dukb.neural.protocols.rwku.config import RwkuConfig
    from dukb.neural.protocols.rwku.run import run_rwku

    kb, ft = small
    seen = []
    _record_contexts(monkeypatch, seen, stop=True)
    common = dict(kb=str(kb.source), device=DEVICE, lora_r=2, layers="1-1", methods=["ga"], grids={"ga": [1]})
    if protocol == "muse":
        cfg = MuseConfig(**common, finetuned=str(ft), scale_sizes=[], sustain=False, finetune_epochs=1, bootstrap=10)
        runner = run_muse
    else:
        # rwku finetunes its own model (the tokenizer must know the description corpus); one epoch is enough here
        cfg = RwkuConfig(**common, finetune_epochs=1, n_targets=1, batch_sizes=[])
        runner = run_rwku
    with pytest.raises(_Stop):
        runner(tmp_path / protocol, cfg, resume=False, log=lambda *_: None)
    assert seen and seen[0]["lora"].r == 2 and seen[0]["layers"] == (1, 1)
    ident = json.loads((tmp_path / protocol / "config.json").read_text())["identity"]
    text = json.dumps(ident)
    assert '"lora"' in text and '"layers"' in text


def test_unlearn_takes_the_finetuned_model_and_keeps_its_models(small, tmp_path, monkeypatch):
    """`dukb unlearn`'s generated shared options reach the run: --finetuned names the model unlearned (--model is
    not read), --save-models all keeps each setting's model, --batch-size and --finetune-epochs reach the plan, and
    the identity is that of the same run with the model given as --model."""
    from dukb.cli.main import main
    from dukb.neural.protocols.evaluate import run as evaluate_run

    kb, ft = small
    target = str(kb.relationships[0].fact_id)
    common = ["--method", "ga", "--target-id", target, "--grid", "1", "--device", DEVICE]
    plans = []
    real = evaluate_run.evaluate

    def spy(output, cfg, **kw):
        plans.append(cfg)
        return real(output, cfg, **kw)

    monkeypatch.setattr(evaluate_run, "evaluate", spy)
    run = tmp_path / "unl"
    args = ["unlearn", "--model", "no-such-model", "--finetuned", str(ft), *common, "-o", str(run)]
    assert main([*args, "--save-models", "all", "--batch-size", "8", "--finetune-epochs", "3"]) == 0
    cfg = plans[-1]
    assert cfg.finetuned == str(ft) and cfg.save_models == "all" and cfg.batch_size == 8 and cfg.finetune_epochs == 3
    assert cfg.kb == str(kb.source)
    saved = [p for p in (run / "models").rglob("dukb_model.json") if ".sweep" not in p.parts]
    assert len(saved) == 1 and "steps=1" in str(saved[0])
    plain = tmp_path / "plain"
    assert main(["unlearn", "--model", str(ft), *common, "-o", str(plain)]) == 0
    assert plans[-1].finetuned == str(ft) and plans[-1].save_models == "none" and not (plain / "models").exists()
    ident = [json.loads((d / "config.json").read_text())["identity"] for d in (run, plain)]
    assert ident[0] == ident[1]


def test_restor_pipeline_gets_the_shared_model_options(tmp_path):
    """restor's model loading and adapters read the shared options: gradient checkpointing and remote code reach
    the model spec, LoRA dropout and modules the adapter, --layers the trained blocks."""
    from dukb.neural.modelbuild import build_tiny_model
    from dukb.neural.models import load_model
    from dukb.neural.restor import pipeline
    from dukb.neural.restor.config import RestorConfig

    cfg = RestorConfig(
        kb="demo",
        gradient_checkpointing=True,
        trust_remote_code=True,
        lora_dropout=0.1,
        lora_targets=["c_attn"],
        layers="0-0",
        device=DEVICE,
    ).check()
    build_tiny_model(["a b c d e f"], tmp_path / "m", seed=0)
    spec = pipeline._spec_for(cfg, str(tmp_path / "m"))
    assert spec.gradient_checkpointing and spec.trust_remote_code
    lm = load_model(pipeline._spec_for(dataclasses.replace(cfg, gradient_checkpointing=False), str(tmp_path / "m")))
    lora = pipeline._lora_spec(cfg, lm.model)
    assert lora.dropout == 0.1 and tuple(lora.target_modules) == ("c_attn",) and lora.alpha == 16
    pipeline._select_layers(cfg, lm.model)
    trainable = [n for n, p in lm.model.named_parameters() if p.requires_grad]
    assert trainable and all(".0." in n for n in trainable)
