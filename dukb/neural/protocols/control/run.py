"""`dukb control`'s stages: the evaluation framework of "Unlearning with Control" (Wang et al. 2024, Sec. 4-5, App. C)
on a KB, resumable, with deep unlearning's Success-DU of every model (Wu et al. 2025, Definition 2).

- plan: KB, closure, the nested forget sets per ratio, retain-eval and retain-train (RUN_DIR/splits.json), the run
  identity, the forget facts' minimal deep unlearning sets (sets.json);
- model: θ_o finetuned on every fact's QA (cached in RUN_DIR/finetuned) or ``--finetuned``;
- units: (ratio, "") for θ_o's row and (ratio, method) for a method's uncontrolled run and every control's coarse
  and fine grids (the fine grid centred on the unit's own coarse calibration, :func:`calibrate`). What is left of a
  method unit is decided by a dry replay of its decisions over the rows on disk;
- score: within the unit (PS vector, the facts the model no longer knows, Success-DU);
- report: calibration from the rows alone, the paper's table layout, PNGs
  (:mod:`dukb.neural.protocols.control.report`).

The splits, grids and calibration are in :mod:`dukb.neural.protocols.control.config`.
"""

from __future__ import annotations

import time
from dataclasses import asdict

from dukb import InputError
from dukb.neural import distributed as dist
from dukb.neural.data import kb_qa
from dukb.neural.methods import UnlearnContext, check_unique, get_method, resolve
from dukb.neural.methods.base import Control
from dukb.neural.metrics import metric_call
from dukb.neural.metrics.heldout import check_heldout
from dukb.neural.metrics.ps import paraphrase_questions
from dukb.neural.metrics.summary import short_number
from dukb.neural.modelrecord import TINY_CONFIG, model_fingerprint
from dukb.neural.models import resolve_device, resolve_dtype
from dukb.neural.pipeline import finetune_config, finetune_kb, finetune_record, load_finetuned
from dukb.neural.plan import load_kb_closure, sets_cache, sets_key
from dukb.neural.probe import Predictor, probe
from dukb.neural.protocols.base import Protocol, RowMissing
from dukb.neural.protocols.control.config import (
    ControlConfig,
    calibrate,
    coarse_grid,
    control_row_key,
    fine_grid,
    ratio_key,
    split_facts,
)
from dukb.neural.protocols.control.report import render_control
from dukb.neural.protocols.muse.config import _lr_entry
from dukb.neural.run.files import CONFIG_NAME, RunDir, read_json, write_json_atomic
from dukb.neural.run.identity import IDENTITY_VERSION, history_entry
from dukb.neural.run.lock import holds_run_lock
from dukb.neural.run.provenance import provenance
from dukb.neural.savedmodels import SaveLayout, safe_name
from dukb.neural.unlearn import heldout_baseline, probe_until_elicited

#: the forms a method's models are trained on (qa) or selected on (the calibration's PS-exact asks the qa questions,
#: PS-perturb the paraphrases): never held out
CALIBRATION_FORMS = ("paraphrase", "qa")


