"""`dukb rwku`'s stages: RWKU's evaluation (Jin et al. 2024, Sec. 3-4 and App. H) on a KB, resumable, with deep
unlearning's recall and Success-DU on top (Wu et al. 2025, Eq. 1-2 and Definition 2).

- plan: KB, closure, targets, methods and grids; the requests (one per target, and the batch-target requests),
  each with its forget set, cone and neighbours (RUN_DIR/requests.json); the run identity;
- model: finetune on every fact's QA pair and description sentences (cached in RUN_DIR/finetuned) or load
  ``--finetuned``; the probe items (FB, QA, AA; evaluation only);
- units: (request, "") for the model before unlearning and (request, method) after, each the method's grid;
- score: within the unit (a predictor is valid while its setting is current): FB/QA/AA ROUGE-L recall, MIA, recall,
  recall under attack, Success-DU;
- report: summary.csv, report.md and figures (:mod:`dukb.neural.protocols.rwku.report`).

What RWKU's protocol means on a KB is in :mod:`dukb.neural.protocols.rwku.config`.
"""

from __future__ import annotations

import time
from dataclasses import asdict

from dukb import InputError
from dukb.kb.probes import probe_report
from dukb.kb.schema_probes import require_templates, unscorable_summary
from dukb.neural import distributed as dist
from dukb.neural.data import DESCRIPTION_FORM, QA_KIND, description_templates, kb_descriptions, kb_qa
from dukb.neural.methods import UnlearnContext, check_unique, method_grids, resolve
from dukb.neural.methods.ga import GradientAscent
from dukb.neural.methods.icu import InContextUnlearning
from dukb.neural.methods.kl import KLDivergence
from dukb.neural.methods.npo import NPO
from dukb.neural.methods.repe import RepE
from dukb.neural.methods.simnpo import SimNPO
from dukb.neural.methods.tv import TaskVector
from dukb.neural.methods.whp import WHP
from dukb.neural.metrics import RowContext, get_metric, metric_call
from dukb.neural.metrics.attack import ATTACK_KINDS
from dukb.neural.metrics.rwku import AA_KINDS, FB, cone_ids, neighbour_facts
from dukb.neural.models import resolve_device, resolve_dtype
from dukb.neural.pipeline import finetune_kb, finetune_record, load_finetuned
from dukb.neural.plan import choose_targets, load_kb_closure
from dukb.neural.probe import Predictor, probe
from dukb.neural.protocols.base import Protocol
from dukb.neural.protocols.evaluate.config import EvaluateConfig, _model_spec
from dukb.neural.protocols.evaluate.identity import finetune_cache_key, run_identity
from dukb.neural.protocols.rwku.config import (
    RWKU_TRAINING_VERSION,
    RwkuConfig,
    _check_covers,
    _near_keys,
    rwku_row_key,
)
from dukb.neural.protocols.rwku.report import render_rwku
from dukb.neural.protocols.rwku.rouge import rouge_scorer
from dukb.neural.run.files import RunDir, write_json_atomic
from dukb.neural.run.identity import history_entry
from dukb.neural.run.lock import holds_run_lock
from dukb.neural.run.provenance import provenance
from dukb.neural.runconfig import RunConfig
from dukb.neural.savedmodels import SaveLayout
from dukb.neural.unlearn import default_retain, retain_fact_ids
from dukb.solver.mdus import minimal_sets
from dukb.solver.splits import forget_set


def check_corpus_methods(methods, protocol: str) -> None:
    """Refuse methods that cannot unlearn from a text corpus alone: those that train on questions about the forget
    facts (RT, DPO, PO, closed-loop deep unlearning), which the protocol keeps for evaluation. The others train on
    exactly the items they are given (GA, KL, NPO, SimNPO and their GDR/KLR variants, TV, WHP) or train nothing
    (ICU, RepE: the people's names).

    Args:
        methods: resolved ``(label, method, scope, grid)`` tuples.
        protocol: "rwku" or "muse", for the message.

    Raises:
        InputError: a method of the other kind (named).
    """
    ok = (GradientAscent, KLDivergence, NPO, SimNPO, TaskVector, WHP, InContextUnlearning, RepE)
    for label, m, *_ in methods:
        if not isinstance(m, ok):
            raise InputError(
                f"{label}: `dukb {protocol}` unlearns from a text corpus and keeps every question about "
                f"the forget facts for evaluation; {m.name} trains on such questions (choose ga, kl, "
                "npo, simnpo, their _gdr/_klr variants, tv, whp, icu or repe)"
            )


