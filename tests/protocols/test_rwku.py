"""RWKU on the KB (Jin et al. 2024): neighbour sets and row fields by hand, and `dukb rwku` end to end on the tiny
model (recall under attack never above recall, batch requests, resume refusal)."""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")

from conftest import DEVICE, patch_everywhere
from dukb.neural.metrics.rwku import AA_KINDS, neighbour_facts, rwku_fields  # noqa: E402

#: the fact-id dicts' keys -> probe fact kinds
KIND = {"relationships": "relationship", "biographies": "biography"}


@pytest.fixture()
def family(kb_builder):
    return kb_builder(
        {"A": "male", "B": "female", "C": "male", "D": "female", "E": "male"},
        [("A", "wife", "B"), ("B", "husband", "A"), ("C", "father", "A"), ("D", "husband", "E")],
        [("A", "birthyear", "1950"), ("E", "birthyear", "1960")],
    )


def test_neighbours_are_the_other_facts_about_the_forget_facts_people(family):
    # forget fact 0 (A wife B): people A, B; their other relationships 1 (B-A) and 2 (C father A); A's biography
    assert neighbour_facts(family, [0]) == {"relationships": [1, 2], "biographies": [0], "dropped": []}
    assert neighbour_facts(family, [3]) == {"relationships": [], "biographies": [1], "dropped": []}


def test_neighbours_leave_out_the_targets_cone(family):
    """RWKU's neighbours "must not involve the target": a fact that can derive the target (its cone) is dropped and
    recorded; the cone's facts are scored in no group."""
    from dukb.neural.metrics.rwku import cone_ids
    from dukb.solver.closure import compute_closure

    closure = compute_closure(family)
    cone = cone_ids(closure, [0])
    # "B is A's wife" (fact 0) follows from "A is B's husband" (fact 1); fact 2 (C father A) takes part in rule
    # instances that reach it too (the father/mother/child/husband rules); D and E (fact 3) are another family
    assert cone == [0, 1, 2]
    assert neighbour_facts(family, [0], cone) == {"relationships": [], "biographies": [0], "dropped": [1, 2]}
    assert neighbour_facts(family, [0], [0, 1]) == {"relationships": [2], "biographies": [0], "dropped": [1]}
    rows = [("qa", "relationship", 1, 1.0), ("qa", "relationship", 2, 0.5), ("qa", "relationship", 3, 0.25)]
    df = pd.DataFrame(rows, columns=["kind", "fact_kind", "fact_id", "rouge_l"])
    out = rwku_fields(df, family, [0], neighbour_facts(family, [0], [0, 1]), {"fm": {}, "rm": {}}, cone=[0, 1])
    assert out["rouge_neighbour_qa"] == 0.5 and out["rouge_distant_qa"] == 0.25  # fact 1: neither


def test_rwku_fields_by_hand(family):
    rows = [
        ("qa", "relationship", 0, 0.0),
        ("cloze", "relationship", 0, 1.0),
        ("prefix_injection", "relationship", 0, 1.0),
        ("reverse", "relationship", 0, 0.0),
        ("qa", "relationship", 1, 1.0),
        ("cloze", "relationship", 1, 0.5),
        ("qa", "biography", 0, 1.0),
        ("qa", "relationship", 3, 0.25),
        ("paraphrase", "relationship", 0, 1.0),
    ]
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


#: what the module's `dukb rwku` run trained and scored, recorded by wrapping the unlearning context (every item a
#: method is given to train on) and the scoring functions (every probe and MIA member): run dir -> record
RECORDED: dict = {}


