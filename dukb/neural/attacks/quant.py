"""`quant8`, `quant4` (and the control `quant16`): quantize the unlearned model's weights, then probe.

Zhang et al. (ICLR 2025, "Catastrophic failure of LLM unlearning via quantization", arXiv 2410.16454) find that
4-bit quantization restores much of what GA/NPO unlearned (MUSE-News VerbMem of NPO_GDR 0.3 → 33.2): unlearning
moves weights by less than a quantization step, so rounding undoes it.

Weight-only round-to-nearest quantization of every ``nn.Linear`` (GPT-2's ``Conv1D`` converted to the equal Linear
first) through torchao (PyTorch's quantization library,
CPU and GPU): 8 bits per output channel (``Int8WeightOnlyConfig``) and 4 bits in groups of ``group`` input channels
(``IntxWeightOnlyConfig(int4, PerGroup)``), activations in the model's dtype. The model is a copy, with
any LoRA adapter merged into its weights first (W + BA is what is quantized; :func:`dukb.neural.attacks.base.plain_copy`);
the entry names the library and scheme.

``quant16`` is the control, 16-bit weights: a model already in bfloat16 or float16 (as Zhang et al.'s
full-precision models) is left exactly as it is; a float32 model has every weight rounded to float16 and back (a
relative change below 5e-4), which must change no answer.
"""

from __future__ import annotations

import dataclasses
import logging
import math

import torch  # noqa: TID253 (a model module: reached only through a command's lazy import)

from dukb import InputError
from dukb.neural.attacks.base import Attack, AttackContext, AttackOutcome, known_table, plain_copy, probe_known
from dukb.neural.bounds import Range


def _torchao():
    """Import torchao quietly (it logs the CUDA kernels it cannot load on a CPU machine)."""
    for name in ("torchao", "torchao.kernel", "torchao.quantization"):
        logging.getLogger(name).setLevel(logging.ERROR)
    try:
        import torchao  # noqa: F401
        from torchao.quantization import Int8WeightOnlyConfig, IntxWeightOnlyConfig, quantize_
        from torchao.quantization.granularity import PerGroup
    except ImportError as e:  # pragma: no cover - a dependency of dukb
        raise InputError(f"the quantization attacks need torchao ({e})") from None
    return Int8WeightOnlyConfig, IntxWeightOnlyConfig, quantize_, PerGroup


def layer_widths(model) -> list[int]:
    """The input sizes of every weight 4-bit quantization groups: each ``nn.Linear``'s ``in_features`` and each
    transformers ``Conv1D``'s (GPT-2's, weight [in, out]), LoRA adapters left out (they are merged first), sorted."""
    try:
        from transformers.pytorch_utils import Conv1D
    except ImportError:  # pragma: no cover
        Conv1D = ()
    out = set()
    for name, m in model.named_modules():
        if "lora_" in name:
            continue
        if isinstance(m, torch.nn.Linear):
            out.add(int(m.in_features))
        elif Conv1D and isinstance(m, Conv1D):
            out.add(int(m.weight.shape[0]))
    return sorted(out)


def check_group(model, group: int) -> int:
    """``group`` when it divides every layer width of ``model`` (:func:`layer_widths`): 4-bit groups must tile
    every row.

    Returns:
        ``group`` (int).

    Raises:
        InputError: a width ``group`` does not divide (one line naming the widths and the groups that fit).
    """
    widths = layer_widths(model)
    bad = [w for w in widths if w % group]
    if bad:
        g = math.gcd(*widths)
        fits = [2**k for k in range(11) if g % 2**k == 0]
        raise InputError(
            f"--attacks quant4: group={group} does not divide the model's layer widths "
            f"({', '.join(map(str, bad[:5]))}); choose a group dividing {g} "
            f"({', '.join(map(str, fits))})"
        )
    return group


