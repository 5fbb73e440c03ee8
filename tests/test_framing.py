"""Framing on SYNTHETIC traces (hand-written events, nothing recorded): the verdicts' floor, backend names,
training words only on training traces, set-aside reasons of work without a launch link.

Times are µs in the comments, ns in the calls.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from synthetic import BASE, TraceBuilder, load, write_trace

from traceprobe import load_trace, overlap_report
from traceprobe.analysis.diff import report_figures
from traceprobe.analysis.host.training import training_evidence

TRAINING_WORDS = re.compile(r"DDP|DistributedDataParallel|FSDP|bucket|gradient|backward|optimizer|DataParallel", re.IGNORECASE)


def _texts(r) -> list[str]:
    return [v.text for v in r.verdicts] + list(r.notes)


# --- one floor for every verdict ---------------------------------------------------------------


def test_side_stream_under_the_floor_gets_no_verdict_and_no_parallelism(tmp_path):
    """A serving loop: 20 ms of compute on stream 7 and 30 µs on a side stream, all beside the compute (so the
    side-stream figure reads 100%): under 50 µs and under 1% of busy time, no verdict, no parallelism."""
    b = TraceBuilder("side stream under the floor")
    b.kernel(0, 7, 0, 20_000_000)
    b.kernel(0, 8, 1_000_000, 30_000)
    r = overlap_report(load(b, tmp_path))
    assert r.stream_concurrency["side_concurrency"].tolist() == [1.0]
    assert [v for v in r.verdicts if v.figure == "stream_concurrency"] == [] and not r.parallelism
    assert any(n.startswith("the streams of cuda:0 other than the busiest were busy 0.0 ms, 0.1% of its 20.0 ms busy time")
               and "under the floor (1% of busy time, 50 µs), no verdict" in n for n in r.notes)


def test_the_floor_is_also_a_share_of_busy_time(tmp_path):
    """A 1 ms side-stream copy (well over 50 µs) beside 200 ms of compute: 0.5% of busy, under the 1% floor."""
    b = TraceBuilder("side stream 0.5% of busy")
    b.kernel(0, 7, 0, 200_000_000)
    b.kernel(0, 8, 0, 1_000_000)
    r = overlap_report(load(b, tmp_path))
    assert not r.parallelism and [v.figure for v in r.verdicts] == []
    b.kernel(0, 8, 10_000_000, 2_000_000)  # now 3 ms: 1.5%, judged
    r = overlap_report(load(b, tmp_path, "more.json"))
    assert [(v.figure, v.level) for v in r.verdicts] == [("stream_concurrency", "confirmed")] and r.parallelism


def test_device_concurrency_floor_counts_the_devices_other_than_the_busiest(tmp_path):
    b = TraceBuilder("device 1 busy 20 µs beside 10 ms of device 0", devices=2)
    b.kernel(0, 7, 0, 10_000_000)
    b.kernel(1, 7, 0, 20_000)
    assert [v for v in overlap_report(load(b, tmp_path)).verdicts if v.figure == "device_concurrency"] == []


# --- backend names -----------------------------------------------------------------------------


def _rocm_trace(tmp_path):
    """A ROCm trace (``hip_runtime_version`` at the top, roctracer copy names): compute, a copy on the compute
    stream after it, RCCL all-reduce beside nothing, over two steps."""
    b = TraceBuilder("ROCm: copy and all-reduce after compute", base_ns=BASE)
    b.step(1, 0, 1_000_000)
    b.launch(10_000, "kernel", 0, 0, 100_000, 500_000, name="Cijk_Ailk_Bljk_HHS_BH_MT128x128x32")
    b.launch(20_000, "memcpy", 0, 0, 600_000, 200_000, "DtoD", name="CopyDeviceToDevice")
    b.launch(30_000, "nccl", 0, 1, 800_000, 300_000, name="ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)")
    b.kernel(0, 0, 5_000, 60_000)  # no launch in the trace: set aside
    doc = b.to_dict()
    doc["hip_runtime_version"] = 60032830
    return load_trace(write_trace(doc, tmp_path / "rocm.json"))


def test_rocm_trace_names_hip_devices_everywhere(tmp_path):
    t = _rocm_trace(tmp_path)
    assert t.backend == "hip"
    r = overlap_report(t)
    assert r.backend == "hip"
    assert {v.subject for v in r.verdicts} >= {"hip:0 DtoD", "hip:0"}
    texts = _texts(r)
    assert texts and not any("cuda" in x.lower() or "NCCL" in x for x in texts), texts
    (copy,) = [v for v in r.verdicts if v.figure == "copy_overlap"]
    assert "ordered by HIP events" in copy.text
    assert any(n.startswith("0.1 ms of compute on hip:0 (1 kernels) launched before the trace began") for n in r.notes)
    subjects = {s for _, s, _ in report_figures(r)}
    assert "hip:0" in subjects and not any(s.startswith("cuda") for s in subjects)


def _mtia_trace(tmp_path):
    """An MTIA trace: kernels launched by runtime calls, DMA requests with no correlation id (as MTIA writes them)."""
    b = TraceBuilder("MTIA: DMA requests without correlation", base_ns=BASE)
    b.step(1, 0, 2_000_000)
    for k in range(3):
        c = b.runtime(k * 100_000 + 10_000, 1_000, "mtiaLaunchKernel")["args"]["correlation"]
        b.raw({"ph": "X", "cat": "mtia_ccp_events", "name": "pe_exe", "pid": 17, "tid": 3774, "ts": (BASE + k * 500_000 + 100_000) / 1e3,
               "dur": 400.0, "args": {"correlation": c}})
        b.raw({"ph": "X", "cat": "mtia_ccp_events", "name": "dma_request", "pid": 17, "tid": 3808,
               "ts": (BASE + k * 500_000 + 300_000) / 1e3, "dur": 300.0, "args": {"direction": "HostToDevice"}})
    return load(b, tmp_path, "mtia.json")


def test_mtia_work_without_correlation_is_kept_and_said_so(tmp_path):
    t = _mtia_trace(tmp_path)
    assert t.backend == "mtia" and (t.device_events["correlation"] < 0).sum() == 3
    r = overlap_report(t)
    assert r.set_aside.empty  # not "launched before the trace began": nothing links them to any launch
    assert r.copy_overlap.set_index("direction").loc["all", "copy_ns"] == 900_000  # the DMA requests count
    assert r.steps["events"].tolist() == [6]  # placed in the step by their start
    (note,) = [n for n in r.notes if "launch link" in n]
    assert note == ("0.9 ms of memcpy on mtia:17 (3 events): this backend records no launch link for these events "
                    "(no correlation id): kept, placed in the steps by their start")
    texts = _texts(r)
    assert not any("cuda" in x.lower() for x in texts), texts


# --- training words only on training traces ----------------------------------------------------


def _tp_serving(tmp_path, training: bool):
    """Tensor-parallel decoding: a GEMM, then an all-reduce with nothing beside it, then a DtoD copy of the
    result on the compute stream; with ``training`` a backward op and an optimizer step are recorded too."""
    b = TraceBuilder("TP " + ("training" if training else "serving"))
    for k in range(4):
        o = k * 1_000_000
        b.kernel(0, 7, o, 500_000)
        b.nccl(0, 20, o + 500_000, 300_000, name="ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)")
        b.memcpy(0, 7, o + 800_000, 100_000, "DtoD")
    if training:
        b.cpu_op(0, 10_000, "autograd::engine::evaluate_function: MmBackward0")
        b.cpu_op(20_000, 10_000, "Optimizer.step#AdamW.step")
    return overlap_report(load(b, tmp_path, f"tp{int(training)}.json"))


def test_serving_trace_gets_serving_words(tmp_path):
    r = _tp_serving(tmp_path, training=False)
    assert r.training == ""
    texts = [v.text for v in r.verdicts]
    assert {v.figure for v in r.verdicts} >= {"copy_overlap", "comm_overlap"}
    assert not any(TRAINING_WORDS.search(x) for x in texts), texts
    (comm,) = [v for v in r.verdicts if v.figure == "comm_overlap"]
    assert "tensor-parallel inference" in comm.text and "all-reduce" in comm.text


def test_training_trace_keeps_training_words(tmp_path):
    r = _tp_serving(tmp_path, training=True)
    assert r.training == "Optimizer.step#AdamW.step"  # the first evidence in sorted order
    (copy,) = [v for v in r.verdicts if v.figure == "copy_overlap"]
    (comm,) = [v for v in r.verdicts if v.figure == "comm_overlap"]
    assert "DDP's gradient buckets" in copy.text and "FSDP's forward and backward prefetch" in comm.text  # (all-gathers: shards)


@pytest.mark.parametrize("name,trains", [
    ("autograd::engine::evaluate_function: AddmmBackward0", True), ("MulBackward0", True), ("aten::convolution_backward", True),
    ("## backward ##", True), ("Optimizer.zero_grad#SGD.zero_grad", True), ("DistributedDataParallel.forward", True),
    ("FullyShardedDataParallel.forward", True), ("FSDP::pre_forward", True),
    ("aten::mm", False), ("vllm::unified_attention", False), ("ProfilerStep#3", False), ("aten::backward_compat", False),
])
def test_training_evidence_by_name(tmp_path, name, trains):
    b = TraceBuilder("one host op")
    b.cpu_op(0, 1_000, name)
    assert training_evidence(load(b, tmp_path)) == (name if trains else "")


# --- no stray warning --------------------------------------------------------------------------


@pytest.mark.filterwarnings("error")
def test_collectives_without_a_bus_bandwidth_factor_warn_nothing():
    """Two ranks' send/recv (no bus-bandwidth factor: every busbw NaN) matched: no numpy 'All-NaN slice' warning."""
    import pandas as pd

    from traceprobe.analysis.job.collectives import TABLE_COLUMNS, match_window

    def table(rank: int) -> pd.DataFrame:
        row = {"rank": rank, "device": rank, "stream": 20, "pg": "0", "collective": "sendrecv", "name": "ncclDevKernel_SendRecv(...)",
               "start_ns": 1_000 + rank, "end_ns": 5_000, "bytes": 1 << 20, "dtype": "float", "group_size": 2}
        return pd.DataFrame([{c: row.get(c, "") for c in TABLE_COLUMNS}]).astype({"rank": "Int64"})

    w = match_window({0: table(0), 1: table(1)})
    assert w.matched == 1
    row = w.by_type.iloc[0]
    assert row["collective"] == "sendrecv" and np.isnan(row["busbw_gbps"]) and np.isnan(row["best_busbw_gbps"])


