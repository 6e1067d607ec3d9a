"""`dukb restor`: exact judge, fact states, rule-aware belief analysis, document losses, and the pipeline end to end
on a small generated KB with the tiny model on CPU (RESTOR, Rezaei et al.)."""

from __future__ import annotations

import csv
import json
import math
import random

import pytest

from conftest import DEVICE  # noqa: E402
from dukb.kb.corrupt import CorruptedFact
from dukb.neural.restor import (
    DEGRADED,
    EXCLUDED,
    FORGET,
    INJECTED,
    OTHER,
    RECOVERY,
    STATES,
    STATES_A,
    STATES_B,
    TRUE,
    UNAFFECTED,
    UNCHANGED,
    FactProbe,
    Judge,
    belief_analysis,
    belief_triples,
    fact_state,
    majority,
    normalize,
    partition,
)

# ------------------------------------------------------------------------------------------------ exact judge ----
JUDGE = Judge(
    [
        "Washington state",
        "West Virginia state",
        "Virginia state",
        "Ohio state",
        "Richard Perry",
        "Reid Perry",
        "Richard Perryman",
        "Banker",
        "Bank Teller",
        "1908",
        "1910",
        "Jose Perez",
    ]
)

# (output, true values, injected value, expected label): labelled by hand.
HAND_LABELLED = [
    ("Washington", ["Washington state"], None, TRUE),  # alias: "X" = "X state"
    ("washington STATE.", ["Washington state"], None, TRUE),  # case, trailing punctuation
    ("Washington state", ["Washington"], None, TRUE),  # alias the other way round
    ("West Virginia state", ["Virginia state"], None, OTHER),  # a substring test would accept this
    ("Virginia state, near the coast", ["Virginia state"], None, TRUE),
    ("Richard Perry, his father", ["Richard Perry"], None, TRUE),  # trailing words
    ("richard perry is Reid Perry's father.", ["Richard Perry"], None, TRUE),
    ("Richard Perryman", ["Richard Perry"], None, OTHER),  # a longer name is another person
    ("Richard Perry's", ["Richard Perry"], None, TRUE),  # possessive
    ("Ohio", ["Washington state"], "Ohio state", INJECTED),
    ("Ohio state.", ["Washington state"], "Ohio state", INJECTED),
    ("a Banker.", ["Banker"], None, TRUE),  # leading article
    ("Bank Teller", ["Banker"], None, OTHER),
    ("1908", ["1908"], None, TRUE),
    ("19081", ["1908"], None, OTHER),
    ("1908 and 1910", ["1910"], "1908", INJECTED),  # the first answer counts
    ("José Pérez", ["Jose Perez"], None, TRUE),  # accents
    ("", ["Banker"], None, OTHER),
    ("I do not know", ["Banker"], "Bank Teller", OTHER),
]


@pytest.mark.parametrize("output,true_values,injected,expected", HAND_LABELLED)
def test_exact_judge_agrees_with_hand_labels(output, true_values, injected, expected):
    assert JUDGE.label(output, true_values, injected)[0] == expected


def test_judge_answers_and_normalisation():
    assert normalize("  Washington State.") == ("washington", "state")
    assert normalize("O'Neil-Smith's dog") == ("o'neil-smith", "dog")
    assert JUDGE.label("Richard Perry, his father", ["Richard Perry"])[1] == "richard perry"
    # an unknown answer is the output's first segment
    assert JUDGE.label("Mary Ann. Something else", ["Banker"])[1] == "mary ann"
    # the substring rule of the deep-unlearning paper disagrees on exactly the case the exact judge is for
    from dukb.kb.judge import judge as substring_judge
    from dukb.kb.probes import Probe

    assert substring_judge(Probe("qa", "biography", 0, "q", "Virginia state"), "West Virginia state")


def test_majority_vote():
    assert majority([TRUE, OTHER, TRUE], ["a", "b", "a"]) == {"correct": True, "answer": "a", "label": TRUE}
    m = majority([TRUE, OTHER, INJECTED], ["a", "b", "c"])
    assert not m["correct"] and m["answer"] == "a"  # tie: earliest answer
    m = majority([OTHER, INJECTED, INJECTED], ["b", "c", "c"])
    assert m == {"correct": False, "answer": "c", "label": INJECTED}
    with pytest.raises(ValueError):
        majority([], [])


