"""Multi-rank training loops with one known, built-in cause of lost time each (or none: a control).

Run under ``torchrun`` (every rank runs the same scenario). Each scenario profiles itself with
plain ``torch.profiler.profile`` + ``schedule(wait=1, warmup=1, active=3, repeat=1)`` +
``tensorboard_trace_handler`` (one gzipped trace per rank; nothing traceprobe-specific) over
8 steps, and writes ``injected.json`` beside the traces: the scenario, its parallelism, the
world size, ``late_rank`` (the rank with the built-in cause; null for a control or a cause
on every rank), ``cause``, ``cause_kind`` and ``injected_ms_per_step``: the size of what was
built in, measured in the same run over the profiled steps (CUDA events around injected
device work, the host clock around host work). The rank that measured the cause writes it
(rank 0 for a control or a cause on every rank). "Rank L" below is rank 1.

DDP (``DistributedDataParallel`` over an MLP; SGD; no ``.item()`` unless said):

- ``ddp-balanced``: every rank the same (control).
- ``ddp-compute``: rank L runs extra matrix products between forward and backward.
- ``ddp-sleep``: rank L sleeps 20 ms on the host before each forward.
- ``ddp-dataloader``: every rank reads its batches from a DataLoader (``num_workers=0``);
  on rank L the dataset's items sleep, so a batch takes about 20 ms.
- ``ddp-dataloader-workers``: every rank reads its batches from a DataLoader with 2 worker
  processes; on rank L each batch takes its worker about 20x ``MATRIX_SLEEP_MS``, so the
  workers fall behind the device and the loop waits for them (measured: the host time in
  ``next()`` of the loader).
- ``ddp-item``: every rank calls ``.item()`` on an activation after each layer of a deep,
  narrow MLP (the host waits for the device, then refills its queue); measured after the
  profiled loop, unprofiled, as blocks of steps with the calls against blocks without, taken
  in turn (each step ends with a device synchronize in both).
- ``ddp-item-log``, ``fsdp-item-log``, ``mesh-item-log``: every rank prepares its batch on the
  host (a sleep of half ``MATRIX_SLEEP_MS``, hidden behind the device work queued ahead), and
  rank L logs ``loss.item()`` at the end of each step: its queue drains there, and its next
  preparation is exposed. Measured after the profiled loop, unprofiled, as blocks of steps
  with the log against blocks without (one device synchronize per block), taken in turn.
- ``ddp-amp-scaler``: every rank trains in float16 autocast with a ``GradScaler`` (its ``step`` reads
  the found-inf flag back to the host, a sync every step) and prepares its batch on the host (a
  sleep of half ``MATRIX_SLEEP_MS``); measured as ``ddp-item-log`` is: blocks of steps with the
  scaler against blocks without it (``backward`` and ``step`` unscaled, the same autocast).
- ``ddp-accum-balanced`` (control), ``ddp-accum-compute``: 4 microbatches a step, the first 3
  under ``no_sync()`` (gradient accumulation: one set of all-reduces a step); rank L runs extra
  matrix products in each microbatch (a quarter of ``MATRIX_PRODUCTS`` each).
- ``ddp-cpu-op``: rank L makes a random CPU tensor and sorts it (about 25 ms) each step.
- ``ddp-pinned-alloc``: rank L allocates a fresh 256 MB pinned host buffer each step and
  copies a result into it with ``non_blocking=True`` (buffers kept through the profiled steps).
- ``ddp-device-alloc``: rank L calls ``torch.cuda.empty_cache()`` and then allocates a fresh
  4 GB device tensor each step, so cudaFree and cudaMalloc run inside the step.
- ``ddp-empty-cache``: rank L calls ``torch.cuda.empty_cache()`` and allocates a fresh device tensor
  of ``MATRIX_ALLOC_GB`` (4) each step, with no sync of its own around them (``ddp-device-alloc``
  times them between device synchronizes); measured as ``ddp-item-log`` is: blocks of steps with
  the allocation against blocks without it, unprofiled.
- ``ddp-pageable``: rank L copies its 256 MB input batch from pageable host memory to the
  device each step (synchronous for the host).
- ``ddp-recompile``: every rank's DDP model is ``torch.compile``d (``dynamic=False``) and each
  step's batch size is new, so each step compiles again; measured as the host time of the
  step's forward and backward minus the same at a shape already compiled.
- ``ddp-new-shape``: attention blocks (``scaled_dot_product_attention``, cuDNN's backend where
  it runs) with a new batch size each step, not compiled; measured as for ``ddp-recompile``.

FSDP2 (``fully_shard`` on every linear layer and the root):

- ``fsdp-balanced`` (control), ``fsdp-compute`` (rank L: extra matrix products between forward
  and backward), ``fsdp-sleep`` (rank L sleeps 20 ms before each forward).

2-D mesh (``dp`` x ``tp`` = world/2 x 2; tensor parallel over ``tp`` with column- then row-wise
linear layers; data parallel over ``dp`` by an all-reduce of each gradient on ``dp``'s group):

- ``mesh-balanced`` (control), ``mesh-compute`` (rank 0 runs extra matrix products before its
  forward, so before its first tensor-parallel all-reduce), ``mesh-sleep`` (rank 3 sleeps
  20 ms before each forward).

Pipeline (``torch.distributed.pipelining``, one stage per rank, ``Schedule1F1B``, 8 microbatches):

- ``pp-balanced`` (control), ``pp-compute`` (stage 2's module runs an extra matrix product in
  each microbatch's forward, about 2 ms; measured with CUDA events inside the module).

Expert parallel (one expert MLP per rank; tokens sent to the experts and back with
``all_to_all_single``; forward only, then an all-reduce of the loss):

- ``ep-balanced``: every expert gets as many tokens (control).
- ``ep-skew``: every rank sends rank L's expert 4x the tokens it sends each other expert;
  measured as rank L's expert time minus the mean of the other experts'.

``--device cpu`` runs the scenarios that need no GPU on the gloo backend with tiny sizes (a
smoke test; host clock in place of CUDA events); the others exit 0 with a message.

Examples::

    torchrun --standalone --nproc-per-node 4 scripts/matrix_scenarios.py --scenario ddp-sleep --out runs/mx/ddp-sleep
    bash scripts/matrix_session.sh runs/mx            # every scenario, one after another
    python scripts/matrix_scenarios.py --list
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import cause_scenarios  # (beside this script: its model and its timing of device work on its own)
import torch
import torch.distributed as dist
import torch.nn as nn
from cause_scenarios import _mlp

STEPS = 8
SCHEDULE = {"wait": 1, "warmup": 1, "active": 3, "repeat": 1}
PROFILED = range(SCHEDULE["wait"] + SCHEDULE["warmup"], SCHEDULE["wait"] + SCHEDULE["warmup"] + SCHEDULE["active"])  # steps 2, 3, 4
SLEEP_S = float(os.environ.get("MATRIX_SLEEP_MS", "20")) / 1e3
LATE = os.environ.get("MATRIX_LATE")
WITH_STACK = os.environ.get("MATRIX_WITH_STACK") == "1"
SYNC_EVENTS = os.environ.get("MATRIX_SYNC_EVENTS") == "1"
DEVICE_ONLY = os.environ.get("MATRIX_DEVICE_ONLY") == "1"
"""``MATRIX_DEVICE_ONLY=1``: profile the device activity alone (``ProfilerActivity.CUDA``): the traces hold runtime calls
and device work but no host ops, as a profile recorded without the CPU activity does."""
LOG_EVERY_STEP = os.environ.get("MATRIX_LOG") == "1"
"""``MATRIX_LOG=1``: the DDP scenarios of :func:`ddp` log ``loss.item()`` at each step's end on every rank, as most
training loops do: the host waits there for the step's device work, so a host delay of the next step (a sleep, a CPU
op, a slow DataLoader) is no longer hidden behind work queued ahead (``log_every_step`` in ``injected.json``)."""
"""Held-out runs vary what the matrix fixed: ``MATRIX_LATE`` (the rank given the cause, every parallelism),
``MATRIX_SLEEP_MS`` (the host sleeps), ``MATRIX_PRODUCTS`` (the extra matrix products of a compute scenario),
``MATRIX_BATCH`` (the MLP's batch on a GPU, 2048); and
how it is recorded: ``MATRIX_WITH_STACK=1`` (Python stacks), ``MATRIX_SYNC_EVENTS=1`` (Kineto's ``cuda_sync`` events)."""

SCENARIOS = ["ddp-balanced", "ddp-compute", "ddp-sleep", "ddp-dataloader", "ddp-item", "ddp-cpu-op", "ddp-pinned-alloc", "ddp-device-alloc",
             "ddp-pageable", "ddp-recompile", "ddp-new-shape", "fsdp-balanced", "fsdp-compute", "fsdp-sleep", "mesh-balanced", "mesh-compute",
             "mesh-sleep", "pp-balanced", "pp-compute", "ep-balanced", "ep-skew", "ddp-item-log", "fsdp-item-log", "mesh-item-log",
             "ddp-amp-scaler", "ddp-accum-balanced", "ddp-accum-compute", "ddp-dataloader-workers", "ddp-empty-cache"]
CUDA_ONLY = {"ddp-pinned-alloc": "pinned host memory", "ddp-device-alloc": "cudaMalloc and cudaFree", "ddp-empty-cache": "cudaMalloc and cudaFree",
             "ddp-pageable": "a copy from pageable host memory to a GPU", "ddp-new-shape": "cuDNN attention plans per shape"}

# sizes: (a GPU, a CPU smoke test on a couple of cores)
SIZES = {
    "cuda": {"width": 4096, "depth": 8, "batch": int(os.environ.get("MATRIX_BATCH", "2048")), "mm": 4096, "products": int(os.environ.get("MATRIX_PRODUCTS", "8")),
             "item_width": 1024, "item_depth": 16, "item_batch": 256,
             "compile_width": 1024, "compile_depth": 4, "compile_batch": 256,
             "attn_dim": 1024, "attn_heads": 8, "attn_seq": 512, "attn_blocks": 4, "attn_batch": 8,
             "pp_width": 4096, "pp_depth": 2, "pp_batch": 8192, "pp_mm": (3072, 4096),
             "ep_width": 2048, "ep_tokens": 1024},
    "cpu": {"width": 64, "depth": 4, "batch": 32, "mm": 384, "products": 2,
            "item_width": 32, "item_depth": 16, "item_batch": 16,
            "compile_width": 32, "compile_depth": 2, "compile_batch": 16,
            "attn_dim": 64, "attn_heads": 2, "attn_seq": 32, "attn_blocks": 2, "attn_batch": 2,
            "pp_width": 64, "pp_depth": 2, "pp_batch": 64, "pp_mm": (256, 256),
            "ep_width": 64, "ep_tokens": 16},
}


def _profile(out: Path, rank: int, cuda: bool = True):
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]
    if DEVICE_ONLY and cuda:
        activities = [ProfilerActivity.CUDA]
    extra: dict = {"with_stack": True} if WITH_STACK else {}
    if SYNC_EVENTS and cuda:
        extra["experimental_config"] = torch._C._profiler._ExperimentalConfig(enable_cuda_sync_events=True)
    return profile(activities=activities, schedule=schedule(**SCHEDULE),
                   on_trace_ready=tensorboard_trace_handler(str(out), worker_name=f"rank{rank}", use_gzip=True), **extra)


class Run:
    """This rank's place in the torchrun world, its device and the sizes for it."""

    def __init__(self, scenario: str, out: Path, device: str) -> None:
        self.scenario, self.out = scenario, out
        self.cuda = device == "cuda"
        self.local = int(os.environ.get("LOCAL_RANK", "0"))
        if self.cuda:
            torch.cuda.set_device(self.local)
            self.dev = torch.device("cuda", self.local)
        else:
            self.dev = torch.device("cpu")
        dist.init_process_group("nccl" if self.cuda else "gloo")
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.late = min(int(LATE) if LATE else 1, self.world - 1)  # rank L
        self.size = SIZES[device]

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def facts(self, parallelism: str, late_rank: int | None, cause: str, cause_kind: str, injected_ms: float, **more) -> dict:
        return {"scenario": self.scenario, "parallelism": parallelism, "world_size": self.world, "late_rank": late_rank, "cause": cause,
                "cause_kind": cause_kind, "injected_ms_per_step": round(injected_ms, 3), "profiled_steps": list(PROFILED), "steps": STEPS,
                "device": torch.cuda.get_device_name(self.dev) if self.cuda else "cpu", "torch": torch.__version__,
                "with_stack": WITH_STACK, "sync_events": SYNC_EVENTS, **({"device_only": True} if DEVICE_ONLY else {}), **more}

    def control(self, parallelism: str, **more) -> dict:
        return self.facts(parallelism, None, "none (balanced control)", "none", 0.0, **more)


class Timer:
    """Per-step durations of one piece of built-in work: CUDA events around device work, the host clock around host work."""

    def __init__(self, events: bool) -> None:
        self.events = events
        self.spans: list[tuple[int, object, object]] = []

    @contextlib.contextmanager
    def __call__(self, step: int):
        if self.events:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            yield
            b.record()
            self.spans.append((step, a, b))
        else:
            t0 = time.perf_counter()
            yield
            self.spans.append((step, t0, time.perf_counter()))

    def per_step(self) -> dict[int, float]:
        """Milliseconds per step (summed where a step holds several spans)."""
        if self.events:
            torch.cuda.synchronize()
        ms: dict[int, float] = {}
        for step, a, b in self.spans:
            d = a.elapsed_time(b) if self.events else (b - a) * 1e3  # type: ignore[attr-defined,operator]
            ms[step] = ms.get(step, 0.0) + d
        return ms

    def profiled(self) -> float:
        """Mean milliseconds per profiled step."""
        ms = self.per_step()
        return sum(ms.get(s, 0.0) for s in PROFILED) / len(PROFILED)

    def count(self, step: int) -> int:
        return sum(1 for s, _, _ in self.spans if s == step)


def _device_ms(fn, cuda: bool, repeat: int = 5) -> float:
    """Mean time of ``fn()`` on its own in ms (CUDA events on a GPU, the host clock on CPU; after one warm-up)."""
    if cuda:
        return cause_scenarios._device_ms(fn, repeat)
    fn()
    t0 = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - t0) * 1e3 / repeat


