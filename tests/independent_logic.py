"""Independent reference logic for the solver's property tests (no dukb.solver import).

Everything here is written from the benchmark's own text, not from dukb's ASP programs, so that the tests compare
two implementations that share nothing but the data:

- :data:`RAW_RULES`: the 48 rules of EDU-RELAT verbatim (``original/family_rule_raw.txt``, MIT licence, Wu et al.
  2025), in the raw notation ``(A, is wife of, B) > (B, is husband of, A)``. "A is wife of B" is the triple
  ``(B, wife, A)``; ``(A, is, "male")`` is a gender condition on A.
- :func:`parse_raw_rules`: the raw notation -> :class:`RawRule`; ``rule_set="family"`` reads the misspelt
  "newphe" as "nephew", ``rule_set="family_paper_compat"`` keeps "newphe", a relation no fact has, so the two rules
  stay dead as in the paper's code (notes/deep-unlearning.md).
- :func:`closure`: naive forward chaining to the least fixpoint (Definition 1), with the spec's guards: a derived
  fact's object is male for husband/father/brother/uncle/nephew and female for wife/mother/sister/aunt/niece, the
  subject of husband is female and of wife is male, and no derived fact is reflexive.
- :func:`brute_force_mdus`: every subset of K, keep those whose removal makes every target underivable, keep the
  subset-minimal ones (Definitions 2-3), for KBs of at most 12 facts.
- :func:`reference_recall`: Eq. 1 and 2 of the paper written out directly, with exact fractions.
- :func:`family_tree_facts`: every true family relation of a small family tree (to build KBs on which rules fire).
- :func:`reference_paper_sets`: the paper's cached sets of one target in the order the reference iterates them.
"""

from __future__ import annotations

import itertools
import pickle
import re
import zipfile
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

Triple = tuple[str, str, str]

#: The 48 rules of EDU-RELAT, verbatim from ``original/family_rule_raw.txt`` (one rule a line, in order).
RAW_RULES = """\
(A, is wife of, B) > (B, is husband of, A)
(B, is child of, A) + (B, is child of, C) + (A, is, "male") > (A, is husband of, C)
(A, is father of, B) + (C, is mother of, B) > (A, is husband of, C)
(A, is husband of, B) > (B, is wife of, A)
(B, is child of, A) + (B, is child of, C) + (A, is, "female") > (A, is wife of, C)
(A, is father of, B) + (C, is mother of, B) > (A, is wife of, C)
(B, is uncle of, A) + (A, is, "male") > (A, is nephew of, B)
(B, is aunt of, A) + (A, is, "male") > (A, is nephew of, B)
(A, is child of, B) + (C, is brother of, B) + (A, is, "male") > (A, is nephew of, C)
(A, is child of, B) + (C, is sister of, B) + (A, is, "male") > (A, is nephew of, C)
(B, is uncle of, A) + (A, is, "female") > (A, is niece of, B)
(B, is aunt of, A) + (A, is, "female") > (A, is niece of, B)
(A, is child of, B) + (C, is brother of, B) + (A, is, "female") > (A, is niece of, C)
(A, is child of, B) + (C, is sister of, B) + (A, is, "female") > (A, is niece of, C)
(A, is niece of, B) + (B, is, "male") > (B, is uncle of, A)
(A, is newphe of, B) + (B, is, "male") > (B, is uncle of, A)
(A, is child of, B) + (C, is brother of, B) > (C, is uncle of, A)
(A, is niece of, B) + (B, is, "female") > (B, is aunt of, A)
(A, is newphe of, B) + (B, is, "female") > (B, is aunt of, A)
(A, is child of, B) + (C, is sister of, B) > (C, is aunt of, A)
(B, is brother of, A) + (A, is, "male") > (A, is brother of, B)
(B, is sister of, A) + (A, is, "male") > (A, is brother of, B)
(A, is child of, C) + (B, is child of, C) > (A, is brother of, B)
(C, is mother of, A) + (C, is mother of, B) + (A, is, "male") > (A, is brother of, B)
(C, is father of, A) + (C, is father of, B) + (A, is, "male") > (A, is brother of, B)
(B, is brother of, A) + (A, is, "female") > (A, is sister of, B)
(B, is sister of, A) + (A, is, "female") > (A, is sister of, B)
(A, is child of, C) + (B, is child of, C) + (A, is, "female") > (A, is sister of, B)
(C, is mother of, A) + (C, is mother of, B) + (A, is, "female") > (A, is sister of, B)
(C, is father of, A) + (C, is father of, B) + (A, is, "female") > (A, is sister of, B)
(A, is child of, B) + (B, is, "female") > (B, is mother of, A)
(A, is father of, B) + (C, is wife of, A) > (C, is mother of, B)
(B, is brother of, A) + (C, is mother of, A) > (C, is mother of, B)
(B, is sister of, A) + (C, is mother of, A) > (C, is mother of, B)
(A, is child of, B) + (B, is, "male") > (B, is father of, A)
(A, is mother of, B) + (C, is husband of, A) > (C, is father of, B)
(B, is brother of, A) + (C, is father of, A) > (C, is father of, B)
(B, is sister of, A) + (C, is father of, A) > (C, is father of, B)
(A, is mother of, B) > (B, is child of, A)
(A, is mother of, C) + (C, is sister of, B) > (B, is child of, A)
(A, is wife of, C) + (C, is father of, B) > (B, is child of, A)
(A, is mother of, C) + (C, is brother of, B) > (B, is child of, A)
(A, is father of, B) > (B, is child of, A)
(A, is father of, C) + (C, is sister of, B) > (B, is child of, A)
(A, is father of, C) + (C, is brother of, B) > (B, is child of, A)
(C, is child of, A) + (C, is sister of, B) > (B, is child of, A)
(C, is child of, A) + (C, is brother of, B) > (B, is child of, A)
(A, is husband of, C) + (C, is mother of, B) > (B, is child of, A)
"""

