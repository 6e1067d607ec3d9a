"""Issue 43 leftovers: every command's ``--rules`` defaults to a KB's own ``rules.lp`` (one resolution,
:func:`dukb.solver.rules.default_rules`), and ``dukb evaluate`` draws its targets among the facts derivable from the
other facts, so that no drawn target's only minimal deep unlearning set is the target itself. Family KBs keep their
rules ("family") and their draws (the ids recorded below)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import DEVICE, EDU_RELAT_DIR
from dukb import InputError
from dukb.cli.main import app
from dukb.kb import load_kb
from dukb.kb.generate import default_generated_kb_dir
from dukb.neural.known import rederivable
from dukb.neural.plan import choose_targets
from dukb.neural.protocols.control.config import ControlConfig
from dukb.neural.protocols.evaluate.config import EvaluateConfig
from dukb.neural.protocols.muse.config import MuseConfig
from dukb.neural.restor.config import RestorConfig
from dukb.solver.closure import compute_closure
from dukb.solver.rules import default_rules, load_rules

#: A geography KB with its own schema and rules: every relation with facts has a qa template (evaluate scores every
#: fact on qa); Paris is in France two ways, Lyon's region and a capital fact have no derivation from other facts.
GEO_SCHEMA = """\
schema_version: 1
name: geography
entity_types: [city, region, country, continent]
relations:
  located_in: {subject: city, object: region, functional: true, templates: {qa: "In which region is {s}?"}}
  region_of: {subject: region, object: country, functional: true, templates: {qa: "Which country is {s} in?"}}
  in_country: {subject: city, object: country, functional: true, templates: {qa: "In which country is {s}?"}}
  capital: {subject: country, object: city, functional: true, templates: {qa: "What is the capital of {s}?"}}
  on_continent: {subject: any, object: continent, templates: {qa: "On which continent is {s}?"}}
