"""Work units any launcher can run: claims in the run directory (O_EXCL), a worker's lock, takeover of a gone
worker's units, and two `dukb evaluate` processes sharing one run with no process group."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import DEVICE
from dukb.neural.run.units import UnitClaims


def test_a_unit_is_claimed_once_and_taken_over_when_its_worker_is_gone(tmp_path):
    a, b = UnitClaims(tmp_path, "host:1"), UnitClaims(tmp_path, "host:2")
    assert a.claim((5, "ga")) and a.claim((5, "ga"))  # ours, and still ours
    assert not b.claim((5, "ga"))  # a is alive (its worker lock is held)
    assert b.claim((6, "ga")) and not a.claim((6, "ga"))
    a.done((5, "ga"))
    assert not b.claim((5, "ga"))  # done
    assert b.claim((5, "ga"), reopen=True)  # done, but b still finds rows missing (a grid grew): taken over
    assert b.state((5, "ga"))["worker"] == "host:2" and not b.state((5, "ga"))["done"]
    c = UnitClaims(tmp_path, "host:3")
    assert c.claim((7, "tv"))
    c.close()  # c is gone (as when killed: the kernel releases its lock): its unfinished claim is free
    assert not (tmp_path / ".dukb" / "workers" / "host_3.lock").exists()
    d, e = UnitClaims(tmp_path, "host:4"), UnitClaims(tmp_path, "host:5")
    assert [d.claim((7, "tv")), e.claim((7, "tv"))] == [True, False]  # exactly one taker
    assert d.state((7, "tv"))["worker"] == "host:4"
    for w in (a, b, d, e):
        w.close()


def test_a_silent_claim_is_taken_over_after_the_timeout(tmp_path):
    """A claim whose worker's lock cannot be checked (another host, no shared flock: here no lock named) is live
    until it has been silent for the timeout; a worker whose lock is held is live however long it stays silent."""
    b = UnitClaims(tmp_path, "host:2", timeout=0.5)
    far = b.path((1, "ga"))
    far.write_text(json.dumps({"worker": "far:1", "done": False}))
    assert not b.claim((1, "ga"))
    old = time.time() - 10
    os.utime(far, (old, old))  # no heartbeat for 10 s
    assert b.claim((1, "ga")) and b.state((1, "ga"))["worker"] == "host:2"
    a = UnitClaims(tmp_path, "near:1")
    assert a.claim((2, "ga"))
    os.utime(a.path((2, "ga")), (old, old))
    assert not b.claim((2, "ga"))  # its lock is held: alive
    a.close()
    b.close()


def test_two_takers_of_one_stale_claim_never_both_win(tmp_path):
    """A taker that read the claim before another took it over loses (the marker names the claim it read)."""
    gone = UnitClaims(tmp_path, "host:1")
    assert gone.claim((3, "tv"))
    gone.close()
    b, c = UnitClaims(tmp_path, "host:2"), UnitClaims(tmp_path, "host:3")
    assert b.claim((3, "tv"))
    assert not c.claim((3, "tv"))  # b is alive now
    b.done((3, "tv"))
    assert [b.claim((3, "tv"), reopen=True), c.claim((3, "tv"), reopen=True)] == [True, False]
    b.close()
    c.close()


def test_unit_names_stay_inside_the_run_directory(tmp_path):
    a = UnitClaims(tmp_path / "run", "../../evil host:1")
    assert a.claim((3, "../../x"))
    assert {p.parent for p in (tmp_path / "run").rglob("*.claim")} == {tmp_path / "run" / ".dukb" / "units"}
    assert [p.name for p in (tmp_path / "run" / ".dukb" / "workers").iterdir()] == [a.lock_name]
    a.close()


@pytest.mark.slow
def test_two_evaluate_processes_share_one_run(tmp_path):
    """A second `dukb evaluate --resume` with the same settings joins the live run: each (target, method) unit is run
    by exactly one of them, the rows record both workers, and the run equals a one-process run row for row."""
    pytest.importorskip("torch")
    from dukb.cli.main import main
    from dukb.kb import save_kb
    from dukb.kb.generate import generate

    kb_dir = save_kb(generate(16, seed=4)[0], tmp_path / "kb")
    run = tmp_path / "run"
    # units slow enough (held-out probes) that the second process, which starts a few seconds later, finds work
    opts = [
        "--methods",
        "ga,tv",
        "--grid",
        "ga=1,2,4,8",
        "--grid",
        "tv=0.5,5",
        "--n-targets",
        "10",
        "--metrics",
        "recall,recall_heldout",
        "--device",
        DEVICE,
    ]
    cmd = [sys.executable, "-m", "dukb.cli.main", "evaluate", "--kb", str(kb_dir), "-o", str(run), *opts, "--resume"]
    err_b = _two_workers(cmd)
    assert "joining it as another worker" in err_b and "joined the run as another worker" in err_b
    rows = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    keys = [(r["target"], r["method"], json.dumps(r["setting"], sort_keys=True)) for r in rows]
    assert len(keys) == len(set(keys)) == 10 * 6  # every unit once
    by_unit = {}
    for r in rows:
        by_unit.setdefault((r["target"], r["method"]), set()).add(r["worker"])
    assert all(len(w) == 1 for w in by_unit.values())  # a unit's rows come from one worker
    assert_both_worked(run, {w for ws in by_unit.values() for w in ws})
    assert all(json.loads(p.read_text())["done"] for p in (run / ".dukb" / "units").glob("*.claim"))
    # the same run in one process gives the same rows (a row depends on its unit and the seed only)
    solo = tmp_path / "solo"
    assert main(["evaluate", "--kb", str(kb_dir), "-o", str(solo), "--finetuned", str(run / "finetuned"), *opts]) == 0
    want = {
        (r["target"], r["method"], json.dumps(r["setting"], sort_keys=True)): (r["recall"], r["accuracy_all"])
        for r in (json.loads(x) for x in (solo / "results.jsonl").read_text().splitlines())
    }
    assert {k: (r["recall"], r["accuracy_all"]) for k, r in zip(keys, rows)} == want


#: when the last _two_workers call's second process said it joined the run (time.time(), read as the line arrived)
JOINED_AT: list[float] = []


def assert_both_worked(run: Path, workers: set[str]) -> None:
    """Both processes ran units, unless the owner had claimed every unit before the joiner reached the units (on a
    fast device, e.g. the tiny model on a GPU, the owner can finish while the joiner still loads): then every claim
    was made (its ``claimed`` time, kept when the unit is marked done) before the joiner said it joined."""
    if len(workers) == 2:
        return
    assert len(workers) == 1 and JOINED_AT, (workers, JOINED_AT)
    claimed = [json.loads(p.read_text())["claimed"] for p in (run / ".dukb" / "units").glob("*.claim")]
    assert claimed and max(claimed) <= JOINED_AT[0] + 1.0, (max(claimed or [0]), JOINED_AT)


def _two_workers(cmd: list[str]) -> str:
    """Start ``cmd`` twice, the second a second later (one torch thread each); both must succeed. Returns the
    second one's stderr (and sets :data:`JOINED_AT`)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    a = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    time.sleep(1.0)
    b = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    lines_b: list[tuple[float, str]] = []

    def read_b():
        for line in b.stderr:
            lines_b.append((time.time(), line))

    reader = threading.Thread(target=read_b, daemon=True)
    reader.start()
    err_a = a.communicate(timeout=900)[1]
    b.wait(timeout=900)
    reader.join(timeout=60)
    err_b = "".join(line for _t, line in lines_b)
    JOINED_AT[:] = [t for t, line in lines_b if "joined the run as another worker" in line][:1]
    assert a.returncode == 0 and b.returncode == 0, err_a + err_b
    return err_b


