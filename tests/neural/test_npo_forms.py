"""NPO's two forms and the reference schedule (issue 25, item 4).

- ``npo`` is the form of Eval-DU's and MUSE's code: −(2/β) · mean over every (row, position, vocabulary entry) of
  log σ(β (z_ref − z_θ)) on raw logits (wrh14/deep_unlearning unlearn_trainer.py; swj0419/muse_bench
  iterative.py); ``npo_seq`` the NPO paper's sequence form. Both checked against plain-Python hand computations.
- The reference schedule (wrh14/deep_unlearning forget.py: HF linear schedule, 1 warm-up step, over the largest T,
  weight decay 0.01, read at checkpoints) against a hand-written AdamW loop with hand-computed learning rates.
- The run identity tells the forms and the schedules apart.
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from conftest import DEVICE  # noqa: E402
from dukb.neural.methods import DOCUMENT_METHODS, METHODS, PRESETS, schedule_for  # noqa: E402
from dukb.neural.methods.base import REFERENCE_WEIGHT_DECAY, SweepSchedule, UnlearnContext, reference_train_config  # noqa: E402
from dukb.neural.methods.npo import eval_du_layout, npo_forget_loss, npo_logit_loss, npo_token_loss  # noqa: E402

BETA = 0.1


def _logsig(x: float) -> float:
    return -math.log1p(math.exp(-x)) if x >= 0 else x - math.log1p(math.exp(x))


def _toy(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(2, 4, 5, generator=g, dtype=torch.float64)
    ref = torch.randn(2, 4, 5, generator=g, dtype=torch.float64)
    labels = torch.tensor([[-100, 3, 1, 4], [-100, -100, 2, 0]])
    return logits, ref, labels


# ------------------------------------------------------------------------------------------------ the losses ----
def test_logit_form_by_hand():
    """The reference code's `-F.logsigmoid(beta * (ref_logits - logits)).mean() * 2 / beta`, written out."""
    logits, ref, labels = _toy()
    vals = [
        _logsig(BETA * (ref[b, t, v].item() - logits[b, t, v].item()))
        for b in range(2)
        for t in range(4)
        for v in range(5)
    ]
    want = -(2 / BETA) * sum(vals) / len(vals)
    assert npo_logit_loss(logits, ref, BETA).item() == pytest.approx(want, rel=1e-12)
    # a position mask averages over the kept positions' every vocabulary entry
    mask = torch.tensor([[1, 1, 0, 1], [0, 1, 1, 1]])
    kept = [
        _logsig(BETA * (ref[b, t, v].item() - logits[b, t, v].item()))
        for b in range(2)
        for t in range(4)
        if mask[b, t]
        for v in range(5)
    ]
    assert npo_logit_loss(logits, ref, BETA, mask).item() == pytest.approx(
        -(2 / BETA) * sum(kept) / len(kept), rel=1e-12
    )


def test_logit_form_ignores_labels_and_pushes_every_logit_down_alike():
    """dL/dz = (2/M) σ(β (z − z_ref)) for M = B·L·V elements: at θ = f_ref exactly 1/M on every logit, answer or
    not (the form uses no labels)."""
    logits, _, _ = _toy()
    z = logits.clone().requires_grad_(True)
    npo_logit_loss(z, logits, BETA).backward()
    assert torch.allclose(z.grad, torch.full_like(z, 1 / z.numel()))
    z2 = logits.clone().requires_grad_(True)
    ref = logits + 1.0
    npo_logit_loss(z2, ref, BETA).backward()
    want = 2 / z.numel() * torch.sigmoid(BETA * (logits - ref))
    assert torch.allclose(z2.grad, want)


