"""The command line as a user meets it: Ctrl-C, a closed pipe, `dukb report` on every protocol's run, the MUSE ROC
legend, log lines above the progress bar, flags in --help, option values checked before a model loads.

Ctrl-C and the closed pipe are tested on real subprocesses: a real SIGINT, a real pipe closed by its reader.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import patch_everywhere
from dukb.cli.main import app, main

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}


# ------------------------------------------------------------------------------------------- Ctrl-C ----------
def _interrupted(script: str, timeout: float = 120) -> tuple[int, str]:
    """Run ``script`` in a fresh interpreter, wait for its READY line on stderr, send SIGINT; (exit code, stderr)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    seen = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            line = proc.stderr.readline()
            assert line or proc.poll() is None, f"ended before READY: {''.join(seen)}"
            seen.append(line)
            if line.strip() == "READY":
                break
            assert time.monotonic() < deadline, "no READY"
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        _, rest = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, "".join(seen) + rest


#: command -> (module and function the command calls for its long work, its arguments)
LONG = {
    "evaluate": ("dukb.neural.protocols.evaluate.run", "evaluate", ["evaluate"]),
    "rwku": ("dukb.neural.protocols.rwku.run", "run_rwku", ["rwku"]),
    "muse": ("dukb.neural.protocols.muse.run", "run_muse", ["muse"]),
    "control": ("dukb.neural.protocols.control.run", "run_control", ["control"]),
    "restor": ("dukb.neural.restor.pipeline", "run_restor", ["restor", "--kb", "demo"]),
}


@pytest.mark.parametrize("command", sorted(LONG))
def test_ctrl_c_in_a_long_command_says_what_is_kept(command, tmp_path):
    """SIGINT while the command works: exit 130, no traceback, one line naming the rows kept and how to continue.
    The long work is replaced by a stand-in that has written 3 rows (and a torn fourth) and logs a line."""
    module, name, args = LONG[command]
    out = tmp_path / "run"
    rc, err = _interrupted(f"""
        import json, sys, time
        from pathlib import Path
        import {module} as m

        def fake(run_dir, *a, log=print, **k):
            Path(run_dir).mkdir(parents=True, exist_ok=True)
            with open(Path(run_dir) / "results.jsonl", "w") as fh:
                fh.write("".join(json.dumps({{"row": i}}) + "\\n" for i in range(3)) + '{{"torn')
            log("target 1: a per-target line")
            print("READY", file=sys.stderr, flush=True)
            time.sleep(120)

        setattr(m, {name!r}, fake)
        from dukb.cli.main import main
        sys.exit(main({args + ["-o", str(out)]!r}))
        """)
    assert rc == 130, err
    assert "Traceback" not in err and "target 1: a per-target line" in err
    advice = (
        "run the same command again to continue"
        if command == "restor"
        else "run the same command with --resume to continue"
    )
    assert (
        err.strip()
        .splitlines()[-1]
        .startswith(f"dukb: interrupted; 3 rows are kept in {out / 'results.jsonl'}; {advice}")
    )


@pytest.mark.parametrize("checkpoint", [False, True], ids=["before-a-checkpoint", "after-a-checkpoint"])
def test_ctrl_c_in_finetune_says_what_is_kept(checkpoint, tmp_path):
    from dukb.neural.finetune import CHECKPOINT

    out = tmp_path / "model"
    rc, err = _interrupted(f"""
        import sys, time
        from pathlib import Path
        import dukb.neural.pipeline as p

        def fake(kb, spec, out, **k):
            if {checkpoint}:
                Path(out).mkdir(parents=True)
                (Path(out) / {CHECKPOINT!r}).write_bytes(b"x")
            print("READY", file=sys.stderr, flush=True)
            time.sleep(120)

        p.finetune_kb = fake
        from dukb.cli.main import main
        sys.exit(main(["finetune", "-o", {str(out)!r}]))
        """)
    assert rc == 130 and "Traceback" not in err
    note = (
        f"the finetuning checkpoint {out / CHECKPOINT} is kept; run the same command again to continue from it"
        if checkpoint
        else "finetuning stopped before its first checkpoint; run the same command again to start over"
    )
    assert err.strip().splitlines()[-1] == f"dukb: interrupted; {note}"


