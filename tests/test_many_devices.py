"""Many devices and streams take linear time, not quadratic: the findings' "another device was busy" no longer
unions every other device's set per device, and stream concurrency is computed for every (device, stream) at once.
The traces are SYNTHETIC (tests/synthetic.py: a kernel and a copy per device or stream, made up)."""

from __future__ import annotations

import numpy as np
import pytest
from synthetic import TraceBuilder, load

from traceprobe import intervals as iv
from traceprobe.analysis.advice import findings as fnd
from traceprobe.analysis.device.busy import fraction, stream_intervals
from traceprobe.analysis.device.concurrency import stream_concurrency
from traceprobe.analysis.memo import device_column
from traceprobe.analysis.per_trace import overlap_report


def _trace(tmp_path, devices: int, streams: int = 1, copies: bool = True):
    b = TraceBuilder(f"{devices} devices x {streams} streams")
    for d in range(devices):
        for s in range(streams):
            b.kernel(d, 7 + s, (d * 7 + s * 3) % 97 * 1000, 800 + s * 10)
            if copies:
                b.memcpy(d, 7 + s, (d * 5 + s) % 89 * 1000 + 200, 500)
    b.cpu_op(0, 200_000)
    b.step(1, 0, 200_000)
    return load(b, tmp_path)


def _random_set(rng: np.random.Generator, n: int) -> iv.Intervals:
    s = rng.integers(0, 1000, n)
    return iv.union(s, s + rng.integers(0, 60, n))


def test_others_busy_is_the_union_of_the_others() -> None:
    rng = np.random.default_rng(7)
    for _ in range(200):
        sets = [_random_set(rng, int(rng.integers(0, 8))) for _ in range(int(rng.integers(1, 6)))]
        any_busy, two = iv.coverage_at_least(sets, 1), iv.coverage_at_least(sets, 2)
        for i, own in enumerate(sets):
            brute = iv.coverage_at_least([x for j, x in enumerate(sets) if j != i], 1) if len(sets) > 1 else iv.empty()
            got = fnd.others_busy(any_busy, two, own)
            assert np.array_equal(got[0], brute[0]) and np.array_equal(got[1], brute[1])


def test_claim_in_order_is_each_set_less_the_earlier_ones() -> None:
    """The findings' headroom: each candidate's span less every earlier candidate's (one subtraction per candidate
    from a growing claim before, quadratic in devices), against that loop on random sets."""
    rng = np.random.default_rng(5)
    for _ in range(300):
        spans = [_random_set(rng, int(rng.integers(0, 6))) for _ in range(int(rng.integers(0, 9)))]
        claimed = iv.empty()
        for span, got in zip(spans, fnd.claim_in_order(spans)):
            own = iv.subtract(span, claimed)
            assert np.array_equal(own[0], got[0]) and np.array_equal(own[1], got[1])
            claimed = iv.union(np.concatenate([claimed[0], own[0]]), np.concatenate([claimed[1], own[1]]))


def _stream_concurrency_brute(trace) -> list[tuple]:
    """The per-device loop the vectorised form replaced (one device, one stream at a time)."""
    kmask = (trace.device_events["kind"] == "kernel").to_numpy()
    out = []
    for d in sorted(np.unique(device_column(trace, "device")).tolist()):
        streams, kstreams = stream_intervals(trace, d), stream_intervals(trace, d, kmask)
        busy = iv.length(iv.coverage_at_least(streams, 1)) if streams else 0
        multi = iv.length(iv.coverage_at_least(streams, 2)) if len(streams) > 1 else 0
        kbusy = iv.length(iv.coverage_at_least(kstreams, 1)) if kstreams else 0
        kmulti = iv.length(iv.coverage_at_least(kstreams, 2)) if len(kstreams) > 1 else 0
        lengths = [iv.length(u) for u in streams]
        top = int(np.argmax(lengths)) if lengths else -1
        side = [u for i, u in enumerate(streams) if i != top] if len(streams) > 1 else []
        side_busy = iv.length(iv.coverage_at_least(side, 1)) if side else 0
        out.append((d, len(streams), busy, multi, fraction(multi, busy), kbusy, kmulti, fraction(kmulti, kbusy), side_busy,
                    fraction(multi, side_busy)))
    return out


def test_stream_concurrency_equals_the_per_device_loop(tmp_path) -> None:
    b = TraceBuilder("random streams")
    rng = np.random.default_rng(3)
    for _ in range(400):
        d, s = int(rng.integers(0, 5)), int(rng.integers(0, 6))
        start, dur = int(rng.integers(0, 50_000)), int(rng.integers(0, 3000))
        (b.kernel if rng.random() < 0.7 else b.memcpy)(d, 7 + s * 3, start, dur)
    b.kernel(9, 1, 100, 0)  # a device with only a zero-length event: no stream counted
    trace = load(b, tmp_path)
    got = [tuple(r) for r in stream_concurrency(trace).itertuples(index=False)]
    want = _stream_concurrency_brute(trace)
    assert len(got) == len(want) == 6
    for g, w in zip(got, want):
        assert g[:4] == w[:4] and g[5:7] == w[5:7] and g[8] == w[8], (g, w)
        for a, c in ((g[4], w[4]), (g[7], w[7]), (g[9], w[9])):
            assert (np.isnan(a) and np.isnan(c)) or a == pytest.approx(c)


def test_findings_calls_per_device_are_linear(tmp_path, monkeypatch) -> None:
    """The interval sets findings() normalises grow with the devices, not with their square (it unioned every
    other device's set per device: 4,096 devices took minutes)."""
    counts = {}
    real = iv._as_pair
    for n in (32, 128):
        (tmp_path / str(n)).mkdir()
        trace = _trace(tmp_path / str(n), n)
        overlap_report(trace, {})  # (every figure findings reads, computed once)
        calls = [0]

        def counting(s, e, calls=calls):
            calls[0] += 1
            return real(s, e)

        monkeypatch.setattr(iv, "_as_pair", counting)
        fnd.findings(trace)
        monkeypatch.setattr(iv, "_as_pair", real)
        counts[n] = calls[0]
    assert counts[128] < 6 * counts[32], counts  # (quadratic: 16x)


def test_65536_device_stream_pairs(tmp_path) -> None:
    """16 devices x 4,096 streams: every device's row counts its 4,096 streams. How the work grows with the devices is
    test_findings_calls_per_device_are_linear's (a count, not a time: a timed test fails on a loaded machine)."""
    trace = _trace(tmp_path, 16, 4096, copies=False)
    r = overlap_report(trace, {})
    assert len(r.stream_concurrency) == 16 and (r.stream_concurrency["streams"] == 4096).all()


@pytest.mark.slow
def test_4096_devices(tmp_path) -> None:
    """4,096 devices are each counted (the growth with the devices: test_findings_calls_per_device_are_linear)."""
    trace = _trace(tmp_path, 4096)
    r = overlap_report(trace, {})
    assert r.devices.device_count == 4096
