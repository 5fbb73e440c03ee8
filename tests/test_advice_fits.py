"""Advice that fits the trace: the action read from what the trace records (the DataLoader's iterator, ``nn.DataParallel``'s
replicas, a sync and the host work it exposes), on recorded samples (sample_traces/: causes/ and efficiency/ on one H100,
what each scenario built in is in its folder's README and fixes.jsonl)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from traceprobe.analysis.advice.idle_advice import loader_fix, loader_kind
from traceprobe.cli import app

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"


def _first_screen(path: Path, *more: str) -> list[str]:
    """The first screen of one trace or folder, as ``[header, claim, do line, ...]``: the claim is the line before the
    first ``do:`` line."""
    res = CliRunner().invoke(app, ["overlap-report", str(path), "--jobs", "1", *more])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    i = next((k for k, ln in enumerate(lines) if ln.strip().startswith("do:")), None)
    assert i is not None and i >= 1, lines
    return [lines[0], lines[i - 1], lines[i], *lines[i + 1:]]


def test_loader_kind_reads_the_iterator_torch_names():
    assert loader_kind("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__") == "workers"
    assert loader_kind("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__") == "main"
    assert loader_kind("my_loader.next") == ""
    assert "num_workers=0" in loader_fix("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__")
    assert "cannot keep up" in loader_fix("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__")


def test_a_loader_with_workers_is_not_told_to_add_workers_from_zero():
    """efficiency/loader-slow: a DataLoader of 2 workers that cannot keep up (8 workers ran 39.5 ms/step faster). Its
    do line asks for more workers or cheaper samples; causes/slow-input loads in the main process (num_workers=0) and
    is told to use workers."""
    lines = _first_screen(SAMPLES / "efficiency" / "loader-slow")
    top, do = lines[1], lines[2]
    assert "data loading" in top, lines
    assert "more DataLoader workers" in do and "num_workers>0" not in do, do
    lines = _first_screen(SAMPLES / "causes" / "slow-input")
    assert "data loading" in lines[1] and "num_workers>0" in lines[2], lines


def test_one_program_recorded_twice_gets_one_action():
    """cpu-gpu.sequential recorded on 2x H200, on 4x H200 and on one H100: a sync drains the queue, then CPU matmuls
    run with the device idle. The two what-ifs are within a few per cent of each other on the H200s (the top flips
    between them) and apart on the H100; every recording gets the same do line, naming both."""
    dos = {p: _first_screen(SAMPLES / p)[2] for p in ("cpu-gpu.sequential.pt.trace.json.gz", "h200-4gpu/cpu-gpu.sequential.pt.trace.json.gz",
                                                     "h100-1gpu/cpu-gpu.sequential.pt.trace.json.gz")}
    assert len(set(dos.values())) == 1, dos
    assert "sync" in next(iter(dos.values())) and "CPU work" in next(iter(dos.values()))


def test_data_parallel_is_told_to_use_ddp():
    """data-parallel.dataparallel (2x H200 and 4x H200): nn.DataParallel's replica threads launch for every GPU from
    one process; the launch-bound finding's action is DDP. The DDP recording of the same model is not told so."""
    for p in ("data-parallel.dataparallel.pt.trace.json.gz", "h200-4gpu/data-parallel.dataparallel.pt.trace.json.gz"):
        lines = _first_screen(SAMPLES / p)
        assert "DistributedDataParallel" in lines[2], lines
    res = CliRunner().invoke(app, ["overlap-report", str(SAMPLES / "h200-4gpu"), "--jobs", "1", "--all"])
    ddp = [ln for ln in res.stdout.splitlines() if "DistributedDataParallel" in ln]
    assert len(ddp) == 1, ddp  # (the dataparallel trace's do line alone)


def test_data_parallel_wrapper_needs_its_own_ops():
    """SYNTHETIC host ops: Gather alone (a user's op of that name) is not nn.DataParallel; Gather with Broadcast is."""
    import pandas as pd

    from traceprobe.analysis.host.training import data_parallel_wrapper

    class _T:  # (the one attribute the function reads)
        def __init__(self, names):
            self.host_events = pd.DataFrame({"name": pd.Categorical(names)})

    assert data_parallel_wrapper.__wrapped__(_T(["Gather", "aten::mm"])) == ""  # type: ignore[attr-defined]
    assert data_parallel_wrapper.__wrapped__(_T(["Gather", "Broadcast"])) == "nn.DataParallel"  # type: ignore[attr-defined]


