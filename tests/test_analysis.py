"""traceprobe.load_trace and traceprobe.analysis on SYNTHETIC traces.

Every trace here is built by :mod:`synthetic` (hand-written events, nothing
recorded on a GPU) and every expected figure is computed by hand in the comments,
or, for the hypothesis test at the end, by painting boolean grids from the same
event list.
"""

from __future__ import annotations

import gzip
import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from synthetic import BASE, NCCL_ALLREDUCE, SYNTHETIC_PREFIX, TraceBuilder, load, rows, write_trace

from traceprobe import TraceFormatError, analysis, load_trace, overlap_report

# --- load_trace ------------------------------------------------------------------

DEVICE_COLUMNS = ["device", "stream", "kind", "name", "start_ns", "end_ns", "bytes", "correlation",
                  "direction", "src_kind", "dst_kind", "is_comm"]
HOST_COLUMNS = ["pid", "tid", "cat", "name", "start_ns", "end_ns", "correlation", "external_id"]


def _kitchen_sink() -> TraceBuilder:
    b = TraceBuilder("load_trace columns", devices=2, rank=3, world_size=4)
    # the exact values from a real Kineto trace: ts 4526647612879.555 µs, dur 1.001 µs
    b.raw({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 4526647612879.555,
           "dur": 1.001, "args": {"device": 0, "stream": 7, "correlation": 42, "External id": 9}})
    b.memcpy(0, 24, BASE + 5_000, 2_000, "DtoH", "Device", "Pageable", nbytes=64_000_000, correlation=43)
    b.memcpy(1, 25, BASE + 4_000, 1_500, "HtoD", "Pinned", "Device", nbytes=1024, correlation=44)
    b.memcpy(1, 26, BASE + 3_000, 999, "DtoD", "Device", "Device", nbytes=8, correlation=45)
    b.memset(0, 7, BASE + 2_000, 10, nbytes=4096, correlation=46)
    b.nccl(1, 30, BASE + 1_000, 7_000, correlation=47)
    b.kernel(1, 31, BASE + 6_000, 1, name="Kernel_RcclSendRecv", correlation=48)
    b.kernel(1, 31, BASE + 6_500, 1, name="elementwise_kernel", correlation=49)
    # no args: device from pid, stream from tid
    b.raw({"ph": "X", "cat": "kernel", "name": "noargs", "pid": 1, "tid": 33, "ts": (BASE + 9_000) / 1000, "dur": 0.5})
    # host side, and events that are not device/host activity
    b.cpu_op(BASE + 100, 9_000, "aten::mm")
    b.runtime(BASE + 200, 50, "cudaLaunchKernel", correlation=42)
    b.host("cuda_driver", "cuLaunchKernel", BASE + 300, 5, pid=123, tid="worker")
    b.step(5, BASE, 10_000)
    b.raw({"ph": "f", "id": 42, "pid": 123, "tid": 123, "ts": BASE / 1000, "cat": "ac2g", "name": "ac2g", "bp": "e"})
    b.raw({"name": "process_name", "ph": "M", "ts": BASE / 1000, "pid": 123, "tid": 0, "args": {"name": "python3"}})
    b.raw({"ph": "X", "cat": "Trace", "ts": BASE / 1000, "dur": 20.0, "pid": "Spans", "tid": "PyTorch Profiler",
           "name": "PyTorch Profiler (0)", "args": {"Op count": 0}})
    return b


