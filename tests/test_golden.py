"""Golden outputs: ``overlap-report --format json|csv|markdown`` on real sample traces, byte for byte.

Times are exact int64 ns, so any change to a figure shows here. Paths are made relative to the
repository and the version is replaced by ``<version>``; nothing else is normalised.

A change that is meant to alter a figure rewrites the files with
``TRACEPROBE_UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py`` and says why in its commit.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

import traceprobe
from traceprobe.cli import app

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden"
S = "sample_traces"

CASES = {
    "single-gpu": [f"{S}/compute-copy.overlapped.pt.trace.json.gz"],
    "two-gpu": [f"{S}/multi-gpu.concurrent.pt.trace.json.gz"],
    "ddp-pair": [f"{S}/data-parallel.ddp.rank0.pt.trace.json.gz", f"{S}/data-parallel.ddp.rank1.pt.trace.json.gz"],
    "manifest-folder": [f"{S}/script-ddp"],
    "windows-folder": [f"{S}/training/tb-ddp"],
}
SUFFIX = {"json": "json", "csv": "csv", "markdown": "md"}


def _normalise(text: str) -> str:
    text = text.replace(str(ROOT) + os.sep, "")
    return text.replace(f'"traceprobe": "{traceprobe.__version__}"', '"traceprobe": "<version>"')


FOLDERS = {"manifest-folder", "windows-folder"}
"""Cases that analyse a whole folder: their CSV and Markdown outputs (the same figures as their JSON, rendered again)
run under slow; every case's JSON and the one-trace and pair cases in every format run by default."""


@pytest.mark.parametrize("case, fmt", [
    pytest.param(case, fmt, marks=pytest.mark.slow if case in FOLDERS and fmt != "json" else ())
    for case in sorted(CASES) for fmt in sorted(SUFFIX)
])
def test_golden(case: str, fmt: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    res = CliRunner().invoke(app, ["overlap-report", *CASES[case], "--format", fmt, "--jobs", "1"])
    assert res.exit_code == 0, res.output
    got = _normalise(res.stdout)
    path = GOLDEN / f"{case}.{SUFFIX[fmt]}"
    if os.environ.get("TRACEPROBE_UPDATE_GOLDEN") == "1":
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(got)
    assert path.exists(), f"{path} missing: run with TRACEPROBE_UPDATE_GOLDEN=1 once"
    assert got == path.read_text(), f"{case} {fmt} differs from {path.name}"
