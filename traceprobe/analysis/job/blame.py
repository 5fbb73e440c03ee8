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
