"""Threads in the symbolic core (dukb.kb.parallel): the same KB and the same closure with one thread and with two.

A KB large enough for both thresholds (the fast CSV path's FAST_MIN_BYTES and the fixpoint's PARALLEL_MIN_FACTS)
is generated once; it is loaded and closed under DUKB_NUM_THREADS=1 and =2, and both must be equal to the last
fact and ground instance. Speed is measured in bench/, never here.
"""

from __future__ import annotations

import numpy as np
import pytest

from dukb.kb import load_kb, save_kb
from dukb.kb.fastread import FAST_MIN_BYTES
from dukb.kb.generate import generate
from dukb.kb.parallel import thread_map, threads
from dukb.solver.closure import compute_closure
from dukb.solver.horn import PARALLEL_MIN_FACTS


@pytest.fixture(scope="module")
def big_kb_dir(tmp_path_factory):
    kb, _ = generate(30_000, seed=3)
    out = tmp_path_factory.mktemp("big") / "kb"
    save_kb(kb, out)
    assert sum(p.stat().st_size for p in out.iterdir()) >= FAST_MIN_BYTES
    assert len(kb.relationships) >= PARALLEL_MIN_FACTS
    return out


def closed(path, monkeypatch, n: str):
    monkeypatch.setenv("DUKB_NUM_THREADS", n)
    kb = load_kb(path)
    return kb, compute_closure(kb)


def test_one_thread_and_two_give_the_same_kb_and_closure(big_kb_dir, monkeypatch):
    kb1, c1 = closed(big_kb_dir, monkeypatch, "1")
    kb2, c2 = closed(big_kb_dir, monkeypatch, "2")
    assert kb1 == kb2 and kb1.fingerprint() == kb2.fingerprint()
    assert len(c1) == len(c2) > len(kb1.relationships)
    for a, b in zip(c1.triples_arrays(), c2.triples_arrays()):
        assert np.array_equal(a, b)
    assert c1.n_kb == c2.n_kb


@pytest.mark.parametrize("env, cap", [("1", 1), ("0", None), ("two", None), ("", None), ("100000", None)])
def test_threads_follow_the_environment(monkeypatch, env, cap):
    monkeypatch.delenv("DUKB_NUM_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    cpus = threads()
    monkeypatch.setenv("OMP_NUM_THREADS", env)
    assert threads() == (cap if cap is not None else cpus)  # a value that is no positive integer is ignored
    monkeypatch.setenv("DUKB_NUM_THREADS", "1")
    assert threads() == 1  # dukb's own variable wins


def test_thread_map_keeps_order_and_raises_the_first_error(monkeypatch):
    monkeypatch.setenv("DUKB_NUM_THREADS", "2")
    assert thread_map(lambda x: x * 10, range(7)) == [0, 10, 20, 30, 40, 50, 60]
    assert thread_map(lambda x: x, [], parallel=True) == []

    def boom(x):
        if x in (2, 4):
            raise ValueError(f"item {x}")
        return x

    with pytest.raises(ValueError, match="item 2"):
        thread_map(boom, range(6))
