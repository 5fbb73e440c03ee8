"""Process groups' members: which ranks of a window take part in a group's collectives, and the groups whose name
stands for groups of different members.

A collective carries its group's member list (``pg_ranks``, from ``distributedInfo.pg_config``), a string that names
up to thousands of ranks: lists are numbered once (hashed per string object, never sorted by content) and grouped by
number (:func:`member_codes`).
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


def group_members(members: str, g: pd.DataFrame, ranks: tuple[int, ...]) -> tuple[int, ...]:
    """The ranks of the window in one process group: its ``pg_config`` members where the traces list them, else the
    ranks holding its collectives (``g``: its rows, columns ``rank`` and ``_size``, the ``Group size``) where the group
    is smaller than the window, else every rank."""
    if members:
        listed = {int(r) for r in members.split(",")}
        return tuple(r for r in ranks if r in listed)
    sizes = g["_size"].to_numpy(np.int64)
    if sizes.size and 0 < int(sizes.max()) < len(ranks):
        return tuple(sorted({int(r) for r in g["rank"].tolist()}))
    return ranks


def shared_names(k: pd.DataFrame) -> list[str]:
    """The process group names that stand for groups of different members (``split_group`` names each rank's own
    group alike): such a name is shown with its members, ``1[2,3]`` (``k``: matched rows, ``pg`` and ``_members``, the
    number of their member list)."""
    n = k.groupby("pg")["_members"].nunique()
    return n.index[n.to_numpy() > 1].tolist()
