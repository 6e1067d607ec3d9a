"""`dukb control`'s report, at its import path of earlier dukb versions: it now lives in
:mod:`dukb.neural.protocols.control.report` (re-exported here).

Source: Wang et al. 2024 ("Unlearning with Control"), Sec. 5 (the tables it renders).
"""

from dukb.neural.protocols.control.report import *  # noqa: F401,F403  (re-exported)
from dukb.neural.protocols.control.report import __all__  # noqa: F401
