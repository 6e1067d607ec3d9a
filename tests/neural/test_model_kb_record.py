"""The KB travels with the model: `dukb finetune` records the KB's fingerprint (``kb_sha256``) and where it is
(``kb``) in dukb_model.json; every command given a finetuned model and another KB refuses in one line naming both
(exit 2) unless --allow-kb-mismatch; without --kb it uses the model's KB; a record from an older dukb (no KB) is
accepted with one warning. And exit codes: a finetuning that ends below its target exits 1 and keeps the model."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
from pathlib import Path

import pytest

from conftest import DEVICE
from dukb import InputError
from dukb.cli.main import main
from dukb.kb import load_kb, save_kb
from dukb.kb.generate import generate

DEMO_SHA = load_kb("demo").fingerprint()


@pytest.fixture(scope="module")
def other_kb(tmp_path_factory) -> Path:
    """A KB directory other than demo (8 generated people)."""
    return save_kb(generate(8, seed=1)[0], tmp_path_factory.mktemp("other") / "kb")


def _model(d: Path, **record) -> Path:
    """A model directory holding only dukb's record (the KB checks run before any weight is read)."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "dukb_model.json").write_text(json.dumps({"prompt": "tiny", "family": "tiny", "base": "tiny", **record}))
    return d


def _err_lines(capsys) -> list[str]:
    return capsys.readouterr().err.strip().splitlines()


def _commands(model: Path, kb: Path, out: Path) -> dict[str, list[str]]:
    """Every command that takes a finetuned model and a KB, given ``model`` and ``--kb kb``."""
    m, k = str(model), str(kb)
    cmds = {
        "probe": ["probe", "--model", m, "--kb", k, "-o", str(out / "p.csv")],
        "unlearn": [
            "unlearn",
            "--model",
            m,
            "--kb",
            k,
            "--method",
            "ga",
            "--target-id",
            "1",
            "-o",
            str(out / "unlearn"),
        ],
        "attack": ["attack", "--model", m, "--kb", k, "--target-id", "1", "-o", str(out / "a.json")],
        "attack-reference": [
            "attack",
            "--model",
            str(out / "plain"),
            "--reference",
            m,
            "--kb",
            k,
            "--target-id",
            "1",
            "-o",
            str(out / "a.json"),
        ],
    }
    for protocol in ("evaluate", "muse", "rwku", "control"):
        cmds[protocol] = [protocol, "--finetuned", m, "--kb", k, "-o", str(out / protocol), "--device", DEVICE]
    return cmds


def test_another_kb_is_refused_in_one_line_naming_both(tmp_path, other_kb, capsys):
    model = _model(tmp_path / "ft", kb="demo", kb_sha256=DEMO_SHA)
    (tmp_path / "out" / "plain").mkdir(parents=True)
    other_sha = load_kb(other_kb).fingerprint()
    for name, args in _commands(model, other_kb, tmp_path / "out").items():
        capsys.readouterr()
        assert main(args) == 2, name
        err = _err_lines(capsys)
        assert err == [
            f"dukb: error: the model {model} was finetuned on KB demo (sha256 {DEMO_SHA}) but --kb "
            f"{other_kb} has sha256 {other_sha}: pass the model's KB or --allow-kb-mismatch"
        ], name
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["plain"]  # refused before writing anything


def test_the_models_own_kb_passes_the_check_under_any_name(tmp_path, other_kb):
    from dukb.neural.modelrecord import model_kb

    model = _model(tmp_path / "ft", kb=str(other_kb), kb_sha256=load_kb(other_kb).fingerprint())
    copy = save_kb(load_kb(other_kb), tmp_path / "copy")  # the same facts in another folder: the same KB
    assert model_kb(model, str(copy)) == str(copy)
    assert model_kb(model, None) == str(other_kb)  # no --kb: the model's
    assert model_kb(tmp_path / "no-record", "demo") == "demo"  # a model dukb did not save: nothing to check
    with pytest.raises(InputError, match="was finetuned on KB .* but --kb demo has sha256"):
        model_kb(model, "demo")
    nowhere = _model(tmp_path / "nowhere", kb=None, kb_sha256=DEMO_SHA)  # a KB not loaded from a directory
    assert model_kb(nowhere, "demo") == "demo"
    with pytest.raises(InputError, match="but not where that KB is: pass --kb"):
        model_kb(nowhere, None)


