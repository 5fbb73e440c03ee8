"""The work of each op, the roofline, kernel classes and MFU (traceprobe.analysis.work).

FLOPs and bytes are checked against TraceLens's reference outputs (``tests/traces/h100/*_perf_report_csvs``, beside
its public traces; copies under tests/data/public/tracelens_h100, sources in tests/data/README.md): every GEMM, SDPA
and convolution row equals TraceLens's FLOPs and bytes exactly and its mean TFLOP/s and TB/s within 1%.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import numpy as np
import pandas as pd
import pytest

from traceprobe.analysis.work import formulas
from traceprobe.analysis.work.efficiency import SHAPES_NOTE, kernel_efficiency
from traceprobe.analysis.work.kernel_classes import CLASSES, class_of_name, kernel_classes
from traceprobe.analysis.work.op_work import op_work
from traceprobe.analysis.work.roofline import device_model, device_roofline, parse_roofline
from traceprobe.reading import load_trace

DATA = Path(__file__).parent / "data" / "public" / "tracelens_h100"
PUB = Path("/work/pub/tl/tests/traces/h100")
SAMPLES = Path(__file__).parent.parent / "sample_traces"
SHEETS = ("GEMM", "SDPA_fwd", "CONV_fwd")


def _compare(trace_path: Path, csv_dir: Path) -> int:
    """Check every row of TraceLens's GEMM/SDPA/CONV sheets against :func:`op_work` of the same trace; the rows checked."""
    t = load_trace(trace_path)
    w = op_work(t)
    text = {c: [str(msgspec.json.decode(x)) if x else "" for x in t.op_args[c]] for c in ("dims", "types", "strides", "concrete")}
    w["key"] = [(n, *(text[c][a] for c in text)) for n, a in zip(w["name"], w["args"])]
    checked = 0
    for sheet in SHEETS:
        if not (csv_dir / f"{sheet}.csv").exists():
            continue
        ref = pd.read_csv(csv_dir / f"{sheet}.csv")
        for _, row in ref.iterrows():
            concrete = row["Concrete Inputs_first"] if isinstance(row["Concrete Inputs_first"], str) else ""
            key = (row["name"], row["Input Dims_first"], row["Input type_first"], row["Input Strides_first"], concrete)
            mine = w.loc[np.array([k == key for k in w["key"]], dtype=bool)]
            where = f"{trace_path.name} {sheet} {key[:2]}"
            assert len(mine) == row["name_count"], where
            gflops, mb = float(row["GFLOPS_first"]), float(row["Data Moved (MB)_first"])  # type: ignore[arg-type]
            assert int(mine["flops"].to_numpy()[0]) == round(gflops * 1e9), where
            assert int(mine["bytes"].to_numpy()[0]) == round(mb * 2**20), where
            tflops = (mine["flops"] / mine["time_ns"] / 1e3).mean()
            tbps = (mine["bytes"] / mine["time_ns"] / 1e3).mean()
            assert tflops == pytest.approx(row["TFLOPS/s_mean"], rel=0.01), where
            assert tbps == pytest.approx(row["TB/s_mean"], rel=0.01), where
            checked += 1
    return checked


@pytest.mark.parametrize("model", ["gaunernst_bert-small-uncased__1016001", "Falconsai_nsfw_image_detection__1016002"])
def test_gemm_sdpa_conv_equal_tracelens(model: str) -> None:
    """Two real H100 traces with shapes (bert: addmm and flash SDPA; Falconsai: addmm, flash SDPA, a conv2d)."""
    n = _compare(DATA / f"{model}.json.gz", DATA / f"{model}_perf_report_csvs")
    assert n >= 5


@pytest.mark.slow
@pytest.mark.parametrize("model", ["Qwen_Qwen1.5-0.5B-Chat__1016005", "facebook_timesformer-base-finetuned-k400__1016002",
                                   "google_owlv2-large-patch14-ensemble__1016001", "gaunernst_bert-small-uncased__1016001",
                                   "Falconsai_nsfw_image_detection__1016002"])
def test_every_tracelens_h100_trace(model: str) -> None:
    """Every TraceLens h100 trace with references (mm, addmm, bmm, flash and efficient SDPA, conv2d)."""
    path = PUB / f"{model}.json.gz"
    if not path.exists():
        pytest.skip(f"{path} absent")
    assert _compare(path, DATA / f"{model}_perf_report_csvs") >= 5


def test_kernel_of_a_conv_belongs_to_the_outer_op() -> None:
    """aten::convolution owns its memsets, layout transposes, bias add and cuDNN kernel (7 device events, 129.6 us)."""
    w = op_work(load_trace(DATA / "Falconsai_nsfw_image_detection__1016002.json.gz"))
    conv = w[w["name"] == "aten::convolution"]
    assert conv["kernels"].tolist() == [7] and conv["time_ns"].tolist() == [129_600]
    assert not (w["name"] == "aten::native_layer_norm").any()  # (inside aten::layer_norm: the outer op owns its kernel)


