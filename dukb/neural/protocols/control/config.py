"""`dukb control`'s config, splits and grids: the evaluation framework of "Unlearning with Control" (Wang et al. 2024,
Sec. 5, App. C) on a KB, resumable, with the deep-unlearning recall of every calibrated model (which the paper cannot
measure). The stages run in :mod:`dukb.neural.protocols.control.run`.

Stages:

1. **plan** (symbolic): the KB and its closure; one seeded permutation of the relationship facts gives nested
   forget sets D_u at each forget ratio (a ratio of *all* KB facts, at least one fact; relationships only, so that
   each forget fact is a deep-unlearning target); retain-eval D_t,eval (``retain_eval`` facts of both kinds, drawn
   outside the largest D_u, the same for every ratio); retain-train D_t,train = the rest (the regulariser's data,
   never scored). The minimal deep unlearning sets of every forget fact (cached in sets.json). splits.json records
   every fact id.
2. **model**: θ_o finetuned on every fact's QA (cached in RUN_DIR/finetuned under its identity), or ``finetuned``.
3. **rows** per ratio: θ_o ("original": the floors' reference); per method the uncontrolled run ("none", T =
   ``steps``: the paper's Table 2); per method and control a coarse grid, then a fine grid around the best passing
   coarse value (:func:`coarse_grid`, :func:`fine_grid`). Every row holds the 6-number PS vector
   (:func:`dukb.neural.metrics.ps.ps_vector`), the response confidences, the per-step risk curve, the facts the
   model no longer knows, and the fact ids it used.
4. **report** (:mod:`dukb.neural.protocols.control.report`): calibration (:func:`calibrate`) from the rows alone, the paper's
   table layout, DU recall, PNGs.

Source: Wang et al. 2024 ("Unlearning with Control"), Sec. 4-5, App. C and G; Wu et al. 2025, Eq. 1-2 (recall).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import ClassVar

from dukb import InputError
from dukb.neural.bounds import GRID_INTERVALS, N_SEEDS, RETAIN_EVAL, STEPS, TAU, bounded
from dukb.neural.calibration import CONTROL_KINDS, FLOORS, SELECTIONS, calibrate, du_recall, passes
from dukb.neural.catalog import SEARCHES
from dukb.neural.declare import option
from dukb.neural.metrics.heldout import HELDOUT_RULES, check_heldout
from dukb.neural.runconfig import HELDOUT_RULE_HELP, RunConfig, heldout_forms_help

#: GA, GD (= GA + GDR), KL (= GA + KL to θ_o on retain data) and PO: the paper's four methods
CONTROL_METHODS = ("ga", "ga_gdr", "ga_klr", "po")
#: the paper's forget ratios (1:99, 5:95, 10:90)
RATIOS = (0.01, 0.05, 0.10)


@dataclass
class ControlConfig(RunConfig):
    """Everything that defines a `dukb control` run.

    Attributes:
        methods: gradient methods (:data:`dukb.neural.methods.METHODS` names).
        controls: subset of :data:`CONTROL_KINDS`.
        ratios: forget ratios in (0, 1).
        steps: T of the uncontrolled run, the length of OC and MM runs, the largest ES step.
        tau_max: the top of OC's coarse grid (nats per token); None: the largest unlearning risk the method's
            uncontrolled run reached.
        coarse, fine: intervals of the coarse grid over the control's range and of the fine grid over ±1 coarse
            step around the best coarse value (10 and 10: the paper's 0..1 step 0.1, then step 0.02).
        retain_eval: facts in D_t,eval (the paper: 400).
        selection: "full" or "cheap" (:data:`SELECTIONS`).
        search: PS search over k ("bisection" or "linear").
        sets, seeds: "exact" or "random" minimal deep unlearning sets for the recall (N_seed for random).
        heldout_forms: probe forms every model is also judged on (the ``*_heldout`` fields: the facts it no longer
            knows, their accuracy, Success-DU, DU recall), none of which a method trains on or queries and neither
            of the calibration's forms (qa, paraphrase); None: every form that asks for a fact except those
            (:func:`dukb.neural.metrics.heldout.default_heldout_forms`).
        heldout_rule: "pairs" or "any" (:data:`dukb.neural.metrics.heldout.HELDOUT_RULES`).
        kb, rules, model, finetuned, seed, lr, device, dtype, prompt, finetune_epochs, batch_size, LoRA, layers,
            gradient_checkpointing, trust_remote_code: the shared options
            (:class:`dukb.neural.runconfig.RunConfig`).

    Optimisation follows the deep-unlearning protocol, not TOFU's: each step uses the whole forget set as one batch
    and ``retain_batch_size`` (8) retain-train items, with no warm-up (the paper's warm-up over the first epoch and
    equal forget/retain batch sizes are TOFU defaults whose values its text lost).

    Source: Wang et al. 2024 (Unlearning with Control), Sec. 5 and App. C.
    """

    CLI: ClassVar[dict] = {
        "output": "runs/control",
        "resume": "Continue a run in the same directory; refused (exit 2, differing keys named) when a row-changing "
        "setting differs; methods, controls and ratios may be added.",
        "order": (
            "methods",
            "controls",
            "ratios",
            "steps",
            "tau_max",
            "coarse",
            "fine",
            "retain_eval",
            "selection",
            "search",
            "sets",
            "heldout_forms",
            "heldout_rule",
            "output",
            "resume",
        ),
    }

    methods: list[str] = option(
        default_factory=lambda: list(CONTROL_METHODS),
        extendable=True,
        parse="methods",
        help="Comma-separated gradient methods (the paper's GA, GD = ga_gdr, KL = ga_klr and "
        "PO by default; any method swept over steps, e.g. npo, simnpo, dpo, rt).",
    )
    controls: list[str] = option(
        default_factory=lambda: list(CONTROL_KINDS),
        extendable=True,
        parse="items",
        choices=CONTROL_KINDS,
        help="Controls of excessive unlearning: oc (objective capping: the unlearning risk "
        "capped at τ), es (early stopping at step T of one run), mm (model mixing "
        "(1−α)θ_o + αθ_u).",
    )
    ratios: list[float] = option(
        default_factory=lambda: list(RATIOS),
        extendable=True,
        parse="floats",
        help="Forget ratios of the KB's facts (1%, 5%, 10% by default); the forget sets are nested relationship facts.",
    )
    steps: int = option(
        16, range=STEPS, help="Steps T of the uncontrolled run; the length of OC and MM runs and the largest ES step."
    )
    tau_max: float | None = option(
        None,
        range=TAU,
        help="Top of OC's τ grid (nats per token; default: the largest "
        "unlearning risk of the method's uncontrolled run).",
    )
    coarse: int = option(10, range=GRID_INTERVALS, help="Intervals of the coarse grid over each control's range.")
    fine: int = option(
        10, range=GRID_INTERVALS, help="Intervals of the fine grid over ±1 coarse step around the best coarse value."
    )
    retain_eval: int = option(
        400, range=RETAIN_EVAL, help="Facts in retain-eval D_t,eval (never trained on by any method; the paper: 400)."
    )
    selection: str = option(
        "full",
        choices=SELECTIONS,
        help="full: all three floors; cheap: the PS-exact "
        "(retain-eval) floor alone (App. G). " + ", ".join(SELECTIONS) + ".",
    )
    search: str = option(
        "bisection", choices=("bisection", "linear"), help="PS search over the prefix length: bisection or linear."
    )
    sets: str = option(
        "exact", choices=("exact", "random"), help="exact | random minimal deep unlearning sets for DU recall."
    )
    seeds: int = bounded(100, N_SEEDS, "--seeds")
    heldout_forms: list[str] | None = option(
        None,
        parse="forms",
        help=heldout_forms_help(
            "every model is also judged on (the *_heldout fields and the report's held-out DU columns)",
            "the forms a method of the run trains on or queries (qa, and reverse for rt) and the calibration's "
            "(qa, paraphrase)",
        ),
    )
    heldout_rule: str = option("pairs", choices=("pairs", "any"), help=HELDOUT_RULE_HELP)

    def resolve(self) -> None:
        """Check the protocol's own fields (:meth:`dukb.neural.runconfig.RunConfig.check` calls it once) and
        resolve ``heldout_forms`` to probe kinds.

        Raises:
            InputError: no method, an unknown control, selection, search, sets or held-out rule, a ratio outside
                (0, 1), held-out forms a method or the calibration sees.
        """
        if not self.methods:
            raise InputError("no method given")
        bad = [c for c in self.controls if c not in CONTROL_KINDS]
        if bad:
            raise InputError(f"unknown control {bad[0]!r} (choose from {', '.join(CONTROL_KINDS)})")
        if not self.ratios or any(not 0 < r < 1 for r in self.ratios):
            raise InputError(f"--ratios must be in (0, 1), got {self.ratios}")
        if self.selection not in SELECTIONS:
            raise InputError(f"unknown --selection {self.selection!r} (choose from {', '.join(SELECTIONS)})")
        if self.search not in SEARCHES:
            raise InputError(f"unknown --search {self.search!r} (choose from {', '.join(SEARCHES)})")
        if self.sets not in ("exact", "random"):
            raise InputError(f"unknown --sets {self.sets!r} (choose exact or random)")

        if self.heldout_rule not in HELDOUT_RULES:
            raise InputError(f"--heldout-rule must be one of {', '.join(HELDOUT_RULES)}, got {self.heldout_rule!r}")
        if self.heldout_forms is not None:  # methods train on qa, calibration asks paraphrases (more in the plan)
            self.heldout_forms = list(check_heldout(self.heldout_forms, ("paraphrase", "qa")))


# ----------------------------------------------------------------------------------------------- the plan ----
def ratio_key(ratio: float) -> str:
    """The split name of a forget ratio: 0.01 -> "1%", 0.055 -> "5.5%"."""
    return f"{ratio * 100:g}%"


def split_facts(kb, ratios, n_retain_eval: int, seed: int = 0) -> dict:
    """D_u per ratio, D_t,eval and D_t,train per ratio (Wang et al. 2024, Sec. 5 and App. C).

    D_t,eval is drawn first (``n_retain_eval`` facts of both kinds, seeded), so it does not depend on the ratios;
    D_u(r) is the first round(r · N) (at least 1) of a seeded permutation of the other relationship facts, so the
    forget sets are nested and each depends on its own ratio only; D_t,train(r) is every other fact.

    Args:
        kb: the KB; ratios: forget ratios of all KB facts (N = relationships + biographies); n_retain_eval: size of
            D_t,eval; seed: the draws' seed.

    Returns:
        {"forget": {ratio_key: [relationship ids]}, "retain_eval": {"relationships", "biographies"},
        "retain_train": {ratio_key: {"relationships", "biographies"}}}.

    Raises:
        InputError: ``n_retain_eval`` < 1, or the KB has too few relationships for a ratio once D_t,eval is drawn.
    """
    if n_retain_eval < 1:
        raise InputError("--retain-eval must be at least 1")
    rel = [f.fact_id for f in kb.relationships]
    bio = [b.fact_id for b in kb.biographies]
    n_all = len(rel) + len(bio)
    everything = [("relationship", i) for i in rel] + [("biography", i) for i in bio]
    pick = random.Random(seed + 1).sample(everything, min(n_retain_eval, max(0, n_all - 2)))
    if not pick:
        raise InputError(f"the KB has {n_all} facts: too few for a retain-eval set and a forget set")
    ev_keys = set(pick)
    ev = {
        "relationships": sorted(i for k, i in pick if k == "relationship"),
        "biographies": sorted(i for k, i in pick if k == "biography"),
    }
    perm = [i for i in rel if ("relationship", i) not in ev_keys]
    random.Random(seed).shuffle(perm)
    forget, train = {}, {}
    for r in ratios:
        k = ratio_key(r)
        n = max(1, round(r * n_all))
        if n >= len(perm):
            raise InputError(
                f"a forget ratio of {r:g} needs {n} relationship facts outside retain-eval; the KB has {len(perm)}"
            )
        forget[k] = sorted(perm[:n])
        fs = set(forget[k])
        train[k] = {
            "relationships": sorted(i for i in rel if i not in fs and ("relationship", i) not in ev_keys),
            "biographies": sorted(i for i in bio if ("biography", i) not in ev_keys),
        }
    return {"forget": forget, "retain_eval": ev, "retain_train": train}


def coarse_grid(control: str, cfg: ControlConfig, tau_max: float | None = None) -> list:
    """The coarse grid of a control: MM α ∈ {0, 1/c, ..., 1}; ES T ∈ {round(i·T/c)}; OC τ ∈ {i·τ_max/c}
    (c = ``cfg.coarse``). α = 0 and T = 0 are θ_o itself; τ = 0 drops every forget step, so it is θ_o for a method
    without a retain term and θ_o trained on the retain term alone otherwise.

    Source: Wang et al. 2024, App. C (coarse grid of about 10 equally spaced values).
    """
    c = cfg.coarse
    if control == "mm":
        return [round(i / c, 6) for i in range(c + 1)]
    if control == "es":
        return sorted({round(i * cfg.steps / c) for i in range(c + 1)})
    top = cfg.tau_max if cfg.tau_max is not None else tau_max
    if not top or top <= 0:
        top = 1.0
    return [round(i * top / c, 6) for i in range(c + 1)]


def fine_grid(control: str, best: float, coarse: list, cfg: ControlConfig) -> list:
    """The fine grid: ``cfg.fine`` intervals over [best − Δ, best + Δ] ∩ the coarse range (Δ = one coarse step),
    integers for ES, without the coarse values already run.

    Source: Wang et al. 2024, App. C (a fine grid of 10 inside the best region, e.g. α 0.10-0.30 step 0.02).
    """
    lo_all, hi_all = min(coarse), max(coarse)
    step = (hi_all - lo_all) / max(1, len(coarse) - 1)
    lo, hi = max(lo_all, best - step), min(hi_all, best + step)
    vals = [lo + i * (hi - lo) / cfg.fine for i in range(cfg.fine + 1)]
    if control == "es":
        vals = sorted({int(round(v)) for v in vals})
    else:
        vals = sorted({round(v, 6) for v in vals})
    done = {float(v) for v in coarse}
    return [v for v in vals if float(v) not in done]


def control_row_key(row: dict) -> tuple:
    """(ratio, method, control, value) identifying a `dukb control` row."""
    v = row.get("value")
    return (row["ratio"], row.get("method") or "", row["control"], None if v is None else float(v))


__all__ = [
    "CONTROL_KINDS",
    "CONTROL_METHODS",
    "ControlConfig",
    "FLOORS",
    "RATIOS",
    "SELECTIONS",
    "calibrate",
    "coarse_grid",
    "control_row_key",
    "du_recall",
    "fine_grid",
    "passes",
    "ratio_key",
    "split_facts",
]


# ------------------------------------------------------------------------------------------------ rows --------
# The protocol's rows as the run layer sees them (issue 40: the run layer knows no protocol; ProtocolInfo carries
# them): the row model, the row key and the plan check. Kept at the end of the file, below the config.
from dukb.neural.run.rows import RowProblem, RowSchema, dict_of, identity_of, may, need, share, show  # noqa: E402


def control_row(row: dict) -> None:
    """The row model of `dukb control`: what `dukb report` reads of a row (dukb.neural.protocols.control.report,
    dukb.neural.calibration); PS scores and confidences are shares (Wang et al. 2024, Sec. 4).

    Raises:
        RowFault: the first problem, in words.
    """
    need(row, "ratio", "str")
    need(row, "control", "str")
    original = row["control"] == "original"
    need(row, "method", "str?" if original else "str")
    need(row, "value", "num?" if original else "num")
    may(row, "param", "str?")
    for name in (
        "ps_exact_retain",
        "ps_exact_forget",
        "ps_perturb_retain",
        "ps_perturb_forget",
        "ps_similar_retain",
        "ps_similar_forget",
        "confidence_retain",
        "confidence_forget",
        "accuracy_all_facts",
    ):
        may(row, name, "num?")
        share(row, name)  # means of probabilities and of 0/1 scores
    need(row, "forgotten_relationships", "[int]")
    need(row, "forgotten_biographies", "[int]")
    if row.get("retain_train_fact_ids"):
        dict_of(row, "retain_train_fact_ids", {})
        for k in ("relationships", "biographies"):
            need(row["retain_train_fact_ids"], k, "[int]")
    dict_of(row, "risk_curve", {"unlearning_risk": "[score]?", "loss_retain": "[score]?"})


def control_plan_check(config: dict) -> RowProblem | None:
    """The check of a control row against its run's plan (config.json's ``identity``): its ratio is one of the
    run's ratios, its control "original" (θ_o), "none" (a method's uncontrolled run) or one of the run's controls,
    and its method (when it has one: θ_o's row has none) one of the run's methods. A row that fails cannot come from the run.

    Args:
        config: the run's config.json (a dict); its ``identity`` holds ``ratios``, ``controls`` and ``methods``
            (objects keyed by name).

    Returns:
        callable(row) -> the problem in words or None, for rows that passed :func:`control_row`; None when the
        config has no identity to check against.
    """
    identity = identity_of(config)
    if identity is None:
        return None
    ratios, controls, methods = (
        identity.get(k) if isinstance(identity.get(k), dict) else None for k in ("ratios", "controls", "methods")
    )

    def check(row: dict) -> str | None:
        if ratios is not None and row["ratio"] not in ratios:
            return f"field ratio: {show(row['ratio'])} is not a ratio of the run (config.json)"
        if controls is not None and row["control"] not in ("original", "none") and row["control"] not in controls:
            return f"field control: {show(row['control'])} is not a control of the run (config.json)"
        if methods is not None and row.get("method") and row["method"] not in methods:
            return f"field method: {show(row['method'])} is not a method of the run (config.json)"
        return None

    return check


#: the rows of `dukb control` (its row key, row model and plan check), carried to the run layer by its ProtocolInfo
CONTROL_ROWS = RowSchema(key=control_row_key, model=control_row, plan=control_plan_check)

__all__ += ["CONTROL_ROWS", "control_plan_check", "control_row"]
