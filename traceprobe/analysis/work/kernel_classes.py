"""The class of each device event: GEMM, attention, convolution, elementwise, reduction/norm, copy, communication, other.

Where the trace recorded shapes, a kernel takes its op's class (:func:`.op_work.op_of_event`, :func:`.op_models.op_class`):
an ``aten::convolution``'s memsets and layout transposes are convolution time. Every other device event is classed by
what the trace says of it, in this order (:data:`.op_models.NAME_RULES`, searched in the kernel's name, case ignored):

1. communication: ``Trace.device_events.is_comm`` (:mod:`traceprobe.reading.comm_kernels`);
2. copy: a memcpy or memset event, or a kernel named ``memcpy``, ``memset``, ``CatArrayBatchedCopy``;
3. attention: ``flash``, ``fmha``, ``attention``, ``attn``, ``mha_``, ``sdpa``;
4. convolution: ``conv``, ``fprop``, ``dgrad``, ``wgrad``, ``winograd``, ``implicit_gemm``, ``cudnn``;
5. GEMM: ``gemm``, ``cutlass``, ``cublas``, ``xmma``, ``wgmma``, ``nvjet``, ``matmul``, ``Cijk_``, ``rocblas``,
   ``hipblaslt``, ``splitKreduce``, Triton templates (``triton_tem``);
6. reduction/norm: ``reduce``, ``norm``, ``softmax``, ``welford``, ``argmax``, ``topk``, ``sort``, ``scan``, Triton
   reductions (``triton_red``, ``triton_per``);
7. elementwise: ``elementwise``, ``vectorized``, ``unrolled``, ``Functor``, ``fill``, ``where``, ``index``,
   ``gather``, ``scatter``, Triton pointwise kernels (``triton_poi``);
8. other: the rest.
"""

from __future__ import annotations

import numpy as np

from ...reading import Trace
from ..device.busy import is_kind, per_value
from ..memo import device_column, per_trace
from .op_models import class_of_name, op_class
from .op_owners import op_of_event

CLASSES = ("gemm", "attention", "convolution", "elementwise", "reduction", "copy", "communication", "other")
"""The kernel classes, in the order tables list them."""

@per_trace
def kernel_classes(trace: Trace) -> np.ndarray:
    """The class (:data:`CLASSES`, as int8 indices) of each row of ``trace.device_events`` (module docstring)."""
    ev = trace.device_events
    if ev.empty:
        return np.zeros(0, np.int8)
    code = {c: i for i, c in enumerate(CLASSES)}
    by_name = per_value(ev["name"], lambda n: code[class_of_name(str(n))], code["other"], np.int8)
    not_kernel = ~is_kind(trace, "kernel")
    out = np.where(not_kernel, code["copy"], by_name).astype(np.int8)
    owner = op_of_event(trace)
    if (owner >= 0).any():
        names = trace.host_events["name"]
        op_code = per_value(names, lambda n: code.get(op_class(str(n)), -1), -1, np.int64)
        own = np.where(owner >= 0, op_code[np.maximum(owner, 0)], -1)
        out = np.where(own >= 0, own, out).astype(np.int8)
    out[device_column(trace, "is_comm").astype(bool)] = code["communication"]
    return out
