"""Synthetic family KBs in the manner of EDU-RELAT: a family network, names, biographies and an observed subset.

Wu et al. 2025 ("Evaluating Deep Unlearning in Large Language Models", Appendix B "Eval-DU" and Appendix F) build
EDU-RELAT like this, and :func:`generate` follows it:

- *Family network*: grown recursively from a founder (in generation ``root_generation``). Each person taken from
  the queue (oldest generation first) gets, with set probabilities, parents (if they have none and are not in the
  oldest generation; the parents' other children, x's siblings, come with them), a spouse (if they have none) and
  children (if the couple's children are not decided yet and they are not in the youngest generation). The
  network spans ``generations`` generations (4). The number of children of a couple is drawn from a geometric
  distribution truncated at 4 (support 1..4). When the queue runs dry before ``n_people`` people exist, a new
  founder starts a new family; the last expansion is cut short so that exactly ``n_people`` people exist.
- *Names*: first names by gender from ``dukb/data/names_{male,female}.txt``; the surname is the father's where
  the father exists, else drawn from ``surnames.txt``; a wife takes her husband's surname with a small
  probability. Full names are unique within a KB (a first name colliding with an existing full name is redrawn,
  then a middle name is added).
- *Biographies*: every person but a founder is created next to one existing person (as a parent, sibling, spouse
  or child) and born relative to them, so every constraint holds by construction: a child's birth year is the
  mother's plus a truncated Gaussian age in [18, 42] (the truncation also keeps the father at least 18); a wife's
  birth year minus her husband's is a truncated Gaussian gap in [-6, 10] (mean 2). Each draw's mean is pulled a
  little (``cohort_pull``) toward the year that would put the person on their generation's mean birth year
  (``founder_year_mean + generation * generation_years``), which keeps generations apart as in EDU-RELAT (birth
  years 1890-2000, about 27 years a generation). Birthplace: a parent's (each parent equally likely) with
  probability ``p_parent_birthplace``, else a state drawn by its 2020 US population (``us_states.csv``). Job: drawn
  uniformly from the jobs of the person's birth decade (``jobs_by_decade.csv``, the paper's 55 jobs, 1900-2020).
- *Relationship facts*: the true relations of the network, all 11 kinds, read "o is s's r" (:mod:`dukb.kb.schema`).
  Uncles and aunts are a parent's siblings and siblings share both parents, as in EDU-RELAT, whose closure is
  exactly this set; everyone has a single spouse and every child has both parents (married to each other) or
  none, so the 48 family rules are sound on the network. Only a fraction ``observed`` of the true facts goes into
  K, chosen per relation with the weights of :data:`dukb.kb.network.EDU_RELAT_OBSERVE_WEIGHTS` (EDU-RELAT keeps
  every father, mother, husband and wife fact, about 3/4 of child and sibling facts and 1/4 of
  aunt/uncle/niece/nephew facts), so that the closure of K adds facts (EDU-RELAT: 400 in K, 562 in the closure).

Everything is drawn from ``numpy.random.default_rng(seed)``: the same arguments give the same KB, byte for byte.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np

from dukb import InputError, one_line
from dukb.kb.csvfile import read_bytes, read_package_text
from dukb.kb.io import atomic_output, gc_paused, load_kb, save_kb
from dukb.kb.model import KB, BioFact, Fact, Person, Triple
from dukb.kb.network import FEMALE, GeneratorConfig, grow, true_relations
from dukb.kb.schema import RELATIONS

#: Bumped whenever the output for given arguments changes (names the cache of :func:`default_generated_kb_dir`).
GENERATOR_VERSION = 1

#: The arguments of the built-in default generated KB (:func:`default_generated_kb_dir`).
DEFAULT_PEOPLE = 100
DEFAULT_SEED = 0

#: Most people :func:`generate` (and ``dukb generate --people``) makes: 1,000,000, the largest KB the symbolic core
#: is measured on (bench/RESULTS.md: its closure in 93 s and 5 GiB). A larger count would run for hours and
#: exhaust memory instead of being refused.
MAX_PEOPLE = 1_000_000

#: Most generations :func:`generate` (and ``dukb generate --generations``) spans: 100 (EDU-RELAT has 4). Each
#: generation is a pass over the people, and birth years move 27 years a generation.
MAX_GENERATIONS = 100

#: EDU-RELAT's share of the true relationship facts that K holds: 400 of the 562 facts of its closure.
EDU_RELAT_OBSERVED = 400 / 562

_GENDER = ("male", "female")
_JOB_DECADES = (1900, 2020)


@dataclass
class FamilyTruth:
    """The generated family network and its full set of true relationship facts.

    People are numbered 0..n-1 in KB order (``names[i]`` is person i); ``-1`` means "none".

    Attributes:
        names: full name of each person.
        gender: 0 male, 1 female, per person (int8 array).
        generation: 0 (oldest) .. generations-1, per person (int16 array).
        father, mother, spouse: person index or -1 (int64 arrays). Every child has both parents or none, the
            parents are each other's spouses, and everyone has at most one spouse.
        birth_surname: the surname each person was born with (the father's, or drawn for people without father).
        relations: every true relationship fact ``(subject, relation, object)``, read "object is subject's
            relation", grouped by relation in :data:`RELATIONS` order.
        observed: the facts of K, in K's order (fact_id i is ``observed[i]``).

    Source: Wu et al. 2025, Appendix B; the relation semantics are those of EDU-RELAT's closure.

    Example:
        >>> kb, truth = generate(20, seed=1, generations=3)
        >>> len(truth.names), len(truth.relations), len(truth.observed) == len(kb.relationships)
        (20, 74, True)
        >>> truth.counts()["child"], set(truth.observed) <= truth.triples
        (20, True)
    """

    names: list[str]
    gender: np.ndarray
    generation: np.ndarray
    father: np.ndarray
    mother: np.ndarray
    spouse: np.ndarray
    birth_surname: list[str]
    relations: list[Triple]
    observed: list[Triple]
    _set: frozenset | None = field(default=None, repr=False)

    @property
    def triples(self) -> frozenset:
        """All true relationship facts as a frozenset of ``(subject, relation, object)`` triples."""
        if self._set is None:
            self._set = frozenset(self.relations)
        return self._set

    def __contains__(self, triple: object) -> bool:
        return tuple(triple) in self.triples  # type: ignore[arg-type]

    def __len__(self) -> int:
        return len(self.relations)

    def counts(self) -> dict[str, int]:
        """Number of true facts per relation, in :data:`RELATIONS` order."""
        out = dict.fromkeys(RELATIONS, 0)
        for _, r, _ in self.relations:
            out[r] += 1
        return out

    def observed_counts(self) -> dict[str, int]:
        """Number of observed (K) facts per relation, in :data:`RELATIONS` order."""
        out = dict.fromkeys(RELATIONS, 0)
        for _, r, _ in self.observed:
            out[r] += 1
        return out


# -- package data -------------------------------------------------------------------------------------------------
def _data_lines(name: str) -> list[str]:
    text, _ = read_package_text(name)
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def _data_csv(name: str, columns: tuple[str, ...]) -> list[dict]:
    lines = _data_lines(name)
    rows = list(csv.DictReader(lines))
    if not rows or any(c not in rows[0] for c in columns):
        raise InputError(f"package data file {name} lacks columns {', '.join(columns)}")  # pragma: no cover
    return rows


@cache
def first_names(gender: str) -> tuple[str, ...]:
    """The first-name list of a gender ("male"/"female"), from ``dukb/data/names_<gender>.txt``.

    Source: US Census Bureau 1990 name files (public domain); Wu et al. 2025 Appendix B (names by gender).

    Example:
        >>> first_names("female")[:3], len(first_names("male"))
        (('Patricia', 'Linda', 'Barbara'), 915)
    """
    return tuple(_data_lines(f"names_{gender}.txt"))


@cache
def surnames() -> tuple[str, ...]:
    """The surname list (``dukb/data/surnames.txt``), used for people without a father in the network.

    Example:
        >>> surnames()[:2], len(surnames())
        (('Smith', 'Johnson'), 2000)
    """
    return tuple(_data_lines("surnames.txt"))


@cache
def us_states() -> tuple[tuple[str, ...], np.ndarray]:
    """The 50 US states and their probabilities (2020 Census population / US total), from ``us_states.csv``.

    Returns:
        (state names, float64 probabilities summing to 1).

    Example:
        >>> names, probs = us_states()
        >>> len(names), names[0], round(float(probs.sum()), 6)
        (50, 'Alabama', 1.0)
    """
    rows = _data_csv("us_states.csv", ("state", "population"))
    w = np.array([float(r["population"]) for r in rows])
    return tuple(r["state"] for r in rows), w / w.sum()


@cache
def jobs_by_decade() -> dict[int, tuple[str, ...]]:
    """Decade (1900, 1910, ..., 2020) -> the jobs typical of it, from ``jobs_by_decade.csv``.

    Source: the 55 jobs of Wu et al. 2025, Appendix F ("collected from the job list across years 1900-2020").

    Example:
        >>> jobs = jobs_by_decade()
        >>> min(jobs), max(jobs), len(jobs), jobs[1950][:2]
        (1900, 2020, 13, ('Teacher', 'Nurse'))
    """
    out: dict[int, list[str]] = {}
    for r in _data_csv("jobs_by_decade.csv", ("decade", "job")):
        out.setdefault(int(r["decade"]), []).append(r["job"])
    return {d: tuple(v) for d, v in sorted(out.items())}


def job_decade(birthyear: int) -> int:
    """The decade whose job list a person born in ``birthyear`` draws from: the birth decade, clamped to 1900-2020.

    Example:
        >>> job_decade(1957), job_decade(1850), job_decade(2031)
        (1950, 1900, 2020)
    """
    return int(min(max(birthyear // 10 * 10, _JOB_DECADES[0]), _JOB_DECADES[1]))


def birthplace_value(state: str) -> str:
    """A birthplace as EDU-RELAT's biographies write it: ``"Ohio"`` -> ``"Ohio state"``.

    Example:
        >>> birthplace_value("Ohio")
        'Ohio state'
    """
    return f"{state} state"


def observation_probabilities(counts: dict[str, int], observed: float, weights: dict[str, float]) -> dict[str, float]:
    """Per-relation observation probabilities ``min(1, c * weight)`` whose expected total is ``observed`` of all.

    Args:
        counts: relation -> number of true facts.
        observed: wanted share of true facts in K, in [0, 1].
        weights: relation -> relative weight >= 0 (missing relations weigh 0).

    Returns:
        relation -> probability in [0, 1]. If the wanted share cannot be reached (relations of weight 0), every
        relation of positive weight gets probability 1.

    Source: dukb's reading of EDU-RELAT (per-relation shares of K in its closure); Wu et al. 2025, Appendix F.

    Example:
        >>> observation_probabilities({"child": 100, "father": 50}, 0.5, {"child": 1.0, "father": 1.0})
        {'child': 0.5, 'father': 0.5}
        >>> observation_probabilities({"child": 100, "father": 50}, 0.5, {"child": 1.0})  # father weighs 0
        {'child': 0.75, 'father': 0.0}
    """
    total = sum(counts.values())
    want = observed * total
    w = {r: float(weights.get(r, 0.0)) for r in counts}

    def expected(c: float) -> float:
        return sum(n * min(1.0, c * w[r]) for r, n in counts.items())

    if total == 0 or want <= 0:
        return {r: 0.0 for r in counts}
    if want >= sum(n for r, n in counts.items() if w[r] > 0):
        return {r: (1.0 if w[r] > 0 else 0.0) for r in counts}
    lo, hi = 0.0, 1.0
    while expected(hi) < want:
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        if expected(mid) < want:
            lo = mid
        else:
            hi = mid
    return {r: min(1.0, hi * w[r]) for r in counts}


def _observe(
    relations: list[Triple], observed: float, weights: dict[str, float], rng: np.random.Generator
) -> list[Triple]:
    """Choose round(observed * |relations|) facts, per relation in proportion to the observation probabilities,
    uniformly within a relation; return them in a random order (K's file order)."""
    groups: dict[str, list[int]] = {r: [] for r in RELATIONS}
    for i, (_, r, _) in enumerate(relations):
        groups[r].append(i)
    counts = {r: len(v) for r, v in groups.items()}
    probs = observation_probabilities(counts, observed, weights)
    target = min(int(round(observed * len(relations))), sum(n for r, n in counts.items() if probs[r] > 0))
    exact = {r: counts[r] * probs[r] for r in RELATIONS}
    take = {r: min(counts[r], int(math.floor(exact[r]))) for r in RELATIONS}
    short = target - sum(take.values())
    # largest remainder first; ties in RELATIONS order
    order = sorted(RELATIONS, key=lambda r: (-(exact[r] - math.floor(exact[r])), RELATIONS.index(r)))
    while short > 0:
        moved = False
        for r in order:
            if short > 0 and take[r] < counts[r] and probs[r] > 0:
                take[r] += 1
                short -= 1
                moved = True
        if not moved:
            break
    chosen: list[int] = []
    for r in RELATIONS:
        if take[r]:
            idx = np.asarray(groups[r])
            chosen.extend(idx[rng.choice(len(idx), size=take[r], replace=False)].tolist())
    perm = rng.permutation(len(chosen))
    return [relations[chosen[i]] for i in perm]


def _unique_name(first: tuple[str, ...], surname: str, taken: set[str], rng: np.random.Generator) -> str:
    for _ in range(32):
        name = f"{first[int(rng.integers(len(first)))]} {surname}"
        if name not in taken:
            return name
    for _ in range(256):  # a middle name
        a, b = rng.integers(len(first), size=2)
        name = f"{first[int(a)]} {first[int(b)]} {surname}"
        if name not in taken:
            return name
    k = 2  # pragma: no cover - needs ~10^6 people of one surname
    base = f"{first[int(rng.integers(len(first)))]} {first[int(rng.integers(len(first)))]}"
    while f"{base} {k} {surname}" in taken:
        k += 1
    return f"{base} {k} {surname}"


def generate(
    n_people: int = DEFAULT_PEOPLE,
    seed: int = DEFAULT_SEED,
    generations: int = 4,
    observed: float = EDU_RELAT_OBSERVED,
    config: GeneratorConfig | None = None,
) -> tuple[KB, FamilyTruth]:
    """Generate a synthetic family KB and its true network (Wu et al. 2025, Appendix B).

    Args:
        n_people: number of people (exactly), 1 to :data:`MAX_PEOPLE`.
        seed: random seed (any integer >= 0); the same arguments give the same KB.
        generations: number of generations, 1 to :data:`MAX_GENERATIONS`; generation 0 is the oldest.
        observed: share of the true relationship facts put in K, in [0, 1] (default EDU-RELAT's 400/562): K holds
            round(observed * number of true facts) of them (fewer only if relations of observe weight 0 make
            that impossible), chosen per relation by :func:`observation_probabilities`.
        config: the generator's probabilities and distributions (default :class:`GeneratorConfig`).

    Returns:
        ``(kb, truth)``: the KB (people with birthyear, birthplace state, job, generation; the observed
        relationship facts with fact_ids 0.. in a random order; 3 biography facts per person, fact_ids 0.. in
        people order: birthyear, birthplace written "<State> state", job), and the :class:`FamilyTruth`.

    Raises:
        InputError: n_people or generations outside their range, observed outside [0, 1], negative seed, bad
            config.

    Source: Wu et al. 2025, "Evaluating Deep Unlearning in Large Language Models", Appendix B and F.

    Example:
        >>> kb, truth = generate(20, seed=1, generations=3)
        >>> kb
        KB(20 people, 53 relationship facts, 60 biography facts, source=None)
        >>> generate(20, seed=1, generations=3)[0].fingerprint() == kb.fingerprint()  # same seed, same KB
        True
        >>> generate(0)
        Traceback (most recent call last):
            ...
        dukb.InputError: ...
    """
    if isinstance(n_people, bool) or not isinstance(n_people, (int, np.integer)) or not 1 <= n_people <= MAX_PEOPLE:
        raise InputError(f"the number of people must be an integer in [1, {MAX_PEOPLE:,}], got {n_people!r}")
    if (
        isinstance(generations, bool)
        or not isinstance(generations, (int, np.integer))
        or not 1 <= generations <= MAX_GENERATIONS
    ):
        raise InputError(f"the number of generations must be an integer in [1, {MAX_GENERATIONS}], got {generations!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"the seed must be an integer >= 0, got {seed!r}")
    if not (isinstance(observed, (int, float)) and 0.0 <= observed <= 1.0):
        raise InputError(f"the observed share must be in [0, 1], got {observed!r}")
    cfg = config or GeneratorConfig()
    n_people, generations, seed = int(n_people), int(generations), int(seed)

    with gc_paused():  # millions of acyclic objects: the cyclic collector would walk them again and again
        return _generate(n_people, seed, generations, observed, cfg)


def _generate(
    n_people: int, seed: int, generations: int, observed: float, cfg: GeneratorConfig
) -> tuple[KB, FamilyTruth]:
    """The body of :func:`generate` (arguments checked)."""
    rng = np.random.default_rng(seed)

    net = grow(n_people, generations, cfg, rng)
    n = len(net.gen)
    gender = np.asarray(net.gender, dtype=np.int8)
    gen = np.asarray(net.gen, dtype=np.int16)
    father = np.asarray(net.father, dtype=np.int64)
    mother = np.asarray(net.mother, dtype=np.int64)
    spouse = np.asarray(net.spouse, dtype=np.int64)
    year = np.asarray(net.year, dtype=np.int64)

    # -- birthplaces ---------------------------------------------------------------------------------------------
    states, weights = us_states()
    place = np.full(n, -1, dtype=np.int64)
    for g in range(generations):
        members = np.flatnonzero(gen == g)
        inherit = (father[members] >= 0) & (rng.random(len(members)) < cfg.p_parent_birthplace)
        which = np.where(rng.random(len(members)) < 0.5, father[members], mother[members])
        drawn = rng.choice(len(states), size=len(members), p=weights)
        place[members] = np.where(inherit, place[np.maximum(which, 0)], drawn)

    # -- jobs ----------------------------------------------------------------------------------------------------
    table = jobs_by_decade()
    u = rng.random(n).tolist()
    # plain lists in the per-person loops below: indexing numpy arrays one element at a time is slow
    year_l, gender_l, gen_l, place_l = year.tolist(), gender.tolist(), gen.tolist(), place.tolist()
    father_l, spouse_l = father.tolist(), spouse.tolist()
    jobs = []
    for i in range(n):
        lst = table[job_decade(year_l[i])]
        jobs.append(lst[min(int(u[i] * len(lst)), len(lst) - 1)])

    # -- names ---------------------------------------------------------------------------------------------------
    sn = surnames()
    birth_sn: list[str] = [""] * n
    for i in np.argsort(gen, kind="stable").tolist():
        birth_sn[i] = birth_sn[father_l[i]] if father_l[i] >= 0 else sn[int(rng.integers(len(sn)))]
    final_sn = list(birth_sn)
    wives = np.flatnonzero((gender == FEMALE) & (spouse >= 0))
    takes = rng.random(len(wives)) < cfg.p_wife_takes_surname
    for w in wives[takes].tolist():
        final_sn[w] = birth_sn[spouse_l[w]]
    lists = (first_names("male"), first_names("female"))
    taken: set[str] = set()
    names: list[str] = []
    for i in range(n):
        name = _unique_name(lists[gender_l[i]], final_sn[i], taken, rng)
        taken.add(name)
        names.append(name)

    # -- facts ---------------------------------------------------------------------------------------------------
    relations = true_relations(net, names)
    obs = _observe(relations, float(observed), cfg.observe_weights, rng)
    people = {
        names[i]: Person(names[i], _GENDER[gender_l[i]], year_l[i], states[place_l[i]], jobs[i], gen_l[i])
        for i in range(n)
    }
    rels = [Fact(i, s, r, o) for i, (s, r, o) in enumerate(obs)]
    bios: list[BioFact] = []
    for i in range(n):
        k = 3 * i
        bios.append(BioFact(k, names[i], "birthyear", str(year_l[i])))
        bios.append(BioFact(k + 1, names[i], "birthplace", birthplace_value(states[place_l[i]])))
        bios.append(BioFact(k + 2, names[i], "job", jobs[i]))
    kb = KB(people, rels, bios)
    truth = FamilyTruth(names, gender, gen, father, mother, spouse, birth_sn, relations, obs)
    return kb, truth


def write_truth(truth: FamilyTruth, path: str | Path) -> Path:
    """Write every true relationship fact as CSV ``subject,relation,object,observed`` (observed 1 if in K, else 0),
    all or nothing (:func:`dukb.kb.io.atomic_output`).

    Returns:
        The path written.

    Raises:
        InputError: the file cannot be written (named).

    Example:
        >>> kb, truth = generate(10, seed=0, generations=2)
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     lines = write_truth(truth, Path(tmp) / "truth.csv").read_text().splitlines()
        >>> lines[0], len(lines) - 1 == len(truth.relations)
        ('subject,relation,object,observed', True)
        >>> sum(line.endswith(",1") for line in lines) == len(kb.relationships)
        True
    """

    path = Path(path)
    seen = set(truth.observed)
    with atomic_output(path) as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["subject", "relation", "object", "observed"])
        for t in truth.relations:
            w.writerow([*t, int(t in seen)])
    return path


# -- the built-in default generated KB ----------------------------------------------------------------------------
def cache_root() -> Path:
    """dukb's cache folder: ``$DUKB_CACHE_DIR``, else ``$XDG_CACHE_HOME/dukb``, else ``~/.cache/dukb``.

    Returns:
        The folder (it may not exist yet).

    Example:
        >>> from unittest import mock
        >>> with mock.patch.dict(os.environ, {"DUKB_CACHE_DIR": "/srv/cache"}):
        ...     print(cache_root())
        /srv/cache
        >>> with mock.patch.dict(os.environ, {"DUKB_CACHE_DIR": "", "XDG_CACHE_HOME": "/xdg"}):
        ...     print(cache_root())
        /xdg/dukb
    """
    env = os.environ.get("DUKB_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "dukb"


#: The files of the built-in generated KB's cache folder, each recorded in :data:`CACHE_MANIFEST`.
CACHE_FILES = ("people.csv", "relationships.csv", "biographies.csv", "truth.csv")

#: The cache folder's record of its files' SHA-256 digests, written when the folder is built and checked at every
#: use (:func:`default_generated_kb_dir`).
CACHE_MANIFEST = "sha256.json"


def _cache_digests(folder: Path) -> dict[str, str]:
    """SHA-256 (hex) of each of :data:`CACHE_FILES` in ``folder``, read bounded (a regular file of at most
    :data:`dukb.kb.csvfile.MAX_INPUT_BYTES` bytes).

    Raises:
        InputError: a file is missing, not a regular file, too large or unreadable (named).
    """

    return {name: hashlib.sha256(read_bytes(folder / name, "cached KB file")).hexdigest() for name in CACHE_FILES}


def cache_problem(folder: str | Path) -> str | None:
    """What is wrong with a built-in KB cache folder, or None when every file has the SHA-256 its
    :data:`CACHE_MANIFEST` recorded when it was built.

    Args:
        folder: the cache folder (``generated-p100-s0-v<GENERATOR_VERSION>``).

    Returns:
        None, or a short reason: ``no sha256.json``, ``sha256.json is damaged``, ``people.csv is missing`` (or not a
        regular file, or unreadable), ``relationships.csv changed since it was built``.

    Example:
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     folder = default_generated_kb_dir(tmp)
        ...     print(cache_problem(folder))
        ...     _ = (folder / "people.csv").write_text("name,gender\\n")
        ...     print(cache_problem(folder))
        None
        people.csv changed since it was built
    """

    folder = Path(folder)
    if not os.path.lexists(folder / CACHE_MANIFEST):
        return f"no {CACHE_MANIFEST}"
    try:
        recorded = json.loads(read_bytes(folder / CACHE_MANIFEST, CACHE_MANIFEST, limit=1 << 16))
    except InputError as e:
        return f"{CACHE_MANIFEST}: {e.message}"
    except (ValueError, RecursionError):
        return f"{CACHE_MANIFEST} is damaged"
    if (
        not isinstance(recorded, dict)
        or set(recorded) != set(CACHE_FILES)
        or not all(isinstance(v, str) for v in recorded.values())
    ):
        return f"{CACHE_MANIFEST} is damaged"
    try:
        got = _cache_digests(folder)
    except InputError as e:
        return f"{Path(e.path).name if e.path else 'a file'}: {e.message}"
    changed = [name for name in CACHE_FILES if got[name] != recorded[name]]
    return f"{', '.join(changed)} changed since it was built" if changed else None


def default_generated_kb_dir(cache_dir: str | Path | None = None) -> Path:
    """The built-in default generated KB: ``generate(DEFAULT_PEOPLE, DEFAULT_SEED)`` written as a KB directory.

    The directory is ``<cache>/generated-p100-s0-v<GENERATOR_VERSION>``, where ``<cache>`` is ``cache_dir``, else
    ``$DUKB_CACHE_DIR``, else ``$XDG_CACHE_HOME/dukb``, else ``~/.cache/dukb``. It is written on first use
    (atomically: into a temporary sibling, then renamed) with ``truth.csv`` (:func:`write_truth`) and
    :data:`CACHE_MANIFEST`, the SHA-256 of each file. Every later use checks the files against it
    (:func:`cache_problem`); a damaged folder (a file edited, truncated, missing or replaced, or the record itself
    damaged or missing) is moved aside and built again, with one line on stderr (``dukb: note: the cached built-in
    KB DIR was damaged (REASON); rebuilt``). Use it wherever dukb needs an EDU-RELAT-like KB that ships with the
    package.

    Args:
        cache_dir: folder to keep it in (created if needed).

    Returns:
        The KB directory (loadable with :func:`dukb.kb.load_kb`).

    Raises:
        InputError: the cache folder cannot be written.

    Example:
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     folder = default_generated_kb_dir(tmp)
        ...     print(folder.name, sorted(p.name for p in folder.iterdir()))
        ...     print(default_generated_kb_dir(tmp) == folder)
        generated-p100-s0-v... ['biographies.csv', 'people.csv', 'relationships.csv', 'sha256.json', 'truth.csv']
        True
    """

    root = Path(cache_dir) if cache_dir is not None else cache_root()
    target = root / f"generated-p{DEFAULT_PEOPLE}-s{DEFAULT_SEED}-v{GENERATOR_VERSION}"
    problem = None
    if os.path.lexists(target):
        problem = cache_problem(target)
        if problem is None:
            return target
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".generating-", dir=root))
    except OSError as e:
        raise InputError(f"cannot write the generated KB cache: {e.strerror}", root) from None
    old = None
    try:
        kb, truth = generate(DEFAULT_PEOPLE, DEFAULT_SEED)
        save_kb(kb, tmp)
        write_truth(truth, tmp / "truth.csv")
        digests = _cache_digests(tmp)
        (tmp / CACHE_MANIFEST).write_text(json.dumps(digests, indent=1) + "\n", encoding="utf-8")
        try:
            if os.path.lexists(target):  # set the old folder aside (another process may have done it already)
                old = Path(tempfile.mkdtemp(prefix=".damaged-", dir=root))
                try:
                    os.replace(target, old / "kb")
                except FileNotFoundError:
                    pass
            os.replace(tmp, target)
        except OSError as e:
            if not os.path.lexists(target) or cache_problem(target) is not None:  # not another process's good copy
                raise InputError(f"cannot write the generated KB cache: {e.strerror}", target) from None
    finally:
        for folder in (tmp, old):
            if folder is not None and folder.exists():
                shutil.rmtree(folder, ignore_errors=True)
    if problem is not None:
        print(
            one_line(f"dukb: note: the cached built-in KB {target} was damaged ({problem}); rebuilt"),
            file=sys.stderr,
            flush=True,
        )
    return target


def default_generated_kb(cache_dir: str | Path | None = None) -> KB:
    """Load the built-in default generated KB (see :func:`default_generated_kb_dir`).

    Returns:
        The validated :class:`KB` (100 people, seed 0).

    Example:
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     kb = default_generated_kb(tmp)
        >>> len(kb.people), len(kb.relationships), len(kb.biographies)
        (100, 431, 300)
        >>> kb.fingerprint() == generate()[0].fingerprint()
        True
    """

    return load_kb(default_generated_kb_dir(cache_dir))


__all__ = [
    "CACHE_FILES",
    "CACHE_MANIFEST",
    "DEFAULT_PEOPLE",
    "DEFAULT_SEED",
    "EDU_RELAT_OBSERVED",
    "FamilyTruth",
    "GENERATOR_VERSION",
    "GeneratorConfig",
    "MAX_GENERATIONS",
    "MAX_PEOPLE",
    "birthplace_value",
    "cache_problem",
    "cache_root",
    "default_generated_kb",
    "default_generated_kb_dir",
    "first_names",
    "generate",
    "job_decade",
    "jobs_by_decade",
    "observation_probabilities",
    "surnames",
    "us_states",
    "write_truth",
]
