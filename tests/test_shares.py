"""One trace decoded by several processes (traceprobe.reading.shares) gives what one process reads: every column
array for array, names and threads numbered alike, the same warnings, and the same error where there is one.

Pieces are made tiny (about 1000 bytes) so that every process has many. The sample traces are real; every other
trace here is SYNTHETIC, written as JSON text in the test.
"""

from __future__ import annotations

import gzip
import os

import numpy as np
import pytest
from conftest import few, sweep
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_stream import AFTER, BEFORE, REPO, SAMPLES, event, names, trace_text

from traceprobe import TraceFormatError
from traceprobe.reading import decode, files, shares
from traceprobe.reading.splitter import Head


def assert_identical(a: decode.Decoded, b: decode.Decoded) -> None:
    """Every field of two reads equal, codes included (not only the values they code)."""
    assert (a.event_count, a.warnings, a.names, a.threads, a.op_args) == (b.event_count, b.warnings, b.names, b.threads, b.op_args)
    assert {f: getattr(a.head, f) for f in Head.__struct_fields__} == {f: getattr(b.head, f) for f in Head.__struct_fields__}
    assert a.tables.keys() == b.tables.keys()
    for table, cols in a.tables.items():
        assert cols.keys() == b.tables[table].keys()
        for k, col in cols.items():
            assert col.dtype == b.tables[table][k].dtype, (table, k)
            np.testing.assert_array_equal(col, b.tables[table][k], err_msg=f"{table}.{k}")
    assert a.collectives.keys() == b.collectives.keys()
    for k, col in a.collectives.items():
        assert col.dtype == b.collectives[k].dtype, k
        np.testing.assert_array_equal(col, b.collectives[k], err_msg=k)


def merged_only(monkeypatch) -> None:
    """Fail the test if the shared read falls back to reading the trace again in one process."""
    def again(*_args, **_kw):
        raise AssertionError("read again in one process")

    monkeypatch.setattr(shares, "read_events", again)


