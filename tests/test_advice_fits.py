"""Advice that fits the trace: the action read from what the trace records (the DataLoader's iterator, ``nn.DataParallel``'s
replicas, a sync and the host work it exposes; the profiler's schedule and its own start-up: one-time work is told to
be recorded after only where nothing ran before the window, the profiler's own work is never the program's warm-up, an
op that launches nothing is CPU work however slow), on recorded samples (sample_traces/: causes/ and efficiency/ on one
H100, what each scenario built in is in its folder's README and fixes.jsonl), and SYNTHETIC traces for each rule."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import HELDOUT
from synthetic import BASE, TraceBuilder
from typer.testing import CliRunner

from traceprobe.analysis.advice.idle_advice import loader_fix, loader_kind
from traceprobe.cli import app

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
SCHEDULE = "schedule(wait=1, warmup=1"


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
    the kernels moved earlier with the host. Now they start no earlier than recorded, also where the other ranks are
    taken to run alike (point-to-point kernels stay pinned there: .unseen_peers): the top claim, of every rank if alike,
    is -13.5 ms."""
    res = CliRunner().invoke(app, ["overlap-report", str(HTA_CONTROL), "--jobs", "1"])
    claim = " ".join(res.stdout.split("do:")[0].split()[1:])
    m = re.search(r"-([\d.]+) ms in 6 steps", claim)
    assert m and float(m.group(1)) < 76.0, claim


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
    """efficiency/gemm-control-loop (one H100, bf16 GEMMs of 8192, 11 GEMMs of 2 x 8192^3 FLOPs a step: the first layer's
    input gradient is not computed): each step's MFU is its FLOPs over the span of the device work it launched, by
    hand, and that span is the step timed in the same run with ``record_shapes=True`` (fixes.jsonl), within 5% (the
    first step of the window runs 4% faster than the others: the device idled while the profiler started, and its
    clocks had risen). Before, each step's FLOPs went over its host window, which the host runs ahead of: 347-494%."""
    import json

    from traceprobe.analysis.work.efficiency import kernel_efficiency
    from traceprobe.reading import load_trace

    (path,) = (SAMPLES / "efficiency" / "gemm-control-loop").glob("*.pt.trace.json.gz")
    fixes = {d["scenario"]: d for d in map(json.loads, (SAMPLES / "efficiency" / "fixes.jsonl").read_text().splitlines())}
    timed_ms = fixes["gemm-control"]["variants"]["loop"]["shapes_ms_per_step"]
    m = kernel_efficiency(load_trace(str(path))).mfu
    steps = m.loc[m["step"] >= 0]
    window = steps["window_ns"].to_numpy(np.float64)
    assert len(steps) == 3 and (steps["flops"] == 11 * 2 * 8192**3).all(), m
    assert steps["mfu"].to_numpy() == pytest.approx(11 * 2 * 8192**3 / (window / 1e9) / 989.5e12, rel=1e-9), m
    assert window / 1e6 == pytest.approx([timed_ms] * 3, rel=0.05), (window, timed_ms)


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


def _screen(path: Path, *more: str) -> tuple[str, str, str]:
    """(the first screen's claim, its do line, the whole output) of one trace or folder."""
    res = CliRunner().invoke(app, ["overlap-report", str(path), "--jobs", "1", *more])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    i = next((k for k, ln in enumerate(lines) if ln.strip().startswith("do:")), None)
    assert i is not None and i >= 1, lines
    return lines[i - 1].strip(), lines[i].strip(), res.stdout


def _detail(path: Path) -> str:
    res = CliRunner().invoke(app, ["overlap-report", str(path), "--jobs", "1", "--detail"], terminal_width=400)
    assert res.exit_code == 0, res.output
    return " ".join(res.stdout.replace("│", " ").split())


