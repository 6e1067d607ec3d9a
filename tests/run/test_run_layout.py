"""A run directory's layout and its reproduction (issue 38, items 7 and 9):

- RUN/config.yaml is written once by the run's owner, with absolute paths, so `dukb evaluate --config
  RUN/config.yaml -o NEW` from another folder makes a run of the same identity; a resume that adds methods, targets
  or grid values rewrites it to describe the whole run;
- each invocation appends one line to RUN/commands.log (time, role, version, folder, command line);
- every lock and claim lives in RUN/.dukb/; a run made by an older dukb (bookkeeping at its top level) is moved over
  by its next owner, or refused in one line while an older dukb still holds it.

The evaluate runs here stop after the plan stage (the model stage writes config.json and nothing more): the run
identity is symbolic (KB and rules fingerprints, the tiny model's config, targets, methods and grids), so no model
is trained.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dukb.cli.main import main
from dukb.kb import load_kb
from dukb.neural.run.files import BOOKKEEPING_DIR, COMMANDS_LOG, LOCK_NAME, bookkeeping_path
from dukb.neural.run.identity import IDENTITY_VERSION, RunIdentityError
from dukb.neural.run.lock import claim_run, release_run
from dukb.neural.run.migrate import run_layout
from dukb.neural.run.units import UnitClaims, record_units, unfinished_units

#: config.json's fields that identify a run (its output directory and provenance aside)
IDENTITY_FIELDS = ("identity", "kb_fingerprint", "rules_fingerprint", "targets", "methods", "grids", "scopes")


@pytest.fixture()
def plan_only(monkeypatch):
    """`dukb evaluate` runs its plan stage only: the model stage writes config.json (as the real one does before it
    probes) and records the identity; no model is loaded, no unit runs, no report is rendered."""
    from dukb.neural.protocols.evaluate.run import EvaluateProtocol
    from dukb.neural.run.files import write_json_atomic

    seen: list[dict] = []

    def model(self):
        seen.append(self.identity)
        write_json_atomic(self.run / "config.json", self.record)

    monkeypatch.setattr(EvaluateProtocol, "model", model)
    monkeypatch.setattr(EvaluateProtocol, "work", lambda self: None)
    monkeypatch.setattr(EvaluateProtocol, "report", lambda self: {"report": self.run / "report.md"})
    return seen


@pytest.fixture()
def kb_dir(tmp_path):
    """A generated KB (20 people) in its own folder."""
    d = tmp_path / "data" / "kb"
    assert main(["generate", "--people", "20", "--seed", "5", "-o", str(d)]) == 0
    return d


def _ids(kb_dir: Path, n: int) -> list[int]:
    return [f.fact_id for f in load_kb(kb_dir).relationships][:n]


def _identity_fields(run: Path) -> dict:
    doc = json.loads((run / "config.json").read_text())
    return {k: doc[k] for k in IDENTITY_FIELDS}


def test_config_yaml_reproduces_the_run_from_another_folder(tmp_path, kb_dir, plan_only, monkeypatch):
    """A run made in one folder with a relative --targets-file, --kb and -o: its config.yaml names every path
    absolutely, keeps built-in names (the rule set, the tiny model) as names, and `--config RUN/config.yaml -o NEW`
    run from another folder gives the same identity fields in config.json."""
    first = tmp_path / "first"
    first.mkdir()
    (first / "my_targets.txt").write_text("# two targets\n" + "".join(f"{t}\n" for t in _ids(kb_dir, 2)))
    monkeypatch.chdir(first)
    assert (
        main(
            [
                "evaluate",
                "--kb",
                os.path.relpath(kb_dir, first),
                "--targets-file",
                "my_targets.txt",
                "--methods",
                "ga,tv",
                "--grid",
                "ga=1,2",
                "--rules",
                "family",
                "--metrics",
                "recall",
                "-o",
                "run",
            ]
        )
        == 0
    )
    run = first / "run"
    text = (run / "config.yaml").read_text()
    assert text.startswith("# the options of this `dukb evaluate` run, written once by the invocation that created")
    saved = yaml.safe_load(text)
    assert saved["targets-file"] == str(first / "my_targets.txt") and saved["kb"] == str(kb_dir)
    assert saved["output"] == str(run) and saved["rules"] == "family" and saved["model"] == "tiny"
    assert "resume" not in saved and "config" not in saved

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["evaluate", "--config", str(run / "config.yaml"), "-o", "new"]) == 0
    assert plan_only[0] == plan_only[1]
    assert _identity_fields(elsewhere / "new") == _identity_fields(run)
    assert json.loads((elsewhere / "new" / "config.json").read_text())["targets"] == _ids(kb_dir, 2)


def test_a_resume_that_adds_to_the_run_rewrites_config_yaml_as_the_whole_run(tmp_path, kb_dir, plan_only, monkeypatch):
    """The issue's case: a run of npo_seq resumed with --methods ga (and another target, and a grown grid) holds
    rows of both; config.yaml then says so (methods, every grid, the union of the targets in RUN/targets.txt), and
    repeating it gives the run's merged identity. A resume that adds nothing leaves config.yaml as it was."""
    monkeypatch.chdir(tmp_path)
    t1, t2 = _ids(kb_dir, 2)
    Path("a.txt").write_text(f"{t1}\n")
    Path("b.txt").write_text(f"{t2}\n")
    common = ["--kb", str(kb_dir), "--metrics", "recall", "-o", "run"]
    assert main(["evaluate", "--targets-file", "a.txt", "--methods", "npo_seq", "--grid", "npo_seq=2,4", *common]) == 0
    owner = Path("run/config.yaml").read_text()
    assert (
        main(
            [
                "evaluate",
                "--targets-file",
                "a.txt",
                "--methods",
                "npo_seq",
                "--grid",
                "npo_seq=2,4",
                "--resume",
                *common,
            ]
        )
        == 0
    )
    assert Path("run/config.yaml").read_text() == owner  # nothing added: untouched
    assert (
        main(["evaluate", "--targets-file", "b.txt", "--methods", "ga", "--grid", "ga=2,4", "--resume", *common]) == 0
    )
    saved = yaml.safe_load(Path("run/config.yaml").read_text())
    assert saved["methods"] == "npo_seq,ga" and sorted(saved["grid"]) == ["ga=2,4", "npo_seq=2,4"]
    assert saved["targets-file"] == str(tmp_path / "run" / "targets.txt")
    assert [int(x) for x in Path("run/targets.txt").read_text().split("\n")[1:] if x] == [t1, t2]
    # refused after the claim (a grid value added for only part of the run's targets): config.yaml is untouched
    before = Path("run/config.yaml").read_text()
    assert (
        main(
            [
                "evaluate",
                "--targets-file",
                "a.txt",
                "--methods",
                "npo_seq",
                "--grid",
                "npo_seq=1,4",
                "--resume",
                *common,
            ]
        )
        == 2
    )
    assert Path("run/config.yaml").read_text() == before
    # a grid value added below the largest (the reference schedule's rule), for every target of the run
    Path("ab.txt").write_text(f"{t1}\n{t2}\n")
    assert (
        main(
            [
                "evaluate",
                "--targets-file",
                "ab.txt",
                "--methods",
                "npo_seq",
                "--grid",
                "npo_seq=1,4",
                "--resume",
                *common,
            ]
        )
        == 0
    )
    saved = yaml.safe_load(Path("run/config.yaml").read_text())
    run_identity = json.loads(Path("run/config.json").read_text())["identity"]
    assert run_identity["methods"]["npo_seq"]["grid"] == [2, 4, 1] and list(run_identity["methods"]) == [
        "npo_seq",
        "ga",
    ]
    assert "npo_seq=2,4,1" in saved["grid"]
    # a method added by an invocation that names only some of the run's targets: the run's targets stay
    assert main(["evaluate", "--targets-file", "a.txt", "--methods", "tv", "--resume", *common]) == 0
    saved = yaml.safe_load(Path("run/config.yaml").read_text())
    assert saved["methods"] == "npo_seq,ga,tv" and saved["targets-file"] == str(tmp_path / "run" / "targets.txt")
    run_identity = json.loads(Path("run/config.json").read_text())["identity"]
    assert run_identity["targets"] == [t1, t2]

    os.mkdir("other")
    monkeypatch.chdir("other")
    assert main(["evaluate", "--config", str(tmp_path / "run" / "config.yaml"), "-o", "new"]) == 0
    assert json.loads(Path("new/config.json").read_text())["identity"] == run_identity


