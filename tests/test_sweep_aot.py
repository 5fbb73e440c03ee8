"""The replay's kernels built ahead of time (traceprobe.analysis.causal.sweep_aot) against numba's JIT kernels of the
same source: the same order, times and critical paths on random SYNTHETIC jobs with random causes removed
(hypothesis); calls of other types sent to the JIT kernels, never to the module (which does not check them); a module
built from another source not used. Where the install did not build the module, it is built here (numba's pycc and
a C compiler); where it cannot be, these tests are skipped."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from traceprobe import load_trace
from traceprobe.analysis.causal import sweep, sweep_aot
from traceprobe.analysis.causal import what_if as W
from traceprobe.analysis.causal.dependency_graph import rank_graph
from traceprobe.analysis.causal.what_if_windows import window_instances
from traceprobe.analysis.job.collectives import collective_table, match_window

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import synth_job  # noqa: E402


@pytest.fixture(scope="module")
def aot_module(tmp_path_factory):
    """The name of the module of kernels built ahead of time: the install's, else one built here in a temporary folder."""
    if sweep_aot.kernels(sweep._jit) is not None:
        return sweep_aot.MODULE
    d = tmp_path_factory.mktemp("aot")
    try:
        sweep_aot.build(d / ("_sweep_aot" + sysconfig.get_config_var("EXT_SUFFIX")))
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"the kernels cannot be built ahead of time here: {type(e).__name__}: {e}")
    sys.path.insert(0, str(d))
    return "_sweep_aot"


@pytest.fixture(scope="module")
def aot(aot_module):
    built = sweep_aot.kernels(sweep._jit, module=aot_module)
    assert built is not None
    return built


def _no_jit():
    raise AssertionError("a call went to the JIT kernels")


@contextlib.contextmanager
def _using(kernels):
    before = sweep._kernels
    sweep._kernels = kernels
    try:
        yield
    finally:
        sweep._kernels = before


def _window(folder, seed, ranks, events, skewed):
    cfg = synth_job.st.Config(events=events, nccl_share=0.2, seed=seed, steps=3)
    paths = synth_job.write_job(cfg, ranks, folder, skewed=min(skewed, ranks - 1), skew_ns=300_000, jobs=1)
    traces = [load_trace(p) for p in paths]
    w = match_window({t.rank: collective_table(t) for t in traces})
    graphs = [rank_graph(t) for t in traces]
    return graphs, W.window_job(graphs, window_instances(w))


def _replays(job, kernels, h, d, no_sync):
    """The window's sweep built, replayed as recorded and with ``h``, ``d``, ``no_sync``, and one critical path into
    every rank's last anchor, all with ``kernels``."""
    with _using(kernels):
        job.sweep = None
        h0 = np.concatenate([g.h for g in job.graphs])
        none = np.zeros(h0.size, bool)
        recorded = W.replay_arrivals(job, h0, job.d, none)
        removed = W.replay_arrivals(job, h, d, no_sync)
        s = job.sweep
        sinks = np.flatnonzero(np.r_[job.a_rank[1:] != job.a_rank[:-1], True]).tolist()
        paths = s.critical_paths(h0, job.d, job.target >= 0, recorded, sinks)
        return s.order, s.n_acyclic, recorded, removed, paths


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), ranks=st.integers(2, 4), events=st.integers(800, 3000), skewed=st.integers(0, 1),
       cut=st.floats(0.0, 1.0), shrink=st.floats(0.0, 1.0), drop=st.floats(0.0, 1.0))
def test_the_kernels_built_ahead_equal_the_jit_on_random_jobs(aot_module, tmp_path_factory, seed, ranks, events, skewed,
                                                              cut, shrink, drop):
    """SYNTHETIC: a job of 2-4 ranks; its window's topological order, its replay as recorded and with a random share of
    every anchor's host time, op duration and sync edge removed, and its critical paths, by both kernels: equal."""
    graphs, job = _window(tmp_path_factory.mktemp("job"), seed, ranks, events, skewed)
    rng = np.random.default_rng(seed)
    h0 = np.concatenate([g.h for g in graphs])
    h = np.where(rng.random(h0.size) < cut, (h0 * rng.random(h0.size)).astype(np.int64), h0)
    d = np.where(rng.random(job.d.size) < shrink, (job.d * rng.random(job.d.size)).astype(np.int64), job.d)
    no_sync = rng.random(h0.size) < drop
    a = _replays(job, sweep_aot.kernels(_no_jit, module=aot_module), h, d, no_sync)  # (every call to the module)
    j = _replays(job, sweep._jit(), h, d, no_sync)
    assert a[0].dtype == np.int32 and np.array_equal(a[0], j[0]) and a[1] == j[1]
    for x, y in zip(a[2] + a[3], j[2] + j[3]):
        assert x.dtype == np.int64 and np.array_equal(x, y)
    assert a[4] is not None and j[4] is not None and len(a[4]) == len(j[4]) == ranks
    for p, q in zip(a[4], j[4]):
        assert all(np.array_equal(x, y) for x, y in zip(p, q))