def check_schema(kb) -> None:
    """Refuse, in one line, a KB with another schema (not the family one) that RWKU cannot run on: a relation
    (attribute) with facts and no ``qa`` template (every fact is finetuned on and scored in the qa form), or with
    neither a ``description`` nor a ``fact`` template (its description corpus, :func:`description_templates`).
    The other probe kinds (FB, the adversarial kinds) need no template: a kind a relation lacks is unscorable for
    its facts, counted (:func:`probe_kinds_report`).

    Raises:
        InputError: ``SCHEMA.YAML:LINE: relation 'R' has no 'qa' template ...: rwku ... needs it``.

    Source: Jin et al. 2024 (RWKU), Sec. 3.1 (forget corpus) and 3.3 (probes).
    """
    if kb.schema.is_family:
        return
    require_templates(kb, (QA_KIND,), "rwku (finetunes on and scores every fact's qa form)")
    description_templates(kb)


def probe_kinds_report(kb, kinds, seed: int, log) -> tuple[list, dict | None]:
    """RWKU's probe items (every kind, :func:`dukb.neural.data.kb_qa`) and, for a KB with another schema, for each
    kind the facts that have no probe of it and why (a relation without the kind's template: unscorable, counted,
    never silently skipped), each such kind logged in one line (:func:`dukb.kb.schema_probes.unscorable_summary`).

    Returns:
        (items, report): report None for the family schema (whose kinds are those of templates/probes.json), else
        {kind: {"probes": n, "unscorable": {"relationships": n, "biographies": n}, "reasons": {...}}}.

    Source: Jin et al. 2024 (RWKU), Sec. 3.3 (FB, QA and the adversarial kinds).
    """
    if kb.schema.is_family:
        return kb_qa(kb, kinds, seed=seed), None
    items, report = probe_report(kb, list(kinds), seed)
    for line in unscorable_summary(report):
        log(f"unscorable probes: {line}")
    return items, report


