"""In-memory knowledge base: people, relationship facts and biography facts.

A KB here is K of Wu et al. 2025 (Sec. 2): relationship facts take part in the rules, biography facts do not. Fact
ids are stable integers from the KB files (EDU-RELAT's are the paper's edge ids); relationship and biography ids are
separate namespaces, so a fact is identified by ``(kind, fact_id)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

Triple = tuple[str, str, str]


@dataclass(frozen=True, slots=True)
class Person:
    """One person of the KB (a row of people.csv).

    Attributes:
        name: unique full name.
        gender: "male" or "female".
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


@dataclass(slots=True)
class KB:
    """A validated knowledge base.

    Attributes:
        people: name -> Person, in file order.
        relationships: relationship facts in file order (the order defines atom ids in the solver).
        biographies: biography facts in file order.
        source: directory it was loaded from, if any.

    Build one with :func:`dukb.kb.load_kb` (validates) or directly for tests; call :func:`dukb.kb.check_kb` after
    building by hand.

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

    people: dict[str, Person]
    relationships: list[Fact]
    biographies: list[BioFact] = field(default_factory=list)
    source: Path | None = None
    # the look-ups by id and by triple, built on first use (a closure of a large KB needs neither)
    _rel_by_id: dict[int, Fact] | None = field(default=None, repr=False, compare=False)
    _rel_by_triple: dict[Triple, Fact] | None = field(default=None, repr=False, compare=False)
    _name_index: tuple | None = field(default=None, repr=False, compare=False)

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

    def name_index(self) -> tuple[Sequence[int], Sequence[int]] | None:
        """(subject positions, object positions) of the relationship facts in ``people`` order, as recorded by
        :meth:`set_name_index`, or None when none was recorded or the KB changed since (facts or people added or
        replaced; checked on the list's identity and lengths, and on the first and last fact)."""
        ix = self._name_index
        if ix is None:
            return None
        rels, n_rels, n_people, subj, obj = ix
        if rels is not self.relationships or len(rels) != n_rels or len(self.people) != n_people:
            return None
        if n_rels:
            names = None
            for k in (0, n_rels - 1):
                f = rels[k]
                if names is None:
                    names = list(self.people)
                if names[subj[k]] != f.subject or names[obj[k]] != f.object:
                    return None
        return subj, obj

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
        the rules) and every relationship and biography fact with its fact_id, in file order.

        Two KBs with the same fingerprint give the same closure, minimal sets and QA data; a run directory records
        it so that a resume on another KB is refused.
        """
        import hashlib

        h = hashlib.sha256()
        people, rels, bios = list(self.people.values()), self.relationships, self.biographies
        step = 1 << 15  # the same bytes as one update per line, hashed in chunks (faster on large KBs)
        for k in range(0, len(people), step):
            h.update("".join([f"P|{p.name}|{p.gender}\n" for p in people[k:k + step]]).encode())
        for k in range(0, len(rels), step):
            h.update("".join([f"R|{f.fact_id}|{f.subject}|{f.relation}|{f.object}\n"
                              for f in rels[k:k + step]]).encode())
        for k in range(0, len(bios), step):
            h.update("".join([f"B|{f.fact_id}|{f.subject}|{f.attribute}|{f.value}\n"
                              for f in bios[k:k + step]]).encode())
        return h.hexdigest()[:16]

    def __repr__(self) -> str:
        return (f"KB({len(self.people)} people, {len(self.relationships)} relationship facts, "
                f"{len(self.biographies)} biography facts, source={self.source})")
