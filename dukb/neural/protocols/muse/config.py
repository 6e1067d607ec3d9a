"""`dukb muse`'s config, requests and model metrics: MUSE's six-way evaluation (Shi et al. 2024b) on a KB, resumable;
the stages run in :mod:`dukb.neural.protocols.muse.run`.

Stages (each consumes the previous one's output):

1. **plan** (symbolic): KB, closure, the run's targets; the base split (holdout and retain pools,
   :func:`dukb.solver.splits.base_split`, the holdout kept outside every target's cone); one forget set per request
   (a minimum joint deep unlearning set of the request's targets, :func:`dukb.solver.splits.forget_set`). Requests:
   ``main`` (the first ``n_targets`` targets), ``scale-c`` (the first c targets, c ∈ ``scale_sizes``: C5) and
   ``sustain-k`` (sequential requests whose cumulative forget sets are the scalability sets: C6). splits.json
   records every fact id of every split.
2. **models**: f_target finetuned on the QA pairs and statement texts of every trained fact (the KB minus the
   holdout: the knowledge KnowMem asks about is installed here, the only stage that trains a QA pair); f_retrain
   finetuned the same way, same preset and seed, on the trained facts minus a request's forget set, cached per
   forget set under ``RUN_DIR/models/``.
3. **sweep**: every method over its grid from f_target, unlearning the forget facts' statement texts alone (MUSE
   unlearns on the forget corpus D_forget; its QA sets are evaluation-only), with the retain_train facts' statement
   texts (MUSE's D_retain^(reg)) as the regulariser's data. No KnowMem QA pair is trained by unlearning; rows record
   what was trained (``trained_forms``, ``trained_fact_ids``) and what was scored (``scored_forms``).
4. **metrics** per model: VerbMem on the forget texts, KnowMem on forget and retain_eval QA, MIA AUCs (LOSS, Zlib,
   Min-K%, Min-K%++; forget vs holdout and retain_eval vs holdout) and PrivLeak against f_retrain
   (:mod:`dukb.neural.metrics.muse`). One row per model, written at once.
5. **report**: :mod:`dukb.neural.protocols.muse.report` (Table 3 layout, ratios to f_retrain, bootstrap CIs, the selection
   rule, C5/C6 curves, ROC).

Source: Shi et al. 2024b (MUSE), Sec. 2-4; Wu et al. 2025, Definition 2 (joint deep unlearning sets).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar

from dukb import InputError
from dukb.neural.bounds import BOOTSTRAP, FRACTION_HALF, FRACTION_OPEN, N_TARGETS, NEW_TOKENS, TEMPERATURE, Range
from dukb.neural.catalog import SELECTION_RULES, methods_help, selection_rules
from dukb.neural.data import QA_KIND, kb_qa, kb_texts
from dukb.neural.declare import SHARED, compat_option, option
from dukb.neural.families import identity_lr
from dukb.neural.run.identity import sha256_json
from dukb.neural.runconfig import RunConfig

#: MUSE's eight methods (Shi et al. 2024b, Sec. 4)
MUSE_METHODS = ("ga", "ga_gdr", "ga_klr", "npo", "npo_gdr", "npo_klr", "tv", "whp")
#: MUSE runs C5/C6 for GA, NPO and their regularised variants
CURVE_METHODS = ("ga", "ga_gdr", "npo", "npo_gdr")
#: version of what `dukb muse` unlearns on, in its run identity (1: the forget QA pairs and texts, retain QA and
#: texts; 2: the statement texts alone): a run of another version is not resumed
MUSE_TRAINING_VERSION = 2
#: what each MUSE metric scores: KnowMem the QA pairs (evaluation-only), VerbMem and the MIA the statement texts
SCORED_FORMS = {"knowmem": ["qa"], "verbmem": ["statement"], "mia": ["statement"]}
#: MUSE's unlearning rate, every method alike (swj0419/muse_bench baselines/baselines/iterative.py:19
#: ``learning_rate=1e-5``; baselines/scripts/unlearn_news.sh ``LR='1e-5'``; Shi et al. 2024b, App. D: constant 1e-5)
MUSE_LR = 1e-5
#: the in-context examples KnowMem may put before each question (MUSE-News: 10 per QA set)
ICL_EXAMPLES = Range(0, 1000, why="in-context QA examples")
#: ``--compat muse``: the value of each component in MUSE's released code (swj0419/muse_bench; docs: "dukb vs the
#: papers' code", MUSE): KnowMem as metrics/knowmem.py with eval.py's 32 tokens and the knowmem ICL files (10
#: examples each in MUSE-News), KLR as iterative.py's ``F.kl_div`` on raw logits, every method at 1e-5 in one
#: constant-rate run (iterative.py's TrainingArguments), VerbMem's fixed 128-token continuation (metrics/verbmem.py)
MUSE_COMPAT: dict = {
    "muse": {
        "knowmem_tokens": 32,
        "knowmem_icl": 10,
        "knowmem_prompt": "muse",
        "klr_form": "raw_logits",
        "unlearn_lr_rule": "muse",
        "unlearn_schedule": "constant",
        "verbmem_stop": "budget",
    }
}


@dataclass
class MuseConfig(RunConfig):
    """Everything that defines a `dukb muse` run (the row-changing part is its identity).

    Attributes:
        kb, rules, model, seed, lr, device, dtype, prompt, finetune_epochs, batch_size, LoRA, layers,
            gradient_checkpointing, trust_remote_code: the shared options
            (:class:`dukb.neural.runconfig.RunConfig`); ``model`` is the base model finetuned into f_target and
            every f_retrain.
        finetuned: use this directory as f_target instead of finetuning it (MUSE's released target models); its
            training data must leave out the holdout facts (the MIA non-members, splits.json), which dukb cannot
            check: the run identity records its fingerprint as ``f_target``. f_retrain is still finetuned from ``model``.
        targets: explicit target fact_ids (None: drawn with the seed, relation kinds in turn).
        n_targets: targets of the main request.
        methods: methods of the main table (:data:`dukb.neural.methods.METHODS` names or presets).
        curve_methods: methods of the scalability and sustainability experiments (gradient methods).
        grids: method -> grid override.
        scale_sizes: forget-set sizes in targets for C5 (empty: no C5/C6); cumulative request sizes for C6.
        sustain: run the sequential requests (C6).
        forget_scope: "joint" (minimum joint deep unlearning set of the request's targets) or "target".
        holdout_frac, retain_train_frac: split shares (:func:`dukb.solver.splits.base_split`).
        mia_k: Min-K% share (0.4: MUSE's code reads PrivLeak off ``forget_holdout_Min-40%``, swj0419/muse_bench
            eval.py; the paper gives no K); verbmem_prefix: VerbMem prefix share; verbmem_tokens, knowmem_tokens: decoding budgets;
            verbmem_temperature: VerbMem decoding (0 = greedy, > 0 = sampling with the run seed); verbmem_stemming:
            stem words before VerbMem's ROUGE-L. Defaults as MUSE's code (swj0419/muse_bench eval.py): 128 tokens,
            no stemming.
        select: selection rule (:data:`dukb.neural.metrics.muse.SELECTION_RULES`), used by the report and by C6.
        bootstrap: bootstrap resamples for the confidence intervals (MUSE: 9,999).
        compat: ``"muse"`` (:data:`MUSE_COMPAT`) sets every component below that is not given to MUSE's code's value;
            None: dukb's values. The components (None until :meth:`check` resolves them; each in the run identity
            once it differs from dukb's value, knowmem_tokens always, as before): knowmem_tokens (KnowMem's decoding budget: 10 / MUSE 32),
            knowmem_icl (in-context QA examples before each KnowMem question, drawn from the retain_train facts:
            0 / MUSE 10), knowmem_prompt ("qa": the model's QA prompt, the answer line judged / "muse": MUSE's
            knowmem.py prompt and stop strings), klr_form ("token": the per-token KL / "raw_logits": MUSE's
            ``F.kl_div`` on raw logits), unlearn_lr_rule ("family": each method's family rate, NPO at twice GA's /
            "muse": every method at :data:`MUSE_LR`), unlearn_schedule ("separate": each T its own decaying run /
            "constant": one constant-rate run read at each T), verbmem_stop ("line": the continuation ends at its
            line / "budget": MUSE's fixed token count).
    """

    COMPAT: ClassVar[dict] = MUSE_COMPAT

    CLI: ClassVar[dict] = {
        "output": "runs/muse",
        "resume": "Continue a run in the same directory; refused (exit 2, differing keys named) when a row-changing "
        "setting differs; methods and requests may be added.",
        "order": (
            "targets",
            "n_targets",
            "methods",
            "curve_methods",
            "scale_sizes",
            "sustain",
            "grids",
            "forget_scope",
            "holdout_frac",
            "retain_train_frac",
            "mia_k",
            "verbmem_prefix",
            "verbmem_tokens",
            "verbmem_stemming",
            "verbmem_temperature",
            "select",
            "bootstrap",
            "compat",
            "knowmem_tokens",
            "knowmem_icl",
            "knowmem_prompt",
            "klr_form",
            "unlearn_lr_rule",
            "unlearn_schedule",
            "verbmem_stop",
            "output",
            "resume",
        ),
    }

    model: str = option(
        "tiny",
        group=SHARED,
        help="Base model finetuned into f_target and every f_retrain: 'tiny', "
        "smollm2-135m, a .gguf file, hub id or directory.",
    )
    finetuned: str | None = option(
        None,
        group=SHARED,
        help="Use this directory as f_target (e.g. a released target "
        "model) instead of finetuning it; its training must leave out the holdout facts "
        "of RUN/splits.json (MIA non-members). f_retrain is still finetuned from --model.",
    )
    targets: list[int] | None = option(
        None,
        flag="--targets-file",
        cli_type="path",
        parse="targets_file",
        help="Targets, one relationship fact_id per line ('#' comments); the first "
        "--n-targets form the main request, the first c the scalability request of "
        "size c.",
    )
    n_targets: int = option(1, range=N_TARGETS, help="Targets of the main request (Table 3).")
    methods: list[str] = option(
        default_factory=lambda: list(MUSE_METHODS),
        extendable=True,
        parse="methods",
        help=lambda: "Comma-separated methods of the main table (MUSE's eight by default). " + methods_help(),
    )
    curve_methods: list[str] = option(
        default_factory=lambda: list(CURVE_METHODS),
        extendable=True,
        parse="methods",
        help="Gradient methods of the scalability (C5) and sustainability (C6) experiments.",
    )
    grids: dict[str, list] = option(
        default_factory=dict,
        flag="--grid",
        cli_type="multiple",
        parse="grids",
        help="METHOD=v1,v2,... overrides a method's grid (repeatable).",
    )
    scale_sizes: list[int] = option(
        default_factory=lambda: [1, 2, 4, 8, 16],
        extendable=True,
        parse="ints",
        help="C5 forget-set sizes in targets (each a joint deep unlearning set, nested); "
        "also the cumulative sizes of C6's sequential requests. Empty: no C5/C6.",
    )
    sustain: bool = option(True, decls=("--sustain/--no-sustain",), help="Run C6's sequential requests.")
    forget_scope: str = option(
        "joint",
        choices=("joint", "target"),
        help="joint: a minimum joint deep unlearning "
        "set of the request's targets (f_retrain cannot re-derive them); target: the targets "
        "alone.",
    )
    holdout_frac: float = option(
        0.1,
        flag="--holdout",
        range=FRACTION_OPEN,
        help="Share of the KB's facts held out "
        "of every finetuning (MIA non-members), drawn outside the targets' cones.",
    )
    retain_train_frac: float = option(
        0.5,
        flag="--retain-train",
        range=FRACTION_OPEN,
        help="Share of the trained facts in retain_train (the regulariser's data); the rest is retain_eval (utility).",
    )
    mia_k: float = option(
        0.4,
        range=FRACTION_HALF,
        help="Min-K% share of lowest-probability tokens (MIA, PrivLeak); 0.4 as MUSE's code (Min-40%).",
    )
    verbmem_prefix: float = option(
        0.5,
        range=FRACTION_OPEN,
        help="VerbMem prompt: this share of each forget text's tokens (the paper gives no value).",
    )
    verbmem_tokens: int = option(
        128,
        range=NEW_TOKENS,
        help="VerbMem continuation budget in tokens, and how much of "
        "the true continuation it is scored against (MUSE: 128).",
    )
    verbmem_temperature: float = option(
        0.0, range=TEMPERATURE, help="VerbMem decoding: 0 = greedy, > 0 = sampling at this temperature (seeded)."
    )
    verbmem_stemming: bool = option(False, help="Stem words before VerbMem's ROUGE-L (MUSE's code does not).")
    select: str = option(
        "first_below_retrain",
        choices=selection_rules,
        help=lambda: (
            "Setting reported per method "
            "(and continued from in C6): " + ", ".join(selection_rules()) + " (first_below_retrain: "
            "MUSE's utility rule, the first setting whose utility is below f_retrain's, else the last)."
        ),
    )
    bootstrap: int = option(9999, range=BOOTSTRAP, help="Bootstrap resamples of the 95% intervals.")
    compat: str | None = compat_option(MUSE_COMPAT, "Compute what MUSE's released code computes (swj0419/muse_bench)")
    # ---- components of --compat muse (None: not given; check() resolves them, docs: "dukb vs the papers' code") ----
    knowmem_tokens: int | None = option(
        None, unset=10, range=NEW_TOKENS, help="KnowMem decoding budget in tokens (MUSE's eval.py: 32)."
    )
    knowmem_icl: int | None = option(
        None,
        unset=0,
        range=ICL_EXAMPLES,
        identity="set",
        help="In-context QA "
        "examples before each KnowMem question, the QA pairs of retain_train facts (never "
        "a forget or a scored fact), in a seeded order; those that do not fit the "
        "model's positions are dropped, earliest first (rows record the number used). "
        "MUSE-News: 10.",
    )
    knowmem_prompt: str | None = option(
        None,
        unset="qa",
        choices=("qa", "muse"),
        identity="set",
        help="KnowMem "
        "prompt: qa = the model's QA prompt, the answer line judged; muse = MUSE's "
        "knowmem.py ('Question: q\\nAnswer: ', the decode cut before a blank line "
        "or the next question).",
    )
    klr_form: str | None = option(
        None,
        unset="token",
        choices=("token", "raw_logits"),
        identity="set",
        help="KLR's retain term: token = mean per-token KL(p_ref || p) over the retain "
        "tokens; raw_logits = MUSE's iterative.py, F.kl_div(logits, ref_logits, "
        "'batchmean', log_target=True) on the raw logits.",
    )
    unlearn_lr_rule: str | None = option(
        None,
        unset="family",
        choices=("family", "muse"),
        identity="set",
        help="Unlearning rate without --lr: family = each method's family rate "
        "(NPO twice GA's); muse = every method at MUSE's 1e-5.",
    )
    unlearn_schedule: str | None = option(
        None,
        unset="separate",
        choices=("separate", "constant"),
        identity="set",
        help="Step grids: separate = each T its own run from "
        "f_target, the rate decaying to 0; constant = one run at a constant rate "
        "(no warm-up or weight decay, gradients clipped at norm 1), read at each "
        "T (MUSE's iterative.py, a checkpoint per epoch).",
    )
    verbmem_stop: str | None = option(
        None,
        unset="line",
        choices=("line", "budget"),
        identity="set",
        help="VerbMem continuation: line = ends at EOS or the end of its line; budget "
        "= runs to EOS or --verbmem-tokens (MUSE's verbmem.py).",
    )

    def resolve(self) -> None:
        """Validate the protocol's own fields (:meth:`check` calls it once, after the shared ones and every range).

        Raises:
            InputError: scale sizes not increasing positive integers, an unknown selection rule or forget scope.
        """
        if any(c < 1 for c in self.scale_sizes) or list(self.scale_sizes) != sorted(set(self.scale_sizes)):
            raise InputError("--scale-sizes must be increasing positive integers")
        if self.select not in SELECTION_RULES:
            raise InputError(f"unknown --select {self.select!r} (choose from {', '.join(SELECTION_RULES)})")
        if self.forget_scope not in ("joint", "target"):
            raise InputError(f"unknown --forget-scope {self.forget_scope!r} (choose joint or target)")
        for f in compat_components(type(self)):
            allowed = f.metadata.get("choices")
            if allowed and getattr(self, f.name) not in allowed:
                raise InputError(
                    f"unknown --{f.name.replace('_', '-')} {getattr(self, f.name)!r} (choose from {', '.join(allowed)})"
                )

    def component_identity(self) -> dict:
        """The components whose value differs from dukb's (identity "set" semantics: a run at dukb's values records
        none, so a run written before the components existed compares equal), and ``compat`` when given."""
        out = {"compat": self.compat} if self.compat is not None else {}
        for f in compat_components(type(self)):
            if f.metadata.get("identity") == "set" and getattr(self, f.name) != f.metadata["unset"]:
                out[f.name] = getattr(self, f.name)
        return out

    def unlearn_lr(self) -> float | None:
        """The rate every method is given (``UnlearnContext.lr``): ``--lr``, else MUSE's 1e-5 under
        ``unlearn_lr_rule="muse"``, else None (each method's family rate). A method's own ``METHOD:lr=...`` wins."""
        if self.lr is not None:
            return self.lr
        return MUSE_LR if self.unlearn_lr_rule == "muse" else None


def compat_components(cls) -> list:
    """The fields of ``cls`` that are components of its compat presets (declared with ``unset``), in field order.

    Source: dukb's compat presets (:func:`dukb.neural.declare.apply_compat`).
    """

    return [f for f in fields(cls) if "unset" in f.metadata]


def _lr_entry(m, family, lr) -> dict:
    """``{"lr": rate}`` when the run identity must record the method's resolved rate
    (:func:`dukb.neural.families.identity_lr`), and ``{"options": ...}`` when the method was given per-method options
    (:meth:`dukb.neural.methods.base.Method.with_options`); {} otherwise."""

    rate = identity_lr(m, family, lr)
    out = {} if rate is None else {"lr": rate}
    if m.option_values:
        out["options"] = m.option_values
    return out


def muse_row_key(row: dict) -> tuple:
    """(request, model kind, method label, swept value) identifying a `dukb muse` row."""
    setting = row.get("setting") or {}
    v = setting.get(row.get("param")) if row.get("param") else None
    return (row["request"], row["model_kind"], row.get("method") or "", None if v is None else float(v))


def plan_requests(cfg: MuseConfig, targets: list[int]) -> list[dict]:
    """The run's requests: name, experiment, targets, and (sustainability) the request it continues from.

    ``main``: the first n_targets targets. ``scale-c``: the first c targets. ``sustain-k``: the k-th fold, the targets
    between consecutive scalability sizes, continuing from the model unlearned on ``sustain-(k-1)``; its cumulative
    forget set equals ``scale-c``'s (the sets are built fold by fold, see :func:`run_muse`), so the two experiments
    share f_retrain models.

    Returns:
        list of dicts: name, experiment ("main", "scalability", "sustainability"), targets (fact_ids),
        cumulative (the request whose forget set it is scored against), after (sustainability: the previous one).

    Raises:
        nothing (the targets are checked by the caller).

    Source: Shi et al. 2024b (MUSE), Sec. 3, C5 and C6.
    """
    reqs = [{"name": "main", "experiment": "main", "targets": targets[: cfg.n_targets], "cumulative": "main"}]
    for c in cfg.scale_sizes:
        reqs.append(
            {"name": f"scale-{c}", "experiment": "scalability", "targets": targets[:c], "cumulative": f"scale-{c}"}
        )
    if cfg.sustain and cfg.scale_sizes:
        lo = 0
        for k, c in enumerate(cfg.scale_sizes, 1):
            reqs.append(
                {
                    "name": f"sustain-{k}",
                    "experiment": "sustainability",
                    "targets": targets[lo:c],
                    "cumulative": f"scale-{c}",
                    "after": f"sustain-{k - 1}" if k > 1 else None,
                }
            )
            lo = c
    return reqs


def _items_for(kb, keys):
    """QA items and statement texts of the facts ``keys`` ({"relationships", "biographies"} dict)."""

    want = {("relationship", i) for i in keys.get("relationships", ())} | {
        ("biography", i) for i in keys.get("biographies", ())
    }
    qa = [it for it in kb_qa(kb) if (it.fact_kind, it.fact_id) in want and it.kind == QA_KIND]
    return qa, kb_texts(kb, want)


def icl_examples(kb, splits, k: int, seed: int) -> list:
    """KnowMem's in-context examples on a KB: the QA pairs of ``k`` retain_train facts (MUSE's ``*_qa_icl.json``
    are QA pairs kept apart from the scored ones; on a KB those are the facts no KnowMem set scores: never a forget,
    retain_eval or holdout fact), the same for every question and model of a request: the first ``k`` in the order
    of a seeded hash of each fact, so every request of a run shares them except where one of them is forgotten.

    Args:
        kb: the KB; splits: the request's :class:`dukb.solver.splits.FactSplits` (its ``retain_train``); k: how
            many (0: none); seed: the run's seed.

    Returns:
        list of at most ``k`` QA items (fewer when retain_train holds fewer facts).

    Source: Shi et al. 2024b (MUSE), Sec. 3, C2; swj0419/muse_bench eval.py:82-91 (``knowmem_*_qa_icl_file``).
    """

    if not k:
        return []
    qa, _txt = _items_for(kb, splits.retain_train)
    scored = {
        (kind, i)
        for part in (splits.forget, splits.retain_eval, splits.holdout)
        for kind, key in (("relationship", "relationships"), ("biography", "biographies"))
        for i in part.get(key, ())
    }
    # ordered by a seeded hash of the fact: the requests of a run share their examples but where one is forgotten
    pool = sorted(
        (it for it in qa if (it.fact_kind, it.fact_id) not in scored),
        key=lambda it: sha256_json([seed, it.fact_kind, it.fact_id]),
    )
    return pool[:k]


__all__ = [
    "CURVE_METHODS",
    "MUSE_COMPAT",
    "MUSE_LR",
    "MUSE_METHODS",
    "MUSE_TRAINING_VERSION",
    "MuseConfig",
    "SCORED_FORMS",
    "compat_components",
    "icl_examples",
    "muse_row_key",
    "plan_requests",
]


# ------------------------------------------------------------------------------------------------ rows --------
# The protocol's rows as the run layer sees them (issue 40: the run layer knows no protocol; ProtocolInfo carries
# them): the row model, the row key and the plan check. Kept at the end of the file, below the config.
from dukb.neural.run.rows import (  # noqa: E402
    RowProblem,
    RowSchema,
    dict_of,
    expect,
    identity_of,
    may,
    method_problem,
    need,
    share,
    show,
    swept,
)


def muse_row(row: dict) -> None:
    """The row model of `dukb muse`: what `dukb report` reads of a row (dukb.neural.protocols.muse.report); ROUGE-L
    and AUC are shares (Shi et al. 2024b, Sec. 2).

    Raises:
        RowFault: the first problem, in words.
    """
    for name in ("request", "experiment", "model_kind"):
        need(row, name, "str")
    need(row, "method", "str" if row["model_kind"] == "unlearned" else "str?")
    if row.get("param") is not None or row.get("setting") is not None:
        swept(row, "dict?")
    for name in ("verbmem_forget", "knowmem_forget", "knowmem_retain"):
        need(row, name, "num?")
    may(row, "privleak", "num?")
    may(row, "mia_auc", "num?")
    dict_of(row, "items", {c: "[num]?" for c in ("verbmem_forget", "knowmem_forget", "knowmem_retain")})
    for name in ("verbmem_forget", "knowmem_forget", "knowmem_retain", "mia_auc"):  # ROUGE-L and AUC: shares
        share(row, name)
    if "mia" in row:
        expect(row["mia"], "dict", "mia")
        dict_of(row, "mia", {"forget": "[score]", "retain": "[score]?", "holdout": "[score]?"})
        if row["mia"].get("holdout"):
            need(row["mia"], "forget", "[score]")


def muse_plan_check(config: dict) -> RowProblem | None:
    """The check of a muse row against its run's plan (config.json's ``identity``): its request is one of the run's
    requests, and an unlearned row's method is one of the run's methods, with its swept parameter and a value of its
    grid. A row that fails cannot come from the run.

    Args:
        config: the run's config.json (a dict); its ``identity`` holds ``requests`` (name -> targets) and
            ``methods`` (label -> ``param`` and ``grid``).

    Returns:
        callable(row) -> the problem in words or None, for rows that passed :func:`muse_row`; None when the config
        has no identity to check against.
    """
    identity = identity_of(config)
    if identity is None:
        return None
    requests = identity.get("requests") if isinstance(identity.get("requests"), dict) else None
    methods = identity.get("methods") if isinstance(identity.get("methods"), dict) else None

    def check(row: dict) -> str | None:
        if requests is not None and row["request"] not in requests:
            return f"field request: {show(row['request'])} is not a request of the run (config.json)"
        if methods is not None and row["model_kind"] == "unlearned":
            return method_problem(row, methods)
        return None

    return check


#: the rows of `dukb muse` (its row key, row model and plan check), carried to the run layer by its ProtocolInfo
MUSE_ROWS = RowSchema(key=muse_row_key, model=muse_row, plan=muse_plan_check)

__all__ += ["MUSE_ROWS", "muse_plan_check", "muse_row"]
