"""The references of tests/test_what_if_table.py: :func:`traceprobe.analysis.causal.what_if_table.kept_rows` and
:func:`traceprobe.analysis.causal.what_if_order.ordered` as they were written before they computed on the rows' values
(a pandas step each: groupby, map, masks, ``.at`` per every-rank row, sorts), kept unchanged but for their names."""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceprobe.analysis.causal.dependency_graph import RankGraph
from traceprobe.analysis.causal.what_if_order import COLUMNS, EXPOSED_WORK, EXPOSING_SHARE, _own_work
from traceprobe.analysis.causal.what_if_table import EVERY_RANK_FACTOR, FIRST_STEP_SHARE, ROW, lead


def kept_rows_frames(rows: list[tuple], n_steps: int, groups: set[str], floor: int) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
    """``(kept, out, group)``: the replayed ``rows`` (:data:`ROW`) kept, typed, with their gains per step and told
    beyond their lead (:func:`assemble`'s first value: groups aside), the same with the groups (``out``), and which rows
    of ``out`` are groups. What the replays read between rounds (:func:`.what_if._replayed`), without the table."""
    out = pd.DataFrame([r[:-2] for r in rows], columns=ROW)
    out["_by"] = [r[-2] for r in rows]
    out["_steps"] = [r[-1] for r in rows]
    single = out[out["rank"] >= 0].groupby("cause")["gain_ns"].max()
    best = out["cause"].map(single).fillna(-1).to_numpy(np.float64)
    out = out[(out["rank"] >= 0).to_numpy() | (out["gain_ns"].to_numpy() > EVERY_RANK_FACTOR * best)]  # (one rank says it all)
    out["per_step_ns"] = out["gain_ns"] // max(n_steps, 1)
    if n_steps >= 2:  # (a cause that delays the step after it gives nothing back in the window's first step)
        first_held = np.asarray(out["removed_first_ns"], dtype=np.int64) * n_steps
        alike = (np.asarray(out["cause"]) != "imbalance") & (first_held >= FIRST_STEP_SHARE * np.asarray(out["removed_ns"], dtype=np.int64))
        after = np.where(alike, (out["gain_ns"] - out["first_ns"]) // (n_steps - 1), 0)
        out["per_step_ns"] = np.maximum(out["per_step_ns"], after)
    out = _beyond_the_lead_frames(pd.DataFrame(out), groups, floor)
    out["top"] = [str(x) for x in out["top"]]  # (numpy strings are no JSON)
    out = out.astype({"rank": np.int64, "removed_ns": np.int64, "gain_ns": np.int64, "per_step_ns": np.int64, "steps_with": np.int64,
                      "beyond": np.int64})
    group = out["cause"].isin(list(groups)).to_numpy()
    return pd.DataFrame(out[~group]), out, group


def _beyond_the_lead_frames(out: pd.DataFrame, groups: set[str], floor: int) -> pd.DataFrame:
    """``out`` with each every-rank row (``rank`` -1) whose cause one rank holds most of (:data:`LEAD_SHARE` of the
    time removed, and :data:`LEAD_FACTOR` times the median of the other ranks holding it) told as what it adds beyond
    that rank's own row: its gains less that row's, ``beyond`` that rank; dropped where it adds at most the noise floor
    (``floor``, in the window). The others wait for that rank: its own row is the finding, the every-rank row the rest."""
    out = out.assign(beyond=-1)
    drop = []
    for idx in out.index[(out["rank"] < 0).to_numpy() & ~out["cause"].isin([*groups, "imbalance"]).to_numpy()]:
        top = lead(out.at[idx, "_by"])
        if top is None:
            continue
        own = out[(out["rank"] == top).to_numpy() & (out["cause"] == out.at[idx, "cause"]).to_numpy()]
        if own.empty:
            continue
        o = own.index[0]
        for col in ("gain_ns", "per_step_ns"):
            out.at[idx, col] = max(int(out.at[idx, col]) - int(out.at[o, col]), 0)
        out.at[idx, "_steps"] = out.at[idx, "_steps"] - out.at[o, "_steps"]
        out.at[idx, "beyond"] = top
        if int(out.at[idx, "gain_ns"]) <= floor:
            drop.append(idx)
    return pd.DataFrame(out.drop(index=drop))


def ordered_frames(out: pd.DataFrame, graphs: list[RankGraph], floor: int) -> pd.DataFrame:
    """:func:`traceprobe.analysis.causal.what_if_order.ordered` (its docstring defines it), as pandas computed it."""
    is_sync = (out["cause"] == "sync").to_numpy()
    gain = out["per_step_ns"].to_numpy(np.int64)  # (the figure every view shows first: per step)
    floor //= max(max((len(g.steps) for g in graphs), default=1), 1)
    others = pd.DataFrame(out[~is_sync]).sort_values("per_step_ns", ascending=False, kind="stable").drop_duplicates("rank").set_index("rank")
    rival = out["rank"].map(others["per_step_ns"]).fillna(-1).to_numpy(np.int64)
    rival_cause = out["rank"].map(others["cause"])
    exposes = is_sync & rival_cause.isin(EXPOSED_WORK).to_numpy() & (gain >= EXPOSING_SHARE * rival)
    own = np.array([_own_work(graphs, int(r), str(c)) if e else 0 for r, c, e in zip(out["rank"], rival_cause, exposes)], np.int64)
    exposes &= own < EXPOSING_SHARE * rival  # (work the other ranks do as well: it costs time here because of the sync)
    tie = is_sync & (np.abs(rival - gain) <= floor)
    out = out.assign(_key=np.where(tie | exposes, rival, gain), _first=~exposes, _last=is_sync)
    return pd.DataFrame(out.sort_values(["_key", "_first", "_last", "gain_ns", "rank"], ascending=[False, True, True, False, False],
                                        kind="stable").reset_index(drop=True)[COLUMNS])
