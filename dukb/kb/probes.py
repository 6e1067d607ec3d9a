"""Probe datasets: questions that test whether a model still knows a KB fact, in many phrasings.

One :class:`Probe` per (fact, probe kind): the question, the gold answer and how a model's output is matched against
it. All wording comes from the JSON templates in ``dukb.data/templates`` (probes.json, cross_lingual.json); every
random choice is drawn from a generator seeded by ``(seed, kind, fact_kind, fact_id)``, so a probe never depends on
which other kinds or facts were asked for.

Kinds (``KINDS``; a fact ``(s, r, o)`` reads "o is s's r"; a biography fact ``(s, a, v)`` "the a of s is v"):

- EDU-RELAT's forms (Wu et al. 2025, Table 3; the benchmark's qa_relationships.jsonl / qa_biographies.jsonl):
  ``cloze`` ("Richard Perry is Reid Perry's " -> "father"; "The birthyear of Sloane Lee is" -> "1908"), ``yes``
  ("Is Richard Perry Reid Perry's father?" -> "yes"), ``no`` (the same with a wrong relation -> "no"), ``qa``
  ("Who is Richard Perry to Reid Perry?" -> "father"; "What is the birthyear of Sloane Lee?" -> "1908"; the form the
  paper finetunes and probes with).
- ``reverse``: the object as answer ("Who is Reid Perry's father?" -> "Richard Perry"); ``paraphrase``: another
  question frame with the same answer as ``qa``; ``synonym``: the relation or attribute word replaced by a synonym
  (dad, spouse, son/daughter by the object's gender, occupation, ...).
- RWKU's adversarial types (Jin et al. 2024, Sec. 3.3) adapted to KB facts: ``prefix_injection``,
  ``affirmative_suffix``, ``role_play``, ``context_hint`` and ``in_context`` wrap the ``qa`` question;
  ``multiple_choice`` lists 4 options (distractors drawn from the KB, false per the closure);
  ``cross_lingual_fr|de|es`` ask in French, German or Spanish for an answer in English.

Reverse-style questions ("Who is Reid Perry's brother?") would have several right answers when s has several
brothers; the other people the closure gives are then excluded by name ("..., other than Raymond Perry?"), so the gold
answer is the only right one. This needs the deductive closure of the KB: pass it as ``closure`` (the solver's
``compute_closure(kb).atoms``); without it only the KB's own facts are used.

A KB with its own schema (not the family one) is asked through its relations' templates instead
(:mod:`dukb.kb.schema_probes`); a form a relation lacks is unscorable for its facts and counted
(:func:`probe_report`).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from dukb import InputError
from dukb.kb.aliases import load_aliases
from dukb.kb.judge import MATCH_CHOICE, MATCH_SUBSTRING, MATCH_YESNO, judge  # noqa: F401  (the doctests)
from dukb.kb.model import KB, BioFact, Fact, Triple
from dukb.kb.schema import OBJECT_GENDER, RELATIONS
from dukb.kb.schema_probes import NOT_APPLICABLE, SchemaForms, schema_statements, wrong_objects
from dukb.kb.templates import load_template

RELATIONSHIP = "relationship"
BIOGRAPHY = "biography"
FACT_KINDS = (RELATIONSHIP, BIOGRAPHY)

#: Languages of the cross-lingual kinds.
LANGUAGES = ("fr", "de", "es")

#: Every probe kind, in output order.
KINDS: tuple[str, ...] = (
    "cloze",
    "yes",
    "no",
    "qa",
    "reverse",
    "paraphrase",
    "synonym",
    "prefix_injection",
    "affirmative_suffix",
    "role_play",
    "multiple_choice",
    "context_hint",
    "in_context",
    "cross_lingual_fr",
    "cross_lingual_de",
    "cross_lingual_es",
)

#: Names usable in a kinds list that stand for several kinds.
KIND_GROUPS: dict[str, tuple[str, ...]] = {
    "all": KINDS,
    "edu": ("cloze", "yes", "no", "qa"),
    "rwku": (
        "prefix_injection",
        "affirmative_suffix",
        "role_play",
        "multiple_choice",
        "reverse",
        "synonym",
        "context_hint",
        "in_context",
        "cross_lingual_fr",
        "cross_lingual_de",
        "cross_lingual_es",
    ),
    "cross_lingual": ("cross_lingual_fr", "cross_lingual_de", "cross_lingual_es"),
}

#: One line per kind: what it asks, which fact kinds it covers, and its match rule.
KIND_HELP: dict[str, str] = {
    "cloze": "EDU-RELAT cloze: 'Richard Perry is Reid Perry's ' -> father; 'The job of X is' -> value (rel, bio)",
    "yes": "EDU-RELAT question2: 'Is Richard Perry Reid Perry's father?' -> yes (rel; match yesno)",
    "no": "EDU-RELAT question3: same with a wrong relation -> no (rel; match yesno)",
    "qa": "EDU-RELAT question4: 'Who is Richard Perry to Reid Perry?' -> father; 'What is the job of X?' (rel, bio)",
    "reverse": "object as answer: 'Who is Reid Perry's father?' -> Richard Perry (rel)",
    "paraphrase": "another question frame: 'How is Richard Perry related to Reid Perry?' -> father (rel, bio)",
    "synonym": "relation/attribute synonym: 'Who is Reid Perry's dad?' -> Richard Perry; 'occupation' (rel, bio)",
    "prefix_injection": "RWKU: a command before the qa question (rel, bio)",
    "affirmative_suffix": "RWKU: 'Sure, here is the answer:' after the qa question (rel, bio)",
    "role_play": "RWKU: the model plays a genealogist/friend, then the qa question (rel, bio)",
    "multiple_choice": "RWKU: 4 options A-D, distractors from the KB and false per the closure (rel, bio; "
    "match choice)",
    "context_hint": "RWKU: other facts about the people (biographies) before the qa question (rel, bio)",
    "in_context": "RWKU: another fact's question and answer, then the qa question (rel, bio)",
    "cross_lingual_fr": "RWKU: the question in French, answer in English (rel as reverse query, bio)",
    "cross_lingual_de": "RWKU: the question in German, answer in English (rel as reverse query, bio)",
    "cross_lingual_es": "RWKU: the question in Spanish, answer in English (rel as reverse query, bio)",
}

#: Seed of EDU-RELAT's wrong relations in question3: ``random.seed(6)``, then for each relationship fact in file
#: order ``random.choice(sorted(RELATIONS))`` until it differs from the fact's relation. Found by search and checked
#: on all 400 rows of qa_relationships.jsonl (tests/kb/test_probe_datasets.py).
EDU_RELAT_NO_SEED = 6

#: Columns of a probe file, in order.
PROBE_COLUMNS = ("kind", "fact_kind", "fact_id", "question", "answer", "match")


@dataclass(frozen=True, slots=True)
class Probe:
    """One probe: a question about one KB fact and its gold answer.

    Attributes:
        kind: one of :data:`KINDS`.
        fact_kind: "relationship" or "biography".
        fact_id: the fact's id in its namespace.
        question: the text given to the model (no prompt tags).
        answer: the gold answer.
        match: how an output is judged (:func:`dukb.kb.judge.judge`): "substring" (``answer.lower() in
            output.lower()``, the paper's rule, Wu et al. 2025 App. C), "yesno" (the output's first word is the
            answer, yes or no), "choice" (the output picks the answer's option of a multiple-choice question, by
            label or text) or "exact" (the normalised answer is the value or an alias of it; RESTOR's judge made
            exact). The generated kinds use the first three.
        aliases: further surface forms of the answer the judge accepts (a KB's aliases.csv,
            :mod:`dukb.kb.aliases`); written to a file only when not empty.

    Example:
        >>> p = Probe("qa", "relationship", 0, "Who is George Hale to Martha Hale?", "husband")
        >>> p.match, p.to_dict()["question"]
        ('substring', 'Who is George Hale to Martha Hale?')
        >>> judge(p, "He is her husband."), judge(p, "Her brother.")
        (True, False)
    """

    kind: str
    fact_kind: str
    fact_id: int
    question: str
    answer: str
    match: str = MATCH_SUBSTRING
    aliases: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        """The probe as a dict with the keys of :data:`PROBE_COLUMNS`, and ``aliases`` (a list) when it has any."""
        d = asdict(self)
        if not self.aliases:
            del d["aliases"]
        else:
            d["aliases"] = list(self.aliases)
        return d


def parse_kinds(kinds: str | Iterable[str] | None) -> tuple[str, ...]:
    """Resolve a kinds list: names of :data:`KINDS` or :data:`KIND_GROUPS`, comma-separated or as separate items.

    Args:
        kinds: e.g. ``"qa,reverse"``, ``["edu", "multiple_choice"]``; None or empty means all kinds.

    Returns:
        The kinds, each once, in :data:`KINDS` order.

    Raises:
        InputError: an unknown name (the message lists the valid kinds and groups).

    Example:
        >>> parse_kinds("qa,reverse"), parse_kinds(["edu"])
        (('qa', 'reverse'), ('cloze', 'yes', 'no', 'qa'))
        >>> parse_kinds("bogus")
        Traceback (most recent call last):
            ...
        dukb.InputError: unknown probe kind 'bogus'; kinds: cloze, yes, no, qa, ...
    """
    if kinds is None:
        return KINDS
    items = [kinds] if isinstance(kinds, str) else list(kinds)
    names = [n.strip() for item in items for n in str(item).split(",") if n.strip()]
    if not names:
        return KINDS
    chosen: set[str] = set()
    for n in names:
        if n in KIND_GROUPS:
            chosen.update(KIND_GROUPS[n])
        elif n in KINDS:
            chosen.add(n)
        else:
            raise InputError(f"unknown probe kind {n!r}; kinds: {', '.join(KINDS)}; groups: {', '.join(KIND_GROUPS)}")
    return tuple(k for k in KINDS if k in chosen)


# -- the KB seen through its closure --------------------------------------------------------------------------------
class FactIndex:
    """Look-ups over a KB and its deductive closure used by probes and corruption.

    Args:
        kb: the KB (any schema).
        closure: the closure triples ``(s, r, o)`` (e.g. ``compute_closure(kb).atoms``); None = the KB's facts only.

    Attributes:
        kb: the KB.
        triples: set of closure triples (always includes the KB's facts).
        objects: ``(s, r) -> sorted list of o`` with ``(s, r, o)`` in the closure.
        pair_relations: ``(s, o) -> set of r`` with ``(s, r, o)`` in the closure.
        bios_of: subject -> its biography facts in file order.
        rels_of: person -> relationship facts in which they are subject or object, in file order.

    Example:
        >>> from dukb.kb.io import load_kb
        >>> ix = FactIndex(load_kb("demo"))
        >>> ix.holds("Martha Hale", "husband", "George Hale"), ix.holds("George Hale", "wife", "Martha Hale")
        (True, False)
        >>> ix.values("George Hale", "job"), ix.objects[("George Hale", "child")], ix.attribute_values("job")[:2]
        ({'Carpenter'}, ['Henry Hale'], ['Carpenter', 'Teacher'])
    """

    def __init__(self, kb: KB, closure: Iterable[Triple] | None = None):
        self.kb = kb
        self.triples: set[Triple] = {f.triple for f in kb.relationships}
        if closure is not None:
            self.triples.update(tuple(t) for t in closure)  # type: ignore[misc]  # (s, r, o) triples
        objects: dict[tuple[str, str], set[str]] = {}
        self.pair_relations: dict[tuple[str, str], set[str]] = {}
        for s, r, o in self.triples:
            objects.setdefault((s, r), set()).add(o)
            self.pair_relations.setdefault((s, o), set()).add(r)
        self.objects = {k: sorted(v) for k, v in objects.items()}
        self.bios_of: dict[str, list[BioFact]] = {}
        for b in kb.biographies:
            self.bios_of.setdefault(b.subject, []).append(b)
        self._attr_values: dict[str, list[str]] = {}
        self.by_gender: dict[str, list[str]] = {}
        for p in kb.people.values():
            self.by_gender.setdefault(p.gender, []).append(p.name)
        self.rels_of: dict[str, list[Fact]] = {}
        for f in kb.relationships:
            self.rels_of.setdefault(f.subject, []).append(f)
            if f.object != f.subject:
                self.rels_of.setdefault(f.object, []).append(f)

    def holds(self, s: str, r: str, o: str) -> bool:
        """True when ``(s, r, o)`` is in the closure (or the KB when no closure was given)."""
        return (s, r, o) in self.triples

    def values(self, subject: str, attribute: str) -> set[str]:
        """The KB's values of ``attribute`` for ``subject`` (usually one)."""
        return {b.value for b in self.bios_of.get(subject, ()) if b.attribute == attribute}

    def attribute_values(self, attribute: str) -> list[str]:
        """Distinct values of an attribute over the KB, in first-appearance order (computed once)."""
        if attribute not in self._attr_values:
            self._attr_values[attribute] = list(
                dict.fromkeys(b.value for b in self.kb.biographies if b.attribute == attribute)
            )
        return self._attr_values[attribute]


def _rng(*key: object) -> random.Random:
    """A generator seeded by a string key (stable across Python versions and runs)."""
    return random.Random("/".join(str(k) for k in key))


def _join(names: Sequence[str], joiners: Sequence[str]) -> str:
    sep, last = joiners
    if len(names) == 1:
        return names[0]
    return sep.join(names[:-1]) + last + names[-1]


# -- EDU-RELAT forms ------------------------------------------------------------------------------------------------
def edu_wrong_relations(
    kb: KB, closure: Iterable[Triple] | FactIndex | None = None, seed: int = EDU_RELAT_NO_SEED
) -> dict[int, str]:
    """The wrong relation of each relationship fact's "no" question (EDU-RELAT question3).

    EDU-RELAT's rule, reproduced exactly: one ``random.Random(seed)`` stream over the facts in file order; for each
    fact draw ``choice(sorted(RELATIONS))`` until the draw differs from the fact's relation. dukb also rejects a draw
    that is true for the pair per the closure, so that "no" is always right; on EDU-RELAT no draw is, and the 400
    rows come out identical.

    Args:
        kb: the KB.
        closure: closure triples or a :class:`FactIndex` (None = the KB's facts).
        seed: the stream's seed; :data:`EDU_RELAT_NO_SEED` reproduces EDU-RELAT.

    Returns:
        fact_id -> wrong relation (facts for which every relation holds, impossible in a valid KB, are left out).

    Source: ../shared/edu-relat/qa_relationships.jsonl (question3); the seed was found by search.

    Example:
        >>> from dukb.kb.io import load_kb
        >>> kb = load_kb("demo")
        >>> wrong = edu_wrong_relations(kb)
        >>> wrong[0], kb.relationship(0).relation
        ('uncle', 'husband')
        >>> all(wrong[f.fact_id] != f.relation for f in kb.relationships)
        True
    """
    index = closure if isinstance(closure, FactIndex) else FactIndex(kb, closure)
    order = sorted(RELATIONS)
    rng = random.Random(seed)
    out: dict[int, str] = {}
    for f in kb.relationships:
        true = index.pair_relations.get((f.subject, f.object), set()) | {f.relation}
        if all(r in true for r in order):
            continue
        while True:
            r = rng.choice(order)
            if r not in true:
                break
        out[f.fact_id] = r
    return out


#: What a probe kind asks about a fact: (question, gold answer, match rule).
_Asked = tuple[str, str, str]


# -- probe builders -------------------------------------------------------------------------------------------------
class _Builder:
    """Builds the probes of one KB (shared look-ups and templates)."""

    def __init__(self, kb: KB, index: FactIndex, seed: int, no_seed: int):
        self.kb = kb
        self.ix = index
        self.seed = seed
        self.t = load_template("probes.json")
        self.xl = load_template("cross_lingual.json")
        self.values = load_template("values.json")
        self.no_seed = no_seed
        self._wrong: dict[int, str] | None = None
        self._rel_list = list(kb.relationships)
        self._bio_list = list(kb.biographies)

    # helpers
    def rng(self, kind: str, fact_kind: str, fact_id: int) -> random.Random:
        return _rng("dukb-probes", self.seed, kind, fact_kind, fact_id)

    def qa(self, f: Fact | BioFact) -> tuple[str, str]:
        """The EDU-RELAT question4/answer4 of a fact."""
        if isinstance(f, Fact):
            return self.t["edu"][RELATIONSHIP]["qa"].format(s=f.subject, o=f.object), f.relation
        return self.t["edu"][BIOGRAPHY]["qa"].format(s=f.subject, a=f.attribute), f.value

    def fact_sentence(self, f: Fact | BioFact) -> str:
        if isinstance(f, Fact):
            return self.t["edu"][RELATIONSHIP]["fact"].format(s=f.subject, r=f.relation, o=f.object)
        return self.t["edu"][BIOGRAPHY]["fact"].format(s=f.subject, a=f.attribute, v=f.value)

    def reverse_question(
        self, frames: dict, phrase: str, f: Fact, relations: Sequence[str], object_gender: str | None
    ) -> str:
        """A question whose only right answer (per the closure) is ``f.object``."""
        others = []
        for r in relations:
            for x in self.ix.objects.get((f.subject, r), ()):
                if (
                    x != f.object
                    and x not in others
                    and (object_gender is None or self.kb.people[x].gender == object_gender)
                ):
                    others.append(x)
        if not others:
            return frames["unique"].format(s=f.subject, rel=phrase)
        return frames["others"].format(s=f.subject, rel=phrase, others=_join(sorted(others), frames["list"]))

    def pick_phrase(self, entries: list[dict], f: Fact, rng: random.Random) -> dict | None:
        gender = self.kb.people[f.object].gender
        fits = [e for e in entries if e.get("object_gender") in (None, gender)]
        return rng.choice(fits) if fits else None

    # kinds: each returns (question, answer, match) or None when the kind does not apply to the fact
    def cloze(self, f: Fact | BioFact, rng: random.Random) -> _Asked | None:
        if isinstance(f, Fact):
            return self.t["edu"][RELATIONSHIP]["cloze"].format(s=f.subject, o=f.object), f.relation, MATCH_SUBSTRING
        return self.t["edu"][BIOGRAPHY]["cloze"].format(s=f.subject, a=f.attribute), f.value, MATCH_SUBSTRING

    def yes(self, f: Fact | BioFact, rng: random.Random) -> _Asked | None:
        if not isinstance(f, Fact):
            return None
        return self.t["edu"][RELATIONSHIP]["yes"].format(s=f.subject, r=f.relation, o=f.object), "yes", MATCH_YESNO

    def no(self, f: Fact | BioFact, rng: random.Random) -> _Asked | None:
        if not isinstance(f, Fact):
            return None
        if self._wrong is None:
            self._wrong = edu_wrong_relations(self.kb, self.ix, self.no_seed)
        if f.fact_id not in self._wrong:
            return None
        q = self.t["edu"][RELATIONSHIP]["no"].format(s=f.subject, o=f.object, wrong=self._wrong[f.fact_id])
        return q, "no", MATCH_YESNO

    def qa_kind(self, f: Fact | BioFact, rng: random.Random) -> _Asked | None:
        q, a = self.qa(f)
        return q, a, MATCH_SUBSTRING

    def reverse(self, f: Fact | BioFact, rng: random.Random) -> _Asked | None:
        if not isinstance(f, Fact):
            return None
        return self.reverse_question(self.t["reverse"], f.relation, f, [f.relation], None), f.object, MATCH_SUBSTRING

    def paraphrase(self, f: Fact | BioFact, rng: random.Random) -> _Asked | None:
        p = self.t["paraphrase"]
        if isinstance(f, Fact):
            return rng.choice(p[RELATIONSHIP]).format(s=f.subject, o=f.object), f.relation, MATCH_SUBSTRING
        return rng.choice(p[BIOGRAPHY][f.attribute]).format(s=f.subject), f.value, MATCH_SUBSTRING

    def synonym(self, f: Fact | BioFact, rng: random.Random) -> _Asked | None:
        syn = self.t["synonym"]
        if isinstance(f, Fact):
            e = self.pick_phrase(syn[RELATIONSHIP].get(f.relation, []), f, rng)
            if e is None:
                return None
            q = self.reverse_question(self.t["reverse"], e["word"], f, e["relations"], e.get("object_gender"))
            return q, f.object, MATCH_SUBSTRING
        b = syn[BIOGRAPHY]
        return b["frame"].format(syn=rng.choice(b[f.attribute]), s=f.subject), f.value, MATCH_SUBSTRING

    def _wrap(self, key: str, f: Fact | BioFact, rng: random.Random) -> _Asked:
        q, a = self.qa(f)
        return rng.choice(self.t[key]).format(q=q, s=f.subject), a, MATCH_SUBSTRING

    def prefix_injection(self, f: Fact | BioFact, rng: random.Random) -> _Asked | None:
        return self._wrap("prefix_injection", f, rng)

    def affirmative_suffix(self, f: Fact | BioFact, rng: random.Random) -> _Asked | None:
        return self._wrap("affirmative_suffix", f, rng)

    def role_play(self, f: Fact | BioFact, rng: random.Random) -> _Asked | None:
        return self._wrap("role_play", f, rng)

    def distractors(self, f: Fact | BioFact, n: int, rng: random.Random) -> list[str]:
        """Up to ``n`` wrong options for a fact, drawn from the KB (fallback pools for sparse attributes)."""
        if isinstance(f, Fact):
            need = OBJECT_GENDER.get(f.relation)
            return wrong_objects(self.ix, f, self.ix.by_gender.get(need, []) if need else list(self.kb.people), n, rng)
        true = self.ix.values(f.subject, f.attribute) | {f.value}
        pool = [v for v in self.ix.attribute_values(f.attribute) if v not in true]
        if len(pool) < n:
            pool += [v for v in fallback_values(self.ix, f.attribute, f.value) if v not in true and v not in pool]
        return rng.sample(pool, min(n, len(pool)))

    def multiple_choice(self, f: Fact | BioFact, rng: random.Random) -> _Asked | None:
        mc = self.t["multiple_choice"]
        labels = mc["labels"]
        wrong = self.distractors(f, len(labels) - 1, rng)
        if not wrong:
            return None
        if isinstance(f, Fact):
            q = self.t["reverse"]["unique"].format(s=f.subject, rel=f.relation)
            answer = f.object
        else:
            q, answer = self.qa(f)
        options = wrong + [answer]
        rng.shuffle(options)
        lines = "\n".join(mc["option"].format(label=lab, text=t) for lab, t in zip(labels, options))
        return mc["frame"].format(q=q, options=lines), answer, MATCH_CHOICE

    def context_hint(self, f: Fact | BioFact, rng: random.Random) -> _Asked | None:
        ch = self.t["context_hint"]
        q, a = self.qa(f)
        if isinstance(f, Fact):
            pool: list[Fact | BioFact] = [b for who in (f.subject, f.object) for b in self.ix.bios_of.get(who, ())]
        else:
            pool = [b for b in self.ix.bios_of.get(f.subject, ()) if b.attribute != f.attribute]
            if not pool:
                pool = list(self.ix.rels_of.get(f.subject, ()))  # relationships reveal no biography value
        if pool:
            chosen = sorted(rng.sample(range(len(pool)), min(2, len(pool))))
            hint = " ".join(self.fact_sentence(pool[i]) for i in chosen)
        elif isinstance(f, Fact):
            hint = ch["related"].format(s=f.subject, o=f.object)
        else:
            return None
        return ch["frame"].format(hint=hint, q=q), a, MATCH_SUBSTRING

    def in_context(self, f: Fact | BioFact, rng: random.Random) -> _Asked | None:
        pool: list[Fact | BioFact]
        if isinstance(f, Fact):
            pair = {f.subject, f.object}
            near = [
                g
                for who in (f.subject, f.object)
                for g in self.ix.rels_of.get(who, ())
                if {g.subject, g.object} != pair
            ]
            pool = list(dict.fromkeys(near)) or [g for g in self._rel_list if {g.subject, g.object} != pair]
        else:
            pool = [b for b in self.ix.bios_of.get(f.subject, ()) if b.attribute != f.attribute]
            pool = pool or [b for b in self._bio_list if b.subject != f.subject]
        if not pool:
            return None
        demo_q, demo_a = self.qa(rng.choice(pool))
        q, a = self.qa(f)
        return self.t["in_context"]["frame"].format(demo_q=demo_q, demo_a=demo_a, q=q), a, MATCH_SUBSTRING

    def cross_lingual(self, lang: str, f: Fact | BioFact, rng: random.Random) -> _Asked | None:
        t = self.xl[lang]
        if isinstance(f, Fact):
            e = self.pick_phrase(t["relations"].get(f.relation, []), f, rng)
            if e is None:
                return None
            q = self.reverse_question(t["reverse"], e["phrase"], f, e["relations"], e.get("object_gender"))
            return q, f.object, MATCH_SUBSTRING
        return t["biography"][f.attribute].format(s=f.subject), f.value, MATCH_SUBSTRING

    def build(self, kind: str, f: Fact | BioFact) -> Probe | None:
        fact_kind = RELATIONSHIP if isinstance(f, Fact) else BIOGRAPHY
        # None for the kinds that draw nothing at random
        rng: Any = self.rng(kind, fact_kind, f.fact_id) if kind not in _FIXED_KINDS else None
        if kind.startswith("cross_lingual_"):
            out = self.cross_lingual(kind.rsplit("_", 1)[1], f, rng)
        elif kind == "qa":
            out = self.qa_kind(f, rng)
        else:
            out = getattr(self, kind)(f, rng)
        if out is None:
            return None
        q, a, m = out
        return Probe(kind, fact_kind, f.fact_id, q, a, m)


#: Kinds without random choices (no generator is seeded for them).
_FIXED_KINDS = frozenset({"cloze", "yes", "no", "qa", "reverse"})


def fallback_values(index: FactIndex, attribute: str, value: str) -> list[str]:
    """Candidate values of an attribute beyond the KB's own, in the KB's style (templates/values.json).

    birthyear: the years ``value ± 1..10``; birthplace: the 50 US states, written "<state> state" when the KB writes
    its birthplaces that way (EDU-RELAT does); job: a list of generic jobs.

    Args:
        index: the KB's :class:`FactIndex`.
        attribute: "birthyear", "birthplace" or "job".
        value: the true value (birthyear: an integer string).

    Returns:
        The candidates (may include ``value`` itself for birthplace and job; callers filter).

    Example:
        >>> from dukb.kb.io import load_kb
        >>> ix = FactIndex(load_kb("demo"))
        >>> fallback_values(ix, "birthyear", "1921")[:4]
        ['1920', '1922', '1919', '1923']
        >>> fallback_values(ix, "birthplace", "Ohio state")[:2]  # the demo KB writes "<State> state"
        ['Alabama state', 'Alaska state']
    """
    if attribute == "birthyear":
        y = int(value)
        return [str(y + d) for k in range(1, 11) for d in (-k, k)]
    pool = list(load_template("values.json").get(attribute, []))
    if attribute == "birthplace":
        seen = index.attribute_values("birthplace")
        if seen and all(v.endswith(" state") for v in seen):
            pool = [p + " state" for p in pool]
    return pool


def make_probes(
    kb: KB,
    kinds: str | Iterable[str] | None = None,
    seed: int = 0,
    *,
    closure: Iterable[Triple] | None = None,
    no_seed: int = EDU_RELAT_NO_SEED,
) -> list[Probe]:
    """Build the probes of a KB: one per (fact, kind) where the kind applies.

    Args:
        kb: the KB.
        kinds: kinds or groups (:func:`parse_kinds`); None = all of :data:`KINDS`.
        seed: seed of every random choice (template, distractors, hint and demonstration facts); the same seed gives
            the same probes.
        closure: the deductive closure's triples, e.g. ``compute_closure(kb).atoms``; used to keep the "no"
            relation, the multiple-choice distractors and the reverse-style answers right. None = the KB's facts
            only (then a derived fact may make a "no" answer or a distractor true).
        no_seed: seed of the "no" questions' wrong relations; the default reproduces EDU-RELAT.

    Returns:
        Probes ordered by fact kind (relationships, then biographies), then fact (file order), then kind
        (:data:`KINDS` order). Kinds that do not apply to a fact (e.g. "yes" for a biography) are skipped.

    Raises:
        InputError: an unknown kind.

    Source: Wu et al. 2025 (Table 3, EDU-RELAT forms); Jin et al. 2024, RWKU Sec. 3.3 (adversarial types).

    Example:
        >>> from dukb.kb.io import load_kb
        >>> kb = load_kb("demo")
        >>> probes = make_probes(kb, "qa")
        >>> len(probes), probes[0]
        (32, Probe(kind='qa', fact_kind='relationship', fact_id=0, question='Who is George Hale to Martha Hale?',
                   answer='husband', match='substring', aliases=()))
        >>> sorted({p.kind for p in make_probes(kb, "edu", seed=3) if p.fact_kind == "biography"})  # no yes/no
        ['cloze', 'qa']
    """
    return probe_report(kb, kinds, seed, closure=closure, no_seed=no_seed)[0]


def probe_report(
    kb: KB,
    kinds: str | Iterable[str] | None = None,
    seed: int = 0,
    *,
    closure: Iterable[Triple] | None = None,
    no_seed: int = EDU_RELAT_NO_SEED,
) -> tuple[list[Probe], dict[str, dict[str, Any]]]:
    """:func:`make_probes`, and for each kind how many facts got a probe and how many are unscorable, and why.

    A family KB is asked with the family forms (templates/probes.json); a KB with another schema with its
    relations' templates (:class:`dukb.kb.schema_probes.SchemaForms`), its answers carrying the aliases of its
    aliases.csv. A fact without a probe of a kind is *unscorable* under that kind: counted here, never scored.

    Args:
        kb, kinds, seed, closure, no_seed: as for :func:`make_probes`.

    Returns:
        ``(probes, report)``: the probes of :func:`make_probes`; report: kind -> ``{"probes": n, "unscorable":
        {"relationships": n, "biographies": n}, "reasons": {REASON: {NAME: n}}}`` where REASON is ``no 'FORM'
        template`` (the relation or attribute NAME lacks the template the kind needs), ``form does not apply to
        attributes`` or ``not applicable to the fact`` (the fact's data rule it out: no wrong object, no
        distractor, no hint), in the order first met.

    Raises:
        InputError: an unknown kind; a malformed aliases.csv (FILE:LINE).

    Source: Wu et al. 2025 (Table 3, EDU-RELAT forms); Jin et al. 2024, RWKU Sec. 3.3 (adversarial types).

    Example:
        >>> from dukb.kb.io import load_kb
        >>> probes, report = probe_report(load_kb("demo"), "yes,qa")
        >>> report["qa"]["unscorable"], report["yes"]["unscorable"], report["yes"]["reasons"]
        ({'relationships': 0, 'biographies': 0}, {'relationships': 0, 'biographies': 14}, {'not applicable to the fact': {'birthyear': 5, 'birthplace': 3, 'job': 6}})
    """
    chosen = parse_kinds(kinds)
    index = FactIndex(kb, closure)
    family = kb.schema.is_family
    b = _Builder(kb, index, seed, no_seed) if family else SchemaForms(kb, index, seed, load_aliases(kb))
    out: list[Probe] = []
    report: dict[str, dict[str, Any]] = {
        k: {"probes": 0, "unscorable": {"relationships": 0, "biographies": 0}, "reasons": {}} for k in chosen
    }
    for f in list(kb.relationships) + list(kb.biographies):
        fk, name = (RELATIONSHIP, f.relation) if isinstance(f, Fact) else (BIOGRAPHY, f.attribute)
        for kind in chosen:
            got = b.build(kind, f)
            r = report[kind]
            if got is None or isinstance(got, str):
                r["unscorable"]["relationships" if fk == RELATIONSHIP else "biographies"] += 1
                names = r["reasons"].setdefault(got or NOT_APPLICABLE, {})
                names[name] = names.get(name, 0) + 1
                continue
            out.append(got if isinstance(got, Probe) else Probe(kind, fk, f.fact_id, *got))
            r["probes"] += 1
    return out, report


def fact_statements(kb: KB, partial: bool = False) -> dict[tuple[str, int], str]:
    """The statement sentence of every KB fact, in EDU-RELAT's "fact" form ("Richard Perry is Reid Perry's
    father."; "The birthyear of Sloane Lee is 1908.").

    These are a fact's *verbatim text*: what MUSE's VerbMem prompts with a prefix of, and what its membership
    inference scores (Shi et al. 2024b, Sec. 3, C1 and C3).

    Returns:
        (fact kind, fact_id) -> sentence, fact kind "relationship" or "biography", in file order. A KB with another
        schema: its relations' ``fact`` templates (:func:`dukb.kb.schema_probes.schema_statements`); with
        ``partial``, without the facts whose relation (attribute) has none.

    Raises:
        InputError: a KB with another schema whose relation (attribute) with facts has no ``fact`` template (unless
            ``partial``).

    Source: Wu et al. 2025 (EDU-RELAT's fact template).

    Example:
        >>> from dukb.kb.io import load_kb
        >>> statements = fact_statements(load_kb("demo"))
        >>> statements[("relationship", 0)], statements[("biography", 0)]
        ("George Hale is Martha Hale's husband.", 'The birthyear of George Hale is 1921.')
    """
    if not kb.schema.is_family:
        return schema_statements(kb, partial)
    b = _Builder(kb, FactIndex(kb, None), 0, EDU_RELAT_NO_SEED)
    out = {(RELATIONSHIP, f.fact_id): b.fact_sentence(f) for f in kb.relationships}
    out.update({(BIOGRAPHY, f.fact_id): b.fact_sentence(f) for f in kb.biographies})
    return out
