"""The one entry point of the gradient methods: a method declares its loss once, one unlearner runs it.

A gradient method (:class:`GradientMethod`) declares

- its forget term, :meth:`GradientMethod.terms`: the loss to minimise on a forget batch and the unlearning risk L_u
  (the forget answers' mean NLL, Wang et al. 2024, Eq. 6). Methods whose forget term is a function of the forget
  batch's logits (and f_ref's) subclass :class:`LossMethod` and declare only :meth:`LossMethod.loss`; methods that
  train on batches of their own (PO's and RT's refusals, DPO's preferred answers) build them in
  :meth:`GradientMethod.prepare` and declare :meth:`GradientMethod.terms`;
- its retain term, :attr:`GradientMethod.reg_kind`: GDR, KLR (MUSE, Shi et al. 2024, Sec. 3) or none, computed by
  :func:`dukb.neural.methods.retain.retain_loss` on QA items or on encoded texts alike.

:meth:`GradientMethod.step` combines them into one step's :class:`~dukb.neural.methods.base.StepTerms`. Both
unlearners call it and nothing else: :meth:`GradientMethod.sweep` (QA items and text corpora: Eval-DU, MUSE, RWKU,
Unlearning with Control; controls and schedules through :func:`~dukb.neural.methods.base.gradient_sweep`) and
:func:`dukb.neural.docs.unlearn_documents` (RESTOR's documents, at the token level).
"""

from __future__ import annotations

import abc

from dukb.neural.families import family_lrs
from dukb.neural.methods.base import Method, StepTerms, UnlearnContext, gradient_sweep, lr_for
from dukb.neural.methods.retain import gdr_loss, retain_loss
from dukb.neural.scoring import forward_logits, sequence_logprob

#: the paper's step grid T (Wu et al. 2025, App. H)
STEPS_GRID = (1, 2, 4, 8, 16)


class GradientMethod(Method):
    """A method that unlearns by gradient steps on a loss it declares once (abstract: :meth:`terms`).

    Attributes:
        reg_kind: the retain term, "gdr", "klr" or None (:func:`dukb.neural.methods.retain.retain_loss`).
        klr_form: KLR's form, "token" (default) or "raw_logits" (MUSE's code; set on a copy of the method).
        lr_kind: the learning-rate kind of the model family's presets (:func:`dukb.neural.families.family_lrs`).
    """

    param = "steps"
    default_grid = STEPS_GRID
    reg_kind: str | None = None
    #: KLR's form (:data:`dukb.neural.methods.retain.KLR_FORMS`): "token" or MUSE's "raw_logits"
    klr_form: str = "token"

    def prepare(self, ctx: UnlearnContext) -> dict:
        """Per-sweep data the forget term needs beyond the forget batch (e.g. refusal batches), computed once per
        sweep; the returned dict is the ``cache`` :meth:`terms` receives. Default: {}."""
        return {}

    @abc.abstractmethod
    def terms(self, state, batch: dict, cache: dict | None = None, level: str = "sequence", model=None) -> tuple:
        """The forget term on a batch.

        Args:
            state: the :class:`dukb.neural.methods.base.WeightState` (θ₀'s reference logits: ``state.ref_logits``).
            batch: the encoded forget batch (input_ids, attention_mask, position_ids, labels [B, L]).
            cache: the sweep's dict (:meth:`prepare`'s, also memoising what depends on a fixed batch alone, e.g.
                f_ref's logits); None: the batch changes between calls (documents), compute everything afresh.
            level: "sequence" (a QA answer or text is one unit) or "token" (RESTOR's token-level averaging).
            model: the module to run (default ``state.model``; a training loop's wrapped model).

        Returns:
            (loss to minimise: scalar tensor, L_u: scalar tensor (nats per token) or None).
        """

    def setting_fields(self, cache: dict) -> dict:
        """Fields every setting of a sweep carries besides steps and lr (NPO: beta and form). Default: {}."""
        return {}

    def step(
        self,
        state,
        batch: dict,
        retain=None,
        *,
        cache: dict | None = None,
        level: str = "sequence",
        reg_weight: float = 1.0,
        reg_kind: str | None | bool = False,
        model=None,
    ) -> StepTerms:
        """One step's terms: the forget term, L_u (detached) and λ · the retain term.

        Args:
            state, batch, cache, level, model: as :meth:`terms`.
            retain: retain data for the retain term: a list of QA items or an encoded batch; None or empty: none.
            reg_weight: λ ≥ 0.
            reg_kind: the retain term's kind; False (default): the method's :attr:`reg_kind` (RESTOR's documents
                pass "gdr", its λ · CE(retain)).

        Returns:
            :class:`dukb.neural.methods.base.StepTerms`.

        Source: Wang et al. 2024 (Unlearning with Control), Eqs. 6-7; Shi et al. 2024b (MUSE), Sec. 3 (GDR/KLR);
        Rezaei et al. (RESTOR), Sec. 3.3.
        """
        loss, risk = self.terms(state, batch, cache, level, model)
        kind = self.reg_kind if reg_kind is False else reg_kind
        r = retain_loss(kind, state, retain, model, klr_form=self.klr_form) if kind else None
        return StepTerms(loss, None if risk is None else risk.detach(), None if r is None else reg_weight * r)

    def sweep(self, ctx: UnlearnContext, grid=None):
        """The unlearner of QA items and text corpora: :func:`~dukb.neural.methods.base.gradient_sweep` over
        :meth:`step`, at :func:`~dukb.neural.methods.base.lr_for`'s rate.

        Args:
            ctx: the unlearning context (model θ₀, forget and retain items, seed, control, schedule, layers, LoRA).
            grid: step counts T (default :attr:`default_grid`); under a control its τ or α.

        Yields:
            ``(setting, predictor)`` per grid value, each from θ₀; setting holds steps, lr and
            :meth:`setting_fields` (θ₀ is restored when the generator ends or is closed).

        Raises:
            InputError: what :func:`~dukb.neural.methods.base.gradient_sweep` refuses (a bad layer range, control or
                schedule).

        Source: Wu et al. 2025, App. H (T steps of AdamW, linear schedule).
        """
        cache = self.prepare(ctx)

        def step_loss(state, forget_batch, retain_items):
            return self.step(state, forget_batch, retain_items, cache=cache, reg_weight=ctx.reg_weight)

        lr = lr_for(ctx, family_lrs(self.lr_kind), self)
        for setting, pred in gradient_sweep(ctx, grid or self.default_grid, lr, step_loss):
            extra = self.setting_fields(cache)
            yield (dict(setting, **extra) if extra else setting), pred


