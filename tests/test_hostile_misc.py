"""The smaller breaks of a hostile run, each with its line: a corrupt ``manifest.json`` beside traces is named; an
error raised in a worker keeps the worker's traceback for ``--debug``; the handler names a full disk, not the empty
file it left; ``job`` says when a window counts a rank twice (summaries beside traces of another run); a trace whose
``distributedInfo.pg_config`` is no list of process groups is named. Traces and
summaries are SYNTHETIC (tests/synthetic.py, scripts/synth_job.py: made up, not recorded)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from synthetic import TraceBuilder
from typer.testing import CliRunner

from traceprobe.cli import app
from traceprobe.collect.execution import map_items

ROOT = Path(__file__).resolve().parent.parent


def _trace(path: Path, rank: int | None = None, steps: int = 1, comm: bool = False) -> Path:
    b = TraceBuilder("hostile misc", rank=rank, world_size=None if rank is None else 2)
    for i in range(1, steps + 1):
        b.kernel(0, 7, i * 10_000, 1000)
        if comm:
            b.nccl(0, 9, i * 10_000 + 2000, 1000)
        b.step(i, i * 10_000, 9000)
    return b.write(path)


def test_corrupt_manifest_is_named(tmp_path: Path) -> None:
    _trace(tmp_path / "a.json")
    (tmp_path / "manifest.json").write_text('{"workloads": [')
    res = CliRunner().invoke(app, ["overlap-report", str(tmp_path), "--format", "json", "-j", "1"])
    assert res.exit_code == 2
    lines = [ln for ln in res.stderr.splitlines() if "manifest.json" in ln]
    assert len(lines) == 1 and "not valid JSON" in lines[0] and "without its facts" in lines[0], res.stderr
    assert '"traces"' in res.stdout and "a.json" in res.stdout  # the trace is still reported


def _explode(x: int) -> int:
    if x == 1:
        raise RuntimeError("boom in the worker")
    return x


def test_worker_error_keeps_its_traceback() -> None:
    with pytest.raises(RuntimeError) as e:
        map_items(_explode, [0, 1, 2], jobs=2, on_crash=lambda x, why: -1)
    notes = "\n".join(getattr(e.value, "__notes__", []))
    assert "raised in worker process" in notes and "_explode" in notes and "boom in the worker" in notes


def test_debug_shows_the_worker_traceback(tmp_path: Path, monkeypatch) -> None:
    from traceprobe.analysis import per_trace

    for name in ("a", "b"):
        _trace(tmp_path / f"{name}.json")

    def broken(*a, **k):
        raise RuntimeError("analysis bug")

    monkeypatch.setattr(per_trace, "overlap_report", broken)  # (the workers are forked: they see it too)
    res = CliRunner().invoke(app, ["overlap-report", str(tmp_path), "-j", "2", "--debug"])
    assert isinstance(res.exception, RuntimeError)
    assert any("raised in worker process" in n and "broken" in n for n in getattr(res.exception, "__notes__", [])), res.exception


class _FullDiskExport:
    """What torch's exporter does on a full disk: an empty file, no exception."""

    kineto_results = object()

    def export_chrome_trace(self, path: str) -> None:
        Path(path).write_bytes(b"")


def test_handler_names_a_full_disk(tmp_path: Path, monkeypatch) -> None:
    import shutil
    from collections import namedtuple

    from traceprobe.recording.handler import TraceReady

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(10 << 30, 10 << 30, 4096))
    h = TraceReady(tmp_path, save="thread")
    assert h._export(_FullDiskExport(), 0, 1) is None
    assert len(h.errors) == 1 and "no space left on the device" in h.errors[0] and "4,096 bytes free" in h.errors[0], h.errors
    assert not list(tmp_path.glob(".*tmp"))  # (the empty file is gone)


