"""Native Perfetto traces (``.pftrace``): a renderer of one trace and its report.

:func:`write_perfetto` writes, with the ``perfetto`` package's protos and trace builder:
one process per device (pid ``DEVICE_PID_BASE + device``) with a track per stream
holding its kernels, memcpys and memsets (debug annotations ``kind``, ``device``,
``stream``, ``correlation``, ``bytes``, ``direction``; slices crossing another go
to ``stream N (lane k)``, see :mod:`.chrome`); host processes and threads with their
ops; per device an ``overlap`` track (where a memcpy and a compute kernel ran at
once: the intervals behind ``copy_overlap``'s ``all`` row), a ``time breakdown`` track
(where its exposed communication, exposed copy, other and idle parts lie, see
:func:`~traceprobe.analysis.device.timeline.breakdown_intervals`), a ``busy streams``
counter and, where shapes were recorded, an ``achieved TFLOP/s`` counter
(:func:`~traceprobe.analysis.work.efficiency.achieved_tflops`); a ``busy devices`` counter;
``traceprobe verdicts`` (one slice per verdict over the window); flows from each launch to
its first device event; and, given the window's claims (:func:`.actions.tops_by_path`, the
JSON document's ``top_claims``), ``traceprobe claims``: one slice per claim over the window,
ranked, on a sequence of its own after the rest (:func:`add_claims` appends it to a written
file, once the claims are known).

Timestamps are the DataFrames' int64 ns. Packets go out in chunks of
``CHUNK_PACKETS`` (small ``Trace`` messages, which concatenate to one trace), on
one sequence in timestamp order, with event and annotation names interned.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .. import intervals as iv
from ..analysis.device.timeline import BREAKDOWN_SLICES, breakdown_intervals, busy_devices, busy_streams, copy_compute_overlap, launch_flows
from ..analysis.per_trace import OverlapReport
from ..analysis.work.efficiency import achieved_tflops
from ..fileio import atomic_open
from ..reading import Trace
from .actions import Top
from .chrome import DEVICE_PID_BASE, device_lanes, host_lanes, numeric_ids
from .perfetto_claims import claims_packets

SEQ = 1
CHUNK_PACKETS = 20_000
OVERLAP_NAME = "copy under compute"
BREAKDOWN_TRACK = "time breakdown"
"""The track (one per device) of where the GPU time breakdown's exposed, other and idle parts lie."""
TFLOPS_TRACK = "achieved TFLOP/s"
"""The counter (one per device) of the TFLOP/s its kernels achieved."""
ANNOTATIONS = ("kind", "device", "stream", "correlation", "bytes", "direction", "cat", "external_id", "figure", "level", "value", "text",
               "rank", "do", "gain_ns")
_A = {n: i + 1 for i, n in enumerate(ANNOTATIONS)}
_DEVICE, _HOST, _OVERLAP, _VERDICT, _BREAKDOWN = 0, 1, 2, 3, 4
_BEGIN, _END, _COUNTER = 1, 2, 4


# --- layout ------------------------------------------------------------------------


@dataclass(frozen=True)
class PerfettoExport:
    """What :func:`write_perfetto` wrote: file, packet and slice counts."""

    path: str
    packets: int
    device_slices: int
    host_slices: int
    overlap_slices: int
    overlap_ns: dict[int, int]
    counter_points: int
    flows: int
    split: int
    backend: str = "cuda"
    comm_ns: dict[int, tuple[int, int]] = field(default_factory=dict)

    def describe(self) -> str:
        """One line for a person: what was written, and the overlap the trace shows: communication under compute
        where the trace communicates (``comm_ns``: per device, overlapped and total collective time, from the report),
        copies under compute where it copies."""
        def ms(ns: float) -> str:
            return f"{ns / 1e6:,.1f} ms"

        parts = []
        if self.comm_ns:
            parts.append("comm under compute " + ", ".join(f"{self.backend}:{d} {ms(o)} of {ms(t)}" for d, (o, t) in self.comm_ns.items()))
        if any(self.overlap_ns.values()) or not self.comm_ns:
            ov = ", ".join(f"{self.backend}:{d} {ms(ns)}" for d, ns in self.overlap_ns.items()) or "none"
            parts.append(f"copies under compute {ov}")
        lanes = f"; {self.split:,} crossing slice(s) on extra lanes" if self.split else ""
        return (f"wrote {self.path}: {self.device_slices:,} device and {self.host_slices:,} host slices, "
                f"{self.flows:,} launch flows, {'; '.join(parts)}{lanes}")


