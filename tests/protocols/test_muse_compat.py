"""`dukb muse --compat muse` (issue 41, item 4 and 5): each deviation from MUSE's released code (swj0419/muse_bench) is
a named component whose MUSE value the preset selects; checked here against independent implementations written from
MUSE's code: KnowMem with in-context examples (metrics/knowmem.py), KLR's raw-logit ``F.kl_div``
(baselines/baselines/iterative.py:151-158), the constant-rate run, VerbMem's fixed budget, and the report's line.
"""

from __future__ import annotations

import dataclasses
import os

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from conftest import patch_everywhere
from dukb import InputError  # noqa: E402
from dukb.neural.data import QA_KIND, QAItem  # noqa: E402
from dukb.neural.protocols.muse.config import MUSE_COMPAT, MuseConfig, compat_components  # noqa: E402

COMPONENTS = (
    "knowmem_tokens",
    "knowmem_icl",
    "knowmem_prompt",
    "klr_form",
    "unlearn_lr_rule",
    "unlearn_schedule",
    "verbmem_stop",
)
DUKB = {
    "knowmem_tokens": 10,
    "knowmem_icl": 0,
    "knowmem_prompt": "qa",
    "klr_form": "token",
    "unlearn_lr_rule": "family",
    "unlearn_schedule": "separate",
    "verbmem_stop": "line",
}
MUSE = {
    "knowmem_tokens": 32,
    "knowmem_icl": 10,
    "knowmem_prompt": "muse",
    "klr_form": "raw_logits",
    "unlearn_lr_rule": "muse",
    "unlearn_schedule": "constant",
    "verbmem_stop": "budget",
}


# ------------------------------------------------------------------------------------------- the preset --------
def test_the_preset_resolves_every_component_and_an_explicit_option_wins():
    assert [f.name for f in compat_components(MuseConfig)] == list(COMPONENTS)
    assert MUSE_COMPAT["muse"] == MUSE
    plain = MuseConfig().check()
    assert {c: getattr(plain, c) for c in COMPONENTS} == DUKB  # dukb's defaults are unchanged
    assert plain.component_identity() == {}  # nothing new in the identity: older runs compare equal
    settings = plain.identity_settings()
    assert settings["knowmem_tokens"] == 10  # recorded as before (a plain setting since the first identity)
    assert not ({"compat", *COMPONENTS} - {"knowmem_tokens"}) & set(settings)
    assert plain.unlearn_lr() is None  # each method's family rate
    muse = MuseConfig(compat="muse").check()
    assert {c: getattr(muse, c) for c in COMPONENTS} == MUSE
    assert muse.component_identity() == {"compat": "muse", **{k: v for k, v in MUSE.items() if k != "knowmem_tokens"}}
    assert dataclasses.asdict(muse)["knowmem_tokens"] == 32  # config.json records every component
    assert muse.unlearn_lr() == 1e-5  # MUSE's rate for every method
    assert MuseConfig(compat="muse", lr=3e-4).check().unlearn_lr() == 3e-4  # --lr wins over the rule
    mixed = MuseConfig(compat="muse", knowmem_tokens=12, klr_form="token", knowmem_icl=0).check()
    assert (mixed.knowmem_tokens, mixed.klr_form, mixed.knowmem_icl, mixed.knowmem_prompt) == (12, "token", 0, "muse")
    one = MuseConfig(verbmem_stop="budget").check()  # one component alone, no preset
    assert one.component_identity() == {"verbmem_stop": "budget"} and one.knowmem_tokens == 10


def test_bad_component_values_are_refused():
    with pytest.raises(InputError, match="--klr-form"):
        MuseConfig(klr_form="kl").check()
    with pytest.raises(InputError, match="--knowmem-icl"):
        MuseConfig(knowmem_icl=-1).check()
    with pytest.raises(InputError, match="unknown --compat"):
        MuseConfig(compat="rwku").check()


