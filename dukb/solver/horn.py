"""Semi-naive bottom-up evaluation of positive Horn rules over ``holds/3`` with numpy joins (the fast closure path).

:func:`dukb.solver.closure.compute_closure` computes the deductive closure Omega(K, R) (Wu et al. 2025, Def. 1).
clingo's grounder does it generally, but it also materialises every ground rule instance as a symbol, which costs
most of the time on large KBs. This module compiles each rule of a :class:`dukb.solver.rules.RuleSet` into a join
plan over integer-encoded facts and evaluates it with numpy:

- symbols: relations are ``0..R-1`` in the order of the KB schema's relations (family: the 11 of
  :data:`dukb.kb.schema.RELATIONS`), names (strings) are ``0..n-1`` in a symbol table; a fact is the int64 code
  ``(s * R + r) * n + o``;
- the closure: semi-naive iteration (Ullman 1988, "Principles of Database and Knowledge-Base Systems", Vol. I,
  Sec. 3.9): in each round a rule joins, for each body position i, the previous round's new facts at position i
  with the older facts at positions < i and all facts at positions > i; the new head facts form the next delta;
- the ground instances: one join of every rule over the final closure, on demand (:func:`ground_instances`).

Rules outside the supported form raise :class:`Unsupported`, and the caller falls back to clingo. Supported: body
atoms ``holds(S,R,O)`` whose S/O are variables or strings and R a variable or a relation; guards ``t/1`` of a
variable or string, one boolean mask over the names per background predicate of the schema (its entity types and its
entity predicate; family: ``male/1``, ``female/1``, ``person/1``; a predicate without a mask is false); comparisons ``=`` and ``!=`` of such terms; every variable
occurring in some body ``holds`` atom; no variable used both as a name (S/O) and a relation (R).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, cast

import numpy as np
from clingo import ast

from dukb.kb.parallel import thread_map
from dukb.kb.schema import RELATIONS

if TYPE_CHECKING:  # for annotations only
    from clingo.ast import AST

    from dukb.solver.rules import RuleSet

#: Most rows one join of a rule's body may produce (checked before the join allocates anything). The family rules
#: join at most about 160,000 rows on a generated KB of 100,000 people (about 1.5 million at 1,000,000 people); a
#: rule whose body atoms share no variables joins the product of their sizes, which soon exceeds any memory.
MAX_JOIN_ROWS = 20_000_000
#: Fewest facts at which a fixpoint round evaluates its rules in threads (:func:`dukb.kb.parallel.thread_map`;
#: a generated KB of 10,000 people has about 42,000): below it the threads' start-up costs more than it saves.
PARALLEL_MIN_FACTS = 100_000


def unique(x: np.ndarray) -> np.ndarray:
    """Sorted distinct values of an int array (sort-based; numpy's hash-based ``unique`` is slower on int64).

    Example:
        >>> unique(np.array([5, 1, 5, 3, 1]))
        array([1, 3, 5])
    """
    if len(x) < 2:
        return np.sort(x)
    a = np.sort(x)
    keep = np.empty(len(a), dtype=bool)
    keep[0] = True
    np.not_equal(a[1:], a[:-1], out=keep[1:])
    return a[keep]


def in_sorted(x: np.ndarray, sorted_unique: np.ndarray) -> np.ndarray:
    """Boolean mask: which elements of ``x`` occur in the sorted distinct array ``sorted_unique``.

    Example:
        >>> in_sorted(np.array([4, 1, 7]), np.array([1, 3, 4]))
        array([ True,  True, False])
    """
    if not len(sorted_unique):
        return np.zeros(len(x), dtype=bool)
    k = np.searchsorted(sorted_unique, x)
    k[k == len(sorted_unique)] = 0
    return sorted_unique[k] == x


def _rank(x: np.ndarray) -> tuple[np.ndarray, int]:
    """Dense ranks 0..m-1 of the values of ``x`` and m."""
    if not len(x):
        return x.astype(np.int64), 1
    order = np.argsort(x, kind="stable")
    a = x[order]
    step = np.empty(len(a), dtype=np.int64)
    step[0] = 0
    np.not_equal(a[1:], a[:-1], out=step[1:])
    r = np.empty(len(a), dtype=np.int64)
    r[order] = np.cumsum(step)
    return r, int(r.max()) + 1


def sort_rows(keys: list[np.ndarray]) -> np.ndarray:
    """Stable order of rows by several integer key columns (most significant first; values >= -1), as
    ``np.lexsort`` on the reversed keys, but with the keys packed into as few int64 words as their ranges allow.

    Args:
        keys: int arrays of one length (values >= -1), most significant first.

    Returns:
        The row order (int64 array).

    Example:
        >>> sort_rows([np.array([1, 0, 1]), np.array([5, 7, -1])]).tolist()
        [1, 2, 0]
    """
    if not len(keys[0]):
        return np.zeros(0, dtype=np.int64)
    words: list[np.ndarray] = []
    cur: np.ndarray | None = None
    used = 0
    for k in keys:
        k = k.astype(np.int64) + 1
        bits = max(int(k.max()).bit_length(), 1)
        if cur is None or used + bits > 62:
            if cur is not None:
                words.append(cur)
            cur, used = k, bits
        else:
            cur = (cur << bits) | k
            used += bits
    words.append(cast(np.ndarray, cur))  # keys is not empty
    if len(words) == 1:
        return np.argsort(words[0], kind="stable")
    if len(words) > 2:
        return np.lexsort(words[::-1])
    # two words: sort by the first (fast unstable sort), then order the runs of equal first words, which are few
    # here, by the second word and the row number (as a stable sort would)
    w0, w1 = words
    order = np.argsort(w0)
    s0 = w0[order]
    tie = np.zeros(len(s0), dtype=bool)
    eq = s0[1:] == s0[:-1]
    tie[1:] |= eq
    tie[:-1] |= eq
    if tie.any():
        pos = np.flatnonzero(tie)
        sub = order[pos]
        order[pos] = sub[np.lexsort((sub, w1[sub], s0[pos]))]
    return order


class Unsupported(Exception):
    """A rule the numpy evaluator does not handle (the caller uses clingo instead).

    Example:
        >>> compile_rules("example-unsupported", ("holds(A,R,B) :- holds(B,R,A); R != child.",))
        Traceback (most recent call last):
            ...
        dukb.solver.horn.Unsupported: ...
    """


class JoinTooLarge(Exception):
    """A join of a rule's body would produce more than :data:`MAX_JOIN_ROWS` rows.

    Attributes:
        rows: the number of rows the join would produce.
        limit: the limit it exceeds.
        rule: the index of the rule in its rule set (set by :meth:`Evaluator.evaluate`; None before).

    Example:
        >>> e = JoinTooLarge(10 ** 9, MAX_JOIN_ROWS, rule=3)
        >>> e.rows > e.limit, e.rule
        (True, 3)
    """

    def __init__(self, rows: int, limit: int, rule: int | None = None):
        self.rows, self.limit, self.rule = rows, limit, rule
        super().__init__(f"a join of {rows} rows, more than the limit of {limit}")


@dataclass(frozen=True)
class Term:
    """A term of a compiled rule: a variable (``var`` its name) or a constant (``const``: a name for S/O or a
    relation for R).

    Example:
        >>> rule = compile_rules("example-term", ("holds(A,wife,B) :- holds(B,husband,A).",))[0]
        >>> rule.head
        (Term(var='A', const=None), Term(var=None, const='wife'), Term(var='B', const=None))
    """

    var: str | None = None
    const: str | None = None


@dataclass(frozen=True)
class CRule:
    """A compiled rule.

    Attributes:
        index: rule index in the rule set.
        head: (S, R, O) terms of the head.
        body: (S, R, O) terms of each body ``holds`` atom, in the rule's order.
        guards: (predicate, term) for the background atoms (entity types, entity predicate).
        comparisons: (op, left, right) with op ``"="`` or ``"!="``.

    Example:
        >>> rule = compile_rules("example-crule", ("holds(A,wife,B) :- holds(B,husband,A); female(B); A != B.",))[0]
        >>> len(rule.body), rule.guards, [op for op, _, _ in rule.comparisons]
        (1, (('female', Term(var='B', const=None)),), ['!='])
    """

    index: int
    head: tuple[Term, Term, Term]
    body: tuple[tuple[Term, Term, Term], ...]
    guards: tuple[tuple[str, Term], ...]
    comparisons: tuple[tuple[str, Term, Term], ...]

    @property
    def name_vars(self) -> set[str]:
        """Variables in S/O positions."""
        return {t.var for a in self.body + (self.head,) for t in (a[0], a[2]) if t.var}


def _term(node: AST, position: str, relations: tuple[str, ...]) -> Term:

    if node.ast_type == ast.ASTType.Variable:
        if node.name == "_":
            raise Unsupported("anonymous variable")
        return Term(var=node.name)
    if node.ast_type == ast.ASTType.SymbolicTerm:
        sym = node.symbol
        if position == "rel" and sym.type.name == "Function" and not sym.arguments and sym.name in relations:
            return Term(const=sym.name)
        if position == "name" and sym.type.name == "String":
            return Term(const=sym.string)
    raise Unsupported(f"term {node}")


def _holds(sym: AST, relations: tuple[str, ...]) -> tuple[Term, Term, Term]:
    a = sym.arguments
    return (_term(a[0], "name", relations), _term(a[1], "rel", relations), _term(a[2], "name", relations))


@lru_cache(maxsize=16)
def compile_rules(
    program_key: str, texts: tuple[str, ...], relations: tuple[str, ...] = RELATIONS
) -> tuple[CRule, ...]:
    """Compile validated rules (their clingo-printed text) into :class:`CRule` join plans.

    Args:
        program_key: the rule set's fingerprint (cache key).
        texts: the rules' texts in rule-set order.
        relations: the KB schema's relations (a relation constant must be one of them).

    Returns:
        The compiled rules.

    Raises:
        Unsupported: a rule outside the supported form (see the module docstring).

    Example:
        >>> rules = compile_rules("example-compile", ("holds(A,wife,B) :- holds(B,husband,A).",
        ...                                           "holds(A,husband,B) :- holds(B,wife,A)."))
        >>> [r.index for r in rules], rules[1].head[1].const
        ([0, 1], 'husband')
    """

    out = []
    for index, text in enumerate(texts):
        stmts: list = []
        ast.parse_string(text, stmts.append)
        rules = [s for s in stmts if s.ast_type == ast.ASTType.Rule]
        if len(rules) != 1:
            raise Unsupported(text)
        st = rules[0]
        head = _holds(st.head.atom.symbol, relations)
        body, guards, comps = [], [], []
        for lit in st.body:
            atom = lit.atom
            if atom.ast_type == ast.ASTType.Comparison:
                if len(atom.guards) != 1:
                    raise Unsupported("chained comparison")
                g = atom.guards[0]
                op = {ast.ComparisonOperator.Equal: "=", ast.ComparisonOperator.NotEqual: "!="}.get(g.comparison)
                if op is None:
                    raise Unsupported("ordering comparison")
                comps.append((op, _term(atom.term, "name", relations), _term(g.term, "name", relations)))
                continue
            sym = atom.symbol
            if sym.name == "holds":
                body.append(_holds(sym, relations))
            else:
                guards.append((sym.name, _term(sym.arguments[0], "name", relations)))
        rule = CRule(index, head, tuple(body), tuple(guards), tuple(comps))
        rel_vars = {a[1].var for a in rule.body + (rule.head,) if a[1].var}
        body_vars = {t.var for a in rule.body for t in a if t.var}
        used = (
            rule.name_vars
            | rel_vars
            | {t.var for _, t in rule.guards if t.var}
            | {t.var for _, x, y in rule.comparisons for t in (x, y) if t.var}
        )
        checked = {t.var for _, t in rule.guards if t.var} | {
            t.var for _, x, y in rule.comparisons for t in (x, y) if t.var
        }
        if rel_vars & (rule.name_vars | checked):
            raise Unsupported("a variable used both as a name and as a relation")
        if not used <= body_vars:
            raise Unsupported("a variable bound outside the holds atoms")
        out.append(rule)
    return tuple(out)


def rules_of(ruleset: RuleSet) -> tuple[CRule, ...]:
    """:func:`compile_rules` for a :class:`dukb.solver.rules.RuleSet` (raises :class:`Unsupported`).

    Example:
        >>> from dukb.solver.rules import load_rules
        >>> compiled = rules_of(load_rules("family"))
        >>> len(compiled), compiled[0].head[1].const
        (48, 'husband')
    """
    return compile_rules(ruleset.fingerprint, tuple(r.text for r in ruleset.rules), ruleset.schema.relation_names)


# ------------------------------------------------------------------------------------------------ joins ----------
Bindings = dict  # variable -> int64 array (all of one length)


def _size(b: Bindings, default: int) -> int:
    for v in b.values():
        return len(v)
    return default


def _expand(lo: np.ndarray, cnt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row i of the left side repeated cnt[i] times, and the matching positions lo[i] .. lo[i]+cnt[i]-1."""
    left = np.repeat(np.arange(len(cnt)), cnt)
    total = int(cnt.sum())
    starts = np.cumsum(cnt) - cnt
    pos = np.repeat(lo, cnt) + (np.arange(total) - np.repeat(starts, cnt))
    return left, pos


class Evaluator:
    """Join machinery for one KB: the symbol table, the guards' sets and the current facts by relation.

    Args:
        n_names: number of names (symbols 0..n_names-1 in S/O positions).
        name_id: name -> symbol (for string constants of the rules; unknown names never match).
        guards: background predicate -> boolean array over name symbols (one per entity type of the KB's schema,
            plus its entity predicate; family: male, female, person). A predicate not given is false of every name.
        relations: the KB schema's relations, in order (relation ids ``0..len-1``).

    Example:
        >>> # Ann (symbol 0, female) and Bo (symbol 1, male)
        >>> guards = {"male": np.array([False, True]), "female": np.array([True, False]), "person": np.array([True, True])}
        >>> ev = Evaluator(2, {"Ann": 0, "Bo": 1}, guards)
        >>> wife = RELATIONS.index("wife")
        >>> code = ev.encode(np.array([1]), np.array([wife]), np.array([0]))  # "Ann is Bo's wife"
        >>> [int(x[0]) for x in ev.decode(code)] == [1, wife, 0]
        True
    """

    def __init__(
        self,
        n_names: int,
        name_id: dict[str, int],
        guards: Mapping[str, np.ndarray],
        relations: Sequence[str] = RELATIONS,
    ):
        self.n = max(n_names, 1)
        self.name_id = name_id
        self.guard = dict(guards)
        self.nrel = len(relations)
        self.rel_id = {r: i for i, r in enumerate(relations)}

    # -- codes ----------------------------------------------------------------------------------------------------
    def encode(self, s: np.ndarray, r: np.ndarray, o: np.ndarray) -> np.ndarray:
        """int64 fact codes ``(s * R + r) * n + o`` (R relations, n names)."""
        return (s.astype(np.int64) * self.nrel + r) * self.n + o

    def decode(self, code: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Inverse of :meth:`encode`: (s, r, o) int64 arrays."""
        sr, o = np.divmod(code, self.n)
        s, r = np.divmod(sr, self.nrel)
        return s, r, o

    def by_relation(self, s: np.ndarray, r: np.ndarray, o: np.ndarray, ids: np.ndarray | None = None) -> list[tuple]:
        """Facts split per relation: list indexed by relation id of (s, o) arrays, or (s, o, ids) arrays when
        ``ids`` (an atom id per fact) is given."""
        nrel = self.nrel
        order = np.argsort(r, kind="stable")
        s, r, o = s[order], r[order], o[order]
        cuts = np.searchsorted(r, np.arange(nrel + 1))
        if ids is None:
            return [(s[cuts[k] : cuts[k + 1]], o[cuts[k] : cuts[k + 1]]) for k in range(nrel)]
        ids = ids[order]
        return [(s[cuts[k] : cuts[k + 1]], o[cuts[k] : cuts[k + 1]], ids[cuts[k] : cuts[k + 1]]) for k in range(nrel)]

    def _const(self, t: Term, rel: bool) -> int:
        if rel:
            return self.rel_id[cast(str, t.const)]  # a constant term
        return self.name_id.get(cast(str, t.const), -1)

    # -- one body atom --------------------------------------------------------------------------------------------
    def atom(self, atom: tuple[Term, Term, Term], table: list[tuple], tag: str | None = None) -> Bindings:
        """Bindings of one ``holds`` atom over a per-relation fact table: a column per variable, ``#n`` (row
        numbers) and, with ``tag`` and a table holding atom ids, the column ``tag`` of the matched facts' ids."""
        ts, tr, to = atom
        if tr.var is None:
            t = table[self.rel_id[cast(str, tr.const)]]
            s, o = t[0], t[1]
            ids = t[2] if len(t) > 2 else None
            rcol = None
        else:
            s = np.concatenate([t[0] for t in table])
            o = np.concatenate([t[1] for t in table])
            ids = np.concatenate([t[2] for t in table]) if len(table[0]) > 2 else None
            rcol = np.repeat(np.arange(self.nrel, dtype=np.int64), [len(t[0]) for t in table])
        keep = None

        def filt(mask: np.ndarray) -> None:
            nonlocal keep
            keep = mask if keep is None else keep & mask

        if ts.var is None:
            filt(s == self._const(ts, False))
        if to.var is None:
            filt(o == self._const(to, False))
        if ts.var is not None and ts.var == to.var:
            filt(s == o)
        cols = {}
        if keep is not None:
            s, o = s[keep], o[keep]
            rcol = None if rcol is None else rcol[keep]
            ids = None if ids is None else ids[keep]
        if ts.var is not None:
            cols[ts.var] = s
        if to.var is not None:
            cols[to.var] = o
        if tr.var is not None:
            cols[tr.var] = rcol
        if tag is not None and ids is not None:
            cols[tag] = ids
        cols["#n"] = np.arange(len(s))  # row count carrier (dropped after the join)
        return cols

    @staticmethod
    def join(left: Bindings, right: Bindings) -> Bindings:
        """Natural join of two binding tables on their shared variables (sort + searchsorted).

        Args:
            left, right: binding tables (a column per variable and ``#n``).

        Returns:
            The joined bindings, with ``#l`` and ``#r`` the matched rows of each side.

        Raises:
            JoinTooLarge: the join would produce more than :data:`MAX_JOIN_ROWS` rows (counted before any row is
                allocated).
        """
        shared = [v for v in left if v in right and not v.startswith(("#", "@"))]
        nl, nr = len(left["#n"]), len(right["#n"])
        if nl == 0 or nr == 0:
            li = np.zeros(0, dtype=np.int64)
            ri = li
        elif not shared:
            if nl * nr > MAX_JOIN_ROWS:
                raise JoinTooLarge(nl * nr, MAX_JOIN_ROWS)
            li = np.repeat(np.arange(nl), nr)
            ri = np.tile(np.arange(nr), nl)
        else:
            kl = left[shared[0]].astype(np.int64)
            kr = right[shared[0]].astype(np.int64)
            for v in shared[1:]:
                # compact the key pairs to ranks so the combined key cannot overflow
                inv, m = _rank(np.concatenate([kl, kr]))
                inv2, m2 = _rank(np.concatenate([left[v], right[v]]).astype(np.int64))
                if m * m2 >= 2**62:  # pragma: no cover - astronomically many symbols
                    raise Unsupported("join key overflow")
                comb = inv.astype(np.int64) * m2 + inv2
                kl, kr = comb[:nl], comb[nl:]
            order = np.argsort(kr, kind="stable")
            krs = kr[order]
            lo = np.searchsorted(krs, kl, "left")
            cnt = np.searchsorted(krs, kl, "right") - lo
            total = int(cnt.sum())
            if total > MAX_JOIN_ROWS:
                raise JoinTooLarge(total, MAX_JOIN_ROWS)
            li, pos = _expand(lo, cnt)
            ri = order[pos]
        out = {v: a[li] for v, a in left.items() if not v.startswith("#")}
        for v, a in right.items():
            if v not in out and not v.startswith("#"):
                out[v] = a[ri]
        out["#n"] = np.arange(len(li))
        out["#l"], out["#r"] = li, ri
        return out

    def _value(self, b: Bindings, t: Term, n: int) -> np.ndarray | int:
        return b[t.var] if t.var is not None else self._const(t, False)

    def filters(self, rule: CRule, b: Bindings, done: set) -> Bindings:
        """Apply every guard and comparison of ``rule`` whose variables are bound and that is not in ``done``."""
        n = len(b["#n"])
        keep = None
        for k, (pred, t) in enumerate(rule.guards):
            if ("g", k) in done or (t.var is not None and t.var not in b):
                continue
            done.add(("g", k))
            arr = self.guard.get(pred)
            if arr is None:  # a background predicate with no true atom (clingo: false)
                arr = np.zeros(self.n, dtype=bool)
            if t.var is None:
                c = self._const(t, False)
                m = np.full(n, c >= 0 and bool(arr[c]))
            else:
                m = arr[b[t.var]]
            keep = m if keep is None else keep & m
        for k, (op, x, y) in enumerate(rule.comparisons):
            if ("c", k) in done or any(t.var is not None and t.var not in b for t in (x, y)):
                continue
            done.add(("c", k))
            if x.var is None and y.var is None:
                eq = x.const == y.const
                m = np.full(n, eq if op == "=" else not eq)
            else:
                vx, vy = self._value(b, x, n), self._value(b, y, n)
                m = np.broadcast_to((vx == vy) if op == "=" else (vx != vy), (n,))
            keep = m if keep is None else keep & m
        if keep is None:
            return b
        idx = np.flatnonzero(keep)
        out = {v: a[idx] for v, a in b.items()}
        out["#n"] = np.arange(len(idx))
        return out

    def evaluate(
        self, rule: CRule, tables: list, want_body: bool = False
    ) -> tuple[np.ndarray, list[np.ndarray] | None]:
        """All bindings of ``rule`` with body atom j read from ``tables[j]`` (a per-relation fact table).

        Returns:
            (head codes, body codes per body atom or None): int64 arrays, one entry per binding.

        Raises:
            JoinTooLarge: a join of the body exceeds :data:`MAX_JOIN_ROWS` rows (its ``rule`` is ``rule.index``).
        """
        try:
            return self._evaluate(rule, tables, want_body)
        except JoinTooLarge as e:
            e.rule = rule.index
            raise

    def _evaluate(self, rule: CRule, tables: list, want_body: bool) -> tuple[np.ndarray, list[np.ndarray] | None]:
        k = len(rule.body)
        # order: start with the atom at the smallest table, then atoms sharing variables
        sizes = [
            sum(len(x[0]) for x in t)
            if rule.body[j][1].var
            else len(t[self.rel_id[cast(str, rule.body[j][1].const)]][0])
            for j, t in enumerate(tables)
        ]
        if min(sizes) == 0:
            empty = np.zeros(0, dtype=np.int64)
            return empty, ([empty] * k if want_body else None)
        first = min(range(k), key=lambda j: sizes[j])
        order = [first]
        bound = {t.var for t in rule.body[first] if t.var}
        rest = [j for j in range(k) if j != first]
        while rest:
            nxt = max(rest, key=lambda j: (len(bound & {t.var for t in rule.body[j] if t.var}), -sizes[j]))
            order.append(nxt)
            rest.remove(nxt)
            bound |= {t.var for t in rule.body[nxt] if t.var}
        done: set = set()
        tag = (lambda j: f"@{j}") if want_body else (lambda j: None)
        b = self.filters(rule, self.atom(rule.body[order[0]], tables[order[0]], tag(order[0])), done)
        for j in order[1:]:
            if len(b["#n"]) == 0:
                break
            b = self.filters(rule, self.join(b, self.atom(rule.body[j], tables[j], tag(j))), done)
        n = len(b["#n"])
        if n == 0 or any(t.var is not None and t.var not in b for a in rule.body for t in a):
            empty = np.zeros(0, dtype=np.int64)
            return empty, ([empty] * k if want_body else None)
        head = self.codes(rule.head, b, n)
        body = None
        if want_body:  # atom ids carried through the joins when the tables hold them, else fact codes
            body = [b[f"@{j}"] if f"@{j}" in b else self.codes(a, b, n) for j, a in enumerate(rule.body)]
        return head, body

    def codes(self, atom: tuple[Term, Term, Term], b: Bindings, n: int) -> np.ndarray:
        """Fact codes of an atom under bindings ``b`` (n rows)."""

        def val(t: Term, rel: bool) -> np.ndarray:
            if t.var is not None:
                return b[t.var].astype(np.int64)
            return np.full(n, self._const(t, rel), dtype=np.int64)

        s, r, o = val(atom[0], False), val(atom[1], True), val(atom[2], False)
        code = self.encode(s, r, o)
        if (s < 0).any() or (o < 0).any():  # a string constant of the rules that names nobody
            raise Unsupported("a head constant outside the KB's names")
        return code


def fixpoint(ev: Evaluator, rules: tuple[CRule, ...], kb_codes: np.ndarray) -> np.ndarray:
    """Semi-naive least fixpoint: the sorted unique codes of Omega(K, R).

    Args:
        ev: the evaluator of the KB.
        rules: compiled rules.
        kb_codes: codes of K's relationship facts.

    Returns:
        Sorted int64 array of the closure's fact codes.

    Raises:
        JoinTooLarge: a rule's body joins more than :data:`MAX_JOIN_ROWS` rows.

    Source: Wu et al. 2025, Definition 1; semi-naive evaluation (Ullman 1988, Sec. 3.9).

    Example:
        >>> guards = {"male": np.array([False, True]), "female": np.array([True, False])}
        >>> ev = Evaluator(2, {"Ann": 0, "Bo": 1}, guards)
        >>> rules = compile_rules("example-fixpoint", ("holds(A,husband,B) :- holds(B,wife,A); male(B); female(A).",))
        >>> kb = ev.encode(np.array([1]), np.array([RELATIONS.index("wife")]), np.array([0]))  # "Ann is Bo's wife"
        >>> s, r, o = ev.decode(fixpoint(ev, rules, kb))
        >>> [(int(a), RELATIONS[int(b)], int(c)) for a, b, c in zip(s, r, o)]
        [(0, 'husband', 1), (1, 'wife', 0)]
    """
    known = unique(kb_codes)
    delta = known
    old_tab = ev.by_relation(*(np.zeros(0, dtype=np.int64),) * 3)
    while len(delta):
        parallel = len(known) >= PARALLEL_MIN_FACTS  # threads pay off on large KBs only (results are the same)
        all_tab, delta_tab = thread_map(lambda codes: ev.by_relation(*ev.decode(codes)), [known, delta], parallel)
        work = [
            (rule, [old_tab if j < i else delta_tab if j == i else all_tab for j in range(len(rule.body))])
            for rule in rules
            for i in range(len(rule.body))
        ]
        heads = [h for h in thread_map(lambda w: ev.evaluate(*w)[0], work, parallel) if len(h)]
        if not heads:
            break
        new = unique(np.concatenate(heads))
        new = new[~in_sorted(new, known)]
        old_tab = all_tab
        known = np.sort(np.concatenate([known, new]))
        delta = new
    return known


def ground_instances(
    ev: Evaluator, rules: tuple[CRule, ...], codes: np.ndarray, ids: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every ground rule instance whose body lies in the closure.

    Args:
        ev: the evaluator of the KB.
        rules: compiled rules.
        codes: the closure's fact codes; ids: the atom id of each (int64 arrays of one length).

    Returns:
        (rule index int32 array, head code int64 array, body atom ids int64 array of shape (n, max body length),
        padded with -1 after the distinct body atoms in the rule's order).

    Raises:
        JoinTooLarge: a rule's body joins more than :data:`MAX_JOIN_ROWS` rows.

    Example:
        >>> guards = {"male": np.array([False, True]), "female": np.array([True, False])}
        >>> ev = Evaluator(2, {"Ann": 0, "Bo": 1}, guards)
        >>> rules = compile_rules("example-ground", ("holds(A,husband,B) :- holds(B,wife,A); male(B); female(A).",))
        >>> kb = ev.encode(np.array([1]), np.array([RELATIONS.index("wife")]), np.array([0]))
        >>> codes = fixpoint(ev, rules, kb)
        >>> ids = np.arange(len(codes))
        >>> rule, head, body = ground_instances(ev, rules, codes, ids)
        >>> rule.tolist(), head.tolist() == [codes[0]], body.tolist()  # atom 1 (the wife fact) derives atom 0
        ([0], True, [[1]])
    """
    tab = ev.by_relation(*ev.decode(codes), ids)
    width = max(len(r.body) for r in rules)
    rr, hh, bb = [], [], []
    for rule in rules:
        h, bodies = ev.evaluate(rule, [tab] * len(rule.body), want_body=True)
        body = cast(list[np.ndarray], bodies)  # want_body: a list
        if not len(h):
            continue
        m = np.full((len(h), width), -1, dtype=np.int64)
        for j, col in enumerate(body):
            m[:, j] = col
        k = len(body)
        if k > 1:  # distinct body atoms, first occurrence kept (as dict.fromkeys)
            dup = np.zeros((len(h), width), dtype=bool)
            for j in range(1, k):
                for i in range(j):
                    dup[:, j] |= m[:, j] == m[:, i]
            if dup.any():
                order = np.argsort(dup, axis=1, kind="stable")
                m = np.take_along_axis(m, order, axis=1)
                m[np.take_along_axis(dup, order, axis=1)] = -1
        rr.append(np.full(len(h), rule.index, dtype=np.int32))
        hh.append(h)
        bb.append(m)
    if not hh:
        return np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros((0, width), np.int64)
    return np.concatenate(rr), np.concatenate(hh), np.concatenate(bb)
