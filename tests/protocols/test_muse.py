"""MUSE on the KB (Shi et al. 2024b): splits, metric functions by hand, and `dukb muse` end to end on the tiny model.

The splits are checked against an independent forward chainer (tests/independent_logic.py): a request's forget set
leaves none of its targets derivable.
"""

from __future__ import annotations

import json
import os

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")

from conftest import DEVICE, patch_everywhere
from dukb import InputError  # noqa: E402
from dukb.kb import load_kb  # noqa: E402
from dukb.kb.generate import generate  # noqa: E402
from dukb.neural.metrics.muse import bootstrap_ci, privleak_label, relative, rouge_l_f1, select_setting  # noqa: E402
from dukb.solver.closure import compute_closure  # noqa: E402
from dukb.solver.splits import base_split, cone_facts, forget_set  # noqa: E402
from tests.independent_logic import closure as ref_closure  # noqa: E402
from tests.independent_logic import parse_raw_rules

#: the fact-id dicts' keys -> probe fact kinds
KIND = {"relationships": "relationship", "biographies": "biography"}


def _keys(d: dict) -> set:
    return {(k, i) for k in ("relationships", "biographies") for i in d[k]}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_splits_partition_the_kb_and_the_forget_set_is_deep(seed):
    """holdout, forget, retain_train and retain_eval partition the KB; the holdout avoids every target's cone; the
    joint forget set leaves no target derivable (independent forward chainer)."""
    kb, _truth = generate(40, seed=seed)
    closure = compute_closure(kb)
    rels = [f.fact_id for f in kb.relationships]
    targets = rels[seed::7][:4]
    base = base_split(kb, closure, targets, holdout_frac=0.15, retain_train_frac=0.5, seed=seed)
    assert not _keys(base.holdout) & {("relationships", i) for i in cone_facts(closure, targets)}
    every = {("relationships", f.fact_id) for f in kb.relationships} | {
        ("biographies", b.fact_id) for b in kb.biographies
    }
    n_hold = len(_keys(base.holdout))
    assert 0 < n_hold <= round(0.15 * len(every))
    forget = forget_set(closure, targets, "joint")
    sp = base.request(forget, targets)
    parts = [_keys(sp.forget), _keys(sp.retain_train), _keys(sp.retain_eval), _keys(sp.holdout)]
    assert sum(map(len, parts)) == len(every) and set().union(*parts) == every
    assert _keys(sp.trained_without_forget()) == every - _keys(sp.forget) - _keys(sp.holdout)
    genders = {p.name: p.gender for p in kb.people.values()}
    kept = {(f.subject, f.relation, f.object) for f in kb.relationships if f.fact_id not in set(forget)}
    derived = ref_closure(kept, genders, parse_raw_rules())
    for t in targets:
        f = kb.relationship(t)
        assert (f.subject, f.relation, f.object) not in derived
    assert forget_set(closure, targets, "target") == sorted(set(targets))
    if base.holdout["relationships"]:
        with pytest.raises(InputError):
            base.request(base.holdout["relationships"][:1], targets)
    with pytest.raises(InputError):
        base_split(kb, closure, targets, holdout_frac=1.0)


def test_rouge_bootstrap_selection_by_hand():
    # LCS("a b c", "a c") = 2: precision 2/2, recall 2/3, F1 = 2·1·(2/3)/(1 + 2/3) = 0.8
    assert rouge_l_f1("a b c", "a c") == pytest.approx(0.8)
    assert rouge_l_f1("father", "") == 0.0
    # MUSE's code scores without stemming (muse_bench metrics/logger.py, use_stemmer=False): "fathers" is not
    # "father" unless stemming is asked for
    assert rouge_l_f1("his fathers", "his father") == pytest.approx(0.5)
    assert rouge_l_f1("his fathers", "his father", stem=True) == pytest.approx(1.0)
    assert bootstrap_ci([0.5] * 7, 500) == (0.5, 0.5)
    lo, hi = bootstrap_ci([0, 1] * 20, 2000, seed=3)
    assert lo < 0.5 < hi and bootstrap_ci([0, 1] * 20, 2000, seed=3) == (lo, hi)
    with pytest.raises(ValueError):
        bootstrap_ci([], 10)
    rows = [{"knowmem_retain": u, "i": i} for i, u in enumerate([0.9, 0.7, 0.4])]
    assert select_setting(rows, 0.8)["i"] == 1  # the first below f_retrain's utility
    assert select_setting(rows, 0.3)["i"] == 2  # none below: the last
    assert select_setting(rows, 0.3, "closest_utility")["i"] == 2
    assert select_setting(rows, 0.85, "closest_utility")["i"] == 0
    assert relative(27.3, 55.0) == pytest.approx(-0.5036, abs=1e-4)  # MUSE Table 3: GA_GDR on NEWS, C4
    assert relative(1.0, 0.0) is None
    assert [privleak_label(v) for v in (0.04, -0.05, 0.2, -0.998)] == ["ok", "ok", "over", "under"]


