"""The fast path of ``load_kb`` (pyarrow's CSV reader and vectorised checks, issue 42 item 8) against the strict reader.

The fast path either returns exactly the KB the strict reader returns, or declines (None), after which the strict
reader reads the directory and reports every problem at its FILE:LINE. Checked:

- every malformed KB of tests/kb/test_kb_validation.py: the fast path declines, and ``load_kb`` (fast path on)
  raises the strict reader's error, same file, line and message;
- its valid variants (CRLF, BOM, blank lines, reordered columns, spaces): equal KBs (the fast path may decline);
- a generated KB and the demo KB: the fast path takes them, and the KBs are equal (facts, people, name index);
- hypothesis: random valid KBs with random edits (a quote, comma, control character, Unicode space, byte order
  mark, line break, digit, sign, a deleted character or a repeated line), on the fast path and the strict reader:
  both give equal KBs, or both give the same error (the fast path declines).
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dukb.kb import fastread
from dukb.kb.csvfile import MAX_FIELD_CHARS
from dukb.kb.fastread import load_kb_fast
from dukb.kb.generate import generate
from dukb.kb.io import KBError, _load_kb, load_kb, resolve_kb_path, save_kb
from dukb.kb.schema import RELATIONS, gender_violation
from tests.kb.test_kb_validation import BASE, CASES, write_kb


@pytest.fixture
def fast_always(monkeypatch):
    """load_kb tries the fast path on KBs of any size."""
    monkeypatch.setattr(fastread, "FAST_MIN_BYTES", 0)


def strict(root: Path):
    """The strict reader's KB, or its error as (str, [(path, line, message)])."""
    try:
        return _load_kb(root)
    except KBError as e:
        return str(e), [(p.path, p.line, p.message) for p in e.problems]


def loaded(root: Path):
    """load_kb's KB, or its error, as :func:`strict`."""
    try:
        return load_kb(root)
    except KBError as e:
        return str(e), [(p.path, p.line, p.message) for p in e.problems]


def assert_same_kb(a, b) -> None:
    assert a.people == b.people and list(a.people) == list(b.people)
    assert a.relationships == b.relationships and a.biographies == b.biographies and a.source == b.source
    assert [list(x) for x in a.name_index()] == [list(x) for x in b.name_index()]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_malformed_kb_declined_with_strict_error(tmp_path, fast_always, case):
    _id, changes, fname, line, fragment = case
    root = write_kb(tmp_path / "kb", {**BASE, **changes})
    assert load_kb_fast(root, min_bytes=0) is None
    with pytest.raises(KBError) as info:
        load_kb(root)
    first = info.value.problems[0]
    assert (Path(first.path), first.line) == (root / fname, line) and fragment in first.message
    assert loaded(root) == strict(root)


@pytest.mark.parametrize("text", ["\r\n", "\ufeff", "\n\n", " , "])
def test_valid_variants_equal(tmp_path, fast_always, text):
    files = dict(BASE)
    if text == "\ufeff":
        files["people.csv"] = text + files["people.csv"]
    elif text == "\n\n":
        files["relationships.csv"] += text
    else:
        files = {k: v.replace("\n", text) if text == "\r\n" else v.replace(",", text) for k, v in files.items()}
    root = write_kb(tmp_path / "kb", files)
    fast = load_kb_fast(root, min_bytes=0)
    ref = _load_kb(root)
    if fast is not None:
        assert_same_kb(fast, ref)
    assert_same_kb(load_kb(root), ref)
    assert (fast is None) == (text == " , ")  # stripped spaces: declined; the rest is plain


def test_generated_and_demo_kbs_take_the_fast_path(tmp_path):
    root = save_kb(generate(300, seed=3)[0], tmp_path / "gen")
    for where in (root, resolve_kb_path("demo")):
        fast = load_kb_fast(where, min_bytes=0)
        assert fast is not None, where
        assert_same_kb(fast, _load_kb(where))
    assert load_kb_fast(root) is None  # under FAST_MIN_BYTES: the strict reader alone


def test_over_long_field_declined(tmp_path, fast_always):
    long = "A" * (MAX_FIELD_CHARS + 1)
    root = write_kb(tmp_path / "kb", {**BASE, "biographies.csv": BASE["biographies.csv"] + f"3,Carl Berg,job,{long}\n"})
    assert load_kb_fast(root, min_bytes=0) is None
    assert loaded(root) == strict(root) and "longer than" in strict(root)[0]


# -- hypothesis: random valid KBs, randomly edited -------------------------------------------------------------------
FIRST = ["Ann", "Bo", "Zoë", "Åsa", "Li", "José", "Ivo", "Mia", "Émile", "Kai"]
LAST = ["Lee", "Berg", "Núñez", "Ødegård", "Kim", "Hale"]
EDITS = [
    '"',
    ",",
    " ",
    "\t",
    "\x00",
    "\x07",
    "\x7f",
    "\x85",
    "\u00a0",
    "\u2028",
    "\u3000",
    "\ufeff",
    "\r",
    "\n",
    "\r\n",
    "0",
    "7",
    "-",
    "+",
    "x",
    "é",
    "\U0001f600",
    "",
    "male",
    "father",
]


