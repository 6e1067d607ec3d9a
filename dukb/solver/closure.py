"""Deductive closure Omega(K, R) via clingo, and the ground rule instances that form its hypergraph.

Definition 1 of Wu et al. 2025: the deductive closure Omega(K, R) is the smallest superset of K closed under R.
For positive Horn rules it is the unique answer set of ``K ∪ R``; clingo's grounder computes it. Every ground rule
instance ``head <- body`` with all body atoms in the closure is recorded: this hypergraph drives every later
algorithm (cones, forward chaining, Algorithms 1-3, exact and minimum deep unlearning sets).
"""

from __future__ import annotations

import csv
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any, cast

import clingo
import numpy as np

from dukb import InputError
from dukb.kb.model import KB, Triple
from dukb.solver import horn
from dukb.solver.csvout import write_rows_arrow
from dukb.solver.horn import Unsupported, sort_rows
from dukb.solver.rules import BUILTIN_RULES, INSTANCE_PRED, RulesError, RuleSet, kb_rules, load_rules
from dukb.solver.views import BodyIndexView, BodyView, HeadView

if TYPE_CHECKING:  # for annotations only
    from clingo import Control

    from dukb.solver.horn import JoinTooLarge

#: Computes a closure's ground rule instances on first use: (sorted fact codes, their atom ids) -> (rule index,
#: head code, body atom ids) arrays.
Grounder = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]


def asp_string(value: str) -> str:
    """Render a Python string as an ASP string literal, escaping backslash, double quote and newline.

    Any name (quotes, backslashes, unicode) then enters a program as data and can never change the program.

    Args:
        value: the string.

    Returns:
        The quoted literal, e.g. ``'"O\\'Neil \\"Jr\\""'``.

    Example:
        >>> print(asp_string('O\\'Neil "Jr"'))
        "O'Neil \\"Jr\\""
    """
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def kb_program(kb: KB) -> str:
    """ASP facts for a KB: ``holds("S",rel,"O").`` per relationship fact, plus the background facts of every entity:
    the schema's entity predicate and the entity's type (family: ``person/1`` and ``male/1`` or ``female/1``).

    Returns:
        Program text (one fact per line).

    Example:
        >>> from dukb.kb.io import load_kb
        >>> lines = kb_program(load_kb("demo")).splitlines()
        >>> lines[0], lines[-1]
        ('person("George Hale"). male("George Hale").', 'holds("Leo Hale",uncle,"Owen Stone").')
    """
    parts: list[str] = []
    pred = kb.schema.entity_predicate
    for p in kb.people.values():
        n = asp_string(p.name)
        parts.append(f"{pred}({n}). {p.gender}({n}).")
    for f in kb.relationships:
        parts.append(f"holds({asp_string(f.subject)},{f.relation},{asp_string(f.object)}).")
    return "\n".join(parts)


class _Index(Mapping):
    """``index``: triple -> atom id, looked up through the fact codes (no dict of every closure fact is built)."""

    def __init__(self, closure: Closure):
        self._c = closure

    def __getitem__(self, triple: Any) -> int:
        a = self._c._lookup(triple)
        if a is None:
            raise KeyError(triple)
        return a

    def __contains__(self, triple: object) -> bool:
        return self._c._lookup(triple) is not None

    def __len__(self) -> int:
        return len(self._c)

    def __iter__(self) -> Iterator[Triple]:
        return iter(self._c.atoms)


