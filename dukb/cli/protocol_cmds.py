"""The commands of the registered protocols that have no command module of their own (muse, rwku, control): each is
generated from its registration and its config's declaration (:func:`dukb.cli.declared.protocol_command`), so a new
protocol needs no module in dukb/cli.

Source: dukb (issue "self-describing protocols": a protocol in 3 files and 1 registration).
"""

from __future__ import annotations

import typer

from dukb.cli.declared import protocol_command
from dukb.neural.protocols import PROTOCOLS


def register(app: typer.Typer) -> None:
    """Add ``dukb NAME`` to ``app`` for every registered protocol that is not a command of ``app`` yet (evaluate and
    restor have command modules of their own, registered before this one).

    Args:
        app: the typer application of :mod:`dukb.cli.main`.
    """
    taken = {c.name for c in app.registered_commands}
    for info in PROTOCOLS.values():
        if info.name not in taken:
            app.command(info.name)(protocol_command(info))
