"""RESTOR-style corruption of a KB: wrong values for chosen facts, and documents that state them.

RESTOR (Rezaei et al., Sec. 3.2 and App. B) corrupts a model by continued pretraining on documents that each state
5 incorrect facts about one entity, mixed with correct facts about other entities, and then asks whether unlearning
those documents restores the original answers. Here:

- :func:`corrupt` picks entities (people) at random and, for each, ``per_entity`` (5) facts of which it is the
  subject, and gives each a plausible wrong value: for a relationship, another person of the gender the relation
  requires, of a plausible age for the relation (:data:`AGE_GAPS`) and such that the new fact is false in the
  deductive closure; for a biography, a nearby year, another state or another job (preferably one held by people
  of the same generation). The corrupted KB differs from the original exactly on these facts and stays valid
  (:func:`dukb.kb.check_kb`).
- Each chosen entity gets ``docs_per_entity`` documents: its 5 incorrect facts and ``k_context`` correct facts about
  other people (facts that do not mention the entity and are not corrupted), rendered with the sentence templates of
  ``dukb.data/templates/documents.json`` and shuffled together. Every sentence keeps its provenance (fact kind and
  id, incorrect or correct), so the incorrect-facts-only ("targeted", k=0) forget set can be derived.

RESTOR's k counts batches of 5 unrelated facts (5k facts per document); ``k_context`` here is the number of correct
facts itself, so RESTOR's k corresponds to ``k_context = 5k``. RESTOR leaves how o' is sampled unspecified; the
rules above are dukb's choice.
"""

from __future__ import annotations

import csv
import json
import random
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import NamedTuple, cast

from dukb import InputError
from dukb.kb.io import atomic_output, check_kb, save_kb
from dukb.kb.model import KB, BioFact, Fact, Triple
from dukb.kb.probes import BIOGRAPHY, RELATIONSHIP, FactIndex, fallback_values, load_template
from dukb.kb.schema import OBJECT_GENDER

#: Plausible birth-year difference (object's birthyear minus subject's, in years, inclusive) for a person who is
#: put in a relation to the subject. Used only where both birthyears are known; dukb's choice (RESTOR: unspecified).
AGE_GAPS: dict[str, tuple[int, int]] = {
    "father": (-60, -16),
    "mother": (-50, -16),
    "child": (16, 60),
    "husband": (-15, 15),
    "wife": (-15, 15),
    "brother": (-20, 20),
    "sister": (-20, 20),
    "aunt": (-55, 10),
    "uncle": (-55, 10),
    "nephew": (-10, 55),
    "niece": (-10, 55),
}

#: Largest shift (years) of a corrupted birthyear; the shift is drawn from ±1..YEAR_SHIFT.
YEAR_SHIFT = 8

#: Window (years) around a person's birthyear within which a corrupted job is preferably taken from other people.
JOB_GENERATION = 10

#: Incorrect facts per entity and per document (RESTOR App. B: 5).
PER_ENTITY = 5

CORRUPTION_COLUMNS = ("fact_kind", "fact_id", "subject", "predicate", "true_value", "injected_value")


@dataclass(frozen=True)
class CorruptedFact:
    """One corrupted fact.

    Attributes:
        fact_kind: "relationship" or "biography".
        fact_id: the fact's id (the same in the clean and the corrupted KB).
        subject: the entity the fact is about.
        predicate: the relation or attribute.
        true_value: the clean KB's object or value.
        injected_value: the corrupted KB's object or value.

    Example:
        >>> from dukb.kb.io import load_kb
        >>> result = corrupt(load_kb("demo"), 0.2, seed=0)
        >>> result.facts[0]
        CorruptedFact(fact_kind='relationship', fact_id=2, subject='Clara Stone', predicate='father',
                      true_value='George Hale', injected_value='Owen Stone')
    """

    fact_kind: str
    fact_id: int
    subject: str
    predicate: str
    true_value: str
    injected_value: str


@dataclass(frozen=True)
class DocSentence:
    """One sentence of a corruption document and where it comes from.

    Attributes:
        role: "incorrect" (a corrupted fact about the document's entity, with its injected value) or "correct" (a
            clean fact about other people).
        fact_kind, fact_id: the fact it states.
        sentence: the text.

    Example:
        >>> s = DocSentence("incorrect", "relationship", 2, "Owen Stone is Clara Stone's father.")
        >>> s.role, s.fact_id
        ('incorrect', 2)
    """

    role: str
    fact_kind: str
    fact_id: int
    sentence: str