def _layout(trace: Trace, report: OverlapReport | None):
    """Tracks, slices (vectorized columns) and counter points of the export."""
    ev, host = trace.device_events, trace.host_events
    rows: list[dict] = []

    def track(name: str, **kw) -> int:
        rows.append({"uuid": len(rows) + 1, "name": name, **kw})
        return len(rows)

    names: list[str] = []
    parts, counters = [], []
    dlane = device_lanes(trace)
    dev_uuid: dict[int, int] = {}
    if len(ev):
        dnames = dict(zip(trace.devices.get("id", []), trace.devices.get("name", [])))  # pyright: ignore  (pandas/matplotlib stubs)
        keys = pd.DataFrame({"device": ev["device"], "stream": ev["stream"], "lane": dlane})
        ukeys = keys.drop_duplicates().sort_values(["device", "stream", "lane"])
        for d in ukeys["device"].unique().tolist():
            label = trace.device_label(d) + (f" {dnames[d]}" if d in dnames else "")
            dev_uuid[d] = track(label, process=DEVICE_PID_BASE + d, ordered=True)
        ranks = {d: 10 for d in dev_uuid}
        uuids = []
        for d, s, k in ukeys.itertuples(index=False):
            uuids.append(track(f"stream {s}" + (f" (lane {k})" if k else ""), parent=dev_uuid[d], rank=ranks[d]))
            ranks[d] += 1
        ukeys["uuid"] = uuids
        trk = keys.merge(ukeys, on=["device", "stream", "lane"], how="left")["uuid"].to_numpy()
        parts.append(_slices(trk, ev, ev["name"], len(names), _DEVICE))
        names += list(map(str, ev["name"].cat.categories))
    hlane = host_lanes(trace)
    if len(host):
        pid, tid = numeric_ids(host["pid"], 1 << 30), numeric_ids(host["tid"], 1 << 30)
        keys = pd.DataFrame({"pid": pid, "tid": tid, "lane": hlane})
        ukeys = keys.drop_duplicates().sort_values(["pid", "tid", "lane"])
        proc = {p: track(f"host process {p}", process=p) for p in ukeys["pid"].unique().tolist()}
        ukeys["uuid"] = [track(f"thread {t}", thread=(p, t)) if not k else track(f"thread {t} (lane {k})", parent=proc[p])
                         for p, t, k in ukeys.itertuples(index=False)]
        trk = keys.merge(ukeys, on=["pid", "tid", "lane"], how="left")["uuid"].to_numpy()
        parts.append(_slices(trk, host, host["name"], len(names), _HOST))
        names += list(map(str, host["name"].cat.categories))
    overlap = copy_compute_overlap(trace)
    names.append(OVERLAP_NAME)
    for d, (s, e) in overlap.items():
        u = track("overlap", parent=dev_uuid[d], rank=0)
        parts.append(pd.DataFrame({"track": u, "start": s, "end": e, "name_iid": len(names), "src": _OVERLAP, "row": -1}))
    first = len(names)
    names += [f"{BREAKDOWN_TRACK}: {p}" for p in BREAKDOWN_SLICES]
    for d, sets in breakdown_intervals(trace).items():
        u = track(BREAKDOWN_TRACK, parent=dev_uuid[d], rank=2)
        for j, part in enumerate(BREAKDOWN_SLICES):
            s, e = sets[part]
            parts.append(pd.DataFrame({"track": u, "start": s, "end": e, "name_iid": first + j + 1, "src": _BREAKDOWN, "row": -1}))
    bs = busy_streams(trace)
    for d, g in bs.groupby("device", sort=True):
        u = track("busy streams", parent=dev_uuid[int(d)], rank=1, counter=True)  # pyright: ignore  (pandas/matplotlib stubs)
        counters.append(pd.DataFrame({"track": u, "ts": g["ts"].to_numpy(), "value": g["value"].to_numpy()}))
    for d, g in achieved_tflops(trace).groupby("device", sort=True):  # (none without shapes)
        if int(d) in dev_uuid:  # pyright: ignore  (pandas/matplotlib stubs)
            u = track(TFLOPS_TRACK, parent=dev_uuid[int(d)], rank=3, counter=True, unit="TFLOP/s")  # pyright: ignore
            counters.append(pd.DataFrame({"track": u, "ts": g["ts"].to_numpy(), "value": g["value"].to_numpy(), "real": True}))
    if len(dev_uuid):
        bd = busy_devices(trace)
        u = track("busy devices", counter=True)
        counters.append(pd.DataFrame({"track": u, "ts": bd["ts"].to_numpy(), "value": bd["value"].to_numpy()}))
    lo, hi = report.window_ns if report is not None else (0, 0)
    if hi <= lo and len(host):  # no device work (a CPU-only trace): the verdicts span the host events
        lo, hi = int(host["start_ns"].min()), int(host["end_ns"].max())
    if report is not None and report.verdicts and hi > lo:
        u = track("traceprobe verdicts")
        n0 = len(names)
        names += [f"{v.level}: {v.figure} {v.subject} {v.value:.1%}" for v in report.verdicts]
        nv = len(report.verdicts)
        parts.append(pd.DataFrame({"track": u, "start": lo, "end": hi, "name_iid": np.arange(n0 + 1, n0 + nv + 1), "src": _VERDICT, "row": np.arange(nv)}))
    cols = {"track": np.int64, "start": np.int64, "end": np.int64, "name_iid": np.int64, "src": np.int64, "row": np.int64}
    slices = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame({c: pd.Series([], dtype=t) for c, t in cols.items()})
    slices = slices.astype(cols)
    slices["flow_out"], slices["flow_in"] = 0, 0
    fl = launch_flows(trace)
    if len(fl):
        slices.loc[len(ev) + fl["host_row"].to_numpy(), "flow_out"] = fl["correlation"].to_numpy()  # host rows follow device rows
        slices.loc[fl["device_row"].to_numpy(), "flow_in"] = fl["correlation"].to_numpy()
    cnt = pd.concat(counters, ignore_index=True) if counters else pd.DataFrame({"track": [], "ts": [], "value": []}, dtype=np.int64)
    cnt["real"] = cnt["real"].fillna(False).astype(bool) if "real" in cnt else False  # (a double counter: TFLOP/s)
    split = int((dlane > 0).sum() + (hlane > 0).sum())
    return rows, names, slices, cnt, overlap, len(fl), split


