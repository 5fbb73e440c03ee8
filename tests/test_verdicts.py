"""Verdicts and their hints, on SYNTHETIC traces (hand-written events, nothing recorded on a GPU).

Every expected value is computed by hand in the comments; times are µs unless said otherwise.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from synthetic import TraceBuilder, load

from traceprobe import overlap_report
from traceprobe.analysis.advice import verdicts as vd
from traceprobe.analysis.job.comm_types import collective_kinds, forward_allreduce_devices
from traceprobe.reading import load_trace


@pytest.mark.parametrize(
    "f,level",
    [(1.0, "confirmed"), (0.5, "confirmed"), (0.4999, "partial"), (0.05, "partial"), (0.0499, "none"), (0.0, "none")],
)
def test_level_of_thresholds(f, level):
    assert vd.CONFIRMED == 0.5 and vd.PARTIAL == 0.05
    assert vd.level_of(f) == level


def by_subject(r, figure: str) -> dict[str, tuple[float, str]]:
    return {v.subject: (v.value, v.level) for v in r.verdicts if v.figure == figure}


def test_copy_verdict_levels(tmp_path):
    b = TraceBuilder("copy verdicts")
    b.kernel(0, 7, 0, 1_000_000)
    b.memcpy(0, 8, 0, 1_000_000, "HtoD")  # 100% overlapped
    b.kernel(0, 7, 2_000_000, 50_000)
    b.memcpy(0, 9, 2_000_000, 1_000_000, "DtoH", "Device", "Pageable")  # 5.0% exactly: partial
    b.kernel(0, 7, 4_000_000, 49_000)
    b.memcpy(0, 9, 4_000_000, 1_000_000, "DtoD")  # 4.9%: none
    b.kernel(0, 7, 6_000_000, 500_000)
    b.memcpy(0, 10, 6_000_000, 1_000_000, "PtoP")  # 50.0% exactly: confirmed
    r = overlap_report(load(b, tmp_path))
    v = by_subject(r, "copy_overlap")
    assert v == {
        "cuda:0 HtoD": (1.0, "confirmed"),
        "cuda:0 DtoH": (pytest.approx(0.05), "partial"),
        "cuda:0 DtoD": (pytest.approx(0.049), "none"),
        "cuda:0 PtoP": (0.5, "confirmed"),
    }  # and no verdict on the 'all' row
    texts = {x.subject: x.text for x in r.verdicts if x.figure == "copy_overlap"}
    assert "parallelism confirmed" in texts["cuda:0 HtoD"]
    assert "partial overlap" in texts["cuda:0 DtoH"]
    assert texts["cuda:0 DtoD"].split(": ", 1)[1].startswith("no overlap")
    assert r.parallelism


def test_device_stream_comm_cpu_verdicts(tmp_path):
    b = TraceBuilder("other verdicts", devices=2, rank=2, world_size=4)
    # device 0 [0,100) µs, device 1 [90,190): 10 of 190 -> partial (0.0526)
    b.kernel(0, 7, 0, 100_000)
    b.nccl(0, 20, 0, 100_000)  # comm fully under compute: confirmed
    b.kernel(1, 7, 90_000, 100_000)
    b.kernel(1, 8, 185_000, 5_000)  # streams on device 1: stream 8's 5 µs is under the 50 µs floor: no verdict
    # host compute [300,400) µs while no device is busy: none
    b.cpu_op(300_000, 100_000, "aten::sort")
    r = overlap_report(load(b, tmp_path))
    assert by_subject(r, "device_concurrency") == {"2 devices": (pytest.approx(10 / 190), "partial")}
    # device 0's two streams (kernel + nccl) are both busy all the time
    assert by_subject(r, "stream_concurrency") == {"cuda:0": (1.0, "confirmed")}
    assert any(n.startswith("the streams of cuda:1 other than the busiest were busy 0.0 ms") and "under the floor" in n for n in r.notes)
    assert r.stream_concurrency["concurrency"].tolist() == pytest.approx([1.0, 0.05])  # the raw figure is kept
    assert by_subject(r, "comm_overlap") == {"cuda:0 (rank 2)": (1.0, "confirmed")}
    assert by_subject(r, "cpu_gpu") == {"host and devices": (0.0, "none")}
    assert r.rank == 2 and r.parallelism


def test_no_verdict_without_a_denominator(tmp_path):
    b = TraceBuilder("one device, one stream, no copies, no comm, no host compute")
    b.kernel(0, 7, 0, 100)
    r = overlap_report(load(b, tmp_path))
    assert r.verdicts == [] and not r.parallelism


def test_cpu_gpu_verdict_uses_the_shorter_side(tmp_path):
    b = TraceBuilder("cpu/gpu")
    b.cpu_op(0, 1_000_000, "aten::sort")  # host compute [0,1000) µs
    b.kernel(0, 7, 900_000, 100_000)  # device [900,1000): all of it under host compute
    r = overlap_report(load(b, tmp_path))
    assert by_subject(r, "cpu_gpu") == {"host and devices": (1.0, "confirmed")}
    assert r.cpu_gpu.fraction == pytest.approx(0.1) and r.cpu_gpu.fraction_of_shorter == 1.0



def test_side_stream_busy_88_percent_beside_compute(tmp_path):
    """A prefetch stream that ran 88.6% of its time beside a long compute stream."""
    b = TraceBuilder("prefetch stream beside compute")
    b.kernel(0, 7, 0, 37_614_000)  # compute [0,37614)
    b.memcpy(0, 8, 36_728_000, 1_000_000, "HtoD")  # copy [36728,37728): 886 under compute
    r = overlap_report(load(b, tmp_path))
    sc = r.stream_concurrency.iloc[0]
    assert (sc["multi_stream_ns"], sc["busy_ns"], sc["side_busy_ns"]) == (886_000, 37_728_000, 1_000_000)
    assert sc["concurrency"] == pytest.approx(886 / 37_728)  # 2.3%: what the old verdict judged ("none")
    assert by_subject(r, "stream_concurrency") == {"cuda:0": (pytest.approx(0.886), "confirmed")}
    assert by_subject(r, "copy_overlap") == {"cuda:0 HtoD": (pytest.approx(0.886), "confirmed")}


def test_copies_under_the_cut_off_are_named(tmp_path):
    b = TraceBuilder("1,600 tiny DtoD copies")
    b.kernel(0, 7, 0, 100_000_000)  # 100 ms of compute
    for i in range(1_600):  # 1,600 copies of 0.5 µs after it: 0.8 ms, 0.79% of 100.8 ms busy
        b.memcpy(0, 7, 100_000_000 + i * 1_000, 500, "DtoD")
    r = overlap_report(load(b, tmp_path))
    assert by_subject(r, "copy_overlap") == {}
    assert "1,600 DtoD copies on cuda:0 took 0.8 ms, 0.8% of its 100.8 ms busy time: under the floor (1% of busy time, 50 µs), no verdict" in r.notes


def test_copies_are_judged_against_busy_time_not_start_up_idle(tmp_path):
    b = TraceBuilder("start-up idle, then 50 ms of compute and a 2 ms copy")
    b.kernel(0, 7, 0, 1_000)  # 1 µs at the start, then 12 s idle
    b.kernel(0, 7, 12_000_000_000, 50_000_000)
    b.memcpy(0, 8, 12_050_000_000, 2_000_000, "HtoD")  # 2 ms: 0.017% of the 12.05 s span, 3.8% of busy time
    r = overlap_report(load(b, tmp_path))
    assert by_subject(r, "copy_overlap") == {"cuda:0 HtoD": (0.0, "none")}


def test_mostly_idle_device_gets_no_free_sm_hint(tmp_path):
    b = TraceBuilder("launch-bound: tiny kernels on two streams, device 20% busy")
    for i in range(10):  # stream 7 [100i, 100i+10), stream 8 [100i+50, 100i+60): never together
        b.kernel(0, 7, i * 100_000, 10_000)
        b.kernel(0, 8, i * 100_000 + 50_000, 10_000)
    r = overlap_report(load(b, tmp_path))
    (v,) = [v for v in r.verdicts if v.figure == "stream_concurrency"]
    assert v.level == "none" and "launch-bound" in v.text and "free SMs" not in v.text
    assert "busy only 21%" in v.text  # 200 of 960 µs


def test_busy_device_keeps_the_free_sm_hint(tmp_path):
    b = TraceBuilder("two streams taking turns on a busy device")
    b.kernel(0, 7, 0, 100_000)
    b.kernel(0, 8, 100_000, 100_000)
    (v,) = [v for v in overlap_report(load(b, tmp_path)).verdicts if v.figure == "stream_concurrency"]
    assert v.level == "none" and "free SMs" in v.text


BACKWARD = "autograd::engine::evaluate_function: AddmmBackward0"
"""A host op that shows a trace trains (:mod:`traceprobe.analysis.host.training`)."""


def test_dataparallel_broadcast_reduce_gets_no_bucketing_advice(tmp_path):
    b = TraceBuilder("nn.DataParallel: broadcast and reduce between compute")
    b.cpu_op(0, 10_000, BACKWARD)
    b.nccl(0, 20, 0, 100_000, name="ncclDevKernel_Broadcast_RING_LL(ncclDevKernelArgsStorage<4096ul>)")
    b.kernel(0, 7, 100_000, 500_000)
    b.nccl(0, 20, 600_000, 100_000, name="ncclDevKernel_Reduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)")
    (v,) = [v for v in overlap_report(load(b, tmp_path)).verdicts if v.figure == "comm_overlap"]
    assert v.level == "none" and "bucket" not in v.text and "DataParallel" in v.text


def test_allreduce_gets_bucketing_advice(tmp_path):
    b = TraceBuilder("all-reduce after backward")
    b.cpu_op(0, 10_000, BACKWARD)
    b.kernel(0, 7, 0, 500_000)
    b.nccl(0, 20, 500_000, 100_000)
    (v,) = [v for v in overlap_report(load(b, tmp_path)).verdicts if v.figure == "comm_overlap"]
    assert v.level == "none" and "bucket gradients" in v.text


def test_ddp_all_reduce_is_not_told_to_bucket_again(tmp_path):
    """SYNTHETIC: the same all-reduce in a trace that shows DistributedDataParallel (its forward's annotation): DDP
    buckets already, so the hint names its buckets' size, not bucketing."""
    b = TraceBuilder("DDP: all-reduce after backward")
    b.annotation("DistributedDataParallel.forward", 0, 5_000)
    b.cpu_op(0, 10_000, BACKWARD)
    b.kernel(0, 7, 0, 500_000)
    b.nccl(0, 20, 500_000, 100_000)
    (v,) = [v for v in overlap_report(load(b, tmp_path)).verdicts if v.figure == "comm_overlap"]
    assert v.level == "none" and "bucket_cap_mb" in v.text and "bucket gradients" not in v.text


def test_fsdp_all_gather_gets_prefetch_advice_not_buckets(tmp_path):
    """SYNTHETIC: FSDP's all-gather before the layer's compute, exposed: shards are prefetched, not gradients bucketed."""
    b = TraceBuilder("FSDP: all-gather before compute")
    b.cpu_op(0, 10_000, BACKWARD)
    b.nccl(0, 20, 0, 100_000, name="ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)")
    b.kernel(0, 7, 100_000, 500_000)
    (v,) = [v for v in overlap_report(load(b, tmp_path)).verdicts if v.figure == "comm_overlap"]
    assert v.level == "none" and "bucket" not in v.text and "prefetch" in v.text


def test_ddp_bucket_copies_are_not_told_to_move(tmp_path):
    b = TraceBuilder("DDP: DtoD bucket copies on the compute stream beside all-reduce")
    b.cpu_op(0, 10_000, BACKWARD)
    b.kernel(0, 7, 0, 500_000)
    b.memcpy(0, 7, 500_000, 50_000, "DtoD")
    b.nccl(0, 20, 550_000, 100_000)
    b.kernel(0, 7, 550_000, 100_000)
    (v,) = [v for v in overlap_report(load(b, tmp_path)).verdicts if v.figure == "copy_overlap"]
    assert v.level == "n/a" and "gradient_as_bucket_view" in v.text and "separate stream" not in v.text
    assert "no overlap" not in v.text and v.value == 0.0  # measured, not judged: no failure told


def test_plain_dtod_copies_keep_the_stream_hint(tmp_path):
    b = TraceBuilder("DtoD copies on the compute stream, no collectives")
    b.kernel(0, 7, 0, 500_000)
    b.memcpy(0, 7, 500_000, 50_000, "DtoD")
    (v,) = [v for v in overlap_report(load(b, tmp_path)).verdicts if v.figure == "copy_overlap"]
    assert "separate stream" in v.text and v.level == "none"


def test_the_floor_is_relative_to_busy_time_and_absolute():
    assert vd.MIN_NS == 50_000 and vd.MIN_SHARE == 0.01
    assert vd.too_small(5_999_999, 600_000_000) and not vd.too_small(6_000_000, 600_000_000)  # 1% of 600 ms
    assert vd.too_small(49_999, 100_000) and not vd.too_small(50_000, 100_000) and not vd.too_small(50_000, 0)  # 50 µs


def test_ddp_bucket_copies_get_the_same_words_as_a_finding(tmp_path):
    """SYNTHETIC: DDP's DtoD bucket copies with nothing beside them: the finding tells what the verdict tells (the
    wrapper's own copies, gradient_as_bucket_view=True), not to move them to a side stream; without training evidence
    (no backward op) the copies are plain copies, and both tell to overlap them."""
    def trace(training: bool):
        b = TraceBuilder("DDP: DtoD bucket copies, exposed, beside all-reduce" + ("" if training else " (no backward)"))
        if training:
            b.cpu_op(0, 10_000, BACKWARD)
        b.kernel(0, 7, 0, 500_000)
        b.memcpy(0, 7, 500_000, 200_000, "DtoD")
        b.nccl(0, 20, 700_000, 100_000)
        b.kernel(0, 7, 700_000, 100_000)
        return overlap_report(load(b, tmp_path, f"t{int(training)}.pt.trace.json"))

    r = trace(True)
    (f,) = [f for f in r.findings.to_dict(orient="records") if f["subject"].endswith("DtoD")]
    (v,) = [v for v in r.verdicts if v.figure == "copy_overlap"]
    assert f["kind"] == "wrapper_copy" and "gradient_as_bucket_view" in f["text"] and "side stream" not in f["text"]
    assert "gradient_as_bucket_view" in v.text
    plain = trace(False)
    (f,) = [f for f in plain.findings.to_dict(orient="records") if f["subject"].endswith("DtoD")]
    assert f["kind"] == "exposed_copy" and "side stream" in f["text"]


def test_expert_parallel_all_to_all_gets_its_own_hint():
    """Recorded (sample_traces/matrix/ep-balanced, 4x H200, MoE's all-to-all beside an all-reduce, forward only): NCCL
    names its all-to-all kernels ``SendRecv``; the trace's args type them. The communication verdict told the
    tensor-parallel all-reduce of inference (the kernels' names alone: sendrecv and allreduce); now all-to-all's."""
    trace = next((Path(__file__).resolve().parent.parent / "sample_traces" / "matrix" / "ep-balanced").glob("rank0.*.pt.trace.json.gz"))
    t = load_trace(trace)
    assert "alltoall" in collective_kinds(t)[0]
    (v,) = [v for v in overlap_report(t).verdicts if v.figure == "comm_overlap"]
    assert v.level == "none" and "all-to-all" in v.text and "tensor-parallel" not in v.text


def test_tensor_parallel_all_reduce_in_forward_is_not_told_to_bucket():
    """Recorded (sample_traces/causes/tensor-parallel, 2x H200 training, each linear's all-reduce in forward and backward;
    matrix/ddp-balanced, DDP): an all-reduce launched outside every autograd backward op is tensor parallelism's, and its
    verdict names it, not gradient buckets; DDP's, all launched from backward's hooks, keep the bucket hint."""
    samples = Path(__file__).resolve().parent.parent / "sample_traces"

    def comm(folder: str):
        t = load_trace(next((samples / folder).glob("rank0.*.pt.trace.json.gz")))
        (v,) = [v for v in overlap_report(t).verdicts if v.figure == "comm_overlap"]
        return forward_allreduce_devices(t), v

    fwd, v = comm("causes/tensor-parallel")
    assert fwd == {0} and v.level == "none" and "tensor parallelism" in v.text and "bucket" not in v.text
    fwd, v = comm("matrix/ddp-balanced")
    assert fwd == frozenset() and "tensor parallelism" not in v.text


@pytest.mark.parametrize("forward", [False, True])
def test_an_all_reduce_inside_a_nested_backward_op_is_backwards(tmp_path, forward):
    """SYNTHETIC: autograd's thread runs a backward op holding a nested one that ends before the all-reduce's launch:
    the launch is inside the outer op (backward's). A second all-reduce launched on the main thread, outside every
    backward op, is the forward's."""
    b = TraceBuilder("an all-reduce launched inside nested backward ops" + (", another in forward" if forward else ""))
    b.cpu_op(0, 100_000, BACKWARD, tid=2)
    b.cpu_op(10_000, 10_000, BACKWARD, tid=2)
    c = b.runtime(50_000, 1_000, tid=2)["args"]["correlation"]
    b.nccl(0, 20, 60_000, 10_000, correlation=c)
    if forward:
        c = b.runtime(200_000, 1_000)["args"]["correlation"]
        b.nccl(0, 20, 210_000, 10_000, correlation=c)
    assert forward_allreduce_devices(load(b, tmp_path)) == ({0} if forward else frozenset())
