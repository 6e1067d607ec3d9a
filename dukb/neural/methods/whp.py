"""Who's Harry Potter (WHP; Eldan & Russinovich 2023) as defined in Wu et al. 2025, Eq. 3.

Next-token logits of the unlearned model: ℓ(α) = ℓ_base − α · max(ℓ_reinforced − ℓ_base, 0), where ℓ_base are the
finetuned model's logits and ℓ_reinforced the logits of the model reinforced on the target (10 more steps, as for
TV). Used in generation and in answer scoring through a :class:`dukb.neural.probe.Predictor` that runs both models
in lockstep. α ∈ {0.5, 1, 5, 10, 100, 1000} (Eval-DU's config and App. H; ``dukb evaluate --whp-grid notebook``:
the figure notebook's {10, 1e3, 1e5, 1e7, 1e8}, :data:`dukb.neural.families.WHP_GRIDS`). The reinforcement's
schedule is TV's (:func:`dukb.neural.methods.tv.reinforce`). Under the "generation" judge its answers are judged
with the prompt (:func:`judges_prompt`).
"""

from __future__ import annotations

import copy

import torch  # noqa: TID253 (a model module: reached only through a command's lazy import)

from dukb.neural.families import WHP_GRIDS
from dukb.neural.methods.base import Method, UnlearnContext
from dukb.neural.methods.tv import reinforce, reinforce_setting
from dukb.neural.probe import Predictor

ALPHA_GRID = WHP_GRIDS["config"]


def whp_logits(base_logits, reinforced_logits, alpha: float):
    """Eq. 3: ``base − alpha * relu(reinforced − base)`` (any shape [..., V]); α = 0 returns the base logits."""

    return base_logits - alpha * torch.relu(reinforced_logits - base_logits)


def judges_prompt(tags) -> bool:
    """WHP's prompt rule: under the "generation" judge (``tags.judge``) a WHP model's answer is judged on the prompt
    followed by its continuation, as Eval-DU's WHP evaluation decodes the whole generated sequence
    (evaluate_util.py:23-26: ``tokenizer.decode(outputs[0])``, then ``answer.lower() in output.lower()``); under
    dukb's "line" judge on the answer line alone, like every method.

    Source: Eval-DU's code (wrh14/deep_unlearning evaluate_util.py ``eval_qa_whp``), Wu et al. 2025, Eq. 3.
    """
    return getattr(tags, "judge", "line") == "generation"


class WHP(Method):
    """WHP over α."""

    name = "whp"
    param = "alpha"
    lr_kind = "reinforce"  # its default rate: :func:`dukb.neural.families.family_lrs`
    default_grid = ALPHA_GRID
    summary = "Who's Harry Potter logit steering away from the reinforced model"
    source = "Eldan & Russinovich 2023; Wu et al. 2025, Eq. 3"

    def sweep(self, ctx: UnlearnContext, grid=None):

        overfit = reinforce(ctx, lr=self.lr)
        reinforced = copy.deepcopy(ctx.lm.model)
        reinforced.load_state_dict(overfit)
        reinforced.eval()
        try:
            for alpha in grid or self.default_grid:
                a = float(alpha)
                yield (
                    {"alpha": a, **reinforce_setting(ctx)},
                    Predictor(
                        ctx.lm.model,
                        ctx.lm.tokenizer,
                        ctx.lm.tags,
                        aux_model=reinforced,
                        combine=lambda b, r, a=a: whp_logits(b, r, a),
                        device=ctx.lm.device,
                        judge_prompt=judges_prompt(ctx.lm.tags),
                    ),
                )
        finally:
            del reinforced
