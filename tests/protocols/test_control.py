"""Unlearning with Control (Wang et al. 2024) and the RWKU/TOFU baselines: PS metrics (hand-checked against a
scripted model), the losses of PO, RT, DPO and RepE against hand-computed values, the OC/ES/MM controls and
partial-layer finetuning on the tiny model, the new methods' rows in `dukb evaluate`, and `dukb control` end to
end with its calibration rule."""

from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")

from conftest import DEVICE, patch_everywhere  # noqa: E402
from dukb import InputError  # noqa: E402
from dukb.cli.main import main  # noqa: E402
from dukb.kb import load_kb, save_kb  # noqa: E402
from dukb.kb.generate import generate  # noqa: E402
from dukb.neural.data import kb_qa  # noqa: E402
from dukb.neural.methods import METHODS, get_method  # noqa: E402
from dukb.neural.methods.base import Control, StepTerms, UnlearnContext, layer_index  # noqa: E402
from dukb.neural.metrics import ps as PS  # noqa: E402
from dukb.neural.pipeline import finetune_kb, load_finetuned  # noqa: E402
from dukb.neural.probe import Predictor, answer_logprob  # noqa: E402
from dukb.neural.protocols.control import config as C  # noqa: E402
from dukb.neural.spec import ModelSpec  # noqa: E402


# ------------------------------------------------------------------------------------------- PS, by hand ----
class _Oracle:
    """A scripted greedy decoder: it reproduces an answer's remaining tokens once at least ``k0`` of them are
    given, and emits token 99 otherwise."""

    def __init__(self, queries, k0):
        self.q, self.k0 = queries, k0

    def __call__(self, pred, prompts, n_new, *, token_ids, details, stop_at_newline=False):
        out = []
        for row in token_ids:
            for i, q in enumerate(self.q):
                p = list(q.prompt)
                if row[: len(p)] == p and row[len(p) :] == list(q.answer[: len(row) - len(p)]):
                    k = len(row) - len(p)
                    ids = list(q.answer[k:]) if k >= self.k0[i] else [99] * (len(q.answer) - k)
                    out.append({"ids": ids + [7] * 3, "text": " ".join(map(str, ids)), "logprob": -1.0})
                    break
        return out


class _Tok:
    def decode(self, ids, skip_special_tokens=True):
        return " ".join(map(str, ids))


class _Pred:
    tokenizer = _Tok()


@pytest.mark.parametrize("search", ["bisection", "linear"])
def test_ps_is_one_minus_the_shortest_recovering_prefix_share(monkeypatch, search):
    import dukb.neural.probe as probe_mod

    qs = [
        PS.PSQuery((1, 2), (10, 11, 12, 13)),
        PS.PSQuery((3,), (20,)),
        PS.PSQuery((4,), (30, 31, 32, 33, 34)),
        PS.PSQuery((5,), (40, 41)),
    ]
    k0 = [1, 0, 5, 2]  # the last two never recover before the end: PS = 0
    patch_everywhere(monkeypatch, probe_mod, "greedy_generate", _Oracle(qs, k0))
    got = PS.ps_scores(_Pred(), qs, PS.exact_match, search=search)
    assert got == pytest.approx([1 - 1 / 4, 1.0, 0.0, 0.0])


def test_ps_matchers():
    assert PS.exact_match([1, 2], [1, 2, 9]) and not PS.exact_match([1, 2], [1]) and not PS.exact_match([1, 2], [2, 1])
    sim = PS.similar_match(0.5)
    assert sim([], [], "the father of Reid", "father of Reid Perry")  # recall 3/4 (stemmed)
    assert not sim([], [], "Boston Massachusetts", "Chicago")
    assert sim([], [], " .", ".") and not sim([], [], ".", ",")  # no ROUGE token: exact after stripping


def test_ps_on_the_tiny_model_equals_greedy_exact_match_for_one_token_answers(small_kb, lm):
    from dukb.neural.probe import probe

    pred = Predictor(lm.model, lm.tokenizer, lm.tags)
    items = kb_qa(small_kb)
    q = PS.ps_queries(pred, items)
    one = [i for i, x in enumerate(q) if len(x.answer) == 1]
    assert one
    scores = PS.ps_scores(pred, [q[i] for i in one])
    df = probe(pred, [items[i] for i in one], rouge=False, logprob=False)
    assert scores == [1.0 if k else 0.0 for k in df["known"]]
    conf = PS.response_confidence(pred, items[:5])
    assert all(0 < c <= 1 for c in conf)


