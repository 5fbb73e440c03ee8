"""The what-if table from its replayed rows (:func:`.what_if.what_ifs`): every-rank rows kept where they say more than
one rank, told beyond the rank holding most of their cause, gains per step, the order, and the gains step by step."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .dependency_graph import RankGraph
from .what_if_order import COLUMNS, ordered

EVERY_RANK_FACTOR = 1.2
"""A cause removed on every rank is listed when it gains more than this times its best single rank's removal."""

LEAD_SHARE = 0.5
"""A cause on every rank is told beyond one rank's own row where that rank holds at least this share of its time ..."""

LEAD_FACTOR = 2.0
"""... and at least this many times the median of the other ranks holding it (:func:`_beyond_the_lead`)."""

FIRST_STEP_SHARE = 0.5
"""A cause's gain after the window's first step stands for its gain per step only where the first step held at least
this share of an even split of the time the cause removes (it was there alike, its effect came a step later)."""

STEP_COLUMNS = ["rank", "cause", "step", "gain_ns"]
"""The what-ifs step by step (:func:`.what_if.what_ifs`)."""

ROW = ["rank", "cause", "top", "removed_ns", "gain_ns", "steps_with", "first_ns", "removed_first_ns"]
"""A replayed row (:func:`assemble`), then the time removed per rank (a dict) and the gains step by step (an array)."""


def lead(by: dict[int, int]) -> int | None:
    """The rank an every-rank row is told beyond (:func:`_beyond_the_lead`), from the time its cause removes per rank:
    the rank holding most, where it holds :data:`LEAD_SHARE` of it and :data:`LEAD_FACTOR` times the others' median;
    None otherwise."""
    top = max(by, key=lambda r: by[r])
    others = [n for r, n in by.items() if r != top]
    if not others or by[top] < LEAD_SHARE * sum(by.values()) or by[top] < LEAD_FACTOR * float(np.median(others)):
        return None
    return top


def kept_rows(rows: list[tuple], n_steps: int, groups: set[str], floor: int) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
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
    out = _beyond_the_lead(pd.DataFrame(out), groups, floor)
    out["top"] = [str(x) for x in out["top"]]  # (numpy strings are no JSON)
    out = out.astype({"rank": np.int64, "removed_ns": np.int64, "gain_ns": np.int64, "per_step_ns": np.int64, "steps_with": np.int64,
                      "beyond": np.int64})
    group = out["cause"].isin(list(groups)).to_numpy()
    return pd.DataFrame(out[~group]), out, group


def assemble(rows: list[tuple], graphs: list[RankGraph], n_steps: int, groups: set[str], floor: int
             ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The rows kept before they are ordered (groups aside: ``rank``, ``cause``, ``gain_ns``, ``per_step_ns``...), the
    what-if table and its gains step by step (:func:`.what_if.what_ifs`' Returns) from the replayed ``rows`` (:data:`ROW`),
    in the order they were listed."""
    kept, out, group = kept_rows(rows, n_steps, groups, floor)
    labels = next((g.steps["step"].to_numpy(np.int64) for g in graphs if len(g.steps) == n_steps and n_steps), np.zeros(0, np.int64))
    gains = np.stack(out["_steps"].tolist()) if len(out) and n_steps else np.zeros((len(out), 0), np.int64)
    steps = pd.DataFrame({"rank": np.repeat(out["rank"].to_numpy(np.int64), labels.size),
                          "cause": np.repeat(out["cause"].to_numpy(dtype=object), labels.size),
                          "step": np.tile(labels, len(out)), "gain_ns": gains.reshape(-1).astype(np.int64)}, columns=STEP_COLUMNS)
    table = ordered(kept, graphs, max(floor, 0))
    if group.any():
        table = pd.DataFrame(pd.concat([table, pd.DataFrame(out[group]).sort_values("gain_ns", ascending=False, kind="stable")[COLUMNS]],
                                       ignore_index=True))
    return kept, table, steps


def _beyond_the_lead(out: pd.DataFrame, groups: set[str], floor: int) -> pd.DataFrame:
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
