"""`--compat rwku` and `--compat restor` (issue 41, items 4-5): each deviation from the papers' released code is a
named option whose paper value is selectable; the presets resolve every component and an explicit option wins; the
run identity records a component only when it is not dukb's default (older runs compare equal); the reports say
where a run differs from the paper code. Parity: RWKU's ROUGE-L (the `rouge` package, on the answer line of up to
30 tokens) against an implementation written here from RWKU's eval_forget.py and rouge 1.0.1's rouge_score.py (and
against the package itself when installed); RESTOR's NPO (one term on the batch-mean NLL difference) against its
NPO.py on given tensors."""

from __future__ import annotations

import itertools
import json
import math
import os
import random

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")

from conftest import DEVICE, patch_everywhere  # noqa: E402
from dukb import InputError  # noqa: E402
from dukb.neural.declare import compat_note  # noqa: E402
from dukb.neural.protocols.rwku.config import RWKU_COMPAT, RwkuConfig  # noqa: E402
from dukb.neural.protocols.rwku.rouge import rwku_rouge_l_recall  # noqa: E402
from dukb.neural.restor.config import RestorConfig  # noqa: E402


# ------------------------------------------------------------------------------------- RWKU's ROUGE-L -------------
def reference_rouge_l_recall(answer: str, output: str) -> float:
    """RWKU's per-probe ROUGE-L recall, transliterated from jinzhuoran/RWKU eval_forget.py:115-133 (strip,
    'NOANSWER' for an empty answer, ``Rouge().get_scores(...)["rouge-l"]["r"]``) and pltrdy/rouge 1.0.1
    (``Rouge._get_scores``' sentence split, ``rouge_l_summary_level``, ``_union_lcs``, ``_lcs`` as a dict table and
    the recursive ``_recon_lcs``, every word set exclusive). Raises ValueError where the package does."""
    if len(output) == 0 or len(output.strip()) == 0:
        output = "NOANSWER"
    hyp = [" ".join(_.split()) for _ in output.strip().split(".") if len(_) > 0]
    ref = [" ".join(_.split()) for _ in answer.split(".") if len(_) > 0]
    if len(hyp) <= 0 or len(ref) <= 0:
        raise ValueError("Collections must contain at least 1 sentence.")
    m = len(set(itertools.chain(*[_.split(" ") for _ in ref])))
    union: set = set()
    for ref_s in ref:
        x = ref_s.split(" ")
        for eval_s in hyp:
            y = eval_s.split(" ")
            table = {}
            for i in range(len(x) + 1):
                for j in range(len(y) + 1):
                    if i == 0 or j == 0:
                        table[i, j] = 0
                    elif x[i - 1] == y[j - 1]:
                        table[i, j] = table[i - 1, j - 1] + 1
                    else:
                        table[i, j] = max(table[i - 1, j], table[i, j - 1])

            def recon(i, j, x=x, y=y, table=table):
                if i == 0 or j == 0:
                    return []
                if x[i - 1] == y[j - 1]:
                    return recon(i - 1, j - 1) + [x[i - 1]]
                if table[i - 1, j] > table[i, j - 1]:
                    return recon(i - 1, j)
                return recon(i, j - 1)

            union = union | set(recon(len(x), len(y)))
    return len(union) / m


def _reference_or_zero(answer: str, output: str) -> float:
    """:func:`reference_rouge_l_recall`, 0.0 where the package raises (an output of dots only: no word to score)."""
    try:
        return reference_rouge_l_recall(answer, output)
    except ValueError:
        return 0.0


WORDS = ["a", "b", "c", "Paris", "paris", "the", "of", "Ann", "Smith", ",", ".", "..", "U.S.", "x.y", " "]


def _random_pairs(n: int, seed: int = 0):
    rng = random.Random(seed)
    for _ in range(n):
        answer = "".join(rng.choice(WORDS) + rng.choice(["", " ", " "]) for _ in range(rng.randint(1, 5)))
        output = "".join(rng.choice(WORDS) + rng.choice(["", " ", "  "]) for _ in range(rng.randint(0, 30)))
        yield answer, output


def test_rwku_rouge_equals_the_reference_on_random_texts():
    n = 0
    for answer, output in _random_pairs(3000):
        try:
            want = reference_rouge_l_recall(answer, output)
        except ValueError:  # the package raises (an output of dots only): dukb scores nothing, 0
            assert rwku_rouge_l_recall(answer, output) == 0.0
            continue
        n += 1
        assert rwku_rouge_l_recall(answer, output) == pytest.approx(want, abs=1e-12), (answer, output)
    assert n > 2500


