"""Probing: which KB facts does a model still know?

Batched greedy generation with left padding and a KV cache, at most 10 new tokens; a fact is known when the output
matches the item's answer by its match rule (:func:`dukb.kb.judge.judge`; open questions: ``answer.lower()`` is a
substring of ``output.lower()``, Wu et al. 2025, App. C). Also the ROUGE-L recall of the output
against the answer (rouge-score; MUSE's KnowMem uses ROUGE-L) and the length-normalised log-probability of the gold
answer (mean log-probability per answer token, natural log).

A :class:`Predictor` is what gets probed: a model, or a model with a logits transform such as WHP's
``base - alpha * relu(reinforced - base)`` (Eq. 3), applied identically in generation and in scoring.
"""

from __future__ import annotations

import contextlib
import inspect
import re
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field

import torch  # noqa: TID253 (a model module: reached only through a command's lazy import)
from rich.progress import Progress

from dukb.kb.judge import judge
from dukb.neural.data import QAItem, bos_ids, encode_qa, model_device
from dukb.neural.scoring import forward_logits, sequence_logprob

#: The probe's generation budget (tokens), the paper's; under the chat preset the tags' own
#: (:data:`dukb.neural.spec.CHAT_MAX_NEW_TOKENS`, :func:`probe_budget`).
DEFAULT_MAX_NEW_TOKENS = 10


def probe_budget(tags, max_new_tokens: int | None = None) -> int:
    """The generation budget of a probe: ``max_new_tokens`` when given, else the tags' own default
    (``tags.max_new_tokens``: the chat preset's :data:`dukb.neural.spec.CHAT_MAX_NEW_TOKENS`), else
    :data:`DEFAULT_MAX_NEW_TOKENS` (10, the paper's)."""
    if max_new_tokens is not None:
        return max_new_tokens
    return getattr(tags, "max_new_tokens", None) or DEFAULT_MAX_NEW_TOKENS


#: the probe backend :func:`probe` hands its generations to (None: this process's HF model; set by
#: :func:`use_backend`, e.g. :class:`dukb.neural.vllm_backend.VllmBackend` under ``--probe-backend vllm``)
_BACKEND: ContextVar = ContextVar("dukb_probe_backend", default=None)


@contextlib.contextmanager
def use_backend(backend):
    """Inside the block, :func:`probe` generates through ``backend`` for every predictor it serves.

    Args:
        backend: an object with ``serves(pred) -> bool`` and ``generate(pred, prompts, max_new_tokens, *,
            stop_at_newline) -> list[str]`` (:class:`dukb.neural.vllm_backend.VllmBackend`), or None (the HF path).
    """
    token = _BACKEND.set(backend)
    try:
        yield backend
    finally:
        _BACKEND.reset(token)


@dataclass
class Predictor:
    """A model as seen by probing.

    Attributes:
        model: the causal LM (eval mode).
        tokenizer: its tokenizer.
        tags: :class:`dukb.neural.spec.PromptTags`.
        aux_model: optional second model run in lockstep (WHP's reinforced model).
        combine: ``combine(base_logits, aux_logits) -> logits`` when aux_model is set.
        device: torch device string the batches are built on; None (the default) takes the device of the model's
            first parameter (``"cpu"`` for a model without parameters), so a predictor of a model on a GPU
            never feeds it CPU batches.
        meta: free-form notes of the caller.
        all_done: optional ``all_done(flag) -> bool``: whether every process has finished its batch, given this
            process's ``flag`` (:func:`dukb.neural.distributed.all_true`). Set for a sharded (FSDP) model, whose
            forward is a collective: decoding goes on in lockstep until every process is done.
        judge_prompt: :func:`probe` judges the prompt's text followed by the continuation, not the continuation
            alone (Eval-DU's WHP evaluation decodes the whole sequence, evaluate_util.py:23-26; set by
            :class:`dukb.neural.methods.whp.WHP` under the "generation" judge).
        hf_only: :func:`probe` generates with this process's model even inside :func:`use_backend` (finetuning's
            early-stopping probe).
    """

    model: object
    tokenizer: object
    tags: object
    aux_model: object | None = None
    combine: Callable | None = None
    device: str | None = None
    meta: dict = field(default_factory=dict)
    all_done: Callable | None = None
    judge_prompt: bool = False
    hf_only: bool = False

    def __post_init__(self):
        if self.device is None:
            self.device = model_device(self.model)

    def logits(self, batch):
        """Next-token logits [B, L, V] of the (possibly combined) predictor on an encode_qa batch."""

        base = forward_logits(self.model, batch)
        if self.aux_model is None:
            return base
        return self.combine(base, forward_logits(self.aux_model, batch))


