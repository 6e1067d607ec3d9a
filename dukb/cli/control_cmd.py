"""`dukb control`: the Unlearning-with-Control protocol on a KB (thin: the options are generated from
:class:`dukb.neural.protocols.control.config.ControlConfig`; run, render)."""

from __future__ import annotations

from pathlib import Path

import typer

from dukb.cli.config_file import save_resolved_config
from dukb.cli.declared import declared_command
from dukb.cli.render import keep_rows_note, log_line, on_interrupt
from dukb.neural.protocols.control.config import ControlConfig


@declared_command(ControlConfig)
def control(cfg: ControlConfig, output: Path, resume: bool) -> None:
    """Run the evaluation framework of "Unlearning with Control" (Wang et al. 2024) on a KB: θ_o finetuned on every
    fact; per forget ratio and method, the uncontrolled run and each control (OC, ES, MM) calibrated on a coarse
    then a fine grid so that PS-exact and PS-perturb on retain-eval stay ≥ 90% and PS-similar on the forget set ≥
    50% of θ_o's, selecting the lowest PS-exact on the forget set; plus the deep-unlearning recall of every
    selected model.

    RUN_DIR gets config.json, splits.json (forget, retain-train and retain-eval fact ids), sets.json,
    results.jsonl (one row per model, written at once), summary.csv, report.md (the paper's 6-number PS vector per
    method and control) and ps_curves.png, risk_curves.png.
    """
    from dukb.neural.protocols.control import run  # the protocol's entry point (patchable there)

    on_interrupt(keep_rows_note(output))
    run.run_control(output, cfg, resume=resume, progress=True, log=log_line)
    save_resolved_config(output)
    typer.echo(f"report: {output / 'report.md'}")


def register(app: typer.Typer) -> None:
    """Add control to the app."""
    app.command("control")(control)
