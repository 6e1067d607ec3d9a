"""A run directory cannot be turned against its user, and what a run reads back is checked (issue 39, items 1 and 3,
and its locks that waited forever):

- a symbolic link planted at any path a run writes (rows, claims, plans, locks, logs, config.yaml/json, caches,
  figures, report files, quarantined lines, the finetuned model) is refused in one line naming it, exit 2, and
  its target is left untouched; `-o ''` is refused;
- sets.json edited to other well-formed sets, or of another type, is verified against the KB and recomputed (one
  line); forget_sets.json likewise; a config.json history of another type is one line naming the file;
- an unreadable or forged claim (garbage, a FIFO, one naming this worker's lock) is stale, never "taken", and is
  read without blocking;
- a lock held by a stopped process, or held too long, is refused in one line naming its holder;
- a second Ctrl-C during the cleanup still ends with exit 130 and its line.

The evaluate runs stop after their plan stage (tests/run/test_run_layout.py's ``plan_only``); the report runs are written
by hand (tests/run/test_planted_run_files.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dukb import InputError
from dukb.cli.main import main
from dukb.neural.protocols.evaluate.rows import EVALUATE_ROWS
from dukb.neural.run import files as run_files
from dukb.neural.run import journal as run_journal
from dukb.neural.run import lock as run_lock
from dukb.neural.run.files import BOOKKEEPING_DIR, bookkeeping_path, open_append, output_file, write_bytes_atomic
from dukb.neural.run.journal import ResultsFile
from dukb.neural.run.lock import claim_run, file_lock
from dukb.neural.run.units import UnitClaims, read_claim, record_units, unfinished_units
from tests.run.test_planted_run_files import evaluate_run, one_error_line, run_cli, watchdog
from tests.run.test_run_layout import ID, _ids, kb_dir, plan_only  # noqa: F401 - fixtures

#: what the planted links point at: a file and a folder outside the run, which must stay as they were
BAIT_TEXT = "not dukb's\n"


@pytest.fixture()
def bait(tmp_path) -> dict:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "file.txt").write_text(BAIT_TEXT)
    (outside / "folder").mkdir()
    return {"file": outside / "file.txt", "dir": outside / "folder"}


def _untouched(bait: dict) -> None:
    assert bait["file"].read_text() == BAIT_TEXT
    assert list(bait["dir"].iterdir()) == []


def _plant_link(path: Path, bait: dict, kind: str) -> None:
    """Replace ``path`` (file or folder, if any) with a symbolic link to the bait file or folder."""
    if path.is_dir() and not path.is_symlink():
        import shutil

        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(bait[kind], path)


#: every path an evaluate run writes, as (relative path, link to a "file" or a "dir")
RUN_PATHS = [
    ("commands.log", "file"),
    ("config.json", "file"),
    ("config.yaml", "file"),
    ("targets.txt", "file"),
    ("sets.json", "file"),
    ("forget_sets.json", "file"),
    ("results.jsonl", "file"),
    ("results.damaged.jsonl", "file"),
    ("run.log", "file"),
    ("baseline_probe.json", "file"),
    ("finetune.json", "file"),
    ("summary.csv", "file"),
    ("report.md", "file"),
    ("accuracy_recall.png", "file"),
    ("accuracy_recall.pdf", "file"),
    ("finetuned", "dir"),
    ("finetuned/model.safetensors", "file"),
    ("finetuned/checkpoint.pt", "file"),
    (BOOKKEEPING_DIR, "dir"),
    (f"{BOOKKEEPING_DIR}/run.lock", "file"),
    (f"{BOOKKEEPING_DIR}/render.lock", "file"),
    (f"{BOOKKEEPING_DIR}/units", "dir"),
    (f"{BOOKKEEPING_DIR}/units/planned.json", "file"),
    (f"{BOOKKEEPING_DIR}/units/planned.json.lock", "file"),
    (f"{BOOKKEEPING_DIR}/units/1-ga.claim", "file"),
    (f"{BOOKKEEPING_DIR}/workers", "dir"),
    (f"{BOOKKEEPING_DIR}/workers/host_1.lock", "file"),
]


def _evaluate_args(kb_dir: Path, run: Path) -> list[str]:
    return [
        "evaluate",
        "--kb",
        str(kb_dir),
        "--n-targets",
        "1",
        "--methods",
        "ga",
        "--metrics",
        "recall",
        "-o",
        str(run),
    ]


@pytest.mark.parametrize("name,kind", RUN_PATHS, ids=[n for n, _ in RUN_PATHS])
@pytest.mark.parametrize("fresh", [False, True], ids=["resume", "new"])
def test_a_link_planted_where_a_run_writes_is_refused(name, kind, fresh, tmp_path, kb_dir, plan_only, bait, capsys):
    """A resume of a run (or a new run into a folder) with a link planted at a path the run writes: exit 2, one
    line naming the link, and nothing written into its target."""
    run = tmp_path / "run"
    if fresh:
        run.mkdir()
    else:
        assert main(_evaluate_args(kb_dir, run)) == 0
    _plant_link(run / name, bait, kind)
    rc, err, _ = run_cli(_evaluate_args(kb_dir, run) + ([] if fresh else ["--resume"]), capsys)
    assert rc == 2, err
    line = one_error_line(err)
    assert str(run / name) in line and "symbolic link" in line, line
    _untouched(bait)


def test_a_run_directory_that_is_itself_a_link_is_used(tmp_path, kb_dir, plan_only, bait, capsys):
    """The user may point -o at a link: only links below the run directory are refused."""
    os.symlink(bait["dir"], tmp_path / "run")
    rc, err, _ = run_cli(_evaluate_args(kb_dir, tmp_path / "run"), capsys)
    assert rc == 0, err
    assert (bait["dir"] / "config.json").is_file()


@pytest.mark.parametrize("command", ["evaluate", "muse", "rwku", "control", "restor"])
def test_an_empty_output_directory_is_refused(command, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    rc, err, _ = run_cli([command, "-o", ""], capsys)
    assert rc == 2 and "empty" in one_error_line(err)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(InputError, match="empty"):
        claim_run("", "evaluate", ID)


# ------------------------------------------------------------------------------- each writer, one by one --------
def _guarded_run(tmp_path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    run_files.guard_run(run)
    return run


WRITERS = {
    "open_append": lambda p: open_append(p).close(),
    "write_bytes_atomic": lambda p: write_bytes_atomic(p, b"x"),
    "output_file": output_file,
    "file_lock": lambda p: file_lock(p).__enter__(),
    "results_append": lambda p: ResultsFile(p, EVALUATE_ROWS.key, check=EVALUATE_ROWS.check()).append(
        {"target": 1, "method": "ga", "param": "lr", "setting": {"lr": 1.0}}
    ),
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
@pytest.mark.parametrize("where", ["file", "folder"])
def test_each_run_writer_refuses_a_link(writer, where, tmp_path, bait):
    """Each way the run layer writes refuses a link in the file's place, or at a folder level below the run."""
    run = _guarded_run(tmp_path)
    if where == "file":
        target = run / "x.jsonl"
        os.symlink(bait["file"], target)
        named = target
    else:
        named = run / "sub"
        os.symlink(bait["dir"], named)
        target = named / "x.jsonl"
    with pytest.raises(InputError, match="symbolic link") as e:
        WRITERS[writer](target)
    assert str(named) in str(e.value) and "\n" not in str(e.value)
    _untouched(bait)


