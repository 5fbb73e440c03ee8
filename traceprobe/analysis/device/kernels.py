"""Top kernels and launch queue time per device (HolisticTraceAnalysis-style tables).

Definitions (quoted by docs/measures.md):

- *kernel table* of device d: its device events grouped by ``kind`` and ``name``:
  ``count``, ``total_ns`` (sum of durations, overlaps counted twice, as HTA's
  kernel breakdown does), ``mean_ns``, ``max_ns``, and ``share`` = total_ns / the
  summed durations of every device event of d.
- *queue time* (launch-to-start delay) of a device event: its start minus the end
  of the host call that launched it (the ``cuda_runtime``/``cuda_driver`` event
  with its correlation id; HTA's ``launch_delay``). Events with no launch in the
  trace are left out. Summarised per device and kind: ``launched`` (count),
  ``mean_ns``, ``p50_ns``, ``p95_ns``, ``max_ns``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ... import intervals as iv
from ...reading import Trace
from ..host.launch_links import launch_rows
from ..memo import device_column, empty_frame, host_column

KERNEL_COLUMNS = ["device", "kind", "name", "count", "total_ns", "mean_ns", "max_ns", "share"]
QUEUE_COLUMNS = ["device", "kind", "launched", "mean_ns", "p50_ns", "p95_ns", "max_ns"]


def _empty(cols: list[str], text: tuple[str, ...]) -> pd.DataFrame:
    return empty_frame({c: object if c in text else (np.float64 if c == "share" else np.int64) for c in cols})


def kernel_table(trace: Trace) -> pd.DataFrame:
    """Device time per kernel name (module docstring).

    Returns:
        DataFrame with ``device`` (int64), ``kind`` (str: kernel, memcpy,
        memset), ``name`` (str), ``count``, ``total_ns``, ``mean_ns``, ``max_ns``
        (int64; mean rounded down), ``share`` (float64); sorted by device, then
        total time, largest first.
    """
    ev = trace.device_events
    if ev.empty:
        return _empty(KERNEL_COLUMNS, ("kind", "name"))
    dur = device_column(trace, "end_ns") - device_column(trace, "start_ns")
    # one group per (device, kind, name), numbered by first appearance (as groupby(sort=False))
    codes = [pd.factorize(ev[c], use_na_sentinel=False) for c in ("device", "kind", "name")]
    key = np.zeros(len(ev), dtype=np.int64)
    for c, uniq in codes:
        key = key * len(uniq) + c
    group = pd.factorize(key)[0]
    first = np.unique(group, return_index=True)[1]
    n = first.size
    count = np.bincount(group, minlength=n).astype(np.int64)
    total = np.zeros(n, dtype=np.int64)
    np.add.at(total, group, dur)
    longest = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(longest, group, dur)
    device = np.asarray(codes[0][1], dtype=np.int64)[codes[0][0][first]]
    name = np.asarray(codes[2][1].astype(str), dtype=object)[codes[2][0][first]]
    dcode = codes[0][0][first]
    dev_total = np.zeros(len(codes[0][1]), dtype=np.int64)
    np.add.at(dev_total, dcode, total)
    per_row = dev_total[dcode].astype(np.float64)
    share = np.where(per_row > 0, total.astype(np.float64) / np.maximum(per_row, 1), np.nan)
    # by device, then total time (largest first), then name; stable (ties keep first appearance)
    order = np.lexsort((np.unique(name, return_inverse=True)[1].ravel(), -total, device))
    cols = {
        "device": device,
        "kind": np.asarray(codes[1][1].astype(str), dtype=object)[codes[1][0][first]],
        "name": name,
        "count": count, "total_ns": total, "mean_ns": total // count, "max_ns": longest, "share": share,
    }
    return pd.DataFrame({c: cols[c][order] for c in KERNEL_COLUMNS})


def queue_times(trace: Trace) -> pd.DataFrame:
    """Launch-to-start delay per device and kind (module docstring).

    Returns:
        DataFrame with ``device`` (int64), ``kind`` (str), ``launched`` (int64),
        ``mean_ns``, ``p50_ns``, ``p95_ns``, ``max_ns`` (int64; percentiles by the
        nearest-rank rule, ``numpy.percentile(method="inverted_cdf")``).
    """
    ev = trace.device_events
    rows = launch_rows(trace)
    ok = rows >= 0
    if not ok.any():
        return _empty(QUEUE_COLUMNS, ("kind",))
    launch_end = host_column(trace, "end_ns")[rows[ok]]
    delay = device_column(trace, "start_ns")[ok] - launch_end
    dev = device_column(trace, "device")[ok]
    codes, labels = pd.factorize(ev["kind"], use_na_sentinel=False)  # kind codes: a label per distinct kind
    kind, names = codes[ok], [str(v) for v in labels]
    out = []
    for d in iv.distinct(dev).tolist():
        on = dev == d
        for c in sorted(np.unique(kind[on]).tolist(), key=lambda c: names[c]):
            k = names[c]
            x = delay[on & (kind == c)]
            out.append({"device": d, "kind": k, "launched": int(x.size), "mean_ns": int(x.sum() // x.size),
                        "p50_ns": int(np.percentile(x, 50, method="inverted_cdf")),
                        "p95_ns": int(np.percentile(x, 95, method="inverted_cdf")), "max_ns": int(x.max())})
    return pd.DataFrame(out, columns=QUEUE_COLUMNS)
