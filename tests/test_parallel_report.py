"""``overlap_report(parallel=True)`` (half of the tables in a second thread) gives the report computed in one thread,
and ``analyze_paths`` asks for it only where the analysis runs in its own process beside no worker. The traces are
the repository's real samples and public test traces; the one written here is SYNTHETIC."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from traceprobe import collect, load_trace
from traceprobe.analysis import report as report_module
from traceprobe.analysis.report import overlap_report

REPO = Path(__file__).resolve().parent.parent
TRACES = sorted(
    f for f in subprocess.run(["git", "ls-files", "sample_traces", "tests/data/public"], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout.split()
    if ".json" in f and not f.endswith("manifest.json")
)


def assert_same(a: Any, b: Any, where: str = "report") -> None:
    """Equal field by field: DataFrames with their dtypes and index, NaN equal to NaN."""
    if isinstance(a, pd.DataFrame):
        pd.testing.assert_frame_equal(a, b, obj=where)
    elif isinstance(a, pd.Series):
        pd.testing.assert_series_equal(a, b, obj=where)
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b, err_msg=where)
    elif dataclasses.is_dataclass(a) and not isinstance(a, type):
        assert type(a) is type(b), where
        for f in dataclasses.fields(a):
            assert_same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, float) and math.isnan(a):
        assert isinstance(b, float) and math.isnan(b), where
    else:
        assert a == b, where


@pytest.fixture
def threads_for_all(monkeypatch):
    """Every trace here is below PARALLEL_ROWS: the second thread is made to run for them, and seen to."""
    monkeypatch.setattr(report_module, "PARALLEL_ROWS", 0)
    ran_in: list[str] = []
    real = report_module._tables
    monkeypatch.setattr(report_module, "_tables", lambda *a: ran_in.append(threading.current_thread().name) or real(*a))
    return ran_in


@pytest.mark.parametrize("name", TRACES)
def test_the_report_is_the_same_with_a_second_thread(name, threads_for_all):
    serial = overlap_report(load_trace(REPO / name))
    beside = overlap_report(load_trace(REPO / name), parallel=True)
    assert threads_for_all[0] == threading.current_thread().name and threads_for_all[1].startswith("traceprobe-tables")
    assert_same(serial, beside)
    assert_same(serial.headline, beside.headline, "headline")


def test_small_traces_stay_in_one_thread(monkeypatch):
    ran_in: list[str] = []
    real = report_module._tables
    monkeypatch.setattr(report_module, "_tables", lambda *a: ran_in.append(threading.current_thread().name) or real(*a))
    overlap_report(load_trace(REPO / TRACES[0]), parallel=True)  # (far below PARALLEL_ROWS)
    assert ran_in == [threading.current_thread().name]


def test_an_error_in_the_second_thread_is_raised_here(monkeypatch):
    def broken(trace, kept):
        raise RuntimeError("a table failed")

    monkeypatch.setattr(report_module, "PARALLEL_ROWS", 0)
    monkeypatch.setattr(report_module, "_tables", broken)
    with pytest.raises(RuntimeError, match="a table failed"):
        overlap_report(load_trace(REPO / TRACES[0]), parallel=True)


def test_analyze_paths_asks_for_the_thread_only_in_its_own_process(monkeypatch, tmp_path):
    """One trace (or --jobs 1) analysed here on 2+ CPUs: parallel; worker processes, one CPU, or a library
    caller that did not ask: not."""
    asked: list[bool] = []
    real = report_module.overlap_report

    def spy(*a, parallel=False, **k):
        asked.append(parallel)
        return real(*a, parallel=parallel, **k)

    monkeypatch.setattr(report_module, "overlap_report", spy)
    one = REPO / "sample_traces" / "compute-copy.overlapped.pt.trace.json.gz"
    two = [one, REPO / "sample_traces" / "compute-copy.sequential.pt.trace.json.gz"]
    monkeypatch.setattr(collect, "usable_cpus", lambda: 2)
    collect.analyze_paths([one], parallel=True)
    collect.analyze_paths(two, jobs=1, parallel=True)
    assert asked == [True, True, True]
    asked.clear()
    collect.analyze_paths([one])  # a library caller
    monkeypatch.setattr(collect, "usable_cpus", lambda: 1)
    collect.analyze_paths([one], parallel=True)  # one CPU
    assert asked == [False, False]
    monkeypatch.setattr(collect, "usable_cpus", lambda: 2)
    sent = []
    real_map = collect.map_items
    monkeypatch.setattr(collect, "map_items", lambda fn, items, **k: sent.append(fn) or real_map(fn, items, **k))
    summary = collect.analyze_paths(two, jobs=2, parallel=True)  # worker processes
    assert len(summary.reports) == 2
    assert sent[0] is collect.analyze_file or not sent[0].keywords.get("parallel")
