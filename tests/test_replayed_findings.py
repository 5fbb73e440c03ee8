"""Findings from the replay (:mod:`traceprobe.analysis.advice.replayed`): a trace's host-side findings are its window's
what-ifs, the spans that no replay stands for keep their span."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd

from traceprobe import load_trace
from traceprobe.analysis.advice.findings import findings_frame
from traceprobe.analysis.advice.replayed import KINDS, REPLACED, with_what_if
from traceprobe.analysis.causal.what_if_order import COLUMNS
from traceprobe.analysis.causal.what_if_windows import WindowWhatIf
from traceprobe.analysis.per_trace import overlap_report
from traceprobe.analysis.summary import summarize

SYNC_LOG = Path(__file__).resolve().parent.parent / "sample_traces" / "sync-log" / "w2" / "ddp-item-log"


def _window(rows: list[tuple], floor: int) -> WindowWhatIf:
    table = pd.DataFrame([(*r, -1) if len(r) == len(COLUMNS) - 1 else r for r in rows], columns=COLUMNS)  # (beyond: none)
    return WindowWhatIf("run", "steps 2-4", "", (0, 1), 3, 300, table, None, 100, floor_ns=floor)


def test_replayed_rows_replace_host_spans_in_the_table_order():
    """SYNTHETIC what-if table and span findings (ns): rank 0's span of host time (30) gives way to its replayed rows;
    its sync, placed before the host work it exposed in the table, stays before it though it gives back less; rank 1's
    row and a row under the floor are left out; the spans no replay stands for are merged by size, above the same floor."""
    (rep, *_) = [overlap_report(load_trace(p)) for p in sorted(SYNC_LOG.glob("*.pt.trace.json.gz"))]
    spans = [("idle_host", "rank 0 cuda:0", 0, 30, 10, "host outside ops 0.0 ms", "t"),
             ("exposed_transfer", "rank 0 cuda:0", 0, 11, 3, "exposed transfer 0.0 ms", "t"),
             ("stream_wait", "rank 0 cuda:0", 0, 4, 1, "dependency wait 0.0 ms", "t")]
    rep = replace(rep, rank=0, findings=findings_frame(spans))
    w = _window([(0, "sync", "aten::item", 20, 10, 3, 3), (0, "host", "", 40, 12, 4, 3), (1, "host", "", 40, 50, 16, 3),
                 (-1, "dispatch", "aten::linear", 9, 5, 1, 3)], floor=6)
    got = with_what_if(rep, w).findings
    assert got["kind"].tolist() == ["idle_sync", "idle_host", "exposed_transfer"]  # (the 4 ns dependency wait: under the floor)
    assert got["headroom_ns"].tolist() == [10, 12, 11] and got["per_step_ns"].tolist() == [3, 4, 3]
    assert got["subject"].tolist()[:2] == ["rank 0", "rank 0"] and "if removed" in got["text"].iloc[0]
    # the straggler's own finding takes its row's place
    spans.append(("straggler", "rank 0", 0, 10, 3, "straggler: syncs -0.0 ms/step", "its what-if"))
    got = with_what_if(replace(rep, findings=findings_frame(spans)), w, straggler=(0, "sync")).findings
    assert got["kind"].tolist() == ["straggler", "idle_host", "exposed_transfer"]
    assert got["text"].iloc[0] == "its what-if"


def test_recorded_findings_are_the_window_replay():
    """Recorded (2x H200, rank 0 logs loss.item() each step): every host-side finding's figure is a row of its window's
    what-if table, and none is a span; rank 0's straggler finding (its syncs) comes before the host work they exposed,
    as on the first screen."""
    s = summarize([overlap_report(load_trace(p)) for p in sorted(SYNC_LOG.glob("*.pt.trace.json.gz"))])
    (w,) = s.what_ifs
    gains = set(w.table["gain_ns"].tolist())
    for r in s.reports:
        f = r.findings
        replayed = f[f["kind"].isin([*KINDS.values(), "straggler"]).to_numpy()]
        assert set(replayed["headroom_ns"].tolist()) <= gains, r.rank
        assert not (f["kind"].isin(REPLACED) & ~f["headroom_ns"].isin(gains)).any()
    (r0,) = [r for r in s.reports if r.rank == 0]
    assert r0.findings["kind"].tolist()[:2] == ["straggler", "idle_host"]
    assert w.top is not None and w.top["cause"] == "sync" and r0.findings["headroom_ns"].iloc[0] == w.top["gain_ns"]


def test_a_launch_bound_finding_names_the_host_time_a_graph_of_the_step_also_removes():
    """SYNTHETIC what-if table (ns, 3 steps, floor 1.5 ms): rank 0's launch-bound dispatch (-3.0 ms/step) is named with
    its rank's other host time around the launches above the floor, each removed alone (host outside ops -0.8 ms/step,
    the optimizer's -0.6 ms/step), not its CPU ops under the floor nor rank 1's host time; a sync's finding says none
    of it."""
    w = _window([(0, "dispatch", "aten::mm", 9_500_000, 9_000_000, 3_000_000, 3), (1, "host", "", 3_000_000, 2_700_000, 900_000, 3),
                 (0, "host", "", 2_600_000, 2_400_000, 800_000, 3), (0, "optimizer", "Optimizer.step#Adam.step", 1_900_000, 1_800_000,
                                                                   600_000, 3),
                 (0, "cpu_op", "aten::add", 1_000_000, 900_000, 300_000, 3), (0, "sync", "aten::item", 2_000_000, 1_600_000, 500_000, 3)],
                1_500_000)
    text = w.finding(w.table.iloc[0].to_dict())
    assert text.endswith("a graph of the step also takes the host time around the launches off the path (host outside ops "
                         "-0.8 ms/step, optimizer on the host -0.6 ms/step, each alone)")
    assert "graph of the step" not in w.finding(w.table.iloc[5].to_dict())


def test_causes_giving_back_the_same_to_the_ns_are_named_together():
    """SYNTHETIC what-if table (ns, 3 steps, floor 1 ms): rank 0's optimizer and its host outside ops each give back
    exactly 6 ms (a bound other work sets: either reaches it), so the optimizer's finding names the host time as giving
    as much; a cause 1 ns short of it, another rank's equal gain and a tie under the floor are not named, and a finding
    without an equal says nothing of it."""
    w = _window([(0, "optimizer", "Optimizer.step#SGD.step", 8_000_000, 6_000_000, 2_000_000, 3),
                 (0, "host", "", 20_000_000, 6_000_000, 2_000_000, 3), (0, "dispatch", "aten::mm", 30_000_000, 5_999_999, 1_999_999, 3),
                 (1, "host", "", 9_000_000, 6_000_000, 2_000_000, 3), (0, "cpu_op", "aten::add", 900_000, 900_000, 300_000, 3),
                 (0, "sync", "aten::item", 800_000, 900_000, 300_000, 3)], 1_000_000)
    text = w.finding(w.table.iloc[0].to_dict())
    assert text.startswith("rank 0: optimizer on the host: -2.0 ms/step") and (
        "if removed, as much as host outside ops removed instead (the same to the ns: from there other work bounds the "
        "window, not this cause's own time); ") in text
    assert "dispatch" not in text.split("; ")[0]
    assert "as much as" not in w.finding(w.table.iloc[2].to_dict())  # (dispatch: 1 ns less than the others)
    assert "as much as" not in w.finding(w.table.iloc[4].to_dict())  # (cpu_op ties the sync under the floor)


def test_equal_gains_are_ordered_by_their_time_on_the_critical_path():
    """SYNTHETIC what-if table (ns, ordered) and critical path: rank 0's optimizer, dispatch and host outside ops give back
    the same to the ns; the path holds dispatch most, then host outside ops, so they come in that order, the optimizer
    (on no segment) last; a larger gain before them and a run holding a sync keep their places, as does every-rank's
    row, ordered by the causes' time on any rank."""
    from traceprobe.analysis.causal.what_if_order import path_first

    table = pd.DataFrame([(0, "data_loading", "", 9, 50, 20, 3, -1), (0, "optimizer", "", 5, 30, 10, 3, -1),
                          (0, "dispatch", "", 90, 30, 10, 3, -1), (0, "host", "", 20, 30, 10, 3, -1),
                          (1, "sync", "", 5, 8, 3, 3, -1), (1, "host", "", 5, 8, 3, 3, -1),
                          (-1, "cpu_op", "", 5, 6, 2, 3, -1), (-1, "host", "", 5, 6, 2, 3, -1)], columns=COLUMNS)
    path = pd.DataFrame({"rank": [0, 0, 0, 1, 1], "cause": ["dispatch", "host", "dispatch", "host", "cpu_op"],
                         "ns": [40, 25, 30, 9, 2]})
    got = path_first(table.iloc[::1], path)
    assert list(zip(got["rank"], got["cause"])) == [(0, "data_loading"), (0, "dispatch"), (0, "host"), (0, "optimizer"),
                                                    (1, "sync"), (1, "host"), (-1, "host"), (-1, "cpu_op")]
    assert path_first(table, path.iloc[:0]).equals(table)  # (no path: as it was)
