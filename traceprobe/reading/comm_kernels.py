"""Which device kernels are communication: what the trace says, and the documented list of kernel families.

A ``kernel`` is communication (``Trace.device_events.is_comm``) when the trace says so, first by
how it was launched, then by what Kineto wrote on it, then by its name:

1. its launching host op is a communication op (:data:`COMM_HOST_OP_RE`: ``record_param_comms``,
   ``nccl:*``, ``rccl:*``, ``c10d::*``, e.g. ``c10d::allreduce_``): the innermost ``cpu_op`` or
   ``user_annotation`` (never a ``ProfilerStep#N``) holding, on its thread, the runtime call that
   launched the kernel (the ``cuda_runtime``/``cuda_driver`` event of the same CUPTI correlation id,
   which Kineto's ``ac2g`` flow draws), :func:`comm_op_launches`. A kernel launched by an op inside
   a communication op (``aten::copy_`` inside ``c10d::allgather_``) is the inner op's: compute;
2. Kineto wrote a ``Collective name`` arg on it (newer torch does on NCCL kernels);
3. its name is of a known communication library, one of :data:`COMM_KERNEL_FAMILIES` (NCCL and
   RCCL, ``ncclKernel_*``/``ncclDevKernel_*``; DeepEP, ``deep_ep::``/``dpsk::ep::``; NVSHMEM; the
   custom all-reduces of vLLM, PyTorch, TensorRT-LLM, ...): what a kernel launched outside torch's
   communication ops (DeepEP's dispatch and combine, called from Python) is recognised by.

Every other kernel is compute. The list is here, once; the reading code marks ``is_comm`` with
:func:`comm_op_launches` and :data:`COMM_KERNEL_RE`, and the analysis types each kernel's collective
with :func:`family_of` (:func:`traceprobe.analysis.job.comm_types.collective_type`).

Each family: a name, a pattern searched in the kernel name (any case), the
collective its kernels perform (``None``: read from the name, as NCCL's
``ncclDevKernel_AllReduce_Sum_f32_RING_LL``), and where the names come from.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import NamedTuple

import numpy as np
import pandas as pd

from ..keyed import innermost
from .columns import copy_parts, is_step_name


class CommFamily(NamedTuple):
    """One family of communication kernels (module doc)."""

    name: str
    pattern: str
    collective: str | None
    source: str


COMM_KERNEL_FAMILIES: tuple[CommFamily, ...] = (
    CommFamily("NCCL/RCCL", r"nccl|rccl|msccl", None,
               "NCCL's and RCCL's kernels (ncclDevKernel_*, ncclKernel_*; RCCL keeps NCCL's names), MSCCL's; "
               "HTA's convention"),
    CommFamily("custom all-reduce (vLLM, SGLang, aiter)", r"cross_device_reduce_[12]stage", "allreduce",
               "vLLM csrc/custom_all_reduce.cuh (vllm::cross_device_reduce_1stage/2stage), copied by SGLang's sgl-kernel "
               "and AMD's aiter"),
    CommFamily("quick all-reduce (ROCm)", r"allreduce_prototype_(one|two)shot", "allreduce",
               "vLLM csrc/quickreduce (quickreduce::allreduce_prototype_twoshot), also in aiter and SGLang"),
    CommFamily("symmetric-memory all-reduce (PyTorch)", r"(one|two)_shot_all_reduce", "allreduce",
               "torch/csrc/distributed/c10d/symm_mem/CUDASymmetricMemoryOps.cu (one_shot_all_reduce_kernel, "
               "two_shot_all_reduce_kernel) and its Triton kernels"),
    CommFamily("multimem (NVLS) collectives (PyTorch)", r"multimem_\w*(all_reduce|all_gather|reduce)", None,
               "CUDASymmetricMemoryOps.cu: multimem_all_reduce_kernel, multimem_one_shot_all_reduce, "
               "multimem_all_gather_kernel, multimem_one_shot_reduce_kernel (NVLink SHARP multicast)"),
    CommFamily("TensorRT-LLM / FlashInfer all-reduce", r"(one|two)ShotAllReduceKernel|allreduce_fusion_kernel", "allreduce",
               "TensorRT-LLM customAllReduceKernels.cu (oneShotAllReduceKernel, twoShotAllReduceKernel) and "
               "allReduceFusionKernels.cu (allreduce_fusion_kernel_oneshot_lamport, _twoshot_sync), copied by FlashInfer"),
    CommFamily("DeepEP all-to-all", r"\bdeep_ep\b|\bdpsk::ep::", "alltoall",
               "DeepEP (deep_ep::intranode/internode/internode_ll dispatch and combine, and their notify and layout kernels; "
               "DeepSeek-V3's builds name them dpsk::ep::internode::dispatch/combine): MoE expert-parallel all-to-all"),
    CommFamily("NVSHMEM", r"nvshmem", None,
               "NVSHMEM's kernels (nvshmemi_*, nvshmemx_*), which the all-to-all libraries built on it run (DeepEP's "
               "internode kernels, pplx-kernels)"),
)
"""The communication kernel families (module doc), in the order they are tried."""

COMM_KERNEL_RE = re.compile("|".join(f"(?:{f.pattern})" for f in COMM_KERNEL_FAMILIES), re.IGNORECASE)
"""Any family's pattern: a kernel name it finds is a communication kernel's."""

_FAMILY_RES = tuple(re.compile(f.pattern, re.IGNORECASE) for f in COMM_KERNEL_FAMILIES)


def family_of(name: str) -> CommFamily | None:
    """The first family whose pattern is found in the kernel ``name``; None for a compute kernel's name."""
    return next((f for f, r in zip(COMM_KERNEL_FAMILIES, _FAMILY_RES) if r.search(name)), None)


