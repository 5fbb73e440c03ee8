"""Bad and unusual input: one clear TraceFormatError, never anything else.

Every trace here is SYNTHETIC (built in the test) or a mutation of a real sample.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from traceprobe import TraceFormatError, load_trace, overlap_report
from traceprobe.reading import files as tracefile
from traceprobe.reading import trace as trace_mod

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"


def write(tmp_path: Path, doc, name="t.json") -> Path:
    p = tmp_path / name
    text = doc if isinstance(doc, str) else json.dumps(doc)
    if name.endswith(".gz"):
        p.write_bytes(gzip.compress(text.encode()))
    else:
        p.write_text(text)
    return p


def kernel(ts, dur, device=0, stream=7, **extra):
    ev = {"ph": "X", "cat": "kernel", "name": "gemm", "pid": device, "tid": stream, "ts": ts, "dur": dur,
          "args": {"device": device, "stream": stream}}
    ev.update(extra)
    return ev


@pytest.mark.parametrize(
    "content, needle",
    [
        ("", "empty file"),
        ("   \n", "empty file"),
        ("hello", "not valid JSON"),
        ('{"traceEvents": [', "truncated"),
        ('{"a": 1}', "no 'traceEvents'"),
        ('{"traceEvents": {"a": 1}}', "traceEvents"),
        ('{"traceEvents": [1, 2]}', "traceEvents"),
        ("[1, 2]", "unexpected trace content"),
        ('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": NaN, "dur": 1}]}', "JSON"),
    ],
)
def test_malformed_files(tmp_path, content, needle):
    p = write(tmp_path, content)
    with pytest.raises(TraceFormatError) as e:
        load_trace(p)
    assert needle in str(e.value)
    assert str(e.value).startswith(str(p))
    assert "\n" not in str(e.value)


def test_gzip_problems(tmp_path):
    good = gzip.compress(json.dumps({"traceEvents": [kernel(1, 2)]}).encode())
    trunc = tmp_path / "trunc.json.gz"
    trunc.write_bytes(good[: len(good) // 2])
    corrupt = tmp_path / "corrupt.json.gz"
    corrupt.write_bytes(good[:10] + bytes(b ^ 0xFF for b in good[10:30]) + good[30:])
    for p in (trunc, corrupt):
        with pytest.raises(TraceFormatError, match="gzip"):
            load_trace(p)


@pytest.mark.parametrize(
    "ts, dur",
    [(None, 1), ("12", 1), ("abc", 1), (-5, 1), (5, -1), (1e300, 1), (5, 3.2e13), (5, None)],
)
def test_bad_times(tmp_path, ts, dur):
    ev = kernel(ts, dur)
    if ts is None:
        del ev["ts"]
    p = write(tmp_path, {"traceEvents": [kernel(1, 2), ev]})
    if ts == "12":  # a numeric string is a number to pandas: accepted
        assert len(load_trace(p).device_events) == 2
        return
    with pytest.raises(TraceFormatError, match="ts/dur"):
        load_trace(p)


def test_absurd_stream_count(tmp_path):
    events = [kernel(i, 1, stream=i) for i in range(trace_mod.MAX_STREAMS + 1)]
    p = write(tmp_path, {"traceEvents": events})
    with pytest.raises(TraceFormatError, match="distinct"):
        load_trace(p)


def test_not_enough_memory_fails_early(tmp_path, monkeypatch):
    p = write(tmp_path, {"traceEvents": [kernel(1, 2)]})
    monkeypatch.setattr(tracefile, "available_memory", lambda: 10)
    with pytest.raises(TraceFormatError, match="too large.*memory"):
        load_trace(p)
    assert len(load_trace(p, max_bytes=1000).device_events) == 1  # an explicit limit wins
    with pytest.raises(TraceFormatError, match="too large.*max_bytes"):
        load_trace(p, max_bytes=10)


def test_available_memory_is_the_least_limit(monkeypatch):
    import resource

    import psutil

    free = tracefile.available_memory()
    assert 0 < free <= psutil.virtual_memory().available * 1.05  # (memory moves between the two reads)
    used = psutil.Process().memory_info().vms
    monkeypatch.setattr(resource, "getrlimit", lambda which: (used + (5 << 20), resource.RLIM_INFINITY))  # RLIMIT_AS: 5 MiB left
    assert 0 < tracefile.available_memory() <= 6 << 20


def test_missing_device_stream_falls_back_to_pid_tid(tmp_path):
    ev = {"ph": "X", "cat": "kernel", "name": "k", "pid": 3, "tid": 21, "ts": 10, "dur": 5}
    t = load_trace(write(tmp_path, {"traceEvents": [ev]}))
    assert t.device_events[["device", "stream"]].values.tolist() == [[3, 21]]


def test_begin_end_pairs(tmp_path):
    """SYNTHETIC: nested B/E pairs on one thread, a device B/E pair, one stray E."""
    events = [
        {"ph": "B", "cat": "cpu_op", "name": "outer", "pid": 1, "tid": 1, "ts": 0},
        {"ph": "B", "cat": "cpu_op", "name": "inner", "pid": 1, "tid": 1, "ts": 2},
        {"ph": "E", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 5},
        {"ph": "E", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 9},
        {"ph": "E", "cat": "cpu_op", "pid": 1, "tid": 2, "ts": 9},
        {"ph": "B", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "args": {"device": 0, "stream": 7}},
        {"ph": "E", "cat": "kernel", "pid": 0, "tid": 7, "ts": 4},
    ]
    t = load_trace(write(tmp_path, {"traceEvents": events}))
    host = t.host_events.set_index("name")
    assert host.loc["outer", ["start_ns", "end_ns"]].tolist() == [0, 9000]
    assert host.loc["inner", ["start_ns", "end_ns"]].tolist() == [2000, 5000]
    assert t.device_events[["start_ns", "end_ns"]].values.tolist() == [[1000, 4000]]
    assert t.metadata["warnings"] == ["1 unmatched B/E event(s) dropped"]


def test_rocm_copies_and_old_torch_categories(tmp_path):
    """SYNTHETIC: ROCm copy names and torch 1.13-style capitalised categories, absolute µs."""
    base = 1_666_000_000_000_000  # epoch µs, as torch 1.13 wrote
    events = [
        {"ph": "X", "cat": "Kernel", "name": "Cijk_gemm", "pid": 0, "tid": 1, "ts": base, "dur": 100, "args": {"device": 0, "stream": 1}},
        {"ph": "X", "cat": "Memcpy", "name": "CopyDeviceToHost", "pid": 0, "tid": 2, "ts": base + 10, "dur": 50, "args": {"device": 0, "stream": 2, "bytes": 4096}},
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 9, "tid": 9, "ts": base - 5, "dur": 3},
        {"ph": "X", "cat": "Runtime", "name": "hipLaunchKernel", "pid": 9, "tid": 9, "ts": base - 4, "dur": 1},
    ]
    t = load_trace(write(tmp_path, {"traceEvents": events}))
    copies = t.device_events[t.device_events["kind"] == "memcpy"]
    assert copies["direction"].tolist() == ["DtoH"] and copies["bytes"].tolist() == [4096]
    assert int(t.device_events["start_ns"].min()) == base * 1000
    assert set(t.host_events["cat"]) == {"cpu_op", "cuda_runtime"}
    r = overlap_report(t)
    row = r.copy_overlap[r.copy_overlap["direction"] == "DtoH"].iloc[0]
    assert row["fraction"] == 1.0


def test_cpu_only_and_metadata_only(tmp_path):
    cpu = {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 5}]}
    r = overlap_report(load_trace(write(tmp_path, cpu, "cpu.json")))
    assert r.streams.empty and r.verdicts == [] and r.cpu_gpu.host_compute_ns == 5000
    meta = {"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "x"}}], "deviceProperties": [{"id": 0, "name": "GPU"}]}
    t = load_trace(write(tmp_path, meta, "meta.json"))
    assert t.device_events.empty and t.host_events.empty and len(t.devices) == 1
    assert "no device or host activity" in t.metadata["warnings"][0]
    assert overlap_report(t).verdicts == []


def test_memory_events_and_odd_types_do_not_confuse(tmp_path):
    """SYNTHETIC: profile_memory instant events, string pids, float ids, unknown categories."""
    events = [
        kernel(0, 10),
        {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 3, "s": "t",
         "args": {"Device Type": 1, "Device Id": 0, "Addr": 123, "Bytes": 4096, "Total Allocated": 1, "Total Reserved": 2}},
        {"ph": "X", "cat": "gpu_user_annotation", "name": "x", "pid": 0, "tid": 7, "ts": 0, "dur": 100},
        {"ph": "X", "cat": "python_function", "name": "f", "pid": "Spans", "tid": "main", "ts": 0, "dur": 100},
        {"ph": "X", "cat": "cpu_op", "name": 17, "pid": "host", "tid": 1.0, "ts": 1, "dur": 1, "args": {"External id": "x"}},
    ]
    t = load_trace(write(tmp_path, {"traceEvents": events}))
    assert len(t.device_events) == 1 and len(t.host_events) == 1
    assert t.host_events["name"].tolist() == ["17"] and t.host_events["external_id"].tolist() == [-1]


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=8,
)
_event = st.fixed_dictionaries(
    {},
    optional={
        "ph": st.sampled_from(["X", "B", "E", "i", "M", "f", "s"]) | _json_values,
        "cat": st.sampled_from(["kernel", "gpu_memcpy", "gpu_memset", "cpu_op", "cuda_runtime", "user_annotation", "Kernel"]) | _json_values,
        "name": st.sampled_from(["Memcpy DtoH (Device -> Pinned)", "ProfilerStep#1", "nccl", "k"]) | _json_values,
        "pid": _json_values,
        "tid": _json_values,
        "ts": st.floats(-10, 1e7) | _json_values,
        "dur": st.floats(-1, 1e4) | _json_values,
        "args": st.fixed_dictionaries({}, optional={"device": _json_values, "stream": _json_values, "bytes": _json_values, "correlation": _json_values}) | _json_values,
    },
)


@pytest.mark.slow  # (7, 5, 3 and 3 s: property and size runs, in CI's slow run)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(events=st.lists(_event, max_size=12), top=st.dictionaries(st.sampled_from(["deviceProperties", "distributedInfo", "schemaVersion"]), _json_values, max_size=2))
def test_fuzz_loader_raises_only_trace_format_error(tmp_path, events, top):
    p = tmp_path / "fuzz.json"
    p.write_text(json.dumps({**top, "traceEvents": events}))
    try:
        t = load_trace(p)
    except TraceFormatError:
        return
    overlap_report(t)  # whatever loads must also analyse


@pytest.mark.parametrize("seed", range(12))
def test_mutated_real_trace(tmp_path, seed):
    rng = random.Random(seed)
    raw = gzip.decompress((SAMPLES / "compute-copy.overlapped.pt.trace.json.gz").read_bytes())
    data = bytearray(raw)
    mode = seed % 3
    if mode == 0:
        data = data[: rng.randrange(len(data))]
    elif mode == 1:
        for _ in range(20):
            data[rng.randrange(len(data))] = rng.choice(b'{}[],:"0123456789-eE.aX ')
    else:
        gz = bytearray(gzip.compress(bytes(data)))
        gz[rng.randrange(10, len(gz))] ^= 0xFF
        p = tmp_path / "m.json.gz"
        p.write_bytes(bytes(gz))
        try:
            overlap_report(load_trace(p))
        except TraceFormatError:
            pass
        return
    p = tmp_path / "m.json"
    p.write_bytes(bytes(data))
    try:
        overlap_report(load_trace(p))
    except TraceFormatError:
        pass


def test_stream_label_tid_of_old_torch(tmp_path):
    """SYNTHETIC, in the torch 1.8-1.10 layout (kineto tb_plugin test data): tid "stream 7", no args.stream."""
    ev = {"ph": "X", "cat": "Memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": "stream 7",
          "ts": 405, "dur": 10, "args": {"correlation": 334, "external id": 4}}
    t = load_trace(write(tmp_path, {"traceEvents": [ev]}))
    assert t.device_events[["device", "stream"]].values.tolist() == [[0, 7]]
    assert t.device_events["direction"].tolist() == ["HtoD"]


# --- hostile inputs: every cause becomes one TraceFormatError line naming the file ----------

REPO = Path(__file__).resolve().parent.parent


def _pythonpath() -> str:
    """This checkout first, then whatever the environment already puts on the path (packages installed with --target)."""
    return os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))


def _good(tmp_path: Path, name: str) -> Path:
    """A SYNTHETIC good trace: one kernel."""
    return write(tmp_path, {"traceName": "synthetic: good", "traceEvents": [kernel(1, 2), kernel(5, 2)]}, name)


def _hostile(folder: Path) -> dict[str, Path]:
    """SYNTHETIC hostile files: a 10**400 ts, 100k-deep nesting, invalid UTF-8 in a name."""
    huge = folder / "huge_ts.json"
    huge.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1' + "0" * 400 + ', "dur": 1}]}')
    deep = folder / "deep.json"
    deep.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1, "args": ' + "[" * 100_000 + "]" * 100_000 + "}]}")
    utf = folder / "utf8.json"
    utf.write_bytes(b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k\xff\xfe", "pid": 0, "tid": 7, "ts": 1, "dur": 1}]}')
    empty = folder / "empty_events.json"
    empty.write_text('{"traceEvents": []}')
    return {"ts": huge, "nest": deep, "utf": utf, "empty": empty}


def test_hostile_files_raise_one_line_naming_the_file(tmp_path):
    for what, p in _hostile(tmp_path).items():
        with pytest.raises(TraceFormatError) as e:
            load_trace(p)
        msg = str(e.value)
        assert msg.startswith(str(p)) and "\n" not in msg, (what, msg)
        assert "Error" not in msg.split(": ", 1)[1] or what == "utf", (what, msg)


def test_folder_with_hostile_files_reports_every_good_trace(tmp_path):
    """The issue's case: good traces plus hostile files; every good one reported, each bad one named once."""
    for i in range(3):
        _good(tmp_path, f"good{i}.json")
    bad = _hostile(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "traceprobe", "overlap-report", str(tmp_path), "--format", "json", "-j", "1"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": _pythonpath(), "COLUMNS": "80"},
    )
    assert proc.returncode == 2, proc.stderr
    doc = json.loads(proc.stdout)
    reported = {Path(r["path"]).name for r in doc["traces"]}
    assert reported == {"good0.json", "good1.json", "good2.json"}
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    for p in bad.values():
        assert sum(str(p) in line for line in lines) == 1, (p, proc.stderr)


