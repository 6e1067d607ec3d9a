"""`dukb evaluate`'s report, at its import path of earlier dukb versions: it now lives in
:mod:`dukb.neural.protocols.evaluate.report` (every public name re-exported here).

Source: Wu et al. 2025, Sec. 4 and Eq. 1-2 (the figures it tabulates).
"""

from dukb.neural.protocols.evaluate.report import *  # noqa: F401,F403  (re-exported)
