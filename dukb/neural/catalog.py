"""The registrations: every method, preset, metric, attack and control strategy, declared once as data.

Each item is one entry of a lazy :class:`dukb.neural.registry.Registry`: its name, where its object lives
(``"module:attr"``, imported on first use) and its metadata as plain data (summary, source paper, swept parameter and
grid, options with their defaults and ranges, level, kind). ``--help``, `dukb methods`, the docs build and the CLI's
parse-time checks read the metadata from here without importing torch or any module that uses it; the modules that
need the objects (:mod:`dukb.neural.methods`, :mod:`dukb.neural.metrics`, :mod:`dukb.neural.attacks`) use the same
registries. tests/cli/test_help_catalog.py loads every entry and checks that its declared metadata equals the object's, so the
data cannot drift.

Adding a method: its module (a :class:`dukb.neural.methods.base.Method` subclass and its loss) and one
:class:`MethodEntry` line in :data:`METHODS`; a metric: its module and one :class:`MetricEntry` in :data:`METRICS`;
an attack: its module (an :class:`dukb.neural.attacks.base.Attack` constant) and one :class:`AttackEntry` in
:data:`ATTACKS`.

Source: dukb (the CLI's import graph; issue 40, item 4); the lazy ``name -> "module:attr"`` registry follows
lm-eval-harness (EleutherAI, lm_eval/api/registry.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dukb.neural.registry import Registry
from dukb.neural.tables import Table
from dukb.solver.scopes import FORGET_SCOPES


@dataclass(frozen=True)
class Option:
    """A per-method option (``METHOD:KEY=VALUE``): a float, above 0 (or at least 0 when ``nonnegative``).

    Attributes:
        name: the option's key (the method's attribute its loss reads).
        default: the registered method's value (None: the method decides at run time, e.g. CL-DU's λ).
        nonnegative: 0 is allowed.
    """

    name: str
    default: float | None = None
    nonnegative: bool = False

    @property
    def range(self) -> str:
        """The option's range as text (``> 0`` or ``≥ 0``)."""
        return "≥ 0" if self.nonnegative else "> 0"


@dataclass(frozen=True)
class MethodEntry:
    """One unlearning method (:data:`METHODS`).

    Attributes:
        name: registry name (``--methods NAME``).
        target: ``module:Class`` of its :class:`~dukb.neural.methods.base.Method` subclass.
        param: the swept hyper-parameter ("steps", "alpha", "rounds", "icu").
        grid: the default grid (the paper's).
        lr_kind: the learning-rate kind of :data:`dukb.neural.families.LR_KINDS` (None: no trained weights).
        summary: one line for help texts and tables.
        source: the paper(s) defining it.
        args, kwargs: the class's constructor arguments (the variant).
        options: its per-method options besides ``lr`` (:class:`Option`).
        document_level: its forget term also unlearns plain documents (RESTOR).
    """

    name: str
    target: str
    param: str
    grid: tuple
    lr_kind: str | None
    summary: str
    source: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    options: tuple[Option, ...] = ()
    document_level: bool = False
    call = True  # the target is a class: the object is an instance (Registry's rule; not a field)


@dataclass(frozen=True)
class Preset:
    """A named bundle of method, forget scope and grid (an entry of :data:`PRESETS`; its own object).

    Attributes:
        name: registry name (used in ``--methods`` and ``--method``).
        method: a :data:`METHODS` name.
        scope: a :data:`dukb.solver.scopes.FORGET_SCOPES` name.
        grid: the values of the method's parameter (None: the method's default grid).
        summary: one line for help texts.
        schedule: how ``dukb evaluate`` runs the preset's step grid (:data:`dukb.neural.trainconfig.SWEEP_SCHEDULES`),
            whatever the run's ``--schedule`` says; None: the run's ``--schedule``.
    """

    name: str
    method: str
    scope: str
    grid: tuple | None
    summary: str
    schedule: str | None = None


