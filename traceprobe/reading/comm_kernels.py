"""Which device kernels are communication: the documented list of kernel families.

A ``kernel`` is communication (``Trace.device_events.is_comm``) when its name is one
of these families, or when Kineto wrote a ``Collective name`` arg on it (newer torch
does on NCCL kernels). Every other kernel is compute. The list is here, once; the
reading code marks ``is_comm`` with :data:`COMM_KERNEL_RE` and the analysis types
each kernel's collective with :func:`family_of` (:func:`traceprobe.analysis.job.comm_types.collective_type`).

Each family: a name, a pattern searched in the kernel name (any case), the
collective its kernels perform (``None``: read from the name, as NCCL's
``ncclDevKernel_AllReduce_Sum_f32_RING_LL``), and where the names come from.
"""

from __future__ import annotations

import re
from typing import NamedTuple


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
    CommFamily("DeepEP all-to-all", r"deep_ep::\w+::(dispatch|combine)", "alltoall",
               "DeepEP (deep_ep::intranode/internode/internode_ll dispatch and combine): MoE expert-parallel all-to-all"),
)
"""The communication kernel families (module doc), in the order they are tried."""

COMM_KERNEL_RE = re.compile("|".join(f"(?:{f.pattern})" for f in COMM_KERNEL_FAMILIES), re.IGNORECASE)
"""Any family's pattern: a kernel name it finds is a communication kernel's."""

_FAMILY_RES = tuple(re.compile(f.pattern, re.IGNORECASE) for f in COMM_KERNEL_FAMILIES)


def family_of(name: str) -> CommFamily | None:
    """The first family whose pattern is found in the kernel ``name``; None for a compute kernel's name."""
    return next((f for f, r in zip(COMM_KERNEL_FAMILIES, _FAMILY_RES) if r.search(name)), None)
