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

**RUN/config.yaml reproduces the run.** The invocation that creates a run (its *owner*) writes the options it runs
with to ``RUN/config.yaml`` once, when its plan stage has accepted the run (under the run lock, :func:`on_claim`,
called through :func:`dukb.neural.run.lock.confirm_run`), with every path option (``kb``, ``targets-file``,
``finetuned``, ``model``, ``rules``, ``output``) resolved to an absolute path;
a built-in name (the ``demo`` KB, ``tiny``, ``smollm2-135m``, the rule sets ``family`` and ``family_paper_compat``)
and a hub id stay names. So ``dukb evaluate --config RUN/config.yaml -o NEW`` makes a run with the same identity from
any folder, and ``dukb evaluate --config RUN/config.yaml --resume`` continues the run. A ``--resume`` that adds to the
run (targets, methods, grid values, controls, ratios, ...) rewrites it under the run lock to describe the whole run:
the comma-separated lists that may grow hold the union of the invocations' values, a grown grid its whole list, and
grown targets are written to ``RUN/targets.txt`` (the union, in the run's order), which ``targets-file`` then names.
A resume that adds nothing and a worker joining a live run leave it untouched. Every invocation's command line is
appended to ``RUN/commands.log`` (:func:`dukb.neural.run.lock.log_invocation`).

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
#: The union of a run's targets, written when a resume added targets (config.yaml's ``targets-file`` names it).
TARGETS_NAME = "targets.txt"
#: Options never written to the resolved file: the file itself and whether to resume (a repeat decides that).
_NOT_SAVED = ("config", "resume")
#: Options that may name a file or folder (besides those typed as paths): resolved to an absolute path when they
#: name one that exists (as the loaders read them: an existing path wins over a built-in name, except a rule-set name)
PATH_OPTIONS = ("kb", "rules", "model", "finetuned")
#: The options that choose a run's targets (config.yaml keeps the run's own when a resume adds other things)
TARGET_OPTIONS = ("targets-file", "n-targets")
#: The words of config.yaml's header that say the file is written once by the run's owner.
_OWNER_MARK = "written once by the invocation that created the run"


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


#: The most bytes a --config file may have (read with this bound, before parsing): an options file is a few lines.
MAX_CONFIG_BYTES = 1024 * 1024
#: The most items (lines plus commas) a --config file may hold: a list of targets belongs in --targets-file.
MAX_CONFIG_ITEMS = 10_000
#: The deepest nesting (brackets, braces, dotted key parts, YAML levels) a --config file may use: options are values
#: or flat lists, so a few levels suffice; tomllib is quadratic in the depth of dotted keys.
MAX_CONFIG_DEPTH = 8

#: TOML numbers that are not written as dukb reads numbers (:func:`dukb.kb.csvfile.strict_int`, :data:`dukb.neural.
#: bounds.DECIMAL`): hexadecimal, octal and binary integers, ``_`` separators, a leading ``+``, inf and nan
_TOML_LOOSE_NUMBER = re.compile(
    r"(?<![\w.\-+])(?:[+-]?0[xob][0-9A-Fa-f_]*|[+-]?[0-9][0-9_.eE+-]*_[0-9_.eE+-]*"
    r"|\+[0-9.]+[0-9.eE+-]*|[+-]?(?:inf|nan))(?![\w.])"
)


def _unquoted(text: str) -> list[str]:
    """Each line of a TOML or YAML text with the contents of its quoted strings blanked (``"a.b"`` -> ``"   "``) and
    comments dropped, so that brackets, dots and numbers are counted outside strings only. Multi-line strings
    (TOML's triple quotes) are blanked across lines."""
    out, quote = [], None
    for line in text.split("\n"):
        chars = []
        i = 0
        while i < len(line):
            c = line[i]
            if quote is None:
                if c == "#":
                    break
                for q in ('"""', "'''", '"', "'"):
                    if line.startswith(q, i):
                        quote = q
                        chars.append(" " * len(q))
                        i += len(q)
                        break
                else:
                    chars.append(c)
                    i += 1
                continue
            if quote in ('"', '"""') and c == "\\":
                chars.append("  ")
                i += 2
                continue
            if line.startswith(quote, i):
                chars.append(" " * len(quote))
                i += len(quote)
                quote = None
                continue
            chars.append(" ")
            i += 1
        if quote in ('"', "'"):  # a single-line string left open: the parser reports it
            quote = None
        out.append("".join(chars))
    return out


def _check_limits(text: str, p: Path, toml: bool) -> None:
    """Refuse a config text past :data:`MAX_CONFIG_ITEMS` items or :data:`MAX_CONFIG_DEPTH` levels (brackets and
    braces; TOML's dotted keys), and, in TOML, a number not written as dukb reads numbers, before any parser runs.

    Raises:
        InputError: at the first offending line.
    """
    lines = _unquoted(text)
    items = len(lines) + sum(line.count(",") for line in lines)
    if items > MAX_CONFIG_ITEMS:
        raise InputError(
            f"{items:,} items (lines and commas), more than the {MAX_CONFIG_ITEMS:,} a --config file "
            "may hold (list many targets in a --targets-file)",
            p,
        )
    depth = 0
    for n, line in enumerate(lines, 1):
        for c in line:
            if c in "[{":
                depth += 1
                if depth > MAX_CONFIG_DEPTH:
                    raise InputError(f"a value is nested too deeply (more than {MAX_CONFIG_DEPTH} levels)", p, n)
            elif c in "]}":
                depth = max(0, depth - 1)
        if toml:
            key = line.strip().strip("[]") if line.strip().startswith("[") else line.split("=", 1)[0]
            if key.count(".") >= MAX_CONFIG_DEPTH:
                raise InputError(
                    f"a key is nested too deeply ({key.count('.') + 1} dotted parts, more than {MAX_CONFIG_DEPTH})",
                    p,
                    n,
                )
            value = line.split("=", 1)[1] if "=" in line and not line.strip().startswith("[") else line
            m = _TOML_LOOSE_NUMBER.search(value)
            if m:
                raise InputError(
                    f"number {m.group(0).strip()!r} is not written as dukb reads numbers (the digits "
                    "0-9, a point, an exponent and a leading '-': no 0x/0o/0b, '_', '+', inf or nan)",
                    p,
                    n,
                )


def _yaml_problems(node, p: Path, depth: int = 0, seen=None) -> None:
    """Walk a composed YAML document: refuse a key given twice in one mapping, an alias (``*name``: options files
    need none, and aliases can multiply a small file), and nesting past :data:`MAX_CONFIG_DEPTH`.

    Raises:
        InputError: at the line of the offending key or node.
    """
    import yaml

    seen = set() if seen is None else seen
    if id(node) in seen:
        raise InputError(
            "anchors and aliases (&name, *name) are not supported in a --config file", p, node.start_mark.line + 1
        )
    seen.add(id(node))
    if depth > MAX_CONFIG_DEPTH:
        raise InputError(
            f"a value is nested too deeply (more than {MAX_CONFIG_DEPTH} levels)", p, node.start_mark.line + 1
        )
    if isinstance(node, yaml.MappingNode):
        keys: dict = {}
        for k, v in node.value:
            key = str(k.value) if isinstance(k, yaml.ScalarNode) else None
            if key is not None and key in keys:
                raise InputError(f"option {key!r} is given twice (first at line {keys[key]})", p, k.start_mark.line + 1)
            if key is not None:
                keys[key] = k.start_mark.line + 1
            _yaml_problems(k, p, depth + 1, seen)
            _yaml_problems(v, p, depth + 1, seen)
    elif isinstance(node, yaml.SequenceNode):
        for v in node.value:
            _yaml_problems(v, p, depth + 1, seen)


def read_config_file(path) -> tuple[dict, dict[str, int]]:
    """Read a YAML (``.yaml``/``.yml``) or TOML (``.toml``) options file, bounded before it is parsed.

    The file is read with a bound of :data:`MAX_CONFIG_BYTES`; its text is checked for at most
    :data:`MAX_CONFIG_ITEMS` items and :data:`MAX_CONFIG_DEPTH` levels of nesting (and, in TOML, dotted key parts
    and numbers written otherwise than dukb reads them: ``0x10``, ``1_0``, ``0o17``, ``+3``) before a parser runs.
    A YAML key given twice is refused as TOML refuses it; YAML aliases are refused.

    Args:
        path: the file (str or Path).

    Returns:
        (options: dict of key -> value, lines: key -> 1-based line).

    Raises:
        InputError: not a regular file, larger than :data:`MAX_CONFIG_BYTES`, not UTF-8, past the item or depth
            limits, a loose TOML number, a duplicate YAML key or an alias, not valid YAML/TOML (with its line),
            another suffix, or not a mapping at the top level.
    """
    from dukb.kb.csvfile import decode_text, read_bytes

    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in (".yaml", ".yml", ".toml"):
        raise InputError("a --config file must be .yaml, .yml or .toml", p)
    text = decode_text(read_bytes(p, "config file", limit=MAX_CONFIG_BYTES), p)
    _check_limits(text, p, suffix == ".toml")
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
            node = yaml.compose(text, Loader=yaml.BaseLoader)
            if node is not None:
                _yaml_problems(node, p)
            data = yaml.load(text, Loader=yaml.BaseLoader)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            raise InputError(
                f"not valid YAML ({getattr(e, 'problem', None) or type(e).__name__})",
                p,
                mark.line + 1 if mark is not None else None,
            ) from None
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
    """An integer or float option's value read as the command line reads it (``-?[0-9]+``; a finite decimal
    number without ``_``) and within its declared range (:func:`dukb.cli.run_options.ranged`), refused at its
    FILE:LINE."""
    from dukb.cli.main import _is_integer_option, _number_problem
    from dukb.cli.run_options import option_range

    rng = option_range(param)
    for item in value if isinstance(value, list) else [value]:
        problem = _number_problem(param, _text(item))
        if problem:
            raise InputError(f"option {key!r}: {problem}", path, line)
        if rng is not None:  # the option's declared range (dukb.neural.bounds), at the file's line
            number = int(_text(item)) if _is_integer_option(param) else float(_text(item))
            problem = rng.problem(max(param.opts, key=len), number)  # named as the flag, as on the command line
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
            raise InputError(
                f"unknown option {key!r} for `dukb {command.name}` (see `dukb {command.name} --help`)",
                path,
                lines.get(str(key)),
            )
        if isinstance(value, dict) or (isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value)):
            raise InputError(
                f"option {key!r} takes a value or a list of values, not a table", path, lines.get(str(key))
            )
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
    """Eager ``--config`` callback (click calls it for every invocation, given or not): the file's options become the
    command's defaults (command-line flags win), and the command's run claims write RUN/config.yaml
    (:func:`on_claim`, set as :func:`dukb.neural.run.lock.set_claim_hook` until the command ends)."""
    if ctx.resilient_parsing:
        return value
    from dukb.neural.run.lock import set_claim_hook

    def hook(run, role, identity, added):
        # only while this command runs: a context whose parsing failed is never closed, so its hook may outlive it
        if _current_context() is ctx:
            on_claim(ctx, run, role, identity, added)

    before = set_claim_hook(hook)
    ctx.call_on_close(lambda: set_claim_hook(before))
    if value is None:
        return value
    ctx.default_map = {**(ctx.default_map or {}), **default_map(ctx.command, value)}
    return value