def cache_argument(model) -> str:
    """The name under which ``model.forward`` takes its KV cache: ``"cache"`` (transformers >= 5.2x, where
    ``past_key_values`` is deprecated, FutureWarning, and removed in 5.40) or ``"past_key_values"`` (older
    transformers, and models whose forward only knows that name). A peft wrapper is looked through to the model
    it wraps; cached on the model's class.

    Args:
        model: a causal LM (a transformers model, a peft model, or any module with such a forward).

    Returns:
        ``"cache"`` or ``"past_key_values"``.
    """

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    cls = type(base)
    name = _CACHE_ARG.get(cls)
    if name is None:
        try:
            params = inspect.signature(base.forward).parameters
        except (TypeError, ValueError):  # pragma: no cover - a forward without a signature
            params = {}
        name = "cache" if "cache" in params else "past_key_values"
        _CACHE_ARG[cls] = name
    return name


_CACHE_ARG: dict[type, str] = {}


def new_cache(model):
    """An empty KV cache for ``model``: transformers' ``DynamicCache`` built from the model's config (its layer
    types), or None (the model makes its own) when this transformers or model has none."""
    if cache_argument(model) != "cache":
        return None
    try:
        from transformers import DynamicCache
    except ImportError:  # pragma: no cover - transformers without the Cache API
        return None
    config = getattr(model, "config", None)
    try:
        return DynamicCache(config=config) if config is not None else DynamicCache()
    except (TypeError, ValueError, AttributeError):  # a config DynamicCache cannot read: the model's own cache
        return None


def _step(model, ids, mask, pos, past):
    """One forward pass with the KV cache ``past`` (a transformers ``Cache``, filled in place; for a model whose
    forward only knows ``past_key_values``, whatever it returned last). Only the last position's logits are
    computed (``logits_to_keep=1``): in the prefill of a batch of prompts the full [B, L, V] logits would dominate
    time and memory for large vocabularies.

    Returns:
        (logits [B, V] of the last position, the cache to pass to the next step).
    """
    name = cache_argument(model)
    kw = {"input_ids": ids, "attention_mask": mask, "position_ids": pos, name: past, "use_cache": True}
    try:
        out = model(**kw, logits_to_keep=1)
    except TypeError:  # a model whose forward has no logits_to_keep
        out = model(**kw)
    if name == "cache":
        returned = out.get("cache") if hasattr(out, "get") else getattr(out, "cache", None)
        return out.logits[:, -1, :], returned if returned is not None else past
    return out.logits[:, -1, :], out.past_key_values


def line_tables(tokenizer):
    """Per-token tables that pre-select where an answer line may end, cached on the tokenizer.

    Each token is decoded alone with special tokens skipped (so a special token, which the final decode drops,
    flags nothing). :func:`greedy_generate` confirms every pre-selected stop by decoding the row, so the tables
    only need to over-approximate: a line break is always a whole character of one token.

    Args:
        tokenizer: an HF tokenizer.

    Returns:
        ``(has_newline, has_content, content_then_newline)``: bool tensors [V] (V = the largest token id + 1): the
        token's text contains "\n"; contains a non-whitespace character; has a non-whitespace character followed
        later by "\n".
    """

    cached = getattr(tokenizer, "_dukb_line_tables", None)
    if cached is not None:
        return cached
    n = max(len(tokenizer), max(tokenizer.get_vocab().values()) + 1)
    texts = tokenizer.batch_decode(
        [[i] for i in range(n)], skip_special_tokens=True, clean_up_tokenization_spaces=False
    )
    nl = torch.tensor(["\n" in t for t in texts])
    content = torch.tensor([bool(t.strip()) for t in texts])
    ends = torch.tensor([bool(t.split("\n", 1)[0].strip()) and "\n" in t for t in texts])
    tables = (nl, content, ends)
    try:
        tokenizer._dukb_line_tables = tables
    except AttributeError:  # pragma: no cover - a tokenizer that refuses attributes: recompute each time
        pass
    return tables


