"""`dukb rwku`'s import path of earlier dukb versions: the protocol now lives in :mod:`dukb.neural.protocols.rwku`
(``config.py``: :class:`RwkuConfig`, methods, row key; ``run.py``: the stages; ``report.py``).

Importing this module gives :mod:`dukb.neural.protocols.rwku.run` itself (it re-exports every name this module
had), so that code which patches a function here (``qa_mia_scores``, ``run_rwku``) patches the one the protocol calls.

Source: Jin et al. 2024 (RWKU), Sec. 3-4.
"""

import sys

from dukb.neural.protocols.rwku import run as _run

sys.modules[__name__] = _run
