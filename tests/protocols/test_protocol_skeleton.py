"""The protocol skeleton: the registry (torch-free, every part importable, agreeing with the commands and the run
machinery) and the base class's work loop (stages in order, rows scored and written one by one, resumable, claims
released), on a toy protocol that needs no model."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from dataclasses import dataclass

import pytest

from dukb import InputError
from dukb.neural.protocols import PROTOCOLS, get_protocol, protocols_table, register
from dukb.neural.protocols.base import Protocol
from dukb.neural.run.identity import IDENTITY_VERSION
from dukb.neural.run.lock import holds_run_lock
from dukb.neural.runconfig import RunConfig


def test_registry_lists_every_protocol_command_and_its_parts_import():
    from dukb.cli.main import app

    commands = {c.name or c.callback.__name__ for c in app.registered_commands}
    assert set(PROTOCOLS) == {"evaluate", "rwku", "muse", "control", "restor"}
    for name, info in PROTOCOLS.items():
        assert name in commands
        cfg = info.load("config")
        assert issubclass(cfg, RunConfig) or name == "restor"  # RESTOR's config predates the shared one
        assert callable(info.load("run")) and callable(info.load("render"))
        if info.skeleton:
            cls = info.load("protocol")
            assert issubclass(cls, Protocol) and cls.name == name and cls.config_class is cfg
        else:
            with pytest.raises(ValueError, match="has no protocol"):
                info.load("protocol")
    # the run machinery's joinable protocols are the registry's
    assert all(p.joinable and p.load("rows").key for p in PROTOCOLS.values())  # every protocol declares its rows


def test_registry_is_the_report_command_s_and_the_table_names_each():
    from dukb.cli.evaluate_cmd import RENDERERS

    assert RENDERERS == {n: tuple(p.render.split(":")) for n, p in PROTOCOLS.items()}
    table = protocols_table().markdown()
    for name, info in PROTOCOLS.items():
        line = next(ln for ln in table.splitlines() if ln.startswith(f"| `dukb {name}` |"))
        assert line.endswith("| yes |" if info.joinable else "| no |")
        assert f"`{info.protocol.replace(':', '.')}`" in line and info.skeleton
    assert get_protocol("rwku") is PROTOCOLS["rwku"]
    with pytest.raises(KeyError, match="registered: evaluate"):
        get_protocol("tofu")
    with pytest.raises(ValueError, match="twice"):
        register(PROTOCOLS["rwku"])
    with pytest.raises(ValueError, match="unknown part"):
        PROTOCOLS["rwku"].load("model")


def test_the_catalog_imports_no_torch():
    code = (
        "import sys, dukb.neural.protocols as p\n"
        "for info in p.PROTOCOLS.values():\n"
        "    info.load('config'), info.rows and info.load('rows')\n"
        "p.protocols_table(); print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


@pytest.mark.parametrize(
    "old", ["protocol", "report", "muse", "muse_report", "rwku", "rwku_report", "control", "control_report"]
)
def test_no_module_re_exports_a_protocol_at_an_old_path(old):
    """No shim modules: a protocol's parts live in dukb/neural/protocols/<name>/ alone."""
    assert importlib.util.find_spec(f"dukb.neural.{old}") is None


def test_each_registered_part_is_defined_where_the_registry_names_it():
    """The registry names each part's own module (no re-exporting module in between)."""
    for info in PROTOCOLS.values():
        for part in ("config", "run", "render", "protocol"):
            module = getattr(info, part).split(":")[0]
            assert info.load(part).__module__ == module, (info.name, part)


# ---- the base class's loop on a toy protocol ---------------------------------------------------------------------


@dataclass
class ToyConfig(RunConfig):
    """A toy protocol's config: units 0..n-1, values per unit."""

    n: int = 3
    values: tuple = (1, 2)

    def check(self):
        if self.n < 1:
            raise InputError("n must be at least 1")
        return self


def _toy_key(row: dict) -> tuple:
    return (row["unit"], float(row["v"]))


