"""traceprobe.collect.execution: in-process, local worker processes (with crashed workers), Dask."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from traceprobe.collect import execution, processes
from traceprobe.collect.execution import map_items
from traceprobe.collect.processes import MAX_DECODERS, ONE_FILE_BESIDE_BYTES, POOL_BYTES, SHARE_BYTES, decoders, default_jobs, local_jobs, work_beside


def _square(x: int) -> int:
    return x * x


def _crashed(x, why: str) -> str:
    return f"crashed: {why}"


def _die_on_minus_one(x: int) -> int:
    """Kills its own process on -1 (as the OOM killer would), squares anything else."""
    if x == -1:
        os.kill(os.getpid(), signal.SIGKILL)
    return x * x


def _die_first_time(arg: tuple[str, int]) -> int:
    """Dies the first time it sees an item (a marker file remembers it), succeeds the second time."""
    folder, x = arg
    marker = Path(folder) / f"seen-{x}"
    with open(Path(folder) / f"attempts-{x}", "a") as fh:
        fh.write(f"{os.getpid()}\n")
    if not marker.exists():
        marker.touch()
        os._exit(3)
    return x


def _count_and_die_on_minus_one(arg: tuple[str, int]) -> int:
    """Notes each attempt at an item in a file, then as :func:`_die_on_minus_one`."""
    folder, x = arg
    with open(Path(folder) / f"attempts-{x}", "a") as fh:
        fh.write(f"{os.getpid()}\n")
    return _die_on_minus_one(x)


def _die_first_time_noting_when(arg: tuple[str, int]) -> int:
    """As :func:`_die_first_time`, noting when each attempt started (the system's monotonic clock, one for every
    process)."""
    folder, x = arg
    with open(Path(folder) / f"started-{x}", "a") as fh:
        fh.write(f"{time.monotonic()}\n")
    return _die_first_time(arg)


def _pid(x: int) -> int:
    return os.getpid()


def _raise_on_two(x: int) -> int:
    if x == 2:
        raise ValueError("two")
    return x


def test_default_jobs():
    assert default_jobs(1, 8) == 1
    assert default_jobs(5, 8) == 5
    assert default_jobs(50, 3) == 3
    assert default_jobs(0, None) == 1


def test_small_local_files_run_in_this_process_by_default(tmp_path: Path):
    """No worker pool for a few small files unless asked for; one for enough bytes (a .gz counted ten times), or URLs."""
    small = [tmp_path / "a.json", tmp_path / "b.json.gz"]
    small[0].write_bytes(b"x" * 1000)
    small[1].write_bytes(b"x" * 1000)
    assert local_jobs(small, None) == 1
    assert local_jobs(small, 2) == 2  # (asked for)
    big = tmp_path / "c.json.gz"
    big.write_bytes(b"x" * (POOL_BYTES // 10))
    assert local_jobs([*small, big], None) is None
    assert local_jobs([*small, "s3://bucket/t.json"], None) is None
    assert local_jobs([tmp_path / "gone.json"], None) is None


@pytest.mark.parametrize("jobs", [1, 2, 3])
def test_results_in_item_order_and_on_done_once_each(jobs):
    seen = []
    out = map_items(_square, list(range(20)), jobs=jobs, on_crash=_crashed, on_done=seen.append)
    assert out == [x * x for x in range(20)]
    assert sorted(seen) == sorted(out)


def test_empty():
    assert map_items(_square, [], jobs=2, on_crash=_crashed) == []


def test_dead_worker_is_retried_once_then_a_failure_and_the_others_go_on():
    items = [1, 2, -1, 3, 4, 5, 6]
    out = map_items(_die_on_minus_one, items, jobs=2, on_crash=_crashed)
    assert out[:2] == [1, 4] and out[3:] == [9, 16, 25, 36]
    assert out[2].startswith("crashed: worker process died twice") and "SIGKILL" in out[2]


def test_items_queued_behind_a_dying_item_run_once(tmp_path):
    """Each worker holds a second item while many remain: the one behind an item that kills the worker goes
    back to the queue unstarted and uncounted, and runs once, elsewhere."""
    xs = [1, -1, 2, 3, -1, 4, 5, 6, 7, 8, 9, 10]
    out = map_items(_count_and_die_on_minus_one, [(str(tmp_path), x) for x in xs], jobs=2, on_crash=_crashed)
    assert [o for o, x in zip(out, xs) if x != -1] == [x * x for x in xs if x != -1]
    assert all(o.startswith("crashed: worker process died twice") for o, x in zip(out, xs) if x == -1)
    for x in set(xs) - {-1}:
        assert len((tmp_path / f"attempts-{x}").read_text().split()) == 1
    assert len((tmp_path / "attempts--1").read_text().split()) == 4  # twice for each of the two


def test_worker_that_dies_once_succeeds_on_the_retry(tmp_path):
    items = [(str(tmp_path), x) for x in range(6)]
    out = map_items(_die_first_time, items, jobs=2, on_crash=_crashed)
    assert out == list(range(6))
    for x in range(6):  # each item ran exactly twice, in two different processes
        pids = (tmp_path / f"attempts-{x}").read_text().split()
        assert len(pids) == 2 and pids[0] != pids[1] and str(os.getpid()) not in pids


def test_work_beside_sends_even_one_item_to_a_worker_and_runs_in_a_thread_meanwhile():
    """``beside`` runs in a thread of this process, and one item goes to a worker process; ``jobs=1`` keeps the item
    here and runs nothing beside it."""
    ran = []

    def beside() -> None:
        ran.append(threading.current_thread() is not threading.main_thread())

    assert map_items(_pid, [0], on_crash=_crashed, beside=beside) != [os.getpid()]
    assert ran == [True]
    ran.clear()
    assert map_items(_pid, [0], jobs=1, on_crash=_crashed, beside=beside) == [os.getpid()]
    assert ran == []


def test_a_dead_workers_replacement_waits_for_the_work_beside(tmp_path):
    """No fork while the thread runs: the replacement of a worker that died is forked after ``beside`` ended."""
    times: dict[str, float] = {}

    def beside() -> None:
        time.sleep(0.5)
        times["beside"] = time.monotonic()

    out = map_items(_die_first_time_noting_when, [(str(tmp_path), 7)], on_crash=_crashed, beside=beside)
    assert out == [7] and "beside" in times
    first, second = map(float, (tmp_path / "started-7").read_text().split())
    assert first < times["beside"] <= second  # (the first died at once; the retry's worker was forked after the thread)


def test_where_work_runs_beside_the_workers(tmp_path: Path, monkeypatch):
    """Beside the workers where there are workers and a CPU for this process; one file only up to its limit."""
    monkeypatch.setattr(processes, "usable_cpus", lambda: 2)
    small = tmp_path / "a.json"
    small.write_bytes(b"x" * 1000)
    big = tmp_path / "b.json.gz"
    big.write_bytes(b"x" * (POOL_BYTES // 10 + 1))
    assert not work_beside([small], None)  # (no workers: this process reads it)
    assert work_beside([big], None) and work_beside([small], 2) and work_beside([small, big], None)
    assert not work_beside([big], 1)
    huge = tmp_path / "c.json"
    with open(huge, "wb") as fh:
        fh.truncate(ONE_FILE_BESIDE_BYTES + 1)  # (sparse: its size is what counts)
    assert not work_beside([huge], None) and work_beside([huge, big], None)
    assert not work_beside(["s3://bucket/t.json"], None) and work_beside(["s3://bucket/t.json", big], None)
    monkeypatch.setattr(processes, "usable_cpus", lambda: 1)
    assert not work_beside([big], None)


def test_how_many_processes_decode_one_trace(tmp_path: Path, monkeypatch):
    """One local trace of SHARE_BYTES or more: a process per SHARE_BYTES, within the CPUs, --jobs and MAX_DECODERS; else
    this process alone (several files, a small one, a URL, --jobs 1). Sparse files: their size is what counts."""
    monkeypatch.setattr(processes, "usable_cpus", lambda: 4)

    def sized(name: str, n: int) -> Path:
        f = tmp_path / name
        with open(f, "wb") as fh:
            fh.truncate(n)
        return f

    small, two, many = sized("a.json", SHARE_BYTES - 1), sized("b.json", SHARE_BYTES + 1), sized("c.json", 100 * SHARE_BYTES)
    gz = sized("d.json.gz", SHARE_BYTES // 10 + 1)  # (a .gz counted at ten times its size)
    assert decoders([small], None) == 1 and decoders([two], None) == 2 and decoders([gz], None) == 2
    assert decoders([many], None) == 4 and decoders([many], 3) == 3 and decoders([many], 1) == 1
    assert decoders([two, many], None) == 1 and decoders(["s3://bucket/t.json"], None) == 1
    monkeypatch.setattr(processes, "usable_cpus", lambda: 64)
    assert decoders([many], None) == MAX_DECODERS


class _InterruptedConn:
    """A worker's end of its pipe on which SIGTERM, raised as KeyboardInterrupt by the command line's handler, arrives
    while the worker waits for its next item (``recv``) or sends a result (``send``)."""

    def __init__(self, where: str) -> None:
        self.where = where

    def recv(self):
        if self.where == "recv":
            raise KeyboardInterrupt("signal 15")
        return (3,)

    def send(self, msg) -> None:
        raise KeyboardInterrupt("signal 15")


@pytest.mark.parametrize("where", ["recv", "send"])
def test_a_worker_stopped_while_waiting_or_sending_ends_quietly(where, capfd):
    """The parent stops its busy workers (SIGTERM) when another worker's item raised; a worker it stops while waiting
    for an item or sending a result leaves without printing a traceback (it printed one, in 3 of 5 runs of a command)."""
    import multiprocessing

    proc = multiprocessing.get_context("fork").Process(target=execution._serve, args=(_InterruptedConn(where), _square, os.getpid()))
    proc.start()
    proc.join(10)
    assert proc.exitcode == 0 and "Traceback" not in capfd.readouterr().err


@pytest.mark.parametrize("jobs", [1, 2])
def test_exceptions_of_fn_propagate(jobs):
    with pytest.raises(ValueError, match="two"):
        map_items(_raise_on_two, [1, 2, 3], jobs=jobs, on_crash=_crashed)


@pytest.mark.slow  # a Dask LocalCluster of worker processes
def test_dask_cluster_gives_the_same_results(dask_scheduler):
    seen = []
    out = map_items(_square, list(range(10)), scheduler=dask_scheduler, on_crash=_crashed, on_done=seen.append)
    assert out == [x * x for x in range(10)]
    assert sorted(seen) == sorted(out)


@pytest.mark.slow  # a Dask LocalCluster of worker processes
def test_dask_exceptions_propagate(dask_scheduler):
    with pytest.raises(ValueError, match="two"):
        map_items(_raise_on_two, [1, 2, 3], scheduler=dask_scheduler, on_crash=_crashed)


@pytest.mark.parametrize("ahead", [False, True])
def test_one_trace_read_in_a_worker_beside_the_replays_warm_up_reports_as_in_one_process(monkeypatch, ahead):
    """A trace of 7 MB of JSON (a recorded FSDP rank): with a CPU beside the workers, where the replay's kernels were not
    built ahead of time, it is read in a worker while this process warms the replay (``beside``); where they were,
    there is nothing to warm and it is read here. Its JSON document is the one ``--jobs 1`` gives, byte for byte."""
    import traceprobe.collect as collect
    from traceprobe.analysis.causal import sweep
    from traceprobe.report.json_document import to_json

    trace = Path(__file__).resolve().parent.parent / "sample_traces" / "training" / "tb-fsdp" / "rank0.1795416686455675409.pt.trace.json.gz"
    monkeypatch.setattr(processes, "usable_cpus", lambda: 2)
    monkeypatch.setattr(sweep, "ahead_of_time", lambda: ahead)
    seen = []
    real = collect.map_items

    def spy(fn, items, **kw):
        seen.append(kw.get("beside"))
        return real(fn, items, **kw)

    monkeypatch.setattr(collect, "map_items", spy)
    beside = to_json(collect.analyze_paths([trace]))
    alone = to_json(collect.analyze_paths([trace], jobs=1))
    assert seen[1] is None
    assert seen[0] is None if ahead else (seen[0] is not None and seen[0].__name__ == "warm")
    assert beside == alone
