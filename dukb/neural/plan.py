"""Stage 1 of a protocol run, the plan: symbolic work only (no torch).

From the KB, the rules and the run's settings: the deductive closure, the targets, every target's minimal deep
unlearning sets (exact, or the paper's Algorithm 1) and the forget set of every (target, forget scope), each cached in
the run directory under a key of everything it depends on (``sets.json``, ``forget_sets.json``). Later stages (model,
sweep, probe, metrics, report; :mod:`dukb.neural.protocols.evaluate`) read the plan and never call back into it.

Source: Wu et al. 2025, Sec. 3-4 (Definitions 2-3, the 55-target protocol, Algorithm 1).
"""

from __future__ import annotations

import json
import os
import random
import sys
from dataclasses import dataclass
from pathlib import Path

from dukb import InputError
from dukb.kb import load_kb
from dukb.kb.csvfile import read_bytes
from dukb.kb.generate import default_generated_kb_dir
from dukb.kb.paper_sets import paper_sets_of
from dukb.kb.schema_probes import require_templates
from dukb.neural.known import rederivable
from dukb.neural.run.files import RUN_JSON_BYTES, write_json_atomic
from dukb.neural.run.identity import sha256_json
from dukb.solver.closure import compute_closure
from dukb.solver.cone import cone_of
from dukb.solver.mdus import is_deep_unlearning_set, is_minimal, minimal_sets
from dukb.solver.scopes import forget_fact_ids

#: Exact enumeration limits (a target whose enumeration hits them falls back to Algorithm 1 with ``seeds``).
EXACT_LIMITS = {"max_sets": 100_000, "seconds": 120}


def load_kb_closure(
    kb_spec: str | None, rules: str | None = None, *, needs: tuple[str, ...] = ("qa",), what: str = "this protocol"
):
    """The plan stage's first step for every protocol: load and validate a KB (None: the built-in generated
    default, 100 people, seed 0), check that a KB with its own schema has the templates the protocol needs
    (``needs``: :func:`dukb.kb.schema_probes.require_templates`, the message names ``what``) and compute its
    deductive closure under ``rules`` (None: the KB's own, :func:`dukb.solver.rules.kb_rules`: its rules.lp, else
    family).

    Returns:
        (:class:`dukb.kb.KB`, :class:`dukb.solver.closure.Closure`).

    Raises:
        KBError: a malformed KB (every problem with file and line); InputError: an unreadable file or bad rules.

    Source: Wu et al. 2025, Definition 1 (deductive closure).
    """

    if kb_spec is None:
        kb_spec = default_generated_kb_dir()
    kb = load_kb(kb_spec)
    require_templates(kb, needs, what)
    return kb, compute_closure(kb, rules)


def choose_targets(kb, n: int, seed: int, among=None, what: str = "", derivable_in=None) -> list[int]:
    """Draw ``n`` relationship fact_ids with ``seed``: relation kinds in turn (as the paper's 5 per kind), each
    kind's facts drawn without replacement.

    With ``derivable_in``, only facts derivable from the other KB facts are drawn (t ∈ Ω(K \\ {t}, R): a minimal
    deep unlearning set larger than the target, :func:`dukb.neural.known.rederivable`), relation kinds in turn
    among the kinds that have such facts. Each fact is checked when it is drawn and skipped if it does not
    qualify, so the draw is the one without ``derivable_in`` wherever every fact drawn qualifies (every fact of the
    family KBs does: the built-in generated KB and EDU-RELAT draw the same targets either way).

    Args:
        kb: the KB; n: how many; seed: the draw's seed.
        among: the fact_ids to draw from (None: every relationship; ``--no-finetune``: the known facts with a
            derivation from other known facts, :func:`dukb.neural.known.rederivable`).
        what: the pool's name in the error (e.g. " known facts with a derivation from other known facts").
        derivable_in: None, or the :class:`dukb.solver.closure.Closure` of ``kb`` whose derivations count.

    Returns:
        list of int, the fact_ids in draw order.

    Raises:
        InputError: n < 1 or more targets than facts to draw from (with ``derivable_in``: than facts that qualify).

    Source: Wu et al. 2025, Sec. 4 (targets spread over the relation kinds) and Definition 2 (a target derivable
    from the other facts, so that deep unlearning asks more than forgetting it).
    """
    pool = kb.relationships if among is None else [f for f in kb.relationships if f.fact_id in set(among)]
    if n < 1 or n > len(pool):
        raise InputError(f"--n-targets must be between 1 and {len(pool)}{what}, got {n}")
    rng = random.Random(seed)
    by_rel: dict[str, list[int]] = {}
    for f in pool:
        by_rel.setdefault(f.relation, []).append(f.fact_id)
    for ids in by_rel.values():
        rng.shuffle(ids)
    order = sorted(by_rel)
    out: list[int] = []
    while len(out) < n and any(by_rel.values()):
        for r in order:
            while by_rel[r] and len(out) < n:
                t = by_rel[r].pop()
                if derivable_in is None or rederivable(derivable_in, [t]):
                    out.append(t)
                    break
    if len(out) < n:  # every fact was checked: len(out) is how many qualify
        raise InputError(
            f"--n-targets must be between 1 and {len(out)}{what} (the facts derivable from the other "
            f"facts: a target whose only minimal deep unlearning set is itself is never drawn), got {n}"
        )
    return out