_LINE_END = re.compile(r"\S[^\n]*\n")


def _line_ended(tok, ids: list[int], pad: int) -> bool:
    """Whether the decoded continuation ``ids`` already holds a non-blank line and its line break."""
    return bool(_LINE_END.search(tok.decode([t for t in ids if t != pad], skip_special_tokens=True)))


def answer_line(text: str) -> str:
    """The answer line of a continuation: its first line with a non-whitespace character, without the line break
    ("" when there is none). ``"\n father\nQuestion: ..."`` -> ``" father"``."""
    for line in text.split("\n"):
        if line.strip():
            return line
    return ""


def greedy_generate(
    pred: Predictor,
    prompts: list[str] | None,
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
    *,
    temperature: float = 0.0,
    seed: int = 0,
    stop_at_newline: bool = False,
    token_ids: list[list[int]] | None = None,
    details: bool = False,
) -> list:
    """Greedy decoding (or sampling) of a batch of prompts with left padding and a KV cache (one per model).

    Args:
        pred: the :class:`Predictor`.
        prompts: B prompt strings (already wrapped in prompt tags).
        max_new_tokens: at most this many tokens per prompt.
        temperature: 0 = greedy (the paper's probing); > 0 = sampling from softmax(logits / temperature) with a CPU
            torch generator seeded with ``seed`` (RESTOR's M generations).
        stop_at_newline: a prompt is finished at the end of its answer line (a line break after a non-blank
            text) as well as at EOS, and its continuation is cut to :func:`answer_line`. Greedy decoding is
            causal, so this gives exactly the answer line of the full ``max_new_tokens`` continuation, in fewer
            steps.
        token_ids: B prompts given as token ids instead of ``prompts`` (left-padded here; the PS
            metrics of Wang et al. 2024 continue a prompt cut inside its answer, which must not be re-tokenised).
        details: return a dict per prompt instead of its text: ``text``, ``ids`` (the generated token ids up to
            EOS, EOS and padding excluded), ``logprobs`` (each one's natural-log probability under the predictor's
            next-token distribution, the logits after WHP's transform) and ``logprob`` (their sum).

    Returns:
        B decoded continuations (special tokens removed), or B dicts with ``details``.

    Raises:
        ValueError: the tokenizer pads on the right (string prompts), or ``token_ids`` is empty.
    """

    tok = pred.tokenizer
    ids, mask = _left_padded(pred, prompts, token_ids)
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    eos = tok.eos_token_id
    pad = tok.pad_token_id if tok.pad_token_id is not None else (eos or 0)
    gen = torch.Generator(device="cpu").manual_seed(seed) if temperature > 0 else None
    if stop_at_newline:
        nl, content, ends = line_tables(tok)
        seen_content = torch.zeros(ids.shape[0], dtype=torch.bool)
    with torch.no_grad():
        logits, past = _step(pred.model, ids, mask, pos, new_cache(pred.model))
        aux_past = None
        if pred.aux_model is not None:
            aux_logits, aux_past = _step(pred.aux_model, ids, mask, pos, new_cache(pred.aux_model))
        done = torch.zeros(ids.shape[0], dtype=torch.bool, device=ids.device)
        out, lps = [], []
        for _ in range(max_new_tokens):
            step_logits = logits if pred.aux_model is None else pred.combine(logits, aux_logits)
            nxt = _next_token(step_logits, gen, temperature, ids.device)
            if details:
                lp = torch.log_softmax(step_logits.float(), -1).gather(-1, nxt[:, None]).squeeze(-1)
                lps.append(torch.where(done, torch.zeros_like(lp), lp))
            nxt = torch.where(done, torch.full_like(nxt, pad), nxt)
            out.append(nxt)
            if eos is not None:
                done = done | (nxt == eos)
            if stop_at_newline:  # pre-select with the tables, confirm by decoding the row (exact)
                v = nxt.cpu()
                inside = v < nl.shape[0]  # ids past the tokenizer (padded embeddings) decode to nothing
                vi = torch.where(inside, v, torch.zeros_like(v))
                cand = inside & (ends[vi] | (seen_content & nl[vi])) & ~done.cpu()
                seen_content = seen_content | (inside & content[vi])
                for i in cand.nonzero().flatten().tolist():
                    if _line_ended(tok, [int(step[i]) for step in out], pad):
                        done[i] = True
            finished = bool(done.all())
            if pred.all_done(finished) if pred.all_done is not None else finished:
                break
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
            pos = pos[:, -1:] + 1
            logits, past = _step(pred.model, nxt[:, None], mask, pos, past)
            if pred.aux_model is not None:
                aux_logits, aux_past = _step(pred.aux_model, nxt[:, None], mask, pos, aux_past)
    return _decoded(tok, out, lps, ids.shape[0], pad, stop_at_newline=stop_at_newline, details=details)


