"""`dukb muse`: MUSE's six-way evaluation on a KB (Shi et al. 2024b, Sec. 2-4): ``config.py`` (MuseConfig, requests,
model metrics), ``run.py`` (MuseProtocol, :func:`run_muse`), ``report.py`` (Table 3 layout, C5/C6 curves, ROC)."""
