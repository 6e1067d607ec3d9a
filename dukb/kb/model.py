"""In-memory knowledge base: people, relationship facts and biography facts.

A KB here is K of Wu et al. 2025 (Sec. 2): relationship facts take part in the rules, biography facts do not. Fact
ids are stable integers from the KB files (EDU-RELAT's are the paper's edge ids); relationship and biography ids are
separate namespaces, so a fact is identified by ``(kind, fact_id)``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from dukb.kb.kbschema import Schema, family_schema

Triple = tuple[str, str, str]


@dataclass(frozen=True, slots=True)
class Person:
    """One person of the KB (a row of people.csv), or one entity of a KB with another schema (a row of its entities
    file).

    Attributes:
        name: unique full name.
        gender: "male" or "female"; for a KB whose schema is not the family one, the entity's type (one of
            ``Schema.entity_types``; :meth:`KB.entity_type` reads it under that name).
        birthyear, birthplace, job, generation: optional background attributes (birthyear in years AD).

    Example:
        >>> p = Person("Ann Lee", "female", birthyear=1950)
        >>> p.gender, p.birthyear, p.job
        ('female', 1950, None)
    """

    name: str
    gender: str
    birthyear: int | None = None
    birthplace: str | None = None
    job: str | None = None
    generation: int | None = None


@dataclass(frozen=True, slots=True)
class Fact:
    """A relationship fact ``(subject, relation, object)``, read "object is subject's relation".

    Example: ``Fact(0, "Reid Perry", "father", "Richard Perry")`` = "Richard Perry is Reid Perry's father".

    Example:
        >>> f = Fact(0, "Reid Perry", "father", "Richard Perry")
        >>> str(f)
        "Richard Perry is Reid Perry's father"
        >>> f.triple
        ('Reid Perry', 'father', 'Richard Perry')
    """

    fact_id: int
    subject: str
    relation: str
    object: str

    @property
    def triple(self) -> Triple:
        """The fact as a ``(subject, relation, object)`` tuple of strings."""
        return (self.subject, self.relation, self.object)

    def __str__(self) -> str:
        return f"{self.object} is {self.subject}'s {self.relation}"


@dataclass(frozen=True, slots=True)
class BioFact:
    """A biography fact ``(subject, attribute, value)``: "The attribute of subject is value".

    Example:
        >>> str(BioFact(3, "Ann Lee", "job", "Teacher"))
        'The job of Ann Lee is Teacher'
    """

    fact_id: int
    subject: str
    attribute: str
    value: str

    def __str__(self) -> str:
        return f"The {self.attribute} of {self.subject} is {self.value}"


class KB:
    """A validated knowledge base.

    Attributes:
        people: name -> Person, in file order.
        relationships: relationship facts in file order (the order defines atom ids in the solver).
        biographies: biography facts in file order.
        source: directory it was loaded from, if any.
        schema: the KB's :class:`dukb.kb.kbschema.Schema` (the family schema unless one is given).

    Build one with :func:`dukb.kb.load_kb` (validates) or directly for tests; call :func:`dukb.kb.check_kb` after
    building by hand. :func:`dukb.kb.load_kb`'s fast path gives a KB whose fact lists are built on first use
    from its columns (:meth:`from_columns`); the closure reads the columns and never builds them. Two KBs are equal
    when their people, relationships, biographies and source are.

    Example:
        >>> kb = KB({"Ann Lee": Person("Ann Lee", "female"), "Bo Lee": Person("Bo Lee", "male")},
        ...         [Fact(7, "Bo Lee", "wife", "Ann Lee"), Fact(9, "Ann Lee", "husband", "Bo Lee")])
        >>> kb
        KB(2 people, 2 relationship facts, 0 biography facts, source=None)
        >>> kb.rel_ids, kb.find(("Ann Lee", "husband", "Bo Lee")).fact_id, kb.gender("Bo Lee")
        ([7, 9], 9, 'male')
        >>> str(kb.relationship(7))
        "Ann Lee is Bo Lee's wife"
        >>> len(kb.fingerprint())
        16
    """

    __slots__ = (
        "people",
        "source",
        "_schema",
        "_relationships",
        "_biographies",
        "_make_relationships",
        "_make_biographies",
        "_rel_by_id",
        "_rel_by_triple",
        "_name_index",
        "_columns",
    )
    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value

    def __init__(
        self,
        people: dict[str, Person],
        relationships: list[Fact],
        biographies: list[BioFact] | None = None,
        source: Path | None = None,
        schema: Schema | None = None,
    ):
        self.people, self.source = people, source
        self._schema = None if schema is None or schema.is_family else schema
        self._relationships: list[Fact] | None = relationships
        self._biographies: list[BioFact] | None = [] if biographies is None else biographies
        self._make_relationships: Callable[[], list[Fact]] | None = None
        self._make_biographies: Callable[[], list[BioFact]] | None = None
        # the look-ups by id and by triple, built on first use (a closure of a large KB needs neither)
        self._rel_by_id: dict[int, Fact] | None = None
        self._rel_by_triple: dict[Triple, Fact] | None = None
        self._name_index: tuple | None = None
        self._columns: tuple | None = None

    @classmethod
    def from_columns(
        cls,
        people: dict[str, Person],
        columns: tuple[Any, Any, Any, Any],
        relationships: Callable[[], list[Fact]],
        biographies: Callable[[], list[BioFact]],
        source: Path | None = None,
        schema: Schema | None = None,
    ) -> KB:
        """A KB whose fact lists are built on first use, by ``relationships()`` and ``biographies()``.

        Args:
            people: name -> Person, in file order.
            columns: the relationship facts as four int64 numpy arrays of one length, in file order: fact_id,
                subject's position in ``people``, relation's index in the schema's relations, object's
                position (see :meth:`fact_columns`).
            relationships, biographies: build the fact lists (called at most once each); the relationships must
                agree with ``columns``.
            source: the directory it was loaded from.
            schema: the KB's schema (None: the family schema).

        Example:
            >>> import numpy as np
            >>> people = {"Ann Lee": Person("Ann Lee", "female"), "Bo Lee": Person("Bo Lee", "male")}
            >>> cols = tuple(np.array([x], dtype=np.int64) for x in (7, 1, 4, 0))
            >>> kb = KB.from_columns(people, cols, lambda: [Fact(7, "Bo Lee", "wife", "Ann Lee")], list)
            >>> kb.fact_columns()[0].tolist(), kb.relationships
            ([7], [Fact(fact_id=7, subject='Bo Lee', relation='wife', object='Ann Lee')])
        """
        kb = cls(people, [], [], source, schema)
        kb._relationships = kb._biographies = None
        kb._make_relationships, kb._make_biographies = relationships, biographies
        fid, subj, rel, obj = columns
        kb._columns = (None, len(fid), len(people), subj, obj, fid, rel)
        return kb

    @property
    def schema(self) -> Schema:
        """The KB's schema: its relations, entity types and attributes (the family schema unless another was
        given; Wu et al. 2025, Sec. 2: the vocabulary of K and R)."""
        return family_schema() if self._schema is None else self._schema

    @schema.setter
    def schema(self, schema: Schema | None) -> None:
        self._schema = None if schema is None or schema.is_family else schema

    @property
    def relationships(self) -> list[Fact]:
        """Relationship facts in file order (built on first use for a KB of :meth:`from_columns`)."""
        if self._relationships is None:
            self._relationships = cast(Callable[[], list[Fact]], self._make_relationships)()
            self._make_relationships = None
            if self._columns is not None:
                self._columns = (self._relationships, *self._columns[1:])
        return self._relationships

    @relationships.setter
    def relationships(self, facts: list[Fact]) -> None:
        self._relationships, self._make_relationships = facts, None
        self._rel_by_id = self._rel_by_triple = None

    @property
    def biographies(self) -> list[BioFact]:
        """Biography facts in file order (built on first use for a KB of :meth:`from_columns`)."""
        if self._biographies is None:
            self._biographies = cast(Callable[[], list[BioFact]], self._make_biographies)()
            self._make_biographies = None
        return self._biographies

    @biographies.setter
    def biographies(self, facts: list[BioFact]) -> None:
        self._biographies, self._make_biographies = facts, None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, KB):
            return NotImplemented
        return (self.people, self.relationships, self.biographies, self.source, self.schema) == (
            other.people,
            other.relationships,
            other.biographies,
            other.source,
            other.schema,
        )

    def _by_id(self) -> dict[int, Fact]:
        if self._rel_by_id is None:
            self._rel_by_id = {f.fact_id: f for f in self.relationships}
        return self._rel_by_id

    def _by_triple(self) -> dict[Triple, Fact]:
        if self._rel_by_triple is None:
            self._rel_by_triple = {(f.subject, f.relation, f.object): f for f in self.relationships}
        return self._rel_by_triple

    def set_name_index(self, subjects: Sequence[int], objects: Sequence[int]) -> None:
        """Record, per relationship fact, the position of its subject and object in ``people`` (array('q') or
        sequences of ints, one entry per fact); :func:`dukb.kb.load_kb` records them while validating, so that the
        solver does not look every name up again. Raises ValueError if the lengths do not match the facts."""
        if len(subjects) != len(self.relationships) or len(objects) != len(self.relationships):
            raise ValueError("one subject and one object index per relationship fact")
        self._name_index = (self.relationships, len(self.relationships), len(self.people), subjects, objects)

    def _valid(self, ix: tuple | None) -> bool:
        """Whether positions recorded as ``(facts list or None, n facts, n people, subjects, objects, ...)`` still
        hold: None as the list means the facts were never built (nothing can have changed them)."""
        if ix is None:
            return False
        rels: Any = ix[0]
        n_rels, n_people, subj, obj = ix[1:5]
        if len(self.people) != n_people:
            return False
        if rels is None:
            return self._relationships is None
        if len(rels) != n_rels or id(rels) != id(self._relationships):
            return False
        if n_rels:
            names = list(self.people)
            for k in (0, n_rels - 1):
                f = rels[k]
                if names[subj[k]] != f.subject or names[obj[k]] != f.object:
                    return False
        return True

    def name_index(self) -> tuple[Sequence[int], Sequence[int]] | None:
        """(subject positions, object positions) of the relationship facts in ``people`` order, as recorded by
        :meth:`set_name_index` or :meth:`from_columns`, or None when none was recorded or the KB changed since
        (facts or people added or replaced; checked on the list's identity and lengths, and on the first and last
        fact)."""
        for ix in (self._columns, self._name_index):
            if self._valid(ix):
                return cast(tuple, ix)[3], cast(tuple, ix)[4]
        return None

    def fact_columns(self) -> tuple[Any, Any, Any, Any] | None:
        """(fact_ids, subject positions, relation indices in the schema's relations, object positions)
        of the relationship facts, int64 numpy arrays in file order, for a KB of :meth:`from_columns` that has not
        changed since (as :meth:`name_index` checks, and on the first and last fact's id and relation); else None.
        """
        ix = self._columns
        if not self._valid(ix):
            return None
        ix = cast(tuple, ix)
        if ix[0] is not None and ix[1]:
            relations = self.schema.relation_names
            for k in (0, ix[1] - 1):
                f = ix[0][k]
                if f.fact_id != ix[5][k] or f.relation != relations[ix[6][k]]:
                    return None
        return ix[5], ix[3], ix[6], ix[4]

    # -- look-ups -------------------------------------------------------------------------------------------------
    def relationship(self, fact_id: int) -> Fact:
        """Return the relationship fact with this id.

        Raises:
            KeyError: no relationship fact has this id.
        """
        return self._by_id()[fact_id]

    def has_relationship(self, fact_id: int) -> bool:
        """True when a relationship fact has this id."""
        return fact_id in self._by_id()

    def find(self, triple: Triple) -> Fact | None:
        """The KB relationship fact with this ``(s, r, o)`` triple, or None."""
        return self._by_triple().get(triple)

    def gender(self, name: str) -> str:
        """Gender of a person ("male"/"female"). Raises KeyError for an unknown name."""
        return self.people[name].gender

    def entity_type(self, name: str) -> str:
        """The entity type of a name (one of ``kb.schema.entity_types``; for the family schema its gender).
        Raises KeyError for an unknown name."""
        return self.people[name].gender

    @property
    def rel_ids(self) -> list[int]:
        """Relationship fact ids in file order."""
        return [f.fact_id for f in self.relationships]

    @property
    def bio_ids(self) -> list[int]:
        """Biography fact ids in file order."""
        return [f.fact_id for f in self.biographies]

    def fingerprint(self) -> str:
        """SHA-256 (first 16 hex digits) of what results depend on: every person's name and gender (genders guard
        the rules) and every relationship and biography fact with its fact_id, in file order; for a KB whose schema
        is not the family one, first the schema's fingerprint (:meth:`dukb.kb.kbschema.Schema.fingerprint`), so a KB
        without schema.yaml keeps the fingerprint it always had.

        Two KBs with the same fingerprint give the same closure, minimal sets and QA data; a run directory records
        it so that a resume on another KB is refused.
        """

        h = hashlib.sha256()
        if self._schema is not None:
            h.update(f"S|{self._schema.fingerprint()}\n".encode())
        people, rels, bios = list(self.people.values()), self.relationships, self.biographies
        step = 1 << 15  # the same bytes as one update per line, hashed in chunks (faster on large KBs)
        for k in range(0, len(people), step):
            h.update("".join([f"P|{p.name}|{p.gender}\n" for p in people[k : k + step]]).encode())
        for k in range(0, len(rels), step):
            h.update(
                "".join([f"R|{f.fact_id}|{f.subject}|{f.relation}|{f.object}\n" for f in rels[k : k + step]]).encode()
            )
        for k in range(0, len(bios), step):
            h.update(
                "".join([f"B|{f.fact_id}|{f.subject}|{f.attribute}|{f.value}\n" for f in bios[k : k + step]]).encode()
            )
        return h.hexdigest()[:16]

    def __repr__(self) -> str:
        return (
            f"KB({len(self.people)} people, {len(self.relationships)} relationship facts, "
            f"{len(self.biographies)} biography facts, source={self.source})"
        )
