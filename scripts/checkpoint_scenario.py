"""A stack of MLP blocks trained with and without activation checkpointing: model FLOPs against hardware FLOPs.

Each block is ``Linear(d, 4d) -> GELU -> Linear(4d, d)`` with a residual, in bf16 autocast, trained with AdamW.
``plain/`` keeps every activation; ``checkpointed/`` wraps each block in ``torch.utils.checkpoint.checkpoint``
(``use_reentrant=False``), so the backward pass runs each block's forward again. Profiled with plain
``torch.profiler.profile`` + ``schedule(wait=1, warmup=1, active=3)`` + ``tensorboard_trace_handler``
(``record_shapes=True``), then timed in alternating CUDA-synchronised blocks, unprofiled and profiled.

``fix.json`` gives, per step, the FLOPs counted by hand: the model's (each Linear's ``2 * tokens * in * out``
forward, twice that backward: 6 x the parameters' multiply-adds, Kaplan et al. 2020 / PaLM's MFU, Chowdhery et al.
2022, Appendix B) and the hardware's (the checkpointed run's forward counted twice: 8 x), and the step times.

Parameters (environment): ``CKPT_WIDTH`` (2048), ``CKPT_LAYERS`` (8), ``CKPT_TOKENS`` (8192: batch x sequence).

Example::

    python scripts/checkpoint_scenario.py --out runs/checkpoint
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fix_scenarios import CUDA, DEV, SCHEDULE, _sync, _timed  # noqa: E402

WIDTH = int(os.environ.get("CKPT_WIDTH", "2048"))
LAYERS = int(os.environ.get("CKPT_LAYERS", "8"))
TOKENS = int(os.environ.get("CKPT_TOKENS", "8192"))


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(F.gelu(self.up(x)))


class Net(nn.Module):
    def __init__(self, ckpt: bool) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(WIDTH) for _ in range(LAYERS))
        self.ckpt = ckpt

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for b in self.blocks:
            x = checkpoint(b, x, use_reentrant=False) if self.ckpt else b(x)
        return x


def _loop(ckpt: bool):
    torch.manual_seed(0)
    net = Net(ckpt).to(DEV)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4, fused=CUDA)
    x = torch.randn(TOKENS, WIDTH, device=DEV)
    y = torch.randn(TOKENS, WIDTH, device=DEV)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(DEV.type, dtype=torch.bfloat16):
            loss = F.mse_loss(net(x).float(), y)
        loss.backward()
        opt.step()

    return step


def _profile(out: Path):
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if CUDA else [])
    return profile(activities=activities, schedule=schedule(**SCHEDULE), record_shapes=True,
                   on_trace_ready=tensorboard_trace_handler(str(out), worker_name="rank0", use_gzip=True))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    variants = {"plain": _loop(False), "checkpointed": _loop(True)}
    for name, step in variants.items():
        with _profile(args.out / name) as prof:
            for _ in range(6):
                step()
                prof.step()
        _sync()
    macs = LAYERS * TOKENS * (WIDTH * 4 * WIDTH) * 2  # the two Linears of each block, per forward pass
    doc = {"width": WIDTH, "layers": LAYERS, "tokens": TOKENS,
           "model_flops_per_step": 6 * macs, "hardware_flops_per_step": {"plain": 6 * macs, "checkpointed": 8 * macs},
           "unprofiled_ms": _timed(variants, profiled=False), "profiled_ms": _timed(variants, profiled=True),
           "device": torch.cuda.get_device_name() if CUDA else "cpu", "torch": torch.__version__}
    (args.out / "fix.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(doc))


if __name__ == "__main__":
    main()
