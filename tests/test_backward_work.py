"""The backward's work (traceprobe.analysis.work.op_owners): autograd's nodes linked to the forward op that made them
by sequence number, their kernels classed and counted as that op's backward; recomputation read apart (HFU beside MFU)."""

from __future__ import annotations

import glob
import json
from pathlib import Path

import numpy as np
import pytest

from traceprobe.analysis.work import formulas
from traceprobe.analysis.work.efficiency import kernel_efficiency
from traceprobe.analysis.work.kernel_classes import CLASSES, kernel_classes
from traceprobe.analysis.work.op_work import op_work
from traceprobe.reading import load_trace

B, H, S, D = 2, 4, 128, 64
M, N, K = 256, 512, 1024
SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces" / "efficiency"


class _Trace:
    """A Kineto trace built by hand: host ops on threads 1 (forward) and 2 (autograd's), kernels on stream 7."""

    def __init__(self) -> None:
        self.events: list[dict] = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0,
                                    "dur": 5000}]
        self.corr, self.kernel_ts = 0, 10_000

    def op(self, name: str, tid: int, ts: int, dur: int, seq: int | None = None, fwd: int = 0, dims: list | None = None,
           types: list | None = None, concrete: list | None = None) -> None:
        args: dict = {"External id": len(self.events)}
        if seq is not None:
            args |= {"Sequence number": seq, "Fwd thread id": fwd}
        args |= {"Input Dims": dims or [], "Input type": types or [], "Concrete Inputs": concrete or []}
        self.events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args})

    def launch(self, tid: int, ts: int, us: int = 100, kernel: str = "some_kernel") -> None:
        self.corr += 1
        self.events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": tid, "ts": ts,
                            "dur": 2, "args": {"correlation": self.corr}})
        self.events.append({"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": self.kernel_ts, "dur": us,
                            "args": {"device": 0, "stream": 7, "correlation": self.corr}})
        self.kernel_ts += us + 1

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps({"traceEvents": self.events, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]}))
        return path


QKV = ([[B, H, S, D]] * 3 + [[]] * 6, ["c10::BFloat16"] * 3 + [""] * 6, ["", "", "", "", "0.", "False", "", "", "False"])


def _training(path: Path, recompute: bool = False) -> Path:
    """SYNTHETIC training step: SDPA's math backend (two ``aten::bmm`` and a softmax, each its own node: seqs 10-12) and
    an ``aten::mm`` (seq 13) and ``aten::addmm`` (seq 14) forward on thread 1; on thread 2 autograd's nodes
    (``Fwd thread id`` 1): ``BmmBackward0`` x 2 and ``SoftmaxBackward0`` (their ``aten::bmm`` and softmax backward, no
    sequence numbers), ``MmBackward0`` (two ``aten::mm`` of its own) and ``AddmmBackward0`` launching its kernel
    itself (no modelled op inside). With ``recompute``, a ``CheckpointFunctionBackward`` node runs an ``aten::mm``
    again (recorded with a sequence number: autograd on) before them."""
    t = _Trace()
    bmm_in = [[B * H, S, D], [B * H, D, S]], ["c10::BFloat16"] * 2
    t.op("aten::_scaled_dot_product_attention_math", 1, 10, 300, 10, 0, *QKV)
    t.op("aten::bmm", 1, 20, 50, 10, 0, *bmm_in)
    t.launch(1, 30)
    t.op("aten::_softmax", 1, 100, 50, 11, 0, [[B, H, S, S], [], []], ["c10::BFloat16", "", ""])
    t.launch(1, 110)
    t.op("aten::bmm", 1, 200, 50, 12, 0, [[B * H, S, S], [B * H, S, D]], ["c10::BFloat16"] * 2)
    t.launch(1, 210)
    mm = [[M, K], [K, N]], ["float", "float"]
    t.op("aten::mm", 1, 400, 50, 13, 0, *mm)
    t.launch(1, 410)
    t.op("aten::addmm", 1, 500, 50, 14, 0, [[N], [M, K], [K, N]], ["float"] * 3)
    t.launch(1, 510)
    if recompute:
        t.op("aten::checkpoint_marker", 1, 600, 10, 20, 0)  # (the forward op of the checkpoint's node)
        t.op("CheckpointFunctionBackward", 2, 900, 90, 20, 1)
        t.op("aten::mm", 2, 910, 50, 30, 0, *mm)  # (run again: a forward op, sequence number recorded)
        t.launch(2, 920)
    t.op("AddmmBackward0", 2, 1000, 50, 14, 1, [[M, N]], ["float"])
    t.launch(2, 1010, 300)
    t.op("MmBackward0", 2, 1100, 90, 13, 1, [[M, N]], ["float"])
    for i in range(2):
        t.op("aten::mm", 2, 1110 + 40 * i, 30, None, 0, *mm)
        t.launch(2, 1115 + 40 * i)
    t.op("BmmBackward0", 2, 1200, 90, 12, 1, [[B * H, S, D]], ["c10::BFloat16"])
    for i in range(2):
        t.op("aten::bmm", 2, 1210 + 40 * i, 30, None, 0, *bmm_in)
        t.launch(2, 1215 + 40 * i)
    t.op("SoftmaxBackward0", 2, 1300, 50, 11, 1, [[B, H, S, S]], ["c10::BFloat16"])
    t.op("aten::_softmax_backward_data", 2, 1310, 30, None, 0, [[B, H, S, S], [B, H, S, S], [], []], ["c10::BFloat16"] * 2)
    t.launch(2, 1315)
    t.op("BmmBackward0", 2, 1400, 90, 10, 1, [[B * H, S, S]], ["c10::BFloat16"])
    for i in range(2):
        t.op("aten::bmm", 2, 1410 + 40 * i, 30, None, 0, *bmm_in)
        t.launch(2, 1415 + 40 * i)
    return t.write(path)


