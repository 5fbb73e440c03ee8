"""The three experiments of the "Automatic Parallelism" chapter (seed documents).

- ``multi-gpu``: matrix products on two GPUs, one after the other or at once.
- ``cpu-gpu``: matrix products on the CPU and on GPU 0, serial or side by side.
- ``compute-copy``: matrix products on GPU 0 whose results are copied to host
  memory: blocking copies after compute, the seed's ``non_blocking=True`` into
  pageable memory on the same stream, and a real overlap with pinned buffers on a
  copy stream ordered by CUDA events.
"""

from __future__ import annotations

from collections.abc import Callable

from .base import Context, Variant, Workload, synchronize


def _products(x, repeat: int):  # noqa: ANN001
    return [x.mm(x) for _ in range(repeat)]


def _mat_bytes(n: int) -> int:
    return 4 * n * n


def multi_gpu(ctx: Context) -> list[Variant]:
    import torch

    n = ctx.pick(4000, 256, ctx.size)
    repeat = ctx.pick(50, 5, ctx.repeat)
    params = {"size": n, "repeat": repeat, "dtype": "float32"}
    need = _mat_bytes(n) * (repeat + 1)

    def setup_inputs():
        torch.manual_seed(0)
        return torch.rand(n, n, device=ctx.dev(0)), torch.rand(n, n, device=ctx.dev(1))

    def sequential() -> Callable[[], None]:
        x0, x1 = setup_inputs()

        def step() -> None:
            _products(x0, repeat)
            synchronize(ctx, 0)
            _products(x1, repeat)
            synchronize(ctx, 1)

        return step

    def concurrent() -> Callable[[], None]:
        x0, x1 = setup_inputs()

        def step() -> None:
            _products(x0, repeat)
            _products(x1, repeat)
            synchronize(ctx, 0, 1)

        return step

    return [
        Variant("sequential", f"{repeat} products of {n}x{n} on GPU 0, synchronize, then on GPU 1: expect no cross-device concurrency",
                sequential, gpus=2, gpu_bytes=need, params=params),
        Variant("concurrent", f"{repeat} products of {n}x{n} launched on GPU 0 and GPU 1, one synchronize: expect both busy at once",
                concurrent, gpus=2, gpu_bytes=need, params=params),
    ]


def cpu_gpu(ctx: Context) -> list[Variant]:
    import torch

    n_gpu = ctx.pick(6000, 256, ctx.size)
    n_cpu = ctx.pick(2000, 128, ctx.size // 3 if ctx.size else None)
    repeat = ctx.pick(10, 3, ctx.repeat)
    params = {"gpu_size": n_gpu, "cpu_size": n_cpu, "repeat": repeat, "dtype": "float32"}
    need = _mat_bytes(n_gpu) * (repeat + 1)

    def inputs():
        torch.manual_seed(0)
        return torch.rand(n_cpu, n_cpu), torch.rand(n_gpu, n_gpu, device=ctx.dev(0))

    def sequential() -> Callable[[], None]:
        xc, xg = inputs()

        def step() -> None:
            _products(xg, repeat)
            synchronize(ctx, 0)
            _products(xc, repeat)

        return step

    def concurrent() -> Callable[[], None]:
        xc, xg = inputs()

        def step() -> None:
            # eager CPU ops block the Python thread: enqueue the GPU work first
            _products(xg, repeat)
            _products(xc, repeat)
            synchronize(ctx, 0)

        return step

    return [
        Variant("sequential", f"{repeat} products of {n_gpu}x{n_gpu} on GPU 0, synchronize, then {repeat} of {n_cpu}x{n_cpu} on the CPU",
                sequential, gpus=1, gpu_bytes=need, params=params),
        Variant("concurrent", "GPU products enqueued first, then CPU products while the GPU works, then synchronize: expect CPU/GPU overlap",
                concurrent, gpus=1, gpu_bytes=need, params=params),
    ]


def compute_copy(ctx: Context) -> list[Variant]:
    import torch

    n = ctx.pick(4000, 256, ctx.size)
    repeat = ctx.pick(50, 5, ctx.repeat)
    params = {"size": n, "repeat": repeat, "dtype": "float32"}
    need = _mat_bytes(n) * (repeat + 1)

    def x_in():
        torch.manual_seed(0)
        return torch.rand(n, n, device=ctx.dev(0))

    def sequential() -> Callable[[], None]:
        x = x_in()

        def step() -> None:
            y = _products(x, repeat)
            synchronize(ctx, 0)
            [yi.to("cpu") for yi in y]
            synchronize(ctx, 0)

        return step

    def nonblocking() -> Callable[[], None]:
        x = x_in()

        def step() -> None:
            # exactly the seed: copy_to_cpu(run(x), non_blocking=True), pageable memory, same stream
            y = _products(x, repeat)
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
        Variant("nonblocking", "the seed's y.to('cpu', non_blocking=True) on the compute stream (torch picks the host buffer; the trace's memcpy name says Pageable or Pinned): copies still wait for compute, expect no overlap",
                nonblocking, gpus=1, gpu_bytes=need, params=params),
        Variant("overlapped", "pinned host buffers and a copy stream ordered by CUDA events: result i-1 copied while result i is computed, expect overlap",
                overlapped, gpus=1, gpu_bytes=_mat_bytes(n) * 3, params={**params, "host_memory": "pinned"}),
    ]


MULTI_GPU = Workload("multi-gpu", "Matrix products on two GPUs: sequential vs concurrent (seed: Parallel Computation on GPUs)", multi_gpu)
CPU_GPU = Workload("cpu-gpu", "Matrix products on the CPU and GPU 0: sequential vs concurrent (seed: CPUs and GPUs in parallel)", cpu_gpu)
COMPUTE_COPY = Workload("compute-copy", "Compute on GPU 0 and copy results to the host: sequential, the seed's non_blocking, and a real overlap", compute_copy)
