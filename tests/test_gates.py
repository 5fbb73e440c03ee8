"""CI gates per device and per rank (report/gates.py and overlap-report's exit code), on real sample traces."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from traceprobe import load_trace, overlap_report
from traceprobe.report.gates import shortfalls

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
DDP = [SAMPLES / f"data-parallel.ddp.rank{r}.pt.trace.json.gz" for r in (0, 1)]


def test_exposed_comm_gate_names_the_failing_rank_only():
    reports = [overlap_report(load_trace(p)) for p in DDP]
    # exposed communication in the profiled steps: rank 0 1.17 of 21.25 ms (5.5%), rank 1 1.22 of 21.33 ms (5.7%)
    short = shortfalls(reports, max_exposed_comm=0.056)
    assert len(short) == 1 and "rank 1 cuda:1 exposed communication: 5.7% of the window is above the 5.6% limit" in short[0]
    assert shortfalls(reports, max_exposed_comm=0.10) == []
    # counting the NCCL kernels launched before the trace (rank 1 spin-waits in them): 15.7%
    everything = [overlap_report(load_trace(p), all_device_work=True) for p in DDP]
    short = shortfalls(everything, max_exposed_comm=0.10)
    assert len(short) == 1 and "rank 1 cuda:1 exposed communication: 15.7% of the window is above the 10.0% limit" in short[0]


def test_copy_gate_leaves_bucket_copies_unjudged_like_their_verdict():
    """DDP's gradient-bucket DtoD copies are 0% overlapped and their verdict is n/a: the copy gate does not fail on
    them either; a copy with a judged verdict (the no-overlap variant's HtoD/DtoH) still fails."""
    reports = [overlap_report(load_trace(p)) for p in DDP]
    assert {v.level for r in reports for v in r.verdicts if v.figure == "copy_overlap"} == {"n/a"}
    assert shortfalls(reports, min_copy_overlap=0.5) == []
    nb = overlap_report(load_trace(SAMPLES / "compute-copy.sequential.pt.trace.json.gz"))
    judged = [v for v in nb.verdicts if v.figure == "copy_overlap" and v.level != "n/a"]
    limit = max(v.value for v in judged) + 0.01
    assert judged and len(shortfalls([nb], min_copy_overlap=limit)) >= 1


def test_idle_gate():
    r = overlap_report(load_trace(SAMPLES / "small-ops.one-stream.pt.trace.json.gz"))
    assert [s.split(": ", 1)[1] for s in shortfalls([r], max_idle=0.5)] == ["cuda:0 idle time: 90.2% of the window is above the 50.0% limit"]


@pytest.mark.slow  # the real command in subprocesses
def test_cli_exit_code(tmp_path):
    cmd = [sys.executable, "-m", "traceprobe", "overlap-report", *map(str, DDP), "--format", "json", "-j", "1"]
    assert subprocess.run([*cmd, "--max-exposed-comm", "0.05"], capture_output=True).returncode == 1
    assert subprocess.run([*cmd, "--max-exposed-comm", "0.2", "--max-idle", "0.5"], capture_output=True).returncode == 0


def test_every_gate_judges_a_declared_figure_and_unknown_gates_are_refused():
    """Gates name their figure by its key in the JSON document's figures (report/figures.py); a threshold for
    no gate is an error, not silently ignored."""
    import pytest

    from traceprobe.report.figures import TRACE
    from traceprobe.report.gates import GATES

    keys = {f.key for f in TRACE}
    assert {g.figure for g in GATES} <= keys
    assert len({g.name for g in GATES}) == len(GATES)
    with pytest.raises(ValueError, match="no such gate: min_idle"):
        shortfalls([], min_idle=0.5)
