"""Steps on the host and on the device, on SYNTHETIC traces (hand-written events, nothing recorded).

Every expected value is computed by hand in the comments; times are µs unless said otherwise.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from synthetic import BASE, TraceBuilder, load, rows

from traceprobe import overlap_report
from traceprobe.analysis.profiled import launches
from traceprobe.analysis.step_figures import STEP_FIGURES, step_figures
from traceprobe.analysis.steps import STEP_COLUMNS, step_of, step_windows
from traceprobe.trace import load_trace


def test_trace_steps(tmp_path):
    b = TraceBuilder("two steps", base_ns=BASE)
    b.step(1, 0, 1_000_000)
    b.step(2, 1_000_000, 800_000)
    b.cpu_op(0, 1_000_000, "ProfilerStep#1")  # the same step as a cpu_op: widest span kept
    t = load(b, tmp_path)
    assert list(t.steps.columns) == ["step", "start_ns", "end_ns"]
    assert all(t.steps[c].dtype == np.int64 for c in t.steps.columns)
    assert rows(t.steps, ["step", "start_ns", "end_ns"]) == [(1, BASE, BASE + 1_000_000), (2, BASE + 1_000_000, BASE + 1_800_000)]
    b = TraceBuilder("no steps")
    b.kernel(0, 7, 0, 10)
    b.annotation("ProfilerStep#x", 0, 10)  # not a step number
    st_ = load(b, tmp_path, "nosteps.json").steps
    assert st_.empty and list(st_.columns) == ["step", "start_ns", "end_ns"]


def _two_step_trace() -> TraceBuilder:
    b = TraceBuilder("two steps, work launched in each", devices=2, base_ns=BASE)
    b.step(1, 0, 1_000_000)  # host [0,1000)
    b.step(2, 1_000_000, 800_000)  # host [1000,1800)
    # step 1 launches: device 0 [100,600), device 1 [400,900)
    b.launch(50_000, "kernel", 0, 7, 100_000, 500_000)
    b.launch(60_000, "kernel", 1, 7, 400_000, 500_000)
    # step 2 launches: device 0 copy [1100,1300) s8 + kernel [1200,1500) s7;
    # device 1 nccl [1600,2200) s9 (past the annotation's end) + kernel [1700,1900) s7
    b.launch(1_050_000, "memcpy", 0, 8, 1_100_000, 200_000, "HtoD")
    b.launch(1_060_000, "kernel", 0, 7, 1_200_000, 300_000)
    b.launch(1_550_000, "nccl", 1, 9, 1_600_000, 600_000)
    b.launch(1_560_000, "kernel", 1, 7, 1_700_000, 200_000)
    return b


def test_device_steps_host_and_gpu_time(tmp_path):
    r = overlap_report(load(_two_step_trace(), tmp_path))
    s = r.steps
    assert list(s.columns) == STEP_COLUMNS + ["device_concurrency", "copy_overlap", "comm_overlap", "stream_concurrency"]
    # host: [0,1000) and [1000,1800); GPU: step 1 [100,900) busy 800, step 2 [1100,2200) busy 400 + 600
    assert rows(s, STEP_COLUMNS) == [
        (1, BASE, BASE + 1_000_000, 1_000_000, BASE + 100_000, BASE + 900_000, 800_000, 800_000, 2),
        (2, BASE + 1_000_000, BASE + 1_800_000, 800_000, BASE + 1_100_000, BASE + 2_200_000, 1_100_000, 1_000_000, 4),
    ]
    assert r.throughput == pytest.approx(2 / 1.9e-3)  # two steps over 800 + 1100 µs of GPU step time
    # step 1: any [100,900)=800, both [400,600)=200; no copies, no comm; one stream per device
    s1, s2 = s.iloc[0], s.iloc[1]
    assert s1["device_concurrency"] == pytest.approx(0.25)
    assert math.isnan(s1["copy_overlap"]) and math.isnan(s1["comm_overlap"]) and s1["stream_concurrency"] == 0.0
    # step 2: devices never overlap; copy 200 with 100 under compute; comm 600 with 200 under compute;
    # streams: device 0 100 of 400, device 1 200 of 600 -> 300 / 1000
    assert s2["device_concurrency"] == 0.0
    assert s2["copy_overlap"] == pytest.approx(0.5)
    assert s2["comm_overlap"] == pytest.approx(1 / 3)
    assert s2["stream_concurrency"] == pytest.approx(0.3)


def test_gpu_lagging_the_host_by_a_whole_step(tmp_path):
    """Each step's kernel runs during the next host step; host windows would give step 1 nothing."""
    b = TraceBuilder("GPU one step behind", base_ns=BASE)
    b.kernel(0, 7, 100_000, 500_000)  # no launch in the trace: the warm-up step's work
    for k in range(3):  # host steps [0,1000), [1000,2000), [2000,3000)
        b.step(k + 1, k * 1_000_000, 1_000_000)
        b.launch(k * 1_000_000 + 100_000, "kernel", 0, 7, (k + 1) * 1_000_000 + 200_000, 500_000)
    r = overlap_report(load(b, tmp_path))
    assert rows(r.steps, ["step", "host_ns", "gpu_start_ns", "gpu_ns", "gpu_busy_ns", "events"]) == [
        (1, 1_000_000, BASE + 1_200_000, 500_000, 500_000, 1),
        (2, 1_000_000, BASE + 2_200_000, 500_000, 500_000, 1),
        (3, 1_000_000, BASE + 3_200_000, 500_000, 500_000, 1),
    ]
    assert r.throughput == pytest.approx(3 / 1.5e-3)  # 2000 steps/s
    assert r.window_ns == (BASE + 1_200_000, BASE + 3_700_000)  # the warm-up kernel is set aside
    assert rows(r.set_aside, ["device", "work", "events", "busy_ns"]) == [(0, "compute", 1, 500_000)]


