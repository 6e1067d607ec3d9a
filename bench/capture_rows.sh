#!/usr/bin/env bash
# Capture the rows a user sees, to show that a refactor changes none of them (issue 40: "capture the rows of the main
# job, of one run of each protocol on the demo KB and of bench/method_snapshot.py, and show them equal afterwards").
#
#   bench/capture_rows.sh CHECKOUT OUT [--no-main|--main-only] [--only STEP,...] [--wait]
#   python bench/compare_rows.py OUT_BEFORE OUT_AFTER [--skip main]
#
# Run it with the project's environment active (`dukb` on PATH). CHECKOUT is the source tree to run (put first on
# PYTHONPATH: `dukb` and python import its code); OUT a new folder. Every run is single-threaded (OMP_NUM_THREADS=1)
# on the CPU, so two captures of the same code are bit-identical; the thread count changes the numbers (a main job
# at OMP_NUM_THREADS=2 gives other rows), so never compare captures made with different ones.
#   (a) the main job, `dukb evaluate -o OUT/main` (the built-in default; 25 min on an idle core, over an hour on a
#       busy machine; `dukb evaluate -o OUT/main --resume` in another shell joins it as a second worker), started in the
#       background with nohup (OUT/main.log, OUT/main.pid; OUT/main.rc when it ends);
#   (b) one small run of each protocol on the demo KB, one after the other: a finetuned demo model (OUT/demo_model),
#       evaluate (2 targets, ga and tv, with the quant16 and relearn attacks), unlearn (one target), attack (relearn,
#       quant16, incontext on the finetuned model), rwku, muse, control and restor, with the tests' small settings;
#   (c) `python CHECKOUT/bench/method_snapshot.py OUT/method_snapshot.json`.
# Only options both the code before issue 40 (b542e87) and after it accept are used. Each step's output goes to
# OUT/logs/STEP.log; OUT/times.tsv records step, exit status and seconds; a step that succeeded is skipped when the
# script runs again. --no-main skips (a), --main-only does only (a), --only STEP,... runs only those small steps (not
# the main job), --wait waits for the main job before returning. Exit status: 0 when every small step exited 0, else 1.
set -u

usage() { echo "usage: $0 CHECKOUT OUT [--no-main|--main-only] [--only STEP,...] [--wait]" >&2; exit 2; }
[ $# -ge 2 ] || usage
ARGS="$*"
CHECKOUT=$(cd "$1" && pwd) || usage
OUT=$2
shift 2
MAIN=1 SMALL=1 WAIT=0 ONLY=
while [ $# -gt 0 ]; do
  case $1 in
    --no-main) MAIN=0 ;;
    --main-only) SMALL=0 ;;
    --only) [ $# -ge 2 ] || usage; ONLY=,$2,; MAIN=0; shift ;;
    --wait) WAIT=1 ;;
    *) usage ;;
  esac
  shift
done
mkdir -p "$OUT/logs" && OUT=$(cd "$OUT" && pwd)
cd "$OUT" || exit 2  # not the caller's folder: python -c puts the working folder before PYTHONPATH
export PYTHONPATH=$CHECKOUT OMP_NUM_THREADS=1
command -v dukb > /dev/null || { echo "capture_rows: no dukb on PATH (activate the environment)" >&2; exit 2; }
DUKB=(dukb)  # the console script of the active environment; PYTHONPATH makes it run CHECKOUT's code
dukb_file=$(python -c "import dukb; print(dukb.__file__)")
[[ $dukb_file == "$CHECKOUT/"* ]] \
  || { echo "capture_rows: dukb imports from $dukb_file, not $CHECKOUT" >&2; exit 2; }
# the checkout(s) a capture ran, appended (a step rerun with --only may run another): compare_rows reads every line
# that starts with "/" as a checkout path
{ echo "$CHECKOUT"; echo "  $(git -C "$CHECKOUT" rev-parse HEAD) $(date -u +%FT%TZ) $ARGS"
  git -C "$CHECKOUT" status --short | head -20 | sed 's/^/  /'; } >> "$OUT/checkout.txt" 2>&1

