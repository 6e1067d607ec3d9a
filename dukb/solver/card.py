"""The dataset card (README.md) of an exported KB dataset: a Hugging Face dataset card with its YAML header (configs,
splits, licence), what each table and column holds, where the data comes from and how to load it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import yaml

from dukb import __version__
from dukb.solver.export import Licence, Table, split_paths
from dukb.solver.scopes import get_scope


@dataclass(frozen=True)
class Provenance:
    """How an export was made, for its dataset card.

    Attributes:
        command: the command line; kb: the KB as given (a folder, a built-in name or "the built-in generated KB");
        kb_fingerprint: :meth:`dukb.kb.KB.fingerprint`; rules, rules_fingerprint: the rule set's name and
        :attr:`dukb.solver.rules.RuleSet.fingerprint`; scope: the forget scope; seed: the probes' seed;
        targets_source: where the targets came from (one phrase); licence: :class:`Licence`; version: dukb's;
        name: a short name of the KB for the card's title (default: ``kb``).

    Example:
        >>> Provenance("dukb export", "demo", "0" * 16, "family", "1" * 16).version == __version__
        True
    """

    command: str
    kb: str
    kb_fingerprint: str
    rules: str
    rules_fingerprint: str
    scope: str = "minimum"
    seed: int = 0
    targets_source: str = "none"
    licence: Licence = field(default_factory=lambda: Licence("unknown"))
    version: str = __version__
    name: str = ""


_COLUMNS_HELP = {
    "people": "name, gender, birthyear, birthplace, job, generation (the KB's people.csv; empty fields are null)",
    "entities": "name, type (the KB's entities file: each entity and its type in the KB's schema.yaml)",
    "relationships": 'fact_id, subject, relation, object, text ("object is subject\'s relation"; text: the '
    "statement sentence)",
    "biographies": "fact_id, subject, attribute, value, text",
    "closure": "subject, relation, object, source (kb or derived), fact_id (null for a derived fact)",
    "probes": "kind, fact_kind, fact_id, question, answer, match (how an answer is judged: substring, yesno or "
    "choice); one split per probe form",
    "targets": "fact_id, subject, relation, object, forget_scope, forget_fact_ids, n_forget, n_retain, "
    "derivable_from_retain",
    "target_<fact_id>": "splits forget and retain: fact_kind (relationship or biography), fact_id, subject, "
    "predicate (relation or attribute), object (object or value), text, question, answer (the "
    "qa form)",
}


def dataset_card(tables: dict[str, dict[str, Table]], fmt: str, prov: Provenance) -> str:
    """The dataset card (README.md) of an export, in Hugging Face's format: a YAML header (pretty_name, license,
    language, tags, size_categories, configs with each split's ``data_files``, :func:`split_paths`), then what each
    configuration holds, how the forget and retain splits are defined, how to load the files, the licence and how
    the export was made (dukb's version, the command, the KB's fingerprint, the rules).

    Example:
        >>> import yaml
        >>> from dukb.kb.io import load_kb
        >>> from dukb.solver.closure import compute_closure
        >>> from dukb.solver.export import export_tables
        >>> kb = load_kb("demo")
        >>> card = dataset_card(export_tables(kb, compute_closure(kb)), "parquet",
        ...                     Provenance("dukb export --kb demo", "demo", kb.fingerprint(), "family", "0" * 16))
        >>> meta = yaml.safe_load(card.split("---")[1])
        >>> meta["license"], meta["configs"][1]
        ('unknown', {'config_name': 'relationships',
                     'data_files': [{'split': 'train', 'path': 'relationships/train.parquet'}]})
    """

    n_rows = sum(t.n_rows for splits in tables.values() for t in splits.values())
    size = (
        next(
            name
            for bound, name in (
                (1_000, "n<1K"),
                (10_000, "1K<n<10K"),
                (100_000, "10K<n<100K"),
                (1_000_000, "100K<n<1M"),
                (10_000_000, "1M<n<10M"),
            )
            if n_rows < bound
        )
        if n_rows < 10_000_000
        else "10M<n<100M"
    )
    meta = {
        "pretty_name": f"dukb export of the KB {prov.name or prov.kb}",
        "license": prov.licence.id,
        "language": ["en"],
        "tags": ["dukb", "deep-unlearning", "machine-unlearning", "knowledge-base"],
        "size_categories": [size],
        "configs": [
            {"config_name": c, "data_files": [{"split": s, "path": p} for s, p in split_paths(c, splits, fmt).items()]}
            for c, splits in tables.items()
        ],
    }
    header = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=1000)
    targets = [c for c in tables if c.startswith("target_")]
    family = "entities" not in tables  # a KB with another schema exports its entities, not people
    lines = [
        f"# {meta['pretty_name']}",
        "",
        f"Facts of a {'family ' if family else ''}knowledge base, its probe questions and the forget and retain splits of its targets, "
        "exported by dukb for evaluating *deep unlearning* (Wu et al. 2025, *Evaluating "
        "Deep Unlearning in Large Language Models*): a fact is unlearned only when the rules can no longer "
        "derive it from what the model still knows.",
        "",
        "## Configurations",
        "",
        "| configuration | splits | rows | columns |",
        "|---|---|---|---|",
    ]
    for c, splits in tables.items():
        if c.startswith("target_"):
            continue
        lines.append(
            f"| `{c}` | {', '.join(splits)} | {sum(t.n_rows for t in splits.values()):,} | {_COLUMNS_HELP[c]} |"
        )
    if targets:
        lines.append(
            f"| `target_<fact_id>` ({len(targets)}) | forget, retain | "
            f"{sum(t.n_rows for c in targets for t in tables[c].values()):,} | "
            f"{_COLUMNS_HELP['target_<fact_id>']} |"
        )
    lines += ["", "## Forget and retain splits", ""]
    if targets:
        lines += [
            f"Targets: {len(targets)} relationship facts ({prov.targets_source}). For each target, the "
            f"`forget` split holds its forget set under the forget scope `{prov.scope}` "
            f"({_scope_text(prov.scope)}) and the `retain` split every other fact of the KB (relationships and "
            "biographies). `targets.derivable_from_retain` says whether the rules still derive the target "
            "from the retain split (Wu et al. 2025, Definition 2: false for a deep unlearning set).",
            "",
        ]
    else:
        lines += [
            f"No targets ({prov.targets_source}): this export holds no forget and retain splits. Give "
            "`--target-id N` or `--targets-file FILE` to add them.",
            "",
        ]
    lines += [
        "## Loading",
        "",
        _loading_text(fmt, tables),
        "",
        "## Licence",
        "",
        f"`{prov.licence.id}`. {prov.licence.note}",
        "",
        "## How it was made",
        "",
        "| | |",
        "|---|---|",
        f"| dukb version | {prov.version} |",
        f"| command | `{prov.command}` |",
        f"| KB | {prov.kb} |",
        f"| KB fingerprint | `{prov.kb_fingerprint}` (SHA-256 of the {'people' if family else 'entities'} and facts, first 16 hex digits) |",
        f"| rules | {prov.rules} (fingerprint `{prov.rules_fingerprint}`) |",
        f"| forget scope | {prov.scope} |",
        f"| probe seed | {prov.seed} |",
        "",
        "The closure and the forget sets follow the rules above; the probe questions are dukb's "
        "(`dukb probes --help` describes every form).",
        "",
    ]
    return f"---\n{header}---\n\n" + "\n".join(lines)


def _scope_text(scope: str) -> str:

    return get_scope(scope).summary


def _loading_text(fmt: str, tables: dict[str, dict[str, Table]]) -> str:
    example = next((c for c in tables if c.startswith("target_")), "relationships")
    splits = list(tables[example])
    if fmt == "hf":
        return (
            "Each configuration is a folder written by `datasets.DatasetDict.save_to_disk`, one subfolder per "
            "split (`CONFIG/SPLIT/data-*.arrow`):\n\n```python\nfrom datasets import load_from_disk\n\n"
            f'ds = load_from_disk("OUT/{example}")   # DatasetDict: {", ".join(splits)}\n```\n\n'
            'The header\'s `configs` list the Arrow files too, so `datasets.load_dataset("OUT", '
            f'"{example}")` also reads them.'
        )
    files = ", ".join(f'"{s}": "OUT/{p}"' for s, p in split_paths(example, splits, fmt).items())
    return (
        "One Parquet file per split, `CONFIG/SPLIT.parquet` (the header's `configs` list them):\n\n```python\n"
        f'from datasets import load_dataset\n\nds = load_dataset("parquet", data_files={{{files}}})\n'
        f'ds = load_dataset("OUT", "{example}")   # the same, through this card\n```\n\n'
        "Any Parquet reader (pyarrow, pandas, polars, duckdb) reads the files as they are."
    )


__all__ = ["Provenance", "dataset_card"]
