"""Chrome JSON that Perfetto renders correctly, and the lane layout it relies on.

Kineto's JSON breaks a rule of the Chrome trace format: complete (``ph: X``)
events of one thread (one ``pid``/``tid``) must nest; two that overlap without
one containing the other are not allowed. Perfetto then draws wrong durations or
drops the slice (its import stats count ``slice_drop_overlapping_complete_event``;
google/perfetto#432, #4280, #6421). GPU kernels hit it with programmatic
dependent launch and clock jitter: a kernel starts a few ns before the previous
one on its stream ends. Kineto also gives GPU *n* ``pid`` *n*, which collides with
a host process of that pid (pid 1 in a container).

:func:`assign_lanes` puts every slice of a track on *lane* 0 unless it crosses
another slice of that track; such slices move to lanes 1, 2, ... so that each
lane's slices nest properly. :func:`write_chrome_json` writes a trace with one
``tid`` per (track, lane) and reports how many slices it moved. The derived
series it draws (overlap intervals, busy counts, launch flows) come from
:mod:`traceprobe.analysis.device.timeline`.
"""

from __future__ import annotations

import gzip
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..analysis.device.timeline import launch_flows
from ..fileio import atomic_write_bytes
from ..reading import Trace

DEVICE_PID_BASE = 1 << 24
"""Process id given to device d: ``DEVICE_PID_BASE + d`` (above Linux's largest pid)."""
LANE_STRIDE = 1 << 22
"""Lane k of thread (or stream) t gets tid ``t + k * LANE_STRIDE``."""

KINETO_CAT = {"kernel": "kernel", "memcpy": "gpu_memcpy", "memset": "gpu_memset"}


# --- lanes -----------------------------------------------------------------------


