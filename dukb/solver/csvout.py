"""The closure's CSV rows (subject,relation,object,source) written with pyarrow's string kernels, byte for byte as
:func:`csv.writer` writes them (:meth:`dukb.solver.closure.Closure.write_csv`): the Python writer takes 11 s of
``dukb closure`` on 1,000,000 people (issue 42, item 8)."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import IO, Any

import numpy as np


def _arrow_strings(values: Sequence[str]) -> Any:
    """A pyarrow large_string array of ``values``, built from its buffers (``pa.array`` would import pandas)."""
    import pyarrow as pa

    data = [v.encode() for v in values]
    offsets = np.zeros(len(data) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, data), dtype=np.int64, count=len(data)), out=offsets[1:])
    return pa.Array.from_buffers(
        pa.large_string(), len(data), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(data))]
    )


def _csv_field(value: str) -> str:
    """``value`` as :func:`csv.writer` writes a field of a record of several (minimal quoting)."""
    if not any(c in value for c in ',"\r\n'):
        return value
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow([value, ""])
    return out.getvalue()[:-2]


def write_rows_arrow(
    fh: IO[str], names: Sequence[str], s: np.ndarray, r: np.ndarray, o: np.ndarray, n_kb: int, relations: Sequence[str]
) -> bool:
    """Write ``subject,relation,object,source`` rows as :meth:`Closure.write_csv`'s csv writer does, byte for byte,
    with pyarrow's string kernels (rows in chunks, straight to ``fh``'s binary buffer). False, writing nothing,
    when ``fh`` has no binary buffer or pyarrow is missing.

    Args:
        fh: the open text file (UTF-8); its binary ``buffer`` receives the rows after ``fh`` is flushed.
        names: symbol id -> name.
        s, r, o: per row, the subject symbol, relation index in ``relations`` and object symbol
            (int arrays of one length).
        n_kb: rows before this one are ``kb``, the others ``derived``.
        relations: relation id -> name (the KB schema's relations, in order).

    Returns:
        True when the rows were written.

    Example:
        >>> import io
        >>> raw = io.BytesIO()
        >>> fh = io.TextIOWrapper(raw, encoding="utf-8", newline="")
        >>> rel = ("child", "father", "mother", "husband", "wife")
        >>> write_rows_arrow(fh, ["Ann Lee", "Lee, Bo"], np.array([0, 1]), np.array([4, 3]), np.array([1, 0]), 1, rel)
        True
        >>> print(raw.getvalue().decode(), end="")
        Ann Lee,wife,"Lee, Bo",kb
        "Lee, Bo",husband,Ann Lee,derived
        >>> write_rows_arrow(io.StringIO(), ["Ann Lee"], np.array([0]), np.array([0]), np.array([0]), 1, rel)
        False
    """
    buffer = getattr(fh, "buffer", None)
    if buffer is None or getattr(fh, "encoding", "utf-8").lower().replace("-", "") != "utf8":
        return False
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
    except ImportError:  # pragma: no cover - pyarrow is a dependency
        return False
    fh.flush()
    name_arr = _arrow_strings([_csv_field(n) for n in names])
    rel_arr = _arrow_strings(relations)
    fixed = _arrow_strings([",", "kb\n", "derived\n"])
    comma = fixed[0]
    step = 1 << 20
    for lo in range(0, len(s), step):
        hi = min(lo + step, len(s))

        def ix(a: np.ndarray) -> Any:
            a = np.ascontiguousarray(a, dtype=np.int64)
            return pa.Array.from_buffers(pa.int64(), len(a), [None, pa.py_buffer(a)])

        src = ix(1 + (np.arange(lo, hi) >= n_kb))
        line = pc.binary_join_element_wise(
            pc.take(name_arr, ix(s[lo:hi])),
            pc.take(rel_arr, ix(r[lo:hi])),
            pc.take(name_arr, ix(o[lo:hi])),
            pc.take(fixed, src),
            comma,
        )
        # the joined values are the rows, separator-free: the last field brings the line end
        ends = np.frombuffer(line.buffers()[1], dtype=np.int64)[line.offset : line.offset + len(line) + 1]
        buffer.write(memoryview(line.buffers()[2])[int(ends[0]) : int(ends[-1])])
    buffer.flush()
    return True