def test_calls_of_other_types_go_to_the_jit(aot):
    """The module reads its arguments unchecked (an int64 array where it was built for int32 crashes the process):
    every other type goes to the JIT kernel, which computes the same or raises."""
    x = np.array([0, 2, 2, 1], np.int32)
    out = np.zeros(3, np.int32)
    aot.counts_into(x, out)
    assert out.tolist() == [1, 1, 2]
    for args in [(x.astype(np.int64), np.zeros(3, np.int32)), (np.repeat(x, 2)[::2], np.zeros(3, np.int32)),
                 (x, np.zeros(3, np.int64))]:
        aot.counts_into(*args)
        assert args[1].tolist() == [1, 1, 2], args
    frozen = np.zeros(3, np.int32)
    frozen.flags.writeable = False
    for args in [(x, frozen), (x.astype(">i4"), np.zeros(3, np.int32))]:
        with pytest.raises(Exception):  # noqa: B017 - numba's typing error: a read-only output, a swapped byte order
            aot.counts_into(*args)
    assert frozen.tolist() == [0, 0, 0]


@pytest.mark.parametrize("value, code, ok", [
    (np.zeros(2, np.int32), "i4", True), (np.zeros(2, np.int64), "i4", False), (np.zeros((2, 2), np.int32), "i4", False),
    (np.zeros(4, np.int32)[::2], "i4", False), (np.zeros(2, bool), "b1", True), (np.zeros(2, np.uint8), "b1", False),
    ([0, 1], "i8", False), (np.zeros(2, np.int64), "i8!", True), (3, "n", True), (np.int32(3), "n", True),
    (True, "n", False), (2**63, "n", False), (3.0, "n", False), (np.zeros(2, np.int64).view(np.ndarray), "i8", True),
])
def test_fits(value, code, ok):
    assert sweep_aot.fits(value, code) is ok


def test_a_read_only_array_fits_only_where_it_is_read():
    x = np.zeros(2, np.int64)
    x.flags.writeable = False
    assert sweep_aot.fits(x, "i8") and not sweep_aot.fits(x, "i8!")


def test_a_module_built_from_another_source_is_not_used(aot_module, monkeypatch, tmp_path):
    changed = tmp_path / "_sweep_kernels.py"
    changed.write_bytes(sweep_aot.KERNELS_SOURCE.read_bytes() + b"\n# changed\n")
    assert sweep_aot.kernels(sweep._jit, module=aot_module) is not None
    monkeypatch.setattr(sweep_aot, "KERNELS_SOURCE", changed)
    assert sweep_aot.kernels(sweep._jit, module=aot_module) is None


def test_no_module_leaves_the_jit():
    assert sweep_aot.kernels(sweep._jit, module="traceprobe.analysis.causal._no_such_module") is None


def _setup_py():
    import importlib.util

    spec = importlib.util.spec_from_file_location("_traceprobe_setup", ROOT / "setup.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_build_that_fails_leaves_the_module_out_and_says_so(monkeypatch, tmp_path, capsys):
    """setup.py's build of the kernels: where it fails (here: a stand-in for numba without pycc), the extension is left
    out of the build's outputs (setuptools would otherwise copy a file that is not there and fail the install), and
    one line says so."""
    from setuptools import Distribution, Extension

    setup_py = _setup_py()

    class NoPycc:
        @staticmethod
        def build(path):
            raise ImportError("No module named 'numba.pycc'")

    monkeypatch.setattr(setup_py, "_sweep_aot", lambda: NoPycc)
    ext = Extension(sweep_aot.MODULE, sources=[])
    cmd = setup_py.BuildExt(Distribution({"ext_modules": [ext]}))
    cmd.initialize_options()
    cmd.build_lib, cmd.build_temp = str(tmp_path / "lib"), str(tmp_path / "temp")
    cmd.finalize_options()
    cmd.build_extensions()
    assert cmd.extensions == [] and cmd.get_outputs() == []
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not compiled ahead of time (ImportError: No module named 'numba.pycc')" in err


@pytest.mark.parametrize("value, used", [("1", False), ("0", True), ("", True)])
def test_the_environment_can_turn_the_module_off(aot_module, monkeypatch, value, used):
    monkeypatch.setenv(sweep_aot.JIT_ENV, value)
    assert (sweep_aot.kernels(sweep._jit, module=aot_module) is not None) is used


def test_asking_whether_the_kernels_were_built_imports_no_numba():
    """Where the module is not used, ``ahead_of_time`` says so without loading the JIT kernels: numba's import is the
    warm-up thread's (beside the workers, after they are forked) or the first replay's, not the question's."""
    code = ("import sys; from traceprobe.analysis.causal import sweep; "
            "assert sweep.ahead_of_time() is False; assert 'numba' not in sys.modules, 'numba imported'")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, sweep_aot.JIT_ENV: "1"}, timeout=120)
    assert res.returncode == 0, res.stderr
