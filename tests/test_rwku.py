"""RWKU on the KB (Jin et al. 2024): neighbour sets and row fields by hand, and `dukb rwku` end to end on the tiny
model (recall under attack never above recall, batch requests, resume refusal)."""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")

from dukb.neural.rwku import AA_KINDS, neighbour_facts, rwku_fields  # noqa: E402


@pytest.fixture()
def family(kb_builder):
    return kb_builder({"A": "male", "B": "female", "C": "male", "D": "female", "E": "male"},
                      [("A", "wife", "B"), ("B", "husband", "A"), ("C", "father", "A"), ("D", "husband", "E")],
                      [("A", "birthyear", "1950"), ("E", "birthyear", "1960")])


def test_neighbours_are_the_other_facts_about_the_forget_facts_people(family):
    # forget fact 0 (A wife B): people A, B; their other relationships 1 (B-A) and 2 (C father A); A's biography
    assert neighbour_facts(family, [0]) == {"relationships": [1, 2], "biographies": [0]}
    assert neighbour_facts(family, [3]) == {"relationships": [], "biographies": [1]}


def test_rwku_fields_by_hand(family):
    rows = [("qa", "relationship", 0, 0.0), ("cloze", "relationship", 0, 1.0), ("prefix_injection", "relationship", 0,
                                                                              1.0),
            ("reverse", "relationship", 0, 0.0), ("qa", "relationship", 1, 1.0), ("cloze", "relationship", 1, 0.5),
            ("qa", "biography", 0, 1.0), ("qa", "relationship", 3, 0.25), ("paraphrase", "relationship", 0, 1.0)]
    df = pd.DataFrame(rows, columns=["kind", "fact_kind", "fact_id", "rouge_l"])
    mia = {"fm": {"loss": [-3.0]}, "rm": {"loss": [-1.0, -2.0]}}
    out = rwku_fields(df, family, [0], neighbour_facts(family, [0]), mia)
    assert out["rouge_forget_qa"] == 0.0 and out["rouge_forget_fb"] == 1.0
    assert out["rouge_forget_aa"] == 0.5  # prefix injection 1, reverse 0; paraphrase is no RWKU AA kind
    assert out["rouge_forget_all"] == pytest.approx(2 / 4)
    assert out["rouge_forget_aa_by_kind"] == {"prefix_injection": 1.0, "reverse": 0.0}
    assert out["rouge_neighbour_qa"] == 1.0 and out["rouge_neighbour_fb"] == 0.5
    assert out["rouge_neighbour_all"] == pytest.approx(2.5 / 3)
    assert out["rouge_distant_qa"] == 0.25 and out["rouge_distant_fb"] is None
    assert out["mia_fm"] == {"loss": -3.0} and out["mia_rm"] == {"loss": -1.5}
    assert out["mia_auc_fm_rm"] == {"loss": 0.0}  # the forget member scores below every retain member
    assert set(AA_KINDS) >= set(out["rouge_forget_aa_by_kind"])


@pytest.fixture(scope="module")
def rwku_run(tmp_path_factory):
    from dukb.cli.main import main

    out = tmp_path_factory.mktemp("rwku") / "run"
    kb_dir = out.parent / "kb"  # a generated KB ("done when": end to end on a generated KB)
    assert main(["generate", "--people", "30", "--seed", "3", "-o", str(kb_dir)]) == 0
    args = ["rwku", "--kb", str(kb_dir), "--n-targets", "2", "--methods", "ga,npo_gdr", "--grid", "ga=2,8",
            "--grid", "npo_gdr=32", "--batch-sizes", "2", "--device", "cpu", "-o", str(out)]
    assert main(args) == 0
    return out, args


