"""Pictures: valid PNGs of sensible size, from the sample traces and a large SYNTHETIC trace."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
from synthetic import TraceBuilder
from typer.testing import CliRunner

from traceprobe import load_trace, overlap_report
from traceprobe.analysis.device.picture import timeline_lanes
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


def _timelines(folder: Path, out: Path, *, least: int) -> None:
    """``plot FOLDER``: one picture per trace, named from the manifest, none overwritten, each a sensible PNG."""
    res = runner.invoke(app, ["plot", str(folder), "--output", str(out / "t.png"), "--jobs", "2"])
    assert res.exit_code == 0, res.output
    written = sorted(out.glob("t.*.png"))
    names = {w.name for w in written}
    assert "t.compute-copy.nonblocking.png" in names and "t.data-parallel.ddp.rank1.png" in names  # names from the manifest
    assert "t.compute-copy.nonblocking.2.png" in names  # the H100 recording of the same variant is not overwritten
    assert len(written) == len(res.stderr.splitlines()) >= least
    for w in written:
        width, height = png_size(w)
        assert 1000 <= width <= 2000 and 150 <= height <= 1200
        assert w.stat().st_size > 10_000  # not blank


def test_sample_timelines_of_a_few(tmp_path):
    """The samples' folder layout on a few of them: two manifests' folders, the same variant recorded on two machines."""
    folder = tmp_path / "samples"
    picked = ["manifest.json", "compute-copy.nonblocking.pt.trace.json.gz", "data-parallel.ddp.rank1.pt.trace.json.gz",
              "h100-1gpu/manifest.json", "h100-1gpu/compute-copy.nonblocking.pt.trace.json.gz"]
    for rel in picked:
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(SAMPLES / rel, folder / rel)
    (tmp_path / "out").mkdir()
    _timelines(folder, tmp_path / "out", least=3)


DRAWN = ("*.pt.trace.json.gz", "manifest.json", "h100-1gpu/manifest.json", "h100-1gpu/compute-copy.*", "h200-4gpu/manifest.json",
         "h200-4gpu/multi-gpu.*", "h200-4gpu/data-parallel.*", "h200-4gpu/model-parallel.*", "training/tb-fsdp/*",
         "matrix/pp-compute/*", "causes/graph-capture/*", "efficiency/attention-flash/*")
"""The samples :func:`test_sample_timelines` draws: the folder's top (every textbook experiment, with its manifest)
and one folder of each other kind: four devices, two ranks of two windows, a pipeline of four ranks, CUDA graphs,
flash attention. Not all 560: a picture is 0.6 s of matplotlib's own drawing, 450 s of CI for every sample."""


