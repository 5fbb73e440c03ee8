#!/usr/bin/env python3
"""The overhead of ``traceprobe.on_trace_ready`` on a real training loop, and its summaries against its traces.

Runs ``scripts/handler_run.py`` under torchrun (``--nproc`` ranks, DDP and/or FSDP2), the modes interleaved,
``--runs`` times each, then prints per parallelism and mode the median step time and the overhead against the
profiler alone (``profiler``: torch.profiler with the same schedule and no handler; target for ``traceprobe`` and
``summary``: under 2%), and ``tensorboard_trace_handler``'s for comparison. Then, for the last ``traceprobe`` run
of each parallelism, ``overlap-report --format json`` on its summaries alone and on its traces alone: every
figure of every rank and window, the collectives, stragglers and causes must be the same (paths aside).

Usage (2 GPUs)::

    python scripts/handler_overhead.py --nproc 2 --parallel ddp fsdp --runs 3 --steps 60 --out runs/handler

On a machine without CUDA the runs use gloo and a tiny model (a try-out of the script, not a measurement).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODES = ["none", "profiler", "tensorboard", "traceprobe", "summary", "fork"]


def _run(mode: str, parallel: str, out: Path, a: argparse.Namespace) -> dict:
    if out.exists():
        shutil.rmtree(out)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={a.nproc}", str(HERE / "handler_run.py"),
           "--mode", mode, "--parallel", parallel, "--out", str(out), "--steps", str(a.steps),
           "--wait", str(a.schedule[0]), "--warmup", str(a.schedule[1]), "--active", str(a.schedule[2])]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise SystemExit(f"{mode}/{parallel} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")


def _report(paths: list[str]) -> dict:
    done = subprocess.run([sys.executable, "-m", "traceprobe", "overlap-report", *paths, "--format", "json"], capture_output=True, text=True, check=False)
    if done.returncode not in (0, 1):
        raise SystemExit(f"overlap-report failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def _strip(doc: dict) -> dict:
    """The report without what names files (paths, run labels) and without the reading time."""
    def clean(v):
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items() if k not in ("path", "run", "traceprobe", "elapsed_s")}
        if isinstance(v, list):
            return [clean(x) for x in v]
        return v
    return clean({k: doc[k] for k in ("traces", "rank_summary", "collectives") if k in doc})


def _diffs(a, b, where: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in _diffs(a.get(k), b.get(k), f"{where}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _diffs(x, y, f"{where}[{i}]")]
    return [] if a == b else [f"{where}: {str(a)[:80]} != {str(b)[:80]}"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--parallel", nargs="+", default=["ddp", "fsdp"], choices=["ddp", "fsdp"])
    ap.add_argument("--modes", nargs="+", default=MODES, choices=MODES)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--out", default="runs/handler")
    ap.add_argument("--schedule", type=int, nargs=3, default=[5, 1, 3], metavar=("WAIT", "WARMUP", "ACTIVE"),
                    help="the profiler's schedule (repeating): a window of ACTIVE steps every WAIT+WARMUP+ACTIVE")
    a = ap.parse_args()
    base = Path(a.out)
    results: dict[tuple[str, str], list[dict]] = {}
    for parallel in a.parallel:
        for k in range(a.runs):
            for mode in a.modes:  # interleaved: drifts of the machine hit every mode alike
                r = _run(mode, parallel, base / f"{parallel}-{mode}", a)
                results.setdefault((parallel, mode), []).append(r)
                print(json.dumps({**r, "run": k}), flush=True)
    print(f"\n{'parallel':8} {'mode':12} {'step ms (median)':>17} {'vs profiler':>12} {'vs none':>9} {'handler call ms':>16} {'wait s':>7} {'fork pause ms':>14}  device")
    for parallel in a.parallel:
        med = {m: statistics.median(r["step_ms"] for r in results[(parallel, m)]) for m in a.modes}
        for m in a.modes:
            rs = results[(parallel, m)]
            vs = f"{100 * (med[m] / med['profiler'] - 1):+.2f}%" if "profiler" in med else "-"
            vn = f"{100 * (med[m] / med['none'] - 1):+.2f}%" if "none" in med else "-"
            print(f"{parallel:8} {m:12} {med[m]:17.2f} {vs:>12} {vn:>9} {max(r['handler_call_ms'] for r in rs):16.3f} "
                  f"{max(r['wait_s'] for r in rs):7.2f} {max(r.get('fork_pause_ms', 0.0) for r in rs):14.1f}  {rs[0]['device']}")
    for parallel in a.parallel:
        folder = base / f"{parallel}-traceprobe"
        if not folder.exists():
            continue
        summaries = sorted(str(p) for p in folder.glob("*.summary.json"))
        traces = sorted(str(p) for p in folder.glob("*.pt.trace.json.gz"))
        da, db = _strip(_report(traces)), _strip(_report(summaries))
        diffs = _diffs(da, db)
        st = [c.get("straggler_rank") for c in db.get("collectives", [])]
        print(f"\n{parallel}: {len(traces)} traces, {len(summaries)} summaries ({sum(Path(s).stat().st_size for s in summaries) / 1e3:.0f} KB, "
              f"traces {sum(Path(t).stat().st_size for t in traces) / 1e6:.1f} MB); overlap-report from summaries vs traces: "
              + ("the same figures, stragglers and causes" if not diffs else f"{len(diffs)} differences:\n  " + "\n  ".join(diffs[:20])))
        print(f"  stragglers per window (summaries): {st}")


if __name__ == "__main__":
    main()