def _slices(track: np.ndarray, df: pd.DataFrame, name: pd.Series, offset: int, src: int) -> pd.DataFrame:
    return pd.DataFrame({"track": track, "start": df["start_ns"].to_numpy(), "end": df["end_ns"].to_numpy(),
                         "name_iid": name.cat.codes.to_numpy(np.int64) + offset + 1, "src": src, "row": np.arange(len(df))})


def _endpoints(slices: pd.DataFrame, cnt: pd.DataFrame) -> dict[str, np.ndarray]:
    """BEGIN/END/COUNTER rows in emission order: by time; per track ends before
    begins, inner ends first, outer begins first, zero-length slices as adjacent pairs."""
    n = len(slices)
    tr, s, e = (slices[c].to_numpy(np.int64) for c in ("track", "start", "end"))
    oi = np.empty(n, np.int64)
    oi[np.lexsort((np.arange(n), -e, s, tr))] = np.arange(n)
    z = e == s
    ts = np.concatenate([s, e, cnt["ts"].to_numpy(np.int64)])
    nc = len(cnt)
    phase = np.concatenate([np.where(z, 2, 1), np.where(z, 2, 0), np.full(nc, 3)])
    k1 = np.concatenate([np.where(z, oi, -e), np.where(z, oi, -s), np.zeros(nc, np.int64)])
    k2 = np.concatenate([np.where(z, 0, oi), np.where(z, 1, -oi), np.zeros(nc, np.int64)])
    typ = np.concatenate([np.full(n, _BEGIN), np.full(n, _END), np.full(nc, _COUNTER)])
    ref = np.concatenate([np.arange(n), np.arange(n), np.arange(nc)])
    trk = np.concatenate([tr, tr, cnt["track"].to_numpy(np.int64)])
    o = np.lexsort((k2, k1, phase, ts))
    out = {"ts": ts[o], "typ": typ[o], "ref": ref[o], "trk": trk[o]}
    # interned names go in the packet of their first use
    first = np.zeros(len(o), dtype=bool)
    begins = np.flatnonzero(out["typ"] == _BEGIN)
    nid = slices["name_iid"].to_numpy()[out["ref"][begins]]
    first[begins[np.unique(nid, return_index=True)[1]]] = True
    out["first"] = first
    return out


