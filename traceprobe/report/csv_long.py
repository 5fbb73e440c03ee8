"""``overlap-report --format csv``: long-form CSV of a :class:`~traceprobe.analysis.summary.Summary`.

One row per table row of every trace, with the columns ``path``, ``workload``,
``variant``, ``rank`` and ``section`` (``streams``, ``copy_overlap``, ``devices``,
``stream_concurrency``, ``comm_overlap``, ``cpu_gpu``, ``steps``, ``verdicts``,
``breakdown``, ``breakdown_steps``, ``findings``, ``kernels``, ``queue``; see
:func:`.sections.sections`) in front of that section's own columns; collectives
across ranks are ``collective_wait``, ``collective_types`` and ``collective_sizes``
rows whose ``path`` is the run, with a ``window`` column; failures are
``section=failure`` rows.
"""

from __future__ import annotations

import pandas as pd

from ..analysis.summary import Summary
from .sections import collective_sections, integer_ns, sections


def to_csv(summary: Summary) -> str:
    """Long-form CSV of every report (module doc); failures as ``section=failure`` rows."""
    frames = []
    for r in summary.reports:
        for name, df in sections(r).items():
            if df.empty:
                continue
            df = df.drop(columns=["rank"], errors="ignore")  # the trace's rank goes in front, once
            df.insert(0, "section", name)
            df.insert(0, "rank", r.rank)
            df.insert(0, "variant", r.info.get("variant"))
            df.insert(0, "workload", r.info.get("workload"))
            df.insert(0, "path", r.path)
            frames.append(integer_ns(df))
    for c in summary.collectives:
        for name, df in collective_sections(c).items():
            if df.empty:
                continue
            df = df.copy()
            df.insert(0, "window", c.window)
            df.insert(0, "section", name)
            df.insert(0, "path", c.run)
            frames.append(integer_ns(df))
    for f in summary.failures:
        frames.append(pd.DataFrame([{"path": f.path, "section": "failure", "text": f.error}]))
    if not frames:
        return ""
    out = _concat(frames)
    if "rank" in out:  # (no rank column when every file failed)
        out["rank"] = pd.array(pd.to_numeric(out["rank"], errors="coerce"), dtype="Int64")  # rows without a rank keep ranks integers  # pyright: ignore  (pandas/matplotlib stubs)
    return integer_ns(out).to_csv(index=False)


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """``pd.concat(frames, ignore_index=True)``, the same frame, faster: frames of the same columns (one section of
    many traces) are joined first, then the few groups, rows put back in the frames' order; joining hundreds of frames
    of different columns at once fills each one's missing columns one by one (11 s for the samples' CSV)."""
    groups: dict[tuple, list[int]] = {}
    for i, df in enumerate(frames):
        groups.setdefault(tuple(df.columns), []).append(i)
    order = list(dict.fromkeys(c for df in frames for c in df.columns))
    parts = []
    for idx in groups.values():
        part = pd.concat([frames[i] for i in idx], ignore_index=True)
        part["_frame"] = [i for i in idx for _ in range(len(frames[i]))]
        parts.append(part)
    out = pd.concat(parts, ignore_index=True)
    out = out.sort_values("_frame", kind="stable").drop(columns="_frame").reset_index(drop=True)
    return out.reindex(columns=order)

