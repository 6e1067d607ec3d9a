"""A pretrained model's own knowledge (``dukb evaluate --no-finetune``): which facts of the KB the model knew before
unlearning, and the part of the KB it can reason over. Torch-free.

Without finetuning, a model knows only part of the KB. The probe before unlearning (the paper's question form,
``qa``) defines the *known* facts K' ⊆ K; a fact never known is *unscorable*:

- it is never counted as forgotten (forgetting cannot be seen in a fact that was never elicited), and
- it is left out of recall's and accuracy's numerators and denominators (Wu et al. 2025, Eq. 1-2), as the held-out
  forms' unscorable facts are (:mod:`dukb.neural.metrics.heldout`).

The model cannot use a fact it does not know to re-derive a target, so a target's minimal deep unlearning sets are
those of the known part of the KB: Wu et al. 2025, Definitions 2-3 with K' in place of K (a set M ⊆ K' with the
target outside Ω(K' \\ M, R), minimal under inclusion). Targets are drawn among the known facts with a derivation
from other known facts (t ∈ Ω(K' \\ {t}, R)), so that deep unlearning asks more than forgetting the target alone.

Source: Wu et al. 2025, Definitions 1-3 (closure, deep unlearning, minimal deep unlearning sets) and Eq. 1-2 (recall,
accuracy), over the facts the model knew (dukb).
"""

from __future__ import annotations

from dataclasses import dataclass

from dukb import InputError
from dukb.kb.model import KB
from dukb.solver.mdus import is_deep_unlearning_set

#: the probe form that defines the known facts (the paper's question form)
KNOWN_FORM = "qa"


@dataclass(frozen=True)
class Known:
    """The facts a model knew before unlearning.

    Attributes:
        relationships: relationship fact_ids the qa probe elicited (frozenset of int).
        biographies: biography fact_ids it elicited (frozenset of int).
        unknown_relationships, unknown_biographies: the KB's other fact_ids (unscorable; frozensets of int).
    """

    relationships: frozenset
    biographies: frozenset
    unknown_relationships: frozenset = frozenset()
    unknown_biographies: frozenset = frozenset()

    @property
    def n_relationships(self) -> int:
        """How many relationship facts the KB has."""
        return len(self.relationships) + len(self.unknown_relationships)

    @property
    def n_biographies(self) -> int:
        """How many biography facts the KB has."""
        return len(self.biographies) + len(self.unknown_biographies)

    def pairs(self) -> frozenset:
        """The known facts as (fact kind, fact_id) pairs: ("relationship", id) and ("biography", id)."""
        return frozenset(
            {("relationship", f) for f in self.relationships} | {("biography", f) for f in self.biographies}
        )

    def record(self) -> dict:
        """config.json's ``known_before``: counts, shares (None for a kind the KB lacks) and the sorted fact ids."""
        k_rel, k_bio = len(self.relationships), len(self.biographies)
        return {
            "form": KNOWN_FORM,
            "relationships": k_rel,
            "n_relationships": self.n_relationships,
            "share_relationships": k_rel / self.n_relationships if self.n_relationships else None,
            "biographies": k_bio,
            "n_biographies": self.n_biographies,
            "share_biographies": k_bio / self.n_biographies if self.n_biographies else None,
            "fact_ids": {"relationships": sorted(self.relationships), "biographies": sorted(self.biographies)},
            "unknown_fact_ids": {
                "relationships": sorted(self.unknown_relationships),
                "biographies": sorted(self.unknown_biographies),
            },
        }


def known_from_probe(kb, probe) -> Known:
    """The facts the probe before unlearning elicited on the qa form.

    Args:
        kb: the :class:`dukb.kb.KB`; probe: a probe table (pandas DataFrame with kind, fact_kind, fact_id, known;
            :func:`dukb.neural.probe.probe`) holding the qa row of every fact of the KB.

    Returns:
        :class:`Known`.

    Raises:
        ValueError: the table lacks the qa row of a fact of the KB.

    Source: Wu et al. 2025, Eq. 1 (a fact counts as forgotten only if the model knew it).
    """
    qa = probe[probe["kind"] == KNOWN_FORM]
    seen = {(k, int(f)): bool(v) for k, f, v in zip(qa["fact_kind"], qa["fact_id"], qa["known"])}
    rel = [f.fact_id for f in kb.relationships]
    bio = [b.fact_id for b in kb.biographies]
    for kind, ids in (("relationship", rel), ("biography", bio)):
        missing = [f for f in ids if (kind, f) not in seen]
        if missing:
            raise ValueError(f"the probe before unlearning lacks the qa row of {kind} fact {missing[0]}")
    return Known(
        *(
            frozenset(f for f in ids if seen[(kind, f)] is want)
            for want in (True, False)
            for kind, ids in (("relationship", rel), ("biography", bio))
        )
    )


