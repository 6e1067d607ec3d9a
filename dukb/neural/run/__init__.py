"""The run layer, shared by every protocol (each `dukb` command that writes a run directory): a run directory's
identity, its lock, its log, its files, its results journal, its work units, its provenance and its probe cache. It
knows no protocol: each protocol declares its row model, row key and plan check
(:class:`dukb.neural.protocols.ProtocolInfo`) and hands them to this layer as arguments.

Modules (import from them; this package re-exports nothing):

- :mod:`~dukb.neural.run.files`: the file names of a run directory (:class:`~dukb.neural.run.files.RunDir`), writes
  that never follow a link, atomic writes, bounded JSON reads;
- :mod:`~dukb.neural.run.identity`: the run identity (settings that change rows) and its comparison on resume;
- :mod:`~dukb.neural.run.lock`: one writer per run (``flock``), joining workers, bounded lock waits;
- :mod:`~dukb.neural.run.log`: library warnings into RUN_DIR/run.log;
- :mod:`~dukb.neural.run.journal`: results.jsonl (damaged lines, resumes) and
  :class:`~dukb.neural.run.journal.ResultsFile`;
- :mod:`~dukb.neural.run.rows`: the generic helpers of a protocol's row check;
- :mod:`~dukb.neural.run.units`: work-unit claims, the plan of units, shard merging;
- :mod:`~dukb.neural.run.provenance`: versions, device, threads, worker id;
- :mod:`~dukb.neural.run.probecache`: the baseline probe cache;
- :mod:`~dukb.neural.run.migrate`: the run directory's schema version and its one migration.

Source: dukb (the run directory of every protocol).
"""