def _valid_kb_files(rng: random.Random, n_people: int, n_facts: int) -> dict[str, str]:
    names = rng.sample([f"{f} {la}" for f in FIRST for la in LAST], n_people)
    gender = {n: rng.choice(["male", "female", "Male", "FEMALE"]) for n in names}
    lines = [["name", "gender", "birthyear", "birthplace", "job", "generation"]]
    lines += [
        [
            n,
            gender[n],
            rng.choice(["", "1950", "-3", "0042"]),
            rng.choice(["", "Ohio"]),
            rng.choice(["", "Cook"]),
            rng.choice(["", "1"]),
        ]
        for n in names
    ]
    rel, seen = [["fact_id", "subject", "relation", "object"]], set()
    fid = rng.sample(range(10 * n_facts + 10), n_facts)
    for k in range(n_facts):
        s, o = rng.sample(names, 2)
        r = rng.choice(RELATIONS)
        if gender_violation(r, gender[s].lower(), gender[o].lower()) is None and (s, r, o) not in seen:
            seen.add((s, r, o))
            rel.append([str(fid[k]), s, r, o])
    bio = [["fact_id", "subject", "attribute", "value"]]
    for k in range(n_facts):
        a = rng.choice(["birthyear", "birthplace", "job"])
        bio.append(
            [
                str(k),
                rng.choice(names),
                a,
                str(rng.randint(1900, 2000)) if a == "birthyear" else rng.choice(["Ohio", "Cook", "Iowa state"]),
            ]
        )
    bio = bio[:1] + list({tuple(b[1:]): b for b in bio[1:]}.values())  # no duplicate (subject, attribute, value)
    return {
        name: _csv(rows) for name, rows in (("people.csv", lines), ("relationships.csv", rel), ("biographies.csv", bio))
    }


def _csv(rows) -> str:
    import io

    out = io.StringIO()
    csv.writer(out, lineterminator=random.Random(len(rows)).choice(["\n", "\r\n"])).writerows(rows)
    return out.getvalue()


def _edit(rng: random.Random, text: str) -> str:
    kind = rng.randrange(3)
    at = rng.randrange(len(text) + 1)
    if kind == 0:
        return text[:at] + rng.choice(EDITS) + text[at:]
    if kind == 1:
        return text[:at] + text[at + 1 :]
    lines = text.splitlines(keepends=True)
    k = rng.randrange(len(lines))
    return "".join(lines[: k + 1] + [lines[k]] + lines[k + 1 :])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 2**32 - 1),
    n_people=st.integers(2, 12),
    n_facts=st.integers(0, 20),
    n_edits=st.integers(0, 3),
    no_bio=st.booleans(),
)
def test_fast_path_equals_strict_reader(tmp_path_factory, seed, n_people, n_facts, n_edits, no_bio):
    rng = random.Random(seed)
    files = _valid_kb_files(rng, n_people, n_facts)
    if no_bio:
        del files["biographies.csv"]
    for _ in range(n_edits):
        name = rng.choice(sorted(files))
        files[name] = _edit(rng, files[name])
    root = write_kb(tmp_path_factory.mktemp("kb"), files)
    ref = strict(root)
    fast = load_kb_fast(root, min_bytes=0)
    if isinstance(ref, tuple):
        assert fast is None, ref  # invalid: the fast path declines ...
    else:
        if n_edits == 0:
            assert fast is not None  # a plain valid KB is taken
        if fast is not None:
            assert_same_kb(fast, ref)
    old, fastread.FAST_MIN_BYTES = fastread.FAST_MIN_BYTES, 0
    try:
        got = loaded(root)  # ... and load_kb reports the strict reader's problems, FILE:LINE and all
    finally:
        fastread.FAST_MIN_BYTES = old
    if isinstance(ref, tuple):
        assert got == ref
    else:
        assert_same_kb(got, ref)


def test_closure_csv_arrow_writer_is_csv_writers_bytes(tmp_path):
    """The closure's CSV through pyarrow (a file with a binary buffer) equals csv.writer's (a StringIO), quoting of
    names with a comma or a quote included, on a KB from the fast path (fact lists never built) and the strict one."""
    import io

    from dukb.solver.closure import compute_closure

    files = {k: v.replace("Carl Berg", '"Berg, ""Carl"""') for k, v in BASE.items()}
    quoted = write_kb(tmp_path / "quoted", files)
    plain = save_kb(generate(300, seed=3)[0], tmp_path / "gen")
    for root, fast in ((quoted, False), (plain, True)):
        kb = load_kb_fast(root, min_bytes=0) if fast else load_kb(root)
        assert kb is not None
        c = compute_closure(kb)
        text = io.StringIO()
        c.write_csv(text)  # no binary buffer: the csv module
        raw = io.BytesIO()
        wrapper = io.TextIOWrapper(raw, encoding="utf-8", newline="")
        c.write_csv(wrapper)
        wrapper.flush()
        assert raw.getvalue().decode() == text.getvalue()
        assert ('"Berg, ""Carl"""' in text.getvalue()) == (not fast)
        assert (kb._relationships is None) == fast  # the closure never built the fast KB's fact list