def _chain(pk: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Greedy chains: per run of equal ``pk`` (rows sorted by pk, start, -end), the
    first row, then the first row starting at or after its end, and so on.

    Vectorized: ``nxt`` by one searchsorted, chain membership by pointer doubling
    (``log2(n)`` passes, no per-row loop).
    """
    m = s.size
    bounds = np.flatnonzero(np.r_[True, pk[1:] != pk[:-1]])
    grp = np.cumsum(np.r_[True, pk[1:] != pk[:-1]]) - 1
    grp_end = np.append(bounds[1:], m)[grp]
    lo = int(s.min())
    width = int(e.max()) - lo + 1
    if width * (int(grp[-1]) + 1) < 2**62:  # search within groups on offset times
        key_s, key_q = grp * width + (s - lo), grp * width + (e - lo)
    else:  # on dense ranks of the times
        _, inv = np.unique(np.concatenate([s, e]), return_inverse=True)
        width = 2 * m + 1
        key_s, key_q = grp * width + inv[:m], grp * width + inv[m:]
    nxt = np.searchsorted(key_s, key_q, side="left")
    nxt = np.maximum(nxt, np.arange(1, m + 1))
    nxt = np.where(nxt < grp_end, nxt, m)
    jump = np.append(nxt, m)
    on = np.zeros(m + 1, dtype=bool)
    on[bounds] = True
    for _ in range(int(math.ceil(math.log2(m + 1))) + 1):
        on[jump[on]] = True
        jump = jump[jump]
    return on[:m]


def _one_lane(k: np.ndarray, s: np.ndarray, e: np.ndarray, nest: bool) -> np.ndarray:
    """Rows (sorted by key, start, -end) kept on the current lane: a laminar subset."""
    kept = np.zeros(s.size, dtype=bool)
    active = np.arange(s.size)
    pk = k
    while active.size:
        ss, es = s[active], e[active]
        chain = _chain(pk, ss, es)
        kept[active[chain]] = True
        if not nest:
            break
        last = np.maximum.accumulate(np.where(chain, np.arange(active.size), -1))
        rest = np.flatnonzero(~chain)
        parent = last[rest]
        inside = es[rest] <= es[parent]
        # children of a chain slice form the next level, grouped by that slice
        pk = active[parent[inside]]
        active = active[rest[inside]]
    return kept


def assign_lanes(keys: np.ndarray, starts: np.ndarray, ends: np.ndarray, nest: bool = True) -> np.ndarray:
    """Lane of each slice so that, per key and lane, slices nest properly.

    Args:
        keys: int64 track code per slice (e.g. a (device, stream) code).
        starts, ends: int64 ns.
        nest: allow a slice inside another on one lane (Chrome/Perfetto nesting);
            with ``False`` a lane's slices never overlap at all.

    Returns:
        int64 lane per slice: 0 for the track itself; k > 0 only for slices that
        cross (overlap without nesting) a slice of a lower lane. Lanes are filled
        greedily, earliest start first, longer slices first at equal starts.
    """
    k = np.asarray(keys, dtype=np.int64)
    s = np.asarray(starts, dtype=np.int64)
    e = np.maximum(np.asarray(ends, dtype=np.int64), s)
    lanes = np.zeros(k.size, dtype=np.int64)
    if k.size == 0:
        return lanes
    order = np.lexsort((-e, s, k))
    k, s, e = k[order], s[order], e[order]
    # clusters: runs of a track where each slice starts before the running end;
    # a slice alone in its cluster overlaps nothing and stays on lane 0
    run_end = pd.Series(e).groupby(k, sort=False).cummax().to_numpy()
    new = np.r_[True, (k[1:] != k[:-1]) | (s[1:] >= run_end[:-1])]
    cluster = np.cumsum(new) - 1
    size = np.bincount(cluster)
    pending = np.flatnonzero(size[cluster] > 1)
    k = cluster
    lane = 0
    out = np.zeros(k.size, dtype=np.int64)
    while pending.size:
        kept = _one_lane(k[pending], s[pending], e[pending], nest)
        out[pending[kept]] = lane
        pending = pending[~kept]
        lane += 1
    lanes[order] = out
    return lanes


def device_lanes(trace: Trace) -> np.ndarray:
    """Lane of each row of ``trace.device_events`` within its (device, stream)."""
    ev = trace.device_events
    if ev.empty:
        return np.zeros(0, dtype=np.int64)
    codes = pd.MultiIndex.from_frame(ev[["device", "stream"]]).factorize()[0]  # pyright: ignore  (pandas/matplotlib stubs)
    return assign_lanes(codes, ev["start_ns"].to_numpy(), ev["end_ns"].to_numpy())


def host_lanes(trace: Trace) -> np.ndarray:
    """Lane of each row of ``trace.host_events`` within its (pid, tid)."""
    h = trace.host_events
    if h.empty:
        return np.zeros(0, dtype=np.int64)
    codes = pd.MultiIndex.from_arrays([h["pid"].astype(str), h["tid"].astype(str)]).factorize()[0]
    return assign_lanes(codes, h["start_ns"].to_numpy(), h["end_ns"].to_numpy())


def numeric_ids(labels: pd.Series, base: int) -> np.ndarray:
    """Kineto pid/tid labels as int64: numbers as they are, other labels ``base + code``."""
    num = np.asarray(pd.to_numeric(labels.astype(str), errors="coerce"), dtype=np.float64)
    codes = pd.factorize(labels.astype(str))[0]
    ok = np.isfinite(num) & (num >= 0) & (num < 2**31)
    return np.where(ok, np.nan_to_num(num), base + codes).astype(np.int64)


# --- Chrome JSON ---------------------------------------------------------------------


def trace_stem(path: str | Path) -> str:
    """A trace file's name without ``.pt.trace.json.gz`` (or ``.json``, ``.json.gz``)."""
    name = Path(path).name
    for suffix in (".gz", ".json", ".trace", ".pt"):
        name = name[: -len(suffix)] if name.endswith(suffix) else name
    return name


def unique_stems(paths: list) -> list[str]:
    """Output stems for ``paths`` that never collide: :func:`trace_stem` of each, after its folder
    relative to the folder all paths share (``rec-ddp-rank0`` and ``rec-fsdp-rank0``, not ``rank0``
    twice), with ``.2``, ``.3``... added to any repeat left."""
    import os.path

    names = [str(p) for p in paths]
    folders = [n.rsplit("/", 1)[0] if "://" in n else os.path.dirname(n) for n in names]
    try:
        base = os.path.commonpath(folders) if len(set(folders)) > 1 else (folders[0] if folders else "")
    except ValueError:  # absolute and relative paths mixed
        base = ""
    seen: dict[str, int] = {}
    out = []
    for name, folder in zip(names, folders):
        rel = os.path.relpath(folder, base) if base and "://" not in name else ""
        prefix = "" if rel in ("", ".") or rel.startswith("..") else rel.replace(os.sep, "-") + "-"
        s = prefix + trace_stem(name)
        seen[s] = seen.get(s, 0) + 1
        out.append(s if seen[s] == 1 else f"{s}.{seen[s]}")
    return out


@dataclass(frozen=True)
class ChromeExport:
    """What :func:`write_chrome_json` wrote.

    Attributes:
        path: the file written.
        slices: complete events written (device + host).
        flows: launch -> device event flow pairs written.
        split: slices moved to an extra lane because they crossed another slice of
            their thread or stream (Perfetto would misdraw or drop them).
        split_tracks: threads or streams that needed extra lanes.
    """

    path: str
    slices: int
    flows: int
    split: int
    split_tracks: int

    def describe(self) -> str:
        """One line for a person."""
        moved = (f"{self.split:,} slice(s) overlapped others on their thread or stream without nesting and were moved "
                 f"to extra lanes on {self.split_tracks} track(s)") if self.split else "no slice needed moving"
        return f"wrote {self.path}: {self.slices:,} slices, {self.flows:,} launch flows; {moved}"


def _jstr(values: pd.Series) -> np.ndarray:
    """JSON string literals, escaped once per distinct value."""
    cat = values.astype("category")
    lit = np.array([json.dumps(str(c)) for c in cat.cat.categories] + ['""'], dtype=object)
    return lit[cat.cat.codes.to_numpy()]


def _us(ns: np.ndarray) -> np.ndarray:
    """int64 ns -> exact decimal µs text (``123.456``)."""
    ns = np.asarray(ns, dtype=np.int64)
    whole = (ns // 1000).astype(str).astype(object)
    frac = pd.Series(ns % 1000).astype(str).str.zfill(3).to_numpy(object)
    return whole + "." + frac


def _ints(v: np.ndarray) -> np.ndarray:
    return np.asarray(v, dtype=np.int64).astype(str).astype(object)


def _opt(name: str, v: np.ndarray) -> np.ndarray:
    """``,"name":v`` where v >= 0, else empty."""
    return np.where(v >= 0, f',"{name}":' + _ints(v), "")


def _x_lines(cat, name, pid, tid, start, end, args) -> tuple[np.ndarray, np.ndarray]:
    line = ('{"ph":"X","cat":' + cat + ',"name":' + name + ',"pid":' + pid + ',"tid":' + tid
            + ',"ts":' + _us(start) + ',"dur":' + _us(end - start) + ',"args":{' + args + "}}")
    return line, start


def _meta(kind: str, pid: int, tid: int, key: str, value) -> str:
    return json.dumps({"ph": "M", "name": kind, "pid": pid, "tid": tid, "args": {key: value}})


def write_chrome_json(trace: Trace, path: str | Path) -> ChromeExport:
    """Write ``trace`` as Chrome JSON whose slices nest on every thread and stream.

    Device events keep Kineto's categories and args (``device``, ``stream``,
    ``correlation``, ``bytes``) and go to process ``DEVICE_PID_BASE + device``,
    thread ``stream`` (+ ``k * LANE_STRIDE`` on lane k). Host events keep their
    pid and tid (lane k adds ``k * LANE_STRIDE``). Launches are linked to their
    first device event by Kineto-style ``ac2g`` flows. ``traceprobe`` reads the
    file back to the same device events. Gzipped when ``path`` ends in ``.gz``.
    """
    p = Path(path)
    ev, host = trace.device_events, trace.host_events
    dlane, hlane = device_lanes(trace), host_lanes(trace)
    meta: list[str] = []
    lines, stamps, durs = [], [], []

    if not ev.empty:
        dev = ev["device"].to_numpy(np.int64)
        stream = ev["stream"].to_numpy(np.int64)
        dpid = DEVICE_PID_BASE + dev
        dtid = stream + dlane * LANE_STRIDE
        args = ('"device":' + _ints(dev) + ',"stream":' + _ints(stream)
                + _opt("correlation", ev["correlation"].to_numpy()) + _opt("bytes", ev["bytes"].to_numpy()))
        cat = _jstr(ev["kind"].astype(object).map(KINETO_CAT))
        l, t = _x_lines(cat, _jstr(ev["name"]), _ints(dpid), _ints(dtid), ev["start_ns"].to_numpy(), ev["end_ns"].to_numpy(), args)
        lines.append(l)
        stamps.append(t)
        durs.append((ev["end_ns"] - ev["start_ns"]).to_numpy())
        names = dict(zip(trace.devices.get("id", pd.Series(dtype=object)), trace.devices.get("name", pd.Series(dtype=object))))  # pyright: ignore  (pandas/matplotlib stubs)
        for d in np.unique(dev).tolist():
            label = trace.device_label(d) + (f" {names[d]}" if d in names else "")
            meta += [_meta("process_name", DEVICE_PID_BASE + d, 0, "name", label),
                     _meta("process_sort_index", DEVICE_PID_BASE + d, 0, "sort_index", DEVICE_PID_BASE + d)]
        for s_, k_, pid_, tid_ in pd.DataFrame({"s": stream, "k": dlane, "p": dpid, "t": dtid}).drop_duplicates().itertuples(index=False):
            label = f"stream {s_}" + (f" (lane {k_}: slices overlapping lane 0)" if k_ else "")
            meta += [_meta("thread_name", pid_, tid_, "name", label), _meta("thread_sort_index", pid_, tid_, "sort_index", tid_)]

    if not host.empty:
        hpid = numeric_ids(host["pid"], 1 << 30)
        htid = numeric_ids(host["tid"], 1 << 30) + hlane * LANE_STRIDE
        args = (_opt("correlation", host["correlation"].to_numpy()).astype(object)
                + _opt("External id", host["external_id"].to_numpy()))
        args = pd.Series(args).str.lstrip(",").to_numpy(object)
        l, t = _x_lines(_jstr(host["cat"]), _jstr(host["name"]), _ints(hpid), _ints(htid), host["start_ns"].to_numpy(), host["end_ns"].to_numpy(), args)
        lines.append(l)
        stamps.append(t)
        durs.append((host["end_ns"] - host["start_ns"]).to_numpy())
        for pid_, tid_, k_ in pd.DataFrame({"p": hpid, "t": htid, "k": hlane}).drop_duplicates().itertuples(index=False):
            base = tid_ - k_ * LANE_STRIDE
            label = f"thread {base}" + (f" (lane {k_}: slices overlapping lane 0)" if k_ else "")
            meta.append(_meta("thread_name", pid_, tid_, "name", label))

    flows = launch_flows(trace)
    if len(flows):
        fi, hi, cid = flows["device_row"].to_numpy(), flows["host_row"].to_numpy(), _ints(flows["correlation"].to_numpy())
        s_lines = ('{"ph":"s","cat":"ac2g","name":"ac2g","id":' + cid + ',"pid":' + _ints(hpid[hi]) + ',"tid":' + _ints(htid[hi])
                   + ',"ts":' + _us(host["start_ns"].to_numpy()[hi]) + "}")
        f_lines = ('{"ph":"f","cat":"ac2g","name":"ac2g","bp":"e","id":' + cid + ',"pid":' + _ints(dpid[fi]) + ',"tid":' + _ints(dtid[fi])
                   + ',"ts":' + _us(ev["start_ns"].to_numpy()[fi]) + "}")
        lines += [s_lines, f_lines]
        stamps += [host["start_ns"].to_numpy()[hi], ev["start_ns"].to_numpy()[fi]]
        durs += [np.full(len(flows), -1)] * 2

    body = np.concatenate(lines) if lines else np.empty(0, dtype=object)
    ts = np.concatenate(stamps) if stamps else np.empty(0, dtype=np.int64)
    # by time; at equal times longer slices (parents) first, flows after their slices
    dur = np.concatenate(durs) if durs else ts
    body = body[np.lexsort((-dur, ts))]
    head = {k: v for k, v in trace.metadata.items() if k not in ("warnings", "event_count")}
    devs = trace.devices.astype(object)
    head["deviceProperties"] = devs.where(pd.notna(devs), None).to_dict(orient="records")
    head["traceName"] = f"traceprobe export of {Path(trace.path).name}"
    text = json.dumps(head, default=str)[:-1] + ',"traceEvents":[\n' + ",\n".join(meta + body.tolist()) + "\n]}\n"
    data = text.encode()
    atomic_write_bytes(p, gzip.compress(data, 6) if p.name.endswith(".gz") else data)
    moved_d, moved_h = int((dlane > 0).sum()), int((hlane > 0).sum())
    tracks = 0
    if moved_d:
        tracks += len(ev.loc[dlane > 0, ["device", "stream"]].drop_duplicates())
    if moved_h:
        tracks += len(host.loc[hlane > 0, ["pid", "tid"]].drop_duplicates())
    return ChromeExport(str(p), len(ev) + len(host), len(flows), moved_d + moved_h, tracks)
