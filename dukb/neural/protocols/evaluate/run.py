"""`dukb evaluate`'s stages: the paper's deep-unlearning protocol end to end, resumable (Wu et al. 2025, Sec. 4,
App. C/H; Eq. 1-2 for recall and accuracy, Definition 2 for Success-DU).

- plan: KB, closure, targets, methods and grids, the run identity (:func:`run_identity`), minimal deep unlearning
  sets and forget sets (:func:`dukb.neural.plan.build_plan`, cached in RUN_DIR/sets.json);
- model: finetune until the model knows 100% of the KB (cached in RUN_DIR/finetuned under
  :func:`finetune_cache_key`) or load ``finetuned``; probe it before unlearning (qa and the held-out forms);
- units: (target, method), each the method's grid values for the target; a row per (target, method, setting);
- score: Success-DU on the qa form and on held-out forms, from the row's forgotten facts;
- report: summary.csv, report.md, accuracy_recall.png (:mod:`dukb.neural.protocols.evaluate.report`).

Under a multi-process launch with a process group (torchrun, accelerate) the targets are sharded across ranks and
merged by rank 0; without one, any number of invocations share the run through unit claims
(:class:`dukb.neural.protocols.base.Protocol`).
"""

from __future__ import annotations

import copy
from dataclasses import asdict

from dukb import InputError
from dukb.kb import load_kb
from dukb.kb.generate import default_generated_kb_dir
from dukb.kb.probes import probe_report
from dukb.kb.schema_probes import require_templates, unscorable_summary
from dukb.neural import distributed as dist
from dukb.neural.data import kb_qa
from dukb.neural.families import component_grid
from dukb.neural.known import (
    check_known_targets,
    known_from_probe,
    known_line,
    known_part,
    rederivable,
    require_candidates,
)
from dukb.neural.lmeval import measure_utility, row_utility
from dukb.neural.methods import check_unique, method_grids, schedule_for
from dukb.neural.methods.base import SweepSchedule
from dukb.neural.metrics import combined_needs, row_metrics
from dukb.neural.metrics.heldout import elicited_by_form, heldout_known
from dukb.neural.metrics.summary import best_row, missing, num
from dukb.neural.modelrecord import model_fingerprint
from dukb.neural.models import load_model, resolve_device, resolve_dtype
from dukb.neural.pipeline import finetune_kb, finetune_record, load_finetuned
from dukb.neural.plan import build_plan, choose_targets
from dukb.neural.probe import Predictor, probe, probe_budget
from dukb.neural.protocols.base import Protocol
from dukb.neural.protocols.evaluate.config import EvaluateConfig, _model_spec, eval_du_targets_problem
from dukb.neural.protocols.evaluate.identity import EXTENDABLE, PROBE, finetune_cache_key, run_identity
from dukb.neural.protocols.evaluate.report import render
from dukb.neural.run.files import RunDir, read_json, write_json_atomic
from dukb.neural.run.identity import history_entry
from dukb.neural.run.lock import holds_run_lock
from dukb.neural.run.probecache import PROBE_CACHE_NAME, probe_cache_key, read_probe_cache, write_probe_cache
from dukb.neural.run.provenance import provenance
from dukb.neural.run.units import SHARD_GLOB, merge_shards
from dukb.neural.savedmodels import SaveLayout
from dukb.neural.spec import CHAT
from dukb.neural.unlearn import UnitPlan, sweep_target
from dukb.neural.utility import UTILITY_BATCH_SIZE, UTILITY_FILE
from dukb.solver.closure import compute_closure


