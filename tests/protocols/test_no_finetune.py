"""`dukb evaluate --no-finetune` end to end on the tiny model: a model finetuned on part of a KB is evaluated on the
whole KB as it is; the probe before unlearning defines the facts it knew, the others are unscorable (never
forgotten, out of recall's and accuracy's denominators), targets are known facts with a derivation from other known
facts, the report says how much it knew, and the option is part of the run's identity."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from conftest import DEVICE  # noqa: E402
from dukb.cli.main import main  # noqa: E402
from dukb.kb import KB, load_kb, save_kb  # noqa: E402
from dukb.kb.generate import generate  # noqa: E402
from dukb.neural.known import rederivable  # noqa: E402
from dukb.neural.pipeline import finetune_kb  # noqa: E402
from dukb.neural.spec import ModelSpec  # noqa: E402
from dukb.solver.closure import compute_closure  # noqa: E402
from dukb.solver.mdus import is_deep_unlearning_set  # noqa: E402


@pytest.fixture(scope="module")
def known_setup(tmp_path_factory):
    """A generated KB (16 people, seed 4) and the tiny model finetuned on two thirds of its relationships (and
    every biography): it knows some facts of the whole KB and not others."""
    root = tmp_path_factory.mktemp("known")
    whole = load_kb(save_kb(generate(16, seed=4)[0], root / "kb"))
    part = KB(
        whole.people, [f for i, f in enumerate(whole.relationships) if i % 3], whole.biographies, None, whole.schema
    )
    finetune_kb(
        load_kb(save_kb(part, root / "part")), ModelSpec("tiny", prompt="tiny", device=DEVICE), root / "model", seed=0
    )
    return whole, root / "model"


@pytest.fixture(scope="module")
def small_kb(known_setup):
    return known_setup[0]


@pytest.fixture(scope="module")
def part_model(known_setup):
    return known_setup[1]


def _args(small_kb, model, run, *extra):
    return [
        "evaluate",
        "--kb",
        str(small_kb.source),
        "--model",
        str(model),
        "-o",
        str(run),
        "--methods",
        "ga",
        "--grid",
        "ga=2,8",
        "--n-targets",
        "2",
        "--device",
        DEVICE,
        *extra,
    ]


@pytest.fixture(scope="module")
def run(small_kb, part_model, tmp_path_factory):
    out = tmp_path_factory.mktemp("eval") / "run"
    assert main(_args(small_kb, part_model, out, "--no-finetune")) == 0
    return out


def _rows(run):
    return [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]


def test_known_facts_are_recorded_and_targets_are_among_them(run, small_kb):
    cfg = json.loads((run / "config.json").read_text())
    known = cfg["known_before"]
    rel, un = set(known["fact_ids"]["relationships"]), set(known["unknown_fact_ids"]["relationships"])
    assert rel and un, "the model finetuned on part of the KB knows some facts and not others"
    assert rel | un == {f.fact_id for f in small_kb.relationships} and not rel & un
    assert known["relationships"] == len(rel) and known["n_relationships"] == len(small_kb.relationships)
    assert cfg["identity"]["no_finetune"] is True and "finetune" not in cfg["identity"]["model"]
    assert not (run / "finetuned").exists()
    # targets: known, and derivable from other known facts (their minimal sets are the known part's)
    part = KB(
        small_kb.people,
        [f for f in small_kb.relationships if f.fact_id in rel],
        small_kb.biographies,
        None,
        small_kb.schema,
    )
    closure = compute_closure(part)
    assert set(cfg["targets"]) <= set(rederivable(closure, sorted(rel)))
    sets = json.loads((run / "sets.json").read_text())["targets"]
    for t, entry in sets.items():
        for m in entry["sets"]:
            assert set(m) <= rel
            assert is_deep_unlearning_set(closure, [closure.atom_of_fact(int(t))], m)


def test_unknown_facts_are_never_forgotten_nor_scored(run, small_kb):
    cfg = json.loads((run / "config.json").read_text())
    known = cfg["known_before"]
    rel = set(known["fact_ids"]["relationships"])
    bio = set(known["fact_ids"]["biographies"])
    un_rel = set(known["unknown_fact_ids"]["relationships"])
    rows = _rows(run)
    assert len(rows) == 4
    for r in rows:
        assert not set(r["forgotten_relationships"]) & un_rel
        assert set(r["forgotten_biographies"]) <= bio
        assert r["unscorable"] == {"relationships": len(un_rel), "biographies": len(small_kb.biographies) - len(bio)}
        # accuracy's denominator: the known facts outside the best set, retain data aside (GA has none)
        assert r["n_scored"] == len(rel - set(r["best_set"])) + len(bio)
        scored_rel = rel - set(r["best_set"])
        kept = len(scored_rel - set(r["forgotten_relationships"])) + len(bio - set(r["forgotten_biographies"]))
        assert r["accuracy_all"] == pytest.approx(kept / r["n_scored"])
        assert r["recall"] == pytest.approx(
            len(set(r["best_set"]) & set(r["forgotten_relationships"])) / len(r["best_set"])
        )
        # held-out forms: a fact the model did not know on qa is unscorable there too
        assert not set(r["forgotten_relationships_heldout"]) & un_rel
        assert r["heldout_unscorable"]["relationships"] >= len(un_rel)


def test_report_states_how_much_the_model_knew(run, small_kb):
    cfg = json.loads((run / "config.json").read_text())
    k, n = cfg["known_before"]["relationships"], len(small_kb.relationships)
    text = " ".join((run / "report.md").read_text().split())  # report.md wraps its lines
    assert (
        f"the model knew {k} of {n} relationship facts ({100 * k / n:.1f}%) before unlearning; unknown facts "
        "are unscorable" in text
    )
    facts = (run / "facts.csv").read_text()
    assert facts.count("unknown_before,relationship") == n - k


def test_a_resume_without_no_finetune_is_refused(run, small_kb, part_model, capsys):
    before = (run / "results.jsonl").read_text()
    assert main(_args(small_kb, part_model, run, "--resume")) == 2
    err = capsys.readouterr().err
    assert "no_finetune" in err and err.count("\n") <= 3
    assert main(_args(small_kb, part_model, run, "--no-finetune", "--resume")) == 0  # the same run: nothing to do
    assert (run / "results.jsonl").read_text() == before


def test_a_target_the_model_did_not_know_is_refused(run, small_kb, part_model, tmp_path, capsys):
    cfg = json.loads((run / "config.json").read_text())
    unknown = cfg["known_before"]["unknown_fact_ids"]["relationships"][0]
    tf = tmp_path / "targets.txt"
    tf.write_text(f"{unknown}\n")
    assert main(_args(small_kb, part_model, tmp_path / "r", "--no-finetune", "--targets-file", str(tf))) == 2
    err = capsys.readouterr().err
    errors = [x for x in err.splitlines() if x.startswith("dukb: error:")]
    assert len(errors) == 1 and "Traceback" not in err
    assert "did not know before unlearning" in errors[0] and f"first: {unknown}" in errors[0]