def test_traces_beside_summaries_are_a_job_of_their_own(tmp_path: Path) -> None:
    """Traces of another run beside summaries (same steps, same ranks) are never counted in the summaries'
    window: they form their own job, named so (it read "4 ranks" from ranks 0 and 1 twice each)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import synth_job
    import synth_trace as st

    synth_job.write_summaries(st.Config(events=2000, seed=3), 2, tmp_path)  # ranks 0 and 1, steps 1-10
    for r in (0, 1):
        _trace(tmp_path / f"other.rank{r}.pt.trace.json", rank=r, steps=10, comm=True)  # another run, the same window
    res = CliRunner().invoke(app, ["job", str(tmp_path), "-j", "1"], env={"COLUMNS": "1000"})  # (each header on one line)
    assert res.exit_code == 0, res.output
    heads = [ln for ln in res.stdout.splitlines() if ln.endswith("ranks")]
    assert heads == [f"{tmp_path} steps 1-10: 2 ranks", f"{tmp_path} (traces without a job id) steps 1-10: 2 ranks"], heads
    assert "warning" not in res.stderr


SENDRECV = "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"
PG = [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": 3, "ranks": [0, 1, 2]}]
PG_CASES = {  # name -> the bad rank's distributedInfo.pg_config
    "pg_entry_int": [*PG, 5],  # an entry that is not an object: `"pg_name" in 5` was a TypeError
    "pg_rank_2_63": [{**PG[0], "ranks": [0, 1, 2**63]}],  # a rank past int64: an OverflowError where the sends are mapped
}


def _stage(path: Path, rank: int, pg_config: list) -> Path:
    """A SYNTHETIC pipeline stage of 3 ranks, two steps: a GEMM, then a send to the next rank through NCCL's grouped
    call (``record_param_comms`` naming it, ``nccl:coalesced``, one SendRecv kernel)."""
    b = TraceBuilder(f"SYNTHETIC pipeline stage, rank {rank}", rank=rank, world_size=3, pg_config=pg_config)
    for i in (1, 2):
        t0 = i * 10_000_000
        b.step(i, t0, 9_000_000)
        b.launch(t0 + 50_000, "kernel", 0, 7, t0 + 100_000, 2_000_000)
        op = b.cpu_op(t0 + 2_940_000, 20_000, name="record_param_comms")
        op["args"].update({"Collective name": "send", "Dst Rank": (rank + 1) % 3, "Group size": 3, "Process Group Name": "0",
                           "In msg nelems": 1024, "Out msg nelems": 1024, "dtype": "Float"})
        b.annotation("nccl:coalesced", t0 + 2_970_000, 40_000)
        b.launch(t0 + 3_000_000, "nccl", 0, 20, t0 + 3_100_000, 500_000, name=SENDRECV)
    return b.write(path)


@pytest.mark.parametrize("command", ["overlap-report", "job"])
@pytest.mark.parametrize("case", sorted(PG_CASES))
def test_a_process_group_that_is_no_object_or_past_int64_is_one_line(tmp_path: Path, case: str, command: str) -> None:
    """A trace whose ``distributedInfo.pg_config`` holds an entry that is not an object, or a rank past 2^63, is one
    line naming it (exit code 2), and the two good ranks beside it are still reported; from Python, loading it is a
    TraceFormatError (every command on the folder stopped on a TypeError or an OverflowError)."""
    from traceprobe import load_trace
    from traceprobe.errors import TraceFormatError

    for rank in (0, 1):
        _stage(tmp_path / f"rank{rank}.pt.trace.json", rank, PG)
    bad = _stage(tmp_path / f"{case}.pt.trace.json", 2, PG_CASES[case])
    res = CliRunner().invoke(app, [command, str(tmp_path), "--format", "json", "-j", "1"])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len([ln for ln in lines if f"{case}.pt.trace.json" in ln]) == 1 and len(lines) == 1, lines
    assert "pg_config" in lines[0], lines
    doc = json.loads(res.stdout)
    if command == "overlap-report":
        assert sorted(Path(t["path"]).name for t in doc["traces"]) == ["rank0.pt.trace.json", "rank1.pt.trace.json"]
    else:
        assert {f["ranks"] for f in doc["figures"]} == {2}
    with pytest.raises(TraceFormatError) as e:
        load_trace(bad)
    assert e.value.path == str(bad) and "pg_config" in e.value.reason and "\n" not in str(e.value)
