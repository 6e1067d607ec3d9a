"""A small hand-written geography KB with its own schema (not the family one), for the protocol and attack tests of
issue 43, item 6 (rwku, restor and the attacks on any schema).

Eight countries on two continents, their capitals, a second city each (some in a region), currencies, neighbours and
a population attribute; rules: a capital lies in its country, a city in a region lies in the region's country,
neighbour is symmetric. Every country is the subject of at least five facts (RESTOR corrupts five per entity).
``capital`` has two ``description`` templates; every other relation describes itself with its ``fact`` template;
``in_region`` has no ``cloze`` template and only ``capital`` a ``reverse`` one, so those kinds are unscorable for
the other relations' facts.
"""

from __future__ import annotations

from pathlib import Path

SCHEMA = """\
schema_version: 1
name: small_geo
description: "Eight countries, their capitals and cities, currencies and neighbours"
entity_types: [city, region, country, continent, currency]
relations:
  capital:
    functional: true
    subject: country
    object: city
    templates:
      qa: "What is the capital of {s}?"
      fact: "The capital of {s} is {o}."
      description: ["{o} is the capital city of {s}.", "The government of {s} sits in {o}."]
      cloze: "The capital of {s} is"
      yes: "Is {o} the capital of {s}?"
      no: "Is {wrong} the capital of {s}?"
      reverse: "Which country has {o} as its capital?"
  located_in:
    subject: city
    object: country
    functional: true
    templates: {fact: "{s} is a city in {o}.", qa: "In which country is {s}?", cloze: "{s} is a city in"}
  in_region:
    subject: city
    object: region
    functional: true
    templates: {fact: "{s} lies in the region of {o}.", qa: "In which region does {s} lie?"}
  region_of:
    subject: region
    object: country
    functional: true
    templates: {fact: "{s} is a region of {o}.", qa: "Of which country is {s} a region?", cloze: "{s} is a region of"}
  on_continent:
    subject: country
    object: continent
    functional: true
    templates: {fact: "{s} lies in {o}.", qa: "On which continent does {s} lie?", cloze: "{s} lies in"}
  uses_currency:
    subject: country
    object: currency
    functional: true
    templates: {fact: "The currency of {s} is the {o}.", qa: "What is the currency of {s}?",
                cloze: "The currency of {s} is the"}
  neighbour:
    subject: country
    object: country
    symmetric: true
    templates: {fact: "{s} borders {o}.", qa: "Which country borders {s}?", cloze: "{s} borders"}
attributes:
  population:
    subject: country
    templates: {fact: "The population of {s} is {v} million.", qa: "What is the population of {s} in millions?"}
"""

COUNTRIES = {  # country: (capital, other city, region of the other city or "", continent, currency, population)
    "France": ("Paris", "Lyon", "Rhone Alps", "Europe", "Euro", "68"),
    "Spain": ("Madrid", "Barcelona", "Catalonia", "Europe", "Euro", "48"),
    "Germany": ("Berlin", "Munich", "Bavaria", "Europe", "Euro", "84"),
    "Italy": ("Rome", "Milan", "Lombardy", "Europe", "Euro", "59"),
    "Portugal": ("Lisbon", "Porto", "", "Europe", "Euro", "10"),
    "Switzerland": ("Bern", "Zurich", "", "Europe", "Swiss Franc", "9"),
    "Morocco": ("Rabat", "Casablanca", "", "Africa", "Dirham", "37"),
    "Egypt": ("Cairo", "Alexandria", "", "Africa", "Egyptian Pound", "111"),
}
NEIGHBOURS = [
    ("France", "Spain"),
    ("France", "Germany"),
    ("France", "Italy"),
    ("Portugal", "Morocco"),
    ("Spain", "Portugal"),
    ("Germany", "Switzerland"),
    ("Italy", "Switzerland"),
    ("Spain", "Morocco"),
    ("Egypt", "Morocco"),
    ("Switzerland", "Egypt"),
    ("Germany", "Italy"),
    ("Egypt", "Italy"),
]
# (not all true borders: each country has few enough neighbours that RESTOR can draw a wrong one for each)

RULES = """\
% a capital lies in its country
holds(C,located_in,K) :- holds(K,capital,C), city(C), country(K).
% a city in a region lies in the region's country
holds(C,located_in,K) :- holds(C,in_region,R), holds(R,region_of,K).
% neighbour is symmetric
holds(B,neighbour,A) :- holds(A,neighbour,B).
"""


def write_small_geo_kb(root: Path) -> Path:
    """Write the KB (schema.yaml, entities.csv, relationships.csv, biographies.csv, rules.lp) into ``root``.

    Facts are listed country by country: its capital, continent, currency, then its cities' located_in (the
    capital's only where no region says it; a derivable fact is what deep unlearning targets) and regions."""
    root.mkdir(parents=True, exist_ok=True)
    types: dict[str, str] = {}
    facts: list[tuple[str, str, str]] = []
    bios: list[tuple[str, str, str]] = []
    for country, (cap, city, region, cont, cur, pop) in COUNTRIES.items():
        types.update({country: "country", cap: "city", city: "city", cont: "continent", cur: "currency"})
        facts += [
            (country, "capital", cap),
            (country, "on_continent", cont),
            (country, "uses_currency", cur),
            (cap, "located_in", country),
        ]
        if region:
            types[region] = "region"
            facts += [(city, "in_region", region), (region, "region_of", country), (city, "located_in", country)]
        else:
            facts.append((city, "located_in", country))
        bios.append((country, "population", pop))
    facts += [(a, "neighbour", b) for a, b in NEIGHBOURS]
    (root / "schema.yaml").write_text(SCHEMA, encoding="utf-8")
    (root / "entities.csv").write_text(
        "name,type\n" + "".join(f"{n},{t}\n" for n, t in types.items()), encoding="utf-8"
    )
    (root / "relationships.csv").write_text(
        "fact_id,subject,relation,object\n" + "".join(f"{i},{s},{r},{o}\n" for i, (s, r, o) in enumerate(facts)),
        encoding="utf-8",
    )
    (root / "biographies.csv").write_text(
        "fact_id,subject,attribute,value\n" + "".join(f"{i},{s},{a},{v}\n" for i, (s, a, v) in enumerate(bios)),
        encoding="utf-8",
    )
    (root / "rules.lp").write_text(RULES, encoding="utf-8")
    return root