# ------------------------------------------------------------------------------------------------ fact states ----
def _row(correct: bool, answer: str) -> dict:
    return {"correct": correct, "answer": answer}


def test_fact_state_by_hand():
    right, wrong_x, wrong_y = _row(True, "t"), _row(False, "x"), _row(False, "y")
    assert fact_state(wrong_x, right, right) == EXCLUDED
    assert fact_state(right, wrong_x, right) == RECOVERY
    assert fact_state(right, wrong_x, wrong_x) == UNCHANGED
    assert fact_state(right, wrong_x, wrong_y) == FORGET
    assert fact_state(right, right, wrong_x) == DEGRADED
    assert fact_state(right, right, right) == UNAFFECTED


def test_every_fact_in_exactly_one_state_and_partitions_sum_to_100():
    rng = random.Random(7)
    answers = ["t", "x", "y", "z"]
    for _ in range(50):
        n = rng.randint(1, 60)
        rows = [[_row(rng.random() < 0.6, rng.choice(answers)) for _ in range(n)] for _ in range(3)]
        states = [fact_state(c, k, u) for c, k, u in zip(*rows)]
        assert len(states) == n and all(s in STATES for s in states)
        in_a = [c["correct"] and not k["correct"] for c, k, _ in zip(*rows)]
        in_b = [c["correct"] and k["correct"] for c, k, _ in zip(*rows)]
        for s, a, b in zip(states, in_a, in_b):  # exactly one of A, B, excluded, and a state of that set
            assert (s in STATES_A) == a and (s in STATES_B) == b and (s == EXCLUDED) == (not a and not b)
        p = partition(states)
        assert p["n_A"] == sum(in_a) and p["n_B"] == sum(in_b) and p["n_excluded"] == n - sum(in_a) - sum(in_b)
        if p["n_A"]:
            assert math.isclose(sum(p[s] for s in STATES_A), 100.0)
        if p["n_B"]:
            assert math.isclose(sum(p[s] for s in STATES_B), 100.0)


# --------------------------------------------------------------------------------------------- belief closure ----
def test_belief_closure_finds_a_planted_contradiction(kb_builder):
    from dukb.solver.closure import compute_closure

    kb = kb_builder(
        {"Al Roe": "male", "Bo Roe": "male", "Fred Roe": "male", "Gus Poe": "male"},
        [("Al Roe", "father", "Fred Roe"), ("Bo Roe", "father", "Fred Roe"), ("Al Roe", "brother", "Bo Roe")],
    )
    truth = set(compute_closure(kb).atoms)
    facts = [
        FactProbe("relationship", 0, "Al Roe", "father", "Who is Al Roe's father?", "Fred Roe"),
        FactProbe("relationship", 1, "Bo Roe", "father", "Who is Bo Roe's father?", "Fred Roe", "Gus Poe"),
        FactProbe("relationship", 2, "Al Roe", "brother", "Who is Al Roe's brother?", "Bo Roe"),
        FactProbe("biography", 0, "Al Roe", "job", "What is the job of Al Roe?", "Banker"),
    ]
    # the model answers Al's father and brother right, but gives Bo the injected father Gus
    rows = [{"answer": "fred roe"}, {"answer": "gus poe"}, {"answer": "bo roe"}, {"answer": "banker"}]
    beliefs = belief_triples(kb, facts, rows)
    assert [t for t, _ in beliefs] == [
        ("Al Roe", "father", "Fred Roe"),
        ("Bo Roe", "father", "Gus Poe"),
        ("Al Roe", "brother", "Bo Roe"),
    ]
    corrupted = [
        CorruptedFact("relationship", 1, "Bo Roe", "father", "Fred Roe", "Gus Poe"),
        # planted: not stated by the model, but derivable from its belief (Bo, father, Gus) (rule R43)
        CorruptedFact("relationship", 9, "Gus Poe", "child", "?", "Bo Roe"),
    ]
    out = belief_analysis(kb, beliefs, truth, corrupted)
    # R37: Al's brother Bo has Al's father Fred, contradicting the model's own answer "Gus Poe"
    assert out["n_derived_contradicting_answers"] >= 1
    assert "Bo Roe|father|Fred Roe" in out["examples_contradicting"]
    assert out["n_beliefs_false"] == 1
    assert out["n_derived_false"] >= 1 and all(tuple(x.split("|")) not in truth for x in out["examples_false"])
    assert (out["n_injected_stated"], out["n_injected_derivable"], out["n_injected_retained"]) == (1, 1, 2)

    # right answers: no contradiction, nothing corrupted survives
    good = belief_triples(
        kb, facts, [{"answer": "fred roe"}, {"answer": "fred roe"}, {"answer": "bo roe"}, {"answer": "banker"}]
    )
    ok = belief_analysis(kb, good, truth, corrupted)
    assert ok["n_derived_contradicting_answers"] == 0 and ok["n_derived_false"] == 0
    assert ok["n_injected_retained"] == 0


