"""What a metric is: a plain function registered by name, with what it needs declared up front.

Evaluate computes only the metrics asked for (``--metrics``), and probing computes only what those metrics need
(:func:`combined_needs`): greedy generations, ROUGE-L, answer log-probabilities. Two levels:

- ``row`` metrics turn one unlearned model's probe table into fields of its result row
  (``fn(ctx: RowContext) -> dict``);
- ``summary`` metrics turn the result rows of a run into per-method figures (``fn(df) -> {method: {field: value}}``).

In the spirit of open-unlearning's ``@unlearning_metric`` registry (Dorna et al. 2025).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Needs:
    """What a metric needs from probing and from the run.

    Attributes:
        kinds: probe kinds whose items must be probed ("qa" is the paper's question form).
        generate: greedy generations and the known/unknown judgement.
        rouge: ROUGE-L recall of each output against its answer (implies ``generate``).
        logprob: the length-normalised log-probability of each gold answer (one extra forward pass).
        reference: a reference model (e.g. f_retrain) is probed too.
        model: the metric scores the unlearned model itself (``RowContext.predictor``: membership inference,
            continuations), beyond the probe table.
        splits: fact splits it reads (e.g. "forget", "retain", "holdout").
        requires: other metrics whose fields it reads (summary metrics).
    """

    kinds: tuple[str, ...] = ("qa",)
    generate: bool = False
    rouge: bool = False
    logprob: bool = False
    reference: bool = False
    model: bool = False
    splits: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()


@dataclass(frozen=True)
class Metric:
    """A registered metric.

    Attributes:
        name: registry name (``--metrics NAME``).
        fn: the function (see the module docstring for its signature per level).
        needs: :class:`Needs`.
        level: "row" or "summary".
        fields: the row or summary fields it writes.
        summary: one line for help texts.
        source: paper and equation.
    """

    name: str
    fn: Callable
    needs: Needs
    level: str
    fields: tuple[str, ...]
    summary: str
    source: str


@dataclass
class RowContext:
    """What a row metric sees about one unlearned model.

    Attributes:
        kb: the :class:`dukb.kb.KB`.
        target: the target's relationship fact_id.
        sets: the target's minimal deep unlearning sets (lists of fact_ids) and ``sets_used``
            ("exact"|"random"|"paper").
        probe: the probe table (pandas DataFrame, :func:`dukb.neural.probe.probe` columns; absent columns were not
            needed).
        forget_ids: relationship fact_ids the method was asked to forget.
        retain_ids: {"relationships": [...], "biographies": [...]}: facts a method trained on as retain data.
        predictor: the unlearned model's :class:`dukb.neural.probe.Predictor`, for metrics whose ``Needs.model``
            is set (None otherwise).
        seen_forms: the probe forms the method trained on or queried (tuple of :data:`dukb.kb.probes.KINDS`).
        heldout_forms: the forms the row is also scored on, disjoint from ``seen_forms`` (empty: not scored).
        heldout_before: the (form, fact kind, fact_id) triples that elicited their fact before unlearning (None: no
            baseline; :mod:`dukb.neural.metrics.heldout`).
        heldout_rule: with a baseline, "pairs" (a fact is known while a form that elicited it before still does)
            or "any" (while any held-out form does); :data:`dukb.neural.metrics.heldout.HELDOUT_RULES`.
        closure: the run's :class:`dukb.solver.closure.Closure` (None when the caller has none): metrics that need the
            target's cone use it, so they follow the run's rules.
        tie_break: "accuracy" or "first": which set tied on recall scores the accuracies
            (:func:`dukb.solver.metrics.recall_accuracy`).
        known_before: the (fact kind, fact_id) pairs the model knew before unlearning on the qa form (``dukb
            evaluate --no-finetune``, :mod:`dukb.neural.known`); a fact outside it is unscorable: never forgotten,
            left out of recall and accuracy. None (default): every fact is scored.
    """

    kb: object
    target: int
    sets: list
    sets_used: str
    probe: object
    forget_ids: list[int]
    retain_ids: dict = field(default_factory=lambda: {"relationships": [], "biographies": []})
    predictor: object = None
    seen_forms: tuple = ("qa",)
    heldout_forms: tuple = ()
    heldout_before: frozenset | None = None
    heldout_rule: str = "pairs"
    closure: object = None
    tie_break: str = "accuracy"
    known_before: frozenset | None = None


def combined_needs(metrics) -> Needs:
    """The union of several metrics' needs (``rouge`` implies ``generate``)."""
    kinds: list[str] = []
    for m in metrics:
        kinds += [k for k in m.needs.kinds if k not in kinds]
    gen = any(m.needs.generate or m.needs.rouge for m in metrics)
    return Needs(
        kinds=tuple(kinds),
        generate=gen,
        rouge=any(m.needs.rouge for m in metrics),
        logprob=any(m.needs.logprob for m in metrics),
        reference=any(m.needs.reference for m in metrics),
        model=any(m.needs.model for m in metrics),
        splits=tuple(sorted({s for m in metrics for s in m.needs.splits})),
    )


__all__ = ["Metric", "Needs", "RowContext", "combined_needs"]
