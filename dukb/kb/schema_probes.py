"""Probe forms of a KB with its own schema (issue 43): every question comes from the relation's (or attribute's)
templates in ``schema.yaml``; a form a relation lacks is *unscorable* for its facts, counted with its reason, never
silently skipped.

For a fact ``(s, r, o)`` of relation ``r`` (templates ``fact``, ``cloze``, ``qa``, ``yes``, ``no``, ``paraphrase``,
``reverse``, ``synonym``, ``cross_lingual_fr|de|es``, ... of :data:`dukb.kb.kbschema.TEMPLATE_FORMS`):

- ``cloze``, ``qa``, ``paraphrase`` (one of the list, drawn), ``synonym`` and ``cross_lingual_*`` fill the template of
  that form; the answer is the object ``o`` (with its aliases, :mod:`dukb.kb.aliases`), or the relation's name when
  the relation declares ``qa_answer: relation`` (the family KB's "Who is {o} to {s}?"). When the closure gives
  ``s`` other objects under ``r`` (a relation that is not functional: "Which country borders France?"), they are
  named and excluded ("..., other than Belgium and Spain?"; a cloze prompt: "Besides Belgium and Spain, ..."), so
  that ``o`` is the only right answer, as the family reverse form does;
- ``yes`` fills its template (answer "yes"); ``no`` fills its template with ``{wrong}``: a wrong object of the
  relation's object type that the closure does not give (a wrong relation for ``qa_answer: relation``); answer "no";
- ``reverse`` asks for the subject ("Name a city in {o}."); the other subjects the closure gives are named and
  excluded ("..., other than Paris and Marseille."), so the gold answer is the only right one (as the family
  reverse form does); a reverse template that names ``{s}`` and not ``{o}`` (the family schema's "Who is {s}'s
  father?") asks for the object instead, the other objects excluded;
- RWKU's adversarial kinds (Jin et al. 2024, Sec. 3.3) wrap the relation's ``qa`` question with generic frames:
  ``prefix_injection``, ``affirmative_suffix`` (templates/probes.json), ``role_play`` (its "schema" block),
  ``multiple_choice`` (4 options, distractors of the object's type, false per the closure), ``context_hint``
  (statements of other facts about s or o that do not contain the answer), ``in_context`` (another fact's question
  and answer first). A relation's own template of one of these forms replaces the wrapped question.
- A biography fact ``(s, a, v)`` is asked through its attribute's templates (placeholders ``{s}``, ``{v}``,
  ``{a}``), answer ``v``; ``no`` and ``reverse`` do not apply to attributes.

Source: Wu et al. 2025, Table 3 (EDU-RELAT's forms) and App. C (the substring judge); Jin et al. 2024, RWKU Sec. 3.3
(the adversarial types).
"""

from __future__ import annotations

import random
import string
from collections.abc import Sequence
from typing import Any

from dukb import InputError
from dukb.kb.judge import MATCH_CHOICE, MATCH_SUBSTRING, MATCH_YESNO
from dukb.kb.kbschema import AttributeSpec, RelationSpec
from dukb.kb.model import KB, BioFact, Fact
from dukb.kb.templates import load_template

#: What a kind asks about a fact: (question, gold answer, match rule, aliases of the answer).
Asked = tuple[str, str, str, tuple[str, ...]]
#: Reason of a fact without a probe of a kind when its data, not its templates, rule it out.
NOT_APPLICABLE = "not applicable to the fact"
#: Reason of a fact without a context hint when no relation or attribute of the schema has a ``fact`` template: a hint
#: states other facts, and no fact has a statement.
NO_FACT_STATEMENTS = "no 'fact' template in the schema for a hint to state other facts"
#: Kinds that wrap the relation's qa question unless the relation has a template of their own.
WRAPPING = ("prefix_injection", "affirmative_suffix", "role_play", "multiple_choice", "context_hint", "in_context")
#: Kinds that do not apply to attributes (biography facts).
RELATION_ONLY = ("no", "reverse")


def _fields(template: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(template) if f}


def _join(names: Sequence[str], joiners: Sequence[str]) -> str:
    sep, last = joiners
    return names[0] if len(names) == 1 else sep.join(names[:-1]) + last + names[-1]


