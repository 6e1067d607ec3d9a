"""`dukb validate | closure | mdus | recall`: the symbolic core on the command line (no torch)."""

from __future__ import annotations

import os
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from dukb import InputError, one_line
from dukb.cli.render import output_path
from dukb.solver.mdus import MAX_SEED, MAX_SEEDS, MIN_SEED
from dukb.solver.rules import RULES_HELP  # noqa: F401  (re-exported for the commands)

KB_HELP = (
    "KB directory (people.csv, relationships.csv, biographies.csv; or a schema.yaml, its entities file and "
    "relationships.csv) or a built-in KB name: demo."
)
#: ``--rules`` of the symbolic commands, which take a KB of any schema.
KB_RULES_HELP = RULES_HELP

#: ``-o/--output`` of closure, mdus and recall: written all or nothing (:func:`dukb.kb.io.atomic_output`); an empty
#: value is refused (:func:`dukb.cli.render.output_path`).
OUTPUT_OPTION = typer.Option(
    None,
    "-o",
    "--output",
    parser=output_path,
    metavar="PATH",
    help="Write here instead of stdout (all or nothing: a failed write leaves no file).",
)


#: Default of ``dukb mdus --seeds`` (the paper's N_seed).
MDUS_SEEDS = 100


class ClosureFormat(str, Enum):
    csv = "csv"
    json = "json"
    table = "table"


class JsonTable(str, Enum):
    json = "json"
    table = "table"


class MdusMethod(str, Enum):
    exact = "exact"
    minimum = "minimum"
    random = "random"
    paper = "paper"


class RecallMethod(str, Enum):
    exact = "exact"
    random = "random"
    paper = "paper"


class TieBreak(str, Enum):
    accuracy = "accuracy"
    first = "first"


#: Most lines a targets file may have (comments and blank lines included): 1,000,000, checked before any line is
#: read (a KB of :data:`dukb.kb.generate.MAX_PEOPLE` people has about 4 million relationship facts, but no protocol
#: runs a million targets).
MAX_TARGETS_LINES = 1_000_000


def read_targets_file(path: Path) -> list[int]:
    """Read a targets file: one relationship fact_id per line; '#' starts a comment; blank lines are skipped.

    The file shares the KB files' limits: a regular file of at most :data:`dukb.kb.csvfile.MAX_INPUT_BYTES` bytes
    (:func:`dukb.kb.csvfile.read_text`), no line longer than :data:`dukb.kb.csvfile.MAX_FIELD_CHARS` characters;
    and it has at most :data:`MAX_TARGETS_LINES` lines. Each fact_id is listed once: a repeat is refused at its
    line (a repeated target would be solved and unlearned again, for nothing).

    Args:
        path: the file.

    Returns:
        The fact_ids in file order.

    Raises:
        InputError: missing, unreadable or not regular file (FIFO, device, folder), too large, not UTF-8, too many
            lines, no fact_id at all, or (file and line named) a line over the length limit, a line that is not
            an integer ``-?[0-9]+`` in ASCII of at most 18 digits, or a fact_id listed again.
    """
    return [fid for fid, _ in read_targets_lines(path)]


def read_targets_lines(path: Path) -> list[tuple[int, int]]:
    """:func:`read_targets_file` with the 1-based line of each fact_id: ``[(fact_id, line), ...]``.

    Raises:
        InputError: as :func:`read_targets_file`.
    """
    from dukb.kb.csvfile import MAX_FIELD_CHARS, MAX_INT_DIGITS, read_text, strict_int

    text = read_text(path, "targets file").replace("\r\n", "\n").replace("\r", "\n")
    n_lines = text.count("\n") + (not text.endswith("\n"))
    if n_lines > MAX_TARGETS_LINES:
        raise InputError(f"{n_lines:,} lines, more than the {MAX_TARGETS_LINES:,} a targets file may have", path)
    first: dict[int, int] = {}
    for n, raw in enumerate(text.split("\n"), 1):
        if len(raw) > MAX_FIELD_CHARS:
            raise InputError(f"line of {len(raw):,} characters, longer than the {MAX_FIELD_CHARS:,} allowed", path, n)
        cell = raw.split("#", 1)[0].strip(" \t")
        if not cell:
            continue
        fid = strict_int(cell)
        if fid is None:
            shown = cell if len(cell) <= 60 else cell[:60] + f"... ({len(cell)} characters)"
            raise InputError(
                f"{shown!r} is not a fact_id (one integer per line: the digits 0-9, at most "
                f"{MAX_INT_DIGITS}, and a leading '-'; '#' for comments)",
                path,
                n,
            )
        if fid in first:
            raise InputError(
                f"fact_id {fid} is listed again (first on line {first[fid]}); list each target once", path, n
            )
        first[fid] = n
    if not first:
        raise InputError("targets file lists no fact_id", path)
    return list(first.items())