def test_rwku_rouge_equals_the_rouge_package_when_installed():
    rouge = pytest.importorskip("rouge")
    scorer = rouge.Rouge()
    n = 0
    for answer, output in _random_pairs(3000, seed=1):
        hyp = output.strip() or "NOANSWER"
        try:
            want = scorer.get_scores(hyps=[hyp], refs=[answer], avg=True)["rouge-l"]["r"]
        except ValueError:
            continue
        n += 1
        assert rwku_rouge_l_recall(answer, output) == pytest.approx(want, abs=1e-12), (answer, output)
    assert n > 2500


@pytest.mark.parametrize(
    "answer,output,rwku,stemmed",
    [
        ("Paris", "Paris, France", 0.0, 1.0),  # punctuation stays on the word; rouge-score drops it
        ("Paris", "paris", 0.0, 1.0),  # case kept
        ("teachers", "teacher", 0.0, 1.0),  # no stemming
        ("Ann Smith", "Smith Ann", 0.5, 0.5),
        ("the son of the king", "the king", 0.5, 0.4),  # distinct words: 2 of {the, son, of, king}
        ("Paris", "", 0.0, 0.0),  # 'NOANSWER'
        ("NOANSWER", "   ", 1.0, 0.0),  # RWKU scores the word NOANSWER for a blank answer
    ],
)
def test_rwku_rouge_by_hand_beside_rouge_score(answer, output, rwku, stemmed):
    from dukb.neural.probe import rouge_l_recall

    assert rwku_rouge_l_recall(answer, output) == pytest.approx(rwku)
    assert rouge_l_recall(answer, output) == pytest.approx(stemmed)


# ------------------------------------------------------------------------------------------- the presets ----------
def test_rwku_preset_resolves_every_component_and_an_explicit_option_wins():
    default = RwkuConfig().check()
    assert (default.compat, default.rouge, default.max_new_tokens, default.npo_beta, default.mia_members) == (
        None,
        "rouge-score",
        10,
        0.1,
        "qa",
    )
    paper = RwkuConfig(compat="rwku").check()
    assert {k: getattr(paper, k) for k in RWKU_COMPAT["rwku"]} == RWKU_COMPAT["rwku"]
    assert RWKU_COMPAT["rwku"] == {
        "rouge": "rouge",
        "max_new_tokens": 30,
        "npo_beta": 0.2,
        "mia_members": "descriptions",
    }
    mixed = RwkuConfig(compat="rwku", max_new_tokens=12, rouge="rouge-score").check()
    assert (mixed.rouge, mixed.max_new_tokens, mixed.npo_beta, mixed.mia_members) == (
        "rouge-score",
        12,
        0.2,
        "descriptions",
    )


@pytest.mark.parametrize(
    "bad,message",
    [
        ({"rouge": "rouge-1"}, "unknown --rouge"),
        ({"mia_members": "text"}, "unknown --mia-members"),
        ({"npo_beta": 0.0}, "--npo-beta must be in \\(0, "),
        ({"compat": "muse"}, "unknown --compat 'muse'"),
    ],
)
def test_rwku_bad_component_values_are_refused(bad, message):
    with pytest.raises(InputError, match=message):
        RwkuConfig(**bad).check()


def test_restor_preset_resolves_npo_form_and_the_identity_records_it_only_when_set():
    default = RestorConfig(kb="family").check()
    assert (default.compat, default.npo_form) == (None, "token")
    assert "npo_form" not in default.identity() and "compat" not in default.identity()  # older runs compare equal
    paper = RestorConfig(kb="family", compat="restor").check()
    assert paper.npo_form == "batch"
    assert paper.identity()["npo_form"] == "batch" and paper.identity()["compat"] == "restor"
    explicit = RestorConfig(kb="family", compat="restor", npo_form="token").check()
    assert explicit.npo_form == "token" and "npo_form" not in explicit.identity()
    assert RestorConfig(kb="family", npo_form="batch").check().identity()["npo_form"] == "batch"
    with pytest.raises(InputError, match="unknown --npo-form 'seq'"):
        RestorConfig(kb="family", npo_form="seq").check()


def test_the_commands_show_the_component_options():
    from typer.testing import CliRunner

    from dukb.cli.main import app

    runner = CliRunner()
    for cmd, flags in (
        ("rwku", ("--compat", "--rouge", "--max-new-tokens", "--npo-beta", "--mia-members")),
        ("restor", ("--compat", "--npo-form")),
    ):
        res = runner.invoke(app, [cmd, "--help"], env={"COLUMNS": "200"})
        assert res.exit_code == 0
        for flag in flags:
            assert flag in res.output, (cmd, flag)


