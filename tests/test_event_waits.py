"""Event waits the trace recorded (Kineto ``cuda_sync`` events) as edges of the dependency graph.

Every trace here is SYNTHETIC (tests/synthetic.py), shaped like the ``cuda_sync`` events of HTA's
``tests/data/critical_path/cuda_event_sync*`` traces; the last tests read real recordings (HTA's layout is not
shipped here: sample_traces/stream-wait, one H200, torch 2.11, whose records Kineto leaves unresolved).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from synthetic import TraceBuilder, load, us

from traceprobe import load_trace
from traceprobe.analysis.causal.critical_path import critical_path
from traceprobe.analysis.causal.dependency_graph import rank_graph
from traceprobe.analysis.causal.device_chains import BIND_DEPENDENCY, BIND_STREAM
from traceprobe.analysis.causal.what_if import replay, window_job

SAMPLES = Path(__file__).parent.parent / "sample_traces" / "stream-wait"
US = 1_000


def _sync(b: TraceBuilder, kind: str, at: int, corr: int, stream: int = -1, record: int = -1, record_stream: int = -1) -> None:
    b.raw({"ph": "X", "cat": "cuda_sync", "name": kind, "pid": 0, "tid": stream, "ts": us(b.base_ns + at), "dur": 1,
           "args": {"cuda_sync_kind": kind, "stream": stream, "correlation": corr, "device": 0,
                    "wait_on_cuda_event_record_corr_id": record, "wait_on_stream": record_stream}})


def _first_on(g, stream: int) -> int:
    """The graph's first op on ``stream`` (lanes are sorted by device and stream, ops by lane then start)."""
    return int(np.flatnonzero(np.array([g.lane_names[i].endswith(f"stream {stream}") for i in g.lane]))[0])


def _two_producers(record: bool) -> TraceBuilder:
    """Stream 7's X ends at 110 µs, stream 9's Y at 111 µs; stream 13's Z waits on an event recorded after X and
    starts at 113 µs (SYNTHETIC)."""
    b = TraceBuilder()
    b.launch(0, "kernel", 0, 7, 10 * US, 100 * US)  # X
    b.launch(2 * US, "kernel", 0, 9, 10 * US, 101 * US)  # Y
    r = b.runtime(3 * US, 1 * US, "cudaEventRecord")["args"]["correlation"]
    c = b.runtime(4 * US, 1 * US, "cudaStreamWaitEvent")["args"]["correlation"]
    _sync(b, "Stream Wait Event", 4 * US, c, stream=13, record=r if record else -1, record_stream=7 if record else -1)
    b.launch(6 * US, "kernel", 0, 13, 113 * US, 50 * US)  # Z
    return b


def test_a_resolved_record_names_the_work_waited_for(tmp_path):
    g = rank_graph(load(_two_producers(record=True), tmp_path))
    x, y, z = _first_on(g, 7), _first_on(g, 9), _first_on(g, 13)
    assert g.dep[z] == x and g.bind[z] == BIND_DEPENDENCY and g.dep_lag[z] == 3 * US
    # the same trace without the record resolved: the other stream's work that ended last (inference's choice too)
    g2 = rank_graph(load(_two_producers(record=False), tmp_path, "u.json"))
    assert g2.dep[int(np.argmax(g2.start))] == y
    assert g.dep[y] == -1 and g.dep[x] == -1


def test_a_recorded_wait_binds_below_the_inference_slack(tmp_path):
    """Stream 13's W ends at 100 µs; Z on stream 13 waits for stream 7's X (ends 110 µs) and starts at 112 µs: 12 µs
    after its stream's work, under the 20 µs an inferred dependency needs."""
    def build(recorded: bool) -> TraceBuilder:
        b = TraceBuilder()
        b.launch(0, "kernel", 0, 13, 10 * US, 90 * US)  # W
        b.launch(1 * US, "kernel", 0, 7, 10 * US, 100 * US)  # X
        r = b.runtime(3 * US, 1 * US, "cudaEventRecord")["args"]["correlation"]
        c = b.runtime(4 * US, 1 * US, "cudaStreamWaitEvent")["args"]["correlation"]
        if recorded:
            _sync(b, "Stream Wait Event", 4 * US, c, stream=13, record=r, record_stream=7)
        b.launch(6 * US, "kernel", 0, 13, 112 * US, 50 * US)  # Z
        return b

    inferred = rank_graph(load(build(False), tmp_path, "a.json"))
    told = rank_graph(load(build(True), tmp_path, "b.json"))
    z = int(np.argmax(told.start))
    assert inferred.bind[z] == BIND_STREAM and inferred.dep[z] == -1
    assert told.bind[z] == BIND_DEPENDENCY and told.lane_names[told.lane[told.dep[z]]].endswith("stream 7")
    path = critical_path([told])
    assert set(path["lane"]) >= {"cuda:0 stream 7", "cuda:0 stream 13"}
    dep = path[path["cause"] == "dependency"]
    assert dep["ns"].tolist() == [2 * US]
    # the critical path of the inferred graph stays on stream 13 (the 12 µs read as the device's own gap)
    assert "cuda:0 stream 7" not in set(critical_path([inferred])["lane"])


