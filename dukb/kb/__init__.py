"""dukb.kb: facts and people, KB directories, validation and import (no solver, no torch)."""

from dukb.kb.io import BUILTIN_KBS, KBError, Problem, check_kb, load_kb, resolve_kb_path, save_kb
from dukb.kb.model import KB, BioFact, Fact, Person, Triple
from dukb.kb.schema import ATTRIBUTES, OBJECT_GENDER, RELATIONS, SUBJECT_GENDER, gender_violation

__all__ = [
    "ATTRIBUTES", "BUILTIN_KBS", "KB", "KBError", "BioFact", "Fact", "OBJECT_GENDER", "Person", "Problem",
    "RELATIONS", "SUBJECT_GENDER", "Triple", "check_kb", "gender_violation", "load_kb", "resolve_kb_path",
    "save_kb",
]
