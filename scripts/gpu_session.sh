#!/usr/bin/env bash
# Record workloads on a GPU machine and pack the traces for the trip back.
# Usage: bash scripts/gpu_session.sh OUTDIR [WORKLOAD...]
# Assumes wheels of missing packages in .whl/ (see README, "Recording on a GPU").
set -u
out=${1:?OUTDIR}; shift
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
# NVLink multicast stays off on shared hosts.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'
mkdir -p "$out"
python3 -m traceprobe record --out "$out/rec" "$@"
python3 -m traceprobe overlap-report "$out/rec" --format json --output "$out/report.json"
python3 -m traceprobe overlap-report "$out/rec" --output "$out/report.txt"
cat "$out/report.txt" | grep -E '^\│ \[|─ ' | head -80
