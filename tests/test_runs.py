"""Runs (ranks x profiler windows) and the Summary, on SYNTHETIC traces and the real DDP samples.

Synthetic traces come from :mod:`synthetic` (hand-written events); the sample folders under
``sample_traces/training`` are real recordings on 2x H200.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from conftest import HELDOUT, sample_summary
from synthetic import TraceBuilder

from traceprobe.analysis.run import build_runs, trace_key
from traceprobe.collect import analyze_paths
from traceprobe.errors import Failure

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"


def _window_trace(folder: Path, name: str, rank: int | None, first_step: int) -> Path:
    """SYNTHETIC: three steps starting at ``first_step``, one kernel launched in each."""
    b = TraceBuilder(f"rank {rank} steps {first_step}-{first_step + 2}", rank=rank, world_size=2 if rank is not None else None)
    for i in range(3):
        b.step(first_step + i, i * 1_000_000, 1_000_000)
        c = b.runtime(i * 1_000_000 + 10_000, 5_000)["args"]["correlation"]
        b.kernel(0, 7, i * 1_000_000 + 20_000, 500_000, correlation=c)
    folder.mkdir(parents=True, exist_ok=True)
    return b.write(folder / name)


def test_two_windows_two_ranks_in_one_folder(tmp_path):
    d = tmp_path / "tb"
    for rank in (0, 1):
        _window_trace(d, f"rank{rank}.111.pt.trace.json", rank, 2)
        _window_trace(d, f"rank{rank}.222.pt.trace.json", rank, 7)
    s = analyze_paths([d], jobs=1)
    assert not s.failures and len(s.runs) == 1
    run = s.runs[0]
    assert run.name == str(d) and run.ranks == (0, 1)
    assert [(w.label, w.steps, w.ranks) for w in run.windows] == [("steps 2-4", (2, 4), (0, 1)), ("steps 7-9", (7, 9), (0, 1))]
    rs = s.rank_summary
    assert sorted(set(zip(rs["window"], rs["ranks"]))) == [("steps 2-4", 2), ("steps 7-9", 2)]
    assert not s.warnings


def test_rank_from_file_name_and_window_from_name(tmp_path):
    d = tmp_path / "named"
    _window_trace(d, "job.steps4-6.rank3.pt.trace.json", None, 4)
    b = TraceBuilder("no steps, no distributedInfo")
    b.kernel(0, 7, 0, 100)
    b.write(d / "job.steps4-6.rank5.pt.trace.json")
    s = analyze_paths([d], jobs=1)
    keys = {Path(r.path).name: trace_key(r) for r in s.reports}
    assert keys["job.steps4-6.rank3.pt.trace.json"].rank == 3
    k5 = keys["job.steps4-6.rank5.pt.trace.json"]
    assert (k5.rank, k5.window, k5.steps) == (5, "steps 4-6", (4, 6))  # window from the name: no steps in the file
    assert [w.ranks for w in s.runs[0].windows] == [(3, 5)]


def test_traces_without_steps_repeat_by_rank(tmp_path):
    d = tmp_path / "nosteps"
    d.mkdir()
    for name, rank in (("a.rank0.json", 0), ("a.rank1.json", 1), ("b.rank0.json", 0), ("b.rank1.json", 1)):
        b = TraceBuilder("no steps", rank=rank, world_size=2)
        b.kernel(0, 7, 0, 100)
        b.write(d / name)
    s = analyze_paths([d], jobs=1)
    assert [(w.label, w.ranks) for w in s.runs[0].windows] == [("trace 1", (0, 1)), ("trace 2", (0, 1))]


def test_repeated_rank_is_a_warning(tmp_path):
    d = tmp_path / "dup"
    _window_trace(d, "x.pt.trace.json", 0, 2)
    _window_trace(d, "y.pt.trace.json", 0, 2)
    _window_trace(d, "z.pt.trace.json", 1, 2)
    s = analyze_paths([d], jobs=1)
    assert s.warnings == (f"{d}: rank 0 has 2 traces in window steps 2-4",)


def test_summary_is_small_and_picklable(tmp_path):
    d = tmp_path / "p"
    _window_trace(d, "rank0.pt.trace.json", 0, 2)
    s = analyze_paths([d, tmp_path / "missing"], jobs=1)
    assert s.failures == (Failure(str(tmp_path / "missing"), "no such file or folder"),)
    back = pickle.loads(pickle.dumps(s))
    assert back.reports[0].path == s.reports[0].path and back.runs[0].name == s.runs[0].name
    assert not any(type(v).__name__ == "Trace" for v in vars(s.reports[0]).values())


@pytest.mark.parametrize("folder", ["tb-ddp", "rec-ddp"])
def test_sample_training_folders_are_two_windows_of_two_ranks(folder):
    """Real: plain tensorboard_trace_handler (rank0.<ts>.pt.trace.json.gz) and record --script --repeat 2."""
    s = sample_summary(SAMPLES / "training" / folder)
    assert len(s.runs) == 1
    assert [(w.label, w.ranks) for w in s.runs[0].windows] == [("steps 2-4", (0, 1)), ("steps 7-9", (0, 1))]
    assert set(s.rank_summary["ranks"]) == {2}


def test_build_runs_places_every_report_once():
    s = analyze_paths([SAMPLES / "training" / "tb-ddp", SAMPLES / "script-ddp"], jobs=1)
    placed = [r.path for run in build_runs(s.reports) for r in run.reports]
    assert sorted(placed) == sorted(r.path for r in s.reports)


def test_busiest_and_most_comm_rank_are_reported_separately(tmp_path):
    """Rank 1 was ahead and waited 400 µs in its all-reduce; rank 0 did more work. Neither is called slowest."""
    d = tmp_path / "waiting"
    d.mkdir()
    for rank, compute, comm in ((0, 800_000, 100_000), (1, 400_000, 400_000)):
        b = TraceBuilder(f"rank {rank}", rank=rank, world_size=2)
        b.step(1, 0, 2_000_000)
        b.launch(10_000, "kernel", 0, 7, 100_000, compute)
        b.launch(20_000, "nccl", 0, 20, 100_000 + compute, comm)
        b.write(d / f"rank{rank}.pt.trace.json")
    rs = analyze_paths([d], jobs=1).rank_summary
    assert set(rs["busiest_rank"]) == {0} and set(rs["most_comm_rank"]) == {1}
    by_fig = rs.set_index("figure")
    assert (by_fig.loc["gpu_busy_ns", "min"], by_fig.loc["gpu_busy_ns", "max"]) == (800_000, 900_000)
    assert (by_fig.loc["work_ns", "min"], by_fig.loc["work_ns", "max"]) == (400_000, 800_000)
    assert (by_fig.loc["comm_ns", "min"], by_fig.loc["comm_ns", "max"]) == (100_000, 400_000)
    assert "slowest_rank" not in rs.columns


def test_two_jobs_in_one_folder_are_two_windows(tmp_path):
    """Recorded (2x H200): two DDP pairs of the same steps recorded at different times (rank 0 logs loss.item(); rank 0
    runs extra compute), copied into one folder. Each rank is in the window twice; their trace windows do not overlap
    across jobs, so the window splits in two, in time order, each replayed as its own job with its own cause."""
    import shutil

    for run in (SAMPLES / "sync-log" / "w2" / "ddp-item-log", HELDOUT / "w2-late0" / "ddp-compute"):
        for p in run.glob("*.pt.trace.json.gz"):
            shutil.copy(p, tmp_path / p.name)
    s = analyze_paths([tmp_path], jobs=1)
    (run,) = s.runs
    assert [w.label for w in run.windows] == ["steps 2-4", "steps 2-4 #2"] and all(w.ranks == (0, 1) for w in run.windows)
    tops = {w.window: (w.top or {}).get("cause") for w in s.what_ifs}
    assert tops == {"steps 2-4": "sync", "steps 2-4 #2": "imbalance"}
    assert not any("has 2 traces in window" in x for x in s.warnings)


def _lacking_rank1(tmp_path: Path) -> Path:
    """The recorded two-rank ``record --script`` run of sample_traces/script-ddp, rank 1's manifest entry taken out."""
    import json
    import shutil

    folder = tmp_path / "script-ddp"
    shutil.copytree(SAMPLES / "script-ddp", folder)
    doc = json.loads((folder / "manifest.json").read_text())
    doc["variants"] = [e for e in doc["variants"] if e.get("rank") != 1]
    (folder / "manifest.json").write_text(json.dumps(doc))
    return folder


