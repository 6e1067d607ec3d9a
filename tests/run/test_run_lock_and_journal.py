"""One writer per run directory and a journal that never drops a valid row silently (issue: hardening).

- the lock (RUN_DIR/.dukb/run.lock, :func:`dukb.neural.run.lock.claim_run`): a second process with other settings is refused
  at once with one line naming the directory and the holder; one with the same settings and more targets waits,
  then resumes; an evaluate with exactly the same settings joins the live run as another worker
  (tests/run/test_work_units.py); a SIGKILLed holder's lock is gone;
- results.jsonl: a damaged middle line is reported with its line number, the valid rows after it are kept, a resume
  moves it to results.damaged.jsonl; `dukb report` renders the valid rows and mentions it;
- every run records its threads and library versions.

Cheap: the lock is tested on :func:`claim_run` with holder processes that only lock; the CLI case is one
`dukb evaluate --finetuned` on a 1-epoch tiny model of a 12-person KB (one target, two settings).
"""

from __future__ import annotations

import inspect
import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import DEVICE  # noqa: E402
from dukb.neural.protocols.evaluate.rows import EVALUATE_ROWS
from dukb.neural.run.files import LOCK_NAME, bookkeeping_path
from dukb.neural.run.identity import IDENTITY_VERSION, RunIdentityError
from dukb.neural.run.journal import DAMAGED_NAME, ResultsFile, read_journal, read_results
from dukb.neural.run.lock import claim_run, holds_run_lock, release_run
from dukb.neural.run.provenance import provenance

ID = {
    "identity_version": IDENTITY_VERSION,
    "kb": "abc",
    "lr": None,
    "targets": [1, 2],
    "methods": {"ga": {"grid": [1, 2]}},
}
EXT = ("targets", "methods")

HOLDER = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from dukb.neural.run.files import write_json_atomic
    from dukb.neural.run.lock import claim_run
    run, identity, hold = Path(sys.argv[1]), json.loads(sys.argv[2]), float(sys.argv[3])
    merged, added, old = claim_run(run, "evaluate", identity, extendable=("targets", "methods"))
    write_json_atomic(run / "config.json", {"protocol": "evaluate", "identity": merged})
    print("held", flush=True)
    time.sleep(hold)
