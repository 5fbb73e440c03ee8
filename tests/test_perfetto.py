"""Perfetto exports checked without a browser.

Every .pftrace is parsed back with the ``perfetto`` package's protos and replayed
the way trace_processor does (per track, a BEGIN opens a slice and an END closes
the innermost open one), so a slice that came out wrong in the file comes out
wrong here too. Device events are compared with the loader's DataFrame to the ns.
"""

from __future__ import annotations

import gzip
import json
import re
import sqlite3
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import sweep
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
from synthetic import TraceBuilder
from typer.testing import CliRunner

from traceprobe import load_trace, overlap_report
from traceprobe.analysis.device.breakdown import gpu_breakdown
from traceprobe.analysis.device.timeline import BREAKDOWN_SLICES
from traceprobe.cli import app
from traceprobe.report import perfetto as pf
from traceprobe.report import perfetto_sql
from traceprobe.report.chrome import DEVICE_PID_BASE, assign_lanes, write_chrome_json
from traceprobe.report.perfetto import BREAKDOWN_TRACK, TFLOPS_TRACK
from traceprobe.report.perfetto_claims import CLAIM_ANNOTATIONS, CLAIMS_SEQ, CLAIMS_TRACK

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
SAMPLE_FILES = sorted(SAMPLES.glob("*.pt.trace.json.gz"))
OVERLAPPED = SAMPLES / "compute-copy.overlapped.pt.trace.json.gz"


def replay(path: Path) -> dict:
    """Parse a .pftrace and rebuild its tracks, slices, counters and flows."""
    data = Path(path).read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    trace = pb.Trace.FromString(data)
    tracks: dict = {}
    names: dict = defaultdict(dict)  # (interned names per packet sequence: each has its own)
    ann_names: dict = defaultdict(dict)
    stacks, slices, counters = defaultdict(list), [], defaultdict(list)
    flows_out, flows_in = defaultdict(list), defaultdict(list)
    last_ts: dict = defaultdict(lambda: -1)
    for p in trace.packet:
        seq = p.trusted_packet_sequence_id
        assert seq in (pf.SEQ, CLAIMS_SEQ)
        for a in p.interned_data.debug_annotation_names:
            ann_names[seq][a.iid] = a.name
        for n in p.interned_data.event_names:
            names[seq][n.iid] = n.name
        if p.HasField("track_descriptor"):
            td = p.track_descriptor
            assert td.uuid not in tracks
            tracks[td.uuid] = td
            continue
        te = p.track_event
        assert p.timestamp >= last_ts[seq], "packets are written in timestamp order (within a sequence)"
        last_ts[seq] = p.timestamp
        assert te.track_uuid in tracks
        if te.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            ann = {}
            for a in te.debug_annotations:
                kind = a.WhichOneof("value")
                ann[ann_names[seq][a.name_iid]] = getattr(a, kind)
            rec = {"track": te.track_uuid, "start": p.timestamp, "name": names[seq][te.name_iid], **ann}
            stacks[te.track_uuid].append(rec)
            for f in te.flow_ids:
                flows_out[f].append(rec)
            for f in te.terminating_flow_ids:
                flows_in[f].append(rec)
        elif te.type == pb.TrackEvent.TYPE_SLICE_END:
            assert stacks[te.track_uuid], "END without an open slice"
            rec = stacks[te.track_uuid].pop()
            rec["end"] = p.timestamp
            slices.append(rec)
        elif te.type == pb.TrackEvent.TYPE_COUNTER:
            value = te.double_counter_value if te.HasField("double_counter_value") else te.counter_value
            counters[te.track_uuid].append((p.timestamp, value))
    assert not any(stacks.values()), "slices left open"
    cols = ["track", "start", "end", "name", *dict.fromkeys([*pf.ANNOTATIONS, *CLAIM_ANNOTATIONS])]
    return {"tracks": tracks, "slices": pd.DataFrame(slices, columns=cols), "counters": counters, "flows_out": flows_out, "flows_in": flows_in}


