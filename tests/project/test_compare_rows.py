"""bench/compare_rows.py, the check behind issue 40's proof that a refactor changes no row: two captures with the same
rows (in another order, with other timings, workers and folder paths) are equal; one changed measurement is reported
with its file, row key and field, and the exit status is 1."""

import importlib.util
import json
import math
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cr():
    spec = importlib.util.spec_from_file_location("compare_rows", ROOT / "bench" / "compare_rows.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _row(target, steps, recall, seconds, worker, out):
    return {
        "target": target,
        "method": "ga",
        "param": "steps",
        "setting": {"steps": steps, "lr": 0.001},
        "recall": recall,
        "forget_set": [target],
        "seconds_unlearn": seconds,
        "worker": worker,
        "model": f"{out}/demo_model",
    }


def _capture(root: Path, rows, summary, snapshot, seconds, worker):
    """A capture folder as bench/capture_rows.sh writes one: a run's rows and summary, an attack row, a snapshot."""
    (root / "evaluate").mkdir(parents=True)
    (root / "attack").mkdir()
    (root / "checkout.txt").write_text(f"/src/{root.name}\nabc123\n")
    lines = [json.dumps(_row(t, s, r, seconds, worker, root)) for t, s, r in rows]
    (root / "evaluate" / "results.jsonl").write_text("\n".join(lines) + "\n")
    (root / "evaluate" / "summary.csv").write_text(
        "method,metric,value,seconds_total\n" + "".join(f"ga,{m},{v},{seconds}\n" for m, v in summary)
    )
    (root / "attack" / "row.json").write_text(
        json.dumps(
            {
                "target": 6,
                "recall": 0.5,
                "attacks": {"relearn": {"recall": 1.0, "seconds": seconds}},
                "reference": f"/src/{root.name}/x",
            }
        )
    )
    (root / "method_snapshot.json").write_text(json.dumps(snapshot))
    return root


ROWS = [(6, 1, 0.25), (6, 4, 0.5), (7, 1, float("nan"))]
SUMMARY = [("recall", "0.375"), ("acc_at_recall", "0.9")]
SNAP = {"ga/separate": [['{"steps": 1}', "a1b2", "[1.5, 0.25]"]], "ga/oc": "ValueError('x')"}


def test_equal_captures_compare_equal(cr, tmp_path, capsys):
    a = _capture(tmp_path / "a", ROWS, SUMMARY, SNAP, 1.5, "vm:1")
    b = _capture(tmp_path / "b", ROWS[::-1], SUMMARY, SNAP, 9.25, "vm:2")  # other order, timings, worker, folders
    assert cr.compare(a, b) == []
    assert cr.main([str(a), str(b)]) == 0
    assert capsys.readouterr().out.startswith("equal: 4 files compared")


def test_a_changed_field_is_reported_with_its_run_key_and_field(cr, tmp_path, capsys):
    a = _capture(tmp_path / "a", ROWS, SUMMARY, SNAP, 1.5, "vm:1")
    changed = [(6, 1, 0.25), (6, 4, 0.5 + 2**-52), (7, 1, float("nan"))]  # one float off by one ulp
    b = _capture(
        tmp_path / "b",
        changed,
        [("recall", "0.375"), ("acc_at_recall", "0.90")],
        {**SNAP, "ga/oc": "ValueError('y')"},
        1.5,
        "vm:1",
    )
    diffs = cr.compare(a, b)
    assert diffs == [
        "evaluate/results.jsonl: row [6, ga, 4] field recall: 0.5 before, 0.5000000000000002 after",
        "evaluate/summary.csv: line 3 [ga,acc_at_recall] column value: '0.9' before, '0.90' after",
        "method_snapshot.json: ga/oc: \"ValueError('x')\" before, \"ValueError('y')\" after",
    ]
    assert cr.main([str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "field recall" in out and out.strip().endswith("3 differences in 3 of 4 files")


def test_missing_rows_types_and_files_are_differences(cr, tmp_path):
    a = _capture(tmp_path / "a", ROWS, SUMMARY, SNAP, 1.5, "vm:1")
    b = _capture(tmp_path / "b", ROWS[:2], SUMMARY, SNAP, 1.5, "vm:1")
    (b / "attack" / "row.json").unlink()
    row = json.loads((b / "evaluate" / "results.jsonl").read_text().splitlines()[0])
    assert row["setting"]["steps"] == 1
    diffs = cr.compare(a, b)
    assert "attack/row.json: only before" in diffs
    assert "attack/row.json: only before" not in cr.compare(a, b, skip=("attack",))
    assert "evaluate/results.jsonl: row [7, ga, 1] only before" in diffs
    assert "evaluate/results.jsonl: 3 rows before, 2 after" in diffs
    assert not cr.same(1, 1.0) and not cr.same(True, 1) and cr.same(math.nan, float("nan"))


def test_timing_and_bookkeeping_fields_are_ignored_measurements_are_not(cr):
    for name in (
        "seconds_unlearn",
        "seconds",
        "worker",
        "timestamp",
        "dukb_version",
        "git_rev",
        "source_fingerprint",
        "run_dir",
        "model_path",
    ):
        assert cr.ignored(name), name
    for name in ("recall", "accuracy_all", "success_du", "target", "setting", "forget_set", "n_sets", "acc_at_recall"):
        assert not cr.ignored(name), name
