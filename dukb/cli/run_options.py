"""The shared run options of every protocol command (`dukb evaluate`, `muse`, `rwku`, `control`): one declaration,
the same names and help everywhere.

:func:`run_options` adds every option of :data:`dukb.neural.runconfig.SHARED_OPTIONS` to a command (under the help
panel "Model and run options") and hands the command their values as one dict, ready for the protocol's config
(:func:`dukb.neural.runconfig.run_kwargs`). The protocol configs inherit the fields from
:class:`dukb.neural.runconfig.RunConfig`, so a flag, its help and its config field cannot drift apart.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from typing import Optional

import typer

from dukb import InputError
from dukb.neural.bounds import Range, check_device, check_dtype
from dukb.neural.runconfig import SHARED_OPTIONS, RunConfig, run_kwargs

#: The help panel the shared options are listed under in `--help`.
PANEL = "Model and run options"
#: The parameter a decorated command receives the shared options' values in.
RUN_PARAM = "run_opts"


def _annotation(f: dataclasses.Field):
    """The command-line type of a :class:`RunConfig` field: a comma-separated string for a list, Optional[...] for
    a field whose default is None."""
    hint = typing.get_type_hints(RunConfig)[f.name]
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    base = args[0] if args else hint
    if typing.get_origin(base) is list:
        base = str
    return Optional[base] if f.default is None else base


def _range_callback(rng: Range):
    """A typer callback refusing a value outside ``rng`` (one line ``dukb: error: --flag must be ...``, exit 2):
    the check of the half-open ranges typer's ``min``/``max`` cannot express, and of values from a --config file."""
    def callback(ctx: typer.Context, param: typer.CallbackParam, value):
        if ctx.resilient_parsing or value is None:
            return value
        flag = max(param.opts, key=len) if param.opts else f"--{param.name}"
        rng.check(flag, value)
        return value

    return callback


def ranged(rng: Range, default, *decls: str, help: str, **kw):
    """The typer Option of a numeric option bounded by ``rng`` (:mod:`dukb.neural.bounds`, the option's one
    declaration of its range): a closed range is typer's ``min``/``max`` (``--help`` shows ``[1<=x<=4096]``), a
    half-open one is stated in the help (``Range: in (0, 10].``); both are checked at parse time, before any work.

    Args:
        rng: the range; default: the option's default; decls: its flags; help: its help; kw: more typer.Option
            arguments.
    """
    if rng.closed:
        kw.update(min=rng.lo, max=rng.hi)
    else:
        help = f"{help} Range: {rng.text().removeprefix('in ')}."
    info = typer.Option(default, *decls, help=help, callback=_range_callback(rng), **kw)
    info.dukb_range = rng  # read back by option_range (the docs' table of ranges and the tests)
    return info


def option_range(param) -> Range | None:
    """The :class:`dukb.neural.bounds.Range` a click parameter of a dukb command was declared with through
    :func:`ranged` (None for any other parameter)."""
    desc = getattr(param, "type_descriptor", None)
    return getattr(getattr(desc, "parameter_info", None), "dukb_range", None)


def _device_callback(ctx: typer.Context, param: typer.CallbackParam, value):
    """Check a --device value against what torch reports (:func:`dukb.neural.bounds.check_device`)."""
    if ctx.resilient_parsing or value is None:
        return value
    return check_device(value)


def _dtype_callback(ctx: typer.Context, param: typer.CallbackParam, value):
    """Check a --dtype value (:func:`dukb.neural.bounds.check_dtype`)."""
    if ctx.resilient_parsing or value is None:
        return value
    return check_dtype(value)


def dtype_option(help: str):
    """The typer Option of a --dtype option (default auto), checked at parse time."""
    return typer.Option("auto", "--dtype", help=help, callback=_dtype_callback)