def read_targets_in_kb(path: Path, kb: str | None) -> list[int]:
    """Read a targets file (:func:`read_targets_lines`) and check every fact_id against the KB's relationship facts
    before anything else runs (no model is loaded): an unknown fact_id is reported at its line.

    Args:
        path: the targets file.
        kb: the KB directory or built-in name; None: the built-in generated KB (100 people, seed 0), as
            `dukb evaluate`, `dukb muse` and `dukb rwku` take it.

    Returns:
        The fact_ids in file order.

    Raises:
        InputError: as :func:`read_targets_file`; ``no relationship fact has fact_id N`` at FILE:LINE; a bad KB.
    """
    from dukb.kb import load_kb

    lines = read_targets_lines(path)
    if kb is None:
        from dukb.kb.generate import default_generated_kb_dir

        kb = default_generated_kb_dir()
    known = {f.fact_id for f in load_kb(kb).relationships}
    for fid, line in lines:
        if fid not in known:
            raise InputError(f"no relationship fact has fact_id {fid}", path, line)
    return [fid for fid, _ in lines]


def option_int(text: str, what: str) -> int:
    """An integer in an option's text (a list item of --scale-sizes, a --grid value, a --layers bound), read as
    strictly as an integer option (:func:`dukb.kb.csvfile.strict_int`: ``-?[0-9]+`` in ASCII, at most 18 digits;
    surrounding spaces are dropped).

    Raises:
        InputError: ``<what> '<text>' is not an integer (...)``.
    """
    from dukb.kb.csvfile import int_problem, strict_int

    n = strict_int(text.strip())
    if n is None:
        raise InputError(int_problem(what, text.strip()))
    return n


def _load(kb: str, rules: str | None):
    from dukb.kb import load_kb
    from dukb.solver.closure import compute_closure

    k = load_kb(kb)
    return k, compute_closure(k, rules)


def validate(kb: str = typer.Option(..., "--kb", help=KB_HELP)) -> None:
    """Check a KB directory and list every problem with its file and line, one line `dukb: error: FILE:LINE:
    problem` each (exit 2 if there is any); several problems end with a count. An aliases.csv is checked too: header
    name,alias, each name an entity or a biography value, no empty alias, no alias naming another entity, no
    duplicate. A KB with a schema.yaml has its rules.lp checked as every command reads it (a note when it has none,
    or when the rules derive facts that break their relation's types or leave a symmetric relation unmirrored)."""
    from dukb.kb import KBError
    from dukb.kb.validate import validate_kb

    try:
        k = validate_kb(kb)
    except KBError as e:
        for p in e.problems:
            typer.echo(one_line(f"dukb: error: {p}"), err=True)
        if len(e.problems) > 1:
            typer.echo(one_line(f"dukb: error: {len(e.problems)} problems in {kb}"), err=True)
        raise typer.Exit(2) from None
    _validate_kb_rules(k)
    who = "people" if k.schema.is_family else f"entities (schema '{k.schema.name}')"
    typer.echo(
        f"ok: {len(k.people)} {who}, {len(k.relationships)} relationship facts, {len(k.biographies)} biography facts"
    )


