"""The controls of excessive unlearning are strategy objects (Wang et al. 2024, Sec. 5): one per control kind, each
naming what its grid sweeps; ``Control.param`` reads them."""

from __future__ import annotations

import pytest

from dukb import InputError
from dukb.neural.methods.base import CONTROL_STRATEGIES, CONTROLS, Control
from dukb.neural.methods.controls import ControlStrategy


def test_one_strategy_per_control_kind_with_its_swept_parameter():
    assert tuple(CONTROL_STRATEGIES) == CONTROLS
    assert {k: s.param for k, s in CONTROL_STRATEGIES.items()} == {
        "none": "steps",
        "oc": "tau",
        "es": "steps",
        "mm": "alpha",
    }
    assert all(isinstance(s, ControlStrategy) and s.kind == k for k, s in CONTROL_STRATEGIES.items())
    for kind in CONTROLS:
        assert Control(kind, 4).check().param == CONTROL_STRATEGIES[kind].param
    with pytest.raises(InputError, match="unknown control"):
        Control("xx").check()
