#!/usr/bin/env bash
# Scaling curves on a machine with many cores:
# - overlap-report on a SYNTHETIC job of 64 rank traces, with 1, 2, 4, 8 and 16 workers,
#   local processes (--jobs W) and a Dask LocalCluster (--scheduler): $OUT/scaling.json and $OUT/scaling.txt;
# - one trace decoded by 1, 2, 4, 8 and 16 processes (bench.py --only decoders; HTA's real trace too when
#   HTA_TRACE names it; SYNTHETIC traces of DECODER_EVENTS events): $OUT/decoders.json and $OUT/decoders.txt;
# - with PARTS including timeline: where the time of the 64-rank job goes with each number of workers
#   (scripts/worker_timeline.py, REPEAT times each): $OUT/timeline.txt.
#
#   OUT=/tmp/scaling bash scripts/scaling.sh
#
# Python packages traceprobe needs beyond numpy/pandas/typer/rich (dask, distributed, msgspec, ...) may travel
# as wheels in .whl/ (python3 -m pip download ... -d .whl); they are installed into /tmp/site when present.
# Settings: RANKS (64), EVENTS per rank (100000), WORKERS (1,2,4,8,16), REPEAT (2), DECODER_EVENTS (1000000,5000000),
# HTA_TRACE (a path to df_index_resolver.json.gz), PARTS (ranks,decoders; also: timeline).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/traceprobe-scaling}
mkdir -p "$OUT"
export PYTHONPATH=$PWD
if compgen -G ".whl/*.whl" > /dev/null && [ -z "${NO_WHEELS:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:$PWD
fi
{ nproc; python3 --version; python3 -c "import os, platform; print(platform.platform(), os.cpu_count(), 'CPUs')"; } > "$OUT/machine.txt" 2>&1
if [[ ",${PARTS:-ranks,decoders}," == *,ranks,* ]]; then
python3 scripts/bench.py --only ranks --ranks "${RANKS:-64}" --rank-events "${EVENTS:-100000}" --workers "${WORKERS:-1,2,4,8,16}" \
  --repeat "${REPEAT:-2}" --workdir /tmp/traceprobe-bench --json-out "$OUT/scaling.json" 2>&1 | tee "$OUT/scaling.txt"
fi
if [[ ",${PARTS:-ranks,decoders}," == *,decoders,* ]]; then
python3 scripts/bench.py --only decoders --decoders "${WORKERS:-1,2,4,8,16}" --decoder-events "${DECODER_EVENTS:-1000000,5000000}" \
  ${HTA_TRACE:+--hta-trace "$HTA_TRACE"} --repeat "${REPEAT:-2}" --workdir /tmp/traceprobe-bench --json-out "$OUT/decoders.json" 2>&1 \
  | tee "$OUT/decoders.txt"
fi
if [[ ",${PARTS:-ranks,decoders}," == *,timeline,* ]]; then
  job=/tmp/traceprobe-bench/job-${RANKS:-64}x${EVENTS:-100000}
  [ -d "$job" ] || python3 scripts/synth_trace.py --ranks "${RANKS:-64}" -n "${EVENTS:-100000}" -o "$job" -q
  for r in $(seq "${REPEAT:-2}"); do
    for w in $(echo "${WORKERS:-1,2,4,8,16}" | tr , ' '); do
      echo "== workers $w, run $r"
      python3 scripts/worker_timeline.py "$job" --jobs "$w"
    done
  done 2>&1 | tee "$OUT/timeline.txt"
fi