# --- --detail shows every warning the table points to ------------------------------------------


def test_detail_shows_every_warning_the_table_counts(tmp_path):
    from typer.testing import CliRunner

    from traceprobe.cli import app

    b = TraceBuilder("a B event without its E")
    b.launch(0, "kernel", 0, 7, 10_000, 100_000)
    b.raw({"ph": "B", "cat": "cpu_op", "name": "aten::lonely", "pid": 1, "tid": 1, "ts": 5.0})
    path = b.write(tmp_path / "t.json")
    table = CliRunner().invoke(app, ["overlap-report", str(path), "--jobs", "1"])
    assert table.exit_code == 0, table.output
    assert "1 warning(s) about the traces' data: see --detail" in table.stdout
    detail = CliRunner().invoke(app, ["overlap-report", str(path), "--jobs", "1", "--detail"])
    assert detail.exit_code == 0, detail.output
    assert "[warning] " in detail.stdout and "1 unmatched B/E event(s) dropped" in " ".join(detail.stdout.split())


# --- communication by evidence -----------------------------------------------------------------

MULTIMEM = "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, unsigned long, unsigned int**)"
CUSTOM_AR = "void vllm::cross_device_reduce_2stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)"
SYMM = "void c10d::symmetric_memory::two_shot_all_reduce_kernel<float, 16, 8>(float**, unsigned long, float*)"