@dataclass(frozen=True)
class Entry:
    """What every entry of a registry of objects declares: its name, where the object lives, and what it is.

    Attributes:
        name: registry name (the command-line name: ``--metrics NAME``, ``--attacks NAME``).
        target: ``module:CONSTANT`` of the object (a :class:`~dukb.neural.metrics.base.Metric`, an
            :class:`~dukb.neural.attacks.base.Attack`).
        summary: what it measures or does, one line.
        source: the paper (and equation) it follows.
    """

    name: str
    target: str
    summary: str
    source: str


@dataclass(frozen=True)
class MetricEntry(Entry):
    """One metric (:data:`METRICS`): an :class:`Entry` and

    Attributes:
        level: "row" (fields of every result row) or "summary" (per method, over a run's rows).
        calls: the metric's computations that protocols call with their own arguments (call name ->
            ``"module:function"``; :func:`dukb.neural.metrics.metric_call`), beside the row function ``fn`` of
            the :class:`~dukb.neural.metrics.base.Metric` that `dukb evaluate` calls.
    """

    level: str = "row"
    calls: dict = field(default_factory=dict)


@dataclass(frozen=True)
class AttackEntry(Entry):
    """One attack (:data:`ATTACKS`): an :class:`Entry` and

    Attributes:
        defaults: setting -> default value (a setting is read as its default's type).
    """

    defaults: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ControlEntry:
    """One control of excessive unlearning (:data:`CONTROL_STRATEGIES`; Wang et al. 2024, Sec. 5).

    Attributes:
        name: the control kind (``--control``).
        target: ``module:Class`` of its :class:`~dukb.neural.methods.base.ControlStrategy`.
        param: what the grid sweeps ("steps", "tau", "alpha").
        summary: one line.
    """

    name: str
    target: str
    param: str
    summary: str
    call = True  # the target is a class: the object is an instance (Registry's rule; not a field)


_M = "dukb.neural.methods"
_STEPS = (1, 2, 4, 8, 16)
_ROUNDS = (1, 2, 3, 4, 6, 8, 12, 16)
_REG = {None: "", "gdr": " + gradient descent on retain QA (GDR)", "klr": " + KL to f_ref on retain QA (KLR)"}
_BETA = (Option("beta", 0.1),)
_GA = ("gradient ascent on the forget QA", "Jang et al. 2023; Wu et al. 2025, App. H")
_KL = ("maximise the divergence from f_ref on the forget QA", "Rezaei et al. (RESTOR), Sec. 3.3")
_NPO = (
    "negative preference optimisation on the forget QA, Eval-DU's and MUSE's code form: raw logits vs f_ref, "
    "mean over every position and vocabulary entry",
    "Zhang et al. 2024; Eval-DU code (wrh14/deep_unlearning "
    "unlearn_trainer.py); MUSE code (swj0419/muse_bench iterative.py)",
)
_NPO_SEQ = (
    "negative preference optimisation on the forget QA, the NPO paper's sequence form: whole-answer "
    "likelihood ratio to f_ref",
    "Zhang et al. 2024, Eq. 3; Wu et al. 2025, App. H (text); RWKU code",
)
_SIMNPO = ("reference-free, length-normalised NPO on the forget QA (SimNPO)", "Fan et al. 2024 (SimNPO), Eq. 4")
_CL_SRC = "dukb (closed loop with the solver); GA + GDR losses"
_CL_NPO_SRC = "dukb (closed loop with the solver); NPO (Zhang et al. 2024, Eq. 3) + GDR losses"
_CL_OPTS = (Option("reg_weight"), Option("retain_batch"))
_STRICT = _CL_OPTS + (Option("min_prob", 0.10000000929940499),)  # exp(-2.30259), the strict variants' threshold
_KNOWN_UNTIL = (
    "counts a fact as known until greedy decoding misses it and its answer's mean token log-prob is below -2.30259"
)


