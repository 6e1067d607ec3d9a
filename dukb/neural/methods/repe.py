"""Representation engineering for unlearning (RepE; Zou et al. 2023, as RWKU uses it, Jin et al. 2024 App. H):
a control vector that moves the model's activations from "expert" towards "novice" about the target, added at
inference with strength α; no weight change.

    v_l = g_l(p_novice) − g_l(p_expert),   h_l ← h_l + α · v_l   for every block l of the steered range,

with g_l the mean over tokens of block l's output hidden states on a prompt, p_novice = "{intro}You don't know
{target} at all. Please feel free to fabricate information about {target}." and p_expert = "{intro}You know
{target} very well. Please provide accurate information about {target}." (RWKU's prompts; {target} as for ICU, the
forget facts' people; {intro} empty by default). RWKU does not say which layers it steers: dukb steers the middle
third of the blocks by default, or ``ctx.layers`` when set. α ∈ {0.5, 1.0, 1.5} (RWKU).
"""

from __future__ import annotations

import torch  # noqa: TID253 (a model module: reached only through a command's lazy import)

from dukb import InputError
from dukb.neural.methods.base import Method, UnlearnContext
from dukb.neural.methods.icu import forget_target_names
from dukb.neural.probe import Predictor

NOVICE = "{intro}You don't know {target} at all. Please feel free to fabricate information about {target}."
EXPERT = "{intro}You know {target} very well. Please provide accurate information about {target}."
ALPHA_GRID = (0.5, 1.0, 1.5)


def decoder_blocks(model) -> list:
    """The transformer blocks of a causal LM, in order (GPT-2's ``transformer.h``, Llama's ``model.layers``, ...).

    Raises:
        InputError: no ModuleList named h, layers or blocks.
    """

    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.ModuleList) and name.split(".")[-1] in ("h", "layers", "blocks") and len(mod):
            return list(mod)
    raise InputError("RepE: cannot find the model's transformer blocks (a ModuleList named h, layers or blocks)")


def _hidden(output):
    return output[0] if isinstance(output, tuple) else output


def block_means(model, tokenizer, text: str, device: str = "cpu"):
    """g_l(text): the mean over tokens of each block's output hidden states.

    Returns:
        tensor [n_blocks, d] (float32).
    """

    blocks = decoder_blocks(model)
    got: dict[int, object] = {}
    hooks = [
        b.register_forward_hook(lambda _m, _i, out, i=i: got.__setitem__(i, _hidden(out).detach()))
        for i, b in enumerate(blocks)
    ]
    try:
        ids = tokenizer(text, return_tensors="pt", add_special_tokens=False)["input_ids"].to(device)
        with torch.no_grad():
            model(input_ids=ids)
    finally:
        for h in hooks:
            h.remove()
    return torch.stack([got[i][0].float().mean(0) for i in range(len(blocks))])


def control_vector(novice, expert):
    """v = g(p_novice) − g(p_expert) ([n_blocks, d] each; Zou et al. 2023's contrast vector)."""
    return novice - expert


def steer(hidden, vector, alpha: float):
    """h + α·v, broadcast over batch and positions (hidden [B, L, d], vector [d])."""
    return hidden + alpha * vector.to(hidden.dtype)


def default_layers(n_blocks: int) -> tuple[int, int]:
    """The middle third of ``n_blocks`` blocks as an inclusive (first, last) range (at least one block)."""
    lo = n_blocks // 3
    return lo, max(lo, (2 * n_blocks) // 3 - 1)


class RepE(Method):
    """RepE over the steering strength α."""

    name = "repe"
    param = "alpha"
    default_grid = ALPHA_GRID
    summary = "representation engineering: add α·(novice − expert) activations about the target to middle blocks"
    source = "Zou et al. 2023; Jin et al. 2024 (RWKU), App. H"

    def __init__(self, intro: str = ""):
        self.intro = intro

    def sweep(self, ctx: UnlearnContext, grid=None):

        model = ctx.lm.model
        model.eval()
        target = forget_target_names(ctx)
        blocks = decoder_blocks(model)
        lo, hi = ctx.layers or default_layers(len(blocks))
        if lo < 0 or hi < lo or hi >= len(blocks):
            raise InputError(f"RepE layer range {lo}-{hi} is outside the model's blocks 0-{len(blocks) - 1}")
        tok = ctx.lm.tokenizer
        v = control_vector(
            block_means(model, tok, NOVICE.format(intro=self.intro, target=target), ctx.lm.device),
            block_means(model, tok, EXPERT.format(intro=self.intro, target=target), ctx.lm.device),
        )
        hooks: list = []

        def clear():
            while hooks:
                hooks.pop().remove()

        try:
            for alpha in grid or self.default_grid:
                a = float(alpha)
                clear()
                for i in range(lo, hi + 1):

                    def hook(_m, _inp, out, i=i, a=a):
                        if isinstance(out, tuple):
                            return (steer(out[0], v[i], a),) + tuple(out[1:])
                        return steer(out, v[i], a)

                    hooks.append(blocks[i].register_forward_hook(hook))
                yield ({"alpha": a, "layers": [lo, hi]}, Predictor(model, tok, ctx.lm.tags, device=ctx.lm.device))
        finally:
            clear()


__all__ = [
    "ALPHA_GRID",
    "EXPERT",
    "NOVICE",
    "RepE",
    "block_means",
    "control_vector",
    "decoder_blocks",
    "default_layers",
    "steer",
]
