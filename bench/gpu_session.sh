#!/bin/bash
# The CUDA checks of one GPU lease, as one script (bench/RESULTS.md, "On a GPU"):
#   1. the suite with `--device cuda` (every neural test on the GPU), in the background;
#   2. README's pretrained-model job: finetune SmolLM2-135M on EDU-RELAT, then README's Table 1 grid (11 targets,
#      six methods) twice, with the held-out forms restricted to paraphrases (run A, as the CPU re-run) and with
#      today's default held-out forms (run B). Each run is shared by $K workers, every one started with the same
#      `dukb evaluate ... --resume` (the first owns the run, the others join it: README, "Work units any launcher
#      can run").
# Everything it leaves is under $OUT: log.txt, tests.log, and one .tgz per run directory (results.jsonl,
# config.json, sets.json, report.md, ...; the models stay behind), written even when the time budget $T runs out.
#
# Usage (repository root):  OUT=/tmp/out KB=../shared/edu-relat bash bench/gpu_session.sh
# Environment: OUT (required), KB (EDU-RELAT folder), MODEL (smollm2-135m), DEVICE (cuda), DTYPE (float32),
#   K (workers per run, 5), T (seconds for the whole script, 520), TESTS (pytest arguments, "" skips the suite;
#   default: the modules that import conftest's DEVICE, in 6 processes: needs pytest-xdist, which the GPU image has),
#   GRID (the evaluate options after --methods), NT (targets, 11).
set -u
: "${OUT:?set OUT}" "${KB:=../shared/edu-relat}" "${MODEL:=smollm2-135m}" "${DEVICE:=cuda}" "${DTYPE:=float32}"
: "${K:=5}" "${T:=520}" "${NT:=11}"
# the test modules whose neural tests follow --device (tests/conftest.py's DEVICE)
: "${TESTS=-q -n 6 -p no:cacheprovider $(grep -rlE 'from (tests\.)?conftest import.*DEVICE' tests | grep -v conftest.py | tr '\n' ' ')}"
: "${GRID=--methods ga,npo,tv,whp,du_npo_gdr,du_cl --grid ga=1,4,16,64,256 --grid npo=2,8,32,128 --grid tv=1,10 --grid whp=10,100 --grid du_npo_gdr=2,6,16 --grid du_cl=4,8,16}"
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false
mkdir -p "$OUT" runs
T0=$(date +%s)
left() { echo $(( T - ($(date +%s) - T0) )); }
log() { echo "[$(( $(date +%s) - T0 )) s] $*" >> "$OUT/log.txt"; }
dukb() { python3 -m dukb.cli.main "$@"; }
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1
  python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.is_available() and torch.cuda.get_device_name())"
  nproc; } >> "$OUT/log.txt" 2>&1

pack() {  # the run directories as they stand, the models left out
  for r in A B; do
    [ -d "runs/gpu-$r" ] && dukb report "runs/gpu-$r" >> "$OUT/log.txt" 2>&1
    [ -d "runs/gpu-$r" ] && tar czf "$OUT/run$r.tgz" -C runs "gpu-$r"
  done
  [ -d runs/gpu-ft ] && tar czf "$OUT/finetune.tgz" -C runs --exclude='*.safetensors' gpu-ft
}
trap pack EXIT

if [ -n "$TESTS" ]; then
  ( timeout $(( $(left) - 25 )) python3 -m pytest $TESTS --device "$DEVICE" > "$OUT/tests.log" 2>&1
    echo "pytest rc=$? after $(( $(date +%s) - T0 )) s" >> "$OUT/tests.log" ) &
fi

if [ ! -f runs/gpu-ft/model.safetensors ]; then  # a second call on the same machine reuses the finetuned model
  log "finetune $MODEL on $DEVICE"
  timeout $(( $(left) - 40 )) python3 -m dukb.cli.main finetune --kb "$KB" --model "$MODEL" -o runs/gpu-ft \
    --device "$DEVICE" --dtype "$DTYPE" >> "$OUT/log.txt" 2>&1
  log "finetune rc=$?"
fi

start_run() {  # $1: run name; the rest: extra evaluate options
  local name=$1; shift
  for i in $(seq "$K"); do
    ( timeout $(( $(left) - 30 )) python3 -m dukb.cli.main evaluate --kb "$KB" --finetuned runs/gpu-ft \
        --n-targets "$NT" $GRID "$@" -o "runs/gpu-$name" --device "$DEVICE" --dtype "$DTYPE" --resume \
        > "runs/w$name$i.log" 2>&1
      echo "worker $name$i rc=$? at $(( $(date +%s) - T0 )) s" >> "$OUT/log.txt" ) &
    sleep 3
  done
}
if [ -f runs/gpu-ft/model.safetensors ]; then
  log "run A: held-out forms = paraphrase"; start_run A --heldout-forms paraphrase
  log "run B: the default held-out forms"; start_run B
fi
wait  # every worker and the suite stop by their own timeouts, inside $T
for f in runs/w*.log; do [ -f "$f" ] && { echo "== $f"; tail -4 "$f"; } >> "$OUT/log.txt"; done
log "end"
