"""Tile parallelism for images (an image cut into strips), with the boundaries handled.

A layer stack (conv 16, BatchNorm, ReLU, 2x2 max-pool, conv 32, BatchNorm,
ReLU, 2x2 max-pool), the same weights on every GPU, eval mode, no grad. The image
is cut into horizontal strips, one per GPU (up to four). Cutting exactly would get
the rows next to each cut wrong (the 3x3 convs would see zero padding instead of
the neighbour's pixels), so each strip carries a halo of 4 input rows (one output
row, aligned with the pools) from its neighbours, and that output row is cropped
off again: the tiled output equals the untiled one, which setup checks
(``torch.allclose``, rtol=atol=1e-4) before anything is timed. Convolutions run
without TF32 so that both are plain float32.

- ``single``: the whole image batch through the stack on GPU 0: one GPU busy.
- ``tiled``: strips copied from GPU 0 to GPUs 0..k-1, all launched before any is
  awaited, outputs gathered on GPU 0: expect the k GPUs' kernels overlapping, and
  peer copies (scatter, gather) at the start and end.

On the CPU the image is still cut into four strips (all on the CPU) and checked.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

from .base import Context, Variant, Workload, synchronize

SCALE = 4  # two 2x2 pools
HALO = SCALE  # input rows each side: one output row, enough for the two 3x3 convs


def layers(device: str):  # noqa: ANN201
    """``l``: two conv/BN/ReLU/pool blocks, eval mode."""
    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
    ).to(device).eval()


def strips(height: int, k: int) -> list[tuple[int, int, int, int]]:
    """For k strips of an image ``height`` rows high: (input start, input end, crop start, output rows)."""
    rows = height // SCALE
    bounds = [rows * i // k for i in range(k + 1)]
    out = []
    for a, b in zip(bounds, bounds[1:]):
        lo, hi = max(0, SCALE * a - HALO), min(height, SCALE * b + HALO)
        out.append((lo, hi, a - lo // SCALE, b - a))
    return out


def _fp32():  # noqa: ANN202
    """cuDNN without TF32 (other cuDNN settings kept): tiles and whole image then agree to float32 rounding."""
    import torch

    c = torch.backends.cudnn
    return c.flags(enabled=c.enabled, benchmark=c.benchmark, deterministic=c.deterministic, allow_tf32=False)


def tile_parallel(ctx: Context) -> list[Variant]:
    import torch

    k = min(4, ctx.gpus) if ctx.cuda else 4
    k_gpus = max(2, k)
    hw = ctx.pick(1024, 32, ctx.size)
    hw = max(SCALE * k, hw - hw % SCALE)
    batch = ctx.pick(16, 2, None)
    params = {"image": hw, "batch": batch, "dtype": "float32", "cudnn_tf32": False}
    need = 4 * batch * hw * hw * (3 + 16 * 3) + 64 * 2**20
    plan = strips(hw, k)

    def x_in():
        x = torch.rand(batch, 3, hw, hw, generator=torch.Generator().manual_seed(1)).to(ctx.dev(0))
        synchronize(ctx, 0)
        return x

    def untiled(model, x):  # noqa: ANN001, ANN202
        with torch.no_grad(), _fp32():
            return model(x)

    def tiled_forward(models, x):  # noqa: ANN001, ANN202
        with torch.no_grad(), _fp32():
            parts = [x[:, :, lo:hi].to(ctx.dev(i)) for i, (lo, hi, _, _) in enumerate(plan)]  # scatter
            ys = [m(p) for m, p in zip(models, parts)]  # all enqueued before any is awaited
            d = ctx.dev(0)
            return torch.cat([y[:, :, c:c + n].to(d) for y, (_, _, c, n) in zip(ys, plan)], dim=2)  # gather

    def single() -> Callable[[], None]:
        model, x = layers(ctx.dev(0)), x_in()

        def step() -> None:
            untiled(model, x)
            synchronize(ctx, 0)

        return step

    def tiled() -> Callable[[], None]:
        model, x = layers(ctx.dev(0)), x_in()
        models = [model if i == 0 else copy.deepcopy(model).to(ctx.dev(i)) for i in range(k)]  # tied weights
        want = untiled(model, x)
        got = tiled_forward(models, x)
        synchronize(ctx)
        if got.shape != want.shape or not torch.allclose(got, want, rtol=1e-4, atol=1e-4):
            err = (got - want).abs().max().item() if got.shape == want.shape else f"shape {tuple(got.shape)} != {tuple(want.shape)}"
            raise RuntimeError(f"tiled output differs from the untiled one (max abs error {err}): halo handling is wrong")
        del want, got

        def step() -> None:
            tiled_forward(models, x)
            synchronize(ctx, *range(k))

        return step

    return [
        Variant("single", f"batch {batch} of {hw}x{hw} images through the conv stack on GPU 0: one GPU busy",
                single, gpus=1, gpu_bytes=need, params=params),
        Variant("tiled", f"the images in {k} strips with {HALO}-row halos, {f'on {k} GPUs at once' if ctx.cuda else 'all on the CPU'}, checked equal to single: expect the GPUs busy at the same time",
                tiled, gpus=k_gpus, gpu_bytes=need, params={**params, "tiles": k, "gpus": k if ctx.cuda else 0, "halo_rows": HALO}),
    ]


TILE_PARALLEL = Workload("tile-parallel", "A conv stack (conv 16, conv 32, each with BatchNorm, ReLU, max-pool) on an image cut into strips with halos, one per GPU (up to 4), vs untiled", tile_parallel)
