"""The RESTOR pipeline, stage by stage and resumable in RUN_DIR (:func:`run_restor`, ``dukb restor``).

1. **Clean model** θ_ideal: finetuned on the true KB. The tiny default model is built for the run: its word-level
   vocabulary covers the QA texts, the true-fact sentences and the corruption documents. Its training set is every
   fact's question (:func:`dukb.neural.restor.facts.fact_probes`) plus every fact stated in each sentence template of
   the corruption documents, so that the model holds the facts in the form the documents later contradict (RESTOR's
   clean model learned them from pretraining text).
2. **Corruption** θ_corrupted: the clean model trained further on the corruption documents
   (:func:`dukb.kb.corrupt.corrupt`) with next-token prediction on every token (RESTOR Sec. 3.2; App. C.1, "stage:
   pt"), with LoRA (``lora_r`` > 0, merged afterwards) or full finetuning.
3. **Probing** of the clean and corrupted models (:mod:`dukb.neural.restor.probing`), their belief analyses
   (:mod:`dukb.neural.restor.beliefs`) and their log-probabilities over A.
4. **Unlearning** θ_unlearned: GA, KL and NPO on the forget documents (:mod:`dukb.neural.restor.texts`), each plus λ
   times the cross-entropy on the retain documents, in the same LoRA parameter space (new adapters of the same
   configuration on the merged corrupted model, reference P_c = the adapters disabled; RESTOR Sec. 3.3, 4.2); each
   unlearned model is probed, its fact states computed (:mod:`dukb.neural.restor.states`) and one line appended to
   results.jsonl.

Then the report (:func:`dukb.neural.restor.report.render`). torch and transformers are imported inside the stages.

Source: Rezaei et al., RESTOR (Sec. 3-4, App. B-C, G); the rule-aware analysis is dukb's.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch  # noqa: TID253 (a model module: reached only through a command's lazy import)

from dukb import InputError
from dukb.kb import load_kb
from dukb.kb.corrupt import corrupt, fact_templates, save_corruption
from dukb.kb.judge import Judge
from dukb.kb.model import KB, Triple
from dukb.neural import tracking
from dukb.neural.docs import encode_sequences, encode_texts, longest_tokens, train_sequences, unlearn_documents
from dukb.neural.methods.base import WeightState, select_layers
from dukb.neural.metrics.summary import short_number
from dukb.neural.modelbuild import build_tiny_model, build_tokenizer, save_model
from dukb.neural.modelrecord import TINY_CONFIG, model_fingerprint, spec_for_path
from dukb.neural.models import load_model, resolve_device, resolve_dtype
from dukb.neural.probe import Predictor
from dukb.neural.protocols.base import Protocol
from dukb.neural.restor.beliefs import belief_analysis, belief_triples
from dukb.neural.restor.config import RESTOR_METHODS, RestorConfig
from dukb.neural.restor.facts import FactProbe, check_questions, fact_probes, fact_sentences
from dukb.neural.restor.files import RowsFile, read_json, write_facts
from dukb.neural.restor.probing import candidate_logprobs, probe_facts
from dukb.neural.restor.report import method_label, render
from dukb.neural.restor.states import STATES_A, STATES_B, fact_state, partition, summarize_model
from dukb.neural.restor.texts import forget_texts, retain_texts
from dukb.neural.run.files import RunDir, refuse_links, refuse_links_in
from dukb.neural.run.files import read_json as read_run_json
from dukb.neural.run.files import write_json_atomic as write_json
from dukb.neural.run.identity import IDENTITY_VERSION, history_entry, sha256_json
from dukb.neural.run.lock import claim_run, confirm_run, holds_run_lock, run_role
from dukb.neural.run.provenance import provenance
from dukb.neural.savedmodels import SaveLayout, safe_name
from dukb.neural.spec import PROMPT_PRESETS, LoraSpec, ModelSpec
from dukb.solver.beliefs import functional_relations
from dukb.solver.closure import compute_closure


def lora_targets(model) -> tuple[str, ...]:
    """Names (last component) of every linear layer but the output head: RESTOR's ``lora_target: all``.

    GPT-2's Conv1D layers count as linear.

    Source: Rezaei et al., RESTOR, App. C.1 (LLaMA-Factory's lora_target: all).
    """

    names = set()
    for name, mod in model.named_modules():
        last = name.rsplit(".", 1)[-1]
        if last in ("lm_head", "embed_out", "output"):
            continue
        if isinstance(mod, torch.nn.Linear) or type(mod).__name__ == "Conv1D":
            names.add(last)
    return tuple(sorted(names))


def _spec_for(cfg: RestorConfig, path: str):

    return spec_for_path(
        path,
        prompt=cfg.prompt,
        dtype=cfg.dtype,
        device=cfg.device,
        trust_remote_code=cfg.trust_remote_code,
        gradient_checkpointing=cfg.gradient_checkpointing,
    )


def _predictor(lm):

    lm.model.eval()
    return Predictor(lm.model, lm.tokenizer, lm.tags, device=lm.device)


def _lora_spec(cfg: RestorConfig, model):

    if not cfg.lora_r:
        return None
    targets = tuple(cfg.lora_targets) if cfg.lora_targets else lora_targets(model)
    return LoraSpec(cfg.lora_r, cfg.lora_alpha or 2 * cfg.lora_r, cfg.lora_dropout, targets)


def _select_layers(cfg: RestorConfig, model) -> None:
    """``--layers``: freeze every trainable parameter outside the chosen blocks (corruption and unlearning)."""
    if cfg.layers:
        select_layers(model, cfg.layer_range())


def _train_clean(cfg: RestorConfig, kb: KB, facts, judge, texts_for_vocab, out: Path, log) -> dict:
    """Stage 1: build (tiny) or load the model and finetune it on the facts' QA and the true-fact sentences."""

    sentences = fact_sentences(kb, cfg.templates)
    items = [f.item() for f in facts]
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dukb-restor-") as tmp:
        if cfg.model == "tiny":
            tags = PROMPT_PRESETS["tiny"]
            qa = [tags.prompt(it.question) + tags.target(it.answer) for it in items]
            texts = qa + sentences + list(texts_for_vocab)
            tok = build_tokenizer(texts)
            need = max(longest_tokens(tok, texts) + cfg.max_new_tokens + 4, 96)
            build_tiny_model(texts, tmp, seed=cfg.seed, config={"n_positions": -(-need // 32) * 32})
            spec = ModelSpec(
                tmp,
                prompt="tiny",
                dtype=cfg.dtype,
                device=cfg.device,
                gradient_checkpointing=cfg.gradient_checkpointing,
            )
        else:
            spec = _spec_for(cfg, cfg.model)
        lm = load_model(spec)
        batch = encode_sequences(lm.tokenizer, lm.tags, items, sentences, lm.device)
        pred = _predictor(lm)
        acc = {"value": None}

        def stop(epoch: int) -> bool:
            rows = probe_facts(pred, facts, judge, samples=1, max_new_tokens=cfg.max_new_tokens)
            acc["value"] = sum(r["correct"] for r in rows) / len(rows)
            log(f"clean model, epoch {epoch}: knows {acc['value']:.4f} of the facts")
            lm.model.train()
            return acc["value"] >= 1.0

        tc = cfg.train_config("clean")
        record = train_sequences(lm.model, batch, tc, stop=stop if tc.eval_every else None)
        lm.model.eval()
        if acc["value"] is None:
            stop(record["epochs_run"])
        save_model(lm, out, kb=kb)
    record.update(
        accuracy=acc["value"],
        n_qa=len(items),
        n_sentences=len(sentences),
        seconds_total=time.perf_counter() - t0,
        model=cfg.model,
    )
    return record


def _train_corrupted(cfg: RestorConfig, clean_dir: Path, docs: list[str], out: Path, log) -> dict:
    """Stage 2: continue training the clean model on the corruption documents (LoRA, merged afterwards, or full)."""

    t0 = time.perf_counter()

    lm = load_model(_spec_for(cfg, str(clean_dir)))
    lora = _lora_spec(cfg, lm.model)
    if lora is not None:
        torch.manual_seed(cfg.seed)  # LoRA's initialisation draws from the global generator
        state = WeightState(lm, lora)
        lm.model = state.model
    _select_layers(cfg, lm.model)
    tc = cfg.train_config("corrupt")
    record = train_sequences(lm.model, encode_texts(lm.tokenizer, docs, lm.device), tc)
    log(
        f"corruption: {len(docs)} documents, {tc.epochs} epochs, loss {record['loss_per_epoch'][-1]:.4f} "
        f"({record['seconds']:.1f} s)"
    )
    save_model(lm, out)
    record.update(
        lora=None if lora is None else asdict(lora), n_documents=len(docs), seconds_total=time.perf_counter() - t0
    )
    return record


def _probe_model(cfg: RestorConfig, pred, facts, judge, offset: int) -> tuple[list[dict], float]:
    t0 = time.perf_counter()
    rows = probe_facts(
        pred,
        facts,
        judge,
        samples=cfg.resolved_samples(),
        temperature=cfg.temperature,
        seed=cfg.seed + offset,
        max_new_tokens=cfg.max_new_tokens,
    )
    return rows, time.perf_counter() - t0


def _set_a(clean_rows, corr_rows) -> list[int]:
    return [i for i, (c, k) in enumerate(zip(clean_rows, corr_rows)) if c["correct"] and not k["correct"]]


@dataclass
class _Setup:
    """What a run knows before any model is trained: the KB, its closure, the corruption, the facts, the judge and
    the retain documents."""

    kb: KB
    true_closure: set[Triple]
    corruption: object  # dukb.kb.corrupt.Corruption
    facts: list[FactProbe]
    judge: Judge
    retain: list[str]
    joined: bool = False  # this process joined a live run as another worker: it writes no run files of its own


class RestorProtocol(Protocol):
    """RESTOR in the protocol skeleton's stages (:class:`dukb.neural.protocols.base.Protocol`):

    - plan: KB, closure, the run identity (RUN_DIR claimed), the corruption, the facts, the judge, the retain
      documents (:func:`_prepare`);
    - model: the clean model (stage 1), the corrupted model (stage 2), the probes of both and their
      log-probabilities over A (stage 3), each skipped when its files exist; then the corrupted model is loaded with
      the forget and retain documents encoded;
    - units: one per unlearning method (stage 4), each one row: unlearn, probe, fact states, beliefs;
    - report: :func:`dukb.neural.restor.report.render`.

    A second ``dukb restor`` with the same settings joins a live run once its owner has written stages 1-3 (the
    lock is shared from :meth:`Protocol.work` on): each method is a unit claimed in RUN_DIR/.dukb/units.

    Source: Rezaei et al., RESTOR (Sec. 3-4, App. B-C, G); rule-aware analysis: dukb.
    """

    name = "restor"
    config_class = RestorConfig
    units_name = "(method,)"

    def plan(self) -> None:
        """:func:`_prepare`: the KB, the run identity (RUN_DIR claimed), the corruption, facts and judge.

        Raises:
            InputError: bad KB, another run in RUN_DIR, a KB too small for the corruption.
        """
        self.setup = _prepare(self.run, self.cfg, self.log)
        self.joined = self.setup.joined
        config = RunDir(self.run).config  # a resume checks every row against the run's plan (its methods)
        self.results = RowsFile(
            RunDir(self.run).results,
            repair=not self.joined,
            config=read_run_json(config, "run config") if config.exists() else None,
        )
        self.kb = self.setup.kb
        self.make_saver(RowsFile.key)

    def save_layout(self):
        """``--save-models``: a unit per method and mode, RUN_DIR/models/METHOD (``-targeted`` appended in the
        targeted mode)/SETTING, each a LoRA adapter on the corrupted model (RUN_DIR/corrupted) under ``--lora-r``.
        RESTOR runs one setting per method and mode: ``best`` keeps it (the last written, should a resume have
        added another). Source: Rezaei et al., RESTOR, Sec. 4."""

        return SaveLayout(
            unit=lambda r: (r["method"] + ("-targeted" if r["targeted"] else ""),),
            select=lambda rows: rows[-1],
            setting=_setting_folder,
            record=lambda r: {"method": r["method"], "targeted": r["targeted"], "setting": r["setting"]},
            best="per method and mode, its only setting",
        )

    def model(self) -> None:
        """Stages 1-3 (each skipped when its files exist), then the corrupted model and the encoded documents."""

        cfg, s, run, log = self.cfg, self.setup, self.run, self.log
        docs_full = forget_texts(s.corruption, False)
        clean_dir = Path(cfg.finetuned) if cfg.finetuned else run / "clean"  # --finetuned: the clean model given
        if not cfg.finetuned and not (clean_dir / "train.json").exists():
            log("stage 1/4: clean model")
            rec = _train_clean(
                cfg, s.kb, s.facts, s.judge, docs_full + s.retain + forget_texts(s.corruption, True), clean_dir, log
            )
            write_json(clean_dir / "train.json", rec)
        self.corr_dir = corr_dir = run / "corrupted"
        if not (corr_dir / "train.json").exists():
            log("stage 2/4: corruption")
            rec = _train_corrupted(cfg, clean_dir, docs_full, corr_dir, log)
            write_json(corr_dir / "train.json", rec)
        self.base_rows, self.facts_a = _probe_base(
            cfg, s, run / "probes", {"clean": clean_dir, "corrupted": corr_dir}, log
        )
        self.lm = None
        if self.units() and any(self.pending(u) for u in self.units()):  # a model only when a row is left
            self.lm = lm = load_model(_spec_for(cfg, str(corr_dir)))
            self.forget = encode_texts(lm.tokenizer, forget_texts(s.corruption, cfg.targeted), lm.device)
            self.retain = encode_texts(lm.tokenizer, s.retain, lm.device) if s.retain else None
            self.lora = _lora_spec(cfg, lm.model)

    def units(self) -> list[tuple]:
        """One unit per unlearning method of the run."""
        return [(m,) for m in self.cfg.methods]

    def pending(self, unit: tuple) -> list:
        """[method] while the method's row (this mode and setting) is not written."""
        m = unit[0]
        return [] if self.results.done(m, self.cfg.targeted, asdict(self.cfg.unlearn_setting(m))) else [m]

    def total_rows(self) -> int:
        """One row per method."""
        return len(self.cfg.methods)

    def rows_done(self) -> int:
        """Methods whose row is written."""
        return sum(not self.pending(u) for u in self.units())

    def run_unit(self, unit: tuple, todo: list):
        """Stage 4 for one method: unlearn the forget documents from the corrupted model (λ times the retain
        documents' cross-entropy, in the same LoRA space), probe, fact states, beliefs; one row."""

        cfg, s, m = self.cfg, self.setup, unit[0]
        setting = cfg.unlearn_setting(m)
        self.log(f"stage 4/4: unlearning with {m.upper()}{' (targeted)' if cfg.targeted else ''}: {asdict(setting)}")
        torch.manual_seed(cfg.seed)  # LoRA's initialisation draws from the global generator
        state = WeightState(self.lm, self.lora)
        _select_layers(cfg, state.model)
        try:
            rec = unlearn_documents(
                state,
                m,
                self.forget,
                self.retain,
                setting.train_config(cfg.seed),
                reg_weight=setting.reg_weight,
                beta=setting.beta,
                level=cfg.npo_form if m == "npo" else "token",
            )
            pred = state.predictor()
            rows, secs = _probe_model(cfg, pred, s.facts, s.judge, 3 + RESTOR_METHODS.index(m))
            t0 = time.perf_counter()
            lps = candidate_logprobs(pred, self.facts_a)
            secs_lp = time.perf_counter() - t0
            states = [
                fact_state(c, k_, u) for c, k_, u in zip(self.base_rows["clean"], self.base_rows["corrupted"], rows)
            ]
            row = {
                "method": m,
                "targeted": cfg.targeted,
                "setting": asdict(setting),
                "train": rec,
                "rows": [
                    {k2: r[k2] for k2 in ("outputs", "answers", "labels", "correct", "answer", "label")} for r in rows
                ],
                "states": states,
                "partition": partition(states),
                "accuracy": summarize_model(s.facts, rows)["all"]["accuracy"],
                "logprobs_A": lps,
                "beliefs": _beliefs(cfg, s, rows),
                "seconds_unlearn": rec["seconds"],
                "seconds_probe": secs,
                "seconds_logprobs": secs_lp,
            }
            yield row
            self.keep_model(row, pred)  # --save-models: written; the adapters are still the method's
        finally:
            state.close()
        p = row["partition"]
        self.log(
            f"{method_label(row)}: accuracy {row['accuracy']:.2f}%; A ({p['n_A']}): "
            + ", ".join(f"{k} {_pct(p[k])}" for k in STATES_A)
            + f"; B ({p['n_B']}): "
            + ", ".join(f"{k} {_pct(p[k])}" for k in STATES_B)
        )

    def report(self) -> dict:
        """:func:`dukb.neural.restor.report.render` from the run directory's files."""
        paths = self.render(render)
        self.log(self.done_line(f": report {paths.get('report', 'not rendered yet (no rows)')}"))
        return paths

    def execute(self) -> dict:
        """The stages; returns the report's paths (RESTOR's entry has always returned them). With ``log_with``,
        every training's losses go to the run's tracker (:func:`dukb.neural.tracking.tracking`)."""
        with tracking.tracking(self.run, self.cfg.log_with, self.name):
            self.plan()
            with tracking.scope("finetune"):
                self.model()
            self.work()
        return self.report()


@holds_run_lock  # RUN_DIR/.dukb/run.lock, taken by claim_run in _prepare, is held until run_restor returns
def run_restor(run_dir, cfg: RestorConfig, *, log=print) -> dict:
    """Run (or resume) the RESTOR pipeline into ``run_dir`` and render its report (:class:`RestorProtocol`).

    Stages and files (each skipped on a rerun when its output exists): config.json; corruption/ (corrupted KB,
    corruptions.csv, documents.jsonl); clean/ and corrupted/ (models with train.json); probes/ (facts.jsonl,
    clean.json, corrupted.json with their belief analyses and log-probabilities over A); results.jsonl (one line
    per unlearning method and mode, appended as each finishes); then :func:`dukb.neural.restor.report.render`.

    Args:
        run_dir: output directory (created).
        cfg: :class:`dukb.neural.restor.config.RestorConfig`.
        log: callable(str) for one-line progress messages.

    Returns:
        The paths written by :func:`dukb.neural.restor.report.render`.

    Raises:
        InputError: bad settings or KB, a KB too small for the corruption, a run directory in use by another process
            with other settings (one with the same settings is waited for), or a run directory holding a run with
            other settings.

    Source: Rezaei et al., RESTOR (Sec. 3-4, App. B-C, G); rule-aware analysis: dukb.
    """
    return RestorProtocol(run_dir, cfg, log=log).execute()


def _setting_folder(row: dict) -> str:
    """The folder of a RESTOR row's setting: its epochs, learning rate and λ, and a digest of the whole setting
    (two settings that differ elsewhere get two folders)."""

    s = row["setting"]
    return safe_name(
        f"epochs={s['epochs']},lr={short_number(s['lr'])},lambda={short_number(s['reg_weight'])}-{sha256_json(s)[:8]}"
    )


def _prepare(run: Path, cfg: RestorConfig, log) -> _Setup:
    """Load the KB, check the run's identity, corrupt, and write config.json, corruption/ and probes/facts.jsonl.

    Raises:
        InputError: bad KB, a run directory holding a run with other settings, a KB too small for the corruption,
            or a directory that cannot be created.
    """

    kb = load_kb(cfg.kb)
    if not kb.schema.is_family:  # one line naming what a relation lacks, before any work
        check_questions(kb)
        fact_templates(kb)
    fp = kb.fingerprint()
    closure = compute_closure(kb, cfg.rules)
    dtype = str(resolve_dtype(cfg.dtype, resolve_device(cfg.device))).removeprefix("torch.")
    identity = cfg.identity() | {
        "identity_version": IDENTITY_VERSION,
        "kb_fingerprint": fp,
        "rules_fingerprint": closure.rules.fingerprint,
        "model_fingerprint": model_fingerprint(cfg.finetuned)
        if cfg.finetuned
        else {"tiny": TINY_CONFIG}
        if cfg.model == "tiny"
        else model_fingerprint(cfg.model),
        "dtype": dtype,
    }
    # one writer: locks the directory (a second restor with the same settings waits); a run with other settings is
    # refused (every differing key named) before anything in it is touched
    identity, _added, old_record = claim_run(run, "restor", identity, log=log)
    joined = run_role(run) == "worker"  # a second invocation on a live run: the owner wrote the run's files
    if joined:
        log("joined the run as another worker: units (method,) are claimed in RUN_DIR/.dukb/units")
    cor = corrupt(kb, cfg.corrupt, cfg.seed, cfg.context, closure=closure.atoms, docs_per_entity=cfg.docs_per_entity)
    try:  # created only once the settings, the KB and the corruption are known to be good
        run.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"cannot create the run directory: {e.strerror}", run) from None
    if not joined and not (run / "corruption" / "documents.jsonl").exists():
        save_corruption(cor, refuse_links_in(run / "corruption"))  # no link inside carries a file out of the run
    facts = fact_probes(kb, closure.atoms, cor.facts, cfg.n_random, cfg.seed)
    judge = Judge.for_kb(kb, [c.injected_value for c in cor.facts])
    retain, retain_facts = retain_texts(kb, cor, cfg.n_retain, cfg.seed)
    record = {
        "protocol": "restor",
        "identity": identity,
        "config": asdict(cfg),
        "kb": str(kb.source),
        "preset": cfg.resolved_preset(),
        "n_facts": len(facts),
        "n_corrupted": len(cor.facts),
        "n_corrupted_people": len({c.subject for c in cor.facts}),
        "n_documents": len(cor.documents),
        "retain_facts": [list(k) for k in retain_facts],
        "n_retain_docs": len(retain),
        "closure_size": len(closure),
    }
    if not kb.schema.is_family:  # the schema's name: the report says entities, not people
        record["schema"] = kb.schema.name
        record["functional"] = list(functional_relations(kb.schema))  # the report names them
    record["history"] = old_record.get("history", []) + [history_entry({}, methods=cfg.methods, targeted=cfg.targeted)]
    record["provenance"] = provenance(resolve_device(cfg.device))
    if not joined:
        write_json(RunDir(run).config, record)
    log(
        f"KB {kb.source}: {len(facts)} facts; F' = {len(cor.facts)} facts of "
        f"{record['n_corrupted_people']} {'entities' if 'schema' in record else 'people'}; {len(cor.documents)} documents (k_context {cfg.context})"
    )
    probes = run / "probes"

    refuse_links(probes).mkdir(exist_ok=True)
    if not joined and not (probes / "facts.jsonl").exists():
        write_facts(probes / "facts.jsonl", facts)
    confirm_run(run)  # the run is accepted: the command line writes RUN_DIR/config.yaml
    return _Setup(kb, set(closure.atoms), cor, facts, judge, retain, joined)


def _probe_base(
    cfg: RestorConfig, s: _Setup, probes: Path, dirs: dict[str, Path], log
) -> tuple[dict[str, list[dict]], list[FactProbe]]:
    """Stage 3: probe the clean and corrupted models (rows and belief analyses), then their log-probabilities over
    A = {clean right, corrupted wrong}. Returns the probe rows per model and the facts of A."""

    base_rows = {}
    for name, off in (("clean", 1), ("corrupted", 2)):
        p = probes / f"{name}.json"
        if p.exists():  # checked, not trusted: one row object per fact of probes/facts.jsonl
            doc = read_json(p)
            rows = doc.get("rows") if isinstance(doc, dict) else None
            if not isinstance(rows, list) or len(rows) != len(s.facts) or not all(isinstance(r, dict) for r in rows):
                raise InputError(
                    f"not a probe file of this run (expected rows: one object per fact, "
                    f"{len(s.facts)}); delete it and rerun to probe again",
                    p,
                )
            base_rows[name] = rows
            continue
        log(f"stage 3/4: probing the {name} model")
        lm = load_model(_spec_for(cfg, str(dirs[name])))
        rows, secs = _probe_model(cfg, _predictor(lm), s.facts, s.judge, off)
        base_rows[name] = rows
        write_json(p, {"rows": rows, "seconds_probe": secs, "beliefs": _beliefs(cfg, s, rows)})
    facts_a = [s.facts[i] for i in _set_a(base_rows["clean"], base_rows["corrupted"])]
    for name in ("clean", "corrupted"):
        p = probes / f"{name}.json"
        doc = read_json(p)
        if "logprobs_A" not in doc:
            lm = load_model(_spec_for(cfg, str(dirs[name])))
            doc["logprobs_A"] = candidate_logprobs(_predictor(lm), facts_a)
            write_json(p, doc)
    for name in ("clean", "corrupted"):
        acc = summarize_model(s.facts, base_rows[name])["all"]
        log(f"{name} model: accuracy {acc['accuracy']:.2f}% ({acc['injected']:.2f}% answered with the injected value)")
    return base_rows, facts_a


def _beliefs(cfg: RestorConfig, s: _Setup, rows: list[dict]) -> dict:
    return belief_analysis(s.kb, belief_triples(s.kb, s.facts, rows), s.true_closure, s.corruption.facts, cfg.rules)


def _pct(v) -> str:
    return "–" if v is None else f"{v:.2f}%"
