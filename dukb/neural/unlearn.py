"""One method, one target, one grid: unlearn from the finetuned model, probe every KB fact after each setting, and
score the outcome with the solver's recall/accuracy (Wu et al. 2025, Sec. 4 protocol).
"""

from __future__ import annotations

import random
import time
from typing import Iterator

from dukb.neural.data import QA_KIND, QAItem, kb_qa
from dukb.neural.methods import Method, UnlearnContext, get_method
from dukb.solver.scopes import FORGET_SCOPES, forget_fact_ids


#: Forget scope names (the registry is :data:`dukb.solver.scopes.FORGET_SCOPES`).
SCOPES = tuple(FORGET_SCOPES)


def default_retain(items: list[QAItem], forget: list[QAItem], n: int = 64, seed: int = 0,
                   exclude_rel=()) -> list[QAItem]:
    """The default retain set of GDR/KLR (retain-train): ``n`` random KB QA items about facts other than the forget
    facts and the relationship fact_ids ``exclude_rel``.

    Returns:
        list of QA items (deterministic for ``seed``).
    """
    banned = {(f.fact_kind, f.fact_id) for f in forget} | {("relationship", int(f)) for f in exclude_rel}
    pool = [it for it in items if (it.fact_kind, it.fact_id) not in banned]
    rng = random.Random(seed)
    return rng.sample(pool, min(n, len(pool)))


def _split_heldout_pairs(items, metrics, heldout, heldout_before, heldout_rule) -> tuple[list, list]:
    """(items probed in full, held-out baseline pairs probed with :func:`probe_until_elicited`).

    Under the ``pairs`` rule with a baseline, ``recall_heldout`` counts a fact as known when one of its baseline
    (form, fact) pairs still elicits it, so once one pair has, the fact's other pairs cannot change the row: they are
    left unprobed. Items of a kind another metric needs (and the qa form) are always probed in full."""
    if not heldout or heldout_before is None or heldout_rule != "pairs":
        return items, []
    from dukb.neural.metrics import combined_needs

    others = set(combined_needs([mt for mt in metrics if mt.name != "recall_heldout"]).kinds) | {QA_KIND}
    before = set(heldout_before)
    pair = [it.kind in heldout and it.kind not in others and (it.kind, it.fact_kind, it.fact_id) in before
            for it in items]
    return [it for it, p in zip(items, pair) if not p], [it for it, p in zip(items, pair) if p]


def _probe_setting(pred, items, pair_items, needs, batch_size):
    """The probe table of one setting: ``items`` in full, then the pairs rule's evidence ``pair_items`` fact by
    fact until one pair elicits the fact (:func:`probe_until_elicited`)."""
    from dukb.neural.probe import probe

    kw = dict(batch_size=batch_size, generate=needs.generate, rouge=needs.rouge, logprob=needs.logprob)
    df = probe(pred, items, **kw)
    return _concat(df, probe_until_elicited(pred, pair_items, **kw)) if pair_items else df


def probe_until_elicited(pred, items: list[QAItem], **kw):
    """Probe each fact's items in rounds, round r asking every fact still unelicited its r-th item, until one
    elicits it (or its items run out): the probe table of the ``pairs`` held-out rule, whose recall and accuracy
    equal those of probing every item (a fact is known once any of its baseline pairs elicits it).

    Args:
        pred: :class:`dukb.neural.probe.Predictor`; items: QA items (several per fact, in the order to ask them);
        kw: :func:`dukb.neural.probe.probe`'s options (``generate`` must be on: ``known`` decides the rounds).

    Returns:
        pandas DataFrame of :func:`dukb.neural.probe.probe`'s rows for the items asked (a fact's items after its
        first eliciting one are absent); ``attrs["seconds"]`` the total.

    The rounds batch the prompts differently from one probe of every item (:func:`dukb.neural.probe.probe` batches
    by prompt length), so the rows equal those of probing every pair as far as a prompt's greedy answer does not
    depend on the batch it is in (on the CPU in fp32, README's main job gave the same 231 rows; bf16 on a GPU may
    flip a near-tie).

    Source: dukb (an exact shortcut of the pairs rule of :mod:`dukb.neural.metrics.heldout`).
    """
    from dukb.neural.probe import probe

    by_fact: dict[tuple, list[QAItem]] = {}
    for it in items:
        by_fact.setdefault((it.fact_kind, int(it.fact_id)), []).append(it)
    frames, pending, r = [], list(by_fact), 0
    while pending:
        df = probe(pred, [by_fact[k][r] for k in pending], **kw)
        frames.append(df)
        hit = {(fk, int(f)) for fk, f, v in zip(df["fact_kind"], df["fact_id"], df["known"]) if v}
        r += 1
        pending = [k for k in pending if k not in hit and len(by_fact[k]) > r]
    if not frames:  # no items: the empty table
        frames.append(probe(pred, [], **kw))
    out = frames[0]
    for df in frames[1:]:
        out = _concat(out, df)
    return out


