#!/usr/bin/env bash
# Record workloads on a GPU machine, run the GPU tests, and leave everything under OUTDIR.
# Usage: bash scripts/gpu_session.sh OUTDIR [WORKLOAD...]
#   GPU_TESTS=1  also run the GPU-marked tests (tests/*: gpu, multigpu)
#   DDP_SCRIPT=1 also record tests/data/train_small.py under torchrun on every GPU (record --script)
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
gpus=$(python3 -c 'import torch; print(torch.cuda.device_count())')
mkdir -p "$out"
python3 -m traceprobe record --out "$out/rec" "$@"
python3 -m traceprobe overlap-report "$out/rec" --format json --output "$out/report.json"
python3 -m traceprobe overlap-report "$out/rec" --output "$out/report.txt"
if [ "${DDP_SCRIPT:-0}" = 1 ]; then
  python3 -m torch.distributed.run --standalone --nproc-per-node "$gpus" -m traceprobe record \
    --script tests/data/train_small.py --out "$out/script-ddp" --active 3 -- --ddp --device cuda --width 4096 --steps 10 \
    > "$out/script-ddp.log" 2>&1; echo "record --script under torchrun: exit $?"
  python3 -m traceprobe overlap-report "$out/script-ddp" --output "$out/script-ddp.report.txt"
  python3 -m traceprobe overlap-report "$out/script-ddp" --format json --output "$out/script-ddp.report.json"
fi
if [ "${GPU_TESTS:-0}" = 1 ]; then
  python3 -m pytest -q -rs -s -m "gpu or multigpu" -p no:cacheprovider tests/ > "$out/gpu-tests.log" 2>&1
  echo "gpu tests: exit $?"; tail -n 15 "$out/gpu-tests.log"
fi
grep -E '^│ \[|─ [a-z]' "$out/report.txt" | head -120