class EvaluateProtocol(Protocol):
    """`dukb evaluate` in stages (module docstring). Source: Wu et al. 2025, Sec. 4 and App. C/H."""

    name = "evaluate"
    config_class = EvaluateConfig
    units_name = "(target, method)"
    bar_label = "unlearning"

    # ---- plan ----------------------------------------------------------------------------------------------------
    def plan(self) -> None:
        """KB, closure, targets, methods, grids and metrics; the run identity; RUN_DIR claimed; sets and forget sets.

        Raises:
            InputError: no method or a method twice, a held-out form some method sees, an unknown schedule or
                target, another run in RUN_DIR, grid values added to a run for only part of its targets, or an
                FSDP launch (each process unlearns its own targets with a whole model).
        """

        cfg = self.cfg
        self.device = resolve_device(cfg.device)  # cuda:LOCAL_RANK under a multi-process launch
        dist.check_unsharded("evaluate", self.device)
        self.main = dist.is_main_process()
        if dist.is_distributed():
            self._prefix_log_with_rank()
        if cfg.kb is None:
            kb_dir = default_generated_kb_dir()
        else:
            kb_dir = cfg.kb
        self.kb = kb = load_kb(kb_dir)
        require_templates(kb, ("qa",), "evaluate (finetunes and scores every fact on the qa form)")
        self.closure = closure = compute_closure(kb, cfg.rules)
        self.spec = spec = _model_spec(cfg)  # its family chooses the grids of --family-grids paper
        self.known = self.early_probe = self.early_lm = None
        self.sets_kb = kb  # the KB whose minimal sets are computed: under --no-finetune its known part
        if cfg.no_finetune:
            self._known_before()
        methods, grids, metrics, targets = self._methods_and_targets()
        dtype = str(resolve_dtype(cfg.dtype, self.device)).removeprefix("torch.")
        # a preset's own schedule also when the entry carries per-method options (``du_ga:lr=1e-4``)
        schedules = {label: schedule_for(label.partition(":")[0], cfg.schedule) for label, *_r in methods}
        identity = run_identity(cfg, kb, closure, methods, grids, targets, spec, dtype, metrics, schedules)
        # one process writes results.jsonl; under a multi-process launch each writes its shard, merged at the end
        mine = RunDir(self.run).shard(dist.rank()) if dist.is_distributed() else RunDir(self.run).results
        # one writer: locks the directory, refuses a run with other settings before anything in it is touched
        self.claim(identity, extendable=EXTENDABLE, results_path=mine, other_results=self.run.glob(SHARD_GLOB))
        self._check_grown_grids_cover_targets(targets)
        dist.barrier(self.device)  # every process has repaired its file before any reads the others
        self.results.absorb([RunDir(self.run).results, *RunDir(self.run).shards()])
        self.record = self._run_record(targets, methods)
        if self.added:
            self.log("adding to the run: " + "; ".join(f"{k} {', '.join(map(str, v))}" for k, v in self.added.items()))
        dist.barrier(self.device)  # every process has read the old state before anyone writes
        self._build_sets_plan(targets, methods)
        self.log(
            f"KB {kb.source}: {len(kb.relationships)} relationship + {len(kb.biographies)} biography facts; "
            f"closure {len(closure)}; {len(targets)} targets; sets {cfg.sets}"
        )

    def _prefix_log_with_rank(self) -> None:
        """Under a multi-process launch, prefix every line this process logs with its rank."""
        rank_log = self.log

        def log(msg: str) -> None:
            rank_log(f"[rank {dist.rank()}/{dist.world_size()}] {msg}")

        self.log = log

    def _methods_and_targets(self) -> tuple[list, dict, list, list]:
        """The methods and the metrics as the config's check resolved them, the methods' grids and the targets (set on
        ``self`` too).

        Returns:
            ``(methods, grids, metrics, targets)``: (label, method, scope, grid) tuples
            (:func:`dukb.neural.methods.resolve`), label -> grid values, the parsed metrics, and the target fact
            ids (given, or :func:`dukb.neural.plan.choose_targets` among the facts derivable from the other facts).

        Raises:
            InputError: no method or a method twice, a target that is not a fact of the KB, or ``--compat
                eval-du`` without targets (:func:`eval_du_targets_problem`). (The held-out forms were resolved
                by the config's check: :meth:`EvaluateConfig.heldout_of`.)
        """

        cfg = self.cfg
        self.methods = methods = list(cfg.resolved_methods)  # as the config's check resolved them
        self.metrics = metrics = list(cfg.resolved_metrics)
        check_unique(label for label, *_ in methods)
        family = self.spec.preset_family
        self.grids = grids = method_grids(
            methods, cfg.grids, lambda m: component_grid(m.name, family, cfg.family_grids, cfg.whp_grid)
        )
        problem = eval_du_targets_problem(cfg)
        if problem:
            raise InputError(problem)
        if self.known is not None:
            targets = self._known_targets()
        else:
            targets = (
                list(dict.fromkeys(cfg.targets))
                if cfg.targets
                else choose_targets(self.kb, cfg.n_targets, cfg.seed, derivable_in=self.closure)
            )
        self.targets = targets
        for t in targets:
            self.closure.atom_of_fact(t)
        return methods, grids, metrics, targets

    def _known_before(self) -> None:
        """``--no-finetune``: load ``model`` as given, probe it on the qa form of every KB fact (the probe before
        unlearning; :meth:`_probe_before` reuses it), and keep the known facts (:mod:`dukb.neural.known`); the
        closure becomes the known part's, Ω(K', R), whose minimal sets are scored (Wu et al. 2025, Definitions
        2-3 over K').

        Raises:
            InputError: the model cannot be loaded.
        """

        lm = self.early_lm = load_model(self.spec)
        self.early_probe = probe(
            Predictor(lm.model, lm.tokenizer, lm.tags, device=lm.device), kb_qa(self.kb, ("qa",)), **self._probe_kw(lm)
        )
        self.known = known = known_from_probe(self.kb, self.early_probe)
        self.sets_kb = known_part(self.kb, known)
        self.closure = compute_closure(self.sets_kb, self.closure.rules)
        self.log(known_line(known))

    def _known_targets(self) -> list[int]:
        """``--no-finetune``'s targets: the given ones, each known and derivable from other known facts, or
        ``n_targets`` drawn among such facts (:func:`dukb.neural.known.rederivable`).

        Raises:
            InputError: no known fact has such a derivation; a given target the model did not know or with no such
                derivation; more targets asked than known facts qualify.
        """

        cfg = self.cfg
        candidates = rederivable(self.closure, sorted(self.known.relationships))
        require_candidates(self.known, candidates, chat=cfg.prompt == CHAT)
        if cfg.targets:
            targets = list(dict.fromkeys(cfg.targets))
            for t in targets:
                self.kb.relationship(t)  # a fact of the KB at all (one line otherwise)
            check_known_targets(targets, self.known, candidates)
            return targets
        return choose_targets(
            self.kb,
            cfg.n_targets,
            cfg.seed,
            among=candidates,
            what=" (--no-finetune: the known facts with a derivation from other known facts)",
        )

    def _check_grown_grids_cover_targets(self, targets: list[int]) -> None:
        """A setting must cover the same targets as the others on its method's curve.

        Raises:
            InputError: grid values are added to a run (``self.added``) while some of its targets are not in this
                invocation.
        """
        grown = [k.split(".")[1] for k in self.added if k.startswith("methods.") and k.endswith(".grid")]
        left_out = [t for t in self.identity["targets"] if t not in targets]
        if grown and left_out:
            raise InputError(
                f"adding grid values to {', '.join(grown)} needs every target of the run, but "
                f"{len(left_out)} of its {len(self.identity['targets'])} targets are not in this "
                f"invocation ({', '.join(map(str, left_out[:5]))}{', ...' if len(left_out) > 5 else ''})"
                "; resume with the run's targets (the same --n-targets, --targets or --targets-file)",
                RunDir(self.run).config,
            )

    def _run_record(self, targets: list[int], methods: list) -> dict:
        """config.json's record: the settings, the KB's and rules' fingerprints, targets, methods with their scopes
        and grids, the identity, and the run's history with this invocation's additions appended."""

        kb, closure = self.kb, self.closure
        labels = list(self.identity["methods"])
        return {
            "protocol": "evaluate",
            **asdict(self.cfg),
            "kb": str(kb.source),
            "kb_fingerprint": kb.fingerprint(),
            "rules_fingerprint": closure.rules.fingerprint,
            "targets": self.identity["targets"],
            "n_targets": len(self.identity["targets"]),
            "methods": labels,
            "scopes": {lb: self.identity["methods"][lb]["scope"] for lb in labels},
            "grids": {lb: self.identity["methods"][lb]["grid"] for lb in labels},
            "identity": self.identity,
            "history": self.old_record.get("history", [])
            + [history_entry(self.added, targets=targets, methods=[lb for lb, *_ in methods])],
        }

    def _build_sets_plan(self, targets: list[int], methods: list) -> None:
        """The minimal deep unlearning sets and forget sets of the targets (:func:`dukb.neural.plan.build_plan`):
        process 0 computes and caches them in RUN_DIR, the other processes then read the cache."""

        cfg = self.cfg
        scopes = [scope for _label, _m, scope, _g in methods]
        kw = dict(sets_method=cfg.sets, seeds=cfg.seeds, seed=cfg.seed)
        if self.main:
            self.sets_plan = build_plan(
                self.run, self.sets_kb, self.closure, targets, scopes, write=not self.joined, **kw
            )
        dist.barrier(self.device)
        if not self.main:  # the caches process 0 just wrote
            self.sets_plan = build_plan(self.run, self.sets_kb, self.closure, targets, scopes, write=False, **kw)

    # ---- model ---------------------------------------------------------------------------------------------------
    def _note_unscorable(self, forms: list[str]) -> None:
        """For a KB with another schema: per held-out form, the facts without a probe of it (their relation lacks
        the form's template, or their data rule it out): unscorable on that form, counted in config.json's
        ``unscorable_probes`` and one log line each, never silently skipped (issue 43; the forms: Wu et al. 2025,
        Table 3)."""
        if self.kb.schema.is_family or not forms:
            return
        _, report = probe_report(self.kb, forms, 0)
        self.record["unscorable_probes"] = report
        for line in unscorable_summary(report):
            self.log(f"unscorable probes: {line}")

    def model(self) -> None:
        """Finetune (cached under :func:`finetune_cache_key`) or load the model; write config.json; probe the model
        before unlearning on qa and every held-out form (``heldout_known_before``); the probe items of the rows."""

        cfg, kb, record = self.cfg, self.kb, self.record
        lm, ft = self._finetuned_model()
        self.lm = lm
        record["provenance"] = provenance(
            lm.device, gradient_checkpointing=cfg.gradient_checkpointing, probe_batch_size=PROBE["batch_size"]
        )
        # kept at the top level for readers of earlier runs
        record["versions"] = record["provenance"]["versions"]
        record["device_used"] = record["provenance"]["device"]  # "device" keeps the configured value
        record["world_size"] = dist.world_size()
        cfg_path = RunDir(self.run).config
        if self.main and not self.joined:
            write_json_atomic(cfg_path, record)
            write_json_atomic(self.run / "finetune.json", ft)
        self.row_metrics = row_metrics(self.metrics)
        heldout = any(m.name == "recall_heldout" for m in self.row_metrics)
        kinds = combined_needs(self.row_metrics).kinds  # the probe kinds the metrics need ("qa" first)
        if heldout and cfg.heldout_forms:
            kinds = tuple(dict.fromkeys(kinds + tuple(cfg.heldout_forms)))
        items = kb_qa(kb, kinds)
        # the baseline covers every form some row may be scored on (each row then keeps its own held-out forms),
        # as the config's check resolved them
        base_forms = set(cfg.heldout_baseline) if heldout else set()
        base = self._probe_before(lm, [it for it in items if it.kind == "qa" or it.kind in base_forms])
        acc0 = float(base[base["kind"] == "qa"]["known"].mean())
        self.attacks, self.reference = _attacks_of(cfg, lm)
        self.log(f"model {record['model']}: knows {acc0:.4f} of the KB before unlearning")
        if cfg.utility:
            self._finetuned_utility(lm)
        self.heldout_before = elicited_by_form(base, base_forms) if heldout else None
        if heldout and self.known is not None:  # a fact the model did not know is unscorable on every form
            pairs = self.known.pairs()
            self.heldout_before = frozenset(p for p in self.heldout_before if p[1:] in pairs)
        if heldout:  # how much of the KB the held-out forms elicit before unlearning: recall_heldout's baseline
            record["heldout_known_before"] = heldout_known(kb, base, sorted(base_forms, key=list(kinds).index))
            self.log(f"held-out forms elicit {record['heldout_known_before']['all']:.4f} of the KB before unlearning")
            self._note_unscorable(sorted(base_forms, key=list(kinds).index))
            if self.main and not self.joined:
                write_json_atomic(cfg_path, record)
        if heldout and cfg.heldout_rule == "pairs":  # after unlearning only the pairs that elicited before count
            others = set(combined_needs([m for m in self.row_metrics if m.name != "recall_heldout"]).kinds) | {"qa"}
            items = [
                it for it in items if it.kind in others or (it.kind, it.fact_kind, it.fact_id) in self.heldout_before
            ]
        if self.known is not None:  # --no-finetune: a fact the model did not know is unscorable on every form, so
            pairs = self.known.pairs()  # it is not probed after unlearning (the recall metric reads it as retained)
            items = [it for it in items if (it.fact_kind, it.fact_id) in pairs]
        self.items = items
        if acc0 < 1.0 and self.known is None:
            self.log("warning: the model does not know the whole KB; recall counts facts it never knew as forgotten")

    def _finetuned_model(self):
        """The model unlearned from: ``finetuned`` loaded as given, or the KB finetuned into RUN_DIR/finetuned (a
        cache made with other settings, under :func:`finetune_cache_key`, is redone) and loaded. Sets the record's
        "model".

        Returns:
            ``(lm, ft)``: the :class:`dukb.neural.spec.LoadedModel` and its finetuning record (``{}`` when a given
            model has none).
        """

        cfg, kb, spec, record = self.cfg, self.kb, self.spec, self.record
        if self.known is not None:  # --no-finetune: the model as given, loaded by the plan
            record["model"] = cfg.model
            record["known_before"] = self.known.record()
            lm, self.early_lm = self.early_lm, None
            return lm, {}
        model_key = finetune_cache_key(self.identity)
        if cfg.finetuned:
            lm = load_model(spec)
            ft = finetune_record(cfg.finetuned) or {}
            record["model"] = cfg.finetuned
            return lm, ft
        ft_dir = self.run / "finetuned"
        ft = finetune_record(ft_dir)
        if ft is None or ft.get("identity") != model_key:  # a cache made with other settings is redone
            # data parallel under a multi-process launch; process 0 saves
            finetune_kb(
                kb,
                spec,
                ft_dir,
                epochs=cfg.finetune_epochs,
                batch_size=cfg.batch_size,
                seed=cfg.seed,
                progress=self.progress,
                log=self.log,
                identity=model_key,
                items=None if list(cfg.finetune_forms) == ["qa"] else kb_qa(kb, tuple(cfg.finetune_forms)),
            )
        lm = load_finetuned(
            ft_dir,
            dtype=cfg.dtype,
            device=cfg.device,
            trust_remote_code=cfg.trust_remote_code,
            gradient_checkpointing=cfg.gradient_checkpointing,
            lora=spec.lora,
            **cfg.prompt_kwargs(),
        )
        ft = finetune_record(ft_dir)
        record["model"] = cfg.model
        return lm, ft

    def _finetuned_utility(self, lm) -> None:
        """``--utility``: the finetuned model's lm-eval scores (:func:`dukb.neural.lmeval.measure_utility`),
        measured once and kept in RUN_DIR/utility.json with the tasks, lm-eval's version and the batch size; a
        resume or a joining worker reads them (the run identity holds the tasks and the include folder).

        Source: Wu et al. 2025, Table 5 (the finetuned models' utility on MMLU, PIQA, RACE)."""

        cfg, path = self.cfg, self.run / UTILITY_FILE
        asked = {"tasks": list(cfg.utility), "include": cfg.utility_include}
        rec = read_json(path, "utility record") if path.is_file() else None
        if isinstance(rec, dict) and {k: rec.get(k) for k in asked} == asked and rec.get("finetuned"):
            self.log(f"utility of the finetuned model read from {path}")
            return
        res = measure_utility(lm.model, lm.tokenizer, cfg.utility, include=cfg.utility_include, device=str(lm.device))
        rec = {
            **asked,
            "lm_eval": res["lm_eval"],
            "batch_size": UTILITY_BATCH_SIZE,
            "higher_is_better": res["higher_is_better"],
            "finetuned": {"tasks": res["tasks"]},
        }
        if self.main and not self.joined:
            write_json_atomic(path, rec)
        self.log(
            "utility of the finetuned model (lm-eval "
            + res["lm_eval"]
            + "): "
            + "; ".join(
                f"{t} "
                + ", ".join(
                    f"{k} {v:.4f}"
                    for k, v in s.items()
                    if isinstance(v, float) and k != "version" and "stderr" not in k
                )
                for t, s in res["tasks"].items()
            )
        )

    def _probe_before(self, lm, asked: list):
        """The model's probe before unlearning on ``asked`` (qa and the held-out forms rows may be scored on).

        It is kept in RUN_DIR under a key of everything it depends on (weights, dtype, prompt, LoRA, probe settings,
        device type, GPU, CPU threads): a resume or a joining worker reads it instead of probing the whole KB again;
        a cache whose items are not the ones asked is not used.

        Returns:
            The probe's DataFrame (:func:`dukb.neural.probe.probe`: kind, fact_kind, fact_id, known, ...).
        """

        cache = self.run / PROBE_CACHE_NAME
        model = self.identity["model"]
        weights = (
            model["finetuned"]
            if self.cfg.finetuned
            else model["base"]
            if self.known is not None
            else model_fingerprint(self.run / "finetuned")
        )
        probe_kw = self._probe_kw(lm)
        dev = self.record["provenance"]["device"]
        kind = str(lm.device).split(":")[0]
        where = {
            "type": kind,
            "gpu": dev.get("gpu"),  # not the GPU's index or the kernel
            "threads": dev["threads"] if kind == "cpu" else None,
        }
        key = probe_cache_key(
            {"weights": weights, **{k: self.identity[k] for k in ("dtype", "prompt", "lora")}},
            asked,
            {**probe_kw, **where, **self.cfg.backend_identity()},
        )  # (vllm only)
        base = read_probe_cache(cache, key, log=self.log)
        if base is not None and sorted(zip(base["kind"], base["fact_kind"], base["fact_id"])) != sorted(
            (it.kind, it.fact_kind, it.fact_id) for it in asked
        ):  # checked, not trusted: the items asked
            self.log(f"probe cache {cache} not used (its items are not the ones asked): probing again")
            base = None
        if base is not None:
            self.log(f"the model before unlearning: its probe read from {cache}")
        else:
            base = self._probe_rest(lm, asked, probe_kw)
            if self.main and not self.joined:  # the owner keeps the caches (a joined worker only reads them)
                write_probe_cache(cache, key, base)
        return base

    def _probe_rest(self, lm, asked: list, probe_kw: dict):
        """Probe ``asked``, reusing the plan's qa probe under ``--no-finetune`` (:meth:`_known_before`): only the
        items it lacks are probed (its rows first, then the others)."""
        import pandas as pd

        early = self.early_probe
        done = set() if early is None else set(zip(early["kind"], early["fact_kind"], early["fact_id"]))
        rest = [it for it in asked if (it.kind, it.fact_kind, it.fact_id) not in done]
        df = probe(Predictor(lm.model, lm.tokenizer, lm.tags, device=lm.device), rest, **probe_kw)
        if early is None:
            return df
        wanted = {(it.kind, it.fact_kind, it.fact_id) for it in asked}
        keep = early[[(k, fk, f) in wanted for k, fk, f in zip(early["kind"], early["fact_kind"], early["fact_id"])]]
        out = pd.concat([keep, df], ignore_index=True)
        out.attrs = {**df.attrs, "seconds": df.attrs.get("seconds", 0.0) + early.attrs.get("seconds", 0.0)}
        return out

    @staticmethod
    def _probe_kw(lm) -> dict:
        """The probe settings of the probe before unlearning (greedy, the judge's stop rule, the paper's budget)."""

        return {
            "rouge": False,
            "logprob": False,
            "batch_size": PROBE["batch_size"],
            "stop_at_newline": lm.tags.judge == "line",
            "max_new_tokens": probe_budget(lm.tags),
        }

    # ---- work units ----------------------------------------------------------------------------------------------
    def make_claims(self):
        """Unit claims, except under a multi-process launch, whose targets are sharded by rank instead."""
        return None if dist.is_distributed() else super().make_claims()

    def show_bar(self) -> bool:
        """The main process draws the bar."""
        return self.progress and self.main

    def units(self) -> list[tuple]:
        """(target, method label) for this process's targets (all of them without a process group)."""
        return [(t, label) for t in dist.shard(self.targets) for label, *_r in self.methods]

    def pending(self, unit: tuple) -> list:
        """The grid values of the unit's method with no row for its target yet."""
        t, label = unit
        return [v for v in self.grids[label] if (t, label, float(v)) not in self.results.done]

    def total_rows(self) -> int:
        """Rows of this process's targets."""
        return len(dist.shard(self.targets)) * sum(len(g) for g in self.grids.values())

    def rows_done(self) -> int:
        """Rows of this process's targets already on disk."""
        return sum(
            (t, label, float(v)) in self.results.done
            for t in dist.shard(self.targets)
            for label, *_ in self.methods
            for v in self.grids[label]
        )

    def run_unit(self, unit: tuple, todo: list):
        """Unlearn target ``t`` with the unit's method at each value of ``todo``, probe, and yield the rows
        (:func:`dukb.neural.unlearn.sweep_target` on the unit's :class:`dukb.neural.unlearn.UnitPlan`)."""

        t, label = unit
        cfg, kb = self.cfg, self.kb
        m, scope = next((m, scope) for lb, m, scope, _g in self.methods if lb == label)
        entry = self.identity["methods"][label]  # the reference run's length: the grid's largest T, never todo's
        schedule = (
            SweepSchedule("reference", entry["schedule_steps"] or None)
            if entry.get("schedule") == "reference"
            else None
        )
        sets = self.sets_plan.sets[t]
        row_fields = {
            "worker": self.worker,
            "target_relation": kb.relationship(t).relation,
            "n_kb_rel": len(kb.relationships),
            "n_kb_bio": len(kb.biographies),
        }
        plan = UnitPlan(
            self.lm,
            kb,
            self.closure,
            t,
            m,
            tuple(todo),
            label=label,
            scope=scope,
            sets=sets["sets"],
            sets_used=sets["sets_used"],
            tie_break=cfg.tie_break,
            forget_ids=self.sets_plan.forget[(t, scope)],
            seed=cfg.seed,
            lr=cfg.lr,
            lora=self.spec.lora,
            layers=cfg.layer_range(),
            probe_items=self.items,
            batch_size=PROBE["batch_size"],
            metrics=self.row_metrics,
            heldout=cfg.heldout_of(label),
            heldout_before=self.heldout_before,
            heldout_rule=cfg.heldout_rule,
            schedule=schedule,
            reinforce=cfg.reinforce,
            attacks=self.attacks,
            reference=self.reference,
            row_fields=row_fields,
            keep_model=self.keep_model if self.saver is not None else None,
            known_before=None if self.known is None else self.known.pairs(),
            utility=row_utility(self.lm, cfg.utility, cfg.utility_include) if cfg.utility else None,
        )
        yield from sweep_target(plan)

    def save_layout(self):
        """``--save-models``: a unit per (target, method), the folders RUN_DIR/models/TARGET/METHOD/PARAM=VALUE;
        ``best`` keeps the setting Recall@Acc≥0.8 reads (:func:`dukb.neural.metrics.summary.best_row`; none when no
        setting keeps accuracy ≥ 0.8). Source: Wu et al. 2025, Table 1."""

        return SaveLayout(
            unit=lambda r: (int(r["target"]), r["method"]),
            select=best_row,
            record=lambda r: {"target": int(r["target"]), "method": r["method"], "setting": r["setting"]},
            best="per target and method, the setting Recall@Acc>=0.8 reads",
        )

    def unit_done(self, unit: tuple) -> None:
        """One log line: the unit's best recall, its accuracy, and in how many settings the target was forgotten."""
        t, label = unit
        mine = [r for r in self.results.rows if r["target"] == t and r["method"] == label]
        if not mine or "recall" not in mine[0]:
            return
        fact = self.kb.relationship(t)

        # an accuracy with nothing to score (null) ranks last and prints as "–"
        best = max(mine, key=lambda r: (r["recall"], -1.0 if missing(r["accuracy_all"]) else r["accuracy_all"]))
        self.log(
            f"target {t} ({fact.subject}, {fact.relation}, {fact.object}) {label}: best recall "
            f"{best['recall']:.2f} at accuracy {num(best['accuracy_all'])}; target forgotten in "
            f"{sum(r['target_forgotten'] for r in mine)}/{len(mine)} settings"
        )

    # ---- report --------------------------------------------------------------------------------------------------
    def report(self) -> dict:
        """Rank 0 merges the per-rank shards (under a process group) and renders summary.csv, report.md and
        accuracy_recall.png; the others wait for it."""

        dist.barrier(self.device)
        paths = {}
        if self.main:
            pos = {t: i for i, t in enumerate(self.targets)}
            labels = {label: i for i, (label, *_r) in enumerate(self.methods)}
            merge_shards(
                self.run,
                self.row_schema.key,
                check=self.row_schema.check({"identity": self.identity}),
                order=lambda r: (
                    pos.get(int(r["target"]), len(pos)),
                    labels.get(r["method"], len(labels)),
                    float(r["setting"][r["param"]]),
                ),
            )
            paths = self.render(render)
            self.log(self.done_line(f": report {paths.get('report', 'not rendered yet (no rows)')}"))
        dist.barrier(self.device)
        return paths