def test_the_report_line_names_each_component_that_differs_from_muses_code():
    from dukb.neural.protocols.muse.report import compat_line, markdown_report, summarize_muse

    plain = compat_line(dataclasses.asdict(MuseConfig().check()))
    assert plain.startswith(
        "Differs from MUSE's code (--compat muse matches it): --knowmem-tokens 10 (MUSE's code: 32); --knowmem-icl 0"
    )
    assert all(f"--{c.replace('_', '-')} " in plain for c in COMPONENTS)
    assert compat_line({}) == plain  # a run written before the components: dukb's values
    assert (
        compat_line(dataclasses.asdict(MuseConfig(compat="muse").check()))
        == "Every component as MUSE's code (--compat muse)."
    )
    one = compat_line(dataclasses.asdict(MuseConfig(compat="muse", knowmem_tokens=10).check()))
    assert one == "Differs from MUSE's code (--compat muse matches it): --knowmem-tokens 10 (MUSE's code: 32)."
    rows = [
        {
            "request": "main",
            "experiment": "main",
            "model_kind": k,
            "method": None,
            "param": None,
            "setting": None,
            "verbmem_forget": 0.5,
            "knowmem_forget": 0.5,
            "knowmem_retain": 0.5,
            "privleak": 0.0,
            "mia_auc": 0.5,
            "items": {},
        }
        for k in ("target", "retrain")
    ]
    report = markdown_report(summarize_muse(rows, bootstrap=10), dataclasses.asdict(MuseConfig(compat="muse").check()))
    _head, table = report.split("## Table 3 layout (main request)")
    assert table.lstrip().startswith("Every component as MUSE's code (--compat muse).\n\n| method |")


# ------------------------------------------------------------------------------------------------- KLR --------
def test_klr_forms_against_the_reference_formulas():
    from dukb.neural.methods.retain import klr_loss, klr_loss_raw_logits

    g = torch.Generator().manual_seed(0)
    logits, ref = torch.randn(3, 5, 7, generator=g) * 2, torch.randn(3, 5, 7, generator=g) * 2
    # MUSE's iterative.py:152-157, verbatim
    muse = F.kl_div(logits, ref, reduction="batchmean", log_target=True)
    assert klr_loss_raw_logits(logits, ref).item() == pytest.approx(muse.item(), rel=1e-6)
    by_hand = (
        sum(
            float(torch.exp(ref[b, t, v]) * (ref[b, t, v] - logits[b, t, v]))
            for b in range(3)
            for t in range(5)
            for v in range(7)
        )
        / 3
    )
    assert klr_loss_raw_logits(logits, ref).item() == pytest.approx(by_hand, rel=1e-5)
    # a padded batch: MUSE's sum over each row's real tokens, divided by the batch size
    mask = torch.tensor([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1], [0, 1, 1, 1, 1]])
    rows = (
        sum(
            F.kl_div(logits[b, mask[b].bool()], ref[b, mask[b].bool()], reduction="sum", log_target=True).item()
            for b in range(3)
        )
        / 3
    )
    assert klr_loss_raw_logits(logits, ref, mask).item() == pytest.approx(rows, rel=1e-5)
    # dukb's: mean over labelled positions (next token labelled) of KL(p_ref || p)
    labels = torch.tensor([[-100, 4, 2, -100, 1], [-100, -100, 3, 3, 3], [-100, 0, -100, -100, 6]])
    terms = []
    for b in range(3):
        for t in range(4):
            if labels[b, t + 1] != -100:
                p_ref, p = torch.softmax(ref[b, t].double(), -1), torch.softmax(logits[b, t].double(), -1)
                terms.append(float((p_ref * (p_ref.log() - p.log())).sum()))
    assert klr_loss(logits, ref, labels).item() == pytest.approx(sum(terms) / len(terms), rel=1e-5)
    # they are different quantities: a constant added to the logits leaves the KL, not MUSE's form
    assert klr_loss(logits + 3, ref, labels).item() == pytest.approx(klr_loss(logits, ref, labels).item(), rel=1e-5)
    assert klr_loss_raw_logits(logits + 3, ref).item() != pytest.approx(muse.item(), rel=1e-3)


