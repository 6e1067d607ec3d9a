"""A row must be possible: `dukb report` summarises no row that cannot come from the run.

A results.jsonl line that is a well-formed row but impossible for its run is a damaged line: named on stderr as
FILE:LINE with its reason, listed in report.md's "Damaged journal lines", and left out of summary.csv and report.md,
which equal those of the run without it. Forged here: a share out of [0, 1] (recall 1.5, -1 and 1e308, accuracy 2.0,
success_du 5; a ROUGE-L, AUC or probability of muse, rwku or control above 1), a target, method, swept parameter or grid value outside config.json's identity, a second row of a
key with other values (an identical one is kept once, noted), a row without ``recall`` when the run computes it, and
a JSON object giving a key twice. A resume (:class:`dukb.neural.run.journal.ResultsFile`) moves the forged lines it can
judge without the config aside.

Run directories are written by hand (no model is trained).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dukb.cli.main import main
from dukb.neural.protocols.evaluate.rows import EVALUATE_ROWS, evaluate_plan_check
from dukb.neural.run import files as run_files
from dukb.neural.run import journal as run_journal
from tests.cli.test_cli_ux import _write_run, evaluate_rows, muse_rows, rwku_rows

#: the plan of the hand-made run: evaluate_rows' two targets, GA over steps 1 and 2, the default metrics
IDENTITY = {
    "targets": [28, 31],
    "methods": {"ga": {"method": "ga", "param": "steps", "scope": "target", "grid": [1, 2]}},
    "metrics": ["recall", "tradeoff", "acc_at_superficial"],
}


def _forged(row: dict, **change) -> str:
    """``row`` with fields changed (a value of ... removes the field), as a JSON line."""
    out = {**row, **change}
    return json.dumps({k: v for k, v in out.items() if v is not ...})


def _cases() -> list[tuple[str, str]]:
    """(forged JSON line, the reason it must be reported with), each appended after evaluate_rows' 4 lines."""
    last = evaluate_rows()[-1]  # line 4: target 31, ga, steps 2
    first = evaluate_rows()[0]  # line 1: target 28, ga, steps 1
    return [
        (_forged(last, recall=1.5), "field recall: expected a share in [0, 1] or null, got 1.5"),
        (_forged(last, recall=-1), "field recall: expected a share in [0, 1] or null, got -1"),
        (_forged(last, recall=1e308), "field recall: expected a share in [0, 1] or null, got 1e+308"),
        (_forged(last, accuracy_all=2.0), "field accuracy_all: expected a share in [0, 1] or null, got 2.0"),
        (_forged(last, success_du=5), "field success_du: expected a share in [0, 1] or null, got 5"),
        (_forged(last, recall_heldout=1.01), "field recall_heldout: expected a share in [0, 1] or null, got 1.01"),
        (_forged(last, target=99, forget_set=[99]), "field target: 99 is not a target of the run (config.json)"),
        (_forged(last, method="npo"), 'field method: "npo" is not a method of the run (config.json)'),
        (_forged(last, param="lr"), 'field param: "lr" is not the swept parameter of ga (steps)'),
        (_forged(last, setting={"steps": 3, "lr": 0.001}), "field setting.steps: 3 is not in the grid of ga"),
        (_forged(last, recall=0.1), "another row for the key of line 4 (one row per key; differs in recall)"),
        (_forged(first, worker="elsewhere:1", seconds_unlearn=9.0), "a repeat of line 1 (the same row; kept once)"),
        (_forged(last, recall=...), "field recall: missing (the run computes it for every row)"),
        (_forged(last)[:-1] + ', "recall": 0.0}', 'not JSON: the key "recall" is given twice in one object'),
    ]


def _run(path: Path, extra: list[str]) -> Path:
    """A hand-made evaluate run with IDENTITY in config.json: evaluate_rows, then the ``extra`` lines."""
    run = _write_run(path, "evaluate", evaluate_rows(), config={"identity": IDENTITY})
    with open(run / "results.jsonl", "a", encoding="utf-8") as fh:
        fh.write("".join(line + "\n" for line in extra))
    return run


