"""What faster kernels would give back (traceprobe.analysis.causal.what_if_kernels), replayed on the dependency graph."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from traceprobe.analysis.causal.dependency_graph import rank_graph
from traceprobe.analysis.causal.what_if import what_ifs
from traceprobe.analysis.causal.what_if_kernels import ACHIEVABLE_COMPUTE, advice, with_kernel_causes
from traceprobe.analysis.work.efficiency import kernel_efficiency
from traceprobe.reading import load_trace

DATA = Path(__file__).parent / "data" / "public" / "tracelens_h100"
SAMPLES = Path(__file__).parent.parent / "sample_traces"
N, SIZE, KERNEL_US = 10, 4096, 10_000


def _gemm_loop(path: Path, dtype: str = "float", kernel: str = "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n") -> Path:
    """SYNTHETIC: a device-bound step on an H100: N ``aten::mm`` of 4096 x 4096 x 4096 launched in 0.5 ms, their
    kernels back to back (10 ms each), a ``cudaDeviceSynchronize`` waiting for the last."""
    ev: list[dict] = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 110_000}]
    for i in range(N):
        t = 10 + 50 * i
        ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t, "dur": 40,
                   "args": {"External id": i + 1, "Input Dims": [[SIZE, SIZE], [SIZE, SIZE]], "Input type": [dtype, dtype],
                            "Input Strides": [[SIZE, 1], [SIZE, 1]], "Concrete Inputs": ["", ""]}})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t + 5, "dur": 20,
                   "args": {"External id": i + 1, "correlation": 100 + i}})
        ev.append({"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": 1000 + KERNEL_US * i, "dur": KERNEL_US,
                   "args": {"External id": i + 1, "device": 0, "stream": 7, "correlation": 100 + i}})
    ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 1, "ts": 600,
               "dur": 1000 + KERNEL_US * N - 600 + 5, "args": {"correlation": 999}})
    doc = {"traceEvents": ev, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]}
    path.write_text(json.dumps(doc))
    return path


def test_device_bound_fp32_gemms_give_back_their_roofline_difference(tmp_path: Path) -> None:
    """SYNTHETIC device-bound loop: the replay gives back what the faster kernels remove, and MFU is FLOPs over time."""
    t = load_trace(_gemm_loop(tmp_path / "fp32.json"))
    g = with_kernel_causes(rank_graph(t), t)
    causes = {c: (top, d) for c, top, d in g.device_causes}
    assert set(causes) == {"kernels_gemm", "fp32_gemm"}
    flops = 2 * SIZE**3
    achievable = flops / (ACHIEVABLE_COMPUTE * 67e12) * 1e9  # (fp32 on an H100 SXM, ns)
    removed = int((g.d - causes["kernels_gemm"][1]).sum())
    assert removed == pytest.approx(N * (KERNEL_US * 1000 - achievable), rel=1e-6)
    table, _ = what_ifs([g])
    row = table.set_index("cause").loc["kernels_gemm"]
    assert row["gain_ns"] == pytest.approx(removed, rel=0.01)  # (device-bound: the whole difference comes back)
    assert table.set_index("cause").loc["fp32_gemm", "gain_ns"] > row["gain_ns"]  # (TF32's peak is 7x fp32's)
    assert "allow_tf32" in advice("fp32_gemm", causes["fp32_gemm"][0])
    e = kernel_efficiency(t)
    whole = e.mfu[e.mfu["step"] == -1].iloc[0]
    assert whole["dtype"] == "fp32" and whole["flops"] == N * flops
    assert whole["mfu"] == pytest.approx(N * flops / (N * KERNEL_US * 1e3) / 67e3, rel=1e-9)  # (by hand: FLOPs / time / peak)
    c = e.classes.set_index("klass")
    assert c.loc["gemm", "bound"] == "compute" and c.loc["gemm", "efficiency"] == pytest.approx(flops / 67e12 * 1e9 / (KERNEL_US * 1e3))


def test_tf32_kernels_are_read_as_tf32(tmp_path: Path) -> None:
    """SYNTHETIC: an fp32 GEMM whose kernel's name says TF32 is held to TF32's peak, and no fp32_gemm cause."""
    t = load_trace(_gemm_loop(tmp_path / "tf32.json", kernel="sm80_xmma_gemm_tf32f32_tf32f32_f32_nn_n"))
    g = with_kernel_causes(rank_graph(t), t)
    assert [c for c, _, _ in g.device_causes] == ["kernels_gemm"]
    assert kernel_efficiency(t).mfu["dtype"].tolist()[0] == "tf32"


def test_launch_bound_step_gains_nothing_from_faster_kernels() -> None:
    """Falconsai (H100, shapes): the device idles between launches, so kernels at their roofline give nothing back."""
    t = load_trace(DATA / "Falconsai_nsfw_image_detection__1016002.json.gz")
    g = with_kernel_causes(rank_graph(t), t)
    causes = {c: d for c, _, d in g.device_causes}
    assert {"kernels_gemm", "kernels_attention", "unfused"} <= set(causes)
    assert all((d <= g.d).all() for d in causes.values())
    table, _ = what_ifs([g])
    kernels = table[table["cause"].isin(list(causes))]
    assert len(kernels) == len(causes) and (kernels["removed_ns"] > 0).all()
    assert (kernels["gain_ns"] < 0.01 * kernels["removed_ns"]).all()  # (the launches bound the step, not the kernels)
    assert table.iloc[0]["cause"] in ("dispatch", "host")


def test_no_shapes_no_device_causes() -> None:
    t = load_trace(SAMPLES / "compute-copy.overlapped.pt.trace.json.gz")
    g = rank_graph(t)
    assert with_kernel_causes(g, t) is g
    assert np.array_equal(what_ifs([g])[0]["cause"].isin(["kernels_gemm", "unfused"]), np.zeros(len(what_ifs([g])[0]), bool))


GPU = Path(__file__).parent / "data" / "roofline_h100"
MEASURED_GAIN_MS = {"gemm-fp32": ("fp32_gemm", 73.71), "elementwise": ("unfused", 1.418), "attention": ("kernels_attention", 46.06)}
"""Each scenario's fix, measured on the H100 that recorded the traces (tests/data/roofline_h100/README.md)."""