def test_commands_log_has_one_line_per_invocation(tmp_path, kb_dir, plan_only, monkeypatch):
    """commands.log: time (UTC), role (owner, then resume), dukb's version, the folder and the command line, tab
    separated, shell-quoted, one line each; a refused invocation adds none."""
    from dukb import __version__

    monkeypatch.chdir(tmp_path)
    args = [
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
        "my run",
    ]
    monkeypatch.setattr(sys, "argv", ["dukb", *args])
    assert main(args) == 0
    assert main(args + ["--resume"]) == 0
    assert main(args[:-2] + ["--seed", "3", "-o", "my run", "--resume"]) == 2  # other settings: refused
    lines = (tmp_path / "my run" / COMMANDS_LOG).read_text().splitlines()
    assert len(lines) == 2
    fields = [ln.split("\t") for ln in lines]
    assert [f[1] for f in fields] == ["owner", "resume"] and all(len(f) == 5 for f in fields)
    assert fields[0][0].endswith("Z") and fields[0][2] == f"dukb {__version__}"
    assert shlex.split(fields[0][3]) == [str(tmp_path)] and shlex.split(fields[0][4]) == ["dukb", *args]


def test_an_invocation_joining_a_live_run_is_logged_as_a_worker(tmp_path):
    """The role of an invocation in commands.log: owner, resume (the run existed) or worker (it shared the lock)."""
    from dukb.neural.run.lock import log_invocation

    log_invocation(tmp_path, "worker", ["dukb", "evaluate", "-o", "a b", "--resume"])
    line = (tmp_path / COMMANDS_LOG).read_text()
    assert line.count("\n") == 1 and line.split("\t")[1] == "worker"
    assert line.rstrip("\n").split("\t")[4] == "dukb evaluate -o 'a b' --resume"


