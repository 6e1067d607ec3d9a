"""The Eval-DU paper's own minimal deep unlearning sets: read, convert, write and find them.

The paper's recall (Wu et al. 2025, Eq. 1) is computed by the benchmark's calculate_recall_and_acc.py over sets it
sampled once with Algorithm 1 (100 seeds) and cached per target in ``synthetic_data/unlearn_minimal_set/<edge
id>.pt`` (utils_metric.py:104-113 of github.com/wrh14/deep_unlearning): a pickled set of frozensets of numpy int64
edge ids. Edge e of the benchmark's graph is relationship fact e of the imported KB (:mod:`dukb.kb.edu_relat`), so
the ids need no mapping.

The converted form is ``paper_sets.csv`` in the KB directory (RFC 4180, read by :func:`dukb.kb.csvfile.read_csv`):

    target,rank,fact_ids
    214,1,38 109 131 152 156 214 222 224 268 394
    214,2,152 179 214 222 224 273 394

- ``target``: the target's relationship fact_id (the file's name <target>.pt);
- ``rank``: 1, 2, ... the set's position in the reference's order: the order CPython iterates the unpickled set,
  which is what ``list(torch.load(...))`` (utils_metric.py:106, :114) gives and what the reference's first-set
  tie-break (``np.asarray(recall_list).argmax()``, calculate_recall_and_acc.py:43) follows;
- ``fact_ids``: the set's relationship fact_ids, space-separated, ascending.

A target's rows are consecutive with ranks 1..n; every fact_id is a relationship fact of the KB; every set holds
its target (a KB fact must itself be removed); no set is listed twice for a target. A file that breaks any of
this is refused with one line ``FILE:LINE: problem``.

Where a KB finds them (:func:`find_paper_sets`): ``paper_sets.csv`` in the KB directory, else (a KB that is the
benchmark folder itself, ../shared/edu-relat) the ``original/unlearn_minimal_set/*.pt`` files inside it, read with
the restricted unpickler (:func:`dukb.kb.ptfile.load_id_sets`).
"""

from __future__ import annotations

import re
from collections.abc import Container, Mapping, Sequence
from pathlib import Path

from dukb import InputError
from dukb.kb.csvfile import parse_int, read_csv
from dukb.kb.io import atomic_output
from dukb.kb.model import KB
from dukb.kb.ptfile import load_id_sets

#: The converted file's name in a KB directory.
PAPER_SETS_FILE = "paper_sets.csv"
#: The benchmark's folder of cached sets (in its synthetic_data/ folder).
PT_FOLDER = "unlearn_minimal_set"
#: Where an imported benchmark folder (../shared/edu-relat) keeps the original files.
ORIGINAL = "original"
#: The converted file's header.
HEADER = ("target", "rank", "fact_ids")

_PT_NAME = re.compile(r"^(0|[1-9][0-9]{0,17})\.pt$")
_IDS = re.compile(r"^[0-9]+( [0-9]+)*$")

#: target fact_id -> its sets in the reference's order, each a sorted list of relationship fact_ids
PaperSets = dict[int, list[list[int]]]


def _check_sets(target: int, sets: Sequence[Sequence[int]], rel_ids: Container[int], where: str) -> str | None:
    """Why ``sets`` cannot be the paper's sets of ``target`` (empty, a set without the target, an id that is not a
    relationship fact, a set listed twice), or None."""
    if not sets:
        return f"target {target} has no set"
    seen = set()
    for s in sets:
        bad = [f for f in s if f not in rel_ids]
        if bad:
            return f"{where}: fact_id {bad[0]} is not a relationship fact of the KB"
        if target not in s:
            return f"{where}: the set {' '.join(map(str, s))} does not hold its target {target}"
        if frozenset(s) in seen:
            return f"{where}: the set {' '.join(map(str, s))} is listed twice for target {target}"
        seen.add(frozenset(s))
    return None