def sets_key(kb_fingerprint: str, rules_fingerprint: str, method: str, seeds: int, seed: int) -> dict:
    """Everything the minimal sets of a target depend on: KB, rules, method, N_seed, seed and exact limits."""
    return {
        "kb": kb_fingerprint,
        "rules": rules_fingerprint,
        "method": method,
        "seeds": seeds,
        "seed": seed,
        "exact_limits": EXACT_LIMITS,
    }


def _warn(log, msg: str) -> None:

    (log or (lambda m: print(m, file=sys.stderr, flush=True)))(msg)


def _fact_ids(value) -> bool:
    """``value`` is a non-empty list of distinct integer fact ids (JSON ints, not bools)."""
    return (
        isinstance(value, list) and bool(value) and all(type(f) is int for f in value) and len(set(value)) == len(value)
    )


def _not_minimal(closure, target: int, fact_ids: list[int], cone=None) -> str | None:
    """Why ``fact_ids`` is not a minimal deep unlearning set of ``target`` (Wu et al. 2025, Definitions 2-3), or
    None when it is one: every fact a relationship of the KB, the target underivable without them, and underivable
    without no proper subset (one fact put back at a time suffices: derivability is monotone)."""

    try:
        for f in fact_ids:
            closure.atom_of_fact(f)
    except InputError:
        return f"fact {f} is not a relationship fact of the KB"
    atom = [closure.atom_of_fact(target)]
    cone = cone if cone is not None else cone_of(closure, atom)
    if not is_deep_unlearning_set(closure, atom, fact_ids, cone):
        return f"the target stays derivable without {fact_ids}"
    if not is_minimal(closure, atom, fact_ids, cone):
        return f"{fact_ids} is not minimal (a fact of it can stay)"
    return None


def sets_entry_problem(closure, target: int, entry) -> str | None:
    """What is wrong with a cached sets.json entry of ``target``, or None when it holds: an object with ``sets``
    (a non-empty list of distinct sets, each a non-empty list of distinct int fact ids), ``sets_used`` ("exact" or
    "random") and ``complete`` (a bool), every set a minimal deep unlearning set of the target, checked against the
    KB's closure (Wu et al. 2025, Definitions 2-3).

    Args:
        closure: the KB's :class:`dukb.solver.closure.Closure`; target: the target's fact_id; entry: the value read.
    """
    if not isinstance(entry, dict):
        return "not an object"
    sets = entry.get("sets")
    if not isinstance(sets, list) or not sets or not all(_fact_ids(x) for x in sets):
        return "sets is not a non-empty list of lists of distinct fact ids"
    if len({frozenset(x) for x in sets}) != len(sets):
        return "a set is listed twice"
    if entry.get("sets_used") not in ("exact", "random") or not isinstance(entry.get("complete"), bool):
        return "sets_used or complete is missing or of another type"
    cone = cone_of(closure, [closure.atom_of_fact(target)])  # cut once for every set of the entry
    for x in sets:
        why = _not_minimal(closure, target, x, cone)
        if why:
            return why
    return None


