"""Registry of the experiments ``traceprobe record`` can run, by name."""

from __future__ import annotations

from .base import Context, Skip, Variant, Workload
from .seeds import COMPUTE_COPY, CPU_GPU, MULTI_GPU

WORKLOADS: dict[str, Workload] = {w.name: w for w in (MULTI_GPU, CPU_GPU, COMPUTE_COPY)}
"""Workload name -> :class:`Workload`, in the order ``record`` runs them."""

__all__ = ["WORKLOADS", "Context", "Skip", "Variant", "Workload"]
