"""Question-answer items for finetuning, unlearning and probing, and their tokenisation.

The paper finetunes and probes in QA format with the "question4/answer4" forms of EDU-RELAT ("Who is Richard Perry
to Reid Perry?" -> "father"; "What is the birthyear of Sloane Lee?" -> "1908"), the loss on answer tokens only
(Wu et al. 2025, App. H). The probe sets of :mod:`dukb.kb.probes` supply these and the other probe kinds.
"""

from __future__ import annotations

from collections.abc import Sequence

from dukb import InputError
from dukb.kb.kbschema import AttributeSpec, RelationSpec
from dukb.kb.model import KB
from dukb.kb.probes import Probe, fact_statements, make_probes
from dukb.kb.templates import load_template

#: A QA item is a probe of :mod:`dukb.kb.probes`: kind, fact_kind, fact_id, question, answer, match.
QAItem = Probe


#: The probe kind used for finetuning and for recall/accuracy, as in the paper.
QA_KIND = "qa"

#: A plain-text item: ``answer`` holds a sentence about a fact, trained and scored on every token (no prompt tags;
#: ``question`` is empty). MUSE's verbatim corpus (Shi et al. 2024b, C1: the statement sentences) and RWKU's
#: synthetic forget corpus (Jin et al. 2024: the description sentences of :func:`kb_descriptions`).
TEXT_KIND = "text"


def kb_qa(kb: KB, kinds: tuple[str, ...] = (QA_KIND,), seed: int = 0) -> list[QAItem]:
    """QA items for every KB fact (relationships first, then biographies, in file order).

    Args:
        kb: the KB.
        kinds: probe kinds from :data:`dukb.kb.probes.KINDS`; the default is the paper's question4/answer4 form.
        seed: seed for kinds with random choices.

    Returns:
        list of :class:`QAItem` (one per fact and kind that applies to it).

    Raises:
        InputError: unknown kind.
    """

    return make_probes(kb, kinds=list(kinds), seed=seed)


def kb_texts(kb: KB, keys=None) -> list[QAItem]:
    """Plain-text items (:data:`TEXT_KIND`): the statement sentence of each fact.

    Args:
        kb: the KB.
        keys: (fact kind, fact_id) pairs to include, fact kind "relationship" or "biography" (None: every fact).

    Returns:
        list of :class:`QAItem` with ``kind="text"``, ``question=""`` and the sentence as ``answer``, in KB order.

    Source: EDU-RELAT's fact template (Wu et al. 2025); MUSE's verbatim corpus (Shi et al. 2024b, C1).
    """

    wanted = None if keys is None else {(k, int(i)) for k, i in keys}
    return [
        QAItem(TEXT_KIND, k, i, "", s)
        for (k, i), s in fact_statements(kb).items()
        if wanted is None or (k, i) in wanted
    ]


#: Names of the plain-text corpora in rows' ``trained_forms``: the statement sentences (:func:`kb_texts`, MUSE's
#: verbatim corpus) and the description sentences (:func:`kb_descriptions`, RWKU's synthetic corpus). Both are
#: :data:`TEXT_KIND` items.
STATEMENT_FORM, DESCRIPTION_FORM = "statement", "description"


