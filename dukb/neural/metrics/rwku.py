"""RWKU's metrics on a KB (Jin et al. 2024, Sec. 3.3-4): ROUGE-L recall of the forget probes per family (FB,
QA, AA) and per adversarial kind, of neighbour and distant facts, and MIA on forget members (FM) against retain
members (RM). Used by `dukb rwku` and registered for `dukb evaluate --metrics` (``rwku_rouge``, ``mia_fm_rm``).

- Neighbour facts: the other facts about the forget facts' people (:func:`neighbour_facts`) outside the targets'
  cones: RWKU's neighbour knowledge "must not involve the target", and a fact of the cone can take part in deriving
  it (every minimal deep unlearning set lies in the cone). Cone facts that are not forgotten are scored in no group;
  distant facts: the rest.
- "All" of a group is the mean over all its probes of the families (RWKU's "All" is undefined in the paper;
  numerically it is roughly the probe-weighted mean).
- Facts a method trains on as retain data are scored in no group and are no RM member (honest evaluation).
- FM: the QA texts of the forget facts; RM: the QA texts of the distant facts; the scores of
  :mod:`dukb.neural.metrics.mia` on the answer tokens. Every probe and MIA member is evaluation-only: `dukb rwku`
  unlearns from description texts (:func:`dukb.neural.data.kb_descriptions`), never from a probe.
"""

from __future__ import annotations

from dukb.neural.data import QA_KIND, kb_qa
from dukb.neural.metrics.base import Metric, Needs, RowContext
from dukb.neural.metrics.mia import auc, item_mia_scores
from dukb.solver.closure import compute_closure
from dukb.solver.splits import cone_facts

#: forget probe families: FB (cloze), QA, AA (RWKU's nine adversarial kinds, cross-lingual in three languages)
FB, QA = "cloze", "qa"
AA_KINDS = (
    "prefix_injection",
    "affirmative_suffix",
    "role_play",
    "multiple_choice",
    "reverse",
    "synonym",
    "context_hint",
    "in_context",
    "cross_lingual_fr",
    "cross_lingual_de",
    "cross_lingual_es",
)


def neighbour_facts(kb, forget_rel, cone=()) -> dict:
    """Facts about the forget facts' people, other than the forget facts and the facts of the targets' cone.

    Args:
        kb: the KB.
        forget_rel: the forget set (relationship fact_ids).
        cone: relationship fact_ids of the targets' cone (:func:`cone_ids`); none of them is a neighbour.

    Returns:
        {"relationships": [...], "biographies": [...], "dropped": [...]} (sorted fact_ids): relationships with a
        forget fact's subject or object as subject or object and outside the cone, those people's biographies, and
        the relationships about those people left out because they lie in the cone.

    Raises:
        KBError: a forget id that is not a relationship fact of the KB.

    Source: Jin et al. 2024 (RWKU), Sec. 3.3 (neighbour knowledge "must not involve the target"), adapted to a KB.
    """
    forget = {int(i) for i in forget_rel}
    in_cone = {int(i) for i in cone}
    people = set()
    for i in forget:
        f = kb.relationship(i)
        people |= {f.subject, f.object}
    near = [
        f.fact_id for f in kb.relationships if f.fact_id not in forget and (f.subject in people or f.object in people)
    ]
    bio = sorted(b.fact_id for b in kb.biographies if b.subject in people)
    return {
        "relationships": sorted(i for i in near if i not in in_cone),
        "biographies": bio,
        "dropped": sorted(i for i in near if i in in_cone),
    }


def cone_ids(closure, targets) -> list[int]:
    """Relationship fact_ids of the KB facts in the cone of ``targets`` (relationship fact_ids): every fact with a
    path of rule instances to a target, the target included (:func:`dukb.solver.cone.cone_of`).

    Raises:
        InputError: a target that is not a relationship fact of the KB.
    """

    return sorted(cone_facts(closure, [int(t) for t in targets]))


_CLOSURES: dict = {}


def _row_cone(ctx: RowContext) -> list[int]:
    """The cone of a row's target: with ``ctx.closure`` when the row context carries one, else with the KB's closure
    under the family rules (the protocols' default; computed once per KB)."""
    closure = getattr(ctx, "closure", None)
    if closure is None:
        hit = _CLOSURES.get(id(ctx.kb))
        if hit is None or hit[0] is not ctx.kb:
            _CLOSURES.clear()
            hit = _CLOSURES[id(ctx.kb)] = (ctx.kb, compute_closure(ctx.kb, "family"))
        closure = hit[1]
    return cone_ids(closure, [ctx.target])


