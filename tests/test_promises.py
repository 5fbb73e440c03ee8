"""What the reading path promises, each case as a user meets it (issue 29's list; each failed before it was fixed).

Every trace here is SYNTHETIC, built in the test.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
import warnings
import zlib
from pathlib import Path

import pytest

from traceprobe import TraceFormatError, load_trace
from traceprobe.collect import discover
from traceprobe.fileio import TEMP_PATTERN, remove_stale_temps

REPO = Path(__file__).resolve().parent.parent


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])), "COLUMNS": "120"}


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "traceprobe", *args], capture_output=True, text=True, timeout=timeout, env=_env())


def kernel(ts: float, device: int = 0, stream: int = 7, name: str = "gemm") -> dict:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": device, "tid": stream, "ts": ts, "dur": 2, "args": {"device": device, "stream": stream}}


def write(path: Path, events: list[dict], **head) -> Path:
    path.write_text(json.dumps({"traceName": "synthetic: promises", **head, "traceEvents": events}))
    return path


# --- 1. FIFOs, devices and sockets are refused before any open ----------------------------------------


def test_a_fifo_named_on_the_command_line_is_refused_at_once(tmp_path):
    fifo = tmp_path / "x.json"
    os.mkfifo(fifo)
    start = time.monotonic()
    proc = cli("overlap-report", str(fifo), timeout=60)  # (it hung: the read-ahead opened the FIFO first)
    assert time.monotonic() - start < 60
    assert proc.returncode == 2 and "FIFO" in proc.stderr and str(fifo) in proc.stderr, proc.stderr


def test_a_socket_is_refused(tmp_path):
    import socket

    path = tmp_path / "s.json"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        with pytest.raises(TraceFormatError, match="socket"):
            load_trace(path)


# --- 2. bounded memory on any input ----------------------------------------------------------------


def _synthetic(path: Path, n: int) -> Path:
    subprocess.run([sys.executable, str(REPO / "scripts" / "synth_trace.py"), "-q", "-n", str(n), "-o", str(path)], check=True, env=_env())
    return path


@pytest.mark.slow  # a subprocess per trace, measuring its peak memory
def test_an_odd_event_does_not_load_the_whole_trace_at_once(tmp_path):
    """One event of an unknown ``ph`` near the start: the decode's peak memory as without it (it was a whole-trace decode:
    the JSON and every event's struct at once)."""
    plain = _synthetic(tmp_path / "plain.json", 200_000)
    text = plain.read_bytes()
    first = text.index(b"{", text.index(b'"traceEvents"'))
    odd = tmp_path / "odd.json"
    odd.write_bytes(text[:first] + b'{"ph": "Z", "name": "odd", "pid": 0, "tid": 0, "ts": 1}, ' + text[first:])
    code = ("import sys; from traceprobe.reading.decode import read_events; read_events(sys.argv[1]); "  # VmHWM: this program's peak
            "print([int(x.split()[1]) * 1024 for x in open('/proc/self/status') if x.startswith('VmHWM')][0])")
    peaks = {p.name: int(subprocess.run([sys.executable, "-c", code, str(p)], capture_output=True, text=True, env=_env(), check=True).stdout)
             for p in (plain, odd)}
    assert peaks["odd.json"] - peaks["plain.json"] < 0.2 * len(text), (peaks, len(text))  # (it was the JSON's size and more)


def test_a_gzip_of_zeros_is_refused_before_it_is_inflated(tmp_path):
    """1 GiB of zero bytes in a gzip of about 1 MB: not JSON from its first byte, refused at once (it was inflated whole)."""
    member = zlib.compressobj(9, zlib.DEFLATED, 31)
    one = member.compress(b"\0" * (64 << 20)) + member.flush()
    bomb = tmp_path / "zeros.json.gz"
    bomb.write_bytes(one * 16)
    code = ("import sys\nfrom traceprobe import TraceFormatError, load_trace\ntry:\n    load_trace(sys.argv[1])\n"
            "except TraceFormatError as e:\n    print(e)\n"
            "print([int(x.split()[1]) * 1024 for x in open('/proc/self/status') if x.startswith('VmHWM')][0])")
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code, str(bomb)], capture_output=True, text=True, env=_env(), check=True).stdout.splitlines()
    assert "not valid JSON" in out[0] and str(bomb) in out[0], out
    assert int(out[1]) < 300e6 and time.monotonic() - start < 30, (out, time.monotonic() - start)


