"""Launchers of `dukb evaluate` (`--launcher local|submitit-local|slurm`, :mod:`dukb.neural.launch`) and the claims'
leases: a background heartbeat renews a live worker's claims, and a claim whose heartbeat stopped is taken over
after :data:`dukb.neural.run.units.CLAIM_TIMEOUT`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from conftest import DEVICE
from dukb.neural.run import units
from dukb.neural.run.units import UnitClaims


def test_a_claim_is_a_lease_its_heartbeat_renews(tmp_path, monkeypatch):
    """Without a lock that can be checked (another node, no shared flock: simulated by no fcntl), a live worker's
    claim stays its own however long its unit runs (the heartbeat renews it), and a claim whose heartbeat stopped
    (its node died) is taken over once it has been silent for the timeout."""
    monkeypatch.setattr(units, "fcntl", None)
    monkeypatch.setattr(units, "CLAIM_TIMEOUT", 0.6)
    far, near = UnitClaims(tmp_path, "far:1", heartbeat=0.1), UnitClaims(tmp_path, "near:2", heartbeat=0.1)
    assert far.timeout == 0.6
    assert far.claim((1, "ga"))
    time.sleep(1.5)  # 2.5 timeouts without a row: the heartbeat kept the lease
    assert not near.claim((1, "ga"))
    assert time.time() - os.stat(far.path((1, "ga"))).st_mtime < 0.5
    far._stop.set()  # the node dies: no more heartbeats (its lock file stays, as on a node that vanished)
    far._beat.join()
    assert not near.claim((1, "ga"))  # renewed less than a timeout ago
    time.sleep(1.0)
    assert near.claim((1, "ga")) and near.state((1, "ga"))["worker"] == "near:2"
    far.close()
    near.close()


def test_a_done_unit_is_no_longer_renewed(tmp_path, monkeypatch):
    monkeypatch.setattr(units, "fcntl", None)
    a = UnitClaims(tmp_path, "a:1", heartbeat=0.05)
    assert a.claim((2, "tv"))
    a.done((2, "tv"))
    old = time.time() - 100
    os.utime(a.path((2, "tv")), (old, old))
    time.sleep(0.3)
    assert os.stat(a.path((2, "tv"))).st_mtime == pytest.approx(old, abs=1)  # done: not renewed
    a.close()
    assert not a._beat.is_alive()


@pytest.mark.parametrize(
    "args, says",
    [
        (["--launcher", "pbs"], "--launcher 'pbs' is not one of local, submitit-local, slurm"),
        (
            ["--launcher", "slurm", "--workers", "0"],
            "Invalid value for '--workers': Input should be greater than or equal to 1",
        ),
    ],
)
def test_a_launch_that_cannot_run_is_refused_in_one_line(tmp_path, capsys, args, says):
    from dukb.cli.main import main

    assert main(["evaluate", "--kb", "demo", "-o", str(tmp_path / "run"), *args]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"dukb: error: {says}")
    assert not (tmp_path / "run").exists()


def test_a_launcher_without_submitit_is_refused(tmp_path, capsys, monkeypatch):
    from dukb.cli.main import main

    monkeypatch.setitem(sys.modules, "submitit", None)  # import submitit raises ImportError
    assert main(["evaluate", "--kb", "demo", "-o", str(tmp_path / "run"), "--launcher", "submitit-local"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == 'dukb: error: --launcher submitit-local needs submitit: pip install "dukb[slurm]"'


def _dukb(*args: str, path: str, calls=None) -> subprocess.CompletedProcess:
    """`dukb ARGS` in a child interpreter with PATH set (the SLURM commands it finds), so that submitit's loggers
    and the launch never touch the test process's captured streams."""
    env = {**os.environ, "PATH": path, "OMP_NUM_THREADS": "1", **({"CALLS": str(calls)} if calls else {})}
    return subprocess.run(
        [sys.executable, "-m", "dukb.cli.main", *args], capture_output=True, text=True, timeout=600, env=env
    )


def test_slurm_without_sbatch_is_refused(tmp_path):
    pytest.importorskip("submitit")
    empty = tmp_path / "bin"
    empty.mkdir()  # no SLURM commands on PATH
    r = _dukb("evaluate", "--kb", "demo", "-o", str(tmp_path / "run"), "--launcher", "slurm", path=str(empty))
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines() == [
        "dukb: error: --launcher slurm needs SLURM's sbatch and srun on PATH: run it where jobs are submitted (a "
        "login node), or use --launcher submitit-local"
    ]
    assert not (tmp_path / "run").exists()


FAKE_SBATCH = """#!/bin/sh
n=$(ls "$CALLS" | wc -l)
for a in "$@"; do [ -f "$a" ] && cp "$a" "$CALLS/$n.sh"; done
echo "Submitted batch job $((4242 + n))"
"""


