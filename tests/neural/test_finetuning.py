"""QA finetuning: the extra epochs that take a model that ends its schedule just short of 100% to the target, the
one line when it still falls short, and a checkpoint from which an interrupted finetuning continues exactly."""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")

from conftest import DEVICE  # noqa: E402
from dukb import InputError  # noqa: E402
from dukb.kb.generate import generate  # noqa: E402
from dukb.neural import finetune as FT  # noqa: E402
from dukb.neural.pipeline import finetune_kb, load_finetuned  # noqa: E402
from dukb.neural.spec import ModelSpec  # noqa: E402
from dukb.neural.train import TrainConfig  # noqa: E402

# short enough not to reach 100% in the scheduled epochs, so the extra epochs run too
SHORT = TrainConfig(epochs=6, lr=3e-3, batch_size=8, warmup_steps=2, eval_every=2, extra_epochs=6, extra_lr=1e-3)


@pytest.fixture()
def short_preset(monkeypatch):
    monkeypatch.setitem(FT.FINETUNE_PRESETS, "tiny", SHORT)


@pytest.fixture(scope="module")
def kb():
    return generate(8, seed=1)[0]


def _weights(path):
    return {k: v.clone() for k, v in load_finetuned(path, device=DEVICE).model.state_dict().items()}


class _Stop(Exception):
    pass


def _stop_at(epoch: int, lines: list):
    def log(line: str) -> None:
        lines.append(line)
        if line.startswith(f"epoch {epoch}:"):
            raise _Stop(line)

    return log


def test_extra_epochs_run_when_the_schedule_ends_short_and_the_shortfall_is_one_line(kb, tmp_path, short_preset):
    lines: list[str] = []
    rec = finetune_kb(kb, ModelSpec("tiny", prompt="tiny", device=DEVICE), tmp_path / "m", seed=0, log=lines.append)
    assert rec["epochs_run"] == 6 + rec["extra_epochs_run"] and rec["extra_epochs_run"] >= 2
    assert any(x.startswith("accuracy ") and "up to 6 more epochs at lr 0.001" in x for x in lines)
    if rec["accuracy"] < 1:  # still short: exactly one line says what it reached
        short = [x for x in lines if x.startswith("finetuning ended at accuracy")]
        assert len(short) == 1 and f"of {rec['n_items']} facts known" in short[0]
    assert not (tmp_path / "m" / FT.CHECKPOINT).exists()  # removed when training ends
    # the record says what the numbers were computed with
    assert rec["threads"]["torch"] == torch.get_num_threads() and rec["versions"]["torch"] == torch.__version__


@pytest.mark.parametrize("stop", [4, 10])  # in the scheduled epochs, and in the extra epochs
def test_an_interrupted_finetuning_resumes_from_its_checkpoint_exactly(kb, tmp_path, short_preset, stop):
    spec = ModelSpec("tiny", prompt="tiny", device=DEVICE)
    whole = finetune_kb(kb, spec, tmp_path / "whole", seed=0)
    lines: list[str] = []
    with pytest.raises(_Stop):
        finetune_kb(kb, spec, tmp_path / "cut", seed=0, log=_stop_at(stop, lines))
    assert (tmp_path / "cut" / FT.CHECKPOINT).is_file()
    again: list[str] = []
    rec = finetune_kb(kb, spec, tmp_path / "cut", seed=0, log=again.append)
    assert rec["resumed_after_epoch"] == stop - 2 and again[0].startswith(
        f"resuming finetuning from its checkpoint after epoch {stop - 2}"
    )
    assert (rec["epochs_run"], rec["accuracy"]) == (whole["epochs_run"], whole["accuracy"])
    assert rec["loss_per_epoch"] == pytest.approx(whole["loss_per_epoch"], rel=0, abs=0)
    a, b = _weights(tmp_path / "whole"), _weights(tmp_path / "cut")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_checkpoint_of_other_settings_is_refused(kb, tmp_path, short_preset):
    spec = ModelSpec("tiny", prompt="tiny", device=DEVICE)
    with pytest.raises(_Stop):
        finetune_kb(kb, spec, tmp_path / "m", seed=0, log=_stop_at(4, []))
    with pytest.raises(InputError, match="finetuning checkpoint made with other settings"):
        finetune_kb(kb, spec, tmp_path / "m", seed=0, lr=1e-3)
    (tmp_path / "m" / FT.CHECKPOINT).write_bytes(b"not a checkpoint")
    with pytest.raises(InputError, match="unreadable finetuning checkpoint"):
        finetune_kb(kb, spec, tmp_path / "m", seed=0)


def test_extra_epoch_settings_are_checked():
    for bad in (dict(extra_epochs=-1), dict(extra_epochs=3, extra_lr=0.0), dict(extra_lr=-1.0)):
        with pytest.raises(InputError):
            dataclasses.replace(SHORT, **bad).check()


def test_a_malformed_tiny_record_is_one_line(kb, tmp_path, short_preset, capsys):
    from dukb.cli.main import main

    finetune_kb(kb, ModelSpec("tiny", prompt="tiny", device=DEVICE), tmp_path / "m", seed=0)
    (tmp_path / "m" / "dukb_tiny.json").write_text("[")
    assert (
        main(
            [
                "finetune",
                "--kb",
                "demo",
                "--model",
                str(tmp_path / "m"),
                "--epochs",
                "1",
                "--device",
                DEVICE,
                "-o",
                str(tmp_path / "out"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"dukb: error: {tmp_path / 'm' / 'dukb_tiny.json'}:")