@lru_cache(maxsize=1 << 16)
def device_name_facts(name: str) -> tuple[tuple[str | None, str | None, str | None], bool]:
    """A device event name's copy parts (:func:`.columns.copy_parts`) and whether :data:`COMM_KERNEL_RE` finds it:
    searched once per distinct name in a process (the ranks of a job, read by one worker, share their names)."""
    return copy_parts(name), COMM_KERNEL_RE.search(name) is not None


COMM_HOST_OP_RE = re.compile(r"^(?:record_param_comms$|(?:nccl|rccl):\w|c10d::\w)")
"""Names of the host ops that launch communication (rule 1 of the module doc): torch's ``record_param_comms``
(around every ProcessGroup collective of torch 2.x), the ``nccl:*`` (``nccl:all_reduce``, ``nccl:all_to_all``) and
``rccl:*`` ranges of ProcessGroupNCCL, and the ``c10d::*`` dispatcher ops (``c10d::allreduce_``, ``c10d::alltoall_base_``)."""

_HOST_OPS = ("cpu_op", "user_annotation")
_RUNTIME = ("cuda_runtime", "cuda_driver")


def comm_op_launches(device: pd.DataFrame, host: pd.DataFrame) -> np.ndarray:
    """Which kernels a communication op launched (rule 1 of the module doc).

    Args:
        device: ``Trace.device_events`` (``kind``, ``correlation`` read).
        host: ``Trace.host_events`` (``pid``, ``tid``, ``cat``, ``name``, ``start_ns``, ``end_ns``, ``correlation``).

    Returns:
        bool array, one per row of ``device``: a ``kernel`` whose launching call (the first ``cuda_runtime`` or
        ``cuda_driver`` event of its correlation id) lies, on its thread, inside a host op whose innermost one is named
        by :data:`COMM_HOST_OP_RE`. Ops nest by their [start, end) intervals (Kineto writes an op inside its
        caller); where they do not nest cleanly around a launch, it has no launching op (False). All False where the
        trace holds no communication op, no launch call or no kernel.
    """
    out = np.zeros(len(device), dtype=bool)
    if device.empty or host.empty:
        return out
    name = host["name"]
    comm = _per_name(name, lambda n: COMM_HOST_OP_RE.match(n) is not None)
    start, end = host["start_ns"].to_numpy(np.int64), host["end_ns"].to_numpy(np.int64)
    ops = _per_name(host["cat"], _HOST_OPS.__contains__) & ~_per_name(name, is_step_name) & (end > start)  # (a step is no op)
    if not (ops & comm).any():
        return out
    is_rt = _per_name(host["cat"], _RUNTIME.__contains__)
    corr = host["correlation"].to_numpy(np.int64)
    rt = np.flatnonzero(is_rt & (corr >= 0))
    kernels = np.flatnonzero((device["kind"] == "kernel").to_numpy(bool) & (device["correlation"].to_numpy(np.int64) >= 0))
    if rt.size == 0 or kernels.size == 0:
        return out
    ids, first = np.unique(corr[rt], return_index=True)  # (rows by start: the earliest call of each id)
    query = device["correlation"].to_numpy(np.int64)[kernels]
    pos = np.minimum(np.searchsorted(ids, query), ids.size - 1)
    hit = ids[pos] == query
    kernels, call = kernels[hit], rt[first[pos[hit]]]
    thread = _thread_codes(host)
    rows = np.flatnonzero(ops)
    held = innermost(thread[rows], start[rows], end[rows], thread[call], start[call])  # (every thread in one sort)
    inner = np.where(held >= 0, rows[np.maximum(held, 0)], -1)
    out[kernels[inner >= 0]] = comm[inner[inner >= 0]]
    return out


def _thread_codes(host: pd.DataFrame) -> np.ndarray:
    """A code (int64) per row of ``host`` for its host thread, (pid, tid) compared as strings (as
    :func:`traceprobe.analysis.device.busy.host_thread_codes`)."""
    pid, tid = host["pid"], host["tid"]
    if isinstance(pid.dtype, pd.CategoricalDtype) and isinstance(tid.dtype, pd.CategoricalDtype):
        pc, tc = pid.cat.codes.to_numpy(np.int64), tid.cat.codes.to_numpy(np.int64)
        if pc.min(initial=0) >= 0 and tc.min(initial=0) >= 0 and all(
                pd.api.types.is_string_dtype(c) for c in (pid.cat.categories, tid.cat.categories)):
            return pc * len(tid.cat.categories) + tc  # (distinct categories are distinct strings)
    return pd.MultiIndex.from_arrays([pid.astype(str), tid.astype(str)]).factorize()[0].astype(np.int64)


def _per_name(values: pd.Series, fn: Callable[[str], bool]) -> np.ndarray:
    """``fn(str(v))`` per row (bool), once per distinct value (a categorical column's categories); False where missing."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        lut = np.array([*(bool(fn(str(c))) for c in values.cat.categories), False], dtype=bool)
        return lut[values.cat.codes.to_numpy()]
    codes, uniq = pd.factorize(values.astype(str))
    return np.array([*(bool(fn(str(u))) for u in uniq), False], dtype=bool)[codes]

