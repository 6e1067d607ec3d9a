"""The GPU checks of issue 42 (item 9), one script a GPU session runs as it is: each part runs in its own child
process with its own time limit, so one failure (an exception, an out-of-memory, a crash) never stops the others.

Parts (``--parts``, default all):

- ``vllm``: the vLLM probe backend's decisions against the HF path's (``--probe-backend vllm`` against ``hf``) on
  the tiny model (finetuned here on a generated KB) and on SmolLM2-135M (the GGUF of ``dukb fetch-model
  smollm2-135m``, pretrained, not finetuned), each without LoRA (a model folder per engine) and under LoRA (one
  engine, a LoRA request per setting, after a few GA steps on the adapter). Reported: items, exact agreement of the
  known/unknown decisions, the number of disagreements, of differing outputs, and how many disagreements lie within
  bf16 tolerance: on the HF path's own greedy path some step's top-2 logits are at most :data:`TIE_ULPS` bf16 ulps of
  the top logit apart (2^-7 relative per ulp), where the two backends' kernels may round to either token.
- ``llama8b``: peak memory (``torch.cuda.max_memory_allocated``) and step time of full-parameter GA and NPO steps
  (dukb's :func:`dukb.neural.methods.ga.ga_loss` and :func:`dukb.neural.methods.npo.npo_logit_loss`, the reference
  code's NPO) on a randomly initialised model of Llama-3-8B's shape in bf16 (``from_config``, no weights), with
  torch's AdamW or bitsandbytes' AdamW8bit (skipped when bitsandbytes is absent), with and without gradient
  checkpointing. Optimiser states in the parameters' dtype (bf16), as dukb's training does.
- ``evaluate``: the main job, ``dukb evaluate --device cuda`` on its defaults, timed (``--quick``: 2 targets).

``--quick`` shrinks every part (fewer items, smaller batches, fewer steps). ``--dry-run`` runs nothing on a GPU: it
prints the plan and, for ``llama8b``, builds the model on torch's meta device (no memory) and reports its parameter
count and the memory its variants need at least.

Writes OUT/gpu_check.json (every part's record) and OUT/gpu_check.md (the summary tables).

Usage: python bench/gpu_check.py --out OUT [--parts vllm,llama8b,evaluate] [--quick] [--dry-run] [--budget S]
(on the lent GPU machine: bench/gpu_check.sh).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PARTS = ("vllm", "llama8b", "evaluate")
#: each part's time limit in seconds (full, quick)
LIMITS = {"vllm": (900, 240), "llama8b": (600, 180), "evaluate": (1800, 300)}
#: a decision disagreement is within bf16 tolerance when some step's top-2 logits are this many bf16 ulps apart
TIE_ULPS = 2
#: Llama-3-8B's shape (meta-llama/Meta-Llama-3-8B config.json)
LLAMA3_8B = dict(
    hidden_size=4096,
    intermediate_size=14336,
    num_hidden_layers=32,
    num_attention_heads=32,
    num_key_value_heads=8,
    vocab_size=128256,
    max_position_embeddings=8192,
    rope_theta=500000.0,
    rms_norm_eps=1e-5,
    tie_word_embeddings=False,
)
#: its parameter count (embeddings and head untied)
LLAMA3_8B_PARAMS = 8_030_261_248


# ------------------------------------------------------------------------------------------------ (a) vllm -----
def bf16_ulp(x: float) -> float:
    """One bf16 unit in the last place at magnitude ``|x|`` (8 significant bits: 2^(floor(log2|x|) - 7))."""
    return 2.0 ** (math.floor(math.log2(abs(x))) - 7) if x else 2.0**-133


def min_gap_ulps(lm, prompt_ids: list[int], gen_ids: list[int]) -> float | None:
    """The smallest top-2 logit gap, in bf16 ulps of the top logit, over the steps of a greedy generation
    (teacher-forced: one forward pass over prompt + generated ids). None without generated ids."""
    import torch

    if not gen_ids:
        return None
    ids = torch.tensor([prompt_ids + gen_ids], device=lm.device)
    with torch.no_grad():
        logits = lm.model(input_ids=ids).logits[0, len(prompt_ids) - 1 : len(prompt_ids) - 1 + len(gen_ids)].float()
    top = logits.topk(2, dim=-1).values.tolist()
    return min((a - b) / bf16_ulp(a) for a, b in top)


def compare_backends(lm, items, work: Path) -> dict:
    """Probe ``items`` with the HF path and with the vLLM backend (same predictor); the agreement record."""
    from dukb.neural.probe import Predictor, greedy_generate, probe, prompt_token_ids, use_backend
    from dukb.neural.vllm_backend import VllmBackend

    pred = Predictor(lm.model, lm.tokenizer, lm.tags, device=lm.device)
    t = time.perf_counter()
    hf = probe(pred, items, rouge=False, logprob=False)
    t_hf = time.perf_counter() - t
    backend = VllmBackend(work)
    try:
        with use_backend(backend):
            t = time.perf_counter()
            v = probe(pred, items, rouge=False, logprob=False)
            t_v = time.perf_counter() - t
    finally:
        engines, requests = backend.engines_built, backend.requests
        backend.close()
    differ = [i for i in range(len(items)) if bool(hf["known"][i]) != bool(v["known"][i])]
    examples, within = [], 0
    for i in differ:
        prompt = pred.tags.prompt(items[i].question)
        gen = greedy_generate(pred, [prompt], 10, details=True)[0]["ids"]
        gap = min_gap_ulps(lm, prompt_token_ids(pred, [prompt])[0], gen)
        within += gap is not None and gap <= TIE_ULPS
        if len(examples) < 10:
            examples.append(
                {
                    "question": items[i].question,
                    "answer": items[i].answer,
                    "hf": hf["output"][i],
                    "vllm": v["output"][i],
                    "min_gap_bf16_ulps": gap,
                }
            )
    n = len(items)
    return {
        "items": n,
        "known_hf": int(hf["known"].sum()),
        "known_vllm": int(v["known"].sum()),
        "decision_agreement": (n - len(differ)) / n if n else None,
        "disagreements": len(differ),
        "disagreements_within_bf16_tolerance": within,
        "outputs_differing": int((hf["output"] != v["output"]).sum()),
        "seconds_hf": round(t_hf, 2),
        "seconds_vllm": round(t_v, 2),
        "engines_built": engines,
        "lora_requests": requests,
        "dtype": str(next(lm.model.parameters()).dtype),
        "examples": examples,
    }


def compare_under_lora(lm, items, work: Path, settings: int = 2, steps: int = 2) -> dict:
    """LoRA (r=8) on ``lm``; ``settings`` times: ``steps`` GA steps on the adapter (lr 1e-3, the first 16 items),
    then HF against vLLM through one engine serving a LoRA request per setting."""
    import torch

    from dukb.neural.data import encode_qa
    from dukb.neural.methods.base import WeightState
    from dukb.neural.methods.ga import ga_loss
    from dukb.neural.probe import Predictor, probe, use_backend
    from dukb.neural.scoring import forward_logits
    from dukb.neural.spec import LoraSpec
    from dukb.neural.vllm_backend import VllmBackend

    state = WeightState(lm, LoraSpec(8, 16, 0.0, None), seed=0)
    backend = VllmBackend(work)
    out = {"settings": []}
    try:
        opt = torch.optim.AdamW(state.trainable(), lr=1e-3)
        batch = encode_qa(lm.tokenizer, lm.tags, items[:16], device=lm.device)
        for _ in range(settings):
            state.model.train()
            for _ in range(steps):
                opt.zero_grad(set_to_none=True)
                ga_loss(forward_logits(state.model, batch), batch["labels"]).backward()
                opt.step()
            state.model.eval()
            pred = Predictor(state.model, lm.tokenizer, lm.tags, device=lm.device)
            hf = probe(pred, items, rouge=False, logprob=False)
            with use_backend(backend):
                v = probe(pred, items, rouge=False, logprob=False)
            agree = int((hf["known"] == v["known"]).sum())
            out["settings"].append(
                {
                    "known_hf": int(hf["known"].sum()),
                    "known_vllm": int(v["known"].sum()),
                    "decision_agreement": agree / len(items),
                    "disagreements": len(items) - agree,
                    "outputs_differing": int((hf["output"] != v["output"]).sum()),
                }
            )
        out.update(items=len(items), engines_built=backend.engines_built, lora_requests=backend.requests)
    finally:
        backend.close()
        state.close()
    return out


def part_vllm(args, work: Path) -> dict:
    """(a): the tiny model and SmolLM2-135M, each without and with LoRA; each comparison guarded."""
    from dukb.neural.probe_backends import vllm_installed

    if not vllm_installed():
        return {"skipped": "vllm is not installed (pip install 'dukb[vllm]')"}
    import vllm

    from dukb.kb import load_kb, save_kb
    from dukb.kb.generate import generate
    from dukb.neural.data import kb_qa
    from dukb.neural.modelrecord import spec_for_path
    from dukb.neural.models import load_model
    from dukb.neural.pipeline import finetune_kb, load_finetuned
    from dukb.neural.spec import ModelSpec
    from dukb.neural.zoo import cached_file

    rec = {"vllm": vllm.__version__, "tie_ulps": TIE_ULPS}
    kb = load_kb(save_kb(generate(24 if args.quick else 100, seed=0)[0], work / "kb"))
    kinds = ("qa",) if args.quick else ("qa", "cloze", "reverse", "paraphrase")
    items = kb_qa(kb, kinds)
    rec["kb"] = {"people": len(kb.people), "kinds": list(kinds), "items": len(items)}

    def tiny():
        finetune_kb(kb, ModelSpec("tiny", prompt="tiny", device="cuda"), work / "tiny", seed=0)
        return load_finetuned(work / "tiny", device="cuda")

    def smol():
        path = cached_file("smollm2-135m")
        if not path.is_file():
            raise FileNotFoundError(f"{path} (run `dukb fetch-model smollm2-135m`, or carry the GGUF there)")
        return load_model(spec_for_path("smollm2-135m", device="cuda"))

    for name, load in (("tiny", tiny), ("smollm2-135m", smol)):
        try:
            lm = load()
        except Exception as e:  # noqa: BLE001 (a part's record, not a crash)
            rec[name] = {"error": _error(e)}
            continue
        rec[name] = _guarded(lambda lm=lm, name=name: compare_backends(lm, items, work / f"v-{name}"))
        rec[name + "+lora"] = _guarded(
            lambda lm=lm, name=name: compare_under_lora(
                lm, items, work / f"l-{name}", settings=2, steps=1 if args.quick else 3
            )
        )
        del lm
    return rec


# --------------------------------------------------------------------------------------------- (b) llama8b -----
def llama8b_config():
    """A ``LlamaConfig`` of Llama-3-8B's shape (:data:`LLAMA3_8B`)."""
    from transformers import LlamaConfig

    return LlamaConfig(**LLAMA3_8B)


