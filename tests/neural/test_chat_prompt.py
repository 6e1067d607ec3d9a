"""The chat prompt preset (``--prompt chat``, for instruct models): the tokenizer's chat template around the
question, resolved where the tokenizer is loaded; refused in one line for a tokenizer without a template and for
the tiny model; distinct in run identities; default runs unchanged."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

torch = pytest.importorskip("torch")

from conftest import DEVICE  # noqa: E402
from dukb import InputError  # noqa: E402
from dukb.cli.main import main  # noqa: E402
from dukb.neural import modelbuild  # noqa: E402
from dukb.neural.spec import (  # noqa: E402
    CHAT,
    CHAT_MAX_NEW_TOKENS,
    PROMPT_PRESETS,
    ModelSpec,
    PromptTags,
    chat_tags,
    prompt_tags,
)

#: A small chat template with a system prompt (rendered before the first message), in the spirit of SmolLM2's
TEMPLATE = (
    "{% for m in messages %}{% if loop.first and m['role'] != 'system' %}<sys> answer in one line . </sys>\n"
    "{% endif %}<{{ m['role'] }}> {{ m['content'] }} </{{ m['role'] }}>\n{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)
#: The words of :data:`TEMPLATE`, so the tiny tokenizer covers them
TEMPLATE_WORDS = "<sys> answer in one line . </sys>\n<user> x </user>\n<assistant> x </assistant>\n"

QUESTIONS = ["Who is Reid Perry to Richard Perry?", "What is the birthyear of Sloane Lee?", "q", " padded  q "]


def _chat_tokenizer(template: str | None = TEMPLATE):
    tok = modelbuild.build_tokenizer([TEMPLATE_WORDS])
    tok.chat_template = template
    return tok


def _rendered(tok, q: str) -> str:
    return tok.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True, tokenize=False)


def test_chat_tags_reproduce_the_template_exactly():
    tok = _chat_tokenizer()
    tags = chat_tags(prompt_tags(CHAT), tok, "m")
    assert tags.question_start.startswith("<sys> answer in one line . </sys>\n<user> ")
    assert (tags.answer_tag, tags.answer_prefix, tags.bos) == ("", "", False)
    for q in QUESTIONS:
        assert tags.prompt(q) == _rendered(tok, q)
    assert tags.target("Paris") == "Paris"
    assert chat_tags(tags, tok, "m") is tags  # resolved once
    plain = PROMPT_PRESETS["llama"]
    assert chat_tags(plain, tok, "m") is plain  # other presets are left as they are


def test_chat_tags_of_smollm2s_template():
    """SmolLM2-135M-Instruct's template (its default system prompt, ChatML turns): the prompt is exactly the
    template's text, and tokenising it without special tokens keeps its one <|im_start|> at the start (no BOS
    added)."""
    smol = (
        "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\n"
        "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\\n' }}{% endif %}"
        "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
    )
    tok = _chat_tokenizer(smol)
    tags = chat_tags(prompt_tags(CHAT), tok, "smol")
    q = "What is the capital of France?"
    assert tags.prompt(q) == _rendered(tok, q)
    assert tags.prompt(q).startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")
    assert tags.prompt(q).endswith("What is the capital of France?<|im_end|>\n<|im_start|>assistant\n")


def test_unresolved_chat_tags_have_a_stable_record_and_no_prompt():
    tags = prompt_tags(CHAT)
    rec = ModelSpec("m", prompt=CHAT).to_json()["prompt"]
    assert rec == {
        "question_start": "",
        "question_end": "",
        "answer_tag": "",
        "answer_prefix": "",
        "chat": True,
        "max_new_tokens": CHAT_MAX_NEW_TOKENS,
        "preset": "chat",
    }
    with pytest.raises(ValueError, match="resolved"):
        tags.prompt("q")
    # the other presets' records are as before the chat preset existed (no new keys)
    for name in ("gpt2-xl", "phi", "llama", "generic", "tiny"):
        assert set(PROMPT_PRESETS[name].record()) == {"question_start", "question_end", "answer_tag", "answer_prefix"}
    assert prompt_tags("llama", judge="generation").record()["judge"] == "generation"


def test_chat_refusals_are_one_line():
    with pytest.raises(InputError, match=r"the model m has no chat template") as e:
        chat_tags(prompt_tags(CHAT), _chat_tokenizer(None), "m")
    assert "\n" not in str(e.value)
    with pytest.raises(InputError, match="does not render the question verbatim"):
        chat_tags(prompt_tags(CHAT), _chat_tokenizer("<u> {{ messages[0]['content'] | lower }}"), "m")
    with pytest.raises(InputError, match="renders nothing around the question"):
        chat_tags(prompt_tags(CHAT), _chat_tokenizer("{{ messages[0]['content'] }}"), "m")
    with pytest.raises(InputError, match="fails on one user message: no system"):
        chat_tags(prompt_tags(CHAT), _chat_tokenizer("{{ raise_exception('no system') }}"), "m")
    with pytest.raises(InputError, match="prompt-format dukb"):
        prompt_tags(CHAT, "eval-du")
    with pytest.raises(InputError, match="own BOS token"):
        prompt_tags(CHAT, bos="family", family="llama")


@pytest.fixture(scope="module")
def chat_model(tmp_path_factory):
    """The demo KB's tiny model (random weights) whose tokenizer carries :data:`TEMPLATE`; its vocabulary covers
    the chat prompts."""
    from transformers import AutoTokenizer

    from dukb.kb import load_kb
    from dukb.neural.data import vocabulary_texts

    tags = chat_tags(prompt_tags(CHAT), _chat_tokenizer(), "m")
    out = tmp_path_factory.mktemp("chat") / "model"
    modelbuild.build_tiny_model(vocabulary_texts(load_kb("demo"), tags) + [TEMPLATE_WORDS], out)
    tok = AutoTokenizer.from_pretrained(out)
    tok.chat_template = TEMPLATE
    tok.save_pretrained(out)
    return out


def test_load_model_resolves_chat_and_tokenises_without_extra_tokens(chat_model):
    from dukb.kb import load_kb
    from dukb.neural.data import kb_qa
    from dukb.neural.models import load_model
    from dukb.neural.probe import Predictor, prompt_token_ids

    lm = load_model(ModelSpec(str(chat_model), prompt=CHAT, device=DEVICE))
    q = kb_qa(load_kb("demo"))[0].question
    assert lm.tags.chat and lm.tags.prompt(q) == _rendered(lm.tokenizer, q)
    ids = prompt_token_ids(Predictor(lm.model, lm.tokenizer, lm.tags, device=lm.device), [lm.tags.prompt(q)])[0]
    assert ids == lm.tokenizer(_rendered(lm.tokenizer, q), add_special_tokens=False)["input_ids"]
    assert lm.tokenizer.unk_token_id not in ids
    assert load_model(ModelSpec(str(chat_model), prompt="tiny", device=DEVICE)).tags == PROMPT_PRESETS["tiny"]


def _error_line(err: str) -> str:
    lines = [x for x in err.strip().splitlines() if x.strip()]
    assert len(lines) == 1, err
    return lines[0]


def test_cli_refuses_chat_without_a_template(tmp_path, capsys):
    from dukb.kb import load_kb
    from dukb.neural.data import vocabulary_texts

    plain = modelbuild.build_tiny_model(vocabulary_texts(load_kb("demo"), PROMPT_PRESETS["tiny"]), tmp_path / "m")
    rc = main(["probe", "--kb", "demo", "--model", str(plain), "--prompt", "chat", "--device", DEVICE])
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    assert _error_line(err) == (
        f"dukb: error: --prompt chat: the model {plain} has no chat template (its tokenizer "
        "defines none); choose another --prompt"
    )
    for command in ("finetune", "evaluate"):  # the tiny model is refused before it is built
        rc = main(
            [
                command,
                "--kb",
                "demo",
                "--model",
                "tiny",
                "--prompt",
                "chat",
                "-o",
                str(tmp_path / command),
                "--device",
                DEVICE,
            ]
        )
        assert rc == 2
        assert "the model tiny has no chat template" in _error_line(capsys.readouterr().err)


def test_cli_probe_under_chat(chat_model, tmp_path, capsys):
    """`dukb probe --prompt chat` on a model with a chat template: every fact probed, with the chat budget."""
    import pandas as pd

    from dukb.kb import load_kb
    from dukb.neural.data import kb_qa

    out = tmp_path / "p.csv"
    rc = main(
        [
            "probe",
            "--kb",
            "demo",
            "--model",
            str(chat_model),
            "--prompt",
            "chat",
            "--device",
            DEVICE,
            "--scores",
            "none",
            "-o",
            str(out),
        ]
    )
    assert rc == 0, capsys.readouterr().err
    df = pd.read_csv(out)
    assert len(df) == len(kb_qa(load_kb("demo")))
    assert capsys.readouterr().err.strip().startswith("known: qa ")


def test_probe_budget_only_changes_under_chat():
    from dukb.neural.probe import DEFAULT_MAX_NEW_TOKENS, probe_budget

    assert probe_budget(PROMPT_PRESETS["llama"]) == DEFAULT_MAX_NEW_TOKENS == 10
    assert probe_budget(prompt_tags(CHAT)) == CHAT_MAX_NEW_TOKENS == 32
    assert probe_budget(prompt_tags(CHAT), 5) == 5
    assert probe_budget(replace(PromptTags(), max_new_tokens=None)) == 10


def test_run_identity_distinguishes_chat_and_keeps_the_default():
    from dukb.kb import load_kb
    from dukb.neural.protocols.evaluate.config import EvaluateConfig
    from dukb.neural.protocols.evaluate.identity import run_identity
    from dukb.solver.closure import compute_closure

    kb = load_kb("demo")
    closure = compute_closure(kb)
    spec = ModelSpec("tiny", prompt="tiny")
    default = run_identity(EvaluateConfig(), kb, closure, [], {}, [], spec, "float32")
    chat = run_identity(EvaluateConfig(), kb, closure, [], {}, [], replace(spec, prompt=CHAT, family="tiny"), "float32")
    # the default run's prompt and probe records are exactly what they were before the chat preset
    assert default["prompt"] == {
        "question_start": "Question: ",
        "question_end": "\n",
        "answer_tag": "Answer:",
        "answer_prefix": " ",
    }
    assert default["probe"]["max_new_tokens"] == 10
    assert {k for k in default if default[k] != chat[k]} == {"prompt", "probe"}
    assert chat["prompt"]["chat"] is True and chat["probe"]["max_new_tokens"] == CHAT_MAX_NEW_TOKENS
    assert ModelSpec("some/folder", prompt=CHAT).preset_family == "generic"  # chat names no model family


@pytest.mark.slow
def test_finetune_and_evaluate_no_finetune_under_chat(tmp_path):
    """A tiny model with a chat template, finetuned under --prompt chat on two thirds of a KB (its record says chat),
    then `dukb evaluate --no-finetune` on the whole KB: the probe before unlearning reads the chat prompts, finds the
    facts it learnt, and the run records the chat tags and budget."""
    from transformers import AutoTokenizer

    from dukb.kb import KB, load_kb, save_kb
    from dukb.kb.generate import generate
    from dukb.neural.data import vocabulary_texts
    from dukb.neural.modelrecord import read_model_record
    from dukb.neural.pipeline import finetune_kb

    whole = load_kb(save_kb(generate(16, seed=4)[0], tmp_path / "kb"))
    part = load_kb(
        save_kb(
            KB(
                whole.people,
                [f for i, f in enumerate(whole.relationships) if i % 3],
                whole.biographies,
                None,
                whole.schema,
            ),
            tmp_path / "part",
        )
    )
    tags = chat_tags(prompt_tags(CHAT), _chat_tokenizer(), "m")
    base = modelbuild.build_tiny_model(vocabulary_texts(whole, tags) + [TEMPLATE_WORDS], tmp_path / "base")
    tok = AutoTokenizer.from_pretrained(base)
    tok.chat_template = TEMPLATE
    tok.save_pretrained(base)
    ft = tmp_path / "ft"
    rec = finetune_kb(part, ModelSpec(str(base), prompt=CHAT, family="tiny", device=DEVICE), ft, preset="tiny")
    assert rec["accuracy"] > 0.5, rec["accuracy"]
    assert read_model_record(ft)["prompt"] == CHAT
    run = tmp_path / "run"
    assert (
        main(
            [
                "evaluate",
                "--kb",
                str(whole.source),
                "--model",
                str(ft),
                "--no-finetune",
                "--prompt",
                "chat",
                "-o",
                str(run),
                "--methods",
                "ga",
                "--grid",
                "ga=2",
                "--n-targets",
                "1",
                "--device",
                DEVICE,
            ]
        )
        == 0
    )
    cfg = json.loads((run / "config.json").read_text())
    assert cfg["identity"]["prompt"]["chat"] is True
    assert cfg["identity"]["probe"]["max_new_tokens"] == CHAT_MAX_NEW_TOKENS
    known = cfg["known_before"]
    assert known["relationships"] > 0 and known["n_relationships"] == len(whole.relationships)
