"""A fingerprint of every gradient method's unlearning, to check that a refactor changes no number.

    PYTHONPATH=CHECKOUT python bench/method_snapshot.py OUT.json    # then cmp two checkouts' OUT.json

On a tiny model built from 8 QA items (seed 0): every registered step method except the closed loop, swept over
T = 1, 3 under the separate and the reference schedule and under objective capping (τ = 0.5, 2), on 2 forget items
and 4 retain items, lr 1e-2; then RESTOR's document unlearner (ga, kl, npo; 2 epochs). Records each setting and a
SHA-256 prefix of the model's weights after it and its per-step risk curve (loss_forget, unlearning_risk,
loss_retain), and the document runs' per-epoch losses (10 digits).
"""

import hashlib
import json
import sys
import tempfile
from pathlib import Path

from dukb.neural.data import QA_KIND, QAItem
from dukb.neural.docs import encode_texts, unlearn_documents
from dukb.neural.methods import METHODS
from dukb.neural.methods.base import Control, SweepSchedule, UnlearnContext, WeightState
from dukb.neural.modelbuild import build_tiny_model
from dukb.neural.models import load_model
from dukb.neural.spec import PROMPT_PRESETS, ModelSpec
from dukb.neural.train import TrainConfig


def h(model):
    m = hashlib.sha256()
    for k, v in sorted(model.state_dict().items()):
        m.update(k.encode())
        m.update(v.detach().cpu().numpy().tobytes())
    return m.hexdigest()[:16]


tmp = Path(tempfile.mkdtemp())
tags = PROMPT_PRESETS["tiny"]
names = ["Ann", "Bob", "Cy", "Dee", "Eve", "Fay", "Gus", "Hal"]
rels = ["mother", "father", "aunt", "uncle", "sister", "brother", "son", "wife"]
items = [QAItem(QA_KIND, "relationship", i, f"Who is {names[i]} to {names[(i + 1) % 8]} ?", rels[i]) for i in range(8)]
build_tiny_model([tags.prompt(it.question) + tags.target(it.answer) for it in items], tmp / "m", seed=0)
lm = load_model(ModelSpec(str(tmp / "m"), prompt="tiny", device="cpu"))
out = {}
names_ = [n for n, m in METHODS.items() if m.param == "steps" and n not in ("cl_du",) and not n.startswith("cl_du")]
for n in names_:
    m = METHODS[n]
    for sched in ("separate", "reference"):
        ctx = UnlearnContext(lm, items[:2], items[2:6], seed=0, lr=1e-2, items=items, schedule=SweepSchedule(sched))
        rows = []
        for s, p in m.sweep(ctx, [1, 3]):
            s = {k: v for k, v in s.items() if k not in ("trace", "seconds")}
            rows.append(
                [
                    json.dumps(s, sort_keys=True, default=str),
                    h(p.model),
                    json.dumps(p.meta.get("risk_curve"), sort_keys=True),
                ]
            )
        out[f"{n}/{sched}"] = rows
    ctx = UnlearnContext(lm, items[:2], items[2:6], seed=0, lr=1e-2, items=items, control=Control("oc"))
    try:
        out[f"{n}/oc"] = [
            [
                json.dumps({k: v for k, v in s.items() if k not in ("trace", "seconds")}, sort_keys=True, default=str),
                h(p.model),
            ]
            for s, p in m.sweep(ctx, [0.5, 2.0])
        ]
    except Exception as e:
        out[f"{n}/oc"] = repr(e)
    print(n, flush=True)
# documents
texts = [tags.prompt(it.question) + tags.target(it.answer) for it in items]
for n in ("ga", "kl", "npo"):
    st = WeightState(lm, None, seed=0)
    fb = encode_texts(lm.tokenizer, texts[:3], lm.device) if True else None
    rb = encode_texts(lm.tokenizer, texts[3:], lm.device)
    rec = unlearn_documents(st, n, fb, rb, TrainConfig(epochs=2, lr=1e-2, batch_size=2, seed=0))
    out[f"doc/{n}"] = [
        h(st.model),
        [round(x, 10) for x in rec["forget_loss"]],
        [round(x, 10) for x in rec["retain_loss"]],
    ]
    st.reset()
    st.close()
    print("doc", n, flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1, sort_keys=True)