class Closure:
    """The deductive closure of a KB and its ground rule instances (Wu et al. 2025, Definition 1).

    Atom ids: ``0 .. n_kb-1`` are the KB's relationship facts in file order (``fact_ids[i]`` is the fact_id of atom
    i); ``n_kb ..`` are derived facts in sorted ``(subject, relation, object)`` order.

    Facts are held as int64 codes over a symbol table (names ``0..``, relations in the order of the KB schema's
    relations, :attr:`relations`); the Python views below are built on first use only. The ground rule
    instances are numpy arrays, computed on first use when the closure came from the numpy evaluator
    (:mod:`dukb.solver.horn`), so a closure that only lists its facts never grounds the rules' instances.

    Attributes:
        kb, rules: the inputs.
        n_kb: number of KB relationship facts.
        method: ``"numpy"`` (semi-naive joins, :mod:`dukb.solver.horn`) or ``"clingo"`` (full grounding).
        seconds: wall time of the closure computation (seconds; instance grounding on demand is not included).
        names: symbol table of names (symbol id -> name).
        relations: relation id -> name (``kb.schema.relation_names``; family: the 11 EDU-RELAT relations).
        atom_code: int64 array, atom id -> fact code ``(s * len(relations) + r) * len(names) + o``.
        atoms: atom id -> ``(subject, relation, object)`` (list, built on first use).
        index: triple -> atom id (a read-only mapping).
        fact_ids: fact_id of each KB atom (list).
        inst_rule, inst_head: per ground instance (sorted by head, rule, body), the rule index and head atom
            (numpy int arrays).
        inst_body: per instance, its distinct body atoms (a sequence of tuples of ints); ``inst_body_array`` is
            the padded int32 array of shape (n_instances, max body length), -1 after the last body atom.
        by_head: atom id -> instance ids deriving it; by_body: atom id -> instance ids with it in their body.

    Example:
        >>> from dukb.kb.io import load_kb
        >>> closure = compute_closure(load_kb("demo"))
        >>> closure.n_kb, closure.n_derived, closure.atoms[0]
        (18, 32, ('Martha Hale', 'husband', 'George Hale'))
        >>> a = closure.index[("George Hale", "wife", "Martha Hale")]  # derived from fact 0 by the wife rule
        >>> closure.source(a), len(closure.by_head[a])  # three ground rule instances derive it
        ('derived', 3)
        >>> [closure.atoms[b] for b in closure.inst_body[closure.by_head[a][0]]]
        [('Martha Hale', 'husband', 'George Hale')]
        >>> closure.fact_id(closure.atom_of_fact(17)), closure.n_instances
        (17, 162)
    """

    def __init__(
        self,
        kb: KB,
        rules: RuleSet,
        names: list[str],
        name_id: dict[str, int],
        atom_code: np.ndarray,
        n_kb: int,
        method: str,
        seconds: float,
        instances: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
        grounder: Grounder | None = None,
    ):
        self.kb, self.rules, self.names, self._name_id = kb, rules, names, name_id
        self.relations = kb.schema.relation_names
        self._rel_index = {r: i for i, r in enumerate(self.relations)}
        self.atom_code = atom_code
        self.n_kb = n_kb
        self.method, self.seconds = method, seconds
        self._nsym = max(len(names), 1)
        order = np.argsort(atom_code, kind="stable")
        self._sorted_codes = atom_code[order]
        self._sorted_atoms = order
        columns = kb.fact_columns()  # a KB from load_kb's fast path: its fact lists are never built here
        self._fid = (
            columns[0]
            if columns is not None
            else np.fromiter((f.fact_id for f in kb.relationships), dtype=np.int64, count=len(kb.relationships))
        )
        self._fid_is_position = bool(len(self._fid) == 0 or (self._fid == np.arange(len(self._fid))).all())
        self._grounder = grounder
        self._inst: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
        if instances is not None:
            self._set_instances(*instances)

    # -- facts ----------------------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.atom_code)

    def __repr__(self) -> str:
        return f"Closure({self.n_kb} KB + {self.n_derived} derived facts, rules={self.rules.name}, {self.method})"

    def triples_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(subject symbol, relation id, object symbol) int64 arrays per atom id."""
        sr, o = np.divmod(self.atom_code, self._nsym)
        s, r = np.divmod(sr, len(self.relations))
        return s, r, o

    @property
    def atoms(self) -> list[Triple]:
        """Atom id -> ``(subject, relation, object)`` (built once, on first use)."""
        cached = self.__dict__.get("_atoms")
        if cached is None:
            names, rel = self.names, self.relations
            s, r, o = self.triples_arrays()
            cached = [(names[a], rel[b], names[c]) for a, b, c in zip(s.tolist(), r.tolist(), o.tolist())]
            self.__dict__["_atoms"] = cached
        return cached

    def triple(self, atom: int) -> Triple:
        """``atoms[atom]``, ``(subject, relation, object)``, without building :attr:`atoms` (IndexError if none)."""
        sr, o = divmod(int(self.atom_code[atom]), self._nsym)
        rel = self.relations
        return self.names[sr // len(rel)], rel[sr % len(rel)], self.names[o]

    @property
    def index(self) -> Mapping:
        """Triple -> atom id (a read-only mapping over the fact codes)."""
        return _Index(self)

    @property
    def fact_ids(self) -> list[int]:
        """fact_id of each KB atom (list, built once)."""
        cached = self.__dict__.get("_fact_ids")
        if cached is None:
            cached = self._fid.tolist()
            self.__dict__["_fact_ids"] = cached
        return cached

    def _lookup(self, triple: Any) -> int | None:
        try:
            s, r, o = triple
            si, oi = self._name_id.get(s), self._name_id.get(o)
        except (TypeError, ValueError):
            return None
        ri = self._rel_index.get(r)
        if si is None or oi is None or ri is None:
            return None
        code = (si * len(self.relations) + ri) * self._nsym + oi
        k = int(np.searchsorted(self._sorted_codes, code))
        if k < len(self._sorted_codes) and self._sorted_codes[k] == code:
            return int(self._sorted_atoms[k])
        return None

    @property
    def n_derived(self) -> int:
        """Number of closure facts not in K."""
        return len(self) - self.n_kb

    def is_kb(self, atom: int) -> bool:
        """True for atoms that are KB facts."""
        return atom < self.n_kb

    def source(self, atom: int) -> str:
        """``"kb"`` or ``"derived"``."""
        return "kb" if atom < self.n_kb else "derived"

    def atom_of_fact(self, fact_id: int) -> int:
        """Atom id of a KB relationship fact.

        Raises:
            InputError: no relationship fact has this id.
        """
        try:
            fid = int(fact_id)
        except (TypeError, ValueError):
            raise InputError(f"no relationship fact has fact_id {fact_id}") from None
        if self._fid_is_position:
            if 0 <= fid < self.n_kb and fid == fact_id:
                return fid
            raise InputError(f"no relationship fact has fact_id {fact_id}")
        table = self.__dict__.get("_atom_of_fact")
        if table is None:
            table = {f: i for i, f in enumerate(self.fact_ids)}
            self.__dict__["_atom_of_fact"] = table
        try:
            return table[fact_id]
        except (KeyError, TypeError):
            raise InputError(f"no relationship fact has fact_id {fact_id}") from None

    def atom_of_triple(self, triple: Triple) -> int:
        """Atom id of a closure fact.

        Raises:
            InputError: the triple is not in the deductive closure.
        """
        a = self._lookup(tuple(triple))
        if a is None:
            s, r, o = triple
            raise InputError(
                f"({s}, {r}, {o}) is not in the deductive closure of the KB: "
                "it is not derivable, so there is nothing to unlearn"
            )
        return a

    def fact_id(self, atom: int) -> int:
        """fact_id of a KB atom. Raises IndexError for derived atoms."""
        if atom >= self.n_kb:
            raise IndexError(f"atom {atom} is derived, not a KB fact")
        return self.fact_ids[atom]

    def rows(self) -> list[dict]:
        """One dict per closure fact: subject, relation, object, source (kb|derived), fact_id (None if derived)."""
        fids = self.fact_ids
        return [
            {
                "subject": s,
                "relation": r,
                "object": o,
                "source": self.source(i),
                "fact_id": fids[i] if i < self.n_kb else None,
            }
            for i, (s, r, o) in enumerate(self.atoms)
        ]

    def write_csv(self, fh: IO[str]) -> None:
        """Write ``subject,relation,object,source`` rows (header first, ``\n`` line ends, minimal quoting as
        :func:`csv.writer`) to a text file object, without building a dict per fact."""

        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["subject", "relation", "object", "source"])
        names, rel = self.names, self.relations
        s, r, o = self.triples_arrays()
        if write_rows_arrow(fh, names, s, r, o, self.n_kb, rel):
            return
        step = 1 << 16
        for lo in range(0, len(s), step):
            hi = min(lo + step, len(s))
            src = ["kb" if i < self.n_kb else "derived" for i in range(lo, hi)]
            w.writerows(
                zip(
                    [names[x] for x in s[lo:hi].tolist()],
                    [rel[x] for x in r[lo:hi].tolist()],
                    [names[x] for x in o[lo:hi].tolist()],
                    src,
                )
            )

    # -- ground instances -----------------------------------------------------------------------------------------
    def _set_instances(self, rule: np.ndarray, head: np.ndarray, body: np.ndarray) -> None:
        """Store instances given as atom ids, sorting them by (head, rule, body) as the hypergraph's order."""
        order = sort_rows([head, rule] + [body[:, j] for j in range(body.shape[1])])
        rule, head, body = rule[order].astype(np.int32), head[order].astype(np.int32), body[order].astype(np.int32)
        ptr = np.zeros(len(self) + 1, dtype=np.int64)
        np.cumsum(np.bincount(head, minlength=len(self)), out=ptr[1:])
        self._inst = (rule, head, body, ptr)

    def _instances(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        if self._inst is None:
            grounder = cast(Grounder, self._grounder)  # set when the instances were not given
            rule, head_code, body = grounder(self._sorted_codes, self._sorted_atoms)
            self._set_instances(rule, self._atoms_of_codes(head_code), body)
            self._grounder = None
        return cast(tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], self._inst)

    def _atoms_of_codes(self, codes: np.ndarray) -> np.ndarray:
        k = np.searchsorted(self._sorted_codes, codes)
        if len(codes) and not (self._sorted_codes[np.minimum(k, len(self) - 1)] == codes).all():
            raise AssertionError("a ground instance mentions a fact outside the closure")  # pragma: no cover
        return self._sorted_atoms[k]

    @property
    def n_instances(self) -> int:
        """Number of ground rule instances (grounds them on first use)."""
        return len(self._instances()[1])

    @property
    def inst_rule(self) -> np.ndarray:
        """Rule index per instance (int32 array)."""
        return self._instances()[0]

    @property
    def inst_head(self) -> np.ndarray:
        """Head atom per instance (int32 array)."""
        return self._instances()[1]

    @property
    def inst_body_array(self) -> np.ndarray:
        """Distinct body atoms per instance, int32 array (n_instances, max body length), padded with -1."""
        return self._instances()[2]

    @property
    def inst_body(self) -> Sequence:
        """Instance id -> tuple of its distinct body atoms (in the rule's order)."""
        return BodyView(self._instances()[2])

    @property
    def head_ptr(self) -> np.ndarray:
        """CSR offsets: instances deriving atom a are ``head_ptr[a] .. head_ptr[a+1]-1`` (int64, len n_atoms+1)."""
        return self._instances()[3]

    @property
    def by_head(self) -> Sequence:
        """Atom id -> instance ids deriving it (a ``range`` per atom)."""
        return HeadView(self._instances()[3])

    def body_csr(self) -> tuple[np.ndarray, np.ndarray]:
        """(ptr, idx): instances having atom a in their body are ``idx[ptr[a]:ptr[a+1]]`` (ascending), built once."""
        cached = self.__dict__.get("_body_csr")
        if cached is None:
            body = self.inst_body_array
            inst = np.repeat(np.arange(len(body), dtype=np.int64), body.shape[1]).reshape(body.shape)
            ok = body >= 0
            atoms, insts = body[ok], inst[ok]
            order = np.lexsort((insts, atoms))
            ptr = np.zeros(len(self) + 1, dtype=np.int64)
            np.cumsum(np.bincount(atoms, minlength=len(self)), out=ptr[1:])
            cached = (ptr, insts[order].astype(np.int64))
            self.__dict__["_body_csr"] = cached
        return cached

    @property
    def by_body(self) -> Sequence:
        """Atom id -> instance ids having it as a body atom (ascending list per atom)."""
        return BodyIndexView(*self.body_csr())


