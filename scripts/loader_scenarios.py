"""An image-classification loop whose DataLoader loads in the main process, against the same loop with workers.

The loop is the one of every image tutorial: a ``torch.utils.data.DataLoader`` over a ``Dataset`` whose
``__getitem__`` turns a stored ``uint8`` image into a normalized ``float32`` crop on the CPU (resize, crop, flip, a
colour jitter), then a ResNet trained with SGD. As written (``slow/``), ``num_workers=0``: each batch is built in the
training process between steps, with the device idle. The fix (``fixed/``): ``num_workers=4, pin_memory=True`` and a
non-blocking copy, everything else the same. Profiled with plain ``torch.profiler.profile`` +
``schedule(wait=1, warmup=1, active=3)`` + ``tensorboard_trace_handler`` (``record_shapes=True``), then timed as
``fix_scenarios.py`` times its loops: blocks of steps of each variant in turn, a device synchronize around each
block, once unprofiled and once inside the profiler. Each variant keeps one iterator for the whole run (persistent
workers); while the other variant's block runs, the workers fill their prefetch queue (``prefetch_factor`` x
workers batches), which matters only where the workers cannot keep up with the step: the script prints the
loading time per batch in the main process so the reader can tell.

``fix.json`` holds the step times (ms) of each variant, profiled and not, and the parameters.

Parameters (environment): ``LOADER_MODEL`` (``resnet50``; ``resnet18``, ``resnet34``, ``resnet101``), ``LOADER_BATCH``
(64), ``LOADER_WORK`` (jitter passes per sample, 4), ``LOADER_SIDE`` (stored image side, 320).

Example::

    python scripts/loader_scenarios.py --out runs/loader/resnet50
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fix_scenarios import CUDA, DEV, SCHEDULE, _sync, _timed  # noqa: E402

MODEL = os.environ.get("LOADER_MODEL", "resnet50")
BATCH = int(os.environ.get("LOADER_BATCH", "64"))
WORK = int(os.environ.get("LOADER_WORK", "4"))
SIDE = int(os.environ.get("LOADER_SIDE", "320"))
CROP = 224
STORED = 256
"""Images held in memory; ``__getitem__`` reads image ``i % STORED`` (a dataset of any length without its bytes)."""
MEAN = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)


class Images(torch.utils.data.Dataset):
    """Stored ``uint8`` images; each item a random-resized, flipped, jittered and normalized ``float32`` crop."""

    def __init__(self, length: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.raw = torch.randint(0, 256, (STORED, 3, SIDE, SIDE), dtype=torch.uint8, generator=g)
        self.labels = torch.randint(0, 1000, (STORED,), generator=g)
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        j = i % STORED
        img = self.raw[j].float().div_(255)
        side = int(torch.randint(CROP, SIDE + 1, ()).item())
        top, left = (int(v) for v in torch.randint(0, SIDE - side + 1, (2,)))
        img = F.interpolate(img[None, :, top:top + side, left:left + side], size=(CROP, CROP), mode="bilinear",
                            antialias=True, align_corners=False)[0]
        if bool(torch.rand(()) < 0.5):
            img = img.flip(-1)
        for _ in range(WORK):
            b, c = 1 + 0.2 * (torch.rand(()) - 0.5), 1 + 0.2 * (torch.rand(()) - 0.5)
            img = ((img * b - img.mean()) * c + img.mean()).clamp_(0, 1)
        return (img - MEAN) / STD, self.labels[j]


def _model() -> nn.Module:
    try:
        import timm

        return timm.create_model(MODEL, num_classes=1000)
    except ImportError:
        import torchvision

        return getattr(torchvision.models, MODEL)(num_classes=1000)


def _loop(workers: int):
    """One variant's training step: the next batch from its own DataLoader iterator, copied, trained on."""
    torch.manual_seed(0)
    model = _model().to(DEV).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loader = torch.utils.data.DataLoader(Images(10**7), batch_size=BATCH, shuffle=False, num_workers=workers,
                                         pin_memory=CUDA and workers > 0, persistent_workers=workers > 0,
                                         prefetch_factor=2 if workers else None, drop_last=True)
    it = iter(loader)

    def step() -> None:
        x, y = next(it)
        x = x.to(DEV, non_blocking=True).to(memory_format=torch.channels_last)
        y = y.to(DEV, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()

    return step


def _load_ms(n: int = 3) -> float:
    """Milliseconds to build one batch in this process (what ``num_workers=0`` adds to each step at most)."""
    ds = Images(10**7)
    t0 = time.perf_counter()
    for k in range(n):
        torch.utils.data.default_collate([ds[k * BATCH + i] for i in range(BATCH)])
    return (time.perf_counter() - t0) * 1e3 / n


def _profile(out: Path):
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if CUDA else [])
    return profile(activities=activities, schedule=schedule(**SCHEDULE), record_shapes=True,
                   on_trace_ready=tensorboard_trace_handler(str(out), worker_name="rank0", use_gzip=True))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    variants = {"slow": _loop(0), "fixed": _loop(4)}
    for name, step in variants.items():
        with _profile(args.out / name) as prof:
            for _ in range(6):
                step()
                prof.step()
        _sync()
    load = _load_ms()
    unprofiled = _timed(variants, profiled=False)
    profiled = _timed(variants, profiled=True)
    doc = {"model": MODEL, "batch": BATCH, "work": WORK, "side": SIDE, "load_ms_per_batch": load,
           "unprofiled_ms": unprofiled, "profiled_ms": profiled,
           "device": torch.cuda.get_device_name() if CUDA else "cpu", "torch": torch.__version__}
    (args.out / "fix.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(doc))


if __name__ == "__main__":
    main()
