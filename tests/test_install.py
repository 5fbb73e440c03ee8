"""The light install: reading, analysing, rendering and exporting work without torch; ``record`` says what to install.

torch is the ``record`` extra. These tests hide torch from a child process (an import hook
that refuses it, put first on ``sys.path`` by ``sitecustomize``), so they run the same
where torch is installed (CI) and where it is not.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_traces"

BLOCK = '''
import sys
class _NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError("No module named 'torch'", name="torch")
        return None
sys.meta_path.insert(0, _NoTorch())
'''


@pytest.fixture(scope="module")
def no_torch(tmp_path_factory):
    """An environment whose Python cannot import torch."""
    d = tmp_path_factory.mktemp("notorch")
    (d / "sitecustomize.py").write_text(BLOCK)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(d), str(REPO), os.environ.get("PYTHONPATH", "")])}
    env.pop("COLUMNS", None)
    return env


def _run(env, *args):
    return subprocess.run([sys.executable, "-m", "traceprobe", *args], capture_output=True, text=True, cwd=REPO, env=env, timeout=600)


def test_the_hook_hides_torch(no_torch):
    res = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, text=True, env=no_torch)
    assert res.returncode != 0 and "No module named 'torch'" in res.stderr


@pytest.mark.parametrize("args", [
    ["overlap-report", "sample_traces/script-ddp", "sample_traces/cpu-gpu.concurrent.pt.trace.json.gz"],
    ["overlap-report", "sample_traces/script-ddp", "--format", "json"],
    ["diff", "sample_traces/compute-copy.nonblocking.pt.trace.json.gz", "sample_traces/compute-copy.overlapped.pt.trace.json.gz"],
    ["schema"],
])
@pytest.mark.slow  # the real commands in subprocesses
def test_commands_run_without_torch(no_torch, args):
    res = _run(no_torch, *args)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip()


@pytest.mark.slow  # the real commands in subprocesses
def test_export_runs_without_torch(no_torch, tmp_path):
    res = _run(no_torch, "export", "sample_traces/script-ddp", "--perfetto", "--merge-ranks", "-o", str(tmp_path))
    assert res.returncode == 0, res.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["train_small.pftrace"]


def test_record_without_torch_says_what_to_install(no_torch, tmp_path):
    res = _run(no_torch, "record", "--out", str(tmp_path / "r"))
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'traceprobe[record]'" in lines[0]
    assert not (tmp_path / "r").exists()