def _solo(cmd: list[str]) -> None:
    """Run ``cmd`` alone with one torch thread, as the workers ran (generated text is compared, so the thread count
    must match theirs)."""
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=900)
    assert r.returncode == 0, r.stderr


def test_two_rwku_processes_share_one_run(tmp_path):
    """`dukb rwku --resume` started twice with the same settings: the second joins once the first has finetuned,
    each (request, method) unit is computed by one of them, and the rows equal a one-process run's."""
    pytest.importorskip("torch")
    from dukb.cli.main import main
    from dukb.kb import save_kb
    from dukb.kb.generate import generate

    kb_dir = save_kb(generate(16, seed=4)[0], tmp_path / "kb")
    run = tmp_path / "run"
    opts = [
        "--methods",
        "ga,npo",
        "--grid",
        "ga=1,2",
        "--grid",
        "npo=1",
        "--n-targets",
        "4",
        "--batch-sizes",
        "2",
        "--device",
        DEVICE,
    ]
    cmd = [sys.executable, "-m", "dukb.cli.main", "rwku", "--kb", str(kb_dir), "-o", str(run), *opts, "--resume"]
    err_b = _two_workers(cmd)
    assert "joined the run as another worker" in err_b
    rows = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    keys = [(r["request"], r.get("method") or "", json.dumps(r["setting"], sort_keys=True)) for r in rows]
    assert len(keys) == len(set(keys)) == 5 * (1 + 2 + 1)  # 4 single requests and one batch: every row once
    by_unit = {}
    for r in rows:
        by_unit.setdefault((r["request"], r.get("method") or ""), set()).add(r["worker"])
    assert all(len(w) == 1 for w in by_unit.values())
    assert_both_worked(run, {w for ws in by_unit.values() for w in ws})
    assert (run / "report.md").exists()
    solo = tmp_path / "solo"
    assert main(["rwku", "--kb", str(kb_dir), "-o", str(solo), "--finetuned", str(run / "finetuned"), *opts]) == 0
    want = {
        (r["request"], r.get("method") or "", json.dumps(r["setting"], sort_keys=True)): (
            r["recall"],
            r["f_all"] if "f_all" in r else None,
        )
        for r in (json.loads(x) for x in (solo / "results.jsonl").read_text().splitlines())
    }
    got = {k: (r["recall"], r["f_all"] if "f_all" in r else None) for k, r in zip(keys, rows)}
    assert got == want


