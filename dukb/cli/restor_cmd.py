"""`dukb restor`: RESTOR-style clean -> corrupted -> unlearned models, fact states and rule-aware judging.

Thin layer over :mod:`dukb.neural.restor`: the options are generated from
:class:`dukb.neural.restor.config.RestorConfig` (torch, transformers and clingo are imported inside the command)."""

from __future__ import annotations

from pathlib import Path

import typer

from dukb import InputError
from dukb.cli.config_file import save_resolved_config
from dukb.cli.declared import declared_command
from dukb.cli.render import keep_rows_note, log_line, on_interrupt
from dukb.neural.restor.config import RestorConfig


def parse_method_values(
    option: str, values: list[str] | None, integer: bool = False, chosen: list[str] | None = None
) -> dict:
    """Parse repeated ``METHOD=VALUE`` options (e.g. ``--lambda kl=5``); ``all=VALUE`` sets every chosen method
    (ga, kl and npo when ``chosen`` is None).

    Args:
        option: the option's name, for messages (its range: :data:`dukb.neural.restor.config.METHOD_VALUE_RANGES`).
        values: the raw values.
        integer: parse the values as integers.
        chosen: the run's methods (``--methods``): a value for another method would be ignored, so it is refused.

    Returns:
        dict method -> value.

    Raises:
        InputError: malformed item, unknown or wrongly-cased method, a method not in ``chosen``, a method given
            twice, a value not a number (strictly: no ``_``, ``nan`` or ``inf``) or outside the option's range.
    """
    from dukb.neural.bounds import decimal_problem
    from dukb.neural.restor import RESTOR_METHODS
    from dukb.neural.restor.config import METHOD_VALUE_RANGES

    given: set = set()

    out: dict = {}
    for v in values or []:
        name, sep, val = v.partition("=")
        if not sep or not val.strip() or name != name.strip() or val != val.strip():
            raise InputError(f"{option} {v!r} is not METHOD=VALUE (no spaces around '=')")
        if name.lower() != name and name.lower() in (*RESTOR_METHODS, "all"):
            raise InputError(f"{option}: unknown method {name!r}; did you mean {name.lower()!r}?")
        names = list(chosen or RESTOR_METHODS) if name == "all" else [name]
        if name != "all" and name not in RESTOR_METHODS:
            raise InputError(f"{option}: unknown method {name!r} (choose from {', '.join(RESTOR_METHODS)}, all)")
        if chosen is not None and name != "all" and name not in chosen:
            raise InputError(
                f"{option} {v!r}: {name} is not in --methods ({', '.join(chosen)}); its value would be ignored"
            )
        try:
            if integer:  # int() also takes 1_0, +1 and full-width digits
                from dukb.kb.csvfile import strict_int

                num = strict_int(val.strip())
                if num is None:
                    raise ValueError(val)
            else:
                if decimal_problem("value", val):
                    raise ValueError(val)
                num = float(val)
        except ValueError:
            raise InputError(f"{option} {v!r}: {val!r} is not {'an integer' if integer else 'a number'}") from None
        METHOD_VALUE_RANGES[option].check(f"{option} {name}", num)
        for n in names:
            if n in given:
                raise InputError(f"{option}: a value for {n} is given twice")
            given.add(n)
            out[n] = num
    return out


def _method_values(value, flag, f, parsed):
    """``--lambda``, ``--unlearn-lr``, ``--unlearn-epochs``: :func:`parse_method_values` for the run's methods."""
    return parse_method_values(flag, value, integer=f.name == "unlearn_epochs", chosen=parsed["methods"])


@declared_command(RestorConfig, parsers={"method_values": _method_values})
def restor(cfg: RestorConfig, output: Path) -> None:
    """RESTOR-style restorative-unlearning analysis with exact, rule-aware judging.

    Finetunes a clean model on the KB, corrupts it by training on documents that state plausible wrong values for
    a share of the facts (F'), unlearns those documents with GA, KL and NPO (each with a retain term), probes
    every fact on all models and judges each answer exactly against the KB as the true value, the injected value
    or other. Reports RESTOR's fact states (Recovery/Forget/Unchanged over A, Degraded/Unaffected over B), accuracy
    per relation, log-probabilities of true/injected/random answers over A, and a rule-aware analysis of each
    model's beliefs (derived contradictions; corrupted facts still derivable after unlearning).

    RUN_DIR gets config.json, corruption/, clean/, corrupted/, probes/, results.jsonl (one line per method, appended
    as it finishes), states.csv, summary.csv, report.md (RESTOR Tables 1-3 layout) and states_<METHOD>.png.
    """
    from dukb.neural.restor.pipeline import run_restor  # the public entry point (patchable there)

    if output.exists() and not output.is_dir():
        raise InputError("-o must be a directory, not a file", output)
    on_interrupt(
        keep_rows_note(output, "run the same command again to continue (finished stages and methods are skipped)")
    )
    paths = run_restor(output, cfg, log=log_line)
    save_resolved_config(output)
    typer.echo(f"report: {paths['report']}")


def register(app: typer.Typer) -> None:
    """Add `restor` to the app (its help text reflowed paragraph by paragraph)."""
    import inspect

    paragraphs = [" ".join(p.split()) for p in inspect.cleandoc(restor.__doc__ or "").split("\n\n")]
    app.command("restor", help="\n\n".join(paragraphs))(restor)
