"""EDU-RELAT's question files for any family KB: qa_relationships.jsonl and qa_biographies.jsonl in the benchmark's
format (Wu et al. 2025, Table 3; the fields, order and JSON layout of ../shared/edu-relat/qa_*.jsonl).

Each relationship fact gets EDU-RELAT's four questions (cloze, yes, no with a wrong relation drawn by
:func:`dukb.kb.probes.edu_wrong_relations`, qa), each biography fact two (cloze, qa); the wording is the edu
section of the probe templates (``dukb.data/templates/probes.json``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from dukb import InputError
from dukb.kb.io import atomic_output
from dukb.kb.model import KB, Triple
from dukb.kb.probes import BIOGRAPHY, EDU_RELAT_NO_SEED, RELATIONSHIP, FactIndex, edu_wrong_relations
from dukb.kb.templates import load_template

#: Fields of EDU-RELAT's QA files, in order.
EDU_REL_FIELDS = (
    "fact_id",
    "fact",
    "question",
    "answer",
    "question2",
    "answer2",
    "question3",
    "answer3",
    "question4",
    "answer4",
)
EDU_BIO_FIELDS = ("fact_id", "fact", "question", "answer", "question4", "answer4")


def edu_qa_rows(
    kb: KB, closure: Iterable[Triple] | FactIndex | None = None, no_seed: int = EDU_RELAT_NO_SEED
) -> tuple[list[dict], list[dict]]:
    """The rows of EDU-RELAT's QA files for a KB, in EDU-RELAT's format.

    Args:
        kb: the KB.
        closure: closure triples or a :class:`dukb.kb.probes.FactIndex` (used to keep the "no" question's relation
            false).
        no_seed: seed of the wrong relations (:func:`edu_wrong_relations`).

    Returns:
        ``(relationship_rows, biography_rows)``: dicts with the keys :data:`EDU_REL_FIELDS` and
        :data:`EDU_BIO_FIELDS`, in file order.

    Source: Wu et al. 2025, Table 3; ../shared/edu-relat/qa_relationships.jsonl, qa_biographies.jsonl.

    Example:
        >>> from dukb.kb.io import load_kb
        >>> rel_rows, bio_rows = edu_qa_rows(load_kb("demo"))
        >>> len(rel_rows), len(bio_rows)
        (18, 14)
        >>> rel_rows[0]["question2"], rel_rows[0]["question3"], rel_rows[0]["answer3"], bio_rows[0]["answer4"]
        ("Is George Hale Martha Hale's husband?", "Is George Hale Martha Hale's uncle?", 'no', '1921')
    """
    t = load_template("probes.json")["edu"]
    tr, tb = t[RELATIONSHIP], t[BIOGRAPHY]
    wrong = edu_wrong_relations(kb, closure, no_seed)
    rel_rows = []
    for f in kb.relationships:
        kw = dict(s=f.subject, r=f.relation, o=f.object)
        row = {
            "fact_id": f.fact_id,
            "fact": tr["fact"].format(**kw),
            "question": tr["cloze"].format(**kw),
            "answer": f.relation,
            "question2": tr["yes"].format(**kw),
            "answer2": "yes",
        }
        if f.fact_id in wrong:
            row.update(question3=tr["no"].format(wrong=wrong[f.fact_id], **kw), answer3="no")
        row.update(question4=tr["qa"].format(**kw), answer4=f.relation)
        rel_rows.append(row)
    bio_rows = []
    for b in kb.biographies:
        kw = dict(s=b.subject, a=b.attribute, v=b.value)
        bio_rows.append(
            {
                "fact_id": b.fact_id,
                "fact": tb["fact"].format(**kw),
                "question": tb["cloze"].format(**kw),
                "answer": b.value,
                "question4": tb["qa"].format(**kw),
                "answer4": b.value,
            }
        )
    return rel_rows, bio_rows


def write_edu_qa(
    kb: KB, directory: str | Path, closure: Iterable[Triple] | FactIndex | None = None, no_seed: int = EDU_RELAT_NO_SEED
) -> list[Path]:
    """Write qa_relationships.jsonl and qa_biographies.jsonl in EDU-RELAT's format (one JSON object per line).

    Args:
        kb: the KB.
        directory: output folder (created if needed).
        closure: closure triples or a :class:`dukb.kb.probes.FactIndex`.
        no_seed: seed of the "no" questions' wrong relations.

    Returns:
        The two paths written.

    Raises:
        InputError: the folder cannot be written.

    Source: ../shared/edu-relat/qa_*.jsonl (same fields, order and JSON layout).

    Example:
        >>> import tempfile
        >>> from dukb.kb.io import load_kb
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     paths = write_edu_qa(load_kb("demo"), tmp)
        ...     print([p.name for p in paths], [len(p.read_text().splitlines()) for p in paths])
        ['qa_relationships.jsonl', 'qa_biographies.jsonl'] [18, 14]
    """
    root = Path(directory)
    rel_rows, bio_rows = edu_qa_rows(kb, closure, no_seed)
    paths = []
    try:
        root.mkdir(parents=True, exist_ok=True)
        for name, rows in (("qa_relationships.jsonl", rel_rows), ("qa_biographies.jsonl", bio_rows)):
            p = root / name
            with atomic_output(p) as fh:
                fh.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
            paths.append(p)
    except OSError as e:
        raise InputError(f"cannot write QA files: {e.strerror}", root) from None
    return paths


__all__ = ["EDU_BIO_FIELDS", "EDU_REL_FIELDS", "edu_qa_rows", "write_edu_qa"]
