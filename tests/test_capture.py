"""Recording your own code: ``record --script/--module``, ``traceprobe.capture()``, ``traceprobe.step()``.

Most runs happen in this process (runpy, as the CLI does it) to keep the suite
fast; one test starts real processes through torchrun. The target is
``tests/data/train_small.py``, a tiny CPU training loop.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

import traceprobe
from traceprobe.analysis import OverlapReport
from traceprobe.analysis.job.ranks import rank_summary
from traceprobe.cli import app
from traceprobe.collect import analyze_paths
from traceprobe.manifest import Entry
from traceprobe.recording import profiler
from traceprobe.recording import runner as tp_runner

DATA = Path(__file__).resolve().parent / "data"
SCRIPT = DATA / "train_small.py"
cli = CliRunner()


@pytest.fixture(autouse=True)
def _no_torchrun_env(monkeypatch):
    """A launcher's RANK/WORLD_SIZE around the test run must not leak into the captures."""
    for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(k, raising=False)


def _steps(path: Path) -> list[int]:
    return traceprobe.load_trace(path).steps["step"].tolist()


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))


def _manifest(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text())


@pytest.mark.slow
def test_script_windows_through_cli(tmp_path, monkeypatch):
    """Windows of steps by schedule, named by step, ProfilerStep#N inside, default folder, report and manifest."""
    monkeypatch.chdir(tmp_path)
    res = cli.invoke(
        app,
        ["record", "--script", str(SCRIPT), "--wait", "1", "--warmup", "1", "--active", "2", "--repeat", "2", "--", "--steps", "9", "--width", "8"],
    )
    assert res.exit_code == 0, res.output
    assert "argv=['--steps', '9', '--width', '8']" in res.output and "__name__=__main__" in res.output
    (out,) = list((tmp_path / "runs").iterdir())
    assert out.name.startswith("train_small.py-") and out.name[len("train_small.py-"):].replace("-", "").isdigit()
    assert _names(out) == ["manifest.json", "train_small.steps2-3.pt.trace.json.gz", "train_small.steps2-3.summary.json",
                           "train_small.steps6-7.pt.trace.json.gz", "train_small.steps6-7.summary.json"]
    assert _steps(out / "train_small.steps2-3.pt.trace.json.gz") == [2, 3]
    assert _steps(out / "train_small.steps6-7.pt.trace.json.gz") == [6, 7]

    m = _manifest(out)
    assert m["command"] == sys.argv and m["environment"]["torch"]  # the process's command line (here pytest's)
    (proc,) = m["processes"]
    assert proc["exit_code"] == 0 and proc["status"] == "ok" and proc["steps"] == 9
    assert proc["target"] == {"script": str(SCRIPT), "args": ["--steps", "9", "--width", "8"]}
    assert proc["options"]["active"] == 2 and proc["options"]["repeat"] == 2
    assert [(e["variant"], e["status"], e["steps"]) for e in m["variants"]] == [("steps2-3", "ok", [2, 3]), ("steps6-7", "ok", [6, 7])]

    summary = analyze_paths([out], jobs=1)  # from the summaries, written before record returned
    reports, failures = list(summary.reports), list(summary.failures)
    assert not failures and len(reports) == 2 and all(r.path.endswith(".summary.json") for r in reports)
    assert reports[0].info["workload"] == "train_small" and reports[0].info["variant"] == "steps2-3"
    assert reports[0].steps["step"].tolist() == [2, 3] and reports[0].throughput > 0


@pytest.mark.slow
def test_module_whole_run(tmp_path, monkeypatch, capsys):
    """--module as python -m would (cwd on sys.path, __main__); no step() calls: one trace of the whole run."""
    monkeypatch.chdir(DATA)
    code, cap = tp_runner.run(module="train_small", args=["--no-steps", "--steps", "3"], out=tmp_path / "m")
    assert code == 0
    assert "__name__=__main__, argv=['--no-steps', '--steps', '3']" in capsys.readouterr().out
    assert [p.name for p in cap.trace_paths] == ["train_small.run.pt.trace.json.gz"]
    t = traceprobe.load_trace(cap.trace_path)
    assert t.steps.empty and (t.host_events["cat"] == "cpu_op").any()
    assert t.host_events["name"].astype(str).str.contains("aten::addmm|aten::linear").any()
    r = cap.report()
    assert isinstance(r, OverlapReport) and r.steps.empty and r.info["variant"] == "run"
    assert _manifest(tmp_path / "m")["processes"][0]["target"] == {"module": "train_small", "args": ["--no-steps", "--steps", "3"]}