def test_text_items_train_every_token():
    """A text item is scored on every token (and EOS); a QA item only on its answer."""
    import tempfile

    from transformers import AutoTokenizer

    from dukb.neural.data import QA_KIND, TEXT_KIND, QAItem, encode_qa
    from dukb.neural.modelbuild import build_tiny_model
    from dukb.neural.spec import PROMPT_PRESETS

    tags = PROMPT_PRESETS["tiny"]
    with tempfile.TemporaryDirectory() as tmp:
        build_tiny_model(["Question: Who is A to B ?\nAnswer: father", "A is B 's father ."], tmp, seed=0)
        tok = AutoTokenizer.from_pretrained(tmp)
    text = QAItem(TEXT_KIND, "relationship", 0, "", "A is B 's father .")
    qa = QAItem(QA_KIND, "relationship", 0, "Who is A to B ?", "father")
    b = encode_qa(tok, tags, [text, qa])
    n_text = len(tok(text.answer, add_special_tokens=False)["input_ids"]) + 1
    assert int((b["labels"][0] != -100).sum()) == n_text
    assert int((b["labels"][1] != -100).sum()) == len(tok(" father", add_special_tokens=False)["input_ids"]) + 1


#: what the module's `dukb muse` run trained and scored (run dir -> record): every item a method was given to train
#: on (the unlearning context), the KnowMem QA pairs and the VerbMem / MIA texts scored
RECORDED: dict = {}


@pytest.fixture(scope="module")
def muse_run(tmp_path_factory):
    import dukb.neural.methods as methods
    import dukb.neural.metrics.muse as mm
    import dukb.neural.unlearn  # noqa: F401  (imported before the wrapping: it binds the real class)
    from dukb.cli.main import main

    out = tmp_path_factory.mktemp("muse") / "run"
    kb_dir = out.parent / "kb"  # a generated KB ("done when": end to end on a generated KB)
    assert main(["generate", "--people", "30", "--seed", "3", "-o", str(kb_dir)]) == 0
    args = [
        "muse",
        "--kb",
        str(kb_dir),
        "--methods",
        "ga,npo_gdr,whp",
        "--curve-methods",
        "ga",
        "--scale-sizes",
        "1,2",
        "--grid",
        "ga=2,8",
        "--grid",
        "npo_gdr=8",
        "--grid",
        "whp=10",
        "--holdout",
        "0.2",
        "--bootstrap",
        "200",
        "--device",
        DEVICE,
        "-o",
        str(out),
    ]
    rec = RECORDED.setdefault(
        str(out), {"forget": [], "retain": [], "knowmem": [], "verbmem": [], "mia": [], "open": True}
    )
    real_ctx, real_km, real_vm, real_mia = methods.UnlearnContext, mm.knowmem, mm.verbmem, mm.text_mia_scores

    def keep(key, items):
        if rec["open"]:
            rec[key] += items

    def ctx(lm, forget, retain=(), *a, **kw):
        keep("forget", forget)
        keep("retain", retain)
        return real_ctx(lm, forget, retain, *a, **kw)

    def knowmem(pred, items, *a, **kw):
        keep("knowmem", items)
        return real_km(pred, items, *a, **kw)

    def verbmem(pred, texts, *a, **kw):
        keep("verbmem", texts)
        return real_vm(pred, texts, *a, **kw)

    def mia(pred, items, *a, **kw):
        keep("mia", items)
        return real_mia(pred, items, *a, **kw)

    with pytest.MonkeyPatch.context() as mp:
        patch_everywhere(mp, methods, "UnlearnContext", ctx)
        for name, fn in (("knowmem", knowmem), ("verbmem", verbmem), ("text_mia_scores", mia)):
            mp.setattr(mm, name, fn)
        assert main(args) == 0
    rec["open"] = False
    return out, args


def test_a_finished_muse_run_keeps_its_locks_and_claims_out_of_sight(muse_run):
    """A finished run's top level (and models/) holds no lock or claim file: they are in RUN/.dukb (issue 38)."""
    from dukb.neural.run.files import BOOKKEEPING_DIR

    run, _ = muse_run
    top = {p.name for p in run.iterdir()}
    assert not [n for n in top if n.endswith((".lock", ".claim"))] and not {"units", "workers"} & top, top
    assert not list((run / "models").glob("*.lock"))
    assert {"config.yaml", "config.json", "commands.log", "results.jsonl", "report.md"} <= top
    assert list((run / BOOKKEEPING_DIR / "units").glob("*.claim"))


