"""The fixed vocabulary of a family KB: relations, attributes and the genders each relation requires.

A relationship fact is a triple ``(s, r, o)`` read "o is s's r" (Wu et al. 2025, Sec. 2; EDU-RELAT). The gender
constraints are background knowledge taken from people.csv; they are never facts to unlearn.
"""

from __future__ import annotations

#: The 11 family relations of EDU-RELAT, in the benchmark's order.
RELATIONS: tuple[str, ...] = (
    "child",
    "father",
    "mother",
    "husband",
    "wife",
    "brother",
    "sister",
    "aunt",
    "uncle",
    "nephew",
    "niece",
)

#: The 3 biography attributes. Biography facts take part in no rule.
ATTRIBUTES: tuple[str, ...] = ("birthyear", "birthplace", "job")

GENDERS: tuple[str, ...] = ("male", "female")

#: Gender the *object* of a relation must have ("o is s's father" => o is male). ``child`` has none.
OBJECT_GENDER: dict[str, str] = {
    "husband": "male",
    "father": "male",
    "brother": "male",
    "uncle": "male",
    "nephew": "male",
    "wife": "female",
    "mother": "female",
    "sister": "female",
    "aunt": "female",
    "niece": "female",
}

#: Gender the *subject* must have: the husband's spouse is female, the wife's spouse is male.
SUBJECT_GENDER: dict[str, str] = {"husband": "female", "wife": "male"}


def gender_violation(relation: str, subject_gender: str, object_gender: str) -> str | None:
    """Say why a relationship fact breaks its relation's gender constraint, or return None if it does not.

    Args:
        relation: one of :data:`RELATIONS`.
        subject_gender, object_gender: "male" or "female".

    Returns:
        A short English reason, or None when the fact respects the constraint.

    Source: Wu et al. 2025, Sec. 2 and App. B (Eval-DU's knowledge base and family rules, with their guards).

    Example:
        >>> gender_violation("father", "female", "female")
        "the object of 'father' must be male, but is female"
        >>> gender_violation("wife", "female", "female")
        "the subject of 'wife' must be male, but is female"
        >>> print(gender_violation("child", "male", "female"))
        None
    """
    need = OBJECT_GENDER.get(relation)
    if need is not None and object_gender != need:
        return f"the object of '{relation}' must be {need}, but is {object_gender}"
    need = SUBJECT_GENDER.get(relation)
    if need is not None and subject_gender != need:
        return f"the subject of '{relation}' must be {need}, but is {subject_gender}"
    return None