""")


def _holder(run: Path, identity: dict, hold: float) -> subprocess.Popen:
    """A process that claims ``run`` with ``identity``, writes its config.json and holds the lock ``hold`` s."""
    p = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(run), json.dumps(identity), str(hold)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert p.stdout.readline().strip() == "held", p.stderr.read()
    return p


def _stop(p: subprocess.Popen) -> None:
    if p.poll() is None:
        p.kill()
    p.wait()


# ------------------------------------------------------------------------------------------------ the lock ------
def test_other_settings_are_refused_at_once_naming_the_holder(tmp_path):
    run = tmp_path / "run"
    p = _holder(run, ID, 120)
    try:
        holder = json.loads(bookkeeping_path(run, LOCK_NAME).read_text())
        assert holder["pid"] == p.pid and holder["host"] == socket.gethostname() and holder["identity"] == ID
        t0 = time.monotonic()
        with pytest.raises(RunIdentityError) as e:
            claim_run(run, "evaluate", ID | {"lr": 0.5}, extendable=EXT)
        msg = str(e.value)
        assert time.monotonic() - t0 < 30  # "at once": far below the holder's 120 s
        assert "\n" not in msg and msg.startswith(str(run)) and f"pid {p.pid} on {socket.gethostname()}" in msg
        assert "lr: null in the run, 0.5 now" in msg and [d.key for d in e.value.differences] == ["lr"]
        with pytest.raises(RunIdentityError, match="not `dukb rwku`"):  # another protocol
            claim_run(run, "rwku", ID)
        with pytest.raises(RunIdentityError, match="pass --resume to wait"):  # same settings, but no --resume
            claim_run(run, "evaluate", ID, extendable=EXT, resume=False)
        assert p.poll() is None  # the holder runs on, untouched
    finally:
        _stop(p)


def test_a_resume_waits_for_a_live_owner_a_bounded_time_then_refuses_naming_it(tmp_path, monkeypatch):
    """A resume that adds a target waits for the live owner at most LOCK_WAIT seconds (said in its waiting line),
    then refuses in one line naming the holder (issue 39: no lock waits without limit)."""
    from dukb.neural.run import lock as run_lock

    monkeypatch.setattr(run_lock, "LOCK_WAIT", 1.5)
    run = tmp_path / "run"
    p = _holder(run, ID, 120)
    said = []
    try:
        t0 = time.monotonic()
        with pytest.raises(RunIdentityError) as e:
            claim_run(run, "evaluate", ID | {"targets": [1, 2, 3]}, extendable=EXT, log=said.append)
        waited = time.monotonic() - t0
        assert p.poll() is None  # the owner runs on
    finally:
        _stop(p)
    msg = str(e.value)
    assert 1.5 <= waited < 60 and "\n" not in msg and msg.startswith(str(run))
    assert f"pid {p.pid} on {socket.gethostname()}" in msg and "for more than 1.5 s" in msg
    assert len(said) == 1 and "waiting up to 1.5 s" in said[0]


def test_same_settings_wait_for_the_holder_then_resume(tmp_path):
    run = tmp_path / "run"
    p = _holder(run, ID, 3)
    said = []
    try:
        t0 = time.monotonic()
        merged, added, old = claim_run(run, "evaluate", ID | {"targets": [1]}, extendable=EXT, log=said.append)
        waited = time.monotonic() - t0
    finally:
        _stop(p)
    try:
        assert waited > 1 and p.returncode == 0  # it waited for the holder to finish
        assert len(said) == 1 and "waiting" in said[0] and f"pid {p.pid}" in said[0] and str(run) in said[0]
        assert old["identity"] == ID and merged == ID and added == {}  # the holder's run, resumed
        assert json.loads(bookkeeping_path(run, LOCK_NAME).read_text())["pid"] == os.getpid()
    finally:
        release_run(run)


def test_a_sigkilled_holder_leaves_no_lock(tmp_path):
    run = tmp_path / "run"
    p = _holder(run, ID, 120)
    p.send_signal(signal.SIGKILL)
    p.wait()
    t0 = time.monotonic()
    try:
        merged, _added, old = claim_run(run, "evaluate", ID, extendable=EXT, log=pytest.fail)
        assert time.monotonic() - t0 < 30 and old["identity"] == ID
    finally:
        release_run(run)


def test_the_lock_is_held_until_the_protocol_returns_and_a_failed_claim_leaves_nothing(tmp_path):
    run = tmp_path / "new" / "run"

    @holds_run_lock
    def protocol(fail: bool):
        claim_run(run, "evaluate", ID)
        claim_run(run, "evaluate", ID)  # re-entrant in the same thread
        assert bookkeeping_path(run, LOCK_NAME).exists()
        if fail:
            raise ValueError("bad setting found after the claim")
        (run / "config.json").write_text(json.dumps({"protocol": "evaluate", "identity": ID}))

    with pytest.raises(ValueError):
        protocol(True)
    assert not (tmp_path / "new").exists()  # the directories it created are gone with the lock
    protocol(False)
    p = _holder(run, ID, 0)  # released: another process takes it at once
    p.wait()
    assert p.returncode == 0


def test_every_protocol_claims_its_directory_and_records_provenance():
    import importlib

    from dukb.neural.protocols import PROTOCOLS
    from dukb.neural.protocols.base import Protocol
    from dukb.neural.restor import pipeline

    for fn, body in [(pipeline.run_restor, pipeline._prepare)]:
        assert hasattr(fn, "__wrapped__"), fn  # @holds_run_lock
        src = inspect.getsource(getattr(body, "__wrapped__", body))
        assert re.search(r"claim_run\(\s*run,", src) and "open_run(" not in src and "provenance(" in src, fn
    # the protocols on the skeleton claim through Protocol.claim, from their plan stage
    assert re.search(r"claim_run\(\s*self\.run,", inspect.getsource(Protocol.claim))  # however the call is wrapped
    on_skeleton = [info for info in PROTOCOLS.values() if info.skeleton]
    assert {info.name for info in on_skeleton} == {"evaluate", "rwku", "control", "muse", "restor"}
    for info in on_skeleton:
        cls = info.load("protocol")
        entry = getattr(importlib.import_module(cls.__module__), info.run.split(":")[1])
        assert hasattr(entry, "__wrapped__"), entry  # @holds_run_lock
        plan, model = inspect.getsource(cls.plan), inspect.getsource(cls.model)
        if info.name == "restor":  # RESTOR's plan is _prepare, checked above
            assert re.search(r"_prepare\(\s*self\.run,", plan), info.name
            continue
        assert "self.claim(" in plan and "open_run(" not in plan + model and "provenance(" in plan + model, info.name


def test_provenance_records_threads_and_versions(monkeypatch):
    import torch

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    rec = provenance("cpu")
    assert rec["threads"]["torch"] == torch.get_num_threads() and rec["threads"]["OMP_NUM_THREADS"] == "1"
    for lib in ("torch", "transformers", "peft", "accelerate", "clingo", "numpy", "dukb"):
        assert lib in rec["versions"], lib
    assert rec["versions"]["torch"] and rec["versions"]["clingo"] and rec["device"]["threads"] >= 1


# ---------------------------------------------------------------------------------------------- the journal ----
def _row(t: int, v: float = 1.0) -> dict:
    return {"target": t, "method": "ga", "param": "steps", "setting": {"steps": v}}


def test_a_damaged_middle_line_keeps_every_valid_row_and_is_moved_aside_on_resume(tmp_path, capsys):
    p = tmp_path / "results.jsonl"
    lines = [
        json.dumps(_row(1)),
        '{"target": 2, "meth',
        json.dumps(_row(3)),
        "[1, 2]",
        json.dumps({"x": 1}),
        json.dumps(_row(6)),
    ]
    p.write_bytes(("\n".join(lines) + "\n").encode() + b"\xff\xfe\n" + b'{"target": 8, "me')
    capsys.readouterr()
    assert [r.get("target") for r in read_results(p)] == [1, 3, None, 6]  # {"x": 1}: a row to a keyless reader
    err = capsys.readouterr().err.splitlines()
    assert [ln.split(": damaged")[0] for ln in err if "damaged journal line" in ln] == [
        f"dukb: warning: {p}:{i}" for i in (2, 4, 7)
    ]
    assert any(f"{p}:8: torn last line" in ln for ln in err)
    journal = read_journal(p, key=lambda r: r["target"])
    assert [d.line for d in journal.damaged] == [2, 4, 5, 7] and journal.torn.line == 8
    before = p.read_bytes()
    assert read_results(p) and p.read_bytes() == before  # reading never changes the file

    f = ResultsFile(p, EVALUATE_ROWS.key, check=EVALUATE_ROWS.check())  # a resume
    assert [r["target"] for r in f.rows] == [1, 3, 6] and f.done == {(1, "ga", 1.0), (3, "ga", 1.0), (6, "ga", 1.0)}
    assert p.read_text() == "".join(json.dumps(_row(t)) + "\n" for t in (1, 3, 6))  # a clean journal
    aside = [json.loads(x) for x in (tmp_path / DAMAGED_NAME).read_text().splitlines()]
    assert [(a["file"], a["line"]) for a in aside] == [("results.jsonl", n) for n in (2, 4, 5, 7)]
    assert aside[0]["text"] == '{"target": 2, "meth' and aside[3]["text"] == "\\xff\\xfe"
    err = capsys.readouterr().err
    assert f"{p}:2: damaged journal line" in err and f"moved to {tmp_path / DAMAGED_NAME}" in err
    f.append(_row(9))
    assert [r["target"] for r in read_results(p)] == [1, 3, 6, 9] and capsys.readouterr().err == ""


def test_a_torn_last_line_is_dropped_with_a_note(tmp_path, capsys):
    p = tmp_path / "results.jsonl"
    p.write_text(json.dumps(_row(1)) + "\n" + '{"target": 2, "meth')
    capsys.readouterr()
    assert [r["target"] for r in ResultsFile(p, EVALUATE_ROWS.key, check=EVALUATE_ROWS.check()).rows] == [1]
    assert p.read_text() == json.dumps(_row(1)) + "\n" and not (tmp_path / DAMAGED_NAME).exists()
    assert "torn last line" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------- the CLI, real ------
@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A 12-person KB and a tiny model finetuned on it for one epoch (enough to run `dukb evaluate` on)."""
    pytest.importorskip("torch")
    from dukb.kb import load_kb, save_kb
    from dukb.kb.generate import generate
    from dukb.neural.pipeline import finetune_kb
    from dukb.neural.spec import ModelSpec

    base = tmp_path_factory.mktemp("tiny")
    kb = load_kb(save_kb(generate(12, seed=3)[0], base / "kb"))
    finetune_kb(kb, ModelSpec("tiny", prompt="tiny", device=DEVICE), base / "model", epochs=1, seed=0)
    return base / "kb", base / "model"


