"""Registry of the experiments ``traceprobe record`` can run, by name."""

from __future__ import annotations

from .base import Context, Skip, Variant, Workload
from .branches import BRANCHES
from .compute_copy import COMPUTE_COPY
from .cpu_gpu import CPU_GPU
from .data_parallel import DATA_PARALLEL
from .model_parallel import MODEL_PARALLEL
from .multi_gpu import MULTI_GPU
from .small_ops import SMALL_OPS
from .streams import STREAMS
from .tile_parallel import TILE_PARALLEL

WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (MULTI_GPU, CPU_GPU, COMPUTE_COPY, STREAMS, SMALL_OPS, BRANCHES, DATA_PARALLEL, MODEL_PARALLEL, TILE_PARALLEL)
}
"""Workload name -> :class:`Workload`, in the order ``record`` runs them."""

__all__ = ["WORKLOADS", "Context", "Skip", "Variant", "Workload"]