class RwkuProtocol(Protocol):
    """`dukb rwku` in stages (module docstring). Source: Jin et al. 2024 (RWKU), Sec. 3-4."""

    name = "rwku"
    config_class = RwkuConfig
    units_name = "(request, method)"

    # ---- plan ----------------------------------------------------------------------------------------------------
    def plan(self) -> None:
        """KB, closure, targets, methods (corpus methods only), grids; the run identity (evaluate's model part and
        RWKU's settings); RUN_DIR claimed; the requests with their forget sets, cones and neighbours.

        Raises:
            InputError: several processes, too few targets for the batch sizes, a forget scope on a method, a
                method that trains on questions, another run in RUN_DIR.
        """

        cfg = self.cfg
        if dist.is_distributed():
            raise InputError("dukb rwku runs in one process; launch it without accelerate/torchrun")
        # the model stage and most of the identity are evaluate's (same finetuning, same settings)
        ecfg = EvaluateConfig(
            **{k: getattr(cfg, k) for k in RunConfig.shared_fields()},
            targets=cfg.targets,
            n_targets=cfg.n_targets,
            methods=list(cfg.methods),
            grids=cfg.grids,
        )
        self.kb, self.closure = kb, closure = load_kb_closure(cfg.kb, cfg.rules, needs=())
        check_schema(kb)
        n_need = max([cfg.n_targets] + list(cfg.batch_sizes))
        targets = list(dict.fromkeys(cfg.targets)) if cfg.targets else choose_targets(kb, n_need, cfg.seed)
        if len(targets) < max(cfg.batch_sizes or [1]):
            raise InputError(f"--batch-sizes needs {max(cfg.batch_sizes)} targets, {len(targets)} given")
        self.methods = methods = with_npo_beta([tuple(resolve(m, "target")) for m in cfg.methods], cfg.npo_beta)
        check_unique(label for label, *_ in methods)
        for label, _m, scope, _g in methods:
            if scope != "target":
                raise InputError(f"{label}: a forget scope does not apply here; use --forget-scope")
        check_corpus_methods(methods, "rwku")
        self.grids = grids = method_grids(methods, cfg.grids)
        device = resolve_device(cfg.device)
        self.spec = spec = _model_spec(ecfg)
        dtype = str(resolve_dtype(cfg.dtype, device)).removeprefix("torch.")
        singles = targets if cfg.targets else targets[: cfg.n_targets]  # a targets file: every target is a request
        identity = run_identity(ecfg, kb, closure, methods, grids, singles, spec, dtype)
        for k in ("sets", "metrics"):
            identity.pop(k, None)
        identity["probe"] = {
            "kinds": [QA_KIND, FB, *AA_KINDS],
            "max_new_tokens": cfg.max_new_tokens,
            "rouge": ROUGE_IDENTITY[cfg.rouge],
        }
        identity["rwku"] = {
            "forget_scope": cfg.forget_scope,
            "mia_k": cfg.mia_k,
            # a component added later: recorded when not dukb's default, so older runs compare equal
            **({"mia_members": cfg.mia_members} if cfg.mia_members != "qa" else {}),
            "batch_sizes": list(cfg.batch_sizes),
            "batch_targets": targets[: max(cfg.batch_sizes or [0])],
            # what is trained (finetuning, unlearning's forget and retain data) and what neighbours are
            "training": {
                "version": RWKU_TRAINING_VERSION,
                "finetune": [QA_KIND, DESCRIPTION_FORM],
                "forget": [DESCRIPTION_FORM],
                "retain": [DESCRIPTION_FORM],
                "neighbours": "outside the targets' cone",
            },
        }
        self.claim(identity, extendable=("targets", "methods"), row_key=rwku_row_key)
        requests = [{"name": f"target-{t}", "kind": "single", "targets": [t]} for t in self.identity["targets"]]
        requests += [{"name": f"batch-{n}", "kind": "batch", "targets": targets[:n]} for n in cfg.batch_sizes]
        for r in requests:
            r["forget"] = forget_set(closure, r["targets"], cfg.forget_scope)
            r["cone"] = cone_ids(closure, r["targets"])
            r["neighbours"] = neighbour_facts(kb, r["forget"], r["cone"])
        self.requests = requests
        if not self.joined:
            write_json_atomic(self.run / "requests.json", {"requests": requests})
        self.record = {
            "protocol": "rwku",
            **asdict(cfg),
            "kb": str(kb.source),
            "identity": self.identity,
            "history": self.old_record.get("history", []) + [history_entry(self.added)],
            "provenance": provenance(device),
        }
        self.sets_cache: dict[str, tuple[list, str]] = {}

    # ---- model ---------------------------------------------------------------------------------------------------
    def model(self) -> None:
        """Finetune on the QA pairs and descriptions (evaluate's finetuning settings, cached in RUN_DIR/finetuned)
        or load ``--finetuned`` (its tokenizer must cover the description corpus); write config.json; the probe
        items, all evaluation-only.

        Raises:
            InputError: a ``--finetuned`` tokenizer that does not know the description corpus's words.
        """

        cfg, kb = self.cfg, self.kb
        self.descriptions = kb_descriptions(kb)  # RWKU's synthetic corpus: text about the facts, never a probe
        if cfg.finetuned:
            lm = load_finetuned(cfg.finetuned, **cfg.load_kwargs())
            _check_covers(lm.tokenizer, self.descriptions, cfg.finetuned)
        else:
            ft_dir = self.run / "finetuned"
            ft = finetune_record(ft_dir)
            ft_key = {**finetune_cache_key(self.identity), "items": self.identity["rwku"]["training"]["finetune"]}
            if ft is None or ft.get("identity") != ft_key:
                # the model knows every fact in the QA form and in its descriptions (RWKU's model knows the target
                # before its own text about it is unlearned); the tiny tokenizer then covers the description words
                finetune_kb(
                    kb,
                    self.spec,
                    ft_dir,
                    epochs=cfg.finetune_epochs,
                    batch_size=cfg.batch_size,
                    seed=cfg.seed,
                    log=self.log,
                    identity=ft_key,
                    items=kb_qa(kb) + self.descriptions,
                )
            lm = load_finetuned(ft_dir, **{**cfg.load_kwargs(), "prompt": None})
            acc = (finetune_record(ft_dir) or {}).get("accuracy")
            if acc is not None and acc < 1.0:
                self.log(
                    f"warning: the finetuned model knows {acc:.4f} of the KB; facts it never knew count as forgotten"
                )
        self.lm = lm
        kinds = tuple(dict.fromkeys((QA_KIND, FB) + AA_KINDS + ATTACK_KINDS))
        self.items, self.kinds_report = probe_kinds_report(kb, kinds, cfg.seed, self.log)  # evaluation only
        if self.kinds_report is not None:  # another schema: what each kind could not ask, counted
            self.record["unscorable_probes"] = self.kinds_report
        if not self.joined:
            write_json_atomic(RunDir(self.run).config, self.record)
        self.qa_of = {(it.fact_kind, it.fact_id): it for it in self.items if it.kind == QA_KIND}
        self.scored_forms = {"probes": list(kinds), "mia": [QA_KIND if cfg.mia_members == "qa" else DESCRIPTION_FORM]}
        self.pred0 = Predictor(lm.model, lm.tokenizer, lm.tags, device=lm.device)

    # ---- work units ----------------------------------------------------------------------------------------------
    def units(self) -> list[tuple]:
        """(request, "") for the model before unlearning, then (request, method) for each method."""
        return [(r["name"], label) for r in self.requests for label in [""] + [lb for lb, *_ in self.methods]]

    def pending(self, unit: tuple) -> list:
        """[None] for a before row not yet written; else the method's grid values without a row."""
        name, label = unit
        if not label:  # the request's row before unlearning
            return [] if (name, "", None) in self.results.done else [None]
        return [v for v in self.grids[label] if (name, label, float(v)) not in self.results.done]

    def total_rows(self) -> int:
        """A before row and one row per grid value of every method, per request."""
        return len(self.requests) * (1 + sum(len(g) for g in self.grids.values()))

    def sets_of(self, req: dict) -> tuple[list, str]:
        """A request's minimal deep unlearning sets, computed once: exact for one target, sampled (Algorithm 1,
        N_seed = 100) for a batch, whose exact joint enumeration grows fast (Wu et al. 2025, Sec. 3)."""

        if req["name"] not in self.sets_cache:
            atoms = [self.closure.atom_of_fact(t) for t in req["targets"]]
            if len(atoms) == 1:
                res, used = minimal_sets(self.closure, atoms, "exact"), "exact"
            else:
                res, used = minimal_sets(self.closure, atoms, "random", n_seeds=100, seed=self.cfg.seed), "random"
            self.sets_cache[req["name"]] = ([list(x) for x in res.sets], used)
        return self.sets_cache[req["name"]]

    def probe_fields(self, pred, req: dict, extra: dict) -> dict:
        """Probe every item with ``pred`` and compute the row's fields: RWKU's FB/QA/AA ROUGE-L recall on forget,
        neighbour and distant facts, MIA on FM against RM (Jin et al. 2024, Sec. 4), recall and recall under attack
        (Wu et al. 2025, Eq. 1) and Success-DU (Definition 2). Retain-train facts (``extra["retain_fact_ids"]``) are
        scored in no group."""

        cfg = self.cfg
        df = probe(pred, self.items, max_new_tokens=cfg.max_new_tokens, rouge=cfg.rouge == "rouge-score", logprob=False)
        if cfg.rouge != "rouge-score":  # RWKU's code's ROUGE-L on the same answer lines
            score = rouge_scorer(cfg.rouge)
            df["rouge_l"] = [score(a, o) for a, o in zip(df["answer"], df["output"])]
        forget_keys = {("relationship", i) for i in req["forget"]}
        neigh = {("relationship", i) for i in req["neighbours"]["relationships"]} | {
            ("biography", i) for i in req["neighbours"]["biographies"]
        }
        coned = {("relationship", i) for i in req["cone"]}
        rids = extra.get("retain_fact_ids") or {"relationships": [], "biographies": []}
        held = {("relationship", int(i)) for i in rids["relationships"]} | {
            ("biography", int(i)) for i in rids["biographies"]
        }
        fm, rm = self.mia_members(forget_keys, neigh | held | coned)
        mia_scores = metric_call("mia_fm_rm", "scores")  # the metrics through the one registry, by name
        mia = {"fm": mia_scores(pred, fm, cfg.mia_k), "rm": mia_scores(pred, rm, cfg.mia_k)}
        fields = metric_call("rwku_rouge", "fields")(
            df, self.kb, req["forget"], req["neighbours"], mia, exclude=rids, cone=req["cone"]
        )
        sets, used = self.sets_of(req)
        rctx = RowContext(self.kb, req["targets"][0], sets, used, df, list(req["forget"]), rids)
        fields.update(get_metric("recall").fn(rctx))
        fields.update(get_metric("recall_under_attack").fn(rctx))
        fields["success_du"] = metric_call("recall", "success_du")(
            self.closure, req["targets"], fields["forgotten_relationships"]
        )
        fields.pop("forgotten_biographies", None)
        if self.kinds_report is not None:
            fields["unscorable_forget_by_kind"] = self.unscorable_forget(req["forget"])
        return fields

    def unscorable_forget(self, forget) -> dict[str, int]:
        """For a KB with another schema: per probe kind scored (FB, QA, AA), how many forget facts have no probe of
        it (their relation lacks its template), kinds with none left out; the kind's ROUGE-L means are over the
        others (Jin et al. 2024, Sec. 3.3)."""
        have = {(it.kind, int(it.fact_id)) for it in self.items if it.fact_kind == "relationship"}
        out = {k: sum((k, int(i)) not in have for i in forget) for k in dict.fromkeys((FB, QA_KIND) + AA_KINDS)}
        return {k: n for k, n in out.items() if n}

    def mia_members(self, forget_keys: set, near: set) -> tuple[list, list]:
        """The MIA members (``--mia-members``): FM of the forget facts, RM of the facts in neither ``forget_keys``
        nor ``near`` (neighbours, retain-train facts, the cone), each a list of items in KB order.

        - "qa" (dukb's default): each fact's QA text, scored on its answer tokens;
        - "descriptions" (RWKU's code: text fragments about the target, jinzhuoran/RWKU eval_mia.py:11-36, scored on
          every token): each fact's description sentences (:func:`dukb.neural.data.kb_descriptions`), the text the
          model was finetuned on; the forget facts' sentences are also what unlearning trains on (RWKU's FM come
          from Wikipedia, apart from its synthetic forget corpus; a KB has one corpus).

        Source: Jin et al. 2024 (RWKU), Sec. 3.3 (FM: knowledge fragments about the target; RM: unrelated ones).
        """
        if self.cfg.mia_members == "descriptions":
            pool = [((it.fact_kind, it.fact_id), it) for it in self.descriptions]
            return [it for k, it in pool if k in forget_keys], [
                it for k, it in pool if k not in forget_keys and k not in near
            ]
        fm = [self.qa_of[k] for k in sorted(forget_keys) if k in self.qa_of]
        return fm, [it for k, it in self.qa_of.items() if k not in forget_keys and k not in near]

    def _row(self, req: dict, fields: dict, **extra) -> dict:
        """A result row: the request's sets and what was scored, then ``extra`` and ``fields``."""
        return {
            "request": req["name"],
            "request_kind": req["kind"],
            "targets": req["targets"],
            "forget_set": req["forget"],
            "neighbour_fact_ids": req["neighbours"],
            "neighbours_dropped": len(req["neighbours"]["dropped"]),
            "scored_forms": self.scored_forms,
            **extra,
            **fields,
        }

    def run_unit(self, unit: tuple, todo: list):
        """The before row of a request, or: unlearn the request's forget corpus (the descriptions of its forget
        facts; GDR/KLR retain data: descriptions of distant facts) at each value of ``todo`` and yield the rows."""

        name, label = unit
        req = next(r for r in self.requests if r["name"] == name)
        if not label:
            yield self._row(
                req,
                self.probe_fields(self.pred0, req, {}),
                model_kind="before",
                method=None,
                param=None,
                setting={},
                trained_forms={"forget": [], "retain": []},
                trained_fact_ids=None,
                worker=self.worker,
            )
            return
        cfg = self.cfg
        m = next(m for lb, m, _s, _g in self.methods if lb == label)
        # the forget corpus: the descriptions of the forget facts; the retain pool: descriptions of distant facts
        # (neither forget, neighbour nor cone facts), which are then scored in no group
        forget_ids = set(req["forget"])
        forget = [it for it in self.descriptions if it.fact_kind == "relationship" and it.fact_id in forget_ids]
        near = _near_keys(req)
        pool = [it for it in self.descriptions if (it.fact_kind, it.fact_id) not in near]
        retain = default_retain(pool, forget, seed=cfg.seed) if m.uses_retain else []
        rids = retain_fact_ids(retain)
        trained = {
            "trained_forms": {"forget": [DESCRIPTION_FORM], "retain": [DESCRIPTION_FORM] if retain else []},
            "trained_fact_ids": {"forget": retain_fact_ids(forget), "retain": rids},
            "n_trained_texts": {"forget": len(forget), "retain": len(retain)},
        }
        ctx = UnlearnContext(self.lm, forget, retain, seed=cfg.seed, lr=cfg.lr, kb=self.kb, **cfg.unlearn_kwargs())
        t0 = time.perf_counter()
        for setting, pred in m.sweep(ctx, todo):
            t1 = time.perf_counter()
            setting = {k: v for k, v in dict(setting).items() if k != "trace"}
            row = self._row(
                req,
                self.probe_fields(pred, req, {"retain_fact_ids": rids}),
                model_kind="unlearned",
                method=label,
                base_method=m.name,
                param=m.param,
                setting=setting,
                retain_fact_ids=rids,
                **trained,
                seconds_unlearn=round(t1 - t0, 4),
                seconds_eval=round(time.perf_counter() - t1, 4),
                worker=self.worker,
            )
            yield row
            self.keep_model(row, pred)  # written; the weights are still the setting's (--save-models)
            t0 = time.perf_counter()

    def save_layout(self):
        """``--save-models``: a unit per (request, method), the folders RUN_DIR/models/REQUEST/METHOD/PARAM=VALUE.
        RWKU reports every setting (Table 1) and selects none; ``best`` keeps the strongest (the largest swept
        value), the setting the report's figures show (:func:`dukb.neural.protocols.rwku.report.plot_aa`)."""

        return SaveLayout(
            unit=lambda r: (r["request"], r["method"]) if r.get("model_kind") == "unlearned" else None,
            select=lambda rows: max(rows, key=lambda r: float(r["setting"][r["param"]])),
            record=lambda r: {
                "request": r["request"],
                "targets": r["targets"],
                "method": r["method"],
                "setting": r["setting"],
            },
            best="per request and method, the strongest setting (the largest swept value)",
        )

    def unit_done(self, unit: tuple) -> None:
        """A log line per finished (request, method)."""
        if unit[1]:
            self.log(f"{unit[0]} {unit[1]}: done")

    # ---- report --------------------------------------------------------------------------------------------------
    def report(self) -> dict:
        """summary.csv, report.md, aa_kinds.png and batch_targets.png (:func:`render_rwku`)."""

        self.log(self.done_line())
        paths = self.render(render_rwku)
        self.log(f"report {paths.get('report', 'not rendered yet (no rows)')}")
        return paths


