"""`dukb probes`: probe datasets of a KB (EDU-RELAT forms, reverse/paraphrase/synonym, RWKU adversarial kinds) and
RESTOR-style corruptions. Thin layer over :mod:`dukb.kb.probes` and :mod:`dukb.kb.corrupt`; the closure comes from
:mod:`dukb.solver.closure` (clingo, no torch)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from dukb import InputError
from dukb.cli.render import output_path

KB_HELP = "KB directory (people.csv, relationships.csv, biographies.csv) or a built-in KB name: demo."

#: Most corruption documents per corrupted person (``--docs-per-entity`` of probes and restor), declared with
#: restor's config
from dukb.neural.restor.config import MAX_DOCS_PER_ENTITY  # noqa: E402

#: Most correct context facts per corruption document (``--context``): 1,000 (RESTOR's k counts batches of 5). At
#: least 1: a document without context is the targeted forget set, not a corruption document.
MAX_CONTEXT = 1000


#: the help of ``dukb probes``' options (the long ones, declared here)
FORMAT_HELP = (
    "jsonl | csv: one row per probe; edu: EDU-RELAT's qa_relationships.jsonl and qa_biographies.jsonl into the -o "
    "folder (--kinds does not apply)."
)
SEED_HELP = (
    "Seed of every random choice (templates, distractors, hint and demonstration facts; with --corrupt, the "
    "corruption)."
)
CORRUPT_HELP = (
    "RESTOR-style: corrupt this share of the KB's facts, in (0, 1], 5 per chosen person, and write the corrupted KB "
    "and its documents into the -o folder."
)
PROBE_RULES_HELP = (
    "Rule set of the closure used to keep gold answers right: 'family', 'family_paper_compat' or a .lp file. "
    "Default: the KB's own rules.lp when its directory has a schema.yaml, else family."
)


class ProbeFormat(str, Enum):
    jsonl = "jsonl"
    csv = "csv"
    edu = "edu"


def _kinds_help() -> str:
    from dukb.kb.probes import KIND_GROUPS, KIND_HELP

    lines = [f"{k}: {v}." for k, v in KIND_HELP.items()]
    groups = "; ".join(f"{g} = {', '.join(ks) if g != 'all' else 'every kind'}" for g, ks in KIND_GROUPS.items())
    return "\n\n".join(lines) + f"\n\nGroups: {groups}."


def probes(
    kb: str = typer.Option(..., "--kb", help=KB_HELP),
    kinds: Optional[list[str]] = typer.Option(
        None,
        "--kinds",
        metavar="KINDS",
        help="Probe kinds or groups, comma-separated and/or repeated (default: all). See the list above.",
    ),
    fmt: ProbeFormat = typer.Option(ProbeFormat.jsonl, "--format", help=FORMAT_HELP),
    seed: int = typer.Option(0, "--seed", help=SEED_HELP),
    corrupt_fraction: Optional[float] = typer.Option(None, "--corrupt", help=CORRUPT_HELP),
    context: Optional[int] = typer.Option(
        None,
        "--context",
        min=1,
        max=MAX_CONTEXT,
        help="With --corrupt: "
        f"correct facts about other people per corruption document (k), 1 to "
        f"{MAX_CONTEXT:,} (default 5).",
    ),
    docs_per_entity: int = typer.Option(
        1,
        "--docs-per-entity",
        min=1,
        max=MAX_DOCS_PER_ENTITY,
        help=f"With --corrupt: documents per corrupted person, 1 to {MAX_DOCS_PER_ENTITY:,}.",
    ),
    rules: Optional[str] = typer.Option(None, "--rules", help=PROBE_RULES_HELP),
    output: Optional[Path] = typer.Option(
        None,
        "-o",
        "--output",
        parser=output_path,
        metavar="PATH",
        help="Output file (stdout if omitted); a folder with --format edu or "
        "--corrupt. Each file is written all or nothing.",
    ),
) -> None:
    """Probe questions for every fact of a KB, one row per (fact, kind) where the kind applies.

    Output columns: kind (the probe kind); fact_kind (relationship | biography); fact_id (the fact's id in its
    file); question (the text to give the model, without prompt tags); answer (the gold answer); match (how an
    output is judged: substring = answer.lower() in output.lower(), the paper's rule; yesno = the output's first
    word is yes/no; choice = the output picks the answer's option, by label A-D or by text).

    A relationship fact (S, R, O) reads "O is S's R". Gold answers are checked against the KB's deductive closure:
    "no" questions and multiple-choice distractors are false in it, and reverse-style questions name the other
    right answers to exclude them.

    With --corrupt FRACTION, -o is a folder that receives probes.jsonl|csv (of the clean KB), kb/ (the corrupted
    KB), corruptions.csv (fact_kind, fact_id, subject, predicate, true_value, injected_value) and documents.jsonl
    (doc_id, entity, k_context, text, facts: role incorrect|correct, fact_kind, fact_id, sentence).
    """
    from dukb.kb.edu_qa import write_edu_qa
    from dukb.kb.probes import parse_kinds
    from dukb.solver.closure import compute_closure

    chosen = parse_kinds(kinds)
    k = _checked_kb(kb, fmt, corrupt_fraction, context, docs_per_entity, output)
    closure = compute_closure(k, rules).atoms
    written: list[str] = []
    if fmt == ProbeFormat.edu:
        written += [str(p) for p in write_edu_qa(k, output, closure)]
    else:
        target = output / f"probes.{fmt.value}" if corrupt_fraction is not None else output
        written += _write_probes(k, chosen, seed, closure, fmt, target)
    if corrupt_fraction is not None:
        written += _write_corruption(k, corrupt_fraction, seed, context, closure, docs_per_entity, output)
    if written:
        typer.echo("wrote " + ", ".join(written), err=True)


def _write_probes(k, chosen, seed: int, closure, fmt: ProbeFormat, target: Path | None) -> list[str]:
    """Write the KB's probes of the kinds ``chosen`` to ``target`` (stdout when None), noting on stderr the
    unscorable probes of a KB with its own schema; returns the path written ([] for stdout)."""
    from dukb.cli.render import emit
    from dukb.kb.probe_files import probes_text
    from dukb.kb.probes import probe_report
    from dukb.kb.schema_probes import unscorable_summary

    probes_made, report = probe_report(k, chosen, seed, closure=closure)
    if not k.schema.is_family:  # the family forms cover every relation: its output stays as it was
        for line in unscorable_summary(report):
            typer.echo(f"dukb: note: unscorable probes: {line}", err=True)
    emit(probes_text(probes_made, fmt.value), target)
    return [str(target)] if target is not None else []


def _write_corruption(
    k, fraction: float, seed: int, context: int | None, closure, docs_per_entity: int, output: Path
) -> list[str]:
    """``--corrupt``: corrupt a share of the KB's facts (RESTOR-style, :func:`dukb.kb.corrupt.corrupt`), write the
    corrupted KB and its documents into ``output``, say what was corrupted on stderr; returns the paths written."""
    from dukb.kb.corrupt import corrupt, save_corruption

    res = corrupt(
        k, fraction, seed, 5 if context is None else context, closure=closure, docs_per_entity=docs_per_entity
    )
    paths = save_corruption(res, output)
    typer.echo(
        f"corrupted {len(res.facts)} facts of {len({c.subject for c in res.facts})} people; "
        f"{len(res.documents)} documents",
        err=True,
    )
    return [str(p) for p in paths.values()]


def _checked_kb(
    kb: str,
    fmt: ProbeFormat,
    corrupt_fraction: float | None,
    context: int | None,
    docs_per_entity: int,
    output: Path | None,
):
    """``dukb probes``' option checks, then the KB (loaded; a non-family KB refused for --format edu and --corrupt).

    Raises:
        InputError: an option that does not apply, a missing or wrong -o, or a non-family KB where the family
            schema is needed.
    """
    from dukb.kb import load_kb

    if corrupt_fraction is None and (context is not None or docs_per_entity != 1):
        raise InputError("--context and --docs-per-entity apply only with --corrupt FRACTION")
    if (corrupt_fraction is not None or fmt == ProbeFormat.edu) and output is None:
        raise InputError("give an output folder with -o when using --corrupt or --format edu")
    if output is not None and (corrupt_fraction is not None or fmt == ProbeFormat.edu) and output.is_file():
        raise InputError("-o must be a folder (not an existing file) with --corrupt or --format edu", output)
    k = load_kb(kb)
    if not k.schema.is_family and (fmt == ProbeFormat.edu or corrupt_fraction is not None):
        what = (
            "--format edu (EDU-RELAT's family QA files)"
            if fmt == ProbeFormat.edu
            else "--corrupt (RESTOR-style corruption of family relations and biography values)"
        )
        raise InputError(
            f"KB {k.source} has schema '{k.schema.name}': {what} needs the family schema; "
            "--format jsonl|csv writes its probes from the schema's templates"
        )
    return k


def register(app: typer.Typer) -> None:
    """Add the `probes` command to the app (its help lists every probe kind)."""
    import inspect

    paragraphs = [" ".join(p.split()) for p in inspect.cleandoc(probes.__doc__ or "").split("\n\n")]
    app.command("probes", help="\n\n".join(paragraphs) + "\n\nKinds:\n\n" + _kinds_help())(probes)
