"""RESTOR-style fact-state analysis (Rezaei et al., "RESTOR: Knowledge Recovery in Machine Unlearning"), judged
exactly against the KB and checked with the rules.

Pipeline (:func:`run_restor`, ``dukb restor``), resumable stage by stage in RUN_DIR:

1. **Clean model** θ_ideal: finetuned on the true KB. The tiny default model is built for the run: its word-level
   vocabulary covers the QA texts, the true-fact sentences and the corruption documents. Its training set is every
   fact's question (relationship: "Who is S's R[, other than ...]?" -> O, the ``reverse`` probe, whose answer is
   unique per the closure; biography: "What is the A of S?" -> V) plus every fact stated in each sentence template of
   the corruption documents (``templates/documents.json``), so that the model holds the facts in the form the
   documents later contradict (RESTOR's clean model learned them from pretraining text).
2. **Corruption** θ_corrupted: F' and the documents come from :func:`dukb.kb.corrupt.corrupt` (5 plausible wrong
   values per chosen person; each document: those 5 incorrect sentences shuffled with ``context`` correct sentences
   about other people). The clean model is trained further on the documents with next-token prediction on every
   token (RESTOR App. B), with LoRA (``lora_r`` > 0, merged afterwards) or full finetuning.
3. **Unlearning** θ_unlearned: GA, KL and NPO on the documents (or, ``targeted``, on their incorrect sentences only:
   RESTOR's k = 0 forget set), each plus λ times the cross-entropy on unrelated text (true-fact sentences about
   people outside the corruption; RESTOR uses C4), in the same LoRA parameter space (new adapters of the same
   configuration on the merged corrupted model, reference P_c = the adapters disabled).
4. **Probing** every KB fact on all models, M generations (seeded sampling; greedy when M = 1), each judged exactly
   (:class:`Judge`) as the true value, the injected value or other; a model knows a fact when a majority of its M
   outputs are the true value (RESTOR Sec. 3.4), and its prediction is its most frequent answer.
5. **Fact states** (:func:`fact_state`): over A = {clean right, corrupted wrong}: Recovery, Forget, Unchanged; over
   B = {clean right, corrupted right}: Degraded, Unaffected (RESTOR Tables 2, 3); accuracy per model and relation;
   length-normalised log-probabilities of the true, injected and random plausible answers over A (Fig. 2).
6. **Rule-aware analysis** (:func:`belief_analysis`): each model's answers form a belief KB; its deductive closure
   (:func:`dukb.solver.closure.compute_closure`) shows (a) derived facts that contradict the model's own answers or
   the true KB and (b) corrupted facts still derivable from the other beliefs (deep unlearning of the corruption).
7. **Report** (:func:`render`): states.csv, summary.csv, report.md (Tables 1-3 layout, Fig. 2 as a table), one
   stacked-bar PNG of the states per method.

Functions that need no model (judge, states, beliefs, report) import neither torch nor transformers.
"""

from __future__ import annotations

import json
import random
import re
import time
import unicodedata
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Iterable, Sequence

from dukb import InputError
from dukb.kb.corrupt import is_int
from dukb.kb.model import KB, BioFact, Fact, Triple
from dukb.kb.probes import BIOGRAPHY, RELATIONSHIP, Probe
from dukb.neural.runs import write_json_atomic as _write_json

#: Labels of one judged output.
TRUE, INJECTED, OTHER = "true", "injected", "other"
LABELS = (TRUE, INJECTED, OTHER)

#: Fact states (RESTOR Tables 2 and 3) and the state of facts outside A and B (the clean model gets them wrong).
RECOVERY, FORGET, UNCHANGED = "Recovery", "Forget", "Unchanged"
DEGRADED, UNAFFECTED = "Degraded", "Unaffected"
EXCLUDED = "excluded"
STATES_A = (RECOVERY, FORGET, UNCHANGED)
STATES_B = (DEGRADED, UNAFFECTED)
STATES = STATES_A + STATES_B + (EXCLUDED,)

#: Relations with one object per subject in a family KB (one father, one mother, one spouse): two different objects
#: for the same subject and relation contradict each other.
FUNCTIONAL = ("father", "mother", "husband", "wife")

#: Unlearning methods of ``dukb restor`` (RESTOR Sec. 3.3).
RESTOR_METHODS = ("ga", "kl", "npo")

#: Random plausible answers per fact for the log-probabilities (RESTOR Fig. 2: 15).
N_RANDOM = 15


# ===================================================================================================== judge ======
_WORD = re.compile(r"[^\W_]+(?:['’\-][^\W_]+)*")
_ARTICLES = ("a", "an", "the")
_SEGMENT = re.compile(r"[.,;:!?\n(]")


def normalize(text: str) -> tuple[str, ...]:
    """Words of a text for exact matching: Unicode NFKD without accents, lower case, words of letters and digits
    (inner apostrophes and hyphens kept), a trailing possessive "'s" dropped, everything else a separator.

    Args:
        text: any text.

    Returns:
        The words, e.g. ``normalize("  Washington State.") == ("washington", "state")``,
        ``normalize("Reid Perry's") == ("reid", "perry")``.
    """
    t = unicodedata.normalize("NFKD", text)
    t = "".join(c for c in t if not unicodedata.combining(c)).lower()
    out = []
    for w in _WORD.findall(t):
        if w.endswith(("'s", "’s")) and len(w) > 2:
            w = w[:-2]
        out.append(w)
    return tuple(out)


def aliases(value: str, extra: dict[str, Sequence[str]] | None = None) -> set[tuple[str, ...]]:
    """The normalised forms that count as ``value``: the value itself, "<X> state" <-> "<X>" (EDU-RELAT writes
    birthplaces "Washington state"), and any ``extra[value]`` aliases.

    Args:
        value: a KB value or person name.
        extra: optional value -> list of further aliases.

    Returns:
        Set of word tuples.
    """
    base = normalize(value)
    out = {base} if base else set()
    if len(base) > 1 and base[-1] == "state":
        out.add(base[:-1])
    elif base:
        out.add(base + ("state",))
    for a in (extra or {}).get(value, ()):
        out |= {normalize(a)} - {()}
    return out


class Judge:
    """Exact judge of model outputs against a KB (replaces RESTOR's GPT-3.5 judge, App. G).

    The answer of an output is the longest *known phrase* (a KB person name, a KB or fallback value, an injected
    value, or an alias of one) that the output's words start with, after dropping a leading article; without one,
    the output's first segment (up to . , ; : ! ? or a newline). Trailing words and punctuation are thus ignored
    ("Richard Perry, his father" -> "richard perry"), case and accents do not matter, "Washington" and
    "Washington state" are the same answer, and a longer known phrase wins ("West Virginia state" is not "Virginia
    state", where a substring test would accept it).

    Args:
        phrases: every known answer (names and values); their aliases are added.
        extra_aliases: value -> further aliases (e.g. {"Teacher": ["schoolteacher"]}).

    Source: dukb; it replaces RESTOR's GPT-3.5 Accept/Reject judge (Rezaei et al., Sec. 3.4 and App. G) where the
    acceptable answers are KB values.
    """

    def __init__(self, phrases: Iterable[str], extra_aliases: dict[str, Sequence[str]] | None = None):
        self.extra = dict(extra_aliases or {})
        self.known: set[tuple[str, ...]] = set()
        for p in phrases:
            self.known |= aliases(p, self.extra)
        for v in self.extra:
            self.known |= aliases(v, self.extra)
        self.max_len = max((len(k) for k in self.known), default=0)

    @classmethod
    def for_kb(cls, kb: KB, extra_values: Iterable[str] = (), extra_aliases=None) -> "Judge":
        """A judge whose known phrases are the KB's people, its biography values, the fallback value pools of
        templates/values.json and ``extra_values`` (e.g. injected values)."""
        from dukb.kb.probes import load_template

        vals = load_template("values.json")
        phrases = list(kb.people) + [b.value for b in kb.biographies] + list(extra_values)
        phrases += [v for k, pool in vals.items() if not k.startswith("_") for v in pool]
        return cls(phrases, extra_aliases)

    def answer(self, output: str) -> tuple[str, ...]:
        """The normalised answer of an output (see the class docstring); () for an empty output."""
        words = normalize(output)
        if words and words[0] in _ARTICLES and len(words) > 1:
            words = words[1:]
        for n in range(min(self.max_len, len(words)), 0, -1):
            if words[:n] in self.known:
                return words[:n]
        first = _SEGMENT.split(output, 1)[0]
        seg = normalize(first)
        if seg and seg[0] in _ARTICLES and len(seg) > 1:
            seg = seg[1:]
        return seg

    def matches(self, answer: tuple[str, ...], value: str) -> bool:
        """True when a normalised answer is ``value`` or one of its aliases."""
        return bool(answer) and answer in aliases(value, self.extra)

    def label(self, output: str, true_values: Sequence[str], injected: str | None = None) -> tuple[str, str]:
        """Judge one output.

        Args:
            output: the generated text.
            true_values: the acceptable true answers.
            injected: the corrupted (injected) value of the fact, if it was corrupted.

        Returns:
            ``(label, answer)``: label "true", "injected" or "other"; answer the normalised answer as a string
            (words joined by spaces).
        """
        ans = self.answer(output)
        if any(self.matches(ans, v) for v in true_values):
            lab = TRUE
        elif injected is not None and self.matches(ans, injected):
            lab = INJECTED
        else:
            lab = OTHER
        return lab, " ".join(ans)


