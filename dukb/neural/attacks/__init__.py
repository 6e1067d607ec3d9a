"""Attacks on unlearned models (does an unlearned fact come back?): the registry and its attacks.

:data:`ATTACKS` maps a name to an :class:`Attack`: the lazy registry declared in :data:`dukb.neural.catalog.ATTACKS`,
which imports an attack's module on first use. Each attack is one module with an :class:`Attack` constant:
``relearn`` (Hu et al. 2025), ``quant8``/``quant4``/``quant16`` (Zhang et al. 2025), ``incontext`` (premises in the
prompt; Wu et al. 2025, Definitions 1-2) and ``logitlens`` (nostalgebraist 2020; Patil et al. 2024).
"""

from dukb.neural.attacks.base import (  # noqa: F401
    ATTACKS,
    Attack,
    AttackContext,
    AttackOutcome,
    attack_identity,
    attacks_table,
    check_attack,
    parse_attacks,
    run_attacks,
    score_attack,
    worst_case_fields,
)
