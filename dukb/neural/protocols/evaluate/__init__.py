"""`dukb evaluate`: the deep-unlearning protocol of Wu et al. 2025 (Eval-DU), Sec. 4 and App. C/H: ``config.py``
(EvaluateConfig, the run identity), ``run.py`` (EvaluateProtocol, :func:`evaluate`), ``report.py`` (summary.csv,
report.md, accuracy_recall.png)."""
