"""Closed-loop deep unlearning (CL-DU): dukb's own method, with the solver in the loop.

The paper's methods unlearn the target and hope its supporting facts go too; the deep-unlearning-aware presets
unlearn a fixed minimal deep unlearning set chosen before training. CL-DU instead watches what the model still
knows and asks the solver, after every round, which facts still need to go::

    input:  θ₀; target t; its minimal deep unlearning sets M (Wu et al. 2025, Def. 3); the cone facts C (the KB
            facts that can take part in deriving t); the retain-train pool R; steps per round S; rounds R_max
    known ← {f ∈ C : probe(θ₀, f)}
    for r = 1 .. R_max:
        if t ∉ Ω(known, rules): stop                  # the solver: t is no longer derivable from what θ knows
        U ← argmin_{U ∈ M} (|U ∩ known|, |U|)          # facts already forgotten cost nothing
        F ← U ∩ known                                  # unlearn only the still-known facts of that set
        N ← {g ∈ R \\ C : g shares a person with F}     # neighbours: where collateral damage happens
        θ ← S AdamW steps on L_CL = L_GA(F) + λ · L_GDR(N, else R \\ C)
        known ← {f ∈ C : probe(θ, f)}
    return θ

When it stops, the facts the model no longer knows form a deep unlearning set of t, so its recall (Eq. 1) is 1.
The grid is R_max: one trajectory is run and a model is reported at each grid value (the trajectory up to round r
does not depend on R_max, so this equals separate runs). Probing the cone facts is cheap: a target's cone holds
tens of facts, not the KB.

Ablations (registered variants): ``cl_du_fixed`` (no closed loop: the set chosen at the start is trained for
S · R_max steps, never re-probed, never stopped), ``cl_du_noselect`` (the set is chosen once; each round unlearns its
still-known facts and the loop still stops), ``cl_du_noneighbour`` (the retain batch is drawn from all of R \\ C).
Variants judged on held-out forms (bench/RESULTS.md): ``cl_du_multiform`` (the loop asks and unlearns qa,
paraphrase and cloze), ``cl_du_multiform_retain`` (and retains the neighbours in those forms), ``cl_du_retainforms``
(qa in the loop, the neighbours retained in the three forms), ``cl_du_strict`` (a fact stays known until its
answer is improbable) and ``cl_du_npo`` (NPO's sequence-form forget term instead of GA's), and those two with the
retain batches of ``cl_du_noneighbour`` (``cl_du_noneighbour_strict``, ``cl_du_noneighbour_npo``).

Source: dukb (this module); the losses are GA (Jang et al. 2023) or NPO (Zhang et al. 2024, Eq. 3) and GDR (Shi et
al. 2024, MUSE Sec. 3); the stopping rule is Wu et al. 2025, Definition 2.
"""

from __future__ import annotations

import math
import random

from dukb import InputError
from dukb.neural.data import encode_qa
from dukb.neural.families import family_lrs
from dukb.neural.methods.base import Method, UnlearnContext, WeightState, lr_for, trainable_layers
from dukb.neural.methods.ga import ga_loss
from dukb.neural.methods.npo import npo_loss
from dukb.neural.methods.retain import gdr_loss
from dukb.neural.probe import probe
from dukb.neural.scoring import forward_logits, sequence_logprob
from dukb.neural.train import TrainConfig, train_loop
from dukb.solver.cone import cone_of
from dukb.solver.mdus import is_deep_unlearning_set

#: optimiser steps per round
STEPS_PER_ROUND = 2
#: CL-DU's learning rates per model family (:data:`dukb.neural.families.FAMILIES`): GA's except the tiny model's
#: 1e-4. Chosen on a development KB (``dukb generate --people 100 --seed 1``, 22 targets drawn by the run; lr 1e-3,
#: 5e-4, 2e-4, 1e-4, recall and accuracy on the qa form; bench/RESULTS.md) before any EDU-RELAT run: with the tiny
#: model finetuned at lr 1e-3, GA's 1e-3 costs accuracy 0.46 at recall 1 where 1e-4 keeps 0.93.
CL_LR = family_lrs("cl")
#: ``cl_du_strict``: a fact stays known in the loop while its gold answer's mean log-probability per token is at
#: least log 0.1 (a geometric-mean token probability of 10%), fixed before any run
STRICT_LOGPROB = -2.302585
#: the forms ``cl_du_multiform`` asks and unlearns: the paper's question and two other phrasings of it
MULTIFORM_FORMS = ("qa", "paraphrase", "cloze")
ROUNDS_GRID = (1, 2, 3, 4, 6, 8, 12, 16)


