"""One method entry point (issue: one protocol skeleton, item 4): a gradient method declares its loss once
(:meth:`GradientMethod.terms` / :meth:`LossMethod.loss`, and its retain term's kind) and one step
(:meth:`GradientMethod.step`) is what the QA/corpus unlearner (:meth:`GradientMethod.sweep`) and RESTOR's document
unlearner (:func:`dukb.neural.docs.unlearn_documents`) both run."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from conftest import DEVICE  # noqa: E402
from dukb.neural.methods import DOCUMENT_METHODS, METHODS  # noqa: E402
from dukb.neural.methods.base import Method, UnlearnContext, WeightState  # noqa: E402
from dukb.neural.methods.gradient import GradientMethod, LossMethod  # noqa: E402


@pytest.fixture()
def tiny(tmp_path):
    from dukb.neural.data import QA_KIND, QAItem
    from dukb.neural.modelbuild import build_tiny_model
    from dukb.neural.models import load_model
    from dukb.neural.spec import PROMPT_PRESETS, ModelSpec

    tags = PROMPT_PRESETS["tiny"]
    rows = [("Ann", "Bob", "mother"), ("Cy", "Dee", "father"), ("Eve", "Fay", "aunt"), ("Gus", "Hal", "uncle")]
    items = [QAItem(QA_KIND, "relationship", i, f"Who is {a} to {b} ?", r) for i, (a, b, r) in enumerate(rows)]
    build_tiny_model([tags.prompt(it.question) + tags.target(it.answer) for it in items], tmp_path / "m", seed=0)
    return load_model(ModelSpec(str(tmp_path / "m"), prompt="tiny", device=DEVICE)), items


def test_every_trained_method_is_one_gradient_method_with_the_shared_unlearner():
    """Every method with a step grid except the closed loop (which runs GA + GDR's step in its own rounds) is a
    GradientMethod; none overrides the unlearner, and the old second entry point is gone."""
    grad = {n for n, m in METHODS.items() if isinstance(m, GradientMethod)}
    steps = {n for n, m in METHODS.items() if m.param == "steps" and not n.startswith("cl_du")}
    assert grad == steps and {"ga", "npo", "npo_seq", "kl", "simnpo", "po", "rt", "dpo"} <= grad
    for n in grad:
        assert type(METHODS[n]).sweep is GradientMethod.sweep, n
        assert type(METHODS[n]).step is GradientMethod.step, n
    assert not hasattr(Method, "forget_loss")
    assert set(DOCUMENT_METHODS) == {"ga", "kl", "npo"}
    assert all(isinstance(METHODS[n], LossMethod) for n in DOCUMENT_METHODS)


def test_losses_by_hand_at_both_levels():
    """At θ = f_ref: GA's loss is the negated answer NLL, KL's the negated cross-entropy to f_ref, NPO's (2/β) log 2
    at the sequence, logit and token levels alike."""
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 4, 5, generator=g, dtype=torch.float64)
    labels = torch.tensor([[-100, 3, 1, 4], [-100, -100, 2, 0]])
    batch = {"labels": labels, "attention_mask": torch.ones(2, 4, dtype=torch.long)}
    logp = torch.log_softmax(logits, -1)
    nll = [-logp[b, t - 1, labels[b, t]].item() for b in range(2) for t in range(1, 4) if labels[b, t] >= 0]
    for level in ("sequence", "token"):
        assert METHODS["ga"].loss(logits, None, batch, level).item() == pytest.approx(-sum(nll) / len(nll))
        for name in ("npo", "npo_seq"):
            assert METHODS[name].loss(logits, logits, batch, level).item() == pytest.approx(20 * math.log(2))
    p = logp.exp()
    ce = [-(p[b, t - 1] * logp[b, t - 1]).sum().item() for b in range(2) for t in range(1, 4) if labels[b, t] >= 0]
    assert METHODS["kl"].loss(logits, logits, batch).item() == pytest.approx(-sum(ce) / len(ce))


def test_retain_term_is_the_same_on_items_and_on_encoded_texts(tiny):
    """GDR/KLR through retain_loss: a list of QA items and the same items encoded give the same value; KLR is 0 at
    θ₀; no kind or no data: no term."""
    from dukb.neural.data import encode_qa
    from dukb.neural.methods.retain import gdr_loss, retain_loss
    from dukb.neural.scoring import forward_logits

    lm, items = tiny
    state = WeightState(lm)
    try:
        batch = encode_qa(lm.tokenizer, lm.tags, items[2:], lm.device)
        with torch.no_grad():
            want = gdr_loss(forward_logits(lm.model, batch), batch["labels"]).item()
            assert retain_loss("gdr", state, items[2:]).item() == pytest.approx(want, rel=1e-6)
            assert retain_loss("gdr", state, batch).item() == pytest.approx(want, rel=1e-6)
            assert retain_loss("klr", state, items[2:]).item() == pytest.approx(0.0, abs=1e-6)
        assert retain_loss(None, state, items) is None and retain_loss("gdr", state, []) is None
    finally:
        state.close()


def test_step_is_forget_term_plus_weighted_retain_term(tiny):
    """step() = terms() + λ · retain_loss(); the closed loop's L_CL (GA + GDR) is ga_gdr's step; the risk is the
    forget answers' NLL, detached."""
    from dukb.neural.data import encode_qa
    from dukb.neural.methods.closed_loop import closed_loop_loss
    from dukb.neural.scoring import forward_logits

    GA_GDR = METHODS["ga_gdr"]

    lm, items = tiny
    state = WeightState(lm)
    try:
        fb = encode_qa(lm.tokenizer, lm.tags, items[:2], lm.device)
        rb = encode_qa(lm.tokenizer, lm.tags, items[2:], lm.device)
        t = GA_GDR.step(state, fb, rb, reg_weight=0.5)
        with torch.no_grad():
            want = closed_loop_loss(
                forward_logits(lm.model, fb), fb["labels"], forward_logits(lm.model, rb), rb["labels"], 0.5
            ).item()
        assert t.total().item() == pytest.approx(want, rel=1e-6)
        assert t.risk.item() == pytest.approx(-t.forget.item(), rel=1e-6) and not t.risk.requires_grad
        # the method's own retain kind unless the caller names one (RESTOR: gdr); ga has none
        assert METHODS["ga"].step(state, fb, rb).retain is None
        assert METHODS["ga"].step(state, fb, rb, reg_kind="gdr", reg_weight=2.0).retain.item() == pytest.approx(
            2 * GA_GDR.step(state, fb, rb).retain.item(), rel=1e-6
        )
    finally:
        state.close()


def test_a_new_loss_method_is_one_declaration(tiny):
    """A LossMethod that declares only loss() runs through the shared unlearner: its run moves the weights, θ₀ is
    restored afterwards, and its setting is reported."""
    from dukb.neural.methods.ga import ga_loss

    class HalfGA(LossMethod):
        name, lr_kind, summary, source = "half_ga", "ga", "half gradient ascent", "test"

        def loss(self, logits, ref_logits, batch, level="sequence"):
            return 0.5 * ga_loss(logits, batch["labels"])

    lm, items = tiny
    before = {k: v.clone() for k, v in lm.model.state_dict().items()}
    settings = []
    for setting, pred in HalfGA().sweep(UnlearnContext(lm, items[:1], seed=0, lr=1e-2), [2]):
        settings.append(setting["steps"])
        assert any(not torch.equal(pred.model.state_dict()[k], v) for k, v in before.items())
    assert settings == [2]
    assert all(torch.equal(lm.model.state_dict()[k], v) for k, v in before.items())


def test_documents_and_qa_run_the_same_step(tiny, monkeypatch):
    """unlearn_documents and the QA sweep both go through GradientMethod.step (counted), at the token and the
    sequence level respectively."""
    from dukb.neural.docs import encode_texts, unlearn_documents
    from dukb.neural.train import TrainConfig

    lm, items = tiny
    seen = []
    real = GradientMethod.step

    def counting(self, state, batch, retain=None, **kw):
        seen.append((self.name, kw.get("level", "sequence"), kw.get("reg_kind", False)))
        return real(self, state, batch, retain, **kw)

    monkeypatch.setattr(GradientMethod, "step", counting)
    list(METHODS["npo"].sweep(UnlearnContext(lm, items[:1], seed=0, lr=1e-3), [1]))
    texts = [lm.tags.prompt(it.question) + lm.tags.target(it.answer) for it in items]
    st = WeightState(lm)
    try:
        rec = unlearn_documents(
            st,
            "npo",
            encode_texts(lm.tokenizer, texts[:2]),
            encode_texts(lm.tokenizer, texts[2:]),
            TrainConfig(epochs=1, lr=1e-3, batch_size=2, seed=0),
        )
    finally:
        st.close()
    assert ("npo", "sequence", False) in seen and ("npo", "token", "gdr") in seen
    assert rec["forget_loss"][0] == pytest.approx(20 * math.log(2), rel=1e-5)  # θ = f_ref at the first step


@pytest.mark.parametrize("name", ["npo_seq", "npo_seq_gdr", "simnpo", "npo", "ga"])
def test_loss_and_risk_equal_loss_and_risk_and_the_sweep_keeps_only_what_the_loss_reads(tiny, name):
    """terms = (loss, risk) on one forward pass, bitwise: NPO's sequence form and SimNPO compute the answers' sums
    once for both; NPO's sequence form keeps f_ref's summed answer log-probabilities [B] for the sweep, not its
    [B, L, V] logits (the logit form and GA keep what they read: the logits, nothing)."""
    from dukb.neural.data import encode_qa
    from dukb.neural.scoring import forward_logits

    lm, items = tiny
    m = METHODS[name]
    batch = encode_qa(lm.tokenizer, lm.tags, items[:3], lm.device)
    st = WeightState(lm)
    try:
        cache = {}
        loss, risk = m.terms(st, batch, cache)
        with torch.no_grad():
            logits = forward_logits(st.model, batch)
            ref = st.ref_logits(batch) if m.needs_reference else None
        assert torch.equal(loss.detach(), m.loss(logits, ref, batch).detach())
        assert torch.equal(risk.detach(), m.risk(logits, batch).detach())
        kept = cache.get("ref")
        if name.startswith("npo_seq"):
            assert kept.shape == (3,)
        elif m.needs_reference:
            assert kept.shape == logits.shape
        else:
            assert kept is None
    finally:
        st.close()