def _report(run: Path, capsys) -> tuple[int, str]:
    capsys.readouterr()
    rc = main(["report", str(run)])
    return rc, capsys.readouterr().err


def test_the_valid_rows_alone_render_clean(tmp_path, capsys):
    """The baseline the forged runs are compared with: every row of evaluate_rows is possible under IDENTITY."""
    assert _report(_run(tmp_path / "clean", []), capsys) == (0, "")


def test_every_forged_row_is_a_damaged_line_and_none_is_summarised(tmp_path, capsys):
    cases = _cases()
    run = _run(tmp_path / "run", [line for line, _ in cases])
    rc, err = _report(run, capsys)
    assert rc == 0, err
    assert "Traceback" not in err and "error" not in err
    path = run / "results.jsonl"
    for i, (_, reason) in enumerate(cases, 5):
        hit = [ln for ln in err.splitlines() if ln.startswith(f"dukb: warning: {path}:{i}: damaged journal line (")]
        assert len(hit) == 1 and reason in hit[0], (i, reason, err)
    assert len(err.splitlines()) == len(cases), err
    report = (run / "report.md").read_text()
    flat = " ".join(report.split())
    assert f"**Damaged journal lines.** {len(cases)} line(s) of results.jsonl hold no row" in flat
    for i, (_, reason) in enumerate(cases, 5):
        assert f"- line {i}: {reason}" in flat, (i, reason)
    clean = _run(tmp_path / "clean", [])
    assert _report(clean, capsys) == (0, "")
    assert (run / "summary.csv").read_text() == (clean / "summary.csv").read_text()
    assert report.startswith((clean / "report.md").read_text().rstrip("\n"))
    assert (run / "facts.csv").read_text() == (clean / "facts.csv").read_text()


@pytest.mark.parametrize("case", range(len(_cases())), ids=lambda i: _cases()[i][1][:40])
def test_each_forged_row_alone_leaves_the_numbers_of_the_valid_rows(case, tmp_path):
    """One forged line at a time, read as `dukb report` reads it: named with its reason, the rest kept intact."""
    line, reason = _cases()[case]
    run = _run(tmp_path / "run", [line])
    journal = run_journal.report_journal(
        run / "results.jsonl", EVALUATE_ROWS, config=json.loads((run / "config.json").read_text())
    )
    assert journal.rows == evaluate_rows()
    assert [(d.line, reason in d.reason) for d in journal.damaged] == [(5, True)], journal.damaged


def test_a_huge_recall_never_reaches_the_std(tmp_path, capsys):
    """Recall 1e308 (finite, out of range) on a key of its own: a damaged line, not an OverflowError."""
    row = _forged(evaluate_rows()[-1], recall=1e308, target=40, forget_set=[40])
    run = _write_run(tmp_path / "run", "evaluate", evaluate_rows())  # no identity: the range alone refuses it
    with open(run / "results.jsonl", "a", encoding="utf-8") as fh:
        fh.write(row + "\n")
    rc, err = _report(run, capsys)
    assert rc == 0 and "Traceback" not in err, err
    assert f"{run / 'results.jsonl'}:5: damaged journal line (field recall: expected a share in [0, 1]" in err


def test_without_an_identity_the_plan_is_not_checked(tmp_path):
    """A hand-made or older run without config.json's identity: rows are checked for range and keys only."""
    assert evaluate_plan_check({}) is None
    assert evaluate_plan_check({"identity": "x"}) is None
    check = evaluate_plan_check({"identity": {"targets": [28]}})
    assert check(evaluate_rows()[0]) is None
    assert check(evaluate_rows()[-1]) == "field target: 31 is not a target of the run (config.json)"


