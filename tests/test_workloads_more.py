"""The workloads beyond the seeds, recorded end to end on the CPU (every GPU replaced by the CPU)."""

from __future__ import annotations

import subprocess

import pytest

import traceprobe
from traceprobe.manifest import trace_name
from traceprobe.recording import launch
from traceprobe.recording import record as rec
from traceprobe.recording.record import record
from traceprobe.recording.workloads import WORKLOADS, Context, tile_parallel

NEW = {
    "streams": {"one-stream", "multi-stream"},
    "small-ops": {"one-stream", "multi-stream", "cpu-serial", "cpu-threads"},
    "branches": {"synchronized", "independent"},
    "data-parallel": {"single", "dataparallel", "ddp"},
    "model-parallel": {"naive", "pipelined"},
    "tile-parallel": {"single", "tiled"},
}
SIZE, REPEAT = 32, 2


def test_registered_after_the_seeds():
    assert list(WORKLOADS)[:3] == ["multi-gpu", "cpu-gpu", "compute-copy"]
    assert list(WORKLOADS)[3:] == list(NEW)
    ctx = Context(device="cpu")
    for name, variants in NEW.items():
        vs = WORKLOADS[name].variants(ctx)
        assert {v.name for v in vs} == variants
        for v in vs:
            assert v.params and v.description


@pytest.fixture(scope="module")
def ddp_recording(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp")
    return out, record(out, ["data-parallel"], device="cpu", size=SIZE, repeat=REPEAT)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in NEW if n != "data-parallel"])
def test_in_process_workloads_record_on_cpu(tmp_path, name):
    manifest = record(tmp_path, [name], device="cpu", size=SIZE, repeat=REPEAT)
    entries = manifest.variants
    assert {e.variant for e in entries} == NEW[name]
    for e in entries:
        assert e.status == "ok", e
        assert e.wall_s > 0 and e.params
        assert e.traces == [trace_name(name, e.variant)]
        t = traceprobe.load_trace(tmp_path / e.traces[0])
        assert (t.host_events["cat"] == "cpu_op").any()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


@pytest.mark.slow
def test_data_parallel_records_single_dataparallel_and_ddp_ranks(ddp_recording):
    out, manifest = ddp_recording
    entries = {e.variant: e for e in manifest.variants}
    assert set(entries) == NEW["data-parallel"]
    for e in entries.values():
        assert e.status == "ok", e
        assert e.wall_s > 0
    for v in ("single", "dataparallel"):
        assert not traceprobe.load_trace(out / entries[v].traces[0]).host_events.empty
    ddp = entries["ddp"]
    assert ddp.traces == [trace_name("data-parallel", "ddp", r) for r in (0, 1)]
    assert ddp.params["backend"] == "gloo" and ddp.params["ranks"] == 2
    assert ddp.params["profiled_wall_s"] > 0 and "profiled_wall_s" not in entries["single"].params
    for r, name in enumerate(ddp.traces):
        t = traceprobe.load_trace(out / name)
        assert t.rank == r
        assert len(t.steps) == 3
        assert (t.host_events["cat"] == "cpu_op").any()
    assert not [p for p in out.iterdir() if p.name.startswith(".")]


@pytest.mark.slow
def test_ddp_keeps_existing_rank_traces_unless_forced(ddp_recording):
    out, _ = ddp_recording
    before = (out / trace_name("data-parallel", "ddp", 0)).read_bytes()
    ctx = Context(device="cpu", size=SIZE, repeat=REPEAT)
    w = WORKLOADS["data-parallel"]
    ddp = [v for v in w.variants(ctx) if v.name == "ddp"][0]
    entry = rec.run_variant(ctx, w, ddp, out, force=False)
    assert entry.status == "kept" and "--force" in entry.reason
    assert (out / trace_name("data-parallel", "ddp", 0)).read_bytes() == before


def test_ddp_failure_is_reported_with_stderr(tmp_path, monkeypatch):
    """A worker that cannot start becomes a 'failed' entry naming the error, not an exception."""
    ctx = Context(device="cpu", size=SIZE, repeat=REPEAT)
    w = WORKLOADS["data-parallel"]
    ddp = [v for v in w.variants(ctx) if v.name == "ddp"][0]
    orig = subprocess.Popen

    def broken(cmd, **kw):  # a child that dies at once, like a worker that cannot import
        assert "torch.distributed.run" in cmd and kw["env"]["NCCL_NVLS_ENABLE"] == "0" and kw["start_new_session"]
        return orig([cmd[0], "-c", "import sys; sys.stderr.write('ModuleNotFoundError: no_such_worker\\n'); sys.exit(3)"], **kw)

    monkeypatch.setattr(launch.subprocess, "Popen", broken)
    entry = rec.run_variant(ctx, w, ddp, tmp_path, force=True)
    assert entry.status == "failed"
    assert "torchrun exited with 3" in entry.reason and "ModuleNotFoundError" in entry.reason


def test_too_few_gpus_skips_before_touching_cuda(tmp_path):
    """On a one-GPU machine the two-GPU variants are skipped by record's check, not failed."""
    ctx = Context(device="cuda", gpus=1)
    two_gpu = {("model-parallel", "naive"), ("model-parallel", "pipelined"), ("tile-parallel", "tiled"),
               ("data-parallel", "dataparallel"), ("data-parallel", "ddp")}
    seen = set()
    for name in NEW:
        w = WORKLOADS[name]
        for v in w.variants(ctx):
            if v.gpus > ctx.gpus:
                entry = rec.run_variant(ctx, w, v, tmp_path)
                assert entry.status == "skipped" and "needs 2 GPUs" in entry.reason, entry
                seen.add((name, v.name))
            assert v.gpu_bytes >= 0
    assert seen == two_gpu
    branches = {v.name: v for v in WORKLOADS["branches"].variants(ctx)}
    assert branches["independent"].params["placement"] == "cpu, cuda:0 (2 streams)"
    assert WORKLOADS["branches"].variants(Context(device="cuda", gpus=2))[0].params["placement"] == "cpu, cuda:0, cuda:1"


@pytest.mark.slow
def test_tile_strips_cover_the_image_and_the_check_catches_missing_halos(tmp_path, monkeypatch):
    for height, k in ((32, 4), (1024, 4), (1024, 3), (64, 2), (16, 4)):
        plan = tile_parallel.strips(height, k)
        assert sum(n for *_, n in plan) == height // tile_parallel.SCALE
        for lo, hi, crop, n in plan:
            assert lo % tile_parallel.SCALE == 0 and (hi - lo) // tile_parallel.SCALE >= crop + n
    monkeypatch.setattr(tile_parallel, "HALO", 0)  # cut without halos: the boundary rows go wrong
    manifest = record(tmp_path, ["tile-parallel"], device="cpu", size=SIZE, repeat=REPEAT)
    entries = {e.variant: e for e in manifest.variants}
    assert entries["single"].status == "ok"
    assert entries["tiled"].status == "failed" and "differs from the untiled" in entries["tiled"].reason
