"""dukb.solver: clingo closure, ground rule instances, minimal deep unlearning sets, recall/accuracy (no torch)."""