@pytest.fixture(scope="module")
def big_kb(tmp_path_factory):
    """A generated KB whose closure takes a second or more (20,000 people)."""
    d = tmp_path_factory.mktemp("big") / "kb"
    assert main(["generate", "--people", "20000", "--seed", "1", "-o", str(d)]) == 0
    return d


def test_ctrl_c_during_a_real_closure_exits_130_with_one_line(big_kb):
    """The real `dukb closure` on a large KB, interrupted once its computation started."""
    rc, err = _interrupted(f"""
        import sys
        import dukb.solver.closure as c

        real = c.compute_closure

        def started(*a, **k):
            print("READY", file=sys.stderr, flush=True)
            for _ in range(50):  # long enough for the signal to arrive
                real(*a, **k)

        c.compute_closure = started
        from dukb.cli.main import main
        sys.exit(main(["closure", "--kb", {str(big_kb)!r}]))
        """)
    assert rc == 130, err
    assert err.strip().splitlines() == ["READY", "dukb: interrupted"]


# ------------------------------------------------------------------------------------------ closed pipe --------
def test_a_reader_closing_the_pipe_early_is_exit_0_and_silent(big_kb, tmp_path):
    """`dukb closure ... | head -1`, five times: exit 0, nothing on stderr (no traceback, no "Exception ignored")."""
    small = tmp_path / "kb"
    assert main(["generate", "--people", "2000", "--seed", "2", "-o", str(small)]) == 0
    for _ in range(5):
        p = subprocess.run(
            [
                "bash",
                "-c",
                f'"{sys.executable}" -m dukb.cli.main closure --kb "{small}" | head -1; exit "${{PIPESTATUS[0]}}"',
            ],
            capture_output=True,
            text=True,
            env=ENV,
            timeout=120,
        )
        assert p.returncode == 0, p.stderr
        assert p.stdout == "subject,relation,object,source\n" and p.stderr == ""


def test_help_into_a_closed_pipe_is_exit_0(tmp_path):
    p = subprocess.run(
        [
            "bash",
            "-c",
            f'"{sys.executable}" -m dukb.cli.main evaluate --help | head -c 10 >/dev/null; exit "${{PIPESTATUS[0]}}"',
        ],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
    )
    assert p.returncode == 0 and p.stderr == ""


# ------------------------------------------------------------------------------------------ dukb report --------
def _write_run(run: Path, protocol: str, rows: list, **files) -> Path:
    run.mkdir(parents=True, exist_ok=True)
    config = {"protocol": protocol, "kb": "kb", "model": "tiny", "seed": 0, **files.pop("config", {})}
    (run / "config.json").write_text(json.dumps(config))
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for name, doc in files.items():
        (run / name).write_text(json.dumps(doc))
    return run


def evaluate_rows() -> list[dict]:
    """Rows shaped like `dukb evaluate`'s (two targets, GA over two settings)."""
    rows = []
    for t, rel in ((28, "aunt"), (31, "brother")):
        for steps, recall, acc in ((1, 0.2, 0.95), (2, 0.8, 0.7)):
            rows.append(
                {
                    "method": "ga",
                    "base_method": "ga",
                    "scope": "target",
                    "forget_set": [t],
                    "retain_fact_ids": {"relationships": [], "biographies": []},
                    "param": "steps",
                    "setting": {"steps": steps, "lr": 0.001},
                    "target": t,
                    "recall": recall,
                    "accuracy_relationships": acc,
                    "accuracy_biographies": acc,
                    "accuracy_all": acc,
                    "best_set": [2, t],
                    "sets_used": "exact",
                    "n_sets": 2,
                    "ties": 1,
                    "target_forgotten": steps == 2,
                    "forgotten_relationships": [],
                    "forgotten_biographies": [],
                    "seconds_unlearn": 0.1,
                    "seconds_probe": 0.1,
                    "target_relation": rel,
                    "n_kb_rel": 41,
                    "n_kb_bio": 45,
                }
            )
    return rows