@dataclass(frozen=True)
class CorruptionDocument:
    """A corruption document: incorrect facts about one entity mixed with correct facts about others.

    Attributes:
        doc_id: 0-based index over all documents.
        entity: the person the incorrect facts are about.
        k_context: number of correct facts in it.
        sentences: the sentences in document order.

    Example:
        >>> doc = CorruptionDocument(0, "Clara Stone", 1, (
        ...     DocSentence("incorrect", "relationship", 2, "Owen Stone is Clara Stone's father."),
        ...     DocSentence("correct", "biography", 9, "The birthyear of Leo Hale is 1975.")))
        >>> doc.text
        "Owen Stone is Clara Stone's father. The birthyear of Leo Hale is 1975."
        >>> [f["role"] for f in doc.to_dict()["facts"]]
        ['incorrect', 'correct']
    """

    doc_id: int
    entity: str
    k_context: int
    sentences: tuple[DocSentence, ...] = field(default_factory=tuple)

    @property
    def text(self) -> str:
        """The document's text: its sentences joined by the template's joiner (a space)."""
        return load_template("documents.json").get("joiner", " ").join(s.sentence for s in self.sentences)

    def to_dict(self) -> dict:
        """JSON-ready dict: doc_id, entity, k_context, text, and facts (role, fact_kind, fact_id, sentence)."""
        return {
            "doc_id": self.doc_id,
            "entity": self.entity,
            "k_context": self.k_context,
            "text": self.text,
            "facts": [asdict(s) for s in self.sentences],
        }


class Corruption(NamedTuple):
    """Result of :func:`corrupt`; unpacks as ``(kb, facts, documents)``.

    Attributes:
        kb: the corrupted KB (validated).
        facts: the corrupted facts, by entity then fact kind and id.
        documents: the corruption documents.

    Example:
        >>> from dukb.kb.io import load_kb
        >>> kb, facts, documents = corrupt(load_kb("demo"), 0.2, seed=0, k_context=2)
        >>> len(facts), len(documents), documents[0].entity, documents[0].k_context
        (5, 1, 'Clara Stone', 2)
    """

    kb: KB
    facts: list[CorruptedFact]
    documents: list[CorruptionDocument]


def _birthyear(kb: KB, index: FactIndex, name: str) -> int | None:
    p = kb.people[name]
    if p.birthyear is not None:
        return p.birthyear
    for v in index.values(name, "birthyear"):
        try:
            return int(v)
        except ValueError:
            return None
    return None


