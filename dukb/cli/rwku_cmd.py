"""`dukb rwku`: RWKU's evaluation on a KB (thin: parse, call, render)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from dukb.cli.evaluate_cmd import parse_grids
from dukb.cli.muse_cmd import _ints
from dukb.cli.render import output_path, keep_rows_note, log_line, on_interrupt
from dukb.cli.symbolic import read_targets_in_kb
from dukb.neural.catalog import methods_help
from dukb.neural.protocols.rwku.config import RWKU_METHODS
from dukb.cli.config_file import CONFIG_OPTION, save_resolved_config
from dukb.cli.run_options import method_items, ranged, run_options
from dukb.neural import bounds as B


@run_options(finetuned="Use this already finetuned model directory (its tokenizer must know the description "
                       "corpus's words).")
def rwku(
    config: Optional[Path] = CONFIG_OPTION,
    targets_file: Optional[Path] = typer.Option(None, "--targets-file", help="Targets, one relationship fact_id per "
                                                "line ('#' comments): one single-target request each; the first N "
                                                "form the batch request of size N."),
    n_targets: int = ranged(B.N_TARGETS, 11, "--n-targets",
                            help="Without --targets-file: single-target requests, drawn "
                                  "relation kinds in turn."),
    methods: str = typer.Option(",".join(RWKU_METHODS), "--methods", help="Comma-separated. " + methods_help()),
    grid: Optional[list[str]] = typer.Option(None, "--grid", help="METHOD=v1,v2,... overrides a method's grid "
                                             "(repeatable)."),
    batch_sizes: str = typer.Option("2,4,8", "--batch-sizes", help="Batch-target requests: the first N targets "
                                    "unlearned at once (RWKU's batch setting). Empty: none."),
    forget_scope: str = typer.Option("target", "--forget-scope", help="target: the targets alone (RWKU); joint: a "
                                     "minimum joint deep unlearning set of them."),
    mia_k: float = ranged(B.FRACTION_HALF, 0.2, "--mia-k", help="Min-K% share of lowest-probability tokens."),
    output: Path = typer.Option(Path("runs/rwku"), "-o", "--output", parser=output_path, metavar="PATH",
                                help="Run directory."),
    resume: bool = typer.Option(False, "--resume", help="Continue a run in the same directory; refused (exit 2, "
                                "differing keys named) when a row-changing setting differs; targets and methods "
                                "may be added."),
    run_opts: dict = None,
) -> None:
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
    from dukb.neural.protocols.rwku.config import RwkuConfig
    from dukb.neural.protocols.rwku.run import run_rwku  # the public entry point (patchable there)

    # every fact_id checked against the KB before a model is loaded: an unknown one is reported at FILE:LINE
    targets = read_targets_in_kb(targets_file, run_opts["kb"]) if targets_file else None
    cfg = RwkuConfig(**run_opts, targets=targets, n_targets=n_targets,
                     methods=method_items(methods), grids=parse_grids(grid),
                     batch_sizes=_ints(batch_sizes, "--batch-sizes"), forget_scope=forget_scope, mia_k=mia_k)
    on_interrupt(keep_rows_note(output))
    run_rwku(output, cfg, resume=resume, progress=True, log=log_line)
    save_resolved_config(output)
    typer.echo(f"report: {output / 'report.md'}")


def register(app: typer.Typer) -> None:
    """Add rwku to the app."""
    app.command("rwku")(rwku)