def rwku_rows() -> list[dict]:
    """Rows shaped like `dukb rwku`'s: a "before" row and a GA row per single request, and a batch request."""

    def row(request, kind, targets, method, steps, forget):
        mia = {"loss": -0.1, "zlib": -0.01, "mink": -0.1, "minkpp": 0.1}
        return {
            "request": request,
            "request_kind": kind,
            "targets": targets,
            "forget_set": targets,
            "neighbour_fact_ids": {"relationships": [1, 2], "biographies": [9]},
            "model_kind": "before" if method is None else "unlearned",
            "method": method,
            "param": None if method is None else "steps",
            "setting": {} if method is None else {"steps": steps, "lr": 0.001},
            "rouge_forget_fb": forget,
            "rouge_forget_qa": forget,
            "rouge_forget_aa": forget / 2,
            "rouge_forget_all": forget,
            "rouge_forget_aa_by_kind": {"reverse": forget, "synonym": 0.0},
            "rouge_neighbour_fb": 0.5,
            "rouge_neighbour_qa": 0.9,
            "rouge_neighbour_all": 0.7,
            "rouge_distant_fb": 0.5,
            "rouge_distant_qa": 0.9,
            "rouge_distant_all": 0.7,
            "mia_fm": mia,
            "mia_rm": mia,
            "mia_auc_fm_rm": {k: 0.5 for k in mia},
            "recall": 1 - forget,
            "accuracy_all": 0.9,
            "recall_under_attack": 0.5 * (1 - forget),
            "leaks_by_kind": {"reverse": 1},
        }

    rows = []
    for t in (28, 31):
        rows += [row(f"target-{t}", "single", [t], None, None, 1.0), row(f"target-{t}", "single", [t], "ga", 1, 0.4)]
    rows += [row("batch-2", "batch", [28, 31], None, None, 1.0), row("batch-2", "batch", [28, 31], "ga", 1, 0.5)]
    return rows


def muse_rows(auc_unlearned: float = 0.56) -> list[dict]:
    """Rows shaped like `dukb muse`'s: f_retrain, f_target and GA at two settings for the main request and a
    scalability and a sustainability request."""
    rows = []
    for request, experiment in (("main", "main"), ("scale-1", "scalability"), ("sustain-1", "sustainability")):
        for kind, steps, auc, know in (
            ("retrain", None, 0.28, 0.5),
            ("target", None, 0.92, 0.9),
            ("unlearned", 1, auc_unlearned, 0.6),
            ("unlearned", 2, 0.48, 0.4),
        ):
            scores = {"verbmem_forget": [know] * 3, "knowmem_forget": [know] * 3, "knowmem_retain": [0.8, 0.6]}
            rows.append(
                {
                    "request": request,
                    "experiment": experiment,
                    "model_kind": kind,
                    "targets": [28],
                    "forget_fact_ids": {"relationships": [28], "biographies": []},
                    "scored_forget_fact_ids": {"relationships": [28], "biographies": []},
                    "method": None if steps is None else "ga",
                    "param": None if steps is None else "steps",
                    "setting": None if steps is None else {"steps": steps, "lr": 0.001},
                    "verbmem_forget": know,
                    "knowmem_forget": know,
                    "knowmem_retain": 0.7,
                    "mia_auc_forget": {"loss": auc},
                    "mia_auc_retain": {"loss": 0.5},
                    "mia_auc": auc,
                    "privleak": (auc - 0.28) / 0.28,
                    "items": scores,
                    "mia": {"forget": [0.1, 0.5, 0.9], "retain": [0.2], "holdout": [0.3, 0.4]},
                }
            )
    return rows


UNEXPECTED = {"zzz_unexpected": {"a": [1, 2]}, "rouge_l_note": "text", "logprob_extra": None, "notes": [1, "x"]}

RUNS = {"evaluate": evaluate_rows, "rwku": rwku_rows, "muse": muse_rows}