def test_a_resume_moves_forged_rows_aside(tmp_path):
    """ResultsFile on open (a resume): out-of-range rows, a second row of a key and duplicate JSON keys go to
    results.damaged.jsonl; the identical repeat too (its row is kept once); the valid rows stay as they were."""
    cases = [
        c
        for c in _cases()
        if not c[1].startswith(
            ("field target:", "field method:", "field param:", "field setting.", "field recall: missing")
        )
    ]
    run = _run(tmp_path / "run", [line for line, _ in cases])
    log: list[str] = []
    results = run_journal.ResultsFile(
        run / "results.jsonl", EVALUATE_ROWS.key, log=log.append, check=EVALUATE_ROWS.check()
    )
    assert results.rows == evaluate_rows()
    assert (run / "results.jsonl").read_text() == "".join(json.dumps(r) + "\n" for r in evaluate_rows())
    moved = [json.loads(x) for x in (run / run_journal.DAMAGED_NAME).read_text().splitlines()]
    assert [(m["line"], m["reason"]) for m in moved] == [(i, reason) for i, (_, reason) in enumerate(cases, 5)]
    assert len(log) == len(cases)


def test_json_problem_refuses_a_key_given_twice():
    assert run_files.json_problem('{"a": 1, "a": 1}')[1] == 'not JSON: the key "a" is given twice in one object'
    assert run_files.json_problem('{"a": {"b": 1, "b": 2}}')[1].startswith('not JSON: the key "b" is given twice')
    assert run_files.json_problem('{"a": 1, "b": [{"a": 2}]}') == ({"a": 1, "b": [{"a": 2}]}, "", None)


#: protocol -> (valid rows, forged lines after them with their reasons): a share out of range, a second row of a key
OTHERS = {
    "muse": (
        muse_rows,
        lambda r: [
            (_forged(r, knowmem_retain=1.5), "field knowmem_retain: expected a share in [0, 1] or null, got 1.5"),
            (_forged(r, mia_auc=-0.5), "field mia_auc: expected a share in [0, 1] or null, got -0.5"),
            (
                _forged(r, knowmem_forget=0.01),
                "another row for the key of line 12 (one row per key; differs in knowmem_forget)",
            ),
        ],
    ),
    "rwku": (
        rwku_rows,
        lambda r: [
            (_forged(r, rouge_forget_all=2.0), "field rouge_forget_all: expected a share in [0, 1] or null, got 2.0"),
            (_forged(r, recall=1e308), "field recall: expected a share in [0, 1] or null, got 1e+308"),
            (_forged(r, mia_auc_fm_rm={"loss": 7}), "field mia_auc_fm_rm.loss: expected a share in [0, 1] or null"),
            (_forged(r, recall=0.0), "another row for the key of line 6 (one row per key; differs in recall)"),
        ],
    ),
}


@pytest.mark.parametrize("protocol", sorted(OTHERS))
def test_forged_rows_of_other_protocols_are_not_summarised(protocol, tmp_path, capsys):
    rows_of, forged_of = OTHERS[protocol]
    rows = rows_of()
    cases = forged_of(rows[-1])
    run = _write_run(tmp_path / "run", protocol, rows, config={"select": "first_below_retrain"})
    with open(run / "results.jsonl", "a", encoding="utf-8") as fh:
        fh.write("".join(line + "\n" for line, _ in cases))
    rc, err = _report(run, capsys)
    assert rc == 0, err
    path = run / "results.jsonl"
    for i, (_, reason) in enumerate(cases, len(rows) + 1):
        hit = [ln for ln in err.splitlines() if ln.startswith(f"dukb: warning: {path}:{i}: damaged journal line (")]
        assert len(hit) == 1 and reason in hit[0], (i, reason, err)
    assert len(err.splitlines()) == len(cases), err
    clean = _write_run(tmp_path / "clean", protocol, rows, config={"select": "first_below_retrain"})
    assert _report(clean, capsys) == (0, "")
    assert (run / "summary.csv").read_text() == (clean / "summary.csv").read_text()
    assert (run / "report.md").read_text().startswith((clean / "report.md").read_text().rstrip("\n"))


# ------------------------------------------------------------------ every protocol's rows against its plan ------
def _control_rows() -> list[dict]:
    base = {"ratio": "1%", "forgotten_relationships": [], "forgotten_biographies": []}
    return [
        {**base, "control": "original", "method": None, "value": None},
        {**base, "control": "none", "method": "ga", "param": "steps", "value": 8.0},
        {**base, "control": "oc", "method": "ga", "param": "steps", "value": 1.0},
    ]


