#!/usr/bin/env bash
# Record scripts/loop_scenarios.py's scenarios on a GPU machine at several sizes (held-out variety: models, batches,
# loading costs), optionally run the GPU tests, and pack everything under OUTDIR.
# Usage: bash scripts/busy_session.sh OUTDIR
set -u
out=${1:?OUTDIR}
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
fi
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
python3 -c 'import torch, timm; print("torch", torch.__version__, "cuda", torch.version.cuda, "timm", timm.__version__)'
mkdir -p "$out/busy"
run() {  # name scenario [VAR=value...]
  local name=$1 scenario=$2; shift 2
  local start=$(date +%s)
  env "$@" timeout 150 python3 scripts/loop_scenarios.py --scenario "$scenario" --out "$out/busy/$name" > "$out/busy/$name.log" 2>&1
  echo "$name: exit $? in $(( $(date +%s) - start )) s"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print({k: v for k, v in d['variants'].items()})" "$out/busy/$name/fix.json" 2>&1 | tail -1
}
run loader-r50-b64 resnet-loader LOOP_MODEL=resnet50 LOOP_BATCH=64 LOOP_SIDE=256 LOOP_JITTER=1
run loader-r50-b128 resnet-loader LOOP_MODEL=resnet50 LOOP_BATCH=128 LOOP_SIDE=232 LOOP_JITTER=0
run loader-r152-b64 resnet-loader LOOP_MODEL=resnet152 LOOP_BATCH=64 LOOP_SIDE=232 LOOP_JITTER=0
run loader-r34-b256 resnet-loader LOOP_MODEL=resnet34 LOOP_BATCH=256 LOOP_SIDE=240 LOOP_JITTER=1
run ckpt-w2048 checkpoint LOOP_WIDTH=2048 LOOP_LAYERS=8 LOOP_TOKENS=8192
run ckpt-w1024 checkpoint LOOP_WIDTH=1024 LOOP_LAYERS=16 LOOP_TOKENS=16384
if [ "${GPU_TESTS:-0}" = 1 ]; then
  timeout 200 python3 -m pytest -q -rs -m "gpu" -p no:cacheprovider --continue-on-collection-errors tests/ > "$out/gpu-tests.log" 2>&1
  echo "gpu tests: exit $?"; tail -n 8 "$out/gpu-tests.log"
fi
(cd "$out" && tar czf busy.tar.gz busy && rm -r busy && ls -la)