def rwku_fields(df, kb, forget_rel, neighbours: dict, mia: dict, exclude: dict | None = None, cone=()) -> dict:
    """RWKU's row fields from a probe table (with ``rouge_l`` recall) and the FM/RM MIA scores.

    Args:
        df: :func:`dukb.neural.probe.probe` table over every fact and the kinds FB, QA and AA (and others).
        kb: the KB.
        forget_rel: the request's forget fact_ids (relationships).
        neighbours: :func:`neighbour_facts`.
        mia: {"fm": {score: [...]}, "rm": {score: [...]}}.
        exclude: {"relationships": [...], "biographies": [...]}: facts a method trained on as retain data; they are
            scored in no group (honest evaluation).
        cone: relationship fact_ids of the targets' cone; those not forgotten are scored in no group (neither
            neighbour nor distant knowledge: they can derive a target).

    Returns:
        rouge_forget_{fb,qa,aa,all}, rouge_forget_aa_by_kind, rouge_neighbour_{fb,qa,all},
        rouge_distant_{fb,qa,all} (mean ROUGE-L recall in [0, 1]; All = the mean over the probes of the families,
        RWKU's "All"), mia_fm / mia_rm (score -> mean) and mia_auc_fm_rm (score -> AUC of FM against RM).

    Source: Jin et al. 2024 (RWKU), Sec. 3.3-4 (ROUGE-L recall; LOSS, Zlib, Min-K%, Min-K%++).
    """

    forget = {("relationship", int(i)) for i in forget_rel}
    neigh = {("relationship", i) for i in neighbours["relationships"]} | {
        ("biography", i) for i in neighbours["biographies"]
    }
    key = list(zip(df["fact_kind"], df["fact_id"].astype(int)))
    held = {("relationship", int(i)) for i in (exclude or {}).get("relationships", ())} | {
        ("biography", int(i)) for i in (exclude or {}).get("biographies", ())
    }
    coned = {("relationship", int(i)) for i in cone}
    group = [
        "forget"
        if k in forget
        else "retain_train"
        if k in held
        else "cone"
        if k in coned
        else "neighbour"
        if k in neigh
        else "distant"
        for k in key
    ]
    d = df.assign(group=group)

    def mean(s):
        return float(s.mean()) if len(s) else None

    out = {}
    f = d[d["group"] == "forget"]
    out["rouge_forget_fb"] = mean(f[f["kind"] == FB]["rouge_l"])
    out["rouge_forget_qa"] = mean(f[f["kind"] == QA]["rouge_l"])
    aa = f[f["kind"].isin(AA_KINDS)]
    out["rouge_forget_aa"] = mean(aa["rouge_l"])
    out["rouge_forget_all"] = mean(f[f["kind"].isin((FB, QA) + AA_KINDS)]["rouge_l"])
    out["rouge_forget_aa_by_kind"] = {
        k: mean(aa[aa["kind"] == k]["rouge_l"]) for k in AA_KINDS if (aa["kind"] == k).any()
    }
    for g in ("neighbour", "distant"):
        x = d[d["group"] == g]
        out[f"rouge_{g}_fb"] = mean(x[x["kind"] == FB]["rouge_l"])
        out[f"rouge_{g}_qa"] = mean(x[x["kind"] == QA]["rouge_l"])
        out[f"rouge_{g}_all"] = mean(x[x["kind"].isin((FB, QA))]["rouge_l"])
    out["mia_fm"] = {k: sum(v) / len(v) for k, v in mia["fm"].items() if v}
    out["mia_rm"] = {k: sum(v) / len(v) for k, v in mia["rm"].items() if v}
    out["mia_auc_fm_rm"] = {k: auc(mia["fm"][k], mia["rm"][k]) for k in mia["fm"] if mia["fm"][k] and mia["rm"][k]}
    return out


def qa_mia_scores(pred, items, k: float = 0.2, batch_size: int = 64) -> dict[str, list[float]]:
    """MIA scores of QA texts on their answer tokens (:func:`dukb.neural.metrics.mia.item_mia_scores`).

    Source: RWKU's released code (LOSS, Zlib), Shi et al. 2024a (Min-K%), Zhang et al. 2024 (Min-K%++).
    """

    return item_mia_scores(pred, items, k, batch_size)


