"""``--save-models none|best|all`` on muse, rwku, control and restor (evaluate's: tests/neural/test_save_models.py):
the smallest end-to-end settings of each protocol's own tests, with ``all`` (one folder per unlearned row, with its
record), then resumes adding a method under ``none`` (nothing written, earlier saves kept) and under ``best`` (one
folder per unit: the setting the protocol's headline rule selects). A saved model loads with dukb's loader and
`dukb probe --model` reads it: its probe gives the row's forgotten facts."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from conftest import DEVICE
from dukb.cli.main import main

pytestmark = pytest.mark.slow


def _rows(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines() if x.strip()]


def _saved(run: Path) -> dict[Path, dict]:
    """Every saved unlearned model (a record naming its row), the temporary sweep folder left out: folder -> record."""
    out = {}
    for p in sorted((run / "models").rglob("dukb_model.json")) if (run / "models").is_dir() else []:
        rec = json.loads(p.read_text())
        if "row_key" in rec and ".sweep" not in p.parts:
            out[p.parent] = rec
    return out


def _stamps(saved) -> dict[Path, int]:
    return {d: max(f.stat().st_mtime_ns for f in d.iterdir()) for d in saved}


def _kb(tmp_path_factory, people: int = 30) -> Path:
    kb = tmp_path_factory.mktemp("kb") / "kb"
    assert main(["generate", "--people", str(people), "--seed", "3", "-o", str(kb)]) == 0
    return kb


def _probe_forgets_as_its_row(folder: Path, row: dict, tmp_path: Path) -> None:
    """`dukb probe --model FOLDER` (the model's recorded KB) finds unknown on qa exactly the row's forgotten
    relationships."""
    out = tmp_path / (folder.name + ".csv")
    assert main(["probe", "--model", str(folder), "--device", DEVICE, "-o", str(out)]) == 0
    q = pd.read_csv(out)
    q = q[(q["kind"] == "qa") & (q["fact_kind"] == "relationship")]
    assert sorted(q[~q["known"].astype(bool)]["fact_id"]) == sorted(row["forgotten_relationships"])


def _methods(grids: dict[str, str], *names: str) -> list[str]:
    """``--methods`` and each method's ``--grid`` (a grid is refused for a method the invocation does not run)."""
    out = ["--methods", ",".join(names)]
    for m in names:
        if m in grids:
            out += ["--grid", f"{m}={grids[m]}"]
    return out


def _check_resumes(base: list[str], grids: dict, run: Path, unit, key, select, first: str, second: str, third: str):
    """``all`` wrote one folder per unlearned row of ``first`` (checked by the caller); a resume adding ``second``
    under none writes nothing and leaves every earlier folder as it was; a resume adding ``third`` under best keeps
    one folder per unit of ``third``: the row ``select`` chooses among the unit's rows."""
    saved = _saved(run)
    stamps = _stamps(saved)
    assert main([*base, *_methods(grids, first, second), "--save-models", "none", "-o", str(run), "--resume"]) == 0
    assert {r["method"] for r in _rows(run)} >= {first, second}
    assert _saved(run).keys() == saved.keys() and _stamps(saved) == stamps
    assert (
        main([*base, *_methods(grids, first, second, third), "--save-models", "best", "-o", str(run), "--resume"]) == 0
    )
    now = _saved(run)
    assert _stamps(saved) == stamps and not (run / "models" / ".sweep").exists()
    new = {d: rec for d, rec in now.items() if d not in saved}
    units: dict = {}
    for r in _rows(run):
        if r.get("method") == third and unit(r) is not None:
            units.setdefault(unit(r), []).append(r)
    chosen = {u: select(rows) for u, rows in units.items()}
    assert units and {d.parent for d in new} == {run / "models" / Path(*u) for u, c in chosen.items() if c}
    for u, c in chosen.items():
        got = [rec for d, rec in new.items() if d.parent == run / "models" / Path(*u)]
        if c is None:  # the headline rule selects none: nothing kept
            assert got == []
            continue
        assert len(got) == 1 and got[0]["row_key"] == json.loads(json.dumps(list(key(c))))
        assert got[0]["setting"] == c["setting"]
    assert any(len(rows) > 1 for rows in units.values())  # best chose among several settings


# ------------------------------------------------------------------------------------------------------ muse ----
def test_muse_saves_every_row_none_nothing_and_best_the_selected_setting(tmp_path_factory, tmp_path):
    from dukb.kb import load_kb
    from dukb.neural.metrics.muse import select_setting
    from dukb.neural.protocols.muse.config import muse_row_key

    kb = _kb(tmp_path_factory)
    run = tmp_path / "muse"
    base = ["muse", "--kb", str(kb), "--scale-sizes", "", "--holdout", "0.2", "--bootstrap", "50", "--device", DEVICE]
    grids = {"ga": "2,8", "npo": "8", "npo_gdr": "2,8"}
    assert main([*base, *_methods(grids, "ga"), "--save-models", "all", "-o", str(run)]) == 0
    rows = [r for r in _rows(run) if r["model_kind"] == "unlearned"]
    saved = _saved(run)
    assert len(rows) == 2 and len(saved) == 2
    sha = load_kb(kb).fingerprint()
    for r in rows:
        d = run / "models" / "main" / "ga" / f"steps={r['setting']['steps']}"
        rec = saved[d]
        assert (d / "model.safetensors").is_file() and rec["kb_sha256"] == sha
        assert (rec["request"], rec["targets"], rec["method"], rec["setting"]) == (
            "main",
            r["targets"],
            "ga",
            r["setting"],
        )
        assert rec["row_key"] == ["main", "unlearned", "ga", float(r["setting"]["steps"])]
    _probe_forgets_as_its_row(
        run / "models" / "main" / "ga" / "steps=8", next(r for r in rows if r["setting"]["steps"] == 8), tmp_path
    )
    retrain = next(r for r in _rows(run) if r["model_kind"] == "retrain")

    def select(rs):
        return select_setting(
            sorted(rs, key=lambda r: r["setting"]["steps"]), retrain["knowmem_retain"], "first_below_retrain"
        )

    _check_resumes(
        base,
        grids,
        run,
        lambda r: (r["request"], r["method"]) if r["model_kind"] == "unlearned" else None,
        muse_row_key,
        select,
        "ga",
        "npo",
        "npo_gdr",
    )


# ------------------------------------------------------------------------------------------------------ rwku ----
def test_rwku_saves_every_row_none_nothing_and_best_the_strongest_setting(tmp_path_factory, tmp_path):
    from dukb.neural.modelrecord import read_model_record, spec_for_path
    from dukb.neural.models import load_model
    from dukb.neural.protocols.rwku.config import rwku_row_key

    kb = _kb(tmp_path_factory)
    run = tmp_path / "rwku"
    base = ["rwku", "--kb", str(kb), "--n-targets", "1", "--batch-sizes", "", "--device", DEVICE]
    grids = {"ga": "2,8", "ga_gdr": "8", "npo_seq": "2,8"}
    assert main([*base, *_methods(grids, "ga"), "--save-models", "all", "-o", str(run)]) == 0
    rows = [r for r in _rows(run) if r["model_kind"] == "unlearned"]
    saved = _saved(run)
    assert len(rows) == 2 and {d.relative_to(run / "models") for d in saved} == {
        Path(r["request"]) / "ga" / f"steps={r['setting']['steps']}" for r in rows
    }
    for d, rec in saved.items():
        assert rec["method"] == "ga" and rec["targets"] == rows[0]["targets"] and read_model_record(d) == rec
    strongest = max(rows, key=lambda r: r["setting"]["steps"])
    d = run / "models" / strongest["request"] / "ga" / "steps=8"
    assert load_model(spec_for_path(d, device=DEVICE)).model is not None
    _probe_forgets_as_its_row(d, strongest, tmp_path)
    _check_resumes(
        base,
        grids,
        run,
        lambda r: (r["request"], r["method"]) if r["model_kind"] == "unlearned" else None,
        rwku_row_key,
        lambda rs: max(rs, key=lambda r: r["setting"]["steps"]),
        "ga",
        "ga_gdr",
        "npo_seq",
    )


# --------------------------------------------------------------------------------------------------- control ----
def test_control_saves_every_row_none_nothing_and_best_the_calibrated_setting(tmp_path_factory, tmp_path):
    from dukb.neural.calibration import calibrate
    from dukb.neural.protocols.control.config import control_row_key

    kb = _kb(tmp_path_factory, 24)
    run = tmp_path / "control"
    base = [
        "control",
        "--kb",
        str(kb),
        "--ratios",
        "0.05",
        "--controls",
        "es",
        "--steps",
        "4",
        "--coarse",
        "2",
        "--fine",
        "2",
        "--retain-eval",
        "12",
        "--device",
        DEVICE,
    ]
    assert main([*base, *_methods({}, "ga"), "--save-models", "all", "-o", str(run)]) == 0
    rows = [r for r in _rows(run) if r.get("method")]
    saved = _saved(run)
    assert len(rows) == len(saved) >= 3
    for r in rows:
        d = run / "models" / "5_" / "ga" / r["control"] / f"{r['param']}={r['value']:g}"
        assert saved[d]["row_key"] == ["5%", "ga", r["control"], r["value"]]
        assert (saved[d]["ratio"], saved[d]["control"], saved[d]["setting"]) == ("5%", r["control"], r["setting"])
    unc = next(r for r in rows if r["control"] == "none")
    _probe_forgets_as_its_row(run / "models" / "5_" / "ga" / "none" / f"steps={unc['value']:g}", unc, tmp_path)
    orig = next(r for r in _rows(run) if r["control"] == "original")

    def select(rs):
        return rs[-1] if rs[0]["control"] == "none" else calibrate(rs, orig, "full")

    _check_resumes(
        base,
        {},
        run,
        lambda r: (r["ratio"].replace("%", "_"), r["method"], r["control"]) if r.get("method") else None,
        control_row_key,
        select,
        "ga",
        "ga_gdr",
        "po",
    )


# ---------------------------------------------------------------------------------------------------- restor ----
def test_restor_saves_its_adapter_and_best_keeps_its_only_setting(tmp_path_factory, tmp_path):
    from dukb.kb import save_kb
    from dukb.kb.generate import generate
    from dukb.neural.modelrecord import spec_for_path
    from dukb.neural.models import load_model

    kb = save_kb(generate(24, 1)[0], tmp_path_factory.mktemp("kb") / "kb")
    run = tmp_path / "restor"
    # test_restor.py's small setting
    base = [
        "restor",
        "--kb",
        str(kb),
        "-o",
        str(run),
        "--samples",
        "1",
        "--docs-per-entity",
        "12",
        "--n-retain",
        "16",
        "--n-random",
        "5",
        "--templates",
        "1",
        "--clean-epochs",
        "80",
        "--corrupt-lr",
        "5e-3",
        "--device",
        DEVICE,
    ]
    assert main([*base, "--methods", "ga", "--save-models", "all"]) == 0
    saved = _saved(run)
    ((d, rec),) = saved.items()
    (row,) = _rows(run)
    assert d.parent == run / "models" / "ga" and rec["method"] == "ga" and rec["setting"] == row["setting"]
    assert rec["adapter"] is True and Path(rec["base"]) == (run / "corrupted").resolve()  # LoRA: --lora-r 8
    assert (d / "adapter_config.json").is_file() and not (d / "model.safetensors").exists()
    lm = load_model(spec_for_path(d, device=DEVICE))
    base_lm = load_model(spec_for_path(run / "corrupted", device=DEVICE))
    changed = [n for (n, p), q in zip(lm.model.named_parameters(), base_lm.model.parameters()) if not p.equal(q)]
    assert changed  # the adapter merged into the corrupted model changed it
    out = tmp_path / "probe.csv"
    assert main(["probe", "--model", str(d), "--device", DEVICE, "-o", str(out)]) == 0 and len(pd.read_csv(out))
    stamps = _stamps(saved)
    assert main([*base, "--methods", "npo", "--targeted"]) == 0  # none (the default): nothing saved
    assert len(_rows(run)) == 2 and _saved(run).keys() == saved.keys() and _stamps(saved) == stamps
    assert main([*base, "--methods", "ga", "--targeted", "--save-models", "best"]) == 0
    new = {k: v for k, v in _saved(run).items() if k not in saved}
    ((d2, rec2),) = new.items()
    assert d2.parent == run / "models" / "ga-targeted" and rec2["targeted"] is True and _stamps(saved) == stamps
    assert not (run / "models" / ".sweep").exists()
