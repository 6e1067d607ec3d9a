"""Training losses to TensorBoard through accelerate's tracker (``--log-with tensorboard``): the finetuning and every
unit's unlearning are logged under their names, and tracking changes neither a row nor the run's identity."""

from __future__ import annotations

import json

import pytest

from conftest import DEVICE
from dukb import InputError
from dukb.neural.tracking import check_log_with


def test_an_unknown_or_missing_tracker_is_refused(monkeypatch):
    import importlib.util

    check_log_with(None)
    with pytest.raises(InputError, match="unknown --log-with 'wandb'"):
        check_log_with("wandb")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(InputError, match="needs the tensorboard package"):
        check_log_with("tensorboard")


@pytest.mark.slow
def test_losses_reach_tensorboard_and_change_nothing(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from dukb.cli.main import main

    run = tmp_path / "run"
    args = ["evaluate", "--kb", "demo", "--n-targets", "1", "--methods", "ga,npo", "--grid", "ga=2,4", "--grid",
            "npo=2", "--metrics", "recall", "--device", DEVICE]
    assert main([*args, "--log-with", "tensorboard", "-o", str(run)]) == 0
    (logdir,) = (run / "tensorboard").iterdir()
    ea = EventAccumulator(str(logdir))
    ea.Reload()
    tags = set(ea.Tags()["scalars"])
    rows = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    target = rows[0]["target"]
    assert {"finetune/loss", f"{target}/ga/loss", f"{target}/ga/loss_forget", f"{target}/npo/loss"} <= tags
    assert [e.step for e in ea.Scalars(f"{target}/ga/loss")] == [1, 2, 3, 4]  # one reference run of 4 steps
    # the same run without a tracker: the same identity (a resume adds nothing) and the same rows
    assert main([*args, "-o", str(run), "--resume"]) == 0
    assert len((run / "results.jsonl").read_text().splitlines()) == len(rows)
    plain = tmp_path / "plain"
    assert main([*args, "--finetuned", str(run / "finetuned"), "-o", str(plain)]) == 0
    want = [(r["method"], r["setting"], r["recall"], r["accuracy_all"])
            for r in (json.loads(x) for x in (plain / "results.jsonl").read_text().splitlines())]
    assert [(r["method"], r["setting"], r["recall"], r["accuracy_all"]) for r in rows] == want
    assert main([*args, "--log-with", "wandb", "-o", str(tmp_path / "bad")]) == 2