@pytest.mark.parametrize("name", sweep(SAMPLES))  # (a few by default, every sample under slow)
def test_sample_traces_read_in_shares_give_one_process_columns(name, monkeypatch):
    """Real samples: 3 processes (a first, a middle and a last share), and 2 for the few of the default run, pieces of
    about a three-hundredth of the trace, merged without a second read."""
    path = REPO / name
    text = gzip.decompress(path.read_bytes()) if name.endswith(".gz") else path.read_bytes()
    monkeypatch.setattr(decode, "PIECE_BYTES", max(1000, len(text) // 300))
    whole = decode.read_events(path)
    merged_only(monkeypatch)
    for n in (2, 3) if few(name) else (3,):
        assert_identical(shares.read_events_shared(path, None, n), whole)


def rich_event(i: int, name: str) -> dict:
    """SYNTHETIC: the events of ``test_stream.event``, and among them collectives, ops with recorded shapes, and
    user annotations as begin/end pairs that a cut may part."""
    if i % 11 == 0:
        return {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 2, "ts": 10 * i, "dur": 4,
                "args": {"External id": i, "Collective name": ["allreduce", "broadcast"][i % 2], "In msg nelems": i,
                         "Out msg nelems": i, "Group size": 2, "dtype": "Float", "Process Group Name": "0"}}
    if i % 7 == 0:
        return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 3 + i % 2, "ts": 10 * i + 0.5, "dur": 1,
                "args": {"External id": i, "Input Dims": [[i % 4, 8]], "Input type": ["float"]}}
    if i % 5 == 0:
        return {"ph": "BE"[i // 5 % 2], "cat": "user_annotation", "name": f"span {i // 10}", "pid": 1, "tid": 9, "ts": 10 * i + 0.25}
    return event(i, name)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(names, min_size=1, max_size=60), st.integers(200, 3000), st.integers(2, 4), st.booleans(), st.booleans())
def test_any_trace_in_any_shares_gives_one_process_columns(tmp_path, monkeypatch, events, piece, n, gz, odd):
    """SYNTHETIC: names full of brackets (a piece cut inside a string: read again whole), collectives, shapes,
    begin/end pairs, an event of an unknown ``ph`` (its piece decoded tolerantly), in 2 to 4 processes."""
    evs = [rich_event(i, x) for i, x in enumerate(events)]
    if odd:
        evs.insert(len(evs) // 2, {"ph": "Z", "name": "SYNTHETIC odd", "pid": 0, "tid": 0, "ts": 1})
    text = trace_text(evs, BEFORE, AFTER, sep=",").encode()
    p = tmp_path / ("t.json.gz" if gz else "t.json")
    p.write_bytes(gzip.compress(text) if gz else text)
    monkeypatch.setattr(decode, "PIECE_BYTES", piece)
    assert_identical(shares.read_events_shared(p, None, n), decode.read_events(p))


def test_a_clean_trace_is_merged_and_the_command_limit_counts_it_once(tmp_path, monkeypatch):
    """SYNTHETIC: within a shared limit that holds the JSON once but not twice, 3 processes decode it (no second
    read), each piece once."""
    text = trace_text([rich_event(i, "k") for i in range(400)], BEFORE, AFTER).encode()
    p = tmp_path / "t.json"
    p.write_bytes(text)
    monkeypatch.setattr(decode, "PIECE_BYTES", 1000)
    whole = decode.read_events(p)
    merged_only(monkeypatch)
    files.share_limit(int(len(text) * 1.5))
    try:
        got = shares.read_events_shared(p, None, 3)
    finally:
        files.release()
        files.unshare_limit()
    assert_identical(got, whole)


@pytest.mark.parametrize("bad", ["not json", "bad time", "cut short"])
def test_an_error_in_any_share_reads_as_one_process_says_it(bad, tmp_path, monkeypatch):
    """SYNTHETIC: garbage inside a later piece, a time that is no number, a file cut short: the same error line."""
    evs = [rich_event(i, "k") for i in range(300)]
    if bad == "bad time":
        evs[250]["ts"] = "soon"
    text = trace_text(evs, BEFORE, AFTER).encode()
    if bad == "not json":
        at = text.index(b'"ph"', len(text) * 3 // 4)
        text = text[:at] + b"@@" + text[at:]
    if bad == "cut short":
        text = text[: len(text) * 2 // 3]
    p = tmp_path / "t.json"
    p.write_bytes(text)
    monkeypatch.setattr(decode, "PIECE_BYTES", 1000)
    with pytest.raises(TraceFormatError) as one:
        decode.read_events(p)
    for n in (2, 3):
        with pytest.raises(TraceFormatError) as several:
            shares.read_events_shared(p, None, n)
        assert several.value.reason == one.value.reason and str(several.value) == str(one.value)


def _dies(*_args) -> None:
    os._exit(3)


def test_a_helper_that_dies_leaves_the_read_to_this_process(tmp_path, monkeypatch):
    """SYNTHETIC: a helper killed before it sends its share: the trace is read again here, the same columns."""
    p = tmp_path / "t.json"
    p.write_bytes(trace_text([rich_event(i, "k") for i in range(300)], BEFORE, AFTER).encode())
    monkeypatch.setattr(decode, "PIECE_BYTES", 1000)
    whole = decode.read_events(p)
    monkeypatch.setattr(shares, "_helper", _dies)
    assert_identical(shares.read_events_shared(p, None, 2), whole)


@pytest.mark.parametrize("ahead", [True, False])
def test_one_large_trace_is_decoded_in_shares_by_the_command(ahead, monkeypatch):
    """A real sample made to count as large: decoded in 2 processes where the command analyses it in its own process
    (the replay's kernels built ahead of time), in one where a worker does (they are not: the work beside), and
    with ``jobs`` 1; the JSON report the same byte for byte."""
    from traceprobe import collect
    from traceprobe.analysis.causal import sweep
    from traceprobe.collect import processes
    from traceprobe.reading import trace as trace_module
    from traceprobe.report.json_document import to_json

    sample = REPO / "sample_traces" / "training" / "tb-fsdp" / "rank0.1795416686455675409.pt.trace.json.gz"
    monkeypatch.setattr(processes, "SHARE_BYTES", 1000)
    monkeypatch.setattr(processes, "usable_cpus", lambda: 2)
    monkeypatch.setattr(sweep, "ahead_of_time", lambda: ahead)
    used = []
    real = shares.read_events_shared
    monkeypatch.setattr(trace_module, "read_events_shared", lambda p, m, n: used.append(n) or real(p, m, n))
    shared = to_json(collect.analyze_paths([sample]))
    assert used == ([2] if ahead else [])
    assert shared == to_json(collect.analyze_paths([sample], jobs=1)) and len(used) == (1 if ahead else 0)


def test_a_cut_inside_a_name_after_an_odd_event_joins_the_pieces(tmp_path, monkeypatch):
    """SYNTHETIC (hypothesis's example): a piece whose strict decode stops at an event of an unknown ``ph`` and whose
    tolerant decode then finds it cut inside a string (``a},{b``) is joined to the next in one process, as a strict
    piece is (msgspec's own DecodeError escaped before), and read so by the shares."""
    evs = [rich_event(i, x) for i, x in enumerate(["k", "k", "a},{b"])]
    evs.insert(1, {"ph": "Z", "name": "SYNTHETIC odd", "pid": 0, "tid": 0, "ts": 1})
    p = tmp_path / "t.json"
    p.write_text(trace_text(evs, BEFORE, AFTER, sep=","))
    monkeypatch.setattr(decode, "PIECE_BYTES", 224)
    got = decode.read_events(p)
    assert got.event_count == 4 and "a},{b" in got.names
    assert_identical(shares.read_events_shared(p, None, 2), got)
