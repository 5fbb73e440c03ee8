"""scripts/synth_trace.py (SYNTHETIC traces) and traceprobe's figures against a pure-Python reference.

Every trace here is written by ``scripts/synth_trace.py``: made up, labelled
``synthetic: ...`` in its ``traceName``. The reference below recomputes each figure
of the overlap report from the raw JSON with plain loops (sorting and merging
intervals one by one), independently of traceprobe's vectorized code.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import math
import subprocess
import sys
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

import traceprobe
from traceprobe.analysis import overlap_report

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("synth_trace", ROOT / "scripts" / "synth_trace.py")
synth = importlib.util.module_from_spec(_spec)
sys.modules["synth_trace"] = synth
_spec.loader.exec_module(synth)

DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


def write(tmp_path: Path, name: str = "t.json", **kw) -> tuple[Path, synth.Plan]:
    cfg = synth.Config(**kw)
    path = tmp_path / name
    return path, synth.write(cfg, path)


def read_json(path: Path, exact: bool = False) -> dict:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    # exact: Decimal keeps the µs values exact, so ns are exact too
    return json.loads(raw, parse_float=Decimal) if exact else json.loads(raw)


# --- the generator ---------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1_000, 10_000, pytest.param(100_000, marks=pytest.mark.slow)])
def test_exact_event_count_and_proportions(tmp_path, n):
    path, plan = write(tmp_path, events=n, seed=1)
    doc = read_json(path)
    ev = doc["traceEvents"]
    assert len(ev) == n == plan.total
    kinds = Counter((e.get("ph"), e.get("cat")) for e in ev)
    assert kinds[("X", "kernel")] == plan.kernels
    assert kinds[("X", "gpu_memcpy")] == plan.memcpys
    assert kinds[("X", "gpu_memset")] == plan.memsets
    assert kinds[("X", "cpu_op")] == plan.cpu_ops
    assert kinds[("X", "cuda_runtime")] == plan.runtime
    assert kinds[("s", "ac2g")] == kinds[("f", "ac2g")] == plan.flows // 2
    assert kinds[("X", "user_annotation")] == plan.steps
    assert kinds[("X", "python_function")] == plan.python
    # the shares asked for (defaults: 20% device, 40% host, 30% flows; 10% memcpy, 2% memset, 10% NCCL)
    cfg = synth.Config()
    dev = plan.kernels + plan.memcpys + plan.memsets
    assert dev == round(n * cfg.device_share)
    assert plan.cpu_ops + plan.runtime == round(n * cfg.cpu_share)
    assert abs(plan.flows - n * cfg.flow_share) <= 1
    assert plan.memcpys == round(dev * cfg.memcpy_share) and plan.memsets == round(dev * cfg.memset_share)
    nccl = sum(1 for e in ev if e.get("cat") == "kernel" and "nccl" in e["name"].lower())
    assert nccl == plan.nccl == round(plan.kernels * cfg.nccl_share)


def test_metadata_like_torch_and_labelled_synthetic(tmp_path):
    path, _ = write(tmp_path, events=2_000, devices=3, rank=2, world_size=4)
    doc = read_json(path)
    assert doc["traceName"].startswith("synthetic: ")
    assert doc["schemaVersion"] == 1
    assert [d["id"] for d in doc["deviceProperties"]] == [0, 1, 2]
    assert doc["distributedInfo"]["rank"] == 2 and doc["distributedInfo"]["world_size"] == 4
    assert isinstance(doc["baseTimeNanoseconds"], int)
    for key in ("trace_id", "displayTimeUnit", "cuda_runtime_version", "cupti_version"):
        assert key in doc
    names = Counter(e["name"] for e in doc["traceEvents"] if e.get("ph") == "M")
    assert names["process_labels"] == 3 + 1  # the GPUs and the host process
    no_rank, _ = write(tmp_path, "n.json", events=2_000, rank=None)
    assert "distributedInfo" not in read_json(no_rank)


def test_deterministic_for_a_seed(tmp_path):
    a, _ = write(tmp_path, "a.json.gz", events=5_000, seed=7)
    b, _ = write(tmp_path, "b.json.gz", events=5_000, seed=7)
    c, _ = write(tmp_path, "c.json.gz", events=5_000, seed=8)
    assert a.read_bytes()[:2] == b"\x1f\x8b"  # gzipped by extension
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()
    p, _ = write(tmp_path, "p.json", events=5_000, seed=7)
    assert gzip.decompress(a.read_bytes()) == p.read_bytes()


def test_loads_in_traceprobe_with_the_planned_counts(tmp_path):
    path, plan = write(tmp_path, "t.json.gz", events=20_000, devices=4, streams=4, threads=3, seed=3)
    t = traceprobe.load_trace(path)
    assert t.metadata["event_count"] == 20_000
    assert t.metadata["traceName"].startswith("synthetic: ")
    assert t.rank == 0 and len(t.devices) == 4
    assert len(t.device_events) == plan.kernels + plan.memcpys + plan.memsets
    assert len(t.host_events) == plan.cpu_ops + plan.runtime + plan.steps
    assert int(t.device_events["is_comm"].sum()) == plan.nccl
    assert len(t.steps) == plan.steps
    assert sorted(t.device_events["device"].unique()) == [0, 1, 2, 3]
    # a GPU stream runs one thing at a time: events of a stream never overlap
    for _, g in t.device_events.groupby(["device", "stream"]):
        s, e = g["start_ns"].to_numpy(), g["end_ns"].to_numpy()
        assert (s[1:] >= e[:-1]).all()
    # every runtime call lies inside a cpu_op of its thread
    h = t.host_events
    ops = h[h["cat"] == "cpu_op"]
    for (pid, tid), rt in h[h["cat"] == "cuda_runtime"].groupby(["pid", "tid"], observed=True):
        o = ops[(ops["pid"] == pid) & (ops["tid"] == tid)].sort_values("start_ns")
        i = np.searchsorted(o["start_ns"].to_numpy(), rt["start_ns"].to_numpy(), side="right") - 1
        assert (i >= 0).all() and (rt["end_ns"].to_numpy() <= o["end_ns"].to_numpy()[i]).all()


def test_bad_shares_are_refused():
    with pytest.raises(ValueError, match="flow"):
        synth.plan(synth.Config(events=10_000, flow_share=0.9))
    with pytest.raises(ValueError, match="cannot hold"):
        synth.plan(synth.Config(events=10_000, device_share=0.5, cpu_share=0.5, flow_share=0.2))
    with pytest.raises(ValueError):
        synth.plan(synth.Config(events=10_000, memcpy_share=1.5))


def test_command_line(tmp_path):
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "synth_trace.py"), "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "--events" in out.stdout and "synthetic" in out.stdout.lower()
    p = tmp_path / "cli.json"
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "synth_trace.py"), "-n", "3k", "--devices", "1", "-o", str(p)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert len(read_json(p)["traceEvents"]) == 3_000
    bad = subprocess.run([sys.executable, str(ROOT / "scripts" / "synth_trace.py"), "-n", "100", "-o", str(p)],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "error" in bad.stderr


def test_reading_traces_never_imports_torch(tmp_path):
    path, _ = write(tmp_path, events=2_000)
    code = (
        "import sys, traceprobe.cli\n"
        "from traceprobe.collect import analyze_paths\n"
        "from traceprobe.report import json_document\n"
        f"s = analyze_paths([{str(path)!r}], jobs=1)\n"
        "assert s.reports and not s.failures\n"
        "json_document.to_json(s)\n"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# --- pure-Python reference -------------------------------------------------------------------


def ns(us) -> int:
    return int(Decimal(us) * 1000)


def union(ivs):
    out = []
    for s, e in sorted((s, e) for s, e in ivs if e > s):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [tuple(x) for x in out]


def length(ivs) -> int:
    return sum(e - s for s, e in union(ivs))


def intersect(a, b):
    a, b, out, i, j = union(a), union(b), [], 0, 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if e > s:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def at_least(sets, k):
    """Where k or more of the interval sets hold at once."""
    points = []
    for ivs in sets:
        for s, e in union(ivs):
            points += [(s, 1), (e, -1)]
    points.sort(key=lambda p: (p[0], p[1]))  # ends before starts at equal times
    out, count, prev = [], 0, None
    for t, d in points:
        if prev is not None and count >= k and t > prev:
            out.append((prev, t))
        count += d
        prev = t
    return union(out)


def frac(num, den):
    return num / den if den > 0 else math.nan


def direction_of(name: str) -> str:
    # "Memcpy DtoH (Device -> Pinned)"
    return name.split()[1]


def reference(doc: dict) -> dict:
    """Every figure of the overlap report, with loops over the events."""
    dev, host = [], []
    for e in doc["traceEvents"]:
        if e.get("ph") != "X":
            continue
        if e.get("cat") in DEVICE_CATS:
            a = e["args"]
            dev.append({"cat": e["cat"], "name": e["name"], "device": a["device"], "stream": a["stream"],
                        "s": ns(e["ts"]), "e": ns(e["ts"]) + ns(e["dur"]), "bytes": a.get("bytes", -1),
                        "comm": e["cat"] == "kernel" and "nccl" in e["name"].lower(), "corr": a.get("correlation", -1)})
        elif e.get("cat") in ("cpu_op", "cuda_runtime", "cuda_driver", "user_annotation"):
            host.append({"cat": e["cat"], "name": e["name"], "thread": (str(e["pid"]), str(e["tid"])),
                         "s": ns(e["ts"]), "e": ns(e["ts"]) + ns(e["dur"]), "corr": (e.get("args") or {}).get("correlation", -1)})
    # the profiled window: each device event's launch is the earliest runtime/driver call with its correlation id
    marks = {}
    for h in host:
        if h["name"].startswith("ProfilerStep#"):
            n = int(h["name"].split("#")[1])
            s, e = marks.get(n, (h["s"], h["e"]))
            marks[n] = (min(s, h["s"]), max(e, h["e"]))
    first_call = {}
    for h in host:
        if h["cat"] in ("cuda_runtime", "cuda_driver") and h["corr"] >= 0:
            first_call[h["corr"]] = min(first_call.get(h["corr"], h["s"]), h["s"])
    if marks:
        lo, hi = min(m[0] for m in marks.values()), max(m[1] for m in marks.values())
    else:
        times = [x for d in dev + host for x in (d["s"], d["e"])]
        lo, hi = (min(times), max(times)) if times else (0, 0)
    linked = any(d["corr"] in first_call for d in dev if d["corr"] >= 0)
    for d in dev:
        if linked:
            d["launch"] = first_call.get(d["corr"]) if d["corr"] >= 0 else None
            d["kept"] = d["launch"] is not None and lo <= d["launch"] <= hi
        else:  # nothing to classify by: keep all; a step's work is what starts in it
            d["launch"], d["kept"] = min(max(d["s"], lo), hi), True
    dev = [d for d in dev if d["kept"]]
    window = (min(d["s"] for d in dev), max(d["e"] for d in dev)) if dev else (0, 0)

    def figures(dev):
        devices = sorted({d["device"] for d in dev})
        iv = lambda evs: [(d["s"], d["e"]) for d in evs]  # noqa: E731
        compute = {x: iv(d for d in dev if d["device"] == x and d["cat"] == "kernel" and not d["comm"]) for x in devices}
        copy = {}
        for x in devices:
            cps = [d for d in dev if d["device"] == x and d["cat"] == "gpu_memcpy"]
            if not cps:
                continue
            groups = defaultdict(list)
            for d in cps:
                groups[direction_of(d["name"])].append(d)
            groups["all"] = cps
            for direction, g in groups.items():
                u = union(iv(g))
                copy[(x, direction)] = {"copies": len(g), "bytes": sum(d["bytes"] for d in g if d["bytes"] >= 0),
                                        "copy_ns": length(u), "overlapped_ns": length(intersect(u, compute[x]))}
        busy = {x: union(iv(d for d in dev if d["device"] == x)) for x in devices}
        two = at_least(list(busy.values()), 2)
        any_ = at_least(list(busy.values()), 1)
        per_dev = {x: {"busy_ns": length(busy[x]), "concurrent_ns": length(intersect(busy[x], two))} for x in devices}
        streams = {}
        for x in devices:
            ss = sorted({d["stream"] for d in dev if d["device"] == x})
            sets = [iv(d for d in dev if d["device"] == x and d["stream"] == s) for s in ss]
            ksets = [k for k in (iv(d for d in dev if d["device"] == x and d["stream"] == s and d["cat"] == "kernel") for s in ss) if k]
            busy_sets = [u for u in (union(x_) for x_ in sets) if u]
            top = max(range(len(busy_sets)), key=lambda i: (length(busy_sets[i]), -i)) if busy_sets else -1
            side = [u for i, u in enumerate(busy_sets) if i != top]
            streams[x] = {"streams": len(ss), "busy_ns": length(at_least(sets, 1)), "multi_stream_ns": length(at_least(sets, 2)),
                          "kernel_busy_ns": length(at_least(ksets, 1)), "multi_stream_kernel_ns": length(at_least(ksets, 2)),
                          "side_busy_ns": length(at_least(side, 1)) if side else 0}
        comm = {}
        for x in devices:
            c = [d for d in dev if d["device"] == x and d["comm"]]
            if c:
                comm[x] = {"comm_kernels": len(c), "comm_ns": length(iv(c)), "overlapped_ns": length(intersect(iv(c), compute[x]))}
        return {"copy": copy, "devices": per_dev, "any_ns": length(any_), "two_ns": length(two), "streams": streams, "comm": comm}

    out = figures(dev)
    out["window"] = window
    out["stream_busy"] = {}
    for d in dev:
        r = out["stream_busy"].setdefault((d["device"], d["stream"]), {"events": 0, "kernel": 0, "gpu_memcpy": 0, "gpu_memset": 0, "iv": []})
        r["events"] += 1
        r[d["cat"]] += 1
        r["iv"].append((d["s"], d["e"]))
    # CPU/GPU: cpu_ops with no runtime call starting inside them, on their thread
    rt = defaultdict(list)
    for h in host:
        if h["cat"] in ("cuda_runtime", "cuda_driver"):
            rt[h["thread"]].append(h["s"])
    pure = [(h["s"], h["e"]) for h in host if h["cat"] == "cpu_op" and not any(h["s"] <= t < h["e"] for t in rt[h["thread"]])]
    gpu = union((d["s"], d["e"]) for d in dev)
    out["cpu_gpu"] = {"host_compute_ns": length(pure), "device_busy_ns": length(gpu), "overlapped_ns": length(intersect(union(pure), gpu))}
    # steps: host window from each ProfilerStep#N start to the next one's (the last: its own end); a step
    # launched the work launched in its host window; its anchor is the first start of the compute kernels it launched
    # (of any of its work without one). Its GPU interval runs from the earliest anchor of it and the later steps to
    # the next step's start (the first step with work: from the first start of all of it; the last: to the last
    # end of all of it); its figures are those of every launched-in-the-steps interval cut to its GPU interval
    nums = sorted(marks)
    launched = []
    for i, n in enumerate(nums):
        h_lo = marks[n][0]
        h_hi = marks[nums[i + 1]][0] if i + 1 < len(nums) else max(marks[n][1], marks[n][0])
        last = i + 1 == len(nums)
        launched.append((n, h_lo, h_hi, [d for d in dev if h_lo <= d["launch"] and (d["launch"] <= h_hi if last else d["launch"] < h_hi)]))
    in_steps = [d for _, _, _, mine in launched for d in mine]
    end_all = max((d["e"] for d in in_steps), default=0)
    anchors = [min((d["s"] for d in mine if d["cat"] == "kernel" and not d["comm"]), default=None) for _, _, _, mine in launched]
    anchors = [a if a is not None else min((d["s"] for d in mine), default=None) for a, (_, _, _, mine) in zip(anchors, launched)]
    starts = [min((f for f in anchors[i:] if f is not None), default=end_all) for i in range(len(anchors))]
    first_work = next((i for i, a in enumerate(anchors) if a is not None), None)
    if first_work is not None:
        lead = min(starts[first_work], min(d["s"] for d in in_steps))
        starts = [lead if i <= first_work else s for i, s in enumerate(starts)]
    ends = starts[1:] + [end_all]
    steps = []
    for (n, h_lo, h_hi, mine), g_lo, g_hi in zip(launched, starts, ends):
        inside = [dict(d, s=max(d["s"], g_lo), e=min(d["e"], g_hi)) for d in in_steps]
        inside = [d for d in inside if d["e"] > d["s"]]
        f = figures(inside)
        alls = [v for (x, dr), v in f["copy"].items() if dr == "all"]
        steps.append({
            "step": n, "host_start_ns": h_lo, "host_end_ns": h_hi,
            "gpu_start_ns": g_lo if mine else -1, "gpu_end_ns": g_hi if mine else -1,
            "gpu_busy_ns": length([(d["s"], d["e"]) for d in inside]), "events": len(mine),
            "launched_start_ns": min((d["s"] for d in mine), default=-1), "launched_end_ns": max((d["e"] for d in mine), default=-1),
            "launched_busy_ns": length([(d["s"], d["e"]) for d in mine]),
            "device_concurrency": frac(f["two_ns"], f["any_ns"]),
            "copy_overlap": frac(sum(v["overlapped_ns"] for v in alls), sum(v["copy_ns"] for v in alls)) if alls else math.nan,
            "comm_overlap": frac(sum(v["overlapped_ns"] for v in f["comm"].values()), sum(v["comm_ns"] for v in f["comm"].values())) if f["comm"] else math.nan,
            "stream_concurrency": frac(sum(v["multi_stream_ns"] for v in f["streams"].values()), sum(v["busy_ns"] for v in f["streams"].values())) if f["streams"] else math.nan,
        })
    out["steps"] = steps
    return out


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-12, abs=0)


def check_against_reference(path: Path) -> None:
    ref = reference(read_json(path, exact=True))
    r = overlap_report(traceprobe.load_trace(path))
    assert r.window_ns == ref["window"]
    # busy time per stream
    got = {(row.device, row.stream): row for row in r.streams.itertuples()}
    assert set(got) == set(ref["stream_busy"])
    width = max(ref["window"][1] - ref["window"][0], 1)
    for key, want in ref["stream_busy"].items():
        g = got[key]
        assert (g.busy_ns, g.events, g.kernels, g.memcpys, g.memsets) == (
            length(want["iv"]), want["events"], want["kernel"], want["gpu_memcpy"], want["gpu_memset"])
        assert same(g.utilization, length(want["iv"]) / width)
    # copy/compute overlap
    got = {(row.device, row.direction): row for row in r.copy_overlap.itertuples()}
    assert set(got) == set(ref["copy"])
    for key, want in ref["copy"].items():
        g = got[key]
        assert (g.copies, g.bytes, g.copy_ns, g.overlapped_ns) == (want["copies"], want["bytes"], want["copy_ns"], want["overlapped_ns"])
        assert same(g.fraction, frac(want["overlapped_ns"], want["copy_ns"]))
    # cross-device concurrency
    d = r.devices
    assert (d.any_busy_ns, d.concurrent_ns, d.device_count) == (ref["any_ns"], ref["two_ns"], len(ref["devices"]))
    assert same(d.concurrency, frac(ref["two_ns"], ref["any_ns"]))
    for row in d.devices.itertuples():
        want = ref["devices"][row.device]
        assert (row.busy_ns, row.concurrent_ns, row.idle_ns) == (want["busy_ns"], want["concurrent_ns"], width - want["busy_ns"] if ref["window"][1] > ref["window"][0] else -want["busy_ns"])
    # stream concurrency
    assert sorted(r.stream_concurrency["device"]) == sorted(ref["streams"])
    for row in r.stream_concurrency.itertuples():
        want = ref["streams"][row.device]
        assert (row.streams, row.busy_ns, row.multi_stream_ns, row.kernel_busy_ns, row.multi_stream_kernel_ns, row.side_busy_ns) == (
            want["streams"], want["busy_ns"], want["multi_stream_ns"], want["kernel_busy_ns"], want["multi_stream_kernel_ns"],
            want["side_busy_ns"])
    # communication/compute overlap
    assert sorted(r.comm_overlap["device"]) == sorted(ref["comm"])
    for row in r.comm_overlap.itertuples():
        want = ref["comm"][row.device]
        assert (row.comm_kernels, row.comm_ns, row.overlapped_ns) == (want["comm_kernels"], want["comm_ns"], want["overlapped_ns"])
    # CPU/GPU overlap
    c = r.cpu_gpu
    assert (c.host_compute_ns, c.device_busy_ns, c.overlapped_ns) == (
        ref["cpu_gpu"]["host_compute_ns"], ref["cpu_gpu"]["device_busy_ns"], ref["cpu_gpu"]["overlapped_ns"])
    # per-step figures
    assert len(r.steps) == len(ref["steps"])
    for row, want in zip(r.steps.to_dict("records"), ref["steps"]):
        keys = ("step", "host_start_ns", "host_end_ns", "gpu_start_ns", "gpu_end_ns", "gpu_busy_ns", "events",
                "launched_start_ns", "launched_end_ns", "launched_busy_ns")
        assert tuple(row[k] for k in keys) == tuple(want[k] for k in keys)
        for k in ("device_concurrency", "copy_overlap", "comm_overlap", "stream_concurrency"):
            assert same(row[k], want[k]), (k, row[k], want[k])


def random_configs(count: int, seed: int):
    rng = np.random.default_rng(seed)
    for i in range(count):
        # at least a fifth of the events left for metadata, steps and python_function
        device_share = float(rng.uniform(0.1, 0.45))
        cpu_share = float(rng.uniform(0.1, min(0.45, 0.75 - device_share)))
        runtime_share = min(device_share, cpu_share / 2)
        flow_share = float(rng.uniform(0, min(2 * runtime_share * 0.9, 0.8 - device_share - cpu_share)))
        yield synth.Config(
            events=int(rng.integers(300, 2_500)), devices=int(rng.integers(1, 4)), streams=int(rng.integers(1, 5)),
            threads=int(rng.integers(1, 4)), device_share=device_share, memcpy_share=float(rng.uniform(0, 0.4)),
            memset_share=float(rng.uniform(0, 0.1)), nccl_share=float(rng.uniform(0, 0.6)), cpu_share=cpu_share,
            flow_share=flow_share, steps=int(rng.integers(0, 6)), rank=int(rng.integers(0, 4)) if i % 3 else None,
            seed=int(rng.integers(0, 2**31)),
        )


@pytest.mark.parametrize("cfg", list(random_configs(16, seed=2024)), ids=lambda c: f"n{c.events}-d{c.devices}-s{c.streams}-seed{c.seed}")
def test_figures_match_pure_python_reference(tmp_path, cfg):
    path = tmp_path / "t.json"
    synth.write(cfg, path)
    check_against_reference(path)


def test_figures_match_reference_on_a_default_trace(tmp_path):
    path, _ = write(tmp_path, "d.json.gz", events=8_000, seed=11)
    check_against_reference(path)
