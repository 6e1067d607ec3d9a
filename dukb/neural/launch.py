"""Launchers of a run's workers (`dukb evaluate --launcher local|submitit-local|slurm --workers N`): the options,
declared once (:func:`dukb.neural.declare.option`, none in the run identity: a launcher changes no row), and the
submission of N workers on one run directory plus a report job through submitit.

Each worker runs the same ``dukb evaluate --config RUN_DIR/launch/worker.yaml -o RUN_DIR --resume``: the first owns
the run, the others join it as workers and claim (target, method) units (:class:`dukb.neural.run.units.UnitClaims`),
so a job array needs no process group; the report job (``dukb report RUN_DIR``) runs once every worker ended
(SLURM: ``--dependency=afterany`` on the array; the local executor: once their processes ended).

Torch-free (a config module imports it). Source: dukb (work units any launcher can run); submitit's job arrays
(facebookincubator/submitit, ``executor.batch()``).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from dukb import InputError
from dukb.neural.bounds import Range
from dukb.neural.declare import RUN, option

#: ``--launcher`` values: this process (as without the option), submitit's LocalExecutor (processes on this
#: machine, waited for), submitit's SlurmExecutor (a job array and a report job; the command returns once submitted)
LAUNCHERS = ("local", "submitit-local", "slurm")
#: the submitit cluster of each launcher other than "local"
CLUSTERS = {"submitit-local": "local", "slurm": "slurm"}
#: the folder of RUN_DIR holding the workers' config (worker.yaml) and submitit's job files and logs
LAUNCH_DIR = "launch"
#: a job's time limit (minutes) unless --slurm-time or the launcher config sets one (submitit's default is 5 min for
#: SLURM, 2 min for its local executor)
DEFAULT_TIMEOUT_MIN = 24 * 60
#: the documented ranges of the launcher's numeric options
WORKERS = Range(1, 100_000, why="workers started on the run directory")
GPUS_PER_TASK = Range(0, 1024)
CPUS_PER_TASK = Range(1, 4096)
_PANEL = "Launcher options"
_RUN = dict(group=RUN, identity=False, panel=_PANEL)


@dataclass
class LaunchOptions:
    """How a run's workers are started (mixed into a protocol's config; none of these is in the run identity).

    Attributes:
        launcher: one of :data:`LAUNCHERS` (None: "local"; unset options stay out of RUN_DIR/config.yaml).
        workers: how many workers a launcher other than "local" starts (at least 1; None: 1).
        slurm_partition, slurm_time, slurm_gpus_per_task, slurm_cpus_per_task, slurm_mem: ``sbatch``'s
            ``--partition``, ``--time`` (minutes or ``[D-]HH:MM:SS``), ``--gpus-per-task``, ``--cpus-per-task``,
            ``--mem`` (e.g. ``32G``) of every job (None: not passed).
        launcher_config: a YAML mapping of submitit executor parameters (``AutoExecutor.update_parameters``:
            ``timeout_min``, ``slurm_partition``, ``slurm_additional_parameters``, ...), applied before the options
            above.
    """

    launcher: str | None = option(
        None,
        choices=LAUNCHERS,
        **_RUN,
        help="Where the workers run: local (this process; the default), submitit-local "
        "(--workers processes on this machine through submitit), slurm (a SLURM job "
        "array of --workers workers through submitit, then a job that renders the "
        "report).",
    )
    workers: int | None = option(
        None,
        range=WORKERS,
        **_RUN,
        help="Workers a launcher other than local starts on the run directory (default 1); "
        "each claims (target, method) units, so rows do not depend on their number.",
    )
    slurm_partition: str | None = option(None, **_RUN, help="sbatch --partition of every job.")
    slurm_time: str | None = option(
        None, **_RUN, help="sbatch --time of every job (minutes or [D-]HH:MM:SS; default 24 h)."
    )
    slurm_gpus_per_task: int | None = option(
        None, range=GPUS_PER_TASK, **_RUN, help="sbatch --gpus-per-task of every worker."
    )
    slurm_cpus_per_task: int | None = option(
        None, range=CPUS_PER_TASK, **_RUN, help="sbatch --cpus-per-task of every job."
    )
    slurm_mem: str | None = option(None, **_RUN, help="sbatch --mem of every job (e.g. 32G).")
    launcher_config: Path | None = option(
        None,
        cli_type="path",
        **_RUN,
        help="YAML mapping of submitit executor parameters (timeout_min, "
        "slurm_partition, slurm_additional_parameters, ...), applied before "
        "the --slurm-* options.",
    )


def check_launch(cfg: LaunchOptions) -> None:
    """Refuse a launch that cannot run, in one line, before anything is submitted.

    Raises:
        InputError: an unknown launcher, ``workers`` < 1, submitit missing for a launcher that needs it, or (slurm)
            SLURM's ``sbatch`` or ``srun`` not on PATH.
    """

    if cfg.launcher is not None and cfg.launcher not in LAUNCHERS:
        raise InputError(f"--launcher {cfg.launcher!r} is not one of {', '.join(LAUNCHERS)}")
    if cfg.workers is not None and (not isinstance(cfg.workers, int) or cfg.workers < 1):
        raise InputError(f"--workers {cfg.workers} is below 1: give the number of workers to start")
    if cfg.launcher not in (None, "local"):
        try:
            import submitit  # noqa: F401
        except ImportError:
            raise InputError(f'--launcher {cfg.launcher} needs submitit: pip install "dukb[slurm]"') from None
    if cfg.launcher == "slurm" and not (shutil.which("sbatch") and shutil.which("srun")):
        raise InputError(
            "--launcher slurm needs SLURM's sbatch and srun on PATH: run it where jobs are submitted "
            "(a login node), or use --launcher submitit-local"
        )


def executor_parameters(cfg: LaunchOptions) -> dict:
    """submitit ``AutoExecutor.update_parameters`` arguments of ``cfg``: a time limit (:data:`DEFAULT_TIMEOUT_MIN`),
    the launcher config file's, then the ``--slurm-*`` options given.

    Raises:
        InputError: the launcher config is unreadable or not a mapping of names (named).
    """

    params: dict = {"timeout_min": DEFAULT_TIMEOUT_MIN}
    if cfg.launcher_config is not None:
        path = Path(cfg.launcher_config)
        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
            raise InputError(
                f"not a readable launcher config ({type(e).__name__}: {e})".splitlines()[0], path
            ) from None
        if doc is not None and (not isinstance(doc, dict) or not all(isinstance(k, str) for k in doc)):
            raise InputError("a launcher config is a YAML mapping of submitit executor parameters", path)
        params.update(doc or {})
    given = {
        "slurm_partition": cfg.slurm_partition,
        "slurm_time": cfg.slurm_time,
        "slurm_gpus_per_task": cfg.slurm_gpus_per_task,
        "slurm_cpus_per_task": cfg.slurm_cpus_per_task,
        "slurm_mem": cfg.slurm_mem,
    }
    params.update({k: v for k, v in given.items() if v is not None})
    return params


def make_executor(cfg: LaunchOptions, folder: Path, gpus: bool = True):
    """A submitit ``AutoExecutor`` for ``cfg.launcher`` writing its job files and logs under ``folder``; with
    ``gpus`` False, without the GPU parameters (the report job renders files only).

    Raises:
        InputError: submitit refuses a parameter (its message, with the launcher config named when one is given).
    """
    import submitit

    try:
        executor = submitit.AutoExecutor(folder=folder, cluster=CLUSTERS[cfg.launcher])
    except RuntimeError as e:  # e.g. SLURM's commands not found
        raise InputError(f"submitit cannot start the {cfg.launcher} executor: {e}") from None
    params = executor_parameters(cfg)
    if not gpus:
        params = {k: v for k, v in params.items() if "gpu" not in k and k != "slurm_gres"}
    try:
        executor.update_parameters(**params)
    except (ValueError, NameError, TypeError, AssertionError) as e:
        raise InputError(
            f"submitit refuses the launcher parameters: {str(e).splitlines()[0] if str(e) else e!r}",
            cfg.launcher_config,
        ) from None
    return executor


def launch(cfg: LaunchOptions, worker_cmd: list[str], report_cmd: list[str], folder: Path, log=print) -> dict:
    """Submit ``cfg.workers`` workers running ``worker_cmd`` (one job array), then a report job (without GPUs) running
    ``report_cmd`` once they ended: on SLURM it depends on the array (``afterany``) and this returns at once; with
    the local executor this waits for the workers, then for the report job.

    Args:
        cfg: the launch options (checked by :func:`check_launch`).
        worker_cmd, report_cmd: argument vectors (a worker's ``dukb evaluate ... --resume``, ``dukb report``).
        folder: where submitit writes its job files and logs (RUN_DIR/launch).
        log: callable(str) for one line per submission.

    Returns:
        {"workers": [job ids], "report": job id, "failed": [job ids of workers that failed] (local only)}.

    Raises:
        InputError: submitit refuses the parameters, or (local) the report job failed (its log named).
    """

    from submitit.helpers import CommandFunction

    executor = make_executor(cfg, folder)
    try:
        with executor.batch():
            jobs = [executor.submit(CommandFunction(worker_cmd, verbose=False)) for _ in range(cfg.workers or 1)]
    except (OSError, RuntimeError, subprocess.SubprocessError) as e:  # sbatch refused the array
        raise InputError(
            f"submitting the workers failed: {str(e).strip().splitlines()[-1] if str(e).strip() else e!r}", folder
        ) from None
    ids = [j.job_id for j in jobs]
    log(f"submitted {len(jobs)} workers ({cfg.launcher}): jobs {', '.join(ids)}; logs in {folder}")
    failed = []
    executor = make_executor(cfg, folder, gpus=False)
    if cfg.launcher == "slurm":
        array = str(ids[0]).split("_")[0]
        extra = dict(executor_parameters(cfg).get("slurm_additional_parameters") or {})
        executor.update_parameters(slurm_additional_parameters={**extra, "dependency": f"afterany:{array}"})
    else:
        for job in jobs:
            job.wait()
            if job.exception() is not None:
                failed.append(job.job_id)
        if failed:
            log(f"workers {', '.join(failed)} failed (their logs are in {folder}); the report covers the rows written")
    report = executor.submit(CommandFunction(report_cmd, verbose=False))
    log(f"submitted the report job {report.job_id} (after the workers)")
    if cfg.launcher != "slurm":
        report.wait()
        if report.exception() is not None:
            raise InputError(f"the report job failed: see its log {report.paths.stderr}")
    return {"workers": ids, "report": report.job_id, "failed": failed}


__all__ = [
    "CLUSTERS",
    "DEFAULT_TIMEOUT_MIN",
    "LAUNCHERS",
    "LAUNCH_DIR",
    "LaunchOptions",
    "check_launch",
    "executor_parameters",
    "launch",
    "make_executor",
]
