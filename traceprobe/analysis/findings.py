"""Ranked findings: how much time each problem could give back at most, and how.

Definitions (quoted by the README). A *finding* names a span of device time that
the trace shows was lost, and its *headroom*: the wall time it covers, the most
that fixing it could save. The kinds, each per device (subject ``cuda:d``,
``rank r cuda:d`` in a ranked trace), built from the interval sets of
:mod:`.breakdown`:

- ``exposed_copy`` (per device and direction): memcpys of that direction with
  neither compute nor communication beside them, P_x \\ (C ∪ M).
- ``exposed_comm``: communication kernels with no compute beside them, M \\ C.
- ``idle_launch``: the device idle with nothing queued, the host late to launch
  (a host-bound launch loop).
- ``stream_wait`` (per device and stream): the device idle although work was
  already queued on that stream: it waited on an event of another stream or
  device.
- ``cross_device``: the device idle while another device of the trace was busy.
- ``idle_sync``: the device idle while the host was blocked in a synchronize.

No double counting (as nsys-ai ranks its findings): one span of wall time is
claimed by one finding only. Candidates are taken in three tiers, each largest
first: the direct causes (exposed copies and communication, launch-bound idle,
stream waits), then ``cross_device``, then ``idle_sync`` (a host blocked while
another device works is waiting on that device: the cross-device finding says
more). Each keeps only the part of its span that no earlier finding claimed. So the
headrooms of a trace add up to at most its window. Findings whose headroom is
under :data:`MIN_SHARE` of the window are dropped; the rest are listed largest
first.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import intervals as iv
from ..trace import Trace
from .breakdown import DeviceTime, device_times
from .busy import copy_directions, copy_mask, pageable_copies
from .memo import device_column

MIN_SHARE = 0.02
"""Findings under this fraction of the window are not listed."""

COLUMNS = ["kind", "subject", "device", "headroom_ns", "text"]


@dataclass(frozen=True)
class _Candidate:
    kind: str
    subject: str
    device: int
    span: iv.Intervals
    advice: str


def _ms(ns: int) -> str:
    return f"{ns / 1e6:,.1f} ms"


def _subject(trace: Trace, device: int) -> str:
    return f"rank {trace.rank} cuda:{device}" if trace.rank is not None else f"cuda:{device}"


def _copy_candidates(trace: Trace, t: DeviceTime) -> list[_Candidate]:
    lo, hi = t.window
    m = (device_column(trace, "device") == t.device) & copy_mask(trace)
    if not m.any():
        return []
    dirs = copy_directions(trace)[m]
    start = np.clip(device_column(trace, "start_ns")[m], lo, hi)
    end = np.clip(device_column(trace, "end_ns")[m], lo, hi)
    pageable = pageable_copies(trace)[m]
    out = []
    for x in dict.fromkeys(dirs.tolist()):
        g = dirs == x
        span = iv.subtract(iv.union(start[g], end[g]), t.compute_or_comm)
        how = "from pinned (page-locked) memory, " if pageable[g].any() else ""
        out.append(_Candidate("exposed_copy", f"{_subject(trace, t.device)} {x}", t.device, span,
                              f"{x} copies on cuda:{t.device} ran with nothing else on the device: issue them {how}on a side "
                              "stream, ordered by CUDA events, so compute hides them"))
    return out


def _candidates(trace: Trace, t: DeviceTime, others_busy: iv.Intervals) -> list[list[_Candidate]]:
    """The device's candidates in three tiers: direct causes, cross-device, host blocked in a sync."""
    d, subj = t.device, _subject(trace, t.device)
    first = _copy_candidates(trace, t) + [
        _Candidate("exposed_comm", subj, d, iv.subtract(t.compute_or_comm, t.compute),
                   f"communication on {subj} ran with no compute beside it: overlap it with compute "
                   "(DDP gradient buckets, FSDP prefetch, async collectives)"),
        _Candidate("idle_launch", subj, d, t.idle_launch,
                   f"cuda:{d} was idle with nothing queued: the host launches too slowly (a host-bound loop); "
                   "fuse small kernels, use CUDA graphs or torch.compile, or move host work off the loop"),
    ]
    first += [
        _Candidate("stream_wait", f"{subj} stream {s}", d, span,
                   f"cuda:{d} was idle while work queued on stream {s} waited on another stream or device: "
                   "start the producer earlier or split the work so the wait overlaps other work")
        for s, span in t.idle_queued.items()
    ]
    cross = []
    if others_busy[0].size:
        cross.append(_Candidate("cross_device", subj, d, iv.intersect(t.idle(), others_busy),
                                f"cuda:{d} was idle while another device worked: balance the work across devices, "
                                "run them at once, or pipeline it (micro-batches)"))
    sync = [_Candidate("idle_sync", subj, d, t.idle_sync,
                       f"cuda:{d} was idle while the host was blocked in a synchronize: remove the sync from the loop "
                       "(.item(), .cpu(), printing a tensor, torch.cuda.synchronize) or defer it")]
    return [first, cross, sync]


def _empty() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series([], dtype=np.int64 if c in ("device", "headroom_ns") else object) for c in COLUMNS})


def findings(trace: Trace, window: tuple[int, int] | None = None, min_share: float = MIN_SHARE) -> pd.DataFrame:
    """Ranked findings of one trace (module docstring).

    Args:
        window: (lo, hi) in ns; default the trace window.
        min_share: drop findings under this fraction of the window.

    Returns:
        DataFrame, largest headroom first: ``kind`` (str), ``subject`` (str),
        ``device`` (int64), ``headroom_ns`` (int64, wall time no other finding
        claims), ``text`` (str: the time, what happened, what to try). The
        headrooms sum to at most the window.
    """
    times = device_times(trace, window)
    if not times:
        return _empty()
    lo, hi = times[0].window
    tiers: list[list[_Candidate]] = [[], [], []]
    for t in times:
        others = [o.busy for o in times if o.device != t.device]
        for tier, cands in zip(tiers, _candidates(trace, t, iv.coverage_at_least(others, 1))):
            tier += cands
    claimed = iv.empty()
    rows = []
    for group in tiers:
        for c in sorted(group, key=lambda c: -iv.length(c.span)):
            own = iv.subtract(c.span, claimed)
            ns = iv.length(own)
            if ns <= 0:
                continue
            claimed = iv.union(np.concatenate([claimed[0], own[0]]), np.concatenate([claimed[1], own[1]]))
            rows.append((c.kind, c.subject, c.device, ns, f"{_ms(ns)}: {c.advice}"))
    headroom = np.array([r[3] for r in rows], dtype=np.int64)
    keep = np.flatnonzero(headroom >= min_share * max(hi - lo, 0))
    picked = [rows[i] for i in keep[np.argsort(-headroom[keep], kind="stable")].tolist()]  # (one DataFrame, built once)
    if not picked:
        return _empty()
    return pd.DataFrame({
        "kind": [r[0] for r in picked],
        "subject": [r[1] for r in picked],
        "device": np.array([r[2] for r in picked], dtype=np.int64),
        "headroom_ns": np.array([r[3] for r in picked], dtype=np.int64),
        "text": [r[4] for r in picked],
    })