if [ $MAIN = 1 ]; then
  if [ -e "$OUT/main" ]; then echo "capture_rows: $OUT/main exists; not started again" >&2
  else
    nohup bash -c 's=$(date +%s); "$@" evaluate -o "'"$OUT"'/main"; rc=$?; echo $rc > "'"$OUT"'/main.rc";
                   printf "main\t%s\t%s\n" $rc $(( $(date +%s) - s )) >> "'"$OUT"'/times.tsv"' _ "${DUKB[@]}" \
      > "$OUT/main.log" 2>&1 < /dev/null &
    echo $! > "$OUT/main.pid"
    echo "main job started (pid $!), log $OUT/main.log"
  fi
fi

FAILED=0
step() {  # step NAME COMMAND...: run it once, log and time it; skipped when OUT/logs/NAME.ok exists
  local name=$1; shift
  if [ -n "$ONLY" ] && [[ $ONLY != *",$name,"* ]]; then return 0; fi
  if [ -e "$OUT/logs/$name.ok" ]; then echo "$name: done before, skipped"; return 0; fi
  local s=$(date +%s)
  echo "$(date -u +%H:%M:%S) $name: $*"
  "$@" > "$OUT/logs/$name.log" 2>&1
  local rc=$? t=$(( $(date +%s) - s ))
  printf "%s\t%s\t%s\n" "$name" $rc $t >> "$OUT/times.tsv"
  echo "$(date -u +%H:%M:%S) $name: exit $rc in ${t}s"
  if [ $rc = 0 ]; then touch "$OUT/logs/$name.ok"; else FAILED=1; tail -5 "$OUT/logs/$name.log"; fi
}

if [ $SMALL = 1 ]; then
  D=(--device cpu)
  MODEL=$OUT/demo_model
  step finetune "${DUKB[@]}" finetune --kb demo -o "$MODEL" "${D[@]}"
  step evaluate "${DUKB[@]}" evaluate --kb demo --finetuned "$MODEL" -o "$OUT/evaluate" --n-targets 2 \
    --methods ga,tv --grid ga=1,4,16 --grid tv=0.5,5 --attacks quant16,relearn:steps=2 "${D[@]}"
  step unlearn "${DUKB[@]}" unlearn --kb demo --model "$MODEL" --method ga --target-id 6 --grid 1,16 \
    -o "$OUT/unlearn" "${D[@]}"
  mkdir -p "$OUT/attack"
  step attack "${DUKB[@]}" attack --kb demo --model "$MODEL" --reference "$MODEL" --target-id 6 \
    --attacks relearn:steps=2,quant16,incontext -o "$OUT/attack/row.json" "${D[@]}"
  step rwku "${DUKB[@]}" rwku --kb demo -o "$OUT/rwku" --n-targets 2 --methods ga,npo_gdr --grid ga=2,8 \
    --grid npo_gdr=32 --batch-sizes 2 "${D[@]}"
  step muse "${DUKB[@]}" muse --kb demo -o "$OUT/muse" --methods ga,npo_gdr --curve-methods ga --scale-sizes 1,2 \
    --grid ga=2,8 --grid npo_gdr=8 --holdout 0.2 --bootstrap 200 "${D[@]}"
  step control "${DUKB[@]}" control --kb demo --finetuned "$MODEL" -o "$OUT/control" --methods ga_gdr,po \
    --ratios 0.05 --steps 4 --coarse 2 --fine 4 --retain-eval 12 "${D[@]}"
  step restor "${DUKB[@]}" restor --kb demo -o "$OUT/restor" --samples 1 --docs-per-entity 12 --n-retain 16 \
    --n-random 5 --templates 1 --clean-epochs 80 --corrupt-lr 5e-3 --corrupt 0.15 "${D[@]}"  # demo: 5 of 32 facts
  step method_snapshot python "$CHECKOUT/bench/method_snapshot.py" "$OUT/method_snapshot.json"
fi

if [ $MAIN = 1 ] && [ $WAIT = 1 ] && [ -e "$OUT/main.pid" ]; then
  echo "waiting for the main job (pid $(cat "$OUT/main.pid"))"
  while kill -0 "$(cat "$OUT/main.pid")" 2>/dev/null; do sleep 30; done
  echo "main job: exit $(cat "$OUT/main.rc" 2>/dev/null || echo '?')"
fi
exit $FAILED
