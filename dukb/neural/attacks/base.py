"""Attacks on an unlearned model: does an unlearned fact come back?

An attack takes one unlearned model (the predictor a sweep yields, or a checkpoint given to `dukb attack`) and
returns the facts it knows *under the attack*: after relearning on other facts, after quantizing the weights, with
the premises of a rule instance in the prompt, or by reading intermediate layers. :func:`score_attack` turns them
into the deep-unlearning figures of the row: recall (Eq. 1), accuracy (Eq. 2), Success-DU (Definition 2), the
forgotten facts and whether the target is known, all recomputed from the attack's forgotten facts exactly as the
row's own are.

A new attack is one module that builds an :class:`Attack` constant (see ``relearn.py``) and one
:class:`dukb.neural.catalog.AttackEntry` line in :data:`dukb.neural.catalog.ATTACKS`.

Source: Wu et al. 2025, Eq. 1-2 and Definition 2 (the figures); the attacks' own sources are in their modules.
"""

from __future__ import annotations

import copy
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from dukb import InputError
from dukb.kb.csvfile import strict_int
from dukb.neural.catalog import ATTACKS, attacks_table  # noqa: F401  (the lazy registry; attacks_table re-exported)
from dukb.neural.metrics.base import RowContext
from dukb.neural.metrics.recall import score_probe
from dukb.neural.probe import probe
from dukb.solver.metrics import recall_accuracy


@dataclass
class AttackContext:
    """What an attack sees about one unlearned model.

    Attributes:
        pred: the unlearned model's :class:`dukb.neural.probe.Predictor` (valid while the attack runs; an attack
            that changes weights works on a copy).
        kb, closure: the KB and its :class:`dukb.solver.closure.Closure` under the run's rules.
        target: the target's relationship fact_id (int).
        sets: the target's minimal deep unlearning sets (lists of fact_ids); sets_used: "exact" or "random".
        forget_ids: the relationship fact_ids the method was asked to forget (its forget set).
        retain_ids: {"relationships": [...], "biographies": [...]}: facts the method trained on as retain data
            (left out of accuracy, as in the row).
        items: the "qa" item of every KB fact (:class:`dukb.neural.data.QAItem`), what recall is judged on.
        probe: the row's own probe table of those items (pandas DataFrame with fact_kind, fact_id, kind, known).
        spec: the model's :class:`dukb.neural.spec.ModelSpec` (the family's finetuning preset gives relearning's
            default learning rate); None: the tiny preset.
        reference: the model before unlearning (a Predictor), for attacks that compare against it; None if absent.
        seed: the run's seed; batch_size: prompts per probing batch.
        tie_break: "accuracy" or "first", as the row's (:func:`dukb.solver.metrics.recall_accuracy`).
    """

    pred: object
    kb: object
    closure: object
    target: int
    sets: list
    sets_used: str
    forget_ids: list[int]
    items: list
    probe: object
    retain_ids: dict = field(default_factory=lambda: {"relationships": [], "biographies": []})
    spec: object = None
    reference: object = None
    seed: int = 0
    batch_size: int = 256
    tie_break: str = "accuracy"


@dataclass
class AttackOutcome:
    """What an attack found.

    Attributes:
        probe: a probe table of ``ctx.items`` (fact_kind, fact_id, kind "qa", known): the facts known under the
            attack.
        extra: attack-specific fields for the row's entry (JSON-serialisable), e.g. the relearned fact ids.
    """

    probe: object
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Attack:
    """A registered attack.

    Attributes:
        name: registry name (``--attacks NAME``).
        summary: one line for `--help` and README.
        source: the paper the attack follows.
        defaults: setting -> default value (the type of each default is the type a setting is read as).
        fn: ``fn(ctx: AttackContext, settings: dict) -> AttackOutcome``.
        needs_reference: the attack compares against the model before unlearning (it still runs without one).
        ranges: setting -> its :class:`dukb.neural.bounds.Range` (every numeric setting has one, checked when the
            ``--attacks`` entry is parsed, before any model is loaded).
    """

    name: str
    summary: str
    source: str
    defaults: dict
    fn: Callable
    needs_reference: bool = False
    ranges: dict = field(default_factory=dict)


def check_attack(attack: Attack) -> None:
    """Refuse an attack with a numeric setting that has no range (:data:`ATTACKS` runs it when it loads one).

    Raises:
        ValueError: a numeric setting has no range (a programming error).
    """
    unbounded = [
        k
        for k, v in attack.defaults.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and k not in attack.ranges
    ]
    if unbounded:
        raise ValueError(f"attack {attack.name!r}: settings without a range: {unbounded}")


