"""Tiny-model QA finetuning: epochs and seconds to 100% of the KB, per learning rate, on several KBs.

Measures the ``tiny`` preset of :data:`dukb.neural.finetune.FINETUNE_PRESETS` at its own learning rate against
others (the earlier 3e-3 by default), in one process, on generated KBs of several sizes and seeds and on EDU-RELAT
when ``../shared/edu-relat`` is present. Each run uses the preset's epochs, early stop and extra epochs; only the
rate changes.

    OMP_NUM_THREADS=1 python bench/bench_tiny_finetune.py [--lrs 1e-3,3e-3] [--kbs 8:1,12:0,16:2,24:3,100:0,edu]

Prints a Markdown table: KB, facts, lr, epochs run (extra epochs among them), accuracy reached, seconds.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

import torch

from dukb.kb import load_kb
from dukb.kb.generate import generate
from dukb.neural import finetune as FT
from dukb.neural.pipeline import finetune_kb
from dukb.neural.spec import ModelSpec

EDU = Path(__file__).resolve().parents[2] / "shared" / "edu-relat"


def _kb(spec: str):
    if spec == "edu":
        return load_kb(EDU) if (EDU / "people.csv").is_file() else None
    n, seed = map(int, spec.split(":"))
    return generate(n, seed=seed)[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lrs", default=f"{FT.FINETUNE_PRESETS['tiny'].lr:g},3e-3", help="learning rates, comma-separated")
    ap.add_argument(
        "--kbs",
        default="8:1,12:0,16:2,24:3,24:1,100:0,edu",
        help="generated KBs as PEOPLE:SEED, and 'edu' for EDU-RELAT, comma-separated",
    )
    args = ap.parse_args()
    base = FT.FINETUNE_PRESETS["tiny"]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); preset tiny: {base}")
    print("\n| KB | facts | lr | epochs (extra) | accuracy | seconds |\n|---|---:|---:|---:|---:|---:|")
    for spec in args.kbs.split(","):
        kb = _kb(spec)
        if kb is None:
            continue
        for lr in (float(x) for x in args.lrs.split(",")):
            FT.FINETUNE_PRESETS["tiny"] = dataclasses.replace(base, lr=lr)
            try:
                with tempfile.TemporaryDirectory() as tmp:
                    t = time.perf_counter()
                    rec = finetune_kb(kb, ModelSpec("tiny", prompt="tiny", device="cpu"), Path(tmp) / "m", seed=0)
                    sec = time.perf_counter() - t
            finally:
                FT.FINETUNE_PRESETS["tiny"] = base
            name = "EDU-RELAT" if spec == "edu" else f"generated {spec.replace(':', ' people, seed ')}"
            print(
                f"| {name} | {rec['n_items']} | {lr:g} | {rec['epochs_run']} ({rec['extra_epochs_run']}) | "
                f"{rec['accuracy']:.4f} | {sec:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