def test_load_trace_columns_dtypes_and_exact_ns(tmp_path):
    t = load(_kitchen_sink(), tmp_path)
    dev = t.device_events
    assert list(dev.columns) == DEVICE_COLUMNS
    for c in ("device", "stream", "start_ns", "end_ns", "bytes", "correlation"):
        assert dev[c].dtype == np.int64, c
    for c in ("kind", "name", "direction", "src_kind", "dst_kind"):
        assert isinstance(dev[c].dtype, pd.CategoricalDtype), c
    assert dev["is_comm"].dtype == bool
    assert len(dev) == 9
    assert (np.diff(dev["start_ns"].to_numpy()) >= 0).all()  # sorted by start

    first = dev.iloc[0]
    assert first["name"] == "gemm"
    assert first["start_ns"] == 4526647612879555  # exact, not 4526647612879554/6
    assert first["end_ns"] - first["start_ns"] == 1001  # dur 1.001 µs
    assert first["end_ns"] == 4526647612880556
    assert (first["device"], first["stream"], first["correlation"], first["bytes"]) == (0, 7, 42, -1)

    noargs = dev[dev["name"] == "noargs"].iloc[0]
    assert (noargs["device"], noargs["stream"], noargs["correlation"]) == (1, 33, -1)
    assert noargs["start_ns"] == BASE + 9_000 and noargs["end_ns"] == BASE + 9_500

    host = t.host_events
    assert list(host.columns) == HOST_COLUMNS
    for c in ("start_ns", "end_ns", "correlation", "external_id"):
        assert host[c].dtype == np.int64, c
    assert isinstance(host["cat"].dtype, pd.CategoricalDtype)
    # flow ('f'), metadata ('M') and the 'Trace' span are neither device nor host activity
    assert sorted(host["cat"].astype(str)) == ["cpu_op", "cuda_driver", "cuda_runtime", "user_annotation"]
    assert all(isinstance(x, str) for x in host["pid"].tolist() + host["tid"].tolist())
    drv = host[host["cat"] == "cuda_driver"].iloc[0]
    assert (drv["pid"], drv["tid"]) == ("123", "worker")
    rt = host[host["cat"] == "cuda_runtime"].iloc[0]
    assert rt["correlation"] == 42 and rt["start_ns"] == BASE + 200 and rt["end_ns"] == BASE + 250
    op = host[host["cat"] == "cpu_op"].iloc[0]
    assert op["correlation"] == -1 and op["external_id"] > 0

    assert t.metadata["traceName"].startswith(SYNTHETIC_PREFIX)
    assert t.metadata["distributedInfo"] == {"backend": "nccl", "rank": 3, "world_size": 4}
    assert t.metadata["schemaVersion"] == 1
    assert t.metadata["event_count"] == 16
    assert not t.metadata.get("warnings")
    assert t.rank == 3
    assert list(t.devices["id"]) == [0, 1]
    assert t.window_ns == (BASE, BASE + 9_500)
    assert rows(t.steps, ["step", "start_ns", "end_ns"]) == [(5, BASE, BASE + 10_000)]


def test_memcpy_parsing_and_is_comm(tmp_path):
    dev = load(_kitchen_sink(), tmp_path).device_events.set_index("correlation")
    assert dev.loc[43, "name"] == "Memcpy DtoH (Device -> Pageable)"
    parsed = {c: tuple(dev.loc[c, ["kind", "direction", "src_kind", "dst_kind", "bytes"]]) for c in (43, 44, 45)}
    assert parsed == {
        43: ("memcpy", "DtoH", "Device", "Pageable", 64_000_000),
        44: ("memcpy", "HtoD", "Pinned", "Device", 1024),
        45: ("memcpy", "DtoD", "Device", "Device", 8),
    }
    for c in (42, 46, 47):  # kernel, memset, nccl kernel: no copy direction
        assert dev.loc[c, ["direction", "src_kind", "dst_kind"]].isna().all()
    assert dev.loc[46, "kind"] == "memset" and dev.loc[46, "bytes"] == 4096
    comm = dev["is_comm"].to_dict()
    assert comm[47]  # ncclDevKernel_AllReduce_...
    assert comm[48]  # 'Rccl' in any case
    assert not comm[49] and not comm[42] and not comm[43] and not comm[46]
    assert dev.loc[47, "name"] == NCCL_ALLREDUCE


def test_memcpy_named_nccl_is_not_comm(tmp_path):
    b = TraceBuilder("a copy whose name mentions nccl is still a copy")
    b.memcpy(0, 7, 0, 10, name="Memcpy DtoD (Device -> Device) nccl")
    dev = load(b, tmp_path).device_events
    assert dev["kind"].tolist() == ["memcpy"] and not dev["is_comm"].any()
    assert dev["direction"].tolist() == ["DtoD"]