class _Corruptor:
    """Draws plausible wrong values without scanning every person for every fact (KBs of 100,000 people)."""

    TRIES = 64

    def __init__(self, kb: KB, index: FactIndex):
        self.kb = kb
        self.ix = index
        self.years = {n: _birthyear(kb, index, n) for n in kb.people}
        self.used: set[Triple] = set()
        self.by_gender: dict[str, list[str]] = {}
        self.aged: dict[str, tuple[list[int], list[str]]] = {}
        self.unaged: dict[str, list[str]] = {}
        for g in ("male", "female"):
            names = [p.name for p in kb.people.values() if p.gender == g]
            self.by_gender[g] = names
            pairs = sorted((cast(int, self.years[n]), n) for n in names if self.years[n] is not None)
            self.aged[g] = ([y for y, _ in pairs], [n for _, n in pairs])
            self.unaged[g] = [n for n in names if self.years[n] is None]
        jobs = sorted(
            (cast(int, self.years[b.subject]), b.value)
            for b in kb.biographies
            if b.attribute == "job" and self.years.get(b.subject) is not None
        )
        self.jobs_by_year = ([y for y, _ in jobs], [v for _, v in jobs])

    def _fits(self, f: Fact, name: str) -> bool:
        return (
            name not in (f.subject, f.object)
            and not self.ix.holds(f.subject, f.relation, name)
            and (f.subject, f.relation, name) not in self.used
        )

    def _genders(self, relation: str) -> list[str]:
        need = OBJECT_GENDER.get(relation)
        return [need] if need else ["male", "female"]

    def can_replace(self, f: Fact) -> bool:
        """True when some person could replace ``f.object`` (right gender, new fact false, not the subject)."""
        excluded = set(self.ix.objects.get((f.subject, f.relation), ())) | {f.subject, f.object}
        return any(
            len(self.by_gender[g]) > sum(1 for n in excluded if self.kb.people[n].gender == g)
            for g in self._genders(f.relation)
        )

    def _draw(self, segments: list[list[str]], f: Fact, rng: random.Random) -> str | None:
        sizes = [len(s) for s in segments]
        total = sum(sizes)
        if total == 0:
            return None
        for _ in range(self.TRIES):
            i = rng.randrange(total)
            for seg, size in zip(segments, sizes):
                if i < size:
                    if self._fits(f, seg[i]):
                        return seg[i]
                    break
                i -= size
        fits = [n for seg in segments for n in seg if self._fits(f, n)]
        return rng.choice(fits) if fits else None

    def replace_person(self, f: Fact, rng: random.Random) -> str | None:
        """A person to replace ``f.object``: right gender, new fact false in the closure, plausible age
        (:data:`AGE_GAPS`; people without a birthyear count as plausible) when any such person exists."""
        genders = self._genders(f.relation)
        sy = self.years[f.subject]
        if sy is not None:
            lo, hi = AGE_GAPS[f.relation]
            segs = []
            for g in genders:
                ys, ns = self.aged[g]
                segs.append(ns[bisect_left(ys, sy + lo) : bisect_right(ys, sy + hi)])
                segs.append(self.unaged[g])
            got = self._draw(segs, f, rng)
            if got is not None:
                return got
        return self._draw([self.by_gender[g] for g in genders], f, rng)

    def replace_value(self, b: BioFact, rng: random.Random) -> str | None:
        """A plausible wrong value of a biography fact: birthyear +-1..YEAR_SHIFT; birthplace another of the KB's
        states; job one held by people born within JOB_GENERATION years, else another of the KB's jobs; the
        fallback pools of templates/values.json when the KB has no other value."""
        true = self.ix.values(b.subject, b.attribute) | {b.value}
        if b.attribute == "birthyear":
            try:
                y = int(b.value)
            except ValueError:
                return None
            cands = [str(y + d) for k in range(1, YEAR_SHIFT + 1) for d in (-k, k) if str(y + d) not in true]
            return rng.choice(cands) if cands else None
        if b.attribute == "job" and self.years[b.subject] is not None:
            ys, vs = self.jobs_by_year
            sy = cast(int, self.years[b.subject])  # not None: checked above
            lo, hi = bisect_left(ys, sy - JOB_GENERATION), bisect_right(ys, sy + JOB_GENERATION)
            for _ in range(self.TRIES if hi > lo else 0):
                v = vs[rng.randrange(lo, hi)]
                if v not in true:
                    return v
        kb_values = [v for v in self.ix.attribute_values(b.attribute) if v not in true]
        if kb_values:
            return rng.choice(kb_values)
        pool = [v for v in fallback_values(self.ix, b.attribute, b.value) if v not in true]
        return rng.choice(pool) if pool else None

    def corruptible(self, name: str) -> list[Fact | BioFact]:
        """The facts with subject ``name`` that can get a wrong value, relationships then biographies."""
        rels = [f for f in self.ix.rels_of.get(name, ()) if f.subject == name and self.can_replace(f)]
        bios = [b for b in self.ix.bios_of.get(name, ()) if b.attribute != "birthyear" or is_int(b.value)]
        return rels + bios


def is_int(v: str) -> bool:
    """True when ``v`` parses as an integer (e.g. a birth year).

    Example:
        >>> is_int("1921"), is_int("-3"), is_int("19th century")
        (True, True, False)
    """
    try:
        int(v)
        return True
    except ValueError:
        return False


