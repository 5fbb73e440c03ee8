"""Process groups' members: which ranks of a window take part in a group's collectives, and the groups whose name
stands for groups of different members.

A collective carries its group's member list (``pg_ranks``, from ``distributedInfo.pg_config``), a string that names
up to thousands of ranks: lists are numbered once (hashed per string object, never sorted by content) and grouped by
number (:func:`member_codes`). :func:`matched_groups` finds, for every group at once, its members in the window and
each member's k-th collective: one sort of the rows, no loop per group.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def member_codes(pg_ranks: pd.Series) -> tuple[np.ndarray, dict[int, str]]:
    """A number (int64) per row of ``pg_ranks`` (str, ``""`` none) for its member list, numbered in the lists' sorted
    order (grouping by number orders groups as by the lists), and the list of each number."""
    # (a list of 4,096 ranks is 20 KB of text: pandas' factorize hashes every row's text again, so an object column,
    # whose equal lists the job's tables share as one string, goes through a dict (Python caches a string's hash and
    # compares the same string by identity): linear in rows; a string column is factorized as it is)
    if pg_ranks.dtype == object:
        vals = pg_ranks.fillna("").to_numpy(dtype=object)
        lists = list(dict.fromkeys(vals))
        pos = {x: i for i, x in enumerate(lists)}
        codes = np.fromiter(map(pos.__getitem__, vals), np.int64, vals.size)
    else:
        codes, lists = pd.factorize(pg_ranks.fillna(""), sort=False)
    names = [str(x) for x in lists]
    order = np.argsort(np.asarray(names, dtype=object), kind="stable") if names else np.zeros(0, np.int64)
    number = np.empty(len(names), np.int64)
    number[order] = np.arange(len(names))
    return (number[codes] if codes.size else codes.astype(np.int64)), {int(number[i]): x for i, x in enumerate(names)}


def shared_names(k: pd.DataFrame) -> list[str]:
    """The process group names that stand for groups of different members (``split_group`` names each rank's own
    group alike): such a name is shown with its members, ``1[2,3]`` (``k``: matched rows, ``pg`` and ``_members``, the
    number of their member list)."""
    n = k.groupby("pg")["_members"].nunique()
    return n.index[n.to_numpy() > 1].tolist()


def _parsed(lists: dict[int, str]) -> tuple[np.ndarray, np.ndarray]:
    """The ranks of member lists (``{number: "r0,r1,..."}``, :func:`member_codes`) as pairs: ``(number, rank)``
    (int64), every list's text split once (a list of 4,096 ranks is parsed once, whatever rows name it)."""
    nums = [k for k, v in lists.items() if v]
    if not nums:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    texts = [lists[k] for k in nums]
    sizes = np.fromiter((t.count(",") + 1 for t in texts), np.int64, len(texts))
    ranks = np.array(",".join(texts).split(","), dtype=np.int64)
    return np.repeat(np.asarray(nums, np.int64), sizes), ranks