def majority(labels: Sequence[str], answers: Sequence[str]) -> dict:
    """Majority vote over M judged outputs (RESTOR Sec. 3.4).

    Args:
        labels: the M labels; answers: the M normalised answers (same order).

    Returns:
        dict: ``correct`` (more than half of the labels are "true"), ``answer`` (the most frequent answer, ties
        to the earliest), ``label`` (the label of that answer's first occurrence).

    Raises:
        ValueError: empty or mismatched lists.
    """
    if not labels or len(labels) != len(answers):
        raise ValueError("majority needs as many labels as answers, at least one")
    counts = Counter(answers)
    best = max(counts.values())
    top = next(a for a in answers if counts[a] == best)
    return {"correct": sum(lab == TRUE for lab in labels) * 2 > len(labels), "answer": top,
            "label": labels[answers.index(top)]}


# ============================================================================================= facts to probe ======
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
        return Probe(kind, self.fact_kind, self.fact_id, self.question,
                     self.true_value if answer is None else answer)


def random_candidates(kb: KB, closure_triples: set[Triple], f: Fact | BioFact, injected: str | None, n: int,
                      seed: int, index=None) -> tuple[str, ...]:
    """Up to ``n`` plausible wrong answers of a fact (RESTOR Fig. 2's "random" outputs).

    Relationship: people of the gender the relation needs, other than the subject, with ``(s, r, x)`` false in the
    true closure. Biography: the KB's other values of the attribute, then the fallback pools (birthyear: nearby
    years). Neither the true nor the injected value; drawn with a generator seeded by (seed, fact).

    Args:
        kb: the clean KB; closure_triples: its closure; f: the fact; injected: its injected value or None;
        n: how many; seed: the seed; index: a :class:`dukb.kb.probes.FactIndex` of ``kb`` (built if None).

    Returns:
        The candidates, sorted for stability of the draw, then shuffled by the seeded generator.
    """
    from dukb.kb.probes import FactIndex, fallback_values
    from dukb.kb.schema import OBJECT_GENDER

    rng = random.Random(f"dukb-restor-random/{seed}/{type(f).__name__}/{f.fact_id}")
    if isinstance(f, Fact):
        need = OBJECT_GENDER.get(f.relation)
        pool = [p.name for p in kb.people.values() if (need is None or p.gender == need)
                and p.name not in (f.subject, f.object, injected) and (f.subject, f.relation, p.name)
                not in closure_triples]
    else:
        index = index if index is not None else FactIndex(kb)
        true = index.values(f.subject, f.attribute) | {f.value}
        pool = [v for v in index.attribute_values(f.attribute) if v not in true and v != injected]
        if len(pool) < n:
            more = fallback_values(index, f.attribute, f.value) if f.attribute != "birthyear" or is_int(f.value) \
                else []
            pool += [v for v in more if v not in true and v != injected and v not in pool]
    pool = sorted(set(pool))
    rng.shuffle(pool)
    return tuple(pool[:n])


