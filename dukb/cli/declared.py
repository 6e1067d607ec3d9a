"""Protocol commands generated from their config dataclass (:mod:`dukb.neural.declare`): one declaration per option.

:func:`declared_command` turns a protocol's config class into a typer command: one typer Option per declared field
(flag, default, help, ``--help`` panel and range from the field's metadata), the run options every protocol command
takes (``--config``, ``-o/--output``, ``--resume``, from the class's ``CLI`` table), and a body that parses each
option's text into the field's value (:data:`PARSERS`), builds the config and checks it once
(:meth:`dukb.neural.runconfig.RunConfig.check`: the frozen, resolved plan the protocol runs). typer reads the
signature built here (:class:`inspect.Signature` with typed parameters whose defaults are typer Options), so the
``--config`` file keys, RUN/config.yaml's keys and ``--help`` all follow the declaration.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from pathlib import Path
from typing import Optional

import typer

from dukb.cli.config_file import CONFIG_OPTION, save_resolved_config
from dukb.cli.render import keep_rows_note, log_line, on_interrupt, output_path
from dukb.cli.run_options import (
    cli_default,
    float_items,
    int_items,
    method_items,
    option_info,
    parse_forms,
    parse_grids,
    split_items,
)
from dukb.cli.symbolic import read_targets_in_kb
from dukb.neural.declare import SHARED, choices_of, declared, default_of, flag_of, group_fields, with_values
from dukb.neural.runconfig import RunConfig, split_lora_targets


def param_name(f: dataclasses.Field) -> str:
    """The command's parameter name of a declared field (its ``--config`` key and RUN/config.yaml's): the
    metadata's ``param``, else its flag without the dashes."""
    return f.metadata.get("param") or flag_of(f).lstrip("-").replace("-", "_")


def annotation(cls, f: dataclasses.Field):
    """A declared field's type on the command line: a list or a mapping is text (a mapping a repeatable option),
    Optional where the default is None; the metadata's ``cli_type`` ("path", "multiple") when given."""
    kind = f.metadata.get("cli_type")
    if kind == "path":
        return Optional[Path]
    if kind == "multiple":
        return Optional[list[str]]
    hint = typing.get_type_hints(cls)[f.name]
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    base = args[0] if args and typing.get_origin(hint) is not list else hint
    if typing.get_origin(base) in (list, dict):
        base = str
    return Optional[base] if cli_default(f) is None else base


#: how an option's text becomes its field's value, by the metadata's ``parse`` name: (text, flag, field, parsed) ->
#: value, where ``parsed`` holds the command's raw parameters and the values parsed so far
PARSERS = {
    "methods": lambda v, flag, f, parsed: method_items(v, flag),
    "items": lambda v, flag, f, parsed: split_items(v, flag, known=choices_of(f)),
    "forms": lambda v, flag, f, parsed: parse_forms(v, flag),
    "grids": lambda v, flag, f, parsed: parse_grids(v),
    "ints": lambda v, flag, f, parsed: int_items(v, flag),
    "floats": lambda v, flag, f, parsed: float_items(v, flag),
    "lora_targets": lambda v, flag, f, parsed: split_lora_targets(v),
}
#: options read once the config is checked, by the metadata's ``parse`` name: (value, plan) -> field value;
#: ``--targets-file`` is read against the run's KB (the model's, with ``--finetuned``)
AFTER_CHECK = {"targets_file": lambda path, plan: read_targets_in_kb(path, plan.kb)}


def declared_fields(cls) -> list[dataclasses.Field]:
    """The declared fields of ``cls`` in the command's order: the class's ``CLI["order"]`` (field names), then
    the others (the shared options) in field order.

    Raises:
        TypeError: ``order`` names a field that is not declared (a programming error).
    """
    by_name = {f.name: f for f in declared(cls)}
    order = [n for n in cls.CLI.get("order", ()) if n not in ("output", "resume", "config")]
    unknown = [n for n in order if n not in by_name]
    if unknown:
        raise TypeError(f"{cls.__name__}.CLI['order'] names undeclared fields {unknown}")
    return [by_name[n] for n in order] + [f for n, f in by_name.items() if n not in order]


def run_parameters(cls) -> dict[str, inspect.Parameter]:
    """The run options of a protocol command (``config``, ``output``, ``resume``) from the class's ``CLI`` table:
    ``output`` (the default run directory, or required when None), ``resume`` (its help; absent when None)."""
    cli = cls.CLI
    kw = inspect.Parameter.KEYWORD_ONLY
    out = {"config": inspect.Parameter("config", kw, default=CONFIG_OPTION, annotation=Optional[Path])}
    default = Path(cli["output"]) if cli.get("output") else ...
    out["output"] = inspect.Parameter(
        "output",
        kw,
        annotation=Path,
        default=typer.Option(
            default, "-o", "--output", parser=output_path, metavar="PATH", help=cli.get("output_help", "Run directory.")
        ),
    )
    if cli.get("resume"):
        out["resume"] = inspect.Parameter(
            "resume", kw, annotation=bool, default=typer.Option(False, "--resume", help=cli["resume"])
        )
    return out


