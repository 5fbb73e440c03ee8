#!/usr/bin/env bash
# Run the scenarios of scripts/matrix_scenarios.py one after another under torchrun, each into OUTDIR/NAME
# (traces; its output in OUTDIR/NAME.log), print every injected.json, then gather them into OUTDIR/injected.jsonl.
# Usage: bash scripts/matrix_session.sh OUTDIR [SCENARIO...]     (no SCENARIO: all of them)
#   WORLD=4       processes per scenario (one GPU each)
#   DEVICE=cuda   or cpu: gloo, tiny sizes, a smoke test
#   PER_RUN=90    seconds before a scenario is stopped
set -u
out=${1:?OUTDIR}; shift
here=$(cd "$(dirname "$0")" && pwd)
world=${WORLD:-4}
device=${DEVICE:-cuda}
# NVLink multicast stays off on shared hosts.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
if [ $# -eq 0 ]; then
  names=$(python3 "$here/matrix_scenarios.py" --list) || exit 1
  set -- $names
fi
mkdir -p "$out"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'
failed=0
for name in "$@"; do
  t0=$(date +%s.%N)
  timeout -k 10 "${PER_RUN:-90}" python3 -m torch.distributed.run --standalone --nproc-per-node "$world" \
    "$here/matrix_scenarios.py" --scenario "$name" --device "$device" --out "$out/$name" > "$out/$name.log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  [ "$rc" = 0 ] || failed=$((failed + 1))
  awk -v n="$name" -v rc="$rc" -v a="$t0" -v b="$t1" 'BEGIN { printf "%-18s exit %3d  %6.1f s\n", n, rc, b - a }'
done
for name in "$@"; do
  f="$out/$name/injected.json"
  echo "== $f"
  if [ -f "$f" ]; then cat "$f"; else echo "(none)"; fi
done
echo "$# scenarios, $failed failed"
# What was built in, one JSON line per scenario in OUTDIR/injected.jsonl (a folder walk reads *.json as traces).
python3 - "$out" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
lines = []
for f in sorted(out.glob("*/injected.json")):
    lines.append(json.dumps({"folder": f.parent.name, **json.loads(f.read_text())}, sort_keys=True))
    f.unlink()
(out / "injected.jsonl").write_text("".join(x + "\n" for x in lines))
PY
