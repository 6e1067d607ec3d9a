"""`dukb attack`: run the attacks on one unlearned checkpoint for one target (thin: parse, call, render)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from dukb import InputError
from dukb.cli.render import log_line, output_path
from dukb.cli.run_options import ranged, shared_option, split_items
from dukb.neural import bounds as B


def _attack_help() -> str:
    from dukb.neural.catalog import attack_settings_help

    return attack_settings_help()


def attack(
    kb: Optional[str] = typer.Option(
        None,
        "--kb",
        help="KB directory or built-in name; default: the KB the model "
        "(else --reference) was finetuned on, recorded in its dukb_model.json; without a "
        "record --kb is required (exit 2 otherwise). A model finetuned on another KB is "
        "refused (exit 2) unless --allow-kb-mismatch.",
    ),
    allow_kb_mismatch: bool = shared_option("allow_kb_mismatch"),
    rules: str = shared_option("rules"),
    model: str = typer.Option(
        ..., "--model", help="The unlearned model: a directory (any framework's HF checkpoint), hub id or .gguf file."
    ),
    target_id: int = typer.Option(..., "--target-id", help="The target's relationship fact_id."),
    reference: Optional[str] = typer.Option(
        None,
        "--reference",
        help="The model before unlearning: the baseline of incontext and the accuracy before unlearning.",
    ),
    attacks: str = typer.Option(
        "relearn,quant8,quant4,incontext,logitlens",
        "--attacks",
        help="Comma-separated NAME or NAME:key=value:... Attacks: " + _attack_help() + ".",
    ),
    forget_scope: str = typer.Option(
        "target",
        "--forget-scope",
        help="The forget scope the checkpoint was "
        "unlearned on (relearn's neighbours are chosen around its forget set).",
    ),
    sets: str = typer.Option(
        "exact", "--sets", help="exact | random | paper (the KB's cached sets of the paper) sets."
    ),
    seeds: int = ranged(B.N_SEEDS, 100, "--seeds", help="N_seed for random sets."),
    seed: int = shared_option("seed"),
    device: str = shared_option("device"),
    dtype: str = shared_option("dtype"),
    prompt: Optional[str] = shared_option("prompt"),
    trust_remote_code: bool = shared_option("trust_remote_code"),
    output: Optional[Path] = typer.Option(
        None,
        "-o",
        "--output",
        parser=output_path,
        metavar="PATH",
        help="Write the row as JSON here, with the forgotten facts' ids (default: print only the table).",
    ),
) -> None:
    """Probe an unlearned checkpoint, score recall, accuracy and Success-DU for one target, then apply every
    attack (relearning, quantization, in-context premises, logit lens) and score the model under each: does the
    unlearned fact come back, and can it again be derived from what the model knows?

    Without --kb the KB is the one --model (else --reference) records in its dukb_model.json (`dukb finetune`
    writes it); a recorded KB that no longer exists or has changed, or a --kb other than the recorded one, is
    refused (exit 2)."""
    from dukb.neural.attacks.checkpoint import attack_checkpoint
    from dukb.neural.plan import load_kb_closure

    parsed = _checked_attacks(attacks, sets, forget_scope)  # every option checked before the KB and any model load
    kb_, closure = load_kb_closure(_recorded_kb(kb, model, reference, allow_kb_mismatch), rules)
    row = attack_checkpoint(
        kb_,
        closure,
        model,
        target_id,
        parsed,
        reference_dir=reference,
        scope=forget_scope,
        sets=sets,
        seeds=seeds,
        seed=seed,
        spec_kw=dict(device=device, dtype=dtype, prompt=prompt, trust_remote_code=trust_remote_code),
        log=log_line,
    )
    text = json.dumps(row, indent=1, default=str)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text + "\n")
    typer.echo(_attack_table(row, full_row_written=output is not None))


def _checked_attacks(attacks: str, sets: str, forget_scope: str) -> list:
    """The parsed ``--attacks`` (:func:`dukb.neural.attacks.parse_attacks`), after checking ``--sets`` and
    ``--forget-scope``; InputError on a bad value."""
    from dukb.neural.attacks import parse_attacks
    from dukb.neural.catalog import attack_names
    from dukb.solver.scopes import FORGET_SCOPES

    parsed = parse_attacks(split_items(attacks, "--attacks", known=attack_names()))
    if not parsed:
        raise InputError("--attacks names no attack")
    if sets not in ("exact", "random", "paper"):
        raise InputError(f"--sets must be exact, random or paper, got {sets!r}")
    if forget_scope not in FORGET_SCOPES:
        raise InputError(f"unknown --forget-scope {forget_scope!r} (choose from {', '.join(FORGET_SCOPES)})")
    return parsed


def _recorded_kb(kb: str | None, model: str, reference: str | None, allow_mismatch: bool) -> str:
    """The KB to score on: ``--kb``, checked against the models' records, else the KB a model's dukb_model.json
    records; InputError when neither names one (a default KB would score another model's facts without a word)."""
    from dukb.neural.modelrecord import model_kb, read_model_record
    from dukb.neural.zoo import check_model_value

    # the unlearned model's record names its KB when dukb saved it; else the reference's (the finetuned model); a
    # model whose record names no KB comes last (then --kb or a recorded KB is trusted without a warning)
    given = [check_model_value(m, f) for m, f in ((model, "--model"), (reference, "--reference")) if m is not None]
    named = [m for m in given if (read_model_record(m) or {}).get("kb_sha256")]
    for m in named + [m for m in given if m not in named]:
        kb = model_kb(m, kb, allow_mismatch=allow_mismatch)
    if kb is None:
        raise InputError(
            f"neither --model {model}"
            + (f" nor --reference {reference}" if reference else "")
            + " records the KB it was finetuned on (dukb_model.json, written by dukb finetune): pass "
            "--kb with that KB"
        )
    return kb


def _attack_table(row: dict, full_row_written: bool) -> str:
    """The printed table of an attack row: recall, accuracy, Success-DU and whether the target is known, without
    attack and under each attack, then the worst-case recall."""
    from dukb.neural.metrics.summary import num  # an accuracy with nothing to score prints as "–"

    lines = [
        f"{'attack':<10} {'recall':>7} {'acc':>6} {'succ_du':>7} {'target':>6}",
        f"{'(none)':<10} {row['recall']:>7.3f} {num(row['accuracy_all'], 3):>6} {row['success_du']:>7} "
        f"{1 - int(row.get('target_forgotten', 0)):>6}",
    ]
    for name, e in row["attacks"].items():
        lines.append(
            f"{name:<10} {e['recall']:>7.3f} {num(e['accuracy_all'], 3):>6} {e['success_du']:>7} {e['target_known']:>6}"
        )
    lines.append(f"recall under attack (worst case): {row['recall_under_attack']:.3f}")
    if not full_row_written:  # the full row (per-fact ids, per-attack lists) only in the file
        lines.append("the full row, with the forgotten facts' ids: -o FILE")
    return "\n".join(lines)


def register(app: typer.Typer) -> None:
    """Add attack to the app."""
    app.command("attack")(attack)
