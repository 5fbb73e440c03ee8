"""A tiny CPU training loop for traceprobe's capture tests (and an example of a recorded script).

Run it as ``python train_small.py``, or under traceprobe::

    traceprobe record --script tests/data/train_small.py -- --steps 8

It calls ``traceprobe.step()`` at the end of every iteration (a no-op unless a
capture runs), so traceprobe profiles windows of steps; ``--no-steps`` leaves
the calls out and the whole run is one trace.

Options: ``--steps N`` iterations; ``--no-steps``; ``--fail-at K`` raise in
iteration K; ``--exit-code C`` end with ``sys.exit(C)``; ``--exit-message M``
end with ``sys.exit(M)``; ``--ddp`` DistributedDataParallel under torchrun (gloo
on the CPU, NCCL on GPUs);
``--device cuda`` train on ``cuda:<LOCAL_RANK>``; ``--width W`` hidden width.
"""

import argparse
import os
import sys

import torch
import torch.nn.functional as F

import traceprobe


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--no-steps", action="store_true")
    p.add_argument("--fail-at", type=int, default=-1)
    p.add_argument("--exit-code", type=int, default=0)
    p.add_argument("--exit-message", default=None)
    p.add_argument("--ddp", action="store_true")
    p.add_argument("--width", type=int, default=32)
    p.add_argument("--device", default="cpu")
    a = p.parse_args(argv)

    torch.manual_seed(0)
    dev = torch.device(a.device)
    if dev.type == "cuda":
        dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(dev)
    model = torch.nn.Sequential(torch.nn.Linear(16, a.width), torch.nn.ReLU(), torch.nn.Linear(a.width, 1)).to(dev)
    if a.ddp:
        import torch.distributed as dist

        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[dev.index] if dev.type == "cuda" else None)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(8, 16, device=dev), torch.randn(8, 1, device=dev)
    for i in range(a.steps):
        if i == a.fail_at:
            raise RuntimeError(f"planned failure in step {i}")
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if not a.no_steps:
            traceprobe.step()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    print(f"train_small: {a.steps} steps, __name__={__name__}, argv={sys.argv[1:]}", flush=True)
    if a.ddp:
        torch.distributed.destroy_process_group()
    if a.exit_message is not None:
        sys.exit(a.exit_message)
    return a.exit_code


if __name__ == "__main__":
    sys.exit(main())
