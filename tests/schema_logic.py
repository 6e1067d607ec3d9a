"""Random KB schemas, rule files and KBs for the property tests of issue 43, and an independent reference.

Nothing here imports dukb.solver: the reference closure (naive forward chaining, Wu et al. 2025, Definition 1) and
the brute-force minimal deep unlearning sets (Definitions 2-3) work on plain Python data, so the tests compare two
implementations that share only the files they read.

- :func:`schemas`: a hypothesis strategy of :class:`RandomKB`: 2-5 entity types, 2-6 relations with random subject
  and object types (or ``any``), a few entities with random types, random facts respecting the types (functional
  relations at most one object per subject), and 2-5 random positive Horn rules over the relations with type
  guards, the entity predicate and ``!=`` guards, some with a relation variable.
- :meth:`RandomKB.write`: the KB as a directory (schema.yaml, entities.csv, relationships.csv, rules.lp).
- :func:`closure`, :func:`brute_force_mdus`: the reference.
- :data:`TINY_*`, :func:`write_tiny_kb`: a hand-written non-family KB (8 entities; relations kid, sibling,
  lives_in, located_in, citizen_of), like the example of docs/tutorials/own-kb.md.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from hypothesis import strategies as st
from independent_logic import minimal_removals

Triple = tuple[str, str, str]

TYPE_NAMES = ("city", "region", "country", "continent", "person")
RELATION_NAMES = ("kid", "located_in", "capital", "near", "part_of", "owns")
VARS = ("A", "B", "C", "D")
ENTITY_PREDICATE = "entity"


@dataclass(frozen=True)
class Atom:
    """``holds(s, r, o)``; ``r`` a relation name, or a variable when ``r_var``."""

    s: str
    r: str
    o: str
    r_var: bool = False

    def text(self) -> str:
        return f"holds({self.s},{self.r},{self.o})"


@dataclass(frozen=True)
class Rule:
    """head :- body, guards (predicate, variable), neq (variable, variable)."""

    head: Atom
    body: tuple[Atom, ...]
    guards: tuple[tuple[str, str], ...]
    neq: tuple[tuple[str, str], ...]

    def text(self) -> str:
        parts = (
            [a.text() for a in self.body] + [f"{p}({v})" for p, v in self.guards] + [f"{a} != {b}" for a, b in self.neq]
        )
        return f"{self.head.text()} :- {', '.join(parts)}."


@dataclass(frozen=True)
class RandomKB:
    """A random schema, its entities (name -> type), facts (fact_id -> triple) and rules."""

    types: tuple[str, ...]
    relations: tuple[tuple[str, str, str, bool], ...]  # name, subject type, object type, functional
    entities: dict
    facts: dict
    rules: tuple[Rule, ...]

    def __repr__(self) -> str:  # readable falsifying examples
        return (
            f"RandomKB(types={self.types}, relations={self.relations}, entities={self.entities}, "
            f"facts={self.facts}, rules={[r.text() for r in self.rules]})"
        )

    def schema_yaml(self) -> str:
        lines = [
            "schema_version: 1",
            "name: random",
            f"entity_predicate: {ENTITY_PREDICATE}",
            f"entity_types: [{', '.join(self.types)}]",
            "relations:",
        ]
        for name, s, o, functional in self.relations:
            lines.append(f"  {name}: {{subject: {s}, object: {o}, functional: {str(functional).lower()}}}")
        return "\n".join(lines) + "\n"

    def rules_text(self) -> str:
        return "\n".join(r.text() for r in self.rules) + "\n"

    def write(self, root: Path) -> Path:
        """Write the KB directory; returns it."""
        root.mkdir(parents=True, exist_ok=True)
        (root / "schema.yaml").write_text(self.schema_yaml())
        (root / "rules.lp").write_text(self.rules_text())
        with open(root / "entities.csv", "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["name", "type"])
            w.writerows(self.entities.items())
        with open(root / "relationships.csv", "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["fact_id", "subject", "relation", "object"])
            w.writerows([fid, s, r, o] for fid, (s, r, o) in self.facts.items())
        return root


def _fits(etype: str, need: str) -> bool:
    return need == "any" or etype == need


@st.composite
def _rule(draw, types: tuple[str, ...], relations: tuple[str, ...], used_relations: tuple[str, ...]) -> Rule:
    preds = types + (ENTITY_PREDICATE,)
    if draw(st.integers(0, 4)) == 0:  # a relation variable: holds(B,R,A) :- holds(A,R,B), ...
        body = (Atom("A", "R", "B", True),)
        head = Atom("B", "R", "A", True)
        used = ["A", "B"]
    else:
        n = draw(st.sampled_from((1, 1, 2, 2, 3)))
        body_l = []
        used = []
        for k in range(n):
            # chain-shaped bodies share a variable with an earlier atom, so that the joins stay small
            pool = VARS[: k + 2]
            s = draw(st.sampled_from(used or pool)) if k else draw(st.sampled_from(pool))
            o = draw(st.sampled_from(pool))
            # mostly relations that have facts, so that rules fire
            rel = draw(st.sampled_from(used_relations if used_relations and draw(st.integers(0, 4)) else relations))
            body_l.append(Atom(s, rel, o))
            used += [v for v in (s, o) if v not in used]
        body = tuple(body_l)
        hs, ho = draw(st.sampled_from(used)), draw(st.sampled_from(used))
        head = Atom(hs, draw(st.sampled_from(relations)), ho)
    guards = tuple(draw(st.lists(st.tuples(st.sampled_from(preds), st.sampled_from(used)), max_size=1)))
    neq = tuple(
        draw(
            st.lists(st.tuples(st.sampled_from(used), st.sampled_from(used)).filter(lambda p: p[0] != p[1]), max_size=1)
        )
    )
    if draw(st.booleans()) and head.s != head.o:
        neq += ((head.s, head.o),)
    return Rule(head, body, guards, neq)


@st.composite
def schemas(draw, max_entities: int = 7, max_facts: int = 9) -> RandomKB:
    """A random schema with entities, facts and rules (see the module docstring)."""
    types = tuple(draw(st.lists(st.sampled_from(TYPE_NAMES), min_size=2, max_size=5, unique=True)))
    names = draw(st.lists(st.sampled_from(RELATION_NAMES), min_size=2, max_size=6, unique=True))
    endpoint = st.sampled_from(types + ("any",))
    relations = tuple((n, draw(endpoint), draw(endpoint), draw(st.booleans())) for n in names)
    n_ent = draw(st.integers(3, max_entities))
    # every type has an entity when there are enough of them
    entities = {f"e{i}": types[i] if i < len(types) else draw(st.sampled_from(types)) for i in range(n_ent)}
    ent = list(entities)
    facts: dict[int, Triple] = {}
    seen: set[Triple] = set()
    has_object: set[tuple[str, str]] = set()
    for _ in range(draw(st.integers(2, 2 * max_facts))):
        if len(facts) == max_facts:
            break
        name, need_s, need_o, functional = draw(st.sampled_from(relations))
        subj = [e for e in ent if _fits(entities[e], need_s)]
        if not subj:
            continue
        s = draw(st.sampled_from(subj))
        obj = [e for e in ent if e != s and _fits(entities[e], need_o)]
        if not obj or (functional and (s, name) in has_object):
            continue
        t = (s, name, draw(st.sampled_from(obj)))
        if t in seen:
            continue
        seen.add(t)
        has_object.add((s, name))
        facts[len(facts)] = t
    used = tuple(sorted({r for _, r, _ in facts.values()}))
    rules = tuple(draw(st.lists(_rule(types, tuple(names), used), min_size=2, max_size=5)))
    return RandomKB(types, relations, entities, facts, rules)


# ------------------------------------------------------------------------------------------------ reference ------
def _bindings(rule: Rule, facts: set[Triple]):
    def go(k: int, env: dict[str, str]):
        if k == len(rule.body):
            yield env
            return
        a = rule.body[k]
        for s, r, o in facts:
            new = dict(env)
            ok = True
            for var, val in ((a.s, s), (a.o, o)) + (((a.r, r),) if a.r_var else ()):
                if new.setdefault(var, val) != val:
                    ok = False
            if ok and (a.r_var or r == a.r):
                yield from go(k + 1, new)

    yield from go(0, {})


def closure(facts, entities: dict[str, str], rules) -> set[Triple]:
    """Omega(K, R) by naive forward chaining (Wu et al. 2025, Definition 1): type guards read ``entities``
    (name -> type), the entity predicate holds of every entity, ``!=`` compares names."""
    known = set(facts)
    while True:
        new = set()
        for rule in rules:
            for env in _bindings(rule, known):
                if any(
                    not (p == ENTITY_PREDICATE and env[v] in entities or entities.get(env[v]) == p)
                    for p, v in rule.guards
                ):
                    continue
                if any(env[a] == env[b] for a, b in rule.neq):
                    continue
                h = rule.head
                new.add((env[h.s], env[h.r] if h.r_var else h.r, env[h.o]))
        new -= known
        if not new:
            return known
        known |= new


def brute_force_mdus(facts: dict[int, Triple], entities: dict[str, str], rules, targets) -> set[frozenset[int]]:
    """All subset-minimal sets U of fact ids with no target in Omega(K \\ U) (Definitions 2-3), by trying every
    subset by increasing size (:func:`independent_logic.minimal_removals`, the family reference's enumeration)."""
    return minimal_removals(
        sorted(facts),
        lambda u: bool(set(targets) & closure([t for i, t in facts.items() if i not in u], entities, rules)),
    )


# --------------------------------------------------------------------------------------------- the tiny KB ------
TINY_SCHEMA = """\
schema_version: 1
name: kids_places
description: "A tiny non-family KB: people, their kids, where they live"
entities: {file: entities.csv, name_column: name, type_column: type}
entity_predicate: entity
entity_types: [person, city, country]
relations:
  kid:
    subject: person
    object: person
    templates: {fact: "{o} is a kid of {s}.", qa: "Who is a kid of {s}?"}
  sibling: {subject: person, object: person, symmetric: true}
  lives_in:
    subject: person
    object: city
    functional: true
    templates:
      fact: "{s} lives in {o}."
      cloze: "{s} lives in"
      yes: "Does {s} live in {o}?"
      no: "Does {s} live in {wrong}?"
  located_in: {subject: city, object: country, functional: true}
  citizen_of: {subject: person, object: country}
"""
TINY_ENTITIES = (
    "name,type\nAnn,person\nBo,person\nCy,person\nDi,person\nLyon,city\nParis,city\nFrance,country\nSpain,country\n"
)
TINY_FACTS = (
    "fact_id,subject,relation,object\n0,Ann,kid,Bo\n1,Ann,kid,Cy\n2,Ann,lives_in,Lyon\n"
    "3,Lyon,located_in,France\n4,Di,lives_in,Paris\n5,Paris,located_in,France\n6,Bo,sibling,Cy\n"
)
TINY_RULES = """\
% a kid lives where its parent lives
holds(B,lives_in,C) :- holds(A,kid,B), holds(A,lives_in,C), person(B).
% two kids of one parent are siblings; sibling is symmetric
holds(B,sibling,C) :- holds(A,kid,B), holds(A,kid,C), B != C.
holds(B,sibling,A) :- holds(A,sibling,B).
% living in a city of a country makes a citizen
holds(A,citizen_of,C) :- holds(A,lives_in,B), holds(B,located_in,C), city(B), country(C).
"""
#: Its closure's derived facts (worked out by hand from the rules above).
TINY_DERIVED = {
    ("Bo", "lives_in", "Lyon"),
    ("Cy", "lives_in", "Lyon"),
    ("Cy", "sibling", "Bo"),
    ("Ann", "citizen_of", "France"),
    ("Bo", "citizen_of", "France"),
    ("Cy", "citizen_of", "France"),
    ("Di", "citizen_of", "France"),
}


def write_tiny_kb(root: Path) -> Path:
    """Write the tiny non-family KB (schema.yaml, entities.csv, relationships.csv, rules.lp) into ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    for name, text in (
        ("schema.yaml", TINY_SCHEMA),
        ("entities.csv", TINY_ENTITIES),
        ("relationships.csv", TINY_FACTS),
        ("rules.lp", TINY_RULES),
    ):
        (root / name).write_text(text)
    return root
