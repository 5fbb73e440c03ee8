"""What a sync's what-if names (:func:`.what_if.what_ifs`): the call or op holding most of its time, and what that says
the program did, so its finding can give the action that fits (pin the batches, keep a check on the device, size an
output, or drop a read)."""

from __future__ import annotations

import numpy as np

from .dependency_graph import HOST_CLASSES, RankGraph

CONDITION_OPS = frozenset({"aten::is_nonzero"})
"""Ops that read a device tensor for a Python condition (``bool(t)``: ``if``, ``while``, ``assert``, ``and``/``or``): a
sync whose program call (:func:`..host.host_classes.program_calls`) is one of them is a check made on the host."""

DATA_DEPENDENT_OPS = frozenset({"aten::nonzero", "aten::argwhere", "aten::masked_select", "aten::index", "aten::_unique2",
                                "aten::unique_dim", "aten::unique_consecutive", "aten::repeat_interleave", "aten::bincount"})
"""Ops whose output size depends on the data (boolean-mask indexing reaches ``aten::nonzero`` through ``aten::index``):
a sync whose program call is one of them waits for the device to size the output."""


def sync_kind(top: str) -> str:
    """What a sync's top (:func:`sync_top`) says the program did: ``"htod"`` (copies to the device from pageable
    memory, :data:`PAGEABLE_HTOD`), ``"condition"`` (:data:`CONDITION_OPS`), ``"data_dependent"``
    (:data:`DATA_DEPENDENT_OPS`), else ``""`` (``.item()``, ``.cpu()``, an explicit synchronize)."""
    return ("htod" if top == PAGEABLE_HTOD else "condition" if top in CONDITION_OPS else
            "data_dependent" if top in DATA_DEPENDENT_OPS else "")


PAGEABLE_HTOD = "Memcpy HtoD (pageable)"
"""The top of a ``sync`` what-if whose waits are mostly for copies to the device from pageable memory (a batch moved
with ``.to(device)`` from unpinned memory: the call waits for the copy, queued behind the stream's work)."""


def sync_top(g: RankGraph, wait: np.ndarray) -> str:
    """What holds most of a rank's sync time (``wait``: per anchor, its wait and its host time in sync calls, int64 ns):
    :data:`PAGEABLE_HTOD` where at least half of it waited for host-to-device copies from pageable memory (Kineto's
    memcpy kinds), else the sync call or op holding most of it."""
    tgt = np.maximum(g.target, 0)
    if g.target.size and g.pageable.size:
        htod = (g.target >= 0) & g.pageable[tgt] & np.array([g.names[c].startswith("Memcpy HtoD") for c in g.name[tgt]], bool)
        if 2 * int(wait[htod].sum()) >= int(wait.sum()) > 0:
            return PAGEABLE_HTOD
    return g.class_top[HOST_CLASSES.index("sync")] or "synchronizing call"