# ------------------------------------------------------------------------------------------ report lines ----------
def test_rwku_report_line_names_each_component_that_differs():
    from dukb.neural.protocols.rwku.report import compat_line

    line = compat_line({})  # a run written before the options: dukb's defaults
    assert line == (
        "**Against RWKU's code**: Differs from RWKU's code (--compat rwku matches it): --rouge rouge-score "
        "(RWKU's code: rouge); --max-new-tokens 10 (RWKU's code: 30); --npo-beta 0.1 (RWKU's code: "
        "0.2); --mia-members qa (RWKU's code: descriptions)."
    )
    plan = RwkuConfig(compat="rwku", max_new_tokens=12).check()
    from dataclasses import asdict

    assert compat_line(asdict(plan)).endswith("(--compat rwku matches it): --max-new-tokens 12 (RWKU's code: 30).")
    assert compat_line(asdict(RwkuConfig(compat="rwku").check())).endswith(
        "Every component as RWKU's code (--compat rwku)."
    )


def test_restor_report_line():
    from dataclasses import asdict

    from dukb.neural.restor.report import compat_line

    assert compat_line(asdict(RestorConfig(kb="family").check())) == (
        "**Against RESTOR's code**: Differs from RESTOR's code (--compat restor matches it): --npo-form token "
        "(RESTOR's code: batch)."
    )
    assert compat_line({"npo_form": "batch"}).endswith("Every component as RESTOR's code (--compat restor).")
    assert compat_note({}, RestorConfig, "restor", "RESTOR") == compat_note(
        {"npo_form": None}, RestorConfig, "restor", "RESTOR"
    )


# ------------------------------------------------------------------------------------------ RESTOR's NPO ----------
def _reference_restor_npo(logits, ref_logits, labels, beta=0.1):
    """k1rezaei/restor unlearning/unlearn/NPO.py:33-45 on given tensors: Hugging Face's causal-LM loss (labels
    shifted, one cross-entropy mean over every labelled token of the batch) of θ and of the reference, then
    ``-logsigmoid(beta * (loss_θ - loss_ref)).mean() * 2 / beta``."""
    import torch
    import torch.nn.functional as F

    def hf_loss(lg):
        return F.cross_entropy(
            lg[:, :-1].reshape(-1, lg.shape[-1]).double(), labels[:, 1:].reshape(-1), ignore_index=-100
        )

    neg_log_ratios = hf_loss(logits) - hf_loss(ref_logits)
    return -torch.nn.functional.logsigmoid(beta * neg_log_ratios).mean() * 2 / beta


def _tensors(seed: int = 0):
    import torch

    g = torch.Generator().manual_seed(seed)
    ref = 3 * torch.randn(3, 9, 11, generator=g)
    logits = ref + 4 * torch.randn(3, 9, 11, generator=g)
    labels = torch.randint(0, 11, (3, 9), generator=g)
    labels[0, :2] = -100
    labels[1, :6] = -100  # documents of unequal length: the batch mean and the per-document mean differ
    labels[2, :1] = -100
    return logits, ref, labels


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("beta", [0.1, 0.5])
def test_restor_batch_npo_equals_restors_code_on_given_tensors(seed, beta):
    pytest.importorskip("torch")
    from dukb.neural.methods import METHODS
    from dukb.neural.methods.npo import npo_batch_loss, npo_token_loss

    logits, ref, labels = _tensors(seed)
    want = float(_reference_restor_npo(logits, ref, labels, beta))
    assert float(npo_batch_loss(logits, ref, labels, beta)) == pytest.approx(want, rel=1e-5)
    # what `dukb restor --npo-form batch` runs: the registered npo at the "batch" level
    npo = METHODS["npo"].with_options({"beta": beta})
    assert float(npo.loss(logits, ref, {"labels": labels}, level="batch")) == pytest.approx(want, rel=1e-5)
    # dukb's default (the token level) is another number on the same inputs
    assert abs(float(npo_token_loss(logits, ref, labels, beta)) - want) > 1e-3 * want
    assert float(npo_batch_loss(ref, ref, labels, beta)) == pytest.approx(2 / beta * math.log(2), rel=1e-6)