def test_sequence_form_by_hand():
    """The NPO paper's form: per answer the summed log-probability ratio, −(2/β) mean log σ(−β (s_θ − s_ref))."""
    logits, ref, labels = _toy(1)

    def seq_logp(lg, b):
        total = 0.0
        for t in range(1, 4):  # position t−1 predicts token t
            if labels[b, t] < 0:
                continue
            row = [lg[b, t - 1, v].item() for v in range(5)]
            lse = math.log(sum(math.exp(x) for x in row))
            total += row[int(labels[b, t])] - lse
        return total

    want = -(2 / BETA) * sum(_logsig(-BETA * (seq_logp(logits, b) - seq_logp(ref, b))) for b in range(2)) / 2
    assert npo_forget_loss(logits, ref, labels, BETA, "sequence").item() == pytest.approx(want, rel=1e-6)  # fp32


def test_every_form_is_two_over_beta_log_two_at_the_reference():
    logits, _, labels = _toy(2)
    want = 2 / BETA * math.log(2)
    assert npo_logit_loss(logits, logits, BETA).item() == pytest.approx(want)
    assert npo_forget_loss(logits, logits, labels, BETA, "sequence").item() == pytest.approx(want)
    assert npo_token_loss(logits, logits, labels, BETA).item() == pytest.approx(want)


def test_eval_du_layout_pads_on_the_right_with_eos():
    """Eval-DU's data_module.py: tokens from position 0, EOS padding with attention 0 (the closing EOS included),
    labels kept, positions 0..length−1."""
    eos, pad = 9, 0
    batch = {
        "input_ids": torch.tensor([[pad, pad, 5, 6, 7, eos], [3, 4, 5, 6, 7, eos]]),
        "attention_mask": torch.tensor([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]]),
        "labels": torch.tensor([[-100, -100, -100, -100, 7, eos], [-100, -100, -100, 6, 7, eos]]),
    }
    out = eval_du_layout(batch, eos, length=8)
    assert out["input_ids"].tolist() == [[5, 6, 7, eos, eos, eos, eos, eos], [3, 4, 5, 6, 7, eos, eos, eos]]
    assert out["attention_mask"].tolist() == [[1, 1, 1, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 0, 0, 0]]
    assert out["labels"].tolist() == [
        [-100, -100, 7, eos, -100, -100, -100, -100],
        [-100, -100, -100, 6, 7, eos, -100, -100],
    ]
    assert out["position_ids"].tolist() == [list(range(8))] * 2
    assert eval_du_layout(batch, eos, length=4)["input_ids"].shape == (2, 6)  # never truncates


# ---------------------------------------------------------------------------------------------- the registry ----
def test_registry_names_and_forms():
    for name in ("npo", "npo_gdr", "npo_klr"):
        assert METHODS[name].form == "logit"
    for name in ("npo_seq", "npo_seq_gdr", "npo_seq_klr"):
        assert METHODS[name].form == "sequence"
    assert DOCUMENT_METHODS == ("ga", "kl", "npo")  # RESTOR's methods are unchanged
    # the du presets keep what they were measured with: the sequence form, each T its own run
    assert PRESETS["du_npo"].method == "npo_seq" and PRESETS["du_npo_gdr"].method == "npo_seq_gdr"
    assert {p.schedule for p in PRESETS.values() if METHODS[p.method].param == "steps"} == {"separate"}
    assert schedule_for("du_npo", "reference") == "separate" and schedule_for("npo", "reference") == "reference"
    assert schedule_for("du_cl", "reference") == "reference"  # no step grid: the value is never used


def test_identity_tells_forms_and_schedules_apart():
    from dukb.neural.protocols.evaluate.identity import method_identity

    seq = method_identity(METHODS["npo_seq"], "target", [1, 2, 4, 8, 16])
    logit = method_identity(METHODS["npo"], "target", [1, 2, 4, 8, 16])
    assert seq["form"] == "sequence" and logit["form"] == "logit" and seq != logit
    ref = method_identity(METHODS["ga"], "target", [4, 1, 2], "reference")
    sep = method_identity(METHODS["ga"], "target", [4, 1, 2], "separate")
    assert ref == {**sep, "schedule": "reference", "schedule_steps": 4}
    assert sep == {"method": "ga", "param": "steps", "scope": "target", "grid": [4, 1, 2]}  # as before the option
    assert "schedule" not in method_identity(METHODS["tv"], "target", [1.0], "reference")  # no step grid


