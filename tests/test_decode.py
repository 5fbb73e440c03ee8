"""The one decode path: pieces, odd events, exact timestamps.

Every trace here is SYNTHETIC, written as JSON text in the test so that the
decimal digits of ``ts``/``dur`` are exactly the ones chosen.
"""

from __future__ import annotations

import dataclasses
import json
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from traceprobe import TraceFormatError, load_trace
from traceprobe.analysis.device.steps import clip_trace
from traceprobe.reading import decode
from traceprobe.reading.columns import INVALID, MISSING, OK, parse_us

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def exact_ns(text: str) -> int:
    return int((Decimal(text) * 1000).to_integral_value(ROUND_HALF_EVEN))


def event(ph: str, cat: str, name: str, ts: str, dur: str | None = None, pid: int | str = 1, tid: int | str = 1, args: str = "") -> str:
    fields = [f'"ph": "{ph}"', f'"cat": "{cat}"', f'"name": {json.dumps(name)}', f'"pid": {json.dumps(pid)}', f'"tid": {json.dumps(tid)}', f'"ts": {ts}']
    if dur is not None:
        fields.append(f'"dur": {dur}')
    if args:
        fields.append(f'"args": {{{args}}}')
    return "{" + ", ".join(fields) + "}"


def write(tmp_path: Path, events: list[str], name: str = "t.json") -> Path:
    p = tmp_path / name
    p.write_text('{"traceName": "synthetic: decode", "traceEvents": [\n  ' + ",\n  ".join(events) + "\n]}")
    return p


def test_nanosecond_digits_are_exact(tmp_path):
    """SYNTHETIC: the value float64 turns into ...583000 ns (651 ns off) loads exactly."""
    p = write(
        tmp_path,
        [
            event("X", "kernel", "k", "1712195495505582.988", "1.001", pid=0, tid=7, args='"device": 0, "stream": 7'),
            event("X", "user_annotation", "ProfilerStep#3", "1712195495505580.001", "10.999"),
            event("X", "cpu_op", "aten::mm", "1712195495505581.111", "0.333"),
        ],
    )
    t = load_trace(p)
    assert t.device_events[["start_ns", "end_ns"]].values.tolist() == [[1712195495505582988, 1712195495505583989]]
    assert t.steps[["start_ns", "end_ns"]].values.tolist() == [[1712195495505580001, 1712195495505591000]]
    mm = t.host_events[t.host_events["name"] == "aten::mm"]
    assert mm[["start_ns", "end_ns"]].values.tolist() == [[1712195495505581111, 1712195495505581444]]
    assert float("1712195495505582.988") * 1000 != 1712195495505582988  # what a float would have given


decimals = st.builds(
    lambda neg, whole, frac, exp: ("-" if neg else "") + str(whole) + (f".{frac}" if frac else "") + exp,
    st.booleans(),
    st.integers(0, 10**16),
    st.one_of(st.just(""), st.text("0123456789", min_size=1, max_size=12)),
    st.one_of(st.just(""), st.sampled_from(["e0", "e3", "E-3", "e+2", "e-9", "e20", "e400"])),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(decimals, max_size=40))
def test_parse_us_matches_decimal_reference(texts):
    ns, status = parse_us([t.encode() for t in texts])
    for t, v, s in zip(texts, ns.tolist(), status.tolist()):
        want = exact_ns(t) if abs(Decimal(t)) < Decimal(10) ** 17 else None
        if want is None or not -(2**63) <= want < 2**63:
            assert s == INVALID, t
        else:
            assert (s, v) == (OK, want), t


kineto_decimals = st.builds(
    lambda neg, whole, frac: ("-" if neg else "") + str(whole) + f".{frac:03d}",
    st.booleans(),
    st.one_of(st.integers(0, 10**16), st.sampled_from([0, 9, 10**14, 8999999999999999, 9000000000000000, 9223372036854775, 9223372036854776])),
    st.integers(0, 999),
)
"""``-?digits.ddd``, what Kineto writes, the edges of 18 and 19 digits and of int64 among them."""