def _cast(name: str, key: str, text: str, default):
    """Read one setting's text as the type of its default."""
    try:
        if isinstance(default, bool):
            if text.lower() not in ("true", "false", "1", "0"):
                raise ValueError
            return text.lower() in ("true", "1")
        if isinstance(default, int):
            v = strict_int(text)
            if v is None:
                raise ValueError
            return v
        if isinstance(default, float) or default is None:
            if not re.fullmatch(r"[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?|\.[0-9]+([eE][-+]?[0-9]+)?", text):
                raise ValueError
            v = float(text)
            if not math.isfinite(v):
                raise ValueError
            return v
        return text
    except ValueError:
        raise InputError(f"--attacks {name}: {key}={text!r} is not a {type(default).__name__}") from None


def parse_attacks(specs) -> list[tuple[Attack, dict]]:
    """Parse ``--attacks`` entries: ``NAME`` or ``NAME:key=value:key=value`` (settings override the defaults).

    Args:
        specs: iterable of str (each one attack; a comma-separated string is split).

    Returns:
        [(Attack, settings dict with every default filled)], in the order given.

    Raises:
        InputError: an unknown attack or setting, a value of the wrong type or outside the setting's range
            (:attr:`Attack.ranges`), a setting given twice, or an attack named twice.
    """
    if isinstance(specs, str):
        specs = [specs]
    out, seen = [], set()
    for spec in [p.strip() for s in specs for p in str(s).split(",") if p.strip()]:
        name, *pairs = spec.split(":")
        if name not in ATTACKS:
            raise InputError(f"unknown attack {name!r} (choose from {', '.join(sorted(ATTACKS))})")
        if name in seen:
            raise InputError(f"--attacks names {name} twice")
        seen.add(name)
        a = ATTACKS[name]
        settings = dict(a.defaults)
        given: set = set()
        for p in pairs:
            key, eq, val = p.partition("=")
            if not eq or key not in a.defaults:
                raise InputError(
                    f"--attacks {name}: unknown setting {p!r} (settings: "
                    f"{', '.join(f'{k}={v}' for k, v in a.defaults.items())})"
                )
            if key in given:
                raise InputError(f"--attacks {name}: setting {key} is given twice in {spec!r}")
            given.add(key)
            settings[key] = _cast(name, key, val, a.defaults[key])
            if key in a.ranges:
                a.ranges[key].check(f"--attacks {name}:{key}", settings[key])
        check = getattr(a.fn, "check", None)
        if check is not None:
            check(settings)
        out.append((a, settings))
    return out


def check_attacks_on_model(attacks, model, kb=None) -> None:
    """Check each attack's settings against the model it will attack (e.g. ``quant4``'s group against the layer
    widths) and the KB (e.g. ``incontext`` needs a ``fact`` template for every relation of a KB with its own
    schema), before any unlearning or attack runs: an attack's ``fn.check_model(settings, model)`` and
    ``fn.check_kb(settings, kb)``, when it has them.

    Args:
        attacks: [(Attack, settings)] (:func:`parse_attacks`); model: the torch model (θ₀ or the checkpoint;
        None: not checked); kb: the KB (None: not checked).

    Raises:
        InputError: a setting the model cannot take, or a KB the attack cannot run on (one line).
    """
    for a, settings in attacks or ():
        check = getattr(a.fn, "check_model", None)
        if check is not None and model is not None:
            check(settings, model)
        check_kb = getattr(a.fn, "check_kb", None)
        if check_kb is not None and kb is not None:
            check_kb(settings, kb)


def attack_identity(attacks: list[tuple[Attack, dict]]) -> dict:
    """The run-identity entry of a list of attacks: name -> settings (a resume with other attacks or settings is
    refused)."""
    return {a.name: dict(s) for a, s in attacks}


def score_attack(ctx: AttackContext, outcome: AttackOutcome) -> dict:
    """The row figures under an attack, recomputed from its probe table as the row's own are.

    Returns:
        dict: recall, accuracy_relationships, accuracy_biographies, accuracy_all, success_du, target_known,
        forgotten_relationships, forgotten_biographies (sorted fact_ids), and the outcome's extra fields.

    Raises:
        ValueError: the probe table lacks a fact of the KB.

    Source: Wu et al. 2025, Eq. 1-2 (recall, accuracy) and Definition 2 (Success-DU).
    """

    rctx = RowContext(
        ctx.kb,
        ctx.target,
        [list(s) for s in ctx.sets],
        ctx.sets_used,
        outcome.probe,
        list(ctx.forget_ids),
        ctx.retain_ids,
        closure=ctx.closure,
        tie_break=ctx.tie_break,
    )
    r = score_probe(rctx)
    keep = (
        "recall",
        "accuracy_relationships",
        "accuracy_biographies",
        "accuracy_all",
        "forgotten_relationships",
        "forgotten_biographies",
        "success_du",
    )
    out = {k: r[k] for k in keep if k in r}
    out["target_known"] = int(ctx.target not in set(out["forgotten_relationships"]))
    return {**out, **outcome.extra}


