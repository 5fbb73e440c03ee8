#!/usr/bin/env bash
# Record the busy-time scenarios (scripts/efficiency_scenarios.py) on a GPU machine and pack them under OUTDIR.
# Usage: bash scripts/efficiency_session.sh OUTDIR [SCENARIO...]   (default: every scenario)
set -u
out=${1:?OUTDIR}; shift
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
scenarios=${*:-$(python3 scripts/efficiency_scenarios.py --list)}
mkdir -p "$out/eff"
for s in $scenarios; do
  start=$(date +%s)
  timeout 240 python3 scripts/efficiency_scenarios.py --scenario "$s" --out "$out/eff/$s" > "$out/eff/$s.log" 2>&1
  echo "$s: exit $? in $(( $(date +%s) - start )) s"; tail -n 1 "$out/eff/$s.log" | cut -c1-600
done
gzip -f "$out"/eff/*/*.json 2>/dev/null; gunzip -f "$out"/eff/*/fix.json.gz 2>/dev/null
(cd "$out" && tar czf eff.tar.gz eff && rm -r eff && ls -la)