@settings(max_examples=150, deadline=None)
@given(st.lists(kineto_decimals, min_size=1, max_size=40), st.one_of(st.none(), st.sampled_from(["1.5", "1.2345", "1e3", "0.5e1", '"1.234"', "[0,1.23]", ""])))
def test_parse_us_reads_fixed_decimals_exactly(texts, odd):
    """Pieces whose times all read -?digits.ddd (read at once: at most 19 digits, led by 8 or less at 19), with one
    other value anywhere (read one by one, the others still at once): exact either way."""
    if odd is not None:
        texts = [*texts[: len(texts) // 2], odd, *texts[len(texts) // 2 :]]
    ns, status = parse_us([t.encode() for t in texts])
    for t, v, s in zip(texts, ns.tolist(), status.tolist()):
        if t == "":
            assert s == MISSING
            continue
        want = exact_ns(t) if t[:1] not in ('"', "[") else None
        if t == '"1.234"':  # a numeric string: read, by the one-by-one path
            want = 1234
        if want is None or not -(2**63) <= want < 2**63:
            assert s == INVALID, t
        else:
            assert (s, v) == (OK, want), t


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(-(10**16), 10**16), min_size=1, max_size=40), st.sampled_from([0, 1, 2, 3]))
def test_parse_us_reads_integers_and_short_decimals_exactly(values, k):
    """Integer µs (Kineto before torch 2.1) and 1-2 decimals, every value of a piece alike: exact, int64's edges kept."""
    texts = [str(v) if k == 0 else f"{'-' if v < 0 else ''}{abs(v) // 10**k}.{abs(v) % 10**k:0{k}d}" for v in values]
    ns, status = parse_us([t.encode() for t in texts])
    for t, v, s in zip(texts, ns.tolist(), status.tolist()):
        want = exact_ns(t)
        assert (s, v) == ((OK, want) if -(2**63) <= want < 2**63 else (INVALID, 0)), t


def test_three_decimals_take_no_space_or_inner_minus():
    """Bytes that are not JSON (a space or a minus inside a text) are refused, not read as other numbers."""
    for texts in ([b"1 2.345", b"   .   "], [b"1-2.345", b"   .   "], [b"--1.234"]):
        ns, status = parse_us(texts)
        assert status.tolist() == [INVALID] * len(texts) and ns.tolist() == [0] * len(texts)


def test_parse_us_odd_values():
    texts = [b"", b"null", b'"12"', b'"x"', b"true", b"{}", b'"1 2"', b"[1]", b"9223372036854775.807", b"9223372036854775.808", b"1" * 40]
    ns, status = parse_us(texts)
    assert status.tolist() == [MISSING, INVALID, OK, INVALID, INVALID, INVALID, INVALID, INVALID, OK, INVALID, INVALID]
    assert ns[2] == 12000 and ns[8] == 2**63 - 1


kept_cats = st.sampled_from(["kernel", "gpu_memcpy", "gpu_memset", "cpu_op", "cuda_runtime", "user_annotation", "Kernel"])
us_text = st.builds(lambda a, b: f"{a}.{b:03d}", st.integers(0, 10**15), st.integers(0, 999))
int_us_text = st.one_of(st.integers(0, 10**15).map(str), st.sampled_from(["0", "-0", "9223372036854775", "9223372036854776",
                                                                          "-9223372036854775808", "18446744073709551615"]))
"""Integer microseconds (Kineto before torch 2.1), the edges of int64 ns among them: read without text."""


@st.composite
def traces(draw):
    events = []
    for _ in range(draw(st.integers(0, 30))):
        ph = draw(st.sampled_from(["X", "X", "B", "E", "i", "M", "f", "s"]))
        cat = draw(kept_cats)
        name = draw(st.sampled_from(["k", "Memcpy DtoH (Device -> Pinned)", "ProfilerStep#1", "nccl", "é ünïcode"]))
        pid, tid = draw(st.sampled_from([0, 1, 2, "host"])), draw(st.sampled_from([7, 8, "stream 9"]))
        ids = [f'"{k}": {draw(st.integers(0, 5))}' for k in ("device", "stream", "correlation", "bytes", "External id") if draw(st.booleans())]
        integer = draw(st.integers(0, 3)) > 0  # mostly integer times, so that pieces read both ways
        durs = ["0", "15", "99999", "-1", "9223372036854776"] if integer else ["0.000", "1.5", "12.345", "99999.999", "-1", "null"]
        dur = draw(st.sampled_from(durs)) if ph == "X" and draw(st.integers(0, 9)) else None
        events.append(event(ph, cat, name, draw(int_us_text if integer else us_text), dur, pid, tid, ", ".join(ids)))
    return events