#: Relations whose object must be male / female (the spec's gender guards on derived facts).
MALE_OBJECT = frozenset({"husband", "father", "brother", "uncle", "nephew"})
FEMALE_OBJECT = frozenset({"wife", "mother", "sister", "aunt", "niece"})
#: Relations whose subject must have a given gender: "o is s's husband" => s is female; wife => s is male.
SUBJECT_GENDER_OF = {"husband": "female", "wife": "male"}
#: The 11 family relations.
FAMILY_RELATIONS = (
    "child",
    "father",
    "mother",
    "husband",
    "wife",
    "brother",
    "sister",
    "aunt",
    "uncle",
    "nephew",
    "niece",
)
RULE_SETS = ("family", "family_paper_compat")


def raw_rules_file(shared_edu_relat: Path) -> Path:
    """Path of the benchmark's raw rule file inside an EDU-RELAT directory (it may not exist)."""
    return Path(shared_edu_relat) / "original" / "family_rule_raw.txt"


def load_raw_rules(shared_edu_relat: Path | None = None) -> str:
    """The raw rule text: read from the EDU-RELAT directory when it holds the file, else :data:`RAW_RULES`."""
    if shared_edu_relat is not None:
        path = raw_rules_file(shared_edu_relat)
        if path.is_file():
            return path.read_text(encoding="utf-8")
    return RAW_RULES


@dataclass(frozen=True)
class RawRule:
    """One rule of the raw notation, as triple patterns over variables.

    Attributes:
        number: 1-based line number in the raw file.
        body: ``(subject_var, relation, object_var)`` patterns, all of which must hold.
        conditions: ``(var, gender)`` gender conditions written in the rule.
        head: the derived ``(subject_var, relation, object_var)``.
    """

    number: int
    body: tuple[tuple[str, str, str], ...]
    conditions: tuple[tuple[str, str], ...]
    head: tuple[str, str, str]


_ATOM = re.compile(r"\(\s*([A-Z])\s*,\s*is ([a-z]+) of\s*,\s*([A-Z])\s*\)")
_COND = re.compile(r'\(\s*([A-Z])\s*,\s*is\s*,\s*"(male|female)"\s*\)')


def _pattern(text: str) -> tuple[str, str, str]:
    m = _ATOM.fullmatch(text.strip())
    if not m:
        raise ValueError(f"not a relation atom: {text!r}")
    x, rel, y = m.groups()
    return (y, rel, x)  # "X is REL of Y" = the triple (Y, REL, X)


