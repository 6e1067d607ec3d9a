"""Compare two captures of bench/capture_rows.sh: the rows a user sees must be equal, timings and bookkeeping aside.

    python bench/compare_rows.py BEFORE AFTER [--max N] [--skip RUN ...]

Compared, by their paths relative to the capture folders:
  - every ``results.jsonl`` and every ``*.json`` row file under ``attack/``: rows matched by their row key (the key
    each protocol's run layer uses: evaluate and unlearn (target, method, swept value), rwku (request, method, swept
    value), muse (request, model kind, method, swept value), control (ratio, method, control, value), restor (method,
    targeted, setting); the whole row otherwise), so the order of the rows does not matter;
  - every ``*.csv`` (summary.csv, facts.csv, ...) outside model folders and logs: the header, then row by row in order;
  - ``method_snapshot.json``: the whole document.
Numbers are compared exactly (an int is not a float, NaN equals NaN only). Fields whose name says they are timings
or bookkeeping (seconds_*, worker, timestamps, paths, versions, git revisions, source fingerprints) are left out at
every depth, and the capture folders' own paths inside strings are read as ``<OUT>`` (the checkouts' as
``<CHECKOUT>``), so two captures in different folders compare equal.

--skip RUN leaves out a run (a top folder of the captures, e.g. ``main`` for captures made with --no-main).

Exit status: 0 when everything is equal, 1 with one line per difference (run, key, field, before, after), 2 on a
usage error.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import sys
from pathlib import Path

#: a field (JSON key or CSV column) holding a timing or bookkeeping, not a measurement
IGNORED = re.compile(
    r"(^|_)seconds($|_)|^seconds|^workers?$|timestamp|^time$|_time$|^time_|^(started|finished)"
    r"|_at$|^date$|version|^git($|_)|revision|^commit$|fingerprint|^source_(sha|hash|digest)"
    r"|^paths?$|_path$|_dir$|^host(name)?$|^pid$|^cwd$"
)
#: folders of a capture whose files are not rows (models, logs)
SKIPPED_DIRS = {"logs", "finetuned", "demo_model", "units", "workers", "checkpoints"}
#: how a value is spelled in a report line, at most
SHOW = 120


def ignored(name: str) -> bool:
    """Whether a field name is a timing or bookkeeping (:data:`IGNORED`)."""
    return bool(IGNORED.search(str(name)))


class Capture:
    """One capture folder: its root and the checkouts it ran (the lines of checkout.txt that start with "/"), for
    path normalisation."""

    def __init__(self, root: Path):
        self.root = root.resolve()
        info = self.root / "checkout.txt"
        lines = info.read_text(encoding="utf-8").splitlines() if info.is_file() else []
        self.checkouts = sorted({x.strip() for x in lines if x.startswith("/")}, key=len, reverse=True)

    def text(self, s: str) -> str:
        """A string with the capture's and the checkouts' paths replaced by placeholders."""
        s = s.replace(str(self.root), "<OUT>")
        for c in self.checkouts:
            s = s.replace(c, "<CHECKOUT>")
        return s

    def clean(self, v):
        """A JSON value without ignored fields, its strings normalised (:meth:`text`)."""
        if isinstance(v, dict):
            return {k: self.clean(x) for k, x in v.items() if not ignored(k)}
        if isinstance(v, list):
            return [self.clean(x) for x in v]
        if isinstance(v, str):
            return self.text(v)
        return v


def same(a, b) -> bool:
    """Exact equality of two JSON values: types must match (bool, int and float are distinct), NaN equals NaN."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def show(v) -> str:
    """A value as a report line spells it (JSON, clipped to :data:`SHOW` characters)."""
    s = "<absent>" if v is _ABSENT else json.dumps(v, sort_keys=True, default=str)
    return s if len(s) <= SHOW else s[: SHOW - 3] + "..."


_ABSENT = object()


