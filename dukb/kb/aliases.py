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
from dukb.kb.csvfile import parse_csv, read_text
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
        InputError: ``FILE:LINE: problem`` for a malformed CSV, a missing column, an empty name or alias, or a name
            that is neither an entity of the KB nor a value of its biographies.

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
    if kb.source is None:
        return {}
    path = Path(kb.source) / ALIASES_FILE
    if not path.exists() and not path.is_symlink():
        return {}
    table = parse_csv(read_text(path, "aliases file"), path, ALIAS_COLUMNS)
    values = {b.value for b in kb.biographies}
    out: dict[str, dict[str, None]] = {}
    for line, row in table.rows:
        name, alias = row["name"], row["alias"]
        if not name:
            raise InputError("empty name", path, line)
        if not alias:
            raise InputError(f"empty alias of {name!r}", path, line)
        if name not in kb.people and name not in values:
            raise InputError(
                f"alias {alias!r} of unknown entity {name!r} (not in {kb.schema.entities_file} nor a biography value)",
                path,
                line,
            )
        if alias != name:
            out.setdefault(name, {})[alias] = None
    return {k: tuple(v) for k, v in out.items()}
