"""`dukb muse`'s stages: MUSE's six-way evaluation (Shi et al. 2024b, Sec. 2-4) on a KB, resumable.

- plan: KB, closure, targets; the base split and one forget set per request (main, scale-c, sustain-k;
  RUN_DIR/splits.json); the run identity;
- model: f_target finetuned on the QA pairs and statement texts of every trained fact (or ``--finetuned``);
- units, in order: (request, "") for a request's reference rows (f_target and f_retrain, the retrain cached per
  forget set under RUN_DIR/models/, finetuned by the first worker that needs it while the others wait for it);
  (request, method) for a method's grid on main and scale-c; ("sustain", method) for C6's sequential requests, one
  unit because each request continues from the model the previous one selected. What is left of a sequence is
  decided by a dry replay of its selections over the rows on disk;
- score: within the unit (VerbMem, KnowMem, MIA AUCs, PrivLeak against f_retrain,
  :func:`model_metrics`);
- report: :mod:`dukb.neural.protocols.muse.report`.

A second ``dukb muse`` with the same settings joins a live run once its owner has finetuned f_target: the units are
claimed in RUN_DIR/.dukb/units, and a unit that needs a request's reference values before the unit that writes them has
run computes them itself (the same values) without writing them.
"""

from __future__ import annotations

import copy
import time
from dataclasses import asdict
from pathlib import Path

from dukb import InputError
from dukb.neural import distributed as dist
from dukb.neural.data import QA_KIND, kb_qa
from dukb.neural.methods import UnlearnContext, check_unique, method_grids, resolve
from dukb.neural.methods.base import SweepSchedule
from dukb.neural.metrics import metric_call
from dukb.neural.metrics.mia import auc, privleak
from dukb.neural.metrics.muse import knowmem_examples, select_setting, text_mia_scores
from dukb.neural.metrics.recall import retained_from_probe, success_du_all
from dukb.neural.modelrecord import TINY_CONFIG, model_fingerprint
from dukb.neural.models import resolve_device, resolve_dtype
from dukb.neural.pipeline import finetune_config, finetune_kb, finetune_record, load_finetuned
from dukb.neural.plan import choose_targets, load_kb_closure
from dukb.neural.probe import Predictor, probe
from dukb.neural.protocols.base import Protocol, RowMissing
from dukb.neural.protocols.muse.config import (
    MUSE_TRAINING_VERSION,
    SCORED_FORMS,
    MuseConfig,
    _items_for,
    _lr_entry,
    icl_examples,
    muse_row_key,
    plan_requests,
)
from dukb.neural.protocols.muse.report import render_muse
from dukb.neural.protocols.rwku.run import check_corpus_methods
from dukb.neural.run.files import RunDir, bookkeeping_dir, write_json_atomic
from dukb.neural.run.identity import IDENTITY_VERSION, history_entry, sha256_json
from dukb.neural.run.lock import file_lock, holds_run_lock
from dukb.neural.run.provenance import provenance
from dukb.neural.run.units import CACHE_WAIT
from dukb.neural.savedmodels import SaveLayout
from dukb.neural.unlearn import retain_fact_ids
from dukb.solver.splits import base_split, forget_set


def _auc(members, nonmembers) -> float | None:
    """Member-positive AUC over the scores that are numbers (an item with no scored token has NaN); None when a
    side is empty."""
    m = [x for x in members if x == x]
    n = [x for x in nonmembers if x == x]
    return auc(m, n) if m and n else None


