"""Steps on the host and on the device, on SYNTHETIC traces (hand-written events, nothing recorded).

Every expected value is computed by hand in the comments; times are µs unless said otherwise.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import sample_trace, sweep, swept
from synthetic import BASE, TraceBuilder, load, rows

from traceprobe import overlap_report
from traceprobe.analysis.device.profiled import launches
from traceprobe.analysis.device.step_figures import STEP_FIGURES
from traceprobe.analysis.device.steps import STEP_COLUMNS, clip_trace, device_steps, step_of


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
    # host: [0,1000) and [1000,1800). Anchors (first compute kernel launched): step 1 at 100, step 2 at 1200 (its
    # copy [1100,1300) starts earlier but is no compute). GPU intervals: step 1 [100,1200), busy 800 + the copy's
    # first 100; step 2 [1200,2200), busy 300 + 600. Launched by each: step 1 [100,900) busy 800, step 2 [1100,2200) 1000
    assert rows(s, STEP_COLUMNS) == [
        (1, BASE, BASE + 1_000_000, 1_000_000, BASE + 100_000, BASE + 1_200_000, 1_100_000, 900_000, 2,
         BASE + 100_000, BASE + 900_000, 800_000),
        (2, BASE + 1_000_000, BASE + 1_800_000, 800_000, BASE + 1_200_000, BASE + 2_200_000, 1_000_000, 900_000, 4,
         BASE + 1_100_000, BASE + 2_200_000, 1_000_000),
    ]
    assert r.throughput == pytest.approx(1 / 1.1e-3)  # one period: step 2 starts on the device 1100 µs after step 1
    # step 1: any [100,900) + [1100,1200) = 900, both devices [400,600) = 200; the copy's 100 under no compute;
    # no comm; device 0's streams never together
    s1, s2 = s.iloc[0], s.iloc[1]
    assert s1["device_concurrency"] == pytest.approx(200 / 900)
    assert s1["copy_overlap"] == 0.0 and math.isnan(s1["comm_overlap"]) and s1["stream_concurrency"] == 0.0
    # step 2: devices never overlap; the copy's [1200,1300) under compute [1200,1500); comm 600 with 200 under
    # compute; streams: device 0 100 of 300, device 1 200 of 600 -> 300 / 900
    assert s2["device_concurrency"] == 0.0
    assert s2["copy_overlap"] == 1.0
    assert s2["comm_overlap"] == pytest.approx(1 / 3)
    assert s2["stream_concurrency"] == pytest.approx(1 / 3)


def test_gpu_lagging_the_host_by_a_whole_step(tmp_path):
    """Each step's kernel runs during the next host step; host windows would give step 1 nothing."""
    b = TraceBuilder("GPU one step behind", base_ns=BASE)
    b.kernel(0, 7, 100_000, 500_000)  # no launch in the trace: the warm-up step's work
    for k in range(3):  # host steps [0,1000), [1000,2000), [2000,3000)
        b.step(k + 1, k * 1_000_000, 1_000_000)
        b.launch(k * 1_000_000 + 100_000, "kernel", 0, 7, (k + 1) * 1_000_000 + 200_000, 500_000)
    r = overlap_report(load(b, tmp_path))
    # GPU intervals [1200,2200), [2200,3200), [3200,3700): each holds its own kernel
    assert rows(r.steps, ["step", "host_ns", "gpu_start_ns", "gpu_ns", "gpu_busy_ns", "events"]) == [
        (1, 1_000_000, BASE + 1_200_000, 1_000_000, 500_000, 1),
        (2, 1_000_000, BASE + 2_200_000, 1_000_000, 500_000, 1),
        (3, 1_000_000, BASE + 3_200_000, 500_000, 500_000, 1),
    ]
    assert r.throughput == pytest.approx(2 / 2.0e-3)  # the steps start every 1000 µs on the device (1200, 2200, 3200)
    assert r.window_ns == (BASE + 1_200_000, BASE + 3_700_000)  # the warm-up kernel is set aside
    assert rows(r.set_aside, ["device", "work", "events", "busy_ns"]) == [(0, "compute", 1, 500_000)]