def wrong_objects(index: Any, f: Fact, pool: Sequence[str], n: int, rng: random.Random) -> list[str]:
    """Up to ``n`` names of ``pool`` that are neither the fact's subject nor its object and that the closure does not
    give as objects of ``(f.subject, f.relation)``: the wrong options of a multiple-choice question and the
    ``{wrong}`` of a no question.

    A large pool (over ``8 n + 64``) is sampled by rejection first (``16 n + 64`` draws) instead of scanned; else,
    or when that finds fewer than ``n``, ``rng.sample`` of every fitting name in pool order.

    Args:
        index: the KB's :class:`dukb.kb.probes.FactIndex`; f: the fact; pool: candidate names; n: how many;
            rng: the generator (the same draws give the same names).

    Source: Jin et al. 2024, RWKU Sec. 3.3 (multiple choice with false options).

    Example:
        >>> from dukb.kb.io import load_kb
        >>> from dukb.kb.probes import FactIndex
        >>> kb = load_kb("demo")
        >>> wrong = wrong_objects(FactIndex(kb), kb.relationship(0), list(kb.people), 3, random.Random(0))
        >>> len(wrong), "George Hale" in wrong
        (3, False)
    """

    def fits(x: str) -> bool:
        return x not in (f.subject, f.object) and not index.holds(f.subject, f.relation, x)

    if len(pool) > 8 * n + 64:  # large KB: rejection sampling instead of a scan over everyone
        picked: dict[str, None] = {}
        for _ in range(16 * n + 64):
            x = pool[rng.randrange(len(pool))]
            if fits(x):
                picked[x] = None
                if len(picked) == n:
                    return list(picked)
    fitting = [x for x in pool if fits(x)]
    return rng.sample(fitting, min(n, len(fitting)))


