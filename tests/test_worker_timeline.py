"""scripts/worker_timeline.py: every file is timed in the worker that analysed it, no line lost between processes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import synth_job as job  # noqa: E402


@pytest.mark.slow  # the script in a subprocess, three worker processes
@pytest.mark.skipif(not hasattr(os, "fork"), reason="local workers need fork")
def test_each_file_once_on_its_worker(tmp_path):
    """A SYNTHETIC job of 6 ranks on 3 workers: 6 file lines from 3 worker pids, 3 worker exits, then the summary."""
    folder = tmp_path / "job"
    folder.mkdir()
    job.write_job(job.st.Config(events=3000, seed=5), 6, folder, skewed=0, skew_ns=0, jobs=1)
    log = tmp_path / "log.txt"
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "worker_timeline.py"), str(folder), "--jobs", "3", "--log", str(log)],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = [line.split() for line in log.read_text().splitlines()]
    files = [f for f in lines if f[2] == "file"]
    assert sorted(f[-1] for f in files) == sorted(p.name for p in folder.glob("*.json*")) and len(files) == 6
    assert len({f[1] for f in files}) == 3
    exits = [f for f in lines if f[2] == "exit"]
    assert sorted(f[-1] for f in exits) == ["parent", "worker", "worker", "worker"]
    assert sum(f[2] == "summary" for f in lines) == 1
    assert "6 files on 3 process(es)" in r.stdout
    assert re.search(r"CPU: command [0-9.]+ s, workers [0-9.]+ s in all \(3 exited\)", r.stdout)
