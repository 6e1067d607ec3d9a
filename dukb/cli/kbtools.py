"""`dukb import-eval-du` (alias `import-edu-relat`): convert the Eval-DU benchmark's original .pt files into a KB
directory (no torch). The paper's current version (Wu et al. 2025, arXiv 2410.15153v4) names the benchmark Eval-DU;
earlier versions and its repository call the data set EDU-RELAT, which stays an alias."""

from __future__ import annotations

from pathlib import Path

import typer

from dukb.cli.render import output_path


def import_edu_relat(
    src: Path = typer.Argument(
        ...,
        metavar="SRC",
        help="The benchmark's original folder (synthetic_data/ of "
        "github.com/wrh14/deep_unlearning): family-200-graph.pt, family_relationships.pt, "
        "family_biographies.pt, subsample.pt, us_population_distribution; "
        "optionally unlearn_minimal_set/<edge id>.pt, the paper's cached minimal sets.",
    ),
    out: Path = typer.Argument(
        ...,
        metavar="OUT",
        parser=output_path,
        help="KB directory to write (created if needed; files of the same names are replaced, each all or nothing).",
    ),
) -> None:
    """Convert the Eval-DU benchmark's pickled .pt files (the EDU-RELAT data set) into a KB directory, reading them
    without torch and refusing any pickled code. `import-edu-relat` is the same command under its earlier name.

    Input: SRC, the benchmark's folder of .pt files. Output: OUT/people.csv, relationships.csv (fact_id = the
    paper's edge id; "object is subject's relation"), biographies.csv (3 facts per person: birthyear, birthplace,
    job), qa_relationships.jsonl, qa_biographies.jsonl (the benchmark's question/answer texts per fact) and
    targets.txt (the paper's 55 target fact_ids); with SRC/unlearn_minimal_set/ also paper_sets.csv (the paper's
    cached minimal deep unlearning sets per target, in the reference's order; read with the same restricted
    unpickler: sets, frozensets and numpy integers only), which `--sets paper` and `dukb mdus --method paper` use.
    Prints one summary line.
    """
    from dukb.cli.symbolic import read_targets_file
    from dukb.kb.edu_relat import import_edu_relat as run
    from dukb.kb.paper_sets import find_paper_sets

    kb = run(src, out)
    n_targets = len(read_targets_file(out / "targets.txt"))  # read back bounded, as every file
    found = find_paper_sets(out, set(kb.rel_ids))  # read back strictly, as every file
    paper = f", the paper's sets of {len(found[0])} targets" if found else ""
    typer.echo(
        f"imported {len(kb.people)} people, {len(kb.relationships)} relationship facts, "
        f"{len(kb.biographies)} biography facts, {n_targets} targets{paper} into {out}"
    )


def register(app: typer.Typer) -> None:
    """Add import-eval-du and its alias import-edu-relat to the app."""
    app.command("import-eval-du")(import_edu_relat)
    app.command(
        "import-edu-relat",
        help="Alias of import-eval-du (the benchmark's earlier name EDU-RELAT). " + (import_edu_relat.__doc__ or ""),
    )(import_edu_relat)
