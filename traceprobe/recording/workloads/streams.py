"""Operator-level parallelism on one GPU (are independent products parallel?).

The experiment's ``run`` is a list of independent products ``x.mm(x)``. At a size where
one product does not fill the GPU (1024x1024 float32 is 64 output tiles of 128x128,
fewer than the H100/H200's 132 SMs), kernels can share the GPU, but only if they are
on different CUDA streams: work on one stream runs in issue order.

- ``one-stream``: all products on the current stream: expect one stream in the
  trace and no kernel overlapping another.
- ``multi-stream``: the same products dealt round-robin to several streams (4 by
  default): expect kernels of different streams overlapping in time, and a shorter
  wall time where the GPU had idle SMs.

On the CPU both variants run the products one after the other.
"""

from __future__ import annotations

from collections.abc import Callable

from .base import Context, Variant, Workload, synchronize

N_STREAMS = 4
"""CUDA streams the multi-stream variant deals its products over."""


def streams(ctx: Context) -> list[Variant]:
    import torch

    n = ctx.pick(1024, 64, ctx.size)
    repeat = ctx.pick(64, 8, ctx.repeat)
    n_streams = N_STREAMS
    params = {"size": n, "repeat": repeat, "dtype": "float32"}
    need = 4 * n * n * (repeat + 1)

    def x_in():
        torch.manual_seed(0)
        x = torch.rand(n, n, device=ctx.dev(0))
        synchronize(ctx, 0)  # side streams may read x: it must be written first
        return x

    def one_stream() -> Callable[[], None]:
        x = x_in()

        def step() -> None:
            [x.mm(x) for _ in range(repeat)]
            synchronize(ctx, 0)

        return step

    def multi_stream() -> Callable[[], None]:
        x = x_in()
        if not ctx.cuda:
            def cpu_step() -> None:
                [x.mm(x) for _ in range(repeat)]

            return cpu_step
        side = [torch.cuda.Stream(device=0) for _ in range(n_streams)]

        def step() -> None:
            main = torch.cuda.current_stream(0)
            for s in side:
                s.wait_stream(main)  # x (and anything before the step) is ready
            out = []
            for i in range(repeat):
                with torch.cuda.stream(side[i % n_streams]):
                    out.append(x.mm(x))  # memory belongs to that stream's pool
            synchronize(ctx, 0)

        return step

    return [
        Variant("one-stream", f"{repeat} independent products of {n}x{n} on one stream: expect kernels strictly one after another",
                one_stream, gpus=1, gpu_bytes=need, params=params),
        Variant("multi-stream", f"the same {repeat} products dealt round-robin to {n_streams} CUDA streams: expect kernels of different streams overlapping",
                multi_stream, gpus=1, gpu_bytes=need, params={**params, "streams": n_streams if ctx.cuda else 1}),
    ]


STREAMS = Workload("streams", "Independent matrix products on one GPU: one stream vs several (operator-level parallelism)", streams)