# --- writing -----------------------------------------------------------------------


def _descriptor_packets(builder, rows: list[dict], pb) -> None:
    for i, r in enumerate(rows):
        pkt = builder.add_packet()
        pkt.trusted_packet_sequence_id = SEQ
        if i == 0:
            pkt.sequence_flags = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
            for n, iid in _A.items():
                pkt.interned_data.debug_annotation_names.add(iid=iid, name=n)
        td = pkt.track_descriptor
        td.uuid = r["uuid"]
        if r.get("ordered"):
            td.child_ordering = pb.TrackDescriptor.EXPLICIT
        if "process" in r:
            td.process.pid = r["process"]
            td.process.process_name = r["name"]
        elif "thread" in r:
            td.thread.pid, td.thread.tid = r["thread"]
            td.thread.thread_name = r["name"]
        else:
            td.name = r["name"]
        if "parent" in r:
            td.parent_uuid = r["parent"]
        if "rank" in r:
            td.sibling_order_rank = r["rank"]
        if r.get("counter"):
            td.counter.SetInParent()
            if r.get("unit"):
                td.counter.unit_name = r["unit"]


def _annotators(trace: Trace, report: OverlapReport | None):
    """One function per slice source, filling a TrackEvent's debug annotations."""
    ev, host = trace.device_events, trace.host_events
    kind, dev, stream = ev["kind"].astype(str).tolist(), ev["device"].tolist(), ev["stream"].tolist()
    corr, nbytes = ev["correlation"].tolist(), ev["bytes"].tolist()
    direction = ev["direction"].astype(object).where(ev["direction"].notna(), None).tolist()
    hcat, hcorr, hext = host["cat"].astype(str).tolist(), host["correlation"].tolist(), host["external_id"].tolist()
    verdicts = report.verdicts if report is not None else []

    def device(te, i):
        add = te.debug_annotations.add
        add(name_iid=_A["kind"], string_value=kind[i])
        add(name_iid=_A["device"], int_value=dev[i])
        add(name_iid=_A["stream"], int_value=stream[i])
        if corr[i] >= 0:
            add(name_iid=_A["correlation"], int_value=corr[i])
        if nbytes[i] >= 0:
            add(name_iid=_A["bytes"], int_value=nbytes[i])
        if direction[i] is not None:
            add(name_iid=_A["direction"], string_value=direction[i])

    def hostev(te, i):
        add = te.debug_annotations.add
        add(name_iid=_A["cat"], string_value=hcat[i])
        if hcorr[i] >= 0:
            add(name_iid=_A["correlation"], int_value=hcorr[i])
        if hext[i] >= 0:
            add(name_iid=_A["external_id"], int_value=hext[i])

    def verdict(te, i):
        v = verdicts[i]
        add = te.debug_annotations.add
        add(name_iid=_A["figure"], string_value=v.figure)
        add(name_iid=_A["level"], string_value=v.level)
        add(name_iid=_A["value"], double_value=float(v.value))
        add(name_iid=_A["text"], string_value=v.text)

    return {_DEVICE: device, _HOST: hostev, _OVERLAP: lambda te, i: None, _VERDICT: verdict, _BREAKDOWN: lambda te, i: None}


