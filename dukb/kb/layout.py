"""The files and columns of a KB directory (the EDU-RELAT layout of the Eval-DU release, Wu et al. 2025, App. B and F).

- ``people.csv``: :data:`PEOPLE_COLUMNS`, and optionally :data:`PEOPLE_OPTIONAL`;
- ``relationships.csv``: :data:`REL_COLUMNS` ("object is subject's relation");
- ``biographies.csv``: :data:`BIO_COLUMNS` (optional file: a KB may have no biographies).

A KB of another schema names its entities file and columns in its ``schema.yaml`` (:mod:`dukb.kb.kbschema`).
"""

PEOPLE = "people.csv"
RELATIONSHIPS = "relationships.csv"
BIOGRAPHIES = "biographies.csv"

PEOPLE_COLUMNS = ("name", "gender")
PEOPLE_OPTIONAL = ("birthyear", "birthplace", "job", "generation")
REL_COLUMNS = ("fact_id", "subject", "relation", "object")
BIO_COLUMNS = ("fact_id", "subject", "attribute", "value")
