"""Probe files: a probe set (:class:`dukb.kb.probes.Probe`) written as JSON lines or CSV and read back strictly.

Columns (:data:`PROBE_COLUMNS`): kind, fact_kind, fact_id, question, answer, match; and ``aliases`` (a JSON list of
the answer's further surface forms, :mod:`dukb.kb.aliases`) when some probe has any (a KB with an aliases.csv).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from pathlib import Path

from dukb import InputError
from dukb.kb.csvfile import MAX_INT_DIGITS, parse_csv, parse_int, read_text
from dukb.kb.io import atomic_output
from dukb.kb.judge import MATCH_SUBSTRING
from dukb.kb.probes import PROBE_COLUMNS, Probe

#: The optional column of the answer's aliases (a JSON list), written when some probe has any.
ALIASES_COLUMN = "aliases"


def probes_text(probes: Iterable[Probe], fmt: str = "jsonl") -> str:
    """Render probes as JSON lines or CSV (columns :data:`PROBE_COLUMNS`).

    Raises:
        InputError: unknown format.

    Example:
        >>> p = Probe("qa", "relationship", 0, "Who is George Hale to Martha Hale?", "husband")
        >>> print(probes_text([p]), end="")
        {"kind": "qa", "fact_kind": "relationship", "fact_id": 0, "question": "Who is George Hale to Martha Hale?",
         "answer": "husband", "match": "substring"}
        >>> print(probes_text([p], "csv"), end="")
        kind,fact_kind,fact_id,question,answer,match
        qa,relationship,0,Who is George Hale to Martha Hale?,husband,substring
    """
    if fmt == "jsonl":
        return "".join(json.dumps(p.to_dict(), ensure_ascii=False) + "\n" for p in probes)
    if fmt == "csv":
        probes = list(probes)
        with_aliases = any(p.aliases for p in probes)
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(PROBE_COLUMNS) + [ALIASES_COLUMN] * with_aliases, lineterminator="\n")
        w.writeheader()
        for p in probes:
            d = p.to_dict()
            if with_aliases:
                d[ALIASES_COLUMN] = json.dumps(list(p.aliases), ensure_ascii=False)
            w.writerow(d)
        return buf.getvalue()
    raise InputError(f"unknown probe format {fmt!r} (jsonl or csv)")


def write_probes(probes: Iterable[Probe], path: str | Path, fmt: str = "jsonl") -> Path:
    """Write probes to a file (parent folders created), all or nothing (:func:`dukb.kb.io.atomic_output`).

    Raises:
        InputError: unknown format or the file cannot be written.

    Example:
        >>> import tempfile
        >>> p = Probe("qa", "biography", 3, "What is the job of Ann?", "Teacher")
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = write_probes([p, p], Path(tmp) / "out" / "probes.csv", fmt="csv")
        ...     print(path.name, len(path.read_text().splitlines()))
        probes.csv 3
    """
    p = Path(path)
    text = probes_text(probes, fmt)
    with atomic_output(p) as fh:
        fh.write(text)
    return p


def read_probes(path: str | Path) -> list[Probe]:
    """Read a probe file written by :func:`write_probes` (.jsonl or .csv, chosen by the first character).

    The file is read strictly (:mod:`dukb.kb.csvfile`: UTF-8, RFC 4180 CSV with exactly one field per column).

    Raises:
        InputError: missing, unreadable or not regular file (FIFO, device, folder), larger than
            :data:`dukb.kb.csvfile.MAX_INPUT_BYTES`, not UTF-8, malformed line or record, bare quote, missing
            column, a fact_id that is not an integer of at most 18 digits (CSV: ``-?[0-9]+`` in ASCII; JSON: an
            integer, not a float, string or boolean) (file and line named).

    Example:
        >>> import tempfile
        >>> probes = [Probe("qa", "biography", 3, "What is the job of Ann, the teacher's aunt?", "Teacher"),
        ...           Probe("yes", "relationship", 7, "Is Bo Ann's husband?", "yes", match="yesno")]
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     print(read_probes(write_probes(probes, Path(tmp) / "p.jsonl")) == probes,
        ...           read_probes(write_probes(probes, Path(tmp) / "p.csv", fmt="csv")) == probes)
        True True
    """
    p = Path(path)
    text = read_text(p, "probe file")
    out = []
    if text.lstrip().startswith("{"):
        for n, line in enumerate(text.split("\n"), 1):  # not splitlines: JSON strings may hold U+2028
            if not line.strip():
                continue
            try:
                d = json.loads(line)
                fid = d["fact_id"]
                if type(fid) is not int or not -_ID_BOUND < fid < _ID_BOUND:  # noqa: E721 (bool is not an id)
                    raise InputError(
                        f"fact_id {str(fid)[:60]!r} is not an integer of at most {MAX_INT_DIGITS} digits", p, n
                    )
                out.append(
                    Probe(
                        d["kind"],
                        d["fact_kind"],
                        fid,
                        d["question"],
                        d["answer"],
                        d.get("match", MATCH_SUBSTRING),
                        _aliases(d.get(ALIASES_COLUMN, []), p, n),
                    )
                )
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
                raise InputError(f"malformed probe line: {e}", p, n) from None
        return out
    for lineno, d in parse_csv(text, p, PROBE_COLUMNS, strip=False, multiline=True).rows:
        fact_id = parse_int(d["fact_id"].strip(" "), "fact_id", p, lineno)
        raw = d.get(ALIASES_COLUMN) or "[]"
        try:
            alias = json.loads(raw)
        except json.JSONDecodeError:
            raise InputError(f"aliases {raw[:60]!r} is not a JSON list of strings", p, lineno) from None
        out.append(
            Probe(
                d["kind"], d["fact_kind"], fact_id, d["question"], d["answer"], d["match"], _aliases(alias, p, lineno)
            )
        )
    return out


def _aliases(value: object, path: Path, line: int) -> tuple[str, ...]:
    """A probe's aliases as read from a file: a list of strings, else ``FILE:LINE`` (InputError)."""
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        raise InputError(f"aliases {str(value)[:60]!r} is not a JSON list of strings", path, line)
    return tuple(value)


_ID_BOUND = 10**MAX_INT_DIGITS
