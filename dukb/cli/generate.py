"""`dukb generate`: write a synthetic EDU-RELAT-like family KB directory (numpy only; no solver, no torch)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from dukb import InputError
from dukb.cli.render import output_path
from dukb.kb.generate import MAX_GENERATIONS, MAX_PEOPLE

KB_FILES = ("people.csv", "relationships.csv", "biographies.csv", "truth.csv")


def _tie(flag: str, event: str, default: float):
    """The option of a family-tie probability: a chance strictly between 0 and 1 (checked in :func:`generate`)."""
    return typer.Option(None, flag, help=f"Chance that {event}, in (0, 1) (default {default}).")


def generate(
    output: Path = typer.Option(
        ...,
        "-o",
        "--output",
        parser=output_path,
        metavar="DIR",
        help="KB directory to write (created if needed; each file all or nothing).",
    ),
    people: int = typer.Option(
        100, "--people", min=1, max=MAX_PEOPLE, help=f"Number of people (exactly), 1 to {MAX_PEOPLE:,}."
    ),
    seed: int = typer.Option(0, "--seed", help="Random seed; the same options give the same KB."),
    generations: int = typer.Option(
        4,
        "--generations",
        min=1,
        max=MAX_GENERATIONS,
        help=f"Number of generations, 1 to {MAX_GENERATIONS} (the paper's 4).",
    ),
    observed: Optional[float] = typer.Option(
        None,
        "--observed",
        help="Share of the true relationship facts "
        "written to K, in (0, 1]: 0 would leave K without relationship facts "
        "(default 400/562 = 0.712, EDU-RELAT's).",
    ),
    p_parents: Optional[float] = _tie("--p-parents", "a person gets parents", 0.8),
    p_spouse: Optional[float] = _tie("--p-spouse", "a person gets a spouse", 0.7),
    p_children: Optional[float] = _tie("--p-children", "a couple has children", 0.9),
    children_p: Optional[float] = typer.Option(
        None,
        "--children-p",
        help="Success probability of the geometric number of children, truncated at 4 (default 0.4).",
    ),
    p_wife_surname: Optional[float] = typer.Option(
        None, "--p-wife-surname", help="Chance that a wife takes her husband's surname (default 0.2)."
    ),
    p_parent_birthplace: Optional[float] = typer.Option(
        None, "--p-parent-birthplace", help="Chance that a child is born in a parent's state (default 0.9)."
    ),
    truth: bool = typer.Option(
        False,
        "--truth",
        help="Also write truth.csv: every true relationship fact, subject,relation,object,observed (1 if in K).",
    ),
    force: bool = typer.Option(False, "--force", help="Overwrite KB files already in the directory."),
) -> None:
    """Generate a synthetic family KB like EDU-RELAT (Wu et al. 2025, Appendix B) and write it as a KB directory.

    The network is grown from founders over 4 generations (parents, spouse, children with set probabilities;
    children per couple geometric, truncated at 4); names, birth years, birthplaces and jobs follow the family;
    only a share (--observed) of the true relationship facts goes into relationships.csv, so that the closure under
    the family rules adds facts. Output: people.csv, relationships.csv, biographies.csv (and truth.csv with
    --truth), loadable with `dukb validate --kb DIR`.

    Degenerate networks are refused: --p-parents, --p-spouse and --p-children lie strictly between 0 and 1 (at 0 a
    kind of family tie never forms, at 1 every person or couple gets one, so the draw no longer varies), and
    --observed is above 0.
    """
    from dukb.kb.generate import EDU_RELAT_OBSERVED
    from dukb.kb.generate import generate as gen

    cfg = _generator_config(p_parents, p_spouse, p_children, children_p, p_wife_surname, p_parent_birthplace, observed)
    _check_output(output, force)
    kb, tr = gen(people, seed, generations, EDU_RELAT_OBSERVED if observed is None else observed, cfg)
    _write(kb, tr, output, truth, force)
    typer.echo(
        f"wrote {output}: {len(kb.people)} people, {len(kb.relationships)} relationship facts "
        f"(of {len(tr)} true), {len(kb.biographies)} biography facts"
    )


def register(app: typer.Typer) -> None:
    """Add `generate` to the app."""
    app.command("generate")(generate)


def _generator_config(
    p_parents, p_spouse, p_children, children_p, p_wife_surname, p_parent_birthplace, observed: float | None
):
    """The :class:`dukb.kb.generate.GeneratorConfig` of the options given (None: the generator's default); an
    InputError names the option the user gave: a probability of parents, spouse or children not strictly between 0
    and 1, ``--observed`` not in (0, 1], or another value the config refuses."""
    from dukb.kb.generate import GeneratorConfig

    overrides = {
        "p_parents": p_parents,
        "p_spouse": p_spouse,
        "p_children": p_children,
        "children_geometric_p": children_p,
        "p_wife_takes_surname": p_wife_surname,
        "p_parent_birthplace": p_parent_birthplace,
    }
    flags = {
        "p_parents": "--p-parents",
        "p_spouse": "--p-spouse",
        "p_children": "--p-children",
        "children_geometric_p": "--children-p",
        "p_wife_takes_surname": "--p-wife-surname",
        "p_parent_birthplace": "--p-parent-birthplace",
    }
    for flag, value in (("--p-parents", p_parents), ("--p-spouse", p_spouse), ("--p-children", p_children)):
        if value is not None and not 0.0 < value < 1.0:  # NaN fails too
            raise InputError(
                f"{flag} must lie strictly between 0 and 1 (0 or 1 makes a degenerate family network), got {value}"
            )
    if observed is not None and not 0.0 < observed <= 1.0:
        raise InputError(f"--observed must be in (0, 1] (0 leaves K without relationship facts), got {observed}")
    try:
        return GeneratorConfig(**{k: v for k, v in overrides.items() if v is not None})
    except InputError as e:
        msg = str(e)
        for k, flag in flags.items():
            if msg.startswith(k + " "):
                msg = flag + msg[len(k) :]  # name the option the user gave
        raise InputError(msg) from None


def _check_output(output: Path, force: bool) -> None:
    """The output must be a directory, and one without KB files unless ``force``; InputError otherwise."""
    if output.exists() and not output.is_dir():
        raise InputError("the output must be a directory, but a file is in the way", output)
    if output.is_dir() and not force:
        clash = [f for f in KB_FILES if (output / f).exists()]
        if clash:
            raise InputError(f"already holds {', '.join(clash)}; give --force to overwrite", output)


def _write(kb, tr, output: Path, truth: bool, force: bool) -> None:
    """Write the KB into ``output``, with its ground truth (truth.csv) when asked; with ``force``, a stale
    truth.csv of another KB is removed. InputError when the folder cannot be written."""
    from dukb.kb.generate import write_truth
    from dukb.kb.io import save_kb

    try:
        save_kb(kb, output)
        if truth:
            write_truth(tr, output / "truth.csv")
        elif force and (output / "truth.csv").exists():
            (output / "truth.csv").unlink()  # a stale truth of another KB must not stay beside this one
    except OSError as e:
        raise InputError(f"cannot write the KB: {e.strerror}", getattr(e, "filename", None) or output) from None
