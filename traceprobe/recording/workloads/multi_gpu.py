"""``multi-gpu``: matrix products on two GPUs, one after the other or at once."""

from __future__ import annotations

from collections.abc import Callable

from .base import Context, Variant, Workload, mat_bytes, products, synchronize


def multi_gpu(ctx: Context) -> list[Variant]:
    import torch

    n = ctx.pick(4000, 256, ctx.size)
    repeat = ctx.pick(50, 5, ctx.repeat)
    params = {"size": n, "repeat": repeat, "dtype": "float32"}
    need = mat_bytes(n) * (repeat + 1)

    def setup_inputs():
        torch.manual_seed(0)
        return torch.rand(n, n, device=ctx.dev(0)), torch.rand(n, n, device=ctx.dev(1))

    def sequential() -> Callable[[], None]:
        x0, x1 = setup_inputs()

        def step() -> None:
            products(x0, repeat)
            synchronize(ctx, 0)
            products(x1, repeat)
            synchronize(ctx, 1)

        return step

    def concurrent() -> Callable[[], None]:
        x0, x1 = setup_inputs()

        def step() -> None:
            products(x0, repeat)
            products(x1, repeat)
            synchronize(ctx, 0, 1)

        return step

    return [
        Variant("sequential", f"{repeat} products of {n}x{n} on GPU 0, synchronize, then on GPU 1: expect no cross-device concurrency",
                sequential, gpus=2, gpu_bytes=need, params=params),
        Variant("concurrent", f"{repeat} products of {n}x{n} launched on GPU 0 and GPU 1, one synchronize: expect both busy at once",
                concurrent, gpus=2, gpu_bytes=need, params=params),
    ]


MULTI_GPU = Workload("multi-gpu", "Matrix products on two GPUs: sequential vs concurrent", multi_gpu)
