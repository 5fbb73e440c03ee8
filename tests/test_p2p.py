"""Point-to-point transfers: which kernel ran which send/recv, their pairing across ranks, and the pipeline's
dependency through them (traceprobe.analysis.job.p2p, what_if, critical_path).

SYNTHETIC two-stage pipelines built with tests/synthetic.py's TraceBuilder (times exact, gains by hand), and the
recorded 4-stage 1F1B pipeline of sample_traces/matrix (4x H200: batched send/recv in ``nccl:coalesced`` groups).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from synthetic import TraceBuilder

from traceprobe import load_trace
from traceprobe.analysis.causal.critical_path import critical_path
from traceprobe.analysis.causal.dependency_graph import rank_graph
from traceprobe.analysis.causal.what_if import what_if
from traceprobe.analysis.causal.what_if_windows import window_instances
from traceprobe.analysis.job.collectives import collective_table, match_window

SENDRECV = "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"
PG = [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": 2, "ranks": [0, 1]}]
MATRIX = Path(__file__).resolve().parent.parent / "sample_traces" / "matrix"


def _p2p(b: TraceBuilder, at: int, kind: str, peer: int) -> None:
    """torch's host ops of one point-to-point call: ``record_param_comms`` naming it, then ``nccl:coalesced``."""
    op = b.cpu_op(at, 20_000, name="record_param_comms")
    op["args"].update({"Collective name": kind, "Src Rank" if kind == "recv" else "Dst Rank": peer, "Group size": 2,
                       "Process Group Name": "0", "In msg nelems": 1024, "Out msg nelems": 1024, "dtype": "Float"})
    b.annotation("nccl:coalesced", at + 30_000, 40_000)


def _pipeline(tmp_path: Path, first_gemm_us: int = 5_000):
    """Stage 0 (rank 0) computes ``first_gemm_us`` µs, then sends to stage 1; stage 1 posted its receive at 1 ms and
    computes 3 ms once the activation arrived (its GEMM waits for the receive's kernel on another stream)."""
    traces = []
    for rank in (0, 1):
        b = TraceBuilder(f"SYNTHETIC 2-stage pipeline, rank {rank}", rank=rank, world_size=2, pg_config=PG)
        if rank == 0:
            b.launch(50_000, "kernel", 0, 7, 100_000, first_gemm_us * 1_000)
            _p2p(b, 940_000, "send", 1)
            b.launch(1_000_000, "nccl", 0, 20, first_gemm_us * 1_000 + 110_000, 500_000, name=SENDRECV)
        else:
            _p2p(b, 940_000, "recv", 0)
            b.launch(1_000_000, "nccl", 0, 20, 1_010_000, first_gemm_us * 1_000 + 110_000 + 500_000 - 1_010_000, name=SENDRECV)
            b.launch(1_100_000, "kernel", 0, 7, first_gemm_us * 1_000 + 620_000, 3_000_000)
        traces.append(load_trace(b.write(tmp_path / f"rank{rank}.pt.trace.json")))
    return traces


def test_a_kernel_carries_its_transfers_and_the_two_sides_pair(tmp_path):
    traces = _pipeline(tmp_path)
    tables = {t.rank: collective_table(t) for t in traces}
    assert tables[0][["collective", "pg", "p2p"]].values.tolist() == [["send", "0", "send:1"]]
    assert tables[1][["collective", "pg", "p2p"]].values.tolist() == [["recv", "0", "recv:0"]]
    w = match_window(tables)
    assert w.matched == 0 and not w.mismatched  # (a transfer is no collective to match, and nothing is left unpaired)
    assert w.p2p[["pg", "seq", "rank"]].values.tolist() == [["0:0->1", 0, 0], ["0:0->1", 0, 1]]


def test_a_late_stage_delays_the_next_one_through_its_send(tmp_path):
    """Rank 0's GEMM runs 5 ms against rank 1's 3 ms: without it, its send starts 2 ms earlier, rank 1's receive ends
    2 ms earlier and so does its GEMM: the window gains exactly 2 ms. Unpaired, rank 1 would not move at all."""
    traces = _pipeline(tmp_path)
    w = match_window({t.rank: collective_table(t) for t in traces})
    graphs = [rank_graph(t) for t in traces]
    df = what_if(graphs, window_instances(w))
    top = df.iloc[0]
    assert (top["cause"], int(top["rank"]), int(top["gain_ns"])) == ("imbalance", 0, 2_000_000)
    assert (what_if(graphs, None)["gain_ns"] < 2_000_000).all()
    path = critical_path(graphs, window_instances(w))
    assert set(path["rank"]) == {0, 1}  # (the path crosses from the receiving stage into the sending one)
    crossing = path[(path["rank"] == 1) & (path["cause"] == "comm")]
    assert crossing["start_ns"].tolist() == [traces[0].device_events["start_ns"].max()]


def test_unequal_counts_in_one_direction_are_not_paired(tmp_path):
    traces = _pipeline(tmp_path)
    tables = {t.rank: collective_table(t) for t in traces}
    extra = tables[0].iloc[[0]].assign(start_ns=tables[0]["start_ns"] + 10_000_000, end_ns=tables[0]["end_ns"] + 10_000_000)
    import pandas as pd

    w = match_window({0: pd.concat([tables[0], extra], ignore_index=True), 1: tables[1]})
    assert w.p2p.empty
    assert w.mismatched == ("process group '0': rank 0 sent 2 to rank 1, which received 1: not paired",)


@pytest.mark.parametrize("name", ["pp-balanced", "pp-compute"])
def test_the_recorded_pipeline_pairs_every_transfer(name):
    traces = [load_trace(p) for p in sorted((MATRIX / name).glob("*.pt.trace.json.gz"))]
    w = match_window({t.rank: collective_table(t) for t in traces})
    assert not w.mismatched
    sides = w.p2p.groupby(["pg", "seq"])["rank"].agg(["size", "nunique"])
    assert len(sides) > 0 and (sides["size"] == 2).all() and (sides["nunique"] == 2).all()
    # stages talk to their neighbours only: 0<->1, 1<->2, 2<->3, both ways
    assert sorted(set(w.p2p["pg"])) == sorted(f"0:{a}->{b}" for a, b in [(0, 1), (1, 0), (1, 2), (2, 1), (2, 3), (3, 2)])
