"""The per-trace table (one row per trace, runs after: :mod:`traceprobe.report.table`, whose columns ``--ranks`` shows
under each window); fitted to a terminal's width without cutting a word (real sample traces). The first screen
the command prints is tested in tests/test_windows_screen.py."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from traceprobe.cli import app
from traceprobe.collect import analyze_paths
from traceprobe.report.actions import top_findings
from traceprobe.report.grid import shorten, wrap
from traceprobe.report.panels import DetailRenderer
from traceprobe.report.renderers import FORMATS, Renderer, renderer
from traceprobe.report.table import TableRenderer

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
REPO = SAMPLES.parent
sys.path.insert(0, str(REPO / "scripts"))
import readme  # noqa: E402  # pyright: ignore[reportMissingImports]  - scripts/readme.py: the README's quoted figures, written from the tool

WHOLE = readme.WHOLE
"""scripts/readme.py's: folders with tables and tests of their own (sample_traces/matrix: test_what_if.py; the held-out
runs of tests/data/heldout: test_heldout.py), left out of the table's summary: every other sample, 96 traces, 10 s of
CPU instead of 30 (the matrix's rows come after the rows the README quotes; the whole folder's table is checked under
slow)."""


@pytest.fixture(scope="module")
def summary():
    """Every sample but those of :data:`WHOLE`, analysed in this process."""
    return analyze_paths([p for p in sorted(SAMPLES.iterdir()) if p.name not in WHOLE and (p.is_dir() or p.name.endswith(".json.gz"))],
                         jobs=1)


def _lines(summary, width: int | None) -> list[str]:
    return TableRenderer(width=width).render(summary).splitlines()


NOTE = re.compile(r"^ +(↳ |do: )")


def _rows(lines: list[str]) -> list[str]:
    """The table's lines without the top findings and ``do`` lines under its rows."""
    return [x for x in lines if not NOTE.match(x)]


def _whole_words(text: str, lines: list[str]) -> bool:
    """Every word of ``text`` is on some line whole (nothing cut mid-word)."""
    joined = "\n".join(lines)
    return all(re.search(rf"(?<!\S){re.escape(w)}(?!\S)", joined) for w in text.split())


@pytest.mark.parametrize("width", [80, 100, 120, None])
def test_every_column_and_value_whole_at_each_width(summary, width):
    """At 80, 100 and 120 columns (and natural width) no line is wider than the width, every figure column is
    there, every top finding is printed whole with its unit, and every cell of the full-width table is too."""
    lines = _lines(summary, width)
    if width is not None:
        assert max(len(x) for x in lines) <= width
    header = lines[0].split()
    assert header[:4] == ["run", "rank", "steps", "busy"]
    assert len(header) >= 4 + 6  # the six figure columns (their short names where needed)
    tops = top_findings(summary)  # (a window's top what-if, else the report's own top finding)
    findings = [tops[id(r)].label for r in summary.reports if id(r) in tops]
    assert len(findings) > 20
    for f in findings:
        assert re.search(r"\d (ns|µs|ms|s)/step( from the 2nd step)? \([-+]?[\d,.]+ (ns|µs|ms|s) in \d+ steps?\)|\d (ns|µs|ms|s) in the trace|\d%", f), f
        assert _whole_words(f, lines), f
    for do in {t.do for t in tops.values()}:  # every action whole, at any width
        assert do and _whole_words(do, lines), do
    text = "\n".join(lines)
    for cut in ("… ", "% y\n", "% ye\n", "% so\n"):
        assert cut not in text + "\n"