def _attacks_of(cfg: EvaluateConfig, lm):
    """The run's attacks as the config's check parsed them (:attr:`EvaluateConfig.resolved_attacks`; None without
    any) and, when one compares with the model before unlearning, a Predictor over a copy of θ₀ (the sweep changes
    ``lm``'s weights in place and restores them; the copy costs one model's memory)."""
    attacks = list(cfg.resolved_attacks)
    if not attacks:
        return None, None
    if not any(a.needs_reference for a, _s in attacks):
        return attacks, None
    return attacks, Predictor(copy.deepcopy(lm.model), lm.tokenizer, lm.tags, device=lm.device)


@holds_run_lock  # RUN_DIR/.dukb/run.lock, taken by claim_run, is held until evaluate returns
def evaluate(run_dir, config: EvaluateConfig | None = None, *, resume: bool = True, progress: bool = False, log=print):
    """Run (or resume) the evaluate protocol into ``run_dir`` and render the report (:class:`EvaluateProtocol`).

    Args:
        run_dir: output directory (created).
        config: :class:`EvaluateConfig` (default: the built-in default run).
        resume: reuse rows, sets and the finetuned model already in ``run_dir``; with False an existing
            results.jsonl is an error.
        progress: rich progress bars.
        log: callable(str) for one-line progress summaries.

    Returns:
        pandas DataFrame of all result rows (one per target, method, setting).

    Raises:
        InputError: bad configuration, a run_dir holding a different run, or results present without ``resume``;
            run_dir in use by another process with other settings (or without ``resume``; with the same settings
            and ``resume`` this joins it as another worker, :func:`dukb.neural.run.lock.claim_run`).

    Source: Wu et al. 2025, Sec. 4 and App. C/H (protocol), Eq. 1-2 (metrics).
    """
    return EvaluateProtocol(run_dir, config, resume=resume, progress=progress, log=log).execute()


__all__ = ["EvaluateProtocol", "evaluate"]