def _mean(xs) -> float:
    xs = list(xs)
    return sum(xs) / len(xs)


def _profile_steps(run: Run, step: Callable[[], object]) -> None:
    """``step()`` :data:`STEPS` times under the profiler (one profiler step each), then the device synchronized."""
    with _profile(run.out, run.rank, run.cuda) as prof:
        for _ in range(STEPS):
            step()
            prof.step()
    run.sync()


def _write(out: Path, facts: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "injected.json").write_text(json.dumps(facts, indent=2) + "\n")
    print(f"{facts['scenario']}: {facts['cause_kind']} on rank {facts['late_rank']}: {facts['injected_ms_per_step']:.3f} ms per step",
          flush=True)


def _injected(run: Run, mode: str, late: bool):
    """The extra products of a ``compute`` scenario on the late rank (None elsewhere), the facts they add, and the timers
    of injected device and host work: ``(extra, more, dev_t, host_t)``."""
    s = run.size
    extra = _extra_products(run) if mode == "compute" and late else None
    more = {"extra_products": s["products"], "product_size": s["mm"], "alone_ms_per_step": _device_ms(extra, run.cuda)} if extra else {}
    return extra, more, Timer(run.cuda), Timer(False)


def _write_straggler(run: Run, mode: str, late_rank: int | None, parallelism: str, where: str, dev_t: Timer, host_t: Timer,
                     more: dict, **shape) -> None:
    """The facts of a balanced, compute or sleep scenario, written by rank 0 (balanced) or the late rank."""
    if mode == "balanced" and run.rank == 0:
        _write(run.out, run.control(parallelism, **shape))
    elif mode == "compute" and run.rank == late_rank:
        _write(run.out, run.facts(parallelism, late_rank, f"extra device compute on rank {late_rank} {where}", "compute",
                                  dev_t.profiled(), **shape, **more))
    elif mode == "sleep" and run.rank == late_rank:
        _write(run.out, run.facts(parallelism, late_rank, f"host sleep on rank {late_rank} before each forward", "sleep",
                                  host_t.profiled(), **shape))