def test_damaged_lines_are_not_moved_into_a_link(tmp_path, bait):
    run = _guarded_run(tmp_path)
    (run / "results.jsonl").write_text("not json\n")
    os.symlink(bait["file"], run / run_journal.DAMAGED_NAME)
    with pytest.raises(InputError, match="symbolic link"):
        ResultsFile(run / "results.jsonl", EVALUATE_ROWS.key, check=EVALUATE_ROWS.check())
    _untouched(bait)


def test_claims_and_the_plan_refuse_a_linked_units_folder(tmp_path, bait):
    run = _guarded_run(tmp_path)
    bookkeeping_path(run).mkdir()
    os.symlink(bait["dir"], bookkeeping_path(run, "units"))
    with pytest.raises(InputError, match="symbolic link"):
        UnitClaims(run, "host:1")
    with pytest.raises(InputError, match="symbolic link"):
        record_units(run, [(1, "ga")])
    _untouched(bait)


def test_a_saved_model_refuses_a_link_inside_its_folder(tmp_path, bait):
    run = _guarded_run(tmp_path)
    (run / "finetuned").mkdir()
    os.symlink(bait["file"], run / "finetuned" / "model.safetensors")
    with pytest.raises(InputError, match="symbolic link"):
        run_files.refuse_links_in(run / "finetuned")


