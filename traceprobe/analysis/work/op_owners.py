"""Which modelled op owns each device event: the outermost one around its launch, or the backward of one.

Forward: a device event belongs to the outermost modelled op (:data:`.op_models.OP_FAMILY`) that holds the call which
launched it (:func:`traceprobe.analysis.host.launch_links.launch_rows`) on that call's thread: an
``aten::convolution`` owns its cuDNN kernels, memsets and layout transposes, an ``aten::addmm`` its GEMM (as
TraceLens's op tree gives an op its subtree's kernels).

Backward: autograd runs each node the forward recorded as a host op named after it (``BmmBackward0``, inside
``autograd::engine::evaluate_function: BmmBackward0``) whose ``Sequence number`` is the one the forward op that created
the node recorded, and whose ``Fwd thread id`` (above 0) names the forward's thread (PyTorch's ``Node::sequence_nr``,
"used to correlate backward nodes with forward ops in the profiler", ``torch/csrc/autograd/function.h``; Kineto writes
both as args of the ``cpu_op``, forward ops with ``Fwd thread id`` 0). Ops record a sequence number only where autograd
is on: the ops a node runs do not, a forward op run again inside a node (activation checkpointing) does. So:

- a kernel's node is the innermost op with a sequence number around its launch, where that op is a node;
- the node's forward op is the last op of its sequence number on its forward thread (the one that created the node:
  outer ops that called it carry the same number); ``Fwd thread id`` counts RecordFunction's threads, not Kineto's, and
  is matched to the Kineto thread whose forward ops hold most of its nodes' sequence numbers;
- the node's *modelled op* is the outermost modelled op holding that forward op (as forward).

Where a modelled op's forward made two or more nodes (it is composite: SDPA's math backend is its casts, GEMMs and
softmax, each with its node) and its family has a backward model (GEMM, attention, convolution), every kernel of those
nodes is that op's backward, one op whose work is the family's backward (:mod:`.formulas`), the nodes' own modelled
ops giving way, as nested ops give way forward. Otherwise a node's own modelled ops keep its kernels (``MmBackward0``'s
two ``aten::mm``, ``ConvolutionBackward0``'s ``convolution_backward``, the flash backward op: their shapes give their
work exactly), and its other kernels are the op's backward: with the family's backward work where the node has no
modelled op of its own, as class and time only otherwise (no work counted twice).

Recomputation (activation checkpointing): a modelled op inside a node whose innermost op with a sequence number (itself,
or the op that called it: ``aten::copy_`` under ``aten::to``'s sequence number) is a forward op: the forward run again
in the backward pass. Ops inside a node record sequence numbers only where autograd is on there: checkpointing, and
``create_graph=True`` (whose second-order ops are read as recomputation too); the node's own ops have none, so their
innermost op with one is the node. A recomputed op counts the work it launched, as any op: non-reentrant
checkpointing stops recomputing once every tensor saved for backward is back (``torch.utils.checkpoint``'s
``early_stop``, on by default), inside the op whose saved inputs come last and before its kernels (autograd saves an
op's inputs before running it), so that op is recorded, with its sequence number, but launches nothing and owns no
device event.

No shapes, no owner: a trace recorded without ``record_shapes=True`` has no modelled op.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...keyed import innermost, keys
from ...reading import Trace
from ..device.busy import host_thread_codes, per_value
from ..host.launch_links import launch_rows
from ..memo import host_column, per_trace
from .op_models import BACKWARD_FAMILY, OP_FAMILY

FORWARD, BACKWARD, BACKWARD_TIME = 0, 1, 2
"""What an event's owner stands for (:func:`event_owners`): the op itself, its backward with the family's backward
work, its backward counted in time and class only."""


def has_shapes(trace: Trace) -> bool:
    """Whether the trace's host ops carry recorded shapes (``record_shapes=True``)."""
    return "args" in trace.host_events and bool(len(trace.op_args)) and bool((trace.op_args["dims"] != "").any())