class Toy(Protocol):
    """Rows (unit, v) with y = unit * 10 + v; score adds y2 = 2 y; stops after ``fail_after`` rows when set."""

    name = "toy"
    config_class = ToyConfig
    units_name = "(unit,)"

    def __init__(self, *a, fail_after=None, **k):
        super().__init__(*a, **k)
        self.calls = []
        self.fail_after = fail_after
        self.computed = 0

    def plan(self):
        self.calls.append("plan")
        self.claim(
            {"identity_version": IDENTITY_VERSION, "n": self.cfg.n, "values": list(self.cfg.values)}, row_key=_toy_key
        )

    def model(self):
        self.calls.append("model")
        (self.run / "config.json").write_text(json.dumps({"protocol": "toy", "identity": self.identity}))

    def units(self):
        self.calls.append("units")
        return [(u,) for u in range(self.cfg.n)]

    def pending(self, unit):
        return [v for v in self.cfg.values if (unit[0], float(v)) not in self.results.done]

    def run_unit(self, unit, todo):
        for v in todo:
            if self.fail_after is not None and self.computed >= self.fail_after:
                raise KeyboardInterrupt
            self.computed += 1
            yield {"unit": unit[0], "v": v, "y": unit[0] * 10 + v}

    def score(self, unit, row):
        row["y2"] = 2 * row["y"]
        return row

    def report(self):
        self.calls.append("report")
        return self.render(lambda run: {"report": run / "report.md"})


@holds_run_lock
def _execute(run, cfg, **kw):
    p = Toy(run, cfg, **kw)
    try:
        return p, p.execute()
    except KeyboardInterrupt:
        return p, None


def _rows(run):
    return [json.loads(ln) for ln in (run / "results.jsonl").read_text().splitlines()]


def test_execute_runs_the_stages_in_order_and_writes_scored_rows(tmp_path):
    run = tmp_path / "run"
    p, df = _execute(run, ToyConfig())
    assert p.calls == ["plan", "model", "units", "report"]
    rows = _rows(run)
    assert [(r["unit"], r["v"]) for r in rows] == [(u, v) for u in range(3) for v in (1, 2)]
    assert all(r["y2"] == 2 * r["y"] and r["worker"] == p.worker for r in rows)
    assert len(df) == 6 and list(df["y"]) == [1, 2, 11, 12, 21, 22]
    claims = sorted((run / ".dukb" / "units").glob("*.claim"))
    assert len(claims) == 3 and all(json.loads(c.read_text())["done"] for c in claims)  # every unit marked done
    assert not list((run / ".dukb" / "workers").glob("*.lock"))  # the worker's lock is gone with it


def test_an_interrupted_run_resumes_the_missing_rows_only(tmp_path):
    run = tmp_path / "run"
    p, df = _execute(run, ToyConfig(), fail_after=3)
    assert df is None and len(_rows(run)) == 3
    p2, df2 = _execute(run, ToyConfig(), resume=True)
    assert p2.computed == 3  # the other three rows
    assert sorted((r["unit"], r["v"]) for r in _rows(run)) == [(u, v) for u in range(3) for v in (1, 2)]
    with pytest.raises(InputError, match="already holds results"):
        _execute(run, ToyConfig(), resume=False)
    with pytest.raises(InputError):  # other settings: refused, nothing mixed
        _execute(run, ToyConfig(n=4), resume=True)
    assert len(_rows(run)) == 6


def test_the_config_is_checked_before_anything_runs(tmp_path):
    with pytest.raises(InputError, match="n must be"):
        Toy(tmp_path / "run", ToyConfig(n=0))
    assert not (tmp_path / "run").exists()


def test_a_check_in_place_is_refused(tmp_path):
    """The stages read the plan check() returns: a config whose check() changes it in place and returns nothing is
    refused before anything runs (no branch keeps such a config)."""

    @dataclass
    class InPlace(ToyConfig):
        def check(self):
            self.n = max(self.n, 1)

    with pytest.raises(TypeError, match=r"InPlace.check\(\) must return the checked config"):
        Toy(tmp_path / "run", InPlace())
    assert not (tmp_path / "run").exists()


def test_an_rwku_report_names_the_rows_still_missing(tmp_path):
    from dukb.neural.protocols.rwku.report import missing_rwku_units

    identity = {"targets": [3, 5], "methods": {"ga": {"grid": [1, 2]}}, "rwku": {"batch_sizes": [2]}}
    rows = [
        {"request": "target-3", "method": None, "param": None, "setting": {}},
        {"request": "target-3", "method": "ga", "param": "steps", "setting": {"steps": 1}},
        {"request": "batch-2", "method": "ga", "param": "steps", "setting": {"steps": 2}},
    ]
    assert missing_rwku_units(identity, rows) == [
        ("target-3", "ga", 2.0),
        ("target-5", "", None),
        ("target-5", "ga", 1.0),
        ("target-5", "ga", 2.0),
        ("batch-2", "", None),
        ("batch-2", "ga", 1.0),
    ]
    assert (
        missing_rwku_units(
            identity,
            rows
            + [
                {
                    "request": n,
                    "method": m or None,
                    "param": "steps" if m else None,
                    "setting": {"steps": v} if m else {},
                }
                for n, m, v in missing_rwku_units(identity, rows)
            ],
        )
        == []
    )