@pytest.mark.parametrize("width", [80, 120, None])
def test_levels_read_in_black_and_white(summary, width):
    """Without colours every figure cell says its level: a letter at 80 columns (``37%s``), a word at 120 and piped
    (``37% some``); ``busy`` is no verdict and has none."""
    lines = _rows(_lines(summary, width))
    start = lines[0].index("busy") + len("busy")
    end = lines[0].index("top finding") if "top finding" in lines[0] else None
    rows = [x[start:end] for x in lines[1:lines.index("")] if x[start:end].strip()]
    assert len(rows) > 60
    level = r"\d+%[ysn]|-|n/a" if width and width < 120 else r"\d+% (yes|some|no|n/a)|-"
    for row in rows:
        cells = re.findall(level, row)
        assert len(cells) == 6 and re.sub(level, "", row).strip() == "", row


@pytest.mark.parametrize("width", [80, 120, None])
def test_run_names_whole_at_each_width(summary, width):
    """Every run's name starts a line of the table whole at 80 and 120 columns and piped: a name too long for its
    column goes on its own line above its row, never cut."""
    from traceprobe.report.places import _places

    text = "\n".join(_lines(summary, width))
    names = {run for _, run, _, _ in _places(summary)}
    assert len(names) > 40
    for name in names:
        assert re.search(rf"(?m)^{re.escape(name)}(\s|$)", text), name
    assert "…" not in "\n".join(x for x in text.splitlines()[:text.splitlines().index("")] if not NOTE.match(x))


def test_80_columns_keeps_run_names_and_levels(summary):
    lines = _lines(summary, 80)
    text = "\n".join(lines)
    assert "h100-1gpu/compute-copy.nonblocking" in text  # the whole name: the finding moved to its own line
    nonblocking = next(r for r in summary.reports if r.path.endswith("/compute-copy.nonblocking.pt.trace.json.gz"))
    top = top_findings(summary)[id(nonblocking)]
    assert "↳ " + top.label in text and top.label == "exposed DtoH copy -58.0 ms in the trace"
    assert "    do: " + top.do + "\n" in text and "side stream" in top.do
    assert "y yes >= 50%, s some >= 5%, n no < 5%" in text  # the level letters, explained by the legend
    assert "do: the one action" in text and "what would give time back" in text
    assert "training/rec-ddp/train_gpt_ddp" in text and "across ranks" in text


def test_one_row_per_trace_at_natural_width(summary):
    lines = _rows(_lines(summary, None))
    first_blank = lines.index("")
    assert first_blank - 1 == len(summary.reports)  # header, then one row per trace


def test_windows_of_one_run_are_told_apart(summary):
    """Two windows of one single-process run, with neither a workload nor a rank to name them (as a
    tensorboard handler writes them): each row shows its steps."""
    from dataclasses import replace

    from traceprobe.analysis.summary import summarize

    two = [replace(r, rank=None, info={}, path=r.path.replace(".rank0", "")) for r in summary.reports
           if "train_gpt_ddp" in r.path and "rank0" in r.path]
    lines = _rows(_lines(summarize(two), None))
    assert len(lines) >= 3
    assert re.search(r"steps2-4\S*\s+-\s+2-4\s", lines[1]) and re.search(r"steps7-9\S*\s+-\s+7-9\s", lines[2]), lines


def test_a_lone_unnamed_trace_is_labelled_by_its_folder(summary):
    """A trace with neither a workload nor a rank, alone in a folder below the one every trace shares, is labelled by
    that folder (tensorboard_trace_handler's file names are a worker and a time); beside another trace in its folder,
    or given alone (its folder is the shared one), by its file."""
    from dataclasses import replace

    from traceprobe.analysis.summary import summarize

    r = next(r for r in summary.reports if "causes/startup" in r.path)
    unnamed = replace(r, rank=None, info={})

    def labels(*paths: str) -> list[str]:
        return [line.split()[0] for line in _rows(_lines(summarize([replace(unnamed, path=p) for p in paths]), None))[1:len(paths) + 1]]

    assert labels("/x/a/trace.123.pt.trace.json.gz", "/x/b/trace.456.pt.trace.json.gz") == ["a", "b"]
    assert labels("/x/a/trace.123.pt.trace.json.gz", "/x/a/trace.456.pt.trace.json.gz") == ["trace.123", "trace.456"]
    assert labels("/x/a/trace.123.pt.trace.json.gz") == ["trace.123"]