def _validate_kb_rules(k) -> None:
    """Check the rules.lp of a KB with a schema other than the family one (raises RulesError: FILE:LINE), or note
    on stderr that it has none (closure, mdus and the protocols then need --rules)."""
    from dukb.solver.rules import KB_RULES_FILE, default_rules, kb_rules

    if k.schema.is_family:
        return
    if default_rules(k.source) == "family":
        typer.echo(
            f"dukb: note: {k.source} has no {KB_RULES_FILE}: commands that use rules need --rules FILE", err=True
        )
        return
    from dukb.solver.closure import compute_closure, functional_conflicts, type_violations, unmirrored

    rules = kb_rules(k)
    closure = compute_closure(k, rules)
    n_asym, asym = unmirrored(closure)
    if n_asym:
        s, r, o = asym[0]
        typer.echo(
            one_line(
                f"dukb: note: {rules.path}: {n_asym} fact(s) of a relation declared symmetric in schema.yaml lack "
                f"their mirror, e.g. ({s}, {r}, {o}) without ({o}, {r}, {s}); add a rule such as "
                f"holds(B,{r},A) :- holds(A,{r},B)."
            ),
            err=True,
        )
    n, examples = type_violations(closure)
    if n:
        (s, r, o), why, line = examples[0]
        typer.echo(
            one_line(
                f"dukb: note: {rules.path}:{line}: the rules derive {n} fact(s) that break their relation's types, "
                f"e.g. ({s}, {r}, {o}): {why}; is a type guard missing from the rule?"
            ),
            err=True,
        )
    n, conflicts = functional_conflicts(closure)
    if n:
        s, r, o1, o2, lines = conflicts[0]
        where = f"{rules.path}:{lines[0]}" if lines else str(rules.path)
        by = f" (derived by the rule(s) on line(s) {', '.join(map(str, lines))})" if lines else ""
        typer.echo(
            one_line(
                f"dukb: note: {where}: the closure gives {n} subject(s) two objects of the functional relation "
                f"'{r}', e.g. ({s}, {r}, {o1}) and ({s}, {r}, {o2}){by}; is a rule too general, or is '{r}' not "
                "functional?"
            ),
            err=True,
        )


def closure(
    kb: str = typer.Option(..., "--kb", help=KB_HELP),
    rules: Optional[str] = typer.Option(None, "--rules", help=KB_RULES_HELP),
    fmt: ClosureFormat = typer.Option(ClosureFormat.csv, "--format", help="csv | json | table."),
    output: Optional[Path] = OUTPUT_OPTION,
) -> None:
    """Deductive closure Omega(K, R): every fact of the KB and every fact the rules derive from it.

    Output: one row per closure fact with columns subject,relation,object,source (source = kb | derived). A fact
    (S, R, O) reads "O is S's R". json adds fact_id (null for derived facts) and counts.
    """
    from dukb.cli.render import emit, to_json, to_table

    _, c = _load(kb, rules)
    if fmt == ClosureFormat.csv:  # streamed from the closure's arrays: no dict per fact
        _write_closure_csv(c, output)
        return
    rows = c.rows()
    cols = ["subject", "relation", "object", "source"]
    if fmt == ClosureFormat.json:
        text = to_json(
            {
                "kb": str(c.kb.source),
                "rules": c.rules.name,
                "n_kb": c.n_kb,
                "n_derived": c.n_derived,
                "n_instances": c.n_instances,
                "facts": rows,
            }
        )
    else:
        text = to_table(
            rows, ["fact_id"] + cols, title=f"closure: {c.n_kb} KB + {c.n_derived} derived facts ({c.rules.name} rules)"
        )
    emit(text, output)


def _write_closure_csv(c, output: Optional[Path]) -> None:
    """Write the closure as CSV (subject,relation,object,source) to ``output`` (all or nothing,
    :func:`dukb.kb.io.atomic_output`) or stdout.

    Raises:
        InputError: the output file cannot be written (a failed write leaves no partial file).
    """
    import sys

    if output is None:
        c.write_csv(sys.stdout)
        return
    from dukb.kb.io import atomic_output

    with atomic_output(output) as fh:
        c.write_csv(fh)


def _collect_targets(c, target_id, targets_file, target) -> list[tuple[int, int | None]]:
    from dukb.solver.targets import resolve_target

    out = [(resolve_target(c, i), i) for i in target_id or []]
    if targets_file is not None:
        for i, line in read_targets_lines(targets_file):
            try:
                out.append((resolve_target(c, i), i))
            except InputError as e:
                raise InputError(e.message, targets_file, line) from None
    for t in target or []:
        a = resolve_target(c, t)
        out.append((a, c.fact_ids[a] if c.is_kb(a) else None))
    if not out:
        raise InputError("give at least one target: --target-id N, --targets-file FILE or --target 'S,R,O'")
    seen = set()
    for a, _ in out:
        if a in seen:
            s, r, o = c.triple(a)
            raise InputError(
                f"target ({s}, {r}, {o}) is given twice (by --target-id, --targets-file or --target); "
                "give each target once"
            )
        seen.add(a)
    return out


