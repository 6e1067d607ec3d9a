"""The light catalog: what command help and error texts say about the registries, without importing them.

The registries (:data:`dukb.neural.methods.METHODS` and ``PRESETS``, :data:`dukb.neural.metrics.METRICS`,
:data:`dukb.neural.attacks.ATTACKS`, the finetuning presets of :mod:`dukb.neural.families`) live in modules that
use torch and import it at the top. The CLI builds every ``--help`` from this module instead, which reads
:mod:`dukb.neural._catalog`: names, summaries, parameters, grids and options, generated from the registries by

    python -m dukb.neural.catalog_build    # rewrite dukb/neural/_catalog.py from the live registries

and checked against them by the test suite (tests/cli/test_help_catalog.py), so a registry change that is not regenerated
fails there, never silently. Importing this module imports neither torch nor any registry module.

Source: dukb (the CLI's import graph; issue "one protocol skeleton", item 5).
"""

from __future__ import annotations

from dukb.neural._catalog import CATALOG


def method_names() -> list[str]:
    """Registered method names, in registry order."""
    return [m["name"] for m in CATALOG["methods"]]


def preset_names() -> list[str]:
    """Registered preset names (deep-unlearning-aware presets), in registry order."""
    return [p["name"] for p in CATALOG["presets"]]


def document_methods() -> list[str]:
    """Methods whose forget term also unlearns plain documents (RESTOR's ga, kl, npo)."""
    return [m["name"] for m in CATALOG["methods"] if m["document_level"]]


def methods_help() -> str:
    """One-line list of the registered methods, scopes, presets and per-method options for ``--help`` texts."""
    opts = sorted({o for m in CATALOG["methods"] for o in m["options"]})
    return (f"Methods: {', '.join(method_names())}; METHOD@SCOPE with scope {', '.join(CATALOG['scopes'])} (e.g. "
            f"npo_gdr@minimum); deep-unlearning-aware presets: {', '.join(preset_names())}. Per-method options: "
            f"METHOD:KEY=VALUE[:KEY=VALUE] with lr (every trained method) or {', '.join(opts)} (the methods whose "
            "loss has it, `dukb methods`), e.g. npo:beta=0.05:lr=1e-3; the row's method label keeps them.")


def default_metrics() -> tuple[str, ...]:
    """The metrics ``dukb evaluate`` computes by default."""
    return tuple(CATALOG["default_metrics"])


def metrics_help() -> str:
    """One line listing the registered metrics for ``--help``."""
    return "; ".join(f"{m['name']}: {m['summary']}" for m in CATALOG["metrics"])


def attack_names() -> list[str]:
    """Registered attack names, sorted."""
    return sorted(a["name"] for a in CATALOG["attacks"])


def attacks_help() -> str:
    """One line per attack name and summary, for ``--help``."""
    return "; ".join(f"{a['name']}: {a['summary']}" for a in sorted(CATALOG["attacks"], key=lambda a: a["name"]))


def attack_settings_help() -> str:
    """Each attack with its settings and their defaults (``dukb attack --help``)."""
    return "; ".join(f"{a['name']} ({', '.join(f'{k}={v}' for k, v in a['defaults'].items()) or 'no settings'})"
                     for a in sorted(CATALOG["attacks"], key=lambda a: a["name"]))


def selection_rules() -> list[str]:
    """MUSE's rules for picking the unlearned model that C6 continues from."""
    return list(CATALOG["selection_rules"])


__all__ = ["attack_names", "attack_settings_help", "attacks_help", "default_metrics", "document_methods",
           "method_names", "methods_help", "metrics_help", "preset_names", "selection_rules"]
