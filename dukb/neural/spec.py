"""Model specifications: which model, which prompt tags, dtype, device and optional LoRA.

Prompt tags follow the paper's finetuning/probing format (Wu et al. 2025, App. C/H): a question is wrapped as
``question_start + q + question_end`` and the answer follows ``answer_tag``. Presets:

- ``gpt2-xl``: "Question: {q}\\n Answer:"; ``phi``: "Question: {q}\\nAnswer: "; ``llama``: "Question: {q}\\nAnswer:"
  (Wu et al. 2025, Sec. 4.1 and App. C.1, the finetuning prompt); ``generic`` = the llama form; ``tiny`` = the llama form.

``chat`` (for instruct models): the prompt is the tokenizer's chat template applied to one user message holding
the question, with the generation prompt; the answer is the assistant's content. It is resolved where the tokenizer
is loaded (:func:`chat_tags`), into ordinary tags around the question.

``prompt_format="eval-du"`` reads the same presets as Eval-DU's released code does (:data:`EVAL_DU_PROMPTS`), with
its BOS rule (:func:`adds_bos`) and its judge over the whole generation (:class:`PromptTags` ``judge``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from dukb import InputError
from dukb.neural.families import FAMILIES, detect_family

#: ``prompt_format`` values: dukb's prompts (:data:`PROMPT_PRESETS`) or Eval-DU's code's (:data:`EVAL_DU_PROMPTS`)
PROMPT_FORMATS = ("dukb", "eval-du")
#: ``bos`` rules: never add a BOS token (dukb), or where Eval-DU's code gets one from its tokenizer (:data:`BOS_FAMILIES`)
BOS_RULES = ("never", "family")
#: ``judge`` values: the answer line of the continuation (dukb), or the whole continuation (Eval-DU's code)
JUDGES = ("line", "generation")
#: The model families whose tokenizer adds a BOS token in Eval-DU's code: it tokenises with
#: ``add_special_tokens=True`` (data_module.py:14-19; vLLM's default in evaluate_util.py:9), which prepends ``<s>`` /
#: ``<|begin_of_text|>`` for Llama-2 and Llama-3 (config/model_config.yaml) and nothing for GPT2-XL and Phi-1.5.
BOS_FAMILIES = ("llama",)


@dataclass(frozen=True)
class PromptTags:
    """How a question is turned into a prompt, where the answer starts, and how the continuation is read.

    ``prompt(q) = question_start + q + question_end + answer_tag``; the model's continuation is its answer. During
    finetuning the answer is appended with ``answer_prefix`` (a space where the tag does not end in one).

    The last three fields are Eval-DU's code's choices (Wu et al. 2025; :data:`EVAL_DU_PROMPTS`), off by default:

    - ``bos``: a BOS token starts every prompt and training text (:func:`dukb.neural.data.bos_ids`);
    - ``joint``: a training text is tokenised as one string, its first ``len(tokens(prompt))`` tokens masked, as
      Eval-DU's data_module.py:11-39 does (dukb: prompt and answer tokenised apart);
    - ``judge``: ``"line"`` (dukb) judges the first non-blank line of the continuation, ``"generation"`` the whole
      continuation of max-new-tokens tokens (evaluate_util.py:8-11; :func:`dukb.neural.probe.probe`).

    The chat preset (:data:`CHAT`) sets ``chat`` and a larger probe budget ``max_new_tokens``
    (:data:`CHAT_MAX_NEW_TOKENS`; None: :data:`dukb.neural.probe.DEFAULT_MAX_NEW_TOKENS`); its text fields are
    empty until :func:`chat_tags` fills them from the tokenizer's template.

    A run identity records :meth:`record`, which leaves these out at their defaults.
    """

    question_start: str = "Question: "
    question_end: str = "\n"
    answer_tag: str = "Answer:"
    answer_prefix: str = " "
    bos: bool = False
    joint: bool = False
    judge: str = "line"
    chat: bool = False
    max_new_tokens: int | None = None

    def record(self) -> dict:
        """The tags as a JSON-able dict for run identities and records: every field, but ``bos``, ``joint``,
        ``judge``, ``chat`` and ``max_new_tokens`` only where they differ from their defaults (so a record made
        before they existed compares equal)."""
        d = asdict(self)
        for name, default in _OPTIONAL_FIELDS:
            if d[name] == default:
                del d[name]
        return d

    def prompt(self, question: str) -> str:
        """The prompt text for a question.

        Raises:
            ValueError: chat tags not yet resolved with a tokenizer (:func:`chat_tags`; a programming error).
        """
        if self.chat and not (self.question_start or self.question_end):
            raise ValueError("the chat prompt preset is resolved with the model's tokenizer first (chat_tags)")
        return f"{self.question_start}{question}{self.question_end}{self.answer_tag}"

    def target(self, answer: str) -> str:
        """The answer text as it follows the prompt in training."""
        return f"{self.answer_prefix}{answer}"


#: :meth:`PromptTags.record` leaves these fields out at these values
_OPTIONAL_FIELDS = (("bos", False), ("joint", False), ("judge", "line"), ("chat", False), ("max_new_tokens", None))

#: The chat preset's name (instruct models): the tokenizer's chat template, resolved by :func:`chat_tags`.
CHAT = "chat"
#: The probe's default generation budget under the chat preset (tokens): an instruct model answers in a sentence
#: ("The capital of France is Paris." is 7 tokens for SmolLM2; "Lyon is located in the Auvergne-Rhône-Alpes region
#: of France." about 17), where the other presets' 10 tokens suffice for a bare answer. Generation still stops at
#: EOS (the template's end of turn) or the end of the answer line, so the budget costs only on long answers.
CHAT_MAX_NEW_TOKENS = 32

PROMPT_PRESETS: dict[str, PromptTags] = {
    "gpt2-xl": PromptTags("Question: ", "\n ", "Answer:", " "),
    "phi": PromptTags("Question: ", "\n", "Answer: ", ""),
    "llama": PromptTags("Question: ", "\n", "Answer:", " "),
    "generic": PromptTags("Question: ", "\n", "Answer:", " "),
    "tiny": PromptTags("Question: ", "\n", "Answer:", " "),
    CHAT: PromptTags("", "", "", "", chat=True, max_new_tokens=CHAT_MAX_NEW_TOKENS),
}

#: Eval-DU's code's prompts per preset (``--prompt-format eval-du``), from its config/model_config.yaml and
#: data_module.py:10-13 (training text ``question_start_tag + q + question_end_tag + answer_tag + answer``, the loss
#: on everything after ``question_start_tag + q + question_end_tag``) and evaluate_util.py:7 (probe prompt
#: ``question_start_tag + q + question_end_tag``, no answer tag). In dukb's terms the reference's answer tag is the
#: answer prefix: gpt2-xl trains on "Question: q\n Answer:father" and probes with "Question: q\n Answer:"; phi
#: trains on "Question: q\nAnswer: father" and llama on "Question: q\nAnswer:father", both probed with
#: "Question: q\n". The reference has no generic or tiny model: they get the llama form (as in
#: :data:`PROMPT_PRESETS`). Every entry tokenises its training text jointly (``joint``).
EVAL_DU_PROMPTS: dict[str, PromptTags] = {
    "gpt2-xl": PromptTags("Question: ", "\n Answer:", "", "", joint=True),
    "phi": PromptTags("Question: ", "\n", "", "Answer: ", joint=True),
    "llama": PromptTags("Question: ", "\n", "", "Answer:", joint=True),
    "generic": PromptTags("Question: ", "\n", "", "Answer:", joint=True),
    "tiny": PromptTags("Question: ", "\n", "", "Answer:", joint=True),
}


def adds_bos(rule: str, family: str | None) -> bool:
    """Whether a BOS token starts the prompts of a model of ``family`` under a ``bos`` rule (:data:`BOS_RULES`):
    never under ``"never"``; under ``"family"`` for :data:`BOS_FAMILIES` (Eval-DU's Llama models,
    config/model_config.yaml, whose tokenizers prepend BOS in data_module.py:14-19 and evaluate_util.py:9).

    Raises:
        InputError: an unknown rule.
    """
    if rule not in BOS_RULES:
        raise InputError(f"unknown --bos {rule!r} (choose from {', '.join(BOS_RULES)})")
    return rule == "family" and family in BOS_FAMILIES


def prompt_tags(
    preset: str | PromptTags,
    prompt_format: str = "dukb",
    bos: str = "never",
    family: str | None = None,
    judge: str = "line",
) -> PromptTags:
    """The :class:`PromptTags` of a prompt preset under a prompt format, BOS rule and judge.

    Args:
        preset: a preset name (:data:`PROMPT_PRESETS`) or explicit tags (used as they are under ``"dukb"``).
        prompt_format: ``"dukb"`` (:data:`PROMPT_PRESETS`) or ``"eval-du"`` (:data:`EVAL_DU_PROMPTS`).
        bos: a BOS rule (:func:`adds_bos`); family: the model family it reads.
        judge: ``"line"`` or ``"generation"`` (:class:`PromptTags`).

    Returns:
        The tags.

    Raises:
        InputError: an unknown preset, format, rule or judge; explicit tags under ``"eval-du"``; the chat preset
            under ``"eval-du"`` or with ``bos="family"`` (its template writes its own BOS token).

    Source: Wu et al. 2025, App. C/H; Eval-DU's code (config/model_config.yaml, data_module.py, evaluate_util.py).
    """
    if prompt_format not in PROMPT_FORMATS:
        raise InputError(f"unknown --prompt-format {prompt_format!r} (choose from {', '.join(PROMPT_FORMATS)})")
    if judge not in JUDGES:
        raise InputError(f"unknown --judge {judge!r} (choose from {', '.join(JUDGES)})")
    if isinstance(preset, PromptTags):
        if prompt_format != "dukb":
            raise InputError("--prompt-format eval-du needs a prompt preset, not custom prompt tags")
        base = preset
    elif preset == CHAT:
        if prompt_format != "dukb":
            raise InputError(
                f"--prompt chat reads the tokenizer's chat template: it takes --prompt-format dukb, not {prompt_format}"
            )
        if bos != "never":
            adds_bos(bos, family)  # an unknown rule is named as such
            raise InputError("--prompt chat: the chat template writes its own BOS token; use --bos never")
        return replace(PROMPT_PRESETS[CHAT], judge=judge)
    else:
        table = EVAL_DU_PROMPTS if prompt_format == "eval-du" else PROMPT_PRESETS
        try:
            base = table[preset]
        except KeyError:
            raise InputError(f"unknown prompt preset {preset!r} (choose from {', '.join(PROMPT_PRESETS)})") from None
    return replace(base, bos=adds_bos(bos, family), judge=judge)


#: The stand-in question :func:`chat_tags` renders and splits the template around (and a second one it checks with)
_SENTINELS = ("DUKBQUESTIONSENTINEL", "Who is A B to C D?")


def _render_chat(tokenizer, question: str, model: str) -> str:
    """The tokenizer's chat template applied to one user message ``question``, with the generation prompt, as text.

    Raises:
        InputError: the template fails to render (its first line named, with the model).
    """
    try:
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": question}], add_generation_prompt=True, tokenize=False
        )
    except Exception as e:  # noqa: BLE001 - jinja2 and transformers raise many kinds; one line names the model
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise InputError(
            f"--prompt chat: the chat template of the model {model} fails on one user message: {first}"
        ) from None
    if not isinstance(text, str):  # pragma: no cover - a transformers that returns a batch
        text = text[0]
    return text


def chat_tags(tags: PromptTags, tokenizer, model: str) -> PromptTags:
    """The chat preset's tags for a tokenizer: ``tags`` with ``question_start`` / ``question_end`` the text its chat
    template renders before / after the question of one user message, generation prompt included, and no answer
    tag or answer prefix; other tags (and chat tags already resolved) are returned as they are.

    So ``tags.prompt(q) == tokenizer.apply_chat_template([{"role": "user", "content": q}],
    add_generation_prompt=True, tokenize=False)``: the template's own system prompt and BOS-like tokens are part of
    ``question_start`` (dukb tokenises prompts without special tokens, so nothing is added twice). The training
    target is the assistant's content, followed by the EOS token that every preset's training text ends with
    (:func:`dukb.neural.data.encode_qa`): where the template ends a turn with the EOS token (SmolLM2, ChatML:
    ``<|im_end|>``) that is the template's finished assistant turn, up to the newline the template puts between
    turns (not trained: generation stops at EOS).

    Args:
        tags: the :class:`PromptTags` of a spec (:attr:`ModelSpec.tags`).
        tokenizer: the model's HF tokenizer (``chat_template``, ``apply_chat_template``).
        model: the model's name or path, named in errors.

    Returns:
        The resolved tags.

    Raises:
        InputError: chat tags and the tokenizer has no chat template, its template fails, does not render the
            question verbatim once, renders nothing around it, or renders text that depends on the question beyond
            the question itself.

    Source: transformers' chat templates (``apply_chat_template``); the answer line judged as for every preset
    (Wu et al. 2025, App. C).
    """
    if not tags.chat or tags.question_start or tags.question_end:
        return tags
    if not getattr(tokenizer, "chat_template", None):
        raise InputError(
            f"--prompt chat: the model {model} has no chat template (its tokenizer defines none); "
            "choose another --prompt"
        )
    marker, check = _SENTINELS
    text = _render_chat(tokenizer, marker, model)
    if text.count(marker) != 1:
        raise InputError(
            f"--prompt chat: the chat template of the model {model} does not render the question verbatim once"
        )
    start, end = text.split(marker)
    if not (start or end):
        raise InputError(f"--prompt chat: the chat template of the model {model} renders nothing around the question")
    if _render_chat(tokenizer, check, model) != start + check + end:
        raise InputError(
            f"--prompt chat: the chat template of the model {model} renders a prompt that depends on "
            "the question beyond its text"
        )
    return replace(tags, question_start=start, question_end=end, answer_tag="", answer_prefix="")


def check_chat_model(prompt, model: str) -> None:
    """Refuse the chat preset for the built-in tiny model, whose word-level tokenizer (built from the KB's texts) has
    no chat template; any other model is checked once its tokenizer is loaded (:func:`chat_tags`).

    Raises:
        InputError: ``prompt`` is :data:`CHAT` and ``model`` is ``"tiny"``.
    """
    if prompt == CHAT and str(model) == "tiny":
        raise InputError(
            "--prompt chat: the model tiny has no chat template (its tokenizer is built from the KB's "
            "words); give an instruct model, or another --prompt"
        )


def preset_for(name_or_path: str) -> str:
    """Guess the prompt preset from the last component of a model id or path: the model family's
    (:data:`dukb.neural.families.FAMILIES`; SmolLM2 is prompted like Llama), else generic."""

    return FAMILIES[detect_family(name_or_path)].prompt


@dataclass(frozen=True)
class LoraSpec:
    """LoRA adapter settings (peft): rank r, scaling alpha, dropout, target modules (None: peft's default for the
    architecture)."""

    r: int = 8
    alpha: int = 16
    dropout: float = 0.0
    target_modules: tuple[str, ...] | None = None


@dataclass(frozen=True)
class ModelSpec:
    """Which model to load and how.

    Attributes:
        name_or_path: HF hub id or a local model directory ("tiny" is resolved by the caller to a built directory).
        prompt: prompt preset name (see :data:`PROMPT_PRESETS`) or explicit :class:`PromptTags`.
        dtype: "auto" (bf16 on CUDA with bf16 support, else fp32), "float32", "bfloat16", "float16".
        device: "auto" (cuda if available), "cpu" or "cuda[:N]".
        lora: optional :class:`LoraSpec`; gradient methods then train adapters only.
        trust_remote_code: passed to transformers; off unless the user asks.
        gradient_checkpointing: enable it on the model (with LoRA, input grads are enabled too).
        family: preset family for finetuning and unlearning hyper-parameters (``tiny``, ``smollm2``, ``gpt2-xl``,
            ``phi``, ``llama``, ``generic``; :func:`dukb.neural.zoo.model_family`); None = the prompt preset's name.
        prompt_format, bos, judge: how the prompt preset is read (:func:`prompt_tags`): dukb's prompts or Eval-DU's
            code's, its BOS rule, and what is judged ("line" or "generation").
    """

    name_or_path: str
    prompt: str | PromptTags = "generic"
    dtype: str = "auto"
    device: str = "auto"
    lora: LoraSpec | None = None
    trust_remote_code: bool = False
    gradient_checkpointing: bool = False
    family: str | None = None
    extra: dict = field(default_factory=dict)
    prompt_format: str = "dukb"
    bos: str = "never"
    judge: str = "line"

    @property
    def preset_family(self) -> str:
        """The preset family: ``family`` if set, else the prompt preset's name (``generic`` for custom tags and the
        chat preset, which names no model family)."""
        if self.family:
            return self.family
        return self.prompt if isinstance(self.prompt, str) and self.prompt != CHAT else "generic"

    @property
    def tags(self) -> PromptTags:
        """The resolved :class:`PromptTags`.

        Raises:
            InputError: unknown preset name, prompt format, BOS rule or judge (:func:`prompt_tags`).
        """
        return prompt_tags(self.prompt, self.prompt_format, self.bos, self.preset_family, self.judge)

    def to_json(self) -> dict:
        """A JSON-able record of the spec (``prompt_format``, ``bos`` and ``judge`` only where not dukb's)."""
        d = asdict(self)
        for name, default in (("prompt_format", "dukb"), ("bos", "never"), ("judge", "line")):
            if d[name] == default:
                del d[name]
        d["prompt"] = self.tags.record() | {"preset": self.prompt if isinstance(self.prompt, str) else "custom"}
        return d


@dataclass
class LoadedModel:
    """A model, its tokenizer and how to prompt it.

    Attributes:
        model: a ``transformers`` causal LM (possibly a peft model), in eval mode on ``device``.
        tokenizer: its tokenizer, left padding, with a pad token.
        tags: the :class:`PromptTags`.
        spec: the :class:`ModelSpec` it came from.
        device: resolved device string.
    """

    model: object
    tokenizer: object
    tags: PromptTags
    spec: ModelSpec
    device: str
