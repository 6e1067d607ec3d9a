"""Per-method options (``--methods npo:beta=0.05:lr=1e-3``): parsing and refusals, the registry's instances untouched,
the learning rate's precedence, the run identity, and an evaluate run whose rows use them."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from conftest import DEVICE
from dukb import InputError
from dukb.neural.methods import METHODS, resolve
from dukb.neural.methods.base import lr_for
from dukb.neural.protocols.evaluate.identity import method_identity
from dukb.neural.protocols.muse.config import _lr_entry


def test_options_parse_into_a_copy_with_a_normalised_label():
    r = resolve(" NPO:beta=0.05:lr=1e-3 ")
    assert r.label == "npo:beta=0.05:lr=0.001" and r.scope == "target"
    assert r.method.beta == 0.05 and r.method.lr == 0.001
    assert r.method.option_values == {"beta": 0.05, "lr": 0.001}
    assert METHODS["npo"].beta == 0.1 and METHODS["npo"].lr is None and METHODS["npo"].option_values == {}
    assert r.method is not METHODS["npo"] and resolve("npo").method is METHODS["npo"]
    p = resolve("du_npo_gdr:lr=2e-4")  # a preset keeps its scope and grid
    assert (p.label, p.scope, p.method.lr) == ("du_npo_gdr:lr=0.0002", "minimum", 2e-4) and p.grid
    s = resolve("ga_gdr@minimum:lr=5e-4")
    assert (s.label, s.scope, s.method.lr) == ("ga_gdr@minimum:lr=0.0005", "minimum", 5e-4)
    assert resolve("simnpo:gamma=0").method.gamma == 0.0  # gamma may be 0, beta may not
    import math

    st = resolve("cl_du_noneighbour_strict:min_prob=0.05").method  # the strict loop's threshold, as a probability
    assert st.min_logprob == pytest.approx(math.log(0.05)) and METHODS["cl_du_strict"].min_prob == pytest.approx(0.1)
    from dukb.neural.methods.closed_loop import STRICT_LOGPROB

    assert METHODS["cl_du_strict"].min_logprob == STRICT_LOGPROB  # the registry's threshold exactly as before
    from dukb.neural.methods.closed_loop import ClosedLoopDeepUnlearning

    assert ClosedLoopDeepUnlearning("strict", min_logprob=-0.01).min_logprob == -0.01  # log(exp(x)) != x here
    with pytest.raises(InputError, match="cl_du has no option 'min_prob'"):
        resolve("cl_du:min_prob=5")
    # one label per method and values: options sorted, values exact
    assert resolve("npo:lr=1e-3:beta=0.05").label == r.label
    assert resolve("ga:lr=0.00012345678").label != resolve("ga:lr=0.00012345679").label


def test_a_preset_keeps_its_schedule_and_grids_reach_an_options_label():
    from dukb.cli.evaluate_cmd import parse_grids
    from dukb.neural.methods import check_unique, method_grids, schedule_for

    label = resolve("du_ga:lr=1e-4").label
    assert schedule_for(label.partition(":")[0], "reference") == schedule_for("du_ga", "reference") == "separate"
    grids = parse_grids(["ga:lr=5e-4=2,4", "ga=1,8"])
    assert grids == {"ga:lr=0.0005": [2, 4], "ga": [1, 8]}
    res = [resolve("ga"), resolve("ga:lr=5e-4"), resolve("npo:beta=0.05")]
    assert method_grids(res, grids) == {"ga": [1, 8], "ga:lr=0.0005": [2, 4], "npo:beta=0.05": [1, 2, 4, 8, 16]}
    with pytest.raises(InputError, match="listed twice in --methods: npo:beta=0.05:lr=0.001"):
        check_unique(resolve(m).label for m in ("npo:beta=0.05:lr=1e-3", "npo:lr=1e-3:beta=0.05"))


@pytest.mark.parametrize(
    "spec, message",
    [
        ("ga:beta=1", "ga has no option 'beta' (its options: lr)"),
        ("icu:lr=1e-3", "icu has no option 'lr' (its options: none)"),
        ("npo:beta=0", "beta must be a finite number > 0"),
        ("npo:beta", "is not KEY=VALUE"),
        ("npo:=1", "is not KEY=VALUE"),
        ("npo:beta=x", "'x' is not a non-negative decimal number"),
        ("npo:beta=-1", "is not a non-negative decimal number"),
        ("npo:beta=nan", "is not a non-negative decimal number"),
        ("npo:lr=1e-3:lr=2e-3", "given twice"),
        ("cl_du:min_prob=0.1", "cl_du has no option 'min_prob' (its options: lr, reg_weight, retain_batch)"),
        ("cl_du_strict:min_prob=1", "min_prob must be below 1"),
        ("du_cl:retain_batch=2.5", "retain_batch must be a whole number"),
        ("du_cl_strict:min_prob=0", "min_prob must be a finite number > 0"),
    ],
)
def test_bad_options_are_refused_by_name(spec, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        resolve(spec)


def test_the_method_s_own_rate_wins_over_the_run_s_and_the_family_s():
    table = {"tiny": 1e-3, "generic": 2e-5}
    ga, ga_own = METHODS["ga"], resolve("ga:lr=5e-4").method
    assert lr_for(SimpleNamespace(lr=None, family="tiny"), table, ga) == 1e-3
    assert lr_for(SimpleNamespace(lr=3e-4, family="tiny"), table, ga) == 3e-4
    assert lr_for(SimpleNamespace(lr=3e-4, family="tiny"), table, ga_own) == 5e-4
    assert lr_for(SimpleNamespace(lr=None, family="llama"), table, ga) == 2e-5


def test_identities_record_options_and_stay_equal_without_them():
    plain = method_identity(METHODS["npo"], "target", [1, 2], "reference", "tiny", None)
    assert "options" not in plain
    own = method_identity(resolve("npo:beta=0.05").method, "target", [1, 2], "reference", "tiny", None)
    assert own == {**plain, "options": {"beta": 0.05}}
    assert _lr_entry(METHODS["ga"], "tiny", None) == {}
    assert _lr_entry(resolve("ga:lr=5e-4").method, "tiny", None) == {"options": {"lr": 5e-4}}


@pytest.mark.slow
def test_evaluate_runs_each_method_entry_with_its_own_options(tmp_path):
    from dukb.cli.main import main

    out = tmp_path / "run"
    assert (
        main(
            [
                "evaluate",
                "--kb",
                "demo",
                "--n-targets",
                "1",
                "--methods",
                "ga,ga:lr=5e-4,npo:beta=0.05",
                "--grid",
                "ga=2",
                "--grid",
                "npo=2",
                "--metrics",
                "recall",
                "--device",
                DEVICE,
                "-o",
                str(out),
            ]
        )
        == 0
    )
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    by = {r["method"]: r for r in rows}
    assert set(by) == {"ga", "ga:lr=0.0005", "npo:beta=0.05"}
    assert by["ga"]["setting"]["lr"] == 1e-3 and "method_options" not in by["ga"]
    assert by["ga:lr=0.0005"]["setting"]["lr"] == 5e-4 and by["ga:lr=0.0005"]["method_options"] == {"lr": 5e-4}
    assert by["npo:beta=0.05"]["setting"]["beta"] == 0.05
    ident = json.loads((out / "config.json").read_text())["identity"]["methods"]
    assert ident["ga:lr=0.0005"]["options"] == {"lr": 5e-4} and "options" not in ident["ga"]
    # the same entry with another value is another method of the run, never mixed into this one's rows
    assert (
        main(
            [
                "evaluate",
                "--kb",
                "demo",
                "--n-targets",
                "1",
                "--methods",
                "ga:lr=2e-4",
                "--grid",
                "ga=2",
                "--metrics",
                "recall",
                "--device",
                DEVICE,
                "-o",
                str(out),
                "--resume",
            ]
        )
        == 0
    )
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert {r["method"]: r["setting"]["lr"] for r in rows}["ga:lr=0.0002"] == 2e-4 and len(rows) == 4


@pytest.mark.slow
def test_dukb_unlearn_runs_the_method_with_its_options(tmp_path):
    from dukb.cli.main import main

    model = tmp_path / "ft"
    assert main(["finetune", "--kb", "demo", "--model", "tiny", "-o", str(model), "--device", DEVICE]) == 0
    out = tmp_path / "un"
    assert (
        main(
            [
                "unlearn",
                "--kb",
                "demo",
                "--model",
                str(model),
                "--method",
                "npo:beta=0.05:lr=2e-4",
                "--target-id",
                "1",
                "--grid",
                "2",
                "-o",
                str(out),
                "--device",
                DEVICE,
            ]
        )
        == 0
    )
    (row,) = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert row["method"] == "npo:beta=0.05:lr=0.0002" and row["method_options"] == {"beta": 0.05, "lr": 2e-4}
    assert row["setting"]["beta"] == 0.05 and row["setting"]["lr"] == 2e-4
