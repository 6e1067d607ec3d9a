"""`dukb muse`'s import path of earlier dukb versions: the protocol now lives in :mod:`dukb.neural.protocols.muse`
(``config.py``: :class:`MuseConfig`, requests, model metrics; ``run.py``: the stages; ``report.py``).

Importing this module gives :mod:`dukb.neural.protocols.muse.run` itself (it re-exports every name this module
had), so that code which patches a function here patches the one the protocol calls.

Source: Shi et al. 2024b (MUSE), Sec. 2-4.
"""

import sys

from dukb.neural.protocols.muse import run as _run

sys.modules[__name__] = _run
