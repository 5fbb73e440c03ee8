"""The profiled window (device work classified by its launch), on SYNTHETIC traces.

Nothing here was recorded on a GPU; expected values are computed by hand in the comments
(times in µs unless said otherwise).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from synthetic import BASE, TraceBuilder, load, rows
from typer.testing import CliRunner

from traceprobe import overlap_report
from traceprobe.analysis.device.profiled import AFTER, BEFORE, NO_LAUNCH, STEPS, launches
from traceprobe.cli import app


def _pre_window_nccl() -> TraceBuilder:
    """DDP-like: three NCCL kernels launched in the unrecorded warm-up step, spin-waiting at the start."""
    b = TraceBuilder("NCCL kernels launched before the profiled steps", rank=1, world_size=2, base_ns=BASE)
    for i in range(3):  # no launch in the trace: [0,2000), [2000,4000), [4000,6000) on the comm stream
        b.nccl(0, 20, i * 2_000_000, 2_000_000)
    b.step(1, 1_000_000, 10_000_000)  # host [1000,11000)
    b.step(2, 11_000_000, 10_000_000)  # host [11000,21000)
    b.launch(500_000, "kernel", 0, 7, 600_000, 100_000)  # launched before the first step: [600,700)
    # each step: compute [s+5000, s+9000), all-reduce [s+6000, s+8000) wholly under it
    for s in (1_000_000, 11_000_000):
        b.launch(s + 100_000, "kernel", 0, 7, s + 5_000_000, 4_000_000)
        b.launch(s + 200_000, "nccl", 0, 20, s + 6_000_000, 2_000_000)
    b.launch(21_500_000, "kernel", 0, 7, 21_600_000, 100_000)  # launched after the last step: [21600,21700)
    return b


def test_launch_classes(tmp_path):
    t = load(_pre_window_nccl(), tmp_path)
    la = launches(t)
    assert la.linked and (la.lo_ns, la.hi_ns) == (BASE + 1_000_000, BASE + 21_000_000)
    by_start = dict(zip((t.device_events["start_ns"] - BASE).tolist(), la.cls.tolist()))
    assert by_start == {
        0: NO_LAUNCH, 2_000_000: NO_LAUNCH, 4_000_000: NO_LAUNCH, 600_000: BEFORE,
        6_000_000: STEPS, 7_000_000: STEPS, 16_000_000: STEPS, 17_000_000: STEPS, 21_600_000: AFTER,
    }
    assert la.launch_ns[la.cls == NO_LAUNCH].tolist() == [-1, -1, -1]
    assert (la.launch_ns[la.cls == STEPS] >= la.lo_ns).all() and la.launch_ns.dtype == np.int64


def test_pre_window_nccl_is_set_aside_and_the_comm_verdict_reflects_the_steps(tmp_path):
    t = load(_pre_window_nccl(), tmp_path)
    r = overlap_report(t)
    # in the steps: 4 ms of all-reduce, all of it under compute
    assert rows(r.comm_overlap, ["comm_kernels", "comm_ns", "overlapped_ns"]) == [(2, 4_000_000, 4_000_000)]
    assert [(v.value, v.level) for v in r.verdicts if v.figure == "comm_overlap"] == [(1.0, "confirmed")]
    assert rows(r.set_aside, ["reason", "device", "work", "events", "busy_ns"]) == [
        ("launched before the trace began (no launch call in the trace)", 0, "communication", 3, 6_000_000),
        ("launched before the first recorded step", 0, "compute", 1, 100_000),
        ("launched after the last recorded step", 0, "compute", 1, 100_000),
    ]
    assert r.notes[0] == ("6.0 ms of communication on cuda:0 (3 kernels) launched before the trace began "
                          "(no launch call in the trace): left out")
    assert r.window_ns == (BASE + 6_000_000, BASE + 20_000_000)
    # every device event kept: 10 ms of comm, 4 + 0.1 (the early kernel [600,700)) under compute -> 41%, partial
    full = overlap_report(t, all_device_work=True)
    assert rows(full.comm_overlap, ["comm_kernels", "comm_ns", "overlapped_ns"]) == [(5, 10_000_000, 4_100_000)]
    assert [(v.value, v.level) for v in full.verdicts if v.figure == "comm_overlap"] == [(pytest.approx(0.41), "partial")]
    assert full.notes[0].endswith(": kept (--all-device-work)") and full.all_device_work


def test_without_steps_work_launched_in_the_trace_counts(tmp_path):
    b = TraceBuilder("no steps")
    b.nccl(0, 20, 0, 1_000)  # no launch: set aside
    b.launch(500, "kernel", 0, 7, 2_000, 1_000)
    r = overlap_report(load(b, tmp_path))
    assert r.comm_overlap.empty and r.devices.any_busy_ns == 1_000
    assert rows(r.set_aside, ["work", "events", "busy_ns"]) == [("communication", 1, 1_000)]


def test_cli_reports_set_aside_work_and_all_device_work(tmp_path):
    path = _pre_window_nccl().write(tmp_path / "t.pt.trace.json")
    res = CliRunner().invoke(app, ["overlap-report", str(path), "--format", "json", "--jobs", "1"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)["traces"][0]
    assert doc["comm_overlap"][0]["fraction"] == 1.0 and not doc["all_device_work"]
    assert doc["set_aside"][0] == {"reason": "launched before the trace began (no launch call in the trace)", "device": 0,
                                   "work": "communication", "events": 3, "busy_ns": 6_000_000}
    assert doc["notes"][0].startswith("6.0 ms of communication on cuda:0")
    res = CliRunner().invoke(app, ["overlap-report", str(path), "--format", "json", "--jobs", "1", "--all-device-work"])
    doc = json.loads(res.stdout)["traces"][0]
    assert doc["comm_overlap"][0]["fraction"] == pytest.approx(0.41) and doc["all_device_work"]
    table = CliRunner().invoke(app, ["overlap-report", str(path), "--jobs", "1", "--detail"])
    assert "left out: cuda:0: communication 6.0 ms (3 kernels)" in " ".join(table.stdout.replace("│", " ").split())  # one line per reason (a panel's wrapped lines joined)