@pytest.mark.parametrize("name,gz", [("t.json", False), ("t.json.gz", True), ("gzipped-but-named.json", True)])
def test_json_and_gzip_give_the_same_trace(tmp_path, name, gz):
    b = _kitchen_sink()
    t = load_trace(b.write(tmp_path / name, gz=gz))
    ref = load_trace(b.write(tmp_path / "ref.json", gz=False))
    pd.testing.assert_frame_equal(t.device_events, ref.device_events)
    pd.testing.assert_frame_equal(t.host_events, ref.host_events)
    if gz:
        assert (tmp_path / name).read_bytes()[:2] == b"\x1f\x8b"


def test_written_file_is_kineto_shaped_and_marked_synthetic(tmp_path):
    b = TraceBuilder("shape", devices=1, rank=0, world_size=2)
    b.memcpy(0, 7, 1_000, 1_001, "HtoD")
    doc = json.loads(gzip.decompress(b.write(tmp_path / "x.json.gz").read_bytes()))
    assert doc["schemaVersion"] == 1 and doc["traceName"] == "synthetic: shape"
    assert doc["distributedInfo"] == {"backend": "nccl", "rank": 0, "world_size": 2}
    (ev,) = doc["traceEvents"]
    assert ev["ph"] == "X" and ev["cat"] == "gpu_memcpy" and ev["name"] == "Memcpy HtoD (Pinned -> Device)"
    assert (ev["pid"], ev["tid"], ev["ts"], ev["dur"]) == (0, 7, 1.0, 1.001)
    assert ev["args"]["device"] == 0 and ev["args"]["stream"] == 7 and "bytes" in ev["args"]
    p = write_trace({"traceEvents": [], "traceName": "x"}, tmp_path / "y.json")
    assert json.loads(p.read_text())["traceName"] == "synthetic: x"


