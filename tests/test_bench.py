"""scripts/bench_run.py: peak memory counts a command's child processes alive beside it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import bench_run as br  # noqa: E402

TWO_HOLDERS = r"""
import os, time
pid = os.fork()
block = bytearray(150 << 20)
block[::4096] = b"x" * len(block[::4096])  # touch every page: resident
time.sleep(0.5)
if pid:
    os.waitpid(pid, 0)
else:
    os._exit(0)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_peak_memory_is_the_process_tree_together():
    """A parent and a child each holding 150 MB at once: the peak counts both (maxrss counts the largest
    one; it can also carry the resident size of the process that started the command, before its exec)."""
    r = br.measure([sys.executable, "-c", TWO_HOLDERS], timeout=60)
    assert r["rc"] == 0 and r["maxrss_mb"] >= 150
    assert r["tree_rss_mb"] >= 300 and r["peak_rss_mb"] == max(r["maxrss_mb"], r["tree_rss_mb"])
