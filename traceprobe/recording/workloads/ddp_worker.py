"""One rank of ``data-parallel``'s ``ddp`` variant; run by torchrun, never imported by record().

Usage (what the launcher runs)::

    python -m torch.distributed.run --standalone --nproc-per-node N \\
        -m traceprobe.recording.workloads.ddp_worker --out DIR --workload W --variant V \\
        --device cuda|cpu --wall-json FILE --width W --layers L --batch B --steps S

Each rank ends when torchrun does, however torchrun ends (``reading.forked.die_with_parent``): ``kill -9`` of
``record`` sends torchrun SIGTERM (:mod:`traceprobe.recording.launch`), and a rank whose torchrun went without
stopping it would run on, orphaned. Each rank trains the ``data-parallel`` model wrapped in DistributedDataParallel
(NCCL on ``cuda:<local rank>``, gloo on the CPU): one warm-up step, ``S`` timed
steps (synchronized, not profiled), then five steps under ``torch.profiler`` with
``schedule(wait=1, warmup=1, active=3)``; the three active steps appear as
``ProfilerStep#2..4`` in ``DIR/W.V.rank<r>.pt.trace.json.gz`` (written
atomically), whose ``distributedInfo`` carries the rank. Rank 0 writes
``{"wall_s", "profiled_wall_s", ...}`` to ``FILE`` (atomically).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from torch.distributed.elastic.multiprocessing.errors import record

from ...fileio import atomic_write
from ...manifest import trace_name
from ...reading.forked import die_with_parent
from ..quiet import kineto_quiet
from ..trace_files import write_trace
from .data_parallel import make_batch, make_model, train

WAIT, WARMUP, ACTIVE = 1, 1, 3


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m traceprobe.recording.workloads.ddp_worker")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--workload", required=True)
    ap.add_argument("--variant", required=True)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--wall-json", type=Path, required=True)
    ap.add_argument("--width", type=int, required=True)
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--batch", type=int, required=True, help="per rank")
    ap.add_argument("--steps", type=int, required=True, help="timed steps")
    return ap.parse_args(argv)


def _exporter(out: Path, dest_name: str):  # noqa: ANN202
    def on_trace_ready(prof) -> None:  # noqa: ANN001
        write_trace(prof, out, lambda _: dest_name, exclusive=False)

    return on_trace_ready


def _end_with_torchrun() -> None:
    """End this rank when its parent, torchrun's agent, ends (``die_with_parent``), and at once where the agent went
    before that (this rank's parent is then another process: init or a subreaper)."""
    import psutil

    parent = os.getppid()
    die_with_parent(parent)
    try:
        cmd = " ".join(psutil.Process(parent).cmdline())
    except psutil.Error:
        cmd = ""
    if "torch.distributed.run" not in cmd and "torchrun" not in cmd:
        os._exit(1)


@record
def main(argv: list[str] | None = None) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.profiler import ProfilerActivity, profile, schedule

    a = _args(argv)
    _end_with_torchrun()
    rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    cuda = a.device == "cuda"
    if cuda:
        torch.cuda.set_device(local)
        dev = f"cuda:{local}"
        dist.init_process_group("nccl", device_id=torch.device(dev))
    else:
        dev = "cpu"
        dist.init_process_group("gloo")

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(dev)

    try:
        model = DDP(make_model(a.width, a.layers, dev), device_ids=[local] if cuda else None)
        opt = torch.optim.SGD(model.parameters(), lr=1e-4)
        x, target = make_batch(a.batch, a.width, dev, seed=1 + rank)  # each rank its own shard

        train(model, opt, x, target, 1)  # warm-up: kernels, NCCL communicators, buckets
        sync()
        dist.barrier()
        t0 = time.perf_counter()
        train(model, opt, x, target, a.steps)
        sync()
        wall = time.perf_counter() - t0

        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        sched = schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1)
        ready = _exporter(a.out, trace_name(a.workload, a.variant, rank))
        with kineto_quiet(), profile(activities=acts, schedule=sched, on_trace_ready=ready) as prof:
            for i in range(WAIT + WARMUP + ACTIVE):
                if i == WAIT + WARMUP:
                    sync()
                    p0 = time.perf_counter()
                train(model, opt, x, target, 1)
                if i == WAIT + WARMUP + ACTIVE - 1:
                    sync()
                    profiled = time.perf_counter() - p0
                prof.step()  # the last call ends the active window and writes the trace
        dist.barrier()
        if rank == 0:
            info = {"wall_s": wall, "timed_steps": a.steps, "profiled_wall_s": profiled, "profiled_steps": ACTIVE,
                    "world_size": dist.get_world_size(), "backend": dist.get_backend()}
            atomic_write(a.wall_json, json.dumps(info) + "\n")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
    # Skip interpreter teardown once everything is written: with gloo on torch 2.13 it
    # can deadlock (a gloo thread freeing the last all-reduce waits for the GIL while
    # the main thread, holding it, waits for that thread).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
