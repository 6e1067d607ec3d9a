"""A KB's schema: its entity types, relations (with subject/object types) and attributes, read from ``schema.yaml``.

A KB here is K of Wu et al. 2025 (Sec. 2): a set of facts ``(s, r, o)`` over a fixed vocabulary of relations, with
rules R over those relations (positive Horn rules over ``holds/3``) whose deductive closure Omega(K, R) the solver
computes. The schema fixes that vocabulary for one KB directory:

- ``entity_types``: each entity has one type (the type column of the entities file); each type is a unary background
  predicate of the rule language (``city(X)``), as ``male/1`` and ``female/1`` are for the family KB;
- ``entity_predicate``: a unary predicate true of every entity (family: ``person``);
- ``relations``: name, subject type, object type (or ``any``), ``functional`` (at most one object per subject,
  checked on load), ``symmetric`` (informational), and question templates per probe form;
- ``attributes``: biography-like facts ``(s, attribute, value)`` that take part in no rule.

A KB directory without ``schema.yaml`` has the family schema, shipped as ``dukb/data/schemas/family.yaml``: the 11
EDU-RELAT relations with the gender constraints of :mod:`dukb.kb.schema` as their type constraints, so every
existing KB, command and result stays the same.

The file is read with PyYAML's composer (``yaml.compose``), so every problem is reported at its line
(``FILE:LINE: problem``, :class:`dukb.InputError`): YAML syntax errors, duplicate keys, unknown keys (with the closest
known one), bad names, unknown types, a relation named like a type.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import string
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from dukb import InputError
from dukb.kb.csvfile import decode_text, read_bytes

#: Name of the schema file in a KB directory.
SCHEMA_FILE = "schema.yaml"
#: The subject/object type that admits every entity.
ANY = "any"
#: The one schema_version this dukb reads.
SCHEMA_VERSION = 1
#: Probe forms a template may be given for (``fact`` is the statement the model is finetuned on; ``description``:
#: sentences of RWKU's description corpus, default the ``fact`` template, :func:`dukb.neural.data.kb_descriptions`).
TEMPLATE_FORMS: tuple[str, ...] = (
    "fact",
    "description",
    "cloze",
    "qa",
    "yes",
    "no",
    "paraphrase",
    "reverse",
    "synonym",
    "prefix_injection",
    "affirmative_suffix",
    "role_play",
    "multiple_choice",
    "context_hint",
    "in_context",
    "cross_lingual_fr",
    "cross_lingual_de",
    "cross_lingual_es",
)
#: What a relation's qa form asks for: its object (default) or the relation word (the family KB's "Who is O to S?").
QA_ANSWERS = ("object", "relation")

_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")
#: Names no type, predicate or relation may take: rule-language keywords and dukb's own predicates.
_RESERVED = frozenset({"not", "holds", ANY, "dukb_inst", "true", "false"})
_REL_PLACEHOLDERS = frozenset({"s", "o", "wrong", "r"})
_ATTR_PLACEHOLDERS = frozenset({"s", "v", "a"})
_TOP_KEYS = (
    "schema_version",
    "name",
    "description",
    "entities",
    "entity_predicate",
    "entity_types",
    "relations",
    "attributes",
    "source",
)
_ENTITY_KEYS = ("file", "name_column", "type_column")
_RELATION_KEYS = ("subject", "object", "functional", "symmetric", "templates", "qa_answer")
_ATTRIBUTE_KEYS = ("subject", "templates")

Templates = tuple[tuple[str, "str | tuple[str, ...]"], ...]


@dataclass(frozen=True)
class RelationSpec:
    """One relation of a schema.

    Attributes:
        name: ``[a-z][a-z0-9_]*``, never an entity type.
        subject, object: the entity type a fact's subject/object must have, or ``"any"``.
        functional: at most one object per subject (checked when a KB is loaded).
        symmetric: (S,R,O) holds iff (O,R,S) holds (informational: the rules make it so).
        templates: (form, template) pairs; a template is a string or a tuple of strings (paraphrases).
        qa_answer: ``"object"`` or ``"relation"`` (what the qa form's answer is).
        line: the line of its declaration in schema.yaml (0 for a schema built in code).

    Example:
        >>> r = RelationSpec("located_in", "city", "region", functional=True)
        >>> r.template("cloze"), r.functional
        (None, True)
    """

    name: str
    subject: str = ANY
    object: str = ANY
    functional: bool = False
    symmetric: bool = False
    templates: Templates = ()
    qa_answer: str = "object"
    line: int = field(default=0, compare=False)

    def template(self, form: str) -> str | tuple[str, ...] | None:
        """The template of a probe form, or None when the relation has none."""
        return dict(self.templates).get(form)


@dataclass(frozen=True)
class AttributeSpec:
    """One attribute of a schema (facts ``(s, attribute, value)`` of biographies.csv; in no rule).

    Attributes:
        name: ``[a-z][a-z0-9_]*``.
        subject: the entity type of its subjects, or ``"any"``.
        templates: (form, template) pairs (placeholders ``{s}``, ``{v}``).

    Example:
        >>> AttributeSpec("job").subject, AttributeSpec("job", templates=(("qa", "What is {s}'s job?"),)).template("qa")
        ('any', "What is {s}'s job?")
    """

    name: str
    subject: str = ANY
    templates: Templates = ()
    line: int = field(default=0, compare=False)

    def template(self, form: str) -> str | tuple[str, ...] | None:
        """The template of a probe form, or None when the attribute has none."""
        return dict(self.templates).get(form)


@dataclass(frozen=True)
class Schema:
    """The vocabulary of a KB (see the module docstring); built by :func:`load_schema` or :func:`family_schema`.

    Attributes:
        name: a short identifier (``family``, ``geography``).
        entity_types: the types (each a unary background predicate of the rules).
        relations: the relations in declaration order (a fact's relation index is its position here).
        attributes: the attributes in declaration order.
        entity_predicate: the unary predicate true of every entity.
        entities_file, name_column, type_column: where the entities are read.
        description: one line.
        source: provenance (key, value) pairs, recorded in results.
        path: the schema.yaml it was read from (None: built in code).

    Example:
        >>> s = family_schema()
        >>> s.name, s.entity_types, s.relation_names[:3], s.background
        ('family', ('male', 'female'), ('child', 'father', 'mother'), ('male', 'female', 'person'))
        >>> s.type_violation("father", "female", "female")
        "the object of 'father' must be male, but is female"
        >>> s.is_family, len(s.fingerprint())
        (True, 16)
    """

    name: str
    entity_types: tuple[str, ...]
    relations: tuple[RelationSpec, ...]
    attributes: tuple[AttributeSpec, ...] = ()
    entity_predicate: str = "entity"
    entities_file: str = "entities.csv"
    name_column: str = "name"
    type_column: str = "type"
    description: str = ""
    source: tuple[tuple[str, str], ...] = ()
    path: str | None = field(default=None, compare=False)

    @property
    def relation_names(self) -> tuple[str, ...]:
        """The relations' names, in declaration order."""
        return tuple(r.name for r in self.relations)

    @property
    def attribute_names(self) -> tuple[str, ...]:
        """The attributes' names, in declaration order."""
        return tuple(a.name for a in self.attributes)

    @property
    def background(self) -> tuple[str, ...]:
        """The unary background predicates of the rule language: the entity types, then the entity predicate."""
        return self.entity_types + (self.entity_predicate,)

    def relation(self, name: str) -> RelationSpec:
        """The relation of this name. Raises KeyError when the schema has none."""
        for r in self.relations:
            if r.name == name:
                return r
        raise KeyError(name)

    def type_violation(self, relation: str, subject_type: str, object_type: str) -> str | None:
        """Why a fact ``(s, relation, o)`` with these entity types breaks its relation's types, or None.

        The object is checked first, then the subject (the order of
        :func:`dukb.kb.schema.gender_violation`, whose messages the family schema reproduces).

        Raises:
            KeyError: an unknown relation.
        """
        spec = self.relation(relation)
        if spec.object != ANY and object_type != spec.object:
            return f"the object of '{relation}' must be {spec.object}, but is {object_type}"
        if spec.subject != ANY and subject_type != spec.subject:
            return f"the subject of '{relation}' must be {spec.subject}, but is {subject_type}"
        return None

    def fingerprint(self) -> str:
        """SHA-256 (first 16 hex digits) of everything results depend on (names, types, relations, templates,
        attributes, entity file layout, provenance); not the file's path, comments or layout."""
        cached = self.__dict__.get("_fingerprint")
        if cached is not None:
            return cached
        doc = {k: v for k, v in _plain(self).items() if k != "path"}
        for part in doc["relations"] + doc["attributes"]:
            part.pop("line", None)
        text = json.dumps(doc, sort_keys=True, ensure_ascii=False)
        out = hashlib.sha256(text.encode()).hexdigest()[:16]
        object.__setattr__(self, "_fingerprint", out)  # frozen: computed once
        return out

    @property
    def is_family(self) -> bool:
        """True when this is the shipped family schema (the same object, or the same fingerprint)."""
        family = family_schema()
        return self is family or self.fingerprint() == family.fingerprint()


def _plain(x: Any) -> Any:
    if hasattr(x, "__dataclass_fields__"):
        return {k: _plain(getattr(x, k)) for k in x.__dataclass_fields__}
    if isinstance(x, tuple):
        return [_plain(v) for v in x]
    return x


@lru_cache(maxsize=1)
def family_schema() -> Schema:
    """The family schema (EDU-RELAT's 11 relations, genders male/female as types), from the shipped
    ``dukb/data/schemas/family.yaml``.

    Source: Wu et al. 2025, Sec. 2 and App. B (Eval-DU's knowledge base K, its family relations and the rules' gender
    guards).

    Example:
        >>> family_schema().relation("husband").subject
        'female'
    """
    path = Path(str(resources.files("dukb.data").joinpath("schemas", "family.yaml")))
    return load_schema(path)


def schema_of(kb_dir: str | Path) -> Schema:
    """The schema of a KB directory: its ``schema.yaml`` if present, else the family schema.

    Raises:
        InputError: a schema.yaml that cannot be read or is malformed (``FILE:LINE: problem``).

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     schema_of(tmp).name
        'family'
    """
    path = Path(kb_dir) / SCHEMA_FILE
    if not path.exists() and not path.is_symlink():
        return family_schema()
    return load_schema(path)


def load_schema(path: str | Path) -> Schema:
    """Read and check a schema.yaml (format: docs/tutorials/own-kb.md).

    Args:
        path: the file.

    Returns:
        The :class:`Schema`.

    Raises:
        InputError: ``FILE:LINE: problem`` for an unreadable file, bad YAML, a duplicate key, an unknown key (the
            closest known key named), a missing key, a bad name, an unknown entity type, a relation named like a
            type or the entity predicate, a template with an unknown placeholder, a wrong schema_version.

    Example:
        >>> import tempfile
        >>> text = ("schema_version: 1\\nname: tiny\\nentity_types: [city, country]\\n"
        ...         "relations:\\n  located_in: {subject: city, object: country, functional: true}\\n")
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     p = Path(tmp) / "schema.yaml"
        ...     _ = p.write_text(text)
        ...     s = load_schema(p)
        ...     _ = p.write_text(text.replace("subject: city", "subjekt: city"))
        ...     try:
        ...         load_schema(p)
        ...     except InputError as e:
        ...         print(e.line, e.message)
        5 unknown key 'subjekt' in relation 'located_in' (did you mean 'subject'?)
        >>> s.relation_names, s.relation("located_in").functional, s.entity_predicate
        (('located_in',), True, 'entity')
    """

    path = Path(path)
    text = decode_text(read_bytes(path, "schema file", limit=1 << 20), path)
    try:
        node = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # libyaml: 50x faster
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        what = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise InputError(f"bad YAML: {what}", path, None if mark is None else mark.line + 1) from None
    return _Reader(path).schema(node)


def _texts(t: str | tuple[str, ...]) -> tuple[str, ...]:
    return t if isinstance(t, tuple) else (t,)


def missing_placeholders(form: str, template: str, value: str = "o") -> str | None:
    """Why a template of ``form`` cannot be used (the placeholders it lacks, and why it needs them), or None.

    Every question names the fact it asks about: a template of a relation (``value`` ``"o"``) or attribute (``"v"``)
    must hold ``{s}``, and a statement (``fact``) or ``yes`` question also the answer (``{o}`` / ``{v}``); a
    ``description`` sentence (RWKU's corpus, Jin et al. 2024, Sec. 3.2) one of them. A ``reverse`` template names exactly one end of the fact and asks for the other:
    ``{o}`` to ask for the subject ("Name a city in {o}."), or ``{s}`` to ask for the object (the family
    schema's "Who is {s}'s father?"). Wu et al. 2025, Table 3: each probe form is filled with the fact's entities.

    Example:
        >>> missing_placeholders("qa", "Which team does she work in?")
        'must use {s} (without it every fact of the relation gets the same question)'
        >>> missing_placeholders("fact", "{s} is in {v}.", "v") is None, missing_placeholders("reverse", "Name one.")
        (True, 'must use exactly one of {s} and {o} (a reverse question names one end of the fact and asks for the other)')
    """
    have = {f for _, f, _, _ in string.Formatter().parse(template) if f}
    if form == "reverse":
        if len(have & {"s", "o"}) == 1:
            return None
        return (
            "must use exactly one of {s} and {o} (a reverse question names one end of the fact and asks for the other)"
        )
    if form == "description":  # a sentence of RWKU's description corpus: about the subject or the answer
        return None if have & {"s", value} else f"must use {{s}} or {{{value}}} (else it describes no fact)"
    if "s" not in have:
        return "must use {s} (without it every fact of the relation gets the same question)"
    if form in ("fact", "yes") and value not in have:
        return f"must use {{{value}}} (a statement of the fact names its subject and its {'value' if value == 'v' else 'object'})"
    return None


class _Reader:
    """Turns a composed YAML node tree into a :class:`Schema`, each problem at its line."""

    def __init__(self, path: Path):

        self.path = path
        self.yaml = yaml
        self.constructor = yaml.constructor.SafeConstructor()

    def error(self, message: str, node: Any) -> InputError:
        line = None if node is None else node.start_mark.line + 1
        return InputError(message, self.path, line)

    def mapping(self, node: Any, what: str, keys: tuple[str, ...] | None) -> dict[str, tuple[Any, Any]]:
        """key -> (key node, value node) of a mapping node, refusing duplicate and (with ``keys``) unknown keys."""
        if not isinstance(node, self.yaml.MappingNode):
            raise self.error(f"{what} must be a mapping (key: value lines)", node)
        out: dict[str, tuple[Any, Any]] = {}
        for k, v in node.value:
            if not isinstance(k, self.yaml.ScalarNode):  # the raw text: YAML 1.1 would read `yes:` as true
                raise self.error(f"a key of {what} must be a name", k)
            key = k.value
            if key in out:
                raise self.error(
                    f"duplicate key '{key}' in {what} (first on line {out[key][0].start_mark.line + 1})", k
                )
            if keys is not None and key not in keys:
                close = difflib.get_close_matches(key, keys, n=1, cutoff=0.5)
                hint = f"did you mean '{close[0]}'?" if close else f"known: {', '.join(keys)}"
                raise self.error(f"unknown key '{key}' in {what} ({hint})", k)
            out[key] = (k, v)
        return out

    def scalar(self, node: Any, what: str) -> Any:
        if not isinstance(node, self.yaml.ScalarNode):
            raise self.error(f"{what} must be a single value", node)
        return self.constructor.construct_object(node)

    def provenance(self, node: Any) -> str:
        """A ``source`` value as text: a scalar as itself, a list or mapping (e.g. the packages an importer read,
        with their versions and licences) as compact JSON with sorted keys (free-form provenance, never checked)."""
        if isinstance(node, self.yaml.ScalarNode):
            return str(self.constructor.construct_object(node))
        value = self.constructor.construct_object(node, deep=True)
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)

    def string(self, node: Any, what: str) -> str:
        v = self.scalar(node, what)
        if not isinstance(v, str):
            raise self.error(f"{what} must be a string, found {v!r}", node)
        return v

    def boolean(self, node: Any, what: str) -> bool:
        v = self.scalar(node, what)
        if not isinstance(v, bool):
            raise self.error(f"{what} must be true or false, found {v!r}", node)
        return v

    def name(self, node: Any, what: str, value: str | None = None) -> str:
        v = self.string(node, what) if value is None else value
        if not _NAME.match(v):
            raise self.error(
                f"{what} {v!r} is not a name: lower-case letters, digits and _, starting with a letter", node
            )
        if v in _RESERVED or v.startswith("dukb_"):
            raise self.error(f"{what} {v!r} is a reserved word", node)
        return v

    def names(self, node: Any, what: str) -> tuple[str, ...]:
        if not isinstance(node, self.yaml.SequenceNode) or not node.value:
            raise self.error(f"{what} must be a non-empty list", node)
        out: list[str] = []
        for item in node.value:
            v = self.name(item, f"{what[:-1] if what.endswith('s') else what}")
            if v in out:
                raise self.error(f"duplicate {what[:-1]} {v!r}", item)
            out.append(v)
        return tuple(out)

    def schema(self, node: Any) -> Schema:
        if node is None:
            raise InputError("the schema file is empty", self.path)
        top = self.mapping(node, "the schema", _TOP_KEYS)
        for key in ("schema_version", "name", "entity_types", "relations"):
            if key not in top:
                raise self.error(f"missing key '{key}'", node)
        vk, vn = top["schema_version"]
        if self.scalar(vn, "schema_version") != SCHEMA_VERSION or isinstance(self.scalar(vn, "v"), bool):
            raise self.error(f"schema_version must be {SCHEMA_VERSION}", vn)
        name = self.name(top["name"][1], "the schema name")
        types = self.names(top["entity_types"][1], "entity types")
        pred = self.name(top["entity_predicate"][1], "entity_predicate") if "entity_predicate" in top else "entity"
        if pred in types:
            raise self.error(f"entity_predicate {pred!r} is also an entity type", top["entity_predicate"][1])
        ent = self.entities(top["entities"][1]) if "entities" in top else ("entities.csv", "name", "type")
        relations = self.relations(top["relations"][1], types, pred)
        attributes = self.attributes(top["attributes"][1], types, relations) if "attributes" in top else ()
        source: tuple[tuple[str, str], ...] = ()
        if "source" in top:
            m = self.mapping(top["source"][1], "source", None)
            source = tuple((k, self.provenance(v)) for k, (_, v) in m.items())
        desc = self.string(top["description"][1], "description") if "description" in top else ""
        return Schema(
            name, types, relations, attributes, pred, *ent, description=desc, source=source, path=str(self.path)
        )

    def entities(self, node: Any) -> tuple[str, str, str]:
        m = self.mapping(node, "entities", _ENTITY_KEYS)
        out = []
        for key, default in zip(_ENTITY_KEYS, ("entities.csv", "name", "type")):
            v = self.string(m[key][1], f"entities.{key}") if key in m else default
            if not v.strip() or (key == "file" and ("/" in v or "\\" in v or v.startswith("."))):
                raise self.error(f"entities.{key} {v!r} must be a plain file or column name", m[key][1])
            out.append(v)
        if out[1] == out[2]:
            raise self.error("entities.name_column and entities.type_column must differ", node)
        return out[0], out[1], out[2]

    def type_of(self, m: dict, key: str, types: tuple[str, ...], what: str, node: Any) -> str:
        if key not in m:
            return ANY
        v = self.string(m[key][1], f"{what}'s {key}")
        if v != ANY and v not in types:
            close = difflib.get_close_matches(v, types, n=1, cutoff=0.5)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise self.error(
                f"unknown entity type {v!r} as {what}'s {key} ({hint}entity types: {', '.join(types)}, or {ANY})",
                m[key][1],
            )
        return v

    def relations(self, node: Any, types: tuple[str, ...], pred: str) -> tuple[RelationSpec, ...]:
        m = self.mapping(node, "relations", None)
        if not m:
            raise self.error("relations must declare at least one relation", node)
        out = []
        for rname, (knode, vnode) in m.items():
            self.name(knode, "relation name", rname)
            if rname in types or rname == pred:
                raise self.error(
                    f"relation {rname!r} has the name of an entity type or of the entity predicate; "
                    "give it another name",
                    knode,
                )
            what = f"relation '{rname}'"
            spec = self.mapping(vnode, what, _RELATION_KEYS) if vnode.tag != "tag:yaml.org,2002:null" else {}
            qa = self.string(spec["qa_answer"][1], f"{what}'s qa_answer") if "qa_answer" in spec else "object"
            if qa not in QA_ANSWERS:
                raise self.error(f"{what}'s qa_answer must be one of {', '.join(QA_ANSWERS)}", spec["qa_answer"][1])
            out.append(
                RelationSpec(
                    rname,
                    self.type_of(spec, "subject", types, what, vnode),
                    self.type_of(spec, "object", types, what, vnode),
                    self.boolean(spec["functional"][1], f"{what}'s functional") if "functional" in spec else False,
                    self.boolean(spec["symmetric"][1], f"{what}'s symmetric") if "symmetric" in spec else False,
                    self.templates(spec["templates"][1], what, _REL_PLACEHOLDERS) if "templates" in spec else (),
                    qa,
                    knode.start_mark.line + 1,
                )
            )
        return tuple(out)

    def attributes(
        self, node: Any, types: tuple[str, ...], relations: tuple[RelationSpec, ...]
    ) -> tuple[AttributeSpec, ...]:
        m = self.mapping(node, "attributes", None)
        out = []
        rel_names = {r.name for r in relations}
        for aname, (knode, vnode) in m.items():
            self.name(knode, "attribute name", aname)
            if aname in rel_names:
                raise self.error(f"attribute {aname!r} has the name of a relation", knode)
            what = f"attribute '{aname}'"
            spec = self.mapping(vnode, what, _ATTRIBUTE_KEYS) if vnode.tag != "tag:yaml.org,2002:null" else {}
            out.append(
                AttributeSpec(
                    aname,
                    self.type_of(spec, "subject", types, what, vnode),
                    self.templates(spec["templates"][1], what, _ATTR_PLACEHOLDERS) if "templates" in spec else (),
                    knode.start_mark.line + 1,
                )
            )
        return tuple(out)

    def templates(self, node: Any, what: str, allowed: frozenset[str]) -> Templates:
        m = self.mapping(node, f"the templates of {what}", TEMPLATE_FORMS)
        out: list[tuple[str, str | tuple[str, ...]]] = []
        for form, (_, vnode) in m.items():
            where = f"template '{form}' of {what}"
            if isinstance(vnode, self.yaml.SequenceNode):
                if not vnode.value:
                    raise self.error(f"{where} is an empty list", vnode)
                texts = tuple(self.template_text(v, where, allowed) for v in vnode.value)
                out.append((form, texts))
            else:
                out.append((form, self.template_text(vnode, where, allowed)))
            if form == "no":  # its answer is "no" only about a wrong object (relation)
                texts = out[-1][1] if isinstance(out[-1][1], tuple) else (out[-1][1],)
                if "wrong" not in allowed:
                    raise self.error(
                        f"{where}: an attribute has no 'no' form (its placeholders have no {{wrong}})", vnode
                    )
                if any("wrong" not in {f for _, f, _, _ in string.Formatter().parse(t) if f} for t in texts):
                    raise self.error(
                        f"{where} must use {{wrong}}: the answer of a 'no' question is 'no' only about a wrong object",
                        vnode,
                    )
            for t, tnode in zip(_texts(out[-1][1]), vnode.value if isinstance(vnode.value, list) else [vnode]):
                problem = missing_placeholders(form, t, "v" if "v" in allowed else "o")
                if problem:
                    raise self.error(f"{where} {t!r} {problem}", tnode)
        return tuple(out)

    def template_text(self, node: Any, where: str, allowed: frozenset[str]) -> str:
        t = self.string(node, where)
        try:
            fields = [f for _, f, _, _ in string.Formatter().parse(t) if f is not None]
        except ValueError as e:
            raise self.error(f"{where}: {e} (write a literal brace as {{{{ or }}}})", node) from None
        for f in fields:
            if f not in allowed:
                raise self.error(
                    f"{where}: unknown placeholder {{{f}}} (known: "
                    f"{', '.join('{' + a + '}' for a in sorted(allowed))})",
                    node,
                )
        return t
