#!/bin/bash
# The GPU checks of issue 42 item 9 in one command (bench/gpu_check.py): install what is missing, then the checks
# under a time limit. Usage (repository root): OUT=/tmp/out [T=540] bash bench/gpu_check.sh [--quick] [--parts ...]
# dukb's own dependencies (clingo, ortools, gguf, rouge-score, torchao, nltk) and, where a wheel fits a call,
# bitsandbytes travel as wheels in .whl/ (bench/RESULTS.md, "On a GPU"); vllm (hundreds of MiB) needs a registry.
set -u
: "${OUT:?set OUT}" "${T:=540}"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    >>"$OUT/install.log" 2>&1 && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
for p in vllm bitsandbytes; do  # from the registry where one is reachable; the parts skip cleanly without them
  python3 -c "import $p" 2>/dev/null && continue
  timeout 600 python3 -m pip install -q --retries 0 --timeout 10 "$p" >>"$OUT/install.log" 2>&1 \
    || echo "$p: not installed (no registry reachable)" >>"$OUT/install.log"
done
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >>"$OUT/install.log" 2>&1
timeout "$T" python3 bench/gpu_check.py --out "$OUT" --work /tmp/gpu_check_work --budget $((T - 15)) "$@" 2>&1 | tee "$OUT/gpu_check.log"