def device_option(help: str):
    """The typer Option of a --device option (default auto), checked at parse time against torch
    (:func:`dukb.neural.bounds.check_device`)."""
    return typer.Option("auto", "--device", help=help, callback=_device_callback)


def _shared(f: dataclasses.Field, flag: str, text: str, **kw):
    """The typer Option of a shared option: its range from the field's metadata (:func:`dukb.neural.bounds.bounded`),
    --device checked against torch."""
    rng = f.metadata.get("range")
    if rng is not None:
        return ranged(rng, f.default, flag, help=text, **kw)
    if f.name == "device":
        return typer.Option(f.default, flag, help=text, callback=_device_callback, **kw)
    if f.name == "dtype":
        return typer.Option(f.default, flag, help=text, callback=_dtype_callback, **kw)
    return typer.Option(f.default, flag, help=text, **kw)


def shared_parameters(helps: dict | None = None) -> list[inspect.Parameter]:
    """One keyword parameter per shared option, with its typer Option (flag, default, help, panel, range) and type;
    ``helps`` maps a field name to the help a command gives it instead (what the option means in that protocol)."""
    by_name = {f.name: f for f in dataclasses.fields(RunConfig)}
    out = []
    for name, flag, text in SHARED_OPTIONS:
        f = by_name[name]
        opt = _shared(f, flag, (helps or {}).get(name) or text, rich_help_panel=PANEL)
        out.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=opt, annotation=_annotation(f)))
    return out


def shared_option(name: str):
    """The typer Option of one shared option (for commands outside the protocols, e.g. `dukb finetune`): the same
    flag, default and help as in every protocol command.

    Raises:
        KeyError: ``name`` is not a shared option.
    """
    by_name = {f.name: f for f in dataclasses.fields(RunConfig)}
    flag, text = next((fl, t) for n, fl, t in SHARED_OPTIONS if n == name) if name in by_name else (None, None)
    if flag is None:
        raise KeyError(name)
    return _shared(by_name[name], flag, text)


def run_options(func=None, **helps: str):
    """Decorate a protocol command: add the shared options to its signature and call it with
    ``run_opts=<dict of RunConfig fields>`` (comma-separated ``--lora-targets`` split, ``--layers`` checked).

    The command declares ``run_opts: dict`` and none of the shared options itself. With ``--finetuned``, its
    ``kb`` is already the model's KB or checked against it (:func:`model_kb_options`). ``@run_options(finetuned="...")``
    gives an option the help that says what it means in this protocol (same name, same field).

    Raises:
        TypeError: the command declares a shared option itself, lacks ``run_opts``, or ``helps`` names an option
            that is not shared (programming errors).
    """
    if func is None:
        return functools.partial(run_options, **helps)
    unknown = set(helps) - set(RunConfig.shared_fields())
    if unknown:
        raise TypeError(f"run_options: no shared option {sorted(unknown)}")
    sig = inspect.signature(func)
    own = [p for p in sig.parameters.values() if p.name != RUN_PARAM]
    if RUN_PARAM not in sig.parameters:
        raise TypeError(f"{func.__name__} must take {RUN_PARAM}")
    shared = shared_parameters(helps)
    clash = {p.name for p in own} & {p.name for p in shared}
    if clash:
        raise TypeError(f"{func.__name__} declares shared options itself: {sorted(clash)}")
    names = [p.name for p in shared]

    @functools.wraps(func)
    def wrapper(**kwargs):
        values = {k: kwargs.pop(k) for k in names if k in kwargs}
        return func(**kwargs, **{RUN_PARAM: model_kb_options(run_kwargs(**values))})

    # keyword-only parameters after the command's own (which all have defaults, as typer options do)
    own = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own]
    wrapper.__signature__ = sig.replace(parameters=own + shared)
    hints = typing.get_type_hints(func)
    hints.pop(RUN_PARAM, None)
    hints.pop("return", None)
    wrapper.__annotations__ = {**hints, **{p.name: p.annotation for p in shared}}
    del wrapper.__wrapped__  # typer must read this signature, not the command's own
    return wrapper