METHODS = ("auto", "numpy", "clingo")


def type_violations(closure: Closure, limit: int = 3) -> tuple[int, list[tuple[Triple, str, int]]]:
    """Derived facts whose subject or object has another entity type than their relation declares.

    A KB's facts are checked on load (:meth:`dukb.kb.kbschema.Schema.type_violation`); a rule without the type
    guard it needs (``city(C)``) derives facts that break the schema, e.g. an object of the wrong type, which
    probes and scores would then treat as true. The family schema is not checked (its rules carry the gender
    guards of Wu et al. 2025, App. B).

    Args:
        closure: Omega(K, R) (Wu et al. 2025, Definition 1).
        limit: how many examples to return.

    Returns:
        ``(count, examples)``: the number of such derived facts, and up to ``limit`` of them as ``(triple, why,
        line)``, ``line`` the rules-file line of a rule that derives it.

    Example:
        >>> from dukb.kb.io import load_kb
        >>> type_violations(compute_closure(load_kb("demo")))
        (0, [])
    """
    schema, kb = closure.kb.schema, closure.kb
    typed = {r.name for r in schema.relations if r.subject != "any" or r.object != "any"}
    if schema.is_family or not typed:
        return 0, []
    bad = []
    for a in range(closure.n_kb, len(closure.atoms)):
        s, r, o = closure.atoms[a]
        why = schema.type_violation(r, kb.entity_type(s), kb.entity_type(o)) if r in typed else None
        if why is not None:
            bad.append((a, why))
    examples = []
    for a, why in bad[:limit]:
        rule = closure.rules.rules[int(closure.inst_rule[closure.by_head[a][0]])]
        examples.append((closure.atoms[a], why, rule.line))
    return len(bad), examples


