"""Decoding a trace in shares (several processes, each every n-th piece) equals decoding it in one.

``shares.decode_share`` + ``merge_shares`` are checked in this process on every
sample trace (real recordings); ``prefetch.start`` forks real child processes.
Traces written in the tests are SYNTHETIC.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from traceprobe import TraceFormatError, kineto, prefetch, shares
from traceprobe.trace import _build, load_trace

REPO = Path(__file__).resolve().parent.parent
SAMPLES = sorted(
    f for f in subprocess.run(["git", "ls-files", "sample_traces"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    if ".json" in f and not f.endswith("manifest.json")
)
fork_only = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")


def values(dec: kineto.Decoded) -> dict:
    """Every column of a Decoded with codes replaced by what they stand for (code numbering differs between shares)."""
    names, threads = np.array(dec.names + [None], dtype=object), np.array(dec.threads + [None], dtype=object)
    out = {"event_count": dec.event_count, "warnings": dec.warnings}
    for table, cols in dec.tables.items():
        for k, col in cols.items():
            if k == "name":
                col = names[col]
            elif k in ("pid", "tid"):
                col = threads[col]
            elif k == "comm":  # the collective args of each row, not their row number
                for a, c in dec.collectives.items():
                    out[f"{table}.comm.{a}"] = [c[i] if i >= 0 else None for i in col.tolist()]
                continue
            out[f"{table}.{k}"] = col.tolist()
    return out


def in_shares(path, count: int, piece: int, max_bytes: int | None = None) -> kineto.Decoded:
    return shares.merge_shares(path, [shares.decode_share(path, max_bytes, i, count, piece) for i in range(count)], max_bytes)


@pytest.mark.parametrize("name", SAMPLES)
def test_sample_traces_in_shares_equal_one_decode(name):
    """Real samples in 3 shares of small pieces: the same columns and the same Trace frames as one decode."""
    path = REPO / name
    one = kineto.read_events(path)
    piece = max(2000, len(gzip.decompress(path.read_bytes())) // 60)
    merged = in_shares(path, 3, piece)
    assert values(merged) == values(one)
    a, b = _build(path, one), _build(path, merged)
    for x, y in ((a.device_events, b.device_events), (a.host_events, b.host_events), (a.steps, b.steps), (a.collective_args, b.collective_args)):
        pd.testing.assert_frame_equal(x, y)


def event(i: int, name: str) -> dict:
    if i % 4 == 0:
        return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7 + i % 3, "ts": f"{i}.5", "dur": 1.25,
                "args": {"device": 0, "stream": 7 + i % 3, "correlation": i}}
    if i % 4 == 1:
        return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 10, "tid": "t" if i % 8 == 1 else 11, "ts": i, "dur": 0.5,
                "args": {"Collective name": "allreduce", "In msg nelems": i, "dtype": "Float"} if i % 12 == 1 else {}}
    if i % 4 == 2:
        return {"ph": "B", "cat": "user_annotation", "name": name, "pid": 10, "tid": 11, "ts": i}
    return {"ph": "E", "cat": "user_annotation", "name": name, "pid": 10, "tid": 11, "ts": i + 0.25}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(["a", "b", "a},{b", "é", "ProfilerStep#3"]), max_size=60), st.integers(1, 5), st.integers(50, 900),
       st.booleans())
def test_any_share_count_and_piece_size_gives_one_decode(tmp_path, events, count, piece, bare):
    """SYNTHETIC: names full of brackets (some cuts fail: every share count then falls back alike), B/E pairs
    across pieces, collectives, mixed thread ids; Kineto's layout and Chrome's bare list of events."""
    p = tmp_path / "t.json"
    listed = [event(i, n) for i, n in enumerate(events)]
    p.write_text(json.dumps(listed if bare else {"schemaVersion": 1, "traceEvents": listed, "traceName": "x"}))
    try:
        one = kineto.read_events(p)
    except TraceFormatError as e:
        with pytest.raises(TraceFormatError) as e2:
            in_shares(p, count, piece)
        assert str(e2.value) == str(e)
        return
    assert values(in_shares(p, count, piece)) == values(one)


def test_a_failed_share_falls_back_to_the_whole_decode(tmp_path, monkeypatch):
    """SYNTHETIC: one share that cannot be decoded strictly (None) makes the merge decode the whole trace."""
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": [event(i, "k") for i in range(100)]}))
    parts = [shares.decode_share(p, None, i, 2, 500) for i in range(2)]
    calls = []
    whole = kineto._decode_whole
    monkeypatch.setattr(kineto, "_decode_whole", lambda path, raw: calls.append(path) or whole(path, raw))
    assert values(shares.merge_shares(p, [parts[0], None])) == values(kineto.read_events(p)) and len(calls) == 1


@fork_only
@pytest.mark.parametrize("processes", [1, 2, 3])
def test_child_processes_decode_a_real_trace_like_this_one(processes):
    path = REPO / "sample_traces" / "compute-copy.overlapped.pt.trace.json.gz"
    pending = prefetch.start(path, processes=processes)
    pd.testing.assert_frame_equal(load_trace(path, decoding=pending).device_events, load_trace(path).device_events)
    assert pending.children == [] and len(pending.exiting) == processes  # each sent its share; not waited for yet
    exiting = list(pending.exiting)
    pending.cancel()  # the caller, once the result is used: every child waited for
    assert pending.exiting == []
    for pid in exiting:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


@fork_only
@pytest.mark.parametrize("content", [b"\x1f\x8b\x08\x00garbage", b'{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": "abc", "dur": 1}]}', b"[1, 2", b""])
def test_child_errors_read_as_in_this_process(tmp_path, content):
    """SYNTHETIC broken files: the same one-line TraceFormatError with and without child processes."""
    p = tmp_path / "bad.json"
    p.write_bytes(content)
    with pytest.raises(TraceFormatError) as here:
        load_trace(p)
    with pytest.raises(TraceFormatError) as there:
        load_trace(p, decoding=prefetch.start(p, processes=2))
    assert str(there.value) == str(here.value)


@fork_only
def test_a_child_that_dies_is_reported_and_reaped(tmp_path, monkeypatch):
    """A child killed while decoding (as by the OOM killer): one TraceFormatError naming the signal; no child left behind."""
    path = REPO / "sample_traces" / "compute-copy.overlapped.pt.trace.json.gz"
    monkeypatch.setattr(shares, "decode_share", lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL))  # runs in the children only
    pending = prefetch.start(path, processes=2)
    pids = [pid for pid, _ in pending.children]
    with pytest.raises(TraceFormatError, match=r"a process decoding it died \(killed by SIGKILL: out of memory\?\)"):
        load_trace(path, decoding=pending)
    assert pending.children == []
    for pid in pids:  # already waited for
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def test_decoders_follow_the_size_and_the_cpus(tmp_path, monkeypatch):
    small, big = tmp_path / "s.json", tmp_path / "b.json.gz"
    small.write_bytes(b"{}")
    big.write_bytes(b"\x1f\x8b" + bytes(prefetch.SHARE_BYTES // prefetch._GZIP_RATIO * 5))
    monkeypatch.delenv(prefetch.DECODERS_ENV, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    assert prefetch.decoders(small) == 1 and prefetch.decoders(big) == 3 and prefetch.decoders("s3://b/t.json") == 1
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)
    huge = tmp_path / "h.json"
    with open(huge, "wb") as f:
        f.truncate(prefetch.SHARE_BYTES * 20)  # (sparse: only its size is read)
    assert prefetch.decoders(huge) == prefetch.MAX_DECODERS == 8 and prefetch.decoders(big) == 5
    monkeypatch.setenv(prefetch.DECODERS_ENV, "3")
    assert prefetch.decoders(small) == 3


@fork_only
def test_the_cli_gives_the_same_report_with_and_without_child_processes(tmp_path):
    """The command itself (pandas not yet imported: the children decode), against TRACEPROBE_PREFETCH=0."""
    path = REPO / "sample_traces" / "data-parallel.ddp.rank0.pt.trace.json.gz"
    out = {}
    for flag in ("1", "0"):
        env = {**os.environ, prefetch.ENV: flag}
        r = subprocess.run([sys.executable, "-m", "traceprobe", "overlap-report", str(path), "--format", "json"], env=env,
                           capture_output=True, check=True)
        out[flag] = r.stdout
    assert out["1"] == out["0"] and b'"traces"' in out["1"]


def test_shares_of_different_bytes_are_not_merged(tmp_path, monkeypatch):
    """SYNTHETIC: a file replaced between its shares' reads (another length): the merge decodes the
    file as it is now, whole, instead of joining pieces of two files."""
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": [event(i, "old") for i in range(100)]}))
    first = shares.decode_share(p, None, 0, 2, 500)
    p.write_text(json.dumps({"traceEvents": [event(i, "new") for i in range(120)]}))
    second = shares.decode_share(p, None, 1, 2, 500)
    assert first is not None and second is not None and first.json_bytes != second.json_bytes
    calls = []
    whole = kineto._decode_whole
    monkeypatch.setattr(kineto, "_decode_whole", lambda path, raw: calls.append(path) or whole(path, raw))
    merged = shares.merge_shares(p, [first, second])
    assert len(calls) == 1 and values(merged) == values(kineto.read_events(p))
    assert set(merged.names) == {"new"}


@fork_only
def test_only_commands_decode_ahead(monkeypatch):
    """``analyze_paths`` forks decoding processes only when asked (the CLI asks; a library caller does not),
    and its report is the same."""
    from traceprobe.collect import analyze_paths

    path = REPO / "sample_traces" / "compute-copy.overlapped.pt.trace.json.gz"
    started = []
    real_start = prefetch.start
    monkeypatch.setattr(prefetch, "worthwhile", lambda: True)  # (pandas is imported under pytest)
    monkeypatch.setattr(prefetch, "start", lambda *a, **k: started.append(a) or real_start(*a, **k))
    plain = analyze_paths([path], jobs=1)
    assert started == []
    ahead = analyze_paths([path], jobs=1, decode_ahead=True)
    assert len(started) == 1
    pd.testing.assert_frame_equal(plain.reports[0].copy_overlap, ahead.reports[0].copy_overlap)
    pd.testing.assert_frame_equal(plain.reports[0].breakdown, ahead.reports[0].breakdown)


_RECORD_START = """
import sys
from traceprobe import prefetch
real, marker = prefetch.start, sys.argv[1]
def start(*a, **k):
    open(marker, "w").write("pandas" if "pandas" in sys.modules else "no pandas")
    return real(*a, **k)