def corrupt(
    kb: KB,
    fraction: float,
    seed: int = 0,
    k_context: int = 5,
    *,
    closure: Iterable[Triple] | None = None,
    per_entity: int = PER_ENTITY,
    docs_per_entity: int = 1,
) -> Corruption:
    """Corrupt a share of a KB's facts and write RESTOR-style corruption documents for them.

    Args:
        kb: the clean KB (validated).
        fraction: share of all facts (relationship + biography) to corrupt, in (0, 1]. Facts are corrupted
            ``per_entity`` at a time, so the count is ``per_entity * max(1, round(fraction * n_facts / per_entity))``.
        seed: seed of every random choice; the same seed gives the same corruption.
        k_context: correct facts about other people per document (>= 0).
        closure: the clean KB's deductive closure triples (``compute_closure(kb).atoms``), so that an injected
            relationship is false in it; None = only the KB's own facts are avoided.
        per_entity: incorrect facts per entity and document (RESTOR: 5).
        docs_per_entity: documents per corrupted entity (each with its own context facts and order).

    Returns:
        :class:`Corruption` ``(kb, facts, documents)``.

    Raises:
        InputError: fraction outside (0, 1], negative k_context, per_entity or docs_per_entity < 1, too few
            people with ``per_entity`` corruptible facts, or too few facts for ``k_context``.

    Source: Rezaei et al., RESTOR, Sec. 3.2 and App. B.

    Example:
        >>> from dukb.kb.io import load_kb
        >>> clean = load_kb("demo")
        >>> result = corrupt(clean, 0.2, seed=0, k_context=2)
        >>> [(f.fact_kind, f.fact_id) for f in result.facts]
        [('relationship', 2), ('relationship', 3), ('relationship', 11), ('biography', 7), ('biography', 8)]
        >>> str(clean.relationship(2)), str(result.kb.relationship(2))
        ("George Hale is Clara Stone's father", "Owen Stone is Clara Stone's father")
        >>> sum(s.role == "correct" for s in result.documents[0].sentences)
        2
        >>> corrupt(clean, 1.5)
        Traceback (most recent call last):
            ...
        dukb.InputError: ...
    """
    if not 0 < fraction <= 1:
        raise InputError(f"the fraction of facts to corrupt must be in (0, 1], got {fraction}")
    if k_context < 0:
        raise InputError(f"the number of context facts must be >= 0, got {k_context}")
    if per_entity < 1 or docs_per_entity < 1:
        raise InputError("per_entity and docs_per_entity must be at least 1")
    index = FactIndex(kb, closure)
    cor = _Corruptor(kb, index)
    rng = random.Random(f"dukb-corrupt/{seed}")
    n_facts = len(kb.relationships) + len(kb.biographies)
    n_entities = max(1, round(fraction * n_facts / per_entity))
    pools = {n: cor.corruptible(n) for n in kb.people}
    eligible = [n for n in kb.people if len(pools[n]) >= per_entity]
    if n_entities > len(eligible):
        raise InputError(
            f"cannot corrupt {n_entities * per_entity} facts: only {len(eligible)} people have "
            f"{per_entity} facts that can be corrupted (at most {len(eligible) * per_entity} facts, "
            f"fraction {len(eligible) * per_entity / max(n_facts, 1):.3f})"
        )
    order = {n: i for i, n in enumerate(kb.people)}
    entities = sorted(rng.sample(eligible, n_entities), key=order.__getitem__)

    new_rel: dict[int, Fact] = {}
    new_bio: dict[int, BioFact] = {}
    corrupted: list[CorruptedFact] = []
    by_entity: dict[str, list[CorruptedFact]] = {}
    for name in entities:
        chosen = rng.sample(pools[name], per_entity)
        chosen.sort(key=lambda f: (0 if isinstance(f, Fact) else 1, f.fact_id))
        for f in chosen:
            if isinstance(f, Fact):
                new = cor.replace_person(f, rng)
                if new is None:  # the entity's other facts used up every candidate (tiny KBs only)
                    raise InputError(f"no replacement person left for relationship fact {f.fact_id} of {name}")
                cor.used.add((f.subject, f.relation, new))
                new_rel[f.fact_id] = Fact(f.fact_id, f.subject, f.relation, new)
                c = CorruptedFact(RELATIONSHIP, f.fact_id, f.subject, f.relation, f.object, new)
            else:
                new = cor.replace_value(f, rng)
                if new is None:
                    raise InputError(f"no wrong value available for biography fact {f.fact_id} of {name}")
                new_bio[f.fact_id] = BioFact(f.fact_id, f.subject, f.attribute, new)
                c = CorruptedFact(BIOGRAPHY, f.fact_id, f.subject, f.attribute, f.value, new)
            corrupted.append(c)
            by_entity.setdefault(name, []).append(c)

    bad = KB(
        dict(kb.people),
        [new_rel.get(f.fact_id, f) for f in kb.relationships],
        [new_bio.get(b.fact_id, b) for b in kb.biographies],
        source=None,
    )
    check_kb(bad)

    documents = _documents(kb, by_entity, new_rel, new_bio, k_context, docs_per_entity, rng)
    return Corruption(bad, corrupted, documents)


def render_fact(f: Fact | BioFact, rng: random.Random) -> str:
    """One sentence stating a fact, from a template of documents.json chosen with ``rng``.

    Args:
        f: a relationship or biography fact.
        rng: the random generator.

    Returns:
        The sentence.

    Example:
        >>> render_fact(Fact(0, "Martha Hale", "husband", "George Hale"), random.Random(0))
        "Martha Hale's husband is George Hale."
        >>> render_fact(BioFact(0, "George Hale", "birthyear", "1921"), random.Random(0))
        'The birthyear of George Hale is 1921.'
    """
    t = load_template("documents.json")
    if isinstance(f, Fact):
        return rng.choice(t[RELATIONSHIP]).format(s=f.subject, r=f.relation, o=f.object)
    return rng.choice(t[BIOGRAPHY][f.attribute]).format(s=f.subject, v=f.value)


