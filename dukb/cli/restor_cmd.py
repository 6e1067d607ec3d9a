"""`dukb restor`: RESTOR-style clean -> corrupted -> unlearned models, fact states and rule-aware judging.

Thin layer over :mod:`dukb.neural.restor` (torch, transformers and clingo are imported inside the command)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from dukb import InputError
from dukb.cli.render import output_path, keep_rows_note, log_line, on_interrupt
from dukb.cli.config_file import CONFIG_OPTION, save_resolved_config
from dukb.cli.probes import MAX_DOCS_PER_ENTITY
from dukb.cli.run_options import device_option, dtype_option, ranged, split_items
from dukb.neural.catalog import document_methods
from dukb.neural import bounds as B


def parse_method_values(option: str, values: list[str] | None, integer: bool = False,
                        chosen: list[str] | None = None) -> dict:
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
            raise InputError(f"{option} {v!r}: {name} is not in --methods ({', '.join(chosen)}); its value would "
                             "be ignored")
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


def restor(
    config: Optional[Path] = CONFIG_OPTION,
    kb: str = typer.Option(..., "--kb", help="KB directory (people.csv, relationships.csv, biographies.csv) or a "
                           "built-in KB name."),
    model: str = typer.Option("tiny", "--model", help="'tiny' (built for the KB, its vocabulary covering the QA, "
                              "the true-fact sentences and the corruption documents), a known short name "
                              "(smollm2-135m), a .gguf file or a folder holding one, an HF hub id or a directory."),
    corrupt_fraction: float = ranged(B.FRACTION_HALF, 0.24, "--corrupt",
                                     help="Share of the facts to corrupt (F'), 5 per "
                                           "chosen person; RESTOR corrupts about 250 of 1,051 facts (0.24)."),
    context: int = ranged(B.CONTEXT, 5, "--context", help="k: correct facts about other people per corruption document "
                                "(RESTOR's k counts batches of 5: k_RESTOR = context / 5)."),
    docs_per_entity: int = typer.Option(20, "--docs-per-entity", min=1, max=MAX_DOCS_PER_ENTITY,
                                        help="Corruption documents per corrupted person, 1 to "
                                        f"{MAX_DOCS_PER_ENTITY:,} (RESTOR: about 60 per incorrect fact)."),
    methods: str = typer.Option("ga,kl,npo", "--methods", help="Comma-separated unlearning methods: ga, kl, npo."),
    targeted: bool = typer.Option(False, "--targeted", help="Unlearn only the incorrect-fact sentences of each "
                                  "document (RESTOR's k=0 forget set)."),
    seed: int = ranged(B.SEED, 0, "--seed", help="Seed: corruption, tiny model, data order, sampling, retain set."),
    lora_r: int = ranged(B.LORA_R, 8, "--lora-r", help="LoRA rank of corruption and unlearning, on all linear layers "
                               "(RESTOR: LoRA, rank 8 by LLaMA-Factory's default); 0 = full finetuning."),
    lora_alpha: Optional[int] = ranged(B.LORA_ALPHA, None, "--lora-alpha", help="LoRA alpha (default 2 x rank)."),
    samples: Optional[int] = ranged(B.SAMPLES, None, "--samples", help="M generations per fact, majority vote "
                                          "(RESTOR: 3); 1 = greedy. Default: 1 with the tiny preset (its sampled "
                                          "answers are mostly noise after corruption), 3 with the restor preset."),
    temperature: float = ranged(B.TEMPERATURE, 1.0, "--temperature", help="Sampling temperature when M > 1."),
    max_new_tokens: int = ranged(B.NEW_TOKENS, 10, "--max-new-tokens", help="Generation budget (tokens)."),
    preset: Optional[str] = typer.Option(None, "--preset", help="Hyper-parameters: 'tiny' or 'restor' (RESTOR App. "
                                         "C.1/C.2); default: tiny for the tiny model, else restor."),
    reg_weight: Optional[list[str]] = typer.Option(None, "--lambda", help="METHOD=λ, weight of the retain "
                                                   "cross-entropy (repeatable; all=λ for every method). Presets: "
                                                   "GA 4, KL 5, NPO 5."),
    unlearn_lr: Optional[list[str]] = typer.Option(None, "--unlearn-lr", help="METHOD=lr (repeatable; all=lr)."),
    unlearn_epochs: Optional[list[str]] = typer.Option(None, "--unlearn-epochs", help="METHOD=epochs "
                                                       "(repeatable; all=N). Presets: GA 2, KL 2, NPO 3."),
    clean_epochs: Optional[int] = ranged(B.EPOCHS, None, "--clean-epochs", help="Maximum epochs of the clean model's "
                                               "finetuning (stops early at 100% of the facts)."),
    corrupt_epochs: Optional[int] = ranged(B.EPOCHS, None, "--corrupt-epochs", help="Corruption epochs (RESTOR: 5)."),
    corrupt_lr: Optional[float] = ranged(B.LR, None, "--corrupt-lr", help="Corruption learning rate."),
    templates: Optional[int] = ranged(B.TEMPLATES, None, "--templates", help="Sentence templates per fact in the clean "
                                            "model's training text (default: all)."),
    n_retain: int = ranged(B.N_TEXTS, 64, "--n-retain",
                           help="Retain documents (5 unrelated true-fact sentences each)."),
    n_random: int = ranged(B.RANDOM_ANSWERS, 15, "--n-random",
                           help="Random plausible answers per fact for the log-probabilities "
                                 "(RESTOR Fig. 2: 15)."),
    rules: str = typer.Option("family", "--rules", help="Rule set of the closures: 'family', "
                              "'family_paper_compat' or a .lp file."),
    device: str = device_option("auto, cpu, cuda, cuda:N or mps (checked against what torch reports)."),
    dtype: str = dtype_option("auto, float32, bfloat16, float16."),
    prompt: Optional[str] = typer.Option(None, "--prompt", help="Prompt preset (default: from the model)."),
    output: Path = typer.Option(..., "-o", "--output", parser=output_path, metavar="PATH", help="Run directory (a rerun skips finished stages and "
                                "methods)."),
) -> None:
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
    from dukb.neural.restor import RestorConfig, run_restor

    chosen = split_items(methods, "--methods", known=document_methods())
    cfg = RestorConfig(kb=kb, model=model, corrupt=corrupt_fraction, context=context,
                       docs_per_entity=docs_per_entity,
                       methods=chosen, targeted=targeted,
                       seed=seed, lora_r=lora_r, lora_alpha=lora_alpha, samples=samples, temperature=temperature,
                       max_new_tokens=max_new_tokens, preset=preset,
                       reg_weight=parse_method_values("--lambda", reg_weight, chosen=chosen),
                       unlearn_lr=parse_method_values("--unlearn-lr", unlearn_lr, chosen=chosen),
                       unlearn_epochs=parse_method_values("--unlearn-epochs", unlearn_epochs, integer=True,
                                                          chosen=chosen),
                       clean_epochs=clean_epochs, corrupt_epochs=corrupt_epochs, corrupt_lr=corrupt_lr,
                       templates=templates, n_retain=n_retain, n_random=n_random, rules=rules, device=device,
                       dtype=dtype, prompt=prompt)
    if output.exists() and not output.is_dir():
        raise InputError("-o must be a directory, not a file", output)
    on_interrupt(keep_rows_note(output, "run the same command again to continue (finished stages and methods "
                                        "are skipped)"))
    paths = run_restor(output, cfg, log=log_line)
    save_resolved_config(output)
    typer.echo(f"report: {paths['report']}")


def register(app: typer.Typer) -> None:
    """Add `restor` to the app (its help text reflowed paragraph by paragraph)."""
    import inspect

    paragraphs = [" ".join(p.split()) for p in inspect.cleandoc(restor.__doc__ or "").split("\n\n")]
    app.command("restor", help="\n\n".join(paragraphs))(restor)