def test_backward_nodes_of_math_attention_are_attention(tmp_path: Path) -> None:
    """SYNTHETIC (:func:`_training`): the math backend's five backward kernels are attention, one op (its backward) with
    the backward's FLOPs, twice the forward's; the forward's three kernels its forward. Before the link they were two
    GEMMs and a softmax each, classed gemm and reduction."""
    t = load_trace(_training(tmp_path / "train.json"))
    w = op_work(t).set_index("name")
    fwd, bwd = w.loc["aten::_scaled_dot_product_attention_math"], w.loc["aten::_scaled_dot_product_attention_math (backward)"]
    assert fwd["kernels"] == 3 and not fwd["backward"] and bwd["kernels"] == 5 and bwd["backward"]
    assert bwd["klass"] == "attention" and bwd["family"] == "attention_backward"
    one = np.array([1])
    f_fwd = formulas.attention(B * one, S * one, H * one, S * one, H * one, D * one, D * one, one < 0, 2 * one)[0][0]
    assert fwd["flops"] == f_fwd and bwd["flops"] == 2 * f_fwd  # (no recomputation: dV, dP, dQ, dK)
    classes = np.array(CLASSES)[kernel_classes(t)]
    assert list(classes) == ["attention"] * 3 + ["gemm"] * 2 + ["gemm"] * 3 + ["attention"] * 5


def test_gemm_backward_is_counted_once(tmp_path: Path) -> None:
    """SYNTHETIC (:func:`_training`): ``MmBackward0``'s two ``aten::mm`` keep their own kernels and FLOPs (2mnk each);
    ``AddmmBackward0``, whose kernel no modelled op of its own launched, is ``aten::addmm``'s backward: 4mnk + mn."""
    t = load_trace(_training(tmp_path / "train.json"))
    w = op_work(t)
    mm = w[(w["name"] == "aten::mm")]
    assert len(mm) == 3 and (mm["flops"] == 2 * M * N * K).all() and not mm["backward"].any()
    addmm = w[w["name"] == "aten::addmm (backward)"].iloc[0]
    assert addmm["klass"] == "gemm" and addmm["family"] == "gemm_backward" and addmm["flops"] == 4 * M * N * K + M * N
    assert not w["recomputed"].any()


def test_hfu_counts_the_recomputed_forward(tmp_path: Path) -> None:
    """SYNTHETIC (:func:`_training` with a checkpoint): the ``aten::mm`` run again inside the checkpoint's node is
    recomputation: in HFU, not in MFU, by its FLOPs (2mnk) exactly; without it the two are equal."""
    e = kernel_efficiency(load_trace(_training(tmp_path / "ckpt.json", recompute=True)))
    whole = e.mfu.set_index("step").loc[-1]
    assert whole["hardware_flops"] - whole["flops"] == 2 * M * N * K
    assert whole["hfu"] / whole["mfu"] == pytest.approx(whole["hardware_flops"] / whole["flops"])
    plain = kernel_efficiency(load_trace(_training(tmp_path / "plain.json"))).mfu.set_index("step").loc[-1]
    assert plain["hardware_flops"] == plain["flops"] == whole["flops"] and plain["hfu"] == plain["mfu"]


