"""`dukb rwku`: RWKU's evaluation on a KB (thin: the options are generated from
:class:`dukb.neural.protocols.rwku.config.RwkuConfig`; run, render)."""

from __future__ import annotations

from pathlib import Path

import typer

from dukb.cli.config_file import save_resolved_config
from dukb.cli.declared import declared_command
from dukb.cli.render import keep_rows_note, log_line, on_interrupt
from dukb.neural.protocols.rwku.config import RwkuConfig


@declared_command(RwkuConfig)
def rwku(cfg: RwkuConfig, output: Path, resume: bool) -> None:
    """Run RWKU's evaluation (Jin et al. 2024) on a KB: forget probes FB (cloze), QA and the nine adversarial kinds
    (AA), scored by ROUGE-L recall; neighbour facts (about the forget facts' people, outside the targets' cone)
    apart from distant ones; MIA on forget members (FM) against retain members (RM) with LOSS, Zlib, Min-K% and
    Min-K%++; single-target and batch-target requests; and deep unlearning's recall and recall under attack for every
    unlearned model. Methods unlearn from a synthetic description corpus of the forget facts (RWKU's setting); every
    probe and MIA member is evaluation-only.

    RUN_DIR gets config.json, requests.json (each request's targets, forget set, cone and neighbour fact ids),
    finetuned/, results.jsonl (a "before" row and one row per method and setting for each request), summary.csv,
    report.md (RWKU's Table 1 layout, leaks per adversarial kind) and aa_kinds.png, batch_targets.png.
    """
    from dukb.neural.protocols.rwku import run  # the protocol's entry point (patchable there)

    on_interrupt(keep_rows_note(output))
    run.run_rwku(output, cfg, resume=resume, progress=True, log=log_line)
    save_resolved_config(output)
    typer.echo(f"report: {output / 'report.md'}")


def register(app: typer.Typer) -> None:
    """Add rwku to the app."""
    app.command("rwku")(rwku)