def build_llama8b(device: str):
    """Llama-3-8B's shape, randomly initialised, bf16, on ``device`` ("meta": no memory), caching off."""
    import torch
    from transformers import AutoModelForCausalLM

    cfg = llama8b_config()
    cfg.use_cache = False
    with torch.device(device):
        try:
            model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
        except TypeError:  # transformers before the `dtype` name
            model = AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.bfloat16)
    return model


def llama8b_plan(quick: bool) -> dict:
    """The step shapes and the variants (method, optimiser, gradient checkpointing)."""
    b, length, warm, steps = (2, 128, 1, 2) if quick else (4, 256, 2, 5)
    variants = [(m, o, g) for o in ("adamw", "adamw8bit") for g in (False, True) for m in ("ga", "npo")]
    return {"batch": b, "length": length, "warmup_steps": warm, "timed_steps": steps, "variants": variants}


def part_llama8b_dry(args) -> dict:
    """The model on the meta device: parameter count and the least memory of each optimiser (weights, gradients,
    optimiser states; activations not counted)."""
    model = build_llama8b("meta")
    n = sum(p.numel() for p in model.parameters())
    gib = 2**30
    return {
        "params": n,
        "expected_params": LLAMA3_8B_PARAMS,
        "config": LLAMA3_8B,
        "plan": llama8b_plan(args.quick),
        "least_gib": {
            "adamw (bf16 states)": round(n * (2 + 2 + 4) / gib, 1),
            "adamw8bit": round(n * (2 + 2 + 2) / gib, 1),
        },
    }


