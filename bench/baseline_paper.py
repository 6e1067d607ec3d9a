"""Baseline for the benchmarks only: the paper code's approach to the closure and to Algorithm 1, in plain Python.

This is a re-implementation written for comparison (not the paper's code, and not used by dukb). It keeps the
paper code's algorithmic structure, which is what makes it slow, as described in Wu et al. 2025, Appendix A
(Algorithms 1-3) and implemented in the benchmark's ``utils_metric.py``:

- closure (``get_deductive_closure``): sweep over all rules, each rule re-joined over the *whole* current edge list
  (its indexes rebuilt from scratch for every rule application), new edges appended; repeat sweeps until a sweep
  adds nothing;
- the rule instances deriving a fact (``Rule.get_up_edges_list``) are found by re-indexing the whole closure edge
  list on every call;
- Algorithm 2 (DUS): pick a random unverified fact, look up every instance deriving it, and add a random body fact
  of every instance not yet blocked;
- Algorithm 3 (RP): passes over the shuffled set; every "is the target still not derivable" check
  (``check_if_in_deductive_closure``) recomputes from scratch: start from "unknown" = U ∪ all derived facts and
  repeatedly mark a fact known when some instance deriving it has every body fact known, re-finding the instances
  of every unknown fact in every round, until nothing changes;
- fact ids are found by a linear scan of the edge list (``get_edge_id``), unless ``lookup="dict"``.

Differences, all of which make this baseline *faster* than the paper's code, so the comparison is conservative:
plain tuples and dicts instead of numpy arrays and ``deepcopy``; a variable binding is extended through the first
joinable body atom only (the paper's recursion branches over every joinable atom and then removes the duplicate
bindings with a linear ``np.array_equal`` scan); a head derived by two bindings of one rule is appended once
(the paper's code appends it twice in that sweep). The random choices use :class:`random.Random` (one generator per
seed), so the sets differ from the paper's for the same seed, but every set is a minimal deep unlearning set.

The rules are taken from a :class:`dukb.solver.rules.RuleSet` (head and body atoms); every guard of the built-in
rule files is the head's gender/irreflexivity constraint, which the paper's code applies to every derived edge.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from dukb.kb.model import KB
from dukb.kb.schema import gender_violation
from dukb.solver.rules import RuleSet

Edge = tuple[str, str, str]  # (subject, relation, object)


@dataclass(frozen=True)
class PaperRule:
    """A Horn rule as the paper's code holds it: body tuples and a head tuple over integer variables.

    Attributes:
        body: tuples ``(var_subject, relation, var_object)``.
        head: ``(var_subject, relation, var_object)``.
        n_vars: number of distinct variables.
    """

    body: tuple[tuple[int, str, int], ...]
    head: tuple[int, str, int]
    n_vars: int


def rules_from_ruleset(rules: RuleSet) -> list[PaperRule]:
    """Convert a dukb rule set (``holds(S,R,O)`` atoms with variables) to :class:`PaperRule` objects.

    Raises:
        ValueError: a rule uses a constant person or a variable relation (the paper's rule format has neither).
    """
    out = []
    for r in rules.rules:
        names: dict[str, int] = {}

        def tup(text: str, r=r, names=names) -> tuple[int, str, int]:
            s, rel, o = (x.strip() for x in text.split(","))
            for v in (s, o):
                if not v[:1].isupper():
                    raise ValueError(f"rule {r.text!r}: {v!r} is not a variable")
            if rel[:1].isupper():
                raise ValueError(f"rule {r.text!r}: variable relation {rel!r}")
            return names.setdefault(s, len(names)), rel, names.setdefault(o, len(names))

        body = tuple(tup(b) for b in r.body_holds)
        head = tup(r.head)
        out.append(PaperRule(body, head, len(names)))
    return out


def _index(edges: list[Edge]) -> tuple[dict, dict]:
    """The two look-up tables the paper's code rebuilds on every rule application: (s, rel) -> objects and
    (rel, o) -> subjects."""
    by_src: dict[tuple[str, str], list[str]] = {}
    by_dst: dict[tuple[str, str], list[str]] = {}
    for s, rel, o in edges:
        by_src.setdefault((s, rel), []).append(o)
        by_dst.setdefault((rel, o), []).append(s)
    return by_src, by_dst


def _complete(rule_atoms, binding: list, by_src, by_dst, out: list) -> None:
    """Extend a partial binding through the first body atom with exactly one bound variable (backtracking)."""
    for vs, rel, vo in rule_atoms:
        s, o = binding[vs], binding[vo]
        if s is not None and o is None:
            for cand in by_src.get((s, rel), ()):
                nb = list(binding)
                nb[vo] = cand
                _complete(rule_atoms, nb, by_src, by_dst, out)
            return
        if o is not None and s is None:
            for cand in by_dst.get((rel, o), ()):
                nb = list(binding)
                nb[vs] = cand
                _complete(rule_atoms, nb, by_src, by_dst, out)
            return
    if any(v is None for v in binding):
        return  # a variable no atom connects: the paper's rules have none
    for vs, rel, vo in rule_atoms:
        if binding[vo] not in by_src.get((binding[vs], rel), ()):
            return
    t = tuple(binding)
    if t not in out:  # linear duplicate check, as the paper's code does
        out.append(t)


def apply_rule(rule: PaperRule, edges: list[Edge], kb: KB) -> list[Edge]:
    """New edges one rule derives from the whole edge list (``Rule.get_dc_edges_list``), guards applied."""
    by_src, by_dst = _index(edges)
    first = rule.body[0]
    bindings: list[tuple] = []
    for s, rel, o in edges:
        if rel != first[1]:
            continue
        b = [None] * rule.n_vars
        b[first[0]], b[first[2]] = s, o
        if first[0] == first[2] and s != o:
            continue
        _complete(rule.body, b, by_src, by_dst, bindings)
    new: list[Edge] = []
    seen: set[Edge] = set()
    hs, hrel, ho = rule.head
    for b in bindings:
        s, o = b[hs], b[ho]
        if o in by_src.get((s, hrel), ()):
            continue  # already known
        if s == o or gender_violation(hrel, kb.gender(s), kb.gender(o)):
            continue
        e = (s, hrel, o)
        if e not in seen:
            seen.add(e)
            new.append(e)
    return new


def paper_closure(kb: KB, rules: list[PaperRule]) -> list[Edge]:
    """Deductive closure by re-applying every rule over the whole edge list until a sweep adds nothing
    (``get_deductive_closure``).

    Returns:
        The KB's relationship edges in file order, then the derived edges in the order found.
    """
    edges: list[Edge] = [f.triple for f in kb.relationships]
    while True:
        added = 0
        for rule in rules:
            new = apply_rule(rule, edges, kb)
            edges = edges + new
            added += len(new)
        if not added:
            return edges


def instances_deriving(rule: PaperRule, fact: Edge, edges: list[Edge]) -> list[list[Edge]]:
    """Body edges of every instance of ``rule`` whose head is ``fact`` and whose atoms are all in ``edges``
    (``Rule.get_up_edges_list``: the whole edge list is re-indexed on every call)."""
    by_src, by_dst = _index(edges)
    b = [None] * rule.n_vars
    b[rule.head[0]], b[rule.head[2]] = fact[0], fact[2]
    bindings: list[tuple] = []
    _complete(rule.body + (rule.head,), b, by_src, by_dst, bindings)
    return [[(bd[vs], rel, bd[vo]) for vs, rel, vo in rule.body] for bd in bindings]


class PaperMDUS:
    """Algorithm 1 as the paper's code runs it: DUS, then random pruning with from-scratch derivability checks.

    Args:
        kb: the KB; rules: its rules as :class:`PaperRule`; closure_edges: :func:`paper_closure` of the KB.
        lookup: ``"scan"`` finds a fact's id by a linear scan of the edge list, as the paper's ``get_edge_id``;
            ``"dict"`` uses a dict (to show what remains of the cost without the scan).
    """

    def __init__(self, kb: KB, rules: list[PaperRule], closure_edges: list[Edge], lookup: str = "scan"):
        self.kb, self.rules, self.edges = kb, rules, closure_edges
        self.n_kb = len(kb.relationships)
        self.by_rel: dict[str, list[PaperRule]] = {}
        for r in rules:
            self.by_rel.setdefault(r.head[1], []).append(r)
        if lookup not in ("scan", "dict"):
            raise ValueError(f"lookup must be 'scan' or 'dict', not {lookup!r}")
        self._ids = {e: i for i, e in enumerate(closure_edges)} if lookup == "dict" else None

    def edge_id(self, edge: Edge) -> int:
        """Position of an edge in the closure edge list."""
        if self._ids is not None:
            return self._ids[edge]
        for i, e in enumerate(self.edges):
            if e == edge:
                return i
        raise KeyError(edge)

    def derivable(self, target: int, removed: set[int]) -> bool:
        """``check_if_in_deductive_closure``: is edge ``target`` in Omega(K \\ removed)? Recomputed from scratch."""
        unknown = set(removed) | set(range(self.n_kb, len(self.edges)))
        while True:
            known_now = []
            for x in unknown:
                fact = self.edges[x]
                done = False
                for rule in self.by_rel.get(fact[1], ()):
                    for body in instances_deriving(rule, fact, self.edges):
                        if all(self.edge_id(b) not in unknown for b in body):
                            known_now.append(x)
                            done = True
                            break
                    if done:
                        break
            for x in known_now:
                unknown.discard(x)
            if not known_now:
                return target not in unknown

    def dus(self, target: int, rng: random.Random) -> set[int]:
        """Algorithm 2: a random deep unlearning set (ids of KB edges)."""
        chosen: set[int] = set()
        pending = {target}
        while pending:
            cur = rng.choice(sorted(pending))
            pending.remove(cur)
            chosen.add(cur)
            fact = self.edges[cur]
            for rule in self.by_rel.get(fact[1], ()):
                for body in instances_deriving(rule, fact, self.edges):
                    ids = [self.edge_id(b) for b in body]
                    if not any(i in chosen or i in pending for i in ids):
                        pending.add(ids[rng.randrange(len(ids))])
        return {i for i in chosen if i < self.n_kb}

    def prune(self, target: int, removed: set[int], rng: random.Random) -> set[int]:
        """Algorithm 3: random pruning to a minimal deep unlearning set."""
        u = set(removed)
        while True:
            dropped = 0
            order = sorted(u)
            rng.shuffle(order)
            for d in order:
                u.discard(d)
                if self.derivable(target, u):
                    u.add(d)
                else:
                    dropped += 1
            if not dropped:
                return u

    def run(self, target: int, seed: int) -> set[int]:
        """One seed-run of Algorithm 1 for a target edge id: DUS then RP. Returns KB edge ids (= positions in the
        KB's relationship list)."""
        rng = random.Random(seed)
        return self.prune(target, self.dus(target, rng), rng)