def _concat(a, b):
    """Two probe tables one after the other (their ``seconds`` added)."""
    import pandas as pd

    out = pd.concat([a, b], ignore_index=True)
    out.attrs = {**a.attrs, "seconds": a.attrs.get("seconds", 0.0) + b.attrs.get("seconds", 0.0)}
    return out


def _success_du_fields(closure, target: int, fields: dict) -> dict:
    """``success_du`` (and ``success_du_heldout``) of a row from its forgotten relationships on the probed forms
    (and on the held-out forms): 1 when the target is outside Ω(K \\ U_A, R). Source: Wu et al. 2025, Definition 2
    (Success-DU of the paper's v4)."""
    from dukb.neural.metrics.recall import success_du

    out = {}
    for src, dst in (("forgotten_relationships", "success_du"),
                     ("forgotten_relationships_heldout", "success_du_heldout")):
        if fields.get(src) is not None:
            out[dst] = success_du(closure, target, fields[src])
    return out


def heldout_baseline(lm, kb, forms, *, batch_size: int = 256) -> frozenset:
    """The held-out baseline of a model before unlearning: which (form, fact) pairs of ``forms`` elicit their fact
    (:attr:`dukb.neural.metrics.base.RowContext.heldout_before`, the reference every row's ``recall_heldout`` is
    judged against).

    Args:
        lm: the finetuned :class:`dukb.neural.models.LoadedModel` (θ₀).
        kb: the KB; forms: held-out probe forms (iterable of :data:`dukb.kb.probes.KINDS` names, non-empty).
        batch_size: prompts per probing batch.

    Returns:
        frozenset of (form, fact kind, fact_id) triples whose item θ₀ answers
        (:func:`dukb.neural.metrics.heldout.elicited_by_form`).

    Source: Wu et al. 2025, Eq. 1 (a fact counts as forgotten only if the model knew it); held-out scoring as in
    :mod:`dukb.neural.metrics.heldout`.
    """
    from dukb.neural.metrics.heldout import elicited_by_form
    from dukb.neural.probe import Predictor, probe

    forms = tuple(forms)
    df = probe(Predictor(lm.model, lm.tokenizer, lm.tags, device=lm.device), kb_qa(kb, forms),
               batch_size=batch_size, rouge=False, logprob=False)
    return elicited_by_form(df, forms)


def retain_fact_ids(retain: list[QAItem]) -> dict:
    """The fact ids a method trains on as retain data: {"relationships": [...], "biographies": [...]} (sorted)."""
    out = {"relationships": set(), "biographies": set()}
    for it in retain:
        out["relationships" if it.fact_kind == "relationship" else "biographies"].add(int(it.fact_id))
    return {k: sorted(v) for k, v in out.items()}


def _attack_fields(lm, pred, kb, closure, target, sets, forget_ids, retain_ids, qa_items, df, attacks, reference,
                   seed, batch_size, fields) -> dict:
    """The row's ``attacks`` entries and its worst case over forms and attacks (:mod:`dukb.neural.attacks`)."""
    from dukb.neural.attacks import AttackContext, run_attacks, worst_case_fields

    qa = [it for it in qa_items if it.kind == QA_KIND]
    if "forgotten_relationships" not in fields:  # the recall metric did not run: the QA probe's forgotten facts
        from dukb.neural.metrics.recall import retained_from_probe

        fields = {**fields, "forgotten_relationships": sorted(retained_from_probe(kb, df).forgotten_relationships)}
    actx = AttackContext(pred, kb, closure, target, [list(x) for x in sets[0]], sets[1], list(forget_ids), qa,
                         df[df["kind"] == QA_KIND], retain_ids, spec=getattr(lm, "spec", None), reference=reference,
                         seed=seed, batch_size=batch_size)
    entries = run_attacks(actx, attacks)
    return {"attacks": entries, **worst_case_fields(kb, sets[0], sets[1], target, fields, entries)}


