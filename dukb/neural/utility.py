"""Utility of a model on general benchmarks through EleutherAI's lm-evaluation-harness (``dukb evaluate --utility``;
the optional ``utility`` extra, ``pip install 'dukb[utility]'``).

Eval-DU measures, beside recall and accuracy on the KB, the finetuned model's utility on three LLM benchmarks (Wu
et al. 2025, Table 5: MMLU, PIQA, RACE) and the trade-off "Recall@U ≥ 0.95 FT": "we calculate recall when the
utility score is higher than 95% of the utility score that the finetuned model (before unlearning) has" (Sec. 4 and
Table 7). Its scripts run ``lm_eval --model vllm --tasks piqa,race,mmlu --batch_size auto`` on every saved unlearned
model (wrh14/deep_unlearning scripts_unlearning_methods/ga.sh:19-22). dukb runs the same harness in-process,
through :func:`lm_eval.simple_evaluate` with its Hugging Face wrapper
(``lm_eval.models.huggingface.HFLM(pretrained=<the model in memory>, tokenizer=...)``), on the finetuned model once
and on the unlearned model of every row, so that no model is written or read again.

What is kept of lm-eval's results, per task asked: every metric as lm-eval reports it (``acc``, ``acc_norm``,
``exact_match``, ...; a filter other than ``none`` kept in the name, ``exact_match,strict-match``), its standard
error where given (``acc_stderr``), the task's version, its n-shot and the number of documents scored; a group
(``mmlu``) is reported by its aggregate, a tag by each of its tasks. The headline metric of a task is its first
metric (:func:`headline`).

This module imports neither torch nor lm_eval (the command line's help and the report read it without either); its
checks import lm-eval and refuse, in one line, when it is not installed (:func:`require_lm_eval`). Running the harness
on a model is :mod:`dukb.neural.lmeval`'s.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from pathlib import Path

from dukb import InputError
from dukb.neural.metrics.summary import mean_std, num

#: the extra that brings lm-eval, named in the refusal without it
EXTRA_HINT = "pip install 'dukb[utility]'"
#: requests per batch of the harness's HF wrapper (Eval-DU's scripts use ``--batch_size auto``, which probes the
#: memory anew for every model; a fixed size keeps rows comparable across devices)
UTILITY_BATCH_SIZE = 16
#: the run directory's record of the utility runs: the finetuned model's scores, the tasks, lm-eval's version
UTILITY_FILE = "utility.json"
#: Recall@U ≥ this × the finetuned model's utility (Wu et al. 2025, Table 7)
UTILITY_SHARE = 0.95

UTILITY_HELP = (
    "Also measure utility with lm-eval (dukb's `utility` extra, which installs lm_eval): comma-"
    "separated task, group or tag names of lm-evaluation-harness (e.g. piqa,race,mmlu, as Eval-DU's "
    "scripts) or of --utility-include's YAML files, scored on the finetuned model once (RUN_DIR/"
    "utility.json) and on the unlearned model of every row (its `utility` field: task -> metrics, "
    "version, n-shot); report.md adds Recall@U>=0.95FT per task (Wu et al. 2025, Table 7). A task that "
    "cannot be loaded (unknown name, data set not available offline) is refused before any training. "
    "Costly: every task runs once per (target, method, setting). Part of the run identity when given."
)
UTILITY_INCLUDE_HELP = (
    "A folder of your own lm-eval task YAML files (lm-eval's include_path) for --utility; a "
    "local data set is read by lm-eval's `dataset_path: json` with `dataset_kwargs: {data_files: "
    "...}` (a relative path is read from the working directory). Part of the run identity when "
    "given."
)

log = logging.getLogger(__name__)


def require_lm_eval():
    """The ``lm_eval`` module, imported.

    Returns:
        the module.

    Raises:
        InputError: lm-eval is not installed (one line naming the ``utility`` extra, :data:`EXTRA_HINT`).
    """
    try:
        import lm_eval
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] != "lm_eval":
            raise
        raise InputError(
            f"--utility needs the utility extra, which is not installed (no module 'lm_eval'): {EXTRA_HINT}"
        ) from None
    return lm_eval


@contextlib.contextmanager
def quiet():
    """lm-eval's and datasets' loggers at ERROR while a task list is resolved (their notes are not dukb's lines)."""
    names = ("lm_eval", "datasets", "huggingface_hub")
    levels = {n: logging.getLogger(n).level for n in names}
    for n in names:
        logging.getLogger(n).setLevel(logging.ERROR)
    try:
        yield
    finally:
        for n, level in levels.items():
            logging.getLogger(n).setLevel(level)


@functools.cache
def task_manager(include: str | None, local_only: bool):
    """A :class:`lm_eval.tasks.TaskManager` over lm-eval's own tasks and ``include`` (its ``include_path``), or over
    ``include`` alone (``local_only``: indexing lm-eval's thousands of task files takes seconds). Made once per
    process and arguments.

    Raises:
        InputError: lm-eval is not installed.
    """
    require_lm_eval()
    from lm_eval.tasks import TaskManager

    with quiet():
        return TaskManager(include_path=include, include_defaults=not local_only)


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= 300 else text[:297] + "..."


@functools.cache
def resolve_tasks(tasks: tuple[str, ...], include: str | None = None) -> tuple:
    """Load every task of ``tasks`` with lm-eval (its data set included), so that a task that cannot run is refused
    before any training; the result is cached for the process.

    Args:
        tasks: task, group or tag names of lm-eval or of the YAML files in ``include``.
        include: a folder of task YAML files (lm-eval's ``include_path``) or None.

    Returns:
        ``(manager, reported)``: the :class:`lm_eval.tasks.TaskManager` that loads them (over ``include`` alone when
        every task is found there, else with lm-eval's own tasks) and name -> the result keys reported for it
        (the name itself for a task or a group; a tag's tasks).

    Raises:
        InputError: lm-eval is not installed; ``include`` is not a folder; a task is unknown, or cannot be loaded
            (its data set missing or unreachable offline), one line naming it.
    """
    require_lm_eval()
    if include is not None and not Path(include).is_dir():
        raise InputError(f"--utility-include {include}: not a folder of lm-eval task YAML files")
    if include is not None:  # the user's folder alone first; a task it lacks or cannot build needs lm-eval's own
        local = task_manager(include, True)
        if all(t in local.all_tasks for t in tasks):
            try:
                return local, _load_each(local, tasks, include)
            except InputError:
                pass
    manager = task_manager(include, False)
    return manager, _load_each(manager, tasks, include)


def _load_each(manager, tasks: tuple[str, ...], include: str | None) -> dict:
    """name -> the result keys reported for it (:func:`resolve_tasks`), each task loaded by ``manager``.

    Raises:
        InputError: a task ``manager`` does not know or cannot load, one line naming it."""
    reported = {}
    for name in tasks:
        if name not in manager.all_tasks and not Path(name).is_file():
            where = f" or in {include}" if include else " (give your own task YAMLs with --utility-include DIR)"
            raise InputError(f"utility task {name!r} is not a task, group or tag of lm-eval {_version()}{where}")
        try:
            with quiet():
                loaded = manager.load([name])
        except Exception as e:  # noqa: BLE001 - whatever the data set's loader raises: one line, the task named
            raise InputError(f"utility task {name!r} cannot be loaded by lm-eval: {_one_line(e)}") from None
        reported[name] = (name,) if name in loaded["tasks"] or name in loaded["groups"] else tuple(loaded["tasks"])
    return reported


def _version() -> str:
    return require_lm_eval().__version__


def check_utility(tasks, include: str | None) -> None:
    """The ``--utility`` and ``--utility-include`` options of a run config, checked before anything runs.

    Raises:
        InputError: ``include`` without tasks; see :func:`resolve_tasks`.
    """
    if include is not None and not tasks:
        raise InputError("--utility-include needs --utility TASKS (the tasks to run)")
    if tasks:
        resolve_tasks(tuple(tasks), include)


def _metric_name(key: str) -> str | None:
    """lm-eval's ``metric,filter`` result key as dukb names it (``acc``, ``acc_stderr``, ``exact_match,strict-match``);
    None for a key that is no metric (alias, name, sample_len)."""
    metric, sep, flt = key.partition(",")
    if not sep:
        return None
    return metric if flt == "none" else key


def task_scores(results: dict, name: str) -> dict:
    """One task's scores out of :func:`lm_eval.simple_evaluate`'s results.

    Args:
        results: the harness's result dict (``results``, ``versions``, ``n-shot``, ``n-samples``, ``group_subtasks``).
        name: a result key (a task or a group).

    Returns:
        dict: each metric (float, or None when lm-eval gives "N/A"), then ``version``, ``n_shot`` (int or None for a
        group) and ``n_samples`` (documents scored; a group's sum over its tasks).
    """
    entry = results["results"][name]
    out: dict = {}
    for key, value in entry.items():
        metric = _metric_name(key)
        if metric is not None:
            out[metric] = float(value) if isinstance(value, (int, float)) else None
    leaves = _leaves(results, name)
    counts = results.get("n-samples", {})
    out["version"] = results.get("versions", {}).get(name)
    out["n_shot"] = results.get("n-shot", {}).get(name)
    out["n_samples"] = sum(int(counts[t]["effective"]) for t in leaves if t in counts)
    return out


def _leaves(results: dict, name: str) -> list[str]:
    subs = results.get("group_subtasks", {})
    if not subs.get(name):
        return [name]
    return [leaf for s in subs[name] for leaf in _leaves(results, s)]


def headline(scores: dict) -> str | None:
    """A task's headline metric: the first metric lm-eval reports for it (its YAML's first ``metric_list`` entry:
    acc for piqa, race and mmlu), its stderr and the bookkeeping keys left out; None when it has none."""
    return next(
        (
            k
            for k in scores
            if k not in ("version", "n_shot", "n_samples") and not k.endswith("_stderr") and "_stderr," not in k
        ),
        None,
    )


def recall_at_utility(df, finetuned: dict, share: float = UTILITY_SHARE, higher: dict | None = None) -> dict:
    """Recall@U ≥ share × FT per method and task: per target, the largest recall among the settings whose utility
    (the task's headline metric, :func:`headline`) is at least ``share`` × the finetuned model's; a target with no
    such setting counts 0 (the finetuned model itself, recall 0, is the curve's anchor, as for Recall@Acc≥0.8 in
    :func:`dukb.neural.metrics.summary.target_tradeoff`); the mean and population std over targets.

    Args:
        df: result rows (pandas DataFrame with method, target, recall and ``utility``: task -> scores, or None).
        finetuned: the finetuned model's scores, task -> scores (RUN_DIR/utility.json's ``finetuned.tasks``).
        share: the share of the finetuned model's utility (0.95).
        higher: task -> {metric: higher is better} (utility.json's ``higher_is_better``); a task whose headline
            metric is lower-is-better (a perplexity) has no such bar and is left out.

    Returns:
        method -> task -> {recall_at_utility, std (floats; None when no target has a row with that task's
        utility), n (targets scored), n_none (targets with no setting above the bar), threshold, metric}.

    Source: Wu et al. 2025, Sec. 4 and Table 7 ("we calculate recall when the utility score is higher than 95% of
    the utility score that the finetuned model (before unlearning) has", Recall@U ≥ 0.95 FT).
    """
    out: dict = {}
    if "utility" not in df.columns or "recall" not in df.columns:
        return out
    for method, g in df.groupby("method", sort=False):
        per_task: dict = {}
        for task, ft in finetuned.items():
            metric = headline(ft)
            base = ft.get(metric) if metric else None
            if base is None or ((higher or {}).get(task) or {}).get(metric) is False:
                continue
            bar = share * float(base)
            per_target = []
            n_none = 0
            for _t, rows in g.groupby("target", sort=False):
                pts = [(float(r["recall"]), _score(r["utility"], task, metric)) for r in rows.to_dict("records")]
                pts = [(rc, u) for rc, u in pts if u is not None and rc == rc]
                if not pts:
                    continue
                ok = [rc for rc, u in pts if u >= bar]
                n_none += not ok
                per_target.append(max(ok, default=0.0))
            mean = sum(per_target) / len(per_target) if per_target else None
            std = (sum((x - mean) ** 2 for x in per_target) / len(per_target)) ** 0.5 if per_target else None
            per_task[task] = {
                "recall_at_utility": mean,
                "std": std,
                "n": len(per_target),
                "n_none": n_none,
                "threshold": bar,
                "metric": metric,
            }
        out[method] = per_task
    return out


def _score(utility, task: str, metric: str):
    if not isinstance(utility, dict) or not isinstance(utility.get(task), dict):
        return None
    v = utility[task].get(metric)
    return float(v) if isinstance(v, (int, float)) else None


def utility_section(df, record: dict | None) -> list[str]:
    """report.md's lines on utility: the finetuned model's score per task and the table of Recall@U ≥ 0.95 FT per
    method and task (:func:`recall_at_utility`); [] when the run measured none.

    Args:
        df: result rows (pandas DataFrame); record: RUN_DIR/utility.json (None: no utility measured).

    Source: Wu et al. 2025, Tables 5 and 7.
    """

    finetuned = ((record or {}).get("finetuned") or {}).get("tasks")
    if not isinstance(finetuned, dict) or not finetuned or "utility" not in df.columns:
        return []
    table = recall_at_utility(df, finetuned, higher=record.get("higher_is_better"))
    tasks = [t for t in finetuned if any(t in per_task for per_task in table.values())]
    if not tasks:
        return []
    lines = [
        "## Utility (lm-eval): recall at utility ≥ 0.95 × the finetuned model's",
        "",
        "Finetuned model: "
        + "; ".join(f"{t} {headline(s)} {num(s.get(headline(s)), 3)}" for t, s in finetuned.items())
        + f" (lm-eval {record.get('lm_eval', '?')}; versions and n-shot in utility.json).",
        "",
        "| method | " + " | ".join(f"Recall@U≥0.95FT {t} ↑ (n, none)" for t in tasks) + " |",
        "|---|" + "---|" * len(tasks),
    ]
    for method, per_task in table.items():
        cells = []
        for t in tasks:
            c = per_task.get(t)
            cells.append(
                "–"
                if c is None or c["n"] == 0
                else f"{mean_std(c['recall_at_utility'], c['std'], c['n'])} (n={c['n']}, none {c['n_none']})"
            )
        lines.append(f"| {str(method).upper()} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Per target the largest recall among the settings whose utility (the task's first metric) is at "
        "least 0.95 × the finetuned model's, 0 when none is (`none`: how many targets), mean ± std over "
        "targets (Wu et al. 2025, Table 7). Rows without utility (WHP's two-model combination, ICU's "
        "instruction) are skipped.",
        "",
    ]
    return lines


__all__ = [
    "EXTRA_HINT",
    "UTILITY_BATCH_SIZE",
    "UTILITY_FILE",
    "UTILITY_HELP",
    "UTILITY_INCLUDE_HELP",
    "UTILITY_SHARE",
    "check_utility",
    "headline",
    "quiet",
    "recall_at_utility",
    "require_lm_eval",
    "resolve_tasks",
    "task_manager",
    "task_scores",
    "utility_section",
]