def parse_raw_rules(text: str = RAW_RULES, rule_set: str = "family") -> list[RawRule]:
    """Parse the raw rule notation.

    Args:
        text: rule lines ``body + body ... > head``.
        rule_set: "family" (read "newphe" as "nephew") or "family_paper_compat" (keep "newphe": the rule is dead).

    Returns:
        The rules in order.

    Raises:
        ValueError: an unknown rule set, a malformed line, or a head variable that no body atom binds.
    """
    if rule_set not in RULE_SETS:
        raise ValueError(f"unknown rule set {rule_set!r}")
    rules = []
    for number, line in enumerate((ln for ln in text.splitlines() if ln.strip()), start=1):
        if rule_set == "family":
            line = line.replace("is newphe of", "is nephew of")
        lhs, rhs = line.split(">")
        body, conds = [], []
        for part in lhs.split("+"):
            m = _COND.fullmatch(part.strip())
            if m:
                conds.append((m.group(1), m.group(2)))
            else:
                body.append(_pattern(part))
        head = _pattern(rhs)
        bound = {v for s, _, o in body for v in (s, o)}
        if not {head[0], head[2], *(v for v, _ in conds)} <= bound:
            raise ValueError(f"rule {number} is unsafe: {line!r}")
        rules.append(RawRule(number, tuple(body), tuple(conds), head))
    return rules


def allowed(triple: Triple, genders: dict[str, str]) -> bool:
    """The spec's guard on a derived fact: not reflexive, object and subject genders fit the relation."""
    s, r, o = triple
    if s == o:
        return False
    if r in MALE_OBJECT and genders.get(o) != "male":
        return False
    if r in FEMALE_OBJECT and genders.get(o) != "female":
        return False
    need = SUBJECT_GENDER_OF.get(r)
    return need is None or genders.get(s) == need


def _matches(rule: RawRule, by_rel: dict[str, set[tuple[str, str]]]):
    """Yield every variable binding (dict) that satisfies the rule's body atoms in the fact index."""

    def go(k: int, env: dict[str, str]):
        if k == len(rule.body):
            yield env
            return
        sv, rel, ov = rule.body[k]
        for s, o in by_rel.get(rel, ()):
            if env.get(sv, s) != s or env.get(ov, o) != o:
                continue
            if sv == ov and s != o:
                continue
            new = dict(env)
            new[sv] = s
            new[ov] = o
            yield from go(k + 1, new)

    yield from go(0, {})


def ground_instances(facts, genders: dict[str, str], rules: list[RawRule]) -> set[tuple[Triple, tuple[Triple, ...]]]:
    """Every rule instance whose body atoms are all in ``facts`` and whose head passes the guards.

    Returns:
        Set of ``(head, body)`` pairs (body: the instance's body triples, in rule order).
    """
    by_rel: dict[str, set[tuple[str, str]]] = {}
    for s, r, o in facts:
        by_rel.setdefault(r, set()).add((s, o))
    out = set()
    for rule in rules:
        for env in _matches(rule, by_rel):
            if any(genders.get(env[v]) != g for v, g in rule.conditions):
                continue
            t = (env[rule.head[0]], rule.head[1], env[rule.head[2]])
            if allowed(t, genders):
                out.add((t, tuple((env[a], r, env[b]) for a, r, b in rule.body)))
    return out


def apply_rules(facts, genders: dict[str, str], rules: list[RawRule]) -> set[Triple]:
    """One round of every rule on ``facts``: the set of heads of all their instances (guards applied)."""
    return {head for head, _ in ground_instances(facts, genders, rules)}


def closure(facts, genders: dict[str, str], rules: list[RawRule]) -> set[Triple]:
    """Omega(K, R): the least superset of ``facts`` closed under ``rules`` (naive fixpoint iteration).

    Args:
        facts: iterable of ``(subject, relation, object)`` triples (K).
        genders: person -> "male" | "female" (background knowledge).
        rules: from :func:`parse_raw_rules`.
    """
    known = set(facts)
    while True:
        new = apply_rules(known, genders, rules) - known
        if not new:
            return known
        known |= new


