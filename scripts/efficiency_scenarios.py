"""Busy-time scenarios: loops whose device time is spent in slow kernels, each with the usual fix, measured.

Where ``fix_scenarios.py`` builds loops that lose time to idle devices, these keep the device busy and lose time
inside the kernels: the what-ifs of kernel efficiency (each class at an achievable fraction of its roofline, unfused
elementwise chains fused) are read against the fix measured here. Each scenario profiles every variant with plain
``torch.profiler.profile(record_shapes=True)`` + ``schedule(wait=1, warmup=1, active=3)`` +
``tensorboard_trace_handler`` (nothing traceprobe-specific), then times every variant: :data:`ROUNDS` rounds of a
block of :data:`BLOCK` steps of each, taken in turn, a device synchronize around each block, unprofiled, inside the
profiler (CPU + CUDA, events dropped) and inside the profiler with ``record_shapes=True`` (what recording shapes
costs a step). ``fix.json`` holds each variant's step times and the work of its step counted by hand (FLOPs, bytes)
so that MFU can be checked against FLOPs over time.

Scenarios (``--scenario``):

- ``fp32-gemm``: an MLP of 4096-wide linear layers trained in fp32 with TF32 off: the GEMMs run on the CUDA cores.
  Fixes: ``torch.backends.cuda.matmul.allow_tf32 = True`` (``tf32``) and ``torch.autocast(dtype=torch.bfloat16)``
  (``bf16``).
- ``unfused``: a bf16 transformer MLP block with a hand-written RMSNorm, SiLU gate and residual (eager: a dozen
  elementwise kernels around two GEMMs, each reading and writing the activations). Fix: ``torch.compile`` of the
  same block (the elementwise chains fused into a few Triton kernels).
- ``attention``: causal self-attention through ``scaled_dot_product_attention`` on the math backend (the matmuls,
  softmax and mask as separate kernels), forward and backward. Fix: the flash backend.
- ``gemm-control``: a healthy bf16 GEMM-bound training loop (large linear layers, ReLU between them, the output's
  mean as the loss: no elementwise chain to fuse): the control (one variant, ``loop``).
- ``fp32-loss``: the same layers, the loss computed the way many loops write it, ``out.float().square().mean()``: on
  8192 x 8192 outputs the cast, square and their backward are a chain of elementwise kernels over 256 MB fp32
  tensors (``slow``). Fix (``compiled``): the forward and loss under ``torch.compile`` (the chain fused).
- ``decode-gemm``: decode-shaped GEMMs, ``M`` tokens (1, 8 and 32; variants ``m1``, ``m8``, ``m32``) against 8192 x
  8192 bf16 weights, layer after layer: the weights' bytes over the memory bandwidth bound the time, not the FLOPs.
- ``timm-resnet``: timm's ResNet-50 trained in bf16 autocast, channels-last, batch 128 of 224 x 224 images (one
  variant, ``loop``: convolutions, batch norms and their backward).
- ``hf-gpt2``: Hugging Face transformers' GPT-2 (small, built from its config, random weights) trained on batches of
  8 x 512 tokens in fp32 (``slow``, TF32 off) and in bf16 autocast (``bf16``).
- ``pre-sync``: a profiled window that opens with ``torch.cuda.synchronize()`` while 100 ms of device work launched
  before the profiler started is still running, then steps of device-bound work: the sync waits for work the trace
  never saw (only a trace is recorded; there is no fix to time).
- ``loader``: a training step fed by a ``DataLoader`` whose two worker processes cannot keep up (each sample costs
  host time). Fix: eight workers.

Example::

    python scripts/efficiency_scenarios.py --scenario fp32-gemm --out runs/eff/fp32-gemm
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_loops  # noqa: E402
from gpu_loops import CUDA, DEV, STEPS, activities, scaled, scenario_args, sync, timed  # noqa: E402

SCENARIOS = ["fp32-gemm", "unfused", "attention", "gemm-control", "fp32-loss", "decode-gemm", "loader", "timm-resnet", "hf-gpt2", "pre-sync"]
BLOCK, ROUNDS = int(os.environ.get("EFF_BLOCK", "10")), int(os.environ.get("EFF_ROUNDS", "3"))
SCALE = float(os.environ.get("EFF_SCALE", "1"))


def _scaled(n: int, multiple: int = 64) -> int:
    return scaled(n, SCALE, multiple)


def _timed(variants: dict[str, Callable[[], object]], mode: str) -> dict[str, float]:
    """The variants' mean ms per step in ``mode`` (:func:`gpu_loops.timed`), loaders drained (:data:`DRAIN`)."""
    return timed(variants, mode, BLOCK, ROUNDS, DRAIN)


