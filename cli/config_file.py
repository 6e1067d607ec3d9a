"""`--config FILE`: run any protocol command from a YAML or TOML file, and save the resolved options of each run.

The file maps option names to values, as on the command line without the leading dashes (``n-targets`` and
``n_targets`` both work; a list stands for a comma-separated value or a repeated option)::

    # evaluate.yaml
    kb: ../shared/edu-relat
    targets-file: ../shared/edu-relat/targets.txt
    methods: [ga, npo, du_cl]
    grid: ["ga=1,2,4"]
    output: runs/edu

A flag given on the command line overrides the file (the file only replaces the defaults: click's ``default_map``).
Each protocol command writes the options it ran with to ``RUN/config.yaml`` when it finishes, so ``dukb evaluate --config
RUN/config.yaml`` (with ``--resume`` to continue) repeats the run.

Errors name the file and line: ``dukb: error: FILE:LINE: problem`` (exit 2).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

import typer

from dukb import InputError

#: The name of the resolved-options file a protocol command writes into its run directory.
RESOLVED_NAME = "config.yaml"
#: Options never written to the resolved file: the file itself and whether to resume (a repeat decides that).
_NOT_SAVED = ("config", "resume")


def _key_lines(text: str, path: Path) -> dict[str, int]:
    """The 1-based line of each top-level key of a YAML or TOML text (best effort: unknown keys are named there)."""
    lines: dict[str, int] = {}
    if path.suffix.lower() == ".toml":
        for i, line in enumerate(text.splitlines(), 1):
            m = re.match(r"\s*([A-Za-z0-9_-]+)\s*=", line)
            if m:
                lines.setdefault(m.group(1), i)
        return lines
    import yaml

    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, RecursionError):
        return lines
    if isinstance(node, yaml.MappingNode):
        for k, _v in node.value:
            lines.setdefault(str(k.value), k.start_mark.line + 1)
    return lines


def read_config_file(path) -> tuple[dict, dict[str, int]]:
    """Read a YAML (``.yaml``/``.yml``) or TOML (``.toml``) options file, bounded like every input.

    Args:
        path: the file (str or Path).

    Returns:
        (options: dict of key -> value, lines: key -> 1-based line).

    Raises:
        InputError: not a regular file, too large, not UTF-8, not valid YAML/TOML (with its line), nested too
            deeply for the parser (a RecursionError), another suffix, or not a mapping at the top level.
    """
    from dukb.kb.csvfile import read_text

    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in (".yaml", ".yml", ".toml"):
        raise InputError("a --config file must be .yaml, .yml or .toml", p)
    text = read_text(p, "config file")
    if suffix == ".toml":
        import tomllib

        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            m = re.search(r"line (\d+)", str(e))
            raise InputError(f"not valid TOML ({e})", p, int(m.group(1)) if m else None) from None
        except RecursionError:  # tomllib parses nested arrays and inline tables recursively
            raise InputError("not valid TOML (a value is nested too deeply)", p) from None
    else:
        import yaml

        try:  # every scalar as written (no YAML 1.1 octal, 1_0, yes/no): the options' own strict parsers read it
            data = yaml.load(text, Loader=yaml.BaseLoader)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            raise InputError(f"not valid YAML ({getattr(e, 'problem', None) or type(e).__name__})", p,
                             mark.line + 1 if mark is not None else None) from None
        except RecursionError:  # PyYAML composes nested sequences and mappings recursively
            raise InputError("not valid YAML (a value is nested too deeply)", p) from None
        if data is None:
            data = {}
    if not isinstance(data, dict):
        raise InputError("a --config file must map option names to values at the top level", p, 1)
    return data, _key_lines(text, p)


def _text(v) -> str:
    """A config value as the command line would give it: TOML's typed scalars back to their text (``true``/``false``
    for booleans), so every option's own strict parser (e.g. ``-?[0-9]+`` for integers) reads it."""
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _check_int(param, value, key, path, line) -> None:
    """An integer option's value read as the command line reads it (``-?[0-9]+``), refused at its FILE:LINE."""
    from dukb.cli.main import _is_integer_option
    from dukb.kb.csvfile import int_problem

    if not _is_integer_option(param):
        return
    for item in value if isinstance(value, list) else [value]:
        problem = int_problem(f"option {key!r}", _text(item))
        if problem:
            raise InputError(problem, path, line)


