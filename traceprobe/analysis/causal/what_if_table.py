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
    of ``out`` are groups. What the replays read between rounds (:func:`.what_if._replayed`), without the table.

    Each is indexed by its row's position in ``rows``. Computed on the rows' values, one frame built at the end: the
    replays read it between rounds, several times a window (a frame per step of it cost 33 ms a call)."""
    if not rows:  # (typed as the frame of no row was)
        out = pd.DataFrame([], columns=ROW)
        for name in ("_by", "_steps", "per_step_ns", "top", "beyond"):
            out[name] = []
        out = out.astype(dict.fromkeys(("rank", "removed_ns", "gain_ns", "per_step_ns", "steps_with", "beyond"), np.int64))
        return pd.DataFrame(out), out, np.zeros(0, bool)
    n = len(rows)
    rank = np.fromiter((r[0] for r in rows), np.int64, n)
    cause = np.array([r[1] for r in rows], dtype=object)
    gain = np.fromiter((r[4] for r in rows), np.int64, n)
    single: dict[str, int] = {}  # (each cause's largest gain on one rank)
    for c, g in zip(cause[rank >= 0].tolist(), gain[rank >= 0].tolist()):
        single[c] = max(single.get(c, g), g)
    best = np.array([single.get(c, -1) for c in cause.tolist()], np.float64)
    at = np.flatnonzero((rank >= 0) | (gain > EVERY_RANK_FACTOR * best))  # (one rank says it all)
    rank, cause, gain = rank[at], cause[at], gain[at]
    per_step = gain // max(n_steps, 1)
    if n_steps >= 2:  # (a cause that delays the step after it gives nothing back in the window's first step)
        removed = np.fromiter((rows[i][3] for i in at), np.int64, at.size)
        first_held = np.fromiter((rows[i][7] for i in at), np.int64, at.size) * n_steps
        alike = (cause != "imbalance") & (first_held >= FIRST_STEP_SHARE * removed)
        after = np.where(alike, (gain - np.fromiter((rows[i][6] for i in at), np.int64, at.size)) // (n_steps - 1), 0)
        per_step = np.maximum(per_step, after)
    kept = [rows[i] for i in at]
    gain, per_step, steps, beyond, keep = _beyond(rank, cause, gain, per_step, [r[-2] for r in kept], [r[-1] for r in kept], groups, floor)
    kept, at = [kept[i] for i in keep], at[keep]

    def column(k: int) -> pd.Series:  # (typed as a frame of every row types it: str, object, int64; its rows kept)
        return pd.Series([r[k] for r in rows]).iloc[at]

    out = pd.DataFrame({"rank": rank[keep], "cause": column(1), "top": [str(r[2]) for r in kept],  # (numpy strings are no JSON)
                        "removed_ns": np.fromiter((r[3] for r in kept), np.int64, len(kept)), "gain_ns": gain[keep],
                        "steps_with": np.fromiter((r[5] for r in kept), np.int64, len(kept)), "first_ns": column(6),
                        "removed_first_ns": column(7), "_by": column(8), "_steps": pd.Series(_objects([steps[i] for i in keep]), index=at, dtype=object),
                        "per_step_ns": per_step[keep], "beyond": beyond[keep]}, index=at)
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
    (``floor``, in the window). The others wait for that rank: its own row is the finding, the every-rank row the rest.
    (:func:`_beyond` on a frame's columns.)"""
    gain, per_step, steps, beyond, keep = _beyond(out["rank"].to_numpy(np.int64), out["cause"].to_numpy(object), out["gain_ns"].to_numpy(),
                                                  out["per_step_ns"].to_numpy(), out["_by"].tolist(), out["_steps"].tolist(), groups, floor)
    return pd.DataFrame(out.assign(gain_ns=gain, per_step_ns=per_step, _steps=pd.Series(_objects(steps), index=out.index),
                                   beyond=beyond).iloc[keep])


def _beyond(rank: np.ndarray, cause: np.ndarray, gain: np.ndarray, per_step: np.ndarray, by: list[dict[int, int]], steps: list,
            groups: set[str], floor: int) -> tuple[np.ndarray, np.ndarray, list, np.ndarray, np.ndarray]:
    """:func:`_beyond_the_lead` on the rows' columns: ``(gain, per_step, steps, beyond, keep)``, the first three as told
    (copies), ``beyond`` (int64, -1 where not told beyond a rank) and the positions of the rows kept."""
    gain, per_step, steps = gain.copy(), per_step.copy(), list(steps)
    beyond, keep = np.full(rank.size, -1, np.int64), np.ones(rank.size, bool)
    for i in np.flatnonzero((rank < 0) & ~np.isin(cause, [*groups, "imbalance"])).tolist():
        top = lead(by[i])
        if top is None:
            continue
        own = np.flatnonzero((rank == top) & (cause == cause[i]))
        if own.size == 0:
            continue
        o = int(own[0])
        gain[i], per_step[i] = max(int(gain[i]) - int(gain[o]), 0), max(int(per_step[i]) - int(per_step[o]), 0)
        steps[i] = steps[i] - steps[o]
        beyond[i] = top
        keep[i] = int(gain[i]) > floor
    return gain, per_step, steps, beyond, np.flatnonzero(keep)


def _objects(values: list) -> np.ndarray:
    """``values`` as a 1-d object array, one element each (arrays of one length stay elements, not a 2-d array)."""
    out = np.empty(len(values), object)
    for i, v in enumerate(values):
        out[i] = v
    return out
