#!/usr/bin/env python3
"""traceprobe's performance targets, each a ratio measured in one run on one machine, and many-rank throughput.

Every figure is of whole processes, as a user runs them (interpreter start,
imports, output; ``scripts/bench_run.py`` says how each is measured):

- **real**: the 216,092-event trace of HolisticTraceAnalysis's tests
  (``tests/data/df_index_resolver/df_index_resolver.json.gz``, a real recording),
  ``traceprobe overlap-report FILE --format json`` (as a user runs it: one worker process reads the file while the
  command pays the replay's one-time cost beside it, ``collect.execution.work_beside``; ``--jobs 1``, all in one
  process, is timed beside it and printed, no target) against the parse floor with the pandas import (the
  floor's process importing pandas first: target at most 2.0x; the bare floor is printed beside it), against HTA
  0.5's ``TraceAnalysis`` + ``get_comm_comp_overlap`` (target: HTA at least 5x slower) and against TraceLens's
  ``TreePerfAnalyzer`` GPU timeline (target: at least 3x slower), the peers run whole, alternating with the rest,
  under ``--peer-python``; a peer not installed there is reported "not installed";
- **synthetic 10^6** (gzipped, ``scripts/synth_trace.py``): traceprobe at most 1.5x the floor with the pandas
  import (2x at 10^7 with ``--large``, about 2.4 GB of JSON, one run each); the replay's share of the analysis (the
  sweep's seconds over those of everything after reading, in one process: ``bench_run.STAGES_CODE``) under 25%;
  peak RSS at most 1.2x the decompressed JSON, with and without one event of an unknown ``ph`` near its start;
- **batch**: a folder of 100 small SYNTHETIC rank traces (``--batch-events`` each, one window of 100 ranks),
  ``overlap-report DIR`` with its default workers: at most 50 ms of CPU per file (the process and its workers), and
  less CPU than HTA (``TraceAnalysis`` of the folder + ``get_comm_comp_overlap``) and TraceLens (each file's GPU
  timeline in one process) on the same folder;
- **ranks** (``--ranks N``): a SYNTHETIC job of N rank traces
  (``synth_trace.py --ranks``), analysed with ``--jobs W`` local processes and on
  a Dask ``LocalCluster`` of W single-threaded worker processes (``--scheduler``;
  the cluster is started, and its workers import traceprobe, before the clock
  starts, as on a long-running cluster), for each W of ``--workers``: rank traces
  per second and events per second;
- **summaries** (``--ranks N --summaries``, alone): the whole-job report of N SYNTHETIC rank summaries,
  time and peak memory against 4,096 ranks in under a minute and 2 GB (``scripts/bench_job.py``).

Times are medians of ``--repeat`` runs, the commands alternating so that a busy
moment of a shared machine weighs on each alike. The traceprobe package of each
checkout measured is byte-compiled first, as an installed package is
(``bench_run.compile_package``).

Usage::

    python scripts/bench.py                                  # the targets
    python scripts/bench.py --peer-python VENV/bin/python    # HTA and TraceLens installed in VENV
    python scripts/bench.py --large --json-out bench.json    # adds 10^7 events (~10 GB of RAM)
    python scripts/bench.py --only ranks --ranks 64 --workers 1,2,4,8,16
    python scripts/bench.py --ranks 4096 --summaries                 # the whole-job report from summaries
    git worktree add ../tp-before COMMIT && python scripts/bench.py --baseline ../tp-before   # before -> after
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_run as br  # noqa: E402

HTA_TRACE_URL = ("https://raw.githubusercontent.com/facebookresearch/HolisticTraceAnalysis/main/"
                 "tests/data/df_index_resolver/df_index_resolver.json.gz")
PARTS = ("real", "synthetic", "batch", "ranks")


def _target(name: str, value: float | None, op: str, limit: float, unit: str = "x", note: str = "") -> dict[str, Any]:
    met = None if value is None else (value <= limit if op == "<=" else value >= limit)
    return {"target": name, "value": value, "op": op, "limit": limit, "unit": unit, "met": met, "note": note}


def _hta_trace(a: argparse.Namespace, workdir: Path) -> Path | None:
    if a.hta_trace:
        return Path(a.hta_trace).resolve()  # (a --baseline checkout runs in its own folder)
    path = workdir / "df_index_resolver.json.gz"
    if not path.exists():
        try:
            with urllib.request.urlopen(HTA_TRACE_URL, timeout=60) as r:
                path.write_bytes(r.read())
        except OSError as e:
            print(f"  cannot download {HTA_TRACE_URL}: {e}", file=sys.stderr)
            return None
    return path


def _with_baseline(a: argparse.Namespace, cmds: dict[str, br.Command]) -> dict[str, br.Command]:
    """``cmds`` plus, with ``--baseline DIR``, the traceprobe command run from that checkout (alternating with the rest)."""
    if a.baseline and "traceprobe" in cmds:
        cmd = cmds["traceprobe"]
        cmds = {**cmds, "baseline": (cmd if isinstance(cmd, list) else cmd[0], Path(a.baseline).resolve())}
    return cmds


def _stages(a: argparse.Namespace, path: Path, repeat: int | None = None) -> dict[str, dict[str, float]]:
    """Median seconds of each stage of one process (``bench_run.STAGES_CODE``), this checkout and ``--baseline``."""
    where = {"this checkout": br.ROOT, **({"baseline": Path(a.baseline).resolve()} if a.baseline else {})}
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in where}
    for _ in range(repeat or a.repeat):
        for k, cwd in where.items():
            r = br.measure([sys.executable, "-c", br.STAGES_CODE, str(path)], a.timeout, cwd=cwd)
            if r["result"]:
                runs[k].append(r["result"])
    return {k: {s: round(statistics.median(x[s] for x in v), 4) for s in v[0] if s.endswith("_s")} for k, v in runs.items() if v}


def bench_real(a: argparse.Namespace, workdir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    path = _hta_trace(a, workdir)
    goals = (("hta", "HTA", 5.0), ("tracelens", "TraceLens", 3.0))
    if path is None or not path.exists():
        note = "HTA's df_index_resolver trace not available: pass --hta-trace"
        return {"skipped": note}, [_target("real 216k: traceprobe / (floor + pandas)", None, "<=", 2.0, note=note),
                                   *(_target(f"real 216k: {name} / traceprobe", None, ">=", goal, note=note) for _, name, goal in goals)]
    cmds: dict[str, br.Command] = {"floor": br.floor_cmd(str(path)), "floor + pandas": br.floor_cmd(str(path), pandas=True),
                                   "traceprobe": br.traceprobe_cmd([str(path)]), "traceprobe --jobs 1": br.traceprobe_cmd([str(path)], "--jobs", "1")}
    peers: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as d:
        for peer, _, _ in goals:
            if a.no_peers:
                peers[peer] = {"ok": False, "skipped": "--no-peers"}
            elif not br.peer_installed(peer, a.peer_python):
                peers[peer] = {"ok": False, "skipped": f"not installed in {a.peer_python}: {br.PEERS[peer][1]}"}
            else:
                cmds[peer] = br.peer_cmd(peer, path, a.peer_python, Path(d))
        m = br.alternate(_with_baseline(a, cmds), a.repeat, a.timeout * 4)
    tp, fl, fp = m["traceprobe"], m["floor"], m["floor + pandas"]
    for peer, _, _ in goals:
        if peer in m:
            r = m[peer]
            peers[peer] = {**r, **{k: r["result"][k] for k in ("import_s", "load_s", "overlap_s")}} if r["ok"] else r
            peers[peer].pop("result", None)
    stages = _stages(a, path)
    row = {"trace": str(path), "events": fl.get("result", {}).get("events"), "traceprobe": tp, "one_process": m["traceprobe --jobs 1"],
           "floor": fl, "floor_pandas": fp,
           **peers, "stages": stages, **({"baseline": m["baseline"]} if "baseline" in m else {})}
    out = [_target("real 216k: traceprobe / (floor + pandas)", tp["wall_s"] / fp["wall_s"] if tp["ok"] and fp["ok"] else None, "<=", 2.0)]
    for peer, name, goal in goals:
        r = peers[peer]
        out.append(_target(f"real 216k: {name} / traceprobe", r["wall_s"] / tp["wall_s"] if r.get("ok") and tp["ok"] else None, ">=", goal,
                           note=r.get("skipped") or r.get("error") or ""))
    return row, out


def _with_odd_event(path: Path) -> Path:
    """A copy of the gzipped trace ``path`` with one event of an unknown ``ph`` before its first (made once)."""
    odd = path.with_name(path.name.replace(".pt.trace", ".odd.pt.trace"))
    if odd.exists() and odd.stat().st_mtime >= path.stat().st_mtime:
        return odd
    import gzip
    import shutil

    with gzip.open(path, "rb") as src, gzip.open(odd, "wb", compresslevel=1) as dst:
        head = src.read(1 << 20)
        at = head.index(b"{", head.index(b'"traceEvents"'))
        dst.write(head[:at] + b'{"ph": "Z", "name": "SYNTHETIC odd event", "pid": 0, "tid": 0, "ts": 1},\n' + head[at:])
        shutil.copyfileobj(src, dst, 16 << 20)
    return odd


def bench_synthetic(a: argparse.Namespace, workdir: Path, n: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    label = f"1e{len(str(n)) - 1}"
    path = br.synth(workdir, f"synthetic-{label}.pt.trace.json.gz", ["--events", str(n)])
    odd = _with_odd_event(path)
    big = n >= 10**7
    cmds: dict[str, br.Command] = {"traceprobe": br.traceprobe_cmd([str(path)]), "odd event": br.traceprobe_cmd([str(odd)])}
    cmds["floor"] = br.floor_cmd(str(path))
    cmds["floor + pandas"] = br.floor_cmd(str(path), pandas=True)
    m = br.alternate(_with_baseline(a, cmds), 1 if big else a.repeat, a.timeout)
    tp, fl, od, fp = m["traceprobe"], m["floor"], m["odd event"], m["floor + pandas"]
    stages = _stages(a, path, 1 if big else None)
    st = stages.get("this checkout", {})
    after_reading = sum(st.get(k, 0.0) for k in ("frames_s", "analysis_s", "json_s"))
    share = st["replay_s"] / after_reading if "replay_s" in st and after_reading > 0 else None
    json_mb = fl["result"]["json_bytes"] / 2**20 if fl.get("result") else None
    row = {"trace": path.name, "events": n, "json_mb": json_mb, "traceprobe": tp, "odd_event": od, "floor": fl, "floor_pandas": fp,
           "stages": stages, "replay_share": share, **({"baseline": m["baseline"]} if "baseline" in m else {})}
    out = [_target(f"synthetic {label} gz: peak RSS / JSON", tp["peak_rss_mb"] / json_mb if json_mb and tp["ok"] else None, "<=", 1.2),
           _target(f"synthetic {label} gz, one odd event: peak RSS / JSON", od["peak_rss_mb"] / json_mb if json_mb and od["ok"] else None,
                   "<=", 1.2)]
    out[:0] = [_target(f"synthetic {label} gz: traceprobe / (floor + pandas)", tp["wall_s"] / fp["wall_s"] if tp["ok"] and fp["ok"] else None,
                       "<=", 2.0 if big else 1.5),
               _target(f"synthetic {label} gz: replay / analysis", None if share is None else share * 100, "<=", 25.0, unit="%")]
    return row, out


def bench_batch(a: argparse.Namespace, workdir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    folder = br.synth(workdir, f"batch-100x{a.batch_events}", ["--ranks", "100", "--events", str(a.batch_events), "--skewed", "0"])
    cmds: dict[str, br.Command] = {"traceprobe": br.traceprobe_cmd([str(folder)])}
    peers: dict[str, dict[str, Any]] = {}
    for peer in ("hta", "tracelens"):
        if a.no_peers:
            peers[peer] = {"ok": False, "skipped": "--no-peers"}
        elif not br.peer_installed(peer, a.peer_python):
            peers[peer] = {"ok": False, "skipped": f"not installed in {a.peer_python}"}
        else:
            cmds[peer] = br.peer_cmd(peer, folder, a.peer_python, folder)
    m = br.alternate(_with_baseline(a, cmds), a.repeat, a.timeout)
    tp = m["traceprobe"]
    peers.update({k: m[k] for k in ("hta", "tracelens") if k in m})
    row = {"folder": str(folder), "files": 100, "events_per_file": a.batch_events, "traceprobe": tp, **peers,
           **({"baseline": m["baseline"]} if "baseline" in m else {})}
    out = [_target(f"batch of 100 rank traces ({a.batch_events:,} events): CPU ms per file",
                   tp["cpu_s"] * 1000 / 100 if tp["ok"] else None, "<=", 50.0, unit=" ms")]
    for peer, name in (("hta", "HTA"), ("tracelens", "TraceLens")):
        r = peers[peer]
        out.append(_target(f"batch of 100: {name} CPU / traceprobe CPU", r["cpu_s"] / tp["cpu_s"] if r.get("ok") and tp["ok"] else None,
                           ">=", 1.0, note=r.get("skipped") or r.get("error") or ""))
    return row, out


def bench_ranks(a: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    folder = br.synth(workdir, f"job-{a.ranks}x{a.rank_events}", ["--ranks", str(a.ranks), "--events", str(a.rank_events)])
    total = a.ranks * a.rank_events
    rows: list[dict[str, Any]] = []
    out = {"folder": str(folder), "ranks": a.ranks, "events_per_rank": a.rank_events, "events": total, "rows": rows}

    def save() -> None:  # after each row: a run cut short keeps what it measured
        if a.json_out:
            Path(a.json_out).write_text(json.dumps({"machine": _machine(), "repeat": a.repeat, "ranks": out}, indent=2))
    workers = [int(w) for w in a.workers.split(",")]
    for w in workers:
        m = br.alternate(_with_baseline(a, {"traceprobe": br.traceprobe_cmd([str(folder)], "--jobs", str(w))}), a.repeat, a.timeout)
        rows.append({"engine": "local processes", "workers": w, **_throughput(m["traceprobe"], a.ranks, total),
                     **({"baseline": _throughput(m["baseline"], a.ranks, total)} if "baseline" in m else {})})
        print(f"  ranks: {w} local workers: {rows[-1]['ranks_per_s']} rank traces/s"
              + (f" (baseline {rows[-1]['baseline']['ranks_per_s']})" if "baseline" in m else ""), file=sys.stderr)
        save()
    if not a.no_dask:
        from distributed import Client, LocalCluster

        for w in workers:
            with LocalCluster(n_workers=w, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                    Client(cluster) as client:
                client.wait_for_workers(w)
                client.run(__import__, "traceprobe.collect")
                cmd = br.traceprobe_cmd([str(folder)], "--scheduler", cluster.scheduler_address)
                dask = br.alternate({"dask": cmd}, a.repeat, a.timeout)["dask"]
                peaks = client.run(_peak_rss_mb)  # each worker's own peak since it started
            rows.append({"engine": "Dask LocalCluster", "workers": w, **_throughput(dask, a.ranks, total),
                         "worker_peak_rss_mb": round(max(peaks.values()))})
            print(f"  ranks: {w} Dask workers: {rows[-1]['ranks_per_s']} rank traces/s, worker peak RSS "
                  f"{rows[-1]['worker_peak_rss_mb']} MB", file=sys.stderr)
            save()
    return out


def _peak_rss_mb() -> float:
    """This process's peak resident memory in MB (run on each Dask worker)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _throughput(s: dict[str, Any], ranks: int, events: int) -> dict[str, Any]:
    ok = s["ok"]
    return {"ok": ok, "wall_s": round(s["wall_s"], 3), "wall_runs_s": s["wall_runs_s"], "client_peak_rss_mb": round(s["peak_rss_mb"]),
            "ranks_per_s": round(ranks / s["wall_s"], 2) if ok else None,
            "events_per_s": round(events / s["wall_s"]) if ok else None, **({} if ok else {"error": s.get("error")})}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--only", default="real,synthetic,batch", help=f"parts to run, comma-separated, of {','.join(PARTS)}")
    ap.add_argument("--large", action="store_true", help="also the peak memory target at 10^7 events (~2.4 GB of JSON, ~10 GB of RAM)")
    ap.add_argument("--hta-trace", help="HTA's df_index_resolver.json.gz (default: downloaded into --workdir)")
    ap.add_argument("--peer-python", default=sys.executable,
                    help="the Python that runs HTA and TraceLens (a virtual environment where they are installed)")
    ap.add_argument("--no-peers", action="store_true", help="skip HTA and TraceLens")
    ap.add_argument("--batch-events", type=int, default=10_000, help="events per trace of the batch of 100")
    ap.add_argument("--ranks", type=int, default=0, help="also measure a job of this many rank traces (adds 'ranks' to --only)")
    ap.add_argument("--rank-events", type=int, default=100_000, help="events per rank trace of --ranks")
    ap.add_argument("--workers", default="1,2", help="worker counts for --ranks, comma-separated")
    ap.add_argument("--no-dask", action="store_true", help="--ranks: local processes only")
    ap.add_argument("--repeat", type=int, default=5, help="runs of each command (medians reported)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per child process")
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "traceprobe-bench"), help="synthetic traces (reused)")
    ap.add_argument("--json-out", help="write the results as JSON here")
    ap.add_argument("--summaries", action="store_true", help="with --ranks N: only the whole-job report of N rank summaries, "
                    "time and peak memory against the targets (scripts/bench_job.py)")
    ap.add_argument("--baseline", help="a checkout of another traceprobe version (git worktree add DIR COMMIT): its times "
                    "are measured alternating with this one's and printed beside them")
    a = ap.parse_args(argv)
    if a.summaries:  # a separate path: scripts/bench_job.py
        import bench_job

        return bench_job.main(["--ranks", str(a.ranks or bench_job.TARGET_RANKS), "--workdir", a.workdir, "--repeat", "1"]
                              + (["--json", a.json_out] if a.json_out else []))
    parts = {p.strip() for p in a.only.split(",") if p.strip()} | ({"ranks"} if a.ranks else set())
    if a.ranks <= 0:
        parts.discard("ranks")
    workdir = Path(a.workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    for root in [br.ROOT, *([Path(a.baseline).resolve()] if a.baseline else [])]:
        br.compile_package(root)  # no timed run compiles traceprobe's modules
    t = time.perf_counter()
    results: dict[str, Any] = {"machine": _machine(), "repeat": a.repeat, "targets": []}
    if "real" in parts:
        results["real"], tg = bench_real(a, workdir)
        results["targets"] += tg
    if "synthetic" in parts:
        results["synthetic"] = []
        for n in [10**6] + ([10**7] if a.large else []):
            row, tg = bench_synthetic(a, workdir, n)
            results["synthetic"].append(row)
            results["targets"] += tg
    if "batch" in parts:
        results["batch"], tg = bench_batch(a, workdir)
        results["targets"] += tg
    if "ranks" in parts:
        results["ranks"] = bench_ranks(a, workdir)
    results["bench_wall_s"] = round(time.perf_counter() - t, 1)
    _print(results)
    if a.json_out:
        Path(a.json_out).write_text(json.dumps(results, indent=2, default=str))
    return 0


def _machine() -> dict[str, Any]:
    m: dict[str, Any] = {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()}
    try:
        import psutil

        m["memory_gb"] = round(psutil.virtual_memory().total / 2**30, 1)
    except ImportError:
        pass
    from traceprobe.analysis.causal.sweep import ahead_of_time  # (this checkout's: a build that failed shows here)

    m["replay_kernels"] = "built ahead of time" if ahead_of_time() else "numba's JIT (not built ahead of time)"
    return m


def _before(base: dict[str, Any], now: dict[str, Any]) -> str:
    if not base.get("ok"):
        return f"baseline: failed ({base.get('error', '')})"
    return (f"baseline {base['wall_s']:.3f} s (CPU {base['cpu_s']:.3f}, {base['peak_rss_mb']:.0f} MB) -> this checkout "
            f"{now['wall_s']:.3f} s (CPU {now['cpu_s']:.3f}, {now['peak_rss_mb']:.0f} MB): {base['wall_s'] / now['wall_s']:.2f}x faster")


def _print(r: dict[str, Any]) -> None:
    m = r["machine"]
    print(f"traceprobe benchmark: {m['cpus']} CPUs, Python {m['python']}, medians of {r['repeat']} alternating runs; "
          f"the replay's kernels: {m.get('replay_kernels', '?')}\n")
    if r["targets"]:
        w = max(len(t["target"]) for t in r["targets"])
        print(f"{'target':{w}}  {'measured':>10}  {'goal':>9}  met")
        for t in r["targets"]:
            v = "-" if t["value"] is None else f"{t['value']:.2f}{t['unit']}"
            met = {True: "yes", False: "NO", None: "n/a"}[t["met"]]
            print(f"{t['target']:{w}}  {v:>10}  {t['op']} {t['limit']:g}{t['unit']:<3}  {met}{'  (' + t['note'] + ')' if t['note'] else ''}")
    real = r.get("real") or {}
    if real.get("traceprobe"):
        tp, fl = real["traceprobe"], real["floor"]
        fp = real.get("floor_pandas") or {}
        print(f"\nreal 216k: traceprobe {tp['wall_s']:.3f} s (CPU {tp['cpu_s']:.3f}, {tp['peak_rss_mb']:.0f} MB), floor {fl['wall_s']:.3f} s "
              f"(parse {fl.get('parse_s', 0):.3f}, {fl['peak_rss_mb']:.0f} MB; {tp['wall_s'] / fl['wall_s']:.2f}x), floor + pandas "
              f"{fp.get('wall_s', float('nan')):.3f} s")
        one = real.get("one_process") or {}
        if one.get("ok"):
            print(f"  traceprobe --jobs 1 (one process): {one['wall_s']:.3f} s (CPU {one['cpu_s']:.3f}, {one['peak_rss_mb']:.0f} MB)")
        for peer, name in (("hta", "HTA 0.5"), ("tracelens", "TraceLens")):
            h = real.get(peer) or {}
            print(f"  {name}: " + (f"{h['wall_s']:.2f} s (imports {h['import_s']:.2f}, load {h['load_s']:.2f}, analysis {h['overlap_s']:.2f}), "
                                   f"{h['peak_rss_mb']:.0f} MB" if h.get("ok") else h.get("skipped") or h.get("error") or "-"))
    if real.get("baseline"):
        print("  " + _before(real["baseline"], real["traceprobe"]))
    for who, st in (real.get("stages") or {}).items():
        print(f"  stages in one process, {who}: " + ", ".join(f"{k[:-2]} {v:.3f} s" for k, v in st.items()))
    for row in r.get("synthetic", []):
        tp, fl = row["traceprobe"], row["floor"]
        od = row["odd_event"]
        print(f"{row['trace']}: traceprobe {tp['wall_s']:.3f} s (CPU {tp['cpu_s']:.3f}, {tp['peak_rss_mb']:.0f} MB), "
              f"with one odd event {od['wall_s']:.3f} s ({od['peak_rss_mb']:.0f} MB), "
              f"floor {fl['wall_s']:.3f} s ({fl['peak_rss_mb']:.0f} MB), floor + pandas {row['floor_pandas']['wall_s']:.3f} s, "
              f"JSON {row['json_mb']:.0f} MB")
        for who, st in (row.get("stages") or {}).items():
            print(f"  stages in one process, {who}: " + ", ".join(f"{k[:-2]} {v:.3f} s" for k, v in st.items()))
        if row.get("baseline"):
            print("  " + _before(row["baseline"], tp))
    if r.get("batch"):
        b = r["batch"]["traceprobe"]
        print(f"batch of 100: {b['wall_s']:.3f} s, CPU {b['cpu_s']:.3f} s (runs {b['wall_runs_s']})"
              + "".join(f"; {name} {r['batch'][k]['wall_s']:.2f} s, CPU {r['batch'][k]['cpu_s']:.2f} s" for k, name in
                        (("hta", "HTA"), ("tracelens", "TraceLens")) if r["batch"].get(k, {}).get("ok")))
        if r["batch"].get("baseline"):
            print("  " + _before(r["batch"]["baseline"], b))
    if r.get("ranks"):
        k = r["ranks"]
        print(f"\n{k['ranks']} rank traces x {k['events_per_rank']:,} events (SYNTHETIC job):")
        print(f"{'engine':18} {'workers':>7} {'wall s':>8} {'rank traces/s':>14} {'events/s':>12} {'peak MB (client / worker)':>26}")
        for x in k["rows"]:
            rps = "-" if x["ranks_per_s"] is None else f"{x['ranks_per_s']:.2f}"
            eps = "-" if x["events_per_s"] is None else f"{x['events_per_s']:,}"
            peak = f"{x['client_peak_rss_mb']} / {x.get('worker_peak_rss_mb', '-')}"
            print(f"{x['engine']:18} {x['workers']:>7} {x['wall_s']:>8.3f} {rps:>14} {eps:>12} {peak:>26}" + (f"  {x['error']}" if not x["ok"] else "")
                  + (f"  (baseline {x['baseline']['wall_s']:.3f} s)" if x.get("baseline") else ""))
    print(f"\n(bench took {r['bench_wall_s']} s)")


if __name__ == "__main__":
    sys.exit(main())