def model_kb_options(opts: dict) -> dict:
    """The shared options with ``kb`` checked against the KB a ``finetuned`` model was finetuned on, or set to it
    when not given (:func:`dukb.neural.models.model_kb`), so that a command reads its targets from the model's KB.

    Args:
        opts: the shared options' values (:func:`dukb.neural.runconfig.run_kwargs`).

    Returns:
        ``opts`` (the same dict), ``kb`` resolved when ``finetuned`` is set.

    Raises:
        InputError: a model finetuned on another KB (without ``allow_kb_mismatch``) or whose KB is gone.
    """
    if opts.get("finetuned"):
        from dukb.neural.models import model_kb

        opts["kb"] = model_kb(opts["finetuned"], opts.get("kb"), allow_mismatch=bool(opts.get("allow_kb_mismatch")))
    return opts


def parse_forms(text: str | None, option: str) -> list[str] | None:
    """Resolve a comma-separated list of probe kinds or groups of ``dukb probes --kinds`` (None stays None).

    Args:
        text: the option's value (str or None); option: its name for messages, e.g. "--heldout-forms".

    Returns:
        list of probe kinds (:data:`dukb.kb.probes.KINDS` names), or None.

    Raises:
        InputError: an unknown kind, an empty list or an empty item (named with the option).
    """
    from dukb.kb.probes import parse_kinds

    if text is None:
        return None
    names = split_items(text, option)
    if not names:
        raise InputError(f"{option} needs at least one probe form")
    try:
        return list(parse_kinds(names))
    except InputError as e:
        raise InputError(f"{option}: {e}") from None


#: ``--heldout-rule`` of every command that scores rows on held-out forms (evaluate, unlearn, control)
HELDOUT_RULE_OPTION = typer.Option(
    "pairs", "--heldout-rule", help="What still counts as known on the held-out forms: 'pairs' (after unlearning, "
    "probe the form-fact pairs that elicited their fact before; a fact is known while one still does; cheap) or "
    "'any' (probe every held-out form; known while any does, also one that did not before; the stricter worst "
    "case). Facts no held-out form elicited before are left unscored under both.")


def heldout_forms_option(scored: str, seen: str):
    """The ``--heldout-forms`` option of a command that scores rows on held-out forms.

    Args:
        scored: what the forms score, e.g. "every row is also scored on (recall_heldout)"; seen: the forms they
            must avoid, e.g. "the forms a method trains on or queries (qa for every built-in method)".

    Returns:
        a typer Option (str or None; None: every form that asks for a fact except the seen ones).
    """
    return typer.Option(None, "--heldout-forms", help=f"Probe forms {scored}: comma-separated kinds or groups of "
                        f"`dukb probes --kinds`, disjoint from {seen}. Default: every form that asks for a fact "
                        "except those.")


def split_items(text: str | None, option: str, known=None) -> list[str]:
    """The items of a comma-separated option (``--methods ga,npo``), each stripped of the spaces around it.

    Args:
        text: the option's value (None or "": no items); option: its flag, for messages; known: the names an item's
            base (the text before ``@`` or ``:``, e.g. ``npo`` of ``npo@minimum:beta=0.1``) may take, or None
            (any).

    Returns:
        list of str.

    Raises:
        InputError: an empty item (``ga,``, ``ga,,npo``, ``,``); a base with a space inside or not lower-case
            (``GA``: the right name is suggested); a base not in ``known`` (the closest names suggested).
    """
    import difflib

    if text is None or not text.strip():
        return []
    items = [x.strip() for x in text.split(",")]
    if any(not x for x in items):
        raise InputError(f"{option} {text!r} has an empty item; separate the names by single commas")
    for item in items:
        base = item.split(":", 1)[0].split("@", 1)[0]
        if base != base.strip() or any(c.isspace() for c in base):
            raise InputError(f"{option}: {item!r} has a space inside a name")
        if base != base.lower():
            raise InputError(f"{option}: unknown name {base!r}; did you mean {base.lower()!r}? (names are "
                             "lower-case)")
        if known is not None and base not in known:
            close = difflib.get_close_matches(base, list(known), n=3, cutoff=0.6)
            hint = f"; did you mean {', '.join(close)}?" if close else f" (choose from {', '.join(known)})"
            raise InputError(f"{option}: unknown name {base!r}{hint}")
    return items


