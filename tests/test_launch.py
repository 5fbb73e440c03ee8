"""The process entry point (traceprobe.launch): which command lines decode their trace before typer parses them,
and that the command takes that decoding over, or stops it. Traces written here are SYNTHETIC; the others are
the repository's real sample traces."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from traceprobe import launch, prefetch
from traceprobe.cli import app

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "sample_traces" / "compute-copy.overlapped.pt.trace.json.gz"
OTHER = REPO / "sample_traces" / "compute-copy.sequential.pt.trace.json.gz"
fork_only = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")


@pytest.fixture(autouse=True)
def _no_early_decoding_left():
    yield
    prefetch.drop_early()


def test_the_option_tables_are_the_commands_own():
    """launch reads the command line without typer: its tables of options must be overlap-report's."""
    command = typer.main.get_command(app).commands[launch.EARLY_COMMAND]  # type: ignore[attr-defined]
    options = [p for p in command.params if p.param_type_name == "option"]
    assert launch.VALUE_OPTIONS == {o for p in options if not p.is_flag for o in (*p.opts, *p.secondary_opts)}
    assert launch.FLAG_OPTIONS == {o for p in options if p.is_flag for o in (*p.opts, *p.secondary_opts)}
    assert {"-h", "--help"} <= launch.NOT_EARLY and not launch.VALUE_OPTIONS & launch.FLAG_OPTIONS


def test_one_local_trace_is_named(tmp_path):
    f = str(SAMPLE)
    out = tmp_path / "report.json"
    out.write_text("{}")  # an existing file given as an option's value is not the trace
    for argv in (
        ["overlap-report", f],
        ["overlap-report", f, "--format", "json", "--output", str(out), "-j", "1"],
        ["overlap-report", "--format=json", "-o", str(out), f, "--detail", "-v"],
        ["overlap-report", "--engine", "native", f, "--min-copy-overlap", "90%"],
        ["overlap-report", "--plot", str(out), "--", f],
    ):
        assert launch.trace_named(argv) == f, argv


def test_any_doubt_starts_nothing(tmp_path):
    f, g = str(SAMPLE), str(OTHER)
    for argv in (
        [],
        ["plot", f, "-o", "x.png"],  # another command
        ["overlap-report"],
        ["overlap-report", f, g],  # two traces
        ["overlap-report", str(REPO / "sample_traces")],  # a folder
        ["overlap-report", str(tmp_path / "absent.json")],
        ["overlap-report", "s3://bucket/rank0.json.gz"],
        ["overlap-report", f, "--scheduler", "tcp://host:8786"],  # the work runs on a cluster
        ["overlap-report", f, "--scheduler=tcp://host:8786"],
        ["overlap-report", f, "--max-bytes", "1e9"],  # another limit
        ["overlap-report", f, "--engine", "perfetto"],  # no decoding here at all
        ["overlap-report", f, "--engine=perfetto"],
        ["overlap-report", f, "--help"],
        ["overlap-report", f, "-h"],
        ["overlap-report", f, "--no-such-option"],
        ["overlap-report", f, "-vj", "1"],  # short options clustered: not read here
        ["overlap-report", f, "--detail=yes"],
        ["overlap-report", "-o", f],  # the only file is the output
    ):
        assert launch.trace_named(argv) is None, argv


def _trace(path: Path, name: str) -> Path:
    """SYNTHETIC: a small valid trace."""
    events = [{"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": 10 * i, "dur": 5,
               "args": {"device": 0, "stream": 7, "correlation": i}} for i in range(50)]
    path.write_text(json.dumps({"traceEvents": events}))
    return path


@fork_only
def test_start_takes_the_early_decoding_over(tmp_path, monkeypatch):
    monkeypatch.setattr(prefetch, "worthwhile", lambda: True)  # (pandas is imported under pytest)
    path = _trace(tmp_path / "t.json", "k")
    prefetch.start_early(str(path))
    early = prefetch._early[0][1]
    taken = prefetch.start(path)  # the same file, the same (default) limit
    assert taken is early and taken.path == path and not prefetch._early
    try:
        assert taken.result().names == ["k"]
    finally:
        taken.cancel()