class SchemaForms:
    """Builds the probes of a KB whose schema is not the family one, from the schema's templates.

    Args:
        kb: the KB.
        index: its :class:`dukb.kb.probes.FactIndex` (closure look-ups); None: only statements
            (:meth:`sentence`) are asked for.
        seed: seed of every random choice (template of a list, wrong object, distractors, hint and demonstration
            facts): one generator per ``(seed, kind, fact kind, fact_id)``.
        aliases: name -> aliases (:func:`dukb.kb.aliases.load_aliases`).

    Example:
        >>> import tempfile, pathlib
        >>> from dukb.kb.io import load_kb
        >>> from dukb.kb.probes import FactIndex
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     d = pathlib.Path(tmp)
        ...     _ = (d / "schema.yaml").write_text("schema_version: 1\\nname: geo\\nentity_types: [city, country]\\n"
        ...         "relations:\\n  in_country:\\n    subject: city\\n    object: country\\n"
        ...         "    templates: {qa: 'In which country is {s}?'}\\n")
        ...     _ = (d / "entities.csv").write_text("name,type\\nLyon,city\\nFrance,country\\n")
        ...     _ = (d / "relationships.csv").write_text("fact_id,subject,relation,object\\n0,Lyon,in_country,France\\n")
        ...     kb = load_kb(d)
        >>> forms = SchemaForms(kb, FactIndex(kb), 0, {"France": ("la France",)})
        >>> forms.build("qa", kb.relationship(0))
        ('In which country is Lyon?', 'France', 'substring', ('la France',))
        >>> forms.build("reverse", kb.relationship(0))
        "no 'reverse' template"
    """

    def __init__(self, kb: KB, index: Any, seed: int, aliases: dict[str, tuple[str, ...]]):
        self.kb, self.ix, self.seed, self.aliases = kb, index, seed, aliases
        schema = kb.schema
        self.rel_spec = {r.name: r for r in schema.relations}
        self.attr_spec = {a.name: a for a in schema.attributes}
        self.t = load_template("probes.json")
        self.subjects: dict[tuple[str, str], list[str]] = {}
        for s, r, o in sorted(index.triples if index is not None else ()):
            self.subjects.setdefault((r, o), []).append(s)
        self.rels, self.bios = list(kb.relationships), list(kb.biographies)
        specs: list[RelationSpec | AttributeSpec] = [*schema.relations, *schema.attributes]
        self.stated = any(x.template("fact") is not None for x in specs)

    # -- helpers ------------------------------------------------------------------------------------------------
    def rng(self, kind: str, f: Fact | BioFact) -> random.Random:
        fk = "relationship" if isinstance(f, Fact) else "biography"
        return random.Random("/".join(str(k) for k in ("dukb-schema-probes", self.seed, kind, fk, f.fact_id)))

    def spec(self, f: Fact | BioFact) -> RelationSpec | AttributeSpec:
        return (
            self.rel_spec[f.relation]
            if isinstance(f, Fact)
            else self.attr_spec.get(f.attribute) or AttributeSpec(f.attribute)
        )

    def template(self, f: Fact | BioFact, form: str, rng: random.Random | None) -> str | None:
        t = self.spec(f).template(form)
        if t is None or isinstance(t, str):
            return t
        return t[0] if rng is None else rng.choice(t)

    def fill(self, t: str, f: Fact | BioFact, rng: random.Random | None) -> str | None:
        """The template filled for the fact; None when it needs a ``{wrong}`` the KB cannot give."""
        if isinstance(f, BioFact):
            return t.format(s=f.subject, v=f.value, a=f.attribute)
        kw = {"s": f.subject, "o": f.object, "r": f.relation}
        if "wrong" in _fields(t):
            wrong = self.wrong(f, rng or self.rng("wrong", f))
            if wrong is None:
                return None
            kw["wrong"] = wrong
        return t.format(**kw)

    def answer(self, f: Fact | BioFact) -> tuple[str, tuple[str, ...]]:
        """The gold answer of the fact's question forms and its aliases."""
        if isinstance(f, BioFact):
            return f.value, self.aliases.get(f.value, ())
        if self.rel_spec[f.relation].qa_answer == "relation":
            return f.relation, ()
        return f.object, self.aliases.get(f.object, ())

    def sentence(self, f: Fact | BioFact) -> str | None:
        """The fact's statement (its ``fact`` template), or None."""
        t = self.template(f, "fact", None)
        return None if t is None else self.fill(t, f, None)

    def _wrong_objects(self, f: Fact, n: int, rng: random.Random) -> list[str]:
        """Up to ``n`` entities of the relation's object type that the closure does not give as objects."""
        need = self.rel_spec[f.relation].object
        return wrong_objects(
            self.ix, f, self.ix.by_gender.get(need, []) if need != "any" else list(self.kb.people), n, rng
        )

    def _wrong_relations(self, f: Fact, n: int, rng: random.Random) -> list[str]:
        true = self.ix.pair_relations.get((f.subject, f.object), set()) | {f.relation}
        pool = [r for r in self.rel_spec if r not in true]
        return rng.sample(pool, min(n, len(pool)))

    def wrong(self, f: Fact, rng: random.Random) -> str | None:
        """A wrong object (a wrong relation for ``qa_answer: relation``), false per the closure; None if none."""
        if self.rel_spec[f.relation].qa_answer == "relation":
            got = self._wrong_relations(f, 1, rng)
        else:
            got = self._wrong_objects(f, 1, rng)
        return got[0] if got else None

    def others(self, f: Fact | BioFact) -> list[str]:
        """The other right answers of the fact's question forms: the other objects (values) the closure (KB) gives
        its subject under its relation (attribute); none for a ``qa_answer: relation`` relation."""
        if isinstance(f, BioFact):
            return sorted(self.ix.values(f.subject, f.attribute) - {f.value})
        if self.rel_spec[f.relation].qa_answer == "relation":
            return []
        return [x for x in self.ix.objects.get((f.subject, f.relation), ()) if x != f.object]

    def exclude(self, q: str, others: Sequence[str], cloze: bool = False) -> str:
        """``q`` with ``others`` named as excluded answers (unchanged when there are none)."""
        if not others:
            return q
        g = self.t["schema"]
        names = _join(list(others), g["list"])
        if cloze:
            return g["exclude_cloze"].format(q=q, others=names)
        end = q[-1] if q[-1:] in ("?", ".") else ""
        return g["exclude"].format(q=q[: len(q) - len(end)], others=names, end=end)

    def inner(self, kind: str, f: Fact | BioFact, rng: random.Random) -> tuple[str | None, bool]:
        """The question a wrapping kind asks: (its own template filled, True) or (the qa question, False), the
        other right answers excluded (:meth:`exclude`)."""
        own = self.template(f, kind, rng)
        t = own if own is not None else self.template(f, "qa", rng)
        q = None if t is None else self.fill(t, f, rng)
        return (None if q is None else self.exclude(q, self.others(f))), own is not None

    # -- the kinds: each returns the probe, or a string saying why the fact has none --------------------------------
    def build(self, kind: str, f: Fact | BioFact) -> Asked | str:
        """The probe of ``kind`` for fact ``f``, or the reason it has none: ``"no 'FORM' template"`` (the relation
        lacks it), ``"form does not apply to attributes"``, :data:`NO_FACT_STATEMENTS` (a context hint in a schema
        without ``fact`` templates) or :data:`NOT_APPLICABLE` (its data rule it out)."""
        if isinstance(f, BioFact) and kind in RELATION_ONLY:
            return "form does not apply to attributes"
        rng = self.rng(kind, f)
        if kind in WRAPPING:
            if self.spec(f).template(kind) is None and self.spec(f).template("qa") is None:
                return "no 'qa' template"
            out = getattr(self, kind)(f, rng)
        else:
            t = self.template(f, kind, rng)
            if t is None:
                return f"no '{kind}' template"
            out = self.plain(kind, t, f, rng)
        if out is None:
            return NO_FACT_STATEMENTS if kind == "context_hint" and not self.stated else NOT_APPLICABLE
        return out

    def plain(self, kind: str, t: str, f: Fact | BioFact, rng: random.Random) -> Asked | None:
        q = self.fill(t, f, rng)
        if q is None:
            return None
        if kind == "yes":
            return q, "yes", MATCH_YESNO, ()
        if kind == "no":
            return q, "no", MATCH_YESNO, ()
        if kind == "reverse":
            assert isinstance(f, Fact)
            if "o" in _fields(t):  # names the object, asks for the subject ("Name a city in {o}.")
                others = [x for x in self.subjects.get((f.relation, f.object), ()) if x != f.subject]
                return self.exclude(q, others), f.subject, MATCH_SUBSTRING, self.aliases.get(f.subject, ())
            # names the subject, asks for the object (the family schema's "Who is {s}'s father?")
            others = [x for x in self.ix.objects.get((f.subject, f.relation), ()) if x != f.object]
            return self.exclude(q, others), f.object, MATCH_SUBSTRING, self.aliases.get(f.object, ())
        answer, alias = self.answer(f)
        return self.exclude(q, self.others(f), kind == "cloze"), answer, MATCH_SUBSTRING, alias

    def _wrap(self, key: str, frames: Sequence[str], f: Fact | BioFact, rng: random.Random) -> Asked | None:
        q, own = self.inner(key, f, rng)
        if q is None:
            return None
        answer, alias = self.answer(f)
        return q if own else rng.choice(frames).format(q=q, s=f.subject), answer, MATCH_SUBSTRING, alias

    def prefix_injection(self, f: Fact | BioFact, rng: random.Random) -> Asked | None:
        return self._wrap("prefix_injection", self.t["prefix_injection"], f, rng)

    def affirmative_suffix(self, f: Fact | BioFact, rng: random.Random) -> Asked | None:
        return self._wrap("affirmative_suffix", self.t["affirmative_suffix"], f, rng)

    def role_play(self, f: Fact | BioFact, rng: random.Random) -> Asked | None:
        return self._wrap("role_play", self.t["schema"]["role_play"], f, rng)

    def multiple_choice(self, f: Fact | BioFact, rng: random.Random) -> Asked | None:
        q, _ = self.inner("multiple_choice", f, rng)
        mc = self.t["multiple_choice"]
        n = len(mc["labels"]) - 1
        if q is None:
            return None
        answer, alias = self.answer(f)
        if isinstance(f, BioFact):
            true = self.ix.values(f.subject, f.attribute) | {f.value}
            pool = [v for v in self.ix.attribute_values(f.attribute) if v not in true]
            wrong = rng.sample(pool, min(n, len(pool)))
        elif answer == f.relation and self.rel_spec[f.relation].qa_answer == "relation":
            wrong = self._wrong_relations(f, n, rng)
        else:
            wrong = self._wrong_objects(f, n, rng)
        if not wrong:
            return None
        options = wrong + [answer]
        rng.shuffle(options)
        lines = "\n".join(mc["option"].format(label=lab, text=t) for lab, t in zip(mc["labels"], options))
        return mc["frame"].format(q=q, options=lines), answer, MATCH_CHOICE, alias

    def context_hint(self, f: Fact | BioFact, rng: random.Random) -> Asked | None:
        q, _ = self.inner("context_hint", f, rng)
        if q is None:
            return None
        answer, alias = self.answer(f)
        who = (f.subject, f.object) if isinstance(f, Fact) else (f.subject,)
        near: list[Fact | BioFact] = [g for w in who for g in self.ix.rels_of.get(w, ())]
        near += [b for w in who for b in self.ix.bios_of.get(w, ())]
        said = [a.lower() for a in (answer, *alias)]
        pool = []
        for g in dict.fromkeys(near):
            text = None if g == f else self.sentence(g)
            if text is not None and not any(a in text.lower() for a in said):
                pool.append(text)
        if not pool:
            return None
        hint = " ".join(pool[i] for i in sorted(rng.sample(range(len(pool)), min(2, len(pool)))))
        return self.t["context_hint"]["frame"].format(hint=hint, q=q), answer, MATCH_SUBSTRING, alias

    def in_context(self, f: Fact | BioFact, rng: random.Random) -> Asked | None:
        q, _ = self.inner("in_context", f, rng)
        if q is None:
            return None

        def usable(g: Fact | BioFact) -> bool:
            if g == f or self.spec(g).template("qa") is None:
                return False
            return not (isinstance(f, Fact) and isinstance(g, Fact) and {g.subject, g.object} == {f.subject, f.object})

        who = (f.subject, f.object) if isinstance(f, Fact) else (f.subject,)
        near = [g for w in who for g in list(self.ix.rels_of.get(w, ())) + list(self.ix.bios_of.get(w, ()))]
        pool = [g for g in dict.fromkeys(near) if usable(g)] or [g for g in self.rels + self.bios if usable(g)]
        if not pool:
            return None
        demo = rng.choice(pool)
        demo_q = self.fill(self.template(demo, "qa", rng) or "", demo, rng)
        if not demo_q:
            return None
        answer, alias = self.answer(f)
        frame = self.t["in_context"]["frame"]
        return frame.format(demo_q=demo_q, demo_a=self.answer(demo)[0], q=q), answer, MATCH_SUBSTRING, alias