def _window(name: str):
    from traceprobe.analysis.causal.what_if_windows import window_what_if

    t = load_trace(GPU / f"{name}.pt.trace.json.gz")
    return t, window_what_if("gpu", name, str(t.path), [with_kernel_causes(rank_graph(t), t)], None)


@pytest.mark.parametrize("name", sorted(MEASURED_GAIN_MS))
def test_what_if_of_each_fix_within_20_percent_of_its_measured_gain(name: str) -> None:
    """Real H100 traces: fp32 GEMMs at TF32, the elementwise chain fused, math attention as flash."""
    cause, measured = MEASURED_GAIN_MS[name]
    _, w = _window(name)
    row = w.table.set_index("cause").loc[cause]
    assert row["per_step_ns"] / 1e6 == pytest.approx(measured, rel=0.2)
    assert w.top is not None and w.top["cause"] == cause  # (the largest finding of the window)


def test_healthy_gemm_loop_gets_no_efficiency_finding() -> None:
    """The control (bf16 GEMMs at 74% of the H100's peak, above the 70% a tuned kernel reaches): no kernel cause
    clears the noise floor; MFU is its FLOPs over the window over bf16's peak, as computed by hand."""
    t, w = _window("gemm-bf16-control")
    kernel = w.table[w.table["cause"].str.startswith(("kernels_", "fp32_gemm", "unfused"))]
    assert (kernel["gain_ns"] < w.floor_ns).all()
    whole = kernel_efficiency(t).mfu.set_index("step").loc[-1]
    lo, hi = t.window_ns
    assert whole["flops"] == 3 * 4 * 2 * 8192**3  # (3 profiled steps of four 8192^3 GEMMs)
    assert whole["mfu"] == pytest.approx(whole["flops"] / (hi - lo) / 989.5e3, rel=0.02)


def test_decode_gemms_are_memory_bound_at_their_bandwidth() -> None:
    """M = 1-32 against an 8192 x 8192 bf16 weight: memory-bound, their time within 20% of bytes over bandwidth."""
    e = kernel_efficiency(load_trace(GPU / "decode.pt.trace.json.gz"))
    gemm = e.classes.set_index("klass").loc["gemm"]
    assert gemm["bound"] == "memory"
    memory_ns = gemm["bytes"] / 3.35e12 * 1e9
    assert gemm["modelled_ns"] == pytest.approx(memory_ns, rel=0.2)
    assert set(e.ops["bound"]) == {"memory"}


EFFICIENCY = SAMPLES / "efficiency"
SAMPLE_FIXES = {"attention": ("kernels_attention", "flash"), "fp32-gemm": ("fp32_gemm", "tf32"), "unfused": ("unfused", "compiled"),
                "fp32-loss": ("unfused", "compiled"), "hf-gpt2": ("fp32_gemm", "bf16")}
"""Per scenario of sample_traces/efficiency (recorded on an H100; fixes.jsonl): the what-if that names its fix, and the
fixed variant."""


def _measured_ms(scenario: str, fixed: str) -> float:
    """The fix's gain a step measured inside the profiler (fixes.jsonl: the slow variant's step less the fixed one's)."""
    facts = next(f for f in map(json.loads, (EFFICIENCY / "fixes.jsonl").read_text().splitlines()) if f["scenario"] == scenario)
    v = facts["variants"]
    return v["slow"]["profiled_ms_per_step"] - v[fixed]["profiled_ms_per_step"]


