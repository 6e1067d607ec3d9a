"""Launchers of `dukb evaluate` (`--launcher local|submitit-local|slurm`, :mod:`dukb.neural.launch`) and the claims'
leases: a background heartbeat renews a live worker's claims, and a claim whose heartbeat stopped is taken over
after :data:`dukb.neural.run.units.CLAIM_TIMEOUT`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from conftest import DEVICE
from dukb.neural.run import units
from dukb.neural.run.units import UnitClaims


def test_a_claim_is_a_lease_its_heartbeat_renews(tmp_path, monkeypatch):
    """Without a lock that can be checked (another node, no shared flock: simulated by no fcntl), a live worker's
    claim stays its own however long its unit runs (the heartbeat renews it), and a claim whose heartbeat stopped
    (its node died) is taken over once it has been silent for the timeout."""
    monkeypatch.setattr(units, "fcntl", None)
    monkeypatch.setattr(units, "CLAIM_TIMEOUT", 0.6)
    far, near = UnitClaims(tmp_path, "far:1", heartbeat=0.1), UnitClaims(tmp_path, "near:2", heartbeat=0.1)
    assert far.timeout == 0.6
    assert far.claim((1, "ga"))
    time.sleep(1.5)  # 2.5 timeouts without a row: the heartbeat kept the lease
    assert not near.claim((1, "ga"))
    assert time.time() - os.stat(far.path((1, "ga"))).st_mtime < 0.5
    far._stop.set()  # the node dies: no more heartbeats (its lock file stays, as on a node that vanished)
    far._beat.join()
    assert not near.claim((1, "ga"))  # renewed less than a timeout ago
    time.sleep(1.0)
    assert near.claim((1, "ga")) and near.state((1, "ga"))["worker"] == "near:2"
    far.close()
    near.close()


def test_a_done_unit_is_no_longer_renewed(tmp_path, monkeypatch):
    monkeypatch.setattr(units, "fcntl", None)
    a = UnitClaims(tmp_path, "a:1", heartbeat=0.05)
    assert a.claim((2, "tv"))
    a.done((2, "tv"))
    old = time.time() - 100
    os.utime(a.path((2, "tv")), (old, old))
    time.sleep(0.3)
    assert os.stat(a.path((2, "tv"))).st_mtime == pytest.approx(old, abs=1)  # done: not renewed
    a.close()
    assert not a._beat.is_alive()
