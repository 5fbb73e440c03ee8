"""Model parallelism in depth (PyTorch's model-parallel example), without and with pipelining.

A convolutional stack, split in two: ``seq1`` (conv 16, conv 32) on
GPU 0 and ``seq2`` (conv 128, 256, 512) on GPU 1, each conv followed by
BatchNorm, ReLU and 2x2 max-pooling; inference (eval mode, no grad) on a batch
of images.

- ``naive``: the whole batch through ``seq1`` on GPU 0, copied to GPU 1, through
  ``seq2``: expect GPU 1 idle while GPU 0 works and GPU 0 idle while GPU 1 works.
- ``pipelined``: the batch in micro-batches, launched in order ``seq1(k)``,
  copy k, ``seq2(k)``: a cross-GPU copy waits for both devices' current streams,
  so copy k waits for ``seq2(k-1)`` but ``seq1(k)`` was enqueued before it and
  runs while GPU 1 works on k-1: expect GPU 0 and GPU 1 busy at the same time.
  (Issuing ``seq1(k+1)`` and its copy before ``seq2(k)`` would instead make
  ``seq2(k)`` wait for copy k+1.) Each micro-batch must keep the GPUs busy
  longer than Python takes to launch its ~50 kernels, or the host is the
  bottleneck and the GPUs take turns anyway; and the halves are unbalanced
  (``seq1``'s full-size 16-channel activations take most of the time, ``seq2``
  most of the FLOPs), so the gain is bounded by the smaller half.

On the CPU both halves run on the CPU, one after the other.
"""

from __future__ import annotations

from collections.abc import Callable

from .base import Context, Variant, Workload, synchronize


def _block(c_in: int, c_out: int):  # noqa: ANN202
    import torch.nn as nn

    return [nn.Conv2d(c_in, c_out, 3, padding=1), nn.BatchNorm2d(c_out), nn.ReLU(), nn.MaxPool2d(2)]


def halves(dev0: str, dev1: str):  # noqa: ANN201
    """``seq1`` on ``dev0`` and ``seq2`` on ``dev1``, eval mode."""
    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    seq1 = nn.Sequential(*_block(3, 16), *_block(16, 32)).to(dev0).eval()
    seq2 = nn.Sequential(*_block(32, 128), *_block(128, 256), *_block(256, 512)).to(dev1).eval()
    return seq1, seq2


def model_parallel(ctx: Context) -> list[Variant]:
    import torch

    hw = max(32, ctx.pick(224, 32, ctx.size))  # five 2x2 pools
    batch = ctx.pick(512, 4, None)  # 64 images per micro-batch: more GPU time than launch time
    chunk = -(-batch // max(1, ctx.pick(8, 2, ctx.repeat)))  # images per micro-batch
    micro = -(-batch // chunk)
    params = {"image": hw, "batch": batch, "dtype": "float32", "mode": "inference"}
    # largest activations: seq1's first conv/BN/ReLU outputs (16 channels, full size), a few live at once
    need = 4 * batch * hw * hw * (3 + 16 * 3) + 64 * 2**20

    def inputs():
        seq1, seq2 = halves(ctx.dev(0), ctx.dev(1))
        x = torch.rand(batch, 3, hw, hw, generator=torch.Generator().manual_seed(1)).to(ctx.dev(0))
        synchronize(ctx)
        return seq1, seq2, x

    def naive() -> Callable[[], None]:
        seq1, seq2, x = inputs()

        @torch.no_grad()
        def step() -> None:
            seq2(seq1(x).to(ctx.dev(1)))
            synchronize(ctx, 0, 1)

        return step

    def pipelined() -> Callable[[], None]:
        seq1, seq2, x = inputs()
        parts = x.split(chunk)

        @torch.no_grad()
        def step() -> None:
            out = []
            for p in parts:  # seq1(k) is enqueued before copy k, which waits for seq2(k-1)
                out.append(seq2(seq1(p).to(ctx.dev(1))))
            torch.cat(out)
            synchronize(ctx, 0, 1)

        return step

    return [
        Variant("naive", f"batch {batch} of {hw}x{hw} images through seq1 on GPU 0, then seq2 on GPU 1: expect one GPU busy at a time",
                naive, gpus=2, gpu_bytes=need, params=params),
        Variant("pipelined", f"the batch in {micro} micro-batches, seq1 of k+1 on GPU 0 while seq2 of k runs on GPU 1: expect both GPUs busy at once",
                pipelined, gpus=2, gpu_bytes=need, params={**params, "micro_batches": micro}),
    ]


MODEL_PARALLEL = Workload("model-parallel", "A conv stack (conv 16, 32 | conv 128, 256, 512) split over two GPUs: whole batch vs micro-batch pipeline", model_parallel)