# ---------------------------------------------------------------------------------------------- the schedule ----
def _hand_lr(lr: float, k: int, n: int) -> float:
    """HF's get_linear_schedule_with_warmup(opt, 1, n) at the optimiser step k (1-based): the scheduler is stepped
    after each step, so step k runs at lambda(k − 1): (k−1)/1 while k−1 < 1, else (n − (k−1)) / (n − 1)."""
    s = k - 1
    return lr * (s / 1 if s < 1 else max(0.0, (n - s) / max(1, n - 1)))


@pytest.mark.parametrize("n", [1, 2, 16, 32])
def test_reference_learning_rates_by_hand(n):
    from dukb.neural.train import TrainConfig, build_optimizer

    cfg = reference_train_config(TrainConfig(epochs=n, lr=2e-5))
    p = torch.nn.Parameter(torch.zeros(1))
    opt, sched = build_optimizer([p], cfg, n)
    seen = []
    for _ in range(n):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert seen == pytest.approx([_hand_lr(2e-5, k, n) for k in range(1, n + 1)], abs=1e-18)
    assert seen[0] == 0.0 and (n == 1 or seen[1] == pytest.approx(2e-5))
    assert opt.param_groups[0]["weight_decay"] == REFERENCE_WEIGHT_DECAY == 0.01


@pytest.fixture()
def tiny(tmp_path):
    from dukb.neural.data import QA_KIND, QAItem
    from dukb.neural.modelbuild import build_tiny_model
    from dukb.neural.models import load_model
    from dukb.neural.spec import PROMPT_PRESETS, ModelSpec

    tags = PROMPT_PRESETS["tiny"]
    items = [
        QAItem(QA_KIND, "relationship", i, f"Who is {a} to {b} ?", r)
        for i, (a, b, r) in enumerate([("Ann", "Bob", "mother"), ("Cy", "Dee", "father"), ("Eve", "Fay", "aunt")])
    ]
    build_tiny_model([tags.prompt(it.question) + tags.target(it.answer) for it in items], tmp_path / "m", seed=0)
    return load_model(ModelSpec(str(tmp_path / "m"), prompt="tiny", device=DEVICE)), items


def _weights(model) -> dict:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def _state(model) -> dict:
    return {n: v.detach().clone() for n, v in model.state_dict().items()}


def _hand_run(lm, items, lr: float, n: int, loss_of) -> dict:
    """n AdamW steps (β 0.9/0.999, ε 1e-8, weight decay 0.01 except on GPT-2's biases and LayerNorms ln_*, as HF's
    Trainer) at the hand-computed rates; {step: weights}."""
    from dukb.neural.data import encode_qa

    model = lm.model
    batch = encode_qa(lm.tokenizer, lm.tags, items, DEVICE)
    named = list(model.named_parameters())
    exempt = [p for n, p in named if "bias" in n or ".ln_" in n]
    decayed = [p for n, p in named if not ("bias" in n or ".ln_" in n)]
    assert exempt and decayed
    opt = torch.optim.AdamW(
        [{"params": decayed}, {"params": exempt, "weight_decay": 0.0}],
        lr=lr,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0.01,
    )
    out = {}
    for k in range(1, n + 1):
        for g in opt.param_groups:
            g["lr"] = _hand_lr(lr, k, n)
        model.train()
        loss = loss_of(model, batch)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        out[k] = _weights(model)
    model.eval()
    return out


def _ga_loss(model, batch):
    import torch.nn.functional as F

    logits = (
        model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], position_ids=batch["position_ids"])
        .logits[:, :-1]
        .float()
    )
    labels = batch["labels"][:, 1:]
    return -F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)