def test_control_characters_are_escaped(summary):
    """A name from a trace cannot split a row or reach the terminal as an escape sequence."""
    from dataclasses import replace

    from traceprobe.analysis.summary import summarize

    r = next(r for r in summary.reports if len(r.findings))
    findings = r.findings.copy()
    findings["text"] = "kernel bad\x1b]0;title\x07 took it"
    findings["kind"] = "exposed_copy"  # (a span finding: a host-side one gives way to the replay's, .replayed)
    evil = replace(r, info={**r.info, "workload": "bad\nname\x1b[31m", "variant": "v"}, findings=findings,
                   notes=[*r.notes, "a note about kernel \x1b[2J"])
    s = summarize([evil])
    text = TableRenderer(width=80).render(s) + DetailRenderer(width=120).render(s)
    assert "\\x1b]0;title\\x07" in text and "\\x1b[2J" in text
    assert "\x1b" not in text and "bad\\nname\\x1b[31m" in text


def test_detail_keeps_the_panels_and_says_notes_once(summary):
    lines = DetailRenderer(width=120).render(summary).splitlines()
    assert len(lines) > 500 and any("parallelism confirmed" in line for line in lines)
    assert any("[yes]" in line for line in lines) and not any("[confirmed]" in line for line in lines)
    # set-aside work: one line per reason and trace, not one per kind of work
    assert not any("ms of memcpy on cuda:0" in line for line in lines)
    assert sum("launched before the trace began" in line for line in lines) < sum(len(r.notes) for r in summary.reports)


def test_shared_notes_are_one_line_listing_the_ranks(summary):
    """Two ranks of one window with the same note: the note is printed once, after their panels, with both ranks."""
    from dataclasses import replace

    from traceprobe.analysis.summary import summarize

    pair = [r for r in summary.reports if "data-parallel.ddp" in r.path and Path(r.path).parent == SAMPLES]  # (the 2x H200 pair)
    note = "the same thing happened on every rank"
    s = summarize([replace(r, notes=(*r.notes, note)) if isinstance(r.notes, tuple) else replace(r, notes=[*r.notes, note]) for r in pair])
    out = DetailRenderer(width=200).render(s)
    assert out.count(note) == 1
    assert re.search(r"ranks 0, 1 of .*: " + note, out)


def test_renderers_share_one_contract(summary):
    """Every format on the summary of a two-rank run (its across-ranks parts too) and the compute-copy traces."""
    from traceprobe.analysis.summary import summarize

    few = summarize([r for r in summary.reports if "causes/ddp-compute/" in r.path or "/compute-copy." in r.path])
    assert len(few.reports) >= 5 and few.causes
    for name in FORMATS:
        r = renderer(name)
        assert isinstance(r, Renderer) and r.name == name
        out = r.render(few)
        assert isinstance(out, (str, bytes)) and len(out) > 100


def test_columns_show_declared_figures(summary):
    """Each figure column of the table names a figure of the JSON document (report/figures.py) by its key, and
    the TSV carries every declared column, headed as the full table is."""
    from traceprobe.report.figures import TRACE
    from traceprobe.report.table import COLUMNS

    assert {c.figure for c in COLUMNS} <= {f.key for f in TRACE}
    head = renderer("tsv").render(summary).splitlines()[0].split("\t")
    assert head[4:] == [*(c.header for c in COLUMNS), "do"]


def test_tsv_is_one_line_per_trace(summary):
    text = renderer("tsv").render(summary)
    assert isinstance(text, str)
    out = text.splitlines()
    assert len(out) == 1 + len(summary.reports)
    assert all(len(x.split("\t")) == len(out[0].split("\t")) for x in out)
    dos = [x.split("\t")[-1] for x in out[1:]]  # (the do column: the action of each row's top finding)
    assert "load in DataLoader workers (num_workers>0, pin_memory=True)" in dos and sum(bool(d) for d in dos) > 20


