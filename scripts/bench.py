#!/usr/bin/env python3
"""Benchmark traceprobe's load + overlap report against the parse floor and HolisticTraceAnalysis.

For each trace (SYNTHETIC traces of 10^4, 10^5, 10^6 events written by
``scripts/synth_trace.py``, 10^7 with ``--large``, and the real traces in
``sample_traces/``), in one run on one machine, each in its own subprocess:

- **traceprobe**, end to end as a user runs it:
  ``python -m traceprobe overlap-report FILE --format json --output /dev/null --jobs 1``
  (interpreter start, imports, load, every figure, JSON output);
- **floor**: the same file read (and gunzipped) and decoded by msgspec into typed
  structs holding only the fields traceprobe needs, nothing else; timed end to end
  (interpreter start included) and without imports;
- **HTA** (HolisticTraceAnalysis, optional: ``pip install holistictraceanalysis``):
  ``TraceAnalysis(trace_dir=...)`` on a folder holding only this file (its load),
  then ``get_comm_comp_overlap()``. Skipped when not installed, above
  ``--hta-max-events``, or when it cannot load the file (the error is reported).

Wall time is the best of ``--repeat`` runs (the machine may be shared; CPU time,
user + system, is reported too). Peak memory is the child's maximum RSS from
``wait4``. Also reported: decompressed JSON size, peak RSS / JSON size, the
ratios traceprobe / floor and HTA load / traceprobe, and, fitted on the
synthetic sizes, time and memory per million events and their log-log slope
(1.0 = linear).

Usage::

    python scripts/bench.py                      # 1e4, 1e5, 1e6 + sample_traces
    python scripts/bench.py --large --json-out bench.json   # adds 1e7 (about 2.4 GB of JSON, ~10 GB RAM)
    python scripts/bench.py --sizes 1e5 --no-hta --no-real
    python scripts/bench.py --traces my.pt.trace.json.gz     # your own traces too
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SYNTH = Path(__file__).resolve().parent / "synth_trace.py"
MARK = "BENCH_RESULT "

# --- child modes (run in subprocesses) -------------------------------------------------------

_FLOOR_CODE = r'''
import time
t0 = time.perf_counter()
import gzip, json, sys
from typing import Union
import msgspec

class Args(msgspec.Struct, gc=False):
    device: Union[int, None] = None
    stream: Union[int, None] = None
    correlation: Union[int, None] = None
    bytes: Union[int, None] = None
    external_id: Union[int, None] = msgspec.field(default=None, name="External id")

class Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: Union[str, None] = None
    name: Union[str, None] = None
    pid: Union[int, str, None] = None
    tid: Union[int, str, None] = None
    ts: Union[float, None] = None
    dur: Union[float, None] = None
    args: Union[Args, None] = None

class Doc(msgspec.Struct):
    traceEvents: list[Event]

t1 = time.perf_counter()
raw = open(sys.argv[1], "rb").read()
if raw[:2] == b"\x1f\x8b":
    raw = gzip.decompress(raw)
size = len(raw)
typed = True
try:
    doc = msgspec.json.Decoder(Doc).decode(raw)
except msgspec.ValidationError:  # a field of an unexpected type: decode it untyped (as traceprobe does)
    from typing import Any
    class Args(msgspec.Struct, gc=False):
        device: Any = None
        stream: Any = None
        correlation: Any = None
        bytes: Any = None
        external_id: Any = msgspec.field(default=None, name="External id")
    class Event(msgspec.Struct, gc=False):
        ph: Any = ""
        cat: Any = None
        name: Any = None
        pid: Any = None
        tid: Any = None
        ts: Any = None
        dur: Any = None
        args: Union[Args, None] = None
    class Doc(msgspec.Struct):
        traceEvents: list[Event]
    typed = False
    doc = msgspec.json.Decoder(Doc).decode(raw)
t2 = time.perf_counter()
print("BENCH_RESULT " + json.dumps({"import_s": t1 - t0, "parse_s": t2 - t1, "events": len(doc.traceEvents), "json_bytes": size,
                                  "typed": typed}))
'''

_HTA_CODE = r'''
import time
t0 = time.perf_counter()
import json, logging, sys, warnings
warnings.filterwarnings("ignore")
from hta.trace_analysis import TraceAnalysis
t1 = time.perf_counter()
analyzer = TraceAnalysis(trace_dir=sys.argv[1])
t2 = time.perf_counter()
overlap = analyzer.get_comm_comp_overlap(visualize=False)
t3 = time.perf_counter()
print("BENCH_RESULT " + json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "overlap_s": t3 - t2,
                                  "overlap": overlap.to_dict(orient="records")}, default=str))
'''


def _run(cmd: list[str], timeout: float | None = None, cwd: Path | None = None) -> dict[str, Any]:
    """Run ``cmd``; wall time, CPU time and peak RSS of that child alone (wait4), its output."""
    out = tempfile.TemporaryFile()
    err = tempfile.TemporaryFile()
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=cwd)
    deadline = None if timeout is None else t + timeout
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        if deadline is not None and time.perf_counter() > deadline:
            p.kill()
            pid, status, ru = os.wait4(p.pid, 0)
            status = None
            break
        time.sleep(0.002)
    wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status) if status is not None else -9
    out.seek(0)
    err.seek(0)
    stdout = out.read().decode(errors="replace")
    stderr = err.read().decode(errors="replace")
    result = None
    for line in stdout.splitlines():
        if line.startswith(MARK):
            result = json.loads(line[len(MARK):])
    return {
        "wall_s": wall,
        "cpu_s": ru.ru_utime + ru.ru_stime,
        "peak_rss_mb": ru.ru_maxrss / 1024,  # Linux: KiB
        "rc": p.returncode,
        "timed_out": status is None,
        "result": result,
        "stderr_tail": stderr[-600:],
    }


def _best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    best = min(runs, key=lambda r: r["wall_s"])
    out = dict(best)
    out["wall_runs_s"] = [round(r["wall_s"], 4) for r in runs]
    out["cpu_s"] = min(r["cpu_s"] for r in runs)
    out["peak_rss_mb"] = max(r["peak_rss_mb"] for r in runs)
    return out


def bench_traceprobe(path: Path, repeat: int, timeout: float) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "traceprobe", "overlap-report", str(path), "--format", "json", "--output", os.devnull, "--jobs", "1"]
    runs = [_run(cmd, timeout, cwd=ROOT) for _ in range(repeat)]
    r = _best(runs)
    ok = r["rc"] in (0, 1) and not r["timed_out"]
    return {"ok": ok, "wall_s": r["wall_s"], "cpu_s": r["cpu_s"], "peak_rss_mb": r["peak_rss_mb"], "wall_runs_s": r["wall_runs_s"],
            **({} if ok else {"error": f"rc={r['rc']} {r['stderr_tail'].strip()[-300:]}"})}


def bench_floor(path: Path, repeat: int, timeout: float) -> dict[str, Any]:
    runs = [_run([sys.executable, "-c", _FLOOR_CODE, str(path)], timeout) for _ in range(repeat)]
    good = [r for r in runs if r["result"]]
    if not good:
        return {"ok": False, "error": runs[0]["stderr_tail"].strip()[-300:]}
    r = _best(good)
    res = r["result"]
    return {"ok": True, "wall_s": r["wall_s"], "cpu_s": r["cpu_s"], "peak_rss_mb": r["peak_rss_mb"], "wall_runs_s": r["wall_runs_s"],
            "parse_s": min(g["result"]["parse_s"] for g in good), "import_s": res["import_s"],
            "events": res["events"], "json_bytes": res["json_bytes"], "typed": res["typed"]}


def bench_hta(path: Path, timeout: float) -> dict[str, Any]:
    if importlib.util.find_spec("hta") is None:
        return {"ok": False, "skipped": "HolisticTraceAnalysis not installed (pip install holistictraceanalysis)"}
    with tempfile.TemporaryDirectory(prefix="bench-hta-") as d:
        # HTA reads every trace in a folder: give it a folder holding only this file
        link = Path(d) / path.name
        try:
            link.symlink_to(path.resolve())
        except OSError:
            shutil.copy(path, link)
        r = _run([sys.executable, "-c", _HTA_CODE, d], timeout)
    if r["timed_out"]:
        return {"ok": False, "error": f"timed out after {timeout:.0f} s", "wall_s": r["wall_s"], "peak_rss_mb": r["peak_rss_mb"]}
    if not r["result"]:
        lines = [ln for ln in r["stderr_tail"].strip().splitlines() if ln.strip()]
        return {"ok": False, "error": (lines[-1] if lines else f"rc={r['rc']}")[-300:], "peak_rss_mb": r["peak_rss_mb"]}
    res = r["result"]
    return {"ok": True, "wall_s": r["wall_s"], "cpu_s": r["cpu_s"], "peak_rss_mb": r["peak_rss_mb"], "import_s": res["import_s"],
            "load_s": res["load_s"], "overlap_s": res["overlap_s"], "overlap": res["overlap"]}


# --- driver ------------------------------------------------------------------------------------


def _size_label(n: int) -> str:
    e = round(math.log10(n)) if n > 0 else 0
    return f"1e{e}" if 10**e == n else f"{n:,}"


def _parse_size(s: str) -> int:
    t = s.strip().lower().replace("_", "")
    if "^" in t:
        b, e = t.split("^")
        return int(b) ** int(e)
    return int(float(t))


def synth(n: int, workdir: Path, seed: int, gz: bool, extra: list[str]) -> Path:
    path = workdir / f"synthetic-{_size_label(n)}-seed{seed}.pt.trace.json{'.gz' if gz else ''}"
    stamp = path.with_name(path.name + ".args")
    args = [str(SYNTH), "-q", "--events", str(n), "--seed", str(seed), "-o", str(path), *extra]
    if path.exists() and stamp.exists() and stamp.read_text() == json.dumps(args[1:]):
        return path  # same generator arguments: reuse
    t = time.perf_counter()
    subprocess.run([sys.executable, *args], check=True)
    stamp.write_text(json.dumps(args[1:]))
    print(f"  wrote {path.name} ({path.stat().st_size / 1e6:,.1f} MB) in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    return path


def _fit(xs: list[float], ys: list[float]) -> dict[str, float] | None:
    """Least squares y = a + b x, and the log-log slope between the smallest and largest x."""
    pts = [(x, y) for x, y in zip(xs, ys) if y is not None and x > 0 and y > 0]
    if len(pts) < 2:
        return None
    n = len(pts)
    mx = sum(p[0] for p in pts) / n
    my = sum(p[1] for p in pts) / n
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    b = sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx
    a = my - b * mx
    pts.sort()
    lo, hi = pts[0], pts[-1]
    loglog = math.log(hi[1] / lo[1]) / math.log(hi[0] / lo[0])
    a2, b2 = pts[-2], pts[-1]  # the two largest: least affected by fixed costs (start-up, imports)
    top = math.log(b2[1] / a2[1]) / math.log(b2[0] / a2[0])
    return {"intercept": a, "per_million_events": b * 1e6, "loglog_slope": loglog, "loglog_slope_top": top}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--sizes", default="1e4,1e5,1e6", help="synthetic trace sizes, comma-separated (events)")
    ap.add_argument("--large", action="store_true", help="add a synthetic trace of 10^7 events (~2.4 GB of JSON; ~10 GB RAM)")
    ap.add_argument("--traces", nargs="*", default=[], help="more trace files to benchmark")
    ap.add_argument("--real", default=str(ROOT / "sample_traces"), help="folder of real traces (*.pt.trace.json[.gz])")
    ap.add_argument("--no-real", action="store_true", help="skip the real traces")
    ap.add_argument("--no-hta", action="store_true", help="skip HolisticTraceAnalysis")
    ap.add_argument("--hta-max-events", type=_parse_size, default=2_000_000,
                    help="skip HTA above this many events (it needs several times traceprobe's time and memory)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of traceprobe and of the floor per trace (best wall time kept)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per child process")
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "traceprobe-bench"), help="where synthetic traces are written (and reused)")
    ap.add_argument("--gzip", action="store_true", help="write the synthetic traces gzipped (.json.gz)")
    ap.add_argument("--seed", type=int, default=0, help="synthetic trace seed")
    ap.add_argument("--synth-args", default="", help="extra arguments for synth_trace.py, e.g. '--devices 8 --nccl-share 0.3'")
    ap.add_argument("--keep", action="store_true", help="keep the synthetic traces (default: delete those of 10^7 events)")
    ap.add_argument("--json-out", help="write the results as JSON here")
    a = ap.parse_args(argv)

    sizes = sorted({_parse_size(s) for s in a.sizes.split(",") if s.strip()} | ({10**7} if a.large else set()))
    workdir = Path(a.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    traces: list[tuple[str, Path, bool]] = []
    print(f"synthetic traces in {workdir}", file=sys.stderr)
    for n in sizes:
        traces.append((f"synthetic {_size_label(n)}", synth(n, workdir, a.seed, a.gzip, a.synth_args.split()), True))
    if not a.no_real and Path(a.real).is_dir():
        for f in sorted(Path(a.real).glob("*.json*")):
            if f.name != "manifest.json":
                traces.append((f"real {f.name.split('.pt.trace')[0]}", f, False))
    for t in a.traces:
        traces.append((Path(t).name, Path(t), False))

    rows = []
    for label, path, synthetic in traces:
        print(f"{label}: floor...", file=sys.stderr, end="", flush=True)
        floor = bench_floor(path, a.repeat, a.timeout)
        print(" traceprobe...", file=sys.stderr, end="", flush=True)
        tp = bench_traceprobe(path, a.repeat, a.timeout)
        events = floor.get("events")
        if a.no_hta:
            hta = {"ok": False, "skipped": "--no-hta"}
        elif events is not None and events > a.hta_max_events:
            hta = {"ok": False, "skipped": f"over --hta-max-events ({a.hta_max_events:,})"}
        else:
            print(" HTA...", file=sys.stderr, end="", flush=True)
            hta = bench_hta(path, a.timeout)
        print(" done", file=sys.stderr)
        json_mb = floor["json_bytes"] / 1e6 if floor.get("ok") else None
        row: dict[str, Any] = {
            "trace": label, "path": str(path), "synthetic": synthetic, "events": events,
            "file_mb": path.stat().st_size / 1e6, "json_mb": json_mb,
            "traceprobe": tp, "floor": floor, "hta": hta,
        }
        if tp["ok"] and floor.get("ok"):
            row["tp_over_floor"] = tp["wall_s"] / floor["wall_s"]
            row["tp_over_floor_cpu"] = tp["cpu_s"] / floor["cpu_s"]
            row["tp_over_floor_parse_only"] = tp["wall_s"] / floor["parse_s"]
            row["tp_rss_over_json"] = tp["peak_rss_mb"] / (floor["json_bytes"] / 2**20)
            row["floor_rss_over_json"] = floor["peak_rss_mb"] / (floor["json_bytes"] / 2**20)
        if tp["ok"] and hta.get("ok"):
            row["hta_load_over_tp"] = hta["load_s"] / tp["wall_s"]
            row["hta_total_over_tp"] = hta["wall_s"] / tp["wall_s"]
        rows.append(row)

    syn = [r for r in rows if r["synthetic"] and r["traceprobe"]["ok"]]
    fits = {
        "traceprobe_wall_s": _fit([r["events"] for r in syn], [r["traceprobe"]["wall_s"] for r in syn]),
        "traceprobe_peak_rss_mb": _fit([r["events"] for r in syn], [r["traceprobe"]["peak_rss_mb"] for r in syn]),
        "traceprobe_cpu_s": _fit([r["events"] for r in syn], [r["traceprobe"]["cpu_s"] for r in syn]),
        "floor_cpu_s": _fit([r["events"] for r in syn], [r["floor"]["cpu_s"] for r in syn if r["floor"].get("ok")]),
        "floor_wall_s": _fit([r["events"] for r in syn], [r["floor"]["wall_s"] for r in syn if r["floor"].get("ok")]),
        "floor_peak_rss_mb": _fit([r["events"] for r in syn], [r["floor"]["peak_rss_mb"] for r in syn if r["floor"].get("ok")]),
        "json_mb": _fit([r["events"] for r in syn], [r["json_mb"] for r in syn]),
    }
    machine = {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(),
               "machine": platform.machine()}
    try:
        import psutil

        machine["memory_gb"] = round(psutil.virtual_memory().total / 2**30, 1)
    except Exception:
        pass
    report = {"machine": machine, "repeat": a.repeat, "rows": rows, "fits": fits}
    _print(report)
    if a.json_out:
        Path(a.json_out).write_text(json.dumps(report, indent=2, default=str))
        print(f"results written to {a.json_out}", file=sys.stderr)
    if not a.keep:
        for _label, path, synthetic in traces:
            if synthetic and path.stat().st_size > 1e9:
                path.unlink()
                path.with_name(path.name + ".args").unlink(missing_ok=True)
    return 0


def _f(v: Any, fmt: str = "{:.2f}", none: str = "-") -> str:
    return none if v is None else fmt.format(v)


def _print(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    con = Console(width=200)
    t = Table(title=f"traceprobe load + overlap report vs parse floor vs HTA "
                    f"({report['machine']['cpus']} CPUs, Python {report['machine']['python']}; best of {report['repeat']} wall)")
    for col in ("trace", "events", "JSON MB", "traceprobe s", "cpu s", "floor s", "cpu s ", "parse s", "tp/floor", "cpu ratio", "tp/parse",
                "HTA load s", "HTA total s", "HTA/tp", "tp MB", "floor MB", "HTA MB", "tp MB/JSON", "floor MB/JSON"):
        t.add_column(col, justify="left" if col == "trace" else "right")
    for r in report["rows"]:
        tp, fl, h = r["traceprobe"], r["floor"], r["hta"]
        t.add_row(
            r["trace"], _f(r["events"], "{:,}"), _f(r["json_mb"], "{:,.1f}"),
            _f(tp.get("wall_s"), "{:.3f}") if tp["ok"] else "[red]failed[/red]", _f(tp.get("cpu_s"), "{:.3f}"),
            _f(fl.get("wall_s"), "{:.3f}"), _f(fl.get("cpu_s"), "{:.3f}"), _f(fl.get("parse_s"), "{:.3f}"),
            _f(r.get("tp_over_floor"), "{:.2f}x"), _f(r.get("tp_over_floor_cpu"), "{:.2f}x"),
            _f(r.get("tp_over_floor_parse_only"), "{:.1f}x"),
            _f(h.get("load_s"), "{:.3f}") if h.get("ok") else ("skip" if h.get("skipped") else "[red]error[/red]"),
            _f(h.get("wall_s"), "{:.2f}") if h.get("ok") else "-",
            _f(r.get("hta_load_over_tp"), "{:.1f}x"),
            _f(tp.get("peak_rss_mb"), "{:,.0f}"), _f(fl.get("peak_rss_mb"), "{:,.0f}"),
            _f(h.get("peak_rss_mb"), "{:,.0f}") if h.get("ok") else "-",
            _f(r.get("tp_rss_over_json"), "{:.2f}"), _f(r.get("floor_rss_over_json"), "{:.2f}"),
        )
    con.print(t)
    for r in report["rows"]:
        h = r["hta"]
        if not h.get("ok") and not h.get("skipped"):
            con.print(f"HTA on {r['trace']}: {h.get('error')}", highlight=False)
        if not r["traceprobe"]["ok"]:
            con.print(f"traceprobe on {r['trace']}: {r['traceprobe'].get('error')}", highlight=False)
    f = report["fits"]
    lines = []
    for key, unit in (("traceprobe_wall_s", "s"), ("traceprobe_cpu_s", "s"), ("floor_wall_s", "s"), ("floor_cpu_s", "s"), ("traceprobe_peak_rss_mb", "MB"),
                      ("floor_peak_rss_mb", "MB"), ("json_mb", "MB")):
        v = f.get(key)
        if v:
            lines.append(f"{key}: {v['per_million_events']:.3f} {unit} per million events + {v['intercept']:.3f} {unit}; "
                         f"log-log slope {v['loglog_slope']:.2f} (smallest to largest), {v['loglog_slope_top']:.2f} (two largest)")
    if lines:
        con.print("fit on the synthetic sizes (least squares; log-log slope 1.00 = linear, below 1 where fixed costs weigh):", highlight=False)
        for ln in lines:
            con.print("  " + ln, highlight=False)


if __name__ == "__main__":
    sys.exit(main())
