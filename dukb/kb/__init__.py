"""dukb.kb: facts and people, KB directories and their schemas, validation and import (no solver, no torch)."""

from dukb.kb.io import BUILTIN_KBS, KBError, Problem, check_kb, load_kb, resolve_kb_path, save_kb
from dukb.kb.kbschema import AttributeSpec, RelationSpec, Schema, family_schema, load_schema, schema_of
from dukb.kb.model import KB, BioFact, Fact, Person, Triple
from dukb.kb.schema import ATTRIBUTES, OBJECT_GENDER, RELATIONS, SUBJECT_GENDER, gender_violation

__all__ = [
    "ATTRIBUTES",
    "BUILTIN_KBS",
    "KB",
    "KBError",
    "AttributeSpec",
    "BioFact",
    "Fact",
    "OBJECT_GENDER",
    "Person",
    "Problem",
    "RELATIONS",
    "RelationSpec",
    "SUBJECT_GENDER",
    "Schema",
    "Triple",
    "check_kb",
    "family_schema",
    "gender_violation",
    "load_kb",
    "load_schema",
    "resolve_kb_path",
    "save_kb",
    "schema_of",
]