@per_trace
def modelled_tops(trace: Trace) -> np.ndarray:
    """Rows of ``trace.host_events`` of the outermost modelled ops (no modelled op of their thread holds them), by
    thread then start (int64; empty for a trace without shapes). An op Kineto counted (``with_flops=True``) is
    modelled by that count."""
    if not has_shapes(trace):
        return np.zeros(0, np.int64)
    host = trace.host_events
    args = host_column(trace, "args")
    kineto = np.r_[trace.op_args["flops"].to_numpy(np.int64), -1][args] >= 0
    known = (per_value(host["name"], lambda v: str(v) in OP_FAMILY, False, bool) | kineto) & (args >= 0)
    thread = host_thread_codes(trace).astype(np.int64)
    start, end = host_column(trace, "start_ns"), host_column(trace, "end_ns")
    ops = np.flatnonzero(known)
    if ops.size == 0:  # (shapes recorded, but no op of a modelled family)
        return np.zeros(0, np.int64)
    ops = ops[np.lexsort((-end[ops], start[ops], thread[ops]))]  # by thread, start, the outer op first
    t, e = thread[ops], end[ops]
    first = np.r_[True, t[1:] != t[:-1]]
    reach = pd.Series(e).groupby(np.cumsum(first)).cummax().to_numpy(np.int64)  # (the furthest end so far, per thread)
    before = np.r_[np.iinfo(np.int64).min, reach[:-1]]
    top = ops[first | (e > before)]
    return top[np.lexsort((start[top], thread[top]))].astype(np.int64)


