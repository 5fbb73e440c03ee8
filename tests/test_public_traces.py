"""Real traces from public repositories (tests/data/public, sources in tests/data/README.md).

Each file loads and gets a report; then facts particular to each file are checked.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import traceprobe

DATA = Path(__file__).parent / "data" / "public"
FILES = sorted(p.name for p in DATA.glob("*.json*"))


def _raw(name: str) -> dict:
    return json.loads((DATA / name).read_text())


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
