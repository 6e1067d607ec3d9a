"""`dukb export`: a KB's facts, probe forms and every target's forget and retain splits as Hugging Face datasets or
Parquet files, with a dataset card. Thin layer over :mod:`dukb.solver.export` (no torch; ``datasets`` or
``pyarrow`` are imported only to write)."""

from __future__ import annotations

import shlex
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from dukb.cli.render import output_path
from dukb.cli.symbolic import MAX_TARGETS_LINES
from dukb.solver.rules import RULES_HELP
from dukb.solver.scopes import FORGET_SCOPES


class ExportFormat(str, Enum):
    hf = "hf"
    parquet = "parquet"


def _scopes_help() -> str:
    return "; ".join(f"{s.name}: {s.summary}" for s in FORGET_SCOPES.values())


def export(
    kb: Optional[str] = typer.Option(
        None,
        "--kb",
        help="KB directory or built-in name (demo); default: the built-in "
        "generated KB (100 people, seed 0), built in memory.",
    ),
    fmt: ExportFormat = typer.Option(
        ...,
        "--format",
        help="hf: one `datasets` save_to_disk folder per "
        "configuration (load with datasets.load_from_disk); parquet: CONFIG/SPLIT.parquet "
        '(load with datasets.load_dataset("parquet", data_files=...)).',
    ),
    output: Path = typer.Option(
        ...,
        "-o",
        "--output",
        parser=output_path,
        metavar="OUT",
        help="Folder to write (created if needed); it must be new or empty.",
    ),
    target_id: Optional[list[int]] = typer.Option(
        None, "--target-id", help="Relationship fact_id of a target (repeatable)."
    ),
    targets_file: Optional[Path] = typer.Option(
        None,
        "--targets-file",
        help="File with one fact_id per line; '#' "
        f"starts a comment; each fact_id once; at most {MAX_TARGETS_LINES:,} "
        "lines. Without --target-id and --targets-file: the KB folder's "
        "targets.txt when it has one, else no targets.",
    ),
    forget_scope: str = typer.Option(
        "minimum",
        "--forget-scope",
        help="The forget split of each target: " + _scopes_help() + ". The retain split is every other KB fact.",
    ),
    kinds: Optional[list[str]] = typer.Option(
        None,
        "--kinds",
        metavar="KINDS",
        help="Probe forms of the probes "
        "configuration, comma-separated and/or repeated (default: all; see "
        "`dukb probes --help`).",
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the probes' random choices (templates, distractors, hints)."),
    rules: Optional[str] = typer.Option(None, "--rules", help=RULES_HELP),
    force: bool = typer.Option(
        False, "--force", help="Replace an earlier export in OUT (a folder holding anything else is still refused)."
    ),
) -> None:
    """Export a KB as data sets, with a dataset card (OUT/README.md, Hugging Face's format).

    Configurations (each a folder of OUT): people, relationships, biographies (the KB's rows; each fact with its
    statement sentence), closure (the deductive closure: KB and derived facts), probes (one split per probe form:
    every question, its gold answer and how an answer is judged), and with targets, targets (one row per target:
    its forget set and whether the rules still derive it from the retain split) and target_<fact_id> with splits
    forget and retain (fact_kind, fact_id, subject, predicate, object, text, question, answer).

    The card's YAML header lists every configuration's files, so `datasets.load_dataset("OUT", "CONFIG")` reads
    either format; its text gives the licence of the source KB (a LICENSE file in the KB folder is copied into OUT)
    and how the export was made (dukb's version, this command, the KB's fingerprint, the rules). Nothing is written
    outside OUT, and a failed export leaves OUT as it was. --format hf needs the `datasets` package and parquet
    `pyarrow`, both in dukb's `export` extra.
    """
    from dukb.solver import card
    from dukb.solver import export as ex

    _check_options(fmt, forget_scope, kinds, output, force)
    k, c, kb_text, kb_name = _load(kb, rules)
    targets, source = _targets(k, c, kb, target_id, targets_file)
    tables = ex.export_tables(k, c, targets, scope=forget_scope, kinds=kinds, seed=seed)
    licence = ex.kb_licence(kb)
    command = _command(kb, fmt, output, target_id, targets_file, forget_scope, kinds, seed, rules, force)
    prov = _provenance(command, k, c, kb_text, kb_name, forget_scope, seed, source, licence)
    ex.write_export(
        tables, output, fmt.value, card.dataset_card(tables, fmt.value, prov), licence_file=licence.file, force=force
    )
    _say_written(output, fmt, tables, targets, source, forget_scope, licence.id, k)


def _note_textless(k) -> None:
    """A note on stderr when some facts have no text (null ``text``): their relation or attribute has no ``fact``
    template in schema.yaml (:func:`dukb.kb.schema_probes.without_fact_template`)."""
    from dukb.kb.schema_probes import without_fact_template

    lacking = dict.fromkeys(s.name for s in without_fact_template(k))
    if not lacking:
        return
    n = sum(f.relation in lacking for f in k.relationships) + sum(b.attribute in lacking for b in k.biographies)
    names = ", ".join(f"'{x}'" for x in lacking)
    typer.echo(
        f"dukb: note: {n} fact(s) have no text (the text column is null): {names} "
        f"{'has' if len(lacking) == 1 else 'have'} no 'fact' template in {k.schema.path}",
        err=True,
    )


def _check_options(fmt: ExportFormat, forget_scope: str, kinds: list[str] | None, output: Path, force: bool) -> None:
    """Every option checked before the KB is read: the format's package installed, the forget scope and the probe
    kinds known, the output folder writable (:func:`dukb.solver.export.check_output`); InputError otherwise."""
    from dukb import InputError
    from dukb.kb.probes import parse_kinds
    from dukb.solver import export as ex
    from dukb.solver.scopes import get_scope

    problem = ex.missing_package(fmt.value)
    if problem:
        raise InputError(problem)
    get_scope(forget_scope)
    parse_kinds(kinds)
    ex.check_output(output, force)


def _provenance(command: str, k, c, kb_text: str, kb_name: str, scope: str, seed: int, source: str, licence):
    """The dataset card's :class:`dukb.solver.card.Provenance` of an export of the KB ``k`` with its closure ``c``."""
    from dukb.solver import card

    return card.Provenance(
        command,
        kb_text,
        k.fingerprint(),
        c.rules.name,
        c.rules.fingerprint,
        scope,
        seed,
        source,
        licence,
        name=kb_name,
    )


def _say_written(
    output: Path, fmt: ExportFormat, tables: dict, targets: list, source: str, forget_scope: str, licence: str, k
) -> None:
    """What the export of the KB ``k`` wrote, on stdout, after notes on stderr when some facts have no text
    (:func:`_note_textless`) and when it holds no target."""
    _note_textless(k)
    if not targets:
        typer.echo(
            f"dukb: note: no targets ({source}): the export holds no forget and retain splits; give "
            "--target-id or --targets-file to add them",
            err=True,
        )
    rows = sum(t.n_rows for splits in tables.values() for t in splits.values())
    typer.echo(
        f"wrote {output} ({fmt.value}): {len(tables)} configurations, {rows:,} rows, {len(targets)} target"
        f"{'' if len(targets) == 1 else 's'} (forget scope {forget_scope}); licence {licence}"
    )


def _load(kb: str | None, rules: str | None):
    """(KB, closure, the KB as the card names it, a short name for its title); None: the built-in generated KB,
    built in memory (nothing is written to dukb's cache)."""
    from dukb.kb import load_kb
    from dukb.solver.closure import compute_closure

    if kb is None:
        from dukb.kb.generate import DEFAULT_PEOPLE, DEFAULT_SEED, generate

        k = generate(DEFAULT_PEOPLE, DEFAULT_SEED)[0]
        text = f"the built-in generated KB (`dukb generate --people {DEFAULT_PEOPLE} --seed {DEFAULT_SEED}`)"
        name = f"generated-p{DEFAULT_PEOPLE}-s{DEFAULT_SEED}"
    else:
        k = load_kb(kb)
        text, name = kb, Path(kb).name or kb
    return k, compute_closure(k, rules), text, name


def _targets(k, c, kb: str | None, target_id, targets_file) -> tuple[list[int], str]:
    """The targets' fact_ids and where they came from: the options (:func:`dukb.cli.symbolic._collect_targets`, a
    targets file's bad line named), else the KB folder's targets.txt, else none."""
    from dukb.cli.symbolic import _collect_targets
    from dukb.kb.io import BUILTIN_KBS, resolve_kb_path

    if target_id or targets_file is not None:
        source = " and ".join(
            x
            for x in ("--target-id" if target_id else "", f"the targets file {targets_file}" if targets_file else "")
            if x
        )
        return [fid for _, fid in _collect_targets(c, target_id, targets_file, None)], f"from {source}"
    folder = None if kb is None or (kb in BUILTIN_KBS and not Path(kb).exists()) else resolve_kb_path(kb)
    if folder is not None and (folder / "targets.txt").is_file():
        path = folder / "targets.txt"
        return [fid for _, fid in _collect_targets(c, None, path, None)], f"the KB's own {path}"
    return [], "the KB has no targets.txt and none were given"


def _command(kb, fmt, output, target_id, targets_file, scope, kinds, seed, rules, force) -> str:
    """The command line that makes this export (options in a fixed order), for the dataset card."""
    args = ["dukb", "export"] + (["--kb", kb] if kb is not None else []) + ["--format", fmt.value, "-o", str(output)]
    for t in target_id or []:
        args += ["--target-id", str(t)]
    if targets_file is not None:
        args += ["--targets-file", str(targets_file)]
    args += ["--forget-scope", scope]
    for k in kinds or []:
        args += ["--kinds", k]
    from dukb.solver.rules import default_rules

    rules = default_rules(kb) if rules is None else rules  # the rule set it ran with (a KB's own rules.lp)
    args += ["--seed", str(seed), "--rules", rules] + (["--force"] if force else [])
    return shlex.join(args)


def register(app: typer.Typer) -> None:
    """Add `export` to the app."""
    app.command("export")(export)