def record_training_and_scoring(mp, rec: dict) -> None:
    """Wrap UnlearnContext (forget and retain items), probe (probe items) and the QA MIA scorer (FM and RM members)
    so that ``rec`` receives every item trained and scored while ``rec["open"]`` is true."""
    import dukb.neural.methods as methods
    import dukb.neural.metrics.rwku as rwku_metrics
    import dukb.neural.probe as probe_mod
    import dukb.neural.protocols.evaluate.config  # noqa: F401  (imported before the wrapping: they bind the real functions)
    import dukb.neural.protocols.evaluate.identity  # noqa: F401
    import dukb.neural.protocols.rwku.run  # noqa: F401
    import dukb.neural.unlearn  # noqa: F401

    real_ctx, real_probe, real_mia = methods.UnlearnContext, probe_mod.probe, rwku_metrics.qa_mia_scores

    def keep(key, items):
        if rec.get("open"):
            rec.setdefault(key, []).extend(items)

    def ctx(lm, forget, retain=(), *a, **kw):
        keep("forget", forget)
        keep("retain", retain)
        return real_ctx(lm, forget, retain, *a, **kw)

    def probe(pred, items, *a, **kw):
        keep("probed", items)
        return real_probe(pred, items, *a, **kw)

    def mia(pred, items, *a, **kw):
        keep("mia", items)
        return real_mia(pred, items, *a, **kw)

    patch_everywhere(mp, methods, "UnlearnContext", ctx)
    patch_everywhere(mp, probe_mod, "probe", probe)
    patch_everywhere(mp, rwku_metrics, "qa_mia_scores", mia)  # the protocol calls it through the metric registry


@pytest.fixture(scope="module")
def rwku_run(tmp_path_factory):
    from dukb.cli.main import main

    out = tmp_path_factory.mktemp("rwku") / "run"
    kb_dir = out.parent / "kb"  # a generated KB ("done when": end to end on a generated KB)
    assert main(["generate", "--people", "30", "--seed", "3", "-o", str(kb_dir)]) == 0
    args = [
        "rwku",
        "--kb",
        str(kb_dir),
        "--n-targets",
        "2",
        "--methods",
        "ga,npo_gdr,repe",
        "--grid",
        "ga=2,8",
        "--grid",
        "npo_gdr=32",
        "--grid",
        "repe=1",
        "--batch-sizes",
        "2",
        "--device",
        DEVICE,
        "-o",
        str(out),
    ]
    rec = RECORDED.setdefault(str(out), {"open": True})
    with pytest.MonkeyPatch.context() as mp:
        record_training_and_scoring(mp, rec)
        assert main(args) == 0
    rec["open"] = False
    return out, args