def _left_padded(pred: Predictor, prompts: list[str] | None, token_ids: list[list[int]] | None):
    """The batch :func:`greedy_generate` starts from: input ids and attention mask, both ``[B, T]``, left-padded.

    Args:
        pred: the :class:`Predictor` (tokenizer, device).
        prompts: B prompt strings, tokenised without special tokens (used when ``token_ids`` is None; a BOS token
            that ``pred.tags.bos`` asks for is put first).
        token_ids: B prompts as token ids, left-padded here with the pad token (eos, or 0, when there is none).

    Returns:
        ``(ids, mask)``: two long tensors on the predictor's device.

    Raises:
        ValueError: the tokenizer pads on the right (string prompts), or ``token_ids`` is empty.
        InputError: ``pred.tags.bos`` and the tokenizer has no BOS token (:func:`dukb.neural.data.bos_ids`).
    """
    tok = pred.tokenizer
    first = bos_ids(tok, pred.tags) if prompts is not None and token_ids is None else []
    if first:  # a BOS token starts every prompt (Eval-DU's Llama models): left-padded as token ids
        token_ids = prompt_token_ids(pred, prompts)
    if token_ids is not None:
        pad0 = tok.pad_token_id if tok.pad_token_id is not None else (tok.eos_token_id or 0)
        width = max(len(r) for r in token_ids)
        ids = torch.tensor([[pad0] * (width - len(r)) + list(r) for r in token_ids], device=pred.device)
        mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in token_ids], device=pred.device)
        return ids, mask
    if tok.padding_side != "left":  # re-pad on the left
        raise ValueError("the tokenizer must pad on the left for batched generation")
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    return enc["input_ids"].to(pred.device), enc["attention_mask"].to(pred.device)


def prompt_token_ids(pred: Predictor, prompts: list[str]) -> list[list[int]]:
    """The token ids :func:`greedy_generate` feeds for ``prompts`` (before padding): each prompt tokenised without
    special tokens, the BOS token first where ``pred.tags.bos`` asks for it (:func:`dukb.neural.data.bos_ids`).

    Args:
        pred: the :class:`Predictor` (tokenizer, prompt tags); prompts: B prompt strings.

    Returns:
        B lists of token ids.

    Raises:
        InputError: ``pred.tags.bos`` and the tokenizer has no BOS token.
    """
    first = bos_ids(pred.tokenizer, pred.tags)
    return [first + list(r) for r in pred.tokenizer(prompts, add_special_tokens=False)["input_ids"]]