def default_map(command, path) -> dict:
    """The click ``default_map`` a config file gives ``command``: each key resolved to the command's parameter.

    Args:
        command: the click command (its ``params``); path: the config file.

    Returns:
        dict parameter name -> value as text (lists joined with "," for single-valued options; scalars wrapped in a
        list for repeatable options), so the option's own parser and checks apply exactly as to a flag.

    Raises:
        InputError: an unknown option, an empty value or a value of the wrong shape (a mapping, nested lists), at
            its line; the file errors of :func:`read_config_file`.
    """
    data, lines = read_config_file(path)
    by_name = {}
    for p in command.params:
        if p.name in _NOT_SAVED[:1]:
            continue
        by_name[p.name] = p
        for opt in (*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ())):
            by_name[opt.lstrip("-").replace("-", "_")] = p
    out = {}
    for key, value in data.items():
        p = by_name.get(str(key).replace("-", "_"))
        if p is None:
            raise InputError(f"unknown option {key!r} for `dukb {command.name}` (see `dukb {command.name} --help`)",
                             path, lines.get(str(key)))
        if isinstance(value, dict) or (isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value)):
            raise InputError(f"option {key!r} takes a value or a list of values, not a table", path,
                             lines.get(str(key)))
        if value is None or value == "":
            raise InputError(f"option {key!r} has no value", path, lines.get(str(key)))
        _check_int(p, value, key, path, lines.get(str(key)))
        if getattr(p, "multiple", False):
            value = [_text(v) for v in (value if isinstance(value, list) else [value])]
        elif isinstance(value, list):
            value = ",".join(_text(v) for v in value)
        else:
            value = _text(value)
        out[p.name] = value
    return out


def load_config_callback(ctx: typer.Context, param: typer.CallbackParam, value: Optional[Path]):
    """Eager ``--config`` callback: the file's options become the command's defaults (command-line flags win)."""
    if value is None or ctx.resilient_parsing:
        return value
    ctx.default_map = {**(ctx.default_map or {}), **default_map(ctx.command, value)}
    return value


#: The ``--config`` option every protocol command takes.
CONFIG_OPTION = typer.Option(None, "--config", is_eager=True, callback=load_config_callback,
                             help="YAML or TOML file of this command's options (names without the leading dashes; a "
                                  "list for a comma-separated or repeated option); flags on the command line win. "
                                  "A finished run saves its options to RUN/config.yaml, so --config RUN/config.yaml "
                                  "repeats it.")


def _current_context():
    """The running command's click context (typer >= 0.29 vendors click as ``typer._click``), or None."""
    try:
        from typer._click.globals import get_current_context
    except ImportError:  # pragma: no cover - older typer uses click itself
        from click import get_current_context
    return get_current_context(silent=True)


def save_resolved_config(output, exclude=()) -> Path | None:
    """Write the running command's resolved options to ``output/config.yaml`` (see the module docstring).

    Args:
        output: the run directory (created if needed).
        exclude: more parameter names to leave out.

    Returns:
        The written path, or None outside a click command.
    """
    import yaml

    ctx = _current_context()
    if ctx is None:
        return None
    from dukb.neural.runs import output_file, write_bytes_atomic

    values = {}
    for name, v in ctx.params.items():
        if name in _NOT_SAVED or name in exclude or v is None:
            continue
        if isinstance(v, Path):
            v = str(v)
        elif isinstance(v, (list, tuple)):
            v = [str(x) if isinstance(x, Path) else x for x in v]
        values[name.replace("_", "-")] = v
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    text = (f"# the options of this `dukb {ctx.command.name}` run; repeat it with "
            f"`dukb {ctx.command.name} --config {out / RESOLVED_NAME}` (add --resume to continue it)\n"
            + yaml.safe_dump(values, sort_keys=False, allow_unicode=True))
    write_bytes_atomic(output_file(out / RESOLVED_NAME), text.encode("utf-8"))
    return out / RESOLVED_NAME


__all__ = ["CONFIG_OPTION", "RESOLVED_NAME", "default_map", "load_config_callback", "read_config_file", "save_resolved_config"]
