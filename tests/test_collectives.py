"""Collectives across ranks (analysis/collectives.py).

SYNTHETIC multi-rank traces (written by tests/synthetic.py's TraceBuilder, with
Kineto's collective args on the NCCL kernels) with hand-computed skew, wait,
straggler and bandwidth; the real DDP and FSDP sample runs for matching.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from synthetic import TraceBuilder

from traceprobe import load_trace
from traceprobe.analysis.job.collectives import collective_table, match_window
from traceprobe.analysis.job.comm_types import collective_type

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"


def nccl(b: TraceBuilder, start: int, dur: int, pg: str = "0", coll: str = "allreduce", nelems: int = 1000, args: bool = True):
    """A launched NCCL kernel (launch 1 µs before) carrying Kineto's collective args."""
    ev = b.nccl(0, 17, start, dur)
    b.runtime(start - 1000, 500, name="cudaLaunchKernel", correlation=ev["args"]["correlation"])
    if args:
        ev["args"].update({"Collective name": coll, "In msg nelems": nelems, "Out msg nelems": nelems, "Group size": 2,
                           "dtype": "Float", "Process Group Name": pg})
    return ev


def table(b: TraceBuilder, tmp_path: Path, name: str):
    return collective_table(load_trace(b.write(tmp_path / f"{name}.pt.trace.json")))


def test_straggler_whose_collectives_start_late(tmp_path):
    r0, r1 = TraceBuilder("rank 0", rank=0, world_size=2), TraceBuilder("rank 1", rank=1, world_size=2)
    for i in range(3):
        t = 100_000 * (i + 1)
        nccl(r0, t, 60_000)            # rank 0 arrives first and spins until rank 1 comes
        nccl(r1, t + 40_000, 20_000)   # rank 1 arrives 40 µs late; both end at t + 60 µs
    w = match_window({0: table(r0, tmp_path, "r0"), 1: table(r1, tmp_path, "r1")})
    assert w.matched == 3 and not w.mismatched
    assert w.wait_ns == {0: 3 * 40_000, 1: 0}
    assert w.straggler_rank == 1
    m = w.matches
    assert m["skew_ns"].tolist() == [40_000] * 3 and m["last_rank"].tolist() == [1] * 3
    assert m["time_ns"].tolist() == [20_000] * 3
    # S = 1000 x 4 bytes over 20 µs = 0.2 GB/s; all-reduce busbw factor 2(n-1)/n = 1 for n = 2
    assert m["algbw_gbps"].tolist() == pytest.approx([0.2] * 3)
    assert m["busbw_gbps"].tolist() == pytest.approx([0.2] * 3)
    assert w.implausible == 0


def test_a_window_of_one_trace_without_a_rank_matches_nothing(tmp_path):
    """SYNTHETIC: one trace without ``distributedInfo`` (its window's rank is None) holding NCCL kernels: nothing to
    match them against, no error (before the one-sort matching of process groups: ``int(None)``)."""
    b = TraceBuilder("alone")
    for i in range(2):
        nccl(b, 100_000 * (i + 1), 20_000)
    w = match_window({None: table(b, tmp_path, "alone")})  # type: ignore[dict-item]
    assert w.matched == 0 and not w.mismatched


def test_two_process_groups_and_a_mismatched_count(tmp_path):
    r0, r1 = TraceBuilder("rank 0", rank=0, world_size=2), TraceBuilder("rank 1", rank=1, world_size=2)
    # pg "0": all-reduce at 100 and 300 µs on both ranks; pg "1": all-gathers, interleaved differently
    for b in (r0, r1):
        nccl(b, 100_000, 10_000, pg="0")
        nccl(b, 300_000, 10_000, pg="0")
    nccl(r0, 200_000, 10_000, pg="1", coll="_allgather_base")
    nccl(r1, 50_000, 10_000, pg="1", coll="_allgather_base")
    w = match_window({0: table(r0, tmp_path, "r0"), 1: table(r1, tmp_path, "r1")})
    assert w.matched == 3
    assert sorted(zip(w.matches["pg"], w.matches["collective"])) == [("0", "allreduce"), ("0", "allreduce"), ("1", "allgather")]
    ag = w.matches[w.matches["pg"] == "1"].iloc[0]
    assert (ag["skew_ns"], ag["last_rank"]) == (150_000, 0)
    # the all-gather of rank 0 ends (210 µs) after rank 1's starts (50 µs): plausible; rank 1's ends at 60 µs,
    # before rank 0's starts: clocks would disagree by 140 µs
    assert (w.implausible, w.max_offset_ns) == (1, 140_000)
    # a third all-gather on rank 0 only: pg "1" is reported, not guessed; pg "0" still matches
    nccl(r0, 400_000, 10_000, pg="1", coll="_allgather_base")
    w = match_window({0: table(r0, tmp_path, "r0b"), 1: table(r1, tmp_path, "r1b")})
    assert w.matched == 2
    assert w.mismatched == ("process group '1': rank 0 has 2, rank 1 has 1: not matched",)


