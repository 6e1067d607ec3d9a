"""Read-only sequence views of a closure's rule-instance hypergraph over numpy arrays (no Python list per atom is
built): :class:`dukb.solver.closure.Closure` serves ``by_head``, ``by_body`` and ``inst_body`` through them.

The arrays follow the CSR layout: ``ptr`` holds offsets of length n + 1, item ``a`` spans ``ptr[a] .. ptr[a+1]-1``.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np


class AtomView(Sequence):
    """A read-only sequence indexed by atom id (negative ids count from the end), built on CSR offsets ``ptr``
    (int array of length n_atoms + 1); subclasses say what an item is (:meth:`_item`).

    Raises:
        IndexError: an atom id outside the view.

    Example:
        >>> view = HeadView(np.array([0, 2, 2, 5]))  # 3 atoms
        >>> len(view), view[-1], view[0:2]
        (3, range(2, 5), [range(0, 2), range(2, 2)])
        >>> view[3]
        Traceback (most recent call last):
            ...
        IndexError: 3
    """

    def __init__(self, ptr: np.ndarray):
        self._ptr = ptr

    def __len__(self) -> int:
        return len(self._ptr) - 1

    def __getitem__(self, a: Any) -> Any:
        if isinstance(a, slice):
            return [self[i] for i in range(*a.indices(len(self)))]
        a = int(a)
        if a < 0:
            a += len(self)
        if not 0 <= a < len(self):
            raise IndexError(a)
        return self._item(a)

    @abc.abstractmethod
    def _item(self, a: int) -> Any:
        """Item ``a`` (``0 <= a < len(self)``), as each view defines it."""


class HeadView(AtomView):
    """``by_head[a]``: the instance ids deriving atom ``a`` (a ``range``: instances are sorted by head).

    Example:
        >>> by_head = HeadView(np.array([0, 0, 3]))  # atom 0: no instance; atom 1: instances 0, 1, 2
        >>> list(by_head[0]), list(by_head[1])
        ([], [0, 1, 2])
    """

    def _item(self, a: int) -> range:
        return range(int(self._ptr[a]), int(self._ptr[a + 1]))


class BodyIndexView(AtomView):
    """``by_body[a]``: the instance ids having atom ``a`` as a body atom (ascending list), from CSR arrays ``ptr``
    (offsets) and ``idx`` (instance ids).

    Example:
        >>> by_body = BodyIndexView(np.array([0, 2, 3]), np.array([0, 4, 4]))
        >>> by_body[0], by_body[1]
        ([0, 4], [4])
    """

    def __init__(self, ptr: np.ndarray, idx: np.ndarray):
        super().__init__(ptr)
        self._idx = idx

    def _item(self, a: int) -> list[int]:
        return self._idx[self._ptr[a] : self._ptr[a + 1]].tolist()


class BodyView(Sequence):
    """``inst_body[i]``: the distinct body atoms of instance ``i`` as a tuple of ints, from a 2-D int array of shape
    (n_instances, max body length) padded with -1.

    Example:
        >>> inst_body = BodyView(np.array([[3, -1], [1, 2]]))
        >>> len(inst_body), inst_body[0], inst_body[1], list(inst_body)
        (2, (3,), (1, 2), [(3,), (1, 2)])
    """

    def __init__(self, body: np.ndarray):
        self._body = body

    def __len__(self) -> int:
        return len(self._body)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        return tuple(x for x in self._body[i].tolist() if x >= 0)

    def __iter__(self) -> Iterator[tuple[int, ...]]:
        for row in self._body.tolist():
            yield tuple(x for x in row if x >= 0)