#: The ``--config`` option every protocol command takes.
CONFIG_OPTION = typer.Option(
    None,
    "--config",
    is_eager=True,
    callback=load_config_callback,
    help="YAML or TOML file of this command's options (names without the leading dashes; a "
    "list for a comma-separated or repeated option); flags on the command line win. "
    "A run's owner saves its options to RUN/config.yaml (paths absolute), so "
    "--config RUN/config.yaml -o NEW repeats it from any folder (--resume continues "
    "it).",
)


def _current_context():
    """The running command's click context (typer >= 0.29 vendors click as ``typer._click``), or None."""
    try:
        from typer._click.globals import get_current_context
    except ImportError:  # pragma: no cover - older typer uses click itself
        from click import get_current_context
    return get_current_context(silent=True)


def _absolute(name: str, value):
    """An option's value with a path resolved to an absolute one (see :data:`PATH_OPTIONS`); other values as given."""
    import os

    if isinstance(value, Path):
        return os.path.abspath(os.path.expanduser(value))
    if isinstance(value, (list, tuple)):
        return [_absolute(name, v) for v in value]
    if name in PATH_OPTIONS and isinstance(value, str) and value:
        from dukb.solver.rules import BUILTIN_RULES

        if name == "rules" and value in BUILTIN_RULES:  # the loader takes a rule-set name before a path
            return value
        path = os.path.expanduser(value)
        if os.path.lexists(path):  # an existing path wins over a built-in name (kb, model): it is what ran
            return os.path.abspath(path)
    return value


