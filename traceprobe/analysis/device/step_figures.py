"""Per-step figures, every step at once.

The steps table (:func:`.steps.device_steps`) carries four figures per step, each
with the definition quoted where the trace-wide figure is computed, applied to
the device intervals inside the step's GPU interval, cut at its edges, whichever
step launched them (:mod:`.steps`):

- ``device_concurrency``: cross-device concurrency
  (:func:`.concurrency.device_concurrency`);
- ``copy_overlap``: copy/compute overlap of all memcpys,
  Σ_devices overlapped / Σ_devices copy time (the ``all`` rows of
  :func:`.overlap.copy_overlap`);
- ``comm_overlap``: communication/compute overlap,
  Σ_devices overlapped / Σ_devices communication time (:func:`.overlap.comm_overlap`);
- ``stream_concurrency``: stream concurrency, Σ_devices time two or more streams
  are busy / Σ_devices busy time (:func:`.concurrency.stream_concurrency`).

Each is NaN for a step without the work it divides by. Rather than running those
functions once per step on a copy of the trace clipped to the step's GPU
interval (:func:`.steps.clip_trace`), the intervals are grouped by
(step, device) or (step, device, stream), merged with
:func:`traceprobe.intervals.grouped_union` and measured with
:func:`traceprobe.intervals.grouped_coverage`: a few numpy passes for every step
together. ``tests/test_steps.py`` checks the result against the per-step
functions.
"""

from __future__ import annotations

import numpy as np

from ... import intervals as iv
from ...reading import Trace
from ..memo import device_column
from .busy import comm_mask, compute_mask, copy_mask

STEP_FIGURES = ("device_concurrency", "copy_overlap", "comm_overlap", "stream_concurrency")
"""The figure columns of the steps table, in order."""


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """``num / den`` per step as float64, NaN where ``den`` is not positive (as :func:`.busy.fraction`)."""
    out = np.full(den.size, np.nan)
    ok = den > 0
    out[ok] = num[ok] / den[ok]
    return out


def _union_lengths(keys: np.ndarray, s: np.ndarray, e: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Union per key, and its length per key (int64, ``size`` of them)."""
    k, us, ue = iv.grouped_union(keys, s, e)
    total = np.zeros(size, dtype=np.int64)
    np.add.at(total, k, ue - us)
    return k, us, ue, total


def step_figures(trace: Trace, rows: np.ndarray, step: np.ndarray, s: np.ndarray, e: np.ndarray, n_steps: int) -> dict[str, np.ndarray]:
    """The :data:`STEP_FIGURES` of every step (module doc).

    Args:
        trace: the trace whose ``device_events`` ``rows`` indexes.
        rows: int64 row of ``device_events`` of each interval.
        step: int64 step index of each interval (0..n_steps-1).
        s, e: int64 ns, each interval's part inside its step's GPU interval
            (one device event may give several, one per step it crosses).
        n_steps: number of steps.

    Returns:
        ``{figure: float64 array of n_steps}``.
    """
    step = step.astype(np.int64)
    _, dcode = np.unique(device_column(trace, "device")[rows], return_inverse=True)
    _, scode = np.unique(device_column(trace, "stream")[rows], return_inverse=True)
    nd, ns = int(dcode.max(initial=-1)) + 1, int(scode.max(initial=-1)) + 1
    compute, comm_kernel, copy = compute_mask(trace)[rows], comm_mask(trace)[rows], copy_mask(trace)[rows]
    cell = step * nd + dcode.astype(np.int64)  # (step, device)
    cells = n_steps * nd

    def per_step(per_cell: np.ndarray) -> np.ndarray:
        return per_cell.reshape(n_steps, nd).sum(axis=1) if nd else np.zeros(n_steps, dtype=np.int64)

    # cross-device: the device unions of each step, two or more at once over at least one
    k, us, ue, _ = _union_lengths(cell, s, e, cells)
    any_busy = iv.grouped_coverage(k // max(nd, 1), us, ue, 1, n_steps)
    two = iv.grouped_coverage(k // max(nd, 1), us, ue, 2, n_steps)

    # copy/compute and comm/compute: the part of each (step, device)'s copy or comm union under its compute union
    kp, ps, pe, _ = _union_lengths(cell[compute], s[compute], e[compute], cells)
    out = {"device_concurrency": _ratio(two, any_busy)}
    for name, m in (("copy_overlap", copy), ("comm_overlap", comm_kernel)):
        kc, cs, ce, busy = _union_lengths(cell[m], s[m], e[m], cells)
        under = iv.grouped_coverage(np.concatenate([kc, kp]), np.concatenate([cs, ps]), np.concatenate([ce, pe]), 2, cells)
        out[name] = _ratio(per_step(under), per_step(busy))

    # streams: the stream unions of each (step, device), two or more at once over at least one
    ks, ss, se, _ = _union_lengths(cell * ns + scode.astype(np.int64), s, e, cells * ns)
    busy = iv.grouped_coverage(ks // max(ns, 1), ss, se, 1, cells)
    multi = iv.grouped_coverage(ks // max(ns, 1), ss, se, 2, cells)
    out["stream_concurrency"] = _ratio(per_step(multi), per_step(busy))
    return {f: out[f] for f in STEP_FIGURES}