T, D4 = 256, 64  # (tokens, width of a checkpointed MLP block: Linear(D4, 4 D4) -> GELU -> Linear(4 D4, D4))
UP, DOWN = ([[4 * D4], [T, D4], [D4, 4 * D4], [], []], ["c10::BFloat16"] * 3 + ["Scalar"] * 2), \
    ([[D4], [T, 4 * D4], [4 * D4, D4], [], []], ["c10::BFloat16"] * 3 + ["Scalar"] * 2)
CAST = [[4 * D4, D4], [4 * D4, D4], []], ["c10::BFloat16", "float", ""]


def _checkpointed_block(path: Path, early_stop: bool = True) -> Path:
    """SYNTHETIC step of one MLP block under non-reentrant ``torch.utils.checkpoint`` (the shape of
    sample_traces/efficiency/checkpoint-checkpointed): forward on thread 1 (up ``aten::addmm`` seq 1, ``aten::gelu``
    seq 2, down ``aten::addmm`` seq 3, each launching its kernel; an ``aten::to`` cast, seq 4, its ``aten::copy_``
    launching); on thread 2 the down projection's ``AddmmBackward0`` node (seq 3, ``Fwd thread id`` 1) unpacks its
    saved tensors, which runs the block again inside the node (autograd's own sequence numbers, 101-104): the up
    ``aten::addmm``, ``aten::gelu`` and autocast's cast (``aten::to`` seq 103, its ``aten::copy_`` none) launch; the
    down ``aten::addmm`` only detaches its two saved inputs (the pack hook's) and, with ``early_stop`` (PyTorch's
    default), launches nothing: the recompute stops there. Then the node's two ``aten::mm``, ``GeluBackward0``'s
    kernel, the up projection's ``AddmmBackward0`` with one ``aten::mm`` (its input needs no gradient) and the
    cast's ``ToCopyBackward0`` with its ``aten::copy_``."""
    t = _Trace()
    bf16 = ["c10::BFloat16"] * 2
    for seq, (name, shapes), ts in ((1, ("aten::addmm", UP), 10), (2, ("aten::gelu", ([[T, 4 * D4], []], bf16)), 100),
                                    (3, ("aten::addmm", DOWN), 200)):
        t.op(name, 1, ts, 50, seq, 0, *shapes)
        t.launch(1, ts + 10)
    t.op("aten::to", 1, 300, 20, 4, 0, [[4 * D4, D4], [], [], [], []], ["float", "", "", "", ""])
    t.op("aten::copy_", 1, 305, 10, None, 0, *CAST)
    t.launch(1, 308)
    t.op("AddmmBackward0", 2, 1000, 400, 3, 1, [[T, D4]], ["c10::BFloat16"])
    t.op("aten::addmm", 2, 1010, 40, 101, 0, *UP)
    t.launch(2, 1020)
    t.op("aten::gelu", 2, 1060, 30, 102, 0, [[T, 4 * D4], []], bf16)
    t.launch(2, 1070)
    t.op("aten::to", 2, 1091, 8, 103, 0, [[4 * D4, D4], [], [], [], []], ["float", "", "", "", ""])  # (autocast's cast)
    t.op("aten::copy_", 2, 1092, 6, None, 0, *CAST)
    t.launch(2, 1093)
    t.op("aten::addmm", 2, 1100, 60, 104, 0, *DOWN)
    for i, dims in enumerate(([T, 4 * D4], [4 * D4, D4])):
        t.op("aten::detach", 2, 1105 + 20 * i, 10, None, 0, [dims], ["c10::BFloat16"])
    if not early_stop:
        t.launch(2, 1150)
    for i, dims in enumerate(([[T, D4], [D4, 4 * D4]], [[D4, T], [T, 4 * D4]])):  # (dX, dW of the down projection)
        t.op("aten::mm", 2, 1200 + 100 * i, 50, None, 0, dims, bf16)
        t.launch(2, 1210 + 100 * i)
    t.op("GeluBackward0", 2, 1500, 50, 2, 1, [[T, 4 * D4]], ["c10::BFloat16"])
    t.op("aten::gelu_backward", 2, 1505, 40, None, 0, [[T, 4 * D4], [T, 4 * D4], []], bf16)
    t.launch(2, 1510)
    t.op("AddmmBackward0", 2, 1600, 60, 1, 1, [[T, 4 * D4]], ["c10::BFloat16"])
    t.op("aten::mm", 2, 1605, 50, None, 0, [[4 * D4, T], [T, D4]], bf16)  # (dW only)
    t.launch(2, 1610)
    t.op("ToCopyBackward0", 2, 1700, 30, 4, 1, [[4 * D4, D4]], ["c10::BFloat16"])
    t.op("aten::copy_", 2, 1705, 20, None, 0, *CAST)
    t.launch(2, 1710)
    return t.write(path)


