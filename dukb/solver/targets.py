"""Naming an unlearning target: a fact id, a triple, a fact or the text "subject,relation,object" resolved to an atom of
a KB's deductive closure (Wu et al. 2025, Sec. 3: a target is a fact of Omega(K, R)).

A target that names no fact gets an :class:`dukb.InputError` with the closest names of the KB suggested.
"""

from __future__ import annotations

import difflib
import re
from typing import cast

from dukb import InputError
from dukb.kb.csvfile import control_char
from dukb.kb.model import KB, Fact, Triple
from dukb.solver.closure import Closure


def resolve_target(closure: Closure, target: int | Triple | Fact | str) -> int:
    """Atom id of a target given as a fact_id, a triple, a Fact, or a string ``"S,R,O"``.

    The string is read by :func:`parse_target` (one CSV record of three fields; the one normalisation is that ASCII
    spaces around a field, outside its quotes, are dropped). The names must then be the KB's exactly: a subject or
    object that names no person, or a relation that is not one of the 11 (case matters), is refused with the
    closest names (:func:`difflib.get_close_matches`). The relations are those of the KB's schema.

    Args:
        closure: the closure the target must lie in.
        target: a relationship fact_id (int), a :class:`Fact`, a ``(subject, relation, object)`` triple or a string
            ``"Subject,relation,Object"``.

    Returns:
        The target's atom id in ``closure``.

    Raises:
        InputError: unknown fact_id, malformed string (see :func:`parse_target`), a name that is not the KB's (the
            closest ones suggested), or a fact outside the deductive closure.

    Example:
        >>> from dukb.kb.io import load_kb
        >>> from dukb.solver.closure import compute_closure
        >>> closure = compute_closure(load_kb("demo"))
        >>> resolve_target(closure, 17), resolve_target(closure, "Leo Hale, uncle, Owen Stone")
        (17, 17)
        >>> closure.source(resolve_target(closure, ("Clara Stone", "brother", "Henry Hale")))
        'derived'
        >>> resolve_target(closure, "Leo Hale,uncle,Owen Ston")
        Traceback (most recent call last):
            ...
        dukb.InputError: target object: no person named 'Owen Ston' in the KB (closest: 'Owen Stone'...
    """
    if isinstance(target, Fact):
        triple = target.triple
    elif isinstance(target, int):
        return closure.atom_of_fact(target)
    elif isinstance(target, str):
        try:
            triple = parse_target(target)
        except InputError as e:  # malformed: still point at the people it seems to name
            raise InputError(e.message + _closest_in_malformed(closure.kb, target)) from None
    else:
        triple = cast(Triple, tuple(target))
    if tuple(triple) not in closure.index and all(isinstance(x, str) for x in triple):
        check_target_names(closure.kb, triple)
    return closure.atom_of_triple(triple)


#: One field of a target string: ASCII spaces, then a quoted field (inner quotes doubled) or an unquoted one (no
#: quote, no comma; its trailing ASCII spaces are dropped after the match), then ASCII spaces (RFC 4180 fields, as
#: the KB files are read).
_TARGET_FIELD = r' *+(?:"((?:[^"]|"")*+)" *+|([^,"]*+))'  # possessive quantifiers: linear time


_TARGET = re.compile(",".join([_TARGET_FIELD] * 3))


