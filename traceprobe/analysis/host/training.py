"""Whether a trace shows training, by evidence in its host events.

The report's hints speak of DDP, gradient buckets, optimizers or FSDP only on a
trace that shows training; a trace without such evidence (inference, serving) gets
serving words. The evidence is a host event (``cpu_op`` or ``user_annotation``)
whose name is one of:

- a backward op: autograd's ``autograd::engine::evaluate_function: ...``, an
  autograd node (``MulBackward0``, ``AddmmBackward0``: a name containing
  ``Backward``), an ATen backward kernel (``aten::convolution_backward``: a name
  ending in ``_backward``), or Kineto's ``## backward ##`` annotation;
- an optimizer step: ``Optimizer.step#SGD.step``, ``Optimizer.zero_grad#...``
  (the annotations ``torch.optim`` records);
- a data-parallel wrapper's annotation: ``DistributedDataParallel.forward``,
  ``FullyShardedDataParallel.*``, ``FSDP::*``.

Names are matched once per distinct name, not per event.

:func:`data_parallel_wrapper` reads, the same way, whether the step runs under ``nn.DataParallel``: its replicas are
made by the autograd functions ``Broadcast`` (forward) and ``ReduceAddCoalesced`` (backward), its outputs joined by
``Gather`` (``torch/nn/parallel/_functions.py``), each recorded as a host op of that exact name.
"""

from __future__ import annotations

import re

from ...reading import Trace
from ..memo import per_trace

TRAINING_RE = re.compile(
    r"^autograd::engine::evaluate_function|Backward|_backward$|^## backward ##|^Optimizer\.(step|zero_grad)#"
    r"|DistributedDataParallel|FullyShardedDataParallel|^FSDP::"
)
"""Host event names that show training (module doc)."""


@per_trace
def training_evidence(trace: Trace) -> str:
    """The first host event name, in sorted order, that shows training (module doc); ``""`` when none does.

    A non-empty result means the trace trains; the name says why.
    """
    return next((n for n in sorted(host_names(trace)) if TRAINING_RE.search(n)), "")


def host_names(trace: Trace) -> frozenset[str]:
    """The distinct names of the trace's host events (its categories where the column is categorical), each once:
    what :func:`training_evidence`, :func:`data_parallel_wrapper` and :func:`distributed_data_parallel` look in (each
    kept once per trace by its own memo)."""
    host = trace.host_events
    if host.empty:
        return frozenset()
    name = host["name"]
    return frozenset(str(v) for v in (name.cat.categories if hasattr(name, "cat") else name.tolist()))


DATA_PARALLEL_OPS = ("Broadcast", "Gather")
"""Host op names that, together, show ``nn.DataParallel`` (module doc); ``ReduceAddCoalesced`` stands for ``Broadcast``
in a trace of the backward alone."""


@per_trace
def data_parallel_wrapper(trace: Trace) -> str:
    """``"nn.DataParallel"`` where the trace's host ops show it (:data:`DATA_PARALLEL_OPS`, module doc), else ``""``.

    One process drives every GPU from Python threads there, so the host launches for all of them and is the usual
    bound; PyTorch's docs recommend ``DistributedDataParallel`` (a process per GPU) in its place."""
    labels = host_names(trace)
    shown = "Gather" in labels and ("Broadcast" in labels or "ReduceAddCoalesced" in labels)
    return "nn.DataParallel" if shown else ""


DDP_OP = "DistributedDataParallel.forward"
"""The annotation ``DistributedDataParallel`` records around each forward (its ``record_function``)."""


@per_trace
def distributed_data_parallel(trace: Trace) -> bool:
    """Whether the trace's host events show ``DistributedDataParallel`` (:data:`DDP_OP`): its gradients are bucketed
    already, each bucket all-reduced from backward's hooks as it fills (torch's ``DistributedDataParallel`` notes)."""
    return DDP_OP in host_names(trace)
