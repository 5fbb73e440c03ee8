"""Memory bounded by what a summary carries: a packed graph that inflates past :data:`GRAPH_RATIO` times its file,
and a graph and transfers past the command's memory limit (``--max-bytes``, shared by the workers), are one line
naming the file, and the summaries beside it are still reported. The good summaries are a SYNTHETIC job
(scripts/synth_job.py); the hostile graphs are zeros (they deflate about 1000:1), generated here without allocating
what they inflate to."""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from conftest import starts_with_window
from typer.testing import CliRunner

from traceprobe.analysis.job.graph_tables import PER_OP
from traceprobe.cli import app

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import synth_job  # noqa: E402  # pyright: ignore[reportMissingImports]
import synth_trace as st  # noqa: E402  # pyright: ignore[reportMissingImports]


def zeros_blob(ops: int) -> str:
    """A packed graph's blob whose per-op arrays hold ``ops`` int64 zeros each (13 x 8 x ``ops`` bytes inflated),
    deflated a MiB at a time (never held whole)."""
    buf = io.BytesIO()
    chunk = bytes(1 << 20)
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name in PER_OP:
            with z.open(f"{name}.npy", "w", force_zip64=True) as f:
                np.lib.format.write_array_header_1_0(f, {"descr": "<i8", "fortran_order": False, "shape": (ops,)})
                left = 8 * ops
                while left:
                    f.write(chunk[:min(left, len(chunk))])
                    left -= min(left, len(chunk))
    return base64.b64encode(buf.getvalue()).decode("ascii")


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("good")
    synth_job.write_summaries(st.Config(events=2000, seed=3), 4, folder)
    return folder


def _folder(good: Path, tmp: Path, spoil) -> Path:
    """The good summaries with rank 0's spoiled by ``spoil(doc)``."""
    for p in good.iterdir():
        doc = json.loads(p.read_text())
        if doc["rank"] == 0:
            spoil(doc)
        (tmp / p.name).write_text(json.dumps(doc))
    return tmp


def _set_blob(blob: str):
    def spoil(doc: dict) -> None:
        doc["tables"]["graph"]["data"][0][0] = blob
    return spoil


def _set_p2p(value: str, rows: int = 1):
    def spoil(doc: dict) -> None:
        t = doc["tables"]["collectives"]
        for i in range(min(rows, len(t["data"][0]))):
            t["data"][t["columns"].index("p2p")][i] = value
    return spoil


def test_a_graph_blob_of_zeros_is_refused_beside_good_summaries(good, tmp_path):
    """10^5 ops of zeros: 10 MB inflated from a 42 KB file (245x its size, past 64x): one line, three ranks reported."""
    folder = _folder(good, tmp_path, _set_blob(zeros_blob(100_000)))
    res = CliRunner().invoke(app, ["overlap-report", str(folder), "--format", "json"])
    assert res.exit_code == 2
    bad = folder / "rank0.summary.json"
    assert res.stderr.splitlines() == [f"{bad}: traceprobe summary whose graph inflates to {13 * (8 * 100_000 + 128):,} bytes, more than 64x its "
                                       f"file's {bad.stat().st_size:,} (a real summary's graph: at most about 12x): refused"]
    assert sorted(r["rank"] for r in json.loads(res.stdout)["traces"]) == [1, 2, 3]


def test_transfers_count_against_the_commands_memory_limit(good, tmp_path):
    """A ``p2p`` cell naming 200,000 transfers (98 MiB counted at 512 bytes each) under a 64 MiB ``--max-bytes``:
    one line saying which limit; the other ranks reported."""
    folder = _folder(good, tmp_path, _set_p2p(";".join(["send:1"] * 200_000)))
    res = CliRunner().invoke(app, ["overlap-report", str(folder), "--format", "json", "--max-bytes", str(64 << 20), "-j", "1"])
    assert res.exit_code == 2
    (line,) = res.stderr.splitlines()
    assert line.startswith(f"{folder / 'rank0.summary.json'}: too large: its graph (") and "and 200,000 point-to-point transfers take about" in line
    assert "(the max_bytes limit (--max-bytes), shared by every file read at once; --max-bytes sets it)" in line
    assert sorted(r["rank"] for r in json.loads(res.stdout)["traces"]) == [1, 2, 3]


def _peak(args: list[str]) -> tuple[int, int, float, str]:
    """Run the command in a child; its exit status, peak resident memory (bytes, ``getrusage``), seconds and stderr."""
    code = ("import resource, subprocess, sys, time\n"
            "t = time.perf_counter()\n"
            "p = subprocess.run([sys.executable, '-m', 'traceprobe', *sys.argv[1:]], capture_output=True, text=True)\n"
            "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, time.perf_counter() - t)\n"
            "sys.stderr.write(p.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT, check=True, timeout=900)
    rc, peak, took = done.stdout.split()
    return int(rc), int(peak), float(took), done.stderr


@pytest.mark.slow
def test_a_1e7_op_graph_blob_beside_four_good_summaries(good, tmp_path):
    """Issue 56's case: 10^7 device ops of zeros (1.04 GB inflated, under the 1 GiB a blob may take, from a file of
    about 1.3 MB), beside the four good ranks: one line, the others reported, peak memory far from the 2.5 GB it took."""
    folder = _folder(good, tmp_path, _set_blob(zeros_blob(10_000_000)))
    for p in good.iterdir():  # (four good ranks beside it)
        doc = json.loads(p.read_text())
        doc["rank"] += 4
        (folder / f"good{doc['rank']}.summary.json").write_text(json.dumps(doc))
    rc, peak, took, err = _peak(["overlap-report", str(folder)])
    assert rc == 2 and len(err.splitlines()) == 1 and "rank0.summary.json" in err and f"inflates to {13 * (8 * 10**7 + 128):,} bytes" in err
    assert peak < 600 << 20, f"peak {peak / 2**20:.0f} MiB in {took:.1f} s"


@pytest.mark.slow
def test_a_p2p_column_of_27_million_transfers(good, tmp_path):
    """Issue 56's case: ``"send:1;" x 600,000`` in 45 rows (189 MB, under the 256 MiB a summary may hold; 8 GB before):
    refused against the default limit in one line, peak memory about the JSON's."""
    folder = _folder(good, tmp_path, _set_p2p("send:1;" * 600_000, rows=45))
    rc, peak, took, err = _peak(["overlap-report", str(folder)])
    assert rc == 2 and len(err.splitlines()) == 1 and "point-to-point transfers take about" in err, err
    assert peak < 2 << 30, f"peak {peak / 2**20:.0f} MiB in {took:.1f} s"


def test_job_from_summaries_counts_transfers_against_its_limit(good, tmp_path):
    """``job`` on summaries alone (its collectives decoded without the rest): the same 200,000 transfers under a 64 MiB
    ``--max-bytes`` are one line; the window of the three other ranks is reported."""
    folder = _folder(good, tmp_path, _set_p2p(";".join(["send:1"] * 200_000)))
    res = CliRunner().invoke(app, ["job", str(folder), "--max-bytes", str(64 << 20)])
    assert res.exit_code == 2
    assert res.stderr.splitlines() == [f"{folder / 'rank0.summary.json'}: too large: its 200,000 point-to-point transfers take "
                                       "about 98 MiB of memory while the other files read at once held 0 MiB of the command's 64 MiB "
                                       "(the max_bytes limit (--max-bytes), shared by every file read at once; --max-bytes sets it)"]
    assert starts_with_window(res.stdout, folder, "steps 1-10: 3 ranks ")  # (its header wrapped at 80 columns)
