"""`dukb control`'s import path of earlier dukb versions: the protocol now lives in
:mod:`dukb.neural.protocols.control` (``config.py``: :class:`ControlConfig`, splits, grids, row key; ``run.py``:
:class:`dukb.neural.protocols.control.run.ControlProtocol`; ``report.py``). This module re-exports them, and
:func:`run_control` stays patchable here (the command calls it through this module).

Source: Wang et al. 2024 ("Unlearning with Control"), Sec. 4-5, App. C.
"""

from __future__ import annotations

from dukb.neural.protocols.control.config import *  # noqa: F401,F403  (re-exported)
from dukb.neural.protocols.control.config import __all__ as _config_names


def run_control(run_dir, config=None, *, resume: bool = True, progress: bool = False, log=print):
    """Run (or resume) the Unlearning-with-Control protocol into ``run_dir``:
    :func:`dukb.neural.protocols.control.run.run_control` (same arguments, return value and errors; imported when
    called, so that importing this module loads no model code).

    Returns:
        pandas DataFrame of the result rows.

    Raises:
        InputError: bad settings, another run in ``run_dir``, results present without ``resume``, a method that is
            not a gradient method.
    """
    from dukb.neural.protocols.control.run import run_control as run

    return run(run_dir, config, resume=resume, progress=progress, log=log)


__all__ = [*_config_names, "run_control"]