prefetch.start = start
sys.argv = ["traceprobe", *sys.argv[2:]]
from traceprobe.launch import entry
entry()
"""


@fork_only
@pytest.mark.parametrize("command", [["overlap-report", "--format", "json", "--plot"], ["plot", "-o"], ["plot", "--compare", "-o"]])
def test_pictures_do_not_stop_the_decode_ahead(tmp_path, command):
    """``--plot`` and ``plot`` name their drawing functions without importing pandas or matplotlib, so a single
    trace is still decoded by child processes; the picture and the report are the ones drawn without them."""
    path = REPO / "sample_traces" / "compute-copy.overlapped.pt.trace.json.gz"
    made = {}
    for flag in ("1", "0"):
        marker, png = tmp_path / f"started{flag}", tmp_path / f"t{flag}.png"
        r = subprocess.run([sys.executable, "-c", _RECORD_START, str(marker), command[0], str(path), *command[1:], str(png)],
                           env={**os.environ, prefetch.ENV: flag}, capture_output=True, check=True)
        made[flag] = (r.stdout, png.read_bytes(), marker.read_text() if marker.exists() else None)
    assert made["1"][2] == "no pandas" and made["0"][2] is None
    assert made["1"][0] == made["0"][0]
    assert made["1"][1][:8] == b"\x89PNG\r\n\x1a\n" and len(made["1"][1]) > 10_000


def _fork_events(i: int, name: str) -> dict:
    """SYNTHETIC events as :func:`event`, every 50th with 10 kB of args (a piece larger than a ring slot)."""
    e = event(i, name)
    if i % 50 == 7:
        e["args"] = {**e.get("args", {}), "big": "x" * 10_000}
    return e


def _decoded_by_children(path, processes: int, monkeypatch) -> tuple[kineto.Decoded, list]:
    """``path`` decoded by ``processes`` real children on 4 KiB pieces; the decoded trace and the shares received."""
    monkeypatch.setattr(kineto, "PIECE_BYTES", 4096)  # (inherited by the forked children)
    received: list = []
    merge = shares.merge_shares
    monkeypatch.setattr(shares, "merge_shares", lambda path, got, *a: received.extend(got) or merge(path, got, *a))
    pending = prefetch.start(path, processes=processes)
    try:
        return pending.result(), received
    finally:
        pending.cancel()


@fork_only
@pytest.mark.parametrize("processes", [2, 3, 5])
@pytest.mark.parametrize("name", ["sample_traces/data-parallel.ddp.rank0.pt.trace.json.gz", "synthetic"])
def test_children_fed_by_one_reader_decode_like_this_one(tmp_path, monkeypatch, processes, name):
    """Real children, one reading the file and handing 4 KiB pieces to the others through shared memory (a real
    trace, hundreds of pieces; a SYNTHETIC one with events larger than a slot, which the reader keeps): every piece
    decoded once, by the reader or a fed process, and the columns those of one decode."""
    path = REPO / name
    if name == "synthetic":
        path = tmp_path / "t.json"
        path.write_text(json.dumps({"traceEvents": [_fork_events(i, f"k{i % 7}") for i in range(3000)]}))
    got, received = _decoded_by_children(path, processes, monkeypatch)
    assert len(received) == processes and all(s is not None for s in received) and shares._consistent(received)
    assert [s.fed for s in received] == [False] + [True] * (processes - 1) and received[0].total_pieces > 100
    assert values(got) == values(kineto.read_events(path))


@fork_only
def test_pieces_that_do_not_decode_strictly_in_a_fed_process_fall_back_to_the_whole_decode(tmp_path, monkeypatch):
    """SYNTHETIC: names holding ``},{`` make cuts inside strings; whichever process gets such a piece gives way,
    and the trace is decoded whole, as in one process."""
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [event(i, "a},{b" if i % 3 else "k") for i in range(3000)]}))
    got, received = _decoded_by_children(path, 3, monkeypatch)
    assert None in received
    assert values(got) == values(kineto.read_events(path))


@fork_only
@pytest.mark.parametrize("who", ["reader", "decoder"])
def test_a_fed_process_or_the_reader_that_dies_is_reported_and_nothing_waits(tmp_path, monkeypatch, who):
    """The reader killed after handing on a few pieces (the others then see the end of the feed), or a fed process
    killed holding a slot (the reader then keeps the pieces): one TraceFormatError naming the signal, every child reaped."""
    from traceprobe import feed

    path = REPO / "sample_traces" / "data-parallel.ddp.rank0.pt.trace.json.gz"
    if who == "reader":
        offer = feed.Feed.offer
        calls = []
        monkeypatch.setattr(feed.Feed, "offer", lambda self, *a: (len(calls) < 5 or os.kill(os.getpid(), signal.SIGKILL))
                            and (calls.append(1) or offer(self, *a)))
    else:
        take = feed.Feed.take
        monkeypatch.setattr(feed.Feed, "take", lambda self: take(self) if self.reading else os.kill(os.getpid(), signal.SIGKILL))
    signal.alarm(60)  # (a hang fails the test instead of the run)
    try:
        with pytest.raises(TraceFormatError, match=r"a process decoding it died \(killed by SIGKILL"):
            _decoded_by_children(path, 3, monkeypatch)
    finally:
        signal.alarm(0)



@fork_only
def test_without_shared_memory_each_child_reads_the_file(tmp_path, monkeypatch):
    """No shared memory to be had (``mmap`` fails): every child reads the file and decodes every n-th piece, and the
    columns are still those of one decode."""
    from traceprobe import feed

    def no_ring(*a, **k):
        raise OSError("no shared memory")

    monkeypatch.setattr(feed.mmap, "mmap", no_ring)
    got, received = _decoded_by_children(REPO / "sample_traces" / "data-parallel.ddp.rank0.pt.trace.json.gz", 3, monkeypatch)
    assert [s.fed for s in received] == [False] * 3 and shares._consistent(received) and all(len(s.pieces) > 30 for s in received)
    assert values(got) == values(kineto.read_events(REPO / "sample_traces" / "data-parallel.ddp.rank0.pt.trace.json.gz"))
