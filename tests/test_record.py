"""``record`` end to end on the CPU (every GPU replaced by the CPU), and its safety rules."""

from __future__ import annotations

import json

import pytest

import traceprobe
from traceprobe.fileio import scratch_path
from traceprobe.manifest import Entry, trace_name
from traceprobe.recording import record as rec
from traceprobe.recording import trace_files
from traceprobe.recording.record import record
from traceprobe.recording.workloads import Context
from traceprobe.recording.workloads.base import Variant, Workload


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    out = tmp_path_factory.mktemp("rec")
    manifest = record(out, ["multi-gpu", "cpu-gpu", "compute-copy"], device="cpu", size=64, repeat=2)
    return out, manifest


@pytest.mark.slow
def test_every_variant_recorded(recorded):
    out, manifest = recorded
    names = {e.key for e in manifest.variants}
    assert names == {
        ("multi-gpu", "sequential"), ("multi-gpu", "concurrent"),
        ("cpu-gpu", "sequential"), ("cpu-gpu", "concurrent"),
        ("compute-copy", "sequential"), ("compute-copy", "nonblocking"), ("compute-copy", "overlapped"),
    }
    for e in manifest.variants:
        assert e.status == "ok", e
        assert e.wall_s > 0 and len(e.wall_runs_s) == rec.TIMED_RUNS and e.wall_s == sorted(e.wall_runs_s)[1]
        (name,) = e.traces
        t = traceprobe.load_trace(out / name)
        assert not t.host_events.empty
        assert (t.host_events["cat"] == "cpu_op").any()
    on_disk = json.loads((out / "manifest.json").read_text())
    assert on_disk["variants"] == [e.to_json() for e in manifest.variants]
    assert all(isinstance(e["traces"], list) for e in on_disk["variants"])
    assert on_disk["environment"]["torch"]
    # no temporary files left behind
    assert not [p for p in out.iterdir() if p.name.startswith(".")]


@pytest.mark.slow
def test_existing_trace_kept_unless_force(recorded):
    out, _ = recorded
    path = out / trace_name("compute-copy", "sequential")
    before = path.read_bytes()
    with pytest.raises(FileExistsError, match="--resume"):
        record(out, ["compute-copy"], device="cpu", size=64, repeat=2)
    m = record(out, ["compute-copy"], device="cpu", size=64, repeat=2, resume=True)
    e = [e for e in m.variants if e.key == ("compute-copy", "sequential")][0]
    assert e.status == "ok" and e.extra["resumed"] and path.read_bytes() == before
    m = record(out, ["compute-copy"], device="cpu", size=64, repeat=2, force=True)
    assert path.read_bytes() != before


def test_unknown_workload_and_device(tmp_path):
    with pytest.raises(ValueError, match="unknown workload"):
        record(tmp_path, ["nope"], device="cpu")
    with pytest.raises(ValueError, match="--device"):
        record(tmp_path, ["cpu-gpu"], device="tpu")