def fact_probes(kb: KB, closure_triples: Iterable[Triple], corrupted: Sequence = (), n_random: int = N_RANDOM,
                seed: int = 0) -> list[FactProbe]:
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
    """
    from dukb.kb.probes import FactIndex, make_probes

    triples = set(map(tuple, closure_triples))
    index = FactIndex(kb)
    inj = {(c.fact_kind, c.fact_id): c.injected_value for c in corrupted}
    qs = {(p.fact_kind, p.fact_id): p for p in make_probes(kb, ["reverse", "qa"], closure=triples)
          if (p.kind == "reverse") == (p.fact_kind == RELATIONSHIP)}
    out = []
    for f in list(kb.relationships) + list(kb.biographies):
        kind = RELATIONSHIP if isinstance(f, Fact) else BIOGRAPHY
        p = qs[(kind, f.fact_id)]
        injected = inj.get((kind, f.fact_id))
        out.append(FactProbe(kind, f.fact_id, f.subject, f.relation if isinstance(f, Fact) else f.attribute,
                             p.question, p.answer, injected,
                             random_candidates(kb, triples, f, injected, n_random, seed, index)))
    return out


def fact_sentences(kb: KB, templates: int | None = None) -> list[str]:
    """Every KB fact stated in the sentence templates of the corruption documents (templates/documents.json).

    Args:
        kb: the KB.
        templates: use the first ``templates`` templates of each kind (None: all).

    Returns:
        Sentences, fact by fact (relationships then biographies), template by template.
    """
    from dukb.kb.probes import load_template

    t = load_template("documents.json")
    out = []
    for f in kb.relationships:
        out += [x.format(s=f.subject, r=f.relation, o=f.object) for x in t[RELATIONSHIP][:templates]]
    for b in kb.biographies:
        out += [x.format(s=b.subject, v=b.value) for x in t[BIOGRAPHY][b.attribute][:templates]]
    return out


# ================================================================================================ probing ======
def sample_generate(pred, prompts: list[str], max_new_tokens: int, temperature: float, seed: int) -> list[str]:
    """Sampled decoding of a batch of prompts (left padding, KV cache), one draw per prompt.

    ``temperature <= 0`` is greedy decoding (:func:`dukb.neural.probe.greedy_generate`).

    Args:
        pred: :class:`dukb.neural.probe.Predictor` (no auxiliary model).
        prompts: prompt strings (already wrapped in prompt tags).
        max_new_tokens: at most this many tokens.
        temperature: softmax temperature (> 0) of the sampling.
        seed: seed of the torch generator used for the draws.

    Returns:
        The decoded continuations (special tokens removed).
    """
    from dukb.neural.probe import greedy_generate

    return greedy_generate(pred, prompts, max_new_tokens, temperature=max(temperature, 0.0), seed=seed)


def probe_facts(pred, facts: Sequence[FactProbe], judge: Judge, *, samples: int = 1, temperature: float = 1.0,
                seed: int = 0, max_new_tokens: int = 10, batch_size: int = 64) -> list[dict]:
    """Probe a model on facts: M generations each (greedy when M = 1), judged, then a majority vote.

    Args:
        pred: :class:`dukb.neural.probe.Predictor`.
        facts: the facts.
        judge: the :class:`Judge`.
        samples: M >= 1 (RESTOR: 3).
        temperature: sampling temperature for M > 1.
        seed: generation m of batch b draws from a generator seeded ``seed * 1000 + 101 m + b``, so a run is
            reproducible (unused when M = 1).
        max_new_tokens: generation budget.
        batch_size: prompts per batch.

    Returns:
        One dict per fact: fact_kind, fact_id, outputs, answers, labels (M each), correct, answer, label
        (:func:`majority`).

    Raises:
        InputError: samples < 1.
    """
    if samples < 1:
        raise InputError(f"--samples must be at least 1, got {samples}")
    prompts = [pred.tags.prompt(f.question) for f in facts]
    outs: list[list[str]] = [[] for _ in facts]
    order = sorted(range(len(facts)), key=lambda i: len(facts[i].question))
    for b, start in enumerate(range(0, len(order), batch_size)):
        chunk = order[start:start + batch_size]
        for m in range(samples):
            texts = sample_generate(pred, [prompts[i] for i in chunk], max_new_tokens,
                                    0.0 if samples == 1 else temperature, seed * 1000 + m * 101 + b)
            for i, t in zip(chunk, texts):
                outs[i].append(t)
    rows = []
    for f, o in zip(facts, outs):
        judged = [judge.label(x, [f.true_value], f.injected) for x in o]
        labels, answers = [j[0] for j in judged], [j[1] for j in judged]
        rows.append({"fact_kind": f.fact_kind, "fact_id": f.fact_id, "outputs": o, "answers": answers,
                     "labels": labels, **majority(labels, answers)})
    return rows


def candidate_logprobs(pred, facts: Sequence[FactProbe], batch_size: int = 64) -> list[dict]:
    """Length-normalised log-probabilities (mean natural-log probability per answer token; TOFU, RESTOR Sec. 3.4)
    of each fact's true answer, injected answer (None when not corrupted) and the mean over its random answers.

    Args:
        pred: :class:`dukb.neural.probe.Predictor`.
        facts: the facts (RESTOR: the set A).
        batch_size: items per forward pass.

    Returns:
        One dict per fact: fact_kind, fact_id, true, injected, random (floats or None).
    """
    from dukb.neural.probe import answer_logprob

    items, owner = [], []
    for i, f in enumerate(facts):
        items.append(f.item())
        owner.append((i, "true"))
        if f.injected is not None:
            items.append(f.item(f.injected))
            owner.append((i, "injected"))
        for r in f.random:
            items.append(f.item(r))
            owner.append((i, "random"))
    vals: list[float] = []
    for s in range(0, len(items), batch_size):
        vals += answer_logprob(pred, items[s:s + batch_size])
    acc = [{"true": None, "injected": None, "random": []} for _ in facts]
    for (i, what), v in zip(owner, vals):
        if what == "random":
            acc[i]["random"].append(v)
        else:
            acc[i][what] = v
    return [{"fact_kind": f.fact_kind, "fact_id": f.fact_id, "true": a["true"], "injected": a["injected"],
             "random": sum(a["random"]) / len(a["random"]) if a["random"] else None} for f, a in zip(facts, acc)]


# ================================================================================================= states ======
def fact_state(clean: dict, corrupted: dict, unlearned: dict) -> str:
    """The state of one fact after unlearning (RESTOR Tables 2, 3; Sec. 4.3).

    Args:
        clean, corrupted, unlearned: probe rows (:func:`probe_facts`) of the same fact: ``correct`` (majority
            judged true) and ``answer`` (most frequent normalised answer).

    Returns:
        Over A (clean right, corrupted wrong): "Recovery" (unlearned right), "Unchanged" (unlearned wrong with
        the corrupted model's answer), "Forget" (unlearned wrong with another answer). Over B (both right):
        "Degraded" (unlearned wrong) or "Unaffected". Otherwise (clean wrong) "excluded".

    Source: Rezaei et al., RESTOR, Sec. 4.3 ("How do different unlearning algorithms affect model's predictions?").
    """
    if not clean["correct"]:
        return EXCLUDED
    if corrupted["correct"]:
        return UNAFFECTED if unlearned["correct"] else DEGRADED
    if unlearned["correct"]:
        return RECOVERY
    return UNCHANGED if unlearned["answer"] == corrupted["answer"] else FORGET


def partition(states: Iterable[str]) -> dict:
    """Counts and percentages of the two partitions.

    Args:
        states: fact states (:data:`STATES`).

    Returns:
        dict: n_A, n_B, n_excluded and, for each state of A (resp. B), its percentage of |A| (resp. |B|) under its
        name, None when the set is empty. Each partition sums to 100 when non-empty.
    """
    c = Counter(states)
    n_a = sum(c[s] for s in STATES_A)
    n_b = sum(c[s] for s in STATES_B)
    out = {"n_A": n_a, "n_B": n_b, "n_excluded": c[EXCLUDED]}
    for s in STATES_A:
        out[s] = 100.0 * c[s] / n_a if n_a else None
    for s in STATES_B:
        out[s] = 100.0 * c[s] / n_b if n_b else None
    return out


# =============================================================================================== beliefs ======
def belief_triples(kb: KB, facts: Sequence[FactProbe], rows: Sequence[dict]) -> list[tuple[Triple, int]]:
    """The relationship beliefs of a model: ``(s, r, person)`` for each relationship probe whose answer is a KB
    person (by normalised name), with the fact_id of the probe it answered.

    Args:
        kb: the KB (its people).
        facts, rows: the probes and the model's probe rows, in the same order.

    Returns:
        list of ``((s, r, o), fact_id)``, self-references (o == s) dropped, first occurrence of each triple kept.
    """
    names = {normalize(n): n for n in kb.people}
    seen: dict[Triple, int] = {}
    for f, r in zip(facts, rows):
        if f.fact_kind != RELATIONSHIP:
            continue
        who = names.get(tuple(r["answer"].split()))
        if who is None or who == f.subject:
            continue
        seen.setdefault((f.subject, f.predicate, who), f.fact_id)
    return list(seen.items())


def belief_analysis(kb: KB, beliefs: Sequence[tuple[Triple, int]], true_closure: set[Triple],
                    corrupted: Sequence = (), rules="family", examples: int = 5) -> dict:
    """Rule-aware analysis of a model's beliefs (dukb's addition to RESTOR).

    The belief KB holds the model's relationship answers (:func:`belief_triples`); its deductive closure Ω(B, R) is
    computed with clingo. Reported:

    (a) derived facts (in Ω(B, R) but not in B) that contradict the model's own answers (for a functional relation
        -- father, mother, husband, wife -- the model answered another object for the same subject) or the true KB
        (not in the true closure Ω(K, R), which in a family KB is the set of true facts);
    (b) for each corrupted relationship fact (s, r, o') of F': whether the model states it (it is in B) and whether
        the rules derive it from the model's other beliefs (o' in Ω(B \\ {(s, r, o')}, R)). A corruption is deeply
        unlearned only when it is neither stated nor derivable.

    Args:
        kb: the true KB (for people and genders).
        beliefs: the model's beliefs.
        true_closure: the true closure's triples.
        corrupted: F' (CorruptedFact list); only relationship facts count here.
        rules: rule set (name, path or RuleSet).
        examples: how many contradicting facts to list per kind.

    Returns:
        dict: n_beliefs, n_beliefs_false (beliefs not in the true closure), n_derived, n_derived_false,
        n_derived_contradicting_answers, examples_false, examples_contradicting (lists of "s|r|o" strings),
        n_corrupted_rel, n_injected_stated, n_injected_derivable, n_injected_retained (stated or derivable),
        injected_retained (list of fact_ids).

    Source: Wu et al. 2025 (deductive closure, Def. 1); Rezaei et al., RESTOR (corruption, F').
    """
    from dukb.solver.closure import compute_closure
    from dukb.solver.cone import cone_of

    facts = [Fact(i, s, r, o) for i, ((s, r, o), _) in enumerate(beliefs)]
    bkb = KB(dict(kb.people), facts, [])
    cl = compute_closure(bkb, rules)
    bset = {f.triple for f in facts}
    stated: dict[tuple[str, str], set[str]] = {}
    for s, r, o in bset:
        stated.setdefault((s, r), set()).add(o)
    derived = [t for t in cl.atoms[cl.n_kb:]]
    false_d = [t for t in derived if t not in true_closure]
    contra = [t for t in derived if t[1] in FUNCTIONAL and stated.get((t[0], t[1]), set()) - {t[2]}]
    out = {"n_beliefs": len(bset), "n_beliefs_false": sum(t not in true_closure for t in bset),
           "n_derived": len(derived), "n_derived_false": len(false_d),
           "n_derived_contradicting_answers": len(contra),
           "examples_false": ["|".join(t) for t in false_d[:examples]],
           "examples_contradicting": ["|".join(t) for t in contra[:examples]]}
    rel = [c for c in corrupted if c.fact_kind == RELATIONSHIP]
    n_stated = n_deriv = 0
    retained = []
    for c in rel:
        t = (c.subject, c.predicate, c.injected_value)
        is_stated = t in bset
        if is_stated:
            atom = cl.index[t]
            cone = cone_of(cl, [atom])
            derivable = cone.any_target_derivable({cone.local[atom]})
        else:
            derivable = t in cl.index
        n_stated += is_stated
        n_deriv += derivable
        if is_stated or derivable:
            retained.append(c.fact_id)
    out.update(n_corrupted_rel=len(rel), n_injected_stated=n_stated, n_injected_derivable=n_deriv,
               n_injected_retained=len(retained), injected_retained=retained)
    return out


# ================================================================================================ presets ======
@dataclass(frozen=True)
class UnlearnSetting:
    """Hyper-parameters of one document unlearning run (:func:`dukb.neural.docs.unlearn_documents`).

    Attributes:
        epochs: passes over the forget documents.
        lr: peak learning rate.
        reg_weight: λ of the retain cross-entropy (dukb's convention: loss = forget + λ retain).
        beta: NPO's inverse temperature.
        batch_size, grad_accum, weight_decay, schedule, warmup: as :class:`dukb.neural.docs.TrainConfig`.
    """

    epochs: int
    lr: float
    reg_weight: float
    beta: float = 0.1
    batch_size: int = 2
    grad_accum: int = 4
    weight_decay: float = 0.1
    schedule: str = "linear"
    warmup: float = 0.0

    def train_config(self, seed: int):
        """The :class:`dukb.neural.docs.TrainConfig` of this setting."""
        from dukb.neural.docs import TrainConfig

        return TrainConfig(epochs=self.epochs, lr=self.lr, batch_size=self.batch_size, grad_accum=self.grad_accum,
                           weight_decay=self.weight_decay, warmup=self.warmup, schedule=self.schedule, seed=seed)


def _presets() -> dict:
    from dukb.neural.docs import TrainConfig

    return {
        # RESTOR App. B (corruption, LLaMA-Factory: LoRA r 8 / alpha 16 on all linear layers, batch 2 x 2, lr 5e-5,
        # 5 epochs, cosine, warm-up 0.1) and App. C.2 (SOUL: weight decay 0.1, accumulation 4; GA 2 epochs, 2e-5,
        # λ 4; KL 2 epochs, 1.5e-5, code's γ = 0.2 on the forget term = λ 5; NPO 3 epochs, 2e-5, λ 5). The clean
        # model's finetuning is the paper's QA preset (Wu et al. 2025, App. H); RESTOR's clean model is Llama-3
        # as pretrained.
        "restor": {
            "clean": TrainConfig(epochs=10, lr=2e-5, batch_size=16, grad_accum=1, warmup=0.0, schedule="linear",
                                 eval_every=1, max_grad_norm=0.0),
            "corrupt_lora": TrainConfig(epochs=5, lr=5e-5, batch_size=2, grad_accum=2, warmup=0.1,
                                        schedule="cosine"),
            "corrupt_full": TrainConfig(epochs=5, lr=5e-5, batch_size=2, grad_accum=2, warmup=0.1,
                                        schedule="cosine"),
            "unlearn": {"ga": UnlearnSetting(2, 2e-5, 4.0), "kl": UnlearnSetting(2, 1.5e-5, 5.0),
                        "npo": UnlearnSetting(3, 2e-5, 5.0)},
            "unlearn_full_lr_scale": 1.0,
        },
        # The built-in tiny model (2 layers, 128 wide, trained from scratch on the KB): RESTOR's epochs, λ,
        # schedules, LoRA rank, weight decay and gradient clipping (HF Trainer's 1.0); batch 4 without
        # accumulation; learning rates raised for a small model trained from scratch. The clean model's
        # finetuning follows dukb's QA finetuning (linear schedule, no clipping). Chosen by hand on EDU-RELAT
        # (greedy probing, LoRA seeds 0-2): corruption at lr 1e-3 leaves 72-82% of the facts known, while 2e-3
        # gives 30-71% and 3e-3 27-63% depending on the LoRA initialisation alone. Unlearning from that corrupted
        # model (81.7%): lr 3e-5 changes it by under 2 points, 1e-4 moves it (Recovery 17-20% of A, Degraded
        # 13-26% of B), 3e-4 destroys it (5%, 14% and 0% of the facts known after GA, KL, NPO).
        "tiny": {
            "clean": TrainConfig(epochs=300, lr=3e-3, batch_size=64, grad_accum=1, warmup=0.02, schedule="linear",
                                 eval_every=10, max_grad_norm=0.0),
            "corrupt_lora": TrainConfig(epochs=5, lr=1e-3, batch_size=4, grad_accum=1, warmup=0.1,
                                        schedule="cosine"),
            "corrupt_full": TrainConfig(epochs=5, lr=3e-4, batch_size=4, grad_accum=1, warmup=0.1,
                                        schedule="cosine"),
            "unlearn": {"ga": UnlearnSetting(2, 1e-4, 4.0, batch_size=4, grad_accum=1),
                        "kl": UnlearnSetting(2, 1e-4, 5.0, batch_size=4, grad_accum=1),
                        "npo": UnlearnSetting(3, 1e-4, 5.0, batch_size=4, grad_accum=1)},
            "unlearn_full_lr_scale": 0.1,
        },
    }


PRESET_NAMES = ("tiny", "restor")


@dataclass
class RestorConfig:
    """Everything that defines a ``dukb restor`` run (written to RUN_DIR/config.json).

    Attributes:
        kb: KB directory or built-in name.
        model: "tiny" (built for the KB), hub id or model directory.
        corrupt: share of the facts in F', in (0, 1] (RESTOR: about 250 of 1,051 facts, 0.24).
        context: correct facts about other people per corruption document (dukb's k_context; RESTOR's k is
            context / 5).
        docs_per_entity: corruption documents per corrupted person (RESTOR: about 60 per incorrect fact).
        methods: unlearning methods, of :data:`RESTOR_METHODS`.
        targeted: unlearn only the incorrect sentences of each document (RESTOR's k = 0 forget set).
        seed: seed of the corruption, the tiny model, data orders, sampling and retain set.
        lora_r: LoRA rank of corruption and unlearning (0: full finetuning); lora_alpha: its alpha (None: 2 r).
        samples: M generations per fact (RESTOR: 3); 1 = greedy; None: the preset's (tiny: 1, restor: 3). With
            temperature-1 sampling the tiny model's answers after corruption are mostly sampling noise (EDU-RELAT:
            10% of the facts right by a majority of 3 samples, 61% greedy), so its preset decodes greedily.
        temperature: sampling temperature when M > 1.
        max_new_tokens: generation budget (tokens).
        preset: "tiny" or "restor" hyper-parameters (None: "tiny" for the tiny model, else "restor").
        reg_weight: method -> λ overriding the preset; unlearn_lr: method -> learning rate; unlearn_epochs: method
            -> epochs.
        clean_epochs, corrupt_epochs, corrupt_lr: overrides of the preset.
        templates: sentence templates per fact in the clean model's training text (None: all).
        n_retain: retain documents (5 unrelated true-fact sentences each).
        n_random: random plausible answers per fact (RESTOR: 15).
        rules: rule set of the closures.
        device, dtype, prompt: model options.
    """

    kb: str
    model: str = "tiny"
    corrupt: float = 0.24
    context: int = 5
    docs_per_entity: int = 20
    methods: list[str] = field(default_factory=lambda: list(RESTOR_METHODS))
    targeted: bool = False
    seed: int = 0
    lora_r: int = 8
    lora_alpha: int | None = None
    samples: int | None = None
    temperature: float = 1.0
    max_new_tokens: int = 10
    preset: str | None = None
    reg_weight: dict[str, float] = field(default_factory=dict)
    unlearn_lr: dict[str, float] = field(default_factory=dict)
    unlearn_epochs: dict[str, int] = field(default_factory=dict)
    clean_epochs: int | None = None
    corrupt_epochs: int | None = None
    corrupt_lr: float | None = None
    templates: int | None = None
    n_retain: int = 64
    n_random: int = N_RANDOM
    rules: str = "family"
    device: str = "auto"
    dtype: str = "auto"
    prompt: str | None = None

    #: Fields that the clean, corrupted and probed models depend on: a rerun must agree on them.
    IDENTITY = ("model", "corrupt", "context", "docs_per_entity", "seed", "lora_r", "lora_alpha", "samples",
                "temperature", "max_new_tokens", "preset", "clean_epochs", "corrupt_epochs", "corrupt_lr",
                "templates", "n_random", "n_retain", "rules", "prompt")

    def resolved_preset(self) -> str:
        """The preset name in use."""
        return self.preset or ("tiny" if self.model == "tiny" else "restor")

    def resolved_samples(self) -> int:
        """M in use: ``samples``, else the preset's (tiny 1, restor 3)."""
        if self.samples is not None:
            return self.samples
        return 1 if self.resolved_preset() == "tiny" else 3

    def check(self) -> None:
        """Validate the settings.

        Raises:
            InputError: a value out of range or an unknown method/preset.
        """
        if not 0 < self.corrupt <= 1:
            raise InputError(f"--corrupt must be in (0, 1], got {self.corrupt}")
        if self.context < 0:
            raise InputError(f"--context must be >= 0, got {self.context}")
        if self.docs_per_entity < 1:
            raise InputError(f"--docs-per-entity must be >= 1, got {self.docs_per_entity}")
        if not self.methods:
            raise InputError("no unlearning method given (--methods ga,kl,npo)")
        for m in self.methods:
            if m not in RESTOR_METHODS:
                raise InputError(f"unknown method {m!r} for restor (choose from {', '.join(RESTOR_METHODS)})")
        if len(set(self.methods)) != len(self.methods):
            raise InputError("a method is listed twice in --methods")
        if self.lora_r < 0:
            raise InputError(f"--lora-r must be >= 0 (0 = full finetuning), got {self.lora_r}")
        if self.samples is not None and self.samples < 1:
            raise InputError(f"--samples must be >= 1, got {self.samples}")
        if self.resolved_samples() > 1 and self.temperature <= 0:
            raise InputError("--temperature must be > 0 when --samples > 1")
        if self.resolved_preset() not in PRESET_NAMES:
            raise InputError(f"unknown preset {self.preset!r} (choose from {', '.join(PRESET_NAMES)})")
        for name, d in (("--lambda", self.reg_weight), ("--unlearn-lr", self.unlearn_lr),
                        ("--unlearn-epochs", self.unlearn_epochs)):
            for m, v in d.items():
                if m not in RESTOR_METHODS:
                    raise InputError(f"{name}: unknown method {m!r}")
                if v < 0:
                    raise InputError(f"{name}: {m} must be >= 0, got {v}")
        if self.n_retain < 0 or self.n_random < 0 or self.max_new_tokens < 1:
            raise InputError("--n-retain and --n-random must be >= 0 and --max-new-tokens >= 1")
        if self.templates is not None and self.templates < 1:
            raise InputError(f"--templates must be >= 1, got {self.templates}")

    def identity(self) -> dict:
        """The fields of :data:`IDENTITY` with their values (samples and preset resolved)."""
        return {k: getattr(self, k) for k in self.IDENTITY} | {"samples": self.resolved_samples(),
                                                                "preset": self.resolved_preset()}

    def unlearn_setting(self, method: str) -> UnlearnSetting:
        """The resolved hyper-parameters of a method: the preset, with LoRA's learning rate scaled for full
        finetuning, then the explicit overrides."""
        p = _presets()[self.resolved_preset()]
        s = p["unlearn"][method]
        if not self.lora_r:
            s = replace(s, lr=s.lr * p["unlearn_full_lr_scale"])
        over = {}
        if method in self.reg_weight:
            over["reg_weight"] = float(self.reg_weight[method])
        if method in self.unlearn_lr:
            over["lr"] = float(self.unlearn_lr[method])
        if method in self.unlearn_epochs:
            over["epochs"] = int(self.unlearn_epochs[method])
        return replace(s, **over)

    def train_config(self, stage: str):
        """The resolved :class:`dukb.neural.docs.TrainConfig` of "clean" or "corrupt"."""
        p = _presets()[self.resolved_preset()]
        if stage == "clean":
            c = p["clean"]
            return replace(c, seed=self.seed, **({"epochs": self.clean_epochs} if self.clean_epochs else {}))
        c = p["corrupt_lora" if self.lora_r else "corrupt_full"]
        over = {"seed": self.seed}
        if self.corrupt_epochs is not None:
            over["epochs"] = self.corrupt_epochs
        if self.corrupt_lr is not None:
            over["lr"] = self.corrupt_lr
        return replace(c, **over)


# =============================================================================================== helpers ======
def retain_texts(kb: KB, corruption, n: int, seed: int, per_doc: int = 5) -> tuple[list[str], list[tuple[str, int]]]:
    """The retain set: ``n`` documents of ``per_doc`` true-fact sentences unrelated to the corruption.

    RESTOR's retain set is C4 text with nothing about the corrupted entities. Here: KB facts that mention no
    corrupted person and no person named in a corrupted relationship fact (true or injected), preferably facts that
    no corruption document uses as context; rendered with the document templates, ``per_doc`` to a document.

    Args:
        kb: the clean KB; corruption: the :class:`dukb.kb.corrupt.Corruption`; n: number of documents;
        seed: seed of the choice; per_doc: sentences per document.

    Returns:
        ``(texts, facts)``: the documents and the ``(fact_kind, fact_id)`` of every fact they state.
    """
    from dukb.kb.corrupt import render_fact

    if n <= 0:
        return [], []
    banned = {c.subject for c in corruption.facts}
    banned |= {v for c in corruption.facts if c.fact_kind == RELATIONSHIP for v in (c.true_value, c.injected_value)}
    used = {(s.fact_kind, s.fact_id) for d in corruption.documents for s in d.sentences}
    cands = [(RELATIONSHIP, f) for f in kb.relationships if f.subject not in banned and f.object not in banned]
    cands += [(BIOGRAPHY, b) for b in kb.biographies if b.subject not in banned]
    pool = [(k, f) for k, f in cands if (k, f.fact_id) not in used]
    if len(pool) < n * per_doc:
        pool += [(k, f) for k, f in cands if (k, f.fact_id) in used]
    rng = random.Random(f"dukb-restor-retain/{seed}")
    chosen = pool[:]
    rng.shuffle(chosen)
    chosen = chosen[:n * per_doc]
    texts = [" ".join(render_fact(f, rng) for _, f in chosen[i:i + per_doc]) for i in range(0, len(chosen), per_doc)]
    return texts, [(k, f.fact_id) for k, f in chosen]


def forget_texts(corruption, targeted: bool) -> list[str]:
    """The forget documents: the corruption documents, or (``targeted``) each document's incorrect sentences only,
    in document order (RESTOR's k = 0 forget set)."""
    if not targeted:
        return [d.text for d in corruption.documents]
    return [" ".join(s.sentence for s in d.sentences if s.role == "incorrect") for d in corruption.documents]


def lora_targets(model) -> tuple[str, ...]:
    """Names (last component) of every linear layer but the output head: RESTOR's ``lora_target: all``.

    GPT-2's Conv1D layers count as linear.
    """
    import torch

    names = set()
    for name, mod in model.named_modules():
        last = name.rsplit(".", 1)[-1]
        if last in ("lm_head", "embed_out", "output"):
            continue
        if isinstance(mod, torch.nn.Linear) or type(mod).__name__ == "Conv1D":
            names.add(last)
    return tuple(sorted(names))


def _read_json(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def _rows_key(row: dict) -> tuple:
    return (row["method"], bool(row["targeted"]), json.dumps(row["setting"], sort_keys=True))


class RowsFile:
    """Append-only JSONL of per-method results, one durable line each; a torn last line (from a kill) is dropped on
    open (the behaviour of :class:`dukb.neural.runs.ResultsFile`, keyed by method, targeted and setting)."""

    def __init__(self, path: Path):
        from dukb.neural.runs import ResultsFile

        self._f = ResultsFile(path, _rows_key)

    @property
    def rows(self) -> list[dict]:
        """The rows read or appended so far."""
        return self._f.rows

    def done(self, method: str, targeted: bool, setting: dict) -> bool:
        """True when a row for this method, mode and setting exists."""
        return _rows_key({"method": method, "targeted": targeted, "setting": setting}) in self._f.done

    def append(self, row: dict) -> None:
        """Write one row durably."""
        self._f.append(row)


def summarize_model(facts: Sequence[FactProbe], rows: Sequence[dict]) -> dict:
    """Accuracy of one model: over all facts, F' and the others, per fact kind and per relation/attribute, and
    the share of facts answered with the injected value.

    Returns:
        dict group -> {"n", "accuracy" (%), "injected" (% answered with the injected value)}; groups "all", "F'",
        "other", "relationship", "biography" and "rel:<predicate>".
    """
    groups: dict[str, list[tuple[bool, bool]]] = {}
    for f, r in zip(facts, rows):
        v = (bool(r["correct"]), r["label"] == INJECTED)
        for g in ("all", "F'" if f.injected is not None else "other", f.fact_kind, f"rel:{f.predicate}"):
            groups.setdefault(g, []).append(v)
    return {g: {"n": len(v), "accuracy": 100.0 * sum(a for a, _ in v) / len(v),
                "injected": 100.0 * sum(b for _, b in v) / len(v)} for g, v in groups.items()}


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def logprob_means(lps: Sequence[dict]) -> dict:
    """Means over facts of the true, injected and random log-probabilities (None where a set is empty), with the
    number of facts behind each."""
    return {k: _mean([d[k] for d in lps]) for k in ("true", "injected", "random")} | {
        "n": len(lps), "n_injected": sum(d["injected"] is not None for d in lps)}


# =============================================================================================== pipeline ======
def _spec_for(cfg: RestorConfig, path: str):
    from dukb.neural.models import spec_for_path

    return spec_for_path(path, prompt=cfg.prompt, dtype=cfg.dtype, device=cfg.device)


def _predictor(lm):
    from dukb.neural.probe import Predictor

    lm.model.eval()
    return Predictor(lm.model, lm.tokenizer, lm.tags, device=lm.device)


def _lora_spec(cfg: RestorConfig, model):
    from dukb.neural.spec import LoraSpec

    if not cfg.lora_r:
        return None
    return LoraSpec(cfg.lora_r, cfg.lora_alpha or 2 * cfg.lora_r, 0.0, lora_targets(model))


def _train_clean(cfg: RestorConfig, kb: KB, facts, judge, texts_for_vocab, out: Path, log) -> dict:
    """Stage 1: build (tiny) or load the model and finetune it on the facts' QA and the true-fact sentences."""
    import tempfile

    from dukb.neural.docs import encode_sequences, longest_tokens, train_sequences
    from dukb.neural.models import build_tiny_model, build_tokenizer, load_model, save_model
    from dukb.neural.spec import PROMPT_PRESETS, ModelSpec

    sentences = fact_sentences(kb, cfg.templates)
    items = [f.item() for f in facts]
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dukb-restor-") as tmp:
        if cfg.model == "tiny":
            tags = PROMPT_PRESETS["tiny"]
            qa = [tags.prompt(it.question) + tags.target(it.answer) for it in items]
            texts = qa + sentences + list(texts_for_vocab)
            tok = build_tokenizer(texts)
            need = max(longest_tokens(tok, texts) + cfg.max_new_tokens + 4, 96)
            build_tiny_model(texts, tmp, seed=cfg.seed, config={"n_positions": -(-need // 32) * 32})
            spec = ModelSpec(tmp, prompt="tiny", dtype=cfg.dtype, device=cfg.device)
        else:
            spec = _spec_for(cfg, cfg.model)
        lm = load_model(spec)
        batch = encode_sequences(lm.tokenizer, lm.tags, items, sentences, lm.device)
        pred = _predictor(lm)
        acc = {"value": None}

        def stop(epoch: int) -> bool:
            rows = probe_facts(pred, facts, judge, samples=1, max_new_tokens=cfg.max_new_tokens)
            acc["value"] = sum(r["correct"] for r in rows) / len(rows)
            log(f"clean model, epoch {epoch}: knows {acc['value']:.4f} of the facts")
            lm.model.train()
            return acc["value"] >= 1.0

        tc = cfg.train_config("clean")
        record = train_sequences(lm.model, batch, tc, stop=stop if tc.eval_every else None)
        lm.model.eval()
        if acc["value"] is None:
            stop(record["epochs_run"])
        save_model(lm, out)
    record.update(accuracy=acc["value"], n_qa=len(items), n_sentences=len(sentences),
                  seconds_total=time.perf_counter() - t0, model=cfg.model)
    return record


def _train_corrupted(cfg: RestorConfig, clean_dir: Path, docs: list[str], out: Path, log) -> dict:
    """Stage 2: continue training the clean model on the corruption documents (LoRA, merged afterwards, or full)."""
    from dukb.neural.docs import encode_texts, train_sequences
    from dukb.neural.methods.base import WeightState
    from dukb.neural.models import load_model, save_model

    t0 = time.perf_counter()
    import torch

    lm = load_model(_spec_for(cfg, str(clean_dir)))
    lora = _lora_spec(cfg, lm.model)
    if lora is not None:
        torch.manual_seed(cfg.seed)  # LoRA's initialisation draws from the global generator
        state = WeightState(lm, lora)
        lm.model = state.model
    tc = cfg.train_config("corrupt")
    record = train_sequences(lm.model, encode_texts(lm.tokenizer, docs, lm.device), tc)
    log(f"corruption: {len(docs)} documents, {tc.epochs} epochs, loss {record['loss_per_epoch'][-1]:.4f} "
        f"({record['seconds']:.1f} s)")
    save_model(lm, out)
    record.update(lora=None if lora is None else asdict(lora), n_documents=len(docs),
                  seconds_total=time.perf_counter() - t0)
    return record


def _probe_model(cfg: RestorConfig, pred, facts, judge, offset: int) -> tuple[list[dict], float]:
    t0 = time.perf_counter()
    rows = probe_facts(pred, facts, judge, samples=cfg.resolved_samples(), temperature=cfg.temperature,
                       seed=cfg.seed + offset, max_new_tokens=cfg.max_new_tokens)
    return rows, time.perf_counter() - t0


def _set_a(facts, clean_rows, corr_rows) -> list[int]:
    return [i for i, (c, k) in enumerate(zip(clean_rows, corr_rows)) if c["correct"] and not k["correct"]]


def method_label(row: dict, rows: Sequence[dict] = ()) -> str:
    """Display name of a result row: "GA", "KL (t)" for targeted, with "#n" appended when several rows share the
    method and mode (different settings)."""
    name = row["method"].upper() + (" (t)" if row["targeted"] else "")
    same = [r for r in rows if r["method"] == row["method"] and bool(r["targeted"]) == bool(row["targeted"])]
    if len(same) > 1:
        name += f" #{same.index(row) + 1}"
    return name


def run_restor(run_dir, cfg: RestorConfig, *, log=print) -> dict:
    """Run (or resume) the RESTOR pipeline into ``run_dir`` and render its report.

    Stages and files (each skipped on a rerun when its output exists): config.json; corruption/ (corrupted KB,
    corruptions.csv, documents.jsonl); clean/ and corrupted/ (models with train.json); probes/ (facts.jsonl,
    clean.json, corrupted.json with their belief analyses and log-probabilities over A); results.jsonl (one line
    per unlearning method and mode, appended as each finishes); then :func:`render`.

    Args:
        run_dir: output directory (created).
        cfg: :class:`RestorConfig`.
        log: callable(str) for one-line progress messages.

    Returns:
        The paths written by :func:`render`.

    Raises:
        InputError: bad settings or KB, a KB too small for the corruption, or a run directory holding a run with
            other settings.

    Source: Rezaei et al., RESTOR (Sec. 3-4, App. B-C, G); rule-aware analysis: dukb.
    """
    from dukb.kb import load_kb
    from dukb.kb.corrupt import corrupt, save_corruption
    from dukb.neural.models import TINY_CONFIG, model_fingerprint, resolve_device, resolve_dtype
    from dukb.neural.runs import IDENTITY_VERSION, history_entry, open_run, provenance
    from dukb.solver.closure import compute_closure

    cfg.check()
    run = Path(run_dir)
    t_start = time.perf_counter()
    kb = load_kb(cfg.kb)
    fp = kb.fingerprint()
    closure = compute_closure(kb, cfg.rules)
    true_closure = set(closure.atoms)
    dtype = str(resolve_dtype(cfg.dtype, resolve_device(cfg.device))).removeprefix("torch.")
    identity = cfg.identity() | {
        "identity_version": IDENTITY_VERSION, "kb_fingerprint": fp, "rules_fingerprint": closure.rules.fingerprint,
        "model_fingerprint": {"tiny": TINY_CONFIG} if cfg.model == "tiny" else model_fingerprint(cfg.model),
        "dtype": dtype}
    cfg_path = run / "config.json"
    # a directory holding a run with other settings is refused (every differing key named) before it is touched
    identity, _added, old_record = open_run(run, "restor", identity)
    cor = corrupt(kb, cfg.corrupt, cfg.seed, cfg.context, closure=closure.atoms,
                  docs_per_entity=cfg.docs_per_entity)
    try:  # created only once the settings, the KB and the corruption are known to be good
        run.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"cannot create the run directory: {e.strerror}", run) from None
    if not (run / "corruption" / "documents.jsonl").exists():
        save_corruption(cor, run / "corruption")
    facts = fact_probes(kb, closure.atoms, cor.facts, cfg.n_random, cfg.seed)
    judge = Judge.for_kb(kb, [c.injected_value for c in cor.facts])
    retain, retain_facts = retain_texts(kb, cor, cfg.n_retain, cfg.seed)
    record = {"protocol": "restor", "identity": identity, "config": asdict(cfg), "kb": str(kb.source), "preset": cfg.resolved_preset(),
              "n_facts": len(facts), "n_corrupted": len(cor.facts),
              "n_corrupted_people": len({c.subject for c in cor.facts}), "n_documents": len(cor.documents),
              "retain_facts": [list(k) for k in retain_facts], "n_retain_docs": len(retain),
              "closure_size": len(closure)}
    record["history"] = old_record.get("history", []) + [history_entry({}, methods=cfg.methods,
                                                                       targeted=cfg.targeted)]
    record["provenance"] = provenance(resolve_device(cfg.device))
    _write_json(cfg_path, record)
    log(f"KB {kb.source}: {len(facts)} facts; F' = {len(cor.facts)} facts of "
        f"{record['n_corrupted_people']} people; {len(cor.documents)} documents (k_context {cfg.context})")
    probes = run / "probes"
    probes.mkdir(exist_ok=True)
    if not (probes / "facts.jsonl").exists():
        (probes / "facts.jsonl").write_text("".join(json.dumps(asdict(f)) + "\n" for f in facts), encoding="utf-8")

    docs_full = forget_texts(cor, False)
    # 1. clean model
    clean_dir = run / "clean"
    if not (clean_dir / "train.json").exists():
        log("stage 1/4: clean model")
        rec = _train_clean(cfg, kb, facts, judge, docs_full + retain + forget_texts(cor, True),
                           clean_dir, log)
        _write_json(clean_dir / "train.json", rec)
    # 2. corrupted model
    corr_dir = run / "corrupted"
    if not (corr_dir / "train.json").exists():
        log("stage 2/4: corruption")
        rec = _train_corrupted(cfg, clean_dir, docs_full, corr_dir, log)
        _write_json(corr_dir / "train.json", rec)
    # 3. probes of the clean and corrupted models
    from dukb.neural.models import load_model

    base_rows = {}
    for name, d, off in (("clean", clean_dir, 1), ("corrupted", corr_dir, 2)):
        p = probes / f"{name}.json"
        if p.exists():
            base_rows[name] = _read_json(p)["rows"]
            continue
        log(f"stage 3/4: probing the {name} model")
        lm = load_model(_spec_for(cfg, str(d)))
        rows, secs = _probe_model(cfg, _predictor(lm), facts, judge, off)
        base_rows[name] = rows
        _write_json(p, {"rows": rows, "seconds_probe": secs,
                        "beliefs": belief_analysis(kb, belief_triples(kb, facts, rows), true_closure, cor.facts,
                                                   cfg.rules)})
    a_idx = _set_a(facts, base_rows["clean"], base_rows["corrupted"])
    facts_a = [facts[i] for i in a_idx]
    for name, d in (("clean", clean_dir), ("corrupted", corr_dir)):
        p = probes / f"{name}.json"
        doc = _read_json(p)
        if "logprobs_A" not in doc:
            lm = load_model(_spec_for(cfg, str(d)))
            doc["logprobs_A"] = candidate_logprobs(_predictor(lm), facts_a)
            _write_json(p, doc)
    for name in ("clean", "corrupted"):
        s = summarize_model(facts, base_rows[name])["all"]
        log(f"{name} model: accuracy {s['accuracy']:.2f}% ({s['injected']:.2f}% answered with the injected value)")

    # 4. unlearning
    results = RowsFile(run / "results.jsonl")
    todo = [m for m in cfg.methods if not results.done(m, cfg.targeted, asdict(cfg.unlearn_setting(m)))]
    if todo:
        _unlearn_all(cfg, todo, kb, cor, facts, facts_a, judge, retain, true_closure, base_rows, corr_dir, results,
                     log)
    paths = render(run)
    log(f"done in {time.perf_counter() - t_start:.1f} s: report {paths['report']}")
    return paths


def _unlearn_all(cfg, todo, kb, cor, facts, facts_a, judge, retain, true_closure, base_rows, corr_dir, results,
                 log) -> None:
    """Stage 4: for each method, unlearn the forget documents from the corrupted model, probe, score, append."""
    import torch

    from dukb.neural.docs import encode_texts, unlearn_documents
    from dukb.neural.methods.base import WeightState
    from dukb.neural.models import load_model

    lm = load_model(_spec_for(cfg, str(corr_dir)))
    forget = encode_texts(lm.tokenizer, forget_texts(cor, cfg.targeted), lm.device)
    ret = encode_texts(lm.tokenizer, retain, lm.device) if retain else None
    lora = _lora_spec(cfg, lm.model)
    for m in todo:
        setting = cfg.unlearn_setting(m)
        log(f"stage 4/4: unlearning with {m.upper()}{' (targeted)' if cfg.targeted else ''}: {asdict(setting)}")
        torch.manual_seed(cfg.seed)  # LoRA's initialisation draws from the global generator
        state = WeightState(lm, lora)
        try:
            rec = unlearn_documents(state, m, forget, ret, setting.train_config(cfg.seed),
                                    reg_weight=setting.reg_weight, beta=setting.beta)
            pred = state.predictor()
            rows, secs = _probe_model(cfg, pred, facts, judge, 3 + RESTOR_METHODS.index(m))
            t0 = time.perf_counter()
            lps = candidate_logprobs(pred, facts_a)
            secs_lp = time.perf_counter() - t0
        finally:
            state.close()
        states = [fact_state(c, k_, u) for c, k_, u in zip(base_rows["clean"], base_rows["corrupted"], rows)]
        row = {"method": m, "targeted": cfg.targeted, "setting": asdict(setting), "train": rec,
               "rows": [{k2: r[k2] for k2 in ("outputs", "answers", "labels", "correct", "answer", "label")}
                        for r in rows],
               "states": states, "partition": partition(states),
               "accuracy": summarize_model(facts, rows)["all"]["accuracy"],
               "logprobs_A": lps,
               "beliefs": belief_analysis(kb, belief_triples(kb, facts, rows), true_closure, cor.facts, cfg.rules),
               "seconds_unlearn": rec["seconds"], "seconds_probe": secs, "seconds_logprobs": secs_lp}
        results.append(row)
        p = row["partition"]
        log(f"{method_label(row)}: accuracy {row['accuracy']:.2f}%; A ({p['n_A']}): "
            + ", ".join(f"{s} {_pct(p[s])}" for s in STATES_A) + f"; B ({p['n_B']}): "
            + ", ".join(f"{s} {_pct(p[s])}" for s in STATES_B))


def _pct(v) -> str:
    return "–" if v is None else f"{v:.2f}%"


# ================================================================================================= report ======
def _load_run(run: Path) -> dict:
    """Everything :func:`render` needs, read from a run directory (no model, no solver)."""
    from dukb.neural.runs import read_results

    for need in ("config.json", "probes/facts.jsonl", "probes/clean.json", "probes/corrupted.json"):
        if not (run / need).exists():
            raise InputError(f"not a finished restor run: {need} is missing", run)
    facts = [FactProbe(**{**d, "random": tuple(d["random"])})
             for d in map(json.loads, (run / "probes" / "facts.jsonl").read_text(encoding="utf-8").splitlines())
             if d]
    res = run / "results.jsonl"
    rows = read_results(res) if res.exists() else []
    return {"config": _read_json(run / "config.json"), "facts": facts,
            "clean": _read_json(run / "probes" / "clean.json"),
            "corrupted": _read_json(run / "probes" / "corrupted.json"), "results": rows,
            "clean_train": _read_json(run / "clean" / "train.json") if (run / "clean" / "train.json").exists()
            else {},
            "corrupt_train": _read_json(run / "corrupted" / "train.json")
            if (run / "corrupted" / "train.json").exists() else {}}


def states_table(facts: Sequence[FactProbe], clean: Sequence[dict], corrupted: Sequence[dict],
                 results: Sequence[dict], retain_facts: Iterable = ()) -> list[dict]:
    """One row per fact: the fact, the clean and corrupted models' answers, and per unlearning result its answer,
    label, correctness and state (:func:`fact_state`).

    Returns:
        list of dicts (the columns of states.csv).
    """
    retain = {tuple(k) for k in retain_facts}
    out = []
    for i, f in enumerate(facts):
        d = {"fact_kind": f.fact_kind, "fact_id": f.fact_id, "subject": f.subject, "predicate": f.predicate,
             "true_value": f.true_value, "injected_value": f.injected or "", "in_F_prime": f.injected is not None,
             "in_retain": (f.fact_kind, f.fact_id) in retain}
        for name, rows in (("clean", clean), ("corrupted", corrupted)):
            r = rows[i]
            d |= {f"{name}_answer": r["answer"], f"{name}_label": r["label"], f"{name}_correct": r["correct"]}
        for res in results:
            lab = method_label(res, results).replace(" ", "")
            r = res["rows"][i]
            d |= {f"{lab}_answer": r["answer"], f"{lab}_label": r["label"], f"{lab}_correct": r["correct"],
                  f"{lab}_state": fact_state(clean[i], corrupted[i], r)}
        out.append(d)
    return out


def summary_rows(data: dict) -> list[dict]:
    """summary.csv: per model (clean, corrupted, each unlearning result) and group (all, F', other, fact kinds,
    relations): n, accuracy %, injected %, and for unlearned models the partitions of A and B over that group's
    facts; the log-probability means over A; the belief analysis counts (group "all" only)."""
    facts = data["facts"]
    clean, corr = data["clean"]["rows"], data["corrupted"]["rows"]
    models = [("clean", clean, data["clean"]), ("corrupted", corr, data["corrupted"])]
    models += [(method_label(r, data["results"]), r["rows"], r) for r in data["results"]]
    out = []
    for name, rows, doc in models:
        acc = summarize_model(facts, rows)
        states = [fact_state(c, k, u) for c, k, u in zip(clean, corr, rows)] if name not in ("clean", "corrupted") \
            else None
        for g, v in acc.items():
            row = {"model": name, "group": g, "n": v["n"], "accuracy": round(v["accuracy"], 4),
                   "injected": round(v["injected"], 4)}
            if states is not None:
                sel = [s for f, s in zip(facts, states) if _in_group(f, g)]
                part = partition(sel)
                row |= {k: (None if part[k] is None else round(part[k], 4)) if k in STATES else part[k]
                        for k in ("n_A", *STATES_A, "n_B", *STATES_B)}
            if g == "all":
                lp = logprob_means(doc.get("logprobs_A", []))
                row |= {"logprob_true_A": lp["true"], "logprob_injected_A": lp["injected"],
                        "logprob_random_A": lp["random"]}
                b = doc.get("beliefs", {})
                row |= {k: b.get(k) for k in ("n_beliefs", "n_beliefs_false", "n_derived", "n_derived_false",
                                              "n_derived_contradicting_answers", "n_corrupted_rel",
                                              "n_injected_stated", "n_injected_derivable", "n_injected_retained")}
            out.append(row)
    return out


def _in_group(f: FactProbe, g: str) -> bool:
    if g == "all":
        return True
    if g == "F'":
        return f.injected is not None
    if g == "other":
        return f.injected is None
    if g.startswith("rel:"):
        return f.predicate == g[4:]
    return f.fact_kind == g


def _f(v, nd: int = 2) -> str:
    return "–" if v is None else f"{v:.{nd}f}"


def _delta(v, ref) -> str:
    if v is None or ref is None:
        return _f(v)
    d = v - ref
    arrow = "↑" if d > 0 else ("↓" if d < 0 else "±")
    return f"{v:.2f} ({arrow}{abs(d):.2f})"


def markdown(data: dict) -> str:
    """report.md: RESTOR's Table 1 (accuracy of clean, corrupted and unlearned models; arrows: corrupted vs clean,
    unlearned vs corrupted), Table 2 (Recovery/Forget/Unchanged over A), Table 3 (Degraded/Unaffected over B), the
    same restricted to F', Fig. 2 as a table (mean length-normalised log-probabilities over A), accuracy per
    relation, the rule-aware analysis, timings and the configuration."""
    cfgd = data["config"]
    c = cfgd.get("config", {})
    facts = data["facts"]
    clean, corr = data["clean"]["rows"], data["corrupted"]["rows"]
    res = data["results"]
    labels = [method_label(r, res) for r in res]
    acc = {"clean": summarize_model(facts, clean), "corrupted": summarize_model(facts, corr)}
    for lab, r in zip(labels, res):
        acc[lab] = summarize_model(facts, r["rows"])
    lines = ["# dukb restor report", "",
             f"KB: `{cfgd.get('kb')}` · model: `{c.get('model')}` (preset {cfgd.get('preset')}) · facts: "
             f"{cfgd.get('n_facts')} · F': {cfgd.get('n_corrupted')} facts of {cfgd.get('n_corrupted_people')} "
             f"people (fraction {c.get('corrupt')}) · documents: {cfgd.get('n_documents')} ({c.get('docs_per_entity')}"
             f" per person, k_context {c.get('context')}) · LoRA r: {c.get('lora_r') or 'full finetuning'} · "
             f"M: {cfgd.get('identity', {}).get('samples')} · seed: {c.get('seed')}", "",
             "Judging is exact against the KB (normalised case, accents, trailing words and punctuation; "
             "'X state' = 'X'); a fact is known when a majority of the M generations give the true value.", ""]
    groups = [("all", "all facts"), ("F'", "F' (corrupted facts)"), ("other", "other facts")]
    head = ["Clean", "Corrupted"] + labels
    lines += ["## Table 1: accuracy (%)", "", "| facts | n | " + " | ".join(head) + " |",
              "|---|---|" + "---|" * len(head)]
    for g, title in groups:
        if g not in acc["clean"]:
            continue
        cl, co = acc["clean"][g]["accuracy"], acc["corrupted"][g]["accuracy"]
        cells = [_f(cl), _delta(co, cl)] + [_delta(acc[lab][g]["accuracy"], co) for lab in labels]
        lines.append(f"| {title} | {acc['clean'][g]['n']} | " + " | ".join(cells) + " |")
    fprime = "F'"
    inj_all = ", ".join(f"{k} {_f(v['all']['injected'])}" for k, v in acc.items())
    inj_f = ", ".join(f"{k} {_f(v[fprime]['injected'])}" for k, v in acc.items()) if fprime in acc["clean"] else "–"
    lines += ["", "Arrows: corrupted vs clean; unlearned vs corrupted (as RESTOR Table 1). Share of facts answered "
              f"with the injected value (%): {inj_all}; on F': {inj_f}.", ""]
    if res:
        for title, keys, sub in (("Table 2: outcomes over A = {clean right, corrupted wrong} (%)", STATES_A, "n_A"),
                                 ("Table 3: outcomes over B = {clean right, corrupted right} (%)", STATES_B, "n_B")):
            arrows = {RECOVERY: "↑", FORGET: "↓", UNCHANGED: "↓", DEGRADED: "↓", UNAFFECTED: "↑"}
            lines += [f"## {title}", "", "| method | " + " | ".join(f"{k} {arrows[k]}" for k in keys)
                      + f" | \\|{sub[2]}\\| | on F' only: " + " / ".join(keys) + f" (\\|{sub[2]}∩F'\\|) |",
                      "|---|" + "---|" * (len(keys) + 2)]
            for lab, r in zip(labels, res):
                st = [fact_state(a, b, u) for a, b, u in zip(clean, corr, r["rows"])]
                p = partition(st)
                pf = partition([s for f, s in zip(facts, st) if f.injected is not None])
                lines.append(f"| {lab} | " + " | ".join(_f(p[k]) for k in keys) + f" | {p[sub]} | "
                             + " / ".join(_f(pf[k]) for k in keys) + f" ({pf[sub]}) |")
            lines.append("")
    lines += ["## Fig. 2: mean length-normalised log-probability over A", "",
              "Mean over the facts of A of (1/T) Σ log P(answer token) for the true answer, the injected answer "
              "(facts of A in F' only) and the mean over up to 15 random plausible answers.", "",
              "| model | true | injected | random | \\|A\\| | with injected |", "|---|---|---|---|---|---|"]
    for name, doc in [("Clean", data["clean"]), ("Corrupted", data["corrupted"])] + list(zip(labels, res)):
        lp = logprob_means(doc.get("logprobs_A", []))
        lines.append(f"| {name} | {_f(lp['true'], 3)} | {_f(lp['injected'], 3)} | {_f(lp['random'], 3)} | "
                     f"{lp['n']} | {lp['n_injected']} |")
    rels = sorted(g for g in acc["clean"] if g.startswith("rel:"))
    lines += ["", "## Accuracy per relation (%)", "", "| relation | n | " + " | ".join(head) + " |",
              "|---|---|" + "---|" * len(head)]
    for g in rels:
        lines.append(f"| {g[4:]} | {acc['clean'][g]['n']} | "
                     + " | ".join(_f(acc[k][g]["accuracy"]) for k in ["clean", "corrupted"] + labels) + " |")
    lines += ["", "## Rule-aware analysis of the models' beliefs", "",
              "Belief KB = the (s, r, person) answers to the relationship questions; its deductive closure under "
              "the rules. Contradictions: derived facts outside the true closure, and derived facts of a functional "
              "relation (father, mother, husband, wife) whose subject the model gave another object. Corrupted "
              "relationship facts of F': stated by the model, or derivable from its other beliefs.", "",
              "| model | beliefs | false beliefs | derived | derived false (vs true KB) | derived contradicting "
              "own answers | F' rel. facts | injected stated | injected derivable | injected retained |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for name, doc in [("Clean", data["clean"]), ("Corrupted", data["corrupted"])] + list(zip(labels, res)):
        b = doc.get("beliefs") or {}
        lines.append(f"| {name} | " + " | ".join(str(b.get(k, "–")) for k in (
            "n_beliefs", "n_beliefs_false", "n_derived", "n_derived_false", "n_derived_contradicting_answers",
            "n_corrupted_rel", "n_injected_stated", "n_injected_derivable", "n_injected_retained")) + " |")
    ex = [(name, doc.get("beliefs") or {}) for name, doc in
          [("Corrupted", data["corrupted"])] + list(zip(labels, res))]
    exl = [f"- {n}: " + "; ".join(b.get("examples_contradicting", []) or b.get("examples_false", [])[:3])
           for n, b in ex if b.get("examples_contradicting") or b.get("examples_false")]
    if exl:
        lines += ["", "Examples (subject|relation|object of derived contradicting/false facts):", ""] + exl
    ct, kt = data.get("clean_train", {}), data.get("corrupt_train", {})
    lines += ["", "## Timings (seconds)", "", "| stage | seconds |", "|---|---|",
              f"| clean model ({ct.get('epochs_run', '?')} epochs, accuracy {_f(ct.get('accuracy'), 4)}) | "
              f"{_f(ct.get('seconds_total'), 1)} |",
              f"| corruption ({kt.get('n_documents', '?')} documents) | {_f(kt.get('seconds_total'), 1)} |",
              f"| probing clean / corrupted | {_f(data['clean'].get('seconds_probe'), 1)} / "
              f"{_f(data['corrupted'].get('seconds_probe'), 1)} |"]
    for lab, r in zip(labels, res):
        lines.append(f"| {lab}: unlearning / probing / log-probs | {_f(r.get('seconds_unlearn'), 1)} / "
                     f"{_f(r.get('seconds_probe'), 1)} / {_f(r.get('seconds_logprobs'), 1)} |")
    lines += ["", "## Settings", "", "```json", json.dumps({"config": c, "unlearning": {
        lab: r["setting"] for lab, r in zip(labels, res)}}, indent=1, default=str), "```", ""]
    return "\n".join(lines)


def plot_states(data: dict, row: dict, path: Path) -> None:
    """A stacked-bar PNG of one unlearning result: bar A (Recovery, Forget, Unchanged) and bar B (Degraded,
    Unaffected), each summing to 100% (matplotlib, Agg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    clean, corr = data["clean"]["rows"], data["corrupted"]["rows"]
    p = partition(fact_state(a, b, u) for a, b, u in zip(clean, corr, row["rows"]))
    colors = {RECOVERY: "#2a9d8f", FORGET: "#e9c46a", UNCHANGED: "#e76f51", DEGRADED: "#9b2226",
              UNAFFECTED: "#94d2bd"}
    fig, ax = plt.subplots(figsize=(4.6, 3.8), dpi=120)
    for x, (keys, n) in enumerate(((STATES_A, p["n_A"]), (STATES_B, p["n_B"]))):
        bottom = 0.0
        for k in keys:
            v = p[k] or 0.0
            ax.bar(x, v, bottom=bottom, color=colors[k], label=k, width=0.6)
            if v >= 6:
                ax.text(x, bottom + v / 2, f"{v:.0f}%", ha="center", va="center", fontsize=8)
            bottom += v
    ax.set_xticks([0, 1], [f"A (n={p['n_A']})", f"B (n={p['n_B']})"])
    ax.set_ylim(0, 100)
    ax.set_ylabel("% of facts")
    ax.set_title(f"Fact states after {method_label(row, data['results'])}")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def render(run_dir) -> dict:
    """(Re)write states.csv, summary.csv, report.md and one states_<METHOD>.png per unlearning result from the files
    of a run directory alone (no model, no solver).

    Returns:
        dict of written paths (report, states, summary, plots).

    Raises:
        InputError: the directory does not hold a restor run whose clean and corrupted models were probed.
    """
    import pandas as pd

    run = Path(run_dir)
    data = _load_run(run)
    table = states_table(data["facts"], data["clean"]["rows"], data["corrupted"]["rows"], data["results"],
                         data["config"].get("retain_facts", []))
    pd.DataFrame(table).to_csv(run / "states.csv", index=False, lineterminator="\n")
    summary = pd.DataFrame(summary_rows(data))
    counts = [c for c in summary.columns if c == "n" or c.startswith("n_")]
    summary[counts] = summary[counts].astype("Int64")  # counts stay integers next to empty cells
    summary.to_csv(run / "summary.csv", index=False, lineterminator="\n")
    (run / "report.md").write_text(markdown(data), encoding="utf-8")
    plots = []
    for r in data["results"]:
        name = re.sub(r"[^A-Za-z0-9]+", "_", method_label(r, data["results"])).strip("_")
        p = run / f"states_{name}.png"
        plot_states(data, r, p)
        plots.append(p)
    return {"report": run / "report.md", "states": run / "states.csv", "summary": run / "summary.csv",
            "plots": plots}