def test_muse_unlearns_on_the_text_corpus_alone(muse_run):
    """MUSE unlearns on D_forget (and D_retain^(reg)) alone; its QA sets are evaluation-only: every item a method
    was given to train on is a statement text of a forget or retain_train fact, no trained string is a KnowMem
    question, answer or prompt + answer, the forget texts trained are texts VerbMem scores, and the rows'
    ``trained_fact_ids`` are what was trained."""
    run, _ = muse_run
    rec = RECORDED[str(run)]
    assert rec["forget"] and rec["retain"] and rec["knowmem"] and rec["verbmem"]
    trained = rec["forget"] + rec["retain"]
    assert {it.kind for it in trained} == {"text"} and {it.kind for it in rec["knowmem"]} == {"qa"}
    texts = {it.answer for it in trained}
    scored_qa = set()
    for it in rec["knowmem"]:
        scored_qa |= {it.question, it.answer, it.question + " " + it.answer, it.question + it.answer}
    assert not texts & scored_qa
    assert not [(t, it.question) for t in texts for it in rec["knowmem"] if it.question in t]
    assert {it.answer for it in rec["forget"]} <= set(rec["verbmem"])  # VerbMem scores the forget corpus itself
    rows = _rows(run)
    splits = json.loads((run / "splits.json").read_text())
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
    for r in rows:
        assert r["scored_forms"] == {"knowmem": ["qa"], "verbmem": ["statement"], "mia": ["statement"]}
        if r["model_kind"] != "unlearned":
            continue
        assert r["trained_forms"]["forget"] == ["statement"]
        assert r["trained_forms"]["retain"] == (["statement"] if r["base_method"] == "npo_gdr" else [])
        assert r["trained_fact_ids"]["forget"] == splits["requests"][r["request"]]["forget"] == r["forget_fact_ids"]
        scored = splits["requests"]["scale-2" if r["request"] == "sustain-2" else r["request"]]
        assert not set(r["trained_fact_ids"]["retain"]["relationships"]) & set(scored["retain_eval"]["relationships"])
    config = json.loads((run / "config.json").read_text())
    assert config["identity"]["training"]["version"] == 2


def _rows(run):
    return [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]


