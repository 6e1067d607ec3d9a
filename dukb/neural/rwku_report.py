"""`dukb rwku`'s report, at its import path of earlier dukb versions: it now lives in
:mod:`dukb.neural.protocols.rwku.report` (re-exported here).

Source: Jin et al. 2024 (RWKU), Sec. 4 (the tables it renders).
"""

from dukb.neural.protocols.rwku.report import *  # noqa: F401,F403  (re-exported)
from dukb.neural.protocols.rwku.report import __all__  # noqa: F401
