"""A network with independent branches on the CPU, GPU 0 and GPU 1, joined at the end.

Three MLP branches read the same samples: branch A on GPU 0, branch B on GPU 1
(with one GPU: on a second CUDA stream of GPU 0), branch C, narrower, on the CPU.
Only the join (concatenate on GPU 0, one linear head) depends on all three; the
framework is free to run the branches at once if nothing forces an order.

- ``synchronized``: synchronize after each branch (A, B, then C, then the join):
  expect the branches one after another, no overlap between devices or streams.
- ``independent``: enqueue A and B (GPU work returns at once), then run C on the
  CPU while the GPUs work, join once: expect GPU 0, GPU 1 (or the two streams)
  and the CPU busy at the same time. With one GPU the two streams seldom
  overlap: each 512x4096x4096 product fills the GPU, so only CPU/GPU overlap
  remains.

``params["placement"]`` says where branch B ran.
"""

from __future__ import annotations

from collections.abc import Callable

from .base import Context, Variant, Workload, synchronize


def _mlp(width_in: int, width: int, layers: int, device: str):  # noqa: ANN202
    import torch.nn as nn

    mods: list[nn.Module] = []
    for i in range(layers):
        mods += [nn.Linear(width_in if i == 0 else width, width), nn.ReLU()]
    return nn.Sequential(*mods).to(device).eval()


def _placement(ctx: Context) -> str:
    if not ctx.cuda:
        return "all on cpu"
    return "cpu, cuda:0, cuda:1" if ctx.gpus >= 2 else "cpu, cuda:0 (2 streams)"


def branches(ctx: Context) -> list[Variant]:
    import torch

    width = ctx.pick(4096, 32, ctx.size)
    cpu_width = ctx.pick(512, 16, max(8, ctx.size // 8) if ctx.size else None)
    layers = ctx.pick(4, 2, ctx.repeat)
    batch = ctx.pick(512, 8, None)
    params = {"width": width, "cpu_width": cpu_width, "layers": layers, "batch": batch,
              "dtype": "float32", "placement": _placement(ctx)}
    gpus = 2 if ctx.gpus >= 2 else 1  # GPU 1 only where there is one; its memory is checked too
    need = 4 * (2 * layers * width * width + 8 * batch * width + 2 * width * 3 * width)

    def build():
        """The three branches, their inputs, the head, and how to run branch B."""
        params["placement"] = _placement(ctx)
        two_gpus = ctx.cuda and ctx.gpus >= 2
        dev_a, dev_b = ctx.dev(0), ctx.dev(1 if two_gpus else 0)
        torch.manual_seed(0)
        a, b = _mlp(width, width, layers, dev_a), _mlp(width, width, layers, dev_b)
        c = _mlp(width, cpu_width, layers, "cpu")
        head = torch.nn.Linear(2 * width + cpu_width, 10).to(dev_a).eval()
        x = torch.rand(batch, width)
        xa, xb = x.to(dev_a), x.to(dev_b)
        side = torch.cuda.Stream(device=0) if ctx.cuda and not two_gpus else None
        synchronize(ctx)
        return a, b, c, head, x, xa, xb, side, dev_b

    def run_b(b, xb, side):  # noqa: ANN001, ANN202
        if side is None:
            return b(xb)
        side.wait_stream(torch.cuda.current_stream(0))
        with torch.cuda.stream(side):
            yb = b(xb)
        return yb

    def join(head, ya, yb, yc, side):  # noqa: ANN001, ANN202
        if side is not None:
            torch.cuda.current_stream(0).wait_stream(side)  # yb was made on the side stream
            yb.record_stream(torch.cuda.current_stream(0))
        d = ya.device
        return head(torch.cat([ya, yb.to(d), yc.to(d)], dim=1))

    def synchronized() -> Callable[[], None]:
        a, b, c, head, x, xa, xb, side, dev_b = build()
        ib = 1 if dev_b.endswith(":1") else 0

        @torch.no_grad()
        def step() -> None:
            ya = a(xa)
            synchronize(ctx, 0)
            yb = run_b(b, xb, side)
            synchronize(ctx, ib)
            yc = c(x)
            join(head, ya, yb, yc, side)
            synchronize(ctx)

        return step

    def independent() -> Callable[[], None]:
        a, b, c, head, x, xa, xb, side, _ = build()

        @torch.no_grad()
        def step() -> None:
            # eager CPU ops block the Python thread: enqueue both GPU branches first
            ya = a(xa)
            yb = run_b(b, xb, side)
            yc = c(x)
            join(head, ya, yb, yc, side)
            synchronize(ctx)

        return step

    return [
        Variant("synchronized", f"{layers}-layer branches of width {width} on GPU 0 and GPU 1/second stream and width {cpu_width} on the CPU, synchronized after each: expect no overlap",
                synchronized, gpus=gpus, gpu_bytes=need, params=params),
        Variant("independent", "GPU branches enqueued, CPU branch run while they work, one join: expect GPU 0, GPU 1 (or two streams) and CPU busy at once",
                independent, gpus=gpus, gpu_bytes=need, params=params),
    ]


BRANCHES = Workload("branches", "A network with independent branches on CPU, GPU 0 and GPU 1: synchronized after each branch vs joined once", branches)
