"""`dukb muse`: MUSE's six-way evaluation on a KB (thin: parse, call, render)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from dukb import InputError
from dukb.cli.evaluate_cmd import parse_grids
from dukb.cli.render import output_path, keep_rows_note, log_line, on_interrupt
from dukb.cli.symbolic import option_int, read_targets_in_kb
from dukb.neural.catalog import methods_help, selection_rules
from dukb.neural.protocols.muse.config import CURVE_METHODS, MUSE_METHODS
from dukb.cli.config_file import CONFIG_OPTION, save_resolved_config
from dukb.cli.run_options import method_items, ranged, run_options
from dukb.neural import bounds as B


def _ints(text: str, name: str) -> list[int]:
    """Comma-separated integers, each ``-?[0-9]+`` in ASCII (:func:`dukb.cli.symbolic.option_int`), from 1 to
    :data:`dukb.neural.bounds.N_TARGETS`'s bound (they count targets).

    Raises:
        InputError: ``<name> must be comma-separated integers, got ...`` (an empty item included); a value
            outside the range.
    """
    try:
        if text.strip() and any(not x.strip() for x in text.split(",")):
            raise InputError(text)
        values = [option_int(x, name) for x in text.split(",") if x.strip()]
    except InputError:
        raise InputError(f"{name} must be comma-separated integers (the digits 0-9 and a leading '-', no empty "
                         f"item), got {text!r}") from None
    for v in values:
        B.N_TARGETS.check(name, v)
    return values


@run_options(model="Base model finetuned into f_target and every f_retrain: 'tiny', smollm2-135m, a .gguf file, "
                   "hub id or directory.",
             finetuned="Use this directory as f_target (e.g. a released target model) instead of finetuning it; "
                       "its training must leave out the holdout facts of RUN/splits.json (MIA non-members). "
                       "f_retrain is still finetuned from --model.")
def muse(
    config: Optional[Path] = CONFIG_OPTION,
    targets_file: Optional[Path] = typer.Option(None, "--targets-file", help="Targets, one relationship fact_id "
                                                "per line ('#' comments); the first --n-targets form the main "
                                                "request, the first c the scalability request of size c."),
    n_targets: int = ranged(B.N_TARGETS, 1, "--n-targets", help="Targets of the main request (Table 3)."),
    methods: str = typer.Option(",".join(MUSE_METHODS), "--methods", help="Comma-separated methods of the main "
                                "table (MUSE's eight by default). " + methods_help()),
    curve_methods: str = typer.Option(",".join(CURVE_METHODS), "--curve-methods", help="Gradient methods of the "
                                      "scalability (C5) and sustainability (C6) experiments."),
    scale_sizes: str = typer.Option("1,2,4,8,16", "--scale-sizes", help="C5 forget-set sizes in targets (each a "
                                    "joint deep unlearning set, nested); also the cumulative sizes of C6's "
                                    "sequential requests. Empty: no C5/C6."),
    sustain: bool = typer.Option(True, "--sustain/--no-sustain", help="Run C6's sequential requests."),
    grid: Optional[list[str]] = typer.Option(None, "--grid", help="METHOD=v1,v2,... overrides a method's grid "
                                             "(repeatable)."),
    forget_scope: str = typer.Option("joint", "--forget-scope", help="joint: a minimum joint deep unlearning set "
                                     "of the request's targets (f_retrain cannot re-derive them); target: the "
                                     "targets alone."),
    holdout: float = ranged(B.FRACTION_OPEN, 0.1, "--holdout",
                            help="Share of the KB's facts held out of every finetuning "
                                  "(MIA non-members), drawn outside the targets' cones."),
    retain_train: float = ranged(B.FRACTION_OPEN, 0.5, "--retain-train",
                                 help="Share of the trained facts in retain_train "
                                       "(the regulariser's data); the rest is retain_eval (utility)."),
    mia_k: float = ranged(B.FRACTION_HALF, 0.4, "--mia-k",
                          help="Min-K% share of lowest-probability tokens (MIA, PrivLeak); "
                                "0.4 as MUSE's code (Min-40%)."),
    verbmem_prefix: float = ranged(B.FRACTION_OPEN, 0.5, "--verbmem-prefix",
                                   help="VerbMem prompt: this share of each forget "
                                         "text's tokens (the paper gives no value)."),
    verbmem_tokens: int = ranged(B.NEW_TOKENS, 128, "--verbmem-tokens",
                                 help="VerbMem continuation budget in tokens, and "
                                       "how much of the true continuation it is scored against (MUSE: 128)."),
    verbmem_stemming: bool = typer.Option(False, "--verbmem-stemming", help="Stem words before VerbMem's ROUGE-L "
                                          "(MUSE's code does not)."),
    verbmem_temperature: float = ranged(B.TEMPERATURE, 0.0, "--verbmem-temperature",
                                        help="VerbMem decoding: 0 = greedy, "
                                              "> 0 = sampling at this temperature (seeded)."),
    select: str = typer.Option("first_below_retrain", "--select", help="Setting reported per method (and continued "
                               "from in C6): " + ", ".join(selection_rules()) + " (first_below_retrain: MUSE's "
                               "utility rule, the first setting whose utility is below f_retrain's, else the "
                               "last)."),
    bootstrap: int = ranged(B.BOOTSTRAP, 9999, "--bootstrap", help="Bootstrap resamples of the 95% intervals."),
    run_opts: dict = None,
    output: Path = typer.Option(Path("runs/muse"), "-o", "--output", parser=output_path, metavar="PATH", help="Run directory."),
    resume: bool = typer.Option(False, "--resume", help="Continue a run in the same directory; refused (exit 2, "
                                "differing keys named) when a row-changing setting differs; methods and "
                                "requests may be added."),
) -> None:
    """Run MUSE's six-way evaluation (Shi et al. 2024b) on a KB: f_target (finetuned on the QA pairs and statement
    sentences of every fact but a holdout), f_retrain (the same without the forget set, cached per forget set),
    every method from f_target unlearning the statement texts alone (the QA pairs are evaluation-only), and per
    model VerbMem (C1), KnowMem on forget (C2), PrivLeak with Min-K% against f_retrain (C3) and KnowMem on
    retain_eval (C4); scalability over forget-set sizes (C5) and sequential requests (C6).

    RUN_DIR gets config.json, splits.json (every split's fact ids), models/, results.jsonl (one row per model:
    model_kind target, retrain or unlearned), summary.csv, report.md (Table 3 layout, ratios to f_retrain, 95%
    bootstrap intervals) and scalability.png, sustainability.png, mia_roc.png.
    """
    from dukb.neural.protocols.muse.config import MuseConfig
    from dukb.neural.protocols.muse.run import run_muse  # the public entry point (patchable there)

    # every fact_id checked against the KB before a model is loaded: an unknown one is reported at FILE:LINE
    targets = read_targets_in_kb(targets_file, run_opts["kb"]) if targets_file else None
    cfg = MuseConfig(**run_opts, targets=targets, n_targets=n_targets,
                     methods=method_items(methods), curve_methods=method_items(curve_methods, "--curve-methods"),
                     grids=parse_grids(grid), scale_sizes=_ints(scale_sizes, "--scale-sizes"), sustain=sustain,
                     forget_scope=forget_scope, holdout_frac=holdout, retain_train_frac=retain_train, mia_k=mia_k,
                     verbmem_prefix=verbmem_prefix, verbmem_tokens=verbmem_tokens, verbmem_stemming=verbmem_stemming,
                     verbmem_temperature=verbmem_temperature, select=select, bootstrap=bootstrap)
    on_interrupt(keep_rows_note(output))
    run_muse(output, cfg, resume=resume, progress=True, log=log_line)
    save_resolved_config(output)
    typer.echo(f"report: {output / 'report.md'}")


def register(app: typer.Typer) -> None:
    """Add muse to the app."""
    app.command("muse")(muse)
