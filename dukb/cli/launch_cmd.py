"""`dukb evaluate --launcher submitit-local|slurm`: the workers' command and the submission
(:mod:`dukb.neural.launch`)."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

import typer

from dukb import InputError
from dukb.cli.config_file import _current_context, resolved_options
from dukb.neural.launch import LAUNCH_DIR, LaunchOptions, check_launch, launch
from dukb.neural.run.files import RunDir

#: the command's parameters that describe the launch, not the run (left out of the workers' config)
_LAUNCH_PARAMS = tuple(f.name for f in dataclasses.fields(LaunchOptions)) + ("output",)


def submit(cfg: LaunchOptions, output: Path, resume: bool, command: str = "evaluate") -> None:
    """Write RUN_DIR/launch/worker.yaml (this invocation's options but the launcher's), then submit the workers
    (``dukb COMMAND --config worker.yaml -o RUN_DIR --resume``) and the report job (``dukb report RUN_DIR``).

    Raises:
        InputError: a refused launch (:func:`dukb.neural.launch.check_launch`), results in RUN_DIR without
            ``resume``, or the worker config cannot be written.
    """
    import yaml

    from dukb.neural.run.files import write_bytes_atomic

    check_launch(cfg)
    output = Path(os.path.abspath(output))
    if not resume and os.path.lexists(RunDir(output).results):
        raise InputError(f"{output} already holds results; pass --resume to continue it or choose another -o")
    folder = output / LAUNCH_DIR
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"cannot create the launch folder ({e.strerror})", folder) from None
    options = resolved_options(_current_context(), exclude=_LAUNCH_PARAMS)
    worker_yaml = folder / "worker.yaml"
    write_bytes_atomic(
        worker_yaml,
        (
            "# the workers' options (written by --launcher)\n"
            + yaml.safe_dump(options, sort_keys=False, allow_unicode=True)
        ).encode(),
    )
    dukb = [sys.executable, "-m", "dukb.cli.main"]
    worker = [*dukb, command, "--config", str(worker_yaml), "-o", str(output), "--resume"]
    done = launch(cfg, worker, [*dukb, "report", str(output)], folder, log=lambda line: typer.echo(line, err=True))
    if cfg.launcher == "slurm":
        typer.echo(f"report (once job {done['report']} ran): {output / 'report.md'}")
    else:
        typer.echo(f"report: {output / 'report.md'}")
