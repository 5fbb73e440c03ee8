"""traceprobe.on_trace_ready: a CPU-only torch.profiler run writes each window's trace and summary off the training
thread; errors never reach the loop; a summary lost never costs the trace."""

from __future__ import annotations

import gzip
import logging
import shutil
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import traceprobe  # noqa: E402
from traceprobe.collect import analyze_paths  # noqa: E402
from traceprobe.recording.summary_process import summarize_window  # noqa: E402

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"


def _train(handler, steps: int = 10) -> list[float]:
    """A small CPU training-like loop profiled in windows (wait 1, warmup 1, active 2, twice); the time of each handler call."""
    calls: list[float] = []

    def timed(prof):
        t = time.perf_counter()
        handler(prof)
        calls.append(time.perf_counter() - t)

    x = torch.randn(64, 64)
    sched = torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=2)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=sched, on_trace_ready=timed) as prof:
        for _ in range(steps):
            for _ in range(20):
                x = (x @ x).tanh()
            prof.step()
    return calls


@pytest.mark.slow  # a CPU training loop under torch.profiler, its windows written end to end
@pytest.mark.parametrize("save", ["fork", "thread"])
def test_windows_written_off_the_loop(tmp_path, save) -> None:
    lines: list[str] = []
    h = traceprobe.on_trace_ready(tmp_path / "job", trace=True, log=lines.append, job="test-job", save=save)
    calls = _train(h)
    assert len(calls) == 2 and max(calls) < 0.25  # the loop only queues the window
    assert h.wait(120) and not h.errors
    names = sorted(p.name for p in (tmp_path / "job").iterdir())
    assert names == ["rank0.steps2-3.pt.trace.json.gz", "rank0.steps2-3.summary.json",
                     "rank0.steps6-7.pt.trace.json.gz", "rank0.steps6-7.summary.json"]
    assert len(lines) == 2 and lines[0].startswith("traceprobe rank 0 steps 2-3: step ")
    # the summaries alone give the traces' figures
    from_summaries = analyze_paths([str(tmp_path / "job")], jobs=1)
    from_traces = analyze_paths([str(p) for p in (tmp_path / "job").glob("*.pt.trace.json.gz")], jobs=1)
    assert [r.path.endswith(".summary.json") for r in from_summaries.reports] == [True, True]
    for a, b in zip(from_traces.reports, from_summaries.reports):
        assert repr(a.headline) == repr(b.headline) and a.steps.equals(b.steps) and repr(a.host_threads) == repr(b.host_threads)
        assert b.info["job"] == "test-job"


def test_summary_only(tmp_path) -> None:
    h = traceprobe.on_trace_ready(tmp_path / "job", trace=False)
    _train(h, steps=4)
    assert h.wait(120) and not h.errors
    assert sorted(p.name for p in (tmp_path / "job").iterdir()) == ["rank0.steps2-3.summary.json"]  # no trace, no temporary file


@pytest.mark.slow  # a CPU training loop under torch.profiler, end to end
def test_unwritable_folder_costs_nothing_but_the_files(tmp_path, caplog) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the folder should be")
    h = traceprobe.on_trace_ready(blocker / "job")
    with caplog.at_level(logging.DEBUG, logger="traceprobe"):
        calls = _train(h)  # no exception reaches the loop
        assert h.wait(60)
    assert len(calls) == 2 and len(h.errors) == 2 and "cannot create" in h.errors[0]
    warnings = [r for r in caplog.records if r.name == "traceprobe" and r.levelno == logging.WARNING]
    assert len(warnings) == 1  # logged once


def _tmp_trace(folder: Path) -> Path:
    tmp = folder / ".rank0.abc.pt.trace.json.tmp"
    tmp.write_bytes(gzip.decompress((SAMPLES / "causes/ddp-compute").glob("rank1.*").__next__().read_bytes()))
    return tmp