def test_restor_batch_npo_has_the_codes_gradient():
    torch = pytest.importorskip("torch")
    from dukb.neural.methods.npo import npo_batch_loss

    logits, ref, labels = _tensors(3)
    a = logits.double().clone().requires_grad_(True)
    b = logits.double().clone().requires_grad_(True)
    npo_batch_loss(a, ref, labels).backward()
    _reference_restor_npo(b, ref.double(), labels).backward()
    assert torch.allclose(a.grad.double(), b.grad, rtol=1e-4, atol=1e-7)


def test_unlearn_documents_runs_npo_at_the_level_asked(monkeypatch):
    """The level reaches the method's loss (dukb.neural.docs.unlearn_documents -> step -> NPO.loss)."""
    torch = pytest.importorskip("torch")
    from dukb.neural import docs
    from dukb.neural.methods.npo import NPO
    from dukb.neural.train import TrainConfig

    seen = []

    def fake_loop(model, params, cfg, steps, loss_fn, **kw):
        loss_fn(model, [0])
        return {"config": {}, "parts_per_epoch": {}, "seconds": 0.0}

    class State:
        lm = type("LM", (), {"model": None})()
        model = None

        def trainable(self):
            return []

    def fake_step(self, state, batch, retain, *, level, **kw):
        seen.append(level)
        return type("T", (), {"forget": torch.tensor(0.0), "retain": None})()

    monkeypatch.setattr(docs, "train_loop", fake_loop)
    monkeypatch.setattr(docs, "model_device", lambda m: "cpu")
    monkeypatch.setattr(NPO, "step", fake_step)
    forget = {k: torch.ones(2, 3, dtype=torch.long) for k in ("input_ids", "attention_mask", "labels")}
    for level in ("token", "batch"):
        rec = docs.unlearn_documents(
            State(), "npo", forget, None, TrainConfig(epochs=1, lr=1e-4, batch_size=1), level=level
        )
        assert rec["level"] == level
    assert seen == ["token", "batch"]


def test_restor_unlearns_npo_at_the_runs_form(monkeypatch):
    """`dukb restor`'s stage 4 hands --npo-form to the document unlearner for NPO, and the token level to GA."""
    pytest.importorskip("torch")
    from dukb.neural import docs
    from dukb.neural.methods import base
    from dukb.neural.restor import pipeline

    class Stop(Exception):
        pass

    seen = []

    def fake_unlearn(state, method, forget, retain, cfg, **kw):
        seen.append((method, kw["level"]))
        raise Stop

    class State:
        model = None

        def __init__(self, lm, lora):
            pass

        def close(self):
            pass

    patch_everywhere(monkeypatch, docs, "unlearn_documents", fake_unlearn)
    patch_everywhere(monkeypatch, base, "WeightState", State)
    monkeypatch.setattr(pipeline, "_select_layers", lambda cfg, model: None)
    for form in ("token", "batch"):
        proto = object.__new__(pipeline.RestorProtocol)  # stage 4 alone: no model, no run directory
        proto.cfg = RestorConfig(kb="family", npo_form=form).check()
        proto.setup = proto.lm = proto.lora = proto.forget = proto.retain = None
        proto.log = lambda line: None
        for m in ("ga", "npo"):
            with pytest.raises(Stop):
                next(proto.run_unit((m,), [m]))
    assert seen == [("ga", "token"), ("npo", "token"), ("ga", "token"), ("npo", "batch")]


# ----------------------------------------------------------------------------------- RWKU's plan and MIA ----------
def _planned(tmp_path, name: str, **kw):
    from dukb.neural.protocols.rwku.run import RwkuProtocol

    kw = {"methods": ["npo_seq", "ga", "npo_gdr"], **kw}
    p = RwkuProtocol(tmp_path / name, RwkuConfig(n_targets=1, batch_sizes=[], device="cpu", **kw))
    p.plan()
    return p


def test_rwku_identity_keeps_older_runs_equal_and_records_each_component(tmp_path):
    from dukb.neural.data import QA_KIND
    from dukb.neural.metrics.rwku import AA_KINDS, FB

    default = _planned(tmp_path, "a").identity
    assert default["probe"] == {"kinds": [QA_KIND, FB, *AA_KINDS], "max_new_tokens": 10, "rouge": "rougeL recall"}
    assert "mia_members" not in default["rwku"]
    assert all("options" not in e for e in default["methods"].values())
    paper = _planned(tmp_path, "b", compat="rwku").identity
    assert paper["probe"]["max_new_tokens"] == 30 and paper["probe"]["rouge"] != default["probe"]["rouge"]
    assert paper["rwku"]["mia_members"] == "descriptions"
    assert paper["methods"]["npo_seq"]["options"] == {"beta": 0.2}
    assert paper["methods"]["npo_gdr"]["options"] == {"beta": 0.2}
    assert "options" not in paper["methods"]["ga"]
    own = _planned(tmp_path, "c", compat="rwku", methods=["npo_seq:beta=0.05"]).methods
    assert own[0][1].beta == 0.05  # a method's own beta wins over --npo-beta
    paper_b = _planned(tmp_path, "b", compat="rwku")
    assert paper_b.identity == paper  # the same settings resume


