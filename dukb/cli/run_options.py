"""The options' building blocks shared by every command: typer Options of declared config fields
(:func:`option_info`, :func:`shared_option`), ranged options (:func:`ranged`), the parse-time checks of a device and
a dtype, and the parsers of list-valued options (methods, probe forms, grids, comma-separated numbers).

Every protocol command is generated from its config dataclass by :mod:`dukb.cli.declared`; the shared options are
the fields of :class:`dukb.neural.runconfig.RunConfig` (one declaration each, :func:`dukb.neural.declare.option`),
so a flag, its help and its config field cannot drift apart.
"""

from __future__ import annotations

import dataclasses

import typer

from dukb import InputError
from dukb.cli.symbolic import option_int
from dukb.neural import bounds as B
from dukb.neural.bounds import Range, check_device, check_dtype
from dukb.neural.declare import PANELS, SHARED, default_of, flag_of, group_fields, help_of
from dukb.neural.runconfig import HELDOUT_RULE_HELP, RunConfig, heldout_forms_help

#: The help panel the shared options are listed under in `--help`.
PANEL = PANELS[SHARED]


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


def device_callback(ctx: typer.Context, param: typer.CallbackParam, value):
    """Check a --device value against what torch reports (:func:`dukb.neural.bounds.check_device`)."""
    if ctx.resilient_parsing or value is None:
        return value
    return check_device(value)


def dtype_callback(ctx: typer.Context, param: typer.CallbackParam, value):
    """Check a --dtype value (:func:`dukb.neural.bounds.check_dtype`)."""
    if ctx.resilient_parsing or value is None:
        return value
    return check_dtype(value)


def dtype_option(help: str):
    """The typer Option of a --dtype option (default auto), checked at parse time."""
    return typer.Option("auto", "--dtype", help=help, callback=dtype_callback)


def device_option(help: str):
    """The typer Option of a --device option (default auto), checked at parse time against torch
    (:func:`dukb.neural.bounds.check_device`)."""
    return typer.Option("auto", "--device", help=help, callback=device_callback)


def cli_default(f: dataclasses.Field):
    """A declared field's default on the command line: the metadata's ``cli_default``, else the field's, a list
    as its comma-separated text (an empty list or a mapping: None)."""
    d = f.metadata.get("cli_default", dataclasses.MISSING)
    if d is not dataclasses.MISSING:
        return d
    d = default_of(f)
    if isinstance(d, dict):
        return None
    if isinstance(d, (list, tuple)):
        return ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in d) or None
    return d


def option_info(f: dataclasses.Field, panel: bool = True):
    """The typer Option of a declared config field (:func:`dukb.neural.declare.option`): its flag(s), default
    (:func:`cli_default`), help, ``--help`` panel (with ``panel``), range (:func:`ranged`) and the parse-time
    check of a device or dtype."""
    meta = f.metadata
    decls = meta.get("decls") or (flag_of(f),)
    kw = dict(meta.get("typer") or {})
    if panel and meta.get("panel"):
        kw["rich_help_panel"] = meta["panel"]
    if meta.get("range") is not None:
        return ranged(meta["range"], cli_default(f), *decls, help=help_of(f), **kw)
    callback = {"device": device_callback, "dtype": dtype_callback}.get(meta.get("parse"))
    if callback is not None:
        kw["callback"] = callback
    return typer.Option(cli_default(f), *decls, help=help_of(f), **kw)


def shared_option(name: str):
    """The typer Option of one shared option (a :class:`dukb.neural.runconfig.RunConfig` field) for a command
    outside the protocols (e.g. `dukb finetune`): the same flag, default and help, in the default panel.

    Raises:
        KeyError: ``name`` is not a shared option.
    """
    by_name = {f.name: f for f in group_fields(RunConfig, SHARED)}
    return option_info(by_name[name], panel=False)


def model_kb_options(opts: dict) -> dict:
    """The shared options with ``kb`` checked against the KB a ``finetuned`` model was finetuned on, or set to it
    when not given (:func:`dukb.neural.modelrecord.model_kb`), so that a command reads its targets from the model's KB.

    Args:
        opts: the shared options' values (:func:`dukb.neural.runconfig.run_kwargs`).

    Returns:
        ``opts`` (the same dict), ``kb`` resolved when ``finetuned`` is set.

    Raises:
        InputError: a model finetuned on another KB (without ``allow_kb_mismatch``) or whose KB is gone.
    """
    if opts.get("finetuned"):
        from dukb.neural.modelrecord import model_kb

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
HELDOUT_RULE_OPTION = typer.Option("pairs", "--heldout-rule", help=HELDOUT_RULE_HELP)