def signature(cls) -> inspect.Signature:
    """The command's signature: ``CLI["order"]`` (fields and run options), then the other declared fields (the
    shared options), then the run options not placed."""
    kw = inspect.Parameter.KEYWORD_ONLY
    run = run_parameters(cls)
    fields_ = {
        f.name: inspect.Parameter(param_name(f), kw, default=option_info(f), annotation=annotation(cls, f))
        for f in declared_fields(cls)
    }
    params = [run.pop("config")]
    for name in cls.CLI.get("order", ()):
        params.append(run.pop(name) if name in run else fields_.pop(name))
    return inspect.Signature(params + list(fields_.values()) + list(run.values()))


def build_config(cls, values: dict, parsers: dict | None = None):
    """The checked config of a command's parameter values: each declared field parsed (:data:`PARSERS` and
    ``parsers``), :meth:`dukb.neural.runconfig.RunConfig.check` once (with ``--finetuned``, ``kb`` becomes the KB
    the model was finetuned on), then ``--targets-file`` read against that KB (its fact ids named at FILE:LINE
    before a model is loaded).

    Returns:
        the frozen, resolved plan.

    Raises:
        InputError: an option's value refused by its parser or by the config's check; an unknown target.
    """
    table = {**PARSERS, **(parsers or {})}
    out, after = {}, {}
    for f in declared_fields(cls):
        value, kind = values[param_name(f)], f.metadata.get("parse")
        if kind in AFTER_CHECK:
            after[f.name] = (AFTER_CHECK[kind], value)
            continue
        parse = table.get(kind)
        value = parse(value, flag_of(f), f, {**values, **out}) if parse else value
        if value is not None or default_of(f) is None:  # an unset option keeps the field's default
            out[f.name] = value
    plan = cls(**out).check()
    done = {name: read(value, plan) for name, (read, value) in after.items() if value is not None}
    return with_values(plan, **done) if done else plan


def declared_command(cls, parsers: dict | None = None):
    """Decorate a protocol command's body ``body(cfg, output, resume)`` into the typer command generated from
    ``cls`` (:func:`signature`): its parameters' values become the checked config (:func:`build_config`).

    Args:
        cls: the protocol's config class (a :class:`dukb.neural.runconfig.RunConfig` with a ``CLI`` table).
        parsers: more parsers by name (:data:`PARSERS`), for the protocol's own options.
    """

    def decorate(body):
        sig = signature(cls)
        takes_resume = "resume" in inspect.signature(body).parameters

        def command(**kwargs):
            cfg = build_config(cls, kwargs, parsers)
            extra = {"resume": kwargs["resume"]} if takes_resume else {}
            return body(cfg, kwargs["output"], **extra)

        command.__name__, command.__qualname__ = body.__name__, body.__qualname__
        command.__module__, command.__doc__ = body.__module__, body.__doc__
        command.__signature__ = sig
        command.__annotations__ = {p.name: p.annotation for p in sig.parameters.values()}
        command.config_class = cls
        return command

    return decorate


def with_shared_options(command):
    """Give a hand-written command every shared option (:class:`dukb.neural.runconfig.RunConfig`'s fields of the
    group "shared") it does not state in its own words: each generated from its field's declaration
    (:func:`dukb.cli.run_options.option_info`: flag, default, help, range; in the default ``--help`` panel) and added
    after the command's own parameters, so that its ``--help`` lists its own options as they were. The command takes
    them as keyword arguments (its ``**shared``).

    Args:
        command: a typer command callback whose last parameter is ``**shared``; a parameter named as a shared field
            (e.g. ``model``) is the command's own statement of that option and is kept as it is.

    Returns:
        ``command`` with the generated ``__signature__``.

    Raises:
        TypeError: ``command`` takes no ``**shared`` (a programming error).
    """
    sig = inspect.signature(command, eval_str=True)
    params = [p for p in sig.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    if len(params) == len(sig.parameters):
        raise TypeError(f"{command.__name__} must take **shared to get the shared options")
    own = {p.name for p in params}
    kw = inspect.Parameter.KEYWORD_ONLY
    params += [
        inspect.Parameter(param_name(f), kw, default=option_info(f, panel=False), annotation=annotation(RunConfig, f))
        for f in group_fields(RunConfig, SHARED)
        if param_name(f) not in own
    ]
    command.__signature__ = sig.replace(parameters=params)
    return command


def protocol_command(info):
    """The command of a registered protocol that has no command module of its own: its options are generated from
    its config's declaration (:func:`declared_command`); it runs the protocol's entry (``info.run``, looked up when
    the command runs, so that a patched entry is the one called), writes RUN_DIR/config.yaml and prints the report's
    path. Its help is ``info.help`` (else ``info.summary``).

    Args:
        info: the protocol's :class:`dukb.neural.protocols.ProtocolInfo` (its config module must not import torch:
            ``dukb --help`` builds every command).

    Returns:
        The typer command callback (register it with ``app.command(info.name)``).
    """

    def body(cfg, output: Path, resume: bool) -> None:
        on_interrupt(keep_rows_note(output))
        info.load("run")(output, cfg, resume=resume, progress=True, log=log_line)
        save_resolved_config(output)
        typer.echo(f"report: {output / 'report.md'}")

    body.__name__ = body.__qualname__ = info.name
    body.__doc__ = info.help or info.summary
    return declared_command(info.load("config"))(body)


__all__ = [
    "AFTER_CHECK",
    "PARSERS",
    "annotation",
    "build_config",
    "declared_command",
    "declared_fields",
    "param_name",
    "protocol_command",
    "run_parameters",
    "signature",
    "with_shared_options",
]