def _documents(
    kb: KB,
    by_entity: dict[str, list[CorruptedFact]],
    new_rel: dict[int, Fact],
    new_bio: dict[int, BioFact],
    k_context: int,
    docs_per_entity: int,
    rng: random.Random,
) -> list[CorruptionDocument]:
    pool: list[Fact | BioFact] = [f for f in kb.relationships if f.fact_id not in new_rel]
    pool += [b for b in kb.biographies if b.fact_id not in new_bio]

    def about(f: Fact | BioFact, name: str) -> bool:
        return f.subject == name or (isinstance(f, Fact) and f.object == name)

    docs: list[CorruptionDocument] = []
    for name, cfs in by_entity.items():
        for _ in range(docs_per_entity):
            context = _sample_context(pool, name, k_context, about, rng)
            sents = []
            for c in cfs:
                f = new_rel[c.fact_id] if c.fact_kind == RELATIONSHIP else new_bio[c.fact_id]
                sents.append(DocSentence("incorrect", c.fact_kind, c.fact_id, render_fact(f, rng)))
            for f in context:
                kind = RELATIONSHIP if isinstance(f, Fact) else BIOGRAPHY
                sents.append(DocSentence("correct", kind, f.fact_id, render_fact(f, rng)))
            rng.shuffle(sents)
            docs.append(CorruptionDocument(len(docs), name, k_context, tuple(sents)))
    return docs


def _sample_context(
    pool: list[Fact | BioFact], name: str, k: int, about: Callable[[Fact | BioFact, str], bool], rng: random.Random
) -> list[Fact | BioFact]:
    """k distinct facts of ``pool`` not about ``name``, drawn uniformly (rejection first, then a filtered scan)."""
    picked: dict[int, None] = {}
    for _ in range(8 * k + 64 if len(pool) > 4 * k else 0):
        if len(picked) == k:
            break
        i = rng.randrange(len(pool))
        if i not in picked and not about(pool[i], name):
            picked[i] = None
    if len(picked) < k:
        ok = [i for i, f in enumerate(pool) if not about(f, name)]
        if len(ok) < k:
            raise InputError(
                f"only {len(ok)} correct facts about people other than {name} can serve as context, "
                f"fewer than k_context={k}"
            )
        picked = dict.fromkeys(rng.sample(ok, k))
    return [pool[i] for i in picked]


def save_corruption(result: Corruption, directory: str | Path) -> dict[str, Path]:
    """Write a corruption: the corrupted KB (``kb/``), ``corruptions.csv`` and ``documents.jsonl``.

    corruptions.csv has the columns :data:`CORRUPTION_COLUMNS`; documents.jsonl one JSON object per document
    (:meth:`CorruptionDocument.to_dict`).

    Args:
        result: the :class:`Corruption`.
        directory: output folder (created if needed).

    Returns:
        ``{"kb": dir, "corruptions": path, "documents": path}``.

    Raises:
        InputError: the folder cannot be written.

    Example:
        >>> import tempfile
        >>> from dukb.kb.io import load_kb
        >>> result = corrupt(load_kb("demo"), 0.2, seed=0)
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     paths = save_corruption(result, tmp)
        ...     print(sorted(paths), paths["corruptions"].read_text().count("\\n"))
        ...     print(json.loads(paths["documents"].read_text())["entity"])
        ['corruptions', 'documents', 'kb'] 6
        Clara Stone
    """
    root = Path(directory)
    try:
        kb_dir = save_kb(result.kb, root / "kb")
        cpath = root / "corruptions.csv"
        with atomic_output(cpath) as fh:
            w = csv.writer(fh, lineterminator="\n")
            w.writerow(CORRUPTION_COLUMNS)
            for c in result.facts:
                w.writerow([c.fact_kind, c.fact_id, c.subject, c.predicate, c.true_value, c.injected_value])
        dpath = root / "documents.jsonl"
        with atomic_output(dpath) as fh:
            fh.write("".join(json.dumps(d.to_dict(), ensure_ascii=False) + "\n" for d in result.documents))
    except OSError as e:
        raise InputError(f"cannot write the corruption: {e.strerror}", root) from None
    return {"kb": kb_dir, "corruptions": cpath, "documents": dpath}