def mdus(
    kb: str = typer.Option(..., "--kb", help=KB_HELP),
    target_id: Optional[list[int]] = typer.Option(
        None, "--target-id", help="Relationship fact_id of a target (repeatable)."
    ),
    targets_file: Optional[Path] = typer.Option(
        None,
        "--targets-file",
        help="File with one fact_id per line; '#' "
        f"starts a comment; each fact_id once; at most {MAX_TARGETS_LINES:,} "
        "lines.",
    ),
    target: Optional[list[str]] = typer.Option(
        None,
        "--target",
        help="Target as 'Subject,relation,Object' "
        "(repeatable); may be a derived fact. Read as one CSV record: quote "
        'a name that holds a comma or a quote, as in \'"Hale, George",wife,'
        "Martha Hale'. Names must be the KB's exactly: only spaces around a "
        "field are dropped; anything else is refused with the closest names.",
    ),
    method: MdusMethod = typer.Option(
        MdusMethod.exact,
        "--method",
        help="exact: all subset-minimal sets (clingo); "
        "minimum: one minimum-cardinality set (CP-SAT); random: the paper's "
        "Algorithm 1; paper: the paper's cached sets of the KB (paper_sets.csv of "
        "`dukb import-eval-du`, or original/unlearn_minimal_set/ of the benchmark "
        "folder), in the reference's order, as stored (not checked against --rules).",
    ),
    seeds: int = typer.Option(
        MDUS_SEEDS,
        "--seeds",
        min=1,
        max=MAX_SEEDS,
        help=f"random: number of seeds N_seed, 1 to {MAX_SEEDS:,} (only with --method random).",
    ),
    seed: int = typer.Option(
        0,
        "--seed",
        help=f"Base random seed (random; CP-SAT for minimum), a 32-bit integer ({MIN_SEED:,} to {MAX_SEED:,}).",
    ),
    max_sets: Optional[int] = typer.Option(
        None,
        "--max-sets",
        help="exact: stop after this many sets, at least 1 (only with --method exact; default: all).",
    ),
    seconds: Optional[float] = typer.Option(
        None,
        "--seconds",
        help="exact/minimum: time limit per target, "
        "in seconds, above 0 (only with --method exact or minimum; default: "
        "none).",
    ),
    joint: bool = typer.Option(
        False,
        "--joint",
        help="Treat all targets as one group that must all become non-derivable (adds a 'joint' entry).",
    ),
    rules: Optional[str] = typer.Option(None, "--rules", help=KB_RULES_HELP),
    fmt: JsonTable = typer.Option(JsonTable.json, "--format", help="json | table."),
    output: Optional[Path] = OUTPUT_OPTION,
) -> None:
    """Minimal deep unlearning sets of each target: sets of KB facts whose removal makes the target non-derivable,
    none of whose proper subsets does (Wu et al. 2025, Definition 3).

    json: {"targets": [{"fact_id", "subject", "relation", "object", "method", "complete", "sets": [[fact_id,...]]}]}
    where "complete" says whether the enumeration finished (always false for random). With --joint, a "joint"
    entry holds the sets that remove all targets at once.
    """
    from dukb.cli.render import emit, to_json

    _check_mdus_options(method, seeds, seed, max_sets, seconds, joint)
    k, c = _load(kb, rules)
    tg = _collect_targets(c, target_id, targets_file, target)
    kw = dict(max_sets=max_sets, seconds=seconds, n_seeds=seeds, seed=seed)
    doc = _mdus_doc(k, c, tg, method, joint, kw)
    emit(to_json(doc) if fmt == JsonTable.json else _mdus_table(doc["targets"], method), output)