class SubsetOracle:
    """Answers "is some target in Omega(K \\ U)?" for many subsets U of one KB, quickly.

    Every rule instance that can fire on a subset of K fires on K (rules are positive, so Omega(K \\ U) is a
    subset of Omega(K)), so the instances of Omega(K) found by :func:`ground_instances` hold all that is needed:
    each query is then bitmask forward chaining over them. :meth:`derivable_slow` recomputes the closure from
    scratch instead (the literal definition), to cross-check this one.
    """

    def __init__(self, facts: dict[int, Triple], genders: dict[str, str], rules: list[RawRule]):
        self.facts, self.genders, self.rules = dict(facts), genders, rules
        full = closure(facts.values(), genders, rules)
        self.atoms = sorted(full)
        bit = {a: i for i, a in enumerate(self.atoms)}
        self.bit = bit
        self.fact_bit = {fid: bit[t] for fid, t in self.facts.items()}
        self.instances = sorted(
            {(bit[h], sum(1 << bit[b] for b in body)) for h, body in ground_instances(full, genders, rules)}
        )

    def derived_mask(self, removed) -> int:
        """Bitmask (over :attr:`atoms`) of Omega(K \\ removed); ``removed``: fact ids."""
        mask = 0
        for fid, b in self.fact_bit.items():
            if fid not in removed:
                mask |= 1 << b
        changed = True
        while changed:
            changed = False
            for h, body in self.instances:
                if not (mask >> h) & 1 and mask & body == body:
                    mask |= 1 << h
                    changed = True
        return mask

    def derivable(self, targets, removed) -> bool:
        """True when some target triple is in Omega(K \\ removed)."""
        mask = self.derived_mask(removed)
        return any(t in self.bit and (mask >> self.bit[t]) & 1 for t in targets)

    def derivable_slow(self, targets, removed) -> bool:
        """Same as :meth:`derivable`, by recomputing the closure of K \\ removed from scratch."""
        kept = [t for fid, t in self.facts.items() if fid not in removed]
        return bool(set(targets) & closure(kept, self.genders, self.rules))


def brute_force_mdus(
    facts: dict[int, Triple],
    genders: dict[str, str],
    rules: list[RawRule],
    targets,
    max_facts: int = 12,
    slow: bool = False,
) -> set[frozenset[int]]:
    """All minimal deep unlearning sets of ``targets`` by trying every subset of K (Definitions 2 and 3).

    U (a set of fact ids) is a deep unlearning set when no target is in Omega(K \\ U); the result keeps the
    subset-minimal ones. Subsets are tried by increasing size, so a deep unlearning set is minimal exactly when it
    contains no set found before; supersets of a found set are skipped.

    Args:
        facts: fact_id -> triple (K).
        genders, rules: as for :func:`closure`.
        targets: target triples (all must become underivable).
        max_facts: refuse larger KBs (2^|K| subsets).
        slow: recompute the closure from scratch for each subset instead of using :class:`SubsetOracle`.

    Raises:
        ValueError: K has more than ``max_facts`` facts.
    """
    if len(facts) > max_facts:
        raise ValueError(f"brute force over {len(facts)} facts is too slow")
    targets = set(targets)
    oracle = SubsetOracle(facts, genders, rules)
    check = oracle.derivable_slow if slow else oracle.derivable
    return minimal_removals(sorted(facts), lambda u: check(targets, u))


def minimal_removals(ids, derivable) -> set[frozenset[int]]:
    """The subset-minimal sets U of ``ids`` with ``derivable(U)`` false, ``derivable(U)`` saying whether some target
    is still in Omega(K \\ U): every subset is tried by increasing size, and supersets of a found set are skipped
    (Definitions 2 and 3)."""
    found: list[frozenset[int]] = []
    for size in range(len(ids) + 1):
        for combo in itertools.combinations(ids, size):
            u = frozenset(combo)
            if any(m <= u for m in found):
                continue
            if not derivable(u):
                found.append(u)
    return set(found)


