"""Training losses and result rows to experiment trackers through accelerate's trackers (``--log-with NAME[,NAME]``):
every tracker accelerate knows is accepted when installed, refused in one line otherwise; the finetuning and every
unit's unlearning are logged under their names, each row as scalars and in the run's table; tracking changes neither
a row nor the run's identity."""

from __future__ import annotations

import json

import pytest

from conftest import DEVICE
from dukb import InputError
from dukb.neural import tracking
from dukb.neural.tracking import check_log_with, trackers

ARGS = ["evaluate", "--kb", "demo", "--n-targets", "1", "--metrics", "recall", "--device", DEVICE]


def test_every_accelerate_tracker_is_known_and_parsed():
    from accelerate.tracking import LOGGER_TYPE_TO_CLASS

    assert set(trackers()) == set(LOGGER_TYPE_TO_CLASS)
    assert {"wandb", "mlflow", "aim", "comet_ml", "clearml", "dvclive", "tensorboard"} <= set(trackers())
    assert set(tracking.PACKAGES) >= set(trackers()) - {
        n for n, c in LOGGER_TYPE_TO_CLASS.items() if c.__module__ != "accelerate.tracking"
    }
    assert check_log_with(None) == []
    assert check_log_with("tensorboard, tensorboard") == ["tensorboard"]


def test_an_unknown_or_missing_tracker_is_refused(monkeypatch):
    import importlib.util

    with pytest.raises(InputError, match=r"unknown --log-with 'tensorbord' \(choose from aim, .*wandb"):
        check_log_with("tensorboard,tensorbord")
    with pytest.raises(InputError, match="unknown --log-with ''"):
        check_log_with("tensorboard,")
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name in ("wandb", "mlflow", "tensorboard", "tensorboardX") else real(name, *a),
    )
    with pytest.raises(InputError, match="^--log-with wandb needs the wandb package: pip install wandb$"):
        check_log_with("wandb")
    with pytest.raises(InputError, match="^--log-with mlflow needs the mlflow package: pip install mlflow$"):
        check_log_with("mlflow")
    with pytest.raises(InputError, match=r'needs the tensorboard package: pip install "dukb\[tensorboard\]"'):
        check_log_with("tensorboard")