@pytest.mark.parametrize("protocol", sorted(RUNS))
@pytest.mark.parametrize("extra", [False, True], ids=["rows", "rows-with-unexpected-keys"])
def test_report_renders_each_protocols_run(protocol, extra, tmp_path, capsys):
    rows = [{**r, **UNEXPECTED} if extra else r for r in RUNS[protocol]()]
    run = _write_run(tmp_path / "run", protocol, rows, config={"select": "first_below_retrain"})
    capsys.readouterr()
    assert main(["report", str(run)]) == 0, capsys.readouterr().err
    assert capsys.readouterr().out == f"report: {run / 'report.md'}\n"
    title = {"evaluate": "# dukb evaluate report", "rwku": "# dukb rwku report", "muse": "# dukb muse report"}
    assert (run / "report.md").read_text().startswith(title[protocol])


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("dukb: error: ") and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(
    "protocol,drop",
    [("evaluate", "target"), ("rwku", "request"), ("muse", "request"), ("control", "ratio"), ("restor", None)],
)
def test_report_says_in_one_line_what_it_cannot_render(protocol, drop, tmp_path, capsys):
    """Rows lacking a field the protocol's report needs (or a restor run without its probes): exit 2, one line."""
    base = {"evaluate": evaluate_rows, "rwku": rwku_rows, "muse": muse_rows}.get(protocol, lambda: [{"x": 1}])()
    rows = [{k: v for k, v in r.items() if k != drop} for r in base]
    files = {"splits.json": {"forget": {}}, "sets.json": {"targets": {}}} if protocol == "control" else {}
    run = _write_run(tmp_path / "run", protocol, rows, **files)
    if protocol == "control":  # its KB: the demo
        (run / "config.json").write_text(json.dumps({"protocol": "control", "kb": "demo", "seed": 0}))
    capsys.readouterr()
    assert main(["report", str(run)]) == 2
    err = _one_error_line(capsys)
    assert str(run) in err


@pytest.mark.parametrize(
    "setup,expected",
    [
        (lambda run: run.write_text("x"), "not a run directory"),
        (lambda run: run.mkdir(), "neither config.json nor results.jsonl"),
        (lambda run: (run.mkdir(), (run / "config.json").write_text("{oops")), "not a readable run config"),
        (
            lambda run: (run.mkdir(), (run / "config.json").write_text('{"protocol": "other"}')),
            "cannot render a 'other'",
        ),
        (lambda run: (run.mkdir(), (run / "config.json").write_text('{"protocol": "muse"}')), "no results.jsonl"),
        # a protocol that is not a string was looked up in a dict: TypeError unhashable (a traceback)
        (
            lambda run: (run.mkdir(), (run / "config.json").write_text('{"protocol": []}')),
            "is a JSON array, not a string",
        ),
        (lambda run: (run.mkdir(), (run / "config.json").write_text('{"protocol": {}}')), "is a JSON object, not a"),
        # nested past Python's recursion limit: json.loads raised RecursionError, which only ValueError was caught for
        (lambda run: (run.mkdir(), (run / "config.json").write_text("[" * 100000 + "]" * 100000)), "nested too deeply"),
    ],
    ids=[
        "file",
        "empty dir",
        "bad json",
        "other protocol",
        "no results",
        "protocol array",
        "protocol object",
        "deep config",
    ],
)
def test_report_on_what_is_not_a_run(setup, expected, tmp_path, capsys):
    run = tmp_path / "run"
    setup(run)
    capsys.readouterr()
    assert main(["report", str(run)]) == 2
    assert expected in _one_error_line(capsys)


@pytest.mark.parametrize("content", ["", "\n\n"], ids=["empty", "blank lines"])
@pytest.mark.parametrize("protocol", sorted(RUNS))
def test_report_on_an_empty_results_file_is_refused_alike(protocol, content, tmp_path, capsys):
    """An empty results.jsonl: evaluate exited 2, muse and rwku 0 with an empty report. All three refuse it now."""
    run = _write_run(tmp_path / "run", protocol, [], config={"select": "first_below_retrain"})
    (run / "results.jsonl").write_text(content)
    capsys.readouterr()
    assert main(["report", str(run)]) == 2
    line = _one_error_line(capsys)
    assert f"{run / 'results.jsonl'}: no result rows yet" in line
    assert not (run / "report.md").exists()


@pytest.mark.parametrize("error, fragment", [(MemoryError, "out of memory"), (RecursionError, "nested too deeply")])
def test_memory_and_recursion_errors_are_one_line(error, fragment, monkeypatch, capsys):
    """The last resort in main(): an input that exhausts memory or the recursion limit somewhere not bounded where
    it was read is one line and exit 2, not a traceback."""
    import dukb.solver.closure as closure

    def exhausted(*a, **k):
        raise error()

    patch_everywhere(monkeypatch, closure, "compute_closure", exhausted)
    capsys.readouterr()
    assert main(["closure", "--kb", "demo"]) == 2
    assert fragment in _one_error_line(capsys)


