"""The neural path end to end on the tiny default model (CPU): finetuning, probing, every unlearning method,
LoRA, the CLI commands, and `dukb evaluate` with resume and its agreement with `dukb recall`."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")

from conftest import DEVICE, patch_everywhere  # noqa: E402
from dukb.cli.main import main  # noqa: E402
from dukb.kb import load_kb, save_kb  # noqa: E402
from dukb.kb.generate import generate  # noqa: E402
from dukb.neural.data import kb_qa  # noqa: E402
from dukb.neural.methods import get_method  # noqa: E402
from dukb.neural.methods.base import UnlearnContext  # noqa: E402
from dukb.neural.pipeline import finetune_kb, load_finetuned  # noqa: E402
from dukb.neural.probe import Predictor, answer_logprob, probe  # noqa: E402
from dukb.neural.spec import LoraSpec, ModelSpec  # noqa: E402
from dukb.solver.closure import compute_closure  # noqa: E402
from dukb.solver.metrics import recall_accuracy  # noqa: E402


@pytest.fixture(scope="module")
def small_kb(tmp_path_factory):
    kb, _ = generate(24, seed=3)
    d = save_kb(kb, tmp_path_factory.mktemp("kb") / "kb")
    return load_kb(d)


@pytest.fixture(scope="module")
def finetuned(small_kb, tmp_path_factory):
    out = tmp_path_factory.mktemp("ft") / "model"
    rec = finetune_kb(small_kb, ModelSpec("tiny", prompt="tiny", device=DEVICE), out, seed=0)
    return out, rec


@pytest.fixture()
def lm(finetuned):
    return load_finetuned(finetuned[0], device=DEVICE)


def _target(kb):
    c = compute_closure(kb)
    # a target with at least one rule deriving it, so deep unlearning is more than the fact itself
    for f in kb.relationships:
        if c.by_head[c.atom_of_fact(f.fact_id)]:
            return c, f.fact_id
    return c, kb.relationships[0].fact_id


def test_tiny_model_knows_the_kb(finetuned, small_kb, lm):
    path, rec = finetuned
    print("finetune", rec["epochs_run"], "epochs", round(rec["seconds"], 1), "s")
    assert rec["accuracy"] == 1.0
    assert (path / "model.safetensors").exists() and (path / "config.json").exists()
    assert (path / "tokenizer.json").exists() and (path / "finetune.json").exists()
    # the saved directory is an ordinary HF model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    m = AutoModelForCausalLM.from_pretrained(path)
    assert m.config.model_type == "gpt2"
    tok = AutoTokenizer.from_pretrained(path)
    text = lm.tags.prompt(kb_qa(small_kb)[0].question)
    assert tok.decode(tok(text, add_special_tokens=False)["input_ids"]) == text  # word-level, exact round trip
    df = probe(Predictor(lm.model, lm.tokenizer, lm.tags), kb_qa(small_kb))
    assert df["known"].all() and len(df) == len(small_kb.relationships) + len(small_kb.biographies)


def _naive_answers(model, tokenizer, tags, items):
    """Naive reference: HF ``generate`` one prompt at a time, the full 10 tokens, then the answer line."""
    from dukb.neural.probe import answer_line

    out = []
    for it in items:
        enc = tokenizer(tags.prompt(it.question), return_tensors="pt", add_special_tokens=False)
        gen = model.generate(
            **enc,
            max_new_tokens=10,
            do_sample=False,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
        out.append(answer_line(tokenizer.decode(gen[0, enc["input_ids"].shape[1] :], skip_special_tokens=True)))
    return out


def test_probe_matches_one_prompt_at_a_time_generate(small_kb, lm):
    """Batched probing (length-sorted batches, stop at the end of the answer line) gives, for every fact, the
    answer line and the known/unknown decision of naive one-prompt HF generate over the full 10 tokens, on the
    finetuned model and on a GA-damaged one (whose outputs run on)."""
    from dukb.kb.judge import judge

    items = kb_qa(small_kb)
    c, t = _target(small_kb)
    forget = [it for it in items if it.fact_id == t and it.fact_kind == "relationship"]
    ctx = UnlearnContext(lm, forget, seed=0)
    _, damaged = next(iter(get_method("ga").sweep(ctx, [40])))
    for pred in (Predictor(lm.model, lm.tokenizer, lm.tags), damaged):
        df = probe(pred, items, batch_size=16)
        naive = _naive_answers(pred.model, lm.tokenizer, lm.tags, items)
        for it, out, ref, known in zip(items, df["output"], naive, df["known"]):
            assert out == ref, it.question
            assert bool(known) == judge(it, ref), it.question


# must_forget: "unknown" = the paper's substring rule no longer finds the answer; "answer" = the model no longer
# answers with it (GA's and NPO's degenerate outputs repeat relation words, so the substring rule can fire again:
# measured on this KB, GA's output is " mother" after 4-8 steps and " mother father father ..." after 12, with the
# answer's log-probability down by 11 to 20 nats all along); None = only the log-probability drop is required (WHP
# saturates, as the paper observes).
@pytest.mark.parametrize(
    "method,grid,lr,must_forget",
    [
        ("ga", [12], None, "answer"),
        ("npo", [16], 5e-3, "answer"),
        ("ga_gdr", [12], None, "answer"),
        ("npo_klr", [16], 5e-3, "answer"),
        ("tv", [10.0], None, "unknown"),
        ("whp", [1000.0], None, None),
    ],
)
def test_each_method_lowers_the_target(small_kb, lm, method, grid, lr, must_forget):
    c, tid = _target(small_kb)
    items = kb_qa(small_kb)
    forget = [it for it in items if it.fact_kind == "relationship" and it.fact_id == tid]
    before = answer_logprob(Predictor(lm.model, lm.tokenizer, lm.tags), forget)[0]
    ctx = UnlearnContext(lm, forget, [it for it in items if it not in forget][:16], seed=0, lr=lr)
    m = get_method(method)
    for setting, pred in m.sweep(ctx, grid):
        after = answer_logprob(pred, forget)[0]
        assert after < before - 0.5, (setting, before, after)
        out = probe(pred, forget)
        if must_forget == "unknown":
            assert not out["known"].iloc[0], out["output"].iloc[0]
        elif must_forget == "answer":
            words = out["output"].iloc[0].split()
            assert not words or words[0].lower() != forget[0].answer.lower(), out["output"].iloc[0]
    # θ0 restored
    assert answer_logprob(Predictor(lm.model, lm.tokenizer, lm.tags), forget)[0] == pytest.approx(before, abs=1e-5)


def test_bf16_path_probes_unlearns_and_finetunes(small_kb, finetuned):
    """The dtype a CUDA device gets by default (bf16), run on CPU: probing, GA unlearning and finetuning steps
    work on bf16 weights, with losses computed in float32."""
    lm16 = load_finetuned(finetuned[0], device=DEVICE, dtype="bfloat16")
    assert next(lm16.model.parameters()).dtype == torch.bfloat16
    items = kb_qa(small_kb)
    pred = Predictor(lm16.model, lm16.tokenizer, lm16.tags)
    assert probe(pred, items)["known"].mean() >= 0.9  # bf16 rounding may flip a few greedy choices
    c, tid = _target(small_kb)
    forget = [it for it in items if it.fact_kind == "relationship" and it.fact_id == tid]
    before = answer_logprob(pred, forget)[0]
    for _setting, p in get_method("ga").sweep(UnlearnContext(lm16, forget, seed=0), [12]):
        assert answer_logprob(p, forget)[0] < before - 0.5
    assert next(lm16.model.parameters()).dtype == torch.bfloat16  # θ0 restored in its dtype
    from dukb.neural.finetune import finetune
    from dukb.neural.train import TrainConfig

    rec = finetune(lm16, items[:16], TrainConfig(epochs=2, lr=1e-4, batch_size=8, eval_every=0))
    assert all(map(lambda x: x == x and x < 10, rec["loss_per_epoch"]))  # finite


def test_device_and_dtype_selection(monkeypatch):
    """auto -> CUDA with bf16 where the GPU supports it; under a launcher each process takes cuda:LOCAL_RANK."""
    from dukb.neural.models import resolve_device, resolve_dtype

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert resolve_device("auto") == "cuda" and resolve_device("cpu") == "cpu"
    assert resolve_dtype("auto", "cuda") == torch.bfloat16 and resolve_dtype("auto", "cpu") == torch.float32
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert resolve_dtype("auto", "cuda:0") == torch.float32
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert resolve_device("auto") == "cuda:1" and resolve_device("cuda") == "cuda:1"
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)  # a launcher that gives each process one GPU
    assert resolve_device("auto") == "cuda:0" and resolve_device("cuda") == "cuda:0"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv("WORLD_SIZE")
    from dukb import InputError

    with pytest.raises(InputError, match="CUDA is not available"):
        resolve_device("cuda")


def test_tv_alpha_zero_is_the_base_and_whp_alpha_zero_the_base_logits(small_kb, lm):
    c, tid = _target(small_kb)
    items = kb_qa(small_kb)
    forget = [it for it in items if it.fact_kind == "relationship" and it.fact_id == tid]
    from dukb.neural.data import encode_qa

    batch = encode_qa(lm.tokenizer, lm.tags, items[:8])
    with torch.no_grad():
        base = Predictor(lm.model, lm.tokenizer, lm.tags).logits(batch)
    ctx = UnlearnContext(lm, forget, seed=0)
    for name in ("tv", "whp"):
        for _, pred in get_method(name).sweep(ctx, [0.0]):
            with torch.no_grad():
                assert torch.allclose(pred.logits(batch), base, atol=1e-5), name


def test_lora_changes_only_adapter_weights(small_kb, lm):
    c, tid = _target(small_kb)
    items = kb_qa(small_kb)
    forget = [it for it in items if it.fact_kind == "relationship" and it.fact_id == tid]
    base = {k: v.clone() for k, v in lm.model.state_dict().items()}
    before = answer_logprob(Predictor(lm.model, lm.tokenizer, lm.tags), forget)[0]
    ctx = UnlearnContext(lm, forget, seed=0, lora=LoraSpec(r=8, alpha=16), lr=2e-2)
    for _, pred in get_method("ga").sweep(ctx, [16]):
        named = dict(pred.model.named_parameters())
        trainable = [k for k, p in named.items() if p.requires_grad]
        assert trainable and all("lora_" in k for k in trainable)
        for k, v in pred.model.get_base_model().state_dict().items():
            if "lora_" in k:
                continue
            assert torch.equal(v, base[k.replace(".base_layer", "")]), k
        assert answer_logprob(pred, forget)[0] < before - 0.5
    assert set(lm.model.state_dict()) == set(base)  # adapters removed afterwards
    assert all(torch.equal(v, base[k]) for k, v in lm.model.state_dict().items())


def test_cli_finetune_probe_unlearn(tmp_path, monkeypatch):
    model = tmp_path / "m"
    assert main(["finetune", "--kb", "demo", "-o", str(model), "--device", DEVICE]) == 0
    rec = json.loads((model / "finetune.json").read_text())
    assert rec["accuracy"] == 1.0 and rec["seed"] == 0 and "versions" in rec and rec["device"]["device"] == DEVICE
    out = tmp_path / "probe.csv"
    assert main(["probe", "--kb", "demo", "--model", str(model), "--kinds", "qa,yes", "-o", str(out)]) == 0
    import pandas as pd

    df = pd.read_csv(out)
    assert list(df.columns) == [
        "kind",
        "fact_kind",
        "fact_id",
        "question",
        "answer",
        "output",
        "known",
        "rouge_l",
        "logprob",
    ]
    assert df[df["kind"] == "qa"]["known"].all() and df["rouge_l"].notna().all() and df["logprob"].notna().all()
    # --scores none: known/unknown alone, the same decisions, no extra passes
    out2 = tmp_path / "probe2.csv"
    assert (
        main(["probe", "--kb", "demo", "--model", str(model), "--kinds", "qa,yes", "--scores", "none", "-o", str(out2)])
        == 0
    )
    fast = pd.read_csv(out2)
    assert fast["rouge_l"].isna().all() and fast["logprob"].isna().all()
    assert fast["known"].tolist() == df["known"].tolist() and fast["output"].tolist() == df["output"].tolist()
    assert main(["probe", "--kb", "demo", "--model", str(model), "--scores", "bleu"]) == 2
    import dukb.neural.models as models

    specs, real_load = [], models.load_model
    patch_everywhere(monkeypatch, models, "load_model", lambda spec: specs.append(spec) or real_load(spec))
    assert (
        main(
            [
                "unlearn",
                "--kb",
                "demo",
                "--model",
                str(model),
                "--method",
                "ga",
                "--target-id",
                "6",
                "--grid",
                "1,16",
                "-o",
                str(tmp_path / "u"),
                "--gradient-checkpointing",
            ]
        )
        == 0
    )
    assert [s.gradient_checkpointing for s in specs] == [True]
    rows = [json.loads(x) for x in (tmp_path / "u" / "results.jsonl").read_text().splitlines()]
    assert [r["setting"]["steps"] for r in rows] == [1, 16]
    # `dukb unlearn` is the evaluate protocol with one target and one method: its run identity, lock and journal
    cfg = json.loads((tmp_path / "u" / "config.json").read_text())
    assert cfg["protocol"] == "evaluate" and cfg["targets"] == [6] and cfg["methods"] == ["ga"]
    assert "schedule" not in cfg["identity"]["methods"]["ga"] and cfg["identity"]["metrics"][:1] == ["recall"]
    assert all(r["method"] == "ga" and r["worker"] and r["target_relation"] for r in rows)
    assert (tmp_path / "u" / "report.md").exists()
    again = [
        "unlearn",
        "--kb",
        "demo",
        "--model",
        str(model),
        "--method",
        "ga",
        "--target-id",
        "6",
        "--grid",
        "1,16",
        "-o",
        str(tmp_path / "u"),
    ]
    journal = (tmp_path / "u" / "results.jsonl").read_text()
    assert main(again) == 2  # a run directory holding rows: refused without --resume, never overwritten
    assert main(again + ["--resume"]) == 0 and (tmp_path / "u" / "results.jsonl").read_text() == journal
    assert main(again[:-3] + ["1,2,16", "-o", str(tmp_path / "u"), "--resume"]) == 0  # a grid value added
    grown = [json.loads(x) for x in (tmp_path / "u" / "results.jsonl").read_text().splitlines()]
    assert [r["setting"]["steps"] for r in grown] == [1, 16, 2] and grown[:2] == rows
    assert rows[1]["target_forgotten"] and rows[1]["recall"] >= rows[0]["recall"]
    # every row is also judged on forms ga never saw, and carries Success-DU on both (Wu et al. 2025, Definition 2)
    from dukb.neural.metrics.heldout import default_heldout_forms
    from dukb.solver.mdus import is_deep_unlearning_set

    kb_demo = load_kb("demo")
    c6 = compute_closure(kb_demo)
    lm0 = real_load(specs[0])
    held = list(default_heldout_forms(["qa"]))
    base = probe(
        Predictor(lm0.model, lm0.tokenizer, lm0.tags, device=lm0.device),
        kb_qa(kb_demo, tuple(held)),
        rouge=False,
        logprob=False,
    )
    elicited = {
        int(f) for fk, f, v in zip(base["fact_kind"], base["fact_id"], base["known"]) if fk == "relationship" and v
    }
    for r in rows:
        assert r["probe_forms_seen"] == ["qa"] and sorted(r["heldout_forms"]) == sorted(held)
        for suffix in ("", "_heldout"):
            forgotten = r["forgotten_relationships" + suffix]
            assert r["success_du" + suffix] == int(is_deep_unlearning_set(c6, [c6.atom_of_fact(6)], forgotten))
        # held-out forgetting is judged against the model before unlearning: a fact no held-out form elicited then
        # is never counted as forgotten
        assert set(r["forgotten_relationships_heldout"]) <= elicited
        assert 0.0 <= r["recall_heldout"] <= 1.0
    assert (
        main(
            [
                "unlearn",
                "--kb",
                "demo",
                "--model",
                str(model),
                "--method",
                "ga",
                "--target-id",
                "6",
                "--grid",
                "1",
                "--heldout-forms",
                "qa,cloze",
                "-o",
                str(tmp_path / "u5"),
            ]
        )
        == 2
    )
    assert (
        main(
            [
                "unlearn",
                "--kb",
                "demo",
                "--model",
                str(model),
                "--method",
                "ga",
                "--target-id",
                "6",
                "--grid",
                "1",
                "--heldout-rule",
                "most",
                "-o",
                str(tmp_path / "u5"),
            ]
        )
        == 2
    )
    assert not (tmp_path / "u5").exists()  # refused before anything is written
    one = tmp_path / "u6"
    assert (
        main(
            [
                "unlearn",
                "--kb",
                "demo",
                "--model",
                str(model),
                "--method",
                "ga",
                "--target-id",
                "6",
                "--grid",
                "16",
                "--heldout-forms",
                "cloze",
                "--heldout-rule",
                "any",
                "-o",
                str(one),
            ]
        )
        == 0
    )
    (r1,) = [json.loads(x) for x in (one / "results.jsonl").read_text().splitlines()]
    assert r1["heldout_forms"] == ["cloze"] and r1["success_du"] == rows[1]["success_du"]
    assert (
        main(
            [
                "unlearn",
                "--kb",
                "demo",
                "--model",
                str(model),
                "--method",
                "nope",
                "--target-id",
                "6",
                "-o",
                str(tmp_path / "u2"),
            ]
        )
        == 2
    )
    # a preset: method, forget scope and grid from the registry
    assert (
        main(
            [
                "unlearn",
                "--kb",
                "demo",
                "--model",
                str(model),
                "--method",
                "du_ga_gdr",
                "--target-id",
                "6",
                "--grid",
                "2",
                "-o",
                str(tmp_path / "u3"),
            ]
        )
        == 0
    )
    (row,) = [json.loads(x) for x in (tmp_path / "u3" / "results.jsonl").read_text().splitlines()]
    assert row["method"] == "du_ga_gdr" and row["base_method"] == "ga_gdr" and row["scope"] == "minimum"
    from dukb.solver.mdus import is_deep_unlearning_set

    c = compute_closure(load_kb("demo"))
    assert is_deep_unlearning_set(c, [c.atom_of_fact(6)], row["forget_set"])
    assert (
        main(
            [
                "unlearn",
                "--kb",
                "demo",
                "--model",
                str(model),
                "--method",
                "du_ga_gdr",
                "--target-id",
                "6",
                "--forget-scope",
                "target",
                "-o",
                str(tmp_path / "u4"),
            ]
        )
        == 2
    )


# ------------------------------------------------------------------------------------------------ evaluate ------
EVAL_ARGS = ["--methods", "ga,tv", "--grid", "ga=1,4,16", "--grid", "tv=0.5,5", "--n-targets", "3", "--device", DEVICE]


@pytest.fixture(scope="module")
def eval_run(small_kb, finetuned, tmp_path_factory):
    run = tmp_path_factory.mktemp("eval") / "run"
    assert (
        main(["evaluate", "--kb", str(small_kb.source), "--finetuned", str(finetuned[0]), "-o", str(run)] + EVAL_ARGS)
        == 0
    )
    return run


def _rows(run):
    return [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]


def test_evaluate_outputs_and_recomputation(eval_run, small_kb):
    rows = _rows(eval_run)
    assert len(rows) == 3 * (3 + 2)
    for name in ("config.json", "sets.json", "summary.csv", "report.md", "accuracy_recall.png"):
        assert (eval_run / name).stat().st_size > 0
    cfg = json.loads((eval_run / "config.json").read_text())
    assert cfg["seed"] == 0 and cfg["methods"] == ["ga", "tv"] and "versions" in cfg and "device" in cfg
    sets = json.loads((eval_run / "sets.json").read_text())["targets"]
    for r in rows:
        again = recall_accuracy(
            small_kb,
            sets[str(r["target"])]["sets"],
            set(r["forgotten_relationships"]),
            set(r["forgotten_biographies"]),
            r["sets_used"],
            [r["target"]],
            exclude_rel=r["retain_fact_ids"]["relationships"],
            exclude_bio=r["retain_fact_ids"]["biographies"],
        )
        assert again.recall == r["recall"] and again.accuracy_all == r["accuracy_all"]
        assert again.best_set == r["best_set"]
    # the summary follows from the rows: recompute Recall@Acc>=0.8 of GA from the mean points
    import pandas as pd

    from dukb.neural.metrics.summary import tradeoff

    summary = pd.read_csv(eval_run / "summary.csv")
    ga = [r for r in rows if r["method"] == "ga"]
    pts = []
    for steps in (1, 4, 16):
        sel = [r for r in ga if r["setting"]["steps"] == steps]
        pts.append((sum(r["recall"] for r in sel) / len(sel), sum(r["accuracy_all"] for r in sel) / len(sel)))
    want = tradeoff(pts)
    ga_rows = summary[(summary["group"] == "all") & (summary["method"] == "ga")].set_index(["metric", "reading"])
    got = {m: ga_rows.loc[(m, "paper (per target)"), "value"] for m in ("acc_at_recall", "recall_at_acc", "ar_auc")}
    env = "envelope (not comparable to the paper)"
    assert ga_rows.loc[("recall_at_acc", env), "value"] == pytest.approx(want["recall_at_acc"])
    assert ga_rows.loc[("ar_auc", env), "value"] == pytest.approx(want["ar_auc"])
    # the default is the paper's per-target rule: mean over targets of each target's anchored curve
    from dukb.neural.metrics.summary import target_tradeoff

    per = [
        target_tradeoff(
            [
                (r["recall"], r["accuracy_all"])
                for r in sorted((r for r in ga if r["target"] == t), key=lambda r: r["setting"]["steps"])
            ]
        )
        for t in {r["target"] for r in ga}
    ]
    for key in ("acc_at_recall", "recall_at_acc", "ar_auc"):
        assert got[key] == pytest.approx(sum(v[key] for v in per) / len(per))
    # Success-DU on every row, 1 exactly when U_A deeply unlearns the target (Definition 2)
    from dukb.solver.closure import compute_closure
    from dukb.solver.mdus import is_deep_unlearning_set

    closure = compute_closure(small_kb, "family")
    for r in rows:
        assert r["success_du"] == int(
            is_deep_unlearning_set(closure, [closure.atom_of_fact(r["target"])], r["forgotten_relationships"])
        )
    text = (eval_run / "report.md").read_text()
    assert "Acc@Recall≥0.8" in text and "Acc@Superficial" in text and "per target" in text
    from dukb.neural.metrics.summary import page_problems

    assert page_problems(text) == []  # one page: <= 150 lines, none over 200 characters, no JSON


def test_a_finished_run_keeps_its_locks_and_claims_out_of_sight(eval_run):
    """A finished run's top level holds what a user reads; every lock and claim is in RUN/.dukb (issue 38)."""
    from dukb.neural.run.files import BOOKKEEPING_DIR

    top = {p.name for p in eval_run.iterdir()}
    assert not [n for n in top if n.endswith((".lock", ".claim"))] and not {"units", "workers"} & top, top
    assert {"config.yaml", "config.json", "commands.log", "results.jsonl", "report.md", "summary.csv"} <= top
    assert len(list((eval_run / BOOKKEEPING_DIR / "units").glob("*.claim"))) == 3 * 2  # (target, method) units
    assert (eval_run / "commands.log").read_text().count("\towner\t") == 1