def run_attacks(ctx: AttackContext, attacks: list[tuple[Attack, dict]]) -> dict[str, dict]:
    """Apply each attack to the model of ``ctx`` and score it.

    Returns:
        name -> entry (:func:`score_attack`'s fields, ``settings`` and ``seconds``).

    Raises:
        InputError: an attack that cannot run on this model (named in the message).
    """

    out = {}
    for a, settings in attacks:
        t0 = time.perf_counter()
        outcome = a.fn(ctx, dict(settings))
        out[a.name] = {
            **score_attack(ctx, outcome),
            "settings": dict(settings),
            "seconds": round(time.perf_counter() - t0, 3),
        }
    return out


def worst_case_fields(kb, sets, sets_used: str, target: int, row: dict, entries: dict) -> dict:
    """``recall_under_attack`` over probe forms *and* attacks: a relationship fact counts as forgotten only when
    the QA probe, every other asking form (the row's ``leaked_relationships``, when the ``recall_under_attack``
    metric ran; else the QA probe alone) and every attack find it forgotten; recall (Eq. 1) is recomputed over those
    facts. ``accuracy_all_under_attack`` (the metric's) stays over the probe forms only.

    Args:
        row: the row's fields, with ``forgotten_relationships`` (and ``leaked_relationships`` when present).
        entries: the attack entries (:func:`run_attacks`).

    Returns:
        {"recall_under_attack": float, "forgotten_under_attack": sorted fact_ids}.

    Raises:
        InputError: a fact_id that is not a relationship fact of the KB (:func:`dukb.solver.metrics.recall_accuracy`).

    Source: Wu et al. 2025, Eq. 1; the worst case over RWKU's forms (Jin et al. 2024) and the attacks.
    """

    gone = set(row["forgotten_relationships"]) - set(row.get("leaked_relationships") or ())
    for e in entries.values():
        gone &= set(e["forgotten_relationships"])
    r = recall_accuracy(kb, [list(x) for x in sets], gone, None, sets_used, [target])
    return {"recall_under_attack": r.recall, "forgotten_under_attack": sorted(gone)}


def plain_copy(model):
    """A deep copy of ``model`` with any PEFT adapter merged into its weights (W + BA; peft handles GPT-2's
    transposed Conv1D) and every parameter trainable: what relearning and quantization act on, as an attacker who
    holds the weights would (the unlearned model itself is unchanged).

    Returns:
        the copy (a plain transformers model), in eval mode.
    """

    m = copy.deepcopy(model)
    if hasattr(m, "merge_and_unload"):
        m = m.merge_and_unload()
    for p in m.parameters():
        p.requires_grad_(True)
    return m.eval()


def known_table(items, known: dict) -> object:
    """A probe table (fact_kind, fact_id, kind, known) of ``items`` from ``known[(fact_kind, fact_id)] -> bool``.

    Raises:
        KeyError: an item's fact has no entry in ``known``.
    """
    import pandas as pd

    return pd.DataFrame(
        {
            "kind": [it.kind for it in items],
            "fact_kind": [it.fact_kind for it in items],
            "fact_id": [int(it.fact_id) for it in items],
            "known": [bool(known[(it.fact_kind, int(it.fact_id))]) for it in items],
        }
    )


def probe_known(pred, items, batch_size: int = 256) -> dict:
    """(fact_kind, fact_id) -> known, by the paper's rule (greedy answer, substring judge) on ``items``."""
    df = probe(pred, items, batch_size=batch_size, generate=True, rouge=False, logprob=False)
    return {(k, int(f)): bool(v) for k, f, v in zip(df["fact_kind"], df["fact_id"], df["known"])}


def row_known(ctx: AttackContext) -> dict:
    """(fact_kind, fact_id) -> known of the row's own probe table ("qa" rows)."""
    df = ctx.probe
    qa = df[df["kind"] == "qa"]
    return {(k, int(f)): bool(v) for k, f, v in zip(qa["fact_kind"], qa["fact_id"], qa["known"])}