def test_formulas_by_hand() -> None:
    """SYNTHETIC shapes, each formula against its arithmetic done by hand."""
    a = np.array
    f, b = formulas.gemm(a([1]), a([141]), a([512]), a([512]), a([True]), a([2]), a([2]))
    assert (f[0], b[0]) == (2 * 141 * 512 * 512 + 141 * 512, (141 * 512 + 512 * 512 + 141 * 512 + 512) * 2)
    f, b = formulas.attention(a([2]), a([128]), a([8]), a([128]), a([2]), a([64]), a([64]), a([True]), a([2]))
    assert f[0] == 2 * 8 * 4 * 128 * 128 * 64 // 2
    assert b[0] == (2 * 128 * 8 * 64 * 2 + 2 * 128 * 2 * 64 * 2) * 2
    f, b = formulas.convolution(a([4 * 3 * 224 * 224]), a([768 * 3 * 16 * 16]), a([4 * 768 * 14 * 14]), a([3 * 16 * 16]),
                                a([768]), a([False]), a([False]), a([2]))
    assert f[0] == 924_844_032  # (Falconsai's patch embedding: TraceLens's 0.924844032 GFLOPS)
    f, b = formulas.binary(a([72192]), a([72192]), a([72192]), a([2]), a([2]), a([2]))
    assert (f[0], b[0]) == (72192, 3 * 72192 * 2)


def test_classes_from_names_without_shapes() -> None:
    """A real trace recorded without shapes: classes and times from kernel names, the note, no FLOPs and no MFU."""
    t = load_trace(SAMPLES / "compute-copy.overlapped.pt.trace.json.gz")
    e = kernel_efficiency(t)
    assert not e.shapes and SHAPES_NOTE in e.notes
    assert e.mfu.empty and e.ops.empty
    assert set(e.classes["klass"]) <= set(CLASSES) and "gemm" in set(e.classes["klass"])
    assert (e.classes["flops"] == 0).all() and e.classes["tflops"].isna().all()
    assert e.classes["time_ns"].sum() == int((t.device_events["end_ns"] - t.device_events["start_ns"]).sum())


def test_class_name_rules() -> None:
    assert class_of_name("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64") == "gemm"
    assert class_of_name("void pytorch_flash::flash_fwd_kernel<...>") == "attention"
    assert class_of_name("sm80_xmma_fprop_implicit_gemm_indexed_wo_smem_bf16") == "convolution"
    assert class_of_name("triton_poi_fused_add_mul_0") == "elementwise"
    assert class_of_name("triton_red_fused_sum_1") == "reduction"
    assert class_of_name("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>") == "elementwise"
    assert class_of_name("some_custom_kernel") == "other"


def test_efficiency_on_bert() -> None:
    """bert (H100, shapes): GEMMs compute-bound on the H100 SXM roofline, MFU per step below 1, every kernel classed."""
    t = load_trace(DATA / "gaunernst_bert-small-uncased__1016001.json.gz")
    e = kernel_efficiency(t)
    assert e.shapes and e.rooflines[0] is not None and e.rooflines[0].model == "H100 SXM"
    c = e.classes.set_index("klass")
    assert c.loc["gemm", "flops"] > 0 and 0 < c.loc["gemm", "efficiency"] < 1
    assert c["time_ns"].sum() == int((t.device_events["end_ns"] - t.device_events["start_ns"]).sum())
    whole = e.mfu[e.mfu["step"] == -1].iloc[0]
    assert whole["dtype"] == "bf16" and whole["peak_tflops"] == 989.5
    assert whole["mfu"] == pytest.approx(whole["flops"] / whole["window_ns"] / 989.5e3)
    assert len(kernel_classes(t)) == len(t.device_events)