def test_no_legend_when_nothing_was_read(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    res = CliRunner().invoke(app, ["overlap-report", str(bad)])
    assert res.exit_code == 2
    assert "figures:" not in res.stdout and res.stdout.strip() == ""


def test_shorten_keeps_the_end_and_wrap_keeps_units():
    assert shorten("resnet_prefetch_torch/train.steps7-9", 20).endswith("steps7-9")
    assert len(shorten("resnet_prefetch_torch/train.steps7-9", 20)) == 20
    assert shorten("short", 20) == "short"
    assert wrap("wait for rank 1: +12 ms compute", 10) == ["wait for", "rank 1:", "+12 ms", "compute"]
    assert wrap("exposed copy 1,916.6 ms", 12) == ["exposed copy", "1,916.6 ms"]




def test_readme_figures_are_the_tools(summary):
    """Every figure README.md and sample_traces/README.md quote of the sample traces (what they show, the causes'
    scenarios, the stopwatch, the manifests, stream-wait/, sync-log/ and efficiency/: each table, finding and sentence
    read off this summary, :func:`readme.of_samples`) is written from the tool's own reports by scripts/readme.py,
    between ``<!-- figures: NAME -->`` and ``<!-- end -->`` (``TRACEPROBE_UPDATE_GOLDEN=1`` rewrites them, as it
    rewrites the golden outputs); each verdict's words are checked against its level there. The tables and findings of
    matrix/ and heldout/ (``table FOLDER``, ``fixes FOLDER``, ``finding FOLDER``) are tests/test_readme.py's, slow."""
    for path in readme.DOCS:
        text, stale = readme.rewrite(path, lambda p: readme.figures(p.spec, summary) if p.kind == "figures" and readme.of_samples(p.spec)
                                     else p.text)
        if os.environ.get("TRACEPROBE_UPDATE_GOLDEN") and stale:
            path.write_text(text)
            stale = []
        assert not stale and any(p.kind == "figures" for p in readme.parts(text)), stale


def test_host_only_traces_say_so_and_skip_the_stopwatch(summary):
    """Traces recorded without a GPU: one line says only host threads are judged; no stopwatch of GPU variants."""
    from traceprobe.analysis.summary import summarize

    cpu = summarize([r for r in summary.reports if r.streams.empty])
    assert len(cpu.reports) >= 2
    text = TableRenderer().render(cpu)
    assert "only host-thread concurrency is judged" in text and "stopwatch" not in text
    assert "only host-thread" not in TableRenderer().render(summary)


def _launched_not_recorded(tmp_path: Path, *, drop: bool = True) -> Path:
    """SYNTHETIC: a trace on one GPU (in ``deviceProperties``) whose 2 steps launch 3 kernels and a copy each
    (``cudaLaunchKernel``, ``cudaMemcpyAsync``, cat ``cuda_runtime``, with their ``ac2g`` flows); ``drop``: its
    kernel and memcpy records left out, as a profiler without its device activity writes it."""
    from synthetic import TraceBuilder

    b = TraceBuilder("launches recorded, device activity not")
    for n in range(2):
        t0 = n * 1_000_000
        b.step(n + 1, t0, 1_000_000)
        for i in range(3):
            b.cpu_op(t0 + i * 100_000, 50_000, "aten::mm")
            b.launch(t0 + i * 100_000 + 10_000, "kernel", 0, 7, t0 + i * 100_000 + 20_000, 60_000)
        b.cpu_op(t0 + 500_000, 50_000, "aten::copy_")
        b.launch(t0 + 510_000, "memcpy", 0, 7, t0 + 520_000, 30_000)
    for e in [e for e in b.events if e["cat"] == "cuda_runtime"]:
        b.raw({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": e["args"]["correlation"], "pid": e["pid"], "tid": e["tid"],
               "ts": e["ts"]})
    if drop:
        b.events = [e for e in b.events if e["cat"] not in ("kernel", "gpu_memcpy", "gpu_memset")]
    return b.write(tmp_path / f"{'no-device' if drop else 'device'}.pt.trace.json")


def test_launches_without_device_activity_say_it_was_not_recorded(tmp_path):
    """SYNTHETIC (:func:`_launched_not_recorded`): a trace whose host launched device work (launch calls, ac2g flows,
    a GPU in deviceProperties) but holds no kernel or copy was not recorded without a GPU: the profiler left out its
    device activity. The first screen and the trace's note say so and what to add; a CPU-only recording (no launch
    call) keeps its words; the same trace with its device activity has no such note."""
    from traceprobe import load_trace, overlap_report
    from traceprobe.analysis.summary import summarize

    r = overlap_report(load_trace(_launched_not_recorded(tmp_path)))
    assert r.streams.empty
    assert r.notes[0] == ("device activity not recorded: add ProfilerActivity.CUDA (8 launch calls, no kernel, copy or set; "
                          "1 GPU in deviceProperties)")
    text = TableRenderer().render(summarize([r]))
    assert ("device activity not recorded: add ProfilerActivity.CUDA: only host-thread concurrency is judged, the device "
            "figures read '-'") in text
    assert "recorded without a GPU" not in text
    assert "device activity not recorded: add ProfilerActivity.CUDA (8 launch calls" in DetailRenderer(width=200).render(summarize([r]))
    cpu = overlap_report(load_trace(SAMPLES / "small-ops.cpu-serial.pt.trace.json.gz"))
    assert not any(n.startswith("device activity") for n in cpu.notes)
    cpu_text = TableRenderer().render(summarize([cpu]))
    assert "no device work in these traces (recorded without a GPU?)" in cpu_text and "not recorded" not in cpu_text
    assert "device activity not recorded in 1 of 2 traces: add ProfilerActivity.CUDA" in TableRenderer().render(summarize([r, cpu]))
    full = overlap_report(load_trace(_launched_not_recorded(tmp_path, drop=False)))
    assert not full.streams.empty and not any(n.startswith("device activity") for n in full.notes)


def test_ddp_bucket_copies_read_the_same_in_the_table_and_the_detail(summary):
    """The real DDP pair: its DtoD copies are the wrapper's bucket copies; the table cell and the --detail verdict
    both say n/a (not judged, no failure colour); the figure itself is kept."""
    from traceprobe.analysis.summary import summarize

    pair = summarize([r for r in summary.reports if "data-parallel.ddp" in r.path and Path(r.path).parent == SAMPLES])
    for r in pair.reports:
        (v,) = [v for v in r.verdicts if v.figure == "copy_overlap"]
        assert v.level == "n/a" and v.subject.endswith("DtoD") and "gradient_as_bucket_view" in v.text
        assert float(r.copy_overlap["fraction"].iloc[0]) == v.value < 0.05  # no overlap, yet nothing to move
    rows = [x for x in TableRenderer().render(pair).splitlines() if re.match(r"\S*\s+[01] 2-4 ", x)]
    assert len(rows) == 2 and all(re.search(r" 0% n/a ", x) and " no " not in x for x in rows)
    assert "n/a: copies not meant to overlap" in TableRenderer().render(pair)
    narrow = TableRenderer(width=80).render(pair)
    assert re.search(r"\s1 2-4\s+\S+\s+(0% )?n/a\s", narrow)  # (levels in words where they fit, as here)
    colored = TableRenderer(color=True).render(pair)
    assert "\x1b[31m0% n/a" not in colored and "\x1b[2m0% n/a" in colored  # dim, not red
    detail = DetailRenderer(width=200).render(pair)
    assert detail.count("[n/a] DtoD copies") == 2 and "[no] DtoD" not in detail