def kb_descriptions(kb: KB, keys=None) -> list[QAItem]:
    """Plain-text items (:data:`TEXT_KIND`): a synthetic description of each fact, one item per sentence frame of
    ``templates/descriptions.json`` (three per relationship and per biography attribute).

    The frames describe a fact in other words than every probe: none is the statement sentence (the cloze prompt
    with its answer), a question or a filled paraphrase frame, so a description corpus never contains what a probe
    asks or scores.

    Args:
        kb: the KB.
        keys: (fact kind, fact_id) pairs to include, fact kind "relationship" or "biography" (None: every fact).

    Returns:
        list of :class:`QAItem` with ``kind="text"``, ``question=""`` and the sentence as ``answer``, in KB order
        (relationships, then biographies), frame by frame within a fact.

    A KB with another schema (not the family one) is described with its relations' (attributes') templates
    (:func:`description_templates`): every ``description`` template, else the ``fact`` template(s), e.g. "The
    capital of France is Paris." for ``capital: {fact: "The capital of {s} is {o}."}``.

    Raises:
        InputError: a KB with another schema whose relation (attribute) with facts has neither template
            (:func:`description_templates`).

    Source: Jin et al. 2024 (RWKU), Sec. 3.1 and App. G.1 (the synthetic forget corpus: text about the target, not
    the probes); the family frames are dukb's, another schema's are its own templates.
    """

    wanted = None if keys is None else {(k, int(i)) for k, i in keys}
    if not kb.schema.is_family:
        return _schema_descriptions(kb, wanted)
    t = load_template("descriptions.json")
    out = []
    for f in kb.relationships:
        if wanted is None or ("relationship", f.fact_id) in wanted:
            out += [
                QAItem(TEXT_KIND, "relationship", f.fact_id, "", fr.format(s=f.subject, r=f.relation, o=f.object))
                for fr in t["relationship"]
            ]
    for b in kb.biographies:
        if wanted is None or ("biography", b.fact_id) in wanted:
            out += [
                QAItem(TEXT_KIND, "biography", b.fact_id, "", fr.format(s=b.subject, v=b.value))
                for fr in t["biography"][b.attribute]
            ]
    return out


#: The template forms a description sentence comes from, in order of preference (the first a relation has).
DESCRIPTION_TEMPLATES = ("description", "fact")


def description_templates(kb: KB) -> dict[tuple[str, str], tuple[str, ...]]:
    """The description templates of every relation (attribute) of a KB with another schema that has facts: its
    ``description`` template(s) if the schema gives any, else its ``fact`` template(s).

    Args:
        kb: a KB whose schema is not the family one.

    Returns:
        ("relationship" | "biography", relation or attribute name) -> templates (placeholders ``{s}``, ``{o}``,
        ``{r}``; an attribute's ``{s}``, ``{v}``, ``{a}``).

    Raises:
        InputError: ``SCHEMA.YAML:LINE: relation 'R' has no 'description' or 'fact' template (nor has ...): rwku's
            description corpus needs one for every relation with facts``; a template with ``{wrong}`` (a description
            states the fact, never a wrong object).

    Source: Jin et al. 2024 (RWKU), Sec. 3.1 (the synthetic forget corpus: text the model writes about the target,
    jinzhuoran/RWKU generation/pair_generation.py:89 "Please write a short biography of {}."); here the schema's own
    sentences about each fact.

    Example:
        >>> import tempfile, pathlib
        >>> from dukb.kb.io import load_kb
        >>> files = {"entities.csv": "name,type\\nParis,city\\nFrance,country\\n",
        ...          "relationships.csv": "fact_id,subject,relation,object\\n0,France,capital,Paris\\n",
        ...          "schema.yaml": "schema_version: 1\\nname: geo\\nentity_types: [city, country]\\nrelations:\\n"
        ...                         "  capital: {templates: {fact: 'The capital of {s} is {o}.'}}\\n"}
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     for name, text in files.items():
        ...         _ = (pathlib.Path(tmp) / name).write_text(text)
        ...     [it.answer for it in kb_descriptions(load_kb(tmp))]
        ['The capital of France is Paris.']
    """
    schema = kb.schema
    by_attr = {a.name: a for a in schema.attributes}
    specs = [("relationship", r) for r in schema.relations if r.name in {f.relation for f in kb.relationships}]
    specs += [
        ("biography", by_attr.get(a) or AttributeSpec(a)) for a in dict.fromkeys(b.attribute for b in kb.biographies)
    ]
    out: dict[tuple[str, str], tuple[str, ...]] = {}
    lacking = []
    for kind, spec in specs:
        t = next((t for form in DESCRIPTION_TEMPLATES if (t := spec.template(form)) is not None), None)
        if t is None:
            lacking.append(spec)
            continue
        texts = (t,) if isinstance(t, str) else tuple(t)
        if any("{wrong}" in x for x in texts):
            raise InputError(
                f"the description template of '{spec.name}' uses {{wrong}}: a description states the fact itself",
                schema.path,
                spec.line or None,
            )
        out[(kind, spec.name)] = texts
    if lacking:
        first, rest = lacking[0], lacking[1:]
        also = f" (nor has {', '.join(repr(s.name) for s in rest)})" if rest else ""
        what = "relation" if isinstance(first, RelationSpec) else "attribute"
        raise InputError(
            f"{what} '{first.name}' has no 'description' or 'fact' template{also}: rwku's description "
            "corpus needs one for every relation with facts",
            schema.path,
            first.line or None,
        )
    return out