def schema_statements(kb: KB, partial: bool = False) -> dict[tuple[str, int], str]:
    """The statement of every fact of a KB with its own schema: its relation's (attribute's) ``fact`` template.

    Args:
        kb: the KB; partial: leave out the facts whose relation (attribute) has no ``fact`` template instead of
            raising (:func:`without_fact_template` names them).

    Returns:
        (fact kind, fact_id) -> sentence, relationships then biographies, in file order.

    Raises:
        InputError: a relation or attribute with facts but no ``fact`` template (named, with its schema.yaml line):
            a fact has no verbatim text then, and what needs one (MUSE's corpus, statement finetuning, context
            hints) cannot be built.

    Source: Wu et al. 2025 (EDU-RELAT's fact template, here the schema's).

    Example:
        >>> import tempfile, pathlib
        >>> from dukb.kb.io import load_kb
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     d = pathlib.Path(tmp)
        ...     _ = (d / "schema.yaml").write_text("schema_version: 1\\nname: geo\\nentity_types: [city, country]\\n"
        ...         "relations:\\n  in_country:\\n    subject: city\\n    object: country\\n"
        ...         "    templates: {fact: '{s} is a city in {o}.'}\\n")
        ...     _ = (d / "entities.csv").write_text("name,type\\nLyon,city\\nFrance,country\\n")
        ...     _ = (d / "relationships.csv").write_text("fact_id,subject,relation,object\\n0,Lyon,in_country,France\\n")
        ...     schema_statements(load_kb(d))
        {('relationship', 0): 'Lyon is a city in France.'}
    """
    lacking = without_fact_template(kb)
    if lacking and not partial:
        names = ", ".join(f"'{s.name}'" + (f" (line {s.line})" if s.line else "") for s in lacking)
        raise InputError(
            f"no 'fact' template for {names}: a fact statement is needed here; add templates: {{fact: ...}} to each",
            kb.schema.path,
        )
    skip = {s.name for s in lacking}
    forms = SchemaForms(kb, None, 0, {})
    out: dict[tuple[str, int], str] = {}
    for f in kb.relationships:
        if f.relation not in skip:
            out[("relationship", f.fact_id)] = forms.sentence(f) or ""
    for b in kb.biographies:
        if b.attribute not in skip:
            out[("biography", b.fact_id)] = forms.sentence(b) or ""
    return out


