"""``compute-copy``: matrix products on GPU 0 whose results are copied to host memory.

Blocking copies after compute; a plain ``non_blocking=True`` on the same
stream; and a real overlap with pinned buffers on a copy stream ordered by CUDA
events.
"""

from __future__ import annotations

from collections.abc import Callable

from .base import Context, Variant, Workload, mat_bytes, products, synchronize


def compute_copy(ctx: Context) -> list[Variant]:
    import torch

    n = ctx.pick(4000, 256, ctx.size)
    repeat = ctx.pick(50, 5, ctx.repeat)
    params = {"size": n, "repeat": repeat, "dtype": "float32"}
    need = mat_bytes(n) * (repeat + 1)

    def x_in():
        torch.manual_seed(0)
        return torch.rand(n, n, device=ctx.dev(0))

    def sequential() -> Callable[[], None]:
        x = x_in()

        def step() -> None:
            y = products(x, repeat)
            synchronize(ctx, 0)
            [yi.to("cpu") for yi in y]
            synchronize(ctx, 0)

        return step

    def nonblocking() -> Callable[[], None]:
        x = x_in()

        def step() -> None:
            # the plain form: copy_to_cpu(run(x), non_blocking=True), pageable memory, same stream
            y = products(x, repeat)
            [yi.to("cpu", non_blocking=True) for yi in y]
            synchronize(ctx, 0)

        return step

    def overlapped() -> Callable[[], None]:
        x = x_in()
        if not ctx.cuda:
            def cpu_step() -> None:
                out = [torch.empty(n, n) for _ in range(repeat)]
                for i in range(repeat):
                    out[i].copy_(x.mm(x))

            return cpu_step
        host = [torch.empty(n, n, pin_memory=True) for _ in range(repeat)]
        copy_stream = torch.cuda.Stream(device=0)

        def step() -> None:
            compute_stream = torch.cuda.current_stream(0)
            for i in range(repeat):
                y = x.mm(x)
                done = torch.cuda.Event()
                done.record(compute_stream)
                copy_stream.wait_event(done)  # copy i waits for product i only
                with torch.cuda.stream(copy_stream):
                    host[i].copy_(y, non_blocking=True)
                y.record_stream(copy_stream)  # keep y's memory until its copy is done
            synchronize(ctx, 0)

        return step

    return [
        Variant("sequential", f"{repeat} products of {n}x{n} on GPU 0, synchronize, then blocking copies to the host: expect no overlap",
                sequential, gpus=1, gpu_bytes=need, params=params),
        Variant("nonblocking", "a plain y.to('cpu', non_blocking=True) on the compute stream (torch picks the host buffer; the trace's memcpy name says Pageable or Pinned): copies still wait for compute, expect no overlap",
                nonblocking, gpus=1, gpu_bytes=need, params=params),
        Variant("overlapped", "pinned host buffers and a copy stream ordered by CUDA events: result i-1 copied while result i is computed, expect overlap",
                overlapped, gpus=1, gpu_bytes=mat_bytes(n) * 3, params={**params, "host_memory": "pinned"}),
    ]


COMPUTE_COPY = Workload("compute-copy", "Compute on GPU 0 and copy results to the host: sequential, a plain non_blocking copy, and a real overlap", compute_copy)