# -------------------------------------------------------------------------------------- losses, by hand ----
def test_dpo_loss_by_hand():
    from dukb.neural.methods.dpo import dpo_loss

    t = torch.tensor
    assert float(dpo_loss(t([-1.0]), t([-2.0]), t([-1.0]), t([-2.0]))) == pytest.approx(math.log(2))
    # β = 0.5: 0.5·((−1 + 1.5) − (−2 + 1)) = 0.75; −log σ(0.75) = log(1 + e^−0.75)
    assert float(dpo_loss(t([-1.0]), t([-2.0]), t([-1.5]), t([-1.0]), 0.5)) == pytest.approx(
        math.log1p(math.exp(-0.75))
    )


def test_refusal_loss_is_the_refusal_nll_by_hand():
    from dukb.neural.methods.po import refusal_loss

    logits = torch.zeros(1, 3, 4)
    logits[0, 0, 2] = math.log(3.0)  # p(token 2 | position 0) = 3 / 6 = 1/2
    labels = torch.tensor([[-100, 2, 1]])  # positions 0 and 1 predict tokens 2 and 1 (p = 1/2, 1/4)
    assert float(refusal_loss(logits, labels)) == pytest.approx((math.log(2) + math.log(4)) / 2)


def test_repe_vector_and_steering_by_hand():
    from dukb.neural.methods.repe import control_vector, default_layers, steer

    v = control_vector(torch.tensor([[1.0, 2.0]]), torch.tensor([[0.5, 3.0]]))
    assert v.tolist() == [[0.5, -1.0]]
    h = torch.zeros(1, 2, 2)
    assert steer(h, v[0], 2.0).tolist() == [[[1.0, -2.0], [1.0, -2.0]]]
    assert default_layers(30) == (10, 19) and default_layers(2) == (0, 0) and default_layers(1) == (0, 0)


def test_icu_prompt_and_counterfactuals(small_kb):
    from dukb.neural.methods.dpo import counterfactual_items
    from dukb.neural.methods.icu import icu_tags
    from dukb.neural.spec import PromptTags

    t = icu_tags(PromptTags(), "Ann Lee")
    assert t.prompt("Who?").startswith("You are an AI Assistant who is supposed to unlearn about Ann Lee and ")
    assert t.prompt("Who?").endswith("\nQuestion: Who?\nAnswer:")
    items = kb_qa(small_kb)
    cf = counterfactual_items(items, items, seed=1)
    rel_answers = {it.answer for it in items if it.fact_kind == "relationship"}
    for a, b in zip(items, cf):
        assert b.answer != a.answer and b.question == a.question
        if a.fact_kind == "relationship":
            assert b.answer in rel_answers


def test_response_confidence_reads_the_answer_line_only():
    class Tok:
        pieces = {1: "\n", 2: " father", 3: "\n", 4: " Question", 5: "ly\n"}

        def decode(self, ids, skip_special_tokens=True):
            return "".join(self.pieces[i] for i in ids)

    # blank lead-in dropped, the answer kept, stop at the line break
    assert PS.answer_line_logprobs(Tok(), [1, 2, 3, 4], [-5.0, -0.1, -0.2, -0.3]) == [-0.1]
    # text and line break in one token: kept, then stop
    assert PS.answer_line_logprobs(Tok(), [2, 5, 4], [-0.1, -0.2, -0.3]) == [-0.1, -0.2]
    assert PS.answer_line_logprobs(Tok(), [1, 3], [-1.0, -1.0]) == []


def test_step_terms_objective_capping():
    f, r = torch.tensor(-3.0), torch.tensor(0.5)
    assert float(StepTerms(f, torch.tensor(3.0), r).total()) == pytest.approx(-2.5)
    assert float(StepTerms(f, torch.tensor(3.0), r).total(tau=2.0)) == pytest.approx(0.5)  # capped: retain only
    assert float(StepTerms(f, torch.tensor(1.0), r).total(tau=2.0)) == pytest.approx(-2.5)
    assert layer_index("transformer.h.3.attn.c_attn.weight") == 3
    assert layer_index("model.layers.12.mlp.up_proj.weight") == 12 and layer_index("lm_head.weight") is None