def _lacked_line(folder: Path) -> str:
    return (f"{folder}/train_small.steps2-4.rank1.pt.trace.json.gz: not in {folder}/manifest.json (its rank stopped before its "
            "entry?): joined window steps 2-4 by its own rank 1 and steps")


def test_a_trace_the_manifest_lacks_joins_its_window_by_its_rank_and_steps(tmp_path):
    """A rank killed after writing its trace, before its manifest entry (rank 1's entry taken out of a real recording):
    both ranks are one window of one run, and a line says the manifest lacked rank 1's trace (before, two runs: "no
    window of two or more ranks"). tests/test_kill_rank.py kills a real rank there, under torchrun."""
    folder = _lacking_rank1(tmp_path)
    summary = analyze_paths([folder], jobs=1)
    assert [(r.name, [(w.label, w.ranks) for w in r.windows]) for r in summary.runs] == [
        (f"{folder}/train_small", [("steps 2-4", (0, 1))])]
    assert [w for w in summary.warnings if "manifest.json" in w] == [_lacked_line(folder)]


def test_the_lacked_trace_joins_on_the_streamed_first_screen(tmp_path):
    """overlap-report's first screen, summarised run by run as traces come back (collect.parts): the trace the manifest
    lacks is in the part of its folder's runs, so it joins there too (it was a run of its own: "script-ddp 2-4: rank 1"
    beside "train_small 2-4: rank 0")."""
    from typer.testing import CliRunner

    from traceprobe.cli import app

    folder = _lacking_rank1(tmp_path)
    res = CliRunner().invoke(app, ["overlap-report", str(folder), "-j", "1"])
    assert res.exit_code == 0, res.output
    heads = [ln for ln in res.stdout.splitlines() if ln and not ln.startswith(" ")]
    assert heads[0].startswith("train_small 2-4: 2 ranks, ") and heads[1] == "1 warning(s) about the traces' data: see --detail", res.stdout


def test_the_lacked_trace_joins_beside_the_summaries_of_the_others(tmp_path):
    """What a rank killed there leaves beside the ranks that finished: their summaries (written after each entry) and
    its bare trace, which a folder of summaries takes for a trace of another job ("traces without a job id"); it joins
    the summaries' window all the same (it was a run of its own)."""
    from traceprobe.recording.summary_process import summarize_trace

    folder = _lacking_rank1(tmp_path)
    out = summarize_trace(str(folder / "train_small.steps2-4.rank0.pt.trace.json.gz"), "script-ddp")
    assert out.get("summary") and not out.get("error"), out
    summary = analyze_paths([folder], jobs=1)
    assert [(r.name, [(w.label, w.ranks) for w in r.windows]) for r in summary.runs] == [
        (f"{folder}/train_small", [("steps 2-4", (0, 1))])]
    assert [Path(r.path).name for r in summary.runs[0].windows[0].reports] == [
        "train_small.steps2-4.rank0.summary.json", "train_small.steps2-4.rank1.pt.trace.json.gz"]
    assert [w for w in summary.warnings if "manifest.json" in w] == [_lacked_line(folder)]
