"""Stopwatch against evidence: do a workload's wall-clock timings agree with its traces?

For the variants of one workload recorded by ``traceprobe record`` (same folder,
manifest facts in ``OverlapReport.info``; each variant is one run of
:func:`.run.build_runs`):

- the *baseline* of a variant is the first variant of its workload in the manifest
  that ran on the same kind of device (all-CPU variants are compared with the
  first all-CPU one); ``record`` writes each workload's serial variant first;
- *speed-up* = baseline wall time / the variant's wall time (one timed run each,
  outside the profiler);
- *evidence* of parallelism: a figure whose verdict is ``confirmed`` or
  ``partial`` and whose value exceeds the baseline's for the same figure and
  subject by at least 0.05;
- the timings *agree* with the traces when there is evidence and a speed-up of at
  least ``GAIN`` (5%), or no evidence and no such speed-up.
"""

from __future__ import annotations

import pandas as pd

from .per_trace import OverlapReport
from .run import Run, build_runs

GAIN = 1.05
MARGIN = 0.05


def _device_kind(r: OverlapReport) -> str:
    devs = r.info.get("devices") or []
    return "cpu" if devs and all(str(d) == "cpu" for d in devs) else "gpu"


def _best(r: OverlapReport) -> dict[tuple[str, str], tuple[float, str]]:
    out: dict[tuple[str, str], tuple[float, str]] = {}
    for v in r.verdicts:
        key = (v.figure, v.subject.split(" (rank")[0])
        if key not in out or v.value > out[key][0]:
            out[key] = (v.value, v.level)
    return out


def _evidence(r: OverlapReport, base: OverlapReport) -> list[str]:
    mine, theirs = _best(r), _best(base)
    found = []
    for (figure, subject), (value, level) in mine.items():
        if level in ("confirmed", "partial") and value >= theirs.get((figure, subject), (0.0, ""))[0] + MARGIN:
            found.append(f"{figure} {subject} {value:.0%}")
    return found


MIN_WALL_S = 0.005
"""Timed runs shorter than this (s) are not compared: at a few ms one run's noise (a CPU-only
record printed 436x) is larger than any effect."""


def variant_summary(reports: list[OverlapReport] | None = None, runs: list[Run] | None = None) -> pd.DataFrame:
    """One row per recorded run with a wall time (its first window's lowest rank stands for it).

    Args:
        reports: per-trace reports, grouped with :func:`.run.build_runs`; or
        runs: runs already built (one of the two).

    Returns:
        DataFrame with columns ``run`` (str, the folder of the recording),
        ``workload``, ``variant``, ``baseline`` (str),
        ``wall_s``, ``baseline_wall_s``, ``speedup`` (float64), ``evidence`` (str:
        the figures that show more parallelism than the baseline, ``""`` if none)
        ``agreement`` (``baseline``, ``agrees``, ``disagrees``, or ``too short`` when
        either timed run is under ``MIN_WALL_S``: clock noise, not compared) and ``reading``
        (str, one sentence for a person). Rows in manifest order within each
        folder. Empty when no report carries manifest facts.
    """
    cols = ["run", "workload", "variant", "baseline", "wall_s", "baseline_wall_s", "speedup", "evidence", "agreement", "reading"]
    if runs is None:
        runs = build_runs(reports or [])
    picks: list[tuple[str, int, OverlapReport]] = []
    for run in runs:
        timed = [r for r in run.reports if r.info.get("workload") and r.info.get("variant") and r.info.get("wall_s") is not None]
        if timed:
            picks.append((run.folder, int(timed[0].info.get("order", 0)), timed[0]))
    picks.sort(key=lambda p: (p[0], p[1]))
    rows = []
    baselines: dict[tuple[str, str, str], OverlapReport] = {}
    for folder, _, r in picks:
        w, v = r.info["workload"], r.info["variant"]
        base = baselines.setdefault((folder, w, _device_kind(r)), r)
        wall, bwall = float(r.info["wall_s"]), float(base.info["wall_s"])
        speedup = bwall / wall if wall > 0 else float("nan")
        if base is r:
            rows.append([folder, w, v, v, wall, bwall, 1.0, "", "baseline", "the serial form the others are timed against"])
            continue
        if min(wall, bwall) < MIN_WALL_S:
            rows.append([folder, w, v, base.info["variant"], wall, bwall, speedup, "", "too short",
                         f"timed runs under {MIN_WALL_S * 1e3:.0f} ms: clock noise, not compared"])
            continue
        ev = _evidence(r, base)
        faster = speedup >= GAIN
        rows.append([folder, w, v, base.info["variant"], wall, bwall, speedup, "; ".join(ev),
                     "agrees" if bool(ev) == faster else "disagrees", _reading(bool(ev), faster, speedup)])
    return pd.DataFrame(rows, columns=cols)


def _reading(evidence: bool, faster: bool, speedup: float) -> str:
    if evidence and faster:
        return "faster, and the trace shows the overlap"
    if evidence:
        return "overlap in the trace, no gain on the clock"
    if faster:
        return "faster, but not from parallelism: less work or waiting"
    return "no overlap, no gain"
