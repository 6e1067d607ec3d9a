"""Real-model speed on this machine (issue "A real pretrained LLM"): probing EDU-RELAT's 700 facts with SmolLM2-135M
(goal <= 15 s on 2 cores) against the naive way, in the same process; optionally the demo KB's finetuning to 100%
(goal <= 5 minutes).

Usage: python bench/bench_real_model.py [--model smollm2-135m | DIR | FILE.gguf] [--kb ../shared/edu-relat]
                                        [--dtype auto|bfloat16] [--no-baseline] [--finetune-demo]
                                        [--check-generate [--damage STEPS]]

The naive probe is what dukb did before: every prompt generates the full 10 tokens, prompts batched by character
length, full-sequence logits in the prefill, plus the answer log-prob pass. Both judge the answer line of the
continuation; the known/unknown decisions are compared. Prints a markdown table with the command line.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--kb", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "edu-relat"))
    ap.add_argument("--finetune-demo", action="store_true", help="also time `finetune` of the demo KB to 100%%")
    ap.add_argument("--dtype", default="auto", help="model dtype (auto = fp32 on CPU; bfloat16)")
    ap.add_argument("--no-baseline", action="store_true", help="skip the naive probe")
    ap.add_argument(
        "--check-generate",
        action="store_true",
        help="compare every known/unknown decision with naive one-prompt HF `generate` (greedy, 10 "
        "tokens, no padding); with --damage the model first gets GA steps, so that the decisions "
        "are mixed",
    )
    ap.add_argument(
        "--damage",
        type=int,
        default=0,
        help="GA steps (lr 1e-4) on the first 64 facts before --check-generate (0 = none)",
    )
    args = ap.parse_args()
    if not os.path.isdir(args.kb):
        print(f"skip: {args.kb} not found")
        return 0
    import torch

    import dukb.neural.probe as P
    from dukb.kb import load_kb
    from dukb.neural.data import kb_qa
    from dukb.neural.modelrecord import spec_for_path
    from dukb.neural.models import load_model

    print(f"Command: python {' '.join(sys.argv)} (torch threads: {torch.get_num_threads()})\n")
    rows = []
    t = time.perf_counter()
    lm = load_model(spec_for_path(args.model, device="cpu", dtype=args.dtype))
    rows.append((f"load {args.model} ({str(lm.model.dtype).removeprefix('torch.')})", time.perf_counter() - t, "", ""))
    items = kb_qa(load_kb(args.kb))
    pred = P.Predictor(lm.model, lm.tokenizer, lm.tags)
    P.probe(pred, items[:32], rouge=False, logprob=False)  # warm-up
    t = time.perf_counter()
    fast = P.probe(pred, items, rouge=False, logprob=False)
    rows.append(
        (
            f"probe {len(items)} facts: answer-line stop, token-length batches, last-position logits",
            time.perf_counter() - t,
            f"known {fast['known'].mean():.4f}",
            "<= 15 s",
        )
    )

    # the naive probe, as before: full logits, 10 tokens always, character-length order, log-prob pass
    def full_step(model, ids, mask, pos, past):
        name = P.cache_argument(model)  # transformers' current cache argument (past_key_values is deprecated)
        out = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, **{name: past})
        return out.logits[:, -1, :], (out.get("cache", past) if name == "cache" else out.past_key_values)

    if args.no_baseline:
        items_base = []
    else:
        items_base = items
    saved_step = P._step
    t = time.perf_counter()
    try:
        P._step = full_step
        outs = {}
        order = sorted(range(len(items_base)), key=lambda i: len(items[i].question))
        for k in range(0, len(order), 256):
            chunk = order[k : k + 256]
            texts = P.greedy_generate(pred, [lm.tags.prompt(items[i].question) for i in chunk], 10)
            for i, o in zip(chunk, texts):
                outs[i] = P.answer_line(o)
            P.answer_logprob(pred, [items[i] for i in chunk])
    finally:
        P._step = saved_step
    naive_s = time.perf_counter() - t
    from dukb.kb.judge import judge

    if items_base:
        naive_known = [judge(it, outs[i]) for i, it in enumerate(items)]
        same = sum(bool(a) == b for a, b in zip(fast["known"], naive_known))
        rows.append(
            (
                "baseline: full 10 tokens, full logits, char-length batches, + log-prob pass",
                naive_s,
                f"{same}/{len(items)} known/unknown decisions equal",
                "",
            )
        )

    if args.check_generate:
        rows.extend(check_generate(lm, pred, items, args.damage))

    if args.finetune_demo:
        from dukb.kb import load_kb as lk
        from dukb.neural.pipeline import finetune_kb

        with tempfile.TemporaryDirectory() as tmp:
            t = time.perf_counter()
            rec = finetune_kb(lk("demo"), spec_for_path(args.model, device="cpu"), tmp)
            rows.append(
                (
                    f"finetune the demo KB ({rec['n_items']} facts), preset {rec['preset']}",
                    time.perf_counter() - t,
                    f"accuracy {rec['accuracy']:.4f} after {rec['epochs_run']} epochs",
                    "<= 300 s",
                )
            )
    print("| measurement | seconds | result | goal |\n|---|---:|---|---|")
    for name, s, res, goal in rows:
        print(f"| {name} | {s:.2f} | {res} | {goal} |")
    return 0


def check_generate(lm, pred, items, damage: int) -> list[tuple]:
    """Every decision of dukb's probe against naive one-prompt HF ``generate`` (greedy, 10 new tokens, no padding,
    the answer line judged), optionally after ``damage`` GA steps so that known and unknown facts both occur."""
    import torch

    import dukb.neural.probe as P
    from dukb.kb.judge import judge
    from dukb.neural.methods import get_method
    from dukb.neural.methods.base import UnlearnContext

    def compare(p):
        t = time.perf_counter()
        fast = P.probe(p, items, rouge=False, logprob=False)["known"].tolist()
        t_fast = time.perf_counter() - t
        t = time.perf_counter()
        naive = []
        for it in items:
            enc = lm.tokenizer(lm.tags.prompt(it.question), return_tensors="pt", add_special_tokens=False)
            with torch.no_grad():
                out = p.model.generate(
                    **enc, max_new_tokens=10, do_sample=False, pad_token_id=lm.tokenizer.pad_token_id
                )
            text = lm.tokenizer.decode(out[0, enc["input_ids"].shape[1] :], skip_special_tokens=True)
            naive.append(bool(judge(it, P.answer_line(text))))
        t_naive = time.perf_counter() - t
        same = sum(bool(a) == b for a, b in zip(fast, naive))
        return t_fast, t_naive, same, sum(fast)

    out = []
    if damage:
        ctx = UnlearnContext(lm, items[:64], seed=0, lr=1e-4)
        for _setting, p in get_method("ga").sweep(ctx, [damage]):
            t_fast, t_naive, same, known = compare(p)
    else:
        t_fast, t_naive, same, known = compare(pred)
    label = f" after {damage} GA steps (lr 1e-4, 64 facts)" if damage else ""
    out.append((f"probe{label}", t_fast, f"known {known}/{len(items)}", ""))
    out.append(
        (f"naive one-prompt HF generate{label}", t_naive, f"{same}/{len(items)} known/unknown decisions equal", "")
    )
    return out


if __name__ == "__main__":
    sys.exit(main())