def _evaluate(tiny, run: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "dukb.cli.main",
        "evaluate",
        "--kb",
        str(tiny[0]),
        "--finetuned",
        str(tiny[1]),
        "-o",
        str(run),
        "--methods",
        "ga",
        "--grid",
        "ga=1,2",
        "--n-targets",
        "1",
        "--device",
        DEVICE,
        "--metrics",
        "recall",
        *extra,
    ]


def _locked(run: Path) -> bool:
    """The run's lock file names its holder's identity (the holder has opened the run)."""
    try:
        return "identity" in json.loads(bookkeeping_path(run, LOCK_NAME).read_text() or "{}")
    except (OSError, ValueError):
        return False


def _keys(run: Path) -> list[tuple]:
    return [(r["target"], r["method"], r["setting"]["steps"]) for r in read_results(run / "results.jsonl")]


def test_cli_second_evaluate_is_refused_or_joins_and_the_rows_never_mix(tiny, tmp_path):
    run = tmp_path / "run"
    a_log = tmp_path / "a.err"
    with open(a_log, "w") as fh:
        a = subprocess.Popen(_evaluate(tiny, run), stdout=subprocess.DEVNULL, stderr=fh)
    c = None
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not _locked(run):
            assert a.poll() is None, a_log.read_text()
            time.sleep(0.1)
        a.send_signal(signal.SIGSTOP)  # the holder stays put (lock held) while the others come
        # other settings: refused at once, one line naming the directory and the holder
        b = subprocess.run(_evaluate(tiny, run, "--lr", "0.5"), capture_output=True, text=True, timeout=120)
        err = b.stderr.strip().splitlines()
        assert b.returncode == 2 and len(err) == 1, b.stderr
        assert err[0].startswith(f"dukb: error: {run}: in use by a running `dukb evaluate` (pid {a.pid} on ")
        assert "lr: null in the run, 0.5 now" in err[0]
        # the same settings: joins the live run as another worker (one line), sharing its units
        log = tmp_path / "c.err"
        with open(log, "w") as fh:
            c = subprocess.Popen(_evaluate(tiny, run, "--resume"), stdout=subprocess.DEVNULL, stderr=fh)
        while time.monotonic() < deadline and "joining" not in log.read_text():
            assert c.poll() is None, log.read_text()
            time.sleep(0.1)
        joins = [ln for ln in log.read_text().splitlines() if "joining it as another worker" in ln]
        assert len(joins) == 1 and f"pid {a.pid}" in joins[0]
        a.send_signal(signal.SIGCONT)
        assert a.wait(timeout=300) == 0, a_log.read_text()
        assert c.wait(timeout=300) == 0, log.read_text()
    finally:
        for p in (a, c):
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
                p.wait()
    keys = _keys(run)
    assert len(keys) == 2 and len(set(keys)) == 2  # one row per setting, none twice
    rec = json.loads((run / "config.json").read_text())
    # the owner's record; a worker that joined writes none (one that came after the owner ended owns a resume)
    assert rec["identity"]["lr"] is None and len(rec["history"]) in (1, 2)
    # every run records its threads and library versions
    prov = rec["provenance"]
    assert prov["threads"]["torch"] >= 1 and "OMP_NUM_THREADS" in prov["threads"]
    assert all(
        prov["versions"].get(lib) for lib in ("torch", "transformers", "peft", "accelerate", "clingo", "numpy", "dukb")
    )
    summary = (run / "summary.csv").read_text().splitlines()
    assert len(summary) >= 2

    # a damaged middle line: `dukb report` renders the valid rows and names the line; a resume moves it aside
    lines = (run / "results.jsonl").read_text().splitlines()
    (run / "results.jsonl").write_text(lines[0][:20] + "\n" + lines[1] + "\n")
    r = subprocess.run(
        [sys.executable, "-m", "dukb.cli.main", "report", str(run)], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    assert f"{run / 'results.jsonl'}:1: damaged journal line" in r.stderr
    assert "Damaged journal lines" in (run / "report.md").read_text()
    r = subprocess.run(_evaluate(tiny, run, "--resume"), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert f"moved to {run / DAMAGED_NAME}" in r.stderr
    assert sorted(_keys(run)) == sorted(keys)  # the lost row recomputed, nothing twice
    assert [json.loads(x)["line"] for x in (run / DAMAGED_NAME).read_text().splitlines()] == [1]


def test_rows_of_a_key_differing_only_in_worker_or_timings_are_one_result(tmp_path):
    """A unit recomputed after a kill writes its rows again with other timings: the repeat is kept once, whichever
    stages the protocol times (``seconds``, ``seconds_eval``, ...; the run layer names none), while a row differing
    in a result is another row of the key (damaged)."""
    from dukb.neural.run.journal import is_bookkeeping, read_journal

    row = {"k": 1, "value": 0.5, "worker": "a:1", "seconds": 1.0, "seconds_eval": 2.0}
    again = {**row, "worker": "b:2", "seconds": 3.0, "seconds_eval": 4.0, "seconds_anything": 5.0}
    other = {**row, "value": 0.6}
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (row, again, other)))
    journal = read_journal(path, key=lambda r: (r["k"],))
    assert journal.rows == [row]
    assert [(d.line, d.reason) for d in journal.damaged] == [
        (2, "a repeat of line 1 (the same row; kept once)"),
        (3, "another row for the key of line 1 (one row per key; differs in value)"),
    ]
    assert not any(is_bookkeeping(f) for f in ("k", "value", "recall", "workers", "second"))