def known_part(kb, known: Known):
    """The known part K' of the KB: its people and biographies, and the relationships the model knew, with their
    fact ids (a new :class:`dukb.kb.KB` of the same schema; its fingerprint differs from the KB's whenever a
    relationship is unknown, so caches keyed by it are the known part's).

    Source: Wu et al. 2025, Definition 1, over K' (module docstring).
    """
    return KB(
        kb.people,
        [f for f in kb.relationships if f.fact_id in known.relationships],
        list(kb.biographies),
        kb.source,
        kb.schema,
    )


def rederivable(closure, fact_ids) -> list[int]:
    """The facts of ``fact_ids`` derivable from the other KB facts of ``closure``: t ∈ Ω(K \\ {t}, R), i.e. {t} is not
    a deep unlearning set of t, so its minimal deep unlearning sets hold more than t.

    Args:
        closure: a :class:`dukb.solver.closure.Closure` (under ``--no-finetune``, of the known part K');
        fact_ids: relationship fact_ids of its KB (iterable of int).

    Returns:
        list of int, in the order given.

    Source: Wu et al. 2025, Definition 2 (deep unlearning).
    """
    return [int(t) for t in fact_ids if not is_deep_unlearning_set(closure, [closure.atom_of_fact(int(t))], [int(t)])]


def require_candidates(known: Known, candidates, chat: bool) -> None:
    """Refuse a ``--no-finetune`` run whose model knew no fact with a derivation from other known facts: it has no
    target whose minimal deep unlearning sets hold more than the target (Wu et al. 2025, Definitions 2-3).

    Args:
        known: the facts the model knew before unlearning (:class:`Known`).
        candidates: the known facts derivable from other known facts (:func:`rederivable`), a sequence of int.
        chat: whether the probe used the tokenizer's chat template (``--prompt chat``); when it did not, the line
            suggests it, since an instruct model often answers a bare ``Question:``/``Answer:`` prompt with nothing.

    Raises:
        InputError: one line: how much the model knew, and that no target qualifies.
    """
    if candidates:
        return
    hint = "" if chat else " (an instruct model may show more of what it knows under --prompt chat)"
    raise InputError(
        f"--no-finetune: {known_line(known).split(';')[0]}, and none of them has a derivation from other facts it "
        f"knew: no target to unlearn deeply{hint}"
    )


def check_known_targets(targets, known: Known, candidates) -> None:
    """Refuse given targets (``--targets-file``) the model did not know, or that have no derivation from other known
    facts (their only minimal set would be the target itself).

    Raises:
        InputError: one line naming the first such target and how many there are.
    """
    cand = set(candidates)
    for what, bad in (
        ("the model did not know before unlearning (qa probe)", [t for t in targets if t not in known.relationships]),
        (
            "have no derivation from other facts the model knew",
            [t for t in targets if t in known.relationships and t not in cand],
        ),
    ):
        if bad:
            raise InputError(
                f"--no-finetune: {len(bad)} of the targets given {what} (first: {bad[0]}); their "
                f"recall cannot be scored: {len(cand)} known facts qualify (config.json "
                "known_before after a run without --targets-file lists the known facts)"
            )


def known_line(known: Known) -> str:
    """The report's line: "the model knew K of N relationship facts (P%) before unlearning; ...".

    Source: dukb (the coverage of the known facts, module docstring)."""
    k, n = len(known.relationships), known.n_relationships
    pct = f"{100 * k / n:.1f}%" if n else "–"
    line = (
        f"the model knew {k} of {n} relationship facts ({pct}) before unlearning; unknown facts are unscorable "
        "(never counted as forgotten, left out of recall and accuracy)"
    )
    if known.n_biographies:
        line += f"; it knew {len(known.biographies)} of {known.n_biographies} biography facts"
    return line


def known_of_record(rec) -> Known | None:
    """The :class:`Known` of config.json's ``known_before`` (:meth:`Known.record`), or None when the run has none
    or it is malformed (a run without ``--no-finetune``)."""
    if not isinstance(rec, dict):
        return None
    try:
        return Known(
            *(
                frozenset(int(f) for f in rec[key][kind])
                for key in ("fact_ids", "unknown_fact_ids")
                for kind in ("relationships", "biographies")
            )
        )
    except (TypeError, KeyError, ValueError):
        return None


__all__ = [
    "KNOWN_FORM",
    "Known",
    "check_known_targets",
    "known_from_probe",
    "known_line",
    "known_of_record",
    "known_part",
    "rederivable",
]