def _reg(name, target, what, reg=None, lr_kind="ga", **kw) -> MethodEntry:
    """A gradient method's entry with its retain regulariser ``reg`` (None, "gdr", "klr"): the name and summary
    carry the regulariser, the constructor gets it."""
    summary, source = what
    return MethodEntry(
        name + (f"_{reg}" if reg else ""),
        target,
        "steps",
        _STEPS,
        lr_kind,
        summary + _REG[reg],
        source,
        args=(reg,) if reg else (),
        **kw,
    )


def _cl(variant, summary, options=_CL_OPTS, source=_CL_SRC) -> MethodEntry:
    """A closed-loop deep unlearning variant's entry."""
    return MethodEntry(
        "cl_du" + (f"_{variant}" if variant else ""),
        f"{_M}.closed_loop:ClosedLoopDeepUnlearning",
        "rounds",
        _ROUNDS,
        "cl",
        summary,
        source,
        args=(variant,) if variant else (),
        options=options,
    )


#: Every unlearning method, by registry name (objects: :mod:`dukb.neural.methods`' classes, instantiated on use).
METHODS: Registry = Registry(
    "method",
    (
        *(_reg("ga", f"{_M}.ga:GradientAscent", _GA, r, document_level=r is None) for r in (None, "gdr", "klr")),
        *(_reg("kl", f"{_M}.kl:KLDivergence", _KL, r, "kl", document_level=r is None) for r in (None, "gdr", "klr")),
        *(
            _reg("npo", f"{_M}.npo:NPO", _NPO, r, "npo", options=_BETA, document_level=r is None)
            for r in (None, "gdr", "klr")
        ),
        *(
            _reg("npo_seq", f"{_M}.npo:NPO", _NPO_SEQ, r, "npo", options=_BETA, kwargs={"form": "sequence"})
            for r in (None, "gdr", "klr")
        ),
        *(
            _reg(
                "simnpo",
                f"{_M}.simnpo:SimNPO",
                _SIMNPO,
                r,
                "npo",
                options=(Option("beta", 2.5), Option("gamma", 0.0, nonnegative=True)),
            )
            for r in (None, "gdr")
        ),
        MethodEntry(
            "po",
            f"{_M}.po:PreferenceOptimisation",
            "steps",
            _STEPS,
            "ga",
            "gradient descent on refusals ('I don't know.') to the forget questions + GDR on retain QA (PO)",
            "Maini et al. 2024 (TOFU); Wang et al. 2024, App. E",
        ),
        MethodEntry(
            "rt",
            f"{_M}.rt:RejectionTuning",
            "steps",
            _STEPS,
            "ga",
            "rejection tuning: refusals to the forget facts' questions (QA and reverse forms)",
            "Jin et al. 2024 (RWKU), App. H",
        ),
        MethodEntry(
            "dpo",
            f"{_M}.dpo:DPO",
            "steps",
            _STEPS,
            "npo",
            "DPO preferring a counterfactual answer over the true forget answer, against f_ref",
            "Rafailov et al. 2023; Jin et al. 2024 (RWKU), App. H",
            options=_BETA,
        ),
        MethodEntry(
            "dpo_refusal",
            f"{_M}.dpo:DPO",
            "steps",
            _STEPS,
            "npo",
            "DPO preferring a refusal over the true forget answer, against f_ref",
            "Rafailov et al. 2023; Jin et al. 2024 (RWKU), App. H",
            args=("refusal",),
            options=_BETA,
        ),
        MethodEntry(
            "tv",
            f"{_M}.tv:TaskVector",
            "alpha",
            (0.2, 0.5, 1.0, 5.0, 10.0),
            "reinforce",
            "task vector negation: θ₀ − α (θ_reinforced − θ₀)",
            "Ilharco et al. 2023; Wu et al. 2025, Sec. 4",
        ),
        MethodEntry(
            "whp",
            f"{_M}.whp:WHP",
            "alpha",
            (0.5, 1.0, 5.0, 10.0, 100.0, 1000.0),
            "reinforce",
            "Who's Harry Potter logit steering away from the reinforced model",
            "Eldan & Russinovich 2023; Wu et al. 2025, Eq. 3",
        ),
        MethodEntry(
            "icu",
            f"{_M}.icu:InContextUnlearning",
            "icu",
            (1,),
            None,
            "in-context unlearning: RWKU's 'unlearn about {target}' instruction before every prompt, no weight change",
            "Jin et al. 2024 (RWKU), App. H",
        ),
        MethodEntry(
            "repe",
            f"{_M}.repe:RepE",
            "alpha",
            (0.5, 1.0, 1.5),
            None,
            "representation engineering: add α·(novice − expert) activations about the target to middle blocks",
            "Zou et al. 2023; Jin et al. 2024 (RWKU), App. H",
        ),
        _cl(
            None,
            "closed-loop deep unlearning: unlearn the still-known facts of the cheapest minimal set, re-probe, stop "
            "once the solver finds the target underivable",
        ),
        _cl("fixed", "CL-DU ablation: no closed loop (fixed steps on the initially cheapest set)"),
        _cl("noselect", "CL-DU ablation: the set is chosen once, not re-selected each round"),
        _cl("noneighbour", "CL-DU ablation: retain batches from all retain-train facts, not neighbours"),
        _cl(
            "multiform",
            "CL-DU querying and unlearning several forms (qa, paraphrase, cloze): a fact is still known "
            "when any of them elicits it",
        ),
        _cl(
            "multiform_retain",
            "CL-DU querying, unlearning and retaining several forms (qa, paraphrase, cloze): "
            "multiform whose retain batches also ask the neighbour facts in those forms",
        ),
        _cl(
            "retainforms",
            "CL-DU (qa in the loop and the forget data) whose retain batches ask the neighbour facts in "
            "qa, paraphrase, cloze",
        ),
        _cl("npo", "CL-DU whose forget term is NPO's (sequence form, beta 0.1) instead of GA's", source=_CL_NPO_SRC),
        _cl("strict", f"CL-DU whose loop {_KNOWN_UNTIL}", _STRICT),
        _cl(
            "noneighbour_strict",
            f"CL-DU with retain batches from all retain-train facts whose loop {_KNOWN_UNTIL}",
            _STRICT,
        ),
        _cl(
            "noneighbour_npo",
            "CL-DU with NPO's forget term (sequence form, beta 0.1) and retain batches from all retain-train facts",
            source=_CL_NPO_SRC,
        ),
    ),
)

