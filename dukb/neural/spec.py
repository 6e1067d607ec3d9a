"""Model specifications: which model, which prompt tags, dtype, device and optional LoRA.

Prompt tags follow the paper's finetuning/probing format (Wu et al. 2025, App. C/H): a question is wrapped as
``question_start + q + question_end`` and the answer follows ``answer_tag``. Presets:

- ``gpt2-xl``: "Question: {q}\\n Answer:"; ``phi``: "Question: {q}\\nAnswer: "; ``llama``: "Question: {q}\\nAnswer:"
  (Wu et al. 2025, Sec. 4.1 and App. C.1, the finetuning prompt); ``generic`` = the llama form; ``tiny`` = the llama form.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from dukb import InputError


@dataclass(frozen=True)
class PromptTags:
    """How a question is turned into a prompt and where the answer starts.

    ``prompt(q) = question_start + q + question_end + answer_tag``; the model's continuation is its answer. During
    finetuning the answer is appended with ``answer_prefix`` (a space where the tag does not end in one).
    """

    question_start: str = "Question: "
    question_end: str = "\n"
    answer_tag: str = "Answer:"
    answer_prefix: str = " "

    def prompt(self, question: str) -> str:
        """The prompt text for a question."""
        return f"{self.question_start}{question}{self.question_end}{self.answer_tag}"

    def target(self, answer: str) -> str:
        """The answer text as it follows the prompt in training."""
        return f"{self.answer_prefix}{answer}"


PROMPT_PRESETS: dict[str, PromptTags] = {
    "gpt2-xl": PromptTags("Question: ", "\n ", "Answer:", " "),
    "phi": PromptTags("Question: ", "\n", "Answer: ", ""),
    "llama": PromptTags("Question: ", "\n", "Answer:", " "),
    "generic": PromptTags("Question: ", "\n", "Answer:", " "),
    "tiny": PromptTags("Question: ", "\n", "Answer:", " "),
}


def preset_for(name_or_path: str) -> str:
    """Guess the prompt preset from the last component of a model id or path: the model family's
    (:data:`dukb.neural.families.FAMILIES`; SmolLM2 is prompted like Llama), else generic."""
    from dukb.neural.families import FAMILIES, detect_family

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

    @property
    def preset_family(self) -> str:
        """The preset family: ``family`` if set, else the prompt preset's name (``generic`` for custom tags)."""
        if self.family:
            return self.family
        return self.prompt if isinstance(self.prompt, str) else "generic"

    @property
    def tags(self) -> PromptTags:
        """The resolved :class:`PromptTags`.

        Raises:
            InputError: unknown preset name.
        """
        if isinstance(self.prompt, PromptTags):
            return self.prompt
        try:
            return PROMPT_PRESETS[self.prompt]
        except KeyError:
            raise InputError(f"unknown prompt preset {self.prompt!r} (choose from {', '.join(PROMPT_PRESETS)})") \
                from None

    def to_json(self) -> dict:
        """A JSON-able record of the spec."""
        d = asdict(self)
        d["prompt"] = asdict(self.tags) | {"preset": self.prompt if isinstance(self.prompt, str) else "custom"}
        return d
