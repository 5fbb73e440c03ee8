"""Which collective each communication kernel runs, read where the trace says it.

A communication kernel's collective type is read, first match wins, from:

1. Kineto's ``Collective name`` arg (torch 2.x): on the kernel, matched by correlation id,
   or on the host op (``record_param_comms``) whose ``External id`` its launch carries
   (:func:`arg_rows`, which :func:`.collectives.collective_table` reads too);
2. the innermost c10d or NCCL host op around its launch on the launching thread
   (:func:`host_op_types`: ``nccl:all_to_all``, ``c10d::alltoall_``, torch's own
   ``record_function`` names, which older traces hold without the args; an op naming
   no collective, such as ``nccl:coalesced``, is passed over);
3. the kernel's name (:func:`collective_type`).

The order matters for point-to-point kernels: NCCL runs all-to-all, gather and scatter
as grouped sends and receives, so their kernels are named ``SendRecv`` (NCCL's
``doc/PERFORMANCE.md``; HTA's ``trace_diff`` test traces of TorchRec all-to-all hold
``ncclKernel_SendRecv`` kernels launched inside ``nccl:all_to_all``): by name alone they
would be point-to-point, and a pipeline bubble (:mod:`.findings`).
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np

from ... import intervals as iv
from ...keyed import keys
from ...reading import Trace
from ..device.busy import comm_mask, host_thread_codes, per_value
from ..host.launch_links import first_match, launch_rows
from ..host.training import training_evidence
from ..memo import device_column, host_column, per_trace

_HOST_OP = re.compile(r"^(nccl|rccl|c10d):{1,2}\w")
_TYPE_RE = re.compile(r"(allreduce|allgather|reducescatter|reduce_scatter|broadcast|alltoall|all_to_all|reduce|sendrecv|send|recv)")


@lru_cache(maxsize=1 << 16)
def collective_type(name: str) -> str:
    """Normalised collective type of a ``Collective name`` arg or a communication kernel's name (cached: a worker's
    ranks share their names, each searched through every documented family's pattern once per process).

    ``allreduce``, ``allgather``, ``reducescatter``, ``broadcast``, ``alltoall``,
    ``reduce``, ``sendrecv``, ``send``, ``recv``; ``other`` when none is named. A
    kernel of a documented family that performs one collective is typed by its
    family (:mod:`traceprobe.reading.comm_kernels`: vLLM's
    ``cross_device_reduce_2stage`` is an ``allreduce``); other names are read as
    they are, ``all_reduce``/``all_gather`` as one word (``multimem_all_reduce_kernel``).
    """
    from ...reading.comm_kernels import family_of  # (the documented list lives with the reading code)

    family = family_of(name)
    if family is not None and family.collective is not None:
        return family.collective
    m = _TYPE_RE.search(name.lower().replace("_base", "").replace("into_tensor_coalesced", "")
                        .replace("all_reduce", "allreduce").replace("all_gather", "allgather"))
    if not m:
        return "other"
    t = m.group(1).replace("_", "")
    return {"alltoall": "alltoall", "reducescatter": "reducescatter"}.get(t, t)


@per_trace
def arg_rows(trace: Trace) -> np.ndarray:
    """Per row of ``trace.device_events`` (int64): for a communication kernel, the row of ``trace.collective_args``
    that names its collective, on the kernel by correlation id, else on the host op by the launch's ``External id``;
    -1 where none and for other rows. Once per trace."""
    a = trace.collective_args
    out = np.full(len(trace.device_events), -1, dtype=np.int64)
    sel = np.flatnonzero(comm_mask(trace)) if len(out) else np.zeros(0, np.int64)
    if a.empty or sel.size == 0:
        return out
    pos = np.full(sel.size, -1, dtype=np.int64)
    side = a["side"].to_numpy(dtype=object)
    rows = launch_rows(trace)[sel]
    ext = host_column(trace, "external_id")
    launch_ext = np.where(rows >= 0, ext[np.maximum(rows, 0)], -1) if ext.size else np.full(sel.size, -1, np.int64)
    for col, on, query in (("correlation", "device", device_column(trace, "correlation")[sel]), ("external_id", "host", launch_ext)):
        cand = np.flatnonzero(side == on)
        if cand.size == 0:
            continue
        hit = first_match(a[col].to_numpy(np.int64)[cand], query)
        pos = np.where((pos < 0) & (hit >= 0), cand[np.maximum(hit, 0)], pos)
    out[sel] = pos
    return out


@per_trace
def host_op_types(trace: Trace) -> np.ndarray:
    """Per row of ``trace.device_events``: the collective type named by the innermost c10d/NCCL host op
    (``nccl:*``, ``rccl:*``, ``c10d::*``) holding its launch on the launching thread; ``""`` where none
    (object array; rule 2 of the module docstring). Of nested ops, the last one to start before the launch is
    taken, else the one that ends last among those before it."""
    ev, host = trace.device_events, trace.host_events
    out = np.full(len(ev), "", dtype=object)
    if host.empty or ev.empty:
        return out
    htype = per_value(host["name"], _host_op_type, "")
    ops = np.flatnonzero(htype != "")
    rows = launch_rows(trace)
    if ops.size == 0 or not (rows >= 0).any():
        return out
    thread, start, end = host_thread_codes(trace), host_column(trace, "start_ns"), host_column(trace, "end_ns")
    launched = np.flatnonzero(comm_mask(trace) & (rows >= 0))
    for t in np.unique(thread[ops]).tolist():  # once per host thread that holds such ops
        op = ops[thread[ops] == t]
        op = op[np.argsort(start[op], kind="stable")]
        mine = launched[thread[rows[launched]] == t]
        at = start[rows[mine]]
        i = np.searchsorted(start[op], at, side="right") - 1  # the last op to start at or before each launch
        k = np.maximum(i, 0)
        k = np.where(end[op[k]] > at, k, _last_argmax(end[op])[k])  # else the one ending last among those before it
        hit = (i >= 0) & (end[op[k]] > at)
        out[mine[hit]] = htype[op[k[hit]]]
    return out


def _host_op_type(name: object) -> str:
    """The collective a c10d/NCCL host op names; ``""`` for any other op, or one naming none (``nccl:coalesced``)."""
    t = collective_type(str(name)) if _HOST_OP.match(str(name)) else ""
    return "" if t == "other" else t


def _last_argmax(values: np.ndarray) -> np.ndarray:
    """At each position, the index of the element holding the running maximum of ``values`` (the latest to reach it)."""
    idx = np.arange(values.size)
    best = np.where(values == np.maximum.accumulate(values), idx, 0)
    return np.maximum.accumulate(best)


@per_trace
def comm_types(trace: Trace) -> np.ndarray:
    """Per row of ``trace.device_events``: the collective type of each communication kernel (module
    docstring; :func:`collective_type`'s names), ``""`` for other rows (object array)."""
    ev = trace.device_events
    out = np.full(len(ev), "", dtype=object)
    comm = np.flatnonzero(comm_mask(trace)) if not ev.empty else np.zeros(0, np.int64)
    if comm.size == 0:
        return out
    named = per_value(ev["name"], lambda n: collective_type(str(n)), "other")[comm]
    host = host_op_types(trace)[comm]
    pos = arg_rows(trace)[comm]
    arg = np.full(comm.size, "", dtype=object)
    if (pos >= 0).any():  # (a trace built without collective args has not even the column)
        arg[pos >= 0] = trace.collective_args["collective"].to_numpy(dtype=object)[pos[pos >= 0]]
    arg_type = per_value(arg, lambda n: collective_type(str(n)) if n else "", "")
    out[comm] = np.where(arg_type != "", arg_type, np.where(host != "", host, named))
    return out


BUCKETED = frozenset({"allreduce", "reducescatter", "allgather"})
"""Collectives a data-parallel wrapper (DDP, FSDP) issues per gradient bucket or shard, and tensor parallelism per layer."""


@per_trace
def collective_kinds(trace: Trace) -> dict[int, set[str]]:
    """Per device, the collective types its communication kernels ran (:func:`comm_types`: the trace's args, else the
    host op around the launch, else the kernel's name: NCCL's all-to-all kernels are named ``SendRecv``)."""
    types = comm_types(trace)
    m = np.flatnonzero(types != "")
    if not m.size:
        return {}
    kinds, code = np.unique(types[m].astype(str), return_inverse=True)
    pairs = iv.distinct(device_column(trace, "device")[m] * kinds.size + code)
    out: dict[int, set[str]] = {}
    for key in pairs.tolist():
        out.setdefault(key // kinds.size, set()).add(str(kinds[key % kinds.size]))
    return dict(sorted(out.items()))


def wrapper_copy_devices(trace: Trace) -> dict[int, tuple[str, ...]]:
    """The devices whose DtoD copies are a data-parallel wrapper's own, copies into and out of its communication
    buffers (DDP's gradient buckets, FSDP's copy-in/out), not copies to move to another stream, each with the
    collectives of :data:`BUCKETED` it ran (sorted): in a trace that shows training
    (:func:`..host.training.training_evidence`), every device running one of them. The copy verdict
    (:func:`..advice.verdicts.copy_verdicts`) and the findings (:func:`..advice.findings.findings`) read it alike."""
    if not training_evidence(trace):
        return {}
    return {d: tuple(sorted(k & BUCKETED)) for d, k in collective_kinds(trace).items() if k & BUCKETED}


BACKWARD_OP = "autograd::engine::evaluate_function"
"""The host op autograd's engine records around each node it runs in backward (Kineto's name prefix)."""


@per_trace
def forward_allreduce_devices(trace: Trace) -> frozenset[int]:
    """The devices running an all-reduce launched outside every autograd backward op (:data:`BACKWARD_OP`) on its
    launching thread: the forward's, tensor parallelism's per-layer all-reduce. Data parallelism reduces gradients from
    backward (DDP's hooks fire inside the engine's ops): the recorded DDP and FSDP runs launch none outside them, the
    2-D mesh and tensor-parallel ones most of theirs. Empty where the trace shows no training
    (:func:`..host.training.training_evidence`) or records no backward op."""
    if not training_evidence(trace) or trace.host_events.empty:
        return frozenset()
    ar = np.flatnonzero(comm_types(trace) == "allreduce")
    call = launch_rows(trace)[ar]
    ar, call = ar[call >= 0], call[call >= 0]
    names = trace.host_events["name"]
    backward = per_value(names, lambda n: str(n).startswith(BACKWARD_OP), False)
    if not ar.size or not backward.any():
        return frozenset()
    thread = host_thread_codes(trace).astype(np.int64)
    start, end = host_column(trace, "start_ns"), host_column(trace, "end_ns")
    b = np.flatnonzero(backward)
    b = b[np.lexsort((start[b], thread[b]))]
    k_b, k_at = keys((thread[b], start[b]), (thread[call], start[call]))
    n = np.searchsorted(k_b, k_at, "right")  # (the backward ops of the thread started by the call ...)
    i = np.maximum(n - 1, 0)
    reach = iv.grouped_running_max(thread[b], end[b])  # (... and the latest end among them: nested ops too)
    inside = (n > 0) & (thread[b[i]] == thread[call]) & (reach[i] > start[call])
    device = device_column(trace, "device")[ar]
    return frozenset(int(d) for d in np.unique(device[~inside]).tolist())
