"""`dukb control`: the Unlearning-with-Control framework on a KB (Wang et al. 2024, Sec. 4-5, App. C): ``config.py``
(ControlConfig, splits, grids, row key), ``run.py`` (ControlProtocol, :func:`run_control`), ``report.py``."""