def _mdus_doc(k, c, tg: list[tuple[int, int | None]], method: MdusMethod, joint: bool, kw: dict) -> dict:
    """The JSON document of ``dukb mdus``: one entry per target (atom, fact_id) of ``tg`` with its sets, the rules
    and KB, the random method's seeds, and with ``joint`` the sets that remove all targets at once. ``k``, ``c``:
    the KB and its closure; ``kw``: :func:`dukb.solver.mdus.minimal_sets`'s limits and seeds."""
    from dukb.solver.mdus import minimal_sets

    paper = _paper_sets(k, tg) if method == MdusMethod.paper else {}
    entries = []
    for atom, fid in tg:
        r = paper[fid] if method == MdusMethod.paper else minimal_sets(c, [atom], method.value, **kw)
        s, rel, o = c.triple(atom)
        entries.append(
            {
                "fact_id": fid,
                "subject": s,
                "relation": rel,
                "object": o,
                "method": r.method,
                "complete": r.complete,
                "sets": [list(x) for x in r.sets],
                "seconds": round(r.seconds, 6),
                "cone_atoms": r.cone_atoms,
            }
        )
    doc = {"targets": entries, "rules": c.rules.name, "kb": str(c.kb.source)}
    if method == MdusMethod.random:
        doc["seeds"] = kw["n_seeds"]
        doc["seed"] = kw["seed"]
    if joint:
        r = minimal_sets(c, [a for a, _ in tg], method.value, **kw)
        doc["joint"] = {
            "fact_ids": [f for _, f in tg],
            "method": r.method,
            "complete": r.complete,
            "sets": [list(x) for x in r.sets],
        }
    return doc


def _mdus_table(entries: list[dict], method: MdusMethod) -> str:
    """``dukb mdus --format table``: per target, whether the enumeration finished, how many sets, their sizes (the
    first 12) and the first set."""
    from dukb.cli.render import to_table

    rows = [
        {
            "fact_id": e["fact_id"],
            "target": f"({e['subject']}, {e['relation']}, {e['object']})",
            "complete": e["complete"],
            "n_sets": len(e["sets"]),
            "sizes": ",".join(str(len(x)) for x in e["sets"][:12]) + ("..." if len(e["sets"]) > 12 else ""),
            "smallest": " ".join(map(str, e["sets"][0])) if e["sets"] else "",
        }
        for e in entries
    ]
    return to_table(
        rows,
        ["fact_id", "target", "complete", "n_sets", "sizes", "smallest"],
        title=f"minimal deep unlearning sets ({method.value})",
    )


def _check_mdus_options(
    method: MdusMethod, seeds: int, seed: int, max_sets: int | None, seconds: float | None, joint: bool
) -> None:
    """Refuse `dukb mdus` options that the method does not use, before the KB is read.

    Raises:
        InputError: --max-sets below 1 or --seconds not a positive finite number (:func:`check_limits`); --seed
            outside 32 bits; --seeds without random; --max-sets without exact; --seconds with random or paper;
            --joint with paper."""
    from dukb.solver.mdus import check_limits

    check_limits(max_sets=max_sets, seconds=seconds)  # --max-sets < 1; --seconds 0, negative, NaN or infinite
    if not MIN_SEED <= seed <= MAX_SEED:
        raise InputError(f"--seed must be a 32-bit integer ({MIN_SEED:,} to {MAX_SEED:,}), got {seed}")
    if seeds != MDUS_SEEDS and method != MdusMethod.random:
        raise InputError(f"--seeds applies only to --method random (the {method.value} method uses no seeds)")
    if max_sets is not None and method != MdusMethod.exact:
        why = {
            MdusMethod.minimum: "finds one set",
            MdusMethod.random: "draws one set per seed",
            MdusMethod.paper: "reads the paper's cached sets",
        }[method]
        raise InputError(f"--max-sets applies only to --method exact (the {method.value} method {why})")
    if seconds is not None and method in (MdusMethod.random, MdusMethod.paper):
        raise InputError(
            f"--seconds applies only to --method exact and minimum (the {method.value} method has no time limit)"
        )
    if joint and method == MdusMethod.paper:
        raise InputError("--joint does not apply to --method paper (the paper cached the sets of single targets)")


def _paper_sets(k, tg) -> dict:
    """fact_id -> the paper's sets of each target as a :class:`dukb.solver.mdus.MDUSResult` (method "paper", not
    complete: a sample of Algorithm 1), in the reference's order (:func:`dukb.kb.paper_sets.paper_sets_of`).

    Raises:
        InputError: a derived target (the paper's sets are of KB facts), a KB without paper sets or a target without
            them."""
    from dukb.kb.paper_sets import paper_sets_of
    from dukb.solver.mdus import MDUSResult

    derived = [a for a, fid in tg if fid is None]
    if derived:
        raise InputError("--method paper: the paper's sets are of KB facts only; a derived target has none")
    sets, _where = paper_sets_of(k, [fid for _, fid in tg], "--method paper")
    return {fid: MDUSResult((atom,), "paper", [tuple(x) for x in sets[fid]], False, 0.0) for atom, fid in tg}


