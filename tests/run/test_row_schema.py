"""Results rows that are JSON but not rows, run-directory files read bounded, strict integers, and the run's log.

- A results.jsonl line that is valid JSON but not a row of its protocol (``{}``, a field of another type, a NaN, a
  bool where an integer belongs, a 5001-digit integer) is a damaged line: `dukb report` warns it as FILE:LINE with
  the reason, renders the other rows and lists it in report.md, for every protocol; a resume moves it aside.
- Every line damaged: one error line naming the first, exit 2.
- Ctrl-C's note before a run directory exists; count_rows on a FIFO; `dukb probe --kinds qa,,reverse`; a
  dukb_model.json with an unknown prompt; --grid / --layers integers; finetune.json read bounded.
- Library warnings (``warnings.warn``, transformers' loggers) go to RUN_DIR/run.log while a run is claimed.

Run directories are written by hand (no model is trained).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from dukb import InputError
from dukb.cli.main import main
from tests.cli.test_cli_ux import _write_run, evaluate_rows, muse_rows, rwku_rows

#: lines that are JSON but no row of any protocol, with the reason each must be reported with
NOT_ROWS = [
    ("{}", None),
    ('{"method": 5, "target": "x"}', 'field target: expected an integer, got "x"'),
    ('{"method": "ga", "recall": NaN}', "field recall: expected a number, got NaN"),
    ('{"target": 1' + "0" * 5000 + "}", "not JSON: an integer of more than 4300 digits"),
    ("[1, 2]", "not a JSON object"),
]


def _bad(row: dict, **change) -> str:
    """A row of a protocol with fields changed (a value of ... removes the field), as a JSON line."""
    out = {**row, **change}
    return json.dumps({k: v for k, v in out.items() if v is not ...})


#: protocol -> (valid rows, JSON lines that are not rows of it with their reasons)
CASES = {
    "evaluate": (
        evaluate_rows,
        lambda r: [
            (_bad(r, recall=float("nan")), "field recall: expected a number, got NaN"),
            (_bad(r, target=True), "field target: expected an integer, got true"),
            (_bad(r, target=10**30), "field target: expected an integer of at most 18 digits, got an integer of 31"),
            (_bad(r, accuracy_all="high"), 'field accuracy_all: expected a number or null, got "high"'),
            (_bad(r, setting={"lr": 0.001}), "field setting: no value of its param"),
            (_bad(r, target_forgotten=1), "field target_forgotten: expected true or false, got 1"),
            (_bad(r, target_relation=5), "field target_relation: expected a string or null, got 5"),
            (_bad(r, recall=float("inf")), "field recall: expected a number, got Infinity"),
        ],
    ),
    "muse": (
        muse_rows,
        lambda r: [
            (_bad(r, knowmem_retain=float("nan")), "field knowmem_retain: expected a number or null, got NaN"),
            (_bad(r, request=3), "field request: expected a string, got 3"),
            (_bad(r, model_kind="unlearned", method=None), "field method: expected a string, got null"),
            (_bad(r, items=[1]), "field items: expected an object, got a list"),
            (_bad(r, mia=None), "field mia: expected an object, got null"),
            (_bad(r, privleak="x"), 'field privleak: expected a number or null, got "x"'),
        ],
    ),
    "rwku": (
        rwku_rows,
        lambda r: [
            (_bad(r, rouge_forget_all=None), "field rouge_forget_all: expected a number, got null"),
            (_bad(r, request_kind="other"), 'field request_kind: expected "single" or "batch", got "other"'),
            (_bad(r, request_kind="batch", request="batch"), "field request: a batch request is named batch-N"),
            (_bad(r, setting=None), "field setting: expected an object, got null"),
            (_bad(r, mia_fm={"loss": "x"}), 'field mia_fm.loss: expected a number or null, got "x"'),
            (_bad(r, rouge_forget_aa_by_kind={"reverse": [1]}), "field rouge_forget_aa_by_kind.reverse"),
        ],
    ),
}


def _report(run: Path, capsys) -> tuple[int, str]:
    capsys.readouterr()
    rc = main(["report", str(run)])
    return rc, capsys.readouterr().err


def _warned(err: str, path: Path, line: int, reason: str | None) -> None:
    hit = [ln for ln in err.splitlines() if ln.startswith(f"dukb: warning: {path}:{line}: damaged journal line (")]
    assert len(hit) == 1, err
    assert reason is None or reason in hit[0], hit[0]


def _renders_but(run: Path, bad: list, first: int, capsys) -> str:
    """`dukb report RUN` exits 0 and warns each line of ``bad`` (from line ``first`` on) with its reason; returns
    report.md."""
    rc, err = _report(run, capsys)
    assert rc == 0, err
    for i, (_, reason) in enumerate(bad, first):
        _warned(err, run / "results.jsonl", i, reason)
    return (run / "report.md").read_text()


@pytest.mark.parametrize("protocol", sorted(CASES))
def test_json_lines_that_are_not_rows_are_damaged_lines_and_the_rest_renders(protocol, tmp_path, capsys):
    rows_of, bad_of = CASES[protocol]
    rows = rows_of()
    # the reasons of NOT_ROWS are evaluate's (another protocol misses another field first), but for not JSON
    bad = [(line, why if protocol == "evaluate" or (why or "").startswith("not ") else None) for line, why in NOT_ROWS]
    bad += bad_of(rows[-1])
    run = _write_run(tmp_path / "run", protocol, rows, config={"select": "first_below_retrain"})
    with open(run / "results.jsonl", "a", encoding="utf-8") as fh:
        fh.write("".join(line + "\n" for line, _ in bad))
    rc, err = _report(run, capsys)
    assert rc == 0, err
    assert "Traceback" not in err and "error" not in err
    path = run / "results.jsonl"
    for i, (_, reason) in enumerate(bad, len(rows) + 1):
        _warned(err, path, i, reason)
    assert len(err.splitlines()) == len(bad)
    report = (run / "report.md").read_text()
    assert f"**Damaged journal lines.** {len(bad)} line(s) of results.jsonl hold no row" in report
    assert f"- line {len(rows) + 3}: field recall: expected a number, got NaN" in report or protocol != "evaluate"
    # the valid rows are all there: the report is the one of the rows alone, plus the note
    clean = _write_run(tmp_path / "clean", protocol, rows, config={"select": "first_below_retrain"})
    assert _report(clean, capsys) == (0, "")
    assert report.startswith((clean / "report.md").read_text().rstrip("\n"))
    assert (run / "summary.csv").read_text() == (clean / "summary.csv").read_text()


@pytest.mark.parametrize("protocol", sorted(CASES))
def test_every_line_damaged_is_one_error_line_naming_the_first(protocol, tmp_path, capsys):
    run = _write_run(tmp_path / "run", protocol, [])
    (run / "results.jsonl").write_text('{"method": "ga", "recall": NaN}\n{}\n')
    rc, err = _report(run, capsys)
    assert rc == 2
    assert len(err.splitlines()) == 1 and err.startswith(f"dukb: error: {run / 'results.jsonl'}:1: "), err
    assert "no result row to render: all 2 lines damaged" in err


@pytest.mark.parametrize("key_name", ["evaluate", "muse", "rwku", "control", "restor"])
def test_a_resume_moves_a_line_that_is_not_a_row_aside(key_name, tmp_path):
    """ResultsFile with a protocol's rows (its ProtocolInfo's row key and row model) checks them: the NaN row goes
    to results.damaged.jsonl."""
    from dukb.neural.protocols import get_protocol
    from dukb.neural.run import journal as run_journal

    row = {
        "evaluate": evaluate_rows()[0],
        "muse": muse_rows()[0],
        "rwku": rwku_rows()[0],
        "control": {
            "ratio": "1%",
            "control": "original",
            "method": None,
            "value": None,
            "forgotten_relationships": [],
            "forgotten_biographies": [],
        },
        "restor": {
            "method": "ga",
            "targeted": False,
            "setting": {},
            "rows": [{"correct": True, "label": "true", "answer": "x"}],
        },
    }[key_name]
    schema = get_protocol(key_name).load("rows")
    path = tmp_path / "results.jsonl"
    field = {
        "evaluate": "recall",
        "muse": "knowmem_retain",
        "rwku": "rouge_forget_all",
        "control": "forgotten_relationships",
        "restor": "targeted",
    }[key_name]
    path.write_text(json.dumps(row) + "\n" + json.dumps({**row, field: float("nan")}) + "\n")
    log = []
    results = run_journal.ResultsFile(path, schema.key, log=log.append, check=schema.check())
    assert results.rows == [row]
    assert path.read_text() == json.dumps(row) + "\n"
    moved = [json.loads(x) for x in (tmp_path / run_journal.DAMAGED_NAME).read_text().splitlines()]
    assert [(m["line"], m["reason"].startswith(f"field {field}: expected")) for m in moved] == [(2, True)]
    assert len(log) == 1 and f"{path}:2: damaged journal line (field {field}" in log[0]


def test_a_control_report_keeps_its_valid_rows(tmp_path, capsys):
    """A control run (the demo KB): a row of a ratio splits.json lacks, a NaN value and a bool where a list of
    fact ids belongs are damaged lines; the others render."""
    base = {
        "ratio": "1%",
        "forget_fact_ids": [1],
        "forgotten_relationships": [],
        "forgotten_biographies": [],
        "ps_exact_retain": 0.9,
        "ps_exact_forget": 0.8,
        "ps_perturb_retain": 0.9,
        "ps_perturb_forget": 0.8,
        "ps_similar_retain": 0.9,
        "ps_similar_forget": 0.8,
        "confidence_retain": 0.5,
        "confidence_forget": 0.5,
    }
    rows = [
        {**base, "method": None, "control": "original", "value": None},
        {
            **base,
            "method": "ga",
            "control": "none",
            "param": "steps",
            "value": 8.0,
            "ps_exact_forget": 0.1,
            "risk_curve": {"unlearning_risk": [1.0, float("nan")], "loss_retain": None},
        },
    ]
    bad = [
        ({**rows[1], "ratio": "7%"}, 'field ratio: "7%" is not a ratio of splits.json'),
        ({**rows[1], "value": float("nan")}, "field value: expected a number, got NaN"),
        ({**rows[1], "forgotten_relationships": True}, "field forgotten_relationships: expected a list, got true"),
    ]
    run = _write_run(
        tmp_path / "run",
        "control",
        rows + [r for r, _ in bad],
        config={"kb": "demo", "methods": ["ga"], "controls": []},
        **{
            "splits.json": {"forget": {"1%": [1]}, "retain_eval": {"relationships": [], "biographies": []}},
            "sets.json": {"targets": {}},
        },
    )
    report = _renders_but(run, bad, 3, capsys)
    assert "| ga | none | steps=8 |" in report and "(lines 3, 4, 5)" in report


def _restor_run(run: Path, results: list) -> Path:
    from dukb.neural.restor.facts import FactProbe
    from dukb.neural.restor.files import write_facts

    facts = [
        FactProbe("relationship", 0, "Al Roe", "father", "Who is Al Roe's father?", "Fred Roe", "Gus Poe"),
        FactProbe("biography", 0, "Al Roe", "job", "What is the job of Al Roe?", "Banker"),
    ]
    probe = {
        "rows": [
            {"correct": True, "label": "true", "answer": "fred roe"},
            {"correct": True, "label": "true", "answer": "banker"},
        ]
    }
    (run / "probes").mkdir(parents=True)
    write_facts(run / "probes" / "facts.jsonl", facts)
    for name in ("clean", "corrupted"):
        (run / "probes" / f"{name}.json").write_text(json.dumps(probe))
    (run / "config.json").write_text(json.dumps({"protocol": "restor", "config": {}}))
    (run / "results.jsonl").write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in results))
    return run


def test_a_restor_report_keeps_its_valid_rows(tmp_path, capsys):
    good = {
        "method": "ga",
        "targeted": False,
        "setting": {"steps": 1},
        "rows": [
            {"correct": False, "label": "other", "answer": "x"},
            {"correct": True, "label": "true", "answer": "banker"},
        ],
    }
    bad = [
        ({**good, "rows": good["rows"][:1]}, "field rows: 1 fact rows, but probes/facts.jsonl holds 2 facts"),
        ({**good, "targeted": 1}, "field targeted: expected true or false, got 1"),
        ({**good, "rows": [{"correct": True}, {}]}, "field label: missing"),
        ({**good, "seconds_probe": float("inf")}, "field seconds_probe: expected a number or null, got Infinity"),
    ]
    run = _restor_run(tmp_path / "run", [good] + [b for b, _ in bad])
    report = _renders_but(run, bad, 2, capsys)
    assert "| GA |" in report and "(lines 2, 3, 4, 5)" in report


# ------------------------------------------------------------------------------------------- small ones --------
def test_the_interrupt_note_before_the_run_directory_exists(tmp_path):
    from dukb.cli.render import keep_rows_note

    run = tmp_path / "never" / "run"
    assert keep_rows_note(run)() == f"no result row was written to {run} yet"
    run.mkdir(parents=True)
    assert keep_rows_note(run)() == f"no result row was written to {run} yet"
    (run / "results.jsonl").write_text('{"a": 1}\n{"a": 2')
    assert keep_rows_note(run, "ADVICE")() == f"1 row is kept in {run / 'results.jsonl'}; ADVICE"


def test_count_rows_does_not_block_on_a_fifo(tmp_path):
    from dukb.cli.render import count_rows, keep_rows_note
    from tests.run.test_planted_run_files import watchdog

    os.mkfifo(tmp_path / "results.jsonl")
    with watchdog(10):
        assert count_rows(tmp_path / "results.jsonl") == 0
        assert keep_rows_note(tmp_path, "A")() == f"0 rows are kept in {tmp_path / 'results.jsonl'}; A"


@pytest.mark.parametrize("args", [["--kinds", "qa,,reverse"], ["--kinds", "qa,"], ["--scores", "rouge,,logprob"]])
def test_probe_refuses_an_empty_list_item(args, capsys):
    capsys.readouterr()
    assert main(["probe", "--model", "nowhere", *args]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "has an empty item" in err and args[0] in err, err


def test_an_unknown_prompt_in_a_model_record_names_the_file(tmp_path):
    from dukb.neural.modelrecord import MODEL_RECORD, spec_for_path

    (tmp_path / MODEL_RECORD).write_text(json.dumps({"prompt": "nonexistent", "family": None, "base": "x"}))
    with pytest.raises(InputError) as e:
        spec_for_path(tmp_path)
    assert str(e.value).startswith(f"{tmp_path / MODEL_RECORD}: ") and "unknown prompt preset" in str(e.value)


@pytest.mark.parametrize(
    "text,integer",
    [
        ("1_0", True),
        ("+1", True),
        ("１", True),
        ("1.0", True),
        ("1" * 19, True),
        ("nan", False),
        ("inf", False),
        ("1_0", False),
        ("+1", False),
        ("１", False),
    ],
)
def test_grid_values_are_strict(text, integer):
    from dukb.neural.methods.base import parse_grid

    with pytest.raises(InputError):
        parse_grid(f"1,{text}", integer=integer)


def test_grid_and_layers_accept_plain_numbers():
    from dukb.neural.methods.base import parse_grid
    from dukb.neural.runconfig import parse_layers

    assert parse_grid("1, 4,007", integer=True) == [1, 4, 7]
    assert parse_grid("0.5,1e-3,2", integer=False) == [0.5, 1e-3, 2.0]
    assert parse_layers("0-3") == (0, 3) and parse_layers("5") == (5, 5) and parse_layers(None) is None
    for bad in ("1_0", "+1-3", "0-+3", "１-2", "a-b", "3-1"):
        with pytest.raises(InputError):
            parse_layers(bad)


@pytest.mark.parametrize("content", ["fifo", "[1]", "{oops"])
def test_finetune_record_is_read_bounded(content, tmp_path):
    from dukb.neural.pipeline import finetune_record
    from tests.run.test_planted_run_files import watchdog

    assert finetune_record(tmp_path) is None
    if content == "fifo":
        os.mkfifo(tmp_path / "finetune.json")
    else:
        (tmp_path / "finetune.json").write_text(content)
    with watchdog(10), pytest.raises(InputError) as e:
        finetune_record(tmp_path)
    assert str(tmp_path / "finetune.json") in str(e.value)


# ---------------------------------------------------------------------------------------------- run.log --------
def test_library_warnings_go_to_the_run_log_while_a_run_is_claimed(tmp_path):
    """In a fresh process (so no earlier test's warning setup counts): a ``warnings.warn`` and a transformers
    logger's warning while the run is claimed land in RUN_DIR/run.log with their logger names, not on stderr; after
    the release the handler is gone. (``quiet_libraries`` is what loading a model runs first.)"""
    run = tmp_path / "run"
    script = textwrap.dedent(f"""
        import logging, warnings
        from transformers.utils import logging as tlog
        from dukb.neural.models import quiet_libraries
        from dukb.neural.run.lock import claim_run, release_run
        quiet_libraries()
        claim_run({str(run)!r}, "evaluate", {{"identity_version": 2}})
        warnings.warn("planted python warning", UserWarning)
        tlog.get_logger("transformers.modeling_utils").warning("planted transformers warning")
        logging.getLogger("peft").info("an info line is not kept")
        release_run({str(run)!r})
        assert not [h for h in logging.getLogger().handlers if "run.log" in str(getattr(h, "baseFilename", ""))]
        print("ok")
    """)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "default"}
    p = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300, cwd=REPO_ROOT
    )
    assert p.returncode == 0 and p.stdout == "ok\n", p.stderr
    assert "planted" not in p.stderr, p.stderr
    log = (run / "run.log").read_text()
    assert " WARNING py.warnings: " in log and "UserWarning: planted python warning" in log
    assert " WARNING transformers.modeling_utils: planted transformers warning" in log
    assert "info line" not in log


def test_a_run_log_that_cannot_be_written_is_one_line(tmp_path, capsys):
    import logging

    from dukb.neural.run.log import attach_run_log, detach_run_log
    from tests.run.test_planted_run_files import watchdog

    os.mkfifo(tmp_path / "run.log")
    handler = attach_run_log(tmp_path)
    try:
        with watchdog(10):
            logging.getLogger("peft").warning("one")
            logging.getLogger("peft").warning("two")
    finally:
        detach_run_log(handler)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"dukb: warning: {tmp_path / 'run.log'}: not a regular file"), err


def test_report_names_the_units_without_a_row(tmp_path, capsys):
    """`dukb report` on an evaluate run whose identity has more (target, method, value) units than rows: it renders
    the rows present and says, on stderr and in report.md, which units are missing."""
    from dukb.neural.protocols.evaluate.rows import missing_units

    rows = evaluate_rows()
    identity = {"targets": [28, 31, 40], "methods": {"ga": {"method": "ga", "grid": [1, 2, 4]}}}
    assert missing_units(identity, rows) == [
        (28, "ga", 4.0),
        (31, "ga", 4.0),
        (40, "ga", 1.0),
        (40, "ga", 2.0),
        (40, "ga", 4.0),
    ]
    run = _write_run(tmp_path / "run", "evaluate", rows, config={"identity": identity})
    assert main(["report", str(run)]) == 0
    err = capsys.readouterr().err
    assert "5 units have no row yet (target, method, setting): (28, ga, 4), (31, ga, 4), (40, ga, 1)" in err
    assert "5 (target, method, setting) units of the run have no row yet" in (run / "report.md").read_text()
    # complete: no note
    assert missing_units({"targets": [28, 31], "methods": {"ga": {"grid": [1, 2]}}}, rows) == []