def model_metrics(
    pred, kb, splits, cfg: MuseConfig, *, retrain_auc: float | None = None, closure=None, targets=None
) -> dict:
    """Every MUSE metric of one model on one request's splits, and deep unlearning's Success-DU of its targets.

    Args:
        pred: the model (:class:`dukb.neural.probe.Predictor`); kb: the KB; splits: the request's
            :class:`dukb.solver.splits.FactSplits` (forget, retain_eval, holdout);
        cfg: the run's :class:`MuseConfig`; retrain_auc: f_retrain's Min-K% AUC on the forget set (for PrivLeak);
        closure, targets: the run's closure and the request's target fact_ids; with both, every KB fact's qa item
            is probed (a form no MUSE method trains on: they unlearn the statement texts) for
            ``forgotten_relationships`` and ``success_du``.

    Returns:
        verbmem_forget, knowmem_forget, knowmem_retain (means in [0, 1]); mia_auc_forget / mia_auc_retain
        (score name -> member-positive AUC against the holdout: the holdout's relationship statements for the
        forget set, all its statements for retain_eval); mia_auc (the Min-K% forget AUC); privleak
        (fraction, vs ``retrain_auc``; None without it); ``items`` (the per-item values, for bootstrap CIs) and
        ``mia`` (per-text Min-K% scores of forget, retain_eval and holdout, for ROC plots); per-item values are
        rounded to 4 decimals. With ``closure`` and ``targets``: ``forgotten_relationships`` (sorted fact_ids the
        model does not answer on the qa form), ``accuracy_all_facts`` (share of every KB fact it answers),
        ``success_du`` (1 when no target is derivable from the facts it answers) and ``success_du_forms`` (["qa"]).
        With ``cfg.knowmem_icl`` > 0: ``knowmem_icl_used`` ({"forget": n, "retain": n}: the in-context examples
        each KnowMem set had, :func:`icl_examples` fitted by :func:`dukb.neural.metrics.muse.knowmem_examples`).

    Raises:
        ValueError: ``targets`` given but empty.

    Source: Shi et al. 2024b (MUSE), Sec. 3 (C1-C4); Wu et al. 2025, Definition 2 (Success-DU).
    """
    knowmem, verbmem = metric_call("knowmem", "score"), metric_call("verbmem", "score")  # through the registry

    f_qa, f_txt = _items_for(kb, splits.forget)
    r_qa, r_txt = _items_for(kb, splits.retain_eval)
    _h_qa, h_txt = _items_for(kb, splits.holdout)
    vm = verbmem(
        pred,
        [t.answer for t in f_txt],
        cfg.verbmem_prefix,
        cfg.verbmem_tokens,
        temperature=cfg.verbmem_temperature,
        seed=cfg.seed,
        stem=cfg.verbmem_stemming,
        stop_at_newline=cfg.verbmem_stop == "line",
    )
    icl = icl_examples(kb, splits, cfg.knowmem_icl, cfg.seed)
    km = {"examples": icl, "prompt": cfg.knowmem_prompt}
    km_f = knowmem(pred, f_qa, cfg.knowmem_tokens, **km)
    km_r = knowmem(pred, r_qa, cfg.knowmem_tokens, **km)
    s_f, s_r, s_h = (text_mia_scores(pred, txt, cfg.mia_k) for txt in (f_txt, r_txt, h_txt))
    auc_f, auc_r = _mia_aucs(s_f, s_r, s_h, f_txt, r_txt, h_txt)
    head = auc_f.get("mink")
    pl = privleak(head, retrain_auc) if head is not None and retrain_auc is not None and retrain_auc < 1 else None
    out = {
        "verbmem_forget": _mean(vm),
        "knowmem_forget": _mean(km_f),
        "knowmem_retain": _mean(km_r),
        "mia_auc_forget": auc_f,
        "mia_auc_retain": auc_r,
        "mia_auc": head,
        "privleak": pl,
        "items": {"verbmem_forget": _round4(vm), "knowmem_forget": _round4(km_f), "knowmem_retain": _round4(km_r)},
        "mia": {"forget": _round4(s_f["mink"]), "retain": _round4(s_r["mink"]), "holdout": _round4(s_h["mink"])},
    }
    if cfg.knowmem_icl:  # how many in-context examples each KnowMem set had (fewer where the positions ran out)
        out["knowmem_icl_used"] = {
            name: len(knowmem_examples(pred, qa, icl, cfg.knowmem_prompt, cfg.knowmem_tokens))
            for name, qa in (("forget", f_qa), ("retain", r_qa))
        }
    if closure is not None and targets is not None:
        out.update(_success_du_fields(pred, kb, closure, targets))
    return out


def _mean(xs):
    """The mean of ``xs``; None for none."""
    return sum(xs) / len(xs) if xs else None


def _round4(xs) -> list[float]:
    """``xs`` as floats rounded to 4 decimals (the per-item values a row keeps)."""
    return [round(float(x), 4) for x in xs]


def _mia_aucs(s_f: dict, s_r: dict, s_h: dict, f_txt: list, r_txt: list, h_txt: list) -> tuple[dict, dict]:
    """Score name -> member-positive AUC of the forget set's and retain_eval's MIA scores (``s_f``, ``s_r``: score
    name -> per-text scores of the texts ``f_txt``, ``r_txt``) against the holdout's (``s_h``, of the texts
    ``h_txt``); {} without texts on a side.

    The forget members are relationship statements: their non-members are the holdout's relationship statements
    (biographies use another template, a distribution shift MUSE's footnote 3 warns of); all of the holdout when it
    holds no relationship (Shi et al. 2024b, Sec. 3, C4)."""
    rel = [i for i, t in enumerate(h_txt) if t.fact_kind == "relationship"] or list(range(len(h_txt)))
    s_h_rel = {k: [v[i] for i in rel] for k, v in s_h.items()}
    auc_f = {k: _auc(s_f[k], s_h_rel[k]) for k in s_f} if h_txt and f_txt else {}
    auc_r = {k: _auc(s_r[k], s_h[k]) for k in s_r} if h_txt and r_txt else {}
    return auc_f, auc_r


