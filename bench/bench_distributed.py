"""Multi-process runs (accelerate/torchrun) against one process, on the same machine and inputs.

Finetunes the tiny default on a KB in one process and data parallel in N processes (gloo on CPU, NCCL on GPUs),
then runs `dukb evaluate` on the single-process model in one process and in N. Reports wall time, epochs,
accuracy, the first epoch where the per-epoch losses differ by more than 1e-4 (relative), and whether the evaluate
rows agree.

Usage: python bench/bench_distributed.py [--kb ../shared/edu-relat] [--nproc 2] [--n-targets 6]
Threads: each of the N processes gets cores // N; the single-process finetune gets all cores, the single-process
evaluate the same threads as one of the N (same compute per process and the same rounding).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _run(args: list[str], nproc: int, threads: int) -> float:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), TOKENIZERS_PARALLELISM="false")
    cmd = [sys.executable, "-m", "dukb.cli.main", *args]
    if nproc > 1:
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc_per_node={nproc}",
            "-m",
            "dukb.cli.main",
            *args,
        ]
    t = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(proc.stderr[-3000:])
    return time.perf_counter() - t


def _rows(run: Path) -> dict:
    out = {}
    for line in (run / "results.jsonl").read_text().splitlines():
        r = json.loads(line)
        out[(r["target"], r["method"], json.dumps(r["setting"]))] = (
            r["recall"],
            r["accuracy_all"],
            r["forgotten_relationships"],
        )
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kb", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "edu-relat"))
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--n-targets", type=int, default=6)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    if not os.path.isdir(args.kb):
        print(f"skip: {args.kb} not found")
        return 0
    cores = os.cpu_count() or 1
    per = max(1, cores // args.nproc)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        ft = ["finetune", "--kb", args.kb, "--device", args.device, "--seed", "0"]
        s1 = _run(ft + ["-o", str(tmp / "ft1")], 1, cores)
        sn = _run(ft + ["-o", str(tmp / "ftn")], args.nproc, per)
        a = json.loads((tmp / "ft1" / "finetune.json").read_text())
        b = json.loads((tmp / "ftn" / "finetune.json").read_text())
        diverge = next(
            (
                i + 1
                for i, (x, y) in enumerate(zip(a["loss_per_epoch"], b["loss_per_epoch"]))
                if abs(x - y) > 1e-4 * abs(x)
            ),
            None,
        )
        rows.append(
            (
                f"finetune, 1 process x {cores} threads",
                s1,
                f"accuracy {a['accuracy']:.4f} after {a['epochs_run']} epochs",
            )
        )
        rows.append(
            (
                f"finetune, {args.nproc} processes x {per} threads (DDP)",
                sn,
                f"accuracy {b['accuracy']:.4f} after {b['epochs_run']} epochs; losses equal to 1e-4 up to "
                f"epoch {(diverge or len(a['loss_per_epoch']) + 1) - 1}",
            )
        )
        ev = [
            "evaluate",
            "--kb",
            args.kb,
            "--finetuned",
            str(tmp / "ft1"),
            "--n-targets",
            str(args.n_targets),
            "--device",
            args.device,
        ]
        # the single process gets the threads of one of the N processes: the same compute per process, and the
        # same floating-point reduction order (a different thread count changes rounding, hence a few probes)
        e1 = _run(ev + ["-o", str(tmp / "ev1")], 1, per)
        en = _run(ev + ["-o", str(tmp / "evn")], args.nproc, per)
        r1, rn = _rows(tmp / "ev1"), _rows(tmp / "evn")
        differ = sum(r1.get(k) != v for k, v in rn.items())
        rows.append(
            (f"evaluate {args.n_targets} targets x GA/NPO/TV/WHP, 1 process x {per} threads", e1, f"{len(r1)} rows")
        )
        rows.append(
            (
                f"evaluate, {args.nproc} processes x {per} threads (targets split)",
                en,
                f"{len(rn)} rows; {differ} differ from 1 process (same keys: {r1.keys() == rn.keys()})",
            )
        )
    print(f"`{' '.join(['python'] + sys.argv)}` ({cores} cores, {args.device})\n")
    print("| what | seconds | result |\n|---|---|---|")
    for what, sec, res in rows:
        print(f"| {what} | {sec:.1f} | {res} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