def _schema_descriptions(kb: KB, wanted) -> list[QAItem]:
    """:func:`kb_descriptions` of a KB with another schema: each fact's description templates filled."""
    frames = description_templates(kb)
    out = []
    for f in kb.relationships:
        if wanted is None or ("relationship", f.fact_id) in wanted:
            out += [
                QAItem(TEXT_KIND, "relationship", f.fact_id, "", t.format(s=f.subject, r=f.relation, o=f.object))
                for t in frames[("relationship", f.relation)]
            ]
    for b in kb.biographies:
        if wanted is None or ("biography", b.fact_id) in wanted:
            out += [
                QAItem(TEXT_KIND, "biography", b.fact_id, "", t.format(s=b.subject, v=b.value, a=b.attribute))
                for t in frames[("biography", b.attribute)]
            ]
    return out


def vocabulary_texts(kb: KB, tags, extra_kinds: tuple[str, ...] = (), statements: bool = False) -> list[str]:
    """Every text the tiny model's tokenizer must cover: prompts and answers of the QA forms (and extra kinds), and
    with ``statements`` every plain text dukb trains on: each fact's statement sentence (MUSE's corpus) and its
    description sentences (:func:`kb_descriptions`, RWKU's corpus). A KB with another schema whose relation has no
    ``fact`` template has no statement sentences (rwku describes its facts with ``description`` templates).

    Raises:
        InputError: with ``statements``, a KB with another schema whose relation has neither a ``description`` nor a
            ``fact`` template (:func:`description_templates`).
    """
    items = kb_qa(kb, (QA_KIND,) + tuple(extra_kinds))
    texts = [tags.prompt(it.question) + tags.target(it.answer) for it in items]
    texts += [p.name for p in kb.people.values()]
    if statements:
        try:
            texts += [it.answer for it in kb_texts(kb)]
        except InputError:  # another schema without fact templates: nothing dukb trains on states facts that way
            if kb.schema.is_family:
                raise
        texts += [it.answer for it in kb_descriptions(kb)]
    return texts


def encode_qa(tokenizer, tags, items: list[QAItem], device: str = "cpu", max_length: int | None = None):
    """Tokenise prompt+answer pairs for teacher forcing, loss on answer tokens only (a :data:`TEXT_KIND` item:
    its text, loss on every token).

    Args:
        tokenizer: HF tokenizer (any padding side; this builds left-padded tensors itself).
        tags: :class:`dukb.neural.spec.PromptTags`.
        items: the QA items (B of them).
        device: torch device.
        max_length: optional truncation (tokens) of prompt+answer, from the left.

    Returns:
        dict with ``input_ids`` [B, L] (long), ``attention_mask`` [B, L] (0/1), ``labels`` [B, L] (-100 except on
        answer tokens and the closing EOS), ``position_ids`` [B, L].

    Raises:
        InputError: no items.
    """
    eos = tokenizer.eos_token_id
    rows = []
    for it in items:
        if it.kind == TEXT_KIND:  # a plain text: every token is trained / scored
            t = tokenizer(it.answer, add_special_tokens=False)["input_ids"] + ([eos] if eos is not None else [])
            rows.append((t, list(t)))
            continue
        p, a = qa_ids(tokenizer, tags, it.question, it.answer)
        if eos is not None:
            a = a + [eos]
        rows.append((p + a, [-100] * len(p) + a))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    return pad_rows(rows, pad, device, max_length)


