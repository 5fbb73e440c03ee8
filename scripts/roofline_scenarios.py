"""GPU scenarios for the kernel what-ifs (docs/roofline.md): each a slow variant and its fix, timed in alternating
CUDA-synchronised blocks without the profiler (5 blocks of 20 steps each, the median block), then the slow variant
profiled for 3 steps with ``record_shapes=True``, its trace written as ``OUTDIR/<scenario>.pt.trace.json.gz``.

Scenarios: ``gemm-fp32`` (four 8192^3 fp32 GEMMs a step; fix: TF32), ``gemm-bf16-control`` (the same in bf16: a
healthy GEMM loop, no fix), ``elementwise`` (a chain of 8 elementwise ops over 2^26 fp32 values; fix:
``torch.compile``), ``attention`` (causal SDPA on bf16 (8, 16, 4096, 64) with the math backend; fix: flash),
``decode`` (8 GEMMs of M = 1, 8, 32 tokens against an 8192 x 8192 bf16 weight: bound by the weights' bytes).

Usage (on a CUDA machine): ``python scripts/roofline_scenarios.py OUTDIR``; one JSON line per scenario: the median
step times (ms) of the slow variant and its fix, and the gain. tests/data/roofline_h100 holds one run's traces
and figures (its README); tests/test_what_if_kernels.py checks the what-ifs against them.
"""

from __future__ import annotations

import json
import sys
import time


def main(out: str) -> None:
    import torch

    sdpa, attn = torch.nn.functional.scaled_dot_product_attention, torch.nn.attention
    d, n = "cuda", 8192
    x = torch.randn(n, n, device=d)
    xb = x.bfloat16()
    e = torch.randn(1 << 26, device=d)
    q = torch.randn(8, 16, 4096, 64, device=d, dtype=torch.bfloat16)
    wd = torch.randn(8192, 8192, device=d, dtype=torch.bfloat16)
    tokens = [torch.randn(m, 8192, device=d, dtype=torch.bfloat16) for m in (1, 8, 32)]

    def gemm_fp32() -> None:
        torch.backends.cuda.matmul.allow_tf32 = False
        for _ in range(4):
            x @ x

    def gemm_tf32() -> None:
        torch.backends.cuda.matmul.allow_tf32 = True
        for _ in range(4):
            x @ x
        torch.backends.cuda.matmul.allow_tf32 = False

    def gemm_bf16() -> None:
        for _ in range(4):
            xb @ xb

    def chain(t: torch.Tensor) -> torch.Tensor:
        return ((t * 1.5 + 0.5).sin() * t - 0.25).relu() + t.cos()

    compiled = torch.compile(chain)

    def attention_math() -> None:
        with attn.sdpa_kernel(attn.SDPBackend.MATH):
            sdpa(q, q, q, is_causal=True)

    def attention_flash() -> None:
        with attn.sdpa_kernel(attn.SDPBackend.FLASH_ATTENTION):
            sdpa(q, q, q, is_causal=True)

    def decode() -> None:
        for t in tokens:
            for _ in range(8):
                t @ wd

    scenarios = {"gemm-fp32": (gemm_fp32, gemm_tf32), "gemm-bf16-control": (gemm_bf16, None),
                 "elementwise": (lambda: chain(e), lambda: compiled(e)), "attention": (attention_math, attention_flash),
                 "decode": (decode, None)}
    for name, (slow, fix) in scenarios.items():
        fns = [f for f in (slow, fix) if f is not None]
        for f in fns * 3:  # (warm-up: plans, autotuning, compilation)
            f()
        blocks: dict[int, list[float]] = {0: [], 1: []}
        for _ in range(5):
            for i, f in enumerate(fns):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(20):
                    f()
                torch.cuda.synchronize()
                blocks[i].append((time.perf_counter() - t0) / 20e-3)
        with torch.profiler.profile(record_shapes=True, schedule=torch.profiler.schedule(wait=1, warmup=1, active=3)) as p:
            for _ in range(5):
                slow()
                torch.cuda.synchronize()
                p.step()
        p.export_chrome_trace(f"{out}/{name}.pt.trace.json.gz")
        ms = [sorted(v)[2] for v in blocks.values() if v]
        print(json.dumps({"scenario": name, "ms": ms, "gain": ms[0] - ms[1] if len(ms) > 1 else None}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