def test_kernel_after_the_loop_does_not_cut_throughput(tmp_path):
    b = TraceBuilder("three short steps, then a kernel after the loop", base_ns=BASE)
    for k in range(3):  # host steps of 100 µs, each launching an 80 µs kernel
        b.step(k + 1, k * 100_000, 100_000)
        b.launch(k * 100_000 + 10_000, "kernel", 0, 7, k * 100_000 + 20_000, 80_000)
    b.launch(1_000_000, "kernel", 0, 7, 1_000_000, 100_000)  # launched after the last step ended (300 µs)
    r = overlap_report(load(b, tmp_path))
    assert r.throughput == pytest.approx(2 / 200e-6)  # the steps start every 100 µs on the device (20, 120, 220), not at 1000
    assert r.steps["gpu_ns"].tolist() == [100_000, 100_000, 80_000]
    assert rows(r.set_aside, ["reason", "events", "busy_ns"]) == [("launched after the last recorded step", 1, 100_000)]
    full = overlap_report(load(b, tmp_path), all_device_work=True)
    assert full.devices.any_busy_ns == 340_000 and full.throughput == r.throughput  # steps hold what they launched


def test_host_bound_last_step_counts_to_its_host_window_end(tmp_path):
    b = TraceBuilder("SYNTHETIC: two host-bound steps of 500 µs, each launching a 10 µs kernel", base_ns=BASE)
    for k in range(2):
        b.step(k + 1, k * 500_000, 500_000)
        b.launch(k * 500_000 + 5_000, "kernel", 0, 7, k * 500_000 + 10_000, 10_000)
    r = overlap_report(load(b, tmp_path))
    assert r.steps["gpu_ns"].tolist() == [500_000, 10_000]
    # one period between the steps' starts on the device (10, 510 µs); the last interval's 10 µs would hide the wait
    assert r.throughput == pytest.approx(1 / 500e-6)
    one = TraceBuilder("SYNTHETIC: one such step", base_ns=BASE)
    one.step(1, 0, 500_000)
    one.launch(5_000, "kernel", 0, 7, 10_000, 10_000)
    # its host window: the host runs each step's code in turn (not 1 / 10 µs of work, nor 1 / 490 µs from the kernel's start)
    assert overlap_report(load(one, tmp_path, "one.pt.trace.json")).throughput == pytest.approx(1 / 500e-6)
    ahead = TraceBuilder("SYNTHETIC: one step whose host window ends long before its work", base_ns=BASE)
    ahead.step(1, 0, 100_000)
    ahead.launch(5_000, "kernel", 0, 7, 50_000, 1_000_000)
    assert overlap_report(load(ahead, tmp_path, "ahead.pt.trace.json")).throughput == pytest.approx(1 / 1000e-6)  # its work


def test_cpu_only_steps_use_host_time(tmp_path):
    b = TraceBuilder("CPU-only steps")
    b.step(1, 0, 2_000)
    b.step(2, 2_000, 3_000)
    r = overlap_report(load(b, tmp_path))
    assert r.steps["events"].tolist() == [0, 0] and r.steps["gpu_start_ns"].tolist() == [-1, -1]
    assert all(r.steps[c].dtype == np.int64 for c in STEP_COLUMNS)
    assert r.throughput == pytest.approx(1 / 2e-6)  # one period of the host windows (0, 2000 ns)


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


def _reference_step_figures(trace, la, steps):
    """The per-step figures the slow way: each trace-wide function on a copy of the trace holding the device
    work launched in the steps, clipped to one step's GPU interval."""
    from traceprobe.analysis.device.busy import fraction_of
    from traceprobe.analysis.device.concurrency import device_concurrency, stream_concurrency
    from traceprobe.analysis.device.overlap import comm_overlap, copy_overlap
    from traceprobe.analysis.device.profiled import keep_device_events

    inside = keep_device_events(trace, step_of(trace, la) >= 0)
    out = {f: [] for f in STEP_FIGURES}
    for lo, hi in zip(steps["gpu_start_ns"].tolist(), steps["gpu_end_ns"].tolist()):
        t = clip_trace(inside, lo, hi) if hi > lo else keep_device_events(inside, np.zeros(len(inside.device_events), bool))
        copy = copy_overlap(t)
        copy_all = copy[copy["direction"] == "all"] if not copy.empty else copy
        out["device_concurrency"].append(device_concurrency(t).concurrency)
        out["copy_overlap"].append(fraction_of(copy_all, "overlapped_ns", "copy_ns"))
        out["comm_overlap"].append(fraction_of(comm_overlap(t), "overlapped_ns", "comm_ns"))
        out["stream_concurrency"].append(fraction_of(stream_concurrency(t), "multi_stream_ns", "busy_ns"))
    return {f: np.array(v, dtype=np.float64) for f, v in out.items()}


