"""A KB as data sets for other tools: its facts, its probe forms and every target's forget and retain splits, written
as Hugging Face datasets (``save_to_disk``) or Parquet files, with a dataset card (torch-free).

The Eval-DU code builds its KB with ``datasets.Dataset.from_dict`` (Wu et al. 2025, github.com/wrh14/deep_unlearning);
this module gives any KB dukb loads the same shape, so that an unlearning framework can read it without dukb. Each
*configuration* (Hugging Face's name for a table of one schema) holds one or more *splits*:

- ``people`` (split ``train``; ``entities``, columns name and type, for a KB with another schema), ``relationships``
  and ``biographies`` (``train``): the KB files' rows, each fact with its statement sentence (``text``, EDU-RELAT's
  "fact" form; null where a schema KB's relation or attribute has no ``fact`` template);
- ``closure`` (``train``): the deductive closure Omega(K, R) (Wu et al. 2025, Definition 1), KB and derived facts;
- ``probes``: one split per probe form (:data:`dukb.kb.probes.KINDS`), every question of that form;
- ``targets`` (``train``) and one configuration ``target_<fact_id>`` per target with splits ``forget`` and
  ``retain``: the forget set is the target's forget set under a forget scope (:mod:`dukb.solver.scopes`; by default
  ``minimum``, a minimum deep unlearning set, Wu et al. 2025, Definition 2), the retain set every other KB fact.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dukb import InputError
from dukb.kb.io import BUILTIN_KBS, resolve_kb_path
from dukb.kb.model import KB
from dukb.kb.probes import BIOGRAPHY, KINDS, RELATIONSHIP, fact_statements, make_probes, parse_kinds
from dukb.solver.closure import Closure
from dukb.solver.mdus import is_deep_unlearning_set
from dukb.solver.scopes import forget_fact_ids, get_scope

#: The output formats: Hugging Face's ``save_to_disk`` folders, or one Parquet file per split.
EXPORT_FORMATS = ("hf", "parquet")

#: The package each format needs, and how to install it (one line when it is missing).
FORMAT_PACKAGES = {"hf": "datasets", "parquet": "pyarrow"}

#: The configurations every export holds, in order (``targets`` and ``target_<fact_id>`` follow when there are
#: targets).
FACT_CONFIGS = ("people", "relationships", "biographies", "closure", "probes")

#: Columns of the forget and retain splits: a fact of either kind. ``predicate`` is the relation of a relationship
#: fact and the attribute of a biography fact; ``object`` its object or value.
SPLIT_COLUMNS = {
    "fact_kind": "string",
    "fact_id": "int64",
    "subject": "string",
    "predicate": "string",
    "object": "string",
    "text": "string",
    "question": "string",
    "answer": "string",
}

#: Licence files looked for in a KB folder, in order.
LICENCE_FILES = ("LICENSE", "LICENSE.txt", "LICENSE.md", "LICENCE", "LICENCE.txt", "LICENCE.md", "COPYING")

#: Licences recognised from the first lines of a KB's licence file: (pattern, Hugging Face licence id).
_LICENCE_PATTERNS = (
    (r"\bMIT License\b", "mit"),
    (r"\bApache License\b.*\bVersion 2\.0\b", "apache-2.0"),
    (r"\bCC0\b|Creative Commons Zero|CC0 1\.0 Universal", "cc0-1.0"),
    (r"Attribution-ShareAlike 4\.0", "cc-by-sa-4.0"),
    (r"Attribution 4\.0 International", "cc-by-4.0"),
    (r"BSD 3-Clause", "bsd-3-clause"),
    (r"GNU GENERAL PUBLIC LICENSE\s+Version 3", "gpl-3.0"),
)

_ARROW_TYPES = ("int64", "string", "bool", "list<int64>")
_CONFIG_NAME = re.compile(r"(people|entities|relationships|biographies|closure|probes|targets|target_[0-9]+)")


@dataclass(frozen=True)
class Table:
    """One split: named, typed columns of equal length.

    Attributes:
        types: column name -> type ("int64", "string", "bool" or "list<int64>"; every value may be None), in column
            order.
        data: column name -> list of values (the same keys as ``types``).

    Example:
        >>> t = Table({"fact_id": "int64", "text": "string"}, {"fact_id": [0, 1], "text": ["a", None]})
        >>> t.n_rows, t.rows()[1]
        (2, {'fact_id': 1, 'text': None})
    """

    types: dict[str, str]
    data: dict[str, list]

    def __post_init__(self) -> None:
        if list(self.types) != list(self.data) or len({len(v) for v in self.data.values()}) > 1:
            raise ValueError("a table needs one list of values per typed column, all of the same length")
        if any(t not in _ARROW_TYPES for t in self.types.values()):
            raise ValueError(f"column types are {', '.join(_ARROW_TYPES)}")

    @property
    def n_rows(self) -> int:
        """The number of rows."""
        return len(next(iter(self.data.values()), []))

    def rows(self) -> list[dict]:
        """The rows as dicts (column order)."""
        return [dict(zip(self.data, values)) for values in zip(*self.data.values())]


def _table(types: dict[str, str], rows: Iterable[dict]) -> Table:
    data: dict[str, list] = {k: [] for k in types}
    for row in rows:
        for k in types:
            data[k].append(row[k])
    return Table(dict(types), data)


@dataclass(frozen=True)
class Licence:
    """The licence of a KB, as far as its folder says.

    Attributes:
        id: Hugging Face's licence id ("mit", "cc-by-4.0", ...), "other" (a licence file dukb does not recognise) or
            "unknown" (no licence file).
        file: the KB's licence file (copied into the export), or None.
        note: one sentence for the dataset card.

    Example:
        >>> kb_licence("demo").id
        'mit'
    """

    id: str
    file: Path | None = None
    note: str = ""


def kb_licence(kb: str | Path | None) -> Licence:
    """The licence of a KB: dukb's own (MIT) for the built-in KBs (``demo`` and, with ``kb`` None, the generated
    default); for a KB folder, the licence its licence file (:data:`LICENCE_FILES`) names in its first lines.

    Args:
        kb: a built-in KB name, a KB folder, or None (the built-in generated KB).

    Returns:
        :class:`Licence` (``unknown`` when the folder has no licence file, ``other`` when dukb does not recognise it).

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     before = kb_licence(tmp).id
        ...     _ = (Path(tmp) / "LICENSE").write_text("MIT License\\n\\nCopyright (c) 2024 Someone\\n")
        ...     print(before, kb_licence(tmp).id, kb_licence(tmp).file.name)
        unknown mit LICENSE
    """

    if kb is None or (str(kb) in BUILTIN_KBS and not Path(kb).exists()):
        return Licence(
            "mit", None, "The KB is built into dukb (generated by or shipped with it) and shares dukb's MIT licence."
        )
    folder = resolve_kb_path(kb)
    for name in LICENCE_FILES:
        path = folder / name
        if path.is_file():
            try:
                with open(path, "rb") as fh:
                    head = fh.read(4096).decode("utf-8", "replace")
            except OSError as e:
                raise InputError(f"cannot read: {e.strerror or e}", path) from None
            for pattern, licence in _LICENCE_PATTERNS:
                if re.search(pattern, head, re.S):
                    return Licence(licence, path, f"The source KB's licence ({name}, copied here as LICENSE).")
            return Licence("other", path, f"The source KB's own licence ({name}, copied here as LICENSE).")
    return Licence(
        "unknown", None, "The source KB's folder holds no licence file: ask its authors before sharing this data set."
    )


def fact_rows(kb: KB, closure: Closure | None = None, seed: int = 0) -> list[dict]:
    """Every KB fact as a row of :data:`SPLIT_COLUMNS`: relationships then biographies, in file order, each with its
    statement sentence (None where its relation or attribute has no ``fact`` template) and its ``qa`` question and
    answer (EDU-RELAT's question4, Wu et al. 2025, Table 3).

    Args:
        kb: the KB; closure: its closure (keeps the probes' gold answers right; None: the KB's facts only);
        seed: the probes' seed (:func:`dukb.kb.probes.make_probes`).

    Example:
        >>> from dukb.kb.io import load_kb
        >>> rows = fact_rows(load_kb("demo"))
        >>> len(rows), rows[0]["text"], rows[0]["question"], rows[0]["answer"]
        (32, "George Hale is Martha Hale's husband.", 'Who is George Hale to Martha Hale?', 'husband')
    """

    text = fact_statements(kb, partial=True)  # None: a relation (attribute) without a fact template
    qa = {
        (p.fact_kind, p.fact_id): p
        for p in make_probes(kb, "qa", seed, closure=None if closure is None else closure.atoms)
    }
    facts = [(RELATIONSHIP, f.fact_id, f.subject, f.relation, f.object) for f in kb.relationships]
    facts += [(BIOGRAPHY, b.fact_id, b.subject, b.attribute, b.value) for b in kb.biographies]
    out = []
    for kind, fid, s, p, o in facts:
        probe = qa.get((kind, fid))
        out.append(
            {
                "fact_kind": kind,
                "fact_id": fid,
                "subject": s,
                "predicate": p,
                "object": o,
                "text": text.get((kind, fid)),
                "question": probe.question if probe else None,
                "answer": probe.answer if probe else None,
            }
        )
    return out


def target_splits(
    closure: Closure, facts: Sequence[dict], target: int, scope: str = "minimum"
) -> tuple[list[dict], list[dict]]:
    """A target's forget and retain splits: the forget set under ``scope`` (:func:`dukb.solver.scopes.
    forget_fact_ids`), and every other KB fact (relationships and biographies).

    Args:
        closure: the KB's closure; facts: :func:`fact_rows`; target: a relationship fact_id; scope: a forget scope.

    Returns:
        (forget rows, retain rows), each in ``facts`` order.

    Raises:
        InputError: an unknown target or scope.

    Source: Wu et al. 2025, Definition 2 (a deep unlearning set: after forgetting it, the target is not in
    Omega(K \\ U, R)).

    Example:
        >>> from dukb.kb.io import load_kb
        >>> from dukb.solver.closure import compute_closure
        >>> kb = load_kb("demo")
        >>> closure = compute_closure(kb)
        >>> forget, retain = target_splits(closure, fact_rows(kb, closure), 0)
        >>> [r["fact_id"] for r in forget], len(retain)
        ([0, 3], 30)
    """

    gone = set(forget_fact_ids(closure, int(target), scope))
    forget = [r for r in facts if r["fact_kind"] == RELATIONSHIP and r["fact_id"] in gone]
    retain = [r for r in facts if not (r["fact_kind"] == RELATIONSHIP and r["fact_id"] in gone)]
    return forget, retain


def export_tables(
    kb: KB,
    closure: Closure,
    targets: Sequence[int] = (),
    *,
    scope: str = "minimum",
    kinds: str | Iterable[str] | None = None,
    seed: int = 0,
) -> dict[str, dict[str, Table]]:
    """The data sets of a KB: configuration -> split -> :class:`Table` (see the module's docstring for the layout).

    Args:
        kb: the KB; closure: its closure (:func:`dukb.solver.closure.compute_closure`).
        targets: relationship fact_ids whose forget and retain splits to add (none: no ``targets`` configuration).
        scope: the forget scope of every target (:data:`dukb.solver.scopes.FORGET_SCOPES`).
        kinds: the probe forms of the ``probes`` configuration (:func:`dukb.kb.probes.parse_kinds`; None: all).
        seed: the probes' seed.

    Returns:
        An ordered dict: :data:`FACT_CONFIGS`, then ``targets`` and ``target_<fact_id>`` per target when there are
        targets. The ``targets`` rows: fact_id, subject, relation, object, forget_scope, forget_fact_ids, n_forget,
        n_retain, derivable_from_retain (whether the rules still derive the target from the retain split: false for
        every deep scope, Wu et al. 2025, Definition 2).

    Raises:
        InputError: an unknown target, scope or probe kind, or a target given twice.

    Example:
        >>> from dukb.kb.io import load_kb
        >>> from dukb.solver.closure import compute_closure
        >>> kb = load_kb("demo")
        >>> tables = export_tables(kb, compute_closure(kb), [0, 5], kinds="edu")
        >>> list(tables), list(tables["probes"])
        (['people', 'relationships', 'biographies', 'closure', 'probes', 'targets', 'target_0', 'target_5'],
         ['cloze', 'yes', 'no', 'qa'])
        >>> summary = tables["targets"]["train"].rows()
        >>> {s: t.n_rows for s, t in tables["target_5"].items()}, summary[1]["forget_fact_ids"]
        ({'forget': 2, 'retain': 30}, [5, 6])
    """

    get_scope(scope)
    chosen = parse_kinds(kinds)
    if len(set(targets)) != len(targets):
        raise InputError("a target is given twice; give each target once")
    for t in targets:
        closure.atom_of_fact(int(t))
    out: dict[str, dict[str, Table]] = {}
    if not kb.schema.is_family:  # another schema: its entities and their types (no gender, no biography columns)
        out["entities"] = {
            "train": _table(
                {"name": "string", "type": "string"}, ({"name": p.name, "type": p.gender} for p in kb.people.values())
            )
        }
    else:
        out["people"] = _people_split(kb)
    facts = fact_rows(kb, closure, seed)
    rels = [r for r in facts if r["fact_kind"] == "relationship"]
    bios = [r for r in facts if r["fact_kind"] == "biography"]
    out["relationships"] = {
        "train": _table(
            {"fact_id": "int64", "subject": "string", "relation": "string", "object": "string", "text": "string"},
            (
                {
                    "fact_id": r["fact_id"],
                    "subject": r["subject"],
                    "relation": r["predicate"],
                    "object": r["object"],
                    "text": r["text"],
                }
                for r in rels
            ),
        )
    }
    out["biographies"] = {
        "train": _table(
            {"fact_id": "int64", "subject": "string", "attribute": "string", "value": "string", "text": "string"},
            (
                {
                    "fact_id": r["fact_id"],
                    "subject": r["subject"],
                    "attribute": r["predicate"],
                    "value": r["object"],
                    "text": r["text"],
                }
                for r in bios
            ),
        )
    }
    out["closure"] = {
        "train": _table(
            {"subject": "string", "relation": "string", "object": "string", "source": "string", "fact_id": "int64"},
            closure.rows(),
        )
    }
    probe_types = {
        "kind": "string",
        "fact_kind": "string",
        "fact_id": "int64",
        "question": "string",
        "answer": "string",
        "match": "string",
    }
    probes = [p.to_dict() for p in make_probes(kb, chosen, seed, closure=closure.atoms)]
    out["probes"] = {k: _table(probe_types, (p for p in probes if p["kind"] == k)) for k in KINDS if k in chosen}
    if not targets:
        return out
    summary, per_target = [], {}
    for t in targets:
        forget, retain = target_splits(closure, facts, int(t), scope)
        ids = [r["fact_id"] for r in forget]
        s, r, o = kb.relationship(int(t)).triple
        summary.append(
            {
                "fact_id": int(t),
                "subject": s,
                "relation": r,
                "object": o,
                "forget_scope": scope,
                "forget_fact_ids": ids,
                "n_forget": len(forget),
                "n_retain": len(retain),
                "derivable_from_retain": not is_deep_unlearning_set(closure, [closure.atom_of_fact(int(t))], ids),
            }
        )
        per_target[f"target_{int(t)}"] = {
            "forget": _table(SPLIT_COLUMNS, forget),
            "retain": _table(SPLIT_COLUMNS, retain),
        }
    out["targets"] = {
        "train": _table(
            {
                "fact_id": "int64",
                "subject": "string",
                "relation": "string",
                "object": "string",
                "forget_scope": "string",
                "forget_fact_ids": "list<int64>",
                "n_forget": "int64",
                "n_retain": "int64",
                "derivable_from_retain": "bool",
            },
            summary,
        )
    }
    out.update(per_target)
    return out


def _people_split(kb: KB) -> dict[str, Table]:
    """The ``people`` configuration of a family KB: people.csv's rows (empty fields null)."""
    return {
        "train": _table(
            {
                "name": "string",
                "gender": "string",
                "birthyear": "int64",
                "birthplace": "string",
                "job": "string",
                "generation": "int64",
            },
            (
                {
                    "name": p.name,
                    "gender": p.gender,
                    "birthyear": p.birthyear,
                    "birthplace": p.birthplace,
                    "job": p.job,
                    "generation": p.generation,
                }
                for p in kb.people.values()
            ),
        )
    }


def missing_package(fmt: str) -> str | None:
    """What to install for an output format, one line, or None when its package is importable.

    Raises:
        InputError: an unknown format.

    Example:
        >>> missing_package("parquet") is None or missing_package("parquet").startswith("--format parquet needs")
        True
    """
    if fmt not in FORMAT_PACKAGES:
        raise InputError(f"unknown export format {fmt!r} (choose from {', '.join(EXPORT_FORMATS)})")
    package = FORMAT_PACKAGES[fmt]
    if importlib.util.find_spec(package) is not None:
        return None
    return (
        f"--format {fmt} needs the {package} package, which is not installed: pip install 'dukb[export]' "
        f"(or pip install {package})"
    )


def split_paths(config: str, splits: Iterable[str], fmt: str) -> dict[str, str]:
    """Where each split of a configuration lies in an export folder, relative to it, as a ``data_files`` pattern of
    the dataset card: ``CONFIG/SPLIT.parquet``, or with ``hf`` the Arrow files ``save_to_disk`` writes,
    ``CONFIG/SPLIT/data-*.arrow``.

    Example:
        >>> split_paths("target_5", ["forget", "retain"], "parquet")
        {'forget': 'target_5/forget.parquet', 'retain': 'target_5/retain.parquet'}
    """
    return {s: f"{config}/{s}.parquet" if fmt == "parquet" else f"{config}/{s}/data-*.arrow" for s in splits}


def _export_entry(name: str) -> bool:
    """Whether a name in an export folder is one an export writes (README.md, LICENSE, a configuration's folder, or
    the temporary folder of an interrupted export)."""
    return name in ("README.md", "LICENSE") or bool(_CONFIG_NAME.fullmatch(name)) or name.startswith(".dukb-export-")


def check_output(out: Path, force: bool = False) -> list[Path]:
    """Check an export's output folder before any work: it may be new or empty; with ``force``, it may hold an
    earlier export, which is replaced as a whole (nothing else in it is ever removed).

    Returns:
        The entries ``force`` will replace (empty for a new or empty folder).

    Raises:
        InputError: a file is in the way; the folder is not empty (without ``force``), or holds something no export
            writes (named); it cannot be read.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     _ = (Path(tmp) / "notes.txt").write_text("mine")
        ...     check_output(Path(tmp) / "new"), check_output(Path(tmp), force=True)
        Traceback (most recent call last):
            ...
        dukb.InputError: ...: holds notes.txt, which no dukb export writes; give a new or empty folder
    """
    try:
        if out.exists() and not out.is_dir():
            raise InputError("the output must be a folder, but a file is in the way", out)
        entries = sorted(out.iterdir()) if out.is_dir() else []
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror or e}", out) from None
    if not entries:
        return []
    if not force:
        raise InputError(
            "the output folder is not empty; give --force to replace an earlier export, or a new folder", out
        )
    foreign = [p.name for p in entries if not _export_entry(p.name)]
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise InputError(f"holds {shown}, which no dukb export writes; give a new or empty folder", out)
    return entries


def write_export(
    tables: dict[str, dict[str, Table]],
    out: str | Path,
    fmt: str,
    card: str,
    *,
    licence_file: Path | None = None,
    force: bool = False,
) -> list[Path]:
    """Write an export: each configuration's splits (``hf``: one ``DatasetDict.save_to_disk`` folder per
    configuration; ``parquet``: ``CONFIG/SPLIT.parquet``), README.md (``card``) and LICENSE (a copy of
    ``licence_file``).

    Nothing is written outside ``out``: the files go into a temporary folder inside it, then move into place, so a
    failed export leaves ``out`` as it was (a folder the export created is removed again). With ``force`` an earlier
    export in ``out`` is replaced as a whole (:func:`check_output`).

    Args:
        tables: :func:`export_tables`; out: the folder; fmt: one of :data:`EXPORT_FORMATS`; card:
            :func:`dataset_card`; licence_file: the KB's licence file or None; force: replace an earlier export.

    Returns:
        The entries written into ``out``, in order.

    Raises:
        InputError: an unknown format or its package missing (:func:`missing_package`); see :func:`check_output`;
            a file that cannot be written.

    Example:
        >>> import tempfile, pyarrow.parquet as pq
        >>> from dukb.kb.io import load_kb
        >>> from dukb.solver.closure import compute_closure
        >>> kb = load_kb("demo")
        >>> tables = export_tables(kb, compute_closure(kb), [0])
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     written = write_export(tables, Path(tmp) / "out", "parquet", "card")
        ...     print([p.name for p in written][-3:], pq.read_table(Path(tmp) / "out/target_0/forget.parquet").num_rows)
        ['targets', 'target_0', 'README.md'] 2
    """
    out = Path(out)
    problem = missing_package(fmt)
    if problem:
        raise InputError(problem)
    old = check_output(out, force)
    top = out  # the outermost folder this export creates (removed again on failure)
    while not top.parent.exists() and top.parent != top:
        top = top.parent
    created = None if out.exists() else top
    try:
        out.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".dukb-export-", dir=out))
    except OSError as e:
        raise InputError(f"cannot write: {e.strerror or e}", out) from None
    try:
        for config, splits in tables.items():
            (_write_hf if fmt == "hf" else _write_parquet)(splits, tmp / config)
        (tmp / "README.md").write_text(card, encoding="utf-8")
        if licence_file is not None:
            shutil.copyfile(licence_file, tmp / "LICENSE")
        for p in old:
            if p.resolve() != tmp.resolve():
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
        names = [*tables, "README.md"] + (["LICENSE"] if licence_file is not None else [])
        for name in names:
            os.replace(tmp / name, out / name)
        tmp.rmdir()
    except OSError as e:
        _undo(tmp, created)
        raise InputError(f"cannot write the export: {e.strerror or e}", getattr(e, "filename", None) or out) from None
    except BaseException:
        _undo(tmp, created)
        raise
    return [out / n for n in names]


def _undo(tmp: Path, created: Path | None) -> None:
    """After a failed export: remove its temporary folder and the folders it created."""
    shutil.rmtree(tmp, ignore_errors=True)
    if created is not None:
        shutil.rmtree(created, ignore_errors=True)


def _arrow_table(table: Table) -> Any:  # a pyarrow.Table
    import pyarrow as pa

    types = {"int64": pa.int64(), "string": pa.string(), "bool": pa.bool_(), "list<int64>": pa.list_(pa.int64())}
    schema = pa.schema([(k, types[t]) for k, t in table.types.items()])
    return pa.Table.from_pydict(table.data, schema=schema)


def _write_parquet(splits: dict[str, Table], folder: Path) -> None:
    import pyarrow.parquet as pq

    folder.mkdir()
    for split, table in splits.items():
        pq.write_table(_arrow_table(table), folder / f"{split}.parquet")


def _write_hf(splits: dict[str, Table], folder: Path) -> None:
    import datasets

    shown = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        dd = datasets.DatasetDict({split: datasets.Dataset(_in_memory(_arrow_table(t))) for split, t in splits.items()})
        dd.save_to_disk(str(folder))
    finally:
        if shown:
            datasets.enable_progress_bars()


def _in_memory(table: Any) -> Any:  # a pyarrow.Table -> a datasets.table.InMemoryTable
    from datasets.table import InMemoryTable

    return InMemoryTable(table)


__all__ = [
    "EXPORT_FORMATS",
    "FACT_CONFIGS",
    "FORMAT_PACKAGES",
    "LICENCE_FILES",
    "Licence",
    "SPLIT_COLUMNS",
    "Table",
    "check_output",
    "export_tables",
    "fact_rows",
    "kb_licence",
    "missing_package",
    "split_paths",
    "target_splits",
    "write_export",
]