@pytest.mark.parametrize("name", ["summary.csv", "report.md", "accuracy_recall.png"])
def test_report_refuses_a_linked_output(name, tmp_path, bait, capsys):
    """`dukb report` on a hand-made run with an output planted as a link: exit 2, one line naming it."""
    run = evaluate_run(tmp_path / "run")
    os.symlink(bait["file"], run / name)
    rc, err, _ = run_cli(["report", run], capsys)
    assert rc == 2 and str(run / name) in one_error_line(err)
    _untouched(bait)


# --------------------------------------------------------------------------------- run files read back ----------
def _first_sets(run: Path) -> tuple[str, dict]:
    doc = json.loads((run / "sets.json").read_text())
    t = next(iter(doc["targets"]))
    return t, doc


def test_forged_sets_are_verified_against_the_kb_and_recomputed(tmp_path, kb_dir, plan_only, capsys):
    """sets.json edited to other, well-formed sets: the resume says so (file and target named) and recomputes
    them; the rewritten file is the original again."""
    run = tmp_path / "run"
    assert main(_evaluate_args(kb_dir, run)) == 0
    original = json.loads((run / "sets.json").read_text())
    t, doc = _first_sets(run)
    other = [f for f in _ids(kb_dir, 40) if f != int(t)][:2]
    doc["targets"][t]["sets"] = [other]
    (run / "sets.json").write_text(json.dumps(doc))
    rc, err, _ = run_cli(_evaluate_args(kb_dir, run) + ["--resume"], capsys)
    assert rc == 0, err
    assert f"{run / 'sets.json'}: target {t}:" in err and "recomputed" in err
    assert json.loads((run / "sets.json").read_text())["targets"] == original["targets"]


@pytest.mark.parametrize(
    "change",
    [
        lambda doc, t: doc["targets"].__setitem__(t, 5),
        lambda doc, t: doc["targets"][t].__setitem__("sets", "abc"),
        lambda doc, t: doc["targets"][t].__setitem__("sets", [[True]]),
        lambda doc, t: doc["targets"][t].__setitem__("sets_used", 3),
        lambda doc, t: doc.__setitem__("targets", [1, 2]),
        lambda doc, t: doc["targets"].__setitem__("x", {}),
    ],
    ids=["entry-int", "sets-str", "sets-bool", "sets_used-int", "targets-list", "key-not-int"],
)
def test_sets_of_another_type_are_recomputed(change, tmp_path, kb_dir, plan_only, capsys):
    run = tmp_path / "run"
    assert main(_evaluate_args(kb_dir, run)) == 0
    original = json.loads((run / "sets.json").read_text())
    t, doc = _first_sets(run)
    change(doc, t)
    (run / "sets.json").write_text(json.dumps(doc))
    rc, err, _ = run_cli(_evaluate_args(kb_dir, run) + ["--resume"], capsys)
    assert rc == 0 and "Traceback" not in err, err
    assert "sets.json" in err
    assert json.loads((run / "sets.json").read_text())["targets"] == original["targets"]


@pytest.mark.parametrize("value", [5, "abc", [True], [10**6], []])
def test_forget_sets_of_another_type_or_value_are_recomputed(value, tmp_path, kb_dir, plan_only, capsys):
    run = tmp_path / "run"
    assert main(_evaluate_args(kb_dir, run)) == 0
    original = json.loads((run / "forget_sets.json").read_text())
    doc = json.loads((run / "forget_sets.json").read_text())
    k = next(iter(doc["entries"]))
    doc["entries"][k] = value
    (run / "forget_sets.json").write_text(json.dumps(doc))
    rc, err, _ = run_cli(_evaluate_args(kb_dir, run) + ["--resume"], capsys)
    assert rc == 0 and "Traceback" not in err, err
    assert f"{run / 'forget_sets.json'}: {k}:" in err
    assert json.loads((run / "forget_sets.json").read_text()) == original


