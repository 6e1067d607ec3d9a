"""`dukb rwku`: RWKU's evaluation on a KB (Jin et al. 2024, Sec. 3-4): ``config.py`` (RwkuConfig, methods, row key),
``run.py`` (RwkuProtocol, :func:`run_rwku`), ``report.py`` (RWKU's Table 1 layout and figures)."""
