"""The reference of tests/test_collectives.py's sweep: :func:`traceprobe.analysis.job.collectives.match_rows` as it
was written before each collective instance's figures were reduced on arrays (a sorted groupby's named aggregation,
``ngroup`` and a merge), kept unchanged but for its name."""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceprobe.analysis.causal.contention import last_arrivals, wait_spans
from traceprobe.analysis.job.collectives import _ALL_TO_ALL_TYPES, WindowCollectives, _busbw_factor, _by_type
from traceprobe.analysis.job.p2p import pair_rows
from traceprobe.analysis.job.process_groups import matched_groups, member_codes, shared_names


def match_rows_frames(allk: pd.DataFrame, ranks: tuple[int, ...], run: str = "", window: str = "") -> WindowCollectives:
    """:func:`match_window` of the ranks' collective tables concatenated: ``allk`` holds them in increasing rank order,
    each in its own order, with a ``rank`` column (int64); ``ranks`` (increasing) names every rank of the window,
    those without collectives too."""
    mismatched: list[str] = []
    pairs: pd.DataFrame = pd.DataFrame()
    if "p2p" in allk.columns:  # point-to-point kernels are paired, not matched as collectives (.p2p)
        is_p2p = allk["p2p"].fillna("").astype(str).to_numpy(dtype=object) != ""
        if is_p2p.any():
            pairs, unpaired = pair_rows(allk.loc[is_p2p])
            mismatched += unpaired
            allk = allk.loc[~is_p2p]
    if "pg_ranks" not in allk.columns:
        allk = allk.assign(pg_ranks="")
    size = allk["group_size"].to_numpy(np.int64) if "group_size" in allk.columns else np.full(len(allk), -1, np.int64)
    codes, members_by = member_codes(allk["pg_ranks"])
    k, unmatched = matched_groups(allk.assign(_size=size, _members=codes), ranks, members_by)
    mismatched += unmatched
    if len(ranks) < 2 or k.empty:
        empty = pd.DataFrame()
        return WindowCollectives(run, window, ranks, 0, tuple(mismatched), None, dict.fromkeys(ranks, 0), empty, empty, empty,
                                 p2p=pairs if len(ranks) >= 2 else empty)
    shared = k["pg"].isin(shared_names(k)).to_numpy()
    if shared.any():
        k.loc[shared, "pg"] = k.loc[shared, "pg"] + "[" + k.loc[shared, "pg_ranks"] + "]"
    key = ["pg", "seq"]
    grp = k.groupby(key, sort=True)
    start, end = k["start_ns"].to_numpy(np.int64), k["end_ns"].to_numpy(np.int64)
    k["duration_ns"] = end - start
    # each member's wait for the last arrival: the definition the dependency graph's crossings and the replay read
    # (.contention.wait_spans); members listed in reverse, so that of equal starts the first row is the last arrival
    gid = k.groupby(key, sort=False, dropna=False).ngroup().to_numpy(np.int64)  # (by first row: a MultiIndex's codes, no tuples)
    rev = np.arange(len(k), dtype=np.int64)[::-1]
    op, lo, hi, _ = wait_spans(start, end, k["rank"].to_numpy(np.int64), rev, gid[rev])
    wait = np.zeros(len(k), np.int64)
    wait[op] = np.maximum(hi - lo, 0)
    k["wait_ns"] = wait
    last_op = last_arrivals(start, rev, gid[rev])
    per = grp.agg(collective=("collective", "first"), bytes=("bytes", "max"), ranks=("rank", "size"),
                  first_start=("start_ns", "min"), last_start=("start_ns", "max"), first_end=("end_ns", "min"),
                  last_end=("end_ns", "max"), wait=("wait_ns", "sum")).reset_index()
    last_rank = k.iloc[last_op][["pg", "seq", "rank"]].rename(columns={"rank": "last_rank"})
    per = per.merge(last_rank, on=key)
    per["skew_ns"] = per["last_start"] - per["first_start"]
    per["time_ns"] = per["last_end"] - per["last_start"]
    sized = (per["bytes"] > 0) & (per["time_ns"] > 0)
    algbw = np.where(sized, per["bytes"] / per["time_ns"].clip(lower=1), np.nan)  # bytes/ns = GB/s
    factor = _busbw_factor(per["collective"].to_numpy(dtype=object), per["ranks"].to_numpy(np.int64))
    per["algbw_gbps"] = algbw
    per["busbw_gbps"] = algbw * factor
    per["_bus_bytes"] = np.where(sized, per["bytes"] * factor, np.nan)
    rank_pos = np.searchsorted(np.array(ranks, dtype=np.int64), k["rank"].to_numpy(np.int64))
    wait = np.bincount(rank_pos, weights=k["wait_ns"].to_numpy(np.float64), minlength=len(ranks)).astype(np.int64)
    last_pos = np.searchsorted(np.array(ranks, dtype=np.int64), per["last_rank"].to_numpy(np.int64))
    charged = np.bincount(last_pos, weights=per["wait"].to_numpy(np.float64), minlength=len(ranks))
    straggler = int(ranks[int(np.argmax(charged))]) if charged.max(initial=0) > 0 else None
    a2a = per["collective"].isin(_ALL_TO_ALL_TYPES).to_numpy()
    gap = np.where(a2a, per["last_start"].to_numpy(np.int64) - per["first_end"].to_numpy(np.int64), 0)
    implausible = int((gap > 0).sum())
    by_type = _by_type(per, sized.to_numpy())
    by_size = _by_type(per, sized.to_numpy(), by_size=True)
    matches = per.reindex(columns=["pg", "seq", "collective", "bytes", "ranks", "skew_ns", "last_rank", "time_ns", "algbw_gbps", "busbw_gbps"])
    per_rank = k.reindex(columns=["pg", "seq", "rank", "start_ns", "end_ns", "duration_ns", "wait_ns", "collective", "pg_desc"])
    per_rank = per_rank.sort_values(by=["pg", "seq", "rank"], kind="stable").reset_index(drop=True)
    return WindowCollectives(
        run=run, window=window, ranks=ranks, matched=len(per), mismatched=tuple(mismatched), straggler_rank=straggler,
        wait_ns={int(r): int(w) for r, w in zip(ranks, wait)}, by_type=by_type, by_size=by_size,
        matches=matches.reset_index(drop=True), per_rank=per_rank, implausible=implausible,
        max_offset_ns=int(gap.max()) if implausible else 0, p2p=pairs,
    )
