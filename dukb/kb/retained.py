"""Which KB facts a model still knows: the input of recall/accuracy.

Two formats:

- a CSV with columns ``kind,fact_id,retained`` (kind ``relationship`` | ``biography``, retained ``0`` | ``1``);
  every relationship fact of the KB must appear exactly once; biography rows are all present or all absent;
- the benchmark's ``relationships_correct.pt`` / ``biographies_correct.pt`` (lists of booleans in file order), read
  by :mod:`dukb.kb.ptfile` without torch.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from dukb import InputError
from dukb.kb.csvfile import parse_int, read_csv
from dukb.kb.io import atomic_output
from dukb.kb.model import KB

KINDS = ("relationship", "biography")


@dataclass
class Retained:
    """Per-fact knowledge of a model.

    Attributes:
        relationships: fact_id -> still known (every relationship fact of the KB).
        biographies: fact_id -> still known (every biography fact), or None when not given.

    Example:
        >>> r = Retained({0: True, 1: False, 2: False}, None)
        >>> sorted(r.forgotten_relationships), r.forgotten_biographies
        ([1, 2], set())
    """

    relationships: dict[int, bool]
    biographies: dict[int, bool] | None

    @property
    def forgotten_relationships(self) -> set[int]:
        """U_A: relationship fact_ids no longer known."""
        return {f for f, k in self.relationships.items() if not k}

    @property
    def forgotten_biographies(self) -> set[int]:
        """Biography fact_ids no longer known (empty when biographies were not given)."""
        return set() if self.biographies is None else {f for f, k in self.biographies.items() if not k}


def read_retained_csv(path: str | Path, kb: KB) -> Retained:
    """Read a ``kind,fact_id,retained`` CSV and check it against the KB.

    The file is read strictly by :func:`dukb.kb.csvfile.read_csv` (RFC 4180, UTF-8): other columns are allowed, a
    repeated column or a row with more or fewer fields than the header is not.

    Raises:
        InputError: (file and line named) missing or unreadable file, not UTF-8, CSV syntax error, missing or
            repeated column, wrong number of fields, control character, bare quote, unknown kind, a fact_id that is
            not ``-?[0-9]+`` in ASCII (at most 18 digits; :func:`dukb.kb.csvfile.parse_int`) or is unknown,
            retained not 0/1, a fact listed twice, relationship facts missing, or only some biography facts given.

    Example:
        >>> import tempfile
        >>> from dukb.kb.io import load_kb
        >>> kb = load_kb("demo")
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = Path(tmp) / "retained.csv"
        ...     _ = path.write_text("kind,fact_id,retained\\n" + "".join(
        ...         f"relationship,{i},{int(i != 2)}\\n" for i in kb.rel_ids))
        ...     r = read_retained_csv(path, kb)
        ...     print(sorted(r.forgotten_relationships), r.biographies)
        ...     _ = path.write_text("kind,fact_id,retained\\nrelationship,0,1\\n")
        ...     read_retained_csv(path, kb)
        Traceback (most recent call last):
            ...
        dukb.InputError: ...: 17 relationship facts are missing (fact_ids 1, 2, 3, 4, 5, ...); every relationship fact
        must be listed
    """
    path = Path(path)
    table = read_csv(path, ("kind", "fact_id", "retained"))
    rel: dict[int, bool] = {}
    bio: dict[int, bool] = {}
    ids = {"relationship": set(kb.rel_ids), "biography": set(kb.bio_ids)}
    for line, row in table.rows:
        kind = row["kind"]
        if kind not in KINDS:
            raise InputError(f"kind {kind!r} is not relationship or biography", path, line)
        fid = parse_int(row["fact_id"], "fact_id", path, line)
        if fid not in ids[kind]:
            raise InputError(f"the KB has no {kind} fact with fact_id {fid}", path, line)
        if row["retained"] not in ("0", "1"):
            raise InputError(f"retained {row['retained']!r} is not 0 or 1", path, line)
        target = rel if kind == "relationship" else bio
        if fid in target:
            raise InputError(f"{kind} fact {fid} is listed twice", path, line)
        target[fid] = row["retained"] == "1"
    missing_rel = sorted(ids["relationship"] - rel.keys())
    if missing_rel:
        raise InputError(
            f"{len(missing_rel)} relationship facts are missing (fact_ids "
            f"{', '.join(map(str, missing_rel[:5]))}{', ...' if len(missing_rel) > 5 else ''}); "
            "every relationship fact must be listed",
            path,
        )
    if bio and len(bio) != len(ids["biography"]):
        raise InputError(
            f"{len(ids['biography']) - len(bio)} biography facts are missing; list all biography facts or none", path
        )
    return Retained(rel, bio or None)


def retained_from_lists(
    kb: KB, rel_known: Iterable[object], bio_known: Iterable[object] | None = None, source: str | None = None
) -> Retained:
    """Build :class:`Retained` from boolean sequences in KB file order.

    Raises:
        InputError: a sequence's length differs from the KB's number of facts.

    Example:
        >>> from dukb.kb.io import load_kb
        >>> kb = load_kb("demo")
        >>> r = retained_from_lists(kb, [i != 0 for i in range(18)])
        >>> sorted(r.forgotten_relationships)
        [0]
        >>> retained_from_lists(kb, [True])
        Traceback (most recent call last):
            ...
        dukb.InputError: 1 relationship entries, but the KB has 18 relationship facts
    """
    rel_flags = [bool(x) for x in rel_known]
    if len(rel_flags) != len(kb.relationships):
        raise InputError(
            f"{len(rel_flags)} relationship entries, but the KB has {len(kb.relationships)} relationship facts", source
        )
    bio: dict[int, bool] | None = None
    if bio_known is not None:
        bio_flags = [bool(x) for x in bio_known]
        if len(bio_flags) != len(kb.biographies):
            raise InputError(
                f"{len(bio_flags)} biography entries, but the KB has {len(kb.biographies)} biography facts", source
            )
        bio = {f.fact_id: k for f, k in zip(kb.biographies, bio_flags)}
    return Retained({f.fact_id: k for f, k in zip(kb.relationships, rel_flags)}, bio)


def write_retained_csv(retained: Retained, path: str | Path) -> None:
    """Write :class:`Retained` as a ``kind,fact_id,retained`` CSV, all or nothing
    (:func:`dukb.kb.io.atomic_output`).

    Raises:
        InputError: the file cannot be written (named).

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = Path(tmp) / "retained.csv"
        ...     write_retained_csv(Retained({0: True, 5: False}, {2: False}), path)
        ...     print(path.read_text(), end="")
        kind,fact_id,retained
        relationship,0,1
        relationship,5,0
        biography,2,0
    """
    with atomic_output(path) as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["kind", "fact_id", "retained"])
        for fid, k in retained.relationships.items():
            w.writerow(["relationship", fid, int(k)])
        for fid, k in (retained.biographies or {}).items():
            w.writerow(["biography", fid, int(k)])