def method_retain(m: Method, closure, target_fact_id: int, qa_items: list[QAItem], forget: list[QAItem],
                  seed: int) -> list[QAItem]:
    """The retain-train QA of a method on one target: :func:`default_retain` from the qa items outside the forget set
    (and outside the target's cone when the method may unlearn any cone fact, ``retain_outside_cone``); [] for a
    method without retain data.

    Source: Wu et al. 2025, App. H (GDR/KLR retain data).
    """
    if not m.uses_retain:
        return []
    cone_ids = ()
    if m.retain_outside_cone:  # the method may unlearn any fact of the cone: none of them is retain data
        from dukb.solver.cone import cone_of

        cone = cone_of(closure, [closure.atom_of_fact(target_fact_id)])
        cone_ids = [closure.fact_ids[cone.atoms[a]] for a in cone.kb]
    return default_retain(qa_items, forget, seed=seed, exclude_rel=cone_ids)


def sweep_target(lm, kb, closure, target_fact_id: int, method: "str | Method", grid=None, *, sets=None,
                 forget: list[QAItem] | None = None, retain: list[QAItem] | None = None, seed: int = 0,
                 lr: float | None = None, lora=None, layers: tuple[int, int] | None = None, probe_items: list[QAItem] | None = None,
                 batch_size: int = 256, scope: str = "target", forget_ids: list[int] | None = None,
                 metrics=None, heldout_forms=None, heldout_before=None, heldout_rule: str = "pairs",
                 schedule=None, attacks=None, reference=None) -> Iterator[dict]:
    """Run ``method`` over its grid on one target and yield one result row per setting: the sweep, probe and
    metric stages of the protocol, streamed setting by setting (each stage only consumes the previous one's
    output: (setting, predictor) → probe table → metric fields).

    Args:
        lm: finetuned :class:`dukb.neural.models.LoadedModel` (unchanged afterwards).
        kb, closure: the KB and its :class:`dukb.solver.closure.Closure`.
        target_fact_id: relationship fact_id to unlearn.
        method: a :data:`dukb.neural.methods.METHODS` name, or a :class:`Method` (one with per-method options,
            :meth:`Method.with_options`).
        grid: values of the method's parameter (None: its default grid).
        sets: the target's minimal deep unlearning sets and their label, ``(list_of_sets, "exact"|"random")``; when
            None, computed exactly here.
        forget: the forget QA (default: the "qa" items of ``forget_ids``).
        scope: forget scope, see :func:`dukb.solver.scopes.forget_fact_ids` (the retain set excludes every forget
            fact).
        forget_ids: the scope's forget set from the plan (default: computed here from ``scope``).
        retain: the retain QA for GDR/KLR (default: :func:`default_retain`).
        seed, lr, lora: passed to the method.
        layers: partial-layer finetuning block range (first, last) for gradient methods (None: every layer).
        probe_items: items probed after each setting (default: every KB fact's "qa" item).
        batch_size: prompts per probing batch.
        metrics: row :class:`dukb.neural.metrics.Metric` objects (default: ``recall``); probing computes only what
            they need.
        heldout_forms: probe forms the row is also scored on by ``recall_heldout`` (None: every asking form the
            method did not see, :func:`dukb.neural.metrics.heldout.default_heldout_forms`); they must be disjoint
            from the forms it saw and present in ``probe_items``.
        heldout_before: the (form, fact kind, fact_id) triples that elicited their fact before unlearning (the
            baseline of :mod:`dukb.neural.metrics.heldout`, :func:`~dukb.neural.metrics.heldout.elicited_by_form`;
            None: none).
        heldout_rule: "pairs" or "any" (:data:`dukb.neural.metrics.heldout.HELDOUT_RULES`).
        schedule: how a gradient method runs its step grid, :class:`dukb.neural.methods.base.SweepSchedule`
            (None: "separate", each T from θ₀).
        attacks: [(Attack, settings)] of :func:`dukb.neural.attacks.parse_attacks`, applied to every unlearned
            model right after its probe (the row's ``attacks`` dict; ``recall_under_attack`` becomes the worst case
            over forms and attacks, :func:`dukb.neural.attacks.worst_case_fields`).
        reference: the model before unlearning (a Predictor over a copy of θ₀), for attacks that compare with it.

    Yields:
        dict rows: method, base_method, scope, forget_set, retain_fact_ids, probe_forms_seen (the forms of the
        items the method trained on and of its in-loop probes), heldout_forms, param, setting, target, the metrics'
        fields (recall: recall, accuracy_relationships, accuracy_biographies, accuracy_all, best_set, sets_used,
        n_sets, target_forgotten, forgotten_relationships, forgotten_biographies), success_du (and
        success_du_heldout with ``recall_heldout``: Wu et al. 2025, Definition 2), ``trace`` (a method's per-target
        diagnostics, e.g. CL-DU's rounds run and trained facts; absent for methods without one), seconds_unlearn,
        seconds_probe.

    Raises:
        InputError: held-out forms that the method saw, or none left.

    Source: Wu et al. 2025, Sec. 4 (protocol), Eq. 1-2 (metrics).
    """
    from dukb.neural.metrics import RowContext, combined_needs, get_metric
    from dukb.neural.metrics.heldout import check_heldout
    from dukb.solver.mdus import minimal_sets

    metrics = [get_metric("recall")] if metrics is None else list(metrics)
    needs = combined_needs(metrics)
    items = probe_items or kb_qa(kb, needs.kinds)
    qa_items = [it for it in items if it.kind == QA_KIND]  # what methods train on; other kinds are only probed
    if sets is None:
        res = minimal_sets(closure, [closure.atom_of_fact(target_fact_id)], "exact")
        sets = (res.sets, "exact")
    if forget_ids is None:
        forget_ids = forget_fact_ids(closure, target_fact_id, scope, sets[0])
    if forget is None:
        wanted = set(forget_ids)
        forget = [it for it in qa_items if it.fact_kind == "relationship" and it.fact_id in wanted]
    m = method if isinstance(method, Method) else get_method(method)
    if retain is None:
        retain = method_retain(m, closure, target_fact_id, qa_items, forget, seed)
    retain_ids = retain_fact_ids(retain)
    seen = tuple(sorted({it.kind for it in forget} | {it.kind for it in retain} | set(m.seen_forms)))
    # the held-out forms the row is scored on: none when recall_heldout is not among the metrics
    heldout = check_heldout(heldout_forms, seen) if any(mt.name == "recall_heldout" for mt in metrics) else ()
    loop_items = qa_items  # what a method may ask or train on in its loop: qa and its queried and trained forms
    extra = [k for k in m.seen_forms if k != QA_KIND]  # the forms it queries or trains on
    if extra:  # every fact's items of those forms (the probe items may hold only some of them)
        loop_items = qa_items + kb_qa(kb, tuple(extra))
    ctx = UnlearnContext(lm, forget, retain, seed=seed, lr=lr, lora=lora, layers=layers, kb=kb, closure=closure, target=target_fact_id,
                         sets=[list(s) for s in sets[0]], items=loop_items, schedule=schedule)
    rest, pair_items = _split_heldout_pairs(items, metrics, heldout, heldout_before, heldout_rule)
    t0 = time.perf_counter()
    last = None
    for setting, pred in m.sweep(ctx, grid):
        t1 = time.perf_counter()
        setting = dict(setting)
        trace = setting.pop("trace", None)  # per-target diagnostics: not part of the setting (the curve's key)
        state = pred.meta.get("weights_version")  # a method that says its weights did not change since the last
        if state is not None and last is not None and last[0] == state:  # setting (a stopped closed loop)
            df = last[1]  # is probed once: the same weights give the same table
        else:
            df = _probe_setting(pred, rest, pair_items, needs, batch_size)
        last = (state, df)
        t2 = time.perf_counter()
        rctx = RowContext(kb, target_fact_id, [list(s) for s in sets[0]], sets[1], df, list(forget_ids), retain_ids,
                          predictor=pred if needs.model else None, seen_forms=seen, heldout_forms=heldout,
                          heldout_before=None if heldout_before is None else frozenset(heldout_before),
                          heldout_rule=heldout_rule, closure=closure)
        fields = {}
        for metric in metrics:
            fields.update(metric.fn(rctx))
        fields.update(_success_du_fields(closure, target_fact_id, fields))
        if attacks:
            fields.update(_attack_fields(lm, pred, kb, closure, target_fact_id, sets, forget_ids, retain_ids, qa_items,
                                         df, attacks, reference, seed, batch_size, fields))
        yield {"method": m.name if scope == "target" else f"{m.name}@{scope}", "base_method": m.name,
               **({"method_options": m.option_values} if m.option_values else {}),
               "scope": scope, "forget_set": list(forget_ids), "retain_fact_ids": retain_ids,
               "probe_forms_seen": list(seen), "heldout_forms": list(heldout), "param": m.param,
               "setting": setting, "target": target_fact_id, **fields,
               **({"trace": trace} if trace is not None else {}),
               "seconds_unlearn": round(t1 - t0, 4), "seconds_probe": round(t2 - t1, 4)}
        t0 = time.perf_counter()