def without_fact_template(kb: KB) -> list[RelationSpec | AttributeSpec]:
    """The relations, then attributes, with facts in a KB with its own schema but no ``fact`` template (so no
    statement sentence, :func:`schema_statements`), in schema (file) order; ``[]`` for the family schema.

    Example:
        >>> from dukb.kb.io import load_kb
        >>> without_fact_template(load_kb("demo"))
        []
    """
    schema = kb.schema
    if schema.is_family:
        return []
    used = {f.relation for f in kb.relationships}
    specs: list[RelationSpec | AttributeSpec] = [r for r in schema.relations if r.name in used]
    by_attr = {a.name: a for a in schema.attributes}
    specs += [by_attr.get(a) or AttributeSpec(a) for a in dict.fromkeys(b.attribute for b in kb.biographies)]
    return [s for s in specs if s.template("fact") is None]


def unscorable_summary(report: dict[str, dict[str, Any]]) -> list[str]:
    """One line per probe kind with unscorable facts, from :func:`dukb.kb.probes.probe_report`'s report.

    Example:
        >>> unscorable_summary({"reverse": {"probes": 3, "unscorable": {"relationships": 2, "biographies": 0},
        ...                                 "reasons": {"no 'reverse' template": {"kid": 2}}}})
        ["reverse: 2 relationship facts unscorable (no 'reverse' template: kid 2); 3 probes"]
    """
    out = []
    for kind, r in report.items():
        un = r["unscorable"]
        if not un["relationships"] and not un["biographies"]:
            continue
        parts = [f"{n} {'relationship' if k == 'relationships' else 'biography'} facts" for k, n in un.items() if n]
        why = "; ".join(
            f"{reason}: {', '.join(f'{name} {n}' for name, n in names.items())}"
            for reason, names in r["reasons"].items()
        )
        out.append(f"{kind}: {' and '.join(parts)} unscorable ({why}); {r['probes']} probes")
    return out


