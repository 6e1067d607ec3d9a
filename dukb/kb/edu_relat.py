"""Import the EDU-RELAT benchmark's original files into a dukb KB directory.

The benchmark (Wu et al. 2025, "Evaluating Deep Unlearning in Large Language Models", Sec. 4; the Eval-DU
repository's ``synthetic_data/`` folder, github.com/wrh14/deep_unlearning) stores its synthetic family as pickled
Python objects. This module reads them with :mod:`dukb.kb.ptfile` (no torch, no code from the files) and writes:

- ``people.csv``: person i of the graph, in index order: name, gender, birthyear (``Person.age``), birthplace (state
  name: ``Person.birthplace`` is an index into the keys of ``us_population_distribution``, a dict state ->
  population in file order), job, generation;
- ``relationships.csv``: fact_id = edge index e of the graph; for edge ``(i, j)`` of type ``r``: subject = name of
  person i, object = name of person j ("j is i's r"; fact 0 is "Richard Perry is Reid Perry's father");
- ``biographies.csv``: 3 facts per person in index order, fact_id 3i, 3i+1, 3i+2 = birthyear, birthplace, job; the
  value is the benchmark's answer from family_biographies.pt (birthplace written "<State> state");
- ``qa_relationships.jsonl`` / ``qa_biographies.jsonl``: one JSON object per fact, ``{"fact_id": k, <key>:
  <list>[k] for each key of family_relationships.pt / family_biographies.pt in file order}``;
- ``targets.txt``: the 55 target edge ids of subsample.pt, one per line, after a comment line;
- ``paper_sets.csv``: when SRC has ``unlearn_minimal_set/`` (the paper's cached minimal sets, one ``<edge id>.pt``
  per target), the sets converted as :mod:`dukb.kb.paper_sets` describes (edge id = fact_id, the reference's order
  kept), targets in targets.txt's order; without that folder no such file is written and an earlier one in OUT is
  removed (it would belong to another import).

Every field is cross-checked between the files (fact sentence vs edge, biography answer vs Person attribute); any
mismatch or malformed file raises :class:`dukb.InputError` naming the file.

Every output file equals the converted copy in ../shared/edu-relat byte for byte (CSV files with RFC 4180
``\\r\\n`` line ends, as :func:`dukb.kb.io.save_kb` writes them).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from dukb import InputError
from dukb.kb.csvfile import MAX_INT_DIGITS, read_text, strict_int
from dukb.kb.io import atomic_output, check_kb, load_kb, save_kb
from dukb.kb.model import KB, BioFact, Fact, Person
from dukb.kb.paper_sets import PAPER_SETS_FILE, PT_FOLDER, read_pt_folder, write_paper_sets
from dukb.kb.ptfile import PickledPerson, load_benchmark_pickle, short_repr
from dukb.kb.schema import ATTRIBUTES, RELATIONS

GRAPH = "family-200-graph.pt"
QA_RELATIONSHIPS = "family_relationships.pt"
QA_BIOGRAPHIES = "family_biographies.pt"
SUBSAMPLE = "subsample.pt"
STATES = "us_population_distribution"

#: First line of targets.txt (as in ../shared/edu-relat/targets.txt).
TARGETS_HEADER = "# the {n} relationship fact_ids used as unlearning targets in the paper, in order"

#: :meth:`dukb.kb.KB.fingerprint` of the imported benchmark (../shared/edu-relat, ``dukb import-eval-du``): a KB with
#: this fingerprint is EDU-RELAT (its people, relationships and biographies, fact_ids included).
EDU_RELAT_FINGERPRINT = "44f090075b378033"

#: Keys the QA dicts must have (their order in the file is kept in the output).
REL_QA_KEYS = ("fact", "question", "answer", "question2", "answer2", "question3", "answer3", "question4", "answer4")
BIO_QA_KEYS = ("fact", "question", "answer", "question4", "answer4")


def _int(value: object, what: str, path: Path) -> int:
    """A Python int from an int or a numpy integer (scalar or one-element array) of at most
    :data:`dukb.kb.csvfile.MAX_INT_DIGITS` digits.

    Raises:
        InputError: (naming ``path``; ``what`` says where in the file) not an integer, or an absurdly large one.
    """

    if isinstance(value, np.ndarray) and value.size == 1 and value.dtype.kind in "iu":
        value = value.reshape(-1)[0]
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        value = int(value)
        if -_INT_BOUND < value < _INT_BOUND:
            return value
        raise InputError(
            f"{what} is an integer of more than {MAX_INT_DIGITS} digits ({value.bit_length():,} bits)", path
        )
    raise InputError(f"{what} is {type(value).__name__} {short_repr(value)}, expected an integer", path)


_INT_BOUND = 10**MAX_INT_DIGITS


def _read_graph(path: Path) -> tuple[list[tuple[int, int]], list[str], list[str], list[PickledPerson]]:
    """(edges, edge types, names, persons) of family-200-graph.pt, checked for shape and types."""
    obj = load_benchmark_pickle(path, {"Person"})
    if not (isinstance(obj, tuple) and len(obj) == 4 and all(isinstance(x, list) for x in obj)):
        raise InputError("expected a tuple (edges, edge types, names, persons) of four lists", path)
    edges, types, names, persons = obj
    if len(edges) != len(types):
        raise InputError(f"{len(edges)} edges but {len(types)} edge types", path)
    if len(names) != len(persons):
        raise InputError(f"{len(names)} names but {len(persons)} persons", path)
    n = len(names)
    for k, name in enumerate(names):
        if not isinstance(name, str) or not name:
            raise InputError(f"name {k} is {short_repr(name)}, expected a non-empty string", path)
    first: dict[str, int] = {}  # name -> index of its first person (linear; list.count would be quadratic)
    for k, name in enumerate(names):
        if first.setdefault(name, k) != k:
            raise InputError(
                f"the name {short_repr(name)} is used by more than one person (names {first[name]} and {k})", path
            )
    pairs = []
    for e, (edge, rel) in enumerate(zip(edges, types)):
        if not (isinstance(edge, (tuple, list)) and len(edge) == 2):
            raise InputError(f"edge {e} is {short_repr(edge)}, expected a pair of person indices", path)
        i, j = (_int(x, f"edge {e}", path) for x in edge)
        if not (0 <= i < n and 0 <= j < n):
            raise InputError(f"edge {e} ({i}, {j}) names a person index outside 0..{n - 1}", path)
        if rel not in RELATIONS:
            raise InputError(f"edge {e} has relation {short_repr(rel)}, not one of {', '.join(RELATIONS)}", path)
        pairs.append((i, j))
    for k, p in enumerate(persons):
        if not isinstance(p, PickledPerson):
            raise InputError(f"person {k} is a {type(p).__name__}, expected a Person", path)
        if _int(getattr(p, "name", None), f"person {k}'s name index", path) != k:
            raise InputError(f"person {k} has name index {short_repr(getattr(p, 'name', None))}, expected {k}", path)
    return pairs, types, names, persons


def _read_states(path: Path) -> list[str]:
    obj = load_benchmark_pickle(path, set())
    if not isinstance(obj, dict) or not obj or not all(isinstance(k, str) and k for k in obj):
        raise InputError("expected a dict mapping state names to populations", path)
    return list(obj)


def _read_qa(path: Path, keys: tuple[str, ...], n: int) -> dict[str, list[str]]:
    obj = load_benchmark_pickle(path, set())
    if not isinstance(obj, dict):
        raise InputError(f"expected a dict of lists ({', '.join(keys)}), found {type(obj).__name__}", path)
    missing = [k for k in keys if k not in obj]
    if missing:
        raise InputError(f"missing key{'s' if len(missing) > 1 else ''} {', '.join(missing)}", path)
    for k, v in obj.items():
        if not isinstance(k, str) or not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise InputError(f"entry {short_repr(k)} is not a list of strings", path)
        if len(v) != n:
            raise InputError(f"{short_repr(k)} has {len(v)} entries, expected {n} (one per fact)", path)
    return obj


def _read_targets(path: Path, n_edges: int) -> list[int]:

    obj = load_benchmark_pickle(path, set())
    if isinstance(obj, np.ndarray):
        if obj.ndim != 1 or obj.dtype.kind not in "iu":
            raise InputError(f"expected a 1-D integer array of edge ids, found {obj.dtype} {obj.shape}", path)
        obj = obj.tolist()
    if not isinstance(obj, (list, tuple)) or not obj:
        raise InputError("expected a non-empty list of edge ids", path)
    ids = [_int(x, f"entry {k}", path) for k, x in enumerate(obj)]
    bad = [i for i in ids if not 0 <= i < n_edges]
    if bad:
        raise InputError(f"edge id {bad[0]} is outside 0..{n_edges - 1}", path)
    return ids


def _person_row(p: PickledPerson, name: str, states: list[str], path: Path, k: int) -> Person:
    gender = getattr(p, "gender", None)
    if gender not in ("male", "female"):
        raise InputError(f"person {k} ({name}) has gender {short_repr(gender)}", path)
    place = _int(getattr(p, "birthplace", None), f"birthplace of person {k} ({name})", path)
    if not 0 <= place < len(states):
        raise InputError(f"birthplace index {place} of person {k} ({name}) is outside the {len(states)} states", path)
    job = getattr(p, "job", None)
    if not isinstance(job, str) or not job:
        raise InputError(f"job of person {k} ({name}) is {short_repr(job)}", path)
    return Person(
        name,
        gender,
        _int(getattr(p, "age", None), f"birth year of person {k} ({name})", path),
        states[place],
        job,
        _int(getattr(p, "generation", None), f"generation of person {k} ({name})", path),
    )


def _write_jsonl(path: Path, qa: dict[str, list[str]], n: int) -> None:
    with atomic_output(path) as fh:
        for k in range(n):
            fh.write(json.dumps({"fact_id": k, **{key: v[k] for key, v in qa.items()}}) + "\n")


def import_edu_relat(src_dir: str | Path, out_dir: str | Path) -> KB:
    """Convert the benchmark's original folder into a KB directory (see the module docstring for the mapping).

    Args:
        src_dir: folder with family-200-graph.pt, family_relationships.pt, family_biographies.pt, subsample.pt and
            us_population_distribution (the Eval-DU repository's ``synthetic_data/`` folder), and optionally
            unlearn_minimal_set/ (the paper's cached sets, converted to paper_sets.csv).
        out_dir: KB directory to write (created if needed; existing files of the same names are replaced).

    Returns:
        The written KB, loaded back from ``out_dir`` with :func:`dukb.kb.load_kb` (100 people, 400 relationship and
        300 biography facts for EDU-RELAT).

    Raises:
        InputError: src_dir missing or not a folder, out_dir is a file or src_dir itself, a missing or malformed
            input file (named), inputs that disagree with each other (e.g. a QA sentence that is not its edge's
            fact), or a KB that fails :func:`dukb.kb.check_kb` (a :class:`dukb.kb.KBError`).

    Source: Wu et al. 2025, Sec. 4 (EDU-RELAT); the benchmark's data/ folder and ../shared/edu-relat/README.md.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     for src, out in ((Path(tmp) / "none", Path(tmp) / "kb"), (Path(tmp), Path(tmp))):
        ...         try:
        ...             import_edu_relat(src, out)
        ...         except InputError as e:
        ...             print(e.message)
        benchmark folder does not exist
        output directory must differ from the benchmark folder
    """
    src, out = Path(src_dir), Path(out_dir)
    if not src.exists():
        raise InputError("benchmark folder does not exist", src)
    if not src.is_dir():
        raise InputError("expected the benchmark's folder of .pt files (family-200-graph.pt, ...)", src)
    if out.exists() and not out.is_dir():
        raise InputError("output must be a directory, but is a file", out)
    if out.exists() and out.resolve() == src.resolve():
        raise InputError("output directory must differ from the benchmark folder", out)

    edges, types, names, persons = _read_graph(src / GRAPH)
    states = _read_states(src / STATES)
    people = [_person_row(p, names[k], states, src / GRAPH, k) for k, p in enumerate(persons)]
    rel_qa = _read_qa(src / QA_RELATIONSHIPS, REL_QA_KEYS, len(edges))
    bio_qa = _read_qa(src / QA_BIOGRAPHIES, BIO_QA_KEYS, len(ATTRIBUTES) * len(people))
    targets = _read_targets(src / SUBSAMPLE, len(edges))

    relationships = []
    for e, ((i, j), rel) in enumerate(zip(edges, types)):
        fact = Fact(e, names[i], rel, names[j])
        if rel_qa["fact"][e] != f"{fact}." or rel_qa["answer"][e] != rel:
            raise InputError(
                f"fact {e} is {short_repr(rel_qa['fact'][e])} (answer "
                f"{short_repr(rel_qa['answer'][e])}), but edge {e} of {GRAPH} says {str(fact)!r}",
                src / QA_RELATIONSHIPS,
            )
        relationships.append(fact)

    biographies = []
    for k, p in enumerate(people):
        expected = {"birthyear": str(p.birthyear), "birthplace": f"{p.birthplace} state", "job": p.job}
        for a, attribute in enumerate(ATTRIBUTES):
            fid = len(ATTRIBUTES) * k + a
            value = bio_qa["answer"][fid]
            sentence = f"The {attribute} of {p.name} is {value}."
            if value != expected[attribute] or bio_qa["fact"][fid] != sentence:
                raise InputError(
                    f"fact {fid} is {short_repr(bio_qa['fact'][fid])}, but {GRAPH} gives {p.name}'s "
                    f"{attribute} as {expected[attribute]!r}",
                    src / QA_BIOGRAPHIES,
                )
            biographies.append(BioFact(fid, p.name, attribute, value))

    kb = KB({p.name: p for p in people}, relationships, biographies)
    check_kb(kb)
    save_kb(kb, out)
    _write_jsonl(out / "qa_relationships.jsonl", rel_qa, len(edges))
    _write_jsonl(out / "qa_biographies.jsonl", bio_qa, len(biographies))
    with atomic_output(out / "targets.txt") as fh:
        fh.write(TARGETS_HEADER.format(n=len(targets)) + "\n" + "".join(f"{t}\n" for t in targets))
    _convert_paper_sets(src, out, len(edges), targets)
    return load_kb(out)


def _convert_paper_sets(src: Path, out: Path, n_edges: int, targets: list[int]) -> None:
    """Write OUT/paper_sets.csv from SRC/unlearn_minimal_set/*.pt (edge id = fact_id), or remove a stale one when
    SRC has no such folder (:mod:`dukb.kb.paper_sets`; Wu et al. 2025, Eval-DU utils_metric.py:104-114)."""

    folder = src / PT_FOLDER
    if folder.is_dir():
        write_paper_sets(out / PAPER_SETS_FILE, read_pt_folder(folder, range(n_edges)), targets)
    elif (out / PAPER_SETS_FILE).is_file():
        (out / PAPER_SETS_FILE).unlink()


def benchmark_targets(kb_dir: str | Path | None) -> list[int] | None:
    """The paper's 55 targets when ``kb_dir`` is the imported EDU-RELAT: its targets.txt (as :func:`import_edu_relat`
    writes it: '#' comment lines, then one fact_id per line), else None.

    Args:
        kb_dir: a KB directory or a built-in KB name (None: the built-in default, never EDU-RELAT).

    Returns:
        The fact_ids in file order, or None when ``kb_dir`` has no targets.txt or is not EDU-RELAT (its KB's
        fingerprint is not :data:`EDU_RELAT_FINGERPRINT`).

    Raises:
        InputError: a targets.txt line that is not one fact_id (file and line named); a KB that cannot be read.

    Source: Wu et al. 2025, Sec. 4 (55 target facts); the benchmark's subsample.pt.

    Example:
        >>> import shutil, tempfile
        >>> from dukb.kb import resolve_kb_path
        >>> print(benchmark_targets("demo"), benchmark_targets(None))  # built-in KBs are not the benchmark
        None None
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     kb = Path(shutil.copytree(resolve_kb_path("demo"), Path(tmp) / "kb"))
        ...     _ = (kb / "targets.txt").write_text("1\\n")
        ...     print(benchmark_targets(kb))  # a targets.txt, but not the benchmark's facts
        None
    """

    if (
        kb_dir is None
        or not (Path(kb_dir) / "targets.txt").is_file()
        or load_kb(kb_dir).fingerprint() != EDU_RELAT_FINGERPRINT
    ):
        return None
    path = Path(kb_dir) / "targets.txt"
    out: list[int] = []
    for n, line in enumerate(read_text(path, "targets file").splitlines(), 1):
        cell = line.split("#", 1)[0].strip()
        fid = strict_int(cell) if cell else None
        if cell and fid is None:
            raise InputError(f"{cell[:60]!r} is not a fact_id", path, n)
        out += [fid] if fid is not None else []
    return out


__all__ = ["EDU_RELAT_FINGERPRINT", "benchmark_targets", "import_edu_relat"]