def test_two_control_processes_share_one_run(tmp_path):
    """`dukb control --resume` started twice: units (ratio, θ_o) and (ratio, method) are each run by one worker
    (a method unit's fine grids follow its own coarse rows), and the rows equal a one-process run's."""
    pytest.importorskip("torch")
    from dukb.cli.main import main
    from dukb.kb import save_kb
    from dukb.kb.generate import generate

    kb_dir = save_kb(generate(16, seed=4)[0], tmp_path / "kb")
    run = tmp_path / "run"
    opts = [
        "--methods",
        "ga,ga_gdr",
        "--controls",
        "es,mm",
        "--ratios",
        "0.05,0.1",
        "--steps",
        "4",
        "--coarse",
        "2",
        "--fine",
        "2",
        "--retain-eval",
        "8",
        "--device",
        DEVICE,
    ]
    cmd = [sys.executable, "-m", "dukb.cli.main", "control", "--kb", str(kb_dir), "-o", str(run), *opts, "--resume"]
    err_b = _two_workers(cmd)
    assert "joined the run as another worker" in err_b
    rows = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    keys = [(r["ratio"], r.get("method") or "", r["control"], r["value"]) for r in rows]
    assert len(keys) == len(set(keys))
    by_unit = {}
    for r in rows:
        by_unit.setdefault((r["ratio"], r.get("method") or ""), set()).add(r["worker"])
    assert len(by_unit) == 6 and all(len(w) == 1 for w in by_unit.values())
    assert_both_worked(run, {w for ws in by_unit.values() for w in ws})
    solo = tmp_path / "solo"
    assert main(["control", "--kb", str(kb_dir), "-o", str(solo), "--finetuned", str(run / "finetuned"), *opts]) == 0
    want = {
        (r["ratio"], r.get("method") or "", r["control"], r["value"]): (r["ps_exact_forget"], r["ps_exact_retain"])
        for r in (json.loads(x) for x in (solo / "results.jsonl").read_text().splitlines())
    }
    assert {k: (r["ps_exact_forget"], r["ps_exact_retain"]) for k, r in zip(keys, rows)} == want
    # `dukb report` names the planned units no worker finished (here: none; then one claim reopened by hand)
    from dukb.neural.run.files import _safe_name
    from dukb.neural.run.units import unfinished_units

    planned = json.loads((run / ".dukb" / "units" / "planned.json").read_text())
    assert unfinished_units(run) == [] and len(planned) == 6 and ["5%", "ga_gdr"] in planned
    claim = run / ".dukb" / "units" / (_safe_name("5%-ga_gdr") + ".claim")
    claim.write_text(json.dumps(dict(json.loads(claim.read_text()), done=False)))
    res = subprocess.run(
        [sys.executable, "-m", "dukb.cli.main", "report", str(run)], capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, res.stderr
    assert "1 work units (ratio, method) are not finished: (5%, ga_gdr)" in res.stderr
    assert (
        "**Incomplete run.** 1 (ratio, method) work unit(s) are not finished: (5%, ga_gdr)"
        in (run / "report.md").read_text()
    )


def test_two_muse_processes_share_one_run(tmp_path):
    """`dukb muse --resume` started twice: the second joins once f_target is finetuned; reference, method and C6
    sequence units are each run by one worker (a retrain model is finetuned once, under its lock), every row is
    written once, and the rows equal a one-process run's."""
    pytest.importorskip("torch")
    from dukb.kb import save_kb
    from dukb.kb.generate import generate

    kb_dir = save_kb(generate(24, seed=3)[0], tmp_path / "kb")
    run = tmp_path / "run"
    opts = [
        "--methods",
        "ga,npo",
        "--curve-methods",
        "ga",
        "--scale-sizes",
        "1,2",
        "--grid",
        "ga=2",
        "--grid",
        "npo=2",
        "--holdout",
        "0.2",
        "--bootstrap",
        "50",
        "--device",
        DEVICE,
    ]
    cmd = [sys.executable, "-m", "dukb.cli.main", "muse", "--kb", str(kb_dir), "-o", str(run), *opts, "--resume"]
    err_b = _two_workers(cmd)
    assert "joined the run as another worker" in err_b
    rows = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    keys = [
        (r["request"], r["model_kind"], r.get("method") or "", json.dumps(r["setting"], sort_keys=True)) for r in rows
    ]
    assert len(keys) == len(set(keys))  # every row once
    assert_both_worked(run, {r["worker"] for r in rows})
    retrains = [p for p in (run / "models").iterdir() if p.is_dir() and p.name.startswith("retrain-")]
    assert len(retrains) == len(
        {json.dumps(r["scored_forget_fact_ids"], sort_keys=True) for r in rows if r["model_kind"] == "retrain"}
    )
    solo = tmp_path / "solo"  # with the run's model caches (f_target, retrains), as evaluate's test gives --finetuned
    shutil.copytree(run / "models", solo / "models", ignore=shutil.ignore_patterns("*.lock"))
    _solo([sys.executable, "-m", "dukb.cli.main", "muse", "--kb", str(kb_dir), "-o", str(solo), *opts])
    want = {
        (r["request"], r["model_kind"], r.get("method") or "", json.dumps(r["setting"], sort_keys=True)): (
            r["knowmem_forget"],
            r["knowmem_retain"],
            r["verbmem_forget"],
        )
        for r in (json.loads(x) for x in (solo / "results.jsonl").read_text().splitlines())
    }
    got = {k: (r["knowmem_forget"], r["knowmem_retain"], r["verbmem_forget"]) for k, r in zip(keys, rows)}
    assert got == want


def test_two_restor_processes_share_one_run(tmp_path):
    """`dukb restor` started twice with the same settings: the second joins once the clean and corrupted models are
    trained and probed, each unlearning method is one worker's unit, and the rows equal a one-process run's."""
    pytest.importorskip("torch")
    from dukb.kb import save_kb
    from dukb.kb.generate import generate

    kb_dir = save_kb(generate(24, 1)[0], tmp_path / "kb")
    run = tmp_path / "run"
    opts = [
        "--samples",
        "1",
        "--docs-per-entity",
        "12",
        "--n-retain",
        "16",
        "--n-random",
        "5",
        "--templates",
        "1",
        "--clean-epochs",
        "80",
        "--corrupt-lr",
        "5e-3",
        "--device",
        DEVICE,
    ]
    cmd = [sys.executable, "-m", "dukb.cli.main", "restor", "--kb", str(kb_dir), "-o", str(run), *opts]
    err_b = _two_workers(cmd)
    assert "joined the run as another worker" in err_b
    rows = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    assert sorted(r["method"] for r in rows) == ["ga", "kl", "npo"]  # each method once
    assert_both_worked(run, {r["worker"] for r in rows})
    solo = tmp_path / "solo"  # with the run's trained and probed models: the solo run only unlearns
    for part in ("corruption", "clean", "corrupted", "probes"):
        shutil.copytree(run / part, solo / part)
    _solo([sys.executable, "-m", "dukb.cli.main", "restor", "--kb", str(kb_dir), "-o", str(solo), *opts])
    want = {
        r["method"]: (r["accuracy"], r["partition"])
        for r in (json.loads(x) for x in (solo / "results.jsonl").read_text().splitlines())
    }
    assert {r["method"]: (r["accuracy"], r["partition"]) for r in rows} == want
