"""`dukb evaluate` (its options generated from :class:`dukb.neural.protocols.evaluate.config.EvaluateConfig`),
`dukb report` and `dukb methods`."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer

from dukb import InputError
from dukb.cli.config_file import save_resolved_config
from dukb.cli.declared import declared_command
from dukb.cli.render import keep_rows_note, log_line, on_interrupt, output_path
from dukb.cli.run_options import parse_grids  # noqa: F401  (the --grid parser of every protocol command)
from dukb.neural.protocols import PROTOCOLS
from dukb.neural.protocols.evaluate.config import EvaluateConfig
from dukb.neural.run.files import RunDir


@declared_command(EvaluateConfig)
def evaluate(cfg: EvaluateConfig, output: Path, resume: bool) -> None:
    """Run the paper's deep-unlearning protocol: finetune to 100% of the KB, unlearn every target with every method
    over its grid, probe every fact, score recall/accuracy with the logic core, and write the tables and curves.

    RUN_DIR gets config.json, sets.json, finetuned/, results.jsonl (one row per target, method and setting, written
    at once), report.md (one page: the paper's Table 1/2 rule, what to cite), appendix.md (the other readings, not
    comparable to the paper), summary.csv (every reading, labelled), facts.csv (per-fact ids) and
    accuracy_recall.png/.pdf. With no arguments it runs the built-in default (generated KB, tiny model, 11 targets, GA/NPO/TV/WHP) on CPU.

    A finetuning that ends below 100% does not stop the run (exit 0, unlike `dukb finetune`'s 1): its rows are
    still measurements of that model. One line says so ("finetuning ended at accuracy ..."), a warning follows that
    recall counts facts the model never knew as forgotten, and RUN_DIR/finetune.json records accuracy,
    target_accuracy and reached_target. With --finetuned and no --kb the KB is the one the model was finetuned on.

    Several GPUs: `torchrun --nproc_per_node N -m dukb.cli.main evaluate ...` (or accelerate launch) splits the
    targets over the processes; process 0 merges their rows into results.jsonl.

    A SLURM job array: `--launcher slurm --workers N` submits N workers (`dukb evaluate ... --resume` on RUN_DIR,
    sharing its work units) and a report job after them, through submitit; `--launcher submitit-local` runs them on
    this machine.
    """
    from dukb.neural.distributed import is_main_process
    from dukb.neural.protocols.evaluate import run  # the protocol's entry point (patchable there)

    if cfg.launcher not in (None, "local"):  # --workers workers on RUN_DIR through submitit, then a report job
        from dukb.cli.launch_cmd import submit

        return submit(cfg, output, resume)
    on_interrupt(keep_rows_note(output))
    run.evaluate(output, cfg, resume=resume, progress=True, log=log_line)
    if is_main_process():
        save_resolved_config(output)
        typer.echo(f"report: {output / 'report.md'}")


#: `dukb report`'s renderer of each protocol's run: config.json's "protocol" -> (module, function), from the protocol
#: registry (:data:`dukb.neural.protocols.PROTOCOLS`). Each renders from the run directory's files alone (no model)
#: and returns a dict whose "report" is report.md's path.
RENDERERS = {name: tuple(p.render.split(":")) for name, p in PROTOCOLS.items()}


def _run_protocol(run_dir: Path) -> str:
    """The protocol of the run in ``run_dir`` from its config.json ("evaluate" for an evaluate run written before
    config.json named its protocol, or one with results.jsonl alone).

    Raises:
        InputError: not a directory, nothing to render, an unreadable config.json (not UTF-8, not JSON, nested too
            deeply, not an object), a "protocol" that is not a string, or an unknown protocol.
    """
    import os

    from dukb.kb.csvfile import read_bytes
    from dukb.neural.run.files import RUN_JSON_BYTES, json_problem

    if not run_dir.is_dir():
        raise InputError("not a run directory" if run_dir.exists() else "no such run directory", run_dir)
    config = RunDir(run_dir).config
    if not os.path.lexists(config):
        if os.path.lexists(RunDir(run_dir).results):
            return "evaluate"
        raise InputError("not a run directory: neither config.json nor results.jsonl is here", run_dir)
    data = read_bytes(config, "run config", limit=RUN_JSON_BYTES)  # a FIFO, device or folder: one line naming it
    try:
        doc, problem, _ = json_problem(data.decode("utf-8"))  # nested too deeply included: one line, no traceback
    except ValueError as e:  # not UTF-8
        doc, problem = None, f"{type(e).__name__}: {e}"
    if problem:
        raise InputError(f"not a readable run config ({problem})", config)
    if not isinstance(doc, dict):
        raise InputError("not a run config (expected a JSON object)", config)
    protocol = doc.get("protocol", "evaluate")
    if not isinstance(protocol, str):
        raise InputError(
            f'not a run config: its "protocol" is a JSON {_json_type(protocol)}, not a string '
            f"(one of {', '.join(RENDERERS)})",
            config,
        )
    if protocol not in RENDERERS:
        raise InputError(f"cannot render a {protocol!r} run: `dukb report` renders {', '.join(RENDERERS)} runs", config)
    return protocol


def _blank_file(path: Path, chunk: int = 1 << 20) -> bool:
    """Whether ``path`` is a regular file holding nothing but blank lines (whitespace), read until its first other
    byte. Anything else (a link, a FIFO, a device, a folder, an unreadable file) is False: the renderer's bounded
    reader reports it.

    Args:
        path: the file (a run's results.jsonl).
        chunk: bytes read at a time.

    Returns:
        True for an empty or all-blank regular file.

    Raises:
        Nothing.
    """
    import os
    import stat

    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return False
        with open(path, "rb") as fh:
            while True:
                data = fh.read(chunk)
                if not data:
                    return True
                if data.strip():
                    return False
    except OSError:
        return False


def _json_type(value: object) -> str:
    """The JSON name of a parsed value's type: object, array, string, number, boolean or null."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return {dict: "object", list: "array", str: "string"}.get(type(value), "number")


def _why(e: Exception) -> str:
    """A short reason for a run whose files the renderer cannot use."""
    if isinstance(e, KeyError):
        return f"a row or file lacks the field {e.args[0]!r}" if e.args else "a field is missing"
    if isinstance(e, (TypeError, AttributeError)):
        return f"a row or file holds a field of another type than this dukb writes ({type(e).__name__}: {e})"
    return f"{type(e).__name__}: {e}"


def report(
    run_dir: Path = typer.Argument(
        ...,
        parser=output_path,
        help="A run directory written by `dukb evaluate`, `dukb muse`, `dukb rwku`, `dukb control` or `dukb restor`.",
    ),
) -> None:
    """Re-render a run's summary.csv, report.md and figures from its files alone (no model), by the protocol its
    config.json names: evaluate's accuracy_recall.png, muse's scalability/sustainability/ROC figures, rwku's
    aa_kinds.png and batch_targets.png, control's ps_curves.png and risk_curves.png, restor's states.csv and
    states_<METHOD>.png. A run it cannot render gives one line `dukb: error: ...` and exit 2."""
    import importlib
    import os

    protocol = _run_protocol(run_dir)
    if protocol != "restor" and not os.path.lexists(RunDir(run_dir).results):
        raise InputError(f"no results.jsonl here (a {protocol} run that has written no rows yet)", run_dir)
    if protocol in ("evaluate", "muse", "rwku") and _blank_file(RunDir(run_dir).results):
        raise InputError(
            f"no result rows yet: the file is empty (the {protocol} run has written no rows yet)",
            RunDir(run_dir).results,
        )
    if protocol == "restor":  # its renderer writes these whole: nothing but a regular file may stand in their place
        from dukb.neural.run.files import output_file

        for out in [run_dir / n for n in ("states.csv", "summary.csv", "report.md")] + sorted(
            run_dir.glob("states_*.png")
        ):
            output_file(out)
    module, name = RENDERERS[protocol]
    render = getattr(importlib.import_module(module), name)
    try:
        paths = render(run_dir)
    except (InputError, OSError):
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, ZeroDivisionError) as e:
        raise InputError(f"cannot render this {protocol} run: {_why(e)}", run_dir) from None
    missing = paths.get("missing_units") or []
    if missing:
        what = "(request, method, setting)" if protocol == "rwku" else "(target, method, setting)"
        shown = ", ".join(
            "("
            + ", ".join(
                f"{x:g}" if isinstance(x, float) else ("before" if x == "" else str(x)) for x in unit if x is not None
            )
            + ")"
            for unit in missing[:8]
        )
        typer.echo(
            f"{len(missing)} units have no row yet {what}: {shown}" + (", ..." if len(missing) > 8 else ""), err=True
        )
    unfinished = paths.get("unfinished_units") or []
    if unfinished:
        what = {"muse": "(request, method)", "control": "(ratio, method)"}.get(protocol, "")
        empty = "θ_o" if protocol == "control" else "reference"
        shown = ", ".join("(" + ", ".join(empty if x == "" else str(x) for x in unit) + ")" for unit in unfinished[:8])
        typer.echo(
            f"{len(unfinished)} work units {what} are not finished: {shown}" + (", ..." if len(unfinished) > 8 else ""),
            err=True,
        )
    typer.echo(f"report: {paths['report']}")


class TableFormat(str, Enum):
    """`dukb methods --format`: rich tables for the terminal, or markdown."""

    table = "table"
    markdown = "markdown"


def methods(
    fmt: TableFormat = typer.Option(
        TableFormat.table,
        "--format",
        help="table: tables drawn for the terminal, wrapped to its width; markdown: the "
        "docs' reference tables as markdown.",
    ),
) -> None:
    """List every registered unlearning method, preset, forget scope and model family, the metrics, the attacks,
    the protocols and the options every protocol takes (generated from the registries: the same tables as the docs'
    reference pages)."""
    from dukb.cli.reference import reference_tables

    tables = [t for page in reference_tables().values() for t in page]
    if fmt == TableFormat.markdown:
        typer.echo("\n\n".join(t.markdown() for t in tables))
        return
    from dukb.cli.render import print_tables

    print_tables(tables)


def register(app: typer.Typer) -> None:
    """Add evaluate, report and methods to the app."""
    app.command("evaluate")(evaluate)
    app.command("report")(report)
    app.command("methods")(methods)
