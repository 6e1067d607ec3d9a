"""The compat preset mechanism (dukb.neural.declare.apply_compat): a preset fills the components not given, an
explicit value wins, an unset component gets its `unset` value, and the checked plan records every component."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import pytest

from dukb import InputError
from dukb.neural.declare import apply_compat, compat_option, help_of, option
from dukb.neural.runconfig import RunConfig

PRESETS = {"paper": {"judge": "generation", "steps": 32}}


@dataclasses.dataclass
class Toy(RunConfig):
    COMPAT: ClassVar[dict] = PRESETS
    compat: str | None = compat_option(PRESETS, "The paper's code")
    judge: str | None = option(None, unset="line", help="How an answer is judged.")
    steps: int | None = option(None, unset=16, help="Steps.")
    other: str = option("x", help="Not a component.")


def test_no_preset_gives_each_component_its_unset_value():
    plan = Toy().check()
    assert (plan.judge, plan.steps, plan.compat) == ("line", 16, None)


def test_a_preset_fills_what_is_not_given_and_an_explicit_value_wins():
    assert (Toy(compat="paper").check().judge, Toy(compat="paper").check().steps) == ("generation", 32)
    plan = Toy(compat="paper", steps=8).check()
    assert (plan.judge, plan.steps, plan.compat) == ("generation", 8, "paper")
    assert dataclasses.asdict(plan)["judge"] == "generation"  # the plan (config.json) records the component


def test_unknown_preset_is_refused_in_one_line():
    with pytest.raises(InputError, match="unknown --compat 'nope' \\(choose from paper\\)"):
        Toy(compat="nope").check()


def test_a_preset_naming_an_unknown_field_is_a_programming_error():
    cfg = Toy(compat="paper")
    with pytest.raises(TypeError, match="unknown fields"):
        apply_compat(cfg, {"paper": {"no_such_field": 1}})


def test_an_unset_option_must_default_to_none_and_its_help_says_the_value():
    with pytest.raises(ValueError):
        option("line", unset="line", help="x")
    f = next(f for f in dataclasses.fields(Toy) if f.name == "judge")
    assert help_of(f).endswith("Not given: line, or the --compat preset's value.")