def _success_du_fields(pred, kb, closure, targets) -> dict:
    """Success-DU of a MUSE model: probe every fact's qa item, then check that no target is derivable from the facts
    it answers (Wu et al. 2025, Definition 2; every target of a request, as for a batch of targets)."""
    df = probe(pred, kb_qa(kb, (QA_KIND,)), generate=True, rouge=False, logprob=False)
    gone = sorted(retained_from_probe(kb, df).forgotten_relationships)
    return {
        "forgotten_relationships": gone,
        "accuracy_all_facts": float(df["known"].astype(bool).mean()),
        "success_du": success_du_all(closure, targets, gone),
        "success_du_forms": [QA_KIND],
    }


def _finetune_cached(kb, spec, out: Path, items, cfg: MuseConfig, key: dict, log):
    """Finetune ``items`` into ``out`` unless a model with the same key is there; returns the loaded model."""

    rec = finetune_record(out)
    if rec is None or rec.get("identity") != key:
        log(f"finetuning {out.name} on {len(items)} items")
        finetune_kb(
            kb,
            spec,
            out,
            epochs=cfg.finetune_epochs,
            batch_size=cfg.batch_size,
            seed=cfg.seed,
            log=log,
            identity=key,
            items=items,
        )
    return load_finetuned(out, **cfg.load_kwargs())


def _forget_sets(cfg, closure, targets: list[int]) -> dict[str, list[int]]:
    """The requests' forget sets (fact ids), by request name.

    "main" is a minimum joint deep unlearning set of its targets; the scalability sets are built fold by fold (each
    fold's minimum joint set added to the earlier ones), so they are nested, each is a joint deep unlearning set of
    its targets, and "sustain-k" (fold k's new facts) ends at exactly "scale-c"'s set.

    Args:
        cfg: the :class:`MuseConfig` (``n_targets``, ``scale_sizes``, ``forget_scope``).
        closure: the KB's closure.
        targets: every target of the run, in order (the first ``n_targets`` are the main request's).

    Source: Wu et al. 2025, Definition 2 (joint deep unlearning sets); Shi et al. 2024b (MUSE), Sec. 3, C5 and C6
    (scalability and sustainability requests).
    """

    forget_of: dict[str, list[int]] = {"main": forget_set(closure, targets[: cfg.n_targets], cfg.forget_scope)}
    cum: set[int] = set()
    lo = 0
    for k, c in enumerate(cfg.scale_sizes, 1):
        fold = set(forget_set(closure, targets[lo:c], cfg.forget_scope)) - cum
        forget_of[f"sustain-{k}"] = sorted(fold)
        cum |= fold
        forget_of[f"scale-{c}"] = sorted(cum)
        lo = c
    return forget_of