def test_a_refused_tracker_is_one_line_before_any_work(tmp_path, capsys):
    from dukb.cli.main import main

    assert main([*ARGS, "--log-with", "nosuch", "-o", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dukb: error: unknown --log-with 'nosuch'"), err
    assert not (tmp_path / "bad" / "results.jsonl").exists()


class _Recorder:
    """A stand-in for an accelerate tracker: records what it is given."""

    def __init__(self, name, table=False):
        self.name, self.logs, self.tables, self.finished = name, [], [], False
        if table:
            self.log_table = lambda name, columns, data: self.tables.append((name, columns, data))

    def log(self, values, step=None):
        self.logs.append((values, step))

    def finish(self):
        self.finished = True


def test_losses_and_rows_reach_every_tracker_with_steps_they_accept(tmp_path, monkeypatch):
    opened = {"tensorboard": _Recorder("tensorboard"), "wandb": _Recorder("wandb", table=True)}
    monkeypatch.setattr(tracking, "_open", lambda name, run_dir, run_name: opened[name])
    row = {
        "target": 7,
        "method": "ga",
        "setting": {"steps": 2, "lr": 1e-3},
        "recall": 0.5,
        "accuracy_all": None,
        "target_forgotten": True,
        "success_du": 0,
        "forgotten_relationships": [7],
    }
    with tracking.tracking(tmp_path, "tensorboard,wandb", "evaluate"):
        for unit in ("finetune", "7/ga"):
            with tracking.scope(unit):
                tracking.log_epoch({"loss": 2.0, "loss_forget": float("nan"), "flag": True})
                tracking.log_epoch({"loss": 1.0})
        tracking.log_row(row, (7, "ga", 2.0))
        tracking.log_row({**row, "success_du": False, "recall": 0.25}, (7, "ga", 4.0))
    tb, wb = opened["tensorboard"], opened["wandb"]
    assert tb.finished and wb.finished and not tracking._ACTIVE
    # TensorBoard: each scope's epochs as steps; wandb: one rising step, the epoch beside
    assert [s for _, s in tb.logs[:4]] == [1, 2, 1, 2] and tb.logs[0][0] == {"finetune/loss": 2.0}
    assert [s for _, s in wb.logs] == [1, 2, 3, 4, 5, 6]
    assert wb.logs[2][0] == {"7/ga/loss": 2.0, "7/ga/epoch": 1}
    assert wb.logs[4][0] == {
        "results/7/ga/2/recall": 0.5,
        "results/7/ga/2/target_forgotten": 1.0,
        "results/7/ga/2/success_du": 0.0,
        "results/row": 1,
    }
    assert tb.logs[5] == (
        {"results/7/ga/4/recall": 0.25, "results/7/ga/4/target_forgotten": 1.0, "results/7/ga/4/success_du": 0.0},
        2,
    )
    # the table: scalar fields and the setting's, lists left out; a mixed column (0 and false) holds text
    ((name, columns, data),) = wb.tables
    assert name == "results_table"
    assert columns == [
        "target",
        "method",
        "setting.steps",
        "setting.lr",
        "recall",
        "accuracy_all",
        "target_forgotten",
        "success_du",
    ]
    assert data == [[7, "ga", 2, 1e-3, 0.5, None, True, "0"], [7, "ga", 2, 1e-3, 0.25, None, True, "False"]]
    text, step = tb.logs[-1]
    assert step == 2 and text["results_table"].splitlines()[0].startswith("| target | method | setting.steps |")


@pytest.mark.slow
def test_losses_reach_tensorboard_and_change_nothing(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from dukb.cli.main import main

    run = tmp_path / "run"
    args = [*ARGS, "--methods", "ga,npo", "--grid", "ga=2,4", "--grid", "npo=2"]
    assert main([*args, "--log-with", "tensorboard", "-o", str(run)]) == 0
    (logdir,) = (run / "tensorboard").iterdir()
    ea = EventAccumulator(str(logdir))
    ea.Reload()
    tags = set(ea.Tags()["scalars"])
    rows = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    target = rows[0]["target"]
    assert {"finetune/loss", f"{target}/ga/loss", f"{target}/ga/loss_forget", f"{target}/npo/loss"} <= tags
    assert [e.step for e in ea.Scalars(f"{target}/ga/loss")] == [1, 2, 3, 4]  # one reference run of 4 steps
    for r in rows:  # each row's numbers, keyed by its target, method and setting
        (recall,) = ea.Scalars(f"results/{target}/{r['method']}/{r['setting'][r['param']]:g}/recall")
        assert recall.value == pytest.approx(r["recall"])
    (text,) = ea.Tensors("results_table/text_summary")  # the rows' table, as Markdown text
    table = text.tensor_proto.string_val[0].decode().splitlines()
    assert table[0].startswith("| method |") and len(table) == 2 + len(rows)
    # the same run without a tracker: the same identity (a resume adds nothing) and the same rows
    assert main([*args, "-o", str(run), "--resume"]) == 0
    assert len((run / "results.jsonl").read_text().splitlines()) == len(rows)
    plain = tmp_path / "plain"
    assert main([*args, "--finetuned", str(run / "finetuned"), "-o", str(plain)]) == 0
    want = [
        (r["method"], r["setting"], r["recall"], r["accuracy_all"])
        for r in (json.loads(x) for x in (plain / "results.jsonl").read_text().splitlines())
    ]
    assert [(r["method"], r["setting"], r["recall"], r["accuracy_all"]) for r in rows] == want


@pytest.mark.slow
def test_losses_and_rows_reach_an_offline_wandb_run(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    from dukb.cli.main import main

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = tmp_path / "run"
    assert main([*ARGS, "--methods", "ga", "--grid", "ga=2", "--log-with", "wandb", "-o", str(run)]) == 0
    (row,) = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    (folder,) = (tmp_path / "wandb").glob("offline-run-*")
    (records,) = folder.glob("run-*.wandb")
    history = _wandb_history(records)
    t = row["target"]
    assert [h["finetune/epoch"] for h in history if "finetune/loss" in h] == list(range(1, 41))
    assert [h[f"{t}/ga/epoch"] for h in history if f"{t}/ga/loss" in h] == [1, 2]  # ga=2: two steps
    (logged,) = [h for h in history if f"results/{t}/ga/2/recall" in h]
    assert logged[f"results/{t}/ga/2/recall"] == pytest.approx(row["recall"]) and logged["results/row"] == 1
    assert [h["_step"] for h in history] == sorted({h["_step"] for h in history})  # wandb's steps only rise
    (table,) = (folder / "files" / "media" / "table").glob("results_table_*.table.json")
    table = json.loads(table.read_text())
    assert table["data"][0][table["columns"].index("recall")] == pytest.approx(row["recall"])
    assert table["data"][0][table["columns"].index("setting.steps")] == 2


def _wandb_history(path) -> list[dict]:
    """The history records of an offline wandb run file (run-*.wandb: a 7-byte header, then LevelDB log blocks of
    32 KiB holding protobuf ``Record`` messages), merged per step."""
    import struct

    from wandb.proto import wandb_internal_pb2 as pb

    data, pos, part, steps = path.read_bytes(), 7, b"", {}
    while pos + 7 <= len(data):
        left = 32768 - pos % 32768
        _, n, kind = struct.unpack("<IHB", data[pos : pos + 7]) if left >= 7 else (0, 0, 0)
        if kind == 0:  # the block's padding
            pos += left
            continue
        part, pos = part + data[pos + 7 : pos + 7 + n], pos + 7 + n
        if kind in (1, 4):  # a whole record, or the last piece of one
            record = pb.Record()
            record.ParseFromString(part)
            part = b""
            if record.WhichOneof("record_type") == "history":
                items = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in record.history.item}
                steps.setdefault(items.get("_step"), {}).update(items)
    return list(steps.values())