def recall(
    kb: str = typer.Option(..., "--kb", help=KB_HELP),
    target_id: int = typer.Option(..., "--target-id", help="Relationship fact_id of the unlearned target."),
    retained: Optional[Path] = typer.Option(
        None,
        "--retained",
        help="CSV kind,fact_id,retained (kind relationship|"
        "biography, retained 0|1): which KB facts the model still knows.",
    ),
    retained_dir: Optional[Path] = typer.Option(
        None, "--retained-dir", help="Folder with the benchmark's relationships_correct.pt and biographies_correct.pt."
    ),
    method: RecallMethod = typer.Option(
        RecallMethod.exact,
        "--method",
        help="exact: all minimal sets (falls back "
        "to random if enumeration hits its limit); random: Algorithm 1; paper: "
        "the paper's cached sets of the KB (see `dukb mdus --method paper`).",
    ),
    tie_break: TieBreak = typer.Option(
        TieBreak.accuracy,
        "--tie-break",
        help="Which set of best recall scores the "
        "accuracies: accuracy (the higher relationship accuracy, then the smaller "
        "set, then the smaller fact_ids) or first (the first in the sets' order: "
        "ascending size, then fact_ids, for exact and random; the reference's order "
        "for paper, as Eval-DU's calculate_recall_and_acc.py).",
    ),
    seeds: int = typer.Option(
        MDUS_SEEDS, "--seeds", min=1, max=MAX_SEEDS, help=f"random: number of seeds, 1 to {MAX_SEEDS:,}."
    ),
    seed: int = typer.Option(0, "--seed", help="random: base seed."),
    rules: Optional[str] = typer.Option(None, "--rules", help=KB_RULES_HELP),
    fmt: JsonTable = typer.Option(JsonTable.json, "--format", help="json | table."),
    output: Optional[Path] = OUTPUT_OPTION,
) -> None:
    """Recall and accuracy of an unlearned model (Wu et al. 2025, Eq. 1-2) from the facts it still knows.

    json: {"recall", "accuracy_relationships", "accuracy_biographies", "accuracy_all", "best_set": [fact_id, ...],
    "sets_used": "exact"|"random"|"paper", "n_sets": N}. Ties for the best recall go to the higher accuracy
    (--tie-break accuracy, the default) or to the first set (--tie-break first, the paper code's rule).
    """
    from dukb.cli.render import emit, to_json, to_table
    from dukb.kb.retained import read_retained_csv, retained_from_lists
    from dukb.solver.metrics import target_recall

    if (retained is None) == (retained_dir is None):
        raise InputError("give exactly one of --retained FILE or --retained-dir DIR")
    k, c = _load(kb, rules)
    if retained is not None:
        ret = read_retained_csv(retained, k)
    else:
        from dukb.kb.ptfile import load_bool_list

        rel_p, bio_p = retained_dir / "relationships_correct.pt", retained_dir / "biographies_correct.pt"
        rel = load_bool_list(rel_p)
        bio = load_bool_list(bio_p) if os.path.lexists(bio_p) else None  # a dangling link is reported
        ret = retained_from_lists(k, rel, bio, source=str(retained_dir))
    atom = c.atom_of_fact(target_id)
    paper = _paper_sets(k, [(atom, target_id)])[target_id].sets if method == RecallMethod.paper else None
    res = target_recall(
        c, atom, ret, method.value, n_seeds=seeds, seed=seed, tie_break=tie_break.value, paper_sets=paper
    )
    doc = res.to_json()
    doc["target"] = {
        "fact_id": target_id,
        "subject": c.atoms[atom][0],
        "relation": c.atoms[atom][1],
        "object": c.atoms[atom][2],
    }
    if fmt == JsonTable.json:
        emit(to_json(doc), output)
    else:
        rows = [{"metric": k_, "value": v} for k_, v in doc.items() if k_ != "target"]
        emit(to_table(rows, ["metric", "value"], title=f"recall for target {target_id}"), output)


def register(app: typer.Typer) -> None:
    """Add validate, closure, mdus and recall to the app."""
    app.command("validate")(validate)
    app.command("closure")(closure)
    app.command("mdus")(mdus)
    app.command("recall")(recall)
