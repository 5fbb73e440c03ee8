"""A GPT-2-style training job for recording real multi-rank traces (DDP or FSDP2 under torchrun).

Nothing here is traceprobe-specific unless asked: with ``--profiler plain`` it profiles
itself the way most training jobs do, with ``torch.profiler.profile`` +
``schedule(wait, warmup, active, repeat)`` + ``tensorboard_trace_handler`` (one
``*.pt.trace.json.gz`` per rank and window). With ``--profiler traceprobe`` it calls
``traceprobe.step()`` each iteration, for ``traceprobe record --script``.

Examples (2 GPUs)::

    torchrun --standalone --nproc-per-node 2 scripts/train_gpt_ddp.py --profiler plain --out runs/tb-ddp
    torchrun --standalone --nproc-per-node 2 -m traceprobe record --script scripts/train_gpt_ddp.py \
        --out runs/rec-ddp --repeat 2 -- --profiler traceprobe

The host never waits for the GPU inside the loop (no ``.item()``), so the GPU runs
behind the host as in real jobs: each profiled window opens with device work launched
before it.
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int, d: int, layers: int, heads: int, seq: int) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)
        self.register_buffer("mask", torch.triu(torch.full((seq, seq), float("-inf")), 1), persistent=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for b in self.blocks:
            x = b(x, self.mask)
        return self.head(self.ln(x))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--profiler", choices=["plain", "traceprobe", "none"], default="plain")
    p.add_argument("--parallel", choices=["ddp", "fsdp"], default="ddp")
    p.add_argument("--out", default="runs/tb")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--dim", type=int, default=1024)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--wait", type=int, default=1)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--active", type=int, default=3)
    p.add_argument("--repeat", type=int, default=2)
    a = p.parse_args(argv)

    dist.init_process_group("nccl")
    rank, local = dist.get_rank(), int(os.environ.get("LOCAL_RANK", "0"))
    dev = torch.device("cuda", local)
    torch.cuda.set_device(dev)
    torch.manual_seed(rank)
    model = GPT(a.vocab, a.dim, a.layers, a.heads, a.seq).to(dev)
    if a.parallel == "ddp":
        model = nn.parallel.DistributedDataParallel(model, device_ids=[local])
    else:
        from torch.distributed.fsdp import fully_shard

        for b in model.blocks:  # type: ignore[union-attr]
            fully_shard(b)
        fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = torch.randint(0, a.vocab, (a.batch, a.seq + 1), device=dev)

    def train_step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(data[:, :-1])
            loss = F.cross_entropy(logits.float().view(-1, a.vocab), data[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    if a.profiler == "plain":
        from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

        sched = schedule(wait=a.wait, warmup=a.warmup, active=a.active, repeat=a.repeat)
        handler = tensorboard_trace_handler(a.out, worker_name=f"rank{rank}", use_gzip=True)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=sched, on_trace_ready=handler) as prof:
            for _ in range(a.steps):
                train_step()
                prof.step()
    else:
        step = None
        if a.profiler == "traceprobe":
            import traceprobe

            step = traceprobe.step
        for _ in range(a.steps):
            train_step()
            if step is not None:
                step()
    torch.cuda.synchronize()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
