"""``traceprobe job`` fits its width: at 80 and 120 columns and piped (80), no line wider, every sentence wrapped under
its label with its words whole (the same words, in the same order, as each paragraph on one line), a rank never split
from its number, the straggler and the top what-if at the start of their lines. Real sample jobs (a 2-rank DDP pair, a
4-rank 2-D mesh, a 2-rank CPU-only job over gloo), a SYNTHETIC job of 64 ranks' summaries (scripts/synth_job.py:
made up, not recorded), and under slow every held-out folder of two or more ranks."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from conftest import HELDOUT
from typer.testing import CliRunner

from traceprobe.analysis.job.job import job_report
from traceprobe.cli import app
from traceprobe.collect import analyze_paths
from traceprobe.report.job_text import job_text

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"
sys.path.insert(0, str(ROOT / "scripts"))
import synth_job  # noqa: E402
import synth_trace as st  # noqa: E402

JOBS = [SAMPLES / "causes" / "ddp-compute", SAMPLES / "matrix" / "mesh-compute", ROOT / "tests" / "data" / "gloo-ddp"]
HELD_JOBS = sorted(p for p in HELDOUT.iterdir() if p.name.startswith(("w2-", "w4-")))
"""The held-out folders of two or more ranks (w1-*: one rank, no window for ``job``)."""
NAMED = re.compile(r"\b(?:rank|ranks|stream|group|steps?)$")
UNIT = re.compile(r"\s*(?:ms|µs|ns|%|ranks?|steps?)\b")


def _splits(lines: list[str]) -> list[tuple[str, str]]:
    """Two lines that split a word from its number (``rank`` / ``3``) or a number from its unit (``21.4`` / ``ms``)."""
    return [(a, b) for a, b in zip(lines, lines[1:]) if (NAMED.search(a) and re.match(r"\s*\d", b))
            or (re.search(r"\d$", a) and UNIT.match(b))]


def _words(text: str) -> str:
    return " ".join(text.split())


def _check(text: str, width: int, natural: str) -> None:
    """``text`` at ``width``: no wider, nothing split between a word and its number, the same words as ``natural``."""
    lines = text.splitlines()
    assert max(len(x) for x in lines) <= width, max(lines, key=len)
    assert not _splits(lines), _splits(lines)
    assert _words(text) == _words(natural)  # (nothing cut, nothing lost: the layout alone differs)


def _run(folder: Path, columns: str | None) -> str:
    res = CliRunner().invoke(app, ["job", str(folder), "-j", "1"], env={"COLUMNS": columns})
    assert res.exit_code == 0, res.output
    return res.stdout


@pytest.fixture(scope="module")
def many(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("job64")
    synth_job.write_summaries(st.Config(events=3000, seed=3), 64, folder, skewed=3, skew_ns=2_000_000)
    return folder


@pytest.mark.parametrize("folder", [*JOBS, "many"], ids=lambda p: "synthetic-64" if p == "many" else p.name)
def test_job_fits_80_and_120_columns_and_a_pipe(folder, request):
    """The command at ``COLUMNS=80``, ``120`` and piped (no ``COLUMNS``: 80, as the first screen): every line fits, the
    piped text is the 80-column text, and every word of each paragraph on one line is there, in order."""
    folder = request.getfixturevalue("many") if folder == "many" else folder
    natural = _run(folder, "100000")
    assert max(len(x) for x in natural.splitlines()) > 120  # (a job whose sentences need wrapping)
    at80, at120, piped = _run(folder, "80"), _run(folder, "120"), _run(folder, None)
    _check(at80, 80, natural)
    _check(at120, 120, natural)
    assert piped == at80


def test_the_straggler_and_the_top_what_if_keep_their_rank():
    """causes/ddp-compute (rank 1 runs extra products): at 80 columns the straggler's sentence and the window's top
    what-if each begin a line with the rank the analysis names, and each is whole in the text."""
    summary = analyze_paths([str(SAMPLES / "causes" / "ddp-compute")], jobs=1)
    job = job_report(summary)
    text = job_text(job, width=80)
    (c,) = job.causes
    (wi,) = job.what_ifs
    assert c.straggler == 1 and int(wi.top["rank"]) == 1
    assert f"\n  straggler: rank {c.straggler} arrived last" in text
    assert f"\n  rank {int(wi.top['rank'])}: " in text and wi.finding().startswith(f"rank {int(wi.top['rank'])}: ")
    assert _words(wi.finding()) in _words(text) and _words(wi.path_line()) in _words(text)
    assert "\n  do: balance the work across ranks (data, experts or stages) (rank 1)\n" in text
    rows = [x for x in text.splitlines() if x.startswith("  step time ")]
    assert len(rows) == 1 and rows[0].count("ms/step") == 4  # (the table: a figure's four values on its line)


@pytest.mark.slow  # (every held-out job analysed: about 30 s on 2 busy CPUs)
@pytest.mark.parametrize("folder", HELD_JOBS, ids=lambda p: p.name)
def test_every_held_out_job_fits(folder):
    """Each held-out folder of two or more ranks: every window's text fits 80 and 120 columns with its words whole."""
    job = job_report(analyze_paths([str(folder)], jobs=1))
    natural = job_text(job)
    for width in (80, 120):
        _check(job_text(job, width=width), width, natural)