@pytest.mark.slow  # capture() end to end under torch.profiler
def test_capture_context_decorator_and_whole_run(tmp_path):
    import torch

    def work():
        a = torch.randn(32, 32, requires_grad=True)
        (a @ a).sum().backward()

    # wait=0: step 0 (set-up) is still skipped, then 1 warm-up step and 2 recorded
    with traceprobe.capture(tmp_path / "ctx", name="ctx", wait=0, warmup=1, active=2) as cap:
        for _ in range(4):
            work()
            cap.step()
    assert cap.trace_path.name == "ctx.steps2-3.pt.trace.json.gz" and _steps(cap.trace_path) == [2, 3]
    r = cap.report()
    assert isinstance(r, OverlapReport) and r.steps["step"].tolist() == [2, 3] and r.path == str(cap.trace_path)

    deco = traceprobe.capture(tmp_path / "deco", name="deco")

    @deco
    def train(n):
        for _ in range(n):
            work()
            traceprobe.step()  # the module-level step reaches the running capture
        return "done"

    assert train(5) == "done"
    assert [p.name for p in deco.trace_paths] == ["deco.steps2-4.pt.trace.json.gz"]
    assert _steps(deco.trace_path) == [2, 3, 4]

    with traceprobe.capture(tmp_path / "whole", name="whole") as whole:
        work()
        with pytest.raises(RuntimeError, match="already running"):
            traceprobe.capture(tmp_path / "nested").start()
    assert whole.trace_path.name == "whole.run.pt.trace.json.gz" and whole.report().steps.empty
    traceprobe.step()  # no capture running: a no-op
    assert profiler.current() is None


@pytest.mark.slow
def test_failing_script_keeps_completed_windows(tmp_path, capsys):
    """An exception: exit 1, python's traceback from the script's frame on; windows that ended are on disk."""
    out = tmp_path / "fail"
    code, cap = tp_runner.run(script=SCRIPT, args=["--steps", "10", "--fail-at", "6"], out=out, active=2, repeat=2)
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):") and "RuntimeError: planned failure in step 6" in err
    assert "train_small.py" in err and "runner.py" not in err and "runpy" not in err
    # window 2-3 ended; window 6-7 had not finished a step when the script failed: not written
    assert _names(out) == ["manifest.json", "train_small.steps2-3.pt.trace.json.gz", "train_small.steps2-3.summary.json"]
    assert _steps(out / "train_small.steps2-3.pt.trace.json.gz") == [2, 3]
    (proc,) = _manifest(out)["processes"]
    assert proc["exit_code"] == 1 and proc["status"] == "failed" and proc["error"] == "RuntimeError: planned failure in step 6"

    # a window cut short after some of its steps ended is kept, marked partial
    code, cap = tp_runner.run(script=SCRIPT, args=["--fail-at", "4"], out=tmp_path / "partial", active=3)
    assert code == 1
    assert [p.name for p in cap.trace_paths] == ["train_small.steps2-4-partial.pt.trace.json.gz"]
    assert _steps(cap.trace_path) == [2, 3, 4]
    assert [e["status"] for e in _manifest(tmp_path / "partial")["variants"]] == ["partial"]


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["--exit-code", "3"], 3, None),
        (["--exit-message", "bye"], 1, "bye"),
        ([], 0, None),
    ],
)
@pytest.mark.slow
def test_exit_code_passthrough(tmp_path, capsys, args, code, message):
    got, cap = tp_runner.run(script=SCRIPT, args=["--no-steps", "--steps", "1", *args], out=tmp_path / "x")
    assert got == code
    if message:
        assert capsys.readouterr().err.strip().splitlines()[0] == message
    (e,) = _manifest(tmp_path / "x")["variants"]
    assert e["variant"] == "run" and e["status"] == ("ok" if code == 0 else "partial")
    assert _manifest(tmp_path / "x")["processes"][0]["exit_code"] == code