# ------------------------------------------------------------------------------------ controls, tiny model ----
@pytest.fixture(scope="module")
def small_kb(tmp_path_factory):
    kb, _ = generate(24, seed=3)
    return load_kb(save_kb(kb, tmp_path_factory.mktemp("kb") / "kb"))


@pytest.fixture(scope="module")
def finetuned(small_kb, tmp_path_factory):
    out = tmp_path_factory.mktemp("ft") / "model"
    finetune_kb(small_kb, ModelSpec("tiny", prompt="tiny", device=DEVICE), out, seed=0)
    return out


@pytest.fixture()
def lm(finetuned):
    return load_finetuned(finetuned, device=DEVICE)


def _lp(pred, items):
    return answer_logprob(pred, items)


def test_controls_reduce_to_the_original_and_the_uncontrolled_model(small_kb, lm):
    items = kb_qa(small_kb)
    forget, retain = items[:3], items[10:40]
    orig = _lp(Predictor(lm.model, lm.tokenizer, lm.tags), items)

    def run(method, control, grid):
        ctx = UnlearnContext(lm, forget, retain, seed=0, control=control)
        return [(s, _lp(p, items), p.meta.get("risk_curve")) for s, p in get_method(method).sweep(ctx, grid)]

    ((s8, unc8, curve8),) = run("ga_gdr", None, [8])
    assert s8 == {"steps": 8, "lr": s8["lr"]} and len(curve8["unlearning_risk"]) == 8
    assert curve8["unlearning_risk"][-1] > curve8["unlearning_risk"][0]  # GA raises the forget NLL
    assert unc8 != pytest.approx(orig, abs=1e-4)
    # MM: α = 0 is θ_o, α = 1 is θ_u (no retraining per α)
    mm = run("ga_gdr", Control("mm", 8), [0.0, 0.5, 1.0])
    assert mm[0][1] == pytest.approx(orig, abs=1e-5) and mm[2][1] == pytest.approx(unc8, abs=1e-5)
    assert mm[1][0]["alpha"] == 0.5 and mm[1][0]["control"] == "mm"
    # ES: checkpoints of one run; its last checkpoint is the uncontrolled run of the same length, step 0 is θ_o
    es = run("ga_gdr", Control("es", 8), [0, 4, 8])
    assert es[0][1] == pytest.approx(orig, abs=1e-5) and es[2][1] == pytest.approx(unc8, abs=1e-5)
    assert len(es[1][2]["unlearning_risk"]) == 4
    # a later sweep asking for one more checkpoint reruns the same 8-step run (as a fine grid does)
    ((_s, es4, _c),) = run("ga_gdr", Control("es", 8), [4])
    assert es4 == pytest.approx(es[1][1], abs=1e-6)
    with pytest.raises(Exception, match="early stopping at step 9"):
        run("ga_gdr", Control("es", 8), [9])
    # OC: a cap above every risk reached is the uncontrolled run; τ = 0 drops every forget step (GA alone: no
    # change at all)
    oc = run("ga_gdr", Control("oc", 8), [1e9])
    assert oc[0][1] == pytest.approx(unc8, abs=1e-5)
    ((_s, oc0, _c),) = run("ga", Control("oc", 8), [0.0])
    assert oc0 == pytest.approx(orig, abs=1e-6)
    with pytest.raises(InputError, match="alpha in \\[0, 1\\]"):
        run("ga", Control("mm", 8), [1.5])  # α outside [0, 1]


def test_partial_layer_finetuning_changes_only_the_chosen_blocks(small_kb, lm):
    items = kb_qa(small_kb)
    before = {k: v.clone() for k, v in lm.model.state_dict().items()}
    ctx = UnlearnContext(lm, items[:3], seed=0, layers=(1, 1))
    for _s, pred in get_method("ga").sweep(ctx, [4]):
        after = pred.model.state_dict()
        changed = {k for k in after if not torch.equal(after[k], before[k])}
        assert changed and all(layer_index(k) == 1 for k in changed)
    assert all(p.requires_grad for p in lm.model.parameters())  # the freeze is undone
    with pytest.raises(Exception, match="no trainable parameter in layers"):
        list(get_method("ga").sweep(UnlearnContext(lm, items[:3], layers=(50, 60)), [1]))