def test_roofline_table_and_given_peaks() -> None:
    assert device_model("NVIDIA H100 80GB HBM3").model == "H100 SXM"  # type: ignore[union-attr]
    assert device_model("NVIDIA H100 PCIe").model == "H100 PCIe"  # type: ignore[union-attr]
    assert device_model("NVIDIA A100-SXM4-80GB").tbps == 2.039  # type: ignore[union-attr]
    assert device_model("AMD Instinct MI300X").tflops["bf16"] == 1307.4  # type: ignore[union-attr]
    assert device_model("NVIDIA L4").model == "L4" and device_model("NVIDIA L40S").model == "L40S"  # type: ignore[union-attr]
    assert device_model("Tesla T4") is None
    given = parse_roofline("bf16=500, tbps=2")
    assert given.peak_flops("bf16") == 500e12 and given.peak_flops("fp16") == 500e12 and given.tbps == 2
    with pytest.raises(ValueError):
        parse_roofline("bf16=fast")
    with pytest.raises(ValueError):
        parse_roofline("int4=1")
    devices = pd.DataFrame({"id": [0], "name": ["Tesla T4"]})
    assert device_roofline(devices, 0) is None
    assert device_roofline(devices, 0, given) is given
    h100 = pd.DataFrame({"id": [0], "name": ["NVIDIA H100 80GB HBM3"]})
    mixed = device_roofline(h100, 0, parse_roofline("tbps=3"))
    assert mixed is not None and mixed.tbps == 3 and mixed.tflops["bf16"] == 989.5


@pytest.mark.slow
def test_cli_roofline_option(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--roofline`` replaces the datasheet's peaks (Falconsai's GEMMs at 500 TFLOP/s bf16); a bad value is refused."""
    import json

    from typer.testing import CliRunner

    from traceprobe.analysis.work.roofline import ROOFLINE_ENV
    from traceprobe.cli import app

    monkeypatch.setenv(ROOFLINE_ENV, "")  # (unset, and put back as it was after the test: the option sets it)
    path = str(DATA / "Falconsai_nsfw_image_detection__1016002.json.gz")
    runner = CliRunner()
    bad = runner.invoke(app, ["overlap-report", path, "--roofline", "bf16=fast"])
    assert bad.exit_code == 2 and "--roofline" in bad.output
    given = runner.invoke(app, ["overlap-report", path, "-f", "json", "--roofline", "bf16=500,tbps=2"])
    assert given.exit_code == 0, given.output
    mfu = json.loads(given.stdout)["traces"][0]["mfu"]
    assert {m["peak_tflops"] for m in mfu} == {500.0}


def test_job_figures_carry_each_rank_mfu() -> None:
    """``traceprobe job``'s per-rank figures take a report's MFU over its window (Falconsai: its mfu figure's step -1 row)."""
    from traceprobe.analysis.job.job import rank_figures
    from traceprobe.analysis.per_trace import overlap_report
    from traceprobe.analysis.work.efficiency import window_mfu

    rep = overlap_report(load_trace(DATA / "Falconsai_nsfw_image_detection__1016002.json.gz"))
    m = rep.extra["mfu"]
    whole = float(m.loc[m["step"] == -1, "mfu"].iloc[0])
    assert 0 < whole < 1 and window_mfu(rep.extra) == {"mfu": whole}
    assert rank_figures([rep], [0]).loc[0, "mfu"] == whole


def test_odd_shapes_and_kineto_flops(tmp_path: Path) -> None:
    """SYNTHETIC: an op whose recorded args are not shapes has no model (and the trace loads); an unmodelled op with
    Kineto's ``flops`` (with_flops=True) takes them; the args of ops that launched nothing are kept but never used."""
    import json

    ev = []
    ops = [("aten::mm", {"Input Dims": "garbage", "Input type": 5}), ("my::op", {"Input Dims": [[4, 4]], "flops": 1234}),
           ("aten::mm", {"Input Dims": [[8, 16], [16, 32]], "Input type": ["c10::BFloat16", "c10::BFloat16"]})]
    for i, (name, args) in enumerate(ops):
        t = 10 + 100 * i
        ev.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": t, "dur": 50, "args": {"External id": i, **args}})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t + 5, "dur": 10,
                   "args": {"correlation": 10 + i}})
        ev.append({"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": t + 20, "dur": 30,
                   "args": {"device": 0, "stream": 7, "correlation": 10 + i}})
    ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::view", "pid": 1, "tid": 1, "ts": 400, "dur": 5,
               "args": {"Input Dims": [[2]], "Input type": ["float"]}})
    path = tmp_path / "odd.json"
    path.write_text(json.dumps({"traceEvents": ev}))
    t = load_trace(path)
    w = op_work(t).set_index("kernel_name")
    assert w.loc["k0", "flops"] == -1 and w.loc["k0", "family"] == ""
    assert w.loc["k1", "flops"] == 1234 and w.loc["k1", "bytes"] == -1
    assert w.loc["k2", "flops"] == 2 * 8 * 16 * 32 and w.loc["k2", "bytes"] == (8 * 16 + 16 * 32 + 8 * 32) * 2
    assert len(t.op_args) == 4 and "aten::view" not in set(w["name"])
    e = kernel_efficiency(t)
    assert any("no roofline known" in n for n in e.notes)  # (no deviceProperties: achieved figures only)
    assert e.classes["roofline_ns"].isna().all() and e.classes["tflops"].notna().any()
