"""`dukb evaluate`'s config: the paper's deep-unlearning protocol (Wu et al. 2025, Sec. 4, App. C/H), checked and
resolved once into the plan the stages in :mod:`dukb.neural.protocols.evaluate.run` consume; its run identity is
:mod:`dukb.neural.protocols.evaluate.identity`.

1. KB: load and validate; deductive closure; minimal deep unlearning sets of every target (exact by default),
   cached in RUN_DIR/sets.json.
2. Model: finetune until it knows 100% of the KB (or load ``finetuned``), saved in RUN_DIR/finetuned; its accuracy
   before unlearning is recorded.
3. For each (target, method, setting): unlearn from the finetuned model, probe every KB fact, compute recall and
   accuracy with the solver; append one JSON line at once (retained vector, best set, setting, timings).
4. ``resume`` continues a run in the same RUN_DIR, skipping rows already written; a killed run leaves a valid file
   (each row is one flushed line; a torn last line is dropped on resume). The run's identity (config.json) must
   match: a resume with any other row-changing setting is refused with the differing keys; targets and methods
   may be added (:mod:`dukb.neural.run`).
5. Report: report.md, appendix.md, summary.csv, facts.csv, accuracy_recall.png/.pdf (:mod:`dukb.neural.protocols.evaluate.report`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from dukb import InputError
from dukb.kb.edu_relat import benchmark_targets
from dukb.kb.probes import parse_kinds
from dukb.neural.bounds import N_SEEDS, N_TARGETS
from dukb.neural.catalog import attack_names, default_metrics, methods_help, metrics_help
from dukb.neural.declare import SHARED, compat_option, option
from dukb.neural.families import FAMILY_GRIDS, WHP_GRIDS
from dukb.neural.launch import LaunchOptions
from dukb.neural.metrics import parse_metrics, row_metrics
from dukb.neural.metrics.heldout import HELDOUT_RULES, resolve_heldout
from dukb.neural.modelrecord import read_model_record
from dukb.neural.runconfig import HELDOUT_RULE_HELP, RunConfig, heldout_forms_help
from dukb.neural.spec import BOS_RULES, JUDGES, PROMPT_FORMATS, adds_bos
from dukb.neural.trainconfig import REINFORCE_SCHEDULES, SWEEP_SCHEDULES
from dukb.neural.utility import UTILITY_HELP, UTILITY_INCLUDE_HELP, check_utility
from dukb.solver.metrics import TIE_BREAKS
from dukb.solver.rules import RULES_HELP
from dukb.solver.scopes import FORGET_SCOPES

DEFAULT_METHODS = ("ga", "npo", "tv", "whp")


#: The preset dukb recommends: closed-loop deep unlearning (:mod:`dukb.neural.methods.closed_loop`), the one method
#: that reaches mean Recall ≥ 0.8 and Accuracy ≥ 0.8 on EDU-RELAT's targets on the qa form; judged on held-out
#: probe forms it falls short, like every method (README, "Closed-loop deep unlearning"; bench/RESULTS.md,
#: "Citable numbers"). Presets live in :data:`dukb.neural.methods.PRESETS`.
RECOMMENDED = "du_cl"


@dataclass
class EvaluateConfig(RunConfig, LaunchOptions):
    """Everything that defines an evaluate run (written to RUN_DIR/config.json; the settings that change rows form
    its identity, see :func:`dukb.neural.protocols.evaluate.identity.run_identity`). The model options (kb, rules, model, finetuned, seed, lr, device,
    dtype, prompt, finetune_epochs, batch_size, LoRA, layers, gradient checkpointing, remote code) are
    :class:`dukb.neural.runconfig.RunConfig`'s, shared by every protocol.

    Attributes:
        no_finetune: evaluate ``model`` as given, on the facts its qa probe before unlearning elicits
            (:mod:`dukb.neural.known`); False (default): finetune it on the KB first, as Eval-DU does. In the run
            identity only when set.
        targets: explicit relationship fact_ids (None: ``n_targets`` drawn with the seed, one per relation kind
            first, as evenly as possible, among the facts derivable from the other facts,
            :func:`dukb.neural.plan.choose_targets`).
        n_targets: number of targets to draw when ``targets`` is None (default 11 = one per relation).
        methods: method names, ``METHOD@SCOPE`` or presets (see :func:`dukb.neural.methods.resolve`).
        grids: method -> list of values overriding the default grid.
        sets: "exact", "random" or "paper" (the KB's cached sets of the paper, :mod:`dukb.kb.paper_sets`) minimal
            deep unlearning sets for recall; None before :meth:`check` resolves it ("exact" unless a compat preset
            sets it).
        tie_break: "accuracy" (dukb's default) or "first" (the reference's): which of the sets tied on recall scores
            the accuracies (:func:`dukb.solver.metrics.recall_accuracy`); None before :meth:`check` resolves it.
        seeds: N_seed of random sets (also used when exact enumeration hits its limit).
        forget_scope: default forget scope of methods given without ``@SCOPE`` (target, minimum, best).
        metrics: names of :data:`dukb.neural.metrics.METRICS` to compute (required ones are added); probing
            computes only what they need.
        heldout_forms: probe forms every row is also scored on by ``recall_heldout`` (kinds of
            :data:`dukb.kb.probes.KINDS`; None: every asking form the method did not see,
            :func:`dukb.neural.metrics.heldout.default_heldout_forms`).
        heldout_rule: "pairs" (default: after unlearning, probe the (form, fact) pairs that elicited their fact
            before; known while one still does) or "any" (probe every held-out form; known while any does);
            :mod:`dukb.neural.metrics.heldout`.
        finetune_forms: probe forms the model is finetuned on (default ["qa"], the paper's; ignored with
            ``finetuned``).
        schedule: how the step grid of gradient methods (param "steps") is run
            (:class:`dukb.neural.methods.base.SweepSchedule`): "reference" (default), as Eval-DU's code: one run of
            the grid's largest T with 1 warm-up step, linear decay over that run and weight decay 0.01, read at
            every T (and ``npo`` on Eval-DU's 500-token padded layout); "separate": each T its own run from θ₀
            (dukb's earlier default). Presets keep their own (:attr:`dukb.neural.methods.Preset.schedule`).
        compat: a compat preset of :attr:`COMPAT` (None: dukb's defaults): ``eval-du`` sets every component below
            not given to what wrh14/deep_unlearning computes, and the benchmark's 55 targets (the KB's targets.txt,
            :func:`dukb.kb.edu_relat.benchmark_targets`) when ``targets`` is None and the KB is the imported
            EDU-RELAT; without targets on another KB the run is refused at its plan.
        rules: the rule set (a component: None resolves to the preset's "family_paper_compat", else to the KB's
            own, :func:`dukb.solver.rules.default_rules`: its rules.lp, or "family" for a KB without a schema.yaml).
        reinforce: TV's and WHP's reinforcement schedule, "constant" (dukb's: 10 steps at a constant rate) or
            "reference" (finetune_reinforced_model.py's: 1 warm-up step, linear decay, weight decay 0.01;
            :func:`dukb.neural.methods.tv.reinforce`).
        family_grids: "dukb" (each method's default grid) or "paper" (Eval-DU's grids per model family, GPT2-XL's
            32 steps included: :data:`dukb.neural.families.PAPER_GRIDS`).
        whp_grid: WHP's α grid, "config" (Eval-DU's config and App. H, dukb's grid) or "notebook" (the figure
            notebook's): :data:`dukb.neural.families.WHP_GRIDS`.
        attacks: attacks applied to every unlearned model after its probe, ``NAME`` or ``NAME:key=value:...``
            (:data:`dukb.neural.attacks.ATTACKS`; each row gets an ``attacks`` dict and ``recall_under_attack``
            becomes the worst case over forms and attacks). Their settings are part of the run identity.
        utility: lm-eval task, group or tag names scored on the finetuned model and on every row's unlearned model
            (:mod:`dukb.neural.utility`; Wu et al. 2025, Tables 5 and 7); [] (default): none. In the run identity
            only when given.
        utility_include: a folder of the user's lm-eval task YAML files (lm-eval's include_path) or None; in the
            run identity only when given.
    """

    CLI: ClassVar[dict] = {
        "output": "runs/evaluate",
        "resume": "Continue a run in the same directory, skipping finished rows. Refused (exit 2, differing keys "
        "named) when any setting that changes rows differs from the run's; targets and methods may be "
        "added.",
        "order": (
            "no_finetune",
            "targets",
            "n_targets",
            "methods",
            "forget_scope",
            "metrics",
            "grids",
            "heldout_forms",
            "heldout_rule",
            "finetune_forms",
            "sets",
            "tie_break",
            "seeds",
            "output",
            "resume",
            "schedule",
            "attacks",
            "utility",
            "utility_include",
            "compat",
            "prompt_format",
            "bos",
            "judge",
            "reinforce",
            "family_grids",
            "whp_grid",
        ),
    }
    #: compat presets (:func:`dukb.neural.declare.apply_compat`): field -> the paper code's value
    COMPAT: ClassVar[dict] = {
        "eval-du": {
            "schedule": "reference",
            "reinforce": "reference",
            "family_grids": "paper",
            "whp_grid": "config",
            "rules": "family_paper_compat",
            "sets": "paper",
            "tie_break": "first",
            "prompt_format": "eval-du",
            "bos": "family",
            "judge": "generation",
        }
    }

    no_finetune: bool = option(
        False,
        identity="set",
        help="Evaluate --model as it is, on what it already knows "
        "(a pretrained model, or any HF folder), instead of finetuning it on the KB first "
        "(the default, as Eval-DU does). The qa probe before unlearning defines the known "
        "facts; unknown facts are unscorable (never counted as forgotten, left out of "
        "recall and accuracy); targets are drawn among known facts with a derivation from "
        "other known facts, and minimal sets are those of the known part of the KB. The "
        "methods train, retain and query on known facts only, and unknown facts are not "
        "probed after unlearning. A --targets-file target the model did not know is "
        "refused.",
    )
    targets: list[int] | None = option(
        None,
        flag="--targets-file",
        cli_type="path",
        parse="targets_file",
        help="Targets: one relationship fact_id per line ('#' comments).",
    )
    n_targets: int = option(
        11,
        range=N_TARGETS,
        help="Without --targets-file: draw this many targets, relation kinds "
        "in turn (11 = one per kind; 55 = the paper's 5 per kind), among the facts derivable "
        "from the other facts (a minimal deep unlearning set larger than the target; every "
        "fact of a family KB is, so its draw is the paper's).",
    )
    methods: list[str] = option(
        default_factory=lambda: list(DEFAULT_METHODS),
        extendable=True,
        parse="methods",
        help=lambda: "Comma-separated. " + methods_help() + f" Recommended: {RECOMMENDED}.",
    )
    grids: dict[str, list] = option(
        default_factory=dict,
        flag="--grid",
        cli_type="multiple",
        parse="grids",
        help="METHOD=v1,v2,... overrides a method's grid (repeatable).",
    )
    sets: str | None = option(
        None,
        unset="exact",
        choices=("exact", "random", "paper"),
        help="exact | random | paper minimal deep unlearning sets for recall. paper: the "
        "paper's cached sets of the KB (paper_sets.csv written by `dukb import-eval-du`, or "
        "original/unlearn_minimal_set/ of the benchmark folder), in the reference's order; "
        "refused when the KB has none or lacks a target's.",
    )
    tie_break: str | None = option(
        None,
        unset="accuracy",
        choices=("accuracy", "first"),
        identity="set",
        help="Which set of best recall scores the accuracies (Wu et al. 2025, Eq. 1-2): "
        "accuracy (the higher relationship accuracy, then the smaller set, then the "
        "smaller fact_ids) or first (the first in the sets' order, as Eval-DU's "
        "calculate_recall_and_acc.py: the reference's order with --sets paper, ascending "
        "size then fact_ids for exact and random).",
    )
    seeds: int = option(100, range=N_SEEDS, help="N_seed for random sets.")
    forget_scope: str = option(
        "target",
        choices=tuple(FORGET_SCOPES),
        help="Forget set of methods without @SCOPE: "
        + "; ".join(f"{s.name}: {s.summary}" for s in FORGET_SCOPES.values())
        + ".",
    )
    metrics: list[str] = option(
        default_factory=lambda: list(default_metrics()),
        parse="items",
        help=lambda: (
            "Comma-separated metrics to compute (required ones are added; probing "
            "computes only what they need). " + metrics_help() + "."
        ),
    )
    heldout_forms: list[str] | None = option(
        None,
        parse="forms",
        help=heldout_forms_help(
            "every row is also scored on (recall_heldout)",
            "the forms a method trains on or queries (probe_forms_seen: qa, and more for rt and the multi-form "
            "CL-DU variants)",
        ),
    )
    heldout_rule: str = option("pairs", choices=("pairs", "any"), help=HELDOUT_RULE_HELP)
    finetune_forms: list[str] = option(
        default_factory=lambda: ["qa"],
        parse="forms",
        help="Probe forms the model is "
        "finetuned on (comma-separated kinds or groups; default qa, the paper's). "
        "Adding forms such as paraphrase,cloze,synonym,reverse makes the model know "
        "the facts under forms the methods never see, so the held-out scores test "
        "the fact, not the wording.",
    )
    rules: str | None = option(
        None, group=SHARED, identity="rules", help=RULES_HELP + " With --compat eval-du: family_paper_compat."
    )
    compat: str | None = compat_option(
        COMPAT,
        "Run as a paper's released code computes: eval-du = Eval-DU "
        "(wrh14/deep_unlearning), with the benchmark's 55 targets when --kb is the "
        "imported EDU-RELAT (else give --targets-file)",
    )
    schedule: str | None = option(
        None,
        unset="reference",
        choices=("reference", "separate"),
        help="How the step "
        "grid T of gradient methods (ga, npo, ...) is run. reference (default): as "
        "Eval-DU's code (wrh14/deep_unlearning forget.py), one run of the grid's largest T "
        "steps from the finetuned model, read at every T, HF's linear schedule with 1 "
        "warm-up step (learning rate 0 at step 1) decaying over that run, AdamW with weight "
        "decay 0.01, and npo on Eval-DU's 500-token EOS-padded layout; a resume may add grid "
        "values below the largest only. separate: each T its own run from the finetuned "
        "model, the rate decaying linearly over its T steps, no warm-up or weight decay "
        "(dukb's earlier runs). Presets (du_*) keep their own (separate).",
    )
    reinforce: str | None = option(
        None,
        unset="constant",
        choices=("constant", "reference"),
        identity="set",
        help="How tv and whp train their reinforced model (10 AdamW steps on the "
        "target). constant: the family's rate at every step, no warm-up or weight decay "
        "(dukb's runs). reference: as Eval-DU's finetune_reinforced_model.py, HF's linear "
        "schedule with 1 warm-up step (rate 0 at step 1) decaying over the 10 steps, "
        "weight decay 0.01: half the constant schedule's summed rate, so a smaller task "
        "vector at each alpha.",
    )
    family_grids: str | None = option(
        None,
        unset="dukb",
        choices=FAMILY_GRIDS,
        identity="set",
        help="Grids of ga, "
        "npo and tv without --grid. dukb: their default grids for every model (T in "
        "1,2,4,8,16; tv alpha in 0.2,0.5,1,5,10). paper: Eval-DU's per model family "
        "(config/model_config.yaml, App. H): GPT2-XL T up to 32 and tv alpha in "
        "0.2,1,5,10,30,60,80; Phi-1.5 and Llama as dukb's; other families keep "
        "dukb's.",
    )
    whp_grid: str | None = option(
        None,
        unset="config",
        choices=tuple(WHP_GRIDS),
        identity="set",
        help="whp's alpha "
        "grid without --grid. config: 0.5,1,5,10,100,1000 (Eval-DU's config and the paper's "
        "App. H; dukb's runs). notebook: 10,1e3,1e5,1e7,1e8 (the paper's figure notebook).",
    )
    utility: list[str] = option(default_factory=list, parse="items", identity="set", help=UTILITY_HELP)
    utility_include: str | None = option(None, identity="set", help=UTILITY_INCLUDE_HELP)
    attacks: list[str] = option(
        default_factory=list,
        parse="items",
        choices=attack_names,
        help=lambda: (
            "Attacks applied to every unlearned model right after its probe, "
            "comma-separated NAME or NAME:key=value:... (" + ", ".join(attack_names()) + "; "
            "`dukb attack --help` lists their settings). Each row gets an `attacks` entry per "
            "attack (recall, accuracy_all, success_du, forgotten_relationships, target_known, "
            "settings); recall_under_attack becomes the worst case over forms and attacks. Part "
            "of the run identity."
        ),
    )

    prompt_format: str | None = option(
        None,
        unset="dukb",
        choices=PROMPT_FORMATS,
        identity="set",
        help="Prompts of finetuning, unlearning and probing. dukb: probe 'Question: q\\nAnswer:' and train on "
        "'... Answer: father' (answer after a space). eval-du: Eval-DU's code per model family "
        "(wrh14/deep_unlearning config/model_config.yaml, data_module.py, evaluate_util.py): llama, tiny and "
        "generic probe 'Question: q\\n' (no answer tag) and train on 'Question: q\\nAnswer:father'; phi probes "
        "'Question: q\\n' and trains on '... Answer: father'; gpt2-xl probes 'Question: q\\n Answer:' and trains "
        "on '... Answer:father'; a training text is tokenised as one string. A model given with --finetuned must "
        "have been finetuned with the same format (its dukb_model.json records it).",
    )
    bos: str | None = option(
        None,
        unset="never",
        choices=BOS_RULES,
        identity="set",
        help="BOS token at the start of every prompt and training text. never: none (dukb). family: where "
        "Eval-DU's code gets one from its tokenizer (add_special_tokens=True): the llama family; gpt2-xl, phi, "
        "smollm2, tiny and generic models get none.",
    )
    judge: str | None = option(
        None,
        unset="line",
        choices=JUDGES,
        identity="set",
        help="What a probe judges (substring rule). line: the first non-blank line of the continuation (dukb). "
        "generation: the whole continuation of 10 tokens, as Eval-DU's code (evaluate_util.py), and for whp the "
        "prompt followed by it (its WHP evaluation decodes the whole sequence).",
    )

    def load_kwargs(self) -> dict:
        """:meth:`RunConfig.load_kwargs` with the prompt format, BOS rule and judge of this run (every model the run
        loads or finetunes is prompted and read through them, :class:`dukb.neural.spec.ModelSpec`)."""
        return {**super().load_kwargs(), **self.prompt_kwargs()}

    def prompt_kwargs(self) -> dict:
        """``prompt_format``, ``bos`` and ``judge`` as :class:`dukb.neural.spec.ModelSpec` fields (None: dukb's)."""
        return {
            "prompt_format": self.prompt_format or "dukb",
            "bos": self.bos or "never",
            "judge": self.judge or "line",
        }

    def resolve(self) -> None:
        """Validate every field that the protocol would otherwise read later or silently reinterpret (the Python
        API gets the same checks as the command line; :meth:`check` calls it once), and resolve
        ``finetune_forms`` and ``heldout_forms`` to probe kinds (:func:`dukb.kb.probes.parse_kinds`).

        Raises:
            InputError: ``sets`` not exact/random/paper; ``tie_break`` not accuracy/first; an unknown
                ``forget_scope`` or ``schedule``; no method; an unknown attack; unknown probe forms,
                ``finetune_forms`` without qa or with ``finetuned``; an unknown held-out rule; held-out forms a
                method sees; an unknown prompt format, BOS rule or judge; a ``finetuned`` model finetuned with
                another prompt format or BOS (:func:`check_model_prompt`); ``utility_include`` without
                ``utility``, lm-eval not installed, or a utility task lm-eval cannot load
                (:func:`dukb.neural.utility.check_utility`).
        """
        if self.sets is not None and self.sets not in ("exact", "random", "paper"):
            raise InputError(f"--sets must be exact, random or paper, got {self.sets!r}")
        if self.tie_break is not None and self.tie_break not in TIE_BREAKS:
            raise InputError(f"--tie-break must be {' or '.join(TIE_BREAKS)}, got {self.tie_break!r}")
        if self.forget_scope not in FORGET_SCOPES:
            raise InputError(f"unknown forget scope {self.forget_scope!r} (choose from {', '.join(FORGET_SCOPES)})")
        if self.schedule not in SWEEP_SCHEDULES:
            raise InputError(f"--schedule must be one of {', '.join(SWEEP_SCHEDULES)}, got {self.schedule!r}")
        self._resolve_compat()
        if not self.methods:
            raise InputError("no unlearning method given")
        self._resolve_items()
        if not list(self.finetune_forms) or (self.heldout_forms is not None and not list(self.heldout_forms)):
            raise InputError("--finetune-forms and --heldout-forms need at least one probe form")
        self.finetune_forms = list(parse_kinds(list(self.finetune_forms)))
        if "qa" not in self.finetune_forms:
            raise InputError("--finetune-forms must include qa: recall and accuracy are the paper's, on the qa form")
        if self.finetuned and self.finetune_forms != ["qa"]:
            raise InputError(
                "--finetune-forms applies to finetuning, which --finetuned skips (the model given was "
                "finetuned already)"
            )
        if self.heldout_rule not in HELDOUT_RULES:
            raise InputError(f"--heldout-rule must be one of {', '.join(HELDOUT_RULES)}, got {self.heldout_rule!r}")
        self._resolve_heldout()
        self._check_prompt_options()
        check_utility(self.utility, self.utility_include)
        self._check_no_finetune()

    def _resolve_items(self) -> None:
        """Resolve once the methods (:func:`dukb.neural.methods.resolve` under ``forget_scope``), the metrics
        (:func:`dukb.neural.metrics.parse_metrics`, the required ones added) and the attacks
        (:func:`dukb.neural.attacks.parse_attacks`), which the stages read from the plan (:attr:`resolved_methods`,
        :attr:`resolved_metrics`, :attr:`resolved_attacks`) and never parse again.

        Raises:
            InputError: an unknown method, metric or attack, or a bad per-method option or attack setting.
        """
        from dukb.neural.attacks import parse_attacks  # noqa: PLC0415 (torch; a --help path)
        from dukb.neural.methods import resolve  # noqa: PLC0415 (torch; a --help path)

        self._methods = tuple(tuple(resolve(spec, self.forget_scope)) for spec in self.methods)
        self._metrics = tuple(parse_metrics(self.metrics))
        self._attacks = tuple(parse_attacks(self.attacks)) if self.attacks else ()

    @property
    def resolved_methods(self) -> tuple[tuple, ...]:
        """The run's methods as :meth:`check` resolved them: (label, method, scope, default grid) per entry of
        ``methods``, in their order. AttributeError on a config not checked."""
        return self._methods

    @property
    def resolved_metrics(self) -> tuple:
        """The run's metrics (:class:`dukb.neural.metrics.Metric`) as :meth:`check` parsed them, the required ones
        added. AttributeError on a config not checked."""
        return self._metrics

    @property
    def resolved_attacks(self) -> tuple:
        """The run's attacks as :meth:`check` parsed them: (attack, settings) pairs (empty without ``attacks``).
        AttributeError on a config not checked."""
        return self._attacks

    def _resolve_heldout(self) -> None:
        """Resolve once the held-out forms of each method's rows and of the probe before unlearning, with
        ``recall_heldout`` a row metric (:func:`dukb.neural.metrics.heldout.resolve_heldout`; read by
        :meth:`heldout_of`). Raises InputError: a held-out form a method sees."""
        seen = {}
        if any(m.name == "recall_heldout" for m in row_metrics(list(self._metrics))):
            seen = {label: ("qa",) + tuple(m.seen_forms) for label, m, _scope, _grid in self._methods}
        by_label, baseline = resolve_heldout(self.heldout_forms, seen)  # every built-in method trains on qa
        if self.heldout_forms is not None:
            self.heldout_forms = list(baseline)
        self._heldout = (by_label, baseline if seen else ())

    def heldout_of(self, label: str) -> tuple[str, ...]:
        """The held-out forms of the rows of method ``label``, as :meth:`check` resolved them (empty without
        ``recall_heldout``). AttributeError on a config not checked."""
        by_label = self._heldout[0]
        return by_label[label] if by_label else ()

    @property
    def heldout_baseline(self) -> tuple[str, ...]:
        """The held-out forms the model is probed on before unlearning, as :meth:`check` resolved them."""
        return self._heldout[1]

    def _check_no_finetune(self) -> None:
        """``no_finetune`` evaluates ``model`` as given: refuse the options that finetune or that score facts the
        model may not know.

        Raises:
            InputError: ``no_finetune`` with ``model`` "tiny" (untrained) or ``finetuned``, with ``finetune_forms`` other than qa, with ``--sets
                paper`` (the paper's sets are the full KB's; under ``no_finetune`` they are the known part's), or
                with ``attacks`` (their worst case does not yet leave unknown facts unscored).
        """
        if not self.no_finetune:
            return
        for bad, why in (
            (
                self.model == "tiny",
                "--model tiny (an untrained model knows nothing: give a pretrained model or a model folder)",
            ),
            (self.finetuned, "--finetuned (give the model with --model)"),
            (self.finetune_forms != ["qa"], "--finetune-forms (nothing is finetuned)"),
            (
                self.sets == "paper",
                "--sets paper (the paper's sets are the full KB's; the known part's "
                "are computed: --sets exact or random)",
            ),
            (bool(self.attacks), "--attacks (their worst case does not yet leave unknown facts unscored)"),
        ):
            if bad:
                raise InputError(f"--no-finetune evaluates --model as it is: not with {why}")

    def _check_prompt_options(self) -> None:
        """The prompt format, BOS rule and judge are known values, and a ``finetuned`` model was finetuned with the
        same format and BOS (:func:`check_model_prompt`)."""
        for name, allowed in (("prompt_format", PROMPT_FORMATS), ("bos", BOS_RULES), ("judge", JUDGES)):
            value = getattr(self, name)
            if value is not None and value not in allowed:
                raise InputError(f"--{name.replace('_', '-')} must be one of {', '.join(allowed)}, got {value!r}")
        if self.finetuned:
            check_model_prompt(self.finetuned, self.prompt_format or "dukb", self.bos or "never")

    def _resolve_compat(self) -> None:
        """Check the Eval-DU components' choices; under ``--compat eval-du`` without targets, take the benchmark's
        (:func:`dukb.kb.edu_relat.benchmark_targets`; None on another KB, refused at the plan unless the command
        line's ``--targets-file``, read after this check, gives them).

        Raises:
            InputError: an unknown reinforcement schedule, family grids or WHP grid; a bad targets.txt.
        """
        for flag, value, known in (
            ("--reinforce", self.reinforce, REINFORCE_SCHEDULES),
            ("--family-grids", self.family_grids, FAMILY_GRIDS),
            ("--whp-grid", self.whp_grid, tuple(WHP_GRIDS)),
        ):
            if value not in known:
                raise InputError(f"{flag} must be one of {', '.join(known)}, got {value!r}")
        if self.compat == "eval-du" and self.targets is None:
            self.targets = benchmark_targets(self.kb)


def check_model_prompt(model, prompt_format: str, bos: str) -> None:
    """Refuse to probe a finetuned model in another prompt format, or with another BOS, than it was finetuned with
    (its :data:`dukb.neural.modelrecord.MODEL_RECORD`; a record without them: dukb's, ``"dukb"`` and ``"never"``). The BOS rules are compared
    by what they do for the model's family (:func:`dukb.neural.spec.adds_bos`). A model without a record (a hub id,
    a directory dukb did not save) is not checked.

    Args:
        model: the ``--finetuned`` argument; prompt_format, bos: the run's (:data:`dukb.neural.spec.PROMPT_FORMATS`,
            :data:`dukb.neural.spec.BOS_RULES`).

    Raises:
        InputError: the formats differ, or BOS is added in one and not the other (one line naming both); a malformed
            record (:func:`dukb.neural.modelrecord.read_model_record`).

    Source: dukb (a model is probed as it was trained; Eval-DU's code trains and probes with one model_config
    entry, wrh14/deep_unlearning config/model_config.yaml).
    """
    rec = read_model_record(model) if model is not None else None
    if rec is None:
        return
    was = rec.get("prompt_format") or "dukb"
    if was != prompt_format:
        raise InputError(
            f"the model {model} was finetuned with --prompt-format {was}, not {prompt_format}: pass "
            f"--prompt-format {was} (or finetune it again in that format)"
        )
    fam, was_bos = rec.get("family"), rec.get("bos") or "never"
    if adds_bos(was_bos, fam) != adds_bos(bos, fam):
        raise InputError(f"the model {model} was finetuned with --bos {was_bos}, not {bos}: pass --bos {was_bos}")


def eval_du_targets_problem(cfg: EvaluateConfig) -> str | None:
    """Why ``--compat eval-du`` cannot run ``cfg`` (a checked config, its ``--targets-file`` read), or None: the
    preset runs the benchmark's 55 targets, which only the imported EDU-RELAT's targets.txt or the user gives."""
    if cfg.compat == "eval-du" and not cfg.targets:
        return (
            "--compat eval-du runs the benchmark's 55 targets: give --kb the imported EDU-RELAT (dukb "
            "import-eval-du; its targets.txt) or --targets-file"
        )
    return None


def _model_spec(cfg: RunConfig):
    """The :class:`ModelSpec` to finetune (``cfg.model``) or to load (``cfg.finetuned``):
    :meth:`dukb.neural.runconfig.RunConfig.model_spec`."""
    return cfg.model_spec()
