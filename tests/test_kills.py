"""Kills and leftovers: SIGTERM during a write unwinds as Ctrl-C does (no temporary file left, exit 143), and a
write removes what an earlier, killed writer of the same file left. The writes are slowed on purpose (the first
``fsync`` of the process sleeps) so that the signal lands inside one; the trace is a recorded sample."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from traceprobe import fileio

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "sample_traces" / "compute-copy.overlapped.pt.trace.json.gz"

SLOW = """
import os, sys, time
from pathlib import Path
marker, real = Path(sys.argv[1]), os.fsync
def slow(fd):
    marker.touch()
    time.sleep(60)
    real(fd)
os.fsync = slow
sys.argv = ["traceprobe", *sys.argv[2:]]
from traceprobe.cli import main
main()
"""


def _terminated(tmp_path: Path, args: list[str], folder: Path) -> tuple[int, list[str], float]:
    """Run the command with a slow write, SIGTERM it inside the write; its exit status, the temporary files left in
    ``folder``, and the seconds from the signal to its exit."""
    marker = tmp_path / "writing"
    proc = subprocess.Popen([sys.executable, "-c", SLOW, str(marker), *args], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + 120
    while not marker.exists() and proc.poll() is None and time.monotonic() < end:
        time.sleep(0.02)
    assert marker.exists(), proc.communicate()[1]
    assert [p for p in folder.iterdir() if fileio.TEMP_PATTERN.match(p.name)]  # (inside the write: its file is there)
    t = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.wait(60)
    return proc.returncode, [p.name for p in folder.iterdir() if fileio.TEMP_PATTERN.match(p.name)], time.monotonic() - t


def test_sigterm_unwinds_a_write_in_this_process(tmp_path):
    """The handler the command line installs: SIGTERM inside a write raises as Ctrl-C does, the temporary file goes."""
    from traceprobe import cli

    old = signal.getsignal(signal.SIGTERM)
    try:
        cli._sigterm_as_ctrl_c()
        with pytest.raises(KeyboardInterrupt), fileio.atomic_open(tmp_path / "r.txt", text=True) as f:
            f.write("half")
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # (the signal is handled before this ends)
        assert cli._TERMINATED == [signal.SIGTERM] and list(tmp_path.iterdir()) == []
    finally:
        signal.signal(signal.SIGTERM, old)
        cli._TERMINATED.clear()


@pytest.mark.slow
@pytest.mark.parametrize("command", ["overlap-report", "export", "export-workers"])
def test_sigterm_during_a_write_leaves_no_temporary_file(tmp_path, command):
    """``export-workers``: two worker processes writing, with more traces queued behind them; each unwinds its write
    and starts none of those queued."""
    out = tmp_path / "out"
    out.mkdir()
    args = {"overlap-report": ["overlap-report", str(TRACE), "--output", str(out / "report.txt")],
            "export": ["export", str(TRACE), "--json", "-j", "1", "--out-dir", str(out)],
            "export-workers": ["export", str(ROOT / "sample_traces"), "--json", "-j", "2", "--out-dir", str(out)]}[command]
    rc, left, took = _terminated(tmp_path, args, out)
    assert (rc, left) == (143, [])
    assert took < 30


@pytest.mark.slow
@pytest.mark.parametrize("command", ["job", "plot"])
def test_sigterm_during_job_and_plot_writes(tmp_path, command):
    pytest.importorskip("matplotlib")
    out = tmp_path / "out"
    out.mkdir()
    folder = ROOT / "sample_traces" / "causes" / "ddp-compute"
    args = (["job", str(folder), "--output", str(out / "job.txt")] if command == "job"
            else ["plot", str(TRACE), "--output", str(out / "p.png")])
    rc, left, _ = _terminated(tmp_path, args, out)
    assert (rc, left) == (143, [])


def test_a_write_removes_the_leftovers_of_a_killed_writer_of_its_file(tmp_path, monkeypatch):
    """A temporary file of the same name older than this process goes; one of another name, or newer, stays."""
    old = tmp_path / ".report.txt.traceprobe-abcd1234.tmp"
    other = tmp_path / ".other.txt.traceprobe-abcd1234.tmp"
    young = tmp_path / ".report.txt.traceprobe-efgh5678.tmp"
    for p in (old, other, young):
        p.write_bytes(b"half")
    past = time.time() - 3600
    os.utime(old, (past, past))
    os.utime(other, (past, past))
    monkeypatch.setattr(fileio, "STARTED", time.time() - 60)
    os.utime(young, (time.time(), time.time()))
    fileio.atomic_write(tmp_path / "report.txt", "whole")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([other.name, young.name, "report.txt"])


@pytest.mark.slow
@pytest.mark.parametrize("delay", [1.5, 4.0])
def test_sigterm_to_the_process_group_prints_no_worker_traceback(delay):
    """A timeout's SIGTERM to the whole process group (the command, its workers, a decoding helper) while a folder is
    analysed: exit 143 and no traceback. Each worker received two (the group's and the command's stopping it) and
    printed the first, raised as Ctrl-C, often while formatting it when the second came."""
    proc = subprocess.Popen([sys.executable, "-m", "traceprobe", "overlap-report", str(ROOT / "sample_traces"), "--format", "json",
                             "-j", "2"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    time.sleep(delay)
    os.killpg(proc.pid, signal.SIGTERM)
    err = proc.communicate(timeout=60)[1]
    assert proc.returncode == 143 and "Traceback" not in err, err[-2000:]
