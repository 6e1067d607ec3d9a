"""One declaration per option: a protocol config's dataclass fields carry, in their field metadata, everything the
command line, the ``--config`` file, the run identity and the docs need (as Hugging Face TRL's configs do).

:func:`option` makes such a field: its help, its flag, its group (a shared model option of every protocol, a run
option of the command, or an option of the protocol itself), its documented range (:class:`dukb.neural.bounds.Range`)
or choices, and whether it belongs to the run identity. The CLI builds each protocol command from these fields
(:mod:`dukb.cli.declared`); :func:`dukb.neural.bounds.check_ranges` checks the ranges in every config's ``check()``.

A checked config is frozen (:func:`freeze`): ``check()`` returns the resolved plan the stages consume, and a stage
that tries to change it gets :class:`dataclasses.FrozenInstanceError` (a config is checked once, never re-resolved).

Torch-free. Source: dukb (issue 40, "one declaration per protocol").
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

from dukb import InputError

#: option groups: a shared model option (:class:`dukb.neural.runconfig.RunConfig`, every protocol takes it), a run
#: option of the command (its run directory, ``--config``, ``--resume``), an option of the protocol itself
SHARED, RUN, PROTOCOL = "shared", "run", "protocol"
GROUPS = (SHARED, RUN, PROTOCOL)
#: the ``--help`` panel of each group (None: typer's default "Options" panel)
PANELS = {SHARED: "Model and run options", RUN: None, PROTOCOL: None}


def option(
    default: Any = dataclasses.MISSING,
    *,
    help: str | Callable[[], str],
    flag: str | None = None,
    group: str = PROTOCOL,
    range=None,
    choices: tuple | Callable[[], tuple] | None = None,
    identity: bool | str = True,
    extendable: bool = False,
    default_factory: Any = dataclasses.MISSING,
    parse: str | None = None,
    decls: tuple[str, ...] = (),
    cli_default: Any = dataclasses.MISSING,
    cli_type: str | None = None,
    param: str | None = None,
    panel: str | None | type = dataclasses.MISSING,
    unset: Any = dataclasses.MISSING,
    **typer_kw,
) -> Any:
    """A config dataclass field declaring a command-line option.

    Args:
        default, default_factory: the field's default (as :func:`dataclasses.field`).
        help: the option's help (a callable is called when the command is built, e.g. a catalog's method list).
        flag: its flag (default: ``--`` and the field name with dashes).
        group: :data:`SHARED`, :data:`RUN` or :data:`PROTOCOL` (its ``--help`` panel, :data:`PANELS`).
        range: its documented :class:`dukb.neural.bounds.Range` (checked by ``check()`` and at parse time).
        choices: the documented values of a text option (a callable: read when asked).
        identity: True: the field is one of the run identity's settings (:func:`identity_fields`); False: it changes
            no row (left out of the identity); a string: the identity key it is recorded under instead (e.g.
            "model" for LoRA, "rules" for the rule set's fingerprint), or "set": in the identity only when not at
            its default (an option added later, so that older identities compare equal).
        extendable: a ``--resume`` may add values to this list option (its identity key grows: methods, controls,
            ratios, requests); RUN/config.yaml then holds the union of the invocations' values.
        parse: how the command line's text becomes the field's value (a parser name of :mod:`dukb.cli.declared`:
            "items", "methods", "forms", "grids", "ints", "floats", "targets_file", "method_values", ...).
        decls: the option's declarations when not just ``flag`` (e.g. ``("--sustain/--no-sustain",)``).
        cli_default: the option's default on the command line when it is not the field's (e.g. a list's text).
        cli_type: the option's Python type on the command line when it is not derived from the field's
            ("path": Optional[Path]; "multiple": a repeatable option, Optional[list[str]]).
        param: the command's parameter name (its ``--config`` key and RUN/config.yaml's) when it is not the flag's
            (e.g. ``reg_weight`` for ``--lambda``).
        panel: a ``--help`` panel other than the group's.
        unset: for a component of a compat preset (:func:`apply_compat`; the field's default must be None): the
            value dukb uses when the option is not given and no ``--compat`` preset sets it. The checked plan
            holds the value used, so config.json and the run identity record every component.
        typer_kw: more typer.Option arguments (e.g. ``min``/``max`` of a bound kept outside bounds.py).

    Returns:
        a :func:`dataclasses.field`.
    """
    if group not in GROUPS:
        raise ValueError(f"unknown option group {group!r}")
    if unset is not dataclasses.MISSING and default is not None:
        raise ValueError("an option with an `unset` value must default to None (None: not given)")
    meta = {
        "help": help,
        "flag": flag,
        "group": group,
        "range": range,
        "choices": choices,
        "identity": identity,
        "extendable": extendable,
        "parse": parse,
        "param": param,
        "decls": tuple(decls),
        "cli_default": cli_default,
        "cli_type": cli_type,
        "panel": PANELS[group] if panel is dataclasses.MISSING else panel,
        "typer": typer_kw,
    }
    if unset is not dataclasses.MISSING:
        meta["unset"] = unset
    return dataclasses.field(default=default, default_factory=default_factory, metadata=meta)


def declared(cls_or_cfg) -> list[dataclasses.Field]:
    """The fields of a config dataclass that declare a command-line option (:func:`option`), in field order."""
    return [f for f in dataclasses.fields(cls_or_cfg) if "help" in f.metadata]


def flag_of(f: dataclasses.Field) -> str:
    """The flag of a declared field (its ``flag``, else ``--`` and its name with dashes)."""
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def help_of(f: dataclasses.Field) -> str:
    """The help of a declared field (a callable help is called now); a compat component's help ends with the value
    used when it is not given (:func:`apply_compat`)."""
    text = f.metadata["help"]
    text = text() if callable(text) else text
    if "unset" in f.metadata:
        text += f" Not given: {_shown(f.metadata['unset'])}, or the --compat preset's value."
    return text


def _shown(value) -> str:
    return "off" if value is False else "on" if value is True else str(value)


def compat_option(presets: dict[str, dict[str, Any]], what: str) -> Any:
    """The ``--compat`` field of a protocol config: a preset name of ``presets`` (the class's ``COMPAT`` table,
    preset -> {field: value}) or None (dukb's defaults).

    Args:
        presets: the protocol's presets.
        what: the help's first sentence (which paper's code each preset reproduces).
    """
    names = ", ".join(presets)
    return option(
        None,
        choices=tuple(presets),
        identity="set",
        help=f"{what} ({names}). Sets every component "
        "option not given explicitly to the paper code's value; an option given explicitly wins. The "
        "preset and every component are recorded in config.json (docs: 'dukb vs the papers' code').",
    )


def apply_compat(cfg, presets: dict[str, dict[str, Any]]) -> None:
    """Resolve a config's compat components in place (before it is checked): each declared field that is None and
    either named by the chosen preset (``cfg.compat``) or declared with an ``unset`` value (:func:`option`) gets
    the preset's value, else its ``unset`` value. A field given explicitly (not None) is kept.

    Args:
        cfg: an unfrozen config dataclass with a ``compat`` field (None: no preset).
        presets: preset name -> {field name: value} (the class's ``COMPAT``).

    Raises:
        InputError: ``cfg.compat`` is not a preset of ``presets``.
        TypeError: a preset names a field the config does not have (a programming error).
    """

    name = getattr(cfg, "compat", None)
    if name is not None and name not in presets:
        raise InputError(f"unknown --compat {name!r} (choose from {', '.join(presets) or 'none'})")
    preset = presets.get(name, {}) if name is not None else {}
    fields = {f.name: f for f in dataclasses.fields(cfg)}
    unknown = sorted(set(preset) - set(fields))
    if unknown:
        raise TypeError(f"compat preset {name!r} names unknown fields {unknown}")
    for fname, f in fields.items():
        if getattr(cfg, fname) is not None:
            continue
        if fname in preset:
            setattr(cfg, fname, preset[fname])
        elif "unset" in f.metadata:
            setattr(cfg, fname, f.metadata["unset"])


def compat_note(record: dict, cls, preset: str, paper: str) -> str:
    """The line a protocol's report prints beside its table: each component of ``cls.COMPAT[preset]`` whose value
    in the run differs from the paper code's, or that none does.

    Args:
        record: the run's config as recorded (config.json's fields of ``cls``); a component it lacks (a run written
            before the option existed) or holds as None counts as its ``unset`` value, dukb's default.
        cls: the protocol's config class (its ``COMPAT`` table and fields).
        preset: the preset naming the paper code's values (e.g. "rwku").
        paper: the paper's name in the line (e.g. "RWKU").

    Returns:
        ``"Every component as RWKU's code (--compat rwku)."`` or ``"Differs from RWKU's code (--compat rwku matches
        it): --rouge rouge-score (RWKU's code: rouge); ..."``.

    Raises:
        KeyError: ``preset`` is not in ``cls.COMPAT``.
    """
    fields = {f.name: f for f in dataclasses.fields(cls)}
    diffs = []
    for name, paper_value in cls.COMPAT[preset].items():
        value = record.get(name)
        value = fields[name].metadata.get("unset") if value is None else value
        if value != paper_value:
            diffs.append(f"{flag_of(fields[name])} {_shown(value)} ({paper}'s code: {_shown(paper_value)})")
    if not diffs:
        return f"Every component as {paper}'s code (--compat {preset})."
    return f"Differs from {paper}'s code (--compat {preset} matches it): " + "; ".join(diffs) + "."


def choices_of(f: dataclasses.Field) -> tuple | None:
    """The documented choices of a declared field (None: any value)."""
    c = f.metadata.get("choices")
    return tuple(c() if callable(c) else c) if c is not None else None


def default_of(f: dataclasses.Field):
    """A field's default value (its default factory called)."""
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None if f.default is dataclasses.MISSING else f.default


def group_fields(cls, group: str) -> list[dataclasses.Field]:
    """The declared fields of ``cls`` in ``group``."""
    return [f for f in declared(cls) if f.metadata["group"] == group]


def extendable_flags(cls) -> tuple[str, ...]:
    """The flags (without the dashes) of the list options of ``cls`` a ``--resume`` may add values to."""
    return tuple(flag_of(f).lstrip("-") for f in declared(cls) if f.metadata.get("extendable"))


def identity_fields(cls) -> list[str]:
    """Names of the fields of ``cls`` that are run identity settings (declared with ``identity=True``, the default
    of a field declared without :func:`option`)."""
    return [f.name for f in dataclasses.fields(cls) if f.metadata.get("identity", True) is True]


def freeze(cfg):
    """Mark a checked config frozen: setting a field afterwards raises :class:`dataclasses.FrozenInstanceError`
    (the config must derive from :class:`Frozen`). Returns ``cfg``."""
    object.__setattr__(cfg, "_frozen", True)
    return cfg


def with_values(plan, **values):
    """A checked plan with ``values`` set (fields read after the check, e.g. ``--targets-file``'s targets, read
    against the KB the check resolved), keeping everything the check resolved; frozen, like ``plan``, which is left
    as it was.

    Args:
        plan: a frozen config (``check()``'s plan); values: field name -> value.

    Returns:
        a frozen shallow copy of ``plan``.

    Raises:
        TypeError: a name that is not a field of ``plan`` (a programming error).
    """
    names = {f.name for f in dataclasses.fields(plan)}
    unknown = sorted(set(values) - names)
    if unknown:
        raise TypeError(f"{type(plan).__name__} has no fields {unknown}")
    out = copy.copy(plan)  # the resolved state (attributes the check set beside the fields) comes along
    for name, value in values.items():
        object.__setattr__(out, name, value)
    return freeze(out)


class Frozen:
    """Mixin of a config dataclass that :func:`freeze` can freeze once checked (``check()`` returns it frozen)."""

    def __setattr__(self, name, value):
        if self.__dict__.get("_frozen"):
            raise dataclasses.FrozenInstanceError(
                f"cannot assign to field {name!r}: the config is checked (frozen); "
                "make a new one with dataclasses.replace"
            )
        object.__setattr__(self, name, value)

    @property
    def checked(self) -> bool:
        """Whether ``check()`` has resolved and frozen this config."""
        return bool(self.__dict__.get("_frozen"))


__all__ = [
    "GROUPS",
    "Frozen",
    "PANELS",
    "PROTOCOL",
    "RUN",
    "SHARED",
    "apply_compat",
    "choices_of",
    "compat_note",
    "compat_option",
    "declared",
    "default_of",
    "extendable_flags",
    "flag_of",
    "freeze",
    "group_fields",
    "help_of",
    "identity_fields",
    "option",
    "with_values",
]