@pytest.mark.parametrize("scenario", sorted(SAMPLE_FIXES))
def test_what_if_of_each_recorded_fix(scenario: str) -> None:
    """sample_traces/efficiency (real, H100, training steps, forward and backward): the slow variant's top finding is
    the what-if of its fix. Attention (math backend against flash) and fp32 GEMMs (against TF32) within 20% of the gain
    measured: the attention's backward kernels count as attention (before: forward only, 11.4 of 21.0 ms); and the
    unfused chains (the dtype casts of a hand-written RMSNorm in them: before, 7.1 of 9.5 ms, the casts breaking the
    chains); fp32-loss, bf16 GEMMs of 8192 whose loss is ``out.float().square().mean()`` (its cast, square and their
    backward over 256 MB fp32 tensors; fixed by ``torch.compile`` of the forward and loss: 1.1 ms a step)."""
    from traceprobe.analysis.causal.what_if_windows import window_what_if

    cause, fixed = SAMPLE_FIXES[scenario]
    t = load_trace(next((EFFICIENCY / f"{scenario}-slow").glob("*.json.gz")))
    w = window_what_if("gpu", scenario, str(t.path), [with_kernel_causes(rank_graph(t), t)], None)
    got = w.table.set_index("cause").loc[cause, "per_step_ns"] / 1e6
    measured = _measured_ms(scenario, fixed)
    assert w.top is not None and w.top["cause"] == cause
    assert got == pytest.approx(measured, rel=0.2)


def test_the_gemm_bound_control_gets_no_efficiency_finding() -> None:
    """sample_traces/efficiency/gemm-control-loop (real, H100: the bf16 MLP of 8192-wide layers of fp32-loss, its
    output's mean as the loss, nothing to fuse): busy all the window, GEMMs at 70-80% of the bf16 peak; no
    efficiency what-if clears its noise floor, so the window has no top claim (fp32-loss, the same layers with the fp32
    square-mean loss, has one: its chains)."""
    from traceprobe.analysis.causal.what_if_windows import window_what_if

    t = load_trace(next((EFFICIENCY / "gemm-control-loop").glob("*.json.gz")))
    w = window_what_if("gpu", "control", str(t.path), [with_kernel_causes(rank_graph(t), t)], None)
    kernel = w.table[w.table["cause"].str.startswith(("kernels_", "fp32_gemm", "unfused"))]
    assert w.top is None and (kernel["gain_ns"] < w.floor_ns).all(), (w.top, kernel, w.floor_ns)


def _elementwise_ops(path: Path, ops: list[tuple[str, list, str]]) -> Path:
    """SYNTHETIC: one step on an H100 whose ops (name, Input Dims, kernel) run back to back on stream 7, 1 ms each,
    bf16, launched 50 µs apart well ahead of their kernels (the device bound)."""
    ev: list[dict] = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0,
                       "dur": 2000 + 1000 * len(ops)}]
    for i, (name, dims, kernel) in enumerate(ops):
        t = 10 + 50 * i
        ev.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": t, "dur": 40,
                   "args": {"External id": i + 1, "Input Dims": dims, "Input type": ["c10::BFloat16"] * len(dims),
                            "Concrete Inputs": [""] * len(dims)}})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t + 5, "dur": 20,
                   "args": {"External id": i + 1, "correlation": 100 + i}})
        ev.append({"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": 1000 + 1000 * i, "dur": 1000,
                   "args": {"External id": i + 1, "device": 0, "stream": 7, "correlation": 100 + i}})
    ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 1, "ts": 10 + 50 * len(ops),
               "dur": 1000 + 1000 * len(ops), "args": {"correlation": 999}})
    path.write_text(json.dumps({"traceEvents": ev, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]}))
    return path


MUL = "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<c10::BFloat16>>(int, T1, T2)"
SUM = "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::BFloat16, at::native::func_wrapper_t>>(T3)"


def test_a_chain_is_one_loop_its_reductions_and_broadcasts_beside_it(tmp_path: Path) -> None:
    """SYNTHETIC: back to back on one stream, a ``mul`` and an ``add`` over 4096 x 4096, a ``sum`` of that size, a ``mul``
    of its 4096-element result, then two ``mul`` over 2048 x 2048 (a quarter of the elements: another loop, over other
    tensors). The first four are one chain (the reduction's output, 4,096x smaller, fused into its loop); the last two
    another; the chains break between 4096^2 and 2048^2 (before: one chain of six, all brought to the largest op's
    bytes)."""
    big, small, row = [[4096, 4096], [4096, 4096]], [[2048, 2048], [2048, 2048]], [[4096], [4096]]
    t = load_trace(_elementwise_ops(tmp_path / "chains.json", [
        ("aten::mul", big, MUL), ("aten::add", big, MUL), ("aten::sum", [[4096, 4096]], SUM), ("aten::mul", row, MUL),
        ("aten::mul", small, MUL), ("aten::add", small, MUL)]))
    g = with_kernel_causes(rank_graph(t), t)
    (d,) = [d for c, _, d in g.device_causes if c == "unfused"]
    f = d / g.d  # (each op's time kept by the fusion: its chain's fused time over the chain's time)
    assert f[0] == f[1] == f[2] == f[3] and f[4] == f[5] and f[0] != f[4], f
    bytes_big, bytes_small = 3 * 4096**2 * 2, 3 * 2048**2 * 2  # (the largest op of each chain: two operands read, one written)
    assert f[0] == pytest.approx(bytes_big / (0.8 * 3.35e12) * 1e9 / 4e6, rel=1e-3)
    assert f[4] == pytest.approx(bytes_small / (0.8 * 3.35e12) * 1e9 / 2e6, rel=1e-3)