def decode_rows(tok, rows: list[list[int]], *, stop_at_newline: bool) -> list[str]:
    """Decode generated token ids exactly as :func:`greedy_generate` does: each row cut at its first EOS, the pad
    id dropped, decoded skipping special tokens, cut to :func:`answer_line` with ``stop_at_newline`` (how another
    backend's generations reach the same text; :class:`dukb.neural.vllm_backend.VllmBackend`).

    Args:
        tok: the HF tokenizer; rows: B lists of generated ids (any lengths).
        stop_at_newline: keep the answer line only.

    Returns:
        B strings.
    """
    eos = tok.eos_token_id
    pad = tok.pad_token_id if tok.pad_token_id is not None else (eos or 0)
    width = max((len(r) for r in rows), default=0)
    steps = [torch.tensor([r[i] if i < len(r) else pad for r in rows], dtype=torch.long) for i in range(width)]
    return _decoded(tok, steps, [], len(rows), pad, stop_at_newline=stop_at_newline, details=False)


def _next_token(
    step_logits: torch.Tensor, gen: torch.Generator | None, temperature: float, device: torch.device
) -> torch.Tensor:
    """The next token of each row: the argmax of ``step_logits`` ``[B, V]`` (greedy, ``gen`` None), else a draw
    from softmax(logits / temperature) on the CPU with ``gen``, moved to ``device`` (the batch's). Returns ``[B]``
    token ids."""
    if gen is None:
        return step_logits.argmax(-1)
    probs = torch.softmax(step_logits.float().cpu() / temperature, -1)
    return torch.multinomial(probs, 1, generator=gen).squeeze(-1).to(device)


def _decoded(
    tok,
    out: list[torch.Tensor],
    lps: list[torch.Tensor],
    n_rows: int,
    pad: int,
    *,
    stop_at_newline: bool,
    details: bool,
) -> list:
    """Decode :func:`greedy_generate`'s steps into its result (its Returns section).

    Args:
        tok: the tokenizer.
        out: one ``[B]`` tensor of token ids per generation step.
        lps: one ``[B]`` tensor of log-probabilities per step (empty unless ``details``).
        n_rows: B (the result's length when no step was taken).
        pad: the pad id (left out of the continuation); each row is cut at its first EOS.
        stop_at_newline: cut each text to its answer line (:func:`answer_line`).
        details: return dicts (text, ids, logprobs, logprob) instead of texts.
    """
    eos = tok.eos_token_id
    rows = torch.stack(out, dim=1).tolist() if out else [[] for _ in range(n_rows)]
    lp_rows = torch.stack(lps, dim=1).tolist() if lps else [[] for _ in rows]
    texts = []
    for row, lp_row in zip(rows, lp_rows):
        n = row.index(eos) if eos is not None and eos in row else len(row)
        pairs = [(t, lp) for t, lp in zip(row[:n], lp_row[:n] if lp_row else [0.0] * n) if t != pad]
        kept = [t for t, _ in pairs]
        text = tok.decode(kept, skip_special_tokens=True)
        text = answer_line(text) if stop_at_newline else text
        texts.append(
            {
                "text": text,
                "ids": kept,
                "logprobs": [float(lp) for _, lp in pairs],
                "logprob": float(sum(lp for _, lp in pairs)),
            }
            if details
            else text
        )
    return texts


def answer_logprob(pred: Predictor, items: list[QAItem]) -> list[float]:
    """Length-normalised log-probability (mean natural-log probability per answer token, EOS excluded) of each
    item's gold answer after its prompt, under the predictor (WHP transform included).

    One teacher-forced forward pass over all items together (no gradients): the answer is tokenised as
    ``tags.target(answer)`` after ``tags.prompt(question)`` (:func:`dukb.neural.data.encode_qa`); a
    :data:`dukb.neural.data.TEXT_KIND` item scores every token of its text.

    Args:
        pred: the :class:`Predictor` (its tokenizer, prompt tags and device are used).
        items: the B QA items to score, in one batch (the caller splits large sets).

    Returns:
        B floats, in ``items`` order: mean log-probability per scored token in nats (<= 0); 0.0 for an item with no
        scored token.

    Raises:
        InputError: ``items`` is empty (:func:`dukb.neural.data.pad_rows`).

    Source: Wu et al. 2025, App. C (answer likelihood); Maini et al. 2024 (TOFU's length-normalised probability).
    """

    batch = encode_qa(pred.tokenizer, pred.tags, items, pred.device)
    eos = pred.tokenizer.eos_token_id
    if eos is not None:  # score the answer text only, not the closing EOS
        lab = batch["labels"]
        lab = torch.where(lab == eos, torch.full_like(lab, -100), lab)
        batch["labels"] = lab
    with torch.no_grad():
        s, n = sequence_logprob(pred.logits(batch), batch["labels"])
    return (s / n.clamp(min=1)).tolist()