def test_skip_and_failure_entries(tmp_path):
    """Too few GPUs gives 'skipped'; an error inside a variant gives 'failed'; others still run."""
    def boom():
        raise RuntimeError("CUDA out of memory. Tried to allocate 62.00 MiB")

    ctx = Context(device="cuda", gpus=0)
    w = Workload("x", "test", lambda c: [])
    skipped = rec.run_variant(ctx, w, Variant("two", "needs 2", setup=boom, gpus=2), tmp_path)
    assert skipped.status == "skipped" and "needs 2 GPUs" in skipped.reason
    ctx = Context(device="cpu")
    failed = rec.run_variant(ctx, w, Variant("oom", "fails", setup=boom, gpus=0), tmp_path)
    assert failed.status == "failed" and "out of memory" in failed.reason
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_interrupt_leaves_whole_traces_and_resume_completes(tmp_path, monkeypatch):
    """Ctrl-C in the second variant: the first trace is whole and listed; --resume runs the rest."""
    real = rec._profile
    calls = {"n": 0}

    def flaky(ctx, step, dest):
        calls["n"] += 1
        if calls["n"] == 2:
            # simulate Ctrl-C while torch writes the trace: a partial temp file exists
            scratch_path(dest.parent, dest.name, ".json").write_bytes(b"partial")
            raise KeyboardInterrupt
        real(ctx, step, dest)

    monkeypatch.setattr(rec, "_profile", flaky)
    with pytest.raises(KeyboardInterrupt):
        record(tmp_path, ["compute-copy"], device="cpu", size=32, repeat=2)
    m = json.loads((tmp_path / "manifest.json").read_text())
    status = {e["variant"]: e["status"] for e in m["variants"]}  # as written on disk
    assert status == {"sequential": "ok", "nonblocking": "interrupted"}
    traceprobe.load_trace(tmp_path / trace_name("compute-copy", "sequential"))
    assert not (tmp_path / trace_name("compute-copy", "nonblocking")).exists()
    m = record(tmp_path, ["compute-copy"], device="cpu", size=32, repeat=2, resume=True)
    status = {e.variant: (e.status, e.extra.get("resumed", False)) for e in m.variants}
    assert status == {"sequential": ("ok", True), "nonblocking": ("ok", False), "overlapped": ("ok", False)}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_unwritable_or_full_output_fails_before_work(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(OSError):
        record(blocker / "sub", ["compute-copy"], device="cpu")
    monkeypatch.setattr(trace_files.shutil, "disk_usage", lambda p: type("U", (), {"free": 10})())
    with pytest.raises(OSError, match="free"):
        record(tmp_path / "out", ["compute-copy"], device="cpu")
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_one_recording_per_folder(tmp_path):
    """A folder being recorded into is refused to a second record (and to record --script), in one line."""
    from typer.testing import CliRunner

    from traceprobe.cli import app
    from traceprobe.recording.folder_lock import FolderBusy, FolderLock

    with FolderLock(tmp_path):  # what a running `traceprobe record --out tmp_path` holds
        with pytest.raises(FolderBusy) as ei:
            record(tmp_path, ["cpu-gpu"], device="cpu")
        assert str(ei.value).startswith(f"{tmp_path} is in use") and "\n" not in str(ei.value)
        res = CliRunner().invoke(app, ["record", "--out", str(tmp_path), "cpu-gpu", "--device", "cpu"])
        assert res.exit_code == 2 and "is in use" in res.output and "Traceback" not in res.output
        with pytest.raises(FolderBusy):
            traceprobe.capture(tmp_path, name="x").start()
    assert not (tmp_path / "manifest.json").exists()
    with FolderLock(tmp_path, shared=True), FolderLock(tmp_path, shared=True):  # ranks of one job share it
        with pytest.raises(FolderBusy):
            FolderLock(tmp_path)


def _gz_trace(path, complete=True) -> None:
    """A synthetic trace file: whole, or cut inside the gzip stream."""
    import gzip as gz

    data = gz.compress(json.dumps({"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 2, "pid": 1, "tid": 1}] * 50}).encode())
    path.write_bytes(data if complete else data[: len(data) // 2])


def test_resume_adopts_whole_rank_traces_and_removes_the_rest(tmp_path):
    """Traces a killed run left behind: a whole set of ranks is adopted; a partial or broken set is removed and run again."""
    from traceprobe.recording.workloads import WORKLOADS

    w = WORKLOADS["data-parallel"]
    ddp = [v for v in w.variants(Context(device="cpu")) if v.name == "ddp"][0]
    names = ddp.trace_names(w.name)
    assert names == [trace_name("data-parallel", "ddp", r) for r in (0, 1)]
    for n in names:
        _gz_trace(tmp_path / n)
    running = Entry(w.name, "ddp", "running", names)
    e = rec._adopt(tmp_path, w, ddp, running)
    assert e is not None and e.status == "ok" and e.traces == names and e.wall_s is None and e.extra["adopted"]
    _gz_trace(tmp_path / names[1], complete=False)
    assert rec._adopt(tmp_path, w, ddp, running) is None and not any((tmp_path / n).exists() for n in names)
    _gz_trace(tmp_path / names[0])
    assert rec._adopt(tmp_path, w, ddp, None) is None and not (tmp_path / names[0]).exists()
    assert not list(tmp_path.iterdir())


def _record_ddp(out):
    """``traceprobe record data-parallel`` on the CPU into ``out``, long enough (200 timed steps) for its ddp ranks to be
    caught running: the process, its output dropped."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(traceprobe.__file__).parents[1]), os.environ.get("PYTHONPATH")]))}
    cmd = [sys.executable, "-m", "traceprobe", "record", "--out", str(out), "data-parallel", "--device", "cpu", "--size", "32", "--repeat", "200"]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.mark.slow
def test_killed_record_takes_its_ranks_along_and_resume_completes(tmp_path):
    """kill -9 of record while torchrun runs the ddp ranks: no process survives it; --resume then completes the folder."""
    import signal
    import time

    import psutil

    out = tmp_path / "r"
    proc = _record_ddp(out)
    family: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # until torchrun has started both ranks
            family = psutil.Process(proc.pid).children(recursive=True)
            if len(family) >= 3:
                break
            time.sleep(0.2)
        assert len(family) >= 3, "torchrun and two ranks never started"
        m = json.loads((out / "manifest.json").read_text())
        assert {e["variant"]: e["status"] for e in m["variants"]}["ddp"] == "running"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    gone, alive = psutil.wait_procs(family, timeout=30)
    assert not alive, f"left running after record was killed: {[p.cmdline()[:4] for p in alive]}"

    m = record(out, ["data-parallel"], device="cpu", size=32, repeat=2, resume=True)
    status = {e.variant: (e.status, bool(e.extra.get("resumed")), bool(e.extra.get("adopted"))) for e in m.variants}
    assert status == {"single": ("ok", True, False), "dataparallel": ("ok", True, False), "ddp": ("ok", False, False)}
    assert not [p for p in out.iterdir() if p.name.startswith(".") and p.name != ".manifest.lock"]


@pytest.mark.slow
def test_ranks_end_with_their_torchrun_however_it_ends(tmp_path):
    """kill -9 of torchrun itself (it stops no rank then) while the ddp ranks run: each rank ends with it
    (``die_with_parent`` in the rank). Before, they ran on, orphaned: a CI run found both sleeping 5 minutes later."""
    import signal
    import time

    import psutil

    out = tmp_path / "r"
    proc = _record_ddp(out)
    ranks: list[psutil.Process] = []
    agents: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # until torchrun (its agent) has started both ranks
            agents = [c for c in psutil.Process(proc.pid).children() if "torch.distributed.run" in c.cmdline()]
            ranks = agents[0].children() if len(agents) == 1 else []
            if len(ranks) >= 2:
                break
            time.sleep(0.2)
        assert len(ranks) >= 2, "torchrun never started two ranks"
        agents[0].send_signal(signal.SIGKILL)
        gone, alive = psutil.wait_procs(ranks, timeout=20)
        assert not alive, f"ranks left running after torchrun was killed: {[p.cmdline()[:4] for p in alive]}"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


@pytest.mark.slow
def test_record_counts_variants_and_says_when_there_is_no_gpu(tmp_path):
    """On the CPU: a first line saying only host threads can be judged, then 'i/n status workload.variant' per variant."""
    from typer.testing import CliRunner

    from traceprobe.cli import app

    res = CliRunner().invoke(app, ["record", "streams", "--device", "cpu", "--out", str(tmp_path / "r")])
    assert res.exit_code == 0, res.output
    lines = res.stderr.splitlines()
    assert lines[0].startswith("no GPU here") and "host threads only" in lines[0]
    assert any(x.startswith("1/2 ok") and "streams.one-stream" in x for x in lines)
    assert any(x.startswith("2/2 ok") and "streams.multi-stream" in x for x in lines)