def reference_recall(n_rel: int, n_bio: int, sets, forgotten_rel, forgotten_bio=()):
    """Eq. 1 and 2 of Wu et al. 2025 written out directly, with exact fractions.

    Args:
        n_rel, n_bio: number of relationship / biography facts of K.
        sets: M, the minimal deep unlearning sets (collections of relationship fact ids).
        forgotten_rel: U_A; forgotten_bio: forgotten biography fact ids.

    Returns:
        dict with ``recall``, ``candidates`` (the sets reaching it), ``accuracy_relationships`` (the best over the
        candidates: the tie rule; None when no candidate leaves a fact to score, which dukb reports as NaN),
        ``best_sets`` (candidates with that accuracy), ``accuracy_biographies`` (None without biographies) and
        ``accuracy_all`` (None where nothing is scored).
    """
    u_a = set(forgotten_rel)
    ms = [frozenset(s) for s in sets]
    rec = {m: Fraction(len(u_a & m), len(m)) for m in ms}
    best = max(rec.values())
    cands = [m for m in ms if rec[m] == best]

    def acc_rel(m):
        rest = n_rel - len(m)
        if rest == 0:
            return None  # nothing to score: undefined (NaN), never 1
        return Fraction(rest - len(u_a - m), rest)  # |(K_rel minus U*) minus U_A| / |K_rel minus U*|

    accs = {m: acc_rel(m) for m in cands}
    scored = [a for a in accs.values() if a is not None]
    top = max(scored) if scored else None  # a set that leaves facts to score wins a tie over one that leaves none
    best_sets = [m for m in cands if accs[m] == top]
    acc_bio = None if n_bio == 0 else Fraction(n_bio - len(set(forgotten_bio)), n_bio)
    out = []
    for m in best_sets:
        rest = n_rel - len(m)
        denom = n_bio + rest
        acc_all = None if denom == 0 else ((acc_bio or 0) * n_bio + (accs[m] or 0) * rest) / denom
        out.append(acc_all)
    return {
        "recall": best,
        "candidates": cands,
        "accuracy_relationships": top,
        "best_sets": best_sets,
        "accuracy_biographies": acc_bio,
        "accuracy_all": out,
    }


def family_tree_facts(
    genders: dict[str, str], parents: dict[str, tuple[str, ...]], couples: list[tuple[str, str]]
) -> set[Triple]:
    """Every true relationship fact of a family tree (blood uncles/aunts only), read "o is s's r".

    Args:
        genders: person -> gender.
        parents: child -> its parents (one or two people).
        couples: (husband, wife) pairs.
    """
    facts: set[Triple] = set()
    for h, w in couples:
        facts.add((w, "husband", h))
        facts.add((h, "wife", w))
    kids: dict[str, set[str]] = {}
    for c, ps in parents.items():
        for p in ps:
            kids.setdefault(p, set()).add(c)
            facts.add((p, "child", c))
            facts.add((c, "father" if genders[p] == "male" else "mother", p))
    sibs: dict[str, set[str]] = {}
    for group in kids.values():
        for a in group:
            sibs.setdefault(a, set()).update(group - {a})
    for a, bs in sibs.items():
        for b in bs:
            facts.add((a, "brother" if genders[b] == "male" else "sister", b))
    for c, ps in parents.items():
        for p in ps:
            for u in sibs.get(p, ()):
                facts.add((c, "uncle" if genders[u] == "male" else "aunt", u))
                facts.add((u, "nephew" if genders[c] == "male" else "niece", c))
    return facts


def reference_paper_sets(path: Path) -> list[list[int]]:
    """The paper's cached minimal sets of one target (Eval-DU ``unlearn_minimal_set/<edge id>.pt``) as the reference
    iterates them: Python's own unpickler on the benchmark's file (trusted data; dukb reads it with its restricted
    one) and ``list()`` of the set it returns (``list(torch.load(...))``, utils_metric.py:106 and :114), each set
    as sorted ints."""
    with zipfile.ZipFile(path) as zf:
        data = zf.read(next(n for n in zf.namelist() if n.endswith("/data.pkl")))
    obj = pickle.loads(data)
    assert isinstance(obj, set) and all(isinstance(s, frozenset) for s in obj)
    return [sorted(int(x) for x in s) for s in list(obj)]
