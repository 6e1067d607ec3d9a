"""Loading a peft adapter that ``--save-models`` wrote under ``--lora-r``: its base model, then the adapter merged
into it, so the result is an ordinary model (:func:`load_adapter`). :func:`dukb.neural.models.load_model` calls it
for a directory whose record says ``"adapter": true`` and passes itself as ``load_base``, so this module imports
nothing from :mod:`dukb.neural.models` (no import cycle).

Source: Hu et al. 2022 (LoRA), Eq. 3: W = W0 + BA, merged.
"""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

from dukb import InputError


def load_adapter(spec, rec: dict, load_base, record_name: str = "dukb_model.json"):
    """Load a directory holding a peft adapter and the record naming its base (``"base"``: the finetuned model
    directory it was trained on): the base through ``load_base``, then the adapter merged into it (peft's
    ``PeftModel.from_pretrained`` and ``merge_and_unload``).

    Args:
        spec: the :class:`dukb.neural.spec.ModelSpec` of the adapter directory (its dtype, device and prompt apply
            to the base).
        rec: the directory's record (:func:`dukb.neural.modelrecord.read_model_record`), with ``"adapter": true``.
        load_base: ``load_base(spec) -> LoadedModel`` (:func:`dukb.neural.models.load_model`).
        record_name: the record's file name (:data:`dukb.neural.modelrecord.MODEL_RECORD`), named in errors.

    Returns:
        the base's :class:`dukb.neural.spec.LoadedModel` with the merged model and ``spec``.

    Raises:
        InputError: the record names no base directory or one that no longer exists; the base cannot be loaded;
            the adapter cannot be loaded or does not fit the base (the adapter file named).

    Source: Hu et al. 2022 (LoRA), Eq. 3: W = W0 + BA, merged.
    """
    path = Path(spec.name_or_path)
    base = rec.get("base")
    if not base or not Path(base).is_dir():
        raise InputError(
            f"model record: this peft adapter's base model {base!r} is not a directory (it was "
            "saved inside the run directory's finetuned/)",
            path / record_name,
        )
    lm = load_base(dataclasses.replace(spec, name_or_path=base))
    try:
        from peft import PeftModel

        with warnings.catch_warnings():  # peft calls a deprecated transformers API
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
            model = PeftModel.from_pretrained(lm.model, str(path)).merge_and_unload()
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except BaseException as e:  # noqa: BLE001 - as models._loading: any library error becomes one line
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
        raise InputError(
            f"cannot load the peft adapter onto its base {base}: {first}", path / "adapter_config.json"
        ) from None
    model.eval()
    return dataclasses.replace(lm, model=model, spec=spec)


__all__ = ["load_adapter"]