_ROUGE = None


def rouge_l_recall(answer: str, output: str) -> float:
    """ROUGE-L recall of ``output`` against ``answer`` in [0, 1] (rouge-score, with stemming).

    Recall = LCS(answer tokens, output tokens) / number of answer tokens, with rouge-score's tokens: lower-cased,
    every character outside ``[a-z0-9]`` a separator (so non-ASCII letters are dropped), words of more than 3
    characters Porter-stemmed.

    Args:
        answer: the reference (gold answer) text.
        output: the model's output text.

    Returns:
        The recall in [0, 1]; 0.0 when either text has no token.

    Raises:
        ImportError: the ``rouge-score`` package is not installed (first call).

    Source: Lin 2004 (ROUGE-L); as used by RWKU (Jin et al. 2024, Sec. 3.3) and PS-similar (Wang et al. 2024,
    Eq. 5).
    """
    global _ROUGE
    if _ROUGE is None:
        from rouge_score import rouge_scorer

        _ROUGE = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    return _ROUGE.score(answer, output)["rougeL"].recall


#: the columns of :func:`probe`'s table
PROBE_COLUMNS = ["kind", "fact_kind", "fact_id", "question", "answer", "output", "known", "rouge_l", "logprob"]


def _row(
    it: QAItem, prompt: str, out: str | None, lp: float | None, judge_prompt: bool, generate: bool, rouge: bool
) -> dict:
    """One row of :func:`probe`'s table: the item, its output judged by its match rule (after the prompt's text
    with ``judge_prompt``), its ROUGE-L recall and log-probability."""
    judged = prompt + out if generate and judge_prompt else out
    return {
        "kind": it.kind,
        "fact_kind": it.fact_kind,
        "fact_id": it.fact_id,
        "question": it.question,
        "answer": it.answer,
        "output": out,
        "known": judge(it, judged) if generate else None,
        "rouge_l": rouge_l_recall(it.answer, out) if rouge else None,
        "logprob": lp,
    }


def _served(
    pred: Predictor, prompts: list[str], order: list[int], max_new_tokens: int, stop_at_newline: bool
) -> dict[int, str] | None:
    """The generations of the probe backend set by :func:`use_backend`, in one call for every prompt: prompt index
    -> output; None when there is none, ``pred.hf_only`` is set or the backend does not serve ``pred``."""
    backend = _BACKEND.get()
    if backend is None or pred.hf_only or not backend.serves(pred):
        return None
    outs = backend.generate(pred, [prompts[i] for i in order], max_new_tokens, stop_at_newline=stop_at_newline)
    return dict(zip(order, outs))


def _probe_chunks(
    pred: Predictor,
    items: list[QAItem],
    prompts: list[str],
    chunks: list[list[int]],
    served: dict[int, str] | None,
    max_new_tokens: int,
    stop_at_newline: bool,
    generate: bool,
    logprob: bool,
    bar: Progress | None,
) -> dict[int, tuple[str | None, float | None]]:
    """:func:`probe`'s passes over its batches: item index -> (output, log-probability), each None where that pass
    was not asked for; the generations from ``served`` (a backend's, :func:`_served`) where given, else greedy
    decoding of each batch. ``bar`` (a started rich progress) advances by batch."""
    task = bar.add_task("probing", total=len(items)) if bar is not None else None
    results: dict[int, tuple[str | None, float | None]] = {}
    for chunk in chunks:
        sub = [items[i] for i in chunk]
        if served is not None:  # the backend's generations (it batches by itself)
            outs = [served[i] for i in chunk]
        elif generate:
            outs = greedy_generate(pred, [prompts[i] for i in chunk], max_new_tokens, stop_at_newline=stop_at_newline)
        else:
            outs = [None] * len(sub)
        lps = answer_logprob(pred, sub) if logprob else [None] * len(sub)
        for i, o, lp in zip(chunk, outs, lps):
            results[i] = (o, lp)
        if bar is not None:
            bar.advance(task, len(chunk))
    return results