def test_the_klr_form_reaches_the_retain_term():
    from dukb.neural.methods import METHODS
    from dukb.neural.methods.retain import klr_loss, klr_loss_raw_logits, retain_loss

    class LM(torch.nn.Module):  # logits from the ids alone (a table), HF's output shape
        def __init__(self, shift=0.0):
            super().__init__()
            self.table = torch.nn.Parameter(torch.randn(9, 9, generator=torch.Generator().manual_seed(1)) + shift)

        def forward(self, input_ids, **kw):
            return type("Out", (), {"logits": self.table[input_ids]})()

    model, ref = LM(), LM(0.5)

    class State:
        def ref_logits(self, batch):
            return ref(batch["input_ids"]).logits.detach()

    batch = {
        "input_ids": torch.tensor([[1, 2, 3], [4, 5, 6]]),
        "attention_mask": torch.ones(2, 3, dtype=torch.long),
        "position_ids": torch.arange(3).repeat(2, 1),
        "labels": torch.tensor([[-100, 2, 3], [-100, 5, 6]]),
    }
    z, zr = model(batch["input_ids"]).logits, ref(batch["input_ids"]).logits
    tok = retain_loss("klr", State(), batch, model)
    raw = retain_loss("klr", State(), batch, model, klr_form="raw_logits")
    assert tok.item() == pytest.approx(klr_loss(z, zr, batch["labels"]).item())
    assert raw.item() == pytest.approx(klr_loss_raw_logits(z, zr).item())
    with pytest.raises(InputError, match="KLR form"):
        retain_loss("klr", State(), batch, model, klr_form="kl")
    assert METHODS["ga_klr"].klr_form == "token" and METHODS["npo_klr"].reg_kind == "klr"


# --------------------------------------------------------------------------------------------- KnowMem --------
def _qa(i: int, q: str, a: str, kind: str = "relationship") -> QAItem:
    return QAItem(QA_KIND, kind, i, q, a)


def test_knowmem_with_in_context_examples_assembles_muses_prompt_and_cut(monkeypatch):
    """On a stub predictor: the prompt is MUSE's knowmem.py:22-29 (examples, then the question), tokenised with
    special tokens, decoded for 32 tokens, cut at knowmem.py:50's stop strings and scored with rouge-score's rougeL F1
    without stemming (metrics/logger.py)."""
    from rouge_score import rouge_scorer

    import dukb.neural.probe as probe_mod
    from dukb.neural.metrics.muse import knowmem
    from dukb.neural.spec import PROMPT_PRESETS

    examples = [
        _qa(7, "Who is Ann's mother?", "Beth Lane"),
        _qa(8, "Who is Cy's father?", "Dan Roe"),
        _qa(1, "Who is Al's father?", "Ed Poe"),
    ]  # fact 1 is probed: never its own example
    items = [_qa(1, "Who is Al's father?", "Ed Poe"), _qa(2, "Who is Al's mother?", "Fay Poe")]
    # MUSE's knowmem.py, written out independently
    general = "".join(
        f"Question: {q}\nAnswer: {a}\n\n"
        for q, a in [("Who is Ann's mother?", "Beth Lane"), ("Who is Cy's father?", "Dan Roe")]
    )
    want = {general + f"Question: {it.question}\nAnswer: " for it in items}
    decodes = {items[0].question: "Ed Poe\n\nQuestion: Who is", items[1].question: "Fay Roe Question: x"}
    seen = {}

    class Tok:  # characters as tokens; "special tokens" add a BOS id 0
        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": ([0] if add_special_tokens else []) + [ord(c) for c in text]}

    def fake_generate(pred, prompts, max_new_tokens, *, token_ids=None, stop_at_newline=False, **kw):
        assert prompts is None and not stop_at_newline and max_new_tokens == 32
        out = []
        for ids in token_ids:
            assert ids[0] == 0
            text = "".join(map(chr, ids[1:]))
            seen[text] = max_new_tokens
            out.append(next(v for q, v in decodes.items() if text.endswith(f"Question: {q}\nAnswer: ")))
        return out

    patch_everywhere(monkeypatch, probe_mod, "greedy_generate", fake_generate)
    pred = type("Pred", (), {"tokenizer": Tok(), "tags": PROMPT_PRESETS["tiny"], "model": None})()
    got = knowmem(pred, items, 32, examples=examples, prompt="muse")
    assert set(seen) == want
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)
    ref = [scorer.score("Ed Poe", "Ed Poe")["rougeL"].fmeasure, scorer.score("Fay Poe", "Fay Roe ")["rougeL"].fmeasure]
    assert got == pytest.approx(ref) and got[0] == 1.0 and 0 < got[1] < 1