def test_checkpoint_early_stop_recomputes_what_launched(tmp_path: Path) -> None:
    """SYNTHETIC (:func:`_checkpointed_block`): inside the node, the up ``aten::addmm``, ``aten::gelu`` and the cast's
    ``aten::copy_`` (no sequence number of its own: its caller's, ``aten::to``'s, says it is forward work; before, it
    read as the node's) are recomputation, the node's own ops and ``ToCopyBackward0``'s copy not; HFU's extra work is
    the up GEMM's FLOPs exactly; the down ``aten::addmm`` that early stop ended before its GEMM launched has no work
    (counting recorded ops, not launched work, would add a down GEMM). Without early stop the down GEMM runs again and
    counts too."""
    t = load_trace(_checkpointed_block(tmp_path / "ckpt.json"))
    w = op_work(t)
    again = w[w["recomputed"]]
    assert sorted(again["name"]) == ["aten::addmm", "aten::copy_", "aten::gelu"]
    assert (w["name"] == "aten::copy_").sum() == 3 and not w.loc[w["name"] == "aten::copy_", "backward"].any()
    assert again.loc[again["name"] == "aten::addmm", ["m", "n"]].to_numpy().tolist() == [[T, 4 * D4]]
    up = w[(w["name"] == "aten::addmm") & ~w["recomputed"] & (w["n"] == 4 * D4)]["flops"].iloc[0]
    assert (w["name"] == "aten::addmm").sum() == 3 and not w["backward"].any()  # (two forward, one recomputed)
    assert len(w[w["name"] == "aten::mm"]) == 3
    whole = kernel_efficiency(t).mfu.set_index("step").loc[-1]
    assert whole["hardware_flops"] - whole["flops"] == up
    assert whole["flops"] == w.loc[~w["recomputed"] & (w["klass"] == "gemm"), "flops"].sum()
    full = kernel_efficiency(load_trace(_checkpointed_block(tmp_path / "full.json", early_stop=False))).mfu.set_index("step").loc[-1]
    down = w[(w["name"] == "aten::addmm") & (w["n"] == D4)]["flops"].iloc[0]
    assert full["flops"] == whole["flops"] and full["hardware_flops"] - full["flops"] == up + down


@pytest.mark.parametrize("variant", ["plain", "checkpointed"])
def test_mfu_and_hfu_of_a_recorded_checkpointed_mlp(variant: str) -> None:
    """sample_traces/efficiency/checkpoint-* (real, H100: 8 MLP blocks of width 2048 over 8,192 tokens in bf16
    autocast, 3 steps; checkpointed: each block under non-reentrant ``torch.utils.checkpoint``): each step's MFU and
    HFU are the FLOPs fixes.jsonl counts by hand (model: 47 GEMMs a step, the input needing no gradient; hardware: 8
    more, each block's up projection, early stop ending the recompute before the down one) over the trace's own step
    (within 5% of the step timed with ``record_shapes=True``) and the bf16 peak, within 2%. The plain run recomputes
    nothing: HFU is MFU. (fixes.jsonl's first count, 48 GEMMs and 16 recomputed, failed both.)"""
    facts = next(f for f in map(json.loads, (SAMPLES / "fixes.jsonl").read_text().splitlines()) if f["scenario"] == "checkpoint")
    t = load_trace(glob.glob(str(SAMPLES / f"checkpoint-{variant}" / "*.json.gz"))[0])
    mfu = kernel_efficiency(t).mfu
    model, hardware = facts["model_flops_per_step"], facts["hardware_flops_per_step"][variant]
    steps = mfu[mfu["step"] >= 0]
    assert len(steps) == 3 and (steps["dtype"] == "bf16").all()
    window = steps["window_ns"].to_numpy(np.float64)
    assert window / 1e6 == pytest.approx([facts["variants"][variant]["shapes_ms_per_step"]] * 3, rel=0.05)
    peak = steps["peak_tflops"].to_numpy(np.float64) * 1e12
    assert steps["mfu"].to_numpy() == pytest.approx(model / (window / 1e9) / peak, rel=0.02)
    assert steps["hfu"].to_numpy() == pytest.approx(hardware / (window / 1e9) / peak, rel=0.02)
    if variant == "plain":
        assert (steps["hfu"] == steps["mfu"]).all() and (steps["hardware_flops"] == steps["flops"]).all()
        assert not op_work(t)["recomputed"].any()
    else:
        assert (steps["hfu"] / steps["mfu"]).to_numpy() == pytest.approx(hardware / model, rel=0.02)