def field_diffs(a, b, prefix: str = "") -> list[tuple[str, object, object]]:
    """(dotted field, before, after) for every leaf where two cleaned JSON values differ; lists are leaves."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in list(a) + [k for k in b if k not in a]:
            out += field_diffs(a.get(k, _ABSENT), b.get(k, _ABSENT), f"{prefix}.{k}" if prefix else str(k))
        return out
    if a is _ABSENT or b is _ABSENT or not same(a, b):
        return [(prefix or "<value>", a, b)]
    return []


def _swept(row: dict):
    param = row.get("param")
    setting = row.get("setting") if isinstance(row.get("setting"), dict) else {}
    return setting.get(param) if param else None


def row_key(row: dict) -> tuple:
    """The key identifying a row within its run, from the fields the row has (the protocols' row keys)."""
    if "ratio" in row and "control" in row:
        return ("control", row["ratio"], row.get("method") or "", row["control"], row.get("value"))
    if "targeted" in row:
        return ("restor", row.get("method"), row["targeted"], json.dumps(row.get("setting"), sort_keys=True))
    if "request" in row:
        return ("request", row["request"], row.get("model_kind", ""), row.get("method") or "", _swept(row))
    if "target" in row:
        return ("target", row["target"], row.get("method") or "", _swept(row))
    return ("row", json.dumps(row, sort_keys=True, default=str))


def keyed(rows: list[dict]) -> dict[str, dict]:
    """Rows by their key spelled as text; a key met again gets ``#2``, ``#3``... in file order."""
    out: dict[str, dict] = {}
    for row in rows:
        k = ", ".join(map(str, row_key(row)[1:]))
        name, n = k, 1
        while name in out:
            n += 1
            name = f"{k} #{n}"
        out[name] = row
    return out


def read_rows(path: Path) -> list[dict]:
    """The rows of a results.jsonl (one JSON object a line) or of a JSON file (one object or a list of them)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    data = json.loads(text)
    return data if isinstance(data, list) else [data]


def compare_rows(rel: str, a: list[dict], b: list[dict], ca: Capture, cb: Capture) -> list[str]:
    """Differences between two row files, matched by key: rows only in one, and every differing field."""
    ka, kb = keyed([ca.clean(r) for r in a]), keyed([cb.clean(r) for r in b])
    out = []
    if len(a) != len(b):
        out.append(f"{rel}: {len(a)} rows before, {len(b)} after")
    for k in ka.keys() - kb.keys():
        out.append(f"{rel}: row [{k}] only before")
    for k in kb.keys() - ka.keys():
        out.append(f"{rel}: row [{k}] only after")
    for k in ka.keys() & kb.keys():
        out += [
            f"{rel}: row [{k}] field {f}: {show(x)} before, {show(y)} after" for f, x, y in field_diffs(ka[k], kb[k])
        ]
    return sorted(out)


def compare_csv(rel: str, pa: Path, pb: Path, ca: Capture, cb: Capture) -> list[str]:
    """Differences between two CSV files: header (ignored columns left out), then each row's cells in order."""

    def load(p: Path, c: Capture):
        with open(p, newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
        head = rows[0] if rows else []
        keep = [i for i, h in enumerate(head) if not ignored(h)]
        return [head[i] for i in keep], [[c.text(r[i]) if i < len(r) else "<absent>" for i in keep] for r in rows[1:]]

    ha, ra = load(pa, ca)
    hb, rb = load(pb, cb)
    if ha != hb:
        return [f"{rel}: header {ha} before, {hb} after"]
    out = [f"{rel}: {len(ra)} rows before, {len(rb)} after"] if len(ra) != len(rb) else []
    for i, (x, y) in enumerate(zip(ra, rb), start=2):
        label = ",".join(c for c in x[:5] if not re.fullmatch(r"[-+0-9.eE]+|nan|inf", c))
        out += [
            f"{rel}: line {i} [{label}] column {h}: {u!r} before, {v!r} after" for h, u, v in zip(ha, x, y) if u != v
        ]
    return out


def files(root: Path, skip: tuple[str, ...] = ()) -> dict[str, Path]:
    """The compared files of a capture, by path relative to it, without the top folders in ``skip``."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if not p.is_file() or SKIPPED_DIRS & set(rel.parts[:-1]) or rel.parts[0] in skip:
            continue
        if (
            p.name == "results.jsonl"
            or p.suffix == ".csv"
            or rel.as_posix() == "method_snapshot.json"
            or (rel.parts[0] == "attack" and p.suffix == ".json")
        ):
            out[rel.as_posix()] = p
    return out


def compare(before: Path, after: Path, skip: tuple[str, ...] = ()) -> list[str]:
    """Every difference between two capture folders, one line each (empty when they are equal); runs in ``skip``
    are left out."""
    ca, cb = Capture(before), Capture(after)
    fa, fb = files(ca.root, skip), files(cb.root, skip)
    out = [f"{rel}: only before" for rel in sorted(fa.keys() - fb.keys())]
    out += [f"{rel}: only after" for rel in sorted(fb.keys() - fa.keys())]
    for rel in sorted(fa.keys() & fb.keys()):
        pa, pb = fa[rel], fb[rel]
        try:
            if pa.suffix == ".csv":
                out += compare_csv(rel, pa, pb, ca, cb)
            elif rel == "method_snapshot.json":
                da, db = (json.loads(p.read_text(encoding="utf-8")) for p in (pa, pb))
                out += [
                    f"{rel}: {f}: {show(x)} before, {show(y)} after"
                    for f, x, y in field_diffs(ca.clean(da), cb.clean(db))
                ]
            else:
                out += compare_rows(rel, read_rows(pa), read_rows(pb), ca, cb)
        except (OSError, ValueError) as e:
            out.append(f"{rel}: cannot read: {e}")
    return out


def main(argv: list[str] | None = None) -> int:
    """CLI: print the differences (at most --max lines and their count); 0 when equal, 1 otherwise, 2 on bad usage."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--max", type=int, default=200, help="print at most this many differences (default 200)")
    ap.add_argument("--skip", action="append", default=[], metavar="RUN", help="leave out this run (a top folder)")
    args = ap.parse_args(argv)
    for p in (args.before, args.after):
        if not p.is_dir():
            print(f"compare_rows: error: {p}: not a folder", file=sys.stderr)
            return 2
    diffs = compare(args.before, args.after, tuple(args.skip))
    n = len(files(args.before.resolve(), tuple(args.skip)))
    if not diffs:
        print(f"equal: {n} files compared ({args.before} vs {args.after})")
        return 0
    for line in diffs[: args.max]:
        print(line)
    if len(diffs) > args.max:
        print(f"... {len(diffs) - args.max} more")
    print(f"{len(diffs)} differences in {len({d.split(':')[0] for d in diffs})} of {n} files")
    return 1


if __name__ == "__main__":
    sys.exit(main())
