"""README.md and sample_traces/README.md quote the tool (real sample traces): every command output between
``<!-- output: ARGS -->`` and ``<!-- end -->`` is what ``traceprobe ARGS`` prints now on an 80-column terminal, written
by scripts/readme.py (``TRACEPROBE_UPDATE_GOLDEN=1`` rewrites a stale one here too); the README stays short, its links
lead to files and anchors that exist, and docs/compute-copy.png is what the command quoted beside it draws.
The tables and findings of matrix/ and heldout/ folders are checked here (slow), the other quoted figures (every one
read off the samples' summary) by tests/test_table.py (``test_readme_figures_are_the_tools``)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
import readme  # noqa: E402  # pyright: ignore[reportMissingImports]  - scripts/readme.py

FAST = ("overlap-report sample_traces/causes/slow-input",)
"""The outputs checked in the default run (one trace, a second of CPU); the others (a job's two ranks, the whole
sample folder) under slow."""

WHOLE_FOLDER = "overlap-report sample_traces/;"
"""The excerpt of the whole folder's first screen: tests/test_newcomer.py checks it, from the same run (the README's
set-up command, on a fresh install) that checks the screen's size (the folder's analysis is run once)."""

OUTPUTS = [pytest.param(path, part.spec, id=f"{path.parent.name}/{path.name}: {part.spec.split(';')[0]}",
                        marks=() if part.spec in FAST else pytest.mark.slow)
           for path in readme.DOCS for part in readme.parts(path.read_text())
           if part.kind == "output" and not part.spec.startswith(WHOLE_FOLDER)]


TABLES = [pytest.param(path, part.spec, id=f"{path.parent.name}/{path.name}: {part.spec}", marks=pytest.mark.slow)
          for path in readme.DOCS for part in readme.parts(path.read_text())
          if part.kind == "figures" and part.spec.startswith(("table ", "fixes ", "finding ")) and not readme.of_samples(part.spec)]
"""The quoted parts that analyse folders of matrix/ and heldout/ (those read off the samples' summary are
tests/test_table.py's, in the default run)."""


@pytest.mark.parametrize("path, spec", TABLES)
@pytest.mark.xdist_group("every_sample_summary")
def test_scenario_tables_are_the_tools(path: Path, spec: str, every_sample_summary):
    """Each table of a folder of recorded scenarios (matrix/, heldout/...) is scripts/matrix_table.py's (or
    fix_table.py's) now, and each quoted finding the tool's words for its folder now (read off the summary of every
    sample, conftest's ``every_sample_summary``: each folder's part of it is what analysing the folder alone gives)."""
    want = readme.figures(spec, every_sample_summary.summary, every=True)
    text, stale = readme.rewrite(path, lambda p: want if p.spec == spec else p.text)
    if os.environ.get("TRACEPROBE_UPDATE_GOLDEN") and stale:
        path.write_text(text)
        stale = []
    assert not stale, f"{stale}: run python scripts/readme.py"


def test_the_first_screen_is_quoted():
    """The README's first command output is the one trace the issue asks to teach with, checked in the default run."""
    first = next(p for p in readme.parts((REPO / "README.md").read_text()) if p.kind == "output")
    assert first.spec in FAST and len(OUTPUTS) >= 2  # (the whole folder's excerpt: WHOLE_FOLDER)


@pytest.mark.parametrize("path, spec", OUTPUTS)
def test_quoted_output_is_the_tools(path: Path, spec: str):
    want = readme.command_output(spec)
    text, stale = readme.rewrite(path, lambda p: want if p.kind == "output" and p.spec == spec else p.text)
    if os.environ.get("TRACEPROBE_UPDATE_GOLDEN") and stale:
        path.write_text(text)
        stale = []
    assert not stale, f"{stale}: run python scripts/readme.py"


def test_readme_is_short_and_its_links_lead_somewhere():
    """Under 300 lines; every relative link names a file that exists, and every ``docs/measures.md#anchor`` an anchor
    of that page (an ``<a id>`` or a heading)."""
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) < 300
    measures = (REPO / "docs" / "measures.md").read_text()
    anchors = set(re.findall(r'<a id="([^"]+)"></a>', measures))
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    assert any(x.startswith("docs/measures.md#") for x in links)
    for link in links:
        if "://" in link:
            continue
        file, _, anchor = link.partition("#")
        assert (REPO / file).exists(), link
        if file == "docs/measures.md" and anchor:
            assert anchor in anchors, link


@pytest.mark.slow
def test_picture_is_what_its_command_draws(tmp_path):
    """docs/compute-copy.png is what the command the README quotes draws now: the same size, pixels within 1% on
    average (fonts and matplotlib versions may move an edge)."""
    import matplotlib.image as mpimg

    for picture, args in readme.PICTURES.items():
        assert f"traceprobe {args}" in (REPO / "README.md").read_text()
        out = tmp_path / Path(picture).name
        readme.draw(picture, out)
        a, b = mpimg.imread(REPO / picture), mpimg.imread(out)
        assert a.shape == b.shape, picture
        assert abs(a - b).mean() < 0.01, picture
