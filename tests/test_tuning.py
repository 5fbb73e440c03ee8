"""The analysis commands' process settings (traceprobe.tuning)."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

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


@pytest.fixture(autouse=True)
def _gc_as_it_was():
    """tune() pauses this (the test) process's garbage collector: every test leaves it as it found it."""
    enabled = gc.isenabled()
    yield
    tuning._GC_HELD[0] = False
    gc.unfreeze()
    (gc.enable if enabled else gc.disable)()


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


def test_the_garbage_collector_waits_for_the_imports():
    """tune() pauses the cyclic collector; imports_done() sets what exists aside (gc.freeze) and resumes it, once."""
    assert gc.isenabled()
    tuning.tune()
    assert not gc.isenabled()
    tuning.imports_done()
    assert gc.isenabled() and gc.get_freeze_count() > 0
    gc.disable()
    tuning.imports_done()  # (once only: a second call changes nothing)
    assert not gc.isenabled()


def test_imports_done_leaves_a_library_caller_alone():
    """Without tune() (a notebook, a program importing traceprobe) the collector is not touched."""
    gc.disable()
    tuning.imports_done()
    assert not gc.isenabled() and gc.get_freeze_count() == 0


def test_the_command_runs_its_analysis_with_the_collector_on():
    """In a real command: off while it imports, on (with the imported objects frozen) once the analysis runs."""
    code = (
        "import gc, sys\n"
        "from traceprobe import collect\n"
        "seen = []\n"
        "real = collect.analyze_file\n"
        "def spy(*a, **k):\n"
        "    seen.append((gc.isenabled(), gc.get_freeze_count() > 0))\n"
        "    return real(*a, **k)\n"
        "collect.analyze_file = spy\n"
        "import atexit, os\n"
        "sys.argv = ['traceprobe', 'overlap-report', sys.argv[1], '--format', 'json', '--jobs', '1', '--output', os.devnull]\n"
        "real_exit = os._exit\n"
        "os._exit = lambda c: (print('SEEN', seen, flush=True), real_exit(c))\n"
        "from traceprobe.launch import entry\n"
        "entry()\n"
    )
    repo = Path(tuning.__file__).resolve().parents[1]
    env = os.environ | {"TRACEPROBE_PREFETCH": "0", "PYTHONPATH": os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")]))}
    sample = repo / "sample_traces" / "compute-copy.overlapped.pt.trace.json.gz"
    out = subprocess.run([sys.executable, "-c", code, str(sample)], capture_output=True, text=True, timeout=120, env=env)
    assert "SEEN [(True, True)]" in out.stdout, out.stdout + out.stderr
