"""Deductive closure Omega(K, R) via clingo, and the ground rule instances that form its hypergraph.

Definition 1 of Wu et al. 2025: the deductive closure Omega(K, R) is the smallest superset of K closed under R.
For positive Horn rules it is the unique answer set of ``K ∪ R``; clingo's grounder computes it. Every ground rule
instance ``head <- body`` with all body atoms in the closure is recorded: this hypergraph drives every later
algorithm (cones, forward chaining, Algorithms 1-3, exact and minimum deep unlearning sets).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from dukb import InputError
from dukb.kb.model import KB, Fact, Triple
from dukb.solver.rules import INSTANCE_PRED, RuleSet, load_rules


def asp_string(value: str) -> str:
    """Render a Python string as an ASP string literal, escaping backslash, double quote and newline.

    Any name (quotes, backslashes, unicode) then enters a program as data and can never change the program.

    Args:
        value: the string.

    Returns:
        The quoted literal, e.g. ``'"O\\'Neil \\"Jr\\""'``.
    """
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def kb_program(kb: KB) -> str:
    """ASP facts for a KB: ``holds("S",rel,"O").`` per relationship fact, plus ``person/1``, ``male/1``, ``female/1``.

    Returns:
        Program text (one fact per line).
    """
    parts: list[str] = []
    for p in kb.people.values():
        n = asp_string(p.name)
        parts.append(f"person({n}). {p.gender}({n}).")
    for f in kb.relationships:
        parts.append(f"holds({asp_string(f.subject)},{f.relation},{asp_string(f.object)}).")
    return "\n".join(parts)


@dataclass
class Closure:
    """The deductive closure of a KB and its ground rule instances.

    Atom ids: ``0 .. n_kb-1`` are the KB's relationship facts in file order (``fact_ids[i]`` is the fact_id of atom
    i); ``n_kb ..`` are derived facts in sorted order.

    Attributes:
        kb, rules: the inputs.
        atoms: atom id -> ``(subject, relation, object)``.
        index: triple -> atom id.
        n_kb: number of KB relationship facts.
        fact_ids: fact_id of each KB atom.
        inst_rule, inst_head, inst_body: per ground instance, the rule index, the head atom and its distinct body
            atoms (tuple of ids).
        by_head: atom id -> instance ids deriving it.
        seconds: wall time of the clingo computation (seconds).
    """

    kb: KB
    rules: RuleSet
    atoms: list[Triple]
    index: dict[Triple, int]
    n_kb: int
    fact_ids: list[int]
    inst_rule: list[int]
    inst_head: list[int]
    inst_body: list[tuple[int, ...]]
    by_head: list[list[int]] = field(repr=False)
    seconds: float = 0.0
    _atom_of_fact: dict[int, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._atom_of_fact = {fid: i for i, fid in enumerate(self.fact_ids)}

    def __len__(self) -> int:
        return len(self.atoms)

    @property
    def by_body(self) -> list[list[int]]:
        """Atom id -> instance ids having it as a body atom (built once, on first use)."""
        cached = self.__dict__.get("_by_body")
        if cached is None:
            cached = [[] for _ in self.atoms]
            for i, body in enumerate(self.inst_body):
                for b in body:
                    cached[b].append(i)
            self.__dict__["_by_body"] = cached
        return cached

    @property
    def n_derived(self) -> int:
        """Number of closure facts not in K."""
        return len(self.atoms) - self.n_kb

    @property
    def n_instances(self) -> int:
        """Number of ground rule instances."""
        return len(self.inst_head)

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
            return self._atom_of_fact[fact_id]
        except KeyError:
            raise InputError(f"no relationship fact has fact_id {fact_id}") from None

    def atom_of_triple(self, triple: Triple) -> int:
        """Atom id of a closure fact.

        Raises:
            InputError: the triple is not in the deductive closure.
        """
        try:
            return self.index[tuple(triple)]
        except KeyError:
            s, r, o = triple
            raise InputError(f"({s}, {r}, {o}) is not in the deductive closure of the KB: "
                             "it is not derivable, so there is nothing to unlearn") from None

    def fact_id(self, atom: int) -> int:
        """fact_id of a KB atom. Raises IndexError for derived atoms."""
        if atom >= self.n_kb:
            raise IndexError(f"atom {atom} is derived, not a KB fact")
        return self.fact_ids[atom]

    def rows(self) -> list[dict]:
        """One dict per closure fact: subject, relation, object, source (kb|derived), fact_id (None if derived)."""
        return [{"subject": s, "relation": r, "object": o, "source": self.source(i),
                 "fact_id": self.fact_ids[i] if i < self.n_kb else None}
                for i, (s, r, o) in enumerate(self.atoms)]


def compute_closure(kb: KB, rules: RuleSet | str = "family") -> Closure:
    """Compute Omega(K, R) and all ground rule instances with clingo.

    Args:
        kb: a validated KB.
        rules: a :class:`RuleSet` or a name/path for :func:`load_rules`.

    Returns:
        The :class:`Closure` (KB facts first, then derived facts).

    Raises:
        RulesError: the rule set cannot be loaded.
        InputError: clingo fails on the program (message from clingo).

    Source: Wu et al. 2025, Definition 1.
    """
    import clingo

    if not isinstance(rules, RuleSet):
        rules = load_rules(rules)
    t0 = time.perf_counter()
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
    by_head: list[list[int]] = [[] for _ in atoms]
    for i, h in enumerate(inst_head):
        by_head[h].append(i)
    return Closure(kb, rules, atoms, index, n_kb, [f.fact_id for f in kb.relationships], inst_rule, inst_head,
                   inst_body, by_head, time.perf_counter() - t0)


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


def _read_instances(ctl, index: dict[Triple, int]) -> tuple[list[int], list[int], list[tuple[int, ...]]]:
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


def resolve_target(closure: Closure, target: int | Triple | Fact | str) -> int:
    """Atom id of a target given as a fact_id, a triple, a Fact, or a string ``"S,R,O"``.

    Raises:
        InputError: unknown fact_id, malformed string, or a fact outside the deductive closure.
    """
    if isinstance(target, Fact):
        return closure.atom_of_triple(target.triple)
    if isinstance(target, int):
        return closure.atom_of_fact(target)
    if isinstance(target, str):
        parts = [p.strip() for p in target.split(",")]
        if len(parts) != 3 or not all(parts):
            raise InputError(f"target {target!r} is not of the form 'Subject,relation,Object'")
        return closure.atom_of_triple(tuple(parts))
    return closure.atom_of_triple(tuple(target))
