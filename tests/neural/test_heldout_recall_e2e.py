"""Probe roles end to end on the tiny model: every evaluate row records the forms its method saw and is scored on
held-out forms disjoint from them; the held-out figures recompute from the row and the run's baseline; finetuning
on more forms teaches them and is part of the run's identity."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from conftest import DEVICE
from dukb.cli.main import main  # noqa: E402
from dukb.kb import load_kb, save_kb  # noqa: E402
from dukb.kb.generate import generate  # noqa: E402
from dukb.neural.metrics.attack import ATTACK_KINDS  # noqa: E402
from dukb.solver.closure import compute_closure  # noqa: E402
from dukb.solver.mdus import is_deep_unlearning_set  # noqa: E402
from dukb.solver.metrics import recall_accuracy  # noqa: E402


@pytest.fixture(scope="module")
def small_kb(tmp_path_factory):
    kb, _ = generate(16, seed=4)
    return load_kb(save_kb(kb, tmp_path_factory.mktemp("kb") / "kb"))


@pytest.fixture(scope="module")
def run(small_kb, tmp_path_factory):
    """Finetuned on qa, paraphrase and cloze; GA (trains on qa) and du_cl (trains on and queries qa)."""
    out = tmp_path_factory.mktemp("eval") / "run"
    assert (
        main(
            [
                "evaluate",
                "--kb",
                str(small_kb.source),
                "-o",
                str(out),
                "--methods",
                "ga,du_cl",
                "--grid",
                "ga=2,8",
                "--grid",
                "du_cl=2,6",
                "--n-targets",
                "2",
                "--device",
                DEVICE,
                "--finetune-forms",
                "qa,paraphrase,cloze",
            ]
        )
        == 0
    )
    return out


def _rows(run):
    return [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]


def test_rows_record_seen_and_heldout_forms_and_recompute(run, small_kb):
    rows = _rows(run)
    cfg = json.loads((run / "config.json").read_text())
    base = cfg["heldout_known_before"]
    held = [k for k in ATTACK_KINDS if k != "qa"]
    assert base["forms"] == held
    un = base["unelicited"]
    sets = json.loads((run / "sets.json").read_text())["targets"]
    closure = compute_closure(small_kb, "family")
    assert len(rows) == 8
    import socket

    for r in rows:
        assert r["worker"].startswith(socket.gethostname() + ":")  # who computed the row (host:pid)
        assert r["probe_forms_seen"] == ["qa"]
        assert r["heldout_forms"] == held and not set(r["heldout_forms"]) & set(r["probe_forms_seen"])
        # unscorable facts (no held-out form elicited them before unlearning) are never forgotten here
        assert not set(r["forgotten_relationships_heldout"]) & set(un["relationships"])
        assert r["heldout_unscorable"] == {
            "relationships": len(un["relationships"]),
            "biographies": len(un["biographies"]),
        }
        again = recall_accuracy(
            small_kb,
            sets[str(r["target"])]["sets"],
            set(r["forgotten_relationships_heldout"]),
            set(r["forgotten_biographies_heldout"]),
            r["sets_used"],
            [r["target"]],
            exclude_rel=set(r["retain_fact_ids"]["relationships"]) | set(un["relationships"]),
            exclude_bio=set(r["retain_fact_ids"]["biographies"]) | set(un["biographies"]),
        )
        assert again.recall == r["recall_heldout"] and again.accuracy_all == r["accuracy_all_heldout"]
        from dukb.neural.metrics.heldout import scorable_recall

        assert r["recall_heldout_scorable"] == scorable_recall(
            sets[str(r["target"])]["sets"], r["forgotten_relationships_heldout"], un["relationships"]
        )
        assert r["recall_heldout_scorable"] is None or r["recall_heldout_scorable"] >= r["recall_heldout"]
        assert r["success_du_heldout"] == int(
            is_deep_unlearning_set(closure, [closure.atom_of_fact(r["target"])], r["forgotten_relationships_heldout"])
        )
    text = (run / "report.md").read_text()
    assert (
        "## Table 1 on held-out probe forms" in text
        and f"Every method saw `qa`; judged only on forms it never trained on or queried: {', '.join(held)}."
        in " ".join(text.split())
    )
    assert "unscorable" in text and "counts as forgotten" not in text
    from dukb.neural.metrics.summary import page_problems

    assert page_problems(text) == []
    import pandas as pd

    summary = pd.read_csv(run / "summary.csv")
    held_rows = summary[summary["reading"] == "paper (per target), held-out forms"]
    assert {"acc_at_recall", "ar_auc", "success_du"} <= set(held_rows["metric"])


def test_finetuning_on_more_forms_teaches_them(run):
    cfg = json.loads((run / "config.json").read_text())
    ft = json.loads((run / "finetune.json").read_text())
    assert ft["n_items"] > len(load_kb(cfg["kb"]).relationships) * 2  # qa + paraphrase + cloze items
    assert cfg["identity"]["model"]["finetune"]["forms"] == ["cloze", "qa", "paraphrase"]
    assert cfg["identity"]["heldout_rule"] == "pairs" and cfg["identity"]["heldout_forms"] is None
    # the finetuned model knows the paraphrase and cloze forms it was taught (the tiny model knows little else)
    base = cfg["heldout_known_before"]
    assert base["all"] >= 0.9
    # another set of forms is another run: resuming with it is refused, naming the key
    assert (
        main(
            [
                "evaluate",
                "--kb",
                cfg["kb"],
                "-o",
                str(run),
                "--methods",
                "ga,du_cl",
                "--grid",
                "ga=2,8",
                "--grid",
                "du_cl=2,6",
                "--n-targets",
                "2",
                "--device",
                DEVICE,
                "--resume",
            ]
        )
        == 2
    )


@pytest.mark.parametrize(
    "args, msg",
    [
        (["--heldout-forms", "qa,cloze"], "saw qa"),
        (["--heldout-forms", "nope"], "unknown probe kind"),
        (["--finetune-forms", "paraphrase"], "must include qa"),
    ],
)
def test_bad_forms_are_one_line_errors(small_kb, tmp_path, capsys, args, msg):
    assert (
        main(
            [
                "evaluate",
                "--kb",
                str(small_kb.source),
                "-o",
                str(tmp_path / "r"),
                "--n-targets",
                "1",
                "--device",
                DEVICE,
            ]
            + args
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dukb: error:") and msg in err[0]
    assert not (tmp_path / "r" / "finetuned").exists()  # refused before any finetuning
