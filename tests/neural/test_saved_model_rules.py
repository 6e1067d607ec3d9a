"""What ``--save-models`` decides without a model run: evaluate's ``best`` row (Recall@Acc>=0.8 over one target and
method's rows) and which unlearned models are not their weights alone (never saved)."""

from __future__ import annotations

from types import SimpleNamespace


def _row(steps, recall, acc):
    return {"param": "steps", "setting": {"steps": steps}, "recall": recall, "accuracy_all": acc}


def test_best_row_is_the_largest_recall_that_keeps_accuracy_in_sweep_order():
    from dukb.neural.metrics.summary import best_row

    rows = [_row(8, 1.0, 0.5), _row(2, 0.5, 0.9), _row(4, 0.75, 0.85), _row(1, 0.25, None)]
    assert best_row(rows)["setting"] == {"steps": 4}
    assert best_row([_row(2, 0.5, 0.9), _row(1, 0.5, 0.9)])["setting"] == {"steps": 1}  # ties: the weaker
    assert best_row([_row(8, 1.0, 0.5)]) is None and best_row([_row(1, 0.2, float("nan"))]) is None


def test_models_that_are_not_their_weights_alone_are_named():
    import torch

    from dukb.neural.savedmodels import not_weights_alone

    lm = SimpleNamespace(tags="tags")
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    pred = SimpleNamespace(model=model, aux_model=None, tags="tags")
    assert not_weights_alone(pred, lm) is None
    assert "two models" in not_weights_alone(SimpleNamespace(model=model, aux_model=model, tags="tags"), lm)
    assert "prompt" in not_weights_alone(SimpleNamespace(model=model, aux_model=None, tags="other"), lm)
    hook = model[0].register_forward_hook(lambda *_a: None)
    assert "hooks" in not_weights_alone(pred, lm)
    hook.remove()
    assert not_weights_alone(pred, lm) is None