@pytest.mark.slow
def test_knowmem_with_in_context_examples_decodes_as_muses_code_on_the_tiny_model(tmp_path):
    """On the tiny model (random weights, 256 positions, no EOS before 32 tokens): MUSE's knowmem.py loop, one prompt at a time with
    ``model.generate(max_new_tokens=32, do_sample=False)``, gives the outputs dukb's batched decode scores as 1.0
    (each item's gold answer is set to MUSE's output) and 0.0 against an answer it never says."""
    from rouge_score import rouge_scorer

    from conftest import DEVICE
    from dukb.neural.metrics.muse import knowmem
    from dukb.neural.modelbuild import build_tiny_model
    from dukb.neural.models import load_model
    from dukb.neural.probe import Predictor
    from dukb.neural.spec import ModelSpec

    words = "Who is Ann Bo Cy Di Ed Fa father mother son ? 's Question Answer".split()
    build_tiny_model(
        [" ".join(words), "Question: Who is Ann's father?\nAnswer: Bo\n\n"],
        tmp_path,
        seed=3,
        config={"n_positions": 256},
    )
    lm = load_model(ModelSpec(str(tmp_path), prompt="tiny", device=DEVICE, dtype="float32"))
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():  # weights that say words (the initialisation's say blanks)
        for p in lm.model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.05)
    pred = Predictor(lm.model, lm.tokenizer, lm.tags, device=lm.device)
    examples = [_qa(10 + i, f"Who is {a}'s father?", b) for i, (a, b) in enumerate([("Ann", "Bo"), ("Cy", "Di")])]
    qs = [f"Who is {n}'s {r}?" for n in ("Ed", "Fa", "Cy") for r in ("father", "mother")]

    def muse(question):  # metrics/knowmem.py:22-50
        general = "".join(f"Question: {e.question}\nAnswer: {e.answer}\n\n" for e in examples)
        ids = lm.tokenizer(
            general + f"Question: {question}\nAnswer: ", return_tensors="pt", add_special_tokens=True
        ).input_ids.to(lm.device)
        with torch.no_grad():
            out = lm.model.generate(ids, max_new_tokens=32, do_sample=False, pad_token_id=lm.tokenizer.pad_token_id)
        text = lm.tokenizer.batch_decode(
            out[:, ids.shape[1] :], skip_special_tokens=True, clean_up_tokenization_spaces=True
        )[0]
        for w in ["\n\n", "\nQuestion", "Question:"]:
            text = text.split(w)[0]
        return text

    outs = [muse(q) for q in qs]
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)
    scored = [i for i, o in enumerate(outs) if scorer.score(o, o)["rougeL"].fmeasure == 1.0]
    assert len(scored) >= 3 and all(len(outs[i].split()) > 10 for i in scored)  # words, past a 10-token budget
    items = [_qa(i, q, o) for i, (q, o) in enumerate(zip(qs, outs))]
    got = knowmem(pred, items, 32, batch_size=4, examples=examples, prompt="muse")
    assert [got[i] for i in scored] == [1.0] * len(scored)
    never = knowmem(pred, [_qa(i, q, "zzzq") for i, q in enumerate(qs)], 32, examples=examples, prompt="muse")
    assert never == [0.0] * len(qs)