@pytest.mark.parametrize(
    "field,value",
    [
        ("history", 5),
        ("history", [1]),
        ("history", [{"added": 3}]),
        ("protocol", 5),
        ("identity", {"identity_version": 3, "targets": "x"}),
    ],
)
def test_a_config_of_another_shape_is_one_line(field, value, tmp_path, kb_dir, plan_only, capsys):
    run = tmp_path / "run"
    assert main(_evaluate_args(kb_dir, run)) == 0
    doc = json.loads((run / "config.json").read_text())
    doc[field] = value if field != "identity" else {**doc["identity"], **value}
    (run / "config.json").write_text(json.dumps(doc))
    rc, err, _ = run_cli(_evaluate_args(kb_dir, run) + ["--resume"], capsys)
    assert rc == 2
    assert str(run / "config.json") in one_error_line(err)


# ---------------------------------------------------------------------------------------------- claims --------
@pytest.mark.parametrize(
    "content",
    [
        "garbage",
        "{}",
        "[1]",
        '{"worker": 5, "worker_lock": "x", "done": false}',
        '{"worker": "w", "worker_lock": "x", "done": "yes"}',
        "fifo",
    ],
)
def test_an_unreadable_claim_is_stale_never_taken(content, tmp_path):
    """A claim dukb did not write (garbage, another shape, a FIFO) is taken over at once, without blocking; it never
    counts as finished."""
    run = tmp_path / "run"
    record_units(run, [(1, "ga")])
    claims = UnitClaims(run, "host:1")
    path = claims.path((1, "ga"))
    if content == "fifo":
        os.mkfifo(path)
    else:
        path.write_text(content)
    try:
        with watchdog(10):
            assert read_claim(path)[0] is None
            assert unfinished_units(run) == [(1, "ga")]
            assert claims.claim((1, "ga"), reopen=True)
        assert read_claim(path)[0]["worker"] == "host:1" and path.is_file()
    finally:
        claims.close()


def test_a_forged_claim_naming_this_workers_lock_is_this_workers(tmp_path):
    run = tmp_path / "run"
    claims = UnitClaims(run, "host:1")
    claims.path((1, "ga")).write_text(json.dumps({"worker": "other:9", "worker_lock": claims.lock_name, "done": False}))
    try:
        assert claims.claim((1, "ga"))
    finally:
        claims.close()


def test_a_linked_claim_is_refused(tmp_path, bait):
    run = tmp_path / "run"
    claims = UnitClaims(run, "host:1")
    os.symlink(bait["file"], claims.path((1, "ga")))
    try:
        with pytest.raises(InputError, match="symbolic link"):
            claims.claim((1, "ga"))
    finally:
        claims.close()
    _untouched(bait)


def test_a_run_says_done_only_when_every_unit_has_its_rows():
    """The run's last line names the units still without rows (held by a live worker, or a claim no worker could
    take) instead of saying done."""
    from dukb.neural.protocols.base import Protocol

    class Stub(Protocol):
        name = "evaluate"
        plan = model = report = lambda self: None
        run_unit = lambda self, unit, todo: iter(())  # noqa: E731
        units = lambda self: [(1, "ga"), (2, "ga")]  # noqa: E731
        pending = lambda self, unit: self.left.get(unit, [])  # noqa: E731

    p = Stub.__new__(Stub)
    p.t_start, p.results, p._units, p.left = time.perf_counter(), None, [(1, "ga"), (2, "ga")], {(2, "ga"): [1.0]}
    line = p.done_line(": report r.md")
    assert line.startswith("not done after ") and "1 of 2 work units (target, method)" in line
    assert "(2, ga)" in line and "(1, ga)" not in line and line.endswith(": report r.md")
    p.left = {}
    assert p.done_line().startswith("done in ")


