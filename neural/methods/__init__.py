"""Unlearning methods, one small module each, with the loss as a plain function.

- :mod:`.ga`: gradient ascent (Jang et al. 2023);
- :mod:`.npo`: negative preference optimisation (Zhang et al. 2024);
- :mod:`.retain`: the GDR and KLR retain regularisers of MUSE (Shi et al. 2024), combinable with GA and NPO;
- :mod:`.kl`: KL unlearning as in RESTOR (maximise the divergence from the corrupted model on the forget documents);
- :mod:`.tv`: task vector negation (Ilharco et al. 2023);
- :mod:`.whp`: Who's Harry Potter logit steering (Eldan & Russinovich 2023; Wu et al. 2025 Eq. 3).

Every method implements :class:`dukb.neural.methods.base.Method`: ``sweep(ctx, grid)`` yields ``(setting,
predictor)`` pairs, each starting from the finetuned weights, without writing checkpoints to disk.
"""

from dukb.neural.methods.base import METHODS, Method, UnlearnContext, get_method, parse_grid

__all__ = ["METHODS", "Method", "UnlearnContext", "get_method", "parse_grid"]
