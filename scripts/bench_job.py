#!/usr/bin/env python3
"""The whole-job report from summaries at scale: time and peak memory against the targets.

Writes (once, kept in ``--workdir``) a SYNTHETIC job of ``--ranks`` rank summaries (``scripts/synth_job.py
--summaries``: 4 analysed template ranks, each rank with its own collective times, the last two :data:`SKEW_US` late
at every collective, enough for the causes to name one of them; with ``--from-traces``, every rank its own trace
analysed into its summary, so that the replay meets the job's collectives across ranks), then runs
``traceprobe job FOLDER`` in a fresh process ``--repeat`` times and prints its wall time, CPU time (user + system,
``getrusage`` of the child: the machine may be shared) and peak memory (the process's maximum resident set) against
the targets: 4,096 and 8,192 ranks each in under a minute and under 2 GB on a 2-CPU machine, replayed; and whether its window was replayed
(what-ifs and critical path: ``replayed``), or not (the report's line saying why: ``not replayed``).
``scripts/bench.py --ranks N --summaries`` runs this.

Usage::

    python scripts/bench_job.py --ranks 1024 4096 [--from-traces] [--workdir /tmp/traceprobe-job] [--repeat 1] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGET_S = 60.0
TARGET_BYTES = 2 * 10**9
TARGET_RANKS = (4096, 8192)
"""The job sizes the targets are for: each in under :data:`TARGET_S`, under :data:`TARGET_BYTES`, replayed."""
SKEW_US = 6000
"""Mean late arrival of the two late ranks (µs): at 0.5 ms their waits stay below the causes' noise floor."""


def _ensure(ranks: int, workdir: Path, events: int) -> Path:
    folder = workdir / f"job-{ranks}-summaries-{events}-skew{SKEW_US}"
    if folder.exists() and len(list(folder.glob("*.summary.json"))) == ranks:
        return folder
    subprocess.run([sys.executable, str(HERE / "synth_job.py"), "--ranks", str(ranks), "--summaries", "-o", str(folder),
                    "--events", str(events), "--skewed", "2", "--skew-us", str(SKEW_US)], check=True)
    return folder


def _summarize(args: tuple[str, str]) -> None:
    """One rank trace analysed into its summary (``rank<R>.summary.json``), as the recording handler writes it."""
    from traceprobe.analysis.job.summaries import to_summary
    from traceprobe.analysis.per_trace import overlap_report
    from traceprobe.reading import load_trace
    from traceprobe.summary_file import encode

    trace, out = args
    Path(out).write_bytes(encode(to_summary(overlap_report(load_trace(trace)), "synthetic-job", source="")))


def _ensure_traced(ranks: int, workdir: Path, events: int) -> Path:
    """The summaries of a SYNTHETIC job of ``ranks`` rank traces (``synth_job.py``, without ``--summaries``: every
    rank its own trace, its collectives at its own arrival times), each trace analysed into its summary and deleted:
    every rank's graph then holds its own collective kernels, so the replay matches them across ranks and waits at
    them, where the template summaries' graphs keep their template's times (their collectives barely match)."""
    import shutil
    import tempfile
    from concurrent.futures import ProcessPoolExecutor

    folder = workdir / f"job-{ranks}-traced-{events}-skew{SKEW_US}"
    if folder.exists() and len(list(folder.glob("*.summary.json"))) == ranks:
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    traces = Path(tempfile.mkdtemp(prefix="traces-", dir=workdir))
    try:
        subprocess.run([sys.executable, str(HERE / "synth_job.py"), "--ranks", str(ranks), "-o", str(traces), "--events", str(events),
                        "--skewed", "2", "--skew-us", str(SKEW_US)], check=True)
        work = [(str(t), str(folder / (t.name.split(".")[0] + ".summary.json"))) for t in sorted(traces.glob("rank*.pt.trace.json*"))]
        with ProcessPoolExecutor(os.cpu_count()) as pool:
            list(pool.map(_summarize, work, chunksize=8))
    finally:
        shutil.rmtree(traces, ignore_errors=True)
    return folder