def test_custom_all_reduce_kernels_are_communication(tmp_path):
    """SYNTHETIC tensor-parallel decode: matmuls, each followed by a custom all-reduce (multimem, vLLM's two-stage,
    symmetric memory's two-shot) with nothing beside it, and a kernel that carries Kineto's 'Collective name'."""
    from traceprobe.analysis.job.collectives import collective_table

    b = TraceBuilder("custom all-reduce kernels", base_ns=BASE)
    b.step(1, 0, 10_000_000)
    for k, name in enumerate((MULTIMEM, CUSTOM_AR, SYMM)):
        b.launch(k * 10_000, "kernel", 0, 7, k * 1_000_000, 600_000)
        b.launch(k * 10_000 + 5_000, "kernel", 0, 7, k * 1_000_000 + 600_000, 200_000, name=name)
    ev = b.launch(50_000, "kernel", 0, 7, 3_000_000, 100_000, name="my_fused_reduce_kernel")
    ev["args"].update({"Collective name": "allreduce", "In msg nelems": 1024, "Out msg nelems": 1024, "dtype": "BFloat16",
                       "Group size": 8, "Process Group Name": "0"})
    t = load(b, tmp_path)
    comm = dict(zip(t.device_events["name"].astype(str), t.device_events["is_comm"]))
    assert comm == {"sm90_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3_execute_kernel__5x_cublas": False,
                    MULTIMEM: True, CUSTOM_AR: True, SYMM: True, "my_fused_reduce_kernel": True}
    r = overlap_report(t)
    assert rows_of(r.comm_overlap) == [(0, 4, 700_000, 0)]  # 3 x 200 + 100 µs, none under compute
    assert collective_table(t)["collective"].tolist() == ["allreduce"] * 4
    (v,) = [v for v in r.verdicts if v.figure == "comm_overlap"]
    assert v.level == "none" and "tensor-parallel inference" in v.text and not TRAINING_WORDS.search(v.text)


