"""`dukb control`: the Unlearning-with-Control protocol on a KB (thin: parse, call, render)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from dukb import InputError
from dukb.cli.render import output_path, keep_rows_note, log_line, on_interrupt
from dukb.neural.protocols.control.config import CONTROL_KINDS, CONTROL_METHODS, RATIOS, SELECTIONS
from dukb.cli.config_file import CONFIG_OPTION, save_resolved_config
from dukb.cli.run_options import (HELDOUT_RULE_OPTION, heldout_forms_option, method_items, parse_forms, ranged,
                                  run_options, split_items)
from dukb.neural import bounds as B


def _floats(text: str, name: str) -> list[float]:
    """Comma-separated decimal numbers (:func:`dukb.neural.bounds.decimal_problem`: no ``_``, ``nan``, ``inf``),
    each a share in (0, 1) (:data:`dukb.neural.bounds.FRACTION_OPEN`).

    Raises:
        InputError: an empty item, a value that is not such a number or outside (0, 1).
    """
    from dukb.neural.bounds import decimal_problem

    out = []
    for x in split_items(text, name):
        if decimal_problem("value", x):
            raise InputError(f"{name} must be comma-separated numbers, got {text!r}")
        out.append(float(x))
        B.FRACTION_OPEN.check(name, out[-1])
    return out


@run_options
def control(
    config: Optional[Path] = CONFIG_OPTION,
    methods: str = typer.Option(",".join(CONTROL_METHODS), "--methods", help="Comma-separated gradient methods "
                                "(the paper's GA, GD = ga_gdr, KL = ga_klr and PO by default; any method swept "
                                "over steps, e.g. npo, simnpo, dpo, rt)."),
    controls: str = typer.Option(",".join(CONTROL_KINDS), "--controls", help="Controls of excessive unlearning: "
                                 "oc (objective capping: the unlearning risk capped at τ), es (early stopping at "
                                 "step T of one run), mm (model mixing (1−α)θ_o + αθ_u)."),
    ratios: str = typer.Option(",".join(f"{r:g}" for r in RATIOS), "--ratios", help="Forget ratios of the KB's "
                               "facts (1%, 5%, 10% by default); the forget sets are nested relationship facts."),
    steps: int = ranged(B.STEPS, 16, "--steps", help="Steps T of the uncontrolled run; the length of OC and MM runs "
                              "and the largest ES step."),
    tau_max: Optional[float] = ranged(B.TAU, None, "--tau-max", help="Top of OC's τ grid (nats per token; default: "
                                            "the largest unlearning risk of the method's uncontrolled run)."),
    coarse: int = ranged(B.GRID_INTERVALS, 10, "--coarse",
                         help="Intervals of the coarse grid over each control's range."),
    fine: int = ranged(B.GRID_INTERVALS, 10, "--fine",
                       help="Intervals of the fine grid over ±1 coarse step around the best "
                             "coarse value."),
    retain_eval: int = ranged(B.RETAIN_EVAL, 400, "--retain-eval",
                              help="Facts in retain-eval D_t,eval (never trained on "
                                    "by any method; the paper: 400)."),
    selection: str = typer.Option("full", "--selection", help="full: all three floors; cheap: the PS-exact "
                                  "(retain-eval) floor alone (App. G). " + ", ".join(SELECTIONS) + "."),
    search: str = typer.Option("bisection", "--search", help="PS search over the prefix length: bisection or "
                               "linear."),
    sets: str = typer.Option("exact", "--sets", help="exact | random minimal deep unlearning sets for DU recall."),
    heldout_forms: Optional[str] = heldout_forms_option(
        "every model is also judged on (the *_heldout fields and the report's held-out DU columns)",
        "the forms a method of the run trains on or queries (qa, and reverse for rt) and the calibration's "
        "(qa, paraphrase)"),
    heldout_rule: str = HELDOUT_RULE_OPTION,
    output: Path = typer.Option(Path("runs/control"), "-o", "--output", parser=output_path, metavar="PATH", help="Run directory."),
    resume: bool = typer.Option(False, "--resume", help="Continue a run in the same directory; refused (exit 2, "
                                "differing keys named) when a row-changing setting differs; methods, controls "
                                "and ratios may be added."),
    run_opts: dict = None,
) -> None:
    """Run the evaluation framework of "Unlearning with Control" (Wang et al. 2024) on a KB: θ_o finetuned on every
    fact; per forget ratio and method, the uncontrolled run and each control (OC, ES, MM) calibrated on a coarse
    then a fine grid so that PS-exact and PS-perturb on retain-eval stay ≥ 90% and PS-similar on the forget set ≥
    50% of θ_o's, selecting the lowest PS-exact on the forget set; plus the deep-unlearning recall of every
    selected model.

    RUN_DIR gets config.json, splits.json (forget, retain-train and retain-eval fact ids), sets.json,
    results.jsonl (one row per model, written at once), summary.csv, report.md (the paper's 6-number PS vector per
    method and control) and ps_curves.png, risk_curves.png.
    """
    from dukb.neural.protocols.control.config import ControlConfig
    from dukb.neural.protocols.control.run import run_control  # the public entry point (patchable there)

    cfg = ControlConfig(**run_opts, methods=method_items(methods),
                        controls=split_items(controls, "--controls", known=CONTROL_KINDS),
                        ratios=_floats(ratios, "--ratios"), steps=steps, tau_max=tau_max, coarse=coarse, fine=fine,
                        retain_eval=retain_eval, selection=selection, search=search, sets=sets,
                        heldout_forms=parse_forms(heldout_forms, "--heldout-forms"), heldout_rule=heldout_rule)
    on_interrupt(keep_rows_note(output))
    run_control(output, cfg, resume=resume, progress=True, log=log_line)
    save_resolved_config(output)
    typer.echo(f"report: {output / 'report.md'}")


def register(app: typer.Typer) -> None:
    """Add control to the app."""
    app.command("control")(control)
