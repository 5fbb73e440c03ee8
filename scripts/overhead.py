"""What ``traceprobe record --script`` costs, next to bare torch.profiler and to no profiler.

Usage::

    python scripts/overhead.py [--steps 60] [--width 1024] [--batch 256] [--runs 3] [--device auto]
                               [--wait 1 --warmup 1 --active 3 --repeat 0] [--json]

One sample training loop (an MLP, SGD; on CUDA where available) runs in a fresh
process per measurement, the modes interleaved, ``--runs`` times each:

``none``
    the loop alone (its ``traceprobe.step()`` calls are no-ops);
``torch``
    the loop inside ``torch.profiler.profile`` with the same schedule, calling
    ``prof.step()``, each window exported by ``export_chrome_trace`` to a
    ``.pt.trace.json.gz`` (what a careful user writes by hand);
``traceprobe``
    ``traceprobe record --script`` of the ``none`` loop, windows from its
    ``traceprobe.step()`` calls;
``torch-whole`` / ``traceprobe-whole``
    the same without steps: one trace of the whole run.

Reported per mode (medians): ``loop_s``, the loop's wall time as the loop
sees it (window exports happen inside it; one untimed warm-up iteration and
torch.profiler's one-time import of ``torch._inductor.config`` come before
it in every mode), and ``process_s``, the whole process (interpreter,
imports, the profiler's first start, the final trace).
Ratios compare traceprobe with bare torch.profiler (the goal: 1.0, nothing
added beyond torch.profiler's own overhead) and torch.profiler with no profiler.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _loop(a: argparse.Namespace, on_step) -> float:
    import torch

    dev = torch.device("cuda" if a.device == "cuda" or (a.device == "auto" and torch.cuda.is_available()) else "cpu")
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(a.width, a.width), torch.nn.ReLU(), torch.nn.Linear(a.width, a.width), torch.nn.ReLU(), torch.nn.Linear(a.width, 10)
    ).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(a.batch, a.width, device=dev)
    y = torch.randint(0, 10, (a.batch,), device=dev)
    # one untimed iteration: first-use costs every mode pays (kernels, the optimizer's lazy imports)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if dev.type == "cuda":
            torch.cuda.synchronize()  # a step ends when its work does, as a training loop's loss.item() would
        on_step()
    return time.perf_counter() - t0


def child(a: argparse.Namespace) -> None:
    """One measurement, in this process; prints ``{"loop_s": ...}``."""
    import traceprobe

    if a.child == "none":
        loop = _loop(a, (lambda: None) if a.no_steps else traceprobe.step)
    else:  # bare torch.profiler, as a user would write it
        import torch
        from torch.profiler import ProfilerActivity, profile, schedule

        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() and a.device != "cpu" else [])
        # torch.profiler imports torch._inductor.config when it first prepares a trace (seconds, once per
        # process); traceprobe starts its profiler before the script runs, so take that cost here too
        # before the loop: loop_s then compares steady-state profiling, process_s the totals.
        if hasattr(torch, "_inductor"):
            import torch._inductor.config  # noqa: F401
        out = Path(a.out)

        def save(p):
            p.export_chrome_trace(str(out / f"torch.step{p.step_num}.pt.trace.json.gz"))

        if a.no_steps:
            with profile(activities=acts) as prof:
                loop = _loop(a, lambda: None)
            prof.export_chrome_trace(str(out / "torch.run.pt.trace.json.gz"))
        else:
            sched = schedule(wait=a.wait, warmup=a.warmup, active=a.active, repeat=a.repeat)
            with profile(activities=acts, schedule=sched, on_trace_ready=save) as prof:
                loop = _loop(a, prof.step)
    print(json.dumps({"loop_s": loop}), flush=True)


def _measure(mode: str, a: argparse.Namespace, tmp: Path, i: int) -> dict[str, float]:
    loop_args = ["--steps", str(a.steps), "--width", str(a.width), "--batch", str(a.batch), "--device", a.device]
    sched = ["--wait", str(a.wait), "--warmup", str(a.warmup), "--active", str(a.active), "--repeat", str(a.repeat)]
    whole = mode.endswith("-whole")
    out = tmp / f"{mode}-{i}"
    if mode.startswith("traceprobe"):
        cmd = [sys.executable, "-m", "traceprobe", "record", "--out", str(out), "--device", a.device, "--script", __file__, *sched,
               "--", "--child", "none", *loop_args, *(["--no-steps"] if whole else [])]
    else:
        out.mkdir()
        cmd = [sys.executable, __file__, "--child", "none" if mode == "none" else "torch", "--out", str(out), *loop_args, *sched,
               *(["--no-steps"] if whole else [])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"{mode} failed ({res.returncode}):\n{res.stderr[-3000:]}")
    line = [ln for ln in res.stdout.splitlines() if ln.startswith('{"loop_s"')][-1]
    traces = sorted(p for p in out.iterdir() if p.name.endswith(".json.gz")) if out.exists() else []
    return {"loop_s": json.loads(line)["loop_s"], "process_s": wall, "traces": len(traces), "trace_bytes": sum(p.stat().st_size for p in traces)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--wait", type=int, default=1)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--active", type=int, default=3)
    p.add_argument("--repeat", type=int, default=0, help="windows (0: every cycle until the loop ends)")
    p.add_argument("--modes", default="none,torch,traceprobe,torch-whole,traceprobe-whole")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--child", choices=["none", "torch"], help=argparse.SUPPRESS)
    p.add_argument("--no-steps", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        child(a)
        return
    modes = a.modes.split(",")
    results: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory(prefix="traceprobe-overhead-") as tmp:
        for i in range(a.runs):
            for m in modes:
                results[m].append(_measure(m, a, Path(tmp), i))
    med = {m: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for m, rs in results.items()}

    def ratio(x: str, y: str, k: str) -> float | None:
        return med[x][k] / med[y][k] if x in med and y in med and med[y][k] else None

    ratios = {
        f"{x}/{y} {k}": ratio(x, y, k)
        for x, y in (("traceprobe", "torch"), ("traceprobe-whole", "torch-whole"), ("torch", "none"), ("torch-whole", "none"))
        for k in ("loop_s", "process_s")
    }
    if a.json:
        print(json.dumps({"args": vars(a), "median": med, "runs": results, "ratios": ratios}, indent=2))
        return
    print(f"{a.steps} steps, MLP width {a.width}, batch {a.batch}, device {a.device}; schedule wait={a.wait} warmup={a.warmup} "
          f"active={a.active} repeat={a.repeat}; median of {a.runs} runs")
    print(f"{'mode':18} {'loop s':>9} {'process s':>10} {'traces':>7} {'trace MB':>9}")
    for m in modes:
        r = med[m]
        print(f"{m:18} {r['loop_s']:9.3f} {r['process_s']:10.3f} {r['traces']:7.0f} {r['trace_bytes'] / 1e6:9.2f}")
    for k, v in ratios.items():
        if v is not None:
            print(f"{k:32} {v:6.3f}")


if __name__ == "__main__":
    main()
