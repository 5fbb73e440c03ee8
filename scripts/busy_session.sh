#!/usr/bin/env bash
# Record the DataLoader (scripts/loader_scenarios.py) and activation-checkpointing (scripts/checkpoint_scenario.py)
# scenarios on a GPU machine at several sizes, run the GPU tests, and pack everything under OUTDIR.
# Usage: bash scripts/busy_session.sh OUTDIR
set -u
out=${1:?OUTDIR}
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
fi
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
python3 -c 'import timm; print("timm", timm.__version__)' 2>&1 | tail -1
mkdir -p "$out/busy"
run() {  # name, env..., script
  local name=$1; shift
  local start=$(date +%s)
  env "$@" --out "$out/busy/$name" > "$out/busy/$name.log" 2>&1
  echo "$name: exit $? in $(( $(date +%s) - start )) s"; tail -n 1 "$out/busy/$name.log" | cut -c1-700
}
run loader-resnet50-b64 LOADER_MODEL=resnet50 LOADER_BATCH=64 LOADER_WORK=4 timeout 200 python3 scripts/loader_scenarios.py
run loader-resnet18-b128 LOADER_MODEL=resnet18 LOADER_BATCH=128 LOADER_WORK=2 timeout 200 python3 scripts/loader_scenarios.py
run loader-resnet101-b32 LOADER_MODEL=resnet101 LOADER_BATCH=32 LOADER_WORK=8 timeout 200 python3 scripts/loader_scenarios.py
run ckpt-w2048 CKPT_WIDTH=2048 CKPT_LAYERS=8 timeout 120 python3 scripts/checkpoint_scenario.py
run ckpt-w1024 CKPT_WIDTH=1024 CKPT_LAYERS=16 CKPT_TOKENS=16384 timeout 120 python3 scripts/checkpoint_scenario.py
if [ "${GPU_TESTS:-0}" = 1 ]; then
  timeout 200 python3 -m pytest -q -rs -m "gpu" -p no:cacheprovider tests/ > "$out/gpu-tests.log" 2>&1
  echo "gpu tests: exit $?"; tail -n 8 "$out/gpu-tests.log"
fi
(cd "$out" && tar czf busy.tar.gz busy && rm -r busy && ls -la)
