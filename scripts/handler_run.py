#!/usr/bin/env python3
"""One training run (GPT-2-style, DDP or FSDP2 under torchrun) profiled in windows, for the overhead of
``traceprobe.on_trace_ready``: scripts/handler_overhead.py runs it in each mode and compares.

Modes (``--mode``):

``none``         no profiler;
``profiler``     ``torch.profiler.profile`` with the schedule and no handler (the profiler's own cost);
``tensorboard``  the same with ``tensorboard_trace_handler`` (gzipped traces, written on the training thread);
``traceprobe``   the same with ``traceprobe.on_trace_ready(out, trace=True, save="thread")`` (traces and summaries);
``summary``      ``traceprobe.on_trace_ready(out, trace=False)`` (summaries alone);
``fork``         ``traceprobe.on_trace_ready(out, trace=True)`` (its default: events written by a forked child);
``saveonly``     ``traceprobe`` without the summary's process (the events written, then removed): what the save costs.

Prints, on rank 0, one JSON line: ``mode``, ``steps``, ``loop_s`` (wall time of the timed steps, the device
synchronised before and after), ``step_ms`` (loop_s / steps), ``handler_call_ms`` (the longest call of the
handler on the training thread), ``wait_s`` (after the loop, waiting for the handler's last windows).
The first ``--skip`` steps are run before the clock starts (and are outside every profiler window).
With ``--paired``, every other window goes to the handler and the line adds ``paired_handled_ms`` and
``paired_bare_ms`` (mean step time of the cycles after a handled and an unhandled window, the device synchronised
at each window's end), ``paired_overhead`` and ``paired_pairs`` (each handled cycle against the unhandled one after it).
With ``--paired --probe K`` the device is also synchronised K steps after each window's end, and the line adds
``probe_window_ms``: what a window costs, the mean over pairs of (the K steps after a handled window, handler call
included) minus (the K steps after the unhandled window that follows), with ``probe_se_ms``, its standard error, and
``probe_overhead``, that cost over the mean time of the bare cycle. Short segments measured many times say what
a window costs far more precisely than whole cycles, whose own time varies by several per cent between cycles.

On a machine without CUDA it runs on the CPU (gloo, a tiny model) so the script can be tried anywhere::

    torchrun --standalone --nproc-per-node 2 scripts/handler_run.py --mode traceprobe --out runs/h --steps 40
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_gpt_ddp import GPT  # noqa: E402


def _paired(ends: list[tuple[float, bool]], cycle: int) -> dict:
    """--paired: the mean step time of the cycles after a handled window and after an unhandled one (the first cycle
    left out: warm-up), and the overhead of each pair (a handled cycle against the unhandled one after it)."""
    import statistics

    cycles = [(b[0] - a[0], a[1]) for a, b in zip(ends, ends[1:])][1:]
    handled = [d for d, h in cycles if h]
    bare = [d for d, h in cycles if not h]
    pairs = [cycles[i][0] / cycles[i + 1][0] - 1 for i in range(len(cycles) - 1) if cycles[i][1] and not cycles[i + 1][1]]
    if not handled or not bare:
        return {"paired": "too few windows"}
    return {"paired_handled_ms": round(1e3 * statistics.mean(handled) / cycle, 3), "paired_bare_ms": round(1e3 * statistics.mean(bare) / cycle, 3),
            "paired_overhead": round(statistics.mean(handled) / statistics.mean(bare) - 1, 4),
            "paired_pairs": [round(x, 4) for x in pairs]}


def _probed(probes: list[tuple[float, bool]], ends: list[tuple[float, bool]]) -> dict:
    """--probe: the mean (and its standard error) of each handled segment minus the unhandled one after it, in ms,
    the first pair left out (warm-up), and that cost over the mean bare cycle."""
    import statistics

    diffs = [1e3 * (probes[i][0] - probes[i + 1][0]) for i in range(2, len(probes) - 1) if probes[i][1] and not probes[i + 1][1]]
    bare = [b[0] - a[0] for a, b in zip(ends, ends[1:]) if not a[1]][1:]
    if len(diffs) < 2 or not bare:
        return {"probe": "too few windows"}
    mean = statistics.mean(diffs)
    return {"probe_window_ms": round(mean, 3), "probe_se_ms": round(statistics.stdev(diffs) / len(diffs) ** 0.5, 3),
            "probe_pairs": len(diffs), "probe_overhead": round(mean / (1e3 * statistics.mean(bare)), 5)}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", choices=["none", "profiler", "tensorboard", "traceprobe", "summary", "fork", "saveonly"], default="traceprobe")
    p.add_argument("--parallel", choices=["ddp", "fsdp"], default="ddp")
    p.add_argument("--out", default="runs/handler")
    p.add_argument("--steps", type=int, default=60, help="timed steps")
    p.add_argument("--skip", type=int, default=5, help="steps before the clock starts")
    p.add_argument("--wait", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--active", type=int, default=3)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--dim", type=int, default=1024)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--paired", action="store_true",
                   help="hand every other window to the handler, the others to none, and compare the cycles after each "
                        "(one process: the run's drifts hit both alike)")
    p.add_argument("--probe", type=int, default=0, help="with --paired: also time the K steps after each window's end")
    a = p.parse_args(argv)

    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, local = dist.get_rank(), int(os.environ.get("LOCAL_RANK", "0"))
    if cuda:
        dev = torch.device("cuda", local)
        torch.cuda.set_device(dev)
    else:  # a CPU try-out: small enough for a laptop
        dev = torch.device("cpu")
        a.layers, a.dim, a.seq, a.batch = min(a.layers, 2), min(a.dim, 64), min(a.seq, 32), min(a.batch, 2)
    vocab, heads = 32000 if cuda else 512, 16 if cuda else 4
    torch.manual_seed(rank)
    model = GPT(vocab, a.dim, a.layers, heads, a.seq).to(dev)
    if a.parallel == "ddp":
        model = nn.parallel.DistributedDataParallel(model, device_ids=[local] if cuda else None)
    else:
        from torch.distributed.fsdp import fully_shard

        for b in model.blocks:  # type: ignore[union-attr]
            fully_shard(b)
        fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = torch.randint(0, vocab, (a.batch, a.seq + 1), device=dev)

    def train_step() -> None:
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=cuda):
            logits = model(data[:, :-1])
            loss = F.cross_entropy(logits.float().view(-1, vocab), data[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()
        dist.barrier()

    for _ in range(a.skip):
        train_step()
    handler = None
    calls: list[float] = []
    ends: list[tuple[float, bool]] = []  # each window's end (the device synchronised with --paired) and whether handled
    prof = None
    if a.mode != "none":
        from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

        if a.mode == "tensorboard":
            handler = tensorboard_trace_handler(a.out, worker_name=f"rank{rank}", use_gzip=True)
        elif a.mode in ("traceprobe", "summary", "fork", "saveonly"):
            import traceprobe

            handler = traceprobe.on_trace_ready(a.out, trace=a.mode != "summary", log=print if rank == 0 else None,
                                                save="fork" if a.mode == "fork" else "thread")
            if a.mode == "saveonly":  # a measurement, not a use: the summary's process left out
                handler._summarize = lambda tmp, *_, **__: Path(tmp).unlink(missing_ok=True)  # type: ignore[method-assign]

        def timed(pr) -> None:
            if a.paired and cuda:
                torch.cuda.synchronize()
            handled = not a.paired or len(ends) % 2 == 0
            t = time.perf_counter()
            if handled:
                handler(pr)  # type: ignore[misc]
                calls.append(time.perf_counter() - t)
            ends.append((t, handled))

        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        prof = profile(activities=acts, schedule=schedule(wait=a.wait, warmup=a.warmup, active=a.active, repeat=0),
                       on_trace_ready=timed if handler is not None else None)
        prof.__enter__()
    probes: list[tuple[float, bool]] = []  # --probe: each window's first K steps, timed, and whether it was handled
    sync()
    t0 = time.perf_counter()
    seen, since = 0, 0
    for _ in range(a.steps):
        train_step()
        if prof is not None:
            prof.step()
        if a.probe and a.paired and cuda and ends:
            seen, since = len(ends), (0 if len(ends) != seen else since + 1)
            if since == a.probe:
                torch.cuda.synchronize()
                probes.append((time.perf_counter() - ends[-1][0], ends[-1][1]))
    sync()
    loop_s = time.perf_counter() - t0
    if prof is not None:
        prof.__exit__(None, None, None)
    t1 = time.perf_counter()
    if handler is not None and hasattr(handler, "wait"):
        handler.wait()  # type: ignore[union-attr]
    wait_s = time.perf_counter() - t1
    if rank == 0:
        print(json.dumps({"mode": a.mode, "parallel": a.parallel, "steps": a.steps, "loop_s": round(loop_s, 4),
                          "step_ms": round(1e3 * loop_s / a.steps, 3), "handler_call_ms": round(1e3 * max(calls, default=0.0), 3),
                          "windows": len(calls), "wait_s": round(wait_s, 3),
                          "fork_pause_ms": round(1e3 * max(getattr(handler, "fork_pauses_s", None) or [0.0]), 3), "device": "cuda" if cuda else "cpu",
                          **(_paired(ends, a.wait + a.warmup + a.active) if a.paired else {}),
                          **(_probed(probes, ends) if a.probe and a.paired else {})}), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