def test_a_workload_record_warmed_up_is_not_told_to_profile_after_warm_up():
    """h200-4gpu/branches.synchronized (real, 2x H200): ``record`` ran the step once to warm up and three times timed
    before the profiled run (its manifest: ``wall_runs_s``). Its top was "one-time first calls -8.4 ms" with "profile after
    warm-up (torch.profiler.schedule(wait=1, warmup=1))": an aten::linear of the CPU branch 30x its name's other calls,
    whose first layer is eight times as wide (4096 -> 512 against 512 -> 512): CPU work the devices wait for, in every
    run. Now it is CPU work, and no view advises a schedule."""
    from traceprobe.analysis.host.warmup_notes import runs_before
    from traceprobe.manifest import info_for

    path = SAMPLES / "h200-4gpu" / "branches.synchronized.pt.trace.json.gz"
    assert runs_before(-1, info_for(path)) == 4  # (record: a warm-up run and 3 timed runs)
    claim, do, _ = _screen(path)
    assert claim.startswith("CPU ops that launch nothing -"), claim
    assert "move the CPU work to the device" in do, do
    detail = _detail(path)
    assert SCHEDULE not in detail and "one-time first calls" not in detail, detail


def test_a_script_profiled_from_its_start_keeps_the_advice():
    """causes/startup (real, one H100): profiled from before anything touches CUDA, no steps, no manifest: its CUDA,
    cuDNN and cuBLAS start-up is in the window, and recording after it is the action."""
    claim, do, _ = _screen(SAMPLES / "causes" / "startup")
    assert "one-time first calls" in claim, claim
    assert do == "do: profile after warm-up (torch.profiler.schedule(wait=1, warmup=1))", do


def test_the_profilers_buffer_request_is_not_the_programs_time():
    """heldout/w2-late0/ddp-pageable rank 0 (real, 2x H200, steps 2-4): Kineto's 2.6 ms "Activity Buffer Request" lies
    inside its first pageable copy (``aten::to``: a slow call; ``cudaMemcpyAsync``: a kernel's slow first launch). Before,
    its time was the program's (slow calls and warm-up); now it is the profiler's, named by its record, and the copy
    is judged on its own time."""
    from traceprobe import intervals as iv
    from traceprobe.analysis.device.busy import host_thread_codes
    from traceprobe.analysis.host.host_classes import HOST_CAUSES, class_spans
    from traceprobe.analysis.host.idle_causes import idle_causes
    from traceprobe.analysis.host.warmup import profiler_spans
    from traceprobe.reading import load_trace

    (path,) = (HELDOUT / "w2-late0" / "ddp-pageable").glob("rank0.*.pt.trace.json.gz")
    t = load_trace(str(path))
    assert list(t.overhead_events["name"]) == ["Activity Buffer Request"]
    prof = profiler_spans(t)
    thread = int(host_thread_codes(t)[t.host_events["name"].astype(str).eq("cudaMemcpyAsync").to_numpy()][0])
    held = {c: iv.length(iv.intersect(s, prof)) for c, s in zip(HOST_CAUSES, class_spans(t, (thread,)))}
    assert held["profiler"] > 1_500_000 and held["warmup"] == held["slow_call"] == 0, held
    assert any(d.top["profiler"] == "Activity Buffer Request" for d in idle_causes(t) if d.spans["profiler"][0].size)


def _first_launch_trace(path: Path, record: str) -> Path:
    """SYNTHETIC, no steps: six kernels launched by 2 µs calls, 150 µs each, then a kernel's first launch whose call
    holds a 5 ms CUPTI overhead record named ``record`` (the device idle meanwhile), then four more of it."""
    b = TraceBuilder("first launch", base_ns=BASE)
    t = 0
    for _ in range(6):
        b.launch(t, "kernel", 0, 7, t + 10_000, 150_000, name="k_a")
        t += 200_000
    c = b.runtime(t, 5_020_000)["args"]["correlation"]
    b.raw({"ph": "X", "cat": "overhead", "name": record, "pid": -1, "tid": 0, "ts": (BASE + t + 10_000) / 1000, "dur": 5000.0})
    b.kernel(0, 7, t + 5_030_000, 150_000, name="k_b", correlation=c)
    t += 5_200_000
    for _ in range(4):
        b.launch(t, "kernel", 0, 7, t + 10_000, 150_000, name="k_b")
        t += 200_000
    path.parent.mkdir(parents=True, exist_ok=True)
    return b.write(path)