def read_pt_folder(folder: str | Path, rel_ids: Container[int] | None = None) -> PaperSets:
    """Read the benchmark's ``unlearn_minimal_set/<edge id>.pt`` files (torch-free, restricted unpickler).

    Args:
        folder: the folder; every ``*.pt`` in it must be named ``<edge id>.pt`` (other files are ignored).
        rel_ids: the KB's relationship fact_ids (a container), to check every id against; None skips that check.

    Returns:
        target -> its sets in the reference's order (:func:`dukb.kb.ptfile.load_id_sets`), targets ascending.

    Raises:
        InputError: (naming the file) a ``.pt`` file whose name is not ``<edge id>.pt``, any file
            :func:`dukb.kb.ptfile.load_id_sets` refuses (a global other than set/frozenset/numpy scalars, ...), a
            set without its target, an unknown id, a set twice; the folder holds no ``.pt`` file.

    Source: Wu et al. 2025 (Eval-DU), utils_metric.py:104-114 (the cache written by get_valid_unlearn_general).

    Example:
        >>> import pickle, tempfile, zipfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     with zipfile.ZipFile(Path(tmp) / "5.pt", "w") as zf:
        ...         zf.writestr("5/data.pkl", pickle.dumps({frozenset({5, 7})}, protocol=2))
        ...     read_pt_folder(tmp, range(18))
        {5: [[5, 7]]}
    """
    folder = Path(folder)
    out: PaperSets = {}
    files = sorted(p for p in folder.iterdir() if p.suffix == ".pt")
    for path in files:
        m = _PT_NAME.match(path.name)
        if not m:
            raise InputError("expected a file named <edge id>.pt (the target's edge id)", path)
        target = int(m.group(1))
        sets = load_id_sets(path)
        why = _check_sets(target, sets, rel_ids if rel_ids is not None else _Any(), "set")
        if why:
            raise InputError(why, path)
        out[target] = sets
    if not out:
        raise InputError(f"no <edge id>.pt file (the paper's cached sets, {PT_FOLDER}/)", folder)
    return dict(sorted(out.items()))


class _Any:
    """A container holding every id (no KB to check against)."""

    def __contains__(self, x: object) -> bool:
        return True


def write_paper_sets(
    path: str | Path, sets: Mapping[int, Sequence[Sequence[int]]], order: Sequence[int] | None = None
) -> None:
    """Write ``paper_sets.csv`` (module docstring) all or nothing (:func:`dukb.kb.io.atomic_output`).

    Args:
        path: the file.
        sets: target -> sets in the reference's order.
        order: targets in the order to write them (e.g. targets.txt's); the others follow, ascending.

    Source: Wu et al. 2025 (Eval-DU), synthetic_data/unlearn_minimal_set/*.pt (the sets written).

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     write_paper_sets(Path(tmp) / PAPER_SETS_FILE, {0: [[0, 3]], 5: [[5, 7], [6, 5]]}, order=[5])
        ...     (Path(tmp) / PAPER_SETS_FILE).read_bytes().splitlines()
        [b'target,rank,fact_ids', b'5,1,5 7', b'5,2,5 6', b'0,1,0 3']
    """
    first = [t for t in (order or []) if t in sets]
    targets = first + sorted(set(sets) - set(first))
    with atomic_output(path) as fh:
        fh.write(",".join(HEADER) + "\r\n")
        for t in targets:
            for rank, s in enumerate(sets[t], 1):
                fh.write(f"{t},{rank},{' '.join(str(f) for f in sorted(s))}\r\n")


def read_paper_sets(path: str | Path, rel_ids: Container[int]) -> PaperSets:
    """Read ``paper_sets.csv`` (module docstring) strictly.

    Args:
        path: the file.
        rel_ids: the KB's relationship fact_ids (a container).

    Returns:
        target -> its sets in rank order, each a sorted list of fact_ids.

    Raises:
        InputError: (file and line named) the file's CSV errors (:func:`dukb.kb.csvfile.read_csv`), a column other
            than target, rank, fact_ids; a target or rank that is not an integer; fact_ids that are not
            space-separated integers, are not ascending or repeat one; a rank out of sequence (each target's rows
            consecutive, ranks 1, 2, ...); an id that is not a relationship fact of the KB; a set without its
            target or listed twice; a file with no set.

    Source: Wu et al. 2025 (Eval-DU), synthetic_data/unlearn_minimal_set/*.pt, converted by `dukb import-eval-du`.

    Example:
        >>> import tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> f = Path(tmp.name) / PAPER_SETS_FILE
        >>> write_paper_sets(f, {5: [[5, 7], [5, 6]]})
        >>> read_paper_sets(f, range(18))
        {5: [[5, 7], [5, 6]]}
        >>> _ = f.write_text("target,rank,fact_ids\\n5,1,5 7\\n5,3,5 6\\n")
        >>> try:
        ...     read_paper_sets(f, range(18))
        ... except InputError as e:
        ...     print(e.line, e.message)
        3 rank 3 of target 5 is out of sequence (expected 2: ranks 1, 2, ... on consecutive rows)
        >>> tmp.cleanup()
    """
    table = read_csv(path, HEADER, optional=())
    out: PaperSets = {}
    prev = None
    for line, row in table.rows:
        target = parse_int(row["target"], "target", path, line)
        rank = parse_int(row["rank"], "rank", path, line)
        text = row["fact_ids"]
        if not _IDS.match(text):
            raise InputError(f"fact_ids {text[:60]!r} is not a list of fact_ids separated by single spaces", path, line)
        ids = [parse_int(x, "fact_id", path, line) for x in text.split(" ")]
        if any(a >= b for a, b in zip(ids, ids[1:])):
            raise InputError("fact_ids must be ascending, each once", path, line)
        if target in out and target != prev:
            raise InputError(
                f"target {target} appears again after other targets (a target's sets are on consecutive rows)",
                path,
                line,
            )
        expected = len(out.get(target, [])) + 1
        if rank != expected:
            raise InputError(
                f"rank {rank} of target {target} is out of sequence (expected {expected}: ranks 1, 2, "
                "... on consecutive rows)",
                path,
                line,
            )
        sets = out.setdefault(target, [])
        sets.append(ids)
        if target not in rel_ids:
            raise InputError(f"target {target} is not a relationship fact of the KB", path, line)
        why = _check_sets(target, sets[-1:], rel_ids, "set")
        if why is None and frozenset(ids) in {frozenset(s) for s in sets[:-1]}:
            why = f"set: the set {text} is listed twice for target {target}"
        if why:
            raise InputError(why, path, line)
        prev = target
    if not out:
        raise InputError("lists no set", path)
    return out


