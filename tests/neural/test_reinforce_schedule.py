"""TV's and WHP's reinforcement on Eval-DU's schedule, and the paper's grids per model family (issue 41, items 1,
3 and 5: "the reinforcement schedule's learning rates step by step").

The independent implementation is written from wrh14/deep_unlearning finetune_reinforced_model.py:63-87 and
config/finetune_reinforced_model_per_fact.yaml (``num_epochs: 10``, ``batch_size: 1``, ``gradient_accumulation_steps:
1``, ``lr_scheduler_type: linear``, ``weight_decay: 0.01``; launched by scripts_unlearning_methods/tv.sh and whp.sh
with ``torchrun --nproc_per_node=2`` on one fact, FamilyForgetDataset's length = facts × world size), with
transformers' own ``get_linear_schedule_with_warmup`` (the scheduler HF's Trainer builds for
``lr_scheduler_type="linear"``), and, in the slow test, HF's Trainer itself.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from conftest import DEVICE  # noqa: E402
from dukb.neural.families import PAPER_GRIDS, WHP_GRIDS, component_grid  # noqa: E402
from dukb.neural.methods import METHODS, method_grids, resolve  # noqa: E402
from dukb.neural.methods.base import UnlearnContext  # noqa: E402
from dukb.neural.methods.tv import REINFORCE_STEPS, reinforce  # noqa: E402


def eval_du_reinforce_lrs(lr: float, world_size: int = 2, n_facts: int = 1) -> tuple[list[float], float]:
    """The learning rate of each optimiser step of finetune_reinforced_model.py, and its weight decay.

    Its TrainingArguments: ``max_steps = int(num_epochs * len(dataset)) // (batch_size * grad_accum * num_devices)``,
    ``warmup_steps = max(1, max_steps // num_epochs)``, ``lr_scheduler_type = "linear"``; HF's Trainer steps the
    scheduler after each optimiser step, so step k runs at the scheduler's value after k − 1 steps."""
    from transformers import get_linear_schedule_with_warmup

    num_epochs, batch_size, grad_accum = 10, 1, 1
    dataset_len = n_facts * world_size  # FamilyForgetDataset.__len__
    max_steps = int(num_epochs * dataset_len) // (batch_size * grad_accum * world_size)
    warmup_steps = max(1, max_steps // num_epochs)
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.AdamW([p], lr=lr, weight_decay=0.01)
    sched = get_linear_schedule_with_warmup(opt, warmup_steps, max_steps)
    out = []
    for _ in range(max_steps):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out, 0.01


@pytest.fixture()
def tiny(tmp_path):
    from dukb.neural.data import QA_KIND, QAItem
    from dukb.neural.modelbuild import build_tiny_model
    from dukb.neural.models import load_model
    from dukb.neural.spec import PROMPT_PRESETS, ModelSpec

    tags = PROMPT_PRESETS["tiny"]
    items = [
        QAItem(QA_KIND, "relationship", i, f"Who is {a} to {b} ?", r)
        for i, (a, b, r) in enumerate([("Ann", "Bob", "mother"), ("Cy", "Dee", "father")])
    ]
    build_tiny_model([tags.prompt(it.question) + tags.target(it.answer) for it in items], tmp_path / "m", seed=0)
    return load_model(ModelSpec(str(tmp_path / "m"), prompt="tiny", device=DEVICE)), items


def _recorded_steps(monkeypatch) -> list[list[tuple[float, float]]]:
    """Patch dukb's one optimiser factory to record, before every optimiser step, each parameter group's (lr,
    weight decay)."""
    import dukb.neural.train as train

    steps: list = []
    build = train.build_optimizer

    def recording(params, cfg, total_steps):
        opt, sched = build(params, cfg, total_steps)
        opt.register_step_pre_hook(lambda o, *_a: steps.append([(g["lr"], g["weight_decay"]) for g in o.param_groups]))
        return opt, sched

    monkeypatch.setattr(train, "build_optimizer", recording)
    return steps


def test_reference_reinforcement_learning_rates_step_by_step(tiny, monkeypatch):
    lm, items = tiny
    expected, wd = eval_du_reinforce_lrs(1e-3)
    assert len(expected) == REINFORCE_STEPS == 10
    assert expected == pytest.approx([0.0] + [1e-3 * (10 - k + 1) / 9 for k in range(2, 11)], abs=1e-18)
    steps = _recorded_steps(monkeypatch)
    state0 = {k: v.clone() for k, v in lm.model.state_dict().items()}
    overfit = reinforce(UnlearnContext(lm, items[:1], seed=0, reinforce="reference"), lr=1e-3)
    assert len(steps) == 10
    for k, groups in enumerate(steps):
        assert [g[0] for g in groups] == pytest.approx([expected[k]] * len(groups), abs=1e-18), k
    assert sorted({g[1] for g in steps[0]}) == [0.0, wd]  # HF's decay groups: biases and LayerNorms exempt
    assert sum(expected) == pytest.approx(5 * 1e-3)  # half the constant schedule's 10 · lr
    assert any(not torch.equal(overfit[k], v) for k, v in state0.items())
    assert all(torch.equal(lm.model.state_dict()[k], v) for k, v in state0.items())  # θ₀ restored


def test_constant_reinforcement_is_dukbs_default(tiny, monkeypatch):
    lm, items = tiny
    steps = _recorded_steps(monkeypatch)
    ctx = UnlearnContext(lm, items[:1], seed=0)
    assert ctx.reinforce == "constant"
    reinforce(ctx, lr=1e-3)
    assert [groups for groups in steps] == [[(1e-3, 0.0)]] * 10


@pytest.mark.slow
def test_reference_reinforcement_is_hf_trainers_run(tiny, tmp_path):
    """The reinforced weights equal HF's Trainer run with finetune_reinforced_model.py's TrainingArguments
    (max_steps 10, warmup_steps 1, linear, weight decay 0.01, AdamW, no clipping as under its DeepSpeed config) on
    the fact's answer NLL (the model's own loss on the labels, as the reference's CustomTrainer)."""
    import transformers
    from transformers import Trainer

    from dukb.neural.data import encode_qa

    lm, items = tiny
    forget = items[:1]
    state0 = {k: v.clone() for k, v in lm.model.state_dict().items()}
    got = reinforce(UnlearnContext(lm, forget, seed=0, reinforce="reference"), lr=1e-2)
    batch = encode_qa(lm.tokenizer, lm.tags, forget, DEVICE)

    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "hf"),
        per_device_train_batch_size=1,
        max_steps=10,
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
    # HF's own loss: the mean NLL of the answer tokens (labels -100 elsewhere), as the reference's CustomTrainer
    Trainer(
        model=lm.model,
        args=args,
        train_dataset=[{k: v[0] for k, v in batch.items()}],
        data_collator=lambda xs: {k: torch.stack([x[k] for x in xs]) for k in xs[0]},
    ).train()
    ref = lm.model.state_dict()
    for k, v in state0.items():
        if v.is_floating_point():
            assert torch.allclose(got[k].cpu(), ref[k].cpu(), atol=1e-6, rtol=1e-5), k
    assert any(not torch.equal(got[k], state0[k]) for k in state0)


# ------------------------------------------------------------------------------------------------ the grids ----
def test_paper_grids_per_family_as_eval_du_config():
    """config/model_config.yaml: ga/npo_num_epochs 32 (gpt2-xl) or 16 (phi, llama2-7b, llama3-8b), read at the
    checkpoints [1, 2, 4, 8, 16, 32] the run reaches (unlearn_trainer.py); tv_alpha_list; whp_alpha_list."""
    checkpoints = [1, 2, 4, 8, 16, 32]
    for family, epochs, tv in (
        ("gpt2-xl", 32, [0.2, 1.0, 5.0, 10.0, 30.0, 60.0, 80.0]),
        ("phi", 16, [0.2, 0.5, 1.0, 5.0, 10.0]),
        ("llama", 16, [0.2, 0.5, 1.0, 5.0, 10.0]),
    ):
        steps = [c for c in checkpoints if c <= epochs]
        assert list(component_grid("ga", family, "paper")) == steps == list(component_grid("npo", family, "paper"))
        assert list(component_grid("tv", family, "paper")) == tv
    assert set(PAPER_GRIDS) == {"gpt2-xl", "phi", "llama"}
    assert component_grid("ga", "gpt2-xl", "paper")[-1] == 32
    for family in ("tiny", "smollm2", "generic", None):  # families the paper did not run keep dukb's grids
        assert component_grid("ga", family, "paper") is None
    assert component_grid("ga", "gpt2-xl", "dukb") is None and component_grid("npo_gdr", "gpt2-xl", "paper") is None
    assert list(WHP_GRIDS["config"]) == [0.5, 1.0, 5.0, 10.0, 100.0, 1000.0] == list(METHODS["whp"].default_grid)
    assert list(WHP_GRIDS["notebook"]) == [10.0, 1e3, 1e5, 1e7, 1e8]
    assert component_grid("whp", "tiny", "dukb", "notebook") == WHP_GRIDS["notebook"]
    with pytest.raises(KeyError):
        component_grid("ga", "phi", "papers")


def test_method_grids_take_the_components_below_an_explicit_grid():
    resolved = [tuple(resolve(m, "target")) for m in ("ga", "npo", "tv", "whp", "du_ga")]
    comp = {fam: (lambda m, fam=fam: component_grid(m.name, fam, "paper", "notebook")) for fam in ("gpt2-xl", "tiny")}
    g = method_grids(resolved, {}, comp["gpt2-xl"])
    assert g["ga"] == g["npo"] == [1, 2, 4, 8, 16, 32] and g["tv"] == [0.2, 1.0, 5.0, 10.0, 30.0, 60.0, 80.0]
    assert g["whp"] == list(WHP_GRIDS["notebook"])
    assert g["du_ga"] == method_grids(resolved, {})["du_ga"]  # a preset keeps its own grid
    assert method_grids(resolved, {}, comp["tiny"])["ga"] == [1, 2, 4, 8, 16] == method_grids(resolved, {})["ga"]
    assert method_grids(resolved, {"ga": [3]}, comp["gpt2-xl"])["ga"] == [3]  # --grid wins