def method_items(text: str | None, option: str = "--methods") -> list[str]:
    """:func:`split_items` of a methods list: each base a registered method or preset (the light catalog's names,
    :mod:`dukb.neural.catalog`, and, for a name the catalog lacks, the live registry, where a launcher may have
    registered a method at run time), and each entry resolved (:func:`dukb.neural.methods.resolve`: its scope and
    per-method options checked, ``ga:lr=1e300`` refused) before any work.

    Raises:
        InputError: see :func:`split_items` and :func:`dukb.neural.methods.resolve`.
    """
    from dukb.neural.catalog import method_names, preset_names

    known = [*method_names(), *preset_names()]
    if text and any(item.strip().split("@")[0].split(":")[0] not in known for item in text.split(",")):
        # a method registered at run time (a launcher script, docs/tutorials/add-method.md) is in the live registry,
        # not in the light catalog built from the shipped registries
        from dukb.neural.methods import METHODS, PRESETS

        known = sorted({*known, *METHODS, *PRESETS})
    items = split_items(text, option, known=known)
    if items:
        from dukb.neural.methods import resolve

        for item in items:
            resolve(item)
    return items


def ranges_table():
    """The reference table of every bounded numeric option of every command (option, range, commands, note),
    generated from the declarations (:func:`ranged`, typer's ``min``/``max``, :data:`dukb.neural.bounds.GRID_STEPS`
    and ``GRID_VALUE``, each attack's :attr:`~dukb.neural.attacks.base.Attack.ranges`): the docs'
    reference/protocols page and `dukb methods`.

    Returns:
        a :class:`dukb.neural.tables.Table`.
    """
    import typer as _typer

    from dukb.cli.main import app
    from dukb.neural.tables import Table

    rows: dict[tuple[str, str, str], list[str]] = {}
    for name, cmd in _typer.main.get_command(app).commands.items():
        for p in cmd.params:
            if not getattr(p, "opts", None):
                continue
            rng = option_range(p)
            info = getattr(getattr(p, "type_descriptor", None), "parameter_info", None)
            if rng is not None:
                text, why = rng.text(), rng.why
            elif getattr(info, "min", None) is not None and getattr(info, "max", None) is not None:
                text, why = f"{info.min:,} to {info.max:,}", ""
            else:
                continue
            rows.setdefault((max(p.opts, key=len), text, why), []).append(name)
    from dukb.neural.attacks import ATTACKS
    from dukb.neural.bounds import GRID_STEPS, GRID_VALUE

    grids = ["evaluate", "muse", "rwku", "unlearn"]
    rows[("--grid", GRID_STEPS.text(), "values of a step grid (ga, npo, ...)")] = grids
    rows[("--grid", GRID_VALUE.text(), "values of any other grid (tv, whp alpha)")] = grids
    for a in ATTACKS.values():
        for key, rng in a.ranges.items():
            rows[(f"--attacks {a.name}:{key}", rng.text(), rng.why)] = ["evaluate", "attack"]
    return Table("Option ranges", ("option", "range", "commands", "note"),
                 tuple((flag, text, ", ".join(cmds), why) for (flag, text, why), cmds in sorted(rows.items())),
                 "Every numeric option is read strictly (ASCII digits, no `_`, finite) and checked against its "
                 "range when the command line is parsed, before any work: a value outside exits 2 with one line.")