def resolved_options(ctx, exclude=()) -> dict:
    """The running command's options as config.yaml records them: every parameter but ``config``, ``resume``,
    ``exclude`` and those left unset (None, an empty list), dashes in the names, paths absolute (:func:`_absolute`).

    Args:
        ctx: the command's click context; exclude: more parameter names to leave out.

    Returns:
        dict option name -> value (str, int, float, bool or a list of them).
    """
    values = {}
    for name, v in ctx.params.items():
        if name in _NOT_SAVED or name in exclude or v is None or (isinstance(v, (list, tuple)) and not v):
            continue  # unset (a repeatable option not given is an empty list)
        v = _absolute(name, v)
        if isinstance(v, tuple):
            v = list(v)
        values[name.replace("_", "-")] = v
    return values


def _header(command: str) -> str:
    """config.yaml's header comment: what the file guarantees (see the module docstring)."""
    return (
        f"# the options of this `dukb {command}` run, {_OWNER_MARK} (its owner: the first\n"
        "# line of commands.log), every path absolute. From any folder,\n"
        f"#   dukb {command} --config THIS_FILE -o NEW_DIR      makes a run of the same identity,\n"
        f"#   dukb {command} --config THIS_FILE --resume        continues this run.\n"
        "# A --resume that added to the run (targets, methods, grid values, ...) rewrote it under the run lock to\n"
        "# describe the whole run; each invocation's command line is in commands.log.\n"
    )