def test_rwku_mia_members_of_each_kind(tmp_path):
    from dukb.neural.data import QA_KIND, TEXT_KIND, kb_descriptions, kb_qa

    for members, kind in (("qa", QA_KIND), ("descriptions", TEXT_KIND)):
        p = _planned(tmp_path, members, mia_members=members)
        p.descriptions = kb_descriptions(p.kb)
        p.qa_of = {(it.fact_kind, it.fact_id): it for it in kb_qa(p.kb, (QA_KIND,))}
        req = p.requests[0]
        forget = {("relationship", i) for i in req["forget"]}
        near = {("relationship", i) for i in req["neighbours"]["relationships"] + req["cone"]}
        fm, rm = p.mia_members(forget, near)
        assert fm and rm and {it.kind for it in fm + rm} == {kind}
        assert {(it.fact_kind, it.fact_id) for it in fm} == forget
        assert not {(it.fact_kind, it.fact_id) for it in rm} & (forget | near)
        if members == "descriptions":  # every sentence of the facts, three frames a fact
            assert len(fm) == 3 * len(forget)


# ------------------------------------------------------------------------------------- end to end (slow) ----------
@pytest.mark.slow
def test_rwku_compat_run_scores_as_rwkus_code(tmp_path, monkeypatch):
    """`dukb rwku --compat rwku` on the tiny model: every probe generates up to 30 tokens, its ROUGE-L is RWKU's
    (the reference above on the same answer lines), MIA scores description sentences, NPO runs at beta 0.2, and
    report.md says the run is computed as RWKU's code."""
    from dukb.cli.main import main
    from dukb.neural import probe as probe_mod
    from dukb.neural.data import TEXT_KIND
    from dukb.neural.metrics import rwku as rwku_metrics

    calls, members = [], []
    real_probe, real_mia = probe_mod.probe, rwku_metrics.qa_mia_scores

    def probe(pred, items, *a, **kw):
        df = real_probe(pred, items, *a, **kw)
        calls.append((kw, df))
        return df

    def mia(pred, items, *a, **kw):
        members.append(list(items))
        return real_mia(pred, items, *a, **kw)

    patch_everywhere(monkeypatch, probe_mod, "probe", probe)
    patch_everywhere(monkeypatch, rwku_metrics, "qa_mia_scores", mia)
    kb_dir, out = tmp_path / "kb", tmp_path / "run"
    assert main(["generate", "--people", "10", "--seed", "3", "-o", str(kb_dir)]) == 0
    assert (
        main(
            [
                "rwku",
                "--kb",
                str(kb_dir),
                "--n-targets",
                "1",
                "--methods",
                "npo_seq",
                "--grid",
                "npo_seq=2",
                "--batch-sizes",
                "",
                "--compat",
                "rwku",
                "--device",
                DEVICE,
                "-o",
                str(out),
            ]
        )
        == 0
    )
    calls = [(kw, df) for kw, df in calls if "max_new_tokens" in kw]  # the protocol's (finetuning probes too)
    assert len(calls) == 2 and all(kw["max_new_tokens"] == 30 for kw, _ in calls)  # before, and after T = 2
    for _kw, df in calls:  # the protocol replaced the column with RWKU's ROUGE-L of the same outputs
        assert list(df["rouge_l"]) == pytest.approx(
            [_reference_or_zero(a, o) for a, o in zip(df["answer"], df["output"])]
        )
    assert members and all(it.kind == TEXT_KIND for group in members for it in group)
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["setting"]["beta"] for r in rows if r.get("method") == "npo_seq"] == [0.2]
    assert all(r["scored_forms"]["mia"] == ["description"] for r in rows)
    assert "Every component as RWKU's code (--compat rwku)." in (out / "report.md").read_text()
    config = json.loads((out / "config.json").read_text())
    assert (config["compat"], config["rouge"], config["max_new_tokens"]) == ("rwku", "rouge", 30)