def matched_groups(allk: pd.DataFrame, ranks: tuple[int, ...], members_by: dict[int, str]) -> tuple[pd.DataFrame, list[str]]:
    """The rows of the groups whose members' collectives match, each member's k-th collective numbered ``seq``, and the
    groups that do not match, in words (as :mod:`.collectives` defines matching).

    Args:
        allk: collective rows (``pg`` str, ``rank``, ``start_ns``, ``_size`` int64 group size, ``_members`` int64 member
            list number (:func:`member_codes`), ``collective`` str, and any other columns, kept); its groups are the
            (``pg``, ``_members``) pairs, in sorted order.
        ranks: the window's ranks (increasing).
        members_by: each member list number's text.

    Returns:
        ``(rows, mismatched)``: the rows of the groups of two or more members (the window's ranks a group's member list
        names; without a list, the ranks holding its rows where its ``Group size`` is smaller than the window, else every
        rank) whose members hold as many rows each and whose k-th rows are of one type, group by group (in sorted order),
        within a group by ``rank`` then ``start_ns`` (stable), with ``seq`` (int64: the row's position among its rank's
        rows of the group) and without ``_size``; and per other group of two or more members, in the same order, why it
        is not matched. One sort of the rows: linear in rows and members but for it.
    """
    window = np.asarray([r for r in ranks if r is not None], np.int64)  # (a one-trace window without a rank: none to match)
    gid = allk.groupby(["pg", "_members"], sort=True, dropna=True).ngroup().to_numpy()
    ok = gid >= 0  # (a row without a group name is in no group)
    rows = np.flatnonzero(ok)
    gid = gid[ok].astype(np.int64)
    n_groups = int(gid.max(initial=-1)) + 1
    r = allk["rank"]  # (a window of one trace without a rank: None, read as -1, no window rank)
    rank = (r.to_numpy(np.int64) if r.dtype.kind in "iu" else pd.Series(pd.to_numeric(r, errors="coerce")).fillna(-1).to_numpy(np.int64))[rows]
    code = allk["_members"].to_numpy(np.int64)[rows]
    first = np.full(n_groups, gid.size, np.int64)  # (a row of each group: its member list and name)
    np.minimum.at(first, gid, np.arange(gid.size, dtype=np.int64))
    g_code = code[first]
    # each group's members: its list's ranks in the window; without a list, the ranks holding it (a group smaller than
    # the window) or every rank
    l_num, l_rank = _parsed(members_by)
    l_rank_in = np.isin(l_rank, window)
    listed = np.isin(g_code, l_num) if l_num.size else np.zeros(n_groups, bool)
    size_max = np.full(n_groups, np.iinfo(np.int64).min, np.int64)
    np.maximum.at(size_max, gid, allk["_size"].to_numpy(np.int64)[rows])
    holders = ~listed & (size_max > 0) & (size_max < window.size)
    every = ~listed & ~holders
    lg = np.flatnonzero(listed)
    order = np.argsort(l_num, kind="stable")
    lo, hi = np.searchsorted(l_num[order], g_code[lg], "left"), np.searchsorted(l_num[order], g_code[lg], "right")
    take = _ranges(lo, hi)
    m_group = [np.repeat(lg, hi - lo)[l_rank_in[order][take]], np.repeat(np.flatnonzero(every), window.size)]
    m_rank = [l_rank[order][take][l_rank_in[order][take]], np.tile(window, int(every.sum()))]
    base = int(min(window.min(initial=0), rank.min(initial=0)))  # (a key per group and rank: ranks may be negative)
    span = int(max(window.max(initial=0), rank.max(initial=0))) - base + 1
    held = holders[gid]
    m_key = np.unique(np.concatenate([*m_group, gid[held]]) * span + np.concatenate([*m_rank, rank[held]]) - base)  # (by group, then rank)
    m_group, m_rank = m_key // span, m_key % span + base
    n_members = np.bincount(m_group, minlength=n_groups)
    keys, counts = np.unique(gid * span + rank - base, return_counts=True)  # (rows per group and rank; a member without rows: 0)
    at = np.minimum(np.searchsorted(keys, m_key), max(keys.size - 1, 0))
    m_count = np.where(keys[at] == m_key, counts[at], 0) if keys.size else np.zeros(m_key.size, np.int64)
    c_min = np.full(n_groups, np.iinfo(np.int64).max, np.int64)
    c_max = np.full(n_groups, -1, np.int64)
    np.minimum.at(c_min, m_group, m_count)
    np.maximum.at(c_max, m_group, m_count)
    big = n_members >= 2
    uneven = big & (c_min != c_max)
    # each rank's k-th row of its group, and the groups whose k-th rows differ in type
    o = np.lexsort((allk["start_ns"].to_numpy(np.int64)[rows], rank, gid))
    g_o, r_o = gid[o], rank[o]
    run = np.ones(o.size, bool)
    run[1:] = (g_o[1:] != g_o[:-1]) | (r_o[1:] != r_o[:-1])
    starts = np.flatnonzero(run)
    seq = np.arange(o.size, dtype=np.int64) - np.repeat(starts, np.diff(np.append(starts, o.size)))
    kind = pd.factorize(allk["collective"].to_numpy(dtype=object)[rows][o])[0].astype(np.int64)
    typed = kind >= 0  # (a row without a type counts no type, as nunique)
    n_seq = int(seq.max(initial=0)) + 1
    s_key = g_o[typed] * n_seq + seq[typed]
    uk, inv = np.unique(s_key, return_inverse=True)
    k_min = np.full(uk.size, np.iinfo(np.int64).max, np.int64)
    k_max = np.full(uk.size, -1, np.int64)
    np.minimum.at(k_min, inv, kind[typed])
    np.maximum.at(k_max, inv, kind[typed])
    dk = uk[k_min != k_max]
    first_seq = np.full(n_groups, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(first_seq, dk // n_seq, dk % n_seq)
    mixed = big & ~uneven & (first_seq < np.iinfo(np.int64).max)
    keep = big & ~uneven & ~mixed
    kept = keep[g_o]
    out = allk.iloc[rows[o[kept]]].drop(columns="_size").reset_index(drop=True)
    out["seq"] = seq[kept]
    pg = allk["pg"].to_numpy(dtype=object)[rows][first]
    why = []
    for g in np.flatnonzero(uneven | mixed).tolist():  # (the groups that do not match: each said once)
        label = f"process group {pg[g]!r}" if pg[g] else "collectives without a process group"
        if uneven[g]:
            sel = slice(*np.searchsorted(m_group, [g, g + 1]).tolist())
            why.append(f"{label}: " + ", ".join(f"rank {r} has {c}" for r, c in zip(m_rank[sel].tolist(), m_count[sel].tolist()))
                       + ": not matched")
        else:
            why.append(f"{label}: collective {int(first_seq[g])} differs in type across ranks: not matched")
    return out, why


def _ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The indices ``lo[i]..hi[i]-1`` of every i, concatenated (int64)."""
    n = hi - lo
    if not n.size or n.sum() == 0:
        return np.zeros(0, np.int64)
    return np.repeat(lo - np.cumsum(n) + n, n) + np.arange(int(n.sum()), dtype=np.int64)
