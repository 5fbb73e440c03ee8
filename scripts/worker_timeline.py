"""Where the time of a many-file ``overlap-report`` goes: per worker, per file, and in the command.

Runs ``traceprobe overlap-report PATH... --format json`` in this process, with
``--jobs`` local workers as the command would, and times from inside:

- each file in the worker that analysed it (``collect.analyze_file``: read,
  decode, DataFrames, analysis, the worker-side JSON part);
- the cross-rank summary in the command (``analysis.summary.summarize``);
- the CPU time of each worker and of the command, read at their exit
  (``getrusage``).

Every process appends its lines to one file opened with ``O_APPEND`` (each line
one ``write``, so none is lost between processes), and the summary is printed at
the end: when the first file started, how busy each worker was, how long a file
took (mean, min, max), the summary, and CPU time per process. This is how the
docs/performance.md's scaling notes were measured::

    python scripts/synth_trace.py --ranks 64 -n 100000 -o /tmp/job -q
    python scripts/worker_timeline.py /tmp/job --jobs 16

Times are seconds from this script's start (after the interpreter's own start).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

T0 = time.time()


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("paths", nargs="+", help="trace files or folders")
    ap.add_argument("--jobs", type=int, default=0, help="worker processes (0: traceprobe's default)")
    ap.add_argument("--log", help="keep the raw lines here (default: a temporary file, removed)")
    a = ap.parse_args()
    log_path = Path(a.log) if a.log else Path(tempfile.mkstemp(prefix="traceprobe-timeline-", suffix=".txt")[1])
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_TRUNC, 0o644)
    parent = os.getpid()

    def log(*fields: Any) -> None:
        os.write(fd, (" ".join(map(str, (f"{time.time() - T0:.4f}", os.getpid(), *fields))) + "\n").encode())

    real_exit = os._exit
    reported = False

    def exiting(code: int) -> None:  # workers end with os._exit (multiprocessing); the command with SystemExit, below
        nonlocal reported
        ru = resource.getrusage(resource.RUSAGE_SELF)
        if os.getpid() != parent:
            log("exit", f"{ru.ru_utime + ru.ru_stime:.3f}", "worker")
        elif not reported:
            reported = True
            log("exit", f"{ru.ru_utime + ru.ru_stime:.3f}", "parent")
            report(log_path, time.time() - T0)
            if not a.log:
                log_path.unlink(missing_ok=True)
        real_exit(code)

    os._exit = exiting  # type: ignore[assignment]
    import traceprobe.analysis.summary as summary
    import traceprobe.collect as collect

    analyze_file, summarize = collect.analyze_file, summary.summarize

    def timed_file(path: Any, *args: Any, **kwargs: Any) -> Any:
        t = time.time()
        out = analyze_file(path, *args, **kwargs)
        log("file", f"{t - T0:.4f}", f"{time.time() - t:.4f}", os.path.basename(str(path)))
        return out

    def timed_summary(*args: Any, **kwargs: Any) -> Any:
        t = time.time()
        out = summarize(*args, **kwargs)
        log("summary", f"{t - T0:.4f}", f"{time.time() - t:.4f}")
        return out

    collect.analyze_file, summary.summarize = timed_file, timed_summary  # looked up when analyze_paths runs
    log("imported")
    from traceprobe.cli import main as entry

    sys.argv = ["traceprobe", "overlap-report", *a.paths, "--format", "json", "--output", os.devnull]
    if a.jobs:
        sys.argv += ["--jobs", str(a.jobs)]
    try:
        entry()
    except SystemExit as e:
        exiting(e.code if isinstance(e.code, int) else 1)
    exiting(0)


def report(log_path: Path, wall: float) -> None:
    files: dict[str, list[tuple[float, float]]] = defaultdict(list)
    cpu: dict[str, float] = {}
    summary_s = imported = 0.0
    for line in log_path.read_text().splitlines():
        t, pid, what, *rest = line.split()
        if what == "file":
            files[pid].append((float(rest[0]), float(rest[1])))
        elif what == "exit":
            cpu[rest[1] if rest[1] == "parent" else pid] = float(rest[0])
        elif what == "summary":
            summary_s = float(rest[1])
        elif what == "imported":
            imported = float(t)
    durations = [d for v in files.values() for _, d in v]
    if not durations:
        print("no file was analysed")
        return
    firsts = [min(s for s, _ in v) for v in files.values()]
    lasts = [max(s + d for s, d in v) for v in files.values()]
    busy = [sum(d for _, d in v) for v in files.values()]
    workers = [c for k, c in cpu.items() if k != "parent"]
    print(f"{len(durations)} files on {len(files)} process(es); wall {wall:.3f} s from this script's start")
    print(f"  traceprobe imported at {imported:.3f} s; first file started {min(firsts):.3f}-{max(firsts):.3f} s; "
          f"last file ended {min(lasts):.3f}-{max(lasts):.3f} s")
    print(f"  per file: mean {statistics.fmean(durations):.3f} s, min {min(durations):.3f}, max {max(durations):.3f}")
    print(f"  busy per worker: mean {statistics.fmean(busy):.3f} s, min {min(busy):.3f}, max {max(busy):.3f}")
    print(f"  cross-rank summary: {summary_s:.3f} s")
    print(f"  CPU: command {cpu.get('parent', 0.0):.3f} s, workers {sum(workers):.3f} s in all ({len(workers)} exited)")


if __name__ == "__main__":
    main()