class MuseProtocol(Protocol):
    """`dukb muse` in stages (module docstring). Source: Shi et al. 2024b (MUSE), Sec. 2-4."""

    name = "muse"
    config_class = MuseConfig
    units_name = "(request, method)"

    # ---- plan ----------------------------------------------------------------------------------------------------
    def plan(self) -> None:
        """KB, closure, targets, methods; the base split and the requests' forget sets (nested for C5, folds for
        C6); the run identity; RUN_DIR claimed; splits.json and config.json.

        Raises:
            InputError: several processes, too few targets, a forget scope on a method, a method that trains on
                questions, a non-gradient curve method, another run in RUN_DIR.
        """

        cfg = self.cfg
        if dist.is_distributed():
            raise InputError("dukb muse runs in one process; launch it without accelerate/torchrun")
        self.kb, self.closure = kb, closure = load_kb_closure(
            cfg.kb, cfg.rules, needs=("qa", "fact"), what="muse (its QA pairs and verbatim statements)"
        )
        n_all = max([cfg.n_targets] + list(cfg.scale_sizes))
        targets = list(dict.fromkeys(cfg.targets)) if cfg.targets else choose_targets(kb, n_all, cfg.seed)
        if len(targets) < n_all:
            raise InputError(f"the run needs {n_all} targets (--n-targets / --scale-sizes), {len(targets)} given")
        targets = targets[:n_all]
        self.grids = self._resolve_methods()
        self.base = base = base_split(
            kb, closure, targets, holdout_frac=cfg.holdout_frac, retain_train_frac=cfg.retain_train_frac, seed=cfg.seed
        )
        self.requests = requests = plan_requests(cfg, targets)
        forget_of = _forget_sets(cfg, closure, targets)
        self.splits = {r["name"]: base.request(forget_of[r["name"]], r["targets"]) for r in requests}
        device = resolve_device(cfg.device)
        self.spec = spec = cfg.model_spec(cfg.model)  # f_retrain's base (and f_target's, unless --finetuned gives it)
        self.dtype = dtype = str(resolve_dtype(cfg.dtype, device)).removeprefix("torch.")
        preset, fcfg = finetune_config(spec, None, cfg.finetune_epochs, None, cfg.batch_size, cfg.seed)
        base_model = {"tiny": TINY_CONFIG} if cfg.model == "tiny" else model_fingerprint(cfg.model)
        self.ft_key = ft_key = {
            "base": base_model,
            "finetune": {"preset": preset, **asdict(fcfg)},
            "texts": True,
            **cfg.model_identity(),
        }  # LoRA and partial layers (absent at their defaults)
        identity = self._identity(ft_key, dtype, requests)
        self.claim(identity, extendable=("methods", "requests"), row_key=muse_row_key)
        record = {
            "protocol": "muse",
            **asdict(cfg),
            "kb": str(kb.source),
            "targets": targets,
            "identity": self.identity,
            "history": self.old_record.get("history", []) + [history_entry(self.added)],
            "provenance": provenance(device),
        }
        if not self.joined:  # a joined worker leaves splits.json and config.json to the run's owner
            write_json_atomic(
                self.run / "splits.json",
                {"base": base.to_json(), "requests": {k: v.to_json() for k, v in self.splits.items()}},
            )
            write_json_atomic(RunDir(self.run).config, record)
        self.ref_cache: dict[str, dict] = {}
        self.log(
            f"KB {kb.source}: {len(kb.relationships)} + {len(kb.biographies)} facts; holdout "
            f"{sum(map(len, base.holdout.values()))}; {len(requests)} requests"
        )

    def _resolve_methods(self) -> dict:
        """Resolve the main and the curve methods (``self.main_methods``, ``self.curve_methods``; curve methods
        only with scale sizes) and return their grids (label -> values).

        Raises:
            InputError: a method twice, a forget scope on a method, a method that trains on questions
                (:func:`dukb.neural.protocols.rwku.run.check_corpus_methods`), a non-gradient curve method.
        """

        cfg = self.cfg
        self.main_methods = [tuple(resolve(m, "target")) for m in cfg.methods]
        self.curve_methods = [tuple(resolve(m, "target")) for m in (cfg.curve_methods if cfg.scale_sizes else [])]
        check_unique(label for label, *_ in self.main_methods)
        check_unique(label for label, *_ in self.curve_methods)
        for label, _m, scope, _g in self.main_methods + self.curve_methods:
            if scope != "target":
                raise InputError(f"{label}: MUSE forgets the request's forget set; a forget scope does not apply")
        check_corpus_methods(self.main_methods + self.curve_methods, "muse")
        for label, m, _s, _g in self.curve_methods:
            if m.param != "steps":
                raise InputError(
                    f"{label}: scalability and sustainability need a gradient method (MUSE runs them "
                    "for GA, NPO and their regularised variants)"
                )
        return method_grids(self.main_methods + self.curve_methods, cfg.grids)

    def _identity(self, ft_key: dict, dtype: str, requests: list[dict]) -> dict:
        """The run identity: KB and rules fingerprints, f_target's finetuning key (and the given f_target's
        fingerprint), dtype, preset family, identity settings, requests, selection, scoring, what unlearning trains
        on, and each method's grid and learning rate."""

        cfg, spec, grids = self.cfg, self.spec, self.grids
        settings = cfg.identity_settings(
            (
                "kb",
                "model",
                "finetuned",
                "targets",
                "methods",
                "curve_methods",
                "grids",
                "device",
                "finetune_epochs",
                "batch_size",
                "n_targets",
                "scale_sizes",
                "sustain",
                "select",
                "bootstrap",
            )
        )
        settings.update(cfg.component_identity())  # --compat and the components not at dukb's values ("set")
        settings.update(cfg.backend_identity())  # --probe-backend, only when not hf
        return {
            "identity_version": IDENTITY_VERSION,
            "kb": self.kb.fingerprint(),
            "rules": self.closure.rules.fingerprint,
            "model": ft_key,
            **({"f_target": model_fingerprint(cfg.finetuned)} if cfg.finetuned else {}),
            "dtype": dtype,
            "family": spec.preset_family,
            "settings": settings,
            "requests": {r["name"]: {"targets": r["targets"], "after": r.get("after")} for r in requests},
            "select": cfg.select,
            # every row also probes each fact's qa item for Success-DU (part of what a resumed run must share)
            "scoring": {"success_du": ["qa"]},
            # what unlearning trains on: the statement texts of the forget and retain_train facts, never a QA pair
            "training": {"version": MUSE_TRAINING_VERSION, "forget": ["statement"], "retain": ["statement"]},
            "methods": {
                label: {
                    "method": m.name,
                    "param": m.param,
                    "grid": [int(v) if m.param == "steps" else float(v) for v in grids[label]],
                    **_lr_entry(m, spec.preset_family, cfg.unlearn_lr()),
                }
                for label, m, _s, _g in self.main_methods + self.curve_methods
            },
        }

    # ---- model ---------------------------------------------------------------------------------------------------
    def model(self) -> None:
        """f_target: finetuned on every trained fact's QA pair and statement (the KB minus the holdout; cached under
        everything it depends on), or the given ``--finetuned``."""

        cfg, kb = self.cfg, self.kb
        trained_qa, trained_txt = _items_for(kb, self.base.trained())
        # model caches are keyed by everything they depend on: base model, finetuning config, KB, dtype, the facts
        self.cache_key = {
            **self.ft_key,
            "kb": self.identity["kb"],
            "dtype": self.dtype,
            "prompt": cfg.prompt,
            "trained": sha256_json(self.base.trained()),
        }
        if cfg.finetuned:  # a given f_target (its training must leave the holdout out: recorded, not checkable)
            n_hold = sum(map(len, self.base.holdout.values()))
            self.log(
                f"f_target: {cfg.finetuned} (given; its training data must leave out the {n_hold} holdout facts "
                "of splits.json, or PrivLeak is not MUSE's)"
            )
            self.f_target = load_finetuned(cfg.finetuned, **cfg.load_kwargs())
        else:
            self.f_target = _finetune_cached(
                kb, self.spec, self.run / "models" / "target", trained_qa + trained_txt, cfg, self.cache_key, self.log
            )

    # ---- rows ----------------------------------------------------------------------------------------------------
    def retrain_for(self, cum: str):
        """f_retrain of a cumulative forget set: finetuned like f_target on the trained facts minus the forget set,
        cached under RUN_DIR/models/retrain-<hash>."""

        sp = self.splits[cum]
        qa, txt = _items_for(self.kb, sp.trained_without_forget())
        key = {**self.cache_key, "forget": sp.forget}
        name = f"retrain-{sha256_json(sp.forget)[:12]}"
        (self.run / "models").mkdir(parents=True, exist_ok=True)
        # one worker finetunes it, the others then load it (the lock is bookkeeping: RUN_DIR/.dukb/models/NAME.lock)
        with file_lock(bookkeeping_dir(self.run, "models") / f"{name}.lock", wait=CACHE_WAIT, log=self.log):
            return _finetune_cached(self.kb, self.spec, self.run / "models" / name, qa + txt, self.cfg, key, self.log)

    @staticmethod
    def _pred(lm):

        return Predictor(lm.model, lm.tokenizer, lm.tags, device=lm.device)

    def _row(self, req: dict, kind: str, fields: dict, **extra) -> dict:
        """A result row of ``req``: its forget set, the forget set it is scored on, what was scored."""
        return {
            "request": req["name"],
            "experiment": req["experiment"],
            "model_kind": kind,
            "targets": req["targets"],
            "forget_fact_ids": self.splits[req["name"]].forget,
            "scored_forget_fact_ids": self.splits[req["cumulative"]].forget,
            "scored_forms": SCORED_FORMS,
            **extra,
            **fields,
        }

    def _du_args(self, req: dict) -> dict:
        """Success-DU's inputs for a request's rows: the closure and the targets of everything unlearned so far (a
        sustainability request's cumulative request, whose split it is scored on)."""
        cum = next((r for r in self.requests if r["name"] == req["cumulative"]), req)
        return {"closure": self.closure, "targets": list(cum["targets"])}

    def _find(self, req: dict, kind: str) -> dict | None:
        return next((r for r in self.results.rows if r["request"] == req["name"] and r["model_kind"] == kind), None)

    def references(self, req: dict, dry: bool = False, emit: bool = True):
        """The f_target and f_retrain rows of a request (f_retrain of its cumulative forget set; a sustainability
        request is judged against the retrain of everything forgotten so far): a generator yielding the rows it
        computes and returning {"retrain": row, "target": row}. ``dry``: raise :class:`RowMissing` instead of
        computing. ``emit`` False: compute what is missing without yielding it (the request's reference unit, run
        by this or another worker, writes those rows)."""
        if req["name"] in self.ref_cache:
            return self.ref_cache[req["name"]]
        sp = self.splits[req["cumulative"] if req["experiment"] == "sustainability" else req["name"]]
        rr = self._find(req, "retrain")
        if rr is None:
            if dry:
                raise RowMissing
            lm_r = self.retrain_for(req["cumulative"])
            fields = model_metrics(self._pred(lm_r), self.kb, sp, self.cfg, **self._du_args(req))
            fields["privleak"] = 0.0 if fields["mia_auc"] is not None and fields["mia_auc"] < 1 else None
            rr = self._row(req, "retrain", fields, method=None, param=None, setting=None)
            del lm_r
            if emit:
                yield rr
        tr = self._find(req, "target")
        if tr is None:
            if dry:
                raise RowMissing
            tr = self._row(
                req,
                "target",
                model_metrics(
                    self._pred(self.f_target), self.kb, sp, self.cfg, retrain_auc=rr["mia_auc"], **self._du_args(req)
                ),
                method=None,
                param=None,
                setting=None,
            )
            if emit:
                yield tr
            elif not dry:
                return {"retrain": rr, "target": tr}  # not cached: the reference unit must still write them
        self.ref_cache[req["name"]] = {"retrain": rr, "target": tr}
        return self.ref_cache[req["name"]]

    def sweep(self, req: dict, lm, label: str, m, grid: list, on_row=None):
        """Unlearn ``req``'s forget set from ``lm`` over ``grid``, yielding one new row per setting (a generator).
        ``on_row(row, pred)`` may return True to stop the sweep (the selected setting of a sequential request);
        with it, settings already written are recomputed (the sequence needs their models) but not written again.
        A sequential request trains on its own fold's forget facts; its regulariser data and its scores use the
        cumulative split (nothing forgotten in an earlier request is trained on again or scored as retained).
        MUSE unlearns on the text corpus alone: the forget facts' statements (D_forget) and, for GDR/KLR, the
        retain_train facts' statements (D_retain^(reg)); the QA pairs KnowMem scores are never trained here. The
        run's rate rule (:meth:`MuseConfig.unlearn_lr`), step schedule (``unlearn_schedule``) and KLR form
        (``klr_form``) apply to every method."""

        cfg, kb = self.cfg, self.kb
        sp = self.splits[req["name"]]
        sp_eval = self.splits[req["cumulative"]] if req["experiment"] == "sustainability" else sp
        refs = yield from self.references(req, emit=False)
        _f_qa, f_txt = _items_for(kb, sp.forget)
        _r_qa, r_txt = _items_for(kb, sp_eval.retain_train)
        retain = r_txt if m.uses_retain else []
        todo = list(grid)
        if on_row is None:
            todo = [v for v in grid if (req["name"], "unlearned", label, float(v)) not in self.results.done]
        if not todo or not f_txt:
            return
        trained = {
            "trained_forms": {"forget": ["statement"], "retain": ["statement"] if retain else []},
            "trained_fact_ids": {"forget": retain_fact_ids(f_txt), "retain": retain_fact_ids(retain)},
            "n_trained_texts": {"forget": len(f_txt), "retain": len(retain)},
        }
        ctx = UnlearnContext(
            lm,
            f_txt,
            retain,
            seed=cfg.seed,
            lr=cfg.unlearn_lr(),
            kb=kb,
            schedule=SweepSchedule(cfg.unlearn_schedule),
            **cfg.unlearn_kwargs(),
        )
        if getattr(m, "reg_kind", None) == "klr" and cfg.klr_form != getattr(m, "klr_form", "token"):
            m = copy.copy(m)  # the run's KLR form (--klr-form), on a copy of the registry's method
            m.klr_form = cfg.klr_form
        t0 = time.perf_counter()
        gen = m.sweep(ctx, todo)
        try:
            for setting, pred in gen:
                t1 = time.perf_counter()
                setting = {k: v for k, v in dict(setting).items() if k != "trace"}
                key = (req["name"], "unlearned", label, float(setting[m.param]))
                if key in self.results.done:
                    row = next(r for r in self.results.rows if muse_row_key(r) == key)
                else:
                    fields = model_metrics(
                        pred, kb, sp_eval, cfg, retrain_auc=refs["retrain"]["mia_auc"], **self._du_args(req)
                    )
                    row = self._row(
                        req,
                        "unlearned",
                        fields,
                        method=label,
                        base_method=m.name,
                        param=m.param,
                        setting=setting,
                        retain_fact_ids=retain_fact_ids(retain),
                        **trained,
                        seconds_unlearn=round(t1 - t0, 4),
                        seconds_eval=round(time.perf_counter() - t1, 4),
                    )
                    yield row  # written by the work loop before the sweep goes on
                    # --save-models: a C6 request continues from a model on no disk, so its adapter is saved merged
                    self.keep_model(row, pred, lm, merge=lm is not self.f_target)
                if on_row is not None and on_row(row, pred):
                    break
                t0 = time.perf_counter()
        finally:
            gen.close()  # the method restores f_target's weights

    def _better(self, row: dict, best: dict | None, util: float) -> bool:
        """MUSE's selection rule applied online (Shi et al. 2024b, Sec. 3, C6): the row whose KnowMem on retain is
        closest to f_retrain's (``closest``), or the latest (``first_below_retrain``, ``last``)."""
        return (
            best is None
            or self.cfg.select in ("first_below_retrain", "last")
            or abs(row["knowmem_retain"] - util) < abs(best["knowmem_retain"] - util)
        )

    def _stops(self, row: dict, grid: list, util: float) -> bool:
        """The sequence stops at this row: the last grid value, or the first below f_retrain's utility."""
        hit = self.cfg.select == "first_below_retrain" and row["knowmem_retain"] < util
        return hit or float(row["setting"][row["param"]]) == grid[-1]

    def sustain(self, label: str, m, dry: bool = False):
        """C6 for one method: the sequential requests in order, each unlearned from the model the previous one
        selected (a generator of new rows). ``dry``: replay the selections over the rows on disk and raise
        :class:`RowMissing` at the first row not there. Source: Shi et al. 2024b, Sec. 3 (C6)."""
        lm = self.f_target
        grid = [float(v) for v in self.grids[label]]
        for req in [r for r in self.requests if r["experiment"] == "sustainability"]:
            util = (yield from self.references(req, dry=dry, emit=False))["retrain"]["knowmem_retain"]
            if not self.splits[req["name"]].forget["relationships"]:  # earlier requests already forgot this fold
                if not dry:
                    self.log(f"{label} {req['name']}: nothing new to forget; the model goes on unchanged")
                continue
            if dry:
                best = None
                for v in grid:
                    row = next(
                        (r for r in self.results.rows if muse_row_key(r) == (req["name"], "unlearned", label, v)), None
                    )
                    if row is None:
                        raise RowMissing
                    best = row if self._better(row, best, util) else best
                    if self._stops(row, grid, util):
                        break
                continue
            state: dict = {"model": None, "row": None}

            def on_row(row, pred, util=util, state=state):
                if self._better(row, state["row"], util):
                    state["model"], state["row"] = copy.deepcopy(pred.model), row
                return self._stops(row, grid, util)

            yield from self.sweep(req, lm, label, m, self.grids[label], on_row=on_row)
            if state["model"] is None:
                break
            lm = copy.copy(lm)
            lm.model = state["model"].eval()
            self.log(f"{label} {req['name']}: continues from {state['row']['setting']}")

    def save_layout(self):
        """``--save-models``: a unit per (request, method), the folders RUN_DIR/models/REQUEST/METHOD/PARAM=VALUE
        (beside the f_target and f_retrain caches, RUN_DIR/models/target and retrain-*); ``best`` keeps the setting
        the run's selection rule (``--select``) reports in Table 3 and continues from in C6
        (:func:`dukb.neural.metrics.muse.select_setting` against the request's f_retrain KnowMem on retain).
        Source: Shi et al. 2024b (MUSE), Sec. 4."""

        return SaveLayout(
            unit=lambda r: (r["request"], r["method"]) if r.get("model_kind") == "unlearned" else None,
            select=self._selected,
            best="per request and method, the setting --select reports",
            record=lambda r: {
                "request": r["request"],
                "targets": r["targets"],
                "method": r["method"],
                "setting": r["setting"],
            },
        )

    def _selected(self, rows: list[dict]) -> dict | None:
        """The row of one (request, method) that MUSE's selection rule reports (None without its f_retrain row)."""

        retrain = self._find(self._req(rows[0]["request"]), "retrain")
        if retrain is None:
            return None
        grid = sorted(rows, key=lambda r: float(r["setting"][r["param"]]))
        return select_setting(grid, retrain["knowmem_retain"], self.cfg.select)

    # ---- work units ----------------------------------------------------------------------------------------------
    def units(self) -> list[tuple]:
        """(request, "") then (request, method) for main and scale-c; then (sustain-k, "") for the sequential
        requests' reference rows and ("sustain", method) for C6's sequences."""
        out = []
        for req in self.requests:
            if req["experiment"] == "sustainability":
                continue
            methods = self.main_methods if req["experiment"] == "main" else self.curve_methods
            out += [(req["name"], "")] + [(req["name"], label) for label, *_ in methods]
        if self.cfg.sustain and self.cfg.scale_sizes:
            out += [(r["name"], "") for r in self.requests if r["experiment"] == "sustainability"]
            out += [("sustain", label) for label, *_ in self.curve_methods]
        return out

    def _req(self, name: str) -> dict:
        return next(r for r in self.requests if r["name"] == name)

    def _method(self, label: str):
        return next(m for lb, m, _s, _g in self.main_methods + self.curve_methods if lb == label)

    def pending(self, unit: tuple) -> list:
        """A reference unit: [unit] while a reference row is missing; a method unit: its grid values without a
        row; a sequence: [unit] while its dry replay meets a missing row."""
        name, label = unit
        try:
            if name == "sustain":
                for _row in self.sustain(label, self._method(label), dry=True):
                    raise AssertionError("a dry replay computed a row")  # never: dry raises before computing
                return []
            if not label:
                for _row in self.references(self._req(name), dry=True):
                    raise AssertionError("a dry replay computed a row")
                return []
        except RowMissing:
            return [unit]
        return [v for v in self.grids[label] if (name, "unlearned", label, float(v)) not in self.results.done]

    def total_rows(self) -> int:
        """Every method's grid on main, and the curve methods' grids on each scalability and sustainability
        request (the reference rows are not counted)."""
        cfg = self.cfg
        return sum(len(self.grids[lb]) for lb, *_ in self.main_methods) + sum(
            len(self.grids[lb]) for lb, *_ in self.curve_methods
        ) * (len(cfg.scale_sizes) * (2 if cfg.sustain else 1))

    def counts(self, row: dict) -> bool:
        """Unlearned rows advance the bar (:meth:`total_rows` counts those)."""
        return row.get("model_kind") == "unlearned"

    def rows_done(self) -> int:
        """Unlearned rows of this invocation's methods already on disk."""
        labels = {lb for lb, *_ in self.main_methods + self.curve_methods}
        return sum(1 for r in self.results.rows if r.get("model_kind") == "unlearned" and r.get("method") in labels)

    def run_unit(self, unit: tuple, todo: list):
        """The reference rows of a request, a method's grid on it, or a C6 sequence."""
        name, label = unit
        if name == "sustain":
            yield from self.sustain(label, self._method(label))
            return
        req = self._req(name)
        if not label:
            refs = yield from self.references(req)
            self.log(
                f"{name}: forget {len(self.splits[name].forget['relationships'])} facts; f_target KnowMem "
                f"forget {refs['target']['knowmem_forget']:.3f}, f_retrain {refs['retrain']['knowmem_forget']:.3f}"
            )
            return
        yield from self.sweep(req, self.f_target, label, self._method(label), todo)

    # ---- report --------------------------------------------------------------------------------------------------
    def report(self) -> dict:
        """summary.csv, report.md and figures (:func:`dukb.neural.protocols.muse.report.render_muse`, with the run's
        bootstrap and selection rule)."""

        self.log(self.done_line())
        paths = self.render(lambda run: render_muse(run, bootstrap=self.cfg.bootstrap, select=self.cfg.select))
        self.log(f"report {paths.get('report', 'not rendered yet (no rows)')}")
        return paths


@holds_run_lock  # RUN_DIR/.dukb/run.lock, taken by claim_run, is held until run_muse returns
def run_muse(run_dir, config: MuseConfig | None = None, *, resume: bool = True, progress: bool = False, log=print):
    """Run (or resume) the MUSE protocol into ``run_dir`` and render its report (:class:`MuseProtocol`).

    Args:
        run_dir: output directory.
        config: :class:`MuseConfig` (default: the built-in KB and the tiny model).
        resume: continue a run in ``run_dir`` (refused when a row-changing setting differs).
        progress: rich progress bar over the rows.
        log: callable(str) for one-line progress reports.

    Returns:
        pandas DataFrame of the result rows.

    Raises:
        InputError: bad settings, a directory holding another run or in use by another process
            (:func:`dukb.neural.run.lock.claim_run`), results present without ``resume``, or several processes (not
            supported here).

    Source: Shi et al. 2024b (MUSE), Sec. 2-4.
    """
    return MuseProtocol(run_dir, config, resume=resume, progress=progress, log=log).execute()


#: the protocol's names, with those of its config
__all__ = [
    "MuseProtocol",
    "model_metrics",
    "run_muse",
]
