"""`dukb rwku` on a KB with its own schema (issue 43, item 6): the description corpus (RWKU's forget corpus, Jin et
al. 2024 Sec. 3.1) comes from the relations' ``description`` templates, else their ``fact`` template; a probe kind a
relation lacks is unscorable with its count (config.json, report.md, each row), never silently skipped; a relation
without the templates rwku needs is refused in one line. End to end with the tiny model on the small geography KB
(tests/small_geo_kb.py)."""

from __future__ import annotations

import json

import pytest
import schema_logic as sl
from input_checks import assert_one_line_error, run_main
from small_geo_kb import write_small_geo_kb

from dukb import InputError
from dukb.kb import load_kb
from dukb.neural.data import TEXT_KIND, kb_descriptions


@pytest.fixture(scope="module")
def geo(tmp_path_factory):
    return write_small_geo_kb(tmp_path_factory.mktemp("geo") / "kb")


def test_description_corpus_from_the_schema_templates(geo):
    kb = load_kb(geo)
    items = kb_descriptions(kb)
    by_fact: dict = {}
    for it in items:
        assert it.kind == TEXT_KIND and it.question == ""
        by_fact.setdefault((it.fact_kind, it.fact_id), []).append(it.answer)
    # capital has two description templates; every other relation (and the attribute) its fact template
    assert by_fact[("relationship", 0)] == [
        "Paris is the capital city of France.",
        "The government of France sits in Paris.",
    ]
    assert by_fact[("relationship", 2)] == ["The currency of France is the Euro."]
    assert by_fact[("biography", 0)] == ["The population of France is 68 million."]
    assert len(by_fact) == len(kb.relationships) + len(kb.biographies)  # every fact is described
    n_capital = sum(f.relation == "capital" for f in kb.relationships)
    assert len(items) == len(kb.relationships) + n_capital + len(kb.biographies)
    assert [it.answer for it in kb_descriptions(kb, [("relationship", 2)])] == by_fact[("relationship", 2)]


def test_description_templates_alone_cover_the_tiny_vocabulary(geo, tmp_path):
    """A schema whose relations have description templates and no fact template: the tiny model's vocabulary texts
    hold the description sentences (no statement is needed)."""
    import shutil

    from dukb.neural.data import vocabulary_texts
    from dukb.neural.spec import PROMPT_PRESETS

    d = tmp_path / "kb"
    shutil.copytree(geo, d)
    text = (d / "schema.yaml").read_text()
    text = text.replace('      fact: "The capital of {s} is {o}."\n', "")
    (d / "schema.yaml").write_text(text)
    kb = load_kb(d)
    texts = vocabulary_texts(kb, PROMPT_PRESETS["tiny"], statements=True)
    assert "The government of France sits in Paris." in texts and "The capital of France is Paris." not in texts
    assert "The currency of France is the Euro." in texts


def test_a_relation_without_description_or_fact_template_is_refused(tmp_path):
    kb = load_kb(sl.write_tiny_kb(tmp_path / "tiny"))  # sibling, located_in: no template at all
    with pytest.raises(
        InputError,
        match=r"schema\.yaml:\d+: relation 'sibling' has no 'description' or 'fact' "
        r"template \(nor has 'located_in'\): rwku's description corpus needs one",
    ):
        kb_descriptions(kb)


@pytest.mark.parametrize(
    "command,needs",
    [
        ("rwku", "rwku (finetunes on and scores every fact's qa form)"),
        ("restor", "restor (asks every fact for its object)"),
    ],
)
def test_a_relation_without_a_qa_template_is_refused_in_one_line(command, needs, capsys, tmp_path):
    """rwku and restor ask every fact in its qa form: the tiny KB's sibling, lives_in and located_in have none."""
    tiny = sl.write_tiny_kb(tmp_path / "tiny")
    opts = ("--rules", tiny / "rules.lp", "--model", "tiny", "--device", "cpu")
    rc, _, err = run_main(capsys, command, "--kb", tiny, *opts, "-o", tmp_path / command)
    missing = "schema.yaml:12: relation 'sibling' has no 'qa' template (nor has 'lives_in', 'located_in'): "
    assert_one_line_error(rc, err, missing + needs + " needs it")
    assert not (tmp_path / command).exists()


@pytest.fixture(scope="module")
def geo_run(geo, tmp_path_factory):
    from dukb.cli.main import main

    out = tmp_path_factory.mktemp("rwku-geo") / "run"
    targets = out.parent / "targets.txt"
    targets.write_text("3\n")
    args = [
        "rwku",
        "--kb",
        str(geo),
        "--rules",
        str(geo / "rules.lp"),
        "--targets-file",
        str(targets),
        "--methods",
        "ga",
        "--grid",
        "ga=4",
        "--batch-sizes",
        "",
        "--device",
        "cpu",
        "-o",
        str(out),
    ]
    assert main(args) == 0
    return out


@pytest.mark.slow
def test_rwku_end_to_end_on_a_geography_schema(geo, geo_run):
    """Target 3 (Paris is a city in France, derivable from France's capital): forget corpus = its description
    sentence; the kinds its relation lacks (reverse, synonym, cross-lingual) are counted unscorable in the rows, and every
    kind some fact lacks is in config.json and report.md."""
    rows = [json.loads(x) for x in (geo_run / "results.jsonl").read_text().splitlines()]
    assert [r["model_kind"] for r in rows] == ["before", "unlearned"]
    for r in rows:
        assert r["targets"] == [3] and r["forget_set"] == [3]
        # no template of these kinds; context_hint: every other fact about Paris or France names the answer France
        assert r["unscorable_forget_by_kind"] == {
            "reverse": 1,
            "synonym": 1,
            "context_hint": 1,
            "cross_lingual_fr": 1,
            "cross_lingual_de": 1,
            "cross_lingual_es": 1,
        }
        assert "reverse" not in r["rouge_forget_aa_by_kind"] and "prefix_injection" in r["rouge_forget_aa_by_kind"]
        assert 0 <= r["rouge_forget_qa"] <= 1 and 0 <= r["recall"] <= 1
    after = rows[1]
    assert after["trained_forms"]["forget"] == ["description"]
    assert after["trained_fact_ids"]["forget"] == {"relationships": [3], "biographies": []}
    assert after["n_trained_texts"]["forget"] == 1  # "Paris is a city in France."
    config = json.loads((geo_run / "config.json").read_text())
    un = config["unscorable_probes"]
    assert un["cloze"]["unscorable"] == {"relationships": 4, "biographies": 8}  # in_region and population: no cloze
    assert un["cloze"]["reasons"] == {"no 'cloze' template": {"in_region": 4, "population": 8}}
    assert un["qa"]["unscorable"] == {"relationships": 0, "biographies": 0}
    report = (geo_run / "report.md").read_text()
    assert "**Unscorable probes.**" in report
    assert (
        "- cloze: 4 relationship facts and 8 biography facts unscorable (no 'cloze' template: in_region 4, "
        "population 8); 56 probes" in report
    )


@pytest.mark.slow
def test_rwku_description_corpus_is_what_the_model_was_finetuned_on(geo, geo_run):
    """The finetuned model's training items (finetune.json's n_items) are every qa item plus every description."""
    from dukb.neural.data import kb_qa

    kb = load_kb(geo)
    ft = json.loads((geo_run / "finetuned" / "finetune.json").read_text())
    assert ft["n_items"] == len(kb_qa(kb)) + len(kb_descriptions(kb)) == 68 + 76
