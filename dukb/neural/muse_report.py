"""`dukb muse`'s report, at its import path of earlier dukb versions: it now lives in
:mod:`dukb.neural.protocols.muse.report` (every public name re-exported here).

Source: Shi et al. 2024b (MUSE), Sec. 3-4 (the tables and figures it renders).
"""

from dukb.neural.protocols.muse.report import *  # noqa: F401,F403  (re-exported)
