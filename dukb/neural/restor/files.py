"""The files of a restor run directory: probes/facts.jsonl, the per-model JSON documents, results.jsonl (one durable
line per unlearning method, mode and setting) and everything the report is rendered from.

Layout (written by :func:`dukb.neural.restor.pipeline.run_restor`): config.json; corruption/ (corrupted KB,
corruptions.csv, documents.jsonl); clean/ and corrupted/ (models with train.json); probes/ (facts.jsonl, clean.json,
corrupted.json); results.jsonl; then states.csv, summary.csv, report.md and states_<METHOD>.png. Torch-free.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from dukb import InputError
from dukb.kb.csvfile import read_text
from dukb.neural.restor.config import RESTOR_ROWS
from dukb.neural.restor.facts import FactProbe
from dukb.neural.run.files import CONFIG_NAME, RunDir, loads_json, write_bytes_atomic
from dukb.neural.run.files import read_json as _read_json_bounded
from dukb.neural.run.journal import ResultsFile, report_journal

#: Files a run must hold before its report can be rendered (relative to the run directory).
REQUIRED = (CONFIG_NAME, "probes/facts.jsonl", "probes/clean.json", "probes/corrupted.json")


def read_json(path: Path):
    """The JSON document in ``path`` (UTF-8), read bounded (:func:`dukb.neural.run.files.read_json`: a regular file of
    at most :data:`dukb.neural.run.files.RUN_JSON_BYTES` bytes).

    Raises:
        InputError: missing, not a regular file (a FIFO, a device, a folder), too large, not UTF-8 or not JSON
            (file named).
    """
    return _read_json_bounded(path, "run file")


def write_facts(path: Path, facts: Sequence[FactProbe]) -> None:
    """Write probes/facts.jsonl: one :class:`FactProbe` per line, as its fields (atomically, never through a
    symbolic link: :func:`dukb.neural.run.files.write_bytes_atomic`)."""

    write_bytes_atomic(path, "".join(json.dumps(_fact_dict(f)) + "\n" for f in facts).encode("utf-8"))


def _fact_dict(f: FactProbe) -> dict:
    """A probe's fields; ``form`` only when set (a KB with another schema), so the family's file is unchanged."""
    d = asdict(f)
    if d.get("form") is None:
        d.pop("form", None)
    return d


def read_facts(path: Path) -> list[FactProbe]:
    """Read probes/facts.jsonl (:func:`write_facts`), bounded (:func:`dukb.kb.csvfile.read_text`: a regular file of
    at most :data:`dukb.kb.csvfile.MAX_INPUT_BYTES` bytes).

    Raises:
        InputError: missing, not a regular file, too large, not UTF-8, or a line that is not JSON
            (:func:`dukb.neural.run.files.loads_json`: bad syntax, an over-long integer, nested too deeply; file and
            line named).
    """

    out = []
    for n, line in enumerate(read_text(path, "fact probe file").splitlines(), 1):
        d = loads_json(line, path, n) if line.strip() else None
        if d:
            out.append(FactProbe(**{**d, "random": tuple(d["random"])}))
    return out


_rows_key = RESTOR_ROWS.key


class RowsFile:
    """Append-only JSONL of per-method results, one durable line each; a torn last line (from a kill) is dropped on
    open (the behaviour of :class:`dukb.neural.run.journal.ResultsFile`, keyed by method, targeted and setting).

    Args:
        path: results.jsonl of the run.
        repair: the run's owner makes the file a clean journal on open; a worker that joined the run does not.
        config: the run's config.json: a row its plan cannot hold is a damaged line (None: rows checked alone).
    """

    key = staticmethod(_rows_key)  #: a row's key (method, targeted, setting), as the journal's

    def __init__(self, path: Path, repair: bool = True, config: dict | None = None):
        self._f = ResultsFile(path, _rows_key, repair=repair, check=RESTOR_ROWS.check(config))

    def refresh(self) -> int:
        """Read the rows other workers appended since (:meth:`dukb.neural.run.journal.ResultsFile.refresh`)."""
        return self._f.refresh()

    @property
    def rows(self) -> list[dict]:
        """The rows read or appended so far."""
        return self._f.rows

    def done(self, method: str, targeted: bool, setting: dict) -> bool:
        """True when a row for this method, mode and setting exists."""
        return _rows_key({"method": method, "targeted": targeted, "setting": setting}) in self._f.done

    def append(self, row: dict) -> None:
        """Write one row durably."""
        self._f.append(row)


def load_run(run: Path) -> dict:
    """Everything the report needs, read from a run directory (no model, no solver).

    Returns:
        dict: config (config.json), facts (FactProbe list), clean and corrupted (probes/*.json), results (the rows
        of results.jsonl), journal (results.jsonl as read, :class:`dukb.neural.run.journal.Journal`), clean_train and
        corrupt_train (train.json of each model, {} when missing).

    A damaged line of results.jsonl (not JSON, a field the report reads missing or of another type, another number
    of fact rows than probes/facts.jsonl) is reported on stderr (``FILE:LINE``) and left out, the other rows are
    kept (:func:`dukb.neural.run.journal.report_journal`); every line damaged is an error naming the first.

    Raises:
        InputError: a file of :data:`REQUIRED` is missing; a file read is not a regular file (a FIFO, a device, a
            folder), too large, or not JSON (file named).
    """
    for need in REQUIRED:
        if not (run / need).exists():
            raise InputError(f"not a finished restor run: {need} is missing", run)
    config, facts = read_json(RunDir(run).config), read_facts(run / "probes" / "facts.jsonl")
    n = len(facts)
    # a row that is not one (a field missing or of another type) or that judges another number of facts than
    # probes/facts.jsonl holds: FILE:LINE on stderr and in report.md
    journal = report_journal(
        RunDir(run).results,
        RESTOR_ROWS,
        config=config,
        drop=lambda r: (
            None
            if len(r["rows"]) == n
            else f"field rows: {len(r['rows'])} fact rows, but probes/facts.jsonl holds {n} facts"
        ),
    )
    return {
        "config": config,
        "facts": facts,
        "clean": read_json(run / "probes" / "clean.json"),
        "corrupted": read_json(run / "probes" / "corrupted.json"),
        "results": journal.rows,
        "journal": journal,
        "clean_train": read_json(run / "clean" / "train.json") if (run / "clean" / "train.json").exists() else {},
        "corrupt_train": read_json(run / "corrupted" / "train.json")
        if (run / "corrupted" / "train.json").exists()
        else {},
    }