def test_fifo_and_devices_are_refused_at_once(tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    start = time.monotonic()
    with pytest.raises(TraceFormatError, match="FIFO"):
        load_trace(fifo)
    assert time.monotonic() - start < 5
    with pytest.raises(TraceFormatError, match="device"):
        load_trace("/dev/zero")
    with pytest.raises(TraceFormatError, match="directory"):
        load_trace(tmp_path)


def _gzip_bomb(path: Path, gib: int) -> Path:
    """SYNTHETIC: a valid trace with ``gib`` GiB of white space inside, as a multi-member gzip of a few MB."""
    import zlib

    def member(data: bytes) -> bytes:
        c = zlib.compressobj(9, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()

    spaces = member(b" " * (64 << 20))
    with path.open("wb") as f:
        f.write(member(json.dumps({"traceEvents": [kernel(1, 2)]})[:-2].encode()))
        for _ in range(gib * 16):
            f.write(spaces)
        f.write(member(b"]}"))
    return path


def _peak_rss_of(code: str, limit_as: int | None = None) -> tuple[int, str, int]:
    """Run python ``code`` in a child (optionally under RLIMIT_AS); its exit status, stderr and peak RSS in bytes."""
    import resource

    def pre() -> None:
        if limit_as:
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))

    env = {**os.environ, "PYTHONPATH": _pythonpath(), "OPENBLAS_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True, env=env, preexec_fn=pre)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)  # reaped here, so its own peak RSS is known
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, err, usage.ru_maxrss * 1024


@pytest.mark.slow  # the real command in a subprocess under a memory limit
def test_gzip_bomb_is_refused_within_memory(tmp_path):
    """A 6 MB gzip inflating to 6 GiB: refused in one line, the child's peak RSS well under 2 GB."""
    bomb = _gzip_bomb(tmp_path / "bomb.json.gz", 6)
    assert bomb.stat().st_size < 8 << 20
    code = (
        "import sys\nfrom traceprobe import TraceFormatError, load_trace\n"
        f"try:\n    load_trace({str(bomb)!r})\nexcept TraceFormatError as e:\n    print(e, file=sys.stderr); sys.exit(2)\n"
    )
    rc, err, peak = _peak_rss_of(code, limit_as=3 << 30)  # a limit on memory: the default limit derives from it
    assert rc == 2 and "too large" in err and str(bomb) in err and err.count("\n") == 1, err
    assert peak < 2e9, peak
    rc, err, peak = _peak_rss_of(code.replace("load_trace(" + repr(str(bomb)), "load_trace(" + repr(str(bomb)) + ", max_bytes=500_000_000"))
    assert rc == 2 and "max_bytes" in err, err
    assert peak < 1e9, peak
    cli = subprocess.run([sys.executable, "-m", "traceprobe", "overlap-report", str(bomb), "--max-bytes", "1e8", "--format", "json"],
                         capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": _pythonpath()})
    assert cli.returncode == 2 and cli.stderr.count(str(bomb)) == 1 and "too large" in cli.stderr, cli.stderr


def test_small_bomb_within_the_limit_loads(tmp_path):
    """The same layout inflating to 64 MiB is a valid trace and loads."""
    import zlib

    p = tmp_path / "ok.json.gz"
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    p.write_bytes(c.compress(b'{"traceEvents": [' + json.dumps(kernel(1, 2)).encode() + b" " * (64 << 20) + b"]}") + c.flush())
    assert len(load_trace(p).device_events) == 1
    with pytest.raises(TraceFormatError, match="too large"):
        load_trace(p, max_bytes=1 << 20)


def test_odd_values_are_warnings_not_other_ids(tmp_path):
    """SYNTHETIC: negative ids stay negative, a missing dur is 0 ns, unmatched B/E dropped: each counted."""
    events = [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": -2, "tid": -3, "ts": 1, "dur": 2},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 5, "args": {"device": 0, "stream": 7}},
        {"ph": "E", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 9},
    ]
    t = load_trace(write(tmp_path, {"traceEvents": events}))
    assert t.device_events[["device", "stream", "start_ns", "end_ns"]].values.tolist() == [[-2, -3, 1000, 3000], [0, 7, 5000, 5000]]
    w = " | ".join(t.metadata["warnings"])
    assert "1 device complete event(s) without 'dur'" in w
    assert "1 device event(s) with a negative" in w
    assert "1 unmatched B/E event(s) dropped" in w
    r = overlap_report(t)
    assert set(t.metadata["warnings"]) <= set(r.warnings)


def test_a_defect_on_one_trace_fails_that_file_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SYNTHETIC: the analysis raises on one trace (a defect of traceprobe, as an IndexError deep in an analysis
    would): that file is one line naming it, the exception and where it rose, the exit status is not zero, and the
    other trace is still reported (before: ``error: IndexError: ...`` and nothing reported)."""
    from typer.testing import CliRunner

    from traceprobe.analysis import per_trace
    from traceprobe.cli import app

    good, bad = _good(tmp_path, "good"), _good(tmp_path, "bad")
    real = per_trace.overlap_report

    def flaky(trace, *a, **k):
        if "bad" in str(trace.path):
            raise IndexError("index 3 is out of bounds for axis 0 with size 2")
        return real(trace, *a, **k)

    monkeypatch.setattr(per_trace, "overlap_report", flaky)
    res = CliRunner().invoke(app, ["overlap-report", str(good), str(bad), "--jobs", "1"])
    assert res.exit_code != 0
    assert "good" in res.stdout, res.output
    line = next(ln for ln in res.output.splitlines() if str(bad) in ln and "IndexError" in ln)
    assert "index 3 is out of bounds" in line and "please report" in line, line