def test_icl_examples_come_from_retain_train_facts_alone():
    from dukb.kb import load_kb
    from dukb.neural.protocols.muse.config import icl_examples
    from dukb.solver.closure import compute_closure
    from dukb.solver.splits import base_split

    kb = load_kb("demo")
    closure = compute_closure(kb)
    base = base_split(kb, closure, [5], holdout_frac=0.2, retain_train_frac=0.5, seed=0)
    sp = base.request([5, 6], [5])
    ex = icl_examples(kb, sp, 10, seed=0)
    train = {("relationship", i) for i in sp.retain_train["relationships"]} | {
        ("biography", i) for i in sp.retain_train["biographies"]
    }
    assert 0 < len(ex) <= 10 and {(e.fact_kind, e.fact_id) for e in ex} <= train
    assert all(e.kind == QA_KIND for e in ex)
    assert icl_examples(kb, sp, 10, seed=0) == ex and icl_examples(kb, sp, 0, seed=0) == []
    assert icl_examples(kb, sp, 3, seed=0) == ex[:3]


# ------------------------------------------------------------------------------------ schedule and VerbMem -----
def test_the_constant_schedule_is_one_constant_rate_run_read_at_each_step(monkeypatch):
    """MUSE's iterative.py: lr_scheduler_type='constant', no warm-up or weight decay, HF's max_grad_norm 1.0, a
    checkpoint per epoch of one run (T steps of dukb = T epochs of a forget set in one batch)."""
    from dukb.neural.methods import base, controls

    calls = []

    class Run:
        grid = [4, 1, 2]

        def read_at(self, n, what, extra, **kw):
            calls.append((n, extra, kw))
            yield from ()

    from dukb.neural.trainconfig import TrainConfig

    r = Run()
    r.cfg = TrainConfig(epochs=1, lr=1e-5, batch_size=3, schedule="linear")
    list(controls.Uncontrolled().sweep(r, base.Control(), base.SweepSchedule("constant").check()))
    ((n, extra, kw),) = calls
    assert n == 4 and extra == {"schedule": "constant", "schedule_steps": 4} and "decay" not in kw
    tcfg = kw["tcfg"]
    assert (tcfg.schedule, tcfg.lr, tcfg.warmup, tcfg.warmup_steps, tcfg.weight_decay, tcfg.max_grad_norm) == (
        "constant",
        1e-5,
        0.0,
        0,
        0.0,
        1.0,
    )
    with pytest.raises(InputError):
        base.SweepSchedule("cosine").check()
    assert "constant" not in base.SWEEP_SCHEDULES  # dukb evaluate's --schedule choices are unchanged


def test_verbmem_budget_runs_past_the_line(monkeypatch):
    import dukb.neural.probe as probe_mod
    from dukb.neural.metrics.muse import verbmem

    class Words:
        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": text.split()}

        def decode(self, ids, skip_special_tokens=True):
            return " ".join(ids)

    stops = []

    def fake_generate(pred, prompts, budget, *, stop_at_newline=False, **kw):
        stops.append((stop_at_newline, budget))
        return ["e f" if stop_at_newline else "e f\ng h"] * len(prompts)

    patch_everywhere(monkeypatch, probe_mod, "greedy_generate", fake_generate)
    pred = type("Pred", (), {"tokenizer": Words(), "model": None})()
    assert verbmem(pred, ["a b c d e f g h"]) == [pytest.approx(2 * 0.5 * 1 / 1.5)]  # "e f" vs "e f g h"
    assert verbmem(pred, ["a b c d e f g h"], stop_at_newline=False) == [1.0]
    assert stops == [(True, 128), (False, 128)]