def test_rwku_rows_carry_success_du(rwku_run):
    """Success-DU on every RWKU row: 1 exactly when every target of the request is underivable from the facts the
    model still knows (Wu et al. 2025, Definition 2)."""
    from dukb.kb import load_kb
    from dukb.solver.closure import compute_closure
    from dukb.solver.mdus import is_deep_unlearning_set

    run, _ = rwku_run
    rows = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    closure = compute_closure(load_kb(json.loads((run / "config.json").read_text())["kb"]))
    for r in rows:
        assert r["success_du"] == int(
            all(
                is_deep_unlearning_set(closure, [closure.atom_of_fact(t)], r["forgotten_relationships"])
                for t in r["targets"]
            )
        )
    assert any(r["success_du"] for r in rows) or all(r["recall"] < 1 for r in rows)


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
        assert r["neighbours_dropped"] == len(reqs[r["request"]]["neighbours"]["dropped"])
        assert not set(r["neighbour_fact_ids"]["relationships"]) & set(reqs[r["request"]]["cone"])
        assert r["scored_forms"]["mia"] == ["qa"] and {"qa", "cloze"} <= set(r["scored_forms"]["probes"])
        if r["model_kind"] == "before":
            if ft_acc == 1.0:  # a model that knows every fact has forgotten none
                assert r["recall"] == 0.0 and r["rouge_forget_qa"] == 1.0
        else:
            assert not set(r["retain_fact_ids"]["relationships"]) & set(r["forget_set"])
            assert r["trained_forms"]["forget"] == ["description"]
            assert r["trained_fact_ids"]["forget"] == {"relationships": sorted(r["forget_set"]), "biographies": []}
            assert r["trained_fact_ids"]["retain"] == r["retain_fact_ids"]
            assert (r["trained_forms"]["retain"] == ["description"]) == (r["base_method"] == "npo_gdr")
            near = set(reqs[r["request"]]["cone"]) | set(r["neighbour_fact_ids"]["relationships"])
            assert not set(r["retain_fact_ids"]["relationships"]) & near  # retain data: distant facts only
    assert sum(reqs[n]["neighbours"]["dropped"] != [] for n in reqs) >= 1  # the cone does take neighbours away
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
    deep-unlearning protocol; for the same finetuned model, target and method the RWKU fields equal those of
    `dukb rwku`'s row. The method is RepE, which trains nothing and steers with the same people's names in both
    protocols (the gradient methods train on the forget QA in `dukb evaluate` and on the description corpus in
    `dukb rwku`), and evaluate's neighbours leave out the target's cone as rwku's do."""
    from dukb.cli.main import main

    run, _ = rwku_run
    rows = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    ref = next(r for r in rows if r["request_kind"] == "single" and r.get("method") == "repe")
    tfile = tmp_path / "t.txt"
    tfile.write_text(f"{ref['targets'][0]}\n")
    out = tmp_path / "ev"
    assert (
        main(
            [
                "evaluate",
                "--kb",
                str(run.parent / "kb"),
                "--finetuned",
                str(run / "finetuned"),
                "--targets-file",
                str(tfile),
                "--methods",
                "repe",
                "--grid",
                "repe=1",
                "--metrics",
                "recall,knowmem,verbmem,rwku_rouge,mia_fm_rm",
                "--device",
                DEVICE,
                "-o",
                str(out),
            ]
        )
        == 0
    )
    (row,) = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    for k in (
        "rouge_forget_qa",
        "rouge_forget_fb",
        "rouge_forget_aa",
        "rouge_forget_all",
        "rouge_neighbour_all",
        "rouge_distant_all",
        "recall",
    ):
        assert row[k] == pytest.approx(ref[k]), k
    for s in ("loss", "mink"):
        assert row["mia_auc_fm_rm"][s] == pytest.approx(ref["mia_auc_fm_rm"][s])
        assert row["mia_fm"][s] == pytest.approx(ref["mia_fm"][s], rel=1e-4)
    assert 0 <= row["knowmem_forget"] <= 1 and 0 <= row["knowmem_retain"] <= 1 and 0 <= row["verbmem_forget"] <= 1


def test_retain_train_facts_are_scored_in_no_group(family):
    """Honest evaluation: a fact a method trains on as retain data counts in no neighbour or distant mean."""
    rows = [
        ("qa", "relationship", 0, 0.0),
        ("qa", "relationship", 1, 1.0),
        ("qa", "relationship", 2, 0.0),
        ("qa", "relationship", 3, 0.5),
        ("qa", "biography", 1, 1.0),
    ]
    df = pd.DataFrame(rows, columns=["kind", "fact_kind", "fact_id", "rouge_l"])
    mia = {"fm": {}, "rm": {}}
    plain = rwku_fields(df, family, [0], neighbour_facts(family, [0]), mia)
    assert plain["rouge_neighbour_qa"] == 0.5 and plain["rouge_distant_qa"] == 0.75
    honest = rwku_fields(
        df, family, [0], neighbour_facts(family, [0]), mia, exclude={"relationships": [1, 3], "biographies": []}
    )
    assert honest["rouge_neighbour_qa"] == 0.0 and honest["rouge_distant_qa"] == 1.0


