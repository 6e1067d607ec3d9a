"""Save the model of a finetuning checkpoint as a model folder, for a `dukb finetune` stopped by hand.

    python bench/model_from_checkpoint.py OUT --kb KB --model MODEL [--prompt P] [--note TEXT]

`dukb finetune ... -o OUT` writes OUT/finetune-checkpoint.pt after every probed epoch and removes it when training
ends. When a run must stop early (a session's time; a fact it does not learn in the preset's epochs), this script
loads MODEL as `dukb finetune` does, puts the checkpoint's weights in it, and saves it to OUT with dukb's own
`save_model` (the model record names the KB, so `dukb evaluate --finetuned OUT` checks it) and a finetune.json that
says what happened: the epochs run, the accuracy of the last probed epoch, `reached_target` false, and
`stopped_by_hand` with the note. The checkpoint is kept. Only for checkpoints written by one process (no FSDP).

Source: dukb (bench/RESULTS.md, "A real-world KB: geography").
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from dukb.kb import load_kb
from dukb.neural.finetune import CHECKPOINT
from dukb.neural.modelbuild import save_model
from dukb.neural.modelrecord import spec_for_path
from dukb.neural.models import load_model


def main() -> None:
    """Parse the arguments, load the checkpoint's weights into the model and save it with its record."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="the folder of `dukb finetune -o` holding finetune-checkpoint.pt")
    ap.add_argument("--kb", required=True, help="the KB it was finetuned on")
    ap.add_argument("--model", required=True, help="the model it was finetuned from (as given to dukb finetune)")
    ap.add_argument("--prompt", default=None, help="the --prompt given to dukb finetune, if any")
    ap.add_argument("--note", default="", help="why the finetuning was stopped")
    args = ap.parse_args()
    data = torch.load(args.out / CHECKPOINT, map_location="cpu", weights_only=True, mmap=True)
    kb = load_kb(args.kb)
    lm = load_model(spec_for_path(args.model, prompt=args.prompt, device="cpu"))
    lm.model.load_state_dict(data["model"])
    save_model(lm, args.out, kb=kb)
    epochs = int(data["offset"]) + int(data["epoch"])
    record = {
        "stopped_by_hand": args.note or True,
        "epochs_run": epochs,
        "phase": int(data["phase"]),
        "accuracy": None if float(data["acc"]) < 0 else float(data["acc"]),
        "reached_target": False,
        "loss_per_epoch": [float(x) for x in data["losses"]],
        "kb": str(kb.source),
        "kb_sha256": kb.fingerprint(),
        "model": {"name_or_path": args.model, "saved_to": str(args.out)},
    }
    (args.out / "finetune.json").write_text(json.dumps(record, indent=1) + "\n")
    print(f"saved {args.out}: epoch {epochs}, accuracy {record['accuracy']}")


if __name__ == "__main__":
    main()