def _both_ways(t):
    la = launches(t)
    steps = device_steps(t, la)
    got = {f: steps[f].to_numpy() if f in steps else np.zeros(0) for f in STEP_FIGURES}
    return got, _reference_step_figures(t, la, steps)


SAMPLES = sorted(str(p) for p in Path(__file__).resolve().parent.parent.joinpath("sample_traces").rglob("*.json.gz") if swept(p))


@pytest.mark.parametrize("path", sweep(SAMPLES, ids=lambda p: Path(p).name))  # (a few by default, all under slow)
def test_step_figures_equal_per_step_functions_on_real_traces(path):
    """Every sample trace (real recordings): the grouped computation gives exactly the per-step functions' figures."""
    got, want = _both_ways(sample_trace(path))
    for f in STEP_FIGURES:
        np.testing.assert_array_equal(got[f], want[f], err_msg=f)


def test_step_figures_on_synthetic_two_steps(tmp_path):
    got, want = _both_ways(load(_two_step_trace(), tmp_path))
    for f in STEP_FIGURES:
        np.testing.assert_array_equal(got[f], want[f], err_msg=f)
    # step 2 [1200,2200): the copy's [1200,1300) under kernel [1200,1500); nccl [1600,2200) under kernel [1700,1900): 200 of 600
    assert got["copy_overlap"].tolist() == [0.0, 1.0]
    assert got["comm_overlap"][1] == pytest.approx(200 / 600)


def _prefetch_trace(prefetch: bool) -> TraceBuilder:
    """SYNTHETIC ResNet-like loop of 4 steps, each a 300 µs HtoD copy of its batch and 700 µs of compute.

    Without prefetch the copy runs on the compute stream before the compute: each step takes 1000 µs on the
    GPU, [1000k, 1000k+1000). With prefetch, step k launches (early in its short host window) the copy of batch
    k+1 on side stream 8, which runs at once, back to back: copies [300j, 300j+300) for batches j = 0..4; the
    compute of step k runs [300+700k, 1000+700k) on stream 7 behind the previous one. Step k's copy then starts
    while step k-1's compute runs: under a "first to last of its own work" rule, step 2 spanned [900, 2400)."""
    b = TraceBuilder(f"prefetch {'on' if prefetch else 'off'}", base_ns=BASE)
    for k in range(4):
        h = k * 100_000  # host steps of 100 µs: the GPU lags
        b.step(k + 1, h, 100_000)
        if prefetch:
            if k == 0:
                b.launch(h + 5_000, "memcpy", 0, 8, 0, 300_000, "HtoD")
            b.launch(h + 10_000, "memcpy", 0, 8, 300_000 * (k + 1), 300_000, "HtoD")
            b.launch(h + 20_000, "kernel", 0, 7, 300_000 + 700_000 * k, 700_000)
        else:
            b.launch(h + 10_000, "memcpy", 0, 7, 1_000_000 * k, 300_000, "HtoD")
            b.launch(h + 20_000, "kernel", 0, 7, 1_000_000 * k + 300_000, 700_000)
    return b


