"""The texts of unlearning: the forget documents (the corruption documents, or their incorrect sentences only) and
the retain documents (true-fact sentences about people the corruption does not touch).

Source: Rezaei et al., RESTOR, Sec. 3.3 (the unlearning algorithm sees only the corrupted model and the corruption
documents), Sec. 4.2 and App. D (retain set: C4 text with nothing about the corrupted entities) and Sec. 4.3, "Effect
of unrelated context in unlearning" (a targeted forget set: the incorrect facts only, k = 0). Torch-free.
"""

from __future__ import annotations

import random

from dukb.kb.corrupt import render_fact
from dukb.kb.model import KB
from dukb.kb.probes import BIOGRAPHY, RELATIONSHIP


def retain_texts(kb: KB, corruption, n: int, seed: int, per_doc: int = 5) -> tuple[list[str], list[tuple[str, int]]]:
    """The retain set: ``n`` documents of ``per_doc`` true-fact sentences unrelated to the corruption.

    RESTOR's retain set is C4 text with nothing about the corrupted entities. Here: KB facts that mention no
    corrupted person and no person named in a corrupted relationship fact (true or injected), preferably facts that
    no corruption document uses as context; rendered with the document templates, ``per_doc`` to a document.

    Args:
        kb: the clean KB; corruption: the :class:`dukb.kb.corrupt.Corruption`; n: number of documents;
        seed: seed of the choice; per_doc: sentences per document.

    Returns:
        ``(texts, facts)``: the documents and the ``(fact_kind, fact_id)`` of every fact they state.

    Source: Rezaei et al., RESTOR, Sec. 4.2 and App. D.
    """
    if n <= 0:
        return [], []
    banned = {c.subject for c in corruption.facts}
    banned |= {v for c in corruption.facts if c.fact_kind == RELATIONSHIP for v in (c.true_value, c.injected_value)}
    used = {(s.fact_kind, s.fact_id) for d in corruption.documents for s in d.sentences}
    cands = [(RELATIONSHIP, f) for f in kb.relationships if f.subject not in banned and f.object not in banned]
    cands += [(BIOGRAPHY, b) for b in kb.biographies if b.subject not in banned]
    pool = [(k, f) for k, f in cands if (k, f.fact_id) not in used]
    if len(pool) < n * per_doc:
        pool += [(k, f) for k, f in cands if (k, f.fact_id) in used]
    rng = random.Random(f"dukb-restor-retain/{seed}")
    chosen = pool[:]
    rng.shuffle(chosen)
    chosen = chosen[: n * per_doc]
    texts = [" ".join(render_fact(f, rng) for _, f in chosen[i : i + per_doc]) for i in range(0, len(chosen), per_doc)]
    return texts, [(k, f.fact_id) for k, f in chosen]


def forget_texts(corruption, targeted: bool) -> list[str]:
    """The forget documents: the corruption documents, or (``targeted``) each document's incorrect sentences only,
    in document order (RESTOR's k = 0 forget set).

    Source: Rezaei et al., RESTOR, Sec. 3.3 (forget set = corruption documents) and Sec. 4.3, Table 4 (targeted set).
    """
    if not targeted:
        return [d.text for d in corruption.documents]
    return [" ".join(s.sentence for s in d.sentences if s.role == "incorrect") for d in corruption.documents]