def write_packets(path: str | Path, rows: list[dict], names: list[str], slices: pd.DataFrame, cnt: pd.DataFrame,
                  fill: dict, chunk_packets: int = CHUNK_PACKETS, tail: bytes = b"") -> int:
    """Write track descriptors ``rows``, then the slices' BEGIN/END and the counters' points in
    time order, atomically (gzipped if ``path`` ends in ``.gz``); the number of packets.

    ``slices`` has int64 columns ``track``, ``start``, ``end``, ``name_iid`` (1-based into
    ``names``), ``src`` (key of ``fill``, whose function adds a slice's annotations from its
    ``row``), ``row``, ``flow_out``, ``flow_in`` (0: none); ``cnt`` has ``track``, ``ts``, ``value`` (and ``real``,
    bool: written as a double, else as an integer). ``tail``: serialized packets of a sequence of their own, written
    last (:func:`.perfetto_claims.claims_packets`).
    """
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
    from perfetto.trace_builder.proto_builder import TraceProtoBuilder

    ep = _endpoints(slices, cnt)
    ts, typ, ref, trk, first = (ep[c].tolist() for c in ("ts", "typ", "ref", "trk", "first"))
    name_iid, src, row = (slices[c].tolist() for c in ("name_iid", "src", "row"))
    fo, fi = slices["flow_out"].tolist(), slices["flow_in"].tolist()
    cval, creal = cnt["value"].tolist(), (cnt["real"].to_numpy(bool) if "real" in cnt else np.zeros(len(cnt), bool)).tolist()
    needs = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
    p = Path(path)
    packets = len(rows)
    with atomic_open(p) as f:
        builder = TraceProtoBuilder()
        _descriptor_packets(builder, rows, pb)
        f.write(builder.serialize())
        builder, pending = TraceProtoBuilder(), 0
        for j in range(len(ts)):
            pkt = builder.add_packet()
            pkt.timestamp = ts[j]
            pkt.trusted_packet_sequence_id = SEQ
            pkt.sequence_flags = needs
            te = pkt.track_event
            te.track_uuid = trk[j]
            t = te.type = typ[j]
            if t == _BEGIN:
                i = ref[j]
                te.name_iid = name_iid[i]
                if first[j]:
                    pkt.interned_data.event_names.add(iid=name_iid[i], name=names[name_iid[i] - 1])
                fill[src[i]](te, row[i])
                if fo[i]:
                    te.flow_ids.append(fo[i])
                if fi[i]:
                    te.terminating_flow_ids.append(fi[i])
            elif t == _COUNTER:
                if creal[ref[j]]:
                    te.double_counter_value = float(cval[ref[j]])
                else:
                    te.counter_value = int(cval[ref[j]])
            pending += 1
            if pending == chunk_packets:
                f.write(builder.serialize())
                builder, pending = TraceProtoBuilder(), 0
        if pending:
            f.write(builder.serialize())
        f.write(tail)
    return packets + len(ts)


def write_perfetto(trace: Trace, path: str | Path, report: OverlapReport | None,
                   chunk_packets: int = CHUNK_PACKETS, claims: Sequence[Top] = ()) -> PerfettoExport:
    """Write ``trace`` as a native Perfetto trace (module doc); gzipped if ``path`` ends in ``.gz``.

    Args:
        trace: the loaded trace.
        path: output file, conventionally ``*.pftrace``.
        report: its :func:`~traceprobe.analysis.overlap_report`, for the verdicts track
            (None: no verdicts track; nothing is computed here).
        chunk_packets: packets per chunk written to the file.
        claims: the window's claims, ranked (:func:`.actions.tops_by_path`), for the claims' track over the report's
            window (:mod:`.perfetto_claims`; none: no track, as :func:`.perfetto_claims.add_claims` can add it later).
    """
    rows, names, slices, cnt, overlap, nflows, split = _layout(trace, report)
    tail = claims_packets(claims, report.window_ns) if report is not None else b""
    packets = write_packets(path, rows, names, slices, cnt, _annotators(trace, report), chunk_packets, tail)
    src_a = slices["src"].to_numpy()
    return PerfettoExport(
        path=str(path), packets=packets, device_slices=int((src_a == _DEVICE).sum()), host_slices=int((src_a == _HOST).sum()),
        overlap_slices=int((src_a == _OVERLAP).sum()), overlap_ns={d: iv.length(x) for d, x in overlap.items()},
        counter_points=len(cnt), flows=nflows, split=split, backend=trace.backend,
        comm_ns={} if report is None or report.comm_overlap.empty else
        {int(d): (int(o), int(t)) for d, o, t in zip(report.comm_overlap["device"], report.comm_overlap["overlapped_ns"],
                                                     report.comm_overlap["comm_ns"])},
    )
