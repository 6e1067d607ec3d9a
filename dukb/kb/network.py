"""The synthetic family network of :mod:`dukb.kb.generate`: who is whose parent and spouse, with birth years, and
every true relationship fact it implies.

People are numbered 0, 1, ... in creation order; genders are :data:`MALE` (0) and :data:`FEMALE` (1); ``-1`` means
"none". :func:`grow` builds the network as Wu et al. 2025 (Appendix B) describe Eval-DU's construction;
:func:`true_relations` reads off its facts with EDU-RELAT's relation semantics. :class:`GeneratorConfig` holds
the generator's probabilities and distributions.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import cast

import numpy as np

from dukb import InputError
from dukb.kb.model import Triple
from dukb.kb.schema import RELATIONS

#: Gender codes of the network's arrays.
MALE, FEMALE = 0, 1

#: Relative chance of each relation's true facts to be observed in K, measured on EDU-RELAT (K / closure per
#: relation: father, mother, husband, wife 1.0; child 100/130; brother 42/61, sister 28/41; aunt, uncle, niece and
#: nephew 32/132 together). With ``observed`` = :data:`dukb.kb.generate.EDU_RELAT_OBSERVED` the probabilities are
#: these weights.
EDU_RELAT_OBSERVE_WEIGHTS: dict[str, float] = {
    "father": 1.0,
    "mother": 1.0,
    "husband": 1.0,
    "wife": 1.0,
    "child": 0.77,
    "brother": 0.69,
    "sister": 0.69,
    "aunt": 0.24,
    "uncle": 0.24,
    "nephew": 0.24,
    "niece": 0.24,
}


@dataclass(frozen=True)
class GeneratorConfig:
    """Probabilities and distributions of the generator (defaults reproduce EDU-RELAT's statistics at 100 people).

    Attributes:
        p_parents: chance that a person (not in generation 0) without parents gets parents.
        p_spouse: chance that a person without a spouse gets one (a new person of the other gender, same generation).
        p_children: chance that a couple (not in the youngest generation) has children.
        children_geometric_p: success probability of the geometric number of children (support 1..max_children).
        max_children: truncation of the geometric distribution (the paper's 4).
        root_generation: generation of each founder that starts a family (0 = oldest).
        p_wife_takes_surname: chance that a wife takes her husband's surname.
        p_parent_birthplace: chance that a child is born in a parent's birth state.
        founder_year_mean, founder_year_sd: birth year (years AD) of a founder of generation 0 (Gaussian); a
            founder of generation g is born ``g * generation_years`` later.
        generation_years: years between the mean birth years of two generations.
        cohort_pull: in [0, 1]; how far each age or gap draw's mean moves from its own mean toward the value that
            would put the new person on their generation's mean birth year (0: not at all).
        mother_age_mean, mother_age_sd, mother_age_min, mother_age_max: the mother's age at a birth (years), a
            Gaussian truncated to [min, max] (min >= 1, so a parent is always born before the child).
        father_min_age: the father's least age at a birth (years, >= 1); raises the lower truncation bound.
        spouse_gap_mean, spouse_gap_sd, spouse_gap_min, spouse_gap_max: the wife's birth year minus the husband's
            (years), a truncated Gaussian.
        observe_weights: relation -> relative chance of its true facts to be observed in K (see
            :data:`EDU_RELAT_OBSERVE_WEIGHTS`).

    Raises:
        InputError: a probability outside [0, 1], a non-positive spread, an empty range, an unknown relation.

    Source: Wu et al. 2025, Appendix B (Eval-DU construction); defaults measured on EDU-RELAT (Appendix F).

    Example:
        >>> GeneratorConfig().p_spouse, GeneratorConfig(p_spouse=0.5).p_spouse
        (0.7, 0.5)
        >>> GeneratorConfig(p_spouse=1.5)
        Traceback (most recent call last):
            ...
        dukb.InputError: p_spouse must be a probability in [0, 1], got 1.5
    """

    p_parents: float = 0.8
    p_spouse: float = 0.7
    p_children: float = 0.9
    children_geometric_p: float = 0.4
    max_children: int = 4
    root_generation: int = 2
    p_wife_takes_surname: float = 0.2
    p_parent_birthplace: float = 0.9
    founder_year_mean: float = 1907.0
    founder_year_sd: float = 5.0
    generation_years: float = 27.0
    cohort_pull: float = 0.2
    mother_age_mean: float = 26.5
    mother_age_sd: float = 3.5
    mother_age_min: float = 18.0
    mother_age_max: float = 42.0
    father_min_age: float = 18.0
    spouse_gap_mean: float = 2.0
    spouse_gap_sd: float = 3.0
    spouse_gap_min: float = -6.0
    spouse_gap_max: float = 10.0
    observe_weights: dict = field(default_factory=lambda: dict(EDU_RELAT_OBSERVE_WEIGHTS))

    def __post_init__(self) -> None:
        for name in (
            "p_parents",
            "p_spouse",
            "p_children",
            "p_wife_takes_surname",
            "p_parent_birthplace",
            "cohort_pull",
        ):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and 0.0 <= v <= 1.0):
                raise InputError(f"{name} must be a probability in [0, 1], got {v!r}")
        if not (0.0 < self.children_geometric_p <= 1.0):
            raise InputError(f"children_geometric_p must be in (0, 1], got {self.children_geometric_p!r}")
        if not (isinstance(self.max_children, int) and self.max_children >= 1):
            raise InputError(f"max_children must be an integer >= 1, got {self.max_children!r}")
        if not (isinstance(self.root_generation, int) and self.root_generation >= 0):
            raise InputError(f"root_generation must be an integer >= 0, got {self.root_generation!r}")
        for name in ("founder_year_sd", "mother_age_sd", "spouse_gap_sd"):
            if not getattr(self, name) > 0:
                raise InputError(f"{name} must be positive, got {getattr(self, name)!r}")
        if not (1 <= self.mother_age_min and math.ceil(self.mother_age_min) <= math.floor(self.mother_age_max)):
            raise InputError(
                f"mother_age_min..mother_age_max must hold a whole age >= 1, got "
                f"{self.mother_age_min}..{self.mother_age_max}"
            )
        if not (math.ceil(self.spouse_gap_min) <= math.floor(self.spouse_gap_max)):
            raise InputError(
                f"spouse_gap_min..spouse_gap_max holds no whole number of years: "
                f"{self.spouse_gap_min}..{self.spouse_gap_max}"
            )
        if self.father_min_age < 1:
            raise InputError(f"father_min_age must be at least 1, got {self.father_min_age!r}")
        # a couple must be able to have a child: the father's age bound must fit the mother's ages and the gaps
        if (
            self.father_min_age - self.spouse_gap_min > self.mother_age_max
            or self.father_min_age - self.mother_age_min > self.spouse_gap_max
        ):
            raise InputError(
                "father_min_age cannot be met with these mother ages and spouse gaps: need "
                "father_min_age - spouse_gap_min <= mother_age_max and "
                "father_min_age - mother_age_min <= spouse_gap_max"
            )
        if self.generation_years <= 0:
            raise InputError(f"generation_years must be positive, got {self.generation_years!r}")
        bad = sorted(set(self.observe_weights) - set(RELATIONS))
        if bad:
            raise InputError(f"observe_weights: unknown relation {', '.join(bad)} (known: {', '.join(RELATIONS)})")
        for r, w in self.observe_weights.items():
            if not (isinstance(w, (int, float)) and w >= 0 and math.isfinite(w)):
                raise InputError(f"observe_weights[{r!r}] must be a finite number >= 0, got {w!r}")


# -- sampling helpers ---------------------------------------------------------------------------------------------
STD_NORMAL = NormalDist()


def truncnorm(u: float, mean: float, sd: float, lo: float, hi: float) -> float:
    """Gaussian(mean, sd) truncated to [lo, hi], by the inverse CDF of the uniform draw u in [0, 1).

    Args:
        u: a uniform draw in [0, 1).
        mean, sd: the Gaussian's mean and standard deviation (sd > 0), in the caller's unit (years).
        lo, hi: the window; when lo > hi both become their midpoint.

    Returns:
        The value in [lo, hi] (the window's point nearest the mean when the window lies far in a tail).

    Source: Wu et al. 2025, Appendix B (ages drawn from truncated Gaussians).

    Example:
        >>> round(truncnorm(0.5, 26.5, 3.5, 18, 42), 2), round(truncnorm(0.0, 26.5, 3.5, 18, 42), 2)
        (26.53, 18.0)
        >>> truncnorm(0.3, 0, 1, 50, 60)  # 50 sd above the mean: the window's nearest point
        50
    """
    if lo > hi:
        lo = hi = (lo + hi) / 2
    a, b = STD_NORMAL.cdf((lo - mean) / sd), STD_NORMAL.cdf((hi - mean) / sd)
    if b - a < 1e-12:  # the window lies far in a tail: take its nearest point to the mean
        return min(max(mean, lo), hi)
    p = min(max(a + u * (b - a), 1e-15), 1 - 1e-15)
    return min(max(mean + sd * STD_NORMAL.inv_cdf(p), lo), hi)


def draw_years(u: float, mean: float, sd: float, lo: float, hi: float) -> int:
    """A whole number of years from Gaussian(mean, sd) truncated to [lo, hi] (:func:`truncnorm` rounded, then
    clamped to the whole years inside [lo, hi]); the lower bound wins a conflict.

    Source: Wu et al. 2025, Appendix B.

    Example:
        >>> draw_years(0.5, 26.5, 3.5, 18, 42), draw_years(0.99, 26.5, 3.5, 18, 42), draw_years(0.5, 30, 1, 18.2, 18.6)
        (27, 35, 19)
    """
    x = round(truncnorm(u, mean, sd, lo, hi))
    return int(max(min(x, math.floor(hi)), math.ceil(lo)))


def geometric_cdf(p: float, k_max: int) -> np.ndarray:
    """The CDF of the number of children: a geometric distribution of success probability ``p`` on 1..k_max,
    truncated and renormalised.

    Returns:
        float64 array of shape (k_max,); entry k-1 is P(children <= k) (the last is 1).

    Source: Wu et al. 2025, Appendix B (at most 4 children per couple).

    Example:
        >>> geometric_cdf(0.4, 4).round(4).tolist()
        [0.4596, 0.7353, 0.9007, 1.0]
    """
    probs = np.array([(1 - p) ** (k - 1) * p for k in range(1, k_max + 1)])
    return np.cumsum(probs / probs.sum())


# -- the network --------------------------------------------------------------------------------------------------
class FamilyNet:
    """Growable arrays of the family network (plain lists: appends are O(1)).

    Attributes:
        gender, gen, year: per person: :data:`MALE`/:data:`FEMALE`, generation (0 oldest), birth year (AD).
        father, mother, spouse: per person: a person index or -1.
        kids: mother -> her children, in order of creation.
        decided: mothers whose children are decided.

    Example:
        >>> net = FamilyNet()
        >>> al, bea = net.add(0, MALE, 1900), net.add(0, FEMALE, 1902)
        >>> net.marry(al, bea)
        >>> net.spouse, net.wife_of(al), net.wife_of(bea)
        ([1, 0], 1, 1)
    """

    def __init__(self) -> None:
        self.gender: list[int] = []
        self.gen: list[int] = []
        self.year: list[int] = []
        self.father: list[int] = []
        self.mother: list[int] = []
        self.spouse: list[int] = []
        self.kids: dict[int, list[int]] = {}  # mother -> children, in order of creation
        self.decided: set[int] = set()  # mothers whose children are decided

    def add(self, gen: int, gender: int, year: int) -> int:
        self.gender.append(gender)
        self.gen.append(gen)
        self.year.append(year)
        self.father.append(-1)
        self.mother.append(-1)
        self.spouse.append(-1)
        return len(self.gender) - 1

    def marry(self, a: int, b: int) -> None:
        self.spouse[a] = b
        self.spouse[b] = a

    def wife_of(self, a: int) -> int:
        return a if self.gender[a] == FEMALE else self.spouse[a]


def grow(n: int, generations: int, cfg: GeneratorConfig, rng: np.random.Generator) -> FamilyNet:
    """Grow the network to exactly n people, with birth years (Wu et al. 2025, Appendix B).

    Every person but a founder is created relative to one existing person, and their birth year is drawn relative
    to that person's, so every constraint holds by construction: a child is born to a mother aged
    [mother_age_min, mother_age_max] (a truncated Gaussian) and a father aged at least father_min_age; a wife's
    birth year minus her husband's lies in [spouse_gap_min, spouse_gap_max] (a truncated Gaussian).

    Args:
        n: number of people (exactly).
        generations: number of generations (generation 0 is the oldest).
        cfg: the generator's probabilities and distributions.
        rng: numpy's random generator (every draw comes from it).

    Returns:
        The :class:`FamilyNet`.

    Example:
        >>> net = grow(10, 3, GeneratorConfig(), np.random.default_rng(0))
        >>> len(net.gender), max(net.gen) < 3
        (10, True)
        >>> all(net.year[c] > net.year[net.mother[c]] for c in range(10) if net.mother[c] >= 0)
        True
    """
    net = FamilyNet()
    cdf = geometric_cdf(cfg.children_geometric_p, cfg.max_children)
    root_gen = min(cfg.root_generation, generations - 1)
    youngest = generations - 1
    queue: list[tuple[int, int]] = []  # (generation, person): the oldest generation is expanded first

    def push(*people: int) -> None:
        for q in people:
            heapq.heappush(queue, (net.gen[q], q))

    def n_children() -> int:
        return int(np.searchsorted(cdf, rng.random(), side="right")) + 1

    def cohort(g: int) -> float:  # mean birth year of generation g
        return cfg.founder_year_mean + g * cfg.generation_years

    def pulled(mean: float, on_cohort: float) -> float:  # a draw's mean, pulled toward the one on the cohort year
        return (1 - cfg.cohort_pull) * mean + cfg.cohort_pull * on_cohort

    def age_at_birth(mother_year: float, child_gen: int, lo: float) -> int:
        mean = pulled(cfg.mother_age_mean, cohort(child_gen) - mother_year)
        return draw_years(rng.random(), mean, cfg.mother_age_sd, lo, cfg.mother_age_max)

    def gap(
        mean_wife_year: float, husband_year: float | None, wife_year: float | None, lo: float = cfg.spouse_gap_min
    ) -> int:  # wife's year - husband's; one of the two years is known
        on_cohort = (
            mean_wife_year - husband_year if husband_year is not None else cast(float, wife_year) - mean_wife_year
        )
        mean = pulled(cfg.spouse_gap_mean, on_cohort)
        return draw_years(rng.random(), mean, cfg.spouse_gap_sd, lo, cfg.spouse_gap_max)

    def add_children(f: int, m: int, k: int, first: int = -1) -> list[int]:
        kids = [] if first < 0 else [first]
        my, fy = net.year[m], net.year[f]
        lo = max(cfg.mother_age_min, fy + cfg.father_min_age - my)
        for _ in range(k):
            kids.append(net.add(net.gen[m] + 1, int(rng.integers(2)), my + age_at_birth(my, net.gen[m] + 1, lo)))
        for c in kids:
            net.father[c], net.mother[c] = f, m
        net.kids[m] = kids
        net.decided.add(m)
        return kids if first < 0 else kids[1:]

    while len(net.gen) < n:
        if not queue:
            year = round(rng.normal(cfg.founder_year_mean + root_gen * cfg.generation_years, cfg.founder_year_sd))
            push(net.add(root_gen, int(rng.integers(2)), year))
        x = heapq.heappop(queue)[1]
        # parents (and with them x's siblings)
        if net.gen[x] > 0 and net.father[x] < 0 and rng.random() < cfg.p_parents and n - len(net.gen) >= 2:
            g = net.gen[x] - 1
            mean = pulled(cfg.mother_age_mean, net.year[x] - cohort(g))
            age = draw_years(rng.random(), mean, cfg.mother_age_sd, cfg.mother_age_min, cfg.mother_age_max)
            my = net.year[x] - age
            # the father is at least father_min_age at x's birth
            fy = my - gap(cohort(g), None, my, max(cfg.spouse_gap_min, cfg.father_min_age - age))
            f, m = net.add(g, MALE, fy), net.add(g, FEMALE, my)
            net.marry(f, m)
            k = min(n_children() - 1, n - len(net.gen))
            sibs = add_children(f, m, k, first=x)
            push(f, m, *sibs)
        # spouse
        if net.spouse[x] < 0 and rng.random() < cfg.p_spouse and len(net.gen) < n:
            if net.gender[x] == MALE:
                sy = net.year[x] + gap(cohort(net.gen[x]), net.year[x], None)
            else:
                sy = net.year[x] - gap(cohort(net.gen[x]), None, net.year[x])
            s = net.add(net.gen[x], 1 - net.gender[x], sy)
            net.marry(x, s)
            push(s)
        # children of x's couple
        if net.spouse[x] >= 0 and net.gen[x] < youngest:
            m = net.wife_of(x)
            if m not in net.decided:
                net.decided.add(m)
                if rng.random() < cfg.p_children:
                    k = min(n_children(), n - len(net.gen))
                    if k > 0:
                        push(*add_children(net.spouse[m], m, k))
    return net


def true_relations(net: FamilyNet, names: list[str]) -> list[Triple]:
    """Every true relationship fact of the network, grouped by relation in RELATIONS order.

    Args:
        net: the network.
        names: the name of each person (``names[i]`` is person i).

    Returns:
        ``(subject, relation, object)`` triples, read "object is subject's relation".

    Source: Wu et al. 2025, Appendix B; the relation semantics are those of EDU-RELAT's closure.

    Example:
        >>> net = FamilyNet()
        >>> al, bea, cy = net.add(0, MALE, 1900), net.add(0, FEMALE, 1902), net.add(1, FEMALE, 1930)
        >>> net.marry(al, bea)
        >>> net.father[cy], net.mother[cy], net.kids[bea] = al, bea, [cy]
        >>> true_relations(net, ["Al", "Bea", "Cy"])
        [('Al', 'child', 'Cy'), ('Bea', 'child', 'Cy'), ('Cy', 'father', 'Al'), ('Cy', 'mother', 'Bea'),
         ('Bea', 'husband', 'Al'), ('Al', 'wife', 'Bea')]
    """
    g = net.gender
    by: dict[str, list[Triple]] = {r: [] for r in RELATIONS}
    sibs: dict[int, list[int]] = {}
    for kids in net.kids.values():
        for c in kids:
            sibs[c] = kids
    for c in range(len(g)):
        f, m = net.father[c], net.mother[c]
        if f < 0:
            continue
        nc = names[c]
        by["child"].append((names[f], "child", nc))
        by["child"].append((names[m], "child", nc))
        by["father"].append((nc, "father", names[f]))
        by["mother"].append((nc, "mother", names[m]))
        for b in sibs[c]:
            if b != c:
                by["brother" if g[b] == MALE else "sister"].append(
                    (nc, "brother" if g[b] == MALE else "sister", names[b])
                )
        for p in (f, m):
            for s in sibs.get(p, ()):
                if s == p:
                    continue
                rel = "uncle" if g[s] == MALE else "aunt"
                by[rel].append((nc, rel, names[s]))
                inv = "nephew" if g[c] == MALE else "niece"
                by[inv].append((names[s], inv, nc))
    for a in range(len(g)):
        b = net.spouse[a]
        if b >= 0:
            rel = "husband" if g[b] == MALE else "wife"
            by[rel].append((names[a], rel, names[b]))
    return [t for r in RELATIONS for t in by[r]]
