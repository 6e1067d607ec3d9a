"""The metric registry: every metric dukb computes, registered explicitly by name with what it needs.

Row metrics (one value set per unlearned model, written into its result row): ``recall`` (recall and accuracy of
deep unlearning, Wu et al. 2025 Eq. 1-2), ``recall_heldout`` (the same judged only on probe forms the method never
trained on or queried), ``recall_under_attack`` (the same when any QA or RWKU adversarial
probe may elicit a fact), ``rouge_l`` (ROUGE-L of QA answers, forget vs other facts) and
``logprob`` (answer log-probability, forget vs other facts), MUSE's ``knowmem`` and ``verbmem``, RWKU's
``rwku_rouge`` and ``mia_fm_rm``, and Unlearning with Control's ``ps_exact``, ``ps_perturb`` and ``ps_similar``. PrivLeak needs f_retrain, which only `dukb muse` trains. Summary metrics (per method, over a run's rows):
``tradeoff`` (Acc@Recall≥0.8, Recall@Acc≥0.8, AR-AUC; Table 1) and ``acc_at_superficial`` (Table 2).

Adding a metric: a module with its plain function and a :class:`~dukb.neural.metrics.base.Metric` entry, plus one
line in :data:`METRICS`. Evaluate computes only the metrics asked for (``--metrics``) and probing only what they
need (:func:`~dukb.neural.metrics.base.combined_needs`).
"""

from __future__ import annotations

from dukb import InputError
from dukb.neural.metrics.attack import RECALL_UNDER_ATTACK
from dukb.neural.metrics.base import Metric, Needs, RowContext, combined_needs
from dukb.neural.metrics.heldout import RECALL_HELDOUT
from dukb.neural.metrics.muse import KNOWMEM, VERBMEM
from dukb.neural.metrics.ps import PS_EXACT, PS_PERTURB, PS_SIMILAR
from dukb.neural.metrics.recall import RECALL
from dukb.neural.metrics.rwku import MIA_FM_RM, RWKU_ROUGE
from dukb.neural.metrics.summary import ACC_AT_SUPERFICIAL, TRADEOFF
from dukb.neural.metrics.text import ANSWER_LOGPROB, ROUGE_L
from dukb.neural.tables import Table

#: Every metric, by registry name.
METRICS: dict[str, Metric] = {m.name: m for m in (RECALL, RECALL_HELDOUT, RECALL_UNDER_ATTACK, ROUGE_L, ANSWER_LOGPROB, KNOWMEM,
                                                  VERBMEM, RWKU_ROUGE, MIA_FM_RM, PS_EXACT, PS_PERTURB, PS_SIMILAR,
                                                  TRADEOFF, ACC_AT_SUPERFICIAL)}

#: What `dukb evaluate` computes without --metrics: the paper's protocol.
DEFAULT_METRICS = ("recall", "recall_heldout", "tradeoff", "acc_at_superficial")


def get_metric(name: str) -> Metric:
    """The registered metric called ``name``.

    Raises:
        InputError: unknown metric (lists the registered ones).
    """
    try:
        return METRICS[name.strip().lower()]
    except KeyError:
        raise InputError(f"unknown metric {name!r} (choose from {', '.join(METRICS)})") from None


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


def metrics_table() -> Table:
    """The metrics' reference table from the registry: name, level, fields, what it measures, source (`dukb
    methods`, the docs' reference/metrics page)."""
    return Table("Metrics", ("metric", "level", "fields", "what it measures", "source"),
                 tuple((m.name, m.level, ", ".join(m.fields), m.summary, m.source) for m in METRICS.values()),
                 "`dukb evaluate --metrics` takes these names (default: " + ", ".join(DEFAULT_METRICS) + "). A row "
                 "metric adds fields to every result row; a summary metric to summary.csv and the report.")


def metrics_help() -> str:
    """One line listing the registered metrics for ``--help``: the light catalog's
    (:func:`dukb.neural.catalog.metrics_help`)."""
    from dukb.neural.catalog import metrics_help as _help

    return _help()


__all__ = ["DEFAULT_METRICS", "METRICS", "Metric", "Needs", "RowContext", "combined_needs", "get_metric",
           "metrics_help", "metrics_table", "parse_metrics", "row_metrics", "summary_metrics"]