def _mlp(width: int, depth: int, dtype=torch.float32) -> nn.Sequential:
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [nn.Linear(width, width, bias=False), nn.ReLU()]
    return nn.Sequential(*layers).to(DEV, dtype)


def _train_step(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, autocast: bool = False) -> None:
    with torch.autocast(DEV.type, dtype=torch.bfloat16, enabled=autocast):
        loss = model(x).float().square().mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def fp32_gemm() -> tuple[dict, dict]:
    width, depth, batch = _scaled(4096), 4, _scaled(4096)
    model = _mlp(width, depth)
    opt = torch.optim.SGD(model.parameters(), lr=1e-6)
    x = torch.randn(batch, width, device=DEV)

    def step(tf32: bool, bf16: bool = False) -> None:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        _train_step(model, opt, x, autocast=bf16)

    flops = 3 * depth * 2 * batch * width * width  # forward, grad of input, grad of weight
    return ({"slow": lambda: step(False), "tf32": lambda: step(True), "bf16": lambda: step(False, True)},
            {"width": width, "depth": depth, "batch": batch, "gemm_flops_per_step": flops})


class _Block(nn.Module):
    """A transformer MLP block written the way people write it: RMSNorm by hand, a SiLU-gated MLP, a residual."""

    def __init__(self, d: int, hidden: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.up = nn.Linear(d, 2 * hidden, bias=False)
        self.down = nn.Linear(hidden, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        h = (h * self.weight).to(x.dtype)
        a, b = self.up(h).chunk(2, dim=-1)
        h = F.silu(a) * b
        h = h * 0.5 + h.tanh() * 0.5  # a hand-written soft clip: two more passes over the activations
        return x + self.down(h)


def unfused() -> tuple[dict, dict]:
    d, hidden, tokens, layers = _scaled(2048), _scaled(2048), _scaled(16384), 4
    eager = nn.Sequential(*[_Block(d, hidden) for _ in range(layers)]).to(DEV, torch.bfloat16)
    compiled = torch.compile(eager) if CUDA else eager
    opt = torch.optim.SGD(eager.parameters(), lr=1e-6)
    x = torch.randn(tokens, d, device=DEV, dtype=torch.bfloat16)

    def step(model: nn.Module) -> None:
        loss = model(x).float().square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    flops = 3 * layers * 2 * tokens * (d * 2 * hidden + hidden * d)
    return ({"slow": lambda: step(eager), "compiled": lambda: step(compiled)},
            {"d": d, "hidden": hidden, "tokens": tokens, "layers": layers, "gemm_flops_per_step": flops})


def attention() -> tuple[dict, dict]:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    batch, heads, seq, dim = 8, 16, _scaled(2048), 64
    q, k, v = (torch.randn(batch, heads, seq, dim, device=DEV, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))

    def step(backend) -> None:
        with sdpa_kernel(backend):
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out.float().square().mean().backward()

    flash = SDPBackend.FLASH_ATTENTION if CUDA else SDPBackend.MATH
    flops = 3 * 4 * batch * heads * seq * seq * dim  # forward 2 matmuls (4 b h s^2 d), backward twice that; not halved for causal
    return ({"slow": lambda: step(SDPBackend.MATH), "flash": lambda: step(flash)},
            {"batch": batch, "heads": heads, "seq": seq, "dim": dim, "causal": True, "full_attention_flops_per_step": flops})


def _gemm_mlp() -> tuple[nn.Sequential, torch.optim.Optimizer, torch.Tensor, dict]:
    width, depth, batch = _scaled(8192), 4, _scaled(8192)
    model = _mlp(width, depth, torch.bfloat16)
    opt = torch.optim.SGD(model.parameters(), lr=1e-6)
    x = torch.randn(batch, width, device=DEV, dtype=torch.bfloat16)
    return model, opt, x, {"width": width, "depth": depth, "batch": batch, "gemm_flops_per_step": 3 * depth * 2 * batch * width * width}


def gemm_control() -> tuple[dict, dict]:
    model, opt, x, facts = _gemm_mlp()

    def step() -> None:
        loss = model(x).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return {"loop": step}, facts


def fp32_loss() -> tuple[dict, dict]:
    model, opt, x, facts = _gemm_mlp()

    def loss_of(x: torch.Tensor) -> torch.Tensor:
        return model(x).float().square().mean()

    compiled = torch.compile(loss_of) if CUDA else loss_of

    def step(f: Callable[[torch.Tensor], torch.Tensor]) -> None:
        loss = f(x)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return {"slow": lambda: step(loss_of), "compiled": lambda: step(compiled)}, facts


def decode_gemm() -> tuple[dict, dict]:
    d, layers = _scaled(8192), 24
    weights = [torch.randn(d, d, device=DEV, dtype=torch.bfloat16) / d**0.5 for _ in range(layers)]

    def step(m: int) -> None:
        x = torch.randn(m, d, device=DEV, dtype=torch.bfloat16)
        with torch.no_grad():
            for w in weights:
                x = x @ w

    return ({f"m{m}": (lambda m=m: step(m)) for m in (1, 8, 32)},
            {"d": d, "layers": layers, "weight_bytes_per_step": layers * d * d * 2,
             "flops_per_step": {f"m{m}": layers * 2 * m * d * d for m in (1, 8, 32)}})


class _SlowSamples(torch.utils.data.Dataset):
    """Samples that each cost host time in the worker (a Python loop), as a decode or augmentation would."""

    def __init__(self, n: int, shape: tuple[int, ...], work: int) -> None:
        self.n, self.shape, self.work = n, shape, work

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        acc = 0
        for j in range(self.work):
            acc += (i * j) % 7
        return torch.full(self.shape, float(acc % 3))


DRAIN: dict[str, int] = {}
"""Steps taken untimed before a variant's block: the batches its DataLoader's workers prefetched while the other
variants' blocks ran (without this the faster loader's block starts with a full queue)."""


def loader() -> tuple[dict, dict]:
    width, batch = _scaled(4096), 1024
    model = _mlp(width, 4)
    opt = torch.optim.SGD(model.parameters(), lr=1e-6)
    data = _SlowSamples(10**7, (width,), int(1000 * SCALE))
    iters = {}
    for name, workers in (("slow", 2), ("workers8", 8)):
        dl = torch.utils.data.DataLoader(data, batch_size=batch, num_workers=workers, pin_memory=CUDA, persistent_workers=True,
                                         prefetch_factor=1)
        iters[name] = iter(dl)
        DRAIN[name] = workers

    def step(name: str) -> None:
        x = next(iters[name]).to(DEV, non_blocking=True)
        _train_step(model, opt, x, autocast=CUDA)

    return ({"slow": lambda: step("slow"), "workers8": lambda: step("workers8")},
            {"width": width, "batch": batch, "workers": {"slow": 2, "workers8": 8}, "sample_work": data.work})


def timm_resnet() -> tuple[dict, dict]:
    import timm

    batch = _scaled(128, 8)
    model = timm.create_model("resnet50", pretrained=False).to(DEV, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    x = torch.randn(batch, 3, 224, 224, device=DEV).to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (batch,), device=DEV)

    def step() -> None:
        with torch.autocast(DEV.type, dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return {"loop": step}, {"model": "resnet50", "batch": batch, "image": 224, "timm": timm.__version__}


def hf_gpt2() -> tuple[dict, dict]:
    import transformers

    config = transformers.GPT2Config(n_positions=1024)
    model = transformers.GPT2LMHeadModel(config).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=CUDA)
    batch, seq = 8, _scaled(512, 8)
    idx = torch.randint(0, config.vocab_size, (batch, seq), device=DEV)

    def step(bf16: bool) -> None:
        torch.backends.cuda.matmul.allow_tf32 = False
        with torch.autocast(DEV.type, dtype=torch.bfloat16, enabled=bf16):
            loss = model(input_ids=idx, labels=idx).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return ({"slow": lambda: step(False), "bf16": lambda: step(True)},
            {"model": "gpt2", "batch": batch, "seq": seq, "params": sum(p.numel() for p in model.parameters()),
             "transformers": transformers.__version__})


def pre_sync(out: Path) -> None:
    """Record ``pre-sync`` (see the module's docstring): one window of :data:`STEPS` steps under a plain profiler."""
    from torch.profiler import profile

    a = torch.randn(_scaled(8192), _scaled(8192), device=DEV, dtype=torch.bfloat16)
    for _ in range(3):
        a @ a
    sync()
    t0 = time.perf_counter()
    a @ a
    sync()
    one = time.perf_counter() - t0
    for _ in range(max(1, int(0.1 / max(one, 1e-6)))):  # about 100 ms of work queued before the trace begins
        a @ a
    out.mkdir(parents=True, exist_ok=True)
    with profile(activities=activities(), record_shapes=True) as prof:
        sync()
        for i in range(STEPS):
            with torch.profiler.record_function(f"ProfilerStep#{i}"):
                for _ in range(4):
                    a @ a
        sync()
    prof.export_chrome_trace(str(out / "rank0.pt.trace.json"))


BUILD = {"fp32-gemm": fp32_gemm, "unfused": unfused, "attention": attention, "gemm-control": gemm_control,
         "fp32-loss": fp32_loss, "decode-gemm": decode_gemm, "loader": loader, "timm-resnet": timm_resnet, "hf-gpt2": hf_gpt2}
FIX = {"fp32-gemm": "TF32 (allow_tf32) or bf16 autocast for the fp32 GEMMs", "unfused": "torch.compile of the block",
       "attention": "the flash backend of scaled_dot_product_attention", "gemm-control": "none (control)",
       "fp32-loss": "torch.compile of the forward and loss",
       "decode-gemm": "none: the decode GEMMs' time is the weights' bytes over the bandwidth", "loader": "eight DataLoader workers",
       "timm-resnet": "none (a held-out model)", "hf-gpt2": "bf16 autocast for an fp32 model"}


def main() -> None:
    args = scenario_args(SCENARIOS, __doc__)
    if args is None:
        return
    scenario, out = args
    if scenario == "pre-sync":
        pre_sync(out)
        return
    variants, facts = BUILD[scenario]()
    for step in variants.values():  # warm-up outside the profiler: compilation, cuBLAS and cuDNN plans, the allocator
        for _ in range(3):
            step()
    sync()
    for name, step in variants.items():
        gpu_loops.profiled(out / name, step, record_shapes=True)
    bare, profiled, shapes = (_timed(variants, m) for m in ("bare", "profiled", "shapes"))
    facts = {"scenario": scenario, "fix": FIX[scenario],
             "variants": {k: {"ms_per_step": round(bare[k], 3), "profiled_ms_per_step": round(profiled[k], 3),
                              "shapes_ms_per_step": round(shapes[k], 3)} for k in variants},
             "measured": f"{ROUNDS} rounds of {BLOCK} steps of each variant in turn, a device synchronize around each block: "
                         "unprofiled (ms_per_step), inside torch.profiler.profile (profiled_ms_per_step), and with "
                         "record_shapes=True (shapes_ms_per_step)",
             "scale": SCALE, "device": torch.cuda.get_device_name() if CUDA else "cpu", "torch": torch.__version__, **facts}
    (out / "fix.json").write_text(json.dumps(facts, indent=2) + "\n")
    print(json.dumps(facts))


if __name__ == "__main__":
    main()