class LossMethod(GradientMethod):
    """A gradient method whose forget term is a function of the forget batch's logits and, where
    :attr:`needs_reference`, f_ref's (abstract: :meth:`loss`). GA, KL, NPO and SimNPO."""

    @abc.abstractmethod
    def loss(self, logits, ref_logits, batch: dict, level: str = "sequence"):
        """The forget term to minimise.

        Args:
            logits: [B, L, V] of the model being unlearned; ref_logits: [B, L, V] of f_ref (None unless
                :attr:`needs_reference`; a method whose :meth:`reference` keeps less reads that in its own
                :meth:`loss_and_risk`, while ``loss`` keeps this signature); batch: the (laid out) forget batch,
                labels [B, L] with -100 where no loss.
            level: "sequence" or "token" (:meth:`GradientMethod.terms`).

        Returns:
            Scalar tensor.
        """

    def layout(self, batch: dict, cache: dict) -> dict:
        """The forget batch as the loss reads it (default: unchanged; NPO under Eval-DU's schedule: EOS-padded)."""
        return batch

    def risk(self, logits, batch: dict):
        """L_u: the mean NLL of the batch's labelled tokens (:func:`dukb.neural.methods.retain.gdr_loss`; the
        sequence-level methods override it with :func:`sequence_risk`, the same quantity from their answer sums)."""

        return gdr_loss(logits, batch["labels"])

    def reference(self, ref_logits, batch: dict, level: str):
        """What :meth:`loss_and_risk` needs of f_ref, kept for the sweep instead of its logits (default: the
        logits [B, L, V]; NPO's sequence form: the answers' summed log-probabilities [B], far smaller)."""
        return ref_logits

    def loss_and_risk(self, logits, ref, batch: dict, level: str) -> tuple:
        """(:meth:`loss`, :meth:`risk`) from one forward pass's logits and :meth:`reference`'s ``ref``; a method
        whose loss and risk share a reduction of the logits (the answers' summed log-probabilities of NPO's
        sequence form and SimNPO) overrides it to compute that once, with the same values."""
        return self.loss(logits, ref, batch, level), self.risk(logits, batch)

    def terms(self, state, batch, cache=None, level="sequence", model=None):
        """:meth:`loss_and_risk` on one forward pass; the laid-out batch and f_ref's :meth:`reference` are memoised
        in ``cache`` for the batch object (and level) they were computed from (once per sweep: its forget batch and
        θ₀ are fixed; another batch object is laid out and referenced afresh)."""

        memo = {} if cache is None else cache
        if memo.get("source") is not batch or memo.get("level") != level:  # one batch object per sweep: once
            memo["source"], memo["level"], memo["batch"] = batch, level, self.layout(batch, memo)
            if self.needs_reference:
                memo["ref"] = self.reference(state.ref_logits(memo["batch"]).detach(), memo["batch"], level)
        b = memo["batch"]
        logits = forward_logits(state.model if model is None else model, b)
        return self.loss_and_risk(logits, memo.get("ref"), b, level)


def sequence_risk(logits, batch: dict):
    """L_u from summed answer log-probabilities: −Σ_b log p(y_b|x_b) / Σ_b |y_b| (nats per token; 0 for a batch
    without labelled tokens), what NPO and SimNPO report as their unlearning risk.

    Args:
        logits: [B, L, V]; batch: with labels [B, L] (-100 where no loss).

    Returns:
        Scalar tensor.

    Source: Wang et al. 2024 (Unlearning with Control), Eq. 6 (the unlearning risk).
    """

    s, n = sequence_logprob(logits, batch["labels"])
    return -s.sum() / n.sum().clamp(min=1)


__all__ = ["GradientMethod", "LossMethod", "STEPS_GRID", "sequence_risk"]