# --------------------------------------------------------------------------------------------- bookkeeping ------
ID = {"identity_version": IDENTITY_VERSION, "kb": "abc", "targets": [1, 2]}


def test_bookkeeping_lives_in_the_hidden_folder(tmp_path):
    """The run lock, the unit claims, the plan of units and the worker locks are all under RUN/.dukb: the top level
    holds none of them, while the claim holds and after it."""
    run = tmp_path / "run"
    try:
        claim_run(run, "evaluate", ID)
        record_units(run, [(1, "ga")])
        claims = UnitClaims(run, "host:1")
        assert claims.claim((1, "ga"))
        claims.done((1, "ga"))
        claims.close()
        assert sorted(p.name for p in run.iterdir()) == [BOOKKEEPING_DIR, COMMANDS_LOG]
        assert bookkeeping_path(run, LOCK_NAME).is_file()
        assert sorted(p.name for p in bookkeeping_path(run, "units").iterdir()) == [
            "1-ga.claim",
            "planned.json",
            "planned.json.lock",
        ]
        assert unfinished_units(run) == []
    finally:
        release_run(run)


def test_a_symbolic_link_in_place_of_the_hidden_folder_is_refused(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", run / BOOKKEEPING_DIR)
    from dukb import InputError

    with pytest.raises(InputError, match="symbolic link"):
        claim_run(run, "evaluate", ID)
    release_run(run)
    assert not list((tmp_path / "elsewhere").iterdir())


def _old_run(run: Path) -> None:
    """A run as a dukb before RUN/.dukb left it: config.json, results, and its bookkeeping at the top level."""
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"protocol": "evaluate", "identity": ID}))
    (run / LOCK_NAME).write_text("{}")
    (run / "render.lock").write_text("")
    (run / "units").mkdir()
    (run / "units" / "planned.json").write_text(json.dumps([[1, "ga"], [2, "ga"]]))
    (run / "units" / "planned.json.lock").write_text("")
    (run / "units" / "1-ga.claim").write_text(
        json.dumps({"worker": "old:1", "worker_lock": "old_1.lock", "done": True})
    )
    (run / "workers").mkdir()
    (run / "workers" / "old_1.lock").write_text("")


def test_a_run_of_an_older_dukb_is_moved_over_by_its_next_owner(tmp_path):
    """An older run's run.lock, render.lock, units/ and workers/ leave the top level when it is resumed; its claims
    keep their state (unit (1, ga) done, (2, ga) not)."""
    run = tmp_path / "run"
    _old_run(run)
    assert run_layout(run) == 1 and unfinished_units(run) is None  # read in the current layout only
    try:
        _merged, _added, old = claim_run(run, "evaluate", ID)
        assert old["identity"] == ID
        assert sorted(p.name for p in run.iterdir()) == [BOOKKEEPING_DIR, COMMANDS_LOG, "config.json"]
        assert unfinished_units(run) == [(2, "ga")]
    finally:
        release_run(run)


