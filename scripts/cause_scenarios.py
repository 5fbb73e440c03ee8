"""Training loops with one known cause of lost time each, profiled the way most jobs are.

Each scenario profiles itself with plain ``torch.profiler.profile`` +
``schedule(wait=1, warmup=1, active=3)`` + ``tensorboard_trace_handler`` (one gzipped
trace per rank and window; nothing traceprobe-specific), and writes ``injected.json``
beside its traces: what was built in and how long it takes on its own, measured on
the same machine before the profiled loop (CUDA events for device work, the host clock
for host work), so a report can be checked against it.

Scenarios (``--scenario``):

- ``ddp-compute``: DDP, rank 1 runs extra matrix products before each backward.
- ``ddp-sleep``: DDP, rank 1 sleeps on the host before each forward.
- ``ddp-balanced``: DDP, every rank the same.
- ``pipeline``: two stages, GPipe over 8 microbatches (``torch.distributed.pipelining``).
- ``tensor-parallel``: an MLP split over the ranks with DTensor (column- then row-wise
  linear layers on a ``tp`` device mesh): an all-reduce between dependent matmuls.
- ``slow-input``: one GPU; the input comes from a DataLoader whose dataset sleeps.
- ``pinned-alloc``: one GPU; each step copies results to the host with
  ``non_blocking=True`` and keeps them, so every copy allocates pinned memory.
- ``prefetch-off`` / ``prefetch-on``: one GPU, a small CNN whose batches come from
  pinned host memory: copied on the compute stream before each step, or on a side
  stream one step ahead (a prefetcher), ordered by CUDA events.
- ``graph-capture``: one GPU; each step captures a CUDA graph of a deep, narrow MLP's
  forward again (as a graph re-recorded for every new shape is), then replays it: the
  launches inside the capture are recorded, not run, so the device waits meanwhile.
- ``startup``: one GPU; profiled from the process's start with no schedule (a plain
  ``with profile(...)`` around the whole script), so the trace holds CUDA's and cuDNN's
  and cuBLAS's start-up: the first step of a small CNN is much longer than the others.
- ``compile-startup``: the same, for an MLP under ``torch.compile``: the first step holds
  the compilation (Dynamo, AOTAutograd and Inductor, forward and backward).
- ``compiled-launch`` / ``compiled-graphs``: one GPU, a deep, narrow MLP trained under
  ``torch.compile`` (many small kernels per step) after it compiled: the default mode,
  whose steps are launch-bound inside the compiled regions, or ``mode="reduce-overhead"``,
  which replays them as CUDA graphs.

Examples::

    torchrun --standalone --nproc-per-node 2 scripts/cause_scenarios.py --scenario ddp-compute --out runs/ddp-compute
    python scripts/cause_scenarios.py --scenario slow-input --out runs/slow-input
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn

STEPS = 8
SCHEDULE = {"wait": 1, "warmup": 1, "active": 3, "repeat": 1}


def _profile(out: Path, rank: int | None, scheduled: bool = True):
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    name = f"rank{rank}" if rank is not None else "trace"
    return profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=schedule(**SCHEDULE) if scheduled else None,
                   on_trace_ready=tensorboard_trace_handler(str(out), worker_name=name, use_gzip=True))


def _device_ms(fn, repeat: int = 5) -> float:
    """Mean device time of ``fn()`` in ms (CUDA events, after one warm-up)."""
    fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(repeat):
        fn()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / repeat


def _mlp(width: int, depth: int) -> nn.Module:
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers)


def _write(out: Path, facts: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "injected.json").write_text(json.dumps(facts, indent=2) + "\n")


def ddp(out: Path, mode: str) -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("nccl")
    rank = dist.get_rank()
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    torch.manual_seed(0)
    model = DDP(_mlp(4096, 8).to(dev), device_ids=[rank], bucket_cap_mb=25)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(2048, 4096, device=dev)
    a, b = torch.randn(4096, 4096, device=dev), torch.randn(4096, 4096, device=dev)
    extra_products = 8
    sleep_s = 0.015

    def extra() -> None:
        for _ in range(extra_products):
            torch.mm(a, b)

    facts: dict = {"scenario": f"ddp-{mode}", "ranks": dist.get_world_size(), "late_rank": None if mode == "balanced" else 1}
    if mode == "compute":
        facts.update(cause="extra device compute on rank 1", extra_products=extra_products,
                     alone_ms_per_step=_device_ms(extra) if rank == 1 else None)
    elif mode == "sleep":
        facts.update(cause="host sleep on rank 1 before each forward", injected_ms_per_step=sleep_s * 1e3)
    timed: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []
    with _profile(out, rank) as prof:
        for _ in range(STEPS):
            if mode == "sleep" and rank == 1:
                time.sleep(sleep_s)
            loss = model(x).square().mean()
            if mode == "compute" and rank == 1:
                a0, a1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a0.record()
                extra()
                a1.record()
                timed.append((a0, a1))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            loss.item()  # the loop logs its loss, as most do: the host waits for the step's device work
            prof.step()
    torch.cuda.synchronize()
    if timed:  # the extra work as it ran in the loop, in the profiled steps (CUDA events around it)
        active = timed[SCHEDULE["wait"] + SCHEDULE["warmup"]:][:SCHEDULE["active"]]
        facts["injected_ms_per_step"] = sum(a.elapsed_time(b) for a, b in active) / len(active)
    if rank == (1 if mode == "compute" else 0):  # the rank that measured the injection writes the facts
        _write(out, facts)
    dist.destroy_process_group()


def pipeline(out: Path) -> None:
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    torch.manual_seed(0)
    microbatches, width, batch = 8, 4096, 4096
    stage_mod = _mlp(width, 4).to(dev)
    stage = PipelineStage(stage_mod, rank, world, dev)
    loss_fn = nn.MSELoss()
    sched = ScheduleGPipe(stage, n_microbatches=microbatches, loss_fn=loss_fn)
    opt = torch.optim.SGD(stage_mod.parameters(), lr=1e-3)
    x = torch.randn(batch, width, device=dev)
    y = torch.randn(batch, width, device=dev)
    with _profile(out, rank) as prof:
        for _ in range(STEPS):
            if rank == 0:
                sched.step(x)
            elif rank == world - 1:
                sched.step(target=y)
            else:
                sched.step()
            opt.step()
            opt.zero_grad(set_to_none=True)
            prof.step()
    torch.cuda.synchronize()
    if rank == 0:
        _write(out, {"scenario": "pipeline", "stages": world, "microbatches": microbatches, "schedule": "GPipe",
                     "ideal_bubble": (world - 1) / (microbatches + world - 1)})
    dist.destroy_process_group()


def tensor_parallel(out: Path) -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    rank = int(os.environ["RANK"])
    torch.cuda.set_device(rank)
    mesh = init_device_mesh("cuda", (int(os.environ["WORLD_SIZE"]),), mesh_dim_names=("tp",))
    torch.manual_seed(0)
    width, layers = 4096, 4
    model = _mlp(width, 2 * layers).cuda()
    plan = {}
    for i in range(0, 4 * layers, 4):  # Linear, ReLU, Linear, ReLU: column- then row-wise
        plan[str(i)], plan[str(i + 2)] = ColwiseParallel(), RowwiseParallel()
    model = parallelize_module(model, mesh, plan)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(4096, width, device="cuda")
    with _profile(out, rank) as prof:
        for _ in range(STEPS):
            loss = model(x).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            loss.item()
            prof.step()
    torch.cuda.synchronize()
    if rank == 0:
        _write(out, {"scenario": "tensor-parallel", "ranks": int(os.environ["WORLD_SIZE"]), "mesh": "tp"})
    dist.destroy_process_group()


class _Sleepy(torch.utils.data.Dataset):
    def __init__(self, n: int, sleep_s: float) -> None:
        self.n, self.sleep_s = n, sleep_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        time.sleep(self.sleep_s)
        return torch.ones(1024)


def slow_input(out: Path) -> None:
    dev = torch.device("cuda", 0)
    batch, sleep_s = 4, 0.005
    loader = torch.utils.data.DataLoader(_Sleepy(batch * (STEPS + 2), sleep_s), batch_size=batch, num_workers=0)
    model = _mlp(4096, 6).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    w = torch.randn(1024, 4096, device=dev)
    facts = {"scenario": "slow-input", "cause": "DataLoader (num_workers=0) whose items sleep",
             "injected_ms_per_step": batch * sleep_s * 1e3}
    with _profile(out, None) as prof:
        for xb in loader:
            x = (xb.to(dev) @ w).repeat(512, 1)
            loss = model(x).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            loss.item()  # logged each step
            prof.step()
    torch.cuda.synchronize()
    _write(out, facts)


def pinned_alloc(out: Path) -> None:
    dev = torch.device("cuda", 0)
    model = _mlp(4096, 4).to(dev)
    x = torch.randn(4096, 4096, device=dev)
    chunks = 8
    # the host time of one fresh pinned allocation of a result's size, kept alive as the loop keeps them
    keep = []
    t0 = time.perf_counter()
    for _ in range(chunks):
        keep.append(torch.empty(4096 * 4096, dtype=torch.float32, pin_memory=True))
    alloc_ms = (time.perf_counter() - t0) * 1e3
    del keep
    facts = {"scenario": "pinned-alloc", "cause": "every .to('cpu', non_blocking=True) allocates pinned memory (results kept)",
             "injected_ms_per_step": alloc_ms}
    kept: list[torch.Tensor] = []
    with torch.no_grad(), _profile(out, None) as prof:
        for _ in range(STEPS):
            y = model(x)
            for _ in range(chunks):
                kept.append(y.to("cpu", non_blocking=True))
            prof.step()
    torch.cuda.synchronize()
    _write(out, facts)


def _cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(128, 128, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10))


def prefetch(out: Path, on: bool) -> None:
    dev = torch.device("cuda", 0)
    model = _cnn().to(dev).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    host = [torch.randn(32, 3, 512, 512).pin_memory() for _ in range(STEPS + 1)]
    labels = torch.randint(0, 10, (32,), device=dev)
    side = torch.cuda.Stream()
    loss_fn = nn.CrossEntropyLoss()

    def load(i: int) -> tuple[torch.Tensor, torch.cuda.Event]:
        ev = torch.cuda.Event()
        if on:
            with torch.cuda.stream(side):
                t = host[i].to(dev, non_blocking=True)
                ev.record(side)
        else:
            t = host[i].to(dev, non_blocking=True)
            ev.record()
        return t, ev

    with _profile(out, None) as prof:
        nxt = load(0)
        for i in range(STEPS):
            xb, ev = nxt
            torch.cuda.current_stream().wait_event(ev)
            if on:
                xb.record_stream(torch.cuda.current_stream())
                nxt = load(i + 1)
            loss = loss_fn(model(xb), labels)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if not on:
                nxt = load(i + 1)
            loss.item()  # logged each step: the host waits for the step, so the variants differ only in the copies
            prof.step()
    torch.cuda.synchronize()
    _write(out, {"scenario": f"prefetch-{'on' if on else 'off'}", "prefetch": on})


def graph_capture(out: Path) -> None:
    dev = torch.device("cuda", 0)
    model = _mlp(1024, 48).to(dev).eval()  # many small layers: many launches per forward
    x = torch.randn(64, 1024, device=dev)
    side = torch.cuda.Stream()  # (a capture cannot run on the default stream)
    side.wait_stream(torch.cuda.current_stream())
    with torch.no_grad(), torch.cuda.stream(side):  # warm-up on the side stream, as torch.cuda.graph's docs ask
        for _ in range(3):
            model(x)
    torch.cuda.synchronize()
    capture_ms = []  # host time from capture_begin to capture_end, per step (profiled, as the trace sees it)
    with torch.no_grad(), _profile(out, None) as prof:
        for _ in range(STEPS):
            g = torch.cuda.CUDAGraph()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                t0 = time.perf_counter()
                g.capture_begin()
                y = model(x)
                g.capture_end()
                capture_ms.append((time.perf_counter() - t0) * 1e3)
            g.replay()
            y.sum().item()  # logged each step
            prof.step()
    torch.cuda.synchronize()
    active = capture_ms[SCHEDULE["wait"] + SCHEDULE["warmup"]:][:SCHEDULE["active"]]
    _write(out, {"scenario": "graph-capture", "cause": "a CUDA graph captured again in every step (launches recorded, not run)",
                 "injected_ms_per_step": sum(active) / len(active)})


def startup(out: Path, compiled: bool = False) -> None:
    step_ms = []  # host time of each step (profiled, as the trace sees it)
    with _profile(out, None, scheduled=False) as prof:  # before anything touches CUDA
        t0 = time.perf_counter()
        dev = torch.device("cuda", 0)
        if compiled:
            model = _mlp(1024, 8).to(dev)
            run = torch.compile(model)
            x, labels = torch.randn(256, 1024, device=dev), torch.randint(0, 1024, (256,), device=dev)
        else:
            model = nn.Sequential(nn.Conv2d(3, 64, 7, stride=2, padding=3), nn.ReLU(), nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(),
                                  nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10)).to(dev)
            run = model
            x, labels = torch.randn(32, 3, 224, 224, device=dev), torch.randint(0, 10, (32,), device=dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for _ in range(STEPS):
            loss = nn.functional.cross_entropy(run(x), labels)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            loss.item()  # logged each step
            step_ms.append((time.perf_counter() - t0) * 1e3)
            prof.step()
            t0 = time.perf_counter()
    steady = sorted(step_ms[1:])[len(step_ms[1:]) // 2]
    what = "torch.compile's compilation" if compiled else "CUDA, cuDNN and cuBLAS start-up"
    _write(out, {"scenario": "compile-startup" if compiled else "startup", "cause": f"{what} inside the profiled window (no schedule)",
                 "first_step_ms": step_ms[0], "steady_step_ms": steady, "injected_ms": step_ms[0] - steady})


def compiled(out: Path, graphs: bool) -> None:
    dev = torch.device("cuda", 0)
    model = _mlp(256, 48).to(dev)  # many small layers: many small kernels per step
    run = torch.compile(model, mode="reduce-overhead" if graphs else "default")
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(64, 256, device=dev), torch.randn(64, 256, device=dev)

    def step() -> None:
        torch.compiler.cudagraph_mark_step_begin()  # (a new iteration: the graphs' outputs may be reused)
        nn.functional.mse_loss(run(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()  # (the step's end, for the clock below; as a logged loss would)

    for _ in range(5):  # compiled, graphs recorded: before the clock and the profiler
        step()
    step_ms = []
    for _ in range(20):
        t0 = time.perf_counter()
        step()
        step_ms.append((time.perf_counter() - t0) * 1e3)
    with _profile(out, None) as prof:
        for _ in range(STEPS):
            step()
            prof.step()
    mode = "reduce-overhead" if graphs else "default"
    _write(out, {"scenario": f"compiled-{'graphs' if graphs else 'launch'}", "cause": f"torch.compile mode={mode}, after compiling",
                 "steady_step_ms": sorted(step_ms)[len(step_ms) // 2]})


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scenario", required=True, choices=["ddp-compute", "ddp-sleep", "ddp-balanced", "pipeline", "tensor-parallel", "slow-input",
                                                          "pinned-alloc", "prefetch-off", "prefetch-on", "graph-capture", "startup",
                                                          "compile-startup", "compiled-launch", "compiled-graphs"])
    p.add_argument("--out", required=True, type=Path)
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    if a.scenario.startswith("ddp-"):
        ddp(a.out, a.scenario.split("-", 1)[1])
    elif a.scenario == "pipeline":
        pipeline(a.out)
    elif a.scenario == "tensor-parallel":
        tensor_parallel(a.out)
    elif a.scenario == "slow-input":
        slow_input(a.out)
    elif a.scenario == "pinned-alloc":
        pinned_alloc(a.out)
    elif a.scenario == "graph-capture":
        graph_capture(a.out)
    elif a.scenario in ("startup", "compile-startup"):
        startup(a.out, compiled=a.scenario == "compile-startup")
    elif a.scenario.startswith("compiled-"):
        compiled(a.out, graphs=a.scenario == "compiled-graphs")
    else:
        prefetch(a.out, a.scenario == "prefetch-on")
    if int(os.environ.get("RANK", "0")) == 0:
        print(f"{a.scenario}: traces in {a.out}")


if __name__ == "__main__":
    main()