def test_muse_roc_legend_shows_an_auc_of_zero(tmp_path, monkeypatch):
    """An AUC of 0.0 is "AUC 0.00" in mia_roc.png's legend, not "AUC nan"; a missing one is "AUC –"."""
    import matplotlib.figure

    from dukb.neural.protocols.muse.report import plot_roc, roc_label

    assert roc_label("ga", 0.0) == "ga (AUC 0.00)"
    assert roc_label("ga", None) == "ga (AUC –)"
    legends = []
    save = matplotlib.figure.Figure.savefig

    def spy(fig, *a, **k):
        legends.extend(t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts())
        return save(fig, *a, **k)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", spy)
    rows = muse_rows(auc_unlearned=0.0)
    rows[3]["mia_auc"] = 0.0  # main request, GA's last setting: the row the figure shows
    assert plot_roc(rows, tmp_path / "roc.png") is not None
    assert "ga (AUC 0.00)" in legends and not any("nan" in t for t in legends)


# ------------------------------------------------------------------------------------- log lines -----------
def test_per_target_lines_print_above_the_progress_bar(tmp_path, monkeypatch, capsys):
    """A log line written while a rich progress bar is live (a terminal) starts on a cleared line of its own, not
    glued onto the bar; bar and lines go to stderr, stdout keeps the result line alone."""
    import dukb.neural.protocols.evaluate.run as protocol

    def fake(run_dir, cfg, *, resume, progress, log):
        from rich.progress import Progress

        bar = Progress()
        bar.start()
        task = bar.add_task("unlearning", total=2)
        bar.advance(task)
        log("target 7 (A, father, B) ga: best recall 1.00")
        bar.advance(task)
        bar.stop()

    monkeypatch.setattr(protocol, "evaluate", fake)
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich draws the live bar as on a terminal
    capsys.readouterr()
    assert main(["evaluate", "-o", str(tmp_path / "run")]) == 0
    cap = capsys.readouterr()
    assert cap.out == f"report: {tmp_path / 'run' / 'report.md'}\n"
    assert "unlearning" in cap.err
    before = cap.err[: cap.err.index("target 7")]
    assert before.endswith(("\x1b[2K", "\n")), repr(before[-40:])


# ------------------------------------------------------------------------------------------ --help ---------
@pytest.mark.parametrize("command", [None, *sorted(c.name for c in app.registered_commands)])
def test_help_shows_flags_without_a_type(command, capsys, monkeypatch):
    """typer 0.29 prints `<bool>` beside every flag; dukb's --help shows flags as plain flags."""
    monkeypatch.setenv("COLUMNS", "200")
    capsys.readouterr()
    assert main([command, "--help"] if command else ["--help"]) == 0
    out = capsys.readouterr().out
    assert "--help" in out and "<bool>" not in out


def test_help_of_evaluate_lists_its_flags(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    capsys.readouterr()
    assert main(["evaluate", "--help"]) == 0
    lines = {ln.split()[1]: ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("│ --")}
    for flag in ("--resume", "--gradient-checkpointing", "--trust-remote-code"):
        assert lines[flag].split()[2] != "<bool>"  # straight on to the help text


# ------------------------------------------------------------------------------- options before models -------
def test_an_invalid_probe_kind_exits_2_before_anything_loads(monkeypatch, capsys):
    import dukb.neural.modelrecord as modelrecord
    import dukb.neural.models as models

    def no_load(*a, **k):
        raise AssertionError("the model was loaded before --kinds was checked")

    patch_everywhere(monkeypatch, models, "load_model", no_load)
    patch_everywhere(monkeypatch, modelrecord, "spec_for_path", no_load)
    for bad in (["--kinds", "qa,bogus"], ["--scores", "bleu"], ["--batch-size", "0"]):
        capsys.readouterr()
        t0 = time.perf_counter()
        assert main(["probe", "--model", "some/model", *bad]) == 2
        assert time.perf_counter() - t0 < 10
        err = _one_error_line(capsys)
        assert bad[0] in err or "bogus" in err