def _track_of(tracks: dict, uuid: int) -> tuple[int, int] | None:
    """(device, stream) of a stream track (lane tracks included), from its descriptors."""
    td = tracks[uuid]
    m = re.match(r"^stream (\d+)( \(lane \d+\))?$", td.name)
    if not m or not td.parent_uuid:
        return None
    return tracks[td.parent_uuid].process.pid - DEVICE_PID_BASE, int(m.group(1))


def _child(tracks: dict, device: int, name: str) -> int | None:
    for u, td in tracks.items():
        if td.name == name and td.parent_uuid and tracks[td.parent_uuid].process.pid == DEVICE_PID_BASE + device:
            return u
    return None


def _integral(points: list[tuple[int, int]], at_least: int) -> int:
    ts = np.array([p[0] for p in points], np.int64)
    v = np.array([p[1] for p in points], np.int64)
    return int(((ts[1:] - ts[:-1]) * (v[:-1] >= at_least)).sum())


def check_roundtrip(trace, report, path: Path) -> dict:
    """Assert the .pftrace at ``path`` holds ``trace`` exactly; return the replay."""
    r = replay(path)
    tracks, sl = r["tracks"], r["slices"]
    dev = sl[sl["kind"].notna()]
    where = [_track_of(tracks, u) for u in dev["track"]]
    assert all(w is not None for w in where)
    got = pd.DataFrame({"device": [w[0] for w in where], "stream": [w[1] for w in where], "name": dev["name"].to_numpy(),
                        "start_ns": dev["start"].to_numpy(np.int64), "end_ns": dev["end"].to_numpy(np.int64),
                        "correlation": dev["correlation"].fillna(-1).to_numpy(np.int64),
                        "a_device": dev["device"].to_numpy(np.int64), "a_stream": dev["stream"].to_numpy(np.int64)})
    assert (got["device"] == got["a_device"]).all() and (got["stream"] == got["a_stream"]).all()
    ev = trace.device_events
    want = pd.DataFrame({"device": ev["device"], "stream": ev["stream"], "name": ev["name"].astype(str), "start_ns": ev["start_ns"],
                         "end_ns": ev["end_ns"], "correlation": ev["correlation"]})
    key = ["device", "stream", "start_ns", "end_ns", "correlation", "name"]
    a = got[key].sort_values(key).reset_index(drop=True)
    b = want[key].sort_values(key).reset_index(drop=True)
    assert len(a) == len(ev), "every device event became exactly one slice"
    pd.testing.assert_frame_equal(a, b, check_dtype=False)
    assert sl["cat"].notna().sum() == len(trace.host_events)

    # the derived overlap track sums to the report's copy/compute overlap ('all' row)
    co = report.copy_overlap
    for row in (co[co["direction"] == "all"].itertuples() if not co.empty else []):
        u = _child(tracks, row.device, "overlap")
        ov = sl[sl["track"] == u]
        assert (ov["end"] - ov["start"]).sum() == row.overlapped_ns
    # the time breakdown track: each part's slices sum to that part of the breakdown, and they never overlap
    bd = gpu_breakdown(trace)
    for row in bd.itertuples():
        u = _child(tracks, row.device, BREAKDOWN_TRACK)
        b = sl[sl["track"] == u].sort_values("start")
        assert (b["start"].to_numpy()[1:] >= b["end"].to_numpy()[:-1]).all()
        def part_ns(part: str, b: pd.DataFrame = b) -> int:
            x = b[b["name"] == f"{BREAKDOWN_TRACK}: {part}"]
            return int((x["end"] - x["start"]).sum())

        assert part_ns("exposed comm") + part_ns("bubble") == row.exposed_comm_ns
        for part, col in (("exposed copy", "exposed_copy_ns"), ("other", "other_ns"), ("set aside", "set_aside_ns")):
            assert part_ns(part) == getattr(row, col), (part, row.device)
        # the idle slices, one per cause, sum to the idle time; sync is idle_sync_ns
        assert sum(part_ns(p) for p in BREAKDOWN_SLICES if p.startswith("idle: ")) == row.idle_ns
        assert part_ns("idle: sync") == row.idle_sync_ns
    # counters agree with the concurrency figures
    dc = report.devices
    busy_dev = [u for u, td in tracks.items() if td.name == "busy devices"]
    if dc.device_count:
        pts = r["counters"][busy_dev[0]]
        assert _integral(pts, 1) == dc.any_busy_ns and _integral(pts, 2) == dc.concurrent_ns
    for row in report.stream_concurrency.itertuples():
        pts = r["counters"][_child(tracks, row.device, "busy streams")]
        assert _integral(pts, 1) == row.busy_ns and _integral(pts, 2) == row.multi_stream_ns
    # verdicts span the window
    vt = [u for u, td in tracks.items() if td.name == "traceprobe verdicts"]
    vs = sl[sl["track"] == vt[0]] if vt else sl.iloc[:0]
    assert len(vs) == len(report.verdicts)
    assert set(vs["text"]) == {v.text for v in report.verdicts}
    lo, hi = report.window_ns
    if hi <= lo:  # a CPU-only trace: the verdicts span its host events
        lo, hi = trace.host_events["start_ns"].min(), trace.host_events["end_ns"].max()
    assert ((vs["start"] == lo) & (vs["end"] == hi)).all()
    # flows: one launch, one device event, same correlation id
    for fid, outs in r["flows_out"].items():
        ins = r["flows_in"][fid]
        assert len(outs) == 1 and len(ins) == 1 and outs[0]["correlation"] == ins[0]["correlation"] == fid
        assert outs[0]["cat"] in ("cuda_runtime", "cuda_driver") and "kind" in ins[0]
    return r