@pytest.mark.slow
def test_cli_exit_code_and_missing_target(tmp_path):
    out = tmp_path / "c"
    res = cli.invoke(app, ["record", "--script", str(SCRIPT), "--out", str(out), "--", "--no-steps", "--steps", "1", "--exit-code", "4"])
    assert res.exit_code == 4 and (out / "train_small.run.pt.trace.json.gz").is_file()
    res = cli.invoke(app, ["record", "--script", str(tmp_path / "nope.py"), "--out", str(tmp_path / "n")])
    assert res.exit_code == 2 and "can't open file" in res.output and not (tmp_path / "n").exists()
    res = cli.invoke(app, ["record", "--module", "no_such_module_tp", "--out", str(tmp_path / "n")])
    assert res.exit_code == 1 and "No module named" in res.output and not (tmp_path / "n").exists()
    res = cli.invoke(app, ["record", "--script", str(SCRIPT), "--force"])
    assert res.exit_code == 2 and "--script/--module" in res.output


@pytest.mark.slow
def test_never_overwrites(tmp_path):
    out = tmp_path / "again"
    _, first = tp_runner.run(script=SCRIPT, args=["--no-steps", "--steps", "1"], out=out)
    before = first.trace_path.read_bytes()
    _, second = tp_runner.run(script=SCRIPT, args=["--no-steps", "--steps", "1"], out=out)
    assert second.trace_path.name == "train_small.run-2.pt.trace.json.gz"
    assert first.trace_path.read_bytes() == before
    m = _manifest(out)
    assert len(m["processes"]) == 2 and [e["traces"] for e in m["variants"]] == [[first.trace_path.name], [second.trace_path.name]]


