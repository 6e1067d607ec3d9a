"""The facts RESTOR asks about: one :class:`FactProbe` per KB fact (its question, true and injected values, and the
random plausible answers of the log-probability comparison), and the KB stated as sentences (the clean model's
training text).

Source: Rezaei et al., RESTOR: fact set F and corrupted facts F' (Sec. 3.2), evaluation queries (Sec. 3.4), the
"random" candidate set of Fig. 2 (15 plausible values neither clean nor corrupted). Torch-free.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from dukb.kb.corrupt import is_int
from dukb.kb.model import KB, BioFact, Fact, Triple
from dukb.kb.probes import BIOGRAPHY, RELATIONSHIP, FactIndex, Probe, fallback_values, make_probes
from dukb.kb.schema import OBJECT_GENDER
from dukb.kb.templates import load_template

#: Random plausible answers per fact for the log-probabilities (RESTOR Fig. 2: 15).
N_RANDOM = 15


@dataclass(frozen=True)
class FactProbe:
    """One KB fact as RESTOR probes it.

    Attributes:
        fact_kind: "relationship" or "biography".
        fact_id: its id.
        subject: the entity asked about.
        predicate: the relation or attribute.
        question: the question (relationship: the ``reverse`` probe, "Who is S's R[, other than ...]?", whose only
            right answer is the object; biography: the ``qa`` probe, "What is the A of S?").
        true_value: the clean KB's answer.
        injected: the corrupted value when the fact is in F', else None.
        random: plausible wrong answers (the log-probability scorer's "random" set), neither true nor injected.

    Source: Rezaei et al., RESTOR, Sec. 3.2 (facts F, corrupted facts F') and Fig. 2 (random candidates).
    """

    fact_kind: str
    fact_id: int
    subject: str
    predicate: str
    question: str
    true_value: str
    injected: str | None = None
    random: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[str, int]:
        """(fact_kind, fact_id)."""
        return (self.fact_kind, self.fact_id)

    def item(self, answer: str | None = None) -> Probe:
        """The fact as a QA item (for training and scoring), with ``answer`` in place of the true value if given."""
        kind = "reverse" if self.fact_kind == RELATIONSHIP else "qa"
        return Probe(kind, self.fact_kind, self.fact_id, self.question, self.true_value if answer is None else answer)


def random_candidates(
    kb: KB, closure_triples: set[Triple], f: Fact | BioFact, injected: str | None, n: int, seed: int, index=None
) -> tuple[str, ...]:
    """Up to ``n`` plausible wrong answers of a fact (RESTOR Fig. 2's "random" outputs).

    Relationship: people of the gender the relation needs, other than the subject, with ``(s, r, x)`` false in the
    true closure. Biography: the KB's other values of the attribute, then the fallback pools (birthyear: nearby
    years). Neither the true nor the injected value; drawn with a generator seeded by (seed, fact).

    Args:
        kb: the clean KB; closure_triples: its closure; f: the fact; injected: its injected value or None;
        n: how many; seed: the seed; index: a :class:`dukb.kb.probes.FactIndex` of ``kb`` (built if None).

    Returns:
        The candidates, sorted for stability of the draw, then shuffled by the seeded generator.

    Source: Rezaei et al., RESTOR, Sec. 4.3, Fig. 2 (15 plausible values per fact, neither clean nor corrupted).
    """
    rng = random.Random(f"dukb-restor-random/{seed}/{type(f).__name__}/{f.fact_id}")
    if isinstance(f, Fact):
        need = OBJECT_GENDER.get(f.relation)
        pool = [
            p.name
            for p in kb.people.values()
            if (need is None or p.gender == need)
            and p.name not in (f.subject, f.object, injected)
            and (f.subject, f.relation, p.name) not in closure_triples
        ]
    else:
        index = index if index is not None else FactIndex(kb)
        true = index.values(f.subject, f.attribute) | {f.value}
        pool = [v for v in index.attribute_values(f.attribute) if v not in true and v != injected]
        if len(pool) < n:
            more = fallback_values(index, f.attribute, f.value) if f.attribute != "birthyear" or is_int(f.value) else []
            pool += [v for v in more if v not in true and v != injected and v not in pool]
    pool = sorted(set(pool))
    rng.shuffle(pool)
    return tuple(pool[:n])


def fact_probes(
    kb: KB, closure_triples: Iterable[Triple], corrupted: Sequence = (), n_random: int = N_RANDOM, seed: int = 0
) -> list[FactProbe]:
    """Every KB fact as a :class:`FactProbe` (relationships then biographies, in file order).

    Args:
        kb: the clean KB.
        closure_triples: its deductive closure (``compute_closure(kb).atoms``): reverse questions exclude the
            other right answers by name, and random candidates are false in it.
        corrupted: the :class:`dukb.kb.corrupt.CorruptedFact` list of F'.
        n_random: random plausible answers per fact.
        seed: seed of the random candidates.

    Returns:
        One probe per fact.

    Source: Rezaei et al., RESTOR, Sec. 3.4 (one query per fact); questions: Wu et al. 2025, Table 3 (qa) and dukb's
    reverse probe.
    """
    triples = set(map(tuple, closure_triples))
    index = FactIndex(kb)
    inj = {(c.fact_kind, c.fact_id): c.injected_value for c in corrupted}
    qs = {
        (p.fact_kind, p.fact_id): p
        for p in make_probes(kb, ["reverse", "qa"], closure=triples)
        if (p.kind == "reverse") == (p.fact_kind == RELATIONSHIP)
    }
    out = []
    for f in list(kb.relationships) + list(kb.biographies):
        kind = RELATIONSHIP if isinstance(f, Fact) else BIOGRAPHY
        p = qs[(kind, f.fact_id)]
        injected = inj.get((kind, f.fact_id))
        out.append(
            FactProbe(
                kind,
                f.fact_id,
                f.subject,
                f.relation if isinstance(f, Fact) else f.attribute,
                p.question,
                p.answer,
                injected,
                random_candidates(kb, triples, f, injected, n_random, seed, index),
            )
        )
    return out


def fact_sentences(kb: KB, templates: int | None = None) -> list[str]:
    """Every KB fact stated in the sentence templates of the corruption documents (templates/documents.json).

    Args:
        kb: the KB.
        templates: use the first ``templates`` templates of each kind (None: all).

    Returns:
        Sentences, fact by fact (relationships then biographies), template by template.

    Source: dukb (RESTOR's clean model learned its facts from pretraining text, Rezaei et al., Sec. 4.2).
    """
    t = load_template("documents.json")
    out = []
    for f in kb.relationships:
        out += [x.format(s=f.subject, r=f.relation, o=f.object) for x in t[RELATIONSHIP][:templates]]
    for b in kb.biographies:
        out += [x.format(s=b.subject, v=b.value) for x in t[BIOGRAPHY][b.attribute][:templates]]
    return out
