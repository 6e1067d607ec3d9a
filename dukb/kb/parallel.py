"""Threads for the symbolic core's large inputs: how many, and an order-keeping map over them.

numpy's sorts and searches, pyarrow's CSV reader and its compute kernels release the GIL, so on a KB of a million
people the three CSV files load, and the rules of one fixpoint round evaluate, side by side in threads of one
process. Results never depend on the number of threads: :func:`thread_map` returns its results in input order.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

#: Environment variables that cap the threads, in order (the first one set wins); OMP_NUM_THREADS=1 (as two jobs
#: sharing the cores should set) gives one thread.
THREAD_VARS = ("DUKB_NUM_THREADS", "OMP_NUM_THREADS")


def threads() -> int:
    """The number of threads the symbolic core may use: the CPUs this process may run on, capped by the first of
    :data:`THREAD_VARS` that is set to a positive integer (a value that is not one is ignored). At least 1.

    Example:
        >>> import os
        >>> old = os.environ.get("DUKB_NUM_THREADS")
        >>> os.environ["DUKB_NUM_THREADS"] = "1"
        >>> threads()
        1
        >>> _ = os.environ.pop("DUKB_NUM_THREADS") if old is None else os.environ.update(DUKB_NUM_THREADS=old)
    """
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        n = os.cpu_count() or 1
    for var in THREAD_VARS:
        value = os.environ.get(var, "").strip()
        if value.isdigit() and int(value) > 0:
            return max(1, min(n, int(value)))
    return max(1, n)


def thread_map(fn: Callable[[T], R], items: Iterable[T], parallel: bool = True) -> list[R]:
    """``[fn(x) for x in items]``, evaluated in :func:`threads` threads when ``parallel`` and more than one thread
    and one item are there; results in input order; the first exception raised by ``fn`` (in input order) is raised.

    Args:
        fn: the function (it should release the GIL for most of its time to gain anything).
        items: the inputs.
        parallel: False: evaluate in this thread (the caller's size threshold).

    Returns:
        list of ``fn``'s results, one per item, in order.

    Example:
        >>> thread_map(lambda x: x * x, [3, 1, 2])
        [9, 1, 4]
    """
    items = list(items)
    n = threads() if parallel else 1
    if n < 2 or len(items) < 2:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=min(n, len(items)), thread_name_prefix="dukb") as pool:
        futures = [pool.submit(fn, x) for x in items]
        return [f.result() for f in futures]


__all__ = ["THREAD_VARS", "thread_map", "threads"]
