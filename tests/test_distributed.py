"""overlap-report / export on a Dask cluster and from fsspec URLs: the same output as a local run."""

from __future__ import annotations

import gzip
import os
import shutil
import signal
from pathlib import Path

import pytest
from typer.testing import CliRunner

from traceprobe import collect
from traceprobe.cli import app

ROOT = Path(__file__).resolve().parent.parent
DDP = ROOT / "sample_traces" / "script-ddp"
PAIR = [ROOT / "sample_traces" / f"data-parallel.ddp.rank{r}.pt.trace.json.gz" for r in (0, 1)]


def _report(*args: str) -> str:
    res = CliRunner().invoke(app, ["overlap-report", *args, "--format", "json"])
    assert res.exit_code == 0, res.output
    return res.stdout


@pytest.mark.slow  # a Dask LocalCluster of worker processes
def test_overlap_report_on_a_dask_cluster_gives_the_same_json(dask_scheduler):
    paths = [str(DDP), *map(str, PAIR)]
    local = _report(*paths, "--jobs", "1")
    assert '"rank"' in local
    assert _report(*paths, "--scheduler", dask_scheduler) == local
    assert _report(*paths, "--jobs", "2") == local


@pytest.mark.slow  # a Dask LocalCluster of worker processes
def test_file_urls_on_the_cluster_and_memory_urls_in_process(dask_scheduler, tmp_path):
    fsspec = pytest.importorskip("fsspec")
    for f in PAIR:  # (a manifest beside URL traces is not read: none here either)
        shutil.copy(f, tmp_path / f.name)
    local = _report(str(tmp_path), "--jobs", "1")
    url = f"file://{tmp_path}"
    via_url = _report(url, "--scheduler", dask_scheduler)
    assert via_url.replace(url, str(tmp_path)) == local
    mem = fsspec.filesystem("memory")
    for f in PAIR:
        mem.pipe(f"/job/{f.name}", f.read_bytes())
    in_memory = _report("memory://job", "--jobs", "1")  # (memory:// lives in this process only)
    assert in_memory.replace("memory:///job", str(tmp_path)) == local


def test_missing_url_is_one_failure_and_the_rest_is_reported():
    res = CliRunner().invoke(app, ["overlap-report", "memory://nowhere/at/all", str(PAIR[0]), "--format", "json", "--jobs", "1"])
    assert res.exit_code == 2
    assert "memory://nowhere/at/all: no such file or folder" in res.stderr
    assert '"rank": 0' in res.stdout


@pytest.mark.slow  # a Dask LocalCluster of worker processes
def test_export_on_a_dask_cluster_writes_the_same_files(dask_scheduler, tmp_path):
    outs = {}
    for how, opts in {"local": ["--jobs", "1"], "dask": ["--scheduler", dask_scheduler]}.items():
        out = tmp_path / how
        res = CliRunner().invoke(app, ["export", *map(str, PAIR), "--json", "--out-dir", str(out), *opts])
        assert res.exit_code == 0, res.output
        outs[how] = {p.name: gzip.decompress(p.read_bytes()) for p in sorted(out.iterdir())}
    assert len(outs["local"]) == 2 and outs["dask"] == outs["local"]


_analyze_file = collect.analyze_file


def _kill_self_on_rank1(path):
    """analyze_file, but the process dies (as if OOM-killed) on rank 1's trace when in a worker."""
    if "rank1" in str(path) and os.environ.get("TRACEPROBE_TEST_PARENT") != str(os.getpid()):
        os.kill(os.getpid(), signal.SIGKILL)
    return _analyze_file(path)


def test_a_worker_killed_on_one_file_fails_only_that_file(tmp_path, monkeypatch):
    for i in range(3):
        shutil.copy(PAIR[0], tmp_path / f"good{i}.rank0.pt.trace.json.gz")
    shutil.copy(PAIR[1], tmp_path / "bad.rank1.pt.trace.json.gz")
    monkeypatch.setenv("TRACEPROBE_TEST_PARENT", str(os.getpid()))
    monkeypatch.setattr(collect, "analyze_file", _kill_self_on_rank1)
    summary = collect.analyze_paths([tmp_path], jobs=2)
    assert len(summary.reports) == 3
    (failure,) = summary.failures
    assert failure.path.endswith("bad.rank1.pt.trace.json.gz")
    assert "worker process died twice" in failure.error and "SIGKILL" in failure.error


@pytest.mark.slow  # a Dask LocalCluster of worker processes
def test_diff_on_a_dask_cluster_gives_the_same_json(dask_scheduler):
    args = ["diff", str(PAIR[0]), str(PAIR[1]), "--format", "json"]
    local = CliRunner().invoke(app, [*args, "--jobs", "1"])
    dask = CliRunner().invoke(app, [*args, "--scheduler", dask_scheduler])
    assert local.exit_code == dask.exit_code == 0, local.output + dask.output
    assert dask.stdout == local.stdout and len(local.stdout) > 100
