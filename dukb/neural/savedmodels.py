"""Saving the unlearned models of a run (``--save-models none|best|all``) as model directories dukb and Hugging Face
load.

Each saved model is an HF directory under RUN_DIR/models/<target>/<method>/<setting>/ (a peft adapter under
``--lora-r``, whose record names the finetuned base it applies to), with :data:`dukb.neural.modelrecord.MODEL_RECORD`
recording, beyond the usual prompt, family, base and KB, the row it belongs to: target, method, setting, the KB's
hash and the row's key. ``all`` keeps every row's model; ``best`` keeps, per (target, method), the setting the
headline rule selects (:func:`dukb.neural.metrics.summary.best_setting`, Recall@Acc≥0.8); ``none`` saves nothing.
WHP's unlearned model is a logit combination of two models (Eldan and Russinovich 2023, Eq. 1), not one set of
weights: its settings are not saved.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from dukb.neural.metrics.summary import ACCURACY, best_setting, scored, short_number, strength
from dukb.neural.modelbuild import save_model
from dukb.neural.modelrecord import MODEL_RECORD
from dukb.neural.run.files import refuse_links_in
from dukb.neural.spec import LoadedModel

#: the values of ``--save-models``
SAVE_MODES = ("none", "best", "all")
#: where the saved models go, under the run directory
MODELS_DIR = "models"
#: where ``best`` keeps a (target, method) sweep's models until its rows are written, under :data:`MODELS_DIR`
SWEEP_DIR = ".sweep"

SAVE_MODELS_HELP = ("Keep the unlearned models as HF directories (a peft adapter under --lora-r) in "
                    "RUN_DIR/models/TARGET/METHOD/SETTING/ with a dukb_model.json naming the row (target, method, "
                    "setting, KB hash, row key), for `dukb probe --model`, `dukb attack` or another evaluation. none: "
                    "save nothing; all: every row's model; best: per target and method the setting the headline "
                    "rule (Recall@Acc>=0.8) selects (none when no setting keeps accuracy >= 0.8). WHP settings "
                    "(two models combined) are not saved. Not part of the run identity: a resume may change it and "
                    "keeps what was saved.")


def setting_dir(row: dict) -> str:
    """The folder name of a row's setting: ``PARAM=VALUE`` of its swept parameter (e.g. ``steps=2``, ``alpha=0.5``;
    the value its row key holds, so one folder per row of a (target, method)), every character other than
    letters, digits and ``.=+-_`` replaced by ``_``.

    Args:
        row: a result row (``param``, ``setting``).

    Returns:
        str.
    """

    text = f"{row['param']}={short_number(row['setting'][row['param']])}"
    return re.sub(r"[^A-Za-z0-9.=+_-]", "_", text)


def save_unlearned(lm, model, out: Path, kb, row: dict, key) -> Path:
    """Save one unlearned model (``model``: the weights a row was probed on) with its record.

    A peft model is saved as its adapter (``adapter_config.json``, ``adapter_model.safetensors``) and the
    tokenizer, its record's ``base`` naming the finetuned model it applies to (``lm.spec.name_or_path``); any other
    model through :func:`dukb.neural.modelbuild.save_model`, which never merges it. The model is not changed.

    Args:
        lm: the finetuned :class:`dukb.neural.spec.LoadedModel` (θ₀: its tokenizer, spec and prompt presets).
        model: the unlearned model (``Predictor.model``: a transformers model or a peft model).
        out: the directory (created; files of the same names are overwritten).
        kb: the :class:`dukb.kb.KB` of the run (recorded as ``kb`` and ``kb_sha256``).
        row: the result row (``target``, ``method``, ``setting``).
        key: the row's key in results.jsonl (a tuple; recorded as a list).

    Returns:
        ``out``.

    Raises:
        OSError: ``out`` cannot be written.
    """
    if hasattr(model, "peft_config"):  # an adapter: saved as one, the base left as it is

        out = refuse_links_in(out)
        out.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(out)
        save_model(LoadedModel(None, lm.tokenizer, lm.tags, lm.spec, lm.device), out, kb=kb, weights=False)
        extra = {"adapter": True, "base": str(Path(lm.spec.name_or_path).resolve())}
    else:
        save_model(LoadedModel(model, lm.tokenizer, lm.tags, lm.spec, lm.device), out, kb=kb)
        extra = {}
    rec = json.loads((out / MODEL_RECORD).read_text())
    rec.update(extra, target=int(row["target"]), method=row["method"], setting=row["setting"],
               row_key=json.loads(json.dumps(list(key), default=str)))
    (out / MODEL_RECORD).write_text(json.dumps(rec, indent=2))
    return out


class ModelSaver:
    """What ``--save-models`` keeps of a run's rows (see the module docstring).

    Args:
        run: the run directory (Path).
        mode: one of :data:`SAVE_MODES`.
        lm: the finetuned :class:`dukb.neural.spec.LoadedModel`.
        kb: the run's :class:`dukb.kb.KB`.
        key: ``key(row) -> tuple``, the results file's row key.
        log: callable(str) for one-line notes.
    """

    def __init__(self, run: Path, mode: str, lm, kb, key, log=print):
        self.root = Path(run) / MODELS_DIR
        self.mode, self.lm, self.kb, self.key, self.log = mode, lm, kb, key, log
        self._whp_said = False

    def where(self, target: int, method: str) -> tuple[Path, Path]:
        """The (target, method)'s kept folder and (``best``) its sweep's temporary folder."""
        return self.root / str(target) / method, self.root / SWEEP_DIR / str(target) / method

    def keep(self, row: dict, pred) -> None:
        """Save the model of a written row (``pred``: the :class:`dukb.neural.probe.Predictor` it was probed
        with): under its kept folder (``all``) or the sweep's temporary folder (``best``); nothing for ``none`` or
        a combination of two models (WHP, said once)."""
        if self.mode == "none":
            return
        if pred.aux_model is not None:
            if not self._whp_said:
                self.log(f"--save-models: {row['method']} combines two models' logits: its settings are not saved")
                self._whp_said = True
            return
        kept, sweep = self.where(row["target"], row["method"])
        base = kept if self.mode == "all" else sweep
        save_unlearned(self.lm, pred.model, base / setting_dir(row), self.kb, row, self.key(row))

    def unit_done(self, target: int, method: str, rows: list[dict]) -> None:
        """``best``: once the (target, method)'s rows are written, keep the setting the headline rule selects among
        ``rows`` (all of the unit's rows) and delete the others; a selected setting whose model was not saved in
        this invocation (its row came from an earlier one) is said in one line."""
        if self.mode != "best":
            return

        kept, sweep = self.where(target, method)
        ok = scored(_frame(rows), ACCURACY)[0] if rows and {"recall", ACCURACY} <= set(rows[0]) else None
        recs = sorted(ok.to_dict("records"), key=strength) if ok is not None else []
        i = best_setting([(r["recall"], r[ACCURACY]) for r in recs]) if recs else None
        if i is not None:
            chosen = sweep / setting_dir(recs[i])
            if chosen.is_dir():
                shutil.rmtree(kept, ignore_errors=True)  # a setting kept by an earlier invocation
                kept.mkdir(parents=True)
                chosen.rename(kept / chosen.name)
            elif not (kept / chosen.name).is_dir() and recs[i]["base_method"] != "whp":
                self.log(f"--save-models best: target {target} {method}: the selected setting {chosen.name} was "
                         "computed by an earlier invocation and is not saved")
        shutil.rmtree(sweep, ignore_errors=True)
        for empty in (sweep.parent, sweep.parent.parent):  # RUN_DIR/models/.sweep/TARGET, then .sweep
            try:
                empty.rmdir()
            except OSError:  # not empty: another unit's sweep is under way
                break


def _frame(rows: list[dict]):
    import pandas as pd

    return pd.DataFrame(rows)


__all__ = ["MODELS_DIR", "SAVE_MODES", "SAVE_MODELS_HELP", "ModelSaver", "save_unlearned",
           "setting_dir"]