def test_the_layout_is_recorded_and_one_migration_brings_layout_1_to_the_current_one(tmp_path):
    """config.json's provenance records the layout (every protocol writes provenance()); migrate() moves a layout-1
    run's bookkeeping into RUN/.dukb once (a second call, or a run of the current layout, changes nothing), and
    leaves a link in the place of a folder alone."""
    from dukb.neural.run.migrate import RUN_LAYOUT, migrate
    from dukb.neural.run.provenance import provenance

    assert provenance()["run_layout"] == RUN_LAYOUT == 2
    assert run_layout(tmp_path / "new") == RUN_LAYOUT  # nothing there yet: a new run
    run = tmp_path / "run"
    _old_run(run)
    (tmp_path / "bait").mkdir()
    (run / "workers" / "old_1.lock").unlink()
    os.rmdir(run / "workers")
    os.symlink(tmp_path / "bait", run / "workers")
    assert migrate(run) == 1
    assert sorted(p.name for p in run.iterdir()) == [BOOKKEEPING_DIR, "config.json", "workers"]
    assert sorted(p.name for p in bookkeeping_path(run, "units").iterdir()) == [
        "1-ga.claim",
        "planned.json",
        "planned.json.lock",
    ]
    assert unfinished_units(run) == [(2, "ga")] and (run / "workers").is_symlink()
    before = sorted(str(p) for p in run.rglob("*"))
    assert migrate(run) == 1 and sorted(str(p) for p in run.rglob("*")) == before  # nothing left to move
    (run / "config.json").write_text(
        json.dumps({"protocol": "evaluate", "identity": ID, "provenance": {"run_layout": RUN_LAYOUT}})
    )
    (run / "render.lock").write_text("")
    assert run_layout(run) == RUN_LAYOUT and migrate(run) == RUN_LAYOUT
    assert (run / "render.lock").exists()  # a run of the current layout is not touched


def test_a_run_an_older_dukb_still_holds_is_refused_in_one_line(tmp_path):
    run = tmp_path / "run"
    _old_run(run)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys, time; f = open(sys.argv[1], 'r+'); "
            "fcntl.flock(f, fcntl.LOCK_SH); print('held', flush=True); time.sleep(60)",
            str(run / LOCK_NAME),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunIdentityError) as e:
            claim_run(run, "evaluate", ID)
        assert "older dukb" in str(e.value) and "\n" not in str(e.value)
        assert (run / "units").is_dir() and (run / LOCK_NAME).exists()  # untouched
    finally:
        holder.kill()
        holder.wait()
        release_run(run)


# ------------------------------------------------------------------------------------- every protocol alike ------
class _Stop(Exception):
    """Raised right after a run is claimed and its config.yaml written: the identity is known, nothing is trained."""


@pytest.fixture()
def claims_only(monkeypatch):
    """Every protocol command stops right after its claim (config.yaml and commands.log written under the run lock);
    the identities the claims saw are recorded."""
    import dukb.cli.config_file as config_file
    from dukb import InputError

    seen: list[dict] = []
    real = config_file.on_claim

    def on_claim(ctx, run, role, identity, added):
        real(ctx, run, role, identity, added)
        seen.append(identity)
        raise InputError("stopped after the claim (test)")

    monkeypatch.setattr(config_file, "on_claim", on_claim)
    return seen


@pytest.mark.parametrize(
    "command, args",
    [
        ("evaluate", ["--targets-file", "t.txt", "--methods", "ga", "--grid", "ga=1,2", "--metrics", "recall"]),
        (
            "muse",
            [
                "--targets-file",
                "t.txt",
                "--n-targets",
                "1",
                "--methods",
                "ga",
                "--curve-methods",
                "ga",
                "--scale-sizes",
                "1",
            ],
        ),
        ("rwku", ["--targets-file", "t.txt", "--methods", "ga", "--batch-sizes", "2"]),
        ("control", ["--methods", "ga", "--controls", "es", "--ratios", "0.1", "--retain-eval", "10"]),
        ("restor", ["--methods", "ga"]),
    ],
)
def test_every_protocols_config_yaml_gives_the_same_identity_elsewhere(
    command, args, tmp_path, kb_dir, claims_only, monkeypatch, capsys
):
    """For each protocol command, RUN/config.yaml of a run made with relative paths (KB, targets file, -o) gives the
    same run identity when repeated from another folder into another directory."""
    first = tmp_path / "first"
    first.mkdir()
    (first / "t.txt").write_text("".join(f"{t}\n" for t in _ids(kb_dir, 2)))
    monkeypatch.chdir(first)
    assert main([command, "--kb", os.path.relpath(kb_dir, first), *args, "-o", "run"]) == 2
    assert "stopped after the claim" in capsys.readouterr().err
    saved = yaml.safe_load((first / "run" / "config.yaml").read_text())
    assert saved["kb"] == str(kb_dir) and saved["output"] == str(first / "run")
    assert saved.get("targets-file", str(first / "t.txt")) == str(first / "t.txt")
    other = tmp_path / "other"
    other.mkdir()
    monkeypatch.chdir(other)
    assert main([command, "--config", str(first / "run" / "config.yaml"), "-o", "new"]) == 2
    assert len(claims_only) == 2 and claims_only[1] == claims_only[0]
    assert [ln.split("\t")[1] for ln in (other / "new" / COMMANDS_LOG).read_text().splitlines()] == ["owner"]