# --- 3. values that do not fit: a warning or one error line, never an abort of the others ---------------------------


def _odd_values(folder: Path) -> dict[str, Path]:
    folder.mkdir()
    good = write(folder / "good.json", [kernel(1), kernel(5)])
    step = write(folder / "step.json", [kernel(1), {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#99999999999999999999999",
                                                    "pid": 1, "tid": 1, "ts": 0, "dur": 10}])
    rank = write(folder / "rank.json", [kernel(1)], distributedInfo={"rank": 1e30, "world_size": 2})
    device = write(folder / "device.json", [kernel(1), kernel(3, device=2**32)])
    pid = write(folder / "pid.json", [kernel(1), {"ph": "X", "cat": "cpu_op", "name": "op", "pid": 2**70, "tid": 1e30, "ts": 0, "dur": 1}])
    return {"good": good, "step": step, "rank": rank, "device": device, "pid": pid}


def test_values_that_do_not_fit_are_warnings(tmp_path):
    files = _odd_values(tmp_path / "t")
    assert load_trace(files["step"]).steps.empty and "ProfilerStep" in " ".join(load_trace(files["step"]).metadata["warnings"])
    t = load_trace(files["rank"])
    assert t.rank is None and "distributedInfo.rank" in " ".join(t.metadata["warnings"])
    t = load_trace(files["device"])
    assert t.device_events["device"].tolist() == [0] and "beyond 2^24" in " ".join(t.metadata["warnings"])
    assert len(load_trace(files["pid"]).host_events) == 1


@pytest.mark.slow  # subprocess CLI round trips (plot, export, diff)
def test_a_folder_with_values_that_do_not_fit_is_reported_whole(tmp_path):
    files = _odd_values(tmp_path / "t")
    proc = cli("overlap-report", str(tmp_path / "t"), "--format", "json", "-j", "1")
    assert proc.returncode in (0, 1) and "OverflowError" not in proc.stderr, proc.stderr  # (it was: error: OverflowError, no report)
    assert {Path(r["path"]).name for r in json.loads(proc.stdout)["traces"]} == {p.name for p in files.values()}
    proc = cli("overlap-report", str(tmp_path / "t"), "--plot", str(tmp_path / "p.png"), "-j", "1")
    assert proc.returncode in (0, 1) and len(list(tmp_path.glob("p.*.png"))) == len(files), proc.stderr
    out = tmp_path / "out"
    out.mkdir()
    proc = cli("export", str(tmp_path / "t"), "--perfetto", "--out-dir", str(out))
    assert proc.returncode == 0 and "Error" not in proc.stderr, proc.stderr
    assert len(list(out.glob("*.pftrace"))) == len(files)  # written where asked, not into the working folder
    proc = cli("diff", str(files["rank"]), str(files["device"]), "--format", "json")
    assert proc.returncode in (0, 1) and "Error" not in proc.stderr, proc.stderr


def test_csv_of_a_folder_where_every_file_fails_names_the_files(tmp_path):
    (tmp_path / "x.json").write_text('{"a": 1}')
    (tmp_path / "y.json").write_text("nope")
    proc = cli("overlap-report", str(tmp_path), "--format", "csv")
    assert proc.returncode == 2 and "KeyError" not in proc.stderr, proc.stderr  # (it was: error: KeyError: 'rank', hiding them)
    assert all(str(tmp_path / n) in proc.stderr + proc.stdout for n in ("x.json", "y.json")), (proc.stdout, proc.stderr)


# --- 4. unreadable folders are named, with a non-zero exit ----------------------------------------------


def test_an_unreadable_sub_folder_is_a_failure(tmp_path, monkeypatch):
    write(tmp_path / "ok.json", [kernel(1)])
    locked = tmp_path / "locked"
    locked.mkdir()
    write(locked / "hidden.json", [kernel(1)])
    real = os.scandir

    def scandir(path=".", *a, **k):
        if Path(path) == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, *a, **k)

    monkeypatch.setattr(os, "scandir", scandir)
    found, failures = discover([tmp_path])
    assert found == [tmp_path / "ok.json"]  # (it was skipped silently: no failure, exit 0)
    assert [(f.path, f.error) for f in failures] == [(str(locked), "cannot read this folder: Permission denied")]


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads a folder whatever its mode")
def test_an_unreadable_sub_folder_fails_the_command(tmp_path):
    write(tmp_path / "ok.json", [kernel(1)])
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0)
    try:
        proc = cli("overlap-report", str(tmp_path), "--format", "json")
    finally:
        locked.chmod(0o700)
    assert proc.returncode == 2 and str(locked) in proc.stderr, proc.stderr