def _step_loss(model, method: str, batch: dict, ref):
    """dukb's GA or NPO (logit form) loss of one forward pass."""
    from dukb.neural.methods.ga import ga_loss
    from dukb.neural.methods.npo import npo_logit_loss

    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    return ga_loss(logits, batch["labels"]) if method == "ga" else npo_logit_loss(logits, ref)


def llama8b_variant(model, method: str, optim: str, checkpointing: bool, plan: dict) -> dict:
    """One variant: fresh optimiser, peak memory from here, warm-up steps, then the timed steps."""
    import torch

    b, length = plan["batch"], plan["length"]
    g = torch.Generator(device="cpu").manual_seed(0)
    ids = torch.randint(0, LLAMA3_8B["vocab_size"], (b, length), generator=g).cuda()
    labels = ids.clone()
    labels[:, : length // 2] = -100  # the "answer" is the second half
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}
    if checkpointing:
        model.gradient_checkpointing_enable()
    else:
        model.gradient_checkpointing_disable()
    model.train()
    if optim == "adamw8bit":
        import bitsandbytes as bnb

        opt = bnb.optim.AdamW8bit(model.parameters(), lr=1e-5)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    ref = None
    if method == "npo":  # f_ref's logits, once (the reference code computes them once in forget.py)
        with torch.no_grad():
            ref = model(input_ids=ids, attention_mask=batch["attention_mask"]).logits.detach()
    times = []
    try:
        for i in range(plan["warmup_steps"] + plan["timed_steps"]):
            torch.cuda.synchronize()
            t = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            loss = _step_loss(model, method, batch, ref)
            loss.backward()
            opt.step()
            torch.cuda.synchronize()
            if i >= plan["warmup_steps"]:
                times.append(time.perf_counter() - t)
        return {
            "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
            "step_s_median": round(sorted(times)[len(times) // 2], 3),
            "loss": float(loss),
        }
    finally:
        opt.zero_grad(set_to_none=True)
        del opt
        torch.cuda.empty_cache()


def part_llama8b(args, work: Path) -> dict:
    """(b): every variant of :func:`llama8b_plan`, each guarded (an out-of-memory is one variant's record)."""
    import importlib.util

    import torch

    if args.dry_run:
        return part_llama8b_dry(args)
    plan = llama8b_plan(args.quick)
    has_bnb = importlib.util.find_spec("bitsandbytes") is not None
    t = time.perf_counter()
    model = build_llama8b("cuda")
    rec = {
        "plan": plan,
        "params": sum(p.numel() for p in model.parameters()),
        "build_s": round(time.perf_counter() - t, 1),
        "weights_gib": round(torch.cuda.memory_allocated() / 2**30, 2),
        "gpu": torch.cuda.get_device_name(),
        "variants": [],
    }
    for method, optim, ckpt in plan["variants"]:
        row = {"method": method, "optimizer": optim, "gradient_checkpointing": ckpt}
        if optim == "adamw8bit" and not has_bnb:
            row["skipped"] = "bitsandbytes is not installed"
        else:
            row.update(_guarded(lambda m=method, o=optim, c=ckpt: llama8b_variant(model, m, o, c, plan)))
        rec["variants"].append(row)
        print(json.dumps(row), flush=True)
    return rec


# -------------------------------------------------------------------------------------------- (c) evaluate -----
def part_evaluate(args, work: Path) -> dict:
    """(c): ``dukb evaluate --device cuda`` on its defaults (``--quick``: ``--n-targets 2``), timed."""
    cmd = [sys.executable, "-m", "dukb.cli.main", "evaluate", "--device", "cuda", "-o", str(work / "run")]
    if args.quick:
        cmd += ["--n-targets", "2"]
    if args.dry_run:
        return {"command": "dukb " + " ".join(cmd[3:])}
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    rec = {
        "command": "dukb " + " ".join(cmd[3:]),
        "rc": proc.returncode,
        "wall_s": round(time.perf_counter() - t, 1),
        "log_tail": (proc.stdout + proc.stderr)[-3000:],
    }
    rows, report = work / "run" / "results.jsonl", work / "run" / "report.md"
    rec["rows"] = sum(1 for _ in rows.open()) if rows.is_file() else 0
    rec["report_head"] = report.read_text()[:3000] if report.is_file() else None
    return rec


# ---------------------------------------------------------------------------------------------- the driver -----
def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:500]


def _guarded(fn) -> dict:
    """``fn()``'s record, or ``{"error": ..., "traceback": ...}`` (an out-of-memory included)."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 (each check is guarded: one failure does not stop the others)
        return {"error": _error(e), "traceback": traceback.format_exc()[-2000:]}


def run_part(name: str, args) -> dict:
    """One part in this process (the child's side of :func:`main`)."""
    work = Path(tempfile.mkdtemp(prefix=f"gpu-check-{name}-", dir=args.work))
    fn = {"vllm": part_vllm, "llama8b": part_llama8b, "evaluate": part_evaluate}[name]
    if args.dry_run and name == "vllm":
        from dukb.neural.probe_backends import vllm_installed

        return {"dry_run": True, "vllm_installed": vllm_installed(), "models": ["tiny", "smollm2-135m"]}
    t = time.perf_counter()
    rec = _guarded(lambda: fn(args, work))
    rec["part_s"] = round(time.perf_counter() - t, 1)
    return rec


def environment() -> dict:
    """Versions and the device."""
    import importlib.metadata as md

    out = {"python": sys.version.split()[0]}
    for pkg in ("torch", "transformers", "peft", "vllm", "bitsandbytes"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = None
    try:
        import torch

        out["cuda"] = torch.cuda.is_available() and torch.cuda.get_device_name()
    except ImportError:
        out["cuda"] = None
    return out


def summary_md(record: dict) -> str:
    """The markdown summary of :func:`main`'s record."""
    lines = [
        f"# GPU check ({record['when']})",
        "",
        f"Command: `{record['command']}`",
        "",
        "Environment: " + ", ".join(f"{k} {v}" for k, v in record["environment"].items()),
        "",
    ]
    v = record["parts"].get("vllm") or {}
    v_tabled = not ("error" in v or "skipped" in v or v.get("dry_run")) and bool(v)
    if v_tabled:
        lines += [
            "## vLLM backend against HF",
            "",
            f"bf16 tolerance: a disagreement is within it when some greedy "
            f"step's top-2 logits are <= {TIE_ULPS} bf16 ulps apart on the HF path.",
            "",
            "| model | items | decision agreement | disagreements | within bf16 tolerance | outputs differing | "
            "engines | LoRA requests | hf s | vllm s |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for name in ("tiny", "tiny+lora", "smollm2-135m", "smollm2-135m+lora"):
            r = v.get(name)
            if not isinstance(r, dict):
                continue
            if "error" in r:
                lines.append(f"| {name} | error: {r['error']} |" + " |" * 8)
            elif "settings" in r:
                for i, s in enumerate(r["settings"]):
                    lines.append(
                        f"| {name} setting {i + 1} | {r['items']} | {s['decision_agreement']:.4f} | "
                        f"{s['disagreements']} | – | {s['outputs_differing']} | {r['engines_built']} | "
                        f"{r['lora_requests']} | – | – |"
                    )
            else:
                lines.append(
                    f"| {name} | {r['items']} | {r['decision_agreement']:.4f} | {r['disagreements']} | "
                    f"{r['disagreements_within_bf16_tolerance']} | {r['outputs_differing']} | "
                    f"{r['engines_built']} | {r['lora_requests']} | {r['seconds_hf']} | {r['seconds_vllm']} |"
                )
        lines += ["", f"Other: {json.dumps({k: x for k, x in v.items() if not isinstance(x, dict)})}", ""]
    b = record["parts"].get("llama8b")
    if b and "variants" in b:
        lines += [
            "## Llama-3-8B shape, full-parameter steps (bf16)",
            "",
            f"params {b['params']:,}; weights {b['weights_gib']} GiB; plan {json.dumps(b['plan'])}",
            "",
            "| method | optimizer | grad. ckpt | peak GiB | step s (median) |",
            "|---|---|---|---:|---:|",
        ]
        for r in b["variants"]:
            what = r.get("skipped") or r.get("error")
            lines.append(
                f"| {r['method']} | {r['optimizer']} | {r['gradient_checkpointing']} | "
                + (f"{what} | |" if what else f"{r['peak_gib']} | {r['step_s_median']} |")
            )
        lines.append("")
    for name, r in record["parts"].items():  # what the tables above did not show, as it is
        tabled = {"vllm": v_tabled, "llama8b": "variants" in r}.get(name, False)
        if not tabled:
            lines += [f"## {name}", "", "```", json.dumps(r, indent=1, default=str)[:4000], "```", ""]
    return "\n".join(lines)


def run_child(cmd: list[str], env: dict, limit: float) -> tuple[int | None, str]:
    """Run a part's process in its own process group; at ``limit`` seconds the whole group is killed (a vLLM
    engine's or dukb's own child processes too). Returns (rc, or None when it timed out; its output)."""
    import signal

    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        out, _ = proc.communicate(timeout=limit)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return None, out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog="Parts: " + ", ".join(PARTS))
    ap.add_argument("--out", type=Path, default=Path("gpu_check_out"), help="output folder (gpu_check.json, .md)")
    ap.add_argument("--parts", default=",".join(PARTS), help="comma-separated parts to run (default: all)")
    ap.add_argument("--quick", action="store_true", help="smaller sizes and fewer steps everywhere")
    ap.add_argument("--dry-run", action="store_true", help="no GPU: the plan, and llama8b on the meta device")
    ap.add_argument("--work", type=Path, default=None, help="scratch folder (default: a temporary one)")
    ap.add_argument(
        "--budget",
        type=float,
        default=None,
        help="seconds for every part together: each part's limit is cut to what is left (default: no total limit)",
    )
    ap.add_argument("--run-part", choices=PARTS, help=argparse.SUPPRESS)  # the child's entry
    args = ap.parse_args(argv)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    bad = [p for p in parts if p not in PARTS]
    if bad:
        ap.error(f"unknown part(s) {', '.join(bad)} (choose from {', '.join(PARTS)})")
    args.out.mkdir(parents=True, exist_ok=True)
    args.work = args.work or Path(tempfile.mkdtemp(prefix="gpu-check-"))
    args.work.mkdir(parents=True, exist_ok=True)
    if args.run_part:  # a child: one part, its record as JSON on the file named by the parent
        rec = run_part(args.run_part, args)
        (args.work / f"{args.run_part}.json").write_text(json.dumps(rec, default=str))
        return 0
    record = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": "python " + " ".join([sys.argv[0], *(argv if argv is not None else sys.argv[1:])]),
        "environment": environment(),
        "parts": {},
    }
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    t0 = time.perf_counter()
    for name in parts:
        limit = LIMITS[name][1 if args.quick else 0]
        if args.budget is not None:
            limit = min(limit, args.budget - (time.perf_counter() - t0) - 5)
            if limit < 30:
                record["parts"][name] = {"skipped": "the --budget was spent"}
                continue
        cmd = (
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "--run-part",
                name,
                "--work",
                str(args.work),
                "--out",
                str(args.out),
            ]
            + (["--quick"] if args.quick else [])
            + (["--dry-run"] if args.dry_run else [])
        )
        t = time.perf_counter()
        rc, log = run_child(cmd, env, limit)
        path = args.work / f"{name}.json"
        rec = (
            json.loads(path.read_text())
            if path.is_file()
            else {
                "error": f"timed out after {limit} s"
                if rc is None
                else f"the part's process ended with rc={rc} and no record",
                "log_tail": log[-3000:],
            }
        )
        rec.setdefault("wall_s", round(time.perf_counter() - t, 1))
        record["parts"][name] = rec
        print(f"{name}: {json.dumps(rec, default=str)[:600]}", flush=True)
        (args.out / "gpu_check.json").write_text(json.dumps(record, indent=1, default=str))  # after every part
    (args.out / "gpu_check.md").write_text(summary_md(record))
    print(f"wrote {args.out / 'gpu_check.json'} and {args.out / 'gpu_check.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