def test_rwku_trains_nothing_it_scores(rwku_run):
    """RWKU unlearns from a synthetic description corpus and keeps every probe and MIA member for evaluation: the
    exact texts the methods were given to train on (recorded by wrapping the unlearning context) share no string
    with any probe's question, answer or prompt + answer, or any FM/RM member, that the run scored (recorded by
    wrapping the scorers); the statement sentence (the cloze prompt with its answer) is never trained either. The
    rows' ``trained_fact_ids`` are what was trained."""
    from dukb.kb import load_kb
    from dukb.kb.probes import fact_statements

    run, _ = rwku_run
    rec = RECORDED[str(run)]
    trained = rec["forget"] + rec["retain"]
    assert rec["forget"] and rec["retain"] and rec["probed"] and rec["mia"]
    assert {it.kind for it in trained} == {"text"} and all(it.question == "" for it in trained)
    texts = {it.answer for it in trained}
    scored = set()
    for it in rec["probed"] + rec["mia"]:
        scored |= {it.question, it.answer, it.question + " " + it.answer, it.question + it.answer}
    assert not texts & scored
    # nor does a trained text contain a scored question, or a scored question contain a trained text
    questions = {it.question for it in rec["probed"] + rec["mia"]}
    assert not [(t, q) for t in texts for q in questions if q in t or t in q]
    kb = load_kb(run.parent / "kb")
    assert not texts & set(fact_statements(kb).values())
    # the rows name the facts whose descriptions were trained
    rows = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    for part in ("forget", "retain"):
        recorded = {(it.fact_kind, it.fact_id) for it in rec[part]}
        in_rows = {
            (KIND[k], i)
            for r in rows
            if r["model_kind"] == "unlearned"
            for k, ids in r["trained_fact_ids"][part].items()
            for i in ids
        }
        assert recorded == in_rows, part


def test_rwku_refuses_methods_that_train_on_questions(capsys, tmp_path):
    """RT, DPO, PO and closed-loop deep unlearning train on questions about the forget facts, which RWKU keeps for
    evaluation: refused before anything runs."""
    from dukb.cli.main import main

    for m in ("rt", "dpo"):
        assert (
            main(
                [
                    "rwku",
                    "--kb",
                    "demo",
                    "--methods",
                    m,
                    "--batch-sizes",
                    "",
                    "--device",
                    DEVICE,
                    "-o",
                    str(tmp_path / "run"),
                ]
            )
            == 2
        )
        err = capsys.readouterr().err
        assert m in err and "text corpus" in err
        assert not (tmp_path / "run").exists()


def test_the_tiny_vocabulary_covers_the_description_corpus(family):
    """The tiny tokenizer is word-level: a model built for the QA forms alone (`dukb evaluate`'s) maps description
    words to [UNK], and `dukb rwku --finetuned` refuses it; built with the plain texts (as `dukb rwku` finetunes) it
    knows every description word."""
    from dukb import InputError
    from dukb.neural.data import kb_descriptions, vocabulary_texts
    from dukb.neural.modelbuild import build_tokenizer
    from dukb.neural.protocols.rwku.config import _check_covers
    from dukb.neural.spec import PROMPT_PRESETS

    tags = PROMPT_PRESETS["tiny"]
    corpus = kb_descriptions(family)
    assert len(corpus) == 3 * (len(family.relationships) + len(family.biographies))
    with pytest.raises(InputError, match="description corpus"):
        _check_covers(build_tokenizer(vocabulary_texts(family, tags)), corpus, "model")
    _check_covers(build_tokenizer(vocabulary_texts(family, tags, statements=True)), corpus, "model")


def test_a_run_that_trained_on_the_probes_is_not_resumed(rwku_run, tmp_path, capsys):
    """The training data is part of the run identity (``rwku.training``, version 2): a run made when unlearning
    trained on the forget QA (no such entry) is refused, not mixed with rows trained on the descriptions."""
    import shutil

    from dukb.cli.main import main

    run, args = rwku_run
    config = json.loads((run / "config.json").read_text())
    assert config["identity"]["rwku"]["training"]["version"] == 2
    assert json.loads((run / "finetuned" / "finetune.json").read_text())["identity"]["items"] == ["qa", "description"]
    old = tmp_path / "old"
    shutil.copytree(run, old, ignore=shutil.ignore_patterns("finetuned", "run.lock"))
    del config["identity"]["rwku"]["training"]
    (old / "config.json").write_text(json.dumps(config))
    capsys.readouterr()
    assert main(args[:-1] + [str(old), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "rwku" in err and "training" in err