@SETTINGS
@given(traces(), st.sampled_from([64, 300]))
def test_pieces_of_any_size_give_the_trace_of_one(tmp_path, monkeypatch, events, piece):
    """SYNTHETIC: small pieces (integer and decimal times mixed, odd values among them) give the Trace one piece gives,
    or the same error."""
    p = write(tmp_path, events or ['{"ph": "M", "name": "process_name", "pid": 1}'])
    monkeypatch.setattr(decode, "PIECE_BYTES", piece)
    try:
        small = load_trace(p)
    except TraceFormatError as e:
        monkeypatch.setattr(decode, "PIECE_BYTES", 1 << 40)
        with pytest.raises(TraceFormatError) as e2:
            load_trace(p)
        assert str(e2.value) == str(e)
        return
    monkeypatch.setattr(decode, "PIECE_BYTES", 1 << 40)
    one = load_trace(p)
    for a, b in ((small.device_events, one.device_events), (small.host_events, one.host_events), (small.steps, one.steps)):
        pd.testing.assert_frame_equal(a, b)
    assert small.metadata == one.metadata


ODD = ['{"ph": "Z", "cat": "kernel", "name": "unknown phase", "pid": 0, "tid": 7, "ts": 5}',
       '{"ph": "X", "cat": "cpu_op", "name": "float pid", "pid": 1.5, "tid": 1, "ts": 5, "dur": 1}',
       '{"ph": "X", "cat": ["a list"], "name": {"an": "object"}, "pid": 1, "tid": 1, "ts": 5, "dur": 1}']


@pytest.mark.parametrize("odd", ODD)
@pytest.mark.parametrize("where", [0, 77, 199])
def test_an_odd_event_costs_its_own_piece(tmp_path, monkeypatch, odd, where):
    """SYNTHETIC: one event strict types refuse, anywhere: the trace is what it is without it (its host row aside),
    and only its own piece is decoded again with tolerant types."""
    good = [event("X", "kernel", f"k{i}", f"{i}.5", "1.25", 0, 7, '"device": 0, "stream": 7') for i in range(200)]
    monkeypatch.setattr(decode, "PIECE_BYTES", 1000)
    tolerant, real = [], decode._TOLERANT
    monkeypatch.setattr(decode, "_TOLERANT", type("Spy", (), {"decode": staticmethod(lambda b: tolerant.append(len(b)) or real.decode(b))}))
    with_odd = load_trace(write(tmp_path, [*good[:where], odd, *good[where:]], "odd.json"))
    assert len(tolerant) == 1 and tolerant[0] < 2000  # one piece of about 1000 bytes, not the trace (about 25 kB)
    plain = load_trace(write(tmp_path, good, "plain.json"))
    pd.testing.assert_frame_equal(with_odd.device_events, plain.device_events)
    assert with_odd.metadata["event_count"] == plain.metadata["event_count"] + 1


def test_trace_is_frozen_and_steps_follow_the_events(tmp_path):
    """SYNTHETIC: steps are derived from host events, also in a clipped copy."""
    p = write(tmp_path, [event("X", "user_annotation", f"ProfilerStep#{i}", f"{10 * i}.000", "10.000") for i in range(3)])
    t = load_trace(p)
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.path = "x"  # type: ignore[misc]
    assert t.steps["step"].tolist() == [0, 1, 2]
    clipped = clip_trace(t, 10_000, 20_000)
    assert clipped.steps["step"].tolist() == [1]
    assert t.steps["step"].tolist() == [0, 1, 2]
    assert np.array_equal(t.steps["start_ns"].to_numpy(), [0, 10_000, 20_000])