def _distant_qa(ctx: RowContext):

    forget = {("relationship", int(i)) for i in ctx.forget_ids}
    cone = _row_cone(ctx)
    nb = neighbour_facts(ctx.kb, ctx.forget_ids, cone)
    near = forget | {("relationship", i) for i in nb["relationships"]} | {("biography", i) for i in nb["biographies"]}
    near |= {("relationship", i) for i in cone}  # the cone: neither neighbour nor distant
    near |= {("relationship", int(i)) for i in ctx.retain_ids.get("relationships", ())} | {
        ("biography", int(i)) for i in ctx.retain_ids.get("biographies", ())
    }  # trained on: never scored
    items = kb_qa(ctx.kb, (QA_KIND,))
    fm = [it for it in items if (it.fact_kind, it.fact_id) in forget]
    rm = [it for it in items if (it.fact_kind, it.fact_id) not in near]
    return fm, rm, nb


def rwku_rouge(ctx: RowContext) -> dict:
    """RWKU's ROUGE-L recall fields of one unlearned model (no MIA): rouge_forget_{fb,qa,aa,all},
    rouge_forget_aa_by_kind, rouge_neighbour_{fb,qa,all}, rouge_distant_{fb,qa,all}; the forget set is the row's
    forget set, the cone that of the row's target.

    Raises:
        KeyError: the probe table has no ``rouge_l`` column (probing without ROUGE).

    Source: Jin et al. 2024 (RWKU), Sec. 3.3-4.
    """
    cone = _row_cone(ctx)
    out = rwku_fields(
        ctx.probe,
        ctx.kb,
        ctx.forget_ids,
        neighbour_facts(ctx.kb, ctx.forget_ids, cone),
        {"fm": {}, "rm": {}},
        exclude=ctx.retain_ids,
        cone=cone,
    )
    for k in ("mia_fm", "mia_rm", "mia_auc_fm_rm"):
        out.pop(k)
    return out


def mia_fm_rm(ctx: RowContext) -> dict:
    """MIA of forget members against retain members under the unlearned model: mia_fm / mia_rm (score -> mean over
    the set) and mia_auc_fm_rm (score -> AUC with FM positive; ≈ 0.5 or below once the forget facts look like
    non-members). Scores: LOSS, Zlib, Min-K% Prob, Min-K%++ (k = 0.2).

    Raises:
        ValueError: the row context carries no predictor.

    Source: Jin et al. 2024 (RWKU), Sec. 3.3 (FM vs RM); Shi et al. 2024a; Zhang et al. 2024.
    """

    if ctx.predictor is None:
        raise ValueError("mia_fm_rm needs the unlearned model (RowContext.predictor)")
    fm, rm, _nb = _distant_qa(ctx)
    s_fm, s_rm = qa_mia_scores(ctx.predictor, fm), qa_mia_scores(ctx.predictor, rm)
    return {
        "mia_fm": {k: sum(v) / len(v) for k, v in s_fm.items() if v},
        "mia_rm": {k: sum(v) / len(v) for k, v in s_rm.items() if v},
        "mia_auc_fm_rm": {k: auc(s_fm[k], s_rm[k]) for k in s_fm if s_fm[k] and s_rm[k]},
    }


RWKU_ROUGE = Metric(
    "rwku_rouge",
    rwku_rouge,
    Needs(kinds=(QA, FB) + AA_KINDS, generate=True, rouge=True),
    "row",
    (
        "rouge_forget_fb",
        "rouge_forget_qa",
        "rouge_forget_aa",
        "rouge_forget_all",
        "rouge_forget_aa_by_kind",
        "rouge_neighbour_fb",
        "rouge_neighbour_qa",
        "rouge_neighbour_all",
        "rouge_distant_fb",
        "rouge_distant_qa",
        "rouge_distant_all",
    ),
    "RWKU's ROUGE-L recall of the forget set's FB, QA and adversarial probes, and of neighbour and distant facts",
    "Jin et al. 2024 (RWKU), Sec. 3.3-4",
)
MIA_FM_RM = Metric(
    "mia_fm_rm",
    mia_fm_rm,
    Needs(kinds=(QA,), model=True),
    "row",
    ("mia_fm", "mia_rm", "mia_auc_fm_rm"),
    "MIA (LOSS, Zlib, Min-K%, Min-K%++) of forget members against distant retain members",
    "Jin et al. 2024 (RWKU), Sec. 3.3; Shi et al. 2024a; Zhang et al. 2024",
)

__all__ = [
    "AA_KINDS",
    "FB",
    "MIA_FM_RM",
    "QA",
    "RWKU_ROUGE",
    "cone_ids",
    "mia_fm_rm",
    "neighbour_facts",
    "qa_mia_scores",
    "rwku_fields",
    "rwku_rouge",
]