def _mesh_rank(r: int, tp_names: tuple[str, str]) -> TraceBuilder:
    """SYNTHETIC rank r of a 2 x 2 (dp, tp) mesh: tp groups {0, 1} and {2, 3} named ``tp_names``, dp groups {0, 2}, {1, 3}
    named "3" and "4", as ``pg_config`` lists the groups a rank is a member of."""
    tp, dp = r // 2, r % 2
    cfg = [{"pg_name": "0", "pg_desc": "default_pg", "pg_size": 4, "ranks": [0, 1, 2, 3]},
           {"pg_name": tp_names[tp], "pg_desc": "mesh_tp", "pg_size": 2, "ranks": [2 * tp, 2 * tp + 1]},
           {"pg_name": "34"[dp], "pg_desc": "mesh_dp", "pg_size": 2, "ranks": [dp, dp + 2]}]
    return TraceBuilder(f"rank {r}", rank=r, world_size=4, pg_config=cfg)


@pytest.mark.parametrize("tp_names", [("1", "2"), ("1", "1")], ids=["own-names", "split-group-shared-name"])
def test_a_2d_mesh_matches_each_group_among_its_members(tmp_path, tp_names):
    """Tensor parallel inside data parallel: every group is matched among the ranks pg_config lists for it, also where
    the two tp groups share one name (split_group); rank 0 arrives 5 ms late at each tp all-reduce of its group."""
    tables = {}
    for r in range(4):
        b = _mesh_rank(r, tp_names)
        tp = r // 2
        for i in range(3):  # three tp all-reduces, then one dp all-reduce
            late = 5_000_000 if r == 0 else 0
            nccl(b, 10_000_000 * (i + 1) + late, 6_000_000 - (late if r == 1 else 0) + (5_000_000 if r == 1 else 0), pg=tp_names[tp])
        nccl(b, 50_000_000 + 1_000 * r, 1_000_000, pg="34"[r % 2])
        tables[r] = table(b, tmp_path, f"r{r}")
    w = match_window(tables)
    assert w.mismatched == () and w.matched == 3 * 2 + 2
    assert w.straggler_rank == 0
    m = w.matches
    tp_rows = m[m["pg"].str.startswith(tp_names[0]) & (m["last_rank"] <= 1)]
    assert len(tp_rows) == 3 and (tp_rows["skew_ns"] == 5_000_000).all() and (tp_rows["ranks"] == 2).all()
    assert (w.wait_ns[1], w.wait_ns[2], w.wait_ns[3]) == (3 * 5_000_000 + 2_000, 0, 0)  # (+ its dp all-reduce: rank 3 came 2 µs later)
    if tp_names[0] == tp_names[1]:
        assert set(m["pg"]) == {"1[0,1]", "1[2,3]", "3", "4"}


def test_kernels_launched_before_the_trace_and_names_only(tmp_path):
    b = TraceBuilder("rank 0", rank=0, world_size=2)
    b.nccl(0, 17, 0, 5_000)  # no launch in the trace: in flight from an unrecorded step
    nccl(b, 100_000, 10_000, args=False)  # type and dtype from the kernel name only
    t = table(b, tmp_path, "r0")
    assert len(t) == 1
    assert (t["collective"][0], t["dtype"][0], t["bytes"][0], t["pg"][0]) == ("allreduce", "f32", -1, "")


@pytest.mark.parametrize("name,want", [("allreduce", "allreduce"), ("_allgather_base", "allgather"),
                                       ("_reduce_scatter_base", "reducescatter"), ("ncclDevKernel_Broadcast_RING_LL", "broadcast"),
                                       ("all_to_all", "alltoall"), ("barrier", "other")])
