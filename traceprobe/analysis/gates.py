"""CI gates: which reports fall short of a required overlap or concurrency."""

from __future__ import annotations

from .report import OverlapReport


def shortfalls(
    reports: list[OverlapReport], min_copy_overlap: float | None = None, min_device_concurrency: float | None = None
) -> list[str]:
    """One line per trace and figure below its threshold (empty: every gate passed).

    Args:
        min_copy_overlap: least copy/compute overlap (the ``all`` row, per device).
        min_device_concurrency: least cross-device concurrency, for traces with two
            or more devices.
    """
    out = []
    for r in reports:
        if min_copy_overlap is not None and not r.copy_overlap.empty:
            for row in r.copy_overlap[r.copy_overlap["direction"] == "all"].itertuples():
                if row.fraction < min_copy_overlap:
                    out.append(f"{r.path}: cuda:{row.device} copy/compute overlap {row.fraction:.1%} < {min_copy_overlap:.1%}")
        d = r.devices
        if min_device_concurrency is not None and d.device_count >= 2 and d.concurrency < min_device_concurrency:
            out.append(f"{r.path}: cross-device concurrency {d.concurrency:.1%} < {min_device_concurrency:.1%}")
    return out
