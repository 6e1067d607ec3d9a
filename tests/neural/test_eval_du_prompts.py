"""Parity of `dukb evaluate --prompt-format eval-du --bos family --judge generation` with Eval-DU's released code
(wrh14/deep_unlearning): the prompt strings and training texts per model family, the BOS rule, and the judging of
a generation (issue 41, items 1 and 5). The reference side is written here from the reference's code, independently
of dukb: config/model_config.yaml (the tags), data_module.py:9-41 (training text, question mask), evaluate_util.py
(probe prompt, 10 tokens, ``answer.lower() in output.lower()``; WHP decodes prompt and generation together)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from conftest import patch_everywhere
from dukb import InputError
from dukb.kb.probes import Probe
from dukb.neural.spec import PROMPT_PRESETS, ModelSpec, PromptTags, adds_bos, prompt_tags

# ---------------------------------------------------------------------------------------------- the reference --
#: config/model_config.yaml of wrh14/deep_unlearning: (question_start_tag, question_end_tag, answer_tag)
REF_TAGS = {
    "llama2-7b": ("Question: ", "\n", "Answer:"),
    "llama3-8b": ("Question: ", "\n", "Answer:"),
    "gpt2-xl": ("Question: ", "\n Answer:", ""),
    "phi": ("Question: ", "\n", "Answer: "),
}
#: dukb's prompt preset -> the reference's model_config entry (tiny and generic: dukb gives them the Llama form)
PRESET_TO_REF = {"llama": "llama2-7b", "gpt2-xl": "gpt2-xl", "phi": "phi", "tiny": "llama3-8b", "generic": "llama2-7b"}
#: the reference's tokenizers that prepend BOS with add_special_tokens=True (Llama-2's <s>, Llama-3's
#: <|begin_of_text|>; GPT-2's and Phi-1.5's add nothing)
REF_BOS = {"llama2-7b": True, "llama3-8b": True, "gpt2-xl": False, "phi": False}


def ref_question(entry: str, q: str) -> str:
    """data_module.py:11 ``new_question``: the masked part of a training text."""
    start, end, _ = REF_TAGS[entry]
    return start + q + end


def ref_train_text(entry: str, q: str, a: str) -> str:
    """data_module.py:11-13 ``full_text = new_question + answer_tag + answer``."""
    return ref_question(entry, q) + REF_TAGS[entry][2] + a


def ref_probe_prompt(entry: str, q: str) -> str:
    """evaluate_util.py:7 and :16 ``question_start_tag + q + question_end_tag`` (no answer tag)."""
    start, end, _ = REF_TAGS[entry]
    return start + q + end


def ref_encode(tok, entry: str, q: str, a: str, bos: bool) -> tuple[list[int], list[int]]:
    """data_module.py:14-39 without the padding: the full text tokenised at once (BOS first where the tokenizer
    adds one), labels = ids + EOS with the first len(tokenize(new_question)) positions masked."""
    first = [tok.bos_token_id] if bos else []
    ids = first + tok(ref_train_text(entry, q, a), add_special_tokens=False)["input_ids"]
    n_q = len(first) + len(tok(ref_question(entry, q), add_special_tokens=False)["input_ids"])
    labels = ids + [tok.eos_token_id]
    labels = [-100] * n_q + labels[n_q:]
    return ids + [tok.eos_token_id], labels


def ref_known_vllm(answer: str, generation: str) -> bool:
    """evaluate_util.py:11: the whole generated text (vLLM's ``outputs[0].text``, 10 tokens)."""
    return answer.lower() in generation.lower()


def ref_known_whp(answer: str, prompt: str, generation: str) -> bool:
    """evaluate_util.py:23-26: ``tokenizer.decode(outputs[0])`` holds the prompt and the generation."""
    return answer.lower() in (prompt + generation).lower()


QUESTIONS = [
    ("Who is Richard Perry to Reid Perry?", "father"),
    ("What is the birthyear of Sloane Lee?", "1908"),
    ("Where was Ann Lee born?", "Washington state"),
]


# ------------------------------------------------------------------------------------------- prompt strings --
@pytest.mark.parametrize("preset", sorted(PRESET_TO_REF))
def test_eval_du_prompt_and_training_text_per_family_equal_the_reference(preset):
    entry = PRESET_TO_REF[preset]
    tags = ModelSpec("m", prompt=preset, prompt_format="eval-du").tags
    for q, a in QUESTIONS:
        assert tags.prompt(q) == ref_probe_prompt(entry, q)  # the probe prompt, no answer tag where it has none
        assert tags.prompt(q) + tags.target(a) == ref_train_text(entry, q, a)  # answer spacing included
        assert tags.prompt(q) == ref_question(entry, q)  # the loss starts where the reference's does
    assert tags.joint and not tags.bos and tags.judge == "line"


def test_the_reference_strings_spelled_out():
    q, a = "Who is X to Y?", "father"
    strings = {
        p: (
            ModelSpec("m", prompt=p, prompt_format="eval-du").tags.prompt(q),
            ModelSpec("m", prompt=p, prompt_format="eval-du").tags.target(a),
        )
        for p in ("llama", "phi", "gpt2-xl")
    }
    assert strings == {
        "llama": ("Question: Who is X to Y?\n", "Answer:father"),
        "phi": ("Question: Who is X to Y?\n", "Answer: father"),
        "gpt2-xl": ("Question: Who is X to Y?\n Answer:", "father"),
    }


def test_dukb_default_prompts_are_unchanged():
    tags = ModelSpec("m", prompt="llama").tags
    assert tags == PROMPT_PRESETS["llama"] and (tags.prompt("q"), tags.target("father")) == (
        "Question: q\nAnswer:",
        " father",
    )
    assert tags.record() == {
        "question_start": "Question: ",
        "question_end": "\n",
        "answer_tag": "Answer:",
        "answer_prefix": " ",
    }  # the run identity's "prompt" as before the options existed
    assert ModelSpec("m", prompt="phi").tags.prompt("q") == "Question: q\nAnswer: "


def test_unknown_values_and_custom_tags_under_eval_du_are_refused():
    with pytest.raises(InputError, match="prompt-format"):
        prompt_tags("llama", "paper")
    with pytest.raises(InputError, match="judge"):
        prompt_tags("llama", judge="first")
    with pytest.raises(InputError, match="bos"):
        prompt_tags("llama", bos="always")
    with pytest.raises(InputError, match="custom prompt tags"):
        prompt_tags(PromptTags(), "eval-du")


# ----------------------------------------------------------------------------------------------- tokenising --
class PieceTokenizer:
    """A sentencepiece-like stub: a text is "▁" then one token per character, so that tokenising prompt and answer
    apart (two "▁") differs from tokenising the whole text (one), as with Llama-2's tokenizer."""

    bos_token_id, eos_token_id, pad_token_id = 1, 2, 0

    def __init__(self):
        self.vocab = {}

    def _id(self, piece):
        return self.vocab.setdefault(piece, 10 + len(self.vocab))

    def __call__(self, text, add_special_tokens=False):
        assert add_special_tokens is False
        if isinstance(text, list):
            return {"input_ids": [self(t)["input_ids"] for t in text]}
        return {"input_ids": [self._id("▁")] + [self._id(c) for c in text]}


def _tiny_tokenizer(tags_list):
    from dukb.kb import load_kb
    from dukb.neural.data import vocabulary_texts
    from dukb.neural.modelbuild import build_tokenizer

    kb = load_kb("demo")
    return build_tokenizer([t for tags in tags_list for t in vocabulary_texts(kb, tags)]), kb


@pytest.mark.parametrize("preset", ["llama", "phi", "gpt2-xl"])
@pytest.mark.parametrize("bos", ["never", "family"])
def test_encoded_training_rows_equal_the_reference_layout(preset, bos):
    from dukb.neural.data import encode_qa, kb_qa

    family = {"llama": "llama", "phi": "phi", "gpt2-xl": "gpt2-xl"}[preset]
    tags = ModelSpec("m", prompt=preset, family=family, prompt_format="eval-du", bos=bos).tags
    entry = PRESET_TO_REF[preset]
    assert tags.bos == (bos == "family" and REF_BOS[entry])
    tiny, kb = _tiny_tokenizer([tags])  # the tiny model's word-level tokenizer, built on these tags' texts
    cases = [
        (PieceTokenizer(), [Probe("qa", "relationship", i, q, a) for i, (q, a) in enumerate(QUESTIONS)]),
        (tiny, kb_qa(kb)[:4] + kb_qa(kb)[-4:]),
    ]
    for tok, items in cases:
        batch = encode_qa(tok, tags, items)
        for r, it in enumerate(items):
            ids, labels = ref_encode(tok, entry, it.question, it.answer, tags.bos)
            keep = batch["attention_mask"][r].bool()
            assert batch["input_ids"][r][keep].tolist() == ids
            assert batch["labels"][r][keep].tolist() == labels


def test_split_and_joint_tokenising_differ_on_a_sentencepiece_like_tokenizer():
    from dukb.neural.data import qa_ids

    tok = PieceTokenizer()
    joint = ModelSpec("m", prompt="llama", prompt_format="eval-du").tags
    split = PromptTags(joint.question_start, joint.question_end, joint.answer_tag, joint.answer_prefix)
    p, a = qa_ids(tok, joint, "q?", "father")
    ps, as_ = qa_ids(tok, split, "q?", "father")
    assert p == ps and a != as_ and as_[0] == tok._id("▁")  # the reference tokenises the whole text once


# ------------------------------------------------------------------------------------------------------ BOS --
@pytest.mark.parametrize(
    "family,expected",
    [("llama", True), ("gpt2-xl", False), ("phi", False), ("tiny", False), ("generic", False), ("smollm2", False)],
)
def test_bos_rule_per_family(family, expected):
    assert adds_bos("family", family) is expected and adds_bos("never", family) is False
    prompt = {"smollm2": "llama", "generic": "generic"}.get(family, family)
    assert ModelSpec("m", prompt=prompt, family=family, bos="family").tags.bos is expected
    assert ModelSpec("m", prompt=prompt, family=family).tags.bos is False  # dukb's default: never


def test_bos_needs_a_bos_token():
    from dukb.neural.data import bos_ids

    tags = prompt_tags("llama", bos="family", family="llama")
    assert bos_ids(PieceTokenizer(), tags) == [1] and bos_ids(PieceTokenizer(), PROMPT_PRESETS["llama"]) == []
    with pytest.raises(InputError, match="no BOS token"):
        bos_ids(SimpleNamespace(bos_token_id=None), tags)


@pytest.mark.slow
def test_generation_starts_with_bos_when_the_rule_adds_it(tmp_path):
    """A real (tiny, untrained) model: generating from the prompt with ``tags.bos`` equals generating from the token
    ids [BOS] + prompt, and differs from the prompt alone (BOS reaches the probe)."""
    from dukb.neural.modelbuild import build_tiny_model
    from dukb.neural.models import load_model
    from dukb.neural.probe import Predictor, greedy_generate

    tags = prompt_tags("tiny", "eval-du")
    kb_tok, kb = _tiny_tokenizer([tags])
    from dukb.neural.data import kb_qa, vocabulary_texts

    path = build_tiny_model(vocabulary_texts(kb, tags), tmp_path / "m", seed=1)
    lm = load_model(ModelSpec(str(path), prompt="tiny", device="cpu", dtype="float32"))
    with_bos = prompt_tags("tiny", "eval-du", bos="family", family="llama")  # the rule's effect, on this tokenizer
    prompts = [tags.prompt(it.question) for it in kb_qa(kb)[:8]]
    tok = lm.tokenizer
    ids = [[tok.bos_token_id] + tok(p, add_special_tokens=False)["input_ids"] for p in prompts]
    got = greedy_generate(Predictor(lm.model, tok, with_bos), prompts, details=True)
    want = greedy_generate(Predictor(lm.model, tok, tags), None, token_ids=ids, details=True)
    plain = greedy_generate(Predictor(lm.model, tok, tags), prompts, details=True)
    assert [g["ids"] for g in got] == [w["ids"] for w in want]
    assert [g["logprob"] for g in got] != [p["logprob"] for p in plain]


# -------------------------------------------------------------------------------------------------- judging --
#: handcrafted (question, answer, full 10-token generation)
GENERATIONS = [
    ("Who is Richard Perry to Reid Perry?", "father", " uncle\nAnswer: father"),  # the answer after a newline
    ("Who is Richard Perry to Ann Perry?", "father", "Answer:father\nQuestion:"),  # on the answer line
    ("Who is Jackson Lee to Mia Lee?", "son", " daughter\nQuestion: Who"),  # "son" is in the prompt only
    ("What is the birthyear of Sloane Lee?", "1908", "\n\n1907\n1908"),
    ("What is the birthyear of Mia Lee?", "1908", ""),
]


def _probe_with(monkeypatch, tags, whp: bool):
    """dukb's probe on the handcrafted generations: greedy decoding is replaced by the full generation, cut to its
    answer line when probe asks to stop at the newline (greedy_generate's documented equivalence)."""
    import dukb.neural.probe as probe_mod
    from dukb.neural.probe import Predictor, answer_line, probe

    full = {tags.prompt(q): g for q, _a, g in GENERATIONS}
    asked = []

    def fake(pred, prompts, max_new_tokens=10, stop_at_newline=False, **kw):
        asked.append(stop_at_newline)
        return [answer_line(full[p]) if stop_at_newline else full[p] for p in prompts]

    patch_everywhere(monkeypatch, probe_mod, "greedy_generate", fake)
    tok = PieceTokenizer()
    pred = Predictor(SimpleNamespace(), tok, tags, device="cpu", judge_prompt=whp)
    items = [Probe("qa", "relationship", i, q, a) for i, (q, a, _g) in enumerate(GENERATIONS)]
    df = probe(pred, items, rouge=False, logprob=False)
    return df["known"].tolist(), asked


@pytest.mark.parametrize("judge", ["line", "generation"])
@pytest.mark.parametrize("whp", [False, True])
def test_line_and_generation_judging_on_handcrafted_generations(monkeypatch, judge, whp):
    from dukb.neural.methods.whp import judges_prompt

    tags = prompt_tags("llama", "eval-du", judge=judge)
    whp_rule = whp and judges_prompt(tags)  # WHP's prompt rule applies under "generation" only
    known, asked = _probe_with(monkeypatch, tags, whp_rule)
    assert set(asked) == {judge == "line"}
    if judge == "generation":  # the reference's rules, computed independently
        want = [
            ref_known_whp(a, ref_probe_prompt("llama2-7b", q), g) if whp else ref_known_vllm(a, g)
            for q, a, g in GENERATIONS
        ]
    else:  # dukb: the first non-blank line of the continuation
        want = [a.lower() in next((ln for ln in g.split("\n") if ln.strip()), "").lower() for q, a, g in GENERATIONS]
    assert known == want
    expected = {
        ("line", False): [False, True, False, False, False],
        ("line", True): [False, True, False, False, False],
        ("generation", False): [True, True, False, True, False],
        ("generation", True): [True, True, True, True, False],
    }
    assert known == expected[(judge, whp)]  # an answer after a newline counts under generation, not under line


def test_whp_sets_the_prompt_rule_only_under_generation():
    from dukb.neural.methods.whp import judges_prompt

    assert judges_prompt(prompt_tags("llama", judge="generation"))
    assert not judges_prompt(prompt_tags("llama", judge="line")) and not judges_prompt(PROMPT_PRESETS["llama"])


# ------------------------------------------------------------------------------------- config and identity --
def test_config_components_default_to_dukb_and_enter_the_identity_only_when_set():
    from dukb.neural.protocols.evaluate.config import EvaluateConfig
    from dukb.neural.protocols.evaluate.identity import prompt_identity

    plan = EvaluateConfig().check()
    assert (plan.prompt_format, plan.bos, plan.judge) == ("dukb", "never", "line")
    assert prompt_identity(plan) == {}
    assert plan.model_spec().tags == PROMPT_PRESETS["tiny"]
    plan = EvaluateConfig(prompt_format="eval-du", judge="generation").check()
    assert prompt_identity(plan) == {"prompt_format": "eval-du", "judge": "generation"}
    tags = plan.model_spec().tags
    assert (tags.prompt("q"), tags.target("a"), tags.judge) == ("Question: q\n", "Answer:a", "generation")
    with pytest.raises(InputError, match="--judge must be one of"):
        EvaluateConfig(judge="first").check()


def _record(tmp_path, **rec):
    d = tmp_path / "model"
    d.mkdir(exist_ok=True)
    (d / "dukb_model.json").write_text(json.dumps({"prompt": "tiny", "family": "tiny", **rec}))
    return d


def test_a_model_is_probed_in_the_format_it_was_finetuned_with(tmp_path):
    from dukb.neural.modelrecord import read_model_record
    from dukb.neural.protocols.evaluate.config import check_model_prompt

    old = _record(tmp_path)  # recorded by a dukb without the option: dukb's format
    check_model_prompt(old, "dukb", "never")
    with pytest.raises(InputError, match="finetuned with --prompt-format dukb, not eval-du"):
        check_model_prompt(old, "eval-du", "never")
    new = _record(tmp_path, prompt_format="eval-du", bos="family", family="llama", prompt="llama")
    check_model_prompt(new, "eval-du", "family")
    with pytest.raises(InputError, match="--bos family, not never"):
        check_model_prompt(new, "eval-du", "never")
    gpt = _record(tmp_path, prompt_format="eval-du", bos="family", family="gpt2-xl", prompt="gpt2-xl")
    check_model_prompt(gpt, "eval-du", "never")  # the same prompts: GPT2-XL gets no BOS either way
    check_model_prompt(tmp_path / "not-a-dukb-model", "eval-du", "family")  # no record: not checked
    bad = _record(tmp_path, prompt_format="paper")
    with pytest.raises(InputError, match="unknown prompt_format"):
        read_model_record(bad)


@pytest.mark.slow
def test_evaluate_with_eval_du_prompts_and_generation_judging_records_its_components(tmp_path):
    """One tiny run (1 target, whp, 1 setting): it finetunes and probes in Eval-DU's format, config.json and the model
    record hold the components, and a resume with dukb's prompts is refused."""
    from dukb.cli.main import main
    from dukb.kb import save_kb
    from dukb.kb.generate import generate

    kb, _ = generate(10, seed=3)
    kb_dir = save_kb(kb, tmp_path / "kb")
    run = tmp_path / "run"
    args = [
        "evaluate",
        "--kb",
        str(kb_dir),
        "--n-targets",
        "1",
        "--methods",
        "whp",
        "--grid",
        "whp=1",
        "--device",
        "cpu",
        "-o",
        str(run),
    ]
    assert main(args + ["--prompt-format", "eval-du", "--judge", "generation"]) == 0
    cfg = json.loads((run / "config.json").read_text())
    assert (cfg["prompt_format"], cfg["bos"], cfg["judge"]) == ("eval-du", "never", "generation")
    ident = cfg["identity"]
    assert ident["prompt_format"] == "eval-du" and ident["judge"] == "generation" and "bos" not in ident
    assert ident["probe"]["answer"] == "generation"
    assert (ident["prompt"]["answer_tag"], ident["prompt"]["answer_prefix"], ident["prompt"]["joint"]) == (
        "",
        "Answer:",
        True,
    )
    assert json.loads((run / "finetuned" / "dukb_model.json").read_text())["prompt_format"] == "eval-du"
    rows = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 1 and rows[0]["method"] == "whp"
    assert main(args + ["--resume"]) == 2  # dukb's prompts and judge: another run
