"""The order of a what-if table: largest gain first, where a rank's syncs go beside its other causes (after the
cause that made them wait, or before the host work they exposed), and causes of equal gains by their time on the
critical path."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .dependency_graph import HOST_CLASSES, RankGraph

COLUMNS = ["rank", "cause", "top", "removed_ns", "gain_ns", "per_step_ns", "steps_with", "beyond"]
"""The what-if table's columns (:func:`.what_if.what_if`)."""

EXPOSING_SHARE = 0.5
"""A rank's syncs come before its top unnamed host work (:data:`EXPOSED_WORK`) where removing them gives back at least this share
of what removing that work gives, and the rank holds less than this share of that gain in that work beyond the other
ranks' median: the work is exposed because the syncs drained the device's queue before it (work only this rank does
is its own cause, named first; with one rank, the sync is named)."""

HOST_WORK = ("host", "cpu_op", "data_loading", "optimizer", "dispatch")
"""Host classes of work the host has to do, which device work queued ahead hides (a sync before it exposes it): their
findings name such a sync, and a sync's finding names them."""

EXPOSED_WORK = ("host", "dispatch")
"""Host work a sync before it is named for (:data:`EXPOSING_SHARE`): time outside ops and launching. Named work (data
loading, the optimizer, CPU ops) keeps its name: its remedy takes it off the host (its finding names the sync)."""


def ordered(out: pd.DataFrame, graphs: list[RankGraph], floor: int) -> pd.DataFrame:
    """The what-if table largest gain per step first (``per_step_ns``, the figure shown; ``floor``, the window's noise
    floor, taken per step; equal gains per step: the larger gain in the window first, then the higher rank), with the syncs placed as :func:`.what_if.what_if` says: a sync within the floor of
    another cause of its rank comes after it (that cause made it wait: empty_cache syncs the device before it frees; a
    pageable copy's call waits for its copy); but before the rank's top unnamed host work (:data:`EXPOSED_WORK`) where it gives back at least
    :data:`EXPOSING_SHARE` of it and that work is not the rank's own (the other ranks do as much of it): that work cost
    time because the sync had drained the queue."""
    rank, cause = out["rank"].to_numpy(np.int64), out["cause"].to_numpy(object)
    is_sync = cause == "sync"
    gain = out["per_step_ns"].to_numpy(np.int64)  # (the figure every view shows first: per step)
    floor //= max(max((len(g.steps) for g in graphs), default=1), 1)
    top: dict[int, int] = {}  # (each rank's largest cause but its syncs, per step: the first row of the largest)
    for i in np.flatnonzero(~is_sync).tolist():
        r = int(rank[i])
        if r not in top or gain[i] > gain[top[r]]:
            top[r] = i
    at = np.array([top.get(int(r), -1) for r in rank.tolist()], np.int64)
    rival = np.where(at >= 0, gain[at], -1)
    rival_cause = np.array([cause[i] if i >= 0 else None for i in at.tolist()], dtype=object)
    exposes = is_sync & np.isin(rival_cause, EXPOSED_WORK) & (gain >= EXPOSING_SHARE * rival)
    own = np.array([_own_work(graphs, int(r), str(c)) if e else 0 for r, c, e in zip(rank.tolist(), rival_cause.tolist(), exposes.tolist())], np.int64)
    exposes &= own < EXPOSING_SHARE * rival  # (work the other ranks do as well: it costs time here because of the sync)
    tie = is_sync & (np.abs(rival - gain) <= floor)
    key = np.where(tie | exposes, rival, gain)
    order = np.lexsort((-rank, -out["gain_ns"].to_numpy(np.int64), is_sync, ~exposes, -key))  # (stable: ties keep their order)
    return pd.DataFrame(out[COLUMNS].take(order)).reset_index(drop=True)


def _own_work(graphs: list[RankGraph], rank: int, cause: str) -> int:
    """How much more host time of class ``cause`` rank ``rank`` holds than the other ranks' median (ns; 0 for one rank
    or every rank, -1)."""
    i = next((k for k, g in enumerate(graphs) if g.rank == rank), -1)
    if len(graphs) < 2 or i < 0:
        return 0
    held = np.array([g.class_ns.total(HOST_CLASSES.index(cause)) for g in graphs], np.int64)
    return int(held[i] - np.median(np.delete(held, i)))


def path_first(table: pd.DataFrame, path: pd.DataFrame) -> pd.DataFrame:
    """``table`` (a what-if table as :func:`ordered` gives it) with each run of consecutive rows whose gains are equal to
    the ns (``gain_ns`` and ``per_step_ns``), none of them a sync (placed by :func:`ordered`'s own rule), in order of
    their cause's time on the window's critical path (``path``: :func:`.critical_path.critical_path`'s segments, ``rank``,
    ``cause``, ``ns``; a row of every rank, its cause's time on any rank), the most first, rows of equal time as they
    were; index reset. Causes that give back the same are equal levers (the gain is where other work bounds the window):
    the one the path holds most of is named first, as the path line names it, not the first in :data:`HOST_CLASSES`."""
    table = table.reset_index(drop=True)
    if len(table) < 2:
        return table
    on_path: dict[tuple[int, str], int] = {}  # (a row of every rank, -1: its cause's time on any rank)
    for keys in (["rank", "cause"], ["cause"]):
        summed = pd.DataFrame(path.groupby(keys, sort=False, as_index=False)["ns"].sum())
        ranks = summed["rank"].tolist() if "rank" in keys else [-1] * len(summed)
        on_path |= {(int(r), str(c)): int(ns) for r, c, ns in zip(ranks, summed["cause"].tolist(), summed["ns"].tolist())}
    gain, per = table["gain_ns"].to_numpy(np.int64), table["per_step_ns"].to_numpy(np.int64)
    cause, rank = table["cause"].tolist(), table["rank"].tolist()
    order, start = [], 0
    for i in range(1, len(table) + 1):  # (a table of tens of rows)
        if i < len(table) and gain[i] == gain[start] and per[i] == per[start]:
            continue
        run = list(range(start, i))
        if "sync" not in (cause[k] for k in run):
            run.sort(key=lambda k: -on_path.get((int(rank[k]), str(cause[k])), 0))
        order += run
        start = i
    return pd.DataFrame(table.take(order)).reset_index(drop=True)
