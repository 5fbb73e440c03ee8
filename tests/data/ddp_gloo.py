"""A small DistributedDataParallel script over gloo, written at module level as many training scripts are.

Run it under torchrun, with or without traceprobe::

    torchrun --nproc-per-node 2 tests/data/ddp_gloo.py
    torchrun --nproc-per-node 2 -m traceprobe record --script tests/data/ddp_gloo.py --out runs/ddp

Under ``record --script`` each rank used to hang after writing its trace in
about half of the runs (the script's globals, the DDP model among them, were
freed while the interpreter ran; see ``traceprobe.recording.runner``).
"""

import os

import torch
import torch.distributed as dist
import torch.nn as nn

import traceprobe

dist.init_process_group("gloo")
model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(16, 64), torch.randn(16, 1)
for _ in range(8):
    opt.zero_grad()
    nn.functional.mse_loss(model(x), y).backward()
    opt.step()
    traceprobe.step()
dist.destroy_process_group()
print(f"ddp_gloo: rank {os.environ.get('RANK')} done", flush=True)