def bos_ids(tokenizer, tags) -> list[int]:
    """The tokens that start every prompt: ``[tokenizer.bos_token_id]`` when ``tags.bos`` (Eval-DU's Llama models,
    :func:`dukb.neural.spec.adds_bos`), else none.

    Raises:
        InputError: ``tags.bos`` and the tokenizer has no BOS token.

    Source: Eval-DU's code, data_module.py:14-19 (``add_special_tokens=True``) and evaluate_util.py:9 (vLLM's).
    """
    if not getattr(tags, "bos", False):
        return []
    bos = tokenizer.bos_token_id
    if bos is None:
        raise InputError("--bos family: this model's tokenizer has no BOS token")
    return [bos]


def qa_ids(tokenizer, tags, question: str, answer: str) -> tuple[list[int], list[int]]:
    """The token ids of one QA item's prompt and answer (the answer's EOS not included).

    dukb (``tags.joint`` False): ``tags.prompt(question)`` and ``tags.target(answer)`` tokenised apart. Eval-DU's code
    (``tags.joint``): the text ``prompt + target`` tokenised as one string and split after as many tokens as the prompt
    alone has (data_module.py:11-39: ``num_question_tokens`` masks the question). Either way BOS first when
    ``tags.bos`` (:func:`bos_ids`), on the prompt's side.

    Args:
        tokenizer: an HF tokenizer; tags: :class:`dukb.neural.spec.PromptTags`; question, answer: the item's text.

    Returns:
        ``(prompt ids, answer ids)``; the first is what a probe continues, the second what training and scoring read.

    Raises:
        InputError: ``tags.bos`` without a BOS token.
    """
    prompt, target = tags.prompt(question), tags.target(answer)
    first = bos_ids(tokenizer, tags)
    p = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    if getattr(tags, "joint", False):
        full = tokenizer(prompt + target, add_special_tokens=False)["input_ids"]
        return first + full[: len(p)], full[len(p) :]
    return first + p, tokenizer(target, add_special_tokens=False)["input_ids"]


def pad_rows(
    rows: Sequence[tuple[list[int], list[int]]], pad_id: int, device: str = "cpu", max_length: int | None = None
) -> dict:
    """Left-pad ``(ids, labels)`` rows into a batch.

    Args:
        rows: (token ids, labels) pairs of equal length (:func:`encode_qa`, :func:`dukb.neural.docs.sequence_rows`).
        pad_id: the padding token id.
        device: torch device.
        max_length: keep at most this many tokens of each row (the last ones).

    Returns:
        dict with ``input_ids``, ``attention_mask``, ``labels`` (-100 on padding), ``position_ids``, each [B, L]
        long tensors.

    Raises:
        InputError: no rows.
    """
    import torch

    if not rows:
        raise InputError("nothing to encode: no QA items and no texts")
    cut = [(i[-max_length:], lab[-max_length:]) if max_length else (i, lab) for i, lab in rows]
    width = max(len(i) for i, _ in cut)
    input_ids = torch.full((len(cut), width), pad_id, dtype=torch.long)
    labels = torch.full((len(cut), width), -100, dtype=torch.long)
    mask = torch.zeros((len(cut), width), dtype=torch.long)
    for r, (ids, lab) in enumerate(cut):
        input_ids[r, width - len(ids) :] = torch.tensor(ids)
        labels[r, width - len(ids) :] = torch.tensor(lab)
        mask[r, width - len(ids) :] = 1
    position_ids = (mask.cumsum(-1) - 1).clamp(min=0)
    return {
        k: v.to(device)
        for k, v in dict(input_ids=input_ids, attention_mask=mask, labels=labels, position_ids=position_ids).items()
    }


def model_device(model) -> str:
    """The device of ``model``'s first parameter as a torch device string (``"cuda:0"``, ``"cpu"``); ``"cpu"``
    when it has none (a stand-in module in tests)."""
    try:
        return str(next(model.parameters()).device)
    except (StopIteration, AttributeError):
        return "cpu"
