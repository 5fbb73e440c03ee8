"""Two more busy-time scenarios, recorded and timed as ``efficiency_scenarios.py`` records and times its own.

- ``resnet-loader``: the loop of every image tutorial: a ``DataLoader`` over a ``Dataset`` whose ``__getitem__``
  turns a stored ``uint8`` image into a normalized ``float32`` crop on the CPU (random resized crop, flip,
  ``LOOP_JITTER`` colour-jitter passes), and a timm ResNet (``LOOP_MODEL``, default ``resnet50``) trained with SGD
  in fp32, channels-last, batch ``LOOP_BATCH`` (64). As written (``slow``), ``num_workers=0``: each batch is built
  in the training process between steps. Fix (``workers4``): ``num_workers=4, pin_memory=True`` (the same dataset,
  model and step); its prefetched batches are drained before each timed block.
- ``checkpoint``: a stack of ``LOOP_LAYERS`` (8) MLP blocks (``Linear(d, 4d) -> GELU -> Linear(4d, d)``, residual,
  ``d`` = ``LOOP_WIDTH``, 2048) over ``LOOP_TOKENS`` (8192) tokens in bf16 autocast with fused AdamW: ``plain`` keeps
  every activation, ``checkpointed`` wraps each block in ``torch.utils.checkpoint.checkpoint(use_reentrant=False)``,
  so the backward pass runs each block's forward again. ``fix.json`` gives the FLOPs of a step counted by hand (one
  GEMM ``G = 2 * tokens * d * 4d``; biases left out): the model's (MFU's, Chowdhery et al. 2022, Appendix B): each
  Linear ``G`` forward, ``G`` for the gradient of its weight and ``G`` for that of its input, except the first
  Linear's input (``x``, which needs no gradient: autograd skips that GEMM), so ``LAYERS * 2 * 3 - 1`` GEMMs; and the
  hardware's: the checkpointed blocks' recomputation adds ``LAYERS`` GEMMs, not ``2 * LAYERS``. Non-reentrant
  checkpointing stops recomputing once every tensor the block saved for backward is back
  (``torch.utils.checkpoint``'s ``early_stop``, on by default): the down projection's inputs are saved before its
  GEMM runs, so the recompute ends there, its ``aten::addmm`` recorded (with a sequence number, its two saved
  tensors detached) but no GEMM launched.
  ``compiled``: ``plain`` with its forward and loss under ``torch.compile`` (what fusing the GELU, residual and
  casts gives back).

Example::

    python scripts/loop_scenarios.py --scenario resnet-loader --out runs/loop/resnet-loader
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import efficiency_scenarios as E  # noqa: E402

MODEL = os.environ.get("LOOP_MODEL", "resnet50")
BATCH = int(os.environ.get("LOOP_BATCH", "64"))
JITTER = int(os.environ.get("LOOP_JITTER", "1"))
SIDE = int(os.environ.get("LOOP_SIDE", "256"))
WIDTH = int(os.environ.get("LOOP_WIDTH", "2048"))
LAYERS = int(os.environ.get("LOOP_LAYERS", "8"))
TOKENS = int(os.environ.get("LOOP_TOKENS", "8192"))
CROP, STORED = 224, 256
MEAN = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)


class Images(torch.utils.data.Dataset):
    """``STORED`` random ``uint8`` images of ``SIDE`` x ``SIDE``; item ``i`` is a crop of image ``i % STORED``."""

    def __init__(self) -> None:
        g = torch.Generator().manual_seed(0)
        self.raw = torch.randint(0, 256, (STORED, 3, SIDE, SIDE), dtype=torch.uint8, generator=g)
        self.labels = torch.randint(0, 1000, (STORED,), generator=g)

    def __len__(self) -> int:
        return 10**7

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        j = i % STORED
        side = int(torch.randint(CROP, SIDE + 1, ()))
        top, left = (int(v) for v in torch.randint(0, SIDE - side + 1, (2,)))
        img = self.raw[j, :, top:top + side, left:left + side].float().div_(255)
        img = F.interpolate(img[None], size=(CROP, CROP), mode="bilinear", align_corners=False)[0]
        if bool(torch.rand(()) < 0.5):
            img = img.flip(-1)
        for _ in range(JITTER):
            b, c = 1 + 0.2 * (float(torch.rand(())) - 0.5), 1 + 0.2 * (float(torch.rand(())) - 0.5)
            mean = img.mean()
            img = ((img * b - mean) * c + mean).clamp_(0, 1)
        return (img - MEAN) / STD, self.labels[j]


def resnet_loader() -> tuple[dict, dict]:
    import timm

    model = timm.create_model(MODEL, num_classes=1000).to(E.DEV, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    data = Images()
    iters = {}
    for name, workers in (("slow", 0), ("workers4", 4)):
        dl = torch.utils.data.DataLoader(data, batch_size=BATCH, num_workers=workers, pin_memory=E.CUDA and workers > 0,
                                         persistent_workers=workers > 0, prefetch_factor=2 if workers else None)
        iters[name] = iter(dl)
        E.DRAIN[name] = 2 * workers

    def step(name: str) -> None:
        x, y = next(iters[name])
        x = x.to(E.DEV, non_blocking=True).contiguous(memory_format=torch.channels_last)
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y.to(E.DEV, non_blocking=True)).backward()
        opt.step()

    return ({"slow": lambda: step("slow"), "workers4": lambda: step("workers4")},
            {"model": MODEL, "batch": BATCH, "side": SIDE, "jitter": JITTER, "workers": {"slow": 0, "workers4": 4}})


class _Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(F.gelu(self.up(x)))


def checkpoint() -> tuple[dict, dict]:
    from torch.utils.checkpoint import checkpoint as ckpt

    blocks = nn.ModuleList(_Block(WIDTH) for _ in range(LAYERS)).to(E.DEV)
    opt = torch.optim.AdamW(blocks.parameters(), lr=1e-4, fused=E.CUDA)
    x, y = torch.randn(TOKENS, WIDTH, device=E.DEV), torch.randn(TOKENS, WIDTH, device=E.DEV)

    def loss_of(checkpointed: bool) -> torch.Tensor:
        with torch.autocast(E.DEV.type, dtype=torch.bfloat16):
            h = x
            for b in blocks:
                h = ckpt(b, h, use_reentrant=False) if checkpointed else b(h)
            return F.mse_loss(h.float(), y)

    compiled = torch.compile(loss_of) if E.CUDA else loss_of

    def step(checkpointed: bool | None) -> None:
        opt.zero_grad(set_to_none=True)
        (compiled(False) if checkpointed is None else loss_of(checkpointed)).backward()
        opt.step()

    gemm = 2 * TOKENS * WIDTH * 4 * WIDTH  # (one Linear's GEMM, either projection)
    model = (LAYERS * 2 * 3 - 1) * gemm  # (forward, weight and input gradients; the input x needs no gradient)
    recomputed = LAYERS * gemm  # (each block's up projection; early stop ends the recompute before the down one)
    return ({"plain": lambda: step(False), "checkpointed": lambda: step(True), "compiled": lambda: step(None)},
            {"width": WIDTH, "layers": LAYERS, "tokens": TOKENS, "model_flops_per_step": model,
             "hardware_flops_per_step": {"plain": model, "checkpointed": model + recomputed, "compiled": model}})


E.SCENARIOS += ["resnet-loader", "checkpoint"]
E.BUILD.update({"resnet-loader": resnet_loader, "checkpoint": checkpoint})
E.FIX.update({"resnet-loader": "four DataLoader workers (num_workers=4, pin_memory=True)",
              "checkpoint": "none: checkpointing trades recomputed FLOPs for activation memory"})

if __name__ == "__main__":
    E.main()