def _write(path: Path, command: str, values: dict) -> None:
    """Write config.yaml: the header and the options (YAML, in the command's order), atomically."""
    import yaml

    from dukb.neural.run.files import output_file, write_bytes_atomic

    text = _header(command) + yaml.safe_dump(values, sort_keys=False, allow_unicode=True)
    write_bytes_atomic(output_file(path), text.encode("utf-8"))


def _items(value) -> list[str]:
    """A comma-separated option's value (a string or a list) as its items, stripped, empty ones left out."""
    parts = value if isinstance(value, list) else [value]
    return [x.strip() for part in parts for x in str(part).split(",") if x.strip()]


def _grid_key(entry: str) -> str:
    """The method part of a ``--grid METHOD=v1,v2`` entry (the text before the last ``=``)."""
    return str(entry).rsplit("=", 1)[0].strip()


def _number(v) -> str:
    """A grid value as ``--grid`` reads it back (an int as is, a float exactly)."""
    return str(v) if isinstance(v, int) else repr(float(v))


def extendable_options(command: str) -> tuple[str, ...]:
    """The comma-separated options of protocol ``command`` a ``--resume`` may add values to (they feed the
    identity's extendable keys: methods, controls, ratios, requests), declared in its config's field metadata
    (:func:`dukb.neural.declare.extendable_flags`): config.yaml holds the union of the invocations' values.

    Args:
        command: the command's name (a protocol of :data:`dukb.neural.protocols.PROTOCOLS`; another: none).
    """
    from dukb.neural.declare import extendable_flags
    from dukb.neural.protocols import PROTOCOLS

    info = PROTOCOLS.get(command)
    return extendable_flags(info.load("config")) if info is not None else ()