#: Deep-unlearning-aware presets: forgetting a deep unlearning set chosen by the solver instead of the target
#: alone. The grids are finer at the weak end than the paper's {1,2,4,8,16}: forgetting a whole deep unlearning set
#: needs fewer steps per fact than the target alone, and the useful region is there. They keep what they were
#: measured with (bench/RESULTS.md): NPO's sequence form (``npo_seq``) and each T its own run from θ₀ ("separate"),
#: also when ``dukb evaluate`` runs GA and NPO with Eval-DU's reference schedule and form.
PRESETS: Registry = Registry(
    "preset",
    (
        Preset("du_ga", "ga", "minimum", (1, 2, 3, 4, 6, 8), "GA on a minimum deep unlearning set", "separate"),
        Preset(
            "du_npo",
            "npo_seq",
            "minimum",
            (1, 2, 3, 4, 6, 8),
            "NPO (the NPO paper's sequence form) on a minimum deep unlearning set",
            "separate",
        ),
        Preset(
            "du_ga_gdr",
            "ga_gdr",
            "minimum",
            (2, 4, 6, 8, 12, 16),
            "GA + GDR on a minimum deep unlearning set",
            "separate",
        ),
        Preset(
            "du_npo_gdr",
            "npo_seq_gdr",
            "minimum",
            (1, 2, 3, 4, 6, 8),
            "NPO (sequence form) + GDR on a minimum deep unlearning set",
            "separate",
        ),
        Preset(
            "du_npo_gdr_best",
            "npo_seq_gdr",
            "best",
            (1, 2, 3, 4, 6, 8),
            "NPO (sequence form) + GDR on the least damaging minimal set",
            "separate",
        ),
        Preset(
            "du_cl",
            "cl_du",
            "target",
            _ROUNDS,
            "closed-loop deep unlearning (the solver picks and re-picks what to unlearn)",
        ),
        Preset(
            "du_cl_multiform",
            "cl_du_multiform",
            "target",
            _ROUNDS,
            "closed-loop deep unlearning that asks and unlearns qa, paraphrase and cloze (scored on the other forms)",
        ),
        Preset(
            "du_cl_multiform_retain",
            "cl_du_multiform_retain",
            "target",
            _ROUNDS,
            "du_cl_multiform whose retain batches also ask the neighbour facts in qa, paraphrase and cloze",
        ),
        Preset(
            "du_cl_strict",
            "cl_du_strict",
            "target",
            _ROUNDS,
            "closed-loop deep unlearning that keeps unlearning a fact until its answer's probability is low, not only "
            "until greedy decoding misses it",
        ),
    ),
)