def unmirrored(closure: Closure) -> tuple[int, list[Triple]]:
    """Facts of a relation the schema declares ``symmetric`` whose mirror the closure does not hold.

    ``symmetric: true`` is informational (the rules make a relation symmetric, as ``neighbour`` is by the rule
    ``holds(B,neighbour,A) :- holds(A,neighbour,B).``); a schema that declares it without such a rule gets a closure
    in which (S,R,O) holds and (O,R,S) does not. The family schema declares no symmetric relation.

    Returns:
        ``(count, examples)``: how many closure facts lack their mirror, and up to 3 of them.

    Example:
        >>> from dukb.kb.io import load_kb
        >>> unmirrored(compute_closure(load_kb("demo")))
        (0, [])
    """
    symmetric = {r.name for r in closure.kb.schema.relations if r.symmetric}
    if not symmetric:
        return 0, []
    index = closure.index
    bad = [(s, r, o) for s, r, o in closure.atoms if r in symmetric and (o, r, s) not in index]
    return len(bad), bad[:3]


def functional_conflicts(closure: Closure, limit: int = 3) -> tuple[int, list[tuple[str, str, str, str, list[int]]]]:
    """Subjects to which the closure gives two objects of a relation the schema declares ``functional``.

    A KB's own facts are checked on load (a second object is a FILE:LINE error); a rule can still derive a second
    object, e.g. ``holds(M,works_in,T) :- holds(M,manager_of,E), holds(E,works_in,T).`` for a manager whose reports
    work in another team. Probes and RESTOR's contradictions (Rezaei et al. 2024, Sec. 3) then treat both as true.

    Args:
        closure: Omega(K, R) (Wu et al. 2025, Definition 1).
        limit: how many examples to return.

    Returns:
        ``(count, examples)``: the number of (subject, relation) pairs with two or more objects of which at least one
        is derived, and up to ``limit`` of them as ``(subject, relation, object1, object2, lines)``, ``lines`` the
        rules-file lines of the rules that derive either object (ascending; empty for a KB fact).

    Example (the family schema declares no relation functional: nothing to report):
        >>> from dukb.kb.io import load_kb
        >>> count, examples = functional_conflicts(compute_closure(load_kb("demo")), limit=1)
        >>> count, examples
        (0, [])
    """
    functional = {r.name for r in closure.kb.schema.relations if r.functional}
    if not functional:
        return 0, []
    objects: dict[tuple[str, str], list[int]] = {}
    for a, (s, r, _) in enumerate(closure.atoms):
        if r in functional:
            objects.setdefault((s, r), []).append(a)
    bad = [atoms for atoms in objects.values() if len(atoms) > 1 and max(atoms) >= closure.n_kb]
    examples = []
    for atoms in bad[:limit]:
        a, b = atoms[0], next(x for x in atoms[1:] if x >= closure.n_kb or atoms[0] >= closure.n_kb)
        rules = closure.rules.rules
        lines = {rules[int(closure.inst_rule[i])].line for x in (a, b) if x >= closure.n_kb for i in closure.by_head[x]}
        (s, r, o1), o2 = closure.atoms[a], closure.atoms[b][2]
        examples.append((s, r, o1, o2, sorted(lines)))
    return len(bad), examples


