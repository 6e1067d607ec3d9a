"""dukb.neural: models, finetuning, unlearning methods and probing."""