def test_kernel_after_the_loop_does_not_cut_throughput(tmp_path):
    b = TraceBuilder("three short steps, then a kernel after the loop", base_ns=BASE)
    for k in range(3):  # host steps of 100 µs, each launching an 80 µs kernel
        b.step(k + 1, k * 100_000, 100_000)
        b.launch(k * 100_000 + 10_000, "kernel", 0, 7, k * 100_000 + 20_000, 80_000)
    b.launch(1_000_000, "kernel", 0, 7, 1_000_000, 100_000)  # launched after the last step ended (300 µs)
    r = overlap_report(load(b, tmp_path))
    assert r.throughput == pytest.approx(3 / 240e-6)  # 12,500 steps/s; host windows + tail gave 3 / 1100 µs
    assert r.steps["gpu_ns"].tolist() == [80_000] * 3
    assert rows(r.set_aside, ["reason", "events", "busy_ns"]) == [("launched after the last recorded step", 1, 100_000)]
    full = overlap_report(load(b, tmp_path), all_device_work=True)
    assert full.devices.any_busy_ns == 340_000 and full.throughput == r.throughput  # steps hold what they launched


def test_cpu_only_steps_use_host_time(tmp_path):
    b = TraceBuilder("CPU-only steps")
    b.step(1, 0, 2_000)
    b.step(2, 2_000, 3_000)
    r = overlap_report(load(b, tmp_path))
    assert r.steps["events"].tolist() == [0, 0] and r.steps["gpu_start_ns"].tolist() == [-1, -1]
    assert all(r.steps[c].dtype == np.int64 for c in STEP_COLUMNS)
    assert r.throughput == pytest.approx(2 / 5e-6)


def test_unlinked_trace_assigns_device_work_by_start(tmp_path):
    """No runtime events at all: nothing to classify by, every device event is kept."""
    b = TraceBuilder("steps, no launches", base_ns=BASE)
    b.step(1, 0, 1_000)
    b.step(2, 1_000, 1_000)
    b.kernel(0, 7, 500, 1_000)  # starts in step 1
    b.kernel(0, 7, 2_500, 100)  # starts after the last step: counted in it
    r = overlap_report(load(b, tmp_path))
    assert r.set_aside.empty and r.steps["events"].tolist() == [1, 1]
    assert any("no device event is linked to a launch" in n for n in r.notes)


def test_report_without_steps(tmp_path):
    b = TraceBuilder("no steps")
    b.kernel(0, 7, 0, 10)
    r = overlap_report(load(b, tmp_path))
    assert r.steps.empty and list(r.steps.columns) == STEP_COLUMNS and math.isnan(r.throughput)
    assert isinstance(r.steps, pd.DataFrame)


def _reference_step_figures(trace, which, n):
    """The per-step figures the slow way: each trace-wide function on a copy holding one step's device work."""
    from traceprobe.analysis.busy import fraction_of
    from traceprobe.analysis.concurrency import device_concurrency, stream_concurrency
    from traceprobe.analysis.overlap import comm_overlap, copy_overlap
    from traceprobe.analysis.profiled import keep_device_events

    out = {f: [] for f in STEP_FIGURES}
    for k in range(n):
        t = keep_device_events(trace, which == k)
        copy = copy_overlap(t)
        copy_all = copy[copy["direction"] == "all"] if not copy.empty else copy
        out["device_concurrency"].append(device_concurrency(t).concurrency)
        out["copy_overlap"].append(fraction_of(copy_all, "overlapped_ns", "copy_ns"))
        out["comm_overlap"].append(fraction_of(comm_overlap(t), "overlapped_ns", "comm_ns"))
        out["stream_concurrency"].append(fraction_of(stream_concurrency(t), "multi_stream_ns", "busy_ns"))
    return {f: np.array(v, dtype=np.float64) for f, v in out.items()}


SAMPLES = sorted(str(p) for p in Path(__file__).resolve().parent.parent.joinpath("sample_traces").rglob("*.json.gz"))


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: Path(p).name)
def test_step_figures_equal_per_step_functions_on_real_traces(path):
    """Every sample trace (real recordings): the grouped computation gives exactly the per-step functions' figures."""
    t = load_trace(path)
    which = step_of(t, launches(t))
    n = len(step_windows(t))
    got, want = step_figures(t, which, n), _reference_step_figures(t, which, n)
    for f in STEP_FIGURES:
        np.testing.assert_array_equal(got[f], want[f], err_msg=f)


def test_step_figures_on_synthetic_two_steps(tmp_path):
    t = load(_two_step_trace(), tmp_path)
    which = step_of(t, launches(t))
    got, want = step_figures(t, which, 2), _reference_step_figures(t, which, 2)
    for f in STEP_FIGURES:
        np.testing.assert_array_equal(got[f], want[f], err_msg=f)
    # step 2: copy [1100,1300) under kernel [1200,1500): 100 of 200 ns; nccl [1600,2200) under kernel [1700,1900): 200 of 600
    assert got["copy_overlap"].tolist()[1] == 0.5 and math.isnan(got["copy_overlap"][0])
    assert got["comm_overlap"][1] == pytest.approx(200 / 600)
