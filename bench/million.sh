#!/bin/sh
# The million-people figures of bench/RESULTS.md ("A million people"): `dukb closure` and `dukb mdus --method exact`
# (20 targets) on a generated KB of 1,000,000 people, each under /usr/bin/time -v (wall, CPU, peak RSS).
# usage: bench/million.sh CHECKOUT LABEL [KB_DIR]   (CHECKOUT: a dukb checkout, put first on PYTHONPATH; run two
# checkouts alternately for a before/after; the KB is generated once into KB_DIR, default /tmp/dukb-1m)
# Threads: the default (every CPU); set DUKB_NUM_THREADS=1 for the one-thread figures.
set -eu
W=$1; L=$2; KB=${3:-/tmp/dukb-1m}
export PYTHONPATH=$W
[ -f "$KB/relationships.csv" ] || dukb generate --people 1000000 --seed 0 -o "$KB"
[ -f "$KB.targets" ] || python -c "import random; print('\n'.join(map(str, random.Random(0).sample(range(4188471), 20))))" > "$KB.targets"
for cmd in closure mdus; do
    echo "== $L $cmd $(date -u +%T) load: $(cut -d' ' -f1-3 /proc/loadavg) threads: ${DUKB_NUM_THREADS:-default}"
    if [ $cmd = closure ]; then set -- closure --kb "$KB" -o "/tmp/million-$L.csv"
    else set -- mdus --kb "$KB" --targets-file "$KB.targets" --method exact -o "/tmp/million-$L.json"; fi
    /usr/bin/time -v dukb "$@" 2>&1 >/dev/null | grep -E "Elapsed|User time|System time|Maximum resident|Exit status"
done
