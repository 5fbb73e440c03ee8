"""CI gates per device and per rank (analysis/gates.py and overlap-report's exit code), on real sample traces."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from traceprobe import load_trace, overlap_report
from traceprobe.analysis.gates import shortfalls

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
DDP = [SAMPLES / f"data-parallel.ddp.rank{r}.pt.trace.json.gz" for r in (0, 1)]


def test_exposed_comm_gate_names_the_failing_rank_only():
    reports = [overlap_report(load_trace(p)) for p in DDP]
    # exposed communication: rank 0 1.5 of 23.1 ms (6.7%), rank 1 4.0 of 25.6 ms (15.7%)
    short = shortfalls(reports, max_exposed_comm=0.10)
    assert len(short) == 1 and "rank 1 cuda:1 exposed communication 15.7% of the window > 10.0%" in short[0]
    assert shortfalls(reports, max_exposed_comm=0.20) == []


def test_idle_gate_and_cli_exit_code(tmp_path):
    r = overlap_report(load_trace(SAMPLES / "small-ops.one-stream.pt.trace.json.gz"))
    assert [s.split(": ", 1)[1] for s in shortfalls([r], max_idle=0.5)] == ["cuda:0 idle time 90.2% of the window > 50.0%"]
    cmd = [sys.executable, "-m", "traceprobe", "overlap-report", *map(str, DDP), "--format", "json", "-j", "1"]
    assert subprocess.run([*cmd, "--max-exposed-comm", "0.1"], capture_output=True).returncode == 1
    assert subprocess.run([*cmd, "--max-exposed-comm", "0.2", "--max-idle", "0.5"], capture_output=True).returncode == 0
