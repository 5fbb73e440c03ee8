"""The first screen: one block per window of a run, its ranks collapsed; printed as each run is analysed, piped or on a
terminal; fitted to 80 and 120 columns (real sample traces: a few folders; the whole sample folder at 80 columns, the
README's set-up command, is tests/test_newcomer.py's)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from traceprobe.cli import app
from traceprobe.collect import analyze_paths
from traceprobe.report.first_screen import BLOCKS, LINES, FirstScreenRenderer, mode
from traceprobe.report.json_document import to_json

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
REPO = SAMPLES.parent
FEW = [SAMPLES / "causes" / "ddp-compute", SAMPLES / "causes" / "slow-input", SAMPLES / "script-ddp",
       SAMPLES / "compute-copy.nonblocking.pt.trace.json.gz"]
"""A 2-rank window whose rank 1 runs extra work, a one-GPU window that waits for its input, a 2-rank window of a
recorded script, and a trace without steps (3 s of CPU)."""


@pytest.fixture(scope="module")
def few():
    return analyze_paths(FEW, jobs=1)


def test_a_window_is_one_block_with_its_ranks_collapsed(few):
    """Per window: its ranks as a range, the straggler and busiest ranks named, its top claim and do line; one trace's
    window gives its figures with their level in words; the folder's counts, then the legend."""
    text = FirstScreenRenderer(width=None).render(few)
    assert text.startswith("6 traces: 4 runs, 4 windows (2 of 2 or more ranks)\n")
    block = text[text.index("causes/ddp-compute 2-4:"):].split("\n\n")[0].splitlines()
    assert block[0] == "causes/ddp-compute 2-4: 2 ranks, busy 99%, streams 61-97%, comm/compute 58-80%"
    assert block[1] == "  rank 1 extra device work -19.8 ms/step (-59.3 ms in 3 steps)"
    assert block[2] == "  do: balance the work across ranks (data, experts or stages)"
    assert "straggler rank 1 (extra device work)" in " ".join(block[3:]) and "most device work rank 1" in " ".join(block[3:])
    one = text[text.index("compute-copy.nonblocking:"):].split("\n\n")[0].splitlines()
    assert one[0].startswith("compute-copy.nonblocking: busy 100%, copy/compute 0% no")
    assert one[1] == "  exposed DtoH copy -58.0 ms in the trace"  # (a span finding signed as the what-ifs are)
    assert text.count("script-ddp/train_small 2-4: 2 ranks") == 1
    assert "trace.17" not in text and "busy: mean GPU utilization" in "\n".join(text.splitlines()[-8:])