def test_prompt_level_methods_leave_the_weights_alone(small_kb, lm):
    items = kb_qa(small_kb)
    before = {k: v.clone() for k, v in lm.model.state_dict().items()}
    for name in ("icu", "repe"):
        ctx = UnlearnContext(lm, items[:2], kb=small_kb, items=items)
        outs = [(s, _lp(p, items[:2])) for s, p in get_method(name).sweep(ctx)]
        assert outs
        assert all(torch.equal(v, before[k]) for k, v in lm.model.state_dict().items())
    # RepE's hooks are gone after the sweep: the model scores as before
    assert _lp(Predictor(lm.model, lm.tokenizer, lm.tags), items[:2]) == pytest.approx(
        answer_logprob(Predictor(lm.model, lm.tokenizer, lm.tags), items[:2])
    )


def test_new_methods_produce_rows_in_evaluate(small_kb, finetuned, tmp_path):
    run = tmp_path / "ev"
    methods = ["po", "rt", "dpo", "dpo_refusal", "icu", "repe", "simnpo"]
    args = [
        "evaluate",
        "--kb",
        str(small_kb.source),
        "--finetuned",
        str(finetuned),
        "-o",
        str(run),
        "--methods",
        ",".join(methods),
        "--n-targets",
        "1",
        "--device",
        DEVICE,
        "--metrics",
        "recall,ps_exact,ps_perturb,ps_similar",
    ]
    for m in methods:
        args += ["--grid", f"{m}={'1' if m in ('icu', 'repe') else '4'}"]
    assert main(args) == 0
    rows = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    assert sorted(r["method"] for r in rows) == sorted(methods)
    po = next(r for r in rows if r["method"] == "po")
    assert po["retain_fact_ids"]["relationships"] or po["retain_fact_ids"]["biographies"]  # GDR data, recorded
    assert all(0 <= r["recall"] <= 1 for r in rows)
    for r in rows:  # the PS metrics as registered row metrics
        for k in ("ps_exact_forget", "ps_exact_retain", "ps_perturb_retain", "ps_similar_forget", "confidence_retain"):
            assert 0 <= r[k] <= 1, (r["method"], k)
    icu = next(r for r in rows if r["method"] == "icu")
    assert icu["setting"] == {"icu": 1.0}


# --------------------------------------------------------------------------------- the protocol ----
def test_split_facts_are_nested_and_disjoint(small_kb):
    sp = C.split_facts(small_kb, [0.05, 0.1], 10, seed=0)
    alone = C.split_facts(small_kb, [0.05], 10, seed=0)  # a ratio's splits do not depend on the other ratios
    assert alone["forget"]["5%"] == sp["forget"]["5%"] and alone["retain_eval"] == sp["retain_eval"]
    assert alone["retain_train"]["5%"] == sp["retain_train"]["5%"]
    f5, f10 = set(sp["forget"]["5%"]), set(sp["forget"]["10%"])
    assert f5 < f10 and len(f10) == round(0.1 * (len(small_kb.relationships) + len(small_kb.biographies)))
    ev = sp["retain_eval"]
    assert not f10 & set(ev["relationships"]) and sum(map(len, ev.values())) == 10
    for k, f in sp["forget"].items():
        tr = sp["retain_train"][k]
        assert not set(f) & set(tr["relationships"]) and not set(ev["relationships"]) & set(tr["relationships"])
        assert not set(ev["biographies"]) & set(tr["biographies"])
        assert len(f) + len(tr["relationships"]) + len(ev["relationships"]) == len(small_kb.relationships)