def test_bad_traces_raise_trace_format_error(tmp_path):
    from traceprobe.reading.columns import MAX_TS_US

    b = TraceBuilder("absurd ts")
    b.raw({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": float(MAX_TS_US), "dur": 1.0})
    with pytest.raises(TraceFormatError):
        load(b, tmp_path, "a.json")
    b = TraceBuilder("negative dur")
    b.kernel(0, 7, 1_000, -5)
    with pytest.raises(TraceFormatError):
        load(b, tmp_path, "b.json")
    (tmp_path / "notjson.json").write_text("{nope")
    with pytest.raises(TraceFormatError):
        load_trace(tmp_path / "notjson.json")


def test_mixed_case_categories_load(tmp_path):
    # older torch wrote capitalised categories; one file holding both must still load
    b = TraceBuilder("Kernel and kernel in one file")
    b.kernel(0, 7, 0, 100)
    b.kernel(0, 7, 200, 100)["cat"] = "Kernel"
    b.cpu_op(0, 10)["cat"] = "Operator"
    b.cpu_op(20, 10)
    t = load(b, tmp_path)
    assert t.device_events["kind"].tolist() == ["kernel", "kernel"]
    assert t.host_events["cat"].tolist() == ["cpu_op", "cpu_op"]


# --- stream_busy -------------------------------------------------------------------


def test_stream_busy(tmp_path):
    b = TraceBuilder("stream busy", devices=2, base_ns=BASE)
    b.kernel(0, 7, 0, 10_000)  # stream 7: [0,10) ∪ [5,15) ∪ [20,30) µs = 25 µs
    b.kernel(0, 7, 5_000, 10_000)
    b.memcpy(0, 7, 20_000, 10_000, "HtoD")
    b.memset(0, 8, 0, 2_000)  # stream 8: 2 µs
    b.memset(0, 8, 0, 2_000)  # duplicate: counted once in time, twice in events
    b.kernel(1, 7, 10_000, 30_000)  # device 1: [10,40) µs; window is [0, 40) µs
    t = load(b, tmp_path)
    sb = analysis.stream_busy(t)
    assert list(sb.columns) == ["device", "stream", "busy_ns", "utilization", "events", "kernels", "memcpys", "memsets"]
    assert rows(sb, ["device", "stream", "busy_ns", "events", "kernels", "memcpys", "memsets"]) == [
        (0, 7, 25_000, 3, 2, 1, 0),
        (0, 8, 2_000, 2, 0, 0, 2),
        (1, 7, 30_000, 1, 1, 0, 0),
    ]
    np.testing.assert_allclose(sb["utilization"], [25 / 40, 2 / 40, 30 / 40])
    assert t.window_ns == (BASE, BASE + 40_000)


# --- copy_overlap --------------------------------------------------------------------


def test_copy_overlap_per_direction_and_all(tmp_path):
    b = TraceBuilder("copy overlap", devices=2)
    b.kernel(0, 7, 0, 100_000)  # compute on device 0: [0, 100) µs
    b.kernel(0, 9, 300_000, 20_000)  # compute [300, 320) µs
    b.memcpy(0, 8, 50_000, 100_000, "HtoD", nbytes=1000)  # [50,150): 50 under compute
    b.memcpy(0, 8, 60_000, 10_000, "HtoD", nbytes=500)  # nested in the first copy
    b.memcpy(0, 10, 200_000, 10_000, "DtoH", nbytes=2000)  # [200,210): under an NCCL kernel only
    b.nccl(0, 11, 190_000, 30_000)  # comm is not compute
    b.memcpy(0, 12, 310_000, 40_000, "DtoD", nbytes=-1)  # [310,350): 10 under compute; bytes -1 ignored
    b.memcpy(1, 8, 0, 10_000, "PtoP", nbytes=7)  # device 1: no compute at all
    b.kernel(1, 9, 500_000, 1_000, name=NCCL_ALLREDUCE)
    t = load(b, tmp_path)
    co = analysis.copy_overlap(t)
    assert list(co.columns) == ["device", "direction", "copies", "bytes", "copy_ns", "overlapped_ns", "fraction"]
    got = rows(co, ["device", "direction", "copies", "bytes", "copy_ns", "overlapped_ns"])
    assert got == [
        (0, "HtoD", 2, 1500, 100_000, 50_000),
        (0, "DtoH", 1, 2000, 10_000, 0),
        (0, "DtoD", 1, 0, 40_000, 10_000),
        # all copies of device 0: [50,150) ∪ [200,210) ∪ [310,350) = 150 µs; 50 + 10 under compute
        (0, "all", 4, 3500, 150_000, 60_000),
        (1, "PtoP", 1, 7, 10_000, 0),
        (1, "all", 1, 7, 10_000, 0),
    ]
    np.testing.assert_allclose(co["fraction"], [0.5, 0.0, 0.25, 0.4, 0.0, 0.0])


def test_copy_overlap_without_copies_is_empty(tmp_path):
    b = TraceBuilder("no copies")
    b.kernel(0, 7, 0, 100)
    co = analysis.copy_overlap(load(b, tmp_path))
    assert co.empty
    assert list(co.columns) == ["device", "direction", "copies", "bytes", "copy_ns", "overlapped_ns", "fraction"]


# --- device_concurrency / stream_concurrency ------------------------------------------


def test_device_concurrency(tmp_path):
    b = TraceBuilder("two devices", devices=2)
    b.kernel(0, 7, 0, 60_000)  # device 0: [0,100) µs from two streams
    b.memcpy(0, 8, 40_000, 60_000, "HtoD")
    b.kernel(1, 7, 50_000, 150_000)  # device 1: [50,200) µs
    t = load(b, tmp_path)
    dc = analysis.device_concurrency(t)
    assert isinstance(dc, analysis.DeviceConcurrency)
    # any busy [0,200) = 200 µs; two busy [50,100) = 50 µs
    assert (dc.any_busy_ns, dc.concurrent_ns, dc.device_count) == (200_000, 50_000, 2)
    assert dc.concurrency == pytest.approx(0.25)
    assert list(dc.devices.columns) == ["device", "busy_ns", "utilization", "idle_ns", "concurrent_ns", "concurrency"]
    assert rows(dc.devices, ["device", "busy_ns", "idle_ns", "concurrent_ns"]) == [
        (0, 100_000, 100_000, 50_000),
        (1, 150_000, 50_000, 50_000),
    ]
    np.testing.assert_allclose(dc.devices["utilization"], [0.5, 0.75])
    np.testing.assert_allclose(dc.devices["concurrency"], [0.5, 1 / 3])


def test_device_concurrency_single_device_and_sequential(tmp_path):
    b = TraceBuilder("one device")
    b.kernel(0, 7, 0, 1_000)
    dc = analysis.device_concurrency(load(b, tmp_path, "a.json"))
    assert (dc.any_busy_ns, dc.concurrent_ns, dc.device_count) == (1_000, 0, 1)
    assert dc.concurrency == 0.0
    b = TraceBuilder("two devices, one after the other (touching)", devices=2)
    b.kernel(0, 7, 0, 1_000)
    b.kernel(1, 7, 1_000, 1_000)
    dc = analysis.device_concurrency(load(b, tmp_path, "b.json"))
    assert (dc.any_busy_ns, dc.concurrent_ns, dc.concurrency) == (2_000, 0, 0.0)


def test_stream_concurrency(tmp_path):
    b = TraceBuilder("streams", devices=2)
    b.kernel(0, 7, 0, 100_000)  # device 0, stream 7: kernel [0,100)
    b.memcpy(0, 8, 50_000, 100_000, "HtoD")  # stream 8: copy [50,150)
    b.kernel(0, 9, 90_000, 30_000)  # stream 9: kernel [90,120)
    b.kernel(1, 7, 0, 10_000)  # device 1: one stream
    t = load(b, tmp_path)
    sc = analysis.stream_concurrency(t)
    assert list(sc.columns) == ["device", "streams", "busy_ns", "multi_stream_ns", "concurrency",
                                "kernel_busy_ns", "multi_stream_kernel_ns", "kernel_concurrency", "side_busy_ns", "side_concurrency"]
    # device 0: busy [0,150)=150; 2+ streams [50,120)=70; kernels busy [0,120)=120, 2+ kernel streams [90,100)=10
    assert rows(sc, ["device", "streams", "busy_ns", "multi_stream_ns", "kernel_busy_ns", "multi_stream_kernel_ns"]) == [
        (0, 3, 150_000, 70_000, 120_000, 10_000),
        (1, 1, 10_000, 0, 10_000, 0),
    ]
    np.testing.assert_allclose(sc["concurrency"], [70 / 150, 0.0])
    np.testing.assert_allclose(sc["kernel_concurrency"], [10 / 120, 0.0])
    # busiest stream of device 0: 7 and 8 both 100 µs, the lower id wins; side streams 8, 9: [50,150) = 100
    assert sc["side_busy_ns"].tolist() == [100_000, 0]
    assert sc["side_concurrency"].iloc[0] == pytest.approx(0.7) and math.isnan(sc["side_concurrency"].iloc[1])


# --- comm_overlap ------------------------------------------------------------------


def test_comm_overlap(tmp_path):
    b = TraceBuilder("comm overlap", devices=2, rank=1, world_size=2)
    b.nccl(0, 20, 0, 100_000)  # comm [0,100) µs
    b.kernel(0, 7, 50_000, 30_000)  # compute [50,80)
    b.kernel(0, 7, 90_000, 60_000)  # compute [90,150): 10 under comm
    b.memcpy(0, 8, 0, 100_000, "DtoD")  # copies are not compute
    b.nccl(0, 21, 20_000, 10_000, name="ncclDevKernel_Broadcast_RING_LL(ncclDevKernelArgsStorage<4096ul>)")
    b.kernel(1, 7, 0, 100_000)  # device 1: compute only -> no row
    t = load(b, tmp_path)
    cm = analysis.comm_overlap(t)
    assert list(cm.columns) == ["device", "rank", "comm_kernels", "comm_ns", "overlapped_ns", "fraction"]
    assert rows(cm, ["device", "rank", "comm_kernels", "comm_ns", "overlapped_ns"]) == [(0, 1, 2, 100_000, 40_000)]
    assert cm["fraction"].tolist() == pytest.approx([0.4])
    assert str(cm["rank"].dtype) == "Int64"


def test_comm_overlap_without_rank_or_comm(tmp_path):
    b = TraceBuilder("comm without distributedInfo")
    b.nccl(0, 20, 0, 100)
    cm = analysis.comm_overlap(load(b, tmp_path, "a.json"))
    assert len(cm) == 1 and pd.isna(cm["rank"].iloc[0]) and cm["overlapped_ns"].iloc[0] == 0
    b = TraceBuilder("no comm")
    b.kernel(0, 7, 0, 100)
    assert analysis.comm_overlap(load(b, tmp_path, "b.json")).empty


# --- cpu_gpu_overlap -----------------------------------------------------------------


def test_cpu_gpu_overlap(tmp_path):
    b = TraceBuilder("cpu/gpu overlap", base_ns=BASE)
    # op A [0,50) µs launches a kernel: NOT host compute
    b.cpu_op(0, 50_000, "aten::mm")
    b.runtime(10_000, 5_000, "cudaLaunchKernel")
    # op B [60,100) µs has no runtime call inside on its thread: host compute (40 µs)
    b.cpu_op(60_000, 40_000, "aten::sort")
    b.runtime(65_000, 1_000, "cudaMemcpyAsync", tid=456)  # another thread: does not count for B
    # parent P [200,300) with a launching child C and a pure child D [250,290)
    b.cpu_op(200_000, 100_000, "aten::linear")
    b.cpu_op(210_000, 10_000, "aten::addmm")
    b.host("cuda_driver", "cuLaunchKernel", 212_000, 1_000)  # driver calls count as runtime calls
    b.cpu_op(250_000, 40_000, "aten::topk")
    # op E [400,420): a runtime call starting exactly at its end is outside it (half-open)
    b.cpu_op(400_000, 20_000, "aten::nonzero")
    b.runtime(420_000, 1_000, "cudaStreamSynchronize")
    b.annotation("my_region", 500_000, 50_000)  # annotations are not host compute
    # device busy [70,200) ∪ [280,410) µs (two devices)
    b.kernel(0, 7, 70_000, 130_000)
    b.kernel(1, 7, 280_000, 130_000)
    t = load(b, tmp_path)
    cg = analysis.cpu_gpu_overlap(t)
    assert isinstance(cg, analysis.CpuGpuOverlap)
    # host compute: B [60,100) + D [250,290) + E [400,420) = 40 + 40 + 20 = 100 µs
    # overlap with device: [70,100) + [280,290) + [400,410) = 30 + 10 + 10 = 50 µs
    assert (cg.host_compute_ns, cg.device_busy_ns, cg.overlapped_ns) == (100_000, 260_000, 50_000)
    assert cg.fraction == pytest.approx(0.5)
    assert cg.fraction_of_device == pytest.approx(50 / 260)


def test_cpu_gpu_overlap_without_host_compute(tmp_path):
    b = TraceBuilder("only launching ops")
    b.cpu_op(0, 50_000)
    b.runtime(0, 5_000)  # starting exactly at the op's start counts as inside
    b.kernel(0, 7, 0, 100_000)
    cg = analysis.cpu_gpu_overlap(load(b, tmp_path))
    assert (cg.host_compute_ns, cg.device_busy_ns, cg.overlapped_ns) == (0, 100_000, 0)
    assert math.isnan(cg.fraction) and cg.fraction_of_device == 0.0


# --- zero-length events ----------------------------------------------------------------


def test_zero_length_device_events(tmp_path):
    # a zero-length kernel is an event but no busy time (it once crashed device_intervals)
    b = TraceBuilder("a zero-length compute kernel beside a copy", devices=2)
    b.kernel(0, 7, 0, 0)
    b.memcpy(0, 8, 0, 100, "HtoD")
    b.nccl(1, 9, 50, 0)
    t = load(b, tmp_path)
    r = overlap_report(t)
    assert r.devices.any_busy_ns == 100 and r.devices.device_count == 2
    assert rows(r.copy_overlap, ["device", "direction", "copy_ns", "overlapped_ns"]) == [(0, "HtoD", 100, 0), (0, "all", 100, 0)]
    assert rows(r.comm_overlap, ["device", "comm_kernels", "comm_ns", "overlapped_ns"]) == [(1, 1, 0, 0)]
    assert math.isnan(r.comm_overlap["fraction"].iloc[0])
    assert rows(r.streams, ["device", "stream", "busy_ns", "events"]) == [(0, 7, 0, 1), (0, 8, 100, 1), (1, 9, 0, 1)]
    # the 100 ns copy is under the verdicts' 50 µs floor: named in a note, no verdict
    assert [v for v in r.verdicts if v.figure == "copy_overlap"] == []
    assert any(n.startswith("1 HtoD copies on cuda:0") and "under the floor" in n for n in r.notes)


# --- random traces against brute-force grids -----------------------------------------------

SPAN = 400
KINDS = ("kernel", "nccl", "HtoD", "DtoH", "DtoD", "memset")
BASES = (0, BASE, 8_796_093_022_207_000 - SPAN)  # the last: just under 2**43 µs

event_st = st.tuples(
    st.integers(0, 2),  # device
    st.sampled_from([7, 8, 9]),  # stream
    st.sampled_from(KINDS),
    st.integers(0, 299),  # start, ns
    st.integers(0, 100),  # dur, ns (zero-length events included)
)
host_st = st.tuples(
    st.sampled_from(["cpu_op", "cpu_op", "cuda_runtime"]),
    st.sampled_from([1, 2]),  # tid
    st.integers(0, 299),
    st.integers(0, 100),
)


def _paint(iv_list) -> np.ndarray:
    g = np.zeros(SPAN, dtype=bool)
    for s, e in iv_list:
        g[s:e] = True
    return g


@pytest.fixture(scope="module")
def hyp_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("hyp")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(event_st, min_size=1, max_size=25),
    st.lists(host_st, max_size=8),
    st.sampled_from(BASES),
    st.booleans(),
)
def test_random_traces_against_grids(hyp_dir, events, host, base, gz):
    b = TraceBuilder("random", devices=3, base_ns=base)
    for dev, stream, kind, s, d in events:
        if kind == "kernel":
            b.kernel(dev, stream, s, d)
        elif kind == "nccl":
            b.nccl(dev, stream, s, d)
        elif kind == "memset":
            b.memset(dev, stream, s, d)
        else:
            b.memcpy(dev, stream, s, d, kind, nbytes=s + d)
    for cat, tid, s, d in host:
        b.host(cat, "aten::op" if cat == "cpu_op" else "cudaLaunchKernel", s, d, tid=tid)
    t = load_trace(b.write(hyp_dir / ("r.json.gz" if gz else "r.json")))

    # exact ns round trip through float µs
    dev_ev = t.device_events
    assert sorted(zip(dev_ev["start_ns"].tolist(), dev_ev["end_ns"].tolist())) == sorted(
        (base + s, base + s + d) for _, _, _, s, d in events
    )

    def on(dev, pred):
        return [(s, s + d) for dv, st_, k, s, d in events if dv == dev and pred(st_, k)]

    devices = sorted({e[0] for e in events})
    busy = {d: _paint(on(d, lambda st_, k: True)) for d in devices}
    compute = {d: _paint(on(d, lambda st_, k: k == "kernel")) for d in devices}

    # copy_overlap
    co = analysis.copy_overlap(t)
    exp = []
    for d in devices:
        copies = [e for e in events if e[0] == d and e[2] in ("HtoD", "DtoH", "DtoD")]
        if not copies:
            continue
        for direction in ("HtoD", "DtoH", "DtoD", "all"):
            sel = [e for e in copies if direction in ("all", e[2])]
            if not sel:
                continue
            g = _paint([(s, s + du) for *_, s, du in sel])
            exp.append((d, direction, len(sel), sum(s + du for *_, s, du in sel), int(g.sum()), int((g & compute[d]).sum())))
    got = rows(co, ["device", "direction", "copies", "bytes", "copy_ns", "overlapped_ns"]) if not co.empty else []
    assert got == exp
    for r, e in zip(co.itertuples(index=False), exp):
        if e[4]:
            assert r.fraction == pytest.approx(e[5] / e[4])
        else:
            assert math.isnan(r.fraction)

    # device_concurrency
    dc = analysis.device_concurrency(t)
    count = np.sum([busy[d].astype(int) for d in devices], axis=0)
    lo = min(s for *_, s, _ in events)
    hi = max(s + du for *_, s, du in events)
    assert dc.device_count == len(devices)
    assert dc.any_busy_ns == int((count >= 1).sum())
    assert dc.concurrent_ns == int((count >= 2).sum())
    if (count >= 1).any():
        assert dc.concurrency == pytest.approx((count >= 2).sum() / (count >= 1).sum())
    else:
        assert math.isnan(dc.concurrency)
    assert rows(dc.devices, ["device", "busy_ns", "idle_ns", "concurrent_ns"]) == [
        (d, int(busy[d].sum()), (hi - lo) - int(busy[d].sum()), int((busy[d] & (count >= 2)).sum())) for d in devices
    ]
    assert t.window_ns == (base + lo, base + hi)

    # stream_concurrency and stream_busy
    sc = analysis.stream_concurrency(t)
    exp_sc = []
    exp_sb = []
    n_streams: dict[int, set[int]] = {}
    for d in devices:
        streams = sorted({e[1] for e in events if e[0] == d})
        sg = [_paint(on(d, lambda st_, k, s0=s0: st_ == s0)) for s0 in streams]
        kg = [_paint(on(d, lambda st_, k, s0=s0: st_ == s0 and k in ("kernel", "nccl"))) for s0 in streams]
        kg = [g for g, s0 in zip(kg, streams) if any(e[0] == d and e[1] == s0 and e[2] in ("kernel", "nccl") for e in events)]
        c = np.sum([g.astype(int) for g in sg], axis=0)
        kc = np.sum([g.astype(int) for g in kg], axis=0) if kg else np.zeros(SPAN, int)
        busy_streams = [g for g in sg if g.any()]
        top = int(np.argmax([g.sum() for g in busy_streams])) if busy_streams else 0
        side = np.zeros(SPAN, bool)
        for i, g in enumerate(busy_streams):
            side |= g if i != top else False
        exp_sc.append((d, int((c >= 1).sum()), int((c >= 2).sum()), int((kc >= 1).sum()), int((kc >= 2).sum()), int(side.sum())))
        # 'streams' is documented as "streams with events", but a stream whose events all
        # have zero length is not counted (it has no busy intervals): accept either reading
        n_streams[d] = {len(streams), sum(1 for g in sg if g.any())}
        for s0, g in zip(streams, sg):
            exp_sb.append((d, s0, int(g.sum()), sum(1 for e in events if e[0] == d and e[1] == s0)))
    assert rows(sc, ["device", "busy_ns", "multi_stream_ns", "kernel_busy_ns", "multi_stream_kernel_ns", "side_busy_ns"]) == exp_sc
    for d, n in zip(sc["device"].tolist(), sc["streams"].tolist()):
        assert n in n_streams[d]
    assert rows(analysis.stream_busy(t), ["device", "stream", "busy_ns", "events"]) == exp_sb

    # comm_overlap
    cm = analysis.comm_overlap(t)
    exp_cm = []
    for d in devices:
        n = sum(1 for e in events if e[0] == d and e[2] == "nccl")
        if n:
            g = _paint(on(d, lambda st_, k: k == "nccl"))
            exp_cm.append((d, n, int(g.sum()), int((g & compute[d]).sum())))
    got_cm = rows(cm, ["device", "comm_kernels", "comm_ns", "overlapped_ns"]) if not cm.empty else []
    assert got_cm == exp_cm

    # cpu_gpu_overlap: an op is host compute when no runtime call on its thread starts inside it
    rts = [(tid, s) for cat, tid, s, d in host if cat == "cuda_runtime"]
    pure = [
        (s, s + d)
        for cat, tid, s, d in host
        if cat == "cpu_op" and not any(rt_tid == tid and s <= rs < s + d for rt_tid, rs in rts)
    ]
    hg = _paint(pure)
    gpu = count >= 1
    cg = analysis.cpu_gpu_overlap(t)
    assert (cg.host_compute_ns, cg.device_busy_ns, cg.overlapped_ns) == (int(hg.sum()), int(gpu.sum()), int((hg & gpu).sum()))