def test_side_stream_prefetch_steps_tile_the_window(tmp_path):
    """SYNTHETIC: a working prefetcher shortens the steps and raises throughput, as its window shrinks."""
    from traceprobe.analysis.diff import report_figures

    off = overlap_report(load(_prefetch_trace(False), tmp_path, "off.json"))
    on = overlap_report(load(_prefetch_trace(True), tmp_path, "on.json"))
    assert off.window_ns[1] - off.window_ns[0] == 4_000_000 and on.window_ns[1] - on.window_ns[0] == 3_100_000
    # prefetch: each step's compute starts at 300 + 700k µs (its copies start earlier, at 0, 600, 900, 1200: no
    # anchor); the first step from the first copy (0), the last to its compute's end (3100)
    assert rows(on.steps, ["gpu_start_ns", "gpu_end_ns"]) == [
        (BASE, BASE + 1_000_000), (BASE + 1_000_000, BASE + 1_700_000), (BASE + 1_700_000, BASE + 2_400_000),
        (BASE + 2_400_000, BASE + 3_100_000)]
    # the copies run back to back in [0,1500): step 1 [0,1000) holds 1000 of them, 700 under its compute [300,1000);
    # step 2 [1000,1700) the other 500, all under its compute; steps 3 and 4 none
    np.testing.assert_array_equal(on.steps["copy_overlap"].to_numpy(), [0.7, 1.0, np.nan, np.nan])
    # never overlapping, and summing to the steps' span
    assert (on.steps["gpu_start_ns"].to_numpy()[1:] == on.steps["gpu_end_ns"].to_numpy()[:-1]).all()
    assert on.steps["gpu_ns"].sum() == 3_100_000 and off.steps["gpu_ns"].sum() == 4_000_000
    # the launched-by-this-step view keeps each step's own span: step 3 launched [900, 2400)
    assert rows(on.steps, ["launched_start_ns", "launched_end_ns"])[2] == (BASE + 900_000, BASE + 2_400_000)
    fa, fb = ({(f, s): v for f, s, v in report_figures(r)} for r in (off, on))
    # from the second step on (the first starts at its copy, ahead of its compute): every 1000 µs, every 700 µs
    assert fa[("throughput_steps_per_s", "")] == pytest.approx(2 / 2.0e-3)
    assert fb[("throughput_steps_per_s", "")] == pytest.approx(2 / 1.4e-3)  # better, as the steps shrank
    assert fb[("mean_step_ns", "")] == pytest.approx(700_000) and fa[("mean_step_ns", "")] == pytest.approx(1_000_000)
    got, want = _both_ways(load(_prefetch_trace(True), tmp_path, "on.json"))
    for f in STEP_FIGURES:
        np.testing.assert_array_equal(got[f], want[f], err_msg=f)


def test_copy_of_the_previous_step_counts_in_the_step_it_runs_in(tmp_path):
    """SYNTHETIC CUDA-graph inference loop: step k replays its graph (compute [1000k+100, 1000k+900) on stream 7)
    and, at the end of its host window, launches the DtoH copy of its output on stream 8, which waits for the
    compute and runs [1000k+900, 1000k+1400): its last 300 µs under step k+1's compute."""
    b = TraceBuilder("graph loop, output copied during the next step", base_ns=BASE)
    for k in range(4):
        h = 1_000_000 * k
        b.step(k + 1, h, 1_000_000)
        b.launch(h + 50_000, "kernel", 0, 7, h + 100_000, 800_000, "void graph_kernel<float>(float*)")
        b.launch(h + 990_000, "memcpy", 0, 8, h + 900_000, 500_000, "DtoH")
    r = overlap_report(load(b, tmp_path))
    trace_wide = r.copy_overlap.set_index("direction").loc["all", "fraction"]
    assert trace_wide == pytest.approx(900 / 2000)  # copies 0-2: 300 of 500 under compute; copy 3: none
    # GPU intervals [100,1100), [1100,2100), [2100,3100), [3100,4400): step k+1 holds copy k's last 300 µs, under
    # its compute, and copy k+1's first 200 (the last step: all 500), under none
    assert r.steps["copy_overlap"].tolist() == pytest.approx([0 / 200, 300 / 500, 300 / 500, 300 / 800])
    # per-step copy time 200, 500, 500, 800: the steps' overlapped time over their copy time is the trace's
    assert (0 + 300 + 300 + 300) / (200 + 500 + 500 + 800) == pytest.approx(trace_wide)
    # launched by each step: its compute and its own copy, [1000k+100, 1000k+1400)
    assert r.steps["launched_busy_ns"].tolist() == [1_300_000] * 4
    got, want = _both_ways(load(b, tmp_path))
    for f in STEP_FIGURES:
        np.testing.assert_array_equal(got[f], want[f], err_msg=f)


def test_a_step_without_device_work_has_no_gpu_window(tmp_path):
    """SYNTHETIC: step 2 launches nothing; the per-step tables read the steps' GPU windows, which leave it out."""
    from traceprobe.analysis.per_trace import gpu_step_windows

    b = TraceBuilder("a step that launches nothing", base_ns=BASE)
    b.step(1, 0, 1_000_000)
    b.step(2, 1_000_000, 500_000)
    b.step(3, 1_500_000, 1_000_000)
    b.launch(50_000, "kernel", 0, 7, 100_000, 500_000)
    b.launch(1_550_000, "kernel", 0, 7, 1_600_000, 500_000)
    r = overlap_report(load(b, tmp_path))
    assert r.steps["gpu_start_ns"].tolist()[1] == -1  # step 2: no device work
    w = gpu_step_windows(r.steps)
    assert w["step"].tolist() == [1, 3] and (w["start_ns"] >= BASE).all()