def probe(
    pred: Predictor,
    items: list[QAItem],
    batch_size: int = 256,
    max_new_tokens: int | None = None,
    progress: bool = False,
    *,
    generate: bool = True,
    rouge: bool = True,
    logprob: bool = True,
    stop_at_newline: bool | None = None,
):
    """Probe a predictor on QA items, computing only the passes asked for.

    Prompts are batched in order of their token length (less padding). Under dukb's judge (``pred.tags.judge``
    "line") the judged output is the answer line: generation stops at EOS or at the end of the first non-blank line
    (:func:`greedy_generate`), at most ``max_new_tokens`` tokens; a finetuned model answers on one line, so this cuts
    the paper's 10-token budget without changing what it reads as the answer, and a model that runs on into a
    second line (e.g. the next "Question: ...") is not credited with what it says there. Under "generation" the
    whole continuation of ``max_new_tokens`` tokens (up to EOS) is judged, as Eval-DU's code does
    (evaluate_util.py:8-11), and for a predictor with ``judge_prompt`` (WHP) the prompt's text followed by it
    (evaluate_util.py:23-26); the ``output`` column holds the continuation. Inside :func:`use_backend`
    (``--probe-backend vllm``) the generations of a predictor the backend serves come from it, in one call for every
    prompt, with the same prompts, budget and post-processing, and are judged by the same rule.

    Args:
        pred: the :class:`Predictor`.
        items: QA items (any probe kinds).
        batch_size: prompts per forward pass.
        max_new_tokens: generation budget (tokens); None (the default): :func:`probe_budget` (10, the paper's;
            32 under the chat preset).
        stop_at_newline: judge the answer line only; False = the whole continuation (the paper's code); None (the
            default): as ``pred.tags.judge`` says ("line": True).
        progress: show a rich progress bar.
        generate: greedy generation and the known/unknown judgement (the paper's rule).
        rouge: ROUGE-L recall of each output against its answer (needs ``generate``).
        logprob: the gold answer's length-normalised log-probability (one extra forward pass).

    Returns:
        pandas DataFrame, one row per item: kind, fact_kind, fact_id, question, answer, output, known (bool),
        rouge_l (recall in [0,1]), logprob (mean log-prob per answer token); a column that was not computed holds
        None. ``df.attrs["seconds"]`` holds the wall time in seconds.

    Raises:
        ValueError: ``rouge`` without ``generate``.

    Source: Wu et al. 2025, App. C (greedy decoding, substring rule); Shi et al. 2024 (ROUGE-L).
    """
    import pandas as pd

    if rouge and not generate:
        raise ValueError("ROUGE-L needs the generated outputs (generate=True)")
    t0 = time.perf_counter()
    if stop_at_newline is None:
        stop_at_newline = getattr(pred.tags, "judge", "line") == "line"
    max_new_tokens = probe_budget(pred.tags, max_new_tokens)
    prompts = [pred.tags.prompt(it.question) for it in items]
    lengths = [len(x) for x in pred.tokenizer(prompts, add_special_tokens=False)["input_ids"]] if prompts else []
    order = sorted(range(len(items)), key=lambda i: lengths[i])  # similar lengths batch well (less padding)
    chunks = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    served = _served(pred, prompts, order, max_new_tokens, stop_at_newline) if generate else None
    bar = Progress(transient=True) if progress else None
    if bar is not None:
        bar.start()
    try:
        results = _probe_chunks(
            pred, items, prompts, chunks, served, max_new_tokens, stop_at_newline, generate, logprob, bar
        )
    finally:
        if bar is not None:
            bar.stop()
    df = pd.DataFrame(
        [_row(it, prompts[i], *results[i], pred.judge_prompt, generate, rouge) for i, it in enumerate(items)],
        columns=PROBE_COLUMNS,
    )
    df.attrs["seconds"] = time.perf_counter() - t0
    return df