"""
GEO_ENTITIES = (
    "name,type\nLyon,city\nParis,city\nMadrid,city\nAuvergne,region\nIle-de-France,region\n"
    "Madrid Region,region\nFrance,country\nSpain,country\nEurope,continent\n"
)
GEO_FACTS = (
    "fact_id,subject,relation,object\n0,Lyon,located_in,Auvergne\n1,Auvergne,region_of,France\n"
    "2,Paris,located_in,Ile-de-France\n3,Ile-de-France,region_of,France\n4,France,capital,Paris\n"
    "5,France,on_continent,Europe\n6,Paris,in_country,France\n7,Spain,capital,Madrid\n"
    "8,Madrid,located_in,Madrid Region\n9,Madrid Region,region_of,Spain\n10,Madrid,in_country,Spain\n"
    "11,Spain,on_continent,Europe\n12,Lyon,on_continent,Europe\n"
)
GEO_RULES = """\
holds(A,in_country,C) :- holds(A,located_in,B), holds(B,region_of,C).
holds(B,in_country,A) :- holds(A,capital,B), country(A), city(B).
holds(A,on_continent,K) :- holds(A,in_country,C), holds(C,on_continent,K).
"""

#: The targets `dukb evaluate` draws (seed 0) on the family KBs, before and after the derivable-only draw: every
#: fact of a family KB has a derivation from the others, so the draw is the paper's as it was.
FAMILY_DRAWS = {
    ("default", 11): [116, 28, 84, 174, 267, 354, 195, 208, 135, 278, 23],
    ("edu-relat", 11): [59, 78, 185, 325, 138, 151, 304, 27, 282, 116, 74],
    ("edu-relat", 55): [
        59,
        78,
        185,
        325,
        138,
        151,
        304,
        27,
        282,
        116,
        74,
        265,
        299,
        284,
        346,
        305,
        237,
        11,
        126,
        130,
        51,
        4,
        187,
        155,
        264,
        26,
        65,
        111,
        106,
        77,
        160,
        60,
        374,
        176,
        40,
        42,
        115,
        117,
        269,
        96,
        234,
        283,
        127,
        202,
        318,
        18,
        168,
        199,
        267,
        83,
        28,
        241,
        162,
        274,
        107,
    ],
}


def write_geo_kb(root: Path, rules: bool = True) -> Path:
    """Write the geography KB (schema.yaml, entities.csv, relationships.csv and, with ``rules``, rules.lp)."""
    root.mkdir(parents=True, exist_ok=True)
    files = {"schema.yaml": GEO_SCHEMA, "entities.csv": GEO_ENTITIES, "relationships.csv": GEO_FACTS}
    if rules:
        files["rules.lp"] = GEO_RULES
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def geo(tmp_path):
    return write_geo_kb(tmp_path / "geo")


def test_default_rules_is_the_kbs_own_file_else_family(geo, tmp_path):
    assert default_rules(geo) == str(geo / "rules.lp")
    assert default_rules(str(geo)) == str(geo / "rules.lp")
    assert default_rules(None) == default_rules("demo") == default_rules(default_generated_kb_dir()) == "family"
    assert default_rules(tmp_path / "missing") == "family"  # loading the KB reports it
    bare = write_geo_kb(tmp_path / "bare", rules=False)
    assert default_rules(bare) == "family"
    with pytest.raises(InputError, match="is for family KBs"):
        compute_closure(load_kb(bare), default_rules(bare))


@pytest.mark.parametrize("cls", [EvaluateConfig, ControlConfig, MuseConfig])
def test_every_protocol_resolves_a_kbs_own_rules(cls, geo):
    assert cls(kb=str(geo)).check().rules == str(geo / "rules.lp")
    assert cls(kb=str(geo), rules="other.lp").check().rules == "other.lp"  # given: kept as it is
    assert cls().check().rules == "family"  # the built-in generated KB: as before


def test_family_kbs_keep_their_rules_and_the_preset_its_own():
    assert RestorConfig(kb="demo").check().rules == "family"
    assert EvaluateConfig(kb="demo").check().rules == "family"
    assert EvaluateConfig(compat="eval-du").check().rules == "family_paper_compat"
    assert EvaluateConfig(compat="eval-du", rules="family").check().rules == "family"


def _params(command):
    import typer.main

    cmd = typer.main.get_command(app)
    return {p.name: p for p in cmd.commands[command].params}


@pytest.mark.parametrize(
    "command",
    [
        "evaluate",
        "unlearn",
        "muse",
        "control",
        "rwku",
        "restor",
        "attack",
        "export",
        "closure",
        "mdus",
        "recall",
        "probes",
    ],
)
def test_no_command_defaults_to_the_family_rules(command):
    """Each --rules is not given by default (None: the KB's own, resolved once) and its help says so."""
    p = _params(command)["rules"]
    assert p.default is None
    assert "KB's own rules.lp" in p.help


def test_evaluate_draws_only_derivable_targets_on_a_schema_kb(geo):
    kb = load_kb(geo)
    closure = compute_closure(kb)
    qualify = rederivable(closure, [f.fact_id for f in kb.relationships])
    assert sorted(qualify) == [6, 10, 12]  # Paris and Madrid in their country (two ways), Lyon on its continent
    every = choose_targets(kb, 13, 0)
    assert set(every) - set(qualify)  # without the rule, facts with a trivial set are drawn
    drawn = choose_targets(kb, 3, 0, derivable_in=closure)
    assert sorted(drawn) == [6, 10, 12]
    # relation kinds in turn among the kinds that have such facts: in_country and on_continent alternate
    assert [kb.relationship(t).relation for t in drawn[:2]] == ["in_country", "on_continent"]
    with pytest.raises(InputError, match="between 1 and 3 .*derivable from the other facts.*got 4"):
        choose_targets(kb, 4, 0, derivable_in=closure)


@pytest.mark.parametrize(("name", "n"), list(FAMILY_DRAWS))
def test_family_draws_are_unchanged(name, n):
    if name == "edu-relat" and not (EDU_RELAT_DIR / "relationships.csv").exists():
        pytest.skip("EDU-RELAT is not here")
    kb = load_kb(default_generated_kb_dir() if name == "default" else EDU_RELAT_DIR)
    closure = compute_closure(kb)
    assert choose_targets(kb, n, 0, derivable_in=closure) == choose_targets(kb, n, 0) == FAMILY_DRAWS[(name, n)]


@pytest.mark.slow
def test_evaluate_on_a_schema_kb_uses_its_rules_and_draws_derivable_targets(geo, tmp_path):
    """End to end with the tiny model: no --rules, and config.json records the KB's rules.lp, the identity its
    fingerprint, and the targets drawn have a derivation from other facts."""
    from dukb.cli.main import main

    torch = pytest.importorskip("torch")
    del torch
    run = tmp_path / "run"
    assert (
        main(
            [
                "evaluate",
                "--kb",
                str(geo),
                "--model",
                "tiny",
                "-o",
                str(run),
                "--methods",
                "ga",
                "--grid",
                "ga=2",
                "--n-targets",
                "2",
                "--heldout-forms",
                "cloze",
                "--device",
                DEVICE,
            ]
        )
        == 0
    )
    config = json.loads((run / "config.json").read_text())
    # no relation has a cloze template: every fact is unscorable on it, counted and reported, never skipped
    n_facts = len(load_kb(geo).relationships)
    assert config["unscorable_probes"]["cloze"]["unscorable"] == {"relationships": n_facts, "biographies": 0}
    report = (run / "report.md").read_text()
    assert f"- cloze: {n_facts} relationship facts unscorable (no 'cloze' template: located_in" in report
    assert config["rules"] == str(geo / "rules.lp")
    assert config["identity"]["rules"] == load_rules(geo / "rules.lp", load_kb(geo).schema).fingerprint
    assert config["identity"]["rules"] != load_rules("family").fingerprint
    assert set(config["targets"]) <= {6, 10, 12}


@pytest.mark.slow
def test_unlearn_on_a_schema_kb_lists_the_heldout_forms_its_relations_lack(geo, tmp_path):
    """`dukb unlearn` runs the evaluate pipeline: the held-out forms the KB's relations lack are counted in
    config.json (unscorable_probes), logged, and listed in report.md (which has no Table 1 for one method's recall)."""
    from dukb.cli.main import main

    pytest.importorskip("torch")
    model, run = tmp_path / "model", tmp_path / "run"
    assert main(["finetune", "--kb", str(geo), "--model", "tiny", "-o", str(model), "--device", DEVICE]) == 0
    args = ["unlearn", "--kb", str(geo), "--model", str(model), "--method", "ga", "--grid", "2", "--target-id", "6"]
    assert main([*args, "--heldout-forms", "cloze", "-o", str(run), "--device", DEVICE]) == 0
    config = json.loads((run / "config.json").read_text())
    n_facts = len(load_kb(geo).relationships)  # no relation has a cloze template
    assert config["unscorable_probes"]["cloze"]["unscorable"] == {"relationships": n_facts, "biographies": 0}
    report = (run / "report.md").read_text()
    assert "## Held-out probe forms" in report
    assert f"- cloze: {n_facts} relationship facts unscorable (no 'cloze' template: located_in" in report