#: the run identity's ``probe.rouge`` of each ``--rouge`` choice (rouge-score's text is the one runs recorded before
#: the option existed)
ROUGE_IDENTITY = {"rouge-score": "rougeL recall", "rouge": "rouge-l recall (rouge package, RWKU's code)"}


def with_npo_beta(methods: list[tuple], beta: float) -> list[tuple]:
    """The resolved methods with NPO's β set to ``beta`` (``--npo-beta``) on every NPO method (npo, npo_seq and
    their _gdr/_klr variants) not given its own (``npo_seq:beta=0.05``); labels are kept, and the method's options
    (run identity, row setting) record the β when it is not the method's default.

    Args:
        methods: ``(label, method, scope, grid)`` tuples (:func:`dukb.neural.methods.resolve`).
        beta: β > 0.

    Returns:
        The tuples, an NPO method replaced by its copy with ``beta`` where that differs from its β.

    Source: Zhang et al. 2024, Eq. 3 (β); jinzhuoran/RWKU LLaMA-Factory/scripts/full/run_npo.sh:29 (β 0.2).
    """

    out = []
    for label, m, scope, grid in methods:
        if isinstance(m, NPO) and "beta" not in m.option_values and m.beta != beta:
            m = m.with_options({"beta": beta})
        out.append((label, m, scope, grid))
    return out


@holds_run_lock  # RUN_DIR/.dukb/run.lock, taken by claim_run, is held until run_rwku returns
def run_rwku(run_dir, config: RwkuConfig | None = None, *, resume: bool = True, progress: bool = False, log=print):
    """Run (or resume) the RWKU protocol into ``run_dir`` and render its report (:class:`RwkuProtocol`).

    Args:
        run_dir: output directory.
        config: :class:`RwkuConfig` (default: the built-in KB, the tiny model, 11 targets).
        resume: continue a run in ``run_dir`` (refused when a row-changing setting differs).
        progress: rich progress bar over the rows.
        log: callable(str) for one-line progress reports.

    Returns:
        pandas DataFrame of the result rows.

    Raises:
        InputError: bad settings, a directory holding another run or in use by another process
            (:func:`dukb.neural.run.lock.claim_run`), results present without ``resume``, several processes.

    Source: Jin et al. 2024 (RWKU), Sec. 3-4.
    """
    return RwkuProtocol(run_dir, config, resume=resume, progress=progress, log=log).execute()


#: the protocol's names, with those of its config
__all__ = [
    "ROUGE_IDENTITY",
    "RwkuProtocol",
    "check_corpus_methods",
    "run_rwku",
    "with_npo_beta",
]
