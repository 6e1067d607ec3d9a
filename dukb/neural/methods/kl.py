"""KL-divergence unlearning (KL; RESTOR, Rezaei et al., Sec. 3.3, after Kumar et al. 2022 and Chen & Yang 2023), and
KL_GDR / KL_KLR with a retain regulariser.

Maximise the divergence between the model being unlearned, P_θ, and the frozen model it starts from, P_c (RESTOR:
the corrupted model), on the forget data. The paper prints

    L_KL(x, θ) = (1/T) Σ_i KL(P_θ(· | x_<i) ‖ P_c(· | x_<i)),   θ* = argmin_θ −E_{x ∈ D_f}[L_KL(x, θ)] + λ L_retain,

but the exact KL has a zero gradient at θ = c (Σ_v ∂P_θ(v) (log P_θ(v) − log P_c(v)) + Σ_v ∂P_θ(v) = 0 there), so
unlearning that starts from P_c, as it always does, would never move. RESTOR's released code
(github.com/k1rezaei/restor, unlearning/unlearn/KL.py, ``kl_loss(p, q) = -(p * log q).sum(-1).mean()``) maximises
the cross-entropy instead,

    L_KL^code(x, θ) = −(1/T) Σ_i Σ_v P_θ(v | x_<i) log P_c(v | x_<i) = (1/T) Σ_i [KL(P_θ ‖ P_c) + H(P_θ)],

whose gradient at θ = c is that of the entropy, not zero. :func:`kl_loss` computes either (``entropy=True``, the
default, is the code's); the registered methods use the code's form. The code weights the *forget* term,
``loss = −γ L_KL + CE_retain`` with γ = 0.2 (the paper's "λ = 0.2"); with Adam, which is invariant to the scale of
the loss, that equals ``−L_KL + (1/γ) CE_retain``, so RESTOR's KL corresponds to λ = 5 in dukb's
``forget + λ retain`` convention.

On QA items (``dukb evaluate`` / ``dukb unlearn``) the sum runs over the answer tokens and P_c is the finetuned
model θ₀; on documents (``dukb restor``, :func:`dukb.neural.docs.unlearn_documents`) it runs over every token and
P_c is the corrupted model. Swept over the number of optimisation steps T like GA (same learning rates); RESTOR's
own setting is 2 epochs, lr 1.5e-5 with a cross-entropy retain term (App. C.2, "KL+FT").
"""

from __future__ import annotations

import torch  # noqa: TID253 (a model module: reached only through a command's lazy import)

from dukb.neural.families import family_lrs
from dukb.neural.methods.gradient import STEPS_GRID, LossMethod
from dukb.neural.methods.retain import REG_SUMMARY
from dukb.neural.scoring import shifted

#: learning rates by model family (:data:`dukb.neural.families.FAMILIES`; as GA's).
KL_LR = family_lrs("kl")


def kl_loss(logits, ref_logits, labels, entropy: bool = True):
    """The KL forget term: mean over labelled positions i of

        entropy=True  (RESTOR's code):  −Σ_v P_θ(v|x_<i) log P_c(v|x_<i) = KL(P_θ ‖ P_c) + H(P_θ);
        entropy=False (RESTOR's Eq.):    Σ_v P_θ(v|x_<i) (log P_θ(v|x_<i) − log P_c(v|x_<i)) = KL(P_θ ‖ P_c).

    Position t of the logits predicts token t+1, so the positions averaged are those whose *next* token is labelled
    (the alignment of :func:`dukb.neural.scoring.shifted`). The method *maximises* it (minimises its negative).

    Args:
        logits: [B, L, V] of the model being unlearned (P_θ).
        ref_logits: [B, L, V] of the frozen reference (P_c); no gradient flows into it.
        labels: [B, L] long, -100 where no loss.
        entropy: add H(P_θ) (the released code's cross-entropy form, default) or not (the exact KL).

    Returns:
        Scalar tensor (nats per token), >= 0. With ``entropy=False`` it is zero when the two distributions agree;
        with ``entropy=True`` it then equals the mean entropy of P_c.

    Source: Rezaei et al., RESTOR, Sec. 3.3 (KL Divergence); github.com/k1rezaei/restor unlearning/unlearn/KL.py.
    """

    lg, _, mask = shifted(logits, labels)
    rg = ref_logits[:, :-1, :].detach()
    logp = torch.log_softmax(lg.float(), -1)
    logq = torch.log_softmax(rg.float(), -1)
    p = logp.exp()
    per_pos = -(p * logq).sum(-1) if entropy else (p * (logp - logq)).sum(-1)
    return (per_pos * mask).sum() / mask.sum().clamp(min=1)


class KLDivergence(LossMethod):
    """KL unlearning on the forget QA (the released code's cross-entropy form of :func:`kl_loss`), optionally with a
    retain regulariser ("gdr" or "klr")."""

    lr_kind = "kl"  # its default rate: :func:`dukb.neural.families.family_lrs`
    source = "Rezaei et al. (RESTOR), Sec. 3.3"

    def __init__(self, reg: str | None = None):
        self.reg_kind = reg
        self.name = "kl" if reg is None else f"kl_{reg}"
        self.summary = "maximise the divergence from f_ref on the forget QA" + REG_SUMMARY.get(reg, "")
        self.document_level = reg is None
        self.uses_retain = reg is not None

    @property
    def needs_reference(self) -> bool:
        """KL compares with the reference P_c."""
        return True

    def loss(self, logits, ref_logits, batch, level="sequence"):
        """−:func:`kl_loss` (the code's cross-entropy form), the mean over labelled tokens at either level."""
        return -kl_loss(logits, ref_logits, batch["labels"])


__all__ = ["KLDivergence", "KL_LR", "STEPS_GRID", "kl_loss"]