# -------------------------------------------------------------------------------------------- document losses ----
def test_kl_and_token_npo_losses():
    torch = pytest.importorskip("torch")
    from dukb.neural.methods.kl import kl_loss
    from dukb.neural.methods.npo import npo_token_loss

    g = torch.Generator().manual_seed(0)
    ref = torch.randn(2, 5, 7, generator=g)
    labels = torch.tensor([[-100, 3, 1, 4, 2], [-100, -100, 0, 6, 5]])
    logits = ref.clone().requires_grad_(True)
    exact = kl_loss(logits, ref, labels, entropy=False)
    assert exact.item() == pytest.approx(0.0, abs=1e-6)
    exact.backward()
    assert logits.grad.abs().max().item() < 1e-6  # the exact KL cannot move away from the reference
    logits.grad = None
    code = kl_loss(logits, ref, labels)  # RESTOR's released form: KL + entropy
    p = torch.softmax(ref[:, :-1], -1)
    ent = -(p * p.log()).sum(-1)
    mask = labels[:, 1:] != -100
    assert code.item() == pytest.approx((ent * mask).sum().item() / mask.sum().item(), rel=1e-5)
    code.backward()
    assert logits.grad.abs().max().item() > 1e-4
    other = torch.randn(2, 5, 7, generator=g)
    assert kl_loss(other, ref, labels, entropy=False).item() > 0
    # token-level NPO: (2/β) log 2 at the reference, and lower once the model's token probabilities drop
    beta = 0.1
    assert npo_token_loss(ref, ref, labels, beta).item() == pytest.approx(2 / beta * math.log(2), rel=1e-5)
    lowered = ref.clone()
    for b in range(2):
        for t in range(4):
            if labels[b, t + 1] >= 0:
                lowered[b, t, labels[b, t + 1]] -= 3.0
    assert npo_token_loss(lowered, ref, labels, beta).item() < 2 / beta * math.log(2)


def test_retain_and_targeted_forget_sets():
    from dukb.kb.corrupt import corrupt
    from dukb.kb.generate import generate
    from dukb.neural.restor import forget_texts, retain_texts
    from dukb.solver.closure import compute_closure

    kb, _ = generate(30, 2)
    cor = corrupt(kb, 0.2, 0, 5, closure=compute_closure(kb).atoms, docs_per_entity=2)
    texts, keys = retain_texts(kb, cor, 8, 0)
    assert 0 < len(texts) <= 8 and len(keys) == len(set(keys))
    touched = {c.subject for c in cor.facts} | {
        v for c in cor.facts if c.fact_kind == "relationship" for v in (c.true_value, c.injected_value)
    }
    rels = {f.fact_id: f for f in kb.relationships}
    bios = {b.fact_id: b for b in kb.biographies}
    for kind, fid in keys:
        f = rels[fid] if kind == "relationship" else bios[fid]
        assert f.subject not in touched and getattr(f, "object", None) not in touched
    full, targeted = forget_texts(cor, False), forget_texts(cor, True)
    assert len(full) == len(targeted) == len(cor.documents)
    for d, t in zip(cor.documents, targeted):
        incorrect = [s.sentence for s in d.sentences if s.role == "incorrect"]
        assert t == " ".join(incorrect) and len(incorrect) == 5 and t != d.text


# ------------------------------------------------------------------------------------------- pipeline and CLI ----
@pytest.fixture(scope="module")
def small_kb(tmp_path_factory):
    from dukb.kb import save_kb
    from dukb.kb.generate import generate

    kb, _ = generate(24, 1)
    return save_kb(kb, tmp_path_factory.mktemp("kb") / "kb")


