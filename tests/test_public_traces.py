"""Real traces from public repositories (tests/data/public, sources in tests/data/README.md).

Each file loads and gets a report; then facts particular to each file are checked.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import traceprobe
from traceprobe import TraceFormatError, load_trace, overlap_report

DATA = Path(__file__).parent / "data" / "public"
FILES = sorted(p.name for p in DATA.glob("*.json"))  # (the gzipped one has its own test: tests/test_one_story.py)


def _raw(name: str) -> dict:
    data = (DATA / name).read_bytes()
    return json.loads(gzip.decompress(data) if name.endswith(".gz") else data)


def test_public_traces_present_and_small():
    assert {"hta_backward_thread.json", "kineto_after_fix_trace.json"} <= set(FILES)
    assert sum(p.stat().st_size for p in DATA.iterdir()) < 2 * 2**20


@pytest.mark.parametrize("name", FILES)
def test_loads_and_reports(name):
    trace = traceprobe.load_trace(DATA / name)
    report = traceprobe.overlap_report(trace)
    assert trace.metadata["event_count"] == len(_raw(name)["traceEvents"])
    assert trace.metadata["warnings"] == []
    assert report.window_ns == trace.window_ns
    assert not trace.device_events.empty


# --- facebookresearch/HolisticTraceAnalysis tests/data/call_stack/backward_thread.json ---


def test_hta_backward_thread_rank_and_shapes():
    name = "hta_backward_thread.json"
    trace = traceprobe.load_trace(DATA / name)
    report = traceprobe.overlap_report(trace)
    # rank from distributedInfo, in the trace and in the report
    assert trace.rank == 0 and report.rank == 0
    # no deviceProperties in this excerpt
    assert trace.devices.empty
    # record_shapes args ("Input Dims") are in the file and do not disturb the loader
    raw_mm = [e for e in _raw(name)["traceEvents"] if e["name"] == "aten::mm"]
    assert raw_mm[0]["args"]["Input Dims"] == [[2048, 2048], [2048, 256]]
    host = trace.host_events
    assert (host["cat"] == "cpu_op").sum() == 3
    assert (host["cat"] == "user_annotation").sum() == 2
    # the backward thread is its own tid
    assert set(host.loc[host["cat"] == "cpu_op", "tid"].astype(str)) == {"24922"}
    # one CUTLASS kernel on device 0 stream 7, linked to its launch by correlation
    dev = trace.device_events
    assert len(dev) == 1
    k = dev.iloc[0]
    assert (k["device"], k["stream"], k["kind"], bool(k["is_comm"])) == (0, 7, "kernel", False)
    assert k["end_ns"] - k["start_ns"] == 45_000
    launch = host[host["name"] == "cudaLaunchKernel"].iloc[0]
    assert launch["correlation"] == k["correlation"] == 2131433
    # ProfilerStep#552 (a user_annotation) is a step
    assert trace.steps["step"].tolist() == [552]
    assert report.comm_overlap.empty and report.copy_overlap.empty


# --- pytorch/kineto docs/traces/after_fix_trace.json (libkineto CUPTI test output) ---


def test_kineto_after_fix_metadata_and_sync_events():
    name = "kineto_after_fix_trace.json"
    trace = traceprobe.load_trace(DATA / name)
    report = traceprobe.overlap_report(trace)
    md = trace.metadata
    assert md["schemaVersion"] == 1
    assert md["cuda_runtime_version"] == 12090 and md["cuda_driver_version"] == 13000
    assert md["baseTimeNanoseconds"] == 1775078550000000000
    assert trace.rank is None and report.rank is None
    assert len(trace.devices) == 8 and set(trace.devices["name"]) == {"NVIDIA H100"}
    # cuda_sync events (Stream Wait Event, Event Sync) sit on the GPU lane but are not
    # device work; the "Trace" span (pid "Spans") and instant events (pid "") are ignored
    raw_cats = {e.get("cat") for e in _raw(name)["traceEvents"]}
    assert {"cuda_sync", "Trace", "ac2g"} <= raw_cats
    dev = trace.device_events
    assert dev["name"].astype(str).tolist() == ["Kernel"]
    # sub-microsecond timestamps (three decimals) convert exactly to ns
    k = dev.iloc[0]
    assert (k["start_ns"], k["end_ns"]) == (88_511_388_202_785, 88_511_388_202_805)
    assert (k["device"], k["stream"], k["correlation"]) == (0, 1, 1)
    host = trace.host_events
    assert sorted(host["cat"].astype(str).value_counts().items()) == [("cpu_op", 4), ("cuda_runtime", 1)]
    assert report.streams["busy_ns"].tolist() == [20]


# --- devices named by their backend; JSON that is not a Kineto trace --------------------------
# SYNTHETIC traces shaped like HolisticTraceAnalysis's tests/data/amd_trace (ROCm 6.2, MI250)
# and tests/data/mtia_trace_single_rank / mtia_inference_trace: same categories, args and ids.


def _write(tmp_path, name, doc):
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return p


def test_rocm_trace_is_hip_and_rccl_is_communication(tmp_path, monkeypatch):
    doc = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": i, "name": "AMD Radeon Graphics", "totalGlobalMem": 68702699520, "warpSize": 64} for i in range(4)],
        "traceName": "synthetic: ROCm-shaped",
        "traceEvents": [
            {"ph": "X", "cat": "cuda_runtime", "name": "hipMemcpyWithStream", "pid": 9, "tid": 9, "ts": 100.301, "dur": 60.204,
             "args": {"External id": 8, "stream": "0x0", "correlation": 117, "size": "2560", "kind": "1"}},
            {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Host -> Device)", "pid": 2, "tid": 0, "ts": 116.206, "dur": 22.441,
             "args": {"External id": 8, "device": 2, "stream": 0, "correlation": 117, "kind": "HtoD"}},
            {"ph": "X", "cat": "cuda_runtime", "name": "hipLaunchKernel", "pid": 9, "tid": 9, "ts": 130.0, "dur": 2.0,
             "args": {"External id": 9, "correlation": 118}},
            {"ph": "X", "cat": "cuda_runtime", "name": "hipExtLaunchKernel", "pid": 9, "tid": 9, "ts": 133.0, "dur": 2.0,
             "args": {"External id": 10, "correlation": 119}},
            {"ph": "X", "cat": "kernel", "name": "Cijk_Ailk_Bljk_SB_MT64x64", "pid": 2, "tid": 0, "ts": 140.0, "dur": 10.0,
             "args": {"device": 2, "stream": 0, "correlation": 118}},
            {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_Generic(ncclDevComm*, unsigned long, ncclWork*) [rccl]", "pid": 2, "tid": 1,
             "ts": 141.0, "dur": 5.0, "args": {"device": 2, "stream": 1, "correlation": 119}},
        ],
    }
    p = _write(tmp_path, "rocm.json", doc)
    t = load_trace(p)
    assert t.backend == "hip" and t.device_label(2) == "hip:2"
    assert t.device_events["is_comm"].tolist() == [False, False, True]
    assert t.device_events["direction"].tolist()[0] == "HtoD"
    r = overlap_report(t)
    assert not r.comm_overlap.empty


def test_mtia_events_are_device_work(tmp_path):
    doc = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 17, "name": "ARTEMIS"}],
        "distributedInfo": {"backend": "mtia:hccl,cpu:gloo", "rank": 0, "world_size": 1},
        "traceName": "synthetic: MTIA-shaped",
        "traceEvents": [
            {"ph": "X", "cat": "mtia_runtime", "name": "runFunction - job_prep_and_submit_for_execution", "pid": 865, "tid": 865,
             "ts": 10.0, "dur": 3.0, "args": {"correlation": 21600000}},
            {"ph": "X", "cat": "mtia_ccp_events", "name": "add-dtype_Float", "pid": 17, "tid": 3774, "ts": 20.0, "dur": 10.0,
             "args": {"column": 0, "correlation": 21600000, "packet_ptr": 1, "row": 0, "stream": 108}},
            {"ph": "X", "cat": "mtia_ccp_events", "name": "dma_request", "pid": 17, "tid": 3808, "ts": 25.0, "dur": 10.0,
             "args": {"direction": "DEVICE_TO_HOST", "size": 16, "k_work_ptr": 3221765576, "packet_ptr": 225, "sqid": 1, "stream": 104}},
            {"ph": "X", "cat": "mtia_ccp_events", "name": "event_wait", "pid": 17, "tid": 3774, "ts": 30.0, "dur": 100.0,
             "args": {"stream": 108, "wait_on_stream": 104, "seq_num": 550218, "sqid": 11, "host_ctx": 1}},
            {"ph": "M", "name": "process_name", "pid": 17, "tid": 0, "args": {"name": "MTIA 17"}},
        ],
    }
    t = load_trace(_write(tmp_path, "mtia_rank_0.json", doc))
    assert t.backend == "mtia" and t.device_label(17) == "mtia:17"
    ev = t.device_events
    assert ev[["device", "stream", "kind"]].values.tolist() == [[17, 108, "kernel"], [17, 104, "memcpy"]]
    assert ev["direction"].tolist()[1] == "DtoH"  # from args.direction: MTIA names its copies dma_request
    assert set(t.host_events["cat"]) == {"cuda_runtime"}
    r = overlap_report(t)
    # device work, not "no device activity (CPU-only)": the kernel [20, 30] µs and, with its direction read, the copy [25, 35]
    assert r.devices.device_count == 1 and r.work_ns == 15_000


def test_cuda_is_the_default_backend(tmp_path):
    p = _write(tmp_path, "k.json", {"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 1}]})
    assert load_trace(p).backend == "cuda" and load_trace(p).device_label(0) == "cuda:0"


@pytest.mark.parametrize(
    "name, doc, needle",
    [
        ("benchmark_simple_add_et.json", {"schema": "1.0.3-chakra.0.0.4", "pid": 1, "time": "x", "start_ts": 1, "nodes": [{"id": 1, "name": "[pytorch|profiler|execution_trace|process]"}]}, "PyTorch execution trace"),
        ("memory_timeline.json", [[1, 2, 3], [[0, 1], [2, 3], [4, 5]]], "memory-timeline"),
        ("snapshot.json", {"segments": [], "device_traces": []}, "memory snapshot"),
        ("manifest.json", {"environment": {"torch": "2.13"}, "variants": [{"workload": "w", "variant": "v"}]}, "traceprobe manifest"),
        ("report.json", {"schema": 2, "traceprobe": "0.1.0", "traces": []}, "traceprobe report"),
        ("other.json", {"a": 1}, "no 'traceEvents'"),
        ("empty.json", {"traceEvents": []}, "no events"),
    ],
)
def test_json_that_is_not_a_kineto_trace_is_named(tmp_path, name, doc, needle):

    p = _write(tmp_path, name, doc)
    with pytest.raises(TraceFormatError) as e:
        load_trace(p)
    assert needle in str(e.value) and str(e.value).startswith(str(p)) and "\n" not in str(e.value)
