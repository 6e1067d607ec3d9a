"""Saving the unlearned models of a run (``--save-models none|best|all``, every protocol) as model directories dukb and
Hugging Face load.

Each saved model is an HF directory under RUN_DIR/models/<unit>/<setting>/ (a peft adapter under ``--lora-r``, whose
record names the model it applies to), with :data:`dukb.neural.modelrecord.MODEL_RECORD` recording, beyond the usual
prompt, family, base and KB, the row it belongs to: the protocol's fields of the row (target or targets, method,
setting, ...), the KB's hash and the row's key. ``all`` keeps every row's model; ``best`` keeps, per unit, the setting
the protocol's headline rule selects; ``none`` saves nothing. What a unit is, how a setting's folder is named and what
``best`` selects are the protocol's (:class:`SaveLayout`, from :meth:`dukb.neural.protocols.base.Protocol.save_layout`);
this module knows no protocol. A model that is not its weights alone (WHP's combination of two models' logits, Eldan
and Russinovich 2023, Eq. 1; a prompt-level method's prompt; a steering method's forward hooks) is not saved.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dukb.neural.metrics.summary import short_number
from dukb.neural.modelbuild import save_model
from dukb.neural.modelrecord import MODEL_RECORD
from dukb.neural.run.files import refuse_links_in
from dukb.neural.spec import LoadedModel

#: the values of ``--save-models``
SAVE_MODES = ("none", "best", "all")
#: where the saved models go, under the run directory
MODELS_DIR = "models"
#: where ``best`` keeps a unit's models until its rows are written, under :data:`MODELS_DIR`
SWEEP_DIR = ".sweep"

SAVE_MODELS_HELP = (
    "Keep the unlearned models as HF directories (a peft adapter under --lora-r) in "
    "RUN_DIR/models/UNIT/SETTING/ with a dukb_model.json naming the row (target, method, setting, KB "
    "hash, row key), for `dukb probe --model`, `dukb attack` or another evaluation. none: save "
    "nothing; all: every row's model; best: per unit the setting the protocol's headline rule selects "
    "(evaluate: per target and method, Recall@Acc>=0.8, none when no setting keeps accuracy >= 0.8; "
    "muse: per request and method, --select; rwku: per request and method, the strongest setting; "
    "control: per ratio, method and control, the calibrated setting, the uncontrolled run's only one; "
    "restor: per method, its only setting). Models that are not their weights alone (whp, icu, repe) "
    "are not saved. Not part of the run identity: a resume may change it and keeps what was saved."
)


def setting_dir(row: dict) -> str:
    """The folder name of a row's setting: ``PARAM=VALUE`` of its swept parameter (e.g. ``steps=2``, ``alpha=0.5``;
    the value its row key holds, so one folder per row of a unit), every character other than letters, digits and
    ``.=+-_`` replaced by ``_``.

    Args:
        row: a result row (``param``, ``setting``).

    Returns:
        str.
    """

    return safe_name(f"{row['param']}={short_number(row['setting'][row['param']])}")


def safe_name(text: str) -> str:
    """``text`` as one folder name: every character other than letters, digits and ``.=+-_`` replaced by ``_``."""
    return re.sub(r"[^A-Za-z0-9.=+_-]", "_", str(text))


@dataclass(frozen=True)
class SaveLayout:
    """What a protocol tells ``--save-models`` about its rows (:meth:`dukb.neural.protocols.base.Protocol.save_layout`).

    Attributes:
        unit: ``unit(row) -> tuple | None``: the folders of the row's selection unit under RUN_DIR/models (e.g.
            ``(target, method)``; each part made a folder name by :func:`safe_name`); None: the row has no unlearned
            model (a reference row).
        select: ``select(rows) -> dict | None``: the row ``best`` keeps among every row of one unit written so far
            (None: none selected, nothing kept).
        record: ``record(row) -> dict``: the fields of the row its model's record holds (target or targets, method,
            setting, ...).
        setting: ``setting(row) -> str``: the folder of the row's setting in its unit (default :func:`setting_dir`).
        best: what ``best`` keeps, in words (the docs' table and the log).
    """

    unit: Callable[[dict], tuple | None]
    select: Callable[[list[dict]], dict | None]
    record: Callable[[dict], dict]
    setting: Callable[[dict], str] = setting_dir
    best: str = ""


def save_unlearned(lm, model, out: Path, kb, fields: dict, key, merge: bool = False) -> Path:
    """Save one unlearned model (``model``: the weights a row was probed on) with its record.

    A peft model is saved as its adapter (``adapter_config.json``, ``adapter_model.safetensors``) and the
    tokenizer, its record's ``base`` naming the model it applies to (``lm.spec.name_or_path``); with ``merge`` (the
    model it applies to is on no disk, e.g. one a sequence of requests continued from) a merged copy is saved
    instead; any other model through :func:`dukb.neural.modelbuild.save_model`, which never merges it. The model
    is not changed.

    Args:
        lm: the :class:`dukb.neural.spec.LoadedModel` unlearning started from (its tokenizer, spec and prompt
            presets).
        model: the unlearned model (``Predictor.model``: a transformers model or a peft model).
        out: the directory (created; files of the same names are overwritten).
        kb: the :class:`dukb.kb.KB` of the run (recorded as ``kb`` and ``kb_sha256``).
        fields: what the record holds of the row (e.g. ``target``, ``method``, ``setting``: :attr:`SaveLayout.record`).
        key: the row's key in results.jsonl (a tuple; recorded as a list).
        merge: save a peft model merged (a copy) rather than as an adapter.

    Returns:
        ``out``.

    Raises:
        OSError: ``out`` cannot be written.
    """

    if hasattr(model, "peft_config") and merge:
        model = copy.deepcopy(model).merge_and_unload()
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
    rec.update(
        extra, **json.loads(json.dumps(fields, default=str)), row_key=json.loads(json.dumps(list(key), default=str))
    )
    (out / MODEL_RECORD).write_text(json.dumps(rec, indent=2))
    return out


def not_weights_alone(pred, lm) -> str | None:
    """Why a row's unlearned model is not its weights alone, or None: it combines a second model's logits (WHP),
    asks with other prompt tags than ``lm``'s (a prompt-level method, e.g. ICU), or runs forward hooks (a steering
    method, e.g. RepE). Saving its weights would save another model than the one its row scored.

    Args:
        pred: the row's :class:`dukb.neural.probe.Predictor`; lm: the model unlearning started from.
    """
    if pred.aux_model is not None:
        return "combines two models' logits"
    if getattr(lm, "tags", None) is not None and pred.tags != lm.tags:
        return "is a prompt, not weights"
    if any(getattr(m, "_forward_hooks", None) or getattr(m, "_forward_pre_hooks", None) for m in pred.model.modules()):
        return "runs forward hooks on the weights"
    return None


class ModelSaver:
    """What ``--save-models`` keeps of a run's rows (see the module docstring).

    Args:
        run: the run directory (Path).
        mode: one of :data:`SAVE_MODES`.
        kb: the run's :class:`dukb.kb.KB`.
        key: ``key(row) -> tuple``, the results file's row key.
        layout: the protocol's :class:`SaveLayout`.
        log: callable(str) for one-line notes.
    """

    def __init__(self, run: Path, mode: str, kb, key, layout: SaveLayout, log=print):
        self.root = Path(run) / MODELS_DIR
        self.mode, self.kb, self.key, self.layout, self.log = mode, kb, key, layout, log
        self._said: set = set()
        self._touched: dict[tuple, None] = {}  # the units this invocation saved into (``best``), in order

    def where(self, unit: tuple) -> tuple[Path, Path]:
        """A unit's kept folder and (``best``) its sweep's temporary folder."""
        parts = [safe_name(p) for p in unit]
        return self.root.joinpath(*parts), self.root.joinpath(SWEEP_DIR, *parts)

    def keep(self, row: dict, pred, lm, merge: bool = False) -> None:
        """Save the model of a written row (``pred``: the :class:`dukb.neural.probe.Predictor` it was scored
        with; ``lm``: the model unlearning started from; ``merge``: see :func:`save_unlearned`): under its unit's
        kept folder (``all``) or the sweep's temporary folder (``best``); nothing for ``none``, a row without an
        unlearned model, or a model that is not its weights alone (:func:`not_weights_alone`, said once per
        method)."""
        unit = self.layout.unit(row)
        if self.mode == "none" or unit is None:
            return
        why = not_weights_alone(pred, lm)
        if why is not None:
            if row.get("method") not in self._said:
                self.log(f"--save-models: {row.get('method')} {why}: its settings are not saved")
                self._said.add(row.get("method"))
            return
        kept, sweep = self.where(unit)
        if self.mode == "best":
            self._touched[tuple(unit)] = None
        save_unlearned(
            lm,
            pred.model,
            (kept if self.mode == "all" else sweep) / self.layout.setting(row),
            self.kb,
            self.layout.record(row),
            self.key(row),
            merge=merge,
        )

    def finish(self, rows: list[dict]) -> None:
        """``best``: once a work unit's rows are written, for each selection unit saved into since, keep the
        setting :attr:`SaveLayout.select` chooses among the unit's rows in ``rows`` (every row of the run so far)
        and delete the others; a selected setting whose model was not saved in this invocation (its row came from
        an earlier one) is said in one line."""
        if self.mode != "best":
            return
        for unit in list(self._touched):
            del self._touched[unit]
            mine = [r for r in rows if (u := self.layout.unit(r)) is not None and tuple(u) == unit]
            kept, sweep = self.where(unit)
            chosen = self.layout.select(mine) if mine else None
            if chosen is not None:
                name = self.layout.setting(chosen)
                if (sweep / name).is_dir():
                    shutil.rmtree(kept, ignore_errors=True)  # a setting kept by an earlier invocation
                    kept.mkdir(parents=True)
                    (sweep / name).rename(kept / name)
                elif not (kept / name).is_dir():
                    self.log(
                        f"--save-models best: {'/'.join(map(str, unit))}: the selected setting {name} was "
                        "computed by an earlier invocation and is not saved"
                    )
            shutil.rmtree(sweep, ignore_errors=True)
            for empty in sweep.parents:  # the unit's empty folders under RUN_DIR/models/.sweep, then .sweep
                if empty == self.root:
                    break
                try:
                    empty.rmdir()
                except OSError:  # not empty: another unit's sweep is under way
                    break


__all__ = [
    "MODELS_DIR",
    "SAVE_MODES",
    "SAVE_MODELS_HELP",
    "ModelSaver",
    "SaveLayout",
    "not_weights_alone",
    "safe_name",
    "save_unlearned",
    "setting_dir",
]
