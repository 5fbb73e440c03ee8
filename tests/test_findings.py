"""Ranked findings (analysis/findings.py).

SYNTHETIC traces built here (and random ones from hypothesis) with hand-computed
headroom; the real sample traces for the copy findings.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from test_breakdown import make_trace, traces

from traceprobe import load_trace
from traceprobe.analysis.advice.findings import findings
from traceprobe.analysis.host.idle_causes import idle_causes

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"


@settings(max_examples=60, deadline=None)
@given(traces())
def test_headroom_never_exceeds_the_window(tr):
    lo, hi = tr.window_ns
    f = findings(tr, min_share=0.0)
    assert f["headroom_ns"].sum() <= hi - lo
    assert (f["headroom_ns"] > 0).all()
    assert f["headroom_ns"].is_monotonic_decreasing


def test_one_span_claimed_once_and_small_findings_dropped():
    # cuda:0 copy [0,40) exposed; cuda:1 NCCL [20,70) exposed: [20,40) is claimed once, by the larger
    # (cuda:1's comm, 50 ns); the copy keeps [0,20). cuda:0 is idle [40,100) while cuda:1 works
    # (compute [70,100)): cross_device keeps [70,100) = 30 ns (no launches known: not idle_launch).
    tr = make_trace([(0, 7, "copy", 0, 40, 1), (1, 7, "comm", 20, 70, 2), (1, 7, "compute", 70, 100, 3)])
    f = findings(tr, min_share=0.0)
    got = [(r.kind, r.subject, r.headroom_ns) for r in f.itertuples()]
    assert got == [("exposed_comm", "cuda:1", 50), ("cross_device", "cuda:0", 30), ("exposed_copy", "cuda:0 HtoD", 20)]
    # under 2% of the 100 ns window: a 1 ns exposed copy is dropped
    tiny = make_trace([(0, 7, "compute", 0, 99, 1), (0, 7, "copy", 99, 100, 2)])
    assert findings(tiny).empty


@pytest.mark.parametrize(("op", "replays"), [("aten::mm", False), ("autograd::engine::evaluate_function: CompiledFunctionBackward", False),
                                           ("Torch-Compiled Region: 0/0", False), ("Torch-Compiled Region: 0/0", True)])
def test_launch_bound_sync_and_stream_wait(op, replays):
    # A [0,10) launched at 0; gap [10,30): the host in aten::mm [10,25) launches B at 25 ([10,25) in an op,
    # [25,30) launch latency: launch-bound); gap [40,50) with C queued since 5 on stream 9 (10 ns: no longer than the
    # device's own gaps between queued kernels, no finding; the idle table keeps it); gap [60,80) while the host sits
    # in cudaStreamSynchronize [60,80) before launching D; D [80,100).
    tr = make_trace(
        [(0, 7, "compute", 0, 10, 1), (0, 7, "compute", 30, 40, 2), (0, 9, "compute", 50, 60, 3), (0, 7, "compute", 80, 100, 4)],
        [("cuda_runtime", "cudaLaunchKernel", 0, 1, 1), ("cpu_op", op, 10, 25, -1), ("cuda_runtime", "cudaLaunchKernel", 25, 26, 2),
         ("cuda_runtime", "cudaLaunchKernel", 5, 6, 3), ("cuda_runtime", "cudaStreamSynchronize", 60, 80, -1),
         ("cuda_runtime", "cudaLaunchKernel", 80, 81, 4), *([("cuda_runtime", "cudaGraphLaunch", 90, 91, -1)] if replays else [])],
    )
    f = findings(tr)
    got = {(r.kind, r.subject): r.headroom_ns for r in f.itertuples()}
    assert got == {("idle_launch", "cuda:0"): 20, ("idle_sync", "cuda:0"): 20}
    assert idle_causes(tr)[0].ns("queued") == 10
    launch = f.set_index("kind").loc["idle_launch", "text"]
    assert op in launch and "CUDA graphs" in launch
    # a compiled region is told to capture its kernels in graphs, not to compile; one that replays graphs already, what is left
    assert ("torch.compile it" in launch) == (op == "aten::mm")
    assert ('mode="reduce-overhead"' in launch) == (op != "aten::mm" and not replays)
    assert ("replays CUDA graphs already" in launch) == replays


def test_nonblocking_top_finding_is_dtoh_and_overlapped_has_no_copy_finding():
    nb = findings(load_trace(SAMPLES / "compute-copy.nonblocking.pt.trace.json.gz"))
    top = nb.iloc[0]
    assert (top["kind"], top["subject"]) == ("exposed_copy", "cuda:0 DtoH")
    assert top["headroom_ns"] == pytest.approx(58.0e6, rel=0.03)
    ov = findings(load_trace(SAMPLES / "compute-copy.overlapped.pt.trace.json.gz"))
    assert not (ov["kind"] == "exposed_copy").any()


@pytest.mark.parametrize("name", ["multi-gpu.sequential", "data-parallel.ddp.rank1", "small-ops.one-stream", "model-parallel.naive"])
def test_samples_headroom_within_window(name):
    tr = load_trace(SAMPLES / f"{name}.pt.trace.json.gz")
    f = findings(tr)
    lo, hi = tr.window_ns
    assert 0 < f["headroom_ns"].sum() <= hi - lo
    assert (f["headroom_ns"] >= 0.02 * (hi - lo)).all()


def test_a_dependency_wait_says_when_the_trace_does_not_show_what_it_waited_for():
    """SYNTHETIC (µs): cuda:0 runs A [0, 100); B, launched at 5 (before the gap), starts at 400. With no other device
    work in the trace, the 300 µs of queued idle time waited on something the trace does not show; with cuda:1 busy
    [100, 450) (no work there ended before B: the graph binds B to none), the producer may be there, and the advice is
    to start it earlier; with cuda:1 busy [100, 400), the graph binds B to that work: a dependency wait naming it."""
    u = 1_000
    host = [("cuda_runtime", "cudaLaunchKernel", 0, u, 1), ("cuda_runtime", "cudaLaunchKernel", 5 * u, 6 * u, 2)]
    alone = findings(make_trace([(0, 7, "compute", 0, 100 * u, 1), (0, 7, "compute", 400 * u, 500 * u, 2)], host), min_share=0)
    wait = alone[alone["kind"] == "queued_wait"].iloc[0]  # (queued: no edge of the graph binds B, 300 µs apart)
    assert wait["headroom_ns"] == 300 * u and "the trace does not show what it waited for" in wait["text"]
    assert wait["label"] == "queued wait 0.3 ms" and "(on stream 7)" in wait["text"]
    host.append(("cuda_runtime", "cudaLaunchKernel", 7 * u, 8 * u, 3))
    beside = findings(make_trace([(0, 7, "compute", 0, 100 * u, 1), (0, 7, "compute", 400 * u, 500 * u, 2),
                                  (1, 7, "compute", 100 * u, 450 * u, 3)], host), min_share=0)
    wait = beside[(beside["kind"] == "queued_wait") & (beside["device"] == 0)].iloc[0]
    assert "start the producer earlier" in wait["text"] and "does not show" not in wait["text"]
    bound = findings(make_trace([(0, 7, "compute", 0, 100 * u, 1), (0, 7, "compute", 400 * u, 500 * u, 2),
                                 (1, 7, "compute", 100 * u, 400 * u, 3)], host), min_share=0)
    wait = bound[(bound["kind"] == "stream_wait") & (bound["device"] == 0)].iloc[0]
    assert wait["headroom_ns"] == 300 * u and "start that work earlier or break the dependency" in wait["text"]
