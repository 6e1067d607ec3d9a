"""Probing speed of a finetuned real model by dtype: EDU-RELAT's 700 facts and one prefill of 256 prompts.

Usage: python bench/bench_probe_dtype.py MODEL_DIR [--kb ../shared/edu-relat] [--dtype float32|bfloat16]

MODEL_DIR is a model finetuned in dukb's QA format (e.g. `dukb finetune --kb demo --model smollm2-135m -o DIR`), so
that its answers are one line and EOS, as during `dukb evaluate`. Prints the probe time (after a 32-prompt warm-up)
and the time of one prefill forward pass of the first 256 prompts (last-position logits only).
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--kb", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "edu-relat"))
    ap.add_argument("--dtype", default="float32")
    args = ap.parse_args()
    import torch

    import dukb.neural.probe as P
    from dukb.kb import load_kb
    from dukb.neural.data import kb_qa
    from dukb.neural.modelrecord import spec_for_path
    from dukb.neural.models import load_model

    lm = load_model(spec_for_path(args.model, device="cpu", dtype=args.dtype))
    items = kb_qa(load_kb(args.kb))
    pred = P.Predictor(lm.model, lm.tokenizer, lm.tags)
    P.probe(pred, items[:32], rouge=False, logprob=False)
    t = time.perf_counter()
    df = P.probe(pred, items, rouge=False, logprob=False)
    probe_s = time.perf_counter() - t
    enc = lm.tokenizer(
        [lm.tags.prompt(it.question) for it in items[:256]], return_tensors="pt", padding=True, add_special_tokens=False
    )
    with torch.no_grad():
        t = time.perf_counter()
        lm.model(**enc, logits_to_keep=1)
        prefill_s = time.perf_counter() - t
    print(f"Command: python {' '.join(sys.argv)} (torch threads: {torch.get_num_threads()})")
    print(
        f"| {args.dtype} | {probe_s:.1f} | {prefill_s:.2f} | {tuple(enc['input_ids'].shape)} | "
        f"mean answer {df['output'].str.len().mean():.1f} characters |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