@pytest.mark.parametrize("path", sweep(SAMPLE_FILES, ids=lambda p: p.name.split(".pt.")[0]))  # (a few by default, all under slow)
def test_samples_roundtrip(path, tmp_path):
    trace = load_trace(path)
    report = overlap_report(trace, all_device_work=True)  # the timeline draws every device event
    out = pf.write_perfetto(trace, tmp_path / "t.pftrace", report)
    r = check_roundtrip(trace, report, tmp_path / "t.pftrace")
    assert out.device_slices == len(trace.device_events) and out.flows == len(r["flows_out"])
    if "compute-copy" in path.name or "multi-gpu" in path.name:
        assert out.flows == len(trace.device_events)  # every kernel and copy has its launch


def test_cli_export_perfetto_done_when(tmp_path):
    """The issue's acceptance: export of compute-copy.overlapped, accepted by the round trip."""
    res = CliRunner().invoke(app, ["export", str(OVERLAPPED), "--perfetto", "--out-dir", str(tmp_path)])
    assert res.exit_code == 0, res.output
    out = tmp_path / "compute-copy.overlapped.pftrace"
    assert out.is_file() and str(out) in res.output.replace("\n", "")
    trace = load_trace(OVERLAPPED)
    report = overlap_report(trace)
    r = check_roundtrip(trace, report, out)
    ov = r["slices"][r["slices"]["track"] == _child(r["tracks"], 0, "overlap")]
    expected = report.copy_overlap.query("direction == 'all'")["overlapped_ns"].iloc[0]
    assert expected > 50_000_000  # 98% of ~58 ms of copies in the real recording
    assert (ov["end"] - ov["start"]).sum() == expected


def _crossing_trace(tmp_path: Path):
    """SYNTHETIC: kernels that overlap their stream's previous kernel (as with programmatic
    dependent launch), a copy under them, and host ops that cross without nesting."""
    b = TraceBuilder("crossing slices", base_ns=10**12)
    for i in range(6):
        b.kernel(0, 7, 1000 + i * 1000, 1005, correlation=100 + i)  # each overlaps the next by 5 ns
        b.runtime(500 + i * 1000, 100, correlation=100 + i)
    b.kernel(0, 7, 2500, 0)  # zero-length, inside the chain
    b.memcpy(0, 20, 1500, 2000, direction="DtoH")
    b.memcpy(0, 20, 3500, 0, direction="DtoH")
    b.cpu_op(0, 3000, name="outer")
    b.cpu_op(2000, 3000, name="crosses outer")
    b.cpu_op(100, 200, name="inside outer")
    return load_trace(b.write(tmp_path / "crossing.json"))


