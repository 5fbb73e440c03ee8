"""One trace's tables by section name: what the CSV and Markdown renderers lay out."""

from __future__ import annotations

from dataclasses import asdict

import pandas as pd

from ..analysis.report import OverlapReport


def sections(r: OverlapReport) -> dict[str, pd.DataFrame]:
    """The report's tables by section name."""
    c = r.cpu_gpu
    return {
        "streams": r.streams,
        "copy_overlap": r.copy_overlap,
        "devices": r.devices.devices,
        "stream_concurrency": r.stream_concurrency,
        "comm_overlap": r.comm_overlap,
        "cpu_gpu": pd.DataFrame([asdict(c)]),
        "steps": r.steps,
        "verdicts": pd.DataFrame([asdict(v) for v in r.verdicts], columns=["figure", "subject", "value", "level", "text"]),
    }
