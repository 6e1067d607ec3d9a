"""The target's cone of the rule-instance hypergraph, and linear-time forward chaining on it.

Only atoms from which a target can be reached backwards through ground rule instances can affect whether the target
is derivable. The cone keeps those atoms and the instances deriving them, renumbered 0..n-1, so every algorithm on
large KBs works on a small graph. Derivability checks use counter-based forward chaining (Dowling & Gallier 1984):
each instance keeps a count of body atoms not yet derived; when it reaches 0 the head is derived. Time O(size of the
cone) per check; the incremental form used by random pruning (Algorithm 3) only pays for what a check adds.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from dukb.solver.closure import Closure


@dataclass
class Cone:
    """The part of the closure's hypergraph that can reach a set of target atoms.

    Attributes:
        closure: the closure it was cut from.
        targets: global atom ids of the targets.
        atoms: local id -> global atom id (local 0.. are the targets, then BFS order).
        local: global atom id -> local id.
        kb: local ids of KB atoms in the cone (the only facts that can matter).
        inst_head: local head per cone instance.
        inst_body: local distinct body atoms per cone instance.
        by_head: local atom -> cone instances deriving it.
        by_body: local atom -> cone instances it appears in as a body atom.

    Example:
        >>> from dukb.kb.io import load_kb
        >>> from dukb.solver.closure import compute_closure
        >>> closure = compute_closure(load_kb("demo"))
        >>> cone = cone_of(closure, [closure.atom_of_fact(5)])  # "Henry Hale is Ruth Hale's husband"
        >>> cone.fact_ids(cone.kb)
        (5, 6, 7, 8)
        >>> loc = {f: cone.local[closure.atom_of_fact(f)] for f in (5, 6, 7)}
        >>> cone.any_target_derivable({loc[5]}), cone.any_target_derivable({loc[5], loc[6]})
        (True, False)
    """

    closure: Closure
    targets: tuple[int, ...]
    atoms: list[int]
    local: dict[int, int]
    kb: list[int]
    inst_head: list[int]
    inst_body: list[tuple[int, ...]]
    by_head: list[list[int]]
    by_body: list[list[int]]

    @property
    def target_local(self) -> list[int]:
        """Local ids of the targets."""
        return [self.local[t] for t in self.targets]

    def is_kb(self, loc: int) -> bool:
        """True when local atom ``loc`` is a KB fact."""
        return self.atoms[loc] < self.closure.n_kb

    def fact_ids(self, locs: Iterable[int]) -> tuple[int, ...]:
        """Sorted KB fact_ids of local KB atoms."""
        return tuple(sorted(self.closure.fact_ids[self.atoms[x]] for x in locs))

    def derived_from(self, removed: set[int] | frozenset[int]) -> bytearray:
        """Forward chaining inside the cone from its KB facts minus ``removed`` (local ids).

        Returns:
            A bytearray over local atoms: 1 where the atom is in Omega(K \\ removed, R) restricted to the cone.
        """
        true = bytearray(len(self.atoms))
        count = [len(b) for b in self.inst_body]
        stack = [a for a in self.kb if a not in removed]
        for a in stack:
            true[a] = 1
        by_body, inst_head = self.by_body, self.inst_head
        while stack:
            a = stack.pop()
            for i in by_body[a]:
                count[i] -= 1
                if count[i] == 0:
                    h = inst_head[i]
                    if not true[h]:
                        true[h] = 1
                        stack.append(h)
        return true

    def any_target_derivable(self, removed: set[int] | frozenset[int]) -> bool:
        """True when some target is in Omega(K \\ removed, R) (``removed``: local ids)."""
        true = self.derived_from(removed)
        return any(true[t] for t in self.target_local)


def cone_of(closure: Closure, targets: list[int] | tuple[int, ...]) -> Cone:
    """Cut the cone of ``targets`` (global atom ids) out of the closure's instance hypergraph.

    Returns:
        The :class:`Cone`: every atom with a directed path of rule instances to some target, and the instances
        whose head is in the cone (their body atoms are then in the cone too).

    Example:
        >>> from dukb.kb.io import load_kb
        >>> from dukb.solver.closure import compute_closure
        >>> closure = compute_closure(load_kb("demo"))
        >>> cone = cone_of(closure, [closure.atom_of_fact(17)])  # a fact no rule derives
        >>> cone.targets, cone.fact_ids(cone.kb), len(cone.inst_head)
        ((17,), (17,), 2)
        >>> len(cone_of(closure, [closure.atom_of_fact(5)]).atoms)
        12
    """
    targets = tuple(dict.fromkeys(int(t) for t in targets))
    atoms: list[int] = list(targets)
    local = {a: i for i, a in enumerate(atoms)}
    ptr, body_arr = closure.head_ptr, closure.inst_body_array
    insts: list[int] = []
    inst_head: list[int] = []
    inst_body: list[tuple[int, ...]] = []
    k = 0
    while k < len(atoms):
        a = atoms[k]
        lo, hi = int(ptr[a]), int(ptr[a + 1])
        if hi > lo:
            la = local[a]
            for off, row in enumerate(body_arr[lo:hi].tolist()):
                insts.append(lo + off)
                inst_head.append(la)
                body = []
                for b in row:
                    if b < 0:
                        break
                    if b not in local:
                        local[b] = len(atoms)
                        atoms.append(b)
                    body.append(local[b])
                inst_body.append(tuple(body))
        k += 1
    by_head: list[list[int]] = [[] for _ in atoms]
    by_body: list[list[int]] = [[] for _ in atoms]
    for j, (h, inst) in enumerate(zip(inst_head, inst_body)):
        by_head[h].append(j)
        for b in inst:
            by_body[b].append(j)
    kb = [i for i, a in enumerate(atoms) if a < closure.n_kb]
    return Cone(closure, targets, atoms, local, kb, inst_head, inst_body, by_head, by_body)