def _restor_rows() -> list[dict]:
    return [
        {"method": "ga", "targeted": False, "setting": {}, "rows": [{"correct": True, "label": "x", "answer": "y"}]}
    ]


#: protocol -> (its valid rows, the run's config.json, forged lines (changes of the first row) with their reasons)
PLANS = {
    "muse": (
        muse_rows,
        {
            "identity": {
                "requests": {"main": {}, "scale-1": {}, "sustain-1": {}},
                "methods": {"ga": {"method": "ga", "param": "steps", "grid": [1, 2]}},
            }
        },
        lambda rs: [
            (_forged(rs[0], request="other"), 'field request: "other" is not a request of the run'),
            (_forged(rs[2], method="npo"), 'field method: "npo" is not a method of the run'),
            (_forged(rs[2], setting={"steps": 7, "lr": 0.001}), "field setting.steps: 7 is not in the grid"),
        ],
    ),
    "rwku": (
        rwku_rows,
        {
            "identity": {
                "targets": [28, 31],
                "rwku": {"batch_sizes": [2]},
                "methods": {"ga": {"method": "ga", "param": "steps", "grid": [1]}},
            }
        },
        lambda rs: [
            (_forged(rs[0], request="target-99"), 'field request: "target-99" is not a request'),
            (_forged(rs[0], request="batch-3", request_kind="batch"), 'field request: "batch-3"'),
            (_forged(rs[1], method="npo"), 'field method: "npo" is not a method of the run'),
        ],
    ),
    "control": (
        _control_rows,
        {"identity": {"ratios": {"1%": {}}, "controls": {"oc": {}}, "methods": {"ga": {}}}},
        lambda rs: [
            (_forged(rs[0], ratio="5%"), 'field ratio: "5%" is not a ratio of the run'),
            (_forged(rs[2], control="es"), 'field control: "es" is not a control of the run'),
            (_forged(rs[2], method="npo"), 'field method: "npo" is not a method of the run'),
        ],
    ),
    "restor": (
        _restor_rows,
        {"identity": {}, "history": [{"methods": ["ga"]}]},
        lambda rs: [(_forged(rs[0], method="npo"), 'field method: "npo" is not a method of the run')],
    ),
}


@pytest.mark.parametrize("protocol", sorted(PLANS))
def test_rows_a_run_cannot_hold_are_damaged_for_every_protocol(protocol, tmp_path):
    """muse, rwku, control and restor rows are checked against the run's config.json as evaluate's are: a request,
    ratio, control, method or grid value the run does not plan is a damaged line (FILE:LINE and reason) of the report,
    and a resume moves it aside; the run's own rows stay, and without the config nothing is refused."""
    from dukb.neural.protocols import get_protocol

    schema = get_protocol(protocol).load("rows")
    rows_of, config, forged = PLANS[protocol]
    rows = rows_of()
    bad = forged(rows)
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "".join(line + "\n" for line, _ in bad))
    assert len(run_journal.read_journal(path, schema.key, schema.check()).rows) == len(rows) + len(bad)
    journal = run_journal.report_journal(path, schema, config=config)
    assert journal.rows == rows
    assert [(d.line, reason in d.reason) for d, (_, reason) in zip(journal.damaged, bad)] == [
        (i, True) for i in range(len(rows) + 1, len(rows) + len(bad) + 1)
    ], journal.damaged
    assert len(journal.damaged) == len(bad)
    results = run_journal.ResultsFile(path, schema.key, log=[].append, check=schema.check(config))  # a resume
    assert results.rows == rows and path.read_text() == "".join(json.dumps(r) + "\n" for r in rows)
    moved = [json.loads(x) for x in (tmp_path / run_journal.DAMAGED_NAME).read_text().splitlines()]
    assert [m["line"] for m in moved] == list(range(len(rows) + 1, len(rows) + len(bad) + 1))
