"""Pictures: valid PNGs of sensible size, from the sample traces and a large SYNTHETIC trace."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from synthetic import TraceBuilder
from typer.testing import CliRunner

from traceprobe import load_trace, overlap_report
from traceprobe.analysis.picture import timeline_lanes
from traceprobe.cli import app
from traceprobe.collect import manifest_info
from traceprobe.report import plot

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
SAMPLE_FILES = sorted(SAMPLES.glob("*.pt.trace.json.gz"))
runner = CliRunner()


def items(paths) -> list[plot.Item]:
    """Load and analyse each trace (manifest facts attached), and what its picture draws, as the CLI does."""
    out = []
    for p in paths:
        trace = load_trace(p)
        report = overlap_report(trace, manifest_info(Path(p)))
        out.append(plot.item_of(report, timeline_lanes(trace, report)))
    return out


def png_size(path: Path | bytes) -> tuple[int, int]:
    """(width, height) of a PNG, after checking its signature and IHDR chunk."""
    data = path if isinstance(path, bytes) else Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR" and data[-8:-4] == b"IEND"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_sample_timelines(tmp_path):
    res = runner.invoke(app, ["plot", str(SAMPLES), "--output", str(tmp_path / "t.png"), "--jobs", "2"])
    assert res.exit_code == 0, res.output
    written = sorted(tmp_path.glob("t.*.png"))
    names = {w.name for w in written}
    assert "t.compute-copy.nonblocking.png" in names and "t.data-parallel.ddp.rank1.png" in names  # names from the manifest
    assert "t.compute-copy.nonblocking.2.png" in names  # the H100 recording of the same variant is not overwritten
    assert len(written) == len(res.stderr.splitlines()) >= len(SAMPLE_FILES)
    for w in written:
        width, height = png_size(w)
        assert 1000 <= width <= 2000 and 150 <= height <= 1200
        assert w.stat().st_size > 10_000  # not blank


def test_compare_compute_copy(tmp_path):
    res = runner.invoke(app, ["plot", *map(str, sorted(SAMPLES.glob("compute-copy.*.gz"))), "--compare", "--output", str(tmp_path / "c.png")])
    assert res.exit_code == 0, res.output
    width, height = png_size(tmp_path / "c.png")
    assert 1000 <= width <= 2000 and 400 <= height <= 1500


def test_overlap_report_plot(tmp_path):
    f = SAMPLES / "multi-gpu.concurrent.pt.trace.json.gz"
    res = runner.invoke(app, ["overlap-report", str(f), "--format", "json", "--plot", str(tmp_path / "r.png")])
    assert res.exit_code == 0, res.output
    assert png_size(tmp_path / "r.png")[0] > 1000
    plain = runner.invoke(app, ["overlap-report", str(f), "--format", "json"])
    assert res.stdout == plain.stdout  # the picture and the JSON report are both made where the trace was analysed


def test_overlap_report_plots_and_json_of_several_traces_in_workers(tmp_path):
    files = [str(f) for f in sorted(SAMPLES.glob("compute-copy.*.gz"))]
    res = runner.invoke(app, ["overlap-report", *files, "--jobs", "2", "--format", "json", "--plot", str(tmp_path / "r.png")])
    assert res.exit_code == 0, res.output
    assert len(list(tmp_path.glob("r.*.png"))) == len(files) > 1
    assert res.stdout == runner.invoke(app, ["overlap-report", *files, "--jobs", "1", "--format", "json"]).stdout


def test_eight_devices_thirty_streams(tmp_path):
    """SYNTHETIC: 8 devices x 30 streams of kernels, copies, NCCL and memsets: one lane each."""
    rng = np.random.default_rng(0)
    b = TraceBuilder("8 devices x 30 streams", devices=8)
    for d in range(8):
        for s in range(30):
            t = int(rng.integers(0, 5_000))
            for _ in range(8):
                dur = int(rng.integers(1_000, 20_000))
                [b.kernel, b.memcpy, b.nccl, b.memset][s % 4](d, 7 + s, t, dur)
                t += dur + int(rng.integers(100, 10_000))
    width, height = png_size(plot.timeline(items([b.write(tmp_path / "big.json")])[0]))
    # 240 lanes plus the verdicts: tall enough for one readable label per lane, not absurd
    assert height >= 240 * 0.11 * plot.DPI and height <= 6000 and width == int(plot.WIDTH_IN * plot.DPI)


def test_no_device_events(tmp_path):
    b = TraceBuilder("host only")
    b.cpu_op(0, 1000)
    assert png_size(plot.timeline(items([b.write(tmp_path / "h.json")])[0]))[1] > 100


def test_plot_bad_file_exits_2_others_drawn(tmp_path):
    (tmp_path / "bad.json").write_text("{not json")
    good = SAMPLES / "multi-gpu.concurrent.pt.trace.json.gz"
    res = runner.invoke(app, ["plot", str(tmp_path / "bad.json"), str(good), "--output", str(tmp_path / "x.png"), "--jobs", "1"])
    assert res.exit_code == 2 and "not valid JSON" in " ".join(res.output.split())
    assert png_size(tmp_path / "x.png")[0] > 1000  # the one trace drawn


@pytest.mark.parametrize("labels,expect", [(["a"], ["out.png"]), (["a", "b"], ["out.a.png", "out.b.png"]),
                                           (["a", "a", "b", "a"], ["out.a.png", "out.a.2.png", "out.b.png", "out.a.3.png"])])
def test_per_trace_paths(labels, expect):
    assert [p.name for p in plot.per_trace_paths("/x/out.png", labels)] == expect