def test_a_first_launch_held_by_the_profiler_is_its_start_up(tmp_path):
    """SYNTHETIC: a kernel's first launch held 5 ms by Kineto's "Activity Buffer Request". Before: one-time first calls
    -5.0 ms, "profile after warm-up". Now: the profiler's own work, nothing to fix in the program; its start-up (no run
    before the window), which a schedule's warm-up step takes out. The same 5 ms as "Lazy Function Loading" (the driver
    loading the kernel's code: the program's own first launch) stays warm-up."""
    claim, do, _ = _screen(_first_launch_trace(tmp_path / "abr.pt.trace.json", "Activity Buffer Request"))
    assert claim.startswith("profiler's own work (CUPTI buffers) -5.0 ms"), claim
    assert do == "do: nothing to fix: profiler start-up (schedule(wait=1, warmup=1) skips it)", do
    claim, do, _ = _screen(_first_launch_trace(tmp_path / "lazy.pt.trace.json", "Lazy Function Loading"))
    assert claim.startswith("one-time first calls -5.0 ms"), claim
    assert do == "do: profile after warm-up (torch.profiler.schedule(wait=1, warmup=1))", do


def _first_call_trace(path: Path, first_step: int | None = None) -> Path:
    """SYNTHETIC: a kernel, then an ``aten::conv2d`` whose first call takes 20 ms before it launches its kernel (the
    device idle), then three of 0.5 ms; with ``first_step``, one call a step, the steps numbered from it."""
    b = TraceBuilder("first call", base_ns=BASE)
    t = 0
    for i, dur in enumerate((20_000_000, 500_000, 500_000, 500_000)):
        if first_step is not None:
            b.step(first_step + i, t, dur + 800_000)
        b.launch(t, "kernel", 0, 7, t + 5_000, 50_000, name="prep")
        b.cpu_op(t + 10_000, dur, "aten::conv2d")
        b.launch(t + 10_000 + dur - 2_000, "kernel", 0, 7, t + dur + 20_000, 600_000, name="conv")
        t += dur + 800_000
    path.parent.mkdir(parents=True, exist_ok=True)
    return b.write(path)


def test_first_calls_after_the_programs_runs_are_no_start_up(tmp_path):
    """SYNTHETIC, no steps: a first call of 20 ms, 40x its later ones. Profiled alone (no manifest) the action is to
    record after warm-up; with a manifest saying ``record`` ran the workload before (a warm-up run and timed runs,
    ``wall_runs_s``; or ``runs_before``), it is not start-up: no view advises a schedule."""
    claim, do, _ = _screen(_first_call_trace(tmp_path / "alone" / "w.v.pt.trace.json"))
    assert claim.startswith("one-time first calls -"), claim
    assert do == "do: profile after warm-up (torch.profiler.schedule(wait=1, warmup=1))", do
    for entry, runs in (({"wall_s": 0.02, "wall_runs_s": [0.021, 0.02, 0.02]}, 4), ({"runs_before": 2}, 2)):
        folder = tmp_path / f"ran{runs}"
        path = _first_call_trace(folder / "w.v.pt.trace.json")
        (folder / "manifest.json").write_text(json.dumps({"schema": 2, "variants": [
            {"workload": "w", "variant": "v", "status": "ok", "traces": [path.name], **entry}]}))
        claim, do, _ = _screen(path)
        assert do == "do: not start-up: new shapes or a recompile (TORCH_LOGS=recompiles)", (claim, do)
        detail = _detail(path)
        assert SCHEDULE not in detail and f"had run {runs} steps or runs before the window" in detail, detail
        assert f"recorded after {runs} runs of the program" in detail, detail


