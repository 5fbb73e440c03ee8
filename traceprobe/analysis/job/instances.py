"""The instances of a window's matched collectives: each member's k-th collective of a process group is one instance
(:func:`.collectives.match_rows`), numbered in (``pg``, ``seq``) order, and each instance's figures across its members
(sizes, first and last arrival and end, waits, the last arrival's rank), reduced on arrays."""

from __future__ import annotations

import numpy as np
import pandas as pd


def instances(k: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The collective instances of matched rows ``k`` (:func:`.process_groups.matched_groups`: ``pg`` named, ``seq``
    int64): each row's instance, numbered in (``pg``, ``seq``) order as a sorted groupby numbers them (``pg`` in
    :func:`pandas.factorize`'s sorted order), and each instance's first row (int64 each)."""
    pg, _ = pd.factorize(k["pg"], sort=True)
    seq = k["seq"].to_numpy(np.int64)
    if len(k) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    lo = int(seq.min())
    keys, gid = np.unique(pg.astype(np.int64) * (int(seq.max()) - lo + 1) + (seq - lo), return_inverse=True)
    gid = gid.ravel().astype(np.int64)
    first = np.full(keys.size, len(k), np.int64)
    np.minimum.at(first, gid, np.arange(len(k), dtype=np.int64))
    return gid, first


def per_instance(k: pd.DataFrame, gid: np.ndarray, first: np.ndarray, last_op: np.ndarray) -> pd.DataFrame:
    """Per collective instance (:func:`instances`, in their order): ``pg``, ``seq`` and ``collective`` of its first
    row (dtypes as ``k``'s), ``bytes`` (the largest), ``ranks`` (its rows), ``first_start``, ``last_start``,
    ``first_end``, ``last_end`` (int64 ns: the least and largest of its rows'), ``wait`` (its rows' ``wait_ns`` summed)
    and ``last_rank`` (the rank of its last arrival, ``last_op``)."""
    g = first.size
    o = np.argsort(gid, kind="stable")
    at = np.searchsorted(gid[o], np.arange(g))  # (every instance has a row)

    def reduced(col: str, how: np.ufunc) -> np.ndarray:
        v = k[col].to_numpy(np.int64)[o]
        return how.reduceat(v, at) if g else np.zeros(0, np.int64)

    b = k["bytes"]
    if b.dtype.kind in "iu":
        size = np.maximum.reduceat(b.to_numpy()[o], at) if g else b.to_numpy()[:0]
    else:  # (a column of floats or objects: the largest value that is not NaN, as pandas takes it)
        size = np.asarray(pd.Series(b.to_numpy()).groupby(gid).max())
    out = {"pg": k["pg"].take(first).reset_index(drop=True), "seq": k["seq"].to_numpy(np.int64)[first],
           "collective": k["collective"].take(first).reset_index(drop=True), "bytes": size,
           "ranks": np.bincount(gid, minlength=g).astype(np.int64),
           "first_start": reduced("start_ns", np.minimum), "last_start": reduced("start_ns", np.maximum),
           "first_end": reduced("end_ns", np.minimum), "last_end": reduced("end_ns", np.maximum),
           "wait": reduced("wait_ns", np.add), "last_rank": k["rank"].take(last_op).reset_index(drop=True)}
    return pd.DataFrame(out)