def measure(folder: Path) -> dict:
    """One ``traceprobe job FOLDER`` in a fresh process: wall and CPU time (s), peak RSS (bytes), exit code, whether its
    window was replayed (``replayed``: no line of the report says ``not replayed``; ``replay_note``: that line), its
    stderr's notes, its straggler line and its top what-if's line (``what_if``: where no cause clears the window's noise
    floor, the replay ran but gave no finding: a job whose window grows with its ranks hides every cause under it)."""
    import tempfile

    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t = time.perf_counter()
        child = subprocess.Popen([sys.executable, "-m", "traceprobe", "job", str(folder)], stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(child.pid, 0)  # (this child's own peak and CPU time, not the largest child's so far)
        wall = time.perf_counter() - t
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        done = subprocess.CompletedProcess(child.args, child.returncode, out.read(), err.read())
    cpu = usage.ru_utime + usage.ru_stime
    peak = usage.ru_maxrss * 1024  # (Linux: KB)
    note = next((ln.strip()[:200] for ln in done.stdout.splitlines() if "not replayed" in ln), "")
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "peak_rss_bytes": int(peak), "exit": done.returncode,
            "replayed": done.returncode == 0 and not note, "replay_note": note, "notes": done.stderr.strip().splitlines()[:3],
            "head": done.stdout.splitlines()[:1],
            "straggler": next((ln.strip()[:160] for ln in done.stdout.splitlines() if ln.strip().startswith("straggler:")), "no straggler named"),
            "what_if": next((ln.strip()[:160] for ln in done.stdout.splitlines() if "if removed" in ln),
                            "no what-if above the window's noise floor (its replay gave no finding)")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[1024, 4096])
    ap.add_argument("--workdir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "traceprobe-job"))
    ap.add_argument("--events", type=int, default=20_000, help="events per template rank trace (sets the summaries' size)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--json", dest="json_out")
    ap.add_argument("--from-traces", action="store_true", help="summaries of rank traces, each analysed (_ensure_traced; minutes at "
                    "thousands of ranks), not copies of 4 template ranks")
    a = ap.parse_args(argv)
    workdir = Path(a.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    rows = []
    for n in a.ranks:
        folder = _ensure_traced(n, workdir, a.events) if a.from_traces else _ensure(n, workdir, a.events)
        size = sum(p.stat().st_size for p in folder.glob("*.summary.json"))
        runs = [measure(folder) for _ in range(a.repeat)]
        best = min(runs, key=lambda r: r["wall_s"])
        row = {"ranks": n, "summaries_mb": round(size / 1e6, 1), **best}
        rows.append(row)
        ok = ""
        if n in TARGET_RANKS:
            ok = (f"  [target {TARGET_S:.0f} s: {'met' if best['wall_s'] < TARGET_S else 'NOT met'}; "
                  f"{TARGET_BYTES / 1e9:.0f} GB: {'met' if best['peak_rss_bytes'] < TARGET_BYTES else 'NOT met'}; "
                  f"replayed: {'met' if best['replayed'] else 'NOT met'}]")
        print(f"{n:>6} ranks from summaries ({row['summaries_mb']:,.1f} MB): {best['wall_s']:6.1f} s ({best['cpu_s']:.1f} s CPU), peak "
              f"{best['peak_rss_bytes'] / 1e9:.2f} GB, {'replayed' if best['replayed'] else 'NOT replayed'}, exit {best['exit']}{ok}", flush=True)
        for note in [*best["notes"], best["straggler"], best["what_if"], *([best["replay_note"]] if best["replay_note"] else [])]:
            print(f"        {note}")
    machine = {"cpus": os.cpu_count(), "python": platform.python_version(), "machine": platform.machine()}
    print(f"machine: {machine['cpus']} CPUs, Python {machine['python']}")
    if a.json_out:
        Path(a.json_out).write_text(json.dumps({"machine": machine, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