# --- 5. workers end with their parent --------------------------------------------------------------


@pytest.mark.slow  # subprocesses: the real command, killed
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_killing_the_command_leaves_no_worker_behind(tmp_path, sig):
    psutil = pytest.importorskip("psutil")
    for i in range(8):
        _synthetic(tmp_path / f"r{i}.json", 40_000)
    proc = subprocess.Popen([sys.executable, "-m", "traceprobe", "overlap-report", str(tmp_path), "-j", "2", "--format", "json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
    parent = psutil.Process(proc.pid)
    deadline = time.monotonic() + 60
    while len(kids := parent.children(recursive=True)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(kids) >= 2
    proc.send_signal(sig)
    proc.wait(30)
    gone, alive = psutil.wait_procs(kids, timeout=10)
    assert not alive, alive  # (they were left blocked on their pipes, holding our stdout and stderr open)
    proc.communicate(timeout=10)  # stdout and stderr reach EOF: nobody holds them


# --- 6. --resume removes every temp file a killed record leaves, by pattern, and nothing else ---------------


def test_stale_temps_of_torchs_exporter_are_removed_and_nothing_else(tmp_path):
    leftovers = [".r.pt.trace.json.gz.traceprobe-ab12cd_3.tmp", ".r.pt.trace.json.gz.traceprobe-ab12cd_3.tmp.json",
                 ".r.pt.trace.json.gz.traceprobe-ab12cd_3.tmp.json.tmp"]  # the last: torch's own, beside our scratch name
    keep = [".env.tmpl", ".x.tmp.json.tmp", "r.traceprobe-ab12cd_3.tmp.json.tmp", ".r.traceprobe-ab12cd_3.tmp.tmp.tmp", "notes.json"]
    for n in leftovers + keep:
        (tmp_path / n).write_text("x")
    assert all(TEMP_PATTERN.match(n) for n in leftovers) and not any(TEMP_PATTERN.match(n) for n in keep)
    assert sorted(p.name for p in remove_stale_temps(tmp_path)) == sorted(leftovers)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(keep)


# --- files named for what they are; no Python warning from reading ----------------------------------------------------


@pytest.mark.parametrize("name, content, needle", [
    ("t.pftrace", b"\x0a\x85\x01\x12\x02\x08\x01" + bytes(range(32)), "a Perfetto trace"),
    ("trace.json", b"\x0a\x1c\x82\x01\x19\x0a\x17" + bytes(range(40)), "a Perfetto trace"),
    ("execution_details.json", json.dumps({"model": "m", "requests": [], "config": {}}).encode(), "not a torch.profiler trace (looks like"),
    ("manifest.json", json.dumps({"variants": [], "traceprobe": "0.1.0", "created": "x", "command": [], "environment": {}}).encode(),
     "a traceprobe manifest"),
    ("other.json", json.dumps({"a": 1, "b": [2]}).encode(), "not a torch.profiler trace: no 'traceEvents' list (top-level keys: a, b)"),
])
def test_files_that_are_not_traces_are_named(tmp_path, name, content, needle):
    p = tmp_path / name
    p.write_bytes(content)
    with pytest.raises(TraceFormatError) as e:
        load_trace(p)
    assert needle in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_reading_raises_no_python_warning(tmp_path):
    docs = ['{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1e400, "dur": 1}]}',
            '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 1e300, "tid": -1e300, "ts": 1, "dur": -0.0}]}',
            '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1, "args": {"device": 1e30, "stream": "0x7"}}]}',
            '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": "1", "dur": "2"}], "distributedInfo": {"rank": NaN}}']
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i, d in enumerate(docs):
            p = tmp_path / f"w{i}.json.gz"
            p.write_bytes(gzip.compress(d.encode()))
            try:
                load_trace(p)
            except TraceFormatError:
                pass