@pytest.mark.slow
def test_sample_timelines(tmp_path):
    """The samples of :data:`DRAWN`, each drawn: names from the manifests, none overwritten, each a sensible PNG."""
    folder = tmp_path / "samples"
    picked = sorted({p for pattern in DRAWN for p in SAMPLES.glob(pattern)})
    for p in picked:
        (folder / p.relative_to(SAMPLES)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(p, folder / p.relative_to(SAMPLES))
    (tmp_path / "out").mkdir()
    _timelines(folder, tmp_path / "out", least=len(SAMPLE_FILES) + 12)


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


@pytest.mark.slow  # (7, 5, 3 and 3 s: property and size runs, in CI's slow run)
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


def _compare_ddp(clocks=None):
    """The recorded ddp-compute pair as ``plot --compare`` draws it: (figure, [(report, trace first event ns)])."""
    from dataclasses import replace

    from traceprobe.analysis.device.picture import shared_clock_groups
    from traceprobe.collect import analyze_paths
    from traceprobe.collect import timeline_lanes as then

    drawn: dict = {}
    summary = analyze_paths([SAMPLES / "causes/ddp-compute"], jobs=1, then=then, on_then=lambda r, lanes: drawn.__setitem__(r.path, lanes))
    if clocks is not None:
        summary = replace(summary, clocks=clocks(summary))
    groups = shared_clock_groups(summary, drawn)
    assert [[r.rank for r, _ in g] for g in groups] == [[0, 1]]  # one window, two ranks: one clock
    fig = plot.compare_figure([[plot.item_of(r, lanes) for r, lanes in g] for g in groups])
    firsts = [int(load_trace(r.path).device_events["start_ns"].min()) for r, _ in groups[0]]
    return fig, [(r, first) for (r, _), first in zip(groups[0], firsts)], summary


def _slices_x0(ax) -> float:
    """The leftmost x (ms) of the slices drawn on ``ax`` (the collections labelled by kind)."""
    return min(float(p.vertices[:, 0].min()) for c in ax.collections if c.get_label() in plot.CLASSES for p in c.get_paths())


def test_compare_puts_the_ranks_of_a_window_on_their_shared_clock():
    """plot --compare of the recorded DDP pair: both ranks from the window's earliest device event, rank 1's
    slices offset from rank 0's by exactly the difference of their timestamps (as recorded: the ranks share one
    host's clock), and each rank's step boundaries drawn where its report puts them on that axis."""
    fig, ranks, _ = _compare_ddp()
    axes = [ax for ax in fig.axes if ax.collections]
    assert len(axes) == 2
    t0 = min(r.window_ns[0] for r, _ in ranks)  # the earliest device event counted in the window
    (r0, first0), (r1, first1) = ranks
    x0, x1 = _slices_x0(axes[0]), _slices_x0(axes[1])
    assert x0 == pytest.approx((first0 - t0) / 1e6, abs=1e-9) and x1 == pytest.approx((first1 - t0) / 1e6, abs=1e-9)
    assert x1 - x0 == pytest.approx((first1 - first0) / 1e6, abs=1e-9) and first1 != first0
    for ax, (r, _) in zip(axes, ranks):
        assert ax.get_xlim()[0] == 0 and ax.get_xlim() == axes[0].get_xlim()  # one time axis
        steps = [(line.get_label(), float(line.get_xdata()[0])) for line in ax.lines if str(line.get_label()).startswith("step ")]
        want = [(f"step {int(s)}", (int(g) - t0) / 1e6) for s, g in zip(r.steps["step"], r.steps["gpu_start_ns"])]
        assert len(steps) == len(want) == 3
        assert all(a == b and x == pytest.approx(y, abs=1e-9) for (a, x), (b, y) in zip(steps, want))
    assert min(r.window_ns[0] for r, _ in ranks) - t0 == 0


def test_compare_applies_the_clock_offsets_where_they_differ():
    """SYNTHETIC clock estimate on the recorded pair: rank 1's clock 5 ms ahead. Its slices and steps move 5 ms
    earlier on the shared axis; rank 0's stay; the picture says which clock it drew on."""
    import pandas as pd

    from traceprobe.analysis.job.clocks import COLUMNS, ClockEstimate

    def ahead(summary):
        c = summary.clocks[0]
        ranks = pd.DataFrame([[0, 0, 0, 0.0, 0.0, 24, "reference"], [1, 5_000_000, 50_000, 0.0, 10.0, 24, "offset only"]], columns=COLUMNS)
        return (ClockEstimate(c.run, c.window, 0, c.mid_ns, ranks, supported=True, differ=True),)

    fig, ranks, _ = _compare_ddp()
    moved, ranks2, _ = _compare_ddp(ahead)
    a, b = [ax for ax in fig.axes if ax.collections], [ax for ax in moved.axes if ax.collections]
    t0, t0b = min(r.window_ns[0] for r, _ in ranks), min(r.window_ns[0] - (5_000_000 if r.rank == 1 else 0) for r, _ in ranks2)
    assert _slices_x0(b[0]) == pytest.approx(_slices_x0(a[0]) + (t0 - t0b) / 1e6, abs=1e-9)
    assert _slices_x0(b[1]) == pytest.approx(_slices_x0(a[1]) + (t0 - t0b) / 1e6 - 5.0, abs=1e-9)
    steps = [[float(line.get_xdata()[0]) for line in ax.lines if str(line.get_label()).startswith("step ")] for ax in (a[1], b[1])]
    assert steps[1] == pytest.approx([x + (t0 - t0b) / 1e6 - 5.0 for x in steps[0]], abs=1e-9)
    assert any("on rank 0's clock" in t.get_text() for t in moved.texts) and not any("on rank 0's clock" in t.get_text() for t in fig.texts)


def test_what_a_picture_draws_is_small_and_drawn_outside_the_worker(tmp_path):
    """What comes back from a worker is the lanes, not a picture: a SYNTHETIC trace of 100,000 kernels
    comes back as at most a few slices per pixel and lane, and draws to a PNG here."""
    import pickle

    b = TraceBuilder("100,000 short kernels on one stream")
    for i in range(100_000):
        b.kernel(0, 7, i * 2_000, 1_000)
    (it,) = items([b.write(tmp_path / "many.json")])
    assert len(it.lanes.slices) <= 4 * 1400 + 1 and len(pickle.dumps(it.lanes)) < 300_000
    assert png_size(plot.timeline(it))[0] == int(plot.WIDTH_IN * plot.DPI)


def test_compare_of_a_four_rank_window_overprints_no_text():
    """``plot --compare`` of the 4-rank DDP window (real, H200): every legend entry inside the figure, the legend over no
    title, no two texts of the figure drawn over each other (their extents, drawn); each rank's critical-path band in
    pieces. Before: the legend's second row lay over the first title and its last entry was cut."""
    from traceprobe.analysis.device.picture import shared_clock_groups
    from traceprobe.collect import analyze_paths, timeline_lanes
    from traceprobe.report import plot as pl

    drawn: dict = {}
    paths = [SAMPLES / "h200-4gpu" / f"data-parallel.ddp.rank{r}.pt.trace.json.gz" for r in range(4)]
    s = analyze_paths(paths, jobs=1, then=timeline_lanes, on_then=lambda r, lanes: drawn.__setitem__(r.path, lanes))
    groups = [pl.with_findings([pl.item_of(r, lanes) for r, lanes in g], s) for g in shared_clock_groups(s, drawn)]
    assert [len(g) for g in groups] == [4]
    fig = pl.compare_figure(groups)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # pyright: ignore[reportAttributeAccessIssue]
    texts = [t.get_window_extent(renderer) for t in fig.texts if t.get_text().strip()]
    (legend,) = fig.legends
    entries = [t.get_window_extent(renderer) for t in legend.get_texts()]
    assert len(entries) >= 7 and all(0 <= b.x0 and b.x1 <= fig.bbox.width for b in entries)
    box = legend.get_window_extent(renderer)
    assert not [t for t in texts if box.overlaps(t)]
    assert not [(a, b) for i, a in enumerate(texts) for b in texts[i + 1:] if a.overlaps(b)]
    assert sum(it.critical is not None for g in groups for it in g) >= 2


def test_a_rank_is_titled_by_its_folder_and_rank():
    from traceprobe.report.plot import title_of

    assert title_of("/x/ddp-compute/rank0.1795633968194565341.pt.trace.json.gz", {}, 0) == "ddp-compute rank 0"
    assert title_of("/x/a/data-parallel.ddp.rank1.pt.trace.json.gz", {"workload": "data-parallel", "variant": "ddp"}, 1) == \
        "data-parallel.ddp.rank1"
    assert title_of("/x/a/trace.123.pt.trace.json.gz", {}, None) == "trace.123"


def test_kernels_are_coloured_by_class():
    """sample_traces/efficiency/attention-slow and unfused-slow (real, H100, shapes recorded): each slice is drawn in
    its kernel class's colour (traceprobe.analysis.work.kernel_classes), the attention's backward as attention; the
    legend names every class drawn, whole, inside the figure, over no text, and no two texts overprint."""
    from matplotlib.colors import to_hex

    from traceprobe.analysis.device.picture import KINDS
    from traceprobe.analysis.work.kernel_classes import CLASSES, kernel_classes

    for name, want in (("attention-slow", {"attention", "elementwise"}), ("unfused-slow", {"gemm", "elementwise", "reduction"})):
        path = next((SAMPLES / "efficiency" / name).glob("*.json.gz"))
        (it,) = items([path])
        drawn = {KINDS[k] for k in it.lanes.slices["kind"].tolist()}
        assert KINDS == CLASSES and want <= drawn
        assert drawn == set(np.array(CLASSES)[np.unique(kernel_classes(load_trace(path)))])
        fig = plot.timeline_figure(it)
        fig.canvas.draw()
        ax = fig.axes[0]
        colours = {c.get_label(): to_hex(c.get_facecolor()[0]) for c in ax.collections if c.get_label() in plot.CLASSES}
        assert colours == {plot.CLASSES[KINDS.index(k)]: plot.COLORS[KINDS.index(k)] for k in drawn}
        renderer = fig.canvas.get_renderer()  # pyright: ignore[reportAttributeAccessIssue]
        (legend,) = fig.legends
        entries = [t.get_text() for t in legend.get_texts()]
        assert {plot.CLASSES[KINDS.index(k)] for k in drawn} <= set(entries)
        boxes = [t.get_window_extent(renderer) for t in legend.get_texts()]
        assert all(0 <= b.x0 and b.x1 <= fig.bbox.width for b in boxes)
        texts = [t.get_window_extent(renderer) for t in fig.texts if t.get_text().strip()]
        box = legend.get_window_extent(renderer)
        assert not [t for t in texts if box.overlaps(t)]
        assert not [(a, b) for i, a in enumerate(texts) for b in texts[i + 1:] if a.overlaps(b)]