@pytest.mark.parametrize("first_step, scheduled", [(0, True), (2, False)])
def test_the_first_step_number_says_whether_steps_ran_before(tmp_path, first_step, scheduled):
    """SYNTHETIC, steps from ``ProfilerStep#0`` or ``#2``: the first step's 20 ms first call is a one-time cost either way
    (its figure once); the trace's own finding (before the replay) advises a schedule from step 0 only: from step 2, two
    steps had run (before: it advised a schedule from either)."""
    from traceprobe.analysis.per_trace import overlap_report
    from traceprobe.reading import load_trace

    path = _first_call_trace(tmp_path / "t.pt.trace.json", first_step)
    claim, do, _ = _screen(path)
    assert "one-time first calls" in claim and "once (1 of 4 steps)" in claim, claim
    assert do == "do: nothing to fix: a one-time cost, not a steady one", do
    f = overlap_report(load_trace(str(path))).findings
    text = f.loc[f["kind"] == "idle_warmup", "text"].iloc[0]
    assert (SCHEDULE in text) == scheduled, text


def _cpu_op_trace(path: Path, launches: bool) -> Path:
    """SYNTHETIC, no steps: ``aten::linear`` four times on the device (30 µs, a kernel each), then once for 10 ms and
    three times for 0.3 ms on the CPU (launching nothing), the device idle meanwhile, then a kernel; with ``launches``,
    the 10 ms call launches a kernel at its end."""
    b = TraceBuilder("cpu op", base_ns=BASE)
    t = 0
    for _ in range(4):
        b.cpu_op(t, 30_000, "aten::linear")
        b.launch(t + 20_000, "kernel", 0, 7, t + 40_000, 100_000, name="gemm")
        t += 200_000
    for dur in (10_000_000, 300_000, 300_000, 300_000):
        b.cpu_op(t, dur, "aten::linear")
        if launches and dur > 1_000_000:
            b.launch(t + dur - 5_000, "kernel", 0, 7, t + dur + 10_000, 100_000, name="gemm")
        t += dur + 20_000
    b.launch(t, "kernel", 0, 7, t + 10_000, 100_000, name="gemm")
    path.parent.mkdir(parents=True, exist_ok=True)
    return b.write(path)


def test_a_slow_op_that_launches_nothing_is_cpu_work(tmp_path):
    """SYNTHETIC: an op of the CPU 33x its name's median (a wider input) is CPU work, which the device waits for in every
    run, not a new shape's one-time plan (before: one-time first calls, "profile after warm-up"); the same call launching
    a kernel is still a slow call seen once, a first call, unless the program ran before the window (its manifest): one
    run cannot tell a one-time call from one of every run."""
    claim, do, _ = _screen(_cpu_op_trace(tmp_path / "cpu.pt.trace.json", False))
    assert claim.startswith("CPU ops that launch nothing -10."), claim
    assert "move the CPU work" in do, do
    claim, do, _ = _screen(_cpu_op_trace(tmp_path / "gpu.pt.trace.json", True))
    assert claim.startswith("one-time first calls -"), claim
    path = _cpu_op_trace(tmp_path / "ran" / "w.v.pt.trace.json", True)  # (a program that ran before: no one-time call told)
    (path.parent / "manifest.json").write_text(json.dumps({"schema": 2, "variants": [
        {"workload": "w", "variant": "v", "status": "ok", "traces": [path.name], "runs_before": 3}]}))
    claim, do, _ = _screen(path)
    assert claim.startswith("slow calls (new shapes) -") and SCHEDULE not in _detail(path), claim


def test_runs_before_reads_the_steps_then_the_manifest():
    """The steps or runs before a window: the first step's number; else the manifest's ``runs_before``, else record's
    warm-up run and timed runs; else none."""
    from traceprobe.analysis.host.warmup_notes import runs_before

    assert runs_before(2) == 2 and runs_before(0, {"workload": "w", "wall_runs_s": [1.0]}) == 0
    assert runs_before(-1, {"workload": "w", "wall_runs_s": [1.0, 1.0, 1.0]}) == 4
    assert runs_before(-1, {"workload": "w", "runs_before": 1, "wall_runs_s": [1.0]}) == 1
    assert runs_before(-1, {}) == runs_before(-1, None) == runs_before(-1, {"wall_runs_s": [1.0]}) == 0