@pytest.mark.slow
def test_reference_sweep_checkpoints_are_one_hand_run(tiny):
    """GA under the reference schedule, grid {1, 2, 4}: one 4-step run read at steps 1, 2, 4 equals a hand-written
    AdamW loop at the hand-computed rates; step 1 (rate 0) leaves θ₀; a run asked only for T = 2 of the same N = 4
    gives the same weights (what a resume computes); a separate 2-step run differs."""
    lm, items = tiny
    forget = items[:1]
    theta0, state0 = _weights(lm.model), _state(lm.model)
    ctx = UnlearnContext(lm, forget, seed=0, lr=1e-2, schedule=SweepSchedule("reference"))
    got = {}
    for setting, pred in METHODS["ga"].sweep(ctx, [4, 1, 2]):
        assert setting["schedule"] == "reference" and setting["schedule_steps"] == 4
        got[setting["steps"]] = _weights(pred.model)
    assert sorted(got) == [1, 2, 4]
    assert all(torch.equal(lm.model.state_dict()[n], v) for n, v in theta0.items())  # θ₀ restored
    for n, v in theta0.items():
        assert torch.equal(got[1][n], v), n  # the warm-up step runs at rate 0
    hand = _hand_run(lm, forget, 1e-2, 4, _ga_loss)
    for T in (1, 2, 4):
        for n in theta0:
            assert torch.allclose(got[T][n], hand[T][n], atol=1e-6, rtol=1e-5), (T, n)
    lm.model.load_state_dict(state0)
    ctx2 = UnlearnContext(lm, forget, seed=0, lr=1e-2, schedule=SweepSchedule("reference", steps=4))
    ((setting, w2),) = [(s, _weights(p.model)) for s, p in METHODS["ga"].sweep(ctx2, [2])]
    assert setting["schedule_steps"] == 4
    assert all(torch.allclose(w2[n], got[2][n], atol=1e-7) for n in theta0)
    sep = [(s, _weights(p.model)) for s, p in METHODS["ga"].sweep(UnlearnContext(lm, forget, seed=0, lr=1e-2), [2])]
    assert "schedule" not in sep[0][0]
    assert not all(torch.allclose(sep[0][1][n], got[2][n], atol=1e-6) for n in theta0)


@pytest.mark.slow
def test_npo_forms_through_the_sweep(tiny):
    """``npo`` under the reference schedule trains on Eval-DU's padded layout (cut to the tiny model's 96
    positions): its checkpoint 2 equals a hand loop on that layout; ``npo_seq`` records its form and lowers the
    answer's log-probability."""
    from dukb.neural.data import encode_qa
    from dukb.neural.probe import answer_logprob

    lm, items = tiny
    forget = items[:1]
    theta0, state0 = _weights(lm.model), _state(lm.model)
    before = answer_logprob(lm_predictor(lm), forget)[0]
    ctx = UnlearnContext(lm, forget, seed=0, lr=1e-2, schedule=SweepSchedule("reference"))
    rows = {
        s["steps"]: (s, _weights(p.model), answer_logprob(p, forget)[0]) for s, p in METHODS["npo"].sweep(ctx, [2, 3])
    }
    s3 = rows[3][0]
    assert (s3["form"], s3["pad_to"], s3["beta"], s3["schedule_steps"]) == ("logit", 96, 0.1, 3)
    assert rows[3][2] != before  # no direction: the logit form does not aim at the answer (here it even rises)

    eos = lm.tokenizer.eos_token_id
    ref_batch = eval_du_layout(encode_qa(lm.tokenizer, lm.tags, forget, DEVICE), eos, 96)
    with torch.no_grad():
        ref_logits = lm.model(**{k: ref_batch[k] for k in ("input_ids", "attention_mask", "position_ids")}).logits

    def logit_loss(model, _batch):
        z = model(**{k: ref_batch[k] for k in ("input_ids", "attention_mask", "position_ids")}).logits
        return -(2 / BETA) * torch.nn.functional.logsigmoid(BETA * (ref_logits - z)).mean()

    hand = _hand_run(lm, forget, 1e-2, 3, logit_loss)
    for n in theta0:
        assert torch.allclose(rows[2][1][n], hand[2][n], atol=1e-6, rtol=1e-5), n
    lm.model.load_state_dict(state0)
    seq = [
        (s, answer_logprob(p, forget)[0]) for s, p in METHODS["npo_seq"].sweep(UnlearnContext(lm, forget, lr=1e-2), [3])
    ]
    assert seq[0][0]["form"] == "sequence" and "pad_to" not in seq[0][0] and seq[0][1] < before