def _symbols(kb: KB) -> tuple[list[str], dict[str, int], np.ndarray, np.ndarray]:
    """Symbol table of a KB's names (people first, in file order, then names only its facts mention) and the
    subject and object symbol of every relationship fact (int64 arrays)."""
    names = list(kb.people)
    name_id = {n: i for i, n in enumerate(names)}
    known = kb.name_index()  # recorded by load_kb while validating: no look-up per fact
    if known is not None:
        return (
            names,
            name_id,
            np.frombuffer(cast(Any, known[0]), dtype=np.int64),
            np.frombuffer(cast(Any, known[1]), dtype=np.int64),
        )  # array('q') from load_kb
    rels = kb.relationships
    get = name_id.get
    s = np.fromiter((get(f.subject, -1) for f in rels), dtype=np.int64, count=len(rels))
    o = np.fromiter((get(f.object, -1) for f in rels), dtype=np.int64, count=len(rels))
    if (s < 0).any() or (o < 0).any():  # a KB built in memory may mention people outside kb.people
        for f in rels:
            for x in (f.subject, f.object):
                if x not in name_id:
                    name_id[x] = len(names)
                    names.append(x)
        s = np.fromiter((name_id[f.subject] for f in rels), dtype=np.int64, count=len(rels))
        o = np.fromiter((name_id[f.object] for f in rels), dtype=np.int64, count=len(rels))
    return names, name_id, s, o


