"""Attacks on unlearned models (does an unlearned fact come back?): the registry and its attacks.

:data:`ATTACKS` maps a name to an :class:`Attack`; each attack is one module that registers itself:
``relearn`` (Hu et al. 2025), ``quant8``/``quant4``/``quant16`` (Zhang et al. 2025), ``incontext`` (premises in the
prompt; Wu et al. 2025, Definitions 1-2) and ``logitlens`` (nostalgebraist 2020; Patil et al. 2024).
"""

from dukb.neural.attacks import incontext, logitlens, quant, relearn  # noqa: F401,E402  (registrations)
from dukb.neural.attacks.base import (  # noqa: F401
                                      ATTACKS,
                                      Attack,
                                      AttackContext,
                                      AttackOutcome,
                                      attack_identity,
                                      attacks_table,
                                      parse_attacks,
                                      register,
                                      run_attacks,
                                      score_attack,
                                      worst_case_fields,
)