@pytest.mark.slow
def test_reference_schedule_is_hf_trainers_run(tiny, tmp_path):
    """The reference sweep's checkpoints equal transformers' Trainer run with Eval-DU's TrainingArguments
    (forget.py: warmup_steps=1, max_steps=N, lr_scheduler_type="linear", weight_decay=0.01; AdamW; no gradient
    clipping, as under Eval-DU's DeepSpeed config), read after global steps 1, 2, 4 and 8."""
    import transformers
    from transformers import Trainer

    from dukb.neural.data import encode_qa
    from dukb.neural.methods.base import hf_decay_names

    lm, items = tiny
    forget = items[:1]
    names = {n for n, _ in lm.model.named_parameters()}  # HF also lists the tied lm_head.weight
    assert hf_decay_names(lm.model) == set(Trainer.get_decay_parameter_names(None, lm.model)) & names
    state0 = _state(lm.model)
    got = {
        s["steps"]: _weights(p.model)
        for s, p in METHODS["ga"].sweep(
            UnlearnContext(lm, forget, lr=1e-2, schedule=SweepSchedule("reference")), [1, 2, 4, 8]
        )
    }
    lm.model.load_state_dict(state0)
    batch = encode_qa(lm.tokenizer, lm.tags, forget, DEVICE)

    class One(torch.utils.data.Dataset):
        def __len__(self):
            return 1

        def __getitem__(self, i):
            return {k: v[0] for k, v in batch.items()}

    class GA(Trainer):
        def compute_loss(self, model, inputs, return_outputs=False, **kw):
            return _ga_loss(model, inputs)

    seen = {}

    class Keep(transformers.TrainerCallback):
        def on_step_end(self, args, state, control, model=None, **kw):
            seen[state.global_step] = _weights(model)

    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "hf"),
        per_device_train_batch_size=1,
        max_steps=8,
        warmup_steps=1,
        learning_rate=1e-2,
        weight_decay=0.01,
        lr_scheduler_type="linear",
        optim="adamw_torch",
        max_grad_norm=0.0,
        save_strategy="no",
        report_to=[],
        use_cpu=DEVICE == "cpu",
        dataloader_pin_memory=False,  # the items are already on the test device
        logging_steps=100,
    )
    GA(
        model=lm.model,
        args=args,
        train_dataset=One(),
        callbacks=[Keep()],
        data_collator=lambda xs: {k: torch.stack([x[k] for x in xs]) for k in xs[0]},
    ).train()
    for T in (1, 2, 4, 8):
        for n in got[T]:
            assert torch.allclose(got[T][n].cpu(), seen[T][n].cpu(), atol=1e-6, rtol=1e-5), (T, n)
    assert all(torch.equal(seen[1][n].cpu(), v.cpu()) for n, v in state0.items() if n in seen[1])  # step 1: rate 0


def lm_predictor(lm):
    from dukb.neural.probe import Predictor

    return Predictor(lm.model, lm.tokenizer, lm.tags, device=DEVICE)


def test_reference_schedule_refuses_a_control_and_a_step_beyond_its_run():
    from dukb import InputError
    from dukb.neural.methods.base import Control

    with pytest.raises(InputError, match="unknown schedule"):
        SweepSchedule("weekly").check()
    with pytest.raises(InputError, match="at least 1"):
        SweepSchedule("reference", 0).check()

    class _LM:  # gradient_sweep refuses before it touches the model
        pass

    ctx = UnlearnContext(_LM(), [], schedule=SweepSchedule("reference"), control=Control("es", 4))
    from dukb.neural.methods.base import gradient_sweep

    with pytest.raises(InputError, match="uncontrolled"):
        next(gradient_sweep(ctx, [1, 2], 1e-3, lambda *a: None))


def test_cli_schedule_option(tmp_path, capsys):
    from dukb.cli.main import main

    assert main(["evaluate", "--schedule", "weekly", "-o", str(tmp_path / "r")]) == 2
    assert "--schedule must be one of separate, reference" in capsys.readouterr().err
