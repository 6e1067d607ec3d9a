"""`dukb generate`: write a synthetic EDU-RELAT-like family KB directory (numpy only; no solver, no torch)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from dukb import InputError

KB_FILES = ("people.csv", "relationships.csv", "biographies.csv", "truth.csv")


def generate(
    output: Path = typer.Option(..., "-o", "--output", help="KB directory to write (created if needed)."),
    people: int = typer.Option(100, "--people", help="Number of people (exactly)."),
    seed: int = typer.Option(0, "--seed", help="Random seed; the same options give the same KB."),
    generations: int = typer.Option(4, "--generations", help="Number of generations (the paper's 4)."),
    observed: Optional[float] = typer.Option(None, "--observed", help="Share of the true relationship facts "
                                             "written to K, in [0, 1] (default 400/562 = 0.712, EDU-RELAT's)."),
    p_parents: Optional[float] = typer.Option(None, "--p-parents", help="Chance that a person gets parents "
                                              "(default 0.8)."),
    p_spouse: Optional[float] = typer.Option(None, "--p-spouse", help="Chance that a person gets a spouse "
                                             "(default 0.7)."),
    p_children: Optional[float] = typer.Option(None, "--p-children", help="Chance that a couple has children "
                                               "(default 0.9)."),
    children_p: Optional[float] = typer.Option(None, "--children-p", help="Success probability of the geometric "
                                               "number of children, truncated at 4 (default 0.4)."),
    p_wife_surname: Optional[float] = typer.Option(None, "--p-wife-surname", help="Chance that a wife takes her "
                                                   "husband's surname (default 0.2)."),
    p_parent_birthplace: Optional[float] = typer.Option(None, "--p-parent-birthplace", help="Chance that a child "
                                                        "is born in a parent's state (default 0.9)."),
    truth: bool = typer.Option(False, "--truth", help="Also write truth.csv: every true relationship fact, "
                               "subject,relation,object,observed (1 if in K)."),
    force: bool = typer.Option(False, "--force", help="Overwrite KB files already in the directory."),
) -> None:
    """Generate a synthetic family KB like EDU-RELAT (Wu et al. 2025, Appendix B) and write it as a KB directory.

    The network is grown from founders over 4 generations (parents, spouse, children with set probabilities;
    children per couple geometric, truncated at 4); names, birth years, birthplaces and jobs follow the family;
    only a share (--observed) of the true relationship facts goes into relationships.csv, so that the closure under
    the family rules adds facts. Output: people.csv, relationships.csv, biographies.csv (and truth.csv with
    --truth), loadable with `dukb validate --kb DIR`.
    """
    from dukb.kb.generate import EDU_RELAT_OBSERVED, GeneratorConfig, generate as gen, write_truth
    from dukb.kb.io import save_kb

    overrides = {"p_parents": p_parents, "p_spouse": p_spouse, "p_children": p_children,
                 "children_geometric_p": children_p, "p_wife_takes_surname": p_wife_surname,
                 "p_parent_birthplace": p_parent_birthplace}
    flags = {"p_parents": "--p-parents", "p_spouse": "--p-spouse", "p_children": "--p-children",
             "children_geometric_p": "--children-p", "p_wife_takes_surname": "--p-wife-surname",
             "p_parent_birthplace": "--p-parent-birthplace"}
    try:
        cfg = GeneratorConfig(**{k: v for k, v in overrides.items() if v is not None})
    except InputError as e:
        msg = str(e)
        for k, flag in flags.items():
            if msg.startswith(k + " "):
                msg = flag + msg[len(k):]  # name the option the user gave
        raise InputError(msg) from None
    if output.exists() and not output.is_dir():
        raise InputError("the output must be a directory, but a file is in the way", output)
    if output.is_dir() and not force:
        clash = [f for f in KB_FILES if (output / f).exists()]
        if clash:
            raise InputError(f"already holds {', '.join(clash)}; give --force to overwrite", output)
    kb, tr = gen(people, seed, generations, EDU_RELAT_OBSERVED if observed is None else observed, cfg)
    try:
        save_kb(kb, output)
        if truth:
            write_truth(tr, output / "truth.csv")
        elif force and (output / "truth.csv").exists():
            (output / "truth.csv").unlink()  # a stale truth of another KB must not stay beside this one
    except OSError as e:
        raise InputError(f"cannot write the KB: {e.strerror}", getattr(e, "filename", None) or output) from None
    typer.echo(f"wrote {output}: {len(kb.people)} people, {len(kb.relationships)} relationship facts "
               f"(of {len(tr)} true), {len(kb.biographies)} biography facts")


def register(app: typer.Typer) -> None:
    """Add `generate` to the app."""
    app.command("generate")(generate)
