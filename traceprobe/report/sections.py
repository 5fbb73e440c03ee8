"""One trace's tables by section name: what the CSV and Markdown renderers lay out."""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import pandas as pd

from ..analysis.collectives import WindowCollectives
from ..analysis.report import OverlapReport


def integer_ns(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with every ``*_ns`` column and every integer column as nullable integers
    (``Int64``): a column with a missing value would otherwise turn float and print
    ``130931209.0`` or ``1.30931e+08``."""
    cols = [c for c in df.columns if (str(c).endswith("_ns") and df[c].dtype.kind in "fiu") or df[c].dtype.kind in "iu"]
    if not cols:
        return df
    out = df.copy()
    for c in cols:
        out[c] = pd.array(out[c].round(), dtype="Int64")
    return out


def rank_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The rank summary with ``min``, ``median``, ``max`` as integers on the rows of ``*_ns``
    figures (rounded to the ns; a median of two ranks can end in .5) and fractions elsewhere."""
    if df.empty:
        return df
    out = df.astype({c: object for c in ("min", "median", "max")})
    is_ns = out["figure"].astype(str).str.endswith("_ns").to_numpy()
    for c in ("min", "median", "max"):
        out[c] = pd.Series([None if pd.isna(v) else (int(round(v)) if t else float(v)) for v, t in zip(df[c], is_ns)],
                           index=out.index, dtype=object)
    return out


TOP_KERNELS = 10
"""Kernel names shown per device."""


def top_kernels(r: OverlapReport, n: int = TOP_KERNELS) -> pd.DataFrame:
    """The ``n`` kernel names with the most device time on each device (the report's table is sorted so)."""
    k = r.kernels
    if k.empty:
        return k
    # the first n rows of each device, in table order (groupby("device").head(n), without a groupby)
    codes = pd.factorize(k["device"].to_numpy())[0]
    order = np.argsort(codes, kind="stable")
    starts = np.flatnonzero(np.r_[True, codes[order][1:] != codes[order][:-1]])
    rank = np.empty(len(k), dtype=np.int64)
    rank[order] = np.arange(len(k)) - np.repeat(starts, np.diff(np.r_[starts, len(k)]))
    keep = np.flatnonzero(rank < n)
    return k if keep.size == len(k) else k.iloc[keep].reset_index(drop=True)


def sections(r: OverlapReport) -> dict[str, pd.DataFrame]:
    """The report's tables by section name."""
    c = r.cpu_gpu
    return {
        "streams": r.streams,
        "copy_overlap": r.copy_overlap,
        "devices": r.devices.devices,
        "stream_concurrency": r.stream_concurrency,
        "comm_overlap": r.comm_overlap,
        "cpu_gpu": pd.DataFrame([asdict(c)]),
        "host_threads": pd.DataFrame([asdict(r.host_threads)] if r.host_threads is not None else []),
        "steps": r.steps,
        "breakdown": r.breakdown,
        "breakdown_steps": r.breakdown_steps,
        "findings": r.findings,
        "kernels": top_kernels(r),
        "queue": r.queue,
        "set_aside": r.set_aside,
        "verdicts": pd.DataFrame([asdict(v) for v in r.verdicts], columns=["figure", "subject", "value", "level", "text"]),
    }


def collective_sections(c: WindowCollectives) -> dict[str, pd.DataFrame]:
    """One window's collectives across ranks: the per-rank wait and the per-type and per-size tables."""
    wait = pd.DataFrame({"rank": list(c.wait_ns), "wait_ns": list(c.wait_ns.values())})
    wait["straggler"] = wait["rank"] == c.straggler_rank
    return {"collective_wait": wait, "collective_types": c.by_type, "collective_sizes": c.by_size}
