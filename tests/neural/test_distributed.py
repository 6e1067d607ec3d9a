"""Multi-process runs through accelerate (dukb.neural.distributed), exercised on CPU with two gloo processes.

A launch with ``torch.distributed.run`` (torchrun) sets WORLD_SIZE/RANK/LOCAL_RANK exactly as ``accelerate launch``
does on GPUs; on CPU accelerate joins a gloo process group instead of NCCL. Checked here:
- data-parallel finetuning gives the single-process gradient: per-epoch losses agree to float precision until
  chaotic training amplifies rounding, and both runs learn the KB (100% in one process, >= 90% data parallel);
- `dukb evaluate` split over two processes writes the same rows as one process, and leaves one results.jsonl;
- a run killed with shard files left behind resumes in one process without recomputing their rows;
- commands that run in one process refuse a multi-process launch with exit code 2.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT

pytest.importorskip("torch")
pytest.importorskip("accelerate")

from dukb.cli.main import main  # noqa: E402
from dukb.neural import distributed as dist  # noqa: E402
from dukb.neural.finetune import _local_slice  # noqa: E402

ENV = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
for var in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
    ENV.pop(var, None)
EVAL = [
    "--kb",
    "demo",
    "--methods",
    "ga,tv",
    "--grid",
    "ga=1,4",
    "--grid",
    "tv=0.5,5",
    "--n-targets",
    "3",
    "--device",
    "cpu",
]


def _dukb(args: list[str], nproc: int = 1, timeout: int = 300) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "dukb.cli.main", *args]
    env = ENV
    if nproc > 1:
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc_per_node={nproc}",
            "-m",
            "dukb.cli.main",
            *args,
        ]
        # what `accelerate launch` exports from a user's default config: dukb must not pick it up (autocast and
        # a loss divided by 4 would change the training)
        env = dict(ENV, ACCELERATE_MIXED_PRECISION="bf16", ACCELERATE_GRADIENT_ACCUMULATION_STEPS="4")
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def _ok(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def _finetuned(proc: subprocess.CompletedProcess, out: Path) -> int:
    """Check a `dukb finetune` into ``out``: exit 0 at its target accuracy, else 1 with the model kept; returns how
    many times its final line was printed (stdout's summary, or stderr's shortfall line)."""
    rec = json.loads((out / "finetune.json").read_text())
    assert proc.returncode == (0 if rec["reached_target"] else 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (out / "model.safetensors").is_file()
    return proc.stdout.count("finetuned tiny on 32 facts") + proc.stderr.count("dukb: finetuning ended at accuracy")


@pytest.fixture(scope="module")
def finetuned_pair(tmp_path_factory):
    """The demo KB finetuned (tiny preset, at most 100 epochs) in one process and data parallel in two."""
    root = tmp_path_factory.mktemp("ddp")
    args = ["finetune", "--kb", "demo", "--epochs", "100", "--device", "cpu", "--seed", "0"]
    one, two = root / "one", root / "two"
    _finetuned(_dukb(args + ["-o", str(one)]), one)
    proc = _dukb(args + ["-o", str(two)], nproc=2)
    _finetuned(proc, two)
    return one, two, proc


def test_ddp_finetune_equals_single_process(finetuned_pair):
    one, two, proc = finetuned_pair
    a = json.loads((one / "finetune.json").read_text())
    b = json.loads((two / "finetune.json").read_text())
    assert a["world_size"] == 1 and b["world_size"] == 2
    assert a["config"] == b["config"] and a["n_items"] == b["n_items"] == 32
    # the same global batches and the same gradient: identical losses until rounding differences grow
    for la, lb in list(zip(a["loss_per_epoch"], b["loss_per_epoch"]))[:10]:
        assert lb == pytest.approx(la, rel=1e-4)
    assert a["loss_per_epoch"][-1] < a["loss_per_epoch"][0] / 10  # and it learns the KB
    # after the first epochs rounding differences of the all-reduce grow chaotically, so the two runs end at
    # different points: the single process knows the whole KB, the data-parallel run (nearly) all of it
    assert a["accuracy"] == 1.0 and b["accuracy"] >= 0.9
    assert (two / "model.safetensors").exists() and b["model"]["name_or_path"] == "tiny"
    # one process reports: the final line is printed once
    assert _finetuned(proc, two) == 1


def _keyed(run) -> dict:
    rows = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    return {(r["target"], r["method"], json.dumps(r["setting"], sort_keys=True)): r for r in rows}


METRICS = ("recall", "accuracy_all", "forgotten_relationships", "forgotten_biographies", "best_set", "target_forgotten")


@pytest.fixture(scope="module")
def eval_pair(finetuned_pair, tmp_path_factory):
    one = finetuned_pair[0]
    root = tmp_path_factory.mktemp("ddp_eval")
    _ok(_dukb(["evaluate", "--finetuned", str(one), "-o", str(root / "single"), *EVAL]))
    proc = _dukb(["evaluate", "--finetuned", str(one), "-o", str(root / "multi"), *EVAL], nproc=2)
    _ok(proc)
    return root / "single", root / "multi", proc


def test_distributed_evaluate_equals_single_process(eval_pair):
    single, multi, proc = eval_pair
    a, b = _keyed(single), _keyed(multi)
    assert len(a) == 3 * (2 + 2) and a.keys() == b.keys()
    for k in a:
        for m in METRICS:
            assert a[k][m] == b[k][m], (k, m)
    assert not list(multi.glob("results.rank*.jsonl"))  # merged into results.jsonl, shards removed
    assert json.loads((multi / "config.json").read_text())["world_size"] == 2
    # the targets were split: both processes logged target lines, and the row order is the single run's
    assert "[rank 0/2] target" in proc.stderr and "[rank 1/2] target" in proc.stderr
    assert list(a) == list(b)
    assert (multi / "summary.csv").read_text() == (single / "summary.csv").read_text()


def test_resume_from_shards_left_by_a_killed_run(eval_pair, tmp_path):
    single, multi, _ = eval_pair
    run = tmp_path / "run"
    run.mkdir()
    for name in ("config.json", "sets.json"):
        shutil.copy(multi / name, run / name)
    rows = [json.loads(x) for x in (multi / "results.jsonl").read_text().splitlines()]
    first = rows[0]["target"]
    kept = [dict(r, seconds_unlearn=-1.0) for r in rows if r["target"] == first]  # marks rows that must not be redone
    # process 1 wrote some rows and was killed mid-line; process 0 wrote nothing yet
    (run / "results.rank1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept) + '{"target": 1')
    finetuned = json.loads((multi / "config.json").read_text())["finetuned"]
    _ok(_dukb(["evaluate", "--finetuned", finetuned, "-o", str(run), "--resume", *EVAL]))
    assert not list(run.glob("results.rank*.jsonl"))
    got = _keyed(run)
    want = _keyed(single)
    assert got.keys() == want.keys()
    assert sum(r["seconds_unlearn"] == -1.0 for r in got.values()) == len(kept)  # read, not recomputed
    for k in got:
        for m in METRICS:
            assert got[k][m] == want[k][m]


def test_single_process_commands_refuse_a_multi_process_launch(monkeypatch, capsys):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    assert main(["probe", "--kb", "demo", "--model", "x", "-o", "y.csv"]) == 2
    err = capsys.readouterr().err
    assert "dukb probe" in err and "single process" in err and "Traceback" not in err
    assert main(["closure", "--kb", "demo"]) == 2


def test_process_device_under_a_launcher(monkeypatch):
    import torch

    from dukb import InputError

    assert dist.process_device("cuda") == "cuda" and not dist.is_distributed()
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    assert dist.process_device("cuda") == "cuda:1"
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)  # CUDA_VISIBLE_DEVICES set per process
    assert dist.process_device("cuda") == "cuda:0"
    assert dist.process_device("cpu") == "cpu" and dist.process_device("mps") == "mps"
    assert not dist.is_main_process()
    with pytest.raises(InputError, match="pins every process"):
        dist.process_device("cuda:0")


def test_mpi_launch_and_timeout_variables(monkeypatch):
    for var in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "3")
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "2")
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0")
    assert (dist.world_size(), dist.rank(), dist.local_rank()) == (3, 2, 0)
    assert dist.timeout_seconds() == 24 * 3600
    monkeypatch.setenv("DUKB_DIST_TIMEOUT", "7200")
    assert dist.timeout_seconds() == 7200


@pytest.mark.parametrize("n_items", [0, 1, 3, 7, 16])
@pytest.mark.parametrize("world", [1, 2, 3, 5])
def test_batch_split_and_shard_partition(n_items, world):
    idx = list(range(100, 100 + n_items))
    parts = [_local_slice(idx, r, world) for r in range(world)]
    assert sum(parts, []) == idx  # contiguous, in order, nothing lost or repeated
    assert max(map(len, parts)) - min(map(len, parts)) <= 1
    shards = [dist.shard(idx, r, world) for r in range(world)]
    assert sorted(sum(shards, [])) == idx


@pytest.mark.parametrize("kind,version", [("FSDP", 1), ("DEEPSPEED", None), ("MEGATRON_LM", None), ("XLA", None)])
def test_unsupported_sharded_launches_are_refused(monkeypatch, kind, version):
    """FSDP version 1 (a wrapper around the model dukb probes), DeepSpeed, Megatron-LM and XLA: refused with a
    clear message, and nothing is cached."""
    import types

    import accelerate

    from dukb import InputError

    class FakeAccelerator:
        def __init__(self, **kw):
            self.distributed_type = types.SimpleNamespace(name=kind)
            self.state = types.SimpleNamespace(fsdp_plugin=types.SimpleNamespace(fsdp_version=version))

    monkeypatch.setattr(dist, "_ACCELERATOR", None)
    monkeypatch.setattr(accelerate, "Accelerator", FakeAccelerator)
    with pytest.raises(InputError, match="DDP.*FSDP2"):
        dist.accelerator("cuda:0")
    assert dist._ACCELERATOR is None


def test_lora_finetuning_under_fsdp_is_refused(monkeypatch):
    """LoRA keeps a whole model per process: refused under an FSDP launch before anything trains."""
    import types

    from dukb import InputError
    from dukb.neural.finetune import finetune
    from dukb.neural.train import TrainConfig

    monkeypatch.setattr(dist, "is_sharded", lambda device="cpu": True)
    lm = types.SimpleNamespace(device="cpu", model=types.SimpleNamespace(peft_config={"default": None}))
    with pytest.raises(InputError, match="LoRA .* without FSDP"):
        finetune(lm, [object()], TrainConfig(epochs=1, batch_size=1))


# accelerate applies FSDP only on GPUs (on CPU processes its state says MULTI_CPU, and `accelerate launch --cpu`
# refuses --use_fsdp); torch's fully_shard itself runs on CPU over gloo. bench/fsdp_cpu.py's --dukb mode creates
# every Accelerator with the state `accelerate launch --use_fsdp --fsdp_version 2` gives on GPUs (plugin options
# from $DUKB_FSDP_PLUGIN), so accelerate's own FSDP2 prepare runs here. The driver also takes SHORT=1 (the tiny
# preset cut to 6 epochs at a rate that ends short of 100%, so the extra epochs and a second prepare run),
# STOP_AT=N (every process leaves right after the N-th checkpoint, as a killed job would) and FSDP_OFF=1 (plain
# dukb in one process, with the same preset).
FSDP_DRIVER = """
import os, sys, runpy
from dukb.neural import finetune as FT
if os.environ.get("SHORT"):
    from dukb.neural.train import TrainConfig
    FT.FINETUNE_PRESETS["tiny"] = TrainConfig(epochs=6, lr=3e-3, batch_size=8, warmup_steps=2, eval_every=2,
                                              extra_epochs=6, extra_lr=1e-3)