def test_report_rerenders_from_results_alone(eval_run, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(eval_run / "results.jsonl", copy / "results.jsonl")
    assert main(["report", str(copy)]) == 0
    assert (copy / "summary.csv").read_text() == (eval_run / "summary.csv").read_text()


def test_recall_command_agrees_with_evaluate(eval_run, small_kb, tmp_path, capsys):
    r = _rows(eval_run)[-1]
    path = tmp_path / "retained.csv"
    lines = ["kind,fact_id,retained"]
    lines += [
        f"relationship,{f.fact_id},{int(f.fact_id not in r['forgotten_relationships'])}" for f in small_kb.relationships
    ]
    lines += [f"biography,{f.fact_id},{int(f.fact_id not in r['forgotten_biographies'])}" for f in small_kb.biographies]
    path.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert main(["recall", "--kb", str(small_kb.source), "--target-id", str(r["target"]), "--retained", str(path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    for k in ("recall", "accuracy_relationships", "accuracy_biographies", "accuracy_all", "best_set", "n_sets"):
        assert doc[k] == r[k], k


def test_resume_after_a_torn_write_completes_with_the_same_rows(eval_run, small_kb, finetuned, tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(eval_run, run)
    full = (run / "results.jsonl").read_text().splitlines()
    # keep 4 rows and half of the 5th, as a kill in the middle of a write would
    (run / "results.jsonl").write_text("\n".join(full[:4]) + "\n" + full[4][: len(full[4]) // 2])
    assert (
        main(["evaluate", "--kb", str(small_kb.source), "--finetuned", str(finetuned[0]), "-o", str(run)] + EVAL_ARGS)
        == 2
    )  # refuses to overwrite without --resume
    assert (
        main(
            ["evaluate", "--kb", str(small_kb.source), "--finetuned", str(finetuned[0]), "-o", str(run), "--resume"]
            + EVAL_ARGS
        )
        == 0
    )
    again = (run / "results.jsonl").read_text().splitlines()

    def strip(rs):
        return sorted(
            json.dumps({k: v for k, v in json.loads(x).items() if not k.startswith("seconds")}, sort_keys=True)
            for x in rs
        )

    assert strip(again) == strip(full)


def test_a_resume_reads_the_baseline_probe_kept_under_its_key(eval_run, small_kb, finetuned, tmp_path, capsys):
    """The probe of the model before unlearning is kept in RUN_DIR/baseline_probe.json under a key of everything
    it depends on: a resume reads it (and writes the same rows); a file under another key, or one that is not a
    cache, is probed again and rewritten."""
    import shutil

    from dukb.neural.run.probecache import PROBE_CACHE_NAME, read_probe_cache

    run = tmp_path / "run"
    shutil.copytree(eval_run, run)
    cache = run / PROBE_CACHE_NAME
    doc = json.loads(cache.read_text())
    base = read_probe_cache(cache, doc["key"])
    qa = base[base["kind"] == "qa"]  # and every held-out form, which the baseline covers
    assert len(qa) == len(small_kb.relationships) + len(small_kb.biographies) and len(base) > len(qa)
    assert qa["known"].all()  # the finetuned model knows every fact
    assert read_probe_cache(cache, "0" * 64) is None
    args = [
        "evaluate",
        "--kb",
        str(small_kb.source),
        "--finetuned",
        str(finetuned[0]),
        "-o",
        str(run),
        "--resume",
    ] + EVAL_ARGS
    for planted, read in ((None, True), ({**doc, "key": "0" * 64}, False), ("not json {", False)):
        if planted is not None:
            cache.write_text(planted if isinstance(planted, str) else json.dumps(planted))
        capsys.readouterr()
        assert main(args) == 0
        out = capsys.readouterr()
        assert ("its probe read from" in out.out + out.err) == read
        assert read or "not used" in out.out + out.err  # says why a file present was not used
        assert json.loads(cache.read_text()) == doc  # probed again under the right key, the same rows
    assert sorted(_rows(run), key=json.dumps) == sorted(_rows(eval_run), key=json.dumps)
    # what is read is what the run uses: rows planted under the right key (no held-out form elicits anything)
    before = json.loads((run / "config.json").read_text())["heldout_known_before"]["all"]
    cache.write_text(json.dumps({**doc, "rows": [[k, fk, f, k == "qa"] for k, fk, f, _v in doc["rows"]]}))
    assert before > 0 and main(args) == 0
    assert json.loads((run / "config.json").read_text())["heldout_known_before"]["all"] == 0.0


def test_resume_with_other_settings_is_refused_and_additions_recorded(eval_run, small_kb, finetuned, tmp_path, capsys):
    import shutil

    from dukb.neural.models import resolve_device, resolve_dtype

    run = tmp_path / "run"
    shutil.copytree(eval_run, run)
    base = [
        "evaluate",
        "--kb",
        str(small_kb.source),
        "--finetuned",
        str(finetuned[0]),
        "-o",
        str(run),
        "--resume",
        "--n-targets",
        "3",
        "--device",
        DEVICE,
    ]
    methods = ["--methods", "ga,tv", "--grid", "tv=0.5,5"]
    files = {n: (run / n).read_text() for n in ("config.json", "results.jsonl", "report.md", "sets.json")}
    # the run's dtype is --dtype auto's: float32 on the CPU, bfloat16 on a GPU that has it (--device cuda)
    run_dtype = str(resolve_dtype("auto", resolve_device(DEVICE))).removeprefix("torch.")
    other_dtype = "float32" if run_dtype != "float32" else "bfloat16"
    cases = [
        (["--lr", "0.01"], "lr: null in the run, 0.01 now"),
        (["--seed", "1"], "seed: 0 in the run, 1 now"),
        (["--sets", "random"], 'sets.method: "exact" in the run, "random" now'),
        (["--seeds", "7"], "sets.seeds: 100 in the run, 7 now"),
        (["--dtype", other_dtype], f'dtype: "{run_dtype}" in the run, "{other_dtype}" now'),
        (["--prompt", "gpt2-xl"], "prompt.question_end"),
        (["--lora-r", "4"], "lora: null in the run"),
        (["--rules", "family_paper_compat"], "rules: "),
        # GA's grid runs as one 16-step run read at 1, 4 and 16 (the reference schedule, evaluate's default)
        (["--schedule", "separate"], 'methods.ga.schedule: "reference" in the run, "<absent>" now'),
        (["--grid", "ga=1,4,32"], "methods.ga.schedule_steps: 16 in the run, 32 now"),
    ]
    for extra, want in cases:
        capsys.readouterr()
        ga = [] if "--grid" in extra else ["--grid", "ga=1,4,16"]  # a method given twice in --grid is refused
        assert main(base + methods + ga + extra) == 2, extra
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("dukb: error: ") and want in err[0], (extra, err)
    assert {n: (run / n).read_text() for n in files} == files  # nothing was touched
    # other weights under --finetuned: the weights' hash differs
    other = tmp_path / "other"
    shutil.copytree(finetuned[0], other)
    (other / "config.json").write_text((other / "config.json").read_text().replace("}", ', "x": 1}', 1))
    assert main(base[:4] + [str(other)] + base[5:] + methods + ["--grid", "ga=1,4,16"]) == 2
    assert "model.finetuned.sha256" in capsys.readouterr().err
    # a method may be added to a run whose shared settings are equal, and the addition is recorded
    assert main(base + ["--methods", "ga,tv,whp", "--grid", "ga=1,4,16", "--grid", "tv=0.5,5", "--grid", "whp=0"]) == 0
    rows = _rows(run)
    assert len(rows) == 15 + 3 and {r["method"] for r in rows[15:]} == {"whp"}
    assert (run / "results.jsonl").read_text().startswith(files["results.jsonl"])
    cfg = json.loads((run / "config.json").read_text())
    assert cfg["history"][-1]["added"] == {"methods": ["whp"]} and cfg["methods"] == ["ga", "tv", "whp"]
    assert cfg["identity"]["methods"]["whp"]["grid"] == [0.0] and cfg["identity"]["seed"] == 0
    # values may be added to a method's grid, but only for every target of the run (a setting's mean must cover
    # the same targets as the other settings on its curve)
    before = (run / "results.jsonl").read_text()
    fewer = [x if x != "3" else "1" for x in base]  # --n-targets 1
    assert main(fewer + ["--methods", "ga", "--grid", "ga=2,16"]) == 2
    assert "adding grid values to ga needs every target of the run" in capsys.readouterr().err
    assert (run / "results.jsonl").read_text() == before
    # only the new value's rows are computed (read off a run of the same 16 steps), and the addition is recorded
    assert main(base + ["--methods", "ga", "--grid", "ga=2,4,16"]) == 0
    rows = _rows(run)
    assert len(rows) == 18 + 3 and {(r["method"], r["setting"]["steps"]) for r in rows[18:]} == {("ga", 2)}
    cfg = json.loads((run / "config.json").read_text())
    assert cfg["history"][-1]["added"] == {"methods.ga.grid": [2]}
    assert cfg["identity"]["methods"]["ga"]["grid"] == [1, 4, 16, 2] and cfg["grids"]["ga"] == [1, 4, 16, 2]
    # the sets cache is keyed by everything the sets depend on
    key = json.loads((run / "sets.json").read_text())["key"]
    assert key["seed"] == 0 and key["seeds"] == 100 and key["method"] == "exact" and key["kb"] == cfg["kb_fingerprint"]


@pytest.mark.parametrize("method,param,value", [("ga", "steps", 4), ("tv", "alpha", 5.0)])
def test_a_row_depends_on_its_own_grid_value_only(eval_run, small_kb, finetuned, tmp_path, method, param, value):
    """What makes grids extendable: the rows of one grid value, computed alone on resume, equal those computed in
    the sweep over the whole grid (a gradient method's T, read off a run of the grid's 16 steps under the reference
    schedule, and TV's α after the grid's other α)."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(eval_run, run)
    full = (run / "results.jsonl").read_text().splitlines()
    middle = [x for x in full if json.loads(x)["method"] == method and json.loads(x)["setting"][param] == value]
    assert middle
    (run / "results.jsonl").write_text("".join(x + "\n" for x in full if x not in middle))
    assert (
        main(
            [
                "evaluate",
                "--kb",
                str(small_kb.source),
                "--finetuned",
                str(finetuned[0]),
                "-o",
                str(run),
                "--resume",
                "--n-targets",
                "3",
                "--device",
                DEVICE,
                "--methods",
                method,
                "--grid",
                "ga=1,4,16" if method == "ga" else f"{method}={value:g}",
            ]
        )
        == 0
    )
    again = [x for x in (run / "results.jsonl").read_text().splitlines() if x not in full]

    def strip(rs):
        return sorted(
            json.dumps({k: v for k, v in json.loads(x).items() if not k.startswith("seconds")}, sort_keys=True)
            for x in rs
        )

    assert len(again) == len(middle) and strip(again) == strip(middle)


@pytest.mark.slow
def test_resume_after_sigkill(small_kb, finetuned, eval_run, tmp_path):
    run = tmp_path / "killed"
    cmd = [
        sys.executable,
        "-m",
        "dukb.cli.main",
        "evaluate",
        "--kb",
        str(small_kb.source),
        "--finetuned",
        str(finetuned[0]),
        "-o",
        str(run),
    ] + EVAL_ARGS
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    res = run / "results.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and (not res.exists() or len(res.read_text().splitlines()) < 3):
        time.sleep(0.05)
    p.send_signal(signal.SIGKILL)
    p.wait()
    n_before = len(res.read_text().splitlines())
    assert 3 <= n_before < 15
    assert main(["report", str(run)]) == 0  # the partial file is valid
    assert (
        main(
            ["evaluate", "--kb", str(small_kb.source), "--finetuned", str(finetuned[0]), "-o", str(run), "--resume"]
            + EVAL_ARGS
        )
        == 0
    )
    key = lambda r: (r["target"], r["method"], json.dumps(r["setting"], sort_keys=True))  # noqa: E731
    got = {key(r): (r["recall"], r["accuracy_all"]) for r in _rows(run)}
    want = {key(r): (r["recall"], r["accuracy_all"]) for r in _rows(eval_run)}
    assert got == want


# ------------------------------------------------------------------------------------------- forget scopes ------
def test_forget_scopes_are_deep_unlearning_sets(small_kb):
    from dukb.neural.unlearn import forget_fact_ids
    from dukb.solver.mdus import closure_loss, is_deep_unlearning_set, is_minimal, minimal_sets

    c = compute_closure(small_kb)
    checked = 0
    for f in small_kb.relationships[:40]:
        atom = c.atom_of_fact(f.fact_id)
        exact = minimal_sets(c, [atom]).sets
        mini = forget_fact_ids(c, f.fact_id, "minimum")
        best = forget_fact_ids(c, f.fact_id, "best")
        assert forget_fact_ids(c, f.fact_id, "target") == [f.fact_id]
        for s in (mini, best):
            assert is_deep_unlearning_set(c, [atom], s) and is_minimal(c, [atom], s)
        assert len(mini) == min(len(s) for s in exact)
        assert closure_loss(c, best) == min(closure_loss(c, s) for s in exact)
        checked += len(exact) > 1
    assert checked > 0  # some targets had a real choice


def test_scope_minimum_strong_setting_makes_target_underivable(small_kb, lm):
    from dukb.neural.unlearn import UnitPlan, sweep_target
    from dukb.solver.mdus import is_deep_unlearning_set

    c, tid = _target(small_kb)
    # the sequence form, as the du_npo_gdr preset runs it (the logit form of ``npo_gdr`` does not aim at the answers)
    rows = list(sweep_target(UnitPlan(lm, small_kb, c, tid, "npo_seq_gdr", [16], scope="minimum")))
    r = rows[0]
    assert r["method"] == "npo_seq_gdr@minimum" and set(r["forget_set"]) <= set(r["forgotten_relationships"])
    # the target cannot be re-derived from what the model still knows
    assert is_deep_unlearning_set(c, [c.atom_of_fact(tid)], r["forgotten_relationships"])
    assert r["recall"] == 1.0


# ------------------------------------------------------------------------------------------- metric registry -----
def test_metrics_option_adds_fields_and_probing_computes_only_what_is_needed(small_kb, finetuned, tmp_path, eval_run):
    run = tmp_path / "m"
    assert (
        main(
            [
                "evaluate",
                "--kb",
                str(small_kb.source),
                "--finetuned",
                str(finetuned[0]),
                "-o",
                str(run),
                "--methods",
                "ga_gdr",
                "--grid",
                "ga_gdr=16",
                "--n-targets",
                "1",
                "--device",
                DEVICE,
                "--metrics",
                "rouge_l,logprob",
            ]
        )
        == 0
    )
    (row,) = _rows(run)
    assert "recall" not in row and {"rouge_l_forget", "rouge_l_other", "logprob_forget", "logprob_other"} <= set(row)
    assert row["logprob_forget"] < row["logprob_other"] <= 0  # 16 GA steps push the forget answers down
    assert row["retain_fact_ids"]["relationships"] and not set(row["forget_set"]) & set(
        row["retain_fact_ids"]["relationships"]
    )
    # honest protocol: with the recall metric too, the row's accuracy leaves the retain-train facts out
    run2 = tmp_path / "m2"
    assert (
        main(
            [
                "evaluate",
                "--kb",
                str(small_kb.source),
                "--finetuned",
                str(finetuned[0]),
                "-o",
                str(run2),
                "--methods",
                "ga_gdr",
                "--grid",
                "ga_gdr=16",
                "--n-targets",
                "1",
                "--device",
                DEVICE,
            ]
        )
        == 0
    )
    (r,) = _rows(run2)
    sets = json.loads((run2 / "sets.json").read_text())["targets"][str(r["target"])]["sets"]
    ret = r["retain_fact_ids"]
    honest = recall_accuracy(
        small_kb,
        sets,
        set(r["forgotten_relationships"]),
        set(r["forgotten_biographies"]),
        r["sets_used"],
        [r["target"]],
        exclude_rel=ret["relationships"],
        exclude_bio=ret["biographies"],
    )
    assert (r["recall"], r["accuracy_all"], r["best_set"]) == (honest.recall, honest.accuracy_all, honest.best_set)
    scored = set(small_kb.rel_ids) - set(r["best_set"]) - set(ret["relationships"])
    assert not scored & set(ret["relationships"]) and 0 < len(ret["relationships"]) + len(ret["biographies"]) <= 64
    assert (run / "report.md").exists() and "rouge_l_forget" in (run / "report.md").read_text()
    # the default (the paper's metrics) writes no ROUGE/log-prob fields, and GA trains on no retain data
    default = _rows(eval_run)[0]
    assert "rouge_l_forget" not in default and default["retain_fact_ids"] == {"relationships": [], "biographies": []}


def test_probe_skips_passes_no_metric_needs(small_kb, lm):
    items = kb_qa(small_kb)[:6]
    pred = Predictor(lm.model, lm.tokenizer, lm.tags, device=DEVICE)
    only = probe(pred, items, generate=True, rouge=False, logprob=False)
    full = probe(pred, items)
    assert only["logprob"].isna().all() and only["rouge_l"].isna().all()
    assert list(only["known"]) == list(full["known"]) and full["logprob"].notna().all()
    lp = probe(pred, items, generate=False, rouge=False, logprob=True)
    assert lp["known"].isna().all() and list(lp["logprob"]) == pytest.approx(list(full["logprob"]))


# ---------------------------------------------------------------------------- closed-loop deep unlearning ------
def test_closed_loop_success_means_the_target_is_not_derivable(small_kb, lm):
    """Whenever CL-DU reports success (stopped), the facts the model no longer knows form a deep unlearning set of
    the target (checked with the solver), hence recall 1; its retain facts are never scored."""
    from dukb.neural.unlearn import UnitPlan, sweep_target
    from dukb.solver.mdus import is_deep_unlearning_set

    c = compute_closure(small_kb)
    targets = [f.fact_id for f in small_kb.relationships if len(c.by_head[c.atom_of_fact(f.fact_id)]) > 0][:2]
    stopped = 0
    for t, name in [(t, "cl_du") for t in targets] + [(targets[0], "cl_du_npo")]:  # (and its NPO forget term)
        for row in sweep_target(UnitPlan(lm, small_kb, c, t, name, [1, 8, 24], seed=0)):
            assert set(row["setting"]) == {"rounds", "lr", "steps_per_round"}  # equal across targets
            if row["trace"]["stopped"]:
                stopped += 1
                assert is_deep_unlearning_set(c, [c.atom_of_fact(t)], row["forgotten_relationships"])
                assert row["recall"] == 1.0
            ret = set(row["retain_fact_ids"]["relationships"])
            assert ret and not ret & set(row["trace"]["trained_on"])
    assert stopped >= 1


def test_multiform_retain_retains_the_neighbours_in_every_queried_form(small_kb, lm, monkeypatch):
    """cl_du_multiform_retain's and cl_du_retainforms' retain pools hold the retain facts in qa, paraphrase and cloze
    (cl_du_multiform's only in qa), never a cone fact; the row's seen forms cover them and its held-out forms
    exclude them."""
    import dukb.neural.methods.closed_loop as cl
    from dukb.neural.metrics import get_metric
    from dukb.neural.unlearn import UnitPlan, sweep_target

    c = compute_closure(small_kb)
    t = next(f.fact_id for f in small_kb.relationships if len(c.by_head[c.atom_of_fact(f.fact_id)]) > 0)
    pools = []
    real = cl.neighbours

    def spy(kb, fact_ids, pool, cone_ids):
        pools.append((list(pool), set(cone_ids)))
        return real(kb, fact_ids, pool, cone_ids)

    monkeypatch.setattr(cl, "neighbours", spy)
    for name, kinds in (
        ("cl_du_multiform", {"qa"}),
        ("cl_du_multiform_retain", {"qa", "paraphrase", "cloze"}),
        ("cl_du_retainforms", {"qa", "paraphrase", "cloze"}),
    ):
        pools.clear()
        (row,) = sweep_target(
            UnitPlan(
                lm, small_kb, c, t, name, [1], seed=0, metrics=[get_metric("recall"), get_metric("recall_heldout")]
            )
        )
        pool, cone = pools[0]
        assert {it.kind for it in pool} == kinds
        assert not {it.fact_id for it in pool if it.fact_kind == "relationship"} & cone
        facts = {(it.fact_kind, it.fact_id) for it in pool if it.kind == "qa"}
        assert {(it.fact_kind, it.fact_id) for it in pool} == facts  # the same retain facts, more forms
        assert {"qa", "paraphrase", "cloze"} <= set(row["probe_forms_seen"])
        assert not set(row["heldout_forms"]) & {"qa", "paraphrase", "cloze"}


def test_noneighbour_variants_combine_their_parts(small_kb, lm, monkeypatch):
    """cl_du_noneighbour_strict and cl_du_noneighbour_npo draw retain batches from the whole retain-train pool
    (never asking for neighbours), with the strict loop's threshold or NPO's forget term; the plain variants keep
    their parts."""
    import dukb.neural.methods.closed_loop as cl
    import dukb.neural.methods.npo as npo_mod
    from dukb.neural.methods import METHODS
    from dukb.neural.unlearn import UnitPlan, sweep_target

    parts = {
        n: (METHODS[n].neighbour, METHODS[n].forget_term, METHODS[n].min_logprob)
        for n in (
            "cl_du",
            "cl_du_noneighbour",
            "cl_du_strict",
            "cl_du_npo",
            "cl_du_noneighbour_strict",
            "cl_du_noneighbour_npo",
        )
    }
    assert parts == {
        "cl_du": (True, "ga", None),
        "cl_du_noneighbour": (False, "ga", None),
        "cl_du_strict": (True, "ga", cl.STRICT_LOGPROB),
        "cl_du_npo": (True, "npo", None),
        "cl_du_noneighbour_strict": (False, "ga", cl.STRICT_LOGPROB),
        "cl_du_noneighbour_npo": (False, "npo", None),
    }
    c = compute_closure(small_kb)
    t = next(f.fact_id for f in small_kb.relationships if len(c.by_head[c.atom_of_fact(f.fact_id)]) > 0)

    def no_neighbours(*_a, **_k):
        raise AssertionError("a noneighbour variant asked for neighbours")

    calls = []
    real = npo_mod.npo_loss
    monkeypatch.setattr(cl, "neighbours", no_neighbours)
    patch_everywhere(monkeypatch, npo_mod, "npo_loss", lambda *a, **k: calls.append(1) or real(*a, **k))
    for name in ("cl_du_noneighbour_strict", "cl_du_noneighbour_npo"):
        calls.clear()
        (row,) = sweep_target(UnitPlan(lm, small_kb, c, t, name, [2], seed=0))
        assert row["trace"]["rounds_run"] >= 1 and row["retain_fact_ids"]["relationships"]
        assert bool(calls) == (name == "cl_du_noneighbour_npo")

    # the per-method retain options reach the loss: λ and the retain items per step
    from dukb.neural.methods import resolve

    seen = []
    real_cl = cl.closed_loop_loss

    def spy(fl, flab, rl=None, rlab=None, weight=1.0):
        seen.append((None if rl is None else rl.shape[0], weight))
        return real_cl(fl, flab, rl, rlab, weight)

    monkeypatch.setattr(cl, "closed_loop_loss", spy)
    for spec, want in (("cl_du_noneighbour", (8, 1.0)), ("cl_du_noneighbour:reg_weight=2.5:retain_batch=3", (3, 2.5))):
        seen.clear()
        list(sweep_target(UnitPlan(lm, small_kb, c, t, resolve(spec).method, [1], seed=0)))
        assert seen and set(seen) == {want}


def test_honest_rows_of_retain_methods_recompute_by_hand(small_kb, finetuned, tmp_path):
    """Rows of methods that train on retain data (DU_GA_GDR, CL-DU): the retain-train facts are disjoint from what
    the method unlearns (forget set, CL-DU's trained facts and, for CL-DU, the target's cone) and from the scored
    facts; recall and accuracy recompute by hand from the forgotten facts, the sets and the retain ids."""
    from dukb.solver.cone import cone_of

    run = tmp_path / "run"
    assert (
        main(
            [
                "evaluate",
                "--kb",
                str(small_kb.source),
                "--finetuned",
                str(finetuned[0]),
                "-o",
                str(run),
                "--methods",
                "du_ga_gdr,du_cl",
                "--grid",
                "du_ga_gdr=4",
                "--grid",
                "du_cl=1,4",
                "--n-targets",
                "2",
                "--device",
                DEVICE,
            ]
        )
        == 0
    )
    rows = _rows(run)
    sets = json.loads((run / "sets.json").read_text())["targets"]
    c = compute_closure(small_kb)
    assert {r["method"] for r in rows} == {"du_ga_gdr", "du_cl"} and len(rows) == 2 * 3
    for r in rows:
        ret_rel = set(r["retain_fact_ids"]["relationships"])
        ret_bio = set(r["retain_fact_ids"]["biographies"])
        assert ret_rel or ret_bio
        assert not ret_rel & set(r["forget_set"])
        if r["method"] == "du_cl":
            cone = cone_of(c, [c.atom_of_fact(r["target"])])
            assert not ret_rel & {c.fact_ids[cone.atoms[a]] for a in cone.kb}
            assert not ret_rel & set(r["trace"]["trained_on"])
        # by hand: the best set by (recall, accuracy, smaller set); accuracy over K minus the set minus retain-train
        forgot_rel, forgot_bio = set(r["forgotten_relationships"]), set(r["forgotten_biographies"])
        best = None
        for s in sets[str(r["target"])]["sets"]:
            scored = set(small_kb.rel_ids) - set(s) - ret_rel
            rec = len(forgot_rel & set(s)) / len(s)
            acc = sum(1 for f in scored if f not in forgot_rel) / len(scored)
            key = (rec, acc, -len(s))
            if best is None or key > best[0]:
                best = (key, scored)
        (rec, acc_rel, _), scored_rel = best
        scored_bio = set(small_kb.bio_ids) - ret_bio
        ok_bio = sum(1 for f in scored_bio if f not in forgot_bio)
        assert r["recall"] == pytest.approx(rec) and r["accuracy_relationships"] == pytest.approx(acc_rel)
        assert r["accuracy_all"] == pytest.approx(
            (acc_rel * len(scored_rel) + ok_bio) / (len(scored_rel) + len(scored_bio))
        )
        # retain-train facts are not scored: whether the model still knows them cannot move the row's accuracy
        kw = dict(exclude_rel=ret_rel, exclude_bio=ret_bio)
        s_best = [r["best_set"]]
        known = recall_accuracy(small_kb, s_best, forgot_rel - ret_rel, forgot_bio - ret_bio, r["sets_used"], **kw)
        lost = recall_accuracy(small_kb, s_best, forgot_rel | ret_rel, forgot_bio | ret_bio, r["sets_used"], **kw)
        assert known.accuracy_all == pytest.approx(lost.accuracy_all)
        assert known.accuracy_all == pytest.approx(r["accuracy_all"])


def test_recall_under_attack_never_exceeds_recall(small_kb, finetuned, tmp_path):
    """`--metrics recall,recall_under_attack`: every row's recall under attack is at most its plain recall, its
    leaks are QA-forgotten facts, it recomputes from the QA-forgotten facts minus the leaks, and probing the extra
    kinds does not change what the methods train on (the plain recall equals a run without the metric)."""
    common = [
        "--kb",
        str(small_kb.source),
        "--finetuned",
        str(finetuned[0]),
        "--methods",
        "ga,du_cl",
        "--grid",
        "ga=4,16",
        "--grid",
        "du_cl=2,8",
        "--n-targets",
        "2",
        "--device",
        DEVICE,
    ]
    assert main(["evaluate", "-o", str(tmp_path / "a"), "--metrics", "recall,recall_under_attack"] + common) == 0
    assert main(["evaluate", "-o", str(tmp_path / "b")] + common) == 0
    rows, plain = _rows(tmp_path / "a"), _rows(tmp_path / "b")
    sets = json.loads((tmp_path / "a" / "sets.json").read_text())["targets"]
    assert len(rows) == len(plain) == 8
    for r, p in zip(rows, plain):
        assert (r["target"], r["method"], r["setting"]) == (p["target"], p["method"], p["setting"])
        assert r["recall"] == p["recall"] and r["forgotten_relationships"] == p["forgotten_relationships"]
        assert r["recall_under_attack"] <= r["recall"]
        assert set(r["leaked_relationships"]) <= set(r["forgotten_relationships"])
        still = set(r["forgotten_relationships"]) - set(r["leaked_relationships"])
        again = recall_accuracy(small_kb, sets[str(r["target"])]["sets"], still, set(), r["sets_used"], [r["target"]])
        assert again.recall == r["recall_under_attack"]
    assert any(r["leaks_by_kind"] for r in rows)  # some adversarial form does elicit a QA-forgotten fact