def test_allow_kb_mismatch_warns_once_and_is_recorded_in_the_config(tmp_path, other_kb, capsys):
    from dukb.neural.protocols.evaluate.config import EvaluateConfig

    model = _model(tmp_path / "ft", kb="demo", kb_sha256=DEMO_SHA)
    cfg = EvaluateConfig(finetuned=str(model), kb=str(other_kb), allow_kb_mismatch=True).check()
    cfg.check()  # checked again (the protocol does): the same warning is not repeated
    err = _err_lines(capsys)
    assert len(err) == 1 and err[0].startswith(f"dukb: warning: the model {model} was finetuned on KB demo")
    assert err[0].endswith("used anyway (--allow-kb-mismatch)")
    assert cfg.kb == str(other_kb) and dataclasses.asdict(cfg)["allow_kb_mismatch"] is True
    assert "allow_kb_mismatch" not in cfg.identity_settings()  # the identity's KB fingerprint says which KB
    with pytest.raises(InputError, match="pass the model's KB or --allow-kb-mismatch"):
        EvaluateConfig(finetuned=str(model), kb=str(other_kb)).check()


def _configs():
    from dukb.neural.protocols.control.config import ControlConfig
    from dukb.neural.protocols.evaluate.config import EvaluateConfig
    from dukb.neural.protocols.muse.config import MuseConfig
    from dukb.neural.protocols.rwku.config import RwkuConfig

    return (EvaluateConfig, MuseConfig, RwkuConfig, ControlConfig)


def test_without_kb_every_protocol_and_the_shared_options_take_the_models_kb(tmp_path, other_kb, capsys):
    from dukb.cli.run_options import model_kb_options

    model = _model(tmp_path / "ft", kb=str(other_kb), kb_sha256=load_kb(other_kb).fingerprint())
    for cls in _configs():
        cfg, default = cls(finetuned=str(model)).check(), cls().check()  # check() returns the resolved plan
        assert cfg.kb == str(other_kb) and default.kb is None, cls.__name__  # no model: the built-in default
    # the command line resolves it before a command reads its targets from the KB
    assert model_kb_options({"finetuned": str(model), "kb": None})["kb"] == str(other_kb)
    assert model_kb_options({"finetuned": None, "kb": None})["kb"] is None
    assert _err_lines(capsys) == []  # a recorded KB that is still there: nothing to warn about


def test_a_recorded_kb_that_is_gone_or_changed_is_refused(tmp_path, other_kb, capsys):
    kb = save_kb(load_kb(other_kb), tmp_path / "kb")
    model = _model(tmp_path / "ft", kb=str(kb), kb_sha256=load_kb(kb).fingerprint())
    rel = kb / "relationships.csv"
    rel.write_text(rel.read_text().rstrip("\n").rsplit("\n", 1)[0] + "\n")  # one fact fewer
    changed = load_kb(kb).fingerprint()
    args = ["attack", "--model", str(model), "--target-id", "1", "-o", str(tmp_path / "a.json")]
    capsys.readouterr()
    assert main(args) == 2
    assert _err_lines(capsys) == [
        f"dukb: error: the model {model} was finetuned on KB {kb} (sha256 "
        f"{json.loads((model / 'dukb_model.json').read_text())['kb_sha256']}), which now "
        f"has sha256 {changed}: pass --kb with the model's KB, or --allow-kb-mismatch"
    ]
    for f in kb.iterdir():
        f.unlink()
    kb.rmdir()
    assert main(args) == 2
    err = _err_lines(capsys)
    assert len(err) == 1 and err[0].endswith(
        "which no longer exists: pass --kb with that KB (or another and --allow-kb-mismatch)"
    )
    assert not (tmp_path / "a.json").exists()


def test_attack_without_kb_takes_the_kb_from_the_models_record(tmp_path, other_kb, monkeypatch, capsys):
    """`dukb attack --model M` scores against M's KB (else --reference's), not the built-in generated KB."""
    import dukb.neural.attacks.checkpoint as ck

    seen = []

    def fake(kb, closure, model_dir, target, attacks, **kw):
        seen.append(kb.fingerprint())
        return {
            "recall": 1.0,
            "accuracy_all": 1.0,
            "success_du": 1,
            "target_forgotten": 1,
            "attacks": {},
            "recall_under_attack": 1.0,
        }

    monkeypatch.setattr(ck, "attack_checkpoint", fake)
    sha = load_kb(other_kb).fingerprint()
    model = _model(tmp_path / "ft", kb=str(other_kb), kb_sha256=sha)
    plain = tmp_path / "unlearned"  # an unlearned checkpoint another framework saved: no record
    plain.mkdir()
    for args in (["--model", str(model)], ["--model", str(plain), "--reference", str(model)]):
        assert main(["attack", *args, "--target-id", "1", "--attacks", "quant8", "-o", str(tmp_path / "a.json")]) == 0
    assert seen == [sha, sha]
    assert _err_lines(capsys) == []
    # neither the model nor the reference records a KB: refused, never scored against a default KB
    assert main(["attack", "--model", str(plain), "--target-id", "1", "--attacks", "quant8"]) == 2
    err = _err_lines(capsys)
    assert (
        len(err) == 1
        and err[0].startswith(f"dukb: error: neither --model {plain} records the KB")
        and err[0].endswith("pass --kb with that KB")
        and seen == [sha, sha]
    )
    # the terminal gets the table, not the row's JSON with its fact ids
    assert main(["attack", "--model", str(model), "--target-id", "1", "--attacks", "quant8"]) == 0
    out = capsys.readouterr().out
    assert "recall under attack" in out and "{" not in out and "-o FILE" in out


