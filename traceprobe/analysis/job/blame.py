"""The blame path of a window: which rank and which cause bound each step (:attr:`.causes.WindowCauses.blame`), from the
window's replay where it was replayed, else measured (the definitions: :mod:`.causes`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..causal.what_if_windows import WindowWhatIf
from .cause_tables import PARTS, RankTables

NOISE_MIN_NS = 500_000
"""A straggler, and a rank and cause of the measured blame path, need at least this much per step (0.5 ms; with
:data:`.causes.NOISE_SHARE` of the window for a straggler)."""

BLAME_COLUMNS = ["step", "rank", "cause", "excess_ns", "wait_ns"]
"""The blame path's columns (:attr:`.causes.WindowCauses.blame`)."""


def blame_path(by_step: pd.DataFrame, present: np.ndarray, t: RankTables) -> pd.DataFrame:
    """The blame path (:attr:`.causes.WindowCauses.blame`) of the steps ``present`` (int64, distinct, increasing): per
    step, the late rank that caused the largest exposed wait on one rank (``by_step``: ``step``, ``key`` (late rank),
    ``ns``, int64; ties: the lowest rank), where at least :data:`NOISE_MIN_NS`, and its part (:data:`PARTS`) most in
    excess over the median of the other ranks holding the step (pandas' median: the mean of the two middle values of
    an even count); rank -1 where the late rank holds no part of the step, cause "" where no part is known or the
    excess is under :data:`NOISE_MIN_NS`, the excess 0 where unknown (the float excess truncated to int64 ns)."""
    steps = np.asarray(present, np.int64)
    bs, bk, bn = (by_step[c].to_numpy(np.int64) for c in ("step", "key", "ns"))
    o = np.lexsort((bk, -bn, bs))  # (per step, the most wait first, then the lowest rank)
    head = o[np.r_[True, bs[o][1:] != bs[o][:-1]]] if o.size else o
    pos = np.minimum(np.searchsorted(bs[head], steps), max(head.size - 1, 0))
    found = bs[head][pos] == steps if head.size else np.zeros(steps.size, bool)
    wait = np.where(found, bn[head][pos] if head.size else 0, 0).astype(np.int64)
    late = np.where(found & (wait >= NOISE_MIN_NS), bk[head][pos] if head.size else -1, -1).astype(np.int64)
    p = t.parts
    p_rank, p_step = p["rank"].to_numpy(np.int64), p["step"].to_numpy(np.int64)
    row = np.full(p_step.size, -1, np.int64)  # (each part's row of ``present``, where that step has a late rank)
    is_late = np.zeros(p_step.size, bool)
    if steps.size:
        at = np.minimum(np.searchsorted(steps, p_step), steps.size - 1)
        row = np.where((steps[at] == p_step) & (late[at] >= 0), at, -1)
        is_late = (row >= 0) & (p_rank == late[np.maximum(row, 0)])
    other = np.flatnonzero((row >= 0) & ~is_late)
    values = p[list(PARTS)].to_numpy(np.float64)
    mine = np.full((steps.size, len(PARTS)), np.nan)
    mine[row[is_late]] = values[is_late]
    d = mine - _medians(row[other], values[other], steps.size)  # NaN: no other rank holds the step
    k = np.argmax(np.nan_to_num(d, nan=-np.inf), axis=1) if len(d) else np.zeros(0, np.int64)
    top = d[np.arange(len(d)), k] if len(d) else np.zeros(0)
    known = np.isfinite(top)
    in_steps = np.zeros(steps.size, bool)
    in_steps[row[is_late]] = True
    rank = np.where(in_steps, late, -1)
    cause = np.where(known & (top >= NOISE_MIN_NS), np.array(PARTS, dtype=object)[k], "")
    excess = np.where(known, np.maximum(np.nan_to_num(top), 0), 0).astype(np.int64)
    return pd.DataFrame({"step": steps, "rank": rank.astype(np.int64), "cause": cause, "excess_ns": excess, "wait_ns": wait},
                        columns=BLAME_COLUMNS)


def _medians(group: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """Per group ``0..n-1`` and column of ``values`` (rows of ``group``), the median of its rows (NaN: none), as pandas'
    groupby median takes it: the middle value, or the mean of the two middle values of an even count."""
    out = np.full((n, values.shape[1]), np.nan)
    if group.size == 0:
        return out
    count = np.bincount(group, minlength=n)
    start = np.concatenate([[0], np.cumsum(count)[:-1]])
    has = np.flatnonzero(count)
    lo = start[has] + (count[has] - 1) // 2
    hi = start[has] + count[has] // 2
    for j in range(values.shape[1]):
        v = values[np.lexsort((values[:, j], group)), j]
        out[has, j] = np.where(lo == hi, v[lo], (v[hi] + v[lo]) / 2)
    return out


def replayed_blame(blame: pd.DataFrame, by_step: pd.DataFrame, w: WindowWhatIf) -> pd.DataFrame:
    """The blame path of the steps of ``blame`` from the window's replay (:meth:`.what_if_windows.WindowWhatIf.step_tops`):
    per step, the rank and what-if cause that bound it, ``excess_ns`` its gain in that step, ``wait_ns`` the largest
    exposed wait that rank caused on one rank in that step (``by_step``: ``step``, ``key``, ``ns``); rank -1, cause ""
    and excess 0 where no cause of one rank gives back the floor in that step."""
    b = blame[["step"]].astype(np.int64).merge(w.step_tops(), on="step", how="left")
    rank = b["rank"].fillna(-1).to_numpy(np.int64)
    waited = by_step.rename(columns={"key": "rank"})[["step", "rank", "ns"]].astype(np.int64)
    wait = pd.DataFrame({"step": b["step"], "rank": rank}).merge(waited, on=["step", "rank"], how="left")["ns"]
    return pd.DataFrame({"step": b["step"].to_numpy(np.int64), "rank": rank, "cause": b["cause"].astype(object).where(b["cause"].notna(), ""),
                         "excess_ns": np.maximum(b["gain_ns"].fillna(0).to_numpy(np.int64), 0),
                         "wait_ns": wait.fillna(0).to_numpy(np.int64)},
                        columns=BLAME_COLUMNS).astype({"step": np.int64, "rank": np.int64, "excess_ns": np.int64, "wait_ns": np.int64})
