"""One method, one target, one grid: unlearn from the finetuned model, probe every KB fact after each setting, and
score the outcome with the solver's recall/accuracy (Wu et al. 2025, Sec. 4 protocol).
"""

from __future__ import annotations

import random
import time
from typing import Iterator

from dukb.neural.data import QA_KIND, QAItem, kb_qa
from dukb.neural.methods.base import UnlearnContext, get_method


#: Forget scopes (issue "deep-unlearning-aware unlearning"): what the forget set holds.
SCOPES = ("target", "minimum", "best")


def forget_fact_ids(closure, target_fact_id: int, scope: str = "target", sets=None) -> list[int]:
    """Relationship fact_ids to forget for a target under a forget scope.

    - ``target``: the target alone (the paper's setting);
    - ``minimum``: a minimum-cardinality deep unlearning set of the target (CP-SAT, :func:`dukb.solver.mdus.minimum_set`);
    - ``best``: among the target's minimal deep unlearning sets (``sets``, else exact enumeration), the one whose
      removal loses the fewest facts of the deductive closure (:func:`dukb.solver.mdus.least_damaging_set`).

    Every scope but ``target`` returns a deep unlearning set: forgetting all of it makes the target non-derivable.

    Raises:
        InputError: unknown scope.
    """
    from dukb import InputError
    from dukb.solver.mdus import least_damaging_set, minimal_sets

    atom = closure.atom_of_fact(target_fact_id)
    if scope == "target":
        return [target_fact_id]
    if scope == "minimum":
        return list(minimal_sets(closure, [atom], "minimum").sets[0])
    if scope == "best":
        cands = sets if sets is not None else minimal_sets(closure, [atom], "exact", max_sets=10_000).sets
        return list(least_damaging_set(closure, cands))
    raise InputError(f"unknown forget scope {scope!r} (choose from {', '.join(SCOPES)})")


def default_retain(items: list[QAItem], forget: list[QAItem], n: int = 64, seed: int = 0) -> list[QAItem]:
    """The default retain set of GDR/KLR: ``n`` random KB QA items about facts other than the forget facts.

    Returns:
        list of QA items (deterministic for ``seed``).
    """
    banned = {(f.fact_kind, f.fact_id) for f in forget}
    pool = [it for it in items if (it.fact_kind, it.fact_id) not in banned]
    rng = random.Random(seed)
    return rng.sample(pool, min(n, len(pool)))


def retained_from_probe(kb, df):
    """Turn a probe table (kind "qa" rows) into :class:`dukb.kb.retained.Retained` (known per fact).

    Raises:
        ValueError: the table lacks a fact of the KB.
    """
    from dukb.kb.retained import Retained

    qa = df[df["kind"] == QA_KIND]
    known = {(k, int(f)): bool(v) for k, f, v in zip(qa["fact_kind"], qa["fact_id"], qa["known"])}
    rel = {f.fact_id: known[("relationship", f.fact_id)] for f in kb.relationships}
    bio = {f.fact_id: known[("biography", f.fact_id)] for f in kb.biographies} if kb.biographies else None
    return Retained(rel, bio)


def sweep_target(lm, kb, closure, target_fact_id: int, method: str, grid=None, *, sets=None,
                 forget: list[QAItem] | None = None, retain: list[QAItem] | None = None, seed: int = 0,
                 lr: float | None = None, lora=None, probe_items: list[QAItem] | None = None,
                 batch_size: int = 256, scope: str = "target") -> Iterator[dict]:
    """Run ``method`` over its grid on one target and yield one result row per setting.

    Args:
        lm: finetuned :class:`dukb.neural.models.LoadedModel` (unchanged afterwards).
        kb, closure: the KB and its :class:`dukb.solver.closure.Closure`.
        target_fact_id: relationship fact_id to unlearn.
        method: registry name (ga, npo, ga_gdr, ga_klr, npo_gdr, npo_klr, tv, whp).
        grid: values of the method's parameter (None: its default grid).
        sets: the target's minimal deep unlearning sets and their label, ``(list_of_sets, "exact"|"random")``; when
            None, computed exactly here.
        forget: the forget QA (default: the "qa" items of the facts of the forget scope).
        scope: forget scope, see :func:`forget_fact_ids` (the retain set excludes every forget fact).
        retain: the retain QA for GDR/KLR (default: :func:`default_retain`).
        seed, lr, lora: passed to the method.
        probe_items: items probed after each setting (default: every KB fact's "qa" item).

    Yields:
        dict rows: method, param, setting, target, recall, accuracy_relationships, accuracy_biographies,
        accuracy_all, best_set, sets_used, n_sets, target_forgotten, forgotten_relationships (fact_ids),
        forgotten_biographies, seconds_unlearn, seconds_probe.
    """
    from dukb.neural.probe import probe
    from dukb.solver.metrics import recall_accuracy
    from dukb.solver.mdus import minimal_sets

    items = probe_items or kb_qa(kb)
    if sets is None:
        res = minimal_sets(closure, [closure.atom_of_fact(target_fact_id)], "exact")
        sets = (res.sets, "exact")
    forget_ids = forget_fact_ids(closure, target_fact_id, scope, sets[0])
    if forget is None:
        wanted = set(forget_ids)
        forget = [it for it in items if it.fact_kind == "relationship" and it.fact_id in wanted]
    if retain is None:
        retain = default_retain(items, forget, seed=seed)
    m = get_method(method)
    ctx = UnlearnContext(lm, forget, retain, seed=seed, lr=lr, lora=lora)
    t0 = time.perf_counter()
    for setting, pred in m.sweep(ctx, grid):
        t1 = time.perf_counter()
        df = probe(pred, items, batch_size=batch_size)
        t2 = time.perf_counter()
        ret = retained_from_probe(kb, df)
        r = recall_accuracy(kb, sets[0], ret.forgotten_relationships,
                            None if ret.biographies is None else ret.forgotten_biographies, sets[1], [target_fact_id])
        yield {"method": m.name if scope == "target" else f"{m.name}@{scope}", "base_method": m.name,
               "scope": scope, "forget_set": forget_ids, "param": m.param, "setting": setting,
               "target": target_fact_id,
               **r.to_json(),
               "forgotten_relationships": sorted(ret.forgotten_relationships),
               "forgotten_biographies": sorted(ret.forgotten_biographies),
               "seconds_unlearn": round(t1 - t0, 4), "seconds_probe": round(t2 - t1, 4)}
        t0 = time.perf_counter()