def find_paper_sets(kb_dir: str | Path | None, rel_ids: Container[int]) -> tuple[PaperSets, Path] | None:
    """The paper's sets of the KB in ``kb_dir``: its ``paper_sets.csv``, else the ``original/unlearn_minimal_set``
    folder inside it (the benchmark folder ../shared/edu-relat read as a KB), else None.

    Args:
        kb_dir: the KB directory (None: a KB with no folder, which has none).
        rel_ids: the KB's relationship fact_ids, to check every id against.

    Returns:
        (target -> sets, the file or folder they came from), or None when the KB has none.

    Raises:
        InputError: the file or folder exists but is malformed (:func:`read_paper_sets`, :func:`read_pt_folder`).

    Source: Wu et al. 2025 (Eval-DU), synthetic_data/unlearn_minimal_set/*.pt.

    Example:
        >>> import tempfile
        >>> print(find_paper_sets(None, range(18)))
        None
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     write_paper_sets(Path(tmp) / PAPER_SETS_FILE, {5: [[5, 7]]})
        ...     sets, where = find_paper_sets(tmp, range(18))
        ...     sets, where.name
        ({5: [[5, 7]]}, 'paper_sets.csv')
    """
    if kb_dir is None:
        return None
    root = Path(kb_dir)
    csv_path = root / PAPER_SETS_FILE
    if csv_path.exists() or csv_path.is_symlink():
        return read_paper_sets(csv_path, rel_ids), csv_path
    folder = root / ORIGINAL / PT_FOLDER
    if folder.is_dir():
        return read_pt_folder(folder, rel_ids), folder
    return None


def paper_sets_of(kb: KB, targets: Sequence[int], flag: str = "--sets paper") -> tuple[PaperSets, Path]:
    """The paper's sets of ``targets`` for the loaded ``kb`` (found from ``kb.source``), or a one-line refusal.

    Args:
        kb: a :class:`dukb.kb.model.KB` loaded from a directory.
        targets: relationship fact_ids that need sets.
        flag: the option named in a refusal.

    Returns:
        (target -> sets for exactly ``targets``, where they came from).

    Raises:
        InputError: the KB has no paper sets (neither paper_sets.csv nor original/unlearn_minimal_set/), a target
            has none, or the file is malformed.

    Source: Wu et al. 2025 (Eval-DU), calculate_recall_and_acc.py (the sets its recall reads).

    Example:
        >>> from dukb.kb.io import load_kb
        >>> try:
        ...     paper_sets_of(load_kb("demo"), [5])
        ... except InputError as e:
        ...     print(e.message.split(" (")[0].replace(str(load_kb("demo").source), "demo"))
        --sets paper: the KB demo has no paper sets
    """
    found = find_paper_sets(getattr(kb, "source", None), set(kb.rel_ids))
    if found is None:
        raise InputError(
            f"{flag}: the KB {kb.source or '(in memory)'} has no paper sets ({PAPER_SETS_FILE}, "
            f"written by `dukb import-eval-du`, or {ORIGINAL}/{PT_FOLDER}/)"
        )
    sets, where = found
    missing = [t for t in targets if t not in sets]
    if missing:
        raise InputError(
            f"{flag}: {where} has no sets for target{'s' if len(missing) > 1 else ''} "
            f"{', '.join(map(str, missing[:10]))}{' ...' if len(missing) > 10 else ''} (it has "
            f"{len(sets)} targets)"
        )
    return {t: sets[t] for t in targets}, where


__all__ = [
    "HEADER",
    "PAPER_SETS_FILE",
    "PT_FOLDER",
    "PaperSets",
    "find_paper_sets",
    "paper_sets_of",
    "read_paper_sets",
    "read_pt_folder",
    "write_paper_sets",
]