def heldout_forms_option(scored: str, seen: str):
    """The ``--heldout-forms`` option of a command that scores rows on held-out forms.

    Args:
        scored: what the forms score, e.g. "every row is also scored on (recall_heldout)"; seen: the forms they
            must avoid, e.g. "the forms a method trains on or queries (qa for every built-in method)".

    Returns:
        a typer Option (str or None; None: every form that asks for a fact except the seen ones).
    """
    return typer.Option(None, "--heldout-forms", help=heldout_forms_help(scored, seen))


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
            raise InputError(f"{option}: unknown name {base!r}; did you mean {base.lower()!r}? (names are lower-case)")
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


def parse_grids(values: list[str] | None) -> dict[str, list]:
    """Parse repeated ``--grid METHOD=v1,v2`` options.

    Raises:
        InputError: malformed option (spaces around ``=``, an empty value ``1,,2``), an unknown or wrongly-cased
            method (the right name suggested, :func:`dukb.cli.run_options.method_items`), a method given twice, a
            value of an integer grid (steps) that is not ``-?[0-9]+`` in ASCII (:func:`dukb.cli.symbolic.option_int`),
            or a value outside its range (:data:`dukb.neural.bounds.GRID_STEPS`,
            :data:`~dukb.neural.bounds.GRID_VALUE`).
    """
    from dukb.neural.methods import parse_grid, resolve

    out: dict[str, list] = {}
    for v in values or []:
        if "=" not in v:
            raise InputError(f"--grid {v!r} is not METHOD=v1,v2,...")
        name, vals = v.rsplit("=", 1)  # the last "=": a label may carry options (``ga:lr=5e-4=2,4``)
        if name != name.strip() or vals != vals.strip() or not name:
            raise InputError(f"--grid {v!r} is not METHOD=v1,v2,... (no spaces around '=')")
        if any(not part.strip() for part in vals.split(",")):
            raise InputError(f"--grid {v!r} has an empty value; separate the values by single commas")
        method_items(name, "--grid")
        label, m, _scope, _g = resolve(name)
        integer = m.param == "steps"
        if integer:  # parse_grid reads with int(), which also takes 1_0, +1 and full-width digits
            for part in vals.split(","):
                if part.strip():
                    option_int(part, f"--grid {name.strip()} value")
        exact = "@" in name or ":" in name or name.strip().lower() == label
        key = label if exact else m.name
        if key in out:
            raise InputError(f"--grid {key} is given twice")
        out[key] = parse_grid(vals, integer=integer)
        rng = B.GRID_STEPS if integer else B.GRID_VALUE
        for x in out[key]:
            rng.check(f"--grid {name} value", x)
    return out


def int_items(text: str, name: str) -> list[int]:
    """Comma-separated integers, each ``-?[0-9]+`` in ASCII (:func:`dukb.cli.symbolic.option_int`), from 1 to
    :data:`dukb.neural.bounds.N_TARGETS`'s bound (they count targets).

    Raises:
        InputError: ``<name> must be comma-separated integers, got ...`` (an empty item included); a value
            outside the range.
    """
    try:
        if text.strip() and any(not x.strip() for x in text.split(",")):
            raise InputError(text)
        values = [option_int(x, name) for x in text.split(",") if x.strip()]
    except InputError:
        raise InputError(
            f"{name} must be comma-separated integers (the digits 0-9 and a leading '-', no empty item), got {text!r}"
        ) from None
    for v in values:
        B.N_TARGETS.check(name, v)
    return values


def float_items(text: str, name: str) -> list[float]:
    """Comma-separated decimal numbers (:func:`dukb.neural.bounds.decimal_problem`: no ``_``, ``nan``, ``inf``),
    each a share in (0, 1) (:data:`dukb.neural.bounds.FRACTION_OPEN`).

    Raises:
        InputError: an empty item, a value that is not such a number or outside (0, 1).
    """
    out = []
    for x in split_items(text, name):
        if B.decimal_problem("value", x):
            raise InputError(f"{name} must be comma-separated numbers, got {text!r}")
        out.append(float(x))
        B.FRACTION_OPEN.check(name, out[-1])
    return out


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
    return Table(
        "Option ranges",
        ("option", "range", "commands", "note"),
        tuple((flag, text, ", ".join(cmds), why) for (flag, text, why), cmds in sorted(rows.items())),
        "Every numeric option is read strictly (ASCII digits, no `_`, finite) and checked against its "
        "range when the command line is parsed, before any work: a value outside exits 2 with one line.",
    )
