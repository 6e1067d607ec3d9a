"""The documented range of every numeric option of the neural and protocol commands, declared once (torch-free).

A :class:`Range` is the one declaration of an option's bounds: the config dataclasses carry it as field metadata
(:func:`bounded`, checked by :func:`check_ranges` in their ``check()``, so the Python API gets the same checks), and
the command line reads the same object (:func:`dukb.cli.run_options.ranged`) to bound the option at parse time and
show the range in ``--help``. Numbers are read strictly everywhere: ASCII digits, no ``_`` separators, finite
(:func:`decimal_problem`).

Devices are checked against what torch reports (:func:`check_device`): ``cpu``, ``cuda`` and ``cuda:N`` with N
below the number of CUDA devices, ``mps`` only where torch's MPS backend is available, ``auto``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, fields

from dukb import InputError

#: a decimal number in ASCII: digits, an optional point and exponent, a leading '-' (no '_', '+', nan or inf)
DECIMAL = re.compile(r"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")


def decimal_problem(what: str, text: str) -> str | None:
    """Why ``text`` is not a finite decimal number as dukb reads them (:data:`DECIMAL`), or None when it is one.

    Python's ``float()`` also takes ``1_0``, ``+1``, ``nan``, ``inf``, surrounding spaces and non-ASCII digits, and
    ``1e999`` overflows to infinity; none of them is a number here.

    Args:
        what: names the value in the message (e.g. "value", "--lr").
        text: the text given.

    Returns:
        The message, or None.
    """
    shown = text if len(text) <= 40 else text[:37] + "..."
    if not DECIMAL.fullmatch(text):
        return f"{what} {shown!r} is not a decimal number (the digits 0-9, a point, an exponent, a leading '-')"
    if not math.isfinite(float(text)):
        return f"{what} {shown!r} is too large (not a finite number)"
    return None


@dataclass(frozen=True)
class Range:
    """The closed or half-open interval an option's value must lie in.

    Attributes:
        lo, hi: the bounds (int or float; both always given, so every option is bounded).
        lo_open, hi_open: the bound itself is excluded (e.g. a learning rate > 0, a dropout < 1).
        integer: the value is an integer (bounds are ints).
        why: a few words on the bound (shown with a refusal), e.g. "0 = full-parameter training".
    """

    lo: float
    hi: float
    lo_open: bool = False
    hi_open: bool = False
    integer: bool = True
    why: str = ""

    @property
    def closed(self) -> bool:
        """Both bounds included (typer's ``min``/``max`` can show and check it)."""
        return not (self.lo_open or self.hi_open)

    def text(self) -> str:
        """The interval as help and messages show it: ``1 to 10,000`` or ``in (0, 10]``."""

        def num(v):
            return f"{int(v):,}" if self.integer or float(v).is_integer() else f"{v:g}"

        if self.closed:
            return f"{num(self.lo)} to {num(self.hi)}"
        return f"in {'(' if self.lo_open else '['}{num(self.lo)}, {num(self.hi)}{')' if self.hi_open else ']'}"

    def problem(self, name: str, value) -> str | None:
        """Why ``value`` is not in this range (not a number, not finite, an integer expected, outside), or None.

        Args:
            name: the option's flag (e.g. "--lr"); value: the parsed value (None: unset, accepted).
        """
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"{name} must be a number, got {value!r}"
        if self.integer and not isinstance(value, int):
            return f"{name} must be an integer, got {value!r}"
        if not math.isfinite(value):
            return f"{name} must be a finite number, got {value}"
        low = value <= self.lo if self.lo_open else value < self.lo
        high = value >= self.hi if self.hi_open else value > self.hi
        if low or high:
            where = self.text() if not self.closed else f"from {self.text()}"
            return f"{name} must be {where}, got {value:,}" + (f" ({self.why})" if self.why else "")
        return None

    def check(self, name: str, value) -> None:
        """Raise :class:`dukb.InputError` with :meth:`problem`'s message when ``value`` is outside."""
        problem = self.problem(name, value)
        if problem:
            raise InputError(problem)


def bounded(default, rng: Range, flag: str | None = None):
    """A dataclass field with its :class:`Range` (and the flag its messages name) as metadata, read by
    :func:`check_ranges` and :func:`field_range`."""
    return field(default=default, metadata={"range": rng, "flag": flag})


def field_range(cls, name: str) -> Range | None:
    """The :class:`Range` a config dataclass declares for field ``name`` (None when unbounded)."""
    for f in fields(cls):
        if f.name == name:
            return f.metadata.get("range")
    return None


def check_ranges(cfg) -> None:
    """Check every bounded field of a config dataclass (:func:`bounded`).

    Raises:
        InputError: a field outside its range, named by its flag (``--lr must be in (0, 10], got inf``).
    """
    for f in fields(cfg):
        rng = f.metadata.get("range")
        if rng is not None:
            rng.check(f.metadata.get("flag") or "--" + f.name.replace("_", "-"), getattr(cfg, f.name))


#: the bounds of every numeric option (one declaration each; the docs' table of ranges lists them)
SEED = Range(0, 2**32 - 1, why="a 32-bit unsigned integer, the range numpy and torch both accept")
LR = Range(0, 10, lo_open=True, integer=False, why="a learning rate")
EPOCHS = Range(1, 10_000)
BATCH_SIZE = Range(1, 4096)
LORA_R = Range(0, 4096, why="0 = full-parameter training")
LORA_ALPHA = Range(1, 65_536)
LORA_DROPOUT = Range(0, 1, hi_open=True, integer=False)
N_TARGETS = Range(1, 1_000_000)
N_SEEDS = Range(1, 10_000)  # the same bound as dukb.solver.mdus.MAX_SEEDS (tested to agree)
STEPS = Range(1, 100_000)
GRID_STEPS = Range(0, 100_000)
GRID_VALUE = Range(0, 1e6, integer=False)
NEW_TOKENS = Range(1, 4096)
FRACTION_OPEN = Range(0, 1, lo_open=True, hi_open=True, integer=False)
FRACTION_HALF = Range(0, 1, lo_open=True, integer=False)
TEMPERATURE = Range(0, 100, integer=False)
TEMPERATURE_POS = Range(0, 100, lo_open=True, integer=False)
BOOTSTRAP = Range(1, 1_000_000)
GRID_INTERVALS = Range(1, 1000)
RETAIN_EVAL = Range(1, 1_000_000)
TAU = Range(0, 1e6, lo_open=True, integer=False, why="nats per token")
SAMPLES = Range(1, 1000)
#: RESTOR's sizes (Rezaei et al., Sec. 3.2-3.4): 0 is degenerate for each (a corruption document without context,
#: no retain document, no random answer to rank the correct one against, an unlearning that does not train)
CONTEXT = Range(1, 1000, why="correct facts per corruption document; RESTOR's k = context / 5")
TEMPLATES = Range(1, 1000)
N_TEXTS = Range(1, 1_000_000, why="retain documents")
RANDOM_ANSWERS = Range(1, 1000, why="random plausible answers per fact")
REG_WEIGHT = Range(0, 1e6, integer=False)
UNLEARN_EPOCHS = Range(1, 10_000, why="epochs of document unlearning")

#: block indices of ``--layers FIRST-LAST`` (partial-layer training)
LAYER = Range(0, 10_000)

#: dtype names a model may be loaded in (:func:`dukb.neural.models.resolve_dtype` reads the same names)
DTYPES = ("auto", "float32", "fp32", "bfloat16", "bf16", "float16", "fp16")


def check_dtype(dtype: str, flag: str = "--dtype") -> str:
    """Check a dtype name (:data:`DTYPES`) before any model is loaded.

    Raises:
        InputError: another name (``FP16``, ``int8``, ``''``).
    """
    if dtype not in DTYPES:
        raise InputError(f"{flag} {dtype!r} is not a dtype (choose auto, float32, bfloat16, float16)")
    return dtype


#: devices given by name (``cuda:N`` besides)
DEVICE_NAMES = ("auto", "cpu", "cuda", "mps")
_CUDA_N = re.compile(r"cuda:(0|[1-9][0-9]{0,3})")


def check_device(device: str, flag: str = "--device") -> str:
    """Check a device name against what torch reports, before any model is loaded.

    Args:
        device: "auto", "cpu", "cuda", "cuda:N" or "mps"; flag: the option named in messages.

    Returns:
        ``device`` unchanged.

    Raises:
        InputError: another name (empty, "tpu", "CUDA", "cuda:01"); "cuda" or "cuda:N" where torch sees no CUDA
            device or fewer than N+1; "mps" where torch's MPS backend is not available.
    """
    if not isinstance(device, str) or not (device in DEVICE_NAMES or _CUDA_N.fullmatch(device)):
        raise InputError(f"{flag} {device!r} is not a device (choose auto, cpu, cuda, cuda:N or mps)")
    if device in ("auto", "cpu"):
        return device
    import torch

    if device == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise InputError(f"{flag} mps: torch reports no MPS device on this machine (choose auto or cpu)")
        return device
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    index = int(device.partition(":")[2] or 0)
    if index >= n:
        have = "no CUDA device" if n == 0 else f"{n} CUDA device{'s' if n > 1 else ''} (cuda:0 to cuda:{n - 1})"
        raise InputError(f"{flag} {device}: torch reports {have} on this machine")
    return device


__all__ = [
    "DECIMAL",
    "DTYPES",
    "Range",
    "bounded",
    "check_device",
    "check_dtype",
    "check_ranges",
    "decimal_problem",
    "field_range",
]
