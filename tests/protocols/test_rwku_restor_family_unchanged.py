"""The family schema's RWKU description corpus and RESTOR corruption outputs are byte-identical to those of main
0657766 (before rwku and restor ran on any schema, issue 43 item 6).

The digests below were recorded by running :func:`family_digests` with the code of main 0657766 (``git archive
0657766 dukb``); the same function on this code must give them. They cover, on the demo KB and on the generated KB
(30 people, seed 3): the description sentences of ``kb_descriptions`` (RWKU's forget corpus), RESTOR's corruption
(documents.jsonl and corruptions.csv as written), probes/facts.jsonl as written, the clean model's sentences (every
template and the first only) and the retain documents.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

#: Recorded on main 0657766 (see the module docstring).
MAIN_DIGESTS = {
    "demo/descriptions": "be095b5f1c3d13595fe1656bc0d384429f5d29cd82162bcc90c90336ac078e05",
    "demo/corruption": "770259564e75177cb0bfb83a11ef3f815eee1c8213d6eb5c1ae7f04c2ec6c610",
    "demo/facts": "b37c49e87196fb998ba4d369916e6379eb63024e8d26d13817383f60dc04e17d",
    "demo/texts": "b735d8e95bbb70f1426dc50b18b4bdcd2253075dc05fbd398b3ed90185a613a0",
    "generated/descriptions": "6d4efe057363182687b3390a050b0d8bfb3dce2fe564c797ba22635356ac1fac",
    "generated/corruption": "4105cd19f2b9299a93dc1abeb2ba4d22d68c25875b313080a11d9f1cc339c897",
    "generated/facts": "8488a5e8278beba23d08b0fc7b134b77549c740e64d21a37d5879739e8eabdc0",
    "generated/texts": "e219bbf403e7d0a6a174e4353c53ff34a9080b9794616ffa5110b59fc456a8a1",
}


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def family_digests() -> dict[str, str]:
    """SHA-256 of the family outputs named in the module docstring."""
    from dukb.kb.corrupt import corrupt, save_corruption
    from dukb.kb.generate import generate
    from dukb.kb.io import load_kb
    from dukb.neural.data import kb_descriptions
    from dukb.neural.restor.facts import fact_probes, fact_sentences
    from dukb.neural.restor.files import write_facts
    from dukb.neural.restor.texts import retain_texts
    from dukb.solver.closure import compute_closure

    out = {}
    for name, kb in (("demo", load_kb("demo")), ("generated", generate(30, seed=3)[0])):
        out[f"{name}/descriptions"] = _sha(
            "\n".join(f"{it.fact_kind}|{it.fact_id}|{it.answer}" for it in kb_descriptions(kb))
        )
        closure = compute_closure(kb)
        cor = corrupt(kb, 0.2, seed=0, k_context=5, closure=closure.atoms, docs_per_entity=2)
        with tempfile.TemporaryDirectory() as tmp:
            paths = save_corruption(cor, tmp)
            out[f"{name}/corruption"] = _sha(paths["documents"].read_text() + paths["corruptions"].read_text())
            write_facts(Path(tmp) / "facts.jsonl", fact_probes(kb, closure.atoms, cor.facts, 15, 0))
            out[f"{name}/facts"] = _sha((Path(tmp) / "facts.jsonl").read_text())
        out[f"{name}/texts"] = _sha(
            json.dumps([fact_sentences(kb), fact_sentences(kb, 1), retain_texts(kb, cor, 3, 0)])
        )
    return out


def test_family_description_corpus_and_restor_outputs_are_those_of_main():
    assert family_digests() == MAIN_DIGESTS
