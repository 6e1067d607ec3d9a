"""One method, one target, one grid: unlearn from the finetuned model, probe every KB fact after each setting, and
score the outcome with the solver's recall/accuracy (Wu et al. 2025, Sec. 4 protocol).
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from dukb.neural.attacks import AttackContext, run_attacks, worst_case_fields
from dukb.neural.attacks.base import check_attacks_on_model
from dukb.neural.data import QA_KIND, QAItem, kb_qa
from dukb.neural.methods import Method, UnlearnContext, get_method
from dukb.neural.metrics import RowContext, combined_needs, get_metric
from dukb.neural.metrics.heldout import check_heldout, elicited_by_form
from dukb.neural.metrics.recall import retained_from_probe, success_du_fields
from dukb.neural.probe import Predictor, probe
from dukb.solver.cone import cone_of
from dukb.solver.mdus import minimal_sets
from dukb.solver.scopes import FORGET_SCOPES, forget_fact_ids

#: Forget scope names (the registry is :data:`dukb.solver.scopes.FORGET_SCOPES`).
SCOPES = tuple(FORGET_SCOPES)


def default_retain(
    items: list[QAItem], forget: list[QAItem], n: int = 64, seed: int = 0, exclude_rel=()
) -> list[QAItem]:
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

    others = set(combined_needs([mt for mt in metrics if mt.name != "recall_heldout"]).kinds) | {QA_KIND}
    before = set(heldout_before)
    pair = [
        it.kind in heldout and it.kind not in others and (it.kind, it.fact_kind, it.fact_id) in before for it in items
    ]
    return [it for it, p in zip(items, pair) if not p], [it for it, p in zip(items, pair) if p]


def _probe_setting(pred, items, pair_items, needs, batch_size):
    """The probe table of one setting: ``items`` in full, then the pairs rule's evidence ``pair_items`` fact by
    fact until one pair elicits the fact (:func:`probe_until_elicited`)."""

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


def heldout_baseline(lm, kb, forms, *, batch_size: int = 256) -> frozenset:
    """The held-out baseline of a model before unlearning: which (form, fact) pairs of ``forms`` elicit their fact
    (:attr:`dukb.neural.metrics.base.RowContext.heldout_before`, the reference every row's ``recall_heldout`` is
    judged against).

    Args:
        lm: the finetuned :class:`dukb.neural.spec.LoadedModel` (θ₀).
        kb: the KB; forms: held-out probe forms (iterable of :data:`dukb.kb.probes.KINDS` names, non-empty).
        batch_size: prompts per probing batch.

    Returns:
        frozenset of (form, fact kind, fact_id) triples whose item θ₀ answers
        (:func:`dukb.neural.metrics.heldout.elicited_by_form`).

    Source: Wu et al. 2025, Eq. 1 (a fact counts as forgotten only if the model knew it); held-out scoring as in
    :mod:`dukb.neural.metrics.heldout`.
    """

    forms = tuple(forms)
    df = probe(
        Predictor(lm.model, lm.tokenizer, lm.tags, device=lm.device),
        kb_qa(kb, forms),
        batch_size=batch_size,
        rouge=False,
        logprob=False,
    )
    return elicited_by_form(df, forms)


def retain_fact_ids(retain: list[QAItem]) -> dict:
    """The fact ids a method trains on as retain data: {"relationships": [...], "biographies": [...]} (sorted)."""
    out = {"relationships": set(), "biographies": set()}
    for it in retain:
        out["relationships" if it.fact_kind == "relationship" else "biographies"].add(int(it.fact_id))
    return {k: sorted(v) for k, v in out.items()}


def method_retain(
    m: Method, closure, target_fact_id: int, qa_items: list[QAItem], forget: list[QAItem], seed: int
) -> list[QAItem]:
    """The retain-train QA of a method on one target: :func:`default_retain` from the qa items outside the forget set
    (and outside the target's cone when the method may unlearn any cone fact, ``retain_outside_cone``); [] for a
    method without retain data.

    Source: Wu et al. 2025, App. H (GDR/KLR retain data).
    """
    if not m.uses_retain:
        return []
    cone_ids = ()
    if m.retain_outside_cone:  # the method may unlearn any fact of the cone: none of them is retain data
        cone = cone_of(closure, [closure.atom_of_fact(target_fact_id)])
        cone_ids = [closure.fact_ids[cone.atoms[a]] for a in cone.kb]
    return default_retain(qa_items, forget, seed=seed, exclude_rel=cone_ids)


@dataclass(frozen=True, eq=False)
class UnitPlan:
    """One work unit of the protocol, resolved once: unlearn ``target`` with ``method`` at each ``grid`` value, probe
    after each setting and score the row (:func:`sweep_target` consumes it and resolves nothing again).

    The protocol (:class:`dukb.neural.protocols.evaluate.run.EvaluateProtocol`) builds it from its plan; a caller
    may give only the first five fields and let the others take their defaults, which are resolved here.

    Attributes:
        lm: the finetuned :class:`dukb.neural.spec.LoadedModel` (θ₀; unchanged after the sweep).
        kb, closure: the KB and its :class:`dukb.solver.closure.Closure`.
        target: the relationship fact_id to unlearn (int).
        method: a :data:`dukb.neural.methods.METHODS` name or a :class:`Method` (one with per-method options,
            :meth:`Method.with_options`); resolved to the :class:`Method`.
        grid: the values of the method's parameter to run (tuple; None: its default grid).
        label: the rows' ``method`` (default: the method's name, ``NAME@SCOPE`` outside the target scope).
        scope: forget scope (:func:`dukb.solver.scopes.forget_fact_ids`; the retain set excludes every forget fact).
        sets, sets_used: the target's minimal deep unlearning sets (tuples of fact_ids) and "exact" | "random" |
            "paper" (default: computed exactly here); tie_break: "accuracy" | "first", which set tied on recall
            scores the accuracies (:func:`dukb.solver.metrics.recall_accuracy`).
        forget_ids: the scope's forget set (default: computed from ``scope``); forget: its QA (default: the "qa"
            items of ``forget_ids``); retain: the retain QA of GDR/KLR (default: :func:`method_retain`).
        seed, lr, lora: passed to the method; layers: partial-layer block range (first, last) or None.
        probe_items: items probed after each setting (default: every KB fact's items of the metrics' kinds).
        batch_size: prompts per probing batch.
        metrics: row :class:`dukb.neural.metrics.Metric` objects (default: ``recall``).
        heldout_forms: forms the row is also scored on by ``recall_heldout`` (None: every asking form the method did
            not see), checked here against the forms the method sees; heldout: the same, already resolved by a
            checked run plan (:meth:`dukb.neural.protocols.evaluate.config.EvaluateConfig.heldout_of`), taken as
            they are (None: resolved here from ``heldout_forms``); heldout_before: the (form, fact kind, fact_id) triples that elicited their fact before
            unlearning (None: no baseline); heldout_rule: "pairs" or "any".
        schedule: :class:`dukb.neural.methods.base.SweepSchedule` of a step grid (None: "separate").
        reinforce: TV's and WHP's reinforcement schedule, "constant" or "reference"
            (:func:`dukb.neural.methods.tv.reinforce`).
        attacks: [(Attack, settings)] applied to every unlearned model after its probe; reference: a Predictor over
            θ₀ for attacks that compare with it.
        row_fields: fields every row of the unit ends with (the protocol's: worker, target_relation, ...).
        keep_model: ``keep_model(row, pred)``, called once a row is written (the consumer asked for the next) while
            the method's weights are still the row's (``--save-models``, :class:`dukb.neural.savedmodels.ModelSaver`);
            None: nothing.
        utility: ``utility(pred) -> dict | None``, the row's ``utility`` field (``--utility``, lm-eval's scores of
            the unlearned model: :func:`dukb.neural.lmeval.row_utility`); None: the row has no such field.
        known_before: the (fact kind, fact_id) pairs the model knew before unlearning (``--no-finetune``,
            :mod:`dukb.neural.known`): the others are unscorable (:attr:`dukb.neural.metrics.RowContext.known_before`);
            None: every fact is scored.

    Resolved here (not arguments): needs (the metrics' combined needs), qa_items, retain_ids, seen (the forms the
    method trained on or queried), heldout when not given (the checked held-out forms, empty without
    ``recall_heldout``), loop_items (what the method may ask or train on), probed and pair_items (items probed in full, and the pairs
    rule's baseline pairs probed fact by fact).

    Raises:
        InputError: an unknown method or target; held-out forms that the method saw, or none left.

    Source: Wu et al. 2025, Sec. 4 (protocol), App. H (retain data).
    """

    lm: object
    kb: object
    closure: object
    target: int
    method: str | Method
    grid: tuple | None = None
    label: str | None = None
    scope: str = "target"
    sets: tuple | None = None
    sets_used: str = "exact"
    tie_break: str = "accuracy"
    forget_ids: tuple | None = None
    forget: tuple | None = None
    retain: tuple | None = None
    seed: int = 0
    lr: float | None = None
    lora: object = None
    layers: tuple | None = None
    probe_items: tuple | None = None
    batch_size: int = 256
    metrics: tuple | None = None
    heldout_forms: tuple | None = None
    heldout: tuple | None = None
    heldout_before: frozenset | None = None
    heldout_rule: str = "pairs"
    schedule: object = None
    reinforce: str = "constant"
    attacks: tuple | None = None
    reference: object = None
    row_fields: dict = field(default_factory=dict)
    keep_model: object = None
    utility: object = None
    known_before: frozenset | None = None
    needs: object = field(init=False)
    qa_items: tuple = field(init=False)
    retain_ids: dict = field(init=False)
    seen: tuple = field(init=False)
    loop_items: tuple = field(init=False)
    probed: tuple = field(init=False)
    pair_items: tuple = field(init=False)

    def __post_init__(self) -> None:
        """Resolve the defaults and the derived fields (see the class docstring)."""

        put = functools.partial(object.__setattr__, self)
        metrics = (get_metric("recall"),) if self.metrics is None else tuple(self.metrics)
        needs = combined_needs(metrics)
        items = tuple(self.probe_items or kb_qa(self.kb, needs.kinds))
        qa_items = tuple(it for it in items if it.kind == QA_KIND)  # what methods train on; the rest is probed
        m = self.method if isinstance(self.method, Method) else get_method(self.method)
        put("metrics", metrics), put("needs", needs), put("qa_items", qa_items), put("method", m)
        put("label", self.label or (m.name if self.scope == "target" else f"{m.name}@{self.scope}"))
        put("grid", None if self.grid is None else tuple(self.grid))
        self._resolve_sets(qa_items)
        seen = tuple(sorted({it.kind for it in self.forget} | {it.kind for it in self.retain} | set(m.seen_forms)))
        put("seen", seen)
        # the held-out forms the row is scored on (a run plan's as they are): none without recall_heldout
        if self.heldout is not None:
            put("heldout", tuple(self.heldout))
        else:
            scored = any(mt.name == "recall_heldout" for mt in metrics)
            put("heldout", check_heldout(self.heldout_forms, seen) if scored else ())
        extra = [k for k in m.seen_forms if k != QA_KIND]  # the forms it queries or trains on beyond qa
        # what a method may ask or train on in its loop: every fact's items of those forms
        put("loop_items", qa_items + tuple(kb_qa(self.kb, tuple(extra))) if extra else qa_items)
        before = None if self.heldout_before is None else frozenset(self.heldout_before)
        put("heldout_before", before)
        probed, pairs = _split_heldout_pairs(list(items), metrics, self.heldout, before, self.heldout_rule)
        put("probed", tuple(probed)), put("pair_items", tuple(pairs))

    def _resolve_sets(self, qa_items: tuple) -> None:
        """The minimal sets, forget ids, forget QA, retain QA and retain ids (each a given value or its default)."""

        put = functools.partial(object.__setattr__, self)
        if self.sets is None:
            put("sets", tuple(minimal_sets(self.closure, [self.closure.atom_of_fact(self.target)], "exact").sets))
            put("sets_used", "exact")
        put("sets", tuple(tuple(s) for s in self.sets))
        if self.forget_ids is None:
            put("forget_ids", forget_fact_ids(self.closure, self.target, self.scope, list(self.sets)))
        put("forget_ids", tuple(self.forget_ids))
        if self.forget is None:
            wanted = set(self.forget_ids)
            put("forget", tuple(it for it in qa_items if it.fact_kind == "relationship" and it.fact_id in wanted))
        if self.retain is None:
            put(
                "retain",
                method_retain(self.method, self.closure, self.target, list(qa_items), list(self.forget), self.seed),
            )
        put("forget", tuple(self.forget)), put("retain", tuple(self.retain))
        put("retain_ids", retain_fact_ids(list(self.retain)))


def _attack_fields(plan: UnitPlan, pred, df, fields: dict) -> dict:
    """The row's ``attacks`` entries and its worst case over forms and attacks (:mod:`dukb.neural.attacks`)."""

    if "forgotten_relationships" not in fields:  # the recall metric did not run: the QA probe's forgotten facts
        fields = {**fields, "forgotten_relationships": sorted(retained_from_probe(plan.kb, df).forgotten_relationships)}
    sets = [list(x) for x in plan.sets]
    actx = AttackContext(
        pred,
        plan.kb,
        plan.closure,
        plan.target,
        sets,
        plan.sets_used,
        list(plan.forget_ids),
        list(plan.qa_items),
        df[df["kind"] == QA_KIND],
        plan.retain_ids,
        spec=getattr(plan.lm, "spec", None),
        reference=plan.reference,
        seed=plan.seed,
        batch_size=plan.batch_size,
        tie_break=plan.tie_break,
    )
    entries = run_attacks(actx, list(plan.attacks))
    return {"attacks": entries, **worst_case_fields(plan.kb, sets, plan.sets_used, plan.target, fields, entries)}


def score_setting(plan: UnitPlan, pred, df) -> dict:
    """The metric fields of one setting's row: every metric of the plan on the probe table ``df``, Success-DU on
    the probed and held-out forms (:func:`dukb.neural.metrics.recall.success_du_fields`), and the attacks' entries.

    Args:
        plan: the :class:`UnitPlan`; pred: the unlearned model's :class:`dukb.neural.probe.Predictor`; df: its
            probe table (pandas DataFrame).

    Returns:
        dict of the metrics' fields, ``success_du`` (and ``success_du_heldout``), and with attacks ``attacks``,
        ``recall_under_attack`` and ``forgotten_under_attack``.

    Source: Wu et al. 2025, Eq. 1-2 (recall, accuracy) and Definition 2 (Success-DU).
    """

    rctx = RowContext(
        plan.kb,
        plan.target,
        [list(s) for s in plan.sets],
        plan.sets_used,
        df,
        list(plan.forget_ids),
        plan.retain_ids,
        predictor=pred if plan.needs.model else None,
        seen_forms=plan.seen,
        heldout_forms=plan.heldout,
        heldout_before=plan.heldout_before,
        heldout_rule=plan.heldout_rule,
        closure=plan.closure,
        tie_break=plan.tie_break,
        known_before=plan.known_before,
    )
    fields: dict = {}
    for metric in plan.metrics:
        fields.update(metric.fn(rctx))
    fields.update(success_du_fields(plan.closure, plan.target, fields))
    if plan.attacks:
        fields.update(_attack_fields(plan, pred, df, fields))
    return fields


def _row(plan: UnitPlan, setting: dict, trace, fields: dict, seconds: tuple[float, float]) -> dict:
    """One result row, each field set once: the unit's, the setting's, the metrics', the timings, then the
    protocol's ``row_fields``."""
    m = plan.method
    return {
        "method": plan.label,
        "base_method": m.name,
        **({"method_options": m.option_values} if m.option_values else {}),
        "scope": plan.scope,
        "forget_set": list(plan.forget_ids),
        "retain_fact_ids": plan.retain_ids,
        "probe_forms_seen": list(plan.seen),
        "heldout_forms": list(plan.heldout),
        "param": m.param,
        "setting": setting,
        "target": plan.target,
        **fields,
        **({"trace": trace} if trace is not None else {}),
        "seconds_unlearn": round(seconds[0], 4),
        "seconds_probe": round(seconds[1], 4),
        **plan.row_fields,
    }


def sweep_target(plan: UnitPlan) -> Iterator[dict]:
    """Run the plan's method over its grid on its target and yield one result row per setting: the sweep, probe
    and metric stages of the protocol, streamed setting by setting (each stage only consumes the previous one's
    output: (setting, predictor) → probe table → metric fields).

    Args:
        plan: the :class:`UnitPlan` (resolved once; nothing is re-checked here).

    Yields:
        dict rows: method (the plan's label), base_method, method_options (when given), scope, forget_set,
        retain_fact_ids, probe_forms_seen (the forms of the items the method trained on and of its in-loop
        probes), heldout_forms, param, setting, target, the metrics' fields (recall: recall,
        accuracy_relationships, accuracy_biographies, accuracy_all, best_set, sets_used, n_sets, target_forgotten,
        forgotten_relationships, forgotten_biographies, n_scored, ...), success_du (and success_du_heldout with
        ``recall_heldout``: Wu et al. 2025, Definition 2), ``trace`` (a method's per-target diagnostics, e.g.
        CL-DU's rounds run and trained facts; absent for methods without one), ``utility`` (with the plan's
        ``utility`` hook: lm-eval's scores per task, or None), seconds_unlearn, seconds_probe,
        then the plan's ``row_fields``.

    Source: Wu et al. 2025, Sec. 4 (protocol), Eq. 1-2 (metrics).
    """
    if plan.attacks:  # a setting the model cannot take (quant4's group) is refused before anything is unlearned
        check_attacks_on_model(plan.attacks, plan.lm.model, plan.kb)
    ctx = UnlearnContext(
        plan.lm,
        list(plan.forget),
        list(plan.retain),
        seed=plan.seed,
        lr=plan.lr,
        lora=plan.lora,
        layers=plan.layers,
        kb=plan.kb,
        closure=plan.closure,
        target=plan.target,
        sets=[list(s) for s in plan.sets],
        items=list(plan.loop_items),
        schedule=plan.schedule,
        reinforce=plan.reinforce,
    )
    t0 = time.perf_counter()
    last = None
    for setting, pred in plan.method.sweep(ctx, None if plan.grid is None else list(plan.grid)):
        t1 = time.perf_counter()
        setting = dict(setting)
        trace = setting.pop("trace", None)  # per-target diagnostics: not part of the setting (the curve's key)
        state = pred.meta.get("weights_version")  # a method that says its weights did not change since the last
        if state is not None and last is not None and last[0] == state:  # setting (a stopped closed loop)
            df = last[1]  # is probed once: the same weights give the same table
        else:
            df = _probe_setting(pred, list(plan.probed), list(plan.pair_items), plan.needs, plan.batch_size)
        last = (state, df)
        t2 = time.perf_counter()
        fields = score_setting(plan, pred, df)
        if plan.utility is not None:  # lm-eval on the setting's model (Wu et al. 2025, Table 7)
            fields["utility"] = plan.utility(pred)
        row = _row(plan, setting, trace, fields, (t1 - t0, t2 - t1))
        yield row
        if plan.keep_model is not None:  # the row is written; the weights are still the setting's
            plan.keep_model(row, pred)
        t0 = time.perf_counter()