def test_collective_type(name, want):
    assert collective_type(name) == want


def _window(files: list[Path]):
    tabs = {}
    for f in files:
        t = load_trace(f)
        assert t.rank is not None
        tabs[t.rank] = collective_table(t)
    return tabs, match_window(tabs)


def test_ddp_sample_matched_one_to_one():
    tabs, w = _window([SAMPLES / f"data-parallel.ddp.rank{r}.pt.trace.json.gz" for r in (0, 1)])
    assert len(tabs[0]) == len(tabs[1]) == w.matched == 24
    assert not w.mismatched and w.implausible == 0
    assert set(w.by_type["collective"]) == {"allreduce"}
    assert (w.matches["bytes"] == 16781312 * 4).all()
    assert 100 < w.by_type["busbw_gbps"][0] < 500
    # the straggler is the rank the other waited for
    assert w.straggler_rank == 0 and w.wait_ns[1] > w.wait_ns[0]


@pytest.mark.parametrize("run,count", [("tb-ddp", 45), ("tb-fsdp", 78)])
def test_training_runs_match_per_window(run, count):
    files = sorted((SAMPLES / "training" / run).glob("*.pt.trace.json.gz"))
    by_rank = {r: [f for f in files if f.name.startswith(f"rank{r}.")] for r in (0, 1)}
    for window in range(2):  # file names sort by window within a rank
        _, w = _window([by_rank[0][window], by_rank[1][window]])
        assert w.matched == count and not w.mismatched and w.implausible == 0


def test_args_from_the_host_op_that_launched_the_kernel(tmp_path):
    # older torch: the kernel has no collective args; record_param_comms has them, linked by the launch's External id
    b = TraceBuilder("rank 0", rank=0, world_size=2)
    ev = nccl(b, 100_000, 10_000, args=False)
    launch = next(e for e in b.events if e["cat"] == "cuda_runtime")
    op = b.cpu_op(98_000, 5_000, name="record_param_comms")
    op["args"].update({"Collective name": "_reduce_scatter_base", "In msg nelems": 4096, "Out msg nelems": 2048,
                       "dtype": "BFloat16", "Group size": 2, "Process Group Name": "7"})
    launch["args"]["External id"] = op["args"]["External id"]
    t = table(b, tmp_path, "r0")
    assert ev["args"].get("Collective name") is None
    assert t[["collective", "bytes", "dtype", "pg", "group_size"]].values.tolist() == [["reducescatter", 8192, "BFloat16", "7", 2]]


def test_a_trace_without_launches_keeps_every_collective_kernel(tmp_path):
    b = TraceBuilder("device activity only", rank=0, world_size=2)
    b.nccl(0, 17, 0, 5_000)
    b.nccl(0, 17, 10_000, 5_000)
    assert len(table(b, tmp_path, "r0")) == 2


SENDRECV = "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)"


def test_sendrecv_kernels_of_an_all_to_all_are_no_pipeline_bubble(tmp_path):
    # SYNTHETIC, as HTA's trace_diff traces of TorchRec hold (no collective args): NCCL runs all-to-all as grouped
    # send/recv, so its kernels are named SendRecv; the host op around the launch names the collective
    from traceprobe.analysis.per_trace import overlap_report

    def trace(op_name: str | None, name: str) -> Path:
        b = TraceBuilder("rank 0", rank=0, world_size=2)
        b.launch(0, "kernel", 0, 7, 0, 10_000)
        for at in (20_000, 60_000):
            if op_name is not None:
                b.cpu_op(at - 2_000, 3_000, name=op_name)  # the launch at at - 1000 lies inside it
                b.cpu_op(at - 1_900, 100, name="aten::empty")  # an inner op that ends before the launch
            ev = b.nccl(0, 17, at, 30_000, name=SENDRECV)
            b.runtime(at - 1_000, 500, name="cudaLaunchKernel", correlation=ev["args"]["correlation"])
        return b.write(tmp_path / f"{name}.pt.trace.json")

    a2a = load_trace(trace("nccl:all_to_all", "a2a"))
    assert collective_table(a2a)["collective"].tolist() == ["alltoall", "alltoall"]
    r = overlap_report(a2a)
    assert "bubble" not in r.findings["kind"].tolist() and r.findings["kind"].iloc[0] == "exposed_comm"
    for op_name in ("nccl:send", None):  # a send op, or nothing but the kernel name: point-to-point, a bubble
        p2p = load_trace(trace(op_name, f"p2p-{op_name is None}"))
        assert set(collective_table(p2p)["collective"]) == ({"send"} if op_name else {"sendrecv"})
        assert overlap_report(p2p).findings["kind"].iloc[0] == "bubble"