def rows_of(comm):
    return [tuple(int(x) for x in row) for row in comm[["device", "comm_kernels", "comm_ns", "overlapped_ns"]].itertuples(index=False)]


def test_the_documented_families_are_the_reading_codes():
    from traceprobe.reading.comm_kernels import COMM_KERNEL_FAMILIES, COMM_KERNEL_RE, family_of

    assert all(f.source for f in COMM_KERNEL_FAMILIES)
    for name, family in ((MULTIMEM, "multimem (NVLS) collectives (PyTorch)"), (CUSTOM_AR, "custom all-reduce (vLLM, SGLang, aiter)"),
                         (SYMM, "symmetric-memory all-reduce (PyTorch)"), ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "NCCL/RCCL")):
        assert COMM_KERNEL_RE.search(name) and family_of(name).name == family  # type: ignore[union-attr]
    for compute in ("ampere_sgemm_128x64_tn", "void at::native::reduce_kernel<512, 1>", "triton_red_fused_add_mean_0", "allreduce_stats"):
        assert family_of(compute) is None and not COMM_KERNEL_RE.search(compute)


DEEPEP_DISPATCH = "void dpsk::ep::internode::dispatch<8, 768, 16>(void*, float*, int*, long*, int, int, int, void**, int)"
DEEPEP_COMBINE = "void dpsk::ep::internode::combine<__nv_bfloat16, 8, 768, 16>(int4*, float*, int*, int4 const*, int, int)"
RING = "void my_lib::ring_reduce_kernel<float>(float*, float const*, int)"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int, float*)"


def test_deepep_and_a_kernel_launched_inside_a_c10d_op_are_communication(tmp_path):
    """SYNTHETIC, µs, one step on cuda:0: a GEMM [10, 100) on stream 7 beside DeepEP's expert all-to-all on stream 20
    (DeepSeek-V3's build: ``dpsk::ep::internode::dispatch`` [20, 60), ``combine`` [60, 90), launched from Python, no
    op around them); a kernel of no known library launched by ``c10d::allreduce_`` [100, 150) on stream 21 beside a
    GEMM [110, 140); and an add launched by ``aten::copy_`` inside ``c10d::allgather_`` [150, 160), the inner op's:
    compute. Communication is 40 + 30 + 50 = 120 µs, 40 + 30 + 30 = 100 µs of it under compute."""
    from traceprobe.analysis.job.collectives import collective_table
    from traceprobe.analysis.job.comm_types import comm_types

    us = 1_000
    b = TraceBuilder("DeepEP and a kernel launched inside a c10d op", base_ns=BASE)
    b.step(1, 0, 200 * us)
    b.cpu_op(1 * us, 4 * us, "aten::mm")
    b.launch(2 * us, "kernel", 0, 7, 10 * us, 90 * us)
    b.launch(6 * us, "kernel", 0, 20, 20 * us, 40 * us, name=DEEPEP_DISPATCH)
    b.launch(8 * us, "kernel", 0, 20, 60 * us, 30 * us, name=DEEPEP_COMBINE)
    b.cpu_op(12 * us, 6 * us, "c10d::allreduce_")
    b.launch(14 * us, "kernel", 0, 21, 100 * us, 50 * us, name=RING)
    b.cpu_op(20 * us, 4 * us, "aten::mm")
    b.launch(21 * us, "kernel", 0, 7, 110 * us, 30 * us)
    b.cpu_op(26 * us, 8 * us, "c10d::allgather_")
    b.cpu_op(27 * us, 5 * us, "aten::copy_")
    b.launch(28 * us, "kernel", 0, 7, 150 * us, 10 * us, name=ADD)
    t = load(b, tmp_path)
    ev = t.device_events
    assert dict(zip(ev["name"].astype(str), ev["is_comm"])) == {
        "sm90_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3_execute_kernel__5x_cublas": False,
        DEEPEP_DISPATCH: True, DEEPEP_COMBINE: True, RING: True, ADD: False}
    assert dict(zip(ev["name"].astype(str), comm_types(t))) == {
        "sm90_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3_execute_kernel__5x_cublas": "",
        DEEPEP_DISPATCH: "alltoall", DEEPEP_COMBINE: "alltoall", RING: "allreduce", ADD: ""}
    r = overlap_report(t)
    assert rows_of(r.comm_overlap) == [(0, 3, 120 * us, 100 * us)]
    assert r.breakdown["exposed_comm_ns"].tolist() == [20 * us]  # [140, 150): the c10d kernel alone
    assert sorted(collective_table(t)["collective"]) == ["allreduce", "alltoall", "alltoall"]
    (v,) = [v for v in r.verdicts if v.figure == "comm_overlap"]
    assert v.level == "confirmed"


