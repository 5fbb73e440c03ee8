"""Data parallelism (nn.DataParallel against DDP: the DataParallel bottleneck).

One model, a stack of Linear+ReLU layers (8 of width 4096 on a GPU machine), is
trained a few SGD steps on the same global batch three ways:

- ``single``: the whole batch on GPU 0 (baseline): one device busy.
- ``dataparallel``: ``nn.DataParallel`` over all visible GPUs, in this process:
  expect per step the parameters broadcast from GPU 0 (copies), forward/backward
  kernels on every GPU, gradients reduced onto GPU 0 and the optimizer on GPU 0
  alone; GPU 0 busier than the others.
- ``ddp``: ``DistributedDataParallel``, one process per GPU launched through
  ``torchrun`` (NCCL; gloo with two processes on the CPU). One trace per rank
  (``<workload>.ddp.rank<r>.pt.trace.json.gz``, three ``ProfilerStep#N`` steps):
  expect NCCL all-reduce kernels on their own stream overlapping the backward
  pass (gradients are reduced bucket by bucket while earlier layers still
  compute), the optimizer on every rank.

On the CPU, ``single`` and ``dataparallel`` both run the model plainly; ``ddp``
still runs two gloo processes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from ..launch import run_job
from .base import Context, Variant, Workload, synchronize

DDP_TIMEOUT_S = 600
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
"""Set for every torchrun launch: NVLink multicast must stay off on the GPU machines."""


def make_model(width: int, layers: int, device: str):  # noqa: ANN201
    """``layers`` x (Linear(width, width), ReLU), deterministic weights."""
    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    mods: list[nn.Module] = []
    for _ in range(layers):
        mods += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*mods).to(device)


def make_batch(batch: int, width: int, device: str, seed: int = 1):  # noqa: ANN201
    import torch

    g = torch.Generator().manual_seed(seed)
    x = torch.rand(batch, width, generator=g)
    return x.to(device), (x.flip(1) * 0.5).to(device)


def train(model, opt, x, target, steps: int) -> None:  # noqa: ANN001
    """``steps`` SGD steps of MSE loss (no synchronization)."""
    import torch.nn.functional as F

    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        F.mse_loss(model(x), target).backward()
        opt.step()


def _worker_sizes(width: int, layers: int, batch: int, steps: int) -> list[str]:
    return ["--width", str(width), "--layers", str(layers), "--batch", str(batch), "--steps", str(steps)]


def data_parallel(ctx: Context) -> list[Variant]:
    import torch

    width = ctx.pick(4096, 32, ctx.size)
    layers = ctx.pick(8, 2, None)
    per_gpu = ctx.pick(256, 8, None)
    steps = ctx.pick(3, 2, ctx.repeat)
    n = ctx.gpus if ctx.cuda else 2  # replicas / ranks
    batch = per_gpu * max(n, 1)
    params = {"width": width, "layers": layers, "global_batch": batch, "steps": steps, "dtype": "float32", "optimizer": "SGD"}
    weights = 4 * layers * (width * width + width)
    need = 3 * weights + 4 * 4 * layers * batch * width

    def setup_with(wrap: bool) -> Callable[[], None]:
        model = make_model(width, layers, ctx.dev(0))
        if wrap and ctx.cuda:
            model = torch.nn.DataParallel(model, device_ids=list(range(ctx.gpus)))
        opt = torch.optim.SGD(model.parameters(), lr=1e-4)
        x, target = make_batch(batch, width, ctx.dev(0))

        def step() -> None:
            train(model, opt, x, target, steps)
            synchronize(ctx)

        return step

    ddp_params = {**params, "ranks": n, "backend": "nccl" if ctx.cuda else "gloo", "per_rank_batch": per_gpu,
                  "profiled_steps": 3}  # wall_s: `steps` unprofiled steps on rank 0

    def launcher(out_dir: Path, workload: str) -> float:
        env = {**os.environ, **MULTICAST_OFF}
        root = str(Path(__file__).resolve().parents[3])  # so the workers import this traceprobe
        env["PYTHONPATH"] = os.pathsep.join([root] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        tmp = Path(tempfile.mkdtemp(prefix="traceprobe-ddp-"))
        cmd = [
            sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(n),
            "-m", "traceprobe.recording.workloads.ddp_worker", "--out", str(out_dir), "--workload", workload, "--variant", "ddp",
            "--device", ctx.device, "--wall-json", str(tmp / "wall.json"), *_worker_sizes(width, layers, per_gpu, steps),
        ]
        try:
            try:
                p = run_job(cmd, env, DDP_TIMEOUT_S)
            except subprocess.TimeoutExpired as e:
                raise RuntimeError(f"torchrun did not finish in {DDP_TIMEOUT_S} s: {_tail(e.stderr)}") from None
            if p.returncode != 0:
                raise RuntimeError(f"torchrun exited with {p.returncode}: {_tail(p.stderr)}")
            try:
                info = json.loads((tmp / "wall.json").read_text())
            except (OSError, ValueError):
                raise RuntimeError(f"torchrun finished but rank 0 noted no wall time: {_tail(p.stderr)}") from None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        ddp_params["profiled_wall_s"] = info["profiled_wall_s"]  # the 3 active steps, under the profiler
        return float(info["wall_s"])

    def no_setup() -> Callable[[], None]:
        raise RuntimeError("the ddp variant runs through its launcher")

    return [
        Variant("single", f"{steps} SGD steps of {layers} Linear layers of width {width}, batch {batch}, on GPU 0 alone: the baseline",
                lambda: setup_with(False), gpus=1, gpu_bytes=need, params=params),
        Variant("dataparallel", f"the same steps through nn.DataParallel over {n} GPUs: expect weight broadcasts and gradient reduction through GPU 0",
                lambda: setup_with(True), gpus=2, gpu_bytes=need, params={**params, "replicas": n if ctx.cuda else 1}),
        Variant("ddp", f"the same steps with DistributedDataParallel, {n} processes via torchrun: expect all-reduce overlapping backward on every rank",
                no_setup, gpus=2, gpu_bytes=need, params=ddp_params, ranks=n, launcher=launcher),
    ]


def _tail(text: str | bytes | None, chars: int = 2000) -> str:
    """The end of a child's stderr on one line (record() keeps only a reason's first line):
    the last lines naming an error, then the last lines."""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    if not lines:
        return "(no stderr)"
    errors = [ln for ln in lines if re.search(r"\w(Error|Exception)\b", ln)][-3:]
    return " | ".join(dict.fromkeys(errors + lines[-8:]))[-chars:]


DATA_PARALLEL = Workload("data-parallel", "A Linear stack trained on one GPU, with nn.DataParallel, and with DDP via torchrun", data_parallel)
