"""CI gates: which reports fall short of a required overlap or concurrency, or exceed a limit.

Every gate is judged per device of every trace, so per rank in a distributed run
(one trace per rank): a run fails when any of its ranks does.
"""

from __future__ import annotations

from .busy import fraction
from .per_trace import OverlapReport


def _where(r: OverlapReport, device: int | None = None) -> str:
    rank = f" rank {r.rank}" if r.rank is not None else ""
    dev = f" {r.backend}:{device}" if device is not None else ""
    return f"{r.path}:{rank}{dev}"


def shortfalls(
    reports: list[OverlapReport],
    min_copy_overlap: float | None = None,
    min_device_concurrency: float | None = None,
    max_exposed_comm: float | None = None,
    max_idle: float | None = None,
) -> list[str]:
    """One line per trace, device and figure past its threshold (empty: every gate passed).

    Args:
        min_copy_overlap: least copy/compute overlap (the ``all`` row, per device).
        min_device_concurrency: least cross-device concurrency, for traces with two
            or more devices.
        max_exposed_comm: most exposed communication per device, as a fraction of
            the window (``exposed_comm_ns / window_ns`` of :func:`.breakdown.gpu_breakdown`).
        max_idle: most idle time per device, as a fraction of the window
            (``idle_ns / window_ns``).
    """
    out = []
    for r in reports:
        if min_copy_overlap is not None and not r.copy_overlap.empty:
            for row in r.copy_overlap[r.copy_overlap["direction"] == "all"].itertuples():
                if row.fraction < min_copy_overlap:
                    out.append(f"{_where(r, int(row.device))} copy/compute overlap {row.fraction:.1%} < {min_copy_overlap:.1%}")
        d = r.devices
        if min_device_concurrency is not None and d.device_count >= 2 and d.concurrency < min_device_concurrency:
            out.append(f"{_where(r)} cross-device concurrency {d.concurrency:.1%} < {min_device_concurrency:.1%}")
        if max_exposed_comm is None and max_idle is None or r.breakdown.empty:
            continue
        for b in r.breakdown.to_dict(orient="records"):
            for limit, col, label in ((max_exposed_comm, "exposed_comm_ns", "exposed communication"), (max_idle, "idle_ns", "idle time")):
                f = fraction(int(b[col]), int(b["window_ns"]))
                if limit is not None and f > limit:
                    out.append(f"{_where(r, int(b['device']))} {label} {f:.1%} of the window > {limit:.1%}")
    return out
