"""One trace's tables by section name: what the CSV and Markdown renderers lay out."""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import pandas as pd

from ..analysis.device.profiled import set_aside_notes
from ..analysis.job.collectives import WindowCollectives
from ..analysis.per_trace import OverlapReport
from .units import duration


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
    """The report's tables by section name; the figures computed by a function of their own
    (:data:`traceprobe.analysis.registry.COMPUTED`) last, each by its key."""
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
        **r.extra,
    }


def collective_sections(c: WindowCollectives) -> dict[str, pd.DataFrame]:
    """One window's collectives across ranks: the per-rank wait and the per-type and per-size tables."""
    wait = pd.DataFrame({"rank": list(c.wait_ns), "wait_ns": list(c.wait_ns.values())})
    wait["straggler"] = wait["rank"] == c.straggler_rank
    return {"collective_wait": wait, "collective_types": c.by_type, "collective_sizes": c.by_size}


def aside_lines(aside: pd.DataFrame, backend: str = "cuda") -> list[str]:
    """The set-aside work of one trace (its ``set_aside`` table), one line per reason, devices named by ``backend``:
    ``launched before ... : left out on cuda:0: communication 0.7 ms (2 kernels), compute 0.9 ms (17 kernels)``."""
    out = []
    for reason, g in aside.groupby("reason", sort=False):
        parts = []
        for device, d in g.groupby("device", sort=False):
            works = ", ".join(f"{w} {duration(ns)} ({n:,} {'kernels' if w in ('compute', 'communication') else 'events'})"
                              for w, n, ns in zip(d["work"], d["events"], d["busy_ns"]))
            parts.append(f"{backend}:{device}: {works}")
        out.append(f"{reason}, left out: " + "; ".join(parts))
    return out


def trace_notes(r: OverlapReport) -> list[str]:
    """A trace's notes with its set-aside work as :func:`aside_lines` (one line per reason, not per kind of work)."""
    own = set(set_aside_notes(r.set_aside, r.backend)) if not r.set_aside.empty else set()
    if not any(n in own for n in r.notes):  # (with --all-device-work the notes say the work was kept: as they are)
        return list(r.notes)
    return aside_lines(r.set_aside, r.backend) + [n for n in r.notes if n not in own]