@pytest.mark.slow
def test_ranks_share_a_folder(tmp_path, monkeypatch):
    """What each torchrun process does, one after the other here: rank in names and in the trace, one manifest."""
    out = tmp_path / "ranks"
    for rank in (0, 1):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("LOCAL_RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "2")
        code, _ = tp_runner.run(script=SCRIPT, args=["--no-steps", "--steps", "2"], out=out)
        assert code == 0
    assert _names(out) == ["manifest.json", "train_small.run.rank0.pt.trace.json.gz", "train_small.run.rank0.summary.json",
                           "train_small.run.rank1.pt.trace.json.gz", "train_small.run.rank1.summary.json"]
    # a whole-run trace starts before init_process_group: traceprobe adds distributedInfo from the environment
    assert traceprobe.load_trace(out / "train_small.run.rank1.pt.trace.json.gz").rank == 1
    summary = analyze_paths([out], jobs=1)
    reports, failures = list(summary.reports), list(summary.failures)
    assert not failures and sorted(r.rank for r in reports) == [0, 1]
    summary = rank_summary(reports)
    assert set(summary["ranks"]) == {2}
    m = _manifest(out)
    assert [p["rank"] for p in m["processes"]] == [0, 1] and m["environment"]["world_size"] == 2


@pytest.mark.slow  # capture() end to end under torch.profiler
def test_capture_writes_the_handlers_summaries(tmp_path):
    """Each trace of a capture gets the summary on_trace_ready writes (same process, same format), beside it, off the
    profiled thread; the folder of summaries alone reads as the traces do."""
    import torch

    from traceprobe.recording.summary_process import summarize_trace

    with traceprobe.capture(tmp_path / "s", name="s", wait=0, warmup=1, active=2, repeat=2, echo=False) as cap:
        for _ in range(8):
            torch.randn(64, 64).tanh().sum()
            cap.step()
    assert cap.wait(120) and not cap._summaries.errors
    assert _names(tmp_path / "s") == ["manifest.json", "s.steps2-3.pt.trace.json.gz", "s.steps2-3.summary.json",
                                      "s.steps5-6.pt.trace.json.gz", "s.steps5-6.summary.json"]
    from_summaries = analyze_paths([tmp_path / "s"], jobs=1)
    from_traces = analyze_paths(list(cap.trace_paths), jobs=1)
    assert [Path(r.path).name for r in from_summaries.reports] == ["s.steps2-3.summary.json", "s.steps5-6.summary.json"]
    for a, b in zip(from_traces.reports, from_summaries.reports):
        assert repr(a.headline) == repr(b.headline) and a.steps.equals(b.steps) and a.info["variant"] == b.info["variant"]
        assert b.info["summary_of"] == Path(a.path).name and b.info["job"] == "s"
    # a trace that cannot be read costs its summary, named in the result, and nothing else
    bad = tmp_path / "s" / "bad.pt.trace.json.gz"
    bad.write_bytes(b"not gzip")
    out = summarize_trace(str(bad), "j")
    assert out["summary"] is None and "bad.pt.trace.json.gz" in out["error"] and bad.exists()
    with traceprobe.capture(tmp_path / "off", name="off", summaries=False, echo=False) as off:
        torch.randn(8, 8).sum()
    assert off.wait() and _names(tmp_path / "off") == ["manifest.json", "off.run.pt.trace.json.gz"]


def test_manifest_merge_is_locked(tmp_path):
    """Many writers at once (ranks sharing a folder): every process and trace entry survives."""
    out = tmp_path / "m"
    out.mkdir()

    def writer(i):
        c = profiler.Capture(out, name=f"w{i}", echo=False)
        c.out = out
        for k in range(5):
            c._process = {"id": f"p{i}", "rank": i, "started": "t"}
            c.entries.append(Entry(f"w{i}", f"v{k}", traces=[f"w{i}.v{k}.pt.trace.json.gz"]))
            c._update_manifest()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    m = _manifest(out)
    assert sorted(p["rank"] for p in m["processes"]) == list(range(8))
    assert len(m["variants"]) == 40


def test_kineto_progress_lines_are_dropped_and_nothing_else(tmp_path, capfd):
    """Kineto's USDT/STAGE lines (C++, descriptor 2) do not reach the terminal; other stderr output does, in order."""
    import torch

    from traceprobe.recording.quiet import KinetoFilter

    with traceprobe.capture(tmp_path / "q", name="q", wait=0, warmup=1, active=1, echo=False) as cap:
        for _ in range(3):
            torch.randn(8, 8).sum()
            cap.step()
    kf = KinetoFilter()
    with kf.around():
        os.write(2, b"USDT:2026-11-23 06:58:27 9734:9734 SyncActivityProfilerHandler.cpp:52] profiler_start\nreal problem\n")
        os.write(2, b"STAGE:2026-11-23 07:27:24 4887:4887 SyncActivityProfilerHandler.cpp:51] Completed Stage: Warm Up\nmore\n")
    kf.close()
    err = capfd.readouterr().err
    assert "USDT" not in err and "STAGE" not in err and err.endswith("real problem\nmore\n")
    assert cap.trace_path is not None


def test_options_are_checked(tmp_path):
    with pytest.raises(ValueError, match="active"):
        traceprobe.capture(tmp_path, active=0)
    with pytest.raises(ValueError, match="wait"):
        traceprobe.capture(tmp_path, wait=-1)
    with pytest.raises(ValueError, match="one of"):
        tp_runner.run(script=SCRIPT, module="x")


def test_import_does_not_import_torch():
    code = (
        "import sys, traceprobe, traceprobe.recording.runner; traceprobe.step(); "
        "assert callable(traceprobe.capture) and traceprobe.Capture; "
        "assert 'torch' not in sys.modules, 'torch imported'; "
        "assert 'pandas' not in sys.modules, 'pandas imported'"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr


def _torchrun(tmp_path: Path, args: list[str], timeout: float = 120, script: Path = SCRIPT) -> Path:
    """``torchrun --standalone --nproc-per-node 2 -m traceprobe record --script SCRIPT ...`` in tmp_path; its one run folder."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(Path(traceprobe.__file__).parents[1]), os.environ.get("PYTHONPATH", "")])}
    for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        env.pop(k, None)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m", "traceprobe", "record", "--script", str(script), *args]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # torchrun and the ranks it started, nothing else
        proc.communicate()
        raise
    assert proc.returncode == 0, stderr[-3000:]
    (out,) = list((tmp_path / "runs").iterdir())  # both ranks picked the same default folder
    return out


@pytest.mark.slow
def test_torchrun_two_ranks(tmp_path):
    """Real processes: torchrun starts two `python -m traceprobe record --script` ranks, DDP over gloo."""
    out = _torchrun(tmp_path, ["--active", "2", "--", "--ddp", "--steps", "5"])
    assert _names(out) == ["manifest.json", "train_small.steps2-3.rank0.pt.trace.json.gz", "train_small.steps2-3.rank0.summary.json",
                           "train_small.steps2-3.rank1.pt.trace.json.gz", "train_small.steps2-3.rank1.summary.json"]
    summary = analyze_paths([out], jobs=1)  # (from the summaries: one job, torchrun's run id)
    reports, failures = list(summary.reports), list(summary.failures)
    assert not failures and sorted(r.rank for r in reports) == [0, 1]
    assert all(r.steps["step"].tolist() == [2, 3] for r in reports)
    assert not rank_summary(reports).empty
    m = json.loads((out / "manifest.json").read_text())
    assert [p["rank"] for p in m["processes"]] == [0, 1]
    assert all(p["command"][-5:] == ["--active", "2", "--", "--ddp", "--steps", "5"][-5:] for p in m["processes"])


@pytest.mark.slow
def test_torchrun_gloo_ddp_exits(tmp_path):
    """gloo DDP under torchrun + record --script, once each: every run ends, exit 0, both traces.

    Two scripts, for the two ways a DDP model used to outlive its welcome: at module
    level (tests/data/ddp_gloo.py) and local to main() (train_small.py --ddp).
    """
    for i, (script, args, name) in enumerate([(DATA / "ddp_gloo.py", [], "ddp_gloo.steps2-4"),
                                               (SCRIPT, ["--", "--ddp", "--steps", "6"], "train_small.steps2-4")]):
        run = tmp_path / str(i)
        run.mkdir()
        out = _torchrun(run, args, timeout=90, script=script)
        assert _names(out) == sorted([f"{name}.rank{r}.{end}" for r in (0, 1) for end in ("pt.trace.json.gz", "summary.json")] + ["manifest.json"])
        assert [p["exit_code"] for p in _manifest(out)["processes"]] == [0, 0]


@pytest.mark.gpu
def test_script_on_gpu(tmp_path):
    code, cap = tp_runner.run(script=SCRIPT, args=["--device", "cuda", "--steps", "6", "--width", "512"], out=tmp_path / "g")
    assert code == 0 and [p.name for p in cap.trace_paths] == ["train_small.steps2-4.pt.trace.json.gz"]
    r = cap.report()
    assert not r.streams.empty and r.steps["step"].tolist() == [2, 3, 4]
    env = _manifest(tmp_path / "g")["environment"]
    print(f"GPU capture: {len(r.streams)} stream(s), env devices {[d['name'] for d in env['devices']]}, driver {env.get('driver')}")
    assert env["devices"] and env["cuda"]


@pytest.mark.multigpu
def test_torchrun_nccl_two_gpus(tmp_path):
    out = _torchrun(tmp_path, ["--", "--ddp", "--device", "cuda", "--steps", "6", "--width", "1024"], timeout=300)
    summary = analyze_paths([out], jobs=1)
    reports, failures = list(summary.reports), list(summary.failures)
    assert not failures and sorted(r.rank for r in reports) == [0, 1]
    for r in reports:
        print(f"rank {r.rank}: comm kernels {r.comm_overlap['comm_kernels'].sum() if not r.comm_overlap.empty else 0}, steps {r.steps['step'].tolist()}")
        assert not r.comm_overlap.empty and r.steps["step"].tolist() == [2, 3, 4]
    assert not rank_summary(reports).empty
