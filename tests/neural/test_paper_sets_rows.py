"""A row's recall fields follow the run's tie-break and sets label (no model): the recall metric and an attack
entry score the accuracies on the set the tie-break picks (Wu et al. 2025, Eq. 1-2; calculate_recall_and_acc.py's
first-set argmax with ``first``)."""

from __future__ import annotations

import pandas as pd
import pytest

from dukb.kb import load_kb
from dukb.neural.metrics.base import RowContext
from dukb.neural.metrics.recall import recall_metric


def probe_table(kb, forgotten_rel):
    rows = [
        {"fact_kind": "relationship", "fact_id": f.fact_id, "kind": "qa", "known": f.fact_id not in forgotten_rel}
        for f in kb.relationships
    ]
    rows += [{"fact_kind": "biography", "fact_id": b.fact_id, "kind": "qa", "known": True} for b in kb.biographies]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("tie_break, best, acc", [("first", [5, 6], 15 / 16), ("accuracy", [5, 7, 9, 10], 1.0)])
def test_recall_metric_uses_the_rows_tie_break(tie_break, best, acc):
    kb = load_kb("demo")
    sets = [[5, 6], [5, 7, 9, 10]]  # in this order; forgotten {5, 7}: both recall 1/2
    ctx = RowContext(kb, 5, sets, "paper", probe_table(kb, {5, 7}), [5], tie_break=tie_break)
    row = recall_metric(ctx)
    assert row["recall"] == 0.5 and row["ties"] == 2 and row["sets_used"] == "paper"
    assert row["best_set"] == best and row["accuracy_relationships"] == acc


def test_the_default_row_context_keeps_dukbs_tie_break():
    kb = load_kb("demo")
    ctx = RowContext(kb, 5, [[5, 6], [5, 7, 9, 10]], "exact", probe_table(kb, {5, 7}), [5])
    assert ctx.tie_break == "accuracy" and recall_metric(ctx)["best_set"] == [5, 7, 9, 10]
