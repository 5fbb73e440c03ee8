"""Streaming reads: a trace decoded in pieces of any size, its bytes arriving in chunks of any size, gives the columns of one piece.

Sizes are made tiny (pieces of about 1000 bytes, chunks of 777) so that cuts fall
across chunk edges. The sample traces are real; every other trace here is
SYNTHETIC, written as JSON text in the test.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest
from conftest import sweep, swept
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from traceprobe import TraceFormatError
from traceprobe.reading import decode, files
from traceprobe.reading.splitter import Head, Splitter

REPO = Path(__file__).resolve().parent.parent
SAMPLES = sorted(
    f for f in subprocess.run(["git", "ls-files", "sample_traces"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    if f.endswith((".json", ".json.gz")) and not f.endswith("manifest.json") and swept(f)
)


def read(path, monkeypatch, piece: int | None = None, chunk: int | None = None) -> decode.Decoded:
    """:func:`decode.read_events` with pieces of ``piece`` bytes and chunks of ``chunk`` (default: the module's);
    ``piece=ONE`` decodes the event list as one piece, the reference the others are checked against."""
    with monkeypatch.context() as m:
        if piece:
            m.setattr(decode, "PIECE_BYTES", piece)
        if chunk:
            m.setattr(files, "CHUNK_BYTES", chunk)
            m.setattr(files, "_READ", chunk)
        return decode.read_events(path)


ONE = 1 << 40


def _values(d: decode.Decoded, column: str, codes: np.ndarray) -> np.ndarray:
    """A column as the values it codes: names and threads are numbered in order of first appearance,
    which depends on how the events were cut into pieces; the values do not."""
    table = {"name": d.names, "pid": d.threads, "tid": d.threads}.get(column)
    if table is None:
        return codes
    labels = np.empty(len(table), dtype=object)
    labels[:] = table
    return labels[codes]


def assert_same(a: decode.Decoded, b: decode.Decoded) -> None:
    assert a.event_count == b.event_count and a.warnings == b.warnings
    for x, y in ((a.names, b.names), (a.threads, b.threads)):  # the same distinct values, each once
        assert len(x) == len(y) and sorted(map(repr, x)) == sorted(map(repr, y))
    assert {f: getattr(a.head, f) for f in Head.__struct_fields__} == {f: getattr(b.head, f) for f in Head.__struct_fields__}
    for table in ("device", "host"):
        assert a.tables[table].keys() == b.tables[table].keys()
        for k, col in a.tables[table].items():
            assert col.dtype == b.tables[table][k].dtype, (table, k)
            np.testing.assert_array_equal(_values(a, k, col), _values(b, k, b.tables[table][k]), err_msg=f"{table}.{k}")
    assert a.collectives.keys() == b.collectives.keys()
    for k, col in a.collectives.items():
        np.testing.assert_array_equal(col, b.collectives[k], err_msg=k)


@pytest.mark.parametrize("name", sweep(SAMPLES))  # (a few by default, every sample under slow)
def test_sample_traces_give_the_same_columns_in_any_pieces(name, tmp_path, monkeypatch):
    """Real samples, gzip and plain: tiny pieces and chunks (up to about 300 pieces a trace, to keep the test quick)."""
    gz = REPO / name
    text = gzip.decompress(gz.read_bytes())
    scale = max(1, len(text) // 300_000)
    piece, chunk = 1000 * scale, 777 * scale
    whole = read(gz, monkeypatch, ONE)
    assert_same(read(gz, monkeypatch, piece, chunk), whole)
    if scale == 1:
        plain = tmp_path / "plain.json"
        plain.write_bytes(text)
        assert_same(read(plain, monkeypatch, piece, chunk), whole)


def event(i: int, name: str = "k") -> dict:
    if i % 3 == 0:
        return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 2, "ts": 10 * i + 0.125, "dur": 3, "args": {"External id": i}}
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": 10 * i + 1.5, "dur": 2.25,
            "args": {"device": 0, "stream": 7, "correlation": i, "External id": i - 1}}


BEFORE = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "GPU 0"}, {"id": 1, "name": "GPU 1"}]}
AFTER = {"traceName": "synthetic: head after the list", "distributedInfo": {"rank": 1, "world_size": 2}, "baseTimeNanoseconds": 1700000000000000000}


def trace_text(events: list[dict], before: dict | None = None, after: dict | None = None, bare: bool = False, sep: str = ",\n  ") -> str:
    """SYNTHETIC trace JSON: head fields before and after the list (Kineto writes both), or a bare list."""
    body = "[\n  " + sep.join(json.dumps(e) for e in events) + "\n]"
    if bare:
        return body
    parts = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in (before or {}).items()]
    parts.append(f'"traceEvents": {body}')
    parts += [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in (after or {}).items()]
    return "{\n  " + ",\n  ".join(parts) + "\n}\n"


def members(data: bytes, cuts: list[int]) -> bytes:
    """A multi-member gzip of ``data`` cut at ``cuts`` (inside events too)."""
    edges = [0, *cuts, len(data)]
    return b"".join(gzip.compress(data[a:b]) for a, b in zip(edges, edges[1:]))


@pytest.mark.parametrize("layout", ["head before and after", "head before", "head after", "bare list", "minified"])
@pytest.mark.parametrize("store", ["plain", "gzip", "gzip members"])
def test_synthetic_layouts_give_the_same_columns_in_any_pieces(layout, store, tmp_path, monkeypatch):
    events = [event(i) for i in range(300)]
    text = trace_text(
        events,
        before=BEFORE if "before" in layout or layout == "minified" else None,
        after=AFTER if "after" in layout or layout == "minified" else None,
        bare=layout == "bare list",
        sep="," if layout == "minified" else ",\n  ",
    ).encode()
    p = tmp_path / ("t.json" if store == "plain" else "t.json.gz")
    p.write_bytes(text if store == "plain" else gzip.compress(text) if store == "gzip" else members(text, [5, 1234, 1235, 7001, len(text) - 3]) + b"\0" * 9)
    streamed = read(p, monkeypatch, 1000, 777)
    assert streamed.event_count == 300 and len(streamed.tables["device"]["ts"]) == 200 and len(streamed.tables["host"]["ts"]) == 100
    assert_same(streamed, read(p, monkeypatch, ONE))
    if layout in ("head before and after", "minified"):
        assert streamed.head.traceName == AFTER["traceName"] and streamed.head.deviceProperties == BEFORE["deviceProperties"]


def test_a_cut_inside_a_name_joins_the_pieces_and_loads_right(tmp_path, monkeypatch):
    """SYNTHETIC: events named ``a},{b``, repeated up to 20 times, so a cut lands inside a string; the result is still right."""
    p = tmp_path / "t.json"
    p.write_text(trace_text([event(i, "a},{b" * (1 + i % 20)) for i in range(300)], BEFORE, AFTER, sep=","))
    got = read(p, monkeypatch, 1000, 777)
    assert_same(got, read(p, monkeypatch, ONE))
    assert got.names == ["a},{b" * (1 + i) for i in range(20)] and got.event_count == 300


names = st.sampled_from(["k", "a},{b", "x} , {y", "]", "}]", '"traceEvents": [', "é ünïcode", "\\"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(
    st.lists(names, max_size=40),
    st.integers(20, 600),
    st.integers(1, 700),
    st.sampled_from(["before", "after", "bare"]),
    st.sampled_from([",", ", ", ",\n  "]),
    st.booleans(),
)
def test_any_cut_and_chunking_gives_the_same_columns(tmp_path, monkeypatch, events, piece, chunk, where, sep, gz):
    """SYNTHETIC: whatever the piece and chunk sizes, and names full of brackets, the columns are those of one piece."""
    text = trace_text([event(i, n) for i, n in enumerate(events)], BEFORE if where == "before" else None, AFTER if where == "after" else None, where == "bare", sep)
    p = tmp_path / ("h.json.gz" if gz else "h.json")
    p.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    assert_same(read(p, monkeypatch, piece, chunk), read(p, monkeypatch, ONE))


def split(text: bytes, chunk: int, piece: int = 1000) -> tuple[Head, list]:
    s, pieces = Splitter(piece), []
    for i in range(0, len(text), chunk):
        pieces += s.feed(text[i : i + chunk])
    end = s.finish()
    assert end is not None
    return end[0], pieces + end[1]


@pytest.mark.parametrize("chunk", [1, 7, 777, 4096])
def test_pieces_do_not_depend_on_the_chunks(chunk):
    """SYNTHETIC: the splitter cuts the same pieces however the bytes arrive, and each is a JSON list of whole events."""
    events = [event(i) for i in range(200)]
    text = trace_text(events, BEFORE, AFTER, sep=",\n" + " " * 50).encode()  # 51 bytes of white space in each boundary
    head, pieces = split(text, chunk)
    assert (head, pieces) == split(text, len(text))
    assert head.traceName == AFTER["traceName"] and head.deviceProperties == BEFORE["deviceProperties"]
    assert [e for p in pieces for e in json.loads(p[0])] == json.loads(json.dumps(events))
    assert len(pieces) > 20 and all(1000 < len(p[0]) < 1700 for p in pieces[:-1])
    assert all(text[p[1] : p[1] + len(p[0]) - 2] + p[2] == text[p[1] : q[1]] for p, q in zip(pieces, pieces[1:]))  # offsets, separators


def test_long_white_space_is_not_a_cut_and_not_a_slow_search():
    """SYNTHETIC: 64 MiB of white space inside the list, fed in 64 KiB chunks: one piece, found in linear time."""
    s = Splitter(1000)
    s.feed(b'{"traceEvents": [' + json.dumps(event(1)).encode() + b" ,")
    for _ in range(1024):
        assert s.feed(b" " * (64 << 10)) == []
    s.feed(b"{}]}")
    end = s.finish()
    assert end is not None and len(end[1]) == 1 and len(json.loads(end[1][0][0])) == 2


def test_unknown_layouts_are_not_cut():
    for text in (b"", b"   ", b'{"nodes": []}', b'{"traceEvents": [{"ph": "X"}', b'[{"ph": "X"}', b'[{"ph": "X"}] x', b'{"traceEvents": {}}'):
        s = Splitter(1000)
        s.feed(text)
        assert s.finish() is None, text


@pytest.mark.parametrize("name", ["t.json", "t.json.gz"])
def test_too_large_is_refused_while_streaming(name, tmp_path, monkeypatch):
    """SYNTHETIC: over the limit, the stream stops there: never more than the limit handed on."""
    text = trace_text([event(i) for i in range(2000)]).encode()
    p = tmp_path / name
    p.write_bytes(gzip.compress(text) if name.endswith(".gz") else text)
    seen = []
    chunks = decode.read_trace_chunks
    monkeypatch.setattr(decode, "read_trace_chunks", lambda path, max_bytes: (seen.append(len(c)) or c for c in chunks(path, max_bytes)))
    monkeypatch.setattr(files, "CHUNK_BYTES", 1000)
    with pytest.raises(TraceFormatError, match=r"too large: more than 49 KiB of JSON \(the max_bytes limit"):
        decode.read_events(p, max_bytes=50_000)
    assert sum(seen) <= 50_000 and (sum(seen) > 40_000 if name.endswith(".gz") else seen == [])  # a plain file: refused by its size


def test_url_streams_like_a_file(tmp_path, monkeypatch):
    """SYNTHETIC, through fsspec's memory:// filesystem, gzip and plain."""
    fsspec = pytest.importorskip("fsspec")
    text = trace_text([event(i) for i in range(300)], BEFORE, AFTER).encode()
    mem = fsspec.filesystem("memory")
    for name, data in (("s.json", text), ("s.json.gz", gzip.compress(text))):
        mem.pipe(f"/stream/{name}", data)
        (tmp_path / name).write_bytes(data)
        assert_same(read(f"memory:///stream/{name}", monkeypatch, 1000, 777), read(tmp_path / name, monkeypatch, ONE))


def test_zlib_stream_broken_mid_member_reports_gzip(tmp_path, monkeypatch):
    """SYNTHETIC: a second member cut short: the gzip message, as before streaming, even after pieces were decoded."""
    text = trace_text([event(i) for i in range(300)]).encode()
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    second = c.compress(text[5000:]) + c.flush()
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(text[:5000]) + second[: len(second) // 2])
    with pytest.raises(TraceFormatError, match=r"corrupt or truncated gzip data \(the stream ends early\)"):
        read(p, monkeypatch, 1000, 777)