def test_crossing_slices_go_to_lanes(tmp_path):
    trace = _crossing_trace(tmp_path)
    report = overlap_report(trace, all_device_work=True)  # the copies have no launch; the timeline draws them
    out = pf.write_perfetto(trace, tmp_path / "c.pftrace", report)
    assert out.split == 3 + 1  # kernels 1, 3, 5 and the crossing cpu op
    r = check_roundtrip(trace, report, tmp_path / "c.pftrace")
    lanes = {td.name for td in r["tracks"].values()}
    assert {"stream 7", "stream 7 (lane 1)", "stream 20"} <= lanes


def test_chunked_writing_is_byte_identical(tmp_path):
    trace = load_trace(OVERLAPPED)
    report = overlap_report(trace)
    a = pf.write_perfetto(trace, tmp_path / "a.pftrace", report, chunk_packets=7)
    b = pf.write_perfetto(trace, tmp_path / "b.pftrace", report, chunk_packets=10**9)
    assert a.packets == b.packets > 1000
    assert (tmp_path / "a.pftrace").read_bytes() == (tmp_path / "b.pftrace").read_bytes()
    pf.write_perfetto(trace, tmp_path / "c.pftrace.gz", report)
    assert gzip.decompress((tmp_path / "c.pftrace.gz").read_bytes()) == (tmp_path / "a.pftrace").read_bytes()


def test_assign_lanes_nest_properly():
    rng = np.random.default_rng(3)
    for _ in range(300):
        n = int(rng.integers(0, 14))
        k, s = rng.integers(0, 3, n), rng.integers(0, 20, n)
        e = s + rng.choice([0, 1, 2, 3, 5, 8, 20], n)
        for nest in (True, False):
            lane = assign_lanes(k, s, e, nest)
            for i in range(n):
                for j in range(i + 1, n):
                    if k[i] != k[j] or lane[i] != lane[j] or not (s[i] < e[j] and s[j] < e[i]):
                        continue
                    assert nest and ((s[i] <= s[j] and e[j] <= e[i]) or (s[j] <= s[i] and e[i] <= e[j]))
    # a long chain of 1-ns overlaps needs two lanes, not one per slice
    s = np.arange(10_000) * 10
    assert assign_lanes(np.zeros(10_000, np.int64), s, s + 11).max() == 1


# --- Chrome JSON -----------------------------------------------------------------


def _no_crossing(doc: dict) -> None:
    by = defaultdict(list)
    for e in doc["traceEvents"]:
        if e["ph"] == "X":
            s = int(e["ts"] * 1000)
            by[(e["pid"], e["tid"])].append((s, s + int(e["dur"] * 1000)))
    for spans in by.values():
        spans.sort(key=lambda x: (x[0], -x[1]))
        open_ends: list[int] = []
        for s, e in spans:
            while open_ends and open_ends[-1] <= s and not (open_ends[-1] == s == e):
                open_ends.pop()
            assert not open_ends or e <= open_ends[-1], "slices on one track overlap without nesting"
            open_ends.append(e)


@pytest.mark.parametrize("path", sweep(SAMPLE_FILES, ids=lambda p: p.name.split(".pt.")[0]))  # (a few by default, all under slow)
def test_chrome_json_samples(path, tmp_path):
    trace = load_trace(path)
    out = write_chrome_json(trace, tmp_path / "x.json.gz")
    assert out.split == 0 and out.slices == len(trace.device_events) + len(trace.host_events)
    back = load_trace(tmp_path / "x.json.gz")
    cols = ["device", "stream", "kind", "start_ns", "end_ns", "bytes", "correlation", "direction", "is_comm"]
    pd.testing.assert_frame_equal(back.device_events[cols], trace.device_events[cols], check_categorical=False)
    assert len(back.host_events) == len(trace.host_events)
    _no_crossing(json.loads(gzip.decompress((tmp_path / "x.json.gz").read_bytes()), parse_float=Decimal))


