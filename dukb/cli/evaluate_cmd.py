"""`dukb evaluate` and `dukb report`."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from dukb import InputError
from dukb.cli.render import output_path, keep_rows_note, log_line, on_interrupt
from dukb.neural.catalog import attack_names, default_metrics, methods_help, metrics_help
from dukb.neural.protocols import PROTOCOLS
from dukb.neural.protocols.evaluate.config import DEFAULT_METHODS, RECOMMENDED
from dukb.solver.scopes import FORGET_SCOPES
from dukb.cli.symbolic import option_int, read_targets_in_kb
from dukb.cli.config_file import CONFIG_OPTION, save_resolved_config
from dukb.cli.run_options import (HELDOUT_RULE_OPTION, heldout_forms_option, method_items, parse_forms, ranged,
                                  run_options, split_items)
from dukb.neural import bounds as B


def parse_grids(values: list[str] | None) -> dict[str, list]:
    """Parse repeated ``--grid METHOD=v1,v2`` options.

    Raises:
        InputError: malformed option (spaces around ``=``, an empty value ``1,,2``), an unknown or wrongly-cased
            method (the right name suggested, :func:`dukb.cli.run_options.method_items`), a method given twice, a
            value of an integer grid (steps) that is not ``-?[0-9]+`` in ASCII (:func:`dukb.cli.symbolic.option_int`),
            or a value outside its range (:data:`dukb.neural.bounds.GRID_STEPS`,
            :data:`~dukb.neural.bounds.GRID_VALUE`).
    """
    from dukb.neural.methods import parse_grid, resolve

    out: dict[str, list] = {}
    for v in values or []:
        if "=" not in v:
            raise InputError(f"--grid {v!r} is not METHOD=v1,v2,...")
        name, vals = v.rsplit("=", 1)  # the last "=": a label may carry options (``ga:lr=5e-4=2,4``)
        if name != name.strip() or vals != vals.strip() or not name:
            raise InputError(f"--grid {v!r} is not METHOD=v1,v2,... (no spaces around '=')")
        if any(not part.strip() for part in vals.split(",")):
            raise InputError(f"--grid {v!r} has an empty value; separate the values by single commas")
        method_items(name, "--grid")
        label, m, _scope, _g = resolve(name)
        integer = m.param == "steps"
        if integer:  # parse_grid reads with int(), which also takes 1_0, +1 and full-width digits
            for part in vals.split(","):
                if part.strip():
                    option_int(part, f"--grid {name.strip()} value")
        exact = "@" in name or ":" in name or name.strip().lower() == label
        key = label if exact else m.name
        if key in out:
            raise InputError(f"--grid {key} is given twice")
        out[key] = parse_grid(vals, integer=integer)
        rng = B.GRID_STEPS if integer else B.GRID_VALUE
        for x in out[key]:
            rng.check(f"--grid {name} value", x)
    return out


@run_options
def evaluate(
    config: Optional[Path] = CONFIG_OPTION,
    targets_file: Optional[Path] = typer.Option(None, "--targets-file", help="Targets: one relationship fact_id per "
                                                "line ('#' comments)."),
    n_targets: int = ranged(B.N_TARGETS, 11, "--n-targets",
                            help="Without --targets-file: draw this many targets, relation "
                                  "kinds in turn (11 = one per kind; 55 = the paper's 5 per kind)."),
    methods: str = typer.Option(",".join(DEFAULT_METHODS), "--methods",
                                help="Comma-separated. " + methods_help() + f" Recommended: {RECOMMENDED}."),
    forget_scope: str = typer.Option("target", "--forget-scope", help="Forget set of methods without @SCOPE: "
                                     + "; ".join(f"{s.name}: {s.summary}" for s in FORGET_SCOPES.values()) + "."),
    metrics: str = typer.Option(",".join(default_metrics()), "--metrics", help="Comma-separated metrics to compute "
                                "(required ones are added; probing computes only what they need). "
                                + metrics_help() + "."),
    grid: Optional[list[str]] = typer.Option(None, "--grid", help="METHOD=v1,v2,... overrides a method's grid "
                                             "(repeatable)."),
    heldout_forms: Optional[str] = heldout_forms_option(
        "every row is also scored on (recall_heldout)",
        "the forms a method trains on or queries (probe_forms_seen: qa, and more for rt and the multi-form "
        "CL-DU variants)"),
    heldout_rule: str = HELDOUT_RULE_OPTION,
    finetune_forms: str = typer.Option("qa", "--finetune-forms", help="Probe forms the model is finetuned on "
                                       "(comma-separated kinds or groups; default qa, the paper's). Adding forms "
                                       "such as paraphrase,cloze,synonym,reverse makes the model know the facts "
                                       "under forms the methods never see, so the held-out scores test the fact, "
                                       "not the wording."),
    sets: str = typer.Option("exact", "--sets", help="exact | random minimal deep unlearning sets for recall."),
    seeds: int = ranged(B.N_SEEDS, 100, "--seeds", help="N_seed for random sets."),
    output: Path = typer.Option(Path("runs/evaluate"), "-o", "--output", parser=output_path, metavar="PATH",
                                help="Run directory."),
    resume: bool = typer.Option(False, "--resume", help="Continue a run in the same directory, skipping finished "
                                "rows. Refused (exit 2, differing keys named) when any setting that changes rows "
                                "differs from the run's; targets and methods may be added."),
    schedule: str = typer.Option("reference", "--schedule", help="How the step grid T of gradient methods (ga, "
                                 "npo, ...) is run. reference (default): as Eval-DU's code (wrh14/deep_unlearning "
                                 "forget.py), one run of the grid's largest T steps from the finetuned model, read "
                                 "at every T, HF's linear schedule with 1 warm-up step (learning rate 0 at step 1) "
                                 "decaying over that run, AdamW with weight decay 0.01, and npo on Eval-DU's "
                                 "500-token EOS-padded layout; a resume may add grid values below the largest only. "
                                 "separate: each T its own run from the finetuned model, the rate decaying "
                                 "linearly over its T steps, no warm-up or weight decay (dukb's earlier runs). "
                                 "Presets (du_*) keep their own (separate)."),
    attacks: Optional[str] = typer.Option(None, "--attacks", help="Attacks applied to every unlearned model right "
                                          "after its probe, comma-separated NAME or NAME:key=value:... (" +
                                          ", ".join(attack_names()) + "; `dukb attack --help` lists their "
                                          "settings). Each row gets an `attacks` entry per attack (recall, "
                                          "accuracy_all, success_du, forgotten_relationships, target_known, "
                                          "settings); recall_under_attack becomes the worst case over forms and "
                                          "attacks. Part of the run identity."),
    run_opts: dict = None,
) -> None:
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
    """
    from dukb.neural.distributed import is_main_process
    from dukb.neural.protocols.evaluate.config import EvaluateConfig

    cfg = EvaluateConfig(**run_opts, n_targets=n_targets,
                         methods=method_items(methods), grids=parse_grids(grid),
                         sets=sets, seeds=seeds, forget_scope=forget_scope,
                         metrics=split_items(metrics, "--metrics"),
                         heldout_forms=parse_forms(heldout_forms, "--heldout-forms"), heldout_rule=heldout_rule,
                         finetune_forms=list(parse_forms(finetune_forms, "--finetune-forms")), schedule=schedule,
                         attacks=split_items(attacks, "--attacks", known=attack_names())).check()
    # every fact_id checked against the KB before a model is loaded: an unknown one is reported at FILE:LINE
    cfg.targets = read_targets_in_kb(targets_file, run_opts["kb"]) if targets_file else None
    on_interrupt(keep_rows_note(output))
    # imported once the options are checked (the run module loads torch); patchable there
    from dukb.neural.protocols.evaluate.run import evaluate as run_evaluate

    run_evaluate(output, cfg, resume=resume, progress=True, log=log_line)
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
    config = run_dir / "config.json"
    if not os.path.lexists(config):
        if os.path.lexists(run_dir / "results.jsonl"):
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
        raise InputError(f"not a run config: its \"protocol\" is a JSON {_json_type(protocol)}, not a string "
                         f"(one of {', '.join(RENDERERS)})", config)
    if protocol not in RENDERERS:
        raise InputError(f"cannot render a {protocol!r} run: `dukb report` renders {', '.join(RENDERERS)} runs",
                         config)
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


