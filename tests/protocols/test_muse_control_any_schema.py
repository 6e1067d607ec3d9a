"""`dukb muse` and `dukb control` on a KB with its own schema (issue 43: "a user's schema, rules and facts with
relations that are not family relations run through ... every protocol"): end to end with the tiny model on the
small geography KB (tests/small_geo_kb.py), without --rules (the KB's own rules.lp), the smallest settings."""

from __future__ import annotations

import json

import pytest
from small_geo_kb import write_small_geo_kb

from dukb.cli.main import main
from dukb.kb import load_kb


@pytest.fixture(scope="module")
def geo(tmp_path_factory):
    return write_small_geo_kb(tmp_path_factory.mktemp("geo") / "kb")


def _rows(run):
    return [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_muse_on_a_geography_schema(geo, tmp_path):
    """MUSE's models (target, retrain, unlearned) on the schema KB; its rules are the KB's own; the forget facts are
    KB facts of its non-family relations."""
    run = tmp_path / "muse"
    args = ["muse", "--kb", str(geo), "--methods", "ga", "--curve-methods", "ga", "--scale-sizes", "1"]
    args += ["--grid", "ga=2", "--holdout", "0.2", "--bootstrap", "50", "--device", "cpu", "-o", str(run)]
    assert main(args) == 0
    config = json.loads((run / "config.json").read_text())
    assert config["rules"] == str(geo / "rules.lp")
    rows = _rows(run)
    assert {"target", "retrain", "unlearned"} <= {r["model_kind"] for r in rows}
    kb = load_kb(geo)
    relations = {f.relation for f in kb.relationships}
    unlearned = [r for r in rows if r["model_kind"] == "unlearned"]
    forget = {f for r in unlearned for f in r["forget_fact_ids"]["relationships"]}
    assert forget and {kb.relationship(int(f)).relation for f in forget} <= relations
    assert all(0 <= r["knowmem_forget"] <= 1 and r["verbmem_forget"] >= 0 for r in unlearned)
    assert (run / "report.md").exists()


@pytest.mark.slow
def test_control_on_a_geography_schema(geo, tmp_path):
    """Unlearning with Control's rows (the original model, the uncontrolled run and each control) on the schema KB,
    with PS-exact on forget and retain and the Success-DU of every model; its rules are the KB's own."""
    run = tmp_path / "control"
    args = ["control", "--kb", str(geo), "--methods", "ga_gdr", "--ratios", "0.1", "--steps", "2", "--coarse", "1"]
    args += ["--fine", "1", "--retain-eval", "6", "--device", "cpu", "-o", str(run)]
    assert main(args) == 0
    assert json.loads((run / "config.json").read_text())["rules"] == str(geo / "rules.lp")
    rows = _rows(run)
    assert {"original", "none"} <= {r["control"] for r in rows}
    kb = load_kb(geo)
    for r in rows:
        assert 0 <= r["ps_exact_forget"] <= 1 and 0 <= r["ps_exact_retain"] <= 1
        assert r["success_du"] in (0, 1) and set(r["forgotten_relationships"]) <= {f.fact_id for f in kb.relationships}
    assert (run / "report.md").exists()