def _order_derived(names: list[str], codes: np.ndarray, nsym: int, relations: Sequence[str]) -> np.ndarray:
    """Codes sorted by their triples' string order (subject, relation, object), as ``sorted()`` on the triples."""
    if not len(codes):
        return codes
    rank = np.empty(len(names), dtype=np.int64)
    rank[np.array(sorted(range(len(names)), key=names.__getitem__), dtype=np.int64)] = np.arange(len(names))
    nrel = len(relations)
    rrank = np.empty(nrel, dtype=np.int64)
    rrank[np.array(sorted(range(nrel), key=relations.__getitem__))] = np.arange(nrel)
    sr, o = np.divmod(codes, nsym)
    s, r = np.divmod(sr, nrel)
    return codes[np.lexsort((rank[o], rrank[r], rank[s]))]


def _closure_numpy(kb: KB, rules: RuleSet, t0: float) -> Closure:

    crules = horn.rules_of(rules)
    names, name_id, s, o = _symbols(kb)
    for rule in crules:  # string constants of the rules join the symbol table (they may occur in head facts)
        for a in rule.body + (rule.head,):
            for t in (a[0], a[2]):
                if t.const is not None and t.const not in name_id:
                    name_id[t.const] = len(names)
                    names.append(t.const)
    n, people, schema = len(names), kb.people.values(), kb.schema
    at = np.fromiter((name_id[p.name] for p in people), dtype=np.int64, count=len(people))
    etype = np.array([p.gender for p in people], dtype=object)
    guards = {p: np.zeros(n, dtype=bool) for p in schema.background}  # one mask per entity type (family: gender)
    guards[schema.entity_predicate][at] = True
    for p in schema.entity_types:
        guards[p][at[etype == p]] = True
    relations = schema.relation_names
    ev = horn.Evaluator(n, name_id, guards, relations)
    columns = kb.fact_columns()  # a KB from load_kb's fast path: its fact lists are never built here
    rel_index = {r: i for i, r in enumerate(relations)}
    r = (
        columns[2]
        if columns is not None
        else np.fromiter(
            map(rel_index.__getitem__, (f.relation for f in kb.relationships)),
            dtype=np.int64,
            count=len(kb.relationships),
        )
    )
    kb_codes = ev.encode(s, r, o)
    try:
        codes = horn.fixpoint(ev, crules, kb_codes)
    except horn.JoinTooLarge as e:
        raise join_error(e, rules) from None
    derived = codes[~horn.in_sorted(codes, np.sort(kb_codes))]
    atom_code = np.concatenate([kb_codes, _order_derived(names, derived, ev.n, relations)])
    if len(codes) != len(derived) + len(kb_codes):
        raise AssertionError("duplicate KB facts")  # pragma: no cover - a validated KB has none

    def grounder(sorted_codes: np.ndarray, atom_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        try:
            return horn.ground_instances(ev, crules, sorted_codes, atom_ids)
        except horn.JoinTooLarge as e:
            raise join_error(e, rules) from None

    return Closure(kb, rules, names, name_id, atom_code, len(r), "numpy", time.perf_counter() - t0, grounder=grounder)


def join_error(e: JoinTooLarge, rules: RuleSet) -> InputError:
    """The :class:`InputError` for a rule whose body joins too many rows (:class:`dukb.solver.horn.JoinTooLarge`).

    Args:
        e: the JoinTooLarge raised by the numpy evaluator (``e.rule`` the rule's index, ``e.rows``, ``e.limit``).
        rules: the rule set the rule belongs to.

    Returns:
        An InputError at ``FILE:LINE`` of the rule (the rule set's file), to raise.

    Raises:
        Nothing.

    Example:
        >>> from dukb.solver.horn import JoinTooLarge
        >>> err = join_error(JoinTooLarge(10 ** 9, 10 ** 8, rule=0), load_rules("family"))
        >>> err.path.endswith("family.lp"), err.line == load_rules("family").rules[0].line
        (True, True)
    """
    rule = rules.rules[e.rule] if e.rule is not None and 0 <= e.rule < len(rules.rules) else None
    return InputError(
        f"the body of this rule joins {e.rows:,} rows, more than the limit of {e.limit:,}: its body "
        "atoms must share variables (a body atom that shares none is joined with every fact)",
        rules.path,
        None if rule is None else rule.line,
    )


def compute_closure(kb: KB, rules: RuleSet | str | None = None, method: str = "auto") -> Closure:
    """Compute Omega(K, R) and (on demand) all ground rule instances.

    Args:
        kb: a validated KB (any schema: its relations and entity types are the rules' vocabulary).
        rules: a :class:`RuleSet` (checked against the KB's schema), a name/path for :func:`load_rules` (read
            against ``kb.schema``), or None: the KB's own rules (:func:`dukb.solver.rules.kb_rules`: the rules.lp
            of a KB directory with a schema.yaml, else ``family``).
        method: ``"auto"`` (numpy semi-naive evaluation, :mod:`dukb.solver.horn`, falling back to clingo for a
            rule it does not support), ``"numpy"`` (no fallback) or ``"clingo"`` (clingo grounds every rule
            instance; the reference path). All give the same facts, order and instances.

    Returns:
        The :class:`Closure` (KB facts first, then derived facts).

    Raises:
        RulesError: the rule set cannot be loaded; a RuleSet checked against another schema than the KB's; a
            built-in (family) rule set named for a KB of another schema.
        InputError: clingo fails on the program (message from clingo); unknown method; a rule whose body joins
            more than :data:`dukb.solver.horn.MAX_JOIN_ROWS` rows (``FILE:LINE`` of the rule; also raised when
            the instances are grounded on first use).
        dukb.solver.horn.Unsupported: method "numpy" with a rule the numpy evaluator does not handle.

    Source: Wu et al. 2025, Definition 1.

    Example:
        >>> from dukb.kb.io import load_kb
        >>> kb = load_kb("demo")
        >>> closure = compute_closure(kb)
        >>> closure
        Closure(18 KB + 32 derived facts, rules=family, numpy)
        >>> compute_closure(kb, method="clingo").atoms == closure.atoms  # the reference path agrees
        True
        >>> ("Clara Stone", "brother", "Henry Hale") in closure.index  # Henry is Clara's sister's brother
        True
    """
    if method not in METHODS:
        raise InputError(f"unknown closure method {method!r} (known: {', '.join(METHODS)})")
    if rules is None:
        rules = kb_rules(kb)
    elif not isinstance(rules, RuleSet):
        if str(rules) in BUILTIN_RULES and not kb.schema.is_family:
            raise RulesError(
                f"the built-in rule set '{rules}' is for family KBs, but KB {kb.source} has schema "
                f"'{kb.schema.name}' (without --rules, a KB with a schema.yaml uses its rules.lp)"
            )
        rules = load_rules(rules, kb.schema)
    elif (rules.schema.relation_names, rules.schema.background) != (kb.schema.relation_names, kb.schema.background):
        raise RulesError(
            f"the rule set was checked against schema '{rules.schema.name}', but the KB has schema "
            f"'{kb.schema.name}': load it with the KB's schema",
            rules.path,
        )
    t0 = time.perf_counter()
    if method != "clingo":
        try:
            return _closure_numpy(kb, rules, t0)
        except Unsupported:
            if method == "numpy":
                raise
    return _closure_clingo(kb, rules, t0)


def _closure_clingo(kb: KB, rules: RuleSet, t0: float) -> Closure:
    """The reference path: clingo grounds ``K ∪ R`` with every rule instance recorded as a ``dukb_inst`` atom."""

    messages: list[str] = []
    ctl = clingo.Control(["--warn=none"], logger=lambda _c, m: messages.append(m), message_limit=3)
    try:
        ctl.add("base", [], rules.program)
        ctl.add("base", [], kb_program(kb))
        ctl.ground([("base", [])])
    except RuntimeError:
        raise InputError("clingo failed: " + (messages[0].strip() if messages else "unknown error")) from None

    holds: list[Triple] = []
    for sa in ctl.symbolic_atoms.by_signature("holds", 3):
        holds.append(_parse_triple(str(sa.symbol)))
    index: dict[Triple, int] = {}
    atoms: list[Triple] = []
    for f in kb.relationships:
        index[f.triple] = len(atoms)
        atoms.append(f.triple)
    n_kb = len(atoms)
    for t in sorted(set(holds) - index.keys()):
        index[t] = len(atoms)
        atoms.append(t)
    if len(atoms) != len(set(holds) | set(atoms[:n_kb])):
        raise AssertionError("closure bookkeeping mismatch")  # pragma: no cover
    inst_rule, inst_head, inst_body = _read_instances(ctl, index)
    names, name_id, _, _ = _symbols(kb)
    for s, _, o in atoms[n_kb:]:
        for x in (s, o):
            if x not in name_id:
                name_id[x] = len(names)
                names.append(x)
    nsym = max(len(names), 1)
    relations = kb.schema.relation_names
    rel_index = {r: i for i, r in enumerate(relations)}
    atom_code = np.array(
        [(name_id[s] * len(relations) + rel_index[r]) * nsym + name_id[o] for s, r, o in atoms], dtype=np.int64
    )
    width = max([len(b) for b in inst_body] + [max(len(r.body_holds) for r in rules.rules)])
    body = np.full((len(inst_body), width), -1, dtype=np.int64)
    for i, b in enumerate(inst_body):
        body[i, : len(b)] = b
    c = Closure(
        kb,
        rules,
        names,
        name_id,
        atom_code,
        n_kb,
        "clingo",
        time.perf_counter() - t0,
        instances=(np.array(inst_rule, dtype=np.int64), np.array(inst_head, dtype=np.int64), body),
    )
    c.__dict__["_atoms"] = atoms
    return c


# clingo prints strings with \\, \" and \n escaped; relation names are plain constants.
_TOKEN = re.compile(r'"((?:[^"\\]|\\.)*)"|([A-Za-z_][A-Za-z0-9_\']*)|(-?[0-9]+)')
_UNESCAPE = re.compile(r"\\(.)")


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    return _UNESCAPE.sub(lambda m: "\n" if m.group(1) == "n" else m.group(1), s)


def _tokens(text: str) -> list[str]:
    return [_unescape(q) if q or (not w and not n) else (w or n) for q, w, n in _TOKEN.findall(text)]


def _parse_triple(text: str) -> Triple:
    # "holds(S,R,O)" -> (S, R, O); parsing the printed symbol is several times faster than walking the
    # symbol through clingo's C API argument by argument.
    toks = _tokens(text)
    return (toks[1], toks[2], toks[3])


def _read_instances(ctl: Control, index: Mapping[Triple, int]) -> tuple[list[int], list[int], list[tuple[int, ...]]]:
    keyed = []
    for sa in ctl.symbolic_atoms.by_signature(INSTANCE_PRED, 3):
        toks = _tokens(str(sa.symbol))  # dukb_inst, rule, S, R, O, S1, R1, O1, ...
        atoms = [index[(toks[k], toks[k + 1], toks[k + 2])] for k in range(2, len(toks), 3)]
        body = tuple(atoms[1:])
        if len(set(body)) != len(body):
            body = tuple(dict.fromkeys(body))
        keyed.append((atoms[0], int(toks[1]), body))
    keyed.sort()
    return [k[1] for k in keyed], [k[0] for k in keyed], [k[2] for k in keyed]
