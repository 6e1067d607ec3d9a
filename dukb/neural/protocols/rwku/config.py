"""`dukb rwku`'s config (:class:`RwkuConfig`), methods and row key: RWKU's evaluation (Jin et al. 2024) on a KB,
whose stages run in :mod:`dukb.neural.protocols.rwku.run`.

RWKU asks a model to forget what it knows about a target and probes the result at three levels: fill-in-the-blank
(FB, "cloze"), simple questions (QA) and nine kinds of adversarial attack (AA), each scored by ROUGE-L recall of the
answer; it checks locality on *neighbour* knowledge, and membership inference on forget members (FM) against
retain members (RM). On a KB:

- a request is one target fact (single-target) or several at once (``batch-N``: the first N targets, RWKU's
  batch-target setting); its forget set is the targets themselves (``--forget-scope target``, RWKU's setting) or a
  minimum joint deep unlearning set of them (``joint``, :func:`dukb.solver.splits.forget_set`);
- forget probes: the FB, QA and AA probes of the forget facts (:mod:`dukb.kb.probes`; AA = prefix injection,
  affirmative suffix, role play, multiple choice, reverse query, synonym manipulation, context hint, in-context
  learning, cross-lingual fr/de/es);
- unlearning data: RWKU gives a method no forget corpus and unlearns from a *synthetic* one, text about the target
  (App. G.1), never the probes. dukb's is the description corpus of the forget facts
  (:func:`dukb.neural.data.kb_descriptions`: three sentence frames per fact, worded apart from every probe; a KB
  with its own schema: its relations' ``description`` templates, else their ``fact`` template); the
  GDR/KLR retain data are descriptions of distant facts, which are then scored in no group. Every FB/QA/AA probe
  and every MIA member is evaluation-only; rows record what was trained (``trained_forms``, ``trained_fact_ids``)
  and what was scored (``scored_forms``). Methods that train on questions about the forget facts (RT, DPO, PO,
  closed-loop) are refused;
- neighbour facts: the other facts about the forget facts' people (relationships where one of them is subject or
  object, and their biographies) outside the targets' cone (:func:`dukb.solver.cone.cone_of`: RWKU's neighbours
  "must not involve the target"; the facts dropped for it are recorded); distant facts: every fact outside the
  forget set, the neighbours and the cone. Both are scored on FB and QA;
- FM: the QA texts of the forget facts; RM: the QA texts of the distant facts. Scores (:mod:`dukb.neural.metrics.mia`)
  on the answer tokens (``--mia-members descriptions``: their description sentences, every token, as RWKU's code
  scores its text fragments); the mean score per set (RWKU's LOSS columns use the loss, here the log-likelihood, so FM
  *falling* below RM means forgotten) and the AUC of FM (positive) against RM;
- deep unlearning on top: recall and accuracy (Wu et al. 2025, Eq. 1-2) and recall under attack
  (:mod:`dukb.neural.metrics.attack`: a fact counts as known if any probe kind elicits it).

Where dukb's default differs from RWKU's released code (ROUGE-L package, generation budget, NPO's β, MIA members),
the component is an option and ``--compat rwku`` sets each to the code's value (:data:`RWKU_COMPAT`; the docs page
"dukb vs the papers' code").

The model is finetuned on every fact's QA pair and description sentences (as RWKU's model knows the target before
its own text about it is unlearned; cached in RUN_DIR/finetuned), or ``--finetuned`` (its tokenizer must cover the
description corpus); a ``before`` row scores it without unlearning (RWKU's "Before").

Source: Jin et al. 2024 (RWKU), Sec. 3-4 and App. H; Wu et al. 2025, Eq. 1-2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from dukb import InputError
from dukb.kb.csvfile import strict_int
from dukb.neural.bounds import FRACTION_HALF, N_TARGETS, NEW_TOKENS, Range
from dukb.neural.catalog import methods_help
from dukb.neural.declare import SHARED, compat_option, option
from dukb.neural.runconfig import RunConfig

#: RWKU's methods that dukb has (ICU, RepE, DPO, RT come with the Unlearning-with-Control issue)
#: RWKU's methods; NPO in the sequence form RWKU's code uses (jinzhuoran/RWKU, LLaMA-Factory npo/trainer.py: the
#: summed answer log-likelihood ratio), not the Eval-DU/MUSE code's logit form that ``npo`` names
RWKU_METHODS = ("ga", "npo_seq", "ga_gdr", "npo_seq_gdr")
#: the MIA member sets `dukb rwku --mia-members` offers: "qa" (dukb's: the QA texts, scored on the answer tokens) or
#: "descriptions" (RWKU's code: text fragments about the facts, scored on every token; here the description corpus)
MIA_MEMBERS = ("qa", "descriptions")
#: the ROUGE-L implementations `dukb rwku --rouge` offers: dukb's default and RWKU's code's
ROUGE_CHOICES = ("rouge-score", "rouge")
#: ``--compat rwku``: every component at the value of RWKU's released code (jinzhuoran/RWKU, LLaMA-Factory/src/
#: llmtuner: eval/eval_forget.py:98-133 ``max_new_tokens=30`` and ``from rouge import Rouge``; scripts/full/
#: run_npo.sh:29 ``--dpo_beta 0.2``, read as NPO's β by train/npo/trainer.py:30; eval/eval_mia.py:11-36 on
#: ``forget_mia.json``/``retain_mia.json``, text fragments scored on every token)
RWKU_COMPAT = {"rwku": {"rouge": "rouge", "max_new_tokens": 30, "npo_beta": 0.2, "mia_members": "descriptions"}}
#: ``--npo-beta``'s range (a method option's bound, :data:`dukb.neural.bounds.GRID_VALUE`, above 0)
NPO_BETA = Range(0, 1e6, lo_open=True, integer=False, why="NPO's inverse temperature")
#: version of what `dukb rwku` trains on, in its run identity (1: the forget facts' QA; 2: the description corpus,
#: neighbours outside the cone): a run of another version is not resumed
RWKU_TRAINING_VERSION = 2


@dataclass
class RwkuConfig(RunConfig):
    """Everything that defines a `dukb rwku` run (the row-changing part is its identity).

    Attributes:
        kb, rules, model, finetuned, seed, lr, device, dtype, prompt, finetune_epochs, batch_size, LoRA, layers,
            gradient_checkpointing, trust_remote_code: the shared options
            (:class:`dukb.neural.runconfig.RunConfig`).
        targets / n_targets: target fact_ids (single-target requests, one per target).
        methods: method names or presets; grids: method -> grid override.
        batch_sizes: batch-target requests (the first N targets at once); empty: none.
        forget_scope: "target" (RWKU) or "joint" (a minimum joint deep unlearning set).
        mia_k: Min-K% share.
        compat: "rwku" (every component below at RWKU's code's value unless given) or None.
        rouge, max_new_tokens, npo_beta, mia_members: the components where dukb's default and RWKU's code differ
            (:data:`RWKU_COMPAT`); None until :meth:`check` resolves them (given, the preset's, else dukb's).
    """

    COMPAT: ClassVar[dict] = RWKU_COMPAT

    CLI: ClassVar[dict] = {
        "output": "runs/rwku",
        "resume": "Continue a run in the same directory; refused (exit 2, differing keys named) when a row-changing "
        "setting differs; targets and methods may be added.",
        "order": (
            "targets",
            "n_targets",
            "methods",
            "grids",
            "batch_sizes",
            "forget_scope",
            "mia_k",
            "compat",
            "rouge",
            "max_new_tokens",
            "npo_beta",
            "mia_members",
            "output",
            "resume",
        ),
    }

    finetuned: str | None = option(
        None,
        group=SHARED,
        help="Use this already finetuned model directory (its tokenizer must know the description corpus's words).",
    )
    targets: list[int] | None = option(
        None,
        flag="--targets-file",
        cli_type="path",
        parse="targets_file",
        help="Targets, one relationship fact_id per line ('#' comments): one "
        "single-target request each; the first N form the batch request of size N.",
    )
    n_targets: int = option(
        11, range=N_TARGETS, help="Without --targets-file: single-target requests, drawn relation kinds in turn."
    )
    methods: list[str] = option(
        default_factory=lambda: list(RWKU_METHODS),
        extendable=True,
        parse="methods",
        help=lambda: "Comma-separated. " + methods_help(),
    )
    grids: dict[str, list] = option(
        default_factory=dict,
        flag="--grid",
        cli_type="multiple",
        parse="grids",
        help="METHOD=v1,v2,... overrides a method's grid (repeatable).",
    )
    batch_sizes: list[int] = option(
        default_factory=lambda: [2, 4, 8],
        extendable=True,
        parse="ints",
        help="Batch-target requests: the first N targets unlearned at once (RWKU's batch setting). Empty: none.",
    )
    forget_scope: str = option(
        "target",
        choices=("target", "joint"),
        help="target: the targets alone (RWKU); joint: a minimum joint deep unlearning set of them.",
    )
    mia_k: float = option(0.2, range=FRACTION_HALF, help="Min-K% share of lowest-probability tokens.")
    compat: str | None = compat_option(RWKU_COMPAT, "Compute as RWKU's released code")
    rouge: str | None = option(
        None,
        unset="rouge-score",
        choices=("rouge-score", "rouge"),
        help="ROUGE-L recall of "
        "every probe: 'rouge-score' (lower-cased words, Porter stemming) or 'rouge' (the "
        "package RWKU's code uses: words split on spaces, case and punctuation kept, union LCS "
        "over sentences split on '.', 'NOANSWER' for an empty answer).",
    )
    max_new_tokens: int | None = option(
        None,
        unset=10,
        range=NEW_TOKENS,
        help="Generation budget of every probe (tokens); the answer line is judged and scored (RWKU's code: 30).",
    )
    npo_beta: float | None = option(
        None,
        unset=0.1,
        range=NPO_BETA,
        help="NPO's beta for every npo/npo_seq method not "
        "given its own (METHOD:beta=...) (RWKU's run_npo.sh: --dpo_beta 0.2).",
    )
    mia_members: str | None = option(
        None,
        unset="qa",
        choices=MIA_MEMBERS,
        help="MIA members: 'qa' (FM: the forget "
        "facts' QA texts, RM: distant facts' QA texts, scored on the answer tokens) or "
        "'descriptions' (RWKU's text fragments: the description sentences of those "
        "facts, scored on every token; the forget facts' descriptions are also the "
        "unlearning corpus).",
    )

    def resolve(self) -> None:
        """Validate the protocol's own fields (:meth:`check` calls it once, after the shared ones).

        Raises:
            InputError: an unknown forget scope, ROUGE or MIA member set, batch sizes not increasing integers >= 2.
        """
        if self.forget_scope not in ("target", "joint"):
            raise InputError(f"unknown --forget-scope {self.forget_scope!r} (choose target or joint)")
        if self.rouge not in ROUGE_CHOICES:
            raise InputError(f"unknown --rouge {self.rouge!r} (choose from {', '.join(ROUGE_CHOICES)})")
        if self.mia_members not in MIA_MEMBERS:
            raise InputError(f"unknown --mia-members {self.mia_members!r} (choose from {', '.join(MIA_MEMBERS)})")
        if any(n < 2 for n in self.batch_sizes) or list(self.batch_sizes) != sorted(set(self.batch_sizes)):
            raise InputError("--batch-sizes must be increasing integers of at least 2")


def _near_keys(req: dict) -> set:
    """(fact kind, fact_id) of a request's forget facts, its targets' cone and its neighbours: never retain data."""
    nb = req["neighbours"]
    rel = [*req["forget"], *req["cone"], *nb["relationships"], *nb["dropped"]]
    return {("relationship", int(i)) for i in rel} | {("biography", int(i)) for i in nb["biographies"]}


def _check_covers(tokenizer, items, where) -> None:
    """Raise InputError when ``tokenizer`` maps words of the description corpus to its unknown token (a tiny model
    finetuned without them, e.g. by `dukb evaluate`)."""
    unk = getattr(tokenizer, "unk_token_id", None)
    if unk is None or not items:
        return
    ids = tokenizer([it.answer for it in items], add_special_tokens=False)["input_ids"]
    bad = [it.answer for it, row in zip(items, ids) if unk in row]
    if bad:
        raise InputError(
            f"the model's tokenizer does not know words of RWKU's description corpus ({len(bad)} of "
            f"{len(items)} sentences, e.g. {bad[0]!r}); leave out --finetuned so that `dukb rwku` "
            "finetunes a model on the QA pairs and descriptions",
            where,
        )


def rwku_row_key(row: dict) -> tuple:
    """(request, method label, swept value) identifying a `dukb rwku` row ("" and None for the before rows)."""
    v = row["setting"].get(row["param"]) if row.get("param") else None
    return (row["request"], row.get("method") or "", None if v is None else float(v))


__all__ = [
    "MIA_MEMBERS",
    "NPO_BETA",
    "RWKU_COMPAT",
    "RWKU_METHODS",
    "RWKU_TRAINING_VERSION",
    "RwkuConfig",
    "rwku_row_key",
]


# ------------------------------------------------------------------------------------------------ rows --------
# The protocol's rows as the run layer sees them (issue 40: the run layer knows no protocol; ProtocolInfo carries
# them): the row model, the row key and the plan check. Kept at the end of the file, below the config.
from dukb.neural.run.rows import (  # noqa: E402
    RowFault,
    RowProblem,
    RowSchema,
    dict_of,
    expect,
    identity_of,
    is_number,
    may,
    method_problem,
    need,
    share,
    show,
    swept,
)

#: the rwku columns a report averages (dukb.neural.protocols.rwku.report.COLS without the MIA ones)
_RWKU_SCORES = (
    "rouge_forget_fb",
    "rouge_forget_qa",
    "rouge_forget_aa",
    "rouge_neighbour_fb",
    "rouge_neighbour_qa",
    "rouge_neighbour_all",
    "rouge_distant_all",
    "recall",
    "recall_under_attack",
    "accuracy_all",
)


def rwku_row(row: dict) -> None:
    """The row model of `dukb rwku`: what `dukb report` reads of a row (dukb.neural.protocols.rwku.report); ROUGE-L
    recalls and AUCs are shares (Jin et al. 2024, Sec. 3).

    Raises:
        RowFault: the first problem, in words.
    """
    need(row, "request", "str")
    need(row, "request_kind", "str")
    if row["request_kind"] not in ("single", "batch"):
        raise RowFault(f'field request_kind: expected "single" or "batch", got {show(row["request_kind"])}')
    if row["request_kind"] == "batch":
        parts = row["request"].split("-")
        if len(parts) < 2 or strict_int(parts[1]) is None:
            raise RowFault(f"field request: a batch request is named batch-N, got {show(row['request'])}")
    need(row, "method", "str?")
    swept(row)
    need(row, "targets", "list")
    need(row, "rouge_forget_all", "num")
    for name in ("rouge_forget_fb", "rouge_forget_qa"):
        need(row, name, "num?")
    for name in _RWKU_SCORES:
        may(row, name, "num?")
    if row.get("rouge_forget_aa_by_kind") is not None:
        expect(row["rouge_forget_aa_by_kind"], "dict", "rouge_forget_aa_by_kind")
        for k, v in row["rouge_forget_aa_by_kind"].items():
            expect(v, "num?", f"rouge_forget_aa_by_kind.{k}")
    for name in ("mia_fm", "mia_rm", "mia_auc_fm_rm"):
        dict_of(row, name, {"loss": "score?"})
    for name in _RWKU_SCORES + ("rouge_forget_all", "rouge_distant_fb", "rouge_distant_qa"):  # ROUGE-L, recall
        share(row, name)
    for k, v in (row.get("mia_auc_fm_rm") or {}).items():  # an AUC per attack (a NaN: nothing to score)
        if is_number(v) and not 0 <= float(v) <= 1:
            raise RowFault(f"field mia_auc_fm_rm.{k}: expected a share in [0, 1] or null, got {show(v)}")


def rwku_plan_check(config: dict) -> RowProblem | None:
    """The check of an rwku row against its run's plan (config.json's ``identity``): its request is ``target-T`` for
    a target T of the run or ``batch-N`` for one of its batch sizes, and its method (when it has one: the rows
    before unlearning have none) is one of the run's methods, with its swept parameter and a value of its grid.
    A row that fails cannot come from the run.

    Args:
        config: the run's config.json, whose ``identity`` holds the run's targets, its methods with their grids and
            ``rwku.batch_sizes``.

    Returns:
        A :data:`dukb.neural.run.rows.RowProblem` for rows that passed :func:`rwku_row`, or None (no identity).
    """
    if (identity := identity_of(config)) is None:
        return None
    targets, extra = identity.get("targets"), identity.get("rwku")
    sizes = extra.get("batch_sizes") if isinstance(extra, dict) else None
    names = None
    if isinstance(targets, list) and isinstance(sizes, list):
        names = {f"target-{t}" for t in targets} | {f"batch-{n}" for n in sizes}
    methods = identity.get("methods") if isinstance(identity.get("methods"), dict) else None

    def check(row: dict) -> str | None:
        if names is not None and row["request"] not in names:
            return f"field request: {show(row['request'])} is not a request of the run (config.json)"
        if methods is not None and row.get("method"):
            return method_problem(row, methods)
        return None

    return check


#: the rows of `dukb rwku` (its row key, row model and plan check), carried to the run layer by its ProtocolInfo
RWKU_ROWS = RowSchema(key=rwku_row_key, model=rwku_row, plan=rwku_plan_check)

__all__ += ["RWKU_ROWS", "rwku_plan_check", "rwku_row"]