def _holding(trace: Trace, thread: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The outermost modelled op (:func:`modelled_tops`) holding each time ``at`` on ``thread`` (host rows, -1 none)."""
    top = modelled_tops(trace)
    out = np.full(at.size, -1, np.int64)
    if top.size == 0 or at.size == 0:
        return out
    codes = host_thread_codes(trace).astype(np.int64)
    start, end = host_column(trace, "start_ns"), host_column(trace, "end_ns")
    k_top, k_at = keys((codes[top], start[top]), (thread, at))
    k = np.searchsorted(k_top, k_at, "right") - 1  # (top ops of a thread do not nest: the latest before)
    cand = top[np.maximum(k, 0)]
    ok = (k >= 0) & (codes[cand] == thread) & (start[cand] <= at) & (end[cand] > at)
    out[ok] = cand[ok]
    return out


@per_trace
def backward_nodes(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """``(node, op)``: per row of ``trace.device_events``, the host row of the autograd node (a backward op) whose
    launch it is, and per host row, the modelled op whose forward made that node (module docstring); int64, -1
    where none (no shapes, no sequence numbers, a forward kernel, an unmodelled forward)."""
    n_dev, host = len(trace.device_events), trace.host_events
    node, op = np.full(n_dev, -1, np.int64), np.full(len(host), -1, np.int64)
    if not has_shapes(trace) or "seq" not in host or modelled_tops(trace).size == 0:
        return node, op
    seq, fwd = host_column(trace, "seq"), host_column(trace, "fwd_thread")
    is_node, is_fwd = (seq >= 0) & (fwd > 0), (seq >= 0) & (fwd <= 0)
    if not is_node.any():
        return node, op
    thread = host_thread_codes(trace).astype(np.int64)
    start, end = host_column(trace, "start_ns"), host_column(trace, "end_ns")
    # Fwd thread id -> the Kineto thread whose forward ops hold most of its nodes' sequence numbers
    f_pairs = pd.DataFrame({"thread": thread[is_fwd], "seq": seq[is_fwd]}).drop_duplicates()
    n_pairs = pd.DataFrame({"fwd": fwd[is_node], "seq": seq[is_node]}).drop_duplicates()
    votes = pd.DataFrame({"n": n_pairs.merge(f_pairs, on="seq").groupby(["fwd", "thread"]).size()}).reset_index()
    best = votes.sort_values(["fwd", "n", "thread"], ascending=[True, False, True]).drop_duplicates("fwd")
    nodes = np.flatnonzero(is_node)
    to = pd.Series(best["thread"].to_numpy(np.int64), index=best["fwd"].to_numpy(np.int64))
    n_thread = to.reindex(fwd[nodes]).fillna(-1).to_numpy(np.int64)
    # the node's forward op: the last op of its sequence number on that thread
    fw = np.flatnonzero(is_fwd)
    if fw.size == 0:  # (nodes whose forward the trace does not hold)
        return node, op
    k_fw, k_node = keys((thread[fw], seq[fw]), (n_thread, seq[nodes]))
    o = np.lexsort((start[fw], k_fw))
    k_sorted = k_fw[o]
    last = np.r_[k_sorted[1:] != k_sorted[:-1], True]
    u_key, u_row = k_sorted[last], fw[o[last]]
    pos = np.minimum(np.searchsorted(u_key, k_node), u_key.size - 1)
    hit = (n_thread >= 0) & (u_key[pos] == k_node)
    forward = np.where(hit, u_row[pos], -1)
    ok = forward >= 0
    op[nodes[ok]] = _holding(trace, thread[forward[ok]], start[forward[ok]])
    # a kernel's node: the innermost op with a sequence number around its launch, where that op is a node
    call = launch_rows(trace)
    has = np.flatnonzero(call >= 0)
    marked = np.flatnonzero(seq >= 0)
    inner = innermost(thread[marked], start[marked], end[marked], thread[call[has]], start[call[has]])
    got = inner >= 0
    rows = marked[inner[got]]
    node[has[got]] = np.where(is_node[rows], rows, -1)
    return node, op


@per_trace
def event_owners(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """``(owner, part)`` per row of ``trace.device_events`` (int64, int8): the host row of the modelled op owning the
    event (-1 where none: no shapes, no launching call, no modelled op), and what the owner stands for: its forward
    (:data:`FORWARD`), its backward with the family's backward work (:data:`BACKWARD`) or its backward counted in
    time only (:data:`BACKWARD_TIME`) (module docstring)."""
    n = len(trace.device_events)
    owner, part = np.full(n, -1, np.int64), np.zeros(n, np.int8)
    top = modelled_tops(trace)
    call = launch_rows(trace)
    if top.size == 0 or not (call >= 0).any():
        return owner, part
    has = np.flatnonzero(call >= 0)
    owner[has] = _holding(trace, host_thread_codes(trace).astype(np.int64)[call[has]], host_column(trace, "start_ns")[call[has]])
    node, op_of_node = backward_nodes(trace)
    ev = np.flatnonzero(node >= 0)
    ev = ev[op_of_node[node[ev]] >= 0]
    if ev.size == 0:
        return owner, part
    nd = node[ev]
    m = op_of_node[nd]
    names = trace.host_events["name"]
    modelled_bwd = per_value(names, lambda v: OP_FAMILY.get(str(v), "") in BACKWARD_FAMILY, False, bool)[m]
    linked = np.flatnonzero(op_of_node >= 0)  # (every node of a modelled op, with kernels or not)
    seq = host_column(trace, "seq")
    pairs = np.unique(np.c_[op_of_node[linked], seq[linked]], axis=0)
    made = pd.Series(pairs[:, 0]).value_counts()  # (nodes each modelled op's forward made)
    composite = made.reindex(m).fillna(0).to_numpy(np.int64) >= 2
    own = owner[ev] >= 0
    node_has_own = pd.Series(own).groupby(nd).transform("any").to_numpy(bool)
    take = composite & modelled_bwd | ~own
    owner[ev[take]] = m[take]
    part[ev[take]] = np.where(modelled_bwd[take] & (composite[take] | ~node_has_own[take]), BACKWARD, BACKWARD_TIME)
    return owner, part


def op_of_event(trace: Trace) -> np.ndarray:
    """The owner of each device event (:func:`event_owners`' first array): a host row, -1 where none."""
    return event_owners(trace)[0]


@per_trace
def recomputed(trace: Trace) -> np.ndarray:
    """Per row of ``trace.host_events``: a modelled op run again in the backward pass (activation checkpointing: an op
    inside an autograd node whose innermost op with a sequence number, itself or a caller, is a forward op; module
    docstring), bool."""
    host = trace.host_events
    out = np.zeros(len(host), bool)
    top = modelled_tops(trace)
    if top.size == 0 or "seq" not in host:
        return out
    seq, fwd = host_column(trace, "seq"), host_column(trace, "fwd_thread")
    nodes = np.flatnonzero((seq >= 0) & (fwd > 0))
    if nodes.size == 0:
        return out
    thread = host_thread_codes(trace).astype(np.int64)
    start, end = host_column(trace, "start_ns"), host_column(trace, "end_ns")
    top = top[innermost(thread[nodes], start[nodes], end[nodes], thread[top], start[top]) >= 0]  # (inside a node)
    marked = np.flatnonzero(seq >= 0)
    inner = innermost(thread[marked], start[marked], end[marked], thread[top], start[top])
    top = top[inner >= 0]
    out[top[fwd[marked[inner[inner >= 0]]] <= 0]] = True
    return out