@fork_only
@pytest.mark.parametrize("change", ["other file", "limit", "processes", "rewritten"])
def test_start_stops_an_early_decoding_it_cannot_use(tmp_path, monkeypatch, change):
    """Another file, another limit, a given number of processes, or the file changed since: the early
    children are killed and reaped, and the decoding the command asked for is the one returned."""
    monkeypatch.setattr(prefetch, "worthwhile", lambda: True)
    path, other = _trace(tmp_path / "t.json", "old"), _trace(tmp_path / "u.json", "u")
    prefetch.start_early(str(path))
    early = prefetch._early[0][1]
    pids = [pid for pid, _ in early.children]
    if change == "rewritten":
        _trace(path, "new-name")  # (another size)
    asked = {"other file": (other, None, None), "limit": (path, 10**9, None), "processes": (path, None, 2),
             "rewritten": (path, None, None)}[change]
    pending = prefetch.start(*asked)
    try:
        assert pending is not early and early.children == [] and not prefetch._early
        for pid in pids:
            with pytest.raises(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)  # reaped
        expected = {"other file": ["u"], "rewritten": ["new-name"]}.get(change, ["old"])
        assert pending.result().names == expected
    finally:
        pending.cancel()


@fork_only
def test_drop_early_reaps_the_children(tmp_path, monkeypatch):
    monkeypatch.setattr(prefetch, "worthwhile", lambda: True)
    prefetch.start_early(str(_trace(tmp_path / "t.json", "k")))
    pids = [pid for pid, _ in prefetch._early[0][1].children]
    assert pids
    prefetch.drop_early()
    assert not prefetch._early
    for pid in pids:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


_SPY = """
import sys
from traceprobe import prefetch
seen = {"early": [], "result": []}
real_early, real_result = prefetch.start_early, prefetch.Pending.result
def start_early(path):
    real_early(path)
    seen["early"] += [id(p) for _, p in prefetch._early]
def result(self):
    seen["result"].append(id(self))
    return real_result(self)
prefetch.start_early, prefetch.Pending.result = start_early, result
import os
real_exit = os._exit
def leave(code):
    sys.stderr.write(f"SEEN early={len(seen['early'])} taken={seen['early'] == seen['result'] and bool(seen['result'])} "
                     f"left={len(prefetch._early)}\\n")
    real_exit(code)
os._exit = leave
sys.argv = ["traceprobe", *sys.argv[1:]]
from traceprobe.launch import entry
entry()
"""


@fork_only
@pytest.mark.parametrize("args, seen", [
    (["SAMPLE"], "early=1 taken=True left=0"),
    (["SAMPLES"], "early=0 taken=False left=0"),
])
def test_the_command_decodes_its_one_trace_from_the_start(args, seen):
    """The real command: one trace is decoded by the processes forked before typer was imported, and the JSON is
    the one read without child processes; a folder starts nothing early."""
    argv = [str(SAMPLE) if a == "SAMPLE" else str(REPO / "sample_traces") if a == "SAMPLES" else a for a in args]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    cmd = [sys.executable, "-c", _SPY, "overlap-report", *argv, "--format", "json"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert f"SEEN {seen}" in r.stderr, r.stderr
    plain = subprocess.run(cmd, env={**env, prefetch.ENV: "0"}, capture_output=True, text=True, timeout=300)
    assert r.returncode == plain.returncode == 0 and r.stdout == plain.stdout and '"traces"' in r.stdout


@fork_only
def test_a_command_that_fails_early_leaves_no_decoding_behind(tmp_path):
    """The output would overwrite the trace: the command refuses (exit 2) and its early children are gone."""
    path = tmp_path / "t.json"
    _trace(path, "k")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    r = subprocess.run([sys.executable, "-c", _SPY, "overlap-report", str(path), "--output", str(path)],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "SEEN early=1 taken=False left=0" in r.stderr, r.stderr
    assert json.loads(path.read_text())["traceEvents"][0]["name"] == "k"