# a small setting: one sentence template per fact, 12 documents per corrupted person, a stronger corruption than the
# tiny preset's (which is chosen for EDU-RELAT's 680 documents)
CLI_ARGS = [
    "--samples",
    "1",
    "--docs-per-entity",
    "12",
    "--n-retain",
    "16",
    "--n-random",
    "5",
    "--templates",
    "1",
    "--clean-epochs",
    "80",
    "--corrupt-lr",
    "5e-3",
]


@pytest.fixture(scope="module")
def restor_run(small_kb, tmp_path_factory):
    from dukb.cli.main import main

    run = tmp_path_factory.mktemp("restor") / "run"
    rc = main(["restor", "--kb", str(small_kb), "-o", str(run), *CLI_ARGS])
    return rc, run


def _csv(path):
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_cli_end_to_end_writes_the_report(restor_run):
    rc, run = restor_run
    assert rc == 0
    for name in (
        "config.json",
        "states.csv",
        "summary.csv",
        "report.md",
        "results.jsonl",
        "states_GA.png",
        "states_KL.png",
        "states_NPO.png",
        "corruption/corruptions.csv",
        "corruption/documents.jsonl",
        "clean/train.json",
        "corrupted/train.json",
    ):
        assert (run / name).exists(), name
    report = (run / "report.md").read_text()
    for heading in ("Table 1", "Table 2", "Table 3", "Fig. 2", "Rule-aware"):
        assert heading in report
    rows = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    assert [r["method"] for r in rows] == ["ga", "kl", "npo"]


def test_corruption_lowers_accuracy_on_corrupted_facts(restor_run):
    _, run = restor_run
    summary = {(r["model"], r["group"]): r for r in _csv(run / "summary.csv")}
    clean, corrupted = float(summary[("clean", "F'")]["accuracy"]), float(summary[("corrupted", "F'")]["accuracy"])
    assert clean >= 90.0  # the clean model knows (nearly) every fact
    assert corrupted <= clean - 15.0, (clean, corrupted)
    # RESTOR Fig. 2: corruption raises the probability of the injected answers (over A) well above the clean model's
    lp_clean = float(summary[("clean", "all")]["logprob_injected_A"])
    lp_corrupted = float(summary[("corrupted", "all")]["logprob_injected_A"])
    assert lp_corrupted > lp_clean + 0.5, (lp_clean, lp_corrupted)
    assert float(summary[("clean", "all")]["injected"]) == 0


def test_cli_states_partition_every_fact(restor_run):
    _, run = restor_run
    table = _csv(run / "states.csv")
    n_facts = json.loads((run / "config.json").read_text())["n_facts"]
    assert len(table) == n_facts and len({(r["fact_kind"], r["fact_id"]) for r in table}) == n_facts
    summary = {(r["model"], r["group"]): r for r in _csv(run / "summary.csv")}
    for m in ("GA", "KL", "NPO"):
        states = [r[f"{m}_state"] for r in table]
        assert all(s in STATES for s in states)
        for r, s in zip(table, states):  # the state agrees with the three models' correctness
            clean, corr = r["clean_correct"] == "True", r["corrupted_correct"] == "True"
            retain = r["in_retain"] == "True"  # retain-train facts stay out of A and B
            assert (s == "retain-train") == retain
            assert (s in STATES_A) == (clean and not corr and not retain)
            assert (s in STATES_B) == (clean and corr and not retain)
        row = summary[(m, "all")]
        assert int(row["n_retain_train"]) == sum(r["in_retain"] == "True" for r in table)
        if int(row["n_A"]):
            assert math.isclose(sum(float(row[s]) for s in STATES_A), 100.0, abs_tol=1e-3)
        if int(row["n_B"]):
            assert math.isclose(sum(float(row[s]) for s in STATES_B), 100.0, abs_tol=1e-3)


