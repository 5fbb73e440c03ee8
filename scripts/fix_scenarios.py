"""One-GPU training loops with a common slowdown and its usual fix: the what-if of a trace against the fix, measured.

The matrix (``matrix_scenarios.py``) builds a cause into a loop and measures what was built in. Here the loop
is written the way people write it, with a habit that costs time, and the fix is the one a reader would make.
Each scenario profiles the loop as written (``slow/``) and the loop fixed (``fixed/``) with plain
``torch.profiler.profile`` + ``schedule(wait=1, warmup=1, active=3)`` + ``tensorboard_trace_handler`` (nothing
traceprobe-specific), then times every variant: blocks of :data:`BLOCK` steps of each, taken in turn :data:`ROUNDS`
times, a device synchronize before and after each block, once unprofiled and once inside the profiler (its events
dropped). ``fix.json`` holds each variant's step times: the slow loop's minus a fix's is what the fix gave back. A
trace's what-if is read against the profiled difference, since the profiler's own cost on the host is in the trace
it reads; the unprofiled difference says what the fix gives the job.
Where the slow loop has more than one cause, fixes that remove one cause each are timed too (``other_fixes``:
a fused optimizer, batches tokenized or augmented before the loop), so each cause's what-if has its own fix.

Scenarios (``--scenario``):

- ``launch-bound``: a deep, narrow MLP trained with Adam, eager: the host launches each small kernel slower
  than the device runs it. Fix: capture the whole step in one CUDA graph and replay it (the PyTorch docs'
  whole-network capture; ``Adam(capturable=True)`` in both).
- ``log-every-step``: a small GPT whose batches are tokenized in Python on the host and whose loss is read
  with ``loss.item()`` each step for logging: the host waits for the device there, so the next batch's
  tokenizing runs with the device idle. Fix: log every 50 steps (no read in the measured steps).
- ``cpu-augment``: a CNN whose images are cropped, flipped and normalized with CPU tensor ops in the main
  process before a pinned, non-blocking copy: the host is slower than the device. Fix: copy the raw
  ``uint8`` batch and augment it on the GPU.
- ``decode``: greedy generation with a small GPT (inference, no backward), a batch of sequences over a sliding
  context window, checking for the end-of-sequence token after every token (``if (nxt == eos).all(): break``): a sync
  per token. Fix: check once per step (``FIX_TOKENS`` tokens, 16).
- ``grad-check``: a GPT step that clips the gradient norm and checks it on the host
  (``if not torch.isfinite(norm): skip``) before the optimizer: a sync in mid-step, after which the host
  launches the optimizer and tokenizes the next batch with the device idle. Fix: no host check (the
  clipping stays; a non-finite norm is left to the loss scaler or the next step's log).

``FIX_SCALE`` (default 1) scales the models' widths and the host work, so held-out runs vary the sizes;
``FIX_HOST`` (default 1) scales the Python tokenizing alone.

Example::

    python scripts/fix_scenarios.py --scenario log-every-step --out runs/fix/log-every-step
    for s in $(python scripts/fix_scenarios.py --list); do python scripts/fix_scenarios.py --scenario $s --out runs/fix/$s; done
"""

from __future__ import annotations

import copy
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_loops  # noqa: E402
from gpu_loops import CUDA, DEV, scaled, scenario_args, sync, timed  # noqa: E402

SCENARIOS = ["launch-bound", "log-every-step", "cpu-augment", "grad-check", "decode"]
DECODE_TOKENS = int(os.environ.get("FIX_TOKENS", "16"))
"""Tokens a profiler step of ``decode`` generates."""
BLOCK, ROUNDS = 10, 3
SCALE = float(os.environ.get("FIX_SCALE", "1"))
HOST = float(os.environ.get("FIX_HOST", "1"))


def _scaled(n: int, multiple: int = 8) -> int:
    return scaled(n, SCALE, multiple)


def _timed(variants: dict[str, Callable[[], object]], profiled: bool) -> dict[str, float]:
    """The variants' mean ms per step (:func:`gpu_loops.timed`), each stepped once first."""
    for step in variants.values():
        step()
    return timed(variants, "profiled" if profiled else "bare", BLOCK, ROUNDS)


def _pin(t: torch.Tensor) -> torch.Tensor:
    return t.pin_memory() if CUDA else t


def _mlp(width: int, depth: int) -> nn.Sequential:
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers).to(DEV)


def launch_bound() -> tuple[dict, dict]:
    width, depth, batch = _scaled(512), 24, 256
    eager = _mlp(width, depth)
    graphed = copy.deepcopy(eager)
    x, y = torch.randn(batch, width, device=DEV), torch.randn(batch, width, device=DEV)
    opt = torch.optim.Adam(eager.parameters(), lr=1e-4, capturable=CUDA)

    def slow() -> None:
        opt.zero_grad(set_to_none=True)
        F.mse_loss(eager(x), y).backward()
        opt.step()

    if not CUDA:
        return {"slow": slow, "fixed": slow}, {"width": width, "depth": depth, "batch": batch, "fixed": "none on CPU"}
    gopt = torch.optim.Adam(graphed.parameters(), lr=1e-4, capturable=True)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            gopt.zero_grad(set_to_none=True)
            F.mse_loss(graphed(x), y).backward()
            gopt.step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    gopt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        F.mse_loss(graphed(x), y).backward()
        gopt.step()
    fused_model = copy.deepcopy(eager)
    fused = torch.optim.Adam(fused_model.parameters(), lr=1e-4, capturable=True, fused=True)

    def fused_step() -> None:
        fused.zero_grad(set_to_none=True)
        F.mse_loss(fused_model(x), y).backward()
        fused.step()

    return {"slow": slow, "fixed": graph.replay, "fused-optimizer": fused_step}, {"width": width, "depth": depth, "batch": batch}


