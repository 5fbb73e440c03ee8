"""CSV and Markdown outputs of ``overlap-report``.

CSV is long-form: one row per table row of every trace, with the columns
``path``, ``workload``, ``variant``, ``rank`` and ``section`` (``streams``,
``copy_overlap``, ``devices``, ``stream_concurrency``, ``comm_overlap``,
``cpu_gpu``, ``verdicts``) in front of that section's own columns.
"""

from __future__ import annotations

from dataclasses import asdict

import pandas as pd

from ..analysis.ranks import rank_summary
from ..analysis.report import OverlapReport
from ..analysis.variants import variant_summary
from ..errors import Failure


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


def to_csv(reports: list[OverlapReport], failures: list[Failure]) -> str:
    """Long-form CSV of every report (module doc); failures as ``section=failure`` rows."""
    frames = []
    for r in reports:
        for name, df in sections(r).items():
            if df.empty:
                continue
            df = df.drop(columns=["rank"], errors="ignore")  # the trace's rank goes in front, once
            df.insert(0, "section", name)
            df.insert(0, "rank", r.rank)
            df.insert(0, "variant", r.info.get("variant"))
            df.insert(0, "workload", r.info.get("workload"))
            df.insert(0, "path", r.path)
            frames.append(df)
    for f in failures:
        frames.append(pd.DataFrame([{"path": f.path, "section": "failure", "text": f.error}]))
    if not frames:
        return ""
    return pd.concat(frames, ignore_index=True).to_csv(index=False)


def to_markdown(reports: list[OverlapReport], failures: list[Failure]) -> str:
    """Markdown: a heading, the verdicts and the tables for each trace."""
    out = []
    for r in reports:
        name = ".".join(x for x in (r.info.get("workload"), r.info.get("variant")) if x) or r.path
        out.append(f"## {name}\n\n`{r.path}`")
        if r.info.get("wall_s") is not None:
            out.append(f"Wall clock (one timed run): {r.info['wall_s'] * 1e3:,.1f} ms")
        out.append("\n".join(f"- **{v.level}**: {v.text}" for v in r.verdicts) or "- no figure to judge")
        for name_, df in sections(r).items():
            if name_ != "verdicts" and not df.empty:
                out.append(f"### {name_}\n\n" + df.to_markdown(index=False))
    summary = rank_summary(reports)
    if not summary.empty:
        out.append("## Across ranks\n\n" + summary.to_markdown(index=False))
    variants = variant_summary(reports)
    if (variants["agreement"] != "baseline").any():
        out.append("## Stopwatch against evidence\n\n" + variants.to_markdown(index=False))
    if failures:
        out.append("## Failures\n\n" + "\n".join(f"- `{f.path}`: {f.error}" for f in failures))
    return "\n\n".join(out) + "\n"