def sets_cache(run: Path, closure, targets: list[int], key: dict, write: bool = True, log=None) -> dict:
    """Minimal deep unlearning sets per target, cached in RUN_DIR/sets.json under :func:`sets_key` (a cache with
    another key is recomputed); the cache is rewritten when ``write`` and a target was missing from it.

    What a run reads back is checked, not trusted: each cached entry is verified against the KB
    (:func:`sets_entry_problem`: its types, and every set a minimal deep unlearning set of its target); an entry
    that fails is recomputed with one line through ``log`` (default: stderr) naming the file, the target and why,
    and the file is rewritten. A document of another shape is recomputed whole, also with one line.

    sets.json: {"kb", "rules", "method", "key", "targets": {fact_id: {"sets", "sets_used", "complete"}}}.
    """

    path = run / "sets.json"
    cache = {}
    missing = True
    if os.path.lexists(path):
        doc = _read_doc(path, "sets cache")
        if doc.get("key") == key and isinstance(doc.get("targets"), dict):
            try:
                cache = {int(k): v for k, v in doc["targets"].items()}
            except (ValueError, TypeError):  # not a cache this dukb wrote: recomputed
                cache = {}
                _warn(
                    log,
                    f"dukb: warning: {path}: not a sets cache of this dukb (a target that is not a fact "
                    "id); recomputed",
                )
            for t in targets:
                why = sets_entry_problem(closure, t, cache[t]) if t in cache else None
                if why:
                    _warn(log, f"dukb: warning: {path}: target {t}: {why}; its sets are recomputed")
                    del cache[t]
            missing = any(t not in cache for t in targets)
        elif doc.get("key") == key:
            _warn(log, f"dukb: warning: {path}: targets is not an object; the sets are recomputed")
    for t in targets:
        if t in cache:
            continue
        atom = closure.atom_of_fact(t)
        if key["method"] == "exact":
            r = minimal_sets(closure, [atom], "exact", **EXACT_LIMITS)
            used = "exact"
            if not r.complete:  # enumeration limit: fall back to Algorithm 1 (plus the sets found)
                rnd = minimal_sets(closure, [atom], "random", n_seeds=key["seeds"], seed=key["seed"])
                r.sets = sorted(set(r.sets) | set(rnd.sets), key=lambda s: (len(s), s))
                used = "random"
        else:
            r = minimal_sets(closure, [atom], "random", n_seeds=key["seeds"], seed=key["seed"])
            used = "random"
        cache[t] = {"sets": [list(s) for s in r.sets], "sets_used": used, "complete": r.complete}
    if write and missing:
        write_json_atomic(
            path,
            {
                "kb": key["kb"],
                "rules": closure.rules.name,
                "method": key["method"],
                "key": key,
                "targets": {str(k): v for k, v in cache.items()},
            },
        )
    return cache


def paper_sets_cache(run: Path, closure, targets: list[int], key: dict, paper: dict, write: bool = True) -> dict:
    """The paper's sets of every target (``--sets paper``) as sets entries, recorded in RUN_DIR/sets.json (rewritten
    when it does not hold exactly these): they come from the KB (:func:`dukb.kb.paper_sets.paper_sets_of`), never
    from the cache, so a tampered sets.json changes nothing.

    Args:
        run: the run directory; closure: the KB's closure; targets: fact_ids; key: the sets key (method "paper"
            and the sets' digest); paper: target -> sets in the reference's order; write: write sets.json.

    Returns:
        target -> {"sets", "sets_used": "paper", "complete": False} (the sets in the paper's order).

    Source: Wu et al. 2025 (Eval-DU), synthetic_data/unlearn_minimal_set/*.pt, as calculate_recall_and_acc.py reads
    them.
    """
    cache = {t: {"sets": [list(x) for x in paper[t]], "sets_used": "paper", "complete": False} for t in targets}
    doc = {
        "kb": key["kb"],
        "rules": closure.rules.name,
        "method": "paper",
        "key": key,
        "targets": {str(k): v for k, v in cache.items()},
    }
    path = run / "sets.json"
    if write and (not os.path.lexists(path) or _read_doc(path, "sets cache") != doc):
        write_json_atomic(path, doc)
    return cache


def paper_sets_digest(paper: dict) -> str:
    """The SHA-256 of the paper's sets of a run's targets (target -> sets, in order), for the run identity and the
    sets key: a run made with other paper sets does not compare equal."""

    return sha256_json({str(t): [list(x) for x in v] for t, v in sorted(paper.items())})


def _read_doc(path: Path, what: str) -> dict:
    """The JSON object of a cache file, read bounded (:func:`dukb.kb.csvfile.read_bytes`: a regular file of at most
    :data:`dukb.neural.run.files.RUN_JSON_BYTES` bytes); {} when it is not a JSON object (it is then recomputed).

    Raises:
        InputError: not a regular file (a FIFO, a device, a folder) or too large (named).
    """

    data = read_bytes(path, what, limit=RUN_JSON_BYTES)
    try:
        doc = json.loads(data.decode("utf-8"))
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _read_cache(path: Path, key: dict) -> dict:
    """The entries of a JSON cache file if its ``key`` equals ``key``, else {} (missing or not JSON: {}).

    Raises:
        InputError: not a regular file (a FIFO, a device, a folder) or too large (named).
    """
    if not os.path.lexists(path):
        return {}
    doc = _read_doc(path, "cache file")
    entries = doc.get("entries", {}) if doc.get("key") == key else {}
    return dict(entries) if isinstance(entries, dict) else {}


