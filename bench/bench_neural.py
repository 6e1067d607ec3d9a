"""Neural speed goals on this machine (issue "Neural adapters"): tiny default finetuned to 100% of EDU-RELAT
(<= 3 min), probing all 700 facts (<= 3 s), one GA sweep of 5 settings on one target including probes (<= 15 s).

Usage: python bench/bench_neural.py [--kb ../shared/edu-relat] [--target 272]
Prints a markdown table with the command line; the baseline is HF ``generate`` one prompt at a time, in the same
process, for the probing figure.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kb", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "edu-relat"))
    ap.add_argument("--target", type=int, default=272)
    args = ap.parse_args()
    if not os.path.isdir(args.kb):
        print(f"skip: {args.kb} not found")
        return 0
    import torch

    from dukb.kb import load_kb
    from dukb.neural.data import kb_qa
    from dukb.neural.pipeline import finetune_kb, load_finetuned
    from dukb.neural.probe import Predictor, probe
    from dukb.neural.spec import ModelSpec
    from dukb.neural.unlearn import UnitPlan, sweep_target
    from dukb.solver.closure import compute_closure

    kb = load_kb(args.kb)
    items = kb_qa(kb)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        rec = finetune_kb(kb, ModelSpec("tiny", prompt="tiny", device="cpu"), tmp)
        rows.append(
            (
                "finetune tiny to 100% of the KB",
                time.perf_counter() - t,
                f"accuracy {rec['accuracy']:.4f} after {rec['epochs_run']} epochs",
                "<= 180 s",
            )
        )
        lm = load_finetuned(tmp, device="cpu")
        pred = Predictor(lm.model, lm.tokenizer, lm.tags)
        probe(pred, items[:64])  # warm-up
        times = []
        for _ in range(3):
            t = time.perf_counter()
            df = probe(pred, items)
            times.append(time.perf_counter() - t)
        rows.append(
            (
                f"probe all {len(items)} facts (batched, KV cache; median of 3)",
                sorted(times)[1],
                f"known {df['known'].mean():.4f}",
                "<= 3 s",
            )
        )
        t = time.perf_counter()
        for it in items[:100]:
            enc = lm.tokenizer(lm.tags.prompt(it.question), return_tensors="pt", add_special_tokens=False)
            with torch.no_grad():
                lm.model.generate(**enc, max_new_tokens=10, do_sample=False, pad_token_id=lm.tokenizer.pad_token_id)
        naive = (time.perf_counter() - t) * len(items) / 100
        rows.append(
            (
                f"baseline: HF generate one prompt at a time, {len(items)} facts (extrapolated from 100)",
                naive,
                "generation only",
                "",
            )
        )
        c = compute_closure(kb)
        t = time.perf_counter()
        out = list(sweep_target(UnitPlan(lm, kb, c, args.target, "ga", probe_items=items)))
        rows.append(
            (
                f"GA sweep T in {{1,2,4,8,16}} on target {args.target}, probing all facts after each",
                time.perf_counter() - t,
                f"recall {[round(r['recall'], 2) for r in out]}",
                "<= 15 s",
            )
        )
    print(f"Command: python {' '.join(sys.argv)}  (torch threads: {torch.get_num_threads()})\n")
    print("| measurement | seconds | result | goal |\n|---|---:|---|---|")
    for name, secs, res, goal in rows:
        print(f"| {name} | {secs:.2f} | {res} | {goal} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