def closed_loop_loss(forget_logits, forget_labels, retain_logits=None, retain_labels=None, weight: float = 1.0):
    """L_CL = L_GA(forget) + λ · L_GDR(retain) on given logits, GA's and GDR's own loss functions (the value of
    ``ga_gdr``'s :meth:`~dukb.neural.methods.gradient.GradientMethod.step`; each round runs the retain forward pass
    first, so models with dropout keep the numbers of earlier dukb versions): the negated answer NLL of the still-known facts of the chosen set
    plus λ times the answer NLL of the neighbour retain facts (no retain term when ``retain_logits`` is None).

    Args:
        forget_logits: [B, L, V]; forget_labels: [B, L] with -100 outside answers.
        retain_logits: [B', L', V] or None; retain_labels: [B', L'].
        weight: λ ≥ 0.

    Returns:
        Scalar tensor (nats per token).

    Source: Jang et al. 2023 (GA); Shi et al. 2024, Sec. 3 (GDR).
    """
    loss = ga_loss(forget_logits, forget_labels)
    if retain_logits is not None:
        loss = loss + weight * gdr_loss(retain_logits, retain_labels)
    return loss


def choose_set(sets, known: set[int], fixed=None) -> list[int]:
    """The minimal set with the fewest still-known facts (then the smaller set, then the smaller ids), or ``fixed``.

    Args:
        sets: minimal deep unlearning sets (collections of fact_ids).
        known: relationship fact_ids the model still knows.
        fixed: a set chosen earlier (ablation without re-selection), returned as is.
    """
    if fixed is not None:
        return list(fixed)
    return list(min((sorted(s) for s in sets), key=lambda s: (len(known.intersection(s)), len(s), s)))


def neighbours(kb, fact_ids, pool, cone_ids: set[int]):
    """Retain-train items about a person of the given relationship facts, outside the cone.

    Args:
        kb: the KB; fact_ids: relationship fact_ids being forgotten; pool: retain-train QA items;
        cone_ids: relationship fact_ids of the target's cone (never retained).

    Returns:
        The items of ``pool`` whose fact names a person of ``fact_ids`` (subject or object for relationships,
        subject for biographies).
    """
    people = set()
    for f in fact_ids:
        fact = kb.relationship(f)
        people.update((fact.subject, fact.object))
    bios = {b.fact_id: b.subject for b in kb.biographies}
    out = []
    for it in pool:
        if it.fact_kind == "relationship":
            if it.fact_id in cone_ids:
                continue
            fact = kb.relationship(it.fact_id)
            if fact.subject in people or fact.object in people:
                out.append(it)
        elif bios.get(it.fact_id) in people:
            out.append(it)
    return out