def parse_target(text: str) -> Triple:
    """The ``(subject, relation, object)`` of a target string: one CSV record of three fields (RFC 4180: a field in
    double quotes may hold a comma, and a doubled quote stands for one).

    The one normalisation: ASCII spaces (U+0020) around a field, outside its quotes, are dropped. Nothing else is
    changed: inside quotes every character counts, and a tab, a no-break space or any other character is part of
    the name (then matched against the KB's names exactly, :func:`check_target_names`).

    Args:
        text: e.g. ``"Leo Hale,uncle,Owen Stone"`` or ``'"Hale, George",wife,Martha Hale'``.

    Returns:
        The triple of strings.

    Raises:
        InputError: not one CSV record of three non-empty fields (a stray or bare quote, a missing or extra
            comma, a line break).

    Example:
        >>> parse_target("Leo Hale, uncle ,Owen Stone")
        ('Leo Hale', 'uncle', 'Owen Stone')
        >>> parse_target('"Hale, George",wife,Martha Hale')
        ('Hale, George', 'wife', 'Martha Hale')
        >>> parse_target("Leo Hale,uncle")
        Traceback (most recent call last):
            ...
        dukb.InputError: ...
    """
    problem = (
        f"target {text!r} is not of the form 'Subject,relation,Object' (quote a field that holds a comma "
        "or a quote, inner quotes doubled: '\"Hale, George\",wife,Martha Hale')"
    )
    m = None if "\n" in text or "\r" in text else _TARGET.fullmatch(text)
    if m is None:
        raise InputError(problem)
    parts = tuple(
        m[2 * k + 2].rstrip(" ") if m[2 * k + 2] is not None else m[2 * k + 1].replace('""', '"') for k in range(3)
    )
    if not all(parts):
        raise InputError(problem)
    return cast(Triple, parts)


def _closest_names(kb: KB, name: str) -> list[str]:
    """Up to 3 names of ``kb``'s people closest to ``name`` (:func:`difflib.get_close_matches`, cutoff 0.6)."""

    return difflib.get_close_matches(name, list(kb.people), n=3, cutoff=0.6)


def _closest_in_malformed(kb: KB, text: str) -> str:
    """``"; closest names: 'A', 'B'"`` for the people a malformed target string seems to name (its text split at
    commas, quotes removed, first and last part), or "" when none is close."""
    parts = [p.replace('"', "").strip(" ") for p in text.replace("\r", " ").replace("\n", " ").split(",")]
    close = []
    for part in (parts[0], parts[-1]) if len(parts) > 1 else parts[:1]:
        close += [n for n in _closest_names(kb, part) if n not in close]
    return f"; closest names: {', '.join(map(repr, close[:4]))}" if close else ""


def check_target_names(kb: KB, triple: Triple) -> None:
    """Refuse a target whose names are not the KB's exactly: the subject and object must be people (entities) of
    ``kb`` and the relation one of its schema's relations (family: :data:`dukb.kb.schema.RELATIONS`; case matters).

    Args:
        kb: the KB.
        triple: ``(subject, relation, object)``.

    Raises:
        InputError: ``target subject: no person named 'X' in the KB (closest: 'A', 'B'); ...`` or ``target
            relation: unknown relation 'X' (closest: ...; the relations: ...)``, naming the first wrong name.

    Example:
        >>> from dukb.kb.io import load_kb
        >>> kb = load_kb("demo")
        >>> check_target_names(kb, ("Leo Hale", "uncle", "Owen Stone"))  # fine: returns None
        >>> check_target_names(kb, ("Leo Hale", "Uncle", "Owen Stone"))
        Traceback (most recent call last):
            ...
        dukb.InputError: target relation: unknown relation 'Uncle' (closest: uncle; the relations: ...
    """

    s, r, o = triple
    relations = kb.schema.relation_names
    who = "person" if kb.schema.is_family else "entity"
    for what, name in (("subject", s), ("object", o)):
        if name not in kb.people:
            close = _closest_names(kb, name)
            hint = f" (closest: {', '.join(map(repr, close))})" if close else ""
            c = control_char(name)
            why = (
                f"; it holds a control character (U+{ord(c):04X}), which no name has"
                if c
                else "; names are matched exactly"
            )
            raise InputError(f"target {what}: no {who} named {name!r} in the KB{hint}{why}")
        if what == "subject" and r not in relations:
            close = difflib.get_close_matches(r, relations, n=3, cutoff=0.5) or difflib.get_close_matches(
                r.lower(), relations, n=3, cutoff=0.5
            )
            hint = f"closest: {', '.join(close)}; " if close else ""
            raise InputError(f"target relation: unknown relation {r!r} ({hint}the relations: {', '.join(relations)})")


__all__ = ["check_target_names", "parse_target", "resolve_target"]
