"""The report's figures on the real traces in sample_traces/ (recorded on 2x H200).

These traces were recorded by ``traceprobe record`` on real GPUs and are never
edited; see sample_traces/README.md for where and how.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import traceprobe
from traceprobe.analysis import overlap_report
from traceprobe.collect import manifest_info

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"


def report(name: str):
    path = SAMPLES / f"{name}.pt.trace.json.gz"
    return overlap_report(traceprobe.load_trace(path), manifest_info(path))


def dtoh(r):
    row = r.copy_overlap[(r.copy_overlap["device"] == 0) & (r.copy_overlap["direction"] == "DtoH")]
    assert len(row) == 1
    return row.iloc[0]


def test_every_sample_loads_with_device_events():
    files = sorted(SAMPLES.glob("*.pt.trace.json.gz"))
    assert len(files) >= 7
    for f in files:
        t = traceprobe.load_trace(f)
        assert not t.device_events.empty, f
        assert (t.device_events["end_ns"] >= t.device_events["start_ns"]).all()
        assert not t.devices.empty  # deviceProperties present


def test_compute_copy_overlapped_copies_hidden_under_compute():
    r = report("compute-copy.overlapped")
    row = dtoh(r)
    assert row["copies"] == 50
    assert row["fraction"] >= 0.9
    v = [v for v in r.verdicts if v.figure == "copy_overlap"]
    assert v and v[0].level == "confirmed" and "parallelism confirmed" in v[0].text


def test_compute_copy_nonblocking_never_overlaps():
    r = report("compute-copy.nonblocking")
    row = dtoh(r)
    assert row["fraction"] < 0.05
    v = [v for v in r.verdicts if v.figure == "copy_overlap"][0]
    assert v.level == "none" and "no overlap" in v.text and "compute stream" in v.text
    # all copies shared the compute stream
    ev = r.streams
    assert len(ev) == 1


def test_compute_copy_sequential_pageable_copies():
    r = report("compute-copy.sequential")
    row = dtoh(r)
    assert row["fraction"] < 0.05
    t = traceprobe.load_trace(SAMPLES / "compute-copy.sequential.pt.trace.json.gz")
    copies = t.device_events[t.device_events["kind"] == "memcpy"]
    assert set(copies["dst_kind"].astype(str)) == {"Pageable"}
    assert (copies["bytes"] == 4000 * 4000 * 4).all()


def test_multi_gpu_concurrent_vs_sequential():
    conc = report("multi-gpu.concurrent").devices
    seq = report("multi-gpu.sequential").devices
    assert conc.device_count == 2 and seq.device_count == 2
    assert conc.concurrency >= 0.9
    assert seq.concurrency < 0.05


def test_cpu_gpu_concurrent_vs_sequential():
    conc = report("cpu-gpu.concurrent")
    seq = report("cpu-gpu.sequential")
    assert conc.cpu_gpu.host_compute_ns > 0 and seq.cpu_gpu.host_compute_ns > 0
    lv = {r: [v.level for v in x.verdicts if v.figure == "cpu_gpu"] for r, x in (("c", conc), ("s", seq))}
    assert lv["c"] == ["confirmed"]
    assert lv["s"] == ["none"]
    assert conc.cpu_gpu.fraction > 0.5 > seq.cpu_gpu.fraction


def test_manifest_info_attached():
    r = report("compute-copy.overlapped")
    assert r.info["workload"] == "compute-copy" and r.info["variant"] == "overlapped"
    assert r.info["wall_s"] > 0
    assert "H200" in r.info["environment"]["devices"][0]["name"]