class _Block(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(a)
        return x + self.mlp(self.ln2(x))


class _GPT(nn.Module):
    def __init__(self, vocab: int, d: int, layers: int, heads: int, seq: int) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(_Block(d, heads) for _ in range(layers))
        self.head = nn.Linear(d, vocab)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(x)


def _tokenize(words: list[str], vocab: int, shape: tuple[int, int]) -> torch.Tensor:
    """A batch of token ids made in Python on the host (a stand-in for a tokenizer): pinned, for a non-blocking copy."""
    ids = [hash(w) % vocab for w in words]
    return _pin(torch.tensor(ids[: shape[0] * shape[1]], dtype=torch.long).view(shape))


def _gpt_job():
    vocab, d, layers, seq, batch = 8192, _scaled(768, 64), 6, 256, 32
    model = _GPT(vocab, d, layers, 8, seq).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    n = batch * (seq + 1)
    words = [f"w{i}" for i in range(int(n * 25 * SCALE * HOST))]
    words = (words * (n // len(words) + 1))[: max(n, len(words))]

    made = _tokenize(words, vocab, (batch, seq + 1))

    def batch_of(pretokenized: bool = False) -> torch.Tensor:
        return (made if pretokenized else _tokenize(words, vocab, (batch, seq + 1))).to(DEV, non_blocking=True)

    def loss_of(idx: torch.Tensor) -> torch.Tensor:
        logits = model(idx[:, :-1])
        return F.cross_entropy(logits.reshape(-1, vocab), idx[:, 1:].reshape(-1))

    return model, opt, batch_of, loss_of, {"d_model": d, "layers": layers, "seq": seq, "batch": batch, "words": len(words)}


def log_every_step() -> tuple[dict, dict]:
    model, opt, batch_of, loss_of, facts = _gpt_job()
    logged: list[float] = []

    def step(log: bool, pretokenized: bool = False) -> None:
        idx = batch_of(pretokenized)
        loss = loss_of(idx)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if log:
            logged.append(loss.item())

    return {"slow": lambda: step(True), "fixed": lambda: step(False), "pretokenized": lambda: step(True, True)}, facts


def grad_check() -> tuple[dict, dict]:
    model, opt, batch_of, loss_of, facts = _gpt_job()
    skipped = [0]

    def step(check: bool, pretokenized: bool = False) -> None:
        idx = batch_of(pretokenized)
        loss = loss_of(idx)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
        if check and not torch.isfinite(norm):
            skipped[0] += 1
            return
        opt.step()

    return {"slow": lambda: step(True), "fixed": lambda: step(False), "pretokenized": lambda: step(True, True)}, facts


def decode() -> tuple[dict, dict]:
    """Greedy generation with a small GPT over a sliding context window: a profiler step is :data:`DECODE_TOKENS`
    tokens of a batch of sequences, each token a forward pass, an argmax and the window slid in place; the loop
    as written stops at the end-of-sequence token, checked each token (``if (nxt == eos).all(): break``)."""
    vocab, d, layers, ctx, batch = 8192, _scaled(512, 64), 8, 32, _scaled(32)
    model = _GPT(vocab, d, layers, 8, ctx).to(DEV).eval()
    eos = -1  # (never sampled: every variant generates every token)
    buf = torch.randint(0, vocab, (batch, ctx), device=DEV)

    @torch.no_grad()
    def token(b: torch.Tensor) -> torch.Tensor:
        nxt = model(b)[:, -1].argmax(-1)
        b[:, :-1] = b[:, 1:].clone()
        b[:, -1] = nxt
        return nxt

    def slow() -> None:
        for _ in range(DECODE_TOKENS):
            if (token(buf) == eos).all():  # (a sync per token)
                break

    def fixed() -> None:
        done = torch.zeros(batch, dtype=torch.bool, device=DEV)
        for _ in range(DECODE_TOKENS):
            done |= token(buf) == eos
        if done.all():  # (one sync per step)
            return

    variants: dict[str, Callable[[], object]] = {"slow": slow, "fixed": fixed}
    return variants, {"d_model": d, "layers": layers, "context": ctx, "batch": batch, "tokens_per_step": DECODE_TOKENS}


def _cnn(width: int) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(width, 2 * width, 3, padding=1), nn.BatchNorm2d(2 * width), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(2 * width, 4 * width, 3, padding=1), nn.BatchNorm2d(4 * width), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4 * width, 100)).to(DEV)


def _augment(raw: torch.Tensor, crop: int, flip: torch.Tensor, top: int, left: int) -> torch.Tensor:
    """Crop, flip where ``flip``, scale to [0, 1] and normalize: the same tensor ops on either device."""
    x = raw[:, :, top:top + crop, left:left + crop].float().div_(255)
    x = torch.where(flip.view(-1, 1, 1, 1), x.flip(3), x)
    mean = torch.tensor([0.485, 0.456, 0.406], device=x.device).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225], device=x.device).view(1, 3, 1, 1)
    return (x - mean) / std