_X = "dukb.neural.metrics"
_UWC = "Wang et al. 2024 (Unlearning with Control)"
#: Every metric, by registry name; one registry serves every protocol (evaluate, rwku, muse, control).
METRICS: Registry = Registry(
    "metric",
    (
        MetricEntry(
            "recall",
            f"{_X}.recall:RECALL",
            "recall and accuracy of deep unlearning against the minimal deep unlearning sets",
            "Wu et al. 2025, Eq. 1-2",
            calls={"success_du": f"{_X}.recall:success_du_all"},
        ),
        MetricEntry(
            "recall_heldout",
            f"{_X}.heldout:RECALL_HELDOUT",
            "recall and accuracy when only probe forms the method never trained on or queried may elicit a fact",
            "Wu et al. 2025, Eq. 1-2 over held-out forms; RWKU (Jin et al. 2024), Sec. 3.3",
            calls={"forgotten": f"{_X}.heldout:heldout_forgotten"},
        ),
        MetricEntry(
            "recall_under_attack",
            f"{_X}.attack:RECALL_UNDER_ATTACK",
            "recall and accuracy when a fact counts as known if any QA or RWKU adversarial probe elicits it",
            "Wu et al. 2025, Eq. 1-2; Jin et al. 2024 (RWKU), Sec. 3.3",
        ),
        MetricEntry(
            "rouge_l",
            f"{_X}.text:ROUGE_L",
            "mean ROUGE-L recall of QA answers, forget vs other facts",
            "Shi et al. 2024 (MUSE), Sec. 3",
        ),
        MetricEntry(
            "logprob",
            f"{_X}.text:ANSWER_LOGPROB",
            "mean answer log-probability per token, forget vs other facts",
            "Wu et al. 2025, App. C",
        ),
        MetricEntry(
            "knowmem",
            f"{_X}.muse:KNOWMEM",
            "MUSE KnowMem: ROUGE-L F1 of QA answers on the forget set and on the scored retained facts",
            "Shi et al. 2024b (MUSE), Sec. 3, C2/C4",
            calls={"score": f"{_X}.muse:knowmem"},
        ),
        MetricEntry(
            "verbmem",
            f"{_X}.muse:VERBMEM",
            "MUSE VerbMem: ROUGE-L F1 of the continuation of each forget fact's statement prefix",
            "Shi et al. 2024b (MUSE), Sec. 3, C1",
            calls={"score": f"{_X}.muse:verbmem"},
        ),
        MetricEntry(
            "rwku_rouge",
            f"{_X}.rwku:RWKU_ROUGE",
            "RWKU's ROUGE-L recall of the forget set's FB, QA and "
            "adversarial probes, and of neighbour and distant facts",
            "Jin et al. 2024 (RWKU), Sec. 3.3-4",
            calls={"fields": f"{_X}.rwku:rwku_fields"},
        ),
        MetricEntry(
            "mia_fm_rm",
            f"{_X}.rwku:MIA_FM_RM",
            "MIA (LOSS, Zlib, Min-K%, Min-K%++) of forget members against distant retain members",
            "Jin et al. 2024 (RWKU), Sec. 3.3; Shi et al. 2024a; Zhang et al. 2024",
            calls={"scores": f"{_X}.rwku:qa_mia_scores"},
        ),
        MetricEntry(
            "ps_exact",
            f"{_X}.ps:PS_EXACT",
            "PS-exact (memorisation: shortest answer prefix after which "
            "greedy decoding reproduces the rest) and the response confidence, forget vs retained facts",
            f"{_UWC}, Eq. 2-3; App. D",
            calls={"vector": f"{_X}.ps:ps_vector"},
        ),
        MetricEntry(
            "ps_perturb",
            f"{_X}.ps:PS_PERTURB",
            "PS-perturb (extrapolation: PS-exact on the paraphrased question), forget vs retained facts",
            f"{_UWC}, Eq. 4",
        ),
        MetricEntry(
            "ps_similar",
            f"{_X}.ps:PS_SIMILAR",
            "PS-similar (coherency: ROUGE-L recall >= 0.5 instead of exact match), forget vs retained facts",
            f"{_UWC}, Eq. 5",
        ),
        MetricEntry(
            "tradeoff",
            f"{_X}.run_summary:TRADEOFF",
            "Acc@Recall≥0.8, Recall@Acc≥0.8 and AR-AUC (per target, mean ± std; and off the mean envelope), Success-DU",
            "Wu et al. 2025, Table 1, Def. 2",
            "summary",
        ),
        MetricEntry(
            "acc_at_superficial",
            f"{_X}.run_summary:ACC_AT_SUPERFICIAL",
            "per target the best accuracy among settings that forget the target itself (0 if none), mean ± std",
            "Wu et al. 2025, Table 2",
            "summary",
        ),
    ),
)

