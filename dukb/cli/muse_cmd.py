"""`dukb muse`: MUSE's six-way evaluation on a KB (thin: the options are generated from
:class:`dukb.neural.protocols.muse.config.MuseConfig`; run, render)."""

from __future__ import annotations

from pathlib import Path

import typer

from dukb.cli.config_file import save_resolved_config
from dukb.cli.declared import declared_command
from dukb.cli.render import keep_rows_note, log_line, on_interrupt
from dukb.neural.protocols.muse.config import MuseConfig


@declared_command(MuseConfig)
def muse(cfg: MuseConfig, output: Path, resume: bool) -> None:
    """Run MUSE's six-way evaluation (Shi et al. 2024b) on a KB: f_target (finetuned on the QA pairs and statement
    sentences of every fact but a holdout), f_retrain (the same without the forget set, cached per forget set),
    every method from f_target unlearning the statement texts alone (the QA pairs are evaluation-only), and per
    model VerbMem (C1), KnowMem on forget (C2), PrivLeak with Min-K% against f_retrain (C3) and KnowMem on
    retain_eval (C4); scalability over forget-set sizes (C5) and sequential requests (C6).

    RUN_DIR gets config.json, splits.json (every split's fact ids), models/, results.jsonl (one row per model:
    model_kind target, retrain or unlearned), summary.csv, report.md (Table 3 layout, ratios to f_retrain, 95%
    bootstrap intervals) and scalability.png, sustainability.png, mia_roc.png.
    """
    from dukb.neural.protocols.muse import run  # the protocol's entry point (patchable there)

    on_interrupt(keep_rows_note(output))
    run.run_muse(output, cfg, resume=resume, progress=True, log=log_line)
    save_resolved_config(output)
    typer.echo(f"report: {output / 'report.md'}")


def register(app: typer.Typer) -> None:
    """Add muse to the app."""
    app.command("muse")(muse)
