#!/bin/bash
# The neural test modules that follow conftest's --device (they import DEVICE), on a lent GPU machine, in parallel
# processes under a time limit. Usage (repository root): OUT=/tmp/out [T=420] [N=12] bash bench/gpu_tests.sh
# dukb's dependencies travel as wheels in .whl/ (see bench/gpu_check.sh); the log is OUT/tests.log.
set -u
: "${OUT:?set OUT}" "${T:=420}" "${N:=12}"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    >>"$OUT/install.log" 2>&1 && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
mods=$(grep -rlE "from (tests\.)?conftest import.*DEVICE" tests | grep -v conftest.py | sort)
timeout "$T" python3 -m pytest -q -n "$N" -p no:cacheprovider $mods --device cuda >"$OUT/tests.log" 2>&1
echo "pytest rc=$? (T=$T, N=$N)" >>"$OUT/tests.log"
tail -40 "$OUT/tests.log"