def test_ops_without_a_recorded_wait_keep_the_inferred_dependency_and_replay_exactly(tmp_path):
    """A trace that recorded some event waits (Kineto can miss some): an op that waited on another stream with no
    recorded wait keeps its inferred dependency; the graph's replay still gives the trace's times exactly."""
    b = _two_producers(record=True)
    b.launch(7 * US, "kernel", 0, 15, 300 * US, 10 * US)  # late, waited for no recorded event
    b.launch(8 * US, "kernel", 0, 9, 250 * US, 40 * US)  # another stream's work, ending just before it
    g = rank_graph(load(b, tmp_path))
    late = int(np.argmax(g.start))
    assert g.bind[late] == BIND_DEPENDENCY and g.lane_names[g.lane[g.dep[late]]].endswith("stream 9")
    job = window_job([g], None)
    t, end = replay(job, g.h, job.d, np.zeros(g.t.size, bool))
    assert np.array_equal(t, g.t) and np.array_equal(end, g.end)


def test_a_resolved_event_sync_returns_when_its_recorded_work_ends(tmp_path):
    b = TraceBuilder()
    b.launch(0, "kernel", 0, 7, 10 * US, 90 * US)  # X, recorded, ends at 100 µs
    r = b.runtime(2 * US, 1 * US, "cudaEventRecord")["args"]["correlation"]
    b.launch(3 * US, "kernel", 0, 9, 10 * US, 95 * US)  # another stream's work, ends at 105 µs: inside the call, after X
    s = b.runtime(20 * US, 91 * US, "cudaEventSynchronize")["args"]["correlation"]
    _sync(b, "Event Sync", 20 * US, s, record=r, record_stream=7)
    g = rank_graph(load(b, tmp_path))
    x = _first_on(g, 7)
    assert x in g.target.tolist()
    i = g.target.tolist().index(x)
    assert g.ret[i] == 11 * US  # (returned 11 µs after X ended; the inference would name stream 9's work)


def test_sync_events_are_read_from_real_traces():
    """Real recordings (torch 2.11): Kineto writes a Stream Wait Event per wait, its record unresolved (-1); the
    side stream's waits are the graph's dependencies and its replay is exact."""
    t = load_trace(next((SAMPLES / "side-stream").glob("*.pt.trace.json.gz")))
    waits = t.sync_events[t.sync_events["kind"] == "Stream Wait Event"]
    assert len(waits) == 6 and (waits["wait_correlation"] == -1).all() and set(waits["stream"]) == {7, 13}
    g = rank_graph(t)
    assert int((g.bind == BIND_DEPENDENCY).sum()) == 6
    job = window_job([g], None)
    tt, end = replay(job, g.h, job.d, np.zeros(g.t.size, bool))
    assert np.array_equal(tt, g.t) and np.array_equal(end, g.end)
    # the side stream (13) holds the critical path: 12 products a step against the main stream's 4
    path = critical_path([g])
    on = path.groupby("lane")["ns"].sum()
    assert on["cuda:0 stream 13"] > 10 * on["cuda:0 stream 7"]
    assert load_trace(next((SAMPLES / "side-stream-nosync").glob("*.pt.trace.json.gz"))).sync_events.empty


def test_odd_sync_events_lose_nothing(tmp_path):
    """SYNTHETIC sync events with odd args (a stream named by a string, ids beyond int64 or negative, no ts): the
    trace loads, an event without a usable time is dropped with a warning, and the graph is built."""
    b = _two_producers(record=True)
    b.raw({"ph": "X", "cat": "cuda_sync", "name": "Stream Wait Event", "pid": 0, "tid": 1, "ts": us(b.base_ns + 5 * US), "dur": 1,
           "args": {"stream": "x", "correlation": None, "wait_on_cuda_event_record_corr_id": 2**70, "wait_on_stream": -5, "device": 0}})
    b.raw({"ph": "X", "cat": "cuda_sync", "name": "Event Sync", "pid": 0, "tid": 1, "dur": 1, "args": {"correlation": 3}})
    t = load(b, tmp_path)
    assert len(t.sync_events) == 2 and any("1 cuda_sync event(s)" in w for w in t.metadata["warnings"])
    g = rank_graph(t)
    assert g.dep[_first_on(g, 13)] == _first_on(g, 7)  # (the good wait still binds)
