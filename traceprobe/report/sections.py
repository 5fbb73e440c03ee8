"""One trace's tables by section name: what the CSV and Markdown renderers lay out."""

from __future__ import annotations

from dataclasses import asdict

import pandas as pd

from ..analysis.collectives import WindowCollectives
from ..analysis.report import OverlapReport

TOP_KERNELS = 10
"""Kernel names shown per device."""


def top_kernels(r: OverlapReport, n: int = TOP_KERNELS) -> pd.DataFrame:
    """The ``n`` kernel names with the most device time on each device (the report's table is sorted so)."""
    k = r.kernels
    return k if k.empty else k.groupby("device", sort=False).head(n).reset_index(drop=True)


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
        "breakdown": r.breakdown,
        "breakdown_steps": r.breakdown_steps,
        "findings": r.findings,
        "kernels": top_kernels(r),
        "queue": r.queue,
        "set_aside": r.set_aside,
        "verdicts": pd.DataFrame([asdict(v) for v in r.verdicts], columns=["figure", "subject", "value", "level", "text"]),
    }


def collective_sections(c: WindowCollectives) -> dict[str, pd.DataFrame]:
    """One window's collectives across ranks: the per-rank wait and the per-type and per-size tables."""
    wait = pd.DataFrame({"rank": list(c.wait_ns), "wait_ns": list(c.wait_ns.values())})
    wait["straggler"] = wait["rank"] == c.straggler_rank
    return {"collective_wait": wait, "collective_types": c.by_type, "collective_sizes": c.by_size}