def report(run_dir: Path = typer.Argument(..., parser=output_path,
                                          help="A run directory written by `dukb evaluate`, `dukb muse`, "
                                          "`dukb rwku`, `dukb control` or `dukb restor`.")) -> None:
    """Re-render a run's summary.csv, report.md and figures from its files alone (no model), by the protocol its
    config.json names: evaluate's accuracy_recall.png, muse's scalability/sustainability/ROC figures, rwku's
    aa_kinds.png and batch_targets.png, control's ps_curves.png and risk_curves.png, restor's states.csv and
    states_<METHOD>.png. A run it cannot render gives one line `dukb: error: ...` and exit 2."""
    import importlib

    import os

    protocol = _run_protocol(run_dir)
    if protocol != "restor" and not os.path.lexists(run_dir / "results.jsonl"):
        raise InputError(f"no results.jsonl here (a {protocol} run that has written no rows yet)", run_dir)
    if protocol in ("evaluate", "muse", "rwku") and _blank_file(run_dir / "results.jsonl"):
        raise InputError(f"no result rows yet: the file is empty (the {protocol} run has written no rows yet)",
                         run_dir / "results.jsonl")
    if protocol == "restor":  # its renderer writes these whole: nothing but a regular file may stand in their place
        from dukb.neural.run.files import output_file

        for out in [run_dir / n for n in ("states.csv", "summary.csv", "report.md")] \
                + sorted(run_dir.glob("states_*.png")):
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
        shown = ", ".join("(" + ", ".join(f"{x:g}" if isinstance(x, float) else ("before" if x == "" else str(x))
                                          for x in unit if x is not None) + ")" for unit in missing[:8])
        typer.echo(f"{len(missing)} units have no row yet {what}: {shown}" + (", ..." if len(missing) > 8 else ""),
                   err=True)
    unfinished = paths.get("unfinished_units") or []
    if unfinished:
        what = {"muse": "(request, method)", "control": "(ratio, method)"}.get(protocol, "")
        empty = "θ_o" if protocol == "control" else "reference"
        shown = ", ".join("(" + ", ".join(empty if x == "" else str(x) for x in unit) + ")" for unit in unfinished[:8])
        typer.echo(f"{len(unfinished)} work units {what} are not finished: {shown}"
                   + (", ..." if len(unfinished) > 8 else ""), err=True)
    typer.echo(f"report: {paths['report']}")


class TableFormat(str, Enum):
    """`dukb methods --format`: rich tables for the terminal, or markdown."""

    table = "table"
    markdown = "markdown"


def methods(
    fmt: TableFormat = typer.Option(TableFormat.table, "--format",
                                    help="table: tables drawn for the terminal, wrapped to its width; markdown: the "
                                         "docs' reference tables as markdown."),
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
