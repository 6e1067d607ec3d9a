"""Minimal deep unlearning sets (MDUS) of one or more targets: exact, minimum and randomized.

Definitions (Wu et al. 2025, Sec. 3): U ⊆ K deeply unlearns target k if k ∉ Omega(K \\ U, R) (Definition 2); U is a
*minimal* deep unlearning set if additionally no proper subset of U is one (Definition 3). With several targets,
all of them must become non-derivable.

- ``exact``: every subset-minimal set, enumerated by clingo on the target's cone with domain heuristics
  (``--heuristic=Domain --enum-mode=domRec`` and a false sign on the deletion atoms ``del/1``): each answer set is
  minimal in its ``del`` atoms, and clingo enumerates all of them.
- ``minimum``: one minimum-cardinality set, a CP-SAT model (OR-tools) of the exact characterisation: U is a deep
  unlearning set iff there is a set F of closure atoms with k ∈ F, U ⊇ F ∩ K, and every rule instance whose head is
  in F has a body atom in F (Wu et al. 2025, Definitions 1-2: k stays underivable from K \\ U).
- ``random``: the paper's Algorithm 1 (MDUS = Algorithm 2 DUS + Algorithm 3 random pruning) over N seeds,
  deterministic per seed; all derivability checks by forward chaining on the cone.

Every returned set is checked to be a deep unlearning set before it is returned.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

import clingo

from dukb import InputError
from dukb.solver.closure import Closure
from dukb.solver.cone import Cone, cone_of

METHODS = ("exact", "minimum", "random")
#: Most runs of Algorithm 1 :func:`random_sets` makes (``--seeds``): 10,000, a hundred times the paper's N_seed of
#: 100; each run is a forward-chaining pass over the target's cone (about 0.7 ms on the demo KB), so a larger count
#: would run for hours instead of being refused.
MAX_SEEDS = 10_000
#: Range of ``--seed`` of the minimal sets: CP-SAT's random seed (:func:`minimum_set`) is a signed 32-bit integer.
MIN_SEED, MAX_SEED = -(2**31), 2**31 - 1
#: file name of the exact sets' deletion program in dukb.data/rules
DELETION_PROGRAM = "deep_unlearning_sets.lp"


@dataclass
class MDUSResult:
    """Minimal deep unlearning sets of a group of targets.

    Attributes:
        targets: global atom ids of the targets (all must become non-derivable).
        method: "exact", "minimum" or "random" ("paper" for the paper's cached sets the CLI wraps).
        sets: the sets as sorted tuples of relationship fact_ids, sorted by (size, ids) (the paper's sets: in the
            reference's order); distinct.
        complete: exact: enumeration finished within its limits; minimum: optimality proven; random: always False
            (Algorithm 1 samples, it does not enumerate).
        seconds: wall time (seconds).
        n_seeds: random only: number of seeds run.
        cone_atoms, cone_instances: size of the cone the method worked on.

    Example:
        >>> from dukb.kb.io import load_kb
        >>> from dukb.solver.closure import compute_closure
        >>> result = exact_sets(compute_closure(load_kb("demo")), [0])
        >>> result.targets, result.method, result.sets, result.complete
        ((0,), 'exact', [(0, 3), (0, 1, 2), (0, 2, 4)], True)
    """

    targets: tuple[int, ...]
    method: str
    sets: list[tuple[int, ...]]
    complete: bool
    seconds: float
    n_seeds: int | None = None
    cone_atoms: int = 0
    cone_instances: int = 0
    extra: dict = field(default_factory=dict)


def is_deep_unlearning_set(
    closure: Closure, targets: Iterable[int], removed_fact_ids: Iterable[int], cone: Cone | None = None
) -> bool:
    """True when no target is in Omega(K \\ U, R) for U = ``removed_fact_ids``.

    Args:
        closure: the closure of K.
        targets: global atom ids.
        removed_fact_ids: relationship fact_ids of U.
        cone: the cone of ``targets`` (:func:`dukb.solver.cone.cone_of`), when the caller checks many sets of the
            same targets: cut once and reused (default: cut here).

    Source: Wu et al. 2025, Definition 2.

    Example:
        >>> from dukb.kb.io import load_kb
        >>> from dukb.solver.closure import compute_closure
        >>> closure = compute_closure(load_kb("demo"))
        >>> is_deep_unlearning_set(closure, [0], [0, 3]), is_deep_unlearning_set(closure, [0], [0])
        (True, False)
    """
    cone = cone if cone is not None else cone_of(closure, list(targets))
    removed = {cone.local[closure.atom_of_fact(f)] for f in removed_fact_ids if closure.atom_of_fact(f) in cone.local}
    return not cone.any_target_derivable(removed)


def is_minimal(
    closure: Closure, targets: Collection[int], removed_fact_ids: Iterable[int], cone: Cone | None = None
) -> bool:
    """True when U is a deep unlearning set and no U minus one element is (Definition 3).

    Checking single-element removals suffices: derivability is monotone in the retained facts, so if some proper
    subset deeply unlearns the targets, so does every superset of it inside U, including some U minus one fact.
    The cone of the targets is cut once (or taken from ``cone``, see :func:`is_deep_unlearning_set`) for all
    |U| + 1 checks.

    Example:
        >>> from dukb.kb.io import load_kb
        >>> from dukb.solver.closure import compute_closure
        >>> closure = compute_closure(load_kb("demo"))
        >>> is_minimal(closure, [0], [0, 3]), is_minimal(closure, [0], [0, 3, 5]), is_minimal(closure, [0], [0])
        (True, False, False)
    """
    u = list(removed_fact_ids)
    cone = cone if cone is not None else cone_of(closure, list(targets))
    if not is_deep_unlearning_set(closure, targets, u, cone):
        return False
    return all(not is_deep_unlearning_set(closure, targets, u[:i] + u[i + 1 :], cone) for i in range(len(u)))


def _check_sets(cone: Cone, sets_local: list[frozenset[int]], method: str) -> None:
    for s in sets_local:
        if cone.any_target_derivable(s):  # pragma: no cover - a solver bug, never bad input
            raise AssertionError(f"{method}: returned set {cone.fact_ids(s)} is not a deep unlearning set")


def _finish(
    cone: Cone, sets_local: list[frozenset[int]], method: str, complete: bool, t0: float, **kw: Any
) -> MDUSResult:
    _check_sets(cone, sets_local, method)
    sets = sorted({cone.fact_ids(s) for s in sets_local}, key=lambda s: (len(s), s))
    return MDUSResult(
        cone.targets,
        method,
        sets,
        complete,
        time.perf_counter() - t0,
        cone_atoms=len(cone.atoms),
        cone_instances=len(cone.inst_head),
        **kw,
    )


def check_limits(max_sets: int | None = None, seconds: float | None = None) -> None:
    """Refuse limits no search can honour: fewer than one set, or a time limit that is not a positive finite number
    of seconds (0, negative, NaN or infinite; CP-SAT reports a negative or NaN limit as an invalid model).

    Args:
        max_sets: the most sets to enumerate, or None (no limit).
        seconds: the time limit in seconds, or None (no limit).

    Returns:
        None.

    Raises:
        InputError: naming the limit and its value.

    Example:
        >>> check_limits(10, 5.0)  # fine: returns None
        >>> check_limits(seconds=float("nan"))
        Traceback (most recent call last):
            ...
        dukb.InputError: ...
        >>> check_limits(max_sets=0)
        Traceback (most recent call last):
            ...
        dukb.InputError: ...
    """
    if max_sets is not None and (isinstance(max_sets, bool) or not isinstance(max_sets, int) or max_sets < 1):
        raise InputError(f"--max-sets must be a whole number of at least 1, got {max_sets!r}")
    if seconds is not None:
        try:
            ok = not isinstance(seconds, bool) and math.isfinite(seconds) and seconds > 0
        except TypeError:
            ok = False
        if not ok:
            raise InputError(f"--seconds must be a positive finite number of seconds, got {seconds!r}")


# --------------------------------------------------------------------------------------------------- exact ------
@lru_cache(maxsize=1)
def deletion_program() -> str:
    """The ASP program of the exact minimal deep unlearning sets, read from the package data
    (``dukb/data/rules/deep_unlearning_sets.lp``) like the rule sets.

    Source: Wu et al. 2025, Definitions 2-3.

    Example:
        >>> program = deletion_program()
        >>> "del(A)" in program and "#heuristic" in program
        True
    """

    return resources.files("dukb.data").joinpath("rules", DELETION_PROGRAM).read_text(encoding="utf-8")


def exact_sets(
    closure: Closure, targets: Iterable[int], max_sets: int | None = None, seconds: float | None = None
) -> MDUSResult:
    """Enumerate every subset-minimal deep unlearning set of ``targets`` with clingo.

    The program (``dukb/data/rules/deep_unlearning_sets.lp``, :func:`deletion_program`) on the cone (atoms and
    instances as integers, so no name ever enters it)::

        {del(A)} :- kb(A).              h(A) :- kb(A), not del(A).
        h(H) :- inst(I,H), h(B) : body(I,B).          :- target(T), h(T).
        #heuristic del(A) : kb(A). [1,false]

    With ``--heuristic=Domain --enum-mode=domRec`` clingo enumerates exactly the answer sets whose ``del`` atoms are
    subset-minimal, i.e. the minimal deep unlearning sets.

    Args:
        closure: the closure.
        targets: global atom ids.
        max_sets: stop after this many sets (None: all).
        seconds: stop after this wall time in seconds (None: no limit).

    Returns:
        :class:`MDUSResult` with ``complete`` True when the enumeration was exhausted.

    Raises:
        InputError: ``max_sets`` below 1, or ``seconds`` not a positive finite number.

    Source: Wu et al. 2025, Definition 3; clingo domain heuristics (Gebser et al. 2013, "Domain-specific heuristics
    in answer set programming").

    Example:
        >>> from dukb.kb.io import load_kb
        >>> from dukb.solver.closure import compute_closure
        >>> closure = compute_closure(load_kb("demo"))
        >>> exact_sets(closure, [5]).sets  # Ruth's husband Henry: also derivable from their son Leo's parents
        [(5, 6), (5, 7)]
        >>> r = exact_sets(closure, [0], max_sets=1)
        >>> len(r.sets), r.complete
        (1, False)
    """

    check_limits(max_sets=max_sets, seconds=seconds)
    t0 = time.perf_counter()
    cone = cone_of(closure, list(targets))
    lines = [f"kb({a})." for a in cone.kb]
    for j, (h, body) in enumerate(zip(cone.inst_head, cone.inst_body)):
        lines.append(f"inst({j},{h}). " + " ".join(f"body({j},{b})." for b in body))
    lines += [f"target({t})." for t in cone.target_local]
    lines.append(deletion_program())
    # logger: clingo says "domRec ignored: No domain atoms found." for a target no rule derives (one set: itself)
    ctl = clingo.Control(
        ["--heuristic=Domain", "--enum-mode=domRec", "--warn=none", "0"], logger=lambda _code, _msg: None
    )
    ctl.add("base", [], "\n".join(lines))
    ctl.ground([("base", [])])
    sets: list[frozenset[int]] = []
    complete = True
    deadline = None if seconds is None else t0 + seconds
    with ctl.solve(yield_=True, async_=True) as handle:
        while True:
            handle.resume()
            if deadline is not None:
                if not handle.wait(max(0.0, deadline - time.perf_counter())):
                    handle.cancel()
                    complete = False
                    break
            model = handle.model()
            if model is None:
                complete = not handle.get().interrupted
                break
            sets.append(frozenset(s.arguments[0].number for s in model.symbols(shown=True)))
            if max_sets is not None and len(sets) >= max_sets:
                complete = False
                handle.cancel()
                break
    return _finish(cone, sets, "exact", complete, t0)


# ------------------------------------------------------------------------------------------------- minimum ------
def minimum_set(closure: Closure, targets: Iterable[int], seconds: float | None = None, seed: int = 0) -> MDUSResult:
    """One minimum-cardinality deep unlearning set, by CP-SAT over the cone's ground rule instances.

    Model: a Boolean f_a per cone atom ("a is not derivable after unlearning"); f_t = 1 for each target; for every
    instance ``h <- b_1..b_n``: f_h ⇒ f_b1 ∨ ... ∨ f_bn; minimise Σ_{a ∈ K} f_a. U = {a ∈ K : f_a}.

    Args:
        closure, targets: as for :func:`exact_sets`.
        seconds: CP-SAT time limit (None: none). ``complete`` is False if optimality was not proven.
        seed: CP-SAT random seed, :data:`MIN_SEED` to :data:`MAX_SEED` (single worker, so the result is
            deterministic).

    Returns:
        :class:`MDUSResult` with one set.

    Raises:
        InputError: ``seconds`` is not a positive finite number, ``seed`` is not a 32-bit integer, or the time
            limit was reached before CP-SAT found any deep unlearning set (a larger limit is needed).

    Source: Wu et al. 2025, Definitions 1-3 (a minimum-cardinality minimal deep unlearning set); OR-tools CP-SAT.

    Example:
        >>> from dukb.kb.io import load_kb
        >>> from dukb.solver.closure import compute_closure
        >>> closure = compute_closure(load_kb("demo"))
        >>> r = minimum_set(closure, [0])
        >>> r.sets, r.complete
        ([(0, 3)], True)
    """
    check_limits(seconds=seconds)
    if not MIN_SEED <= seed <= MAX_SEED:
        raise InputError(
            f"--seed must be in [{MIN_SEED:,}, {MAX_SEED:,}] (CP-SAT's seed is a 32-bit integer), got {seed}"
        )
    from ortools.sat.python import cp_model

    t0 = time.perf_counter()
    cone = cone_of(closure, list(targets))
    m = cp_model.CpModel()
    f = [m.new_bool_var(f"f{i}") for i in range(len(cone.atoms))]  # CP-SAT's PEP 8 names (ortools >= 9.8)
    for t in cone.target_local:
        m.add(f[t] == 1)
    for h, body in zip(cone.inst_head, cone.inst_body):
        m.add_bool_or([f[h].Not()] + [f[b] for b in body])
    m.minimize(sum(f[a] for a in cone.kb))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = seed
    if seconds is not None:
        solver.parameters.max_time_in_seconds = float(seconds)
    status = solver.Solve(m)
    if status == cp_model.UNKNOWN:  # the time limit came before the first solution
        limit = f" ({float(seconds):g} seconds)" if seconds is not None else ""
        raise InputError(
            f"the time limit{limit} was reached before CP-SAT found a deep unlearning set; give a larger --seconds"
        )
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):  # pragma: no cover - removing all of K always works
        raise AssertionError(f"CP-SAT found no deep unlearning set (status {solver.StatusName(status)})")
    chosen = frozenset(a for a in cone.kb if solver.Value(f[a]))
    return _finish(cone, [chosen], "minimum", status == cp_model.OPTIMAL, t0)


# -------------------------------------------------------------------------------------------------- random ------
def dus(cone: Cone, rng: random.Random) -> set[int]:
    """Algorithm 2 (DUS) of Wu et al. 2025: a random deep unlearning set, as local cone ids of KB atoms.

    Û = T = {targets}; while T: pop a uniformly random k_cur from T; for every instance deriving k_cur none of whose
    body atoms is in Û, in random order, add one uniformly random body atom to Û and T. Output Û ∩ K.

    Example:
        >>> from dukb.kb.io import load_kb
        >>> from dukb.solver.closure import compute_closure
        >>> closure = compute_closure(load_kb("demo"))
        >>> cone = cone_of(closure, [0])
        >>> removed = dus(cone, random.Random(0))
        >>> is_deep_unlearning_set(closure, [0], cone.fact_ids(removed))
        True
    """
    targets = cone.target_local
    in_u = bytearray(len(cone.atoms))
    for t in targets:
        in_u[t] = 1
    pending = list(targets)
    inst_body = cone.inst_body
    while pending:
        j = rng.randrange(len(pending))
        pending[j], pending[-1] = pending[-1], pending[j]
        cur = pending.pop()
        insts = list(cone.by_head[cur])
        rng.shuffle(insts)
        for i in insts:
            body = inst_body[i]
            if any(in_u[b] for b in body):
                continue
            b = body[rng.randrange(len(body))]
            in_u[b] = 1
            pending.append(b)
    return {a for a in cone.kb if in_u[a]}


def random_prune(cone: Cone, removed: set[int], rng: random.Random) -> frozenset[int]:
    """Algorithm 3 (RP) of Wu et al. 2025: prune a deep unlearning set to a minimal one (local ids).

    Repeat passes over U in random order until a pass drops nothing: drop k_cur if the targets stay non-derivable
    from K \\ (U \\ {k_cur}). Each check is incremental forward chaining: the closure of K \\ U is computed once,
    and putting k_cur back only propagates what k_cur adds (undone when a target becomes derivable).

    Example:
        >>> from dukb.kb.io import load_kb
        >>> from dukb.solver.closure import compute_closure
        >>> closure = compute_closure(load_kb("demo"))
        >>> cone = cone_of(closure, [0])
        >>> everything = set(cone.kb)  # removing every KB fact of the cone is a deep unlearning set
        >>> pruned = cone.fact_ids(random_prune(cone, everything, random.Random(0)))
        >>> pruned in exact_sets(closure, [0]).sets, is_minimal(closure, [0], pruned)
        (True, True)
    """
    u = set(removed)
    true = cone.derived_from(u)
    count = [len(b) for b in cone.inst_body]
    for i, body in enumerate(cone.inst_body):
        count[i] -= sum(true[b] for b in body)
    targets = cone.target_local
    if any(true[t] for t in targets):
        raise AssertionError("random_prune needs a deep unlearning set")  # pragma: no cover
    by_body, inst_head = cone.by_body, cone.inst_head
    changed = True
    while changed:
        changed = False
        order = sorted(u)
        rng.shuffle(order)
        for x in order:
            if x in targets:  # putting a target back makes it hold
                continue
            if true[x]:  # already derivable from the rest: dropping it from U changes nothing
                u.discard(x)
                changed = True
                continue
            # try: K \ (U \ {x}) -- add x back and propagate, remembering what to undo
            touched_atoms = [x]
            touched_insts: list[int] = []
            true[x] = 1
            stack = [x]
            bad = False
            while stack and not bad:
                a = stack.pop()
                for i in by_body[a]:
                    count[i] -= 1
                    touched_insts.append(i)
                    if count[i] == 0:
                        h = inst_head[i]
                        if not true[h]:
                            true[h] = 1
                            touched_atoms.append(h)
                            stack.append(h)
                            if h in targets:
                                bad = True
                                break
            if bad:
                for i in touched_insts:
                    count[i] += 1
                for a in touched_atoms:
                    true[a] = 0
            else:
                u.discard(x)
                changed = True
    return frozenset(u)


def random_sets(closure: Closure, targets: Iterable[int], n_seeds: int = 100, seed: int = 0) -> MDUSResult:
    """Algorithm 1 (MDUS) of Wu et al. 2025: distinct minimal sets from ``n_seeds`` runs of DUS + RP.

    Args:
        closure, targets: as for :func:`exact_sets`.
        n_seeds: number of runs N_seed (the paper's code uses 100), 1 to :data:`MAX_SEEDS`.
        seed: base seed; run s uses ``random.Random(seed * 1_000_003 + s)``, so the result is deterministic.

    Returns:
        :class:`MDUSResult` (``complete`` False: a sample of the minimal sets).

    Raises:
        InputError: n_seeds < 1 or above :data:`MAX_SEEDS`.

    Example:
        >>> from dukb.kb.io import load_kb
        >>> from dukb.solver.closure import compute_closure
        >>> closure = compute_closure(load_kb("demo"))
        >>> r = random_sets(closure, [0], n_seeds=20)
        >>> set(r.sets) <= set(exact_sets(closure, [0]).sets), r.complete, r.n_seeds
        (True, False, 20)
    """
    if not 1 <= n_seeds <= MAX_SEEDS:
        raise InputError(f"--seeds must be in [1, {MAX_SEEDS:,}], got {n_seeds}")
    t0 = time.perf_counter()
    cone = cone_of(closure, list(targets))
    sets = []
    for s in range(n_seeds):
        rng = random.Random(seed * 1_000_003 + s)
        sets.append(random_prune(cone, dus(cone, rng), rng))
    return _finish(cone, sets, "random", False, t0, n_seeds=n_seeds)


def minimal_sets(
    closure: Closure,
    targets: int | Iterable[int],
    method: str = "exact",
    *,
    max_sets: int | None = None,
    seconds: float | None = None,
    n_seeds: int = 100,
    seed: int = 0,
) -> MDUSResult:
    """Dispatch to :func:`exact_sets`, :func:`minimum_set` or :func:`random_sets`.

    Args:
        closure: the closure.
        targets: a global atom id or a list of them (all must become non-derivable).
        method: "exact" | "minimum" | "random".
        max_sets, seconds: limits for exact (seconds also for minimum).
        n_seeds, seed: for random.

    Raises:
        InputError: unknown method, or no targets; ``max_sets`` below 1 or ``seconds`` not a positive finite number
            (:func:`check_limits`); method "minimum" reaching its time limit before any set is found.

    Example:
        >>> from dukb.kb.io import load_kb
        >>> from dukb.solver.closure import compute_closure
        >>> closure = compute_closure(load_kb("demo"))
        >>> minimal_sets(closure, 5).sets, minimal_sets(closure, [0], "minimum").sets
        ([(5, 6), (5, 7)], [(0, 3)])
        >>> minimal_sets(closure, [0], "greedy")
        Traceback (most recent call last):
            ...
        dukb.InputError: ...
    """
    check_limits(max_sets=max_sets, seconds=seconds)
    targets = [targets] if isinstance(targets, int) else list(targets)
    if not targets:
        raise InputError("no targets given")
    if method == "exact":
        return exact_sets(closure, targets, max_sets=max_sets, seconds=seconds)
    if method == "minimum":
        return minimum_set(closure, targets, seconds=seconds, seed=seed)
    if method == "random":
        return random_sets(closure, targets, n_seeds=n_seeds, seed=seed)
    raise InputError(f"unknown method {method!r} (choose from {', '.join(METHODS)})")


# ------------------------------------------------------------------------------------ forget-set selection ------
def closure_loss(closure: Closure, removed_fact_ids: Iterable[int]) -> int:
    """How many facts of Omega(K, R) are lost when U is removed: |Omega(K, R)| − |Omega(K \\ U, R)|.

    Only the atoms forward-reachable from U can be lost; forward chaining re-derives them (linear in the size of
    that forward cone, not of the whole closure).

    Args:
        closure: the closure of K.
        removed_fact_ids: relationship fact_ids of U.

    Returns:
        The number of closure facts (KB and derived, U's own facts included) no longer derivable.

    Raises:
        InputError: a fact_id that is not a relationship fact of the KB.

    Source: Wu et al. 2025, Def. 1 (deductive closure); counter-based forward chaining of Dowling & Gallier 1984.

    Example:
        >>> from dukb.kb.io import load_kb
        >>> from dukb.solver.closure import compute_closure
        >>> closure = compute_closure(load_kb("demo"))
        >>> closure_loss(closure, [0, 3]), closure_loss(closure, [0, 2, 4]), closure_loss(closure, [])
        (6, 12, 0)
    """
    removed = {closure.atom_of_fact(f) for f in removed_fact_ids}
    if not removed:
        return 0
    ptr, idx = closure.body_csr()
    head, body = closure.inst_head, closure.inst_body_array
    # F: the atoms forward-reachable from U. Any atom outside F keeps its derivation (it uses no atom of F), so
    # only F needs re-deriving: from its KB atoms outside U, with body atoms outside F counting as true.
    reach = set(removed)
    stack = list(removed)
    insts: set[int] = set()
    while stack:
        a = stack.pop()
        lo, hi = int(ptr[a]), int(ptr[a + 1])
        if hi == lo:
            continue
        found = idx[lo:hi].tolist()
        insts.update(found)
        for h in head[found].tolist():
            if h not in reach:
                reach.add(h)
                stack.append(h)
    hp = closure.head_ptr
    for a in reach:  # every instance deriving an atom of F, also one whose body lies wholly outside F
        insts.update(range(int(hp[a]), int(hp[a + 1])))
    inst_list = sorted(i for i in insts if int(head[i]) in reach)
    rows = body[inst_list].tolist() if inst_list else []
    heads = head[inst_list].tolist() if inst_list else []
    count: dict[int, int] = {}
    users: dict[int, list[tuple[int, int]]] = {}
    for i, h, row in zip(inst_list, heads, rows):
        inside = [b for b in row if b >= 0 and b in reach]
        count[i] = len(inside)
        for b in inside:
            users.setdefault(b, []).append((i, h))
    true = {a for a in reach if a < closure.n_kb and a not in removed}
    stack = list(true)
    for i, h, _ in zip(inst_list, heads, rows):  # instances whose body lies outside F fire at once
        if count[i] == 0 and h not in true:
            true.add(h)
            stack.append(h)
    while stack:  # counter-based forward chaining inside F (Dowling & Gallier 1984)
        a = stack.pop()
        for i, h in users.get(a, ()):
            count[i] -= 1
            if count[i] == 0 and h not in true:
                true.add(h)
                stack.append(h)
    return len(reach) - len(true)


def least_damaging_set(closure: Closure, sets: Iterable[Iterable[int]]) -> tuple[int, ...]:
    """The "best" forget set: among minimal deep unlearning sets, the one whose removal loses the fewest facts of
    the deductive closure (:func:`closure_loss`), i.e. the least logical collateral damage; ties go to the smaller
    set, then the smaller sorted fact_ids.

    Args:
        closure: the closure.
        sets: candidate sets (iterables of relationship fact_ids), non-empty.

    Returns:
        The chosen set as a sorted tuple of fact_ids.

    Raises:
        InputError: no candidate set.

    Example:
        >>> from dukb.kb.io import load_kb
        >>> from dukb.solver.closure import compute_closure
        >>> closure = compute_closure(load_kb("demo"))
        >>> least_damaging_set(closure, [(0, 2, 4), (0, 1, 2), (0, 3)])
        (0, 3)
    """
    cands = [tuple(sorted(s)) for s in sets]
    if not cands:
        raise InputError("no minimal deep unlearning set to choose from")
    return min(cands, key=lambda s: (closure_loss(closure, s), len(s), s))