#: What `dukb evaluate` computes without --metrics: the paper's protocol.
DEFAULT_METRICS = ("recall", "recall_heldout", "tradeoff", "acc_at_superficial")

_A = "dukb.neural.attacks"
_QUANT = "Zhang et al. 2025, arXiv 2410.16454"
#: Every attack on an unlearned model, by registry name (checked on load: every numeric setting has a range).
ATTACKS: Registry = Registry(
    "attack",
    (
        AttackEntry(
            "incontext",
            f"{_A}.incontext:INCONTEXT",
            "for each forgotten fact of the target's cone, the premises "
            "of every rule instance (`instances`=N: the first N) the model still knows go before its question "
            "(premises=self: the fact's own sentence); compared with the model before unlearning",
            "Wu et al. 2025, Definitions 1-2",
            {"instances": 0, "premises": "rules"},
        ),
        AttackEntry(
            "logitlens",
            f"{_A}.logitlens:LOGITLENS",
            "rank of the gold answer's first token at every layer "
            "(final norm + unembedding); a fact is recoverable when it ranks in the top `k` at some intermediate "
            "layer",
            "nostalgebraist 2020; Patil et al. 2024 (ICLR)",
            {"k": 1},
        ),
        AttackEntry(
            "quant8",
            f"{_A}.quant:QUANT8",
            "int8 weight-only RTN quantization of every Linear (torchao), then probe",
            _QUANT,
        ),
        AttackEntry(
            "quant4",
            f"{_A}.quant:QUANT4",
            "int4 weight-only RTN quantization in groups of `group` input channels (torchao), then probe",
            _QUANT,
            {"group": 32},
        ),
        AttackEntry(
            "quant16",
            f"{_A}.quant:QUANT16",
            "control: every weight rounded to float16 and back; must change no answer",
            _QUANT,
        ),
        AttackEntry(
            "relearn",
            f"{_A}.relearn:RELEARN",
            "finetune a copy for `steps` steps on `facts` facts outside the "
            "forget set (mode neighbours: sharing a person with it; half: a random half of the target's forgotten "
            "premises; target: the target itself; random: about people it does not mention, the control), then "
            "probe",
            "Hu et al. 2025, arXiv 2406.13356",
            {"mode": "neighbours", "facts": 8, "steps": 8, "lr": 0.0},
        ),
    ),
    check=f"{_A}.base:check_attack",
)