def test_grids_and_calibration_rule():
    cfg = C.ControlConfig(steps=16, coarse=10, fine=10)
    assert C.coarse_grid("mm", cfg) == [i / 10 for i in range(11)]
    assert C.coarse_grid("es", cfg)[:3] == [0, 2, 3] and C.coarse_grid("es", cfg)[-1] == 16
    assert C.coarse_grid("oc", cfg, 5.0) == pytest.approx([i / 2 for i in range(11)])
    fine = C.fine_grid("mm", 0.2, C.coarse_grid("mm", cfg), cfg)
    assert fine == pytest.approx([0.12, 0.14, 0.16, 0.18, 0.22, 0.24, 0.26, 0.28])  # step 0.02 over 0.1-0.3
    orig = {"ps_exact_retain": 0.668, "ps_perturb_retain": 0.325, "ps_similar_forget": 0.949}
    ok = {
        "value": 0.3,
        "ps_exact_retain": 0.6012,
        "ps_perturb_retain": 0.30,
        "ps_similar_forget": 0.5,
        "ps_exact_forget": 0.4,
    }
    low = dict(ok, value=0.4, ps_exact_retain=0.60, ps_exact_forget=0.1)  # below 0.9 · 0.668 = 0.6012
    tie = dict(ok, value=0.2)
    assert C.passes(ok, orig) and not C.passes(low, orig)
    assert C.passes(dict(low, ps_exact_retain=0.61, ps_similar_forget=0.4), orig, "cheap")
    assert not C.passes(dict(low, ps_exact_retain=0.61, ps_similar_forget=0.4), orig)
    assert C.calibrate([ok, low, tie], orig)["value"] == 0.2  # lowest PS-exact(forget); ties to the weaker
    assert C.calibrate([low], orig) is None


def test_control_command_end_to_end_and_resume_identity(small_kb, finetuned, tmp_path, capsys):
    run = tmp_path / "ctl"
    args = [
        "control",
        "--kb",
        str(small_kb.source),
        "--finetuned",
        str(finetuned),
        "-o",
        str(run),
        "--methods",
        "ga_gdr,po",
        "--ratios",
        "0.05",
        "--steps",
        "4",
        "--coarse",
        "2",
        "--fine",
        "4",
        "--retain-eval",
        "12",
        "--device",
        DEVICE,
    ]
    assert main(args) == 0
    rows = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    splits = json.loads((run / "splits.json").read_text())
    forget = splits["forget"]["5%"]
    assert {r["control"] for r in rows} == {"original", "none", "oc", "es", "mm"}
    from dukb.solver.closure import compute_closure
    from dukb.solver.mdus import is_deep_unlearning_set

    closure = compute_closure(small_kb)
    # an independent held-out baseline: the facts no held-out form elicits from θ_o
    from dukb.neural.data import kb_qa
    from dukb.neural.metrics.heldout import default_heldout_forms
    from dukb.neural.pipeline import load_finetuned
    from dukb.neural.probe import Predictor, probe

    held = list(default_heldout_forms(["qa", "paraphrase"]))
    lm0 = load_finetuned(finetuned, device=DEVICE)
    base = probe(
        Predictor(lm0.model, lm0.tokenizer, lm0.tags, device=lm0.device),
        kb_qa(small_kb, tuple(held)),
        rouge=False,
        logprob=False,
    )
    known0 = {
        int(f) for fk, f, v in zip(base["fact_kind"], base["fact_id"], base["known"]) if fk == "relationship" and v
    }
    unscorable = {f.fact_id for f in small_kb.relationships} - known0
    orig0 = next(r for r in rows if r["control"] == "original")
    assert orig0["forgotten_relationships_heldout"] == [] and orig0["accuracy_all_facts_heldout"] == 1.0
    for r in rows:
        assert r["forget_fact_ids"] == forget
        for k in C.FLOORS:
            assert 0 <= r[k] <= 1
        # Success-DU: every forget fact underivable from what the model still knows (Definition 2)
        assert r["success_du"] == int(
            all(
                is_deep_unlearning_set(closure, [closure.atom_of_fact(t)], r["forgotten_relationships"]) for t in forget
            )
        )
        # ... and on forms no method trained on or queried, judged against θ_o on those forms
        # methods train on qa; the calibration selects on qa (PS-exact) and paraphrase (PS-perturb)
        assert r["probe_forms_seen"] == ([] if r["control"] == "original" else ["paraphrase", "qa"])
        assert r["heldout_forms"] == held and not {"qa", "paraphrase"} & set(held)
        assert r["success_du_heldout"] == int(
            all(
                is_deep_unlearning_set(closure, [closure.atom_of_fact(t)], r["forgotten_relationships_heldout"])
                for t in forget
            )
        )
        assert not set(r["forgotten_relationships_heldout"]) & unscorable
        assert r["heldout_unscorable_fact_ids"]["relationships"] == sorted(unscorable)
    gd = [r for r in rows if r.get("method") == "ga_gdr" and r["control"] != "original"]
    ev_rel = set(splits["retain_eval"]["relationships"])
    assert all(
        r["retain_train_fact_ids"]["relationships"] and not ev_rel & set(r["retain_train_fact_ids"]["relationships"])
        for r in gd
    )
    assert {r["stage"] for r in gd} >= {"uncontrolled", "coarse", "fine"}
    mm0 = next(r for r in gd if r["control"] == "mm" and r["value"] == 0.0)
    orig = next(r for r in rows if r["control"] == "original")
    assert mm0["ps_exact_forget"] == orig["ps_exact_forget"] and mm0["ps_exact_retain"] == orig["ps_exact_retain"]
    report = (run / "report.md").read_text()
    assert "PS-exact r" in report and "PS-perturb u" in report and "PS-similar u" in report
    for c in ("| oc |", "| es |", "| mm |"):
        assert c in report
    assert (run / "ps_curves.png").stat().st_size > 0 and (run / "risk_curves.png").stat().st_size > 0
    import pandas as pd

    summary = pd.read_csv(run / "summary.csv")
    sel = summary[(summary["method"] == "ga_gdr") & (summary["control"] == "mm")].iloc[0]
    mm_rows = [r for r in gd if r["control"] == "mm"]
    expect = C.calibrate(mm_rows, orig)
    assert sel["value"] == pytest.approx(expect["value"]) and 0 <= sel["du_recall"] <= 1
    assert 0 <= sel["du_recall_heldout"] <= 1 and "DU recall (held-out)" in report
    # the report re-renders from the run's files alone
    (run / "report.md").unlink()
    assert main(["report", str(run)]) == 0 and (run / "report.md").read_text() == report
    # resuming with another T is refused, not mixed
    capsys.readouterr()
    assert main(args[:-2] + ["--steps", "6", "--resume", "--device", DEVICE]) == 2
    assert "steps" in capsys.readouterr().err
    assert main(args + ["--resume"]) == 0
    assert len((run / "results.jsonl").read_text().splitlines()) == len(rows)
    # bad input: one line, exit 2
    assert main(["control", "--ratios", "1.5", "-o", str(tmp_path / "x")]) == 2
    assert main(["control", "--controls", "zz", "-o", str(tmp_path / "y")]) == 2
    assert main(["control", "--heldout-forms", "qa", "-o", str(tmp_path / "z")]) == 2
    assert main(["control", "--heldout-forms", "paraphrase", "-o", str(tmp_path / "z")]) == 2
    assert main(["control", "--heldout-rule", "most", "-o", str(tmp_path / "z")]) == 2
    # other held-out forms are another run: refused on resume
    capsys.readouterr()
    assert main(args + ["--heldout-forms", "cloze", "--resume"]) == 2
    assert "heldout_forms" in capsys.readouterr().err