TL_CHECKPOINT = Path("/work/pub/tl/tests/traces/mi300/resnet_act_checkpoint.json.gz")


@pytest.mark.skipif(not TL_CHECKPOINT.is_file(), reason="TraceLens's mi300/resnet_act_checkpoint (1.2 MB) is not vendored")
def test_activation_checkpointing_recorded_on_an_mi300x() -> None:
    """TraceLens's resnet_act_checkpoint (real, MI300X, DDP, 3 steps): the convolutions run again on autograd's thread
    inside the backward's nodes are recomputation. HFU over MFU is the hardware FLOPs over the model's: about 4/3
    (forward F, backward 2F, F again)."""
    t = load_trace(str(TL_CHECKPOINT))
    w = op_work(t)
    again = w[w["recomputed"]]
    assert len(again) and set(again["klass"]) >= {"convolution"}
    conv = w[(w["klass"] == "convolution") & ~w["recomputed"] & (w["name"] == "aten::convolution")]
    assert set(again.loc[again["klass"] == "convolution", "args"]) <= set(conv["args"])  # (the same shapes as the forward's)
    whole = kernel_efficiency(t).mfu.set_index("step").loc[-1]
    assert whole["hardware_flops"] - whole["flops"] == again.loc[again["klass"] == "convolution", "flops"].sum()
    assert 1.2 < whole["hfu"] / whole["mfu"] < 1.4


def test_attention_backward_counted_in_a_recorded_training_step() -> None:
    """sample_traces/efficiency/attention-slow (real, H100: causal SDPA on the math backend, forward and backward, 3
    steps): every kernel of the steps' attention, forward and backward, is attention, and its FLOPs are the causal
    attention's counted by hand (fixes.jsonl: 3 x 4 b h s^2 d a step, full; halved where causal)."""
    facts = next(f for f in map(json.loads, (SAMPLES / "fixes.jsonl").read_text().splitlines()) if f["scenario"] == "attention")
    t = load_trace(glob.glob(str(SAMPLES / "attention-slow" / "*.json.gz"))[0])
    c = kernel_efficiency(t).classes.set_index("klass")
    assert c.loc["attention", "flops"] == 3 * facts["full_attention_flops_per_step"] // 2
    w = op_work(t)
    assert set(w.loc[w["name"].str.startswith("aten::_scaled_dot_product_attention_math"), "kernels"]) == {20, 12}


def test_nodes_whose_forward_the_trace_does_not_hold() -> None:
    """HTA's call_stack/backward_thread excerpt (real, shapes): an ``AddmmBackward0`` node on autograd's thread, no
    forward op in the excerpt: no link, its ``aten::mm`` keeps its kernel (before: an IndexError)."""
    t = load_trace(Path(__file__).resolve().parent / "data" / "public" / "hta_backward_thread.json")
    w = op_work(t)
    assert w["name"].tolist() == ["aten::mm"] and not w["backward"].any() and w["flops"].tolist() == [2 * 2048 * 2048 * 256]


def test_shapes_without_a_modelled_op(tmp_path: Path) -> None:
    """SYNTHETIC: shapes recorded (``Input Dims`` on every op) but no op of a modelled family (a custom op launching a
    Triton kernel, as HTA's ``triton_example`` and ``cpu_only`` traces hold): no modelled op, nothing recomputed, and
    the one-trace report builds (before: ``ValueError: Grouper and axis must be same length`` ended the whole
    command)."""
    from traceprobe.analysis.per_trace import overlap_report
    from traceprobe.analysis.work.op_owners import modelled_tops, recomputed

    tr = _Trace()
    tr.op("custom::fused_thing", 1, 10, 500, dims=[[64, 64]], types=["float"])
    tr.launch(1, 20, kernel="triton_poi_fused_add_0")
    t = load_trace(tr.write(tmp_path / "t.json"))
    assert modelled_tops(t).size == 0 and not recomputed(t).any()
    assert overlap_report(t).path == str(t.path)