def _extra_products(run: Run):
    """The extra device work of the compute scenarios: ``products`` products of two square matrices."""
    n = run.size["mm"]
    a, b = torch.randn(n, n, device=run.dev), torch.randn(n, n, device=run.dev)

    def extra() -> None:
        for _ in range(run.size["products"]):
            torch.mm(a, b)

    return extra


class _Sleepy(torch.utils.data.Dataset):
    """Rows of ones; each item sleeps ``sleep_s`` first (0 on every rank but rank L)."""

    def __init__(self, n: int, width: int, sleep_s: float) -> None:
        self.n, self.width, self.sleep_s = n, width, sleep_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        if self.sleep_s:
            time.sleep(self.sleep_s)
        return torch.ones(self.width)


def _cpu_op(n: int) -> torch.Tensor:
    return torch.randn(n, device="cpu").sort().values


def _cpu_op_size(target_ms: float) -> int:
    """The length for which ``_cpu_op`` takes about ``target_ms`` here (one calibration before the loop)."""
    n = 1 << 18
    _cpu_op(n)
    t0 = time.perf_counter()
    _cpu_op(n)
    return max(1 << 12, int(n * target_ms / max((time.perf_counter() - t0) * 1e3, 1e-3)))


def _family_model(run: Run, family: str):
    """The MLP of the ``ddp``, ``fsdp`` and ``mesh`` scenarios (the same full weights on every rank: seed 0), wrapped
    for its parallelism, and what runs after each backward (the mesh's data-parallel all-reduce; None for the others).
    The mesh's helper seeds its batch per dp rank, the same across its tp pair."""
    s = run.size
    torch.manual_seed(0)
    model = _mlp(s["width"], s["depth"]).to(run.dev)
    after_backward: Callable[[], None] | None = None
    if family == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        model = DDP(model, device_ids=[run.local] if run.cuda else None)
    elif family == "fsdp":
        from torch.distributed.device_mesh import init_device_mesh

        fully_shard = _fully_shard()
        mesh = init_device_mesh(run.dev.type, (run.world,))
        for m in model:
            if isinstance(m, nn.Linear):
                fully_shard(m, mesh=mesh)
        fully_shard(model, mesh=mesh)
    else:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

        if run.world % 2:
            raise SystemExit(f"{run.scenario} needs an even world size (dp x tp = world/2 x 2), not {run.world}")
        mesh = init_device_mesh(run.dev.type, (run.world // 2, 2), mesh_dim_names=("dp", "tp"))
        dp_group, dp = mesh["dp"].get_group(), run.world // 2
        plan: dict = {}
        for i in range(0, 2 * s["depth"], 4):  # Linear, ReLU, Linear, ReLU: column- then row-wise
            plan[str(i)], plan[str(i + 2)] = ColwiseParallel(), RowwiseParallel()
        model = parallelize_module(model, mesh["tp"], plan)
        torch.manual_seed(1 + mesh["dp"].get_local_rank())  # one batch per dp rank, the same across its tp pair

        def reduce_dp() -> None:
            with torch.no_grad():
                for p in model.parameters():  # data parallel over dp: average each gradient's local shard
                    g = p.grad.to_local() if hasattr(p.grad, "to_local") else p.grad
                    dist.all_reduce(g, group=dp_group)
                    g.div_(dp)

        after_backward = reduce_dp
    return model, after_backward


def ddp(run: Run, mode: str) -> None:
    """The DDP scenarios with one MLP: balanced, compute, sleep, dataloader, cpu-op, pinned-alloc, device-alloc, pageable."""
    s, dev, late = run.size, run.dev, run.rank == run.late
    model, _ = _family_model(run, "ddp")
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(s["batch"], s["width"], device=dev)
    extra, more, dev_t, host_t = _injected(run, mode, late)
    loader_it = None
    if mode == "dataloader":
        rows = 8
        ds = _Sleepy(rows * STEPS, s["width"], SLEEP_S / rows if late else 0.0)
        loader_it = iter(torch.utils.data.DataLoader(ds, batch_size=rows, num_workers=0))
        more.update(rows_per_batch=rows, sleep_ms_per_row=SLEEP_S / rows * 1e3 if late else 0.0)
    elif mode == "dataloader-workers":
        rows, workers = 8, 2
        ds = _Sleepy(rows * STEPS, s["width"], 20 * SLEEP_S / rows if late else 0.0)
        loader_it = iter(torch.utils.data.DataLoader(ds, batch_size=rows, num_workers=workers))
        more.update(rows_per_batch=rows, num_workers=workers, sleep_ms_per_row=20 * SLEEP_S / rows * 1e3 if late else 0.0)
    cpu_n = 0
    if mode == "cpu-op" and late:
        cpu_n = _cpu_op_size(25.0)
        more.update(cpu_op=f"torch.randn({cpu_n}, device='cpu').sort()", cpu_threads=torch.get_num_threads())
    host_batch = None
    if mode == "pageable" and late:
        rows = (256 << 20) // (4 * s["width"]) if run.cuda else s["batch"] * 4
        host_batch = torch.full((max(rows, s["batch"]), s["width"]), 0.5)  # pageable (not pinned)
        more.update(copy_mb=host_batch.numel() * 4 / 2**20)
    pinned_floats, kept = (256 << 20) // 4, []
    big_floats, big = (4 << 30) // 4, None
    copy_t = Timer(run.cuda)
    step_inputs = x
    logged: list[float] = []
    if LOG_EVERY_STEP:
        more.update(log_every_step=True)
    with _profile(run.out, run.rank, run.cuda) as prof:
        for step in range(STEPS):
            if loader_it is not None:
                with host_t(step):
                    xb = next(loader_it)
                step_inputs = xb.to(dev).repeat(s["batch"] // xb.shape[0], 1)
            if late and mode == "sleep":
                with host_t(step):
                    time.sleep(SLEEP_S)
            elif late and mode == "cpu-op":
                with host_t(step):
                    _cpu_op(cpu_n)
            elif late and mode == "device-alloc":
                big = None  # (its block goes back to the cache, and empty_cache gives it back to the driver)
                torch.cuda.synchronize()  # (cudaFree waits for the device anyway: time the calls alone)
                with host_t(step):
                    torch.cuda.empty_cache()
                    big = torch.empty(big_floats, device=dev)
            elif late and mode == "pageable":
                assert host_batch is not None
                torch.cuda.synchronize()  # (the copy waits for the device's queue anyway: time the copy alone)
                with host_t(step), copy_t(step):
                    on_dev = host_batch.to(dev)
                step_inputs = on_dev[: s["batch"]]
            y = model(step_inputs)
            loss = y.square().mean()
            if extra is not None:
                with dev_t(step):
                    extra()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if LOG_EVERY_STEP:
                logged.append(loss.item())  # (every rank: the queue drains here)
            if late and mode == "pinned-alloc":
                with host_t(step):
                    buf = torch.empty(pinned_floats, pin_memory=True)
                    buf[: y.numel()].copy_(y.detach().flatten(), non_blocking=True)
                kept.append(buf)  # kept: the caching host allocator cannot reuse its block
                if step == PROFILED[-1]:
                    kept.clear()
            prof.step()
    run.sync()
    del big
    writer = 0 if mode == "balanced" else run.late
    if run.rank != writer:
        return
    if mode == "balanced":
        facts = run.control("ddp", **more)
    elif mode == "compute":
        facts = run.facts("ddp", run.late, f"extra device compute on rank {run.late} between forward and backward", "compute", dev_t.profiled(),
                          **more)
    elif mode == "sleep":
        facts = run.facts("ddp", run.late, f"host sleep on rank {run.late} before each forward", "sleep", host_t.profiled(), **more)
    elif mode == "dataloader":
        facts = run.facts("ddp", run.late, f"DataLoader (num_workers=0) whose items sleep on rank {run.late}", "dataloader", host_t.profiled(),
                          **more)
    elif mode == "dataloader-workers":
        facts = run.facts("ddp", run.late, f"DataLoader (2 workers) too slow for the device on rank {run.late}: the loop waits in next()",
                          "dataloader", host_t.profiled(), wait_ms_by_step={k: round(v, 3) for k, v in host_t.per_step().items()}, **more)
    elif mode == "cpu-op":
        facts = run.facts("ddp", run.late, f"CPU tensor op on rank {run.late} each step", "cpu_op", host_t.profiled(), **more)
    elif mode == "pinned-alloc":
        facts = run.facts("ddp", run.late, f"fresh 256 MB pinned host buffer allocated on rank {run.late} each step (results kept)",
                          "pinned_alloc", host_t.profiled(), pinned_mb=pinned_floats * 4 / 2**20, **more)
    elif mode == "device-alloc":
        facts = run.facts("ddp", run.late, f"torch.cuda.empty_cache() and a fresh 4 GB device tensor on rank {run.late} each step",
                          "device_alloc", host_t.profiled(), alloc_gb=big_floats * 4 / 2**30,
                          note="the other blocks that empty_cache released are allocated again later in the step: not counted", **more)
    else:
        facts = run.facts("ddp", run.late, f"input batch copied from pageable host memory on rank {run.late} each step", "pageable_copy",
                          host_t.profiled(), copy_device_ms_per_step=copy_t.profiled(), **more)
    _write(run.out, facts)


class _ItemMLP(nn.Module):
    """A deep, narrow MLP that reads one value of its activation back to the host after each layer while ``sync`` is on."""

    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.sync = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.relu(layer(x))
            if self.sync:
                x[0, 0].item()
        return x


def ddp_item(run: Run) -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP

    s = run.size
    torch.manual_seed(0)
    net = _ItemMLP(s["item_width"], s["item_depth"]).to(run.dev)
    model = DDP(net, device_ids=[run.local] if run.cuda else None)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(s["item_batch"], s["item_width"], device=run.dev)

    def step() -> float:
        t0 = time.perf_counter()
        model(x).square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        run.sync()  # (the step's end, for the clock; in both variants)
        return (time.perf_counter() - t0) * 1e3

    _profile_steps(run, step)

    def with_syncs(on: bool):
        def go() -> None:
            net.sync = on
            step()
        return go

    ms = _blocks(run, {"with": with_syncs(True), "without": with_syncs(False)})
    with_ms, plain_ms = ms["with"], ms["without"]
    if run.rank == 0:
        _write(run.out, run.facts("ddp", None, f".item() after each of {s['item_depth']} layers in forward, on every rank", "sync", with_ms - plain_ms,
                                  items_per_step=s["item_depth"], step_ms_with_syncs=with_ms, step_ms_without_syncs=plain_ms,
                                  measured=BLOCKS_MEASURED))


BLOCKS_MEASURED = ("unprofiled, after the profiled loop: the mean step time of blocks of steps with the cause minus that of "
                   "blocks without it, taken in turn (a device synchronize and a barrier before each block, a synchronize after it)")


def _blocks(run: Run, variants: dict, blocks: int = 3, n: int = 4) -> dict[str, float]:
    """Mean ms per step of each variant (a step function by name), unprofiled: ``blocks`` rounds in which each variant
    runs ``n`` steps in turn, after one warm-up step of each (every rank runs the same blocks)."""
    for step in variants.values():
        step()
    ms: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(blocks):
        for name, step in variants.items():
            run.sync()
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(n):
                step()
            run.sync()
            ms[name].append((time.perf_counter() - t0) * 1e3 / n)
    return {k: _mean(v) for k, v in ms.items()}


def item_log(run: Run, family: str) -> None:
    """``ddp-item-log``, ``fsdp-item-log``, ``mesh-item-log`` (module docstring)."""
    s, late = run.size, run.rank == run.late
    model, after_backward = _family_model(run, family)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(s["batch"], s["width"], device=run.dev)
    prep_s = SLEEP_S / 2
    logged: list[float] = []

    def step(log: bool = True, prep: bool = True) -> None:
        if prep:
            time.sleep(prep_s)  # (every rank: the next batch made on the host)
        loss = model(x).square().mean()
        loss.backward()
        if after_backward is not None:
            after_backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if log and late:
            logged.append(loss.item())

    _profile_steps(run, step)
    ms = _blocks(run, {"log": step, "no_log": lambda: step(log=False), "log_no_prep": lambda: step(prep=False)})
    if late:
        parallelism = {"ddp": "ddp", "fsdp": "fsdp2", "mesh": "2d-tp-dp"}[family]
        shape = {"mesh": {"dp": run.world // 2, "tp": 2}} if family == "mesh" else {}
        _write(run.out, run.facts(parallelism, run.late, f"loss.item() logged on rank {run.late} at each step's end; every rank "
                                  f"prepares its batch on the host ({prep_s * 1e3:.0f} ms sleep)", "sync", ms["log"] - ms["no_log"],
                                  step_ms_with_log=ms["log"], step_ms_without_log=ms["no_log"], step_ms_without_prep=ms["log_no_prep"],
                                  prep_ms=prep_s * 1e3, prep_cost_ms_per_step=ms["log"] - ms["log_no_prep"],
                                  measured=BLOCKS_MEASURED + "; prep_cost_ms_per_step: the same, of blocks without every rank's "
                                  "preparation (its sleep), the log kept", **shape))


def amp_scaler(run: Run) -> None:
    """``ddp-amp-scaler`` (module docstring)."""
    s = run.size
    model, _ = _family_model(run, "ddp")
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(s["batch"], s["width"], device=run.dev)
    low = torch.float16 if run.cuda else torch.bfloat16
    scaler = torch.amp.GradScaler(run.dev.type)
    prep_s = SLEEP_S / 2

    def step(scaled: bool = True, prep: bool = True) -> None:
        if prep:
            time.sleep(prep_s)  # (every rank: the next batch made on the host)
        with torch.autocast(run.dev.type, dtype=low):
            loss = model(x).square().mean()
        if scaled:
            scaler.scale(loss).backward()
            scaler.step(opt)  # (reads found_inf back to the host: a sync)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        opt.zero_grad(set_to_none=True)

    _profile_steps(run, step)
    ms = _blocks(run, {"scaled": step, "unscaled": lambda: step(scaled=False), "scaled_no_prep": lambda: step(prep=False)})
    if run.rank == 0:
        _write(run.out, run.facts("ddp", None, f"GradScaler.step's found-inf read (a sync) each step, every rank; every rank prepares its "
                                  f"batch on the host ({prep_s * 1e3:.0f} ms sleep)", "sync", ms["scaled"] - ms["unscaled"],
                                  step_ms_scaled=ms["scaled"], step_ms_unscaled=ms["unscaled"], step_ms_scaled_no_prep=ms["scaled_no_prep"],
                                  prep_ms=prep_s * 1e3, prep_cost_ms_per_step=ms["scaled"] - ms["scaled_no_prep"], autocast_dtype=str(low),
                                  measured=BLOCKS_MEASURED))


def empty_cache(run: Run) -> None:
    """``ddp-empty-cache`` (module docstring)."""
    s, late = run.size, run.rank == run.late
    model, _ = _family_model(run, "ddp")
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(s["batch"], s["width"], device=run.dev)
    floats = int(float(os.environ.get("MATRIX_ALLOC_GB", "4")) * (1 << 30)) // 4
    held: list = [None]

    def step(alloc: bool = True) -> None:
        if alloc and late:
            held[0] = None  # (its block goes back to the cache, and empty_cache gives it back to the driver)
            torch.cuda.empty_cache()
            held[0] = torch.empty(floats, device=run.dev)
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    _profile_steps(run, step)
    ms = _blocks(run, {"alloc": step, "no_alloc": lambda: step(alloc=False)})
    held[0] = None
    if late:
        _write(run.out, run.facts("ddp", run.late, f"torch.cuda.empty_cache() and a fresh {floats * 4 / 2**30:.0f} GB device tensor on rank "
                                  f"{run.late} each step, no sync around them", "device_alloc", ms["alloc"] - ms["no_alloc"],
                                  step_ms_with_alloc=ms["alloc"], step_ms_without_alloc=ms["no_alloc"], alloc_gb=floats * 4 / 2**30,
                                  measured=BLOCKS_MEASURED))


def ddp_accum(run: Run, mode: str) -> None:
    """``ddp-accum-balanced``, ``ddp-accum-compute`` (module docstring)."""
    s, late = run.size, run.rank == run.late
    model, _ = _family_model(run, "ddp")
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    micro = 4
    x = torch.randn(s["batch"] // micro, s["width"], device=run.dev)
    extra, more, dev_t, host_t = None, {}, Timer(run.cuda), Timer(False)
    if mode == "compute" and late:
        n, per = s["mm"], max(s["products"] // micro, 1)
        a, b = torch.randn(n, n, device=run.dev), torch.randn(n, n, device=run.dev)

        def extra() -> None:
            for _ in range(per):
                torch.mm(a, b)

        more = {"extra_products_per_microbatch": per, "product_size": n, "alone_ms_per_microbatch": _device_ms(extra, run.cuda)}
    with _profile(run.out, run.rank, run.cuda) as prof:
        for step in range(STEPS):
            for m in range(micro):
                ctx = model.no_sync() if m < micro - 1 else contextlib.nullcontext()
                with ctx:
                    loss = model(x).square().mean()
                    if extra is not None:
                        with dev_t(step):
                            extra()
                    loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            prof.step()
    run.sync()
    more.update(microbatches=micro, no_sync_microbatches=micro - 1)
    _write_straggler(run, mode, run.late, "ddp", "in each microbatch, gradients accumulated under no_sync", dev_t, host_t, more)


def _raise_recompile_limit(n: int = 64) -> None:
    import torch._dynamo.config as cfg

    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(cfg, name):
            with contextlib.suppress(Exception):
                setattr(cfg, name, max(n, getattr(cfg, name)))


def ddp_recompile(run: Run) -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP

    s = run.size
    _raise_recompile_limit()
    torch.manual_seed(0)
    model = torch.compile(DDP(_mlp(s["compile_width"], s["compile_depth"]).to(run.dev), device_ids=[run.local] if run.cuda else None),
                          dynamic=False)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def batch(step: int) -> int:
        return s["compile_batch"] + 8 * step

    def step(bs: int) -> float:
        x = torch.randn(bs, s["compile_width"], device=run.dev)
        run.sync()
        t0 = time.perf_counter()
        model(x).square().mean().backward()  # compiles forward and (at its first call) backward for a new shape
        run.sync()
        ms = (time.perf_counter() - t0) * 1e3
        opt.step()
        opt.zero_grad(set_to_none=True)
        return ms

    warm_ms = step(batch(-1))  # compiled once before the profiler (imports, first compile)
    step_ms = []
    with _profile(run.out, run.rank, run.cuda) as prof:
        for i in range(STEPS):
            step_ms.append(step(batch(i)))
            prof.step()
    again_ms = [step(batch(i)) for i in PROFILED]  # the profiled steps' shapes again: compiled already
    new, old = _mean(step_ms[i] for i in PROFILED), _mean(again_ms)
    if run.rank == 0:
        _write(run.out, run.facts("ddp", None, "torch.compile (dynamic=False) recompiles every step: a new batch size each step, every rank",
                                  "recompile", new - old, first_compile_ms=warm_ms, fwd_bwd_ms_new_shape=new, fwd_bwd_ms_repeated_shape=old,
                                  batch_sizes=[batch(i) for i in range(STEPS)],
                                  measured="host time of forward+backward (device synchronized around it) at a new shape minus at a shape "
                                           "compiled already, mean over the profiled steps' shapes"))


class _Attention(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.ReLU(), nn.Linear(2 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        o = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(o.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(x)


def _sdpa_backend(run: Run, d: int, heads: int):
    """cuDNN's attention backend (plans built per shape) if it runs here, else PyTorch's choice."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        probe = _Attention(d, heads).to(run.dev, torch.bfloat16)
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            probe(torch.randn(1, 64, d, device=run.dev, dtype=torch.bfloat16, requires_grad=True)).sum().backward()
        torch.cuda.synchronize()
        return "cudnn", lambda: sdpa_kernel([SDPBackend.CUDNN_ATTENTION])
    except Exception as e:  # any failure: PyTorch picks
        print(f"rank {run.rank}: cuDNN attention unavailable ({type(e).__name__}: {str(e)[:120]}); PyTorch picks the backend", flush=True)
        return "default", contextlib.nullcontext


def ddp_new_shape(run: Run) -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP

    s = run.size
    d, heads, t = s["attn_dim"], s["attn_heads"], s["attn_seq"]
    backend, attn = _sdpa_backend(run, d, heads)
    torch.manual_seed(0)
    net = nn.Sequential(*[_Attention(d, heads) for _ in range(s["attn_blocks"])]).to(run.dev, torch.bfloat16)
    model = DDP(net, device_ids=[run.local])
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def batch(step: int) -> int:
        return s["attn_batch"] + 2 * step

    def step(bs: int) -> float:
        x = torch.randn(bs, t, d, device=run.dev, dtype=torch.bfloat16)
        run.sync()
        t0 = time.perf_counter()
        with attn():
            model(x).float().square().mean().backward()  # a new shape: new attention plans (forward and backward)
        run.sync()
        ms = (time.perf_counter() - t0) * 1e3
        opt.step()
        opt.zero_grad(set_to_none=True)
        return ms

    step(batch(-1))
    step_ms = []
    with _profile(run.out, run.rank, run.cuda) as prof:
        for i in range(STEPS):
            step_ms.append(step(batch(i)))
            prof.step()
    again_ms = [step(batch(i)) for i in PROFILED]
    new, old = _mean(step_ms[i] for i in PROFILED), _mean(again_ms)
    if run.rank == 0:
        _write(run.out, run.facts("ddp", None, f"a new batch size every step through scaled_dot_product_attention ({backend} backend), every rank",
                                  "new_shape", new - old, sdpa_backend=backend, fwd_bwd_ms_new_shape=new, fwd_bwd_ms_repeated_shape=old,
                                  first_call_ms_by_step=[round(v, 3) for v in step_ms], repeated_call_ms=[round(v, 3) for v in again_ms],
                                  batch_sizes=[batch(i) for i in range(STEPS)],
                                  measured="host time of forward+backward (device synchronized around it) at a new shape minus at a shape "
                                           "seen already, mean over the profiled steps' shapes"))


def _fully_shard():
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:  # before 2.6
        from torch.distributed._composable.fsdp import fully_shard
    return fully_shard


def fsdp(run: Run, mode: str) -> None:
    s, late = run.size, run.rank == run.late
    model, _ = _family_model(run, "fsdp")
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    torch.manual_seed(1 + run.rank)
    x = torch.randn(s["batch"], s["width"], device=run.dev)
    extra, more, dev_t, host_t = _injected(run, mode, late)
    with _profile(run.out, run.rank, run.cuda) as prof:
        for step in range(STEPS):
            if late and mode == "sleep":
                with host_t(step):
                    time.sleep(SLEEP_S)
            loss = model(x).square().mean()
            if extra is not None:
                with dev_t(step):
                    extra()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            prof.step()
    run.sync()
    _write_straggler(run, mode, run.late, "fsdp2", "between forward and backward", dev_t, host_t, more)


def mesh2d(run: Run, mode: str) -> None:
    s, dp = run.size, run.world // 2
    late_rank = {"compute": run.late if LATE else 0, "sleep": run.late if LATE else min(3, run.world - 1)}.get(mode)
    late = run.rank == late_rank
    model, reduce_dp = _family_model(run, "mesh")
    assert reduce_dp is not None
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(s["batch"], s["width"], device=run.dev)
    extra, more, dev_t, host_t = _injected(run, mode, late)
    with _profile(run.out, run.rank, run.cuda) as prof:
        for step in range(STEPS):
            if late and mode == "sleep":
                with host_t(step):
                    time.sleep(SLEEP_S)
            if extra is not None:
                with dev_t(step):
                    extra()
            model(x).square().mean().backward()
            reduce_dp()
            opt.step()
            opt.zero_grad(set_to_none=True)
            prof.step()
    run.sync()
    _write_straggler(run, mode, late_rank, "2d-tp-dp", "before its forward (its first TP all-reduce)", dev_t, host_t, more,
                     mesh={"dp": dp, "tp": 2})


class _Stage(nn.Module):
    """One pipeline stage: an MLP, and (on the late stage) an extra matrix product in each forward, timed."""

    def __init__(self, width: int, depth: int, extra: tuple[torch.Tensor, torch.Tensor] | None, timer: Timer) -> None:
        super().__init__()
        self.body = _mlp(width, depth)
        self.extra, self.timer, self.step = extra, timer, -1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.body(x)
        if self.extra is not None and x.device.type != "meta":
            with self.timer(self.step):
                torch.mm(*self.extra)
        return y


def pipeline(run: Run, mode: str) -> None:
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B

    s, microbatches = run.size, 8
    late_rank = (run.late if LATE else min(2, run.world - 1)) if mode == "compute" else None
    torch.manual_seed(0)
    timer = Timer(run.cuda)
    extra = None
    if run.rank == late_rank:
        m, n = s["pp_mm"]
        extra = (torch.randn(m, n, device=run.dev), torch.randn(n, n, device=run.dev))
    stage_mod = _Stage(s["pp_width"], s["pp_depth"], extra, timer).to(run.dev)
    stage = PipelineStage(stage_mod, run.rank, run.world, run.dev)
    sched = Schedule1F1B(stage, n_microbatches=microbatches, loss_fn=nn.MSELoss())
    opt = torch.optim.SGD(stage_mod.parameters(), lr=1e-3)
    x = torch.randn(s["pp_batch"], s["pp_width"], device=run.dev)
    y = torch.randn(s["pp_batch"], s["pp_width"], device=run.dev)
    with _profile(run.out, run.rank, run.cuda) as prof:
        for step in range(STEPS):
            stage_mod.step = step
            if run.rank == 0:
                sched.step(x)
            elif run.rank == run.world - 1:
                sched.step(target=y)
            else:
                sched.step()
            opt.step()
            opt.zero_grad(set_to_none=True)
            prof.step()
    run.sync()
    shape = {"stages": run.world, "microbatches": microbatches, "schedule": "1F1B",
             "ideal_bubble": (run.world - 1) / (microbatches + run.world - 1)}
    if mode == "balanced" and run.rank == 0:
        _write(run.out, run.control("pipeline", **shape))
    elif mode == "compute" and run.rank == late_rank:
        per_step = timer.profiled()
        _write(run.out, run.facts("pipeline", late_rank, f"extra device compute in stage {late_rank}'s forward, every microbatch", "compute",
                                  per_step, extra_ms_per_microbatch=per_step / microbatches, product=list(s["pp_mm"]) + [s["pp_mm"][1]],
                                  forwards_timed_per_step=timer.count(PROFILED[0]), **shape))


def expert(run: Run, skew: bool) -> None:
    s = run.size
    w, c, late = s["ep_width"], s["ep_tokens"], run.late
    send = [c * (4 if skew and j == late else 1) for j in range(run.world)]  # tokens this rank sends to expert j
    recv = [send[run.rank]] * run.world  # every rank sends this rank's expert as many as this rank sends it
    torch.manual_seed(0)
    gate = nn.Linear(w, w).to(run.dev)
    expert_mlp = nn.Sequential(nn.Linear(w, 4 * w), nn.ReLU(), nn.Linear(4 * w, w)).to(run.dev)
    torch.manual_seed(1 + run.rank)
    x = torch.randn(sum(send), w, device=run.dev)
    timer = Timer(run.cuda)
    with torch.no_grad(), _profile(run.out, run.rank, run.cuda) as prof:
        for step in range(STEPS):
            h = gate(x)
            got = torch.empty(sum(recv), w, device=run.dev)
            dist.all_to_all_single(got, h, output_split_sizes=recv, input_split_sizes=send)
            with timer(step):
                out = expert_mlp(got)
            back = torch.empty(sum(send), w, device=run.dev)
            dist.all_to_all_single(back, out, output_split_sizes=send, input_split_sizes=recv)
            loss = (x + back).square().mean()
            dist.all_reduce(loss)
            prof.step()
    run.sync()
    mine = timer.profiled()
    every: list = [None] * run.world
    dist.all_gather_object(every, mine)
    shape = {"experts": run.world, "tokens_to_each_expert": [run.world * c * (4 if skew and j == late else 1) for j in range(run.world)],
             "expert_ms_by_rank": [round(v, 3) for v in every], "note": "forward only (no backward), then an all-reduce of the loss"}
    if not skew and run.rank == 0:
        _write(run.out, run.control("expert", **shape))
    elif skew and run.rank == late:
        others = _mean(v for r, v in enumerate(every) if r != late)
        _write(run.out, run.facts("expert", late, f"rank {late}'s expert gets 4x the tokens of each other expert (uneven all_to_all splits)",
                                  "compute", every[late] - others, **shape,
                                  measured="rank L's expert time (CUDA events around the expert call) minus the mean of the others'"))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scenario", choices=SCENARIOS)
    p.add_argument("--out", type=Path)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--list", action="store_true", help="print the scenarios' names, one a line, and exit")
    a = p.parse_args()
    if a.list:
        print("\n".join(SCENARIOS))
        return
    if not a.scenario or not a.out:
        p.error("--scenario and --out are required")
    rank0 = int(os.environ.get("RANK", "0")) == 0
    if a.device == "cpu" and a.scenario in CUDA_ONLY:
        if rank0:
            print(f"{a.scenario}: skipped on --device cpu (needs a GPU: {CUDA_ONLY[a.scenario]})")
        return
    if a.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device here: use --device cpu for a smoke test")
    a.out.mkdir(parents=True, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    run = Run(a.scenario, a.out, a.device)
    family, _, mode = a.scenario.partition("-")
    if a.scenario == "ddp-item":
        ddp_item(run)
    elif a.scenario == "ddp-empty-cache":
        empty_cache(run)
    elif a.scenario == "ddp-amp-scaler":
        amp_scaler(run)
    elif a.scenario.startswith("ddp-accum-"):
        ddp_accum(run, a.scenario.rsplit("-", 1)[1])
    elif a.scenario.endswith("-item-log"):
        item_log(run, family)
    elif a.scenario == "ddp-recompile":
        ddp_recompile(run)
    elif a.scenario == "ddp-new-shape":
        ddp_new_shape(run)
    elif family == "ddp":
        ddp(run, mode)
    elif family == "fsdp":
        fsdp(run, mode)
    elif family == "mesh":
        mesh2d(run, mode)
    elif family == "pp":
        pipeline(run, mode)
    else:
        expert(run, skew=mode == "skew")
    dist.barrier()
    dist.destroy_process_group()
    if rank0:
        print(f"{a.scenario}: traces in {a.out}")


if __name__ == "__main__":
    main()