_B = "dukb.neural.methods.controls"
#: The controls of excessive unlearning every gradient method takes (``--control``; Wang et al. 2024, Sec. 5).
CONTROL_STRATEGIES: Registry = Registry(
    "control",
    (
        ControlEntry("none", f"{_B}:Uncontrolled", "steps", "no control: the grid is the number of steps T"),
        ControlEntry(
            "oc",
            f"{_B}:ObjectiveCapping",
            "tau",
            "objective capping: the forget term dropped once the unlearning risk reaches τ",
        ),
        ControlEntry("es", f"{_B}:EarlyStopping", "steps", "early stopping: one run read at each T of the grid"),
        ControlEntry("mm", f"{_B}:ModelMixing", "alpha", "model mixing: (1−α)·θ₀ + α·θ_u"),
    ),
)


def method_names() -> list[str]:
    """Registered method names, in registry order."""
    return list(METHODS)


def preset_names() -> list[str]:
    """Registered preset names (deep-unlearning-aware presets), in registry order."""
    return list(PRESETS)


def document_methods() -> list[str]:
    """Methods whose forget term also unlearns plain documents (RESTOR's ga, kl, npo)."""
    return [e.name for e in METHODS.entries() if e.document_level]


def methods_help() -> str:
    """One-line list of the registered methods, scopes, presets and per-method options for ``--help`` texts."""
    opts = sorted({o.name for e in METHODS.entries() for o in e.options})
    return (
        f"Methods: {', '.join(method_names())}; METHOD@SCOPE with scope {', '.join(FORGET_SCOPES)} (e.g. "
        f"npo_gdr@minimum); deep-unlearning-aware presets: {', '.join(preset_names())}. Per-method options: "
        f"METHOD:KEY=VALUE[:KEY=VALUE] with lr (every trained method) or {', '.join(opts)} (the methods whose "
        "loss has it, `dukb methods`), e.g. npo:beta=0.05:lr=1e-3; the row's method label keeps them."
    )


def default_metrics() -> tuple[str, ...]:
    """The metrics ``dukb evaluate`` computes by default."""
    return DEFAULT_METRICS


def metrics_help() -> str:
    """One line listing the registered metrics for ``--help``."""
    return "; ".join(f"{e.name}: {e.summary}" for e in METRICS.entries())


def attack_names() -> list[str]:
    """Registered attack names, sorted."""
    return sorted(ATTACKS)


def attacks_help() -> str:
    """One line per attack name and summary, for ``--help``."""
    return "; ".join(f"{e.name}: {e.summary}" for e in sorted(ATTACKS.entries(), key=lambda e: e.name))


def attack_settings_help() -> str:
    """Each attack with its settings and their defaults (``dukb attack --help``)."""
    return "; ".join(
        f"{e.name} ({', '.join(f'{k}={v}' for k, v in e.defaults.items()) or 'no settings'})"
        for e in sorted(ATTACKS.entries(), key=lambda e: e.name)
    )


#: MUSE's rules for picking the unlearned model that C6 continues from (Shi et al. 2024b, Sec. 4; declared here as
#: data, :mod:`dukb.neural.metrics.muse` applies them).
SELECTION_RULES = ("first_below_retrain", "last", "closest_utility")
#: search strategies of PS over the prefix length k (:mod:`dukb.neural.metrics.ps`, ``dukb control --search``)
SEARCHES = ("bisection", "linear")


def selection_rules() -> list[str]:
    """MUSE's rules for picking the unlearned model that C6 continues from (:data:`SELECTION_RULES`)."""
    return list(SELECTION_RULES)