def _rows(groups: dict) -> pd.DataFrame:
    """SYNTHETIC collective rows: per process group name, its member list, ranks and each rank's types in order."""
    rows = []
    for pg, (members, ranks, types) in groups.items():
        for r in ranks:
            for i, t in enumerate(types if not isinstance(types, dict) else types[r]):
                rows.append({"rank": r, "pg": pg.split("#")[0], "pg_desc": "", "collective": t, "start_ns": 1000 * i + r,
                             "end_ns": 1000 * i + 900, "bytes": 10**6, "pg_ranks": members, "group_size": len(ranks), "p2p": ""})
    df = pd.DataFrame(rows).sort_values(["rank", "start_ns"], kind="stable").reset_index(drop=True)
    return df.astype({"rank": np.int64, "start_ns": np.int64, "end_ns": np.int64, "bytes": np.int64, "group_size": np.int64})


def test_many_groups_matched_at_once():
    """SYNTHETIC: 64 ranks, one group of every rank and 32 groups of two sharing a name (``split_group``): each pair is
    matched among its two ranks, a pair with a rank short of one collective and a pair whose second collectives differ
    in type are each said once and left out, the others matched (their rows numbered per rank)."""
    from traceprobe.analysis.job.collectives import match_rows

    ranks = list(range(64))
    groups = {"0": (",".join(map(str, ranks)), ranks, ["allreduce"] * 3)}
    for p in range(32):
        a, b = 2 * p, 2 * p + 1
        types: dict = {a: ["allgather"] * 2, b: ["allgather"] * 2}
        if p == 5:
            types[b] = ["allgather"]
        if p == 9:
            types[b] = ["allgather", "reduce_scatter"]
        groups[f"1#{p}"] = (f"{a},{b}", [a, b], types)
    w = match_rows(_rows(groups), tuple(ranks))
    assert w.mismatched == ("process group '1': rank 10 has 2, rank 11 has 1: not matched",
                            "process group '1': collective 1 differs in type across ranks: not matched")
    assert w.matched == 3 + 30 * 2
    pr = w.per_rank
    assert sorted(pr["pg"].unique().tolist())[:3] == ["0", "1[0,1]", "1[12,13]"]
    assert not pr["rank"].isin([10, 11, 18, 19]).any() or set(pr.loc[pr["rank"].isin([10, 11, 18, 19]), "pg"]) == {"0"}
    assert pr.groupby(["pg", "rank"])["seq"].apply(list).map(lambda s: s == list(range(len(s)))).all()
    assert (pr.groupby(["pg", "seq"]).size() == pr["pg"].map(lambda g: 64 if g == "0" else 2).groupby([pr["pg"], pr["seq"]]).first()).all()


def test_an_instance_whose_bus_bandwidth_factor_is_0_has_no_ratio_to_its_best():
    """SYNTHETIC: an instance of one member row (a rank outside the group's listed members holding the group's only
    collective): its bus bandwidth factor is 0 (``2(n-1)/n`` of one rank), so is its best bus bandwidth; its ratio to it
    is NaN, where dividing by it raised ZeroDivisionError and failed the whole summary (found by a hypothesis sweep)."""
    from traceprobe.analysis.job.collectives import match_rows

    rows = pd.DataFrame([{"rank": 1, "pg": "0", "pg_desc": "", "collective": "allreduce", "start_ns": 0, "end_ns": 1, "bytes": 1,
                          "pg_ranks": "2,3", "group_size": -1, "p2p": ""}])
    w = match_rows(rows, (0, 1, 2, 3))
    assert w.matched == 1 and w.by_type["best_busbw_gbps"].tolist() == [0.0] and np.isnan(w.by_type["vs_best"].iloc[0])