stop = int(os.environ.get("STOP_AT", "0"))
if stop:
    saver, saves = FT._Checkpoint.saver, []

    def stopping(self, *a, **kw):
        save = saver(self, *a, **kw)

        def wrapped(epoch, state):
            save(epoch, state)
            saves.append(epoch)
            if len(saves) == stop:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(3)
        return wrapped if save is not None else None
    FT._Checkpoint.saver = stopping
if os.environ.get("FSDP_OFF"):
    from dukb.cli.main import main
    sys.exit(main(sys.argv[1:]))
bench = runpy.run_path(os.environ["FSDP_BENCH"])
sys.exit(bench["dukb_under_fsdp2"](sys.argv[1:]))
"""


def _fsdp(args: list[str], tmp_path, nproc: int = 2, **env) -> subprocess.CompletedProcess:
    driver = tmp_path / "fsdp_driver.py"
    driver.write_text(FSDP_DRIVER)
    root = str(REPO_ROOT)
    env = dict(
        ENV,
        PYTHONPATH=os.pathsep.join([root, ENV.get("PYTHONPATH", "")]),
        FSDP_BENCH=os.path.join(root, "bench", "fsdp_cpu.py"),
        **{k: str(v) for k, v in env.items()},
    )
    cmd = (
        [sys.executable, str(driver), *args]
        if nproc == 1
        else [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc_per_node={nproc}",
            str(driver),
            *args,
        ]
    )
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)


def _answers_like_its_record(model_dir, record: dict) -> None:
    """The saved model loads as an ordinary model and knows the share of the KB its record says."""
    from dukb.kb import load_kb
    from dukb.neural.data import kb_qa
    from dukb.neural.pipeline import load_finetuned
    from dukb.neural.probe import Predictor, probe

    lm = load_finetuned(model_dir, device="cpu")
    known = probe(Predictor(lm.model, lm.tokenizer, lm.tags), kb_qa(load_kb("demo")), rouge=False, logprob=False)[
        "known"
    ]
    assert float(known.mean()) == pytest.approx(record["accuracy"])


def test_fsdp2_finetune_equals_single_process(finetuned_pair, tmp_path):
    """An FSDP2 launch of `dukb finetune` (accelerate's default plugin: the whole model in the root unit) passes
    straight through: per-epoch losses are the single process's to float precision, and the saved model is whole
    (the single process's tensors by name and shape) and answers as its record says."""
    from safetensors.torch import load_file

    one = finetuned_pair[0]
    args = ["finetune", "--kb", "demo", "--epochs", "100", "--device", "cpu", "--seed", "0"]
    proc = _fsdp(args + ["-o", str(tmp_path / "fsdp")], tmp_path)
    said = _finetuned(proc, tmp_path / "fsdp")
    a = json.loads((one / "finetune.json").read_text())
    b = json.loads((tmp_path / "fsdp" / "finetune.json").read_text())
    assert (a["parallelism"], b["parallelism"], b["world_size"]) == ("none", "fsdp2", 2)
    for la, lb in list(zip(a["loss_per_epoch"], b["loss_per_epoch"]))[:10]:
        assert lb == pytest.approx(la, rel=1e-5)
    assert b["accuracy"] >= 0.9 and said == 1
    wa, wb = load_file(one / "model.safetensors"), load_file(tmp_path / "fsdp" / "model.safetensors")
    assert wa.keys() == wb.keys() and all(wa[k].shape == wb[k].shape for k in wa)
    _answers_like_its_record(tmp_path / "fsdp", b)


def test_fsdp2_per_layer_with_activation_checkpointing_runs_extra_epochs_and_resumes(tmp_path):
    """Per-layer units (transformer_based_wrap), accelerate's activation checkpointing and rank-0 loading: the
    losses are one process's, the extra epochs (a second prepare of the sharded model, a new optimiser) run, and a
    run killed after a checkpoint in the extra epochs resumes to the uninterrupted run's losses and weights."""
    import torch
    from safetensors.torch import load_file

    plugin = json.dumps(
        {
            "auto_wrap_policy": "transformer_based_wrap",
            "activation_checkpointing": True,
            "cpu_ram_efficient_loading": True,
        }
    )
    args = ["finetune", "--kb", "demo", "--device", "cpu", "--seed", "0"]
    _finetuned(_fsdp(args + ["-o", str(tmp_path / "one")], tmp_path, nproc=1, SHORT=1, FSDP_OFF=1), tmp_path / "one")
    _finetuned(
        _fsdp(args + ["-o", str(tmp_path / "whole")], tmp_path, SHORT=1, DUKB_FSDP_PLUGIN=plugin), tmp_path / "whole"
    )
    a = json.loads((tmp_path / "one" / "finetune.json").read_text())
    b = json.loads((tmp_path / "whole" / "finetune.json").read_text())
    assert b["parallelism"] == "fsdp2" and a["extra_epochs_run"] >= 2 and b["extra_epochs_run"] >= 2
    assert b["loss_per_epoch"] == pytest.approx(a["loss_per_epoch"], rel=1e-5)
    # checkpoints after epochs 2, 4, 6 of the schedule, then 2 of the extra epochs: killed after that one
    cut = tmp_path / "cut"
    killed = _fsdp(args + ["-o", str(cut)], tmp_path, SHORT=1, DUKB_FSDP_PLUGIN=plugin, STOP_AT=4)
    assert killed.returncode != 0 and (cut / "finetune-checkpoint.pt").is_file()
    proc = _fsdp(args + ["-o", str(cut)], tmp_path, SHORT=1, DUKB_FSDP_PLUGIN=plugin)
    _finetuned(proc, cut)
    c = json.loads((cut / "finetune.json").read_text())
    assert c["resumed_after_epoch"] == 8 and "resuming finetuning from its checkpoint after epoch 8" in proc.stderr
    assert (c["epochs_run"], c["accuracy"]) == (b["epochs_run"], b["accuracy"])
    assert c["loss_per_epoch"] == pytest.approx(b["loss_per_epoch"], rel=1e-6)
    wb, wc = load_file(tmp_path / "whole" / "model.safetensors"), load_file(cut / "model.safetensors")
    assert wb.keys() == wc.keys() and all(torch.allclose(wb[k], wc[k], rtol=1e-5, atol=1e-6) for k in wb)
    assert not (cut / "finetune-checkpoint.pt").exists()
    _answers_like_its_record(cut, c)


def test_evaluate_refuses_an_fsdp_launch(finetuned_pair, tmp_path):
    """evaluate splits targets over processes, each unlearning with a whole model: an FSDP launch is one line,
    exit code 2, and no run directory is written."""
    proc = _fsdp(["evaluate", "--finetuned", str(finetuned_pair[0]), "-o", str(tmp_path / "run"), *EVAL], tmp_path)
    assert proc.returncode != 0
    lines = [x for x in proc.stderr.splitlines() if x.startswith("dukb: error:")]
    assert lines and all("cannot run under FSDP" in x for x in lines) and "Traceback" not in proc.stdout
    assert not (tmp_path / "run" / "results.jsonl").exists()
