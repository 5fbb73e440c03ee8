"""Many small independent operations (does fine-grained parallelism pay?).

Each op is a 64x64 product plus an elementwise add: microseconds of device work
against microseconds of Python dispatch and kernel launch, so the workload is
launch-bound and concurrency may gain little or lose.

- ``one-stream``: all ops on one CUDA stream: expect short kernels separated by
  gaps (the GPU waits for the launches), one stream.
- ``multi-stream``: the same ops in blocks dealt round-robin to several streams:
  expect kernels on several streams but little overlap, since launches from one
  thread are the bottleneck; wall time about the same or worse.
- ``cpu-serial``: the same ops on the CPU, one after the other in one thread.
- ``cpu-threads``: the same ops on the CPU split over a pool of threads (torch
  ops release the GIL, Python dispatch does not; the calling thread takes one
  share): expect ops on several host threads in the trace (the pool's threads
  appear only where the profiler records all threads, torch's
  ``_ExperimentalConfig(profile_all_threads=True)``), and a speed-up only if the
  op outweighs the dispatch.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from .base import Context, Variant, Workload, synchronize

N_STREAMS = 4
"""CUDA streams of the multi-stream variant."""
N_THREADS = 4
"""Host threads of the cpu-threads variant."""


def _ops(x, count: int) -> None:  # noqa: ANN001
    for _ in range(count):
        x.mm(x).add_(x)


def small_ops(ctx: Context) -> list[Variant]:
    import torch

    n = ctx.pick(64, 64, ctx.size)
    count = ctx.pick(2000, 200, ctx.repeat)
    n_streams = N_STREAMS
    n_threads = N_THREADS
    block = 8  # ops per stream switch: a context switch per op would dominate
    params = {"size": n, "ops": count, "op": "x.mm(x).add_(x)", "dtype": "float32"}
    need = 4 * n * n * 16

    def x_in(device: str):
        torch.manual_seed(0)
        x = torch.rand(n, n, device=device)
        if device != "cpu":
            synchronize(ctx, 0)
        return x

    def one_stream() -> Callable[[], None]:
        x = x_in(ctx.dev(0))

        def step() -> None:
            _ops(x, count)
            synchronize(ctx, 0)

        return step

    def multi_stream() -> Callable[[], None]:
        x = x_in(ctx.dev(0))
        if not ctx.cuda:
            return lambda: _ops(x, count)
        side = [torch.cuda.Stream(device=0) for _ in range(n_streams)]

        def step() -> None:
            main = torch.cuda.current_stream(0)
            for s in side:
                s.wait_stream(main)
            for b, start in enumerate(range(0, count, block)):
                with torch.cuda.stream(side[b % n_streams]):
                    _ops(x, min(block, count - start))
            synchronize(ctx, 0)

        return step

    def cpu_serial() -> Callable[[], None]:
        x = x_in("cpu")
        return lambda: _ops(x, count)

    def cpu_threads() -> Callable[[], None]:
        x = x_in("cpu")
        # n_threads in all: the calling thread takes the first share, a pool the others
        pool = ThreadPoolExecutor(max_workers=max(1, n_threads - 1), thread_name_prefix="small-ops")
        shares = [count // n_threads + (i < count % n_threads) for i in range(n_threads)]

        def step() -> None:
            futures = [pool.submit(_ops, x, k) for k in shares[1:]]
            _ops(x, shares[0])
            for f in futures:
                f.result()

        weakref.finalize(step, pool.shutdown, wait=False)
        return step

    return [
        Variant("one-stream", f"{count} ops on {n}x{n} on one CUDA stream: expect short kernels with launch gaps",
                one_stream, gpus=1, gpu_bytes=need, params=params),
        Variant("multi-stream", f"the same {count} ops in blocks of {block} over {n_streams} streams: expect little overlap, launches are the bottleneck",
                multi_stream, gpus=1, gpu_bytes=need, params={**params, "streams": n_streams if ctx.cuda else 1, "block": block}),
        Variant("cpu-serial", f"the same {count} ops on the CPU in one thread",
                cpu_serial, gpus=0, params={**params, "threads": 1}),
        Variant("cpu-threads", f"the same {count} ops on the CPU over {n_threads} threads: expect ops on several host threads; gain only if ops outweigh dispatch",
                cpu_threads, gpus=0, params={**params, "threads": n_threads}),
    ]


SMALL_OPS = Workload("small-ops", "Many small independent ops: one vs several CUDA streams, one vs several CPU threads (fine-grained parallelism)", small_ops)