def forget_entry_problem(closure, target: int, scope: str, value, sets) -> str | None:
    """What is wrong with a cached forget set of (``target``, ``scope``), or None: a non-empty list of distinct int
    fact ids; for the ``target`` scope the target alone; for a deep scope (``minimum``, ``best``) a minimal deep
    unlearning set of the target (Wu et al. 2025, Definition 3); for ``best`` one of the target's ``sets`` (checked
    by :func:`sets_entry_problem`, or the paper's sets, which need not be minimal under the run's rules)."""
    if not _fact_ids(value):
        return "not a non-empty list of distinct fact ids"
    if scope == "target":
        return None if value == [target] else f"the target scope forgets the target alone, not {value}"
    if scope == "best":  # one of the target's sets, checked already (or the paper's, which may not be minimal)
        return (
            None
            if frozenset(value) in {frozenset(x) for x in sets}
            else f"{value} is not one of the target's minimal sets"
        )
    return _not_minimal(closure, target, value)


def forget_sets_cache(run: Path, closure, pairs, sets: dict, key: dict, write: bool = True, log=None) -> dict:
    """The forget set of every (target, scope) pair, cached in RUN_DIR/forget_sets.json under ``key`` (KB, rules and
    the sets key, which the ``best`` scope reads). Each cached entry is checked (:func:`forget_entry_problem`); one
    that fails is recomputed with one line through ``log`` (default: stderr) and the file rewritten.

    Args:
        run: the run directory.
        closure: the KB's closure.
        pairs: (target fact_id, scope name) pairs.
        sets: target -> sets entry (from :func:`sets_cache`).
        key: the cache key.
        write: write the file when an entry was missing.
        log: callable(str) for the line on a recomputed entry.

    Returns:
        {(target, scope): [relationship fact_ids]}.

    Raises:
        InputError: unknown scope.
    """

    path = run / "forget_sets.json"
    entries = _read_cache(path, key)
    out, missing = {}, False
    for t, scope in pairs:
        k = f"{t}@{scope}"
        why = forget_entry_problem(closure, t, scope, entries[k], sets[t]["sets"]) if k in entries else None
        if why:
            _warn(log, f"dukb: warning: {path}: {k}: {why}; recomputed")
            del entries[k]
        if k not in entries:
            entries[k] = forget_fact_ids(closure, t, scope, [tuple(s) for s in sets[t]["sets"]])
            missing = True
        out[(t, scope)] = list(entries[k])
    if write and missing:
        write_json_atomic(path, {"key": key, "entries": entries})
    return out


@dataclass
class Plan:
    """The symbolic plan of a run.

    Attributes:
        kb: the KB; closure: its :class:`dukb.solver.closure.Closure`.
        targets: relationship fact_ids, in run order.
        sets: target -> {"sets": [[fact_id, ...], ...], "sets_used": "exact"|"random"|"paper", "complete": bool}.
        forget: (target, scope) -> relationship fact_ids to forget.
    """

    kb: object
    closure: object
    targets: list[int]
    sets: dict
    forget: dict


def build_plan(
    run: Path,
    kb,
    closure,
    targets: list[int],
    scopes,
    *,
    sets_method: str = "exact",
    seeds: int = 100,
    seed: int = 0,
    write: bool = True,
    log=None,
) -> Plan:
    """Stage 1: minimal sets of every target and forget sets of every (target, scope), through the run's caches.

    Args:
        run: the run directory (caches live there).
        kb, closure: the KB and its closure.
        targets: relationship fact_ids.
        scopes: forget scope names used by the run's methods.
        sets_method: "exact", "random" or "paper" (the KB's paper sets, :func:`paper_sets_cache`); seeds, seed:
            N_seed and seed of Algorithm 1.
        write: write missing cache entries (False on the non-main processes of a multi-process run).
        log: callable(str) for the line on a cached entry that fails its check and is recomputed (default: stderr).

    Returns:
        :class:`Plan`.

    Raises:
        InputError: an unknown target or scope; "paper" for a KB without paper sets or a target without them.
    """
    for t in targets:
        closure.atom_of_fact(t)
    skey = sets_key(kb.fingerprint(), closure.rules.fingerprint, sets_method, seeds, seed)
    if sets_method == "paper":
        paper, _where = paper_sets_of(kb, targets)
        skey["paper"] = paper_sets_digest(paper)
        sets = paper_sets_cache(run, closure, targets, skey, paper, write)
    else:
        sets = sets_cache(run, closure, targets, skey, write, log)
    fkey = {"kb": skey["kb"], "rules": skey["rules"], "sets": skey}
    forget = forget_sets_cache(
        run, closure, [(t, s) for t in targets for s in dict.fromkeys(scopes)], sets, fkey, write, log
    )
    return Plan(kb, closure, list(targets), sets, forget)


__all__ = [
    "EXACT_LIMITS",
    "Plan",
    "build_plan",
    "choose_targets",
    "forget_entry_problem",
    "forget_sets_cache",
    "paper_sets_cache",
    "paper_sets_digest",
    "sets_cache",
    "sets_entry_problem",
    "sets_key",
]
