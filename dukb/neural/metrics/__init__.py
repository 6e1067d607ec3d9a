"""The metric registry: every metric dukb computes, registered explicitly by name with what it needs.

Row metrics (one value set per unlearned model, written into its result row): ``recall`` (recall and accuracy of
deep unlearning, Wu et al. 2025 Eq. 1-2), ``recall_heldout`` (the same judged only on probe forms the method never
trained on or queried), ``recall_under_attack`` (the same when any QA or RWKU adversarial
probe may elicit a fact), ``rouge_l`` (ROUGE-L of QA answers, forget vs other facts) and
``logprob`` (answer log-probability, forget vs other facts), MUSE's ``knowmem`` and ``verbmem``, RWKU's
``rwku_rouge`` and ``mia_fm_rm``, and Unlearning with Control's ``ps_exact``, ``ps_perturb`` and ``ps_similar``. PrivLeak needs f_retrain, which only `dukb muse` trains. Summary metrics (per method, over a run's rows):
``tradeoff`` (Acc@Recall≥0.8, Recall@Acc≥0.8, AR-AUC; Table 1) and ``acc_at_superficial`` (Table 2).

The registry is :data:`dukb.neural.catalog.METRICS` (lazy: each metric's module is imported on first use), and
one registry serves every protocol: evaluate, rwku, muse and control look their metrics up by name
(:func:`get_metric`) and call them. Adding a metric: a module with its plain function and a
:class:`~dukb.neural.metrics.base.Metric` constant, plus one :class:`dukb.neural.catalog.MetricEntry` line in
:data:`METRICS`. Evaluate computes only the metrics asked for (``--metrics``) and probing only what they
need (:func:`~dukb.neural.metrics.base.combined_needs`).
"""

from __future__ import annotations

from collections.abc import Callable

from dukb import InputError
from dukb.neural.catalog import DEFAULT_METRICS, METRICS, metrics_table
from dukb.neural.catalog import metrics_help as catalog_metrics_help
from dukb.neural.metrics.base import Metric, Needs, RowContext, combined_needs
from dukb.neural.registry import import_target


def get_metric(name: str) -> Metric:
    """The registered metric called ``name``.

    Raises:
        InputError: unknown metric (lists the registered ones).
    """
    key = name.strip().lower()
    if key not in METRICS:
        raise InputError(f"unknown metric {name!r} (choose from {', '.join(METRICS)})")
    return METRICS[key]


def metric_call(metric: str, call: str) -> Callable:
    """A registered metric's protocol-level computation, looked up by name (imported on first use): how `dukb
    rwku`, `dukb muse` and `dukb control` compute their metrics through the one registry, each with its own
    arguments (e.g. ``metric_call("ps_exact", "vector")(pred, forget, retain, para, search=...)``).

    Args:
        metric: a :data:`METRICS` name.
        call: one of its entry's ``calls`` (:class:`dukb.neural.catalog.MetricEntry`).

    Raises:
        InputError: an unknown metric; KeyError: a call the metric does not declare (names its calls).
    """
    calls = METRICS.entry(get_metric(metric).name).calls
    if call not in calls:
        raise KeyError(f"metric {metric!r} has no call {call!r} (its calls: {', '.join(calls) or 'none'})")
    return import_target(calls[call])


def parse_metrics(names) -> list[Metric]:
    """Resolve metric names (a comma-separated string or a list), adding the metrics they require, in registry
    order.

    Raises:
        InputError: unknown metric.
    """
    if isinstance(names, str):
        names = [n for n in names.split(",") if n.strip()]
    wanted = {get_metric(n).name for n in names}
    todo = list(wanted)
    while todo:
        for r in METRICS[todo.pop()].needs.requires:
            if r not in wanted:
                wanted.add(r)
                todo.append(r)
    return [m for name, m in METRICS.items() if name in wanted]


def row_metrics(metrics=None) -> list[Metric]:
    """The row-level metrics among ``metrics`` (default: all registered)."""
    return [m for m in (metrics if metrics is not None else METRICS.values()) if m.level == "row"]


def summary_metrics(metrics=None) -> list[Metric]:
    """The summary-level metrics among ``metrics`` (default: all registered)."""
    return [m for m in (metrics if metrics is not None else METRICS.values()) if m.level == "summary"]


def metrics_help() -> str:
    """One line listing the registered metrics for ``--help``, from the registry's entries
    (:func:`dukb.neural.catalog.metrics_help`)."""
    return catalog_metrics_help()


__all__ = [
    "DEFAULT_METRICS",
    "METRICS",
    "Metric",
    "Needs",
    "RowContext",
    "combined_needs",
    "get_metric",
    "metric_call",
    "metrics_help",
    "metrics_table",
    "parse_metrics",
    "row_metrics",
    "summary_metrics",
]
