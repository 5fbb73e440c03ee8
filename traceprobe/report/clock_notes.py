"""The clocks across ranks for people: what the table and the Markdown say of :attr:`Summary.clocks`.

The estimates are :func:`traceprobe.analysis.job.clocks.estimate_clocks`'s, one per window of two or more
ranks; nothing is computed here. A window is *reported* when there is an offset to report or a failure
to say: its clocks differ beyond the uncertainty (``differ``), or the data it holds could not support an
estimate (``supported`` False although the window has collectives of the kinds used). Windows whose clocks
agree within the uncertainty (ranks of one host) and windows with no such collective (point-to-point
pipelines) are not. Offsets and uncertainties are durations with their unit (``+5.0 ms ± 56.4 µs``),
drift in ppm (1 ppm = 1 µs per s).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from . import units

if TYPE_CHECKING:
    from ..analysis.job.clocks import ClockEstimate
    from ..analysis.summary import Summary

NO_EVIDENCE = ("fewer than two ranks", "no matched ")
"""Beginnings of the reasons that mean the window holds no evidence at all: nothing to report."""
LISTED = 8
"""Most offsets one table line names (the largest); the Markdown lists every rank."""
ALL_RANKS = "every rank: traceprobe job --format json"


def reported(summary: Summary) -> list[ClockEstimate]:
    """The windows with clocks to report (module doc), in the summary's order."""
    return [c for c in getattr(summary, "clocks", ()) if c.differ or (not c.supported and not c.reason.startswith(NO_EVIDENCE))]


def offset(offset_ns: int, uncertainty_ns: int) -> str:
    """``+5.0 ms ± 56.4 µs``: a signed offset and its uncertainty, each in its own unit."""
    return f"{'+' if offset_ns >= 0 else ''}{units.duration(offset_ns)} ± {units.duration(uncertainty_ns)}"


def _drift(ppm: float, unc_ppm: float) -> str:
    return f"drift {ppm:+,.1f} ± {unc_ppm:,.1f} ppm"


def _others(c: ClockEstimate) -> pd.DataFrame:
    """The ranks other than the reference, largest \\|offset\\| first."""
    r = pd.DataFrame(c.ranks[c.ranks["rank"] != c.reference])
    return r.iloc[np.argsort(-np.abs(r["offset_ns"].to_numpy(np.int64)), kind="stable")]


def _ranks(ranks: list[int]) -> str:
    """``rank 3`` or ``ranks 4-7, 12``: consecutive ranks as ranges."""
    r = sorted(ranks)
    runs: list[list[int]] = []
    for k in r:
        if runs and k == runs[-1][1] + 1:
            runs[-1][1] = k
        else:
            runs.append([k, k])
    text = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
    return f"rank{'s' if len(r) > 1 else ''} {text}"


def cannot_estimate(c: ClockEstimate) -> str:
    """Why a window's offsets are not estimated, for a person."""
    return f"cannot estimate the offsets between ranks ({c.reason}); times are compared as recorded"


def clock_line(c: ClockEstimate, run: str) -> str:
    """One window in one line: the ranks' offsets from the reference rank's clock, ranks that read the same
    offset and uncertainty together (the ranks of one host, usually), at most :data:`LISTED` groups, largest
    offset first; or why they cannot be estimated."""
    if not c.supported:
        return f"clocks of {run} {c.window}: {cannot_estimate(c)}"
    r = _others(c)
    groups: dict[str, list[int]] = {}
    for k, o, u in zip(r["rank"].tolist(), r["offset_ns"].tolist(), r["uncertainty_ns"].tolist()):
        groups.setdefault(offset(int(o), int(u)), []).append(int(k))
    parts = [f"{_ranks(ks)} {text}" for text, ks in groups.items()]
    rest = sum(len(ks) for ks in list(groups.values())[LISTED:])
    more = f", and {rest} more rank(s) ({ALL_RANKS})" if rest else ""
    return (f"clocks of {run} {c.window} differ (offsets from rank {c.reference}'s clock, from collective ends): "
            f"{', '.join(parts[:LISTED])}{more}; --align-clocks compares skew and waits on rank {c.reference}'s clock")


def clock_head(c: ClockEstimate) -> str:
    """The sentence above a window's table of offsets (:func:`clock_rows`), or why there is none."""
    if not c.supported:
        return cannot_estimate(c)
    return (f"clocks differ beyond the uncertainty (offsets from rank {c.reference}'s clock at the middle of the window, from "
            f"collective ends); --align-clocks compares skew and waits on rank {c.reference}'s clock")


def clock_rows(c: ClockEstimate) -> pd.DataFrame:
    """One supported window's ranks for a table: ``rank``, ``offset`` (from the reference's clock, with its
    uncertainty), ``drift`` (ppm, ``-`` where none was fitted), ``collectives`` (ends used), ``status``."""
    r = c.ranks
    return pd.DataFrame({
        "rank": r["rank"].astype("int64").to_numpy(),
        "offset": ["reference" if s == "reference" else offset(int(o), int(u))
                   for o, u, s in zip(r["offset_ns"], r["uncertainty_ns"], r["status"])],
        "drift": [_drift(float(p), float(pu)) if s == "offset and drift" else "-"
                  for p, pu, s in zip(r["drift_ppm"], r["drift_uncertainty_ppm"], r["status"])],
        "collectives": r["collectives"].astype("int64").to_numpy(),
        "status": r["status"].astype(str).to_numpy(),
    })
