"""The run's log: while a protocol holds its run, library warnings (transformers, peft, torch, ``warnings.warn``)
go to RUN_DIR/run.log (:func:`attach_run_log`), not the terminal.

Source: dukb (the run directory of every protocol).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from dukb import InputError
from dukb.neural.run.files import RUN_LOG_NAME, RunDir, _stderr, open_append

#: its line format: time, level, logger name, message
RUN_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _RunLogHandler(logging.FileHandler):
    """A :class:`logging.FileHandler` appending to RUN_DIR/run.log, opened at its first record (a run that logs
    nothing gets no file) as a regular file only (:func:`open_append`: a FIFO or a device in its place neither
    blocks nor swallows the log). A log that cannot be written is said once on stderr, in one line."""

    def __init__(self, path: str):
        super().__init__(path, encoding="utf-8", delay=True)
        self.failed = False

    def _open(self):
        return open_append(self.baseFilename)

    def emit(self, record) -> None:
        if self.failed:
            return
        if self.stream is None:
            try:
                self.stream = self._open()
            except (InputError, OSError):
                self.handleError(record)
                return
        logging.StreamHandler.emit(self, record)

    def handleError(self, record) -> None:  # noqa: N802 - logging's name
        if not self.failed:
            self.failed = True
            e = sys.exc_info()[1]
            _stderr(
                f"dukb: warning: {e if isinstance(e, InputError) else f'{self.baseFilename}: {e}'}; the "
                "run's log (library warnings) is not kept"
            )


def attach_run_log(run: str | Path) -> logging.Handler:
    """Send WARNING and worse records of every logger to RUN_DIR/run.log (appended; time, level, logger name) by a
    handler on the root logger, and route the libraries' warnings into logging, so that transformers, peft and
    torch warnings and ``warnings.warn`` calls (the ``py.warnings`` logger) land in the run's log instead of the
    terminal. :func:`claim_run` attaches it once the run is claimed; releasing the claim removes it
    (:func:`detach_run_log`).

    ``warnings.warn`` calls go to logging from now on (``logging.captureWarnings``); transformers' and the other
    libraries' loggers are routed to logging when a model is loaded (:func:`dukb.neural.models.quiet_libraries`,
    called by ``load_model``; this module does not import the models module).

    Returns:
        The handler (for :func:`detach_run_log`).

    The file is opened at the first record, as a regular file only: one that cannot be written (a FIFO or a
    directory in its place) is said once on stderr in one line, and the run goes on.
    """
    logging.captureWarnings(True)
    handler = _RunLogHandler(str(RunDir(run).run_log))
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter(RUN_LOG_FORMAT))
    logging.getLogger().addHandler(handler)
    return handler


def detach_run_log(handler: logging.Handler | None) -> None:
    """Remove a handler of :func:`attach_run_log` from the root logger and close its file (nothing for None)."""
    if handler is None:
        return
    logging.getLogger().removeHandler(handler)
    handler.close()


__all__ = ["RUN_LOG_FORMAT", "RUN_LOG_NAME", "attach_run_log", "detach_run_log"]
