"""Ranked findings: the cause of each span of lost device time, how much fixing it could give back, and how.

Definitions (quoted by docs/measures.md). A *finding* names a span of device time that
the trace shows was lost, its *cause*, and its *headroom*: the wall time it
covers, the most that fixing it could save. The kinds, each per device (subject
``cuda:d``, ``hip:d``, ``mtia:d``; ``rank r cuda:d`` in a ranked trace), built
from the interval sets of :mod:`.breakdown` and :mod:`.idle_causes`:

- ``exposed_copy`` (per device and direction): memcpys of that direction with
  neither compute, communication nor set-aside work beside them, P_x \\ (C ∪ M ∪ A);
  ``wrapper_copy`` for the DtoD copies of a data-parallel wrapper's buffers
  (:func:`..job.comm_types.wrapper_copy_devices`, as the copy verdict names them).
- ``bubble``: point-to-point communication kernels (send/recv: pipeline stages
  handing activations and gradients to each other) with no compute beside them,
  M_p2p \\ C: the stage waited for its neighbour, the *pipeline bubble*. Its share
  of the window is compared with GPipe/1F1B's ideal (p-1)/(m+p-1) where the trace
  names its stages p (``distributedInfo.world_size``) and microbatches m
  (``torch.distributed.pipelining``'s ``Forward N`` annotations).
- ``exposed_comm``: collective kernels with no compute beside them,
  (M \\ M_p2p) \\ C. Across the ranks of a window it is split into the wait for a
  named late rank and the exposed transfer (:mod:`.causes`).
- one kind per idle cause of :mod:`.idle_causes`: ``idle_graph_capture``, ``idle_sync``, ``idle_profiler`` (the
  profiler's own work), ``idle_warmup``, ``idle_pinned_alloc``, ``idle_device_alloc``, ``idle_other_rank``,
  ``idle_data_loading``, ``idle_optimizer``, ``idle_launch`` (launch-bound), ``idle_cpu_op`` (CPU ops
  that launch nothing), ``idle_host`` (host outside any op), ``stream_wait`` (queued work waited for
  another stream's work, the dependency graph's edge: idle cause ``dependency``) and ``queued_wait`` (queued work
  waited on something the trace does not show: idle cause ``queued``, its stretches longer than
  :data:`..causal.device_chains.DEPENDENCY_SLACK_NS` only: the device's own few-µs gaps between queued kernels are
  no wait, as on the critical path); the idle time of each span is the cause's span.
- ``cross_device``: the device idle (for a cause not claimed above) while
  another device of the trace was busy.

No double counting (as nsys-ai ranks its findings): one span of wall time is
claimed by one finding only. Candidates are taken in three tiers, each largest
first: the direct causes (exposed copies, bubble, exposed communication, every
idle cause but ``sync``), then ``cross_device``, then ``idle_sync`` (a host
blocked while another device works is waiting on that device: the cross-device
finding says more). Each keeps only the part of its span that no earlier finding
claimed, so the headrooms of a trace add up to at most its window. Findings whose
headroom is under :data:`MIN_SHARE` of the window are dropped; the rest are listed
largest first. Where the trace has ``ProfilerStep`` annotations, each finding also
gives its time per step (over the steps in which it occurred).

In a :class:`~traceprobe.analysis.summary.Summary`, where the trace's window was replayed, the host-side findings are
replaced by the replay's what-ifs (:mod:`.replayed`): these spans are what a trace alone says.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ... import intervals as iv
from ...reading import Trace
from ..causal.device_chains import DEPENDENCY_SLACK_NS
from ..device.breakdown import DeviceTime, device_times
from ..device.busy import comm_mask, copy_directions, copy_mask, pageable_copies, per_value
from ..host.graph_capture import replays_graphs
from ..host.host_classes import LABELS
from ..host.idle_causes import QUEUED_LABEL, DeviceIdle, idle_causes
from ..job.comm_types import comm_types, wrapper_copy_devices
from ..memo import device_column, empty_frame, per_trace
from .idle_advice import Backend, idle_advice
from .verdicts import wrapper_copy_words

MIN_SHARE = 0.02
"""Findings under this fraction of the window are not listed."""

COLUMNS = ["kind", "subject", "device", "headroom_ns", "per_step_ns", "label", "text"]

P2P_TYPES = frozenset({"send", "recv", "sendrecv"})
"""Collective types (:func:`.comm_types.collective_type`) of point-to-point communication."""

IDLE_KINDS = {
    "graph_capture": "idle_graph_capture", "sync": "idle_sync", "profiler": "idle_profiler", "compile": "idle_compile",
    "slow_call": "idle_slow_call", "warmup": "idle_warmup", "pinned_alloc": "idle_pinned_alloc", "device_alloc": "idle_device_alloc", "other_rank": "idle_other_rank",
    "data_loading": "idle_data_loading", "optimizer": "idle_optimizer", "launch": "idle_launch", "cpu_op": "idle_cpu_op", "host": "idle_host",
    "dependency": "stream_wait", "queued": "queued_wait",
}
"""Finding kind of each idle cause of :mod:`.idle_causes` (``unattributed`` idle is no finding)."""

_FORWARD_RE = re.compile(r"^Forward (\d+)$")


@dataclass(frozen=True)
class _Candidate:
    kind: str
    subject: str
    device: int
    span: iv.Intervals
    label: str  # short, before the time: "pinned alloc", "exposed DtoH copy"
    advice: str
    percent: bool = False  # the label shows the share of the window (bubbles)


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.1f} ms"


def _subject(trace: Trace, device: int) -> str:
    name = trace.device_label(device)
    return f"rank {trace.rank} {name}" if trace.rank is not None else name


@per_trace
def p2p_mask(trace: Trace) -> np.ndarray:
    """Rows of ``device_events`` that are point-to-point communication kernels (:data:`P2P_TYPES`, typed by
    :func:`.comm_types.comm_types`: a ``SendRecv`` kernel of an all-to-all is not point-to-point)."""
    return np.isin(comm_types(trace), list(P2P_TYPES))


def _union_on(trace: Trace, mask: np.ndarray, device: int, lo: int, hi: int) -> iv.Intervals:
    m = mask & (device_column(trace, "device") == device)
    return iv.union(np.clip(device_column(trace, "start_ns")[m], lo, hi), np.clip(device_column(trace, "end_ns")[m], lo, hi))


def exposed_spans(trace: Trace, t: DeviceTime) -> tuple[iv.Intervals, iv.Intervals]:
    """``(bubble, exposed collectives)`` of one device: M_p2p \\ C and (M \\ M_p2p) \\ C (module docstring)."""
    lo, hi = t.window
    exposed = iv.subtract(t.compute_or_comm, t.compute)
    p2p = p2p_mask(trace)
    if not p2p.any():
        return iv.empty(), exposed
    bubble = iv.intersect(exposed, _union_on(trace, p2p, t.device, lo, hi))
    return bubble, iv.subtract(exposed, bubble)


def pipeline_shape(trace: Trace) -> tuple[int, int]:
    """``(stages p, microbatches m)`` where the trace names them, else 0 for each.

    p is ``distributedInfo.world_size``; m the number of distinct ``Forward N``
    host annotations (``torch.distributed.pipelining`` marks each microbatch's
    forward so).
    """
    info = trace.metadata.get("distributedInfo") or {}
    p = info.get("world_size")
    p = int(p) if isinstance(p, int) and 1 < p < 1 << 20 else 0
    host = trace.host_events
    if host.empty:
        return p, 0
    idx = per_value(host["name"], lambda n: int(m.group(1)) if (m := _FORWARD_RE.match(str(n))) else -1, -1, np.int64)
    return p, int(iv.distinct(idx[idx >= 0]).size)


@per_trace
def _copies_by_device(trace: Trace) -> dict[int, np.ndarray]:
    """The rows of ``device_events`` that are copies, per device (one sort, not a mask over every event per device)."""
    rows = np.flatnonzero(copy_mask(trace))
    dev = device_column(trace, "device")[rows]
    order = np.argsort(dev, kind="stable")
    rows, dev = rows[order], dev[order]
    keys, first = np.unique(dev, return_index=True)
    return {int(k): g for k, g in zip(keys.tolist(), np.split(rows, first[1:]))}


def _copy_candidates(trace: Trace, t: DeviceTime, b: Backend) -> list[_Candidate]:
    lo, hi = t.window
    m = _copies_by_device(trace).get(t.device, np.zeros(0, np.int64))
    if not m.size:
        return []
    dirs = copy_directions(trace)[m]
    start = np.clip(device_column(trace, "start_ns")[m], lo, hi)
    end = np.clip(device_column(trace, "end_ns")[m], lo, hi)
    pageable = pageable_copies(trace)[m]
    wrapper = wrapper_copy_devices(trace).get(t.device, ())
    out = []
    for x in dict.fromkeys(dirs.tolist()):
        g = dirs == x
        span = iv.subtract(iv.union(start[g], end[g]), t.hidden)  # under set-aside compute a copy was hidden too
        how = "from pinned (page-locked) memory, " if pageable[g].any() else ""
        mine = x == "DtoD" and bool(wrapper)  # (a wrapper's own copies: the copy verdict's words, one story)
        advice = wrapper_copy_words(wrapper) if mine else f"issue them {how}on a side stream, ordered by {b.events}, so compute hides them"
        out.append(_Candidate("wrapper_copy" if mine else "exposed_copy", f"{_subject(trace, t.device)} {x}", t.device, span,
                              f"exposed {x} copy", f"{x} copies on {b.device(t.device)} ran with nothing else on the device: {advice}"))
    return out


def _candidates(trace: Trace, t: DeviceTime, idle: DeviceIdle | None, others_busy: iv.Intervals, b: Backend,
                shape: tuple[int, int], before: int = 0) -> list[list[_Candidate]]:
    """The device's candidates in three tiers: direct causes, cross-device, host blocked in a sync (``shape``:
    :func:`pipeline_shape`, read once per trace; ``before``: the runs before the window, for the advice)."""
    d, subj, dev = t.device, _subject(trace, t.device), b.device(t.device)
    bubble, exposed = exposed_spans(trace, t)
    first = _copy_candidates(trace, t, b)
    p, m = shape
    ideal = f" (GPipe/1F1B ideal for {p} stages x {m} microbatches: {100 * (p - 1) / (m + p - 1):.1f}%)" if p > 1 and m > 0 else ""
    first.append(_Candidate("bubble", subj, d, bubble, "bubble",
                            f"pipeline bubble: {dev} waited in point-to-point {b.comm} kernels for the neighbouring stage{ideal}: "
                            "use more microbatches or an interleaved schedule (interleaved 1F1B, zero-bubble)", percent=True))
    first.append(_Candidate("exposed_comm", subj, d, exposed, "exposed comm",
                            f"collectives on {dev} ran with no compute beside them: across ranks this is waiting for a late "
                            "rank or moving data; overlap the transfer with compute, or reduce what is sent"))
    sync: list[_Candidate] = []
    if idle is not None:
        replays = replays_graphs(trace)
        for cause, kind in IDLE_KINDS.items():
            empty = not idle.spans[cause][0].size  # (no row: its words are not made)
            unseen = cause == "queued" and not empty and not iv.length(iv.intersect(idle.spans[cause], others_busy))
            advice = "" if empty else idle_advice(cause, dev, idle.top[cause], b, idle.queued_stream, replays, unseen, before)
            span = idle.spans[cause]
            if cause == "queued":  # (the device's own gaps between queued kernels are no wait)
                long = span[1] - span[0] > DEPENDENCY_SLACK_NS
                span = (span[0][long], span[1][long])
            c = _Candidate(kind, subj, d, span, _label(cause, idle), advice)
            (sync if cause == "sync" else first).append(c)
    cross = []
    if others_busy[0].size:
        cross.append(_Candidate("cross_device", subj, d, iv.intersect(t.idle(), others_busy), "idle beside another device",
                                f"{dev} was idle while another device worked: balance the work across devices, "
                                "run them at once, or pipeline it (micro-batches)"))
    return [first, cross, sync]


def _label(cause: str, idle: DeviceIdle) -> str:
    return QUEUED_LABEL if cause == "queued" else LABELS[cause]


def _empty() -> pd.DataFrame:
    ints = ("device", "headroom_ns", "per_step_ns")
    return empty_frame({c: np.int64 if c in ints else object for c in COLUMNS})


def findings_frame(rows: list[tuple], text: str | type[object] = "str") -> pd.DataFrame:
    """Findings ``rows`` (tuples in :data:`COLUMNS`' order) as one DataFrame, built once; ``text``: its string columns'
    dtype."""
    cols = list(zip(*rows)) or [()] * len(COLUMNS)
    ints = ("device", "headroom_ns", "per_step_ns")
    return pd.DataFrame({c: np.array(v, np.int64) if c in ints else pd.array(list(v), dtype=text)
                         for c, v in zip(COLUMNS, cols)})


def _per_step(span: iv.Intervals, steps: pd.DataFrame) -> int:
    """Mean length of ``span`` per step, over the steps in which it occurs; -1 without steps."""
    if steps.empty:
        return -1
    per = iv.measure(span, steps["start_ns"].to_numpy(np.int64), steps["end_ns"].to_numpy(np.int64))
    per = per[per > 0]
    return int(per.sum() // per.size) if per.size else -1


def short_label(label: str, ns: int, window_ns: int, percent: bool = False) -> str:
    """The table's form of a finding: its label and its time, with the unit (``pinned alloc 512.2 ms``, ``bubble 11.3%``)."""
    if percent and window_ns > 0:
        return f"{label} {100 * ns / window_ns:.1f}%"
    return f"{label} {_ms(ns)}"


def others_busy(any_busy: iv.Intervals, two_busy: iv.Intervals, own: iv.Intervals) -> iv.Intervals:
    """Where a device other than the one busy over ``own`` is busy, from where any device is (``any_busy``) and
    where two or more are (``two_busy``, :func:`traceprobe.intervals.coverage_at_least` of every device's set): where
    this one is busy, another is when two are; elsewhere, when any is. A normalised set, in O(n) per device
    instead of a union of every other device's set per device."""
    return iv.union(*map(np.concatenate, zip(two_busy, iv.subtract(any_busy, own))))


def claim_in_order(spans: list[iv.Intervals]) -> list[iv.Intervals]:
    """Each normalised set less every set before it in ``spans``: the wall time each finding claims that no
    earlier one claimed (a finding's headroom). All sets at once, not one subtraction per set from a growing
    claim (which made thousands of devices quadratic): the segments between all the sets' ends, each owned by
    the first set covering it (a minimum over a segment tree, filled and read level by level), then each set's
    segments merged."""
    out: list[iv.Intervals] = [iv.empty()] * len(spans)
    n_each = [x[0].size for x in spans]
    if not sum(n_each):
        return out
    pid = np.repeat(np.arange(len(spans), dtype=np.int64), n_each)
    starts = np.concatenate([x[0] for x in spans]).astype(np.int64)
    ends = np.concatenate([x[1] for x in spans]).astype(np.int64)
    times = iv.distinct(np.concatenate([starts, ends]))
    nseg = times.size - 1
    if nseg <= 0:
        return out
    size = 1 << max(int(nseg - 1).bit_length(), 0)
    tree = np.full(2 * size, len(spans), dtype=np.int64)  # (len(spans): no owner)
    lo, hi = np.searchsorted(times, starts) + size, np.searchsorted(times, ends) + size  # each set's segments [lo, hi)
    while True:
        on = lo < hi
        if not on.any():
            break
        m = on & (lo & 1 == 1)
        np.minimum.at(tree, lo[m], pid[m])
        lo = lo + m
        m = on & (hi & 1 == 1)
        hi = hi - m
        np.minimum.at(tree, hi[m], pid[m])
        lo, hi = lo >> 1, hi >> 1
    k = 1
    while k < size:  # each node's owner handed down to its children
        parent = tree[k:2 * k]
        tree[2 * k:4 * k:2] = np.minimum(tree[2 * k:4 * k:2], parent)
        tree[2 * k + 1:4 * k:2] = np.minimum(tree[2 * k + 1:4 * k:2], parent)
        k *= 2
    owner = tree[size:size + nseg]
    has = owner < len(spans)
    keys, s, e = iv.grouped_union(owner[has], times[:-1][has], times[1:][has])
    b = np.searchsorted(keys, np.arange(len(spans) + 1)).tolist()
    return [(s[b[i]:b[i + 1]], e[b[i]:b[i + 1]]) for i in range(len(spans))]


def findings(trace: Trace, window: tuple[int, int] | None = None, min_share: float = MIN_SHARE,
             steps: pd.DataFrame | None = None, runs_before: int = 0) -> pd.DataFrame:
    """Ranked findings of one trace (module docstring).

    Args:
        window: (lo, hi) in ns; default the trace window.
        min_share: drop findings under this fraction of the window.
        steps: step windows (``step``, ``start_ns``, ``end_ns``, int64 ns) for the
            per-step times, e.g. the steps' GPU intervals; default the
            ``ProfilerStep`` host windows (``trace.steps``).
        runs_before: the steps or runs of the program before the window (:func:`..host.warmup_notes.runs_before`): the
            advice on one-time work reads it.

    Returns:
        DataFrame, largest headroom first: ``kind`` (str), ``subject`` (str),
        ``device`` (int64), ``headroom_ns`` (int64, wall time no other finding
        claims), ``per_step_ns`` (int64, mean per step over the steps in which
        it occurs; -1 without ``ProfilerStep`` annotations), ``label`` (str, short:
        the cause and its time, for tables), ``text`` (str: the time, what happened,
        what to try). The headrooms sum to at most the window.
    """
    times = device_times(trace, window)
    if not times:
        return _empty()
    lo, hi = times[0].window
    b = Backend(trace.backend)
    idle = {i.device: i for i in idle_causes(trace, (lo, hi))}
    steps = trace.steps if steps is None else steps
    tiers: list[list[_Candidate]] = [[], [], []]
    # where another device is busy: where two or more are, or one is and this one is not (no union over the
    # others per device: 4,096 devices took minutes so)
    busy = [t.busy for t in times]
    any_busy, two_busy = iv.coverage_at_least(busy, 1), iv.coverage_at_least(busy, 2)
    shape = pipeline_shape(trace)
    for t in times:
        others = iv.empty() if len(times) < 2 else others_busy(any_busy, two_busy, t.busy)
        for tier, cands in zip(tiers, _candidates(trace, t, idle.get(t.device), others, b, shape, runs_before)):
            tier += cands
    rows = []
    ordered = [c for group in tiers for c in sorted(group, key=lambda c: -iv.length(c.span))]
    for c, own in zip(ordered, claim_in_order([c.span for c in ordered])):
        ns = iv.length(own)
        if ns <= 0:
            continue
        per = _per_step(own, steps)
        each = f" ({_ms(per)} per step)" if per > 0 and not c.percent else ""
        share = f" ({100 * ns / max(hi - lo, 1):.1f}% of the window)" if c.percent else ""
        rows.append((c.kind, c.subject, c.device, ns, per, short_label(c.label, ns, hi - lo, c.percent), f"{_ms(ns)}{each}{share}: {c.advice}"))
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
        "per_step_ns": np.array([r[4] for r in picked], dtype=np.int64),
        "label": [r[5] for r in picked],
        "text": [r[6] for r in picked],
    })


def exposed_collective_spans(trace: Trace, window: tuple[int, int] | None = None) -> pd.DataFrame:
    """The exposed collective communication of every device, (M \\ M_p2p) \\ C, as intervals.

    What the waits of :mod:`.causes` are measured against across ranks. Returns a
    DataFrame: ``device``, ``start_ns``, ``end_ns`` (int64 ns), sorted by device
    then start; empty without communication.
    """
    parts = []
    if comm_mask(trace).any():
        for t in device_times(trace, window):
            s, e = exposed_spans(trace, t)[1]
            parts.append(pd.DataFrame({"device": np.full(s.size, t.device, np.int64), "start_ns": s, "end_ns": e}))
    if not parts:
        return empty_frame(dict.fromkeys(("device", "start_ns", "end_ns"), np.int64))
    return pd.concat(parts, ignore_index=True)