def conv1d_to_linear(model) -> int:
    """Replace every transformers ``Conv1D`` (GPT-2's projections: y = x W + b with W of shape [in, out]) by the
    equal ``nn.Linear`` (weight Wᵀ), so that weight quantization reaches them; in place.

    Returns:
        the number of modules replaced.
    """

    try:
        from transformers.pytorch_utils import Conv1D
    except ImportError:  # pragma: no cover
        return 0
    n = 0
    for _name, mod in list(model.named_modules()):
        for child_name, child in list(mod.named_children()):
            if isinstance(child, Conv1D):
                w = child.weight
                lin = torch.nn.Linear(
                    w.shape[0], w.shape[1], bias=child.bias is not None, device=w.device, dtype=w.dtype
                )
                with torch.no_grad():
                    lin.weight.copy_(w.t())
                    if child.bias is not None:
                        lin.bias.copy_(child.bias)
                setattr(mod, child_name, lin)
                n += 1
    return n


def quantized_copy(pred, bits: int, group: int = 32):
    """A copy of ``pred`` with every Linear weight quantized to ``bits`` (16, 8 or 4).

    Returns:
        (Predictor over the copy, scheme description str).

    Raises:
        InputError: bits not 4, 8 or 16; torchao missing.

    Source: Zhang et al. 2025 (ICLR), arXiv 2410.16454, Sec. 4 (RTN quantization of unlearned models).
    """

    model = plain_copy(pred.model)
    if bits == 16:
        n = 0
        with torch.no_grad():
            for p in model.parameters():
                if p.dtype == torch.float32:
                    p.copy_(p.to(torch.float16).to(p.dtype))
                    n += 1
        scheme = "float16 round trip of every float32 weight (torch)" if n else "none: the weights are 16-bit already"
    elif bits in (8, 4):
        Int8, Intx, quantize_, PerGroup = _torchao()
        conv1d_to_linear(model)
        import torchao

        if bits == 8:
            quantize_(model, Int8())
            scheme = f"torchao {torchao.__version__} Int8WeightOnlyConfig: int8 per output channel, RTN, weight-only"
        else:
            g = check_group(model, group)
            quantize_(model, Intx(weight_dtype=torch.int4, granularity=PerGroup(g)))
            scheme = f"torchao {torchao.__version__} IntxWeightOnlyConfig: int4 in groups of {g}, RTN, weight-only"
    else:
        raise InputError(f"quantization supports 16, 8 or 4 bits, got {bits}")
    aux = getattr(pred, "aux_model", None)
    out = dataclasses.replace(pred, model=model)
    if aux is not None:  # WHP's reinforced model runs in lockstep: quantized alike
        out = dataclasses.replace(
            out, aux_model=quantized_copy(dataclasses.replace(pred, model=aux, aux_model=None), bits, group)[0].model
        )
    return out, scheme


def _quant(bits: int):
    def quant(ctx: AttackContext, s: dict) -> AttackOutcome:
        """Quantize a copy of the unlearned model and probe every fact.

        Source: Zhang et al. 2025 (ICLR), arXiv 2410.16454, Sec. 4 (RTN quantization of unlearned models).
        """
        pred, scheme = quantized_copy(ctx.pred, bits, int(s.get("group", 32)))
        known = probe_known(pred, ctx.items, ctx.batch_size)
        return AttackOutcome(known_table(ctx.items, known), {"bits": bits, "scheme": scheme})

    def check(s):
        g = s.get("group")
        if g is not None and (g < 1 or g & (g - 1)):  # a divisor of power-of-two widths is used as given
            raise InputError(
                f"--attacks quant4: group must be a power of two (1, 2, 4, ..., 1024), got {g}: "
                "another value would be replaced by a divisor of the model's layer widths"
            )

    def check_model(s, model) -> None:
        """Refuse a 4-bit group that does not divide the model's layer widths, before any model is changed."""
        if bits == 4:
            check_group(model, int(s.get("group", 32)))

    quant.check = check
    quant.check_model = check_model
    return quant


QUANT8 = Attack(
    "quant8",
    "int8 weight-only RTN quantization of every Linear (torchao), then probe",
    "Zhang et al. 2025, arXiv 2410.16454",
    {},
    _quant(8),
)
QUANT4 = Attack(
    "quant4",
    "int4 weight-only RTN quantization in groups of `group` input channels (torchao), then probe",
    "Zhang et al. 2025, arXiv 2410.16454",
    {"group": 32},
    _quant(4),
    ranges={"group": Range(1, 1024, why="a power of two")},
)
QUANT16 = Attack(
    "quant16",
    "control: every weight rounded to float16 and back; must change no answer",
    "Zhang et al. 2025, arXiv 2410.16454",
    {},
    _quant(16),
)
