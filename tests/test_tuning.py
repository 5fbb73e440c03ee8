"""The analysis commands' process settings (traceprobe.tuning) and the JSON rows they print."""

from __future__ import annotations

import math
import os

import numpy as np
import pandas as pd
import pytest

from traceprobe import tuning
from traceprobe.report.json_document import rows


class _Mallopt:
    """Stands in for glibc's ``mallopt`` (a ctypes function object: it takes argtypes/restype)."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def __call__(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return 1


class _FakeLibc:
    def __init__(self) -> None:
        self.mallopt = _Mallopt()


@pytest.fixture
def fake_libc(monkeypatch):
    import ctypes

    libc = _FakeLibc()
    monkeypatch.setattr(ctypes, "CDLL", lambda name: libc)
    monkeypatch.setattr(tuning.sys, "platform", "linux")
    for k in (*tuning.BLAS_THREADS, *tuning.MALLOC):
        monkeypatch.delenv(k, raising=False)
    return libc


def test_tune_sets_blas_threads_and_malloc(fake_libc, monkeypatch):
    tuning.tune()
    assert all(os.environ[k] == "1" for k in tuning.BLAS_THREADS)
    assert fake_libc.mallopt.calls == [(-3, 32 << 20), (-1, 64 << 20), (-2, 16 << 20)]


def test_tune_keeps_what_the_user_set(fake_libc, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "0")
    tuning.tune()
    assert os.environ["OMP_NUM_THREADS"] == "4"
    assert [p for p, _ in fake_libc.mallopt.calls] == [-3, -2]


def test_tune_without_mallopt_does_nothing_more(monkeypatch):
    import ctypes

    monkeypatch.setattr(ctypes, "CDLL", lambda name: object())  # no mallopt (musl)
    monkeypatch.setattr(tuning.sys, "platform", "linux")
    for k in tuning.BLAS_THREADS:
        monkeypatch.delenv(k, raising=False)  # (restored after the test)
    tuning.tune()  # no error


def test_rows_cleans_every_dtype_as_json_needs():
    df = pd.DataFrame({
        "i": np.array([1, 2, 3], np.int64),
        "f": [1.5, math.nan, math.inf],
        "b": [True, False, True],
        "o": ["a", None, np.float64("nan")],
        "n": pd.array([1, None, 3], dtype="Int64"),
        "u": np.array([7, 8, 9], np.uint8),
    })
    got = rows(df)
    assert got == [
        {"i": 1, "f": 1.5, "b": True, "o": "a", "n": 1, "u": 7},
        {"i": 2, "f": None, "b": False, "o": None, "n": None, "u": 8},
        {"i": 3, "f": None, "b": True, "o": None, "n": 3, "u": 9},
    ]
    assert all(type(v) in (int, float, bool, str, type(None)) for r in got for v in r.values())
    assert rows(df.iloc[:0]) == []