def test_a_slow_first_launch_is_warm_up_by_what_it_is():
    """HTA's mi250_minitoy (real, ROCm, 2 steps): the first launch of aten::add_'s kernel takes 6.5 ms (its code object
    loads), the trace's other launches 4-12 µs. Before: launch-bound dispatch -4.1 ms/step, per step over a second
    step of 49 µs; now a one-time first call, its figure given once."""
    from traceprobe.analysis.host.warmup import first_launches
    from traceprobe.reading import load_trace

    path = Path(__file__).resolve().parent / "data" / "public" / "hta_mi250_minitoy.json.gz"
    t = load_trace(str(path))
    hit = t.host_events[first_launches(t)]
    assert list(hit["name"]) == ["hipLaunchKernel"] and int((hit["end_ns"] - hit["start_ns"]).iloc[0]) > 6_000_000
    lines = _first_screen(path)
    assert "one-time first calls -6.5 ms once (1 of 2 steps)" in lines[1], lines
    assert "nothing to fix" in lines[2], lines


GLOO = Path(__file__).resolve().parent / "data" / "gloo-ddp"


def test_a_cpu_only_job_reads_its_host_collectives():
    """tests/data/gloo-ddp: tests/data/train_small.py under torchrun on a CPU machine (2 ranks, DDP over gloo, steps
    2-4; recorded with `torchrun --nproc-per-node 2 -m traceprobe record --script tests/data/train_small.py -- --ddp
    --device cpu --steps 10`). Each step's all-reduce runs on gloo's own thread while the main thread waits outside any
    op. Before: the critical path read 100% host outside ops, and `job` printed a table of device zeros."""
    res = CliRunner().invoke(app, ["job", str(GLOO), "--jobs", "1"])
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "no device work on any rank (a CPU-only job)" in out, out
    assert "exposed communication" not in out and "device busy" not in out, out
    path = next(ln for ln in out.splitlines() if ln.strip().startswith("critical path:"))
    share = int(path.split("critical path: ")[1].split("%")[0])
    assert "host waits for other ranks" in path.split(",")[0] and share >= 40, path
    first = CliRunner().invoke(app, ["overlap-report", str(GLOO), "--jobs", "1"])
    assert first.exit_code == 0 and "most device work" not in first.stdout, first.stdout  # (no device work to compare)


def test_a_kernel_whose_peers_are_not_in_the_window_keeps_their_arrival():
    """SYNTHETIC arrays: of five ops, the communication kernels of one name outside every cross-rank instance and
    without a dependency take the shortest of them as their transfer (2 ns): each starts no earlier than its recorded
    end less that (its peers' arrival), and ends at its recorded end where nothing moves; a member of an instance, a
    compute kernel and a kernel bound by another stream keep their own."""
    import numpy as np

    from traceprobe.analysis.causal.unseen_peers import alone, pinned_fixed, transfers

    neg = -(2**60)
    start, end = np.array([10, 20, 30, 40, 50], np.int64), np.array([15, 22, 35, 45, 60], np.int64)
    comm = np.array([True, True, False, True, True])
    dep = np.array([-1, -1, -1, 1, -1])
    lone = alone(comm, dep, np.array([1]))
    assert lone.tolist() == [True, False, False, False, True]
    d = transfers(end - start, lone, np.zeros(5, np.int64))
    assert d.tolist() == [5, 2, 5, 5, 5]  # (the shortest lone kernel of the name: 5 ns)
    fixed = pinned_fixed(np.full(5, neg, np.int64), end, d, lone)
    assert fixed.tolist() == [10, neg, neg, neg, 55]  # (op 4 waited 5 ns for its peers: they arrived at 55)


HTA_CONTROL = Path("/work/pub/hta/tests/data/trace_diff/control")


@pytest.mark.slow
@pytest.mark.skipif(not HTA_CONTROL.is_dir(), reason="HTA's trace_diff/control (1.7 MB) is not vendored; extract it there")
def test_one_rank_of_eight_gains_no_more_than_its_idle_time():
    """HTA's trace_diff/control (real, rank 3 of 8, 6 steps): its SendRecv kernels wait for 7 ranks the trace does not
    hold. Before: launch-bound dispatch -98.0 ms in 6 steps, more than all the device's idle time in the window (76.0 ms);
    the kernels moved earlier with the host. Now they start no earlier than recorded."""
    lines = _first_screen(HTA_CONTROL)
    m = re.search(r"-([\d.]+) ms in 6 steps", lines[1])
    assert m and float(m.group(1)) < 76.0, lines[1]