def test_ranks_gives_every_ranks_row():
    res = CliRunner().invoke(app, ["overlap-report", str(SAMPLES / "causes" / "ddp-compute"), "--ranks", "-j", "1"],
                             env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    rows = [x.split() for x in res.stdout.splitlines() if re.match(r" {4,}\d +\d+%", x)]
    assert [r[:2] for r in rows] == [["0", "99%"], ["1", "99%"]]
    assert "    rank busy streams comm" in res.stdout


@pytest.mark.parametrize("width", [80, 120, None])
def test_every_line_fits_and_names_are_whole_where_they_fit(few, width):
    """No line wider than the width (piped: :data:`PIPE_WIDTH`, 80); a window's name is cut (in the middle) only where
    it is longer than the line; every claim's words are there whole."""
    lines = FirstScreenRenderer(width=width).render(few).splitlines()
    assert max(len(x) for x in lines) <= (width or 80)
    text = "\n".join(lines)
    for name in ("causes/ddp-compute 2-4", "causes/slow-input 2-4", "script-ddp/train_small 2-4", "compute-copy.nonblocking"):
        assert name in text, name
    assert "…" not in re.sub(r"critical path: .*?(?=\n\S|\n\n|$)", "", text, flags=re.S)  # (kernel names: the path's own)
    joined = " ".join(text.split())
    for claim in ("rank 1 extra device work -19.8 ms/step (-59.3 ms in 3 steps)", "data loading -20.9 ms/step (-62.8 ms in 3 steps)"):
        assert claim in joined, claim


def test_the_lines_of_a_large_folder_are_one_per_window_or_folder():
    assert mode(BLOCKS) == "blocks" and mode(BLOCKS + 1) == "lines" and mode(LINES + 1) == "groups" and mode(500, every=True) == "blocks"


def test_parts_merged_are_the_summary_of_every_report():
    """The runs summarised one by one as they are analysed (``on_part``), merged: the same JSON document as one summary
    of every report (no window replayed twice); the parts in the first screen's order."""
    paths = [SAMPLES / "causes" / "ddp-compute", SAMPLES / "causes" / "prefetch-off", SAMPLES / "script-ddp"]
    parts = []
    merged = analyze_paths(paths, jobs=1, on_part=parts.append)
    assert [r.name for p in parts for r in p.runs] == [r.name for r in merged.runs]
    assert len(parts) == 3 and to_json(merged) == to_json(analyze_paths(paths, jobs=1))


def test_runs_are_summarised_as_they_come_back_from_workers_unasked(monkeypatch):
    """Without ``on_part``, where workers analyse several files, each run is summarised as its traces come back (the
    workers meanwhile on the others) and the parts merged: the same JSON document as one process's one summary; with
    ``jobs`` 1, one summary at the end."""
    from traceprobe.collect import parts as parts_module

    made = []

    class Counted(parts_module.Parts):
        def __init__(self, *args, **kw):
            made.append(1)
            super().__init__(*args, **kw)

    monkeypatch.setattr(parts_module, "Parts", Counted)
    paths = [SAMPLES / "causes" / "ddp-compute", SAMPLES / "causes" / "prefetch-off", SAMPLES / "script-ddp"]
    alone = analyze_paths(paths, jobs=1)
    assert made == []
    assert to_json(analyze_paths(paths, jobs=2)) == to_json(alone) and made == [1]


def _stream(paths, console=None, writes=None):
    from traceprobe.cli import stream as st

    out = st.Stream(80, console)
    done = []
    if writes is not None:  # (what was written, and how many parts were in by then)
        original = st.write_stdout
        st.write_stdout = lambda data: writes.append((len(done), data))
    try:
        def part(p):
            done.append(p)
            out.part(p)
        with out:
            summary = analyze_paths(paths, jobs=1, on_files=out.files, on_done=out.one_done, on_part=part)
        out.end(summary)
    finally:
        if writes is not None:
            st.write_stdout = original
    return summary


def test_piped_lines_come_as_each_run_is_analysed():
    """On a pipe each window's block is written as soon as its run is analysed, in a stable order; the folder summary
    and the legend come last."""
    writes: list = []
    summary = _stream([SAMPLES / "causes" / "ddp-compute", SAMPLES / "causes" / "slow-input", SAMPLES / "causes" / "startup"],
                      writes=writes)
    assert [n for n, _ in writes] == [1, 2, 3, 3]  # a write per run as it came, then the end
    assert writes[0][1].startswith("ddp-compute 2-4: 2 ranks") and writes[1][1].startswith("slow-input 2-4: busy 61%")
    assert writes[2][1].startswith("startup: busy 3%")
    end = writes[3][1]
    assert "4 traces: 3 runs, 3 windows (1 of 2 or more ranks)" in end and end.rstrip().endswith("under 'what would give time\n  back')")
    whole = FirstScreenRenderer(width=80).render(summary).splitlines()
    assert sorted(x for x in "".join(d for _, d in writes).splitlines() if x) == sorted(x for x in whole if x)


def test_on_a_terminal_the_summary_is_repainted_in_place():
    """On a terminal (rich Console, force_terminal) a live region under the lines says how far the analysis is and
    gives the causes so far, repainted in place (cursor moves up, lines erased); at the end it gives way to the
    folder summary."""
    from rich.console import Console

    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=80, color_system="standard")
    _stream([SAMPLES / "causes" / "ddp-compute", SAMPLES / "causes" / "slow-input"], console=console)
    raw = buf.getvalue()
    assert "traces analysed" in raw and "\x1b[2K" in raw and ("\x1b[1A" in raw or "\x1b[A" in raw)  # (the live region repainted)
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", raw)
    assert "ddp-compute 2-4: 2 ranks, busy 99%" in plain and "slow-input 2-4: busy 61%" in plain
    tail = plain[plain.rindex("slow-input 2-4"):]
    assert "3 traces: 2 runs, 2 windows" in tail and "traces analysed" not in tail[tail.index("3 traces"):]
