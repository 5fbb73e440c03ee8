"""All ranks of one profiler window in one native Perfetto trace (``export --merge-ranks``).

Each rank's trace is laid out as :func:`.perfetto.write_perfetto` lays out one
trace, then placed under one process named ``rank N`` (its own synthetic pid,
``RANK_PID_BASE + N``, so that ranks never share a pid): the rank's devices
(``cuda:d``, with their streams and derived ``overlap`` and ``busy streams``
tracks), its host processes and threads (as named tracks), its ``busy devices``
counter and ``traceprobe verdicts``, and first a ``collectives`` track holding a
copy of each communication kernel (HTA/NCCL naming, ``is_comm``), so that the
collectives of all ranks lie side by side at the top of each rank. Ranks are
ordered by number; launch flows stay within their rank.

Clocks: the timestamps are written as each rank recorded them (Kineto's host
clock, in ns); nothing is shifted, unless a clock estimate that says the clocks
differ is given (``clocks``, :func:`traceprobe.analysis.job.clocks.estimate_clocks`,
``--align-clocks``): then every timestamp of rank r is put on the reference rank's
clock, t - x_r(t). Ranks of one host share that clock; ranks of
several hosts are aligned only as well as the hosts' clocks are. What the
collectives say of it (``clock``, from
:func:`traceprobe.analysis.job.collectives`) is written on a top-level
``clocks`` track over the window and returned by :meth:`MergedExport.describe`.

Claims: given each rank's first-screen claim (:func:`.actions.tops_by_path`, the JSON document's ``top_claims``), a
top-level ``traceprobe claims`` track over the window (the ranks' report windows together, on the reference clock
where shifted), one slice per distinct claim with the ranks whose claim it is (:mod:`.perfetto_claims`), as one
trace's export has.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..analysis.job.clocks import ClockEstimate
from ..analysis.per_trace import OverlapReport
from ..reading import Trace
from .actions import Top
from .perfetto import _DEVICE, CHUNK_PACKETS, _annotators, _layout, write_packets
from .perfetto_claims import claims_packets, window_claims

RANK_PID_BASE = 1 << 28
"""Process id of rank N's process: ``RANK_PID_BASE + N``."""
FLOW_STRIDE = 1 << 40
"""Launch flow ids of the k-th rank are offset by ``k * FLOW_STRIDE`` (unique across ranks)."""
CROSS_FLOW_BASE = 1 << 60
"""Flow ids of the critical path's crossings between ranks: ``CROSS_FLOW_BASE + i`` (above every launch flow's)."""
_SRC_STRIDE = 8
_CLOCK = 7


@dataclass(frozen=True)
class MergedExport:
    """What :func:`write_perfetto_ranks` wrote: file, ranks, slice counts and the clock statement."""

    path: str
    ranks: tuple[int, ...]
    packets: int
    device_slices: int
    collective_slices: int
    clock: str
    shifted: bool = False
    claims: int = 0

    def describe(self) -> str:
        """One line for a person."""
        how = "put on one rank's clock by the offsets estimated from collectives" if self.shifted else "as each rank recorded them, not shifted"
        return (f"wrote {self.path}: ranks {', '.join(map(str, self.ranks))} as processes \"rank N\", "
                f"{self.device_slices:,} device slices, {self.collective_slices:,} collectives side by side; "
                f"clocks: timestamps {how} ({self.clock})")


def _path_slices(path: pd.DataFrame, first_name: int) -> pd.DataFrame:
    """One rank's critical path segments as slices (``start``, ``end``, ``name_iid`` from ``first_name`` on, ``label``):
    a host stretch (its classes share their bounds) becomes one slice named by its largest class."""
    if path.empty:
        return pd.DataFrame({c: pd.Series([], dtype=object if c == "label" else np.int64)
                             for c in ("start", "end", "name_iid", "row", "flow_out", "flow_in", "label")})
    key = ["lane", "start_ns", "end_ns"]
    flows = {c: path.groupby(key)[c].transform("max") if c in path.columns else 0 for c in ("flow_out", "flow_in")}
    p = path.assign(**flows).sort_values("ns", ascending=False, kind="stable").drop_duplicates(key)
    p = p.sort_values("start_ns", kind="stable")
    label = [f"{c}: {n}" if n else c for c, n in zip(p["cause"], p["name"])]
    n = len(p)
    s, e = p["start_ns"].to_numpy(np.int64), p["end_ns"].to_numpy(np.int64)
    return pd.DataFrame({"start": s, "end": np.maximum(e, s),
                         "name_iid": np.arange(first_name + 1, first_name + n + 1, dtype=np.int64), "row": np.full(n, -1, np.int64),
                         "flow_out": p["flow_out"].to_numpy(np.int64), "flow_in": p["flow_in"].to_numpy(np.int64), "label": label})


