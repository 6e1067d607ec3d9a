"""Run directories against planted files, strict integer options, and --targets-file ids at FILE:LINE.

- A FIFO, a symbolic link to /dev/zero or a directory planted in place of any file `dukb report` reads (each
  protocol's layout, written by hand) gives one line `dukb: error: FILE: ...` naming it and exit 2 within seconds;
  one planted in place of an output (summary.csv, report.md, a figure) is replaced, a directory there is refused.
- `dukb evaluate --resume` and `dukb rwku --resume` on a run whose config.json or results.jsonl is a FIFO: the same.
- Integer options are `-?[0-9]+` in ASCII: `1_0`, `+1`, ` 1`, `1.0` and full-width digits are usage errors.
- An unknown fact_id in --targets-file is reported at its line before any model loads.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path

import pytest

from conftest import DEVICE
from dukb.cli.main import main

#: seconds a command may take on a planted file (it must not block or read without end): a hang guard, generous so
#: that a render on a loaded machine (a muse report under three other jobs took over 20 s) does not trip it
WITHIN = 120.0


@contextlib.contextmanager
def watchdog(seconds: float = WITHIN):
    """Interrupt a command that blocks (a FIFO opened without a writer) instead of hanging the test run."""

    def expire(signum, frame):
        raise TimeoutError(f"still running after {seconds} s: a planted file blocked the command")

    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def run_cli(args: list[str], capsys) -> tuple[int, str, float]:
    """(exit code, stderr, seconds) of ``dukb ARGS`` run in this process under :func:`watchdog`."""
    capsys.readouterr()
    t0 = time.perf_counter()
    with watchdog():
        rc = main([str(a) for a in args])
    return rc, capsys.readouterr().err, time.perf_counter() - t0


def one_error_line(err: str) -> str:
    assert len(err.splitlines()) == 1 and err.startswith("dukb: error: ") and "Traceback" not in err, err
    return err


def plant(path: Path, kind: str) -> None:
    """Put a FIFO, a symbolic link to /dev/zero or a directory where ``path`` was."""
    if path.is_dir() and not path.is_symlink():
        path.rmdir()
    elif os.path.lexists(path):
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "devzero":
        os.symlink("/dev/zero", path)
    else:
        path.mkdir()


def no_model_loads(monkeypatch) -> None:
    """Make loading a model fail the test. The modules that bind ``load_model`` at import are imported first, so
    none keeps the stand-in after the test."""
    import dukb.neural.models as models
    import dukb.neural.pipeline as pipeline

    def no_load(*a, **k):
        raise AssertionError("a model was loaded")

    for module in (models, pipeline):
        monkeypatch.setattr(module, "load_model", no_load)


KINDS = ["fifo", "devzero", "dir"]


# ----------------------------------------------------------------------------------- hand-made run dirs -------
def _jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def _write(run: Path, files: dict[str, object]) -> Path:
    for name, doc in files.items():
        p = run / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return run


def evaluate_run(run: Path) -> Path:
    from tests.cli.test_cli_ux import evaluate_rows

    return _write(
        run,
        {
            "config.json": {"protocol": "evaluate", "kb": "kb", "model": "tiny", "seed": 0},
            "results.jsonl": _jsonl(evaluate_rows()),
            "finetune.json": {"epochs": 1},
            "results.damaged.jsonl": '{"file": "results.jsonl", "line": 9}\n',
        },
    )


def muse_run(run: Path) -> Path:
    from tests.cli.test_cli_ux import muse_rows

    return _write(
        run,
        {
            "config.json": {
                "protocol": "muse",
                "kb": "kb",
                "model": "tiny",
                "seed": 0,
                "select": "first_below_retrain",
            },
            "results.jsonl": _jsonl(muse_rows()),
        },
    )


def rwku_run(run: Path) -> Path:
    from tests.cli.test_cli_ux import rwku_rows

    return _write(
        run,
        {
            "config.json": {"protocol": "rwku", "kb": "kb", "model": "tiny", "seed": 0},
            "results.jsonl": _jsonl(rwku_rows()),
        },
    )


def control_run(run: Path) -> Path:
    return _write(
        run,
        {
            "config.json": {"protocol": "control", "kb": "demo", "seed": 0},
            "splits.json": {"forget": {}},
            "sets.json": {"targets": {}},
            "results.jsonl": _jsonl([{"x": 1}]),
        },
    )


def restor_run(run: Path) -> Path:
    return _write(
        run,
        {
            "config.json": {"protocol": "restor"},
            "results.jsonl": "",
            "probes/facts.jsonl": "",
            "probes/clean.json": {},
            "probes/corrupted.json": {},
            "clean/train.json": {},
            "corrupted/train.json": {},
        },
    )


#: protocol -> (writer of a run directory, the files `dukb report` reads there)
LAYOUTS = {
    "evaluate": (evaluate_run, ["config.json", "results.jsonl", "finetune.json", "results.damaged.jsonl"]),
    "muse": (muse_run, ["config.json", "results.jsonl"]),
    "rwku": (rwku_run, ["config.json", "results.jsonl"]),
    "control": (control_run, ["config.json", "splits.json", "sets.json", "results.jsonl"]),
    "restor": (
        restor_run,
        [
            "config.json",
            "results.jsonl",
            "probes/facts.jsonl",
            "probes/clean.json",
            "probes/corrupted.json",
            "clean/train.json",
            "corrupted/train.json",
        ],
    ),
}

CASES = [(protocol, name) for protocol, (_, names) in LAYOUTS.items() for name in names]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("protocol,name", CASES, ids=[f"{p}-{n}" for p, n in CASES])
def test_report_on_a_planted_file_is_one_line_exit_2(protocol, name, kind, tmp_path, capsys):
    run = LAYOUTS[protocol][0](tmp_path / "run")
    plant(run / name, kind)
    rc, err, seconds = run_cli(["report", run], capsys)
    assert rc == 2, err
    line = one_error_line(err)
    assert str(run / name) in line, line
    assert seconds < WITHIN


#: the files of CASES that `dukb report` parses as JSON and must refuse (results.damaged.jsonl is only listed)
JSON_CASES = [(p, n) for p, n in CASES if n != "results.damaged.jsonl"]


@pytest.mark.parametrize("protocol,name", JSON_CASES, ids=[f"{p}-{n}" for p, n in JSON_CASES])
def test_report_on_json_nested_too_deeply_is_one_line_exit_2(protocol, name, tmp_path, capsys):
    """``'[' * 100000 + ']' * 100000`` in a run file: json.loads raised RecursionError, which config.json's reader,
    read_json (finetune.json, control's splits.json and sets.json, restor's probes and train.json) and restor's
    facts.jsonl reader did not catch (a traceback). Every JSON read of a run file now goes through one helper
    (:func:`dukb.neural.run.files.loads_json`), as results.jsonl already did."""
    run = LAYOUTS[protocol][0](tmp_path / "run")
    text = "[" * 100000 + "]" * 100000
    (run / name).write_text(text + "\n" if name.endswith(".jsonl") else text)
    rc, err, seconds = run_cli(["report", run], capsys)
    assert rc == 2, err
    line = one_error_line(err)
    assert str(run / name) in line and "nested too deeply" in line, line
    assert seconds < WITHIN


@pytest.mark.parametrize("protocol", ["evaluate", "muse", "rwku"])
def test_the_hand_made_runs_render(protocol, tmp_path, capsys):
    """The layouts above are renderable as written: what fails in the test above is the planted file alone."""
    run = LAYOUTS[protocol][0](tmp_path / "run")
    rc, err, _ = run_cli(["report", run], capsys)
    assert rc == 0, err


OUTPUTS = {
    "evaluate": ["summary.csv", "report.md", "accuracy_recall.png"],
    "muse": ["summary.csv", "report.md", "mia_roc.png"],
    "rwku": ["summary.csv", "report.md", "aa_kinds.png"],
}


@pytest.mark.parametrize("kind", ["fifo"])  # a symbolic link there is refused: tests/run/test_run_tampering.py
@pytest.mark.parametrize("protocol", sorted(OUTPUTS))
def test_an_output_planted_as_a_fifo_is_replaced(protocol, kind, tmp_path, capsys):
    run = LAYOUTS[protocol][0](tmp_path / "run")
    for name in OUTPUTS[protocol]:
        plant(run / name, kind)
    rc, err, _ = run_cli(["report", run], capsys)
    assert rc == 0, err
    for name in OUTPUTS[protocol]:
        assert (run / name).is_file() and not (run / name).is_symlink() and (run / name).stat().st_size > 0


@pytest.mark.parametrize("name", ["summary.csv", "report.md"])
def test_an_output_planted_as_a_directory_is_one_line_exit_2(name, tmp_path, capsys):
    run = evaluate_run(tmp_path / "run")
    plant(run / name, "dir")
    rc, err, _ = run_cli(["report", run], capsys)
    assert rc == 2
    assert str(run / name) in one_error_line(err)


def test_restor_outputs_planted_as_fifos_are_cleared_before_rendering(tmp_path, capsys):
    """`dukb report` on a restor run removes a FIFO in the place of states.csv, summary.csv, report.md or a
    states_<METHOD>.png before its renderer writes them (the run here is incomplete, so rendering fails on its
    content, in one line, without blocking)."""
    run = restor_run(tmp_path / "run")
    for name in ("states.csv", "summary.csv", "report.md", "states_ga.png"):
        plant(run / name, "fifo")
    rc, err, _ = run_cli(["report", run], capsys)
    one_error_line(err)
    for name in ("states.csv", "summary.csv", "report.md", "states_ga.png"):
        assert not (run / name).exists() or (run / name).is_file()


# ----------------------------------------------------------------------------------- the run library ---------
@pytest.mark.parametrize("kind", KINDS)
def test_run_library_reads_are_bounded(kind, tmp_path):
    from dukb import InputError
    from dukb.neural.run import files as run_files
    from dukb.neural.run import identity as run_identity
    from dukb.neural.run import journal as run_journal

    for name, read in (
        ("config.json", lambda p: run_identity.open_run(p.parent, "evaluate", {})),
        ("results.jsonl", run_journal.read_journal),
        ("weights.bin", run_identity.sha256_file),
        ("x.json", run_files.read_json),
    ):
        p = tmp_path / name
        plant(p, kind)
        with watchdog(), pytest.raises(InputError) as e:
            read(p)
        assert str(p) in str(e.value)


def test_lock_file_planted_as_a_fifo_is_refused(tmp_path):
    from dukb import InputError
    from dukb.neural.run.files import LOCK_NAME, bookkeeping_path
    from dukb.neural.run.lock import claim_run, release_run

    run = tmp_path / "run"
    bookkeeping_path(run).mkdir(parents=True)
    os.mkfifo(bookkeeping_path(run, LOCK_NAME))
    with watchdog(), pytest.raises(InputError) as e:
        claim_run(run, "evaluate", {"identity_version": 2})
    release_run(run)
    assert "run.lock" in str(e.value) and "FIFO" in str(e.value)


def test_planted_damaged_file_and_temporary_names_do_not_block(tmp_path):
    """On resume the journal is repaired: results.damaged.jsonl planted as a FIFO is refused (no block), and the
    rewrite goes through a fresh temporary file (a FIFO at the old fixed name results.jsonl.tmp is not used)."""
    from dukb import InputError
    from dukb.neural.run.journal import ResultsFile

    run = tmp_path / "run"
    run.mkdir()
    os.mkfifo(run / "results.jsonl.tmp")
    (run / "results.jsonl").write_text('{"a": 1}\n{"a": 2')  # a torn last line: rewritten
    with watchdog():
        ResultsFile(run / "results.jsonl", key=lambda r: r["a"])
    assert (run / "results.jsonl").read_text() == '{"a": 1}\n'
    (run / "results.jsonl").write_text('{"a": 1}\nnot json\n{"a": 3}\n')  # a damaged line: moved aside
    os.mkfifo(run / "results.damaged.jsonl")
    with watchdog(), pytest.raises(InputError) as e:
        ResultsFile(run / "results.jsonl", key=lambda r: r["a"])
    assert "results.damaged.jsonl" in str(e.value)


# ------------------------------------------------------------------------------------------- --resume ---------
@pytest.mark.parametrize("name", ["config.json", "results.jsonl"])
def test_evaluate_resume_on_a_planted_file(name, tmp_path, capsys, monkeypatch):
    no_model_loads(monkeypatch)
    run = tmp_path / "run"
    run.mkdir()
    plant(run / name, "fifo")
    rc, err, _ = run_cli(
        ["evaluate", "--kb", "demo", "--n-targets", "1", "--methods", "ga", "--device", DEVICE, "-o", run, "--resume"],
        capsys,
    )
    assert rc == 2
    assert str(run / name) in one_error_line(err)


def test_rwku_resume_on_a_planted_config(tmp_path, capsys, monkeypatch):
    no_model_loads(monkeypatch)
    run = tmp_path / "run"
    run.mkdir()
    plant(run / "config.json", "devzero")
    rc, err, _ = run_cli(
        [
            "rwku",
            "--kb",
            "demo",
            "--n-targets",
            "1",
            "--batch-sizes",
            "",
            "--methods",
            "ga",
            "--device",
            DEVICE,
            "-o",
            run,
            "--resume",
        ],
        capsys,
    )
    assert rc == 2
    assert str(run / "config.json") in one_error_line(err)


# ---------------------------------------------------------------------------------------- integer options ----
BAD_INTS = ["1_0", "+1", " 1", "1.0", "\uff11\uff10", "1234567890123456789", "0x1", ""]


@pytest.mark.parametrize("value", BAD_INTS)
def test_integer_options_are_strict(value, capsys):
    rc, err, _ = run_cli(["mdus", "--kb", "demo", "--target-id", value], capsys)
    assert rc == 2
    line = one_error_line(err)
    assert "--target-id" in line


@pytest.mark.parametrize(
    "args,shown",
    [
        (["mdus", "--kb", "demo", "--target-id", "1", "--seed", "+1"], "'+1'"),
        (["mdus", "--kb", "demo", "--target-id", "1", "--max-sets", "1_0"], "'1_0'"),
        (["recall", "--kb", "demo", "--target-id", "\uff11"], "--target-id"),
        (["generate", "--people", "1_0", "-o", "unused"], "--people"),
        (["evaluate", "--n-targets", "+1"], "--n-targets"),
        (["evaluate", "--seed", "1.0"], "--seed"),
        (["evaluate", "--grid", "ga=1_0"], "'1_0' is not an integer"),
        (["evaluate", "--layers", "0-+1"], "--layers"),
        (["muse", "--scale-sizes", "1,+2"], "--scale-sizes"),
        (["rwku", "--batch-sizes", "2,1_0"], "--batch-sizes"),
        (["restor", "--kb", "demo", "-o", "run", "--unlearn-epochs", "all=1_0"], "'1_0' is not an integer"),
    ],
)
def test_every_integer_option_is_strict(args, shown, capsys, monkeypatch, tmp_path):
    no_model_loads(monkeypatch)
    monkeypatch.chdir(tmp_path)
    rc, err, _ = run_cli(args, capsys)
    assert rc == 2, err
    assert shown in one_error_line(err)
    assert not (tmp_path / "run").exists() and not (tmp_path / "unused").exists()


def test_strict_integers_still_accept_integers(capsys):
    rc, err, _ = run_cli(["mdus", "--kb", "demo", "--target-id", "007", "--seed", "-3"], capsys)
    assert rc == 0, err


def test_help_is_unchanged_by_strict_integers(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    capsys.readouterr()
    assert main(["mdus", "--help"]) == 0
    lines = {
        ln.split()[1]: ln
        for ln in capsys.readouterr().out.splitlines()
        if ln.startswith("│ ") and len(ln.split()) > 2 and ln.split()[1].startswith("--")
    }
    import typer

    if tuple(int(x) for x in typer.__version__.split(".")[:2]) >= (0, 29):
        assert lines["--target-id"].split()[2] == "<list[int]>"
        assert lines["--seed"].split()[2] == "<int>"
    else:  # older typer names the type of a list option by its items (0.26-0.28: <int>; 0.12: INTEGER)
        assert lines["--target-id"].split()[2] in ("<int>", "INTEGER")
        assert lines["--seed"].split()[2] in ("<int>", "INTEGER")


# ------------------------------------------------------------------------------------- --targets-file ids -----
@pytest.mark.parametrize("command", [["evaluate"], ["muse"], ["rwku"]])
def test_unknown_target_id_is_reported_at_its_line_before_a_model_loads(command, tmp_path, capsys, monkeypatch):
    no_model_loads(monkeypatch)
    targets = tmp_path / "targets.txt"
    targets.write_text("# targets\n1\n\n99999\n")
    rc, err, seconds = run_cli(
        [*command, "--kb", "demo", "--targets-file", targets, "--device", DEVICE, "-o", tmp_path / "run"], capsys
    )
    assert rc == 2
    line = one_error_line(err)
    assert f"{targets}:4:" in line and "99999" in line, line
    assert not (tmp_path / "run").exists()