def test_chrome_json_splits_crossing(tmp_path):
    trace = _crossing_trace(tmp_path)
    out = write_chrome_json(trace, tmp_path / "x.json")
    assert out.split == 4 and out.split_tracks == 2
    doc = json.loads((tmp_path / "x.json").read_text(), parse_float=Decimal)
    _no_crossing(doc)
    assert any("lane 1" in e["args"].get("name", "") for e in doc["traceEvents"] if e["ph"] == "M")
    back = load_trace(tmp_path / "x.json")
    assert (back.device_events["start_ns"].to_numpy() == trace.device_events["start_ns"].to_numpy()).all()
    res = CliRunner().invoke(app, ["export", str(tmp_path / "crossing.json"), "--json", "--out-dir", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    assert "4 slice" in res.output


# --- SQL engine ------------------------------------------------------------------


def _sqlite_from_replay(r: dict) -> sqlite3.Connection:
    """The replayed slices as trace_processor's ``slice`` table, with EXTRACT_ARG (SQLite)."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE slice (ts INT, dur INT, name TEXT, arg_set_id INT)")
    args = {}
    for i, rec in enumerate(r["slices"].to_dict(orient="records")):
        args[i] = {f"debug.{k}": v for k, v in rec.items() if k not in ("track", "start", "end", "name") and pd.notna(v)}
        db.execute("INSERT INTO slice VALUES (?, ?, ?, ?)", (rec["start"], rec["end"] - rec["start"], rec["name"], i))
    db.create_function("EXTRACT_ARG", 2, lambda a, k: args.get(a, {}).get(k))
    return db


@pytest.mark.parametrize("name", ["compute-copy.overlapped", "multi-gpu.concurrent", "compute-copy.sequential"])
def test_sql_matches_native_on_sqlite(name, tmp_path):
    """The engine's SQL, run by SQLite over the replayed slices, gives the native figures."""
    trace = load_trace(SAMPLES / f"{name}.pt.trace.json.gz")
    report = overlap_report(trace)
    pf.write_perfetto(trace, tmp_path / "t.pftrace", report)
    db = _sqlite_from_replay(replay(tmp_path / "t.pftrace"))
    copy = pd.read_sql_query(perfetto_sql.COPY_SQL, db)
    native = report.copy_overlap
    assert len(copy) == len(native)
    if len(native):
        m = native.merge(copy, on=["device", "direction"], suffixes=("", "_sql"))
        assert (m["copy_ns"] == m["copy_ns_sql"]).all() and (m["overlapped_ns"] == m["overlapped_ns_sql"]).all()
    dev = pd.read_sql_query(perfetto_sql.DEVICE_SQL, db).iloc[0]
    assert (dev["any_busy_ns"], dev["concurrent_ns"], dev["device_count"]) == (
        report.devices.any_busy_ns, report.devices.concurrent_ns, report.devices.device_count)


def _binary():
    try:
        return perfetto_sql.find_trace_processor()
    except FileNotFoundError:
        return None


@pytest.mark.skipif(_binary() is None, reason="no trace_processor_shell (set TRACEPROBE_TRACE_PROCESSOR)")
@pytest.mark.parametrize("name", ["compute-copy.overlapped", "multi-gpu.concurrent"])
def test_engines_agree(name):
    trace = load_trace(SAMPLES / f"{name}.pt.trace.json.gz")
    report = overlap_report(trace)
    sql = perfetto_sql.sql_figures(trace, _binary())
    m = report.copy_overlap.merge(sql.copy_overlap, on=["device", "direction"], suffixes=("", "_sql"))
    assert len(m) == len(report.copy_overlap) == len(sql.copy_overlap)
    assert (m["overlapped_ns"] == m["overlapped_ns_sql"]).all() and (m["copy_ns"] == m["copy_ns_sql"]).all()
    assert (sql.any_busy_ns, sql.concurrent_ns) == (report.devices.any_busy_ns, report.devices.concurrent_ns)


EFFICIENCY = SAMPLES / "efficiency"


def test_achieved_tflops_and_claims_roundtrip(tmp_path):
    """export --perfetto of sample_traces/efficiency/attention-slow (real, H100, shapes recorded): the device's
    ``achieved TFLOP/s`` counter integrates to the FLOPs of its modelled ops (forward and backward), and the ``traceprobe
    claims`` track holds the window's claim in the words of the JSON document's ``top_claims`` (its action, figure and
    gain beside it), over the window; the rest reads back as before. A trace without shapes has no TFLOP/s counter."""
    from traceprobe.analysis.work.efficiency import kernel_efficiency

    folder = EFFICIENCY / "attention-slow"
    res = CliRunner().invoke(app, ["export", str(folder), "--perfetto", "--out-dir", str(tmp_path), "--jobs", "1"])
    assert res.exit_code == 0, res.output
    (out,) = tmp_path.glob("*.pftrace")
    src = next(folder.glob("*.json.gz"))
    trace = load_trace(src)
    r = check_roundtrip(trace, overlap_report(trace, all_device_work=True), out)  # (the timeline draws every device event)
    report = overlap_report(trace)  # (the window the claims are over: the report's, as the command's)
    (tf,) = [u for u, td in r["tracks"].items() if td.name == TFLOPS_TRACK]
    assert r["tracks"][tf].counter.unit_name == "TFLOP/s"
    pts = r["counters"][tf]
    ts, v = np.array([p[0] for p in pts], np.int64), np.array([p[1] for p in pts], np.float64)
    flops = int(kernel_efficiency(trace).classes["flops"].sum())
    assert (np.diff(ts) * v[:-1]).sum() * 1e3 == pytest.approx(flops, rel=1e-9) and v[-1] == 0
    doc = json.loads(CliRunner().invoke(app, ["overlap-report", str(folder), "--format", "json", "--jobs", "1"]).stdout)
    (want,) = doc["top_claims"]
    (ct,) = [u for u, td in r["tracks"].items() if td.name == CLAIMS_TRACK]
    claims = r["slices"][r["slices"]["track"] == ct]
    assert claims["name"].tolist() == [want["claim"]] and claims["do"].tolist() == [want["do"]]
    assert claims["gain_ns"].tolist() == [want["gain_ns"]] and claims["rank"].tolist() == [1]
    assert claims["value"].tolist() == pytest.approx([want["share"]])
    assert (claims["start"] == report.window_ns[0]).all() and (claims["end"] == report.window_ns[1]).all()
    plain = pf.write_perfetto(load_trace(OVERLAPPED), tmp_path / "plain.pftrace", None)
    assert not [td for td in replay(Path(plain.path))["tracks"].values() if td.name == TFLOPS_TRACK]


def test_claims_written_with_the_trace_or_added_later_are_the_same(tmp_path):
    """SYNTHETIC claims on compute-copy.overlapped: given to write_perfetto, or added to the written file later
    (add_claims, as ``export`` does once the run is analysed), plain or gzipped: the same trace; two claims ranked, the
    first outermost."""
    from traceprobe.report.actions import Top
    from traceprobe.report.perfetto_claims import add_claims

    trace = load_trace(OVERLAPPED)
    report = overlap_report(trace)
    claims = [Top("exposed copies -1.0 ms/step", "pin the buffer", True, "exposed copies", "-1.0 ms/step", 3e6, 0.25),
              Top("syncs -0.5 ms/step", "drop the syncs", True, "syncs", "-0.5 ms/step", 1.5e6, 0.125)]
    for name in ("t.pftrace", "t.pftrace.gz"):
        pf.write_perfetto(trace, tmp_path / f"with.{name}", report, claims=claims)
        pf.write_perfetto(trace, tmp_path / f"later.{name}", report)
        assert add_claims(tmp_path / f"later.{name}", claims, report.window_ns) == 2
        a, b = replay(tmp_path / f"with.{name}"), replay(tmp_path / f"later.{name}")
        pd.testing.assert_frame_equal(a["slices"], b["slices"])
        (ct,) = [u for u, td in a["tracks"].items() if td.name == CLAIMS_TRACK]
        got = a["slices"][a["slices"]["track"] == ct]
        assert got["rank"].tolist() == [2, 1]  # (closed innermost first: the first claim holds the second)
        assert got.sort_values("rank")["name"].tolist() == [c.label for c in claims]
    assert (tmp_path / "with.t.pftrace").read_bytes() == (tmp_path / "later.t.pftrace").read_bytes()