def test_summary_that_cannot_be_written_keeps_the_trace(tmp_path, monkeypatch) -> None:
    from traceprobe import fileio
    from traceprobe.fileio import WriteError

    write = fileio.atomic_write

    def full(path, *a, **k):  # (a disk with room for the trace, not for the summary)
        if str(path).endswith(".summary.json"):
            raise WriteError(path, OSError(28, "No space left on device"))
        return write(path, *a, **k)

    monkeypatch.setattr(fileio, "atomic_write", full)
    out = summarize_window(str(_tmp_trace(tmp_path)), str(tmp_path), 1, 1, "j", keep_trace=True)
    assert out["summary"] is None and "No space left" in out["error"]
    assert Path(out["trace"]).name == "rank1.steps2-4.pt.trace.json.gz" and Path(out["trace"]).stat().st_size > 1000
    assert not list(tmp_path.glob(".*"))  # the temporary file is gone


def test_trace_that_cannot_be_analysed_is_still_kept(tmp_path) -> None:
    tmp = tmp_path / ".rank3.x.pt.trace.json.tmp"
    tmp.write_text('{"traceEvents": [{"ph": "X", "name": "a", "ts": "oops"')
    out = summarize_window(str(tmp), str(tmp_path), 3, 2, "j", keep_trace=True)
    assert out["summary"] is None and "cannot analyse window 2 of rank 3" in out["error"]
    assert Path(out["trace"]).name == "rank3.window2.pt.trace.json.gz"
    assert not tmp.exists()


def test_names_are_never_reused(tmp_path) -> None:
    for _ in range(2):
        out = summarize_window(str(_tmp_trace(tmp_path)), str(tmp_path), 1, 1, "j", keep_trace=False)
        assert out["error"] is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rank1.steps2-4-2.summary.json", "rank1.steps2-4.summary.json"]
    shutil.rmtree(tmp_path)


@pytest.mark.slow  # a subprocess recording windows end to end
def test_the_training_process_never_imports_pandas_for_it(tmp_path) -> None:
    """The handler's thread exports the events and hands them to another process: pandas stays out of training."""
    import subprocess
    import sys

    code = ("import sys, torch, traceprobe\n"
            f"h = traceprobe.on_trace_ready({str(tmp_path / 'job')!r}, trace=False)\n"
            "x = torch.randn(32, 32)\n"
            "with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=torch.profiler.schedule(wait=0, warmup=1, active=1, repeat=1), on_trace_ready=h) as p:\n"
            "    for _ in range(3):\n"
            "        x = x @ x; p.step()\n"
            "assert h.wait(120) and not h.errors, h.errors\n"
            "print('pandas' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "False"
    assert len(list((tmp_path / "job").glob("*.summary.json"))) == 1


@pytest.mark.slow  # a CPU training loop under torch.profiler, end to end
@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="fork is POSIX")
def test_events_written_by_a_forked_child_by_default(tmp_path) -> None:
    h = traceprobe.on_trace_ready(tmp_path / "job", trace=True)
    assert h.save == "fork"
    calls = _train(h, steps=4)
    assert max(calls) < 0.25 and h.wait(120) and not h.errors, h.errors
    assert len(h.fork_pauses_s) == 1  # (the events went through a forked child: the fork was timed)
    assert sorted(p.name for p in (tmp_path / "job").iterdir()) == ["rank0.steps2-3.pt.trace.json.gz", "rank0.steps2-3.summary.json"]


def test_a_lost_window_leaves_none_of_the_exporters_files(tmp_path) -> None:
    """SYNTHETIC exporter that fails as torch's does on a full disk: its ``<name>.tmp`` half-written, then an error.
    Neither it nor the scratch name is left, nor what a killed process of the rank left before; the error is one line."""
    from traceprobe.recording.handler import TraceReady

    class Full:
        def export_chrome_trace(self, path: str) -> None:
            Path(path + ".tmp").write_text('{"traceEvents": [')
            raise OSError(28, "No space left on device")

    import os

    left = tmp_path / ".rank0.pt.trace.json.traceprobe-abcd1234.tmp.tmp"  # (a window of a killed process of rank 0)
    left.write_text('{"traceEvents": [')
    os.utime(left, (time.time() - 3600, time.time() - 3600))
    h = TraceReady(tmp_path, save="thread")
    assert h._export(Full(), 0, 1) is None
    assert list(tmp_path.iterdir()) == [] and "No space left" in h.errors[0]
