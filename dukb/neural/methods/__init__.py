"""Unlearning methods, one small module each with its loss as a plain function, and the registry of methods and
presets.

- :mod:`.ga`: gradient ascent (Jang et al. 2023);
- :mod:`.npo`: negative preference optimisation (Zhang et al. 2024): ``npo`` in the form of Eval-DU's and MUSE's
  code (logits), ``npo_seq`` in the NPO paper's sequence form; RESTOR's token level for documents;
- :mod:`.retain`: the GDR and KLR retain regularisers of MUSE (Shi et al. 2024), combinable with GA, NPO and KL;
- :mod:`.kl`: KL unlearning as in RESTOR (maximise the divergence from the reference on the forget data);
- :mod:`.tv`: task vector negation (Ilharco et al. 2023);
- :mod:`.whp`: Who's Harry Potter logit steering (Eldan & Russinovich 2023; Wu et al. 2025 Eq. 3);
- :mod:`.simnpo`: SimNPO (Fan et al. 2024); :mod:`.po`: refusal targets + GDR (TOFU; Wang et al. 2024);
  :mod:`.rt`: rejection tuning and :mod:`.dpo`: DPO (RWKU, Jin et al. 2024); :mod:`.icu`: in-context unlearning and
  :mod:`.repe`: representation engineering (RWKU), neither changing weights;
- controls of excessive unlearning (OC, ES, MM; Wang et al. 2024) and partial-layer finetuning apply to every
  gradient method through :func:`dukb.neural.methods.base.gradient_sweep`;
- :mod:`.closed_loop`: closed-loop deep unlearning (dukb's own: the solver in the loop) and its ablations.

Every method implements :class:`dukb.neural.methods.base.Method`: ``sweep(ctx, grid)`` yields ``(setting,
predictor)`` pairs, each starting from the finetuned weights, without writing checkpoints to disk. Methods whose
forget term also applies to plain documents (``document_level``: ga, kl, npo) serve RESTOR's document unlearning.

**The registry**: :data:`METHODS` and :data:`PRESETS` are the lazy registries of :mod:`dukb.neural.catalog`, where
each method is one entry of metadata as data (name, class, variant, parameter, grid, options, summary, source);
the method's object is built on first use. Forget scopes come from :data:`dukb.solver.scopes.FORGET_SCOPES`. Help
texts, error messages and the reference tables (`dukb methods`, the docs' reference pages) are generated from the
entries without importing torch. Adding a method: one module with the Method subclass and its loss, and one
:class:`dukb.neural.catalog.MethodEntry` line in :data:`METHODS` (tests/cli/test_help_catalog.py checks that the entry's
metadata equals the method's).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dukb import InputError
from dukb.neural.catalog import METHODS, PRESETS, Preset, methods_table, presets_table, scopes_table
from dukb.neural.catalog import methods_help as catalog_methods_help
from dukb.neural.methods.base import Method, UnlearnContext, WeightState, parse_grid
from dukb.solver.scopes import FORGET_SCOPES, get_scope

#: Methods whose forget term also unlearns plain documents (RESTOR, Rezaei et al. Sec. 3.3).
DOCUMENT_METHODS: tuple[str, ...] = tuple(e.name for e in METHODS.entries() if e.document_level)


def schedule_for(label: str, default: str) -> str:
    """The sweep schedule of a ``--methods`` entry: its preset's :attr:`Preset.schedule` when it has one, else
    ``default`` (the run's ``--schedule``)."""
    p = PRESETS.get(label)
    return p.schedule if p is not None and p.schedule else default


def get_method(name: str) -> Method:
    """The registered method called ``name`` (case-insensitive).

    Raises:
        InputError: unknown method name (lists methods and presets).
    """
    key = name.strip().lower()
    if key not in METHODS:
        hint = f"; {key} is a preset, which `--methods`/`--method` accept" if key in PRESETS else ""
        raise InputError(f"unknown method {name!r} (choose from {', '.join(METHODS)}{hint})")
    return METHODS[key]


@dataclass(frozen=True)
class Resolved:
    """A ``--methods`` entry resolved through the registry.

    Attributes:
        label: the name rows carry: the method (``ga``), ``METHOD@SCOPE`` (``npo_gdr@minimum``) or the preset.
        method: the :class:`Method`.
        scope: the forget scope name.
        grid: the preset's grid, or None (the method's default or a user grid applies).
    """

    label: str
    method: Method
    scope: str
    grid: tuple | None

    def __iter__(self):  # (label, method, scope, grid), as evaluate unpacks it
        return iter((self.label, self.method, self.scope, self.grid))


def parse_method_options(text: str, spec: str) -> dict:
    """``k=v:k2=v2`` (the part of a ``--methods`` entry after its first ``:``) -> {k: float}.

    Raises:
        InputError: an entry without ``=``, an option given twice, or a value that is not a decimal number.
    """
    out: dict = {}
    for part in text.split(":"):
        key, eq, value = part.partition("=")
        key = key.strip()
        if not eq or not key:
            raise InputError(f"method option {part!r} in {spec!r} is not KEY=VALUE (e.g. npo:beta=0.05:lr=1e-3)")
        if key in out:
            raise InputError(f"method option {key!r} is given twice in {spec!r}")
        try:
            vals = parse_grid(value)
        except InputError:
            vals = []
        if len(vals) != 1:
            raise InputError(f"method option {key} in {spec!r}: {value!r} is not a non-negative decimal number")
        out[key] = vals[0]
    return out


def resolve(spec: str, default_scope: str = "target") -> Resolved:
    """Resolve a method name (``ga``), ``METHOD@SCOPE`` (``npo_gdr@minimum``) or a preset (:data:`PRESETS`), each
    optionally followed by per-method options ``:KEY=VALUE`` (``npo:beta=0.05:lr=1e-3``; ``lr`` for every trained
    method, the others in :attr:`Method.options`, :meth:`Method.with_options`). The label (a result row's
    ``method``) is the entry normalised: lower case, options sorted by name, each value as Python's ``repr`` of the
    float (``npo_gdr@minimum:beta=0.05:lr=0.001``), so equal settings give one label and different values never
    share one.

    Raises:
        InputError: unknown method, preset, scope or option, or a bad option value.
    """
    spec = spec.strip().lower()
    base, _, opt_text = spec.partition(":")
    opts = parse_method_options(opt_text, spec) if opt_text else {}
    suffix = "".join(f":{k}={v!r}" for k, v in sorted(opts.items()))  # one label per method and values
    if base in PRESETS:
        p = PRESETS[base]
        return Resolved(base + suffix, METHODS[p.method].with_options(opts), p.scope, p.grid)
    name, _, scope = base.partition("@")
    scope = scope or default_scope
    if scope not in FORGET_SCOPES:
        raise InputError(f"unknown forget scope {scope!r} in {spec!r} (choose from {', '.join(FORGET_SCOPES)})")
    m = get_method(name)
    label = m.name if scope == "target" else f"{m.name}@{scope}"
    return Resolved(label + suffix, m.with_options(opts), scope, None)


def check_unique(labels) -> None:
    """Refuse a ``--methods`` list that names one method twice (after :func:`resolve`'s normalisation: the same
    method with the same options in another order is the same label).

    Raises:
        InputError: a label occurs twice (named).
    """
    seen: set = set()
    for label in labels:
        if label in seen:
            raise InputError(f"a method is listed twice in --methods: {label}")
        seen.add(label)


def methods_help(document_only: bool = False) -> str:
    """One-line list of the registered methods, scopes, presets and options for ``--help`` texts (with
    ``document_only``: the document-level methods, comma-separated), from the registry's metadata
    (:func:`dukb.neural.catalog.methods_help`)."""
    return ", ".join(DOCUMENT_METHODS) if document_only else catalog_methods_help()


def method_grids(resolved, overrides: dict, defaults: Callable | None = None) -> dict[str, list]:
    """Each resolved method's grid: an override by label (``--grid du_ga_gdr=...``), else by base method name,
    else the preset's grid, else ``defaults(method)`` when that is not None (the run's grid components, e.g. the
    paper's grids per family: :func:`dukb.neural.families.component_grid`), else the method's default grid.

    Args:
        resolved: :class:`Resolved` tuples (label, method, scope, preset grid or None).
        overrides: label or method name -> list of values.
        defaults: callable(Method) -> a grid or None.

    Returns:
        label -> list of grid values.

    Raises:
        InputError: an override names no method of the run (it would be dropped silently: e.g. ``--grid npo=...``
            when the run's methods are ``npo_seq``).

    Source: Wu et al. 2025, App. H (the paper's grids are the methods' defaults).
    """
    known = {label for label, *_r in resolved} | {m.name for _l, m, *_r in resolved}
    unused = sorted(k for k in overrides if k not in known)
    if unused:
        raise InputError(
            f"--grid {unused[0]}=...: {unused[0]} is not a method of this run (its methods: "
            f"{', '.join(label for label, *_r in resolved)})"
        )
    return {
        label: list(
            overrides.get(label) or overrides.get(m.name) or grid or (defaults and defaults(m)) or m.default_grid
        )
        for label, m, _scope, grid in resolved
    }


__all__ = [
    "DOCUMENT_METHODS",
    "METHODS",
    "PRESETS",
    "Method",
    "Preset",
    "Resolved",
    "UnlearnContext",
    "WeightState",
    "check_unique",
    "get_method",
    "get_scope",
    "method_grids",
    "methods_help",
    "methods_table",
    "parse_grid",
    "parse_method_options",
    "presets_table",
    "resolve",
    "schedule_for",
    "scopes_table",
]