def test_the_pipeline_bubble_is_on_the_first_screen():
    """causes/pipeline (2 stages x 8 microbatches, rank 1 with more work): the bubble (17.2% of the window, 11.1% ideal
    for the schedule) is on the first screen beside the top claim, which names the stage with more work."""
    res = CliRunner().invoke(app, ["overlap-report", str(SAMPLES / "causes" / "pipeline"), "--jobs", "1"])
    text = " ".join(res.stdout.split())
    assert "rank 1 extra device work" in text, text
    assert "pipeline bubble 17.2% of the window on rank 0 cuda:0, ideal 11.1% for 2 stages x 8 microbatches" in text, text


def test_every_view_names_the_same_top_claim():
    """causes/ddp-compute and the efficiency/loader-* runs: the first screen's claim and action, the JSON document's
    top_claims, the Markdown and the TSV name the same claim, word for word."""
    import json

    for folder in (SAMPLES / "causes" / "ddp-compute", SAMPLES / "efficiency" / "loader-slow", SAMPLES / "efficiency" / "loader-workers8"):
        text = CliRunner().invoke(app, ["overlap-report", str(folder), "--jobs", "1", "--all"]).stdout
        doc = json.loads(CliRunner().invoke(app, ["overlap-report", str(folder), "--jobs", "1", "--format", "json"]).stdout)
        md = CliRunner().invoke(app, ["overlap-report", str(folder), "--jobs", "1", "--format", "markdown"]).stdout
        tsv = CliRunner().invoke(app, ["overlap-report", str(folder), "--jobs", "1", "--format", "tsv"]).stdout
        flat = " ".join(text.split())
        assert doc["top_claims"], doc.keys()
        for c in doc["top_claims"]:
            assert c["claim"] in flat and f"do: {c['do']}" in flat, (c, text)
            assert c["claim"] in md and c["claim"] in tsv, c


def test_mfu_per_step_is_over_the_device_work_of_the_step():
    """efficiency/gemm-control-slow (one H100, bf16 GEMMs of 8192, 11 GEMMs of 2 x 8192^3 FLOPs a step: the first layer's
    input gradient is not computed): MFU over the window and per step agree, each step's FLOPs over the span of the
    device work it launched (before: over its host window, which the host runs ahead of: 347-494%)."""
    from traceprobe.analysis.work.efficiency import kernel_efficiency
    from traceprobe.reading import load_trace

    (path,) = (SAMPLES / "efficiency" / "gemm-control-slow").glob("*.pt.trace.json.gz")
    m = kernel_efficiency(load_trace(str(path))).mfu
    steps = m.loc[m["step"] >= 0]
    assert (steps["flops"] == 11 * 2 * 8192**3).all(), m
    assert ((steps["mfu"] > 0.6) & (steps["mfu"] < 0.8)).all() and steps["mfu"].max() - steps["mfu"].min() < 0.02, m


def test_a_resnet_loading_in_the_main_process_is_told_to_load_in_workers():
    """efficiency/resnet-loader-slow (one H100, scripts/loop_scenarios.py: timm's ResNet-50, batch 64, a DataLoader
    with ``num_workers=0`` whose samples are cropped, resized and jittered on the CPU; fixed with four workers). The
    step is also launch-bound between its batches; the top claim must be the loading, with the main-process action,
    and its gain within 20% of the fix measured in the same run (alternating CUDA-synchronised blocks, inside the
    profiler with ``record_shapes=True`` as the trace was: fixes.jsonl's ``shapes_ms_per_step``)."""
    import json

    lines = _first_screen(SAMPLES / "efficiency" / "resnet-loader-slow")
    top, do = lines[1], lines[2]
    assert "data loading" in top and "num_workers>0" in do, lines
    gain = float(re.search(r"-([\d.]+) ms/step", top).group(1))  # type: ignore[union-attr]
    fixes = {d["scenario"]: d for d in map(json.loads, (SAMPLES / "efficiency" / "fixes.jsonl").read_text().splitlines())}
    v = fixes["resnet-loader"]["variants"]
    measured = v["slow"]["shapes_ms_per_step"] - v["workers4"]["shapes_ms_per_step"]
    assert abs(gain - measured) <= 0.2 * measured, (gain, measured)
