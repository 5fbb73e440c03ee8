"""``cpu-gpu``: matrix products on the CPU and on GPU 0, serial or side by side."""

from __future__ import annotations

from collections.abc import Callable

from .base import Context, Variant, Workload, mat_bytes, products, synchronize


def cpu_gpu(ctx: Context) -> list[Variant]:
    import torch

    n_gpu = ctx.pick(6000, 256, ctx.size)
    n_cpu = ctx.pick(2000, 128, ctx.size // 3 if ctx.size else None)
    repeat = ctx.pick(10, 3, ctx.repeat)
    params = {"gpu_size": n_gpu, "cpu_size": n_cpu, "repeat": repeat, "dtype": "float32"}
    need = mat_bytes(n_gpu) * (repeat + 1)

    def inputs():
        torch.manual_seed(0)
        return torch.rand(n_cpu, n_cpu), torch.rand(n_gpu, n_gpu, device=ctx.dev(0))

    def sequential() -> Callable[[], None]:
        xc, xg = inputs()

        def step() -> None:
            products(xg, repeat)
            synchronize(ctx, 0)
            products(xc, repeat)

        return step

    def concurrent() -> Callable[[], None]:
        xc, xg = inputs()

        def step() -> None:
            # eager CPU ops block the Python thread: enqueue the GPU work first
            products(xg, repeat)
            products(xc, repeat)
            synchronize(ctx, 0)

        return step

    return [
        Variant("sequential", f"{repeat} products of {n_gpu}x{n_gpu} on GPU 0, synchronize, then {repeat} of {n_cpu}x{n_cpu} on the CPU",
                sequential, gpus=1, gpu_bytes=need, params=params),
        Variant("concurrent", "GPU products enqueued first, then CPU products while the GPU works, then synchronize: expect CPU/GPU overlap",
                concurrent, gpus=1, gpu_bytes=need, params=params),
    ]


CPU_GPU = Workload("cpu-gpu", "Matrix products on the CPU and GPU 0: sequential vs concurrent", cpu_gpu)