def test_rwku_end_to_end(rwku_run):
    run, _ = rwku_run
    rows = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    reqs = {r["name"]: r for r in json.loads((run / "requests.json").read_text())["requests"]}
    assert set(reqs) == {r["request"] for r in rows} and len(reqs) == 3
    batch = reqs["batch-2"]
    ft_acc = json.loads((run / "finetuned" / "finetune.json").read_text())["accuracy"]
    singles = [r for n, r in reqs.items() if n.startswith("target-")]
    assert sorted(batch["forget"]) == sorted(t for r in singles for t in r["targets"])
    for r in rows:
        assert r["recall_under_attack"] <= r["recall"]
        for k in ("rouge_forget_qa", "rouge_forget_all", "rouge_neighbour_qa", "rouge_distant_qa"):
            assert 0 <= r[k] <= 1
        assert set(r["mia_auc_fm_rm"]) == {"loss", "zlib", "mink", "minkpp"}
        assert r["neighbour_fact_ids"] == reqs[r["request"]]["neighbours"]
        if r["model_kind"] == "before":
            if ft_acc == 1.0:  # a model that knows every fact has forgotten none
                assert r["recall"] == 0.0 and r["rouge_forget_qa"] == 1.0
        else:
            assert not set(r["retain_fact_ids"]["relationships"]) & set(r["forget_set"])
    # NPO_GDR at 32 steps forgets the forget QA (measured on this KB: F-QA ROUGE 0.0 for every request at 16 and 32
    # steps with 1 and with 2 threads; at 8 steps one target kept 1.0 with 2 threads)
    strong = [r for r in rows if r.get("method") == "npo_gdr"]
    assert all(r["rouge_forget_qa"] < 1.0 for r in strong)
    report = (run / "report.md").read_text()
    assert "Single-target" in report and "Batch-target: batch-2" in report and "per adversarial kind" in report
    for png in ("aa_kinds.png", "batch_targets.png"):
        assert (run / png).stat().st_size > 1000


def test_rwku_resume(rwku_run, capsys):
    from dukb.cli.main import main

    run, args = rwku_run
    before = (run / "results.jsonl").read_text()
    assert main(args + ["--resume"]) == 0
    assert (run / "results.jsonl").read_text() == before
    assert main(args + ["--resume", "--forget-scope", "joint"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("dukb: error:") and "forget_scope" in err
    assert main(["rwku", "--kb", "demo", "--batch-sizes", "1", "-o", str(run.parent / "bad")]) == 2


def test_evaluate_metrics_reproduce_the_rwku_rows(rwku_run, tmp_path):
    """`dukb evaluate --metrics ...,knowmem,verbmem,rwku_rouge,mia_fm_rm` adds MUSE's and RWKU's metrics to the
    deep-unlearning protocol; for the same finetuned model, target, method and setting the RWKU fields equal those
    of `dukb rwku`'s row."""
    from dukb.cli.main import main

    run, _ = rwku_run
    rows = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    ref = next(r for r in rows if r["request_kind"] == "single" and r.get("method") == "ga"
               and r["setting"]["steps"] == 8)
    tfile = tmp_path / "t.txt"
    tfile.write_text(f"{ref['targets'][0]}\n")
    out = tmp_path / "ev"
    assert main(["evaluate", "--kb", str(run.parent / "kb"), "--finetuned", str(run / "finetuned"), "--targets-file", str(tfile),
                 "--methods", "ga", "--grid", "ga=8", "--metrics", "recall,knowmem,verbmem,rwku_rouge,mia_fm_rm",
                 "--device", "cpu", "-o", str(out)]) == 0
    (row,) = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    for k in ("rouge_forget_qa", "rouge_forget_fb", "rouge_forget_aa", "rouge_forget_all", "rouge_neighbour_all",
              "rouge_distant_all", "recall"):
        assert row[k] == pytest.approx(ref[k]), k
    for s in ("loss", "mink"):
        assert row["mia_auc_fm_rm"][s] == pytest.approx(ref["mia_auc_fm_rm"][s])
        assert row["mia_fm"][s] == pytest.approx(ref["mia_fm"][s], rel=1e-4)
    assert 0 <= row["knowmem_forget"] <= 1 and 0 <= row["knowmem_retain"] <= 1 and 0 <= row["verbmem_forget"] <= 1


def test_retain_train_facts_are_scored_in_no_group(family):
    """Honest evaluation: a fact a method trains on as retain data counts in no neighbour or distant mean."""
    rows = [("qa", "relationship", 0, 0.0), ("qa", "relationship", 1, 1.0), ("qa", "relationship", 2, 0.0),
            ("qa", "relationship", 3, 0.5), ("qa", "biography", 1, 1.0)]
    df = pd.DataFrame(rows, columns=["kind", "fact_kind", "fact_id", "rouge_l"])
    mia = {"fm": {}, "rm": {}}
    plain = rwku_fields(df, family, [0], neighbour_facts(family, [0]), mia)
    assert plain["rouge_neighbour_qa"] == 0.5 and plain["rouge_distant_qa"] == 0.75
    honest = rwku_fields(df, family, [0], neighbour_facts(family, [0]), mia,
                         exclude={"relationships": [1, 3], "biographies": []})
    assert honest["rouge_neighbour_qa"] == 0.0 and honest["rouge_distant_qa"] == 1.0
