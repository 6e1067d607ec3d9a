"""The vLLM probe backend (``--probe-backend vllm``): the probe's greedy generations served by a vLLM engine, judged
exactly as the Hugging Face path's.

The paper probes with vLLM (Eval-DU's ``evaluate_util.py:7-11``)::

    prompts = [question_start_tag + data[qk] + question_end_tag for data in dataset]
    sampling_params = SamplingParams(temperature=0, top_p=0.6, max_tokens=10)
    responses = model_eval.generate(prompts, sampling_params)
    outputs = [response.outputs[0].text for response in responses]

on an engine loaded from each unlearned model's saved directory (``vllm_eval.py:26``,
``LLM(curr_save_dir, tokenizer=model_id, device="auto")``) and torn down after (``vllm_eval.py:46-49``). At
temperature 0 vLLM decodes greedily, so ``top_p`` has no effect; dukb asks for ``SamplingParams(temperature=0,
max_tokens=N)`` with N the HF path's budget (:data:`dukb.neural.probe.DEFAULT_MAX_NEW_TOKENS`, 10).

The option and its refusals (no vllm package, no CUDA device) are :mod:`dukb.neural.probe_backends`. What is the
same as the HF path (:func:`dukb.neural.probe.greedy_generate`): the prompts (the probe's prompt strings,
tokenised without special tokens, the BOS token first where the prompt preset asks for it:
:func:`dukb.neural.probe.prompt_token_ids`, handed to vLLM as token ids so that vLLM's tokenizer adds nothing), the
budget, and the post-processing (the generated ids cut at the first EOS, the pad id dropped, decoded with the HF
tokenizer skipping special tokens, then the answer line under dukb's "line" judge:
:func:`dukb.neural.probe.decode_rows`); :func:`dukb.neural.probe.probe` then judges the outputs by the same rule.
What may differ: bf16 kernels (a greedy choice between two logits within bf16 rounding may flip; ``bench/gpu_check.py``
measures the agreement), and vLLM also stops at the extra stop ids of a model's ``generation_config.json`` (e.g. Llama
3's ``<|eot_id|>``), where the HF path stops at the tokenizer's EOS only.

Weights. Every probe hands the backend a :class:`dukb.neural.probe.Predictor` over the current weights:

- under ``--lora-r`` (a peft model), the engine is built once from the frozen base weights (saved under the run
  directory) with LoRA enabled, and each probe saves the current adapter to its own folder and passes it as a
  ``LoRARequest(name, int_id, path)`` with a new id, so one engine serves every setting (vLLM caches adapters by
  id: an id is never reused);
- without LoRA the weights change at every setting, so the model is saved (``save_pretrained``) and a new engine
  loaded from it whenever the weights differ from the engine's (a checksum of every tensor): that costs one save
  and one engine start per setting (for an 8B model in bf16 about 16 GB written and tens of seconds of loading),
  which can exceed the time saved on generation. LoRA is the intended use.

The engine shares the GPU with the training model: it takes :data:`GPU_MEMORY_UTILIZATION` of the GPU's memory.
Predictors combining two models (WHP's logit transform) or sharded by FSDP are probed by the HF path.

Source: Wu et al. 2025, App. C (greedy decoding, 10 new tokens, the substring rule) and the released code cited
above; vLLM (Kwon et al. 2023), its offline ``LLM.generate`` and ``LoRARequest`` APIs.
"""

from __future__ import annotations

import contextlib
import gc
import shutil
import tempfile
from pathlib import Path

import torch  # noqa: TID253 (a model module: reached only through a command's lazy import)

from dukb.neural.probe import decode_rows, prompt_token_ids, use_backend
from dukb.neural.probe_backends import lora_rank_bucket

#: the fraction of the GPU's memory a vLLM engine may take (the training model lives beside it)
GPU_MEMORY_UTILIZATION = 0.3


