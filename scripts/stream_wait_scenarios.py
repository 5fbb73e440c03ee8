"""One-GPU loops whose streams wait on each other through CUDA events, profiled the way most jobs are.

Each scenario profiles itself with plain ``torch.profiler.profile`` + ``schedule(wait=1, warmup=1, active=3)`` +
``tensorboard_trace_handler``, with Python stacks (``with_stack=True``) and, unless ``--no-sync-events``, Kineto's
CUDA synchronization events (``_ExperimentalConfig(enable_cuda_sync_events=True)``: a ``cuda_sync`` event per
``cudaStreamWaitEvent`` and ``cudaEventSynchronize``, naming the ``cudaEventRecord`` it waits for). It writes
``injected.json`` beside its traces: what was built in, measured in the same run (CUDA events around device work,
``perf_counter`` around host work).

Scenarios (``--scenario``):

- ``side-stream``: each step, a short producer on the main stream; a side stream waits for it (an event), runs
  ``--side`` products; the main stream runs its own ``--main`` products, then waits for the side stream's event
  before the consumer. With more side than main products, the consumer waits for the side stream.
- ``event-sync``: each step, products on the main stream, an event recorded after them, ``event.synchronize()``
  on the host, then a host function (``prepare_batch``) that sleeps ``--sleep-ms`` before the next launches.

Example::

    python scripts/stream_wait_scenarios.py --scenario side-stream --out runs/side-stream
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

STEPS = 8
SCHEDULE = {"wait": 1, "warmup": 1, "active": 3, "repeat": 1}
PROFILED = range(SCHEDULE["wait"] + SCHEDULE["warmup"], SCHEDULE["wait"] + SCHEDULE["warmup"] + SCHEDULE["active"])  # steps 2, 3, 4


def _profile(out: Path, sync_events: bool):
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    extra = {}
    if sync_events:
        extra["experimental_config"] = torch._C._profiler._ExperimentalConfig(enable_cuda_sync_events=True)
    return profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=schedule(**SCHEDULE),
                   on_trace_ready=tensorboard_trace_handler(str(out)), with_stack=True, **extra)


def prepare_batch(sleep_s: float) -> float:
    """Host work outside any torch op: a sleep, as slow input preparation is (returns its measured seconds)."""
    t0 = time.perf_counter()
    time.sleep(sleep_s)
    return time.perf_counter() - t0


def _timed_products(x: torch.Tensor, b: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.cuda.Event, torch.cuda.Event]:
    """``x @ b`` ``n`` times on the current stream, between two timing events: (the result, start event, end event)."""
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(n):
        x = x @ b
    e1.record()
    return x, e0, e1


def side_stream(out: Path, args: argparse.Namespace) -> dict:
    n = args.size
    a = torch.randn(n, n, device="cuda")
    b = torch.randn(n, n, device="cuda")
    side = torch.cuda.Stream()
    side_ms: list[float] = []
    main_ms: list[float] = []
    with _profile(out, args.sync_events) as prof:
        for step in range(STEPS):
            x = a @ b  # producer
            produced = torch.cuda.Event()
            produced.record()
            with torch.cuda.stream(side):
                side.wait_event(produced)
                y, s0, s1 = _timed_products(x, b, args.side)
            z, m0, m1 = _timed_products(a, b, args.main)
            torch.cuda.current_stream().wait_event(s1)
            (y + z).sum()  # consumer
            torch.cuda.synchronize()
            if step in PROFILED:
                side_ms.append(s0.elapsed_time(s1))
                main_ms.append(m0.elapsed_time(m1))
            prof.step()
    side_mean, main_mean = sum(side_ms) / len(side_ms), sum(main_ms) / len(main_ms)
    return {"cause": f"main stream waits for {args.side} side-stream products ({args.main} of its own meanwhile)",
            "cause_kind": "dependency", "side_products": args.side, "main_products": args.main, "product_size": n,
            "side_ms_per_step": side_mean, "main_ms_per_step": main_mean,
            "injected_ms_per_step": max(side_mean - main_mean, 0.0)}


def event_sync(out: Path, args: argparse.Namespace) -> dict:
    n = args.size
    a = torch.randn(n, n, device="cuda")
    b = torch.randn(n, n, device="cuda")
    slept: list[float] = []
    work_ms: list[float] = []
    with _profile(out, args.sync_events) as prof:
        for step in range(STEPS):
            _, w0, w1 = _timed_products(a, b, args.main)
            w1.synchronize()  # cudaEventSynchronize: the host drains the queue
            s = prepare_batch(args.sleep_ms / 1e3)
            if step in PROFILED:
                slept.append(s * 1e3)
                work_ms.append(w0.elapsed_time(w1))
            prof.step()
    return {"cause": "host sleeps in prepare_batch after event.synchronize() drained the queue", "cause_kind": "host",
            "main_products": args.main, "product_size": n, "work_ms_per_step": sum(work_ms) / len(work_ms),
            "injected_ms_per_step": sum(slept) / len(slept)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenario", choices=["side-stream", "event-sync"], required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--size", type=int, default=4096)
    p.add_argument("--side", type=int, default=12, help="side-stream products per step")
    p.add_argument("--main", type=int, default=4, help="main-stream products per step")
    p.add_argument("--sleep-ms", type=float, default=8.0)
    p.add_argument("--no-sync-events", dest="sync_events", action="store_false")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    facts = (side_stream if args.scenario == "side-stream" else event_sync)(args.out, args)
    facts |= {"scenario": args.scenario, "sync_events": args.sync_events, "steps": STEPS, "torch": torch.__version__,
              "device": torch.cuda.get_device_name(0), "profiled_steps": [2, 3, 4]}
    (args.out / "injected.json").write_text(json.dumps(facts, indent=2, sort_keys=True) + "\n")
    print(json.dumps(facts, sort_keys=True))


if __name__ == "__main__":
    main()