def require_templates(kb: KB, forms: Sequence[str], what: str) -> None:
    """Refuse, in one line, a KB with its own schema where a relation (or attribute) that has facts lacks a template
    that ``what`` needs: a path that trains or scores every fact under a form cannot leave facts out.

    Args:
        kb: the KB (a family KB always passes: its forms cover every relation).
        forms: the template forms needed, e.g. ``("qa",)``.
        what: the path, for the message (``"evaluate (finetunes and scores every fact on the qa form)"``).

    Raises:
        InputError: ``SCHEMA.YAML:LINE: relation 'R' has no 'FORM' template (also ...): WHAT needs it``.

    Source: Wu et al. 2025, App. C and H (every fact is finetuned and probed in the QA form).

    Example:
        >>> from dukb.kb.io import load_kb
        >>> require_templates(load_kb("demo"), ("qa",), "evaluate")  # the family KB: returns None
    """
    schema = kb.schema
    if schema.is_family:
        return
    used = {f.relation for f in kb.relationships}
    attrs = {b.attribute for b in kb.biographies}
    specs: list[RelationSpec | AttributeSpec] = [r for r in schema.relations if r.name in used]
    by_attr = {a.name: a for a in schema.attributes}
    specs += [by_attr.get(a) or AttributeSpec(a) for a in sorted(attrs)]
    missing = [(s, form) for s in specs for form in forms if s.template(form) is None]
    if not missing:
        return
    (first, form), rest = missing[0], missing[1:]
    kind = "relation" if isinstance(first, RelationSpec) else "attribute"
    names = [f"'{s.name}'" + (f" {f}" if len(forms) > 1 else "") for s, f in rest]
    also = f" (nor has {', '.join(names[:8])}{', ...' if len(names) > 8 else ''})" if rest else ""
    every = "relation and attribute" if any(isinstance(s, AttributeSpec) for s, _ in missing) else "relation"
    raise InputError(
        f"{kind} '{first.name}' has no '{form}' template{also}: {what} needs it for every {every} with facts",
        schema.path,
        first.line or None,
    )
