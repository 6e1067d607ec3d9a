"""`dukb attack`: run the attacks on any unlearned checkpoint (one made by another framework too) for one target.

The checkpoint is probed like an evaluate row (every fact's "qa" item, the paper's greedy substring rule), scored
(recall, accuracy, Success-DU), then every attack is applied to it; the model before unlearning (``reference``)
gives the attacks that compare with it their baseline and the row its accuracy before unlearning.
"""

from __future__ import annotations

import time

from dukb import InputError
from dukb.kb.paper_sets import paper_sets_of
from dukb.kb.schema_probes import require_templates
from dukb.neural.attacks import AttackContext, run_attacks, worst_case_fields
from dukb.neural.attacks.base import check_attacks_on_model
from dukb.neural.data import kb_qa
from dukb.neural.metrics.base import RowContext
from dukb.neural.metrics.recall import score_probe
from dukb.neural.metrics.summary import num
from dukb.neural.pipeline import load_finetuned
from dukb.neural.probe import Predictor, probe
from dukb.solver.mdus import minimal_sets
from dukb.solver.scopes import FORGET_SCOPES, forget_fact_ids


def attack_checkpoint(
    kb,
    closure,
    model_dir: str,
    target: int,
    attacks,
    *,
    reference_dir: str | None = None,
    scope: str = "target",
    sets: str = "exact",
    seeds: int = 100,
    seed: int = 0,
    batch_size: int = 256,
    spec_kw: dict | None = None,
    log=None,
) -> dict:
    """Probe, score and attack one unlearned checkpoint.

    Args:
        kb, closure: the KB and its closure under the run's rules.
        model_dir: the unlearned model (directory, hub id or GGUF file: :func:`dukb.neural.pipeline.load_finetuned`).
        target: the target's relationship fact_id.
        attacks: [(Attack, settings)] (:func:`dukb.neural.attacks.parse_attacks`).
        reference_dir: the model before unlearning (None: attacks that compare with it report None there).
        scope: forget scope that names the forget set the checkpoint was unlearned on (relearn's neighbours are
            chosen around it; :data:`dukb.solver.scopes.FORGET_SCOPES`).
        sets, seeds: minimal deep unlearning sets, "exact", "random" (N_seed) or "paper" (the KB's paper sets,
            :func:`dukb.kb.paper_sets.paper_sets_of`).
        spec_kw: model loading options (dtype, device, prompt, trust_remote_code).

    Returns:
        a row: target, model, reference, forget_set, recall, accuracies, success_du, target_forgotten,
        forgotten_relationships/biographies, known_share_before (with a reference: the share of every fact's QA
        item the reference answers, not Eq. 2's accuracy), attacks (name -> entry),
        recall_under_attack, forgotten_under_attack, seconds.

    Raises:
        InputError: an unknown target or scope, a model that cannot be loaded, "paper" sets the KB lacks.

    Source: Wu et al. 2025, Eq. 1-2 and Definition 2; the attacks' papers (:mod:`dukb.neural.attacks`).
    """

    t0 = time.perf_counter()
    the_sets, used, forget = _checked_sets(kb, closure, target, attacks, scope, sets, seeds, seed)
    spec_kw = dict(spec_kw or {})
    lm = load_finetuned(model_dir, **spec_kw)
    check_attacks_on_model(attacks, lm.model, kb)  # before any probe or attack
    pred = Predictor(lm.model, lm.tokenizer, lm.tags, device=lm.device)
    items = kb_qa(kb)
    df = probe(pred, items, batch_size=batch_size, rouge=False, logprob=False)
    row = {
        "target": target,
        "model": str(model_dir),
        "reference": reference_dir,
        "scope": scope,
        "forget_set": forget,
        "sets_used": used,
    }
    row.update(score_probe(RowContext(kb, target, the_sets, used, df, forget, closure=closure)))
    reference = None
    if reference_dir is not None:
        reference, row["known_share_before"] = _reference(reference_dir, items, batch_size, spec_kw)
    if log:
        log(
            f"target {target}: recall {row['recall']:.3f}, accuracy {num(row['accuracy_all'], 3)}, "
            f"success_du {row['success_du']}"
        )
    extra = {"spec": lm.spec, "reference": reference, "seed": seed, "batch_size": batch_size}
    ctx = AttackContext(pred, kb, closure, target, the_sets, used, forget, items, df, **extra)
    row["attacks"] = run_attacks(ctx, attacks)
    row.update(worst_case_fields(kb, the_sets, used, target, row, row["attacks"]))
    row["seconds"] = round(time.perf_counter() - t0, 3)
    return row


def _checked_sets(kb, closure, target: int, attacks, scope: str, sets: str, seeds: int, seed: int):
    """The checks made before any model loads (scope, target, the KB's templates and what each attack needs of the
    KB), then the target's minimal sets: (sets, "exact" | "random" | "paper", forget set).

    Raises:
        InputError: an unknown scope or target; a KB with another schema whose relation lacks a ``qa`` template
            (every fact is scored on it) or a template an attack needs.
    """
    if scope not in FORGET_SCOPES:
        raise InputError(f"unknown forget scope {scope!r} (choose from {', '.join(FORGET_SCOPES)})")
    if target not in {f.fact_id for f in kb.relationships}:
        raise InputError(f"--target-id {target} is not a relationship fact of the KB")
    require_templates(kb, ("qa",), "dukb attack (scores every fact on the qa form)")
    check_attacks_on_model(attacks, None, kb)
    atom = closure.atom_of_fact(target)
    if sets == "paper":
        the_sets, used = paper_sets_of(kb, [target])[0][target], "paper"
    else:
        res = (
            minimal_sets(closure, [atom], sets, n_seeds=seeds, seed=seed)
            if sets == "random"
            else minimal_sets(closure, [atom], "exact")
        )
        the_sets = [list(s) for s in res.sets]
        used = "random" if sets == "random" else "exact"
    return the_sets, used, list(forget_fact_ids(closure, target, scope, the_sets))


def _reference(reference_dir: str, items, batch_size: int, spec_kw: dict):
    """The model before unlearning as a Predictor, and the share of ``items`` it answers (known_share_before)."""
    ref = load_finetuned(reference_dir, **spec_kw)
    reference = Predictor(ref.model, ref.tokenizer, ref.tags, device=ref.device)
    before = probe(reference, items, batch_size=batch_size, rouge=False, logprob=False)
    return reference, round(float(before["known"].astype(bool).mean()), 6)
