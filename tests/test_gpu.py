"""On a real GPU: record the seed experiments and check the report reaches the sample traces' verdicts.

Skipped on CPU-only machines (see conftest.py); run on the GPU machine before resolving.
"""

from __future__ import annotations

import pytest

import traceprobe
from traceprobe.manifest import trace_name
from traceprobe.recording.record import record


def _report(out, workload, variant):
    return traceprobe.overlap_report(traceprobe.load_trace(out / trace_name(workload, variant)))


@pytest.mark.gpu
def test_compute_copy_on_gpu(tmp_path):
    m = record(tmp_path, ["compute-copy"], device="cuda", size=2048, repeat=20)
    assert all(e.status == "ok" for e in m.variants), m.variants
    for variant, check in (("overlapped", lambda f: f >= 0.9), ("nonblocking", lambda f: f < 0.05), ("sequential", lambda f: f < 0.05)):
        r = _report(tmp_path, "compute-copy", variant)
        row = r.copy_overlap[(r.copy_overlap["device"] == 0) & (r.copy_overlap["direction"] == "DtoH")].iloc[0]
        print(f"compute-copy.{variant}: DtoH overlap {row['fraction']:.3f} of {row['copy_ns'] / 1e6:.1f} ms")
        assert row["copies"] == 20 and check(row["fraction"])


@pytest.mark.gpu
def test_cpu_gpu_on_gpu(tmp_path):
    record(tmp_path, ["cpu-gpu"], device="cuda")
    conc = _report(tmp_path, "cpu-gpu", "concurrent").cpu_gpu
    seq = _report(tmp_path, "cpu-gpu", "sequential").cpu_gpu
    print(f"cpu-gpu: host compute under GPU work {conc.fraction:.3f} concurrent, {seq.fraction:.3f} sequential")
    assert conc.fraction > 0.5 > seq.fraction


@pytest.mark.multigpu
def test_multi_gpu_on_gpus(tmp_path):
    record(tmp_path, ["multi-gpu"], device="cuda", size=4000, repeat=50)
    conc = _report(tmp_path, "multi-gpu", "concurrent").devices.concurrency
    seq = _report(tmp_path, "multi-gpu", "sequential").devices.concurrency
    print(f"multi-gpu: cross-device concurrency {conc:.3f} concurrent, {seq:.3f} sequential")
    assert conc >= 0.9 and seq < 0.05


def test_record_skips_cleanly_without_enough_gpus(tmp_path):
    """On any machine: --device auto never raises for too few GPUs; entries say why."""
    m = record(tmp_path, ["multi-gpu"], device="auto", size=32, repeat=2)
    for e in m.variants:
        assert e.status in ("ok", "skipped"), e
        if e.status == "skipped":
            assert "GPU" in e.reason