def cpu_augment() -> tuple[dict, dict]:
    batch, side, crop, width = _scaled(128), 160, 144, 64
    model = _cnn(width).to(memory_format=torch.channels_last)  # type: ignore[call-overload]
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    gen = torch.Generator().manual_seed(0)
    pool = [_pin(torch.randint(0, 256, (batch, 3, side, side), dtype=torch.uint8, generator=gen)) for _ in range(2)]
    labels = torch.randint(0, 100, (batch,), device=DEV)
    i = [0]

    ready = [_pin(_augment(raw, crop, torch.rand(batch, generator=gen) < 0.5, 8, 8)) for raw in pool]

    def step(on_gpu: bool, pre: bool = False) -> None:
        i[0] += 1
        raw = pool[i[0] % len(pool)]
        flip = torch.rand(batch, generator=gen) < 0.5
        top, left = (int(v) for v in torch.randint(0, side - crop + 1, (2,), generator=gen))
        if pre:
            x = ready[i[0] % len(ready)].to(DEV, non_blocking=True)
        elif on_gpu:
            x = _augment(raw.to(DEV, non_blocking=True), crop, flip.to(DEV, non_blocking=True), top, left)
        else:
            x = _pin(_augment(raw, crop, flip, top, left)).to(DEV, non_blocking=True)
        loss = F.cross_entropy(model(x.contiguous(memory_format=torch.channels_last)), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return {"slow": lambda: step(False), "fixed": lambda: step(True), "pre-augmented": lambda: step(False, True)}, {"batch": batch, "image": side, "crop": crop,
                                                                        "width": width, "cpu_threads": torch.get_num_threads()}


BUILD = {"launch-bound": launch_bound, "log-every-step": log_every_step, "cpu-augment": cpu_augment, "grad-check": grad_check,
         "decode": decode}
HABIT = {"launch-bound": ("many small kernels launched one by one (eager)", "one CUDA graph of the whole step",
                         "the host's whole part of the step: each launch and the Python, optimizer and ops around them"),
         "log-every-step": ("loss.item() every step, then a batch tokenized in Python", "log every 50 steps",
                            "the sync of loss.item()"),
         "cpu-augment": ("images augmented with CPU tensor ops in the main process", "augment on the GPU after the copy",
                         "the CPU augmentation (its ops and the host time between them)"),
         "grad-check": ("the clipped gradient norm checked on the host before the optimizer", "no host check",
                        "the sync of the host check"),
         "decode": ("generation that checks for the end of sequence after each token", "check once per step",
                    "the sync of each token's check")}
"""Per scenario: the habit of the slow loop, the fix, and what the fix removes."""


PROFILED_VARIANTS = ("slow", "fixed")
OTHER_FIXES = {"fused-optimizer": "the optimizer's launches: Adam(fused=True), one kernel in place of its foreach kernels",
               "pretokenized": "the Python tokenizing: one batch made before the loop and copied again each step",
               "pre-augmented": "the CPU augmentation: batches augmented before the loop and copied each step"}
"""Fixes timed but not profiled: each removes one cause of the slow loop, so a what-if of that cause is read against it."""


def main() -> None:
    args = scenario_args(SCENARIOS, __doc__)
    if args is None:
        return
    scenario, out = args
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    variants, facts = BUILD[scenario]()
    for name, step in variants.items():
        if name not in PROFILED_VARIANTS:
            continue
        for _ in range(2):  # warm-up outside the profiler: first calls, cuDNN plans, the allocator
            step()
        sync()
        gpu_loops.profiled(out / name, step, record_shapes=False)
    bare, profiled = _timed(variants, False), _timed(variants, True)
    habit, fix, removed = HABIT[scenario]
    removes = {"fixed": removed, **OTHER_FIXES}
    facts = {"scenario": scenario, "habit": habit, "fix": fix,
             "variants": {k: {"ms_per_step": round(bare[k], 3), "profiled_ms_per_step": round(profiled[k], 3),
                              **({"removes": removes[k]} if k != "slow" else {})} for k in variants},
             "measured": f"{ROUNDS} rounds of {BLOCK} steps of each variant, a device synchronize around each block: "
                         "unprofiled (ms_per_step), then inside torch.profiler.profile (profiled_ms_per_step)",
             "scale": SCALE, "host_scale": HOST, "device": torch.cuda.get_device_name() if CUDA else "cpu", "torch": torch.__version__, **facts}
    (out / "fix.json").write_text(json.dumps(facts, indent=2) + "\n")
    print(json.dumps(facts))


if __name__ == "__main__":
    main()