def test_muse_end_to_end(muse_run):
    """PrivLeak of f_retrain is 0; f_target's forget MIA AUC is above f_retrain's (and its PrivLeak negative);
    every row records its forget facts; regulariser data never overlaps what is scored; the report and figures
    exist and the table rows recompute from the rows."""
    run, _ = muse_run
    rows = _rows(run)
    splits = json.loads((run / "splits.json").read_text())
    for req in ("main", "scale-1", "scale-2", "sustain-1", "sustain-2"):
        mine = [r for r in rows if r["request"] == req]
        ref = {r["model_kind"]: r for r in mine if r["model_kind"] != "unlearned"}
        assert ref["retrain"]["privleak"] == 0.0
        assert ref["target"]["mia_auc"] > ref["retrain"]["mia_auc"]
        assert ref["target"]["privleak"] < 0
        assert ref["target"]["knowmem_forget"] > ref["retrain"]["knowmem_forget"]
    for r in rows:
        sp = splits["requests"][r["request"]]
        assert r["forget_fact_ids"] == sp["forget"]
        for k in ("verbmem_forget", "knowmem_forget", "knowmem_retain"):
            assert 0 <= r[k] <= 1 and r[k] == pytest.approx(sum(r["items"][k]) / len(r["items"][k]), abs=1e-3)
        if r["model_kind"] == "unlearned":
            scored = splits["requests"]["scale-2" if r["request"] == "sustain-2" else r["request"]]
            used = set(r["retain_fact_ids"]["relationships"])
            assert not used & set(scored["retain_eval"]["relationships"])
            assert not used & set(scored["forget"]["relationships"])
            assert (r["base_method"] in ("npo_gdr",)) == bool(used)
    assert len([r for r in rows if r["request"] == "main" and r["model_kind"] == "unlearned"]) == 4
    # Success-DU (Wu et al. 2025, Definition 2) of every row, from the facts it no longer answers on the qa form
    # (which no MUSE method trains on), over every target unlearned so far
    from dukb.solver.closure import compute_closure
    from dukb.solver.mdus import is_deep_unlearning_set

    config = json.loads((run / "config.json").read_text())
    closure = compute_closure(load_kb(config["kb"]))
    for r in rows:
        cum = "scale-2" if r["request"] == "sustain-2" else "scale-1" if r["request"] == "sustain-1" else r["request"]
        targets = splits["requests"][cum]["targets"]
        assert r["success_du_forms"] == ["qa"] and 0 <= r["accuracy_all_facts"] <= 1
        assert r["success_du"] == int(
            all(
                is_deep_unlearning_set(closure, [closure.atom_of_fact(t)], r["forgotten_relationships"])
                for t in targets
            )
        )
    for req in ("main", "scale-2"):
        ref = {r["model_kind"]: r for r in rows if r["request"] == req and r["model_kind"] != "unlearned"}
        assert ref["retrain"]["success_du"] >= ref["target"]["success_du"]
        assert len(ref["retrain"]["forgotten_relationships"]) > len(ref["target"]["forgotten_relationships"])
    for r in rows:
        assert (
            r["scored_forget_fact_ids"]
            == splits["requests"][
                "scale-2" if r["request"] == "sustain-2" else "scale-1" if r["request"] == "sustain-1" else r["request"]
            ]["forget"]
        )
    sus = [r for r in rows if r["request"] == "sustain-2" and r["model_kind"] == "unlearned"]
    assert sus, "the second sequential request ran from the first one's model"
    report = (run / "report.md").read_text()
    assert "Table 3 layout" in report and "| Retrain |" in report and "C6 sustainability" in report
    for png in ("scalability.png", "sustainability.png", "mia_roc.png"):
        assert (run / png).stat().st_size > 1000
    import pandas as pd

    summary = pd.read_csv(run / "summary.csv")
    main_rows = summary[summary["request"] == "main"]
    assert list(main_rows["name"])[:2] == ["Target", "Retrain"]
    retrain = main_rows[main_rows["name"] == "Retrain"].iloc[0]
    for _, s in main_rows.iterrows():
        if s["name"] not in ("Target", "Retrain") and retrain["knowmem_retain"]:
            assert s["knowmem_retain_vs_retrain"] == pytest.approx(
                (s["knowmem_retain"] - retrain["knowmem_retain"]) / retrain["knowmem_retain"]
            )


def test_muse_resume_refuses_other_settings_and_adds_nothing(muse_run, capsys):
    from dukb.cli.main import main

    run, args = muse_run
    before = (run / "results.jsonl").read_text()
    assert main(args + ["--resume"]) == 0
    assert (run / "results.jsonl").read_text() == before  # every row was done
    assert main(args + ["--resume", "--mia-k", "0.5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("dukb: error:") and "mia_k" in err and "0.4" in err and "0.5" in err
    assert (run / "results.jsonl").read_text() == before
    assert main(["muse", "--kb", "demo", "--verbmem-prefix", "1.5", "-o", str(run.parent / "bad")]) == 2
    assert main(["muse", "--kb", "demo", "--scale-sizes", "2,1", "-o", str(run.parent / "bad")]) == 2
    for share in ("0", "1"):  # an empty retain_train (no regulariser data) or retain_eval (no utility)
        assert main(["muse", "--kb", "demo", "--retain-train", share, "-o", str(run.parent / "bad")]) == 2
    assert (
        main(["muse", "--kb", "demo", "--methods", "ga", "--curve-methods", "tv", "-o", str(run.parent / "bad")]) == 2
    )


def test_verbmem_defaults_are_muses_and_the_reference_is_cut_to_the_budget():
    """MUSE's eval.py: 128 new tokens, scored against gt_ids[:, :128], no stemming; dukb's config and function
    defaults are the same, and ``split_prefix``'s limit cuts the true continuation."""
    import inspect

    from dukb.neural.metrics.muse import split_prefix, verbmem
    from dukb.neural.protocols.muse.config import MuseConfig

    assert MuseConfig().verbmem_tokens == 128 and MuseConfig().verbmem_stemming is False
    assert MuseConfig().mia_k == 0.4  # eval.py: privleak_auc_key = 'forget_holdout_Min-40%'
    params = inspect.signature(verbmem).parameters
    assert params["max_new_tokens"].default == 128 and params["stem"].default is False

    class Words:  # a word-level tokenizer
        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": text.split()}

        def decode(self, ids, skip_special_tokens=True):
            return " ".join(ids)

    text = "a b c d e f g h"
    assert split_prefix(Words(), text, 0.5) == ("a b c d", "e f g h")
    assert split_prefix(Words(), text, 0.5, limit=2) == ("a b c d", "e f")
