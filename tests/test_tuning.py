"""The analysis commands' process settings (traceprobe.tuning)."""

from __future__ import annotations

import os

import pytest

from traceprobe import tuning


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