# ----------------------------------------------------------------------------------------------- locks --------
def _holder(path: Path) -> subprocess.Popen:
    """Another process holding ``file_lock(path)`` (its pid and host written in the file)."""
    code = (
        "import sys, time; from dukb.neural.run.lock import file_lock\n"
        "with file_lock(sys.argv[1]):\n    print('held', flush=True); time.sleep(120)"
    )
    p = subprocess.Popen(
        [sys.executable, "-c", code, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert p.stdout.readline().strip() == "held"
    return p


@pytest.mark.parametrize("stopped", [True, False], ids=["stopped", "busy"])
def test_a_held_render_lock_is_reported_and_never_waited_for_without_end(stopped, tmp_path, monkeypatch):
    run = tmp_path / "run"
    run.mkdir()
    path = run_files.bookkeeping_dir(run) / run_files.RENDER_LOCK_NAME
    holder = _holder(path)
    monkeypatch.setattr(run_lock, "LOCK_WAIT", 1.0)
    said: list[str] = []
    try:
        if stopped:
            holder.send_signal(signal.SIGSTOP)
            time.sleep(0.2)
        t0 = time.monotonic()
        with watchdog(20), pytest.raises(InputError) as e:
            with file_lock(path, log=said.append):
                pass
        assert time.monotonic() - t0 < 10
        msg = str(e.value)
        assert f"pid {holder.pid}" in msg and str(path) in msg and "\n" not in msg
        assert ("stopped" in msg) if stopped else ("more than 1 s" in msg and "waiting up to 1 s" in said[0])
    finally:
        holder.send_signal(signal.SIGCONT)
        holder.kill()
        holder.wait()
    with file_lock(path):  # free again
        assert json.loads(path.read_text())["pid"] == os.getpid()


def test_a_fifo_in_place_of_a_lock_is_refused_without_blocking(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    path = run_files.bookkeeping_dir(run) / run_files.RENDER_LOCK_NAME
    os.mkfifo(path)
    with watchdog(10), pytest.raises(InputError, match="not a regular file"):
        with file_lock(path):
            pass


# -------------------------------------------------------------------------------------------- Ctrl-C twice ------
def test_a_second_ctrl_c_during_the_cleanup_still_exits_130(tmp_path, monkeypatch, capsys):
    """The first Ctrl-C interrupts the command; a second one arrives while dukb says what it kept: still 130 and
    the one line."""
    import dukb.cli.render as render
    import dukb.neural.protocols.evaluate.run as protocol

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    def second(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(protocol, "evaluate", interrupted)
    monkeypatch.setattr(render, "interrupt_message", second)
    before = signal.getsignal(signal.SIGINT)
    rc, err, _ = run_cli(["evaluate", "--n-targets", "1", "-o", tmp_path / "run"], capsys)
    assert rc == 130 and err.strip() == "dukb: interrupted"
    assert signal.getsignal(signal.SIGINT) == before  # an in-process caller gets its handler back


def test_two_real_ctrl_c_exit_130(tmp_path):
    """The console script, sent SIGINT twice in a row while it works: exit 130 and the interrupt line, never death
    by the signal."""
    code = (
        "import sys, time\nimport dukb.neural.protocols.evaluate.run as p\n"
        # 'working' is printed inside the try, so the first SIGINT always lands there and the second one, 0.3 s
        # later, lands in the 3 s cleanup (under load too)
        "def slow(*a, **k):\n"
        "    try:\n        print('working', flush=True)\n        time.sleep(60)\n    finally:\n"
        "        time.sleep(3)\n"
        "p.evaluate = slow\nfrom dukb.cli.main import main\nsys.argv = ['dukb', 'evaluate', '--n-targets', '1',"
        f" '-o', {str(tmp_path / 'run')!r}]\nsys.exit(main())"
    )
    # as from a shell: SIGINT at its default (an ignored SIGINT in the test process would be inherited)
    p = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert p.stdout.readline().strip() == "working"
    p.send_signal(signal.SIGINT)
    time.sleep(0.3)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert err.strip().splitlines()[-1].startswith("dukb: interrupted")