def _crossings(path: pd.DataFrame) -> pd.DataFrame:
    """The critical path (last segment first) with a flow where it crosses ranks: ``flow_out`` on the earlier
    rank's segment, ``flow_in`` on the later one's, the same id (:data:`CROSS_FLOW_BASE` + the later segment's row)."""
    path = path.reset_index(drop=True)
    r = path["rank"].to_numpy(np.int64)
    cross = np.flatnonzero(r[1:] != r[:-1])  # (row i and the row before it in time, i + 1, are on different ranks)
    f_in, f_out = np.zeros(len(path), np.int64), np.zeros(len(path), np.int64)
    f_in[cross] = CROSS_FLOW_BASE + cross
    f_out[cross + 1] = CROSS_FLOW_BASE + cross
    return path.assign(flow_out=f_out, flow_in=f_in)


def write_perfetto_ranks(items: Sequence[tuple[int, Trace, OverlapReport]], path: str | Path, clock: str = "",
                         chunk_packets: int = CHUNK_PACKETS, clocks: ClockEstimate | None = None,
                         critical: pd.DataFrame | None = None, claims: Sequence[tuple[int, Top]] = ()) -> MergedExport:
    """Write the traces of one window's ranks as one ``.pftrace`` (module doc).

    Args:
        items: ``(rank, trace, report)`` per rank.
        path: output file (gzipped if it ends in ``.gz``).
        clock: what is known of the ranks' clocks (e.g. the collectives' ``clock``).
        chunk_packets: packets per chunk written.
        clocks: the window's clock estimate; where it says the clocks differ (``differ``), every rank's
            timestamps are put on its reference rank's clock (module doc).
        critical: the window's critical path (:func:`traceprobe.analysis.causal.critical_path.critical_path`): drawn on a
            ``critical path`` track of each rank it crosses, one slice per segment (``cause: name``; a host stretch
            named by its largest class), with a flow from one rank's segment to the next where the path crosses ranks.
        claims: ``(rank, claim)``, each rank's first-screen claim (:func:`.actions.tops_by_path`), for the claims'
            track (module doc); none: no track.
    """
    shift = clocks is not None and clocks.differ
    if critical is not None and len(critical):
        critical = _crossings(critical)
    rows: list[dict] = []
    names: list[str] = []
    parts, counters, fills = [], [], {}
    windows: list[tuple[int, int]] = []
    for k, (rank, trace, report) in enumerate(sorted(items, key=lambda x: x[0])):
        r_rows, r_names, slices, cnt, _, _, _ = _layout(trace, report)
        base, nbase = len(rows), len(names)
        top = base + len(r_rows) + 1
        host_proc = {}
        for r in r_rows:
            r = {**r, "uuid": r["uuid"] + base}
            if "parent" in r:
                r["parent"] += base
            if "process" in r:  # a device or a host process: a child track of the rank
                pid = r.pop("process")
                if not r["name"].startswith("host process"):
                    r["ordered"] = True
                else:
                    host_proc[pid] = r["uuid"]
                r.setdefault("parent", top)
            elif "thread" in r:
                pid, _ = r.pop("thread")
                r["parent"] = host_proc.get(pid, top)
            else:
                r.setdefault("parent", top)
            rows.append(r)
        rows.append({"uuid": top, "name": f"rank {rank}", "process": RANK_PID_BASE + rank, "ordered": True, "rank": rank})
        comm = np.flatnonzero(trace.device_events["is_comm"].to_numpy()) if len(trace.device_events) else np.zeros(0, np.int64)
        coll = top + 1
        rows.append({"uuid": coll, "name": "collectives", "parent": top, "rank": 0})
        dev = slices[slices["src"] == _DEVICE]
        copies = dev.set_index("row").loc[comm].reset_index() if len(comm) else dev.iloc[:0]
        copies = copies.assign(track=coll, flow_out=0, flow_in=0)
        slices = pd.concat([slices, copies[slices.columns]], ignore_index=True)
        slices["track"] += np.where(slices["track"] == coll, 0, base)
        slices["name_iid"] += nbase
        slices["flow_out"] = np.where(slices["flow_out"] > 0, slices["flow_out"] + k * FLOW_STRIDE, 0)
        slices["flow_in"] = np.where(slices["flow_in"] > 0, slices["flow_in"] + k * FLOW_STRIDE, 0)
        slices["src"] += k * _SRC_STRIDE
        cnt = cnt.assign(track=cnt["track"] + base)
        if shift and clocks is not None:
            fix = clocks.correction_ns  # (the same rank's events, so one line per rank)
            slices = slices.assign(start=slices["start"] - fix(rank, slices["start"].to_numpy(np.int64)),
                                   end=slices["end"] - fix(rank, slices["end"].to_numpy(np.int64)))
            cnt = cnt.assign(ts=cnt["ts"] - fix(rank, cnt["ts"].to_numpy(np.int64)))
        w = np.asarray(report.window_ns, np.int64)
        w = w - clocks.correction_ns(rank, w) if shift and clocks is not None else w  # (on the reference clock, as the slices)
        windows.append((int(w[0]), int(w[1])))
        for src, fn in _annotators(trace, report).items():
            fills[src + k * _SRC_STRIDE] = fn
        names += r_names
        if critical is not None and len(critical):
            mine = _path_slices(critical.loc[critical["rank"].to_numpy() == rank], len(names))
            if len(mine):
                rows.append({"uuid": len(rows) + 1, "name": "critical path", "parent": top, "rank": 1})
                names += mine.pop("label").tolist()
                slices = pd.concat([slices, mine.assign(track=len(rows), src=_CLOCK)[slices.columns]], ignore_index=True)
        parts.append(slices)
        counters.append(cnt)
    lo = min((int(s["start"].min()) for s in parts if len(s)), default=0)
    hi = max((int(s["end"].max()) for s in parts if len(s)), default=0)
    how = f"put on rank {clocks.reference}'s clock ({clocks.describe()})" if shift and clocks is not None else "as each rank recorded them, not shifted"
    statement = f"clocks: timestamps {how}" + (f"; {clock}" if clock else "")
    names.append(statement)
    rows.append({"uuid": len(rows) + 1, "name": "clocks"})
    fills[_CLOCK] = lambda te, i: None
    parts.append(pd.DataFrame({"track": [len(rows)], "start": [lo], "end": [hi], "name_iid": [len(names)], "src": [_CLOCK], "row": [-1],
                               "flow_out": [0], "flow_in": [0]}))
    slices = pd.concat(parts, ignore_index=True).astype(np.int64)
    cnt = pd.concat(counters, ignore_index=True) if counters else pd.DataFrame({"track": [], "ts": [], "value": []}, dtype=np.int64)
    tops, held = window_claims(claims)
    span = (min(w[0] for w in windows), max(w[1] for w in windows)) if windows else (0, 0)
    packets = write_packets(path, rows, names, slices, cnt, fills, chunk_packets, claims_packets(tops, span, held))
    src = slices["src"].to_numpy() % _SRC_STRIDE
    on_coll = np.isin(slices["track"].to_numpy(), [r["uuid"] for r in rows if r["name"] == "collectives"])
    return MergedExport(str(path), tuple(sorted(r for r, _, _ in items)), packets, int(((src == _DEVICE) & ~on_coll).sum()),
                        int(on_coll.sum()), clock or "unknown", shift, len(tops) if span[1] > span[0] else 0)

