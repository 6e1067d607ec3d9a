"""`dukb validate` checks a KB's aliases.csv (issue 43): header ``name,alias``, each name an entity or a biography
value, no empty alias, no alias that is another entity's name (of the same type), no duplicate; each problem ``FILE:LINE: problem``
(exit 2), all of them listed, and the judge's loader (:func:`dukb.kb.aliases.load_aliases`) refuses the first."""

from __future__ import annotations

import shutil

import pytest
from input_checks import error_lines, run_main
from schema_logic import write_tiny_kb

from dukb import InputError
from dukb.kb import load_kb
from dukb.kb.aliases import alias_problems, load_aliases


@pytest.fixture
def tiny(tmp_path):
    return write_tiny_kb(tmp_path / "tiny")


@pytest.fixture
def family(tmp_path):
    root = tmp_path / "family"
    shutil.copytree(load_kb("demo").source, root)
    return root


def test_good_aliases_validate(capsys, tiny, family):
    (tiny / "aliases.csv").write_text("name,alias\nLyon,Lyons\nFrance,République française\nLyon,Lugdunum\n")
    rc, out, err = run_main(capsys, "validate", "--kb", tiny)
    assert rc == 0 and err == "" and out.startswith("ok: 8 entities")
    assert load_aliases(load_kb(tiny)) == {"Lyon": ("Lyons", "Lugdunum"), "France": ("République française",)}
    # a biography value of a family KB may have aliases too (the judge compares answers with it)
    (family / "aliases.csv").write_text("name,alias\nCarpenter,joiner\nGeorge Hale,Georgie\n")
    assert run_main(capsys, "validate", "--kb", family)[0] == 0


def test_an_alias_may_name_an_entity_of_another_type(capsys, tiny, family):
    """A schema's entity types are kinds: an alias that is the name of an entity of another type is accepted (a city
    answering to its country's name, as the geography importer writes for "Luxembourg (city)"); one of the same
    type is refused; in the family schema (its types are genders) every person is one kind."""
    (tiny / "aliases.csv").write_text("name,alias\nLyon,France\n")
    assert run_main(capsys, "validate", "--kb", tiny)[0] == 0
    assert load_aliases(load_kb(tiny)) == {"Lyon": ("France",)}
    (tiny / "aliases.csv").write_text("name,alias\nLyon,Spain\nParis,Lyon\n")
    rc, _, err = run_main(capsys, "validate", "--kb", tiny)
    assert rc == 2 and "aliases.csv:3: alias 'Lyon' of 'Paris' is the name of another entity" in err
    kb = load_kb("demo")
    man = next(n for n in kb.people if kb.gender(n) == "male")
    woman = next(n for n in kb.people if kb.gender(n) == "female")
    (family / "aliases.csv").write_text(f"name,alias\n{man},{woman}\n")
    assert [p.message for p in alias_problems(load_kb(family))] == [
        f"alias {woman!r} of {man!r} is the name of another entity"
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "name,alias\nLyon,Lyons\nAtlantis,Atlantida\n",
            ["aliases.csv:3: alias 'Atlantida' of unknown entity 'Atlantis'"],
        ),
        ("name,alias\nLyon,\n", ["aliases.csv:2: empty alias of 'Lyon'"]),
        ("name,alias\n,Lyons\n", ["aliases.csv:2: empty name"]),
        ("name,alias\nLyon,Paris\n", ["aliases.csv:2: alias 'Paris' of 'Lyon' is the name of another entity"]),
        (
            "name,alias\nLyon,paris\n",
            ["aliases.csv:2: alias 'paris' of 'Lyon' is the name of another entity ('Paris')"],
        ),
        (
            "name,alias\nLyon,Lyons\nParis,Lutetia\nLyon,Lyons\n",
            ["aliases.csv:4: duplicate alias 'Lyons' of 'Lyon' (first at line 2)"],
        ),
        (
            "name,alias\nLyon,Lyons\nParis,lyons\n",
            ["aliases.csv:3: alias 'lyons' of 'Paris' is already an alias of 'Lyon' (line 2)"],
        ),
        ("name\nLyon\n", ["aliases.csv:1: missing column alias"]),
        ("name,alias,note\nLyon,Lyons,x\n", ["aliases.csv:1: unknown column note"]),
        ("name,alias\nLyon,Lyons,extra\n", ["aliases.csv:2: expected 2 fields, found 3"]),
    ],
)
def test_each_problem_at_its_line(capsys, tiny, text, expected):
    (tiny / "aliases.csv").write_text(text)
    rc, _, err = run_main(capsys, "validate", "--kb", tiny)
    lines = error_lines(rc, err)
    assert len(lines) == len(expected)
    for line, want in zip(lines, expected):
        assert (
            line.startswith("dukb: error: ") and str(tiny / want.split(":", 1)[0]) + ":" + want.split(":", 1)[1] in line
        ), (line, want)
    with pytest.raises(InputError) as e:  # the judge and the probes refuse the same file at the same line
        load_aliases(load_kb(tiny))
    assert f"{e.value.path}:{e.value.line}: {e.value.message}" in lines[0]


def test_every_problem_is_listed_with_a_count(capsys, tiny):
    (tiny / "aliases.csv").write_text("name,alias\nLyon,\nAtlantis,A\nLyon,Paris\nLyon,Lyons\nLyon,Lyons\n")
    rc, _, err = run_main(capsys, "validate", "--kb", tiny)
    lines = err.strip().splitlines()
    assert rc == 2 and [ln.split("aliases.csv:")[1].split(":")[0] for ln in lines[:4]] == ["2", "3", "4", "6"]
    assert lines[4].endswith("4 problems in " + str(tiny))
    assert [p.line for p in alias_problems(load_kb(tiny))] == [2, 3, 4, 6]


def test_no_file_no_problem_and_kb_problems_come_first(capsys, tiny):
    assert alias_problems(load_kb(tiny)) == []
    (tiny / "aliases.csv").write_text("name,alias\nNowhere,N\n")
    (tiny / "relationships.csv").write_text("fact_id,subject,relation,object\n0,Ann,kid,Zed\n")
    rc, _, err = run_main(capsys, "validate", "--kb", tiny)
    (line,) = error_lines(rc, err)
    assert "relationships.csv:2" in line  # the KB must load before its aliases can be checked
