"""The `dukb` command: a thin typer app. Each command group lives in its own module and imports heavy libraries
(clingo, torch) only inside the command, so `dukb closure` and `dukb mdus` start fast and never import torch.

Errors in user input (:class:`dukb.DukbError`), usage errors and file-system errors (:class:`OSError`) print one
line ``dukb: error: ...`` (control characters escaped by :func:`dukb.one_line`) and exit with code 2.
"""

from __future__ import annotations

import functools
import os
import sys

import typer

from dukb import DukbError, __version__, one_line

app = typer.Typer(
    name="dukb",
    help="Evaluate deep unlearning in LLMs: deductive closures, minimal deep unlearning sets, recall/accuracy, "
         "finetuning, unlearning and probing.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"dukb {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    """dukb: evaluating deep unlearning in large language models."""


#: Command-group modules of dukb.cli; each has ``register(app)`` and imports heavy libraries lazily.
COMMAND_MODULES = ("symbolic", "kbtools", "probes", "generate", "neural_cmds", "evaluate_cmd", "restor_cmd",
                   "muse_cmd", "rwku_cmd", "control_cmd")


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


def fail(message: str) -> "typer.Exit":
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


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``dukb`` console script.

    Under a multi-process launch (``WORLD_SIZE > 1``) only ``finetune`` and ``evaluate`` run; other commands exit
    with code 2 (:mod:`dukb.neural.distributed`).

    Returns:
        The exit code: 0 on success, 2 on bad input, usage or a file-system error (one line
        ``dukb: error: ...``, no traceback), 130 on Ctrl-C.
    """
    from dukb.neural.distributed import check_single_process

    ex = _click_exceptions()
    command = _command(len(app.registered_commands), len(app.registered_groups))
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        name = next((a for a in args if not a.startswith("-")), None)
        if name is not None:
            check_single_process(name)  # under accelerate launch/torchrun only finetune and evaluate may run
        rv = command.main(args=args, prog_name="dukb", standalone_mode=False)
        return rv if isinstance(rv, int) else 0
    except DukbError as e:
        _error(e)
        return 2
    except (typer.Exit,) as e:
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
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("dukb: interrupted", err=True)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as e:  # last resort: a file the command could not read or write, not caught where it was used
        _error(os_error_message(e))
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
