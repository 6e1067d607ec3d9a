"""RESTOR-style fact-state analysis (Rezaei et al., "RESTOR: Knowledge Recovery in Machine Unlearning"), judged
exactly against the KB and checked with the rules (``dukb restor``).

A clean model θ_ideal is finetuned on the true KB, corrupted into θ_corrupted by training on documents that state
plausible wrong values for a share of the facts (F'), and unlearned into θ_unlearned with GA, KL and NPO; every fact
is probed on all models and each answer judged as the true value, the injected value or other. Modules:

- :mod:`.facts`: the facts asked about (questions, true/injected values, random plausible answers; Sec. 3.2, 3.4,
  Fig. 2) and the KB stated as sentences;
- :mod:`.probing`: M generations per fact, exact judging (:mod:`dukb.kb.judge`), majority vote, log-probabilities
  (Sec. 3.4);
- :mod:`.states`: fact states Recovery / Forget / Unchanged over A and Degraded / Unaffected over B, partitions,
  accuracy summaries (Sec. 4.3, Tables 1-3);
- :mod:`.beliefs`: a model's believed triples, handed to :mod:`dukb.solver.beliefs` (closure of the beliefs,
  contradictions, corrupted facts still derivable; dukb's addition);
- :mod:`.config`: :class:`RestorConfig` and the presets (App. C.1, C.2);
- :mod:`.texts`: forget and retain documents (Sec. 3.3, 4.3, App. D);
- :mod:`.files`: the run directory's files (facts.jsonl, results.jsonl, ...);
- :mod:`.pipeline`: the resumable stages and :func:`run_restor`;
- :mod:`.report`: states.csv, summary.csv, report.md and the plots (Tables 1-3, Fig. 2 as a table).

Importing the package imports neither torch nor transformers: :mod:`.probing` and :mod:`.pipeline`, which do,
are imported by their own names (``dukb restor`` imports :func:`.pipeline.run_restor` when it runs).
"""

from dukb.kb.judge import INJECTED, LABELS, OTHER, TRUE, Judge, aliases, majority, normalize
from dukb.neural.restor.beliefs import belief_analysis, belief_triples
from dukb.neural.restor.config import PRESET_NAMES, RESTOR_METHODS, RestorConfig, UnlearnSetting
from dukb.neural.restor.facts import N_RANDOM, FactProbe, fact_probes, fact_sentences, random_candidates
from dukb.neural.restor.files import RowsFile
from dukb.neural.restor.report import markdown, method_label, plot_states, render, states_table, summary_rows
from dukb.neural.restor.states import (
    DEGRADED,
    EXCLUDED,
    FORGET,
    RECOVERY,
    STATES,
    STATES_A,
    STATES_B,
    UNAFFECTED,
    UNCHANGED,
    fact_state,
    logprob_means,
    partition,
    summarize_model,
)
from dukb.neural.restor.texts import forget_texts, retain_texts
from dukb.solver.beliefs import FUNCTIONAL

__all__ = [
    # judging (dukb.kb.judge)
    "TRUE",
    "INJECTED",
    "OTHER",
    "LABELS",
    "Judge",
    "aliases",
    "majority",
    "normalize",
    # facts and probing
    "N_RANDOM",
    "FactProbe",
    "fact_probes",
    "fact_sentences",
    "random_candidates",
    # states
    "RECOVERY",
    "FORGET",
    "UNCHANGED",
    "DEGRADED",
    "UNAFFECTED",
    "EXCLUDED",
    "STATES",
    "STATES_A",
    "STATES_B",
    "fact_state",
    "partition",
    "summarize_model",
    "logprob_means",
    # beliefs
    "FUNCTIONAL",
    "belief_analysis",
    "belief_triples",
    # config, texts, files
    "RESTOR_METHODS",
    "PRESET_NAMES",
    "RestorConfig",
    "UnlearnSetting",
    "forget_texts",
    "retain_texts",
    "RowsFile",
    # pipeline and report
    "render",
    "markdown",
    "method_label",
    "plot_states",
    "states_table",
    "summary_rows",
]
