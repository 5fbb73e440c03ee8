"""The read-ahead: files decoded in a forked process give exactly what decoding them here gives.

Real traces from ``sample_traces/``; the bad file is written here (not JSON).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from traceprobe.collect import analyze_file, analyze_paths
from traceprobe.collect.read_ahead import ReadAhead
from traceprobe.errors import TraceFormatError
from traceprobe.reading.decode import Decoded, read_events
from traceprobe.report.json_document import report_dict

pytestmark = pytest.mark.skipif(not ReadAhead.available(), reason="no fork here")

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
FILES = [SAMPLES / "streams.one-stream.pt.trace.json.gz", SAMPLES / "data-parallel.dataparallel.pt.trace.json.gz"]


def assert_same(a: Decoded, b: Decoded) -> None:
    assert (a.head, a.event_count, a.names, a.threads, a.warnings) == (b.head, b.event_count, b.names, b.threads, b.warnings)
    for table in ("device", "host"):
        assert a.tables[table].keys() == b.tables[table].keys()
        for k, v in a.tables[table].items():
            assert v.dtype == b.tables[table][k].dtype and np.array_equal(v, b.tables[table][k]), (table, k)
            assert v.flags.writeable
    assert a.collectives.keys() == b.collectives.keys()
    for k, v in a.collectives.items():
        assert list(v) == list(b.collectives[k]), k


def test_same_columns_as_decoding_here() -> None:
    ahead = ReadAhead(FILES, None)
    try:
        for f in FILES:
            assert_same(ahead.read(f), read_events(f))
    finally:
        ahead.close()


def test_a_dead_read_ahead_costs_nothing_but_time() -> None:
    ahead = ReadAhead(FILES, None)
    (child,) = multiprocessing.active_children()
    os.kill(child.pid or 0, signal.SIGKILL)
    child.join()
    try:
        for f in FILES:
            assert_same(ahead.read(f), read_events(f))
    finally:
        ahead.close()


def test_out_of_turn_is_decoded_here() -> None:
    ahead = ReadAhead(FILES, None)
    try:
        assert_same(ahead.read(FILES[1]), read_events(FILES[1]))
        assert not multiprocessing.active_children()  # stopped: its files are decoded here from now on
        assert_same(ahead.read(FILES[0]), read_events(FILES[0]))
    finally:
        ahead.close()


def test_errors_are_raised_as_decoding_here_raises_them(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X", ')
    with pytest.raises(TraceFormatError) as here:
        read_events(bad)
    ahead = ReadAhead([bad, FILES[0]], None)
    try:
        with pytest.raises(TraceFormatError) as there:
            ahead.read(bad)
        assert str(there.value) == str(here.value)
        assert_same(ahead.read(FILES[0]), read_events(FILES[0]))
    finally:
        ahead.close()


def test_analyze_paths_in_this_process_reports_as_before(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("not json")
    summary = analyze_paths([*FILES, bad], jobs=1)
    assert [f.path for f in summary.failures] == [str(bad)]
    for f, report in zip(FILES, summary.reports):
        alone = analyze_file(f)
        assert json.dumps(report_dict(report)) == json.dumps(report_dict(alone))  # type: ignore[arg-type]
    assert not multiprocessing.active_children()


def test_the_forked_process_dies_with_its_parent() -> None:
    code = (
        "import multiprocessing, os, sys\n"
        "from traceprobe.collect.read_ahead import ReadAhead\n"
        f"ReadAhead([__import__('pathlib').Path(p) for p in {[str(f) for f in FILES]!r}], None)\n"
        "print(multiprocessing.active_children()[0].pid, flush=True)\n"
        "os.kill(os.getpid(), 9)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    pid = int(out.stdout.split()[0])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/status").read_text() if Path("/proc").exists() else None
            if state is None:
                os.kill(pid, 0)
            elif "State:\tZ" in state:
                return
        except (ProcessLookupError, FileNotFoundError):
            return
        time.sleep(0.1)
    pytest.fail(f"read-ahead process {pid} outlived its parent")