class ClosedLoopDeepUnlearning(Method):
    """CL-DU and its ablations (see the module docstring).

    Args:
        variant: None (the method); the ablations "fixed", "noselect", "noneighbour"; "multiform" (asks and
            unlearns :data:`MULTIFORM_FORMS`), "multiform_retain" (and retains the neighbours in them),
            "retainforms" (qa in the loop and the forget data, the neighbours retained in :data:`MULTIFORM_FORMS`),
            "strict" (a fact stays known until its answer is improbable, :data:`STRICT_LOGPROB`), "npo" (NPO's
            sequence-form forget term, Zhang et al. 2024, Eq. 3, instead of GA's); "noneighbour_strict" and
            "noneighbour_npo" (each with the retain batches of "noneighbour").
        steps_per_round: S.
        forms: the forms the loop asks and unlearns (default qa; MULTIFORM_FORMS for the multiform variants).
        min_logprob: the strict variant's threshold (natural log, mean per answer token).

    Raises:
        ValueError: an unknown variant.
    """

    param = "rounds"
    lr_kind = "cl"  # its default rate: :func:`dukb.neural.families.family_lrs`
    default_grid = ROUNDS_GRID
    source = "dukb (closed loop with the solver); GA + GDR losses"
    uses_retain = True
    retain_outside_cone = True

    def __init__(
        self,
        variant: str | None = None,
        steps_per_round: int = STEPS_PER_ROUND,
        forms: tuple[str, ...] = ("qa",),
        min_logprob: float | None = None,
    ):
        if variant not in (
            None,
            "fixed",
            "noselect",
            "noneighbour",
            "multiform",
            "multiform_retain",
            "retainforms",
            "strict",
            "npo",
            "noneighbour_strict",
            "noneighbour_npo",
        ):
            raise ValueError(f"unknown CL-DU variant {variant!r}")
        if variant in ("multiform", "multiform_retain") and forms == ("qa",):
            forms = MULTIFORM_FORMS
        #: the forms of the retain batches' neighbour facts: qa alone, or also those of MULTIFORM_FORMS
        #: (multiform_retain, whose forget data ask them too; retainforms, whose forget data and loop ask qa alone)
        self.retain_forms = MULTIFORM_FORMS if variant in ("multiform_retain", "retainforms") else ("qa",)
        # every retain form is a form the method sees (never scored as held-out), whatever ``forms`` is
        self.trained_forms = self.retain_forms if self.retain_forms != ("qa",) else ()
        #: retain batches from the neighbours of the forget facts (False: from the whole retain-train pool)
        self.neighbour = variant not in ("noneighbour", "noneighbour_strict", "noneighbour_npo")
        #: the forget term: "ga" or NPO's sequence form ("npo")
        self.forget_term = "npo" if variant in ("npo", "noneighbour_npo") else "ga"
        if self.forget_term == "npo":
            self.source = "dukb (closed loop with the solver); NPO (Zhang et al. 2024, Eq. 3) + GDR losses"
        if variant in ("strict", "noneighbour_strict") and min_logprob is None:
            min_logprob = STRICT_LOGPROB
        #: with a value, the in-loop probe also counts a fact as still known while its gold answer keeps a
        #: geometric-mean token probability ≥ this, even when greedy decoding misses it; a per-method option of the
        #: strict variants (``cl_du_strict:min_prob=0.05``), in (0, 1)
        self.min_prob = None if min_logprob is None else math.exp(min_logprob)
        self._logprob = min_logprob  # the threshold as given, used exactly while min_prob is not reset
        #: per-method options (``cl_du:reg_weight=2:retain_batch=32``): λ of the retain term and the retain items
        #: per step, overriding the run's (:class:`UnlearnContext` ``reg_weight``, ``retain_batch_size``); None: the
        #: run's. The retain pool, and so the facts left out of accuracy, stay the same.
        self.reg_weight: float | None = None
        self.retain_batch: float | None = None
        self.options = ("reg_weight", "retain_batch") + (("min_prob",) if self.min_prob is not None else ())
        self.variant = variant
        self.steps_per_round = steps_per_round
        #: the forms of the in-loop probe and of the forget data (a fact is still known when any of them elicits it)
        self.queried_forms = tuple(forms)
        self.name = "cl_du" if variant is None else f"cl_du_{variant}"
        self.summary = {
            None: "closed-loop deep unlearning: unlearn the still-known facts of the cheapest minimal "
            "set, re-probe, stop once the solver finds the target underivable",
            "fixed": "CL-DU ablation: no closed loop (fixed steps on the initially cheapest set)",
            "noselect": "CL-DU ablation: the set is chosen once, not re-selected each round",
            "noneighbour": "CL-DU ablation: retain batches from all retain-train facts, not neighbours",
            "multiform": "CL-DU querying and unlearning several forms ("
            + ", ".join(self.queried_forms)
            + "): a fact is still known when any of them elicits it",
            "multiform_retain": "CL-DU querying, unlearning and retaining several forms ("
            + ", ".join(self.queried_forms)
            + "): multiform whose retain batches "
            "also ask the neighbour facts in those forms",
            "retainforms": "CL-DU (qa in the loop and the forget data) whose retain batches ask the "
            "neighbour facts in " + ", ".join(self.retain_forms),
            "npo": "CL-DU whose forget term is NPO's (sequence form, beta 0.1) instead of GA's",
            "noneighbour_strict": "CL-DU with retain batches from all retain-train facts whose loop "
            "counts a fact as known until greedy decoding misses it and its answer's "
            f"mean token log-prob is below {min_logprob or 0:g}",
            "noneighbour_npo": "CL-DU with NPO's forget term (sequence form, beta 0.1) and retain batches "
            "from all retain-train facts",
            "strict": "CL-DU whose loop counts a fact as known until greedy decoding misses it and its "
            f"answer's mean token log-prob is below {min_logprob or 0:g}",
        }[variant]

    @property
    def min_logprob(self) -> float | None:
        """The strict threshold as a mean log-probability per answer token (natural log; None: not strict)."""
        if self.min_prob is None:
            return None
        return self._logprob if self.min_prob == math.exp(self._logprob) else math.log(self.min_prob)

    def with_options(self, values: dict) -> Method:
        """:meth:`Method.with_options`; ``min_prob`` must lie in (0, 1) and ``retain_batch`` be a whole number.

        Raises:
            InputError: as :meth:`Method.with_options`, ``min_prob`` ≥ 1, or a fractional ``retain_batch``.
        """
        out = super().with_options(values)  # unknown options and non-numbers are refused there first
        if values.get("min_prob", 0) >= 1:
            raise InputError(
                f"{self.name}: option min_prob must be below 1 (a geometric-mean token probability), "
                f"got {values['min_prob']!r}"
            )
        rb = values.get("retain_batch")
        if rb is not None and rb != int(rb):
            raise InputError(f"{self.name}: option retain_batch must be a whole number of items, got {rb!r}")
        return out

    def sweep(self, ctx: UnlearnContext, grid=None):
        """Yield ``({"rounds": R, "lr", "steps_per_round", "trace": {"rounds_run", "stopped", "trained_on"}},
        predictor)`` at each R of the grid (ascending), from one trajectory starting at θ₀. The trace is what this
        target's trajectory did (rounds actually run, whether the solver stopped it, the fact_ids it unlearned); the
        protocol moves it out of the setting into the row's ``trace``, so settings stay equal across targets.

        Raises:
            ValueError: the context lacks the symbolic plan (kb, closure, target, sets, items).
        """

        if ctx.closure is None or ctx.sets is None or ctx.target is None or ctx.items is None:
            raise ValueError("closed-loop deep unlearning needs the plan: kb, closure, target, sets and items")
        grid = sorted(int(g) for g in (grid or self.default_grid))
        closure = ctx.closure
        atom = closure.atom_of_fact(ctx.target)
        cone = cone_of(closure, [atom])
        cone_ids = {closure.fact_ids[cone.atoms[a]] for a in cone.kb}
        by_id = self._queried_items(ctx)
        cone_items = [it for f in sorted(cone_ids) for it in by_id[f]]
        pool = self._retain_pool(ctx, cone_ids)
        lr = lr_for(ctx, CL_LR, self)
        rng = random.Random(ctx.seed)
        state = WeightState(ctx.lm, ctx.lora, ctx.seed)
        cfg = TrainConfig(epochs=1, lr=lr, schedule="constant", seed=ctx.seed)
        trained: list[int] = []

        def still_known() -> set[int]:
            strict = self.min_logprob is not None
            df = probe(state.predictor(), cone_items, rouge=False, logprob=strict)
            if strict:
                return {
                    int(f) for f, k, lp in zip(df["fact_id"], df["known"], df["logprob"]) if k or lp >= self.min_logprob
                }
            return {int(f) for f, k in zip(df["fact_id"], df["known"]) if k}

        try:
            known = still_known()
            fixed = choose_set(ctx.sets, known) if self.variant in ("fixed", "noselect") else None
            stopped, r = False, 0
            for target_rounds in grid:
                while r < target_rounds and not stopped:
                    closed = self.variant != "fixed"
                    if closed and is_deep_unlearning_set(closure, [atom], cone_ids - known):
                        stopped = True
                        break
                    chosen = choose_set(ctx.sets, known, fixed)
                    forget = [it for f in chosen if f in known or not closed for it in by_id[f]]
                    if not forget:  # nothing left to unlearn in the set (the solver check above decides)
                        stopped = True
                        break
                    self._train_round(ctx, state, cfg, forget, pool, cone_ids, rng, r)
                    trained = sorted(set(trained) | {it.fact_id for it in forget})
                    r += 1
                    if closed:
                        known = still_known()
                pred = state.predictor()
                pred.meta["weights_version"] = r  # rounds run: equal at two settings = the same weights
                yield (
                    {
                        "rounds": target_rounds,
                        "lr": lr,
                        "steps_per_round": self.steps_per_round,
                        "trace": {"rounds_run": r, "stopped": stopped, "trained_on": list(trained)},
                    },
                    pred,
                )
        finally:
            state.close()

    def _queried_items(self, ctx: UnlearnContext) -> dict[int, list]:
        """The items the loop queries and unlearns, by fact id: relationship facts' items in the queried forms.

        Args:
            ctx: the unlearning context (``ctx.items``: every item of every form).

        Returns:
            fact id -> its items in :attr:`queried_forms`.

        Raises:
            ValueError: ``ctx.items`` lacks a queried form.
        """
        by_id: dict[int, list] = {}
        for it in ctx.items:
            if it.fact_kind == "relationship" and it.kind in self.queried_forms:
                by_id.setdefault(it.fact_id, []).append(it)
        lacking = sorted({k for k in self.queried_forms} - {it.kind for its in by_id.values() for it in its})
        if lacking:
            raise ValueError(f"closed-loop deep unlearning queries {', '.join(lacking)}, which ctx.items lacks")
        return by_id

    def _retain_pool(self, ctx: UnlearnContext, cone_ids: set[int]) -> list:
        """The retain items the loop samples from: ``ctx.retain`` without the relationship facts of the target's
        cone, plus those facts' items in the other :attr:`retain_forms` (forms the model sees).

        Args:
            ctx: the unlearning context (``retain``, ``items``).
            cone_ids: fact ids of the target's cone (:func:`dukb.solver.cone.cone_of`).

        Returns:
            The list of QA items.
        """
        pool = [it for it in ctx.retain if not (it.fact_kind == "relationship" and it.fact_id in cone_ids)]
        if self.retain_forms != ("qa",):  # the retain facts' items in the other retain forms (forms it sees)
            keep = {(it.fact_kind, it.fact_id) for it in pool}
            pool = pool + [
                it
                for it in ctx.items
                if it.kind != "qa" and it.kind in self.retain_forms and (it.fact_kind, it.fact_id) in keep
            ]
        return pool

    def _train_round(
        self,
        ctx: UnlearnContext,
        state: WeightState,
        cfg,
        forget: list,
        pool: list,
        cone_ids: set[int],
        rng: random.Random,
        r: int,
    ) -> None:
        """One round of the loop: :attr:`steps_per_round` steps on the forget batch with sampled retain batches
        (the forget items' neighbours when :attr:`neighbour`, else the pool), updating ``state.model`` in place.

        Args:
            ctx: the unlearning context (model, layers, seed, regularisation weight, retain batch size).
            state: the :class:`WeightState` trained.
            cfg: the round's :class:`dukb.neural.train.TrainConfig` (one epoch, constant learning rate).
            forget: the items unlearned this round.
            pool: the retain pool (:meth:`_retain_pool`).
            cone_ids: fact ids of the target's cone (left out of the neighbours).
            rng: the loop's retain-sampling generator (advanced in place).
            r: the round number (0-based; added to the torch seed).

        Source: the forget term is GA (Jang et al. 2023) or NPO (Zhang et al. 2024, Eq. 3), plus λ times GDR's
        retain term (Shi et al. 2024, MUSE Sec. 3).
        """

        lam = ctx.reg_weight if self.reg_weight is None else self.reg_weight
        n_retain = ctx.retain_batch_size if self.retain_batch is None else int(self.retain_batch)
        near = [] if not self.neighbour else neighbours(ctx.kb, [it.fact_id for it in forget], pool, cone_ids)
        retain_src = near or pool
        fb = encode_qa(ctx.lm.tokenizer, ctx.lm.tags, forget, ctx.lm.device)
        # cl_du_npo: f_ref's summed answer log-probabilities of this round's forget batch
        ref_sums = (
            sequence_logprob(state.ref_logits(fb), fb["labels"])[0].detach() if self.forget_term == "npo" else None
        )
        batches = []
        for _ in range(self.steps_per_round):
            rb = rng.sample(retain_src, min(n_retain, len(retain_src))) if retain_src else []
            batches.append([encode_qa(ctx.lm.tokenizer, ctx.lm.tags, rb, ctx.lm.device) if rb else None])

        def loss_fn(model, rbatch, fb=fb, ref_sums=ref_sums):
            rl = forward_logits(model, rbatch) if rbatch is not None else None
            if ref_sums is not None:  # NPO's forget term + λ · GDR
                loss = npo_loss(sequence_logprob(forward_logits(model, fb), fb["labels"])[0], ref_sums)
                return loss if rl is None else loss + lam * gdr_loss(rl, rbatch["labels"])
            return closed_loop_loss(
                forward_logits(model, fb), fb["labels"], rl, None if rbatch is None else rbatch["labels"], lam
            )

        with trainable_layers(state.model, ctx.layers) as params:  # partial-layer finetuning
            train_loop(
                state.model,
                params,
                cfg,
                lambda _e, b=batches: b,
                loss_fn,
                total_steps=self.steps_per_round,
                torch_seed=ctx.seed + r,
            )


__all__ = [
    "CL_LR",
    "ClosedLoopDeepUnlearning",
    "MULTIFORM_FORMS",
    "ROUNDS_GRID",
    "STEPS_PER_ROUND",
    "choose_set",
    "closed_loop_loss",
    "neighbours",
]
