"""The method registry (complete after import, no cycle, help texts from it) and the one training loop (hand-computed
AdamW steps, gradient accumulation, clipping, schedules)."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from dukb.cli.main import main  # noqa: E402
from dukb.neural.methods import (  # noqa: E402
    DOCUMENT_METHODS,
    METHODS,
    PRESETS,
    get_method,
    methods_table,
    presets_table,
    resolve,
    scopes_table,
)
from dukb.neural.train import TrainConfig, build_optimizer, chunked, steps_per_epoch, train_loop  # noqa: E402
from dukb.solver.scopes import FORGET_SCOPES  # noqa: E402

EXPECTED = {
    "ga",
    "ga_gdr",
    "ga_klr",
    "npo",
    "npo_gdr",
    "npo_klr",
    "npo_seq",
    "npo_seq_gdr",
    "npo_seq_klr",
    "kl",
    "kl_gdr",
    "kl_klr",
    "tv",
    "whp",
    "cl_du",
    "cl_du_fixed",
    "cl_du_noselect",
    "cl_du_noneighbour",
    "cl_du_multiform",
    "cl_du_multiform_retain",
    "cl_du_retainforms",
    "cl_du_npo",
    "cl_du_strict",
    "cl_du_noneighbour_strict",
    "cl_du_noneighbour_npo",
    "simnpo",
    "simnpo_gdr",
    "po",
    "rt",
    "dpo",
    "dpo_refusal",
    "icu",
    "repe",
}


def test_registry_is_complete_right_after_import():
    # (the method modules import torch at the top and load on first use; the CLI reads the entries: tests/cli/test_help_catalog.py)
    code = "import dukb.neural.methods as m; print(','.join(m.METHODS))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert set(out[0].split(",")) == EXPECTED
    assert set(METHODS) == EXPECTED and DOCUMENT_METHODS == ("ga", "kl", "npo")


def test_resolve_methods_scopes_and_presets():
    assert tuple(resolve("ga")) == ("ga", METHODS["ga"], "target", None)
    assert tuple(resolve("NPO_GDR@minimum")) == ("npo_gdr@minimum", METHODS["npo_gdr"], "minimum", None)
    r = resolve("du_ga_gdr")
    assert (r.label, r.method.name, r.scope, r.grid) == ("du_ga_gdr", "ga_gdr", "minimum", (2, 4, 6, 8, 12, 16))
    for p in PRESETS.values():
        assert p.method in METHODS and p.scope in FORGET_SCOPES
    from dukb import InputError

    with pytest.raises(InputError, match="choose from ga, ga_gdr, ga_klr, kl"):
        get_method("sgd")
    with pytest.raises(InputError, match="is a preset"):
        get_method("du_ga")
    with pytest.raises(InputError, match="forget scope"):
        resolve("ga@everything")


@pytest.mark.parametrize("command", ["unlearn", "evaluate"])
def test_every_registered_method_preset_and_scope_is_in_help(command, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    capsys.readouterr()
    assert main([command, "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for name in [*METHODS, *PRESETS, *FORGET_SCOPES]:
        assert name in text, name


def test_methods_table_lists_every_entry():
    table = "\n".join(t.markdown() for t in (methods_table(), presets_table(), scopes_table()))
    for name in [*METHODS, *PRESETS, *FORGET_SCOPES]:
        assert f"`{name}`" in table


# --------------------------------------------------------------------------------------------- training loop ----
def _quadratic(n: int = 4):
    torch.manual_seed(0)
    w = torch.nn.Linear(3, 1, bias=False)
    x = torch.randn(n, 3)
    y = torch.randn(n, 1)
    return w, x, y


def test_one_adamw_step_moves_each_weight_by_lr_times_the_gradient_sign():
    """First AdamW step (no weight decay): m̂ = g, v̂ = g², update = lr · g / (|g| + eps) (Loshchilov & Hutter)."""
    w, x, y = _quadratic()
    w0 = w.weight.detach().clone()
    g = torch.autograd.grad(((w(x) - y) ** 2).mean(), w.weight)[0]
    cfg = TrainConfig(lr=0.1, schedule="constant")
    rec = train_loop(
        w, list(w.parameters()), cfg, lambda _e: [[None]], lambda m, _: ((m(x) - y) ** 2).mean(), total_steps=1
    )
    want = w0 - 0.1 * g / (g.abs() + 1e-8)
    assert torch.allclose(w.weight, want, atol=1e-6)
    assert rec["steps"] == 1 and rec["epochs_run"] == 1 and len(rec["loss_per_epoch"]) == 1


def test_gradient_accumulation_equals_the_mean_of_the_micro_batches():
    w, x, y = _quadratic(4)
    w2 = torch.nn.Linear(3, 1, bias=False)
    w2.load_state_dict(w.state_dict())
    loss = lambda m, idx: ((m(x[idx]) - y[idx]) ** 2).mean()  # noqa: E731
    cfg = TrainConfig(lr=0.05, batch_size=2, grad_accum=2, schedule="constant")
    train_loop(w, list(w.parameters()), cfg, lambda _e: chunked([0, 1, 2, 3], cfg), loss, total_steps=1)
    one = TrainConfig(lr=0.05, batch_size=4, schedule="constant")
    train_loop(w2, list(w2.parameters()), one, lambda _e: [[[0, 1, 2, 3]]], loss, total_steps=1)
    assert torch.allclose(w.weight, w2.weight, atol=1e-6)


def test_clipping_and_linear_schedule():
    w, x, y = _quadratic()
    cfg = TrainConfig(lr=1.0, schedule="linear", max_grad_norm=1e-3)
    seen = []

    def loss(m, _):
        return ((m(x) - y) ** 2).mean() * 1000

    opt, sched = build_optimizer([torch.nn.Parameter(torch.zeros(1))], TrainConfig(lr=1.0, warmup_steps=2), 4)
    lrs = []
    for _ in range(4):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs == pytest.approx([0.0, 0.5, 1.0, 0.5])  # warm-up 2 steps, then linear decay to 0 at step 4
    norms = []

    def record(opt_, *_):
        norms.append(math.sqrt(sum(float(p.grad.norm() ** 2) for g in opt_.param_groups for p in g["params"])))

    from torch.optim.optimizer import register_optimizer_step_pre_hook

    handle = register_optimizer_step_pre_hook(record)
    try:
        train_loop(
            w,
            list(w.parameters()),
            cfg,
            lambda _e: [[None]] * 3,
            loss,
            total_steps=3,
            after_epoch=lambda e, logs: seen.append(logs["loss"]) or False,
        )
        clipped = list(norms)
        norms.clear()
        train_loop(w, list(w.parameters()), TrainConfig(lr=1.0), lambda _e: [[None]], loss, total_steps=1)
    finally:
        handle.remove()
    assert len(clipped) == 3 and all(n <= 1e-3 * (1 + 1e-4) for n in clipped) and len(seen) == 1
    assert norms[0] > 1  # the same loss's gradient unclipped


def test_after_epoch_stops_early_and_parts_are_logged():
    w, x, y = _quadratic()
    cfg = TrainConfig(epochs=10, lr=0.01)
    rec = train_loop(
        w,
        list(w.parameters()),
        cfg,
        lambda _e: [[None]],
        lambda m, _: (((m(x) - y) ** 2).mean(), {"half": 0.5}),
        total_steps=10,
        after_epoch=lambda e, logs: e == 3,
    )
    assert rec["epochs_run"] == 3 and rec["parts_per_epoch"]["half"] == [0.5, 0.5, 0.5]


def test_steps_per_epoch_and_chunks():
    cfg = TrainConfig(batch_size=2, grad_accum=2)
    assert steps_per_epoch(5, cfg) == 2 and chunked(list(range(5)), cfg) == [[[0, 1], [2, 3]], [[4]]]
    assert steps_per_epoch(0, cfg) == 0


@pytest.mark.parametrize("bad", [dict(grad_accum=0), dict(warmup=1.0), dict(schedule="step"), dict(lr=-1.0)])
def test_bad_training_settings_are_input_errors(bad):
    from dukb import InputError

    with pytest.raises(InputError):
        TrainConfig(**bad).check()


# ------------------------------------------------------------------------------------------------- losses ------
def test_npo_one_definition_at_both_levels_by_hand():
    from dukb.neural.methods.npo import npo_forget_loss, npo_loss

    beta = 0.5
    # sequence level: one answer of two tokens with log-probs (-1, -2) under θ and (-1.5, -1.5) under f_ref
    logp, ref = torch.tensor([-3.0]), torch.tensor([-3.0 + 0.25])
    want = (2 / beta) * math.log(1 + math.exp(beta * (-0.25)))
    assert npo_loss(logp, ref, beta).item() == pytest.approx(want, rel=1e-6)
    # token level: mean over tokens of log(1 + (p/p_ref)^β), then over sequences
    lp = torch.tensor([[-1.0, -2.0]])
    rp = torch.tensor([[-1.5, -1.5]])
    mask = torch.tensor([[True, True]])
    tok = (math.log(1 + math.exp(beta * 0.5)) + math.log(1 + math.exp(beta * -0.5))) / 2
    assert npo_loss(lp, rp, beta, mask).item() == pytest.approx(2 / beta * tok, rel=1e-6)
    # from logits: at θ = f_ref both levels give (2/β) log 2
    logits = torch.randn(2, 5, 7)
    labels = torch.tensor([[-100, -100, 3, 4, 1], [-100, 2, 2, 5, 6]])
    for level in ("sequence", "token"):
        assert npo_forget_loss(logits, logits, labels, beta, level).item() == pytest.approx(2 / beta * math.log(2))
    npo = METHODS["npo"].with_options({"beta": beta})
    assert npo.loss(logits, logits, {"labels": labels}, level="token").item() == pytest.approx(2 / beta * math.log(2))