def test_registered_names():
    for name in ("po", "rt", "dpo", "dpo_refusal", "icu", "repe", "simnpo"):
        assert name in METHODS


def test_a_resume_that_would_change_the_held_out_forms_is_refused(small_kb, finetuned, tmp_path, capsys):
    """The held-out forms are resolved over every method of the run: adding `rt` (which trains on reverse) to a run
    whose rows were judged with reverse held out is refused, not mixed; resuming with a subset of its methods is
    not."""
    run = tmp_path / "ctl"
    base = [
        "control",
        "--kb",
        str(small_kb.source),
        "--finetuned",
        str(finetuned),
        "-o",
        str(run),
        "--ratios",
        "0.05",
        "--steps",
        "2",
        "--coarse",
        "1",
        "--fine",
        "1",
        "--controls",
        "mm",
        "--retain-eval",
        "12",
        "--device",
        DEVICE,
    ]
    assert main(base + ["--methods", "ga,ga_gdr"]) == 0
    rows = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    assert all("reverse" in r["heldout_forms"] for r in rows)
    n = len(rows)
    capsys.readouterr()
    assert main(base + ["--methods", "rt", "--resume"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "heldout" in err
    assert len((run / "results.jsonl").read_text().splitlines()) == n
    assert main(base + ["--methods", "ga", "--resume"]) == 0  # a subset of the run's methods: the same forms
    assert len((run / "results.jsonl").read_text().splitlines()) == n