def methods_table() -> Table:
    """The methods' reference table from the registry's entries (no method is imported): name, swept parameter,
    default grid, per-method options (``lr`` for every trained method), summary, source (`dukb methods`, the docs'
    reference/methods page)."""
    rows = []
    for e in METHODS.entries():
        grid = ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in e.grid)
        opts = ", ".join(
            (["lr"] if e.lr_kind else []) + [o.name + (" (≥ 0)" if o.nonnegative else "") for o in e.options]
        )
        rows.append((e.name, e.param, grid, opts, e.summary, e.source))
    return Table(
        "Methods",
        ("method", "parameter", "default grid", "options (METHOD:KEY=VALUE)", "what it does", "source"),
        tuple(rows),
        "`--methods` / `--method` take these names; `METHOD@SCOPE` picks a forget scope, "
        "`METHOD:KEY=VALUE` sets an option (values must be > 0, or ≥ 0 where marked).",
    )


def presets_table() -> Table:
    """The presets' reference table: name, method, forget scope, grid, schedule."""
    rows = []
    for p in PRESETS.values():
        sched = p.schedule or ("the run's `--schedule`" if METHODS.entry(p.method).param == "steps" else "")
        rows.append((p.name, p.method, p.scope, ", ".join(map(str, p.grid or ())), sched))
    return Table(
        "Presets",
        ("preset", "method", "forget scope", "grid", "schedule"),
        tuple(rows),
        "Deep-unlearning-aware presets: a method, a forget scope chosen by the solver and a grid.",
        (0, 1),
    )


def scopes_table() -> Table:
    """The forget scopes' reference table (:data:`dukb.solver.scopes.FORGET_SCOPES`): name and forget set."""
    return Table(
        "Forget scopes",
        ("forget scope", "what the forget set holds"),
        tuple((s.name, s.summary) for s in FORGET_SCOPES.values()),
    )


def metrics_table() -> Table:
    """The metrics' reference table from the registry: name, level, fields, what it measures, source (`dukb
    methods`, the docs' reference/metrics page; the fields come from the metrics, whose modules use no torch)."""
    return Table(
        "Metrics",
        ("metric", "level", "fields", "what it measures", "source"),
        tuple((e.name, e.level, ", ".join(METRICS[e.name].fields), e.summary, e.source) for e in METRICS.entries()),
        "`dukb evaluate --metrics` takes these names (default: " + ", ".join(DEFAULT_METRICS) + "). A row "
        "metric adds fields to every result row; a summary metric to summary.csv and the report.",
    )


def attacks_table() -> Table:
    """The attacks' reference table (name, settings with their defaults, what it does, source), sorted by name,
    from the registry's entries (no attack is imported; `dukb methods`, the docs' reference/attacks page)."""
    return Table(
        "Attacks",
        ("attack", "settings (defaults)", "what it does", "source"),
        tuple(
            (a.name, ", ".join(f"{k}={v}" for k, v in a.defaults.items()), a.summary, a.source)
            for a in sorted(ATTACKS.entries(), key=lambda a: a.name)
        ),
        "`dukb evaluate --attacks` and `dukb attack` take these names; an attack is applied to an unlearned "
        "model and the model is probed again.",
    )


__all__ = [
    "ATTACKS",
    "AttackEntry",
    "CONTROL_STRATEGIES",
    "ControlEntry",
    "DEFAULT_METRICS",
    "Entry",
    "METHODS",
    "METRICS",
    "MethodEntry",
    "MetricEntry",
    "Option",
    "PRESETS",
    "Preset",
    "SELECTION_RULES",
    "attack_names",
    "attack_settings_help",
    "attacks_help",
    "attacks_table",
    "default_metrics",
    "document_methods",
    "method_names",
    "methods_help",
    "methods_table",
    "metrics_help",
    "metrics_table",
    "preset_names",
    "presets_table",
    "scopes_table",
    "selection_rules",
]
