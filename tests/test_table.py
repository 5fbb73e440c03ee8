"""The default table: one row per trace, runs after, on one screen (real sample traces)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from traceprobe.collect import analyze_paths
from traceprobe.report import panels, table

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"


@pytest.fixture(scope="module")
def summary():
    return analyze_paths([SAMPLES], jobs=2)


def _render(render, summary, width: int) -> list[str]:
    buf = io.StringIO()
    render(Console(file=buf, width=width, no_color=True), summary)
    return buf.getvalue().splitlines()


@pytest.mark.parametrize("width", [100, 120])
def test_summary_fits_one_screen(summary, width):
    lines = _render(table.render, summary, width)
    assert len(summary.reports) >= 40 and len(lines) < 80
    assert max(len(line.rstrip()) for line in lines) <= width
    rows = [line for line in lines[1:] if line[:1] != " " and line.strip()]  # each run's first row starts a line
    assert sum(1 for r in summary.runs) <= len(rows)
    text = "\n".join(lines)
    assert "compute-copy.overlapped" in text and "98% yes" in text and "training/tb-ddp" in text
    # tb-ddp: rank 0 ran the most work outside collectives (59 vs 53 ms) and the most collective time (84 vs 8 ms)
    assert "across ranks" in text and "work/comm" in text and " 0/0 " in text


def test_one_row_per_trace(summary):
    trace_rows = _render(table.render, summary, 120)
    first_blank = trace_rows.index(next(line for line in trace_rows if not line.strip()))
    assert first_blank - 1 == len(summary.reports)  # header, then one row per trace


def test_detail_keeps_the_panels(summary):
    lines = _render(panels.render, summary, 120)
    assert len(lines) > 500 and any("parallelism confirmed" in line for line in lines)


def test_readme_quotes_the_table_as_printed(summary):
    """The README's two excerpts of `COLUMNS=120 traceprobe overlap-report sample_traces/` are the table as rendered now
    (its first rows, and the runs across ranks to the end), and it says how many lines the table has."""
    lines = [line.rstrip() for line in _render(table.render, summary, 120)]
    readme = (SAMPLES.parent / "README.md").read_text()
    start = readme.index("`COLUMNS=120 traceprobe overlap-report sample_traces/` prints")
    blocks = readme[start:].split("```")
    begins, ends = blocks[1].strip("\n").splitlines(), blocks[3].strip("\n").splitlines()
    assert f"prints {len(lines)} lines for the {len(summary.reports)}" in readme[start:start + 120].replace("\n", " ")
    assert begins[-1] == "..." and begins[:-1] == lines[: len(begins) - 1]
    assert ends == lines[lines.index("across ranks"):]
