"""One answer judge: does a model's output give a fact's answer? Used by the probe datasets (:mod:`dukb.kb.probes`),
probing (:mod:`dukb.neural.probe`) and the RESTOR analysis (:mod:`dukb.neural.restor`).

The match rule is a parameter (a probe carries its own in ``Probe.match``; :data:`MATCHES`):

- ``"substring"``: ``answer.lower() in output.lower()``, the deep-unlearning paper's rule (Wu et al. 2025, App. C;
  evaluate_util.py:11 and :26), for the answer or any of its aliases (a KB's aliases.csv, :mod:`dukb.kb.aliases`:
  "Lyons" for Lyon, "EUR" for the Euro);
- ``"yesno"``: the output's first word, lowercased, is the answer ("yes" or "no"; EDU-RELAT's question2/question3
  forms, Wu et al. 2025 Table 3), so "I do not know" is not a "no";
- ``"choice"``: the output picks the answer's option of a multiple-choice question (RWKU's form, Jin et al. 2024
  Sec. 3.3), by label or, without a label, by text;
- ``"exact"``: the output's normalised answer is the value or one of its aliases (:meth:`Judge.answer`): the exact,
  KB-aware judge that replaces RESTOR's GPT-3.5 Accept/Reject judge (Rezaei et al., RESTOR, Sec. 3.4 and App. G)
  where the acceptable answers are KB values.

On top of a rule, RESTOR's three-way label of one output (true value, injected value or other;
:meth:`Judge.label`) and its majority vote over M generations (:func:`majority`, RESTOR Sec. 3.4).

Pure Python: no solver, no torch.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Protocol

from dukb.kb.aliases import load_aliases
from dukb.kb.model import KB
from dukb.kb.templates import load_template

#: Match rules (see the module docstring).
MATCH_SUBSTRING = "substring"
MATCH_YESNO = "yesno"
MATCH_CHOICE = "choice"
MATCH_EXACT = "exact"
MATCHES = (MATCH_SUBSTRING, MATCH_YESNO, MATCH_CHOICE, MATCH_EXACT)

#: Labels of one judged output (RESTOR's correct / corrupted / other answer).
TRUE, INJECTED, OTHER = "true", "injected", "other"
LABELS = (TRUE, INJECTED, OTHER)

_OPTION = re.compile(r"^([A-Z])\. (.*)$", re.MULTILINE)
_LABEL = re.compile(r"^\W*\(?([A-Z])(?:[).:,]|\s|$)")
_FIRST_WORD = re.compile(r"[^\W\d_]+")
_WORD = re.compile(r"[^\W_]+(?:['’\-][^\W_]+)*")
_ARTICLES = ("a", "an", "the")
_SEGMENT = re.compile(r"[.,;:!?\n(]")


def normalize(text: str) -> tuple[str, ...]:
    """Words of a text for exact matching: Unicode NFKD without accents, lower case, words of letters and digits
    (inner apostrophes and hyphens kept), a trailing possessive "'s" dropped, everything else a separator.

    Args:
        text: any text.

    Returns:
        The words, e.g. ``normalize("  Washington State.") == ("washington", "state")``,
        ``normalize("Reid Perry's") == ("reid", "perry")``.

    Source: dukb (the exact judge's normalisation; it replaces RESTOR's GPT-3.5 judge, Rezaei et al., App. G).

    Example:
        >>> normalize("  Washington State.")
        ('washington', 'state')
        >>> normalize("Reid Perry's father, Zoë")
        ('reid', 'perry', 'father', 'zoe')
    """
    t = unicodedata.normalize("NFKD", text)
    t = "".join(c for c in t if not unicodedata.combining(c)).lower()
    out = []
    for w in _WORD.findall(t):
        if w.endswith(("'s", "’s")) and len(w) > 2:
            w = w[:-2]
        out.append(w)
    return tuple(out)


def aliases(value: str, extra: dict[str, Sequence[str]] | None = None) -> set[tuple[str, ...]]:
    """The normalised forms that count as ``value``: the value itself, "<X> state" <-> "<X>" (EDU-RELAT writes
    birthplaces "Washington state"), and any ``extra[value]`` aliases.

    Args:
        value: a KB value or person name.
        extra: optional value -> list of further aliases.

    Returns:
        Set of word tuples (empty for a value without words).

    Source: dukb; the "<X> state" spelling is EDU-RELAT's (Wu et al. 2025).

    Example:
        >>> sorted(aliases("Washington state"))
        [('washington',), ('washington', 'state')]
        >>> sorted(aliases("Teacher", {"Teacher": ["schoolteacher"]}))
        [('schoolteacher',), ('teacher',), ('teacher', 'state')]
    """
    base = normalize(value)
    out = {base} if base else set()
    if len(base) > 1 and base[-1] == "state":
        out.add(base[:-1])
    elif base:
        out.add(base + ("state",))
    for a in (extra or {}).get(value, ()):
        out |= {normalize(a)} - {()}
    return out


def choice_options(question: str) -> dict[str, str]:
    """The options of a multiple-choice question: label -> text (lines "A. text").

    Source: RWKU's multiple-choice form (Jin et al. 2024, Sec. 3.3) as written by templates/probes.json.

    Example:
        >>> choice_options("Who is Ann's father?" + chr(10) + "A. Bo Lee" + chr(10) + "B. Cy Lee")
        {'A': 'Bo Lee', 'B': 'Cy Lee'}
    """
    return {m.group(1): m.group(2) for m in _OPTION.finditer(question)}


def _choice(output: str, answer: str, question: str, alias: Sequence[str] = ()) -> bool:
    options = choice_options(question)
    gold = [lab for lab, text in options.items() if text == answer]
    m = _LABEL.match(output)
    if m and m.group(1) in options:
        return m.group(1) in gold
    low = output.lower()
    return any(a.lower() in low for a in (answer, *alias)) and not any(
        t.lower() in low for t in options.values() if t != answer and t.lower() not in answer.lower()
    )


def _strip_article(words: tuple[str, ...]) -> tuple[str, ...]:
    return words[1:] if words and words[0] in _ARTICLES and len(words) > 1 else words


class Gold(Protocol):
    """What a probe must carry to be judged: :class:`dukb.kb.probes.Probe` and the QA items built from it.

    Example:
        >>> from types import SimpleNamespace
        >>> gold = SimpleNamespace(answer="Ohio", match="substring", question="Where was Ann born?")
        >>> judge(gold, "She was born in ohio."), judge(gold, "In Texas.")
        (True, False)
    """

    question: str
    answer: str
    match: str


def _aliases_of(probe: Gold) -> tuple[str, ...]:
    """The aliases a probe carries (:attr:`dukb.kb.probes.Probe.aliases`; () for an item without them)."""
    return tuple(getattr(probe, "aliases", ()) or ())


class Judge:
    """The answer judge: every match rule of :data:`MATCHES`, and RESTOR's true / injected / other label.

    Only the ``"exact"`` rule uses the judge's *known phrases*: the answer of an output is the longest known phrase
    (a KB person name, a KB or fallback value, an injected value, or an alias of one) that the output's words start
    with, after dropping a leading article; without one, the output's first segment (up to . , ; : ! ? ( or a
    newline). Trailing words and punctuation are thus ignored ("Richard Perry, his father" -> "richard perry"), case
    and accents do not matter, "Washington" and "Washington state" are the same answer, and a longer known phrase
    wins ("West Virginia state" is not "Virginia state", where the substring rule accepts it).

    Args:
        phrases: every known answer (names and values); their aliases are added. Empty: the exact rule's answer is
            the output's first segment.
        extra_aliases: value -> further aliases (e.g. {"Teacher": ["schoolteacher"]}).

    Source: substring, yesno, choice: Wu et al. 2025 (App. C, Table 3) and Jin et al. 2024, RWKU (Sec. 3.3); exact
    and the labels: dukb's exact replacement of RESTOR's GPT-3.5 judge (Rezaei et al., RESTOR, Sec. 3.4, App. G).

    Example:
        >>> j = Judge(["West Virginia state", "Virginia state", "Richard Perry"])
        >>> j.answer("Richard Perry, his father.")
        ('richard', 'perry')
        >>> j.accepts("West Virginia state", "Virginia state", match="exact")
        False
        >>> j.accepts("West Virginia state", "Virginia state", match="substring")
        True
        >>> j.label("Virginia", ["Virginia state"], injected="Ohio state")
        ('true', 'virginia')
    """

    def __init__(self, phrases: Iterable[str] = (), extra_aliases: dict[str, Sequence[str]] | None = None):
        self.extra = dict(extra_aliases or {})
        self.known: set[tuple[str, ...]] = set()
        for p in phrases:
            self.known |= aliases(p, self.extra)
        for v in self.extra:
            self.known |= aliases(v, self.extra)
        self.max_len = max((len(k) for k in self.known), default=0)

    @classmethod
    def for_kb(
        cls, kb: KB, extra_values: Iterable[str] = (), extra_aliases: dict[str, Sequence[str]] | None = None
    ) -> Judge:
        """A judge whose known phrases are the KB's people, its biography values, the fallback value pools of
        templates/values.json and ``extra_values`` (e.g. injected values); its aliases are the KB's aliases.csv
        (:func:`dukb.kb.aliases.load_aliases`) and ``extra_aliases``.

        Raises:
            InputError: templates/values.json is missing or malformed; a malformed aliases.csv (FILE:LINE).
        """

        vals = load_template("values.json")
        phrases = list(kb.people) + [b.value for b in kb.biographies] + list(extra_values)
        phrases += [v for k, pool in vals.items() if not k.startswith("_") for v in pool]
        merged: dict[str, Sequence[str]] = {k: list(v) for k, v in load_aliases(kb).items()}
        for k, v in (extra_aliases or {}).items():
            merged[k] = [*merged.get(k, []), *(a for a in v if a not in merged.get(k, []))]
        return cls(phrases, merged or None)

    def answer(self, output: str) -> tuple[str, ...]:
        """The normalised answer of an output under the exact rule (see the class docstring); () for an empty
        output."""
        words = _strip_article(normalize(output))
        for n in range(min(self.max_len, len(words)), 0, -1):
            if words[:n] in self.known:
                return words[:n]
        return _strip_article(normalize(_SEGMENT.split(output, 1)[0]))

    def matches(self, answer: tuple[str, ...], value: str) -> bool:
        """True when a normalised answer (:meth:`answer`) is ``value`` or one of its aliases."""
        return bool(answer) and answer in aliases(value, self.extra)

    def accepts(
        self, output: str, answer: str, match: str = MATCH_SUBSTRING, question: str = "", alias: Sequence[str] = ()
    ) -> bool:
        """Whether ``output`` gives ``answer`` (or one of ``alias``) under a match rule.

        Args:
            output: the model's generated text.
            answer: the gold answer.
            match: one of :data:`MATCHES`.
            question: the question (the "choice" rule reads its options "A. text"; unused otherwise).
            alias: further surface forms of the answer (a KB's aliases.csv; :attr:`dukb.kb.probes.Probe.aliases`):
                the substring rule accepts any of them in the output, the choice rule any of them in place of the
                option's text, the exact rule any of them as the answer; unused by the yesno rule.

        Returns:
            True when the output matches the answer.

        Raises:
            ValueError: unknown match rule.

        Example:
            >>> PLAIN.accepts("It costs 5 EUR.", "Euro"), PLAIN.accepts("It costs 5 EUR.", "Euro", alias=["EUR"])
            (False, True)
            >>> PLAIN.accepts("The pound.", "Euro", alias=["EUR"])
            False
        """
        if match == MATCH_SUBSTRING:
            low = output.lower()
            return any(a.lower() in low for a in (answer, *alias))
        if match == MATCH_YESNO:
            m = _FIRST_WORD.search(output)
            return m is not None and m.group(0).lower() == answer.lower()
        if match == MATCH_CHOICE:
            return _choice(output, answer, question, alias)
        if match == MATCH_EXACT:
            ans = self.answer(output)
            return self.matches(ans, answer) or any(bool(ans) and ans in aliases(a) for a in alias)
        raise ValueError(f"unknown match rule {match!r}")

    def judge_probe(self, probe: Gold, output: str) -> bool:
        """Whether ``output`` shows the probe's fact is known: :meth:`accepts` with the probe's answer, match rule,
        question and aliases (if it carries any).

        Raises:
            ValueError: unknown match rule.
        """
        return self.accepts(output, probe.answer, probe.match, probe.question, _aliases_of(probe))

    def label(
        self,
        output: str,
        true_values: Sequence[str],
        injected: str | None = None,
        match: str = MATCH_EXACT,
        question: str = "",
    ) -> tuple[str, str]:
        """Judge one output as the true value, the injected value or other (RESTOR's three outcomes).

        Args:
            output: the generated text.
            true_values: the acceptable true answers.
            injected: the corrupted (injected) value of the fact, if it was corrupted.
            match: the rule (:data:`MATCHES`; RESTOR: "exact").
            question: the question, for the "choice" rule.

        Returns:
            ``(label, answer)``: label "true", "injected" or "other" (true wins when both match); answer the
            normalised answer (:meth:`answer`) as a string, words joined by spaces.

        Raises:
            ValueError: unknown match rule.
        """
        if match not in MATCHES:
            raise ValueError(f"unknown match rule {match!r}")
        ans = self.answer(output)
        if match == MATCH_EXACT:  # the answer is extracted once

            def ok(v: str) -> bool:
                return self.matches(ans, v)
        else:

            def ok(v: str) -> bool:
                return self.accepts(output, v, match, question)

        if any(ok(v) for v in true_values):
            lab = TRUE
        elif injected is not None and ok(injected):
            lab = INJECTED
        else:
            lab = OTHER
        return lab, " ".join(ans)


#: The judge without known phrases: all that the substring, yesno and choice rules need.
PLAIN = Judge()


def judge(probe: Gold, output: str, using: Judge | None = None) -> bool:
    """Whether a model output shows the probe's fact is known, by the probe's match rule (:meth:`Judge.accepts`).

    Args:
        probe: the probe (:class:`dukb.kb.probes.Probe` or any item with answer, match and question).
        output: the model's generated text.
        using: the judge (its known phrases serve the "exact" rule); None: :data:`PLAIN`.

    Returns:
        True when the output matches the gold answer.

    Raises:
        ValueError: unknown match rule.

    Source: Wu et al. 2025, App. C (substring rule); see the module docstring for the others.

    Example:
        >>> from types import SimpleNamespace
        >>> probe = SimpleNamespace(answer="Richard Perry", match="exact", question="Who is Reid Perry's father?")
        >>> judge(probe, "Richard Perry, a carpenter."), judge(probe, "Reid Perry.")
        (True, False)
    """
    return (using or PLAIN).judge_probe(probe, output)


def majority(labels: Sequence[str], answers: Sequence[str]) -> dict:
    """Majority vote over M judged outputs (RESTOR Sec. 3.4: a fact is correct when a majority of its M
    generations are accepted).

    Args:
        labels: the M labels; answers: the M normalised answers (same order).

    Returns:
        dict: ``correct`` (more than half of the labels are "true"), ``answer`` (the most frequent answer, ties
        to the earliest), ``label`` (the label of that answer's first occurrence).

    Raises:
        ValueError: empty or mismatched lists.

    Source: Rezaei et al., RESTOR, Sec. 3.4.

    Example:
        >>> majority(["true", "injected", "true"], ["ohio", "texas", "ohio"])
        {'correct': True, 'answer': 'ohio', 'label': 'true'}
        >>> majority(["true", "other", "other"], ["ohio", "", ""])["correct"]
        False
    """
    if not labels or len(labels) != len(answers):
        raise ValueError("majority needs as many labels as answers, at least one")
    counts = Counter(answers)
    best = max(counts.values())
    top = next(a for a in answers if counts[a] == best)
    return {
        "correct": sum(lab == TRUE for lab in labels) * 2 > len(labels),
        "answer": top,
        "label": labels[answers.index(top)],
    }