def weights_checksum(model) -> tuple:
    """A checksum of a model's weights: per tensor of its state dict without LoRA (:func:`_base_state_dict`, so a
    model and the same model wrapped by peft agree) its name, shape, sum and sum of absolute values (float64
    accumulation, one transfer from the device). Two checksums differ when a training step changed any tensor
    (equal sums after a real step are vanishingly unlikely).

    Args:
        model: a torch module (the base model of a peft model: its ``lora_`` tensors are left out).

    Returns:
        a hashable tuple.
    """
    names, sums = [], []
    with torch.no_grad():
        for k, t in _base_state_dict(model).items():
            names.append((k, tuple(t.shape)))
            sums.append(torch.stack([t.sum(dtype=torch.float64), t.abs().sum(dtype=torch.float64)]).cpu())
    values = torch.stack(sums).flatten().tolist() if sums else []
    return tuple(names), tuple(values)


def _base_state_dict(model) -> dict:
    """The state dict of a (possibly peft-wrapped) transformers model without its LoRA layers: ``lora_`` tensors
    dropped, peft's ``.base_layer.`` removed from the names, so it loads as the plain architecture."""
    return {k.replace(".base_layer.", "."): v for k, v in model.state_dict().items() if "lora_" not in k}


class VllmBackend:
    """A vLLM engine probing the current weights of each :class:`dukb.neural.probe.Predictor` (module docstring).

    Args:
        work_dir: a folder of its own under the run directory (created; the saved weights and adapters go there,
            removed by :meth:`close`).
        gpu_memory_utilization: the engine's share of the GPU's memory (0, 1].
        lora_rank: the run's ``--lora-r`` (0: none): every engine is built with LoRA enabled for it, so the probes
            of the model before unlearning (plain weights) and of each setting (adapters) share one engine.

    Attributes:
        engines_built: how many engines were started (one per distinct base weights and LoRA rank).
        requests: how many LoRA requests were made (each with a distinct id).
    """

    def __init__(self, work_dir, *, gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION, lora_rank: int = 0):
        self.work = Path(work_dir)
        self.work.mkdir(parents=True, exist_ok=True)
        self.gpu_memory_utilization = gpu_memory_utilization
        self.lora_rank = lora_rank
        self._llm = None
        self._key = None
        self.engines_built = 0
        self.requests = 0

    def serves(self, pred) -> bool:
        """Whether this backend can probe ``pred``: one model, not sharded (WHP's two models and an FSDP model's
        lockstep decoding stay on the HF path)."""
        return pred.aux_model is None and pred.all_done is None

    def generate(self, pred, prompts: list[str], max_new_tokens: int, *, stop_at_newline: bool) -> list[str]:
        """Greedy continuations of ``prompts`` under ``pred``'s current weights, post-processed as
        :func:`dukb.neural.probe.greedy_generate`'s.

        Args:
            pred: the :class:`dukb.neural.probe.Predictor` (a transformers or peft model; see :meth:`serves`).
            prompts: B prompt strings (wrapped in prompt tags).
            max_new_tokens: the budget (vLLM's ``max_tokens``).
            stop_at_newline: cut each continuation to its answer line (:func:`dukb.neural.probe.answer_line`).

        Returns:
            B decoded continuations, in ``prompts`` order.

        Raises:
            InputError: a LoRA rank vLLM cannot serve.
        """
        from vllm import SamplingParams

        if not prompts:
            return []
        lora = self._engine_for(pred)
        ids = prompt_token_ids(pred, prompts)
        params = SamplingParams(temperature=0, max_tokens=max_new_tokens)
        kw = {"use_tqdm": False}
        adapter_dir = None
        if lora:
            self.requests += 1
            adapter_dir = self.work / f"adapter-{self.requests}"
            pred.model.save_pretrained(str(adapter_dir))
            from vllm.lora.request import LoRARequest

            kw["lora_request"] = LoRARequest(f"dukb-{self.requests}", self.requests, str(adapter_dir))
        try:
            outs = self._llm.generate([{"prompt_token_ids": r} for r in ids], params, **kw)
        finally:
            if adapter_dir is not None:  # the engine has read it; its id is never asked for again
                shutil.rmtree(adapter_dir, ignore_errors=True)
        rows = [list(o.outputs[0].token_ids) for o in outs]
        return decode_rows(pred.tokenizer, rows, stop_at_newline=stop_at_newline)

    def _engine_for(self, pred) -> bool:
        """Make sure the engine holds ``pred``'s base weights (saving them and starting a new engine when they
        changed, or when an adapter needs LoRA the engine lacks); returns whether ``pred`` is a LoRA model (served
        through a request). Plain weights equal to a LoRA engine's base are served by it without a request."""
        model = pred.model
        lora = hasattr(model, "peft_config")
        base = model.get_base_model() if lora else model
        need = max([c.r for c in model.peft_config.values()] if lora else [0])
        checksum = weights_checksum(base)
        if self._llm is not None and self._key[0] == checksum and self._key[1] >= need:
            return lora
        rank = lora_rank_bucket(max(need, self.lora_rank)) if max(need, self.lora_rank) else 0
        self._shutdown()
        folder = self.work / f"model-{self.engines_built}"
        base.save_pretrained(str(folder), state_dict=_base_state_dict(base), safe_serialization=True)
        pred.tokenizer.save_pretrained(str(folder))
        dtype = str(next(base.parameters()).dtype).removeprefix("torch.")
        kw = {"enable_lora": True, "max_lora_rank": rank, "max_loras": 1} if rank else {}
        from vllm import LLM

        # eager: CUDA-graph capture and compilation take longer than a probe's few thousand 10-token generations
        self._llm = LLM(
            model=str(folder),
            tokenizer=str(folder),
            dtype=dtype,
            seed=0,
            enforce_eager=True,
            gpu_memory_utilization=self.gpu_memory_utilization,
            **kw,
        )
        self._key = (checksum, rank)
        self.engines_built += 1
        shutil.rmtree(folder, ignore_errors=True)  # the engine has loaded the weights: the copy is not read again
        return lora

    def _shutdown(self) -> None:
        """Tear the engine down and free its GPU memory, as Eval-DU's vllm_eval.py:46-49 does (and, for vLLM's V1
        engine, shut its engine-core process down)."""
        if self._llm is None:
            return
        core = getattr(getattr(self._llm, "llm_engine", None), "engine_core", None)
        with contextlib.suppress(Exception):  # vLLM's V1 engine runs in a process of its own: end it now
            if core is not None and hasattr(core, "shutdown"):
                core.shutdown()
        self._llm = None
        self._key = None
        with contextlib.suppress(ImportError, AttributeError, AssertionError, RuntimeError):
            from vllm.distributed.parallel_state import destroy_model_parallel

            destroy_model_parallel()
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def close(self) -> None:
        """Shut the engine down and remove the work folder."""
        self._shutdown()
        shutil.rmtree(self.work, ignore_errors=True)


@contextlib.contextmanager
def probe_backend(name: str, run_dir, lora_rank: int = 0):
    """Route the probes made inside the block through the named backend (:func:`dukb.neural.probe.use_backend`).

    Args:
        name: a ``--probe-backend`` value ("hf": nothing changes).
        run_dir: the run directory; vLLM's saved weights and adapters go to a temporary folder under
            RUN_DIR/.dukb, removed when the block ends.
        lora_rank: the run's ``--lora-r`` (:class:`VllmBackend`).

    Yields:
        the backend (None for "hf").
    """
    if name == "hf":
        yield None
        return

    root = Path(run_dir) / ".dukb"
    root.mkdir(parents=True, exist_ok=True)
    backend = VllmBackend(tempfile.mkdtemp(prefix="vllm-", dir=root), lora_rank=lora_rank)
    try:
        with use_backend(backend):
            yield backend
    finally:
        backend.close()


__all__ = ["GPU_MEMORY_UTILIZATION", "VllmBackend", "probe_backend", "weights_checksum"]