class ControlProtocol(Protocol):
    """`dukb control` in stages (module docstring). Source: Wang et al. 2024, Sec. 5, App. C."""

    name = "control"
    config_class = ControlConfig
    units_name = "(ratio, method)"
    bar_label = "control rows"

    # ---- plan ----------------------------------------------------------------------------------------------------
    def plan(self) -> None:
        """KB, closure, splits per forget ratio, the run identity (model, settings, methods with their rates,
        controls, ratios with their forget sets); RUN_DIR claimed; splits.json, config.json, sets.json.

        Raises:
            InputError: several processes, a method that is not a gradient method, a ratio the KB cannot fill,
                another run in RUN_DIR.
        """

        cfg = self.cfg
        if dist.is_distributed():
            raise InputError("dukb control runs in one process; launch it without accelerate/torchrun")
        methods = self._resolve_methods()
        self.kb, self.closure = kb, closure = load_kb_closure(
            cfg.kb, cfg.rules, what="control (it scores every fact on the qa form)"
        )
        splits = split_facts(kb, cfg.ratios, cfg.retain_eval, cfg.seed)
        device = resolve_device(cfg.device)
        self.model_id = model_id = self._model_identity()
        self.dtype = dtype = str(resolve_dtype(cfg.dtype, device)).removeprefix("torch.")
        family = (self.spec or cfg.model_spec()).preset_family
        # one set of held-out forms for every model of the run (θ_o's row is compared with each method's): the
        # forms no method trains on or queries, and none the calibration selects on (PS-perturb asks paraphrases)
        # (the run's methods: this invocation's and those an earlier one of a resumed run recorded)
        run_methods = [m for _label, m in methods] + self._recorded_methods()
        self.seen = tuple(sorted(set(CALIBRATION_FORMS) | {k for m in run_methods for k in m.seen_forms}))
        self.heldout = check_heldout(cfg.heldout_forms, self.seen)
        settings = cfg.identity_settings(
            ("kb", "model", "finetuned", "methods", "controls", "ratios", "device", "finetune_epochs", "batch_size")
        )
        settings.update(cfg.backend_identity())  # --probe-backend, only when not hf
        identity = {
            "identity_version": IDENTITY_VERSION,
            "kb": kb.fingerprint(),
            "rules": closure.rules.fingerprint,
            "model": model_id,
            "dtype": dtype,
            "prompt": cfg.prompt,
            "settings": settings,
            "methods": {label: {"method": m.name, **_lr_entry(m, family, cfg.lr)} for label, m in methods},
            "controls": {c: {"control": c} for c in cfg.controls},
            "retain_eval": splits["retain_eval"],
            # the resolved held-out forms: a resume whose methods would change them (e.g. adding `rt`, which
            # trains on reverse) is refused, so every row of the run is judged on the same forms
            "heldout": {"forms": list(self.heldout), "rule": cfg.heldout_rule},
            "ratios": {ratio_key(r): {"ratio": r, "forget": splits["forget"][ratio_key(r)]} for r in cfg.ratios},
        }
        self.claim(identity, extendable=("methods", "controls", "ratios"), row_key=control_row_key)
        # the splits of every ratio of the run, also those of earlier invocations (splits.json is rewritten whole)
        self.splits = splits = split_facts(
            kb, [v["ratio"] for v in self.identity["ratios"].values()], cfg.retain_eval, cfg.seed
        )
        if not self.joined:  # a joined worker leaves splits.json, config.json and the caches to the owner
            self._write_record(splits, provenance(device))
        all_forget = sorted({t for f in splits["forget"].values() for t in f})
        # the forget facts' minimal deep unlearning sets, cached in sets.json for the report's DU recall
        sets_cache(
            self.run,
            closure,
            all_forget,
            sets_key(self.identity["kb"], self.identity["rules"], cfg.sets, cfg.seeds, cfg.seed),
            write=not self.joined,
        )
        self.log(
            f"KB {kb.source}: {len(kb.relationships)} + {len(kb.biographies)} facts; D_u sizes "
            + ", ".join(f"{k}: {len(v)}" for k, v in splits["forget"].items())
            + f"; D_t,eval {sum(map(len, splits['retain_eval'].values()))}"
        )

    def _model_identity(self) -> dict:
        """The model's part of the run identity, with ``self.spec`` set: a finetuned model's fingerprint (no spec),
        else the base model's and the finetuning the run does (its preset and config); then the LoRA and
        partial-layer options (absent at their defaults)."""
        cfg = self.cfg
        if cfg.finetuned:
            self.spec = None
            model_id = {"finetuned": model_fingerprint(cfg.finetuned)}
        else:
            self.spec = cfg.model_spec()
            preset, fcfg = finetune_config(self.spec, None, cfg.finetune_epochs, None, cfg.batch_size, cfg.seed)
            model_id = {
                "base": {"tiny": TINY_CONFIG} if cfg.model == "tiny" else model_fingerprint(cfg.model),
                "finetune": {"preset": preset, **asdict(fcfg)},
            }
        model_id.update(cfg.model_identity())
        return model_id

    def _write_record(self, splits: dict, prov: dict) -> None:
        """Write splits.json (``splits``) and config.json (the config, the claimed identity, the history of the
        invocations and the provenance ``prov``, :func:`dukb.neural.run.provenance.provenance`) into the run
        directory."""
        record = {
            "protocol": "control",
            **asdict(self.cfg),
            "kb": str(self.kb.source),
            "identity": self.identity,
            "history": self.old_record.get("history", []) + [history_entry(self.added)],
            "provenance": prov,
        }
        write_json_atomic(self.run / "splits.json", splits)
        write_json_atomic(RunDir(self.run).config, record)

    def _resolve_methods(self) -> list:
        """Set and return ``self.methods``, the run's methods as (label, method): each of ``--methods`` a name, a
        preset or an entry with per-method options (``ga:lr=5e-4``).

        Raises:
            InputError: a label twice, a forget scope other than "target", a method not swept over steps.
        """

        cfg = self.cfg
        self.methods = methods = [(r.label, r.method) for r in (resolve(m, "target") for m in cfg.methods)]
        check_unique(label for label, _m in methods)
        for (label, m), spec in zip(methods, cfg.methods):
            if resolve(spec, "target").scope != "target":
                raise InputError(f"{label}: the forget set is the ratio's D_u; a forget scope does not apply here")
            if m.param != "steps":
                raise InputError(f"{m.name}: controls apply to gradient methods (swept over steps), not to {m.param}")
        return methods

    def _recorded_methods(self) -> list:
        """The methods an earlier invocation of this run recorded in config.json's identity (none for a new run or
        without --resume), so that the held-out forms are resolved over every method of the run.

        Raises:
            InputError: config.json unreadable, or it names a method without a name or one this dukb lacks.
        """

        path = RunDir(self.run).config
        if not self.resume or not path.is_file():
            return []
        ident = read_json(path, CONFIG_NAME).get("identity")
        entries = (ident.get("methods") or {}).values() if isinstance(ident, dict) else ()
        out = []
        for e in entries:
            name = e.get("method") if isinstance(e, dict) else None
            if not isinstance(name, str):
                raise InputError(f"{path}: the run identity records a method entry without a method name")
            out.append(get_method(name))  # InputError for a method this dukb does not know
        return out

    # ---- model ---------------------------------------------------------------------------------------------------
    def model(self) -> None:
        """θ_o: finetuned on every fact's QA (cached under its identity) or ``--finetuned``; the QA items, their
        paraphrases and the retain-eval items."""

        cfg, kb = self.cfg, self.kb
        if cfg.finetuned:
            lm = load_finetuned(cfg.finetuned, **cfg.load_kwargs())
        else:
            ft_dir = self.run / "finetuned"
            key = {"model": self.model_id, "kb": self.identity["kb"], "dtype": self.dtype, "prompt": cfg.prompt}
            rec = finetune_record(ft_dir)
            if rec is None or rec.get("identity") != key:
                finetune_kb(
                    kb,
                    self.spec,
                    ft_dir,
                    epochs=cfg.finetune_epochs,
                    batch_size=cfg.batch_size,
                    seed=cfg.seed,
                    progress=self.progress,
                    log=self.log,
                    identity=key,
                )
            lm = load_finetuned(ft_dir, **cfg.load_kwargs())
        self.lm = lm
        self.qa = kb_qa(kb)
        self.by_key = {(it.fact_kind, int(it.fact_id)): it for it in self.qa}
        self.para = paraphrase_questions(kb)
        ev = self.splits["retain_eval"]
        self.ev_items = [self.by_key[("relationship", i)] for i in ev["relationships"]] + [
            self.by_key[("biography", i)] for i in ev["biographies"]
        ]
        self.pred0 = Predictor(lm.model, lm.tokenizer, lm.tags, device=lm.device)
        # the held-out baseline: which (form, fact) pairs θ_o answers; a fact none of them elicits is unscorable on
        # the held-out forms (never counted as forgotten there)

        self.heldout_before = heldout_baseline(lm, kb, self.heldout)
        scorable = {(fk, f) for _k, fk, f in self.heldout_before}
        self.unscorable = {
            "relationships": sorted(f.fact_id for f in kb.relationships if ("relationship", f.fact_id) not in scorable),
            "biographies": sorted(b.fact_id for b in kb.biographies if ("biography", b.fact_id) not in scorable),
        }
        held_items = kb_qa(kb, tuple(self.heldout))
        if self.cfg.heldout_rule == "pairs":  # only the pairs that elicited their fact before are asked again
            held_items = [it for it in held_items if (it.kind, it.fact_kind, it.fact_id) in self.heldout_before]
        self.held_items = held_items
        n = len(kb.relationships) + len(kb.biographies)
        self.log(
            f"held-out forms ({', '.join(self.heldout)}) elicit "
            f"{1 - sum(map(len, self.unscorable.values())) / max(1, n):.4f} of the KB before unlearning"
        )

    # ---- scoring a model -----------------------------------------------------------------------------------------
    def evaluate_model(self, pred, forget_items, seen=()) -> dict:
        """The PS vector on the forget and retain-eval items (Wang et al. 2024, Sec. 4), the facts the model no
        longer knows, its accuracy over every fact, and Success-DU (Wu et al. 2025, Definition 2: every forget fact
        underivable from what the model still knows), on the qa form and on the held-out forms (``*_heldout``:
        :func:`dukb.neural.metrics.heldout.heldout_forgotten`; facts no held-out form elicited from θ_o count as
        known there and are left out of ``accuracy_all_facts_heldout``). ``seen``: the forms the model's method
        trained on or was selected on (``probe_forms_seen``, :data:`CALIBRATION_FORMS` and the method's in-loop
        forms; none for θ_o)."""

        # the metrics through the one registry, by name
        success_du_all = metric_call("recall", "success_du")
        heldout_forgotten = metric_call("recall_heldout", "forgotten")
        fields = metric_call("ps_exact", "vector")(pred, forget_items, self.ev_items, self.para, search=self.cfg.search)
        df = probe(pred, self.qa, generate=True, rouge=False, logprob=False)
        gone = df[~df["known"].astype(bool)]
        fields["forgotten_relationships"] = sorted(
            int(i) for k, i in zip(gone["fact_kind"], gone["fact_id"]) if k == "relationship"
        )
        fields["forgotten_biographies"] = sorted(
            int(i) for k, i in zip(gone["fact_kind"], gone["fact_id"]) if k == "biography"
        )
        fields["accuracy_all_facts"] = float(df["known"].mean())
        fields["success_du"] = success_du_all(
            self.closure, [it.fact_id for it in forget_items], fields["forgotten_relationships"]
        )
        kw = dict(generate=True, rouge=False, logprob=False)
        hdf = (
            probe_until_elicited(pred, self.held_items, **kw)
            if self.cfg.heldout_rule == "pairs"
            else probe(pred, self.held_items, **kw)
        )
        h = heldout_forgotten(self.kb, hdf, self.heldout, self.heldout_before, self.cfg.heldout_rule)
        un = self.unscorable
        n_scorable = (
            len(self.kb.relationships) + len(self.kb.biographies) - len(un["relationships"]) - len(un["biographies"])
        )
        gone_h = len(h["forgotten_relationships"]) + len(h["forgotten_biographies"] or ())
        fields.update(
            {
                "probe_forms_seen": list(seen),
                "heldout_forms": list(self.heldout),
                "forgotten_relationships_heldout": sorted(h["forgotten_relationships"]),
                "forgotten_biographies_heldout": sorted(h["forgotten_biographies"] or ()),
                "accuracy_all_facts_heldout": 1 - gone_h / n_scorable if n_scorable else None,
                "success_du_heldout": success_du_all(
                    self.closure, [it.fact_id for it in forget_items], h["forgotten_relationships"]
                ),
                "heldout_unscorable_fact_ids": un,
            }
        )
        return fields

    def ratio_data(self, rk: str):
        """(row base, forget items, retain-train ids, retain-train items) of a forget ratio."""
        forget_ids = self.splits["forget"][rk]
        f_items = [self.by_key[("relationship", i)] for i in forget_ids]
        train = self.splits["retain_train"][rk]
        train_items = [self.by_key[("relationship", i)] for i in train["relationships"]] + [
            self.by_key[("biography", i)] for i in train["biographies"]
        ]
        return {"ratio": rk, "forget_fact_ids": forget_ids}, f_items, train, train_items

    def _row_of(self, key: tuple) -> dict | None:
        return next((r for r in self.results.rows if control_row_key(r) == key), None)

    def original(self, rk: str, dry: bool = False) -> dict:
        """θ_o's row of a ratio: read from the results, else computed (never written here). ``dry``: raise
        :class:`RowMissing` instead of computing."""
        orig = self._row_of((rk, "", "original", None))
        if orig is not None:
            return orig
        if dry:
            raise RowMissing
        base, f_items, _t, _ti = self.ratio_data(rk)
        t0 = time.perf_counter()
        return {
            **base,
            "method": None,
            "control": "original",
            "stage": "original",
            "value": None,
            **self.evaluate_model(self.pred0, f_items),
            "seconds": round(time.perf_counter() - t0, 3),
            "worker": self.worker,
        }

    def _sweep(self, rk: str, label: str, m, control: str, grid: list, stage: str, dry: bool):
        """Rows of ``m`` under ``control`` over ``grid``: rows already present are reused, the others computed and
        yielded (a generator whose return value is every row of the grid)."""

        cfg = self.cfg
        out, todo = [], []
        for v in grid:
            hit = self._row_of((rk, label, control, float(v)))
            (out.append(hit) if hit is not None else todo.append(v))
        if not todo:
            return out
        if dry:
            raise RowMissing
        base, f_items, train, train_items = self.ratio_data(rk)
        used = {
            "retain_train_fact_ids": (
                {"relationships": train["relationships"], "biographies": train["biographies"]}
                if m.uses_retain
                else {"relationships": [], "biographies": []}
            )
        }
        ctl = Control(control, cfg.steps)
        ctx = UnlearnContext(
            self.lm,
            f_items,
            train_items if m.uses_retain else [],
            seed=cfg.seed,
            lr=cfg.lr,
            **cfg.unlearn_kwargs(),
            control=ctl,
            kb=self.kb,
            closure=self.closure,
            items=self.qa,
        )
        t0 = time.perf_counter()
        for setting, pred in m.sweep(ctx, todo):
            t1 = time.perf_counter()
            row = {
                **base,
                "method": label,
                "control": control,
                "stage": stage,
                "param": ctl.param,
                "value": float(setting.get(ctl.param)),
                "setting": setting,
                **used,
                **self.evaluate_model(pred, f_items, sorted(set(CALIBRATION_FORMS) | set(m.seen_forms))),
                "risk_curve": pred.meta.get("risk_curve"),
                "seconds_unlearn": round(t1 - t0, 3),
                "seconds_eval": round(time.perf_counter() - t1, 3),
                "worker": self.worker,
            }
            yield row  # written by the work loop before the sweep goes on
            self.keep_model(row, pred)  # --save-models: the weights are still the setting's
            out.append(row)
            t0 = time.perf_counter()
        return out

    def method_unit(self, rk: str, label: str, m, dry: bool = False):
        """The rows of one (ratio, method) unit: the uncontrolled run, then every control's coarse and fine grids
        (each fine grid centred on the coarse calibration). ``dry``: only check that every row is present (raise
        :class:`RowMissing` otherwise); the grids depend on rows already computed, so this replays the unit's
        decisions. Source: Wang et al. 2024, App. C."""
        cfg = self.cfg
        orig = self.original(rk, dry=dry)  # another worker may still be writing it: the same values
        unc = (yield from self._sweep(rk, label, m, "none", [cfg.steps], "uncontrolled", dry))[0]
        risks = (unc.get("risk_curve") or {}).get("unlearning_risk") or []
        tau_top = max(risks) if risks else None
        if not dry:
            self.log(
                f"{rk} {label}: uncontrolled T={cfg.steps}: PS-exact forget {unc['ps_exact_forget']:.3f} "
                f"retain {unc['ps_exact_retain']:.3f}"
            )
        for control in cfg.controls:
            grid = coarse_grid(control, cfg, tau_top)
            rows = yield from self._sweep(rk, label, m, control, grid, "coarse", dry)
            best = calibrate(rows, orig, cfg.selection)
            centre = float(best["value"]) if best is not None else float(grid[0])
            rows = rows + (
                yield from self._sweep(rk, label, m, control, fine_grid(control, centre, grid, cfg), "fine", dry)
            )
            sel = calibrate(rows, orig, cfg.selection)
            if dry:
                continue
            if sel is None:
                self.log(f"{rk} {label} {control}: no setting passes the floors")
            else:
                self.log(
                    f"{rk} {label} {control}: selected {sel['param']}={sel['value']:g}: PS-exact forget "
                    f"{sel['ps_exact_forget']:.3f}, retain {sel['ps_exact_retain']:.3f}"
                )

    def save_layout(self):
        """``--save-models``: a unit per (ratio, method, control), the folders
        RUN_DIR/models/RATIO/METHOD/CONTROL/PARAM=VALUE (RATIO as ``5_`` for 5%); ``best`` keeps the calibrated
        model, the one the report tabulates (:func:`calibrate` over the coarse and fine rows against θ_o's row;
        none when no setting passes the floors), and the uncontrolled run's only setting (control ``none``).
        Source: Wang et al. 2024, Sec. 5 and App. C."""

        return SaveLayout(
            unit=lambda r: (r["ratio"], r["method"], r["control"]) if r.get("method") else None,
            select=self._calibrated,
            setting=lambda r: safe_name(f"{r['param']}={short_number(r['value'])}"),
            record=lambda r: {
                "ratio": r["ratio"],
                "method": r["method"],
                "control": r["control"],
                "stage": r["stage"],
                "setting": r["setting"],
            },
            best="per ratio, method and control, the calibrated setting (control none: its only one)",
        )

    def _calibrated(self, rows: list[dict]) -> dict | None:
        """The row of one (ratio, method, control) the report shows: the uncontrolled run's, or the calibrated one
        (:func:`calibrate`; None without θ_o's row or when none passes the floors)."""
        if rows[0]["control"] == "none":
            return rows[-1]
        orig = self._row_of((rows[0]["ratio"], "", "original", None))
        return calibrate(rows, orig, self.cfg.selection) if orig is not None else None

    # ---- work units ----------------------------------------------------------------------------------------------
    def units(self) -> list[tuple]:
        """(ratio, "") for θ_o's row, then (ratio, method) per method, for each ratio of this invocation."""
        return [(ratio_key(r), name) for r in self.cfg.ratios for name in [""] + [lb for lb, _m in self.methods]]

    def pending(self, unit: tuple) -> list:
        """[unit] while a row of the unit is missing (a dry replay of its decisions), else []."""
        rk, name = unit
        try:
            if not name:
                self.original(rk, dry=True)
            else:
                for _row in self.method_unit(rk, name, self._method(name), dry=True):
                    raise AssertionError("a dry replay computed a row")  # never: dry raises before computing
        except RowMissing:
            return [unit]
        return []

    def _method(self, label: str):
        return next(m for lb, m in self.methods if lb == label)

    def total_rows(self):
        """Unknown in advance (the fine grids follow the coarse rows): None, an open-ended bar."""
        return None

    def run_unit(self, unit: tuple, todo: list):
        """θ_o's row of the ratio, or every row of the (ratio, method) unit (:meth:`method_unit`)."""
        rk, name = unit
        if not name:
            orig = self.original(rk)
            if self._row_of((rk, "", "original", None)) is None:  # computed here, not read back
                yield orig
            self.log(f"{rk}: θ_o PS-exact forget {orig['ps_exact_forget']:.3f} retain {orig['ps_exact_retain']:.3f}")
            return
        yield from self.method_unit(rk, name, self._method(name))

    # ---- report --------------------------------------------------------------------------------------------------
    def report(self) -> dict:
        """summary.csv, report.md, ps_curves.png, risk_curves.png (:func:`render_control`)."""

        paths = self.render(render_control)
        self.log(self.done_line(f": report {paths.get('report', 'not rendered yet (no rows)')}"))
        return paths


@holds_run_lock  # RUN_DIR/.dukb/run.lock, taken by claim_run, is held until run_control returns
def run_control(
    run_dir, config: ControlConfig | None = None, *, resume: bool = True, progress: bool = False, log=print
):
    """Run (or resume) the Unlearning-with-Control protocol into ``run_dir`` and render its report
    (:class:`ControlProtocol`).

    Args:
        run_dir: output directory.
        config: :class:`ControlConfig` (default: the built-in KB, the tiny model, GA/GD/KL/PO, OC/ES/MM, 1/5/10%).
        resume: continue a run in ``run_dir`` (refused when a row-changing setting differs; methods, controls and
            ratios may be added).
        progress: rich progress bar over the rows.
        log: callable(str) for one-line progress reports.

    Returns:
        pandas DataFrame of the result rows.

    Raises:
        InputError: bad settings, a directory holding another run or in use by another process
            (:func:`dukb.neural.run.lock.claim_run`), results present without ``resume``, a method that is not a
            gradient method.

    Source: Wang et al. 2024, Sec. 5, App. C.
    """
    return ControlProtocol(run_dir, config, resume=resume, progress=progress, log=log).execute()


__all__ = ["ControlProtocol", "run_control"]
