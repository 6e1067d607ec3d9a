"""Fact splits of the MUSE and RWKU protocols on a KB (torch-free).

MUSE (Shi et al. 2024b, Sec. 2) evaluates an unlearned model against four disjoint sets: D_forget, D_retain (the
evaluation retain set), D_retain^(reg) (the regulariser's retain set, disjoint from the evaluation one, App. D.2)
and D_holdout (in-distribution data never trained on, the non-members of the membership inference). On a KB these
are sets of facts:

- **holdout**: a seeded random share of the KB's facts (relationships and biographies) that no model is ever
  finetuned on. They are drawn from outside the *cones* of the run's targets (the facts that can take part in
  deriving a target), so the targets' minimal deep unlearning sets are the same in K and in K minus the holdout;
- **forget**: the facts a request asks to forget: by default a minimum *joint* deep unlearning set of the
  request's targets (Wu et al. 2025, Definition 2 with several targets), so that the retrain reference, finetuned
  without them, cannot re-derive any target; ``scope="target"`` takes the targets alone;
- **retain_train** (MUSE's D_retain^(reg)) and **retain_eval** (D_retain): the trained facts outside the forget set,
  split once per run with the seed. Regularisers (GDR, KLR) train on retain_train only; utility (KnowMem on retain)
  is scored on retain_eval only, so data a method trains on is never scored as retained knowledge.

The base split (holdout, retain pools) is drawn once per run and is the same for every request of the run, so one
f_target serves every forget-set size (MUSE's scalability, C5) and every sequential request (sustainability, C6).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from dukb import InputError
from dukb.kb.model import KB
from dukb.solver.closure import Closure
from dukb.solver.cone import cone_of
from dukb.solver.mdus import minimal_sets

REL, BIO = "relationships", "biographies"


def _ids(d: dict) -> set[tuple[str, int]]:
    return {(k, int(i)) for k in (REL, BIO) for i in d.get(k, ())}


def _as_dict(keys: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {REL: [], BIO: []}
    for k, i in keys:
        out[k].append(int(i))
    return {k: sorted(v) for k, v in out.items()}


@dataclass(frozen=True)
class BaseSplit:
    """The per-run part of the splits: which facts are held out and how the rest divides into retain pools.

    Attributes:
        holdout: {"relationships": [...], "biographies": [...]}: facts never finetuned on (MIA non-members).
        retain_train_pool, retain_eval_pool: the trained facts, divided once; a request's retain sets are these
            minus its forget facts.
        protected: relationship fact_ids the holdout was kept away from (the cones of the run's targets).
        seed, holdout_frac, retain_train_frac: how it was drawn.

    Example:
        >>> from dukb.kb.io import load_kb
        >>> from dukb.solver.closure import compute_closure
        >>> kb = load_kb("demo")
        >>> split = base_split(kb, compute_closure(kb), [5], seed=0)
        >>> split.holdout, split.protected
        ({'relationships': [15, 16], 'biographies': [4]}, [5, 6, 7, 8])
        >>> request = split.request([5, 6], [5])
        >>> retained = request.retain_train["relationships"] + request.retain_eval["relationships"]
        >>> request.forget["relationships"], 5 in retained, 6 in retained
        ([5, 6], False, False)
    """

    holdout: dict
    retain_train_pool: dict
    retain_eval_pool: dict
    protected: list[int] = field(default_factory=list)
    seed: int = 0
    holdout_frac: float = 0.1
    retain_train_frac: float = 0.5

    def trained(self) -> dict:
        """Every fact f_target is finetuned on: the KB minus the holdout ({"relationships", "biographies"})."""
        return _as_dict(_ids(self.retain_train_pool) | _ids(self.retain_eval_pool))

    def request(self, forget_rel: Sequence[int], targets: Sequence[int]) -> FactSplits:
        """The splits of one unlearning request.

        Args:
            forget_rel: relationship fact_ids to forget (must be trained facts).
            targets: the request's target fact_ids (recorded).

        Raises:
            InputError: a forget fact is held out.
        """
        forget = {(REL, int(i)) for i in forget_rel}
        held = forget & _ids(self.holdout)
        if held:
            raise InputError(f"forget facts {sorted(i for _, i in held)} are in the holdout split")
        return FactSplits(
            targets=[int(t) for t in targets],
            forget=_as_dict(forget),
            retain_train=_as_dict(_ids(self.retain_train_pool) - forget),
            retain_eval=_as_dict(_ids(self.retain_eval_pool) - forget),
            holdout=self.holdout,
        )

    def to_json(self) -> dict:
        """JSON-able form (recorded in a run's splits.json)."""
        return {
            "holdout": self.holdout,
            "retain_train_pool": self.retain_train_pool,
            "retain_eval_pool": self.retain_eval_pool,
            "protected": self.protected,
            "seed": self.seed,
            "holdout_frac": self.holdout_frac,
            "retain_train_frac": self.retain_train_frac,
        }


@dataclass(frozen=True)
class FactSplits:
    """The four disjoint fact sets of one request (each {"relationships": [...], "biographies": [...]}).

    Attributes:
        targets: the request's target relationship fact_ids.
        forget: D_forget; retain_train: D_retain^(reg); retain_eval: D_retain; holdout: D_holdout.

    Example:
        >>> from dukb.kb.io import load_kb
        >>> from dukb.solver.closure import compute_closure
        >>> kb = load_kb("demo")
        >>> request = base_split(kb, compute_closure(kb), [5], seed=0).request([5, 6], [5])
        >>> request.targets, request.holdout["relationships"]
        ([5], [15, 16])
        >>> sorted(request.trained_without_forget()["relationships"])
        [0, 1, 2, 3, 4, 7, 8, 9, 10, 11, 12, 13, 14, 17]
    """

    targets: list[int]
    forget: dict
    retain_train: dict
    retain_eval: dict
    holdout: dict

    def trained_without_forget(self) -> dict:
        """What f_retrain is finetuned on: retain_train ∪ retain_eval (the KB minus holdout and forget)."""
        return _as_dict(_ids(self.retain_train) | _ids(self.retain_eval))

    def to_json(self) -> dict:
        """JSON-able form (every result row records it)."""
        return {
            "targets": self.targets,
            "forget": self.forget,
            "retain_train": self.retain_train,
            "retain_eval": self.retain_eval,
            "holdout": self.holdout,
        }


def cone_facts(closure: Closure, targets: Sequence[int]) -> set[int]:
    """Relationship fact_ids of the KB facts in the targets' cones (the facts that can take part in deriving them).

    Raises:
        InputError: a target is not a relationship fact of the KB.

    Example:
        >>> from dukb.kb.io import load_kb
        >>> from dukb.solver.closure import compute_closure
        >>> closure = compute_closure(load_kb("demo"))
        >>> sorted(cone_facts(closure, [5])), sorted(cone_facts(closure, [17]))
        ([5, 6, 7, 8], [17])
    """

    cone = cone_of(closure, [closure.atom_of_fact(int(t)) for t in targets])
    return {int(closure.fact_ids[cone.atoms[a]]) for a in cone.kb}


def base_split(
    kb: KB,
    closure: Closure,
    targets: Sequence[int],
    *,
    holdout_frac: float = 0.1,
    retain_train_frac: float = 0.5,
    seed: int = 0,
) -> BaseSplit:
    """Draw a run's holdout and retain pools.

    Args:
        kb: the :class:`dukb.kb.KB`.
        closure: its closure.
        targets: every target fact_id the run will use (their cones stay out of the holdout).
        holdout_frac: share of all KB facts (relationships + biographies) held out, in [0, 1); drawn from facts
            outside the targets' cones, as many as there are (fewer when the cones cover the KB).
        retain_train_frac: share of the remaining (trained) facts that go to retain_train, in [0, 1].
        seed: the run seed (same seed, same split).

    Returns:
        :class:`BaseSplit`.

    Raises:
        InputError: a fraction outside its range, or a target that is not a relationship fact.

    Source: Shi et al. 2024b (MUSE), Sec. 2 and App. D.2 (forget / retain / retain_reg / holdout).

    Example:
        >>> from dukb.kb.io import load_kb
        >>> from dukb.solver.closure import compute_closure
        >>> kb = load_kb("demo")
        >>> closure = compute_closure(kb)
        >>> split = base_split(kb, closure, [5], holdout_frac=0.1, seed=0)
        >>> held = split.holdout["relationships"]
        >>> held, set(held).isdisjoint(cone_facts(closure, [5]))
        ([15, 16], True)
        >>> base_split(kb, closure, [5], seed=0) == split  # same seed, same split
        True
        >>> base_split(kb, closure, [5], holdout_frac=1.0)
        Traceback (most recent call last):
            ...
        dukb.InputError: ...
    """
    if not 0 <= holdout_frac < 1:
        raise InputError(f"the holdout share must be in [0, 1), got {holdout_frac}")
    if not 0 <= retain_train_frac <= 1:
        raise InputError(f"the retain-train share must be in [0, 1], got {retain_train_frac}")
    protected = cone_facts(closure, targets) if targets else set()
    every = [(REL, f.fact_id) for f in kb.relationships] + [(BIO, b.fact_id) for b in kb.biographies]
    rng = random.Random(f"dukb-splits-{seed}")
    candidates = [k for k in every if not (k[0] == REL and k[1] in protected)]
    n_hold = min(len(candidates), round(holdout_frac * len(every)))
    holdout = set(rng.sample(candidates, n_hold))
    rest = [k for k in every if k not in holdout]
    rng.shuffle(rest)
    n_train = round(retain_train_frac * len(rest))
    return BaseSplit(
        holdout=_as_dict(holdout),
        retain_train_pool=_as_dict(rest[:n_train]),
        retain_eval_pool=_as_dict(rest[n_train:]),
        protected=sorted(protected),
        seed=seed,
        holdout_frac=holdout_frac,
        retain_train_frac=retain_train_frac,
    )


def forget_set(closure: Closure, targets: Sequence[int], scope: str = "joint") -> list[int]:
    """The relationship facts a request forgets.

    Args:
        closure: the closure.
        targets: the request's target fact_ids.
        scope: "joint" (a minimum-cardinality joint deep unlearning set of all targets, CP-SAT: after forgetting
            it no target is derivable) or "target" (the targets alone).

    Returns:
        sorted relationship fact_ids.

    Raises:
        InputError: unknown scope, no targets, or a target that is not a relationship fact.

    Source: Wu et al. 2025, Definition 2 (deep unlearning set), applied jointly to several targets.

    Example:
        >>> from dukb.kb.io import load_kb
        >>> from dukb.solver.closure import compute_closure
        >>> closure = compute_closure(load_kb("demo"))
        >>> forget_set(closure, [0, 5]), forget_set(closure, [0, 5], scope="target")
        ([0, 3, 5, 6], [0, 5])
    """

    if not targets:
        raise InputError("a request needs at least one target")
    if scope == "target":
        for t in targets:
            closure.atom_of_fact(int(t))
        return sorted({int(t) for t in targets})
    if scope != "joint":
        raise InputError(f"unknown forget scope {scope!r} (choose joint or target)")
    res = minimal_sets(closure, [closure.atom_of_fact(int(t)) for t in targets], "minimum")
    return sorted(int(i) for i in res.sets[0])


__all__ = ["BaseSplit", "FactSplits", "base_split", "cone_facts", "forget_set"]
