"""What the scenario scripts share: the device, a synchronize, profiling a loop, and timing variants in turn.

Every scenario script (``fix_scenarios.py``, ``efficiency_scenarios.py``, ``loop_scenarios.py``) measures a fix the
same way: blocks of ``block`` steps of each variant taken in turn ``rounds`` times, a device synchronize before and
after each block (so a block's time is its steps' device and host time, nothing left in flight), the mean ms per step
of each variant over its blocks. A trace's what-if is read against the difference of two variants' means.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import torch

DEV = torch.device("cuda" if torch.cuda.is_available() else "cpu")
CUDA = DEV.type == "cuda"
SCHEDULE = {"wait": 1, "warmup": 1, "active": 3, "repeat": 1}
"""The profiler window of every scenario: torch's documented ``schedule(wait=1, warmup=1, active=3)``."""
STEPS = 6
"""Steps run under the profiler: the schedule's 5 and one more, so the last active step is closed."""


def scaled(n: int, scale: float, multiple: int) -> int:
    """``n * scale`` rounded to a multiple of ``multiple`` (at least ``multiple``): a size scaled for held-out runs."""
    return max(multiple, int(round(n * scale / multiple)) * multiple)


def sync() -> None:
    """Wait for the device's queued work (nothing on the CPU)."""
    if CUDA:
        torch.cuda.synchronize()


def activities() -> list:
    """CPU, and CUDA where there is a GPU."""
    from torch.profiler import ProfilerActivity

    return [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if CUDA else [])


def profiled(out: Path, step: Callable[[], object], record_shapes: bool) -> None:
    """``step()`` :data:`STEPS` times under plain ``torch.profiler.profile`` with :data:`SCHEDULE` and
    ``tensorboard_trace_handler(out, worker_name="rank0", use_gzip=True)``: one trace of the active steps in ``out``."""
    from torch.profiler import profile, schedule, tensorboard_trace_handler

    with profile(activities=activities(), schedule=schedule(**SCHEDULE), record_shapes=record_shapes,
                 on_trace_ready=tensorboard_trace_handler(str(out), worker_name="rank0", use_gzip=True)) as prof:
        for _ in range(STEPS):
            step()
            prof.step()
    sync()


def timed(variants: Mapping[str, Callable[[], object]], mode: str, block: int, rounds: int,
          drain: Mapping[str, int] | None = None) -> dict[str, float]:
    """Mean ms per step of each variant: ``rounds`` rounds of a block of ``block`` steps of each, taken in turn, a
    device synchronize around each block. ``mode``: ``bare`` (no profiler), ``profiled`` (inside
    ``torch.profiler.profile`` with CPU and CUDA activities, the events kept in memory and dropped: the overhead a
    profiled trace carries, without writing one) or ``shapes`` (the same with ``record_shapes=True``). ``drain[name]``
    steps of a variant run untimed before each of its blocks (the batches its DataLoader's workers prefetched while
    the other variants ran)."""
    from torch.profiler import profile

    drain = drain or {}
    ms: dict[str, list[float]] = {k: [] for k in variants}
    ctx = contextlib.nullcontext() if mode == "bare" else profile(activities=activities(), record_shapes=mode == "shapes")
    with ctx:
        for _ in range(rounds):
            for name, step in variants.items():
                for _ in range(drain.get(name, 0)):
                    step()
                sync()
                t0 = time.perf_counter()
                for _ in range(block):
                    step()
                sync()
                ms[name].append((time.perf_counter() - t0) * 1e3 / block)
    return {k: sum(v) / len(v) for k, v in ms.items()}


def scenario_args(scenarios: list[str], doc: str | None) -> tuple[str, Path] | None:
    """``--scenario S --out DIR`` of a scenario script (``--list`` prints ``scenarios`` and gives None); the random
    seed set, so every variant starts from the same weights."""
    p = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    p.add_argument("--scenario", choices=scenarios)
    p.add_argument("--out", type=Path)
    p.add_argument("--list", action="store_true")
    a = p.parse_args()
    if a.list:
        print("\n".join(scenarios))
        return None
    if a.scenario is None or a.out is None:
        p.error("--scenario and --out are needed")
    torch.manual_seed(0)
    return a.scenario, a.out