def test_slurm_submits_a_worker_array_then_a_report_job_after_it(tmp_path):
    """With a stand-in sbatch (it records each batch script): one array of --workers workers, each running
    `dukb evaluate --config RUN/launch/worker.yaml -o RUN --resume` with the --slurm-* options, then `dukb report
    RUN` depending on the array (afterany), without the workers' GPUs."""
    pytest.importorskip("submitit")
    bin_, calls, run = tmp_path / "bin", tmp_path / "calls", tmp_path / "run"
    bin_.mkdir()
    calls.mkdir()
    (bin_ / "sbatch").write_text(FAKE_SBATCH)
    (bin_ / "srun").write_text("#!/bin/sh\nexit 0\n")
    for f in bin_.iterdir():
        f.chmod(0o755)
    r = _dukb(
        "evaluate",
        "--kb",
        "demo",
        "--n-targets",
        "2",
        "-o",
        str(run),
        "--launcher",
        "slurm",
        "--workers",
        "3",
        "--slurm-partition",
        "gpu",
        "--slurm-gpus-per-task",
        "1",
        "--slurm-time",
        "12:00:00",
        path=f"{bin_}{os.pathsep}{os.environ['PATH']}",
        calls=calls,
    )
    assert r.returncode == 0, r.stderr
    workers, report = (calls / "0.sh").read_text(), (calls / "1.sh").read_text()
    for line in (
        "#SBATCH --array=0-2",
        "#SBATCH --partition=gpu",
        "#SBATCH --gpus-per-task=1",
        "#SBATCH --time=12:00:00",
    ):
        assert line in workers, line
    assert "#SBATCH --dependency=afterany:4242\n" in report and "--partition=gpu" in report
    assert "gpus-per-task" not in report and "--array" not in report
    assert yaml_of(run / "launch" / "worker.yaml") == {"kb": "demo", "n-targets": 2}
    assert "submitted 3 workers (slurm): jobs 4242_0, 4242_1, 4242_2" in r.stderr
    assert not (run / "results.jsonl").exists()  # nothing ran here


def yaml_of(path):
    """The options a worker.yaml gives beyond the defaults every command records."""
    import yaml

    doc = yaml.safe_load(path.read_text())
    assert not {"launcher", "workers", "output"} & set(doc) and not any(k.startswith("slurm") for k in doc)
    return {k: doc[k] for k in ("kb", "n-targets")}


def test_the_library_refuses_fewer_than_one_worker():
    from dukb import InputError
    from dukb.neural.launch import LaunchOptions, check_launch

    with pytest.raises(InputError, match="--workers 0 is below 1"):
        check_launch(LaunchOptions(launcher="slurm", workers=0))
    check_launch(LaunchOptions())  # local, one worker: nothing to refuse


def test_the_launcher_options_reach_submitit(tmp_path):
    """--launcher-config's parameters, then the --slurm-* options (they win), and a default time limit."""
    from dukb.neural.launch import LaunchOptions, executor_parameters

    conf = tmp_path / "slurm.yaml"
    conf.write_text("slurm_partition: long\nslurm_additional_parameters: {account: lab}\ntimeout_min: 30\n")
    got = executor_parameters(
        LaunchOptions(
            launcher="slurm",
            workers=3,
            slurm_partition="gpu",
            slurm_mem="32G",
            slurm_gpus_per_task=1,
            launcher_config=conf,
        )
    )
    assert got == {
        "timeout_min": 30,
        "slurm_partition": "gpu",
        "slurm_additional_parameters": {"account": "lab"},
        "slurm_mem": "32G",
        "slurm_gpus_per_task": 1,
    }
    conf.write_text("- not a mapping\n")
    from dukb import InputError

    with pytest.raises(InputError, match="a launcher config is a YAML mapping"):
        executor_parameters(LaunchOptions(launcher="slurm", launcher_config=conf))


@pytest.mark.slow
def test_submitit_local_workers_give_a_one_process_runs_rows(tmp_path):
    """`--launcher submitit-local --workers 2`: two workers (submitit's LocalExecutor) share the run's units, a
    report job renders the report after them, and the rows equal a one-process run's (keys and retained facts)."""
    pytest.importorskip("torch")
    pytest.importorskip("submitit")
    from dukb.cli.main import main

    run, solo = tmp_path / "run", tmp_path / "solo"
    opts = ["--kb", "demo", "--n-targets", "2", "--methods", "ga", "--grid", "ga=1", "--device", DEVICE]
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "dukb.cli.main",
            "evaluate",
            *opts,
            "-o",
            str(run),
            "--launcher",
            "submitit-local",
            "--workers",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=1200,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert r.returncode == 0, r.stderr
    assert "submitted 2 workers (submitit-local)" in r.stderr and f"report: {run / 'report.md'}" in r.stdout
    assert (run / "report.md").is_file() and (run / "launch" / "worker.yaml").is_file()
    roles = [line.split("\t")[1] for line in (run / "commands.log").read_text().splitlines()]
    assert len(roles) == 2 and roles[0] == "owner"  # both workers ran on the one run directory
    assert main(["evaluate", *opts, "-o", str(solo), "--finetuned", str(run / "finetuned")]) == 0

    def rows(path):
        out = {}
        for line in (path / "results.jsonl").read_text().splitlines():
            row = json.loads(line)
            key = (row["target"], row["method"], json.dumps(row["setting"], sort_keys=True))
            assert key not in out  # every unit once
            out[key] = (
                row["recall"],
                row["accuracy_all"],
                row["forgotten_relationships"],
                row["forgotten_biographies"],
            )
        return out

    got, want = rows(run), rows(solo)
    assert len(want) == 2 and got == want
    assert all(json.loads(p.read_text())["done"] for p in (run / ".dukb" / "units").glob("*.claim"))
