"""A KB's ``aliases.csv``: further surface forms of an entity or of an attribute value, accepted by the judge.

The file (optional, in the KB directory beside ``schema.yaml``) has the columns ``name,alias``, one row per alias;
``name`` is an entity of the entities file or a value of biographies.csv, ``alias`` another way to write it
("Lyon,Lyons"; "Euro,EUR"). A probe whose gold answer is ``name`` carries its aliases
(:attr:`dukb.kb.probes.Probe.aliases`), and the judge accepts an output that gives the answer or any alias of it
under the probe's match rule (:func:`dukb.kb.judge.judge`; the substring rule of Wu et al. 2025, App. C, applied to
each surface form).
"""

from __future__ import annotations

from pathlib import Path

from dukb import InputError
from dukb.kb.csvfile import Problem, parse_csv, read_text
from dukb.kb.model import KB

#: Name of the aliases file in a KB directory.
ALIASES_FILE = "aliases.csv"
#: Its columns, in order.
ALIAS_COLUMNS = ("name", "alias")


def load_aliases(kb: KB) -> dict[str, tuple[str, ...]]:
    """The aliases of a KB's entities and attribute values, read from ``aliases.csv`` in its directory.

    Args:
        kb: the KB (its ``source`` directory is read; a KB without a source or without the file has none).

    Returns:
        name -> its aliases (tuple of str, file order, each once; an alias equal to the name is dropped).

    Raises:
        InputError: ``FILE:LINE: problem``, the first of :func:`alias_problems` (a malformed CSV, a header other than
            ``name,alias``, an empty name or alias, a name that is neither an entity of the KB nor a value of its
            biographies, an alias that is another entity's name, a duplicate).

    Source: Wu et al. 2025, App. C (the substring judge, here applied to every surface form of the answer).

    Example:
        >>> import tempfile, shutil
        >>> from dukb.kb.io import load_kb
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     _ = shutil.copytree(load_kb("demo").source, tmp, dirs_exist_ok=True)
        ...     _ = (Path(tmp) / ALIASES_FILE).write_text("name,alias\\nGeorge Hale,Georgie\\nCarpenter,joiner\\n")
        ...     load_aliases(load_kb(tmp))
        {'George Hale': ('Georgie',), 'Carpenter': ('joiner',)}
    """
    problems: list[Problem] = []
    out = _read(kb, problems)
    if problems:
        first = problems[0]
        raise InputError(first.message, first.path, first.line)
    return out


def alias_problems(kb: KB) -> list[Problem]:
    """Every problem of a KB's ``aliases.csv`` (none without the file), in file order: what ``dukb validate``
    lists, one ``FILE:LINE: problem`` each, and what :func:`load_aliases` refuses.

    A row is refused when its name or alias is empty; when the name is neither an entity of the KB nor a value of
    its biographies (the surface forms the judge compares answers with); when the alias is (up to case) the name
    of another entity of the same kind, which would let the judge accept that entity for this one (every person of
    the family schema is one kind; a schema's entity types are kinds, so "Luxembourg" may be an alias of the city
    "Luxembourg (city)" beside the country "Luxembourg": no question has both as answers); when the row repeats an earlier
    one; and when its alias is already (up to case) an alias of another name. A header other than ``name,alias``
    or a malformed CSV is one problem at its line.

    Returns:
        list of :class:`dukb.kb.csvfile.Problem`.

    Source: Wu et al. 2025, App. C (the judge's surface forms of an answer must name it alone).

    Example:
        >>> import tempfile, shutil
        >>> from dukb.kb.io import load_kb
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     _ = shutil.copytree(load_kb("demo").source, tmp, dirs_exist_ok=True)
        ...     _ = (Path(tmp) / ALIASES_FILE).write_text("name,alias\\nGeorge Hale,Clara Stone\\n")
        ...     [p.message for p in alias_problems(load_kb(tmp))]
        ["alias 'Clara Stone' of 'George Hale' is the name of another entity"]
    """
    problems: list[Problem] = []
    _read(kb, problems)
    return problems


def _read(kb: KB, problems: list[Problem]) -> dict[str, tuple[str, ...]]:
    """Read and check ``aliases.csv`` (:func:`alias_problems`), appending each problem to ``problems``; returns the
    aliases of the rows without one."""
    if kb.source is None:
        return {}
    path = Path(kb.source) / ALIASES_FILE
    if not path.exists() and not path.is_symlink():
        return {}
    try:
        table = parse_csv(read_text(path, "aliases file"), path, ALIAS_COLUMNS, optional=(), problems=problems)
    except InputError as e:
        problems.append(Problem(str(e.path or path), e.line, e.message))
        return {}
    values = {b.value for b in kb.biographies}
    entity = {name.casefold(): name for name in kb.people}
    seen: dict[tuple[str, str], int] = {}
    owner: dict[str, tuple[str, int]] = {}
    out: dict[str, dict[str, None]] = {}
    for line, row in table.rows:
        problem = _row_problem(row["name"], row["alias"], kb, values, entity, seen, owner, line)
        if problem:
            problems.append(Problem(str(path), line, problem))
        elif row["alias"] != row["name"]:
            out.setdefault(row["name"], {})[row["alias"]] = None
    problems.sort(key=lambda p: p.line or 0)
    return {k: tuple(v) for k, v in out.items()}


def _same_kind(kb: KB, name: str, other: str) -> bool:
    """Whether an alias of ``name`` that is ``other``'s name could make the judge accept ``other`` for ``name``: always
    in the family schema (its entity types are genders, and a person of either may answer a question), else when both
    are entities of the same type (a relation's answers are of its one object type)."""
    if kb.schema.is_family or name not in kb.people:
        return True
    return kb.entity_type(name) == kb.entity_type(other)


def _row_problem(
    name: str, alias: str, kb: KB, values: set, entity: dict[str, str], seen: dict, owner: dict, line: int
) -> str | None:
    """The problem of one row of aliases.csv (None: the row is good; ``seen`` and ``owner`` record it)."""
    if not name:
        return "empty name"
    if not alias:
        return f"empty alias of {name!r}"
    if name not in kb.people and name not in values:
        return f"alias {alias!r} of unknown entity {name!r} (not in {kb.schema.entities_file} nor a biography value)"
    other = entity.get(alias.casefold())
    if other is not None and other != name and _same_kind(kb, name, other):
        return f"alias {alias!r} of {name!r} is the name of another entity" + (
            "" if other == alias else f" ({other!r})"
        )
    if (name, alias) in seen:
        return f"duplicate alias {alias!r} of {name!r} (first at line {seen[name, alias]})"
    seen[name, alias] = line
    first = owner.setdefault(alias.casefold(), (name, line))
    if first[0] != name:
        return f"alias {alias!r} of {name!r} is already an alias of {first[0]!r} (line {first[1]})"
    return None