def _union(command: str, run: Path, old: dict, new: dict, identity: dict, added: dict) -> dict:
    """The options of a run a resume added to: this invocation's options, with each extendable comma-separated list
    the union of the run's (``old``) and this invocation's values, the grid entries of both (a grown grid as the
    identity's whole list), and the run's targets: grown ones (or any, when the run's file is unreadable) written
    to RUN/targets.txt, else the run's own target options (this invocation may have named only some)."""
    out = dict(new)
    for key in extendable_options(command):
        if key in old or key in new:
            out[key] = ",".join(dict.fromkeys(_items(old.get(key, "")) + _items(new.get(key, ""))))
    grids = {}
    for entry in _items_list(old.get("grid")) + _items_list(new.get("grid")):
        grids.setdefault(_grid_key(entry), str(entry))
    methods = identity.get("methods") if isinstance(identity.get("methods"), dict) else {}
    for k in added:
        parts = k.split(".")
        if (
            len(parts) == 3
            and parts[0] == "methods"
            and parts[2] == "grid"
            and isinstance(methods.get(parts[1], {}).get("grid"), list)
        ):
            grids.pop(parts[1], None)
            grids[parts[1]] = f"{parts[1]}=" + ",".join(_number(v) for v in methods[parts[1]]["grid"])
    if grids:
        out["grid"] = list(grids.values())
    targets = identity.get("targets")
    if isinstance(targets, list) and targets and all(isinstance(t, int) for t in targets):
        if "targets" in added or not old:  # the run's targets, whatever this invocation named
            from dukb.neural.run.files import output_file, write_bytes_atomic

            path = Path(run).absolute() / TARGETS_NAME
            text = (
                "# the targets of this run (the union of its invocations'), written by dukb for config.yaml\n"
                + "".join(f"{t}\n" for t in targets)
            )
            write_bytes_atomic(output_file(path), text.encode("utf-8"))
            out["targets-file"] = str(path)
        else:  # none added: the run's file says them all (this invocation may have named only some)
            for key in TARGET_OPTIONS:
                if key in old:
                    out[key] = old[key]
                else:
                    out.pop(key, None)
    return out


def _items_list(value) -> list[str]:
    """A repeatable option's value (None, a string or a list) as a list of strings."""
    if value is None:
        return []
    return [str(v) for v in (value if isinstance(value, list) else [value])]


def on_claim(ctx, run, role: str, identity: dict, added: dict) -> None:
    """Write RUN/config.yaml for an invocation that has claimed ``run`` (called under the run lock by
    :func:`dukb.neural.run.lock.confirm_run` once the protocol accepted the run): the owner, which creates the run,
    writes its options once; a resume that added to the run rewrites the file to describe the whole run
    (:func:`_union`); a resume that adds nothing and a worker leave it as it is (a missing file is written).

    Args:
        ctx: the command's click context; run: the run directory; role: "owner", "resume" or "worker"; identity: the
            run's merged identity; added: what this invocation added to it (``{key: [entries]}``).

    Raises:
        InputError: the file cannot be written (a folder in its place).
    """
    import os

    if role == "worker":
        return
    path = Path(run) / RESOLVED_NAME
    values = resolved_options(ctx)
    command = ctx.command.name
    if role == "owner" or not os.path.lexists(path):
        _write(path, command, values)
        return
    if not added:
        return
    try:
        old, _lines = read_config_file(path)
    except InputError:  # unreadable: the union is this invocation's values
        old = {}
    _write(path, command, _union(command, Path(run), old, values, identity, added))


def save_resolved_config(output, exclude=()) -> Path | None:
    """Make sure ``output/config.yaml`` exists once the command has run: written from the running command's options
    (:func:`resolved_options`) only when no run claim wrote it (:func:`on_claim`; e.g. where runs are not locked);
    never rewritten here.

    Args:
        output: the run directory (created if needed).
        exclude: more parameter names to leave out.

    Returns:
        The path, or None outside a click command.
    """
    import os

    ctx = _current_context()
    if ctx is None:
        return None
    out = Path(output)
    if not os.path.lexists(out / RESOLVED_NAME):
        out.mkdir(parents=True, exist_ok=True)
        _write(out / RESOLVED_NAME, ctx.command.name, resolved_options(ctx, exclude))
    return out / RESOLVED_NAME


__all__ = [
    "CONFIG_OPTION",
    "extendable_options",
    "PATH_OPTIONS",
    "RESOLVED_NAME",
    "TARGETS_NAME",
    "default_map",
    "load_config_callback",
    "on_claim",
    "read_config_file",
    "resolved_options",
    "save_resolved_config",
]