def test_a_record_from_an_older_dukb_is_accepted_with_one_warning(tmp_path, other_kb, capsys):
    from dukb.neural.modelrecord import model_kb
    from dukb.neural.protocols.evaluate.config import EvaluateConfig

    old = _model(tmp_path / "old")  # dukb_model.json without kb / kb_sha256
    cfg = EvaluateConfig(finetuned=str(old)).check()
    assert cfg.kb is None  # the built-in default, as before
    assert _err_lines(capsys) == [
        f"dukb: warning: the model {old} records no KB (saved by an older dukb): the KB "
        "it was finetuned on is not checked; pass --kb to name it"
    ]
    assert model_kb(old, str(other_kb)) == str(other_kb)  # --kb given: trusted, silently
    assert EvaluateConfig(finetuned=str(old), kb=str(other_kb)).check().kb == str(other_kb)
    assert _err_lines(capsys) == []


def test_a_malformed_kb_field_of_the_record_is_one_line(tmp_path, capsys):
    model = _model(tmp_path / "ft", kb=["demo"], kb_sha256=DEMO_SHA)
    assert main(["probe", "--model", str(model)]) == 2
    err = _err_lines(capsys)
    assert len(err) == 1 and err[0].startswith(f"dukb: error: {model / 'dukb_model.json'}: model record: 'kb' must")


def test_dukb_help_lists_every_exit_code(capsys):
    assert main(["--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for code in (
        "0 success",
        "1 the command finished short of its goal",
        "2 bad input or a refusal",
        "130 interrupted",
    ):
        assert code in text


# ---------------------------------------------------------------- with a model (finetuning, loading) ----------
@pytest.fixture(scope="module")
def short_model(tmp_path_factory):
    """`dukb finetune --kb demo --epochs 1`: the tiny model ends far below 100% (exit code, stderr, directory)."""
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("short") / "ft"
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = main(["finetune", "--kb", "demo", "--epochs", "1", "--device", DEVICE, "-o", str(out)])
    return rc, err.getvalue(), out


@pytest.mark.slow
def test_a_finetuning_short_of_its_target_exits_1_keeps_the_model_and_records_the_kb(short_model):
    rc, err, out = short_model
    rec = json.loads((out / "finetune.json").read_text())
    assert rc == 1 and rec["accuracy"] < rec["target_accuracy"] == 1.0 and rec["reached_target"] is False
    said = [x for x in err.splitlines() if x.startswith("dukb:")]
    assert said == [
        f"dukb: finetuning ended at accuracy {rec['accuracy']:.4f} ({round(rec['accuracy'] * 32)} of 32 "
        "facts known) after 1 epoch, below the target 1; facts the finetuned model does not know cannot "
        f"be unlearned (raise the epochs or the learning rate); the model is kept in {out}"
    ]
    assert sum("finetuning ended at accuracy" in x for x in err.splitlines()) == 1  # said once
    assert (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file()
    record = json.loads((out / "dukb_model.json").read_text())
    assert record["kb"] == "demo" and record["kb_sha256"] == DEMO_SHA == rec["kb_sha256"]


@pytest.mark.slow
def test_a_finetuned_model_is_probed_on_its_own_kb_and_another_needs_the_override(
    short_model, other_kb, tmp_path, capsys
):
    import pandas as pd

    _rc, _err, model = short_model
    capsys.readouterr()
    assert main(["probe", "--model", str(model), "--scores", "none", "-o", str(tmp_path / "own.csv")]) == 0
    assert len(pd.read_csv(tmp_path / "own.csv")) == len(load_kb("demo").relationships) + len(
        load_kb("demo").biographies
    )
    assert not any(x.startswith("dukb:") for x in _err_lines(capsys))
    assert main(["probe", "--model", str(model), "--kb", str(other_kb), "--scores", "none"]) == 2
    assert len(_err_lines(capsys)) == 1
    assert (
        main(
            [
                "probe",
                "--model",
                str(model),
                "--kb",
                str(other_kb),
                "--scores",
                "none",
                "--allow-kb-mismatch",
                "-o",
                str(tmp_path / "other.csv"),
            ]
        )
        == 0
    )
    warned = [x for x in _err_lines(capsys) if x.startswith("dukb:")]
    assert len(warned) == 1 and warned[0].startswith("dukb: warning: ") and str(other_kb) in warned[0]
    kb = load_kb(other_kb)
    assert len(pd.read_csv(tmp_path / "other.csv")) == len(kb.relationships) + len(kb.biographies)
