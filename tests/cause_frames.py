"""The references of tests/test_cause_tables.py, as they were computed before they were on arrays, kept unchanged but
for their names: the parts of :func:`traceprobe.analysis.job.cause_tables.rank_tables` (a groupby, a pivot table and a
join) and :func:`traceprobe.analysis.job.blame.blame_path` (merges, a groupby median)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from traceprobe.analysis.job.blame import BLAME_COLUMNS, NOISE_MIN_NS
from traceprobe.analysis.job.cause_tables import PARTS, RankColumns, RankTables, _cat


def parts_frames(cols: Sequence[RankColumns]) -> pd.DataFrame:
    busy = _cat(cols, "busy", ["step", "compute", "other_busy"])
    parts = pd.DataFrame(busy.groupby(["rank", "step"], sort=True).sum())
    idle = _cat(cols, "idle", ["step", "cause", "ns"])
    if len(idle):
        parts = pd.DataFrame(parts.join(idle.pivot_table(index=["rank", "step"], columns="cause", values="ns", aggfunc="sum"), how="left"))
    parts = pd.DataFrame(parts.reindex(columns=list(PARTS))).fillna(0.0).astype(np.float64).reset_index()
    return parts.astype({"rank": np.int64, "step": np.int64})


def blame_path_frames(by_step: pd.DataFrame, present: np.ndarray, t: RankTables) -> pd.DataFrame:
    """The blame path (:attr:`.causes.WindowCauses.blame`) of the steps ``present``: per step, the late rank that caused the
    largest exposed wait on one rank (``by_step``: ``step``, ``key`` (late rank), ``ns``; ties: the lowest rank), and
    its part most in excess over the other ranks' median in that step (ranks holding the step), as one groupby."""
    best = by_step.sort_values(["step", "ns", "key"], ascending=[True, False, True], kind="stable").drop_duplicates("step")
    b = pd.DataFrame({"step": present.astype(np.int64)}).merge(best, on="step", how="left")
    wait = b["ns"].fillna(0).to_numpy(np.int64)
    late = np.where(wait >= NOISE_MIN_NS, b["key"].fillna(-1).to_numpy(np.int64), -1)
    p = t.parts
    with_late = p.merge(pd.DataFrame({"step": b["step"], "late": late})[late >= 0], on="step")
    is_late = (with_late["rank"] == with_late["late"]).to_numpy()
    mine = with_late[is_late].set_index("step")[list(PARTS)]
    med = with_late[~is_late].groupby("step")[list(PARTS)].median()
    diff = (mine - med.reindex(mine.index)).reindex(b["step"])  # NaN: no other rank holds the step
    d = diff.to_numpy(np.float64)
    k = np.argmax(np.nan_to_num(d, nan=-np.inf), axis=1) if len(d) else np.zeros(0, np.int64)
    top = d[np.arange(len(d)), k] if len(d) else np.zeros(0)
    known = np.isfinite(top)
    in_steps = diff.notna().any(axis=1).to_numpy() | b["step"].isin(mine.index).to_numpy()
    rank = np.where(in_steps, late, -1)
    cause = np.where(known & (top >= NOISE_MIN_NS), np.array(PARTS, dtype=object)[k], "")
    excess = np.where(known, np.maximum(np.nan_to_num(top), 0), 0).astype(np.int64)
    out = pd.DataFrame({"step": b["step"].to_numpy(np.int64), "rank": rank.astype(np.int64), "cause": cause, "excess_ns": excess, "wait_ns": wait},
                       columns=BLAME_COLUMNS)
    return out.astype({"step": np.int64, "rank": np.int64, "excess_ns": np.int64, "wait_ns": np.int64})