def test_cli_rerun_is_resumed_and_other_settings_refused(restor_run, small_kb, capsys):
    from dukb.cli.main import main

    rc, run = restor_run
    before = (run / "results.jsonl").read_text()
    capsys.readouterr()
    assert main(["restor", "--kb", str(small_kb), "-o", str(run), *CLI_ARGS]) == 0
    err = capsys.readouterr().err
    assert "stage" not in err  # every stage and method was skipped
    assert (run / "results.jsonl").read_text() == before
    cfg_before = (run / "config.json").read_text()
    assert main(["restor", "--kb", str(small_kb), "-o", str(run), *CLI_ARGS, "--seed", "3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dukb: error:") and "seed: 0 in the run, 3 now" in err[0]
    # the retain set changes every unlearned model: part of the identity too
    args = [a if a != "16" else "8" for a in CLI_ARGS]
    assert main(["restor", "--kb", str(small_kb), "-o", str(run), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "n_retain: 16 in the run, 8 now" in err[0]
    assert (run / "config.json").read_text() == cfg_before


@pytest.mark.parametrize(
    "extra",
    [
        ["--corrupt", "0"],
        ["--methods", "ga,sgd"],
        ["--samples", "0"],
        ["--lambda", "kl"],
        ["--lambda", "rmu=1"],
        ["--context", "-1"],
    ],
)
def test_cli_bad_input_exits_2_with_one_line(extra, small_kb, tmp_path, capsys):
    from dukb.cli.main import main

    capsys.readouterr()
    assert main(["restor", "--kb", str(small_kb), "-o", str(tmp_path / "r"), *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dukb: error:")
    assert not (tmp_path / "r").exists()


def test_cli_missing_kb_exits_2(tmp_path, capsys):
    from dukb.cli.main import main

    capsys.readouterr()
    assert main(["restor", "--kb", str(tmp_path / "nope"), "-o", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nope" in err[0]
    assert not (tmp_path / "r").exists()


def test_tiny_vocabulary_covers_documents(restor_run):
    from transformers import AutoTokenizer

    _, run = restor_run
    tok = AutoTokenizer.from_pretrained(run / "clean")
    docs = [json.loads(x)["text"] for x in (run / "corruption" / "documents.jsonl").read_text().splitlines()]
    ids = tok(docs, add_special_tokens=False)["input_ids"]
    assert docs and all(tok.unk_token_id not in row for row in ids)


def test_cli_targeted_adds_a_row_to_the_same_run(restor_run, small_kb, capsys):
    from dukb.cli.main import main

    _, run = restor_run
    assert main(["restor", "--kb", str(small_kb), "-o", str(run), *CLI_ARGS, "--targeted", "--methods", "npo"]) == 0
    rows = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    assert [(r["method"], r["targeted"]) for r in rows][-1] == ("npo", True)
    assert rows[-1]["train"]["method"] == "npo"
    assert (run / "states_NPO_t.png").exists()
    table = _csv(run / "states.csv")
    assert all(r["NPO(t)_state"] in STATES for r in table)
    assert "NPO (t)" in (run / "report.md").read_text()


def test_kl_method_is_registered_and_moves_away_from_the_reference(tmp_path):
    torch = pytest.importorskip("torch")
    import dukb.neural.methods.kl  # noqa: F401  (registration)
    from dukb.kb.probes import Probe
    from dukb.neural.data import encode_qa
    from dukb.neural.methods import METHODS, UnlearnContext
    from dukb.neural.methods.kl import kl_loss
    from dukb.neural.modelbuild import build_tiny_model
    from dukb.neural.models import load_model
    from dukb.neural.scoring import forward_logits
    from dukb.neural.spec import PROMPT_PRESETS, ModelSpec

    tags = PROMPT_PRESETS["tiny"]
    items = [
        Probe("qa", "biography", i, f"What is the job of Person {n}?", job)
        for i, (n, job) in enumerate([("Ann", "Banker"), ("Bob", "Teacher"), ("Cy", "Farmer")])
    ]
    build_tiny_model([tags.prompt(it.question) + tags.target(it.answer) for it in items], tmp_path, seed=0)
    lm = load_model(ModelSpec(str(tmp_path), prompt="tiny", device=DEVICE))
    batch = encode_qa(lm.tokenizer, tags, items[:2])
    with torch.no_grad():
        ref = forward_logits(lm.model, batch)
    assert {"kl", "kl_gdr", "kl_klr"} <= set(METHODS)
    ctx = UnlearnContext(lm, items[:2], items[2:], lr=1e-2)
    moved = []
    for setting, pred in METHODS["kl"].sweep(ctx, [3]):
        with torch.no_grad():
            moved.append(kl_loss(forward_logits(pred.model, batch), ref, batch["labels"], entropy=False).item())
        assert setting == {"steps": 3, "lr": 1e-2}
    assert moved[0] > 1e-4
    with torch.no_grad():  # θ₀ is restored after the sweep
        assert torch.allclose(forward_logits(lm.model, batch), ref, atol=1e-5)
