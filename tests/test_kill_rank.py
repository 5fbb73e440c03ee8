"""A rank killed between its trace and its manifest entry, for real: torchrun starts two ``traceprobe record --script``
ranks of a small DDP job over gloo (loopback), and rank 1 dies by SIGKILL as it commits its manifest entry, its trace
already in place. The kill comes from the script itself, which runs inside the recording process: on rank 1 it wraps
``traceprobe.manifest.update`` (to let rank 0 finish first: torchrun ends the other ranks when one fails) and
``os.replace`` (the rename that makes the new manifest the file), so the process dies with the entry written to its
temporary file, never renamed. Then ``overlap-report`` and ``job`` read the folder as a person would, and the next
recording into it removes the temporary file the killed rank left."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import traceprobe
from traceprobe.fileio import TEMP_PATTERN

ROOT = Path(traceprobe.__file__).resolve().parents[1]

SCRIPT = '''
"""Two gloo DDP ranks, five steps: steps 2-4 profiled, their trace written at the fifth traceprobe.step(). Rank 1 is
killed (SIGKILL) as it renames its manifest entry into place, once its trace is there and rank 0 has exited."""
import json, os, signal, sys, time
from pathlib import Path

import psutil
import torch
import torch.distributed as dist
import torch.nn as nn

import traceprobe
import traceprobe.manifest

OUT = Path(sys.argv[1])


def traced(folder):
    return any(Path(folder).glob("*.rank1.pt.trace.json.gz"))


def rank0_gone(limit_s=120.0):
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        try:
            procs = json.loads((OUT / "manifest.json").read_text())["processes"]
        except (OSError, ValueError, KeyError):
            procs = []
        pid = next((p["pid"] for p in procs if p.get("rank") == 0 and p.get("status") != "running"), None)
        if pid is not None:
            try:
                if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                    return
            except psutil.NoSuchProcess:
                return
        time.sleep(0.05)
    sys.exit("rank 0 did not end in time")


if os.environ["RANK"] == "1":
    update, replace = traceprobe.manifest.update, os.replace

    def update_after_rank0(folder, change):  # (outside the manifest's lock, which rank 0 takes to write its entry)
        if traced(folder):
            rank0_gone()
        return update(folder, change)

    def replace_or_die(src, dst, *args, **kwargs):
        if Path(os.fsdecode(dst)).name == "manifest.json" and traced(Path(os.fsdecode(dst)).parent):
            os.kill(os.getpid(), signal.SIGKILL)
        return replace(src, dst, *args, **kwargs)

    traceprobe.manifest.update, os.replace = update_after_rank0, replace_or_die

dist.init_process_group("gloo")
model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(16, 64), torch.randn(16, 1)
for _ in range(5):
    opt.zero_grad()
    nn.functional.mse_loss(model(x), y).backward()
    opt.step()
    traceprobe.step()
'''

NEXT = "import torch\nprint(float((torch.ones(64, 64) @ torch.ones(64, 64)).sum()))\n"
"""The next recording into the folder (one process, no ranks): its manifest write is the next one."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict[str, str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1", "GLOO_SOCKET_IFNAME": "lo", "COLUMNS": "80",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_PORT", "TORCHELASTIC_RUN_ID"):
        env.pop(k, None)
    return env


def _run(cmd: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    """``cmd`` in a session of its own: on a timeout it and every process it started are killed, nothing else."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{' '.join(cmd[:6])}... ran over {timeout:.0f} s:\n{out[-2000:]}\n{err[-3000:]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _tool(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return _run([sys.executable, "-m", "traceprobe", *args], cwd, 120)


def _temps(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if TEMP_PATTERN.match(p.name))


@pytest.mark.slow  # torchrun, two ranks, then four commands
def test_a_rank_killed_between_its_trace_and_its_manifest_entry(tmp_path):
    """Rank 1's trace is in the folder, its manifest entry only in the temporary file its write left; rank 0's trace,
    summary and entry are whole. overlap-report and job read one window of both ranks (not two runs: rank 1's bare
    trace beside rank 0's summary), say the manifest lacked rank 1's trace, and exit 0; the next recording into the
    folder removes the temporary file."""
    pytest.importorskip("torch.distributed")
    (tmp_path / "killed_rank.py").write_text(SCRIPT)
    out = tmp_path / "out"
    res = _run([sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "2",
                "--master-addr", "127.0.0.1", "--master-port", str(_free_port()),
                "-m", "traceprobe", "record", "--script", "killed_rank.py", "--out", "out", "--", "out"], tmp_path, 240)
    assert res.returncode != 0 and re.search(r"exitcode\s*:\s*-9\b", res.stderr), res.stderr[-3000:]  # (torchrun: rank 1's SIGKILL)

    rank0, rank1 = (f"killed_rank.steps2-4.rank{r}.pt.trace.json.gz" for r in (0, 1))
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == sorted(
        ["manifest.json", rank0, rank1, "killed_rank.steps2-4.rank0.summary.json"])
    (left,) = _temps(out)
    assert left.startswith(".manifest.json.traceprobe-") and rank1 in (out / left).read_text()  # (its entry, never renamed)
    m = json.loads((out / "manifest.json").read_text())
    assert [t for e in m["variants"] for t in e["traces"]] == [rank0]
    assert [(p["rank"], p["status"], p.get("exit_code")) for p in m["processes"]] == [(0, "ok", 0), (1, "running", None)]

    lacked = (f"out/{rank1}: not in out/manifest.json (its rank stopped before its entry?): joined window steps 2-4 "
              "by its own rank 1 and steps")  # (the folder as typed, short: at 80 columns a line breaks between words)
    report = _tool(tmp_path, "overlap-report", "out")
    assert report.returncode == 0, report.stderr
    heads = [ln for ln in report.stdout.splitlines() if ln and not ln.startswith(" ")]
    assert heads[0].startswith("killed_rank 2-4: 2 ranks, ") and "1 warning(s) about the traces' data: see --detail" in heads, report.stdout
    assert not any(re.search(r"\d+ runs", ln) for ln in heads), report.stdout
    detail = _tool(tmp_path, "overlap-report", "out", "--detail")
    assert detail.returncode == 0, detail.stderr
    assert f"[warning] {lacked}" in " ".join(detail.stdout.split()), detail.stdout
    job = _tool(tmp_path, "job", "out")
    assert job.returncode == 0, job.stderr
    assert job.stdout.splitlines()[0] == "out/killed_rank steps 2-4: 2 ranks", job.stdout
    assert f"warning: {lacked}" in job.stderr.splitlines(), job.stderr
    assert _temps(out) == [left]  # (reading writes nothing into the folder)

    (tmp_path / "next.py").write_text(NEXT)
    again = _tool(tmp_path, "record", "--script", "next.py", "--out", "out")
    assert again.returncode == 0, again.stderr
    assert _temps(out) == []
    m = json.loads((out / "manifest.json").read_text())
    assert [t for e in m["variants"] for t in e["traces"]] == [rank0, "next.run.pt.trace.json.gz"]