@pytest.mark.parametrize(("op", "comm"), [("record_param_comms", True), ("nccl:all_to_all", True), ("c10d::allreduce_", True),
                                          ("rccl:all_reduce", True), ("aten::mm", False), ("ProfilerStep#1", False),
                                          ("c10d_extension_helper", False)])
def test_a_kernel_is_communication_by_its_launching_op(tmp_path, op, comm):
    """SYNTHETIC: a kernel of no known library, launched inside ``op`` (a cpu_op, as torch's ops are), is communication
    when ``op`` is a communication op; the launch link is Kineto's correlation id, the op the innermost one around the
    launch call on its thread, never a step annotation."""
    b = TraceBuilder("launching op", base_ns=BASE)
    b.cpu_op(0, 10_000, op)
    b.launch(2_000, "kernel", 0, 7, 20_000, 5_000, name=RING)
    b.launch(20_000, "kernel", 0, 7, 30_000, 5_000, name=RING)  # (launched outside any op: compute)
    assert load(b, tmp_path).device_events["is_comm"].tolist() == [comm, False]


def test_communication_libraries_are_known_by_name():
    """The communication libraries a kernel's name tells, whatever launched it: NCCL (``ncclKernel``,
    ``ncclDevKernel``), RCCL, DeepEP (``deep_ep``, DeepSeek's ``dpsk::ep::``), NVSHMEM; not a name that merely holds
    the words."""
    from traceprobe.reading.comm_kernels import COMM_KERNEL_RE, family_of

    for name, family in (("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "NCCL/RCCL"),
                         ("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", "NCCL/RCCL"),
                         ("void rcclGenericKernel<1, false>(ncclDevComm*)", "NCCL/RCCL"),
                         ("void deep_ep::intranode::dispatch<8, 768>(int4*, float*)", "DeepEP all-to-all"),
                         ("void deep_ep::internode_ll::combine<8, 768, 7168>(void*)", "DeepEP all-to-all"),
                         (DEEPEP_DISPATCH, "DeepEP all-to-all"), (DEEPEP_COMBINE, "DeepEP all-to-all"),
                         ("void nvshmemi_alltoall_allpush_kernel<int>(nvshmem_team_t, int*, int const*, unsigned long)", "NVSHMEM")):
        assert COMM_KERNEL_RE.search(name) and family_of(name).name == family  # type: ignore[union-attr]
    for compute in ("cutlass_deep_epilogue_kernel", "void at::native::dispatch_kernel<float>(float*)", RING, ADD):
        assert family_of(compute) is None and not COMM_KERNEL_RE.search(compute)


def test_detail_names_rocm_devices(tmp_path):
    from traceprobe.analysis.summary import summarize
    from traceprobe.report.panels import DetailRenderer

    text = DetailRenderer(width=200).render(summarize([overlap_report(_rocm_trace(tmp_path))]))
    assert "hip:0" in text and "cuda:" not in text
    assert "left out: hip:0: compute" in text  # the set-aside work, one line per reason


def test_diff_names_rocm_devices(tmp_path):
    from traceprobe.analysis.diff import diff
    from traceprobe.analysis.summary import summarize

    a = summarize([overlap_report(_rocm_trace(tmp_path))])
    (tmp_path / "b").mkdir()
    b = summarize([overlap_report(_rocm_trace(tmp_path / "b"))])
    d = diff(a, b)
    assert set(d.kernels["device_label"]) == {"hip:0"}
    assert not any(s.startswith("cuda") for s in d.figures["subject"])
